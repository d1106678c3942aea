// Fused decode: one row per step, a softmax-family block in two dispatches and the logits in one,
// so a greedy token costs 2·layers + 2 dispatches (the 2: logits, sampling) where the op-by-op path
// (crates/gpu/src/model/record.rs) spends about ten per layer. Dispatches meet only through storage,
// so each leaves what the next needs in `fa`, at the offsets in `dp`:
//   word 0       the step's token id (written by the host),
//   X  [d]       the block input (workgroup 0 of attn_block writes it),
//   X1 [d]       block input + attention + b_down (workgroup 0 of ffn_block),
//   SS [H]       each head's Σ o² (T1's SimpleRMSNorm over all heads is a scalar on Σ PA),
//   PA [H, d]    each head's share of the output projection, Wo[:, head] · o_head,
//   PF [S, d]    each group of 64 FFN units' share of the down projection,
// and the next attn_block (or head_block) starts from X1 + Σ_s PF[s]: the projections' sums, split
// by head and by unit group, in another order than the op-by-op matmuls (parity within tolerance).
// A layer's norm gains and biases and its projection biases sit in `aux` after its bias table
// (bias() of attention_common.wgsl reads the table from offset 0); absent biases are zeros.
// One workgroup of 64 keeps the row in workgroup memory (d ≤ FUSED_MAX_D) and gives each
// invocation whole output rows of a projection.
// Weight matrices are words of the model's weight kind (weights.wgsl).
// Prepended: the prelude, weights.wgsl, step.wgsl, reduce.wgsl, attention_common.wgsl (AttnParams `p` at
// binding 0, bias()), attention_row.wgsl (one row's streaming softmax), norm_value.wgsl and
// activations.wgsl.

// `DecodeParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(2) var<uniform> dp: DecodeParams;
@group(0) @binding(3) var<storage, read_write> fa: array<f32>;
@group(0) @binding(4) var<storage, read> aux: array<f32>;
@group(0) @binding(5) var<storage, read> wqkv: array<u32>;
@group(0) @binding(6) var<storage, read> wo: array<u32>;
// RoPE cos/sin [pos, dh/2, 2], or in layer 0 of a model with absolute positions, their table [pos, d].
@group(0) @binding(7) var<storage, read> tab: array<f32>;
@group(0) @binding(8) var<storage, read_write> kc: array<f32>;
@group(0) @binding(9) var<storage, read_write> vc: array<f32>;
@group(0) @binding(10) var<storage, read> emb: array<u32>;
@group(0) @binding(11) var<storage, read> wup: array<u32>;
@group(0) @binding(12) var<storage, read> wgate: array<u32>;
@group(0) @binding(13) var<storage, read> wdown: array<u32>;
@group(0) @binding(14) var<storage, read> whead: array<u32>;
@group(0) @binding(15) var<storage, read_write> logits: array<f32>;

const WG: u32 = 64u;
const HV: u32 = 3u * MAX_DH;

// The row (normalized in place).
var<workgroup> xs: array<f32, FUSED_MAX_D>;
// attn_block: the head's q | k | v, then its output in [0, dh); ffn_block: the 64 units' activations.
var<workgroup> hv: array<f32, HV>;

// xs ← X1 + Σ_s PF[s], the previous block's output.
fn gather_residual(lid: u32) {
    for (var c = lid; c < dp.d; c = c + WG) {
        var v = fa[dp.fa_x1 + c];
        for (var s = 0u; s < dp.slices; s = s + 1u) {
            v = v + fa[dp.fa_pf + s * dp.d + c];
        }
        xs[c] = v;
    }
    workgroupBarrier();
}

// Normalize xs in place (the statistics of norm.wgsl); gain and bias at aux[off_w..], aux[off_b..].
fn norm_row(lid: u32, kind: u32, eps: f32, off_w: u32, off_b: u32) {
    let n = f32(dp.d);
    var s = 0.0;
    var ss = 0.0;
    for (var c = lid; c < dp.d; c = c + WG) {
        s = s + xs[c];
        ss = ss + xs[c] * xs[c];
    }
    let mean = reduce_sum(lid, s) / n;
    let ms = reduce_sum(lid, ss) / n;
    var dev = 0.0;
    for (var c = lid; c < dp.d; c = c + WG) {
        dev = dev + (xs[c] - mean) * (xs[c] - mean);
    }
    let var_ = reduce_sum(lid, dev) / n;
    for (var c = lid; c < dp.d; c = c + WG) {
        xs[c] = norm_value(kind, xs[c], mean, ms, var_, eps, aux[off_w + c], aux[off_b + c]);
    }
    workgroupBarrier();
}

