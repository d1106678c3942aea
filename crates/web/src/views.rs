//! The lab views: kernels (with the bias sliders), extrapolation (perplexity vs length), attention
//! heatmaps, locally accumulated attention and gates (with the before/after-training comparison of
//! ReGLA Fig. 4 when the index lists an initial checkpoint). Each view has a short "what am I looking
//! at" note. All model work goes through `lab` (and so through `engine`).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use attnlab_core::analysis::{
    laa_uniform, GateStats, LayerSummary, PplPoint, SATURATION_HIGH, SATURATION_LOW,
};
use attnlab_core::attention::{AttnStage, LayerAttention};
use attnlab_core::config::{KernelKind, KernelTerm};
use gloo_timers::callback::Timeout;
use wasm_bindgen_futures::spawn_local;
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

use crate::engine::Engine;
use crate::heatmap::{Heatmap, Thumb};
use crate::lab::{self, BiasEdit, TraceView};
use crate::plot::{histogram, line_chart, LineChart, Series, LINE, PALETTE};
use crate::results::ShippedCurve;
use crate::yield_now::{next_paint, yield_now};

/// An engine shared by the views; equal when it is the same engine (a slider edit makes a new one).
#[derive(Clone)]
pub struct EngineRef(pub Rc<Engine>);

impl PartialEq for EngineRef {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

/// The untrained checkpoint the gate view compares the current model with (ReGLA Fig. 4).
#[derive(Clone, PartialEq)]
pub struct Compare {
    /// Index name of the initial checkpoint.
    pub name: AttrValue,
    /// Index name of the trained model it is the start of.
    pub of: AttrValue,
    pub state: CompareState,
}

#[derive(Clone, PartialEq)]
pub enum CompareState {
    /// Loading, with a status line.
    Loading(AttrValue),
    Ready(EngineRef),
    Failed(AttrValue),
}

/// `(length, perplexity)` points of one sweep.
pub type PplCurve = Rc<Vec<(usize, f64)>>;
/// LAA of one layer: `(layer, auc, curve)`.
pub type LayerLaa = (usize, f64, Vec<f64>);
/// LAA of the models seen in this page, by model name (the overlay).
pub type LaaOverlay = BTreeMap<String, Vec<LayerLaa>>;

/// Milliseconds to wait after the last change before a heavy recomputation starts.
const DEBOUNCE_MS: u32 = 350;

fn note(paper: &str, read: &str) -> Html {
    html! {
        <details class="note">
            <summary>{ "What am I looking at?" }</summary>
            <p><b>{ "The claim. " }</b>{ paper }</p>
            <p><b>{ "How to read it. " }</b>{ read }</p>
            <p class="muted">{ "Attention maps show where a layer puts its weight, not why the model predicts \
                what it does: they are not explanations." }</p>
        </details>
    }
}

// ---- Kernel view --------------------------------------------------------------------------------

/// Kernels a mix row can pick (the page's kernel picker).
const PICKS: [(&str, &str); 6] = [
    ("exp", "exp(−m·d)"),
    ("exp-half", "exp(−m/2·d)"),
    ("gaussian", "gaussian exp(−m·d²)"),
    ("kerple-log", "kerple-log (1+m·d)^−1"),
    ("kerple-power", "kerple-power exp(−m·d^p)"),
    ("off", "off"),
];

fn pick_of(t: &KernelTerm) -> &'static str {
    if t.weight <= 0.0 {
        return "off";
    }
    match t.kernel {
        KernelKind::Exp if (t.scale - 0.5).abs() < 1e-12 => "exp-half",
        KernelKind::Exp => "exp",
        KernelKind::Gaussian => "gaussian",
        KernelKind::KerpleLog => "kerple-log",
        KernelKind::KerplePower => "kerple-power",
    }
}

fn term_for(pick: &str, old: &KernelTerm) -> KernelTerm {
    let w = if old.weight > 0.0 { old.weight } else { 0.33 };
    let t = |kernel, scale| KernelTerm { kernel, scale, weight: w, p: None };
    match pick {
        "exp" => t(KernelKind::Exp, 1.0),
        "exp-half" => t(KernelKind::Exp, 0.5),
        "gaussian" => t(KernelKind::Gaussian, 1.0),
        "kerple-log" => t(KernelKind::KerpleLog, 1.0),
        "kerple-power" => KernelTerm { p: Some(1.0), ..t(KernelKind::KerplePower, 1.0) },
        _ => KernelTerm { weight: 0.0, ..*old },
    }
}

/// The three mix rows (α, β, γ) shown for a trained mix: its terms, padded with switched-off rows.
pub fn mix_rows(trained: Option<Vec<KernelTerm>>) -> Vec<KernelTerm> {
    let mut rows = trained.unwrap_or_default();
    let pads = [
        KernelTerm { kernel: KernelKind::Exp, scale: 0.5, weight: 0.0, p: None },
        KernelTerm { kernel: KernelKind::Gaussian, scale: 1.0, weight: 0.0, p: None },
        KernelTerm { kernel: KernelKind::Exp, scale: 1.0, weight: 0.0, p: None },
    ];
    let mut k = 0;
    while rows.len() < 3 && k < pads.len() {
        rows.push(pads[k]);
        k += 1;
    }
    rows.truncate(3);
    rows
}

#[derive(Properties, PartialEq)]
pub struct KernelProps {
    pub engine: EngineRef,
    pub edit: BiasEdit,
    pub on_edit: Callback<BiasEdit>,
}

