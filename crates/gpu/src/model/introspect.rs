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

use super::{bind_group, uniform, zeros, Builder, Disp, GpuModel, GpuSession, Kind, CHUNK};
use crate::error::{GpuError, Result};
use crate::params::{BiasKind, CaptureParams, FeatKind, MapParams, MapStage};
use crate::shaders;
use attnlab_core::analysis::map_stride;
use attnlab_core::attention::{AttnMatrixKind, AttnStage, LayerAttention, LayerGates, TraceRequest};
use attnlab_core::model::Trace;
use attnlab_core::Error as CoreError;

/// Largest side of an attention map built on the GPU (the workgroup row buffer of
/// attention_map.wgsl); longer sequences are downsampled to at most this many rows and columns.
pub const MAX_MAP_SIDE: usize = 512;

/// What one layer of a trace session captured (buffers of `capacity` rows).
pub(super) enum Captured {
    Softmax { layer: usize, q: wgpu::Buffer, kc: wgpu::Buffer },
    Linear { layer: usize, fq: wgpu::Buffer, fk: wgpu::Buffer, lg: wgpu::Buffer, gpre: Option<wgpu::Buffer> },
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
                Kind::Softmax { .. } => (format!("layers.{i} trace q"), rows * 3 * a as u64),
                Kind::Linear { dk, .. } => {
                    (format!("layers.{i} trace features"), rows * (h * dk).max(2 * a) as u64)
                }
            })
            .collect()
    }

    fn copy(&self, b: &mut Builder<'_>, src: &wgpu::Buffer, width: usize) -> wgpu::Buffer {
        let dev = &b.m.ctx.device;
        let dst = zeros(dev, "trace capture", self.capacity * width, wgpu::BufferUsages::empty());
        let params = uniform(
            dev,
            &CaptureParams {
                width: width as u32,
                capacity: self.capacity as u32,
                ..CaptureParams::default()
            },
        );
        b.op(self.pipe, &[&params, src, &dst], Disp::Threads(width as u32));
        dst
    }

    /// After a softmax layer's rotary op: its rotated q (the KV cache already holds every key).
    pub(super) fn softmax(&mut self, b: &mut Builder<'_>, qkv: &wgpu::Buffer, kc: &wgpu::Buffer) {
        let a = b.m.cfg.n_heads * b.m.cfg.head_dim;
        let q = self.copy(b, qkv, 3 * a);
        self.layers.push(Captured::Softmax { layer: self.layers.len(), q, kc: kc.clone() });
    }

    /// After a linear layer's feature op: φq, φk, log-gates, and ReGLA's gate pre-activations.
    pub(super) fn linear(
        &mut self,
        b: &mut Builder<'_>,
        feats: [&wgpu::Buffer; 3],
        dk: usize,
        gpre: Option<&wgpu::Buffer>,
    ) {
        let (h, a) = (b.m.cfg.n_heads, b.m.cfg.n_heads * b.m.cfg.head_dim);
        let [fq, fk, lg] = feats.map(|f| self.copy(b, f, h * dk));
        let gpre = gpre.map(|g| self.copy(b, g, 2 * a));
        self.layers.push(Captured::Linear { layer: self.layers.len(), fq, fk, lg, gpre });
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

impl GpuModel {
    /// Prefill `tokens` from position 0 and record, on the GPU, what `req` asks for: every layer's
    /// attention maps at `req.stage` (implied matrices for linear layers, as the CPU reference's
    /// trace), bounded to `max_side` (≤ [`MAX_MAP_SIDE`]) rows and columns, and the gates of gated
    /// layers (F, and ReGLA's g and r) for every token.
    pub async fn trace(&mut self, tokens: &[u32], req: TraceRequest, max_side: usize) -> Result<GpuTrace> {
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
        let stride = map_stride(n, max_side.clamp(1, MAX_MAP_SIDE));
        let out_n = n.div_ceil(stride);
        // Map pipelines first (they need the model mutably; the session borrows it).
        let map_slots = |linear: bool| {
            use super::Bind::{Read as R, Uniform as U, Write as W};
            if linear {
                vec![(1, U), (5, W), (6, R), (7, R), (8, R)]
            } else {
                vec![(0, U), (1, U), (2, R), (3, R), (4, R), (5, W)]
            }
        };
        let mut softmax_pipes = [usize::MAX; 3];
        let mut linear_pipe = usize::MAX;
        let kinds: Vec<Option<BiasKind>> = self
            .layers
            .iter()
            .map(|l| match &l.kind {
                Kind::Softmax { bias_kind, .. } => Some(*bias_kind),
                Kind::Linear { .. } => None,
            })
            .collect();
        for k in &kinds {
            match k {
                Some(bk) => {
                    softmax_pipes[*bk as usize] = self.pipe(
                        &shaders::ATTENTION_MAP,
                        "softmax_map",
                        &[("BIAS_KIND", f64::from(bk.code()))],
                        &map_slots(false),
                    )
                }
                None => linear_pipe = self.pipe(&shaders::ATTENTION_MAP, "linear_map", &[], &map_slots(true)),
            }
        }
        let mut session = GpuSession::new(self, CHUNK, Some(n)).await?;
        let logits = session.prefill(tokens).await?;
        let captured = session.capture.take().map(|c| c.layers).unwrap_or_default();
        let m: &GpuModel = session.model;
        let (h, dh) = (m.cfg.n_heads, m.cfg.head_dim);
        let dev = &m.ctx.device;
        let mut trace = Trace { logits, ..Default::default() };
        if req.attention {
            let stage = match req.stage {
                AttnStage::Logits => MapStage::Logits,
                AttnStage::Biased => MapStage::Biased,
                AttnStage::Probabilities => MapStage::Probabilities,
            };
            let map_params = MapParams {
                n: n as u32,
                out_n: out_n as u32,
                stride: stride as u32,
                stage: stage.code(),
                h: h as u32,
                ..MapParams::default()
            };
            let side = h * out_n * out_n;
            let mut maps = Vec::new();
            let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            {
                let mut pass = enc
                    .begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
                for c in &captured {
                    let out = zeros(dev, "attention map", side, wgpu::BufferUsages::empty());
                    let (layer, pipe, kind, bind) = match c {
                        Captured::Softmax { layer, q, kc } => {
                            let Kind::Softmax { bias_kind, params, aux, .. } = &m.layers[*layer].kind else {
                                return Err(GpuError::Unsupported(format!(
                                    "layer {layer}: capture mismatch"
                                )));
                            };
                            let kind = match (stage, params.relu != 0) {
                                (MapStage::Probabilities, false) => AttnMatrixKind::Probabilities,
                                (MapStage::Probabilities, true) => AttnMatrixKind::ReluNormalized,
                                _ => AttnMatrixKind::Scores,
                            };
                            let mp = uniform(dev, &map_params);
                            let lp = uniform(dev, params);
                            let pipe = softmax_pipes[*bias_kind as usize];
                            let bind = bind_group(
                                m,
                                pipe,
                                &[(0, &lp), (1, &mp), (2, q), (3, kc), (4, aux), (5, &out)],
                            );
                            (*layer, pipe, kind, bind)
                        }
                        Captured::Linear { layer, fq, fk, lg, .. } => {
                            let Kind::Linear { feat_kind, dk, den_eps, .. } = &m.layers[*layer].kind else {
                                return Err(GpuError::Unsupported(format!(
                                    "layer {layer}: capture mismatch"
                                )));
                            };
                            // Only 1+elu keeps every score positive: its rows are exact weights.
                            let den = *feat_kind == FeatKind::Elu && *den_eps > 0.0;
                            let kind = if den {
                                AttnMatrixKind::Probabilities
                            } else {
                                AttnMatrixKind::SignedNormalized
                            };
                            let mp = uniform(
                                dev,
                                &MapParams {
                                    dk: *dk as u32,
                                    den: u32::from(den),
                                    den_eps: *den_eps,
                                    ..map_params
                                },
                            );
                            let bind =
                                bind_group(m, linear_pipe, &[(1, &mp), (5, &out), (6, fq), (7, fk), (8, lg)]);
                            (*layer, linear_pipe, kind, bind)
                        }
                    };
                    pass.set_pipeline(&m.pipes[pipe].pipeline);
                    pass.set_bind_group(0, &bind, &[]);
                    pass.dispatch_workgroups(out_n as u32, h as u32, 1);
                    maps.push((layer, kind, out));
                }
            }
            m.ctx.submit(enc.finish()).await?;
            for (layer, kind, out) in maps {
                let all = read_f32(m, &out, side).await?;
                let heads = all.chunks_exact(out_n * out_n).map(<[f32]>::to_vec).collect();
                trace.attention.push(LayerAttention { layer, kind, n: out_n, heads });
            }
        }
        if req.gates {
            for c in &captured {
                let Captured::Linear { layer, lg, gpre, .. } = c else { continue };
                let Kind::Linear { feat_kind, dk, aux, .. } = &m.layers[*layer].kind else { continue };
                let variant = m.cfg.layers[*layer].variant_id().to_string();
                let count = n * h * dk;
                let (f, g, r) = match (feat_kind, gpre) {
                    // GLA α, RetNet γ: F = exp(log-gate).
                    (FeatKind::Gla | FeatKind::Retnet, _) => {
                        (read_f32(m, lg, count).await?.into_iter().map(f32::exp).collect(), None, None)
                    }
                    // ReGLA: g = σ(a_g + b_g), r = σ(a_r + b_r) from the captured pre-activations and
                    // the layer's biases as uploaded; F = (1 − r)·g² + r·(1 − (1 − g)²) (ReGLA eq. 6),
                    // without the running-max rescale that is folded into the kernel's log-gate.
                    (FeatKind::Regla, Some(gp)) => {
                        let a = h * dh;
                        let pre = read_f32(m, gp, n * 2 * a).await?;
                        let bias = read_f32(m, aux, 2 * a).await?;
                        let mut g = Vec::with_capacity(count);
                        let mut r = Vec::with_capacity(count);
                        for t in 0..n {
                            for c in 0..a {
                                g.push(sigmoid(pre[t * 2 * a + c] + bias[c]));
                                r.push(sigmoid(pre[t * 2 * a + a + c] + bias[a + c]));
                            }
                        }
                        let f = g
                            .iter()
                            .zip(&r)
                            .map(|(g, r)| (1.0 - r) * g * g + r * (1.0 - (1.0 - g) * (1.0 - g)))
                            .collect();
                        (f, Some(g), Some(r))
                    }
                    _ => continue,
                };
                trace.gates.push(LayerGates { layer: *layer, variant, n, n_heads: h, dim: *dk, f, g, r });
            }
        }
        Ok(GpuTrace { trace, tokens: n, stride })
    }

    /// The position-bias table B_h[d] (`[H, len]`, d = i − j) a softmax layer's kernel reads, read
    /// back from the GPU; `None` for layers without a distance table (no bias, FIRE, linear).
    pub async fn bias_table(&self, layer: usize) -> Result<Option<(usize, Vec<f32>)>> {
        let l = self
            .layers
            .get(layer)
            .ok_or_else(|| CoreError::arg("layer", format!("layer {layer} is out of range")))?;
        match &l.kind {
            Kind::Softmax { bias_kind: BiasKind::Table, params, aux, .. } => {
                let len = params.table_len as usize;
                let values = read_f32(self, aux, self.cfg.n_heads * len).await?;
                Ok(Some((len, values)))
            }
            _ => Ok(None),
        }
    }
}
