//! The browser APIs that the page and its worker both use, from whichever global scope runs the
//! code: a `Window` (the page) or a `DedicatedWorkerGlobalScope` (the model's worker). Both offer
//! fetch, the Cache API, `performance` and `navigator.gpu`; only the Rust types differ.

use js_sys::Reflect;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{Window, WorkerGlobalScope};

/// Whether this code runs in a worker (no DOM).
pub fn is_worker() -> bool {
    js_sys::global().dyn_ref::<WorkerGlobalScope>().is_some()
}

/// `fetch(path)`, relative to the page (the worker script sits beside it).
pub fn fetch(path: &str) -> Result<js_sys::Promise, String> {
    let global = js_sys::global();
    if let Some(w) = global.dyn_ref::<Window>() {
        Ok(w.fetch_with_str(path))
    } else if let Some(w) = global.dyn_ref::<WorkerGlobalScope>() {
        Ok(w.fetch_with_str(path))
    } else {
        Err("no fetch in this global scope".to_string())
    }
}

/// A property of the global scope (`caches`, `navigator`), `None` when absent.
pub fn property(name: &str) -> Option<JsValue> {
    Reflect::get(&js_sys::global(), &JsValue::from_str(name))
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}

thread_local! {
    /// `performance`, looked up once: the decode loop reads the clock several times a token.
    static PERFORMANCE: Option<web_sys::Performance> =
        property("performance").and_then(|p| p.dyn_into().ok());
}

/// Milliseconds from `performance.now()` (falls back to `Date.now()`).
pub fn now_ms() -> f64 {
    PERFORMANCE.with(|p| p.as_ref().map(|p| p.now())).unwrap_or_else(js_sys::Date::now)
}

/// `navigator.gpu`, when this scope has WebGPU.
pub fn navigator_gpu() -> Option<JsValue> {
    let navigator = property("navigator")?;
    Reflect::get(&navigator, &JsValue::from_str("gpu")).ok().filter(|v| !v.is_undefined() && !v.is_null())
}
