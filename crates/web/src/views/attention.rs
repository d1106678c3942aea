//! The attention view: layer × head thumbnails and one zoomed heatmap of the trace, with the softmax
//! stage toggle (q·k → + bias → softmax). The stage and the zoomed head are this view's state; a new
//! stage needs a new trace, which the trace component computes.

use std::rc::Rc;

use attnlab_core::attention::{AttnStage, LayerAttention};
use yew::prelude::*;

use super::note;
use super::trace::TraceProps;
use crate::heatmap::{Heatmap, Thumb};
use crate::lab::{self, TraceView};
use crate::url_state::UrlState;

/// Section id, title and note of the view.
pub fn intro() -> (&'static str, &'static str, Html) {
    (
        "attention-view",
        "Attention heatmaps",
        note(
            "Softmax attention with a decaying bias concentrates near the diagonal; linear attention \
             without decay spreads weight over the whole prefix (TransNormer's 'attention dilution'); \
             gates and decay (GLA, ReGLA, RetNet) restore locality.",
            "Rows are queries, columns keys; cells right of the diagonal are future keys (grey). \
             Probabilities use a sequential map, logits, biases and signed linear scores a diverging \
             one; the colorbar gives the range. Linear layers show their implied matrix with gates \
             applied, each row divided by Σ|row|. Pick a thumbnail (layer × head) to zoom.",
        ),
    )
}

pub enum AttentionMsg {
    /// Show this softmax stage (recomputes the trace).
    Stage(AttnStage),
    /// Zoom into (layer, head).
    Select(usize, usize),
}

/// The softmax stage shown and the zoomed (layer, head).
pub struct AttentionState {
    pub stage: AttnStage,
    selected: (usize, usize),
    /// The trace's matrices, shared with the heatmaps (not copied on every render).
    matrices: Vec<Vec<Rc<Vec<f32>>>>,
}

/// What the heatmap shows of the views' selection: the locked cell, its setter and the strip's row.
pub struct Linked {
    pub cell: Option<(usize, usize)>,
    pub on_cell: Callback<Option<(usize, usize)>>,
    pub mark_row: Option<usize>,
}

impl AttentionState {
    /// What the page's URL says (softmax probabilities of layer 0, head 0 where it says nothing).
    pub fn of(s: &UrlState) -> AttentionState {
        AttentionState {
            stage: s.stage.unwrap_or_default(),
            selected: (s.layer.unwrap_or(0), s.head.unwrap_or(0)),
            matrices: Vec::new(),
        }
    }

    /// The zoomed (layer, head).
    pub fn selected(&self) -> (usize, usize) {
        self.selected
    }

    /// Keep the stage and the zoomed head in the URL (only what differs from what it says).
    pub fn keep(&self, s: &mut UrlState) {
        let now = AttentionState::of(s);
        if now.stage != self.stage {
            s.stage = Some(self.stage);
        }
        if now.selected != self.selected {
            (s.layer, s.head) = (Some(self.selected.0), Some(self.selected.1));
        }
    }

    /// Apply `msg`; true when the trace must be computed again (the stage changed).
    pub fn update(&mut self, msg: AttentionMsg) -> bool {
        match msg {
            AttentionMsg::Stage(s) => {
                self.stage = s;
                true
            }
            AttentionMsg::Select(l, h) => {
                self.selected = (l, h);
                false
            }
        }
    }

    /// A new trace: keep the zoomed head if it still exists, else zoom into the first one and say
    /// why.
    pub fn fit(&mut self, t: &TraceView) -> Option<String> {
        self.matrices =
            t.attention.iter().map(|la| la.heads.iter().map(|m| Rc::new(m.clone())).collect()).collect();
        let (l, h) = self.selected;
        let heads = t.attention.first().map_or(0, |la| la.heads.len());
        if l >= t.attention.len() || t.attention.get(l).is_some_and(|la| h >= la.heads.len()) {
            self.selected = (0, 0);
            return Some(format!(
                "layer {l}, head {h}: the model has {} layers of {heads} heads; layer 0, head 0 is shown",
                t.attention.len()
            ));
        }
        None
    }

    /// The stage toggle (softmax layers only), the thumbnails and the zoomed heatmap.
    pub fn view(
        &self,
        props: &TraceProps,
        t: &TraceView,
        send: &Callback<AttentionMsg>,
        linked: Linked,
    ) -> Html {
        let softmax_layers =
            props.engine.current_specs().iter().any(|s| s.family() == attnlab_core::config::Family::Softmax);
        let (sl, sh) = self.selected;
        let layer: Option<&LayerAttention> = t.attention.get(sl);
        let labels = Rc::new(t.labels.clone());
        let matrix = |l: usize, h: usize| self.matrices.get(l).and_then(|m| m.get(h)).cloned();
        let grid = t.attention.iter().enumerate().map(|(k, la)| {
            let signed = lab::is_signed(la.kind);
            html! {
                <div class="thumb-row">
                    <span class="muted">{ format!("layer {}", la.layer) }</span>
                    { for (0..la.heads.len()).filter_map(|h| matrix(k, h).map(|m| (h, m))).map(|(h, m)| {
                        let l = la.layer;
                        html! { <Thumb matrix={m} n={la.n} signed={signed}
                            selected={(l, h) == self.selected} label={format!("L{l} H{h}")}
                            onselect={send.reform(move |()| AttentionMsg::Select(l, h))} /> }
                    }) }
                </div>
            }
        });
        let stage_btn = |s: AttnStage, label: &str| {
            html! { <label class="inline"><input type="radio" name="stage" checked={self.stage == s}
            onchange={send.reform(move |_: Event| AttentionMsg::Stage(s))}/>{ format!(" {label}") }</label> }
        };
        html! {
            <>
                if softmax_layers {
                    <div class="settings" role="radiogroup" aria-label="stage">
                        <span class="muted">{ "softmax stage: " }</span>
                        { stage_btn(AttnStage::Logits, "q·k logits") }
                        { stage_btn(AttnStage::Biased, "+ position bias") }
                        { stage_btn(AttnStage::Probabilities, "softmax") }
                    </div>
                }
                <div class="thumb-grid">{ for grid }</div>
                if let Some(la) = layer {
                    if let Some(m) = matrix(sl, sh) {
                        <Heatmap id="heatmap" title={format!("layer {sl}, head {sh} ({:?})", la.kind)}
                            matrix={m} n={la.n} labels={labels}
                            signed={lab::is_signed(la.kind)}
                            value_name={format!("{:?}", la.kind).to_lowercase()}
                            model={props.engine.info().name.clone()}
                            cell={linked.cell} on_cell={linked.on_cell} mark_row={linked.mark_row} />
                    }
                }
            </>
        }
    }
}
