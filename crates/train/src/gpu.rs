//! Training on the GPU: [`GpuTrain`] runs the optimizer step of [`crate::trainer::optimizer_step`]
//! with `attnlab_gpu::train::GpuTrainer` (forward, backward and AdamW in WGSL). The tensors that
//! feed a learned table (Kerple a/p, the T5 bucket table, mep-param a/p: distance tables; LRPE's
//! θ: its rotation's cos/sin table) stay here: each step this side builds the tables from them in
//! the candle graph ([`crate::attn::learned_table`], the same function the CPU trainer's attention
//! uses, or `cos/sin(s·θ)`), hands the values to the GPU, gets the tables' gradients back and
//! finishes the chain rule with `Σ table ⊙ dL/dtable` through candle's backward pass; those few
//! tensors take their AdamW step here, with the GPU's clip factor. LRPE's Householder vector stays
//! here too, untrained (the candle trainer detaches it).

use crate::attn::{learned_table, lower_bound_row, position_bias};
use crate::error::{Result, TrainError};
use crate::model::TrainModel;
use crate::optim::{decays, AdamW, AdamWConfig};
#[cfg(not(target_arch = "wasm32"))]
use attnlab_gpu::train::ItemTime;
use attnlab_gpu::train::{AdamSettings, GpuTrainer, LearnedKind};
use attnlab_gpu::GpuContext;
use candle_core::backprop::GradStore;
use candle_core::Tensor;
use std::collections::BTreeMap;

/// A model training on the GPU.
pub struct GpuTrain {
    gpu: GpuTrainer,
    /// The host's copy of the model: current for the host-owned tensors only.
    host: TrainModel,
    host_opt: AdamW,
    adamw: AdamWConfig,
    batch: usize,
    seq_len: usize,
    /// Σ g² of the GPU's gradients of the last batch.
    last_sumsq: f64,
}

/// Gradients of one batch: the loss and each tensor's gradient by name.
pub type Gradients = (f32, BTreeMap<String, Vec<f32>>);

/// Blocking forms of the async methods, for native callers (`attnlab train`, `attnlab bench`, tests);
/// the page awaits the async ones.
#[cfg(not(target_arch = "wasm32"))]
impl GpuTrain {
    /// Upload `model` to the first adapter for `[batch, seq_len]` windows.
    pub fn new(model: &TrainModel, batch: usize, seq_len: usize, adamw: AdamWConfig) -> Result<GpuTrain> {
        let ctx = pollster::block_on(GpuContext::new())?;
        GpuTrain::with_context(&ctx, model, batch, seq_len, adamw)
    }

    /// As [`GpuTrain::new`] on a given device.
    pub fn with_context(
        ctx: &GpuContext,
        model: &TrainModel,
        batch: usize,
        seq_len: usize,
        adamw: AdamWConfig,
    ) -> Result<GpuTrain> {
        pollster::block_on(GpuTrain::create(ctx, model, batch, seq_len, adamw))
    }

    /// Time each item of one step's forward and backward pass alone (`attnlab bench --train
    /// --profile`; see [`GpuTrainer::profile_step`]). The tables of the host-owned tensors are the
    /// last step's.
    pub fn profile_step(&mut self, windows: &[u32]) -> Result<Vec<ItemTime>> {
        Ok(self.gpu.profile_step(windows)?)
    }

    /// [`GpuTrain::gradients_async`].
    pub fn gradients(&mut self, windows: &[u32]) -> Result<Gradients> {
        pollster::block_on(self.gradients_async(windows))
    }

    /// [`GpuTrain::step_async`].
    pub fn step(&mut self, windows: &[u32], lr: f64, grad_clip: f64, step: usize) -> Result<(f32, f64)> {
        pollster::block_on(self.step_async(windows, lr, grad_clip, step))
    }

    /// [`GpuTrain::loss_async`].
    pub fn loss(&mut self, windows: &[u32], rows: usize) -> Result<f32> {
        pollster::block_on(self.loss_async(windows, rows))
    }

    /// [`GpuTrain::optimizer_async`].
    pub fn optimizer(&self) -> Result<AdamW> {
        pollster::block_on(self.optimizer_async())
    }

