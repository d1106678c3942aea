//! Reading a model from the user's own files ("Open model…"): a picked or dropped folder, or its
//! files. Everything is read locally with `Blob` slices; nothing leaves the page. The folder is
//! classified and its memory need checked (`crate::open`) before any weights are read, and every
//! failure is a message naming the file; no file data is unwrapped.

use attnlab_core::{hf, Model, Tokenizer};
use js_sys::Uint8Array;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Blob, File};

use crate::engine::Engine;
use crate::open::{self, Kind, Need, CONFIG, TOKENIZER};
use crate::yield_now::next_paint;

/// Bytes read per slice (the progress bar moves per slice).
const CHUNK: u64 = 16 << 20;
const SUPERSEDED: &str = "superseded by another model";

/// An opened model: the engine, the name it is shown under and what it needed.
pub struct Opened {
    pub engine: Engine,
    pub name: String,
    pub need: Need,
}

/// The picked files by their name in the folder (files in subfolders are left out).
struct Folder {
    name: Option<String>,
    files: Vec<(String, File)>,
}

/// The path of a picked file inside its picked folder (`webkitRelativePath`; empty for a file
/// picked alone). Read on the page: a `File` sent to the worker does not carry it.
pub fn relative_path(file: &File) -> String {
    js_sys::Reflect::get(file, &"webkitRelativePath".into())
        .ok()
        .and_then(|v| v.as_string())
        .unwrap_or_default()
}

impl Folder {
    /// The picked files with their [`relative_path`]s.
    fn new(picked: Vec<(String, File)>) -> Folder {
        let mut name = None;
        let mut files = Vec::new();
        for (rel, f) in picked {
            if let Some(n) = open::name_in_folder(&rel, &f.name()) {
                if name.is_none() && rel.contains('/') {
                    name = rel.split('/').next().map(str::to_string);
                }
                files.push((n, f));
            }
        }
        Folder { name, files }
    }

    fn get(&self, name: &str) -> Option<&File> {
        self.files.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }

    fn names(&self) -> Vec<String> {
        self.files.iter().map(|(n, _)| n.clone()).collect()
    }

    async fn text(&self, name: &str) -> Result<Option<String>, String> {
        let Some(f) = self.get(name) else { return Ok(None) };
        let bytes = read(name, f, &|_| {}).await?;
        String::from_utf8(bytes).map(Some).map_err(|_| format!("{name}: not valid UTF-8"))
    }
}

/// Bytes `start..end` of `blob`.
async fn slice(name: &str, blob: &Blob, start: u64, end: u64) -> Result<Vec<u8>, String> {
    let part = blob
        .slice_with_f64_and_f64(start as f64, end as f64)
        .map_err(|e| format!("{name}: could not be read ({e:?})"))?;
    let buf = JsFuture::from(part.array_buffer())
        .await
        .map_err(|e| format!("{name}: could not be read ({e:?})"))?;
    Ok(Uint8Array::new(&buf).to_vec())
}

/// The whole file, slice by slice; `done` hears the bytes read so far.
async fn read(name: &str, file: &File, done: &dyn Fn(u64)) -> Result<Vec<u8>, String> {
    let size = file.size() as u64;
    let len = usize::try_from(size).map_err(|_| format!("{name}: too large ({size} bytes)"))?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len).map_err(|_| format!("{name}: no memory for {} bytes", open::group(size)))?;
    let blob: &Blob = file.unchecked_ref();
    let mut at = 0;
    while at < size {
        let end = (at + CHUNK).min(size);
        bytes.extend_from_slice(&slice(name, blob, at, end).await?);
        at = end;
        done(at);
    }
    Ok(bytes)
}

/// The tensors of one safetensors file, from its header alone.
async fn tensors_of(name: &str, file: &File) -> Result<Vec<open::HeaderTensor>, String> {
    let size = file.size() as u64;
    let blob: &Blob = file.unchecked_ref();
    let n = open::header_len(name, &slice(name, blob, 0, 8.min(size)).await?, size)?;
    open::header_tensors(name, &slice(name, blob, 8, 8 + n).await?)
}

