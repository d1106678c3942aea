//! Feature maps, gates, norms and a naive gated-linear-attention oracle — reference math for the
//! linear family (`linear-elu`, `transnormer`, `lrpe`, `gla`, `regla`, `retnet`).
//!
//! Everything here is written for clarity: scalar loops, f64 wherever a value is accumulated or a
//! gate is formed, one rounding to f32 at the end. Each function cites the digest section it
//! implements; the GPU kernels and the trainer are tested against these.

// Reference math indexes several parallel slices with one index; range loops read like the formulas.
#![allow(clippy::needless_range_loop)]

/// ELU with α = 1: `x` for x > 0, `exp(x) − 1` otherwise (TransNormer digest §1.3: the T1 feature
/// map φ = elu, range (−1, ∞)). Uses `exp_m1` for accuracy near 0.
pub fn elu(x: f32) -> f32 {
    if x > 0.0 {
        x
    } else {
        x.exp_m1()
    }
}

/// `1 + elu(x)`: `x + 1` for x > 0, `exp(x)` otherwise (TransNormer digest §1.3 T2 / LRPE digest §1
/// baseline kernel, Katharopoulos et al.). Always > 0; the x ≤ 0 branch is `exp(x)` directly rather
/// than `1 + (exp(x) − 1)` so tiny values keep full relative precision.
pub fn elu_plus_one(x: f32) -> f32 {
    if x > 0.0 {
        x + 1.0
    } else {
        x.exp()
    }
}

/// `softplus(x) = ln(1 + eˣ)`, stable for any x: `max(x, 0) + ln1p(e^(−|x|))`.
pub fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// `ln σ(x) = −softplus(−x)`, stable at both ends (ReGLA digest §1.7 log-space form; reference-
/// implementations §7 GLA gate): ≈ x for x ≪ 0, ≈ −e^(−x) for x ≫ 0, never −∞ for finite x.
pub fn log_sigmoid(x: f64) -> f64 {
    -softplus(-x)
}

/// Logistic sigmoid `1 / (1 + e^(−x))`, evaluated without overflow on either side.
pub fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `ln(eᵃ + eᵇ)`, stable; `log_add_exp(−∞, −∞) = −∞`.
pub fn log_add_exp(a: f64, b: f64) -> f64 {
    let m = a.max(b);
    if m == f64::NEG_INFINITY {
        return m;
    }
    m + (-(a - b).abs()).exp().ln_1p()
}

/// ReGLA variance-reduction factor `c(d) = 1 / (e · sqrt(d (e² − 1)))` (ReGLA digest §1.5,
/// Thm 3.1), used in place of 1/sqrt(d). c(64) = 0.018193.
pub fn regla_scale(d: usize) -> f64 {
    let e = std::f64::consts::E;
    1.0 / (e * (d as f64 * (e * e - 1.0)).sqrt())
}

/// ReGLA refined gate values for one channel (ReGLA digest §1.7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RefinedGate {
    /// `g = σ(a_g)` (Eq. 17).
    pub g: f64,
    /// `r = σ(a_r)` (Eq. 18).
    pub r: f64,
    /// `F = (1 − r) g² + r (1 − (1 − g)²)` (Eq. 16), in [g², g(2 − g)] ⊂ [0, 1].
    pub f: f64,
    /// `ln F` by the stable log-space formula; finite even where F underflows.
    pub log_f: f64,
}

