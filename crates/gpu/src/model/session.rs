//! A decode session: its memory plan (activations for a chunk of rows, KV caches, linear states,
//! scan scratch), the forward pass recorded once (model/record.rs), and the submissions of prefill
//! and decode steps.

use super::introspect::Capture;
use super::layers::{Gate, Kind};
use super::record::{self, Disp, Op};
use super::{sampling, zeros, GpuModel};
use crate::error::{GpuError, Result};
use crate::params::{FeatKind, Step, ATTN_TQ, MATMUL_TILE, SCAN_C};
use attnlab_core::Error as CoreError;

/// Most greedy tokens [`GpuSession::greedy_tokens`] generates in one submission.
pub const GREEDY_BATCH: usize = 64;

/// Loop iterations one scan invocation may spend per submission (rows × dk).
const SCAN_BUDGET: usize = 32768;
/// Steps of at least this many rows use the chunked scan; shorter ones (decode) the sequential one.
pub(super) const SCAN_CHUNKED_MIN: usize = 2 * SCAN_C;
// The sequential scan only walks fewer than SCAN_CHUNKED_MIN rows, the chunked passes SCAN_C rows.
const _: () = assert!(SCAN_CHUNKED_MIN * crate::params::MAX_DK <= SCAN_BUDGET);

/// Sizes of a session's buffers, checked against the adapter before any exists.
pub(super) struct MemPlan {
    /// Activation rows (the prefill chunk).
    pub rows: usize,
    pub d: usize,
    pub h: usize,
    pub dh: usize,
    /// Attention width h · dh.
    pub a: usize,
    /// FFN hidden width.
    pub hid: usize,
    pub vocab: usize,
    pub max_context: usize,
    /// Widest linear feature row per head (dh without linear layers).
    pub dkmax: usize,
    /// Largest GLA gate rank (1 without).
    pub rank: usize,
    /// Chunked-scan scratch: cum log decay `[rows, H, dk]` at 0, local denominators `[rows, H]` at
    /// `off_den`, chunk states S `[chunks, H, dk, dh]` at `off_s` and z `[chunks, H, dh, dk]` at
    /// `off_z`, and with value-axis gates their chunk-local cumulative sums `[rows, H, dh]` at
    /// `off_cv`.
    pub off_den: usize,
    pub off_s: usize,
    pub off_z: usize,
    pub off_cv: usize,
    pub scratch_len: usize,
    /// The log-gate buffer: key-axis `[rows, H, dkmax]`, then (Fast Decay) value-axis `[rows, H, dh]`
    /// from `lgv_off`; `lg_len` words in all.
    pub lgv_off: usize,
    pub lg_len: usize,
}

impl MemPlan {
    fn new(model: &GpuModel, chunk: usize) -> Result<MemPlan> {
        let cfg = &model.cfg;
        let (h, dh, ctxlen) = (cfg.n_heads, cfg.head_dim, cfg.max_context);
        let linear = || {
            model.layers.iter().filter_map(|l| if let Kind::Linear(ln) = &l.kind { Some(ln) } else { None })
        };
        let dkmax =
            model.layers.iter().map(|l| if let Kind::Linear(ln) = &l.kind { ln.dk } else { dh }).max();
        let dkmax = dkmax.unwrap_or(dh);
        let rank =
            linear().map(|ln| if let Gate::Gla { rank, .. } = ln.gate { rank } else { 1 }).max().unwrap_or(1);
        // No scan invocation walks more than SCAN_BUDGET values (the ~65k loop iterations some
        // drivers, Mesa llvmpipe, allow one invocation): the sequential scan only runs steps of fewer
        // than SCAN_CHUNKED_MIN rows, the chunked passes SCAN_C rows per invocation.
        let rows = chunk.min(ctxlen).max(1);
        let n_chunks = rows.div_ceil(SCAN_C);
        let off_den = rows * h * dkmax;
        let off_s = off_den + rows * h;
        let off_z = off_s + n_chunks * h * dkmax * dh;
        let any_linear = linear().next().is_some();
        let value_gates = linear().any(|ln| ln.feat == FeatKind::FastDecay);
        let off_cv = off_z + n_chunks * h * dh * dkmax;
        // Value-axis log-gates and their chunk sums: `[rows, H, dh]` each, only with value gates.
        let value_len = if value_gates { rows * h * dh } else { 0 };
        let scratch_len = if any_linear { off_cv + value_len } else { 4 };
        let lgv_off = rows * h * dkmax;
        let p = MemPlan {
            rows,
            d: cfg.d_model,
            h,
            dh,
            a: h * dh,
            hid: cfg.ffn.hidden,
            vocab: cfg.vocab_size,
            max_context: ctxlen,
            dkmax,
            rank,
            off_den,
            off_s,
            off_z,
            off_cv,
            scratch_len,
            lgv_off,
            lg_len: lgv_off + value_len,
        };
        let sizes = [
            ("activations qkv", rows * 3 * p.a),
            ("activations ffn", rows * p.hid),
            ("linear features", rows * h * dkmax),
            ("linear log-gates", p.lg_len),
            ("logits", rows * p.vocab),
            ("KV cache of one layer", ctxlen * p.a),
            ("linear state of one layer", h * dkmax * dh),
            ("linear states of every layer", linear().map(|ln| 2 * h * ln.dk * dh + 2 * h).sum()),
            ("chunked scan scratch", scratch_len),
        ];
        for (what, n) in sizes {
            model.ctx.check_size(what, 4 * n as u64)?;
        }
        Ok(p)
    }
}

