//! The lab views' requests in the worker: traces, zoom windows, gate statistics, kernel curves,
//! the model's files and the perplexity sweep, on WebGPU when generation runs there, else (or once
//! the GPU fails) on the CPU reference. They wait while a generation runs.

use std::rc::Rc;

use attnlab_core::analysis::{MapWindow, PplPoint};
use attnlab_core::attention::{AttnStage, LayerAttention};
use attnlab_gpu::GpuContext;
use wasm_bindgen_futures::spawn_local;

use super::choice::gpu_failed;
use super::{engine_of, post, Shared, State};
use crate::backend::Active;
use crate::engine::Engine;
use crate::gpu::{GpuSlot, GpuTraceError};
use crate::lab::{self, TraceView};
use crate::protocol::{self, Answer, FromWorker, ModelId, Task};
use crate::yield_now::yield_now;

/// While a generation runs, analyses wait: one of them runs to its end once started (a trace is
/// one call into the model), which would delay the run's tokens and its Stop.
const ANALYSIS_WAIT_MS: u32 = 20;

/// Wait until no generation runs (or `req` is cancelled).
async fn after_runs(shared: &Shared, req: u32) {
    while !shared.borrow().runs.is_empty() && !shared.borrow().cancelled.contains(&req) {
        gloo_timers::future::TimeoutFuture::new(ANALYSIS_WAIT_MS).await;
    }
}

pub(super) fn analyze(shared: &Shared, req: u32, model: ModelId, task: Task) {
    let shared = shared.clone();
    spawn_local(async move {
        // Let a Cancel sent right after this request arrive first.
        yield_now().await;
        after_runs(&shared, req).await;
        if shared.borrow_mut().cancelled.remove(&req) {
            return;
        }
        let Some(engine) = engine_of(&shared.borrow(), model) else {
            let result = Err("that model is no longer loaded".to_string());
            return post(&FromWorker::Answer { req, result });
        };
        let result = match task {
            Task::Trace { text, stage } => {
                trace(&shared, model, &engine, &text, stage).await.map(Answer::Trace)
            }
            Task::Tile { text, stage, layer, window } => {
                tile(&shared, model, &engine, &text, stage, layer, window).await.map(Answer::Tile)
            }
            Task::GateStats { text } => engine.gate_stats(&text).map(Answer::Gates),
            Task::KernelCurves { layer, n } => engine.kernel_curves(layer, n).map(Answer::Curves),
            Task::Files => engine.model_files().map(|(config, weights)| {
                let tokenizer = engine.tokenizer_json().to_string();
                Answer::Files(protocol::ModelFiles { config, weights, tokenizer })
            }),
            Task::PplSweep { text } => match sweep(&shared, req, model, &engine, &text).await {
                Some(r) => r.map(Answer::Sweep),
                None => return,
            },
        };
        post(&FromWorker::Answer { req, result });
    });
}

/// The GPU that generation, and so the views, run on: WebGPU when the backend choice or Auto's
/// measurement picked it, else none.
pub(super) fn active_gpu(s: &State) -> Option<(Rc<GpuContext>, GpuSlot)> {
    match (s.backend.active(), &s.gpu_ctx) {
        (Active::Gpu, Some(ctx)) => Some((ctx.clone(), s.gpu_slot.clone())),
        _ => None,
    }
}

/// The trace views' analysis of `text`: on WebGPU when generation runs there (to
/// [`lab::MAX_GPU_TRACE_TOKENS`], the trace kept for the zoom), else, or when the GPU fails (the
/// badge then says why), on the CPU reference (to [`lab::MAX_TRACE_TOKENS`]).
async fn trace(
    shared: &Shared,
    model: ModelId,
    engine: &Rc<Engine>,
    text: &str,
    stage: AttnStage,
) -> Result<TraceView, String> {
    let gpu = active_gpu(&shared.borrow());
    if let Some((ctx, slot)) = gpu {
        let result = match slot.acquire().await {
            Ok(mut lease) => lease.trace(&ctx, engine, text, stage).await,
            Err(f) => Err(f.into()),
        };
        match result {
            Ok(view) => return Ok(view),
            Err(GpuTraceError::Input(e)) => return Err(e),
            Err(GpuTraceError::Gpu(failure)) => gpu_failed(shared, Some(model), failure),
        }
    }
    engine.trace(text, stage)
}

