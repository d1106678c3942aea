//! The gate view: histograms of F (and ReGLA's g, r) per layer with their saturation, and, when the
//! index lists an initial checkpoint of the model, the ReGLA Fig. 4 comparison: the untrained
//! model's gates on the same text beside the trained one's. The comparison's gate statistics are
//! this view's state ([`GatesState`], updated by [`GatesMsg`]).

use std::rc::Rc;

use attnlab_core::analysis::{GateStats, SATURATION_HIGH, SATURATION_LOW};
use wasm_bindgen_futures::spawn_local;
use yew::prelude::*;

use super::note;
use super::trace::{TraceKind, TraceProps};
use crate::host::ModelRef;
use crate::lab::TraceView;
use crate::plot::{Figure, Histogram, HistogramFigure, LineChart, Series, LINE, PALETTE};

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
    Ready(ModelRef),
    Failed(AttrValue),
}

/// Section id, title and note of the view.
pub fn intro() -> (&'static str, &'static str, Html) {
    (
        "gate-view",
        "Gates",
        note(
            "ReGLA (Lu et al., 2025) observes that GLA's sigmoid forget gates saturate (values pile up \
             near 0 or 1, where gradients vanish) and proposes a refining gate that keeps them in the \
             useful range (Fig. 4).",
            "Histograms of the effective forget gate F (and ReGLA's g and r) over every token, key \
             feature and head of a layer; 'saturated' is the share below 0.05 or above 0.95.",
        ),
    )
}

pub enum GatesMsg {
    /// Compute the gate statistics of A's (0) or B's (1) initial checkpoint on the current text.
    Start(usize),
    Done {
        side: usize,
        run: u32,
        result: Result<Rc<Vec<GateStats>>, String>,
    },
}

/// Gate statistics of the initial checkpoints of A and (compare mode) B.
#[derive(Default)]
pub struct GatesState {
    run: [u32; 2],
    /// `None` while computing (or without a checkpoint to compare with).
    gates: [Option<Result<Rc<Vec<GateStats>>, String>>; 2],
}

impl GatesState {
    /// Apply `msg`; `send` takes the computation's answer. True when the view changes.
    pub fn update(&mut self, msg: GatesMsg, props: &TraceProps, send: &Callback<GatesMsg>) -> bool {
        match msg {
            GatesMsg::Start(side) => {
                let Some(gates) = self.gates.get_mut(side) else { return false };
                *gates = None;
                self.run[side] = self.run[side].wrapping_add(1);
                let checkpoint = if side == 0 { &props.compare } else { &props.b_initial };
                let Some(CompareState::Ready(engine)) = checkpoint.as_ref().map(|c| &c.state) else {
                    return true;
                };
                if props.kind != TraceKind::Gates {
                    return true;
                }
                let (run, send) = (self.run[side], send.clone());
                let (model, text) = (engine.clone(), props.text.clone());
                spawn_local(async move {
                    let result = model.gate_stats(&text).await.map(Rc::new);
                    send.emit(GatesMsg::Done { side, run, result });
                });
            }
            GatesMsg::Done { side, run, result } => {
                if self.run.get(side) != Some(&run) || matches!(&result, Err(e) if e == "superseded") {
                    return false;
                }
                self.gates[side] = Some(result);
            }
        }
        true
    }

