//! `cope`: Contextual Position Encoding (Golovneva et al., "Contextual Position Encoding: Learning
//! to Count What's Important", 2024, §3): positions are counted by the keys a query gates on,
//! `p_ij = Σ_{t=j..i} σ(q_i·k_t / √dh)`, so a position can mean "the 3rd sentence back" rather than
//! "the 40th token back"; the bias is `q_i·e[p_ij]` with the position embedding `e` (`[npos, dh]`,
//! shared by the heads, one per layer) interpolated between integer positions, and `p` clamped to
//! `npos − 1`. The bias depends on q and k, which no distance table can express: it lowers to
//! [`Bias::Contextual`].
//!
//! Decision: the reference code starts `e` at zeros (the model begins as NoPE); we start it at
//! N(0, 0.02²) so that random models, and the parity tests on them, exercise the bias.

use super::{field, Family, LowerCtx, Variant};
use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::lowering::{Bias, Lowering};
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// CoPE parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cope {
    /// Number of integer positions of `e` (`npos_max` in the reference code); contextual positions
    /// beyond `npos − 1` share its last row.
    #[serde(default = "default_npos")]
    pub npos_max: usize,
}

fn default_npos() -> usize {
    64
}

impl Default for Cope {
    fn default() -> Self {
        Cope { npos_max: default_npos() }
    }
}

/// Largest `npos_max` a config may ask for.
pub const MAX_NPOS: usize = 1 << 16;

impl Variant for Cope {
    fn family(&self) -> Family {
        Family::Softmax
    }

    fn validate(&self, _cfg: &ModelConfig, i: usize) -> Result<()> {
        if self.npos_max == 0 || self.npos_max > MAX_NPOS {
            return Err(Error::field(field(i, "npos_max"), format!("must be in 1..={MAX_NPOS}")));
        }
        Ok(())
    }

    fn layer_tensors(&self, cfg: &ModelConfig, i: usize) -> Vec<TensorSpec> {
        let shape = [self.npos_max, cfg.head_dim];
        vec![TensorSpec::new(format!("layers.{i}.attn.cope.pos_emb"), &shape, Init::Normal(0.02))]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let pos_emb = ctx.learned("cope.pos_emb")?;
        Ok(ctx.softmax(Bias::Contextual { npos: self.npos_max, pos_emb }, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SizePreset;
    use crate::model::Model;

    /// With one-hot keys and queries that gate on only some of them, the contextual position of a
    /// key counts the gated keys between it and the query, not the tokens: the bias of the logits is
    /// then that of integer positions of `e`.
    #[test]
    fn positions_count_gated_keys_not_tokens() {
        let mut cfg = ModelConfig::preset("cope", SizePreset::default()).expect("preset");
        cfg.n_layers = 1;
        cfg.layers.truncate(1);
        let model = Model::random(cfg, 3).expect("model");
        let crate::lowering::Lowering::Softmax(sl) = model.attention(0).expect("layer").lowering() else {
            panic!("cope lowers to softmax");
        };
        let Bias::Contextual { npos, pos_emb } = &sl.bias else { panic!("contextual bias") };
        let dh = pos_emb.len() / npos;
        // q·e[p] for a query; logits of ±40 make the gates 0 or 1 to f32 precision.
        let q: Vec<f32> = (0..dh).map(|c| (c as f32 * 0.7).sin()).collect();
        let mut row = vec![40.0f32, -40.0, -40.0, 40.0, -40.0, 40.0];
        let base = row.clone();
        let mut scratch = Vec::new();
        crate::attention::add_contextual_bias(&q, &mut row, *npos, pos_emb, &mut scratch);
        let e = |p: usize| -> f32 { q.iter().zip(&pos_emb[p * dh..(p + 1) * dh]).map(|(a, b)| a * b).sum() };
        // Gated keys at 0, 3, 5: positions counted back from the query are 3, 2, 2, 2, 1, 1.
        for (j, p) in [3usize, 2, 2, 2, 1, 1].iter().enumerate() {
            assert!((row[j] - base[j] - e(*p)).abs() < 1e-5, "key {j}: {} vs {}", row[j] - base[j], e(*p));
        }
    }
}
