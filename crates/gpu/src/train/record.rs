//! Recording a training step once: the forward pass (saving what the backward pass reads), the
//! loss, the backward pass in reverse layer order and the partial sums of the gradient norm. The
//! shapes never change, so `GpuTrainer` replays the same ops at every step.
//!
//! Per block (pre-norm, as `attnlab_train::TrainModel::forward`):
//! `u1 = rms(x)`, `q, k, v = u1·W{q,k,v}ᵀ` (RoPE on q, k), `P = softmax(scale·q·kᵀ + B)`,
//! `mid = x + (P·v)·Woᵀ`, `u2 = rms(mid)`, `x' = mid + (silu(u2·Wgᵀ) ⊙ u2·Wuᵀ)·Wdᵀ`.

use super::kernels::{grid, threads, Kernels, Mat, Op, Shape, K};
use super::mixer::{Mixer, Setup};
use super::{init_storage, zeroed, Dims, Layout};
use crate::error::{GpuError, Result};
use crate::params::TrainParams;
use attnlab_core::config::{AbsolutePosition, ModelConfig};
use attnlab_core::lowering::Lowering;
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

    /// Items of the whole step (dispatches and copies).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Append item `i` of the step alone to `enc`; a dispatch's kernel and grid, `("copy", [bytes,
    /// 0, 0])` for a copy.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn encode_item(
        &self,
        k: &Kernels,
        enc: &mut wgpu::CommandEncoder,
        i: usize,
    ) -> (&'static str, [u32; 3]) {
        match &self.items[i] {
            Item::Dispatch(op) => {
                k.encode(enc, &[op]);
                op.describe()
            }
            Item::Copy { src, dst, bytes } => {
                enc.copy_buffer_to_buffer(src, 0, dst, 0, *bytes);
                ("copy", [*bytes as u32, 0, 0])
            }
        }
    }

    /// Compute dispatches of a step (`forward_only`: up to the loss).
    pub fn dispatches(&self, forward_only: bool) -> usize {
        let items = if forward_only { &self.items[..self.n_forward] } else { &self.items[..] };
        items.iter().filter(|i| matches!(i, Item::Dispatch(_))).count()
    }
}

/// Saved activations of one block. `q, k, v` are the projections; the mixer writes its output, the
/// input of Wo, to `att` (the same buffer as `o` when there is no post step).
pub(super) struct Saved {
    pub x: wgpu::Buffer,
    pub u1: wgpu::Buffer,
    pub rstd1: wgpu::Buffer,
    pub q: wgpu::Buffer,
    pub k: wgpu::Buffer,
    pub v: wgpu::Buffer,
    /// CoPE: the gates σ(s) and the unclamped contextual positions `[B·H, T, T]`.
    pub cg: wgpu::Buffer,
    pub cpos: wgpu::Buffer,
    /// LRPE's complex core: q's and k's features before it (`[R, a]`).
    pub cq: wgpu::Buffer,
    pub ck: wgpu::Buffer,
    /// Linear family: the feature-mapped (and rotated) q and k.
    pub fq: wgpu::Buffer,
    pub fk: wgpu::Buffer,
    /// Attention weights `[B·H, T, T]`.
    pub p: wgpu::Buffer,
    /// Per-head outputs merged `[R, a]`, before any post step.
    pub o: wgpu::Buffer,
    /// Denominators `[B·H·T]`.
    pub den: wgpu::Buffer,
    /// Post step: the normed output, the gate's pre-activation, the norm's 1/rms per group.
    pub pn: wgpu::Buffer,
    pub pg: wgpu::Buffer,
    pub prstd: wgpu::Buffer,
    /// A low-rank gate's `[R, rank]` down projection, its `[R, a]` pre-activation and the running
    /// log-gates `B`.
    pub gd: wgpu::Buffer,
    pub gz: wgpu::Buffer,
    pub bc: wgpu::Buffer,
    /// ReGLA's refined gate: the pre-activation of r.
    pub gr: wgpu::Buffer,
    /// A value-axis gate's pre-activation and running log-gates.
    pub vz: wgpu::Buffer,
    pub cv: wgpu::Buffer,
    pub att: wgpu::Buffer,
    mid: wgpu::Buffer,
    u2: wgpu::Buffer,
    rstd2: wgpu::Buffer,
    g: wgpu::Buffer,
    up: wgpu::Buffer,
    hid: wgpu::Buffer,
}

