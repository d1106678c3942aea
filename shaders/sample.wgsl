// Greedy sampling on the GPU: argmax over the logits row (one workgroup), written as the next
// token both to `tok[0]` (the embedding input of the next step) and to `out[0]` (the readback).
// Ties resolve to the lowest id, like the CPU sampler's greedy path.

struct Params {
    vocab: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> tok: array<u32>;
@group(0) @binding(3) var<storage, read_write> outp: array<u32>;

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
