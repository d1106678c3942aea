//! "Open model…": which local files a folder needs and whether the model fits, decided before the
//! weights are read. An attnlab folder holds `config.json` (with `format_version`),
//! `model.safetensors` and `tokenizer.json`; a Hugging Face folder holds `config.json`,
//! `model.safetensors` (or `model.safetensors.index.json` and its shards) and `tokenizer.json`.
//! Plain Rust, tested natively; reading the files is `local.rs` (wasm32 only).
use attnlab_core::weights::StorageDtype;
use attnlab_core::{hf, ModelConfig};

/// The most memory an opened model may need while it loads (the wasm heap is at most 4 GiB, and
/// the page, the previous model and the allocator need the rest).
pub const MEMORY_LIMIT: u64 = 3 << 30;
/// Largest safetensors JSON header read (the format's own limit is 100 MB).
const MAX_HEADER: u64 = 100 << 20;

pub const CONFIG: &str = "config.json";
pub const TOKENIZER: &str = "tokenizer.json";

/// What config.json says the folder is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Attnlab,
    /// A Hugging Face checkpoint of a supported class (`architectures[0]`).
    HuggingFace(String),
}

/// Classify config.json and refuse what cannot load, before any weights are read: an unsupported
/// Hugging Face class or option is refused with the importer's own message, an attnlab config
/// that does not validate with the config's.
pub fn classify(config_json: &str) -> Result<Kind, String> {
    if !hf::is_hf_config(config_json) {
        attnlab_core::ModelConfig::from_json(config_json).map_err(|e| e.to_string())?;
        return Ok(Kind::Attnlab);
    }
    // The importer reads the config before any tensor: without shards, an error about the config
    // (or an unsupported class/option) comes first; a missing tensor means the config passed.
    let arch = hf::architecture(config_json).map_err(|e| e.to_string())?;
    match hf::import(config_json, None, Vec::new(), hf::ImportOptions::default()) {
        Err(e @ attnlab_core::Error::Unsupported(_)) => Err(e.to_string()),
        Err(attnlab_core::Error::Import { file, reason }) if file == CONFIG => {
            Err(format!("{file}: {reason}"))
        }
        _ => Ok(Kind::HuggingFace(arch)),
    }
}

/// The weight files to read: `model.safetensors`, or the shards a Hugging Face index names.
pub fn weight_files(kind: &Kind, index_json: Option<&str>) -> Result<Vec<String>, String> {
    match kind {
        Kind::Attnlab => Ok(vec![hf::SINGLE_FILE.to_string()]),
        Kind::HuggingFace(_) => hf::shard_files(index_json).map_err(|e| e.to_string()),
    }
}

/// The files of `needed` absent from `present`, as one message naming them; `None` when all are there.
pub fn missing(needed: &[String], present: &[String]) -> Option<String> {
    let absent: Vec<&str> = needed.iter().filter(|n| !present.contains(n)).map(String::as_str).collect();
    match absent.as_slice() {
        [] => None,
        [one] if *one == TOKENIZER => Some(format!(
            "{TOKENIZER} is missing from the opened files: generation needs the model's tokenizer"
        )),
        _ => Some(format!("missing from the opened files: {}", absent.join(", "))),
    }
}

/// Length of a safetensors JSON header from the file's first 8 bytes (checked against its size).
pub fn header_len(file: &str, first8: &[u8], file_size: u64) -> Result<u64, String> {
    let bytes: [u8; 8] =
        first8.try_into().map_err(|_| format!("{file}: shorter than a safetensors header"))?;
    let n = u64::from_le_bytes(bytes);
    if n == 0 || n > MAX_HEADER || n > file_size.saturating_sub(8) {
        return Err(format!("{file}: not a safetensors file (header length {n}, file {file_size} bytes)"));
    }
    Ok(n)
}

/// One tensor of a safetensors header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderTensor {
    pub name: String,
    /// `None`: a dtype the loaders refuse (the load names it).
    pub dtype: Option<StorageDtype>,
    pub numel: u64,
    pub rank: usize,
}

/// The tensors of a safetensors file, from its JSON header.
pub fn header_tensors(file: &str, header: &[u8]) -> Result<Vec<HeaderTensor>, String> {
    let bad = |why: String| format!("{file}: not a safetensors header ({why})");
    let v: serde_json::Value = serde_json::from_slice(header).map_err(|e| bad(e.to_string()))?;
    let map = v.as_object().ok_or_else(|| bad("not a JSON object".to_string()))?;
    let mut out = Vec::with_capacity(map.len());
    for (name, t) in map.iter().filter(|(n, _)| *n != "__metadata__") {
        let shape =
            t.get("shape").and_then(|s| s.as_array()).ok_or_else(|| bad(format!("`{name}` has no shape")))?;
        let mut numel: u64 = 1;
        for d in shape {
            let d = d.as_u64().ok_or_else(|| bad(format!("`{name}` has a bad dimension {d}")))?;
            numel = numel.checked_mul(d).ok_or_else(|| bad(format!("`{name}` is too large")))?;
        }
        let dtype = match t.get("dtype").and_then(|d| d.as_str()) {
            Some("F32") => Some(StorageDtype::F32),
            Some("F16") => Some(StorageDtype::F16),
            Some("BF16") => Some(StorageDtype::Bf16),
            _ => None,
        };
        out.push(HeaderTensor { name: name.clone(), dtype, numel, rank: shape.len() });
    }
    Ok(out)
}

