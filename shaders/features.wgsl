// Snippet (prepended by crates/gpu/src/shaders.rs to linear_features.wgsl and decode_linear.wgsl):
// the linear-family feature maps of one (row, head), `features`: φq, φk and the log-gate lg ≤ 0 of
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
// FEAT_FAST_DECAY (ReGLA §2.1, Eqs. 9–10; Mao 2022): φq = q·scale, φk = k, key-axis lg = lnσ(ga + b_f)
//   and value-axis gv = lnσ(gr + b_z) (b_f at aux[off_vec..], b_z at aux[off_vec + a..]): the scan
//   decays S[i][j] by exp(lg_i + gv_j).
// Tables are built on the CPU in f64. The including shader binds the tables `aux`.

override FEAT_KIND: u32 = FEAT_ELU;

// `FeatParams` is generated from its Rust twin (crates/gpu/src/params.rs).

@group(0) @binding(0) var<uniform> p: FeatParams;

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


// The inputs of one (row, head): its q and k (width dh), the gate pre-activations (GLA: ga; ReGLA:
// ga, gr) and ReGLA's running key max m_t with the state rescale `shift`.
struct FeatIn {
    q: array<f32, MAX_DH>,
    k: array<f32, MAX_DH>,
    ga: array<f32, MAX_DH>,
    gr: array<f32, MAX_DH>,
    m_t: f32,
    shift: f32,
}

// φq, φk and lg (width dk), and the value-axis log-gate gv (width dh; FEAT_FAST_DECAY only).
// `features` takes both by pointer: copies of these arrays are costly (Mesa's llvmpipe compiles a
// by-value version for minutes).
struct FeatOut {
    q: array<f32, MAX_DK>,
    k: array<f32, MAX_DK>,
    g: array<f32, MAX_DK>,
    gv: array<f32, MAX_DH>,
}

fn features(pos: u32, hh: u32, x: ptr<function, FeatIn>, o: ptr<function, FeatOut>) {
    let d = p.dh;
    if (FEAT_KIND == FEAT_ELU) {
        for (var j = 0u; j < d; j = j + 1u) {
            if (p.plus_one != 0u) {
                (*o).q[j] = elu1((*x).q[j]);
                (*o).k[j] = elu1((*x).k[j]);
            } else {
                (*o).q[j] = elu((*x).q[j]);
                (*o).k[j] = elu((*x).k[j]);
            }
            (*o).g[j] = 0.0;
        }
    } else if (FEAT_KIND == FEAT_LRPE) {
        var xq: array<f32, MAX_DH>;
        var xk: array<f32, MAX_DH>;
        for (var j = 0u; j < d; j = j + 1u) {
            xq[j] = elu1((*x).q[j]);
            xk[j] = elu1((*x).k[j]);
        }
        (*o).q = lrpe(pos, xq);
        (*o).k = lrpe(pos, xk);
        for (var j = 0u; j < p.dk; j = j + 1u) {
            (*o).g[j] = 0.0;
        }
    } else if (FEAT_KIND == FEAT_GLA) {
        for (var j = 0u; j < d; j = j + 1u) {
            (*o).q[j] = (*x).q[j] * p.scale;
            (*o).k[j] = (*x).k[j];
            let z = (*x).ga[j] + aux[p.off_vec + hh * d + j];
            (*o).g[j] = log_sigmoid(z) / p.normalizer;
        }
    } else if (FEAT_KIND == FEAT_REGLA) {
        var qmax = -3.0e38;
        for (var j = 0u; j < d; j = j + 1u) {
            qmax = max(qmax, (*x).q[j]);
        }
        for (var j = 0u; j < d; j = j + 1u) {
            (*o).q[j] = exp((*x).q[j] - qmax) * p.scale;
            (*o).k[j] = exp((*x).k[j] - (*x).m_t);
            let ag = (*x).ga[j] + aux[p.off_vec + hh * d + j];
            let ar = (*x).gr[j] + aux[p.off_vec + p.a + hh * d + j];
            let log_g = log_sigmoid(ag);
            let term = log_add_exp(log_g, LN2 + log_sigmoid(ar) + log_sigmoid(-ag));
            (*o).g[j] = min(log_g + term, 0.0) + (*x).shift;
        }
    } else if (FEAT_KIND == FEAT_FAST_DECAY) {
        for (var j = 0u; j < d; j = j + 1u) {
            (*o).q[j] = (*x).q[j] * p.scale;
            (*o).k[j] = (*x).k[j];
            (*o).g[j] = log_sigmoid((*x).ga[j] + aux[p.off_vec + hh * d + j]);
            (*o).gv[j] = log_sigmoid((*x).gr[j] + aux[p.off_vec + p.a + hh * d + j]);
        }
    } else if (FEAT_KIND == FEAT_HGRN2) {
        for (var j = 0u; j < d; j = j + 1u) {
            (*o).q[j] = (*x).q[j] / (1.0 + exp(-(*x).q[j])) * p.scale;
            let beta = aux[p.off_vec + hh * d + j];
            (*o).k[j] = (1.0 - beta) / (1.0 + exp((*x).k[j]));
            (*o).g[j] = key_forget_log_gate((*x).k[j], beta);
        }
    } else {
        // FEAT_RETNET.
        let half = d / 2u;
        for (var j = 0u; j < d; j = j + 1u) {
            (*o).q[j] = (*x).q[j];
            (*o).k[j] = (*x).k[j];
            (*o).g[j] = aux[p.off_vec + hh];
        }
        for (var k = 0u; k < half; k = k + 1u) {
            let c = aux[p.off_tab + (pos * half + k) * 2u];
            let s = aux[p.off_tab + (pos * half + k) * 2u + 1u];
            (*o).q[2u * k] = (*x).q[2u * k] * c - (*x).q[2u * k + 1u] * s;
            (*o).q[2u * k + 1u] = (*x).q[2u * k + 1u] * c + (*x).q[2u * k] * s;
            (*o).k[2u * k] = (*x).k[2u * k] * c - (*x).k[2u * k + 1u] * s;
            (*o).k[2u * k + 1u] = (*x).k[2u * k + 1u] * c + (*x).k[2u * k] * s;
        }
        for (var j = 0u; j < d; j = j + 1u) {
            (*o).q[j] = (*o).q[j] * p.scale;
        }
    }
}
