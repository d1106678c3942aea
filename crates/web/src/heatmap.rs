//! Attention heatmaps drawn as pixels: one canvas `ImageData` per matrix (never a DOM node per cell),
//! scaled up by CSS with `image-rendering: pixelated`.
//!
//! The zoomed map reads out the cell under the pointer; a click locks it, the arrow keys move it
//! (with an aria-live read-out), and "copy as CSV" puts the matrix on the clipboard. The locked cell
//! belongs to the parent (it links the map to the token strip and the URL); the map marks the
//! query row the strip points at.
//!
//! Zoom and pan show a window of the map, down to single tokens: cut from the exact matrix in the
//! page, or, when the page holds a binned map of a long trace (a cell = `stride` × `stride`
//! tokens), fetched from the worker's WebGPU trace a window at a time ([`TileSource`]), so a
//! 8,192 × 8,192 map never exists in the page.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use attnlab_core::analysis::{attention_window, MapWindow};
use attnlab_core::attention::{AttnMatrixKind, LayerAttention};
use wasm_bindgen::{Clamped, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData};
use yew::prelude::*;

use crate::colors::{Scale, MASKED};
use crate::figure;
use crate::lab;
use crate::plot::{self, Format};
use crate::share::Share;

/// The narrowest zoom window, in tokens.
const MIN_ZOOM_TOKENS: usize = 8;

/// A window's values, on their way from the worker.
pub type TileFuture = Pin<Box<dyn Future<Output = Result<Vec<f32>, String>>>>;

/// Where the windows of a binned map come from: the worker's WebGPU trace of the same text, layer
/// and head. Sources with the same `key` fetch the same maps.
#[derive(Clone)]
pub struct TileSource {
    pub key: String,
    pub fetch: Rc<dyn Fn(MapWindow) -> TileFuture>,
}

impl PartialEq for TileSource {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

/// Paint `matrix` (`[n, n]`, row = query) into `canvas`; cells above the diagonal are masked.
pub fn paint(canvas: &HtmlCanvasElement, matrix: &[f32], n: usize, scale: &Scale) -> Result<(), String> {
    paint_masked(canvas, matrix, n, scale, &|i, j| j > i)
}

/// Paint `matrix` (`[n, n]`) into `canvas`, cells for which `masked(row, col)` holds in grey.
fn paint_masked(
    canvas: &HtmlCanvasElement,
    matrix: &[f32],
    n: usize,
    scale: &Scale,
    masked: &dyn Fn(usize, usize) -> bool,
) -> Result<(), String> {
    if n == 0 || matrix.len() < n * n {
        return Err(format!("heatmap: matrix has {} values, expected {n}×{n}", matrix.len()));
    }
    canvas.set_width(n as u32);
    canvas.set_height(n as u32);
    let ctx: CanvasRenderingContext2d = canvas
        .get_context("2d")
        .map_err(|_| "heatmap: canvas 2d context failed".to_string())?
        .ok_or_else(|| "heatmap: no canvas 2d context".to_string())?
        .dyn_into()
        .map_err(|_| "heatmap: unexpected context type".to_string())?;
    let mut rgba = vec![255u8; n * n * 4];
    for i in 0..n {
        for j in 0..n {
            let c = if masked(i, j) { MASKED } else { scale.color(matrix[i * n + j]) };
            let o = (i * n + j) * 4;
            rgba[o..o + 3].copy_from_slice(&c);
        }
    }
    let image = ImageData::new_with_u8_clamped_array_and_sh(Clamped(&rgba), n as u32, n as u32)
        .map_err(|_| "heatmap: ImageData failed".to_string())?;
    ctx.put_image_data(&image, 0.0, 0.0).map_err(|_| "heatmap: putImageData failed".to_string())
}

/// Colour scale fitted to the visible (causal) cells of `matrix` (`[n, n]`).
pub fn fit_scale(matrix: &[f32], n: usize, signed: bool) -> Scale {
    Scale::fit((0..n).flat_map(|i| (0..=i).map(move |j| matrix[i * n + j])), signed)
}

/// Properties of a zoomed heatmap.
#[derive(Properties, PartialEq)]
pub struct HeatmapProps {
    pub id: AttrValue,
    pub title: AttrValue,
    /// `[n, n]` row-major.
    pub matrix: Rc<Vec<f32>>,
    pub n: usize,
    /// Token label per position (axis labels and read-out).
    pub labels: Rc<Vec<String>>,
    /// Diverging map (logits, biases, signed linear scores) instead of sequential.
    pub signed: bool,
    /// What the values are (for the colorbar), e.g. "probability".
    pub value_name: AttrValue,
    /// Name of the model (the exported figure's caption).
    #[prop_or_default]
    pub model: AttrValue,
    /// The locked cell `(query, key)` (the parent's, may lie outside the matrix).
    #[prop_or_default]
    pub cell: Option<(usize, usize)>,
    /// A new locked cell (or none) chosen on the map.
    #[prop_or_default]
    pub on_cell: Callback<Option<(usize, usize)>>,
    /// The query row the token strip points at (marked with a band).
    #[prop_or_default]
    pub mark_row: Option<usize>,
    /// The colour scale, when it is shared with another map (compare mode); else fitted to this
    /// matrix.
    #[prop_or_default]
    pub scale: Option<Scale>,
    /// Tokens the map covers (`labels` has one per token); 0: `n`.
    #[prop_or_default]
    pub tokens: usize,
    /// Tokens per cell side of `matrix` (1: exact; then cells, `cell` and `mark_row` are tokens).
    #[prop_or(1)]
    pub stride: usize,
    /// What the values are (how a binned window combines keys: scores average, the rest sum).
    #[prop_or(AttnMatrixKind::Probabilities)]
    pub kind: AttnMatrixKind,
    /// Where the windows of a binned map come from.
    #[prop_or_default]
    pub tiles: Option<TileSource>,
}

impl HeatmapProps {
    /// The scale the map is painted with.
    fn scale(&self) -> Scale {
        self.scale.unwrap_or_else(|| fit_scale(&self.matrix, self.n, self.signed))
    }

