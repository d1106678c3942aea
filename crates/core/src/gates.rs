//! A naive gated-linear-attention oracle (recurrent and parallel forms, f64 accumulation): the
//! independent check the chunked kernel of `attention::linear` and the trainer are tested against.

// Reference math indexes several parallel slices with one index; range loops read like the formulas.
#![allow(clippy::needless_range_loop)]

fn check_gla_shapes(q: &[f32], k: &[f32], v: &[f32], log_gate: &[f32], t: usize, dk: usize, dv: usize) {
    assert_eq!(q.len(), t * dk, "gated linear attention: q must be [T, dk]");
    assert_eq!(k.len(), t * dk, "gated linear attention: k must be [T, dk]");
    assert_eq!(v.len(), t * dv, "gated linear attention: v must be [T, dv]");
    assert_eq!(log_gate.len(), t * dk, "gated linear attention: log_gate must be [T, dk]");
}

/// Naive recurrent gated linear attention for one head, key-dim gated (GLA layout of ReGLA
/// Eq. 15 with a key-axis gate, as fla `ops/gla/naive.py` `naive_recurrent_gla`):
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

/// Naive parallel (quadratic) gated linear attention for one head — the recurrence of ReGLA
/// Eq. 15 unrolled (the paper gives no parallel form):
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_normal;
    use crate::test_util::close;
    use proptest::prelude::*;

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

        /// Parallel form as oracle (ReGLA Eq. 15 unrolled; fla tests `tests/ops/test_gla.py` do the same):
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
