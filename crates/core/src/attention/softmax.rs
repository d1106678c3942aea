//! The softmax kernel: `logits = scale·q·k + B_h(i, j)`, causal or restricted to the query's block
//! (TransNormer DiagAttention), softmax — or ReLU followed by SimpleRMSNorm for T1 Diag blocks
//! ("The Devil in Linear Transformer", §3.2). Keys and values go to the KV cache.

use super::{AttnLayer, AttnMatrixKind, AttnStage, LayerState};
use crate::bias;
use crate::error::{Error, Result};
use crate::kernels::{dot_rows_block, weighted_rows_block};
use crate::lowering::{Bias, SoftmaxLowering, Window};
use crate::ops::{dot, simple_rms_norm, softmax_inplace};
use crate::rotary::rope_rotate;

/// Query rows of a prefill that share each key and value row read from the cache
/// ([`dot_rows_block`], [`weighted_rows_block`]; results equal those of one row at a time).
const QUERY_BLOCK: usize = 4;

/// Projected rows of a chunk: `q, k, v` are `[T, H·dh]` at positions `pos0..pos0+T`.
pub(super) struct Rows {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub t: usize,
    pub pos0: usize,
}

/// Per-head outputs `[T, H·dh]`, and the recorded `[T, T]` matrices per head when asked for.
pub(super) struct SoftmaxOut {
    pub heads: Vec<f32>,
    pub matrices: Option<(AttnMatrixKind, Vec<Vec<f32>>)>,
}

/// CoPE's bias for one query and head (Golovneva et al., "Contextual Position Encoding", §3), added to `row`, the query's scaled logits over its keys in order: gates `σ(logit)`,
/// positions as suffix sums from the query back, clamped to `npos − 1`, and `q·e[p]` interpolated
/// between the integer rows of `pos_emb` (`[npos, dh]`). `int_logits` is `npos` scratch.
pub fn add_contextual_bias(
    q: &[f32],
    row: &mut [f32],
    npos: usize,
    pos_emb: &[f32],
    int_logits: &mut Vec<f32>,
) {
    let dh = q.len();
    int_logits.clear();
    int_logits.extend(pos_emb.chunks_exact(dh).take(npos).map(|e| dot(q, e)));
    let cap = (npos - 1) as f32;
    let mut pos = 0.0f32;
    for logit in row.iter_mut().rev() {
        pos += 1.0 / (1.0 + (-*logit).exp());
        let p = pos.min(cap);
        let lo = p.floor();
        let w = p - lo;
        let (f, c) = (lo as usize, (p.ceil() as usize).min(npos - 1));
        *logit += int_logits[c] * w + int_logits[f] * (1.0 - w);
    }
}

/// One query row's attention weights from its logits `q·k` over its own keys: scaled, plus the bias
/// row `bias` (and CoPE's, from the query `qh`), then softmax — or T1's ReLU. `rec` receives the
/// stage asked for (probabilities of T1 normalised by their sum, for display).
fn row_weights(
    sl: &SoftmaxLowering,
    row: &mut [f32],
    bias: &[f32],
    qh: &[f32],
    int_logits: &mut Vec<f32>,
    mut rec: Option<(AttnStage, &mut [f32])>,
) {
    let mut keep = |at: AttnStage, row: &[f32]| match &mut rec {
        Some((stage, m)) if *stage == at => m.copy_from_slice(row),
        _ => {}
    };
    row.iter_mut().for_each(|logit| *logit *= sl.scale);
    keep(AttnStage::Logits, row);
    row.iter_mut().zip(bias).for_each(|(l, b)| *l += b);
    if let Bias::Contextual { npos, pos_emb } = &sl.bias {
        add_contextual_bias(qh, row, *npos, pos_emb, int_logits);
    }
    keep(AttnStage::Biased, row);
    if sl.relu_with_norm {
        // T1 DiagAttention: P = ReLU(logits), no row normalisation.
        row.iter_mut().for_each(|val| *val = val.max(0.0));
    } else {
        softmax_inplace(row);
    }
    if let Some((AttnStage::Probabilities, m)) = rec {
        let sum: f32 = row.iter().sum();
        let norm = if sl.relu_with_norm && sum > 0.0 { 1.0 / sum } else { 1.0 };
        m.iter_mut().zip(row.iter()).for_each(|(o, val)| *o = val * norm);
    }
}

/// Bias rows of every head for query `i` over keys `j0..j0+n`: `out[h·n + jj] = B_h(i, j0 + jj)`.
/// FIRE's MLP runs once per key for all heads.
pub(super) fn fill_bias(
    sl: &SoftmaxLowering,
    heads: usize,
    i: usize,
    j0: usize,
    n: usize,
    out: &mut Vec<f32>,
    fire_buf: &mut [f64],
) {
    out.clear();
    out.resize(heads * n, 0.0);
    match &sl.bias {
        Bias::None | Bias::Contextual { .. } => {}
        Bias::Table { len, values, .. } => {
            // B_h[i − j] for j = j0 .. j0 + n: the head's table read backwards from distance i − j0
            // (n = i − j0 + 1 keys; a reversed slice, which the compiler vectorises).
            let d0 = i - j0;
            for h in 0..heads {
                let table = &values[h * len + d0 + 1 - n..=h * len + d0];
                out[h * n..(h + 1) * n].iter_mut().zip(table.iter().rev()).for_each(|(o, b)| *o = *b);
            }
        }
        Bias::Fire { c, l_mult, init_l, w1, b1, w2, b2 } => {
            for jj in 0..n {
                let u = bias::fire_u(i, j0 + jj, **c, **l_mult, *init_l);
                bias::fire_mlp(u, w1, b1, w2, b2, fire_buf);
                for h in 0..heads {
                    out[h * n + jj] = fire_buf[h] as f32;
                }
            }
        }
    }
}

