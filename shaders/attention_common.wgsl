// Snippet shared by attention.wgsl and attention_map.wgsl (prepended to both by
// crates/gpu/src/shaders.rs after the prelude, since WGSL has no includes): a softmax-family layer's
// parameter block `p` (binding 0; Rust twin params::AttnParams) and its position bias B_h(i, j).
// BIAS_KIND is a pipeline-overridable constant (a params::BiasKind): BIAS_NONE, BIAS_TABLE per-head
// distance table B_h[i − j] (aux = [H, table_len], built on the CPU in f64), BIAS_FIRE (aux =
// w1[hid], b1[hid], w2[H, hid], b2[H]), BIAS_CONTEXTUAL (CoPE, aux = position embedding e
// [npos, dh]): not a function of (i, j) alone, so bias() returns 0 for it and the kernels walk a
// query's keys with contextual_position() below. The including shader binds the storage arrays
// `aux` and `kc` (the key cache, [positions, a]) and prepends reduce.wgsl.

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

// CoPE (Golovneva et al., "Contextual Position Encoding: Learning to Count What's Important", §3):
// gates g_j = σ(scale·q·k_j) on the query's visible keys, contextual positions counted from the
// query back, p_j = min(Σ_{t=j..i} g_t, npos − 1), and the bias q·e[p_j] interpolated linearly
// between the integer rows of e (the core's attention::add_contextual_bias is the reference).
//
// One step of a workgroup of 64 walking query i's keys backwards in aligned blocks (base a multiple
// of 64, from i − i % 64 down): lane `lid` takes key j = base + lid (counted when j0 ≤ j ≤ i).
// `carry` holds Σ g over the keys above this block; the block's own part is a suffix scan over the
// lanes. Returns (scale·q·k_j, p_j) and adds the block's gates to `carry`. Call in uniform control
// flow (it synchronises the workgroup).
fn contextual_position(
    lid: u32,
    base: u32,
    i: u32,
    j0: u32,
    hh: u32,
    q: ptr<function, array<f32, MAX_DH>>,
    carry: ptr<function, f32>,
) -> vec2<f32> {
    let j = base + lid;
    var s = 0.0;
    var g = 0.0;
    if (j >= j0 && j <= i) {
        let kb = j * p.a + hh * p.dh;
        var dot = 0.0;
        for (var c = 0u; c < p.dh; c = c + 1u) {
            dot = dot + (*q)[c] * kc[kb + c];
        }
        s = p.scale * dot;
        g = 1.0 / (1.0 + exp(-s));
    }
    let sc = prefix_sum(RED_WG - 1u - lid, g);
    let pos = min(*carry + sc.x, f32(p.npos - 1u));
    *carry = *carry + sc.y;
    return vec2<f32>(s, pos);
}

// q·e[t] (q unscaled, e = aux [npos, dh]).
fn cope_qe(q: ptr<function, array<f32, MAX_DH>>, t: u32) -> f32 {
    var dot = 0.0;
    for (var c = 0u; c < p.dh; c = c + 1u) {
        dot = dot + (*q)[c] * aux[t * p.dh + c];
    }
    return dot;
}

// Integer rows of e around position `pos`: (floor, ceil) within 0..npos.
fn cope_rows(pos: f32) -> vec2<u32> {
    return vec2<u32>(u32(floor(pos)), min(u32(ceil(pos)), p.npos - 1u));
}

// The bias at `pos` from q·e at its two integer rows (weight pos − floor(pos) on the upper one).
fn cope_lerp(pos: f32, e_lo: f32, e_hi: f32) -> f32 {
    let w = pos - floor(pos);
    return e_hi * w + e_lo * (1.0 - w);
}
