// Introspection: one layer's attention matrices [H, out_n, out_n], bounded and downsampled on the
// GPU (prepended: the prelude, reduce.wgsl, and attention_common.wgsl with the layer's AttnParams `p`
// at binding 0 and bias()), over a window of queries from row0 and keys from col0 (0, 0: the whole
// map). Map row b is query i = min(n − 1, row0 + b·stride + stride − 1), the last query of its block
// of `stride` rows; map column c covers keys col0 + [c·stride, (c+1)·stride): summed for
// probability-like matrices (a whole map's rows keep summing to 1), averaged over the bin's causal
// cells j ≤ i for scores; normalisers always run over the query's whole row. stride = 1 over the
// whole map is the exact n×n matrix of the CPU reference's trace; attnlab_core::analysis::
// attention_window is the reference for every window and stride.
//
// softmax_map: softmax-family layers, from the captured rotated q and the layer's KV cache.
//   STAGE_LOGITS: scale·q·k, STAGE_BIASED: + B_h(i, j), STAGE_PROBABILITIES: softmax probabilities
//   (T1 ReLU: ReLU weights / row sum). A contextual (CoPE) bias walks the keys from the query
//   backwards instead (contextual_map).
// linear_map: the implied matrix of a linear layer (design.md), from captured φq, φk, log-gates:
//   A_ij = Σ_d φq_i[d] φk_j[d] exp(Σ_{s=j+1..i} lg_s[d]), each row divided by Σ_j |A_ij| (signs
//   kept), or by max(Σ_j A_ij, eps) for 1+elu with its denominator (exact weights). With value-axis
//   gates (Fast Decay) A_ij is also multiplied by the mean over the head's value channels c of
//   exp(Σ_{s=j+1..i} lgv_s[c]), as the CPU reference's trace.

// `MapParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(1) var<uniform> mp: MapParams;
@group(0) @binding(2) var<storage, read> qcap: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<f32>;
@group(0) @binding(4) var<storage, read> aux: array<f32>;
@group(0) @binding(5) var<storage, read_write> outp: array<f32>;
@group(0) @binding(6) var<storage, read> fq: array<f32>;
@group(0) @binding(7) var<storage, read> fk: array<f32>;
@group(0) @binding(8) var<storage, read> lg: array<f32>;
@group(0) @binding(9) var<storage, read> lgv: array<f32>;

const MAP_WG: u32 = 64u;

var<workgroup> pj: array<f32, 64>;
var<workgroup> rowbuf: array<f32, MAX_MAP_SIDE>;

fn query_row(b: u32) -> u32 {
    return min(mp.n - 1u, mp.row0 + b * mp.stride + mp.stride - 1u);
}

// Bin c accumulated in rowbuf (keys inside the window only): lane 0 adds the workgroup's 64 per-key
// values of keys base..base+63; returns their sum (or Σ|·|) over every key j ≤ i.
fn add_block(lid: u32, base: u32, i: u32, is_abs: bool) -> f32 {
    var s = 0.0;
    let end = mp.col0 + mp.out_n * mp.stride;
    workgroupBarrier();
    if (lid == 0u) {
        for (var t = 0u; t < MAP_WG; t = t + 1u) {
            let j = base + t;
            if (j <= i) {
                if (j >= mp.col0 && j < end) {
                    let c = (j - mp.col0) / mp.stride;
                    rowbuf[c] = rowbuf[c] + pj[t];
                }
                if (is_abs) {
                    s = s + abs(pj[t]);
                } else {
                    s = s + pj[t];
                }
            }
        }
    }
    workgroupBarrier();
    return s;
}

