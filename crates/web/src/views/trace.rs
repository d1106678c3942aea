//! The trace component behind the attention, LAA and gate views: it asks the model's worker for one
//! trace of the current text (after a debounce, again whenever the engine, the text or the view
//! changes) and hands it to the view's module to draw. The three tabs share one instance, so a trace
//! and the attention view's stage and zoom survive switching between them. Above each view, the
//! token strip shows the traced text, linked to the views: the selection ([`LinkState`]) is shared
//! by the strip, the heatmap (its locked cell, kept in the URL), the LAA curves and the gate table.
//! In compare mode the component traces model B on the same text too (on its own channel), and the
//! views draw both.

use std::rc::Rc;

use attnlab_core::attention::AttnStage;
use gloo_timers::callback::Timeout;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::spawn_local;
use yew::prelude::*;

use super::attention::{self, AttentionMsg, AttentionState, Linked};
use super::gates::CompareState;
use super::gates::{self, Compare, GatesMsg, GatesState};
use super::laa;
use super::strip::{LinkMsg, LinkState};
use super::{LaaOverlay, LayerLaa, DEBOUNCE_MS};
use crate::compare::Side;
use crate::host::ModelRef;
use crate::lab::TraceView;
use crate::share::Share;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TraceKind {
    Attention,
    Laa,
    Gates,
}

#[derive(Properties, PartialEq)]
pub struct TraceProps {
    pub kind: TraceKind,
    pub engine: ModelRef,
    pub text: Rc<String>,
    /// LAA curves of other models seen in this page, by model name (the overlay).
    pub laa_overlay: Rc<LaaOverlay>,
    pub on_laa: Callback<(String, Vec<LayerLaa>)>,
    /// Gate view only: the initial checkpoint to compare with (ReGLA Fig. 4).
    #[prop_or_default]
    pub compare: Option<Compare>,
    /// Compare mode: model B.
    #[prop_or_default]
    pub b: Option<Compare>,
    /// Gate view, compare mode: B's initial checkpoint (Fig. 4 for B too).
    #[prop_or_default]
    pub b_initial: Option<Compare>,
    /// LAA view: a preset's reference model, traced beside A and B (TransNormer Fig. 2's softmax).
    #[prop_or_default]
    pub reference: Option<Compare>,
}

impl TraceProps {
    /// Model B when it is ready.
    pub(crate) fn b_model(&self) -> Option<ModelRef> {
        match self.b.as_ref().map(|b| &b.state) {
            Some(CompareState::Ready(m)) => Some(m.clone()),
            _ => None,
        }
    }

    /// The reference model when it is ready.
    fn reference_model(&self) -> Option<ModelRef> {
        match self.reference.as_ref().map(|r| &r.state) {
            Some(CompareState::Ready(m)) => Some(m.clone()),
            _ => None,
        }
    }
}

pub enum TraceMsg {
    Start,
    /// The trace of the page's model (A), model B (compare mode) or the reference model (a
    /// preset's third model).
    Done {
        side: Side,
        run: u32,
        result: Result<Rc<TraceView>, String>,
    },
    /// Model B's trace (compare mode).
    StartB,
    StartRef,
    Attention(AttentionMsg),
    Gates(GatesMsg),
    Link(LinkMsg),
}

/// Computes one trace of the current text and shows it as heatmaps, LAA curves or gate histograms.
pub struct TraceViewComp {
    run: u32,
    running: bool,
    trace: Option<Rc<TraceView>>,
    error: Option<String>,
    run_b: u32,
    /// Model B's trace of the same text (compare mode); `None` while computing or without B.
    trace_b: Option<Result<Rc<TraceView>, String>>,
    run_ref: u32,
    /// The reference model's trace of the same text; `None` while computing or without one.
    trace_ref: Option<Result<Rc<TraceView>, String>>,
    debounce: Option<Timeout>,
    attention: AttentionState,
    gates: GatesState,
    /// The token strip's selection (the pinned cell is the heatmap's locked cell).
    link: LinkState,
    /// The strip's element, to move the focus to the pinned token.
    strip: NodeRef,
    /// The page's URL state (stage, zoomed head, locked cell).
    share: Option<Share>,
}

