//! `rope`: softmax attention with rotary q/k (Su et al., "RoFormer", §3.2, Eq. 34): adjacent channel
//! pairs (2k, 2k+1) rotated by `s·base^(−2k/d)` at absolute position s, so `q_i·k_j` depends on
//! `i − j` only. Angles and the rotation are evaluated in f64 (`rotary.rs`).

use super::{check_even_head_dim, field, Family, LowerCtx, Variant};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::lowering::{Bias, Lowering};
use serde::{Deserialize, Serialize};

/// RoPE parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rope {
    /// Angle base (RoFormer: 10000).
    #[serde(default = "default_base")]
    pub base: f64,
}

fn default_base() -> f64 {
    10000.0
}

impl Default for Rope {
    fn default() -> Self {
        Rope { base: default_base() }
    }
}

impl Variant for Rope {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn validate(&self, cfg: &ModelConfig, i: usize) -> Result<()> {
        check_even_head_dim(cfg, "rope")?;
        if !(self.base.is_finite() && self.base > 1.0) {
            return Err(Error::field(field(i, "base"), "must be finite and > 1"));
        }
        Ok(())
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        Ok(ctx.softmax(Bias::None, Some(self.base)))
    }
}
