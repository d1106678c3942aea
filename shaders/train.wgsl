// The trainer's kernels (crates/gpu/src/train): forward and backward of the embedding, RMSNorm,
// SwiGLU, RoPE and the softmax-family attention row, the cross-entropy loss, the gradient norm and
// AdamW. Matrix products are gemm.wgsl's. reduce.wgsl, activations.wgsl and train_common.wgsl (the
// bindings, index helpers) are prepended. Offsets into the flat parameter and gradient buffers
// come in `off0`.

// `AdamParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(8) var<uniform> ap: AdamParams;

// x[r, c] = emb[tok_r, c]·scale (+ pe[r mod t, c]).  src0 params (emb at off0), src1 pe [t, width]
// (flag 1: add it), ids tokens, dst0 x.
@compute @workgroup_size(64)
fn embed_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.rows * tp.width) {
        return;
    }
    let r = e / tp.width;
    let c = e % tp.width;
    var v = src0[tp.off0 + ids[r] * tp.width + c] * tp.scale;
    if (tp.flag != 0u) {
        v = v + src1[(r % tp.t) * tp.width + c];
    }
    dst0[e] = v;
}

// d emb[v, c] (+)= scale · Σ_{r: tok_r = v} dx[r, c], over the rows grouped by token on the host:
// ids = start [n + 1] then the rows in token order. src0 dx, dst0 gradients (emb at off0);
// flag 1: add to what is there (the tied head's gradient).
@compute @workgroup_size(64)
fn embed_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n * tp.width) {
        return;
    }
    let v = e / tp.width;
    let c = e % tp.width;
    var s = 0.0;
    for (var q = ids[v]; q < ids[v + 1u]; q = q + 1u) {
        s = s + src0[ids[tp.n + 1u + q] * tp.width + c];
    }
    let o = tp.off0 + e;
    var g = tp.scale * s;
    if (tp.flag != 0u) {
        g = g + dst0[o];
    }
    dst0[o] = g;
}

// RMSNorm of one row per workgroup: y = x·rstd·w, rstd = 1/√(mean x² + eps).  src0 x, src1 params
// (w at off0), dst0 y, dst1 rstd [rows].
@compute @workgroup_size(64)
fn rms_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let r = group(wg, nwg);
    if (r >= tp.rows) {
        return;
    }
    let base = r * tp.width;
    var ss = 0.0;
    for (var c = lid; c < tp.width; c = c + 64u) {
        ss = ss + src0[base + c] * src0[base + c];
    }
    let rstd = 1.0 / sqrt(reduce_sum(lid, ss) / f32(tp.width) + tp.eps);
    for (var c = lid; c < tp.width; c = c + 64u) {
        dst0[base + c] = src0[base + c] * rstd * src1[tp.off0 + c];
    }
    if (lid == 0u) {
        dst1[r] = rstd;
    }
}

// RMSNorm backward of one row per workgroup: with g = dy ⊙ w,
//   dx = rstd·g − x·rstd³·(g·x)/width,
// added to dst0 (flag 1) or written.  src0 dy, src1 x, src2 params (w at off0), dst0 dx.
@compute @workgroup_size(64)
fn rms_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let r = group(wg, nwg);
    if (r >= tp.rows) {
        return;
    }
    let base = r * tp.width;
    var ss = 0.0;
    var gx = 0.0;
    for (var c = lid; c < tp.width; c = c + 64u) {
        let x = src1[base + c];
        ss = ss + x * x;
        gx = gx + src0[base + c] * src2[tp.off0 + c] * x;
    }
    let rstd = 1.0 / sqrt(reduce_sum(lid, ss) / f32(tp.width) + tp.eps);
    let k = reduce_sum(lid, gx) * rstd * rstd * rstd / f32(tp.width);
    for (var c = lid; c < tp.width; c = c + 64u) {
        var d = rstd * src0[base + c] * src2[tp.off0 + c] - src1[base + c] * k;
        if (tp.flag != 0u) {
            d = d + dst0[base + c];
        }
        dst0[base + c] = d;
    }
}

