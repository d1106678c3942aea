//! The kernel view: B_h(d) or exp(B_h(d)) per head against distance, with the bias sliders (global
//! slope scale, MEP Table 4 presets, three kernel-mix rows, reset to trained).
//!
//! What is plotted (layer, curve kind, log y, distance range) is the view's own state
//! ([`Plot`], updated by [`PlotMsg`]); a slider move is an [`EditMsg`] that [`apply`] turns
//! into a new [`BiasEdit`] for the page (`on_edit`), which rebuilds the model through the host.
//!
//! In compare mode a second chart overlays model B's curves of the same layer (clamped to its
//! layers) over the same distances on one axis: A solid, B dashed, a head's colour on both sides.

use std::rc::Rc;

use attnlab_core::analysis::KernelCurve;
use attnlab_core::variants::{KernelKind, KernelTerm};
use wasm_bindgen_futures::spawn_local;
use web_sys::{HtmlInputElement, HtmlSelectElement};
use yew::prelude::*;

use super::{note, SideModel};
use crate::compare;
use crate::host::ModelRef;
use crate::lab::{self, BiasEdit};
use crate::plot::{Figure, LineChart, Series, LINE, PALETTE};
use crate::share::Share;
use crate::url_state::{Curve, UrlState, DEFAULT_KERNEL_RANGE, KERNEL_RANGES};

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
    pub engine: ModelRef,
    pub edit: BiasEdit,
    pub on_edit: Callback<BiasEdit>,
    /// Compare mode: model B.
    #[prop_or_default]
    pub b: Option<SideModel>,
}

/// What the chart shows.
#[derive(Clone, Copy, PartialEq)]
struct Plot {
    /// Chosen layer (clamped to the model's layers when drawn).
    layer: usize,
    kind: Curve,
    log_y: bool,
    /// Distance range in multiples of the training length.
    range: usize,
}

impl Plot {
    /// What the page's URL says (the defaults where it says nothing).
    fn of(s: &UrlState) -> Plot {
        Plot {
            layer: s.kernel_layer.unwrap_or(0),
            kind: s.curve.unwrap_or_default(),
            log_y: s.log_y.unwrap_or(false),
            range: s.kernel_range.unwrap_or(DEFAULT_KERNEL_RANGE),
        }
    }

    /// Keep this plot in the URL (only what differs from what it says already).
    fn keep(&self, s: &mut UrlState) {
        let now = Plot::of(s);
        if now.layer != self.layer {
            s.kernel_layer = Some(self.layer);
        }
        if now.kind != self.kind {
            s.curve = Some(self.kind);
        }
        if now.log_y != self.log_y {
            s.log_y = Some(self.log_y);
        }
        if now.range != self.range {
            s.kernel_range = Some(self.range);
        }
    }
}

/// The chart's controls.
enum PlotMsg {
    Layer(usize),
    Kind(Curve),
    ToggleLogY,
    Range(usize),
}

impl Reducible for Plot {
    type Action = PlotMsg;

    fn reduce(self: Rc<Self>, msg: PlotMsg) -> Rc<Self> {
        let mut d = *self;
        match msg {
            PlotMsg::Layer(layer) => d.layer = layer,
            PlotMsg::Kind(kind) => d.kind = kind,
            PlotMsg::ToggleLogY => d.log_y = !d.log_y,
            PlotMsg::Range(range) => d.range = range,
        }
        Rc::new(d)
    }
}

/// A slider or button that changes the bias edit.
enum EditMsg {
    /// log2 of the global slope scale.
    SlopeLog2(f64),
    /// MEP Table 4 preset: every head's slope (`None`: the trained slopes); the scale returns to 1.
    Preset(Option<f64>),
    /// Mix row k: the kernel picked (an id of [`PICKS`]).
    Pick(usize, String),
    /// Mix row k: its weight.
    Weight(usize, f64),
    /// Mix row k: log2 of its slope scale.
    ScaleLog2(usize, f64),
}

