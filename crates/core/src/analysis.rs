//! Analyses computed from the same forward pass the runtime uses: kernel curves, attention summaries,
//! locally accumulated attention (LAA), gate statistics and perplexity versus context length.
//!
//! **Attention matrices of linear layers.** `Model::trace` records the implied matrix with gates and
//! decay applied, `P[i,s] = Σ_j φq_i[j] φk_s[j] exp(Σ_{s<u≤i} lg_u[j])` (ReGLA's F, GLA's α,
//! RetNet's γ^{i−s}, LRPE's rotation; values, output norms and output gates excluded). `linear-elu`
//! rows are divided by `max(Σ_s P, ε)`: its features are positive, so these are the exact weights
//! (`probabilities`). Every other linear layer (LRPE with `denominator` included, whose rotated
//! scores can be negative) divides each row by `Σ_s |P[i,s]|` keeping signs (`signed-normalized`,
//! drawn with a diverging colormap). Softmax layers offer `logits` (scaled q·k), `biased` (+B) and
//! `probabilities`; T1 Diag ReLU rows are divided by their sum (`relu-normalized`, zero rows stay
//! zero). Matrices are recorded only from position 0 (else `InvalidArgument`).
//!
//! **LAA** is the exact prefix-sum definition (TransNormer §3.2, Fig. 2a), on |A|: for query `i` the
//! window at ratio `r` is the `⌈r·n⌉` nearest visible keys `i, i−1, …` (causal, capped at `i+1`),
//! `l(i, r) = Σ_{i−j<⌈rn⌉} |A_ij| / Σ_j |A_ij|`; the curve is the mean over rows with non-zero mass
//! at `r = 0, 0.01, …, 1` (101 points), AUC by the trapezoid rule (identity attention: 0.995).
//! `laa_uniform(n)` is the uniform causal baseline ("fully diluted"). Per layer: head-averaged curve
//! and AUC, per-head entropy, mean distance, self weight and first-token weight. The paper's
//! pseudocode replica is not implemented.
//!
//! **Perplexity vs length** (`perplexity`): for each length `n` the token stream is cut into
//! non-overlapping windows of `n` tokens from the start (tail dropped, at most `max_windows`, 0 =
//! all); each window runs from a fresh session through prefill; every position but the first is
//! scored (`n − 1` predictions, `log_softmax` in f64); the result is the mean NLL and `e^{NLL}`.
//! `n < 2` or longer than the text → `InvalidArgument`; `n > max_context` → `ContextTooLong`.

use crate::attention::{AttnMatrixKind, LayerAttention, LayerGates, TraceRequest};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::sampling::log_softmax;
use serde::{Deserialize, Serialize};

/// Number of points of an LAA curve (r = 0, 0.01, …, 1).
pub const LAA_POINTS: usize = 101;
/// Saturation thresholds of the gate view (share of F < 0.05 or > 0.95; our
/// thresholds for ReGLA §5.1, Fig. 4, which gives none).
pub const SATURATION_LOW: f32 = 0.05;
pub const SATURATION_HIGH: f32 = 0.95;

/// `B_h(d)` and `exp(B_h(d))` of one head for d = 0..n.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelCurve {
    pub layer: usize,
    pub head: usize,
    pub bias: Vec<f64>,
    pub kernel: Vec<f64>,
}

/// Kernel curves of every head of layer `layer` for d in 0..n (FIRE: evaluated for the query at
/// position n − 1). Layers without a position bias yield zeros.
pub fn kernel_curves(model: &Model, layer: usize, n: usize) -> Result<Vec<KernelCurve>> {
    let attn =
        model.attention(layer).ok_or_else(|| Error::arg("layer", format!("{layer} is out of range")))?;
    if n == 0 || n > model.config().max_context {
        return Err(Error::arg("max_distance", format!("must be in 1..={}", model.config().max_context)));
    }
    (0..model.config().n_heads)
        .map(|h| {
            let bias: Vec<f64> = attn.bias_curve(h, n)?.into_iter().map(f64::from).collect();
            let kernel = bias.iter().map(|b| b.exp()).collect();
            Ok(KernelCurve { layer, head: h, bias, kernel })
        })
        .collect()
}

