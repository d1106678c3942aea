//! The page: the model picker (from `models/index.json`), model loading with progress, the prompt
//! form, streamed generation and throughput.
//!
//! Switching models stops a running generation first (its output stays, labelled with the model
//! that wrote it) and supersedes any load in flight: every load and run carries an id, and messages
//! of a superseded one are dropped, so two models' tokens never mix.
//!
//! Generation runs as a chain of small tasks: prefill in one, then one token per task with a yield
//! to the event loop in between (see `yield_now`), so the page stays responsive and Stop takes effect
//! at the next token. All model work goes through [`crate::engine`].
//!
//! Generation runs on WebGPU (`crate::gpu`, the `attnlab-gpu` crate) when the browser gives a device
//! and the model fits it, else on the CPU engine; `crate::backend` decides and words the badge. A GPU
//! error before the first token reruns the generation on the CPU; one mid-generation stops it (the
//! text so far stays) and turns the GPU off for the page. The lab views always use the CPU engine.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

use attnlab_core::catalog::ModelIndex;
use attnlab_gpu::GpuContext;
use wasm_bindgen::JsValue;
use wasm_bindgen_futures::spawn_local;
use web_sys::{HtmlInputElement, HtmlTextAreaElement};
use yew::html::Scope;
use yew::prelude::*;

use crate::backend::{self, Active, BackendState, GpuFailure, Probe};
use crate::engine::{Engine, Finish, GenSettings, ModelInfo, TokenOut};
use crate::fetch;
use crate::gpu::{self, GpuSlot};
use crate::lab::BiasEdit;
use crate::models;
use crate::results::{self, RESULTS_URL};
use crate::store;
use crate::views::{
    Compare, CompareState, EngineRef, KernelView, LaaOverlay, LayerLaa, PplCurve, PplView, Shipped,
    TraceKind, TraceViewComp,
};
use crate::yield_now::{next_paint, yield_now};

/// Model files, fetched relative to the page (`models/<name>/…`) so the site works from a subpath.
const MODEL_FILES: [&str; 3] = ["config.json", "model.safetensors", "tokenizer.json"];
const MAX_TOKENS_LIMIT: usize = 4096;
const DEFAULT_PROMPT: &str = "The history of the city";
/// Held-out text of the extrapolation view (test documents of the training corpus).
const HELDOUT_URL: &str = "eval/heldout.txt";

/// The lab's views.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Kernels,
    Attention,
    Extrapolation,
    Laa,
    Gates,
}

const TABS: [(Tab, &str, &str); 5] = [
    (Tab::Kernels, "tab-kernels", "Kernels"),
    (Tab::Attention, "tab-attention", "Attention"),
    (Tab::Extrapolation, "tab-extrapolation", "Perplexity vs length"),
    (Tab::Laa, "tab-laa", "LAA"),
    (Tab::Gates, "tab-gates", "Gates"),
];

/// Milliseconds from `performance.now()` (falls back to `Date.now()`).
fn now_ms() -> f64 {
    web_sys::window().and_then(|w| w.performance()).map(|p| p.now()).unwrap_or_else(js_sys::Date::now)
}

fn fmt_bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

fn per_second(count: usize, ms: f64) -> Option<f64> {
    (count > 0 && ms > 0.0).then(|| count as f64 * 1000.0 / ms)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Loading,
    Ready,
    LoadFailed,
}

/// Prefill throughput of the last run.
#[derive(Clone, Copy, Default)]
pub struct PrefillStats {
    tokens: usize,
    ms: f64,
}

/// Decode throughput of the last run: `compute_ms` is time inside the engine, `wall_ms` includes the
/// yields to the event loop between tokens.
#[derive(Clone, Copy, Default)]
pub struct DecodeStats {
    tokens: usize,
    compute_ms: f64,
    wall_ms: f64,
}

/// The untrained checkpoint of the current model, loaded for the gate view's comparison.
struct Initial {
    /// The trained model it belongs to.
    of: String,
    name: String,
    state: CompareState,
}

pub struct App {
    phase: Phase,
    /// The models index; `None` while it loads, when the server has none, or when it is corrupt.
    index: Option<Rc<ModelIndex>>,
    /// The model shown or being loaded.
    model: Option<String>,
    /// Id of the latest model load; a load whose id is no longer this one is dropped.
    load_id: Rc<Cell<u32>>,
    /// The initial checkpoint of the current model, once the gate view asked for it.
    initial: Option<Initial>,
    status: String,
    /// Load progress in [0, 1]; `None` while the total size is unknown.
    progress: Option<f64>,
    /// The engine in use: the trained model with the bias sliders' edit applied.
    engine: Option<Rc<Engine>>,
    /// The model as trained (what "reset to trained" returns to).
    base: Option<Rc<Engine>>,
    edit: BiasEdit,
    tab: Tab,
    /// Held-out text and where it came from.
    heldout: Option<(Rc<String>, String)>,
    trained_ppl: Option<PplCurve>,
    /// The shipped models' perplexity table (`results.json`), fetched with the held-out text.
    shipped: Shipped,
    laa_overlay: Rc<LaaOverlay>,
    /// Text of the trace views (prompt + output of the last run), fixed while a run streams.
    trace_text: Rc<String>,
    prompt: String,
    max_tokens: String,
    temperature: String,
    top_k: String,
    top_p: String,
    seed: String,
    /// Prompt of the run whose output is shown.
    shown_prompt: String,
    output: String,
    /// Model that produced the shown output, and whether a model switch cut it short.
    output_model: String,
    output_cut_by_switch: bool,
    running: bool,
    stop: Rc<Cell<bool>>,
    run_id: u32,
    prefill: Option<PrefillStats>,
    decode: Option<DecodeStats>,
    error: Option<String>,
    /// Which backend generates, and why (the badge).
    backend: BackendState,
    /// How many times the page asked for a WebGPU device (the first probe, then each retry).
    probes: u32,
    /// The WebGPU device, once the probe succeeded.
    gpu_ctx: Option<GpuContext>,
    /// The model uploaded to the GPU.
    gpu_slot: GpuSlot,
    /// Backend of the shown run.
    run_backend: Option<Active>,
    /// Where the current model's files came from (browser cache or network), with notices.
    load_report: Option<LoadReport>,
    /// Answer of "forget cached models".
    cache_note: Option<String>,
}

pub enum Field {
    Prompt,
    MaxTokens,
    Temperature,
    TopK,
    TopP,
    Seed,
}

