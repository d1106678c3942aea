//! The report's cache of per-model measurements (`--cache DIR`, one file per model).
//!
//! A model's measurement is reused only when everything it was computed from is the same: the
//! bytes of every file in its folder except history.json, its tokenizer, the evaluated tokens, the
//! word list, the measuring arguments, and the code that measures (`ATTNLAB_MEASURE_CODE`, a
//! fingerprint build.rs takes of attnlab-core, the report's measurement, Cargo.lock and the
//! compiler). What comes from the index entry and history.json is read again on every run.

use super::measure::Loaded;
use super::{ModelResult, ReportArgs, SlopeResult};
use crate::common::{tokenizer_path, CliError, CliResult};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Fingerprint of the measuring code, from build.rs.
const MEASURE_CODE: &str = env!("ATTNLAB_MEASURE_CODE");

/// What one cache file holds: the key it was measured under and the measurement.
#[derive(Serialize, Deserialize)]
struct Stored<T> {
    key: String,
    result: T,
    /// Each length's per-window losses (kept out of results.json; the bootstrap needs them).
    #[serde(default)]
    window_nll: Vec<Vec<f64>>,
}

/// The cache folder (None: measure everything and keep nothing) and the key of each model of the
/// run, by its index.
pub(super) struct Cache {
    dir: Option<PathBuf>,
    names: Vec<String>,
    keys: Vec<String>,
}

impl Cache {
    /// The cache in --cache for `models`, whose English check reads the word list at `words_path`.
    pub(super) fn open(a: &ReportArgs, models: &[Loaded], words_path: &Path) -> CliResult<Self> {
        let names = models.iter().map(|l| l.entry.name.clone()).collect();
        let Some(dir) = a.cache.clone() else { return Ok(Self { dir: None, names, keys: vec![] }) };
        let words = fnv1a(FNV_OFFSET, &std::fs::read(words_path).map_err(|e| read_error(words_path, e))?);
        let keys = models.iter().map(|l| key(a, l, words)).collect::<CliResult<_>>()?;
        Ok(Self { dir: Some(dir), names, keys })
    }

    /// The stored measurement of model `i`, with the entry's and history's fields read now.
    pub(super) fn model(&self, i: usize, l: &Loaded) -> Option<ModelResult> {
        let stored: Stored<ModelResult> = self.read(&self.names[i], i)?;
        let mut r = stored.result;
        if r.scores.len() != stored.window_nll.len() {
            return None;
        }
        for (s, w) in r.scores.iter_mut().zip(stored.window_nll) {
            s.window_nll = w;
        }
        r.name.clone_from(&l.entry.name);
        r.family.clone_from(&l.entry.family);
        r.initial_of.clone_from(&l.entry.initial_of);
        r.training.clone_from(&l.training);
        Some(r)
    }

    /// The stored slope edit `preset` of model `i`.
    pub(super) fn slope(&self, i: usize, preset: usize) -> Option<SlopeResult> {
        self.read(&slope_file(&self.names[i], preset), i).map(|s: Stored<SlopeResult>| s.result)
    }

    pub(super) fn store_model(&self, i: usize, r: &ModelResult) -> CliResult<()> {
        let window_nll = r.scores.iter().map(|s| s.window_nll.clone()).collect();
        self.write(&self.names[i], i, r, window_nll)
    }

    pub(super) fn store_slope(&self, i: usize, preset: usize, r: &SlopeResult) -> CliResult<()> {
        self.write(&slope_file(&self.names[i], preset), i, r, vec![])
    }

    /// What file `name` holds when it was measured under model `i`'s key (None when absent,
    /// unreadable or measured otherwise).
    fn read<T: for<'de> Deserialize<'de>>(&self, name: &str, i: usize) -> Option<Stored<T>> {
        let path = self.dir.as_ref()?.join(format!("{name}.json"));
        let stored: Stored<T> = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
        (stored.key == self.keys[i]).then_some(stored)
    }

    fn write<T: Serialize>(
        &self,
        name: &str,
        i: usize,
        result: &T,
        window_nll: Vec<Vec<f64>>,
    ) -> CliResult<()> {
        let Some(dir) = &self.dir else { return Ok(()) };
        let stored = Stored { key: self.keys[i].clone(), result, window_nll };
        let text = serde_json::to_string(&stored).map_err(|e| CliError::runtime(e.to_string()))?;
        crate::common::write_file(&dir.join(format!("{name}.json")), text.as_bytes())
    }
}

/// The key of `l`'s measurement under arguments `a` with the word list of fingerprint `words`.
fn key(a: &ReportArgs, l: &Loaded, words: u64) -> CliResult<String> {
    let dir = &l.dir;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| read_error(dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.file_name().is_some_and(|n| n != "history.json"))
        .collect();
    files.sort();
    files.push(tokenizer_path(dir)?);
    let mut h = fnv1a(FNV_OFFSET, MEASURE_CODE.as_bytes());
    for f in &files {
        h = fnv1a(h, f.file_name().map(|n| n.as_encoded_bytes()).unwrap_or_default());
        h = fnv1a(h, &std::fs::read(f).map_err(|e| read_error(f, e))?);
    }
    let tokens: Vec<u8> = l.tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
    h = fnv1a(h, &tokens);
    let settings = format!("{:?} {} {} {} {words:016x}", a.lengths, a.tokens, a.trace_tokens, a.samples);
    Ok(format!("{:016x}", fnv1a(h, settings.as_bytes())))
}

fn slope_file(model: &str, preset: usize) -> String {
    format!("{model}.slope-{preset}")
}

fn read_error(path: &Path, e: std::io::Error) -> CliError {
    CliError::runtime(format!("cannot read `{}`: {e}", path.display()))
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// 64-bit FNV-1a over `bytes`, continuing from `h` (as build.rs takes the code's fingerprint).
fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}