// One workgroup per (map row, head).
@compute @workgroup_size(64)
fn softmax_map(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) l3: vec3<u32>) {
    let lid = l3.x;
    let b = wg.x;
    let hh = wg.y;
    if (b >= mp.out_n || hh >= p.h) {
        return;
    }
    let i = query_row(b);
    var j0 = 0u;
    if (p.block > 0u) {
        j0 = i - i % p.block;
    }
    var q: array<f32, MAX_DH>;
    for (var c = 0u; c < p.dh; c = c + 1u) {
        q[c] = qcap[i * 3u * p.a + hh * p.dh + c];
    }
    let probs = mp.stage == STAGE_PROBABILITIES;
    let relu = p.relu != 0u;
    if (BIAS_KIND == BIAS_CONTEXTUAL) {
        contextual_map(lid, hh, i, j0, &q);
    } else {
        // Pass 1 (probabilities): row max and normaliser, split over the lanes, then merged.
        var m = -3.0e38;
        var l = 0.0;
        if (probs) {
            for (var j = j0 + lid; j <= i; j = j + MAP_WG) {
                var dot = 0.0;
                for (var c = 0u; c < p.dh; c = c + 1u) {
                    dot = dot + q[c] * kc[j * p.a + hh * p.dh + c];
                }
                let s = p.scale * dot + bias(hh, i, j);
                if (relu) {
                    l = l + max(s, 0.0);
                } else {
                    let m_new = max(m, s);
                    l = l * exp(m - m_new) + exp(s - m_new);
                    m = m_new;
                }
            }
            if (relu) {
                l = reduce_sum(lid, l);
            } else {
                let big = reduce_max(lid, m);
                l = reduce_sum(lid, l * exp(m - big));
                m = big;
            }
        }
        // Pass 2: the window's keys 64 at a time, one per lane, binned into rowbuf.
        let first = max(j0, mp.col0);
        let last = min(i, mp.col0 + mp.out_n * mp.stride - 1u);
        for (var base = first - first % MAP_WG; base <= last && first <= last; base = base + MAP_WG) {
            let j = base + lid;
            var v = 0.0;
            if (j >= j0 && j <= i) {
                var dot = 0.0;
                for (var c = 0u; c < p.dh; c = c + 1u) {
                    dot = dot + q[c] * kc[j * p.a + hh * p.dh + c];
                }
                var s = p.scale * dot;
                if (mp.stage != STAGE_LOGITS) {
                    s = s + bias(hh, i, j);
                }
                v = s;
                if (probs) {
                    if (relu) {
                        v = max(s, 0.0);
                        if (l > 0.0) {
                            v = v / l;
                        }
                    } else {
                        v = exp(s - m) / l;
                    }
                }
            }
            pj[lid] = v;
            add_block(lid, base, i, false);
        }
    }
    for (var c = lid; c < mp.out_n; c = c + MAP_WG) {
        var v = rowbuf[c];
        if (!probs) {
            // Scores: mean over the bin's causal cells (cells outside a Diag block count as 0).
            let lo = mp.col0 + c * mp.stride;
            let hi = min(lo + mp.stride - 1u, i);
            if (hi >= lo) {
                v = v / f32(hi - lo + 1u);
            } else {
                v = 0.0;
            }
        }
        outp[(hh * mp.out_n + b) * mp.out_n + c] = v;
    }
}

// Row i of a CoPE layer's map into rowbuf (Golovneva et al., "Contextual Position Encoding", §3; see
// contextual_position in attention_common.wgsl): keys are walked from the query backwards in aligned
// blocks of 64, the gates' suffix sums giving each key's contextual position and so its bias
// q·e[p_j] (from aux, interpolated). Pass 1 (probabilities) finds the row's max and normaliser of the
// biased logits; pass 2 bins the stage's values of each block.
fn contextual_map(lid: u32, hh: u32, i: u32, j0: u32, q: ptr<function, array<f32, MAX_DH>>) {
    let probs = mp.stage == STAGE_PROBABILITIES;
    let first = j0 - j0 % MAP_WG;
    var m = -3.0e38;
    var l = 0.0;
    if (probs) {
        var carry = 0.0;
        var base = i - i % MAP_WG;
        loop {
            let sp = contextual_position(lid, base, i, j0, hh, q, &carry);
            if (base + lid >= j0 && base + lid <= i) {
                let rows = cope_rows(sp.y);
                let s = sp.x + cope_lerp(sp.y, cope_qe(q, rows.x), cope_qe(q, rows.y));
                let m_new = max(m, s);
                l = l * exp(m - m_new) + exp(s - m_new);
                m = m_new;
            }
            if (base == first) {
                break;
            }
            base = base - MAP_WG;
        }
        let big = reduce_max(lid, m);
        l = reduce_sum(lid, l * exp(m - big));
        m = big;
    }
    var carry = 0.0;
    var base = i - i % MAP_WG;
    loop {
        let sp = contextual_position(lid, base, i, j0, hh, q, &carry);
        var v = 0.0;
        if (base + lid >= j0 && base + lid <= i) {
            v = sp.x;
            if (mp.stage != STAGE_LOGITS) {
                let rows = cope_rows(sp.y);
                v = v + cope_lerp(sp.y, cope_qe(q, rows.x), cope_qe(q, rows.y));
            }
            if (probs) {
                v = exp(v - m) / l;
            }
        }
        pj[lid] = v;
        add_block(lid, base, i, false);
        if (base == first) {
            break;
        }
        base = base - MAP_WG;
    }
}

// Dims (key channels, or value channels of a value-axis gate) whose decay exponents one pass of the
// block loop tabulates: sufk[dd * MAP_WG + t] = Σ_{s=base+t+1..i} lg_s[d0 + dd].
const DIM_CHUNK: u32 = 32u;
var<workgroup> sufk: array<f32, 2048>;

// A key-axis (lg, dk channels) or value-axis (lgv, nv channels) log-gate.
fn log_gate(value_axis: bool, hh: u32, s: u32, c: u32) -> f32 {
    if (value_axis) {
        return lgv[(s * mp.h + hh) * mp.dh * mp.value_gate + c];
    }
    return lg[(s * mp.h + hh) * mp.dk + c];
}