    /// The locked cell (tokens) when it lies inside an exact matrix.
    fn locked(&self) -> Option<(usize, usize)> {
        self.cell.filter(|&(i, j)| self.stride == 1 && i < self.n && j < self.n)
    }

    fn tokens(&self) -> usize {
        if self.tokens == 0 {
            self.n
        } else {
            self.tokens
        }
    }

    /// The whole map as a window.
    fn base(&self) -> MapWindow {
        MapWindow { row0: 0, col0: 0, side: self.n, stride: self.stride.max(1) }
    }

    /// Labels of the whole map's cells: the tokens' own, or the token range of each binned cell.
    fn cell_labels(&self) -> Rc<Vec<String>> {
        if self.stride <= 1 {
            return self.labels.clone();
        }
        let (s, t) = (self.stride, self.tokens());
        Rc::new((0..self.n).map(|c| format!("{}–{}", c * s, ((c + 1) * s).min(t) - 1)).collect())
    }
}

/// The window on screen: its place in the map and its values.
#[derive(Clone)]
struct Shown {
    window: MapWindow,
    values: Rc<Vec<f32>>,
}

impl Shown {
    /// Query (token) of window row `b` and the keys [lo, hi] of column `c`.
    fn cell(&self, tokens: usize, (b, c): (usize, usize)) -> (usize, usize, usize) {
        let w = &self.window;
        let i = w.query(tokens, b);
        let lo = w.col0 + c * w.stride;
        (i, lo, (lo + w.stride - 1).min(tokens.saturating_sub(1)))
    }

    /// Window cell (row, column) of token cell (query, key), when it is on screen.
    fn locate(&self, tokens: usize, (i, j): (usize, usize)) -> Option<(usize, usize)> {
        let w = &self.window;
        let (b, c) = (i.checked_sub(w.row0)? / w.stride, j.checked_sub(w.col0)? / w.stride);
        (b < w.side && c < w.side && w.query(tokens, b) == i).then_some((b, c))
    }

    fn masked(&self, tokens: usize, (b, c): (usize, usize)) -> bool {
        let (i, lo, _) = self.cell(tokens, (b, c));
        lo > i
    }