/// `edit` with `msg` applied (`rows`: the mix rows shown), clamped to the sliders' range.
fn apply(edit: &BiasEdit, rows: &[KernelTerm], msg: EditMsg) -> BiasEdit {
    let mut e = edit.clone();
    let mut row = |k: usize, f: &dyn Fn(&mut KernelTerm)| {
        let mut r = rows.to_vec();
        if let Some(t) = r.get_mut(k) {
            f(t);
        }
        e.mix = Some(r);
    };
    match msg {
        EditMsg::SlopeLog2(v) => e.slope_scale = 2f64.powf(v),
        EditMsg::Preset(u) => {
            e.uniform_slope = u;
            e.slope_scale = 1.0;
        }
        EditMsg::Pick(k, v) => row(k, &|t| *t = term_for(&v, t)),
        EditMsg::Weight(k, v) => row(k, &|t| t.weight = v),
        EditMsg::ScaleLog2(k, v) => row(k, &|t| t.scale = 2f64.powf(v)),
    }
    e.clamped()
}

/// The number in a range input or select (`fallback` when it does not parse).
fn number<T: std::str::FromStr>(value: String, fallback: T) -> T {
    value.parse().unwrap_or(fallback)
}

/// B_h(d) and exp(B_h(d)) per head, with the slope and mix sliders.
#[function_component(KernelView)]
pub fn kernel_view(props: &KernelProps) -> Html {
    let engine = &props.engine;
    let share = use_context::<Share>();
    let plot = {
        let share = share.clone();
        use_reducer(move || Plot::of(&share.map(|s| s.get()).unwrap_or_default()))
    };
    {
        let share = share.clone();
        use_effect_with(*plot, move |p| {
            if let Some(share) = share {
                share.update(|s| p.keep(s));
            }
        });
    }
    let info = engine.info();
    let layer = plot.layer.min(info.n_layers.saturating_sub(1));
    if let Some(share) = &share {
        let problem = (plot.layer != layer)
            .then(|| format!("the model has {} layers; layer {layer} is shown", info.n_layers));
        share.checked("kernel_layer", problem);
    }
    let n = (info.train_context * plot.range).clamp(2, info.max_context);
    let steerable = engine.has_steerable_layers();
    let curves = use_kernel_curves(Some(engine.clone()), Some((engine.id(), layer, n)));
    // Compare mode: B's curves of the same layer (clamped) over the same distances.
    let b_layer = props.b.as_ref().map(|b| {
        let bi = b.model.info();
        compare::clamp_selection((layer, 0), bi.n_layers, 1, &format!("B {}", b.name))
    });
    let b_key = props
        .b
        .as_ref()
        .zip(b_layer.as_ref())
        .map(|(b, ((bl, _), _))| (b.model.id(), *bl, n.min(b.model.info().max_context).max(2)));
    let curves_b = use_kernel_curves(props.b.as_ref().map(|b| b.model.clone()), b_key);
    let compare_chart = props.b.as_ref().map(|b| {
        let note = b_layer.as_ref().and_then(|(_, note)| note.clone());
        view_compare(engine, b, &plot, layer, curves.as_deref(), curves_b.as_deref(), note)
    });
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
            { view_plot_settings(engine, &plot, layer) }
            { view_chart(engine, &plot, layer, curves.as_deref()) }
            { for compare_chart }
            if !steerable {
                <p class="notice">{ "This model's biases are learned (or it has none), so the sliders are off: the curves show what training produced." }</p>
            }
            { view_sliders(props, steerable) }
        </section>
    }
}

/// The worker's kernel curves of `model` for `key` = (model id, layer, distances), asked again
/// whenever the key changes (none without a key or model); the last ones stay drawn while new ones
/// compute, and an answer superseded by a newer request is dropped.
#[hook]
fn use_kernel_curves(
    model: Option<ModelRef>,
    key: Option<(u32, usize, usize)>,
) -> UseStateHandle<Option<Rc<Curves>>> {
    let curves = use_state(|| None::<Rc<Curves>>);
    {
        let curves = curves.clone();
        use_effect_with(key, move |key| match (*key, model) {
            (Some((id, layer, n)), Some(model)) => spawn_local(async move {
                match model.kernel_curves(layer, n).await {
                    Err(e) if e == "superseded" => {}
                    result => curves.set(Some(Rc::new(Curves { key: (id, layer, n), result }))),
                }
            }),
            _ => curves.set(None),
        });
    }
    curves
}

