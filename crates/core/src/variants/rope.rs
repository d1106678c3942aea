//! `rope`: softmax attention with rotary q/k (Su et al., "RoFormer", §3.2, Eq. 34): adjacent channel
//! pairs (2k, 2k+1) rotated by `s·base^(−2k/d)` at absolute position s, so `q_i·k_j` depends on
//! `i − j` only. Angles and the rotation are evaluated in f64 (`rotary.rs`). Two options imported
//! checkpoints need: partial rotary (GPT-NeoX rotates only the first `rotary_dim` channels of a head)
//! and the context-extension rescalings of the frequencies (`scaling`).

use super::{check_even_head_dim, field, Family, LowerCtx, Variant};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::lowering::{Bias, Lowering};
use crate::rotary::rope_inv_freqs;
use serde::{Deserialize, Serialize};

/// RoPE parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rope {
    /// Angle base (RoFormer: 10000).
    #[serde(default = "default_base")]
    pub base: f64,
    /// Rotated channels per head, from the start of the head (absent: all of `head_dim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotary_dim: Option<usize>,
    /// Rescaling of the frequencies for context extension (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<RopeScaling>,
}

/// Context-extension rescalings of the RoPE frequencies, as Hugging Face's `rope_scaling` names them.
/// The kinds that also change the attention scale or depend on the sequence length (`yarn`,
/// `dynamic`, `longrope`) are refused by the importer, not approximated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum RopeScaling {
    /// Position interpolation (Chen et al. 2023, "Extending Context Window … via Positional
    /// Interpolation", Eq. 4): every frequency divided by `factor`.
    Linear { factor: f64 },
    /// Llama 3.1's band-wise rescaling (transformers `_compute_llama3_parameters`): wavelengths longer
    /// than `original_max_position / low_freq_factor` are divided by `factor`, shorter than
    /// `original_max_position / high_freq_factor` are kept, and the band between is interpolated.
    Llama3 { factor: f64, low_freq_factor: f64, high_freq_factor: f64, original_max_position: usize },
}

impl RopeScaling {
    /// The rescaled inverse frequency.
    pub fn apply(&self, inv_freq: f64) -> f64 {
        match *self {
            RopeScaling::Linear { factor } => inv_freq / factor,
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position } => {
                let old = original_max_position as f64;
                let wavelen = 2.0 * std::f64::consts::PI / inv_freq;
                if wavelen < old / high_freq_factor {
                    inv_freq
                } else if wavelen > old / low_freq_factor {
                    inv_freq / factor
                } else {
                    let smooth = (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                    (1.0 - smooth) * inv_freq / factor + smooth * inv_freq
                }
            }
        }
    }

    fn validate(&self, i: usize) -> Result<()> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        let ok = match *self {
            RopeScaling::Linear { factor } => positive(factor),
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position } => {
                positive(factor)
                    && positive(low_freq_factor)
                    && high_freq_factor.is_finite()
                    && high_freq_factor > low_freq_factor
                    && original_max_position > 0
            }
        };
        match ok {
            true => Ok(()),
            false => Err(Error::field(
                field(i, "scaling"),
                "factors must be finite and > 0, high_freq_factor > low_freq_factor, original_max_position > 0",
            )),
        }
    }
}

fn default_base() -> f64 {
    10000.0
}

impl Default for Rope {
    fn default() -> Self {
        Rope { base: default_base(), rotary_dim: None, scaling: None }
    }
}

impl Rope {
    /// The per-pair inverse frequencies of a head of width `head_dim` (0 past `rotary_dim`).
    pub fn inv_freqs(&self, head_dim: usize) -> Vec<f64> {
        rope_inv_freqs(head_dim, self.base, self.rotary_dim.unwrap_or(head_dim), self.scaling.as_ref())
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
        if let Some(r) = self.rotary_dim {
            if r == 0 || r % 2 != 0 || r > cfg.head_dim {
                return Err(Error::field(
                    field(i, "rotary_dim"),
                    format!("{r} must be even, > 0 and <= head_dim {}", cfg.head_dim),
                ));
            }
        }
        if let Some(s) = &self.scaling {
            s.validate(i)?;
        }
        Ok(())
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        Ok(ctx.softmax(Bias::None, Some(self.inv_freqs(ctx.cfg.head_dim))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Llama 3.1's published rescaling (factor 8, low 1, high 4, original 8192): the highest frequency
    /// is kept, the lowest divided by 8, and the band between is continuous at both edges.
    #[test]
    fn llama3_scaling_keeps_high_and_divides_low_frequencies() {
        let s = RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position: 8192,
        };
        assert_eq!(s.apply(1.0), 1.0);
        assert_eq!(s.apply(1e-6), 1e-6 / 8.0);
        let two_pi = 2.0 * std::f64::consts::PI;
        for edge in [8192.0 / 4.0, 8192.0] {
            let (below, above) = (two_pi / (edge * (1.0 - 1e-9)), two_pi / (edge * (1.0 + 1e-9)));
            let rel = (s.apply(below) / below - s.apply(above) / above).abs();
            assert!(rel < 1e-6, "discontinuous at wavelength {edge}: {rel}");
        }
        assert_eq!(RopeScaling::Linear { factor: 4.0 }.apply(2.0), 0.5);
    }
}
