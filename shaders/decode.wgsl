// Fused decode: one row per step, a block in two dispatches (its attention: attn_block here for
// softmax layers, linear_block in decode_linear.wgsl; its FFN: ffn_block) and the logits in one
// (head_block), so a greedy token costs 2·layers + 2 dispatches (the 2: logits, sampling) where the
// op-by-op path (crates/gpu/src/model/record.rs) spends about ten per layer; decode_common.wgsl
// describes how the dispatches meet. Prepended: the prelude, weights.wgsl, step.wgsl, reduce.wgsl,
// norm_value.wgsl, decode_common.wgsl, attention_common.wgsl (AttnParams `p` at binding 0, bias()),
// attention_row.wgsl (one row's streaming softmax) and activations.wgsl.

@group(0) @binding(8) var<storage, read_write> kc: array<f32>;
@group(0) @binding(9) var<storage, read_write> vc: array<f32>;
@group(0) @binding(11) var<storage, read> wup: array<WeightVec>;
@group(0) @binding(12) var<storage, read> wgate: array<WeightVec>;
@group(0) @binding(13) var<storage, read> wdown: array<WeightVec>;
@group(0) @binding(14) var<storage, read> whead: array<WeightVec>;
@group(0) @binding(15) var<storage, read_write> logits: array<f32>;

fn dot_up(row: u32) -> f32 {
    let e0 = row * dp.d;
    var acc = 0.0;
    if (dp.d % 4u == 0u) {
        for (var i = 0u; i < dp.d; i = i + 4u) {
            acc = dot4_xs(acc, widen4(wup[(e0 + i) >> 2u]), i);
        }
        return acc;
    }
    for (var i = 0u; i < dp.d; i = i + 1u) {
        acc = acc + xs[i] * widen(wup[weight_vec(e0 + i)], e0 + i);
    }
    return acc;
}

fn dot_gate(row: u32) -> f32 {
    let e0 = row * dp.d;
    var acc = 0.0;
    if (dp.d % 4u == 0u) {
        for (var i = 0u; i < dp.d; i = i + 4u) {
            acc = dot4_xs(acc, widen4(wgate[(e0 + i) >> 2u]), i);
        }
        return acc;
    }
    for (var i = 0u; i < dp.d; i = i + 1u) {
        acc = acc + xs[i] * widen(wgate[weight_vec(e0 + i)], e0 + i);
    }
    return acc;
}

fn dot_head(row: u32) -> f32 {
    let e0 = row * dp.d;
    var acc = 0.0;
    if (dp.d % 4u == 0u) {
        for (var i = 0u; i < dp.d; i = i + 4u) {
            acc = dot4_xs(acc, widen4(whead[(e0 + i) >> 2u]), i);
        }
        return acc;
    }
    for (var i = 0u; i < dp.d; i = i + 1u) {
        acc = acc + xs[i] * widen(whead[weight_vec(e0 + i)], e0 + i);
    }
    return acc;
}

// The keys j0..=i of this step's row (TransNormer Diag: its block) in `used` ranges of `ks` keys,
// ks ≥ split_keys, at most `splits` ranges. Uniform: st.pos0 and dp only.
struct SplitK {
    j0: u32,
    ks: u32,
    used: u32,
}

fn split_k() -> SplitK {
    let i = st.pos0;
    var j0 = 0u;
    if (dp.block > 0u) {
        j0 = i - i % dp.block;
    }
    let len = i + 1u - j0;
    let ks = max(dp.split_keys, (len + dp.splits - 1u) / dp.splits);
    return SplitK(j0, ks, (len - 1u) / ks + 1u);
}

// CoPE's table of q·e (contextual_lanes in attention_row.wgsl): `hv`, free once the row's q is
// in registers and its k and v are in the caches.
const COPE_TAB: u32 = HV;

fn cope_tab_get(t: u32) -> f32 {
    return hv[t];
}

fn cope_tab_set(t: u32, v: f32) {
    hv[t] = v;
}

