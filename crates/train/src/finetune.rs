//! Fine-tuning a loaded model on one text, a step at a time: what the page's "train on this text"
//! runs in its worker. No files and no clock: the caller drives [`FineTune::step`], times it, stops
//! whenever it likes and takes the model as it is after the last finished step
//! ([`FineTune::model`]). The step itself is the trainer's ([`optimizer_step`]: loss, backward,
//! clipping, AdamW), so the page trains exactly as `attnlab train` does.

use crate::error::{Result, TrainError};
use crate::model::TrainModel;
use crate::optim::{lr_at, AdamW, AdamWConfig};
use crate::trainer::{batch_for_step, optimizer_step, TrainOptions};
use attnlab_core::Model;
use candle_core::Tensor;

/// The fewest tokens a text may have: a window of 8 inputs and the token after it.
pub const MIN_TUNE_TOKENS: usize = 9;

/// The largest model the page fine-tunes: the weights, AdamW's two moments and the gradients are
/// f32 copies in the worker's memory, and the CPU makes ~1k tokens per second at 1M parameters.
pub const MAX_TUNE_PARAMS: usize = 20_000_000;

/// What the user sets for a fine-tune (the rest is the trainer's defaults).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TuneOptions {
    /// Optimizer steps.
    pub steps: usize,
    /// Peak learning rate (linear warmup over the first tenth, cosine down to a tenth of it).
    pub lr: f64,
    /// Windows per step.
    pub batch: usize,
    /// Tokens per window (cut to the text and the model's training length).
    pub seq_len: usize,
    /// Seed of the window order.
    pub seed: u64,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions { steps: 100, lr: 1e-3, batch: 4, seq_len: 64, seed: 0 }
    }
}

/// One finished step.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TuneStep {
    /// Steps done (1-based).
    pub step: usize,
    /// Mean loss of the step's windows, before the update.
    pub loss: f32,
    pub lr: f64,
    /// Global gradient norm before clipping.
    pub grad_norm: f64,
}

/// A fine-tune in progress.
pub struct FineTune {
    model: TrainModel,
    opt: AdamW,
    opts: TrainOptions,
    tokens: Vec<u32>,
    done: usize,
}

impl FineTune {
    /// Start from `model`'s weights on the token ids `tokens`. Refused with the reason: a model
    /// above [`MAX_TUNE_PARAMS`], a text under [`MIN_TUNE_TOKENS`], ids outside the vocabulary,
    /// zero steps or windows, or a learning rate that is not finite and positive.
    pub fn new(model: &Model, tokens: Vec<u32>, opts: &TuneOptions) -> Result<FineTune> {
        let train_opts = plan(model, &tokens, opts)?;
        let model = TrainModel::from_core(model)?;
        let opt = AdamW::new(&model, train_opts.adamw)?;
        Ok(FineTune { model, opt, opts: train_opts, tokens, done: 0 })
    }

    /// Tokens per window actually used.
    pub fn seq_len(&self) -> usize {
        self.opts.seq_len
    }

    /// Steps done so far.
    pub fn steps_done(&self) -> usize {
        self.done
    }

    /// Whether every step asked for is done.
    pub fn finished(&self) -> bool {
        self.done >= self.opts.steps
    }

    /// One optimizer step on `batch` random windows of the text (the trainer's batch sampler).
    /// A non-finite loss is an error and leaves the model as it was after the step before.
    pub fn step(&mut self) -> Result<TuneStep> {
        let o = &self.opts;
        let lr = lr_at(self.done, o.steps, o.warmup, o.lr, o.min_lr_ratio);
        let batch = batch_for_step(&self.tokens, o, self.done);
        let batch = Tensor::from_vec(batch, (o.batch, o.seq_len + 1), self.model.device())?;
        let (loss, grad_norm) =
            optimizer_step(&self.model, &mut self.opt, &batch, lr, o.grad_clip, self.done + 1)?;
        self.done += 1;
        Ok(TuneStep { step: self.done, loss, lr, grad_norm })
    }

