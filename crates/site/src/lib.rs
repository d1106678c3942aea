//! attnlab-site: builds the attnlab page into a self-contained static site and serves it.
//!
//! `build` compiles `attnlab-web` for wasm32 with cargo, runs wasm-bindgen (as a library, the same
//! version as the `wasm-bindgen` crate) and writes the page, its assets and the model files into one
//! folder; `serve` is a small static file server for that folder. Together they replace trunk and
//! the separately installed wasm-bindgen-cli.

pub mod build;
pub mod html;
pub mod serve;
