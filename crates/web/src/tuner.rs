//! The worker's handle on the fine-tune module: `attnlab-tune` is a wasm module of its own (the
//! trainer's step: candle on the CPU, `Tuner`, or the WGSL trainer on WebGPU, `GpuTuner`, whose
//! calls return promises), so the page's bundle does not carry it. The worker script defines
//! `__attnlabLoadTune`, which fetches and starts it; the worker calls it on the first fine-tune and
//! keeps the module. Values cross as plain JS values: the model's two files as a string and bytes,
//! token ids, options and steps as JSON.

use std::cell::RefCell;

use attnlab_train::finetune::{TuneOptions, TuneStep};
use js_sys::{Array, Function, Promise, Reflect, Uint32Array, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

use crate::fetch::js_error_text;

/// The global the worker script sets to the module's loader (`attnlab-site` writes both).
const LOADER_GLOBAL: &str = "__attnlabLoadTune";

thread_local! {
    static MODULE: RefCell<Option<JsValue>> = const { RefCell::new(None) };
}

/// What a call into the module threw: its message (the module throws one-line strings).
fn thrown(e: JsValue) -> String {
    e.as_string().unwrap_or_else(|| js_error_text(&e))
}

/// The fine-tune module, fetched and started on first use.
async fn module() -> Result<JsValue, String> {
    if let Some(m) = MODULE.with(|m| m.borrow().clone()) {
        return Ok(m);
    }
    let load = crate::global::property(LOADER_GLOBAL)
        .and_then(|f| f.dyn_into::<Function>().ok())
        .ok_or("this page was built without its fine-tune module (attnlab-tune)")?;
    let loading = load.call0(&JsValue::NULL).map_err(thrown)?;
    let promise: Promise =
        loading.dyn_into().map_err(|_| "the fine-tune module's loader returned no promise")?;
    let m = JsFuture::from(promise)
        .await
        .map_err(|e| format!("the fine-tune module could not be loaded: {}", thrown(e)))?;
    MODULE.with(|slot| *slot.borrow_mut() = Some(m.clone()));
    Ok(m)
}

/// One fine-tune in the module (its `Tuner` or `GpuTuner`); freed when dropped.
pub struct RemoteTuner {
    obj: JsValue,
    /// Where its steps run: "WebGPU · <adapter>" or "the CPU (wasm)".
    pub device: String,
}

impl RemoteTuner {
    /// Start a fine-tune of the model given as its files on the token ids `tokens`, on WebGPU with
    /// `gpu` (the module's `GpuTuner.create`, a promise) or on the CPU.
    pub async fn new(
        config: &str,
        weights: &[u8],
        tokens: &[u32],
        options: &TuneOptions,
        gpu: bool,
    ) -> Result<Self, String> {
        let m = module().await?;
        let name = if gpu { "GpuTuner" } else { "Tuner" };
        let class: Function = Reflect::get(&m, &name.into())
            .ok()
            .and_then(|c| c.dyn_into().ok())
            .ok_or_else(|| format!("the fine-tune module has no {name}"))?;
        let options = serde_json::to_string(options).map_err(|e| e.to_string())?;
        let args = Array::of4(
            &config.into(),
            &Uint8Array::from(weights).into(),
            &Uint32Array::from(tokens).into(),
            &options.into(),
        );
        if !gpu {
            let obj = Reflect::construct(&class, &args).map_err(thrown)?;
            return Ok(RemoteTuner { obj, device: "the CPU (wasm)".into() });
        }
        let create: Function = Reflect::get(&class, &"create".into())
            .ok()
            .and_then(|f| f.dyn_into().ok())
            .ok_or("the fine-tune module's GpuTuner has no create()")?;
        let obj = settle(create.apply(&class, &args).map_err(thrown)?).await?;
        Ok(RemoteTuner { obj, device: "WebGPU".into() })
    }

    fn call(&self, name: &str) -> Result<JsValue, String> {
        let method: Function = Reflect::get(&self.obj, &name.into())
            .ok()
            .and_then(|f| f.dyn_into().ok())
            .ok_or_else(|| format!("the fine-tune module's Tuner has no {name}()"))?;
        method.call0(&self.obj).map_err(thrown)
    }

    fn number(&self, name: &str) -> Result<f64, String> {
        self.call(name)?.as_f64().ok_or_else(|| format!("the fine-tune module's {name}() gave no number"))
    }

    /// Tokens per training window.
    pub fn seq_len(&self) -> Result<usize, String> {
        Ok(self.number("seq_len")? as usize)
    }

    pub fn finished(&self) -> Result<bool, String> {
        Ok(self.call("finished")?.is_truthy())
    }

    /// A call's value, awaited when it is a promise (the GPU tuner's).
    async fn value(&self, name: &str) -> Result<JsValue, String> {
        settle(self.call(name)?).await
    }

    /// One optimizer step.
    pub async fn step(&self) -> Result<TuneStep, String> {
        let json =
            self.value("step").await?.as_string().ok_or("the fine-tune module's step() gave no text")?;
        serde_json::from_str(&json).map_err(|e| format!("the fine-tune module's step: {e}"))
    }

    /// Mean next-token loss over the whole text.
    pub async fn text_loss(&self) -> Result<f32, String> {
        let v = self.value("text_loss").await?;
        Ok(v.as_f64().ok_or("the fine-tune module's text_loss() gave no number")? as f32)
    }

    /// `model.safetensors` bytes of the model after the last finished step.
    pub async fn weights(&self) -> Result<Vec<u8>, String> {
        let bytes = self.value("weights").await?;
        bytes
            .dyn_into::<Uint8Array>()
            .map(|a| a.to_vec())
            .map_err(|_| "the fine-tune module's weights() gave no bytes".into())
    }
}

/// `v`, or what it resolves to when it is a promise (a rejection's message as the error).
async fn settle(v: JsValue) -> Result<JsValue, String> {
    match v.dyn_into::<Promise>() {
        Ok(p) => JsFuture::from(p).await.map_err(thrown),
        Err(v) => Ok(v),
    }
}

impl Drop for RemoteTuner {
    fn drop(&mut self) {
        let _ = self.call("free");
    }
}
