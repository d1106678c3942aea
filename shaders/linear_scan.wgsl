// Gated linear-attention scan, one invocation per (head, value column j): the state column
// S[:, j] (and the denominator state z) live in registers while the invocation walks the rows of
// the step in order: S ← diag(exp(lg_t)) S + φk_t v_t[j], o_t[j] = Σ_i φq_t[i] S[i]. The same kernel
// is the fused state update of decode (rows = 1) and the sequential-over-time prefill; the state is
// read from and written back to `s` [H, dk, dh] and `z` [H, dh, dk] (every column invocation keeps
// its own copy of the denominator state, so no invocation reads what another writes). den_eps > 0 divides by
// max(φq·z, den_eps) (linear-elu, LRPE denominator).

struct Params {
    h: u32,
    dh: u32,
    dk: u32,
    a: u32,
    den_eps: f32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

struct Step {
    rows: u32,
    pos0: u32,
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> st: Step;
@group(0) @binding(2) var<storage, read> fq: array<f32>;
@group(0) @binding(3) var<storage, read> fk: array<f32>;
@group(0) @binding(4) var<storage, read> lg: array<f32>;
@group(0) @binding(5) var<storage, read> qkv: array<f32>;
@group(0) @binding(6) var<storage, read_write> s: array<f32>;
@group(0) @binding(7) var<storage, read_write> z: array<f32>;
@group(0) @binding(8) var<storage, read_write> outp: array<f32>;

const MAX_DK: u32 = 256u;

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
        sc[i] = s[(hh * dk + i) * p.dh + j];
        zc[i] = z[(hh * p.dh + j) * dk + i];
    }
    for (var r = 0u; r < st.rows; r = r + 1u) {
        let b = (r * p.h + hh) * dk;
        let v = qkv[r * 3u * p.a + 2u * p.a + hh * p.dh + j];
        var o = 0.0;
        var den = 0.0;
        for (var i = 0u; i < dk; i = i + 1u) {
            let decay = exp(lg[b + i]);
            let k = fk[b + i];
            sc[i] = decay * sc[i] + k * v;
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
        s[(hh * dk + i) * p.dh + j] = sc[i];
    }
    for (var i = 0u; i < dk; i = i + 1u) {
        z[(hh * p.dh + j) * dk + i] = zc[i];
    }
}
