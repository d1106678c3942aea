//! `attnlab init`: a random-weight model folder of any catalog variant (or a per-layer hybrid).

use crate::common::{
    out, parse_layers_spec, parse_variant, print_json, spinner, table, tokenizer_reason, write_file,
    CliError, CliResult, LayersSpec,
};
use attnlab_core::config::{AbsolutePosition, AttentionSpec, ModelConfig, SizePreset};
use attnlab_core::tokenizer::{Tokenizer, INIT_CORPUS};
use attnlab_core::weights::{StorageDtype, Weights};
use attnlab_core::Model;
use clap::{ArgGroup, Args};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Create a random-weight model: config.json, model.safetensors and tokenizer.json.
///
/// Sizes default to the ~1.1M-parameter preset (vocab 2048, d_model 128, 4 layers × 4 heads of 32,
/// SwiGLU 384, train context 128, max context 8192); every size flag overrides one field. The
/// tokenizer is a copy of --tokenizer, or a byte-level BPE trained on the bundled corpus with
/// --vocab tokens.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("attention").required(true).args(["variant", "layers_spec"])))]
pub struct InitArgs {
    /// Catalog variant id for every layer; an unknown id is refused with the list of known ids
    #[arg(long, value_name = "ID", value_parser = parse_variant)]
    pub variant: Option<String>,
    /// Hybrid model: one catalog id per layer, comma-separated (e.g. "regla,alibi,regla,alibi"); sets
    /// the layer count, which must equal --layers when both are given
    #[arg(long, value_name = "IDS", value_parser = parse_layers_spec, conflicts_with = "variant")]
    pub layers_spec: Option<LayersSpec>,
    /// Output folder (created; must be empty unless --force)
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Seed of the random weights
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Vocabulary size (also the size of the trained tokenizer) [default: 2048]
    #[arg(long, value_name = "N")]
    pub vocab: Option<usize>,
    /// Residual width [default: 128]
    #[arg(long, value_name = "N")]
    pub d_model: Option<usize>,
    /// Number of layers [default: 4, or the length of --layers-spec]
    #[arg(long, value_name = "N")]
    pub layers: Option<usize>,
    /// Attention heads per layer [default: 4]
    #[arg(long, value_name = "N")]
    pub heads: Option<usize>,
    /// Width of one head [default: 32]
    #[arg(long, value_name = "N")]
    pub head_dim: Option<usize>,
    /// Hidden width of the SwiGLU feed-forward block [default: 384]
    #[arg(long, value_name = "N")]
    pub ffn: Option<usize>,
    /// Training context recorded in the config [default: 128, at most --max-context]
    #[arg(long, value_name = "N")]
    pub train_context: Option<usize>,
    /// Longest context the runtime accepts [default: 8192]
    #[arg(long, value_name = "N")]
    pub max_context: Option<usize>,
    /// tokenizer.json to copy into the model folder instead of training one
    #[arg(long, value_name = "FILE")]
    pub tokenizer: Option<PathBuf>,
    /// ReGLA Fig. 4 setup: set every GLA/ReGLA forget-gate bias to +B on even channels and −B on odd
    /// ones, so gate activations start near 1 and near 0 (e.g. 6 puts σ at 0.9975 / 0.0025)
    #[arg(long, value_name = "B")]
    pub gate_bias_init: Option<f32>,
    /// GLA's gate-logit normalizer (α = σ(z)^(1/N)); 1 gives the plain sigmoid gate of the paper's
    /// Fast Decay baseline [default: 16, fla's value]
    #[arg(long, value_name = "N")]
    pub gla_normalizer: Option<f64>,
    /// How model.safetensors stores the weights: f32, f16 or bf16 (computation is always f32)
    #[arg(long, value_name = "DTYPE", default_value = "f32", value_parser = parse_dtype)]
    pub dtype: StorageDtype,
    /// Overwrite a non-empty output folder
    #[arg(long)]
    pub force: bool,
}

/// clap parser of `--dtype`.
pub fn parse_dtype(s: &str) -> Result<StorageDtype, String> {
    StorageDtype::parse(s).map_err(|e| e.to_string())
}

/// Apply `--gla-normalizer` to the config (before the weights exist: it is a config value).
fn apply_gla_normalizer(cfg: &mut ModelConfig, n: Option<f64>) -> CliResult<()> {
    let Some(n) = n else { return Ok(()) };
    let mut found = false;
    for spec in &mut cfg.layers {
        if let AttentionSpec::Gla(attnlab_core::variants::gla::Gla { gate_logit_normalizer, .. }) = spec {
            *gate_logit_normalizer = n;
            found = true;
        }
    }
    if !found {
        return Err(CliError::usage("--gla-normalizer needs a gla layer"));
    }
    cfg.validate().map_err(config_error)
}

