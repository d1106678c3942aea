//! Import of Hugging Face checkpoints: `config.json` with `architectures`, `model.safetensors` or a
//! sharded `model.safetensors.index.json`, F32/F16/BF16 (docs/model-format.md §7).
//!
//! [`import`] maps one of the supported architectures ([`SUPPORTED`]) onto an attnlab config and
//! weight set, exactly: fused QKV layouts are split, GPT-2's `Conv1D` weights transposed, and the
//! rows of q and k permuted from Hugging Face's rotate-half RoPE layout to the adjacent pairs of
//! `rotary.rs`. Every option that would change the math and is not implemented is refused by name
//! ([`Error::Unsupported`]); every tensor is accounted for (missing, unexpected and misshapen tensors
//! are errors naming the shard file and the tensor). The result is then validated like any model.

mod arch;

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::variants::rope::{Rope, RopeScaling};
use crate::weights::{StorageDtype, TensorData, Weights};
use safetensors::Dtype;
use serde_json::Value;
use std::collections::BTreeMap;

/// The `architectures` the importer maps, by their Hugging Face class names.
pub const SUPPORTED: &[&str] =
    &["LlamaForCausalLM", "GPTNeoXForCausalLM", "BloomForCausalLM", "GPT2LMHeadModel", "GLAForCausalLM"];

/// The index file of a sharded checkpoint.
pub const INDEX_FILE: &str = "model.safetensors.index.json";
/// The single-file checkpoint.
pub const SINGLE_FILE: &str = "model.safetensors";

/// Choices the checkpoint does not make.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportOptions {
    /// Longest context to accept where the architecture has no position limit (ALiBi); otherwise
    /// capped at the checkpoint's own `max_position_embeddings` / `n_positions`. Default 8192.
    pub max_context: Option<usize>,
}

/// A converted checkpoint.
#[derive(Debug, Clone)]
pub struct Imported {
    pub config: ModelConfig,
    pub weights: Weights,
    /// The widest dtype the checkpoint stores (write the model back in it to keep F16/BF16).
    pub dtype: StorageDtype,
    /// The Hugging Face class that was mapped.
    pub architecture: String,
}

/// Whether `config.json` text is a Hugging Face config rather than an attnlab one (it has
/// `architectures` or `model_type` and no `format_version`).
pub fn is_hf_config(config_json: &str) -> bool {
    serde_json::from_str::<Value>(config_json).is_ok_and(|v| {
        v.get("format_version").is_none()
            && (v.get("architectures").is_some() || v.get("model_type").is_some())
    })
}

/// The safetensors files holding the weights: the shards named by the index (in order, once each),
/// or [`SINGLE_FILE`] when there is no index.
pub fn shard_files(index_json: Option<&str>) -> Result<Vec<String>> {
    let Some(text) = index_json else { return Ok(vec![SINGLE_FILE.to_string()]) };
    let map = weight_map(text)?;
    let mut files: Vec<String> = Vec::new();
    for f in map.values() {
        if !files.contains(f) {
            files.push(f.clone());
        }
    }
    Ok(files)
}

/// `weight_map` of an index: tensor name → shard file name (a plain file name, no path).
fn weight_map(text: &str) -> Result<BTreeMap<String, String>> {
    let bad = |r: String| Error::import(INDEX_FILE, r);
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    let map =
        v.get("weight_map").and_then(Value::as_object).ok_or_else(|| bad("no `weight_map` object".into()))?;
    let mut out = BTreeMap::new();
    for (tensor, file) in map {
        let file = file.as_str().ok_or_else(|| bad(format!("weight_map[`{tensor}`] is not a string")))?;
        if file.is_empty()
            || file.contains(['/', '\\'])
            || file.starts_with('.')
            || !file.ends_with(".safetensors")
        {
            return Err(bad(format!("weight_map[`{tensor}`] = `{file}` is not a .safetensors file name")));
        }
        out.insert(tensor.clone(), file.to_string());
    }
    if out.is_empty() {
        return Err(bad("`weight_map` is empty".into()));
    }
    Ok(out)
}

