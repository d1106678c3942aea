// Introspection capture: copies this step's rows of an activation buffer ([rows, width], e.g. the
// rotated q of a softmax layer or the features and log-gates of a linear layer) into a trace buffer
// [capacity, width] at the step's absolute position (the rows start at word src_off of the source),
// so the attention-map kernels can read every position after the prefill. Only recorded into trace
// sessions (GpuModel::trace).

// `CaptureParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> cp: CaptureParams;
@group(0) @binding(2) var<storage, read> src: array<f32>;
@group(0) @binding(3) var<storage, read_write> dst: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    if (idx >= st.rows * cp.width || st.pos0 + idx / cp.width >= cp.capacity) {
        return;
    }
    dst[st.pos0 * cp.width + idx] = src[cp.src_off + idx];
}
