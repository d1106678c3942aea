//! Introspection on the GPU: the attention matrices, gates and bias tables the lab views show,
//! from one prefill. A trace session records capture ops (shaders/capture.wgsl) into its forward
//! pass, copying each layer's rotated q (softmax family) or φq, φk and log-gates (linear family)
//! into trace buffers; shaders/attention_map.wgsl then builds every layer's maps on the GPU.
//!
//! Bounded: a map never has more than [`MAX_MAP_SIDE`] rows or columns. Longer sequences are
//! downsampled on the GPU (map row b = query min(n − 1, b·s + s − 1), column c = keys
//! [c·s, (c+1)·s) summed, or averaged for scores), exactly like
//! [`attnlab_core::analysis::downsample_attention`] does to the CPU reference's full matrices.
//! Trace buffers hold n rows per layer (n ≤ max_context), never n × n.

use super::layers::Kind;
use super::pipes::{LINEAR_MAP, SOFTMAX_MAP};
use super::record::{Builder, Disp};
use super::{bind, uniform, zeros, GpuModel, GpuSession, CHUNK};
use crate::error::{GpuError, Result};
use crate::params::{BiasKind, CaptureParams, FeatKind, MapParams, MapStage};
use attnlab_core::analysis::MapWindow;
use attnlab_core::attention::{AttnMatrixKind, AttnStage, LayerAttention, LayerGates, TraceRequest};
use attnlab_core::model::Trace;
use attnlab_core::Error as CoreError;

/// Largest side of an attention map built on the GPU (the workgroup row buffer of
/// attention_map.wgsl); longer sequences are downsampled to at most this many rows and columns.
pub const MAX_MAP_SIDE: usize = 512;

/// Loop iterations one invocation of attention_map.wgsl's `linear_map` runs for a query among the
/// first `n`, an upper bound read off the shader: the query's features, then per block of 64 keys
/// one pass per chunk of 32 channels (key and value-axis: a walk over the block and 32 terms, each
/// loop counted with its exit test) and lane 0's binning of the block; last the copy-out. Checked on
/// lavapipe: maps at 8,192 tokens with 2 × 2 chunks (bound 63,577) are right, and with 3 × 3 chunks
/// rows go wrong from query ≈ 6,280 (the bound allows 5,952).
pub fn linear_map_loop_iterations(n: usize, dk: usize, value_channels: usize) -> u64 {
    let blocks = n.div_ceil(64) as u64;
    let chunks = (dk.div_ceil(32) + value_channels.div_ceil(32)) as u64;
    dk as u64 + blocks * (chunks * 104 + 80) + (MAX_MAP_SIDE / 64) as u64
}

/// What one layer of a trace session captured (buffers of `capacity` rows).
pub(super) enum Captured {
    Softmax {
        layer: usize,
        q: wgpu::Buffer,
        kc: wgpu::Buffer,
    },
    Linear {
        layer: usize,
        fq: wgpu::Buffer,
        fk: wgpu::Buffer,
        lg: wgpu::Buffer,
        gpre: Option<wgpu::Buffer>,
        /// Fast Decay's value-axis log-gates `[capacity, H, dh]`.
        lgv: Option<wgpu::Buffer>,
    },
}

impl Captured {
    fn layer(&self) -> usize {
        match self {
            Captured::Softmax { layer, .. } | Captured::Linear { layer, .. } => *layer,
        }
    }
}

/// Capture ops of a trace session, recorded layer by layer while the forward pass is built.
pub(super) struct Capture {
    pipe: usize,
    capacity: usize,
    pub(super) layers: Vec<Captured>,
}

impl Capture {
    pub(super) fn new(pipe: usize, capacity: usize) -> Capture {
        Capture { pipe, capacity, layers: Vec::new() }
    }

    /// Bytes of trace buffers a model needs for `capacity` tokens, per buffer (checked against the
    /// adapter's binding limit before anything is allocated).
    pub(super) fn buffer_sizes(m: &GpuModel, capacity: usize) -> Vec<(String, u64)> {
        let (h, a) = (m.cfg.n_heads, m.cfg.n_heads * m.cfg.head_dim);
        let rows = capacity as u64 * 4;
        m.layers
            .iter()
            .enumerate()
            .map(|(i, l)| match &l.kind {
                Kind::Softmax(_) => (format!("layers.{i} trace q"), rows * 3 * a as u64),
                Kind::Linear(ln) => {
                    (format!("layers.{i} trace features"), rows * (h * ln.dk).max(2 * a) as u64)
                }
            })
            .collect()
    }

