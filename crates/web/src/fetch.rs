//! Fetching the model files from the page's own origin, with byte progress.
//!
//! URLs are relative (`models/index.json`, `models/<name>/...`), so the built site works from any
//! subpath. Every failure (network, HTTP status, an HTML page where a data file was expected) becomes
//! a one-line message.

use js_sys::{Reflect, Uint8Array};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{ReadableStreamDefaultReader, Response};

/// A response whose headers have arrived; the body is read by [`Pending::read`].
pub struct Pending {
    path: String,
    response: Response,
    /// Body size from `Content-Length`, when known and not content-encoded.
    pub total: Option<u64>,
}

/// Human-readable text of a JS exception or rejection value.
pub fn js_error_text(value: &JsValue) -> String {
    if let Some(err) = value.dyn_ref::<js_sys::Error>() {
        return String::from(err.message());
    }
    if let Some(s) = value.as_string() {
        return s;
    }
    format!("{value:?}")
}

/// Start fetching `path` and wait for the response headers.
pub async fn open(path: &str) -> Result<Pending, String> {
    match open_inner(path, false).await? {
        Some(p) => Ok(p),
        None => Err(format!("{path}: not found")),
    }
}

/// Like [`open`], but a file the server does not have (HTTP 404, or a dev server's HTML fallback
/// page) is `Ok(None)` instead of an error: for optional files such as the models index.
pub async fn open_optional(path: &str) -> Result<Option<Pending>, String> {
    open_inner(path, true).await
}

async fn open_inner(path: &str, optional: bool) -> Result<Option<Pending>, String> {
    let value = JsFuture::from(crate::global::fetch(path)?)
        .await
        .map_err(|e| format!("{path}: network error: {}", js_error_text(&e)))?;
    let response: Response =
        value.dyn_into().map_err(|_| format!("{path}: fetch did not return a Response"))?;
    if optional && response.status() == 404 {
        return Ok(None);
    }
    if !response.ok() {
        let hint = if response.status() == 404 {
            " (the model files are missing on the server: ./scripts/serve.sh creates the default model)"
        } else {
            ""
        };
        return Err(format!("{path}: HTTP {} {}{hint}", response.status(), response.status_text()));
    }
    let headers = response.headers();
    let header = |name: &str| headers.get(name).ok().flatten();
    // A dev server answers unknown paths with index.html: that is a missing file, not a model.
    if header("content-type").is_some_and(|ct| ct.to_ascii_lowercase().starts_with("text/html")) {
        if optional {
            return Ok(None);
        }
        return Err(format!(
            "{path}: the server sent an HTML page instead of the file (is it missing from dist/models?)"
        ));
    }
    let encoded = header("content-encoding").is_some_and(|e| !e.trim().eq_ignore_ascii_case("identity"));
    let total = if encoded { None } else { header("content-length").and_then(|s| s.trim().parse().ok()) };
    Ok(Some(Pending { path: path.to_string(), response, total }))
}

impl Pending {
    /// Read the whole body, calling `on_progress(bytes_so_far)` after every chunk.
    pub async fn read(self, mut on_progress: impl FnMut(u64)) -> Result<Vec<u8>, String> {
        let path = self.path;
        let Some(body) = self.response.body() else {
            // No stream (e.g. an empty body): fall back to arrayBuffer().
            let promise =
                self.response.array_buffer().map_err(|e| format!("{path}: {}", js_error_text(&e)))?;
            let buffer =
                JsFuture::from(promise).await.map_err(|e| format!("{path}: {}", js_error_text(&e)))?;
            let bytes = Uint8Array::new(&buffer).to_vec();
            on_progress(bytes.len() as u64);
            return Ok(bytes);
        };
        let reader: ReadableStreamDefaultReader = body.get_reader().unchecked_into();
        let capacity = self.total.unwrap_or(0).min(1 << 30) as usize;
        let mut out: Vec<u8> = Vec::with_capacity(capacity);
        loop {
            let chunk = JsFuture::from(reader.read())
                .await
                .map_err(|e| format!("{path}: download interrupted: {}", js_error_text(&e)))?;
            let done = Reflect::get(&chunk, &JsValue::from_str("done"))
                .ok()
                .and_then(|v| v.as_bool())
                .unwrap_or(true);
            if done {
                break;
            }
            let value = Reflect::get(&chunk, &JsValue::from_str("value"))
                .map_err(|e| format!("{path}: {}", js_error_text(&e)))?;
            let bytes: Uint8Array =
                value.dyn_into().map_err(|_| format!("{path}: stream returned a non-byte chunk"))?;
            let start = out.len();
            out.resize(start + bytes.length() as usize, 0);
            bytes.copy_to(&mut out[start..]);
            on_progress(out.len() as u64);
        }
        Ok(out)
    }
}