#[derive(Clone, Copy, PartialEq)]
enum CurveKind {
    Bias,
    Kernel,
}

/// B_h(d) and exp(B_h(d)) per head, with the slope and mix sliders.
#[function_component(KernelView)]
pub fn kernel_view(props: &KernelProps) -> Html {
    let engine = &props.engine.0;
    let info = engine.info();
    let layer = use_state(|| 0usize);
    let kind = use_state(|| CurveKind::Bias);
    let log_y = use_state(|| false);
    let range = use_state(|| 4usize);
    let layer_i = (*layer).min(info.n_layers.saturating_sub(1));
    let n = (info.train_context * *range).clamp(2, info.max_context);
    let specs = engine.current_specs();
    let steerable = engine.has_steerable_layers();
    let first_steerable = engine.trained_specs().iter().find(|s| lab::is_steerable(s)).cloned();
    let rows = props
        .edit
        .mix
        .clone()
        .unwrap_or_else(|| mix_rows(first_steerable.as_ref().and_then(lab::trained_mix)));

    let chart = match engine.kernel_curves(layer_i, n) {
        Ok(curves) => {
            let series = curves
                .iter()
                .map(|c| {
                    let ys = if *kind == CurveKind::Bias { &c.bias } else { &c.kernel };
                    Series {
                        label: format!("head {}", c.head),
                        color: PALETTE[c.head % PALETTE.len()].to_string(),
                        points: ys.iter().enumerate().map(|(d, &y)| (d as f64, y)).collect(),
                        dashed: false,
                        width: LINE,
                    }
                })
                .collect();
            let y_label = if *kind == CurveKind::Bias { "B_h(d)" } else { "exp(B_h(d))" };
            line_chart(&LineChart {
                id: "kernel-chart".into(),
                title: format!(
                    "layer {layer_i} ({}): {y_label} against distance d",
                    specs[layer_i].variant_id()
                ),
                x_label: "distance d = i − j (tokens)".into(),
                y_label: y_label.into(),
                log_x: false,
                log_y: *log_y && *kind == CurveKind::Kernel,
                series,
                markers: vec![(info.train_context as f64, format!("training length {}", info.train_context))],
                legend_below: false,
            })
        }
        Err(e) => html! { <p class="error">{ e }</p> },
    };

    let edit = props.edit.clone();
    let on_edit = props.on_edit.clone();
    let set = move |f: Box<dyn Fn(&mut BiasEdit)>| {
        let mut e = edit.clone();
        f(&mut e);
        on_edit.emit(e.clamped());
    };
    let set = Rc::new(set);
    let slope_log2 = props.edit.slope_scale.max(1e-9).log2();
    let on_slope = {
        let set = set.clone();
        Callback::from(move |e: InputEvent| {
            let v: f64 = e.target_unchecked_into::<HtmlInputElement>().value().parse().unwrap_or(0.0);
            set(Box::new(move |ed| ed.slope_scale = 2f64.powf(v)));
        })
    };
    let preset = |u: Option<f64>| {
        let set = set.clone();
        Callback::from(move |_| {
            set(Box::new(move |ed| {
                ed.uniform_slope = u;
                ed.slope_scale = 1.0;
            }))
        })
    };
    let row_controls = rows.iter().enumerate().map(|(k, t)| {
        let name = ["α", "β", "γ"][k];
        let rows_pick = rows.clone();
        let set_pick = set.clone();
        let on_pick = Callback::from(move |e: Event| {
            let v = e.target_unchecked_into::<HtmlSelectElement>().value();
            let mut r = rows_pick.clone();
            r[k] = term_for(&v, &r[k]);
            set_pick(Box::new(move |ed| ed.mix = Some(r.clone())));
        });
        let rows_w = rows.clone();
        let set_w = set.clone();
        let on_weight = Callback::from(move |e: InputEvent| {
            let v: f64 = e.target_unchecked_into::<HtmlInputElement>().value().parse().unwrap_or(0.0);
            let mut r = rows_w.clone();
            r[k].weight = v;
            set_w(Box::new(move |ed| ed.mix = Some(r.clone())));
        });
        let rows_s = rows.clone();
        let set_s = set.clone();
        let on_scale = Callback::from(move |e: InputEvent| {
            let v: f64 = e.target_unchecked_into::<HtmlInputElement>().value().parse().unwrap_or(0.0);
            let mut r = rows_s.clone();
            r[k].scale = 2f64.powf(v);
            set_s(Box::new(move |ed| ed.mix = Some(r.clone())));
        });
        let pick = pick_of(t);
        html! {
            <fieldset class="mix-row">
                <legend>{ format!("kernel {name}") }</legend>
                <label>{ "kernel " }
                    <select id={format!("mix-kernel-{k}")} onchange={on_pick} disabled={!steerable}>
                        { for PICKS.iter().map(|(id, label)| html! { <option value={*id} selected={*id == pick}>{ *label }</option> }) }
                    </select>
                </label>
                <label>{ format!("weight {name} ") }
                    <input id={format!("mix-weight-{k}")} type="range" min="0" max="1" step="0.01"
                        value={format!("{}", t.weight.min(1.0))} oninput={on_weight} disabled={!steerable}/>
                    <output>{ format!("{:.2}", t.weight) }</output>
                </label>
                <label>{ "slope ×" }
                    <input id={format!("mix-scale-{k}")} type="range" min="-4" max="4" step="0.25"
                        value={format!("{}", t.scale.max(1e-9).log2())} oninput={on_scale} disabled={!steerable}/>
                    <output>{ format!("{:.3}", t.scale) }</output>
                </label>
            </fieldset>
        }
    });
    let on_layer = {
        let layer = layer.clone();
        Callback::from(move |e: Event| {
            layer.set(e.target_unchecked_into::<HtmlSelectElement>().value().parse().unwrap_or(0))
        })
    };
    let on_range = {
        let range = range.clone();
        Callback::from(move |e: Event| {
            range.set(e.target_unchecked_into::<HtmlSelectElement>().value().parse().unwrap_or(4))
        })
    };
    let reset = {
        let on_edit = props.on_edit.clone();
        Callback::from(move |_| on_edit.emit(BiasEdit::default()))
    };
    html! {
        <section class="view" id="kernel-view">
            <h2>{ "Position kernels" }</h2>
            { note(
                "MEP (Gao, 2024) replaces ALiBi's single exponential kernel exp(−m·d) by a mix of kernels \
                 (default exp(m) + exp(m/2) + gaussian(m)) and uses B(d) = ln Σ w·K as the attention bias, \
                 claiming better perplexity beyond the training length without extra parameters.",
                "Each line is one head's bias B_h(d) added to the attention logit of a key d tokens back \
                 (or exp(B), the multiplicative kernel). Steeper curves make a head more local. The dashed \
                 line marks the training length. Moving a slider rebuilds the bias tables and re-runs the \
                 model: the heatmap, perplexity and the next generation all use the edited bias." ) }
            <div class="settings">
                <label>{ "layer " }
                    <select id="kernel-layer" onchange={on_layer}>
                        { for (0..info.n_layers).map(|i| html! {
                            <option value={i.to_string()} selected={i == layer_i}>{ format!("{i}: {}", specs[i].variant_id()) }</option>
                        }) }
                    </select>
                </label>
                <label>{ "distance range " }
                    <select id="kernel-range" onchange={on_range}>
                        { for [1usize, 2, 4, 8, 32].iter().map(|r| html! {
                            <option value={r.to_string()} selected={*r == *range}>{ format!("{r}× training length") }</option>
                        }) }
                    </select>
                </label>
                <label class="inline"><input type="radio" name="curve-kind" checked={*kind == CurveKind::Bias}
                    onchange={{ let kind = kind.clone(); Callback::from(move |_| kind.set(CurveKind::Bias)) }}/>{ " B(d)" }</label>
                <label class="inline"><input type="radio" name="curve-kind" checked={*kind == CurveKind::Kernel}
                    onchange={{ let kind = kind.clone(); Callback::from(move |_| kind.set(CurveKind::Kernel)) }}/>{ " exp(B(d))" }</label>
                <label class="inline"><input id="kernel-log-y" type="checkbox" checked={*log_y} disabled={*kind == CurveKind::Bias}
                    onchange={{ let log_y = log_y.clone(); Callback::from(move |_| log_y.set(!*log_y)) }}/>{ " log y" }</label>
            </div>
            { chart }
            if !steerable {
                <p class="notice">{ "This model's biases are learned (or it has none), so the sliders are off: the curves show what training produced." }</p>
            }
            <div class="sliders">
                <label for="slope-scale">{ "global slope scale" }</label>
                <input id="slope-scale" type="range" min="-6" max="6" step="0.25" value={format!("{slope_log2}")}
                    oninput={on_slope} disabled={!steerable}/>
                <output id="slope-scale-value">{ format!("×{:.4}", props.edit.slope_scale) }</output>
                <div class="buttons presets">
                    <span class="muted">{ "MEP Table 4 presets: " }</span>
                    <button id="preset-default" onclick={preset(None)} disabled={!steerable}>{ "default slopes" }</button>
                    <button id="preset-2-2" onclick={preset(Some(0.25))} disabled={!steerable}>{ "uniform 2⁻²" }</button>
                    <button id="preset-2-6" onclick={preset(Some(2f64.powi(-6)))} disabled={!steerable}>{ "uniform 2⁻⁶" }</button>
                    <button id="preset-2-9" onclick={preset(Some(2f64.powi(-9)))} disabled={!steerable}>{ "uniform 2⁻⁹" }</button>
                    <button id="reset-trained" onclick={reset}>{ "reset to trained" }</button>
                </div>
                { for row_controls }
            </div>
        </section>
    }
}