    /// ReGLA Fig. 4: the gate histograms of the initial checkpoint beside the trained model's, on the
    /// same text (so the same number of tokens); in compare mode, model B's below A's when the
    /// index lists B's initial checkpoint too.
    pub fn view_fig4(&self, props: &TraceProps, t: &TraceView, b: Option<&TraceView>) -> Html {
        let Some(first) = props.compare.as_ref().or(props.b_initial.as_ref()) else {
            return html! {};
        };
        // `side`: the id stem of its histograms and table (`fig4` for A, `fig4-b` for B).
        let block = |side: &str,
                     compare: &Compare,
                     gates: &Option<Result<Rc<Vec<GateStats>>, String>>,
                     t: Option<&TraceView>| {
            let (state, body) = match (&compare.state, gates, t) {
                (CompareState::Loading(status), _, _) => {
                    ("loading", html! { <p class="muted">{ status.as_str() }</p> })
                }
                (CompareState::Failed(e), _, _) => ("failed", html! { <p class="error">{ e.as_str() }</p> }),
                (CompareState::Ready(_), None, _) | (_, _, None) => (
                    "computing",
                    html! { <p class="muted">{ "computing the initial checkpoint's gates…" }</p> },
                ),
                (CompareState::Ready(_), Some(Err(e)), _) => ("failed", html! { <p class="error">{ e }</p> }),
                (CompareState::Ready(_), Some(Ok(initial)), Some(t)) => {
                    ("ready", fig4_pairs(side, t, initial, &compare.name, &compare.of))
                }
            };
            (state, body)
        };
        let (state, body) = match &props.compare {
            Some(c) => block("fig4", c, &self.gates[0], Some(t)),
            None => ("none", html! {}),
        };
        let b_block = props.b_initial.as_ref().map(|c| {
            let (state, body) = block("fig4-b", c, &self.gates[1], b);
            html! { <div id="fig4-b" data-state={state} data-initial={c.name.clone()}>
            <h4>{ format!("B {}: {} before, {} after", c.of, c.name, c.of) }</h4>{ body }</div> }
        });
        let a_title = props.compare.as_ref().filter(|_| b_block.is_some()).map(|c| {
            html! { <h4>{ format!("A {}: {} before, {} after", c.of, c.name, c.of) }</h4> }
        });
        html! {
            <section id="fig4" class="fig4" data-state={state} data-initial={first.name.clone()}>
                <h3>{ "Before and after training (ReGLA Fig. 4)" }</h3>
                <p>
                    { format!("ReGLA (Lu et al., 2025, Fig. 4) initialises the forget-gate biases at extreme values, so that \
                       the gates start saturated near 0 or 1, and tracks them through training. The paper's claim: \
                       a plain sigmoid gate (GLA) stays stuck at the extremes, because its gradient σ(1−σ) all but \
                       vanishes there, while ReGLA's refining gate lets the values spread into the useful middle \
                       range. In each pair, left: the untrained starting point; right: the trained model (each named \
                       above its histogram); all run on the same text, cut to the same {} tokens.", t.labels.len()) }
                </p>
                { for a_title }
                { body }
                { for b_block }
            </section>
        }
    }
}

/// The histogram of `g` with its exports (`#<id>-export-svg`, …); `model` names it in the caption.
fn gate_figure(id: String, title: String, g: &GateStats, color: &str, model: &str) -> Html {
    let chart = Histogram { id, title, counts: g.histogram.clone(), color: color.to_string() };
    html! { <HistogramFigure chart={Rc::new(chart)} model={AttrValue::from(model.to_string())} /> }
}

/// The gate values at the token selected in the strip: per layer and quantity, each head's mean
/// over its key features.
fn at_token(t: &TraceView, query: Option<usize>) -> Html {
    let Some(q) = query else {
        return html! { <p class="muted" id="gates-at">{ "Hover or pin a token above to read its gate values." }</p> };
    };
    let rows = crate::linked::gates_at(&t.position_gates, q).into_iter().map(|(layer, quantity, heads)| {
        let mean = heads.iter().map(|&v| v as f64).sum::<f64>() / heads.len().max(1) as f64;
        let values: Vec<String> = heads.iter().map(|v| format!("{v}")).collect();
        html! { <tr data-layer={layer.to_string()} data-quantity={quantity.to_string()} data-values={values.join(",")}>
            <td>{ layer }</td><td>{ quantity.to_uppercase() }</td>
            <td class="num">{ heads.iter().map(|v| format!("{v:.3}")).collect::<Vec<_>>().join("  ") }</td>
            <td class="num">{ format!("{mean:.3}") }</td></tr> }
    });
    let label = t.labels.get(q).map(|s| format!("{s:?}")).unwrap_or_default();
    html! {
        <table class="table" id="gates-at" data-pos={q.to_string()}>
            <caption>{ format!("gates at token {q} {label} (each head's mean over its key features)") }</caption>
            <thead><tr><th>{ "layer" }</th><th>{ "gate" }</th><th>{ "per head" }</th><th>{ "mean" }</th></tr></thead>
            <tbody>{ for rows }</tbody>
        </table>
    }
}

/// Histograms of F (and g, r) per layer, the saturation per layer and head, and the gates at the
/// selected token.
pub fn view(model: &str, t: &TraceView, query: Option<usize>) -> Html {
    if t.gates.is_empty() {
        return html! { <p class="notice">{ "This model has no gated linear layers: nothing to show." }</p> };
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
                { gate_figure(format!("gate-{}-{}", g.layer, g.quantity),
                    format!("layer {} {}: {} (saturated {:.1}%)", g.layer, g.variant, g.quantity.to_uppercase(), 100.0 * g.saturation),
                    g, color, model) }
            </div>
        }
    });
    let per_head = t.gates.iter().filter(|g| g.head.is_some() && g.quantity == "f").map(|g| {
        html! { <tr><td>{ g.layer }</td><td>{ g.head.unwrap_or(0) }</td><td class="num">{ format!("{:.3}", g.mean) }</td>
            <td class="num">{ format!("{:.1}%", 100.0 * g.saturation) }</td></tr> }
    });
    html! {
        <>
            { at_token(t, query) }
            <div class="gate-grid">{ for hists }</div>
            <table class="table"><thead><tr><th>{ "layer" }</th><th>{ "head" }</th><th>{ "mean F" }</th>
                <th>{ format!("saturated (F < {SATURATION_LOW} or > {SATURATION_HIGH})") }</th></tr></thead>
                <tbody>{ for per_head }</tbody></table>
        </>
    }
}

