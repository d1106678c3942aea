// The trainer's per-channel gated linear attention (crates/gpu/src/train/mixer.rs), in the exact
// parallel form (GLA, Yang et al., §2, Eq. 3 unrolled; ReGLA §3.1):
//   P_is = Σ_j φq_i[j] φk_s[j] e^{B_i[j] − B_s[j]}  (s ≤ i),   B_i = Σ_{t ≤ i} lg_t ≤ 0 running,
// so every exponent is ≤ 0 for s ≤ i; and the other kernels of the linear mixers' gates and of the
// two q·k-dependent biases' helpers. train_common.wgsl (bindings, index helpers) is prepended.

// GLA's log-gate, elementwise over [rows, width]: lg = lnσ(z + bias[c]) / scale (fla's
// normaliser).  src0 z, src1 parameters (bias at off0), dst0 lg.
@compute @workgroup_size(64)
fn gate_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.rows * tp.width) {
        return;
    }
    dst0[e] = log_sigmoid(src0[e] + src1[tp.off0 + e % tp.width]) / tp.scale;
}

// Its backward: dz = dlg·σ(−(z + bias))/scale.  src0 z, src1 parameters, src2 dlg, dst0 dz.
@compute @workgroup_size(64)
fn gate_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.rows * tp.width) {
        return;
    }
    dst0[e] = src2[e] * sigmoid(-(src0[e] + src1[tp.off0 + e % tp.width])) / tp.scale;
}

// Column sums of src0 [rows, width] into dst0 at off0 (a bias's gradient).
@compute @workgroup_size(64)
fn colsum(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let c = flat(wg, nwg, lid);
    if (c >= tp.width) {
        return;
    }
    var s = 0.0;
    for (var r = 0u; r < tp.rows; r = r + 1u) {
        s = s + src0[r * tp.width + c];
    }
    dst0[tp.off0 + c] = s;
}

// Running sums over each sequence's positions, in place on dst0 [B·t, a]: one (b, channel) per
// invocation (n = B·a): B_i = Σ_{t ≤ i} x_t, or with mode 1 from the end, Σ_{t ≥ i} x_t (the
// backward pass of the running sum).
@compute @workgroup_size(64)
fn cumsum(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    let b = e / tp.a;
    let c = e % tp.a;
    var acc = 0.0;
    for (var q = 0u; q < tp.t; q = q + 1u) {
        var i = q;
        if (tp.mode == 1u) {
            i = tp.t - 1u - q;
        }
        let at = (b * tp.t + i) * tp.a + c;
        acc = acc + dst0[at];
        dst0[at] = acc;
    }
}

// dst0 (+)= scale·src0 ⊙ src1 over n values (flag 1: add): the running log-gate's gradient
// dB = φq ⊙ dφq − φk ⊙ dφk in two calls.
@compute @workgroup_size(64)
fn mul_acc(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    var v = tp.scale * src0[e] * src1[e];
    if (tp.flag != 0u) {
        v = v + dst0[e];
    }
    dst0[e] = v;
}

// Gated weights of one score row per workgroup: dst0[row, s] = P_is for s ≤ i, 0 above.
// src0 φq, src1 φk, src2 B (running log-gates).
@compute @workgroup_size(64)
fn gated_scores(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) lid: u32) {
    let row = group(wg, nwg);
    if (row >= tp.rows) {
        return;
    }
    let i = row % tp.t;
    let qi = head_at(row, i);
    for (var s = lid; s < tp.t; s = s + 64u) {
        var w = 0.0;
        if (s <= i) {
            let ks = head_at(row, s);
            for (var j = 0u; j < tp.dh; j = j + 1u) {
                w = w + src0[qi + j] * src1[ks + j] * exp(src2[qi + j] - src2[ks + j]);
            }
        }
        dst0[row * tp.t + s] = w;
    }
}

