//! Training on the GPU (issue 14 item 1): the forward pass, its backward pass and AdamW for a
//! batch of `[B, T]` windows, in WGSL (shaders/gemm.wgsl, shaders/train.wgsl), on the same layer
//! lowering the CPU reference, the GPU runtime and the candle trainer run.
//!
//! [`GpuTrainer`] keeps the parameters, their gradients and the AdamW moments in three flat f32
//! buffers (tensors with weight decay first, so one dispatch updates them all), and every
//! activation the backward pass reads. One training step is two submissions:
//! [`GpuTrainer::forward_backward`] (loss, every gradient, the partial sums of the gradient norm and
//! the gradients of learned distance tables, read back together) and [`GpuTrainer::update`] (clip
//! factor and AdamW). It trains every catalog variant (docs/gpu-training.md): the softmax family
//! with distance tables, FIRE's and CoPE's biases, RoPE, Diag blocks and T1's ReLU rows; the linear
//! family in its exact parallel form with every gate, feature map, LRPE transform, denominator and
//! post step; with RMSNorm, SwiGLU, a tied or untied head and no or
//! sinusoidal absolute positions. Tensors that feed a table (learned distance tables, FIRE's MLP,
//! LRPE's θ, HGRN2's lower bounds) stay on the host, which writes the tables and finishes their
//! chain rule (`attnlab_train::gpu`). Anything else is refused by name ([`GpuError::Unsupported`]).

mod kernels;
mod mixer;
mod record;
pub use record::split_k;

#[cfg(test)]
pub(crate) use kernels::SPECS;

use crate::context::GpuContext;
use crate::error::{GpuError, Result};
use crate::params::AdamParams;
use attnlab_core::config::{AbsolutePosition, FfnKind, ModelConfig, NormKind};
use attnlab_core::lowering::{Bias, Gate, LearnedTable, LowerBoundRow, Lowering, Rotation};
use attnlab_core::model::tensor_specs;
use attnlab_core::weights::{Tensor as CoreTensor, Weights};
use attnlab_core::Model;
use kernels::{threads, Kernels, Op, K};
use std::collections::{BTreeMap, HashMap};
use wgpu::util::DeviceExt;

/// The time of one item of a profiled step ([`GpuTrainer::profile_step`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ItemTime {
    /// The kernel's entry point (`"copy"` for a buffer copy).
    pub kernel: &'static str,
    /// Workgroups dispatched (a copy: its bytes in the first slot).
    pub grid: [u32; 3],
    /// Submission to completion.
    pub seconds: f64,
}

/// AdamW settings of the GPU update (the candle trainer's `AdamWConfig`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamSettings {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

/// One tensor's place in the flat parameter buffer.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    shape: Vec<usize>,
    off: usize,
    len: usize,
}

/// The flat layout of the GPU-owned parameters: decayed tensors first, each group in the core's
/// canonical order.
#[derive(Debug)]
struct Layout {
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    n_decay: usize,
    total: usize,
}

impl Layout {
    fn new(cfg: &ModelConfig, host: &[String], decays: &dyn Fn(&str, usize) -> bool) -> Layout {
        let specs: Vec<_> = tensor_specs(cfg).into_iter().filter(|s| !host.contains(&s.name)).collect();
        let (decayed, other): (Vec<_>, Vec<_>) =
            specs.into_iter().partition(|s| decays(&s.name, s.shape.len()));
        let mut entries = Vec::new();
        let mut off = 0;
        let mut n_decay = 0;
        for (group, list) in [decayed, other].into_iter().enumerate() {
            for s in list {
                let len = s.shape.iter().product();
                entries.push(Entry { name: s.name, shape: s.shape, off, len });
                off += len;
            }
            if group == 0 {
                n_decay = off;
            }
        }
        let by_name = entries.iter().enumerate().map(|(i, e)| (e.name.clone(), i)).collect();
        Layout { entries, by_name, n_decay, total: off }
    }

