//! `hgrn2`: HGRN2 (Qin et al., "HGRN2: Gated Linear RNNs with State Expansion", 2024, §3) as fla's
//! `layers/hgrn2.py` runs it: the key projection is the forget-gate pre-activation `f`, the forget
//! gate `g = β + (1 − β)·σ(f)` has a per-channel lower bound `β` that grows with depth (HGRN,
//! Qin et al., 2023, §3.2: `cumsoftmax` over the layers of one learned `[n_layers, H·dh]` tensor,
//! minus the first layer's row, so layer 0 has `β = 0`), the input to the state is `1 − g`
//! (state expansion: the outer product `(1 − g) vᵀ`), the query is `swish(q)` scaled by
//! `dh^(−1/2)` (fla's kernel default), and the output is RMSNorm over all heads with a gain.
//! It lowers to the gated scan with [`Gate::KeyForget`] and [`Post::RmsNorm`].

use super::{check_positive, Family, LowerCtx, Variant};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::lowering::{Feature, FeatureMap, Gate, LinearLowering, LowerBoundRow, Lowering, Post};
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// The shared tensor of learned lower-bound logits, `[n_layers, H·dh]`.
pub const LOWER_BOUNDS: &str = "pos.hgrn2.lower_bounds";

/// HGRN2 parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hgrn2 {
    /// Learned layer-wise lower bounds of the forget gate (fla `use_lower_bound`, default on).
    #[serde(default = "default_lower_bound")]
    pub lower_bound: bool,
    /// Epsilon of the output RMSNorm (fla `norm_eps`).
    #[serde(default = "default_norm_eps")]
    pub norm_eps: f64,
}

fn default_lower_bound() -> bool {
    true
}
fn default_norm_eps() -> f64 {
    1e-6
}

impl Default for Hgrn2 {
    fn default() -> Self {
        Hgrn2 { lower_bound: default_lower_bound(), norm_eps: default_norm_eps() }
    }
}

/// Row `layer` of `cumsoftmax(logits) − softmax(logits)[0]` over the layer axis of the
/// `[n_layers, width]` logits, in f64 (fla `HGRN2Model.forward`).
pub fn lower_bound_row(logits: &[f32], n_layers: usize, layer: usize) -> Vec<f32> {
    let width = logits.len() / n_layers.max(1);
    (0..width)
        .map(|c| {
            let col = |l: usize| logits[l * width + c] as f64;
            let m = (0..n_layers).map(col).fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = (0..n_layers).map(|l| (col(l) - m).exp()).sum();
            ((1..=layer).map(|l| (col(l) - m).exp()).sum::<f64>() / z) as f32
        })
        .collect()
}

impl Variant for Hgrn2 {
    fn family(&self) -> Family {
        Family::Linear
    }

    fn validate(&self, _cfg: &ModelConfig, i: usize) -> Result<()> {
        check_positive(self.norm_eps, i, "norm_eps")
    }

    fn shared_tensors(&self, cfg: &ModelConfig) -> Vec<TensorSpec> {
        if !self.lower_bound {
            return Vec::new();
        }
        vec![TensorSpec::new(LOWER_BOUNDS, &[cfg.n_layers, cfg.attn_dim()], Init::Const(0.0))]
    }

    fn layer_tensors(&self, cfg: &ModelConfig, i: usize) -> Vec<TensorSpec> {
        vec![TensorSpec::new(format!("layers.{i}.attn.hgrn2.norm"), &[cfg.attn_dim()], Init::Const(1.0))]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let (a, dh) = (ctx.cfg.attn_dim(), ctx.cfg.head_dim);
        let (lower_bound, learned) = if self.lower_bound {
            let logits = ctx.shared(LOWER_BOUNDS)?;
            if logits.len() != ctx.cfg.n_layers * a {
                return Err(Error::arg(LOWER_BOUNDS, "shape differs from [n_layers, attn_dim]"));
            }
            let row = LowerBoundRow { tensor: LOWER_BOUNDS.into(), row: ctx.layer };
            (lower_bound_row(logits, ctx.cfg.n_layers, ctx.layer), Some(row))
        } else {
            (vec![0.0; a], None)
        };
        let q = Feature { map: FeatureMap::Swish, scale: ctx.scale() };
        let mut l = LinearLowering::plain(dh, q, Feature::plain(FeatureMap::Identity));
        l.gate = Gate::KeyForget { lower_bound, learned };
        l.post = Post::RmsNorm { gain: ctx.learned("hgrn2.norm")?, eps: self.norm_eps as f32 };
        Ok(Lowering::Linear(l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activations::key_forget_log_gate;
    use crate::test_util::close;

    /// fla's zero initialisation gives β_l = l / n_layers; layer 0 always has β = 0.
    #[test]
    fn zero_logits_give_evenly_spaced_lower_bounds() {
        let logits = vec![0.0f32; 4 * 3];
        for layer in 0..4 {
            let row = lower_bound_row(&logits, 4, layer);
            assert_eq!(row.len(), 3);
            assert!(row.iter().all(|b| close(*b as f64, layer as f64 / 4.0, 1e-7)), "{row:?}");
        }
        let skewed = [5.0f32, -1.0, 0.5, 2.0];
        assert_eq!(lower_bound_row(&skewed, 4, 0), vec![0.0]);
        assert!(lower_bound_row(&skewed, 4, 3)[0] < 1.0);
    }

    /// `ln(β + (1 − β)σ(f))`: β = 0 is lnσ(f); the gate never falls below β and never exceeds 1.
    #[test]
    fn key_forget_gate_is_bounded_below_by_beta() {
        let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
        assert!(close(key_forget_log_gate(0.3, 0.0), sig(0.3).ln(), 1e-12));
        for beta in [0.1, 0.5, 0.9] {
            for f in [-40.0, -2.0, 0.0, 3.0, 40.0] {
                let g = key_forget_log_gate(f, beta).exp();
                assert!(close(g, beta + (1.0 - beta) * sig(f), 1e-12), "β {beta}, f {f}");
                assert!(g >= beta - 1e-12 && g <= 1.0);
            }
        }
    }
}
