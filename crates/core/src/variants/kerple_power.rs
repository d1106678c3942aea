//! `kerple-power`: KERPLE's power bias `B_h(d) = −a_h·d^p_h` (Chi et al., "KERPLE", §4.2, Eq. 7), `a, p`
//! learned per head and shared across layers, clamped to `a ≥ 0.01`, `p ∈ [0.01, 2]` at use
//! ([`crate::bias::kerple_power`]).

use super::{Family, LowerCtx, Variant};
use crate::bias;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::lowering::{LearnedTable, Lowering};
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// No parameters in the config (a and p are tensors).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KerplePower {}

impl Variant for KerplePower {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn shared_tensors(&self, cfg: &ModelConfig) -> Vec<TensorSpec> {
        let h = cfg.n_heads;
        vec![
            TensorSpec::new("pos.kerple_power.a", &[h], Init::Uniform(0.0, 1.0)),
            TensorSpec::new("pos.kerple_power.p", &[h], Init::Uniform(0.0, 2.0)),
        ]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let (a, p) = (ctx.shared("pos.kerple_power.a")?, ctx.shared("pos.kerple_power.p")?);
        let learned =
            LearnedTable::KerplePower { a: "pos.kerple_power.a".into(), p: "pos.kerple_power.p".into() };
        ctx.learned_bias_table(&|h, d| bias::kerple_power(a[h] as f64, p[h] as f64, d), learned)
    }
}
