//! The page's one interface to the model: loading one ([`load_model`], superseded by a newer
//! [`LoadTicket`]), the loaded engine as trained and with the bias sliders' edit applied (the one
//! place an edited engine is built), the WebGPU device and the backend choice ([`BackendState`]),
//! and starting a generation ([`Runner`]).
//!
//! The root component owns the [`ModelHost`]; the generator panel gets a [`Runner`], the lab views an
//! [`EngineRef`] (they always run on the CPU engine). Nothing else touches the engine or the GPU, so
//! moving inference into a Web Worker changes this module's insides, not its callers.

use std::cell::Cell;
use std::rc::Rc;

use attnlab_gpu::GpuContext;
use wasm_bindgen_futures::spawn_local;
use yew::Callback;

use crate::backend::{Active, BackendState, GpuFailure, Probe};
use crate::engine::{Engine, GenSettings};
use crate::generate::{self, Job, RunEvent};
use crate::gpu::{self, GpuSlot};
use crate::lab::BiasEdit;
use crate::loader::{self, LoadReport};

/// An engine shared by the views; equal when it is the same engine (a slider edit makes a new one).
#[derive(Clone)]
pub struct EngineRef(pub Rc<Engine>);

impl PartialEq for EngineRef {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

/// One model load. A newer load supersedes it: its messages are dropped and its fetches give up.
#[derive(Clone)]
pub struct LoadTicket {
    id: u32,
    latest: Rc<Cell<u32>>,
}

impl LoadTicket {
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Whether no newer load has started.
    pub fn is_current(&self) -> bool {
        self.latest.get() == self.id
    }
}

impl PartialEq for LoadTicket {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && Rc::ptr_eq(&self.latest, &other.latest)
    }
}

/// Load the model `name` as part of `load` (the page's model, or a checkpoint it compares with); it
/// gives up once a newer load starts. `progress` hears the status line and the fraction done.
pub async fn load_model(
    name: &str,
    load: &LoadTicket,
    progress: impl Fn(String, Option<f64>),
) -> Result<(Rc<Engine>, LoadReport), String> {
    let (engine, report) = loader::fetch_engine(name, progress, || load.is_current()).await?;
    Ok((Rc::new(engine), report))
}

/// The loaded model as the lab sees it: as trained, as edited by the sliders, and the edit.
#[derive(Clone, PartialEq)]
pub struct LabModel {
    pub trained: EngineRef,
    pub current: EngineRef,
    pub edit: BiasEdit,
}

/// The WebGPU device and the slot of its one uploaded model.
#[derive(Clone)]
struct GpuRun {
    ctx: Rc<GpuContext>,
    slot: GpuSlot,
}

impl PartialEq for GpuRun {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.ctx, &other.ctx) && self.slot == other.slot
    }
}

/// Starts generations on the current engine and backend (what the generator panel holds).
#[derive(Clone, PartialEq)]
pub struct Runner {
    engine: EngineRef,
    /// Set when a run started now goes to WebGPU.
    gpu: Option<GpuRun>,
    gpu_failed: Callback<GpuFailure>,
}

impl Runner {
    /// The backend a run started now uses.
    pub fn backend(&self) -> Active {
        if self.gpu.is_some() {
            Active::Gpu
        } else {
            Active::Cpu
        }
    }

    /// Start one run; its events go to `events` in order. Setting `stop` ends it at its next token.
    pub fn start(
        &self,
        prompt: String,
        settings: GenSettings,
        stop: Rc<Cell<bool>>,
        events: Callback<RunEvent>,
    ) {
        let job = Job { engine: self.engine.0.clone(), prompt, settings, stop, events };
        let gpu = self.gpu.as_ref().map(|g| (g.ctx.clone(), g.slot.clone()));
        spawn_local(generate::generate(job, gpu, self.gpu_failed.clone()));
    }
}

/// What the host's own tasks and the backend controls report.
pub enum HostMsg {
    /// The WebGPU probe's answer: the device and the adapter's name.
    GpuProbed(Result<(GpuContext, String), GpuFailure>),
    /// The GPU failed; `load` is set when the failure is the upload of that load's model.
    GpuFailed {
        load: Option<u32>,
        failure: GpuFailure,
    },
    ForceCpu(bool),
    /// "Try WebGPU again": probe the adapter and device anew.
    RetryGpu,
}

/// The model, the GPU and the backend choice of the page.
pub struct ModelHost {
    /// Id of the latest model load.
    latest_load: Rc<Cell<u32>>,
    /// The model as trained (what "reset to trained" returns to).
    trained: Option<Rc<Engine>>,
    /// The engine in use: the trained model with the bias sliders' edit applied.
    current: Option<Rc<Engine>>,
    edit: BiasEdit,
    /// Which backend generates, and why (the badge).
    backend: BackendState,
    /// How many times the page asked for a WebGPU device (the first probe, then each retry).
    probes: u32,
    /// The WebGPU device, once the probe succeeded.
    gpu_ctx: Option<Rc<GpuContext>>,
    /// The model uploaded to the GPU.
    gpu_slot: GpuSlot,
    /// Where the host's tasks (probe, warm-up upload) report.
    notify: Callback<HostMsg>,
    /// Run failures into `notify`, made once so an unchanged [`Runner`] compares equal.
    gpu_failed: Callback<GpuFailure>,
}