/// Backward-pass scratch shared by the blocks.
pub(super) struct Scratch {
    dx: wgpu::Buffer,
    pub du: wgpu::Buffer,
    pub dq: wgpu::Buffer,
    pub dk: wgpu::Buffer,
    pub dv: wgpu::Buffer,
    /// Gradients of the mixer's output (the input of Wo) and of `o`.
    pub datt: wgpu::Buffer,
    pub dout: wgpu::Buffer,
    pub dp: wgpu::Buffer,
    pub dfq: wgpu::Buffer,
    pub dfk: wgpu::Buffer,
    pub dden: wgpu::Buffer,
    pub dpn: wgpu::Buffer,
    pub dpg: wgpu::Buffer,
    /// A low-rank gate: the gradients of its running log-gates, pre-activation and down projection.
    pub dlg: wgpu::Buffer,
    pub dgz: wgpu::Buffer,
    pub dgd: wgpu::Buffer,
    pub dgr: wgpu::Buffer,
    /// Scratch for LRPE's permutations (forward and backward).
    pub tmp: wgpu::Buffer,
    pub tmp2: wgpu::Buffer,
    /// CoPE: the gradient of each row's `q·e[p]` `[B·H·T, npos]`.
    pub dint: wgpu::Buffer,
    /// A value-axis gate: the gradients of its running log-gates and pre-activation.
    pub dlgv: wgpu::Buffer,
    pub dvz: wgpu::Buffer,
    dhid: wgpu::Buffer,
    dg: wgpu::Buffer,
    dup: wgpu::Buffer,
}

impl Saved {
    /// The buffers one block with mixer `mx` saves for its backward.
    fn alloc(dev: &wgpu::Device, dims: Dims, mx: &Mixer) -> Self {
        let Dims { r, d, a, f, t, b, h, dh, .. } = dims;
        let buf = |label: &str, n: usize| zeroed(dev, label, n);
        // `n` words where the mixer uses the buffer, a 4-word placeholder where it does not.
        let when = |used: bool, n: usize| if used { n } else { 4 };
        let (linear, post, gated, cope) =
            (mx.is_linear(), mx.has_post(), mx.gate_rank().is_some(), mx.cope_positions().is_some());
        let o = buf("o", r * a);
        Self {
            x: buf("x", r * d),
            u1: buf("u1", r * d),
            rstd1: buf("rstd1", r),
            q: buf("q", r * a),
            k: buf("k", r * a),
            v: buf("v", r * a),
            cg: buf("cope gates", when(cope, b * h * t * t)),
            cpos: buf("cope positions", when(cope, b * h * t * t)),
            cq: buf("complex pre q", when(mx.is_complex(), r * a)),
            ck: buf("complex pre k", when(mx.is_complex(), r * a)),
            fq: buf("fq", when(linear, r * h * mx.feature_width(dh))),
            fk: buf("fk", when(linear, r * h * mx.feature_width(dh))),
            p: buf("weights", b * h * t * t),
            den: buf("den", when(linear, b * h * t)),
            pn: buf("post normed", when(post, r * a)),
            pg: buf("post gate", when(post, r * a)),
            prstd: buf("post rstd", when(post, r * a)),
            gd: buf("gate down", r * mx.gate_rank().unwrap_or(0)),
            gz: buf("gate pre", when(gated, r * a)),
            bc: buf("running log-gates", when(gated, r * a)),
            gr: buf("refined gate r", when(gated, r * a)),
            vz: buf("value gate pre", when(mx.has_value_gate(), r * a)),
            cv: buf("running value log-gates", when(mx.has_value_gate(), r * a)),
            att: if post { buf("att", r * a) } else { o.clone() },
            o,
            mid: buf("mid", r * d),
            u2: buf("u2", r * d),
            rstd2: buf("rstd2", r),
            g: buf("gate", r * f),
            up: buf("up", r * f),
            hid: buf("hid", r * f),
        }
    }
}

