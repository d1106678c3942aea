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
use crate::colors::Scale;
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
        let (a, a_note) = Side::of(&a_name, "A", t, self.selected, &self.matrices, |layer, head| {
            tile_source(Some(props.engine.clone()), props, self.stage, t, layer, head)
        });
        let body = match &b {
            Some(b) => {
                let (b, b_note) =
                    Side::of(b.name, "B", b.trace, self.selected, &self.matrices_b, |layer, head| {
                        tile_source(props.b_model(), props, self.stage, b.trace, layer, head)
                    });
                self.compare_view(send, &linked, &a, &b, [a_note, b_note].into_iter().flatten())
            }
            None => {
                let heatmap =
                    a.zoom.as_ref().map(|z| z.heatmap("heatmap", a.title("", z), a.name, None, &linked));
                html! { <>{ thumb_grid("a", t, &self.matrices, a.selected, send) }{ for heatmap }</> }
            }
        };
        html! {
            <>
                if softmax_layers { { self.stage_toggle(send) } }
                { body }
            </>
        }
    }

    /// The softmax stage radio group (q·k logits, + position bias, softmax).
    fn stage_toggle(&self, send: &Callback<AttentionMsg>) -> Html {
        let button = |s: AttnStage, label: &str| {
            html! { <label class="inline"><input type="radio" name="stage" checked={self.stage == s}
            onchange={send.reform(move |_: Event| AttentionMsg::Stage(s))}/>{ format!(" {label}") }</label> }
        };
        html! {
            <div class="settings" role="radiogroup" aria-label="stage">
                <span class="muted">{ "softmax stage: " }</span>
                { button(AttnStage::Logits, "q·k logits") }
                { button(AttnStage::Biased, "+ position bias") }
                { button(AttnStage::Probabilities, "softmax") }
            </div>
        }
    }

    /// Compare mode: both models' thumbnails, the clamp `notes`, A's and B's zoomed maps on one
    /// colour scale, and their difference when both cut the text into the same tokens.
    fn compare_view(
        &self,
        send: &Callback<AttentionMsg>,
        linked: &Linked,
        a: &Side,
        b: &Side,
        notes: impl Iterator<Item = String>,
    ) -> Html {
        let Some(bz) = &b.zoom else {
            return html! { <p class="muted">{ format!("B {}: no attention matrices in its trace", b.name) }</p> };
        };
        let scale = a.zoom.as_ref().map(|az| {
            let signed = lab::is_signed(az.layer.kind) || lab::is_signed(bz.layer.kind);
            compare::shared_scale((&az.matrix, az.layer.n), (&bz.matrix, bz.layer.n), signed)
        });
        let a_heatmap = a
            .zoom
            .as_ref()
            .map(|az| az.heatmap("heatmap", a.title(&format!("A {} · ", a.name), az), a.name, scale, linked));
        let b_heatmap =
            bz.heatmap("heatmap-b", b.title(&format!("B {} · ", b.name), bz), b.name, scale, linked);
        let difference = a.zoom.as_ref().filter(|_| a.trace.labels == b.trace.labels).and_then(|az| {
            let ((al, ah), (bl, bh)) = (a.selected, b.selected);
            let title = format!("A − B: {} − {} · layer {al}/{bl}, head {ah}/{bh}", a.name, b.name);
            az.difference(bz, title, compare::caption_model(a.name, b.name, true), linked)
        });
        let difference = difference.unwrap_or_else(|| html! {
            <p class="notice" id="heatmap-diff-missing">{ format!(
                "No difference map: the two models cut the text into different tokens ({} and {}), so their cells are not the same pairs.",
                a.trace.labels.len(), b.trace.labels.len()) }</p>
        });
        html! {
            <>
                <div class="compare-thumbs">
                    <div><p class="muted">{ format!("A {}", a.name) }</p>{ thumb_grid("a", a.trace, &self.matrices, a.selected, send) }</div>
                    <div><p class="muted">{ format!("B {}", b.name) }</p>{ thumb_grid("b", b.trace, &self.matrices_b, b.selected, send) }</div>
                </div>
                { for notes.map(|n| html! { <p class="notice clamp-note">{ n }</p> }) }
                <p class="muted">{ "Both maps use one colour scale; the difference uses its own diverging scale (white = equal)." }</p>
                <div class="compare-maps">
                    { for a_heatmap }
                    { b_heatmap }
                    { difference }
                </div>
            </>
        }
    }
}

