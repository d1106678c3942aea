//! Recording a training step once: the forward pass (saving what the backward pass reads), the
//! loss, the backward pass in reverse layer order and the partial sums of the gradient norm. The
//! shapes never change, so `GpuTrainer` replays the same ops at every step.
//!
//! Per block (pre-norm, as `attnlab_train::TrainModel::forward`):
//! `u1 = rms(x)`, `q, k, v = u1·W{q,k,v}ᵀ` (RoPE on q, k), `P = softmax(scale·q·kᵀ + B)`,
//! `mid = x + (P·v)·Woᵀ`, `u2 = rms(mid)`, `x' = mid + (silu(u2·Wgᵀ) ⊙ u2·Wuᵀ)·Wdᵀ`.

use super::kernels::{grid, threads, Kernels, Mat, Op, Shape, K};
use super::{init_storage, zeroed, Dims, Layout};
use crate::error::{GpuError, Result};
use crate::params::TrainParams;
use attnlab_core::config::{AbsolutePosition, ModelConfig};
use attnlab_core::lowering::{Bias, Lowering, SoftmaxLowering, Window};
use std::collections::HashSet;

/// What the recorder needs from the trainer.
pub(super) struct Parts<'a> {
    pub kernels: &'a Kernels,
    pub dims: Dims,
    pub layout: &'a Layout,
    pub params: &'a wgpu::Buffer,
    pub grads: &'a wgpu::Buffer,
    pub dev: &'a wgpu::Device,
    /// The residual norms' epsilon.
    pub eps: f32,
}

/// A recorded step item: a dispatch, or a buffer copy between passes.
enum Item {
    Dispatch(Op),
    Copy { src: wgpu::Buffer, dst: wgpu::Buffer, bytes: u64 },
}

/// The recorded step and the buffers its results are read from.
pub(super) struct Recorded {
    items: Vec<Item>,
    /// Items of the forward pass and the loss (the rest is the backward pass).
    n_forward: usize,
    /// Per-row loss `[R]`.
    pub loss: wgpu::Buffer,
    /// Partial sums of squares of the gradients.
    pub partial: wgpu::Buffer,
    pub partials: usize,
    /// dL/dB of each learned table `[H, T]`.
    pub table_grads: Vec<wgpu::Buffer>,
}

impl Recorded {
    /// Append the step to `enc` (`forward_only`: up to the loss): runs of dispatches as compute
    /// passes, copies between them.
    pub fn encode(&self, k: &Kernels, enc: &mut wgpu::CommandEncoder, forward_only: bool) {
        let items = if forward_only { &self.items[..self.n_forward] } else { &self.items[..] };
        let mut run: Vec<&Op> = Vec::new();
        for item in items {
            match item {
                Item::Dispatch(op) => run.push(op),
                Item::Copy { src, dst, bytes } => {
                    k.encode(enc, &run);
                    run.clear();
                    enc.copy_buffer_to_buffer(src, 0, dst, 0, *bytes);
                }
            }
        }
        k.encode(enc, &run);
    }

    /// Compute dispatches of a step (`forward_only`: up to the loss).
    pub fn dispatches(&self, forward_only: bool) -> usize {
        let items = if forward_only { &self.items[..self.n_forward] } else { &self.items[..] };
        items.iter().filter(|i| matches!(i, Item::Dispatch(_))).count()
    }
}

/// A softmax layer's attention as the trainer runs it.
struct Attn {
    scale: f32,
    /// Diag block width (0: causal).
    block: u32,
    /// (cos, sin) at each position and rotated pair, `[T, n, 2]`, and n.
    rope: Option<(wgpu::Buffer, usize)>,
    /// The distance table `[H, T]` and, when learned, its gradient buffer.
    table: Option<(wgpu::Buffer, Option<wgpu::Buffer>)>,
}

/// Saved activations of one block.
struct Saved {
    x: wgpu::Buffer,
    u1: wgpu::Buffer,
    rstd1: wgpu::Buffer,
    q: wgpu::Buffer,
    k: wgpu::Buffer,
    v: wgpu::Buffer,
    p: wgpu::Buffer,
    o: wgpu::Buffer,
    mid: wgpu::Buffer,
    u2: wgpu::Buffer,
    rstd2: wgpu::Buffer,
    g: wgpu::Buffer,
    up: wgpu::Buffer,
    hid: wgpu::Buffer,
}