/// Open a model from `picked` files (with their relative paths); `progress` hears the status and the fraction read, `alive()`
/// turning false (another model was chosen) abandons it between steps.
pub async fn open_model(
    picked: Vec<(String, File)>,
    progress: impl Fn(String, Option<f64>),
    alive: impl Fn() -> bool,
) -> Result<Opened, String> {
    let folder = Folder::new(picked);
    progress("reading config.json…".to_string(), None);
    let config = folder.text(CONFIG).await?.ok_or_else(|| {
        format!(
            "{CONFIG} is missing: open a model folder (config.json, model.safetensors, tokenizer.json) \
             with the folder button, or pick or drop its files"
        )
    })?;
    let kind = open::classify(&config)?;
    let index = match kind {
        Kind::HuggingFace(_) => folder.text(hf::INDEX_FILE).await?,
        Kind::Attnlab => None,
    };
    let weights = open::weight_files(&kind, index.as_deref())?;
    let mut needed = weights.clone();
    needed.push(TOKENIZER.to_string());
    if let Some(m) = open::missing(&needed, &folder.names()) {
        return Err(m);
    }
    let name = folder.name.clone().unwrap_or_else(|| open::fallback_name(&config, &kind));
    let need = measure(&folder, &kind, &config, &weights).await?;
    need.check(&name)?;
    let tokenizer_json = folder.text(TOKENIZER).await?.unwrap_or_default();
    let tokenizer = (fitting_tokenizer(&config, &tokenizer_json)?, tokenizer_json);
    let shards = read_weights(&folder, &weights, need.file_bytes, &progress, &alive).await?;
    let mut engine = build(&config, index.as_deref(), shards, &kind, tokenizer, &progress, &alive).await?;
    engine.name_if_unnamed(&name);
    Ok(Opened { engine, name, need })
}

/// What the model needs, from the weight files' sizes and headers.
async fn measure(folder: &Folder, kind: &Kind, config: &str, weights: &[String]) -> Result<Need, String> {
    let mut files = Vec::with_capacity(weights.len());
    for w in weights {
        let f = folder.get(w).ok_or_else(|| format!("{w} is missing"))?;
        files.push((f.size() as u64, tensors_of(w, f).await?));
    }
    Need::of(kind, config, &files)
}

/// The parsed tokenizer; one that does not parse or does not fit `vocab_size` is refused before the
/// weights are read.
fn fitting_tokenizer(config: &str, tokenizer: &str) -> Result<Tokenizer, String> {
    let tok = Tokenizer::from_bytes(tokenizer.as_bytes()).map_err(|e| e.to_string())?;
    let vocab = serde_json::from_str::<serde_json::Value>(config)
        .ok()
        .and_then(|v| v.get("vocab_size")?.as_u64())
        .and_then(|v| usize::try_from(v).ok());
    if let Some(v) = vocab {
        tok.check_fits(v).map_err(|e| e.to_string())?;
    }
    Ok(tok)
}

/// Every weight file's bytes, with progress over `total` bytes.
async fn read_weights(
    folder: &Folder,
    weights: &[String],
    total: u64,
    progress: &impl Fn(String, Option<f64>),
    alive: &impl Fn() -> bool,
) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut shards = Vec::with_capacity(weights.len());
    let mut before = 0;
    for w in weights {
        if !alive() {
            return Err(SUPERSEDED.to_string());
        }
        let f = folder.get(w).ok_or_else(|| format!("{w} is missing"))?;
        let done = |n: u64| {
            let so_far = before + n;
            let text = format!("reading {w}: {} of {}", open::size(so_far), open::size(total));
            progress(text, Some(so_far as f64 / total.max(1) as f64));
        };
        let bytes = read(w, f, &done).await?;
        before += bytes.len() as u64;
        shards.push((w.clone(), bytes));
    }
    Ok(shards)
}

