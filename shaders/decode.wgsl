// Fused decode: one row per step, a block in two dispatches (its attention: attn_block here for
// softmax layers, linear_block in decode_linear.wgsl; its FFN: ffn_block) and the logits in one
// (head_block), so a greedy token costs 2·layers + 2 dispatches (the 2: logits, sampling) where the
// op-by-op path (crates/gpu/src/model/record.rs) spends about ten per layer; decode_common.wgsl
// describes how the dispatches meet. Prepended: the prelude, weights.wgsl, step.wgsl, reduce.wgsl,
// norm_value.wgsl, decode_common.wgsl, attention_common.wgsl (AttnParams `p` at binding 0, bias()),
// attention_row.wgsl (one row's streaming softmax) and activations.wgsl.

@group(0) @binding(8) var<storage, read_write> kc: array<f32>;
@group(0) @binding(9) var<storage, read_write> vc: array<f32>;
@group(0) @binding(11) var<storage, read> wup: array<u32>;
@group(0) @binding(12) var<storage, read> wgate: array<u32>;
@group(0) @binding(13) var<storage, read> wdown: array<u32>;
@group(0) @binding(14) var<storage, read> whead: array<u32>;
@group(0) @binding(15) var<storage, read_write> logits: array<f32>;

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
    head_projection(lid, hh, dh);
    head_sum_squares(lid, hh, dh);
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
    // A norm over all heads' outputs (T1's SimpleRMSNorm; a linear layer's RMSNorm over every
    // channel, its gain already in PA) is a scalar on Σ PA.
    var scale = 1.0;
    if (dp.post_norm != 0u) {
        var ss = 0.0;
        for (var hh = 0u; hh < dp.h; hh = hh + 1u) {
            ss = ss + fa[dp.fa_ss + hh];
        }
        if (dp.post_kind == NORM_SIMPLE_RMS) {
            scale = 1.0 / (sqrt(ss / f32(dp.a)) + dp.post_eps);
        } else {
            scale = inverseSqrt(ss / f32(dp.a) + dp.post_eps);
        }
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
