//! The training loop: AdamW, warmup + cosine schedule, global-norm clipping, seeded batches,
//! periodic validation, resumable checkpoints and `history.json`.
//!
//! Output folder layout (`--out DIR`):
//!
//! | path | content |
//! |---|---|
//! | `config.json`, `model.safetensors`, `tokenizer.json` | the latest checkpoint as a core model folder |
//! | `history.json` | [`History`]: every logged step and every validation |
//! | `checkpoint/` | the same model files plus `optimizer.safetensors` (AdamW moments) and `state.json` |
//! | `best/` | the model of the lowest validation loss so far (`validation.json`: its step and loss) |
//!
//! With `patience`, the run stops early once that many validations in a row have not improved on
//! the best (early stopping; `best/` is then the model to use).
//!
//! The batch of step `s` depends only on `(seed, s)`, so a resumed run sees exactly the batches an
//! uninterrupted run would. A checkpoint is written at every validation and at the end; it is
//! assembled in `checkpoint.tmp/` and swapped in by renames, so an interrupted write never leaves a
//! half checkpoint (resume falls back to `checkpoint.old/`).

use crate::data::TokenData;
use crate::error::{Result, TrainError};
use crate::model::TrainModel;
#[cfg(not(target_arch = "wasm32"))]
use crate::optim::lr_at;
use crate::optim::{clip_factor, AdamW, AdamWConfig};
use attnlab_core::rng::SplitMix64;
#[cfg(not(target_arch = "wasm32"))]
use attnlab_core::Tokenizer;
use candle_core::Tensor;
use std::path::{Path, PathBuf};
#[cfg(not(target_arch = "wasm32"))]
use std::time::Instant;

/// Options of one training run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TrainOptions {
    /// Total optimizer steps (a resumed run continues up to this number).
    pub steps: usize,
    /// Sequences per batch.
    pub batch: usize,
    /// Tokens per sequence (inputs; targets are shifted by one).
    pub seq_len: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Final learning rate as a fraction of the peak.
    pub min_lr_ratio: f64,
    /// Linear warmup steps.
    pub warmup: usize,
    /// Seed of the batch order.
    pub seed: u64,
    /// Global gradient-norm limit (0 disables clipping).
    pub grad_clip: f64,
    /// AdamW settings.
    pub adamw: AdamWConfig,
    /// Validate and checkpoint every this many steps.
    pub val_every: usize,
    /// Validation batches (of `batch × seq_len` tokens each, from the start of the validation split).
    pub val_batches: usize,
    /// Stop this invocation after this step (a time-boxed segment; `--resume` continues). The
    /// schedule still runs to `steps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_at: Option<usize>,
    /// Where the steps run.
    #[serde(default)]
    pub device: TrainDevice,
    /// Early stopping: end the run once this many validations in a row have not lowered the best
    /// validation loss (`best/` keeps the model of the best one either way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patience: Option<usize>,
}

/// Where `attnlab train` runs its steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrainDevice {
    /// candle on the CPU.
    #[default]
    Cpu,
    /// `attnlab_gpu::train` on the first adapter (feature `gpu`).
    Gpu,
}

impl TrainOptions {
    /// The schedule's token budget: steps × batch × sequence length (what runs are compared on; a
    /// run resumed after a repeated segment saw more, [`History::tokens`]).
    pub fn budget(&self) -> u64 {
        (self.steps * self.batch * self.seq_len) as u64
    }
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            steps: 1000,
            batch: 16,
            seq_len: 128,
            lr: 3e-3,
            min_lr_ratio: 0.1,
            warmup: 100,
            seed: 0,
            grad_clip: 1.0,
            adamw: AdamWConfig::default(),
            val_every: 200,
            val_batches: 8,
            stop_at: None,
            device: TrainDevice::Cpu,
            patience: None,
        }
    }
}

/// One logged training step.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepRecord {
    /// Steps completed (1-based).
    pub step: usize,
    pub loss: f32,
    pub lr: f64,
    pub grad_norm: f64,
    pub tokens_per_s: f64,
}