pub enum Msg {
    /// The models index: `Ok(None)` when the server has none.
    Index(Result<Option<ModelIndex>, String>),
    /// The picker chose a model.
    Pick(String),
    LoadProgress {
        load: u32,
        status: String,
        fraction: Option<f64>,
    },
    Loaded {
        load: u32,
        result: Result<(Rc<Engine>, LoadReport), String>,
    },
    InitialProgress {
        load: u32,
        status: String,
    },
    InitialLoaded {
        load: u32,
        result: Result<Rc<Engine>, String>,
    },
    Edit(Field, String),
    Generate,
    Stop,
    DismissError,
    RunStatus {
        run: u32,
        status: String,
    },
    Prefilled {
        run: u32,
        stats: PrefillStats,
    },
    Token {
        run: u32,
        text: String,
        stats: DecodeStats,
    },
    Finished {
        run: u32,
        result: Result<String, String>,
    },
    Tab(Tab),
    BiasEdited(BiasEdit),
    Heldout(Result<String, String>),
    Shipped(Shipped),
    PplDone(EngineRef, PplCurve),
    Laa(String, Vec<LayerLaa>),
    /// The WebGPU probe's answer: the device and the adapter's name.
    GpuProbed(Result<(GpuContext, String), GpuFailure>),
    /// The GPU failed; `load` is set when the failure is the upload of that load's model.
    GpuFailed {
        load: Option<u32>,
        failure: GpuFailure,
    },
    /// The run `run` generates on `backend` (a GPU run that failed before its first token reruns on
    /// the CPU).
    RunBackend {
        run: u32,
        backend: Active,
    },
    ForceCpu(bool),
    /// "Try WebGPU again": probe the adapter and device anew.
    RetryGpu,
    /// "forget cached models": empty the browser cache of model files.
    ForgetCache,
    CacheForgotten(Result<(), String>),
}

impl App {
    fn settings(&self) -> Result<GenSettings, String> {
        let max_tokens: usize = self
            .max_tokens
            .trim()
            .parse()
            .ok()
            .filter(|n| (1..=MAX_TOKENS_LIMIT).contains(n))
            .ok_or_else(|| format!("max tokens: enter a whole number from 1 to {MAX_TOKENS_LIMIT}"))?;
        let temperature: f32 = self
            .temperature
            .trim()
            .parse()
            .ok()
            .filter(|t: &f32| t.is_finite() && (0.0..=10.0).contains(t))
            .ok_or_else(|| "temperature: enter a number from 0 to 10".to_string())?;
        let top_k: usize = self
            .top_k
            .trim()
            .parse()
            .map_err(|_| "top-k: enter a whole number (0 = no top-k cut)".to_string())?;
        let top_p: f32 = self
            .top_p
            .trim()
            .parse()
            .ok()
            .filter(|p: &f32| p.is_finite() && *p > 0.0 && *p <= 1.0)
            .ok_or_else(|| "top-p: enter a number in (0, 1] (1 = no nucleus cut)".to_string())?;
        let seed: u64 = self
            .seed
            .trim()
            .parse()
            .map_err(|_| "seed: enter a whole number from 0 to 18446744073709551615".to_string())?;
        Ok(GenSettings { max_tokens, temperature, top_k, top_p, seed })
    }

    fn view_load(&self, ctx: &Context<Self>) -> Html {
        let bar = match (self.phase, self.progress) {
            (Phase::Loading, Some(f)) => html! {
                <progress id="load-progress" max="1" value={format!("{f:.4}")}></progress>
            },
            (Phase::Loading, None) => html! { <progress id="load-progress"></progress> },
            _ => html! {},
        };
        let info = match self.engine.as_deref().map(Engine::info) {
            Some(info) => view_model_info(info),
            None => html! {},
        };
        let source = match &self.load_report {
            Some(r) if self.phase == Phase::Ready => html! {
                <p id="model-source" class="muted model-source" data-source={r.code()}>
                    { r.text() }{ " " }
                    <button id="forget-cache" class="link" onclick={ctx.link().callback(|_| Msg::ForgetCache)}
                        title="Delete the model files this page keeps in the browser cache">
                        { "forget cached models" }
                    </button>
                    if let Some(note) = &self.cache_note { { " · " }{ note } }
                </p>
            },
            _ => html! {},
        };
        let notice = match &self.load_report {
            Some(r) if !r.notices.is_empty() => html! {
                <p id="cache-notice" class="notice" role="status">{ r.notices.join("; ") }</p>
            },
            _ => html! {},
        };
        html! {
            <section class="load">
                <div id="status" class="status" role="status" aria-live="polite">{ &self.status }</div>
                { bar }
                { info }
                { source }
                { notice }
            </section>
        }
    }

    fn view_stats(&self) -> Html {
        let prefill_tps = self.prefill.and_then(|p| per_second(p.tokens, p.ms));
        let decode_tps = self.decode.and_then(|d| per_second(d.tokens, d.compute_ms));
        let decode_wall_tps = self.decode.and_then(|d| per_second(d.tokens, d.wall_ms));
        let fmt = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "–".to_string());
        let raw = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
        let prefill_detail =
            self.prefill.map(|p| format!(" ({} tokens in {:.1} ms)", p.tokens, p.ms)).unwrap_or_default();
        let decode_detail = self
            .decode
            .map(|d| format!(" ({} tokens; {} tok/s incl. UI yields)", d.tokens, fmt(decode_wall_tps)))
            .unwrap_or_default();
        let on = match self.run_backend {
            Some(Active::Gpu) => {
                html! { <span id="run-backend" class="stat" data-backend="webgpu">{ "on WebGPU" }</span> }
            }
            Some(Active::Cpu) => {
                html! { <span id="run-backend" class="stat" data-backend="cpu">{ "on the CPU (wasm)" }</span> }
            }
            None => html! {},
        };
        html! {
            <div class="stats">
                { on }
                <span class="stat">
                    { "prefill: " }
                    <b id="prefill-tps" data-value={raw(prefill_tps)}>{ fmt(prefill_tps) }</b>
                    { " tok/s" }{ prefill_detail }
                </span>
                <span class="stat">
                    { "decode: " }
                    <b id="decode-tps" data-value={raw(decode_tps)}>{ fmt(decode_tps) }</b>
                    { " tok/s" }{ decode_detail }
                </span>
            </div>
        }
    }
}

