//! `config.json`: the model definition shared by the trainer, the CPU reference and the GPU backend.
//!
//! The schema is documented field by field in docs/model-format.md. Parsing is strict (unknown fields
//! are rejected) and [`ModelConfig::validate`] checks every cross-field constraint, naming the field
//! at fault in the error.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Format version written by this crate; loading rejects other versions.
pub const FORMAT_VERSION: u32 = 1;

/// Every attention variant id of the catalog (design.md), as used in config, CLI and UI.
pub const VARIANT_IDS: &[&str] = &[
    "nope",
    "sinusoidal",
    "rope",
    "alibi",
    "kerple-log",
    "kerple-power",
    "t5",
    "sandwich",
    "fire",
    "gaussian",
    "mep",
    "mep-param",
    "linear-elu",
    "transnormer",
    "lrpe",
    "gla",
    "regla",
    "retnet",
];

/// Whole-model configuration (`config.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Must equal [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Human-readable model id, e.g. `alibi-1m`.
    #[serde(default)]
    pub name: String,
    /// One-line description shown by pickers.
    #[serde(default)]
    pub description: String,
    pub vocab_size: usize,
    pub d_model: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub head_dim: usize,
    pub ffn: FfnConfig,
    pub norm: NormConfig,
    /// Output projection shares the token embedding matrix.
    pub tie_embeddings: bool,
    /// Sequence length the model was trained at (marks plots; FIRE's default threshold).
    pub train_context: usize,
    /// Longest context the runtime accepts; longer inputs are an error.
    pub max_context: usize,
    /// Absolute position embedding added to the token embeddings.
    #[serde(default)]
    pub absolute_position: AbsolutePosition,
    /// One attention spec per layer (hybrids mix families freely).
    pub layers: Vec<AttentionSpec>,
}

/// Feed-forward block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FfnConfig {
    pub kind: FfnKind,
    pub hidden: usize,
}

/// Feed-forward kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FfnKind {
    /// `w_down · (silu(w_gate·x) ⊙ (w_up·x))` (TransNormer's GLU with swish).
    Swiglu,
    /// `w_down · gelu(w_up·x)` (tanh approximation).
    Gelu,
}

/// Residual-stream normalization (pre-norm).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormConfig {
    pub kind: NormKind,
    pub eps: f64,
}

/// Norm kind of the residual stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NormKind {
    /// `x / sqrt(mean(x²) + eps) ⊙ weight`.
    Rmsnorm,
    /// `(x − mean) / sqrt(var + eps) ⊙ weight + bias`.
    Layernorm,
}

/// Absolute position embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AbsolutePosition {
    #[default]
    None,
    /// Fixed sinusoidal table (Vaswani et al.), f64 on the CPU.
    Sinusoidal,
}

/// A kernel of a MEP kernel mix (MEP digest §3.6, §3.9, §3.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelKind {
    /// `K = exp(−s·m·d)` (ALiBi).
    Exp,
    /// `K = exp(−s·m·d²)`.
    Gaussian,
    /// `K = (1 + s·m·d)^(−p)`, `p` from the term (default 1).
    KerpleLog,
    /// `K = exp(−s·m·d^p)`, `p` from the term (default 1, clamped to [0.01, 2]).
    KerplePower,
}

/// One term `weight · K(d; scale·m_h)` of a kernel mix; `m_h` is the head's ALiBi slope.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelTerm {
    pub kernel: KernelKind,
    /// Multiplies the head's base slope.
    #[serde(default = "one")]
    pub scale: f64,
    /// Mixture weight (> 0 to contribute; 0 removes the term).
    pub weight: f64,
    /// Exponent for kerple kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
}

fn one() -> f64 {
    1.0
}

impl KernelTerm {
    /// The paper's parameter-free MEP: exp(m) + exp(m/2) + gaussian(m), weights 0.33 (MEP digest §3.9).
    pub fn mep_default() -> Vec<KernelTerm> {
        vec![
            KernelTerm { kernel: KernelKind::Exp, scale: 1.0, weight: 0.33, p: None },
            KernelTerm { kernel: KernelKind::Exp, scale: 0.5, weight: 0.33, p: None },
            KernelTerm { kernel: KernelKind::Gaussian, scale: 1.0, weight: 0.33, p: None },
        ]
    }
}