// dφq_i[j] = Σ_{s ≤ i} dP_is φk_s[j] e^{B_i[j] − B_s[j]}, one score row per workgroup (mode 0);
// mode 1 the keys' dφk_s[j] = Σ_{i ≥ s} dP_is φq_i[j] e^{B_i[j] − B_s[j]} with the row read as s.
// src0 dP, src1 the other side's features (φk, or φq), src2 B, dst0 the gradient [B·t, a].
@compute @workgroup_size(64)
fn gated_dfeat(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let row = group(wg, nwg);
    if (row >= tp.rows) {
        return;
    }
    let me = row % tp.t;
    let base = row - me;
    let at = head_at(row, me);
    for (var j = lid; j < tp.dh; j = j + 64u) {
        var g = 0.0;
        if (tp.mode == 0u) {
            for (var s = 0u; s <= me; s = s + 1u) {
                let ks = head_at(row, s);
                g = g + src0[row * tp.t + s] * src1[ks + j] * exp(src2[at + j] - src2[ks + j]);
            }
        } else {
            for (var i = me; i < tp.t; i = i + 1u) {
                let qi = head_at(row, i);
                g = g + src0[(base + i) * tp.t + me] * src1[qi + j] * exp(src2[qi + j] - src2[at + j]);
            }
        }
        dst0[at + j] = g;
    }
}

// Fast Decay's value-axis decay (ReGLA §2.1, Eq. 10): with running value log-gates C,
//   o_i[c] = Σ_{s ≤ i} P_is e^{C_i[c] − C_s[c]} v_s[c],
// one score row per workgroup.  src0 P, src1 v, src2 C, dst0 o.
@compute @workgroup_size(64)
fn gated_pv(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let row = group(wg, nwg);
    if (row >= tp.rows) {
        return;
    }
    let i = row % tp.t;
    let at = head_at(row, i);
    for (var c = lid; c < tp.dh; c = c + 64u) {
        var acc = 0.0;
        for (var s = 0u; s <= i; s = s + 1u) {
            let vs = head_at(row, s);
            acc = acc + src0[row * tp.t + s] * exp(src2[at + c] - src2[vs + c]) * src1[vs + c];
        }
        dst0[at + c] = acc;
    }
}

// Its weight gradient dP_is = Σ_c do_i[c] e^{C_i[c] − C_s[c]} v_s[c] (0 above the diagonal), one
// score row per workgroup.  src0 do, src1 v, src2 C, dst0 dP.
@compute @workgroup_size(64)
fn gated_dp(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let row = group(wg, nwg);
    if (row >= tp.rows) {
        return;
    }
    let i = row % tp.t;
    let at = head_at(row, i);
    for (var s = lid; s < tp.t; s = s + 64u) {
        var g = 0.0;
        if (s <= i) {
            let vs = head_at(row, s);
            for (var c = 0u; c < tp.dh; c = c + 1u) {
                g = g + src0[at + c] * exp(src2[at + c] - src2[vs + c]) * src1[vs + c];
            }
        }
        dst0[row * tp.t + s] = g;
    }
}

// Its value gradient dv_s[c] = Σ_{i ≥ s} do_i[c] P_is e^{C_i[c] − C_s[c]}, the score row read as
// s.  src0 P, src1 do, src2 C, dst0 dv.
@compute @workgroup_size(64)
fn gated_dv(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let row = group(wg, nwg);
    if (row >= tp.rows) {
        return;
    }
    let me = row % tp.t;
    let base = row - me;
    let at = head_at(row, me);
    for (var c = lid; c < tp.dh; c = c + 64u) {
        var g = 0.0;
        for (var i = me; i < tp.t; i = i + 1u) {
            let oi = head_at(row, i);
            g = g + src1[oi + c] * src0[(base + i) * tp.t + me] * exp(src2[oi + c] - src2[at + c]);
        }
        dst0[at + c] = g;
    }
}

// ReGLA's refined gate in the log domain (ReGLA §3.3, Eqs. 16–18), elementwise over [rows, width]:
// g = σ(zg + bg), r = σ(zr + br), F = (1 − r) g² + r (1 − (1 − g)²), and
//   ln F = lnσ(ag) + logaddexp(lnσ(ag), ln 2 + lnσ(ar) + lnσ(−ag)),  clamped to ≤ 0.
// src0 zg, src1 zr, src2 parameters (bg at off0, br at off1), dst0 lg.
@compute @workgroup_size(64)
fn refined_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.rows * tp.width) {
        return;
    }
    let c = e % tp.width;
    let ag = src0[e] + src2[tp.off0 + c];
    let ar = src1[e] + src2[tp.off1 + c];
    let lsg = log_sigmoid(ag);
    let other = log_sigmoid(ar) + log_sigmoid(-ag) + 0.6931472;
    let m = max(lsg, other);
    dst0[e] = min(lsg + m + log(1.0 + exp(-abs(lsg - other))), 0.0);
}