// RMSNorm gain gradient, one column per workgroup: dw_c = Σ_r dy[r, c]·x[r, c]·rstd_r, each
// invocation summing every 64th row, then the workgroup's sum (a column per invocation walked all
// 2,048 rows of a 16 × 128 batch in series: 0.2–0.6 ms per call on an H200).
// src0 dy, src1 x, src2 rstd, dst0 gradients (w at off0).
@compute @workgroup_size(64)
fn rms_dw(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let c = group(wg, nwg);
    if (c >= tp.width) {
        return;
    }
    var s = 0.0;
    for (var r = lid; r < tp.rows; r = r + RED_WG) {
        s = s + src0[r * tp.width + c] * src1[r * tp.width + c] * src2[r];
    }
    let total = reduce_sum(lid, s);
    if (lid == 0u) {
        dst0[tp.off0 + c] = total;
    }
}

// SwiGLU: h = silu(g)·u.  src0 g, src1 u, dst0 h (rows·width values).
@compute @workgroup_size(64)
fn swiglu_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.rows * tp.width) {
        return;
    }
    dst0[e] = silu(src0[e]) * src1[e];
}

// SwiGLU backward: dg = dh·u·σ(g)(1 + g(1 − σ(g))), du = dh·silu(g).  src0 g, src1 u, src2 dh,
// dst0 dg, dst1 du.
@compute @workgroup_size(64)
fn swiglu_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.rows * tp.width) {
        return;
    }
    let g = src0[e];
    let sg = 1.0 / (1.0 + exp(min(-g, 80.0)));
    dst0[e] = src2[e] * src1[e] * sg * (1.0 + g * (1.0 - sg));
    dst1[e] = src2[e] * g * sg;
}

// RoPE on adjacent channel pairs (2k, 2k + 1), k < n, of every head of dst0 ([rows, a], heads of
// dh at h·dh), in place: (x0 c − x1 s, x1 c + x0 s); flag 1 rotates back (the backward pass).
// src0 the table [t, n, 2] of (cos, sin) at each position.
@compute @workgroup_size(64)
fn rotate(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.rows * tp.h * tp.n) {
        return;
    }
    let k = e % tp.n;
    let hh = (e / tp.n) % tp.h;
    let r = e / (tp.n * tp.h);
    let cs = src0[((r % tp.t) * tp.n + k) * 2u];
    var sn = src0[((r % tp.t) * tp.n + k) * 2u + 1u];
    if (tp.flag != 0u) {
        sn = -sn;
    }
    let i = r * tp.a + hh * tp.dh + 2u * k;
    let x0 = dst0[i];
    let x1 = dst0[i + 1u];
    dst0[i] = x0 * cs - x1 * sn;
    dst0[i + 1u] = x1 * cs + x0 * sn;
}

// Whether query i may see key j: causal, or within the query's block of off0 (TransNormer Diag).
fn visible(i: u32, j: u32) -> bool {
    if (j > i) {
        return false;
    }
    return tp.off0 == 0u || j >= i - i % tp.off0;
}

// Attention weights of one score row per workgroup, in place: row (z, i) of dst0 ([B·H, t, t]:
// the scaled scores q·k), plus the bias (flag 1: a distance table B_h(i − j), src0 [h, n]; flag 2:
// a full bias B_h(i, j), src0 [h, t, t], FIRE's), softmax over the visible keys (mode 1: ReLU,
// TransNormer T1's Diag), 0 elsewhere.
@compute @workgroup_size(64)
fn softmax_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let row = group(wg, nwg);
    if (row >= tp.rows) {
        return;
    }
    let i = row % tp.t;
    let hh = (row / tp.t) % tp.h;
    let base = row * tp.t;
    if (tp.mode == 1u) {
        for (var j = lid; j < tp.t; j = j + 64u) {
            var v = 0.0;
            if (visible(i, j)) {
                v = max(dst0[base + j], 0.0);
            }
            dst0[base + j] = v;
        }
        return;
    }
    var mx = -3.0e38;
    for (var j = lid; j < tp.t; j = j + 64u) {
        if (visible(i, j)) {
            var s = dst0[base + j];
            if (tp.flag == 1u) {
                s = s + src0[hh * tp.n + i - j];
            } else if (tp.flag == 2u) {
                s = s + src0[(hh * tp.t + i) * tp.t + j];
            }
            dst0[base + j] = s;
            mx = max(mx, s);
        }
    }
    mx = reduce_max(lid, mx);
    var sum = 0.0;
    for (var j = lid; j < tp.t; j = j + 64u) {
        if (visible(i, j)) {
            let e = exp(dst0[base + j] - mx);
            dst0[base + j] = e;
            sum = sum + e;
        }
    }
    let inv = 1.0 / reduce_sum(lid, sum);
    for (var j = lid; j < tp.t; j = j + 64u) {
        var v = 0.0;
        if (visible(i, j)) {
            v = dst0[base + j] * inv;
        }
        dst0[base + j] = v;
    }
}