// Split-K over the keys: workgroup (head, split) runs block input, attention norm, the head's q
// (the last split, which holds this step's position, also k and v: RoPE, into the caches), the
// streaming softmax over its key range (attention_row.wgsl), and leaves its normalized output in
// O, its (max, sum) in ML and Wo[:, head] · output in PA; ffn_block merges the splits. The host
// dispatches (used splits, heads) workgroups (crates/gpu/src/model/fused.rs `splits_used`), so a
// short row costs one workgroup per head.
@compute @workgroup_size(64)
fn attn_block(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let hh = wg.y;
    let sp = wg.x;
    let sk = split_k();
    // Uniform per workgroup: the barriers below stay in uniform control flow.
    if (hh >= p.h || sp >= sk.used) {
        return;
    }
    let dh = p.dh;
    let i = st.pos0;
    let owner = sp == sk.used - 1u;
    block_input(lid, hh == 0u && sp == 0u);
    norm_row(lid, dp.norm_kind, dp.norm_eps, dp.off_norm_w, dp.off_norm_b);
    var rows = dh;
    if (owner) {
        rows = 3u * dh;
    }
    for (var r = lid; r < rows; r = r + WG) {
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
    if (owner) {
        let cb = i * p.a + hh * dh;
        for (var c = lid; c < dh; c = c + WG) {
            kc[cb + c] = hv[dh + c];
            vc[cb + c] = hv[2u * dh + c];
        }
    }
    // The owner's lanes below read this position's k and v.
    storageBarrier();
    var q: array<f32, MAX_DH>;
    var acc: array<f32, MAX_DH>;
    for (var c = 0u; c < dh; c = c + 1u) {
        q[c] = hv[c];
    }
    var ml: vec2<f32>;
    if (BIAS_KIND == BIAS_CONTEXTUAL) {
        // CoPE: a key's position depends on every later key's gate, so its layers have one split
        // (the whole row, crates/gpu/src/model/fused.rs) and the table overwrites hv's q, k, v.
        workgroupBarrier();
        ml = contextual_lanes(lid, hh, i, sk.j0, &q, &acc);
    } else {
        let lo = sk.j0 + sp * sk.ks;
        // lo + ks may pass u32::MAX (one split: ks is u32::MAX), so bound the count, not the end.
        ml = attend_lanes(lid, hh, i, lo, lo + min(sk.ks, i + 1u - lo), &q, &acc);
    }
    let fi = lane_merge(lid, ml.x, ml.y);
    for (var c = 0u; c < dh; c = c + 1u) {
        let v = reduce_sum(lid, acc[c] * fi.x);
        if (lid == 0u) {
            hv[c] = v * fi.y;
        }
    }
    workgroupBarrier();
    let slot = hh * dp.splits + sp;
    head_projection(lid, slot, hh, dh);
    for (var c = lid; c < dh; c = c + WG) {
        fa[dp.fa_o + slot * dh + c] = hv[c];
    }
    if (lid == 0u) {
        fa[dp.fa_ml + 2u * slot] = fi.z;
        fa[dp.fa_ml + 2u * slot + 1u] = fi.w;
    }
}

// Weight of split `s` of head `hh` in the head's output: its share of the softmax sum, rescaled to
// the head's max (ReLU weights: 1, the splits' outputs add).
fn split_weight(hh: u32, s: u32, sk: SplitK) -> f32 {
    if (dp.relu != 0u) {
        return 1.0;
    }
    let base = dp.fa_ml + 2u * hh * dp.splits;
    var big_m = -3.0e38;
    for (var t = 0u; t < sk.used; t = t + 1u) {
        big_m = max(big_m, fa[base + 2u * t]);
    }
    var total = 0.0;
    for (var t = 0u; t < sk.used; t = t + 1u) {
        total = total + exp(fa[base + 2u * t] - big_m) * fa[base + 2u * t + 1u];
    }
    if (total <= 0.0) {
        return 0.0;
    }
    return exp(fa[base + 2u * s] - big_m) * fa[base + 2u * s + 1u] / total;
}

// xs ← Σ_heads Σ_splits weight · PA (softmax layers); returns Σ over heads and channels of the merged
// outputs' squares (for a norm over all heads' outputs).
fn merge_splits(lid: u32) -> f32 {
    let sk = split_k();
    for (var c = lid; c < dp.d; c = c + WG) {
        xs[c] = 0.0;
    }
    var ss = 0.0;
    for (var hh = 0u; hh < dp.h; hh = hh + 1u) {
        for (var s = 0u; s < sk.used; s = s + 1u) {
            let w = split_weight(hh, s, sk);
            let slot = hh * dp.splits + s;
            for (var c = lid; c < dp.d; c = c + WG) {
                xs[c] = xs[c] + w * fa[dp.fa_pa + slot * dp.d + c];
            }
        }
        if (dp.post_norm != 0u) {
            for (var c = lid; c < dp.dh; c = c + WG) {
                var o = 0.0;
                for (var s = 0u; s < sk.used; s = s + 1u) {
                    o = o + split_weight(hh, s, sk) * fa[dp.fa_o + (hh * dp.splits + s) * dp.dh + c];
                }
                ss = ss + o * o;
            }
        }
    }
    return reduce_sum(lid, ss);
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
    // Σ PA over heads into xs (softmax layers: over their splits too).
    var ss = 0.0;
    if (dp.splits > 0u) {
        ss = merge_splits(lid);
    } else {
        for (var c = lid; c < dp.d; c = c + WG) {
            var pa = 0.0;
            for (var hh = 0u; hh < dp.h; hh = hh + 1u) {
                pa = pa + fa[dp.fa_pa + hh * dp.d + c];
            }
            xs[c] = pa;
        }
        for (var hh = 0u; hh < dp.h; hh = hh + 1u) {
            ss = ss + fa[dp.fa_ss + hh];
        }
    }
    // A norm over all heads' outputs (T1's SimpleRMSNorm; a linear layer's RMSNorm over every
    // channel, its gain already in PA) is a scalar on Σ PA.
    var scale = 1.0;
    if (dp.post_norm != 0u) {
        if (dp.post_kind == NORM_SIMPLE_RMS) {
            scale = 1.0 / (sqrt(ss / f32(dp.a)) + dp.post_eps);
        } else {
            scale = inverseSqrt(ss / f32(dp.a) + dp.post_eps);
        }
    }
    for (var c = lid; c < dp.d; c = c + WG) {
        let x = fa[dp.fa_x + c];
        let x1 = x + (xs[c] * scale + aux[dp.off_bo + c]);
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
        let e0 = o * dp.hid + g * WG;
        var s = 0.0;
        if (dp.hid % 4u == 0u) {
            for (var k = 0u; k < n; k = k + 4u) {
                s = dot4_hv(s, widen4(wdown[(e0 + k) >> 2u]), k);
            }
        } else {
            for (var k = 0u; k < n; k = k + 1u) {
                s = s + widen(wdown[weight_vec(e0 + k)], e0 + k) * hv[k];
            }
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
