// matmul / gemv family: y[r, y_off + o] (+)= Σ_i x[r·x_stride + x_off + i] · w[o·inp + i] (+ b[o])
// (w is a row-major [out, inp] torch-style Linear in f32, f16 or bf16 words (weights.wgsl), b its
// optional bias, added when `bias` is set); Step comes from step.wgsl (prepended). 16×16 output tiles with shared-memory K tiles.
// `last_only`: run only the last row of the step (logits of a prefill), written to output row 0.

// `MatmulParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: MatmulParams;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> b: array<f32>;

const TILE: u32 = 16u;
var<workgroup> xs: array<array<f32, 16>, 16>;
var<workgroup> ws: array<array<f32, 16>, 16>;

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    var rows = st.rows;
    var row0 = 0u;
    if (p.last_only != 0u) {
        rows = 1u;
        row0 = st.rows - 1u;
    }
    let r = wg.y * TILE + lid.y;
    let o = wg.x * TILE + lid.x;
    let wrow = wg.x * TILE + lid.y;
    var acc = 0.0;
    let ntiles = (p.inp + TILE - 1u) / TILE;
    for (var t = 0u; t < ntiles; t = t + 1u) {
        let k = t * TILE + lid.x;
        var xv = 0.0;
        if (r < rows && k < p.inp) {
            xv = x[(row0 + r) * p.x_stride + p.x_off + k];
        }
        xs[lid.y][lid.x] = xv;
        var wv = 0.0;
        if (wrow < p.outd && k < p.inp) {
            let e = wrow * p.inp + k;
            wv = widen(w[weight_word(e)], e);
        }
        ws[lid.y][lid.x] = wv;
        workgroupBarrier();
        for (var i = 0u; i < TILE; i = i + 1u) {
            acc = acc + xs[lid.y][i] * ws[lid.x][i];
        }
        workgroupBarrier();
    }
    if (r < rows && o < p.outd) {
        if (p.bias != 0u) {
            acc = acc + b[o];
        }
        let idx = r * p.y_stride + p.y_off + o;
        if (p.accumulate != 0u) {
            y[idx] = y[idx] + acc;
        } else {
            y[idx] = acc;
        }
    }
}
