//! `attnlab train`: train a model of any variant on a prepared data folder (`attnlab data brown`).

use crate::common::{out, parse_variant, print_json, to_value, CliError, CliResult};
use attnlab_core::config::{ModelConfig, SizePreset};
use attnlab_train::data::TokenData;
use attnlab_train::trainer::{self, TrainDevice, TrainOptions};
use attnlab_train::{TrainError, TrainModel};
use clap::{ArgGroup, Args};
use std::path::PathBuf;

/// Train with AdamW, warmup + cosine schedule and gradient clipping, on the CPU (candle) or the GPU
/// (`--device gpu`).
///
/// The model comes from --variant (the default size preset, overridable per field), --config FILE
/// (a config.json; weights are initialised like `attnlab init`) or --init DIR (an existing model
/// folder, e.g. from `attnlab init`). Checkpoints and history.json go to --out; --resume continues
/// from the last checkpoint there.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("model_source").required(true).args(["variant", "config", "init"])))]
pub struct TrainArgs {
    /// Catalog variant id for every layer (default size preset)
    #[arg(long, value_name = "ID", value_parser = parse_variant)]
    pub variant: Option<String>,
    /// config.json of the model to train (random initial weights)
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Start from the weights of this model folder
    #[arg(long, value_name = "DIR")]
    pub init: Option<PathBuf>,
    /// Prepared data folder (tokenizer.json, train.u32, valid.u32)
    #[arg(long, value_name = "DIR", default_value = "data/brown")]
    pub data: PathBuf,
    /// Output folder for checkpoints, the final model and history.json
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Continue from the last checkpoint in --out
    #[arg(long)]
    pub resume: bool,
    /// Total optimizer steps
    #[arg(long, default_value_t = 1000)]
    pub steps: usize,
    /// Sequences per batch
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Tokens per sequence (also the config's train_context with --variant)
    #[arg(long, default_value_t = 128)]
    pub seq_len: usize,
    /// Peak learning rate
    #[arg(long, default_value_t = 3e-3)]
    pub lr: f64,
    /// Linear warmup steps
    #[arg(long, default_value_t = 100)]
    pub warmup: usize,
    /// Final learning rate as a fraction of the peak (cosine floor)
    #[arg(long, default_value_t = 0.1)]
    pub min_lr_ratio: f64,
    /// AdamW weight decay (matrices only)
    #[arg(long, default_value_t = 0.1)]
    pub weight_decay: f64,
    /// Global gradient-norm clip (0 disables)
    #[arg(long, default_value_t = 1.0)]
    pub grad_clip: f64,
    /// Seed of the initial weights and of the batch order
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Validate and checkpoint every N steps
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub val_every: usize,
    /// Validation batches per validation
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub val_batches: usize,
    /// Stop after step N (checkpointed; continue later with --resume)
    #[arg(long, value_name = "N")]
    pub stop_at: Option<usize>,
    /// Early stopping: end the run once N validations in a row have not lowered the best
    /// validation loss (OUT/best always holds the model of the best validation)
    #[arg(long, value_name = "N")]
    pub patience: Option<usize>,
    /// Where the steps run: cpu (candle) or gpu (the WGSL trainer on the first adapter: every
    /// catalog variant with RMSNorm and SwiGLU; docs/gpu-training.md)
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    pub device: Device,
    /// With --variant: residual width [default: 128]
    #[arg(long, value_name = "N")]
    pub d_model: Option<usize>,
    /// With --variant: layers [default: 4]
    #[arg(long, value_name = "N")]
    pub layers: Option<usize>,
    /// With --variant: heads per layer [default: 4]
    #[arg(long, value_name = "N")]
    pub heads: Option<usize>,
    /// With --variant: head width [default: 32]
    #[arg(long, value_name = "N")]
    pub head_dim: Option<usize>,
    /// With --variant: FFN hidden width [default: 384]
    #[arg(long, value_name = "N")]
    pub ffn: Option<usize>,
    /// With --variant: vocabulary size [default: 2048]
    #[arg(long, value_name = "N")]
    pub vocab: Option<usize>,
    /// With --variant: longest context the runtime accepts [default: 8192]
    #[arg(long, value_name = "N")]
    pub max_context: Option<usize>,
}

/// `--device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Device {
    Cpu,
    Gpu,
}

fn train_error(e: TrainError) -> CliError {
    match e {
        TrainError::InvalidOption { .. } => CliError::usage(e.to_string()),
        other => CliError::runtime(other.to_string()),
    }
}