    fn copy(&self, b: &mut Builder<'_>, src: &wgpu::Buffer, width: usize, src_off: usize) -> wgpu::Buffer {
        let dev = &b.m.ctx.device;
        let dst = zeros(dev, "trace capture", self.capacity * width, wgpu::BufferUsages::empty());
        let params = uniform(
            dev,
            &CaptureParams {
                width: width as u32,
                capacity: self.capacity as u32,
                src_off: src_off as u32,
                ..CaptureParams::default()
            },
        );
        b.op(self.pipe, &[&params, src, &dst], Disp::Threads(width as u32));
        dst
    }

    /// After a softmax layer's rotary op: its rotated q (the KV cache already holds every key).
    pub(super) fn softmax(&mut self, b: &mut Builder<'_>, qkv: &wgpu::Buffer, kc: &wgpu::Buffer) {
        let a = b.m.cfg.n_heads * b.m.cfg.head_dim;
        let q = self.copy(b, qkv, 3 * a, 0);
        self.layers.push(Captured::Softmax { layer: self.layers.len(), q, kc: kc.clone() });
    }

    /// After a linear layer's feature op: φq, φk, log-gates, ReGLA's gate pre-activations and Fast
    /// Decay's value-axis log-gates (from word `lgv_off` of the log-gate buffer).
    pub(super) fn linear(
        &mut self,
        b: &mut Builder<'_>,
        feats: [&wgpu::Buffer; 3],
        dk: usize,
        gpre: Option<&wgpu::Buffer>,
        lgv_off: Option<usize>,
    ) {
        let (h, a) = (b.m.cfg.n_heads, b.m.cfg.n_heads * b.m.cfg.head_dim);
        let lgv = lgv_off.map(|off| self.copy(b, feats[2], a, off));
        let [fq, fk, lg] = feats.map(|f| self.copy(b, f, h * dk, 0));
        let gpre = gpre.map(|g| self.copy(b, g, 2 * a, 0));
        self.layers.push(Captured::Linear { layer: self.layers.len(), fq, fk, lg, gpre, lgv });
    }
}

/// A GPU trace: the core's [`Trace`] (maps possibly downsampled) and how it was sampled.
#[derive(Debug, Clone)]
pub struct GpuTrace {
    /// `logits` holds the last token's logits only; `attention[l].n` is the map side.
    pub trace: Trace,
    /// Tokens traced.
    pub tokens: usize,
    /// Map stride s (1: exact n × n matrices).
    pub stride: usize,
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Read `len` f32 of a storage buffer back (one submission).
async fn read_f32(m: &GpuModel, buf: &wgpu::Buffer, len: usize) -> Result<Vec<f32>> {
    let ctx = &m.ctx;
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("trace readback"),
        size: (4 * len.max(1)) as u64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut enc = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
    enc.copy_buffer_to_buffer(buf, 0, &staging, 0, (4 * len) as u64);
    ctx.submit(enc.finish()).await?;
    Ok(ctx.read_words(&staging, len).await?.into_iter().map(f32::from_bits).collect())
}

/// What a trace's maps show and how they are sampled.
#[derive(Clone, Copy)]
struct MapShape {
    n: usize,
    window: MapWindow,
    stage: MapStage,
}

/// A trace kept on the GPU: every layer's captured rows (n rows each, never n × n), from which
/// [`GpuModel::map_window`] builds the maps of any window at any stride (the page's zoom). Valid
/// with the model that recorded it only.
pub struct HeldTrace {
    captured: Vec<Captured>,
    pipes: Vec<usize>,
    n: usize,
    stage: MapStage,
}

impl HeldTrace {
    /// Tokens traced.
    pub fn tokens(&self) -> usize {
        self.n
    }
}

impl GpuModel {
    /// Prefill `tokens` from position 0 and record, on the GPU, what `req` asks for: every layer's
    /// attention maps at `req.stage` (implied matrices for linear layers, as the CPU reference's
    /// trace), bounded to `max_side` (≤ [`MAX_MAP_SIDE`]) rows and columns, and the gates of gated
    /// layers (F, and ReGLA's g and r) for every token.
    pub async fn trace(&mut self, tokens: &[u32], req: TraceRequest, max_side: usize) -> Result<GpuTrace> {
        Ok(self.trace_held(tokens, req, max_side).await?.0)
    }

