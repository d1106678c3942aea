//! `regla`: ReGLA (Lu et al., "ReGLA: Refining Gated Linear Attention", §3): the normalised
//! exponential feature map with the variance-reduction factor `c(d)` (§3.1, Eq. 11, Thm 3.1), the
//! refined forget gate `F = (1 − r) g² + r (1 − (1 − g)²)` (§3.3, Eqs. 16–18) and per-head RMSNorm of
//! the output (§3.2). Gated on the key/feature axis (GLA layout); the key map uses a running max with
//! an exact state rescale as the causal stand-in for the paper's global max.
//!
//! Decisions where the paper is silent or ambiguous: gates on the key/feature axis (Eq. 15 read in
//! GLA's layout, as fla); key features `exp(k − M_t)` with the running max `M_t` folded into the
//! log-gate (identical to Eq. 12's global max up to the norm's eps); per-head RMSNorm with eps 1e−5
//! and a learned gain (the trainer uses the same eps); no output gate; `c(d)` with d = head_dim,
//! applied to φq; full-rank `w_g`, `w_r` with biases starting at 0 (so r = 0.5 and F = g at init).

use super::{Family, LowerCtx, Variant};
use crate::activations::{log_add_exp, log_sigmoid, sigmoid};
use crate::attention::HEAD_NORM_EPS;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::lowering::{Feature, FeatureMap, Gate, LinearLowering, Lowering, Post};
use crate::weights::{Init, TensorSpec};
use serde::{Deserialize, Serialize};

/// No parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Regla {}

/// ReGLA variance-reduction factor `c(d) = 1 / (e · sqrt(d (e² − 1)))` (ReGLA §3.1,
/// Thm 3.1; App. A), used in place of 1/sqrt(d). c(64) = 0.018193.
pub fn regla_scale(d: usize) -> f64 {
    let e = std::f64::consts::E;
    1.0 / (e * (d as f64 * (e * e - 1.0)).sqrt())
}

/// ReGLA refined gate values for one channel (ReGLA §3.3, Eqs. 16–18).
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
/// (ReGLA §3.3, Eqs. 16–18):
///
/// * `F = g² + 2 r g (1 − g) = g · (g + 2 r (1 − g))` — a sum of non-negative terms, so no
///   cancellation; `1 − g` is evaluated as `σ(−a_g)`; rounding is clamped so that F ≤ 1.
/// * `ln F = lnσ(a_g) + logaddexp(lnσ(a_g), ln 2 + lnσ(a_r) + lnσ(−a_g))` — a stable form
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

impl Variant for Regla {
    fn family(&self) -> Family {
        Family::Linear
    }

    fn layer_tensors(&self, cfg: &ModelConfig, i: usize) -> Vec<TensorSpec> {
        let (d, a) = (cfg.d_model, cfg.attn_dim());
        let std_in = 1.0 / (d as f32).sqrt();
        let p = |name: &str| format!("layers.{i}.attn.regla.{name}");
        vec![
            TensorSpec::new(p("w_g"), &[a, d], Init::Normal(std_in)),
            TensorSpec::new(p("b_g"), &[a], Init::Const(0.0)),
            TensorSpec::new(p("w_r"), &[a, d], Init::Normal(std_in)),
            TensorSpec::new(p("b_r"), &[a], Init::Const(0.0)),
            TensorSpec::new(p("head_norm"), &[cfg.head_dim], Init::Const(1.0)),
        ]
    }

    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering> {
        let (d, a, dh) = (ctx.cfg.d_model, ctx.cfg.attn_dim(), ctx.cfg.head_dim);
        let q = Feature { map: FeatureMap::ExpMax, scale: regla_scale(dh) as f32 };
        let mut l = LinearLowering::plain(dh, q, Feature::plain(FeatureMap::ExpRunningMax));
        l.gate = Gate::Refined {
            wg: ctx.learned_linear("regla.w_g", a, d)?,
            bg: ctx.learned("regla.b_g")?,
            wr: ctx.learned_linear("regla.w_r", a, d)?,
            br: ctx.learned("regla.b_r")?,
        };
        l.post = Post::RmsNorm { gain: ctx.learned("regla.head_norm")?, eps: HEAD_NORM_EPS };
        Ok(Lowering::Linear(l))
    }

    fn gate_bias_tensor(&self, i: usize) -> Option<String> {
        Some(format!("layers.{i}.attn.regla.b_g"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::close;
    use proptest::prelude::*;

    /// ReGLA Thm 3.1 factor: c(d) = 1/(e·sqrt(d(e²−1))) = 0.1455416/sqrt(d).
    #[test]
    fn regla_scale_table() {
        for (d, want) in [(16, 0.036385), (32, 0.025728), (64, 0.018193), (96, 0.014854), (128, 0.012864)] {
            assert!(close(regla_scale(d), want, 5e-7), "c({d}) = {}", regla_scale(d));
        }
        assert!(close(regla_scale(1), 0.145_541_6, 1e-7));
    }

    /// ReGLA Eqs. 16–18, rows (a_g, a_r) → g, r, F, log F computed independently (6 decimals; the
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
            // Eq. 16 literally, and the identity F = g + (2r − 1) g (1 − g).
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

    /// Gradients of ReGLA Eq. 16 (cf. §3.3, Fig. 3): dF/da_g = 2g(1−g)[(1−r)g + r(1−g)],
    /// dF/da_r = 2g(1−g)r(1−r), checked against the table and a central finite difference of `regla_gate`.
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

    /// ReGLA Eq. 16 can approach 0 (F ≥ g²): where F underflows f64, log F stays finite and exact.
    /// a_g = −800, a_r = 0: F = g (g + (1 − g)) = g = e^−800 → 0 in f64, but log F = lnσ(−800) ≈ −800.
    /// a_g = a_r = −100: F ≈ g² + 2 g r = 3 e^−200.
    #[test]
    fn regla_log_gate_survives_underflow() {
        let gate = regla_gate(-800.0, 0.0);
        assert_eq!(gate.f, 0.0);
        assert!(close(gate.log_f, -800.0, 1e-9));
        let gate = regla_gate(-100.0, -100.0);
        assert!(close(gate.log_f, -200.0 + 3f64.ln(), 1e-9));
    }

    proptest! {
        /// ReGLA Eq. 16 identities: r = 0.5 ⇒ F = g; F ∈ [g², g(2 − g)]; log F = ln F and is
        /// finite even where F underflows.
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
}
