// Snippet (prepended by crates/gpu/src/shaders.rs): sum, max and prefix sums over the 64
// invocations of a workgroup of 64 through the shared `red`. Called in uniform control flow by
// every invocation; the result is read by all of them.

const RED_WG: u32 = 64u;

var<workgroup> red: array<f32, 64>;

fn reduce_sum(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = RED_WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            red[lid] = red[lid] + red[lid + s];
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}

fn reduce_max(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = RED_WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}


// Inclusive prefix sum (Hillis–Steele): the invocation at `slot` gets (Σ_{s ≤ slot} v_s, Σ_s v_s).
// `slot` is any permutation of the local ids (RED_WG − 1 − lid gives suffix sums over the lanes).
fn prefix_sum(slot: u32, v: f32) -> vec2<f32> {
    red[slot] = v;
    workgroupBarrier();
    for (var off = 1u; off < RED_WG; off = off * 2u) {
        var t = 0.0;
        if (slot >= off) {
            t = red[slot - off];
        }
        workgroupBarrier();
        red[slot] = red[slot] + t;
        workgroupBarrier();
    }
    let out = vec2<f32>(red[slot], red[RED_WG - 1u]);
    workgroupBarrier();
    return out;
}
