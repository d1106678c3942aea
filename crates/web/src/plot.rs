//! Small SVG charts (line charts and histograms) drawn from data, with axes, ticks and a legend
//! below the axes (never over the data).
//!
//! Every chart carries its plotted numbers in `data-*` attributes, so the end-to-end tests read
//! values back from the page instead of comparing pixels. On screen the charts take the page's
//! theme (text and axes in `currentColor`); the series colours read on light and dark backgrounds.
//!
//! A [`ChartFigure`] (a line chart's [`Figure`], a [`HistogramFigure`]) is a chart with export
//! buttons: SVG and PNG come from the same renderer in export mode (standalone: its own style and
//! white background, the legend inside the figure, and a caption with the model, settings and
//! attnlab version), drawn off screen and serialized; PNG is that SVG drawn by the browser at
//! twice the size. CSV and JSON are the numbers it plots.

use std::rc::Rc;

use wasm_bindgen_futures::spawn_local;
use yew::prelude::*;

use crate::export;
use crate::figure::{self, SeriesData, SVG_STYLE};
use crate::share::Share;

/// Categorical palette: Okabe–Ito (colour-blind safe) with its yellow and black replaced by a
/// dark gold and a purple, so that every colour reads on the light and the dark theme.
pub const PALETTE: [&str; 8] =
    ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#B59A00", "#9467BD"];

/// One line of a line chart.
#[derive(Clone, PartialEq)]
pub struct Series {
    pub label: String,
    pub color: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed (reference series, e.g. the shipped table or the uniform baseline).
    pub dashed: bool,
    /// Stroke width in chart pixels ([`LINE`] for an ordinary line).
    pub width: f64,
}

/// The ordinary stroke width of a series.
pub const LINE: f64 = 1.6;

/// A line chart.
#[derive(Clone, PartialEq)]
pub struct LineChart {
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    pub series: Vec<Series>,
    /// Vertical markers `(x, label)`, e.g. the training length.
    pub markers: Vec<(f64, String)>,
    /// Legend as a list below the chart (`<ul id="<id>-legend">`), for more series than the
    /// in-chart legend holds (12).
    pub legend_below: bool,
}

const W: f64 = 560.0;
const H: f64 = 300.0;
const ML: f64 = 58.0;
const MR: f64 = 12.0;
const MT: f64 = 26.0;
const MB: f64 = 42.0;

fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_string()
    } else if !(1e-3..1e5).contains(&a) {
        format!("{v:.0e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}").trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.3}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// "Nice" tick values covering [lo, hi] (about five).
fn ticks(lo: f64, hi: f64, log: bool) -> Vec<f64> {
    if log {
        let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
        let step = ((b - a) / 6).max(1);
        // Over two decades or less, 1, 2 and 5 of each decade (else a 128…4096 axis has one tick).
        let mantissas: &[f64] = if b - a <= 2 { &[1.0, 2.0, 5.0] } else { &[1.0] };
        return (a..=b)
            .step_by(step as usize)
            .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|v| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9))
            .collect();
    }
    let span = (hi - lo).max(1e-12);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| span / s <= 6.0).unwrap_or(10.0 * mag);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + 1e-9 * step && out.len() < 12 {
        out.push(if t.abs() < 1e-12 * step { 0.0 } else { t });
        t += step;
    }
    out
}

/// Maps data to pixels; log axes drop non-positive values.
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    p0: f64,
    p1: f64,
}

