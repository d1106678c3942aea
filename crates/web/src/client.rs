//! The page's side of the model's worker (`worker/`): it starts the worker, queues messages until
//! the worker says Ready, and routes what comes back: a run's events to its generator, a
//! fine-tune's to the training panel, an analysis'
//! answer to the view that asked (as a future), the loads of the models beside the page's model
//! (the initial checkpoint, compare mode's model B) to the lab, and the
//! rest to the root component. Tokens are handed on once per animation frame (the latest text of
//! each run), so a fast decode costs one render per frame, not one per token.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use attnlab_core::analysis::PplPoint;
use js_sys::{Array, Uint8Array};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{ErrorEvent, File, MessageEvent, Worker, WorkerOptions, WorkerType};
use yew::Callback;

use crate::protocol::{self, Answer, FromWorker, ModelId, RunEvent, ToWorker, TuneEvent};

/// The view channel of model B's perplexity sweeps (compare mode).
pub const SWEEP_CHANNEL_B: &str = "ppl-b";

/// The view channel of perplexity sweeps (a newer sweep, or the view going away, cancels one).
pub const SWEEP_CHANNEL: &str = "ppl";

/// Where the page's worker script is: set by the page's module script (`attnlab-site` writes both).
const WORKER_URL_GLOBAL: &str = "__attnlabWorker";

/// What the root component hears: every message no view subscribed to, and the worker's failure.
pub enum ClientEvent {
    Message(FromWorker),
    /// The worker could not start, or stopped too often to be restarted.
    Failed(String),
    /// The worker stopped (a script error, a crash) and a new one was started: what it held (the
    /// models) is gone and must be loaded again; the page's own state (the text) is untouched.
    Restarted(String),
}

/// A worker that answers nothing for this long after a ping is taken for dead and replaced: a worker
/// the browser stops (for memory, say) may fire no error event. Long work yields to the worker's
/// event loop (prefill chunks, GPU awaits), so a living worker answers within a chunk.
const SILENT_MS: f64 = 30_000.0;
/// How often the watchdog looks, and how long the worker may be quiet before it is pinged.
const WATCH_MS: u32 = 2_000;

/// How long a worker holding a model of `params` parameters may leave a ping unanswered:
/// [`SILENT_MS`] plus its longest step that does not yield, a CPU trace of 512 tokens (2 FLOP per
/// parameter and token) at a slow 1 GFLOP/s: 31 s for the shipped models, ~170 s at 135M.
fn silence_limit_ms(params: usize) -> f64 {
    SILENT_MS + 512.0 * 2.0 * params as f64 / 1e9 * 1000.0
}

/// Crashes within [`RESTART_WINDOW_MS`] after which the page stops starting new workers.
const MAX_RESTARTS: usize = 3;
const RESTART_WINDOW_MS: f64 = 60_000.0;

type AnswerSlot = Box<dyn FnOnce(Result<Answer, String>)>;
/// A message's bytes and the files that go with it (with their paths in the picked folder).
type Outgoing = (Vec<u8>, Vec<(String, File)>);
/// Where a sweep's progress goes: the fraction done, the lengths finished, and whether it runs on
/// WebGPU.
pub type SweepProgress = Callback<(f64, Vec<PplPoint>, bool)>;