// ---- Extrapolation view --------------------------------------------------------------------------

#[derive(Properties, PartialEq)]
pub struct PplProps {
    pub engine: EngineRef,
    /// Held-out text the sweep runs on.
    pub text: Rc<String>,
    /// Where the text came from (shown).
    pub text_source: AttrValue,
    /// The trained model's curve, once measured (plotted as the reference).
    pub trained: Option<PplCurve>,
    /// Called with `(length, perplexity)` points when a sweep finishes.
    pub on_done: Callback<(EngineRef, PplCurve)>,
    /// The shipped models' curves (`results.json`), drawn behind this page's.
    pub shipped: Shipped,
    /// Name of the loaded model (its shipped curve is highlighted).
    pub model: AttrValue,
}

/// The shipped results table of the extrapolation view.
#[derive(Clone, PartialEq)]
pub enum Shipped {
    Loading,
    Ready(Rc<Vec<ShippedCurve>>),
    /// Why there is no table (missing on the server, unreadable).
    Missing(AttrValue),
}

/// Colour of the k-th of n shipped curves: evenly spaced hues.
fn shipped_color(k: usize, n: usize) -> String {
    format!("hsl({:.0} 60% 45%)", 360.0 * k as f64 / n.max(1) as f64)
}

pub enum PplMsg {
    Start,
    Progress { run: u32, fraction: f64, points: Vec<PplPoint> },
    Done { run: u32, result: Result<Vec<PplPoint>, String> },
}

