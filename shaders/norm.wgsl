// Row norms over groups of `gsz` values (one workgroup per (group, row)):
// NORM_RMS: RMSNorm with gain, eps inside the root (residual norm, per-head norm of gla/regla/retnet);
// NORM_LAYER: LayerNorm with gain and bias (two-pass variance);
// NORM_SIMPLE_RMS: SimpleRMSNorm x / (rms + eps), no gain (TransNormer, T1 Diag, LRPE rmsnorm).
// The gain is indexed by the position inside the group. The prelude, step.wgsl, reduce.wgsl and
// norm_value.wgsl are prepended.

// `NormParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: NormParams;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> gain: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;

const WG: u32 = 64u;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let g = wg.x;
    let r = wg.y;
    // r is uniform per workgroup, so this early exit keeps barriers in uniform control flow.
    if (r >= st.rows) {
        return;
    }
    let xb = r * p.x_stride + g * p.gsz;
    let yb = r * p.y_stride + g * p.gsz;
    let n = f32(p.gsz);
    var s = 0.0;
    var ss = 0.0;
    for (var c = lid; c < p.gsz; c = c + WG) {
        let v = x[xb + c];
        s = s + v;
        ss = ss + v * v;
    }
    let sum = reduce_sum(lid, s);
    let sumsq = reduce_sum(lid, ss);
    let mean = sum / n;
    var dev = 0.0;
    for (var c = lid; c < p.gsz; c = c + WG) {
        let v = x[xb + c] - mean;
        dev = dev + v * v;
    }
    let var_ = reduce_sum(lid, dev) / n;
    for (var c = lid; c < p.gsz; c = c + WG) {
        var gc = 1.0;
        var bc = 0.0;
        if (p.kind != NORM_SIMPLE_RMS) {
            gc = gain[c];
        }
        if (p.kind == NORM_LAYER) {
            bc = bias[c];
        }
        y[yb + c] = norm_value(p.kind, x[xb + c], mean, sumsq / n, var_, p.eps, gc, bc);
    }
}
