//! Recording a session's forward pass once: one function per kind of block (embedding, softmax
//! attention, linear attention, FFN, head), each appending [`Op`]s (pipeline, bind group, dispatch
//! shape) that `GpuSession::encode` replays at every step.

use super::fused::Fused;
use super::introspect::Capture;
use super::layers::{Gate, Kind, Layer, LinearLayer, Norm, Post, Proj, SoftmaxLayer};
use super::pipes::{BlockPipes, DecodePipes, LinearPipes, PipeIds, SoftmaxPipes};
use super::session::{Acts, BlockMem, LinearState, SessionMem};
use super::{bind, uniform, GpuModel};
use crate::error::{GpuError, Result};
use crate::params::{
    BiasKind, DecodeParams, EmbedParams, EwOp, EwParams, FeatKind, FeatParams, MatmulParams, NormOp,
    NormParams, RotaryParams, SampleParams, ScanParams, ATTN_KS, ATTN_TILE_VEC4, ATTN_TQ,
};
use attnlab_core::config::{AbsolutePosition, FfnKind};
use attnlab_core::ops::SIMPLE_RMS_EPS;

/// Loop iterations one tiled-attention invocation may spend (Mesa llvmpipe stops a loop nest after
/// ~65k); longer key ranges use the per-row kernel.
const ATTN_BUDGET: usize = 49152;

/// Dispatch shape of an op as a function of the step's row count.
#[derive(Clone, Copy)]
pub(super) enum Disp {
    /// `rows · per_row` invocations of a 64-wide kernel.
    Threads(u32),
    /// A fixed number of invocations of a 64-wide kernel.
    Fixed(u32),
    /// Matmul tiles (MATMUL_TILE²) over (out, rows); `last`: only the last row.
    Mat { outd: u32, last: bool },
    /// One workgroup per (group, row).
    Norm(u32),
    /// Attention: `tiled` ops run when the step has more than one row and ends at most at `max_end`
    /// (one workgroup per (head, ATTN_TQ rows)); the others (one workgroup per (head, row)) otherwise.
    Attn { heads: u32, max_end: u32, tiled: bool },
    /// `n` workgroups (of the fused decode).
    Groups(u32),
    /// The fused softmax decode: (used splits, heads) workgroups, the splits a row at the step's
    /// position uses ([`super::fused::splits_used`]).
    SplitK { heads: u32, splits: u32, keys: u32, block: u32 },
    /// Linear scan pass (`per` invocations of a 64-wide kernel per unit): pass 0 (sequential, per
    /// step) runs below SCAN_CHUNKED_MIN rows, the chunked passes 1 (per chunk), 2 (per step) and
    /// 3 (per row) at or above.
    Scan { pass: u8, per: u32 },
}

/// A recorded dispatch.
pub(super) struct Op {
    pub pipe: usize,
    pub bind: wgpu::BindGroup,
    pub disp: Disp,
}

/// The op lists of a session.
pub(super) struct Recorded {
    /// Embedding, every block, final norm.
    pub forward: Vec<Op>,
    /// Logits of every row.
    pub head_all: Vec<Op>,
    /// Logits of the last row only.
    pub head_last: Vec<Op>,
    /// Greedy sampling of the last row's logits.
    pub sample: Op,
    /// The fused decode of one row, logits included (empty: decode runs `forward` + `head_last`).
    pub decode: Vec<Op>,
    /// Greedy sampling that also feeds the token to the fused decode's next step (`fa` word 0).
    pub sample_fused: Option<Op>,
}

/// How a matmul writes its output.
#[derive(Clone, Copy, PartialEq)]
enum Out {
    Write,
    /// Add to the output (residual).
    Accumulate,
    /// Only the step's last row, written to output row 0.
    LastRow,
}