    /// `model`'s trained tensors in this layout's order, as one flat f32 array (at least one value).
    fn flatten(&self, model: &Model) -> Result<Vec<f32>> {
        let mut flat = vec![0.0f32; self.total.max(1)];
        for e in &self.entries {
            let t = model.weights().tensor(&e.name).map_err(|err| GpuError::Unsupported(err.to_string()))?;
            flat[e.off..e.off + e.len].copy_from_slice(&t.data.to_f32());
        }
        Ok(flat)
    }

    /// Offset of tensor `name` (a bug if absent: names come from `tensor_specs`).
    fn off(&self, name: &str) -> Result<usize> {
        self.by_name
            .get(name)
            .map(|&i| self.entries[i].off)
            .ok_or_else(|| GpuError::Unsupported(format!("tensor {name} is not trained on the GPU")))
    }
}

/// A table computed on the host from learned tensors each step: the host writes its values, the
/// GPU its gradient, the host finishes the chain rule.
#[derive(Debug, Clone)]
pub struct LearnedSlot {
    /// The layer.
    pub layer: usize,
    pub kind: LearnedKind,
}

/// What a learned table holds.
#[derive(Debug, Clone)]
pub enum LearnedKind {
    /// A distance table `[H, T]` (`B_h(d)` at `h·T + d`) from its per-head parameters.
    Table(LearnedTable),
    /// LRPE's learned angles θ (`[pairs]`, the tensor `theta`): the table `[T, pairs, 2]` of
    /// `(cos sθ_k, sin sθ_k)` at each position s.
    Angles { theta: String, pairs: usize },
    /// FIRE's bias `[H, T, T]` (`B_h(i, j)` at `(h·T + i)·T + j`) from its MLP (the layer's
    /// `Bias::Fire`).
    Bias(Bias),
    /// HGRN2's lower bounds β `[width]`: row `row` of the cumulative softmax of `tensor`
    /// (`LowerBoundRow`).
    LowerBound { row: LowerBoundRow, width: usize },
}

impl LearnedSlot {
    /// Values in the table for `h` heads and `t` positions.
    pub fn len(&self, h: usize, t: usize) -> usize {
        match &self.kind {
            LearnedKind::Table(_) => h * t,
            LearnedKind::Angles { pairs, .. } => t * pairs * 2,
            LearnedKind::Bias(_) => h * t * t,
            LearnedKind::LowerBound { width, .. } => *width,
        }
    }

    /// The host-owned tensors it is computed from.
    fn tensors(&self) -> Vec<String> {
        match &self.kind {
            LearnedKind::Table(t) => table_tensors(t),
            LearnedKind::Angles { theta, .. } => vec![theta.clone()],
            LearnedKind::Bias(Bias::Fire { c, l_mult, w1, b1, w2, b2, .. }) => {
                vec![
                    c.name.clone(),
                    l_mult.name.clone(),
                    w1.name.clone(),
                    b1.name.clone(),
                    w2.name.clone(),
                    b2.name.clone(),
                ]
            }
            LearnedKind::Bias(_) => Vec::new(),
            LearnedKind::LowerBound { row, .. } => vec![row.tensor.clone()],
        }
    }
}

/// What [`GpuTrainer::forward_backward`] read back.
#[derive(Debug, Clone)]
pub struct StepGrads {
    /// Mean next-token cross-entropy of the batch.
    pub loss: f32,
    /// Σ g² over every GPU-owned gradient (f64 sum of f32 partial sums).
    pub sumsq: f64,
    /// The gradient of each learned table ([`LearnedSlot::len`] values) in [`GpuTrainer::learned`]
    /// order.
    pub table_grads: Vec<Vec<f32>>,
}

/// Shapes of a training step.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Dims {
    pub b: usize,
    pub t: usize,
    pub r: usize,
    pub d: usize,
    pub h: usize,
    pub dh: usize,
    pub a: usize,
    pub f: usize,
    pub v: usize,
}

impl Dims {
    /// The shapes of `[batch, seq_len]` windows through a model of `cfg`.
    fn new(cfg: &ModelConfig, batch: usize, seq_len: usize) -> Dims {
        Dims {
            b: batch,
            t: seq_len,
            r: batch * seq_len,
            d: cfg.d_model,
            h: cfg.n_heads,
            dh: cfg.head_dim,
            a: cfg.n_heads * cfg.head_dim,
            f: cfg.ffn.hidden,
            v: cfg.vocab_size,
        }
    }
}