/// Trace `text` on `side`'s `model` at `stage` and send the answer of run `run`.
fn spawn_trace(ctx: &Context<TraceViewComp>, side: Side, model: ModelRef, stage: AttnStage, run: u32) {
    let (link, text) = (ctx.link().clone(), ctx.props().text.clone());
    spawn_local(async move {
        let result = model.trace(&text, stage).await.map(Rc::new);
        link.send_message(TraceMsg::Done { side, run, result });
    });
}

impl TraceViewComp {
    fn schedule(&mut self, ctx: &Context<Self>) {
        let link = ctx.link().clone();
        self.debounce = Some(Timeout::new(DEBOUNCE_MS, move || link.send_message(TraceMsg::Start)));
    }

    /// Compute the trace (the attention view's stage, else the probabilities), then the comparison.
    fn start(&mut self, ctx: &Context<Self>) {
        self.run = self.run.wrapping_add(1);
        self.running = true;
        let stage = if ctx.props().kind == TraceKind::Attention {
            self.attention.stage
        } else {
            AttnStage::Probabilities
        };
        spawn_trace(ctx, Side::A, ctx.props().engine.clone(), stage, self.run);
        ctx.link().send_message(TraceMsg::Gates(GatesMsg::Start(0)));
        ctx.link().send_message(TraceMsg::Gates(GatesMsg::Start(1)));
        self.start_b(ctx);
        self.start_ref(ctx);
    }

    /// Trace the reference model on the same text (its LAA joins the overlays).
    fn start_ref(&mut self, ctx: &Context<Self>) {
        self.run_ref = self.run_ref.wrapping_add(1);
        self.trace_ref = None;
        let Some(model) = ctx.props().reference_model() else { return };
        spawn_trace(ctx, Side::Reference, model, AttnStage::Probabilities, self.run_ref);
    }

    /// Report a trace's LAA as model `name`'s for the overlay of the models seen in this page.
    fn report_laa(ctx: &Context<Self>, name: String, t: &TraceView) {
        if !t.summaries.is_empty() {
            let layers = t.summaries.iter().map(|s| (s.layer, s.laa.auc, s.laa.curve.clone())).collect();
            ctx.props().on_laa.emit((name, layers));
        }
    }

    /// Trace model B on the same text at the same stage (compare mode).
    fn start_b(&mut self, ctx: &Context<Self>) {
        self.run_b = self.run_b.wrapping_add(1);
        self.trace_b = None;
        self.attention.fit_b(None);
        let Some(model) = ctx.props().b_model() else { return };
        let stage = if ctx.props().kind == TraceKind::Attention {
            self.attention.stage
        } else {
            AttnStage::Probabilities
        };
        spawn_trace(ctx, Side::B, model, stage, self.run_b);
    }

    /// A finished trace: report its LAA for the overlay and show it.
    fn done(&mut self, ctx: &Context<Self>, result: Result<Rc<TraceView>, String>) {
        self.running = false;
        match result {
            Ok(t) => {
                self.error = None;
                Self::report_laa(ctx, ctx.props().engine.info().name.clone(), &t);
                let problem = self.attention.fit(&t);
                if let Some(share) = &self.share {
                    share.checked("layer", problem);
                    share.update(|s| self.attention.keep(s));
                }
                self.trace = Some(t);
            }
            Err(e) => self.error = Some(e),
        }
    }
}

impl TraceViewComp {
    /// Model B's trace when compare mode has one.
    fn side_b<'a>(&'a self, props: &'a TraceProps) -> Option<attention::SideB<'a>> {
        let b = props.b.as_ref()?;
        let trace = self.trace_b.as_ref()?.as_ref().ok()?;
        Some(attention::SideB { a_name: &b.of, name: &b.name, trace })
    }

    /// The reference model's name and trace, once traced.
    fn side_ref<'a>(&'a self, props: &'a TraceProps) -> Option<(&'a str, &'a TraceView)> {
        let r = props.reference.as_ref()?;
        Some((r.name.as_str(), self.trace_ref.as_ref()?.as_ref().ok()?))
    }

    /// Where model B, then the reference model, stands while it has no trace to show
    /// (`#compare-b-status`, `#compare-ref-status`).
    fn b_status(&self, props: &TraceProps) -> Html {
        let models = [("b", "B ", &props.b, &self.trace_b), ("ref", "", &props.reference, &self.trace_ref)];
        for (id, tag, model, trace) in models {
            let Some(m) = model else { continue };
            let (state, text) = match (&m.state, trace) {
                (CompareState::Loading(s), _) => ("loading", s.to_string()),
                (CompareState::Failed(e), _) => ("failed", e.to_string()),
                (CompareState::Ready(_), None) => {
                    ("computing", format!("computing {tag}{}'s trace…", m.name))
                }
                (CompareState::Ready(_), Some(Err(e))) => ("failed", format!("{tag}{}: {e}", m.name)),
                (CompareState::Ready(_), Some(Ok(_))) => continue,
            };
            return html! { <p class="muted" id={format!("compare-{id}-status")} data-state={state}>{ text }</p> };
        }
        html! {}
    }
}