/// Perplexity against context length, computed in the page in slices.
pub struct PplView {
    run: u32,
    /// The run that may keep computing: an older sweep stops at its next slice.
    live_run: Rc<Cell<u32>>,
    running: bool,
    fraction: f64,
    points: Vec<PplPoint>,
    error: Option<String>,
    debounce: Option<Timeout>,
}

impl PplView {
    fn schedule(&mut self, ctx: &Context<Self>) {
        let link = ctx.link().clone();
        self.debounce = Some(Timeout::new(DEBOUNCE_MS, move || link.send_message(PplMsg::Start)));
    }
}

impl Component for PplView {
    type Message = PplMsg;
    type Properties = PplProps;

    fn create(ctx: &Context<Self>) -> Self {
        let mut v = PplView {
            run: 0,
            live_run: Rc::new(Cell::new(0)),
            running: false,
            fraction: 0.0,
            points: Vec::new(),
            error: None,
            debounce: None,
        };
        v.schedule(ctx);
        v
    }

    fn changed(&mut self, ctx: &Context<Self>, old: &Self::Properties) -> bool {
        if ctx.props().engine != old.engine || ctx.props().text != old.text {
            self.run = self.run.wrapping_add(1);
            self.live_run.set(self.run);
            self.running = true;
            self.points.clear();
            self.schedule(ctx);
        }
        true
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            PplMsg::Start => {
                self.run = self.run.wrapping_add(1);
                self.live_run.set(self.run);
                self.running = true;
                self.fraction = 0.0;
                self.points.clear();
                self.error = None;
                let (run, link, live) = (self.run, ctx.link().clone(), self.live_run.clone());
                let (engine, text) = (ctx.props().engine.0.clone(), ctx.props().text.clone());
                spawn_local(async move {
                    let result = sweep(&link, run, &live, &engine, &text).await;
                    link.send_message(PplMsg::Done { run, result });
                });
            }
            PplMsg::Progress { run, fraction, points } => {
                if run != self.run {
                    return false;
                }
                self.fraction = fraction;
                self.points = points;
            }
            PplMsg::Done { run, result } => {
                if run != self.run {
                    return false;
                }
                self.running = false;
                match result {
                    Ok(points) => {
                        self.fraction = 1.0;
                        self.points = points.clone();
                        let curve = points.iter().map(|p| (p.length, p.ppl)).collect();
                        ctx.props().on_done.emit((ctx.props().engine.clone(), Rc::new(curve)));
                    }
                    Err(e) => self.error = Some(e),
                }
            }
        }
        true
    }

    fn destroy(&mut self, _ctx: &Context<Self>) {
        // Stop a sweep in flight (e.g. the model was switched and the lab unmounted).
        self.live_run.set(self.run.wrapping_add(1));
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let props = ctx.props();
        let info = props.engine.0.info();
        let mut series = vec![Series {
            label: "current settings".into(),
            color: PALETTE[0].into(),
            points: self.points.iter().map(|p| (p.length as f64, p.ppl)).collect(),
            dashed: false,
            width: LINE,
        }];
        let shipped_note = match &props.shipped {
            Shipped::Loading => {
                html! { <p class="muted" id="shipped-state">{ "loading the shipped models' table…" }</p> }
            }
            Shipped::Missing(why) => html! {
                <p class="notice" id="shipped-missing" role="status">
                    { format!("The shipped models' table is not available ({why}): only this page's curves are shown. \
                               It is docs/results/results.json, written by `attnlab report`.") }
                </p>
            },
            Shipped::Ready(curves) => {
                let current = curves.iter().any(|c| c.name == props.model.as_str());
                html! {
                    <p class="muted" id="shipped-state" data-models={curves.len().to_string()}>
                        { format!("Thin lines: the {} shipped models as measured by `attnlab report` \
                                   (docs/results/results.json, same held-out text){}.", curves.len(),
                                   if current { format!("; {} in bold", props.model) } else { String::new() }) }
                    </p>
                }
            }
        };
        if let Shipped::Ready(curves) = &props.shipped {
            let n = curves.len();
            for (k, c) in curves.iter().enumerate() {
                let current = c.name == props.model.as_str();
                series.push(Series {
                    label: format!("shipped: {}", c.name),
                    color: shipped_color(k, n),
                    points: c.points.iter().map(|&(l, p)| (l as f64, p)).collect(),
                    dashed: false,
                    width: if current { 3.0 } else { 0.8 },
                });
            }
        }
        if let Some(t) = &props.trained {
            series.push(Series {
                label: "as trained".into(),
                color: PALETTE[3].into(),
                points: t.iter().map(|&(l, p)| (l as f64, p)).collect(),
                dashed: true,
                width: LINE,
            });
        }
        let rows = self.points.iter().map(|p| {
            html! { <tr><td>{ p.length }</td><td>{ format!("{}×", p.length / info.train_context.max(1)) }</td>
            <td>{ p.windows }</td><td>{ p.tokens }</td><td class="num">{ format!("{:.2}", p.ppl) }</td></tr> }
        });
        html! {
            <section class="view" id="ppl-view" data-running={self.running.to_string()}>
                <h2>{ "Perplexity versus context length" }</h2>
                { note(
                    "Position encodings differ most beyond the training length: MEP and ALiBi-style biases \
                     claim to keep perplexity flat as the context grows (MEP Table 2), NoPE and learned \
                     absolute positions degrade, and linear attention with decay is length-agnostic by design.",
                    "Perplexity (lower is better) of the held-out text, cut into windows of each length, \
                     every window run from an empty state; the training length is marked. The dashed line \
                     is the model as trained; the solid line follows your slider settings." ) }
                <p class="muted">{ format!("text: {} · at most {} scored tokens per length", props.text_source, lab::PPL_TOKEN_BUDGET) }</p>
                if self.running {
                    <progress id="ppl-progress" max="1" value={format!("{:.4}", self.fraction)}></progress>
                }
                if let Some(e) = &self.error { <p class="error">{ e }</p> }
                { shipped_note }
                { line_chart(&LineChart {
                    id: "ppl-chart".into(),
                    title: "perplexity against context length".into(),
                    x_label: "context length (tokens, log scale)".into(),
                    y_label: "perplexity (log scale)".into(),
                    log_x: true,
                    log_y: true,
                    series,
                    markers: vec![(info.train_context as f64, "training length".into())],
                    legend_below: true,
                }) }
                <table class="table"><thead><tr><th>{ "length" }</th><th>{ "× train" }</th><th>{ "windows" }</th>
                    <th>{ "tokens" }</th><th>{ "perplexity" }</th></tr></thead><tbody>{ for rows }</tbody></table>
                <button id="ppl-rerun" disabled={self.running} onclick={ctx.link().callback(|_| PplMsg::Start)}>{ "re-run" }</button>
            </section>
        }
    }
}