/// One validation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ValRecord {
    pub step: usize,
    pub loss: f32,
    pub perplexity: f64,
}

/// `history.json`: the run's options, the model name and every record.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct History {
    pub model: String,
    pub num_params: usize,
    pub options: TrainOptions,
    pub train: Vec<StepRecord>,
    pub valid: Vec<ValRecord>,
    /// Training tokens consumed.
    pub tokens: usize,
    /// Wall-clock seconds spent training (summed over resumed segments).
    pub seconds: f64,
}

/// `checkpoint/state.json`.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct State {
    step: usize,
    options: TrainOptions,
}

/// Result of [`train`].
#[derive(Debug, Clone)]
pub struct TrainSummary {
    /// Steps completed in total.
    pub step: usize,
    /// Step the run resumed from (0 for a fresh run).
    pub resumed_from: usize,
    pub history: History,
    pub out: PathBuf,
    /// The lowest validation loss (its model is in `out/best`).
    pub best: Option<ValRecord>,
    /// The run ended before `steps` because `patience` validations did not improve on the best.
    pub stopped_early: bool,
}

/// The validation with the lowest loss (the first of equal ones: only a strictly lower loss
/// counts as an improvement).
pub fn best_validation(valid: &[ValRecord]) -> Option<&ValRecord> {
    valid.iter().reduce(|best, v| if v.loss < best.loss { v } else { best })
}

/// Validations after the best one (0 when the latest is the best).
pub fn validations_since_best(valid: &[ValRecord]) -> usize {
    best_validation(valid).map_or(0, |b| valid.iter().filter(|v| v.step > b.step).count())
}

/// Check options against the model and the data; the first problem is returned as one line.
pub fn check_options(opts: &TrainOptions, model: &TrainModel, data: &TokenData) -> Result<()> {
    let cfg = model.config();
    let pos = |name: &str, v: usize| -> Result<()> {
        if v == 0 {
            return Err(TrainError::option(name, "must be > 0"));
        }
        Ok(())
    };
    pos("steps", opts.steps)?;
    pos("batch", opts.batch)?;
    pos("seq-len", opts.seq_len)?;
    pos("val-every", opts.val_every)?;
    if opts.patience == Some(0) {
        return Err(TrainError::option("patience", "must be > 0 (leave it out to train every step)"));
    }
    if !(opts.lr.is_finite() && opts.lr > 0.0) {
        return Err(TrainError::option("lr", format!("{} must be finite and > 0", opts.lr)));
    }
    if !(0.0..=1.0).contains(&opts.min_lr_ratio) {
        return Err(TrainError::option("min-lr-ratio", "must be in [0, 1]"));
    }
    if !(opts.adamw.weight_decay.is_finite() && (0.0..1.0).contains(&(opts.lr * opts.adamw.weight_decay))) {
        return Err(TrainError::option("weight-decay", "must be finite, >= 0 and below 1/lr"));
    }
    if !(opts.grad_clip.is_finite() && opts.grad_clip >= 0.0) {
        return Err(TrainError::option("grad-clip", "must be finite and >= 0"));
    }
    if opts.seq_len > cfg.max_context {
        return Err(TrainError::option(
            "seq-len",
            format!("{} exceeds the model's max_context {}", opts.seq_len, cfg.max_context),
        ));
    }
    if data.vocab > cfg.vocab_size {
        return Err(TrainError::option(
            "data",
            format!("the tokenizer has {} ids but the model's vocab_size is {}", data.vocab, cfg.vocab_size),
        ));
    }
    if data.train.len() < opts.seq_len + 2 {
        return Err(TrainError::option(
            "data",
            format!("the training split has {} tokens, fewer than seq-len + 2", data.train.len()),
        ));
    }
    if data.valid.len() < opts.seq_len + 1 {
        return Err(TrainError::option(
            "data",
            format!("the validation split has {} tokens, fewer than seq-len + 1", data.valid.len()),
        ));
    }
    Ok(())
}