// Softmax backward of one row per workgroup, in place: dS_j = P_j (dP_j − Σ_k P_k dP_k) (mode 1,
// ReLU: dS_j = dP_j where P_j > 0, else 0).  src0 P, dst0 dP → dS.
@compute @workgroup_size(64)
fn softmax_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let row = group(wg, nwg);
    if (row >= tp.rows) {
        return;
    }
    let base = row * tp.t;
    if (tp.mode == 1u) {
        for (var j = lid; j < tp.t; j = j + 64u) {
            dst0[base + j] = select(0.0, dst0[base + j], src0[base + j] > 0.0);
        }
        return;
    }
    var dot = 0.0;
    for (var j = lid; j < tp.t; j = j + 64u) {
        dot = dot + src0[base + j] * dst0[base + j];
    }
    dot = reduce_sum(lid, dot);
    for (var j = lid; j < tp.t; j = j + 64u) {
        dst0[base + j] = src0[base + j] * (dst0[base + j] - dot);
    }
}

// Gradient of a distance table, one (head, distance) per invocation: dB_h(d) = Σ_{b, i} dS[b, h, i,
// i − d] over visible pairs.  src0 dS [B·H, t, t] (rows = B·H·t), dst0 dB [h, n].
@compute @workgroup_size(64)
fn table_grad(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.h * tp.n) {
        return;
    }
    let d = e % tp.n;
    let hh = e / tp.n;
    var s = 0.0;
    let batches = tp.rows / (tp.h * tp.t);
    for (var b = 0u; b < batches; b = b + 1u) {
        let base = (b * tp.h + hh) * tp.t * tp.t;
        for (var i = d; i < tp.t; i = i + 1u) {
            if (visible(i, i - d)) {
                s = s + src0[base + i * tp.t + i - d];
            }
        }
    }
    dst0[e] = s;
}

// Gradient of a full bias, one (head, i, j) per invocation (n = h·t·t): dB_h(i, j) = Σ_b dS[b, h,
// i, j].  src0 dS [B·H, t, t] (rows = B·H·t), dst0 dB [h, t, t].
@compute @workgroup_size(64)
fn bias_grad(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    let per_batch = tp.h * tp.t * tp.t;
    var s = 0.0;
    for (var b = 0u; b < tp.rows / (tp.h * tp.t); b = b + 1u) {
        s = s + src0[b * per_batch + e];
    }
    dst0[e] = s;
}

// Cross-entropy of one row per workgroup: loss_r = logsumexp(z) − z[target], and in place
// dz = (softmax(z) − onehot(target))·scale (scale = 1/rows: the mean).  ids targets, dst0 logits
// [rows, n] → their gradient, dst1 loss [rows].
@compute @workgroup_size(64)
fn xent(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
    let r = group(wg, nwg);
    if (r >= tp.rows) {
        return;
    }
    let base = r * tp.n;
    var mx = -3.0e38;
    for (var j = lid; j < tp.n; j = j + 64u) {
        mx = max(mx, dst0[base + j]);
    }
    mx = reduce_max(lid, mx);
    var sum = 0.0;
    for (var j = lid; j < tp.n; j = j + 64u) {
        sum = sum + exp(dst0[base + j] - mx);
    }
    sum = reduce_sum(lid, sum);
    let tgt = ids[r];
    let zt = dst0[base + tgt];
    workgroupBarrier();
    for (var j = lid; j < tp.n; j = j + 64u) {
        var g = exp(dst0[base + j] - mx) / sum;
        if (j == tgt) {
            g = g - 1.0;
        }
        dst0[base + j] = g * tp.scale;
    }
    if (lid == 0u) {
        dst1[r] = mx + log(sum) - zt;
    }
}

