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
//!   with an optional value-axis decay `S_t = (e^{lg_t} e^{lgv_t}ᵀ) ⊙ S_{t−1} + φk_t v_tᵀ` (Fast Decay),
//!   built from a feature map per side, an optional position transform, a log-gate source, an
//!   optional denominator and an output post-processing step.

use crate::lrpe::Lrpe;
use crate::ops::Linear;
use std::ops::Deref;

/// A value read from a learned tensor, with the tensor's name. The CPU and the GPU run `value`; the
/// trainer looks `name` up among its parameters so the value stays in the autograd graph. Derefs to
/// the value.
#[derive(Debug, Clone, PartialEq)]
pub struct Learned<T> {
    /// Full tensor name (`layers.{i}.attn.gla.gk_bias`, `pos.t5.bucket_bias`, …).
    pub name: String,
    pub value: T,
}

impl<T> Deref for Learned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

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
    /// Distance-only per-head table `values[h·len + d] = B_h(d)`, built in f64 on the CPU; `learned`
    /// says how the trainer rebuilds it from parameters (`None`: a constant).
    Table {
        len: usize,
        values: Vec<f32>,
        learned: Option<LearnedTable>,
    },
    /// FIRE: an MLP over the normalised log distance, evaluated per (i, j) (see [`crate::bias::fire_u`]).
    Fire {
        c: Learned<f64>,
        l_mult: Learned<f64>,
        init_l: f64,
        w1: Learned<Vec<f32>>,
        b1: Learned<Vec<f32>>,
        w2: Learned<Vec<f32>>,
        b2: Learned<Vec<f32>>,
    },
    /// Contextual positions (Golovneva et al., "Contextual Position Encoding: Learning to Count What's Important", §3): gates
    /// `g_ij = σ(scale·q_i·k_j)`, position `p_ij = min(Σ_{t=j..i} g_it, npos − 1)`, and
    /// `B(i, j) = q_i·e[p_ij]` with `e` interpolated linearly between its integer rows
    /// (`pos_emb: [npos, head_dim]`, shared by the heads). The bias depends on q and k, so it is
    /// computed per query from that query's logits, never tabulated.
    Contextual {
        npos: usize,
        pos_emb: Learned<Vec<f32>>,
    },
}

/// A distance table whose entries come from learned per-head parameters: how the trainer builds it
/// in the graph (the CPU and GPU read the tabulated values). Tensor names are full names.
#[derive(Debug, Clone, PartialEq)]
pub enum LearnedTable {
    /// `−p_h·ln(1 + a_h·d)`, `a, p` clamped to ≥ [`crate::bias::KERPLE_MIN`] (KERPLE §4.2, Eq. 8).
    KerpleLog { a: String, p: String },
    /// `−a_h·d^{p_h}`, `a ≥ 0.01`, `p ∈ [0.01, 2]`, `B(0) = 0` (KERPLE §4.2, Eq. 7).
    KerplePower { a: String, p: String },
    /// `table[bucket(d), h]·scale` with T5's fixed buckets (Raffel et al., "Exploring the Limits of
    /// Transfer Learning", §2.1).
    Buckets { table: String, num_buckets: usize, max_distance: usize, scale: f64 },
    /// `LSE[ln w_K − p·ln(1 + a·d), ln w_G − g_h·d²]` with `g_h = gaussian_scale·m_h` (MEP §4.3,
    /// Eqs. 27–28); a term with weight ≤ 0 is dropped.
    MepParam { a: String, p: String, kerple_weight: f64, gaussian_weight: f64, gaussian_slopes: Vec<f64> },
}

/// A softmax-family layer.
#[derive(Debug, Clone)]
pub struct SoftmaxLowering {
    /// Logit scale, `1/sqrt(head_dim)`.
    pub scale: f32,
    pub bias: Bias,
    /// RoPE inverse frequencies, one per channel pair (0: the pair is not rotated): q and k rotated
    /// by adjacent pairs before the dot product (`rotary::rope_rotate`).
    pub rope: Option<Vec<f64>>,
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
    /// `φ(x) = x·σ(x)` (swish/SiLU; HGRN2's query, Qin et al., "HGRN2: Gated Linear RNNs with State Expansion", §3).
    Swish,
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
    /// RoPE, adjacent pairs, angles `s·inv_freq[k]` (Su et al., "RoFormer", §3.2).
    Rope { inv_freq: Vec<f64> },
    /// LRPE `T_s(x) = Λ(s) (P x)` (Qin et al., "Linearized Relative Positional Encoding", §3.3), with
    /// the names of its learned angles and Householder vector, if any.
    Lrpe { lrpe: Box<Lrpe>, theta: Option<String>, householder: Option<String> },
}

