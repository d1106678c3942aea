// Element-wise epilogues over `rows × width` values: EW_GELU: y = gelu(y) (tanh form);
// EW_SILU_GATE: y = y · silu(a) (SwiGLU and the GLA/RetNet output gate). The prelude and step.wgsl
// are prepended.

// `EwParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: EwParams;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

fn gelu(x: f32) -> f32 {
    let c = 0.7978846;
    let t = clamp(c * (x + 0.044715 * x * x * x), -15.0, 15.0);
    return 0.5 * x * (1.0 + tanh(t));
}

fn silu(x: f32) -> f32 {
    return x / (1.0 + exp(min(-x, 80.0)));
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= st.rows * p.width) {
        return;
    }
    if (p.op == EW_GELU) {
        y[i] = gelu(y[i]);
    } else {
        y[i] = y[i] * silu(a[i]);
    }
}
