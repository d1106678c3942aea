//! The browser cache of model files (the Cache API, cache [`CACHE_NAME`]).
//!
//! Entries are keyed by the file's URL relative to the page (the Cache API resolves it against the
//! document, so a site under a subpath keeps its own entries). Each stored response carries the
//! file's integrity value ([`crate::integrity`]) in a header; [`ModelCache::get`] checks it and
//! reports a mismatch as [`Cached::Corrupt`], so the caller deletes the entry and fetches the file
//! again. A model folder without its own tokenizer gets a marker entry at its tokenizer URL naming
//! the shared one ([`USE_HEADER`]), so a cached model needs no request at all.
//!
//! Without the Cache API (an insecure context, storage disabled) [`ModelCache::open`] fails with a
//! reason and the page loads from the network as before. Nothing here unwraps a JS result.

use js_sys::Uint8Array;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{Cache, CacheStorage, Headers, Response, ResponseInit};

use crate::fetch::js_error_text;
use crate::integrity;

/// The Cache API cache holding model files; a new format gets a new name.
pub const CACHE_NAME: &str = "attnlab-models-v1";
/// Header of a marker entry: the file lives at this other URL (the collection's shared tokenizer).
pub const USE_HEADER: &str = "x-attnlab-use";

/// What the cache holds for a URL.
pub enum Cached {
    Missing,
    /// The file, its integrity verified.
    Bytes(Vec<u8>),
    /// A marker: the file is the one at this URL.
    Use(String),
    /// The stored bytes do not match their integrity value (why).
    Corrupt(String),
}

/// The `CacheStorage` of the page, when the browser offers it here.
fn storage() -> Result<CacheStorage, String> {
    let Some(caches) = crate::global::property("caches") else {
        return Err("the browser's Cache API is not available here (not a secure context?)".to_string());
    };
    caches.dyn_into().map_err(|_| "caches is not a CacheStorage".to_string())
}

async fn settle(promise: Result<js_sys::Promise, JsValue>) -> Result<JsValue, String> {
    let promise = promise.map_err(|e| js_error_text(&e))?;
    JsFuture::from(promise).await.map_err(|e| js_error_text(&e))
}

/// Remove every cached model file (the page's "forget cached models").
pub async fn clear() -> Result<(), String> {
    let storage = storage()?;
    settle(Ok(storage.delete(CACHE_NAME))).await.map(|_| ())
}

/// The opened model cache.
pub struct ModelCache {
    cache: Cache,
}

impl ModelCache {
    /// Open (or create) the cache; the error is why the page cannot cache here.
    pub async fn open() -> Result<ModelCache, String> {
        let storage = storage()?;
        let cache = settle(Ok(storage.open(CACHE_NAME)))
            .await
            .map_err(|e| format!("the browser cache could not be opened ({e})"))?;
        let cache = cache.dyn_into().map_err(|_| "caches.open() did not give a Cache".to_string())?;
        Ok(ModelCache { cache })
    }

    /// The cached file at `path` (relative to the page), verified against its integrity value.
    pub async fn get(&self, path: &str) -> Result<Cached, String> {
        let found = settle(Ok(self.cache.match_with_str(path))).await?;
        if found.is_undefined() || found.is_null() {
            return Ok(Cached::Missing);
        }
        let response: Response = found
            .dyn_into()
            .map_err(|_| "the cache returned something that is not a Response".to_string())?;
        let headers = response.headers();
        if let Some(target) = headers.get(USE_HEADER).ok().flatten() {
            return Ok(Cached::Use(target));
        }
        let stored = headers.get(integrity::HEADER).ok().flatten();
        let buffer = settle(response.array_buffer()).await?;
        let bytes = Uint8Array::new(&buffer).to_vec();
        Ok(match integrity::verify(stored.as_deref(), &bytes) {
            Ok(()) => Cached::Bytes(bytes),
            Err(why) => Cached::Corrupt(why),
        })
    }

    /// Store `bytes` as the file at `path`, with their integrity value.
    pub async fn put(&self, path: &str, bytes: &[u8]) -> Result<(), String> {
        let headers = Headers::new().map_err(|e| js_error_text(&e))?;
        headers.set("content-type", "application/octet-stream").map_err(|e| js_error_text(&e))?;
        headers.set(integrity::HEADER, &integrity::value(bytes)).map_err(|e| js_error_text(&e))?;
        self.put_response(path, Some(&Uint8Array::from(bytes)), &headers).await
    }

    /// Store a marker: the file at `path` is the one at `target`.
    pub async fn put_use(&self, path: &str, target: &str) -> Result<(), String> {
        let headers = Headers::new().map_err(|e| js_error_text(&e))?;
        headers.set(USE_HEADER, target).map_err(|e| js_error_text(&e))?;
        self.put_response(path, None, &headers).await
    }

    async fn put_response(
        &self,
        path: &str,
        body: Option<&Uint8Array>,
        headers: &Headers,
    ) -> Result<(), String> {
        let init = ResponseInit::new();
        init.set_status(200);
        init.set_headers_headers(headers);
        let response = Response::new_with_opt_buffer_source_and_init(body.map(|b| b.as_ref()), &init)
            .map_err(|e| js_error_text(&e))?;
        settle(Ok(self.cache.put_with_str(path, &response))).await.map(|_| ())
    }

    /// Remove the entry of `path` (a missing entry is no error).
    pub async fn delete(&self, path: &str) -> Result<(), String> {
        settle(Ok(self.cache.delete_with_str(path))).await.map(|_| ())
    }
}
