//! Perplexity against context length: the held-out text, cut into windows of 1×…32× the training
//! length, swept by the model's worker in slices (reporting progress), with the trained model's
//! curve and the shipped models' table (`results.json`) behind it. In compare mode model B is swept
//! on the same text too (on its own channel) and both curves share one chart.

use std::rc::Rc;

use attnlab_core::analysis::PplPoint;
use gloo_timers::callback::Timeout;
use wasm_bindgen_futures::spawn_local;
use yew::prelude::*;

use super::{note, PplCurve, SideModel, DEBOUNCE_MS};
use crate::compare;
use crate::host::ModelRef;
use crate::lab;
use crate::plot::{Figure, LineChart, Series, LINE, PALETTE};
use crate::results::ShippedCurve;

#[derive(Properties, PartialEq)]
pub struct PplProps {
    pub engine: ModelRef,
    /// Held-out text the sweep runs on.
    pub text: Rc<String>,
    /// Where the text came from (shown).
    pub text_source: AttrValue,
    /// The trained model's curve, once measured (plotted as the reference).
    pub trained: Option<PplCurve>,
    /// Called with `(length, perplexity)` points when a sweep finishes.
    pub on_done: Callback<(ModelRef, PplCurve)>,
    /// The shipped models' curves (`results.json`), drawn behind this page's.
    pub shipped: Shipped,
    /// Name of the loaded model (its shipped curve is highlighted).
    pub model: AttrValue,
    /// Compare mode: model B.
    #[prop_or_default]
    pub b: Option<SideModel>,
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
    Progress {
        run: u32,
        fraction: f64,
        points: Vec<PplPoint>,
        on_gpu: bool,
    },
    Done {
        run: u32,
        result: Result<Vec<PplPoint>, String>,
    },
    /// Model B's sweep (compare mode).
    StartB,
    ProgressB {
        run: u32,
        points: Vec<PplPoint>,
    },
    DoneB {
        run: u32,
        result: Result<Vec<PplPoint>, String>,
    },
}

/// Model B's sweep (compare mode).
#[derive(Default)]
struct SweepB {
    run: u32,
    running: bool,
    points: Vec<PplPoint>,
    error: Option<String>,
}