// Partial sums of squares of src0[0 .. n], one per workgroup (the host adds them in f64: the global
// gradient norm).  dst0 partials.
@compute @workgroup_size(64)
fn sumsq(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let g = group(wg, nwg);
    let stride = nwg.x * nwg.y * 64u;
    var s = 0.0;
    for (var e = g * 64u + lid; e < tp.n; e = e + stride) {
        s = s + src0[e] * src0[e];
    }
    s = reduce_sum(lid, s);
    if (lid == 0u) {
        dst0[g] = s;
    }
}

// AdamW (decoupled weight decay, bias-corrected moments), the candle trainer's update
// (crates/train/src/optim.rs): g = grad·clip; m = β1 m + (1 − β1) g; v = β2 v + (1 − β2) g²;
// θ ← θ·(1 − lr·wd) for the first n_decay values; θ ← θ − lr·(m/bc1)/(√(v/bc2) + eps).
// src0 gradients, dst0 parameters, dst1 m, dst2 v.
@compute @workgroup_size(64)
fn adamw(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
         @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= ap.n) {
        return;
    }
    let g = src0[e] * ap.clip;
    let m = ap.b1 * dst1[e] + (1.0 - ap.b1) * g;
    let v = ap.b2 * dst2[e] + (1.0 - ap.b2) * g * g;
    dst1[e] = m;
    dst2[e] = v;
    var theta = dst0[e];
    if (e < ap.n_decay) {
        theta = theta * ap.decay;
    }
    dst0[e] = theta - ap.lr * ((m / ap.bc1) / (sqrt(v / ap.bc2) + ap.eps));
}

// Linear attention's feature map, elementwise: dst0 = scale·φ(src0) over n values; mode 0 identity,
// 1: 1 + elu (Katharopoulos et al., §3.2, Eq. 7), 2: elu (TransNormer T1), 3: swish x·σ(x).
@compute @workgroup_size(64)
fn feature_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    let x = src0[e];
    var y = x;
    if (tp.mode == 1u || tp.mode == 2u) {
        y = select(exp(min(x, 0.0)) - 1.0, x, x > 0.0);
        if (tp.mode == 1u) {
            y = y + 1.0;
        }
    } else if (tp.mode == 3u) {
        y = silu(x);
    }
    dst0[e] = tp.scale * y;
}

// Its backward: dst0 = scale·φ'(x)·dφ.  src0 x, src1 dφ.
@compute @workgroup_size(64)
fn feature_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    let x = src0[e];
    var d = 1.0;
    if (tp.mode == 1u || tp.mode == 2u) {
        d = select(exp(min(x, 0.0)), 1.0, x > 0.0);
    } else if (tp.mode == 3u) {
        let sg = 1.0 / (1.0 + exp(min(-x, 80.0)));
        d = sg * (1.0 + x * (1.0 - sg));
    }
    dst0[e] = tp.scale * d * src1[e];
}

// Linear attention's causal weights, one score row per workgroup, in place on dst0 ([B·H, t, t]):
// × 1 for s ≤ i (mode 0) or × γ_h^{i − s} (mode 1, src0 = ln γ [h]: RetNet), 0 above the diagonal.
// The backward pass runs the same kernel on dP, first adding the row's denominator gradient
// (flag 1: src1 [rows]).
@compute @workgroup_size(64)
fn causal_weights(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) lid: u32) {
    let row = group(wg, nwg);
    if (row >= tp.rows) {
        return;
    }
    let i = row % tp.t;
    let hh = (row / tp.t) % tp.h;
    let base = row * tp.t;
    for (var j = lid; j < tp.t; j = j + 64u) {
        var v = 0.0;
        if (j <= i) {
            v = dst0[base + j];
            if (tp.flag != 0u) {
                v = v + src1[row];
            }
            if (tp.mode == 1u) {
                v = v * exp(f32(i - j) * src0[hh]);
            }
        }
        dst0[base + j] = v;
    }
}

// The denominator (Katharopoulos §3.2, Eq. 5), one (b, h, i) row per workgroup: den = max(Σ_s P_is,
// eps) into dst1[row], and the head's output row of dst0 ([rows of t·h heads, a], heads of dh)
// divided by it in place.  src0 P, eps.
@compute @workgroup_size(64)
fn den_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let row = group(wg, nwg);
    if (row >= tp.rows) {
        return;
    }
    var s = 0.0;
    for (var j = lid; j < tp.t; j = j + 64u) {
        s = s + src0[row * tp.t + j];
    }
    let den = max(reduce_sum(lid, s), tp.eps);
    let o = head_at(row, row % tp.t);
    for (var c = lid; c < tp.dh; c = c + 64u) {
        dst0[o + c] = dst0[o + c] / den;
    }
    if (lid == 0u) {
        dst1[row] = den;
    }
}