/// Backward-pass scratch shared by the blocks.
struct Scratch {
    dx: wgpu::Buffer,
    du: wgpu::Buffer,
    dq: wgpu::Buffer,
    dk: wgpu::Buffer,
    dv: wgpu::Buffer,
    dout: wgpu::Buffer,
    dp: wgpu::Buffer,
    dhid: wgpu::Buffer,
    dg: wgpu::Buffer,
    dup: wgpu::Buffer,
}

struct Rec<'a, 'b> {
    p: &'b Parts<'a>,
    items: Vec<Item>,
    /// Tensors whose gradient the step writes (every GPU-owned tensor must be among them).
    written: HashSet<String>,
}

/// Record the step of a model with these layer lowerings; `learned_tables` are the host-written
/// table buffers (in layer order), `inputs` the token, target and rows-by-token buffers.
pub(super) fn record(
    p: &mut Parts,
    cfg: &ModelConfig,
    lowerings: &[Lowering],
    learned_tables: &[wgpu::Buffer],
    inputs: [&wgpu::Buffer; 3],
) -> Result<Recorded> {
    let Dims { r, d, a, f, v, t, b, h, .. } = p.dims;
    let [tok, tgt, csr] = inputs;
    let dev = p.dev;
    let mut learned = learned_tables.iter();
    let mut table_grads = Vec::new();
    let mut attn = Vec::new();
    for (i, l) in lowerings.iter().enumerate() {
        let sl = match l {
            Lowering::Softmax(sl) => sl,
            Lowering::Linear(_) => return Err(unsupported(cfg, i, "linear attention")),
        };
        let layer = attention(cfg, i, sl, p.dims, dev, &mut learned)?;
        if let Some((_, Some(g))) = &layer.table {
            table_grads.push(g.clone());
        }
        attn.push(layer);
    }
    let buf = |label: &str, n: usize| zeroed(dev, label, n);
    let saved: Vec<Saved> = (0..cfg.n_layers)
        .map(|_| Saved {
            x: buf("x", r * d),
            u1: buf("u1", r * d),
            rstd1: buf("rstd1", r),
            q: buf("q", r * a),
            k: buf("k", r * a),
            v: buf("v", r * a),
            p: buf("probs", b * h * t * t),
            o: buf("o", r * a),
            mid: buf("mid", r * d),
            u2: buf("u2", r * d),
            rstd2: buf("rstd2", r),
            g: buf("gate", r * f),
            up: buf("up", r * f),
            hid: buf("hid", r * f),
        })
        .collect();
    let s = Scratch {
        dx: buf("dx", r * d),
        du: buf("du", r * d),
        dq: buf("dq", r * a),
        dk: buf("dk", r * a),
        dv: buf("dv", r * a),
        dout: buf("do", r * a),
        dp: buf("dp", b * h * t * t),
        dhid: buf("dhid", r * f),
        dg: buf("dg", r * f),
        dup: buf("dup", r * f),
    };
    let (xf, hf, rstdf) = (buf("x final", r * d), buf("h final", r * d), buf("rstd final", r));
    let logits = buf("logits", r * v);
    let loss = buf("loss", r);
    let partials = p.layout.total.div_ceil(64).clamp(1, 256);
    let partial = buf("grad partial sums", partials);
    let pe = match cfg.absolute_position {
        AbsolutePosition::Sinusoidal => Some(sinusoidal_table(dev, t, d)),
        _ => None,
    };
    let dummy = buf("unused", 4);
    let head = if cfg.tie_embeddings { "tok_emb.weight" } else { "lm_head.weight" };
    let mut rec = Rec { p, items: Vec::new(), written: HashSet::new() };

    // Forward.
    let x0 = saved.first().map(|s| &s.x).unwrap_or(&xf);
    rec.embed_fwd(x0, tok, pe.as_ref().unwrap_or(&dummy), cfg)?;
    for (i, (sv, at)) in saved.iter().zip(&attn).enumerate() {
        let next = saved.get(i + 1).map(|s| &s.x).unwrap_or(&xf);
        rec.block_fwd(i, sv, at, next, &dummy)?;
    }
    rec.rms_fwd(&hf, &xf, &rstdf, "final_norm.weight")?;
    rec.linear_fwd(&logits, &hf, head, v, d, false)?;
    let xent = TrainParams { rows: r as u32, n: v as u32, scale: 1.0 / r as f32, ..TrainParams::default() };
    rec.dispatch(K::Xent, &xent, &[tgt, &logits, &loss], grid(r));
    let n_forward = rec.items.len();

    // Backward.
    rec.linear_bwd(&hf, &s.du, &logits, head, v, d, false)?;
    rec.rms_bwd(&s.dx, &s.du, &xf, &rstdf, "final_norm.weight", false)?;
    for (i, (sv, at)) in saved.iter().zip(&attn).enumerate().rev() {
        rec.block_bwd(i, sv, at, &s)?;
    }
    rec.embed_bwd(&s.dx, csr, cfg)?;
    let total = p.layout.total;
    let sq = TrainParams { n: total as u32, ..TrainParams::default() };
    rec.dispatch(K::Sumsq, &sq, &[p.grads, &partial], [partials as u32, 1, 1]);
    if let Some(e) = p.layout.entries.iter().find(|e| !rec.written.contains(&e.name)) {
        return Err(GpuError::Unsupported(format!("the GPU trainer computes no gradient for {}", e.name)));
    }
    Ok(Recorded { items: rec.items, n_forward, loss, partial, partials, table_grads })
}

