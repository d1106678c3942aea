//! `kerple-log`: KERPLE's logarithmic bias `B_h(d) = −p_h·ln(1 + a_h·d)` (Chi et al., "KERPLE:
//! Kernelized Relative Positional Embedding for Length Extrapolation", §4.2, Eq. 8), `a, p` learned
//! per head, shared across layers as in the reference code, clamped to ≥ 0.01 at use
//! ([`crate::bias::kerple_log`]).

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
pub struct KerpleLog {}

impl Variant for KerpleLog {
    fn family(&self) -> Family {
        Family::Softmax
    }

    /// KERPLE init: a ~ U(0, 1), p ~ U(0, 2) (reference code `kerple_configs`).
    fn shared_tensors(&self, cfg: &ModelConfig) -> Vec<TensorSpec> {
        let h = cfg.n_heads;
        vec![
            TensorSpec::new("pos.kerple_log.a", &[h], Init::Uniform(0.0, 1.0)),
            TensorSpec::new("pos.kerple_log.p", &[h], Init::Uniform(0.0, 2.0)),
        ]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let (a, p) = (ctx.shared("pos.kerple_log.a")?, ctx.shared("pos.kerple_log.p")?);
        let learned = LearnedTable::KerpleLog { a: "pos.kerple_log.a".into(), p: "pos.kerple_log.p".into() };
        ctx.learned_bias_table(&|h, d| bias::kerple_log(a[h] as f64, p[h] as f64, d), learned)
    }
}
