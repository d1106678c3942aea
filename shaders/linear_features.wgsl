// Linear-family feature maps, one invocation per (row, head): φq, φk and the log-gate lg ≤ 0 of
// S_t = diag(exp(lg_t)) S_{t−1} + φk_t v_tᵀ. The variant is the pipeline-overridable constant
// FEAT_KIND (a params::FeatKind; the prelude and step.wgsl are prepended):
// FEAT_ELU elementwise φ (elu, or 1 + elu when plus_one != 0; linear-elu, TransNormer Norm), no decay;
// FEAT_LRPE: φ = 1 + elu, then P (LRPE_P_IDENTITY, LRPE_P_HOUSEHOLDER with v at aux[off_vec..],
//   LRPE_P_ODD_EVEN) and the core (LRPE_CORE_ROTATION, also mixed: n_angles pairs, cos/sin table
//   aux[off_tab + (pos·n + k)·2]; LRPE_CORE_PERMUTATION: index table aux[off_tab + pos·dh + j];
//   LRPE_CORE_COMPLEX: [y cos, y sin], table [pos, dh, 2]);
// FEAT_GLA: φq = q·scale, φk = k, lg = lnσ(gpre + bias)/normalizer (bias at aux[off_vec..]);
// FEAT_REGLA: φq = exp(q − max q)·scale, φk = exp(k − M_t) with the running key max M_t and its
//   rescale folded into lg (mrow from `regla_max`), lg = ln F(a_g, a_r) refined gate, biases at
//   aux[off_vec..];
// FEAT_RETNET: RoPE (table aux[off_tab..], [pos, dh/2, 2]) on q and k, φq scaled, lg = ln γ_h
//   (aux[off_vec + h]);
// FEAT_HGRN2 (Qin et al., "HGRN2: Gated Linear RNNs with State Expansion", §3): φq = swish(q)·scale,
//   the key projection is the forget pre-activation f, lg = ln(β + (1 − β)σ(f)) with the per-channel
//   lower bound β at aux[off_vec + h·dh + j], φk = 1 − forget gate = (1 − β)σ(−f).
// Tables are built on the CPU in f64. Outputs are [rows, H, dk].

override FEAT_KIND: u32 = FEAT_ELU;

// `FeatParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: FeatParams;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> gpre: array<f32>;
@group(0) @binding(4) var<storage, read> aux: array<f32>;
@group(0) @binding(5) var<storage, read_write> mrow: array<f32>;
@group(0) @binding(6) var<storage, read_write> fq: array<f32>;
@group(0) @binding(7) var<storage, read_write> fk: array<f32>;
@group(0) @binding(8) var<storage, read_write> lg: array<f32>;
@group(0) @binding(9) var<storage, read_write> kstate: array<f32>;

const LN2: f32 = 0.6931472;

fn elu(x: f32) -> f32 {
    if (x > 0.0) {
        return x;
    }
    return exp(x) - 1.0;
}

fn elu1(x: f32) -> f32 {
    if (x > 0.0) {
        return x + 1.0;
    }
    return exp(x);
}

fn log_sigmoid(x: f32) -> f32 {
    return -(max(-x, 0.0) + log(1.0 + exp(-abs(x))));
}

fn log_add_exp(a: f32, b: f32) -> f32 {
    let m = max(a, b);
    return m + log(1.0 + exp(-abs(a - b)));
}

// HGRN2 §3's lower-bounded forget gate in log space, ln(β + (1 − β)σ(f)) ≤ 0 (the core's
// activations::key_forget_log_gate).
fn key_forget_log_gate(f: f32, beta: f32) -> f32 {
    if (beta <= 0.0) {
        return log_sigmoid(f);
    }
    return min(log_add_exp(log(beta), log(1.0 - beta) + log_sigmoid(f)), 0.0);
}

fn odd_even(j: u32, d: u32) -> u32 {
    let h = (d + 1u) / 2u;
    if (j % 2u == 1u) {
        return h + j / 2u;
    }
    return j / 2u;
}

