//! The page's root: it reads the models index, chooses and loads the model (each load supersedes the
//! one before), owns the [`ModelHost`] (model, GPU, backend) and the page-wide lines (status, error
//! box), and lays out the panels. Panels report through callbacks; what crosses panels passes through
//! here: the status and errors of a run, the trace text, bias edits, and the backend controls.
//!
//! Switching models stops a running generation first (the generator sees the new load; its output
//! stays, labelled with the model that wrote it) and empties the lab until the new model is ready.
//! The model itself lives in the worker (`worker/`); its messages arrive here through the
//! [`WorkerClient`] unless a view subscribed to them.

use std::rc::Rc;

use attnlab_core::catalog::ModelIndex;
use wasm_bindgen_futures::spawn_local;
use yew::prelude::*;

use crate::backend::Choice;
use crate::client::{ClientEvent, WorkerClient};
use crate::form::DEFAULT_PROMPT;
use crate::host::{HostMsg, ModelHost};
use crate::lab::BiasEdit;
use crate::loader;
use crate::local;
use crate::models;
use crate::panels::{
    files_of, BackendBadge, GenReport, Generator, LabPanel, ModelPicker, OpenModel, OpenState, TunePanel,
};
use crate::protocol::{FromWorker, LoadReport, ModelMeta, Opened, ToWorker, Tuned};
use crate::share::{self, Share};
use crate::url_state::UrlState;

/// Appended to the name of a model fine-tuned in the page.
const TUNED_SUFFIX: &str = "+tuned";

/// Where the current model stands.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Loading,
    Ready,
    LoadFailed,
}

pub struct App {
    phase: Phase,
    /// The models index; `None` while it loads, when the server has none, or when it is corrupt.
    index: Option<Rc<ModelIndex>>,
    /// The model shown or being loaded.
    model: Option<String>,
    status: String,
    /// Load progress in [0, 1]; `None` while the total size is unknown.
    progress: Option<f64>,
    /// Where the current model's files came from (browser cache or network), with notices.
    load_report: Option<Rc<LoadReport>>,
    error: Option<String>,
    /// The model, the GPU and the backend choice.
    host: ModelHost,
    /// Text of the trace views (prompt + output of the last run), fixed while a run streams.
    trace_text: Rc<String>,
    /// Whether the generator is running.
    running: bool,
    /// The worker seq of the load in flight, and of the open in flight ("Open model…"; a newer
    /// open or load supersedes it), with where the latest open stands.
    load_seq: Option<u32>,
    open_seq: Option<u32>,
    open: OpenState,
    links: Links,
    /// The page's state in its address.
    share: Share,
    /// What the opened link asked for that the page could not use.
    url_warnings: Vec<String>,
    /// Where "copy link" stands (`Ok`: the link copied).
    copy_link: Option<Result<String, String>>,
    /// The link's bias edit and output, applied to the first model that loads.
    restore: Option<Restore>,
    /// Tokens to regenerate once the link's bias edit is applied.
    pending_gen: Option<usize>,
    /// Tokens the generator regenerates now (the link's output), until the run starts.
    autorun: Option<usize>,
    /// The index model a new worker loads again after a crash; `None` for a model opened from
    /// local files or fine-tuned in the page (it lived in the worker only).
    reloadable: Option<String>,
    /// What the page did after the worker stopped (shown until dismissed).
    worker_notice: Option<String>,
}

/// What a link restores once its model is ready.
struct Restore {
    edit: BiasEdit,
    gen: Option<usize>,
}

/// The panels' callbacks, made once so that unchanged props compare equal.
struct Links {
    pick: Callback<String>,
    generator: Callback<GenReport>,
    edit: Callback<BiasEdit>,
    choose: Callback<Choice>,
    retry_gpu: Callback<()>,
    open_files: Callback<Vec<web_sys::File>>,
    tuned: Callback<Tuned>,
}

pub enum Msg {
    /// The models index: `Ok(None)` when the server has none.
    Index(Result<Option<ModelIndex>, String>),
    /// The picker chose a model.
    Pick(String),
    /// What the model's worker says (or that it failed).
    Client(ClientEvent),
    Host(HostMsg),
    Generator(GenReport),
    BiasEdited(BiasEdit),
    DismissError,
    /// Files picked or dropped for "Open model…".
    OpenFiles(Vec<web_sys::File>),
    /// "Train on this text" finished: its model is the worker's page model now.
    Tuned(Tuned),
    /// A dropped folder could not be read.
    OpenFailed(String),
    /// A parameter of the opened link that a view could not use.
    UrlWarning(String),
    DismissUrlWarnings,
    DismissWorkerNotice,
    CopyLink,
    LinkCopied(Result<String, String>),
}

