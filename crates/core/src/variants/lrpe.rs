//! `lrpe`: linear attention with Linearized Relative Positional Encoding (Qin et al., "Linearized
//! Relative Positional Encoding", §3.2–3.3): `φ = 1 + elu`, then the unitary `T_s(x) = Λ(s)(P x)` on
//! both mapped features at their absolute position, so `⟨T_s q, T_t k⟩` depends on `t − s` only. The
//! transform's math (cores, P, angles) is [`crate::lrpe::Lrpe`]; this module holds the config and the
//! lowering.
//!
//! Decisions: the primary configuration is rotation core + fixed Householder P + learned θ (the
//! configuration fairseq-evo `urpe.py` reuses); complex, permutation and mixed cores, identity and
//! odd-even P and fixed θ are options. θ and `v` are per layer, shared by the heads; `v` is never
//! trained (the trainer reads it detached). New models (`attnlab init`, [`Variant::preset_layer`])
//! use the paper's denominator, `o = Δ⁻¹ Q̃ [K̃ᴴ V]`, `Δ = diag(Q̃ [K̃ᴴ 1ₙ])` (LRPE App. C.2, Eqs.
//! 37–38), causal, with the reference's clamp `max(·, 1e−6)`; rotated features make `q·z ≤ 0`
//! possible and the clamp then inflates outputs by up to 1e6. `normalize: "rmsnorm"` (SimpleRMSNorm
//! over the heads, no denominator) stays an option, and is what a file without the key means (the
//! shipped `lrpe` model was trained with it).
//!
//! Learned θ under Adam moves by about `lr` per step whatever its size, so the low-frequency angles
//! (θ ≈ 1e−4 at head_dim 32) can grow by orders of magnitude in a run; `theta: "fixed"` avoids it.
//! A relative update (or training log θ) would be the remedy; the trainer does not implement one.

use super::{AttentionSpec, Family, LowerCtx, Variant};
use crate::config::{ModelConfig, SizePreset};
use crate::error::{Error, Result};
use crate::lowering::{Feature, FeatureMap, LinearLowering, Lowering, Post, Rotation};
use crate::lrpe::Lrpe;
use crate::rng::seeded_normal;
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// LRPE positional core Λ(s) (LRPE §3.3).
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
    /// `I − 2 v̂ v̂ᵀ` (LRPE Eq. 73), v̂ stored as tensor `layers.{i}.attn.lrpe.householder_v`; fixed,
    /// never trained.
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
    /// `o = qS / max(q·z, 1e−6)` with `S`, `z` the causal sums of `k vᵀ` and `k`: LRPE App. C.2, Eq.
    /// 38's `Δ⁻¹ Q̃ [K̃ᴴ V]` with the reference's clamp (it can divide by a near-zero or negative sum).
    Denominator,
}

/// LRPE parameters of one layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LrpeSpec {
    #[serde(default = "default_core")]
    pub core: LrpeCore,
    #[serde(default = "default_p")]
    pub p: LrpeP,
    #[serde(default = "default_theta")]
    pub theta: LrpeTheta,
    #[serde(default = "default_normalize")]
    pub normalize: LrpeNormalize,
    /// Seed of the random permutation (core = permutation).
    #[serde(default)]
    pub seed: u64,
}

fn default_core() -> LrpeCore {
    LrpeCore::Rotation
}
fn default_p() -> LrpeP {
    LrpeP::Householder
}
fn default_theta() -> LrpeTheta {
    LrpeTheta::Learned
}
fn default_normalize() -> LrpeNormalize {
    LrpeNormalize::Rmsnorm
}

impl Default for LrpeSpec {
    fn default() -> Self {
        LrpeSpec {
            core: default_core(),
            p: default_p(),
            theta: default_theta(),
            normalize: default_normalize(),
            seed: 0,
        }
    }
}

impl LrpeSpec {
    /// True when θ is a stored tensor (learned, and the core has angles).
    fn learned_theta(&self, head_dim: usize) -> bool {
        self.theta == LrpeTheta::Learned && Lrpe::n_angles(self.core, head_dim) > 0
    }
}

