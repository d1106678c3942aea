//! `nope`: causal softmax attention with no position information at all (Kazemnejad et al., "The
//! Impact of Positional Encoding on Length Generalization in Transformers", §3: causal masking alone
//! lets the model infer positions).

use super::{Family, LowerCtx, Variant};
use crate::error::Result;
use crate::lowering::{Bias, Lowering};
use serde::{Deserialize, Serialize};

/// No parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nope {}

impl Variant for Nope {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        Ok(ctx.softmax(Bias::None, None))
    }
}