/// Record the forward pass of `m` over the buffers of `mem` (and a trace session's captures).
pub(super) fn record(
    m: &GpuModel,
    ids: &PipeIds,
    mem: &SessionMem,
    mut capture: Option<&mut Capture>,
) -> Result<Recorded> {
    let mut b = Builder { m, ids, step: &mem.step, ops: Vec::new() };
    let (acts, p) = (&mem.acts, &mem.plan);
    b.embedding(&mem.tok, acts);
    for (i, ((l, pipes), state)) in m.layers.iter().zip(&ids.blocks).zip(&mem.blocks).enumerate() {
        b.block(l, pipes, state, mem, capture.as_deref_mut())
            .ok_or_else(|| GpuError::Unsupported(format!("layer {i}: no pipeline or state for its kind")))?;
    }
    b.norm(&m.final_norm, &acts.x, &acts.h, p.d);
    let forward = std::mem::take(&mut b.ops);
    b.matmul(&acts.h, &m.head, &acts.logits, p.vocab, p.d, Out::Write);
    let head_all = std::mem::take(&mut b.ops);
    b.matmul(&acts.h, &m.head, &acts.logits, p.vocab, p.d, Out::LastRow);
    let head_last = std::mem::take(&mut b.ops);
    let params = uniform(&m.ctx.device, &SampleParams { vocab: p.vocab as u32, ..SampleParams::default() });
    let sample = Op {
        pipe: ids.sample,
        bind: bind(m, ids.sample, &[&params, &acts.logits, &mem.tok, &mem.tok_out]),
        disp: Disp::Fixed(1),
    };
    let decode = match (&ids.decode, &mem.fa, &m.fused) {
        (Some(pipes), Some(fa), Ok(fused)) => {
            b.decode(pipes, fused, fa, mem).ok_or_else(|| {
                GpuError::Unsupported("fused decode: a layer's state is not of its kind".into())
            })?;
            std::mem::take(&mut b.ops)
        }
        _ => Vec::new(),
    };
    let sample_fused = mem.fa.as_ref().filter(|_| !decode.is_empty()).map(|fa| Op {
        pipe: ids.sample,
        bind: bind(m, ids.sample, &[&params, &acts.logits, fa, &mem.tok_out]),
        disp: Disp::Fixed(1),
    });
    Ok(Recorded { forward, head_all, head_last, sample, decode, sample_fused })
}

/// Records ops; binding 1 of the forward kernels is the step uniform.
pub(super) struct Builder<'a> {
    pub m: &'a GpuModel,
    ids: &'a PipeIds,
    step: &'a wgpu::Buffer,
    ops: Vec<Op>,
}

impl<'a> Builder<'a> {
    /// An op of `pipe` with `bufs` bound to its layout's bindings in order (binding 1, the step
    /// uniform, is bound here).
    pub fn op(&mut self, pipe: usize, bufs: &[&wgpu::Buffer], disp: Disp) {
        let mut rest = bufs.iter().copied();
        let all: Vec<&wgpu::Buffer> = self.m.pipes[pipe]
            .slots
            .iter()
            .filter_map(|&(binding, _)| if binding == 1 { Some(self.step) } else { rest.next() })
            .collect();
        debug_assert!(rest.next().is_none(), "more buffers than bindings");
        self.ops.push(Op { pipe, bind: bind(self.m, pipe, &all), disp });
    }

    /// Token (+ absolute position) embeddings into `acts.x`; with an embedding norm, into `acts.h`
    /// first, then normed into `acts.x`.
    fn embedding(&mut self, tok: &wgpu::Buffer, acts: &Acts) {
        let (m, d) = (self.m, self.m.cfg.d_model);
        let p = EmbedParams {
            d: d as u32,
            use_pe: u32::from(m.cfg.absolute_position != AbsolutePosition::None),
            vocab: m.cfg.vocab_size as u32,
            emb_scale: m.cfg.embedding_scale(),
        };
        let p = uniform(&m.ctx.device, &p);
        let out = if m.emb_norm.is_some() { &acts.h } else { &acts.x };
        self.op(self.ids.embed, &[&p, tok, &m.emb, &m.pe, out], Disp::Threads(d as u32));
        if let Some(n) = &m.emb_norm {
            self.norm(n, &acts.h, &acts.x, d);
        }
    }