    /// Mean next-token loss over the whole text, in consecutive windows of [`FineTune::seq_len`]
    /// inputs (every token after the first is predicted once; each window starts at position 0).
    pub fn text_loss(&self) -> Result<f32> {
        text_loss(&self.model, &self.tokens, self.opts.seq_len)
    }

    /// The model as it is after the last finished step.
    pub fn model(&self) -> Result<Model> {
        self.model.to_core()
    }
}

/// Check a fine-tune's inputs (every refusal names the problem) and turn its options into the
/// trainer's: windows of min(seq_len, training length, text − 1) tokens, 10 % warmup, no weight decay.
fn plan(model: &Model, tokens: &[u32], opts: &TuneOptions) -> Result<TrainOptions> {
    let cfg = model.config();
    let params = model.weights().num_params();
    if params > MAX_TUNE_PARAMS {
        return Err(TrainError::option(
            "model",
            format!("it has {params} parameters; the page fine-tunes models of up to {MAX_TUNE_PARAMS}"),
        ));
    }
    if tokens.len() < MIN_TUNE_TOKENS {
        return Err(TrainError::option(
            "text",
            format!("it has {} tokens; fine-tuning needs at least {MIN_TUNE_TOKENS}", tokens.len()),
        ));
    }
    if let Some(&id) = tokens.iter().find(|&&id| id as usize >= cfg.vocab_size) {
        return Err(TrainError::option("text", format!("token id {id} is outside the model's vocabulary")));
    }
    if opts.steps == 0 || opts.batch == 0 || opts.seq_len == 0 {
        return Err(TrainError::option("steps/batch/window", "each must be at least 1"));
    }
    if !(opts.lr.is_finite() && opts.lr > 0.0 && opts.lr <= 1.0) {
        return Err(TrainError::option("lr", format!("{} must be in (0, 1]", opts.lr)));
    }
    let seq_len = opts.seq_len.min(cfg.train_context.max(1)).min(tokens.len() - 1);
    let train_opts = TrainOptions {
        steps: opts.steps,
        batch: opts.batch,
        seq_len,
        lr: opts.lr,
        warmup: opts.steps / 10,
        seed: opts.seed,
        // The text's own effect only: no pull towards zero.
        adamw: AdamWConfig { weight_decay: 0.0, ..AdamWConfig::default() },
        ..TrainOptions::default()
    };
    Ok(train_opts)
}

/// Mean next-token loss of `model` over all of `tokens`, in consecutive windows of `seq_len + 1`.
fn text_loss(model: &TrainModel, tokens: &[u32], seq_len: usize) -> Result<f32> {
    let w = seq_len + 1;
    let (mut total, mut count) = (0.0f64, 0usize);
    let mut start = 0;
    while start + 1 < tokens.len() {
        let window = &tokens[start..(start + w).min(tokens.len())];
        let t = Tensor::from_vec(window.to_vec(), (1, window.len()), model.device())?;
        let targets = window.len() - 1;
        total += model.loss(&t)?.to_scalar::<f32>()? as f64 * targets as f64;
        count += targets;
        start += targets;
    }
    Ok((total / count.max(1) as f64) as f32)
}

/// [`FineTune`] on the GPU (`crate::gpu::GpuTrain`, the WGSL trainer): the same options, batches,
/// schedule and clipping; its methods are async, so the page awaits them in its worker (WebGPU).
#[cfg(feature = "gpu")]
pub struct GpuFineTune {
    train: crate::gpu::GpuTrain,
    opts: TrainOptions,
    tokens: Vec<u32>,
    done: usize,
}

#[cfg(feature = "gpu")]
impl GpuFineTune {
    /// As [`FineTune::new`], on the device `ctx`.
    pub async fn new(
        ctx: &attnlab_gpu::GpuContext,
        model: &Model,
        tokens: Vec<u32>,
        opts: &TuneOptions,
    ) -> Result<GpuFineTune> {
        let opts = plan(model, &tokens, opts)?;
        let train = crate::gpu::GpuTrain::create(
            ctx,
            &TrainModel::from_core(model)?,
            opts.batch,
            opts.seq_len,
            opts.adamw,
        )
        .await?;
        Ok(GpuFineTune { train, opts, tokens, done: 0 })
    }

