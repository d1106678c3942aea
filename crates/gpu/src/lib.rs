//! wgpu backend (issue 4). Placeholder crate: the CPU reference in `attnlab-core` is the only backend today.