impl Axis {
    fn new(values: impl Iterator<Item = f64>, log: bool, p0: f64, p1: f64) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if lo > hi {
            (lo, hi) = if log { (0.1, 1.0) } else { (0.0, 1.0) };
        }
        if hi - lo < 1e-12 * hi.abs().max(1.0) {
            if log {
                (lo, hi) = (lo / 2.0, hi * 2.0);
            } else {
                (lo, hi) = (lo - 0.5, hi + 0.5);
            }
        }
        Axis { lo, hi, log, p0, p1 }
    }

    fn map(&self, v: f64) -> Option<f64> {
        if !v.is_finite() || (self.log && v <= 0.0) {
            return None;
        }
        let t = if self.log {
            (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        Some(self.p0 + t * (self.p1 - self.p0))
    }
}

/// Top of the plotting area: below the title, and below a row of marker labels when there are
/// markers (labels above the data, never on it).
fn plot_top(c: &LineChart) -> f64 {
    if c.markers.is_empty() {
        MT
    } else {
        MT + 14.0
    }
}

/// The series as paths (with dots on short series), first series on top.
fn series_paths(c: &LineChart, x: &Axis, y: &Axis) -> Html {
    c.series
        .iter()
        .rev()
        .map(|s| {
            let mut d = String::new();
            let mut pen_up = true;
            for &(px, py) in &s.points {
                match (x.map(px), y.map(py)) {
                    (Some(a), Some(b)) => {
                        d.push_str(&format!("{}{a:.1},{b:.1} ", if pen_up { "M" } else { "L" }));
                        pen_up = false;
                    }
                    _ => pen_up = true,
                }
            }
            let values: Vec<String> = s.points.iter().map(|p| format!("{}", p.1)).collect();
            let xs: Vec<String> = s.points.iter().map(|p| format!("{}", p.0)).collect();
            let dash = if s.dashed { "5 4" } else { "" };
            // Markers on short series, except thin background lines.
            let dots: Html = if s.points.len() <= 16 && s.width >= LINE {
                s.points
                    .iter()
                    .filter_map(|&(px, py)| Some((x.map(px)?, y.map(py)?)))
                    .map(|(a, b)| html! { <circle cx={format!("{a:.1}")} cy={format!("{b:.1}")} r="2.5" fill={s.color.clone()} /> })
                    .collect()
            } else {
                Html::default()
            };
            html! {
                <g class="series" data-label={s.label.clone()} data-values={values.join(",")} data-xs={xs.join(",")}>
                    <path d={d} fill="none" stroke={s.color.clone()} stroke-width={format!("{}", s.width)} stroke-dasharray={dash}>
                        <title>{ &s.label }</title>
                    </path>
                    { dots }
                </g>
            }
        })
        .collect()
}

/// Ticks, grid lines and the two axis lines of a plotting area whose top is `top`.
fn axes(x: &Axis, y: &Axis, top: f64) -> Html {
    let xticks = ticks(x.lo, x.hi, x.log).into_iter().filter_map(|t| Some((t, x.map(t)?))).map(|(t, px)| {
        html! {
            <g class="tick">
                <line x1={format!("{px:.1}")} x2={format!("{px:.1}")} y1={format!("{}", H - MB)} y2={format!("{}", H - MB + 4.0)} stroke="currentColor" />
                <text x={format!("{px:.1}")} y={format!("{}", H - MB + 16.0)} text-anchor="middle">{ fmt_tick(t) }</text>
            </g>
        }
    });
    let yticks = ticks(y.lo, y.hi, y.log).into_iter().filter_map(|t| Some((t, y.map(t)?))).map(|(t, py)| {
        html! {
            <g class="tick">
                <line x1={format!("{ML}")} x2={format!("{}", W - MR)} y1={format!("{py:.1}")} y2={format!("{py:.1}")} class="grid" />
                <text x={format!("{}", ML - 6.0)} y={format!("{:.1}", py + 4.0)} text-anchor="end">{ fmt_tick(t) }</text>
            </g>
        }
    });
    html! {
        <>
            { for yticks }
            { for xticks }
            <line x1={format!("{ML}")} x2={format!("{}", W - MR)} y1={format!("{}", H - MB)} y2={format!("{}", H - MB)} stroke="currentColor" />
            <line x1={format!("{ML}")} x2={format!("{ML}")} y1={format!("{top}")} y2={format!("{}", H - MB)} stroke="currentColor" />
        </>
    }
}

/// Vertical marker lines through the plotting area, labelled in the row above it.
fn marker_lines(c: &LineChart, x: &Axis, top: f64) -> Html {
    c.markers
        .iter()
        .filter_map(|(v, label)| Some((x.map(*v)?, label)))
        .map(|(px, label)| {
            // Right of the line, or left of it where the label would pass the chart's edge.
            let wide = figure::CHAR_W * label.chars().count() as f64;
            let (tx, anchor) = if px + 4.0 + wide <= W { (px + 4.0, "start") } else { (px - 4.0, "end") };
            html! {
                <g class="marker">
                    <line x1={format!("{px:.1}")} x2={format!("{px:.1}")} y1={format!("{top}")} y2={format!("{}", H - MB)} stroke-dasharray="3 3" />
                    <text x={format!("{tx:.1}")} y={format!("{}", top - 7.0)} text-anchor={anchor}>{ label }</text>
                </g>
            }
        })
        .collect()
}

/// Height of a legend row below the axes.
const LEGEND_ROW: f64 = 16.0;

/// The legend in columns below the axes, from `top` (outside the plotting area, so it never
/// covers data); its height.
fn legend(series: &[Series], top: f64) -> (Html, f64) {
    let labels: Vec<&str> = series.iter().map(|s| s.label.as_str()).collect();
    let g = figure::legend_grid(&labels, W - 16.0);
    let items = series.iter().enumerate().map(|(k, s)| {
        let x0 = 8.0 + g.col_w * (k % g.cols) as f64;
        let ly = top + LEGEND_ROW * (k / g.cols) as f64 + 8.0;
        html! {
            <g class="legend-item" data-label={s.label.clone()}>
                <line x1={format!("{x0:.1}")} x2={format!("{:.1}", x0 + 16.0)} y1={format!("{ly:.1}")} y2={format!("{ly:.1}")} stroke={s.color.clone()} stroke-width={format!("{}", s.width.clamp(1.5, 3.0))} stroke-dasharray={if s.dashed { "4 3" } else { "" }} />
                <text x={format!("{:.1}", x0 + 22.0)} y={format!("{:.1}", ly + 4.0)}>{ &s.label }</text>
            </g>
        }
    });
    (html! { <g class="legend">{ for items }</g> }, LEGEND_ROW * g.rows as f64)
}

/// Caption lines from `top`, and their height.
fn caption_lines(lines: &[String], top: f64) -> (Html, f64) {
    let texts = lines.iter().enumerate().map(|(k, line)| {
        html! { <text class="caption" x="8" y={format!("{:.1}", top + 10.0 + 14.0 * k as f64)}>{ line }</text> }
    });
    (html! { <>{ for texts }</> }, 14.0 * lines.len() as f64)
}

/// The `<svg>` attributes of a chart: its id (`<id>-export` for an export), and for an export the
/// standalone figure's class and pixel size.
fn svg_ids(id: &str, export: bool, w: f64, h: f64) -> (String, Option<String>, Option<String>) {
    if export {
        (format!("{id}-export"), Some(format!("{w}")), Some(format!("{h}")))
    } else {
        (id.to_string(), None, None)
    }
}

/// Render a line chart as SVG; with `export` (the caption), as a standalone figure. The legend
/// lies below the axes (on screen, a chart with `legend_below` has its list under the SVG instead).
pub fn line_chart(c: &LineChart, export: Option<&[String]>) -> Html {
    let top = plot_top(c);
    let xs = c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).chain(c.markers.iter().map(|m| m.0));
    let x = Axis::new(xs, c.log_x, ML, W - MR);
    let y = Axis::new(c.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)), c.log_y, H - MB, top);
    let in_svg_legend = !c.legend_below || export.is_some();
    let (legend, legend_h) = if in_svg_legend { legend(&c.series, H + 2.0) } else { (Html::default(), 0.0) };
    let caption = export.map(|lines| figure::wrap(lines, 95)).unwrap_or_default();
    let (caption, caption_h) = caption_lines(&caption, H + 2.0 + legend_h);
    let full_h = H + 2.0 + legend_h + caption_h + if export.is_some() { 8.0 } else { 4.0 };
    let (id, width, height) = svg_ids(&c.id, export.is_some(), W, full_h);
    html! {
        <figure class="chart">
            <svg id={id} class={export.map(|_| figure::EXPORT_CLASS)}
                viewBox={format!("0 0 {W} {full_h}")} role="img" aria-label={c.title.clone()}
                data-log-y={c.log_y.to_string()} width={width} height={height}>
                if export.is_some() {
                    <style>{ SVG_STYLE }</style>
                    <rect width="100%" height="100%" fill="#fff" />
                }
                <text class="chart-title" x={format!("{ML}")} y="16">{ &c.title }</text>
                { axes(&x, &y, top) }
                { marker_lines(c, &x, top) }
                { series_paths(c, &x, &y) }
                <text x={format!("{:.1}", (ML + W - MR) / 2.0)} y={format!("{}", H - 6.0)} text-anchor="middle" class="axis-label">{ &c.x_label }</text>
                <text transform={format!("translate(14 {:.1}) rotate(-90)", (top + H - MB) / 2.0)} text-anchor="middle" class="axis-label">{ &c.y_label }</text>
                { legend }
                { caption }
            </svg>
            if c.legend_below && export.is_none() {
                { legend_list(c) }
            }
        </figure>
    }
}

