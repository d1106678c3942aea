//! One attention layer of the CPU reference: the projections around the two shared kernels.
//!
//! A layer is prepared from its variant's [`Lowering`] (see [`crate::variants`]); this module only
//! runs lowered forms, never a variant by name:
//!
//! * `softmax`: `logits = scale·q·k + B_h(i, j)`, causal or block-restricted; KV cache.
//! * `linear`: the gated linear scan, chunked for prefill (exponents `b_i − b_s ≤ 0` only) and
//!   recurrent for decode; the parity tests pin the two together.
//! * `trace`: the introspection the lab views read (attention matrices, gate values).

mod linear;
mod softmax;
mod trace;

use crate::config::{AttentionSpec, ModelConfig};
use crate::error::{Error, Result};
use crate::lowering::{Bias, Lowering};
use crate::ops::{repeat_heads, Linear};
use crate::variants::LowerCtx;
use crate::weights::Weights;

pub use crate::variants::MAX_BIAS_TABLE;
pub use softmax::add_contextual_bias;

/// Chunk length of the chunked linear-attention prefill.
pub const LINEAR_CHUNK: usize = 64;
/// eps of the per-head RMSNorm in gla / regla / retnet (kept identical in the trainer).
pub const HEAD_NORM_EPS: f32 = 1e-5;

/// One prepared attention layer: projections plus the lowered kernel.
#[derive(Debug, Clone)]
pub struct AttnLayer {
    pub spec: AttentionSpec,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    lowering: Lowering,
    n_heads: usize,
    /// Width of one value head.
    head_dim: usize,
    /// Width of one query/key head (`qk_head_dim`; head_dim unless a gla layer says otherwise).
    key_dim: usize,
    /// Query heads per key/value head (grouped-query attention; 1: multi-head).
    kv_group: usize,
}

/// Per-layer decode state: KV cache (softmax family) or recurrent state (linear family).
#[derive(Debug, Clone)]
pub enum LayerState {
    /// Rotated keys and values, `[n, H·dh]` each, for positions `first..first+n`.
    Kv { first: usize, k: Vec<f32>, v: Vec<f32> },
    /// `s`: `[H, dk, dh]`, `z`: `[H, dk]` (denominator variants), running key max per head (ReGLA).
    Linear { s: Vec<f32>, z: Vec<f32>, key_max: Vec<Option<f32>> },
}

impl LayerState {
    /// Bytes held by this state (KV grows with context, linear state does not).
    pub fn bytes(&self) -> usize {
        match self {
            LayerState::Kv { k, v, .. } => 4 * (k.len() + v.len()),
            LayerState::Linear { s, z, key_max } => 4 * (s.len() + z.len() + key_max.len()),
        }
    }
}

/// Which stage of a softmax layer's scores the trace records (the page's stage toggle).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttnStage {
    /// `scale·q·k` before the position bias.
    Logits,
    /// `scale·q·k + B`.
    Biased,
    /// Softmax probabilities (linear family: implied matrix, see [`AttnMatrixKind`]).
    #[default]
    Probabilities,
}

/// What the numbers of a recorded attention matrix mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttnMatrixKind {
    /// Softmax probabilities, or the exact weights of a denominator-normalised linear layer; rows sum to 1.
    Probabilities,
    /// Pre-softmax scores (logits stage).
    Scores,
    /// Implied linear-attention matrix (gates/decay applied), each row divided by Σ|row|, signs kept.
    SignedNormalized,
    /// T1 Diag ReLU weights, each row divided by its sum (zero rows stay zero).
    ReluNormalized,
}

/// Attention matrices of one layer: `heads[h]` is `[n, n]` row-major, zeros above the diagonal and
/// outside a Diag block.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LayerAttention {
    pub layer: usize,
    pub kind: AttnMatrixKind,
    pub n: usize,
    pub heads: Vec<Vec<f32>>,
}

