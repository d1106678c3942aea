// Linear-family feature maps (features.wgsl, prepended with the prelude and step.wgsl), one
// invocation per (row, head); outputs are [rows, H, dk], and Fast Decay's value-axis log-gates
// [rows, H, dh] at lg[p.lgv_off..].

@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> gpre: array<f32>;
@group(0) @binding(4) var<storage, read> aux: array<f32>;
@group(0) @binding(5) var<storage, read_write> mrow: array<f32>;
@group(0) @binding(6) var<storage, read_write> fq: array<f32>;
@group(0) @binding(7) var<storage, read_write> fk: array<f32>;
@group(0) @binding(8) var<storage, read_write> lg: array<f32>;
@group(0) @binding(9) var<storage, read_write> kstate: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    let r = idx / p.h;
    let hh = idx % p.h;
    if (r >= st.rows) {
        return;
    }
    let d = p.dh;
    let qb = r * 3u * p.a + hh * d;
    let gb = r * p.gpre_stride + hh * d;
    var x: FeatIn;
    for (var j = 0u; j < d; j = j + 1u) {
        x.q[j] = qkv[qb + j];
        x.k[j] = qkv[qb + p.a + j];
    }
    if (FEAT_KIND == FEAT_GLA || FEAT_KIND == FEAT_REGLA || FEAT_KIND == FEAT_FAST_DECAY) {
        for (var j = 0u; j < d; j = j + 1u) {
            x.ga[j] = gpre[gb + j];
        }
    }
    if (FEAT_KIND == FEAT_REGLA || FEAT_KIND == FEAT_FAST_DECAY) {
        for (var j = 0u; j < d; j = j + 1u) {
            x.gr[j] = gpre[gb + p.a + j];
        }
    }
    if (FEAT_KIND == FEAT_REGLA) {
        x.m_t = mrow[(r * p.h + hh) * 2u];
        x.shift = mrow[(r * p.h + hh) * 2u + 1u];
    }
    var o: FeatOut;
    features(st.pos0 + r, hh, &x, &o);
    let ob = (r * p.h + hh) * p.dk;
    for (var j = 0u; j < p.dk; j = j + 1u) {
        fq[ob + j] = o.q[j];
        fk[ob + j] = o.k[j];
        lg[ob + j] = o.g[j];
    }
    if (FEAT_KIND == FEAT_FAST_DECAY) {
        let vb = p.lgv_off + (r * p.h + hh) * d;
        for (var j = 0u; j < d; j = j + 1u) {
            lg[vb + j] = o.gv[j];
        }
    }
}

// ReGLA running key max, one invocation per head, sequential over the rows of the step:
// M_t = max(M_{t−1}, max_j k_t[j]), mrow[t, h] = (M_t, M_{t−1} − M_t) (rescale 0 at the first token).
// kstate[k_off + 2h] = M, kstate[k_off + 2h + 1] = 1 once a token has been seen.
@compute @workgroup_size(64)
fn regla_max(@builtin(global_invocation_id) gid: vec3<u32>) {
    let hh = gid.x;
    if (hh >= p.h) {
        return;
    }
    var prev = kstate[p.k_off + 2u * hh];
    var valid = kstate[p.k_off + 2u * hh + 1u] != 0.0;
    for (var r = 0u; r < st.rows; r = r + 1u) {
        let kb = r * 3u * p.a + p.a + hh * p.dh;
        var kmax = -3.4e38;
        for (var j = 0u; j < p.dh; j = j + 1u) {
            kmax = max(kmax, qkv[kb + j]);
        }
        var m_new = kmax;
        var shift = 0.0;
        if (valid) {
            m_new = max(prev, kmax);
            shift = prev - m_new;
        }
        mrow[(r * p.h + hh) * 2u] = m_new;
        mrow[(r * p.h + hh) * 2u + 1u] = shift;
        prev = m_new;
        valid = true;
    }
    kstate[p.k_off + 2u * hh] = prev;
    kstate[p.k_off + 2u * hh + 1u] = 1.0;
}