/// The on-screen legend of a chart with `legend_below`: a list under the SVG (`#<id>-legend`).
fn legend_list(c: &LineChart) -> Html {
    html! {
        <ul id={format!("{}-legend", c.id)} class="legend-below">
            { for c.series.iter().map(|s| html! {
                <li data-label={s.label.clone()}>
                    <svg width="22" height="8" aria-hidden="true">
                        <line x1="1" x2="21" y1="4" y2="4" stroke={s.color.clone()}
                            stroke-width={format!("{}", s.width.max(1.5))}
                            stroke-dasharray={if s.dashed { "4 3" } else { "" }} />
                    </svg>
                    { &s.label }
                </li>
            }) }
        </ul>
    }
}

/// A histogram over [0, 1] with equal bins.
#[derive(Clone, PartialEq)]
pub struct Histogram {
    pub id: String,
    pub title: String,
    pub counts: Vec<u64>,
    pub color: String,
}

/// Render a histogram as SVG; with `export` (the caption), as a standalone figure.
pub fn histogram(hist: &Histogram, export: Option<&[String]>) -> Html {
    let counts = &hist.counts;
    let total: u64 = counts.iter().sum::<u64>().max(1);
    let max = counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let (w, h, ml, mb, mt) = (260.0, 130.0, 8.0, 18.0, 16.0);
    let bw = (w - 2.0 * ml) / counts.len().max(1) as f64;
    let bars = counts.iter().enumerate().map(|(k, &c)| {
        let bh = (h - mb - mt) * c as f64 / max;
        html! {
            <rect x={format!("{:.1}", ml + k as f64 * bw)} y={format!("{:.1}", h - mb - bh)} width={format!("{:.1}", (bw - 1.0).max(0.5))}
                height={format!("{bh:.1}")} fill={hist.color.clone()}>
                <title>{ format!("[{:.2}, {:.2}): {} ({:.1}%)", k as f64 / counts.len() as f64, (k + 1) as f64 / counts.len() as f64, c, 100.0 * c as f64 / total as f64) }</title>
            </rect>
        }
    });
    let counts_attr: Vec<String> = counts.iter().map(|c| c.to_string()).collect();
    // 9 px monospace: about 5.5 px a character.
    let caption = export.map(|lines| figure::wrap(lines, ((w - 16.0) / 5.5) as usize)).unwrap_or_default();
    let (caption, caption_h) = caption_lines(&caption, h);
    let full_h = h + caption_h + if export.is_some() { 6.0 } else { 0.0 };
    let (id, width, height) = svg_ids(&hist.id, export.is_some(), w, full_h);
    html! {
        <svg id={id} class={classes!("histogram", export.map(|_| figure::EXPORT_CLASS))} viewBox={format!("0 0 {w} {full_h}")}
            role="img" aria-label={hist.title.clone()} data-counts={counts_attr.join(",")} width={width} height={height}>
            if export.is_some() {
                <style>{ SVG_STYLE }</style>
                <rect width="100%" height="100%" fill="#fff" />
            }
            <text class="chart-title" x={format!("{ml}")} y="11">{ &hist.title }</text>
            { for bars }
            <line x1={format!("{ml}")} x2={format!("{}", w - ml)} y1={format!("{}", h - mb)} y2={format!("{}", h - mb)} stroke="currentColor" />
            <text x={format!("{ml}")} y={format!("{}", h - 4.0)}>{ "0" }</text>
            <text x={format!("{}", w / 2.0)} y={format!("{}", h - 4.0)} text-anchor="middle">{ "0.5" }</text>
            <text x={format!("{}", w - ml)} y={format!("{}", h - 4.0)} text-anchor="end">{ "1" }</text>
            { caption }
        </svg>
    }
}