async fn sweep(
    link: &yew::html::Scope<PplView>,
    run: u32,
    live: &Cell<u32>,
    engine: &Engine,
    text: &str,
) -> Result<Vec<PplPoint>, String> {
    next_paint().await;
    let tokens = engine.encode(text)?;
    let lengths = engine.sweep_lengths(tokens.len());
    let mut sweep = lab::PplSweep::new(engine, tokens, &lengths)?;
    let (mut last_sent, mut slices) = (0usize, 0usize);
    while !sweep.advance()? {
        slices += 1;
        // Re-render on a finished length, and every few slices for the progress bar.
        if sweep.points().len() != last_sent || slices.is_multiple_of(4) {
            last_sent = sweep.points().len();
            link.send_message(PplMsg::Progress {
                run,
                fraction: sweep.progress(),
                points: sweep.points().to_vec(),
            });
        }
        yield_now().await;
        if live.get() != run {
            return Err("superseded".to_string());
        }
    }
    Ok(sweep.points().to_vec())
}

// ---- Trace-based views: attention, LAA, gates ------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TraceKind {
    Attention,
    Laa,
    Gates,
}

#[derive(Properties, PartialEq)]
pub struct TraceProps {
    pub kind: TraceKind,
    pub engine: EngineRef,
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
    Done {
        run: u32,
        result: Result<Rc<TraceView>, String>,
    },
    /// Gate statistics of the comparison checkpoint on the same text.
    StartCompare,
    CompareDone {
        run: u32,
        result: Result<Rc<Vec<GateStats>>, String>,
    },
    Stage(AttnStage),
    Select(usize, usize),
}

/// Computes one trace of the current text and shows it as heatmaps, LAA curves or gate histograms.
pub struct TraceViewComp {
    run: u32,
    running: bool,
    stage: AttnStage,
    trace: Option<Rc<TraceView>>,
    error: Option<String>,
    selected: (usize, usize),
    debounce: Option<Timeout>,
    compare_run: u32,
    /// Gate statistics of the comparison checkpoint; `None` while computing (or without one).
    compare_gates: Option<Result<Rc<Vec<GateStats>>, String>>,
}

impl TraceViewComp {
    fn schedule(&mut self, ctx: &Context<Self>) {
        let link = ctx.link().clone();
        self.debounce = Some(Timeout::new(DEBOUNCE_MS, move || link.send_message(TraceMsg::Start)));
    }

