//! Shared fixtures of the attnlab fuzz targets and the seed generator (`examples/seed.rs`).
//!
//! Everything here is deterministic: the fixed config the safetensors target checks against, the
//! strings the tokenizer target encodes, and the budget that keeps `fuzz_config` from building
//! models too large to run thousands of times a second.

use attnlab_core::config::{ModelConfig, SizePreset};
use attnlab_core::AttentionSpec;
use std::sync::OnceLock;

/// Tiny sizes for seeds and for the fixed config of `fuzz_safetensors` (about 1k parameters).
pub fn tiny_sizes() -> SizePreset {
    SizePreset {
        vocab_size: 16,
        d_model: 8,
        n_layers: 2,
        n_heads: 2,
        head_dim: 4,
        ffn_hidden: 8,
        train_context: 8,
        max_context: 16,
    }
}

/// The fixed config `fuzz_safetensors` loads weights against: `ModelConfig::preset("alibi", tiny_sizes())`.
pub fn safetensors_config() -> &'static ModelConfig {
    static CFG: OnceLock<ModelConfig> = OnceLock::new();
    CFG.get_or_init(|| ModelConfig::preset("alibi", tiny_sizes()).expect("the alibi preset is valid"))
}

/// `config.json` text of [`safetensors_config`] (what `Model::from_bytes` is given).
pub fn safetensors_config_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| safetensors_config().to_json())
}

/// Text `fuzz_tokenizer` encodes with every tokenizer that loads: ASCII, spaces, control
/// characters, multi-byte UTF-8, the special token, digits.
pub const TOKENIZER_SAMPLE: &str =
    "Hello, world!  The cat sat.\n\t\r\nÜnïcödé 日本語 Ελληνικά 🦀\u{0}\u{200B}<|endoftext|>x 3.14 -42";

/// Upper bound on the parameters of a fuzzed config that `fuzz_config` instantiates with
/// `Model::random` and runs.
pub const MAX_MODEL_PARAMS: usize = 1 << 15;

/// Upper bound on the work of building a fuzzed config's bias tables
/// (Σ over layers of n_heads · max_context · per-entry cost).
pub const MAX_TABLE_WORK: usize = 1 << 18;

/// Rough cost of preparing `cfg` (bias tables, LRPE angles), used to skip configs that are valid
/// but too slow to instantiate on every fuzz iteration. Saturating: hostile sizes never overflow.
pub fn table_work(cfg: &ModelConfig) -> usize {
    let per_entry = |spec: &AttentionSpec| -> usize {
        match spec {
            AttentionSpec::Sandwich(s) => 1 + s.dbar.unwrap_or(cfg.head_dim) / 2,
            AttentionSpec::Mep(m) => 1 + m.kernels.len(),
            AttentionSpec::Fire(_) => 32,
            _ => 1,
        }
    };
    cfg.layers.iter().fold(0usize, |acc, spec| {
        acc.saturating_add(
            cfg.n_heads
                .saturating_mul(cfg.max_context)
                .saturating_mul(per_entry(spec))
                .saturating_add(cfg.head_dim),
        )
    })
}

/// True when `ATTNLAB_FUZZ_SKIP_KNOWN=1`: targets then skip inputs that reach bugs already
/// reported (docs/fuzzing.md, "Findings"), to fuzz past them.
pub fn skip_known() -> bool {
    static SKIP: OnceLock<bool> = OnceLock::new();
    *SKIP.get_or_init(|| std::env::var_os("ATTNLAB_FUZZ_SKIP_KNOWN").is_some_and(|v| v == "1"))
}

/// Inputs of `fuzz_tokenizer` that reach a known panic in tokenizers 0.22.2 through
/// `attnlab_core::tokenizer::Tokenizer` (docs/fuzzing.md, "Findings"; reproducers in
/// fuzz/regressions/fuzz_tokenizer/). Deliberately coarse: it may skip some harmless inputs too.
///
/// 1. `DecoderWrapper::deserialize` calls `.expect("Helper")`, so any JSON syntax error or EOF
///    inside the `"decoder"` value panics (`{"decoder":` is enough). Filter: not well-formed JSON.
/// 2. `Strip` decoder: `decode_chain` underflows `chars.len() - i - 1` when `stop` exceeds a
///    token's length. Filter: an object with both `"content"` and `"stop"` keys.
/// 3. `Precompiled` normalizer: an invalid `precompiled_charsmap` hits `.expect("Precompiled")`.
///    Filter: an object typed `Precompiled` or with a `"precompiled_charsmap"` key.
/// 4. `FixedLength` pre-tokenizer with `"length": 0`: `chunks(0)` panics on encode.
///    Filter: an object typed `FixedLength` whose `length` is 0.
pub fn known_tokenizer_bug(data: &[u8]) -> bool {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else { return true };
    let mut stack = vec![&doc];
    while let Some(v) = stack.pop() {
        match v {
            serde_json::Value::Object(map) => {
                let ty = map.get("type").and_then(|t| t.as_str());
                if (map.contains_key("content") && map.contains_key("stop"))
                    || ty == Some("Precompiled")
                    || map.contains_key("precompiled_charsmap")
                    || (ty == Some("FixedLength") && map.get("length").and_then(|l| l.as_u64()) == Some(0))
                {
                    return true;
                }
                stack.extend(map.values());
            }
            serde_json::Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    false
}

/// Separator of the three parts of a `fuzz_hf` input: `config.json` text, index text (empty: no
/// index, a single `model.safetensors`), one shard's bytes.
pub const HF_SEP: &[u8] = b"\0--8<--\0";

/// `config ++ HF_SEP ++ index ++ HF_SEP ++ shard` (what [`hf_split`] takes apart).
pub fn hf_join(config: &str, index: Option<&str>, shard: &[u8]) -> Vec<u8> {
    [config.as_bytes(), HF_SEP, index.unwrap_or("").as_bytes(), HF_SEP, shard].concat()
}

/// The parts of a `fuzz_hf` input: config and index text (invalid UTF-8 replaced, an empty index
/// is `None`) and the shard bytes. Missing separators leave the later parts empty.
pub fn hf_split(data: &[u8]) -> (String, Option<String>, &[u8]) {
    let cut = |d: &[u8]| match d.windows(HF_SEP.len()).position(|w| w == HF_SEP) {
        Some(i) => (i, i + HF_SEP.len()),
        None => (d.len(), d.len()),
    };
    let (end, rest) = cut(data);
    let config = String::from_utf8_lossy(&data[..end]).into_owned();
    let data = &data[rest..];
    let (end, rest) = cut(data);
    let index = (end > 0).then(|| String::from_utf8_lossy(&data[..end]).into_owned());
    (config, index, &data[rest..])
}