    /// [`GpuTrain::to_model_async`].
    pub fn to_model(&self) -> Result<TrainModel> {
        pollster::block_on(self.to_model_async())
    }
}

impl GpuTrain {
    /// Upload `model` to the device `ctx` for `[batch, seq_len]` windows.
    pub async fn create(
        ctx: &GpuContext,
        model: &TrainModel,
        batch: usize,
        seq_len: usize,
        adamw: AdamWConfig,
    ) -> Result<GpuTrain> {
        let core = model.to_core()?;
        let adam = AdamSettings {
            beta1: adamw.beta1,
            beta2: adamw.beta2,
            eps: adamw.eps,
            weight_decay: adamw.weight_decay,
        };
        let gpu = GpuTrainer::new(ctx, &core, batch, seq_len, adam, &decays).await?;
        let host = TrainModel::from_core(&core)?;
        let host_opt = AdamW::new(&host, adamw)?;
        Ok(GpuTrain { gpu, host, host_opt, adamw, batch, seq_len, last_sumsq: 0.0 })
    }

    /// The adapter's description.
    pub fn device(&self) -> String {
        self.gpu.adapter()
    }

    /// Loss and the gradient of every tensor for a `[batch, seq_len + 1]` batch of windows (no
    /// update): the GPU's own and the host's through the learned tables.
    pub async fn gradients_async(&mut self, windows: &[u32]) -> Result<Gradients> {
        let (loss, host, _) = self.forward_backward(windows).await?;
        let mut all = self.gpu.gradients().await?;
        for name in self.gpu.host_tensors() {
            let var = self.host.var(&name)?;
            if let Some(g) = host.get(var.as_tensor()) {
                all.insert(name, g.flatten_all()?.to_vec1::<f32>()?);
            }
        }
        Ok((loss, all))
    }

    /// One optimizer step (number `step`, 1-based, for the error) at `lr` with global-norm clipping
    /// to `grad_clip` (0: none), as `optimizer_step`: returns the batch loss and the gradient norm
    /// before clipping; a non-finite loss or norm leaves the model untouched and is an error.
    pub async fn step_async(
        &mut self,
        windows: &[u32],
        lr: f64,
        grad_clip: f64,
        step: usize,
    ) -> Result<(f32, f64)> {
        let (loss, host, host_sumsq) = self.forward_backward(windows).await?;
        if !loss.is_finite() {
            return Err(TrainError::NonFiniteLoss { step, loss });
        }
        let norm = (self.last_sumsq + host_sumsq).sqrt();
        if !norm.is_finite() {
            return Err(TrainError::NonFiniteLoss { step, loss: f32::NAN });
        }
        let factor = if grad_clip > 0.0 && norm > grad_clip { grad_clip / (norm + 1e-12) } else { 1.0 };
        self.gpu.update(lr, factor).await?;
        self.host_opt.step(&self.host, &host, lr, factor)?;
        Ok((loss, norm))
    }

    /// Mean next-token loss of `windows` (`rows ≤ batch` windows of `seq_len + 1` ids), forward
    /// pass only; a partial batch is padded with copies of its first window, which are not counted.
    pub async fn loss_async(&mut self, windows: &[u32], rows: usize) -> Result<f32> {
        let w = self.seq_len + 1;
        if rows == 0 || windows.len() != rows * w || rows > self.batch {
            return Err(TrainError::option("batch", format!("{rows} windows for a batch of {}", self.batch)));
        }
        self.push_tables()?;
        let mut full = windows.to_vec();
        while full.len() < self.batch * w {
            full.extend_from_slice(&windows[..w]);
        }
        let losses = self.gpu.position_losses(&full).await?;
        let real = &losses[..rows * self.seq_len];
        Ok((real.iter().map(|&x| f64::from(x)).sum::<f64>() / real.len() as f64) as f32)
    }

    /// The optimizer state: the GPU's moments read back and the host tensors' own.
    pub async fn optimizer_async(&self) -> Result<AdamW> {
        let (gm, gv, t) = self.gpu.moments().await?;
        let (hm, hv) = self.host_opt.moments();
        let (mut m, mut v) = (hm.clone(), hv.clone());
        for (dst, src) in [(&mut m, gm), (&mut v, gv)] {
            for (name, data) in src {
                let dims = self.host.var(&name)?.dims().to_vec();
                dst.insert(name, Tensor::from_vec(data, dims, self.host.device())?);
            }
        }
        Ok(AdamW::from_moments(self.adamw, t, m, v))
    }