fn unsupported(cfg: &ModelConfig, layer: usize, what: &str) -> GpuError {
    let id = cfg.layers.get(layer).map(|l| l.variant_id()).unwrap_or("?");
    GpuError::Unsupported(format!("layer {layer} ({id}): the GPU trainer does not train {what} yet"))
}

/// A softmax layer's constants: RoPE table, bias table, window.
fn attention<'t>(
    cfg: &ModelConfig,
    i: usize,
    sl: &SoftmaxLowering,
    dims: Dims,
    dev: &wgpu::Device,
    learned: &mut impl Iterator<Item = &'t wgpu::Buffer>,
) -> Result<Attn> {
    let (t, h) = (dims.t, dims.h);
    if sl.relu_with_norm {
        return Err(unsupported(cfg, i, "ReLU attention with SimpleRMSNorm"));
    }
    let table = match &sl.bias {
        Bias::None => None,
        Bias::Table { learned: Some(_), .. } => {
            let buf =
                learned.next().ok_or_else(|| unsupported(cfg, i, "a learned table without a buffer"))?;
            Some((buf.clone(), Some(zeroed(dev, "table grad", h * t))))
        }
        Bias::Table { len, values, learned: None } => {
            if *len < t || values.len() < h * len {
                return Err(unsupported(cfg, i, "a distance table shorter than the training length"));
            }
            let rows: Vec<f32> =
                (0..h).flat_map(|hh| values[hh * len..hh * len + t].iter().copied()).collect();
            Some((init_storage(dev, "bias table", &rows), None))
        }
        Bias::Fire { .. } => return Err(unsupported(cfg, i, "FIRE")),
        Bias::Contextual { .. } => return Err(unsupported(cfg, i, "contextual positions (CoPE)")),
    };
    let rope = sl.rope.as_ref().map(|freqs| {
        let cs: Vec<f32> = (0..t)
            .flat_map(|pos| {
                freqs.iter().flat_map(move |f| {
                    let (sn, c) = (pos as f64 * f).sin_cos();
                    [c as f32, sn as f32]
                })
            })
            .collect();
        (init_storage(dev, "rope table", &cs), freqs.len())
    });
    let block = match sl.window {
        Window::Causal => 0,
        Window::Block(w) => w as u32,
    };
    Ok(Attn { scale: sl.scale, block, rope, table })
}

/// The sinusoidal position rows `[T, d]` (the core's `sinusoidal_embedding`).
fn sinusoidal_table(dev: &wgpu::Device, t: usize, d: usize) -> wgpu::Buffer {
    let mut pe = vec![0.0f32; t * d];
    for (pos, row) in pe.chunks_exact_mut(d).enumerate() {
        attnlab_core::ops::sinusoidal_embedding(pos, d, row);
    }
    init_storage(dev, "positions", &pe)
}

