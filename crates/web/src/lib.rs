//! attnlab-web: the browser app (yew, client-side rendering), built by attnlab-site (crates/site) from the root index.html.
//!
//! `engine` and `lab` run the model (plain Rust, also compiled and unit-tested natively), `models`
//! chooses it from the models index and the URL, `form` parses the generator's settings, `url_state`
//! reads and writes the page's state in its URL, `linked` what the views linked to the text shade
//! and mark, `compare` what compare mode computes (model B, presets, A − B, shared scales, clamped
//! selections, overlay lines), `colors` holds the colormaps (all tested natively
//! too); the UI modules exist only on wasm32:
//!
//! The model runs in a dedicated Web Worker (the same wasm module, started in the worker by `run`);
//! `protocol` holds the messages between the page and the worker (native, tested).
//!
//! - `app`: the root component (index, model loading, page status and errors, layout);
//! - `client`: the page's side of the worker (routing answers, tokens once per animation frame);
//! - `host`: the page's one interface to the model (load tickets, bias edits, backend, runs);
//! - `worker`: the worker (models, WebGPU device and backend, generation, analyses);
//! - `generate`: the generation tasks in the worker (CPU and WebGPU, chunked prefill);
//! - `tuner`: the worker's handle on the fine-tune module (`attnlab-tune`, fetched on first use);
//! - `loader`: model files from the browser cache or the network, and the page's other files;
//! - `local`: a model from the user's own files ("Open model…"; `open` decides what it needs);
//! - `panels`: the backend badge, the model picker, the generator, "train on this text" and the
//!   lab tabs;
//! - `views`: the lab views (kernels, perplexity, attention, LAA, gates);
//! - `share`: the page's state in its address (`url_state`), shared by the panels;
//! - `heatmap`, `plot`: canvas heatmaps and SVG charts; `export`: clipboard and downloads; `gpu`,
//!   `store`, `fetch`, `global`, `yield_now`: browser plumbing.

pub mod backend;
pub mod colors;
pub mod compare;
pub mod engine;
pub mod figure;
pub mod form;
pub mod integrity;
pub mod lab;
pub mod linked;
pub mod models;
pub mod open;
pub mod protocol;
pub mod results;
pub mod url_state;

#[cfg(target_arch = "wasm32")]
mod app;
#[cfg(target_arch = "wasm32")]
mod client;
#[cfg(target_arch = "wasm32")]
mod export;
#[cfg(target_arch = "wasm32")]
mod fetch;
#[cfg(target_arch = "wasm32")]
mod generate;
#[cfg(target_arch = "wasm32")]
mod global;
#[cfg(target_arch = "wasm32")]
mod gpu;
#[cfg(target_arch = "wasm32")]
mod heatmap;
#[cfg(target_arch = "wasm32")]
mod host;
#[cfg(target_arch = "wasm32")]
mod loader;
#[cfg(target_arch = "wasm32")]
mod local;
#[cfg(target_arch = "wasm32")]
mod panels;
#[cfg(target_arch = "wasm32")]
mod plot;
#[cfg(target_arch = "wasm32")]
mod share;
#[cfg(target_arch = "wasm32")]
mod store;
#[cfg(target_arch = "wasm32")]
mod tuner;
#[cfg(target_arch = "wasm32")]
mod views;
#[cfg(target_arch = "wasm32")]
mod worker;
#[cfg(target_arch = "wasm32")]
mod yield_now;

/// Mount the app on `<body>`, or, in the page's worker, run the model's side. Called by the
/// binary's `main` in the browser (the worker script imports the same module).
#[cfg(target_arch = "wasm32")]
pub fn run() {
    console_error_panic_hook::set_once();
    if global::is_worker() {
        worker::start();
    } else {
        yew::Renderer::<app::App>::new().render();
    }
}
