//! The page's root: it reads the models index, chooses and loads the model (each load supersedes the
//! one before), owns the [`ModelHost`] (model, GPU, backend) and the page-wide lines (status, error
//! box), and lays out the panels. Panels report through callbacks; what crosses panels passes through
//! here: the status and errors of a run, the trace text, bias edits, and the backend controls.
//!
//! Switching models stops a running generation first (the generator sees the new load; its output
//! stays, labelled with the model that wrote it) and empties the lab until the new model is ready.

use std::cell::Cell;
use std::rc::Rc;

use attnlab_core::catalog::ModelIndex;
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::spawn_local;
use yew::prelude::*;

use crate::backend;
use crate::engine::Engine;
use crate::form::DEFAULT_PROMPT;
use crate::host::{self, HostMsg, LoadTicket, ModelHost};
use crate::lab::BiasEdit;
use crate::loader::{self, LoadReport};
use crate::local::{self, Opened};
use crate::models;
use crate::open;
use crate::panels::{
    files_of, BackendBadge, GenReport, Generator, LabPanel, ModelPicker, OpenModel, OpenState,
};

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
    /// "Open model…": where the latest open stands, and its id (a newer open or load supersedes it).
    open: OpenState,
    open_seq: Rc<Cell<u32>>,
    links: Links,
}

/// The panels' callbacks, made once so that unchanged props compare equal.
struct Links {
    pick: Callback<String>,
    generator: Callback<GenReport>,
    edit: Callback<BiasEdit>,
    force_cpu: Callback<bool>,
    retry_gpu: Callback<()>,
    open_files: Callback<Vec<web_sys::File>>,
}

pub enum Msg {
    /// The models index: `Ok(None)` when the server has none.
    Index(Result<Option<ModelIndex>, String>),
    /// The picker chose a model.
    Pick(String),
    LoadProgress {
        load: LoadTicket,
        status: String,
        fraction: Option<f64>,
    },
    Loaded {
        load: LoadTicket,
        result: Result<(Rc<Engine>, LoadReport), String>,
    },
    Host(HostMsg),
    Generator(GenReport),
    BiasEdited(BiasEdit),
    DismissError,
    /// Files picked or dropped for "Open model…".
    OpenFiles(Vec<web_sys::File>),
    OpenProgress {
        open: u32,
        status: String,
        fraction: Option<f64>,
    },
    Opened {
        open: u32,
        result: Result<Box<Opened>, String>,
    },
}

impl App {
    /// Choose the model from the URL and the index (or show why none can be loaded).
    fn on_index(&mut self, ctx: &Context<Self>, result: Result<Option<ModelIndex>, String>) {
        let search = web_sys::window().and_then(|w| w.location().search().ok()).unwrap_or_default();
        let chosen = match result {
            Ok(index) => {
                self.index = index.map(Rc::new);
                models::choose_model(&search, self.index.as_deref())
            }
            Err(e) => Err(format!("Could not read the models index: {e}")),
        };
        match chosen {
            Ok(name) => self.start_load(ctx, name),
            Err(e) => {
                self.phase = Phase::LoadFailed;
                self.status = "no model loaded".to_string();
                self.error = Some(e);
            }
        }
    }