    /// Continue from a saved optimizer state (a resumed run).
    pub fn restore_optimizer(&mut self, opt: &AdamW) -> Result<()> {
        let (m, v) = opt.moments();
        let flat = |src: &BTreeMap<String, Tensor>| -> Result<BTreeMap<String, Vec<f32>>> {
            src.iter().map(|(n, t)| Ok((n.clone(), t.flatten_all()?.to_vec1::<f32>()?))).collect()
        };
        self.gpu.set_moments(&flat(m)?, &flat(v)?, opt.t)?;
        self.host_opt = AdamW::from_moments(self.adamw, opt.t, m.clone(), v.clone());
        Ok(())
    }

    /// The current model (GPU tensors read back, host tensors from here).
    pub async fn to_model_async(&self) -> Result<TrainModel> {
        let mut weights = self.gpu.weights().await?;
        for name in self.gpu.host_tensors() {
            let var = self.host.var(&name)?;
            let data = var.as_tensor().flatten_all()?.to_vec1::<f32>()?;
            weights.tensors.insert(name, attnlab_core::weights::Tensor::f32(var.dims().to_vec(), data));
        }
        TrainModel::from_weights(self.host.config().clone(), &weights)
    }

    /// Build each learned table `[H, T]` from the host tensors (in the graph) and write it to the GPU.
    fn push_tables(&mut self) -> Result<Vec<Tensor>> {
        let distances: Vec<f64> = (0..self.seq_len).map(|d| d as f64).collect();
        let mut tables = Vec::new();
        for (i, slot) in self.gpu.learned().to_vec().iter().enumerate() {
            let table = match &slot.kind {
                LearnedKind::Table(t) => learned_table(&self.host, t, &distances)?,
                LearnedKind::Bias(b) => position_bias(&self.host, b, self.seq_len)?
                    .ok_or_else(|| TrainError::option("bias", "a learned bias without values"))?,
                LearnedKind::LowerBound { row, .. } => lower_bound_row(&self.host, row)?,
                // (cos sθ_k, sin sθ_k) at each position s: `[T, pairs, 2]`.
                LearnedKind::Angles { theta, pairs } => {
                    let th = self.host.var(theta)?.as_tensor().reshape((1, *pairs))?;
                    let pos = Tensor::from_vec(
                        distances.iter().map(|&d| d as f32).collect(),
                        (self.seq_len, 1),
                        th.device(),
                    )?;
                    let ang = pos.broadcast_mul(&th)?;
                    Tensor::stack(&[ang.cos()?, ang.sin()?], 2)?
                }
            };
            self.gpu.set_table(i, &table.flatten_all()?.to_vec1::<f32>()?)?;
            tables.push(table);
        }
        Ok(tables)
    }

    /// Push the learned tables, run forward and backward on the GPU, and differentiate the tables'
    /// host tensors. Returns the loss, the host gradients and their Σ g².
    async fn forward_backward(&mut self, windows: &[u32]) -> Result<(f32, GradStore, f64)> {
        let tables = self.push_tables()?;
        let out = self.gpu.forward_backward(windows).await?;
        self.last_sumsq = out.sumsq;
        // Σ_tables Σ B ⊙ dL/dB: its gradient with respect to a host tensor is that tensor's dL/dθ.
        let mut proxy: Option<Tensor> = None;
        for (table, grad) in tables.iter().zip(&out.table_grads) {
            let g = Tensor::from_vec(grad.clone(), table.dims(), table.device())?;
            let term = (table * g)?.sum_all()?;
            proxy = Some(match proxy {
                Some(p) => (p + term)?,
                None => term,
            });
        }
        let grads = match proxy {
            Some(p) => p.backward()?,
            None => GradStore::default(),
        };
        let mut sumsq = 0.0f64;
        for name in self.gpu.host_tensors() {
            if let Some(g) = grads.get(self.host.var(&name)?.as_tensor()) {
                sumsq += f64::from(g.sqr()?.sum_all()?.to_scalar::<f32>()?);
            }
        }
        Ok((out.loss, grads, sumsq))
    }
}
