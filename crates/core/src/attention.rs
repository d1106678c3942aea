//! The attention variants: the ONE place per variant in the CPU reference.
//!
//! For each catalog id this file says which extra tensors it owns ([`layer_tensor_specs`],
//! [`shared_tensor_specs`]), how it is prepared from config + weights ([`AttnLayer::new`]) and how it
//! runs. Two kernels serve all variants:
//!
//! * **softmax family** (and TransNormer Diag blocks): `logits = scale·q·k + B_h(i, j)`, causal, optionally
//!   restricted to the query's block; softmax (or ReLU for T1 Diag). KV cache.
//! * **linear family**: every variant is written as a gated linear attention
//!   `S_t = diag(exp(lg_t)) S_{t−1} + φk_t v_tᵀ,  o_t = S_tᵀ φq_t` (ReGLA digest §1.9), with per-variant
//!   feature maps φ, log-gates lg ≤ 0, optional denominator and output norm. Prefill uses the chunked
//!   form, decode the recurrence; the parity tests pin the two together.

use crate::bias;
use crate::config::{
    AttentionSpec, LrpeNormalize, LrpeTheta, ModelConfig, TransnormerFlavor, TransnormerRole,
};
use crate::error::{Error, Result};
use crate::gates;
use crate::lrpe::{self, Lrpe};
use crate::ops::{axpy, dot, silu, softmax_inplace, Linear};
use crate::weights::{Init, TensorSpec, Weights};

/// Chunk length of the chunked linear-attention prefill.
pub const LINEAR_CHUNK: usize = 64;
/// eps of the per-head RMSNorm in gla / regla / retnet (kept identical in the trainer).
pub const HEAD_NORM_EPS: f32 = 1e-5;
/// Largest bias table (heads × max_context entries) a config may ask for.
pub const MAX_BIAS_TABLE: usize = 1 << 26;

/// Tensors shared by all layers of a model (KERPLE-style sharing, MEP digest §3.3; T5 table, §3.7).
pub fn shared_tensor_specs(cfg: &ModelConfig) -> Vec<TensorSpec> {
    let h = cfg.n_heads;
    let mut specs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for spec in &cfg.layers {
        if !seen.insert(spec.variant_id()) {
            continue;
        }
        match spec {
            // KERPLE init: p ~ U(0, 2), a ~ U(0, 1) (MEP digest §3.3/3.4); clamps applied at use.
            AttentionSpec::KerpleLog => {
                specs.push(TensorSpec::new("pos.kerple_log.a", &[h], Init::Uniform(0.0, 1.0)));
                specs.push(TensorSpec::new("pos.kerple_log.p", &[h], Init::Uniform(0.0, 2.0)));
            }
            AttentionSpec::KerplePower => {
                specs.push(TensorSpec::new("pos.kerple_power.a", &[h], Init::Uniform(0.0, 1.0)));
                specs.push(TensorSpec::new("pos.kerple_power.p", &[h], Init::Uniform(0.0, 2.0)));
            }
            AttentionSpec::MepParam { .. } => {
                specs.push(TensorSpec::new("pos.mep_param.a", &[h], Init::Uniform(0.0, 1.0)));
                specs.push(TensorSpec::new("pos.mep_param.p", &[h], Init::Uniform(0.0, 2.0)));
            }
            AttentionSpec::T5 { num_buckets, .. } => {
                let std = 1.0 / (cfg.head_dim as f32).sqrt();
                specs.push(TensorSpec::new("pos.t5.bucket_bias", &[*num_buckets, h], Init::Normal(std)));
            }
            _ => {}
        }
    }
    specs
}

/// Tensors owned by layer `i` beyond `wq, wk, wv, wo`.
pub fn layer_tensor_specs(cfg: &ModelConfig, i: usize, spec: &AttentionSpec) -> Vec<TensorSpec> {
    let (d, h, dh) = (cfg.d_model, cfg.n_heads, cfg.head_dim);
    let a = cfg.attn_dim();
    let p = |name: &str| format!("layers.{i}.attn.{name}");
    let std_in = 1.0 / (d as f32).sqrt();
    match spec {
        AttentionSpec::Fire { .. } => {
            let k = bias::FIRE_HIDDEN;
            let lim2 = 1.0 / (k as f32).sqrt();
            vec![
                TensorSpec::new(p("fire.c"), &[1], Init::Const(0.1)),
                TensorSpec::new(p("fire.l_mult"), &[1], Init::Const(1.0)),
                TensorSpec::new(p("fire.w1"), &[k, 1], Init::Uniform(-1.0, 1.0)),
                TensorSpec::new(p("fire.b1"), &[k], Init::Uniform(-1.0, 1.0)),
                TensorSpec::new(p("fire.w2"), &[h, k], Init::Uniform(-lim2, lim2)),
                TensorSpec::new(p("fire.b2"), &[h], Init::Uniform(-lim2, lim2)),
            ]
        }
        AttentionSpec::Lrpe { core, p: pm, theta, seed, .. } => {
            let mut v = Vec::new();
            let n = Lrpe::n_angles(*core, dh);
            if *theta == LrpeTheta::Learned && n > 0 {
                // Learned angles start at the fixed schedule (LRPE digest §3.3).
                let init = Lrpe::new(*core, crate::config::LrpeP::Identity, dh, None, None, *seed)
                    .map(|l| l.angles().iter().map(|a| *a as f32).collect())
                    .unwrap_or_else(|_| vec![0.0; n]);
                v.push(TensorSpec::new(p("lrpe.theta"), &[n], Init::Values(init)));
            }
            if *pm == crate::config::LrpeP::Householder {
                let vec = lrpe::seeded_normal(dh, seed.wrapping_add(0x9E37_79B9 + i as u64));
                v.push(TensorSpec::new(p("lrpe.householder_v"), &[dh], Init::Values(vec)));
            }
            v
        }
        AttentionSpec::Gla { gate_rank, .. } => vec![
            TensorSpec::new(p("gla.gk_down"), &[*gate_rank, d], Init::Normal(std_in)),
            TensorSpec::new(p("gla.gk_up"), &[a, *gate_rank], Init::Normal(1.0 / (*gate_rank as f32).sqrt())),
            TensorSpec::new(p("gla.gk_bias"), &[a], Init::Const(0.0)),
            TensorSpec::new(p("gla.out_gate"), &[a, d], Init::Normal(std_in)),
            TensorSpec::new(p("gla.head_norm"), &[dh], Init::Const(1.0)),
        ],
        AttentionSpec::Regla => vec![
            TensorSpec::new(p("regla.w_g"), &[a, d], Init::Normal(std_in)),
            TensorSpec::new(p("regla.b_g"), &[a], Init::Const(0.0)),
            TensorSpec::new(p("regla.w_r"), &[a, d], Init::Normal(std_in)),
            TensorSpec::new(p("regla.b_r"), &[a], Init::Const(0.0)),
            TensorSpec::new(p("regla.head_norm"), &[dh], Init::Const(1.0)),
        ],
        AttentionSpec::Retnet => vec![
            TensorSpec::new(p("retnet.out_gate"), &[a, d], Init::Normal(std_in)),
            TensorSpec::new(p("retnet.head_norm"), &[dh], Init::Const(1.0)),
        ],
        _ => Vec::new(),
    }
}

