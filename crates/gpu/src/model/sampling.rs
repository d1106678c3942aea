//! Sampling beyond greedy on the GPU (`sample_top` in shaders/sample.wgsl): temperature, top-k and
//! top-p in the decode step's own submission, so only the picked token (4 bytes) is read back. The
//! random draw stays on the CPU: the caller passes the uniform u its sampler would use
//! ([`GpuSampling::next_from`]), so a seed gives the same stream on both backends.

use super::record::{Disp, Op};
use super::{bind, GpuSession};
use crate::error::{GpuError, Result};
use crate::params::SampleParams;
use attnlab_core::sampling::{Sampler, SamplingConfig};

/// Sampling settings of one GPU decode step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuSampling {
    /// 0 = greedy (argmax, `u` unused).
    pub temperature: f32,
    /// Keep the k most likely tokens (0 = all).
    pub top_k: u32,
    /// Keep the shortest most-likely prefix whose probability reaches top_p (1 = all).
    pub top_p: f32,
    /// The uniform draw in [0, 1) that picks the token by inverse CDF.
    pub u: f64,
    /// Pick only among the first `vocab` ids (0: the whole vocabulary; `Sampler::limit_vocab`).
    pub vocab: u32,
}

/// The `sample_top` op of a session with its writable parameter block and sort scratch.
pub(super) struct TopSampler {
    params: wgpu::Buffer,
    op: Op,
    npow2: u32,
}

impl TopSampler {
    /// `pipe`: the `sample_top` pipeline; buffers of the session it samples for.
    pub(super) fn new(
        m: &super::GpuModel,
        pipe: usize,
        logits: &wgpu::Buffer,
        tok: &wgpu::Buffer,
        tok_out: &wgpu::Buffer,
    ) -> Result<TopSampler> {
        let vocab = m.cfg.vocab_size;
        let npow2 = vocab.next_power_of_two();
        let npow2 = u32::try_from(npow2).map_err(|_| {
            GpuError::Unsupported(format!("vocabulary of {vocab} is too large to sample on the GPU"))
        })?;
        m.ctx.check_size("sampling scratch", 8 * u64::from(npow2))?;
        let dev = &m.ctx.device;
        let params = dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sampling params"),
            size: std::mem::size_of::<SampleParams>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let scratch = super::zeros(dev, "sampling scratch", 2 * npow2 as usize, wgpu::BufferUsages::empty());
        let bind = bind(m, pipe, &[&params, logits, tok, tok_out, &scratch]);
        Ok(TopSampler { params, op: Op { pipe, bind, disp: Disp::Fixed(1) }, npow2 })
    }
}

impl GpuSampling {
    /// The settings of `sampler` and its next draw (advancing its stream exactly as
    /// `Sampler::sample` would), so a seed means the same on the CPU and the GPU.
    pub fn next_from(sampler: &mut Sampler) -> GpuSampling {
        let c = *sampler.config();
        GpuSampling {
            temperature: c.temperature,
            top_k: u32::try_from(c.top_k).unwrap_or(u32::MAX),
            top_p: c.top_p,
            u: sampler.draw().unwrap_or(0.0),
            vocab: sampler.vocab_limit().map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        }
    }
}

/// The CPU sampler's own validation of temperature and top-p, plus the draw's range.
fn check(s: &GpuSampling) -> Result<()> {
    SamplingConfig { temperature: s.temperature, top_k: s.top_k as usize, top_p: s.top_p, seed: 0 }
        .validate()?;
    if !(0.0..1.0).contains(&s.u) {
        return Err(attnlab_core::Error::arg("u", format!("{} must be in [0, 1)", s.u)).into());
    }
    Ok(())
}

impl GpuSession<'_> {
    fn write_sampling(&self, s: &GpuSampling) {
        let ts = &self.top;
        let p = SampleParams {
            vocab: match (s.vocab, self.model.cfg.vocab_size as u32) {
                (0, all) => all,
                (limit, all) => limit.min(all),
            },
            top_k: s.top_k,
            temperature: s.temperature,
            top_p: s.top_p,
            u: (s.u as f32).min(1.0 - f32::EPSILON),
            npow2: ts.npow2,
            ..SampleParams::default()
        };
        self.model.ctx.queue.write_buffer(&ts.params, 0, bytemuck::bytes_of(&p));
    }

    /// One decode step that samples the next token on the GPU with `s` in the same submission; only
    /// the token id (4 bytes) is read back.
    pub async fn step_sample(&mut self, token: u32, s: &GpuSampling) -> Result<u32> {
        check(s)?;
        self.check_tokens(&[token])?;
        self.write_sampling(s);
        self.write_step(&[token]);
        let dev = &self.model.ctx.device;
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        let [ops, head] = self.one_row();
        self.encode(&mut enc, &[ops, head, std::slice::from_ref(&self.top.op)], 1);
        self.submit_token(enc, 1).await
    }

    /// Sample from caller-supplied logits (`[vocab]`) with the GPU sampler; the session's position
    /// does not move (for tests and replays). Overwrites the session's logits row.
    pub async fn sample_logits(&mut self, logits: &[f32], s: &GpuSampling) -> Result<u32> {
        check(s)?;
        let v = self.model.cfg.vocab_size;
        if logits.len() != v {
            return Err(attnlab_core::Error::arg(
                "logits",
                format!("{} logits for a vocabulary of {v}", logits.len()),
            )
            .into());
        }
        self.write_sampling(s);
        let ctx = &self.model.ctx;
        ctx.queue.write_buffer(&self.logits, 0, bytemuck::cast_slice(logits));
        let mut enc = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        self.encode(&mut enc, &[std::slice::from_ref(&self.top.op)], 1);
        self.submit_token(enc, 0).await
    }
}
