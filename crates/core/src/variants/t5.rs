//! `t5`: learned relative-position buckets (Raffel et al., "Exploring the Limits of Transfer
//! Learning with a Unified Text-to-Text Transformer", §2.1): `B_h(d) = W[bucket(d), h]·sqrt(d_head)`
//! with the causal log-spaced buckets of [`crate::bias::t5_bucket`] (the GPT-NeoX form the MEP paper
//! compares against, Gao, "MEP", Experiments). One table shared by every t5 layer.

use super::{field, AttentionSpec, Family, LowerCtx, Variant};
use crate::bias;
use crate::config::{ModelConfig, SizePreset};
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

    /// New models bucket up to a quarter of the training length (at least `num_buckets/2 + 1`, which
    /// validation needs): T5 uses 32 buckets "up to an offset of 128" (Raffel et al. §2.1) at input
    /// length 512 (§3.1.2), and the MEP paper's T5 baseline is GPT-NeoX's
    /// `ParallelRelativePositionBias` at its defaults (32 buckets, max_distance 128) trained at length
    /// 512 (Gao, "MEP", Implementation; Table 6). An absent key in a file still means 128.
    fn preset_layer(&self, _i: usize, size: &SizePreset) -> Option<AttentionSpec> {
        let max_distance = (size.train_context / 4).max(self.num_buckets / 2 + 1);
        Some(AttentionSpec::T5(T5 { max_distance, ..self.clone() }))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn preset_t5(train_context: usize) -> T5 {
        let size = SizePreset { train_context, ..SizePreset::default() };
        match &ModelConfig::preset("t5", size).unwrap().layers[0] {
            AttentionSpec::T5(t) => t.clone(),
            other => panic!("t5 expected, got {}", other.variant_id()),
        }
    }

    /// Presets bucket to train_context / 4 (the 128-of-512 ratio of T5 and MEP's NeoX baseline),
    /// kept valid at short lengths; a file without the key keeps the old absolute 128.
    #[test]
    fn preset_max_distance_is_a_quarter_of_the_training_length() {
        assert_eq!(preset_t5(128).max_distance, 32);
        assert_eq!(preset_t5(512).max_distance, 128);
        assert_eq!(preset_t5(32).max_distance, 17);
        let cfg = ModelConfig::preset("t5", SizePreset::default()).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&cfg.to_json()).unwrap();
        for l in v["layers"].as_array_mut().unwrap() {
            l.as_object_mut().unwrap().remove("max_distance");
        }
        let old = ModelConfig::from_json(&v.to_string()).unwrap();
        assert!(old.layers.iter().all(|l| matches!(l, AttentionSpec::T5(t) if t.max_distance == 128)));
    }
}