impl App {
    /// Stop a running generation because the model changes: its messages are dropped from now on
    /// (the run id moves on) and its text so far stays, labelled as cut short.
    fn stop_for_switch(&mut self) {
        if !self.running {
            return;
        }
        self.stop.set(true);
        self.run_id = self.run_id.wrapping_add(1);
        self.running = false;
        self.output_cut_by_switch = true;
        self.trace_text = Rc::new(format!("{}{}", self.shown_prompt, self.output));
    }

    /// Load `name` (superseding any load in flight); the prompt and settings are kept.
    fn start_load(&mut self, ctx: &Context<Self>, name: String) {
        self.stop_for_switch();
        let load = self.load_id.get().wrapping_add(1);
        self.load_id.set(load);
        self.phase = Phase::Loading;
        self.progress = None;
        self.status = format!("loading model {name}…");
        self.engine = None;
        self.base = None;
        self.edit = BiasEdit::default();
        self.trained_ppl = None;
        self.initial = None;
        self.model = Some(name.clone());
        self.load_report = None;
        self.cache_note = None;
        let (link, current) = (ctx.link().clone(), self.load_id.clone());
        spawn_local(async move {
            let progress = |status: String, fraction: Option<f64>| {
                link.send_message(Msg::LoadProgress { load, status, fraction })
            };
            let alive = || current.get() == load;
            let result = fetch_engine(&name, progress, alive).await.map(|(e, r)| (Rc::new(e), r));
            link.send_message(Msg::Loaded { load, result });
        });
    }

    /// Upload the current model to the GPU ahead of the first generation, so a model the adapter
    /// refuses (too large, unsupported) shows the CPU badge and its reason right away.
    fn warm_gpu(&self, ctx: &Context<Self>) {
        let (Some(gpu_ctx), Some(engine)) = (self.gpu_ctx.clone(), self.engine.clone()) else {
            return;
        };
        if self.backend.active() != Active::Gpu || self.phase != Phase::Ready {
            return;
        }
        let (link, slot, load) = (ctx.link().clone(), self.gpu_slot.clone(), self.load_id.get());
        spawn_local(async move {
            let result = match slot.acquire().await {
                Ok(mut lease) => lease.model_for(&gpu_ctx, &engine).await.map(|_| ()),
                Err(f) => Err(f),
            };
            if let Err(failure) = result {
                link.send_message(Msg::GpuFailed { load: Some(load), failure });
            }
        });
    }

    fn view_backend(&self, ctx: &Context<Self>) -> Html {
        let on_force = ctx
            .link()
            .callback(|e: Event| Msg::ForceCpu(e.target_unchecked_into::<HtmlInputElement>().checked()));
        let retry = self.backend.can_retry().then(|| {
            html! {
                <button id="retry-webgpu" class="link" onclick={ctx.link().callback(|_| Msg::RetryGpu)}
                    title="Ask the browser for a WebGPU adapter and device again (the page and your text stay)">
                    { "Try WebGPU again" }
                </button>
            }
        });
        let notice = match self.backend.notice() {
            Some(n) => html! {
                <p id="backend-notice" class="backend-notice" role="status">{ n }{ " " }{ for retry }</p>
            },
            None => html! {},
        };
        html! {
            <div class="backend">
                <span id="backend" class="badge" data-backend={self.backend.code()} data-probes={self.probes.to_string()}>
                    { format!("backend: {}", self.backend.badge()) }
                </span>
                <label class="force-cpu muted" title="Generate with the CPU (wasm) runtime even when WebGPU works">
                    <input id="force-cpu" type="checkbox" checked={self.backend.force_cpu} onchange={on_force}/>
                    { " force CPU" }
                </label>
                { notice }
            </div>
        }
    }

    /// In the gate view, load the current model's initial checkpoint (once per model) when the index
    /// lists one.
    fn maybe_load_initial(&mut self, ctx: &Context<Self>) {
        if self.tab != Tab::Gates || self.phase != Phase::Ready {
            return;
        }
        let (Some(index), Some(model)) = (&self.index, &self.model) else {
            return;
        };
        let Some(init) = index.initial_of(model) else {
            return;
        };
        if self.initial.as_ref().is_some_and(|i| &i.of == model) {
            return;
        }
        let name = init.name.clone();
        self.initial = Some(Initial {
            of: model.clone(),
            name: name.clone(),
            state: CompareState::Loading(format!("loading {name}…").into()),
        });
        let load = self.load_id.get();
        let (link, current) = (ctx.link().clone(), self.load_id.clone());
        spawn_local(async move {
            let progress =
                |status: String, _: Option<f64>| link.send_message(Msg::InitialProgress { load, status });
            let alive = || current.get() == load;
            let result = fetch_engine(&name, progress, alive).await.map(|(e, _)| Rc::new(e));
            link.send_message(Msg::InitialLoaded { load, result });
        });
    }

    fn compare(&self) -> Option<Compare> {
        self.initial.as_ref().map(|i| Compare {
            name: i.name.clone().into(),
            of: i.of.clone().into(),
            state: i.state.clone(),
        })
    }

    /// The model picker: one `<optgroup>` per family, the current model's description below.
    fn view_picker(&self, ctx: &Context<Self>) -> Html {
        let Some(index) = &self.index else {
            return html! {};
        };
        let current = self.model.as_deref().unwrap_or("");
        let groups = models::by_family(index).into_iter().map(|(family, entries)| {
            html! {
                <optgroup label={family.to_string()}>
                    { for entries.into_iter().map(|m| html! {
                        <option value={m.name.clone()} selected={m.name == current}>{ models::option_label(m) }</option>
                    }) }
                </optgroup>
            }
        });
        let description = index.get(current).map(|m| m.description.clone()).unwrap_or_default();
        let on_change = ctx
            .link()
            .callback(|e: Event| Msg::Pick(e.target_unchecked_into::<web_sys::HtmlSelectElement>().value()));
        html! {
            <section class="picker">
                <label for="model-picker">{ "Model" }</label>
                <select id="model-picker" onchange={on_change} aria-describedby="model-description">
                    if index.get(current).is_none() {
                        <option value="" selected=true disabled=true>{ "choose a model" }</option>
                    }
                    { for groups }
                </select>
                <p id="model-description" class="muted">{ description }</p>
            </section>
        }
    }