/// Activations of one step, shared by all layers.
pub(super) struct Acts {
    pub x: wgpu::Buffer,
    pub h: wgpu::Buffer,
    pub qkv: wgpu::Buffer,
    pub ao: wgpu::Buffer,
    pub an: wgpu::Buffer,
    pub og: wgpu::Buffer,
    pub ffu: wgpu::Buffer,
    pub ffg: wgpu::Buffer,
    pub gpre: wgpu::Buffer,
    pub glow: wgpu::Buffer,
    pub fq: wgpu::Buffer,
    pub fk: wgpu::Buffer,
    pub lg: wgpu::Buffer,
    pub mrow: wgpu::Buffer,
    pub logits: wgpu::Buffer,
}

/// The decode state of one layer.
pub(super) enum BlockMem {
    /// KV cache `[max_context, a]` each.
    Kv {
        k: wgpu::Buffer,
        v: wgpu::Buffer,
    },
    Linear(LinearState),
}

/// Where a linear layer's recurrent state lives in the session's state buffer (`SessionMem::lin`),
/// in words.
pub(super) struct LinearState {
    /// `S [H, dk, dh]`.
    pub s_off: usize,
    /// Denominator state `[H, dh, dk]` (one copy per value column).
    pub z_off: usize,
    /// ReGLA's running key max and seen flag `[H, 2]`.
    pub k_off: usize,
}

/// Every buffer of a session.
pub(super) struct SessionMem {
    pub plan: MemPlan,
    pub acts: Acts,
    pub scan_scratch: wgpu::Buffer,
    /// The [`Step`] uniform.
    pub step: wgpu::Buffer,
    pub tok: wgpu::Buffer,
    pub tok_out: wgpu::Buffer,
    pub staging: wgpu::Buffer,
    pub staging_tok: wgpu::Buffer,
    /// A GPU-resident greedy run: the step uniform of each token, the tokens picked, their readback.
    pub batch_steps: wgpu::Buffer,
    pub batch_toks: wgpu::Buffer,
    pub staging_batch: wgpu::Buffer,
    /// One per layer.
    pub blocks: Vec<BlockMem>,
    /// The fused decode's activations (word 0: the step's token id), followed by the linear states.
    pub fa: Option<wgpu::Buffer>,
    /// The recurrent states of every linear layer (`fa` itself in a fused session, so that its
    /// kernels reach them through the same binding).
    pub lin: wgpu::Buffer,
    /// Bytes of KV caches and recurrent states.
    pub state_bytes: u64,
}

