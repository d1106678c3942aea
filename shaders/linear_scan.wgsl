// Gated linear-attention scan, one invocation per (head, value column j): the state column
// S[:, j] (and the denominator state z) live in registers while the invocation walks the rows of
// the step in order: S ← diag(exp(lg_t)) S + φk_t v_t[j], o_t[j] = Σ_i φq_t[i] S[i]. The same kernel
// is the fused state update of decode (rows = 1) and the sequential-over-time prefill; the state is
// read from and written back to the layer's state in `s`: S [H, dk, dh] at `s_off` and z [H, dh, dk]
// at `z_off` (every column invocation keeps its own copy of the denominator state, so no invocation
// reads what another writes). den_eps > 0 divides by max(φq·z, den_eps) (linear-elu, LRPE
// denominator). value_gate != 0 (Fast Decay, ReGLA §2.1 Eq. 9): column j also decays by
// exp(lgv_t[j]), the value-axis log-gates [rows, H, dh] at lg[lgv_off..] (no denominator then).
//
// Chunked prefill (steps of at least 2·SCAN_C rows; entries chunk_local, chunk_carry, chunk_out)
// splits the rows into chunks of SCAN_C and never exponentiates a positive log-decay sum:
// 1. chunk_local, one invocation per (chunk, head, column): scans its chunk from a zero state, writes
//    the local output o_loc_t[j] to outp, the local denominator (column 0 only) and the cumulative
//    log decay from the chunk start cum_t[i] = Σ lg (≤ 0, column 0 only) to `ch`, and the chunk's
//    end state (S_delta, z_delta) to `ch`;
// 2. chunk_carry, one invocation per (head, column), sequential over the chunks: replaces each
//    chunk's S_delta by the state before the chunk, S_prev_c, with S_c = exp(cum_end_c) ⊙ S_{c−1} +
//    S_delta_c starting from the layer's state, and writes the final state back (decode continues);
// 3. chunk_out, one invocation per (row, head, column): o_t[j] = o_loc_t[j] +
//    Σ_i φq_t[i] exp(cum_t[i]) S_prev[i][j] (same for the denominator), then the division.
// `ch` layout (offsets in the params): cum [rows, H, dk] at 0, den_loc [rows, H] at off_den,
// S_delta / S_prev [chunks, H, dk, dh] at off_s, z_delta / z_prev [chunks, H, dh, dk] at off_z,
// value gates: the chunk-local cumulative lgv [rows, H, dh] at off_cv (each column writes its own).
// MAX_DK and SCAN_C come from the prelude (shared with the host), Step from step.wgsl.

// `ScanParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: ScanParams;
@group(0) @binding(2) var<storage, read> fq: array<f32>;
@group(0) @binding(3) var<storage, read> fk: array<f32>;
@group(0) @binding(4) var<storage, read> lg: array<f32>;
@group(0) @binding(5) var<storage, read> qkv: array<f32>;
@group(0) @binding(6) var<storage, read_write> s: array<f32>;
@group(0) @binding(8) var<storage, read_write> outp: array<f32>;
@group(0) @binding(9) var<storage, read_write> ch: array<f32>;


// exp(lgv_r[j]) of row r, head hh, column j (1 without value gates).
fn value_decay(r: u32, hh: u32, j: u32) -> f32 {
    if (p.value_gate == 0u) {
        return 1.0;
    }
    return exp(lg[p.lgv_off + (r * p.h + hh) * p.dh + j]);
}

// exp of the chunk-local cumulative lgv of row r, head hh, column j (1 without value gates).
fn value_cum_decay(r: u32, hh: u32, j: u32) -> f32 {
    if (p.value_gate == 0u) {
        return 1.0;
    }
    return exp(ch[p.off_cv + (r * p.h + hh) * p.dh + j]);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    let hh = idx / p.dh;
    let j = idx % p.dh;
    if (hh >= p.h) {
        return;
    }
    let dk = p.dk;
    var sc: array<f32, MAX_DK>;
    var zc: array<f32, MAX_DK>;
    for (var i = 0u; i < dk; i = i + 1u) {
        sc[i] = s[p.s_off + (hh * dk + i) * p.dh + j];
        zc[i] = s[p.z_off + (hh * p.dh + j) * dk + i];
    }
    for (var r = 0u; r < st.rows; r = r + 1u) {
        let b = (r * p.h + hh) * dk;
        let v = qkv[r * 3u * p.a + 2u * p.a + hh * p.dh + j];
        let ev = value_decay(r, hh, j);
        var o = 0.0;
        var den = 0.0;
        for (var i = 0u; i < dk; i = i + 1u) {
            let decay = exp(lg[b + i]);
            let k = fk[b + i];
            sc[i] = decay * ev * sc[i] + k * v;
            zc[i] = decay * zc[i] + k;
            let q = fq[b + i];
            o = o + q * sc[i];
            den = den + q * zc[i];
        }
        if (p.den_eps > 0.0) {
            o = o / max(den, p.den_eps);
        }
        outp[r * p.a + hh * p.dh + j] = o;
    }
    for (var i = 0u; i < dk; i = i + 1u) {
        s[p.s_off + (hh * dk + i) * p.dh + j] = sc[i];
    }
    for (var i = 0u; i < dk; i = i + 1u) {
        s[p.z_off + (hh * p.dh + j) * dk + i] = zc[i];
    }
}