/// TransNormer flavour (TransNormer digest §1.3–1.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransnormerFlavor {
    /// Norm: φ = elu; Diag: ReLU attention + SimpleRMSNorm.
    T1,
    /// Norm: φ = 1 + elu; Diag: block softmax, no post-norm.
    T2,
}

/// Which TransNormer block a layer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransnormerRole {
    /// DiagAttention: exact attention inside non-overlapping causal blocks.
    Diag,
    /// NormAttention: linear attention without denominator, SimpleRMSNorm on the output.
    Norm,
}

/// LRPE positional core Λ(s) (LRPE digest §3.1, §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LrpeCore {
    /// Adjacent-pair rotations by s·θ_k (Type 2, "orthogonal").
    Rotation,
    /// Rotation on the first half (rounded up to even), identity on the rest.
    Mixed,
    /// A fixed random permutation applied s times (Type 3).
    Permutation,
    /// Complex diagonal exp(i s α_k), realised as [x⊙cos, x⊙sin] (Type 1, width 2·head_dim).
    Complex,
}

/// LRPE fixed unitary P applied before the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LrpeP {
    Identity,
    /// `I − 2 v̂ v̂ᵀ`, v̂ stored as tensor `layers.{i}.attn.lrpe.householder_v`.
    Householder,
    /// Gather `y[2k] = x[k]`, `y[2k+1] = x[ceil(d/2)+k]`.
    OddEven,
}

/// How LRPE angles are obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LrpeTheta {
    /// Tensor `layers.{i}.attn.lrpe.theta`.
    Learned,
    /// θ_k = 10000^(−2k/d), not stored.
    Fixed,
}

/// Output normalization of the lrpe layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LrpeNormalize {
    /// SimpleRMSNorm over d_model, no denominator (TransNormer NormAttention style; stable).
    Rmsnorm,
    /// The reference's `o = qS / max(q·z, eps)` denominator (LRPE digest §4, hazard noted there).
    Denominator,
}

/// Per-layer attention spec: the variant id (`"variant"`) and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "variant", rename_all = "kebab-case", deny_unknown_fields)]
pub enum AttentionSpec {
    /// Softmax, no position information in attention.
    Nope,
    /// Softmax, no bias; requires `absolute_position = "sinusoidal"`.
    Sinusoidal,
    /// Softmax with rotary q/k (adjacent pairs), angles from `base`.
    Rope {
        #[serde(default = "rope_base")]
        base: f64,
    },
    /// B = −m_h·d. `slopes` overrides the official get_slopes(H).
    Alibi {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slopes: Option<Vec<f64>>,
    },
    /// B = −p_h·ln(1 + a_h·d), a,p learned per head, shared across layers (`pos.kerple_log.{a,p}`).
    KerpleLog,
    /// B = −a_h·d^p_h, shared across layers (`pos.kerple_power.{a,p}`).
    KerplePower,
    /// Learned bucket table `pos.t5.bucket_bias` [num_buckets, H], times sqrt(head_dim).
    T5 {
        #[serde(default = "t5_buckets")]
        num_buckets: usize,
        #[serde(default = "t5_max_distance")]
        max_distance: usize,
    },
    /// Sandwich (NeMo form) with sinusoid dimension `dbar` (default head_dim rounded down to even, >= 2).
    Sandwich {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dbar: Option<usize>,
    },
    /// FIRE MLP bias over normalized log distance; `init_l` default train_context.
    Fire {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        init_l: Option<f64>,
    },
    /// B = −m_h·d² (ALiBi slopes unless overridden).
    Gaussian {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slopes: Option<Vec<f64>>,
    },
    /// Parameter-free MEP: B = ln Σ w·K(d; scale·m_h), evaluated by log-sum-exp.
    Mep {
        #[serde(default = "KernelTerm::mep_default")]
        kernels: Vec<KernelTerm>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slopes: Option<Vec<f64>>,
    },
    /// Parameterized MEP: ln(w_k·(1 + a_h d)^(−p_h) + w_g·exp(−gaussian_scale·m_h·d²)).
    MepParam {
        #[serde(default = "half")]
        kerple_weight: f64,
        #[serde(default = "half")]
        gaussian_weight: f64,
        #[serde(default = "one")]
        gaussian_scale: f64,
    },
    /// 1+elu linear attention with denominator `max(φq·z, eps)`.
    LinearElu {
        #[serde(default = "linear_eps")]
        eps: f64,
    },
    /// TransNormer block: Diag (block attention) or Norm (NormAttention).
    Transnormer {
        flavor: TransnormerFlavor,
        role: TransnormerRole,
        #[serde(default = "block_size")]
        block_size: usize,
    },
    /// 1+elu linear attention with LRPE `T_s(x) = Λ(s)(P x)` on φ(q), φ(k).
    Lrpe {
        #[serde(default = "lrpe_core")]
        core: LrpeCore,
        #[serde(default = "lrpe_p")]
        p: LrpeP,
        #[serde(default = "lrpe_theta")]
        theta: LrpeTheta,
        #[serde(default = "lrpe_normalize")]
        normalize: LrpeNormalize,
        /// Seed of the random permutation (core = permutation).
        #[serde(default)]
        seed: u64,
    },
    /// Gated linear attention (fla layout): low-rank key-dim gate, per-head RMSNorm, swish output gate.
    Gla {
        #[serde(default = "gla_rank")]
        gate_rank: usize,
        #[serde(default = "gla_normalizer")]
        gate_logit_normalizer: f64,
    },
    /// ReGLA: exp-max feature maps, c(d) scale, refined gate F, per-head RMSNorm.
    Regla,
    /// RetNet retention: fixed decay γ_h = 1 − 2^(−5−h), rotary q/k, per-head RMSNorm, swish gate.
    Retnet,
}

