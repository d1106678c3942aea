//! `sinusoidal`: softmax attention without a bias; position enters through the fixed sinusoidal
//! table added to the token embeddings (Vaswani et al., "Attention Is All You Need", §3.5). The
//! table itself is the model's `absolute_position = "sinusoidal"` (see `model.rs`).

use super::{Family, LowerCtx, Variant};
use crate::config::{AbsolutePosition, ModelConfig};
use crate::error::{Error, Result};
use crate::lowering::{Bias, Lowering};
use serde::{Deserialize, Serialize};

/// No parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sinusoidal {}

impl Variant for Sinusoidal {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn validate(&self, cfg: &ModelConfig, _i: usize) -> Result<()> {
        if cfg.absolute_position != AbsolutePosition::Sinusoidal {
            return Err(Error::field(
                "absolute_position",
                "layers of variant `sinusoidal` need absolute_position = \"sinusoidal\"",
            ));
        }
        Ok(())
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        Ok(ctx.softmax(Bias::None, None))
    }
}