/// LAA curve and its area (TransNormer §3.2, Fig. 2a; exact prefix-sum definition).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Laa {
    /// LAA(r) at r = k/100.
    pub curve: Vec<f64>,
    /// Trapezoid area under the curve.
    pub auc: f64,
}

/// LAA of one attention matrix `[n, n]` (rows = queries). For query i the window is the ⌈r·n⌉
/// nearest visible keys (i, i−1, …): l(i, r) = Σ_{i−j < ⌈r n⌉} |A_ij| / Σ_j |A_ij|; the curve is the
/// mean over queries with a non-zero row. Signed matrices use |A|. See docs/ARCHITECTURE.md.
pub fn laa(matrix: &[f32], n: usize) -> Laa {
    let mut curve = vec![0.0f64; LAA_POINTS];
    let mut rows = 0usize;
    let mut cum = Vec::with_capacity(n);
    for i in 0..n {
        let row = &matrix[i * n..(i + 1) * n];
        cum.clear();
        let mut acc = 0.0f64;
        for dist in 0..=i {
            acc += row[i - dist].abs() as f64;
            cum.push(acc);
        }
        if acc <= 0.0 {
            continue;
        }
        rows += 1;
        for (k, c) in curve.iter_mut().enumerate() {
            let window = ((k as f64 / (LAA_POINTS - 1) as f64) * n as f64).ceil() as usize;
            if window > 0 {
                *c += cum[window.min(i + 1) - 1] / acc;
            }
        }
    }
    if rows > 0 {
        curve.iter_mut().for_each(|c| *c /= rows as f64);
    }
    let auc = trapezoid(&curve);
    Laa { curve, auc }
}

/// LAA of uniform causal attention over n tokens: the reference "fully diluted" curve.
pub fn laa_uniform(n: usize) -> Laa {
    let mut m = vec![0.0f32; n * n];
    for i in 0..n {
        for j in 0..=i {
            m[i * n + j] = 1.0 / (i + 1) as f32;
        }
    }
    laa(&m, n)
}

fn trapezoid(curve: &[f64]) -> f64 {
    let dx = 1.0 / (curve.len().max(2) - 1) as f64;
    curve.windows(2).map(|w| 0.5 * (w[0] + w[1]) * dx).sum()
}

/// Summary statistics of one head's attention matrix.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeadSummary {
    pub head: usize,
    /// Mean row entropy in nats (of |A| normalised per row); all means are over non-zero rows.
    pub entropy: f64,
    /// Mean attended distance Σ_j |A_ij|·(i−j).
    pub mean_distance: f64,
    /// Mean weight on the diagonal (the token itself).
    pub self_weight: f64,
    /// Mean weight on the first token.
    pub first_token_weight: f64,
    pub laa_auc: f64,
}

/// Per-layer attention summary with the head-averaged LAA curve.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayerSummary {
    pub layer: usize,
    pub variant: String,
    pub kind: AttnMatrixKind,
    pub heads: Vec<HeadSummary>,
    pub laa: Laa,
}

/// Summaries of every layer's attention.
pub fn summarize_attention(model: &Model, layers: &[LayerAttention]) -> Vec<LayerSummary> {
    layers
        .iter()
        .map(|la| {
            let n = la.n;
            let mut mean_curve = vec![0.0f64; LAA_POINTS];
            let heads: Vec<HeadSummary> = la
                .heads
                .iter()
                .enumerate()
                .map(|(h, m)| {
                    let l = laa(m, n);
                    mean_curve.iter_mut().zip(&l.curve).for_each(|(a, b)| *a += b / la.heads.len() as f64);
                    let (mut ent, mut dist, mut selfw, mut first) = (0.0, 0.0, 0.0, 0.0);
                    let mut rows = 0usize;
                    for i in 0..n {
                        let row = &m[i * n..(i + 1) * n];
                        let s: f64 = row.iter().map(|x| x.abs() as f64).sum();
                        if s <= 0.0 {
                            continue;
                        }
                        rows += 1;
                        for (j, x) in row.iter().enumerate().take(i + 1) {
                            let p = x.abs() as f64 / s;
                            if p > 0.0 {
                                ent -= p * p.ln();
                            }
                            dist += p * (i - j) as f64;
                        }
                        selfw += row[i].abs() as f64 / s;
                        first += row[0].abs() as f64 / s;
                    }
                    let nn = rows.max(1) as f64;
                    HeadSummary {
                        head: h,
                        entropy: ent / nn,
                        mean_distance: dist / nn,
                        self_weight: selfw / nn,
                        first_token_weight: first / nn,
                        laa_auc: l.auc,
                    }
                })
                .collect();
            let auc = trapezoid(&mean_curve);
            LayerSummary {
                layer: la.layer,
                variant: model.config().layers[la.layer].variant_id().to_string(),
                kind: la.kind,
                heads,
                laa: Laa { curve: mean_curve, auc },
            }
        })
        .collect()
}

