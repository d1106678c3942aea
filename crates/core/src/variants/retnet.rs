//! `retnet`: retention (Sun et al., "Retentive Network: A Successor to Transformer for Large Language
//! Models", §2.1, Eqs. 1–6): `S_t = γ_h S_{t−1} + k_tᵀ v_t` with a fixed decay per head
//! `γ_h = 1 − 2^(−5−h)`, rotary q/k (xPos without the extrapolation factor), q scaled by
//! `dh^(−1/2)`, per-head RMSNorm and a swish output gate (§2.2, Eq. 8).

use super::{check_even_head_dim, Family, LowerCtx, Variant};
use crate::attention::HEAD_NORM_EPS;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::lowering::{Feature, FeatureMap, Gate, LinearLowering, Lowering, Post, Rotation};
use crate::rotary::rope_inv_freqs;
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// No parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retnet {}

/// RetNet decay of head h (0-based): `γ_h = 1 − 2^(−5−h)` (RetNet §2.2).
pub fn retnet_gamma(h: usize) -> f64 {
    1.0 - (-5.0 - h as f64).exp2()
}

impl Variant for Retnet {
    fn family(&self) -> Family {
        Family::Linear
    }

    fn validate(&self, cfg: &ModelConfig, _i: usize) -> Result<()> {
        check_even_head_dim(cfg, "retnet (rotary q/k)")
    }

    fn layer_tensors(&self, cfg: &ModelConfig, i: usize) -> Vec<TensorSpec> {
        let std_in = 1.0 / (cfg.d_model as f32).sqrt();
        vec![
            TensorSpec::new(
                format!("layers.{i}.attn.retnet.out_gate"),
                &[cfg.attn_dim(), cfg.d_model],
                Init::Normal(std_in),
            ),
            TensorSpec::new(format!("layers.{i}.attn.retnet.head_norm"), &[cfg.head_dim], Init::Const(1.0)),
        ]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let (d, a, h, dh) = (ctx.cfg.d_model, ctx.cfg.attn_dim(), ctx.cfg.n_heads, ctx.cfg.head_dim);
        let q = Feature { map: FeatureMap::Identity, scale: ctx.scale() };
        let mut l = LinearLowering::plain(dh, q, Feature::plain(FeatureMap::Identity));
        l.rotation = Some(Rotation::Rope { inv_freq: rope_inv_freqs(dh, 10000.0, dh, None) });
        l.gate = Gate::PerHead { log_gamma: (0..h).map(|hh| retnet_gamma(hh).ln() as f32).collect() };
        l.post = Post::RmsNormGate {
            gain: ctx.learned("retnet.head_norm")?,
            eps: HEAD_NORM_EPS,
            out_gate: ctx.learned_linear("retnet.out_gate", a, d)?,
        };
        Ok(Lowering::Linear(l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RetNet decay γ_h = 1 − 2^(−5−h) (RetNet, Sun et al., 2023; ReGLA only names RetNet in
    /// §6).
    #[test]
    fn retnet_gamma_values() {
        assert_eq!(retnet_gamma(0), 0.96875);
        assert_eq!(retnet_gamma(1), 0.984375);
        assert_eq!(retnet_gamma(3), 0.99609375);
        assert_eq!(retnet_gamma(7), 1.0 - 1.0 / 4096.0);
    }
}