/// Perplexity against context length, computed in the page in slices.
pub struct PplView {
    run: u32,
    running: bool,
    fraction: f64,
    points: Vec<PplPoint>,
    error: Option<String>,
    debounce: Option<Timeout>,
    b: SweepB,
    /// Where the worker runs the sweep (`None` until it says).
    on_gpu: Option<bool>,
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
        // Running from the start: the sweep is scheduled (`data-running` says so until it ends).
        let mut v = PplView {
            run: 0,
            running: true,
            fraction: 0.0,
            points: Vec::new(),
            error: None,
            debounce: None,
            b: SweepB { running: ctx.props().b.is_some(), ..SweepB::default() },
            on_gpu: None,
        };
        v.schedule(ctx);
        v
    }

    fn changed(&mut self, ctx: &Context<Self>, old: &Self::Properties) -> bool {
        if ctx.props().engine != old.engine || ctx.props().text != old.text {
            self.run = self.run.wrapping_add(1);
            self.running = true;
            self.points.clear();
            self.schedule(ctx);
        } else if ctx.props().b != old.b {
            ctx.link().send_message(PplMsg::StartB);
        }
        true
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            PplMsg::Start => {
                self.run = self.run.wrapping_add(1);
                self.running = true;
                self.fraction = 0.0;
                self.points.clear();
                self.error = None;
                let (run, link) = (self.run, ctx.link().clone());
                let (model, text) = (ctx.props().engine.clone(), ctx.props().text.clone());
                let progress = link.callback(move |(fraction, points, on_gpu)| PplMsg::Progress {
                    run,
                    fraction,
                    points,
                    on_gpu,
                });
                spawn_local(async move {
                    let result = model.ppl_sweep(&text, progress).await;
                    link.send_message(PplMsg::Done { run, result });
                });
                ctx.link().send_message(PplMsg::StartB);
            }
            PplMsg::StartB => {
                self.b = SweepB { run: self.b.run.wrapping_add(1), ..SweepB::default() };
                let Some(b) = &ctx.props().b else { return true };
                self.b.running = true;
                let (run, link) = (self.b.run, ctx.link().clone());
                let (model, text) = (b.model.clone(), ctx.props().text.clone());
                let progress = link.callback(move |(_, points, _)| PplMsg::ProgressB { run, points });
                spawn_local(async move {
                    let result = model.ppl_sweep(&text, progress).await;
                    link.send_message(PplMsg::DoneB { run, result });
                });
            }
            PplMsg::ProgressB { run, points } => {
                if run != self.b.run {
                    return false;
                }
                self.b.points = points;
            }
            PplMsg::DoneB { run, result } => {
                if run != self.b.run {
                    return false;
                }
                self.b.running = false;
                match result {
                    Ok(points) => self.b.points = points,
                    Err(e) => self.b.error = Some(e),
                }
            }
            PplMsg::Progress { run, fraction, points, on_gpu } => {
                if run != self.run {
                    return false;
                }
                self.fraction = fraction;
                self.points = points;
                self.on_gpu = Some(on_gpu);
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

    fn destroy(&mut self, ctx: &Context<Self>) {
        // Stop a sweep in flight (e.g. the model was switched and the lab unmounted).
        if self.running {
            ctx.props().engine.cancel_sweep();
        }
        if let (true, Some(b)) = (self.b.running, &ctx.props().b) {
            b.model.cancel_sweep();
        }
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let props = ctx.props();
        let info = props.engine.info();
        let series = self.series(props);
        let shipped_note = shipped_note(props);
        let rows = self.points.iter().map(|p| {
            html! { <tr><td>{ p.length }</td><td>{ format!("{}×", p.length / info.train_context.max(1)) }</td>
            <td>{ p.windows }</td><td>{ p.tokens }</td><td class="num">{ format!("{:.2}", p.ppl) }</td></tr> }
        });
        html! {
            <section class="view" id="ppl-view" data-running={self.running.to_string()}
                data-device={match self.on_gpu { Some(true) => "webgpu", Some(false) => "cpu", None => "" }}>
                <h2>{ "Perplexity versus context length" }</h2>
                { note(
                    "Position encodings differ most beyond the training length: MEP and ALiBi-style biases \
                     claim to keep perplexity flat as the context grows (MEP Table 2), NoPE and learned \
                     absolute positions degrade, and linear attention with decay is length-agnostic by design.",
                    "Perplexity (lower is better) of the held-out text, cut into windows of each length, \
                     every window run from an empty state; the training length is marked. The dashed line \
                     is the model as trained; the solid line follows your slider settings." ) }
                <p class="muted">{ format!("text: {} · at most {} scored tokens per length{}", props.text_source, lab::PPL_TOKEN_BUDGET,
                    match self.on_gpu { Some(true) => " · computed on WebGPU", Some(false) => " · computed on the CPU (wasm)", None => "" }) }</p>
                if self.running {
                    <progress id="ppl-progress" max="1" value={format!("{:.4}", self.fraction)}></progress>
                }
                if let Some(e) = &self.error { <p class="error">{ e }</p> }
                { shipped_note }
                { html! { <Figure chart={Rc::new(LineChart {
                    id: "ppl-chart".into(),
                    title: "perplexity against context length".into(),
                    x_label: "context length (tokens, log scale)".into(),
                    y_label: "perplexity (log scale)".into(),
                    log_x: true,
                    log_y: true,
                    series,
                    markers: vec![(info.train_context as f64, "training length".into())],
                    legend_below: true,
                })} model={info.name.clone()} /> } }
                <table class="table"><thead><tr><th>{ "length" }</th><th>{ "× train" }</th><th>{ "windows" }</th>
                    <th>{ "tokens" }</th><th>{ "perplexity" }</th></tr></thead><tbody>{ for rows }</tbody></table>
                <button id="ppl-rerun" disabled={self.running} onclick={ctx.link().callback(|_| PplMsg::Start)}>{ "re-run" }</button>
                { for props.b.as_ref().map(|b| self.view_compare(b)) }
            </section>
        }
    }
}

impl PplView {
    /// The chart's lines: the current settings' sweep, the shipped models' curves (the current
    /// model's in bold) and the model as trained (dashed).
    fn series(&self, props: &PplProps) -> Vec<Series> {
        let mut series = vec![Series {
            label: "current settings".into(),
            color: PALETTE[0].into(),
            points: self.points.iter().map(|p| (p.length as f64, p.ppl)).collect(),
            dashed: false,
            width: LINE,
        }];
        if let Shipped::Ready(curves) = &props.shipped {
            let n = curves.len();
            for (k, c) in curves.iter().enumerate() {
                let current = c.name == props.model.as_str();
                series.push(Series {
                    label: c.label(),
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
        series
    }

    /// Compare mode: A's curve (current settings) and B's on one axis.
    fn view_compare(&self, b: &SideModel) -> Html {
        let line = |points: &[PplPoint]| points.iter().map(|p| (p.length as f64, p.ppl)).collect::<Vec<_>>();
        let series = compare::overlay(
            &b.a_name,
            vec![(0, "current settings".into(), line(&self.points))],
            &b.name,
            vec![(3, "held-out sweep".into(), line(&self.b.points))],
        )
        .into_iter()
        .map(|l| Series {
            label: l.label,
            color: PALETTE[l.index].into(),
            points: l.points,
            dashed: l.side == compare::Side::B,
            width: LINE,
        })
        .collect();
        let train = b.model.info().train_context;
        html! {
            <section class="compare-block" id="ppl-compare-block" data-running={self.b.running.to_string()}>
                <h3>{ format!("Compare: A {} vs B {}", b.a_name, b.name) }</h3>
                if let Some(e) = &self.b.error { <p class="error">{ format!("B {}: {e}", b.name) }</p> }
                <Figure chart={Rc::new(LineChart {
                    id: "ppl-compare".into(),
                    title: format!("perplexity against context length: A {} vs B {}", b.a_name, b.name),
                    x_label: "context length (tokens, log scale)".into(),
                    y_label: "perplexity (log scale)".into(),
                    log_x: true,
                    log_y: true,
                    series,
                    markers: vec![(train as f64, "training length".into())],
                    legend_below: false,
                })} model={compare::caption_model(&b.a_name, &b.name, false)} />
            </section>
        }
    }
}

/// The line above the chart about the shipped models' curves: loading, missing (and why), or how
/// many there are, the current model in bold and whether their budgets differ.
fn shipped_note(props: &PplProps) -> Html {
    match &props.shipped {
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
            let first = curves.iter().find_map(|c| c.budget);
            let mixed = curves.iter().filter_map(|c| c.budget).any(|b| Some(b) != first);
            let seeds = curves.iter().filter(|c| c.extra_seed).count();
            let models = match seeds {
                0 => format!("the {} shipped models", curves.len()),
                n => format!(
                    "the {} shipped models and {n} extra seeds of them (not shipped)",
                    curves.len() - n
                ),
            };
            html! {
                <p class="muted" id="shipped-state" data-models={curves.len().to_string()}
                    data-mixed-budgets={mixed.to_string()}>
                    { format!("Thin lines: {models} as measured by `attnlab report` \
                               (docs/results/results.json, same held-out text){}{}.",
                               if current { format!("; {} in bold", props.model) } else { String::new() },
                               if mixed { "; they were trained on different token budgets (in each \
                                   label): compare lines of one budget" } else { "" }) }
                </p>
            }
        }
    }
}