/// A zoom window of the WebGPU trace of `text` (traced again if the GPU no longer holds it).
async fn tile(
    shared: &Shared,
    model: ModelId,
    engine: &Rc<Engine>,
    text: &str,
    stage: AttnStage,
    layer: usize,
    window: MapWindow,
) -> Result<LayerAttention, String> {
    let gpu = active_gpu(&shared.borrow());
    let Some((ctx, slot)) = gpu else {
        return Err(
            "the zoom's windows come from a WebGPU trace, and the views now trace on the CPU".to_string()
        );
    };
    let result = match slot.acquire().await {
        Ok(mut lease) => lease.window(&ctx, engine, text, stage, layer, window).await,
        Err(f) => Err(f.into()),
    };
    match result {
        Ok(maps) => Ok(maps),
        Err(GpuTraceError::Input(e)) => Err(e),
        Err(GpuTraceError::Gpu(failure)) => {
            let why = failure.reason();
            gpu_failed(shared, Some(model), failure);
            Err(format!("WebGPU failed ({why}); trace the text again"))
        }
    }
}

/// Tokens per prefill of the sweep on WebGPU (the CPU's slices are [`lab::PPL_SLICE`]).
const GPU_SWEEP_SLICE: usize = 512;

/// Perplexity against length, posting progress; `None` once the page cancelled it. On WebGPU when
/// generation runs there (a window per GPU turn), else, or from the window where the GPU failed, on
/// the CPU in slices.
async fn sweep(
    shared: &Shared,
    req: u32,
    model: ModelId,
    engine: &Rc<Engine>,
    text: &str,
) -> Option<Result<Vec<PplPoint>, String>> {
    let tokens = match engine.encode(text) {
        Ok(t) => t,
        Err(e) => return Some(Err(e)),
    };
    let lengths = engine.sweep_lengths(tokens.len());
    let mut cursor = match lab::SweepCursor::new(engine.info().max_context, tokens, &lengths) {
        Ok(c) => c,
        Err(e) => return Some(Err(e)),
    };
    let gpu = active_gpu(&shared.borrow());
    if let Some((ctx, slot)) = gpu {
        while !cursor.finished() {
            let result = match slot.acquire().await {
                Ok(mut lease) => lease.score_window(&ctx, engine, &cursor, GPU_SWEEP_SLICE).await,
                Err(f) => Err(f),
            };
            match result {
                Ok(next) => cursor = next,
                Err(failure) => {
                    gpu_failed(shared, Some(model), failure);
                    break;
                }
            }
            let (fraction, points) = (cursor.progress(), cursor.points().to_vec());
            post(&FromWorker::Sweep { req, fraction, points, on_gpu: true });
            if !sweep_turn(shared, req).await {
                return None;
            }
        }
        if cursor.finished() {
            return Some(Ok(cursor.points().to_vec()));
        }
    }
    let mut sweep = lab::PplSweep::resume(engine, cursor);
    let (mut last_sent, mut slices) = (usize::MAX, 0usize);
    loop {
        match sweep.advance() {
            Ok(true) => return Some(Ok(sweep.points().to_vec())),
            Ok(false) => {}
            Err(e) => return Some(Err(e)),
        }
        slices += 1;
        // A finished length, and every few slices for the progress bar.
        if sweep.points().len() != last_sent || slices.is_multiple_of(4) {
            last_sent = sweep.points().len();
            let (fraction, points) = (sweep.progress(), sweep.points().to_vec());
            post(&FromWorker::Sweep { req, fraction, points, on_gpu: false });
        }
        if !sweep_turn(shared, req).await {
            return None;
        }
    }
}

/// Between two pieces of a sweep: yield, let a generation started meanwhile go first; `false` once
/// the page cancelled the sweep.
async fn sweep_turn(shared: &Shared, req: u32) -> bool {
    yield_now().await;
    after_runs(shared, req).await;
    !shared.borrow_mut().cancelled.remove(&req)
}
