// Fused decode of a linear-attention layer's attention (the first of its block's two dispatches; the
// FFN is decode.wgsl's ffn_block), one workgroup per head: block input, attention norm, the head's
// q, k, v (+ biases) and gate pre-activations (GLA's low-rank gate, ReGLA's gate rows), ReGLA's
// running key max, the feature maps (features.wgsl), one step of the gated scan
// S ← diag(exp(lg)) S + φk vᵀ (Fast Decay: S[i][j] decays by exp(lg_i + gv_j)),
// o = φqᵀS (/ max(φq·z, den_eps)) on the head's state in `fa`, the
// output post-op of the head (RMSNorm, gain, swish output gate; a norm over all heads' channels is
// finished in ffn_block from SS) and PA[head]. The same arithmetic as linear_features.wgsl,
// linear_scan.wgsl (one row) and the norm / elementwise kernels of the op-by-op path.
// Prepended: the prelude, weights.wgsl, step.wgsl, reduce.wgsl, norm_value.wgsl,
// decode_common.wgsl, features.wgsl (FeatParams `p` at binding 0) and activations.wgsl.

// ReGLA's (or Fast Decay's) gate rows [2a, d], or the swish output gate's rows [a, d].
@group(0) @binding(8) var<storage, read> wextra: array<WeightVec>;

// GLA's low-rank gate activations, then the gate pre-activations of the head: ga | gr.
var<workgroup> gs: array<f32, HV>;
var<workgroup> fqs: array<f32, MAX_DK>;
var<workgroup> fks: array<f32, MAX_DK>;
var<workgroup> lgs: array<f32, MAX_DK>;
var<workgroup> lgvs: array<f32, MAX_DH>;

fn dot_extra(row: u32) -> f32 {
    let e0 = row * dp.d;
    var acc = 0.0;
    if (dp.d % 4u == 0u) {
        for (var i = 0u; i < dp.d; i = i + 4u) {
            acc = dot4_xs(acc, widen4(wextra[(e0 + i) >> 2u]), i);
        }
        return acc;
    }
    for (var i = 0u; i < dp.d; i = i + 1u) {
        acc = acc + xs[i] * widen(wextra[weight_vec(e0 + i)], e0 + i);
    }
    return acc;
}

// dot of the normed row with the f32 matrix row at aux[off..off + d).
fn dot_aux(off: u32) -> f32 {
    var acc = 0.0;
    for (var i = 0u; i < dp.d; i = i + 1u) {
        acc = acc + xs[i] * aux[off + i];
    }
    return acc;
}

// The head's gate pre-activations into gs: GLA ga = up · (down · x) (gs[MAX_DH..] holds down · x);
// ReGLA's (Fast Decay's) ga | gr from the gate rows.
fn gate_inputs(lid: u32, hh: u32, dh: u32) {
    if (dp.gate == 1u) {
        for (var r = lid; r < dp.rank; r = r + WG) {
            gs[MAX_DH + r] = dot_aux(dp.off_gdown + r * dp.d);
        }
        workgroupBarrier();
        for (var c = lid; c < dh; c = c + WG) {
            var acc = 0.0;
            for (var r = 0u; r < dp.rank; r = r + 1u) {
                acc = acc + gs[MAX_DH + r] * aux[dp.off_gup + (hh * dh + c) * dp.rank + r];
            }
            gs[c] = acc;
        }
    } else if (dp.gate == 2u) {
        for (var c = lid; c < dh; c = c + WG) {
            gs[c] = dot_extra(hh * dh + c);
            gs[MAX_DH + c] = dot_extra(dp.a + hh * dh + c);
        }
    }
    workgroupBarrier();
}

