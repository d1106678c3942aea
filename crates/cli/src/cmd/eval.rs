//! `attnlab eval`: perplexity versus context length (analysis::perplexity).

use crate::common::Backend;
use crate::common::{
    encode_text, layer_variants, load_tokenizer, num, out, print_json, progress_bar, read_text, table,
    to_value, CliError, CliResult, ModelArgs,
};
use crate::gpu::Engine;
use attnlab_core::analysis::{self, PplPoint};
use clap::Args;
use serde_json::json;
use std::path::{Path, PathBuf};

const PROTOCOL: &str =
    "the token stream is cut into non-overlapping windows of `length` tokens from the start; \
                        each window runs from an empty state and every position but the first is scored";

/// Perplexity versus context length on a text file.
///
/// Protocol: the tokenized text is cut into non-overlapping windows of each length from the start; each
/// window runs from an empty state and every position but the first is scored (so a window of L tokens
/// contributes L−1 predictions). At most --max-windows windows per length.
#[derive(Debug, Clone, Args)]
pub struct EvalArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text to score [default: www/eval/heldout.txt when present]
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,
    /// Context lengths to evaluate, comma-separated
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "128,256,512,1024")]
    pub lengths: Vec<usize>,
    /// At most this many windows per length (0 = every full window of the text)
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_windows: usize,
}

pub fn run(a: EvalArgs, json: bool) -> CliResult<()> {
    if a.lengths.is_empty() {
        return Err(CliError::usage("--lengths is empty"));
    }
    if let Some(l) = a.lengths.iter().find(|&&l| l < 2) {
        return Err(CliError::usage(format!("--lengths: {l} is too short (each length must be >= 2)")));
    }
    let (path, text) = read_text(a.text.as_deref())?;
    let model = a.model.load_any_backend()?;
    let tok = load_tokenizer(&a.model.dir(), &model)?;
    let tokens = encode_text(&tok, &text, &path)?;
    let max = model.config().max_context;
    check_lengths(&a.lengths, max, tokens.len(), &path)?;

    let pb = progress_bar(0, "eval", json);
    let progress = |done: usize, total: usize| {
        pb.set_length(total as u64);
        pb.set_position(done as u64);
    };
    let points = match a.model.backend.backend {
        Backend::Cpu => analysis::perplexity(&model, &tokens, &a.lengths, a.max_windows, progress)?,
        Backend::Gpu => {
            let mut engine = Engine::new(&model, Backend::Gpu)?;
            let cfg = model.config();
            analysis::perplexity_with(
                cfg.vocab_size,
                max,
                &tokens,
                &a.lengths,
                a.max_windows,
                progress,
                |w| engine.session()?.prefill_all(w),
            )?
        }
    };
    pb.finish_and_clear();

    if json {
        return print_json(&json!({
            "model": a.model.dir().display().to_string(),
            "variants": layer_variants(&model),
            "text": path.display().to_string(),
            "text_tokens": tokens.len(),
            "max_windows": a.max_windows,
            "protocol": PROTOCOL,
            "results": to_value(&points)?,
        }));
    }
    let mut s = format!(
        "model {} ({}), text {} ({} tokens)\n",
        a.model.dir().display(),
        crate::common::variants_summary(&model),
        path.display(),
        tokens.len()
    );
    s.push_str(&points_table(&points));
    out(&s)
}

/// Every length must fit the model's `max_context` and the text's `tokens` (named by `path`).
fn check_lengths(lengths: &[usize], max_context: usize, tokens: usize, path: &Path) -> CliResult<()> {
    let list = |keep: &dyn Fn(usize) -> bool| {
        lengths.iter().filter(|&&l| keep(l)).map(|l| l.to_string()).collect::<Vec<_>>().join(",")
    };
    let too_long = list(&|l| l > max_context);
    if !too_long.is_empty() {
        return Err(CliError::usage(format!(
            "--lengths {too_long} exceed the model's max_context {max_context}"
        )));
    }
    let beyond_text = list(&|l| l > tokens);
    if !beyond_text.is_empty() {
        return Err(CliError::usage(format!(
            "--lengths {beyond_text} are longer than the text `{}` ({tokens} tokens); pass a longer --text or shorter lengths",
            path.display(),
        )));
    }
    Ok(())
}

/// Length, windows, scored tokens, mean NLL and perplexity per evaluated length.
fn points_table(points: &[PplPoint]) -> String {
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            vec![
                p.length.to_string(),
                p.windows.to_string(),
                p.tokens.to_string(),
                num(p.nll, 4),
                num(p.ppl, 2),
            ]
        })
        .collect();
    table(&["length", "windows", "tokens", "nll", "ppl"], &rows, &[])
}
