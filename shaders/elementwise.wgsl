// Element-wise epilogues over `rows × width` values: EW_GELU: y = gelu(y) (tanh form);
// EW_GELU_EXACT: y = gelu(y) (erf form); EW_SILU_GATE: y = y · silu(a) (SwiGLU and the GLA/RetNet
// output gate). The prelude and step.wgsl are prepended.

// `EwParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: EwParams;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

fn gelu(x: f32) -> f32 {
    let c = 0.7978846;
    let t = clamp(c * (x + 0.044715 * x * x * x), -15.0, 15.0);
    return 0.5 * x * (1.0 + tanh(t));
}

// erf by Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7 for x ≥ 0; odd symmetry for x < 0).
fn erf(x: f32) -> f32 {
    let z = abs(x);
    let t = 1.0 / (1.0 + 0.3275911 * z);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-z * z));
}

// GELU, exact: x·Φ(x) = ½x(1 + erf(x/√2)).
fn gelu_exact(x: f32) -> f32 {
    return 0.5 * x * (1.0 + erf(x * 0.70710678));
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
    } else if (p.op == EW_GELU_EXACT) {
        y[i] = gelu_exact(y[i]);
    } else {
        y[i] = y[i] * silu(a[i]);
    }
}