// Lane 0: ReGLA's running key max (linear_features.wgsl's regla_max for one row), the feature maps.
fn head_features(hh: u32, dh: u32, pos: u32) {
    var x: FeatIn;
    var kmax = -3.4e38;
    for (var j = 0u; j < dh; j = j + 1u) {
        x.q[j] = hv[j];
        x.k[j] = hv[dh + j];
        x.ga[j] = gs[j];
        x.gr[j] = gs[MAX_DH + j];
        kmax = max(kmax, x.k[j]);
    }
    if (FEAT_KIND == FEAT_REGLA) {
        let kb = dp.k_off + 2u * hh;
        x.m_t = kmax;
        if (fa[kb + 1u] != 0.0) {
            x.m_t = max(fa[kb], kmax);
            x.shift = fa[kb] - x.m_t;
        }
        fa[kb] = x.m_t;
        fa[kb + 1u] = 1.0;
    }
    var o: FeatOut;
    features(pos, hh, &x, &o);
    for (var i = 0u; i < p.dk; i = i + 1u) {
        fqs[i] = o.q[i];
        fks[i] = o.k[i];
        lgs[i] = o.g[i];
    }
    if (FEAT_KIND == FEAT_FAST_DECAY) {
        for (var j = 0u; j < dh; j = j + 1u) {
            lgvs[j] = o.gv[j];
        }
    }
}

// One scan step on the head's state (linear_scan.wgsl's `main` for one row); the output into
// hv[0, dh).
fn scan_step(lid: u32, hh: u32, dh: u32) {
    let dk = p.dk;
    for (var j = lid; j < dh; j = j + WG) {
        let v = hv[2u * dh + j];
        var ev = 1.0;
        if (FEAT_KIND == FEAT_FAST_DECAY) {
            ev = exp(lgvs[j]);
        }
        var o = 0.0;
        var den = 0.0;
        for (var i = 0u; i < dk; i = i + 1u) {
            let si = dp.s_off + (hh * dk + i) * dh + j;
            let zi = dp.z_off + (hh * dh + j) * dk + i;
            let decay = exp(lgs[i]);
            let s = decay * ev * fa[si] + fks[i] * v;
            let z = decay * fa[zi] + fks[i];
            fa[si] = s;
            fa[zi] = z;
            o = o + fqs[i] * s;
            den = den + fqs[i] * z;
        }
        if (dp.den_eps > 0.0) {
            o = o / max(den, dp.den_eps);
        }
        hv[j] = o;
    }
    workgroupBarrier();
}

// The head's output post-op on hv[0, dh): RMSNorm over the head, gain, swish output gate.
fn post_op(lid: u32, hh: u32, dh: u32) {
    var ss = 0.0;
    for (var c = 0u; c < dh; c = c + 1u) {
        ss = ss + hv[c] * hv[c];
    }
    workgroupBarrier();
    for (var c = lid; c < dh; c = c + WG) {
        var o = hv[c];
        if (dp.head_norm != 0u) {
            o = o * inverseSqrt(ss / f32(dh) + dp.head_eps);
        }
        if (dp.gain != 0u) {
            var gi = c;
            if (dp.gain_all != 0u) {
                gi = hh * dh + c;
            }
            o = o * aux[dp.off_gain + gi];
        }
        if (dp.out_gate != 0u) {
            o = o * silu(dot_extra(hh * dh + c));
        }
        hv[c] = o;
    }
    workgroupBarrier();
}

@compute @workgroup_size(64)
fn linear_block(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid3: vec3<u32>) {
    let lid = lid3.x;
    let hh = wg.x;
    // Uniform per workgroup: the barriers below stay in uniform control flow.
    if (hh >= p.h) {
        return;
    }
    let dh = p.dh;
    block_input(lid, hh == 0u);
    norm_row(lid, dp.norm_kind, dp.norm_eps, dp.off_norm_w, dp.off_norm_b);
    for (var r = lid; r < 3u * dh; r = r + WG) {
        let row = (r / dh) * p.a + hh * dh + r % dh;
        hv[r] = dot_qkv(row) + aux[dp.off_bqkv + row];
    }
    workgroupBarrier();
    gate_inputs(lid, hh, dh);
    if (lid == 0u) {
        head_features(hh, dh, st.pos0);
    }
    workgroupBarrier();
    scan_step(lid, hh, dh);
    head_sum_squares(lid, hh, dh);
    post_op(lid, hh, dh);
    head_projection(lid, hh, hh, dh);
}
