//! The LAA view: locally accumulated attention per layer with its AUC, the uniform-attention
//! baseline, the overlay of the other models seen in this page, and the curves of the token selected
//! in the strip (dashed, per layer).

use attnlab_core::analysis::{laa_uniform, LayerSummary};
use std::rc::Rc;

use yew::prelude::*;

use super::note;
use super::trace::TraceProps;
use crate::compare;
use crate::lab::TraceView;
use crate::plot::{Figure, LineChart, Series, LINE, PALETTE};

/// Section id, title and note of the view.
pub fn intro() -> (&'static str, &'static str, Html) {
    (
        "laa-view",
        "Locally accumulated attention",
        note(
            "TransNormer (Qin et al., 2022) argues that vanilla linear attention dilutes: its attention \
             mass spreads far from the query, unlike softmax attention, and that DiagAttention and \
             NormAttention fix it (Fig. 2).",
            "LAA(r) is the share of a query's attention mass within its ⌈r·n⌉ nearest keys, averaged \
             over queries; a curve that rises fast (large AUC) means local attention. The dashed grey \
             line is uniform attention, the fully diluted reference.",
        ),
    )
}

/// The selected query's own LAA curve in every layer (mean over heads), dashed in its layer's colour.
/// An LAA chart: LAA(r) against the window ratio r.
fn laa_chart(id: &str, title: String, series: Vec<Series>, legend_below: bool) -> LineChart {
    LineChart {
        id: id.into(),
        title,
        x_label: "window ratio r (share of the n nearest keys)".into(),
        y_label: "LAA(r)".into(),
        log_x: false,
        log_y: false,
        series,
        markers: vec![],
        legend_below,
    }
}

fn query_series(t: &TraceView, query: usize, curve: impl Fn(&[f64]) -> Vec<(f64, f64)>) -> Vec<Series> {
    let label = t.labels.get(query).map(|s| format!("{s:?}")).unwrap_or_default();
    t.attention
        .iter()
        .filter_map(|la| Some((la.layer, crate::linked::query_laa(la, query)?)))
        .map(|(layer, c)| Series {
            label: format!("token {query} {label}, layer {layer}"),
            color: PALETTE[layer % PALETTE.len()].into(),
            points: curve(&c),
            dashed: true,
            width: LINE,
        })
        .collect()
}

/// The LAA curves of every layer, the uniform baseline, the selected token's curves, the overlay
/// and the table.
pub fn view(props: &TraceProps, t: &TraceView, query: Option<usize>) -> Html {
    // The tokens the LAA covers: all of them, or the first ones of a long GPU trace (exact rows).
    let n = laa_tokens(t);
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
    if let Some(q) = query {
        series.extend(query_series(t, q, curve));
    }
    let uniform = laa_uniform(n);
    series.push(Series {
        label: format!("uniform attention (AUC {:.3})", uniform.auc),
        color: "#888888".into(),
        points: curve(&uniform.curve),
        dashed: true,
        width: LINE,
    });
    let me = props.engine.info().name.clone();
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
            { html! { <Figure chart={Rc::new(laa_chart("laa-chart", format!("locally accumulated attention, {n} tokens"), series, false))}
                model={props.engine.info().name.clone()} /> } }
            if !overlay.is_empty() {
                { html! { <Figure chart={Rc::new(LineChart {
                    id: "laa-overlay".into(),
                    title: "mean over layers: this model against models seen earlier".into(),
                    x_label: "window ratio r".into(),
                    y_label: "LAA(r)".into(),
                    log_x: false,
                    log_y: false,
                    series: overlay,
                    markers: vec![],
                    legend_below: false,
                })} model={props.engine.info().name.clone()} /> } }
            }
            <table class="table" id="laa-table"><thead><tr><th>{ "layer" }</th><th>{ "variant" }</th>
                <th>{ "LAA AUC" }</th><th>{ "entropy (nats)" }</th><th>{ "mean distance" }</th></tr></thead>
                <tbody>{ for rows }</tbody></table>
        </>
    }
}

