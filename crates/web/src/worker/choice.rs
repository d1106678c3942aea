//! The backend choice in the worker: the WebGPU probe and its retry, a GPU failure's effect, the
//! model's upload ahead of the first generation, and Auto's speed test of both backends.

use std::rc::Rc;

use attnlab_gpu::GpuContext;
use wasm_bindgen_futures::spawn_local;

use super::{post, Held, Shared};
use crate::backend::{Choice, GpuFailure, Probe, Speeds};
use crate::engine::Engine;
use crate::global::now_ms;
use crate::gpu::{self, GpuSlot};
use crate::protocol::{FromWorker, ModelId};
use crate::yield_now::yield_now;

/// Tell the page the backend state (choice, probe, speeds) and how many probes ran.
pub(super) fn post_backend(shared: &Shared) {
    let s = shared.borrow();
    post(&FromWorker::Backend { state: s.backend.clone(), probes: s.probes });
}

pub(super) fn probe(shared: &Shared) {
    let shared = shared.clone();
    spawn_local(async move {
        let probed = gpu::probe().await;
        {
            let mut s = shared.borrow_mut();
            match probed {
                Ok((ctx, adapter)) => {
                    s.backend.probe = Probe::Ready { adapter };
                    s.gpu_ctx = Some(Rc::new(ctx));
                }
                Err(failure) => s.backend.fail(failure),
            }
        }
        post_backend(&shared);
        warm_gpu(&shared);
    });
}

pub(super) fn retry_gpu(shared: &Shared) {
    {
        let mut s = shared.borrow_mut();
        if !s.backend.can_retry() {
            return;
        }
        // Free the lost device's model; a run still on it has stopped (the GPU failed).
        s.gpu_slot.clear();
        s.gpu_ctx = None;
        s.backend.retry();
        s.probes += 1;
    }
    post_backend(shared);
    probe(shared);
}

/// The GPU failed; `model` is set when the failure is that model's upload.
pub(super) fn gpu_failed(shared: &Shared, model: Option<ModelId>, failure: GpuFailure) {
    {
        let mut s = shared.borrow_mut();
        let current = s.current.as_ref().map(|c| c.id);
        if failure.is_model_specific() && model.is_some() && model != current {
            return;
        }
        if !failure.is_model_specific() {
            // The device is gone or misbehaves: free the GPU model, stay on the CPU.
            s.gpu_slot.clear();
        }
        s.backend.fail(failure);
    }
    post_backend(shared);
}

/// Upload the current model to the GPU ahead of the first generation when generation may run
/// there, so a model the adapter refuses shows the CPU badge right away; in Auto, then time both
/// backends ([`measure_speeds`]).
pub(super) fn warm_gpu(shared: &Shared) {
    let (ctx, current, slot) = {
        let s = shared.borrow();
        let (Some(ctx), Some(current)) = (s.gpu_ctx.clone(), s.current.clone()) else { return };
        if s.backend.choice == Choice::Cpu || !s.backend.gpu_possible() {
            return;
        }
        (ctx, current, s.gpu_slot.clone())
    };
    let shared = shared.clone();
    spawn_local(async move {
        let result = match slot.acquire().await {
            Ok(mut lease) => lease.model_for(&ctx, &current.engine).await.map(|_| ()),
            Err(f) => Err(f),
        };
        match result {
            Err(failure) => gpu_failed(&shared, Some(current.id), failure),
            Ok(()) if shared.borrow().backend.wants_speeds() => {
                measure_speeds(&shared, &ctx, &slot, &current).await
            }
            Ok(()) => {}
        }
    });
}

/// Decode steps timed per backend (after [`SPEED_WARMUP`] untimed ones, which compile the
/// pipelines), or fewer once [`SPEED_BUDGET_MS`] is spent: a slow backend is not waited for.
const SPEED_STEPS: usize = 12;
const SPEED_WARMUP: usize = 2;
const SPEED_BUDGET_MS: f64 = 1500.0;

/// The prompt the speed test prefills (any 8 valid ids do), and how many steps fit after it and
/// the warm-up in the model's context.
fn speed_plan(engine: &Engine) -> (Vec<u32>, usize) {
    let info = engine.info();
    let vocab = info.vocab_size.max(1) as u32;
    let room = info.max_context.saturating_sub(8 + SPEED_WARMUP);
    ((1..=8).map(|i| i % vocab).collect(), room.min(SPEED_STEPS))
}

/// Auto: time decode steps of `held` on the GPU and on the CPU, then let the faster one generate.
/// A GPU failure here is reported like any other; the speeds of a model no longer current are
/// dropped.
async fn measure_speeds(shared: &Shared, ctx: &GpuContext, slot: &GpuSlot, held: &Held) {
    let gpu = match time_gpu(ctx, slot, &held.engine).await {
        Ok(tps) => tps,
        Err(failure) => return gpu_failed(shared, Some(held.id), failure),
    };
    yield_now().await;
    let cpu = time_cpu(&held.engine);
    {
        let mut s = shared.borrow_mut();
        if s.current.as_ref().map(|c| c.id) != Some(held.id) {
            return;
        }
        s.backend.speeds = Some(Speeds { gpu, cpu });
    }
    post_backend(shared);
}

/// Decode tokens per second of `engine` on the GPU.
async fn time_gpu(ctx: &GpuContext, slot: &GpuSlot, engine: &Rc<Engine>) -> Result<f64, GpuFailure> {
    let mut lease = slot.acquire().await?;
    let model = lease.model_for(ctx, engine).await?;
    let mut session = model.session().await.map_err(gpu::failure)?;
    let (prompt, max_steps) = speed_plan(engine);
    if max_steps == 0 {
        return Ok(0.0);
    }
    session.prefill(&prompt).await.map_err(gpu::failure)?;
    let mut id = 0;
    for _ in 0..SPEED_WARMUP {
        id = session.step_greedy(id).await.map_err(gpu::failure)?;
    }
    let (t0, mut steps) = (now_ms(), 0);
    while steps < max_steps && now_ms() - t0 < SPEED_BUDGET_MS {
        id = session.step_greedy(id).await.map_err(gpu::failure)?;
        steps += 1;
    }
    Ok(steps as f64 * 1000.0 / (now_ms() - t0).max(1e-3))
}

/// Decode tokens per second of `engine` on the CPU (0 if the model cannot run the test).
fn time_cpu(engine: &Engine) -> f64 {
    let mut session = engine.model.session();
    let (prompt, max_steps) = speed_plan(engine);
    if max_steps == 0 || session.prefill(&prompt).is_err() {
        return 0.0;
    }
    for _ in 0..SPEED_WARMUP {
        let _ = session.step(0);
    }
    let (t0, mut steps) = (now_ms(), 0);
    while steps < max_steps && now_ms() - t0 < SPEED_BUDGET_MS {
        if session.step(0).is_err() {
            break;
        }
        steps += 1;
    }
    steps as f64 * 1000.0 / (now_ms() - t0).max(1e-3)
}
