//! Scalar activations of the reference math: ELU feature maps, softplus, (log-)sigmoid,
//! log-add-exp and the normalised exponential feature map. Scalar, f64 where a gate is formed.

/// ELU with α = 1: `x` for x > 0, `exp(x) − 1` otherwise (TransNormer T1's feature map φ = elu,
/// range (−1, ∞): fairseq-evo `norm_linear_attention.py`, `linear_act_fun = "elu"`). Uses `exp_m1`
/// for accuracy near 0.
pub fn elu(x: f32) -> f32 {
    if x > 0.0 {
        x
    } else {
        x.exp_m1()
    }
}

/// `1 + elu(x)`: `x + 1` for x > 0, `exp(x)` otherwise (TransNormer T2 and LRPE's
/// kernel; Katharopoulos et al., 2020). Always > 0; the x ≤ 0 branch is `exp(x)` directly rather
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

/// `ln σ(x) = −softplus(−x)`, stable at both ends (log-space form of ReGLA Eqs. 16–17; fla
/// `layers/gla.py` gate): ≈ x for x ≪ 0, ≈ −e^(−x) for x ≫ 0, never −∞ for finite x.
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

/// Normalised exponential feature map `φ_q(x) = exp(x − max x)` in place (ReGLA §3.1,
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

/// HGRN's lower-bounded forget gate in log space, `ln(β + (1 − β)·σ(f))` ("HGRN2", §3;
/// fla's `logaddexp(ln β, ln(1 − β) + lnσ(f))`). Always ≤ 0.
pub fn key_forget_log_gate(f: f64, beta: f64) -> f64 {
    if beta <= 0.0 {
        log_sigmoid(f)
    } else {
        log_add_exp(beta.ln(), (-beta).ln_1p() + log_sigmoid(f)).min(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_normal;
    use crate::test_util::close;

    /// TransNormer T1/T2 feature maps (fairseq-evo `linear_act_fun`): φ = elu (T1) and 1 + elu (T2).
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

    /// ReGLA Eqs. 16–17 in log space (F can approach 0): log-sigmoid is finite and accurate at ±100
    /// (no log(0), no cancellation), sigmoid saturates cleanly.
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

    /// ReGLA §3.1, Eq. 11: exp(x − max x) ∈ (0, 1], max → 1, shift invariant, no overflow.
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
}