impl Scratch {
    /// The backward scratch shared by the blocks, sized for the widest of `mixers`.
    fn alloc(dev: &wgpu::Device, dims: Dims, mixers: &[Mixer]) -> Self {
        let Dims { r, d, a, f, t, b, h, dh, .. } = dims;
        let buf = |label: &str, n: usize| zeroed(dev, label, n);
        let widest = mixers.iter().map(|m| m.feature_width(dh)).max().unwrap_or(dh);
        Self {
            dx: buf("dx", r * d),
            du: buf("du", r * d),
            dq: buf("dq", r * a),
            dk: buf("dk", r * a),
            dv: buf("dv", r * a),
            datt: buf("datt", r * a),
            dout: buf("do", r * a),
            dp: buf("dp", b * h * t * t),
            dfq: buf("dfq", r * h * widest),
            dfk: buf("dfk", r * h * widest),
            dden: buf("dden", b * h * t),
            dpn: buf("dpn", r * a),
            dpg: buf("dpg", r * a),
            dlg: buf("dlg", r * a),
            dgz: buf("dgz", r * a),
            dgd: buf("dgd", r * mixers.iter().filter_map(Mixer::gate_rank).max().unwrap_or(0)),
            dlgv: buf("dlgv", r * a),
            dgr: buf("dgr", r * a),
            tmp: buf("tmp", r * a),
            tmp2: buf("tmp2", r * a),
            dint: buf(
                "cope dint",
                b * h * t * mixers.iter().filter_map(Mixer::cope_positions).max().unwrap_or(0),
            ),
            dvz: buf("dvz", r * a),
            dhid: buf("dhid", r * f),
            dg: buf("dg", r * f),
            dup: buf("dup", r * f),
        }
    }
}

pub(super) struct Rec<'a, 'b> {
    pub p: &'b Parts<'a>,
    items: Vec<Item>,
    /// Tensors whose gradient the step writes (every GPU-owned tensor must be among them).
    pub written: HashSet<String>,
    /// A 4-word buffer bound where a kernel's optional input is off.
    pub dummy: wgpu::Buffer,
    /// The weight gradients' per-slab partial products when their K is split (`split_k_slabs`);
    /// `None` with `ATTNLAB_SPLIT_K=off`.
    split: Option<wgpu::Buffer>,
}

/// Workgroups a weight gradient's gemm is split up to: 64 × 64 tiles × slabs of the batch's rows.
const SPLIT_K_GROUPS: usize = 128;
/// The fewest rows a slab of a split weight gradient sums (one 16-deep K tile).
const SPLIT_K_MIN_ROWS: usize = 16;

/// Whether weight gradients split their sum over the batch's rows across workgroups (the default;
/// `ATTNLAB_SPLIT_K=off` computes each in one gemm of `⌈out/64⌉·⌈inp/64⌉` workgroups, to compare).
pub fn split_k() -> bool {
    !std::env::var("ATTNLAB_SPLIT_K").is_ok_and(|v| v == "off")
}