impl App {
    /// Choose the model from the URL and the index (or show why none can be loaded).
    fn on_index(&mut self, result: Result<Option<ModelIndex>, String>) {
        let asked = self.share.get().model;
        let chosen = match result {
            Ok(index) => {
                self.index = index.map(Rc::new);
                let (name, stale) = models::choose_model(asked.as_deref(), self.index.as_deref());
                if let Some(why) = stale {
                    self.url_warnings.push(format!("model: {why}"));
                    self.share.update(|s| s.model = None);
                }
                Ok(name)
            }
            Err(e) => Err(format!("Could not read the models index: {e}")),
        };
        match chosen {
            Ok(name) => self.start_load(name),
            Err(e) => {
                self.phase = Phase::LoadFailed;
                self.status = "no model loaded".to_string();
                self.error = Some(e);
            }
        }
    }

    /// The picker chose `name`: keep it in the URL and load it (unless it is already shown).
    fn on_pick(&mut self, name: String) -> bool {
        let listed = self.index.as_ref().is_some_and(|i| i.get(&name).is_some());
        if !listed || (self.model.as_deref() == Some(name.as_str()) && self.phase != Phase::LoadFailed) {
            return false;
        }
        // Keep the choice across reloads and in shared links.
        let picked = name.clone();
        self.share.update(|s| s.model = Some(picked));
        self.error = None;
        self.start_load(name);
        true
    }

    /// Load `name` (superseding any load or open in flight); the prompt and settings are kept.
    fn start_load(&mut self, name: String) {
        self.open_seq = None;
        if matches!(self.open, OpenState::Busy(..)) {
            self.open = OpenState::Idle;
        }
        let (_, seq) = self.host.begin_load(&name);
        self.load_seq = Some(seq);
        self.phase = Phase::Loading;
        self.progress = None;
        self.status = format!("loading model {name}…");
        self.reloadable = Some(name.clone());
        self.model = Some(name);
        self.load_report = None;
    }

    fn on_loaded(&mut self, meta: ModelMeta, report: LoadReport) {
        self.load_report = Some(Rc::new(report));
        self.phase = Phase::Ready;
        self.progress = Some(1.0);
        self.status = match &self.model {
            Some(name) => format!("model {name} loaded: ready"),
            None => "model loaded: ready".to_string(),
        };
        self.host.set_loaded(meta);
        // The first model of the page gets the link's bias edit and regenerates its output (after
        // the edit, which the generation must use); a later model starts as trained.
        let Some(restore) = self.restore.take() else {
            self.share.update(|s| s.set_edit(&BiasEdit::default()));
            return;
        };
        let steerable = self.host.model().is_some_and(|m| m.has_steerable_layers());
        if restore.edit.is_identity() {
            self.autorun = restore.gen;
        } else if steerable && self.host.request_edit(restore.edit) {
            self.pending_gen = restore.gen;
        } else {
            self.share.checked(
                share::EDIT,
                Some("this model's biases are learned (or it has none), so the sliders do not apply; the model is shown as trained".into()),
            );
            self.share.update(|s| s.set_edit(&BiasEdit::default()));
            self.autorun = restore.gen;
        }
        self.share.checked(share::EDIT, None);
    }

    /// Open a model from the user's files; the current model stays in use until it is ready.
    fn start_open(&mut self, files: Vec<web_sys::File>) {
        if files.is_empty() {
            return;
        }
        self.error = None;
        self.open = OpenState::Busy(format!("opening {} files…", files.len()), None);
        let files = files.into_iter().map(|f| (local::relative_path(&f), f)).collect();
        self.open_seq = Some(self.host.begin_open(files));
    }

    /// Dropped files open as they are; a dropped folder is read through its entries first.
    fn on_drop(&self, ctx: &Context<Self>) -> Callback<DragEvent> {
        let link = ctx.link().clone();
        Callback::from(move |e: DragEvent| {
            e.prevent_default();
            let dt = e.data_transfer();
            let entries = dt.as_ref().map(local::drop_entries).unwrap_or_default();
            if entries.is_empty() {
                return link.send_message(Msg::OpenFiles(files_of(dt.and_then(|d| d.files()))));
            }
            link.send_future(async move {
                match local::entry_files(entries).await {
                    Ok(files) => Msg::OpenFiles(files),
                    Err(e) => Msg::OpenFailed(e),
                }
            });
        })
    }