impl Rec<'_, '_> {
    fn dispatch(&mut self, k: K, params: &TrainParams, bufs: &[&wgpu::Buffer], grid: [u32; 3]) {
        self.items.push(Item::Dispatch(self.p.kernels.op(k, params, bufs, grid)));
    }

    fn gemm(&mut self, s: Shape, c: Mat, a: Mat, b: Mat) {
        self.items.push(Item::Dispatch(self.p.kernels.gemm(s, c, a, b)));
    }

    fn copy(&mut self, src: &wgpu::Buffer, dst: &wgpu::Buffer, words: usize) {
        self.items.push(Item::Copy { src: src.clone(), dst: dst.clone(), bytes: 4 * words as u64 });
    }

    fn off(&self, name: &str) -> Result<usize> {
        self.p.layout.off(name)
    }

    fn rows(&self) -> usize {
        self.p.dims.r
    }

    /// `y (+)= x·Wᵀ` for the tensor `w: [out, inp]`.
    fn linear_fwd(
        &mut self,
        y: &wgpu::Buffer,
        x: &wgpu::Buffer,
        w: &str,
        out: usize,
        inp: usize,
        acc: bool,
    ) -> Result<()> {
        let off = self.off(w)?;
        let s = Shape { accumulate: acc, ..Shape::mnk(self.rows(), out, inp) };
        self.gemm(s, Mat::rows(y, 0, out), Mat::rows(x, 0, inp), Mat::rows(self.p.params, off, inp).t());
        Ok(())
    }

    /// `dx (+)= dy·W` and `dW = dyᵀ·x` for `y = x·Wᵀ`.
    #[allow(clippy::too_many_arguments)]
    fn linear_bwd(
        &mut self,
        x: &wgpu::Buffer,
        dx: &wgpu::Buffer,
        dy: &wgpu::Buffer,
        w: &str,
        out: usize,
        inp: usize,
        acc: bool,
    ) -> Result<()> {
        let (off, r) = (self.off(w)?, self.rows());
        let s = Shape { accumulate: acc, ..Shape::mnk(r, inp, out) };
        self.gemm(s, Mat::rows(dx, 0, inp), Mat::rows(dy, 0, out), Mat::rows(self.p.params, off, inp));
        let grads = self.p.grads;
        self.gemm(
            Shape::mnk(out, inp, r),
            Mat::rows(grads, off, inp),
            Mat::rows(dy, 0, out).t(),
            Mat::rows(x, 0, inp),
        );
        self.written.insert(w.to_string());
        Ok(())
    }

    fn norm_params(&self, w: &str, flag: bool) -> Result<TrainParams> {
        let d = self.p.dims.d;
        Ok(TrainParams {
            rows: self.rows() as u32,
            width: d as u32,
            eps: self.p.eps,
            off0: self.off(w)? as u32,
            flag: u32::from(flag),
            ..TrainParams::default()
        })
    }

    fn rms_fwd(&mut self, y: &wgpu::Buffer, x: &wgpu::Buffer, rstd: &wgpu::Buffer, w: &str) -> Result<()> {
        let tp = self.norm_params(w, false)?;
        let params = self.p.params;
        self.dispatch(K::RmsFwd, &tp, &[x, params, y, rstd], grid(self.rows()));
        Ok(())
    }

    /// `dx (+)= ∂rms/∂x · dy` and the gain's gradient.
    fn rms_bwd(
        &mut self,
        dx: &wgpu::Buffer,
        dy: &wgpu::Buffer,
        x: &wgpu::Buffer,
        rstd: &wgpu::Buffer,
        w: &str,
        acc: bool,
    ) -> Result<()> {
        let tp = self.norm_params(w, acc)?;
        let (params, grads) = (self.p.params, self.p.grads);
        self.dispatch(K::RmsBwd, &tp, &[dy, x, params, dx], grid(self.rows()));
        self.dispatch(K::RmsDw, &tp, &[dy, x, rstd, grads], threads(self.p.dims.d));
        self.written.insert(w.to_string());
        Ok(())
    }
}