    /// Width in tokens and centre (query, key) of the window.
    fn span(&self) -> (usize, (usize, usize)) {
        let w = &self.window;
        let width = w.side * w.stride;
        (width, (w.row0 + width / 2, w.col0 + width / 2))
    }
}

pub enum HeatMsg {
    Hover(i32, i32, f64, f64),
    /// Zoom by this factor (½: in) around the hovered or locked cell, else the window's centre.
    Zoom(f64),
    /// Move the window by this many quarter widths (rows, columns).
    Pan(i64, i64),
    /// Back to the whole map.
    Whole,
    /// A fetched window (request number, window, values).
    Tile(u32, MapWindow, Result<Vec<f32>, String>),
    Leave,
    Click,
    Key(KeyboardEvent),
    Copy,
    Copied(Result<(), String>),
    Export(Format),
    Exported(Result<String, String>),
}

/// The zoomed heatmap with read-out, keyboard navigation, colorbar and CSV export.
pub struct Heatmap {
    canvas: NodeRef,
    hover: Option<(usize, usize)>,
    copy_status: String,
    export_status: String,
    error: Option<String>,
    /// Set by a key press: the next render gives the canvas the focus back, so arrow keys keep working.
    refocus: bool,
    /// Colour scale of the current matrix (refitted when the props change).
    scale: Scale,
    /// The canvas needs painting: only after the matrix changed, not on every hover re-render.
    repaint: bool,
    /// The canvas element last painted (a re-created element is painted again).
    painted: Option<HtmlCanvasElement>,
    /// The page's URL state (the exports' caption).
    share: Option<Share>,
    /// The zoomed window on screen (`None`: the whole map).
    zoom: Option<Shown>,
    /// A window asked of the worker and not yet here, with its request number.
    pending: Option<(u32, MapWindow)>,
    requests: u32,
    /// Why the last window could not be shown.
    zoom_error: Option<String>,
}

/// The zoom window `width` tokens wide centred on token cell `(query, key)`.
fn centred(tokens: usize, width: usize, (i, j): (usize, usize)) -> MapWindow {
    let half = width / 2;
    lab::zoom_window(tokens, width, i.saturating_sub(half), j.saturating_sub(half))
}

impl Heatmap {
    /// The token cell (query, first key) under the pointer.
    fn hovered(&self, p: &HeatmapProps, shown: &Shown) -> Option<(usize, usize)> {
        self.hover.map(|c| {
            let (i, j, _) = shown.cell(p.tokens(), c);
            (i, j)
        })
    }

    /// The window on screen: the zoom, else the whole map.
    fn shown(&self, p: &HeatmapProps) -> Shown {
        self.zoom.clone().unwrap_or_else(|| Shown { window: p.base(), values: p.matrix.clone() })
    }

    /// Export the whole map (whatever the zoom shows): SVG and PNG of it painted, CSV and JSON of
    /// its values, with each cell's tokens as labels.
    fn export(&self, ctx: &Context<Self>, format: Format) {
        let p = ctx.props();
        let done = ctx.link().callback(HeatMsg::Exported);
        let caption = plot::caption_of(self.share.as_ref(), &p.model);
        let name = format!("attnlab-{}.{}", p.id, format.ext());
        let labels = p.cell_labels();
        let (text, size) = match format {
            Format::Csv => (crate::lab::matrix_csv(&labels, &p.matrix, p.n), (0.0, 0.0)),
            Format::Json => {
                (figure::matrix_json(&p.title, &p.value_name, &caption, &labels, &p.matrix, p.n), (0.0, 0.0))
            }
            Format::Svg | Format::Png => {
                let scale = p.scale();
                let image = web_sys::window()
                    .and_then(|w| w.document())
                    .and_then(|d| d.create_element("canvas").ok())
                    .and_then(|c| c.dyn_into::<HtmlCanvasElement>().ok())
                    .filter(|c| paint(c, &p.matrix, p.n, &scale).is_ok())
                    .map(|c| c.to_data_url());
                let Some(Ok(image)) = image else {
                    return done.emit(Err("the heatmap could not be painted for export".to_string()));
                };
                let (svg, w, h) =
                    figure::heatmap_svg(&p.title, &p.value_name, &caption, &labels, p.n, &scale, &image);
                (svg, (w, h))
            }
        };
        plot::deliver(format, name, text, size, done);
    }

