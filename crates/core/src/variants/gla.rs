//! `gla`: gated linear attention in fla's layout (Yang et al., "Gated Linear Attention Transformers
//! with Hardware-Efficient Training", §4.1): identity features with q scaled by `d_k^(−1/2)`, a
//! low-rank key-dimension forget gate `α = σ(W_up W_down x + b)^(1/τ)` (fla's
//! `gate_logit_normalizer` τ = 16), per-head RMSNorm and a swish output gate. Keys may be narrower
//! than values (`qk_head_dim`; fla's `expand_k = 0.5`): the state is `[d_k, d_v]` per head.

use super::{field, Family, LowerCtx, Variant};
use crate::activations::log_sigmoid;
use crate::attention::HEAD_NORM_EPS;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::lowering::{Feature, FeatureMap, Gate, LinearLowering, Lowering, Post};
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// GLA parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gla {
    /// Rank of the gate's low-rank projection.
    #[serde(default = "default_rank")]
    pub gate_rank: usize,
    /// τ in `lg = lnσ(z) / τ`.
    #[serde(default = "default_normalizer")]
    pub gate_logit_normalizer: f64,
    /// eps of the per-head output RMSNorm (fla uses the model's `norm_eps`). Absent: 1e-5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_norm_eps: Option<f64>,
}

fn default_rank() -> usize {
    16
}
fn default_normalizer() -> f64 {
    16.0
}

impl Default for Gla {
    fn default() -> Self {
        Gla { gate_rank: default_rank(), gate_logit_normalizer: default_normalizer(), head_norm_eps: None }
    }
}

/// GLA forget gate in log space: `lnσ(z) / normalizer`, i.e. α = σ(z)^(1/normalizer). Always ≤ 0.
pub fn gla_log_gate(z: f64, normalizer: f64) -> f64 {
    log_sigmoid(z) / normalizer
}

impl Variant for Gla {
    fn family(&self) -> Family {
        Family::Linear
    }

    fn validate(&self, _cfg: &ModelConfig, i: usize) -> Result<()> {
        if self.gate_rank == 0 || self.gate_rank > 1024 {
            return Err(Error::field(field(i, "gate_rank"), "must be in 1..=1024"));
        }
        if !(self.gate_logit_normalizer.is_finite() && self.gate_logit_normalizer > 0.0) {
            return Err(Error::field(field(i, "gate_logit_normalizer"), "must be finite and > 0"));
        }
        if self.head_norm_eps.is_some_and(|e| !(e.is_finite() && e > 0.0)) {
            return Err(Error::field(field(i, "head_norm_eps"), "must be finite and > 0"));
        }
        Ok(())
    }

    fn layer_tensors(&self, cfg: &ModelConfig, i: usize) -> Vec<TensorSpec> {
        let (d, a, dh, r) = (cfg.d_model, cfg.attn_dim(), cfg.head_dim, self.gate_rank);
        // The gate is computed per key/value head (`kd` wide) and repeated like the keys (fla).
        let kd = cfg.qk_dims().1;
        let std_in = 1.0 / (d as f32).sqrt();
        let p = |name: &str| format!("layers.{i}.attn.gla.{name}");
        vec![
            TensorSpec::new_matrix(p("gk_down"), &[r, d], Init::Normal(std_in)),
            TensorSpec::new_matrix(p("gk_up"), &[kd, r], Init::Normal(1.0 / (r as f32).sqrt())),
            TensorSpec::new(p("gk_bias"), &[kd], Init::Const(0.0)),
            TensorSpec::new_matrix(p("out_gate"), &[a, d], Init::Normal(std_in)),
            TensorSpec::new(p("head_norm"), &[dh], Init::Const(1.0)),
        ]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let (d, a) = (ctx.cfg.d_model, ctx.cfg.attn_dim());
        let (qk, kd) = (ctx.cfg.key_head_dim(), ctx.cfg.qk_dims().1);
        let q = Feature { map: FeatureMap::Identity, scale: ctx.scale() };
        let mut l = LinearLowering::plain(qk, q, Feature::plain(FeatureMap::Identity));
        l.gate = Gate::LowRank {
            down: ctx.learned_linear("gla.gk_down", self.gate_rank, d)?,
            up: ctx.learned_linear("gla.gk_up", kd, self.gate_rank)?,
            bias: ctx.learned("gla.gk_bias")?,
            normalizer: self.gate_logit_normalizer,
        };
        l.post = Post::RmsNormGate {
            gain: ctx.learned("gla.head_norm")?,
            eps: self.head_norm_eps.map_or(HEAD_NORM_EPS, |e| e as f32),
            out_gate: ctx.learned_linear("gla.out_gate", a, d)?,
        };
        Ok(Lowering::Linear(l))
    }

    fn gate_bias_tensor(&self, i: usize) -> Option<String> {
        Some(format!("layers.{i}.attn.gla.gk_bias"))
    }

    fn free_key_width(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activations::sigmoid;
    use crate::test_util::close;

    /// Reference-implementations §7: GLA gate = logsigmoid(z) / normalizer (α = σ(z)^(1/16)).
    #[test]
    fn gla_log_gate_values() {
        assert!(close(gla_log_gate(0.0, 16.0), -std::f64::consts::LN_2 / 16.0, 1e-15));
        assert!(close(gla_log_gate(2.0, 16.0).exp(), sigmoid(2.0).powf(1.0 / 16.0), 1e-14));
        assert!(gla_log_gate(50.0, 1.0) <= 0.0);
        assert!(close(gla_log_gate(-100.0, 10.0), -10.0, 1e-12));
    }
}