    fn view_attention(&self, ctx: &Context<Self>, t: &TraceView) -> Html {
        let link = ctx.link();
        let softmax_layers = ctx
            .props()
            .engine
            .0
            .current_specs()
            .iter()
            .any(|s| s.family() == attnlab_core::config::Family::Softmax);
        let (sl, sh) = self.selected;
        let layer: Option<&LayerAttention> = t.attention.get(sl);
        let labels = Rc::new(t.labels.clone());
        let grid = t.attention.iter().map(|la| {
            let signed = lab::is_signed(la.kind);
            html! {
                <div class="thumb-row">
                    <span class="muted">{ format!("layer {}", la.layer) }</span>
                    { for la.heads.iter().enumerate().map(|(h, m)| {
                        let (l, link) = (la.layer, link.clone());
                        html! { <Thumb matrix={Rc::new(m.clone())} n={la.n} signed={signed}
                            selected={(l, h) == self.selected} label={format!("L{l} H{h}")}
                            onselect={Callback::from(move |_| link.send_message(TraceMsg::Select(l, h)))} /> }
                    }) }
                </div>
            }
        });
        let stage_btn = |s: AttnStage, label: &str| {
            html! { <label class="inline"><input type="radio" name="stage" checked={self.stage == s}
            onchange={link.callback(move |_| TraceMsg::Stage(s))}/>{ format!(" {label}") }</label> }
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
                    if let Some(m) = la.heads.get(sh) {
                        <Heatmap id="heatmap" title={format!("layer {sl}, head {sh} ({:?})", la.kind)}
                            matrix={Rc::new(m.clone())} n={la.n} labels={labels}
                            signed={lab::is_signed(la.kind)}
                            value_name={format!("{:?}", la.kind).to_lowercase()} />
                    }
                }
            </>
        }
    }

    fn view_laa(&self, ctx: &Context<Self>, t: &TraceView) -> Html {
        let props = ctx.props();
        let n = t.labels.len();
        let xs: Vec<f64> = (0..attnlab_core::analysis::LAA_POINTS).map(|k| k as f64 / 100.0).collect();
        let curve = |c: &[f64]| xs.iter().copied().zip(c.iter().copied()).collect::<Vec<_>>();
        let mut series: Vec<Series> = t
            .summaries
            .iter()
            .map(|s: &LayerSummary| Series {
                label: format!("layer {} {} (AUC {:.3})", s.layer, s.variant, s.laa.auc),
                color: PALETTE[s.layer % PALETTE.len()].into(),
                points: curve(&s.laa.curve),
                dashed: false,
                width: LINE,
            })
            .collect();
        let uniform = laa_uniform(n);
        series.push(Series {
            label: format!("uniform attention (AUC {:.3})", uniform.auc),
            color: "#888888".into(),
            points: curve(&uniform.curve),
            dashed: true,
            width: LINE,
        });
        let me = props.engine.0.info().name.clone();
        let overlay: Vec<Series> = props
            .laa_overlay
            .iter()
            .filter(|(name, _)| **name != me)
            .enumerate()
            .map(|(k, (name, layers))| {
                let mean: Vec<f64> = (0..xs.len())
                    .map(|p| {
                        layers.iter().map(|l| l.2.get(p).copied().unwrap_or(0.0)).sum::<f64>()
                            / layers.len().max(1) as f64
                    })
                    .collect();
                let auc: f64 = layers.iter().map(|l| l.1).sum::<f64>() / layers.len().max(1) as f64;
                Series {
                    label: format!("{name} mean (AUC {auc:.3})"),
                    color: PALETTE[(k + 4) % PALETTE.len()].into(),
                    points: curve(&mean),
                    dashed: true,
                    width: LINE,
                }
            })
            .collect();
        let rows = t.summaries.iter().map(|s| {
            html! { <tr data-layer={s.layer.to_string()} data-auc={format!("{}", s.laa.auc)}>
                <td>{ s.layer }</td><td>{ &s.variant }</td><td class="num">{ format!("{:.4}", s.laa.auc) }</td>
                <td class="num">{ format!("{:.2}", s.heads.iter().map(|h| h.entropy).sum::<f64>() / s.heads.len().max(1) as f64) }</td>
                <td class="num">{ format!("{:.1}", s.heads.iter().map(|h| h.mean_distance).sum::<f64>() / s.heads.len().max(1) as f64) }</td>
            </tr> }
        });
        html! {
            <>
                { line_chart(&LineChart {
                    id: "laa-chart".into(),
                    title: format!("locally accumulated attention, {n} tokens"),
                    x_label: "window ratio r (share of the n nearest keys)".into(),
                    y_label: "LAA(r)".into(),
                    log_x: false,
                    log_y: false,
                    series,
                    markers: vec![],
                    legend_below: false,
                }) }
                if !overlay.is_empty() {
                    { line_chart(&LineChart {
                        id: "laa-overlay".into(),
                        title: "mean over layers: this model against models seen earlier".into(),
                        x_label: "window ratio r".into(),
                        y_label: "LAA(r)".into(),
                        log_x: false,
                        log_y: false,
                        series: overlay,
                        markers: vec![],
                        legend_below: false,
                    }) }
                }
                <table class="table" id="laa-table"><thead><tr><th>{ "layer" }</th><th>{ "variant" }</th>
                    <th>{ "LAA AUC" }</th><th>{ "entropy (nats)" }</th><th>{ "mean distance" }</th></tr></thead>
                    <tbody>{ for rows }</tbody></table>
            </>
        }
    }

    fn view_gates(&self, t: &TraceView) -> Html {
        if t.gates.is_empty() {
            return html! { <p class="notice">{ "This model has no gated layers (gla, regla or retnet): nothing to show." }</p> };
        }
        let all: Vec<&GateStats> = t.gates.iter().filter(|g| g.head.is_none()).collect();
        let hists = all.iter().map(|g| {
            let color = match g.quantity.as_str() {
                "f" => PALETTE[0],
                "g" => PALETTE[2],
                _ => PALETTE[1],
            };
            html! {
                <div class="gate-cell" data-layer={g.layer.to_string()} data-quantity={g.quantity.clone()}
                    data-saturation={format!("{}", g.saturation)}>
                    { histogram(&format!("gate-{}-{}", g.layer, g.quantity),
                        &format!("layer {} {}: {} (saturated {:.1}%)", g.layer, g.variant, g.quantity.to_uppercase(), 100.0 * g.saturation),
                        &g.histogram, color) }
                </div>
            }
        });
        let per_head = t.gates.iter().filter(|g| g.head.is_some() && g.quantity == "f").map(|g| {
            html! { <tr><td>{ g.layer }</td><td>{ g.head.unwrap_or(0) }</td><td class="num">{ format!("{:.3}", g.mean) }</td>
                <td class="num">{ format!("{:.1}%", 100.0 * g.saturation) }</td></tr> }
        });
        html! {
            <>
                <div class="gate-grid">{ for hists }</div>
                <table class="table"><thead><tr><th>{ "layer" }</th><th>{ "head" }</th><th>{ "mean F" }</th>
                    <th>{ format!("saturated (F < {SATURATION_LOW} or > {SATURATION_HIGH})") }</th></tr></thead>
                    <tbody>{ for per_head }</tbody></table>
            </>
        }
    }
}

