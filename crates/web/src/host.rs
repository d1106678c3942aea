//! The page's one interface to the model, which lives in the worker (`worker/`, reached through
//! [`WorkerClient`]): loads ([`LoadTicket`]; a newer one supersedes), the model as trained and as
//! edited by the bias sliders ([`ModelRef`]s: what the page knows of a model, and the analyses the
//! views ask of it), the backend the worker reports ([`BackendState`]), and starting a generation
//! ([`Runner`]).

use std::cell::Cell;
use std::rc::Rc;

use attnlab_core::analysis::{GateStats, KernelCurve, MapWindow, PplPoint};
use attnlab_core::attention::{AttnStage, LayerAttention};
use attnlab_core::AttentionSpec;
use yew::Callback;

use crate::backend::{Active, BackendState, Choice};
use crate::client::WorkerClient;
use crate::compare::Side;
use crate::engine::{GenSettings, ModelInfo};
use crate::lab::{self, BiasEdit, TraceView};
use crate::protocol::{Answer, ModelMeta, RunEvent, Task, ToWorker};

/// A model the worker holds, as the views see it; equal when it is the same model (a slider edit
/// makes a new one).
#[derive(Clone)]
pub struct ModelRef {
    client: WorkerClient,
    meta: Rc<ModelMeta>,
    /// Which side's channels its analyses run on: compare mode's model B and a preset's reference
    /// model have their own, so that they and side A's do not supersede each other.
    side: Side,
}

impl PartialEq for ModelRef {
    fn eq(&self, other: &Self) -> bool {
        self.meta.id == other.meta.id
    }
}

fn wrong(what: &str) -> String {
    format!("the model's worker answered a {what} request with something else")
}

impl ModelRef {
    pub fn new(client: WorkerClient, meta: ModelMeta) -> ModelRef {
        ModelRef { client, meta: Rc::new(meta), side: Side::A }
    }

    /// This model as compare mode's side B.
    pub fn as_side_b(&self) -> ModelRef {
        ModelRef { side: Side::B, ..self.clone() }
    }

    /// This model as a preset's reference model (traced beside A and B).
    pub fn as_reference(&self) -> ModelRef {
        ModelRef { side: Side::Reference, ..self.clone() }
    }

