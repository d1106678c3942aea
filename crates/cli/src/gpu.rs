//! `--backend gpu`: one session type over the CPU reference and the wgpu backend.

use crate::common::{Backend, CliError, CliResult};
use attnlab_core::{Model, Session};
use attnlab_gpu::{GpuContext, GpuError, GpuModel, GpuSession};

/// A GPU error as one CLI error line (input errors stay usage errors).
pub fn gpu_err(e: GpuError) -> CliError {
    match e {
        GpuError::Core(c) => c.into(),
        other => CliError::runtime(format!("GPU backend: {other}")),
    }
}

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
                let ctx = pollster::block_on(GpuContext::new()).map_err(gpu_err)?;
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

    /// The adapter in words (None on the CPU).
    pub fn device(&self) -> Option<String> {
        match self {
            Engine::Cpu(_) => None,
            Engine::Gpu(g) => Some(g.context().caps().adapter.clone()),
        }
    }
}

/// A decode session on either backend.
pub enum Sess<'a> {
    Cpu(Session<'a>),
    Gpu(Box<GpuSession<'a>>),
}

impl Sess<'_> {
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

    /// Bytes of KV cache / recurrent state held.
    pub fn state_bytes(&self) -> usize {
        match self {
            Sess::Cpu(s) => s.state_bytes(),
            Sess::Gpu(s) => usize::try_from(s.state_bytes()).unwrap_or(usize::MAX),
        }
    }
}
