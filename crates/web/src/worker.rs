//! The model's Web Worker: it holds the models (the page's model as trained and as edited, and the
//! models beside it: the initial checkpoint the gate view compares with, compare mode's model B),
//! the WebGPU device and the backend choice, and
//! runs everything that computes: loading, opening local files, generation on either backend and
//! the lab's analyses. The page's main thread only renders (`client.rs`), so a long prefill never
//! freezes it. Messages are `crate::protocol`'s; the worker answers every request it can and names
//! the problem when it cannot.
//!
//! The same wasm module runs on both threads: `main` starts [`start`] when it finds itself in a
//! worker (the worker script the site writes beside the page imports the module's glue).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use attnlab_core::analysis::MapWindow;
use attnlab_core::attention::{AttnStage, LayerAttention};
use attnlab_gpu::GpuContext;
use attnlab_train::finetune::TuneOptions;
use js_sys::{Array, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::spawn_local;
use web_sys::{DedicatedWorkerGlobalScope, File, MessageEvent};

use crate::backend::{Active, BackendState, Choice, GpuFailure, Probe, Speeds};
use crate::engine::Engine;
use crate::generate::{self, Job};
use crate::global::now_ms;
use crate::gpu::{self, GpuSlot, GpuTraceError};
use crate::lab::{self, BiasEdit, TraceView};
use crate::loader;
use crate::local;
use crate::open;
use crate::protocol::{
    self, Answer, Aux, FromWorker, ModelId, ModelMeta, RunEvent, Task, ToWorker, TuneEvent, TuneSetup,
    TuneSummary, Tuned,
};
use crate::tuner::RemoteTuner;
use crate::yield_now::yield_now;

/// An engine the worker holds, under the id the page knows it by.
#[derive(Clone)]
struct Held {
    id: ModelId,
    engine: Rc<Engine>,
}

/// Everything the worker holds.
struct State {
    /// The latest load or open: only it may become the page's model.
    latest_seq: u32,
    next_id: ModelId,
    /// The page's model as trained, and with the bias sliders' edit applied (the same engine
    /// without an edit).
    trained: Option<Held>,
    current: Option<Held>,
    /// The edited model before the current one: the page may still ask of it until it hears of
    /// the new one.
    previous: Option<Held>,
    edit: BiasEdit,
    /// The models beside the trained model: its initial checkpoint (ReGLA Fig. 4, once the gate
    /// view asked) and compare mode's model B, each with the name it was loaded under.
    aux: Vec<(Aux, String, Held)>,
    /// The latest name asked for each aux (an older load that ends later is dropped).
    aux_wanted: HashMap<Aux, String>,
    backend: BackendState,
    probes: u32,
    gpu_ctx: Option<Rc<GpuContext>>,
    gpu_slot: GpuSlot,
    /// Stop flags of the runs in flight, and of the fine-tunes.
    runs: HashMap<u32, Rc<Cell<bool>>>,
    tunes: HashMap<u32, Rc<Cell<bool>>>,
    /// Requests the page no longer wants.
    cancelled: HashSet<u32>,
}

type Shared = Rc<RefCell<State>>;

/// Post `msg` to the page; its bytes' buffer is transferred, not copied.
fn post(msg: &FromWorker) {
    let bytes = match protocol::encode(msg) {
        Ok(b) => b,
        Err(e) => return web_sys::console::error_1(&e.to_string().into()),
    };
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let array = Uint8Array::from(bytes.as_slice());
    let transfer = Array::of1(&array.buffer());
    if let Err(e) = scope.post_message_with_transfer(&array, &transfer) {
        web_sys::console::error_1(&e);
    }
}

/// Bytes of this worker's wasm memory.
fn memory_bytes() -> u64 {
    let buffer = js_sys::Reflect::get(&wasm_bindgen::memory(), &"buffer".into()).ok();
    buffer
        .and_then(|b| js_sys::Reflect::get(&b, &"byteLength".into()).ok())
        .and_then(|v| v.as_f64())
        .unwrap_or(0.0) as u64
}

/// Run the worker: hear the page's messages, probe WebGPU, say Ready.
pub fn start() {
    let shared: Shared = Rc::new(RefCell::new(State {
        latest_seq: 0,
        next_id: 1,
        trained: None,
        current: None,
        previous: None,
        edit: BiasEdit::default(),
        aux: Vec::new(),
        aux_wanted: HashMap::new(),
        backend: BackendState::new(Choice::Auto),
        probes: 1,
        gpu_ctx: None,
        gpu_slot: GpuSlot::default(),
        runs: HashMap::new(),
        tunes: HashMap::new(),
        cancelled: HashSet::new(),
    }));
    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let on_message = {
        let shared = shared.clone();
        Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| receive(&shared, e.data()))
    };
    scope.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The handler lives as long as the worker.
    on_message.forget();
    probe(&shared);
    post(&FromWorker::Ready);
}