    /// The opened model becomes the page's model, exactly as a loaded one does.
    fn on_opened(&mut self, opened: Opened) {
        let Opened { meta, name, line } = opened;
        self.open = OpenState::Done(line);
        self.host.adopt_open();
        self.load_seq = None;
        self.reloadable = None;
        self.model = Some(name.clone());
        self.error = None;
        self.on_loaded(meta, LoadReport::default());
        self.load_report = None;
        self.status = format!("model {name} opened from local files: ready");
    }

    /// The fine-tuned model becomes the page's model, as an opened one does; the link keeps the
    /// name of the model it was tuned from.
    fn on_tuned(&mut self, tuned: Tuned) {
        let base = self.model.clone().unwrap_or_default();
        let name = if base.ends_with(TUNED_SUFFIX) { base } else { format!("{base}{TUNED_SUFFIX}") };
        self.host.adopt_open();
        self.load_seq = None;
        self.reloadable = None;
        self.model = Some(name.clone());
        self.on_loaded(tuned.meta, LoadReport::default());
        self.load_report = None;
        self.status = format!("model {name}: fine-tuned on the text, ready");
    }

    /// A new worker replaced one that stopped (`why`): it loads the page's model again with the
    /// sliders' edit, or the index's default when the model lived in the old worker only (opened
    /// from local files, fine-tuned). The prompt and the text shown stay as they are.
    fn on_restarted(&mut self, why: String) {
        let edit = self.host.lab_model().map(|m| m.edit).unwrap_or_default();
        self.host.restarted();
        let (name, lost) = match self.reloadable.clone() {
            Some(name) => (name, String::new()),
            None => (
                models::choose_model(None, self.index.as_deref()).0,
                format!(
                    " {} lived in the stopped worker only: open or train it again.",
                    self.model.as_deref().unwrap_or("the model")
                ),
            ),
        };
        self.worker_notice =
            Some(format!("{why}. A new worker started and loads {name} again; your text is kept.{lost}"));
        self.restore = Some(Restore { edit, gen: None });
        self.running = false;
        self.start_load(name);
    }

    /// A message of the worker that no view took.
    fn on_worker(&mut self, msg: FromWorker) -> bool {
        let is = |slot: Option<u32>, seq: u32| slot == Some(seq) && self.host.is_latest(seq);
        match msg {
            FromWorker::Backend { state, probes } => self.host.set_backend(state, probes),
            FromWorker::Memory { bytes } => self.host.set_memory(bytes),
            FromWorker::Progress { seq, status, fraction } if is(self.load_seq, seq) => {
                self.status = status;
                self.progress = fraction;
            }
            FromWorker::Progress { seq, status, fraction } if is(self.open_seq, seq) => {
                self.open = OpenState::Busy(status, fraction);
            }
            FromWorker::Loaded { seq, result } if is(self.load_seq, seq) => {
                self.load_seq = None;
                match result {
                    Ok((meta, report)) => self.on_loaded(meta, report),
                    Err(e) => {
                        self.phase = Phase::LoadFailed;
                        self.status = "model failed to load".to_string();
                        let name = self.model.as_deref().unwrap_or("?");
                        self.error = Some(format!("Could not load the model {name}: {e}"));
                    }
                }
            }
            FromWorker::Opened { seq, result } if is(self.open_seq, seq) => {
                self.open_seq = None;
                match result {
                    Ok(opened) => self.on_opened(opened),
                    Err(e) => {
                        self.open = OpenState::Failed;
                        self.error = Some(format!("Could not open the model: {e}"));
                    }
                }
            }
            FromWorker::Edited { of, result } => {
                match self.host.edited(of, result) {
                    Ok(false) => return false,
                    Ok(true) => self.error = None,
                    // Keep the last valid model; the sliders show the refused value's neighbour.
                    Err(e) => self.error = Some(format!("That bias setting was not applied: {e}")),
                }
                if let Some(edit) = self.host.lab_model().map(|m| m.edit) {
                    self.share.update(|s| s.set_edit(&edit));
                }
                // The link's edit is in place: its output can be regenerated.
                if let Some(n) = self.pending_gen.take() {
                    self.autorun = Some(n);
                }
            }
            _ => return false,
        }
        true
    }

    fn on_generator(&mut self, report: GenReport) {
        match report {
            GenReport::Status(status) => self.status = status,
            GenReport::Error(error) => self.error = error,
            GenReport::Running(running) => {
                self.running = running;
                if running {
                    self.autorun = None;
                }
            }
            GenReport::Text(text) => self.trace_text = text,
        }
    }

