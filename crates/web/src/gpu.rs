//! The WebGPU side of generation (wasm only): probing the browser's GPU, keeping one model uploaded,
//! and mapping `attnlab_gpu` errors onto the page's [`GpuFailure`]. Nothing here unwraps a GPU
//! result: every failure becomes a [`GpuFailure`] and the page falls back to the CPU engine.

use std::cell::RefCell;
use std::rc::Rc;

use attnlab_core::analysis::{self, MapWindow};
use attnlab_core::attention::{AttnStage, LayerAttention, TraceRequest};
use attnlab_gpu::{GpuContext, GpuError, GpuModel, HeldTrace, MAX_MAP_SIDE};
use gloo_timers::future::TimeoutFuture;

use crate::backend::GpuFailure;
use crate::engine::Engine;
use crate::lab::{SweepCursor, TraceShape, TraceView, MAX_GPU_TRACE_TOKENS, MAX_TRACE_TOKENS};

/// The page's word for a GPU error.
pub fn failure(e: GpuError) -> GpuFailure {
    match e {
        // wgpu's message lists native backends "not compiled in": noise on a web page.
        GpuError::NoAdapter(_) => {
            GpuFailure::NoAdapter("navigator.gpu.requestAdapter() returned none".to_string())
        }
        GpuError::RequestDevice(d) => GpuFailure::RequestDevice(d),
        e @ GpuError::ModelTooLarge { .. } => GpuFailure::ModelTooLarge(e.to_string()),
        GpuError::Unsupported(d) => GpuFailure::Unsupported(d),
        GpuError::DeviceLost(d) => GpuFailure::DeviceLost(d),
        GpuError::OutOfMemory(d) => GpuFailure::OutOfMemory(d),
        other => GpuFailure::Other(other.to_string()),
    }
}

/// Whether `navigator.gpu` exists (WebGPU in a secure context).
fn has_navigator_gpu() -> bool {
    crate::global::navigator_gpu().is_some()
}

/// Ask the browser for an adapter and device. Ok: the device and the adapter's name for the badge
/// (with "shader-f16" when the device reads f16 matrices as f16).
pub async fn probe() -> Result<(GpuContext, String), GpuFailure> {
    if !has_navigator_gpu() {
        return Err(GpuFailure::NoWebGpu);
    }
    let ctx = GpuContext::new().await.map_err(failure)?;
    let raw = ctx.caps().adapter.clone();
    // caps.adapter is "<name> (<backend>)"; browsers often hide the name.
    let name = raw.strip_suffix(" (BrowserWebGpu)").unwrap_or(&raw).trim();
    let name = if name.is_empty() {
        js_adapter_name().await.unwrap_or_else(|| "browser adapter".to_string())
    } else {
        name.to_string()
    };
    let name = if ctx.caps().shader_f16 { format!("{name} · shader-f16") } else { name };
    Ok((ctx, name))
}

