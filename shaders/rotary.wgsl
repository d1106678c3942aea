// Rotations + KV-cache store of a softmax layer, one invocation per (row, head): RoPE on q and k
// (adjacent pairs, cos/sin table [pos, dh/2, 2] built on the CPU in f64), q rotated in place in the
// fused qkv buffer [rows, 3a], rotated k and v written to the caches at absolute position pos0 + r.

// `RotaryParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: RotaryParams;
@group(0) @binding(2) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> cs: array<f32>;
@group(0) @binding(4) var<storage, read_write> kc: array<f32>;
@group(0) @binding(5) var<storage, read_write> vc: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    let r = idx / p.h;
    let hh = idx % p.h;
    if (r >= st.rows) {
        return;
    }
    let pos = st.pos0 + r;
    let qb = r * 3u * p.a + hh * p.dh;
    let kb = qb + p.a;
    let vb = qb + 2u * p.a;
    let half = p.dh / 2u;
    if (p.rope != 0u) {
        for (var k = 0u; k < half; k = k + 1u) {
            let c = cs[(pos * half + k) * 2u];
            let s = cs[(pos * half + k) * 2u + 1u];
            let q0 = qkv[qb + 2u * k];
            let q1 = qkv[qb + 2u * k + 1u];
            qkv[qb + 2u * k] = q0 * c - q1 * s;
            qkv[qb + 2u * k + 1u] = q1 * c + q0 * s;
            let k0 = qkv[kb + 2u * k];
            let k1 = qkv[kb + 2u * k + 1u];
            qkv[kb + 2u * k] = k0 * c - k1 * s;
            qkv[kb + 2u * k + 1u] = k1 * c + k0 * s;
        }
    }
    let cb = pos * p.a + hh * p.dh;
    for (var j = 0u; j < p.dh; j = j + 1u) {
        kc[cb + j] = qkv[kb + j];
        vc[cb + j] = qkv[vb + j];
    }
}
