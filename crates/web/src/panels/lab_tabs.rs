//! The lab: the tab bar, the bias state line, and the view of the chosen tab (`crate::views`), with
//! what the views share across tabs and models: the held-out text and the shipped results table
//! (fetched once), the trained model's perplexity curve, the LAA overlay of every model seen, and
//! the initial checkpoint the gate view compares with (ReGLA Fig. 4, loaded on demand).
//!
//! Compare mode (the bar above the tabs): model B, an index model or the page's model as trained,
//! loaded in the worker beside the page's model (as the initial checkpoint is: `ToWorker::LoadAux`)
//! and drawn by every view beside, over or minus A; the papers' comparisons are one-click presets.
//! Beside B, the gate tab loads B's initial checkpoint too (Fig. 4 for both models) and a preset
//! with a reference model loads it as a third model (TransNormer Fig. 2's softmax model).
//! Its state (B, on/off, preset) lives in the URL; a B the index does not list is named in a
//! warning and no comparison is shown.
//!
//! The panel stays mounted; while no model is ready it renders nothing, so every view unmounts and
//! recomputes for the next model. Bias edits from the kernel view go up to the root
//! (`on_edit`), which applies them through the host.

use std::collections::BTreeMap;
use std::rc::Rc;

use attnlab_core::catalog::ModelIndex;
use wasm_bindgen_futures::spawn_local;
use yew::prelude::*;

use crate::compare::{self, SideB};
use crate::host::{LabModel, LoadTicket, ModelRef};
use crate::lab::BiasEdit;
use crate::loader::{self, HELDOUT_URL};
use crate::protocol::{Aux, FromWorker, ToWorker};
use crate::share::Share;
use crate::url_state::Tab;
use crate::views::{
    Compare, CompareState, KernelView, LaaOverlay, LayerLaa, PplCurve, PplView, Shipped, SideModel,
    TraceKind, TraceViewComp,
};

/// Tab, button id, label.
const TABS: [(Tab, &str, &str); 5] = [
    (Tab::Kernels, "tab-kernels", "Kernels"),
    (Tab::Attention, "tab-attention", "Attention"),
    (Tab::Extrapolation, "tab-extrapolation", "Perplexity vs length"),
    (Tab::Laa, "tab-laa", "LAA"),
    (Tab::Gates, "tab-gates", "Gates"),
];

#[derive(Properties, PartialEq)]
pub struct LabProps {
    /// The loaded model; `None` while a model loads (the lab is empty then).
    pub model: Option<LabModel>,
    /// Index name of the model (its shipped curve is highlighted; the Fig. 4 "trained" side).
    pub name: AttrValue,
    /// Index name of the model's initial checkpoint, when the index lists one.
    pub initial: Option<AttrValue>,
    /// The latest load: loads of the initial checkpoint belong to it.
    pub load: LoadTicket,
    /// Text of the trace views (prompt + output of the last run).
    pub text: Rc<String>,
    pub on_edit: Callback<BiasEdit>,
    /// The models index (compare mode's choice of B and the presets' models).
    #[prop_or_default]
    pub index: Option<Rc<ModelIndex>>,
    /// Load this index model as the page's model (a preset's model A).
    #[prop_or_default]
    pub on_pick: Callback<String>,
}

