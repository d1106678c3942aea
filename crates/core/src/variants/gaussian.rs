//! `gaussian`: `B_h(d) = −m_h·d²` with the ALiBi slopes (the Gaussian kernel `exp(−m d²)` of MEP,
//! Gao, "MEP", Methods, Eq. 24, used alone). Steerable like ALiBi.

use super::{
    check_slopes, slopes_or_alibi, AttentionSpec, Family, KernelKind, KernelTerm, LowerCtx, Variant,
};
use crate::bias;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::lowering::Lowering;
use serde::{Deserialize, Serialize};

/// Gaussian-bias parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gaussian {
    /// Per-head slopes; `None`: the ALiBi slopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slopes: Option<Vec<f64>>,
}

impl Variant for Gaussian {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn validate(&self, cfg: &ModelConfig, i: usize) -> Result<()> {
        check_slopes(&self.slopes, cfg, i)
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let m = slopes_or_alibi(&self.slopes, ctx.cfg.n_heads);
        ctx.bias_table(&|h, d| bias::gaussian(m[h], d))
    }

    fn slopes(&self, n_heads: usize) -> Option<Vec<f64>> {
        Some(slopes_or_alibi(&self.slopes, n_heads))
    }

    fn kernel_mix(&self) -> Option<Vec<KernelTerm>> {
        Some(vec![KernelTerm { kernel: KernelKind::Gaussian, scale: 1.0, weight: 1.0, p: None }])
    }

    fn steered(&self, slopes: Option<Vec<f64>>, mix: Option<Vec<KernelTerm>>) -> Option<AttentionSpec> {
        let slopes = slopes.or_else(|| self.slopes.clone());
        Some(match mix {
            Some(kernels) => AttentionSpec::Mep(super::mep::Mep { kernels, slopes }),
            None => AttentionSpec::Gaussian(Gaussian { slopes }),
        })
    }
}