impl Variant for LrpeSpec {
    fn family(&self) -> Family {
        Family::Linear
    }

    fn validate(&self, cfg: &ModelConfig, _i: usize) -> Result<()> {
        if matches!(self.core, LrpeCore::Rotation | LrpeCore::Mixed) && cfg.head_dim < 2 {
            return Err(Error::field("head_dim", "lrpe rotation cores need head_dim >= 2"));
        }
        Ok(())
    }

    /// New models use the paper's denominator (LRPE App. C.2, Eq. 38).
    fn preset_layer(&self, _i: usize, _size: &SizePreset) -> Option<AttentionSpec> {
        Some(AttentionSpec::Lrpe(LrpeSpec { normalize: LrpeNormalize::Denominator, ..self.clone() }))
    }

    fn layer_tensors(&self, cfg: &ModelConfig, i: usize) -> Vec<TensorSpec> {
        let dh = cfg.head_dim;
        let mut v = Vec::new();
        if self.learned_theta(dh) {
            // Learned angles start at the fixed schedule (LRPE §3.3).
            let n = Lrpe::n_angles(self.core, dh);
            let init = Lrpe::new(self.core, LrpeP::Identity, dh, None, None, self.seed)
                .map(|l| l.angles().iter().map(|a| *a as f32).collect())
                .unwrap_or_else(|_| vec![0.0; n]);
            v.push(TensorSpec::new(format!("layers.{i}.attn.lrpe.theta"), &[n], Init::Values(init)));
        }
        if self.p == LrpeP::Householder {
            let vec = seeded_normal(dh, self.seed.wrapping_add(0x9E37_79B9 + i as u64));
            v.push(TensorSpec::new(format!("layers.{i}.attn.lrpe.householder_v"), &[dh], Init::Values(vec)));
        }
        v
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let dh = ctx.cfg.head_dim;
        let theta = if self.learned_theta(dh) { Some(ctx.tensor("lrpe.theta")?) } else { None };
        let v = if self.p == LrpeP::Householder { Some(ctx.tensor("lrpe.householder_v")?) } else { None };
        let lrpe = Lrpe::new(self.core, self.p, dh, theta.as_deref(), v.as_deref(), self.seed)?;
        let phi = Feature::plain(FeatureMap::EluPlusOne);
        let mut l = LinearLowering::plain(lrpe.out_dim(), phi, phi);
        l.rotation = Some(Rotation::Lrpe {
            lrpe: Box::new(lrpe),
            theta: theta.map(|_| ctx.layer_name("lrpe.theta")),
            householder: v.map(|_| ctx.layer_name("lrpe.householder_v")),
        });
        match self.normalize {
            LrpeNormalize::Rmsnorm => l.post = Post::SimpleRmsNorm,
            LrpeNormalize::Denominator => l.denominator = Some(1e-6),
        }
        Ok(Lowering::Linear(l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// New lrpe models normalise with the paper's denominator; a layer without the key (every file
    /// written before, the catalog default used by hybrids) keeps RMSNorm.
    #[test]
    fn preset_uses_the_denominator_and_an_absent_key_means_rmsnorm() {
        let cfg = ModelConfig::preset("lrpe", SizePreset::default()).unwrap();
        let spec = |l: &AttentionSpec| match l {
            AttentionSpec::Lrpe(s) => s.clone(),
            other => panic!("lrpe expected, got {}", other.variant_id()),
        };
        assert!(cfg.layers.iter().all(|l| spec(l).normalize == LrpeNormalize::Denominator));
        assert_eq!(spec(&cfg.layers[0]).p, LrpeP::Householder);
        let mut v: serde_json::Value = serde_json::from_str(&cfg.to_json()).unwrap();
        for l in v["layers"].as_array_mut().unwrap() {
            l.as_object_mut().unwrap().remove("normalize");
        }
        let old = ModelConfig::from_json(&v.to_string()).unwrap();
        assert!(old.layers.iter().all(|l| spec(l).normalize == LrpeNormalize::Rmsnorm));
    }
}
