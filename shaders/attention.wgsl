// Softmax-family attention (and TransNormer Diag blocks) with streaming (online) softmax over the
// KV cache: each (query row, head) keeps a running max, sum and weighted value sum while it walks
// its keys (split over a workgroup, merged at the end), so no n×n matrix exists.
// logits = scale·q·k + B_h(i, j). Prepended: the prelude, step.wgsl, reduce.wgsl (reduce_sum,
// reduce_max), attention_common.wgsl (AttnParams `p` at binding 0, bias()) and attention_row.wgsl
// (one row's streaming softmax, shared with decode.wgsl).
// Two entry points: `main` (decode, and long steps past the tiled kernel's loop budget) and
// `prefill`, the tiled kernel for steps of several rows (see there). A contextual (CoPE) bias needs
// every later key's gate, so its layers only run `main`, for every row (contextual_attention).

// Keys per shared-memory tile of `prefill`; the host sets TILE_VEC4 / ceil(dh / 4).
override TILE_KEYS: u32 = 32u;

@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<f32>;
@group(0) @binding(4) var<storage, read> vc: array<f32>;
@group(0) @binding(5) var<storage, read> aux: array<f32>;
@group(0) @binding(6) var<storage, read_write> outp: array<f32>;

const WG: u32 = 64u;

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
    if (BIAS_KIND == BIAS_CONTEXTUAL) {
        contextual_attention(lid, hh, r, i, j0);
        return;
    }
    let qb = r * 3u * p.a + hh * p.dh;
    var q: array<f32, MAX_DH>;
    var acc: array<f32, MAX_DH>;
    for (var c = 0u; c < p.dh; c = c + 1u) {
        q[c] = qkv[qb + c];
    }
    let ml = attend_lanes(lid, hh, i, j0, i + 1u, &q, &acc);
    write_row(lid, ml.x, ml.y, &acc, r * p.a + hh * p.dh);
}

// Merge the 64 lanes' states of one (row, head) of `main` (rescale every partial state to the common
// max, then sum) and write the row's output at `ob`.
fn write_row(lid: u32, m: f32, l: f32, acc: ptr<function, array<f32, MAX_DH>>, ob: u32) {
    let fi = lane_merge(lid, m, l);
    for (var c = 0u; c < p.dh; c = c + 1u) {
        let v = reduce_sum(lid, (*acc)[c] * fi.x);
        if (lid == 0u) {
            outp[ob + c] = v * fi.y;
        }
    }
}

// CoPE's table of q·e (contextual_lanes in attention_row.wgsl) in `kt` viewed as floats; `prefill`,
// the other user of `kt`, never runs for a contextual bias.
const COPE_TAB: u32 = TILE_VEC4 * 4u;

fn cope_tab_get(t: u32) -> f32 {
    return kt[t / 4u][t % 4u];
}

fn cope_tab_set(t: u32, v: f32) {
    kt[t / 4u][t % 4u] = v;
}

// One (row, head) of a CoPE layer in `main`'s workgroup (contextual_lanes), merged by write_row.
fn contextual_attention(lid: u32, hh: u32, r: u32, i: u32, j0: u32) {
    var q: array<f32, MAX_DH>;
    var acc: array<f32, MAX_DH>;
    let qb = r * 3u * p.a + hh * p.dh;
    for (var c = 0u; c < p.dh; c = c + 1u) {
        q[c] = qkv[qb + c];
    }
    let ml = contextual_lanes(lid, hh, i, j0, &q, &acc);
    write_row(lid, ml.x, ml.y, &acc, r * p.a + hh * p.dh);
}

// Tiled prefill kernel. A workgroup takes TQ consecutive query rows of one head; each row has KS
// invocations (key lanes) that split every key tile (key t of the tile goes to lane t mod KS), each
// keeping its own online-softmax state (running max, sum, weighted values) in registers. Tiles of
// TILE_KEYS keys (K and V, zero-padded to vec4s) are staged in workgroup memory (2 × 8 KiB, within
// WebGPU's default 16 KiB) and shared by the TQ rows; only tiles from the first row's first key
// (0, or its Diag block start) up to the last row's diagonal are loaded. The lanes of a row are merged
// at the end through the same workgroup memory.
// TQ, KS, TILE_VEC4 are the prelude's ATTN_TQ, ATTN_KS, ATTN_TILE_VEC4 (shared with the host).
const TQ: u32 = ATTN_TQ;
const KS: u32 = ATTN_KS;
// Invocations per workgroup of `prefill`.
const WGT: u32 = TQ * KS;
const TILE_VEC4: u32 = ATTN_TILE_VEC4;
const MAX_DH4: u32 = MAX_DH / 4u;

var<workgroup> kt: array<vec4<f32>, TILE_VEC4>;
var<workgroup> vt: array<vec4<f32>, TILE_VEC4>;