/// Histogram and saturation of one gate quantity.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateStats {
    pub layer: usize,
    pub variant: String,
    /// `f`, `g` or `r`.
    pub quantity: String,
    /// Head index, or `None` for all heads together.
    pub head: Option<usize>,
    /// Counts over `bins` equal bins on [0, 1].
    pub histogram: Vec<u64>,
    pub mean: f64,
    /// Share of values < 0.05 or > 0.95.
    pub saturation: f64,
    pub count: u64,
}

/// Gate statistics (all heads, then per head) for F, and g, r where present.
pub fn gate_stats(gates: &[LayerGates], bins: usize) -> Vec<GateStats> {
    let bins = bins.max(1);
    let mut out = Vec::new();
    for lg in gates {
        let quantities: Vec<(&str, &Vec<f32>)> =
            [("f", Some(&lg.f)), ("g", lg.g.as_ref()), ("r", lg.r.as_ref())]
                .into_iter()
                .filter_map(|(n, v)| v.map(|v| (n, v)))
                .collect();
        for (name, values) in quantities {
            for head in std::iter::once(None).chain((0..lg.n_heads).map(Some)) {
                let mut hist = vec![0u64; bins];
                let (mut sum, mut sat, mut count) = (0.0f64, 0u64, 0u64);
                for (idx, &v) in values.iter().enumerate() {
                    let h = (idx / lg.dim) % lg.n_heads;
                    if head.is_some_and(|hh| hh != h) {
                        continue;
                    }
                    let b = ((v.clamp(0.0, 1.0) * bins as f32) as usize).min(bins - 1);
                    hist[b] += 1;
                    sum += v as f64;
                    count += 1;
                    if !(SATURATION_LOW..=SATURATION_HIGH).contains(&v) {
                        sat += 1;
                    }
                }
                let c = count.max(1) as f64;
                out.push(GateStats {
                    layer: lg.layer,
                    variant: lg.variant.clone(),
                    quantity: name.to_string(),
                    head,
                    histogram: hist,
                    mean: sum / c,
                    saturation: sat as f64 / c,
                    count,
                });
            }
        }
    }
    out
}

/// Perplexity at one context length.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PplPoint {
    pub length: usize,
    pub windows: usize,
    /// Predicted tokens (windows × (length − 1)).
    pub tokens: usize,
    pub nll: f64,
    pub ppl: f64,
}

/// Windows scored at context length `len` on a text of `text_tokens` tokens: non-overlapping from the
/// start (the tail is dropped), at most `max_windows` (0 = all).
pub fn window_count(text_tokens: usize, len: usize, max_windows: usize) -> usize {
    let w = text_tokens / len.max(1);
    if max_windows > 0 {
        w.min(max_windows)
    } else {
        w
    }
}

/// `−ln p(next[r])` of every row of `logits` (`[rows, vocab]`) that has a target in `next`; row `r`
/// predicts `next[r]` (f64 log-softmax; a target outside the vocabulary scores NaN).
pub fn row_nll(logits: &[f32], vocab: usize, next: &[u32]) -> Vec<f64> {
    logits
        .chunks_exact(vocab.max(1))
        .zip(next)
        .map(|(row, &target)| -log_softmax(row).get(target as usize).copied().unwrap_or(f64::NAN))
        .collect()
}

/// `(Σ −ln p(next[r]), count)` over the rows of [`row_nll`].
pub fn score_rows(logits: &[f32], vocab: usize, next: &[u32]) -> (f64, usize) {
    let nll = row_nll(logits, vocab, next);
    (nll.iter().sum(), nll.len())
}

