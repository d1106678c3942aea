//! `fire`: Functional Interpolation for Relative positions (Li et al., "Functional Interpolation for
//! Relative Positions Improves Long Context Transformers", §3, Eq. 3): an MLP `1 → 32 → H` over the
//! normalised log distance `ψ(i − j) / ψ(max(i, L))`. It depends on the query position, not only on
//! the distance, so it is evaluated per (i, j) ([`crate::bias::fire_u`], [`crate::bias::fire_mlp`]).

use super::{field, Family, LowerCtx, Variant};
use crate::bias;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::lowering::{Bias, Lowering};
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// FIRE parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fire {
    /// Initial threshold L; `None`: train_context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_l: Option<f64>,
}

impl Variant for Fire {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn validate(&self, _cfg: &ModelConfig, i: usize) -> Result<()> {
        match self.init_l {
            Some(l) if !(l.is_finite() && l > 0.0) => {
                Err(Error::field(field(i, "init_l"), "must be finite and > 0"))
            }
            _ => Ok(()),
        }
    }

    fn layer_tensors(&self, cfg: &ModelConfig, i: usize) -> Vec<TensorSpec> {
        let (k, h) = (bias::FIRE_HIDDEN, cfg.n_heads);
        let lim2 = 1.0 / (k as f32).sqrt();
        let p = |name: &str| format!("layers.{i}.attn.fire.{name}");
        vec![
            TensorSpec::new(p("c"), &[1], Init::Const(0.1)),
            TensorSpec::new(p("l_mult"), &[1], Init::Const(1.0)),
            TensorSpec::new(p("w1"), &[k, 1], Init::Uniform(-1.0, 1.0)),
            TensorSpec::new(p("b1"), &[k], Init::Uniform(-1.0, 1.0)),
            TensorSpec::new(p("w2"), &[h, k], Init::Uniform(-lim2, lim2)),
            TensorSpec::new(p("b2"), &[h], Init::Uniform(-lim2, lim2)),
        ]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let bias = Bias::Fire {
            c: ctx.learned_scalar("fire.c")?,
            l_mult: ctx.learned_scalar("fire.l_mult")?,
            init_l: self.init_l.unwrap_or(ctx.cfg.train_context as f64),
            w1: ctx.learned("fire.w1")?,
            b1: ctx.learned("fire.b1")?,
            w2: ctx.learned("fire.w2")?,
            b2: ctx.learned("fire.b2")?,
        };
        Ok(ctx.softmax(bias, None))
    }
}