pub enum LabMsg {
    Tab(Tab),
    Heldout(Result<String, String>),
    Shipped(Shipped),
    PplDone(ModelRef, PplCurve),
    Laa(String, Vec<LayerLaa>),
    /// A load beside trained model `of`: the initial checkpoint or model B.
    Aux(FromWorker),
    /// Compare mode on or off.
    CompareOn(bool),
    /// Model B chosen (a `b=` value).
    PickB(String),
    /// A paper's comparison (an id of `compare::PRESETS`).
    Preset(&'static str),
}

/// The untrained checkpoint of the current model, loaded for the gate view's comparison.
struct Initial {
    /// The trained model it belongs to.
    of: String,
    name: String,
    state: CompareState,
}

pub struct LabPanel {
    tab: Tab,
    /// Held-out text and where it came from.
    heldout: Option<(Rc<String>, String)>,
    /// The shipped models' perplexity table (`results.json`), fetched with the held-out text.
    shipped: Shipped,
    /// The trained model's perplexity curve, once measured.
    trained_ppl: Option<PplCurve>,
    laa_overlay: Rc<LaaOverlay>,
    /// The initial checkpoint of the current model, once the gate view asked for it.
    initial: Option<Initial>,
    /// Compare mode: model B as chosen, whether it is shown, and B as loaded for the current model.
    b_choice: Option<SideB>,
    compare_on: bool,
    b: Option<Initial>,
    /// B's initial checkpoint (the gate view's Fig. 4, as A's) and the shown preset's reference
    /// model (TransNormer Fig. 2's softmax model), loaded beside the page's model as B is.
    b_initial: Option<Initial>,
    reference: Option<Initial>,
    /// Why the last preset could not be set up.
    preset_error: Option<String>,
    /// The page's URL state (the tab shown).
    share: Option<Share>,
}

impl LabPanel {
    /// A model finished loading: fetch the held-out text and the results table (once), and the
    /// initial checkpoint if the gate view is open.
    fn model_ready(&mut self, ctx: &Context<Self>) {
        if self.heldout.is_none() {
            let link = ctx.link().clone();
            spawn_local(
                async move { link.send_message(LabMsg::Heldout(loader::fetch_text(HELDOUT_URL).await)) },
            );
            let link = ctx.link().clone();
            spawn_local(async move {
                let shipped = match loader::fetch_shipped().await {
                    Ok(curves) => Shipped::Ready(Rc::new(curves)),
                    Err(e) => Shipped::Missing(e.into()),
                };
                link.send_message(LabMsg::Shipped(shipped))
            });
        }
        self.maybe_load_initial(ctx);
        self.maybe_load_b(ctx);
        self.maybe_load_extras(ctx);
    }

    /// Load index model `name` beside the current trained model as `aux` (`of`: what it is shown
    /// with).
    fn load_aux(&self, ctx: &Context<Self>, aux: Aux, of: String, name: String) -> Option<Initial> {
        let trained = ctx.props().model.as_ref()?.trained.clone();
        let client = trained.client();
        client.on_aux(trained.id(), ctx.link().callback(LabMsg::Aux));
        client.send(&ToWorker::LoadAux { of: trained.id(), aux, name: name.clone() });
        Some(Initial { of, state: CompareState::Loading(format!("loading {name}…").into()), name })
    }

    /// With model B loaded: B's initial checkpoint on the gate tab (when the index lists one) and
    /// the shown preset's reference model (kept while they stay wanted, loaded once).
    fn maybe_load_extras(&mut self, ctx: &Context<Self>) {
        let props = ctx.props();
        let b = match (&self.b, &self.b_choice, self.compare_on) {
            (Some(_), Some(SideB::Model(name)), true) => Some(name.clone()),
            _ => None,
        };
        let initial = b.as_ref().filter(|_| self.tab == Tab::Gates).and_then(|b| {
            let init = props.index.as_ref()?.initial_of(b)?.name.clone();
            Some((b.clone(), init))
        });
        let preset = self.share.as_ref().and_then(|s| s.get().preset);
        let reference = preset.as_deref().and_then(compare::preset).and_then(|p| {
            let shown = b.as_deref() == Some(p.b) && props.name.as_str() == p.a;
            Some((p.a.to_string(), p.reference.filter(|_| shown)?.to_string()))
        });
        for (aux, want) in [(Aux::InitialB, initial), (Aux::Reference, reference)] {
            let slot = if aux == Aux::InitialB { &self.b_initial } else { &self.reference };
            if matches!((&want, slot), (Some((of, name)), Some(i)) if i.of == *of && i.name == *name) {
                continue;
            }
            let next = want.and_then(|(of, name)| self.load_aux(ctx, aux, of, name));
            if aux == Aux::InitialB {
                self.b_initial = next;
            } else {
                self.reference = next;
            }
        }
    }