    /// The read-out of window cell `(b, c)`, in tokens.
    fn cell_text(props: &HeatmapProps, shown: &Shown, (b, c): (usize, usize)) -> String {
        let label = |k: usize| props.labels.get(k).map(|s| format!("{s:?}")).unwrap_or_default();
        let (i, lo, hi) = shown.cell(props.tokens(), (b, c));
        if lo > i {
            return format!("query {i} {} → key {lo} {}: masked (future key)", label(i), label(lo));
        }
        let value = shown.values.get(b * shown.window.side + c).copied().unwrap_or(f32::NAN);
        if shown.window.stride == 1 {
            return format!("query {i} {} → key {lo} {}: {value:.6}", label(i), label(lo));
        }
        let how = if props.kind == AttnMatrixKind::Scores { "mean" } else { "sum" };
        format!(
            "query {i} {} → keys {lo}–{} ({how} of {} keys): {value:.6}",
            label(i),
            hi.min(i),
            hi.min(i) - lo + 1
        )
    }

    /// Show `window`: cut from the exact matrix in the page, else asked of the worker.
    fn show(&mut self, ctx: &Context<Self>, window: MapWindow) {
        let p = ctx.props();
        self.zoom_error = None;
        self.hover = None;
        if window == p.base() {
            (self.zoom, self.pending) = (None, None);
        } else if p.stride == 1 {
            let whole = LayerAttention { layer: 0, kind: p.kind, n: p.n, heads: vec![(*p.matrix).clone()] };
            let values = attention_window(&whole, window).heads.pop().unwrap_or_default();
            (self.zoom, self.pending) = (Some(Shown { window, values: Rc::new(values) }), None);
        } else if let Some(source) = &p.tiles {
            self.requests = self.requests.wrapping_add(1);
            let (request, fetch) = (self.requests, source.fetch.clone());
            self.pending = Some((request, window));
            ctx.link().send_future(async move { HeatMsg::Tile(request, window, fetch(window).await) });
            return;
        } else {
            self.zoom_error = Some("this binned map has no source of finer windows".to_string());
            return;
        }
        self.scale = self.fit(p);
        self.repaint = true;
    }

    /// The colour scale of what is on screen: the whole map's (shared in compare mode), or fitted
    /// to the zoomed window's visible cells.
    fn fit(&self, p: &HeatmapProps) -> Scale {
        match &self.zoom {
            None => p.scale(),
            Some(z) => {
                let (t, side) = (p.tokens(), z.window.side);
                let visible = (0..side * side).filter(|&k| !z.masked(t, (k / side, k % side)));
                Scale::fit(visible.map(|k| z.values[k]), p.signed)
            }
        }
    }

    /// Zoom by `factor` around the hovered or locked cell, else around the window's centre.
    fn zoom_by(&mut self, ctx: &Context<Self>, factor: f64) {
        let p = ctx.props();
        let shown = self.shown(p);
        let (width, centre) = shown.span();
        let centre = match self.hover.or_else(|| p.locked().and_then(|c| shown.locate(p.tokens(), c))) {
            Some(cell) => {
                let (i, lo, hi) = shown.cell(p.tokens(), cell);
                (i, (lo + hi) / 2)
            }
            None => centre,
        };
        let new = ((width as f64 * factor).round() as usize).max(MIN_ZOOM_TOKENS);
        if new >= p.tokens() {
            return self.show(ctx, p.base());
        }
        self.show(ctx, centred(p.tokens(), new, centre));
    }

    /// Move the window by quarter widths.
    fn pan(&mut self, ctx: &Context<Self>, rows: i64, cols: i64) {
        let p = ctx.props();
        let Some(z) = &self.zoom else { return };
        let (width, _) = z.span();
        let step = (width / 4).max(1) as i64;
        let at = |o: usize, d: i64| (o as i64 + d * step).max(0) as usize;
        let w = &z.window;
        self.show(ctx, lab::zoom_window(p.tokens(), width, at(w.row0, rows), at(w.col0, cols)));
    }
}

impl Component for Heatmap {
    type Message = HeatMsg;
    type Properties = HeatmapProps;

    fn create(ctx: &Context<Self>) -> Self {
        let p = ctx.props();
        let share = ctx.link().context::<Share>(Callback::noop()).map(|(share, _)| share);
        Heatmap {
            scale: p.scale(),
            repaint: true,
            painted: None,
            canvas: NodeRef::default(),
            hover: None,
            copy_status: String::new(),
            export_status: String::new(),
            error: None,
            refocus: false,
            share,
            zoom: None,
            pending: None,
            requests: 0,
            zoom_error: None,
        }
    }

