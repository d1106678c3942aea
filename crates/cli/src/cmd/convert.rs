//! `attnlab convert`: rewrite a model folder with its weights stored as f32, f16 or bf16.

use crate::cmd::init::parse_dtype;
use crate::common::{
    encode_text, load_model_dir, load_tokenizer, num, out, print_json, read_text, write_file, CliError,
    CliResult,
};
use attnlab_core::weights::StorageDtype;
use attnlab_core::Model;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;

/// Tokens of the text the converted model is compared on.
const CHECK_TOKENS: usize = 128;

/// Copy a model folder with its weights stored in another dtype (the shipped models are f16).
///
/// config.json and tokenizer.json are copied, history.json (when present) is copied with its
/// per-step training records thinned to 100; model.safetensors is rewritten. The converted model is loaded back and run on the first 128 tokens of --text next to
/// the original, and the largest logit difference is reported.
#[derive(Debug, Clone, Args)]
pub struct ConvertArgs {
    /// Model folder to convert
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Output folder (created; must not hold a model unless --force)
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Storage dtype of the weights: f32, f16 or bf16
    #[arg(long, value_name = "DTYPE", default_value = "f16", value_parser = parse_dtype)]
    pub dtype: StorageDtype,
    /// Text of the logit check [default: www/eval/heldout.txt when present]
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,
    /// Overwrite a model already in --out
    #[arg(long)]
    pub force: bool,
}

pub fn run(a: ConvertArgs, json: bool) -> CliResult<()> {
    if a.out == a.model {
        return Err(CliError::usage("--out must differ from --model"));
    }
    if a.out.join("model.safetensors").exists() && !a.force {
        return Err(CliError::usage(format!(
            "`{}` already holds a model; pass --force to overwrite it",
            a.out.display()
        )));
    }
    let model = load_model_dir(&a.model)?;
    let tok = load_tokenizer(&a.model, &model)?;
    let (path, text) = read_text(a.text.as_deref())?;
    let tokens = encode_text(&tok, &text, &path)?;
    let tokens = &tokens[..tokens.len().min(CHECK_TOKENS).min(model.config().max_context)];

    model.save_dir_as(&a.out, a.dtype).map_err(|e| CliError::runtime(e.to_string()))?;
    for name in ["tokenizer.json", "history.json"] {
        let src = if name == "tokenizer.json" {
            crate::common::tokenizer_path(&a.model)?
        } else {
            a.model.join(name)
        };
        if src.is_file() {
            let bytes = std::fs::read(&src)
                .map_err(|e| CliError::runtime(format!("cannot read `{}`: {e}", src.display())))?;
            let bytes = if name == "history.json" { thin_history(&bytes, &src)? } else { bytes };
            write_file(&a.out.join(name), &bytes)?;
        }
    }
    let converted = load_model_dir(&a.out)?;
    let before = model.session().prefill_all(tokens)?;
    let after = converted.session().prefill_all(tokens)?;
    let max_diff = before.iter().zip(&after).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
    let max_logit = before.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let size = |m: &Model| m.weights().num_params();
    let bytes_of =
        |dir: &PathBuf| std::fs::metadata(dir.join("model.safetensors")).map(|m| m.len()).unwrap_or(0);
    let (src_bytes, out_bytes) = (bytes_of(&a.model), bytes_of(&a.out));
    if json {
        return print_json(&json!({
            "model": a.model.display().to_string(),
            "out": a.out.display().to_string(),
            "dtype": format!("{:?}", a.dtype).to_lowercase(),
            "params": size(&converted),
            "bytes": {"before": src_bytes, "after": out_bytes},
            "check_tokens": tokens.len(),
            "max_abs_logit_diff": max_diff,
            "max_abs_logit": max_logit,
        }));
    }
    out(&format!(
        "wrote {} ({:?} weights): model.safetensors {src_bytes} → {out_bytes} bytes\n\
         largest logit change on {} tokens of {}: {} (largest |logit| {})\n",
        a.out.display(),
        a.dtype,
        tokens.len(),
        path.display(),
        num(max_diff as f64, 5),
        num(max_logit as f64, 3)
    ))
}

/// Per-step training records kept in a converted history.json (evenly spaced, the last included).
const HISTORY_TRAIN_POINTS: usize = 100;

/// history.json without most per-step training records, as compact JSON: validation, options and
/// totals stay whole (the shipped folders keep the curve, not every step).
fn thin_history(bytes: &[u8], path: &std::path::Path) -> CliResult<Vec<u8>> {
    let mut h: attnlab_train::trainer::History = serde_json::from_slice(bytes)
        .map_err(|e| CliError::runtime(format!("`{}` is not a training history: {e}", path.display())))?;
    let n = h.train.len();
    if n > HISTORY_TRAIN_POINTS {
        let every = n.div_ceil(HISTORY_TRAIN_POINTS);
        h.train = h
            .train
            .into_iter()
            .enumerate()
            .filter(|(i, _)| (i + 1) % every == 0 || i + 1 == n)
            .map(|(_, r)| r)
            .collect();
    }
    serde_json::to_vec(&h).map_err(|e| CliError::runtime(e.to_string()))
}