struct Inner {
    ready: Cell<bool>,
    /// Messages sent before the worker was ready.
    queue: RefCell<Vec<Outgoing>>,
    next_req: Cell<u32>,
    answers: RefCell<HashMap<u32, AnswerSlot>>,
    sweeps: RefCell<HashMap<u32, SweepProgress>>,
    runs: RefCell<HashMap<u32, Callback<RunEvent>>>,
    /// Where each fine-tune's events go.
    tunes: RefCell<HashMap<u32, Callback<TuneEvent>>>,
    /// The latest token of each run, waiting for the next animation frame.
    tokens: RefCell<HashMap<u32, RunEvent>>,
    frame_pending: Cell<bool>,
    /// The latest request per view channel: a new one cancels the one before.
    channels: RefCell<HashMap<&'static str, u32>>,
    /// Where the loads of the models beside page model `of` go (`ToWorker::LoadAux`).
    aux: RefCell<HashMap<ModelId, Callback<FromWorker>>>,
    /// When the worker last crashed (page clock, ms), the latest few.
    crashes: RefCell<Vec<f64>>,
    /// When the worker was last heard from, and when the unanswered ping (if any) was sent.
    last_heard: Cell<f64>,
    ping_sent: Cell<Option<f64>>,
    /// How long a ping may stay unanswered ([`silence_limit_ms`] of the largest model loaded).
    silence_ms: Cell<f64>,
    root: Callback<ClientEvent>,
}

/// The page's handle on the worker; clones share it.
#[derive(Clone)]
pub struct WorkerClient(Rc<Inner>);

impl PartialEq for WorkerClient {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl WorkerClient {
    /// Start the worker; `root` hears what no view subscribed to. A worker that cannot start is
    /// reported to `root` (the page then says why nothing loads).
    pub fn start(root: Callback<ClientEvent>) -> WorkerClient {
        let client = WorkerClient(Rc::new(Inner {
            ready: Cell::new(false),
            queue: RefCell::new(Vec::new()),
            next_req: Cell::new(0),
            answers: RefCell::new(HashMap::new()),
            sweeps: RefCell::new(HashMap::new()),
            runs: RefCell::new(HashMap::new()),
            tunes: RefCell::new(HashMap::new()),
            tokens: RefCell::new(HashMap::new()),
            frame_pending: Cell::new(false),
            channels: RefCell::new(HashMap::new()),
            aux: RefCell::new(HashMap::new()),
            crashes: RefCell::new(Vec::new()),
            last_heard: Cell::new(js_sys::Date::now()),
            ping_sent: Cell::new(None),
            silence_ms: Cell::new(SILENT_MS),
            root: root.clone(),
        }));
        if let Err(e) = spawn_worker(&client) {
            root.emit(ClientEvent::Failed(e));
        }
        let weak = Rc::downgrade(&client.0);
        // The watchdog lives as long as the page.
        gloo_timers::callback::Interval::new(WATCH_MS, move || {
            if let Some(inner) = weak.upgrade() {
                WorkerClient(inner).watch();
            }
        })
        .forget();
        client
    }

    /// The watchdog's look: ping a started worker that has been quiet for [`WATCH_MS`]; replace one
    /// that left a ping unanswered for its silence limit ([`silence_limit_ms`]).
    fn watch(&self) {
        let inner = &self.0;
        if !inner.ready.get() {
            return;
        }
        let now = js_sys::Date::now();
        match inner.ping_sent.get() {
            Some(sent) if now - sent >= inner.silence_ms.get() => self.restart(format!(
                "it answered nothing for {:.0} s; the browser may have stopped it, e.g. for memory",
                (now - sent) / 1000.0
            )),
            None if now - inner.last_heard.get() >= f64::from(WATCH_MS) => {
                inner.ping_sent.set(Some(now));
                self.send(&ToWorker::Ping);
            }
            _ => {}
        }
    }

    /// Send `msg` (with `files` for an open).
    pub fn send(&self, msg: &ToWorker) {
        self.send_with_files(msg, Vec::new());
    }

    pub fn send_with_files(&self, msg: &ToWorker, files: Vec<(String, File)>) {
        let bytes = match protocol::encode(msg) {
            Ok(b) => b,
            Err(e) => return self.0.root.emit(ClientEvent::Failed(e.to_string())),
        };
        if self.0.ready.get() {
            post(&bytes, &files);
        } else {
            self.0.queue.borrow_mut().push((bytes, files));
        }
    }