    fn changed(&mut self, ctx: &Context<Self>, old: &Self::Properties) -> bool {
        let p = ctx.props();
        let new_map =
            p.n != old.n || p.matrix != old.matrix || p.tokens != old.tokens || p.tiles != old.tiles;
        if new_map {
            self.hover = None;
            // Another map: the same window of it (the zoom stays where the user put it).
            if let Some(w) =
                self.zoom.as_ref().map(|z| z.window).filter(|w| w.check(p.tokens(), lab::TILE_SIDE).is_ok())
            {
                self.zoom = None;
                self.show(ctx, w);
            } else {
                (self.zoom, self.pending) = (None, None);
            }
        }
        // Only new values are painted again (not a moved mark or lock).
        if new_map || p.signed != old.signed || p.scale != old.scale {
            self.scale = self.fit(p);
            self.repaint = true;
        }
        true
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        let p = ctx.props();
        let shown = self.shown(p);
        let n = shown.window.side;
        match msg {
            HeatMsg::Hover(x, y, w, h) => {
                if n == 0 || w <= 0.0 || h <= 0.0 {
                    return false;
                }
                let j = ((x as f64 / w) * n as f64).floor().clamp(0.0, (n - 1) as f64) as usize;
                let i = ((y as f64 / h) * n as f64).floor().clamp(0.0, (n - 1) as f64) as usize;
                if self.hover == Some((i, j)) {
                    return false;
                }
                self.hover = Some((i, j));
            }
            HeatMsg::Leave => self.hover = None,
            HeatMsg::Click => {
                if shown.window.stride > 1 {
                    // A binned cell: look closer.
                    self.zoom_by(ctx, 0.25);
                    return true;
                }
                let next = match (p.locked(), self.hovered(p, &shown)) {
                    (Some(l), Some(h)) if l == h => None,
                    (_, Some(h)) => Some(h),
                    (l, None) => l,
                };
                p.on_cell.emit(next);
            }
            HeatMsg::Key(e) => return self.key(ctx, &shown, e),
            HeatMsg::Zoom(f) => self.zoom_by(ctx, f),
            HeatMsg::Pan(r, c) => self.pan(ctx, r, c),
            HeatMsg::Whole => self.show(ctx, p.base()),
            HeatMsg::Tile(request, window, result) => {
                if self.pending.map(|(r, _)| r) != Some(request) {
                    return false;
                }
                self.pending = None;
                match result {
                    Ok(values) if values.len() == window.side * window.side => {
                        self.zoom = Some(Shown { window, values: Rc::new(values) });
                        self.scale = self.fit(p);
                        self.repaint = true;
                    }
                    Ok(values) => {
                        self.zoom_error = Some(format!(
                            "the worker sent {} values for a {}-cell window",
                            values.len(),
                            window.side
                        ))
                    }
                    // A newer window took this one's place.
                    Err(e) if e == "superseded" => {}
                    Err(e) => self.zoom_error = Some(e),
                }
            }
            HeatMsg::Copy => {
                let csv = crate::lab::matrix_csv(&p.cell_labels(), &p.matrix, p.n);
                let link = ctx.link().clone();
                wasm_bindgen_futures::spawn_local(async move {
                    link.send_message(HeatMsg::Copied(crate::export::copy_text(&csv).await));
                });
                self.copy_status = "copying…".to_string();
            }
            HeatMsg::Export(format) => self.export(ctx, format),
            HeatMsg::Exported(r) => {
                self.export_status = match r {
                    Ok(file) => format!("saved {file}"),
                    Err(e) => format!("export failed: {e}"),
                }
            }
            HeatMsg::Copied(r) => {
                self.copy_status = match r {
                    Ok(()) => format!("copied {0}×{0} matrix as CSV", p.n),
                    Err(e) => format!("copy failed: {e}"),
                }
            }
        }
        true
    }

