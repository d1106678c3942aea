//! The lab: the tab bar, the bias state line, and the view of the chosen tab (`crate::views`), with
//! what the views share across tabs and models: the held-out text and the shipped results table
//! (fetched once), the trained model's perplexity curve, the LAA overlay of every model seen, and
//! the initial checkpoint the gate view compares with (ReGLA Fig. 4, loaded on demand).
//!
//! The panel stays mounted; while no model is ready it renders nothing, so every view unmounts and
//! recomputes for the next model. Bias edits from the kernel view go up to the root
//! (`on_edit`), which applies them through the host.

use std::collections::BTreeMap;
use std::rc::Rc;

use wasm_bindgen_futures::spawn_local;
use yew::prelude::*;

use crate::host::{LabModel, LoadTicket, ModelRef};
use crate::lab::BiasEdit;
use crate::loader::{self, HELDOUT_URL};
use crate::protocol::{FromWorker, ToWorker};
use crate::share::Share;
use crate::url_state::Tab;
use crate::views::{
    Compare, CompareState, KernelView, LaaOverlay, LayerLaa, PplCurve, PplView, Shipped, TraceKind,
    TraceViewComp,
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
}

pub enum LabMsg {
    Tab(Tab),
    Heldout(Result<String, String>),
    Shipped(Shipped),
    PplDone(ModelRef, PplCurve),
    Laa(String, Vec<LayerLaa>),
    /// The comparison checkpoint's load, for trained model `of`.
    Initial(FromWorker),
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
        let name = init.to_string();
        self.initial = Some(Initial {
            of: model,
            name: name.clone(),
            state: CompareState::Loading(format!("loading {name}…").into()),
        });
        let Some(trained) = props.model.as_ref().map(|m| m.trained.clone()) else { return };
        let client = trained.client();
        client.on_initial(trained.id(), ctx.link().callback(LabMsg::Initial));
        client.send(&ToWorker::LoadInitial { of: trained.id(), name });
    }

    fn compare(&self) -> Option<Compare> {
        self.initial.as_ref().map(|i| Compare {
            name: i.name.clone().into(),
            of: i.of.clone().into(),
            state: i.state.clone(),
        })
    }
}

impl Component for LabPanel {
    type Message = LabMsg;
    type Properties = LabProps;

    fn create(ctx: &Context<Self>) -> Self {
        let share = ctx.link().context::<Share>(Callback::noop()).map(|(share, _)| share);
        let mut lab = LabPanel {
            tab: share.as_ref().and_then(|s| s.get().tab).unwrap_or_default(),
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
            LabMsg::Initial(msg) => return self.on_initial(ctx, msg),
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
                <div class="tabs" role="tablist">{ for tabs }</div>
                <p class="muted" id="bias-state">{ format!("model: {edited}") }</p>
                <p class="muted" id="lab-backend-note">
                    { "The lab views (heatmaps, gates, perplexity sweep, kernels) run on the CPU \
                       (wasm) reference runtime in the model's worker, whatever backend generates; \
                       traces stop at 512 tokens there. A bias edit is uploaded to the GPU at the \
                       next generation." }
                </p>
                { self.view_tab(ctx, model) }
            </section>
        }
    }
}

impl LabPanel {
    /// The comparison checkpoint's load progress or result (of the current trained model only).
    fn on_initial(&mut self, ctx: &Context<Self>, msg: FromWorker) -> bool {
        let trained = ctx.props().model.as_ref().map(|m| m.trained.clone());
        let Some(trained) = trained else { return false };
        let Some(i) = self.initial.as_mut() else { return false };
        match msg {
            FromWorker::InitialProgress { of, status } if of == trained.id() => {
                if !matches!(i.state, CompareState::Loading(_)) {
                    return false;
                }
                i.state = CompareState::Loading(status.into());
            }
            FromWorker::InitialLoaded { of, result } if of == trained.id() => {
                i.state = match result {
                    Ok(meta) => CompareState::Ready(ModelRef::new(trained.client(), meta)),
                    Err(e) => CompareState::Failed(format!("Could not load {}: {e}", i.name).into()),
                };
            }
            _ => return false,
        }
        true
    }

    /// The chosen tab's view, on the current (edited) engine.
    fn view_tab(&self, ctx: &Context<Self>, model: &LabModel) -> Html {
        let (props, link) = (ctx.props(), ctx.link());
        let engine = model.current.clone();
        let on_laa = link.callback(|(name, layers)| LabMsg::Laa(name, layers));
        let trace = |kind| {
            let compare = if kind == TraceKind::Gates { self.compare() } else { None };
            html! { <TraceViewComp kind={kind} engine={engine.clone()} text={props.text.clone()}
            laa_overlay={self.laa_overlay.clone()} on_laa={on_laa.clone()} compare={compare} /> }
        };
        match self.tab {
            Tab::Kernels => html! {
                <KernelView engine={engine.clone()} edit={model.edit.clone()}
                    on_edit={props.on_edit.clone()} />
            },
            Tab::Extrapolation => match &self.heldout {
                Some((text, source)) => html! {
                    <PplView engine={engine.clone()} text={text.clone()} text_source={source.clone()}
                        trained={self.trained_ppl.clone()} shipped={self.shipped.clone()}
                        model={props.name.clone()}
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
