//! One generation, run in the model's worker: the prompt goes through the model in chunks (each
//! about [`CHUNK_TARGET_MS`] long, with progress), then tokens are decoded one by one (greedy on
//! WebGPU: in GPU-resident runs of about a frame, one submission and readback each). Between
//! chunks, and every [`YIELD_EVERY_MS`] of decoding, the task yields to the worker's event loop so
//! that a Stop message is heard within ~0.1 s. Tokens reach the page in batches (at most one message
//! per [`POST_EVERY_MS`]): the page renders once per animation frame anyway.
//!
//! On WebGPU (`crate::gpu`, the `attnlab-gpu` crate) a GPU error before the first token reruns the
//! generation on the CPU; one mid-generation stops it (the text so far stays). Either way the
//! failure is reported, and the backend state turns to the CPU.

use std::cell::Cell;
use std::collections::VecDeque;
use std::rc::Rc;

use attnlab_gpu::{GpuContext, GREEDY_BATCH};

use crate::backend::{Active, GpuFailure};
use crate::engine::{Engine, Finish, GenSettings, TokenOut};
use crate::global::now_ms;
use crate::gpu::{self, GpuSlot};
use crate::protocol::{DecodeStats, PrefillStats, RunEvent};
use crate::yield_now::yield_now;

/// Aim of one prefill chunk's duration: short enough for Stop to act within ~0.1 s.
pub const CHUNK_TARGET_MS: f64 = 40.0;
/// Decode yields to the event loop (to hear Stop) after this much work: each yield costs about a
/// token's time on a small model, so not every token.
const YIELD_EVERY_MS: f64 = 25.0;
/// Tokens are posted to the page at most this often (the last one always).
const POST_EVERY_MS: f64 = 16.0;
/// Target length of a GPU-resident greedy run: about one frame.
const FRAME_MS: f64 = 16.0;

/// Where a run's events go.
pub type Events = Rc<dyn Fn(RunEvent)>;

/// One run's input and where its events go.
pub struct Job {
    pub engine: Rc<Engine>,
    pub prompt: String,
    pub settings: GenSettings,
    /// Set by Stop (or a model switch): the run ends at its next chunk or token.
    pub stop: Rc<Cell<bool>>,
    pub events: Events,
}

/// One generation. With `gpu`, on WebGPU: a GPU failure before the first token reruns the
/// generation on the CPU, one later stops it with the text so far kept; either way `gpu_failed`
/// hears of it and the backend turns to the CPU.
pub async fn generate(job: Job, gpu: Option<(Rc<GpuContext>, GpuSlot)>, gpu_failed: Rc<dyn Fn(GpuFailure)>) {
    let result = match gpu {
        None => generate_cpu(&job).await,
        Some((ctx, slot)) => match generate_gpu(&job, &ctx, &slot).await {
            Ok(status) => Ok(status),
            Err(GpuRunError::Input(e)) => Err(e),
            Err(GpuRunError::Gpu { failure, tokens: 0 }) => {
                gpu_failed(failure);
                (job.events)(RunEvent::Backend(Active::Cpu));
                generate_cpu(&job).await
            }
            Err(GpuRunError::Gpu { failure, tokens }) => {
                let reason = failure.reason();
                gpu_failed(failure);
                Ok(format!("stopped after {tokens} tokens: {reason}; next runs use the CPU"))
            }
        },
    };
    (job.events)(RunEvent::Finished(result));
}

/// Why a GPU run ended early: bad input (an error for the user), or the GPU after `tokens` tokens.
enum GpuRunError {
    Input(String),
    Gpu { failure: GpuFailure, tokens: usize },
}

/// The status line of a run that ended by itself.
fn finish_status(tokens: usize, finish: Finish) -> String {
    let reason = match finish {
        Finish::MaxTokens => "max tokens reached",
        Finish::ContextFull => "the model's max_context is reached",
        Finish::EndOfText => "end of text",
    };
    format!("done: {tokens} tokens ({reason})")
}