    fn rendered(&mut self, ctx: &Context<Self>, _first: bool) {
        let props = ctx.props();
        if let Some(canvas) = self.canvas.cast::<HtmlCanvasElement>() {
            if std::mem::take(&mut self.repaint) || self.painted.as_ref() != Some(&canvas) {
                let shown = self.shown(props);
                let t = props.tokens();
                let masked = |b: usize, c: usize| shown.masked(t, (b, c));
                self.error =
                    paint_masked(&canvas, &shown.values, shown.window.side, &self.scale, &masked).err();
                self.painted = Some(canvas.clone());
            }
            if std::mem::take(&mut self.refocus) {
                let _ = canvas.focus();
            }
        }
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let props = ctx.props();
        let shown = self.shown(props);
        let (n, t) = (shown.window.side, props.tokens());
        let link = ctx.link();
        let scale = self.scale;
        let onmousemove = link.callback(|e: MouseEvent| {
            let target: web_sys::Element = e.target_unchecked_into();
            let rect = target.get_bounding_client_rect();
            HeatMsg::Hover(
                e.client_x() - rect.left() as i32,
                e.client_y() - rect.top() as i32,
                rect.width(),
                rect.height(),
            )
        });
        let locked = props.locked().and_then(|c| shown.locate(t, c));
        let selected = locked.or(self.hover);
        let readout = Self::readout(props, &shown, selected);
        let (sel_attr, val_attr) = match selected {
            Some(c) => {
                let (i, j, _) = shown.cell(t, c);
                let value =
                    if j > i { "masked".to_string() } else { format!("{}", shown.values[c.0 * n + c.1]) };
                (format!("{i},{j}"), value)
            }
            None => (String::new(), String::new()),
        };
        let mark_row = props.mark_row.filter(|&i| props.stride == 1 && i < props.n);
        let w = shown.window;
        html! {
            <div class="heatmap" id={props.id.clone()} data-n={n.to_string()} data-selected={sel_attr} data-value={val_attr}
                data-row={mark_row.map(|i| i.to_string()).unwrap_or_default()} data-tokens={t.to_string()}
                data-window={format!("{},{},{},{}", w.row0, w.col0, w.side, w.stride)} data-zoom={self.zoom_state()}>
                <div class="heatmap-title">{ &props.title }</div>
                { self.view_zoom_bar(ctx, &shown) }
                <div class="heatmap-body">
                    { Self::axis(props, n, "y-axis", "top", |k| shown.window.query(t, k)) }
                    <div class="canvas-wrap">
                        <canvas ref={self.canvas.clone()} tabindex="0" role="grid"
                            aria-label={format!("{} heatmap, {n} by {n}; arrow keys move the selected cell, + and − zoom", props.title)}
                            onmousemove={onmousemove} onmouseleave={link.callback(|_| HeatMsg::Leave)}
                            onclick={link.callback(|_| HeatMsg::Click)}
                            onkeydown={link.callback(HeatMsg::Key)}></canvas>
                        { Self::marks(&shown, t, locked, mark_row) }
                    </div>
                </div>
                { Self::axis(props, n, "x-axis", "left", |k| w.col0 + k * w.stride) }
                <div class="colorbar">
                    <span>{ format!("{:.3}", scale.lo) }</span>
                    <div class="colorbar-ramp" style={format!("background:{}", scale.css_gradient())}></div>
                    <span>{ format!("{:.3}", scale.hi) }</span>
                    <span class="muted">{ format!(" {} · ", props.value_name) }</span>
                    <span class="masked-swatch"></span><span class="muted">{ " masked" }</span>
                </div>
                <p class="readout" aria-live="polite">{ readout }</p>
                <div class="buttons">
                    <button class="copy-csv" onclick={link.callback(|_| HeatMsg::Copy)}>{ "copy as CSV" }</button>
                    <span class="muted">{ &self.copy_status }</span>
                </div>
                { plot::export_buttons(&props.id, &self.export_status, &link.callback(HeatMsg::Export)) }
                if let Some(e) = &self.error { <p class="error">{ e }</p> }
            </div>
        }
    }
}

impl Heatmap {
    /// The line under the map: the selected cell's text, or how to use the map.
    fn readout(props: &HeatmapProps, shown: &Shown, selected: Option<(usize, usize)>) -> String {
        let outside = props.cell.filter(|&(i, j)| props.stride == 1 && (i >= props.n || j >= props.n));
        match (selected, outside) {
            (Some(c), _) => Self::cell_text(props, shown, c),
            (None, Some((i, j))) => format!(
                "the link's cell (query {i}, key {j}) is outside this {}-token text; hover a cell, click to lock it",
                props.n
            ),
            (None, None) if shown.window.stride > 1 => {
                "hover a cell; click it (or +) to zoom in, down to single tokens".to_string()
            }
            (None, None) => "hover a cell; click to lock it; arrow keys move it; + and − zoom".to_string(),
        }
    }