/// Layer, distance range, curve kind and log y.
fn view_plot_settings(engine: &ModelRef, plot: &UseReducerHandle<Plot>, layer: usize) -> Html {
    let specs = engine.current_specs();
    let send = |f: fn(String) -> PlotMsg| {
        let plot = plot.clone();
        Callback::from(move |e: Event| {
            plot.dispatch(f(e.target_unchecked_into::<HtmlSelectElement>().value()))
        })
    };
    let on_layer = send(|v| PlotMsg::Layer(number(v, 0)));
    let on_range = send(|v| PlotMsg::Range(number(v, DEFAULT_KERNEL_RANGE)));
    let on = |msg: fn() -> PlotMsg| {
        let plot = plot.clone();
        Callback::from(move |_: Event| plot.dispatch(msg()))
    };
    let (kind, range) = (plot.kind, plot.range);
    html! {
        <div class="settings">
            <label>{ "layer " }
                <select id="kernel-layer" onchange={on_layer}>
                    { for (0..engine.info().n_layers).map(|i| html! {
                        <option value={i.to_string()} selected={i == layer}>{ format!("{i}: {}", specs[i].variant_id()) }</option>
                    }) }
                </select>
            </label>
            <label>{ "distance range " }
                <select id="kernel-range" onchange={on_range}>
                    { for KERNEL_RANGES.iter().map(|r| html! {
                        <option value={r.to_string()} selected={*r == range}>{ format!("{r}× training length") }</option>
                    }) }
                </select>
            </label>
            <label class="inline"><input type="radio" name="curve-kind" checked={kind == Curve::Bias}
                onchange={on(|| PlotMsg::Kind(Curve::Bias))}/>{ " B(d)" }</label>
            <label class="inline"><input type="radio" name="curve-kind" checked={kind == Curve::Kernel}
                onchange={on(|| PlotMsg::Kind(Curve::Kernel))}/>{ " exp(B(d))" }</label>
            <label class="inline"><input id="kernel-log-y" type="checkbox" checked={plot.log_y} disabled={kind == Curve::Bias}
                onchange={on(|| PlotMsg::ToggleLogY)}/>{ " log y" }</label>
        </div>
    }
}

/// Kernel curves the worker computed, for (model id, layer, n).
struct Curves {
    key: (u32, usize, usize),
    result: Result<Vec<KernelCurve>, String>,
}

/// The curves of `layer` (the latest computed; `data-current` says whether they are of the
/// settings shown).
fn view_chart(engine: &ModelRef, plot: &Plot, layer: usize, curves: Option<&Curves>) -> Html {
    let info = engine.info();
    let kind = plot.kind;
    let Some(computed) = curves else {
        return html! { <p class="muted" id="kernel-chart-pending">{ "computing the curves…" }</p> };
    };
    let current = computed.key.0 == engine.id() && computed.key.1 == layer;
    let layer = computed.key.1;
    let chart = match &computed.result {
        Ok(curves) => {
            let series = curves
                .iter()
                .map(|c| {
                    let ys = if kind == Curve::Bias { &c.bias } else { &c.kernel };
                    Series {
                        label: format!("head {}", c.head),
                        color: PALETTE[c.head % PALETTE.len()].to_string(),
                        points: ys.iter().enumerate().map(|(d, &y)| (d as f64, y)).collect(),
                        dashed: false,
                        width: LINE,
                    }
                })
                .collect();
            let y_label = if kind == Curve::Bias { "B_h(d)" } else { "exp(B_h(d))" };
            html! { <Figure chart={Rc::new(LineChart {
                id: "kernel-chart".into(),
                title: format!(
                    "layer {layer} ({}): {y_label} against distance d",
                    engine.current_specs()[layer].variant_id()
                ),
                x_label: "distance d = i − j (tokens)".into(),
                y_label: y_label.into(),
                log_x: false,
                log_y: plot.log_y && kind == Curve::Kernel,
                series,
                markers: vec![(info.train_context as f64, format!("training length {}", info.train_context))],
                legend_below: false,
            })} model={engine.info().name.clone()} /> }
        }
        Err(e) => html! { <p class="error">{ e }</p> },
    };
    html! { <div id="kernel-curves" data-model={computed.key.0.to_string()} data-current={current.to_string()}>{ chart }</div> }
}

/// One kernel curve as chart points (the bias or the kernel).
fn curve_points(c: &KernelCurve, kind: Curve) -> Vec<(f64, f64)> {
    let ys = if kind == Curve::Bias { &c.bias } else { &c.kernel };
    ys.iter().enumerate().map(|(d, &y)| (d as f64, y)).collect()
}

