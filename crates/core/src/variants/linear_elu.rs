//! `linear-elu`: linear attention with the `1 + elu` feature map and its denominator (Katharopoulos
//! et al., "Transformers are RNNs", §3.2, Eqs. 5–7): `o_i = φ(q_i)ᵀ S_i / max(φ(q_i)ᵀ z_i, eps)` with
//! `S_i = Σ_{s≤i} φ(k_s) v_sᵀ`, `z_i = Σ_{s≤i} φ(k_s)`.

use super::{check_positive, Family, LowerCtx, Variant};
use crate::config::ModelConfig;
use crate::error::Result;
use crate::lowering::{Feature, FeatureMap, LinearLowering, Lowering};
use serde::{Deserialize, Serialize};

/// Denominator epsilon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearElu {
    #[serde(default = "default_eps")]
    pub eps: f64,
}

fn default_eps() -> f64 {
    1e-6
}

impl Default for LinearElu {
    fn default() -> Self {
        LinearElu { eps: default_eps() }
    }
}

impl Variant for LinearElu {
    fn family(&self) -> Family {
        Family::Linear
    }

    fn validate(&self, _cfg: &ModelConfig, i: usize) -> Result<()> {
        check_positive(self.eps, i, "eps")
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let phi = Feature::plain(FeatureMap::EluPlusOne);
        let mut l = LinearLowering::plain(ctx.cfg.head_dim, phi, phi);
        l.denominator = Some(self.eps as f32);
        Ok(Lowering::Linear(l))
    }
}