/// One model's side of the view: its trace, the selection clamped to its layers and heads, and the
/// zoomed map there (none when the trace has no attention matrices).
struct Side<'a> {
    name: &'a str,
    trace: &'a TraceView,
    selected: (usize, usize),
    zoom: Option<Zoomed<'a>>,
}

/// A zoomed map: the layer's attention, the head's matrix, the trace's token labels and the
/// worker's windows for a binned map.
struct Zoomed<'a> {
    trace: &'a TraceView,
    layer: &'a LayerAttention,
    matrix: Rc<Vec<f32>>,
    labels: Rc<Vec<String>>,
    tiles: Option<TileSource>,
}

impl<'a> Side<'a> {
    /// `trace`'s side at `selected` (clamped; the note says so, naming the side `tag` and model
    /// `name`), with `tiles(layer, head)` as its zoom's window source.
    fn of(
        name: &'a str,
        tag: &str,
        trace: &'a TraceView,
        selected: (usize, usize),
        matrices: &Matrices,
        tiles: impl Fn(usize, usize) -> Option<TileSource>,
    ) -> (Self, Option<String>) {
        let (layers, heads) = dims(trace);
        let ((l, h), note) = compare::clamp_selection(selected, layers, heads, &format!("{tag} {name}"));
        let zoom = trace.attention.get(l).and_then(|layer| {
            let matrix = matrices.get(l)?.get(h)?.clone();
            let labels = Rc::new(trace.labels.clone());
            Some(Zoomed { trace, layer, matrix, labels, tiles: tiles(layer.layer, h) })
        });
        (Side { name, trace, selected: (l, h), zoom }, note)
    }

    /// The title of the zoomed map `z` after `prefix`.
    fn title(&self, prefix: &str, z: &Zoomed) -> String {
        format!("{prefix}layer {}, head {} ({:?})", self.selected.0, self.selected.1, z.layer.kind)
    }
}

impl Zoomed<'_> {
    /// The zoomed heatmap (`id`), on `scale` when compare mode shares one.
    fn heatmap(
        &self,
        id: &'static str,
        title: String,
        model: &str,
        scale: Option<Scale>,
        linked: &Linked,
    ) -> Html {
        let (t, la) = (self.trace, self.layer);
        html! {
            <Heatmap id={id} title={title} matrix={self.matrix.clone()} n={la.n} labels={self.labels.clone()}
                tokens={t.labels.len()} stride={t.stride} kind={la.kind} tiles={self.tiles.clone()}
                signed={lab::is_signed(la.kind) || scale.is_some_and(|s| s.signed)}
                value_name={format!("{:?}", la.kind).to_lowercase()}
                model={model.to_string()} scale={scale}
                cell={linked.cell} on_cell={linked.on_cell.clone()} mark_row={linked.mark_row} />
        }
    }

    /// The difference map this − `b` on its own diverging scale (`None` when the sizes differ).
    fn difference(&self, b: &Zoomed, title: String, model: String, linked: &Linked) -> Option<Html> {
        let (t, la) = (self.trace, self.layer);
        let d = compare::difference(&self.matrix, &b.matrix, la.n)?;
        Some(html! {
            <Heatmap id="heatmap-diff" title={title} matrix={Rc::new(d)} n={la.n} labels={self.labels.clone()}
                signed={true} tokens={t.labels.len()} stride={t.stride} kind={la.kind}
                value_name={format!("difference of {:?}", la.kind).to_lowercase()}
                model={model} cell={linked.cell} on_cell={linked.on_cell.clone()} mark_row={linked.mark_row} />
        })
    }
}
