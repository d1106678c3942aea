// Softmax-family attention (and TransNormer Diag blocks) with streaming (online) softmax over the
// KV cache: each (query row, head) keeps a running max, sum and weighted value sum while it walks its
// keys (split over a workgroup, merged at the end), so no n×n matrix exists. logits = scale·q·k + B_h(i, j); the bias kind is the
// pipeline-overridable constant BIAS_KIND: 0 none, 1 per-head distance table B_h[i − j]
// (aux = [H, table_len]), 2 FIRE (aux = w1[hid], b1[hid], w2[H, hid], b2[H]).
// block > 0 restricts keys to the query's block (Diag); relu != 0 is the T1 ReLU variant (no softmax).

override BIAS_KIND: u32 = 0u;

struct Params {
    h: u32,
    dh: u32,
    a: u32,
    block: u32,
    scale: f32,
    relu: u32,
    table_len: u32,
    fire_hidden: u32,
    fire_c: f32,
    fire_thr: f32,
    pad0: u32,
    pad1: u32,
}

struct Step {
    rows: u32,
    pos0: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> st: Step;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<f32>;
@group(0) @binding(4) var<storage, read> vc: array<f32>;
@group(0) @binding(5) var<storage, read> aux: array<f32>;
@group(0) @binding(6) var<storage, read_write> outp: array<f32>;

const MAX_DH: u32 = 128u;
const WG: u32 = 64u;
const FIRE_EPS: f32 = 1e-6;

fn fire_psi(x: f32) -> f32 {
    return log(1.0 + abs(p.fire_c * x));
}

fn bias(hh: u32, i: u32, j: u32) -> f32 {
    if (BIAS_KIND == 1u) {
        return aux[hh * p.table_len + (i - j)];
    }
    if (BIAS_KIND == 2u) {
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

var<workgroup> red: array<f32, 64>;

fn reduce_sum(lid: u32, v: f32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
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
    for (var s = WG / 2u; s > 0u; s = s / 2u) {
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
        workgroupBarrier();
    }
    let total = red[0];
    workgroupBarrier();
    return total;
}

// One workgroup per (head, query row); its 64 invocations split the keys (j ≡ lid mod 64), each
// keeping its own running max / sum / weighted values, then the partial states are merged.
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let hh = wg.x;
    let r = wg.y;
    // r and hh are uniform per workgroup, so this exit keeps the barriers in uniform control flow.
    if (r >= st.rows || hh >= p.h) {
        return;
    }
    let i = st.pos0 + r;
    var j0 = 0u;
    if (p.block > 0u) {
        j0 = i - i % p.block;
    }
    let qb = r * 3u * p.a + hh * p.dh;
    var q: array<f32, MAX_DH>;
    var acc: array<f32, MAX_DH>;
    for (var c = 0u; c < p.dh; c = c + 1u) {
        q[c] = qkv[qb + c];
        acc[c] = 0.0;
    }
    var m = -3.0e38;
    var l = 0.0;
    for (var j = j0 + lid; j <= i; j = j + WG) {
        let kb = j * p.a + hh * p.dh;
        var dot = 0.0;
        for (var c = 0u; c < p.dh; c = c + 1u) {
            dot = dot + q[c] * kc[kb + c];
        }
        let s = p.scale * dot + bias(hh, i, j);
        if (p.relu != 0u) {
            let w = max(s, 0.0);
            for (var c = 0u; c < p.dh; c = c + 1u) {
                acc[c] = acc[c] + w * vc[kb + c];
            }
        } else {
            let m_new = max(m, s);
            let corr = exp(m - m_new);
            let w = exp(s - m_new);
            l = l * corr + w;
            for (var c = 0u; c < p.dh; c = c + 1u) {
                acc[c] = acc[c] * corr + w * vc[kb + c];
            }
            m = m_new;
        }
    }
    // Merge: rescale every partial state to the common max, then sum.
    var f = 1.0;
    if (p.relu == 0u) {
        let big_m = reduce_max(lid, m);
        f = exp(m - big_m);
    }
    let total_l = reduce_sum(lid, l * f);
    var inv = 1.0;
    if (p.relu == 0u && total_l > 0.0) {
        inv = 1.0 / total_l;
    }
    let ob = r * p.a + hh * p.dh;
    for (var c = 0u; c < p.dh; c = c + 1u) {
        let v = reduce_sum(lid, acc[c] * f);
        if (lid == 0u) {
            outp[ob + c] = v * inv;
        }
    }
}
