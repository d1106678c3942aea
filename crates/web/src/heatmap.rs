//! Attention heatmaps drawn as pixels: one canvas `ImageData` per matrix (never a DOM node per cell),
//! scaled up by CSS with `image-rendering: pixelated`.
//!
//! The zoomed map reads out the cell under the pointer; a click locks it, the arrow keys move it
//! (with an aria-live read-out), and "copy as CSV" puts the matrix on the clipboard. The locked cell
//! belongs to the parent (it links the map to the token strip and the URL); the map marks the
//! query row the strip points at.

use std::rc::Rc;

use wasm_bindgen::{Clamped, JsCast};
use web_sys::{CanvasRenderingContext2d, HtmlCanvasElement, ImageData};
use yew::prelude::*;

use crate::colors::{Scale, MASKED};
use crate::figure;
use crate::plot::{self, Format};
use crate::share::Share;

/// Paint `matrix` (`[n, n]`, row = query) into `canvas`; cells above the diagonal are masked.
pub fn paint(canvas: &HtmlCanvasElement, matrix: &[f32], n: usize, scale: &Scale) -> Result<(), String> {
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
            let c = if j > i { MASKED } else { scale.color(matrix[i * n + j]) };
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
}

impl HeatmapProps {
    /// The scale the map is painted with.
    fn scale(&self) -> Scale {
        self.scale.unwrap_or_else(|| fit_scale(&self.matrix, self.n, self.signed))
    }

    /// The locked cell when it lies inside the matrix.
    fn locked(&self) -> Option<(usize, usize)> {
        self.cell.filter(|&(i, j)| i < self.n && j < self.n)
    }
}

pub enum HeatMsg {
    Hover(i32, i32, f64, f64),
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
}

impl Heatmap {
    /// Export the matrix: SVG and PNG around the canvas as painted, CSV and JSON of its values.
    fn export(&self, ctx: &Context<Self>, format: Format) {
        let p = ctx.props();
        let done = ctx.link().callback(HeatMsg::Exported);
        let caption = plot::caption_of(self.share.as_ref(), &p.model);
        let name = format!("attnlab-{}.{}", p.id, format.ext());
        let (text, size) = match format {
            Format::Csv => (crate::lab::matrix_csv(&p.labels, &p.matrix, p.n), (0.0, 0.0)),
            Format::Json => (
                figure::matrix_json(&p.title, &p.value_name, &caption, &p.labels, &p.matrix, p.n),
                (0.0, 0.0),
            ),
            Format::Svg | Format::Png => {
                let image = self.canvas.cast::<HtmlCanvasElement>().map(|c| c.to_data_url());
                let Some(Ok(image)) = image else {
                    return done.emit(Err("the heatmap's canvas could not be read".to_string()));
                };
                let (svg, w, h) = figure::heatmap_svg(
                    &p.title,
                    &p.value_name,
                    &caption,
                    &p.labels,
                    p.n,
                    &self.scale,
                    &image,
                );
                (svg, (w, h))
            }
        };
        plot::deliver(format, name, text, size, done);
    }