    /// The view channel `a`, `b` for side B, or `b` with `-r` for the reference model.
    fn channel(&self, [a, b, r]: [&'static str; 3]) -> &'static str {
        match self.side {
            Side::A => a,
            Side::B => b,
            Side::Reference => r,
        }
    }

    pub fn id(&self) -> u32 {
        self.meta.id
    }

    /// The worker that holds it.
    pub fn client(&self) -> WorkerClient {
        self.client.clone()
    }

    pub fn info(&self) -> &ModelInfo {
        &self.meta.info
    }

    /// Attention specs the model was trained with.
    pub fn trained_specs(&self) -> &[AttentionSpec] {
        &self.meta.trained
    }

    /// Attention spec of every layer as used now (after slider edits).
    pub fn current_specs(&self) -> &[AttentionSpec] {
        &self.meta.current
    }

    /// The bias edit this model carries.
    pub fn edit(&self) -> &BiasEdit {
        &self.meta.edit
    }

    /// Whether any layer can be steered by the bias sliders.
    pub fn has_steerable_layers(&self) -> bool {
        self.meta.trained.iter().any(lab::is_steerable)
    }

    /// Trace `text` at `stage` (attention, LAA and gates; the worker cuts it to the trace limit).
    pub async fn trace(&self, text: &str, stage: AttnStage) -> Result<TraceView, String> {
        let task = Task::Trace { text: text.to_string(), stage };
        match self.client.analyze(self.channel(["trace", "trace-b", "trace-r"]), self.meta.id, task).await? {
            Answer::Trace(t) => Ok(t),
            _ => Err(wrong("trace")),
        }
    }

    /// Layer `layer`'s maps over `window` of the WebGPU trace of `text` at `stage` (the heatmap's
    /// zoom; a newer window supersedes this one).
    pub async fn tile(
        &self,
        text: &str,
        stage: AttnStage,
        layer: usize,
        window: MapWindow,
    ) -> Result<LayerAttention, String> {
        let task = Task::Tile { text: text.to_string(), stage, layer, window };
        match self.client.analyze(self.channel(["tile", "tile-b", "tile-r"]), self.meta.id, task).await? {
            Answer::Tile(t) => Ok(t),
            _ => Err(wrong("map window")),
        }
    }

    /// Gate statistics of `text` alone (the Fig. 4 comparison).
    pub async fn gate_stats(&self, text: &str) -> Result<Vec<GateStats>, String> {
        let task = Task::GateStats { text: text.to_string() };
        match self.client.analyze(self.channel(["gates", "gates-b", "gates-r"]), self.meta.id, task).await? {
            Answer::Gates(g) => Ok(g),
            _ => Err(wrong("gates")),
        }
    }

    /// B_h(d) and exp(B_h(d)) of every head of `layer` for d < n.
    pub async fn kernel_curves(&self, layer: usize, n: usize) -> Result<Vec<KernelCurve>, String> {
        let channel = self.channel(["kernels", "kernels-b", "kernels-r"]);
        match self.client.analyze(channel, self.meta.id, Task::KernelCurves { layer, n }).await? {
            Answer::Curves(c) => Ok(c),
            _ => Err(wrong("kernel curve")),
        }
    }

    /// The model's three files.
    pub async fn files(&self) -> Result<crate::protocol::ModelFiles, String> {
        match self.client.analyze("files", self.meta.id, Task::Files).await? {
            Answer::Files(f) => Ok(f),
            _ => Err(wrong("model files")),
        }
    }

    /// Perplexity against context length on `text`; `progress` hears the fraction done and the
    /// lengths finished. A newer sweep cancels this one.
    pub async fn ppl_sweep(
        &self,
        text: &str,
        progress: crate::client::SweepProgress,
    ) -> Result<Vec<PplPoint>, String> {
        self.client.sweep(self.sweep_channel(), self.meta.id, text.to_string(), progress).await
    }

    fn sweep_channel(&self) -> &'static str {
        self.channel([crate::client::SWEEP_CHANNEL, crate::client::SWEEP_CHANNEL_B, "ppl-r"])
    }

    /// Stop a sweep in flight (its view went away).
    pub fn cancel_sweep(&self) {
        self.client.cancel_channel(self.sweep_channel());
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

/// The loaded model as the lab sees it: as trained, as edited by the sliders, and the edit.
#[derive(Clone, PartialEq)]
pub struct LabModel {
    pub trained: ModelRef,
    pub current: ModelRef,
    pub edit: BiasEdit,
}

/// A generation in flight: stop it at any moment.
#[derive(Clone)]
pub struct RunHandle {
    client: WorkerClient,
    run: u32,
}

impl RunHandle {
    /// Ask the worker to stop the run (it stops at its next prefill chunk or token).
    pub fn stop(&self) {
        self.client.send(&ToWorker::Stop { run: self.run });
    }
}

/// Starts generations on the current model (what the generator panel holds).
#[derive(Clone, PartialEq)]
pub struct Runner {
    model: ModelRef,
    backend: Active,
}

impl Runner {
    /// The backend a run started now uses.
    pub fn backend(&self) -> Active {
        self.backend
    }

    /// Start run `run`; its events go to `events` in order.
    pub fn start(
        &self,
        run: u32,
        prompt: String,
        settings: GenSettings,
        events: Callback<RunEvent>,
    ) -> RunHandle {
        let client = self.model.client.clone();
        client.generate(ToWorker::Generate { run, model: self.model.id(), prompt, settings }, run, events);
        RunHandle { client, run }
    }
}

/// The backend controls of the badge.
pub enum HostMsg {
    Choose(Choice),
    /// "Try WebGPU again": probe the adapter and device anew.
    RetryGpu,
}

/// The model, the backend and the worker, as the page's root holds them.
pub struct ModelHost {
    client: WorkerClient,
    /// Id of the latest model load.
    latest_load: Rc<Cell<u32>>,
    /// Order of loads and opens in the worker (only the latest becomes the page's model).
    seq: u32,
    trained: Option<ModelRef>,
    current: Option<ModelRef>,
    /// Which backend generates, and why (the badge), as the worker reports it.
    backend: BackendState,
    probes: u32,
    /// Bytes of the worker's wasm memory, as last reported.
    memory: u64,
}

impl ModelHost {
    /// A host without a model, with the page's backend `choice` (the worker hears it first).
    pub fn new(client: WorkerClient, choice: Choice) -> ModelHost {
        ModelHost {
            client,
            latest_load: Rc::new(Cell::new(0)),
            seq: 0,
            trained: None,
            current: None,
            backend: BackendState::new(choice),
            probes: 1,
            memory: 0,
        }
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    /// Start loading `models/<name>/`, superseding every older load and open; the current model
    /// is dropped until [`ModelHost::set_loaded`]. Returns the load's ticket and its worker seq.
    pub fn begin_load(&mut self, name: &str) -> (LoadTicket, u32) {
        self.latest_load.set(self.latest_load.get().wrapping_add(1));
        self.trained = None;
        self.current = None;
        let seq = self.next_seq();
        self.client.send(&ToWorker::Load { seq, name: name.to_string() });
        (self.ticket(), seq)
    }

    /// Open the user's files (with their paths in the picked folder); the current model stays in
    /// use until the opened one is ready. Returns the open's worker seq.
    pub fn begin_open(&mut self, files: Vec<(String, web_sys::File)>) -> u32 {
        let seq = self.next_seq();
        self.client.send_with_files(&ToWorker::Open { seq }, files);
        seq
    }

    /// Whether `seq` is the latest load or open.
    pub fn is_latest(&self, seq: u32) -> bool {
        self.seq == seq
    }

    /// An opened model replaces the shown one: a new load as far as the page is concerned.
    pub fn adopt_open(&mut self) {
        self.latest_load.set(self.latest_load.get().wrapping_add(1));
    }

    /// The latest load.
    pub fn ticket(&self) -> LoadTicket {
        LoadTicket { id: self.latest_load.get(), latest: self.latest_load.clone() }
    }

    /// The latest load's model is ready (the worker already uses it): trained and current at once.
    pub fn set_loaded(&mut self, meta: ModelMeta) {
        let model = ModelRef::new(self.client.clone(), meta);
        self.trained = Some(model.clone());
        self.current = Some(model);
    }

    /// Ask the worker to apply `edit` to the trained model; `false` without a model.
    pub fn request_edit(&self, edit: BiasEdit) -> bool {
        let Some(trained) = &self.trained else { return false };
        self.client.send(&ToWorker::Edit { of: trained.id(), edit });
        true
    }

    /// The worker's answer to an edit of `of`: the new current model, or why the edit was refused
    /// (the last valid model stays).
    pub fn edited(&mut self, of: u32, result: Result<ModelMeta, String>) -> Result<bool, String> {
        if self.trained.as_ref().map(ModelRef::id) != Some(of) {
            return Ok(false);
        }
        self.current = Some(ModelRef::new(self.client.clone(), result?));
        Ok(true)
    }

    /// A new worker replaced one that stopped: it holds no model, and hears the backend choice
    /// again (the page's loads follow).
    pub fn restarted(&mut self) {
        self.trained = None;
        self.current = None;
        if self.backend.choice != Choice::Auto {
            self.client.send(&ToWorker::Choose(self.backend.choice));
        }
    }

    /// The badge's controls.
    pub fn control(&mut self, msg: HostMsg) {
        match msg {
            HostMsg::Choose(choice) => {
                self.backend.choice = choice;
                self.client.send(&ToWorker::Choose(choice));
            }
            HostMsg::RetryGpu => self.client.send(&ToWorker::RetryGpu),
        }
    }

    /// The worker's backend state.
    pub fn set_backend(&mut self, state: BackendState, probes: u32) {
        self.backend = state;
        self.probes = probes;
    }

    pub fn set_memory(&mut self, bytes: u64) {
        self.memory = bytes;
    }

    /// Bytes of the worker's wasm memory (0 until it reports).
    pub fn memory(&self) -> u64 {
        self.memory
    }

    pub fn backend(&self) -> &BackendState {
        &self.backend
    }

    pub fn probes(&self) -> u32 {
        self.probes
    }

    /// The model in use (the model info line); `None` while a model loads or after it failed.
    pub fn model(&self) -> Option<ModelRef> {
        self.current.clone()
    }

    /// The lab's view of the model; `None` while a model loads or after it failed.
    pub fn lab_model(&self) -> Option<LabModel> {
        match (&self.trained, &self.current) {
            (Some(trained), Some(current)) => Some(LabModel {
                trained: trained.clone(),
                current: current.clone(),
                edit: current.edit().clone(),
            }),
            _ => None,
        }
    }

    /// What the generator starts runs with; `None` while no model is ready.
    pub fn runner(&self) -> Option<Runner> {
        Some(Runner { model: self.current.clone()?, backend: self.backend.active() })
    }
}