/// A message from the page: `{ bytes, files }` (files only with `Open`).
fn receive(shared: &Shared, data: JsValue) {
    let field = |k: &str| js_sys::Reflect::get(&data, &k.into()).unwrap_or(JsValue::UNDEFINED);
    let bytes = field("bytes").dyn_into::<Uint8Array>().map(|a| a.to_vec()).unwrap_or_default();
    let msg = match protocol::decode::<ToWorker>(&bytes) {
        Ok(m) => m,
        Err(e) => return web_sys::console::error_1(&e.to_string().into()),
    };
    // `Array.from(undefined)` throws: only an open carries files.
    let list = |k: &str| field(k).dyn_into::<Array>().map(|a| a.to_vec()).unwrap_or_default();
    let files: Vec<File> = list("files").into_iter().filter_map(|f| f.dyn_into().ok()).collect();
    let paths: Vec<String> = list("paths").into_iter().map(|p| p.as_string().unwrap_or_default()).collect();
    let paths = paths.into_iter().chain(std::iter::repeat(String::new()));
    handle(shared, msg, paths.zip(files).collect());
}

fn handle(shared: &Shared, msg: ToWorker, files: Vec<(String, File)>) {
    match msg {
        ToWorker::Load { seq, name } => load(shared, seq, name),
        ToWorker::Open { seq } => open_files(shared, seq, files),
        ToWorker::LoadAux { of, aux, name } => load_aux(shared, of, aux, name),
        ToWorker::Edit { of, edit } => post(&FromWorker::Edited { of, result: apply_edit(shared, of, edit) }),
        ToWorker::Choose(choice) => {
            shared.borrow_mut().backend.choice = choice;
            post_backend(shared);
            warm_gpu(shared);
        }
        ToWorker::RetryGpu => retry_gpu(shared),
        ToWorker::Generate { run, model, prompt, settings } => {
            generate_run(shared, run, model, prompt, settings)
        }
        ToWorker::Stop { run } => {
            if let Some(stop) = shared.borrow().runs.get(&run) {
                stop.set(true);
            }
        }
        ToWorker::Analyze { req, model, task } => analyze(shared, req, model, task),
        ToWorker::Cancel { req } => {
            shared.borrow_mut().cancelled.insert(req);
        }
        ToWorker::Tune { tune, of, text, options } => tune_run(shared, tune, of, text, options),
        ToWorker::StopTune { tune } => {
            if let Some(stop) = shared.borrow().tunes.get(&tune) {
                stop.set(true);
            }
        }
        ToWorker::Ping => post(&FromWorker::Pong),
    }
}

/// What the page knows of the held model `held`.
fn meta(state: &State, held: &Held) -> ModelMeta {
    let e = &held.engine;
    ModelMeta {
        id: held.id,
        info: e.info().clone(),
        trained: e.trained_specs().to_vec(),
        current: e.current_specs().to_vec(),
        edit: if state.current.as_ref().is_some_and(|c| c.id == held.id) {
            state.edit.clone()
        } else {
            BiasEdit::default()
        },
    }
}

/// `engine` becomes the page's model (its predecessors and their comparison checkpoint are freed).
fn set_loaded(shared: &Shared, engine: Engine) -> ModelMeta {
    let meta = {
        let mut s = shared.borrow_mut();
        let held = Held { id: s.next_id, engine: Rc::new(engine) };
        s.next_id += 1;
        s.trained = Some(held.clone());
        s.current = Some(held.clone());
        s.previous = None;
        s.edit = BiasEdit::default();
        s.aux.clear();
        s.aux_wanted.clear();
        s.backend.new_model();
        meta(&s, &held)
    };
    post_backend(shared);
    warm_gpu(shared);
    post(&FromWorker::Memory { bytes: memory_bytes() });
    meta
}

fn load(shared: &Shared, seq: u32, name: String) {
    shared.borrow_mut().latest_seq = seq;
    let shared = shared.clone();
    spawn_local(async move {
        let alive = || shared.borrow().latest_seq == seq;
        let progress = |status, fraction| post(&FromWorker::Progress { seq, status, fraction });
        let result = match loader::fetch_engine(&name, progress, alive).await {
            Ok(_) if !alive() => return,
            Ok((engine, report)) => Ok((set_loaded(&shared, engine), report)),
            Err(e) => Err(e),
        };
        post(&FromWorker::Loaded { seq, result });
    });
}

