// Sampling on the GPU; the picked token is written both to `tok[0]` (the embedding input of the
// next step) and to `out[0]` (the only readback).
// main: greedy argmax (one workgroup of 64); ties resolve to the lowest id, like the CPU sampler.
// sample_top: temperature + top-k + top-p, the CPU sampler's procedure (attnlab_core::sampling) in
//   f32: weights w = exp(l/T − max/T) of finite logits, sorted by (w desc, id asc) with a bitonic
//   sort in `scratch`, truncated to top-k, then to the shortest prefix whose mass reaches top-p,
//   and picked by inverse CDF with the caller's uniform draw u (the CPU RNG's one draw per token).

// `SampleParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: SampleParams;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> tok: array<u32>;
@group(0) @binding(3) var<storage, read_write> outp: array<u32>;
// [npow2] weights (f32 bits), then [npow2] ids.
@group(0) @binding(4) var<storage, read_write> scratch: array<u32>;

var<workgroup> best_v: array<f32, 64>;
var<workgroup> best_i: array<u32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    var bv = -3.4e38;
    var bi = 0xffffffffu;
    for (var i = lid; i < p.vocab; i = i + 64u) {
        let v = logits[i];
        if (v > bv) {
            bv = v;
            bi = i;
        }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
    workgroupBarrier();
    for (var s = 32u; s > 0u; s = s / 2u) {
        if (lid < s) {
            let ov = best_v[lid + s];
            let oi = best_i[lid + s];
            if (ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid])) {
                best_v[lid] = ov;
                best_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        let t = min(best_i[0], p.vocab - 1u);
        tok[0] = t;
        outp[0] = t;
    }
}

const SW: u32 = 256u;
const F32_MAX: f32 = 3.4028234e38;

var<workgroup> red_v: array<f32, 256>;
var<workgroup> red_i: array<u32, 256>;
var<workgroup> shared_u: u32;
var<workgroup> shared_f: f32;

fn usable(v: f32) -> bool {
    // Not NaN (v != v) and not −∞.
    return v == v && v >= -F32_MAX;
}

// Sum of sorted weights [0, count).
fn sorted_sum(lid: u32, count: u32) -> f32 {
    var s = 0.0;
    for (var r = lid; r < count; r = r + SW) {
        s = s + bitcast<f32>(scratch[r]);
    }
    red_v[lid] = s;
    workgroupBarrier();
    for (var k = SW / 2u; k > 0u; k = k / 2u) {
        if (lid < k) {
            red_v[lid] = red_v[lid] + red_v[lid + k];
        }
        workgroupBarrier();
    }
    return workgroupUniformLoad(&red_v[0]);
}

// First rank r < count whose inclusive cumulative weight is > limit (or ≥ when `ge`); `count` when
// none. Each lane scans a contiguous chunk; chunk offsets come from an exclusive scan of chunk sums.
fn first_cum(lid: u32, count: u32, limit: f32, ge: bool) -> u32 {
    let chunk = (count + SW - 1u) / SW;
    let lo = min(lid * chunk, count);
    let hi = min(lo + chunk, count);
    var s = 0.0;
    for (var r = lo; r < hi; r = r + 1u) {
        s = s + bitcast<f32>(scratch[r]);
    }
    red_v[lid] = s;
    workgroupBarrier();
    if (lid == 0u) {
        var acc = 0.0;
        for (var t = 0u; t < SW; t = t + 1u) {
            let v = red_v[t];
            red_v[t] = acc;
            acc = acc + v;
        }
    }
    workgroupBarrier();
    var cum = red_v[lid];
    var found = count;
    for (var r = lo; r < hi; r = r + 1u) {
        cum = cum + bitcast<f32>(scratch[r]);
        if ((ge && cum >= limit) || (!ge && cum > limit)) {
            found = r;
            break;
        }
    }
    red_i[lid] = found;
    workgroupBarrier();
    for (var k = SW / 2u; k > 0u; k = k / 2u) {
        if (lid < k) {
            red_i[lid] = min(red_i[lid], red_i[lid + k]);
        }
        workgroupBarrier();
    }
    return workgroupUniformLoad(&red_i[0]);
}

