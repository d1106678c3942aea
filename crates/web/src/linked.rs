//! Views linked to the text: what the token strip shades and what the other views mark for a
//! selected position, computed from the trace the views already hold (no extra model run).
//!
//! Plain Rust without the DOM, compiled and tested natively.

use attnlab_core::analysis;
use attnlab_core::attention::LayerAttention;

use crate::lab::{self, PositionGates};

/// Which attention the token strip shades the text with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Source {
    /// The heatmap's layer and head: exactly its row.
    #[default]
    Head,
    /// The mean over the heads of the heatmap's layer.
    LayerMean,
    /// The mean over every head of every layer.
    AllLayers,
}

impl Source {
    pub const ALL: [Source; 3] = [Source::Head, Source::LayerMean, Source::AllLayers];

    /// The name used in the page (`data-source`, the selector's values).
    pub fn name(self) -> &'static str {
        match self {
            Source::Head => "head",
            Source::LayerMean => "layer",
            Source::AllLayers => "all",
        }
    }

    pub fn parse(s: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|x| x.name() == s)
    }
}

/// The attention of one query over its keys `0..=query`, as the strip shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub weights: Vec<f64>,
    /// Signed values (logits, biases, signed linear scores): shading uses |w| and the sign's hue.
    pub signed: bool,
    /// Values are one head's f32 matrix entries (written back as f32, digit for digit).
    pub exact_f32: bool,
}

impl Row {
    /// Largest |w| of the row (the strongest shade); 0 for an all-zero row.
    pub fn max_abs(&self) -> f64 {
        self.weights.iter().fold(0.0, |m, w| m.max(w.abs()))
    }

    /// Background opacity of key `j`: |w| relative to the row's largest, in [0, 1].
    pub fn alpha(&self, j: usize) -> f64 {
        let max = self.max_abs();
        match self.weights.get(j) {
            Some(w) if max > 0.0 && w.is_finite() => (w.abs() / max).clamp(0.0, 1.0),
            _ => 0.0,
        }
    }

    /// Key `j`'s weight as the page writes it (`data-weight`): a head's value exactly as the
    /// heatmap's CSV writes it, a mean in full f64 precision.
    pub fn text(&self, j: usize) -> Option<String> {
        let w = *self.weights.get(j)?;
        Some(if self.exact_f32 { format!("{}", w as f32) } else { format!("{w}") })
    }
}

/// Row `query` of `source`, with the heatmap at (`layer`, `head`); `None` when the trace has no
/// such layer, head or query.
pub fn row(
    attention: &[LayerAttention],
    source: Source,
    (layer, head): (usize, usize),
    query: usize,
) -> Option<Row> {
    let la = attention.get(layer)?;
    if query >= la.n {
        return None;
    }
    let layers: Vec<&LayerAttention> = match source {
        Source::Head => {
            let m = la.heads.get(head)?;
            let weights = m.get(query * la.n..=query * la.n + query)?.iter().map(|&v| v as f64).collect();
            return Some(Row { weights, signed: lab::is_signed(la.kind), exact_f32: true });
        }
        Source::LayerMean => vec![la],
        Source::AllLayers => attention.iter().collect(),
    };
    let mut sums = vec![0.0f64; query + 1];
    let mut count = 0usize;
    for l in &layers {
        for m in &l.heads {
            let values = m.get(query * l.n..=query * l.n + query)?;
            sums.iter_mut().zip(values).for_each(|(s, &v)| *s += v as f64);
            count += 1;
        }
    }
    if count == 0 {
        return None;
    }
    let weights = sums.into_iter().map(|s| s / count as f64).collect();
    let signed = layers.iter().any(|l| lab::is_signed(l.kind));
    Some(Row { weights, signed, exact_f32: false })
}

/// LAA(r) of one query in `layer` (the mean over its heads of the core's per-query LAA), at the
/// same r points as the layer's curve; `None` for a query outside the trace or an all-zero row.
pub fn query_laa(la: &LayerAttention, query: usize) -> Option<Vec<f64>> {
    let n = la.n;
    if query >= n || la.heads.is_empty() {
        return None;
    }
    let mut mean = vec![0.0f64; analysis::LAA_POINTS];
    let mut single = vec![0.0f32; n * n];
    for m in &la.heads {
        // Only this query's row: the core's LAA averages over non-zero rows, so it is the row's curve.
        single[query * n..(query + 1) * n].copy_from_slice(m.get(query * n..(query + 1) * n)?);
        if single[query * n..(query + 1) * n].iter().all(|v| *v == 0.0) {
            return None;
        }
        let l = analysis::laa(&single, n);
        mean.iter_mut().zip(&l.curve).for_each(|(a, c)| *a += c / la.heads.len() as f64);
    }
    Some(mean)
}