    /// The initial checkpoint of the current model, when the index lists one.
    fn initial_of(&self) -> Option<AttrValue> {
        let (index, model) = (self.index.as_ref()?, self.model.as_ref()?);
        index.initial_of(model).map(|m| AttrValue::from(m.name.clone()))
    }
}

impl Component for App {
    type Message = Msg;
    type Properties = ();

    fn create(ctx: &Context<Self>) -> Self {
        let link = ctx.link().clone();
        spawn_local(async move { link.send_message(Msg::Index(loader::fetch_index().await)) });
        let search = web_sys::window().and_then(|w| w.location().search().ok()).unwrap_or_default();
        let (state, warnings) = UrlState::parse(&search);
        let link = ctx.link();
        let restore = Some(Restore { edit: state.edit().clamped(), gen: state.gen });
        // The trace views show the link's prompt until its output is regenerated.
        let text = state.prompt.clone().unwrap_or_else(|| DEFAULT_PROMPT.to_string());
        let choice = state.backend.unwrap_or_default();
        let share = Share::new(state, link.callback(Msg::UrlWarning));
        let on_host = link.callback(Msg::Host);
        let client = WorkerClient::start(link.callback(Msg::Client));
        if choice != Choice::Auto {
            client.send(&ToWorker::Choose(choice));
        }
        App {
            phase: Phase::Loading,
            index: None,
            model: None,
            status: "reading the models index…".to_string(),
            progress: None,
            load_report: None,
            error: None,
            host: ModelHost::new(client, choice),
            trace_text: Rc::new(text),
            running: false,
            load_seq: None,
            open_seq: None,
            open: OpenState::Idle,
            links: Links {
                pick: link.callback(Msg::Pick),
                generator: link.callback(Msg::Generator),
                edit: link.callback(Msg::BiasEdited),
                choose: on_host.reform(HostMsg::Choose),
                retry_gpu: on_host.reform(|()| HostMsg::RetryGpu),
                open_files: link.callback(Msg::OpenFiles),
                tuned: link.callback(Msg::Tuned),
            },
            share,
            url_warnings: warnings.iter().map(ToString::to_string).collect(),
            copy_link: None,
            restore,
            pending_gen: None,
            autorun: None,
            reloadable: None,
            worker_notice: None,
        }
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            Msg::Index(result) => self.on_index(result),
            Msg::Pick(name) => return self.on_pick(name),
            Msg::Client(ClientEvent::Message(msg)) => return self.on_worker(msg),
            Msg::Client(ClientEvent::Restarted(why)) => self.on_restarted(why),
            Msg::Client(ClientEvent::Failed(e)) => {
                if self.phase == Phase::Loading {
                    self.phase = Phase::LoadFailed;
                    self.status = "no model loaded".to_string();
                }
                self.error = Some(e);
            }
            Msg::Host(msg) => {
                if let HostMsg::Choose(choice) = msg {
                    self.share.update(|s| s.backend = (choice != Choice::Auto).then_some(choice));
                }
                self.host.control(msg);
            }
            Msg::Generator(report) => self.on_generator(report),
            Msg::BiasEdited(edit) => return self.host.request_edit(edit),
            Msg::DismissError => self.error = None,
            Msg::OpenFiles(files) => self.start_open(files),
            Msg::Tuned(tuned) => self.on_tuned(tuned),
            Msg::OpenFailed(e) => {
                self.open = OpenState::Failed;
                self.error = Some(format!("Could not open the model: {e}"));
            }
            Msg::UrlWarning(w) => self.url_warnings.push(w),
            Msg::DismissUrlWarnings => self.url_warnings.clear(),
            Msg::DismissWorkerNotice => self.worker_notice = None,
            Msg::CopyLink => {
                self.share.write();
                let href = web_sys::window().and_then(|w| w.location().href().ok()).unwrap_or_default();
                let link = ctx.link().clone();
                spawn_local(async move {
                    let result = crate::export::copy_text(&href).await.map(|()| href);
                    link.send_message(Msg::LinkCopied(result));
                });
            }
            Msg::LinkCopied(result) => self.copy_link = Some(result),
        }
        true
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let state = match (self.phase, self.running) {
            (Phase::Loading, _) => "loading",
            (Phase::LoadFailed, _) => "load-failed",
            (Phase::Ready, true) => "generating",
            (Phase::Ready, false) => "ready",
        };
        let error = match &self.error {
            Some(e) => html! {
                <div id="error" class="error" role="alert">
                    <span>{ e }</span>
                    <button class="dismiss" title="Dismiss" onclick={ctx.link().callback(|_| Msg::DismissError)}>
                        { "×" }
                    </button>
                </div>
            },
            None => html! {},
        };
        let model: AttrValue = self.model.clone().unwrap_or_default().into();
        let load = self.host.ticket();
        html! {
            <ContextProvider<Share> context={self.share.clone()}>
            <main class="app" data-state={state} ondragover={Callback::from(|e: DragEvent| e.prevent_default())}
                ondrop={self.on_drop(ctx)}>
                <header>
                    <h1>{ "attnlab" }</h1>
                    <BackendBadge state={self.host.backend().clone()} probes={self.host.probes()}
                        on_choose={self.links.choose.clone()} on_retry={self.links.retry_gpu.clone()} />
                    { self.view_copy_link(ctx) }
                </header>
                { self.view_url_warnings(ctx) }
                { self.view_worker_notice(ctx) }
                <p class="tagline">
                    { "Small language models with steerable attention variants, \
                       running entirely in your browser." }
                </p>
                { error }
                // Wide screens: the model and generator on the left, the lab views on the right.
                <div class="columns">
                    <div class="generator-column" id="generator-column">
                        <ModelPicker index={self.index.clone()} model={self.model.clone().map(AttrValue::from)}
                            phase={self.phase} progress={self.progress} status={self.status.clone()}
                            loaded={self.host.model()} memory={self.host.memory()} report={self.load_report.clone()} load={load.id()}
                            on_pick={self.links.pick.clone()} />
                        <OpenModel state={self.open.clone()} on_files={self.links.open_files.clone()} />
                        <Generator runner={self.host.runner()} model={model.clone()} load={load.clone()}
                            autorun={self.autorun} on_report={self.links.generator.clone()} />
                        <TunePanel model={self.host.lab_model().map(|m| m.trained)} generator_text={self.trace_text.clone()}
                            load={load.clone()} on_tuned={self.links.tuned.clone()} />
                    </div>
                    <div class="views-column" id="views-column">
                        <LabPanel model={self.host.lab_model()} name={model} initial={self.initial_of()} load={load}
                            text={self.trace_text.clone()} on_edit={self.links.edit.clone()}
                            index={self.index.clone()} on_pick={self.links.pick.clone()} />
                    </div>
                </div>
            </main>
            </ContextProvider<Share>>
        }
    }
}