/// Perplexity versus context length. Protocol (docs/ARCHITECTURE.md): the token stream is cut into
/// non-overlapping windows of `length` tokens from the start; each window runs from an empty state and
/// every position but the first is scored; at most `max_windows` windows per length (0 = all). A length
/// longer than the text or than max_context is an error naming it.
pub fn perplexity(
    model: &Model,
    tokens: &[u32],
    lengths: &[usize],
    max_windows: usize,
    progress: impl FnMut(usize, usize),
) -> Result<Vec<PplPoint>> {
    let cfg = model.config();
    perplexity_with(cfg.vocab_size, cfg.max_context, tokens, lengths, max_windows, progress, |window| {
        model.session().prefill_all(window)
    })
}

/// [`perplexity`] with every window's logits (`[length, vocab]`, from an empty state) computed by
/// `window_logits`, so other backends (the GPU) are scored by the same protocol.
pub fn perplexity_with<E: From<Error>>(
    vocab: usize,
    max_context: usize,
    tokens: &[u32],
    lengths: &[usize],
    max_windows: usize,
    mut progress: impl FnMut(usize, usize),
    mut window_logits: impl FnMut(&[u32]) -> std::result::Result<Vec<f32>, E>,
) -> std::result::Result<Vec<PplPoint>, E> {
    let total: usize = lengths.iter().map(|&l| window_count(tokens.len(), l, max_windows)).sum();
    let mut out = Vec::new();
    let mut done = 0;
    for &len in lengths {
        let mut tick = || {
            done += 1;
            progress(done, total);
        };
        let losses =
            window_losses(vocab, max_context, tokens, len, max_windows, &mut tick, &mut window_logits)?;
        let count: usize = losses.iter().map(Vec::len).sum();
        let mean = losses.iter().flatten().sum::<f64>() / count as f64;
        out.push(PplPoint { length: len, windows: losses.len(), tokens: count, nll: mean, ppl: mean.exp() });
    }
    Ok(out)
}

/// The loss (−ln p, nats) of every scored position of every window at context length `len`, by the
/// protocol of [`perplexity`]: `[window][position − 1]`, windows in text order. `tick` is called
/// after each window. A length that is too short, longer than max_context or than the text is an
/// error naming it.
pub fn window_losses<E: From<Error>>(
    vocab: usize,
    max_context: usize,
    tokens: &[u32],
    len: usize,
    max_windows: usize,
    tick: &mut impl FnMut(),
    window_logits: &mut impl FnMut(&[u32]) -> std::result::Result<Vec<f32>, E>,
) -> std::result::Result<Vec<Vec<f64>>, E> {
    if len < 2 {
        return Err(Error::arg("lengths", format!("{len} is too short (need >= 2)")).into());
    }
    if len > max_context {
        return Err(Error::ContextTooLong { requested: len, max: max_context }.into());
    }
    let windows = window_count(tokens.len(), len, max_windows);
    if windows == 0 {
        return Err(Error::arg(
            "lengths",
            format!("{len} is longer than the text ({} tokens)", tokens.len()),
        )
        .into());
    }
    (0..windows)
        .map(|w| {
            let win = &tokens[w * len..(w + 1) * len];
            let losses = row_nll(&window_logits(win)?, vocab, &win[1..]);
            tick();
            Ok(losses)
        })
        .collect()
}

/// Map stride that keeps an `n`-token attention map within `max_side` rows and columns.
pub fn map_stride(n: usize, max_side: usize) -> usize {
    n.div_ceil(max_side.max(1)).max(1)
}

/// Query index of each row of a map downsampled by `stride`: the last query of its block of rows.
pub fn map_rows(n: usize, stride: usize) -> Vec<usize> {
    let s = stride.max(1);
    let w = MapWindow { row0: 0, col0: 0, side: n.div_ceil(s), stride: s };
    (0..w.side).map(|b| w.query(n, b)).collect()
}

/// A square window of an attention map, in tokens: `side` map rows of `stride` queries from query
/// `row0`, and `side` map columns of `stride` keys from key `col0`. Map row b is query
/// min(n − 1, row0 + b·stride + stride − 1), the last query of its block; column c covers keys
/// col0 + [c·stride, (c+1)·stride).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapWindow {
    pub row0: usize,
    pub col0: usize,
    pub side: usize,
    pub stride: usize,
}