    /// Tokens per training window.
    pub fn seq_len(&self) -> usize {
        self.opts.seq_len
    }

    /// Whether every step asked for is done.
    pub fn finished(&self) -> bool {
        self.done >= self.opts.steps
    }

    /// The adapter it trains on.
    pub fn device(&self) -> String {
        self.train.device()
    }

    /// One optimizer step, as [`FineTune::step`].
    pub async fn step(&mut self) -> Result<TuneStep> {
        let o = &self.opts;
        let lr = lr_at(self.done, o.steps, o.warmup, o.lr, o.min_lr_ratio);
        let batch = batch_for_step(&self.tokens, o, self.done);
        let (loss, grad_norm) = self.train.step_async(&batch, lr, o.grad_clip, self.done + 1).await?;
        self.done += 1;
        Ok(TuneStep { step: self.done, loss, lr, grad_norm })
    }

    /// Mean next-token loss over the whole text (the model read back, the loss on the CPU: its
    /// last window is shorter than the GPU's fixed shape).
    pub async fn text_loss(&self) -> Result<f32> {
        text_loss(&self.train.to_model_async().await?, &self.tokens, self.opts.seq_len)
    }

    /// The model after the last finished step.
    pub async fn model(&self) -> Result<Model> {
        self.train.to_model_async().await?.to_core()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use attnlab_core::config::{ModelConfig, SizePreset};

    fn tiny() -> Model {
        let cfg = ModelConfig::preset("alibi", SizePreset::tiny(64)).expect("alibi is in the catalog");
        Model::random(cfg, 7).expect("random")
    }

    fn text(n: usize, vocab: usize) -> Vec<u32> {
        (0..n).map(|i| ((i * 7 + i / 5) % vocab) as u32).collect()
    }

    #[test]
    fn steps_lower_the_loss_on_the_text_and_the_model_changes() {
        let base = tiny();
        let tokens = text(200, base.config().vocab_size);
        let opts = TuneOptions { steps: 12, lr: 3e-3, batch: 2, seq_len: 32, seed: 1 };
        let mut tune = FineTune::new(&base, tokens, &opts).expect("fine-tune");
        let before = tune.text_loss().expect("loss");
        while !tune.finished() {
            let s = tune.step().expect("step");
            assert!(s.loss.is_finite() && s.grad_norm > 0.0);
        }
        let after = tune.text_loss().expect("loss");
        assert!(after < before - 0.1, "text loss {before} → {after}");
        let tuned = tune.model().expect("model");
        let (a, b) = (base.weights().tensor("tok_emb.weight"), tuned.weights().tensor("tok_emb.weight"));
        assert_ne!(a.expect("base").data.to_f32(), b.expect("tuned").data.to_f32());
        assert_eq!(tune.steps_done(), 12);
    }

    #[test]
    fn the_model_after_zero_steps_is_the_model_given() {
        let base = tiny();
        let tune =
            FineTune::new(&base, text(50, base.config().vocab_size), &TuneOptions::default()).expect("tune");
        let tuned = tune.model().expect("model");
        for (name, t) in &base.weights().tensors {
            let u = tuned.weights().tensor(name).expect("same tensors");
            assert_eq!(t.data.to_f32(), u.data.to_f32(), "{name}");
        }
    }

    #[test]
    fn bad_input_is_refused_by_name() {
        let base = tiny();
        let v = base.config().vocab_size;
        let err = |tokens: Vec<u32>, o: TuneOptions| {
            FineTune::new(&base, tokens, &o).err().expect("refused").to_string()
        };
        assert!(err(text(5, v), TuneOptions::default()).contains("5 tokens"));
        assert!(err(vec![v as u32; 20], TuneOptions::default()).contains("outside the model's vocabulary"));
        assert!(err(text(50, v), TuneOptions { steps: 0, ..TuneOptions::default() }).contains("at least 1"));
        assert!(err(text(50, v), TuneOptions { lr: f64::NAN, ..TuneOptions::default() }).contains("lr"));
        let short = FineTune::new(&base, text(20, v), &TuneOptions::default()).expect("short text");
        assert_eq!(short.seq_len(), 19, "the window is cut to the text");
    }
}