/// Compare mode: A's curves (solid) and B's (dashed) of the same layer on one axis.
fn view_compare(
    engine: &ModelRef,
    b: &SideModel,
    plot: &Plot,
    layer: usize,
    a: Option<&Curves>,
    bc: Option<&Curves>,
    note: Option<String>,
) -> Html {
    let kind = plot.kind;
    let ready = |c: Option<&Curves>| match c.map(|c| &c.result) {
        Some(Ok(curves)) => Ok(curves.clone()),
        Some(Err(e)) => Err(e.clone()),
        None => Err("computing the curves…".to_string()),
    };
    let (ca, cb) = match (ready(a), ready(bc)) {
        (Ok(ca), Ok(cb)) => (ca, cb),
        (Err(e), _) | (_, Err(e)) => {
            return html! { <p class="muted" id="kernel-compare-pending">{ e }</p> };
        }
    };
    let lines = |cs: &[KernelCurve]| {
        cs.iter().map(|c| (c.head, format!("head {}", c.head), curve_points(c, kind))).collect()
    };
    let series = compare::overlay(&b.a_name, lines(&ca), &b.name, lines(&cb))
        .into_iter()
        .map(|l| Series {
            label: l.label,
            color: PALETTE[l.index % PALETTE.len()].into(),
            points: l.points,
            dashed: l.side == compare::Side::B,
            width: LINE,
        })
        .collect();
    let y_label = if kind == Curve::Bias { "B_h(d)" } else { "exp(B_h(d))" };
    let b_layer = bc.map_or(layer, |c| c.key.1);
    let train = engine.info().train_context;
    html! {
        <section class="compare-block" id="kernel-compare-block" data-layer-a={layer.to_string()} data-layer-b={b_layer.to_string()}>
            <h3>{ format!("Compare: A {} vs B {}", b.a_name, b.name) }</h3>
            if let Some(n) = note { <p class="notice clamp-note">{ n }</p> }
            <Figure chart={Rc::new(LineChart {
                id: "kernel-compare".into(),
                title: format!("{y_label}: A {} layer {layer} (solid) vs B {} layer {b_layer} (dashed)", b.a_name, b.name),
                x_label: "distance d = i − j (tokens)".into(),
                y_label: y_label.into(),
                log_x: false,
                log_y: plot.log_y && kind == Curve::Kernel,
                series,
                markers: vec![(train as f64, format!("training length {train}"))],
                legend_below: true,
            })} model={compare::caption_model(&b.a_name, &b.name, false)} />
            <p class="muted">{ "B is shown as trained: the sliders edit A only." }</p>
        </section>
    }
}

/// The global slope slider, the presets, reset, and the three mix rows.
fn view_sliders(props: &KernelProps, steerable: bool) -> Html {
    let engine = &props.engine;
    let first_steerable = engine.trained_specs().iter().find(|s| lab::is_steerable(s)).cloned();
    let rows: Rc<Vec<KernelTerm>> = Rc::new(
        props
            .edit
            .mix
            .clone()
            .unwrap_or_else(|| mix_rows(first_steerable.as_ref().and_then(lab::trained_mix))),
    );
    let set = {
        let (edit, rows, on_edit) = (props.edit.clone(), rows.clone(), props.on_edit.clone());
        Callback::from(move |msg: EditMsg| on_edit.emit(apply(&edit, &rows, msg)))
    };
    let slope_log2 = props.edit.slope_scale.max(1e-9).log2();
    let on_slope = set.reform(|e: InputEvent| {
        EditMsg::SlopeLog2(number(e.target_unchecked_into::<HtmlInputElement>().value(), 0.0))
    });
    let preset = |u: Option<f64>| set.reform(move |_: MouseEvent| EditMsg::Preset(u));
    let reset = props.on_edit.reform(|_: MouseEvent| BiasEdit::default());
    html! {
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
            { for rows.iter().enumerate().map(|(k, t)| view_mix_row(k, t, &set, steerable)) }
        </div>
    }
}

/// Mix row `k` (α, β, γ): kernel, weight and slope scale.
fn view_mix_row(k: usize, t: &KernelTerm, set: &Callback<EditMsg>, steerable: bool) -> Html {
    let name = ["α", "β", "γ"][k];
    let value = |e: InputEvent| number(e.target_unchecked_into::<HtmlInputElement>().value(), 0.0);
    let on_pick =
        set.reform(move |e: Event| EditMsg::Pick(k, e.target_unchecked_into::<HtmlSelectElement>().value()));
    let on_weight = set.reform(move |e: InputEvent| EditMsg::Weight(k, value(e)));
    let on_scale = set.reform(move |e: InputEvent| EditMsg::ScaleLog2(k, value(e)));
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
}