impl ModelHost {
    /// A host without a model; starts the WebGPU probe. `force_cpu`: the `?backend=cpu` choice.
    pub fn new(force_cpu: bool, notify: Callback<HostMsg>) -> ModelHost {
        let gpu_failed = notify.reform(|failure| HostMsg::GpuFailed { load: None, failure });
        let host = ModelHost {
            latest_load: Rc::new(Cell::new(0)),
            trained: None,
            current: None,
            edit: BiasEdit::default(),
            backend: BackendState::new(force_cpu),
            probes: 1,
            gpu_ctx: None,
            gpu_slot: GpuSlot::default(),
            notify,
            gpu_failed,
        };
        host.probe();
        host
    }

    fn probe(&self) {
        let notify = self.notify.clone();
        spawn_local(async move { notify.emit(HostMsg::GpuProbed(gpu::probe().await)) });
    }

    /// Start a new load, superseding every older one; the current model is dropped until
    /// [`ModelHost::set_loaded`].
    pub fn begin_load(&mut self) -> LoadTicket {
        self.latest_load.set(self.latest_load.get().wrapping_add(1));
        self.trained = None;
        self.current = None;
        self.edit = BiasEdit::default();
        self.ticket()
    }

    /// The latest load.
    pub fn ticket(&self) -> LoadTicket {
        LoadTicket { id: self.latest_load.get(), latest: self.latest_load.clone() }
    }

    /// The latest load's model is ready: trained and current at once. It is uploaded to the GPU ahead
    /// of the first generation, so a model the adapter refuses shows the CPU badge right away.
    pub fn set_loaded(&mut self, engine: Rc<Engine>) {
        self.trained = Some(engine.clone());
        self.current = Some(engine);
        self.edit = BiasEdit::default();
        self.backend.new_model();
        self.warm_gpu();
    }

    /// Apply `edit` to the trained model. `Ok(false)` without a model; an edit the model refuses is
    /// an error and leaves the last valid engine in place.
    pub fn apply_edit(&mut self, edit: BiasEdit) -> Result<bool, String> {
        let Some(trained) = &self.trained else {
            return Ok(false);
        };
        let engine = trained.edited(&edit)?;
        self.current = Some(Rc::new(engine));
        self.edit = edit;
        Ok(true)
    }

    /// Handle a probe answer, a GPU failure or a backend control; true when the badge changes.
    pub fn update(&mut self, msg: HostMsg) -> bool {
        match msg {
            HostMsg::GpuProbed(Ok((gpu_ctx, adapter))) => {
                self.backend.probe = Probe::Ready { adapter };
                self.gpu_ctx = Some(Rc::new(gpu_ctx));
                self.warm_gpu();
            }
            HostMsg::GpuProbed(Err(failure)) => self.backend.fail(failure),
            HostMsg::GpuFailed { load, failure } => {
                if failure.is_model_specific() && load.is_some_and(|l| l != self.latest_load.get()) {
                    return false;
                }
                if !failure.is_model_specific() {
                    // The device is gone or misbehaves: free the GPU model, stay on the CPU.
                    self.gpu_slot.clear();
                }
                self.backend.fail(failure);
            }
            HostMsg::ForceCpu(force) => {
                self.backend.force_cpu = force;
                self.warm_gpu();
            }
            HostMsg::RetryGpu => {
                if !self.backend.can_retry() {
                    return false;
                }
                // Free the lost device's model; a run still on it has stopped (the GPU failed).
                self.gpu_slot.clear();
                self.gpu_ctx = None;
                self.backend.retry();
                self.probes += 1;
                self.probe();
            }
        }
        true
    }

    /// Upload the current model to the GPU when generation would run there.
    fn warm_gpu(&self) {
        let (Some(gpu_ctx), Some(engine)) = (self.gpu_ctx.clone(), self.current.clone()) else {
            return;
        };
        if self.backend.active() != Active::Gpu {
            return;
        }
        let (notify, slot, load) = (self.notify.clone(), self.gpu_slot.clone(), self.latest_load.get());
        spawn_local(async move {
            let result = match slot.acquire().await {
                Ok(mut lease) => lease.model_for(&gpu_ctx, &engine).await.map(|_| ()),
                Err(f) => Err(f),
            };
            if let Err(failure) = result {
                notify.emit(HostMsg::GpuFailed { load: Some(load), failure });
            }
        });
    }

    pub fn backend(&self) -> &BackendState {
        &self.backend
    }

    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// The engine in use (the model info line); `None` while a model loads or after it failed.
    pub fn engine(&self) -> Option<EngineRef> {
        self.current.clone().map(EngineRef)
    }

    /// The lab's view of the model; `None` while a model loads or after it failed.
    pub fn lab_model(&self) -> Option<LabModel> {
        match (&self.trained, &self.current) {
            (Some(trained), Some(current)) => Some(LabModel {
                trained: EngineRef(trained.clone()),
                current: EngineRef(current.clone()),
                edit: self.edit.clone(),
            }),
            _ => None,
        }
    }

    /// What the generator starts runs with; `None` while no model is ready.
    pub fn runner(&self) -> Option<Runner> {
        let engine = EngineRef(self.current.clone()?);
        let gpu = match (self.backend.active(), &self.gpu_ctx) {
            (Active::Gpu, Some(ctx)) => Some(GpuRun { ctx: ctx.clone(), slot: self.gpu_slot.clone() }),
            _ => None,
        };
        Some(Runner { engine, gpu, gpu_failed: self.gpu_failed.clone() })
    }
}
