//! `mep-param`: parameterised MEP, a learnable KERPLE-log kernel mixed with a Gaussian (Gao, "MEP",
//! Methods, Eqs. 27–28): `B_h(d) = ln(w_k·(1 + a_h d)^(−p_h) + w_g·exp(−s·m_h·d²))`, evaluated by
//! log-sum-exp ([`crate::bias::mep_param`]); `a, p` per head, shared across layers.

use super::{field, Family, LowerCtx, Variant};
use crate::bias;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::lowering::{LearnedTable, Lowering};
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// Mixture weights and the Gaussian's slope scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MepParam {
    #[serde(default = "half")]
    pub kerple_weight: f64,
    #[serde(default = "half")]
    pub gaussian_weight: f64,
    #[serde(default = "one")]
    pub gaussian_scale: f64,
}

fn half() -> f64 {
    0.5
}
fn one() -> f64 {
    1.0
}

impl Default for MepParam {
    fn default() -> Self {
        MepParam { kerple_weight: 0.5, gaussian_weight: 0.5, gaussian_scale: 1.0 }
    }
}

impl Variant for MepParam {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn validate(&self, _cfg: &ModelConfig, i: usize) -> Result<()> {
        for (name, v) in [
            ("kerple_weight", self.kerple_weight),
            ("gaussian_weight", self.gaussian_weight),
            ("gaussian_scale", self.gaussian_scale),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::field(field(i, name), "must be finite and >= 0"));
            }
        }
        if self.kerple_weight + self.gaussian_weight <= 0.0 {
            return Err(Error::field(
                field(i, "kerple_weight"),
                "kerple_weight + gaussian_weight must be > 0",
            ));
        }
        Ok(())
    }

    fn shared_tensors(&self, cfg: &ModelConfig) -> Vec<TensorSpec> {
        let h = cfg.n_heads;
        vec![
            TensorSpec::new("pos.mep_param.a", &[h], Init::Uniform(0.0, 1.0)),
            TensorSpec::new("pos.mep_param.p", &[h], Init::Uniform(0.0, 2.0)),
        ]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let (a, p) = (ctx.shared("pos.mep_param.a")?, ctx.shared("pos.mep_param.p")?);
        let m = bias::alibi_slopes(ctx.cfg.n_heads);
        let learned = LearnedTable::MepParam {
            a: "pos.mep_param.a".into(),
            p: "pos.mep_param.p".into(),
            kerple_weight: self.kerple_weight,
            gaussian_weight: self.gaussian_weight,
            gaussian_slopes: m.iter().map(|s| self.gaussian_scale * s).collect(),
        };
        let f = |h: usize, d: f64| {
            let gs = self.gaussian_scale * m[h];
            bias::mep_param(a[h] as f64, p[h] as f64, gs, self.kerple_weight, self.gaussian_weight, d)
        };
        ctx.learned_bias_table(&f, learned)
    }
}