fn fig4_pairs(
    side: &str,
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
                { gate_figure(format!("{side}-{which}-{}-{}", g.layer, g.quantity),
                    format!("{name} · layer {} {} (saturated {:.1}%)", g.layer, g.quantity.to_uppercase(), 100.0 * g.saturation),
                    g, color, name) }
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
            <table class="table" id={format!("{side}-table")}><thead><tr><th>{ "layer" }</th><th>{ "gate" }</th>
                <th>{ format!("saturated before ({initial_name})") }</th>
                <th>{ format!("saturated after ({trained_name})") }</th></tr></thead>
                <tbody>{ for rows }</tbody></table>
        </>
    }
}

/// Compare mode: per layer and gate, both models' histograms as shares of their values on one axis
/// (A solid, B dashed), and the saturation of each.
pub fn view_compare(t: &TraceView, b: &super::attention::SideB) -> Html {
    let a_all: Vec<&GateStats> = t.gates.iter().filter(|g| g.head.is_none()).collect();
    let b_all: Vec<&GateStats> = b.trace.gates.iter().filter(|g| g.head.is_none()).collect();
    if a_all.is_empty() && b_all.is_empty() {
        return html! { <p class="notice" id="gates-compare-none">{ "Neither model has gated linear layers: nothing to compare." }</p> };
    }
    let caption = crate::compare::caption_model(b.a_name, b.name, false);
    // Every (layer, gate) of either model, in A's order then B's.
    let mut keys: Vec<(usize, String)> = a_all.iter().map(|g| (g.layer, g.quantity.clone())).collect();
    for g in &b_all {
        if !keys.contains(&(g.layer, g.quantity.clone())) {
            keys.push((g.layer, g.quantity.clone()));
        }
    }
    fn find<'a>(all: &[&'a GateStats], (l, q): &(usize, String)) -> Option<&'a GateStats> {
        all.iter().find(|g| g.layer == *l && g.quantity == *q).copied()
    }
    let charts = keys.iter().map(|key| {
        let (ga, gb) = (find(&a_all, key), find(&b_all, key));
        let lines = |g: Option<&GateStats>| -> crate::compare::Lines {
            g.map(|g| {
                let what = format!("{} (saturated {:.1}%)", g.quantity.to_uppercase(), 100.0 * g.saturation);
                (0, what, crate::compare::histogram_shares(&g.histogram))
            })
            .into_iter()
            .collect()
        };
        let (a_lines, b_lines) = (lines(ga), lines(gb));
        let series = crate::compare::overlay(b.a_name, a_lines, b.name, b_lines)
            .into_iter()
            .map(|l| Series {
                color: if l.side == crate::compare::Side::A { PALETTE[0] } else { PALETTE[3] }.into(),
                dashed: l.side == crate::compare::Side::B,
                label: l.label,
                points: l.points,
                width: LINE,
            })
            .collect();
        let (layer, q) = key;
        html! {
            <div class="gate-compare-cell" data-layer={layer.to_string()} data-quantity={q.clone()}
                data-saturation-a={ga.map(|g| format!("{}", g.saturation)).unwrap_or_default()}
                data-saturation-b={gb.map(|g| format!("{}", g.saturation)).unwrap_or_default()}>
                <Figure chart={Rc::new(LineChart {
                    id: format!("gates-compare-{layer}-{q}"),
                    title: format!("layer {layer} {}: share of values per bin", q.to_uppercase()),
                    x_label: "gate value (bin centre)".into(),
                    y_label: "share of values".into(),
                    log_x: false,
                    log_y: false,
                    series,
                    markers: vec![],
                    legend_below: false,
                })} model={caption.clone()} />
            </div>
        }
    });
    html! {
        <section class="compare-block" id="gates-compare">
            <h3>{ format!("Compare: A {} (solid) vs B {} (dashed)", b.a_name, b.name) }</h3>
            <p class="muted">{ "Each model's gate histogram as the share of its values per bin, on one axis (the texts are the same; the shares make different gate widths comparable)." }</p>
            <div class="gate-compare-grid">{ for charts }</div>
        </section>
    }
}