    fn view_lab(&self, ctx: &Context<Self>) -> Html {
        let (Some(engine), Some(_)) = (&self.engine, &self.base) else {
            return html! {};
        };
        let link = ctx.link();
        let engine = EngineRef(engine.clone());
        let tabs = TABS.iter().map(|&(tab, id, label)| {
            html! {
                <button id={id} role="tab" aria-selected={(tab == self.tab).to_string()}
                    class={classes!("tab", (tab == self.tab).then_some("active"))}
                    onclick={link.callback(move |_| Msg::Tab(tab))}>{ label }</button>
            }
        });
        let on_laa = link.callback(|(name, layers)| Msg::Laa(name, layers));
        let trace = |kind| {
            let compare = if kind == TraceKind::Gates { self.compare() } else { None };
            html! { <TraceViewComp kind={kind} engine={engine.clone()} text={self.trace_text.clone()}
            laa_overlay={self.laa_overlay.clone()} on_laa={on_laa.clone()} compare={compare} /> }
        };
        let body = match self.tab {
            Tab::Kernels => html! {
                <KernelView engine={engine.clone()} edit={self.edit.clone()}
                    on_edit={link.callback(Msg::BiasEdited)} />
            },
            Tab::Extrapolation => match &self.heldout {
                Some((text, source)) => html! {
                    <PplView engine={engine.clone()} text={text.clone()} text_source={source.clone()}
                        trained={self.trained_ppl.clone()} shipped={self.shipped.clone()}
                        model={self.model.clone().unwrap_or_default()}
                        on_done={link.callback(|(e, p)| Msg::PplDone(e, p))} />
                },
                None => html! { <p class="muted">{ "loading the held-out text…" }</p> },
            },
            Tab::Attention => trace(TraceKind::Attention),
            Tab::Laa => trace(TraceKind::Laa),
            Tab::Gates => trace(TraceKind::Gates),
        };
        let edited = if self.edit.is_identity() { "as trained" } else { "bias edited by the sliders" };
        html! {
            <section class="lab">
                <div class="tabs" role="tablist">{ for tabs }</div>
                <p class="muted" id="bias-state">{ format!("model: {edited}") }</p>
                <p class="muted" id="lab-backend-note">
                    { "The lab views (heatmaps, gates, perplexity sweep, kernels) run on the CPU \
                       (wasm) reference runtime, whatever backend generates. A bias edit is uploaded \
                       to the GPU at the next generation." }
                </p>
                { body }
            </section>
        }
    }
}

/// Fetch a text file from the page's origin.
async fn fetch_text(path: &str) -> Result<String, String> {
    let bytes = fetch::open(path).await?.read(|_| {}).await?;
    String::from_utf8(bytes).map_err(|_| format!("{path}: not valid UTF-8"))
}

/// The shipped models' perplexity table, or why there is none.
async fn fetch_shipped() -> Shipped {
    let read = async {
        let Some(pending) = fetch::open_optional(RESULTS_URL).await? else {
            return Err(format!("{RESULTS_URL} is not on the server"));
        };
        let bytes = pending.read(|_| {}).await?;
        let text = String::from_utf8(bytes).map_err(|_| format!("{RESULTS_URL}: not valid UTF-8"))?;
        results::parse(&text)
    };
    match read.await {
        Ok(curves) => Shipped::Ready(Rc::new(curves)),
        Err(e) => Shipped::Missing(e.into()),
    }
}

fn view_model_info(info: &ModelInfo) -> Html {
    let variants = info.variants.join(" + ");
    html! {
        <p id="model-info" class="model-info">
            <b>{ &info.name }</b>
            { format!(
                " · {variants} · {} layers × {} heads · d_model {} · vocab {} · context {} \
                 (trained at {})",
                info.n_layers, info.n_heads, info.d_model, info.vocab_size, info.max_context,
                info.train_context
            ) }
            if !info.description.is_empty() {
                <br/><span class="muted">{ &info.description }</span>
            }
        </p>
    }
}

impl Component for App {
    type Message = Msg;
    type Properties = ();

