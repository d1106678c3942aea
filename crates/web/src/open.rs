//! "Open model…": which local files a folder needs and whether the model fits, decided before the
//! weights are read. An attnlab folder holds `config.json` (with `format_version`),
//! `model.safetensors` and `tokenizer.json`; a Hugging Face folder holds `config.json`,
//! `model.safetensors` (or `model.safetensors.index.json` and its shards) and `tokenizer.json`.
//! Plain Rust, tested natively; reading the files is `local.rs` (wasm32 only).
use attnlab_core::hf;

/// The most memory an opened model may need while it loads (the wasm heap is at most 4 GiB, and
/// the page, the previous model and the allocator need the rest).
pub const MEMORY_LIMIT: u64 = 3 << 30;
/// Bytes per parameter once loaded: the core keeps the f32 weights and a per-layer f32 copy.
pub const RESIDENT_PER_PARAM: u64 = 8;
/// Bytes per parameter allowed for the peak of a load: an upper bound on the f32 tensors being
/// converted and the model's f32 weights with their per-layer copy.
pub const PEAK_PER_PARAM: u64 = 12;
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
    match hf::import(config_json, None, &[], hf::ImportOptions::default()) {
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

/// Parameters in a safetensors file: the sum of its tensors' element counts, from the JSON header.
pub fn header_params(file: &str, header: &[u8]) -> Result<u64, String> {
    let bad = |why: String| format!("{file}: not a safetensors header ({why})");
    let v: serde_json::Value = serde_json::from_slice(header).map_err(|e| bad(e.to_string()))?;
    let map = v.as_object().ok_or_else(|| bad("not a JSON object".to_string()))?;
    let mut total: u64 = 0;
    for (name, t) in map.iter().filter(|(n, _)| *n != "__metadata__") {
        let shape =
            t.get("shape").and_then(|s| s.as_array()).ok_or_else(|| bad(format!("`{name}` has no shape")))?;
        let mut count: u64 = 1;
        for d in shape {
            let d = d.as_u64().ok_or_else(|| bad(format!("`{name}` has a bad dimension {d}")))?;
            count = count.checked_mul(d).ok_or_else(|| bad(format!("`{name}` is too large")))?;
        }
        total = total.checked_add(count).ok_or_else(|| bad("too many parameters".to_string()))?;
    }
    Ok(total)
}

/// What a model needs: its parameters and the bytes of its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub params: u64,
    pub file_bytes: u64,
}

impl Need {
    /// Memory at the peak of the load: the files read plus the f32 weights being built.
    pub fn peak(&self) -> u64 {
        self.file_bytes.saturating_add(self.params.saturating_mul(PEAK_PER_PARAM))
    }

    /// Refuse, by name and with the numbers, a model that would not fit [`MEMORY_LIMIT`].
    pub fn check(&self, name: &str) -> Result<(), String> {
        if self.peak() <= MEMORY_LIMIT {
            return Ok(());
        }
        Err(format!(
            "{name} does not fit the page's memory: {} parameters need about {} while loading \
             ({} of files + {PEAK_PER_PARAM} bytes per parameter as f32), over the page's limit of {} \
             (a wasm page has at most 4 GiB)",
            group(self.params),
            size(self.peak()),
            size(self.file_bytes),
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

    #[test]
    fn parameters_come_from_the_header() {
        let bytes = fixture("bloom-6-heads", hf::SINGLE_FILE);
        let n = header_len("m", &bytes[..8], bytes.len() as u64).expect("len") as usize;
        let params = header_params("m", &bytes[8..8 + n]).expect("params");
        let cfg = String::from_utf8(fixture("bloom-6-heads", CONFIG)).expect("utf8");
        let imported =
            hf::import(&cfg, None, &[(hf::SINGLE_FILE.into(), bytes)], Default::default()).expect("import");
        assert_eq!(params as usize, imported.weights.num_params());
        assert!(header_len("m", &[1, 2], 10).is_err());
        assert!(header_len("m", &u64::MAX.to_le_bytes(), 10).is_err());
        assert!(header_params("m", br#"{"a": {"shape": [-1]}}"#).is_err());
    }

    #[test]
    fn memory_is_refused_by_name_with_numbers() {
        let small = Need { params: 1_000_000, file_bytes: 4_000_000 };
        assert!(small.check("x").is_ok());
        let big = Need { params: 7_000_000_000, file_bytes: 14_000_000_000 };
        let err = big.check("llama-7b").unwrap_err();
        assert!(
            err.contains("llama-7b") && err.contains("7,000,000,000") && err.contains("3.00 GiB"),
            "{err}"
        );
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