impl Component for TraceViewComp {
    type Message = TraceMsg;
    type Properties = TraceProps;

    fn create(ctx: &Context<Self>) -> Self {
        let share = ctx.link().context::<Share>(Callback::noop()).map(|(share, _)| share);
        let cell = share.as_ref().and_then(|s| s.get().cell);
        let mut v = TraceViewComp {
            run: 0,
            running: false,
            trace: None,
            error: None,
            run_b: 0,
            trace_b: None,
            run_ref: 0,
            trace_ref: None,
            debounce: None,
            attention: AttentionState::of(&share.as_ref().map(Share::get).unwrap_or_default()),
            gates: GatesState::default(),
            link: LinkState::new(cell),
            strip: NodeRef::default(),
            share,
        };
        v.schedule(ctx);
        v
    }

    fn changed(&mut self, ctx: &Context<Self>, old: &Self::Properties) -> bool {
        if ctx.props().engine != old.engine || ctx.props().text != old.text || ctx.props().kind != old.kind {
            self.schedule(ctx);
        } else {
            if ctx.props().compare != old.compare {
                ctx.link().send_message(TraceMsg::Gates(GatesMsg::Start(0)));
            }
            if ctx.props().b_initial != old.b_initial {
                ctx.link().send_message(TraceMsg::Gates(GatesMsg::Start(1)));
            }
            if ctx.props().b_model() != old.b_model() {
                ctx.link().send_message(TraceMsg::StartB);
            }
            if ctx.props().reference_model() != old.reference_model() {
                ctx.link().send_message(TraceMsg::StartRef);
            }
        }
        true
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            TraceMsg::Start => self.start(ctx),
            TraceMsg::Done { side, run, result } => {
                let current = match side {
                    Side::A => self.run,
                    Side::B => self.run_b,
                    Side::Reference => self.run_ref,
                };
                if run != current || (side != Side::A && matches!(&result, Err(e) if e == "superseded")) {
                    return false;
                }
                if side == Side::A {
                    self.done(ctx, result);
                    return true;
                }
                // B's and the reference's LAA join the overlay of the models seen in this page.
                let model = if side == Side::B { &ctx.props().b } else { &ctx.props().reference };
                if let (Ok(t), Some(m)) = (&result, model) {
                    Self::report_laa(ctx, m.name.to_string(), t);
                }
                if side == Side::B {
                    self.attention.fit_b(result.as_ref().ok().map(|t| &**t));
                    self.trace_b = Some(result);
                } else {
                    self.trace_ref = Some(result);
                }
            }
            TraceMsg::StartB => self.start_b(ctx),
            TraceMsg::StartRef => self.start_ref(ctx),
            TraceMsg::Attention(msg) => {
                let retrace = self.attention.update(msg);
                if let Some(share) = &self.share {
                    share.update(|s| self.attention.keep(s));
                }
                if retrace {
                    ctx.link().send_message(TraceMsg::Start);
                }
            }
            TraceMsg::Gates(msg) => {
                return self.gates.update(msg, ctx.props(), &ctx.link().callback(TraceMsg::Gates));
            }
            TraceMsg::Link(msg) => {
                let n = self.trace.as_ref().map_or(0, |t| t.labels.len());
                if self.link.update(msg, n) {
                    if let Some(share) = &self.share {
                        share.update(|s| s.cell = self.link.cell);
                    }
                }
            }
        }
        true
    }

    fn rendered(&mut self, _ctx: &Context<Self>, _first: bool) {
        if !std::mem::take(&mut self.link.refocus) {
            return;
        }
        let Some(strip) = self.strip.cast::<web_sys::Element>() else { return };
        if let Ok(Some(token)) = strip.query_selector(".tok[tabindex=\"0\"]") {
            if let Ok(token) = token.dyn_into::<web_sys::HtmlElement>() {
                let _ = token.focus();
            }
        }
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let props = ctx.props();
        let compare = props.b.as_ref().map(|b| format!("{} vs {}", b.of, b.name));
        let (id, title, body_note) = match props.kind {
            TraceKind::Attention => attention::intro(),
            TraceKind::Laa => laa::intro(),
            TraceKind::Gates => gates::intro(),
        };
        let body = match (&self.trace, &self.error) {
            (_, Some(e)) => html! { <p class="error">{ e }</p> },
            (None, None) => html! { <p class="muted">{ "computing…" }</p> },
            (Some(t), None) => {
                let query = self.link.query(t.labels.len());
                match props.kind {
                    TraceKind::Attention => {
                        let linked = Linked {
                            cell: self.link.cell,
                            on_cell: ctx.link().callback(|c| TraceMsg::Link(LinkMsg::Cell(c))),
                            mark_row: query,
                        };
                        let b = self.side_b(props);
                        let send = ctx.link().callback(TraceMsg::Attention);
                        html! { <>
                            { self.b_status(props) }
                            { self.attention.view(props, t, &send, linked, b) }
                        </> }
                    }
                    TraceKind::Laa => html! { <>
                        { laa::view(props, t, query) }
                        { self.b_status(props) }
                        { for self.side_b(props).map(|b| laa::view_compare(t, &b, self.side_ref(props))) }
                    </> },
                    TraceKind::Gates => html! { <>
                        { gates::view(&props.engine.info().name, t, query) }
                        { self.b_status(props) }
                        { for self.side_b(props).map(|b| gates::view_compare(t, &b)) }
                        { self.gates.view_fig4(props, t, self.side_b(props).map(|b| b.trace)) }
                    </> },
                }
            }
        };
        // The strip links exact maps (a token is a row); a binned map's cells are token ranges.
        let strip = self.trace.as_ref().filter(|t| self.error.is_none() && t.stride == 1).map(|t| {
            let send = ctx.link().callback(TraceMsg::Link);
            html! { <div ref={self.strip.clone()}>{ self.link.view(t, self.attention.selected(), &send) }</div> }
        });
        let cut = self.trace.as_deref().map(trace_notes);
        let (device, traced) = match self.trace.as_deref() {
            Some(t) if t.on_gpu => ("webgpu", " · traced on WebGPU"),
            Some(_) => ("cpu", " · traced on the CPU (wasm)"),
            None => ("", ""),
        };
        html! {
            <section class="view" id={id} data-running={self.running.to_string()} data-compare={compare}
                data-device={device}>
                <h2>{ title }</h2>
                { body_note }
                <p class="muted">{ format!("text: the prompt and the generated continuation{traced}") }</p>
                { for cut }
                { for strip }
                { body }
            </section>
        }
    }
}

