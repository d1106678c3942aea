//! `transnormer`: TransNormer (Qin et al., "The Devil in Linear Transformer", §4): DiagAttention
//! blocks (softmax restricted to non-overlapping blocks of `block_size` tokens, §4.3) in the first
//! half of the layers, NormAttention (linear attention without a denominator, then SimpleRMSNorm
//! of the output, §4.2, Eqs. 13–14) in the second. Flavour T2 uses `φ = 1 + elu` and softmax Diag
//! blocks; T1 uses `φ = elu` and ReLU Diag blocks followed by the norm (§5, opening paragraph).

use super::{field, AttentionSpec, Family, LowerCtx, Variant};
use crate::config::{ModelConfig, SizePreset};
use crate::error::{Error, Result};
use crate::lowering::{Bias, Feature, FeatureMap, LinearLowering, Lowering, Post, SoftmaxLowering, Window};
use serde::{Deserialize, Serialize};

/// TransNormer flavour (§5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransnormerFlavor {
    /// φ = elu; Diag blocks use ReLU attention followed by SimpleRMSNorm.
    T1,
    /// φ = 1 + elu; Diag blocks use softmax.
    T2,
}

/// Which TransNormer block a layer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransnormerRole {
    /// Block-diagonal attention (DiagAttention).
    Diag,
    /// Linear NormAttention.
    Norm,
}

/// TransNormer parameters of one layer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Transnormer {
    pub flavor: TransnormerFlavor,
    pub role: TransnormerRole,
    /// Diag block length (the paper's 64 is large next to a 128-token training length; 32 here).
    #[serde(default = "default_block")]
    pub block_size: usize,
}

fn default_block() -> usize {
    32
}

impl Default for Transnormer {
    fn default() -> Self {
        Transnormer {
            flavor: TransnormerFlavor::T2,
            role: TransnormerRole::Norm,
            block_size: default_block(),
        }
    }
}

impl Variant for Transnormer {
    fn family(&self) -> Family {
        Family::Linear
    }

    fn validate(&self, _cfg: &ModelConfig, i: usize) -> Result<()> {
        if self.block_size == 0 || self.block_size > 4096 {
            return Err(Error::field(field(i, "block_size"), "must be in 1..=4096"));
        }
        Ok(())
    }

    fn preset_layer(&self, i: usize, size: &SizePreset) -> Option<AttentionSpec> {
        let role = if i < size.n_layers / 2 { TransnormerRole::Diag } else { TransnormerRole::Norm };
        Some(AttentionSpec::Transnormer(Transnormer { role, ..self.clone() }))
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let t1 = self.flavor == TransnormerFlavor::T1;
        Ok(match self.role {
            TransnormerRole::Diag => Lowering::Softmax(SoftmaxLowering {
                scale: ctx.scale(),
                bias: Bias::None,
                rope: None,
                window: Window::Block(self.block_size),
                relu_with_norm: t1,
            }),
            TransnormerRole::Norm => {
                let phi = Feature::plain(if t1 { FeatureMap::Elu } else { FeatureMap::EluPlusOne });
                let mut l = LinearLowering::plain(ctx.cfg.head_dim, phi, phi);
                l.post = Post::SimpleRmsNorm;
                Lowering::Linear(l)
            }
        })
    }
}