// Its backward: with w = σ(lnσ(ag) − other) the weight of the first term of the logaddexp,
//   d lnF/d ag = σ(−ag)(1 + w) − (1 − w)σ(ag),  d lnF/d ar = (1 − w)σ(−ar).
// src0 zg, src1 zr, src2 parameters, dst0 dlg → dzg (in place), dst1 dzr.
@compute @workgroup_size(64)
fn refined_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.rows * tp.width) {
        return;
    }
    let c = e % tp.width;
    let ag = src0[e] + src2[tp.off0 + c];
    let ar = src1[e] + src2[tp.off1 + c];
    let lsg = log_sigmoid(ag);
    let other = log_sigmoid(ar) + log_sigmoid(-ag) + 0.6931472;
    let w = sigmoid(lsg - other);
    let dlg = dst0[e];
    dst0[e] = dlg * (sigmoid(-ag) * (1.0 + w) - (1.0 - w) * sigmoid(ag));
    dst1[e] = dlg * (1.0 - w) * sigmoid(-ar);
}

// ReGLA's query map φ(x) = scale·exp(x − max_j x_j) over each head (ReGLA §3.2, Eq. 11), one
// (row, head) per invocation (n = rows·h).  src0 x, dst0 φ.
@compute @workgroup_size(64)
fn expmax_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    let at = (e / tp.h) * tp.a + (e % tp.h) * tp.dh;
    var m = -3.0e38;
    for (var j = 0u; j < tp.dh; j = j + 1u) {
        m = max(m, src0[at + j]);
    }
    for (var j = 0u; j < tp.dh; j = j + 1u) {
        dst0[at + j] = tp.scale * exp(src0[at + j] - m);
    }
}

// Its backward, the max's gradient going to the entries equal to it (candle's): with u = e^{x − m}
// and du = scale·dφ, dx_j = u_j du_j − [x_j = m] Σ_k u_k du_k.  src0 x, src1 dφ, dst0 dx.
@compute @workgroup_size(64)
fn expmax_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.n) {
        return;
    }
    let at = (e / tp.h) * tp.a + (e % tp.h) * tp.dh;
    var m = -3.0e38;
    for (var j = 0u; j < tp.dh; j = j + 1u) {
        m = max(m, src0[at + j]);
    }
    var sum = 0.0;
    for (var j = 0u; j < tp.dh; j = j + 1u) {
        sum = sum + exp(src0[at + j] - m) * tp.scale * src1[at + j];
    }
    for (var j = 0u; j < tp.dh; j = j + 1u) {
        let x = src0[at + j];
        dst0[at + j] = exp(x - m) * tp.scale * src1[at + j] - select(0.0, sum, x == m);
    }
}

// ReGLA's key map with the running maximum M_t = max_{s ≤ t} max_j k_s[j] of each head (the
// causal stand-in for §3.2's global max): φk_t = scale·exp(k_t − M_t), and the state rescale
// M_{t−1} − M_t (0 at t = 0) added to every channel of the head's log-gate. One (b, head) per
// workgroup (n = B·h), each invocation a chunk of consecutive positions; the maximum before a
// chunk comes from the other chunks' maxima (`runmax_before`), so the result is the serial walk's
// to the bit.  src0 k, dst0 φk, dst1 lg (+=).
@compute @workgroup_size(64)
fn runmax_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let e = group(wg, nwg);
    if (e >= tp.n) {
        return;
    }
    let base = (e / tp.h) * tp.t * tp.a + (e % tp.h) * tp.dh;
    let span = runmax_chunk(lid);
    var prev = runmax_before(lid, span, base);
    for (var t = span.x; t < span.y; t = t + 1u) {
        let at = base + t * tp.a;
        let m = max(prev, head_max(at));
        if (t == 0u) {
            prev = m;
        }
        for (var j = 0u; j < tp.dh; j = j + 1u) {
            dst0[at + j] = tp.scale * exp(src0[at + j] - m);
            dst1[at + j] = dst1[at + j] + prev - m;
        }
        prev = m;
    }
}