fn load4(src_k: bool, base: u32, c4: u32) -> vec4<f32> {
    var out = vec4<f32>(0.0);
    for (var e = 0u; e < 4u; e = e + 1u) {
        let c = c4 * 4u + e;
        if (c < p.dh) {
            if (src_k) {
                out[e] = kc[base + c];
            } else {
                out[e] = vc[base + c];
            }
        }
    }
    return out;
}

@compute @workgroup_size(WGT)
fn prefill(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let hh = wg.x;
    let r0 = wg.y * TQ;
    // Uniform per workgroup: the barriers below stay in uniform control flow.
    if (r0 >= st.rows || hh >= p.h) {
        return;
    }
    let rq = lid / KS;
    let lane = lid % KS;
    let r_last = min(r0 + TQ, st.rows) - 1u;
    let valid = r0 + rq <= r_last;
    let r = min(r0 + rq, r_last);
    let i = st.pos0 + r;
    let i_first = st.pos0 + r0;
    let i_last = st.pos0 + r_last;
    var j_lo = 0u;
    var j0 = 0u;
    if (p.block > 0u) {
        j_lo = i_first - i_first % p.block;
        j0 = i - i % p.block;
    }
    let dh4 = (p.dh + 3u) / 4u;
    let tk = max(min(TILE_KEYS, TILE_VEC4 / dh4), 1u);
    var q: array<vec4<f32>, MAX_DH4>;
    var acc: array<vec4<f32>, MAX_DH4>;
    let qb = r * 3u * p.a + hh * p.dh;
    for (var c4 = 0u; c4 < dh4; c4 = c4 + 1u) {
        var v = vec4<f32>(0.0);
        for (var e = 0u; e < 4u; e = e + 1u) {
            if (c4 * 4u + e < p.dh) {
                v[e] = qkv[qb + c4 * 4u + e];
            }
        }
        q[c4] = v;
        acc[c4] = vec4<f32>(0.0);
    }
    var m = -3.0e38;
    var l = 0.0;
    for (var t0 = j_lo; t0 <= i_last; t0 = t0 + tk) {
        let n = min(tk, i_last + 1u - t0);
        for (var e = lid; e < n * dh4; e = e + WGT) {
            let base = (t0 + e / dh4) * p.a + hh * p.dh;
            kt[e] = load4(true, base, e % dh4);
            vt[e] = load4(false, base, e % dh4);
        }
        workgroupBarrier();
        if (valid) {
            for (var t = lane; t < n; t = t + KS) {
                let j = t0 + t;
                if (j < j0 || j > i) {
                    continue;
                }
                var d4 = vec4<f32>(0.0);
                for (var c4 = 0u; c4 < dh4; c4 = c4 + 1u) {
                    d4 = d4 + q[c4] * kt[t * dh4 + c4];
                }
                let s = p.scale * (d4.x + d4.y + d4.z + d4.w) + bias(hh, i, j);
                if (p.relu != 0u) {
                    let w = max(s, 0.0);
                    for (var c4 = 0u; c4 < dh4; c4 = c4 + 1u) {
                        acc[c4] = acc[c4] + w * vt[t * dh4 + c4];
                    }
                } else {
                    let m_new = max(m, s);
                    let corr = exp(m - m_new);
                    let w = exp(s - m_new);
                    l = l * corr + w;
                    for (var c4 = 0u; c4 < dh4; c4 = c4 + 1u) {
                        acc[c4] = acc[c4] * corr + w * vt[t * dh4 + c4];
                    }
                    m = m_new;
                }
            }
        }
        workgroupBarrier();
    }
    // Merge the key lanes of each row into lane 0, one lane at a time through kt / vt.
    for (var s = 1u; s < KS; s = s + 1u) {
        if (lane == s) {
            for (var c4 = 0u; c4 < dh4; c4 = c4 + 1u) {
                kt[rq * dh4 + c4] = acc[c4];
            }
            vt[rq] = vec4<f32>(m, l, 0.0, 0.0);
        }
        workgroupBarrier();
        if (lane == 0u) {
            let o = vt[rq];
            var f_self = 1.0;
            var f_other = 1.0;
            if (p.relu == 0u) {
                let m_new = max(m, o.x);
                f_self = exp(m - m_new);
                f_other = exp(o.x - m_new);
                l = l * f_self + o.y * f_other;
                m = m_new;
            }
            for (var c4 = 0u; c4 < dh4; c4 = c4 + 1u) {
                acc[c4] = acc[c4] * f_self + kt[rq * dh4 + c4] * f_other;
            }
        }
        workgroupBarrier();
    }
    if (valid && lane == 0u) {
        var inv = 1.0;
        if (p.relu == 0u && l > 0.0) {
            inv = 1.0 / l;
        }
        let ob = r * p.a + hh * p.dh;
        for (var c = 0u; c < p.dh; c = c + 1u) {
            outp[ob + c] = acc[c / 4u][c % 4u] * inv;
        }
    }
}