impl App {
    /// "copy link": the address with everything needed to reproduce the view.
    fn view_copy_link(&self, ctx: &Context<Self>) -> Html {
        let (text, link) = match &self.copy_link {
            None => (String::new(), String::new()),
            Some(Ok(href)) => ("link copied".to_string(), href.clone()),
            Some(Err(e)) => (format!("could not copy ({e}): the address bar holds the link"), String::new()),
        };
        html! {
            <div class="share">
                <button id="copy-link" title="Copy a link to this view: model, prompt, settings and seed, sliders, tab and selection"
                    onclick={ctx.link().callback(|_| Msg::CopyLink)}>{ "copy link" }</button>
                <span id="copy-link-status" class="muted" data-link={link}>{ text }</span>
            </div>
        }
    }

    /// What happened to the model's worker, and what the page did about it.
    fn view_worker_notice(&self, ctx: &Context<Self>) -> Html {
        let Some(notice) = &self.worker_notice else { return html! {} };
        html! {
            <div id="worker-notice" class="notice url-warning" role="status">
                <span>{ notice }</span>
                <button class="dismiss" title="Dismiss" onclick={ctx.link().callback(|_| Msg::DismissWorkerNotice)}>
                    { "×" }
                </button>
            </div>
        }
    }

    /// What the opened link asked for that the page could not use, and what it shows instead.
    fn view_url_warnings(&self, ctx: &Context<Self>) -> Html {
        if self.url_warnings.is_empty() {
            return html! {};
        }
        html! {
            <div id="url-warning" class="notice url-warning" role="status">
                <div>
                    <b>{ "This link has parameters the page cannot use; it shows defaults for them:" }</b>
                    <ul>{ for self.url_warnings.iter().map(|w| html! { <li>{ w }</li> }) }</ul>
                </div>
                <button class="dismiss" title="Dismiss" onclick={ctx.link().callback(|_| Msg::DismissUrlWarnings)}>
                    { "×" }
                </button>
            </div>
        }
    }
}
