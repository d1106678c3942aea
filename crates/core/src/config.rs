//! `config.json`: the model definition shared by the trainer, the CPU reference and the GPU backend.
//!
//! The schema is documented field by field in docs/model-format.md. Parsing is strict (unknown fields
//! are rejected) and [`ModelConfig::validate`] checks every cross-field constraint, naming the field
//! at fault in the error.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The per-layer spec and the catalog live in [`crate::variants`]; re-exported here because they are
/// part of `config.json`.
pub use crate::variants::{AttentionSpec, Family, VARIANT_IDS};

/// Format version written by this crate. Version 2 added the architecture options of imported
/// checkpoints (`n_kv_heads`, `qk_head_dim`, `biases`, `parallel_residual`, `embedding_norm`,
/// learned absolute positions, exact GELU, partial and rescaled RoPE); version 1 files are read as
/// they are.
pub const FORMAT_VERSION: u32 = 2;
/// Oldest format version this build reads.
pub const MIN_FORMAT_VERSION: u32 = 1;

/// Whole-model configuration (`config.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Must equal [`FORMAT_VERSION`].
    pub format_version: u32,
    /// Human-readable model id, e.g. `alibi-1m`.
    #[serde(default)]
    pub name: String,
    /// One-line description shown by pickers.
    #[serde(default)]
    pub description: String,
    pub vocab_size: usize,
    pub d_model: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    /// Key/value heads (grouped-query attention; 1 is multi-query; Ainslie et al., "GQA", §2): query
    /// head h reads key/value head h / (n_heads / n_kv_heads). Absent: n_heads. (v2)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_kv_heads: Option<usize>,
    /// Width of one value head (and of one query/key head unless `qk_head_dim` says otherwise).
    pub head_dim: usize,
    /// Width of one query/key head when it differs from `head_dim`: fla's GLA keeps keys half as
    /// wide as values (`expand_k = 0.5`, `expand_v = 1`). Only variants whose kernels take a free
    /// key width accept it ([`crate::variants::Variant::free_key_width`]). Absent: head_dim. (v2)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_head_dim: Option<usize>,
    pub ffn: FfnConfig,
    pub norm: NormConfig,
    /// Output projection shares the token embedding matrix.
    pub tie_embeddings: bool,
    /// Sequence length the model was trained at (marks plots; FIRE's default threshold).
    pub train_context: usize,
    /// Longest context the runtime accepts; longer inputs are an error.
    pub max_context: usize,
    /// Absolute position embedding added to the token embeddings.
    #[serde(default)]
    pub absolute_position: AbsolutePosition,
    /// Which linear projections carry a bias (v2).
    #[serde(default, skip_serializing_if = "Biases::is_none")]
    pub biases: Biases,
    /// GPT-NeoX's parallel residual, `x + attn(norm₁(x)) + ffn(norm₂(x))`, instead of the sequential
    /// `x' = x + attn(norm₁(x)); x' + ffn(norm₂(x'))` (v2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parallel_residual: bool,
    /// A norm of the residual kind right after the embeddings (BLOOM's `word_embeddings_layernorm`),
    /// tensors `emb_norm.*` (v2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub embedding_norm: bool,
    /// Multiply the token embedding rows by √d_model before the absolute positions are added
    /// (Vaswani et al., "Attention Is All You Need", §3.4: "we multiply those weights by √d_model";
    /// fairseq's `embed_scale`). The tied output head reads the unscaled table. Absent: off, as in
    /// every file written before the option and every imported checkpoint (v2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub scale_embeddings: bool,
    /// One attention spec per layer (hybrids mix families freely).
    pub layers: Vec<AttentionSpec>,
}

/// Feed-forward block.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FfnConfig {
    pub kind: FfnKind,
    pub hidden: usize,
}

/// Feed-forward kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FfnKind {
    /// `w_down · (silu(w_gate·x) ⊙ (w_up·x))` (TransNormer's GLU with swish).
    Swiglu,
    /// `w_down · gelu(w_up·x)`, tanh approximation (GPT-2's `gelu_new`, BLOOM).
    Gelu,
    /// `w_down · gelu(w_up·x)`, exact erf form (GPT-NeoX / Pythia's `gelu`) (v2).
    #[serde(rename = "gelu-exact")]
    GeluExact,
}