impl SessionMem {
    /// Allocate `plan` (call inside the context's error scopes).
    fn alloc(dev: &wgpu::Device, model: &GpuModel, plan: MemPlan, fa_len: Option<usize>) -> SessionMem {
        let z = |label: &str, n: usize| zeros(dev, label, n, wgpu::BufferUsages::empty());
        let (rows, d, a, hid) = (plan.rows, plan.d, plan.a, plan.hid);
        let hk = plan.h * plan.dkmax;
        let acts = Acts {
            x: z("x", rows * d),
            h: z("h", rows * d),
            qkv: z("qkv", rows * 3 * a),
            ao: z("ao", rows * a),
            an: z("an", rows * a),
            og: z("og", rows * a),
            ffu: z("ffu", rows * hid),
            ffg: z("ffg", rows * hid),
            gpre: z("gpre", rows * 2 * a),
            glow: z("glow", rows * plan.rank),
            fq: z("fq", rows * hk),
            fk: z("fk", rows * hk),
            lg: z("lg", plan.lg_len),
            mrow: z("mrow", rows * plan.h * 2),
            logits: z("logits", rows * plan.vocab),
        };
        let host = |label: &str, size: usize, usage: wgpu::BufferUsages| {
            dev.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: size as u64,
                usage,
                mapped_at_creation: false,
            })
        };
        let read = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
        let base = fa_len.unwrap_or(0);
        let (blocks, state_bytes, end) = Self::states(model, &plan, base);
        let fa = fa_len.map(|_| z("decode activations and linear states", end));
        let lin = fa.clone().unwrap_or_else(|| z("linear states", end));
        SessionMem {
            acts,
            scan_scratch: z("chunked scan scratch", plan.scratch_len),
            step: host(
                "step",
                std::mem::size_of::<Step>(),
                wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            ),
            tok: z("tokens", rows),
            tok_out: z("token out", 4),
            staging: host("staging", 4 * rows * plan.vocab, read),
            staging_tok: host("staging token", 16, read),
            batch_steps: host(
                "greedy run steps",
                GREEDY_BATCH * std::mem::size_of::<Step>(),
                wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            ),
            batch_toks: z("greedy run tokens", GREEDY_BATCH),
            staging_batch: host("staging greedy run", 4 * GREEDY_BATCH, read),
            blocks,
            fa,
            lin,
            state_bytes,
            plan,
        }
    }

    /// KV caches and the places of the linear states of every layer (from word `base` of the state
    /// buffer), their bytes and the state buffer's length in words.
    fn states(model: &GpuModel, p: &MemPlan, base: usize) -> (Vec<BlockMem>, u64, usize) {
        let dev = &model.ctx.device;
        let (mut bytes, mut end) = (0u64, base);
        let blocks = model
            .layers
            .iter()
            .map(|l| match &l.kind {
                Kind::Softmax(_) => {
                    bytes += 8 * (p.max_context * p.a) as u64;
                    let z = |label: &str| zeros(dev, label, p.max_context * p.a, wgpu::BufferUsages::empty());
                    BlockMem::Kv { k: z("k cache"), v: z("v cache") }
                }
                Kind::Linear(ln) => {
                    let (h, dh, dk) = (p.h, p.dh, ln.dk);
                    bytes += 4 * (2 * h * dk * dh + 2 * h) as u64;
                    let st =
                        LinearState { s_off: end, z_off: end + h * dk * dh, k_off: end + 2 * h * dk * dh };
                    end = st.k_off + 2 * h;
                    BlockMem::Linear(st)
                }
            })
            .collect();
        (blocks, bytes, end)
    }
}

/// Decode state of one [`GpuModel`]: KV caches / recurrent states and activations in GPU buffers.
pub struct GpuSession<'m> {
    pub(super) model: &'m GpuModel,
    pub(super) pos: usize,
    rows_cap: usize,
    pub(super) step: wgpu::Buffer,
    pub(super) tok: wgpu::Buffer,
    tok_out: wgpu::Buffer,
    pub(super) logits: wgpu::Buffer,
    staging: wgpu::Buffer,
    staging_tok: wgpu::Buffer,
    pub(super) forward: Vec<Op>,
    head_all: Vec<Op>,
    pub(super) head_last: Vec<Op>,
    sample: Op,
    /// The fused decode (empty: one-row steps run `forward` + `head_last`).
    decode: Vec<Op>,
    /// Greedy sampling feeding the fused decode's next step.
    sample_fused: Option<Op>,
    batch_steps: wgpu::Buffer,
    batch_toks: wgpu::Buffer,
    staging_batch: wgpu::Buffer,
    /// Its activations; word 0 is the step's token id.
    fa: Option<wgpu::Buffer>,
    state_bytes: u64,
    /// Trace buffers and capture ops of a [`GpuModel::trace`] session.
    pub(super) capture: Option<Capture>,
    /// Temperature / top-k / top-p sampling op.
    pub(super) top: sampling::TopSampler,
}