    /// [`GpuModel::trace`], keeping the captured rows on the GPU for [`GpuModel::map_window`].
    pub async fn trace_held(
        &mut self,
        tokens: &[u32],
        req: TraceRequest,
        max_side: usize,
    ) -> Result<(GpuTrace, HeldTrace)> {
        let n = tokens.len();
        if n == 0 {
            return Err(CoreError::EmptyPrompt.into());
        }
        if n > self.cfg.max_context {
            return Err(CoreError::ContextTooLong { requested: n, max: self.cfg.max_context }.into());
        }
        for (what, bytes) in Capture::buffer_sizes(self, n) {
            self.ctx.check_size(&what, bytes)?;
        }
        if req.attention {
            self.check_map_loops(n)?;
        }
        let window = MapWindow::whole(n, max_side.clamp(1, MAX_MAP_SIDE));
        let stage = match req.stage {
            AttnStage::Logits => MapStage::Logits,
            AttnStage::Biased => MapStage::Biased,
            AttnStage::Probabilities => MapStage::Probabilities,
        };
        let shape = MapShape { n, window, stage };
        // Map pipelines first (they need the model mutably; the session borrows it).
        let map_pipes = self.map_pipes();
        let mut session = GpuSession::new(self, CHUNK, Some(n)).await?;
        let logits = session.prefill(tokens).await?;
        let captured = session.capture.take().map(|c| c.layers).unwrap_or_default();
        let m: &GpuModel = session.model;
        let mut trace = Trace { logits, ..Default::default() };
        if req.attention {
            trace.attention = m.attention_maps(&captured, &map_pipes, shape).await?;
        }
        if req.gates {
            trace.gates = m.gates(&captured, n).await?;
        }
        let held = HeldTrace { captured, pipes: map_pipes, n, stage };
        Ok((GpuTrace { trace, tokens: n, stride: window.stride }, held))
    }

    /// The maps of layer `layer` over window `w` of a held trace (at most [`MAX_MAP_SIDE`] cells a
    /// side), built on the GPU from the captured rows; `attnlab_core::analysis::attention_window`
    /// of the full matrices is the reference.
    pub async fn map_window(&self, held: &HeldTrace, layer: usize, w: MapWindow) -> Result<LayerAttention> {
        w.check(held.n, MAX_MAP_SIDE).map_err(GpuError::Unsupported)?;
        self.check_map_loops(held.n.min(w.row0 + w.side * w.stride))?;
        let c = held
            .captured
            .iter()
            .find(|c| c.layer() == layer)
            .ok_or_else(|| GpuError::Unsupported(format!("the trace holds no layer {layer}")))?;
        let shape = MapShape { n: held.n, window: w, stage: held.stage };
        let mut maps = self.attention_maps(std::slice::from_ref(c), &held.pipes, shape).await?;
        maps.pop().ok_or_else(|| mismatch(layer))
    }

    /// Refuse maps whose queries reach `n` tokens where the adapter would cut the linear map's loops
    /// short ([`crate::GpuCaps::loop_iterations`]: Mesa's llvmpipe), before any work.
    fn check_map_loops(&self, n: usize) -> Result<()> {
        let Some(limit) = self.ctx.caps().loop_iterations else { return Ok(()) };
        for (i, l) in self.layers.iter().enumerate() {
            let Kind::Linear(ln) = &l.kind else { continue };
            let value = if ln.feat == FeatKind::FastDecay { self.cfg.head_dim } else { 0 };
            let need = linear_map_loop_iterations(n, ln.dk, value);
            if need > limit {
                let most =
                    (1..=n).rev().step_by(64).find(|&m| linear_map_loop_iterations(m, ln.dk, value) <= limit);
                return Err(GpuError::Unsupported(format!(
                    "layer {i}'s attention map over {n} tokens needs up to {need} loop iterations per shader \
                     invocation, and this adapter ({}) ends every loop after {limit}; trace at most {} tokens \
                     here, or use another GPU or the CPU",
                    self.ctx.caps().adapter,
                    most.unwrap_or(0)
                )));
            }
        }
        Ok(())
    }