/// Convert (a Hugging Face checkpoint) and build the model, with a rendered status before each step;
/// the tokenizer comes parsed and as its file's text.
async fn build(
    config: &str,
    index: Option<&str>,
    shards: Vec<(String, Vec<u8>)>,
    kind: &Kind,
    (tokenizer, tokenizer_json): (Tokenizer, String),
    progress: &impl Fn(String, Option<f64>),
    alive: &impl Fn() -> bool,
) -> Result<Engine, String> {
    let step = |text: &str| progress(text.to_string(), Some(1.0));
    let model = match kind {
        Kind::Attnlab => {
            step("building the model…");
            next_paint().await;
            let [(_, bytes)] = shards.as_slice() else { return Err("expected one weight file".into()) };
            Model::from_bytes(config, bytes).map_err(|e| e.to_string())?
        }
        Kind::HuggingFace(arch) => {
            step(&format!("converting {arch} to attnlab's format…"));
            next_paint().await;
            // The import consumes the shards: each is freed once converted.
            let imported =
                hf::import(config, index, shards, hf::ImportOptions::default()).map_err(|e| e.to_string())?;
            step("building the model…");
            next_paint().await;
            Model::new(imported.config, imported.weights).map_err(|e| e.to_string())?
        }
    };
    if !alive() {
        return Err(SUPERSEDED.to_string());
    }
    let arch = match kind {
        Kind::HuggingFace(a) => Some(a.clone()),
        Kind::Attnlab => None,
    };
    Engine::from_model(model, tokenizer, tokenizer_json, arch)
}

/// The File System entries of a drop (`DataTransferItem.webkitGetAsEntry`), taken while the drop
/// event lasts (the items are gone after it); empty when the browser gives none.
pub fn drop_entries(dt: &web_sys::DataTransfer) -> Vec<wasm_bindgen::JsValue> {
    let Ok(items) = js_sys::Reflect::get(dt, &"items".into()) else { return Vec::new() };
    let n = js_sys::Reflect::get(&items, &"length".into()).ok().and_then(|v| v.as_f64()).unwrap_or(0.0);
    (0..n as u32)
        .filter_map(|i| {
            let item = js_sys::Reflect::get_u32(&items, i).ok()?;
            let entry = method(&item, "webkitGetAsEntry")?.call0(&item).ok()?;
            (entry.is_object()).then_some(entry)
        })
        .collect()
}

/// The files of dropped entries: files as they are, and the files directly inside a dropped folder
/// (its subfolders are left out, as with the folder picker).
pub async fn entry_files(entries: Vec<wasm_bindgen::JsValue>) -> Result<Vec<File>, String> {
    let mut queue: Vec<(wasm_bindgen::JsValue, usize)> = entries.into_iter().map(|e| (e, 0)).collect();
    let mut files = Vec::new();
    while let Some((entry, depth)) = queue.pop() {
        let flag =
            |k: &str| js_sys::Reflect::get(&entry, &k.into()).ok().and_then(|v| v.as_bool()) == Some(true);
        if flag("isFile") {
            let file = callback(&entry, "file").await?;
            files.push(
                file.dyn_into::<File>().map_err(|_| "a dropped entry did not give a file".to_string())?,
            );
        } else if flag("isDirectory") && depth == 0 {
            let reader = method(&entry, "createReader")
                .and_then(|f| f.call0(&entry).ok())
                .ok_or("a dropped folder could not be listed")?;
            // readEntries returns the listing in batches until an empty one.
            loop {
                let batch = js_sys::Array::from(&callback(&reader, "readEntries").await?);
                if batch.length() == 0 {
                    break;
                }
                queue.extend(batch.iter().map(|e| (e, depth + 1)));
            }
        }
    }
    Ok(files)
}

/// `obj[name]` if it is a function.
fn method(obj: &wasm_bindgen::JsValue, name: &str) -> Option<js_sys::Function> {
    js_sys::Reflect::get(obj, &name.into()).ok()?.dyn_into().ok()
}

/// A File System entry method taking (success, error) callbacks (`file`, `readEntries`), awaited.
async fn callback(obj: &wasm_bindgen::JsValue, name: &str) -> Result<wasm_bindgen::JsValue, String> {
    let f = method(obj, name).ok_or_else(|| format!("the dropped entry has no {name}()"))?;
    let promise = js_sys::Promise::new(&mut |ok, fail| {
        if let Err(e) = f.call2(obj, &ok, &fail) {
            let _ = fail.call1(&wasm_bindgen::JsValue::NULL, &e);
        }
    });
    JsFuture::from(promise).await.map_err(|e| format!("reading the dropped folder failed: {e:?}"))
}