/// What a model needs, computed from its config and its weight files' headers before any weight is
/// read, the way the core holds the weights: matrices in their file's dtype, other tensors as f32.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Need {
    pub params: u64,
    pub file_bytes: u64,
    /// Bytes of the loaded weights by the dtype they are held in (each dtype once).
    pub resident: Vec<(StorageDtype, u64)>,
    /// Bytes in use at once beyond files and weights while loading: a Hugging Face checkpoint's
    /// largest tensor widened to f32 and one rearranged f32 copy of it (an attnlab file is read
    /// into its final dtype directly).
    pub transient: u64,
}

impl Need {
    /// The need of a model of `kind` with `config_json`, from each weight file's `(size, header
    /// tensors)`.
    pub fn of(kind: &Kind, config_json: &str, files: &[(u64, Vec<HeaderTensor>)]) -> Result<Need, String> {
        let tensors = || files.iter().flat_map(|(_, t)| t);
        let mut need = Need { file_bytes: files.iter().map(|(size, _)| size).sum(), ..Need::default() };
        // What decides the dtype each tensor is held in once loaded: an attnlab file keeps the
        // matrices of its config in their own dtype, the importer every checkpoint matrix in the
        // checkpoint's widest dtype; everything else is f32, the importer's ignored buffers nothing.
        let (matrices, widest) = match kind {
            Kind::Attnlab => {
                let cfg = ModelConfig::from_json(config_json).map_err(|e| e.to_string())?;
                let specs = attnlab_core::model::tensor_specs(&cfg);
                (specs.into_iter().filter(|s| s.matrix).map(|s| s.name).collect::<Vec<_>>(), None)
            }
            Kind::HuggingFace(_) => {
                let kept = tensors().filter(|t| !hf::is_ignored_buffer(&t.name));
                (Vec::new(), Some(hf::widest(&kept.filter_map(|t| t.dtype).collect::<Vec<_>>())))
            }
        };
        for t in tensors() {
            need.params = need.params.saturating_add(t.numel);
            let held = match widest {
                None if matrices.contains(&t.name) => t.dtype,
                None => Some(StorageDtype::F32),
                Some(_) if hf::is_ignored_buffer(&t.name) => None,
                Some(w) if hf::is_matrix(&t.name, t.rank) => Some(w),
                Some(_) => Some(StorageDtype::F32),
            };
            if let Some(dtype) = held {
                let bytes = t.numel.saturating_mul(dtype.width() as u64);
                match need.resident.iter_mut().find(|(d, _)| *d == dtype) {
                    Some((_, total)) => *total = total.saturating_add(bytes),
                    None => need.resident.push((dtype, bytes)),
                }
            }
        }
        if matches!(kind, Kind::HuggingFace(_)) {
            need.transient = tensors().map(|t| t.numel).max().unwrap_or(0).saturating_mul(8);
        }
        Ok(need)
    }

    /// Bytes of the loaded weights.
    pub fn resident_bytes(&self) -> u64 {
        self.resident.iter().fold(0, |a, (_, b)| a.saturating_add(*b))
    }

    /// Memory at the peak of the load: the files read, the weights built and the transient.
    pub fn peak(&self) -> u64 {
        self.file_bytes.saturating_add(self.resident_bytes()).saturating_add(self.transient)
    }

    /// "257.3 MiB f16 + 1.1 MiB f32": the loaded weights by dtype.
    pub fn resident_text(&self) -> String {
        let parts: Vec<String> =
            self.resident.iter().map(|(d, b)| format!("{} {}", size(*b), d.name())).collect();
        parts.join(" + ")
    }

    /// Refuse, by name and with the numbers, a model that would not fit [`MEMORY_LIMIT`].
    pub fn check(&self, name: &str) -> Result<(), String> {
        if self.peak() <= MEMORY_LIMIT {
            return Ok(());
        }
        Err(format!(
            "{name} does not fit the page's memory: {} parameters need about {} while loading \
             ({} of files + {} of weights + {} converted at once), over the page's limit of {} \
             (a wasm page has at most 4 GiB)",
            group(self.params),
            size(self.peak()),
            size(self.file_bytes),
            self.resident_text(),
            size(self.transient),
            gib(MEMORY_LIMIT)
        ))
    }
}

