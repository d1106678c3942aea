//! attnlab-web: the browser app (yew, client-side rendering), built by trunk from the root index.html.
//!
//! `engine` and `lab` run the model (plain Rust, also compiled and unit-tested natively), `models`
//! chooses it from the models index and the URL, `colors` holds the colormaps (all tested natively
//! too); the UI modules exist only on wasm32.

pub mod backend;
pub mod colors;
pub mod engine;
pub mod form;
pub mod integrity;
pub mod lab;
pub mod models;
pub mod results;

#[cfg(target_arch = "wasm32")]
mod app;
#[cfg(target_arch = "wasm32")]
mod fetch;
#[cfg(target_arch = "wasm32")]
mod gpu;
#[cfg(target_arch = "wasm32")]
mod heatmap;
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
