//! attnlab-web: the browser app (yew, client-side rendering), built by trunk from the root index.html.
//!
//! `engine` is the only module that calls attnlab-core; it is plain Rust and is also compiled (and
//! unit-tested) on native targets. The UI modules exist only on wasm32.

pub mod engine;

#[cfg(target_arch = "wasm32")]
mod app;
#[cfg(target_arch = "wasm32")]
mod fetch;
#[cfg(target_arch = "wasm32")]
mod yield_now;

/// Mount the app on `<body>`. Called by the binary's `main` in the browser.
#[cfg(target_arch = "wasm32")]
pub fn run() {
    console_error_panic_hook::set_once();
    yew::Renderer::<app::App>::new().render();
}
