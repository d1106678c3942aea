//! `--backend gpu`: one session type over the CPU reference and the wgpu backend.

use crate::common::{Backend, CliError, CliResult};
use attnlab_core::attention::TraceRequest;
use attnlab_core::sampling::Sampler;
use attnlab_core::{Model, Session};
use attnlab_gpu::{GpuContext, GpuError, GpuModel, GpuSampling, GpuSession};

/// A GPU error as one CLI error line (input errors stay usage errors).
pub fn gpu_err(e: GpuError) -> CliError {
    match e {
        GpuError::Core(c) => c.into(),
        other => CliError::runtime(format!("GPU backend: {other}")),
    }
}

/// `--no-shader-f16`: GPU engines read f16 matrices as u32 words even where shader-f16 is enabled.
pub static NO_SHADER_F16: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The model on the chosen backend.
pub enum Engine<'m> {
    Cpu(&'m Model),
    Gpu(Box<GpuModel>),
}

impl<'m> Engine<'m> {
    /// Upload `model` for `backend` (the GPU: adapter negotiation and limit checks first).
    pub fn new(model: &'m Model, backend: Backend) -> CliResult<Engine<'m>> {
        match backend {
            Backend::Cpu => Ok(Engine::Cpu(model)),
            Backend::Gpu => {
                let mut ctx = pollster::block_on(GpuContext::new()).map_err(gpu_err)?;
                if NO_SHADER_F16.load(std::sync::atomic::Ordering::Relaxed) {
                    ctx = ctx.without_shader_f16();
                }
                let gm = pollster::block_on(GpuModel::new(ctx, model)).map_err(gpu_err)?;
                Ok(Engine::Gpu(Box::new(gm)))
            }
        }
    }

    /// A fresh decode session.
    pub fn session(&mut self) -> CliResult<Sess<'_>> {
        match self {
            Engine::Cpu(m) => Ok(Sess::Cpu(m.session())),
            Engine::Gpu(g) => Ok(Sess::Gpu(Box::new(pollster::block_on(g.session()).map_err(gpu_err)?))),
        }
    }

    /// Attention maps and gates of the first `n` tokens (probabilities stage), exact (no
    /// downsampling): on the GPU `n` must be at most [`attnlab_gpu::MAX_MAP_SIDE`].
    pub fn trace(&mut self, tokens: &[u32], n: usize) -> CliResult<attnlab_core::model::Trace> {
        match self {
            Engine::Cpu(m) => Ok(attnlab_core::analysis::trace_for_analysis(m, tokens, n)?),
            Engine::Gpu(g) => {
                let req = TraceRequest { attention: true, gates: true, ..Default::default() };
                gpu_maps(g, &tokens[..n.min(tokens.len())], req)
            }
        }
    }

    /// Logits of every token of `tokens` and what `req` asks for, exact: the CPU reference's
    /// `Model::trace`, or on the GPU a prefill plus (for maps or gates) a trace of at most
    /// [`attnlab_gpu::MAX_MAP_SIDE`] tokens.
    pub fn trace_all(&mut self, tokens: &[u32], req: TraceRequest) -> CliResult<attnlab_core::model::Trace> {
        match self {
            Engine::Cpu(m) => Ok(m.trace(tokens, req)?),
            Engine::Gpu(g) => {
                let mut trace = match req.attention || req.gates {
                    true => gpu_maps(g, tokens, req)?,
                    false => Default::default(),
                };
                let mut session = pollster::block_on(g.session()).map_err(gpu_err)?;
                trace.logits = pollster::block_on(session.prefill_all(tokens)).map_err(gpu_err)?;
                Ok(trace)
            }
        }
    }

    /// GPU: whether decode runs fused (2 dispatches per block), or why it runs op by op; None on
    /// the CPU.
    pub fn fused_decode(&self) -> Option<Result<bool, String>> {
        match self {
            Engine::Cpu(_) => None,
            Engine::Gpu(g) => Some(g.fused_decode().map_err(str::to_string)),
        }
    }

    /// GPU: the dtype the weight matrices are held in, their bytes and how the kernels read them
    /// ([`GpuModel::matrix_reads`]); None on the CPU.
    pub fn gpu_matrices(&self) -> Option<(&'static str, u64, &'static str)> {
        match self {
            Engine::Cpu(_) => None,
            Engine::Gpu(g) => {
                let (dtype, bytes) = g.matrices();
                Some((dtype, bytes, g.matrix_reads()))
            }
        }
    }

    /// GPU: turn the fused decode of new sessions on or off (nothing on the CPU).
    pub fn set_fused_decode(&mut self, on: bool) {
        if let Engine::Gpu(g) = self {
            g.set_fused_decode(on);
        }
    }

    /// GPU: fewest keys per split-K workgroup of the fused softmax decode (`None`: one workgroup
    /// per head); nothing on the CPU.
    pub fn set_decode_split_keys(&mut self, keys: Option<u32>) {
        if let Engine::Gpu(g) = self {
            g.set_decode_split_keys(keys);
        }
    }

    /// GPU: the split-K setting of new sessions (None on the CPU or when unsplit).
    pub fn decode_split_keys(&self) -> Option<u32> {
        match self {
            Engine::Cpu(_) => None,
            Engine::Gpu(g) => g.decode_split_keys(),
        }
    }