/// Gate values of one gated layer for every token: `[n, H, dk]` row-major.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LayerGates {
    pub layer: usize,
    pub variant: String,
    pub n: usize,
    pub n_heads: usize,
    pub dim: usize,
    /// Effective forget gate F = exp(log-gate) (GLA α, ReGLA F, RetNet γ).
    pub f: Vec<f32>,
    /// ReGLA g and r (absent for other variants).
    pub g: Option<Vec<f32>>,
    pub r: Option<Vec<f32>>,
}

/// What a prefill should record.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceRequest {
    pub attention: bool,
    pub stage: AttnStage,
    pub gates: bool,
}

/// Recorded introspection of one layer.
#[derive(Debug, Clone, Default)]
pub struct LayerTrace {
    pub attention: Option<LayerAttention>,
    pub gates: Option<LayerGates>,
}

impl AttnLayer {
    /// Prepare layer `i` from the config and the (validated) weights.
    pub fn new(cfg: &ModelConfig, i: usize, w: &Weights) -> Result<AttnLayer> {
        let spec = cfg.layers[i].clone();
        let (d, a, kv, (qd, kd)) = (cfg.d_model, cfg.attn_dim(), cfg.kv_dim(), cfg.qk_dims());
        let ctx = LowerCtx { cfg, layer: i, weights: w };
        let lowering = spec.variant().lower(&ctx)?;
        let proj = |w: &str, b: &str, out: usize, inp: usize, bias: bool| -> Result<Linear> {
            let l = ctx.linear(w, out, inp)?;
            Ok(if bias { l.with_bias(ctx.tensor(b)?) } else { l })
        };
        let qkv = cfg.biases.qkv;
        Ok(AttnLayer {
            spec,
            wq: proj("wq", "bq", qd, d, qkv)?,
            wk: proj("wk", "bk", kd, d, qkv)?,
            wv: proj("wv", "bv", kv, d, qkv)?,
            wo: proj("wo", "bo", d, a, cfg.biases.attn_out)?,
            lowering,
            n_heads: cfg.n_heads,
            head_dim: cfg.head_dim,
            key_dim: cfg.key_head_dim(),
            kv_group: cfg.n_heads / cfg.kv_heads(),
        })
    }

    /// The lowered form this layer runs: what every other backend uploads.
    pub fn lowering(&self) -> &Lowering {
        &self.lowering
    }

    /// The projections `wq, wk, wv, wo`; with grouped-query attention `wk` and `wv` have
    /// `n_kv_heads · qk_head_dim` and `n_kv_heads · head_dim` rows (see [`AttnLayer::kv_group`]).
    pub fn projections(&self) -> [&Linear; 4] {
        [&self.wq, &self.wk, &self.wv, &self.wo]
    }

    /// Query heads per key/value head (1 without grouped-query attention).
    pub fn kv_group(&self) -> usize {
        self.kv_group
    }

    /// `q, k, v` of `t` rows, with each key/value head repeated for its group of query heads, so
    /// that grouped-query attention runs as multi-head attention (Ainslie et al., "GQA", §2).
    fn qkv(&self, x: &[f32], t: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let kv = |w: &Linear, width| repeat_heads(w.apply_rows(x, t), self.kv_group, width);
        (self.wq.apply_rows(x, t), kv(&self.wk, self.key_dim), kv(&self.wv, self.head_dim))
    }

    /// Denominator eps of a linear layer (None: no denominator), as the CPU kernel uses it.
    pub fn denominator_eps(&self) -> Option<f32> {
        match &self.lowering {
            Lowering::Linear(l) => l.denominator,
            Lowering::Softmax(_) => None,
        }
    }

    /// Empty decode state for this layer.
    pub fn new_state(&self) -> LayerState {
        match &self.lowering {
            Lowering::Softmax(_) => LayerState::Kv { first: 0, k: Vec::new(), v: Vec::new() },
            Lowering::Linear(l) => LayerState::Linear {
                s: vec![0.0; self.n_heads * l.dk * self.head_dim],
                z: vec![0.0; self.n_heads * l.dk],
                key_max: vec![None; self.n_heads],
            },
        }
    }

