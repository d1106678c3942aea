//! Reading a model into the page: the three model files of `models/<name>/` from the browser cache
//! (`crate::store`, integrity-checked) or the network, with progress and a [`LoadReport`] of where
//! they came from; plus the other files the page reads: the models index, the held-out text and the
//! shipped results table. No UI here: callers pass `progress` and `alive` closures.

use attnlab_core::catalog::{self, ModelIndex, INDEX_FILE, SHARED_TOKENIZER};

use crate::engine::Engine;
use crate::fetch;
use crate::models;
use crate::protocol::LoadReport;
use crate::results::{self, ShippedCurve, RESULTS_URL};
use crate::store;
use crate::yield_now::next_paint;

/// Model files, fetched relative to the page (`models/<name>/…`) so the site works from a subpath.
const MODEL_FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];
/// Held-out text of the extrapolation view (test documents of the training corpus).
pub const HELDOUT_URL: &str = "eval/heldout.txt";

/// A byte count for the progress line ("1.5 MiB").
fn fmt_bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

/// The models index with the models of the collections it lists (as `folder/name`), or `Ok(None)`
/// when the server has none (the page then loads `models/default/`). A corrupt or missing index
/// is an error that names the file, never a panic.
pub async fn fetch_index() -> Result<Option<ModelIndex>, String> {
    let Some(text) = fetch_optional_text(&models::index_url()).await? else {
        return Ok(None);
    };
    let mut index = models::parse_index(&text)?;
    for c in index.collections.clone() {
        let path = format!("models/{}/{INDEX_FILE}", c.folder);
        let Some(text) = fetch_optional_text(&path).await? else {
            return Err(format!(
                "{path} is missing, but models/{INDEX_FILE} lists the collection `{}`",
                c.folder
            ));
        };
        let sub = ModelIndex::from_json(&text)
            .map_err(|e| format!("the collection index {path} is not valid: {e}"))?;
        index.add_collection(&c, sub);
    }
    Ok(Some(index))
}

/// Fetch a text file from the page's origin.
pub async fn fetch_text(path: &str) -> Result<String, String> {
    let bytes = fetch::open(path).await?.read(|_| {}).await?;
    String::from_utf8(bytes).map_err(|_| format!("{path}: not valid UTF-8"))
}

/// Fetch a text file from the page's origin; `Ok(None)` when the server does not have it.
async fn fetch_optional_text(path: &str) -> Result<Option<String>, String> {
    let Some(pending) = fetch::open_optional(path).await? else {
        return Ok(None);
    };
    let bytes = pending.read(|_| {}).await?;
    String::from_utf8(bytes).map(Some).map_err(|_| format!("{path}: not valid UTF-8"))
}

/// The shipped models' perplexity table (`results.json`), or why there is none.
pub async fn fetch_shipped() -> Result<Vec<ShippedCurve>, String> {
    let Some(text) = fetch_optional_text(RESULTS_URL).await? else {
        return Err(format!("{RESULTS_URL} is not on the server"));
    };
    results::parse(&text)
}

/// One model file: its bytes, the URL they belong to, and whether they came from the cache.
struct FileData {
    key: String,
    bytes: Vec<u8>,
    from_cache: bool,
    /// For a tokenizer: the model folder's URL that points at the shared tokenizer (`key`).
    via: Option<String>,
}

const SUPERSEDED: &str = "superseded by another model";

/// Fetch the three model files of `models/<model>/` and build the engine. Files in the browser
/// cache (`crate::store`) are read from there after their integrity value is checked; a corrupt
/// entry is deleted and fetched again with a notice, and cached files that verify but do not load
/// are fetched again too. Files fetched from the network are cached once the model has loaded.
/// `alive()` turning false (a newer load started) abandons the load between files and before the
/// parse.
pub async fn fetch_engine(
    model: &str,
    progress: impl Fn(String, Option<f64>),
    alive: impl Fn() -> bool,
) -> Result<(Engine, LoadReport), String> {
    let mut report = LoadReport::default();
    let cache = match store::ModelCache::open().await {
        Ok(c) => Some(c),
        Err(e) => {
            report.cache_off = Some(e);
            None
        }
    };
    let mut files = load_files(model, cache.as_ref(), &progress, &alive, &mut report).await?;
    let mut engine = parse_files(model, &files, &progress, &alive).await;
    if let (Err(e), Some(c)) = (&engine, &cache) {
        if e != SUPERSEDED && files.iter().any(|f| f.from_cache) {
            // The cached bytes match their integrity value but do not load: drop them, fetch anew.
            for f in files.iter().filter(|f| f.from_cache) {
                let _ = c.delete(&f.key).await;
                if let Some(via) = &f.via {
                    let _ = c.delete(via).await;
                }
            }
            report.notices.push(format!("cached files of {model} did not load ({e}): fetched again"));
            report.from_cache = 0;
            report.from_network = 0;
            files = load_files(model, None, &progress, &alive, &mut report).await?;
            engine = parse_files(model, &files, &progress, &alive).await;
        }
    }
    let engine = engine?;
    if let Some(c) = &cache {
        for f in files.iter().filter(|f| !f.from_cache) {
            let stored = match &f.via {
                Some(via) => match c.put(&f.key, &f.bytes).await {
                    Ok(()) => c.put_use(via, &f.key).await,
                    Err(e) => Err(e),
                },
                None => c.put(&f.key, &f.bytes).await,
            };
            if let Err(e) = stored {
                report.cache_off = Some(format!("the browser cache refused {} ({e})", f.key));
                break;
            }
        }
    }
    Ok((engine, report))
}