    /// Whether any layer is softmax-family attention.
    pub fn has_softmax_layers(&self) -> bool {
        let cfg = match self {
            Engine::Cpu(m) => m.config(),
            Engine::Gpu(g) => g.config(),
        };
        cfg.layers.iter().any(|l| l.family() == attnlab_core::config::Family::Softmax)
    }

    /// GPU: seconds for `n` greedy tokens after a prefill of `prompt`, one submission per token
    /// (`step_greedy`) and in GPU-resident runs of `batch` tokens (`greedy_tokens`); None on the CPU.
    /// Both must pick the same tokens.
    pub fn greedy_timing(&mut self, prompt: &[u32], n: usize, batch: usize) -> CliResult<Option<(f64, f64)>> {
        let Engine::Gpu(g) = self else { return Ok(None) };
        let (Some((&first, head)), true) = (prompt.split_last(), n > 0) else { return Ok(None) };
        let mut s = pollster::block_on(g.session()).map_err(gpu_err)?;
        pollster::block_on(s.prefill(head)).map_err(gpu_err)?;
        let t = std::time::Instant::now();
        let (mut tok, mut single) = (first, Vec::with_capacity(n));
        for _ in 0..n {
            tok = pollster::block_on(s.step_greedy(tok)).map_err(gpu_err)?;
            single.push(tok);
        }
        let single_s = t.elapsed().as_secs_f64();
        drop(s);
        let mut s = pollster::block_on(g.session()).map_err(gpu_err)?;
        pollster::block_on(s.prefill(head)).map_err(gpu_err)?;
        let t = std::time::Instant::now();
        let (mut tok, mut runs) = (first, Vec::with_capacity(n));
        while runs.len() < n {
            let k = batch.clamp(1, attnlab_gpu::GREEDY_BATCH).min(n - runs.len());
            let got = pollster::block_on(s.greedy_tokens(tok, k)).map_err(gpu_err)?;
            tok = got.last().copied().unwrap_or(tok);
            runs.extend(got);
        }
        let runs_s = t.elapsed().as_secs_f64();
        if runs != single {
            return Err(CliError::runtime("GPU-resident greedy runs picked other tokens than single steps"));
        }
        Ok(Some((single_s, runs_s)))
    }

    /// The adapter in words (None on the CPU).
    pub fn device(&self) -> Option<String> {
        match self {
            Engine::Cpu(_) => None,
            Engine::Gpu(g) => Some(g.context().caps().adapter.clone()),
        }
    }
}

/// Exact GPU attention maps and gates of `tokens` (refused over [`attnlab_gpu::MAX_MAP_SIDE`]).
fn gpu_maps(g: &mut GpuModel, tokens: &[u32], req: TraceRequest) -> CliResult<attnlab_core::model::Trace> {
    if tokens.len() > attnlab_gpu::MAX_MAP_SIDE {
        return Err(CliError::usage(format!(
            "the GPU records exact attention maps for at most {} tokens (longer traces are downsampled); \
             lower --max-tokens",
            attnlab_gpu::MAX_MAP_SIDE
        )));
    }
    let t = pollster::block_on(g.trace(tokens, req, attnlab_gpu::MAX_MAP_SIDE)).map_err(gpu_err)?;
    Ok(t.trace)
}

/// A decode session on either backend.
pub enum Sess<'a> {
    Cpu(Session<'a>),
    Gpu(Box<GpuSession<'a>>),
}

impl Sess<'_> {
    /// The GPU's traffic counters so far (`None` on the CPU).
    pub fn traffic(&self) -> Option<attnlab_gpu::Traffic> {
        match self {
            Sess::Cpu(_) => None,
            Sess::Gpu(s) => Some(s.model().context().traffic()),
        }
    }

    /// Prefill; logits of the last token.
    pub fn prefill(&mut self, tokens: &[u32]) -> CliResult<Vec<f32>> {
        match self {
            Sess::Cpu(s) => Ok(s.prefill(tokens)?),
            Sess::Gpu(s) => pollster::block_on(s.prefill(tokens)).map_err(gpu_err),
        }
    }

    /// Prefill; logits of every token.
    pub fn prefill_all(&mut self, tokens: &[u32]) -> CliResult<Vec<f32>> {
        match self {
            Sess::Cpu(s) => Ok(s.prefill_all(tokens)?),
            Sess::Gpu(s) => pollster::block_on(s.prefill_all(tokens)).map_err(gpu_err),
        }
    }

    /// One decode step; logits of the new position.
    pub fn step(&mut self, token: u32) -> CliResult<Vec<f32>> {
        match self {
            Sess::Cpu(s) => Ok(s.step(token)?),
            Sess::Gpu(s) => pollster::block_on(s.step(token)).map_err(gpu_err),
        }
    }

    /// One decode step that also picks the next token with `sampler` (the same random stream on
    /// both backends; the GPU samples inside the step's submission and reads back the id only).
    pub fn step_sample(&mut self, token: u32, sampler: &mut Sampler) -> CliResult<u32> {
        match self {
            Sess::Cpu(s) => {
                let logits = s.step(token)?;
                Ok(sampler.sample(&logits)?)
            }
            Sess::Gpu(s) => {
                pollster::block_on(s.step_sample(token, &GpuSampling::next_from(sampler))).map_err(gpu_err)
            }
        }
    }

    /// Bytes of KV cache / recurrent state held.
    pub fn state_bytes(&self) -> usize {
        match self {
            Sess::Cpu(s) => s.state_bytes(),
            Sess::Gpu(s) => usize::try_from(s.state_bytes()).unwrap_or(usize::MAX),
        }
    }
}