impl AttnLayer {
    /// Softmax attention of a chunk over the cache; `record` asks for that stage's matrices.
    pub(super) fn softmax_forward(
        &self,
        sl: &SoftmaxLowering,
        rows: Rows,
        state: &mut LayerState,
        record: Option<AttnStage>,
    ) -> Result<SoftmaxOut> {
        let (h, dh) = (self.n_heads, self.head_dim);
        let a = h * dh;
        let Rows { mut q, mut k, v, t, pos0 } = rows;
        if let Some(freqs) = &sl.rope {
            for x in [&mut q, &mut k] {
                x.chunks_exact_mut(dh)
                    .enumerate()
                    .for_each(|(row, xh)| rope_rotate(xh, pos0 + row / h, freqs));
            }
        }
        let LayerState::Kv { first, k: kc, v: vc } = state else {
            return Err(Error::arg("state", "softmax layer was given a linear-attention state"));
        };
        if record.is_some() && pos0 != 0 {
            return Err(Error::arg("trace", "attention matrices are recorded from position 0 only"));
        }
        let mut mats: Vec<Vec<f32>> = if record.is_some() { vec![vec![0.0; t * t]; h] } else { Vec::new() };
        let mut out = vec![0.0f32; t * a];
        let mut fire_buf = vec![0.0f64; h];
        let (mut logits, mut brows, mut int_logits) = (Vec::new(), vec![Vec::new(); QUERY_BLOCK], Vec::new());
        let starts_block = |i: usize| matches!(sl.window, Window::Block(w) if i.is_multiple_of(w));
        let mut r0 = 0;
        while r0 < t {
            // Up to QUERY_BLOCK query rows that see the same keys but for the ones they append: a
            // Diag block may start only at the first of them.
            let rows = (1..QUERY_BLOCK.min(t - r0))
                .find(|&b| starts_block(pos0 + r0 + b))
                .unwrap_or(QUERY_BLOCK.min(t - r0));
            for r in r0..r0 + rows {
                // Append this token's key/value; a Diag layer drops the previous block first.
                if starts_block(pos0 + r) {
                    kc.clear();
                    vc.clear();
                    *first = pos0 + r;
                }
                kc.extend_from_slice(&k[r * a..(r + 1) * a]);
                vc.extend_from_slice(&v[r * a..(r + 1) * a]);
            }
            // Row b of the block (query i = pos0 + r0 + b) sees keys j0 ..= i: the first n_b.
            let (n, j0) = (kc.len() / a, *first);
            let n_b = |b: usize| n - (rows - 1 - b);
            for (b, brow) in brows.iter_mut().enumerate().take(rows) {
                fill_bias(sl, h, pos0 + r0 + b, j0, n_b(b), brow, &mut fire_buf);
            }
            for hh in 0..h {
                // q·k of the block's queries with every cached key of this head (row jj of the cache,
                // this head's slice); a row's keys past its own query are left out below.
                logits.resize(rows * n, 0.0);
                dot_rows_block(&q[r0 * a + hh * dh..], a, dh, &kc[hh * dh..], a, n, &mut logits);
                for b in 0..rows {
                    let (r, nb) = (r0 + b, n_b(b));
                    let (row, later) = logits[b * n..(b + 1) * n].split_at_mut(nb);
                    later.fill(0.0);
                    let qh = &q[r * a + hh * dh..r * a + (hh + 1) * dh];
                    let rec = record.map(|at| (at, &mut mats[hh][r * t + j0..r * t + j0 + nb]));
                    row_weights(sl, row, &brows[b][hh * nb..(hh + 1) * nb], qh, &mut int_logits, rec);
                }
                // o += Σ_jj p_jj·v_jj over the cached values of this head, zero weights adding
                // nothing (a row's later keys have weight 0).
                weighted_rows_block(&logits, n, &vc[hh * dh..], a, &mut out[r0 * a + hh * dh..], a, dh);
            }
            if sl.relu_with_norm {
                out[r0 * a..(r0 + rows) * a].chunks_exact_mut(a).for_each(simple_rms_norm);
            }
            r0 += rows;
        }
        let matrices = record.map(|stage| (matrix_kind(stage, sl.relu_with_norm), mats));
        Ok(SoftmaxOut { heads: out, matrices })
    }
}

/// What a recorded matrix of `stage` holds: probabilities (T1's ReLU weights normalised for
/// display) or scores.
fn matrix_kind(stage: AttnStage, relu_with_norm: bool) -> AttnMatrixKind {
    match (stage, relu_with_norm) {
        (AttnStage::Probabilities, false) => AttnMatrixKind::Probabilities,
        (AttnStage::Probabilities, true) => AttnMatrixKind::ReluNormalized,
        _ => AttnMatrixKind::Scores,
    }
}