    /// The fused decode (shaders/decode.wgsl, decode_linear.wgsl): per block its attention and its
    /// FFN dispatch, then the logits. `None` if a layer's state is not of its kind.
    fn decode(
        &mut self,
        pipes: &DecodePipes,
        fused: &Fused<wgpu::Buffer>,
        fa: &wgpu::Buffer,
        mem: &SessionMem,
    ) -> Option<()> {
        let (m, dev) = (self.m, &self.m.ctx.device);
        for (i, (l, part)) in m.layers.iter().zip(&fused.layers).enumerate() {
            let tab = if part.params.use_pe != 0 { &m.pe } else { &m.dummy };
            let pipe = *pipes.attn.get(i)?;
            let dp = match (&l.kind, mem.blocks.get(i)?) {
                (Kind::Softmax(s), BlockMem::Kv { k, v }) => {
                    let params = DecodeParams { split_keys: m.split_keys, ..part.params };
                    let (ap, dp) = (uniform(dev, &s.params), uniform(dev, &params));
                    let tab = s.rope.as_ref().unwrap_or(tab);
                    let (heads, splits, keys, block) =
                        (s.params.h, params.splits, m.split_keys, s.params.block);
                    self.op(
                        pipe,
                        &[&ap, &dp, fa, &part.vecs, &l.wqkv.w, &l.wo.w, tab, k, v, &m.emb],
                        Disp::SplitK { heads, splits, keys, block },
                    );
                    dp
                }
                (Kind::Linear(ln), BlockMem::Linear(st)) => {
                    let [s_off, z_off, k_off] = [st.s_off, st.z_off, st.k_off].map(|o| o as u32);
                    let dp = uniform(dev, &DecodeParams { s_off, z_off, k_off, ..part.params });
                    let fp = uniform(dev, &ln.params);
                    let extra = match (&ln.gate, &ln.post) {
                        (Gate::FullRank { wgr }, _) => wgr,
                        (_, Post::RmsNormGate { out_gate, .. }) => out_gate,
                        _ => &m.dummy,
                    };
                    let bufs = [&fp, &dp, fa, &part.vecs, &l.wqkv.w, &l.wo.w, tab, extra, &m.emb];
                    self.op(pipe, &bufs, Disp::Groups(ln.params.h));
                    dp
                }
                _ => return None,
            };
            let gate = l.ffn_gate.as_ref().map_or(&m.dummy, |g| &g.w);
            let bufs = [&dp, fa, &part.vecs, &l.ffn_up.w, gate, &l.ffn_down.w];
            self.op(pipes.ffn, &bufs, Disp::Groups(part.params.slices));
        }
        let dp = uniform(dev, &fused.head.params);
        let bufs = [&dp, fa, &fused.head.vecs, &m.head, &mem.acts.logits];
        self.op(pipes.head, &bufs, Disp::Groups(fused.head_groups()));
        Some(())
    }

    /// One transformer block; `None` if its pipelines or state are of another kind than the layer.
    fn block(
        &mut self,
        l: &Layer<wgpu::Buffer>,
        pipes: &BlockPipes,
        state: &BlockMem,
        mem: &'a SessionMem,
        capture: Option<&mut Capture>,
    ) -> Option<()> {
        let (acts, p) = (&mem.acts, &mem.plan);
        let (d, a) = (p.d, p.a);
        self.norm(&l.attn_norm, &acts.x, &acts.h, d);
        self.project(&acts.h, &l.wqkv, &acts.qkv, [3 * a, d], Out::Write);
        let attn_out = match (&l.kind, pipes, state) {
            (Kind::Softmax(s), BlockPipes::Softmax(sp), BlockMem::Kv { k, v }) => {
                self.softmax_attention(s, sp, [k, v], acts, capture)
            }
            (Kind::Linear(ln), BlockPipes::Linear(lp), BlockMem::Linear(st)) => {
                self.linear_attention(ln, lp, st, mem, capture)?
            }
            _ => return None,
        };
        // Parallel residual (GPT-NeoX): the FFN's norm reads the block input, so the attention output
        // (which the FFN ops do not touch) is added after the FFN's, as in the core.
        if self.m.cfg.parallel_residual {
            self.ffn(l, acts, d, p.hid);
            self.project(attn_out, &l.wo, &acts.x, [d, a], Out::Accumulate);
        } else {
            self.project(attn_out, &l.wo, &acts.x, [d, a], Out::Accumulate);
            self.ffn(l, acts, d, p.hid);
        }
        Some(())
    }