    fn create(ctx: &Context<Self>) -> Self {
        let link = ctx.link().clone();
        spawn_local(async move { link.send_message(Msg::Index(fetch_index().await)) });
        let link = ctx.link().clone();
        spawn_local(async move { link.send_message(Msg::GpuProbed(gpu::probe().await)) });
        let search = web_sys::window().and_then(|w| w.location().search().ok()).unwrap_or_default();
        let defaults = GenSettings::default();
        App {
            phase: Phase::Loading,
            index: None,
            model: None,
            load_id: Rc::new(Cell::new(0)),
            initial: None,
            status: "reading the models index…".to_string(),
            progress: None,
            engine: None,
            base: None,
            edit: BiasEdit::default(),
            tab: Tab::Kernels,
            heldout: None,
            trained_ppl: None,
            shipped: Shipped::Loading,
            laa_overlay: Rc::new(BTreeMap::new()),
            trace_text: Rc::new(DEFAULT_PROMPT.to_string()),
            prompt: DEFAULT_PROMPT.to_string(),
            max_tokens: defaults.max_tokens.to_string(),
            temperature: defaults.temperature.to_string(),
            top_k: defaults.top_k.to_string(),
            top_p: defaults.top_p.to_string(),
            seed: defaults.seed.to_string(),
            shown_prompt: String::new(),
            output: String::new(),
            output_model: String::new(),
            output_cut_by_switch: false,
            running: false,
            stop: Rc::new(Cell::new(false)),
            run_id: 0,
            prefill: None,
            decode: None,
            error: None,
            backend: BackendState::new(backend::force_cpu_from_query(&search)),
            probes: 1,
            gpu_ctx: None,
            gpu_slot: GpuSlot::default(),
            run_backend: None,
            load_report: None,
            cache_note: None,
        }
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            Msg::Index(result) => {
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
            Msg::Pick(name) => {
                let listed = self.index.as_ref().is_some_and(|i| i.get(&name).is_some());
                if !listed
                    || (self.model.as_deref() == Some(name.as_str()) && self.phase != Phase::LoadFailed)
                {
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
            }
            Msg::LoadProgress { load, status, fraction } => {
                if load != self.load_id.get() {
                    return false;
                }
                self.status = status;
                self.progress = fraction;
            }
            Msg::Loaded { load, .. } if load != self.load_id.get() => return false,
            Msg::Loaded { result: Ok((engine, report)), .. } => {
                self.load_report = Some(report);
                self.phase = Phase::Ready;
                self.progress = Some(1.0);
                self.status = match &self.model {
                    Some(name) => format!("model {name} loaded: ready"),
                    None => "model loaded: ready".to_string(),
                };
                self.base = Some(engine.clone());
                self.engine = Some(engine);
                self.edit = BiasEdit::default();
                self.trained_ppl = None;
                self.backend.new_model();
                self.warm_gpu(ctx);
                if self.heldout.is_none() {
                    let link = ctx.link().clone();
                    spawn_local(
                        async move { link.send_message(Msg::Heldout(fetch_text(HELDOUT_URL).await)) },
                    );
                    let link = ctx.link().clone();
                    spawn_local(async move { link.send_message(Msg::Shipped(fetch_shipped().await)) });
                }
                self.maybe_load_initial(ctx);
            }
            Msg::Loaded { result: Err(e), .. } => {
                self.phase = Phase::LoadFailed;
                self.status = "model failed to load".to_string();
                let name = self.model.as_deref().unwrap_or("?");
                self.error = Some(format!("Could not load the model {name}: {e}"));
            }
            Msg::InitialProgress { load, status } => match &mut self.initial {
                Some(i) if load == self.load_id.get() && matches!(i.state, CompareState::Loading(_)) => {
                    i.state = CompareState::Loading(status.into());
                }
                _ => return false,
            },
            Msg::InitialLoaded { load, result } => {
                let Some(i) = self.initial.as_mut().filter(|_| load == self.load_id.get()) else {
                    return false;
                };
                i.state = match result {
                    Ok(engine) => CompareState::Ready(EngineRef(engine)),
                    Err(e) => CompareState::Failed(format!("Could not load {}: {e}", i.name).into()),
                };
            }
            Msg::Edit(field, value) => match field {
                Field::Prompt => self.prompt = value,
                Field::MaxTokens => self.max_tokens = value,
                Field::Temperature => self.temperature = value,
                Field::TopK => self.top_k = value,
                Field::TopP => self.top_p = value,
                Field::Seed => self.seed = value,
            },
            Msg::Generate => {
                if self.running {
                    return false;
                }
                let Some(engine) = self.engine.clone() else {
                    self.error = Some("The model is not loaded yet.".to_string());
                    return true;
                };
                let settings = match self.settings() {
                    Ok(s) => s,
                    Err(e) => {
                        self.error = Some(e);
                        return true;
                    }
                };
                self.error = None;
                self.run_id = self.run_id.wrapping_add(1);
                self.running = true;
                self.stop = Rc::new(Cell::new(false));
                self.shown_prompt = self.prompt.clone();
                self.output.clear();
                self.output_model = self.model.clone().unwrap_or_default();
                self.output_cut_by_switch = false;
                self.prefill = None;
                self.decode = None;
                self.status = "tokenizing…".to_string();
                let gpu = match (self.backend.active(), &self.gpu_ctx) {
                    (Active::Gpu, Some(c)) => Some((c.clone(), self.gpu_slot.clone())),
                    _ => None,
                };
                self.run_backend = Some(if gpu.is_some() { Active::Gpu } else { Active::Cpu });
                spawn_local(generate(
                    ctx.link().clone(),
                    engine,
                    gpu,
                    self.prompt.clone(),
                    settings,
                    self.run_id,
                    self.stop.clone(),
                ));
            }
            Msg::Stop => {
                if !self.running {
                    return false;
                }
                self.stop.set(true);
                self.status = "stopping…".to_string();
            }
            Msg::DismissError => self.error = None,
            Msg::RunStatus { run, status } => {
                if run != self.run_id {
                    return false;
                }
                self.status = status;
            }
            Msg::Prefilled { run, stats } => {
                if run != self.run_id {
                    return false;
                }
                self.prefill = Some(stats);
                self.status = "generating…".to_string();
            }
            Msg::Token { run, text, stats } => {
                if run != self.run_id {
                    return false;
                }
                self.output = text;
                self.decode = Some(stats);
                self.status = format!("generating… {} tokens", stats.tokens);
            }
            Msg::Finished { run, result } => {
                if run != self.run_id {
                    return false;
                }
                self.running = false;
                self.trace_text = Rc::new(format!("{}{}", self.shown_prompt, self.output));
                match result {
                    Ok(status) => self.status = status,
                    Err(e) => {
                        self.status = "generation failed".to_string();
                        self.error = Some(format!("Generation failed: {e}"));
                    }
                }
            }
            Msg::Tab(tab) => {
                self.tab = tab;
                self.maybe_load_initial(ctx);
            }
            Msg::BiasEdited(edit) => {
                let Some(base) = self.base.clone() else {
                    return false;
                };
                match base.edited(&edit) {
                    Ok(engine) => {
                        self.engine = Some(Rc::new(engine));
                        self.edit = edit;
                        self.error = None;
                    }
                    // Keep the last valid model; the sliders show the refused value's neighbour.
                    Err(e) => self.error = Some(format!("That bias setting was not applied: {e}")),
                }
            }
            Msg::Heldout(result) => {
                self.heldout = Some(match result {
                    Ok(text) if !text.trim().is_empty() => (Rc::new(text), HELDOUT_URL.to_string()),
                    Ok(_) | Err(_) => (
                        Rc::new(crate::lab::FALLBACK_TEXT.to_string()),
                        format!("{HELDOUT_URL} is missing: the built-in sample text instead"),
                    ),
                });
            }
            Msg::Shipped(shipped) => self.shipped = shipped,
            Msg::PplDone(engine, points) => {
                if self.base.as_ref().is_some_and(|b| Rc::ptr_eq(b, &engine.0)) {
                    self.trained_ppl = Some(points);
                }
            }
            Msg::Laa(name, layers) => {
                let mut overlay = (*self.laa_overlay).clone();
                overlay.insert(name, layers);
                self.laa_overlay = Rc::new(overlay);
                return false;
            }
            Msg::GpuProbed(Ok((gpu_ctx, adapter))) => {
                self.backend.probe = Probe::Ready { adapter };
                self.gpu_ctx = Some(gpu_ctx);
                self.warm_gpu(ctx);
            }
            Msg::GpuProbed(Err(failure)) => self.backend.fail(failure),
            Msg::GpuFailed { load, failure } => {
                if failure.is_model_specific() && load.is_some_and(|l| l != self.load_id.get()) {
                    return false;
                }
                if !failure.is_model_specific() {
                    // The device is gone or misbehaves: free the GPU model, stay on the CPU.
                    self.gpu_slot.clear();
                }
                self.backend.fail(failure);
            }
            Msg::RunBackend { run, backend } => {
                if run != self.run_id {
                    return false;
                }
                self.run_backend = Some(backend);
            }
            Msg::ForceCpu(force) => {
                self.backend.force_cpu = force;
                self.warm_gpu(ctx);
            }
            Msg::RetryGpu => {
                if !self.backend.can_retry() {
                    return false;
                }
                // Free the lost device's model; a run still on it has stopped (the GPU failed).
                self.gpu_slot.clear();
                self.gpu_ctx = None;
                self.backend.retry();
                self.probes += 1;
                let link = ctx.link().clone();
                spawn_local(async move { link.send_message(Msg::GpuProbed(gpu::probe().await)) });
            }
            Msg::ForgetCache => {
                let link = ctx.link().clone();
                spawn_local(async move { link.send_message(Msg::CacheForgotten(store::clear().await)) });
            }
            Msg::CacheForgotten(result) => {
                self.cache_note = Some(match result {
                    Ok(()) => "cached models forgotten: the next load fetches from the network".to_string(),
                    Err(e) => format!("the browser cache could not be emptied: {e}"),
                });
            }
        }
        true
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let link = ctx.link();
        let text_input = |field: fn() -> Field| {
            link.callback(move |e: InputEvent| {
                Msg::Edit(field(), e.target_unchecked_into::<HtmlInputElement>().value())
            })
        };
        let on_prompt = link.callback(|e: InputEvent| {
            Msg::Edit(Field::Prompt, e.target_unchecked_into::<HtmlTextAreaElement>().value())
        });
        let on_keydown = link.batch_callback(|e: KeyboardEvent| {
            (e.key() == "Enter" && (e.ctrl_key() || e.meta_key())).then_some(Msg::Generate)
        });
        let ready = self.phase == Phase::Ready;
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
                    <button class="dismiss" title="Dismiss" onclick={link.callback(|_| Msg::DismissError)}>
                        { "×" }
                    </button>
                </div>
            },
            None => html! {},
        };
        html! {
            <main class="app" data-state={state}>
                <header>
                    <h1>{ "attnlab" }</h1>
                    { self.view_backend(ctx) }
                </header>
                <p class="tagline">
                    { "Small language models with steerable attention variants, \
                       running entirely in your browser." }
                </p>
                { self.view_picker(ctx) }
                { self.view_load(ctx) }
                { error }
                <section class="controls">
                    <label for="prompt">{ "Prompt" }</label>
                    <textarea id="prompt" rows="4" value={self.prompt.clone()} oninput={on_prompt}
                        onkeydown={on_keydown} spellcheck="false"></textarea>
                    <div class="settings">
                        <label>{ "max tokens" }
                            <input id="max-tokens" type="number" min="1" max={MAX_TOKENS_LIMIT.to_string()}
                                step="1" value={self.max_tokens.clone()}
                                oninput={text_input(|| Field::MaxTokens)}/>
                        </label>
                        <label>{ "temperature" }
                            <input id="temperature" type="number" min="0" max="10" step="0.05"
                                value={self.temperature.clone()} oninput={text_input(|| Field::Temperature)}/>
                        </label>
                        <label title="0 = off">{ "top-k" }
                            <input id="top-k" type="number" min="0" step="1"
                                value={self.top_k.clone()} oninput={text_input(|| Field::TopK)}/>
                        </label>
                        <label title="1 = off">{ "top-p" }
                            <input id="top-p" type="number" min="0.01" max="1" step="0.01"
                                value={self.top_p.clone()} oninput={text_input(|| Field::TopP)}/>
                        </label>
                        <label>{ "seed" }
                            <input id="seed" type="number" min="0" step="1"
                                value={self.seed.clone()} oninput={text_input(|| Field::Seed)}/>
                        </label>
                    </div>
                    <div class="buttons">
                        <button id="generate" class="primary" disabled={!ready || self.running}
                            onclick={link.callback(|_| Msg::Generate)}>{ "Generate" }</button>
                        <button id="stop" disabled={!self.running}
                            onclick={link.callback(|_| Msg::Stop)}>{ "Stop" }</button>
                        <span class="hint muted">{ "Ctrl+Enter generates" }</span>
                    </div>
                </section>
                <section class="output">
                    <h2>{ "Output" }</h2>
                    <pre id="output" aria-live="polite">
                        <span class="prompt-echo">{ &self.shown_prompt }</span>
                        <span id="generated" class="generated">{ &self.output }</span>
                    </pre>
                    if !self.output_model.is_empty() {
                        <p id="output-model" class="muted" data-model={self.output_model.clone()}
                            data-cut={self.output_cut_by_switch.to_string()}>
                            { format!("written by {}", self.output_model) }
                            if self.output_cut_by_switch {
                                { " · stopped early: the model was switched while it was generating" }
                            }
                        </p>
                    }
                    { self.view_stats() }
                </section>
                { self.view_lab(ctx) }
            </main>
        }
    }
}