/// Convert a checkpoint: its `config.json`, its index (if sharded) and every shard as `(file name,
/// bytes)`, in any order. The shards are consumed: each tensor is converted from their bytes and
/// they are freed when the conversion ends.
pub fn import(
    config_json: &str,
    index_json: Option<&str>,
    shards: Vec<(String, Vec<u8>)>,
    opts: ImportOptions,
) -> Result<Imported> {
    let cfg = HfConfig::parse(config_json)?;
    let mut store = TensorStore::read(shards)?;
    if let Some(index) = index_json {
        store.check_index(&weight_map(index)?)?;
    }
    let architecture = cfg.architecture()?;
    let (config, tensors) = arch::convert(&architecture, &cfg, &mut store, opts)?;
    store.check_all_used()?;
    let dtype = store.widest;
    drop(store);
    let mut weights = Weights { tensors };
    // Validated like a loaded model, without building one (the caller does, once).
    config.validate()?;
    let specs = crate::model::tensor_specs(&config);
    weights.check(&specs)?;
    weights.widen_non_matrices(&specs);
    Ok(Imported { config, weights, dtype, architecture })
}

/// The class a Hugging Face `config.json` names (`architectures[0]`), refused by name unless it is
/// in [`SUPPORTED`]: the check to make before reading any shard.
pub fn architecture(config_json: &str) -> Result<String> {
    HfConfig::parse(config_json)?.architecture()
}

/// Typed access to a Hugging Face `config.json`; errors name the field (with its path, e.g.
/// `rope_parameters.factor`, inside a nested object).
pub(crate) struct HfConfig {
    v: Value,
    /// `""` at the top level, `"rope_parameters."` or `"rope_scaling."` inside those objects.
    prefix: String,
}

