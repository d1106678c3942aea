// Snippet (prepended by crates/gpu/src/shaders.rs, WGSL has no includes): the step uniform every
// forward kernel binds at 1, the step's row count and the absolute position of its first row.
// Rust twin: params::Step.

// `Step` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(1) var<uniform> st: Step;