fn pick(lid: u32, id: u32) {
    if (lid == 0u) {
        let t = min(id, p.vocab - 1u);
        tok[0] = t;
        outp[0] = t;
    }
}

@compute @workgroup_size(256)
fn sample_top(@builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let n = p.vocab;
    let np2 = p.npow2;
    // 1. Largest usable logit, lowest id on ties.
    var bv = -F32_MAX;
    var bi = 0xffffffffu;
    for (var i = lid; i < n; i = i + SW) {
        let v = logits[i];
        if (usable(v) && (v > bv || bi == 0xffffffffu)) {
            bv = v;
            bi = i;
        }
    }
    red_v[lid] = bv;
    red_i[lid] = bi;
    workgroupBarrier();
    for (var k = SW / 2u; k > 0u; k = k / 2u) {
        if (lid < k) {
            let ov = red_v[lid + k];
            let oi = red_i[lid + k];
            let take = oi != 0xffffffffu && (red_i[lid] == 0xffffffffu || ov > red_v[lid]
                || (ov == red_v[lid] && oi < red_i[lid]));
            if (take) {
                red_v[lid] = ov;
                red_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    let best_id = workgroupUniformLoad(&red_i[0]);
    let best = workgroupUniformLoad(&red_v[0]);
    if (p.temperature <= 0.0 || best > F32_MAX || best_id == 0xffffffffu) {
        pick(lid, best_id);
        return;
    }
    // 2. Weights (0 for unusable or underflowed logits, −1 for padding) and ids.
    let inv_t = 1.0 / p.temperature;
    for (var i = lid; i < np2; i = i + SW) {
        var w = -1.0;
        if (i < n) {
            w = 0.0;
            let v = logits[i];
            if (usable(v) && v <= F32_MAX) {
                w = exp(v * inv_t - best * inv_t);
            }
        }
        scratch[i] = bitcast<u32>(w);
        scratch[np2 + i] = i;
    }
    storageBarrier();
    workgroupBarrier();
    // 3. Bitonic sort, descending by weight, ascending by id on ties.
    for (var k = 2u; k <= np2; k = k * 2u) {
        for (var j = k / 2u; j > 0u; j = j / 2u) {
            for (var i = lid; i < np2; i = i + SW) {
                let l = i ^ j;
                if (l > i) {
                    let wi = bitcast<f32>(scratch[i]);
                    let wl = bitcast<f32>(scratch[l]);
                    let ii = scratch[np2 + i];
                    let il = scratch[np2 + l];
                    // `i` should come first (in descending order) when its key is larger.
                    let i_first = wi > wl || (wi == wl && ii < il);
                    let descending = (i & k) == 0u;
                    if (i_first != descending) {
                        scratch[i] = bitcast<u32>(wl);
                        scratch[l] = bitcast<u32>(wi);
                        scratch[np2 + i] = il;
                        scratch[np2 + l] = ii;
                    }
                }
            }
            storageBarrier();
            workgroupBarrier();
        }
    }
    // 4. Positive weights, then top-k.
    var pos = 0u;
    for (var i = lid; i < n; i = i + SW) {
        if (bitcast<f32>(scratch[i]) > 0.0) {
            pos = pos + 1u;
        }
    }
    red_i[lid] = pos;
    workgroupBarrier();
    for (var k = SW / 2u; k > 0u; k = k / 2u) {
        if (lid < k) {
            red_i[lid] = red_i[lid] + red_i[lid + k];
        }
        workgroupBarrier();
    }
    var kept = workgroupUniformLoad(&red_i[0]);
    if (p.top_k > 0u && p.top_k < kept) {
        kept = p.top_k;
    }
    // 5. Top-p: the shortest prefix whose share of the mass reaches top_p.
    if (p.top_p < 1.0) {
        let total = sorted_sum(lid, kept);
        let r = first_cum(lid, kept, p.top_p * total, true);
        if (r < kept) {
            kept = r + 1u;
        }
    }
    // 6. Inverse CDF with the caller's draw.
    let total = sorted_sum(lid, kept);
    var r = first_cum(lid, kept, p.u * total, false);
    if (r >= kept) {
        r = kept - 1u;
    }
    pick(lid, scratch[np2 + r]);
}
