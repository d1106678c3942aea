// Snippet (prepended by crates/gpu/src/shaders.rs to attention.wgsl and decode.wgsl, after
// attention_common.wgsl): one query row of one head over the KV cache with a streaming (online)
// softmax, split over the 64 lanes of a workgroup. The including shader binds the caches `kc` and
// `vc` ([positions, a]) and, for CoPE rows, gives a workgroup table of COPE_TAB floats through
// cope_tab_get / cope_tab_set.

// Online-softmax step: fold logit `s` with the value row at vc[kb..] into the running max `m`, sum
// `l` and weighted values `acc`.
fn softmax_update(s: f32, kb: u32, m: ptr<function, f32>, l: ptr<function, f32>, acc: ptr<function, array<f32, MAX_DH>>) {
    let m_new = max(*m, s);
    let corr = exp(*m - m_new);
    let w = exp(s - m_new);
    *l = *l * corr + w;
    for (var c = 0u; c < p.dh; c = c + 1u) {
        (*acc)[c] = (*acc)[c] * corr + w * vc[kb + c];
    }
    *m = m_new;
}

// Lane `lid` walks query i's keys j ≡ j0 + lid (mod 64) in j0..j1 of head hh, logits
// scale·q·k_j + B_h(i, j) (T1: ReLU weights, no softmax); returns its running (max, sum) and leaves
// its weighted values in `acc`.
fn attend_lanes(lid: u32, hh: u32, i: u32, j0: u32, j1: u32, q: ptr<function, array<f32, MAX_DH>>, acc: ptr<function, array<f32, MAX_DH>>) -> vec2<f32> {
    for (var c = 0u; c < p.dh; c = c + 1u) {
        (*acc)[c] = 0.0;
    }
    var m = -3.0e38;
    var l = 0.0;
    for (var j = j0 + lid; j < j1; j = j + RED_WG) {
        let kb = j * p.a + hh * p.dh;
        var dot = 0.0;
        for (var c = 0u; c < p.dh; c = c + 1u) {
            dot = dot + (*q)[c] * kc[kb + c];
        }
        let s = p.scale * dot + bias(hh, i, j);
        if (p.relu != 0u) {
            let w = max(s, 0.0);
            for (var c = 0u; c < p.dh; c = c + 1u) {
                (*acc)[c] = (*acc)[c] + w * vc[kb + c];
            }
        } else {
            softmax_update(s, kb, &m, &l, acc);
        }
    }
    return vec2<f32>(m, l);
}

// Merging the 64 lanes' states (m, l): (f, inv, M, L) such that the row's output channel c is
// inv · Σ_lanes f · acc[c] (every partial state rescaled to the common max M; L the merged sum).
// Uniform control flow.
fn lane_merge(lid: u32, m: f32, l: f32) -> vec4<f32> {
    var f = 1.0;
    var big_m = m;
    if (p.relu == 0u) {
        big_m = reduce_max(lid, m);
        f = exp(m - big_m);
    }
    let total_l = reduce_sum(lid, l * f);
    var inv = 1.0;
    if (p.relu == 0u && total_l > 0.0) {
        inv = 1.0 / total_l;
    }
    return vec4<f32>(f, inv, big_m, total_l);
}

// q·e[t] from the workgroup table for t < n_tab, else from aux.
fn table_qe(q: ptr<function, array<f32, MAX_DH>>, t: u32, n_tab: u32) -> f32 {
    if (t < n_tab) {
        return cope_tab_get(t);
    }
    return cope_qe(q, t);
}

// One CoPE row (Golovneva et al., "Contextual Position Encoding", §3; see contextual_position in
// attention_common.wgsl) over the 64 lanes: q·e[t] is tabulated once for every position a key can
// reach (t ≤ min(npos − 1, number of keys)), then the keys j0..=i are walked from the query
// backwards 64 at a time: each lane's logit and gate, the workgroup's suffix scan of the gates plus
// the carry from the blocks above, the interpolated bias, and the lane's online-softmax update.
// Returns the lane's (max, sum) and leaves its weighted values in `acc`, to be merged like
// attend_lanes' (lane_merge). Uniform control flow; overwrites the table.
fn contextual_lanes(lid: u32, hh: u32, i: u32, j0: u32, q: ptr<function, array<f32, MAX_DH>>, acc: ptr<function, array<f32, MAX_DH>>) -> vec2<f32> {
    for (var c = 0u; c < p.dh; c = c + 1u) {
        (*acc)[c] = 0.0;
    }
    let n_tab = min(min(p.npos, i - j0 + 2u), COPE_TAB);
    for (var t = lid; t < n_tab; t = t + RED_WG) {
        cope_tab_set(t, cope_qe(q, t));
    }
    workgroupBarrier();
    var carry = 0.0;
    var m = -3.0e38;
    var l = 0.0;
    let first = j0 - j0 % RED_WG;
    var base = i - i % RED_WG;
    loop {
        let sp = contextual_position(lid, base, i, j0, hh, q, &carry);
        let j = base + lid;
        if (j >= j0 && j <= i) {
            let rows = cope_rows(sp.y);
            let s = sp.x + cope_lerp(sp.y, table_qe(q, rows.x, n_tab), table_qe(q, rows.y, n_tab));
            softmax_update(s, j * p.a + hh * p.dh, &m, &l, acc);
        }
        if (base == first) {
            break;
        }
        base = base - RED_WG;
    }
    return vec2<f32>(m, l);
}