// The running-max kernels' per-chunk scratch: each chunk's maximum of its keys; its first running
// maximum and the sum of dM over the leading run of positions holding that value.
var<workgroup> chunk_max: array<f32, 64>;
var<workgroup> chunk_first: array<f32, 64>;
var<workgroup> chunk_head: array<f32, 64>;

// Invocation lid's positions [x, y) of the tp.t: ⌈t / 64⌉ consecutive ones (empty past the end).
fn runmax_chunk(lid: u32) -> vec2<u32> {
    let len = (tp.t + 63u) / 64u;
    let t0 = min(lid * len, tp.t);
    return vec2<u32>(t0, min(t0 + len, tp.t));
}

// max_j src0[at + j] over a head's channels.
fn head_max(at: u32) -> f32 {
    var m = -3.0e38;
    for (var j = 0u; j < tp.dh; j = j + 1u) {
        m = max(m, src0[at + j]);
    }
    return m;
}

// The running maximum before invocation lid's chunk (−3e38 for the first); every invocation calls
// it (a barrier inside).
fn runmax_before(lid: u32, span: vec2<u32>, base: u32) -> f32 {
    var m = -3.0e38;
    for (var t = span.x; t < span.y; t = t + 1u) {
        m = max(m, head_max(base + t * tp.a));
    }
    chunk_max[lid] = m;
    workgroupBarrier();
    var before = -3.0e38;
    for (var c = 0u; c < lid; c = c + 1u) {
        before = max(before, chunk_max[c]);
    }
    return before;
}

// dM_t = −Σ_j φk_t dφk_t − Σ_j dlg_t + Σ_j dlg_{t+1} (+ Σ_j dlg_0 at t = 0) for the position at
// `at` (src1 φk, src2 dφk, dst1 dlg).
fn runmax_dm(at: u32, t: u32) -> f32 {
    var own = 0.0;
    var dl = 0.0;
    for (var j = 0u; j < tp.dh; j = j + 1u) {
        own = own + src1[at + j] * src2[at + j];
        dl = dl + dst1[at + j];
    }
    var dm = -own - dl;
    if (t + 1u < tp.t) {
        for (var j = 0u; j < tp.dh; j = j + 1u) {
            dm = dm + dst1[at + tp.a + j];
        }
    }
    if (t == 0u) {
        dm = dm + dl;
    }
    return dm;
}

// Its backward: dk = φk ⊙ dφk directly, plus each position's dM_t (`runmax_dm`) given to every
// entry k_s[j] (s ≤ t) equal to M_t, as candle's max does with ties (a token repeated in a window
// gives equal keys in the first layer). M is non-decreasing, so the entries equal to M_t lie in the
// run of positions holding that value, and each takes the sum of dM over the run from its position
// on: within a chunk by walking back, then for the chunk's last run the sum over its continuation
// in the later chunks (their leading runs). One (b, head) per workgroup as in the forward.
// src0 k, src1 φk, src2 dφk, dst1 dlg (read), dst0 dk, dst2 scratch M [B·h·t].
@compute @workgroup_size(64)
fn runmax_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let e = group(wg, nwg);
    if (e >= tp.n) {
        return;
    }
    let base = (e / tp.h) * tp.t * tp.a + (e % tp.h) * tp.dh;
    let span = runmax_chunk(lid);
    var last = runmax_before(lid, span, base);
    for (var t = span.x; t < span.y; t = t + 1u) {
        let at = base + t * tp.a;
        for (var j = 0u; j < tp.dh; j = j + 1u) {
            dst0[at + j] = src1[at + j] * src2[at + j];
        }
        last = max(last, head_max(at));
        dst2[e * tp.t + t] = last;
    }
    // Walking back: acc is the sum of dM over the run from t on, within the chunk; at the chunk's
    // first position, over its leading run.
    var acc = 0.0;
    var first = last;
    for (var q = 0u; q < span.y - span.x; q = q + 1u) {
        let t = span.y - 1u - q;
        let at = base + t * tp.a;
        first = dst2[e * tp.t + t];
        if (t + 1u < span.y && dst2[e * tp.t + t + 1u] != first) {
            acc = 0.0;
        }
        acc = acc + runmax_dm(at, t);
        runmax_give(at, first, acc);
    }
    chunk_first[lid] = first;
    chunk_head[lid] = acc;
    workgroupBarrier();
    if (span.y == span.x) {
        return;
    }
    // The chunk's last run goes on into the next chunks while they start with its maximum.
    var carry = 0.0;
    for (var c = lid + 1u; c < 64u; c = c + 1u) {
        if (runmax_chunk(c).x >= tp.t || chunk_first[c] != last) {
            break;
        }
        // (A chunk whose maximum rises past its leading run ends the walk at the next one, which
        // starts above `last`: M never falls.)
        carry = carry + chunk_head[c];
    }
    for (var q = 0u; q < span.y - span.x; q = q + 1u) {
        let t = span.y - 1u - q;
        if (dst2[e * tp.t + t] != last) {
            break;
        }
        runmax_give(base + t * tp.a, last, carry);
    }
}

