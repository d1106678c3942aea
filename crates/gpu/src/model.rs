//! GPU model (weights + prepared per-layer data) and session (activations, KV caches, states).
//!
//! A forward pass is a list of ops (pipeline + bind group + dispatch shape) recorded once per
//! session (`record`); each submission writes the step uniform (rows, first position) and the
//! token ids, then replays the ops of every layer in one compute pass. Prefill runs in chunks of
//! [`CHUNK`] rows (softmax layers read the KV cache, linear layers carry their state), so
//! activations stay bounded and nothing n×n is ever stored.
//!
//! Modules: `plan` (the core's layer plans → parameter blocks and tables), `upload` (host arrays,
//! limit checks, buffers), `layers` (a layer's data, on the host or uploaded), `pipes` (pipeline
//! specs and cache), `session` (memory plan, submissions), `record` (per-block ops),
//! `introspect`, `sampling`.

use crate::context::GpuContext;
use crate::error::{GpuError, Result};
use crate::params::{uniform_bytes, MAX_DH};
use attnlab_core::config::ModelConfig;
use attnlab_core::Model;
use bytemuck::Pod;
use std::collections::HashMap;
use wgpu::util::DeviceExt;

mod fused;
mod introspect;
mod layers;
pub(crate) mod pipes;
mod plan;
mod record;
mod sampling;
mod session;
mod upload;

pub use introspect::{linear_map_loop_iterations, GpuTrace, HeldTrace, MAX_MAP_SIDE};
pub use sampling::GpuSampling;
pub use session::{GpuSession, GREEDY_BATCH};

/// Prefill rows per submission (activation buffers hold this many rows).
pub const CHUNK: usize = 256;

/// A model uploaded to the GPU.
pub struct GpuModel {
    ctx: GpuContext,
    cfg: ModelConfig,
    pipes: Vec<pipes::Pipe>,
    pipe_ids: HashMap<String, usize>,
    /// Composed shader modules by file name and how they read weight matrices.
    modules: HashMap<(&'static str, crate::shaders::WeightVec), wgpu::ShaderModule>,
    emb: wgpu::Buffer,
    head: wgpu::Buffer,
    pe: wgpu::Buffer,
    final_norm: layers::Norm<wgpu::Buffer>,
    /// Norm of the embeddings (`embedding_norm`).
    emb_norm: Option<layers::Norm<wgpu::Buffer>>,
    layers: Vec<layers::Layer<wgpu::Buffer>>,
    /// The fused decode's buffers, or why the model decodes op by op.
    fused: std::result::Result<fused::Fused<wgpu::Buffer>, String>,
    /// Decode steps use the fused decode when the model has it.
    fused_enabled: bool,
    /// Fewest keys per split-K workgroup of the fused softmax decode (new sessions).
    split_keys: u32,
    /// How the weight matrices are held (the kernels widen halves to f32).
    weight_kind: crate::params::WeightKind,
    matrix_bytes: u64,
    dummy: wgpu::Buffer,
}

impl std::fmt::Debug for GpuModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuModel").field("model", &self.cfg.name).field("layers", &self.layers.len()).finish()
    }
}

impl GpuModel {
    /// Upload `model`. Sizes are checked against the adapter's limits before any buffer exists.
    pub async fn new(ctx: GpuContext, model: &Model) -> Result<GpuModel> {
        let cfg = model.config().clone();
        let dh = cfg.head_dim;
        if dh > MAX_DH {
            return Err(GpuError::Unsupported(format!("head_dim {dh} exceeds the kernels' {MAX_DH}")));
        }
        let host = upload::HostModel::gather(model)?;
        host.check(&ctx)?;
        let split_keys = default_split_keys(ctx.caps());
        let up = ctx.scoped(|| host.upload(&ctx.device)).await?;
        Ok(GpuModel {
            ctx,
            cfg,
            pipes: Vec::new(),
            pipe_ids: HashMap::new(),
            modules: HashMap::new(),
            emb: up.emb,
            head: up.head,
            pe: up.pe,
            final_norm: up.final_norm,
            emb_norm: up.emb_norm,
            layers: up.layers,
            fused: up.fused,
            fused_enabled: true,
            split_keys,
            weight_kind: host.weight_kind,
            matrix_bytes: up.matrix_bytes,
            dummy: up.dummy,
        })
    }

    /// How the weight matrices are held on the GPU (`f32`, or `f16` / `bf16` as in the checkpoint)
    /// and their bytes.
    pub fn matrices(&self) -> (&'static str, u64) {
        let name = match self.weight_kind {
            crate::params::WeightKind::F32 => "f32",
            crate::params::WeightKind::F16 => "f16",
            crate::params::WeightKind::Bf16 => "bf16",
        };
        (name, self.matrix_bytes)
    }

