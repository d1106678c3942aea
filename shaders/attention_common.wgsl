// Snippet shared by attention.wgsl and attention_map.wgsl (prepended to both by
// crates/gpu/src/shaders.rs after the prelude, since WGSL has no includes): a softmax-family layer's
// parameter block `p` (binding 0; Rust twin params::AttnParams) and its position bias B_h(i, j).
// BIAS_KIND is a pipeline-overridable constant (a params::BiasKind): BIAS_NONE, BIAS_TABLE per-head
// distance table B_h[i − j] (aux = [H, table_len], built on the CPU in f64), BIAS_FIRE (aux =
// w1[hid], b1[hid], w2[H, hid], b2[H]). The including shader binds the storage array `aux`.

override BIAS_KIND: u32 = BIAS_NONE;

// block > 0 restricts keys to the query's block (TransNormer Diag); relu != 0 is T1's ReLU (no softmax).
// `AttnParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: AttnParams;

const FIRE_EPS: f32 = 1e-6;

fn fire_psi(x: f32) -> f32 {
    return log(1.0 + abs(p.fire_c * x));
}

fn bias(hh: u32, i: u32, j: u32) -> f32 {
    if (BIAS_KIND == BIAS_TABLE) {
        return aux[hh * p.table_len + (i - j)];
    }
    if (BIAS_KIND == BIAS_FIRE) {
        let hid = p.fire_hidden;
        let u = fire_psi(f32(i - j)) / (fire_psi(max(f32(i), p.fire_thr)) + FIRE_EPS);
        var acc = aux[2u * hid + p.h * hid + hh];
        for (var k = 0u; k < hid; k = k + 1u) {
            acc = acc + aux[2u * hid + hh * hid + k] * max(aux[k] * u + aux[hid + k], 0.0);
        }
        return acc;
    }
    return 0.0;
}