/// Biases of the linear projections (all absent by default, as in Llama).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Biases {
    /// `layers.i.attn.{bq,bk,bv}` on the q, k, v projections.
    #[serde(default)]
    pub qkv: bool,
    /// `layers.i.attn.bo` on the attention output projection.
    #[serde(default)]
    pub attn_out: bool,
    /// `layers.i.ffn.{b_gate,b_up,b_down}` on the feed-forward projections.
    #[serde(default)]
    pub ffn: bool,
}

impl Biases {
    /// No projection has a bias.
    pub fn is_none(&self) -> bool {
        *self == Biases::default()
    }
}

/// Residual-stream normalization (pre-norm).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NormConfig {
    pub kind: NormKind,
    pub eps: f64,
}

/// Norm kind of the residual stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NormKind {
    /// `x / sqrt(mean(x²) + eps) ⊙ weight`.
    Rmsnorm,
    /// `(x − mean) / sqrt(var + eps) ⊙ weight + bias`.
    Layernorm,
}

/// Absolute position embedding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AbsolutePosition {
    #[default]
    None,
    /// Fixed sinusoidal table (Vaswani et al.), f64 on the CPU.
    Sinusoidal,
    /// Learned table `pos_emb.weight [max_context, d_model]` (GPT-2's `wpe`) (v2).
    Learned,
}

/// Size preset used by `attnlab init` (about 1.1M parameters at the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizePreset {
    pub vocab_size: usize,
    pub d_model: usize,
    pub n_layers: usize,
    pub n_heads: usize,
    pub head_dim: usize,
    pub ffn_hidden: usize,
    pub train_context: usize,
    pub max_context: usize,
}

impl Default for SizePreset {
    fn default() -> Self {
        SizePreset {
            vocab_size: 2048,
            d_model: 128,
            n_layers: 4,
            n_heads: 4,
            head_dim: 32,
            ffn_hidden: 384,
            train_context: 128,
            max_context: 8192,
        }
    }
}

impl SizePreset {
    /// Two layers of two 16-wide heads, d_model 32, FFN 64, trained at 32 tokens, over
    /// `vocab_size` ids: a model the tests train in a fraction of a second.
    pub fn tiny(vocab_size: usize) -> SizePreset {
        SizePreset {
            vocab_size,
            d_model: 32,
            n_layers: 2,
            n_heads: 2,
            head_dim: 16,
            ffn_hidden: 64,
            train_context: 32,
            max_context: 256,
        }
    }
}

impl ModelConfig {
    /// A whole-model config for one catalog variant, every layer that variant's preset spec
    /// ([`crate::variants::Variant::preset_layer`]); the `sinusoidal` preset scales the token
    /// embeddings by √d_model.
    pub fn preset(variant: &str, size: SizePreset) -> Result<ModelConfig> {
        let base = AttentionSpec::default_for(variant)?;
        let layers = (0..size.n_layers)
            .map(|i| base.variant().preset_layer(i, &size).unwrap_or_else(|| base.clone()))
            .collect();
        let cfg = ModelConfig {
            format_version: FORMAT_VERSION,
            name: format!("{variant}-random"),
            description: format!("random-weight {variant} model from `attnlab init`"),
            vocab_size: size.vocab_size,
            d_model: size.d_model,
            n_layers: size.n_layers,
            n_heads: size.n_heads,
            n_kv_heads: None,
            qk_head_dim: None,
            head_dim: size.head_dim,
            ffn: FfnConfig { kind: FfnKind::Swiglu, hidden: size.ffn_hidden },
            norm: NormConfig { kind: NormKind::Rmsnorm, eps: 1e-5 },
            tie_embeddings: true,
            train_context: size.train_context,
            max_context: size.max_context,
            absolute_position: if variant == "sinusoidal" {
                AbsolutePosition::Sinusoidal
            } else {
                AbsolutePosition::None
            },
            biases: Biases::default(),
            parallel_residual: false,
            embedding_norm: false,
            // Without the scale a 1/√d-initialised token row (energy ≈ 1) is swamped by the
            // sinusoidal table (energy d/2); see `embedding_scale`.
            scale_embeddings: variant == "sinusoidal",
            layers,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Parse and validate `config.json` text. Layer errors name the layer (`layers[i].field`).
    pub fn from_json(text: &str) -> Result<ModelConfig> {
        let mut value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| Error::ConfigParse(e.to_string()))?;
        let layers = match value.get_mut("layers").map(serde_json::Value::take) {
            Some(serde_json::Value::Array(layers)) => layers,
            Some(other) => return Err(Error::ConfigParse(format!("layers: expected an array, got {other}"))),
            None => return Err(Error::ConfigParse("missing field `layers`".into())),
        };
        let specs =
            layers.into_iter().enumerate().map(|(i, l)| parse_layer(i, l)).collect::<Result<Vec<_>>>()?;
        value["layers"] = serde_json::Value::Array(Vec::new());
        let mut cfg: ModelConfig =
            serde_json::from_value(value).map_err(|e| Error::ConfigParse(e.to_string()))?;
        cfg.layers = specs;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Pretty JSON for writing `config.json`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| String::from("{}"))
    }