impl Rec<'_, '_> {
    /// `x = emb[tok]·scale (+ sinusoidal rows)`.
    fn embed_fwd(
        &mut self,
        x: &wgpu::Buffer,
        tok: &wgpu::Buffer,
        pe: &wgpu::Buffer,
        cfg: &ModelConfig,
    ) -> Result<()> {
        let Dims { r, d, t, .. } = self.p.dims;
        let tp = TrainParams {
            rows: r as u32,
            width: d as u32,
            t: t as u32,
            scale: cfg.embedding_scale(),
            off0: self.off("tok_emb.weight")? as u32,
            flag: u32::from(cfg.absolute_position == AbsolutePosition::Sinusoidal),
            ..TrainParams::default()
        };
        let params = self.p.params;
        self.dispatch(K::EmbedFwd, &tp, &[params, pe, tok, x], threads(r * d));
        Ok(())
    }

    /// The embedding's gradient from `dx` (added to the tied head's).
    fn embed_bwd(&mut self, dx: &wgpu::Buffer, csr: &wgpu::Buffer, cfg: &ModelConfig) -> Result<()> {
        let Dims { r, d, v, .. } = self.p.dims;
        let tp = TrainParams {
            rows: r as u32,
            width: d as u32,
            n: v as u32,
            scale: cfg.embedding_scale(),
            off0: self.off("tok_emb.weight")? as u32,
            flag: u32::from(cfg.tie_embeddings),
            ..TrainParams::default()
        };
        let grads = self.p.grads;
        self.dispatch(K::EmbedBwd, &tp, &[dx, csr, grads], threads(v * d));
        self.written.insert("tok_emb.weight".to_string());
        Ok(())
    }

    /// Attention-layer parameters of train.wgsl's row kernels (`rows` score rows or token rows).
    fn attn_params(&self, at: &Attn, rows: usize) -> TrainParams {
        let Dims { t, h, dh, a, .. } = self.p.dims;
        TrainParams {
            rows: rows as u32,
            t: t as u32,
            h: h as u32,
            dh: dh as u32,
            a: a as u32,
            n: t as u32,
            off0: at.block,
            ..TrainParams::default()
        }
    }

    /// RoPE on q or k in place (`back`: the inverse rotation).
    fn rotate(&mut self, at: &Attn, x: &wgpu::Buffer, back: bool) {
        if let Some((tab, n)) = &at.rope {
            let Dims { r, h, .. } = self.p.dims;
            let tp = TrainParams { n: *n as u32, flag: u32::from(back), ..self.attn_params(at, r) };
            self.dispatch(K::Rotate, &tp, &[tab, x], threads(r * h * n));
        }
    }

