//! wgpu backend of attnlab (issue 4): the core's forward pass (prefill and cached decode) for every
//! variant, with weights, activations, KV caches and recurrent states in GPU buffers.
//!
//! * [`GpuContext`]: adapter + device negotiation (limits and optional features read from the
//!   adapter, nothing optional assumed), device-loss and uncaptured-error capture.
//! * [`GpuModel`]: weights and prepared per-layer data (bias tables, cos/sin tables built on the
//!   CPU in f64) uploaded once from an [`attnlab_core::Model`].
//! * [`GpuSession`]: the decode state; [`GpuSession::prefill`], [`GpuSession::prefill_all`],
//!   [`GpuSession::step`] and [`GpuSession::step_greedy`] (argmax on the GPU).
//!
//! Readbacks only use `map_async`, so the same code runs in the browser; native callers drive the
//! futures with any executor (e.g. `pollster::block_on`): [`GpuContext`] polls the device itself.
//! WGSL lives in `shaders/` at the repository root ([`shaders::SHADERS`]).

mod context;
mod error;
mod model;
mod params;
pub mod shaders;
pub mod train;

pub use context::{GpuCaps, GpuContext, Traffic};
pub use error::{GpuError, Result};
pub use model::{
    linear_map_loop_iterations, GpuModel, GpuSampling, GpuSession, GpuTrace, HeldTrace, GREEDY_BATCH,
    MAX_MAP_SIDE,
};
pub use params::DEFAULT_SPLIT_KEYS;