// Denominator backward, one row per workgroup: with y = o/den saved (src0) and dy (dst0, in place
// → dy/den), the row's d den = −Σ_c dy_c y_c / den, passed to dP (dst1[row]) when den = Σ P > eps.
// src1 den [rows], src2 P.
@compute @workgroup_size(64)
fn den_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let row = group(wg, nwg);
    if (row >= tp.rows) {
        return;
    }
    let o = head_at(row, row % tp.t);
    let den = src1[row];
    var dot = 0.0;
    var s = 0.0;
    for (var c = lid; c < tp.dh; c = c + 64u) {
        dot = dot + dst0[o + c] * src0[o + c];
    }
    for (var j = lid; j < tp.t; j = j + 64u) {
        s = s + src2[row * tp.t + j];
    }
    dot = reduce_sum(lid, dot);
    s = reduce_sum(lid, s);
    for (var c = lid; c < tp.dh; c = c + 64u) {
        dst0[o + c] = dst0[o + c] / den;
    }
    if (lid == 0u) {
        dst1[row] = select(0.0, -dot / den, s > tp.eps);
    }
}

// SimpleRMSNorm of one row of `width` per workgroup (TransNormer, §4.2, Eq. 14; fairseq-evo):
// y = x / (√mean x² + eps).  src0 x, dst0 y.
@compute @workgroup_size(64)
fn srms_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let r = group(wg, nwg);
    if (r >= tp.rows) {
        return;
    }
    let base = r * tp.width;
    var ss = 0.0;
    for (var c = lid; c < tp.width; c = c + 64u) {
        ss = ss + src0[base + c] * src0[base + c];
    }
    let rms = sqrt(reduce_sum(lid, ss) / f32(tp.width));
    for (var c = lid; c < tp.width; c = c + 64u) {
        dst0[base + c] = src0[base + c] / (rms + tp.eps);
    }
}

// Its backward: dx = dy/(r + eps) − x·(dy·x)/((r + eps)²·r·width), r = √mean x².  src0 x, src1 dy,
// dst0 dx.
@compute @workgroup_size(64)
fn srms_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let r = group(wg, nwg);
    if (r >= tp.rows) {
        return;
    }
    let base = r * tp.width;
    var ss = 0.0;
    var dx = 0.0;
    for (var c = lid; c < tp.width; c = c + 64u) {
        ss = ss + src0[base + c] * src0[base + c];
        dx = dx + src0[base + c] * src1[base + c];
    }
    let rms = sqrt(reduce_sum(lid, ss) / f32(tp.width));
    let k = reduce_sum(lid, dx) / ((rms + tp.eps) * (rms + tp.eps) * max(rms, 1e-30) * f32(tp.width));
    for (var c = lid; c < tp.width; c = c + 64u) {
        dst0[base + c] = src1[base + c] / (rms + tp.eps) - src0[base + c] * k;
    }
}

// LRPE's fixed Householder reflection P = I − 2 v vᵀ (LRPE §3.4, Eq. 73; v unit, src0 [dh]) on
// every head of dst0 [rows, a] in place, one (row, head) per invocation (n = rows·h). P is its own
// transpose, so the backward pass runs the same kernel.
@compute @workgroup_size(64)
fn householder(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    let at = (e / tp.h) * tp.a + (e % tp.h) * tp.dh;
    var dot = 0.0;
    for (var j = 0u; j < tp.dh; j = j + 1u) {
        dot = dot + dst0[at + j] * src0[j];
    }
    for (var j = 0u; j < tp.dh; j = j + 1u) {
        dst0[at + j] = dst0[at + j] - 2.0 * dot * src0[j];
    }
}

// A permutation of every head's channels, y[j] = x[idx[j]]: one table [dh] (LRPE's odd-even P,
// Eq. 74) or with mode 1 one per position [t, dh] (the permutation core's π^s, §3.3); the backward
// pass passes the inverse tables.  src0 x, ids idx, dst0 y; n = rows·a.
@compute @workgroup_size(64)
fn permute(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    let j = e % tp.dh;
    var row = 0u;
    if (tp.mode == 1u) {
        row = (e / tp.a) % tp.t;
    }
    dst0[e] = src0[e - j + ids[row * tp.dh + j]];
}