    /// The map pipeline of every layer.
    fn map_pipes(&mut self) -> Vec<usize> {
        let biases: Vec<Option<BiasKind>> = self
            .layers
            .iter()
            .map(|l| if let Kind::Softmax(s) = &l.kind { Some(s.bias) } else { None })
            .collect();
        biases
            .into_iter()
            .map(|bias| match bias {
                Some(b) => self.pipe(&SOFTMAX_MAP, &[f64::from(b.code())]),
                None => self.pipe(&LINEAR_MAP, &[]),
            })
            .collect()
    }

    /// Every captured layer's maps, built in one submission, then read back.
    async fn attention_maps(
        &self,
        captured: &[Captured],
        pipes: &[usize],
        s: MapShape,
    ) -> Result<Vec<LayerAttention>> {
        let (h, out_n) = (self.cfg.n_heads, s.window.side);
        let side = h * out_n * out_n;
        let dev = &self.ctx.device;
        let mut maps = Vec::new();
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        {
            let mut pass =
                enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
            for c in captured {
                let out = zeros(dev, "attention map", side, wgpu::BufferUsages::empty());
                let (layer, kind, bind) = self.map_op(c, pipes, s, &out)?;
                let pipe =
                    pipes.get(layer).and_then(|&p| self.pipes.get(p)).ok_or_else(|| mismatch(layer))?;
                pass.set_pipeline(&pipe.pipeline);
                pass.set_bind_group(0, &bind, &[]);
                pass.dispatch_workgroups(out_n as u32, h as u32, 1);
                maps.push((layer, kind, out));
            }
        }
        self.ctx.count_dispatches(maps.len() as u64);
        self.ctx.submit(enc.finish()).await?;
        let mut out = Vec::with_capacity(maps.len());
        for (layer, kind, buf) in maps {
            let all = read_f32(self, &buf, side).await?;
            let heads = all.chunks_exact(out_n * out_n).map(<[f32]>::to_vec).collect();
            out.push(LayerAttention { layer, kind, n: out_n, heads });
        }
        Ok(out)
    }

    /// The layer, matrix kind and bind group of one captured layer's map op.
    fn map_op(
        &self,
        c: &Captured,
        pipes: &[usize],
        s: MapShape,
        out: &wgpu::Buffer,
    ) -> Result<(usize, AttnMatrixKind, wgpu::BindGroup)> {
        let dev = &self.ctx.device;
        let base = MapParams {
            n: s.n as u32,
            out_n: s.window.side as u32,
            stride: s.window.stride as u32,
            row0: s.window.row0 as u32,
            col0: s.window.col0 as u32,
            stage: s.stage.code(),
            h: self.cfg.n_heads as u32,
            ..MapParams::default()
        };
        let kind_of = |layer: usize| self.layers.get(layer).map(|l| &l.kind);
        match c {
            Captured::Softmax { layer, q, kc } => {
                let (Some(Kind::Softmax(sl)), Some(&pipe)) = (kind_of(*layer), pipes.get(*layer)) else {
                    return Err(mismatch(*layer));
                };
                let kind = match (s.stage, sl.params.relu != 0) {
                    (MapStage::Probabilities, false) => AttnMatrixKind::Probabilities,
                    (MapStage::Probabilities, true) => AttnMatrixKind::ReluNormalized,
                    _ => AttnMatrixKind::Scores,
                };
                let (lp, mp) = (uniform(dev, &sl.params), uniform(dev, &base));
                Ok((*layer, kind, bind(self, pipe, &[&lp, &mp, q, kc, &sl.aux, out])))
            }
            Captured::Linear { layer, fq, fk, lg, lgv, .. } => {
                let (Some(Kind::Linear(ln)), Some(&pipe)) = (kind_of(*layer), pipes.get(*layer)) else {
                    return Err(mismatch(*layer));
                };
                // Only 1+elu keeps every score positive: its rows are exact weights.
                let den = ln.feat == FeatKind::Elu && ln.den_eps > 0.0;
                let kind = if den { AttnMatrixKind::Probabilities } else { AttnMatrixKind::SignedNormalized };
                let (value_gate, dh) = (u32::from(lgv.is_some()), self.cfg.head_dim as u32);
                let mp = MapParams {
                    dk: ln.dk as u32,
                    den: u32::from(den),
                    den_eps: ln.den_eps,
                    value_gate,
                    dh,
                    ..base
                };
                let mp = uniform(dev, &mp);
                let lgv = lgv.as_ref().unwrap_or(lg);
                Ok((*layer, kind, bind(self, pipe, &[&mp, out, fq, fk, lg, lgv])))
            }
        }
    }