    /// The zoom's state for the page's tests: loading, error, zoomed or whole.
    fn zoom_state(&self) -> &'static str {
        if self.pending.is_some() {
            "loading"
        } else if self.zoom_error.is_some() {
            "error"
        } else if self.zoom.is_some() {
            "zoomed"
        } else {
            "whole"
        }
    }

    /// An axis of the `n`-cell map (`class`, placed by the CSS property `side`): up to five
    /// positions, each at its cell's centre and named by the token `token(k)` of cell `k`.
    fn axis(props: &HeatmapProps, n: usize, class: &str, side: &str, token: impl Fn(usize) -> usize) -> Html {
        let mut ticks: Vec<usize> = if n <= 1 { vec![0] } else { (0..5).map(|t| t * (n - 1) / 4).collect() };
        ticks.dedup();
        let pos = |k: usize| 100.0 * (k as f64 + 0.5) / n.max(1) as f64;
        let label = |k: usize| {
            let id = token(k);
            format!("{id} {}", props.labels.get(id).cloned().unwrap_or_default())
        };
        html! {
            <div class={class.to_string()} aria-hidden="true">
                { for ticks.iter().map(|&k| html! { <span style={format!("{side}:{:.3}%", pos(k))}>{ label(k) }</span> }) }
            </div>
        }
    }

    /// The marks over the canvas: the locked cell's crosshair and the linked row's band. They sit
    /// in one fixed element: yew matches unkeyed children from the end, so a mark appearing beside
    /// the canvas would replace the canvas (and drop its keyboard focus).
    fn marks(shown: &Shown, tokens: usize, locked: Option<(usize, usize)>, mark_row: Option<usize>) -> Html {
        let n = shown.window.side;
        let crosshair = locked.map(|(i, j)| {
            let (x, y) = (100.0 * (j as f64 + 0.5) / n as f64, 100.0 * (i as f64 + 0.5) / n as f64);
            html! { <div class="crosshair" style={format!("left:{x:.3}%;top:{y:.3}%")}></div> }
        });
        let band = mark_row.and_then(|i| shown.locate(tokens, (i, shown.window.col0))).map(|(b, _)| {
            let (top, height) = (100.0 * b as f64 / n as f64, 100.0 / n as f64);
            html! { <div class="row-mark" aria-hidden="true"
            style={format!("top:{top:.3}%;height:{height:.3}%")}></div> }
        });
        html! { <div class="marks">{ for band }{ for crosshair }</div> }
    }

    /// The zoom and pan buttons and where the window lies.
    fn view_zoom_bar(&self, ctx: &Context<Self>, shown: &Shown) -> Html {
        let (p, link) = (ctx.props(), ctx.link());
        let w = shown.window;
        let (width, t) = (w.side * w.stride, p.tokens());
        let last = |o: usize| (o + width).min(t) - 1;
        let place = format!(
            "queries {}–{}, keys {}–{} of {t} tokens · {}",
            w.row0,
            last(w.row0),
            w.col0,
            last(w.col0),
            if w.stride == 1 {
                "one token per cell".to_string()
            } else {
                format!("{0}×{0} tokens per cell", w.stride)
            }
        );
        let status = match (&self.pending, &self.zoom_error) {
            (Some((_, asked)), _) => {
                format!(" · fetching {}×{} cells from the GPU trace…", asked.side, asked.side)
            }
            (None, Some(e)) => format!(" · zoom failed: {e}"),
            (None, None) => String::new(),
        };
        let id = |what: &str| format!("{}-{what}", p.id);
        let zoomed = self.zoom.is_some();
        let button =
            |what: &str, label: &'static str, title: &'static str, msg: fn() -> HeatMsg, enabled: bool| {
                html! { <button id={id(what)} title={title} disabled={!enabled}
                onclick={link.callback(move |_| msg())}>{ label }</button> }
            };
        html! {
            <div class="zoom-bar">
                { button("zoom-in", "+", "Zoom in (+), around the hovered or locked cell", || HeatMsg::Zoom(0.5), width > MIN_ZOOM_TOKENS) }
                { button("zoom-out", "−", "Zoom out (−)", || HeatMsg::Zoom(2.0), zoomed) }
                { button("pan-left", "←", "Earlier keys", || HeatMsg::Pan(0, -1), zoomed && w.col0 > 0) }
                { button("pan-right", "→", "Later keys", || HeatMsg::Pan(0, 1), zoomed && w.col0 + width < t) }
                { button("pan-up", "↑", "Earlier queries", || HeatMsg::Pan(-1, 0), zoomed && w.row0 > 0) }
                { button("pan-down", "↓", "Later queries", || HeatMsg::Pan(1, 0), zoomed && w.row0 + width < t) }
                { button("zoom-whole", "whole map", "Show the whole map (0)", || HeatMsg::Whole, zoomed) }
                <span class="muted zoom-place">{ place }{ status }</span>
            </div>
        }
    }