/// Forward, backward and AdamW of one model on the GPU.
pub struct GpuTrainer {
    ctx: GpuContext,
    cfg: ModelConfig,
    dims: Dims,
    layout: Layout,
    kernels: Kernels,
    params: wgpu::Buffer,
    grads: wgpu::Buffer,
    moments: [wgpu::Buffer; 2],
    /// Inputs of a step: token ids `[R]`, targets `[R]`, rows grouped by token (`[V + 1 + R]`).
    tok: wgpu::Buffer,
    tgt: wgpu::Buffer,
    csr: wgpu::Buffer,
    /// Values of each learned table (written by the host before a step).
    learned_tables: Vec<wgpu::Buffer>,
    learned: Vec<LearnedSlot>,
    /// Host-owned tensors without a gradient (LRPE's fixed Householder vector).
    frozen: Vec<String>,
    recorded: record::Recorded,
    adam_uniform: wgpu::Buffer,
    adam_op: Op,
    /// AdamW updates done.
    t: usize,
    adam: AdamSettings,
}

/// A batch shape (`dims.b` × `dims.t`) the model can train on, and buffers this device can hold.
fn check_shape(ctx: &GpuContext, cfg: &ModelConfig, dims: &Dims, layout: &Layout) -> Result<()> {
    if dims.b == 0 || dims.t == 0 || dims.t > cfg.max_context {
        return Err(GpuError::Unsupported(format!(
            "batch {} × seq-len {} (max_context {})",
            dims.b, dims.t, cfg.max_context
        )));
    }
    ctx.check_size("training scores", (4 * dims.b * dims.h * dims.t * dims.t) as u64)?;
    ctx.check_size("logits", (4 * dims.r * dims.v) as u64)?;
    ctx.check_size("parameters", (4 * layout.total) as u64)
}

impl GpuTrainer {
    /// Upload `model` for training on `[batch, seq_len]` windows. `decays(name, rank)` says which
    /// tensors get weight decay. The tensors that feed learned distance tables stay on the host
    /// ([`GpuTrainer::host_tensors`]).
    pub async fn new(
        ctx: &GpuContext,
        model: &Model,
        batch: usize,
        seq_len: usize,
        adam: AdamSettings,
        decays: &dyn Fn(&str, usize) -> bool,
    ) -> Result<GpuTrainer> {
        let cfg = model.config().clone();
        check_config(&cfg)?;
        let lowerings: Vec<Lowering> = model.lowerings().cloned().collect();
        let (learned, frozen) = learned_slots(&lowerings);
        let mut host = host_tensors(&learned);
        host.extend(frozen.iter().cloned());
        let layout = Layout::new(&cfg, &host, decays);
        let dims = Dims::new(&cfg, batch, seq_len);
        check_shape(ctx, &cfg, &dims, &layout)?;
        let dev = &ctx.device;
        let scope = dev.push_error_scope(wgpu::ErrorFilter::Validation);
        let oom = dev.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let kernels = Kernels::new(dev);
        let params = init_storage(dev, "train params", &layout.flatten(model)?);
        let [grads, m, v] = ["grads", "adam m", "adam v"].map(|l| zeroed(dev, l, layout.total));
        let (tok, tgt) = (zeroed(dev, "tokens", dims.r), zeroed(dev, "targets", dims.r));
        let csr = zeroed(dev, "rows by token", dims.v + 1 + dims.r);
        let learned_tables: Vec<_> =
            learned.iter().map(|l| zeroed(dev, "learned table", l.len(dims.h, dims.t))).collect();
        let mut trainer_parts = record::Parts {
            kernels: &kernels,
            dims,
            layout: &layout,
            params: &params,
            grads: &grads,
            dev,
            eps: cfg.norm.eps as f32,
        };
        let recorded = {
            let by_layer: Vec<_> =
                learned.iter().zip(&learned_tables).map(|(l, b)| (l.layer, b.clone())).collect();
            record::record(&mut trainer_parts, &cfg, &lowerings, &by_layer, [&tok, &tgt, &csr])?
        };
        let adam_uniform = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("adam params"),
            size: std::mem::size_of::<AdamParams>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let adam_op =
            kernels.op_on(K::Adamw, &adam_uniform, &[&grads, &params, &m, &v], threads(layout.total));
        let (o, s) = (oom.pop().await, scope.pop().await);
        if let Some(e) = o.or(s) {
            return Err(GpuError::Validation(format!("training setup: {e}")));
        }
        Ok(GpuTrainer {
            ctx: ctx.clone(),
            cfg,
            dims,
            layout,
            kernels,
            params,
            grads,
            moments: [m, v],
            tok,
            tgt,
            csr,
            learned_tables,
            learned,
            frozen,
            recorded,
            adam_uniform,
            adam_op,
            t: 0,
            adam,
        })
    }