    /// Per-(batch, head) views: token rows of q/k/v/o and score matrices.
    fn heads<'b>(&self, buf: &'b wgpu::Buffer) -> Mat<'b> {
        let Dims { t, a, dh, .. } = self.p.dims;
        Mat::rows(buf, 0, a).batched(t * a, dh)
    }

    fn scores<'b>(&self, buf: &'b wgpu::Buffer) -> Mat<'b> {
        let Dims { t, h, .. } = self.p.dims;
        Mat::rows(buf, 0, t).batched(h * t * t, t * t)
    }

    /// A per-(batch, head) product of `m × n` over `k`.
    fn per_head(&self, m: usize, n: usize, k: usize, alpha: f32) -> Shape {
        let Dims { b, h, .. } = self.p.dims;
        Shape { m, n, k, batch: b * h, nh: h, alpha, accumulate: false }
    }

    fn block_fwd(
        &mut self,
        i: usize,
        s: &Saved,
        at: &Attn,
        next: &wgpu::Buffer,
        dummy: &wgpu::Buffer,
    ) -> Result<()> {
        let Dims { r, d, a, f, t, b, h, dh, .. } = self.p.dims;
        let w = |n: &str| format!("layers.{i}.{n}");
        self.rms_fwd(&s.u1, &s.x, &s.rstd1, &w("attn_norm.weight"))?;
        for (out, name) in [(&s.q, "attn.wq"), (&s.k, "attn.wk"), (&s.v, "attn.wv")] {
            self.linear_fwd(out, &s.u1, &w(name), a, d, false)?;
        }
        self.rotate(at, &s.q, false);
        self.rotate(at, &s.k, false);
        self.gemm(
            self.per_head(t, t, dh, at.scale),
            self.scores(&s.p),
            self.heads(&s.q),
            self.heads(&s.k).t(),
        );
        let table = at.table.as_ref().map(|(tab, _)| tab);
        let tp = TrainParams { flag: u32::from(table.is_some()), ..self.attn_params(at, b * h * t) };
        self.dispatch(K::SoftmaxFwd, &tp, &[table.unwrap_or(dummy), &s.p], grid(b * h * t));
        self.gemm(self.per_head(t, dh, t, 1.0), self.heads(&s.o), self.scores(&s.p), self.heads(&s.v));
        self.copy(&s.x, &s.mid, r * d);
        self.linear_fwd(&s.mid, &s.o, &w("attn.wo"), d, a, true)?;
        self.rms_fwd(&s.u2, &s.mid, &s.rstd2, &w("ffn_norm.weight"))?;
        self.linear_fwd(&s.g, &s.u2, &w("ffn.w_gate"), f, d, false)?;
        self.linear_fwd(&s.up, &s.u2, &w("ffn.w_up"), f, d, false)?;
        let sw = TrainParams { rows: r as u32, width: f as u32, ..TrainParams::default() };
        self.dispatch(K::SwigluFwd, &sw, &[&s.g, &s.up, &s.hid], threads(r * f));
        self.copy(&s.mid, next, r * d);
        self.linear_fwd(next, &s.hid, &w("ffn.w_down"), d, f, true)
    }

    /// With `c.dx` = dL/d(block output), adds dL/d(block input) to it and writes the block's
    /// parameter gradients.
    fn block_bwd(&mut self, i: usize, s: &Saved, at: &Attn, c: &Scratch) -> Result<()> {
        let Dims { r, d, a, f, t, b, h, dh, .. } = self.p.dims;
        let w = |n: &str| format!("layers.{i}.{n}");
        // FFN.
        self.linear_bwd(&s.hid, &c.dhid, &c.dx, &w("ffn.w_down"), d, f, false)?;
        let sw = TrainParams { rows: r as u32, width: f as u32, ..TrainParams::default() };
        self.dispatch(K::SwigluBwd, &sw, &[&s.g, &s.up, &c.dhid, &c.dg, &c.dup], threads(r * f));
        self.linear_bwd(&s.u2, &c.du, &c.dg, &w("ffn.w_gate"), f, d, false)?;
        self.linear_bwd(&s.u2, &c.du, &c.dup, &w("ffn.w_up"), f, d, true)?;
        self.rms_bwd(&c.dx, &c.du, &s.mid, &s.rstd2, &w("ffn_norm.weight"), true)?;
        // Attention.
        self.linear_bwd(&s.o, &c.dout, &c.dx, &w("attn.wo"), d, a, false)?;
        self.gemm(
            self.per_head(t, t, dh, 1.0),
            self.scores(&c.dp),
            self.heads(&c.dout),
            self.heads(&s.v).t(),
        );
        self.gemm(
            self.per_head(t, dh, t, 1.0),
            self.heads(&c.dv),
            self.scores(&s.p).t(),
            self.heads(&c.dout),
        );
        let tp = self.attn_params(at, b * h * t);
        self.dispatch(K::SoftmaxBwd, &tp, &[&s.p, &c.dp], grid(b * h * t));
        if let Some((_, Some(grad))) = &at.table {
            self.dispatch(K::TableGrad, &tp, &[&c.dp, grad], threads(h * t));
        }
        self.gemm(self.per_head(t, dh, t, at.scale), self.heads(&c.dq), self.scores(&c.dp), self.heads(&s.k));
        self.gemm(
            self.per_head(t, dh, t, at.scale),
            self.heads(&c.dk),
            self.scores(&c.dp).t(),
            self.heads(&s.q),
        );
        self.rotate(at, &c.dq, true);
        self.rotate(at, &c.dk, true);
        for (j, (dy, name)) in
            [(&c.dq, "attn.wq"), (&c.dk, "attn.wk"), (&c.dv, "attn.wv")].into_iter().enumerate()
        {
            self.linear_bwd(&s.u1, &c.du, dy, &w(name), a, d, j > 0)?;
        }
        self.rms_bwd(&c.dx, &c.du, &s.x, &s.rstd1, &w("attn_norm.weight"), true)
    }
}