@compute @workgroup_size(64)
fn chunk_local(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    let c = idx / (p.h * p.dh);
    let hh = (idx / p.dh) % p.h;
    let j = idx % p.dh;
    let r0 = c * SCAN_C;
    if (r0 >= st.rows) {
        return;
    }
    let r1 = min(r0 + SCAN_C, st.rows);
    let dk = p.dk;
    var sc: array<f32, MAX_DK>;
    var zc: array<f32, MAX_DK>;
    for (var i = 0u; i < dk; i = i + 1u) {
        sc[i] = 0.0;
        zc[i] = 0.0;
    }
    var cv = 0.0;
    for (var r = r0; r < r1; r = r + 1u) {
        let b = (r * p.h + hh) * dk;
        let v = qkv[r * 3u * p.a + 2u * p.a + hh * p.dh + j];
        var ev = 1.0;
        if (p.value_gate != 0u) {
            let lv = lg[p.lgv_off + (r * p.h + hh) * p.dh + j];
            ev = exp(lv);
            cv = cv + lv;
            ch[p.off_cv + (r * p.h + hh) * p.dh + j] = cv;
        }
        var o = 0.0;
        var den = 0.0;
        for (var i = 0u; i < dk; i = i + 1u) {
            let l = lg[b + i];
            let decay = exp(l);
            let k = fk[b + i];
            sc[i] = decay * ev * sc[i] + k * v;
            zc[i] = decay * zc[i] + k;
            let q = fq[b + i];
            o = o + q * sc[i];
            den = den + q * zc[i];
            if (j == 0u) {
                // Column 0 alone writes (and re-reads its own) cumulative log decay.
                var cum = l;
                if (r > r0) {
                    cum = cum + ch[b - p.h * dk + i];
                }
                ch[b + i] = cum;
            }
        }
        outp[r * p.a + hh * p.dh + j] = o;
        if (j == 0u) {
            ch[p.off_den + r * p.h + hh] = den;
        }
    }
    for (var i = 0u; i < dk; i = i + 1u) {
        ch[p.off_s + ((c * p.h + hh) * dk + i) * p.dh + j] = sc[i];
        ch[p.off_z + ((c * p.h + hh) * p.dh + j) * dk + i] = zc[i];
    }
}

@compute @workgroup_size(64)
fn chunk_carry(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    let hh = idx / p.dh;
    let j = idx % p.dh;
    if (hh >= p.h) {
        return;
    }
    let dk = p.dk;
    var sc: array<f32, MAX_DK>;
    var zc: array<f32, MAX_DK>;
    for (var i = 0u; i < dk; i = i + 1u) {
        sc[i] = s[p.s_off + (hh * dk + i) * p.dh + j];
        zc[i] = s[p.z_off + (hh * p.dh + j) * dk + i];
    }
    let n_chunks = (st.rows + SCAN_C - 1u) / SCAN_C;
    for (var c = 0u; c < n_chunks; c = c + 1u) {
        let last = min((c + 1u) * SCAN_C, st.rows) - 1u;
        let b = (last * p.h + hh) * dk;
        let ev = value_cum_decay(last, hh, j);
        for (var i = 0u; i < dk; i = i + 1u) {
            let decay = exp(ch[b + i]);
            let si = p.off_s + ((c * p.h + hh) * dk + i) * p.dh + j;
            let zi = p.off_z + ((c * p.h + hh) * p.dh + j) * dk + i;
            let sd = ch[si];
            let zd = ch[zi];
            ch[si] = sc[i];
            ch[zi] = zc[i];
            sc[i] = decay * ev * sc[i] + sd;
            zc[i] = decay * zc[i] + zd;
        }
    }
    for (var i = 0u; i < dk; i = i + 1u) {
        s[p.s_off + (hh * dk + i) * p.dh + j] = sc[i];
    }
    for (var i = 0u; i < dk; i = i + 1u) {
        s[p.z_off + (hh * p.dh + j) * dk + i] = zc[i];
    }
}

@compute @workgroup_size(64)
fn chunk_out(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    let r = idx / (p.h * p.dh);
    let hh = (idx / p.dh) % p.h;
    let j = idx % p.dh;
    if (r >= st.rows) {
        return;
    }
    let dk = p.dk;
    let c = r / SCAN_C;
    let b = (r * p.h + hh) * dk;
    var o = 0.0;
    var den = 0.0;
    for (var i = 0u; i < dk; i = i + 1u) {
        let w = fq[b + i] * exp(ch[b + i]);
        o = o + w * ch[p.off_s + ((c * p.h + hh) * dk + i) * p.dh + j];
        den = den + w * ch[p.off_z + ((c * p.h + hh) * p.dh + j) * dk + i];
    }
    let oi = r * p.a + hh * p.dh + j;
    o = o * value_cum_decay(r, hh, j) + outp[oi];
    if (p.den_eps > 0.0) {
        den = den + ch[p.off_den + r * p.h + hh];
        o = o / max(den, p.den_eps);
    }
    outp[oi] = o;
}
