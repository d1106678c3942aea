//! attnlab-web: the browser app (yew, client-side rendering), built by attnlab-site (crates/site) from the root index.html.
//!
//! `engine` and `lab` run the model (plain Rust, also compiled and unit-tested natively), `models`
//! chooses it from the models index and the URL, `form` parses the generator's settings, `colors`
//! holds the colormaps (all tested natively too); the UI modules exist only on wasm32:
//!
//! - `app`: the root component (index, model loading, page status and errors, layout);
//! - `host`: the one interface to the model and the GPU (load tickets, bias edits, backend, runs);
//! - `generate`: the generation tasks (CPU and WebGPU), reporting `RunEvent`s;
//! - `loader`: model files from the browser cache or the network, and the page's other files;
//! - `local`: a model from the user's own files ("Open model…"; `open` decides what it needs);
//! - `panels`: the backend badge, the model picker, the generator and the lab tabs;
//! - `views`: the lab views (kernels, perplexity, attention, LAA, gates);
//! - `heatmap`, `plot`: canvas heatmaps and SVG charts; `gpu`, `store`, `fetch`, `yield_now`: browser
//!   plumbing.

pub mod backend;
pub mod colors;
pub mod engine;
pub mod form;
pub mod integrity;
pub mod lab;
pub mod models;
pub mod open;
pub mod results;

#[cfg(target_arch = "wasm32")]
mod app;
#[cfg(target_arch = "wasm32")]
mod fetch;
#[cfg(target_arch = "wasm32")]
mod generate;
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
mod store;
#[cfg(target_arch = "wasm32")]
mod views;
#[cfg(target_arch = "wasm32")]
mod yield_now;

/// Mount the app on `<body>`. Called by the binary's `main` in the browser.
#[cfg(target_arch = "wasm32")]
pub fn run() {
    console_error_panic_hook::set_once();
    yew::Renderer::<app::App>::new().render();
}