    /// The learned distance tables whose values the host writes ([`GpuTrainer::set_table`]) and
    /// whose gradients come back in [`StepGrads::table_grads`], in that order.
    pub fn learned(&self) -> &[LearnedSlot] {
        &self.learned
    }

    /// Names of the tensors the host owns, each once (layers may share them: `pos.*`): the
    /// parameters of learned tables, then tensors that get no gradient (LRPE's fixed Householder
    /// vector, detached in the candle trainer too).
    pub fn host_tensors(&self) -> Vec<String> {
        let mut out = host_tensors(&self.learned);
        out.extend(self.frozen.iter().cloned());
        out
    }

    /// Number of GPU-owned parameters.
    pub fn num_params(&self) -> usize {
        self.layout.total
    }

    /// Write learned table `i`'s values (layout in [`LearnedKind`]) for the next step.
    pub fn set_table(&self, i: usize, values: &[f32]) -> Result<()> {
        let buf = self
            .learned_tables
            .get(i)
            .ok_or_else(|| GpuError::Unsupported(format!("no learned table {i}")))?;
        let want = self.learned[i].len(self.dims.h, self.dims.t);
        if values.len() != want {
            return Err(GpuError::Unsupported(format!(
                "table {i}: {} values, expected {want}",
                values.len()
            )));
        }
        self.ctx.queue.write_buffer(buf, 0, bytemuck::cast_slice(values));
        Ok(())
    }

    /// Loss and gradients of one `[B, T + 1]` batch of token windows (inputs `[:, :-1]`, targets
    /// `[:, 1:]`), as the candle trainer's `TrainModel::loss`.
    pub async fn forward_backward(&mut self, windows: &[u32]) -> Result<StepGrads> {
        let Dims { r, h, t, .. } = self.dims;
        let rec = &self.recorded;
        let mut extra = vec![(&rec.partial, rec.partials)];
        extra.extend(rec.table_grads.iter().zip(&self.learned).map(|(b, l)| (b, l.len(h, t))));
        let out = self.run(windows, false, &extra).await?;
        let f = |w: &[u32]| -> Vec<f32> { w.iter().map(|&x| f32::from_bits(x)).collect() };
        let loss = f(&out[..r]).iter().map(|&x| f64::from(x)).sum::<f64>() / r as f64;
        let sumsq = f(&out[r..r + rec.partials]).iter().map(|&x| f64::from(x)).sum();
        let mut at = r + rec.partials;
        let table_grads = (self.learned.iter())
            .map(|l| {
                let g = f(&out[at..at + l.len(h, t)]);
                at += l.len(h, t);
                g
            })
            .collect();
        Ok(StepGrads { loss: loss as f32, sumsq, table_grads })
    }

    /// The next-token loss of every input position `[B·T]` of a batch (forward pass only).
    pub async fn position_losses(&mut self, windows: &[u32]) -> Result<Vec<f32>> {
        let out = self.run(windows, true, &[]).await?;
        Ok(out.into_iter().map(f32::from_bits).collect())
    }