    /// Width of the concatenated heads, `n_heads · head_dim`.
    pub fn attn_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Key/value heads (`n_kv_heads`, else `n_heads`).
    pub fn kv_heads(&self) -> usize {
        self.n_kv_heads.unwrap_or(self.n_heads)
    }

    /// Width of the value projection, `kv_heads · head_dim`.
    pub fn kv_dim(&self) -> usize {
        self.kv_heads() * self.head_dim
    }

    /// Width of one query/key head (`qk_head_dim`, else `head_dim`).
    pub fn key_head_dim(&self) -> usize {
        self.qk_head_dim.unwrap_or(self.head_dim)
    }

    /// Widths of the query and key projections, `n_heads · key_head_dim` and
    /// `kv_heads · key_head_dim`.
    pub fn qk_dims(&self) -> (usize, usize) {
        (self.n_heads * self.key_head_dim(), self.kv_heads() * self.key_head_dim())
    }

    /// The factor on the token embedding rows: √d_model (rounded to f32) with `scale_embeddings`,
    /// else exactly 1.
    pub fn embedding_scale(&self) -> f32 {
        if self.scale_embeddings {
            (self.d_model as f64).sqrt() as f32
        } else {
            1.0
        }
    }

    /// The version-2 options this config uses, by field name (a version-1 file may use none).
    pub fn v2_fields(&self) -> Vec<&'static str> {
        let used = [
            ("n_kv_heads", self.n_kv_heads.is_some()),
            ("qk_head_dim", self.qk_head_dim.is_some()),
            ("biases", !self.biases.is_none()),
            ("parallel_residual", self.parallel_residual),
            ("embedding_norm", self.embedding_norm),
            ("scale_embeddings", self.scale_embeddings),
            ("absolute_position", self.absolute_position == AbsolutePosition::Learned),
            ("ffn.kind", self.ffn.kind == FfnKind::GeluExact),
            (
                "layers[].rotary_dim / scaling",
                self.layers.iter().any(
                    |l| matches!(l, AttentionSpec::Rope(r) if r.rotary_dim.is_some() || r.scaling.is_some()),
                ),
            ),
        ];
        used.into_iter().filter(|(_, u)| *u).map(|(f, _)| f).collect()
    }

    /// Check every cross-field constraint.
    pub fn validate(&self) -> Result<()> {
        self.validate_version()?;
        self.validate_sizes()?;
        if self.train_context > self.max_context {
            return Err(Error::field("train_context", "must be <= max_context"));
        }
        if !(self.norm.eps.is_finite() && self.norm.eps > 0.0) {
            return Err(Error::field("norm.eps", "must be finite and > 0"));
        }
        if self.layers.len() != self.n_layers {
            return Err(Error::field(
                "layers",
                format!("has {} entries but n_layers = {}", self.layers.len(), self.n_layers),
            ));
        }
        if self.absolute_position == AbsolutePosition::Sinusoidal && !self.d_model.is_multiple_of(2) {
            return Err(Error::field("d_model", "must be even for sinusoidal absolute positions"));
        }
        self.validate_layers()
    }

    /// The format version is readable, and a version-1 file uses no version-2 option.
    fn validate_version(&self) -> Result<()> {
        if !(MIN_FORMAT_VERSION..=FORMAT_VERSION).contains(&self.format_version) {
            return Err(Error::field(
                "format_version",
                format!(
                    "unsupported version {}, this build reads {MIN_FORMAT_VERSION} to {FORMAT_VERSION}",
                    self.format_version
                ),
            ));
        }
        if let (1, Some(f)) = (self.format_version, self.v2_fields().first()) {
            return Err(Error::field(*f, "needs format_version 2 (version 1 has no such option)"));
        }
        Ok(())
    }

    /// Every size is positive and under a generous cap, and the key/value heads divide the heads.
    fn validate_sizes(&self) -> Result<()> {
        let positive = [
            ("vocab_size", self.vocab_size),
            ("d_model", self.d_model),
            ("n_layers", self.n_layers),
            ("n_heads", self.n_heads),
            ("head_dim", self.head_dim),
            ("qk_head_dim", self.key_head_dim()),
            ("ffn.hidden", self.ffn.hidden),
            ("train_context", self.train_context),
            ("max_context", self.max_context),
        ];
        for (field, v) in positive {
            if v == 0 {
                return Err(Error::field(field, "must be > 0"));
            }
        }
        // Generous caps so that a hostile config cannot ask for absurd allocations.
        let caps = [
            ("vocab_size", self.vocab_size, 1 << 20),
            ("d_model", self.d_model, 1 << 14),
            ("n_layers", self.n_layers, 256),
            ("n_heads", self.n_heads, 256),
            ("head_dim", self.head_dim, 1024),
            ("qk_head_dim", self.key_head_dim(), 1024),
            ("ffn.hidden", self.ffn.hidden, 1 << 16),
            ("max_context", self.max_context, 1 << 20),
        ];
        for (field, v, cap) in caps {
            if v > cap {
                return Err(Error::field(field, format!("{v} exceeds the supported maximum {cap}")));
            }
        }
        if self.n_heads.saturating_mul(self.max_context) > crate::variants::MAX_BIAS_TABLE {
            return Err(Error::field(
                "max_context",
                format!(
                    "n_heads × max_context exceeds {} bias-table entries",
                    crate::variants::MAX_BIAS_TABLE
                ),
            ));
        }
        if let Some(kv) = self.n_kv_heads {
            if kv == 0 || kv > self.n_heads || !self.n_heads.is_multiple_of(kv) {
                return Err(Error::field(
                    "n_kv_heads",
                    format!("{kv} must be > 0 and divide n_heads = {}", self.n_heads),
                ));
            }
        }
        Ok(())
    }

    /// Every layer accepts the model's key width and passes its variant's own checks.
    fn validate_layers(&self) -> Result<()> {
        for (i, spec) in self.layers.iter().enumerate() {
            if self.key_head_dim() != self.head_dim && !spec.variant().free_key_width() {
                return Err(Error::field(
                    "qk_head_dim",
                    format!(
                        "{} ≠ head_dim {} is not supported by layer {i} ({}): only gla takes another key width",
                        self.key_head_dim(),
                        self.head_dim,
                        spec.variant_id()
                    ),
                ));
            }
            spec.variant().validate(self, i)?;
        }
        Ok(())
    }
}

