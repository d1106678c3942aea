//! `sandwich`: the bias from inner products of sinusoidal position vectors (Chi et al., "Dissecting
//! Transformer Length Extrapolation via the Lens of Receptive Field Analysis", §4, Eq. 4; NeMo's
//! form): see [`crate::bias::sandwich`].

use super::{field, Family, LowerCtx, Variant};
use crate::bias;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::lowering::Lowering;
use serde::{Deserialize, Serialize};

/// Sandwich parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sandwich {
    /// Sinusoid dimension; `None`: head_dim rounded down to even (at least 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dbar: Option<usize>,
}

impl Variant for Sandwich {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn validate(&self, _cfg: &ModelConfig, i: usize) -> Result<()> {
        match self.dbar {
            Some(d) if d < 2 || !d.is_multiple_of(2) || d > 4096 => {
                Err(Error::field(field(i, "dbar"), "must be even, >= 2 and <= 4096"))
            }
            _ => Ok(()),
        }
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let (h, dh) = (ctx.cfg.n_heads, ctx.cfg.head_dim);
        let dbar = self.dbar.unwrap_or(dh - dh % 2).max(2);
        ctx.bias_table(&|hh, d| bias::sandwich(d, hh, h, dbar))
    }
}