    /// Gates of the gated linear layers: GLA α, RetNet γ and HGRN2's forget gate as F = exp(log-gate);
    /// ReGLA's F, g, r.
    async fn gates(&self, captured: &[Captured], n: usize) -> Result<Vec<LayerGates>> {
        // A gate acts on the key channels; keys padded to head_dim on upload (plan.rs `pad_keys`)
        // show only their `qk` real channels.
        let (h, qk) = (self.cfg.n_heads, self.cfg.key_head_dim());
        let mut out = Vec::new();
        for c in captured {
            let Captured::Linear { layer, lg, gpre, .. } = c else { continue };
            let Some(Kind::Linear(ln)) = self.layers.get(*layer).map(|l| &l.kind) else { continue };
            let dim = qk.min(ln.dk);
            let (f, g, r) = match (ln.feat, gpre) {
                // Fast Decay: its key-axis factor σ(W_f x + b_f), as the CPU trace.
                (FeatKind::Gla | FeatKind::Retnet | FeatKind::Hgrn2 | FeatKind::FastDecay, _) => {
                    let lg = read_f32(self, lg, n * h * ln.dk).await?;
                    let real = lg.chunks_exact(ln.dk).flat_map(|c| c[..dim].iter().map(|x| x.exp()));
                    (real.collect(), None, None)
                }
                (FeatKind::Regla, Some(gp)) => {
                    let (f, g, r) = self.regla_gates(gp, &ln.aux, n).await?;
                    (f, Some(g), Some(r))
                }
                _ => continue,
            };
            let variant = self.cfg.layers.get(*layer).map(|l| l.variant_id().to_string()).unwrap_or_default();
            out.push(LayerGates { layer: *layer, variant, n, n_heads: h, dim, f, g, r });
        }
        Ok(out)
    }

    /// ReGLA: g = σ(a_g + b_g), r = σ(a_r + b_r) from the captured pre-activations and the layer's
    /// biases as uploaded; F = (1 − r)·g² + r·(1 − (1 − g)²) (ReGLA eq. 6), without the running-max
    /// rescale that is folded into the kernel's log-gate. Returns (F, g, r).
    async fn regla_gates(
        &self,
        gpre: &wgpu::Buffer,
        aux: &wgpu::Buffer,
        n: usize,
    ) -> Result<(Vec<f32>, Vec<f32>, Vec<f32>)> {
        let a = self.cfg.n_heads * self.cfg.head_dim;
        let pre = read_f32(self, gpre, n * 2 * a).await?;
        let bias = read_f32(self, aux, 2 * a).await?;
        let mut g = Vec::with_capacity(n * a);
        let mut r = Vec::with_capacity(n * a);
        for t in 0..n {
            for c in 0..a {
                g.push(sigmoid(pre[t * 2 * a + c] + bias[c]));
                r.push(sigmoid(pre[t * 2 * a + a + c] + bias[a + c]));
            }
        }
        let f =
            g.iter().zip(&r).map(|(g, r)| (1.0 - r) * g * g + r * (1.0 - (1.0 - g) * (1.0 - g))).collect();
        Ok((f, g, r))
    }

    /// The position-bias table B_h[d] (`[H, len]`, d = i − j) a softmax layer's kernel reads, read
    /// back from the GPU; `None` for layers without a distance table (no bias, FIRE, linear).
    pub async fn bias_table(&self, layer: usize) -> Result<Option<(usize, Vec<f32>)>> {
        let l = self
            .layers
            .get(layer)
            .ok_or_else(|| CoreError::arg("layer", format!("layer {layer} is out of range")))?;
        match &l.kind {
            Kind::Softmax(s) if s.bias == BiasKind::Table => {
                let len = s.params.table_len as usize;
                let values = read_f32(self, &s.aux, self.cfg.n_heads * len).await?;
                Ok(Some((len, values)))
            }
            _ => Ok(None),
        }
    }
}

fn mismatch(layer: usize) -> GpuError {
    GpuError::Unsupported(format!("layer {layer}: capture mismatch"))
}