    /// Per-head bias table `B_h[d]` for `d < len` if this layer has a distance-only bias.
    pub fn bias_table(&self, head: usize) -> Option<&[f32]> {
        match &self.lowering {
            Lowering::Softmax(sl) => match &sl.bias {
                Bias::Table { len, values, .. } => values.get(head * len..(head + 1) * len),
                _ => None,
            },
            Lowering::Linear(_) => None,
        }
    }

    /// `B_h(d)` for `d < n` as the kernel sees it (FIRE: for the query at position `n − 1`); zeros for
    /// layers without a position bias. `n` must not exceed max_context.
    pub fn bias_curve(&self, head: usize, n: usize) -> Result<Vec<f32>> {
        if head >= self.n_heads || n == 0 {
            return Err(Error::arg("head", format!("head {head} / length {n} out of range")));
        }
        match &self.lowering {
            Lowering::Softmax(sl) => {
                match &sl.bias {
                    Bias::Table { len, .. } if n > *len => {
                        return Err(Error::ContextTooLong { requested: n, max: *len })
                    }
                    Bias::Contextual { .. } => {
                        return Err(Error::arg(
                            "bias",
                            format!(
                                "`{}` has a contextual bias that depends on q and k, so it has no distance \
                                 curve; its biased logits are in the attention trace",
                                self.spec.variant_id()
                            ),
                        ))
                    }
                    _ => {}
                }
                // Row of the query at n − 1 over keys 0..n, reversed into distance order.
                let (mut rows, mut buf) = (Vec::new(), vec![0.0f64; self.n_heads]);
                softmax::fill_bias(sl, self.n_heads, n - 1, 0, n, &mut rows, &mut buf);
                Ok(rows[head * n..(head + 1) * n].iter().rev().copied().collect())
            }
            Lowering::Linear(_) => Ok(vec![0.0; n]),
        }
    }

    /// Run `x` (`[T, d_model]`, already normed) at absolute positions `pos0..pos0+T`, updating `state`.
    /// Uses the parallel/chunked form; returns `[T, d_model]`.
    pub fn prefill(
        &self,
        x: &[f32],
        t: usize,
        pos0: usize,
        state: &mut LayerState,
        req: TraceRequest,
        layer: usize,
    ) -> Result<(Vec<f32>, LayerTrace)> {
        let (q, k, v) = self.qkv(x, t);
        let mut trace = LayerTrace::default();
        let heads_out = match &self.lowering {
            Lowering::Softmax(sl) => {
                let rows = softmax::Rows { q, k, v, t, pos0 };
                let out = self.softmax_forward(sl, rows, state, req.attention.then_some(req.stage))?;
                if let Some((kind, heads)) = out.matrices {
                    trace.attention = Some(LayerAttention { layer, kind, n: t, heads });
                }
                out.heads
            }
            Lowering::Linear(ll) => {
                let f = self.linear_features(ll, x, &q, &k, v, t, pos0, state)?;
                if req.gates {
                    trace.gates = self.gate_trace(ll, &f, t, layer);
                }
                if req.attention {
                    trace.attention = Some(self.linear_matrix(ll, &f, t, pos0, layer)?);
                }
                let raw = self.linear_chunked(ll, &f, t, state)?;
                self.linear_post(ll, x, raw, t)
            }
        };
        Ok((self.wo.apply_rows(&heads_out, t), trace))
    }

    /// One decode step for one token at absolute position `pos` using the recurrent form.
    pub fn step(&self, x: &[f32], pos: usize, state: &mut LayerState) -> Result<Vec<f32>> {
        match &self.lowering {
            Lowering::Softmax(_) => Ok(self.prefill(x, 1, pos, state, TraceRequest::default(), 0)?.0),
            Lowering::Linear(ll) => {
                let (q, k, v) = self.qkv(x, 1);
                let f = self.linear_features(ll, x, &q, &k, v, 1, pos, state)?;
                let raw = self.linear_recurrent(ll, &f, state)?;
                Ok(self.wo.apply_rows(&self.linear_post(ll, x, raw, 1), 1))
            }
        }
    }
}