impl TraceViewComp {
    /// ReGLA Fig. 4: the gate histograms of the initial checkpoint beside the trained model's, on the
    /// same text (so the same number of tokens).
    fn view_fig4(&self, ctx: &Context<Self>, t: &TraceView) -> Html {
        let Some(compare) = &ctx.props().compare else {
            return html! {};
        };
        let trained_name = compare.of.to_string();
        let (state, body) = match (&compare.state, &self.compare_gates) {
            (CompareState::Loading(status), _) => {
                ("loading", html! { <p class="muted">{ status.as_str() }</p> })
            }
            (CompareState::Failed(e), _) => ("failed", html! { <p class="error">{ e.as_str() }</p> }),
            (CompareState::Ready(_), None) => {
                ("computing", html! { <p class="muted">{ "computing the initial checkpoint's gates…" }</p> })
            }
            (CompareState::Ready(_), Some(Err(e))) => ("failed", html! { <p class="error">{ e }</p> }),
            (CompareState::Ready(_), Some(Ok(initial))) => {
                ("ready", self.fig4_pairs(t, initial, &compare.name, &trained_name))
            }
        };
        html! {
            <section id="fig4" class="fig4" data-state={state} data-initial={compare.name.clone()}>
                <h3>{ "Before and after training (ReGLA Fig. 4)" }</h3>
                <p>
                    { format!("ReGLA (Lu et al., 2025, Fig. 4) initialises the forget-gate biases at extreme values, so that \
                       the gates start saturated near 0 or 1, and tracks them through training. The paper's claim: \
                       a plain sigmoid gate (GLA) stays stuck at the extremes, because its gradient σ(1−σ) all but \
                       vanishes there, while ReGLA's refining gate lets the values spread into the useful middle \
                       range. Left: the untrained starting point {}; right: the trained model {}; both run on \
                       the same text, cut to the same {} tokens.", compare.name, trained_name, t.labels.len()) }
                </p>
                { body }
            </section>
        }
    }

    fn fig4_pairs(
        &self,
        t: &TraceView,
        initial: &[GateStats],
        initial_name: &str,
        trained_name: &str,
    ) -> Html {
        let trained: Vec<&GateStats> = t.gates.iter().filter(|g| g.head.is_none()).collect();
        let cell = |which: &str, name: &str, g: &GateStats, color: &str| {
            html! {
                <div class="fig4-cell" data-which={which.to_string()} data-layer={g.layer.to_string()}
                    data-quantity={g.quantity.clone()} data-saturation={format!("{}", g.saturation)}>
                    { histogram(&format!("fig4-{which}-{}-{}", g.layer, g.quantity),
                        &format!("{name} · layer {} {} (saturated {:.1}%)", g.layer, g.quantity.to_uppercase(), 100.0 * g.saturation),
                        &g.histogram, color) }
                </div>
            }
        };
        let pairs = trained.iter().map(|g| {
            let before =
                initial.iter().find(|i| i.head.is_none() && i.layer == g.layer && i.quantity == g.quantity);
            html! {
                <div class="fig4-pair" data-layer={g.layer.to_string()} data-quantity={g.quantity.clone()}>
                    if let Some(b) = before {
                        { cell("initial", initial_name, b, PALETTE[3]) }
                    } else {
                        <p class="muted">{ "(no such gate in the initial checkpoint)" }</p>
                    }
                    { cell("trained", trained_name, g, PALETTE[0]) }
                </div>
            }
        });
        let rows = trained.iter().map(|g| {
            let before =
                initial.iter().find(|i| i.head.is_none() && i.layer == g.layer && i.quantity == g.quantity);
            let pct = |v: f64| format!("{:.1}%", 100.0 * v);
            html! { <tr><td>{ g.layer }</td><td>{ g.quantity.to_uppercase() }</td>
            <td class="num">{ before.map(|b| pct(b.saturation)).unwrap_or_else(|| "–".into()) }</td>
            <td class="num">{ pct(g.saturation) }</td></tr> }
        });
        html! {
            <>
                <div class="fig4-grid">{ for pairs }</div>
                <table class="table" id="fig4-table"><thead><tr><th>{ "layer" }</th><th>{ "gate" }</th>
                    <th>{ format!("saturated before ({initial_name})") }</th>
                    <th>{ format!("saturated after ({trained_name})") }</th></tr></thead>
                    <tbody>{ for rows }</tbody></table>
            </>
        }
    }
}

impl Component for TraceViewComp {
    type Message = TraceMsg;
    type Properties = TraceProps;

    fn create(ctx: &Context<Self>) -> Self {
        let mut v = TraceViewComp {
            run: 0,
            running: false,
            stage: AttnStage::Probabilities,
            trace: None,
            error: None,
            selected: (0, 0),
            debounce: None,
            compare_run: 0,
            compare_gates: None,
        };
        v.schedule(ctx);
        v
    }