/// ReGLA refined gate from the pre-activations `a_g = W_g x + b_g`, `a_r = W_r x + b_r`
/// (ReGLA digest §1.7, Eqs. 16–18):
///
/// * `F = g² + 2 r g (1 − g) = g · (g + 2 r (1 − g))` — a sum of non-negative terms, so no
///   cancellation; `1 − g` is evaluated as `σ(−a_g)`; rounding is clamped so that F ≤ 1.
/// * `ln F = lnσ(a_g) + logaddexp(lnσ(a_g), ln 2 + lnσ(a_r) + lnσ(−a_g))` — the digest's stable form
///   (`ln(g + 2 r (1 − g))` written with log-terms), then clamped to ≤ 0. F ≤ 1 always, but when
///   both a_g and a_r are large the two terms cancel (≈ −(1−g) and ≈ +(2r−1)(1−g)) and rounding
///   of size ~1e-16·|lnσ(a_g)| can land a hair above 0; the clamp keeps every decay ≤ 1.
pub fn regla_gate(a_g: f64, a_r: f64) -> RefinedGate {
    let g = sigmoid(a_g);
    let one_minus_g = sigmoid(-a_g);
    let r = sigmoid(a_r);
    let f = (g * (g + 2.0 * r * one_minus_g)).min(1.0);
    let log_g = log_sigmoid(a_g);
    let log_term = log_add_exp(log_g, std::f64::consts::LN_2 + log_sigmoid(a_r) + log_sigmoid(-a_g));
    let log_f = (log_g + log_term).min(0.0);
    RefinedGate { g, r, f, log_f }
}

/// GLA forget gate in log space: `lnσ(z) / normalizer` (reference-implementations §7, fla
/// `gate_logit_normalizer`, default 16), i.e. α = σ(z)^(1/normalizer). Always ≤ 0.
pub fn gla_log_gate(z: f64, normalizer: f64) -> f64 {
    log_sigmoid(z) / normalizer
}

/// RetNet decay of head h (0-based): `γ_h = 1 − 2^(−5−h)` (ReGLA digest §2.2: RetNet
/// `S_t = γ_h S_{t−1} + k_t v_tᵀ` with a fixed scalar per head).
pub fn retnet_gamma(h: usize) -> f64 {
    1.0 - (-5.0 - h as f64).exp2()
}

/// Normalised exponential feature map `φ_q(x) = exp(x − max x)` in place (ReGLA digest §1.4,
/// Eq. 11): every value lands in (0, 1], the maximum becomes exactly 1, and the result is invariant
/// to adding a constant to x. An empty slice is left alone.
pub fn exp_max_inplace(x: &mut [f32]) {
    let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if m == f32::NEG_INFINITY {
        return;
    }
    for v in x.iter_mut() {
        *v = (*v - m).exp();
    }
}

/// Epsilon of [`simple_rms_norm`], added **outside** the square root (TransNormer digest §1.3).
pub const SIMPLE_RMS_EPS: f32 = 1e-8;

/// SimpleRMSNorm (TransNormer digest §1.3, NormAttention): `x / (‖x‖₂ / sqrt(n) + 1e-8)`, no gain.
/// The sum of squares is accumulated in f64. An all-zero input stays zero.
pub fn simple_rms_norm(x: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let ss: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let rms = (ss / x.len() as f64).sqrt();
    let denom = rms + SIMPLE_RMS_EPS as f64;
    for v in x.iter_mut() {
        *v = (*v as f64 / denom) as f32;
    }
}

/// RMSNorm with gain: `x / sqrt(mean(x²) + eps) ⊙ w` (eps inside the root; the residual-stream norm
/// of config.rs and the per-head output norm of GLA/ReGLA/RetNet, ReGLA digest §1.6, §7 A5).
///
/// # Panics
/// If `w.len() != x.len()` (caller bug, not data).
pub fn rms_norm(x: &mut [f32], w: &[f32], eps: f32) {
    assert_eq!(w.len(), x.len(), "rms_norm: gain length must equal input length");
    if x.is_empty() {
        return;
    }
    let ss: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let inv = 1.0 / (ss / x.len() as f64 + eps as f64).sqrt();
    for (v, &g) in x.iter_mut().zip(w) {
        *v = (*v as f64 * inv * g as f64) as f32;
    }
}

fn check_gla_shapes(q: &[f32], k: &[f32], v: &[f32], log_gate: &[f32], t: usize, dk: usize, dv: usize) {
    assert_eq!(q.len(), t * dk, "gated linear attention: q must be [T, dk]");
    assert_eq!(k.len(), t * dk, "gated linear attention: k must be [T, dk]");
    assert_eq!(v.len(), t * dv, "gated linear attention: v must be [T, dv]");
    assert_eq!(log_gate.len(), t * dk, "gated linear attention: log_gate must be [T, dk]");
}

