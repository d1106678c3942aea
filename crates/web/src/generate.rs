//! One generation as a chain of small tasks: prefill in one, then one token per task with a yield to
//! the event loop in between (see `yield_now`), so the page stays responsive and Stop takes effect at
//! the next token. Progress goes out as [`RunEvent`]s; the caller tags them with its run id.
//!
//! On WebGPU (`crate::gpu`, the `attnlab-gpu` crate) a GPU error before the first token reruns the
//! generation on the CPU; one mid-generation stops it (the text so far stays). Either way the
//! failure is reported, and the page's backend state turns to the CPU.

use std::cell::Cell;
use std::rc::Rc;

use attnlab_gpu::GpuContext;
use yew::Callback;

use crate::backend::{Active, GpuFailure};
use crate::engine::{Engine, Finish, GenSettings, TokenOut};
use crate::gpu::{self, GpuSlot};
use crate::yield_now::{next_paint, yield_now};

/// Milliseconds from `performance.now()` (falls back to `Date.now()`).
fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map(|p| p.now()).unwrap_or_else(js_sys::Date::now)
}

/// Prefill throughput of the last run.
#[derive(Clone, Copy, Default)]
pub struct PrefillStats {
    pub tokens: usize,
    pub ms: f64,
}

/// Decode throughput of the last run: `compute_ms` is time inside the engine, `wall_ms` includes the
/// yields to the event loop between tokens.
#[derive(Clone, Copy, Default)]
pub struct DecodeStats {
    pub tokens: usize,
    pub compute_ms: f64,
    pub wall_ms: f64,
}

/// What a run reports, in order: status lines, the prefill, each token (the whole text so far), the
/// backend when it changes, and the end.
pub enum RunEvent {
    Status(String),
    Prefilled(PrefillStats),
    Token {
        text: String,
        stats: DecodeStats,
    },
    /// The run continues on this backend (a GPU run that failed before its first token reruns on
    /// the CPU).
    Backend(Active),
    /// The final status line, or the error for the error box.
    Finished(Result<String, String>),
}

/// One run's input and where its events go.
pub struct Job {
    pub engine: Rc<Engine>,
    pub prompt: String,
    pub settings: GenSettings,
    /// Set by Stop (or a model switch): the run ends at its next token.
    pub stop: Rc<Cell<bool>>,
    pub events: Callback<RunEvent>,
}