impl MapWindow {
    /// The whole map of `n` tokens within `max_side` rows and columns.
    pub fn whole(n: usize, max_side: usize) -> MapWindow {
        let stride = map_stride(n, max_side);
        MapWindow { row0: 0, col0: 0, side: n.div_ceil(stride), stride }
    }

    /// The query of map row `b` in an `n`-token map.
    pub fn query(&self, n: usize, b: usize) -> usize {
        let s = self.stride.max(1);
        (self.row0 + b * s + s - 1).min(n.saturating_sub(1))
    }

    /// Why this window does not fit an `n`-token map of at most `max_side` cells a side, if it
    /// does not.
    pub fn check(&self, n: usize, max_side: usize) -> std::result::Result<(), String> {
        if self.stride == 0 || self.side == 0 || self.side > max_side {
            return Err(format!(
                "a map window needs 1 to {max_side} cells a side and a stride of at least 1 (got {} cells, stride {})",
                self.side, self.stride
            ));
        }
        if self.row0 >= n || self.col0 >= n {
            return Err(format!(
                "the window starts at query {} and key {}, outside the {n} tokens traced",
                self.row0, self.col0
            ));
        }
        Ok(())
    }
}

/// Downsampled view of recorded attention matrices: [`attention_window`] over the whole map.
pub fn downsample_attention(la: &LayerAttention, stride: usize) -> LayerAttention {
    let s = stride.max(1);
    attention_window(la, MapWindow { row0: 0, col0: 0, side: la.n.div_ceil(s), stride: s })
}

/// A window of recorded attention matrices, the reference for the GPU's bounded maps and tiles
/// (shaders/attention_map.wgsl). Cells sum their keys for probability-like kinds (a whole map's
/// rows keep summing to 1) and average them over the bin's causal cells j ≤ i for
/// [`AttnMatrixKind::Scores`]; keys past the map's end count as empty. The whole map at stride 1
/// returns the matrices as recorded.
pub fn attention_window(la: &LayerAttention, w: MapWindow) -> LayerAttention {
    let (n, s, side) = (la.n, w.stride.max(1), w.side);
    let heads = la
        .heads
        .iter()
        .map(|m| {
            let mut out = vec![0.0f32; side * side];
            for b in 0..side {
                let i = w.query(n, b);
                for c in 0..side {
                    let lo = w.col0 + c * s;
                    let hi = (lo + s).min(i + 1);
                    if lo >= hi {
                        continue;
                    }
                    let sum: f32 = m[i * n + lo..i * n + hi].iter().sum();
                    out[b * side + c] = match la.kind {
                        AttnMatrixKind::Scores => sum / (hi - lo) as f32,
                        _ => sum,
                    };
                }
            }
            out
        })
        .collect();
    LayerAttention { layer: la.layer, kind: la.kind, n: side, heads }
}