    /// Write a batch, run the step (or its forward part) and read back the per-row losses followed
    /// by `extra` buffers (with their word counts).
    async fn run(
        &self,
        windows: &[u32],
        forward_only: bool,
        extra: &[(&wgpu::Buffer, usize)],
    ) -> Result<Vec<u32>> {
        self.write_batch(windows)?;
        let r = self.dims.r;
        let rec = &self.recorded;
        let words = r + extra.iter().map(|e| e.1).sum::<usize>();
        let staging = readback(&self.ctx.device, words);
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        rec.encode(&self.kernels, &mut enc, forward_only);
        let mut at = 0u64;
        let sources = std::iter::once((&rec.loss, r)).chain(extra.iter().copied());
        for (buf, n) in sources {
            enc.copy_buffer_to_buffer(buf, 0, &staging, at, (4 * n) as u64);
            at += (4 * n) as u64;
        }
        self.ctx.count_dispatches(rec.dispatches(forward_only) as u64);
        self.ctx.submit(enc.finish()).await?;
        self.ctx.read_words(&staging, words).await
    }

    /// Write the inputs, targets and token index of a `[B, T + 1]` batch of windows.
    fn write_batch(&self, windows: &[u32]) -> Result<()> {
        let Dims { b, t, r, v, .. } = self.dims;
        if windows.len() != b * (t + 1) {
            return Err(GpuError::Unsupported(format!(
                "a batch of {} tokens, expected {b} windows of {}",
                windows.len(),
                t + 1
            )));
        }
        if let Some(&bad) = windows.iter().find(|&&id| id as usize >= v) {
            return Err(GpuError::Unsupported(format!("token id {bad} is outside the vocabulary of {v}")));
        }
        let mut inp = Vec::with_capacity(r);
        let mut tgt = Vec::with_capacity(r);
        for w in windows.chunks_exact(t + 1) {
            inp.extend_from_slice(&w[..t]);
            tgt.extend_from_slice(&w[1..]);
        }
        let q = &self.ctx.queue;
        q.write_buffer(&self.tok, 0, bytemuck::cast_slice(&inp));
        q.write_buffer(&self.tgt, 0, bytemuck::cast_slice(&tgt));
        q.write_buffer(&self.csr, 0, bytemuck::cast_slice(&rows_by_token(&inp, v)));
        Ok(())
    }