impl std::fmt::Debug for GpuSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuSession").field("pos", &self.pos).field("state_bytes", &self.state_bytes).finish()
    }
}

impl<'m> GpuSession<'m> {
    /// The model this session runs.
    pub fn model(&self) -> &'m GpuModel {
        self.model
    }

    /// A session of `model` whose prefill submits `chunk` rows at a time; `trace`: capacity in
    /// tokens of the introspection capture (see [`GpuModel::trace`]).
    pub(super) async fn new(
        model: &'m mut GpuModel,
        chunk: usize,
        trace: Option<usize>,
    ) -> Result<GpuSession<'m>> {
        let ids = model.session_pipes(trace.is_some()).await?;
        let mut capture = ids.capture.zip(trace).map(|(pipe, cap)| Capture::new(pipe, cap));
        let model: &'m GpuModel = model;
        let plan = MemPlan::new(model, chunk)?;
        let ctx = &model.ctx;
        let (mem, rec) = ctx
            .scoped(|| -> Result<_> {
                let fa_len = ids.decode.as_ref().and(model.fused.as_ref().ok()).map(|f| f.fa_len);
                let mem = SessionMem::alloc(&ctx.device, model, plan, fa_len);
                let rec = record::record(model, &ids, &mem, capture.as_mut())?;
                Ok((mem, rec))
            })
            .await??;
        let logits = mem.acts.logits;
        let top = ctx
            .scoped(|| sampling::TopSampler::new(model, ids.sample_top, &logits, &mem.tok, &mem.tok_out))
            .await??;
        Ok(GpuSession {
            model,
            pos: 0,
            rows_cap: mem.plan.rows,
            step: mem.step,
            tok: mem.tok,
            tok_out: mem.tok_out,
            logits,
            staging: mem.staging,
            staging_tok: mem.staging_tok,
            forward: rec.forward,
            head_all: rec.head_all,
            head_last: rec.head_last,
            sample: rec.sample,
            decode: rec.decode,
            sample_fused: rec.sample_fused,
            batch_steps: mem.batch_steps,
            batch_toks: mem.batch_toks,
            staging_batch: mem.staging_batch,
            fa: mem.fa,
            state_bytes: mem.state_bytes,
            capture,
            top,
        })
    }

    /// Tokens processed so far.
    pub fn len(&self) -> usize {
        self.pos
    }

    /// No token processed yet.
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    /// Bytes of KV caches and recurrent states held on the GPU.
    pub fn state_bytes(&self) -> u64 {
        self.state_bytes
    }

    pub(super) fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        let cfg = &self.model.cfg;
        if tokens.is_empty() {
            return Err(CoreError::EmptyPrompt.into());
        }
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= cfg.vocab_size) {
            return Err(CoreError::TokenOutOfRange { id, vocab: cfg.vocab_size }.into());
        }
        if self.pos + tokens.len() > cfg.max_context {
            return Err(CoreError::ContextTooLong {
                requested: self.pos + tokens.len(),
                max: cfg.max_context,
            }
            .into());
        }
        Ok(())
    }

    /// Write the step uniform and the token ids of a step of `tokens` at the current position (a
    /// one-token step's id also where the fused decode reads it).
    pub(super) fn write_step(&self, tokens: &[u32]) {
        let q = &self.model.ctx.queue;
        let step = Step { rows: tokens.len() as u32, pos0: self.pos as u32, ..Step::default() };
        q.write_buffer(&self.step, 0, bytemuck::bytes_of(&step));
        q.write_buffer(&self.tok, 0, bytemuck::cast_slice(tokens));
        if let (Some(fa), [_]) = (&self.fa, tokens) {
            q.write_buffer(fa, 0, bytemuck::cast_slice(tokens));
        }
    }

    /// The ops of a one-row step up to its logits: the fused decode, or the forward pass and the
    /// last row's logits.
    pub(super) fn one_row(&self) -> [&[Op]; 2] {
        if self.decode.is_empty() {
            [&self.forward, &self.head_last]
        } else {
            [&self.decode, &[]]
        }
    }

    /// Record `ops` for a step of `rows` rows into one compute pass; each op's dispatch shape is
    /// resolved from the row count (and ops of the other attention / scan path are skipped).
    pub(super) fn encode(&self, enc: &mut wgpu::CommandEncoder, ops: &[&[Op]], rows: u32) {
        self.encode_at(enc, ops, rows, self.pos);
    }

    /// [`Self::encode`] for a step whose first row is at position `pos`.
    fn encode_at(&self, enc: &mut wgpu::CommandEncoder, ops: &[&[Op]], rows: u32, pos: usize) {
        let maxd = self.model.ctx.caps().max_workgroups_per_dim.max(1);
        let mut pass =
            enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
        let end = (pos as u64).saturating_add(u64::from(rows));
        let chunked = rows as usize >= SCAN_CHUNKED_MIN;
        let mut dispatches = 0;
        for op in ops.iter().flat_map(|o| o.iter()) {
            let (x, y) = match op.disp {
                Disp::Threads(per) => split((rows * per).div_ceil(64), maxd),
                Disp::Fixed(n) => split(n.div_ceil(64), maxd),
                Disp::Mat { outd, last } => {
                    let tile = MATMUL_TILE as u32;
                    (outd.div_ceil(tile), if last { 1 } else { rows.div_ceil(tile) })
                }
                Disp::Norm(groups) => (groups, rows),
                Disp::Groups(n) => split(n, maxd),
                Disp::SplitK { heads, splits, keys, block } => {
                    (super::fused::splits_used(pos as u32, block, splits, keys), heads)
                }
                Disp::Attn { heads, max_end, tiled } => {
                    let use_tiled = rows > 1 && end <= u64::from(max_end);
                    match (tiled, use_tiled) {
                        (true, true) => (heads, rows.div_ceil(ATTN_TQ as u32)),
                        (false, false) => (heads, rows),
                        _ => continue,
                    }
                }
                Disp::Scan { pass: kind, per } => match (kind, chunked) {
                    (0, false) | (2, true) => split(per.div_ceil(64), maxd),
                    (1, true) => split((rows.div_ceil(SCAN_C as u32) * per).div_ceil(64), maxd),
                    (3, true) => split((rows * per).div_ceil(64), maxd),
                    _ => continue,
                },
            };
            let pipe = &self.model.pipes[op.pipe];
            pass.set_pipeline(&pipe.pipeline);
            pass.set_bind_group(0, &op.bind, &[]);
            pass.dispatch_workgroups(x.max(1), y.max(1), 1);
            dispatches += 1;
        }
        self.model.ctx.count_dispatches(dispatches);
    }

    /// Run `tokens` through the model; returns the logits of every row (`all`) or of the last one.
    async fn run(&mut self, tokens: &[u32], all: bool) -> Result<Vec<f32>> {
        self.check_tokens(tokens)?;
        let v = self.model.cfg.vocab_size;
        let ctx = self.model.ctx.clone();
        let mut out = Vec::with_capacity(if all { tokens.len() * v } else { v });
        let n_chunks = tokens.len().div_ceil(self.rows_cap);
        for (ci, chunk) in tokens.chunks(self.rows_cap).enumerate() {
            let rows = chunk.len();
            let last = ci + 1 == n_chunks;
            self.write_step(chunk);
            let mut enc = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            let read = if all {
                self.encode(&mut enc, &[&self.forward, &self.head_all], rows as u32);
                rows * v
            } else if last && rows == 1 {
                self.encode(&mut enc, &self.one_row(), 1);
                v
            } else if last {
                self.encode(&mut enc, &[&self.forward, &self.head_last], rows as u32);
                v
            } else {
                self.encode(&mut enc, &[&self.forward], rows as u32);
                0
            };
            if read > 0 {
                enc.copy_buffer_to_buffer(&self.logits, 0, &self.staging, 0, (4 * read) as u64);
            }
            let cmd = enc.finish();
            ctx.submit(cmd).await?;
            self.pos += rows;
            if read > 0 {
                out.extend(ctx.read_words(&self.staging, read).await?.into_iter().map(f32::from_bits));
            }
        }
        Ok(out)
    }

    /// Copy the picked token out, submit `enc`, advance `advance` positions and read the token back
    /// (4 bytes).
    pub(super) async fn submit_token(
        &mut self,
        mut enc: wgpu::CommandEncoder,
        advance: usize,
    ) -> Result<u32> {
        enc.copy_buffer_to_buffer(&self.tok_out, 0, &self.staging_tok, 0, 4);
        let ctx = self.model.ctx.clone();
        ctx.submit(enc.finish()).await?;
        self.pos += advance;
        let w = ctx.read_words(&self.staging_tok, 1).await?;
        w.first().copied().ok_or_else(|| GpuError::Readback("empty token readback".into()))
    }

    /// Prefill `tokens`; returns the logits of the last token (`[vocab]`).
    pub async fn prefill(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.run(tokens, false).await
    }

    /// Prefill `tokens`; returns the logits of every token (`[n, vocab]`).
    pub async fn prefill_all(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.run(tokens, true).await
    }

    /// One decode step (one submission); returns the logits of `token`'s position.
    pub async fn step(&mut self, token: u32) -> Result<Vec<f32>> {
        self.run(&[token], false).await
    }

    /// One decode step that also picks the next token by argmax on the GPU, in the same submission;
    /// only that token id is read back.
    pub async fn step_greedy(&mut self, token: u32) -> Result<u32> {
        self.check_tokens(&[token])?;
        self.write_step(&[token]);
        let dev = &self.model.ctx.device;
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let [ops, head] = self.one_row();
        self.encode(&mut enc, &[ops, head, std::slice::from_ref(&self.sample)], 1);
        self.submit_token(enc, 1).await
    }
}