// Row `row` of a projection · xs, one function per weight binding: WGSL passes no storage array to a
// function (without the unrestricted_pointer_parameters extension), and one accessor over every
// binding would count them all in each entry point's layout (WebGPU allows 8 storage buffers).
fn dot_qkv(row: u32) -> f32 {
    var acc = 0.0;
    for (var i = 0u; i < dp.d; i = i + 1u) {
        let e = row * dp.d + i;
        acc = acc + xs[i] * widen(wqkv[weight_word(e)], e);
    }
    return acc;
}

fn dot_up(row: u32) -> f32 {
    var acc = 0.0;
    for (var i = 0u; i < dp.d; i = i + 1u) {
        let e = row * dp.d + i;
        acc = acc + xs[i] * widen(wup[weight_word(e)], e);
    }
    return acc;
}

fn dot_gate(row: u32) -> f32 {
    var acc = 0.0;
    for (var i = 0u; i < dp.d; i = i + 1u) {
        let e = row * dp.d + i;
        acc = acc + xs[i] * widen(wgate[weight_word(e)], e);
    }
    return acc;
}

fn dot_head(row: u32) -> f32 {
    var acc = 0.0;
    for (var i = 0u; i < dp.d; i = i + 1u) {
        let e = row * dp.d + i;
        acc = acc + xs[i] * widen(whead[weight_word(e)], e);
    }
    return acc;
}

// xs ← the block input: layer 0 the token's embedding (+ absolute position, + embedding norm),
// else the previous block's output; workgroup 0 keeps it in X for ffn_block's residual.
fn block_input(lid: u32, keep: bool) {
    if (dp.first != 0u) {
        let t = min(bitcast<u32>(fa[0]), dp.vocab - 1u);
        for (var c = lid; c < dp.d; c = c + WG) {
            let e = t * dp.d + c;
            var v = widen(emb[weight_word(e)], e);
            if (dp.use_pe != 0u) {
                v = v + tab[st.pos0 * dp.d + c];
            }
            xs[c] = v;
        }
        workgroupBarrier();
        if (dp.emb_norm != 0u) {
            norm_row(lid, dp.emb_kind, dp.emb_eps, dp.off_emb_w, dp.off_emb_b);
        }
    } else {
        gather_residual(lid);
    }
    if (keep) {
        for (var c = lid; c < dp.d; c = c + WG) {
            fa[dp.fa_x + c] = xs[c];
        }
    }
}

// One workgroup per head: block input, attention norm, the head's q, k, v (+ biases), RoPE, k and v
// into the caches at this step's position, the streaming softmax over the cache (attention_row.wgsl),
// then PA[head] and SS[head].
@compute @workgroup_size(64)
fn attn_block(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let hh = wg.x;
    // Uniform per workgroup: the barriers below stay in uniform control flow.
    if (hh >= p.h) {
        return;
    }
    let dh = p.dh;
    let i = st.pos0;
    block_input(lid, hh == 0u);
    norm_row(lid, dp.norm_kind, dp.norm_eps, dp.off_norm_w, dp.off_norm_b);
    for (var r = lid; r < 3u * dh; r = r + WG) {
        let row = (r / dh) * p.a + hh * dh + r % dh;
        hv[r] = dot_qkv(row) + aux[dp.off_bqkv + row];
    }
    workgroupBarrier();
    if (dp.rope != 0u) {
        // Adjacent pairs, as rotary.wgsl.
        let half = dh / 2u;
        for (var k = lid; k < half; k = k + WG) {
            let c = tab[(i * half + k) * 2u];
            let s = tab[(i * half + k) * 2u + 1u];
            let q0 = hv[2u * k];
            let q1 = hv[2u * k + 1u];
            hv[2u * k] = q0 * c - q1 * s;
            hv[2u * k + 1u] = q1 * c + q0 * s;
            let k0 = hv[dh + 2u * k];
            let k1 = hv[dh + 2u * k + 1u];
            hv[dh + 2u * k] = k0 * c - k1 * s;
            hv[dh + 2u * k + 1u] = k1 * c + k0 * s;
        }
        workgroupBarrier();
    }
    let cb = i * p.a + hh * dh;
    for (var c = lid; c < dh; c = c + WG) {
        kc[cb + c] = hv[dh + c];
        vc[cb + c] = hv[2u * dh + c];
    }
    // The lanes below read this position's k and v.
    storageBarrier();
    var q: array<f32, MAX_DH>;
    var acc: array<f32, MAX_DH>;
    for (var c = 0u; c < dh; c = c + 1u) {
        q[c] = hv[c];
    }
    var j0 = 0u;
    if (p.block > 0u) {
        j0 = i - i % p.block;
    }
    let ml = attend_lanes(lid, hh, i, j0, &q, &acc);
    let fi = lane_merge(lid, ml.x, ml.y);
    for (var c = 0u; c < dh; c = c + 1u) {
        let v = reduce_sum(lid, acc[c] * fi.x);
        if (lid == 0u) {
            hv[c] = v * fi.y;
        }
    }
    workgroupBarrier();
    for (var o = lid; o < dp.d; o = o + WG) {
        var s = 0.0;
        for (var c = 0u; c < dh; c = c + 1u) {
            let e = o * p.a + hh * dh + c;
            s = s + widen(wo[weight_word(e)], e) * hv[c];
        }
        fa[dp.fa_pa + hh * dp.d + o] = s;
    }
    if (lid == 0u) {
        var ss = 0.0;
        for (var c = 0u; c < dh; c = c + 1u) {
            ss = ss + hv[c] * hv[c];
        }
        fa[dp.fa_ss + hh] = ss;
    }
}

