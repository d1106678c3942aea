//! `attnlab import`: convert a Hugging Face checkpoint folder into an attnlab model folder.

use crate::common::{out, print_json, write_file, CliError, CliResult};
use attnlab_core::hf::{import_dir, ImportOptions, SUPPORTED};
use attnlab_core::{Model, Tokenizer};
use clap::Args;
use serde_json::json;
use std::path::PathBuf;

/// Convert a Hugging Face checkpoint (LlamaForCausalLM, GPTNeoXForCausalLM, BloomForCausalLM,
/// GPT2LMHeadModel) into an attnlab model folder.
///
/// Reads config.json, model.safetensors or model.safetensors.index.json with its shards (F32, F16 or
/// BF16) and tokenizer.json when present; writes config.json (format version 2), model.safetensors
/// in the checkpoint's own dtype, and the tokenizer. Options the importer does not implement are
/// refused by name. Every command also opens such a folder directly (`--model HF_DIR`), converting
/// on load.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// Hugging Face checkpoint folder
    #[arg(long = "from", value_name = "HF_DIR")]
    pub from: PathBuf,
    /// Output model folder (created; must not hold a model unless --force)
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Longest context to accept (ALiBi models have no limit of their own: default 8192; learned
    /// positions stop at the checkpoint's n_positions)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_context: Option<u32>,
    /// Overwrite a model already in --out
    #[arg(long)]
    pub force: bool,
}

pub fn run(a: ImportArgs, json: bool) -> CliResult<()> {
    if a.out == a.from {
        return Err(CliError::usage("--out must differ from --from"));
    }
    if a.out.join("model.safetensors").exists() && !a.force {
        return Err(CliError::usage(format!(
            "`{}` already holds a model; pass --force to overwrite it",
            a.out.display()
        )));
    }
    if !a.from.join("config.json").is_file() {
        return Err(CliError::runtime(format!(
            "`{}` has no config.json: --from wants a Hugging Face checkpoint folder ({})",
            a.from.display(),
            SUPPORTED.join(", ")
        )));
    }
    let opts = ImportOptions { max_context: a.max_context.map(|n| n as usize) };
    let imported = import_dir(&a.from, opts)?;
    let tok_path = a.from.join("tokenizer.json");
    let tokenizer = match tok_path.is_file() {
        true => {
            let tok = Tokenizer::from_file(&tok_path).map_err(|e| CliError::runtime(e.to_string()))?;
            tok.check_fits(imported.config.vocab_size).map_err(|e| CliError::runtime(e.to_string()))?;
            Some(tok)
        }
        false => None,
    };
    let (arch, dtype) = (imported.architecture.clone(), imported.dtype);
    let model = Model::new(imported.config, imported.weights)?;
    model.save_dir_as(&a.out, dtype)?;
    if let Some(tok) = &tokenizer {
        write_file(&a.out.join("tokenizer.json"), tok.to_json()?.as_bytes())?;
    }
    let cfg = model.config();
    let params = model.weights().num_params();
    let options = cfg.v2_fields();
    if json {
        return print_json(&json!({
            "architecture": arch, "out": a.out, "params": params, "dtype": format!("{dtype:?}").to_lowercase(),
            "layers": cfg.n_layers, "d_model": cfg.d_model, "n_heads": cfg.n_heads, "n_kv_heads": cfg.kv_heads(),
            "variant": cfg.layers[0].variant_id(), "max_context": cfg.max_context, "options": options,
            "tokenizer": tokenizer.is_some(),
        }));
    }
    let mut s = format!(
        "imported {arch} → {} ({params} parameters, {dtype:?}, {} layers × {} heads ({} kv), d_model {}, `{}` \
         attention, max_context {})",
        a.out.display(),
        cfg.n_layers,
        cfg.n_heads,
        cfg.kv_heads(),
        cfg.d_model,
        cfg.layers[0].variant_id(),
        cfg.max_context
    );
    if !options.is_empty() {
        s.push_str(&format!("\nformat-2 options: {}", options.join(", ")));
    }
    if tokenizer.is_none() {
        s.push_str(
            "\nno tokenizer.json in the checkpoint: give token ids directly (`attnlab dump --ids FILE`)",
        );
    }
    out(&(s + "\n"))
}