    /// Start run `run`; its events go to `events` (tokens at most once per animation frame).
    pub fn generate(&self, msg: ToWorker, run: u32, events: Callback<RunEvent>) {
        self.0.runs.borrow_mut().insert(run, events);
        self.send(&msg);
    }

    /// Start fine-tune `tune` (a [`ToWorker::Tune`]); its events go to `events`.
    pub fn tune(&self, msg: ToWorker, tune: u32, events: Callback<TuneEvent>) {
        self.0.tunes.borrow_mut().insert(tune, events);
        self.send(&msg);
    }

    /// Ask the worker for `task` on `model`, superseding the last request on `channel` (a view's
    /// name): that one is cancelled in the worker and answers "superseded" here.
    pub async fn analyze(
        &self,
        channel: &'static str,
        model: ModelId,
        task: protocol::Task,
    ) -> Result<Answer, String> {
        let req = self.new_req();
        self.ask(channel, req, model, task).await
    }

    fn new_req(&self) -> u32 {
        let req = self.0.next_req.get().wrapping_add(1);
        self.0.next_req.set(req);
        req
    }

    async fn ask(
        &self,
        channel: &'static str,
        req: u32,
        model: ModelId,
        task: protocol::Task,
    ) -> Result<Answer, String> {
        if let Some(old) = self.0.channels.borrow_mut().insert(channel, req) {
            self.cancel(old);
        }
        let result: Rc<RefCell<Option<Result<Answer, String>>>> = Rc::new(RefCell::new(None));
        let promise = {
            let result = result.clone();
            let mut answers = self.0.answers.borrow_mut();
            js_sys::Promise::new(&mut |resolve, _| {
                let result = result.clone();
                answers.insert(
                    req,
                    Box::new(move |r| {
                        *result.borrow_mut() = Some(r);
                        let _ = resolve.call0(&JsValue::UNDEFINED);
                    }),
                );
            })
        };
        self.send(&ToWorker::Analyze { req, model, task });
        let _ = JsFuture::from(promise).await;
        let answer = result.borrow_mut().take();
        answer.unwrap_or_else(|| Err("no answer from the model's worker".to_string()))
    }

    /// [`WorkerClient::analyze`] for a perplexity sweep, with its progress going to `progress`.
    pub async fn sweep(
        &self,
        channel: &'static str,
        model: ModelId,
        text: String,
        progress: SweepProgress,
    ) -> Result<Vec<PplPoint>, String> {
        let req = self.new_req();
        self.0.sweeps.borrow_mut().insert(req, progress);
        let answer = self.ask(channel, req, model, protocol::Task::PplSweep { text }).await;
        self.0.sweeps.borrow_mut().remove(&req);
        match answer? {
            Answer::Sweep(points) => Ok(points),
            _ => Err("the worker answered a sweep with something else".to_string()),
        }
    }

    /// Cancel request `req`: the worker drops it, its future answers "superseded".
    fn cancel(&self, req: u32) {
        self.send(&ToWorker::Cancel { req });
        if let Some(answer) = self.0.answers.borrow_mut().remove(&req) {
            answer(Err("superseded".to_string()));
        }
    }

    /// Cancel the latest request on `channel` (its view went away).
    pub fn cancel_channel(&self, channel: &'static str) {
        if let Some(req) = self.0.channels.borrow_mut().remove(channel) {
            self.cancel(req);
        }
    }

    /// Route the load messages of the models beside page model `of` (initial checkpoint, model B)
    /// to `to`.
    pub fn on_aux(&self, of: ModelId, to: Callback<FromWorker>) {
        self.0.aux.borrow_mut().insert(of, to);
    }