// LRPE T_s = Λ(s) P on x (width dh); returns dk values.
fn lrpe(pos: u32, xin: array<f32, MAX_DH>) -> array<f32, MAX_DK> {
    let d = p.dh;
    var x = xin;
    var y: array<f32, MAX_DH>;
    if (p.lrpe_p == LRPE_P_HOUSEHOLDER) {
        var dot = 0.0;
        for (var j = 0u; j < d; j = j + 1u) {
            dot = dot + x[j] * aux[p.off_vec + j];
        }
        for (var j = 0u; j < d; j = j + 1u) {
            y[j] = x[j] - 2.0 * dot * aux[p.off_vec + j];
        }
    } else if (p.lrpe_p == LRPE_P_ODD_EVEN) {
        for (var j = 0u; j < d; j = j + 1u) {
            y[j] = x[odd_even(j, d)];
        }
    } else {
        for (var j = 0u; j < d; j = j + 1u) {
            y[j] = x[j];
        }
    }
    var o: array<f32, MAX_DK>;
    if (p.lrpe_core == LRPE_CORE_ROTATION) {
        let n = p.n_angles;
        for (var k = 0u; k < n; k = k + 1u) {
            let c = aux[p.off_tab + (pos * n + k) * 2u];
            let s = aux[p.off_tab + (pos * n + k) * 2u + 1u];
            o[2u * k] = y[2u * k] * c - y[2u * k + 1u] * s;
            o[2u * k + 1u] = y[2u * k + 1u] * c + y[2u * k] * s;
        }
        for (var j = 2u * n; j < d; j = j + 1u) {
            o[j] = y[j];
        }
    } else if (p.lrpe_core == LRPE_CORE_PERMUTATION) {
        for (var j = 0u; j < d; j = j + 1u) {
            o[j] = y[u32(aux[p.off_tab + pos * d + j])];
        }
    } else {
        for (var j = 0u; j < d; j = j + 1u) {
            let c = aux[p.off_tab + (pos * d + j) * 2u];
            let s = aux[p.off_tab + (pos * d + j) * 2u + 1u];
            o[j] = y[j] * c;
            o[d + j] = y[j] * s;
        }
    }
    return o;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    let r = idx / p.h;
    let hh = idx % p.h;
    if (r >= st.rows) {
        return;
    }
    let pos = st.pos0 + r;
    let d = p.dh;
    let qb = r * 3u * p.a + hh * d;
    let kb = qb + p.a;
    let ob = (r * p.h + hh) * p.dk;
    if (FEAT_KIND == FEAT_ELU) {
        for (var j = 0u; j < d; j = j + 1u) {
            if (p.plus_one != 0u) {
                fq[ob + j] = elu1(qkv[qb + j]);
                fk[ob + j] = elu1(qkv[kb + j]);
            } else {
                fq[ob + j] = elu(qkv[qb + j]);
                fk[ob + j] = elu(qkv[kb + j]);
            }
            lg[ob + j] = 0.0;
        }
    } else if (FEAT_KIND == FEAT_LRPE) {
        var xq: array<f32, MAX_DH>;
        var xk: array<f32, MAX_DH>;
        for (var j = 0u; j < d; j = j + 1u) {
            xq[j] = elu1(qkv[qb + j]);
            xk[j] = elu1(qkv[kb + j]);
        }
        var oq = lrpe(pos, xq);
        var ok = lrpe(pos, xk);
        for (var j = 0u; j < p.dk; j = j + 1u) {
            fq[ob + j] = oq[j];
            fk[ob + j] = ok[j];
            lg[ob + j] = 0.0;
        }
    } else if (FEAT_KIND == FEAT_GLA) {
        let gb = r * p.gpre_stride + hh * d;
        for (var j = 0u; j < d; j = j + 1u) {
            fq[ob + j] = qkv[qb + j] * p.scale;
            fk[ob + j] = qkv[kb + j];
            let z = gpre[gb + j] + aux[p.off_vec + hh * d + j];
            lg[ob + j] = log_sigmoid(z) / p.normalizer;
        }
    } else if (FEAT_KIND == FEAT_REGLA) {
        var qmax = -3.0e38;
        for (var j = 0u; j < d; j = j + 1u) {
            qmax = max(qmax, qkv[qb + j]);
        }
        let m_t = mrow[(r * p.h + hh) * 2u];
        let shift = mrow[(r * p.h + hh) * 2u + 1u];
        let gb = r * p.gpre_stride + hh * d;
        for (var j = 0u; j < d; j = j + 1u) {
            fq[ob + j] = exp(qkv[qb + j] - qmax) * p.scale;
            fk[ob + j] = exp(qkv[kb + j] - m_t);
            let ag = gpre[gb + j] + aux[p.off_vec + hh * d + j];
            let ar = gpre[gb + p.a + j] + aux[p.off_vec + p.a + hh * d + j];
            let log_g = log_sigmoid(ag);
            let term = log_add_exp(log_g, LN2 + log_sigmoid(ar) + log_sigmoid(-ag));
            lg[ob + j] = min(log_g + term, 0.0) + shift;
        }
    } else if (FEAT_KIND == FEAT_HGRN2) {
        for (var j = 0u; j < d; j = j + 1u) {
            let x = qkv[qb + j];
            fq[ob + j] = x / (1.0 + exp(-x)) * p.scale;
            let f = qkv[kb + j];
            let beta = aux[p.off_vec + hh * d + j];
            fk[ob + j] = (1.0 - beta) / (1.0 + exp(f));
            lg[ob + j] = key_forget_log_gate(f, beta);
        }
    } else {
        // FEAT_RETNET.
        let half = d / 2u;
        for (var j = 0u; j < d; j = j + 1u) {
            fq[ob + j] = qkv[qb + j];
            fk[ob + j] = qkv[kb + j];
            lg[ob + j] = aux[p.off_vec + hh];
        }
        for (var k = 0u; k < half; k = k + 1u) {
            let c = aux[p.off_tab + (pos * half + k) * 2u];
            let s = aux[p.off_tab + (pos * half + k) * 2u + 1u];
            let q0 = qkv[qb + 2u * k];
            let q1 = qkv[qb + 2u * k + 1u];
            fq[ob + 2u * k] = q0 * c - q1 * s;
            fq[ob + 2u * k + 1u] = q1 * c + q0 * s;
            let k0 = qkv[kb + 2u * k];
            let k1 = qkv[kb + 2u * k + 1u];
            fk[ob + 2u * k] = k0 * c - k1 * s;
            fk[ob + 2u * k + 1u] = k1 * c + k0 * s;
        }
        for (var j = 0u; j < d; j = j + 1u) {
            fq[ob + j] = fq[ob + j] * p.scale;
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