/// Gate values at `pos` of every gated layer and quantity: `(layer, quantity, per-head means)`.
pub fn gates_at(gates: &[PositionGates], pos: usize) -> Vec<(usize, &str, Vec<f32>)> {
    gates
        .iter()
        .filter_map(|g| {
            let heads = g.heads;
            let at = g.means.get(pos * heads..(pos + 1) * heads)?;
            Some((g.layer, g.quantity.as_str(), at.to_vec()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use attnlab_core::attention::AttnMatrixKind;

    fn layer(layer: usize, heads: Vec<Vec<f32>>) -> LayerAttention {
        LayerAttention { layer, kind: AttnMatrixKind::Probabilities, n: 2, heads }
    }

    #[test]
    fn head_rows_are_the_matrix_rows_and_means_average_heads_and_layers() {
        let a = vec![
            layer(0, vec![vec![1.0, 0.0, 0.1, 0.9], vec![1.0, 0.0, 0.5, 0.5]]),
            layer(1, vec![vec![1.0, 0.0, 0.3, 0.7], vec![1.0, 0.0, 0.7, 0.3]]),
        ];
        let head = row(&a, Source::Head, (0, 1), 1).expect("row");
        assert_eq!(head.weights, vec![0.5, 0.5]);
        assert_eq!(head.text(0).as_deref(), Some("0.5"));
        let odd = row(&a, Source::Head, (0, 0), 1).expect("row");
        assert_eq!(odd.text(0).as_deref(), Some("0.1"), "f32 digits, as the CSV writes them");
        let mean = row(&a, Source::LayerMean, (0, 1), 1).expect("mean");
        assert!((mean.weights[0] - (0.1f32 as f64 + 0.5) / 2.0).abs() < 1e-15);
        let all = row(&a, Source::AllLayers, (0, 0), 1).expect("all");
        let want = (0.1f32 as f64 + 0.5 + 0.3f32 as f64 + 0.7f32 as f64) / 4.0;
        assert!((all.weights[0] - want).abs() < 1e-15);
        assert_eq!(row(&a, Source::Head, (0, 0), 0).expect("first").weights, vec![1.0]);
        assert!(row(&a, Source::Head, (0, 2), 1).is_none());
        assert!(row(&a, Source::Head, (2, 0), 1).is_none());
        assert!(row(&a, Source::LayerMean, (0, 0), 2).is_none());
    }

    #[test]
    fn shade_is_relative_to_the_rows_largest_weight() {
        let r = Row { weights: vec![0.2, -0.8, 0.0], signed: true, exact_f32: false };
        assert_eq!(r.alpha(1), 1.0);
        assert!((r.alpha(0) - 0.25).abs() < 1e-12);
        assert_eq!(r.alpha(2), 0.0);
        assert_eq!(r.alpha(3), 0.0);
        let zero = Row { weights: vec![0.0], signed: false, exact_f32: true };
        assert_eq!(zero.alpha(0), 0.0);
        assert_eq!(Source::parse("layer"), Some(Source::LayerMean));
        assert_eq!(Source::parse("x"), None);
    }

    #[test]
    fn query_laa_is_the_core_laa_of_that_row() {
        // Query 1 puts 0.25 on key 0 (distance 1) and 0.75 on itself.
        let la = layer(0, vec![vec![1.0, 0.0, 0.25, 0.75]]);
        let c = query_laa(&la, 1).expect("curve");
        assert_eq!(c.len(), analysis::LAA_POINTS);
        assert_eq!(c[0], 0.0);
        assert!((c[1] - 0.75).abs() < 1e-12, "window 1: the query itself");
        assert!((c[analysis::LAA_POINTS - 1] - 1.0).abs() < 1e-12);
        assert!(query_laa(&la, 2).is_none());
        assert!(query_laa(&layer(0, vec![vec![0.0; 4]]), 1).is_none());
    }

    #[test]
    fn gates_at_reads_one_position() {
        let g = PositionGates { layer: 1, quantity: "f".into(), heads: 2, means: vec![0.1, 0.2, 0.3, 0.4] };
        assert_eq!(gates_at(std::slice::from_ref(&g), 1), vec![(1, "f", vec![0.3, 0.4])]);
        assert!(gates_at(&[g], 2).is_empty());
    }
}