/// One `layers[i]` entry: unknown variants and unknown or ill-typed fields are named with the layer.
fn parse_layer(i: usize, value: serde_json::Value) -> Result<AttentionSpec> {
    let variant = value.get("variant").and_then(|v| v.as_str()).unwrap_or("").to_string();
    serde_json::from_value(value).map_err(|e| {
        let msg = e.to_string();
        if msg.starts_with("unknown variant `") && !VARIANT_IDS.contains(&variant.as_str()) {
            return Error::UnknownVariant(variant.clone());
        }
        match msg.strip_prefix("unknown field `").and_then(|r| r.split('`').next()) {
            Some(key) => Error::field(
                format!("layers[{i}].{key}"),
                format!("unknown field: variant `{variant}` takes no such parameter"),
            ),
            None => Error::ConfigParse(format!("layers[{i}] ({variant}): {msg}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_valid_preset_that_round_trips() {
        for id in VARIANT_IDS {
            let cfg = ModelConfig::preset(id, SizePreset::default()).unwrap();
            assert_eq!(cfg.layers[0].variant_id(), *id);
            let back = ModelConfig::from_json(&cfg.to_json()).unwrap();
            assert_eq!(back, cfg);
        }
    }

    #[test]
    fn unknown_variant_is_named() {
        let mut v: serde_json::Value =
            serde_json::from_str(&ModelConfig::preset("alibi", SizePreset::default()).unwrap().to_json())
                .unwrap();
        v["layers"][1]["variant"] = "alibi2".into();
        let err = ModelConfig::from_json(&v.to_string()).unwrap_err();
        assert!(matches!(err, Error::UnknownVariant(ref id) if id == "alibi2"), "{err}");
    }

    #[test]
    fn parameterless_variants_reject_extra_keys() {
        let mut v: serde_json::Value =
            serde_json::from_str(&ModelConfig::preset("regla", SizePreset::default()).unwrap().to_json())
                .unwrap();
        v["layers"][3]["gate_rank"] = 16.into();
        let err = ModelConfig::from_json(&v.to_string()).unwrap_err();
        assert!(err.to_string().contains("layers[3].gate_rank"), "{err}");
    }

    #[test]
    fn inconsistent_configs_name_the_field() {
        let mut cfg = ModelConfig::preset("alibi", SizePreset::default()).unwrap();
        cfg.layers.pop();
        assert!(cfg.validate().unwrap_err().to_string().contains("`layers`"));
        let mut cfg = ModelConfig::preset("alibi", SizePreset::default()).unwrap();
        cfg.layers[2] = AttentionSpec::Alibi(crate::variants::alibi::Alibi { slopes: Some(vec![0.5]) });
        assert!(cfg.validate().unwrap_err().to_string().contains("layers[2].slopes"));
        let mut cfg = ModelConfig::preset("sinusoidal", SizePreset::default()).unwrap();
        cfg.absolute_position = AbsolutePosition::None;
        assert!(cfg.validate().unwrap_err().to_string().contains("absolute_position"));
    }

    /// Version 1 files keep their meaning: a v2 option in a v1 file is refused by name; n_kv_heads
    /// must divide n_heads.
    #[test]
    fn version_two_options_need_version_two_and_kv_heads_divide_heads() {
        let mut cfg = ModelConfig::preset("rope", SizePreset::default()).unwrap();
        assert_eq!(cfg.format_version, 2);
        cfg.parallel_residual = true;
        cfg.validate().unwrap();
        cfg.format_version = 1;
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("parallel_residual") && err.contains("format_version 2"), "{err}");
        let mut cfg = ModelConfig::preset("rope", SizePreset::default()).unwrap();
        for (kv, ok) in [(1, true), (2, true), (4, true), (3, false), (8, false)] {
            cfg.n_kv_heads = Some(kv);
            assert_eq!(cfg.validate().is_ok(), ok, "n_kv_heads {kv}");
        }
        let v1 = ModelConfig::preset("alibi", SizePreset::default())
            .unwrap()
            .to_json()
            .replace("\"format_version\": 2", "\"format_version\": 1");
        assert_eq!(ModelConfig::from_json(&v1).unwrap().format_version, 1);
    }

    /// `scale_embeddings` is written only when on, reads as off when absent (every older file and
    /// import), and is a version-2 option.
    #[test]
    fn scale_embeddings_defaults_off_and_needs_version_two() {
        let cfg = ModelConfig::preset("sinusoidal", SizePreset::default()).unwrap();
        let json = cfg.to_json();
        assert!(json.contains("\"scale_embeddings\": true"), "{json}");
        let absent = json.replace("\"scale_embeddings\": true,", "");
        let back = ModelConfig::from_json(&absent).unwrap();
        assert!(!back.scale_embeddings && back.embedding_scale() == 1.0);
        assert!(!ModelConfig::preset("rope", SizePreset::default())
            .unwrap()
            .to_json()
            .contains("scale_embeddings"));
        let v1 = json.replace("\"format_version\": 2", "\"format_version\": 1");
        let err = ModelConfig::from_json(&v1).unwrap_err().to_string();
        assert!(err.contains("scale_embeddings") && err.contains("format_version 2"), "{err}");
    }

    /// Keys narrower than values are a gla option: another variant refuses it by name.
    #[test]
    fn qk_head_dim_is_accepted_by_gla_only() {
        let mut cfg = ModelConfig::preset("gla", SizePreset::default()).unwrap();
        cfg.qk_head_dim = Some(cfg.head_dim / 2);
        cfg.validate().unwrap();
        assert_eq!(cfg.qk_dims().0, cfg.n_heads * cfg.head_dim / 2);
        cfg.layers[1] = AttentionSpec::default_for("retnet").unwrap();
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("qk_head_dim") && err.contains("layer 1 (retnet)"), "{err}");
        cfg.layers[1] = cfg.layers[0].clone();
        cfg.format_version = 1;
        assert!(cfg.validate().unwrap_err().to_string().contains("qk_head_dim"));
    }
}