    /// In compare mode, load model B beside the current model (once per model and choice); a B the
    /// index does not list is named once and compare mode goes off.
    fn maybe_load_b(&mut self, ctx: &Context<Self>) {
        let props = ctx.props();
        let (Some(model), Some(choice), true) = (&props.model, self.b_choice.clone(), self.compare_on) else {
            self.b = None;
            return;
        };
        if let Err(why) = choice.check(props.index.as_deref()) {
            self.b = None;
            self.b_choice = None;
            self.compare_on = false;
            if let Some(share) = &self.share {
                share.checked("b", Some(why.clone()));
                share.update(|s| (s.b, s.compare, s.preset) = (None, None, None));
            }
            self.preset_error = Some(why);
            return;
        }
        if let Some(share) = &self.share {
            share.checked("b", None);
        }
        let a = props.name.to_string();
        let label = choice.label(&a);
        if self.b.as_ref().is_some_and(|b| b.of == a && b.name == label) {
            return;
        }
        self.b = match &choice {
            SideB::Trained => {
                Some(Initial { of: a, name: label, state: CompareState::Ready(model.trained.as_side_b()) })
            }
            SideB::Model(name) => self.load_aux(ctx, Aux::B, a, name.clone()),
        };
    }

    /// Model B, ready.
    fn side_model(&self) -> Option<SideModel> {
        let b = self.b.as_ref()?;
        match &b.state {
            CompareState::Ready(m) => {
                Some(SideModel { a_name: b.of.clone().into(), name: b.name.clone().into(), model: m.clone() })
            }
            _ => None,
        }
    }

    /// Set up a paper's comparison: its models (loading A if another is shown), compare on, its tab.
    fn set_preset(&mut self, ctx: &Context<Self>, id: &str) {
        let Some(p) = compare::preset(id) else { return };
        let props = ctx.props();
        let missing: Vec<&str> = [p.a, p.b]
            .into_iter()
            .filter(|m| props.index.as_ref().is_some_and(|i| i.get(m).is_none()))
            .collect();
        let missing: Vec<&str> = missing
            .into_iter()
            .chain(p.reference.filter(|r| props.index.as_ref().is_some_and(|i| i.get(r).is_none())))
            .collect();
        if !missing.is_empty() {
            self.preset_error = Some(format!(
                "{} needs the model(s) {}, which this site's models index does not list",
                p.label,
                missing.join(", ")
            ));
            return;
        }
        self.preset_error = None;
        self.b_choice = Some(SideB::Model(p.b.to_string()));
        self.compare_on = true;
        self.tab = p.tab;
        if let Some(share) = &self.share {
            share.update(|s| s.set_preset(p));
        }
        if props.name.as_str() != p.a {
            props.on_pick.emit(p.a.to_string());
        } else {
            self.maybe_load_b(ctx);
            self.maybe_load_extras(ctx);
        }
    }

    /// In the gate view, load the current model's initial checkpoint (once per model) when the index
    /// lists one.
    fn maybe_load_initial(&mut self, ctx: &Context<Self>) {
        let props = ctx.props();
        if self.tab != Tab::Gates || props.model.is_none() {
            return;
        }
        let Some(init) = &props.initial else {
            return;
        };
        let model = props.name.to_string();
        if self.initial.as_ref().is_some_and(|i| i.of == model) {
            return;
        }
        self.initial = self.load_aux(ctx, Aux::Initial, model, init.to_string());
    }
}

impl Component for LabPanel {
    type Message = LabMsg;
    type Properties = LabProps;