    fn changed(&mut self, ctx: &Context<Self>, old: &Self::Properties) -> bool {
        if ctx.props().engine != old.engine || ctx.props().text != old.text || ctx.props().kind != old.kind {
            self.schedule(ctx);
        } else if ctx.props().compare != old.compare {
            ctx.link().send_message(TraceMsg::StartCompare);
        }
        true
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            TraceMsg::Start => {
                self.run = self.run.wrapping_add(1);
                self.running = true;
                let (run, link) = (self.run, ctx.link().clone());
                let (engine, text) = (ctx.props().engine.0.clone(), ctx.props().text.clone());
                let stage = if ctx.props().kind == TraceKind::Attention {
                    self.stage
                } else {
                    AttnStage::Probabilities
                };
                spawn_local(async move {
                    next_paint().await;
                    let result = engine.trace(&text, stage).map(Rc::new);
                    link.send_message(TraceMsg::Done { run, result });
                });
                ctx.link().send_message(TraceMsg::StartCompare);
            }
            TraceMsg::StartCompare => {
                self.compare_run = self.compare_run.wrapping_add(1);
                self.compare_gates = None;
                let props = ctx.props();
                let Some(CompareState::Ready(engine)) = props.compare.as_ref().map(|c| &c.state) else {
                    return true;
                };
                if props.kind != TraceKind::Gates {
                    return true;
                }
                let (run, link) = (self.compare_run, ctx.link().clone());
                let (engine, text) = (engine.0.clone(), props.text.clone());
                spawn_local(async move {
                    next_paint().await;
                    let result = engine.gate_stats(&text).map(Rc::new);
                    link.send_message(TraceMsg::CompareDone { run, result });
                });
            }
            TraceMsg::CompareDone { run, result } => {
                if run != self.compare_run {
                    return false;
                }
                self.compare_gates = Some(result);
            }
            TraceMsg::Done { run, result } => {
                if run != self.run {
                    return false;
                }
                self.running = false;
                match result {
                    Ok(t) => {
                        self.error = None;
                        if !t.summaries.is_empty() {
                            let layers = t
                                .summaries
                                .iter()
                                .map(|s| (s.layer, s.laa.auc, s.laa.curve.clone()))
                                .collect();
                            ctx.props().on_laa.emit((ctx.props().engine.0.info().name.clone(), layers));
                        }
                        let (l, h) = self.selected;
                        if l >= t.attention.len() || t.attention.get(l).is_some_and(|la| h >= la.heads.len())
                        {
                            self.selected = (0, 0);
                        }
                        self.trace = Some(t);
                    }
                    Err(e) => self.error = Some(e),
                }
            }
            TraceMsg::Stage(s) => {
                self.stage = s;
                ctx.link().send_message(TraceMsg::Start);
            }
            TraceMsg::Select(l, h) => self.selected = (l, h),
        }
        true
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let kind = ctx.props().kind;
        let (id, title, body_note) = match kind {
            TraceKind::Attention => ("attention-view", "Attention heatmaps", note(
                "Softmax attention with a decaying bias concentrates near the diagonal; linear attention \
                 without decay spreads weight over the whole prefix (TransNormer's 'attention dilution'); \
                 gates and decay (GLA, ReGLA, RetNet) restore locality.",
                "Rows are queries, columns keys; cells right of the diagonal are future keys (grey). \
                 Probabilities use a sequential map, logits, biases and signed linear scores a diverging \
                 one; the colorbar gives the range. Linear layers show their implied matrix with gates \
                 applied, each row divided by Σ|row|. Pick a thumbnail (layer × head) to zoom.")),
            TraceKind::Laa => ("laa-view", "Locally accumulated attention", note(
                "TransNormer (Qin et al., 2022) argues that vanilla linear attention dilutes: its attention \
                 mass spreads far from the query, unlike softmax attention, and that DiagAttention and \
                 NormAttention fix it (Fig. 2).",
                "LAA(r) is the share of a query's attention mass within its ⌈r·n⌉ nearest keys, averaged \
                 over queries; a curve that rises fast (large AUC) means local attention. The dashed grey \
                 line is uniform attention, the fully diluted reference.")),
            TraceKind::Gates => ("gate-view", "Gates", note(
                "ReGLA (Lu et al., 2025) observes that GLA's sigmoid forget gates saturate (values pile up \
                 near 0 or 1, where gradients vanish) and proposes a refining gate that keeps them in the \
                 useful range (Fig. 4).",
                "Histograms of the effective forget gate F (and ReGLA's g and r) over every token, key \
                 feature and head of a layer; 'saturated' is the share below 0.05 or above 0.95.")),
        };
        let body = match (&self.trace, &self.error) {
            (_, Some(e)) => html! { <p class="error">{ e }</p> },
            (None, None) => html! { <p class="muted">{ "computing…" }</p> },
            (Some(t), None) => match kind {
                TraceKind::Attention => self.view_attention(ctx, t),
                TraceKind::Laa => self.view_laa(ctx, t),
                TraceKind::Gates => html! { <>{ self.view_gates(t) }{ self.view_fig4(ctx, t) }</> },
            },
        };
        let cut = self.trace.as_ref().filter(|t| t.cut > 0).map(|t| {
            html! { <p class="notice">{ format!("The text was cut to its first {} tokens ({} more left out): the CPU trace keeps every n×n matrix.", t.labels.len(), t.cut) }</p> }
        });
        html! {
            <section class="view" id={id} data-running={self.running.to_string()}>
                <h2>{ title }</h2>
                { body_note }
                <p class="muted">{ "text: the prompt and the generated continuation" }</p>
                { for cut }
                { body }
            </section>
        }
    }
}