/// What an export button makes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
    Csv,
    Json,
}

impl Format {
    const ALL: [Format; 4] = [Format::Svg, Format::Png, Format::Csv, Format::Json];

    pub fn ext(self) -> &'static str {
        match self {
            Format::Svg => "svg",
            Format::Png => "png",
            Format::Csv => "csv",
            Format::Json => "json",
        }
    }
}

/// The caption of an exported figure of `model`: the page's state (`Share`) says the rest.
pub fn caption_of(share: Option<&Share>, model: &str) -> Vec<String> {
    figure::caption(model, &share.map(Share::get).unwrap_or_default())
}

/// Offer an export's `name`d file; `svg` and `size` are the standalone figure (SVG and PNG).
pub fn deliver(
    format: Format,
    name: String,
    text: String,
    size: (f64, f64),
    done: Callback<Result<String, String>>,
) {
    let mime = match format {
        Format::Svg => "image/svg+xml",
        Format::Csv => "text/csv",
        Format::Json => "application/json",
        Format::Png => {
            spawn_local(async move {
                let result = match export::svg_to_png(&text, size.0, size.1, 2.0).await {
                    Ok(url) => export::download_url(&name, &url).map(|()| name),
                    Err(e) => Err(e),
                };
                done.emit(result);
            });
            return;
        }
    };
    done.emit(export::download_text(&name, mime, &text).map(|()| name));
}