/// Source of the per-channel log-gate `lg ≤ 0` (0: no decay).
#[derive(Debug, Clone)]
pub enum Gate {
    /// No decay.
    None,
    /// A fixed decay per head, `lg = ln γ_h` on every channel (RetNet).
    PerHead { log_gamma: Vec<f32> },
    /// `lg = lnσ(up·(down·x) + bias) / normalizer` (GLA §4.1 low-rank gate, fla's normaliser).
    LowRank { down: Learned<Linear>, up: Learned<Linear>, bias: Learned<Vec<f32>>, normalizer: f64 },
    /// ReGLA's refined gate `F = (1 − r) g² + r (1 − (1 − g)²)`, `g = σ(W_g x + b_g)`,
    /// `r = σ(W_r x + b_r)` (ReGLA §3.3, Eqs. 16–18), in the log domain.
    Refined { wg: Learned<Linear>, bg: Learned<Vec<f32>>, wr: Learned<Linear>, br: Learned<Vec<f32>> },
    /// The key projection is the forget-gate pre-activation `f` and the key is tied to the gate
    /// (HGRN's input/forget coupling; Qin et al., "HGRN2", §3):
    /// `lg = ln(β + (1 − β)·σ(f))` with a per-channel lower bound `β` (`[H·dh]`), and the scan's key is
    /// `1 − e^{lg} = (1 − β)·σ(−f)`. The key's feature map is not used.
    KeyForget { lower_bound: Vec<f32>, learned: Option<LowerBoundRow> },
    /// Fast Decay's two-sided outer-product gate `G_t = σ(W_z x + b_z) σ(W_f x + b_f)ᵀ` (ReGLA §2.1,
    /// Eqs. 9–10; Mao, "Fine-Tuning Pre-trained Transformers into Decaying Fast Weights", 2022):
    /// `lg = lnσ(W_f x + b_f)` on the key axis (`dk` per head) and `lgv = lnσ(W_z x + b_z)` on the
    /// value axis (`head_dim` per head); the scan decays state entry `(j, v)` by `e^{lg_j + lgv_v}`.
    /// Full-rank, no normaliser, no denominator.
    TwoSided { wf: Learned<Linear>, bf: Learned<Vec<f32>>, wz: Learned<Linear>, bz: Learned<Vec<f32>> },
}

impl Gate {
    /// True when the gate also decays along the value axis ([`Gate::TwoSided`]).
    pub fn has_value_side(&self) -> bool {
        matches!(self, Gate::TwoSided { .. })
    }
}

/// Row `row` of `cumsoftmax(tensor)` over its first axis, minus the first row's softmax: HGRN's
/// layer-wise increasing lower bounds (Qin et al., "HGRN", §3.2; fla `HGRN2Model`), how the trainer
/// rebuilds a [`Gate::KeyForget`] lower bound from its `[n_layers, H·dh]` parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct LowerBoundRow {
    pub tensor: String,
    pub row: usize,
}

/// Output normalisation and gating of the raw per-head outputs.
#[derive(Debug, Clone)]
pub enum Post {
    None,
    /// SimpleRMSNorm over the concatenated heads, no gain (TransNormer NormAttention, §4.2, Eq. 14).
    SimpleRmsNorm,
    /// RMSNorm `x·(mean(x²) + eps)^(−1/2)·gain` over groups of `gain.len()` channels: per head when
    /// the gain is `[head_dim]`, over all heads when it is `[H·head_dim]`.
    RmsNorm {
        gain: Learned<Vec<f32>>,
        eps: f32,
    },
    /// [`Post::RmsNorm`], then `⊙ silu(out_gate·x)` (GLA §4.1, RetNet's swish gate).
    RmsNormGate {
        gain: Learned<Vec<f32>>,
        eps: f32,
        out_gate: Learned<Linear>,
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