impl HfConfig {
    fn parse(text: &str) -> Result<HfConfig> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::import("config.json", format!("not valid JSON: {e}")))?;
        if !v.is_object() {
            return Err(Error::import("config.json", "not a JSON object"));
        }
        Ok(HfConfig { v, prefix: String::new() })
    }

    /// The path of `key` in `config.json`.
    fn at(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// The path of the first of `keys` present (aliases across versions), else of the first.
    pub(crate) fn key_of(&self, keys: &[&str]) -> String {
        let present = keys.iter().find(|k| self.v.get(**k).is_some_and(|v| !v.is_null()));
        present.or(keys.first()).map_or_else(String::new, |k| self.at(k))
    }

    fn err(key: &str, reason: impl std::fmt::Display) -> Error {
        Error::import("config.json", format!("field `{key}`: {reason}"))
    }

    /// The mapped class: `architectures[0]`, refused by name unless it is in [`SUPPORTED`].
    fn architecture(&self) -> Result<String> {
        let arch = match self.v.get("architectures").and_then(Value::as_array).and_then(|a| a.first()) {
            Some(Value::String(s)) => s.clone(),
            _ => {
                return Err(Self::err(
                    "architectures",
                    "missing; it names the model class, e.g. LlamaForCausalLM",
                ))
            }
        };
        match SUPPORTED.contains(&arch.as_str()) {
            true => Ok(arch),
            false => Err(Error::Unsupported(format!(
                "{arch} is not supported (supported: {})",
                SUPPORTED.join(", ")
            ))),
        }
    }

    /// The first of `keys` present (aliases across versions), as a positive integer.
    pub(crate) fn usize(&self, keys: &[&str]) -> Result<usize> {
        self.opt_usize(keys)?.ok_or_else(|| Self::err(&self.at(keys[0]), "missing"))
    }

    pub(crate) fn opt_usize(&self, keys: &[&str]) -> Result<Option<usize>> {
        match keys.iter().find_map(|k| self.v.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v))) {
            None => Ok(None),
            Some((k, v)) => match v.as_u64() {
                Some(n) if n > 0 => {
                    usize::try_from(n).map(Some).map_err(|_| Self::err(&self.at(k), "too large"))
                }
                _ => Err(Self::err(&self.at(k), format!("{v} is not a positive integer"))),
            },
        }
    }

    pub(crate) fn f64_or(&self, keys: &[&str], default: f64) -> Result<f64> {
        match keys.iter().find_map(|k| self.v.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v))) {
            None => Ok(default),
            Some((k, v)) => v
                .as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| Self::err(&self.at(k), format!("{v} is not a number"))),
        }
    }

    /// A norm eps (or another strictly positive number) under `key`, else `default`.
    pub(crate) fn eps_or(&self, key: &str, default: f64) -> Result<f64> {
        positive(&self.at(key), self.f64_or(&[key], default)?)
    }

    pub(crate) fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => {
                v.as_bool().ok_or_else(|| Self::err(&self.at(key), format!("{v} is not true or false")))
            }
        }
    }

    pub(crate) fn str_or(&self, key: &str, default: &str) -> Result<String> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(default.to_string()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(Self::err(&self.at(key), format!("{v} is not a string"))),
        }
    }

    /// Refuse a boolean option whose non-default value changes the math and is not implemented.
    pub(crate) fn refuse_if(&self, key: &str, refused: bool, arch: &str) -> Result<()> {
        match self.bool_or(key, !refused)? == refused {
            true => Err(Error::Unsupported(format!("{key} = {refused} is not supported for {arch}"))),
            false => Ok(()),
        }
    }

    /// Refuse an option that changes the math unless it is absent or null (`what` says what it is).
    pub(crate) fn refuse_set(&self, key: &str, what: &str, arch: &str) -> Result<()> {
        match self.v.get(key) {
            None | Some(Value::Null) => Ok(()),
            Some(v) => Err(Error::Unsupported(format!("{key} = {v} ({what}) is not supported for {arch}"))),
        }
    }

    /// RoPE settings of a head of width `head_dim`, from transformers 5's `rope_parameters` or the
    /// older `rope_theta` / `rotary_emb_base`, `rope_scaling`, `rotary_pct` / `partial_rotary_factor`.
    pub(crate) fn rope(&self, head_dim: usize) -> Result<Rope> {
        let params = self.v.get("rope_parameters").filter(|p| p.is_object());
        let sub =
            |p: Option<&Value>, key: &str| p.map(|p| HfConfig { v: p.clone(), prefix: format!("{key}.") });
        let rp = sub(params, "rope_parameters");
        let scaling = sub(self.v.get("rope_scaling").filter(|p| p.is_object()), "rope_scaling");
        // The object a setting is read from: `rope_parameters` where it has one of `keys`.
        let holder = |keys: &[&str]| match &rp {
            Some(p) if keys.iter().any(|k| p.v.get(*k).is_some()) => p,
            _ => self,
        };
        let (base_keys, fraction_keys) =
            (["rope_theta", "rotary_emb_base"], ["partial_rotary_factor", "rotary_pct"]);
        let base = holder(&base_keys).f64_or(&base_keys, 10000.0)?;
        let fraction = holder(&fraction_keys).f64_or(&fraction_keys, 1.0)?;
        let rotary_dim = (head_dim as f64 * fraction) as usize;
        if !(fraction > 0.0 && fraction <= 1.0) || rotary_dim == 0 || !rotary_dim.is_multiple_of(2) {
            return Err(Self::err(
                &holder(&fraction_keys).key_of(&fraction_keys),
                format!("{fraction} of head_dim {head_dim} is not an even number of channels"),
            ));
        }
        let scaling = match rp.as_ref().or(scaling.as_ref()) {
            Some(s) => s.rope_scaling()?,
            None => None,
        };
        Ok(Rope { base, rotary_dim: (rotary_dim < head_dim).then_some(rotary_dim), scaling })
    }

    fn rope_scaling(&self) -> Result<Option<RopeScaling>> {
        let kind = match self.v.get("rope_type").or_else(|| self.v.get("type")) {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => "default".into(),
            Some(v) => {
                return Err(Self::err(&self.key_of(&["rope_type", "type"]), format!("{v} is not a string")))
            }
        };
        let factor = || self.f64_or(&["factor"], f64::NAN).and_then(|f| positive(&self.at("factor"), f));
        match kind.as_str() {
            "default" => Ok(None),
            "linear" => Ok(Some(RopeScaling::Linear { factor: factor()? })),
            "llama3" => Ok(Some(RopeScaling::Llama3 {
                factor: factor()?,
                low_freq_factor: self.f64_or(&["low_freq_factor"], 1.0)?,
                high_freq_factor: self.f64_or(&["high_freq_factor"], 4.0)?,
                original_max_position: self.usize(&["original_max_position_embeddings"])?,
            })),
            other => Err(Error::Unsupported(format!(
                "rope_scaling type {other} is not supported (supported: default, linear, llama3)"
            ))),
        }
    }
}