/// The name an opened model is shown under when its folder's name is unknown (files picked or
/// dropped one by one): the config's `name` or `_name_or_path`, else "local <class>".
pub fn fallback_name(config_json: &str, kind: &Kind) -> String {
    let v = serde_json::from_str::<serde_json::Value>(config_json).ok();
    let named = v.as_ref().and_then(|v| {
        let s = v.get("name").or_else(|| v.get("_name_or_path"))?.as_str()?;
        let s = s.trim_end_matches('/').rsplit('/').next()?.trim();
        (!s.is_empty()).then(|| s.to_string())
    });
    named.unwrap_or_else(|| match kind {
        Kind::HuggingFace(a) => format!("local {a}"),
        Kind::Attnlab => "local model".to_string(),
    })
}

/// A byte count: "512 B", "1.5 KiB", "3.2 MiB", "1.23 GiB".
pub fn size(n: u64) -> String {
    match n {
        n if n >= 1 << 30 => gib(n),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64),
        n if n >= 1 << 10 => format!("{:.1} KiB", n as f64 / 1024.0),
        n => format!("{n} B"),
    }
}

/// "1.23 GiB".
pub fn gib(n: u64) -> String {
    format!("{:.2} GiB", n as f64 / (1u64 << 30) as f64)
}

/// "1,234,567".
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The name of a picked file inside the opened folder: the path without the folder itself
/// (`webkitRelativePath` is "folder/config.json"); `None` for a file in a subfolder.
pub fn name_in_folder(relative_path: &str, name: &str) -> Option<String> {
    match relative_path.split('/').filter(|p| !p.is_empty()).count() {
        0 | 1 => Some(name.to_string()),
        2 => relative_path.rsplit('/').next().map(str::to_string),
        _ => None,
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// The need's bytes by dtype, in dtype order.
    fn by_dtype(need: &Need) -> BTreeMap<StorageDtype, u64> {
        need.resident.iter().copied().collect()
    }

    const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../core/tests/fixtures/hf");

    fn fixture(dir: &str, file: &str) -> Vec<u8> {
        std::fs::read(format!("{FIXTURES}/{dir}/{file}")).expect("fixture")
    }

    #[test]
    fn supported_classes_pass_and_others_are_refused_by_name() {
        let llama = String::from_utf8(fixture("llama-gqa-untied", CONFIG)).expect("utf8");
        assert_eq!(classify(&llama), Ok(Kind::HuggingFace("LlamaForCausalLM".into())));
        let mpt = llama.replace("LlamaForCausalLM", "MptForCausalLM");
        let err = classify(&mpt).unwrap_err();
        assert!(err.contains("MptForCausalLM is not supported"), "{err}");
        assert!(classify("{ nope").is_err());
        assert!(classify(r#"{"format_version": 2}"#).unwrap_err().contains("config.json"));
    }

    /// The header tensors of a safetensors file in memory.
    fn tensors(bytes: &[u8]) -> Vec<HeaderTensor> {
        let n = header_len("m", &bytes[..8], bytes.len() as u64).expect("len") as usize;
        header_tensors("m", &bytes[8..8 + n]).expect("header")
    }

    /// Bytes a loaded model's weights take, by dtype, as the need reports them.
    fn held(model: &attnlab_core::Model) -> BTreeMap<StorageDtype, u64> {
        model.weights().bytes_by_dtype().into_iter().map(|(d, b)| (d, b as u64)).collect()
    }

    /// For every Hugging Face fixture (F32, F16, BF16, sharded), the need computed from the headers
    /// alone is exactly what the imported model holds, parameters and bytes per dtype.
    #[test]
    fn the_need_of_a_checkpoint_is_what_its_model_holds() {
        let mut dirs: Vec<_> =
            std::fs::read_dir(FIXTURES).expect("fixtures").flatten().map(|e| e.path()).collect();
        dirs.retain(|d| d.join(CONFIG).is_file());
        dirs.sort();
        assert!(dirs.len() >= 9, "{} fixtures", dirs.len());
        let mut dtypes = BTreeSet::new();
        for dir in dirs {
            let read = |f: &str| std::fs::read(dir.join(f)).expect("fixture file");
            let config = String::from_utf8(read(CONFIG)).expect("utf8");
            let index = std::fs::read_to_string(dir.join(hf::INDEX_FILE)).ok();
            let kind = classify(&config).expect("supported");
            let shards: Vec<(String, Vec<u8>)> = weight_files(&kind, index.as_deref())
                .expect("files")
                .into_iter()
                .map(|f| (f.clone(), read(&f)))
                .collect();
            let files: Vec<_> = shards.iter().map(|(_, b)| (b.len() as u64, tensors(b))).collect();
            let need = Need::of(&kind, &config, &files).expect("need");
            let imported = hf::import(&config, index.as_deref(), shards, Default::default()).expect("import");
            let model = attnlab_core::Model::new(imported.config, imported.weights).expect("model");
            let name = dir.display();
            assert_eq!(by_dtype(&need), held(&model), "{name}");
            dtypes.extend(by_dtype(&need).into_keys());
            let dropped_head = model.config().tie_embeddings
                && files.iter().any(|(_, t)| t.iter().any(|t| t.name == "lm_head.weight"));
            if !dropped_head {
                assert_eq!(need.params as usize, model.weights().num_params(), "{name}");
            }
            assert!(need.transient > 0 && need.peak() > need.resident_bytes() + need.file_bytes, "{name}");
        }
        assert_eq!(dtypes.len(), 3, "the fixtures hold matrices in f32, f16 and bf16: {dtypes:?}");
    }

    /// An attnlab folder: an F16 file holds its matrices in F16 (2 bytes per parameter) and the rest
    /// as f32, exactly as the loaded model does; the same model in F32 holds 4 bytes per parameter.
    #[test]
    fn the_need_of_an_attnlab_file_is_what_its_model_holds() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../www/models/mep");
        let config = std::fs::read_to_string(format!("{dir}/{CONFIG}")).expect("config");
        let f16 = std::fs::read(format!("{dir}/{}", hf::SINGLE_FILE)).expect("weights");
        let model = attnlab_core::Model::from_bytes(&config, &f16).expect("model");
        let f32 = model.weights().to_safetensors(None).expect("f32 file");
        for (bytes, dtype) in [(&f16, StorageDtype::F16), (&f32, StorageDtype::F32)] {
            let need =
                Need::of(&Kind::Attnlab, &config, &[(bytes.len() as u64, tensors(bytes))]).expect("need");
            let loaded = attnlab_core::Model::from_bytes(&config, bytes).expect("model");
            assert_eq!(by_dtype(&need), held(&loaded), "{dtype:?}");
            assert_eq!(need.params as usize, loaded.weights().num_params());
            assert_eq!(need.transient, 0);
            let per_param = need.resident_bytes() as f64 / need.params as f64;
            let expected = if dtype == StorageDtype::F16 { 2.0..2.1 } else { 4.0..4.0001 };
            assert!(expected.contains(&per_param), "{dtype:?}: {per_param} bytes per parameter");
        }
        assert!(header_len("m", &[1, 2], 10).is_err());
        assert!(header_len("m", &u64::MAX.to_le_bytes(), 10).is_err());
        assert!(header_tensors("m", br#"{"a": {"shape": [-1]}}"#).is_err());
    }

    #[test]
    fn memory_is_refused_by_name_with_numbers() {
        let need = |params: u64, dtype: StorageDtype, transient: u64| Need {
            params,
            file_bytes: params * dtype.width() as u64,
            resident: vec![(dtype, params * dtype.width() as u64)],
            transient,
        };
        assert!(need(1_000_000, StorageDtype::F32, 0).check("x").is_ok());
        // 700M parameters in F16: 1.3 GiB of file + 1.3 GiB of weights fit; in F32 they do not.
        assert!(need(700_000_000, StorageDtype::F16, 0).check("x").is_ok());
        let err = need(700_000_000, StorageDtype::F32, 0).check("big-f32").unwrap_err();
        assert!(
            err.contains("big-f32")
                && err.contains("700,000,000")
                && err.contains("5.22 GiB")
                && err.contains("2.61 GiB f32")
                && err.contains("3.00 GiB"),
            "{err}"
        );
        let big = need(7_000_000_000, StorageDtype::Bf16, 8 << 30);
        assert!(big.check("llama-7b").unwrap_err().contains("8.00 GiB converted at once"));
    }

    #[test]
    fn missing_files_are_named() {
        let present = vec![CONFIG.to_string(), "model.safetensors".to_string()];
        let tok = missing(&[TOKENIZER.to_string()], &present).expect("missing");
        assert!(tok.contains("tokenizer.json"), "{tok}");
        assert_eq!(missing(&["model.safetensors".to_string()], &present), None);
        assert_eq!(name_in_folder("f/config.json", "config.json"), Some("config.json".into()));
        assert_eq!(name_in_folder("", "config.json"), Some("config.json".into()));
        assert_eq!(name_in_folder("f/sub/config.json", "config.json"), None);
        let bloom = Kind::HuggingFace("BloomForCausalLM".into());
        assert_eq!(fallback_name("{}", &bloom), "local BloomForCausalLM");
        assert_eq!(fallback_name(r#"{"_name_or_path": "org/tiny-bloom"}"#, &bloom), "tiny-bloom");
        assert_eq!(size(1536), "1.5 KiB");
    }
}