/// One generation: prefill in one task, then one token per task. With `gpu`, on WebGPU: a GPU
/// failure before the first token reruns the generation on the CPU, one later stops it with the
/// text so far kept; either way `gpu_failed` hears of it and the page turns to the CPU.
pub async fn generate(job: Job, gpu: Option<(Rc<GpuContext>, GpuSlot)>, gpu_failed: Callback<GpuFailure>) {
    let result = match gpu {
        None => generate_tokens(&job).await,
        Some((ctx, slot)) => match generate_gpu(&job, &ctx, &slot).await {
            Ok(status) => Ok(status),
            Err(GpuRunError::Input(e)) => Err(e),
            Err(GpuRunError::Gpu { failure, tokens: 0 }) => {
                gpu_failed.emit(failure);
                job.events.emit(RunEvent::Backend(Active::Cpu));
                generate_tokens(&job).await
            }
            Err(GpuRunError::Gpu { failure, tokens }) => {
                let reason = failure.reason();
                gpu_failed.emit(failure);
                Ok(format!("stopped after {tokens} tokens: {reason}; next runs use the CPU"))
            }
        },
    };
    job.events.emit(RunEvent::Finished(result));
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

/// The WebGPU run: prefill and decode steps on the GPU, sampling on the CPU from the read-back logits
/// with the core's sampler (temperature 0: argmax on the GPU, only the token id read back).
async fn generate_gpu(job: &Job, ctx: &GpuContext, slot: &GpuSlot) -> Result<String, GpuRunError> {
    let (engine, stop, events) = (&job.engine, &job.stop, &job.events);
    yield_now().await;
    let mut decoder = engine.decoder(&job.prompt, &job.settings).map_err(GpuRunError::Input)?;
    let gpu_err = |tokens: usize| move |failure: GpuFailure| GpuRunError::Gpu { failure, tokens };
    let mut lease = slot.acquire().await.map_err(gpu_err(0))?;
    events.emit(RunEvent::Status("uploading the model to the GPU…".to_string()));
    let model = lease.model_for(ctx, engine).await.map_err(gpu_err(0))?;
    // A tokenizer smaller than the model's vocabulary bounds the pick: the sampling kernel's, not
    // the plain argmax.
    let vocab = model.config().vocab_size;
    let plain_argmax = decoder.is_greedy() && decoder.sampler_mut().vocab_limit().is_none_or(|n| n >= vocab);
    let mut session = model.session().await.map_err(|e| gpu_err(0)(gpu::failure(e)))?;
    let prompt_tokens = decoder.prompt_len();
    events.emit(RunEvent::Status(format!("prefilling {prompt_tokens} prompt tokens on the GPU…")));
    next_paint().await;
    if stop.get() {
        return Ok("stopped before prefill".to_string());
    }
    let t0 = now_ms();
    let logits = session.prefill(decoder.prompt_ids()).await.map_err(|e| gpu_err(0)(gpu::failure(e)))?;
    let prefill_ms = now_ms() - t0;
    events.emit(RunEvent::Prefilled(PrefillStats { tokens: prompt_tokens, ms: prefill_ms }));
    let wall_start = now_ms();
    let t = now_ms();
    let mut out: TokenOut = decoder.accept_logits(&logits).map_err(GpuRunError::Input)?;
    let mut compute_ms = now_ms() - t;
    loop {
        let tokens = decoder.generated_len();
        let finish = out.finish;
        events.emit(RunEvent::Token {
            text: out.text,
            stats: DecodeStats { tokens, compute_ms, wall_ms: now_ms() - wall_start },
        });
        if let Some(f) = finish {
            return Ok(finish_status(tokens, f));
        }
        yield_now().await;
        if stop.get() {
            return Ok(format!("stopped after {tokens} tokens"));
        }
        let t = now_ms();
        // The GPU picks the token inside the step's submission (argmax, or temperature / top-k /
        // top-p with the decoder's own random draw): only the id is read back.
        let id = if plain_argmax {
            session.step_greedy(out.id).await
        } else {
            let sampling = attnlab_gpu::GpuSampling::next_from(decoder.sampler_mut());
            session.step_sample(out.id, &sampling).await
        };
        let id = id.map_err(|e| gpu_err(tokens)(gpu::failure(e)))?;
        out = decoder.accept_token(id).map_err(GpuRunError::Input)?;
        compute_ms += now_ms() - t;
    }
}

/// The CPU run: the core's reference runtime through [`Engine::start`].
async fn generate_tokens(job: &Job) -> Result<String, String> {
    let (stop, events) = (&job.stop, &job.events);
    // Yield first so the cleared output and the status render before any compute.
    yield_now().await;
    let mut generation = job.engine.start(&job.prompt, &job.settings)?;
    let prompt_tokens = generation.prompt_len();
    events.emit(RunEvent::Status(format!("prefilling {prompt_tokens} prompt tokens…")));
    next_paint().await;
    if stop.get() {
        return Ok("stopped before prefill".to_string());
    }
    let t0 = now_ms();
    generation.prefill()?;
    let prefill_ms = now_ms() - t0;
    events.emit(RunEvent::Prefilled(PrefillStats { tokens: prompt_tokens, ms: prefill_ms }));
    let wall_start = now_ms();
    let mut compute_ms = 0.0;
    loop {
        yield_now().await;
        if stop.get() {
            return Ok(format!("stopped after {} tokens", generation.generated_len()));
        }
        let t = now_ms();
        let out = generation.next_token()?;
        compute_ms += now_ms() - t;
        let Some(out) = out else {
            return Ok(format!("done: {} tokens", generation.generated_len()));
        };
        let tokens = generation.generated_len();
        events.emit(RunEvent::Token {
            text: out.text,
            stats: DecodeStats { tokens, compute_ms, wall_ms: now_ms() - wall_start },
        });
        match out.finish {
            None => continue,
            Some(f) => return Ok(finish_status(tokens, f)),
        }
    }
}
