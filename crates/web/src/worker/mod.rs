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
//!
//! Here: the held models, the message dispatch, loading and generation. Beside it: `choice` (the
//! WebGPU probe and the backend choice, with Auto's speed test), `analysis` (the lab's views'
//! requests, on WebGPU or the CPU) and `tune` (the fine-tune panel's training).

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use attnlab_gpu::GpuContext;
use js_sys::{Array, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::spawn_local;
use web_sys::{DedicatedWorkerGlobalScope, File, MessageEvent};

use crate::backend::{Active, BackendState, Choice, GpuFailure};
use crate::engine::Engine;
use crate::generate::{self, Job};
use crate::gpu::GpuSlot;
use crate::lab::BiasEdit;
use crate::loader;
use crate::local;
use crate::open;
use crate::protocol::{self, Aux, FromWorker, ModelId, ModelMeta, RunEvent, ToWorker};

mod analysis;
mod choice;
mod tune;

use analysis::{active_gpu, analyze};
use choice::{gpu_failed, post_backend, probe, retry_gpu, warm_gpu};
use tune::tune_run;

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