/// The `[batch, seq_len + 1]` token windows of step `step`: random offsets from a SplitMix64 whose
/// state is a hash of `(seed, step)`.
pub fn batch_for_step(data: &[u32], opts: &TrainOptions, step: usize) -> Vec<u32> {
    let w = opts.seq_len + 1;
    let span = (data.len() - w + 1) as u64;
    // Hash (seed, step) into a fresh state: seeding with a linear function of the step would make
    // consecutive steps' streams shifted copies of one another (overlapping batches).
    let key = SplitMix64::new(step as u64).next_u64() ^ opts.seed.rotate_left(29);
    let mut rng = SplitMix64::new(SplitMix64::new(key).next_u64());
    let mut out = Vec::with_capacity(opts.batch * w);
    for _ in 0..opts.batch {
        let o = (rng.next_u64() % span) as usize;
        out.extend_from_slice(&data[o..o + w]);
    }
    out
}

/// One optimizer step (number `step`, 1-based, for the error) on a `[batch, seq_len + 1]` token
/// batch: loss, backward pass, global-norm clipping to `grad_clip` (0: none) and an AdamW update
/// at `lr`. Returns the batch loss and the gradient norm before clipping; a non-finite loss or
/// gradient leaves the model untouched and is an error.
pub fn optimizer_step(
    model: &TrainModel,
    opt: &mut AdamW,
    batch: &Tensor,
    lr: f64,
    grad_clip: f64,
    step: usize,
) -> Result<(f32, f64)> {
    let loss = model.loss(batch)?;
    let lv = loss.to_scalar::<f32>()?;
    if !lv.is_finite() {
        return Err(TrainError::NonFiniteLoss { step, loss: lv });
    }
    let grads = loss.backward()?;
    let (gnorm, factor) = clip_factor(&model.named_vars(), &grads, grad_clip)?;
    if !gnorm.is_finite() {
        return Err(TrainError::NonFiniteLoss { step, loss: f32::NAN });
    }
    opt.step(model, &grads, lr, factor)?;
    Ok((lv, gnorm))
}

/// [`optimizer_step`] on `rows` windows given as a flat slice of `rows × (seq_len + 1)` ids.
pub fn optimizer_step_windows(
    model: &TrainModel,
    opt: &mut AdamW,
    windows: &[u32],
    rows: usize,
    lr: f64,
    grad_clip: f64,
    step: usize,
) -> Result<(f32, f64)> {
    let w = windows.len() / rows.max(1);
    let batch = Tensor::from_vec(windows.to_vec(), (rows, w), model.device())?;
    optimizer_step(model, opt, &batch, lr, grad_clip, step)
}

/// Mean validation loss over up to `val_batches` batches of consecutive windows.
pub fn validate(model: &TrainModel, data: &[u32], opts: &TrainOptions) -> Result<f32> {
    validate_with(data, opts, |flat, rows| {
        let t = Tensor::from_vec(flat.to_vec(), (rows, opts.seq_len + 1), model.device())?;
        Ok(model.loss(&t)?.to_scalar::<f32>()?)
    })
}

/// [`validate`] with `loss(windows, rows)` giving the mean loss of `rows` windows.
fn validate_with(
    data: &[u32],
    opts: &TrainOptions,
    mut loss: impl FnMut(&[u32], usize) -> Result<f32>,
) -> Result<f32> {
    let w = opts.seq_len + 1;
    let windows: Vec<&[u32]> = data.chunks_exact(w).take(opts.val_batches.max(1) * opts.batch).collect();
    let mut total = 0.0f64;
    let mut n = 0usize;
    for chunk in windows.chunks(opts.batch) {
        let flat: Vec<u32> = chunk.iter().flat_map(|c| c.iter().copied()).collect();
        let l = loss(&flat, chunk.len())?;
        total += l as f64 * chunk.len() as f64;
        n += chunk.len();
    }
    Ok((total / n.max(1) as f64) as f32)
}