/// The models index, or `Ok(None)` when the server has none (the page then loads
/// `models/default/`). A corrupt index is an error, never a panic.
async fn fetch_index() -> Result<Option<ModelIndex>, String> {
    let path = models::index_url();
    let Some(pending) = fetch::open_optional(&path).await? else {
        return Ok(None);
    };
    let bytes = pending.read(|_| {}).await?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{path}: not valid UTF-8"))?;
    models::parse_index(&text).map(Some)
}

/// Where a model's files came from: shown under the model's description.
#[derive(Clone, Default, PartialEq)]
pub struct LoadReport {
    /// Files read from the browser cache, and fetched from the network.
    pub from_cache: usize,
    pub from_network: usize,
    /// Why the browser cache was not used (or not written), when it was not.
    pub cache_off: Option<String>,
    /// One line per cached file that was corrupt and fetched again.
    pub notices: Vec<String>,
}

impl LoadReport {
    /// `data-source` of the line: "cache", "network" or "mixed".
    fn code(&self) -> &'static str {
        match (self.from_cache, self.from_network) {
            (_, 0) => "cache",
            (0, _) => "network",
            _ => "mixed",
        }
    }

    fn text(&self) -> String {
        let total = self.from_cache + self.from_network;
        let mut text = match (self.from_cache, self.from_network) {
            (_, 0) => "model files: from the browser cache (no download)".to_string(),
            (0, _) if self.cache_off.is_none() => {
                "model files: fetched from the network, now kept in the browser cache".to_string()
            }
            (0, _) => "model files: fetched from the network".to_string(),
            (c, _) => format!("model files: {c} of {total} from the browser cache, the rest fetched"),
        };
        if let Some(why) = &self.cache_off {
            text.push_str(&format!(" (not cached: {why})"));
        }
        text
    }
}