fn rope_base() -> f64 {
    10000.0
}
fn t5_buckets() -> usize {
    32
}
fn t5_max_distance() -> usize {
    128
}
fn half() -> f64 {
    0.5
}
fn linear_eps() -> f64 {
    1e-6
}
fn block_size() -> usize {
    32
}
fn lrpe_core() -> LrpeCore {
    LrpeCore::Rotation
}
fn lrpe_p() -> LrpeP {
    LrpeP::Householder
}
fn lrpe_theta() -> LrpeTheta {
    LrpeTheta::Learned
}
fn lrpe_normalize() -> LrpeNormalize {
    LrpeNormalize::Rmsnorm
}
fn gla_rank() -> usize {
    16
}
fn gla_normalizer() -> f64 {
    16.0
}

/// The two families of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Causal softmax attention with a KV cache.
    Softmax,
    /// Recurrent state, constant-memory decode.
    Linear,
}

impl AttentionSpec {
    /// The catalog id of this spec.
    pub fn variant_id(&self) -> &'static str {
        match self {
            AttentionSpec::Nope => "nope",
            AttentionSpec::Sinusoidal => "sinusoidal",
            AttentionSpec::Rope { .. } => "rope",
            AttentionSpec::Alibi { .. } => "alibi",
            AttentionSpec::KerpleLog => "kerple-log",
            AttentionSpec::KerplePower => "kerple-power",
            AttentionSpec::T5 { .. } => "t5",
            AttentionSpec::Sandwich { .. } => "sandwich",
            AttentionSpec::Fire { .. } => "fire",
            AttentionSpec::Gaussian { .. } => "gaussian",
            AttentionSpec::Mep { .. } => "mep",
            AttentionSpec::MepParam { .. } => "mep-param",
            AttentionSpec::LinearElu { .. } => "linear-elu",
            AttentionSpec::Transnormer { .. } => "transnormer",
            AttentionSpec::Lrpe { .. } => "lrpe",
            AttentionSpec::Gla { .. } => "gla",
            AttentionSpec::Regla => "regla",
            AttentionSpec::Retnet => "retnet",
        }
    }

    /// Softmax family (KV cache) or linear family (recurrent state). TransNormer Diag blocks count
    /// as linear: their state is bounded by the block size.
    pub fn family(&self) -> Family {
        match self {
            AttentionSpec::LinearElu { .. }
            | AttentionSpec::Transnormer { .. }
            | AttentionSpec::Lrpe { .. }
            | AttentionSpec::Gla { .. }
            | AttentionSpec::Regla
            | AttentionSpec::Retnet => Family::Linear,
            _ => Family::Softmax,
        }
    }

    /// Default spec of a variant id (the catalog defaults). TransNormer defaults to T2 Norm;
    /// use [`ModelConfig::preset`] for the whole-model layout (Diag first half, Norm second).
    pub fn default_for(id: &str) -> Result<AttentionSpec> {
        let spec = match id {
            "nope" => AttentionSpec::Nope,
            "sinusoidal" => AttentionSpec::Sinusoidal,
            "rope" => AttentionSpec::Rope { base: rope_base() },
            "alibi" => AttentionSpec::Alibi { slopes: None },
            "kerple-log" => AttentionSpec::KerpleLog,
            "kerple-power" => AttentionSpec::KerplePower,
            "t5" => AttentionSpec::T5 { num_buckets: t5_buckets(), max_distance: t5_max_distance() },
            "sandwich" => AttentionSpec::Sandwich { dbar: None },
            "fire" => AttentionSpec::Fire { init_l: None },
            "gaussian" => AttentionSpec::Gaussian { slopes: None },
            "mep" => AttentionSpec::Mep { kernels: KernelTerm::mep_default(), slopes: None },
            "mep-param" => {
                AttentionSpec::MepParam { kerple_weight: 0.5, gaussian_weight: 0.5, gaussian_scale: 1.0 }
            }
            "linear-elu" => AttentionSpec::LinearElu { eps: linear_eps() },
            "transnormer" => AttentionSpec::Transnormer {
                flavor: TransnormerFlavor::T2,
                role: TransnormerRole::Norm,
                block_size: block_size(),
            },
            "lrpe" => AttentionSpec::Lrpe {
                core: lrpe_core(),
                p: lrpe_p(),
                theta: lrpe_theta(),
                normalize: lrpe_normalize(),
                seed: 0,
            },
            "gla" => AttentionSpec::Gla { gate_rank: gla_rank(), gate_logit_normalizer: gla_normalizer() },
            "regla" => AttentionSpec::Regla,
            "retnet" => AttentionSpec::Retnet,
            other => return Err(Error::UnknownVariant(other.to_string())),
        };
        Ok(spec)
    }
}