    fn create(ctx: &Context<Self>) -> Self {
        let share = ctx.link().context::<Share>(Callback::noop()).map(|(share, _)| share);
        let url = share.as_ref().map(Share::get).unwrap_or_default();
        let mut lab = LabPanel {
            tab: url.tab.unwrap_or_default(),
            b_choice: url.b.clone(),
            compare_on: url.compare == Some(true),
            b: None,
            b_initial: None,
            reference: None,
            preset_error: None,
            share,
            heldout: None,
            shipped: Shipped::Loading,
            trained_ppl: None,
            laa_overlay: Rc::new(BTreeMap::new()),
            initial: None,
        };
        if ctx.props().model.is_some() {
            lab.model_ready(ctx);
        }
        lab
    }

    fn changed(&mut self, ctx: &Context<Self>, old: &Self::Properties) -> bool {
        let props = ctx.props();
        if props.load != old.load {
            // A new load started: what belonged to the previous model goes.
            self.initial = None;
            self.b = None;
            self.b_initial = None;
            self.reference = None;
            self.trained_ppl = None;
        }
        let trained = props.model.as_ref().map(|m| &m.trained);
        if trained != old.model.as_ref().map(|m| &m.trained) {
            self.trained_ppl = None;
            if trained.is_some() {
                self.model_ready(ctx);
            }
        }
        true
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            LabMsg::Tab(tab) => {
                self.tab = tab;
                if let Some(share) = &self.share {
                    share.update(|s| s.tab = Some(tab));
                }
                self.maybe_load_initial(ctx);
                self.maybe_load_extras(ctx);
            }
            LabMsg::Heldout(result) => {
                self.heldout = Some(match result {
                    Ok(text) if !text.trim().is_empty() => (Rc::new(text), HELDOUT_URL.to_string()),
                    // (No built-in sample: its 40 KB would not fit the bundle budget.)
                    Ok(_) | Err(_) => (
                        ctx.props().text.clone(),
                        format!("{HELDOUT_URL} is missing: the prompt and output instead"),
                    ),
                });
            }
            LabMsg::Shipped(shipped) => self.shipped = shipped,
            LabMsg::PplDone(engine, points) => {
                if ctx.props().model.as_ref().is_some_and(|m| m.trained == engine) {
                    self.trained_ppl = Some(points);
                }
            }
            LabMsg::Laa(name, layers) => {
                let mut overlay = (*self.laa_overlay).clone();
                overlay.insert(name, layers);
                self.laa_overlay = Rc::new(overlay);
                return false;
            }
            LabMsg::Aux(msg) => return self.on_aux(ctx, msg),
            LabMsg::CompareOn(on) => {
                self.compare_on = on;
                if let Some(share) = &self.share {
                    share.update(|s| s.compare = Some(on));
                }
                self.preset_error = None;
                self.maybe_load_b(ctx);
                self.maybe_load_extras(ctx);
            }
            LabMsg::PickB(code) => {
                self.preset_error = None;
                match SideB::parse(&code) {
                    Ok(b) => {
                        self.b_choice = Some(b.clone());
                        self.compare_on = true;
                        if let Some(share) = &self.share {
                            share.update(|s| (s.b, s.compare) = (Some(b), Some(true)));
                        }
                    }
                    Err(_) => {
                        self.b_choice = None;
                        if let Some(share) = &self.share {
                            share.update(|s| s.b = None);
                        }
                    }
                }
                self.maybe_load_b(ctx);
                self.maybe_load_extras(ctx);
            }
            LabMsg::Preset(id) => self.set_preset(ctx, id),
        }
        true
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let Some(model) = &ctx.props().model else {
            return html! {};
        };
        let link = ctx.link();
        let tabs = TABS.iter().map(|&(tab, id, label)| {
            html! {
                <button id={id} role="tab" aria-selected={(tab == self.tab).to_string()}
                    class={classes!("tab", (tab == self.tab).then_some("active"))}
                    onclick={link.callback(move |_| LabMsg::Tab(tab))}>{ label }</button>
            }
        });
        let edited = if model.edit.is_identity() { "as trained" } else { "bias edited by the sliders" };
        html! {
            <section class="lab">
                { self.view_compare_bar(ctx) }
                <div class="tabs" role="tablist">{ for tabs }</div>
                <p class="muted" id="bias-state">{ format!("model: {edited}") }</p>
                <p class="muted" id="lab-backend-note">
                    { "The attention, LAA and gate views trace in the model's worker: on WebGPU when \
                       generation runs there (texts up to 8,192 tokens; long maps \
                       are binned on the GPU and the heatmap's zoom fetches windows down to single \
                       tokens), else on the CPU \
                       (wasm) reference runtime (up to 512 tokens, exact maps). Kernel curves and the \
                       perplexity sweep run on the CPU. A bias edit is uploaded to the GPU at the next \
                       generation or trace." }
                </p>
                { self.view_tab(ctx, model) }
            </section>
        }
    }
}