/// Slabs of `rows` for the gradient `dW [out, inp] = Σ_r dy_rᵀ x_r`: as many as keep the gemm
/// within `SPLIT_K_GROUPS` workgroups and each slab at `SPLIT_K_MIN_ROWS` rows, dividing `rows`
/// (1: no split). With K = 2,048 rows a 128 × 128 weight is 4 tiles, so 32 slabs of 64 rows
/// instead of 4 workgroups each walking 128 K tiles.
fn split_k_slabs(out: usize, inp: usize, rows: usize) -> usize {
    let most = (SPLIT_K_GROUPS / (out.div_ceil(64) * inp.div_ceil(64))).min(rows / SPLIT_K_MIN_ROWS);
    (1..=most.max(1)).rev().find(|s| rows.is_multiple_of(*s)).unwrap_or(1)
}

/// Record the step of a model with these layer lowerings; `learned_tables` are the host-written
/// table buffers by layer, `inputs` the token, target and rows-by-token buffers.
pub(super) fn record(
    p: &mut Parts,
    cfg: &ModelConfig,
    lowerings: &[Lowering],
    learned_tables: &[(usize, wgpu::Buffer)],
    inputs: [&wgpu::Buffer; 3],
) -> Result<Recorded> {
    let Dims { r, d, v, t, .. } = p.dims;
    let [tok, tgt, csr] = inputs;
    let dev = p.dev;
    let mut mixers = Vec::new();
    for (i, l) in lowerings.iter().enumerate() {
        let learned = learned_tables.iter().find(|(layer, _)| *layer == i).map(|(_, b)| b);
        mixers.push(Mixer::new(&Setup { cfg, layer: i, dims: p.dims, dev, learned }, l)?);
    }
    let table_grads: Vec<wgpu::Buffer> = mixers.iter().filter_map(|m| m.table_grad().cloned()).collect();
    let buf = |label: &str, n: usize| zeroed(dev, label, n);
    let saved: Vec<Saved> = mixers.iter().map(|mx| Saved::alloc(dev, p.dims, mx)).collect();
    let s = Scratch::alloc(dev, p.dims, &mixers);
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
    // At most SPLIT_K_GROUPS tiles of 64 × 64 partial sums at once (see `split_k_slabs`).
    let split = split_k().then(|| buf("split-K partial gradients", SPLIT_K_GROUPS * 64 * 64));
    let mut rec = Rec { p, items: Vec::new(), written: HashSet::new(), dummy: dummy.clone(), split };

    // Forward.
    let x0 = saved.first().map(|s| &s.x).unwrap_or(&xf);
    rec.embed_fwd(x0, tok, pe.as_ref().unwrap_or(&dummy), cfg)?;
    for (i, (sv, mx)) in saved.iter().zip(&mixers).enumerate() {
        let next = saved.get(i + 1).map(|s| &s.x).unwrap_or(&xf);
        rec.block_fwd(i, sv, mx, next, &s)?;
    }
    rec.rms_fwd(&hf, &xf, &rstdf, "final_norm.weight")?;
    rec.linear_fwd(&logits, &hf, head, v, d, false)?;
    let xent = TrainParams { rows: r as u32, n: v as u32, scale: 1.0 / r as f32, ..TrainParams::default() };
    rec.dispatch(K::Xent, &xent, &[tgt, &logits, &loss], grid(r));
    let n_forward = rec.items.len();

    // Backward.
    rec.linear_bwd(&hf, &s.du, &logits, head, v, d, false)?;
    rec.rms_bwd(&s.dx, &s.du, &xf, &rstdf, "final_norm.weight", false)?;
    for (i, (sv, mx)) in saved.iter().zip(&mixers).enumerate().rev() {
        rec.block_bwd(i, sv, mx, &s)?;
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

pub(super) fn unsupported(cfg: &ModelConfig, layer: usize, what: &str) -> GpuError {
    let id = cfg.layers.get(layer).map(|l| l.variant_id()).unwrap_or("?");
    GpuError::Unsupported(format!("layer {layer} ({id}): the GPU trainer does not train {what} yet"))
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
    pub(super) fn dispatch(&mut self, k: K, params: &TrainParams, bufs: &[&wgpu::Buffer], grid: [u32; 3]) {
        self.items.push(Item::Dispatch(self.p.kernels.op(k, params, bufs, grid)));
    }

    pub(super) fn gemm(&mut self, s: Shape, c: Mat, a: Mat, b: Mat) {
        self.items.push(Item::Dispatch(self.p.kernels.gemm(s, c, a, b)));
    }

    pub(super) fn copy(&mut self, src: &wgpu::Buffer, dst: &wgpu::Buffer, words: usize) {
        self.items.push(Item::Copy { src: src.clone(), dst: dst.clone(), bytes: 4 * words as u64 });
    }

    pub(super) fn off(&self, name: &str) -> Result<usize> {
        self.p.layout.off(name)
    }

    pub(super) fn rows(&self) -> usize {
        self.p.dims.r
    }

    /// `y (+)= x·Wᵀ` for the tensor `w: [out, inp]`.
    pub(super) fn linear_fwd(
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
    pub(super) fn linear_bwd(
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
        let split = self.split.clone().map(|b| (b, split_k_slabs(out, inp, r)));
        match split.filter(|&(_, slabs)| slabs > 1) {
            None => self.gemm(
                Shape::mnk(out, inp, r),
                Mat::rows(grads, off, inp),
                Mat::rows(dy, 0, out).t(),
                Mat::rows(x, 0, inp),
            ),
            Some((split, slabs)) => {
                // Slab z's rows [z·k, (z + 1)·k) into split[z], then the column sums over the slabs.
                let k = r / slabs;
                self.gemm(
                    Shape { batch: slabs, ..Shape::mnk(out, inp, k) },
                    Mat::rows(&split, 0, inp).batched(out * inp, 0),
                    Mat::rows(dy, 0, out).t().batched(k * out, 0),
                    Mat::rows(x, 0, inp).batched(k * inp, 0),
                );
                let tp = TrainParams {
                    rows: slabs as u32,
                    width: (out * inp) as u32,
                    off0: off as u32,
                    ..TrainParams::default()
                };
                self.dispatch(K::Colsum, &tp, &[&split, grads], threads(out * inp));
            }
        }
        self.written.insert(w.to_string());
        Ok(())
    }

    /// Parameters of the RMSNorm kernels over `rows` groups of `width` with the gain `w`.
    fn norm_params(&self, w: &str, flag: bool, rows: usize, width: usize, eps: f32) -> Result<TrainParams> {
        Ok(TrainParams {
            rows: rows as u32,
            width: width as u32,
            eps,
            off0: self.off(w)? as u32,
            flag: u32::from(flag),
            ..TrainParams::default()
        })
    }

    /// The residual stream's RMSNorm of every row.
    pub(super) fn rms_fwd(
        &mut self,
        y: &wgpu::Buffer,
        x: &wgpu::Buffer,
        rstd: &wgpu::Buffer,
        w: &str,
    ) -> Result<()> {
        let Dims { r, d, .. } = self.p.dims;
        self.rms_fwd_groups(y, x, rstd, w, r, d, self.p.eps)
    }

    /// RMSNorm over `rows` contiguous groups of `width` values.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rms_fwd_groups(
        &mut self,
        y: &wgpu::Buffer,
        x: &wgpu::Buffer,
        rstd: &wgpu::Buffer,
        w: &str,
        rows: usize,
        width: usize,
        eps: f32,
    ) -> Result<()> {
        let tp = self.norm_params(w, false, rows, width, eps)?;
        let params = self.p.params;
        self.dispatch(K::RmsFwd, &tp, &[x, params, y, rstd], grid(rows));
        Ok(())
    }

    /// `dx (+)= ∂rms/∂x · dy` and the gain's gradient, for the residual stream's norm.
    pub(super) fn rms_bwd(
        &mut self,
        dx: &wgpu::Buffer,
        dy: &wgpu::Buffer,
        x: &wgpu::Buffer,
        rstd: &wgpu::Buffer,
        w: &str,
        acc: bool,
    ) -> Result<()> {
        let Dims { r, d, .. } = self.p.dims;
        let tp = self.norm_params(w, acc, r, d, self.p.eps)?;
        self.rms_bwd_params(dx, dy, x, rstd, w, tp)
    }

    /// [`Rec::rms_bwd`] over `rows` groups of `width` (the gradient written, not added).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rms_bwd_groups(
        &mut self,
        dx: &wgpu::Buffer,
        dy: &wgpu::Buffer,
        x: &wgpu::Buffer,
        rstd: &wgpu::Buffer,
        w: &str,
        rows: usize,
        width: usize,
        eps: f32,
    ) -> Result<()> {
        let tp = self.norm_params(w, false, rows, width, eps)?;
        self.rms_bwd_params(dx, dy, x, rstd, w, tp)
    }

    fn rms_bwd_params(
        &mut self,
        dx: &wgpu::Buffer,
        dy: &wgpu::Buffer,
        x: &wgpu::Buffer,
        rstd: &wgpu::Buffer,
        w: &str,
        tp: TrainParams,
    ) -> Result<()> {
        let (params, grads) = (self.p.params, self.p.grads);
        self.dispatch(K::RmsBwd, &tp, &[dy, x, params, dx], grid(tp.rows as usize));
        self.dispatch(K::RmsDw, &tp, &[dy, x, rstd, grads], grid(tp.width as usize));
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

    /// Row-kernel parameters of `[B·H, T, T]` weights (`rows` rows) over `[R, a]` head buffers.
    pub(super) fn attn_params(&self, rows: usize) -> TrainParams {
        let Dims { t, h, dh, a, .. } = self.p.dims;
        TrainParams {
            rows: rows as u32,
            t: t as u32,
            h: h as u32,
            dh: dh as u32,
            a: a as u32,
            n: t as u32,
            ..TrainParams::default()
        }
    }

    /// RoPE on every head of `x` in place (`back`: the inverse rotation), with a `[T, n, 2]` table.
    pub(super) fn rotate(&mut self, rope: Option<&(wgpu::Buffer, usize)>, x: &wgpu::Buffer, back: bool) {
        if let Some((tab, n)) = rope {
            let Dims { r, h, .. } = self.p.dims;
            let tp = TrainParams { n: *n as u32, flag: u32::from(back), ..self.attn_params(r) };
            self.dispatch(K::Rotate, &tp, &[tab, x], threads(r * h * n));
        }
    }

    /// Per-(batch, head) views of token rows with `w` channels per head.
    pub(super) fn heads_w<'b>(&self, buf: &'b wgpu::Buffer, w: usize) -> Mat<'b> {
        let Dims { t, h, .. } = self.p.dims;
        Mat::rows(buf, 0, h * w).batched(t * h * w, w)
    }

    /// Per-(batch, head) views: token rows of q/k/v/o and score matrices.
    pub(super) fn heads<'b>(&self, buf: &'b wgpu::Buffer) -> Mat<'b> {
        let Dims { t, a, dh, .. } = self.p.dims;
        Mat::rows(buf, 0, a).batched(t * a, dh)
    }

    pub(super) fn scores<'b>(&self, buf: &'b wgpu::Buffer) -> Mat<'b> {
        let Dims { t, h, .. } = self.p.dims;
        Mat::rows(buf, 0, t).batched(h * t * t, t * t)
    }

    /// A per-(batch, head) product of `m × n` over `k`.
    pub(super) fn per_head(&self, m: usize, n: usize, k: usize, alpha: f32) -> Shape {
        let Dims { b, h, .. } = self.p.dims;
        Shape { m, n, k, batch: b * h, nh: h, alpha, accumulate: false }
    }

    fn block_fwd(&mut self, i: usize, s: &Saved, mx: &Mixer, next: &wgpu::Buffer, c: &Scratch) -> Result<()> {
        let Dims { r, d, a, f, .. } = self.p.dims;
        let w = |n: &str| format!("layers.{i}.{n}");
        self.rms_fwd(&s.u1, &s.x, &s.rstd1, &w("attn_norm.weight"))?;
        for (out, name) in [(&s.q, "attn.wq"), (&s.k, "attn.wk"), (&s.v, "attn.wv")] {
            self.linear_fwd(out, &s.u1, &w(name), a, d, false)?;
        }
        self.mixer_fwd(s, mx, c)?;
        self.copy(&s.x, &s.mid, r * d);
        self.linear_fwd(&s.mid, &s.att, &w("attn.wo"), d, a, true)?;
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
    fn block_bwd(&mut self, i: usize, s: &Saved, mx: &Mixer, c: &Scratch) -> Result<()> {
        let Dims { r, d, a, f, .. } = self.p.dims;
        let w = |n: &str| format!("layers.{i}.{n}");
        // FFN.
        self.linear_bwd(&s.hid, &c.dhid, &c.dx, &w("ffn.w_down"), d, f, false)?;
        let sw = TrainParams { rows: r as u32, width: f as u32, ..TrainParams::default() };
        self.dispatch(K::SwigluBwd, &sw, &[&s.g, &s.up, &c.dhid, &c.dg, &c.dup], threads(r * f));
        self.linear_bwd(&s.u2, &c.du, &c.dg, &w("ffn.w_gate"), f, d, false)?;
        self.linear_bwd(&s.u2, &c.du, &c.dup, &w("ffn.w_up"), f, d, true)?;
        self.rms_bwd(&c.dx, &c.du, &s.mid, &s.rstd2, &w("ffn_norm.weight"), true)?;
        // Attention.
        self.linear_bwd(&s.att, &c.datt, &c.dx, &w("attn.wo"), d, a, false)?;
        self.mixer_bwd(s, mx, c)?;
        for (j, (dy, name)) in
            [(&c.dq, "attn.wq"), (&c.dk, "attn.wk"), (&c.dv, "attn.wv")].into_iter().enumerate()
        {
            self.linear_bwd(&s.u1, &c.du, dy, &w(name), a, d, j > 0)?;
        }
        self.post_gate_bwd(s, mx, c)?;
        self.rms_bwd(&c.dx, &c.du, &s.x, &s.rstd1, &w("attn_norm.weight"), true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 1.1M preset at 16 × 128 (2,048 rows): the attention projections (4 tiles) get 32 slabs,
    /// the feed-forward ones (12 tiles) 8, the output head (64 tiles) 2; every split divides the
    /// rows, keeps slabs of at least one K tile and fits the scratch of `SPLIT_K_GROUPS` tiles.
    #[test]
    fn split_k_fills_the_grid_and_divides_the_rows() {
        assert_eq!(split_k_slabs(128, 128, 2048), 32);
        assert_eq!(split_k_slabs(384, 128, 2048), 8);
        assert_eq!(split_k_slabs(128, 384, 2048), 8);
        assert_eq!(split_k_slabs(2048, 128, 2048), 2);
        assert_eq!(split_k_slabs(128, 128, 15), 1, "fewer rows than one K tile");
        for rows in [1, 16, 48, 100, 512, 2048, 4096, 3000] {
            for (out, inp) in [(32, 32), (48, 32), (128, 128), (384, 128), (2048, 128), (9000, 100)] {
                let s = split_k_slabs(out, inp, rows);
                assert_eq!(rows % s, 0, "{s} slabs of {rows} rows");
                assert!(s == 1 || rows / s >= SPLIT_K_MIN_ROWS, "{rows} rows in {s} slabs");
                assert!(s * out * inp <= SPLIT_K_GROUPS * 64 * 64 || s == 1, "{out} × {inp}: {s} slabs");
            }
        }
    }
}
