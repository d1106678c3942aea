//! The WebGPU side of generation (wasm only): probing the browser's GPU, keeping one model uploaded,
//! and mapping `attnlab_gpu` errors onto the page's [`GpuFailure`]. Nothing here unwraps a GPU
//! result: every failure becomes a [`GpuFailure`] and the page falls back to the CPU engine.

use std::cell::RefCell;
use std::rc::Rc;

use attnlab_gpu::{GpuContext, GpuError, GpuModel};
use gloo_timers::future::TimeoutFuture;

use crate::backend::GpuFailure;
use crate::engine::Engine;

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

/// Ask the browser for an adapter and device. Ok: the device and the adapter's name for the badge.
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

/// The GPU copy of one engine's model.
struct Uploaded {
    engine: Rc<Engine>,
    model: GpuModel,
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
            self.current = Some(Uploaded { engine: engine.clone(), model });
        }
        match self.current.as_mut() {
            Some(u) => Ok(&mut u.model),
            None => Err(GpuFailure::Other("internal error: no GPU model".to_string())),
        }
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
