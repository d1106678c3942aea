// Embeddings: x[r, c] = emb[tok[r], c]·emb_scale (+ pe[pos0 + r, c] for absolute positions; a
// sinusoidal table is built on the CPU in f64 by the core's `sinusoidal_embedding`); `emb` in the
// model's weight words (weights.wgsl). emb_scale is √d_model (Vaswani §3.4) or exactly 1.

// `EmbedParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: EmbedParams;
@group(0) @binding(2) var<storage, read> tok: array<u32>;
@group(0) @binding(3) var<storage, read> emb: array<WeightVec>;
@group(0) @binding(4) var<storage, read> pe: array<f32>;
@group(0) @binding(5) var<storage, read_write> x: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i >= st.rows * p.d) {
        return;
    }
    let r = i / p.d;
    let c = i % p.d;
    let t = min(tok[r], p.vocab - 1u);
    let e = t * p.d + c;
    var v = widen(emb[weight_vec(e)], e) * p.emb_scale;
    if (p.use_pe != 0u) {
        v = v + pe[(st.pos0 + r) * p.d + c];
    }
    x[i] = v;
}