/// The model and optimizer of a run, on the device that steps them (one per run: its size does not
/// matter).
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::large_enum_variant)]
enum Stepper {
    Cpu {
        model: TrainModel,
        opt: AdamW,
    },
    #[cfg(feature = "gpu")]
    Gpu(crate::gpu::GpuTrain),
}

#[cfg(not(target_arch = "wasm32"))]
impl Stepper {
    fn new(model: TrainModel, opt: AdamW, opts: &TrainOptions) -> Result<Stepper> {
        match opts.device {
            TrainDevice::Cpu => Ok(Stepper::Cpu { model, opt }),
            #[cfg(feature = "gpu")]
            TrainDevice::Gpu => {
                let mut g = crate::gpu::GpuTrain::new(&model, opts.batch, opts.seq_len, opts.adamw)?;
                g.restore_optimizer(&opt)?;
                Ok(Stepper::Gpu(g))
            }
            #[cfg(not(feature = "gpu"))]
            TrainDevice::Gpu => {
                Err(TrainError::option("device", "this build has no GPU trainer (feature `gpu`)"))
            }
        }
    }

    /// The device, for the progress line.
    fn name(&self) -> String {
        match self {
            Stepper::Cpu { .. } => "cpu".into(),
            #[cfg(feature = "gpu")]
            Stepper::Gpu(g) => g.device(),
        }
    }

    fn step(&mut self, windows: Vec<u32>, lr: f64, opts: &TrainOptions, step: usize) -> Result<(f32, f64)> {
        match self {
            Stepper::Cpu { model, opt } => {
                optimizer_step_windows(model, opt, &windows, opts.batch, lr, opts.grad_clip, step)
            }
            #[cfg(feature = "gpu")]
            Stepper::Gpu(g) => g.step(&windows, lr, opts.grad_clip, step),
        }
    }

    fn validate(&mut self, data: &[u32], opts: &TrainOptions) -> Result<f32> {
        match self {
            Stepper::Cpu { model, .. } => validate(model, data, opts),
            #[cfg(feature = "gpu")]
            Stepper::Gpu(g) => validate_with(data, opts, |flat, rows| g.loss(flat, rows)),
        }
    }

    /// Write the checkpoint of `state` (a GPU run reads its model and moments back first).
    fn save(&self, out: &Path, state: &State, history: &History, tokenizer_json: &str) -> Result<()> {
        match self {
            Stepper::Cpu { model, opt } => save_checkpoint(out, model, opt, state, history, tokenizer_json),
            #[cfg(feature = "gpu")]
            Stepper::Gpu(g) => {
                save_checkpoint(out, &g.to_model()?, &g.optimizer()?, state, history, tokenizer_json)
            }
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> Result<()> {
    let s = serde_json::to_string_pretty(v).map_err(|e| TrainError::bad_file(path, e.to_string()))?;
    std::fs::write(path, s + "\n").map_err(|e| TrainError::io(path, e))
}

#[cfg(not(target_arch = "wasm32"))]
fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let s = std::fs::read_to_string(path).map_err(|e| TrainError::io(path, e))?;
    serde_json::from_str(&s).map_err(|e| TrainError::bad_file(path, e.to_string()))
}

#[cfg(not(target_arch = "wasm32"))]
/// Write the checkpoint of `step` (see the module docs for the layout).
fn save_checkpoint(
    out: &Path,
    model: &TrainModel,
    opt: &AdamW,
    state: &State,
    history: &History,
    tokenizer_json: &str,
) -> Result<()> {
    let cur = out.join("checkpoint");
    let tmp = fresh_dir(out, "checkpoint.tmp")?;
    model.save_dir(&tmp)?;
    let tp = tmp.join("tokenizer.json");
    std::fs::write(&tp, tokenizer_json).map_err(|e| TrainError::io(&tp, e))?;
    opt.save(&tmp.join("optimizer.safetensors"))?;
    write_json(&tmp.join("history.json"), history)?;
    write_json(&tmp.join("state.json"), state)?;
    swap_in(&tmp, &cur, &out.join("checkpoint.old"))?;
    // The top-level model folder (usable by every other command).
    for name in ["config.json", "model.safetensors", "tokenizer.json", "history.json"] {
        let (src, dst) = (cur.join(name), out.join(name));
        std::fs::copy(&src, &dst).map_err(|e| TrainError::io(&dst, e))?;
    }
    Ok(())
}

#[cfg(not(target_arch = "wasm32"))]
/// Copy the checkpoint's model (just written at the best validation `best`) to `out/best`,
/// assembled in `best.tmp/` and swapped in by renames like the checkpoint.
fn save_best(out: &Path, best: &ValRecord) -> Result<()> {
    let (tmp, ck) = (fresh_dir(out, "best.tmp")?, out.join("checkpoint"));
    std::fs::create_dir_all(&tmp).map_err(|e| TrainError::io(&tmp, e))?;
    for name in ["config.json", "model.safetensors", "tokenizer.json"] {
        let (src, dst) = (ck.join(name), tmp.join(name));
        std::fs::copy(&src, &dst).map_err(|e| TrainError::io(&dst, e))?;
    }
    write_json(&tmp.join("validation.json"), best)?;
    swap_in(&tmp, &out.join("best"), &out.join("best.old"))
}

#[cfg(not(target_arch = "wasm32"))]
/// `out/name`, with whatever an interrupted write left there removed (not created).
fn fresh_dir(out: &Path, name: &str) -> Result<PathBuf> {
    let dir = out.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| TrainError::io(&dir, e))?;
    }
    Ok(dir)
}