/// Record attention matrices (bounded by `max_tokens`) and gates for a token sequence.
pub fn trace_for_analysis(model: &Model, tokens: &[u32], max_tokens: usize) -> Result<crate::model::Trace> {
    let n = tokens.len().min(max_tokens);
    if n == 0 {
        return Err(Error::EmptyPrompt);
    }
    model.trace(&tokens[..n], TraceRequest { attention: true, gates: true, ..Default::default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Downsampling keeps probability rows summing to 1 and averages scores over causal cells.
    #[test]
    fn downsampled_maps_keep_row_sums_and_average_scores() {
        let n = 7;
        let mut p = vec![0.0f32; n * n];
        let mut sc = vec![0.0f32; n * n];
        for i in 0..n {
            for j in 0..=i {
                p[i * n + j] = 1.0 / (i + 1) as f32;
                sc[i * n + j] = (i * 10 + j) as f32;
            }
        }
        let probs = LayerAttention { layer: 0, kind: AttnMatrixKind::Probabilities, n, heads: vec![p] };
        let same = downsample_attention(&probs, 1);
        assert_eq!(same.heads, probs.heads);
        let d = downsample_attention(&probs, 3);
        assert_eq!((d.n, map_rows(n, 3)), (3, vec![2, 5, 6]));
        for b in 0..3 {
            let row: f32 = d.heads[0][b * 3..b * 3 + 3].iter().sum();
            assert!((row - 1.0).abs() < 1e-6, "row {b} sums to {row}");
        }
        let scores = LayerAttention { layer: 0, kind: AttnMatrixKind::Scores, n, heads: vec![sc] };
        let d = downsample_attention(&scores, 3);
        // Row 0 is query 2: keys 0..=2 → mean of 20, 21, 22; nothing beyond the diagonal.
        assert_eq!(&d.heads[0][0..3], &[21.0, 0.0, 0.0]);
        // Row 2 is query 6: bin 2 holds key 6 only.
        assert_eq!(d.heads[0][2 * 3 + 2], 66.0);
        assert_eq!(map_stride(8192, 512), 16);
        assert_eq!(map_stride(100, 512), 1);
    }

    /// A stride-1 window is the sub-matrix; a strided window sums its keys from `col0`, takes the
    /// last query of each block from `row0`, and clamps rows past the end to the last query.
    #[test]
    fn map_windows_cut_and_bin_from_their_origin() {
        let n = 10;
        let mut p = vec![0.0f32; n * n];
        for i in 0..n {
            for j in 0..=i {
                p[i * n + j] = (i * 100 + j) as f32;
            }
        }
        let la = LayerAttention { layer: 0, kind: AttnMatrixKind::Probabilities, n, heads: vec![p.clone()] };
        let w = MapWindow { row0: 4, col0: 2, side: 3, stride: 1 };
        let cut = attention_window(&la, w);
        let expect: Vec<f32> = (4..7)
            .flat_map(|i| (2..5).map(move |j| if j <= i { (i * 100 + j) as f32 } else { 0.0 }))
            .collect();
        assert_eq!(cut.heads[0], expect);
        let w = MapWindow { row0: 3, col0: 1, side: 4, stride: 2 };
        let binned = attention_window(&la, w);
        // Rows are queries 4, 6, 8, 9 (10 clamps to the last); column 1 holds keys 3 and 4.
        assert_eq!((0..4).map(|b| w.query(n, b)).collect::<Vec<_>>(), vec![4, 6, 8, 9]);
        assert_eq!(binned.heads[0][1], 403.0 + 404.0);
        assert_eq!(binned.heads[0][2], 0.0, "keys 5, 6 lie past query 4");
        assert_eq!(binned.heads[0][3 * 4 + 3], 907.0 + 908.0);
        assert_eq!(attention_window(&la, MapWindow::whole(n, 5)), downsample_attention(&la, 2));
        assert!(MapWindow { row0: 10, col0: 0, side: 2, stride: 1 }.check(n, 512).is_err());
        assert!(MapWindow { row0: 0, col0: 0, side: 513, stride: 1 }.check(n, 512).is_err());
        assert!(w.check(n, 512).is_ok());
    }

    #[test]
    fn laa_of_identity_attention_is_one_everywhere_but_zero() {
        let n = 16;
        let mut m = vec![0.0f32; n * n];
        (0..n).for_each(|i| m[i * n + i] = 1.0);
        let l = laa(&m, n);
        assert_eq!(l.curve[0], 0.0);
        assert!(l.curve[1..].iter().all(|c| (c - 1.0).abs() < 1e-12));
        assert!((l.auc - (1.0 - 0.005)).abs() < 1e-9);
    }

    #[test]
    fn laa_of_uniform_attention_is_below_identity_and_monotone() {
        let u = laa_uniform(64);
        assert!(u.curve.windows(2).all(|w| w[1] >= w[0] - 1e-12));
        assert!((u.curve[100] - 1.0).abs() < 1e-9);
        assert!(u.auc < 0.9 && u.auc > 0.5);
    }

    #[test]
    fn gate_stats_count_saturation() {
        let g = LayerGates {
            layer: 0,
            variant: "gla".into(),
            n: 2,
            n_heads: 1,
            dim: 2,
            f: vec![0.01, 0.5, 0.99, 0.6],
            g: None,
            r: None,
        };
        let s = gate_stats(&[g], 10);
        assert_eq!(s[0].count, 4);
        assert!((s[0].saturation - 0.5).abs() < 1e-12);
        assert_eq!(s[0].histogram.iter().sum::<u64>(), 4);
    }
}