// One workgroup per group of 64 FFN units: x' = X + (attention + b_o), the FFN norm of x' (of X with
// a parallel residual), the group's units (up, SwiGLU gate, activation), and PF[group].
@compute @workgroup_size(64)
fn ffn_block(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let g = wg.x;
    if (g >= dp.slices) {
        return;
    }
    var scale = 1.0;
    if (dp.relu_norm != 0u) {
        var ss = 0.0;
        for (var hh = 0u; hh < dp.h; hh = hh + 1u) {
            ss = ss + fa[dp.fa_ss + hh];
        }
        scale = 1.0 / (sqrt(ss / f32(dp.a)) + dp.relu_eps);
    }
    for (var c = lid; c < dp.d; c = c + WG) {
        var pa = 0.0;
        for (var hh = 0u; hh < dp.h; hh = hh + 1u) {
            pa = pa + fa[dp.fa_pa + hh * dp.d + c];
        }
        let x = fa[dp.fa_x + c];
        let x1 = x + (pa * scale + aux[dp.off_bo + c]);
        if (g == 0u) {
            fa[dp.fa_x1 + c] = x1 + aux[dp.off_bdown + c];
        }
        if (dp.parallel != 0u) {
            xs[c] = x;
        } else {
            xs[c] = x1;
        }
    }
    workgroupBarrier();
    norm_row(lid, dp.ffn_kind, dp.ffn_eps, dp.off_ffn_w, dp.off_ffn_b);
    let u = g * WG + lid;
    var act = 0.0;
    if (u < dp.hid) {
        let up = dot_up(u) + aux[dp.off_bup + u];
        if (dp.act == EW_SILU_GATE) {
            act = up * silu(dot_gate(u) + aux[dp.off_bgate + u]);
        } else if (dp.act == EW_GELU_EXACT) {
            act = gelu_exact(up);
        } else {
            act = gelu(up);
        }
    }
    hv[lid] = act;
    workgroupBarrier();
    let n = min(WG, dp.hid - g * WG);
    for (var o = lid; o < dp.d; o = o + WG) {
        var s = 0.0;
        for (var k = 0u; k < n; k = k + 1u) {
            let e = o * dp.hid + g * WG + k;
            s = s + widen(wdown[weight_word(e)], e) * hv[k];
        }
        fa[dp.fa_pf + g * dp.d + o] = s;
    }
}

// FUSED_HEAD_ROWS vocabulary rows per workgroup: the last block's output, the final norm (the
// `norm_*` fields; gain and bias in this dispatch's `aux`), the logits.
@compute @workgroup_size(64)
fn head_block(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let r0 = wg.x * FUSED_HEAD_ROWS;
    if (r0 >= dp.vocab) {
        return;
    }
    gather_residual(lid);
    norm_row(lid, dp.norm_kind, dp.norm_eps, dp.off_norm_w, dp.off_norm_b);
    let r1 = min(r0 + FUSED_HEAD_ROWS, dp.vocab);
    for (var r = r0 + lid; r < r1; r = r + WG) {
        logits[r] = dot_head(r);
    }
}