/// Size preset used by `attnlab init` (about 1.1M parameters at the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizePreset {
    pub vocab_size: usize,
    pub d_model: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub head_dim: usize,
    pub ffn_hidden: usize,
    pub train_context: usize,
    pub max_context: usize,
}

impl Default for SizePreset {
    fn default() -> Self {
        SizePreset {
            vocab_size: 2048,
            d_model: 128,
            n_layers: 4,
            n_heads: 4,
            head_dim: 32,
            ffn_hidden: 384,
            train_context: 128,
            max_context: 8192,
        }
    }
}

impl ModelConfig {
    /// A whole-model config for one catalog variant (every layer that variant; TransNormer puts Diag
    /// blocks in the first half of the layers and Norm blocks in the second, T2 flavour).
    pub fn preset(variant: &str, size: SizePreset) -> Result<ModelConfig> {
        let base = AttentionSpec::default_for(variant)?;
        let layers = (0..size.n_layers)
            .map(|i| match &base {
                AttentionSpec::Transnormer { flavor, block_size, .. } => AttentionSpec::Transnormer {
                    flavor: *flavor,
                    role: if i < size.n_layers / 2 { TransnormerRole::Diag } else { TransnormerRole::Norm },
                    block_size: *block_size,
                },
                other => other.clone(),
            })
            .collect();
        let cfg = ModelConfig {
            format_version: FORMAT_VERSION,
            name: format!("{variant}-random"),
            description: format!("random-weight {variant} model from `attnlab init`"),
            vocab_size: size.vocab_size,
            d_model: size.d_model,
            n_layers: size.n_layers,
            n_heads: size.n_heads,
            head_dim: size.head_dim,
            ffn: FfnConfig { kind: FfnKind::Swiglu, hidden: size.ffn_hidden },
            norm: NormConfig { kind: NormKind::Rmsnorm, eps: 1e-5 },
            tie_embeddings: true,
            train_context: size.train_context,
            max_context: size.max_context,
            absolute_position: if variant == "sinusoidal" {
                AbsolutePosition::Sinusoidal
            } else {
                AbsolutePosition::None
            },
            layers,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parse and validate `config.json` text.
    pub fn from_json(text: &str) -> Result<ModelConfig> {
        let cfg: ModelConfig = serde_json::from_str(text).map_err(|e| {
            // serde reports unknown variant tags as "unknown variant `x`"; surface them as such.
            let msg = e.to_string();
            if let Some(rest) = msg.strip_prefix("unknown variant `") {
                if let Some(id) = rest.split('`').next() {
                    if !VARIANT_IDS.contains(&id) && msg.contains("expected one of `nope`") {
                        return Error::UnknownVariant(id.to_string());
                    }
                }
            }
            Error::ConfigParse(msg)
        })?;
        reject_extra_keys_of_unit_variants(text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Pretty JSON for writing `config.json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// Width of the concatenated heads, `n_heads · head_dim`.
    pub fn attn_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Check every cross-field constraint.
    pub fn validate(&self) -> Result<()> {
        if self.format_version != FORMAT_VERSION {
            return Err(Error::field(
                "format_version",
                format!("unsupported version {}, this build reads {FORMAT_VERSION}", self.format_version),
            ));
        }
        let positive = [
            ("vocab_size", self.vocab_size),
            ("d_model", self.d_model),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("head_dim", self.head_dim),
            ("ffn.hidden", self.ffn.hidden),
            ("train_context", self.train_context),
            ("max_context", self.max_context),
        ];
        for (field, v) in positive {
            if v == 0 {
                return Err(Error::field(field, "must be > 0"));
            }
        }
        // Generous caps so that a hostile config cannot ask for absurd allocations.
        let caps = [
            ("vocab_size", self.vocab_size, 1 << 20),
            ("d_model", self.d_model, 1 << 14),
            ("n_layers", self.n_layers, 256),
            ("n_heads", self.n_heads, 256),
            ("head_dim", self.head_dim, 1024),
            ("ffn.hidden", self.ffn.hidden, 1 << 16),
            ("max_context", self.max_context, 1 << 20),
        ];
        for (field, v, cap) in caps {
            if v > cap {
                return Err(Error::field(field, format!("{v} exceeds the supported maximum {cap}")));
            }
        }
        if self.n_heads.saturating_mul(self.max_context) > crate::attention::MAX_BIAS_TABLE {
            return Err(Error::field(
                "max_context",
                format!(
                    "n_heads × max_context exceeds {} bias-table entries",
                    crate::attention::MAX_BIAS_TABLE
                ),
            ));
        }
        if self.train_context > self.max_context {
            return Err(Error::field("train_context", "must be <= max_context"));
        }
        if !(self.norm.eps.is_finite() && self.norm.eps > 0.0) {
            return Err(Error::field("norm.eps", "must be finite and > 0"));
        }
        if self.layers.len() != self.n_layers {
            return Err(Error::field(
                "layers",
                format!("has {} entries but n_layers = {}", self.layers.len(), self.n_layers),
            ));
        }
        let has_sinusoidal_layer = self.layers.iter().any(|l| matches!(l, AttentionSpec::Sinusoidal));
        if has_sinusoidal_layer && self.absolute_position != AbsolutePosition::Sinusoidal {
            return Err(Error::field(
                "absolute_position",
                "layers of variant `sinusoidal` need absolute_position = \"sinusoidal\"",
            ));
        }
        if self.absolute_position == AbsolutePosition::Sinusoidal && !self.d_model.is_multiple_of(2) {
            return Err(Error::field("d_model", "must be even for sinusoidal absolute positions"));
        }
        let mut t5_shape: Option<(usize, usize)> = None;
        for (i, spec) in self.layers.iter().enumerate() {
            self.validate_layer(i, spec, &mut t5_shape)?;
        }
        Ok(())
    }

    fn validate_layer(
        &self,
        i: usize,
        spec: &AttentionSpec,
        t5_shape: &mut Option<(usize, usize)>,
    ) -> Result<()> {
        let f = |name: &str| format!("layers[{i}].{name}");
        let check_slopes = |slopes: &Option<Vec<f64>>| -> Result<()> {
            if let Some(s) = slopes {
                if s.len() != self.n_heads {
                    return Err(Error::field(
                        f("slopes"),
                        format!("has {} values, need n_heads = {}", s.len(), self.n_heads),
                    ));
                }
                if let Some(bad) = s.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
                    return Err(Error::field(
                        f("slopes"),
                        format!("value {bad} is not a finite non-negative number"),
                    ));
                }
            }
            Ok(())
        };
        match spec {
            AttentionSpec::Rope { base } => {
                if !self.head_dim.is_multiple_of(2) {
                    return Err(Error::field("head_dim", "rope needs an even head_dim"));
                }
                if !(base.is_finite() && *base > 1.0) {
                    return Err(Error::field(f("base"), "must be finite and > 1"));
                }
            }
            AttentionSpec::Retnet => {
                if !self.head_dim.is_multiple_of(2) {
                    return Err(Error::field("head_dim", "retnet (rotary q/k) needs an even head_dim"));
                }
            }
            AttentionSpec::Alibi { slopes } | AttentionSpec::Gaussian { slopes } => check_slopes(slopes)?,
            AttentionSpec::Mep { kernels, slopes } => {
                check_slopes(slopes)?;
                if kernels.is_empty() {
                    return Err(Error::field(f("kernels"), "needs at least one kernel term"));
                }
                validate_kernel_terms(kernels)
                    .map_err(|(k, reason)| Error::field(f(&format!("kernels[{k}]")), reason))?;
            }
            AttentionSpec::MepParam { kerple_weight, gaussian_weight, gaussian_scale } => {
                for (name, v) in [
                    ("kerple_weight", kerple_weight),
                    ("gaussian_weight", gaussian_weight),
                    ("gaussian_scale", gaussian_scale),
                ] {
                    if !(v.is_finite() && *v >= 0.0) {
                        return Err(Error::field(f(name), "must be finite and >= 0"));
                    }
                }
                if *kerple_weight + *gaussian_weight <= 0.0 {
                    return Err(Error::field(
                        f("kerple_weight"),
                        "kerple_weight + gaussian_weight must be > 0",
                    ));
                }
            }
            AttentionSpec::T5 { num_buckets, max_distance } => {
                if *num_buckets < 2 || *num_buckets > 4096 {
                    return Err(Error::field(f("num_buckets"), "must be in 2..=4096"));
                }
                if *max_distance <= num_buckets / 2 {
                    return Err(Error::field(f("max_distance"), "must exceed num_buckets / 2"));
                }
                match t5_shape {
                    Some(prev) if *prev != (*num_buckets, *max_distance) => {
                        return Err(Error::field(f("num_buckets"), "all t5 layers share one bucket table and must agree on num_buckets and max_distance"));
                    }
                    _ => *t5_shape = Some((*num_buckets, *max_distance)),
                }
            }
            AttentionSpec::Sandwich { dbar } => {
                if let Some(d) = dbar {
                    if *d < 2 || !d.is_multiple_of(2) || *d > 4096 {
                        return Err(Error::field(f("dbar"), "must be even, >= 2 and <= 4096"));
                    }
                }
            }
            AttentionSpec::Fire { init_l } => {
                if let Some(l) = init_l {
                    if !(l.is_finite() && *l > 0.0) {
                        return Err(Error::field(f("init_l"), "must be finite and > 0"));
                    }
                }
            }
            AttentionSpec::LinearElu { eps } => {
                if !(eps.is_finite() && *eps > 0.0) {
                    return Err(Error::field(f("eps"), "must be finite and > 0"));
                }
            }
            AttentionSpec::Transnormer { block_size, .. } => {
                if *block_size == 0 || *block_size > 4096 {
                    return Err(Error::field(f("block_size"), "must be in 1..=4096"));
                }
            }
            AttentionSpec::Lrpe { core, .. } => {
                if matches!(core, LrpeCore::Rotation | LrpeCore::Mixed) && self.head_dim < 2 {
                    return Err(Error::field("head_dim", "lrpe rotation cores need head_dim >= 2"));
                }
            }
            AttentionSpec::Gla { gate_rank, gate_logit_normalizer } => {
                if *gate_rank == 0 || *gate_rank > 1024 {
                    return Err(Error::field(f("gate_rank"), "must be in 1..=1024"));
                }
                if !(gate_logit_normalizer.is_finite() && *gate_logit_normalizer > 0.0) {
                    return Err(Error::field(f("gate_logit_normalizer"), "must be finite and > 0"));
                }
            }
            AttentionSpec::Nope
            | AttentionSpec::Sinusoidal
            | AttentionSpec::KerpleLog
            | AttentionSpec::KerplePower
            | AttentionSpec::Regla => {}
        }
        Ok(())
    }
}

/// serde ignores extra keys on parameterless variants of an internally tagged enum; reject them here so
/// that a typo such as `{"variant": "regla", "gate_rank": 16}` is an error, not silently dropped.
fn reject_extra_keys_of_unit_variants(text: &str) -> Result<()> {
    const UNIT: &[&str] = &["nope", "sinusoidal", "kerple-log", "kerple-power", "regla", "retnet"];
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| Error::ConfigParse(e.to_string()))?;
    let layers = value.get("layers").and_then(|l| l.as_array()).map(Vec::as_slice).unwrap_or(&[]);
    for (i, layer) in layers.iter().enumerate() {
        let Some(obj) = layer.as_object() else { continue };
        let variant = obj.get("variant").and_then(|v| v.as_str()).unwrap_or("");
        if UNIT.contains(&variant) {
            if let Some(key) = obj.keys().find(|k| k.as_str() != "variant") {
                return Err(Error::field(
                    format!("layers[{i}].{key}"),
                    format!("unknown field: variant `{variant}` takes no parameters"),
                ));
            }
        }
    }
    Ok(())
}

/// Validate a kernel mix; on failure returns (term index, reason). Used by config and runtime overrides.
pub fn validate_kernel_terms(terms: &[KernelTerm]) -> std::result::Result<(), (usize, String)> {
    for (k, t) in terms.iter().enumerate() {
        if !(t.weight.is_finite() && t.weight >= 0.0) {
            return Err((k, format!("weight {} must be finite and >= 0", t.weight)));
        }
        if !(t.scale.is_finite() && t.scale >= 0.0) {
            return Err((k, format!("scale {} must be finite and >= 0", t.scale)));
        }
        if let Some(p) = t.p {
            if !(p.is_finite() && p > 0.0) {
                return Err((k, format!("p {p} must be finite and > 0")));
            }
        }
    }
    if !terms.iter().any(|t| t.weight > 0.0) {
        return Err((0, "at least one kernel weight must be > 0".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_valid_preset_that_round_trips() {
        for id in VARIANT_IDS {
            let cfg = ModelConfig::preset(id, SizePreset::default()).unwrap();
            assert_eq!(cfg.layers[0].variant_id(), *id);
            let back = ModelConfig::from_json(&cfg.to_json()).unwrap();
            assert_eq!(back, cfg);
        }
    }

    #[test]
    fn unknown_variant_is_named() {
        let mut v: serde_json::Value =
            serde_json::from_str(&ModelConfig::preset("alibi", SizePreset::default()).unwrap().to_json())
                .unwrap();
        v["layers"][1]["variant"] = "alibi2".into();
        let err = ModelConfig::from_json(&v.to_string()).unwrap_err();
        assert!(matches!(err, Error::UnknownVariant(ref id) if id == "alibi2"), "{err}");
    }

    #[test]
    fn parameterless_variants_reject_extra_keys() {
        let mut v: serde_json::Value =
            serde_json::from_str(&ModelConfig::preset("regla", SizePreset::default()).unwrap().to_json())
                .unwrap();
        v["layers"][3]["gate_rank"] = 16.into();
        let err = ModelConfig::from_json(&v.to_string()).unwrap_err();
        assert!(err.to_string().contains("layers[3].gate_rank"), "{err}");
    }

    #[test]
    fn inconsistent_configs_name_the_field() {
        let mut cfg = ModelConfig::preset("alibi", SizePreset::default()).unwrap();
        cfg.layers.pop();
        assert!(cfg.validate().unwrap_err().to_string().contains("`layers`"));
        let mut cfg = ModelConfig::preset("alibi", SizePreset::default()).unwrap();
        cfg.layers[2] = AttentionSpec::Alibi { slopes: Some(vec![0.5]) };
        assert!(cfg.validate().unwrap_err().to_string().contains("layers[2].slopes"));
        let mut cfg = ModelConfig::preset("sinusoidal", SizePreset::default()).unwrap();
        cfg.absolute_position = AbsolutePosition::None;
        assert!(cfg.validate().unwrap_err().to_string().contains("absolute_position"));
    }
}
