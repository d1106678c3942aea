//! `fast-decay`: linear attention with Fast Decay's two-sided outer-product forget gate (Mao,
//! "Fine-Tuning Pre-trained Transformers into Decaying Fast Weights", 2022), the baseline ReGLA calls
//! "GLA" in its Table 2 and Fig. 4 (ReGLA §2.1, Eqs. 9–10; Table 3 "LA w/ Fast Decay"):
//! `S_t = G_t ⊙ S_{t−1} + v_t φ(k_t)ᵀ` with `G_t = σ(W_z x_t + b_z) σ(W_f x_t + b_f)ᵀ`, identity
//! feature maps, no sum normalisation, a stable normalisation of the output.
//!
//! Decisions where the paper is silent: everything but the gate and the feature map is ReGLA's
//! (`variants/regla.rs`), so `regla` against `fast-decay` compares the two gates (and feature maps)
//! as the paper's Table 2 does: full-rank `W_z`, `W_f` (`[H·head_dim, d_model]`) with biases at 0
//! (both factors 0.5 at init, as ReGLA's F), per-head RMSNorm (eps 1e−5, learned gain), no output
//! gate, q scaled by `1/sqrt(head_dim)`.

use super::{Family, LowerCtx, Variant};
use crate::attention::HEAD_NORM_EPS;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::lowering::{Feature, FeatureMap, Gate, LinearLowering, Lowering, Post};
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// No parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FastDecay {}

impl Variant for FastDecay {
    fn family(&self) -> Family {
        Family::Linear
    }

    fn layer_tensors(&self, cfg: &ModelConfig, i: usize) -> Vec<TensorSpec> {
        let (d, a) = (cfg.d_model, cfg.attn_dim());
        let std_in = 1.0 / (d as f32).sqrt();
        let p = |name: &str| format!("layers.{i}.attn.fast_decay.{name}");
        vec![
            TensorSpec::new(p("w_f"), &[a, d], Init::Normal(std_in)),
            TensorSpec::new(p("b_f"), &[a], Init::Const(0.0)),
            TensorSpec::new(p("w_z"), &[a, d], Init::Normal(std_in)),
            TensorSpec::new(p("b_z"), &[a], Init::Const(0.0)),
            TensorSpec::new(p("head_norm"), &[cfg.head_dim], Init::Const(1.0)),
        ]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let (d, a, dh) = (ctx.cfg.d_model, ctx.cfg.attn_dim(), ctx.cfg.head_dim);
        let q = Feature { map: FeatureMap::Identity, scale: ctx.scale() };
        let mut l = LinearLowering::plain(dh, q, Feature::plain(FeatureMap::Identity));
        l.gate = Gate::TwoSided {
            wf: ctx.learned_linear("fast_decay.w_f", a, d)?,
            bf: ctx.learned("fast_decay.b_f")?,
            wz: ctx.learned_linear("fast_decay.w_z", a, d)?,
            bz: ctx.learned("fast_decay.b_z")?,
        };
        l.post = Post::RmsNorm { gain: ctx.learned("fast_decay.head_norm")?, eps: HEAD_NORM_EPS };
        Ok(Lowering::Linear(l))
    }

    /// The key-axis bias (ReGLA Fig. 4's ±6 setup moves this factor).
    fn gate_bias_tensor(&self, i: usize) -> Option<String> {
        Some(format!("layers.{i}.attn.fast_decay.b_f"))
    }
}