    /// The picker chose `name`: keep it in the URL and load it (unless it is already shown).
    fn on_pick(&mut self, ctx: &Context<Self>, name: String) -> bool {
        let listed = self.index.as_ref().is_some_and(|i| i.get(&name).is_some());
        if !listed || (self.model.as_deref() == Some(name.as_str()) && self.phase != Phase::LoadFailed) {
            return false;
        }
        // Keep the choice across reloads; only the query's model parameter changes.
        if let Some(w) = web_sys::window() {
            let search = w.location().search().unwrap_or_default();
            let url = models::query_with_model(&search, &name);
            if let Ok(history) = w.history() {
                let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&url));
            }
        }
        self.error = None;
        self.start_load(ctx, name);
        true
    }

    /// Load `name` (superseding any load in flight); the prompt and settings are kept.
    fn start_load(&mut self, ctx: &Context<Self>, name: String) {
        self.open_seq.set(self.open_seq.get().wrapping_add(1));
        if matches!(self.open, OpenState::Busy(..)) {
            self.open = OpenState::Idle;
        }
        let load = self.host.begin_load();
        self.phase = Phase::Loading;
        self.progress = None;
        self.status = format!("loading model {name}…");
        self.model = Some(name.clone());
        self.load_report = None;
        let link = ctx.link().clone();
        spawn_local(async move {
            let progress = |status: String, fraction: Option<f64>| {
                link.send_message(Msg::LoadProgress { load: load.clone(), status, fraction })
            };
            let result = host::load_model(&name, &load, progress).await;
            link.send_message(Msg::Loaded { load: load.clone(), result });
        });
    }

    fn on_loaded(&mut self, engine: Rc<Engine>, report: LoadReport) {
        self.load_report = Some(Rc::new(report));
        self.phase = Phase::Ready;
        self.progress = Some(1.0);
        self.status = match &self.model {
            Some(name) => format!("model {name} loaded: ready"),
            None => "model loaded: ready".to_string(),
        };
        self.host.set_loaded(engine);
    }

    /// Open a model from the user's files; the current model stays in use until it is ready.
    fn start_open(&mut self, ctx: &Context<Self>, files: Vec<web_sys::File>) {
        if files.is_empty() {
            return;
        }
        let seq = self.open_seq.clone();
        let open = seq.get().wrapping_add(1);
        seq.set(open);
        self.error = None;
        self.open = OpenState::Busy(format!("opening {} files…", files.len()), None);
        let link = ctx.link().clone();
        spawn_local(async move {
            let progress = |status: String, fraction: Option<f64>| {
                link.send_message(Msg::OpenProgress { open, status, fraction })
            };
            let result = local::open_model(files, progress, || seq.get() == open).await.map(Box::new);
            link.send_message(Msg::Opened { open, result });
        });
    }

    /// Dropped files open as they are; a dropped folder is read through its entries first.
    fn on_drop(&self, ctx: &Context<Self>) -> Callback<DragEvent> {
        let (link, seq) = (ctx.link().clone(), self.open_seq.clone());
        Callback::from(move |e: DragEvent| {
            e.prevent_default();
            let dt = e.data_transfer();
            let entries = dt.as_ref().map(local::drop_entries).unwrap_or_default();
            if entries.is_empty() {
                return link.send_message(Msg::OpenFiles(files_of(dt.and_then(|d| d.files()))));
            }
            let seq = seq.clone();
            link.send_future(async move {
                match local::entry_files(entries).await {
                    Ok(files) => Msg::OpenFiles(files),
                    Err(e) => Msg::Opened { open: seq.get(), result: Err(e) },
                }
            });
        })
    }

    /// The opened model becomes the page's model, exactly as a loaded one does.
    fn on_opened(&mut self, opened: Box<Opened>) {
        let Opened { engine, name, need } = *opened;
        let info = engine.info();
        let what = info.architecture.clone().unwrap_or_else(|| "attnlab".to_string());
        self.open = OpenState::Done(format!(
            "opened {name} ({what}, {} parameters; weights in memory {}, about {} needed while loading) \
             from local files",
            open::group(need.params),
            need.resident_text(),
            open::size(need.peak())
        ));
        self.host.begin_load();
        self.model = Some(name);
        self.error = None;
        self.on_loaded(Rc::new(engine), LoadReport::default());
        self.load_report = None;
        if let Some(name) = &self.model {
            self.status = format!("model {name} opened from local files: ready");
        }
    }

    fn on_generator(&mut self, report: GenReport) {
        match report {
            GenReport::Status(status) => self.status = status,
            GenReport::Error(error) => self.error = error,
            GenReport::Running(running) => self.running = running,
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
        let link = ctx.link();
        let on_host = link.callback(Msg::Host);
        App {
            phase: Phase::Loading,
            index: None,
            model: None,
            status: "reading the models index…".to_string(),
            progress: None,
            load_report: None,
            error: None,
            host: ModelHost::new(backend::force_cpu_from_query(&search), on_host.clone()),
            trace_text: Rc::new(DEFAULT_PROMPT.to_string()),
            running: false,
            open: OpenState::Idle,
            open_seq: Rc::new(Cell::new(0)),
            links: Links {
                pick: link.callback(Msg::Pick),
                generator: link.callback(Msg::Generator),
                edit: link.callback(Msg::BiasEdited),
                force_cpu: on_host.reform(HostMsg::ForceCpu),
                retry_gpu: on_host.reform(|()| HostMsg::RetryGpu),
                open_files: link.callback(Msg::OpenFiles),
            },
        }
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            Msg::Index(result) => self.on_index(ctx, result),
            Msg::Pick(name) => return self.on_pick(ctx, name),
            Msg::LoadProgress { load, status, fraction } => {
                if !load.is_current() {
                    return false;
                }
                self.status = status;
                self.progress = fraction;
            }
            Msg::Loaded { load, .. } if !load.is_current() => return false,
            Msg::Loaded { result: Ok((engine, report)), .. } => self.on_loaded(engine, report),
            Msg::Loaded { result: Err(e), .. } => {
                self.phase = Phase::LoadFailed;
                self.status = "model failed to load".to_string();
                let name = self.model.as_deref().unwrap_or("?");
                self.error = Some(format!("Could not load the model {name}: {e}"));
            }
            Msg::Host(msg) => return self.host.update(msg),
            Msg::Generator(report) => self.on_generator(report),
            Msg::BiasEdited(edit) => match self.host.apply_edit(edit) {
                Ok(false) => return false,
                Ok(true) => self.error = None,
                // Keep the last valid model; the sliders show the refused value's neighbour.
                Err(e) => self.error = Some(format!("That bias setting was not applied: {e}")),
            },
            Msg::DismissError => self.error = None,
            Msg::OpenFiles(files) => self.start_open(ctx, files),
            Msg::OpenProgress { open, status, fraction } => {
                if open != self.open_seq.get() {
                    return false;
                }
                self.open = OpenState::Busy(status, fraction);
            }
            Msg::Opened { open, .. } if open != self.open_seq.get() => return false,
            Msg::Opened { result: Ok(opened), .. } => self.on_opened(opened),
            Msg::Opened { result: Err(e), .. } => {
                self.open = OpenState::Failed;
                self.error = Some(format!("Could not open the model: {e}"));
            }
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
            <main class="app" data-state={state} ondragover={Callback::from(|e: DragEvent| e.prevent_default())}
                ondrop={self.on_drop(ctx)}>
                <header>
                    <h1>{ "attnlab" }</h1>
                    <BackendBadge state={self.host.backend().clone()} probes={self.host.probes()}
                        on_force_cpu={self.links.force_cpu.clone()} on_retry={self.links.retry_gpu.clone()} />
                </header>
                <p class="tagline">
                    { "Small language models with steerable attention variants, \
                       running entirely in your browser." }
                </p>
                <ModelPicker index={self.index.clone()} model={self.model.clone().map(AttrValue::from)}
                    phase={self.phase} progress={self.progress} status={self.status.clone()}
                    engine={self.host.engine()} report={self.load_report.clone()} load={load.id()}
                    on_pick={self.links.pick.clone()} />
                <OpenModel state={self.open.clone()} on_files={self.links.open_files.clone()} />
                { error }
                <Generator runner={self.host.runner()} model={model.clone()} load={load.clone()}
                    on_report={self.links.generator.clone()} />
                <LabPanel model={self.host.lab_model()} name={model} initial={self.initial_of()} load={load}
                    text={self.trace_text.clone()} on_edit={self.links.edit.clone()} />
            </main>
        }
    }
}