// dk[at + j] += g for the head's keys equal to the running maximum m.
fn runmax_give(at: u32, m: f32, g: f32) {
    for (var j = 0u; j < tp.dh; j = j + 1u) {
        if (src0[at + j] == m) {
            dst0[at + j] = dst0[at + j] + g;
        }
    }
}

// HGRN2's coupled key and forget gate ("HGRN2", §3; HGRN §3.2's lower bounds β per channel, src1
// [width]), elementwise over [rows, width] from the key projection f (src0):
//   φk = (1 − β) σ(−f),   lg = ln(β + (1 − β) σ(f))   (lnσ(f) where β = 0).
// dst0 φk, dst1 lg.
@compute @workgroup_size(64)
fn keyforget_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.rows * tp.width) {
        return;
    }
    let f = src0[e];
    let beta = src1[e % tp.width];
    dst0[e] = (1.0 - beta) * sigmoid(-f);
    if (beta == 0.0) {
        dst1[e] = log_sigmoid(f);
    } else {
        dst1[e] = min(log(beta + (1.0 - beta) * sigmoid(f)), 0.0);
    }
}

// Its backward: from dφk (src2) and dlg (dst1, read), df into dst0 and each element's dβ into dst2
// (summed over rows by `colsum`):
//   df = −σ(f)σ(−f)(1 − β)·dφk + dlg·(1 − β)σ(f)σ(−f)/g,  dβ = −σ(−f)·dφk + dlg·σ(−f)/g,
// g = β + (1 − β)σ(f) (with β = 0: df's second term dlg·σ(−f), no dβ from lg).
@compute @workgroup_size(64)
fn keyforget_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                 @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    if (e >= tp.rows * tp.width) {
        return;
    }
    let f = src0[e];
    let beta = src1[e % tp.width];
    let s = sigmoid(f);
    let sn = sigmoid(-f);
    let dk = src2[e];
    let dlg = dst1[e];
    var df = -s * sn * (1.0 - beta) * dk;
    var db = -sn * dk;
    if (beta == 0.0) {
        df = df + dlg * sn;
    } else {
        let g = beta + (1.0 - beta) * s;
        df = df + dlg * (1.0 - beta) * s * sn / g;
        db = db + dlg * sn / g;
    }
    dst0[e] = df;
    dst2[e] = db;
}

// CoPE (Golovneva et al., "Contextual Position Encoding", §3) on one score row per invocation
// (n = B·h·t rows): gates g_j = σ(s_j) of the scaled scores (dst0, in place), positions
// p_j = Σ_{t = j..i} g_t counted from the query back, clamped to npos − 1 (tp.n = npos), and the
// bias q_i·e[p_j] interpolated between ⌊p⌋ and ⌈p⌉ added to s_j.  src0 q, src1 parameters (e
// [npos, dh] at off0), dst1 gates, dst2 the unclamped positions.
fn cope_qe(q0: u32, p: u32) -> f32 {
    var dot = 0.0;
    for (var c = 0u; c < tp.dh; c = c + 1u) {
        dot = dot + src0[q0 + c] * src1[tp.off0 + p * tp.dh + c];
    }
    return dot;
}