/// What the trace covers, when it is not simply the whole text in exact maps: the cut, the binned
/// maps of a long WebGPU trace, and the tokens LAA covers.
fn trace_notes(t: &TraceView) -> Html {
    let n = t.labels.len();
    let cut = (t.cut > 0).then(|| {
        let why = if t.on_gpu {
            format!("the WebGPU trace stops at {} tokens", crate::lab::MAX_GPU_TRACE_TOKENS)
        } else {
            format!(
                "the CPU trace keeps every n×n matrix and stops at {} tokens (on WebGPU: {})",
                crate::lab::MAX_TRACE_TOKENS,
                crate::lab::MAX_GPU_TRACE_TOKENS
            )
        };
        format!("The text was cut to its first {n} tokens ({} more left out): {why}.", t.cut)
    });
    let binned = (t.stride > 1).then(|| {
        let laa = if t.summary_tokens > 0 {
            format!("; LAA and the head summaries cover the first {} tokens (they need exact rows)", t.summary_tokens)
        } else {
            String::new()
        };
        format!(
            "{n} tokens traced on WebGPU: the maps are binned on the GPU ({0}×{0} tokens per cell; the trace stays in \
             the worker) and the heatmap's zoom fetches windows of them down to single tokens. The token strip links \
             exact maps only{laa}.",
            t.stride
        )
    });
    html! { for cut.into_iter().chain(binned).map(|note| html! { <p class="notice trace-note">{ note }</p> }) }
}