    fn cell_text(props: &HeatmapProps, (i, j): (usize, usize)) -> String {
        let label = |k: usize| props.labels.get(k).map(|s| format!("{s:?}")).unwrap_or_default();
        let value = if j > i {
            "masked (future key)".to_string()
        } else {
            format!("{:.6}", props.matrix[i * props.n + j])
        };
        format!("query {i} {} → key {j} {}: {value}", label(i), label(j))
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
        }
    }

    fn changed(&mut self, ctx: &Context<Self>, old: &Self::Properties) -> bool {
        let p = ctx.props();
        if p.n != old.n {
            self.hover = None;
        }
        // Only new values are painted again (not a moved mark or lock).
        if p.n != old.n || p.signed != old.signed || p.scale != old.scale || p.matrix != old.matrix {
            self.scale = p.scale();
            self.repaint = true;
        }
        true
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        let n = ctx.props().n;
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
                let locked = ctx.props().locked();
                let next = match (locked, self.hover) {
                    (Some(l), Some(h)) if l == h => None,
                    (_, Some(h)) => Some(h),
                    (l, None) => l,
                };
                ctx.props().on_cell.emit(next);
            }
            HeatMsg::Key(e) => {
                if n == 0 {
                    return false;
                }
                let (i, j) = ctx.props().locked().or(self.hover).unwrap_or((0, 0));
                let next = match e.key().as_str() {
                    "ArrowUp" => (i.saturating_sub(1), j),
                    "ArrowDown" => ((i + 1).min(n - 1), j),
                    "ArrowLeft" => (i, j.saturating_sub(1)),
                    "ArrowRight" => (i, (j + 1).min(n - 1)),
                    "Home" => (i, 0),
                    "End" => (i, i),
                    "Escape" => {
                        ctx.props().on_cell.emit(None);
                        return true;
                    }
                    _ => return false,
                };
                e.prevent_default();
                ctx.props().on_cell.emit(Some(next));
                self.refocus = true;
            }
            HeatMsg::Copy => {
                let props = ctx.props();
                let csv = crate::lab::matrix_csv(&props.labels, &props.matrix, n);
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
                    Ok(()) => format!("copied {n}×{n} matrix as CSV"),
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
                self.error = paint(&canvas, &props.matrix, props.n, &self.scale).err();
                self.painted = Some(canvas.clone());
            }
            if std::mem::take(&mut self.refocus) {
                let _ = canvas.focus();
            }
        }
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let props = ctx.props();
        let n = props.n;
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
        let locked = props.locked();
        let selected = locked.or(self.hover);
        let outside = props.cell.filter(|&(i, j)| i >= n || j >= n);
        let readout = match (selected, outside) {
            (Some(c), _) => Self::cell_text(props, c),
            (None, Some((i, j))) => format!(
                "the link's cell (query {i}, key {j}) is outside this {n}-token text; hover a cell, click to lock it"
            ),
            (None, None) => "hover a cell; click to lock it; arrow keys move it".to_string(),
        };
        let (sel_attr, val_attr) = match selected {
            Some((i, j)) if j <= i => (format!("{i},{j}"), format!("{}", props.matrix[i * n + j])),
            Some((i, j)) => (format!("{i},{j}"), "masked".to_string()),
            None => (String::new(), String::new()),
        };
        let crosshair = locked.map(|(i, j)| {
            let (x, y) = (100.0 * (j as f64 + 0.5) / n as f64, 100.0 * (i as f64 + 0.5) / n as f64);
            html! { <div class="crosshair" style={format!("left:{x:.3}%;top:{y:.3}%")}></div> }
        });
        let mark_row = props.mark_row.filter(|&i| i < n);
        let band = mark_row.map(|i| {
            let (top, height) = (100.0 * i as f64 / n as f64, 100.0 / n as f64);
            html! { <div class="row-mark" aria-hidden="true"
            style={format!("top:{top:.3}%;height:{height:.3}%")}></div> }
        });
        let tick = |k: usize| props.labels.get(k).cloned().unwrap_or_default();
        // Up to five labelled positions, each at its cell's centre.
        let mut axis_ticks: Vec<usize> =
            if n <= 1 { vec![0] } else { (0..5).map(|t| t * (n - 1) / 4).collect() };
        axis_ticks.dedup();
        let pos = |k: usize| 100.0 * (k as f64 + 0.5) / n.max(1) as f64;
        html! {
            <div class="heatmap" id={props.id.clone()} data-n={n.to_string()} data-selected={sel_attr} data-value={val_attr}
                data-row={mark_row.map(|i| i.to_string()).unwrap_or_default()}>
                <div class="heatmap-title">{ &props.title }</div>
                <div class="heatmap-body">
                    <div class="y-axis" aria-hidden="true">
                        { for axis_ticks.iter().map(|&k| html! {
                            <span style={format!("top:{:.3}%", pos(k))}>{ format!("{k} {}", tick(k)) }</span>
                        }) }
                    </div>
                    <div class="canvas-wrap">
                        <canvas ref={self.canvas.clone()} tabindex="0" role="grid"
                            aria-label={format!("{} heatmap, {n} by {n}; arrow keys move the selected cell", props.title)}
                            onmousemove={onmousemove} onmouseleave={link.callback(|_| HeatMsg::Leave)}
                            onclick={link.callback(|_| HeatMsg::Click)}
                            onkeydown={link.callback(HeatMsg::Key)}></canvas>
                        // The marks sit in one fixed element: yew matches unkeyed children from
                        // the end, so a mark appearing beside the canvas would replace the canvas
                        // (and drop its keyboard focus).
                        <div class="marks">{ for band }{ for crosshair }</div>
                    </div>
                </div>
                <div class="x-axis" aria-hidden="true">
                    { for axis_ticks.iter().map(|&k| html! {
                        <span style={format!("left:{:.3}%", pos(k))}>{ format!("{k} {}", tick(k)) }</span>
                    }) }
                </div>
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