    /// How the kernels read the matrices (shaders/weights.wgsl): four elements per load, f16
    /// widened by the hardware where the device has shader-f16, by integer operations elsewhere.
    pub fn matrix_reads(&self) -> &'static str {
        match self.weight_vec() {
            crate::shaders::WeightVec::F32 => "f32 vectors",
            crate::shaders::WeightVec::Halves => "half vectors, integer widening",
            crate::shaders::WeightVec::F16 => "f16 vectors (shader-f16)",
        }
    }

    /// How the weight-reading shaders bind this model's matrices on this device.
    fn weight_vec(&self) -> crate::shaders::WeightVec {
        crate::shaders::WeightVec::new(self.weight_kind, self.ctx.caps().shader_f16)
    }

    /// Whether new sessions decode fused (2 dispatches per block, 1 for the logits;
    /// shaders/decode.wgsl) rather than op by op; the reason when the model has no fused decode.
    pub fn fused_decode(&self) -> std::result::Result<bool, &str> {
        self.fused.as_ref().map(|_| self.fused_enabled).map_err(String::as_str)
    }

    /// Turn the fused decode of new sessions on or off (both paths compute the same model; the
    /// bench measures them side by side).
    pub fn set_fused_decode(&mut self, on: bool) {
        self.fused_enabled = on;
    }

    /// Fewest keys per split-K workgroup in the fused softmax decode of new sessions (default
    /// [`DEFAULT_SPLIT_KEYS`](crate::DEFAULT_SPLIT_KEYS), none on a CPU adapter (see
    /// `default_split_keys`); at least 64, the lanes of a workgroup):
    /// a row of n keys runs in ⌈n / keys⌉ workgroups per head, at most ⌈max_context / 64⌉ and 32
    /// (then with more keys each). `None`: one workgroup per head at every length (the bench
    /// compares both).
    pub fn set_decode_split_keys(&mut self, keys: Option<u32>) {
        self.split_keys = keys.map_or(u32::MAX, |k| k.max(crate::params::MIN_SPLIT_KEYS as u32));
    }

    /// The split-K setting of new sessions (`None`: one workgroup per head).
    pub fn decode_split_keys(&self) -> Option<u32> {
        (self.split_keys != u32::MAX).then_some(self.split_keys)
    }

    /// The fused decode is available and on.
    fn fused_on(&self) -> bool {
        self.fused_enabled && self.fused.is_ok()
    }

    /// The model's config.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// The device this model lives on.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// A new decode session with all state on the GPU (sized for the model's max_context).
    pub async fn session(&mut self) -> Result<GpuSession<'_>> {
        GpuSession::new(self, CHUNK, None).await
    }

    /// A session whose prefill submits at most `rows` tokens at a time (1..=[`CHUNK`]).
    pub async fn session_with_chunk(&mut self, rows: usize) -> Result<GpuSession<'_>> {
        GpuSession::new(self, rows.clamp(1, CHUNK), None).await
    }
}

fn usize_u32(what: &str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| GpuError::Unsupported(format!("{what} = {v} does not fit in 32 bits")))
}

/// A storage buffer holding `data` (at least 16 bytes).
fn storage(dev: &wgpu::Device, label: &str, data: &[f32]) -> wgpu::Buffer {
    storage_bytes(dev, label, bytemuck::cast_slice(data))
}

/// A storage buffer holding `bytes`, zero-padded to a multiple of 4 and at least 16 bytes.
fn storage_bytes(dev: &wgpu::Device, label: &str, bytes: &[u8]) -> wgpu::Buffer {
    let mut bytes = bytes.to_vec();
    bytes.resize(bytes.len().next_multiple_of(4).max(16), 0);
    dev.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(label),
        contents: &bytes,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
    })
}

/// A uniform buffer holding the parameter block `value`.
pub(crate) fn uniform<T: Pod>(dev: &wgpu::Device, value: &T) -> wgpu::Buffer {
    dev.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("params"),
        contents: &uniform_bytes(value),
        usage: wgpu::BufferUsages::UNIFORM,
    })
}

/// A zeroed storage buffer of `n` f32/u32 words (at least 4).
fn zeros(dev: &wgpu::Device, label: &str, n: usize, extra: wgpu::BufferUsages) -> wgpu::Buffer {
    dev.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: (4 * n.max(4)) as u64,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC
            | extra,
        mapped_at_creation: false,
    })
}

/// A bind group of `pipe` with `bufs` bound to its layout's bindings in order.
fn bind(m: &GpuModel, pipe: usize, bufs: &[&wgpu::Buffer]) -> wgpu::BindGroup {
    let p = &m.pipes[pipe];
    debug_assert_eq!(p.slots.len(), bufs.len(), "one buffer per binding");
    let entries: Vec<wgpu::BindGroupEntry> = p
        .slots
        .iter()
        .zip(bufs)
        .map(|(&(binding, _), buf)| wgpu::BindGroupEntry { binding, resource: buf.as_entire_binding() })
        .collect();
    m.ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &p.layout,
        entries: &entries,
    })
}

/// The split-K default of an adapter: [`DEFAULT_SPLIT_KEYS`](crate::DEFAULT_SPLIT_KEYS) on a GPU;
/// one workgroup per head on a CPU adapter, where the splits' repeated q projection and Wo share cost
/// without adding parallelism (lavapipe, shipped alibi at 2048: 42.9 tok/s split against 93.9,
/// docs/bench.md).
fn default_split_keys(caps: &crate::GpuCaps) -> u32 {
    if caps.cpu {
        u32::MAX
    } else {
        crate::params::DEFAULT_SPLIT_KEYS
    }
}