/// Where a softmax-family query may look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    /// All keys `j <= i`.
    Causal,
    /// Keys of the query's own block: `i − i mod w <= j <= i` (TransNormer Diag, digest §1.4).
    Block(usize),
}

/// Position bias B_h(i, j) of a softmax-family layer.
#[derive(Debug, Clone)]
enum Bias {
    None,
    /// Per-head table `B_h[d]`, `[n_heads, len]`, built in f64 on the CPU.
    Table {
        len: usize,
        values: Vec<f32>,
    },
    /// FIRE depends on (i, j), so it is evaluated per pair (MEP digest §3.8).
    Fire {
        c: f64,
        l_mult: f64,
        init_l: f64,
        w1: Vec<f32>,
        b1: Vec<f32>,
        w2: Vec<f32>,
        b2: Vec<f32>,
    },
}

#[derive(Debug, Clone)]
struct SoftmaxLayer {
    scale: f32,
    bias: Bias,
    rope_base: Option<f64>,
    window: Window,
    /// T1 Diag: ReLU instead of softmax, then SimpleRMSNorm over all heads.
    relu_with_norm: bool,
}

/// Linear-family variant specifics.
#[derive(Debug, Clone)]
enum LinearKind {
    LinearElu { eps: f32 },
    TransnormerNorm { flavor: TransnormerFlavor },
    Lrpe { lrpe: Box<Lrpe>, normalize: LrpeNormalize },
    Gla { down: Linear, up: Linear, bias: Vec<f32>, normalizer: f64, out_gate: Linear, head_norm: Vec<f32> },
    Regla { wg: Linear, bg: Vec<f32>, wr: Linear, br: Vec<f32>, head_norm: Vec<f32> },
    Retnet { out_gate: Linear, head_norm: Vec<f32>, log_gamma: Vec<f32> },
}

#[derive(Debug, Clone)]
struct LinearLayer {
    kind: LinearKind,
    /// Feature width per head (2·head_dim for the complex LRPE core).
    dk: usize,
}

#[derive(Debug, Clone)]
enum Kernel {
    Softmax(SoftmaxLayer),
    Linear(LinearLayer),
}

/// One prepared attention layer: projections plus the variant's kernel.
#[derive(Debug, Clone)]
pub struct AttnLayer {
    pub spec: AttentionSpec,
    wq: Linear,
    wk: Linear,
    wv: Linear,
    wo: Linear,
    kernel: Kernel,
    n_heads: usize,
    head_dim: usize,
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
#[derive(Debug, Clone, serde::Serialize)]
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

/// Prepared data of one layer's kernel, for other backends (the GPU). Borrowed from the layer, so it
/// is exactly what the CPU kernel runs with (see [`AttnLayer::plan`]).
#[derive(Debug, Clone, Copy)]
pub enum LayerPlan<'a> {
    /// `logits = scale·q·k + B`, causal; `block`: TransNormer Diag window; `relu_with_norm`: T1 Diag.
    Softmax {
        scale: f32,
        bias: BiasPlan<'a>,
        rope_base: Option<f64>,
        block: Option<usize>,
        relu_with_norm: bool,
    },
    /// Gated linear attention with feature width `dk` per head.
    Linear { kind: LinearPlan<'a>, dk: usize },
}

/// Position bias of a softmax layer as the kernel evaluates it.
#[derive(Debug, Clone, Copy)]
pub enum BiasPlan<'a> {
    None,
    /// `values[h·len + d] = B_h(d)`.
    Table {
        len: usize,
        values: &'a [f32],
    },
    /// FIRE parameters (see [`bias::fire_u`], [`bias::fire_mlp`]).
    Fire {
        c: f64,
        l_mult: f64,
        init_l: f64,
        w1: &'a [f32],
        b1: &'a [f32],
        w2: &'a [f32],
        b2: &'a [f32],
    },
}

/// Linear-family specifics (weights are `[out, in]` row-major [`Linear`]s).
#[derive(Debug, Clone, Copy)]
pub enum LinearPlan<'a> {
    LinearElu {
        eps: f32,
    },
    TransnormerNorm {
        flavor: TransnormerFlavor,
    },
    Lrpe {
        lrpe: &'a Lrpe,
        normalize: LrpeNormalize,
    },
    Gla {
        down: &'a Linear,
        up: &'a Linear,
        bias: &'a [f32],
        normalizer: f64,
        out_gate: &'a Linear,
        head_norm: &'a [f32],
    },
    Regla {
        wg: &'a Linear,
        bg: &'a [f32],
        wr: &'a Linear,
        br: &'a [f32],
        head_norm: &'a [f32],
    },
    Retnet {
        out_gate: &'a Linear,
        head_norm: &'a [f32],
        log_gamma: &'a [f32],
    },
}