#[cfg(not(target_arch = "wasm32"))]
/// Put the assembled folder `tmp` in place of `cur` by renames (the previous `cur` kept as `old`
/// until then), so an interrupted swap never leaves a half folder.
fn swap_in(tmp: &Path, cur: &Path, old: &Path) -> Result<()> {
    let remove = |d: &Path| match d.exists() {
        true => std::fs::remove_dir_all(d).map_err(|e| TrainError::io(d, e)),
        false => Ok(()),
    };
    remove(old)?;
    if cur.exists() {
        std::fs::rename(cur, old).map_err(|e| TrainError::io(cur, e))?;
    }
    std::fs::rename(tmp, cur).map_err(|e| TrainError::io(tmp, e))?;
    remove(old)
}

/// The checkpoint folder to resume from, if any.
pub fn find_checkpoint(out: &Path) -> Option<PathBuf> {
    ["checkpoint", "checkpoint.old"].iter().map(|n| out.join(n)).find(|p| p.join("state.json").is_file())
}

#[cfg(not(target_arch = "wasm32"))]
/// Train `model` on `data`, writing checkpoints into `out`. With `resume` and a checkpoint in
/// `out`, the model, optimizer moments, step and history are restored from it (the given `model`
/// then only has to have the same config) and training continues to `opts.steps`.
pub fn train(
    model: TrainModel,
    data: &TokenData,
    opts: &TrainOptions,
    out: &Path,
    resume: bool,
    progress: bool,
) -> Result<TrainSummary> {
    check_options(opts, &model, data)?;
    Tokenizer::from_bytes(data.tokenizer_json.as_bytes())?.check_fits(model.config().vocab_size)?;
    std::fs::create_dir_all(out).map_err(|e| TrainError::io(out, e))?;
    let (model, opt, mut history, mut step) = start_state(model, opts, out, resume)?;
    let resumed_from = step;
    let mut stepper = Stepper::new(model, opt, opts)?;
    let bar = progress_bar(progress, opts.steps, step);
    if progress {
        bar.println(format!("training on {}", stepper.name()));
    }
    let tokens_per_step = opts.batch * opts.seq_len;
    let mut last_val = history.valid.last().map(|v| v.loss);
    let seg_start = Instant::now();
    let seconds_before = history.seconds;
    let end = opts.stop_at.map_or(opts.steps, |s| s.min(opts.steps));
    let patience_spent = |h: &History| opts.patience.is_some_and(|p| validations_since_best(&h.valid) >= p);
    let mut stopped_early = patience_spent(&history);
    while step < end && !stopped_early {
        let t0 = Instant::now();
        let lr = lr_at(step, opts.steps, opts.warmup, opts.lr, opts.min_lr_ratio);
        let batch = batch_for_step(&data.train, opts, step);
        let (lv, gnorm) = stepper.step(batch, lr, opts, step + 1).inspect_err(|_| bar.abandon())?;
        step += 1;
        let dt = t0.elapsed().as_secs_f64().max(1e-9);
        let tps = tokens_per_step as f64 / dt;
        history.tokens += tokens_per_step;
        history.train.push(StepRecord { step, loss: lv, lr, grad_norm: gnorm, tokens_per_s: tps });
        let val_msg = last_val.map(|v| format!(" val {v:.3}")).unwrap_or_default();
        bar.set_message(format!("loss {lv:.3}{val_msg} lr {lr:.2e} {tps:.0} tok/s"));
        bar.set_position(step as u64);
        if step.is_multiple_of(opts.val_every) || step == end {
            let vl = stepper.validate(&data.valid, opts)?;
            if !vl.is_finite() {
                bar.abandon();
                return Err(TrainError::NonFiniteLoss { step, loss: vl });
            }
            last_val = Some(vl);
            history.valid.push(ValRecord { step, loss: vl, perplexity: (vl as f64).exp() });
            history.seconds = seconds_before + seg_start.elapsed().as_secs_f64();
            let state = State { step, options: opts.clone() };
            stepper.save(out, &state, &history, &data.tokenizer_json)?;
            if let Some(best) = best_validation(&history.valid).filter(|b| b.step == step) {
                save_best(out, best)?;
            }
            stopped_early = patience_spent(&history);
        }
    }
    bar.finish();
    history.seconds = seconds_before + seg_start.elapsed().as_secs_f64();
    write_json(&out.join("history.json"), &history)?;
    let best = best_validation(&history.valid).cloned();
    Ok(TrainSummary { step, resumed_from, history, out: out.to_path_buf(), best, stopped_early })
}

