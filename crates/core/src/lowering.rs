//! The lowered form of an attention layer: the small vocabulary of shared kernels every variant is
//! written in, and the one description every backend dispatches on.
//!
//! A variant module (`variants/<id>.rs`) turns its config parameters and weights into a
//! [`Lowering`]; the CPU reference (`attention`), the GPU backend and the trainer run that, not the
//! variant. Two kernels serve the whole catalog:
//!
//! * [`SoftmaxLowering`]: `logits = scale·q·k + B_h(i, j)`, causal or restricted to the query's
//!   block, softmax (or ReLU + SimpleRMSNorm for TransNormer T1 Diag blocks). KV cache.
//! * [`LinearLowering`]: the gated linear scan `S_t = diag(exp(lg_t)) S_{t−1} + φk_t v_tᵀ`,
//!   `o_t = S_tᵀ φq_t` (Yang et al., "Gated Linear Attention Transformers", §2, Eq. 3; ReGLA §3.1),
//!   built from a feature map per side, an optional position transform, a log-gate source, an
//!   optional denominator and an output post-processing step.

use crate::lrpe::Lrpe;
use crate::ops::Linear;

/// What the shared kernels run for one layer.
#[derive(Debug, Clone)]
pub enum Lowering {
    Softmax(SoftmaxLowering),
    Linear(LinearLowering),
}

/// Where a softmax-family query may look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// All keys `j <= i`.
    Causal,
    /// Keys of the query's own block: `i − i mod w <= j <= i` (TransNormer DiagAttention, §4.3).
    Block(usize),
}

/// Position bias `B_h(i, j)` added to the scaled logits.
#[derive(Debug, Clone)]
pub enum Bias {
    None,
    /// Distance-only per-head table `values[h·len + d] = B_h(d)`, built in f64 on the CPU.
    Table {
        len: usize,
        values: Vec<f32>,
    },
    /// FIRE: an MLP over the normalised log distance, evaluated per (i, j) (see [`crate::bias::fire_u`]).
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

/// A softmax-family layer.
#[derive(Debug, Clone)]
pub struct SoftmaxLowering {
    /// Logit scale, `1/sqrt(head_dim)`.
    pub scale: f32,
    pub bias: Bias,
    /// RoPE base: q and k rotated by adjacent pairs before the dot product.
    pub rope_base: Option<f64>,
    pub window: Window,
    /// TransNormer T1 Diag: ReLU instead of softmax, then SimpleRMSNorm over all heads.
    pub relu_with_norm: bool,
}

/// Elementwise feature map applied to one head's q or k.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FeatureMap {
    /// `φ(x) = x`.
    Identity,
    /// `φ(x) = 1 + elu(x)` (Katharopoulos et al., "Transformers are RNNs", §3.2, Eq. 7).
    EluPlusOne,
    /// `φ(x) = elu(x)` (TransNormer T1, §3.1).
    Elu,
    /// `φ(x) = exp(x − max_j x_j)` over the head (ReGLA §3.2, Eq. 11).
    ExpMax,
    /// `φ(k_t) = exp(k_t − M_t)` with the running maximum `M_t = max_{s≤t} max_j k_s[j]` kept in the
    /// decode state; the exact state rescale `exp(M_{t−1} − M_t)` is folded into the log-gate (the
    /// causal stand-in for ReGLA's global max, §3.2).
    ExpRunningMax,
}

/// A feature map, then a constant factor: `φ(x) = scale · map(x)` (after the position transform).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feature {
    pub map: FeatureMap,
    pub scale: f32,
}

impl Feature {
    /// `map` with factor 1.
    pub fn plain(map: FeatureMap) -> Feature {
        Feature { map, scale: 1.0 }
    }
}

/// A relative-position transform applied to both mapped features at their absolute position.
#[derive(Debug, Clone)]
pub enum Rotation {
    /// RoPE, adjacent pairs, angles `s·base^(−2k/d)` (Su et al., "RoFormer", §3.2).
    Rope { base: f64 },
    /// LRPE `T_s(x) = Λ(s) (P x)` (Qin et al., "Linearized Relative Positional Encoding", §3.3).
    Lrpe(Box<Lrpe>),
}

/// Source of the per-channel log-gate `lg ≤ 0` (0: no decay).
#[derive(Debug, Clone)]
pub enum Gate {
    /// No decay.
    None,
    /// A fixed decay per head, `lg = ln γ_h` on every channel (RetNet).
    PerHead { log_gamma: Vec<f32> },
    /// `lg = lnσ(up·(down·x) + bias) / normalizer` (GLA §4.1 low-rank gate, fla's normaliser).
    LowRank { down: Linear, up: Linear, bias: Vec<f32>, normalizer: f64 },
    /// ReGLA's refined gate `F = (1 − r) g² + r (1 − (1 − g)²)`, `g = σ(W_g x + b_g)`,
    /// `r = σ(W_r x + b_r)` (ReGLA §3.3, Eqs. 16–18), in the log domain.
    Refined { wg: Linear, bg: Vec<f32>, wr: Linear, br: Vec<f32> },
}

/// Output normalisation and gating of the raw per-head outputs.
#[derive(Debug, Clone)]
pub enum Post {
    None,
    /// SimpleRMSNorm over the concatenated heads, no gain (TransNormer NormAttention, §4.2, Eq. 14).
    SimpleRmsNorm,
    /// Per-head RMSNorm with gain `gain` (`[head_dim]`).
    HeadNorm {
        gain: Vec<f32>,
    },
    /// Per-head RMSNorm, then `⊙ silu(out_gate·x)` (GLA §4.1, RetNet's swish gate).
    HeadNormGate {
        gain: Vec<f32>,
        out_gate: Linear,
    },
}

/// A linear-family layer.
#[derive(Debug, Clone)]
pub struct LinearLowering {
    /// Feature width per head (2·head_dim for LRPE's complex core).
    pub dk: usize,
    pub q: Feature,
    pub k: Feature,
    pub rotation: Option<Rotation>,
    pub gate: Gate,
    /// `o = (φq·S) / max(φq·z, eps)` with `z` the running sum of φk (Katharopoulos §3.2, Eq. 5).
    pub denominator: Option<f32>,
    pub post: Post,
}

impl LinearLowering {
    /// A lowering with no rotation, no gate, no denominator and no post step.
    pub fn plain(dk: usize, q: Feature, k: Feature) -> LinearLowering {
        LinearLowering { dk, q, k, rotation: None, gate: Gate::None, denominator: None, post: Post::None }
    }

    /// True when every score `φq·φk` is positive, so rows normalised by their sum are the exact
    /// attention weights of a denominator layer (1 + elu without a rotation).
    pub fn scores_are_positive(&self) -> bool {
        self.rotation.is_none()
            && self.q.map == FeatureMap::EluPlusOne
            && self.k.map == FeatureMap::EluPlusOne
    }
}