    /// Run one step's forward and backward pass item by item, each alone in a submission that is
    /// waited for, and time them: where a step's time goes, by kernel (`attnlab bench --train
    /// --profile`). Every time includes a submission and a wait (tens of µs on a real GPU), so
    /// the sum exceeds a step's time; the large items are what it is for.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn profile_step(&mut self, windows: &[u32]) -> Result<Vec<ItemTime>> {
        self.write_batch(windows)?;
        self.ctx.wait_idle()?;
        let rec = &self.recorded;
        let mut times = Vec::with_capacity(rec.len());
        for i in 0..rec.len() {
            let mut enc = self.ctx.device.create_command_encoder(&Default::default());
            let (kernel, grid) = rec.encode_item(&self.kernels, &mut enc, i);
            let t0 = std::time::Instant::now();
            self.ctx.queue.submit([enc.finish()]);
            self.ctx.wait_idle()?;
            times.push(ItemTime { kernel, grid, seconds: t0.elapsed().as_secs_f64() });
        }
        self.ctx.check()?;
        Ok(times)
    }

    /// One AdamW update of the GPU-owned parameters at learning rate `lr`, every gradient scaled by
    /// `clip` (global-norm clipping), with the gradients of the last [`GpuTrainer::forward_backward`].
    pub async fn update(&mut self, lr: f64, clip: f64) -> Result<()> {
        self.t += 1;
        let a = self.adam;
        let p = AdamParams {
            n: self.layout.total as u32,
            n_decay: self.layout.n_decay as u32,
            lr: lr as f32,
            b1: a.beta1 as f32,
            b2: a.beta2 as f32,
            bc1: (1.0 - a.beta1.powi(self.t as i32)) as f32,
            bc2: (1.0 - a.beta2.powi(self.t as i32)) as f32,
            eps: a.eps as f32,
            decay: (1.0 - lr * a.weight_decay) as f32,
            clip: clip as f32,
            ..AdamParams::default()
        };
        self.ctx.queue.write_buffer(&self.adam_uniform, 0, &crate::params::uniform_bytes(&p));
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        self.kernels.encode(&mut enc, &[&self.adam_op]);
        self.ctx.count_dispatches(1);
        self.ctx.submit(enc.finish()).await
    }

    /// The gradients of the last [`GpuTrainer::forward_backward`], by tensor name.
    pub async fn gradients(&self) -> Result<BTreeMap<String, Vec<f32>>> {
        self.read_flat(&self.grads).await
    }

    /// The GPU-owned parameters as core tensors (the host merges its own).
    pub async fn weights(&self) -> Result<Weights> {
        let mut tensors = BTreeMap::new();
        for (name, data) in self.read_flat(&self.params).await? {
            let shape = self.layout.entries[self.layout.by_name[&name]].shape.clone();
            tensors.insert(name, CoreTensor::f32(shape, data));
        }
        Ok(Weights { tensors })
    }

    /// The AdamW moments `(m, v)` by tensor name, and the number of updates done.
    pub async fn moments(&self) -> Result<(BTreeMap<String, Vec<f32>>, BTreeMap<String, Vec<f32>>, usize)> {
        let [m, v] = &self.moments;
        Ok((self.read_flat(m).await?, self.read_flat(v).await?, self.t))
    }

    /// The adapter it runs on.
    pub fn adapter(&self) -> String {
        self.ctx.caps().adapter.clone()
    }

    /// Restore AdamW moments by tensor name (every GPU-owned tensor) after `t` updates.
    pub fn set_moments(
        &mut self,
        m: &BTreeMap<String, Vec<f32>>,
        v: &BTreeMap<String, Vec<f32>>,
        t: usize,
    ) -> Result<()> {
        for (buf, values) in self.moments.iter().zip([m, v]) {
            for e in &self.layout.entries {
                let data = values.get(&e.name).filter(|d| d.len() == e.len).ok_or_else(|| {
                    GpuError::Unsupported(format!("no moment of {} values for {}", e.len, e.name))
                })?;
                self.ctx.queue.write_buffer(buf, (4 * e.off) as u64, bytemuck::cast_slice(data));
            }
        }
        self.t = t;
        Ok(())
    }

    /// The model's config.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    async fn read_flat(&self, buf: &wgpu::Buffer) -> Result<BTreeMap<String, Vec<f32>>> {
        let n = self.layout.total;
        let staging = readback(&self.ctx.device, n);
        let mut enc = self.ctx.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(buf, 0, &staging, 0, (4 * n) as u64);
        self.ctx.submit(enc.finish()).await?;
        let words = self.ctx.read_words(&staging, n).await?;
        Ok(self
            .layout
            .entries
            .iter()
            .map(|e| {
                (e.name.clone(), words[e.off..e.off + e.len].iter().map(|&w| f32::from_bits(w)).collect())
            })
            .collect())
    }
}

/// Refuse, by name, what the GPU trainer does not train yet.
fn check_config(cfg: &ModelConfig) -> Result<()> {
    let no = |what: &str| Err(GpuError::Unsupported(format!("the GPU trainer does not train {what} yet")));
    if cfg.norm.kind != NormKind::Rmsnorm {
        return no("LayerNorm");
    }
    if cfg.ffn.kind != FfnKind::Swiglu {
        return no("a GELU feed-forward");
    }
    if !cfg.biases.is_none() {
        return no("projection biases");
    }
    if cfg.kv_heads() != cfg.n_heads || cfg.key_head_dim() != cfg.head_dim {
        return no("grouped-query attention or a key width other than head_dim");
    }
    if cfg.parallel_residual || cfg.embedding_norm {
        return no("a parallel residual or an embedding norm");
    }
    if cfg.absolute_position == AbsolutePosition::Learned {
        return no("learned absolute positions");
    }
    Ok(())
}