fn open_files(shared: &Shared, seq: u32, files: Vec<(String, File)>) {
    shared.borrow_mut().latest_seq = seq;
    let shared = shared.clone();
    spawn_local(async move {
        let alive = || shared.borrow().latest_seq == seq;
        let progress = |status, fraction| post(&FromWorker::Progress { seq, status, fraction });
        let result = match local::open_model(files, progress, alive).await {
            Ok(_) if !alive() => return,
            Ok(local::Opened { engine, name, need }) => {
                let what = engine.info().architecture.clone().unwrap_or_else(|| "attnlab".to_string());
                let line = format!(
                    "opened {name} ({what}, {} parameters; weights in memory {}, about {} needed while \
                     loading) from local files",
                    open::group(need.params),
                    need.resident_text(),
                    open::size(need.peak())
                );
                Ok(protocol::Opened { meta: set_loaded(&shared, engine), name, line })
            }
            Err(e) => Err(e),
        };
        post(&FromWorker::Opened { seq, result });
    });
}

/// Load index model `name` as `aux` of the trained page model `of` (while `of` is the page's model
/// and no newer load of that aux started).
fn load_aux(shared: &Shared, of: ModelId, aux: Aux, name: String) {
    shared.borrow_mut().aux_wanted.insert(aux, name.clone());
    let shared = shared.clone();
    spawn_local(async move {
        let alive = || {
            let s = shared.borrow();
            s.trained.as_ref().is_some_and(|t| t.id == of) && s.aux_wanted.get(&aux) == Some(&name)
        };
        let progress = |status, _| post(&FromWorker::AuxProgress { of, aux, name: name.clone(), status });
        let result = match loader::fetch_engine(&name, progress, alive).await {
            Ok(_) if !alive() => return,
            Ok((engine, _)) => {
                let mut s = shared.borrow_mut();
                let held = Held { id: s.next_id, engine: Rc::new(engine) };
                s.next_id += 1;
                s.aux.retain(|(a, _, _)| *a != aux);
                s.aux.push((aux, name.clone(), held.clone()));
                Ok(meta(&s, &held))
            }
            Err(e) => Err(e),
        };
        post(&FromWorker::AuxLoaded { of, aux, name, result });
    });
}

/// Apply `edit` to the trained page model `of`: a new current model, or why not (the last valid
/// one stays).
fn apply_edit(shared: &Shared, of: ModelId, edit: BiasEdit) -> Result<ModelMeta, String> {
    let mut s = shared.borrow_mut();
    let trained = s.trained.clone().filter(|t| t.id == of).ok_or("that model is no longer loaded")?;
    let held = if edit.is_identity() {
        trained
    } else {
        let held = Held { id: s.next_id, engine: Rc::new(trained.engine.edited(&edit)?) };
        s.next_id += 1;
        held
    };
    s.previous = s.current.replace(held.clone());
    s.edit = edit;
    Ok(meta(&s, &held))
}

/// The held engine with id `id`.
fn engine_of(s: &State, id: ModelId) -> Option<Rc<Engine>> {
    [&s.current, &s.trained, &s.previous]
        .into_iter()
        .flatten()
        .chain(s.aux.iter().map(|(_, _, h)| h))
        .find(|h| h.id == id)
        .map(|h| h.engine.clone())
}

fn post_backend(shared: &Shared) {
    let s = shared.borrow();
    post(&FromWorker::Backend { state: s.backend.clone(), probes: s.probes });
}