    /// The worker stopped (`what`): every request in flight ends with an error naming it (runs and
    /// fine-tunes finish, keeping what they showed), and a new worker starts, unless it crashed
    /// [`MAX_RESTARTS`] times within a minute (then the page asks for a reload).
    fn restart(&self, what: String) {
        let inner = &self.0;
        WORKER.with(|w| {
            if let Some(old) = w.borrow_mut().take() {
                old.terminate();
            }
        });
        inner.ready.set(false);
        inner.ping_sent.set(None);
        inner.queue.borrow_mut().clear();
        inner.channels.borrow_mut().clear();
        inner.sweeps.borrow_mut().clear();
        self.flush_tokens(None);
        let why = format!("the model's worker stopped ({what})");
        for (_, answer) in inner.answers.borrow_mut().drain() {
            answer(Err(why.clone()));
        }
        let runs: Vec<_> = inner.runs.borrow_mut().drain().map(|(_, events)| events).collect();
        for events in runs {
            events.emit(RunEvent::Finished(Err(why.clone())));
        }
        let tunes: Vec<_> = inner.tunes.borrow_mut().drain().map(|(_, events)| events).collect();
        for events in tunes {
            events.emit(TuneEvent::Finished(Err(why.clone())));
        }
        inner.aux.borrow_mut().clear();
        let now = js_sys::Date::now();
        let recent = {
            let mut crashes = inner.crashes.borrow_mut();
            crashes.retain(|&t| now - t < RESTART_WINDOW_MS);
            crashes.push(now);
            crashes.len()
        };
        if recent > MAX_RESTARTS {
            return inner.root.emit(ClientEvent::Failed(format!(
                "{why}, {recent} times within a minute; reload the page"
            )));
        }
        match spawn_worker(self) {
            Ok(()) => inner.root.emit(ClientEvent::Restarted(why)),
            Err(e) => inner.root.emit(ClientEvent::Failed(format!("{why}; a new one could not start: {e}"))),
        }
    }

    fn receive(&self, msg: FromWorker) {
        let inner = &self.0;
        inner.last_heard.set(js_sys::Date::now());
        inner.ping_sent.set(None);
        let params = match &msg {
            FromWorker::Loaded { result: Ok((meta, _)), .. }
            | FromWorker::AuxLoaded { result: Ok(meta), .. } => Some(meta.info.params),
            FromWorker::Opened { result: Ok(opened), .. } => Some(opened.meta.info.params),
            _ => None,
        };
        if let Some(params) = params {
            inner.silence_ms.set(inner.silence_ms.get().max(silence_limit_ms(params)));
        }
        match msg {
            FromWorker::Pong => {}
            FromWorker::Ready => {
                inner.ready.set(true);
                for (bytes, files) in inner.queue.borrow_mut().drain(..) {
                    post(&bytes, &files);
                }
            }
            FromWorker::Run { run, event: event @ RunEvent::Token { .. } } => {
                inner.tokens.borrow_mut().insert(run, event);
                self.request_frame();
            }
            FromWorker::Run { run, event } => {
                // What came before the event is shown first (the last tokens before Finished).
                self.flush_tokens(Some(run));
                let events = inner.runs.borrow().get(&run).cloned();
                if let Some(events) = events {
                    if matches!(event, RunEvent::Finished(_)) {
                        inner.runs.borrow_mut().remove(&run);
                    }
                    events.emit(event);
                }
            }
            FromWorker::Tune { tune, event } => {
                let events = if matches!(event, TuneEvent::Finished(_)) {
                    inner.tunes.borrow_mut().remove(&tune)
                } else {
                    inner.tunes.borrow().get(&tune).cloned()
                };
                if let Some(events) = events {
                    events.emit(event);
                }
            }
            FromWorker::Answer { req, result } => {
                let answer = inner.answers.borrow_mut().remove(&req);
                if let Some(answer) = answer {
                    answer(result);
                }
            }
            FromWorker::Sweep { req, fraction, points, on_gpu } => {
                let to = inner.sweeps.borrow().get(&req).cloned();
                if let Some(to) = to {
                    to.emit((fraction, points, on_gpu));
                }
            }
            msg @ (FromWorker::AuxProgress { of, .. } | FromWorker::AuxLoaded { of, .. }) => {
                let to = inner.aux.borrow().get(&of).cloned();
                if let Some(to) = to {
                    to.emit(msg);
                }
            }
            other => inner.root.emit(ClientEvent::Message(other)),
        }
    }