/// "vendor architecture description" from `GPUAdapter.info` (wgpu leaves the name empty on the web).
async fn js_adapter_name() -> Option<String> {
    use wasm_bindgen::JsCast;
    let get = |o: &wasm_bindgen::JsValue, k: &str| js_sys::Reflect::get(o, &k.into()).ok();
    let gpu = crate::global::navigator_gpu()?;
    let request: js_sys::Function = get(&gpu, "requestAdapter")?.dyn_into().ok()?;
    let promise: js_sys::Promise = request.call0(&gpu).ok()?.dyn_into().ok()?;
    let adapter = wasm_bindgen_futures::JsFuture::from(promise).await.ok()?;
    let info = get(&adapter, "info")?;
    let parts: Vec<String> = ["vendor", "architecture", "description"]
        .iter()
        .filter_map(|k| get(&info, k)?.as_string())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// The GPU copy of one engine's model, with the last trace it recorded (the zoom's tiles come from
/// it; it goes with the upload it belongs to).
struct Uploaded {
    engine: Rc<Engine>,
    model: GpuModel,
    trace: Option<KeptTrace>,
}

/// A trace kept on the GPU: which text and stage it is of.
struct KeptTrace {
    text: String,
    stage: AttnStage,
    held: HeldTrace,
}

#[derive(Default)]
struct SlotInner {
    current: Option<Uploaded>,
    busy: bool,
}

/// The one model kept on the GPU, shared by the warm-up upload and the generation tasks. A task
/// holds it through a [`Lease`] (never a `RefCell` borrow across an await).
#[derive(Clone, Default)]
pub struct GpuSlot(Rc<RefCell<SlotInner>>);

impl GpuSlot {
    /// Wait (up to 60 s) until no other task holds the model, then hold it.
    pub async fn acquire(&self) -> Result<Lease, GpuFailure> {
        for _ in 0..12_000 {
            if let Ok(mut inner) = self.0.try_borrow_mut() {
                if !inner.busy {
                    inner.busy = true;
                    return Ok(Lease { slot: self.clone(), current: inner.current.take() });
                }
            }
            TimeoutFuture::new(5).await;
        }
        Err(GpuFailure::Other("the GPU stayed busy with another task".to_string()))
    }

    /// Drop the uploaded model (frees its buffers once no lease holds it).
    pub fn clear(&self) {
        if let Ok(mut inner) = self.0.try_borrow_mut() {
            inner.current = None;
        }
    }
}

/// The same slot (not the same contents).
impl PartialEq for GpuSlot {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

/// Exclusive use of the GPU model; given back on drop (every exit path of a task).
pub struct Lease {
    slot: GpuSlot,
    current: Option<Uploaded>,
}

impl Lease {
    /// The GPU model of `engine`, uploading it first unless it is already there (a bias edit is a new
    /// engine, so the edited model is uploaded at its first generation).
    pub async fn model_for(
        &mut self,
        ctx: &GpuContext,
        engine: &Rc<Engine>,
    ) -> Result<&mut GpuModel, GpuFailure> {
        if !self.current.as_ref().is_some_and(|u| Rc::ptr_eq(&u.engine, engine)) {
            // Free the previous model before the new one is allocated.
            self.current = None;
            let model = GpuModel::new(ctx.clone(), &engine.model).await.map_err(failure)?;
            self.current = Some(Uploaded { engine: engine.clone(), model, trace: None });
        }
        match self.current.as_mut() {
            Some(u) => Ok(&mut u.model),
            None => Err(GpuFailure::Other("internal error: no GPU model".to_string())),
        }
    }

    /// Trace the first `MAX_GPU_TRACE_TOKENS` tokens of `text` on the GPU with `engine`'s model:
    /// maps binned to at most [`MAX_MAP_SIDE`] cells a side, gates for every token, and, when the
    /// maps are binned, LAA summaries from an exact trace of the first [`MAX_TRACE_TOKENS`]. The
    /// trace stays on the GPU for [`Lease::window`].
    pub async fn trace(
        &mut self,
        ctx: &GpuContext,
        engine: &Rc<Engine>,
        text: &str,
        stage: AttnStage,
    ) -> Result<TraceView, GpuTraceError> {
        let (ids, cut) = engine.trace_tokens(text, MAX_GPU_TRACE_TOKENS).map_err(GpuTraceError::Input)?;
        let model = self.model_for(ctx, engine).await?;
        let req = TraceRequest { attention: true, stage, gates: true };
        let (t, held) = model.trace_held(&ids, req, MAX_MAP_SIDE).await.map_err(failure)?;
        let summarize = |maps: &[LayerAttention]| analysis::summarize_attention(&engine.model, maps);
        let (summary_tokens, summaries) = if stage != AttnStage::Probabilities {
            (0, Vec::new())
        } else if t.stride == 1 {
            (ids.len(), summarize(&t.trace.attention))
        } else {
            let n = ids.len().min(MAX_TRACE_TOKENS);
            let req = TraceRequest { gates: false, ..req };
            let first = model.trace(&ids[..n], req, MAX_MAP_SIDE).await.map_err(failure)?;
            (n, summarize(&first.trace.attention))
        };
        if let Some(u) = self.current.as_mut() {
            u.trace = Some(KeptTrace { text: text.to_string(), stage, held });
        }
        let shape = TraceShape { cut, stride: t.stride, on_gpu: true, summary_tokens };
        Ok(engine.trace_view(&ids, shape, t.trace.attention, summaries, &t.trace.gates))
    }

    /// Layer `layer`'s maps over `window` of the GPU trace of `text` at `stage`, tracing it again
    /// first when the upload holds another (or none).
    pub async fn window(
        &mut self,
        ctx: &GpuContext,
        engine: &Rc<Engine>,
        text: &str,
        stage: AttnStage,
        layer: usize,
        window: MapWindow,
    ) -> Result<LayerAttention, GpuTraceError> {
        self.model_for(ctx, engine).await?;
        let held = |u: &Uploaded| u.trace.as_ref().is_some_and(|k| k.text == text && k.stage == stage);
        if !self.current.as_ref().is_some_and(held) {
            self.trace(ctx, engine, text, stage).await?;
        }
        let Some((u, k)) = self.current.as_ref().and_then(|u| Some((u, u.trace.as_ref()?))) else {
            return Err(GpuFailure::Other("internal error: no GPU trace".to_string()).into());
        };
        match u.model.map_window(&k.held, layer, window).await {
            Ok(maps) => Ok(maps),
            // A window outside the trace is the request's fault, not the GPU's.
            Err(GpuError::Unsupported(why)) => Err(GpuTraceError::Input(why)),
            Err(e) => Err(failure(e).into()),
        }
    }

    /// The rest of `cursor`'s current window scored on the GPU (one session, `max` tokens a
    /// slice); the cursor after it. A failure leaves `cursor` at the window's start.
    pub async fn score_window(
        &mut self,
        ctx: &GpuContext,
        engine: &Rc<Engine>,
        cursor: &SweepCursor,
        max: usize,
    ) -> Result<SweepCursor, GpuFailure> {
        let model = self.model_for(ctx, engine).await?;
        let vocab = model.config().vocab_size;
        let mut session = model.session().await.map_err(failure)?;
        let mut ahead = cursor.clone();
        while let Some(slice) = ahead.next(max) {
            let logits = session.prefill_all(ahead.input(&slice)).await.map_err(failure)?;
            let (nll, count) = analysis::score_rows(&logits, vocab, ahead.targets(&slice));
            ahead.record(&slice, nll, count);
            if ahead.next(max).is_none_or(|next| next.fresh) {
                break;
            }
        }
        Ok(ahead)
    }
}

/// Why a GPU trace gave nothing: the request (a bad window, an empty text) or the GPU.
pub enum GpuTraceError {
    Input(String),
    Gpu(GpuFailure),
}

impl From<GpuFailure> for GpuTraceError {
    fn from(f: GpuFailure) -> Self {
        GpuTraceError::Gpu(f)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Ok(mut inner) = self.slot.0.try_borrow_mut() {
            inner.current = self.current.take();
            inner.busy = false;
        }
    }
}
