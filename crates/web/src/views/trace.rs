//! The trace component behind the attention, LAA and gate views: it asks the model's worker for one
//! trace of the current text (after a debounce, again whenever the engine, the text or the view
//! changes) and hands it to the view's module to draw. The three tabs share one instance, so a trace
//! and the attention view's stage and zoom survive switching between them. Above each view, the
//! token strip shows the traced text, linked to the views: the selection ([`LinkState`]) is shared
//! by the strip, the heatmap (its locked cell, kept in the URL), the LAA curves and the gate table.

use std::rc::Rc;

use attnlab_core::attention::AttnStage;
use gloo_timers::callback::Timeout;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::spawn_local;
use yew::prelude::*;

use super::attention::{self, AttentionMsg, AttentionState, Linked};
use super::gates::{self, Compare, GatesMsg, GatesState};
use super::laa;
use super::strip::{LinkMsg, LinkState};
use super::{LaaOverlay, LayerLaa, DEBOUNCE_MS};
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
}

pub enum TraceMsg {
    Start,
    Done { run: u32, result: Result<Rc<TraceView>, String> },
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

impl TraceViewComp {
    fn schedule(&mut self, ctx: &Context<Self>) {
        let link = ctx.link().clone();
        self.debounce = Some(Timeout::new(DEBOUNCE_MS, move || link.send_message(TraceMsg::Start)));
    }

    /// Compute the trace (the attention view's stage, else the probabilities), then the comparison.
    fn start(&mut self, ctx: &Context<Self>) {
        self.run = self.run.wrapping_add(1);
        self.running = true;
        let (run, link) = (self.run, ctx.link().clone());
        let (model, text) = (ctx.props().engine.clone(), ctx.props().text.clone());
        let stage = if ctx.props().kind == TraceKind::Attention {
            self.attention.stage
        } else {
            AttnStage::Probabilities
        };
        spawn_local(async move {
            let result = model.trace(&text, stage).await.map(Rc::new);
            link.send_message(TraceMsg::Done { run, result });
        });
        ctx.link().send_message(TraceMsg::Gates(GatesMsg::Start));
    }

    /// A finished trace: report its LAA for the overlay and show it.
    fn done(&mut self, ctx: &Context<Self>, result: Result<Rc<TraceView>, String>) {
        self.running = false;
        match result {
            Ok(t) => {
                self.error = None;
                if !t.summaries.is_empty() {
                    let layers =
                        t.summaries.iter().map(|s| (s.layer, s.laa.auc, s.laa.curve.clone())).collect();
                    ctx.props().on_laa.emit((ctx.props().engine.info().name.clone(), layers));
                }
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
        } else if ctx.props().compare != old.compare {
            ctx.link().send_message(TraceMsg::Gates(GatesMsg::Start));
        }
        true
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            TraceMsg::Start => self.start(ctx),
            TraceMsg::Done { run, result } => {
                if run != self.run {
                    return false;
                }
                self.done(ctx, result);
            }
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
                        self.attention.view(props, t, &ctx.link().callback(TraceMsg::Attention), linked)
                    }
                    TraceKind::Laa => laa::view(props, t, query),
                    TraceKind::Gates => html! { <>
                        { gates::view(&props.engine.info().name, t, query) }
                        { self.gates.view_fig4(props, t) }
                    </> },
                }
            }
        };
        let strip = self.trace.as_ref().filter(|_| self.error.is_none()).map(|t| {
            let send = ctx.link().callback(TraceMsg::Link);
            html! { <div ref={self.strip.clone()}>{ self.link.view(t, self.attention.selected(), &send) }</div> }
        });
        let cut = self.trace.as_ref().filter(|t| t.cut > 0).map(|t| {
            html! { <p class="notice">{ format!("The text was cut to its first {} tokens ({} more left out): the CPU trace keeps every n×n matrix.", t.labels.len(), t.cut) }</p> }
        });
        html! {
            <section class="view" id={id} data-running={self.running.to_string()}>
                <h2>{ title }</h2>
                { body_note }
                <p class="muted">{ "text: the prompt and the generated continuation" }</p>
                { for cut }
                { for strip }
                { body }
            </section>
        }
    }
}