/// Per-token linear features of a chunk: `[T, H·dk]` for fq/fk/lg, `[T, H·dh]` for v.
struct Features {
    fq: Vec<f32>,
    fk: Vec<f32>,
    lg: Vec<f32>,
    v: Vec<f32>,
    g: Vec<f32>,
    r: Vec<f32>,
}

impl AttnLayer {
    /// Prepare layer `i` from the config and the (validated) weights.
    pub fn new(cfg: &ModelConfig, i: usize, w: &Weights) -> Result<AttnLayer> {
        let spec = cfg.layers[i].clone();
        let (d, h, dh) = (cfg.d_model, cfg.n_heads, cfg.head_dim);
        let a = cfg.attn_dim();
        let lin = |name: &str, out: usize, inp: usize| -> Result<Linear> {
            Ok(Linear::new(w.get(&format!("layers.{i}.attn.{name}"))?.to_vec(), out, inp))
        };
        let vecw =
            |name: &str| -> Result<Vec<f32>> { Ok(w.get(&format!("layers.{i}.attn.{name}"))?.to_vec()) };
        let scale = 1.0 / (dh as f32).sqrt();
        let softmax = |bias: Bias, rope_base: Option<f64>| {
            Kernel::Softmax(SoftmaxLayer {
                scale,
                bias,
                rope_base,
                window: Window::Causal,
                relu_with_norm: false,
            })
        };
        let base_slopes = |s: &Option<Vec<f64>>| s.clone().unwrap_or_else(|| bias::alibi_slopes(h));
        let table = |f: &dyn Fn(usize, f64) -> f64| -> Result<Bias> { build_table(cfg, f) };
        let kernel = match &spec {
            AttentionSpec::Nope | AttentionSpec::Sinusoidal => softmax(Bias::None, None),
            AttentionSpec::Rope { base } => softmax(Bias::None, Some(*base)),
            AttentionSpec::Alibi { slopes } => {
                let m = base_slopes(slopes);
                softmax(table(&|hh, dd| bias::alibi(m[hh], dd))?, None)
            }
            AttentionSpec::Gaussian { slopes } => {
                let m = base_slopes(slopes);
                softmax(table(&|hh, dd| bias::gaussian(m[hh], dd))?, None)
            }
            AttentionSpec::KerpleLog => {
                let (pa, pp) = (w.get("pos.kerple_log.a")?, w.get("pos.kerple_log.p")?);
                softmax(table(&|hh, dd| bias::kerple_log(pa[hh] as f64, pp[hh] as f64, dd))?, None)
            }
            AttentionSpec::KerplePower => {
                let (pa, pp) = (w.get("pos.kerple_power.a")?, w.get("pos.kerple_power.p")?);
                softmax(table(&|hh, dd| bias::kerple_power(pa[hh] as f64, pp[hh] as f64, dd))?, None)
            }
            AttentionSpec::T5 { num_buckets, max_distance } => {
                let tb = w.get("pos.t5.bucket_bias")?;
                let s = (dh as f64).sqrt();
                // B_h(d) = W[bucket(d), h]·sqrt(d_head) (MEP digest §3.7).
                softmax(
                    table(&|hh, dd| {
                        tb[bias::t5_bucket(dd as usize, *num_buckets, *max_distance) * h + hh] as f64 * s
                    })?,
                    None,
                )
            }
            AttentionSpec::Sandwich { dbar } => {
                let db = dbar.unwrap_or(dh - dh % 2).max(2);
                softmax(table(&|hh, dd| bias::sandwich(dd, hh, h, db))?, None)
            }
            AttentionSpec::Fire { init_l } => softmax(
                Bias::Fire {
                    c: vecw("fire.c")?[0] as f64,
                    l_mult: vecw("fire.l_mult")?[0] as f64,
                    init_l: init_l.unwrap_or(cfg.train_context as f64),
                    w1: vecw("fire.w1")?,
                    b1: vecw("fire.b1")?,
                    w2: vecw("fire.w2")?,
                    b2: vecw("fire.b2")?,
                },
                None,
            ),
            AttentionSpec::Mep { kernels, slopes } => {
                let m = base_slopes(slopes);
                softmax(table(&|hh, dd| bias::mep_log_kernel(kernels, m[hh], dd))?, None)
            }
            AttentionSpec::MepParam { kerple_weight, gaussian_weight, gaussian_scale } => {
                let (pa, pp) = (w.get("pos.mep_param.a")?, w.get("pos.mep_param.p")?);
                let m = bias::alibi_slopes(h);
                softmax(
                    table(&|hh, dd| {
                        bias::mep_param(
                            pa[hh] as f64,
                            pp[hh] as f64,
                            gaussian_scale * m[hh],
                            *kerple_weight,
                            *gaussian_weight,
                            dd,
                        )
                    })?,
                    None,
                )
            }
            AttentionSpec::Transnormer { role: TransnormerRole::Diag, flavor, block_size } => {
                Kernel::Softmax(SoftmaxLayer {
                    scale,
                    bias: Bias::None,
                    rope_base: None,
                    window: Window::Block(*block_size),
                    relu_with_norm: *flavor == TransnormerFlavor::T1,
                })
            }
            AttentionSpec::Transnormer { role: TransnormerRole::Norm, flavor, .. } => {
                Kernel::Linear(LinearLayer { kind: LinearKind::TransnormerNorm { flavor: *flavor }, dk: dh })
            }
            AttentionSpec::LinearElu { eps } => {
                Kernel::Linear(LinearLayer { kind: LinearKind::LinearElu { eps: *eps as f32 }, dk: dh })
            }
            AttentionSpec::Lrpe { core, p, theta, normalize, seed } => {
                let learned = *theta == LrpeTheta::Learned && Lrpe::n_angles(*core, dh) > 0;
                let th = if learned { Some(vecw("lrpe.theta")?) } else { None };
                let hv = if *p == crate::config::LrpeP::Householder {
                    Some(vecw("lrpe.householder_v")?)
                } else {
                    None
                };
                let l = Lrpe::new(*core, *p, dh, th.as_deref(), hv.as_deref(), *seed)?;
                let dk = l.out_dim();
                Kernel::Linear(LinearLayer {
                    kind: LinearKind::Lrpe { lrpe: Box::new(l), normalize: *normalize },
                    dk,
                })
            }
            AttentionSpec::Gla { gate_rank, gate_logit_normalizer } => Kernel::Linear(LinearLayer {
                kind: LinearKind::Gla {
                    down: lin("gla.gk_down", *gate_rank, d)?,
                    up: lin("gla.gk_up", a, *gate_rank)?,
                    bias: vecw("gla.gk_bias")?,
                    normalizer: *gate_logit_normalizer,
                    out_gate: lin("gla.out_gate", a, d)?,
                    head_norm: vecw("gla.head_norm")?,
                },
                dk: dh,
            }),
            AttentionSpec::Regla => Kernel::Linear(LinearLayer {
                kind: LinearKind::Regla {
                    wg: lin("regla.w_g", a, d)?,
                    bg: vecw("regla.b_g")?,
                    wr: lin("regla.w_r", a, d)?,
                    br: vecw("regla.b_r")?,
                    head_norm: vecw("regla.head_norm")?,
                },
                dk: dh,
            }),
            AttentionSpec::Retnet => Kernel::Linear(LinearLayer {
                kind: LinearKind::Retnet {
                    out_gate: lin("retnet.out_gate", a, d)?,
                    head_norm: vecw("retnet.head_norm")?,
                    log_gamma: (0..h).map(|hh| gates::retnet_gamma(hh).ln() as f32).collect(),
                },
                dk: dh,
            }),
        };
        Ok(AttnLayer {
            spec,
            wq: lin("wq", a, d)?,
            wk: lin("wk", a, d)?,
            wv: lin("wv", a, d)?,
            wo: lin("wo", d, a)?,
            kernel,
            n_heads: h,
            head_dim: dh,
        })
    }

