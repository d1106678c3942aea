//! `t5`: learned relative-position buckets (Raffel et al., "Exploring the Limits of Transfer
//! Learning with a Unified Text-to-Text Transformer", §2.1): `B_h(d) = W[bucket(d), h]·sqrt(d_head)`
//! with the causal log-spaced buckets of [`crate::bias::t5_bucket`] (the GPT-NeoX form the MEP paper
//! compares against, Gao, "MEP", Experiments). One table shared by every t5 layer.

use super::{field, AttentionSpec, Family, LowerCtx, Variant};
use crate::bias;
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::lowering::{LearnedTable, Lowering};
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// Bucket shape (all t5 layers of a model share one table and must agree).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct T5 {
    #[serde(default = "default_buckets")]
    pub num_buckets: usize,
    #[serde(default = "default_max_distance")]
    pub max_distance: usize,
}

fn default_buckets() -> usize {
    32
}
fn default_max_distance() -> usize {
    128
}

impl Default for T5 {
    fn default() -> Self {
        T5 { num_buckets: default_buckets(), max_distance: default_max_distance() }
    }
}

impl Variant for T5 {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn validate(&self, cfg: &ModelConfig, i: usize) -> Result<()> {
        if self.num_buckets < 2 || self.num_buckets > 4096 {
            return Err(Error::field(field(i, "num_buckets"), "must be in 2..=4096"));
        }
        if self.max_distance <= self.num_buckets / 2 {
            return Err(Error::field(field(i, "max_distance"), "must exceed num_buckets / 2"));
        }
        let first = cfg.layers.iter().find_map(|l| match l {
            AttentionSpec::T5(t) => Some(t),
            _ => None,
        });
        if first.is_some_and(|t| t != self) {
            return Err(Error::field(
                field(i, "num_buckets"),
                "all t5 layers share one bucket table and must agree on num_buckets and max_distance",
            ));
        }
        Ok(())
    }

    fn shared_tensors(&self, cfg: &ModelConfig) -> Vec<TensorSpec> {
        let std = 1.0 / (cfg.head_dim as f32).sqrt();
        vec![TensorSpec::new("pos.t5.bucket_bias", &[self.num_buckets, cfg.n_heads], Init::Normal(std))]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let table = ctx.shared("pos.t5.bucket_bias")?;
        let (h, s) = (ctx.cfg.n_heads, (ctx.cfg.head_dim as f64).sqrt());
        let learned = LearnedTable::Buckets {
            table: "pos.t5.bucket_bias".into(),
            num_buckets: self.num_buckets,
            max_distance: self.max_distance,
            scale: s,
        };
        let f = |hh: usize, d: f64| {
            table[bias::t5_bucket(d as usize, self.num_buckets, self.max_distance) * h + hh] as f64 * s
        };
        ctx.learned_bias_table(&f, learned)
    }
}