impl LabPanel {
    /// A load beside the current trained model: progress or result of its initial checkpoint or
    /// model B (a load of another model or name is dropped).
    fn on_aux(&mut self, ctx: &Context<Self>, msg: FromWorker) -> bool {
        let trained = ctx.props().model.as_ref().map(|m| m.trained.clone());
        let Some(trained) = trained else { return false };
        let (of, aux, name) = match &msg {
            FromWorker::AuxProgress { of, aux, name, .. } | FromWorker::AuxLoaded { of, aux, name, .. } => {
                (*of, *aux, name.clone())
            }
            _ => return false,
        };
        let slot = match aux {
            Aux::Initial => self.initial.as_mut(),
            Aux::B => self.b.as_mut(),
            Aux::InitialB => self.b_initial.as_mut(),
            Aux::Reference => self.reference.as_mut(),
        };
        let Some(i) = slot.filter(|i| of == trained.id() && i.name == name) else { return false };
        match msg {
            FromWorker::AuxProgress { status, .. } => {
                if !matches!(i.state, CompareState::Loading(_)) {
                    return false;
                }
                i.state = CompareState::Loading(status.into());
            }
            FromWorker::AuxLoaded { result, .. } => {
                i.state = match result {
                    Ok(meta) => {
                        let m = ModelRef::new(trained.client(), meta);
                        CompareState::Ready(match aux {
                            Aux::B | Aux::InitialB => m.as_side_b(),
                            Aux::Reference => m.as_reference(),
                            Aux::Initial => m,
                        })
                    }
                    Err(e) => CompareState::Failed(format!("Could not load {}: {e}", i.name).into()),
                };
            }
            _ => return false,
        }
        true
    }