    /// Keys: arrows move the locked cell (panning along when it leaves the window; on a binned map
    /// they pan), Home/End go to the row's first key and the diagonal, + − 0 zoom.
    fn key(&mut self, ctx: &Context<Self>, shown: &Shown, e: KeyboardEvent) -> bool {
        let p = ctx.props();
        let t = p.tokens();
        if t == 0 {
            return false;
        }
        match e.key().as_str() {
            "+" | "=" => self.zoom_by(ctx, 0.5),
            "-" | "_" => self.zoom_by(ctx, 2.0),
            "0" => self.show(ctx, p.base()),
            "Escape" => p.on_cell.emit(None),
            key if shown.window.stride > 1 || p.stride > 1 => {
                let (r, c) = match key {
                    "ArrowUp" => (-1, 0),
                    "ArrowDown" => (1, 0),
                    "ArrowLeft" => (0, -1),
                    "ArrowRight" => (0, 1),
                    _ => return false,
                };
                self.pan(ctx, r, c);
            }
            key => {
                let (i, j) =
                    p.locked().or(self.hovered(p, shown)).unwrap_or((shown.window.row0, shown.window.col0));
                let next = match key {
                    "ArrowUp" => (i.saturating_sub(1), j),
                    "ArrowDown" => ((i + 1).min(t - 1), j),
                    "ArrowLeft" => (i, j.saturating_sub(1)),
                    "ArrowRight" => (i, (j + 1).min(t - 1)),
                    "Home" => (i, 0),
                    "End" => (i, i),
                    _ => return false,
                };
                if self.zoom.is_some() && shown.locate(t, next).is_none() {
                    self.show(ctx, centred(t, shown.span().0, next));
                }
                p.on_cell.emit(Some(next));
            }
        }
        e.prevent_default();
        self.refocus = true;
        true
    }
}

/// Properties of a thumbnail in the layer × head grid.
#[derive(Properties, PartialEq)]
pub struct ThumbProps {
    pub matrix: Rc<Vec<f32>>,
    pub n: usize,
    pub signed: bool,
    pub selected: bool,
    pub label: AttrValue,
    pub onselect: Callback<()>,
}

/// A small, clickable heatmap.
#[function_component(Thumb)]
pub fn thumb(props: &ThumbProps) -> Html {
    let canvas = use_node_ref();
    {
        let canvas = canvas.clone();
        let (matrix, n, signed) = (props.matrix.clone(), props.n, props.signed);
        use_effect_with((matrix, n, signed), move |(matrix, n, signed)| {
            if let Some(c) = canvas.cast::<HtmlCanvasElement>() {
                let _ = paint(&c, matrix, *n, &fit_scale(matrix, *n, *signed));
            }
        });
    }
    let onselect = props.onselect.clone();
    html! {
        <button class={classes!("thumb", props.selected.then_some("selected"))} title={props.label.clone()}
            aria-pressed={props.selected.to_string()} onclick={move |_| onselect.emit(())}>
            <canvas ref={canvas}></canvas>
            <span>{ &props.label }</span>
        </button>
    }
}