fn build_model(a: &TrainArgs) -> CliResult<TrainModel> {
    if let Some(dir) = &a.init {
        return TrainModel::load_dir(dir)
            .map_err(|e| CliError::runtime(format!("--init {}: {e}", dir.display())));
    }
    let cfg = match (&a.variant, &a.config) {
        (Some(v), _) => {
            let d = SizePreset::default();
            let max_context = a.max_context.unwrap_or(d.max_context);
            let size = SizePreset {
                vocab_size: a.vocab.unwrap_or(d.vocab_size),
                d_model: a.d_model.unwrap_or(d.d_model),
                n_layers: a.layers.unwrap_or(d.n_layers),
                n_heads: a.heads.unwrap_or(d.n_heads),
                head_dim: a.head_dim.unwrap_or(d.head_dim),
                ffn_hidden: a.ffn.unwrap_or(d.ffn_hidden),
                train_context: a.seq_len.min(max_context).max(1),
                max_context,
            };
            let mut cfg = ModelConfig::preset(v, size)
                .map_err(|e| CliError::usage(format!("the requested model is invalid: {e}")))?;
            cfg.name = format!("{v}-trained");
            cfg.description = format!("{v} model trained with `attnlab train`");
            cfg
        }
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| CliError::runtime(format!("cannot read `{}`: {e}", path.display())))?;
            let cfg = ModelConfig::from_json(&text)
                .map_err(|e| CliError::usage(format!("--config {}: {e}", path.display())))?;
            // train_context records the length the model is trained at (the report's 1×).
            if cfg.train_context != a.seq_len {
                return Err(CliError::usage(format!(
                    "--config {} has train_context {} but --seq-len is {}: set train_context to the training length",
                    path.display(),
                    cfg.train_context,
                    a.seq_len
                )));
            }
            cfg
        }
        (None, None) => return Err(CliError::usage("give --variant ID, --config FILE or --init DIR")),
    };
    TrainModel::random(cfg, a.seed)
        .map_err(|e| CliError::usage(format!("the requested model is invalid: {e}")))
}

pub fn run(a: TrainArgs, json: bool) -> CliResult<()> {
    let model = build_model(&a)?;
    let data = TokenData::load(&a.data).map_err(|e| {
        CliError::runtime(format!(
            "--data: {e} (prepare it with `attnlab data brown --out {}`)",
            a.data.display()
        ))
    })?;
    let opts = TrainOptions {
        steps: a.steps,
        batch: a.batch,
        seq_len: a.seq_len,
        lr: a.lr,
        min_lr_ratio: a.min_lr_ratio,
        warmup: a.warmup,
        seed: a.seed,
        grad_clip: a.grad_clip,
        adamw: attnlab_train::optim::AdamWConfig { weight_decay: a.weight_decay, ..Default::default() },
        val_every: a.val_every,
        val_batches: a.val_batches,
        stop_at: a.stop_at,
        patience: a.patience,
        device: match a.device {
            Device::Cpu => TrainDevice::Cpu,
            Device::Gpu => TrainDevice::Gpu,
        },
    };
    let progress = !json && std::io::IsTerminal::is_terminal(&std::io::stderr());
    if a.resume && trainer::find_checkpoint(&a.out).is_none() {
        crate::common::note(&format!(
            "--resume: no checkpoint in `{}`; starting a fresh run",
            a.out.display()
        ));
    }
    let s = trainer::train(model, &data, &opts, &a.out, a.resume, progress).map_err(train_error)?;
    let h = &s.history;
    let tps = if h.seconds > 0.0 { h.tokens as f64 / h.seconds } else { 0.0 };
    if json {
        let mut v = to_value(h)?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("out".into(), a.out.display().to_string().into());
            obj.insert("resumed_from".into(), s.resumed_from.into());
            obj.insert("tokens_per_s".into(), tps.into());
            obj.insert("best".into(), to_value(&s.best)?);
            obj.insert("stopped_early".into(), s.stopped_early.into());
            obj.remove("train");
        }
        return print_json(&v);
    }
    let first = h.train.first().map(|r| r.loss).unwrap_or(f32::NAN);
    let last = h.train.last().map(|r| r.loss).unwrap_or(f32::NAN);
    let val = h.valid.last().map(|v| format!("{:.4} (ppl {:.1})", v.loss, v.perplexity)).unwrap_or_default();
    let best = s.best.as_ref().map_or(String::new(), |b| {
        format!("; best {:.4} at step {} ({})", b.loss, b.step, a.out.join("best").display())
    });
    let early = match (s.stopped_early, a.patience) {
        (true, Some(p)) => {
            format!("\n  stopped early: {p} validations in a row without improvement (--patience)")
        }
        _ => String::new(),
    };
    out(&format!(
        "trained `{}` ({} parameters) for {} steps{} in {}\n  loss {first:.4} → {last:.4}, validation {val}{best}{early}\n  \
         {:.0} tokens/s over {:.1} s; history: {}\n",
        h.model,
        h.num_params,
        s.step,
        if s.resumed_from > 0 { format!(" (resumed from step {})", s.resumed_from) } else { String::new() },
        a.out.display(),
        tps,
        h.seconds,
        a.out.join("history.json").display(),
    ))
}