fn positive(key: &str, v: f64) -> Result<f64> {
    match v.is_finite() && v > 0.0 {
        true => Ok(v),
        false => Err(HfConfig::err(key, "missing or not a positive number")),
    }
}

/// Every tensor of every shard, still as the shard's bytes: a tensor is widened to f32 when the
/// converter takes it, and [`TensorStore::stored`] narrows its converted form back to the
/// checkpoint's dtype, so an F16 checkpoint never exists as f32 all at once.
pub(crate) struct TensorStore {
    shards: Vec<(String, Vec<u8>)>,
    tensors: BTreeMap<String, Stored>,
    widest: StorageDtype,
    /// Where a missing tensor should have been: the index, else the shard file(s).
    listing: String,
}

/// Where a tensor's bytes are: shard, dtype, shape and byte range in the shard.
struct Stored {
    shard: usize,
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: std::ops::Range<usize>,
}

/// Buffers some checkpoints carry that are not parameters (recomputed by every runtime).
const IGNORED_BUFFERS: &[&str] =
    &[".rotary_emb.inv_freq", ".attn.bias", ".attn.masked_bias", ".attention.bias", ".attention.masked_bias"];

/// Whether checkpoint tensor `name` is a buffer the importer ignores (not a parameter).
pub fn is_ignored_buffer(name: &str) -> bool {
    IGNORED_BUFFERS.iter().any(|b| name.ends_with(b))
}

/// The dtype an imported model keeps its matrices in, from the dtypes its checkpoint stores: that
/// dtype if there is one (BF16 when none), f32 when F32 or both half formats occur.
pub fn widest(dtypes: &[StorageDtype]) -> StorageDtype {
    match () {
        _ if dtypes.contains(&StorageDtype::F32) => StorageDtype::F32,
        _ if dtypes.contains(&StorageDtype::F16) && dtypes.contains(&StorageDtype::Bf16) => StorageDtype::F32,
        _ if dtypes.contains(&StorageDtype::F16) => StorageDtype::F16,
        _ => StorageDtype::Bf16,
    }
}

/// Whether checkpoint tensor `name` of rank `rank` becomes one of the model's matrices, held in the
/// [`widest`] dtype once imported: every 2-D tensor of the supported architectures but GPT-2's
/// position table `wpe` (the other tensors are held as f32). What the page's memory estimate uses.
pub fn is_matrix(name: &str, rank: usize) -> bool {
    rank == 2 && !name.ends_with("wpe.weight")
}

impl TensorStore {
    fn read(shards: Vec<(String, Vec<u8>)>) -> Result<TensorStore> {
        let listing = shards.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>().join(", ");
        let mut tensors = BTreeMap::new();
        let mut seen = Vec::new();
        for (shard, (file, bytes)) in shards.iter().enumerate() {
            let (header, meta) = safetensors::SafeTensors::read_metadata(bytes).map_err(|e| {
                Error::import(file, format!("not a readable safetensors file (truncated?): {e}"))
            })?;
            for (name, info) in meta.tensors() {
                if is_ignored_buffer(&name) {
                    continue;
                }
                let dtype = StorageDtype::of(info.dtype).ok_or_else(|| {
                    Error::import(
                        file,
                        format!("tensor `{name}` has dtype {:?}, expected F32, F16 or BF16", info.dtype),
                    )
                })?;
                seen.push(dtype);
                let (start, end) = info.data_offsets;
                let range = 8 + header + start..8 + header + end;
                let raw = bytes.get(range.clone()).ok_or_else(|| {
                    Error::import(file, format!("tensor `{name}` lies outside the file (truncated?)"))
                })?;
                if let Some(i) = first_non_finite(dtype, raw) {
                    return Err(Error::import(
                        file,
                        format!("tensor `{name}` has a non-finite value at flat index {i}"),
                    ));
                }
                let t = Stored { shard, dtype: info.dtype, shape: info.shape.clone(), bytes: range };
                if let Some(first) = tensors.insert(name.clone(), t) {
                    return Err(Error::import(
                        file,
                        format!(
                            "tensor `{name}` appears in more than one shard (also in {})",
                            shards[first.shard].0
                        ),
                    ));
                }
            }
        }
        Ok(TensorStore { shards, tensors, widest: widest(&seen), listing })
    }