/// Validate and load the three files.
async fn parse_files(
    model: &str,
    files: &[FileData],
    progress: &impl Fn(String, Option<f64>),
    alive: &impl Fn() -> bool,
) -> Result<Engine, String> {
    let size: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
    progress(format!("validating {model} ({})…", fmt_bytes(size)), Some(1.0));
    // Let the status render before the synchronous parse.
    next_paint().await;
    if !alive() {
        return Err(SUPERSEDED.to_string());
    }
    match files {
        [config, weights, tokenizer] => Engine::load(&config.bytes, &weights.bytes, &tokenizer.bytes),
        _ => Err("internal error: expected three model files".to_string()),
    }
}

/// The three files of `models/<model>/`: from `cache` where it holds them intact, else from the
/// network (headers first, so the total size is known for the progress bar).
async fn load_files(
    model: &str,
    cache: Option<&store::ModelCache>,
    progress: &impl Fn(String, Option<f64>),
    alive: &impl Fn() -> bool,
    report: &mut LoadReport,
) -> Result<Vec<FileData>, String> {
    progress(format!("requesting the files of {model}…"), None);
    let got = open_files(model, cache, report).await?;
    let total: Option<u64> = got
        .iter()
        .map(|g| match g {
            Got::Cached(_) => Some(0),
            Got::Network { pending, .. } => pending.total,
        })
        .sum();
    if total == Some(0) {
        progress(format!("reading {model} from the browser cache…"), Some(1.0));
    }
    let mut done: u64 = 0;
    let mut files = Vec::with_capacity(MODEL_FILES.len());
    for (file, g) in MODEL_FILES.into_iter().zip(got) {
        if !alive() {
            return Err(SUPERSEDED.to_string());
        }
        let (key, via, pending) = match g {
            Got::Cached(f) => {
                files.push(f);
                continue;
            }
            Got::Network { key, via, pending } => (key, via, pending),
        };
        let base = done;
        let mut last_sent: u64 = 0;
        let bytes = pending
            .read(|n| {
                // Throttle re-renders: every 256 KiB is plenty for a progress bar.
                if n < last_sent + (256 << 10) && n != 0 {
                    return;
                }
                last_sent = n;
                let so_far = base + n;
                match total {
                    Some(t) => progress(
                        format!("fetching {model}/{file}: {} of {}", fmt_bytes(so_far), fmt_bytes(t)),
                        Some((so_far as f64 / t.max(1) as f64).min(1.0)),
                    ),
                    None => progress(format!("fetching {model}/{file}: {}", fmt_bytes(so_far)), None),
                }
            })
            .await?;
        done += bytes.len() as u64;
        report.from_network += 1;
        files.push(FileData { key, bytes, from_cache: false, via });
    }
    Ok(files)
}

/// One model file before its body is read: the cached bytes, or the opened network response.
enum Got {
    Cached(FileData),
    Network { key: String, via: Option<String>, pending: fetch::Pending },
}

/// Per model file: its intact bytes from `cache`, else the opened network response (a corrupt
/// cache entry is deleted, with a notice in `report`).
async fn open_files(
    model: &str,
    cache: Option<&store::ModelCache>,
    report: &mut LoadReport,
) -> Result<Vec<Got>, String> {
    // The shared tokenizer of the model's collection: beside the index that lists it.
    let shared = match catalog::collection_of(model) {
        "" => format!("models/{SHARED_TOKENIZER}"),
        folder => format!("models/{folder}/{SHARED_TOKENIZER}"),
    };
    let mut got = Vec::with_capacity(MODEL_FILES.len());
    for file in MODEL_FILES {
        let path = format!("models/{model}/{file}");
        let mut key = path.clone();
        let mut via = None;
        if let Some(c) = cache {
            let mut found = c.get(&key).await;
            if let Ok(store::Cached::Use(target)) = &found {
                // Only the collection's shared tokenizer may stand in for a model's own.
                if file == "tokenizer.json" && *target == shared {
                    via = Some(path.clone());
                    key = shared.clone();
                    found = c.get(&key).await;
                } else {
                    found = Ok(store::Cached::Missing);
                }
            }
            match found {
                Ok(store::Cached::Bytes(bytes)) => {
                    report.from_cache += 1;
                    got.push(Got::Cached(FileData { key, bytes, from_cache: true, via }));
                    continue;
                }
                Ok(store::Cached::Corrupt(why)) => {
                    let _ = c.delete(&key).await;
                    let name = if via.is_some() { "shared tokenizer.json" } else { file };
                    report
                        .notices
                        .push(format!("cached {name} of {model} was corrupt ({why}): fetched again"));
                }
                Ok(store::Cached::Missing | store::Cached::Use(_)) => {}
                Err(e) => report.cache_off = Some(format!("reading the browser cache failed ({e})")),
            }
        }
        let pending = if via.is_some() {
            fetch::open(&key).await?
        } else if file == "tokenizer.json" {
            // A model listed in an index may use the folder's shared tokenizer (core
            // catalog::SHARED_TOKENIZER) instead of its own copy.
            match fetch::open_optional(&path).await? {
                Some(p) => p,
                None => {
                    via = Some(path.clone());
                    key = shared.clone();
                    fetch::open(&key)
                        .await
                        .map_err(|e| format!("{path} is missing and so is the shared tokenizer ({e})"))?
                }
            }
        } else {
            fetch::open(&path).await?
        };
        got.push(Got::Network { key, via, pending });
    }
    Ok(got)
}
