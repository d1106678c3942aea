//! The attention view: layer × head thumbnails and one zoomed heatmap of the trace, with the softmax
//! stage toggle (q·k → + bias → softmax). The stage and the zoomed head are this view's state; a new
//! stage needs a new trace, which the trace component computes.
//!
//! Compare mode puts model B's thumbnails and zoomed map beside A's, at the same layer, head and
//! locked cell (each side clamped to its own layers and heads) and on one colour scale, with the
//! difference A − B on a diverging scale.

use std::rc::Rc;

use attnlab_core::analysis::MapWindow;
use attnlab_core::attention::{AttnStage, LayerAttention};
use yew::prelude::*;

use super::note;
use super::trace::TraceProps;
use crate::compare;
use crate::heatmap::{Heatmap, Thumb, TileFuture, TileSource};
use crate::host::ModelRef;
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
    matrices: Matrices,
    /// Model B's (compare mode).
    matrices_b: Matrices,
}

/// The worker's windows of the WebGPU trace of the page's text (layer `layer`, head `head`), for a
/// binned map's zoom; `None` when the page holds the exact map.
fn tile_source(
    model: Option<ModelRef>,
    props: &TraceProps,
    stage: AttnStage,
    t: &TraceView,
    layer: usize,
    head: usize,
) -> Option<TileSource> {
    if !t.on_gpu || t.stride == 1 {
        return None;
    }
    let (model, text) = (model?, props.text.clone());
    let key = format!("{}/{:p}/{stage:?}/{layer}/{head}", model.id(), Rc::as_ptr(&text));
    let fetch = Rc::new(move |window: MapWindow| -> TileFuture {
        let (model, text) = (model.clone(), text.clone());
        Box::pin(async move {
            let mut maps = model.tile(&text, stage, layer, window).await?;
            if head < maps.heads.len() {
                Ok(maps.heads.swap_remove(head))
            } else {
                Err(format!("the worker's window has no head {head}"))
            }
        })
    });
    Some(TileSource { key, fetch })
}

/// Model B's trace beside A's (compare mode).
pub struct SideB<'a> {
    /// Index names of the page's model (A) and of B.
    pub a_name: &'a str,
    pub name: &'a str,
    pub trace: &'a TraceView,
}

type Matrices = Vec<Vec<Rc<Vec<f32>>>>;

fn matrices_of(t: &TraceView) -> Matrices {
    t.attention.iter().map(|la| la.heads.iter().map(|m| Rc::new(m.clone())).collect()).collect()
}

/// The layer × head thumbnails of `t` (`side` names the grid), `selected` highlighted.
fn thumb_grid(
    side: &str,
    t: &TraceView,
    matrices: &Matrices,
    selected: (usize, usize),
    send: &Callback<AttentionMsg>,
) -> Html {
    let rows = t.attention.iter().enumerate().map(|(k, la)| {
        let signed = lab::is_signed(la.kind);
        let heads = (0..la.heads.len()).filter_map(|h| Some((h, matrices.get(k)?.get(h)?.clone())));
        html! {
            <div class="thumb-row">
                <span class="muted">{ format!("layer {}", la.layer) }</span>
                { for heads.map(|(h, m)| {
                    let l = la.layer;
                    html! { <Thumb matrix={m} n={la.n} signed={signed}
                        selected={(l, h) == selected} label={format!("L{l} H{h}")}
                        onselect={send.reform(move |()| AttentionMsg::Select(l, h))} /> }
                }) }
            </div>
        }
    });
    html! { <div class="thumb-grid" data-side={side.to_string()}>{ for rows }</div> }
}