/// Naive recurrent gated linear attention for one head, key-dim gated (GLA layout; ReGLA digest
/// §1.9 and §6, reference-implementations §7 `naive_recurrent_gla`):
///
/// ```text
/// S_0 = 0 (dk × dv)
/// S_t = diag(exp(lg_t)) S_{t−1} + k_t v_tᵀ      (decay first, then write)
/// o_t = scale · S_tᵀ q_t
/// ```
///
/// `q`, `k`, `log_gate` are row-major `[T, dk]`, `v` is `[T, dv]`; returns `[T, dv]`. The state
/// and the read-out are accumulated in f64.
///
/// # Panics
/// If a slice length does not match its shape (caller bug, not data).
#[allow(clippy::too_many_arguments)]
pub fn gated_linear_recurrent(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    log_gate: &[f32],
    t: usize,
    dk: usize,
    dv: usize,
    scale: f32,
) -> Vec<f32> {
    check_gla_shapes(q, k, v, log_gate, t, dk, dv);
    let mut state = vec![0.0f64; dk * dv]; // S[j, c] at j * dv + c
    let mut out = vec![0.0f32; t * dv];
    for step in 0..t {
        for j in 0..dk {
            let decay = (log_gate[step * dk + j] as f64).exp();
            let kj = k[step * dk + j] as f64;
            for c in 0..dv {
                let s = &mut state[j * dv + c];
                *s = decay * *s + kj * v[step * dv + c] as f64;
            }
        }
        for c in 0..dv {
            let mut acc = 0.0f64;
            for j in 0..dk {
                acc += q[step * dk + j] as f64 * state[j * dv + c];
            }
            out[step * dv + c] = (scale as f64 * acc) as f32;
        }
    }
    out
}

/// Naive parallel (quadratic) gated linear attention for one head — the oracle form of ReGLA
/// digest §1.9 ("Fully parallel"):
///
/// ```text
/// A_t = Σ_{u≤t} lg_u                                   (per key channel j, in f64)
/// P[t, s] = Σ_j q_t[j] k_s[j] exp(A_t[j] − A_s[j])     for s ≤ t, else 0
/// o_t = scale · Σ_{s≤t} P[t, s] v_s
/// ```
///
/// The exponent difference `A_t − A_s = Σ_{s<u≤t} lg_u` is formed first and exponentiated once, so
/// with log gates ≤ 0 every exponent is ≤ 0 and nothing overflows (never `exp(A_t) / exp(A_s)`).
/// Same shapes and result as [`gated_linear_recurrent`].
///
/// # Panics
/// If a slice length does not match its shape (caller bug, not data).
#[allow(clippy::too_many_arguments)]
pub fn gated_linear_parallel(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    log_gate: &[f32],
    t: usize,
    dk: usize,
    dv: usize,
    scale: f32,
) -> Vec<f32> {
    check_gla_shapes(q, k, v, log_gate, t, dk, dv);
    // Inclusive cumulative sums A[t, j] in f64.
    let mut cum = vec![0.0f64; t * dk];
    for step in 0..t {
        for j in 0..dk {
            let prev = if step == 0 { 0.0 } else { cum[(step - 1) * dk + j] };
            cum[step * dk + j] = prev + log_gate[step * dk + j] as f64;
        }
    }
    let mut out = vec![0.0f32; t * dv];
    for ti in 0..t {
        let mut acc = vec![0.0f64; dv];
        for si in 0..=ti {
            let mut p = 0.0f64;
            for j in 0..dk {
                let diff = cum[ti * dk + j] - cum[si * dk + j];
                p += q[ti * dk + j] as f64 * k[si * dk + j] as f64 * diff.exp();
            }
            for c in 0..dv {
                acc[c] += p * v[si * dv + c] as f64;
            }
        }
        for c in 0..dv {
            out[ti * dv + c] = (scale as f64 * acc[c]) as f32;
        }
    }
    out
}