    fn request_frame(&self) {
        if self.0.frame_pending.replace(true) {
            return;
        }
        let this = self.clone();
        let on_frame = Closure::once_into_js(move || {
            this.0.frame_pending.set(false);
            this.flush_tokens(None);
        });
        let requested =
            web_sys::window().and_then(|w| w.request_animation_frame(on_frame.unchecked_ref()).ok());
        if requested.is_none() {
            self.0.frame_pending.set(false);
            self.flush_tokens(None);
        }
    }

    /// Hand on the waiting tokens (of `run`, or of every run).
    fn flush_tokens(&self, run: Option<u32>) {
        let waiting: Vec<(u32, RunEvent)> = {
            let mut tokens = self.0.tokens.borrow_mut();
            match run {
                Some(r) => tokens.remove(&r).map(|e| vec![(r, e)]).unwrap_or_default(),
                None => tokens.drain().collect(),
            }
        };
        for (run, event) in waiting {
            let events = self.0.runs.borrow().get(&run).cloned();
            if let Some(events) = events {
                events.emit(event);
            }
        }
    }
}

thread_local! {
    /// The page's one worker.
    static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
}

/// Post encoded bytes (transferred) and files to the worker.
fn post(bytes: &[u8], files: &[(String, File)]) {
    WORKER.with(|w| {
        let Some(worker) = &*w.borrow() else { return };
        let array = Uint8Array::from(bytes);
        let data = js_sys::Object::new();
        let set = |k: &str, v: &JsValue| js_sys::Reflect::set(&data, &k.into(), v);
        let _ = set("bytes", &array);
        if !files.is_empty() {
            let _ = set("files", &files.iter().map(|(_, f)| JsValue::from(f)).collect::<Array>());
            let _ = set("paths", &files.iter().map(|(p, _)| JsValue::from_str(p)).collect::<Array>());
        }
        if let Err(e) = worker.post_message_with_transfer(&data, &Array::of1(&array.buffer())) {
            web_sys::console::error_1(&e);
        }
    });
}

/// Start the worker script and wire its messages and errors to `client`.
fn spawn_worker(client: &WorkerClient) -> Result<(), String> {
    let url = crate::global::property(WORKER_URL_GLOBAL)
        .and_then(|v| v.as_string())
        .ok_or("the page does not name its worker script (built without attnlab-site?)")?;
    let options = WorkerOptions::new();
    options.set_type(WorkerType::Module);
    let worker = Worker::new_with_options(&url, &options)
        .map_err(|e| format!("the model's worker could not start: {}", crate::fetch::js_error_text(&e)))?;
    let weak = Rc::downgrade(&client.0);
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |e: MessageEvent| {
        let Some(inner) = weak.upgrade() else { return };
        let client = WorkerClient(inner);
        let bytes = e.data().dyn_into::<Uint8Array>().map(|a| a.to_vec()).unwrap_or_default();
        match protocol::decode::<FromWorker>(&bytes) {
            Ok(msg) => client.receive(msg),
            Err(e) => client.0.root.emit(ClientEvent::Failed(e.to_string())),
        }
    });
    worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    on_message.forget();
    let weak = Rc::downgrade(&client.0);
    let on_error = Closure::<dyn FnMut(ErrorEvent)>::new(move |e: ErrorEvent| {
        e.prevent_default();
        let Some(inner) = weak.upgrade() else { return };
        let what = if e.message().is_empty() { "a script error".to_string() } else { e.message() };
        WorkerClient(inner).restart(what);
    });
    worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    on_error.forget();
    WORKER.with(|w| *w.borrow_mut() = Some(worker));
    Ok(())
}