/// Compare mode: both models' per-layer LAA curves on one axis (A solid, B dashed, a layer's
/// colour on both sides) with the uniform baseline, as each model's own view draws them; a preset's
/// reference model (`(name, trace)`, TransNormer Fig. 2's softmax model) wide and pale.
pub fn view_compare(
    t: &TraceView,
    b: &super::attention::SideB,
    reference: Option<(&str, &TraceView)>,
) -> Html {
    let xs: Vec<f64> = (0..attnlab_core::analysis::LAA_POINTS).map(|k| k as f64 / 100.0).collect();
    let lines = |tr: &TraceView| {
        tr.summaries
            .iter()
            .map(|s| {
                let points = xs.iter().copied().zip(s.laa.curve.iter().copied()).collect();
                (s.layer, format!("layer {} {} (AUC {:.3})", s.layer, s.variant, s.laa.auc), points)
            })
            .collect()
    };
    let mut lines_all = compare::overlay(b.a_name, lines(t), b.name, lines(b.trace));
    if let Some((name, r)) = reference {
        lines_all.extend(compare::side_lines(compare::Side::Reference, name, lines(r)));
    }
    let mut series: Vec<Series> = lines_all
        .into_iter()
        .map(|l| {
            let (color, reference) = (PALETTE[l.index % PALETTE.len()], l.side == compare::Side::Reference);
            Series {
                label: l.label,
                // The reference wide and translucent (#rrggbbaa), behind A's and B's lines.
                color: if reference { format!("{color}66") } else { color.into() },
                points: l.points,
                dashed: l.side == compare::Side::B,
                width: if reference { 4.0 } else { LINE },
            }
        })
        .collect();
    let n = laa_tokens(t);
    let uniform = laa_uniform(n);
    series.push(Series {
        label: format!("uniform attention, {n} tokens (AUC {:.3})", uniform.auc),
        color: "#888888".into(),
        points: xs.iter().copied().zip(uniform.curve.iter().copied()).collect(),
        dashed: true,
        width: 0.8,
    });
    let auc = |tr: Option<&TraceView>, layer: usize| {
        tr.and_then(|tr| tr.summaries.iter().find(|o| o.layer == layer)).map(|o| o.laa.auc)
    };
    let rows = t.summaries.iter().map(|s| {
        let (other, r) = (auc(Some(b.trace), s.layer), auc(reference.map(|r| r.1), s.layer));
        let cell = |v: Option<f64>| v.map(|v| format!("{v:.4}")).unwrap_or_else(|| "–".into());
        html! { <tr data-layer={s.layer.to_string()} data-auc-a={format!("{}", s.laa.auc)}
        data-auc-b={other.map(|o| format!("{o}")).unwrap_or_default()}>
        <td>{ s.layer }</td><td class="num">{ format!("{:.4}", s.laa.auc) }</td>
        <td class="num">{ cell(other) }</td>
        if reference.is_some() { <td class="num">{ cell(r) }</td> }</tr> }
    });
    let ref_name = reference.map(|r| r.0);
    let (vs, and) = ref_name.map(|r| (format!(", {r} (wide)"), format!(" and {r}"))).unwrap_or_default();
    let sep = if ref_name.is_some() { "," } else { " vs" };
    let title = format!("LAA per layer: A {} (solid){sep} B {} (dashed){vs}", b.a_name, b.name);
    let caption = format!("{}{and}", compare::caption_model(b.a_name, b.name, false));
    html! {
        <section class="compare-block" id="laa-compare-block">
            <h3>{ format!("Compare: A {} vs B {}{and}", b.a_name, b.name) }</h3>
            <Figure chart={Rc::new(laa_chart("laa-compare", title, series, true))} model={caption} />
            <table class="table" id="laa-compare-table"><thead><tr><th>{ "layer" }</th>
                <th>{ format!("LAA AUC A {}", b.a_name) }</th><th>{ format!("LAA AUC B {}", b.name) }</th>
                if let Some(r) = ref_name { <th>{ format!("LAA AUC {r}") }</th> }</tr></thead>
                <tbody>{ for rows }</tbody></table>
        </section>
    }
}

/// Tokens a trace's LAA covers.
fn laa_tokens(t: &TraceView) -> usize {
    if t.summary_tokens > 0 {
        t.summary_tokens
    } else {
        t.labels.len()
    }
}