/// Tensor holding the forget-gate bias of a gated layer: `b_g` for ReGLA, the gate-logit bias for GLA.
pub fn gate_bias_tensor(layer: usize, spec: &crate::config::AttentionSpec) -> Option<String> {
    use crate::config::AttentionSpec;
    match spec {
        AttentionSpec::Gla { .. } => Some(format!("layers.{layer}.attn.gla.gk_bias")),
        AttentionSpec::Regla => Some(format!("layers.{layer}.attn.regla.b_g")),
        _ => None,
    }
}

/// The extreme gate-bias initialisation of ReGLA's Fig. 4 (ReGLA digest §5 "Fig. 4"): every gated
/// layer's forget-gate bias is set to `+b` on even channels and `−b` on odd ones, so half the gate
/// activations start near 1 and half near 0. The paper gives no values; `attnlab init
/// --gate-bias-init 6` puts σ(±6) at 0.9975 / 0.0025. Returns the number of layers changed.
pub fn set_extreme_gate_bias(
    cfg: &crate::config::ModelConfig,
    weights: &mut crate::weights::Weights,
    b: f32,
) -> usize {
    let mut changed = 0;
    for (i, spec) in cfg.layers.iter().enumerate() {
        let Some(name) = gate_bias_tensor(i, spec) else { continue };
        if let Some(t) = weights.tensors.get_mut(&name) {
            for (c, v) in t.data.iter_mut().enumerate() {
                *v = if c % 2 == 0 { b } else { -b };
            }
            changed += 1;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lrpe::seeded_normal;
    use proptest::prelude::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// TransNormer digest §1.3: φ = elu (T1) and 1 + elu (T2).
    #[test]
    fn elu_values() {
        assert_eq!(elu(2.5), 2.5);
        assert_eq!(elu(0.0), 0.0);
        assert!(close(elu(-1.0) as f64, -0.632_120_56, 1e-7));
        assert_eq!(elu(-100.0), -1.0);
        assert_eq!(elu_plus_one(2.5), 3.5);
        assert_eq!(elu_plus_one(0.0), 1.0);
        assert!(close(elu_plus_one(-1.0) as f64, 0.367_879_44, 1e-7));
        assert!(elu_plus_one(-100.0) > 0.0);
        for x in [-5.0f32, -0.3, 0.0, 0.7, 4.0] {
            assert!((elu_plus_one(x) - (1.0 + elu(x))).abs() < 1e-6);
        }
    }

    /// ReGLA digest §1.7 / A11: log-sigmoid is finite and accurate at ±100 (no log(0), no
    /// cancellation), sigmoid saturates cleanly.
    #[test]
    fn log_sigmoid_is_stable() {
        assert!(close(log_sigmoid(0.0), -std::f64::consts::LN_2, 1e-15));
        assert!(close(log_sigmoid(-100.0), -100.0, 1e-12));
        let big = log_sigmoid(100.0);
        assert!(big < 0.0 && close(big, -(-100.0f64).exp(), 1e-50));
        assert!(close(log_sigmoid(-1000.0), -1000.0, 1e-9));
        assert_eq!(log_sigmoid(1000.0), -0.0);
        assert!(close(log_sigmoid(2.0), sigmoid(2.0).ln(), 1e-15));
        assert_eq!(sigmoid(-1000.0), 0.0);
        assert_eq!(sigmoid(1000.0), 1.0);
        assert!(close(sigmoid(1.0) + sigmoid(-1.0), 1.0, 1e-15));
        assert!(close(softplus(0.0), std::f64::consts::LN_2, 1e-15));
        assert!(close(log_add_exp(0.0, 0.0), std::f64::consts::LN_2, 1e-15));
        assert_eq!(log_add_exp(f64::NEG_INFINITY, f64::NEG_INFINITY), f64::NEG_INFINITY);
        assert_eq!(log_add_exp(f64::NEG_INFINITY, -3.0), -3.0);
    }

    /// ReGLA digest §1.5 table: c(d) = 1/(e·sqrt(d(e²−1))) = 0.1455416/sqrt(d).
    #[test]
    fn regla_scale_table() {
        for (d, want) in [(16, 0.036385), (32, 0.025728), (64, 0.018193), (96, 0.014854), (128, 0.012864)] {
            assert!(close(regla_scale(d), want, 5e-7), "c({d}) = {}", regla_scale(d));
        }
        assert!(close(regla_scale(1), 0.145_541_6, 1e-7));
    }

    /// ReGLA digest §1.7 unit-test rows (a_g, a_r) → g, r, F, log F (printed to 6 decimals; the
    /// F of (−6, −6) is printed as 1.8e-5, still within 1e-6).
    #[test]
    fn regla_gate_golden_rows() {
        let rows: [(f64, f64, f64, f64, f64, f64); 6] = [
            (0.0, 0.0, 0.5, 0.5, 0.5, -std::f64::consts::LN_2), // printed −0.693147
            (2.0, -1.0, 0.880797, 0.268941, 0.832278, -0.183589),
            (-3.0, 2.0, 0.047426, 0.880797, 0.081832, -2.503085),
            (4.0, 4.0, 0.982014, 0.982014, 0.999041, -0.000959),
            (-6.0, -6.0, 0.002473, 0.002473, 1.8e-5, -10.907989),
            (6.0, -6.0, 0.997527, 0.002473, 0.995073, -0.004939),
        ];
        for (ag, ar, g, r, f, lf) in rows {
            let gate = regla_gate(ag, ar);
            let tol = 1e-6;
            assert!(close(gate.g, g, tol), "({ag},{ar}) g {}", gate.g);
            assert!(close(gate.r, r, tol), "({ag},{ar}) r {}", gate.r);
            assert!(close(gate.f, f, tol), "({ag},{ar}) F {}", gate.f);
            assert!(close(gate.log_f, lf, tol), "({ag},{ar}) log F {}", gate.log_f);
            // Eq. 16 literally, and the digest's identity F = g + (2r − 1) g (1 − g).
            let literal = (1.0 - gate.r) * gate.g.powi(2) + gate.r * (1.0 - (1.0 - gate.g).powi(2));
            assert!(close(gate.f, literal, 1e-15));
            let identity = gate.g + (2.0 * gate.r - 1.0) * gate.g * (1.0 - gate.g);
            assert!(close(gate.f, identity, 1e-15));
            assert!(close(gate.log_f, gate.f.ln(), 1e-12 * gate.log_f.abs().max(1.0)));
        }
        // Reference-implementations §7 golden value: g = 0.9, r = 0.3 → F = 0.864.
        let logit = |p: f64| (p / (1.0 - p)).ln();
        assert!(close(regla_gate(logit(0.9), logit(0.3)).f, 0.864, 1e-12));
    }

    /// ReGLA digest §1.7 gradient rows: dF/da_g = 2g(1−g)[(1−r)g + r(1−g)], dF/da_r = 2g(1−g)r(1−r),
    /// checked against the table and a central finite difference of `regla_gate`.
    #[test]
    fn regla_gate_gradients_match_digest() {
        let rows: [(f64, f64, f64, f64); 6] = [
            (0.0, 0.0, 0.250000, 0.125000),
            (2.0, -1.0, 0.141946, 0.041286),
            (-3.0, 2.0, 0.076319, 0.009487),
            (4.0, 4.0, 0.001248, 0.000624),
            (-6.0, -6.0, 2.4e-5, 1.2e-5),
            (6.0, -6.0, 0.004909, 1.2e-5),
        ];
        let h = 1e-5;
        for (ag, ar, dg_want, dr_want) in rows {
            let RefinedGate { g, r, .. } = regla_gate(ag, ar);
            let dg = 2.0 * g * (1.0 - g) * ((1.0 - r) * g + r * (1.0 - g));
            let dr = 2.0 * g * (1.0 - g) * r * (1.0 - r);
            let fd_g = (regla_gate(ag + h, ar).f - regla_gate(ag - h, ar).f) / (2.0 * h);
            let fd_r = (regla_gate(ag, ar + h).f - regla_gate(ag, ar - h).f) / (2.0 * h);
            assert!(close(dg, fd_g, 1e-8) && close(dr, fd_r, 1e-8), "({ag},{ar})");
            assert!(close(dg, dg_want, 1e-6), "({ag},{ar}) dF/da_g {dg}");
            assert!(close(dr, dr_want, 1e-6), "({ag},{ar}) dF/da_r {dr}");
        }
    }

    proptest! {
        /// ReGLA digest §1.7 identities: r = 0.5 ⇒ F = g; F ∈ [g², g(2 − g)]; log F = ln F and is
        /// finite even where F underflows (A11).
        #[test]
        fn regla_gate_bounds(ag in -40.0f64..40.0, ar in -40.0f64..40.0) {
            let gate = regla_gate(ag, ar);
            let g = gate.g;
            prop_assert!(gate.f >= g * g * (1.0 - 1e-12) && gate.f <= g * (2.0 - g) * (1.0 + 1e-12));
            prop_assert!((0.0..=1.0).contains(&gate.f));
            prop_assert!(gate.log_f.is_finite() && gate.log_f <= 0.0);
            prop_assert!((gate.log_f - gate.f.ln()).abs() <= 1e-10 * gate.log_f.abs().max(1.0));
            let half = regla_gate(ag, 0.0);
            prop_assert!((half.f - half.g).abs() <= 1e-15);
            prop_assert!((half.log_f - log_sigmoid(ag)).abs() <= 1e-12 * half.log_f.abs().max(1.0));
        }
    }

    /// ReGLA digest §7 A11: where F underflows f64, log F stays finite and exact. a_g = −800,
    /// a_r = 0: F = g (g + (1 − g)) = g = e^−800 → 0 in f64, but log F = lnσ(−800) ≈ −800.
    /// a_g = a_r = −100: F ≈ g² + 2 g r = 3 e^−200.
    #[test]
    fn regla_log_gate_survives_underflow() {
        let gate = regla_gate(-800.0, 0.0);
        assert_eq!(gate.f, 0.0);
        assert!(close(gate.log_f, -800.0, 1e-9));
        let gate = regla_gate(-100.0, -100.0);
        assert!(close(gate.log_f, -200.0 + 3f64.ln(), 1e-9));
    }

    /// Reference-implementations §7: GLA gate = logsigmoid(z) / normalizer (α = σ(z)^(1/16)).
    #[test]
    fn gla_log_gate_values() {
        assert!(close(gla_log_gate(0.0, 16.0), -std::f64::consts::LN_2 / 16.0, 1e-15));
        assert!(close(gla_log_gate(2.0, 16.0).exp(), sigmoid(2.0).powf(1.0 / 16.0), 1e-14));
        assert!(gla_log_gate(50.0, 1.0) <= 0.0);
        assert!(close(gla_log_gate(-100.0, 10.0), -10.0, 1e-12));
    }

    /// RetNet decay γ_h = 1 − 2^(−5−h) (ReGLA digest §2.2; RetNet paper).
    #[test]
    fn retnet_gamma_values() {
        assert_eq!(retnet_gamma(0), 0.96875);
        assert_eq!(retnet_gamma(1), 0.984375);
        assert_eq!(retnet_gamma(3), 0.99609375);
        assert_eq!(retnet_gamma(7), 1.0 - 1.0 / 4096.0);
    }

    /// ReGLA digest §1.4 Eq. 11: exp(x − max x) ∈ (0, 1], max → 1, shift invariant, no overflow.
    #[test]
    fn exp_max_feature_map() {
        let mut x = vec![1000.0f32, 999.0, -5.0];
        exp_max_inplace(&mut x);
        assert_eq!(x[0], 1.0);
        assert!(close(x[1] as f64, (-1.0f64).exp(), 1e-7));
        assert_eq!(x[2], 0.0); // exp(−1005) underflows f32 to 0, no NaN
        let base = seeded_normal(16, 4);
        let mut a = base.clone();
        let mut b: Vec<f32> = base.iter().map(|v| v + 3.0).collect();
        exp_max_inplace(&mut a);
        exp_max_inplace(&mut b);
        for (p, q) in a.iter().zip(&b) {
            assert!((p - q).abs() < 1e-6 && *p > 0.0 && *p <= 1.0);
        }
        let mut empty: Vec<f32> = vec![];
        exp_max_inplace(&mut empty);
    }

    /// TransNormer digest §1.3 and reference-implementations §8 property 5: SimpleRMSNorm output has
    /// unit RMS up to eps; zero input stays zero. RMSNorm with gain matches the formula.
    #[test]
    fn norms() {
        let mut x = seeded_normal(64, 8);
        for v in x.iter_mut() {
            *v *= 7.0;
        }
        simple_rms_norm(&mut x);
        let rms = (x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / 64.0).sqrt();
        assert!(close(rms, 1.0, 1e-6), "rms {rms}");
        let mut z = vec![0.0f32; 8];
        simple_rms_norm(&mut z);
        assert!(z.iter().all(|&v| v == 0.0));
        // eps is outside the root: x = [1e-8; n] has rms 1e-8 → x / 2e-8 = 0.5.
        let mut tiny = vec![1e-8f32; 4];
        simple_rms_norm(&mut tiny);
        assert!(tiny.iter().all(|&v| close(v as f64, 0.5, 1e-6)));

        let mut x = vec![3.0f32, -4.0];
        rms_norm(&mut x, &[1.0, 2.0], 0.0);
        let r = (12.5f64).sqrt();
        assert!(close(x[0] as f64, 3.0 / r, 1e-6) && close(x[1] as f64, -8.0 / r, 1e-6));
        let mut x = vec![3.0f32, -4.0];
        rms_norm(&mut x, &[1.0, 1.0], 1.0);
        assert!(close(x[0] as f64, 3.0 / (13.5f64).sqrt(), 1e-6));
    }

    /// Reference-implementations §7 tiny golden case (fla naive_recurrent_gla): K = 2, V = 1, T = 3,
    /// scale = 1/sqrt(2), gates a given in linear space (log gate = ln a).
    #[test]
    fn gla_golden_tiny_case() {
        let q = [1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0];
        let k = [1.0f32, 2.0, 0.5, 0.0, 1.0, 1.0];
        let v = [1.0f32, 2.0, 3.0];
        let a = [0.5f32, 0.9, 0.8, 0.7, 0.6, 0.5];
        let lg: Vec<f32> = a.iter().map(|x| x.ln()).collect();
        let scale = std::f32::consts::FRAC_1_SQRT_2;
        // Printed as [0.70710678, 0.98994949, 5.50129076]; the first is exactly 1/sqrt(2).
        let want = [std::f64::consts::FRAC_1_SQRT_2, 0.989_949_49, 5.501_290_76];
        for out in [
            gated_linear_recurrent(&q, &k, &v, &lg, 3, 2, 1, scale),
            gated_linear_parallel(&q, &k, &v, &lg, 3, 2, 1, scale),
        ] {
            for (o, w) in out.iter().zip(want) {
                assert!(close(*o as f64, w, 1e-6), "{out:?}");
            }
        }
    }

    /// Naive causal linear attention o_t = scale Σ_{s≤t} (q_t·k_s) v_s.
    fn causal_linear(q: &[f32], k: &[f32], v: &[f32], t: usize, dk: usize, dv: usize) -> Vec<f64> {
        let mut out = vec![0.0f64; t * dv];
        for ti in 0..t {
            for si in 0..=ti {
                let p: f64 = (0..dk).map(|j| q[ti * dk + j] as f64 * k[si * dk + j] as f64).sum();
                for c in 0..dv {
                    out[ti * dv + c] += p * v[si * dv + c] as f64;
                }
            }
        }
        out
    }

    /// Max |a − b| relative to the largest |b| (plus a floor): the comparison used below.
    fn rel_err(a: &[f32], b: &[f32]) -> f64 {
        let scale = b.iter().fold(0.0f64, |m, &x| m.max((x as f64).abs())).max(1e-30);
        a.iter().zip(b).fold(0.0f64, |m, (&x, &y)| m.max((x as f64 - y as f64).abs())) / scale
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// ReGLA digest §1.9 (parallel form as oracle) and reference-implementations §8 property 3:
        /// recurrent ≡ parallel, including strongly negative log gates down to −20.
        #[test]
        fn recurrent_equals_parallel(
            t in 1usize..24,
            dk in 1usize..9,
            dv in 1usize..7,
            seed in any::<u64>(),
            gate_scale in prop_oneof![Just(0.0f32), 0.0f32..1.0, Just(20.0f32)],
        ) {
            let q = seeded_normal(t * dk, seed);
            let k = seeded_normal(t * dk, seed.wrapping_add(1));
            let v = seeded_normal(t * dv, seed.wrapping_add(2));
            // Log gates in [−gate_scale, 0]: uniform fraction from a normal via |·| clamp.
            let lg: Vec<f32> = seeded_normal(t * dk, seed.wrapping_add(3))
                .iter()
                .map(|z| -gate_scale * (z.abs() / 3.0).min(1.0))
                .collect();
            let scale = 1.0 / (dk as f32).sqrt();
            let rec = gated_linear_recurrent(&q, &k, &v, &lg, t, dk, dv, scale);
            let par = gated_linear_parallel(&q, &k, &v, &lg, t, dk, dv, scale);
            prop_assert!(rec.iter().all(|x| x.is_finite()));
            let err = rel_err(&rec, &par);
            prop_assert!(err <= 1e-5, "rel err {err}");
        }

        /// Reference-implementations §8 property 4: all log gates 0 ⇒ causal linear attention.
        #[test]
        fn zero_gates_is_causal_linear_attention(
            t in 1usize..16,
            dk in 1usize..6,
            dv in 1usize..5,
            seed in any::<u64>(),
        ) {
            let q = seeded_normal(t * dk, seed);
            let k = seeded_normal(t * dk, seed.wrapping_add(1));
            let v = seeded_normal(t * dv, seed.wrapping_add(2));
            let lg = vec![0.0f32; t * dk];
            let want: Vec<f32> = causal_linear(&q, &k, &v, t, dk, dv)
                .iter()
                .map(|&x| (0.5 * x) as f32)
                .collect();
            for got in [
                gated_linear_recurrent(&q, &k, &v, &lg, t, dk, dv, 0.5),
                gated_linear_parallel(&q, &k, &v, &lg, t, dk, dv, 0.5),
            ] {
                let err = rel_err(&got, &want);
                prop_assert!(err <= 1e-6, "rel err {err}");
            }
        }
    }

    /// Strongly negative gates wipe the past: with lg = −1000 everywhere only the current token is
    /// seen (o_t = scale (q_t·k_t) v_t), and the parallel form stays finite (exponents ≤ 0).
    #[test]
    fn saturated_gates_keep_only_current_token() {
        let (t, dk, dv) = (5, 3, 2);
        let q = seeded_normal(t * dk, 1);
        let k = seeded_normal(t * dk, 2);
        let v = seeded_normal(t * dv, 3);
        let lg = vec![-1000.0f32; t * dk];
        let rec = gated_linear_recurrent(&q, &k, &v, &lg, t, dk, dv, 1.0);
        let par = gated_linear_parallel(&q, &k, &v, &lg, t, dk, dv, 1.0);
        for ti in 0..t {
            let p: f32 = (0..dk).map(|j| q[ti * dk + j] * k[ti * dk + j]).sum();
            for c in 0..dv {
                let want = p * v[ti * dv + c];
                assert!((rec[ti * dv + c] - want).abs() < 1e-5);
                assert!((par[ti * dv + c] - want).abs() < 1e-5);
            }
        }
    }
}