    /// The file a stored tensor came from.
    fn file(&self, t: &Stored) -> &str {
        self.shards.get(t.shard).map_or("", |(f, _)| f.as_str())
    }

    /// Every tensor the index names is in the shard it names.
    fn check_index(&mut self, map: &BTreeMap<String, String>) -> Result<()> {
        self.listing = INDEX_FILE.to_string();
        for (name, file) in map {
            match self.tensors.get(name).map(|t| self.file(t)) {
                Some(f) if f == file => {}
                Some(f) => {
                    return Err(Error::import(
                        INDEX_FILE,
                        format!("tensor `{name}` is in {f}, the index says {file}"),
                    ))
                }
                None if is_ignored_buffer(name) => {}
                None => {
                    return Err(Error::import(file, format!("tensor `{name}` named by the index is missing")))
                }
            }
        }
        Ok(())
    }

    /// Take tensor `name`, checking its shape, widened to f32.
    pub(crate) fn take(&mut self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let t = self
            .tensors
            .remove(name)
            .ok_or_else(|| Error::import(&self.listing, format!("missing tensor `{name}`")))?;
        let file = self.file(&t);
        if t.shape != shape {
            return Err(Error::import(
                file,
                format!("tensor `{name}` has shape {:?}, config.json implies {shape:?}", t.shape),
            ));
        }
        let raw = self.shards.get(t.shard).and_then(|(_, b)| b.get(t.bytes.clone())).unwrap_or_default();
        let data = TensorData::from_le_bytes(t.dtype, raw).map(|d| d.to_f32().into_owned());
        match data {
            Some(v) if v.len() == shape.iter().product::<usize>() => Ok(v),
            _ => Err(Error::import(
                file,
                format!("tensor `{name}` holds {} bytes, which do not fit its shape", raw.len()),
            )),
        }
    }

    /// Converted values as the model keeps them: in the checkpoint's dtype (exactly, since they were
    /// read from it and only moved about), or f32 for mixed or F32 checkpoints.
    pub(crate) fn stored(&self, values: Vec<f32>) -> TensorData {
        TensorData::lossless(values, self.widest)
    }

    /// Whether tensor `name` exists (optional heads and biases).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    fn check_all_used(&self) -> Result<()> {
        match self.tensors.iter().next() {
            Some((name, t)) => Err(Error::import(
                self.file(t),
                format!("unexpected tensor `{name}` (not used by this architecture and config)"),
            )),
            None => Ok(()),
        }
    }
}

/// [`import`] of a checkpoint folder on disk (native only): `config.json`, the index if present,
/// and the shards it names (or `model.safetensors`).
#[cfg(not(target_arch = "wasm32"))]
pub fn import_dir(dir: &std::path::Path, opts: ImportOptions) -> Result<Imported> {
    let read = |name: &str| std::fs::read(dir.join(name)).map_err(|e| Error::io(dir.join(name), e));
    let text = |name: &str| String::from_utf8(read(name)?).map_err(|_| Error::import(name, "not UTF-8 text"));
    let config = text("config.json")?;
    architecture(&config)?; // refuse an unsupported class before reading shards
    let index = match dir.join(INDEX_FILE).exists() {
        true => Some(text(INDEX_FILE)?),
        false => None,
    };
    let shards = shard_files(index.as_deref())?
        .into_iter()
        .map(|f| read(&f).map(|bytes| (f, bytes)))
        .collect::<Result<Vec<_>>>()?;
    let mut imported = import(&config, index.as_deref(), shards, opts)?;
    if imported.config.name.is_empty() {
        imported.config.name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    }
    Ok(imported)
}

/// Index of the first NaN or ±inf among little-endian values of `dtype`.
fn first_non_finite(dtype: StorageDtype, raw: &[u8]) -> Option<usize> {
    match dtype {
        StorageDtype::F32 => {
            raw.chunks_exact(4).position(|b| !f32::from_le_bytes([b[0], b[1], b[2], b[3]]).is_finite())
        }
        StorageDtype::F16 => {
            raw.chunks_exact(2).position(|b| !half::f16::from_le_bytes([b[0], b[1]]).is_finite())
        }
        StorageDtype::Bf16 => {
            raw.chunks_exact(2).position(|b| !half::bf16::from_le_bytes([b[0], b[1]]).is_finite())
        }
    }
}