    /// Compare mode's bar: on/off, model B, the papers' comparisons and where B stands.
    fn view_compare_bar(&self, ctx: &Context<Self>) -> Html {
        let (props, link) = (ctx.props(), ctx.link());
        let code = self.b_choice.as_ref().map(|b| b.code().to_string()).unwrap_or_default();
        let state = match (&self.b, self.compare_on) {
            (_, false) => "off",
            (None, true) => "none",
            (Some(b), true) => match b.state {
                CompareState::Loading(_) => "loading",
                CompareState::Ready(_) => "ready",
                CompareState::Failed(_) => "failed",
            },
        };
        let status = match &self.b {
            Some(b) if self.compare_on => match &b.state {
                CompareState::Loading(s) => s.to_string(),
                CompareState::Ready(_) => {
                    format!("A {} (left, with the sliders) vs B {} (right, as trained)", b.of, b.name)
                }
                CompareState::Failed(e) => e.to_string(),
            },
            _ if self.compare_on => "choose a model B".to_string(),
            _ => String::new(),
        };
        let models = props.index.iter().flat_map(|i| i.models.iter()).map(|m| {
            html! { <option value={m.name.clone()} selected={code == m.name}>{ &m.name }</option> }
        });
        let preset = self.share.as_ref().and_then(|s| s.get().preset);
        let claim = preset.as_deref().and_then(compare::preset).map(|p| p.claim);
        let presets = compare::PRESETS.iter().map(|p| {
            let id = p.id;
            html! { <button id={format!("preset-{id}")} class={classes!("preset", (preset.as_deref() == Some(id)).then_some("active"))}
                title={p.claim} onclick={link.callback(move |_| LabMsg::Preset(id))}>{ p.label }</button> }
        });
        html! {
            <div class="compare-bar" id="compare-bar" data-state={state} data-b={code.clone()}
                data-preset={preset.clone().unwrap_or_default()}>
                <label class="inline"><input type="checkbox" id="compare-on" checked={self.compare_on}
                    onchange={link.callback(|e: Event| LabMsg::CompareOn(e.target_unchecked_into::<web_sys::HtmlInputElement>().checked()))} />
                    { " compare with " }</label>
                <select id="compare-b" onchange={link.callback(|e: Event| LabMsg::PickB(e.target_unchecked_into::<web_sys::HtmlSelectElement>().value()))}>
                    <option value="" selected={code.is_empty()}>{ "model B…" }</option>
                    <option value={compare::TRAINED_CODE} selected={code == compare::TRAINED_CODE}>{ "this model as trained (A keeps the sliders)" }</option>
                    { for models }
                </select>
                <span class="muted" id="compare-status">{ status }</span>
                <div class="buttons presets">
                    <span class="muted">{ "papers' comparisons: " }</span>
                    { for presets }
                </div>
                if let Some(c) = claim { <p class="muted" id="preset-claim">{ c }</p> }
                if let Some(e) = &self.preset_error { <p class="notice" id="compare-error">{ e }</p> }
            </div>
        }
    }

    /// The chosen tab's view, on the current (edited) engine.
    fn view_tab(&self, ctx: &Context<Self>, model: &LabModel) -> Html {
        let (props, link) = (ctx.props(), ctx.link());
        let engine = model.current.clone();
        let on_laa = link.callback(|(name, layers)| LabMsg::Laa(name, layers));
        let side = self.side_model();
        let aux = |i: &Option<Initial>| {
            i.as_ref().map(|i| Compare {
                name: i.name.clone().into(),
                of: i.of.clone().into(),
                state: i.state.clone(),
            })
        };
        let b = aux(&self.b);
        let trace = |kind| {
            let gates = kind == TraceKind::Gates;
            let compare = if gates { aux(&self.initial) } else { None };
            let b_initial = if gates { aux(&self.b_initial) } else { None };
            let reference = if kind == TraceKind::Laa { aux(&self.reference) } else { None };
            html! { <TraceViewComp kind={kind} engine={engine.clone()} text={props.text.clone()}
            laa_overlay={self.laa_overlay.clone()} on_laa={on_laa.clone()} compare={compare} b={b.clone()}
            b_initial={b_initial} reference={reference} /> }
        };
        match self.tab {
            Tab::Kernels => html! {
                <KernelView engine={engine.clone()} edit={model.edit.clone()}
                    on_edit={props.on_edit.clone()} b={side} />
            },
            Tab::Extrapolation => match &self.heldout {
                Some((text, source)) => html! {
                    <PplView engine={engine.clone()} text={text.clone()} text_source={source.clone()}
                        trained={self.trained_ppl.clone()} shipped={self.shipped.clone()}
                        model={props.name.clone()} b={side}
                        on_done={link.callback(|(e, p)| LabMsg::PplDone(e, p))} />
                },
                None => html! { <p class="muted">{ "loading the held-out text…" }</p> },
            },
            Tab::Attention => trace(TraceKind::Attention),
            Tab::Laa => trace(TraceKind::Laa),
            Tab::Gates => trace(TraceKind::Gates),
        }
    }
}