/// One model file: its bytes, the URL they belong to, and whether they came from the cache.
struct FileData {
    key: String,
    bytes: Vec<u8>,
    from_cache: bool,
    /// For a tokenizer: the model folder's URL that points at the shared tokenizer (`key`).
    via: Option<String>,
}

const SUPERSEDED: &str = "superseded by another model";

/// Fetch the three model files of `models/<model>/` and build the engine. Files in the browser
/// cache (`crate::store`) are read from there after their integrity value is checked; a corrupt
/// entry is deleted and fetched again with a notice, and cached files that verify but do not load
/// are fetched again too. Files fetched from the network are cached once the model has loaded.
/// `alive()` turning false (a newer load started) abandons the load between files and before the
/// parse.
async fn fetch_engine(
    model: &str,
    progress: impl Fn(String, Option<f64>),
    alive: impl Fn() -> bool,
) -> Result<(Engine, LoadReport), String> {
    let mut report = LoadReport::default();
    let cache = match store::ModelCache::open().await {
        Ok(c) => Some(c),
        Err(e) => {
            report.cache_off = Some(e);
            None
        }
    };
    let mut files = load_files(model, cache.as_ref(), &progress, &alive, &mut report).await?;
    let mut engine = parse_files(model, &files, &progress, &alive).await;
    if let (Err(e), Some(c)) = (&engine, &cache) {
        if e != SUPERSEDED && files.iter().any(|f| f.from_cache) {
            // The cached bytes match their integrity value but do not load: drop them, fetch anew.
            for f in files.iter().filter(|f| f.from_cache) {
                let _ = c.delete(&f.key).await;
                if let Some(via) = &f.via {
                    let _ = c.delete(via).await;
                }
            }
            report.notices.push(format!("cached files of {model} did not load ({e}): fetched again"));
            report.from_cache = 0;
            report.from_network = 0;
            files = load_files(model, None, &progress, &alive, &mut report).await?;
            engine = parse_files(model, &files, &progress, &alive).await;
        }
    }
    let engine = engine?;
    if let Some(c) = &cache {
        for f in files.iter().filter(|f| !f.from_cache) {
            let stored = match &f.via {
                Some(via) => match c.put(&f.key, &f.bytes).await {
                    Ok(()) => c.put_use(via, &f.key).await,
                    Err(e) => Err(e),
                },
                None => c.put(&f.key, &f.bytes).await,
            };
            if let Err(e) = stored {
                report.cache_off = Some(format!("the browser cache refused {} ({e})", f.key));
                break;
            }
        }
    }
    Ok((engine, report))
}

/// Validate and load the three files.
async fn parse_files(
    model: &str,
    files: &[FileData],
    progress: &impl Fn(String, Option<f64>),
    alive: &impl Fn() -> bool,
) -> Result<Engine, String> {
    let size: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
    progress(format!("validating {model} ({})…", fmt_bytes(size)), Some(1.0));
    // Let the status render before the synchronous parse.
    next_paint().await;
    if !alive() {
        return Err(SUPERSEDED.to_string());
    }
    match files {
        [config, weights, tokenizer] => Engine::load(&config.bytes, &weights.bytes, &tokenizer.bytes),
        _ => Err("internal error: expected three model files".to_string()),
    }
}

/// The three files of `models/<model>/`: from `cache` where it holds them intact, else from the
/// network (headers first, so the total size is known for the progress bar).
async fn load_files(
    model: &str,
    cache: Option<&store::ModelCache>,
    progress: &impl Fn(String, Option<f64>),
    alive: &impl Fn() -> bool,
    report: &mut LoadReport,
) -> Result<Vec<FileData>, String> {
    let shared = format!("models/{}", attnlab_core::catalog::SHARED_TOKENIZER);
    progress(format!("requesting the files of {model}…"), None);
    // Per file: the cached bytes, or the opened network response.
    enum Got {
        Cached(FileData),
        Network { key: String, via: Option<String>, pending: fetch::Pending },
    }
    let mut got = Vec::with_capacity(MODEL_FILES.len());
    for file in MODEL_FILES {
        let path = format!("models/{model}/{file}");
        let mut key = path.clone();
        let mut via = None;
        if let Some(c) = cache {
            let mut found = c.get(&key).await;
            if let Ok(store::Cached::Use(target)) = &found {
                // Only the collection's shared tokenizer may stand in for a model's own.
                if file == "tokenizer.json" && *target == shared {
                    via = Some(path.clone());
                    key = shared.clone();
                    found = c.get(&key).await;
                } else {
                    found = Ok(store::Cached::Missing);
                }
            }
            match found {
                Ok(store::Cached::Bytes(bytes)) => {
                    report.from_cache += 1;
                    got.push(Got::Cached(FileData { key, bytes, from_cache: true, via }));
                    continue;
                }
                Ok(store::Cached::Corrupt(why)) => {
                    let _ = c.delete(&key).await;
                    let name = if via.is_some() { "shared tokenizer.json" } else { file };
                    report
                        .notices
                        .push(format!("cached {name} of {model} was corrupt ({why}): fetched again"));
                }
                Ok(store::Cached::Missing | store::Cached::Use(_)) => {}
                Err(e) => report.cache_off = Some(format!("reading the browser cache failed ({e})")),
            }
        }
        let pending = if via.is_some() {
            fetch::open(&key).await?
        } else if file == "tokenizer.json" {
            // A model listed in an index may use the folder's shared tokenizer (core
            // catalog::SHARED_TOKENIZER) instead of its own copy.
            match fetch::open_optional(&path).await? {
                Some(p) => p,
                None => {
                    via = Some(path.clone());
                    key = shared.clone();
                    fetch::open(&key)
                        .await
                        .map_err(|e| format!("{path} is missing and so is the shared tokenizer ({e})"))?
                }
            }
        } else {
            fetch::open(&path).await?
        };
        got.push(Got::Network { key, via, pending });
    }
    let total: Option<u64> = got
        .iter()
        .map(|g| match g {
            Got::Cached(_) => Some(0),
            Got::Network { pending, .. } => pending.total,
        })
        .sum();
    if total == Some(0) {
        progress(format!("reading {model} from the browser cache…"), Some(1.0));
    }
    let mut done: u64 = 0;
    let mut files = Vec::with_capacity(MODEL_FILES.len());
    for (file, g) in MODEL_FILES.into_iter().zip(got) {
        if !alive() {
            return Err(SUPERSEDED.to_string());
        }
        let (key, via, pending) = match g {
            Got::Cached(f) => {
                files.push(f);
                continue;
            }
            Got::Network { key, via, pending } => (key, via, pending),
        };
        let base = done;
        let mut last_sent: u64 = 0;
        let bytes = pending
            .read(|n| {
                // Throttle re-renders: every 256 KiB is plenty for a progress bar.
                if n < last_sent + (256 << 10) && n != 0 {
                    return;
                }
                last_sent = n;
                let so_far = base + n;
                match total {
                    Some(t) => progress(
                        format!("fetching {model}/{file}: {} of {}", fmt_bytes(so_far), fmt_bytes(t)),
                        Some((so_far as f64 / t.max(1) as f64).min(1.0)),
                    ),
                    None => progress(format!("fetching {model}/{file}: {}", fmt_bytes(so_far)), None),
                }
            })
            .await?;
        done += bytes.len() as u64;
        report.from_network += 1;
        files.push(FileData { key, bytes, from_cache: false, via });
    }
    Ok(files)
}