/// Seeded random weights (as `Model::random`), with `--gate-bias-init` applied before the model is
/// built (ReGLA Fig. 4's extreme initialisation).
fn init_model(mut cfg: ModelConfig, seed: u64, gate_bias: Option<f32>) -> CliResult<Model> {
    cfg.validate().map_err(config_error)?;
    let mut weights = Weights::random(&attnlab_core::model::tensor_specs(&cfg), seed);
    if let Some(b) = gate_bias {
        if !(b.is_finite() && b.abs() <= 50.0) {
            return Err(CliError::usage(format!("--gate-bias-init {b} must be finite and within ±50")));
        }
        if attnlab_core::variants::set_extreme_gate_bias(&cfg, &mut weights, b) == 0 {
            return Err(CliError::usage("--gate-bias-init needs a gla or regla layer"));
        }
        cfg.name = format!("{}-gate-bias-{b}", cfg.name);
    }
    Model::new(cfg, weights).map_err(config_error)
}

fn size_preset(a: &InitArgs, n_layers_from_spec: Option<usize>) -> CliResult<SizePreset> {
    let d = SizePreset::default();
    let n_layers = match (a.layers, n_layers_from_spec) {
        (Some(l), Some(s)) if l != s => {
            return Err(CliError::usage(format!(
                "--layers-spec names {s} layers but --layers is {l}; they must match"
            )))
        }
        (Some(l), _) => l,
        (None, Some(s)) => s,
        (None, None) => d.n_layers,
    };
    let max_context = a.max_context.unwrap_or(d.max_context);
    let size = SizePreset {
        vocab_size: a.vocab.unwrap_or(d.vocab_size),
        d_model: a.d_model.unwrap_or(d.d_model),
        n_layers,
        n_heads: a.heads.unwrap_or(d.n_heads),
        head_dim: a.head_dim.unwrap_or(d.head_dim),
        ffn_hidden: a.ffn.unwrap_or(d.ffn_hidden),
        train_context: a.train_context.unwrap_or(d.train_context.min(max_context)),
        max_context,
    };
    for (flag, v) in [
        ("--vocab", size.vocab_size),
        ("--d-model", size.d_model),
        ("--layers", size.n_layers),
        ("--heads", size.n_heads),
        ("--head-dim", size.head_dim),
        ("--ffn", size.ffn_hidden),
        ("--train-context", size.train_context),
        ("--max-context", size.max_context),
    ] {
        if v == 0 {
            return Err(CliError::usage(format!("{flag} must be > 0")));
        }
    }
    Ok(size)
}

/// Config errors raised by the flags are usage errors phrased without "config.json".
fn config_error(e: attnlab_core::Error) -> CliError {
    match e {
        attnlab_core::Error::ConfigField { field, reason } => {
            CliError::usage(format!("the requested model is invalid: `{field}` {reason}"))
        }
        other => CliError::from(other),
    }
}

fn build_config(a: &InitArgs) -> CliResult<ModelConfig> {
    let spec_ids = a.layers_spec.as_ref().map(|s| s.0.clone());
    let size = size_preset(a, spec_ids.as_ref().map(Vec::len))?;
    match (&a.variant, spec_ids) {
        (Some(v), _) => ModelConfig::preset(v, size).map_err(config_error),
        (None, Some(ids)) => {
            // Layer i takes layer i of that variant's whole-model preset (TransNormer: Diag in the first
            // half of the layers, Norm in the second, by absolute layer index).
            let mut cfg = ModelConfig::preset(&ids[0], size).map_err(config_error)?;
            let mut layers = Vec::with_capacity(ids.len());
            for (i, id) in ids.iter().enumerate() {
                let p = ModelConfig::preset(id, size).map_err(config_error)?;
                layers.push(p.layers[i].clone());
            }
            cfg.layers = layers;
            if ids.iter().any(|id| id == "sinusoidal") {
                cfg.absolute_position = AbsolutePosition::Sinusoidal;
            }
            cfg.name = format!("hybrid-{}-random", ids.join("-"));
            cfg.description = format!("random-weight hybrid model ({}) from `attnlab init`", ids.join(", "));
            cfg.validate().map_err(config_error)?;
            Ok(cfg)
        }
        (None, None) => Err(CliError::usage("give --variant ID or --layers-spec IDS")),
    }
}