// Gradient of a rotation table (cos, sin) at (position t, pair k), one per invocation (n = t·pairs):
// with y the rotated features (src1) and dy their gradient (src2), x = R⁻¹y, and over every
// sequence and head d cos = dy0·x0 + dy1·x1, d sin = dy1·x0 − dy0·x1.  src0 the table [t, pairs, 2],
// dst0 its gradient (flag 1: add, for the second side).
@compute @workgroup_size(64)
fn rot_grad(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.t * tp.n) {
        return;
    }
    let t = e / tp.n;
    let k = e % tp.n;
    let cs = src0[2u * e];
    let sn = src0[2u * e + 1u];
    var dc = 0.0;
    var ds = 0.0;
    for (var b = 0u; b < tp.rows / tp.t; b = b + 1u) {
        for (var hh = 0u; hh < tp.h; hh = hh + 1u) {
            let at = (b * tp.t + t) * tp.a + hh * tp.dh + 2u * k;
            let y0 = src1[at];
            let y1 = src1[at + 1u];
            let x0 = y0 * cs + y1 * sn;
            let x1 = y1 * cs - y0 * sn;
            dc = dc + src2[at] * x0 + src2[at + 1u] * x1;
            ds = ds + src2[at + 1u] * x0 - src2[at] * x1;
        }
    }
    if (tp.flag != 0u) {
        dc = dc + dst0[2u * e];
        ds = ds + dst0[2u * e + 1u];
    }
    dst0[2u * e] = dc;
    dst0[2u * e + 1u] = ds;
}

// LRPE's complex core (Type 1, LRPE §3.3: exp(i s α_j) realised as [x ⊙ cos, x ⊙ sin]): every
// head's dh channels (src1, [rows, a]) become 2·dh (dst0, [rows, 2a]), with the table (cos, sin)
// at each position and channel (src0 [t, dh, 2]); one (row, head, channel) per invocation
// (n = rows·a).
@compute @workgroup_size(64)
fn complex_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    let j = e % tp.dh;
    let hh = (e / tp.dh) % tp.h;
    let r = e / tp.a;
    let tab = ((r % tp.t) * tp.dh + j) * 2u;
    let out = r * 2u * tp.a + hh * 2u * tp.dh + j;
    dst0[out] = src1[e] * src0[tab];
    dst0[out + tp.dh] = src1[e] * src0[tab + 1u];
}

// Its backward: dx_j = dy_j cos + dy_{dh + j} sin.  src0 the table, src1 dy [rows, 2a], dst0 dx.
@compute @workgroup_size(64)
fn complex_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    let j = e % tp.dh;
    let hh = (e / tp.dh) % tp.h;
    let r = e / tp.a;
    let tab = ((r % tp.t) * tp.dh + j) * 2u;
    let at = r * 2u * tp.a + hh * 2u * tp.dh + j;
    dst0[e] = src1[at] * src0[tab] + src1[at + tp.dh] * src0[tab + 1u];
}

// The gradient of its table at (position t, channel j), one per invocation (n = t·dh), over every
// sequence and head: d cos = Σ dy_j x_j, d sin = Σ dy_{dh + j} x_j.  src0 x [rows, a] (before the
// core), src1 dy [rows, 2a], dst0 the gradient [t, dh, 2] (flag 1: add, for the second side).
@compute @workgroup_size(64)
fn complex_grad(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.t * tp.dh) {
        return;
    }
    let t = e / tp.dh;
    let j = e % tp.dh;
    var dc = 0.0;
    var ds = 0.0;
    for (var b = 0u; b < tp.rows / tp.t; b = b + 1u) {
        let r = b * tp.t + t;
        for (var hh = 0u; hh < tp.h; hh = hh + 1u) {
            let x = src0[r * tp.a + hh * tp.dh + j];
            let at = r * 2u * tp.a + hh * 2u * tp.dh + j;
            dc = dc + src1[at] * x;
            ds = ds + src1[at + tp.dh] * x;
        }
    }
    if (tp.flag != 0u) {
        dc = dc + dst0[2u * e];
        ds = ds + dst0[2u * e + 1u];
    }
    dst0[2u * e] = dc;
    dst0[2u * e + 1u] = ds;
}