/// Prefill chunk sizes that keep each chunk near [`CHUNK_TARGET_MS`]: doubled while chunks are
/// quick, halved when one was slow (attention over a long cache makes later tokens dearer).
struct Chunker {
    size: usize,
    target_ms: f64,
    max: usize,
}

impl Chunker {
    fn new(first: usize, target_ms: f64, max: usize) -> Chunker {
        Chunker { size: first.clamp(1, max), target_ms, max }
    }

    fn next(&mut self, last_ms: f64) -> usize {
        if last_ms < self.target_ms / 2.0 {
            self.size = self.size.saturating_mul(2).min(self.max);
        } else if last_ms > self.target_ms * 1.5 {
            self.size = (self.size / 2).max(1);
        }
        self.size
    }
}

/// Decoded tokens on their way to the page: posted at most every [`POST_EVERY_MS`].
struct Poster {
    events: Events,
    last_post: f64,
    pending: Option<(String, DecodeStats)>,
}

impl Poster {
    fn new(events: &Events) -> Poster {
        Poster { events: events.clone(), last_post: f64::NEG_INFINITY, pending: None }
    }

    fn token(&mut self, text: String, stats: DecodeStats) {
        self.pending = Some((text, stats));
        if now_ms() - self.last_post >= POST_EVERY_MS {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if let Some((text, stats)) = self.pending.take() {
            (self.events)(RunEvent::Token { text, stats });
            self.last_post = now_ms();
        }
    }
}

/// Yields to the worker's event loop once [`YIELD_EVERY_MS`] of work has passed.
struct Yielder {
    last: f64,
}

impl Yielder {
    async fn maybe(&mut self) {
        if now_ms() - self.last >= YIELD_EVERY_MS {
            yield_now().await;
            self.last = now_ms();
        }
    }
}

/// The WebGPU run: prefill and decode steps on the GPU; the token is picked on the GPU (argmax,
/// or the decoder's own random draw for temperature / top-k / top-p) and only its id read back;
/// greedy tokens come in runs ([`attnlab_gpu::GpuSession::greedy_tokens`]).
async fn generate_gpu(job: &Job, ctx: &GpuContext, slot: &GpuSlot) -> Result<String, GpuRunError> {
    let (engine, stop, events) = (&job.engine, &job.stop, &job.events);
    let mut decoder = engine.decoder(&job.prompt, &job.settings).map_err(GpuRunError::Input)?;
    let gpu_err = |tokens: usize| move |failure: GpuFailure| GpuRunError::Gpu { failure, tokens };
    let mut lease = slot.acquire().await.map_err(gpu_err(0))?;
    events(RunEvent::Status("uploading the model to the GPU…".to_string()));
    let model = lease.model_for(ctx, engine).await.map_err(gpu_err(0))?;
    // A tokenizer smaller than the model's vocabulary bounds the pick: the sampling kernel's, not
    // the plain argmax.
    let (vocab, max_context) = (model.config().vocab_size, model.config().max_context);
    let plain_argmax = decoder.is_greedy() && decoder.sampler_mut().vocab_limit().is_none_or(|n| n >= vocab);
    let mut session = model.session().await.map_err(|e| gpu_err(0)(gpu::failure(e)))?;
    let total = decoder.prompt_len();
    events(RunEvent::Status(format!("prefilling {total} prompt tokens on the GPU…")));
    let (t0, mut done, mut chunker) = (now_ms(), 0, Chunker::new(256, CHUNK_TARGET_MS, 4096));
    let mut last_ms = CHUNK_TARGET_MS;
    let logits = loop {
        yield_now().await;
        if stop.get() {
            return Ok(format!("stopped while prefilling ({done} of {total} prompt tokens)"));
        }
        let end = (done + chunker.next(last_ms)).min(total);
        let t = now_ms();
        let logits = session
            .prefill(&decoder.prompt_ids()[done..end])
            .await
            .map_err(|e| gpu_err(0)(gpu::failure(e)))?;
        last_ms = now_ms() - t;
        done = end;
        events(RunEvent::Prefilling { done, total });
        if done == total {
            break logits;
        }
    };
    events(RunEvent::Prefilled(PrefillStats { tokens: total, ms: now_ms() - t0 }));
    let (wall_start, mut poster, mut yielder) = (now_ms(), Poster::new(events), Yielder { last: now_ms() });
    let t = now_ms();
    let mut out: TokenOut = decoder.accept_logits(&logits).map_err(GpuRunError::Input)?;
    let mut compute_ms = now_ms() - t;
    // Greedy tokens come in GPU-resident runs (one submission and one readback per run) sized to
    // about one frame; the tokens of a run are taken one by one, as if decoded singly.
    let (mut run, mut run_ms, mut queued) = (Chunker::new(1, FRAME_MS, GREEDY_BATCH), 0.0, VecDeque::new());
    loop {
        let tokens = decoder.generated_len();
        let finish = out.finish;
        poster.token(out.text, DecodeStats { tokens, compute_ms, wall_ms: now_ms() - wall_start });
        if let Some(f) = finish {
            poster.flush();
            return Ok(finish_status(tokens, f));
        }
        yielder.maybe().await;
        if stop.get() {
            poster.flush();
            return Ok(format!("stopped after {tokens} tokens"));
        }
        if queued.is_empty() {
            let t = now_ms();
            let ids = if plain_argmax {
                let room = decoder.tokens_left().min(max_context.saturating_sub(session.len()));
                session.greedy_tokens(out.id, run.next(run_ms).min(room).max(1)).await
            } else {
                let sampling = attnlab_gpu::GpuSampling::next_from(decoder.sampler_mut());
                session.step_sample(out.id, &sampling).await.map(|id| vec![id])
            };
            queued = ids
                .map_err(|e| {
                    poster.flush();
                    gpu_err(tokens)(gpu::failure(e))
                })?
                .into();
            run_ms = now_ms() - t;
            compute_ms += run_ms;
        }
        let Some(id) = queued.pop_front() else {
            return Err(GpuRunError::Input("the GPU returned no token".to_string()));
        };
        out = decoder.accept_token(id).map_err(GpuRunError::Input)?;
    }
}

/// The CPU run: the core's reference runtime through [`Engine::start`].
async fn generate_cpu(job: &Job) -> Result<String, String> {
    let (stop, events) = (&job.stop, &job.events);
    let mut generation = job.engine.start(&job.prompt, &job.settings)?;
    let total = generation.prompt_len();
    events(RunEvent::Status(format!("prefilling {total} prompt tokens…")));
    let (t0, mut done, mut chunker) = (now_ms(), 0, Chunker::new(16, CHUNK_TARGET_MS, 4096));
    let mut last_ms = CHUNK_TARGET_MS;
    while done < total {
        yield_now().await;
        if stop.get() {
            return Ok(format!("stopped while prefilling ({done} of {total} prompt tokens)"));
        }
        let t = now_ms();
        done = generation.prefill_chunk(chunker.next(last_ms))?;
        last_ms = now_ms() - t;
        events(RunEvent::Prefilling { done, total });
    }
    events(RunEvent::Prefilled(PrefillStats { tokens: total, ms: now_ms() - t0 }));
    let (wall_start, mut poster, mut yielder) = (now_ms(), Poster::new(events), Yielder { last: now_ms() });
    let mut compute_ms = 0.0;
    loop {
        yielder.maybe().await;
        if stop.get() {
            poster.flush();
            return Ok(format!("stopped after {} tokens", generation.generated_len()));
        }
        let t = now_ms();
        let out = generation.next_token().inspect_err(|_| poster.flush())?;
        compute_ms += now_ms() - t;
        let Some(out) = out else {
            poster.flush();
            return Ok(format!("done: {} tokens", generation.generated_len()));
        };
        let tokens = generation.generated_len();
        poster.token(out.text, DecodeStats { tokens, compute_ms, wall_ms: now_ms() - wall_start });
        if let Some(f) = out.finish {
            poster.flush();
            return Ok(finish_status(tokens, f));
        }
    }
}