/// One generation: prefill in one task, then one token per task. With `gpu`, on WebGPU: a GPU
/// failure before the first token reruns the generation on the CPU, one later stops it with the
/// text so far kept; either way the page turns to the CPU with a notice.
async fn generate(
    link: Scope<App>,
    engine: Rc<Engine>,
    gpu: Option<(GpuContext, GpuSlot)>,
    prompt: String,
    settings: GenSettings,
    run: u32,
    stop: Rc<Cell<bool>>,
) {
    let result = match gpu {
        None => generate_tokens(&link, &engine, &prompt, settings, run, &stop).await,
        Some((ctx, slot)) => {
            match generate_gpu(&link, &engine, &ctx, &slot, &prompt, settings, run, &stop).await {
                Ok(status) => Ok(status),
                Err(GpuRunError::Input(e)) => Err(e),
                Err(GpuRunError::Gpu { failure, tokens: 0 }) => {
                    link.send_message(Msg::GpuFailed { load: None, failure });
                    link.send_message(Msg::RunBackend { run, backend: Active::Cpu });
                    generate_tokens(&link, &engine, &prompt, settings, run, &stop).await
                }
                Err(GpuRunError::Gpu { failure, tokens }) => {
                    let reason = failure.reason();
                    link.send_message(Msg::GpuFailed { load: None, failure });
                    Ok(format!("stopped after {tokens} tokens: {reason}; next runs use the CPU"))
                }
            }
        }
    };
    link.send_message(Msg::Finished { run, result });
}

/// Why a GPU run ended early: bad input (an error for the user), or the GPU after `tokens` tokens.
enum GpuRunError {
    Input(String),
    Gpu { failure: GpuFailure, tokens: usize },
}

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
#[allow(clippy::too_many_arguments)]
async fn generate_gpu(
    link: &Scope<App>,
    engine: &Rc<Engine>,
    ctx: &GpuContext,
    slot: &GpuSlot,
    prompt: &str,
    settings: GenSettings,
    run: u32,
    stop: &Cell<bool>,
) -> Result<String, GpuRunError> {
    yield_now().await;
    let mut decoder = engine.decoder(prompt, &settings).map_err(GpuRunError::Input)?;
    let gpu_err = |tokens: usize| move |failure: GpuFailure| GpuRunError::Gpu { failure, tokens };
    let mut lease = slot.acquire().await.map_err(gpu_err(0))?;
    link.send_message(Msg::RunStatus { run, status: "uploading the model to the GPU…".to_string() });
    let model = lease.model_for(ctx, engine).await.map_err(gpu_err(0))?;
    let mut session = model.session().await.map_err(|e| gpu_err(0)(gpu::failure(e)))?;
    let prompt_tokens = decoder.prompt_len();
    link.send_message(Msg::RunStatus {
        run,
        status: format!("prefilling {prompt_tokens} prompt tokens on the GPU…"),
    });
    next_paint().await;
    if stop.get() {
        return Ok("stopped before prefill".to_string());
    }
    let t0 = now_ms();
    let logits = session.prefill(decoder.prompt_ids()).await.map_err(|e| gpu_err(0)(gpu::failure(e)))?;
    let prefill_ms = now_ms() - t0;
    link.send_message(Msg::Prefilled { run, stats: PrefillStats { tokens: prompt_tokens, ms: prefill_ms } });
    let wall_start = now_ms();
    let t = now_ms();
    let mut out: TokenOut = decoder.accept_logits(&logits).map_err(GpuRunError::Input)?;
    let mut compute_ms = now_ms() - t;
    loop {
        let tokens = decoder.generated_len();
        let finish = out.finish;
        link.send_message(Msg::Token {
            run,
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
        let id = if decoder.is_greedy() {
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

async fn generate_tokens(
    link: &Scope<App>,
    engine: &Engine,
    prompt: &str,
    settings: GenSettings,
    run: u32,
    stop: &Cell<bool>,
) -> Result<String, String> {
    // Yield first so the cleared output and the status render before any compute.
    yield_now().await;
    let mut generation = engine.start(prompt, &settings)?;
    let prompt_tokens = generation.prompt_len();
    link.send_message(Msg::RunStatus { run, status: format!("prefilling {prompt_tokens} prompt tokens…") });
    next_paint().await;
    if stop.get() {
        return Ok("stopped before prefill".to_string());
    }
    let t0 = now_ms();
    generation.prefill()?;
    let prefill_ms = now_ms() - t0;
    link.send_message(Msg::Prefilled { run, stats: PrefillStats { tokens: prompt_tokens, ms: prefill_ms } });
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
        link.send_message(Msg::Token {
            run,
            text: out.text,
            stats: DecodeStats { tokens, compute_ms, wall_ms: now_ms() - wall_start },
        });
        match out.finish {
            None => continue,
            Some(f) => return Ok(finish_status(tokens, f)),
        }
    }
}