fn check_out_dir(dir: &Path, force: bool) -> CliResult<()> {
    if dir.exists() {
        if !dir.is_dir() {
            return Err(CliError::usage(format!("--out `{}` exists and is not a directory", dir.display())));
        }
        let mut entries = std::fs::read_dir(dir)
            .map_err(|e| CliError::runtime(format!("cannot read `{}`: {e}", dir.display())))?;
        if entries.next().is_some() && !force {
            return Err(CliError::usage(format!(
                "--out `{}` is not empty; pass --force to overwrite its model files",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// Smallest vocabulary of a byte-level BPE (256 byte tokens + `<|endoftext|>`).
const MIN_BPE_VOCAB: usize = 257;

/// Refuse sizes whose weights would not fit in memory comfortably (4 GiB of f32).
const MAX_PARAMS: usize = 1 << 30;

pub fn run(a: InitArgs, json: bool) -> CliResult<()> {
    check_out_dir(&a.out, a.force)?;
    let mut cfg = build_config(&a)?;
    apply_gla_normalizer(&mut cfg, a.gla_normalizer)?;
    let planned: usize =
        attnlab_core::model::tensor_specs(&cfg).iter().fold(0usize, |acc, t| acc.saturating_add(t.numel()));
    if planned > MAX_PARAMS {
        return Err(CliError::usage(format!(
            "these sizes need {planned} parameters, more than the supported {MAX_PARAMS}; choose smaller sizes"
        )));
    }
    let vocab = cfg.vocab_size;

    // Tokenizer first: a bad --tokenizer should fail before anything is written.
    let pb = spinner("preparing the tokenizer", json);
    let (tok_json, tok_source) = tokenizer_bytes(a.tokenizer.as_deref(), vocab)?;
    pb.set_message("initialising weights");
    let model = init_model(cfg, a.seed, a.gate_bias_init)?;
    pb.set_message("writing files");
    model.save_dir_as(&a.out, a.dtype).map_err(|e| CliError::runtime(e.to_string()))?;
    let tok_path = a.out.join("tokenizer.json");
    write_file(&tok_path, &tok_json)?;
    pb.finish_and_clear();

    print_summary(&a, &model, &tok_source, json)
}

/// The tokenizer file's bytes and where they came from: `tokenizer` when given (it must fit
/// `vocab`), else a byte-level BPE of `vocab` ids trained on the bundled corpus.
fn tokenizer_bytes(tokenizer: Option<&Path>, vocab: usize) -> CliResult<(Vec<u8>, String)> {
    match tokenizer {
        Some(path) => {
            let bytes = std::fs::read(path)
                .map_err(|e| CliError::runtime(format!("cannot read `{}`: {e}", path.display())))?;
            let tok = Tokenizer::from_bytes(&bytes)
                .map_err(|e| CliError::runtime(format!("`{}`: {}", path.display(), tokenizer_reason(e))))?;
            tok.check_fits(vocab).map_err(|e| {
                CliError::usage(format!(
                    "--tokenizer `{}` does not fit --vocab {vocab}: {}",
                    path.display(),
                    tokenizer_reason(e)
                ))
            })?;
            Ok((bytes, format!("copied from {}", path.display())))
        }
        None => {
            if vocab < MIN_BPE_VOCAB {
                return Err(CliError::usage(format!(
                    "--vocab {vocab} is too small for the byte-level BPE tokenizer init trains (at least \
                     {MIN_BPE_VOCAB}: 256 bytes + end-of-text); raise --vocab or pass --tokenizer FILE"
                )));
            }
            let tok = Tokenizer::train_byte_bpe(INIT_CORPUS, vocab)?;
            tok.check_fits(vocab)?;
            let text = tok.to_json().map_err(|e| CliError::runtime(e.to_string()))?;
            Ok((
                text.into_bytes(),
                format!("byte-level BPE trained on the bundled corpus, {} ids", tok.vocab_size()),
            ))
        }
    }
}

/// Say what was written: the model's name, layers, sizes and parameters, the tokenizer's source and
/// each file's bytes (or all of it as JSON).
fn print_summary(a: &InitArgs, model: &Model, tok_source: &str, json: bool) -> CliResult<()> {
    let cfg = model.config();
    let params = model.weights().num_params();
    let files: Vec<(PathBuf, u64)> = ["config.json", "model.safetensors", "tokenizer.json"]
        .iter()
        .map(|f| {
            let p = a.out.join(f);
            let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            (p, size)
        })
        .collect();
    let variants: Vec<&str> = cfg.layers.iter().map(|l| l.variant_id()).collect();
    if json {
        return print_json(&json!({
            "out": a.out.display().to_string(),
            "name": cfg.name,
            "variants": variants,
            "params": params,
            "seed": a.seed,
            "tokenizer": tok_source,
            "files": files.iter().map(|(p, s)| json!({"path": p.display().to_string(), "bytes": s})).collect::<Vec<_>>(),
            "config": serde_json::to_value(cfg).unwrap_or(serde_json::Value::Null),
        }));
    }
    let mut s = format!(
        "initialised `{}` in {} (seed {})\n  layers: {}\n  size: vocab {}, d_model {}, {} layers × {} heads of {}, ffn {}, \
         train/max context {}/{}\n  parameters: {params}\n  tokenizer: {tok_source}\n",
        cfg.name,
        a.out.display(),
        a.seed,
        variants.join(", "),
        cfg.vocab_size,
        cfg.d_model,
        cfg.n_layers,
        cfg.n_heads,
        cfg.head_dim,
        cfg.ffn.hidden,
        cfg.train_context,
        cfg.max_context,
    );
    let rows: Vec<Vec<String>> =
        files.iter().map(|(p, size)| vec![p.display().to_string(), size.to_string()]).collect();
    s.push_str(&table(&["file", "bytes"], &rows, &[0]));
    out(&s)
}