#[cfg(not(target_arch = "wasm32"))]
/// Where training starts: `model` fresh at step 0, or, with `resume` and a checkpoint in `out`, the
/// checkpoint's model, optimizer moments, history and step (its architecture must be `model`'s).
fn start_state(
    model: TrainModel,
    opts: &TrainOptions,
    out: &Path,
    resume: bool,
) -> Result<(TrainModel, AdamW, History, usize)> {
    let checkpoint = if resume { find_checkpoint(out) } else { None };
    let Some(ck) = checkpoint else {
        let opt = AdamW::new(&model, opts.adamw)?;
        let history = History {
            model: model.config().name.clone(),
            num_params: model.num_params(),
            options: opts.clone(),
            train: Vec::new(),
            valid: Vec::new(),
            tokens: 0,
            seconds: 0.0,
        };
        return Ok((model, opt, history, 0));
    };
    let state: State = read_json(&ck.join("state.json"))?;
    let loaded = TrainModel::load_dir(&ck)?;
    if loaded.config().layers != model.config().layers
        || loaded.config().d_model != model.config().d_model
        || loaded.config().vocab_size != model.config().vocab_size
    {
        return Err(TrainError::bad_file(
            &ck.join("config.json"),
            "the checkpoint's architecture differs from the requested model; use a fresh --out",
        ));
    }
    let mut opt = AdamW::new(&loaded, opts.adamw)?;
    opt.load(&ck.join("optimizer.safetensors"), state.step)?;
    let mut history: History = read_json(&ck.join("history.json"))?;
    history.options = opts.clone();
    Ok((loaded, opt, history, state.step))
}

#[cfg(not(target_arch = "wasm32"))]
/// The terminal's progress bar over `steps` steps, at `step` (hidden without `progress`).
fn progress_bar(progress: bool, steps: usize, step: usize) -> indicatif::ProgressBar {
    if !progress {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(steps as u64);
    b.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed_precise}<{eta}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    b.set_position(step as u64);
    b
}