    /// Rotary + KV-cache store, attention over the cache (tiled and per-row kernels, picked per
    /// step; a contextual (CoPE) layer has no tiled kernel and runs per row), T1's norm. Returns
    /// the attention output.
    fn softmax_attention(
        &mut self,
        s: &SoftmaxLayer<wgpu::Buffer>,
        pipes: &SoftmaxPipes,
        [kc, vc]: [&wgpu::Buffer; 2],
        acts: &'a Acts,
        capture: Option<&mut Capture>,
    ) -> &'a wgpu::Buffer {
        let dev = &self.m.ctx.device;
        let (h, dh) = (s.params.h, s.params.dh);
        let rp = uniform(dev, &RotaryParams { h, dh, a: s.params.a, rope: u32::from(s.rope.is_some()) });
        let rope = s.rope.as_ref().unwrap_or(&self.m.dummy);
        self.op(pipes.rotary, &[&rp, &acts.qkv, rope, kc, vc], Disp::Threads(h));
        if let Some(c) = capture {
            c.softmax(self, &acts.qkv, kc);
        }
        let ap = uniform(dev, &s.params);
        let bufs = [&ap, &acts.qkv, kc, vc, &s.aux, &acts.ao];
        let max_end = match pipes.tiled {
            Some(_) => attn_tiled_max_end(
                dh as usize,
                s.bias,
                s.params.fire_hidden as usize,
                s.params.block as usize,
            ),
            None => 0,
        };
        if let Some(tiled) = pipes.tiled {
            self.op(tiled, &bufs, Disp::Attn { heads: h, max_end, tiled: true });
        }
        self.op(pipes.attn, &bufs, Disp::Attn { heads: h, max_end, tiled: false });
        if s.relu_norm {
            let a = s.params.a as usize;
            self.simple_norm(&acts.ao, &acts.an, a, a, SIMPLE_RMS_EPS);
            return &acts.an;
        }
        &acts.ao
    }

    /// Gate projections, feature map, gated scan and output post-op. Returns the attention output
    /// (`None`: a ReGLA layer without its running-max pipeline).
    fn linear_attention(
        &mut self,
        ln: &LinearLayer<wgpu::Buffer>,
        pipes: &LinearPipes,
        st: &LinearState,
        mem: &'a SessionMem,
        capture: Option<&mut Capture>,
    ) -> Option<&'a wgpu::Buffer> {
        let acts = &mem.acts;
        let lgv_off = mem.plan.lgv_off as u32;
        let fp = uniform(&self.m.ctx.device, &FeatParams { k_off: st.k_off as u32, lgv_off, ..ln.params });
        self.linear_gates(ln, pipes, &fp, &mem.lin, mem)?;
        let bufs = [&fp, &acts.qkv, &acts.gpre, &ln.aux, &acts.mrow, &acts.fq, &acts.fk, &acts.lg];
        self.op(pipes.feat, &bufs, Disp::Threads(ln.params.h));
        if let Some(c) = capture {
            let gpre = (ln.feat == FeatKind::Regla).then_some(&acts.gpre);
            let lgv = (ln.feat == FeatKind::FastDecay).then_some(mem.plan.lgv_off);
            c.linear(self, [&acts.fq, &acts.fk, &acts.lg], ln.dk, gpre, lgv);
        }
        self.linear_scan(ln, pipes, st, mem);
        Some(self.linear_post(&ln.post, mem))
    }

    /// GLA's low-rank gate projection, ReGLA's (and Fast Decay's) gate projections, ReGLA's running
    /// key max.
    fn linear_gates(
        &mut self,
        ln: &LinearLayer<wgpu::Buffer>,
        pipes: &LinearPipes,
        fp: &wgpu::Buffer,
        kmax: &wgpu::Buffer,
        mem: &SessionMem,
    ) -> Option<()> {
        let (acts, p) = (&mem.acts, &mem.plan);
        match &ln.gate {
            Gate::None => {}
            Gate::Gla { down, up, rank } => {
                self.matmul(&acts.h, down, &acts.glow, *rank, p.d, Out::Write);
                self.matmul(&acts.glow, up, &acts.gpre, p.a, *rank, Out::Write);
            }
            Gate::FullRank { wgr } => {
                self.matmul(&acts.h, wgr, &acts.gpre, 2 * p.a, p.d, Out::Write);
                if ln.feat == FeatKind::Regla {
                    let bufs = [fp, &acts.qkv, &acts.mrow, kmax];
                    self.op(pipes.regla_max?, &bufs, Disp::Fixed(ln.params.h));
                }
            }
        }
        Some(())
    }

    /// The sequential scan (short steps) and the three chunked passes (long steps); `encode` runs
    /// one or the other.
    fn linear_scan(
        &mut self,
        ln: &LinearLayer<wgpu::Buffer>,
        pipes: &LinearPipes,
        st: &LinearState,
        mem: &SessionMem,
    ) {
        let (acts, p, scratch) = (&mem.acts, &mem.plan, &mem.scan_scratch);
        let sp = ScanParams {
            h: p.h as u32,
            dh: p.dh as u32,
            dk: ln.dk as u32,
            a: p.a as u32,
            den_eps: ln.den_eps,
            off_den: p.off_den as u32,
            off_s: p.off_s as u32,
            off_z: p.off_z as u32,
            s_off: st.s_off as u32,
            z_off: st.z_off as u32,
            value_gate: u32::from(ln.feat == FeatKind::FastDecay),
            lgv_off: p.lgv_off as u32,
            off_cv: p.off_cv as u32,
            ..ScanParams::default()
        };
        let sp = uniform(&self.m.ctx.device, &sp);
        let per = (p.h * p.dh) as u32;
        let seq = [&sp, &acts.fq, &acts.fk, &acts.lg, &acts.qkv, &mem.lin, &acts.ao];
        self.op(pipes.scan, &seq, Disp::Scan { pass: 0, per });
        let [local, carry, out] = pipes.chunk;
        let local_bufs = [&sp, &acts.fq, &acts.fk, &acts.lg, &acts.qkv, &acts.ao, scratch];
        self.op(local, &local_bufs, Disp::Scan { pass: 1, per });
        self.op(carry, &[&sp, &mem.lin, scratch], Disp::Scan { pass: 2, per });
        self.op(out, &[&sp, &acts.fq, &acts.ao, scratch], Disp::Scan { pass: 3, per });
    }

    /// The output post-op; returns the buffer holding the attention output.
    fn linear_post(&mut self, post: &Post<wgpu::Buffer>, mem: &'a SessionMem) -> &'a wgpu::Buffer {
        let (acts, p) = (&mem.acts, &mem.plan);
        match post {
            Post::None => return &acts.ao,
            Post::Simple => self.simple_norm(&acts.ao, &acts.an, p.a, p.a, SIMPLE_RMS_EPS),
            Post::RmsNorm { gain, group, eps } => self.gain_norm(&acts.ao, &acts.an, gain, *group, p.a, *eps),
            Post::RmsNormGate { gain, group, eps, out_gate } => {
                self.gain_norm(&acts.ao, &acts.an, gain, *group, p.a, *eps);
                self.matmul(&acts.h, out_gate, &acts.og, p.a, p.d, Out::Write);
                self.ew(EwOp::SiluGate, p.a, &acts.og, &acts.an);
            }
        }
        &acts.an
    }

    /// Pre-norm FFN (GELU, tanh or erf form, or SwiGLU with a gate) added to the residual.
    fn ffn(&mut self, l: &Layer<wgpu::Buffer>, acts: &Acts, d: usize, hid: usize) {
        self.norm(&l.ffn_norm, &acts.x, &acts.h, d);
        self.project(&acts.h, &l.ffn_up, &acts.ffu, [hid, d], Out::Write);
        match &l.ffn_gate {
            Some(g) => {
                self.project(&acts.h, g, &acts.ffg, [hid, d], Out::Write);
                self.ew(EwOp::SiluGate, hid, &acts.ffg, &acts.ffu);
            }
            None if self.m.cfg.ffn.kind == FfnKind::GeluExact => {
                self.ew(EwOp::GeluExact, hid, &acts.ffg, &acts.ffu)
            }
            None => self.ew(EwOp::Gelu, hid, &acts.ffg, &acts.ffu),
        }
        self.project(&acts.ffu, &l.ffn_down, &acts.x, [d, hid], Out::Accumulate);
    }

    /// `y (+)= x Wᵀ (+ b)` for a projection `p` of shape `[outd, inp]`.
    fn project(
        &mut self,
        x: &wgpu::Buffer,
        p: &Proj<wgpu::Buffer>,
        y: &wgpu::Buffer,
        shape: [usize; 2],
        out: Out,
    ) {
        self.linear(x, &p.w, p.b.as_ref(), y, shape, out);
    }

    /// `y (+)= x Wᵀ` with `W` `[outd, inp]`, rows of x `inp` wide and of y `outd` wide.
    fn matmul(
        &mut self,
        x: &wgpu::Buffer,
        w: &wgpu::Buffer,
        y: &wgpu::Buffer,
        outd: usize,
        inp: usize,
        out: Out,
    ) {
        self.linear(x, w, None, y, [outd, inp], out);
    }

    /// `y (+)= x Wᵀ (+ b)` with `W` `[outd, inp]` and `b` `[outd]`, added by the matmul kernel.
    fn linear(
        &mut self,
        x: &wgpu::Buffer,
        w: &wgpu::Buffer,
        b: Option<&wgpu::Buffer>,
        y: &wgpu::Buffer,
        [outd, inp]: [usize; 2],
        out: Out,
    ) {
        let p = MatmulParams {
            outd: outd as u32,
            inp: inp as u32,
            x_stride: inp as u32,
            x_off: 0,
            y_stride: outd as u32,
            y_off: 0,
            accumulate: u32::from(out == Out::Accumulate),
            last_only: u32::from(out == Out::LastRow),
            bias: u32::from(b.is_some()),
            ..MatmulParams::default()
        };
        let p = uniform(&self.m.ctx.device, &p);
        let last = out == Out::LastRow;
        let b = b.unwrap_or(&self.m.dummy);
        self.op(self.ids.matmul, &[&p, x, w, y, b], Disp::Mat { outd: outd as u32, last });
    }

    /// A residual norm over rows of `d`.
    fn norm(&mut self, n: &Norm<wgpu::Buffer>, x: &wgpu::Buffer, y: &wgpu::Buffer, d: usize) {
        let p = self.norm_params(n.op, d, n.eps, d);
        let b = n.b.as_ref().unwrap_or(&self.m.dummy);
        self.op(self.ids.norm, &[&p, x, &n.w, b, y], Disp::Norm(1));
    }

    /// SimpleRMSNorm over groups of `gsz` in rows of `width`.
    fn simple_norm(&mut self, x: &wgpu::Buffer, y: &wgpu::Buffer, gsz: usize, width: usize, eps: f32) {
        let p = self.norm_params(NormOp::SimpleRms, gsz, eps, width);
        let dummy = &self.m.dummy;
        self.op(self.ids.norm, &[&p, x, dummy, dummy, y], Disp::Norm((width / gsz) as u32));
    }

    /// RMSNorm with gain and `eps` over groups of `gsz` (a head, or all heads) in rows of `width`.
    fn gain_norm(
        &mut self,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        gain: &wgpu::Buffer,
        gsz: usize,
        width: usize,
        eps: f32,
    ) {
        let p = self.norm_params(NormOp::Rms, gsz, eps, width);
        let dummy = &self.m.dummy;
        self.op(self.ids.norm, &[&p, x, gain, dummy, y], Disp::Norm((width / gsz) as u32));
    }

    fn norm_params(&self, op: NormOp, gsz: usize, eps: f32, width: usize) -> wgpu::Buffer {
        let p = NormParams {
            gsz: gsz as u32,
            kind: op.code(),
            eps,
            x_stride: width as u32,
            y_stride: width as u32,
            ..NormParams::default()
        };
        uniform(&self.m.ctx.device, &p)
    }

    fn ew(&mut self, op: EwOp, width: usize, a: &wgpu::Buffer, y: &wgpu::Buffer) {
        let p = EwParams { width: width as u32, op: op.code(), ..EwParams::default() };
        let p = uniform(&self.m.ctx.device, &p);
        self.op(self.ids.ew, &[&p, a, y], Disp::Threads(width as u32));
    }
}

/// Largest step end (first position + rows) for which the tiled attention kernel stays within
/// ATTN_BUDGET loop iterations per invocation (mirrors the loops of `prefill` in attention.wgsl);
/// longer steps use the per-row kernel.
fn attn_tiled_max_end(dh: usize, bias: BiasKind, fire_hidden: usize, block: usize) -> u32 {
    let dh4 = dh.div_ceil(4).max(1);
    let tk = (ATTN_TILE_VEC4 / dh4).max(1);
    let per_key = 2 * dh4 + 2 + if bias == BiasKind::Fire { fire_hidden + 1 } else { 0 };
    let per_tile = (tk * dh4).div_ceil(ATTN_TQ * ATTN_KS) * 9 + tk.div_ceil(ATTN_KS) * per_key + 2;
    let fixed = dh4 * 5 + (ATTN_KS - 1) * (2 * dh4 + 2) + dh + 16;
    let tiles = ATTN_BUDGET.saturating_sub(fixed) / per_tile;
    if block > 0 && (block + ATTN_TQ).div_ceil(tk) < tiles {
        // A Diag block bounds the key range of every query tile.
        return u32::MAX;
    }
    u32::try_from(tiles * tk).unwrap_or(u32::MAX)
}
