//! `mep`: parameter-free MEP, the log of a weighted kernel mix (Gao, "MEP: Multiple Kernel Learning
//! Enhancing Relative Positional Encoding Length Extrapolation", Methods, Eqs. 25–26):
//! `B_h(d) = ln Σ_k w_k K_k(d; scale_k·m_h)`, default `exp(m) + exp(m/2) + gaussian(m)` with weights
//! 0.33, evaluated by log-sum-exp over the log-terms so it stays finite where every kernel
//! underflows ([`crate::bias::mep_log_kernel`]). The mix is a config list the page's sliders edit.

use super::{check_slopes, field, slopes_or_alibi, AttentionSpec, Family, LowerCtx, Variant};
use crate::bias;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::lowering::Lowering;
use serde::{Deserialize, Serialize};

/// A kernel of a MEP kernel mix (MEP Eqs. 18–19, 23–24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelKind {
    /// `K = exp(−s·m·d)` (ALiBi).
    Exp,
    /// `K = exp(−s·m·d²)`.
    Gaussian,
    /// `K = (1 + s·m·d)^(−p)`, `p` from the term (default 1).
    KerpleLog,
    /// `K = exp(−s·m·d^p)`, `p` from the term (default 1, clamped to [0.01, 2]).
    KerplePower,
}

/// One term `weight · K(d; scale·m_h)` of a kernel mix; `m_h` is the head's ALiBi slope.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelTerm {
    pub kernel: KernelKind,
    /// Multiplies the head's base slope.
    #[serde(default = "one")]
    pub scale: f64,
    /// Mixture weight (> 0 to contribute; 0 removes the term).
    pub weight: f64,
    /// Exponent for kerple kernels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p: Option<f64>,
}

fn one() -> f64 {
    1.0
}

impl KernelTerm {
    /// The paper's parameter-free MEP: exp(m) + exp(m/2) + gaussian(m), weights 0.33 (MEP Eq. 25).
    pub fn mep_default() -> Vec<KernelTerm> {
        vec![
            KernelTerm { kernel: KernelKind::Exp, scale: 1.0, weight: 0.33, p: None },
            KernelTerm { kernel: KernelKind::Exp, scale: 0.5, weight: 0.33, p: None },
            KernelTerm { kernel: KernelKind::Gaussian, scale: 1.0, weight: 0.33, p: None },
        ]
    }
}

/// Validate a kernel mix; on failure returns (term index, reason). Used by config and runtime steering.
pub fn validate_kernel_terms(terms: &[KernelTerm]) -> std::result::Result<(), (usize, String)> {
    for (k, t) in terms.iter().enumerate() {
        if !(t.weight.is_finite() && t.weight >= 0.0) {
            return Err((k, format!("weight {} must be finite and >= 0", t.weight)));
        }
        if !(t.scale.is_finite() && t.scale >= 0.0) {
            return Err((k, format!("scale {} must be finite and >= 0", t.scale)));
        }
        if let Some(p) = t.p {
            if !(p.is_finite() && p > 0.0) {
                return Err((k, format!("p {p} must be finite and > 0")));
            }
        }
    }
    if !terms.iter().any(|t| t.weight > 0.0) {
        return Err((0, "at least one kernel weight must be > 0".into()));
    }
    Ok(())
}

/// MEP parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mep {
    /// The kernel mix.
    #[serde(default = "KernelTerm::mep_default")]
    pub kernels: Vec<KernelTerm>,
    /// Per-head base slopes; `None`: the ALiBi slopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slopes: Option<Vec<f64>>,
}

impl Default for Mep {
    fn default() -> Self {
        Mep { kernels: KernelTerm::mep_default(), slopes: None }
    }
}

impl Variant for Mep {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn validate(&self, cfg: &ModelConfig, i: usize) -> Result<()> {
        check_slopes(&self.slopes, cfg, i)?;
        if self.kernels.is_empty() {
            return Err(Error::field(field(i, "kernels"), "needs at least one kernel term"));
        }
        validate_kernel_terms(&self.kernels)
            .map_err(|(k, reason)| Error::field(field(i, &format!("kernels[{k}]")), reason))
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let m = slopes_or_alibi(&self.slopes, ctx.cfg.n_heads);
        ctx.bias_table(&|h, d| bias::mep_log_kernel(&self.kernels, m[h], d))
    }

    fn slopes(&self, n_heads: usize) -> Option<Vec<f64>> {
        Some(slopes_or_alibi(&self.slopes, n_heads))
    }

    fn kernel_mix(&self) -> Option<Vec<KernelTerm>> {
        Some(self.kernels.clone())
    }

    fn steered(&self, slopes: Option<Vec<f64>>, mix: Option<Vec<KernelTerm>>) -> Option<AttentionSpec> {
        let kernels = mix.unwrap_or_else(|| self.kernels.clone());
        Some(AttentionSpec::Mep(Mep { kernels, slopes: slopes.or_else(|| self.slopes.clone()) }))
    }
}