fn probe(shared: &Shared) {
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

fn retry_gpu(shared: &Shared) {
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
fn gpu_failed(shared: &Shared, model: Option<ModelId>, failure: GpuFailure) {
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
fn warm_gpu(shared: &Shared) {
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

fn generate_run(
    shared: &Shared,
    run: u32,
    model: ModelId,
    prompt: String,
    settings: crate::engine::GenSettings,
) {
    let events: generate::Events = Rc::new(move |event| post(&FromWorker::Run { run, event }));
    let (engine, gpu, stop) = {
        let mut s = shared.borrow_mut();
        let Some(engine) = engine_of(&s, model) else {
            return events(RunEvent::Finished(Err("that model is no longer loaded".to_string())));
        };
        let gpu = active_gpu(&s);
        let stop = Rc::new(Cell::new(false));
        s.runs.insert(run, stop.clone());
        (engine, gpu, stop)
    };
    events(RunEvent::Backend(if gpu.is_some() { Active::Gpu } else { Active::Cpu }));
    let job = Job { engine, prompt, settings, stop, events };
    let on_gpu_failure: Rc<dyn Fn(GpuFailure)> = {
        let shared = shared.clone();
        Rc::new(move |failure| gpu_failed(&shared, None, failure))
    };
    let shared = shared.clone();
    spawn_local(async move {
        generate::generate(job, gpu, on_gpu_failure).await;
        shared.borrow_mut().runs.remove(&run);
        post(&FromWorker::Memory { bytes: memory_bytes() });
    });
}

/// While a generation runs, analyses wait: one of them runs to its end once started (a trace is
/// one call into the model), which would delay the run's tokens and its Stop.
const ANALYSIS_WAIT_MS: u32 = 20;

/// Wait until no generation runs (or `req` is cancelled).
async fn after_runs(shared: &Shared, req: u32) {
    while !shared.borrow().runs.is_empty() && !shared.borrow().cancelled.contains(&req) {
        gloo_timers::future::TimeoutFuture::new(ANALYSIS_WAIT_MS).await;
    }
}

fn analyze(shared: &Shared, req: u32, model: ModelId, task: Task) {
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
fn active_gpu(s: &State) -> Option<(Rc<GpuContext>, GpuSlot)> {
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
) -> Option<Result<Vec<attnlab_core::analysis::PplPoint>, String>> {
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

/// Fine-tune `tune`: train the trained page model `of` on `text` a step at a time (yielding between
/// steps, so Stop and the page's other requests are heard), then make the model after the last
/// finished step the page's model, unless another model became the page's model meanwhile.
fn tune_run(shared: &Shared, tune: u32, of: ModelId, text: String, options: TuneOptions) {
    let events = move |event| post(&FromWorker::Tune { tune, event });
    let (engine, stop, gpu) = {
        let mut s = shared.borrow_mut();
        let Some(trained) = s.trained.clone().filter(|t| t.id == of) else {
            return events(TuneEvent::Finished(Err("that model is no longer loaded".to_string())));
        };
        let stop = Rc::new(Cell::new(false));
        s.tunes.insert(tune, stop.clone());
        // Training runs where generation does (the backend choice, or Auto's measurement), named
        // by the adapter the page's probe found.
        let gpu = match (&s.backend.probe, s.backend.active()) {
            (Probe::Ready { adapter }, Active::Gpu) => Some(adapter.clone()),
            _ => None,
        };
        (trained.engine, stop, gpu)
    };
    let shared = shared.clone();
    spawn_local(async move {
        let result = match tune_steps(&engine, &text, &options, gpu, &stop, &events).await {
            Ok(_) if shared.borrow().trained.as_ref().map(|t| t.id) != Some(of) => {
                Err("another model was loaded meanwhile; the fine-tuned model was dropped".to_string())
            }
            Ok((tuned, summary)) => Ok(Box::new(Tuned { meta: set_loaded(&shared, tuned), summary })),
            Err(e) => Err(e),
        };
        shared.borrow_mut().tunes.remove(&tune);
        events(TuneEvent::Finished(result));
    });
}

/// The steps of a fine-tune (in the fine-tune module, `crate::tuner`; on WebGPU with `gpu`, else or
/// when WebGPU refuses the model, on the CPU), each reported; returns the engine of the model after
/// the last finished step. A failing step ends training with the steps before it kept.
async fn tune_steps(
    engine: &Engine,
    text: &str,
    options: &TuneOptions,
    gpu: Option<String>,
    stop: &Cell<bool>,
    events: &dyn Fn(TuneEvent),
) -> Result<(Engine, TuneSummary), String> {
    let tokens = engine.encode(text)?;
    let (config, weights) = engine.model_files()?;
    let tuner = match gpu {
        Some(adapter) => match RemoteTuner::new(&config, &weights, &tokens, options, true).await {
            Ok(mut t) => {
                t.device = format!("WebGPU · {adapter}");
                t
            }
            Err(why) => {
                let mut t = RemoteTuner::new(&config, &weights, &tokens, options, false).await?;
                t.device = format!("the CPU (wasm; WebGPU: {why})");
                t
            }
        },
        None => RemoteTuner::new(&config, &weights, &tokens, options, false).await?,
    };
    let loss_before = tuner.text_loss().await?;
    let (seq_len, params) = (tuner.seq_len()?, engine.info().params);
    let steps = options.steps;
    let device = tuner.device.clone();
    events(TuneEvent::Started(TuneSetup {
        device,
        tokens: tokens.len(),
        seq_len,
        steps,
        params,
        loss_before,
    }));
    yield_now().await;
    let (mut note, mut busy_ms, mut done) = (None, 0.0, 0);
    while !tuner.finished()? && !stop.get() {
        let t0 = now_ms();
        match tuner.step().await {
            Ok(step) => {
                let ms = now_ms() - t0;
                (busy_ms, done) = (busy_ms + ms, step.step);
                events(TuneEvent::Step { step, ms });
            }
            Err(e) => {
                note = Some(e);
                break;
            }
        }
        yield_now().await;
    }
    let loss_after = tuner.text_loss().await?;
    let tuned = engine.with_weights(&tuner.weights().await?)?;
    let tokens_per_s = (done * options.batch * seq_len) as f64 * 1000.0 / busy_ms.max(1e-3);
    let summary =
        TuneSummary { steps: done, stopped: done < steps, note, loss_before, loss_after, tokens_per_s };
    Ok((tuned, summary))
}