/// The learned tables of these layers (in layer order) and the names of tensors the host keeps
/// without a gradient.
fn learned_slots(lowerings: &[Lowering]) -> (Vec<LearnedSlot>, Vec<String>) {
    let (mut slots, mut frozen) = (Vec::new(), Vec::new());
    for (layer, l) in lowerings.iter().enumerate() {
        match l {
            Lowering::Softmax(s) => match &s.bias {
                Bias::Table { learned: Some(table), .. } => {
                    slots.push(LearnedSlot { layer, kind: LearnedKind::Table(table.clone()) })
                }
                fire @ Bias::Fire { .. } => {
                    slots.push(LearnedSlot { layer, kind: LearnedKind::Bias(fire.clone()) })
                }
                _ => {}
            },
            Lowering::Linear(ll) => {
                if let Gate::KeyForget { lower_bound, learned: Some(row) } = &ll.gate {
                    let kind = LearnedKind::LowerBound { row: row.clone(), width: lower_bound.len() };
                    slots.push(LearnedSlot { layer, kind });
                }
                if let Some(Rotation::Lrpe { lrpe, theta, householder }) = &ll.rotation {
                    if let Some(theta) = theta {
                        let kind = LearnedKind::Angles { theta: theta.clone(), pairs: lrpe.angles().len() };
                        slots.push(LearnedSlot { layer, kind });
                    }
                    frozen.extend(householder.iter().cloned());
                }
            }
        }
    }
    (slots, frozen)
}

/// The host-owned tensors of these tables, each once, in first-use order.
fn host_tensors(learned: &[LearnedSlot]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in learned.iter().flat_map(LearnedSlot::tensors) {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The host-owned tensors a learned table is computed from.
fn table_tensors(t: &LearnedTable) -> Vec<String> {
    match t {
        LearnedTable::KerpleLog { a, p }
        | LearnedTable::KerplePower { a, p }
        | LearnedTable::MepParam { a, p, .. } => {
            vec![a.clone(), p.clone()]
        }
        LearnedTable::Buckets { table, .. } => vec![table.clone()],
    }
}

/// Rows grouped by token id: `start[v]` for `v ≤ V` (V + 1 entries), then the rows in token order
/// (a counting sort; the embedding backward sums each token's rows without atomics).
fn rows_by_token(tokens: &[u32], vocab: usize) -> Vec<u32> {
    let mut start = vec![0u32; vocab + 1];
    for &t in tokens {
        start[t as usize + 1] += 1;
    }
    for v in 0..vocab {
        start[v + 1] += start[v];
    }
    let mut next = start.clone();
    let mut order = vec![0u32; tokens.len()];
    for (r, &t) in tokens.iter().enumerate() {
        order[next[t as usize] as usize] = r as u32;
        next[t as usize] += 1;
    }
    start.extend(order);
    start
}

/// A storage buffer of `n` zeroed f32/u32 words (at least 4).
pub(crate) fn zeroed(dev: &wgpu::Device, label: &str, n: usize) -> wgpu::Buffer {
    dev.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: (4 * n.max(4)) as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

/// A storage buffer holding `data`.
pub(crate) fn init_storage(dev: &wgpu::Device, label: &str, data: &[f32]) -> wgpu::Buffer {
    dev.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(label),
        contents: bytemuck::cast_slice(data),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
    })
}

/// A storage buffer holding the u32 words `data`.
pub(crate) fn init_words(dev: &wgpu::Device, label: &str, data: &[u32]) -> wgpu::Buffer {
    dev.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(label),
        contents: bytemuck::cast_slice(data),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
    })
}

/// A mappable buffer of `n` words to copy results into.
fn readback(dev: &wgpu::Device, n: usize) -> wgpu::Buffer {
    dev.create_buffer(&wgpu::BufferDescriptor {
        label: Some("train readback"),
        size: (4 * n.max(4)) as u64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

#[cfg(test)]
mod tests {
    use super::rows_by_token;

    #[test]
    fn rows_are_grouped_by_token_in_order() {
        // Tokens 2, 0, 2, 1 over a vocabulary of 4: starts 0, 1, 2, 4, 4; rows 1 | 3 | 0, 2.
        assert_eq!(rows_by_token(&[2, 0, 2, 1], 4), vec![0, 1, 2, 4, 4, 1, 3, 0, 2]);
    }
}