// Lane dd of a chunk walks keys base + last down to base for channel c, writing each key's decay
// exponent into row dd of sufk and returning the running sum for the next block: one sequential sum
// from i backwards, the CPU reference's order of additions.
fn walk_keys(value_axis: bool, hh: u32, c: u32, dd: u32, base: u32, last: u32, e0: f32) -> f32 {
    var e = e0;
    for (var u = 0u; u <= last; u = u + 1u) {
        let t = last - u;
        sufk[dd * MAP_WG + t] = e;
        e = e + log_gate(value_axis, hh, base + t, c);
    }
    return e;
}

// The decay exponents of channels c0 .. c0 + nc of one axis over the block's keys, into sufk (in
// uniform control flow: it holds the barriers around the table). Lane dd < nc walks channel c0 + dd
// and returns its running sum, carried in from e0; other lanes return e0.
fn tabulate(value_axis: bool, hh: u32, c0: u32, nc: u32, lid: u32, base: u32, last: u32, e0: f32) -> f32 {
    workgroupBarrier();
    var e = e0;
    if (lid < nc) {
        e = walk_keys(value_axis, hh, c0 + lid, lid, base, last, e0);
    }
    workgroupBarrier();
    return e;
}

// One workgroup per (map row, head); lane t holds key base + t of the block being walked. Keys are
// walked backwards 64 at a time. For each chunk of DIM_CHUNK channels, lanes 0..DIM_CHUNK−1 first
// tabulate the block's decay exponents (walk_keys, carrying the sum over the later blocks in `run`),
// then every lane adds its key's terms. Each invocation thus runs O(n/64 · (⌈dk/32⌉ + ⌈nv/32⌉) · 96)
// loop iterations, not O(n · dk): Mesa's llvmpipe (lavapipe) ends every loop of an invocation once
// 65,535 iterations have run in total (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS), which the earlier
// per-lane in-block suffix loops reached near query 3,500.
@compute @workgroup_size(64)
fn linear_map(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) l3: vec3<u32>) {
    let lid = l3.x;
    let b = wg.x;
    let hh = wg.y;
    if (b >= mp.out_n || hh >= mp.h) {
        return;
    }
    let i = query_row(b);
    let dk = mp.dk;
    let h = mp.h;
    var fqi: array<f32, MAX_DK>;
    for (var d = 0u; d < dk; d = d + 1u) {
        fqi[d] = fq[(i * h + hh) * dk + d];
    }
    // Lane dd's running exponents of channels dd + 32·k (key axis) and of the value channels.
    var run: array<f32, MAX_DK / DIM_CHUNK>;
    var runv: array<f32, MAX_DH / DIM_CHUNK>;
    let nv = mp.dh * mp.value_gate;
    var total = 0.0;
    var base = i - i % MAP_WG;
    loop {
        let last = min(MAP_WG - 1u, i - base);
        let j = base + lid;
        var v = 0.0;
        for (var d0 = 0u; d0 < dk; d0 = d0 + DIM_CHUNK) {
            let nd = min(DIM_CHUNK, dk - d0);
            run[d0 / DIM_CHUNK] = tabulate(false, hh, d0, nd, lid, base, last, run[d0 / DIM_CHUNK]);
            if (lid <= last) {
                for (var dd = 0u; dd < nd; dd = dd + 1u) {
                    let d = d0 + dd;
                    v = v + fqi[d] * fk[(j * h + hh) * dk + d] * exp(sufk[dd * MAP_WG + lid]);
                }
            }
        }
        if (nv > 0u) {
            var m = 0.0;
            for (var c0 = 0u; c0 < nv; c0 = c0 + DIM_CHUNK) {
                let nc = min(DIM_CHUNK, nv - c0);
                runv[c0 / DIM_CHUNK] = tabulate(true, hh, c0, nc, lid, base, last, runv[c0 / DIM_CHUNK]);
                if (lid <= last) {
                    for (var cc = 0u; cc < nc; cc = cc + 1u) {
                        m = m + exp(sufk[cc * MAP_WG + lid]);
                    }
                }
            }
            v = v * m / f32(nv);
        }
        pj[lid] = v;
        total = total + add_block(lid, base, i, mp.den == 0u);
        if (base == 0u) {
            break;
        }
        base = base - MAP_WG;
    }
    // Lane 0 holds the row's Σ|A| (or Σ A): share it.
    if (lid == 0u) {
        red[0] = total;
    }
    workgroupBarrier();
    var norm = red[0];
    if (mp.den != 0u) {
        norm = max(norm, mp.den_eps);
    }
    for (var c = lid; c < mp.out_n; c = c + MAP_WG) {
        var v = rowbuf[c];
        if (norm > 0.0) {
            v = v / norm;
        }
        outp[(hh * mp.out_n + b) * mp.out_n + c] = v;
    }
}
