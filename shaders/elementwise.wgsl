// Element-wise epilogues over `rows × width` values: EW_GELU: y = gelu(y) (tanh form);
// EW_GELU_EXACT: y = gelu(y) (erf form); EW_SILU_GATE: y = y · silu(a) (SwiGLU and the GLA/RetNet
// output gate). The prelude, step.wgsl and activations.wgsl are prepended.

// `EwParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: EwParams;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= st.rows * p.width) {
        return;
    }
    if (p.op == EW_GELU) {
        y[i] = gelu(y[i]);
    } else if (p.op == EW_GELU_EXACT) {
        y[i] = gelu_exact(y[i]);
    } else {
        y[i] = y[i] * silu(a[i]);
    }
}
