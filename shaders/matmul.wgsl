// matmul / gemv family: y[r, y_off + o] (+)= Σ_i x[r·x_stride + x_off + i] · w[o·inp + i] (+ b[o])
// (w is a row-major [out, inp] torch-style Linear in f32, f16 or bf16 vectors (weights.wgsl), b its
// optional bias, added when `bias` is set); Step comes from step.wgsl (prepended).
// A workgroup computes a 64-row × 64-output tile: each invocation holds a 4 × 4 block of it in
// registers (rows ty + 16·i, outputs tx + 16·j), over 16-deep K tiles of x and w staged in
// workgroup memory. A single row (a decode step, the logits of a prefill) takes the gemv path.
// With inp a multiple of four, w is read a vector (four elements, one load) at a time.
// `last_only`: run only the last row of the step (logits of a prefill), written to output row 0.

// `MatmulParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: MatmulParams;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<WeightVec>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> b: array<f32>;

// Rows and outputs of a workgroup's tile (MATMUL_TILE, from the prelude; the host sizes the grid by
// it), K depth of a staged tile, and the 4 × 4 register block of an invocation.
const BT: u32 = MATMUL_TILE;
const BK: u32 = 16u;
const RB: u32 = 4u;

// The staged tiles, k-major: xs[k·BT + row], ws[k·BT + output].
var<workgroup> xs: array<f32, 1024>;
var<workgroup> ws: array<f32, 1024>;

// y[r, y_off + o] ← acc (+ b[o]), or += with `accumulate`.
fn store(r: u32, o: u32, acc: f32) {
    var v = acc;
    if (p.bias != 0u) {
        v = v + b[o];
    }
    let idx = r * p.y_stride + p.y_off + o;
    if (p.accumulate != 0u) {
        y[idx] = y[idx] + v;
    } else {
        y[idx] = v;
    }
}

@compute @workgroup_size(16, 16)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(local_invocation_index) li: u32,
) {
    var rows = st.rows;
    var row0 = 0u;
    if (p.last_only != 0u) {
        rows = 1u;
        row0 = st.rows - 1u;
    }
    // Uniform: st and p only.
    if (rows == 1u) {
        gemv(wg.x * BT, row0, li);
        return;
    }
    let r0 = wg.y * BT;
    let o0 = wg.x * BT;
    // The 4 × 4 block in four vec4 rows with constant component indices rather than an array
    // indexed by loop counters (which a driver may keep in local memory when naga's loop bounding
    // stops it from unrolling: gfx-rs/wgpu#7698).
    var acc0 = vec4<f32>();
    var acc1 = vec4<f32>();
    var acc2 = vec4<f32>();
    var acc3 = vec4<f32>();
    let inp = p.inp;
    for (var k0 = 0u; k0 < inp; k0 = k0 + BK) {
        // 256 invocations stage 64 × 16 values of each operand, four each, consecutive along k.
        for (var q = 0u; q < 4u; q = q + 1u) {
            let idx = li + 256u * q;
            let t = idx / BK;
            let k = k0 + idx % BK;
            var xv = 0.0;
            if (r0 + t < rows && k < inp) {
                xv = x[(row0 + r0 + t) * p.x_stride + p.x_off + k];
            }
            xs[(idx % BK) * BT + t] = xv;
        }
        stage_weights(o0, k0, li);
        workgroupBarrier();
        for (var k = 0u; k < BK; k = k + 1u) {
            let xo = k * BT + lid.y;
            let wo = k * BT + lid.x;
            let a = vec4<f32>(xs[xo], xs[xo + 16u], xs[xo + 32u], xs[xo + 48u]);
            let c = vec4<f32>(ws[wo], ws[wo + 16u], ws[wo + 32u], ws[wo + 48u]);
            acc0 = acc0 + a.x * c;
            acc1 = acc1 + a.y * c;
            acc2 = acc2 + a.z * c;
            acc3 = acc3 + a.w * c;
        }
        workgroupBarrier();
    }
    store_row(r0 + lid.y, o0 + lid.x, rows, acc0);
    store_row(r0 + lid.y + 16u, o0 + lid.x, rows, acc1);
    store_row(r0 + lid.y + 32u, o0 + lid.x, rows, acc2);
    store_row(r0 + lid.y + 48u, o0 + lid.x, rows, acc3);
}

// Row r of a block: outputs o, o + 16, o + 32, o + 48.
fn store_row(r: u32, o: u32, rows: u32, acc: vec4<f32>) {
    for (var j = 0u; j < RB; j = j + 1u) {
        if (r < rows && o + 16u * j < p.outd) {
            store(r, o + 16u * j, acc[j]);
        }
    }
}

// ws ← w's tile at outputs o0.., depth k0..: with rows of whole vectors one vector per invocation
// (output o0 + li / 4, depth k0 + 4·(li mod 4)); else element by element, four each. Uniform: p.
fn stage_weights(o0: u32, k0: u32, li: u32) {
    if (p.inp % 4u == 0u) {
        let t = li / 4u;
        let kk = 4u * (li % 4u);
        var wv = vec4<f32>();
        if (o0 + t < p.outd && k0 + kk < p.inp) {
            wv = widen4(w[((o0 + t) * p.inp + k0 + kk) >> 2u]);
        }
        for (var j = 0u; j < 4u; j = j + 1u) {
            ws[(kk + j) * BT + t] = wv[j];
        }
        return;
    }
    for (var q = 0u; q < 4u; q = q + 1u) {
        let idx = li + 256u * q;
        let t = idx / BK;
        let k = k0 + idx % BK;
        var wv = 0.0;
        if (o0 + t < p.outd && k < p.inp) {
            let e = (o0 + t) * p.inp + k;
            wv = widen(w[weight_vec(e)], e);
        }
        ws[(idx % BK) * BT + t] = wv;
    }
}

// One row: outputs o0..o0 + 64 in four rounds of 16, each output's dot product split over 16
// consecutive invocations (consecutive vectors, or elements, of its weight row) and summed in
// workgroup memory.
fn gemv(o0: u32, row0: u32, li: u32) {
    let lane = li % 16u;
    let xb = row0 * p.x_stride + p.x_off;
    for (var g = 0u; g < 4u; g = g + 1u) {
        let o = o0 + 16u * g + li / 16u;
        var s = 0.0;
        if (o < p.outd && p.inp % 4u == 0u) {
            let v0 = o * p.inp / 4u;
            for (var j = lane; j < p.inp / 4u; j = j + 16u) {
                let wv = widen4(w[v0 + j]);
                let i = xb + 4u * j;
                s = s + x[i] * wv.x + x[i + 1u] * wv.y + x[i + 2u] * wv.z + x[i + 3u] * wv.w;
            }
        } else if (o < p.outd) {
            for (var i = lane; i < p.inp; i = i + 16u) {
                let e = o * p.inp + i;
                s = s + x[xb + i] * widen(w[weight_vec(e)], e);
            }
        }
        xs[li] = s;
        workgroupBarrier();
        if (lane == 0u && o < p.outd) {
            var t = 0.0;
            for (var k = 0u; k < 16u; k = k + 1u) {
                t = t + xs[li + k];
            }
            store(0u, o, t);
        }
        workgroupBarrier();
    }
}