/// The export buttons of figure `id` (`#<id>-export-svg`, … and class `export-svg`, …).
pub fn export_buttons(id: &str, status: &str, on: &Callback<Format>) -> Html {
    html! {
        <div class="buttons exports">
            <span class="muted">{ "export " }</span>
            { for Format::ALL.iter().map(|&f| html! {
                <button id={format!("{id}-export-{}", f.ext())} class={format!("export-{}", f.ext())}
                    title={format!("download this figure as {}", f.ext().to_uppercase())}
                    onclick={on.reform(move |_| f)}>{ f.ext().to_uppercase() }</button>
            }) }
            <span class="muted export-status">{ status.to_string() }</span>
        </div>
    }
}

/// A chart that a [`ChartFigure`] shows and exports.
pub trait Chart: PartialEq + 'static {
    /// Its id: the SVG's, and the stem of its export buttons' ids and files' names.
    fn id(&self) -> &str;
    /// The chart as SVG; with `export` (the caption lines), as a standalone figure with a
    /// `width` and `height` in pixels.
    fn render(&self, export: Option<&[String]>) -> Html;
    /// The numbers it plots, as CSV.
    fn csv(&self) -> String;
    /// The numbers it plots, as JSON with the caption.
    fn json(&self, caption: &[String]) -> String;
}

impl LineChart {
    fn data(&self) -> SeriesData<'_> {
        self.series.iter().map(|s| (s.label.as_str(), s.points.as_slice())).collect()
    }
}

impl Chart for LineChart {
    fn id(&self) -> &str {
        &self.id
    }
    fn render(&self, export: Option<&[String]>) -> Html {
        line_chart(self, export)
    }
    fn csv(&self) -> String {
        figure::series_csv(&self.x_label, &self.y_label, &self.data())
    }
    fn json(&self, caption: &[String]) -> String {
        figure::series_json(&self.title, &self.x_label, &self.y_label, caption, &self.data())
    }
}