    /// The prepared kernel data of this layer (for other backends).
    pub fn plan(&self) -> LayerPlan<'_> {
        match &self.kernel {
            Kernel::Softmax(sl) => LayerPlan::Softmax {
                scale: sl.scale,
                bias: match &sl.bias {
                    Bias::None => BiasPlan::None,
                    Bias::Table { len, values } => BiasPlan::Table { len: *len, values },
                    Bias::Fire { c, l_mult, init_l, w1, b1, w2, b2 } => {
                        BiasPlan::Fire { c: *c, l_mult: *l_mult, init_l: *init_l, w1, b1, w2, b2 }
                    }
                },
                rope_base: sl.rope_base,
                block: match sl.window {
                    Window::Causal => None,
                    Window::Block(w) => Some(w),
                },
                relu_with_norm: sl.relu_with_norm,
            },
            Kernel::Linear(ll) => LayerPlan::Linear {
                dk: ll.dk,
                kind: match &ll.kind {
                    LinearKind::LinearElu { eps } => LinearPlan::LinearElu { eps: *eps },
                    LinearKind::TransnormerNorm { flavor } => LinearPlan::TransnormerNorm { flavor: *flavor },
                    LinearKind::Lrpe { lrpe, normalize } => LinearPlan::Lrpe { lrpe, normalize: *normalize },
                    LinearKind::Gla { down, up, bias, normalizer, out_gate, head_norm } => {
                        LinearPlan::Gla { down, up, bias, normalizer: *normalizer, out_gate, head_norm }
                    }
                    LinearKind::Regla { wg, bg, wr, br, head_norm } => {
                        LinearPlan::Regla { wg, bg, wr, br, head_norm }
                    }
                    LinearKind::Retnet { out_gate, head_norm, log_gamma } => {
                        LinearPlan::Retnet { out_gate, head_norm, log_gamma }
                    }
                },
            },
        }
    }

    /// The projections `wq, wk, wv, wo`.
    pub fn projections(&self) -> [&Linear; 4] {
        [&self.wq, &self.wk, &self.wv, &self.wo]
    }

    /// Denominator eps of a linear layer (None: no denominator), as the CPU kernel uses it.
    pub fn denominator_eps(&self) -> Option<f32> {
        match &self.kernel {
            Kernel::Linear(ll) => Self::has_denominator(ll),
            Kernel::Softmax(_) => None,
        }
    }

    /// Empty decode state for this layer.
    pub fn new_state(&self) -> LayerState {
        match &self.kernel {
            Kernel::Softmax(_) => LayerState::Kv { first: 0, k: Vec::new(), v: Vec::new() },
            Kernel::Linear(l) => LayerState::Linear {
                s: vec![0.0; self.n_heads * l.dk * self.head_dim],
                z: vec![0.0; self.n_heads * l.dk],
                key_max: vec![None; self.n_heads],
            },
        }
    }

    /// Per-head bias table `B_h[d]` for `d < len` if this layer has a distance-only bias.
    pub fn bias_table(&self, head: usize) -> Option<&[f32]> {
        match &self.kernel {
            Kernel::Softmax(SoftmaxLayer { bias: Bias::Table { len, values }, .. }) => {
                values.get(head * len..(head + 1) * len)
            }
            _ => None,
        }
    }

    /// `B_h(d)` for `d < n` as the kernel sees it (FIRE: for the query at position `n − 1`); zeros for
    /// layers without a position bias. `n` must not exceed max_context.
    pub fn bias_curve(&self, head: usize, n: usize) -> Result<Vec<f32>> {
        if head >= self.n_heads || n == 0 {
            return Err(Error::arg("head", format!("head {head} / length {n} out of range")));
        }
        match &self.kernel {
            Kernel::Softmax(sl) => {
                if let Bias::Table { len, .. } = &sl.bias {
                    if n > *len {
                        return Err(Error::ContextTooLong { requested: n, max: *len });
                    }
                }
                // Row of the query at n − 1 over keys 0..n, reversed into distance order.
                let (mut rows, mut buf) = (Vec::new(), vec![0.0f64; self.n_heads]);
                Self::fill_bias(sl, self.n_heads, n - 1, 0, n, &mut rows, &mut buf);
                Ok(rows[head * n..(head + 1) * n].iter().rev().copied().collect())
            }
            Kernel::Linear(_) => Ok(vec![0.0; n]),
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
        let q = self.wq.apply_rows(x, t);
        let k = self.wk.apply_rows(x, t);
        let v = self.wv.apply_rows(x, t);
        let mut trace = LayerTrace::default();
        let heads_out = match &self.kernel {
            Kernel::Softmax(sl) => {
                self.softmax_forward(sl, q, k, v, t, pos0, state, req, layer, &mut trace)?
            }
            Kernel::Linear(ll) => {
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
        match &self.kernel {
            Kernel::Softmax(_) => Ok(self.prefill(x, 1, pos, state, TraceRequest::default(), 0)?.0),
            Kernel::Linear(ll) => {
                let q = self.wq.apply_rows(x, 1);
                let k = self.wk.apply_rows(x, 1);
                let v = self.wv.apply_rows(x, 1);
                let f = self.linear_features(ll, x, &q, &k, v, 1, pos, state)?;
                let raw = self.linear_recurrent(ll, &f, state)?;
                Ok(self.wo.apply_rows(&self.linear_post(ll, x, raw, 1), 1))
            }
        }
    }

    // ---------------------------------------------------------------- softmax family

    /// Bias rows of every head for query `i` over keys `j0..j0+n`: `out[h·n + jj] = B_h(i, j0 + jj)`.
    /// FIRE's MLP runs once per key for all heads.
    fn fill_bias(
        sl: &SoftmaxLayer,
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
            Bias::None => {}
            Bias::Table { len, values } => {
                for h in 0..heads {
                    for jj in 0..n {
                        out[h * n + jj] = values[h * len + (i - j0 - jj)];
                    }
                }
            }
            Bias::Fire { c, l_mult, init_l, w1, b1, w2, b2 } => {
                for jj in 0..n {
                    let u = bias::fire_u(i, j0 + jj, *c, *l_mult, *init_l);
                    bias::fire_mlp(u, w1, b1, w2, b2, fire_buf);
                    for h in 0..heads {
                        out[h * n + jj] = fire_buf[h] as f32;
                    }
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn softmax_forward(
        &self,
        sl: &SoftmaxLayer,
        mut q: Vec<f32>,
        mut k: Vec<f32>,
        v: Vec<f32>,
        t: usize,
        pos0: usize,
        state: &mut LayerState,
        req: TraceRequest,
        layer: usize,
        trace: &mut LayerTrace,
    ) -> Result<Vec<f32>> {
        let (h, dh) = (self.n_heads, self.head_dim);
        let a = h * dh;
        if let Some(base) = sl.rope_base {
            for r in 0..t {
                for hh in 0..h {
                    let s = r * a + hh * dh;
                    lrpe::rope_rotate(&mut q[s..s + dh], pos0 + r, base);
                    lrpe::rope_rotate(&mut k[s..s + dh], pos0 + r, base);
                }
            }
        }
        let LayerState::Kv { first, k: kc, v: vc } = state else {
            return Err(Error::arg("state", "softmax layer was given a linear-attention state"));
        };
        if req.attention && pos0 != 0 {
            return Err(Error::arg("trace", "attention matrices are recorded from position 0 only"));
        }
        let record = req.attention;
        let mut mats: Vec<Vec<f32>> = if record { vec![vec![0.0; t * t]; h] } else { Vec::new() };
        let mut out = vec![0.0f32; t * a];
        let mut fire_buf = vec![0.0f64; h];
        let mut row = Vec::new();
        let mut brow = Vec::new();
        for r in 0..t {
            let i = pos0 + r;
            // Append this token's key/value; a Diag layer drops the previous block first.
            if let Window::Block(w) = sl.window {
                if i.is_multiple_of(w) {
                    kc.clear();
                    vc.clear();
                    *first = i;
                }
            }
            kc.extend_from_slice(&k[r * a..(r + 1) * a]);
            vc.extend_from_slice(&v[r * a..(r + 1) * a]);
            let n_keys = kc.len() / a;
            let j0 = *first;
            Self::fill_bias(sl, h, i, j0, n_keys, &mut brow, &mut fire_buf);
            for hh in 0..h {
                let qh = &q[r * a + hh * dh..r * a + (hh + 1) * dh];
                row.clear();
                for jj in 0..n_keys {
                    let kh = &kc[jj * a + hh * dh..jj * a + (hh + 1) * dh];
                    let logit = sl.scale * dot(qh, kh);
                    let biased = logit + brow[hh * n_keys + jj];
                    row.push(biased);
                    if record {
                        match req.stage {
                            AttnStage::Logits => mats[hh][r * t + j0 + jj] = logit,
                            AttnStage::Biased => mats[hh][r * t + j0 + jj] = biased,
                            AttnStage::Probabilities => {}
                        }
                    }
                }
                if sl.relu_with_norm {
                    // T1 DiagAttention: P = ReLU(logits), no row normalisation (digest §1.4).
                    for val in row.iter_mut() {
                        *val = val.max(0.0);
                    }
                } else {
                    softmax_inplace(&mut row);
                }
                if record && req.stage == AttnStage::Probabilities {
                    let m = &mut mats[hh];
                    let sum: f32 = row.iter().sum();
                    let norm = if sl.relu_with_norm && sum > 0.0 { 1.0 / sum } else { 1.0 };
                    for (jj, val) in row.iter().enumerate() {
                        m[r * t + (j0 + jj)] = val * norm;
                    }
                }
                let oh = &mut out[r * a + hh * dh..r * a + (hh + 1) * dh];
                for (jj, p) in row.iter().enumerate() {
                    if *p != 0.0 {
                        axpy(*p, &vc[jj * a + hh * dh..jj * a + (hh + 1) * dh], oh);
                    }
                }
            }
            if sl.relu_with_norm {
                gates::simple_rms_norm(&mut out[r * a..(r + 1) * a]);
            }
        }
        if record {
            let kind = match (req.stage, sl.relu_with_norm) {
                (AttnStage::Probabilities, false) => AttnMatrixKind::Probabilities,
                (AttnStage::Probabilities, true) => AttnMatrixKind::ReluNormalized,
                _ => AttnMatrixKind::Scores,
            };
            trace.attention = Some(LayerAttention { layer, kind, n: t, heads: mats });
        }
        Ok(out)
    }

    // ---------------------------------------------------------------- linear family

    /// Feature maps, log-gates and values of `t` tokens (state: ReGLA running key max).
    #[allow(clippy::too_many_arguments)]
    fn linear_features(
        &self,
        ll: &LinearLayer,
        x: &[f32],
        q: &[f32],
        k: &[f32],
        v: Vec<f32>,
        t: usize,
        pos0: usize,
        state: &mut LayerState,
    ) -> Result<Features> {
        let (h, dh, dk) = (self.n_heads, self.head_dim, ll.dk);
        let a = h * dh;
        let LayerState::Linear { key_max, .. } = state else {
            return Err(Error::arg("state", "linear layer was given a KV-cache state"));
        };
        let mut f = Features {
            fq: vec![0.0; t * h * dk],
            fk: vec![0.0; t * h * dk],
            lg: vec![0.0; t * h * dk],
            v,
            g: Vec::new(),
            r: Vec::new(),
        };
        // Gate pre-activations for the whole chunk.
        let gate_pre = match &ll.kind {
            LinearKind::Gla { down, up, .. } => Some(up.apply_rows(&down.apply_rows(x, t), t)),
            LinearKind::Regla { wg, .. } => Some(wg.apply_rows(x, t)),
            _ => None,
        };
        let gate_r = match &ll.kind {
            LinearKind::Regla { wr, .. } => Some(wr.apply_rows(x, t)),
            _ => None,
        };
        if matches!(ll.kind, LinearKind::Regla { .. }) {
            f.g = vec![0.0; t * a];
            f.r = vec![0.0; t * a];
        }
        let mut buf = vec![0.0f32; dh];
        for r in 0..t {
            let pos = pos0 + r;
            for hh in 0..h {
                let src = r * a + hh * dh;
                let dst = (r * h + hh) * dk;
                let (qh, kh) = (&q[src..src + dh], &k[src..src + dh]);
                let fq = &mut f.fq[dst..dst + dk];
                let fk = &mut f.fk[dst..dst + dk];
                let lg = &mut f.lg[dst..dst + dk];
                match &ll.kind {
                    // φ = 1 + elu (LRPE digest §1 / Katharopoulos), no decay.
                    LinearKind::LinearElu { .. } => {
                        for j in 0..dh {
                            fq[j] = gates::elu_plus_one(qh[j]);
                            fk[j] = gates::elu_plus_one(kh[j]);
                        }
                    }
                    // T1: φ = elu; T2: φ = 1 + elu (TransNormer digest §1.3).
                    LinearKind::TransnormerNorm { flavor } => {
                        let phi =
                            if *flavor == TransnormerFlavor::T1 { gates::elu } else { gates::elu_plus_one };
                        for j in 0..dh {
                            fq[j] = phi(qh[j]);
                            fk[j] = phi(kh[j]);
                        }
                    }
                    // φ = 1 + elu, then T_s(x) = Λ(s)(P x) at the absolute position (LRPE digest §3.4, §4).
                    LinearKind::Lrpe { lrpe, .. } => {
                        for j in 0..dh {
                            buf[j] = gates::elu_plus_one(qh[j]);
                        }
                        lrpe.apply(pos, &buf, fq);
                        for j in 0..dh {
                            buf[j] = gates::elu_plus_one(kh[j]);
                        }
                        lrpe.apply(pos, &buf, fk);
                    }
                    // Identity features, q scaled by dh^-1/2, α = σ(z)^(1/normalizer) (reference-implementations §7).
                    LinearKind::Gla { bias, normalizer, .. } => {
                        let pre = gate_pre.as_deref().unwrap_or(&[]);
                        let s = 1.0 / (dh as f32).sqrt();
                        for j in 0..dh {
                            fq[j] = qh[j] * s;
                            fk[j] = kh[j];
                            let z = pre[src + j] + bias[hh * dh + j];
                            lg[j] = gates::gla_log_gate(z as f64, *normalizer) as f32;
                        }
                    }
                    // ReGLA (digest §1.8, §6): φq = exp(q − max q)·c(d); φk = exp(k − M_t) with the running
                    // max M_t, whose exact rescale exp(M_{t−1} − M_t) is folded into the log-gate.
                    LinearKind::Regla { bg, br, .. } => {
                        let pre_g = gate_pre.as_deref().unwrap_or(&[]);
                        let pre_r = gate_r.as_deref().unwrap_or(&[]);
                        fq.copy_from_slice(qh);
                        gates::exp_max_inplace(fq);
                        let c = gates::regla_scale(dh) as f32;
                        fq.iter_mut().for_each(|x| *x *= c);
                        let kmax = kh.iter().copied().fold(f32::MIN, f32::max);
                        let prev = key_max[hh];
                        let m_new = prev.map_or(kmax, |p| p.max(kmax));
                        let shift = prev.map_or(0.0, |p| p - m_new);
                        key_max[hh] = Some(m_new);
                        for j in 0..dh {
                            fk[j] = (kh[j] - m_new).exp();
                            let gate = gates::regla_gate(
                                (pre_g[src + j] + bg[hh * dh + j]) as f64,
                                (pre_r[src + j] + br[hh * dh + j]) as f64,
                            );
                            lg[j] = gate.log_f as f32 + shift;
                            f.g[src + j] = gate.g as f32;
                            f.r[src + j] = gate.r as f32;
                        }
                    }
                    // RetNet: rotary q/k, fixed decay γ_h (regla digest §2.2).
                    LinearKind::Retnet { log_gamma, .. } => {
                        let s = 1.0 / (dh as f32).sqrt();
                        fq.copy_from_slice(qh);
                        fk.copy_from_slice(kh);
                        lrpe::rope_rotate(fq, pos, 10000.0);
                        lrpe::rope_rotate(fk, pos, 10000.0);
                        fq.iter_mut().for_each(|x| *x *= s);
                        lg.iter_mut().for_each(|x| *x = log_gamma[hh]);
                    }
                }
            }
        }
        Ok(f)
    }

    fn has_denominator(ll: &LinearLayer) -> Option<f32> {
        match &ll.kind {
            LinearKind::LinearElu { eps } => Some(*eps),
            LinearKind::Lrpe { normalize: LrpeNormalize::Denominator, .. } => Some(1e-6),
            _ => None,
        }
    }

    /// Chunked prefill (ReGLA digest §1.9): inter-chunk from the carried state, intra-chunk pairwise
    /// with exponents `b_i − b_s <= 0` computed directly. Returns per-head outputs `[T, H·dh]`.
    fn linear_chunked(
        &self,
        ll: &LinearLayer,
        f: &Features,
        t: usize,
        state: &mut LayerState,
    ) -> Result<Vec<f32>> {
        let (h, dh, dk) = (self.n_heads, self.head_dim, ll.dk);
        let LayerState::Linear { s, z, .. } = state else {
            return Err(Error::arg("state", "linear layer was given a KV-cache state"));
        };
        let den_eps = Self::has_denominator(ll);
        let mut out = vec![0.0f32; t * h * dh];
        let mut b = vec![0.0f32; LINEAR_CHUNK * dk];
        let mut c0 = 0;
        while c0 < t {
            let c1 = (c0 + LINEAR_CHUNK).min(t);
            let n = c1 - c0;
            for hh in 0..h {
                let at = |r: usize| (r * h + hh) * dk;
                // b_i = Σ_{u=c0..i} lg_u (inclusive, chunk-local).
                for i in 0..n {
                    for j in 0..dk {
                        let prev = if i == 0 { 0.0 } else { b[(i - 1) * dk + j] };
                        b[i * dk + j] = prev + f.lg[at(c0 + i) + j];
                    }
                }
                let sh = &mut s[hh * dk * dh..(hh + 1) * dk * dh];
                let zh = &mut z[hh * dk..(hh + 1) * dk];
                let mut qd = vec![0.0f32; dk];
                for i in 0..n {
                    let fq = &f.fq[at(c0 + i)..at(c0 + i) + dk];
                    let oh = &mut out[((c0 + i) * h + hh) * dh..((c0 + i) * h + hh + 1) * dh];
                    // Inter-chunk: (φq ⊙ e^{b_i}) · S_start.
                    for j in 0..dk {
                        qd[j] = fq[j] * b[i * dk + j].exp();
                    }
                    let mut den = dot(&qd, zh);
                    for j in 0..dk {
                        if qd[j] != 0.0 {
                            axpy(qd[j], &sh[j * dh..(j + 1) * dh], oh);
                        }
                    }
                    // Intra-chunk: Σ_{s<=i} (Σ_j φq_i φk_s e^{b_i − b_s}) v_s.
                    for si in 0..=i {
                        let fk = &f.fk[at(c0 + si)..at(c0 + si) + dk];
                        let mut p = 0.0f32;
                        for j in 0..dk {
                            p += fq[j] * fk[j] * (b[i * dk + j] - b[si * dk + j]).exp();
                        }
                        den += p;
                        let vs = &f.v[(c0 + si) * h * dh + hh * dh..(c0 + si) * h * dh + (hh + 1) * dh];
                        axpy(p, vs, oh);
                    }
                    if let Some(eps) = den_eps {
                        let inv = 1.0 / den.max(eps);
                        oh.iter_mut().for_each(|x| *x *= inv);
                    }
                }
                // Carry: S ← e^{b_L} S + Σ_s (φk_s ⊙ e^{b_L − b_s}) v_sᵀ.
                let last = n - 1;
                for j in 0..dk {
                    let decay = b[last * dk + j].exp();
                    let row = &mut sh[j * dh..(j + 1) * dh];
                    row.iter_mut().for_each(|x| *x *= decay);
                    zh[j] *= decay;
                    for si in 0..n {
                        let w = f.fk[at(c0 + si) + j] * (b[last * dk + j] - b[si * dk + j]).exp();
                        if w != 0.0 {
                            let vs = &f.v[(c0 + si) * h * dh + hh * dh..(c0 + si) * h * dh + (hh + 1) * dh];
                            axpy(w, vs, row);
                            zh[j] += w;
                        }
                    }
                }
            }
            c0 = c1;
        }
        Ok(out)
    }

    /// Recurrent step (ReGLA digest §6): `S ← diag(e^{lg}) S + φk vᵀ`, `o = Sᵀ φq`.
    fn linear_recurrent(&self, ll: &LinearLayer, f: &Features, state: &mut LayerState) -> Result<Vec<f32>> {
        let (h, dh, dk) = (self.n_heads, self.head_dim, ll.dk);
        let LayerState::Linear { s, z, .. } = state else {
            return Err(Error::arg("state", "linear layer was given a KV-cache state"));
        };
        let den_eps = Self::has_denominator(ll);
        let mut out = vec![0.0f32; h * dh];
        for hh in 0..h {
            let sh = &mut s[hh * dk * dh..(hh + 1) * dk * dh];
            let zh = &mut z[hh * dk..(hh + 1) * dk];
            let fq = &f.fq[hh * dk..(hh + 1) * dk];
            let fk = &f.fk[hh * dk..(hh + 1) * dk];
            let lg = &f.lg[hh * dk..(hh + 1) * dk];
            let vh = &f.v[hh * dh..(hh + 1) * dh];
            let oh = &mut out[hh * dh..(hh + 1) * dh];
            let mut den = 0.0f32;
            for j in 0..dk {
                let decay = lg[j].exp();
                let row = &mut sh[j * dh..(j + 1) * dh];
                for (sv, vv) in row.iter_mut().zip(vh) {
                    *sv = decay * *sv + fk[j] * vv;
                }
                zh[j] = decay * zh[j] + fk[j];
                den += fq[j] * zh[j];
                if fq[j] != 0.0 {
                    axpy(fq[j], row, oh);
                }
            }
            if let Some(eps) = den_eps {
                let inv = 1.0 / den.max(eps);
                oh.iter_mut().for_each(|x| *x *= inv);
            }
        }
        Ok(out)
    }

    /// Output normalisation and gating of the raw per-head outputs `[T, H·dh]`.
    fn linear_post(&self, ll: &LinearLayer, x: &[f32], mut o: Vec<f32>, t: usize) -> Vec<f32> {
        let (h, dh) = (self.n_heads, self.head_dim);
        let a = h * dh;
        match &ll.kind {
            LinearKind::LinearElu { .. } | LinearKind::Lrpe { normalize: LrpeNormalize::Denominator, .. } => {
            }
            // SimpleRMSNorm over the concatenated heads (TransNormer digest §1.3).
            LinearKind::TransnormerNorm { .. }
            | LinearKind::Lrpe { normalize: LrpeNormalize::Rmsnorm, .. } => {
                o.chunks_exact_mut(a).for_each(gates::simple_rms_norm);
            }
            LinearKind::Regla { head_norm, .. } => {
                o.chunks_exact_mut(dh).for_each(|c| gates::rms_norm(c, head_norm, HEAD_NORM_EPS));
            }
            LinearKind::Gla { out_gate, head_norm, .. } | LinearKind::Retnet { out_gate, head_norm, .. } => {
                o.chunks_exact_mut(dh).for_each(|c| gates::rms_norm(c, head_norm, HEAD_NORM_EPS));
                let g = out_gate.apply_rows(x, t);
                for (ov, gv) in o.iter_mut().zip(&g) {
                    *ov *= silu(*gv);
                }
            }
        }
        o
    }

    /// Implied attention matrix of a linear layer (design.md: gates/decay applied; exact weights for
    /// denominator variants, otherwise rows divided by Σ|row| with signs kept).
    fn linear_matrix(
        &self,
        ll: &LinearLayer,
        f: &Features,
        t: usize,
        pos0: usize,
        layer: usize,
    ) -> Result<LayerAttention> {
        if pos0 != 0 {
            return Err(Error::arg("trace", "attention matrices are recorded from position 0 only"));
        }
        let (h, dk) = (self.n_heads, ll.dk);
        // Only 1+elu features keep every score positive, so only there are the normalised rows the
        // layer's exact weights; LRPE rotations can make scores (and the denominator) negative.
        let den = match ll.kind {
            LinearKind::LinearElu { eps } => Some(eps),
            _ => None,
        };
        let mut heads = Vec::with_capacity(h);
        let mut acc = vec![0.0f32; dk];
        for hh in 0..h {
            let at = |r: usize| (r * h + hh) * dk;
            let mut m = vec![0.0f32; t * t];
            for i in 0..t {
                let fq = &f.fq[at(i)..at(i) + dk];
                // acc = A_i − A_s accumulated backwards from s = i.
                acc.iter_mut().for_each(|x| *x = 0.0);
                let row = &mut m[i * t..(i + 1) * t];
                for si in (0..=i).rev() {
                    if si < i {
                        acc.iter_mut().zip(&f.lg[at(si + 1)..at(si + 1) + dk]).for_each(|(a, l)| *a += l);
                    }
                    let fk = &f.fk[at(si)..at(si) + dk];
                    let mut p = 0.0f32;
                    for j in 0..dk {
                        p += fq[j] * fk[j] * acc[j].exp();
                    }
                    row[si] = p;
                }
                let norm = match den {
                    Some(eps) => row.iter().sum::<f32>().max(eps),
                    None => row.iter().map(|x| x.abs()).sum::<f32>(),
                };
                if norm > 0.0 {
                    row.iter_mut().for_each(|x| *x /= norm);
                }
            }
            heads.push(m);
        }
        let kind =
            if den.is_some() { AttnMatrixKind::Probabilities } else { AttnMatrixKind::SignedNormalized };
        Ok(LayerAttention { layer, kind, n: t, heads })
    }

    fn gate_trace(&self, ll: &LinearLayer, f: &Features, t: usize, layer: usize) -> Option<LayerGates> {
        let (h, dh) = (self.n_heads, self.head_dim);
        let (fv, g, r) = match &ll.kind {
            LinearKind::Gla { .. } | LinearKind::Retnet { .. } => {
                (f.lg.iter().map(|x| x.exp()).collect(), None, None)
            }
            // F itself, without the running-max rescale folded into lg.
            LinearKind::Regla { .. } => {
                let fv: Vec<f32> =
                    f.g.iter()
                        .zip(&f.r)
                        .map(|(g, r)| (1.0 - r) * g * g + r * (1.0 - (1.0 - g) * (1.0 - g)))
                        .collect();
                (fv, Some(f.g.clone()), Some(f.r.clone()))
            }
            _ => return None,
        };
        Some(LayerGates {
            layer,
            variant: self.spec.variant_id().to_string(),
            n: t,
            n_heads: h,
            dim: dh,
            f: fv,
            g,
            r,
        })
    }
}

/// Build a `[H, max_context]` table of B_h(d) in f64, stored as f32 (design.md: tables on the CPU).
fn build_table(cfg: &ModelConfig, f: &dyn Fn(usize, f64) -> f64) -> Result<Bias> {
    let (h, len) = (cfg.n_heads, cfg.max_context);
    if h.saturating_mul(len) > MAX_BIAS_TABLE {
        return Err(Error::field(
            "max_context",
            format!("n_heads × max_context exceeds {MAX_BIAS_TABLE} bias entries"),
        ));
    }
    let mut values = Vec::with_capacity(h * len);
    for hh in 0..h {
        for d in 0..len {
            let b = f(hh, d as f64);
            // Never let ±inf/NaN reach a kernel (design.md); clamp to the finite mask value.
            values.push(if b.is_finite() { (b as f32).max(bias::MASKED) } else { bias::MASKED });
        }
    }
    Ok(Bias::Table { len, values })
}