@compute @workgroup_size(64)
fn cope_fwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let row = flat(wg, nwg, lid);
    if (row >= tp.rows) {
        return;
    }
    let i = row % tp.t;
    let q0 = head_at(row, i);
    let lim = f32(tp.n - 1u);
    var acc = 0.0;
    for (var back = 0u; back <= i; back = back + 1u) {
        let j = i - back;
        let at = row * tp.t + j;
        let s = dst0[at];
        let g = sigmoid(s);
        acc = acc + g;
        dst1[at] = g;
        dst2[at] = acc;
        let pos = min(acc, lim);
        let lo = floor(pos);
        let hi = min(ceil(pos), lim);
        let w = pos - lo;
        dst0[at] = s + cope_qe(q0, u32(hi)) * w + cope_qe(q0, u32(lo)) * (1.0 - w);
    }
}

// Its backward on one row per invocation: with dS the gradient of the biased scores (dst0, in
// place), d int[lo] += dS(1 − w), d int[hi] += dS·w (dst2 [rows, npos]), dp_j = dS_j·(q·e[hi] −
// q·e[lo]) where the clamp passes it (½ at the limit, as candle's minimum), and through the gates
// dS_t += g_t(1 − g_t)·Σ_{j ≤ t} dp_j.  src0 q, src1 parameters, src2 gates, dst1 positions (then
// dp, scratch).
@compute @workgroup_size(64)
fn cope_bwd(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) lid: u32) {
    let row = flat(wg, nwg, lid);
    if (row >= tp.rows) {
        return;
    }
    let i = row % tp.t;
    let q0 = head_at(row, i);
    let lim = f32(tp.n - 1u);
    for (var p = 0u; p < tp.n; p = p + 1u) {
        dst2[row * tp.n + p] = 0.0;
    }
    for (var j = 0u; j <= i; j = j + 1u) {
        let at = row * tp.t + j;
        let ds = dst0[at];
        let raw = dst1[at];
        let pos = min(raw, lim);
        let lo = floor(pos);
        let hi = min(ceil(pos), lim);
        let w = pos - lo;
        dst2[row * tp.n + u32(lo)] = dst2[row * tp.n + u32(lo)] + ds * (1.0 - w);
        dst2[row * tp.n + u32(hi)] = dst2[row * tp.n + u32(hi)] + ds * w;
        var through = 0.0;
        if (raw < lim) {
            through = 1.0;
        } else if (raw == lim) {
            through = 0.5;
        }
        dst1[at] = through * ds * (cope_qe(q0, u32(hi)) - cope_qe(q0, u32(lo)));
    }
    var prefix = 0.0;
    for (var t = 0u; t <= i; t = t + 1u) {
        let at = row * tp.t + t;
        prefix = prefix + dst1[at];
        let g = src2[at];
        dst0[at] = dst0[at] + prefix * g * (1.0 - g);
    }
}

// The bias's gradients to the query and to e: mode 0, dq_row[c] += Σ_p d int[row, p]·e[p, c] (one
// (row, channel) per invocation, n = rows·dh; dst0 dq [B·t, a]); mode 1, de[p, c] = Σ_rows
// d int[row, p]·q_row[c] (one (p, c) per invocation, n = npos·dh; dst0 gradients at off0).
// src0 d int [rows, npos], src1 parameters (mode 0) or q (mode 1).
@compute @workgroup_size(64)
fn cope_grads(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) lid: u32) {
    let e = flat(wg, nwg, lid);
    let npos = tp.width;
    if (e >= tp.n) {
        return;
    }
    let c = e % tp.dh;
    if (tp.mode == 0u) {
        let row = e / tp.dh;
        var s = 0.0;
        for (var p = 0u; p < npos; p = p + 1u) {
            s = s + src0[row * npos + p] * src1[tp.off0 + p * tp.dh + c];
        }
        let at = head_at(row, row % tp.t) + c;
        dst0[at] = dst0[at] + s;
    } else {
        let p = e / tp.dh;
        var s = 0.0;
        for (var row = 0u; row < tp.rows; row = row + 1u) {
            s = s + src0[row * npos + p] * src1[head_at(row, row % tp.t) + c];
        }
        dst0[tp.off0 + e] = s;
    }
}