impl Chart for Histogram {
    fn id(&self) -> &str {
        &self.id
    }
    fn render(&self, export: Option<&[String]>) -> Html {
        histogram(self, export)
    }
    fn csv(&self) -> String {
        figure::histogram_csv(&self.counts)
    }
    fn json(&self, caption: &[String]) -> String {
        figure::histogram_json(&self.title, caption, &self.counts)
    }
}

#[derive(Properties, PartialEq)]
pub struct FigureProps<C: Chart> {
    pub chart: Rc<C>,
    /// Name of the model it shows (the caption).
    pub model: AttrValue,
}

pub enum FigureMsg {
    Export(Format),
    /// The off-screen figure was exported: drop it.
    Drawn,
    Done(Result<String, String>),
}

/// A chart with SVG, PNG, CSV and JSON export.
pub struct ChartFigure<C: Chart> {
    /// The SVG or PNG export waiting for the off-screen figure to be drawn.
    pending: Option<Format>,
    stage: NodeRef,
    status: String,
    share: Option<Share>,
    chart: std::marker::PhantomData<C>,
}

/// A line chart with its exports.
pub type Figure = ChartFigure<LineChart>;
/// A histogram with its exports.
pub type HistogramFigure = ChartFigure<Histogram>;

/// The pixel size an exported `svg` declares.
fn svg_size(svg: &web_sys::Element) -> Option<(f64, f64)> {
    let get = |name: &str| svg.get_attribute(name)?.parse::<f64>().ok();
    Some((get("width")?, get("height")?))
}

impl<C: Chart> Component for ChartFigure<C> {
    type Message = FigureMsg;
    type Properties = FigureProps<C>;

    fn create(ctx: &Context<Self>) -> Self {
        let share = ctx.link().context::<Share>(Callback::noop()).map(|(share, _)| share);
        ChartFigure {
            pending: None,
            stage: NodeRef::default(),
            status: String::new(),
            share,
            chart: std::marker::PhantomData,
        }
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        let c = &ctx.props().chart;
        match msg {
            FigureMsg::Export(f @ (Format::Svg | Format::Png)) => self.pending = Some(f),
            FigureMsg::Export(f) => {
                let text = if f == Format::Csv {
                    c.csv()
                } else {
                    c.json(&caption_of(self.share.as_ref(), &ctx.props().model))
                };
                let name = format!("attnlab-{}.{}", c.id(), f.ext());
                deliver(f, name, text, (0.0, 0.0), ctx.link().callback(FigureMsg::Done));
            }
            FigureMsg::Drawn => {}
            FigureMsg::Done(Ok(file)) => self.status = format!("saved {file}"),
            FigureMsg::Done(Err(e)) => self.status = format!("export failed: {e}"),
        }
        true
    }

    fn rendered(&mut self, ctx: &Context<Self>, _first: bool) {
        let Some(format) = self.pending.take() else { return };
        let c = &ctx.props().chart;
        let done = ctx.link().callback(FigureMsg::Done);
        let svg = self.stage.cast::<web_sys::Element>().and_then(|e| e.query_selector("svg").ok().flatten());
        let Some((svg, size)) = svg.and_then(|svg| Some((svg.clone(), svg_size(&svg)?))) else {
            return done.emit(Err("the figure was not drawn".to_string()));
        };
        match export::xml_of(&svg) {
            Ok(text) => deliver(format, format!("attnlab-{}.{}", c.id(), format.ext()), text, size, done),
            Err(e) => done.emit(Err(e)),
        }
        // The off-screen figure goes at the next render.
        ctx.link().send_message(FigureMsg::Drawn);
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let c = &ctx.props().chart;
        let on = ctx.link().callback(FigureMsg::Export);
        html! {
            <div class="figure" id={format!("{}-figure", c.id())}>
                { c.render(None) }
                { export_buttons(c.id(), &self.status, &on) }
                if self.pending.is_some() {
                    <div class="export-stage" ref={self.stage.clone()} aria-hidden="true">
                        { c.render(Some(&caption_of(self.share.as_ref(), &ctx.props().model))) }
                    </div>
                }
            </div>
        }
    }
}