impl GpuSession<'_> {
    /// Feed `token`, then generate `n` tokens greedily (1..=[`GREEDY_BATCH`]) without the host: each
    /// step's argmax is the next step's input on the GPU, the steps' uniforms are copied in between
    /// the compute passes, and the `n` ids come back in one readback: one submission for `n` tokens.
    /// The same tokens as `n` calls of [`GpuSession::step_greedy`]; the session advances `n`.
    pub async fn greedy_tokens(&mut self, token: u32, n: usize) -> Result<Vec<u32>> {
        if n == 0 || n > GREEDY_BATCH {
            return Err(GpuError::Unsupported(format!("a greedy run of {n} tokens (1..={GREEDY_BATCH})")));
        }
        self.check_tokens(&[token])?;
        let max = self.model.cfg.max_context;
        if self.pos + n > max {
            return Err(CoreError::ContextTooLong { requested: self.pos + n, max }.into());
        }
        self.write_step(&[token]);
        let steps: Vec<Step> =
            (0..n).map(|k| Step { rows: 1, pos0: (self.pos + k) as u32, ..Step::default() }).collect();
        let ctx = self.model.ctx.clone();
        ctx.queue.write_buffer(&self.batch_steps, 0, bytemuck::cast_slice(&steps));
        let size = std::mem::size_of::<Step>() as u64;
        let [ops, head] = self.one_row();
        let sample = self.sample_fused.as_ref().unwrap_or(&self.sample);
        let mut enc = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        for k in 0..n as u64 {
            enc.copy_buffer_to_buffer(&self.batch_steps, k * size, &self.step, 0, size);
            self.encode_at(&mut enc, &[ops, head, std::slice::from_ref(sample)], 1, self.pos + k as usize);
            enc.copy_buffer_to_buffer(&self.tok_out, 0, &self.batch_toks, 4 * k, 4);
        }
        enc.copy_buffer_to_buffer(&self.batch_toks, 0, &self.staging_batch, 0, 4 * n as u64);
        ctx.submit(enc.finish()).await?;
        self.pos += n;
        ctx.read_words(&self.staging_batch, n).await
    }
}

/// `n` workgroups as (x, y) within the per-dimension limit.
fn split(n: u32, maxd: u32) -> (u32, u32) {
    if n <= maxd {
        (n, 1)
    } else {
        (maxd, n.div_ceil(maxd))
    }
}