/// (layer, head) count of a trace.
fn dims(t: &TraceView) -> (usize, usize) {
    (t.attention.len(), t.attention.first().map_or(0, |la| la.heads.len()))
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
            matrices_b: Vec::new(),
        }
    }

    /// Model B's new trace (compare mode).
    pub fn fit_b(&mut self, t: Option<&TraceView>) {
        self.matrices_b = t.map(matrices_of).unwrap_or_default();
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
        self.matrices = matrices_of(t);
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

    /// The stage toggle (softmax layers only), the thumbnails and the zoomed heatmap; in compare
    /// mode (`b`) model B's beside them, on one scale, and the difference map.
    pub fn view(
        &self,
        props: &TraceProps,
        t: &TraceView,
        send: &Callback<AttentionMsg>,
        linked: Linked,
        b: Option<SideB>,
    ) -> Html {
        let softmax_layers =
            props.engine.current_specs().iter().any(|s| s.family() == attnlab_core::config::Family::Softmax);
        let a_name = b.as_ref().map_or_else(|| props.engine.info().name.clone(), |b| b.a_name.to_string());
        let (la_n, ha_n) = dims(t);
        let ((sl, sh), a_note) = compare::clamp_selection(self.selected, la_n, ha_n, &format!("A {a_name}"));
        let layer: Option<&LayerAttention> = t.attention.get(sl);
        let labels = Rc::new(t.labels.clone());
        let matrix = |l: usize, h: usize| self.matrices.get(l).and_then(|m| m.get(h)).cloned();
        let stage_btn = |s: AttnStage, label: &str| {
            html! { <label class="inline"><input type="radio" name="stage" checked={self.stage == s}
            onchange={send.reform(move |_: Event| AttentionMsg::Stage(s))}/>{ format!(" {label}") }</label> }
        };
        // Side B's map at the same (clamped) selection, and the scale both maps share.
        let b_map = b.as_ref().and_then(|b| {
            let (lb, hb) = dims(b.trace);
            let ((bl, bh), note) = compare::clamp_selection(self.selected, lb, hb, &format!("B {}", b.name));
            let la = b.trace.attention.get(bl)?;
            let m = self.matrices_b.get(bl)?.get(bh)?.clone();
            Some((b, la, (bl, bh), m, note))
        });
        let a_map = layer.and_then(|la| Some((la, matrix(sl, sh)?)));
        let shared = match (&a_map, &b_map) {
            (Some((la, ma)), Some((_, lb, _, mb, _))) => Some(compare::shared_scale(
                (ma, la.n),
                (mb, lb.n),
                lab::is_signed(la.kind) || lab::is_signed(lb.kind),
            )),
            _ => None,
        };
        let prefix = if b.is_some() { format!("A {a_name} · ") } else { String::new() };
        let a_heatmap = a_map.as_ref().map(|(la, m)| {
            html! {
                <Heatmap id="heatmap" title={format!("{prefix}layer {sl}, head {sh} ({:?})", la.kind)}
                    matrix={m.clone()} n={la.n} labels={labels.clone()} tokens={t.labels.len()}
                    stride={t.stride} kind={la.kind} tiles={tile_source(Some(props.engine.clone()), props, self.stage, t, la.layer, sh)}
                    signed={lab::is_signed(la.kind) || shared.is_some_and(|s| s.signed)}
                    value_name={format!("{:?}", la.kind).to_lowercase()}
                    model={a_name.clone()} scale={shared}
                    cell={linked.cell} on_cell={linked.on_cell.clone()} mark_row={linked.mark_row} />
            }
        });
        let compare_html = b.as_ref().map(|b| {
            let Some((_, lb, (bl, bh), mb, b_note)) = &b_map else {
                return html! { <p class="muted">{ format!("B {}: no attention matrices in its trace", b.name) }</p> };
            };
            let b_labels = Rc::new(b.trace.labels.clone());
            let b_heatmap = html! {
                <Heatmap id="heatmap-b" title={format!("B {} · layer {bl}, head {bh} ({:?})", b.name, lb.kind)}
                    matrix={mb.clone()} n={lb.n} labels={b_labels} tokens={b.trace.labels.len()}
                    stride={b.trace.stride} kind={lb.kind}
                    tiles={tile_source(props.b_model(), props, self.stage, b.trace, lb.layer, *bh)}
                    signed={lab::is_signed(lb.kind) || shared.is_some_and(|s| s.signed)}
                    value_name={format!("{:?}", lb.kind).to_lowercase()}
                    model={b.name.to_string()} scale={shared}
                    cell={linked.cell} on_cell={linked.on_cell.clone()} mark_row={linked.mark_row} />
            };
            let diff = match &a_map {
                Some((la, ma)) if t.labels == b.trace.labels => compare::difference(ma, mb, la.n).map(|d| {
                    html! {
                        <Heatmap id="heatmap-diff" title={format!("A − B: {a_name} − {} · layer {sl}/{bl}, head {sh}/{bh}", b.name)}
                            matrix={Rc::new(d)} n={la.n} labels={labels.clone()} signed={true}
                            tokens={t.labels.len()} stride={t.stride} kind={la.kind}
                            value_name={format!("difference of {:?}", la.kind).to_lowercase()}
                            model={compare::caption_model(&a_name, b.name, true)}
                            cell={linked.cell} on_cell={linked.on_cell.clone()} mark_row={linked.mark_row} />
                    }
                }),
                _ => None,
            };
            let diff = diff.unwrap_or_else(|| html! {
                <p class="notice" id="heatmap-diff-missing">{ format!(
                    "No difference map: the two models cut the text into different tokens ({} and {}), so their cells are not the same pairs.",
                    t.labels.len(), b.trace.labels.len()) }</p>
            });
            html! {
                <>
                    <div class="compare-thumbs">
                        <div><p class="muted">{ format!("A {a_name}") }</p>{ thumb_grid("a", t, &self.matrices, (sl, sh), send) }</div>
                        <div><p class="muted">{ format!("B {}", b.name) }</p>{ thumb_grid("b", b.trace, &self.matrices_b, (*bl, *bh), send) }</div>
                    </div>
                    { for [a_note.clone(), b_note.clone()].into_iter().flatten().map(|n| html! { <p class="notice clamp-note">{ n }</p> }) }
                    <p class="muted">{ "Both maps use one colour scale; the difference uses its own diverging scale (white = equal)." }</p>
                    <div class="compare-maps">
                        { for a_heatmap.clone() }
                        { b_heatmap }
                        { diff }
                    </div>
                </>
            }
        });
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
                if let Some(c) = compare_html {
                    { c }
                } else {
                    { thumb_grid("a", t, &self.matrices, (sl, sh), send) }
                    { for a_heatmap }
                }
            </>
        }
    }
}
