//! LRPE — Linearized Relative Positional Encoding (Qin et al., TMLR 2023), reference math.
//!
//! Every token's (feature-mapped) query and key are multiplied by a position-dependent unitary
//! transform `T_s(x) = Λ(s) (P x)` (LRPE §3.2, Def. 3.1, Eq. 13, with App. D.1's trick, Eq. 75;
//! fairseq-evo `urpe.py`: `Urpe.forward` applies **no trailing Pᵀ**). Because `Λ(s)ᵀ Λ(t) = Λ(t − s)`
//! and P is orthogonal, `⟨T_s q, T_t k⟩ = qᵀ Pᵀ Λ(t − s) P k` depends only on `t − s`, so the encoding is
//! relative while still factorising per token, which is what linear attention needs.
//!
//! * P ∈ {identity, Householder `I − 2 v̂ v̂ᵀ`, odd-even interleave} (LRPE §3.3, App. D.1,
//!   Eqs. 73–74).
//! * Λ(s) ∈ {adjacent-pair rotations, rotation of the first half only ("mixed"), a fixed random
//!   permutation applied s times, complex diagonal `exp(i s α)` realised as `[x⊙cos, x⊙sin]`}
//!   (LRPE §3.2.1, Props. 3.3–3.5, Eqs. 22–24; the mixed core is fairseq-evo `urpe.py` `mix_rope`).
//!
//! All angles `s·θ` are formed and passed to cos/sin in f64 (design.md: WGSL/f32 sin and cos are
//! only trustworthy on [−π, π], and `s·θ_0` reaches hundreds of radians). The module also holds the
//! plain RoPE helper shared by the `rope` and `retnet` variants, and the seeded generators
//! (SplitMix64, Fisher–Yates, Box–Muller) that `attnlab init`, the trainer and the GPU backend use to
//! reproduce the random permutation and the Householder vector bit for bit.

// Reference math indexes several parallel slices with one index; range loops read like the formulas.
#![allow(clippy::needless_range_loop)]

use crate::error::{Error, Result};
use crate::rng::seeded_permutation;
use crate::rotary::inv_freq;
use crate::variants::lrpe::{LrpeCore, LrpeP};

/// Base of the fixed ("theta type a") LRPE angles `θ_k = 10000^(−2k/width)` (LRPE App. D.1).
pub const LRPE_THETA_BASE: f64 = 10000.0;

/// Width of the rotated block of the `mixed` core: `d / 2` (integer division) rounded up to even,
/// exactly as the reference `Urpe.mix_rope` (`e = d // 2; if e % 2: e += 1`;
/// fairseq-evo `urpe.py`).
/// Channels `e..d` pass through. For d ≥ 2 this is ≥ 2 and ≤ d.
pub fn mixed_rotated_width(d: usize) -> usize {
    let e = d / 2;
    e + e % 2
}

/// Precomputed, per-layer LRPE transform for head dim `d`.
#[derive(Debug, Clone)]
pub struct Lrpe {
    core: LrpeCore,
    p: LrpeP,
    d: usize,
    /// θ (rotation, mixed: one per rotated pair) or α (complex: one per channel), in f64.
    angles: Vec<f64>,
    /// Unit Householder vector v̂ (f64); empty unless `p == Householder`.
    householder_v: Vec<f64>,
    /// The permutation π as a gather (`π(j) = perm[j]`); empty unless `core == Permutation`.
    perm: Vec<usize>,
    /// Cycles of π, each listed as `[j, π(j), π²(j), …]`.
    cycles: Vec<Vec<usize>>,
    /// For every channel j: (index of its cycle, position of j inside that cycle).
    cycle_pos: Vec<(usize, usize)>,
}

impl Lrpe {
    /// Build the transform.
    ///
    /// * `theta`: `Some(learned angles)` of length [`Lrpe::n_angles`], or `None` for the fixed
    ///   angles (LRPE App. D.1; fairseq-evo `urpe.py`):
    ///   - rotation: `θ_k = 10000^(−2k/d)`, k = 0..d/2;
    ///   - mixed: rotated width `e = `[`mixed_rotated_width`]`(d)`, `θ_k = 10000^(−2k/e)`, k = 0..e/2;
    ///   - complex: `α_k = 10000^(−2k/d)`, k = 0..d (fairseq-evo `urpe.py`);
    ///   - permutation: no angles (`Some(&[])` is accepted too).
    /// * `householder_v`: required iff `p == Householder` (an error otherwise, so a stray tensor is
    ///   noticed); length d, finite, normalised here in f64 to `v̂ = v / ‖v‖` (LRPE Eq. 73); a zero
    ///   vector is an error. A vector stored pre-normalised is unchanged up to rounding.
    /// * `seed`: seed of the core permutation π = [`seeded_permutation`]`(d, seed)`; used only by
    ///   the permutation core.
    pub fn new(
        core: LrpeCore,
        p: LrpeP,
        d: usize,
        theta: Option<&[f32]>,
        householder_v: Option<&[f32]>,
        seed: u64,
    ) -> Result<Lrpe> {
        if d == 0 {
            return Err(Error::arg("d", "lrpe head dim must be >= 1"));
        }
        if matches!(core, LrpeCore::Rotation | LrpeCore::Mixed) && d < 2 {
            return Err(Error::arg("d", "lrpe rotation cores need head dim >= 2"));
        }

        // Angles (LRPE App. D.1): learned values are widened to f64, fixed ones computed in f64.
        let n = Self::n_angles(core, d);
        let angles: Vec<f64> = match theta {
            Some(t) => {
                if t.len() != n {
                    return Err(Error::arg(
                        "theta",
                        format!("has {} values, the {core:?} core with d = {d} needs {n}", t.len()),
                    ));
                }
                if let Some(i) = t.iter().position(|a| !a.is_finite()) {
                    return Err(Error::arg("theta", format!("value at index {i} is not finite")));
                }
                t.iter().map(|&a| a as f64).collect()
            }
            None => match core {
                LrpeCore::Rotation => (0..n).map(|k| inv_freq(LRPE_THETA_BASE, k, d)).collect(),
                LrpeCore::Mixed => {
                    let e = mixed_rotated_width(d);
                    (0..n).map(|k| inv_freq(LRPE_THETA_BASE, k, e)).collect()
                }
                LrpeCore::Complex => (0..n).map(|k| inv_freq(LRPE_THETA_BASE, k, d)).collect(),
                LrpeCore::Permutation => Vec::new(),
            },
        };

        // Householder vector (LRPE App. D.1, Eq. 73): v̂ = v / ‖v‖ in f64.
        let householder_v = match (p, householder_v) {
            (LrpeP::Householder, Some(v)) => {
                if v.len() != d {
                    return Err(Error::arg(
                        "householder_v",
                        format!("has {} values, need head dim {d}", v.len()),
                    ));
                }
                if let Some(i) = v.iter().position(|a| !a.is_finite()) {
                    return Err(Error::arg("householder_v", format!("value at index {i} is not finite")));
                }
                let norm = v.iter().map(|&a| (a as f64) * (a as f64)).sum::<f64>().sqrt();
                if norm == 0.0 {
                    return Err(Error::arg("householder_v", "is the zero vector"));
                }
                v.iter().map(|&a| a as f64 / norm).collect()
            }
            (LrpeP::Householder, None) => {
                return Err(Error::arg("householder_v", "is required when p = householder"))
            }
            (_, Some(_)) => {
                return Err(Error::arg("householder_v", format!("given but p = {p:?} does not use it")))
            }
            (_, None) => Vec::new(),
        };

        // Permutation core (LRPE Prop. 3.5, Eq. 24; App. D.1: random, deterministic): π and its cycle
        // decomposition, so that π^s is available for any s in O(d) without a max-length table.
        let (perm, cycles, cycle_pos) = if core == LrpeCore::Permutation {
            let perm = seeded_permutation(d, seed);
            let (cycles, cycle_pos) = cycle_decomposition(&perm);
            (perm, cycles, cycle_pos)
        } else {
            (Vec::new(), Vec::new(), Vec::new())
        };

        Ok(Lrpe { core, p, d, angles, householder_v, perm, cycles, cycle_pos })
    }

    /// Number of angles the core uses for head dim `d` (the length of a learned θ tensor):
    /// rotation d/2, mixed `mixed_rotated_width(d)/2`, complex d, permutation 0 (fairseq-evo `urpe.py`).
    pub fn n_angles(core: LrpeCore, d: usize) -> usize {
        match core {
            LrpeCore::Rotation => d / 2,
            LrpeCore::Mixed => mixed_rotated_width(d) / 2,
            LrpeCore::Permutation => 0,
            LrpeCore::Complex => d,
        }
    }

    /// Output width: d, or 2d for the complex core (LRPE Eq. 22 as a real embedding).
    pub fn out_dim(&self) -> usize {
        match self.core {
            LrpeCore::Complex => 2 * self.d,
            _ => self.d,
        }
    }

    /// Input width (head dim).
    pub fn dim(&self) -> usize {
        self.d
    }

    /// The core Λ(s).
    pub fn core(&self) -> LrpeCore {
        self.core
    }

    /// The fixed unitary P.
    pub fn p(&self) -> LrpeP {
        self.p
    }

    /// The angles θ/α in f64 (empty for the permutation core), e.g. to build GPU cos/sin tables.
    pub fn angles(&self) -> &[f64] {
        &self.angles
    }

    /// The unit Householder vector v̂ (`None` unless P is Householder).
    pub fn householder_v(&self) -> Option<&[f64]> {
        (self.p == LrpeP::Householder).then_some(self.householder_v.as_slice())
    }

    /// The core permutation π as a gather table (`None` unless the core is the permutation).
    pub fn permutation(&self) -> Option<&[usize]> {
        (self.core == LrpeCore::Permutation).then_some(self.perm.as_slice())
    }

    /// `π^s(j)` through the cycle decomposition: if j sits at position i of a cycle c of length L,
    /// then `π^s(j) = c[(i + s) mod L]` (LRPE Eq. 24). Panics if the core is not the
    /// permutation or `j >= d`.
    pub fn perm_power(&self, s: usize, j: usize) -> usize {
        let (c, i) = self.cycle_pos[j];
        let cycle = &self.cycles[c];
        cycle[(i + s % cycle.len()) % cycle.len()]
    }

    /// Period in s of the permutation core: the order of π, i.e. the lcm of its cycle lengths
    /// (LRPE Prop. 3.5, Eq. 24). `None` for the other cores or if it overflows u128.
    pub fn permutation_period(&self) -> Option<u128> {
        if self.core != LrpeCore::Permutation {
            return None;
        }
        self.cycles.iter().try_fold(1u128, |acc, c| {
            let len = c.len() as u128;
            (acc / gcd(acc, len)).checked_mul(len)
        })
    }

    /// The fixed unitary P applied to x, in f64 (LRPE §3.3, App. D.1).
    fn apply_p(&self, x: &[f32]) -> Vec<f64> {
        let d = self.d;
        match self.p {
            LrpeP::Identity => x.iter().map(|&a| a as f64).collect(),
            // P x = x − 2 (x·v̂) v̂  (Eq. 73, O(d)).
            LrpeP::Householder => {
                let dot: f64 = x.iter().zip(&self.householder_v).map(|(&a, &v)| a as f64 * v).sum();
                x.iter().zip(&self.householder_v).map(|(&a, &v)| a as f64 - 2.0 * dot * v).collect()
            }
            // 0-indexed gather y[j] = x[odd_even_index(j, d)] (reference-code form of Eq. 74).
            LrpeP::OddEven => (0..d).map(|j| x[odd_even_index(j, d)] as f64).collect(),
        }
    }

    /// Apply `T_s = Λ(s) P` to `x` (len d), writing `out` (len [`Lrpe::out_dim`]); s is the token's
    /// absolute position, starting at 0 (as fairseq-evo `urpe.py`).
    ///
    /// * rotation / mixed: `out[2k] = y[2k] cos(sθ_k) − y[2k+1] sin(sθ_k)`,
    ///   `out[2k+1] = y[2k+1] cos(sθ_k) + y[2k] sin(sθ_k)` for every rotated pair k; the remaining
    ///   channels (odd d's last channel; mixed: channels e..d) pass through (LRPE Prop. 3.4,
    ///   Eq. 23; fairseq-evo `urpe.py`).
    /// * permutation: `out[j] = y[π^s(j)]` (LRPE Prop. 3.5, Eq. 24).
    /// * complex: `out = [y ⊙ cos(sα), y ⊙ sin(sα)]`, so that the real dot product of two outputs is
    ///   `Re((T_s q)ᴴ T_t k) = Σ_j y_q[j] y_k[j] cos((t − s) α_j)` (LRPE Prop. 3.3, Eq. 22;
    ///   real part of the complex score).
    ///
    /// Here `y = P x`. Angles `s·θ` and their cos/sin are computed in f64; the result is rounded to
    /// f32 once at the end.
    ///
    /// # Panics
    /// If `x.len() != d` or `out.len() != out_dim()` (caller bug, not data).
    pub fn apply(&self, s: usize, x: &[f32], out: &mut [f32]) {
        assert_eq!(x.len(), self.d, "lrpe: input length must equal head dim");
        assert_eq!(out.len(), self.out_dim(), "lrpe: output length must equal out_dim()");
        let y = self.apply_p(x);
        let pos = s as f64;
        match self.core {
            LrpeCore::Rotation | LrpeCore::Mixed => {
                // Rotated pairs k < angles.len(); rotation: d/2 pairs, mixed: e/2 pairs.
                let rotated = 2 * self.angles.len();
                for (k, &theta) in self.angles.iter().enumerate() {
                    let (sin, cos) = (pos * theta).sin_cos();
                    let (a, b) = (y[2 * k], y[2 * k + 1]);
                    out[2 * k] = (a * cos - b * sin) as f32;
                    out[2 * k + 1] = (b * cos + a * sin) as f32;
                }
                for j in rotated..self.d {
                    out[j] = y[j] as f32;
                }
            }
            LrpeCore::Permutation => {
                for j in 0..self.d {
                    out[j] = y[self.perm_power(s, j)] as f32;
                }
            }
            LrpeCore::Complex => {
                let d = self.d;
                for j in 0..d {
                    let (sin, cos) = (pos * self.angles[j]).sin_cos();
                    out[j] = (y[j] * cos) as f32;
                    out[d + j] = (y[j] * sin) as f32;
                }
            }
        }
    }
}

/// Odd-even P as a gather index (LRPE Eq. 74, as fairseq-evo `Urpe.odd_even_permutation`):
/// `y[2k] = x[k]`, `y[2k+1] = x[h + k]` with `h = ceil(d/2)`. For d = 8: `[0,4,1,5,2,6,3,7]`.
/// It is a permutation for every d: even outputs take `x[0..h]`, odd outputs take `x[h..d]`
/// (there are `floor(d/2) = d − h` odd positions).
pub fn odd_even_index(j: usize, d: usize) -> usize {
    let h = d.div_ceil(2);
    if j % 2 == 1 {
        h + j / 2
    } else {
        j / 2
    }
}

/// Cycles of a permutation given as a gather table (`π(j) = perm[j]`): every cycle is listed as
/// `[j, π(j), π²(j), …]` starting from its smallest element, in order of that element; also
/// returns, for each j, (cycle index, position of j in its cycle).
fn cycle_decomposition(perm: &[usize]) -> (Vec<Vec<usize>>, Vec<(usize, usize)>) {
    let d = perm.len();
    let mut cycles: Vec<Vec<usize>> = Vec::new();
    let mut pos = vec![(usize::MAX, 0usize); d];
    for start in 0..d {
        if pos[start].0 != usize::MAX {
            continue;
        }
        let c = cycles.len();
        let mut cycle = Vec::new();
        let mut j = start;
        loop {
            pos[j] = (c, cycle.len());
            cycle.push(j);
            j = perm[j];
            if j == start {
                break;
            }
        }
        cycles.push(cycle);
    }
    (cycles, pos)
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_normal;
    use crate::rotary::rope_rotate;
    use proptest::prelude::*;

    const CORES: [LrpeCore; 4] =
        [LrpeCore::Rotation, LrpeCore::Mixed, LrpeCore::Permutation, LrpeCore::Complex];
    const PS: [LrpeP; 3] = [LrpeP::Identity, LrpeP::Householder, LrpeP::OddEven];

    /// Build an Lrpe with reproducible learned θ (when `learned`) and Householder v.
    fn build(core: LrpeCore, p: LrpeP, d: usize, learned: bool, seed: u64) -> Lrpe {
        let theta = learned.then(|| seeded_normal(Lrpe::n_angles(core, d), seed ^ 0xA5A5));
        let v = (p == LrpeP::Householder).then(|| seeded_normal(d, seed ^ 0x5A5A));
        Lrpe::new(core, p, d, theta.as_deref(), v.as_deref(), seed).expect("valid lrpe")
    }

    fn tf(l: &Lrpe, s: usize, x: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0; l.out_dim()];
        l.apply(s, x, &mut out);
        out
    }

    fn dot(a: &[f32], b: &[f32]) -> f64 {
        a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
    }

    fn norm(a: &[f32]) -> f64 {
        dot(a, a).sqrt()
    }

    /// Every core × P × {learned, fixed θ}.
    fn all_combos() -> Vec<(LrpeCore, LrpeP, bool)> {
        let mut v = Vec::new();
        for core in CORES {
            for p in PS {
                for learned in [true, false] {
                    v.push((core, p, learned));
                }
            }
        }
        v
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// LRPE §3.2 (Def. 3.1, Prop. 3.2, Eqs. 13–14): ⟨T_s q, T_t k⟩ depends only on t − s,
        /// for every core × P × θ combination, including large positions (f64 angles).
        #[test]
        fn score_is_shift_invariant(
            d in 2usize..=20,
            s in 0usize..4000,
            t in 0usize..4000,
            c in 0usize..1_000_000,
            seed in any::<u64>(),
            q in prop::collection::vec(-2.0f32..2.0, 20),
            k in prop::collection::vec(-2.0f32..2.0, 20),
        ) {
            let (q, k) = (&q[..d], &k[..d]);
            let scale = norm(q) * norm(k) + 1e-12;
            for (core, p, learned) in all_combos() {
                let l = build(core, p, d, learned, seed);
                let a = dot(&tf(&l, s, q), &tf(&l, t, k));
                let b = dot(&tf(&l, s + c, q), &tf(&l, t + c, k));
                prop_assert!(
                    (a - b).abs() <= 1e-5 * scale,
                    "{core:?}/{p:?}/learned={learned} d={d}: score({s},{t}) = {a} vs shifted by {c}: {b}"
                );
            }
        }

        /// LRPE Prop. 3.2 (every W_s unitary): ‖T_s x‖ = ‖x‖ for rotation, mixed and
        /// permutation; complex: ‖T_s x‖² = Σ (Px)_j² (cos² + sin²) = ‖Px‖² = ‖x‖².
        #[test]
        fn transform_preserves_norm(
            d in 2usize..=20,
            s in 0usize..100_000,
            seed in any::<u64>(),
            x in prop::collection::vec(-3.0f32..3.0, 20),
        ) {
            let x = &x[..d];
            for (core, p, learned) in all_combos() {
                let l = build(core, p, d, learned, seed);
                let (n_in, n_out) = (norm(x), norm(&tf(&l, s, x)));
                prop_assert!((n_in - n_out).abs() <= 1e-5 * (n_in + 1e-12),
                    "{core:?}/{p:?}: ‖x‖ = {n_in}, ‖T_s x‖ = {n_out}");
            }
        }

        /// LRPE Eq. 16 (W_0 = I): at s = t the score is (Pq)·(Pk) = q·k.
        #[test]
        fn same_position_score_is_content_only(
            d in 2usize..=20,
            s in 0usize..100_000,
            seed in any::<u64>(),
            q in prop::collection::vec(-2.0f32..2.0, 20),
            k in prop::collection::vec(-2.0f32..2.0, 20),
        ) {
            let (q, k) = (&q[..d], &k[..d]);
            let want = dot(q, k);
            let scale = norm(q) * norm(k) + 1e-12;
            for (core, p, learned) in all_combos() {
                let l = build(core, p, d, learned, seed);
                let got = dot(&tf(&l, s, q), &tf(&l, s, k));
                prop_assert!((got - want).abs() <= 1e-5 * scale,
                    "{core:?}/{p:?}: score(s,s) = {got}, q·k = {want}");
            }
        }
    }

    /// LRPE Prop. 3.3, Eq. 22: the complex core's score is Σ (Pq)_j (Pk)_j cos((t − s) α_j)
    /// (the closed form also checked in reference-implementations §6b).
    #[test]
    fn complex_core_matches_closed_form() {
        let d = 9;
        let l = build(LrpeCore::Complex, LrpeP::Identity, d, true, 3);
        let q = seeded_normal(d, 10);
        let k = seeded_normal(d, 11);
        let (s, tt) = (5usize, 2usize);
        let got = dot(&tf(&l, s, &q), &tf(&l, tt, &k));
        let want: f64 =
            (0..d).map(|j| q[j] as f64 * k[j] as f64 * ((tt as f64 - s as f64) * l.angles()[j]).cos()).sum();
        assert!((got - want).abs() < 1e-5, "{got} vs {want}");
        assert_eq!(l.out_dim(), 2 * d);
    }

    /// LRPE App. D.1 (Type 2 with P = I and fixed α is RoPE): rotation core,
    /// P = identity, fixed θ equals `rope_rotate` with base 10000 (odd d: last channel passes).
    #[test]
    fn rotation_identity_fixed_equals_rope() {
        for d in [2usize, 7, 8, 64] {
            let l = build(LrpeCore::Rotation, LrpeP::Identity, d, false, 0);
            let x = seeded_normal(d, d as u64);
            for s in [0usize, 1, 17, 511, 123_456] {
                let mut want = x.clone();
                rope_rotate(&mut want, s, &crate::rotary::rope_inv_freqs(d, 10000.0, d, None));
                assert_eq!(tf(&l, s, &x), want, "d={d} s={s}");
            }
        }
    }

    /// LRPE Eq. 74: odd-even P combined with the adjacent-pair rotation is NeoX "rotate-half"
    /// (pairs (k, h + k)) followed by the interleave.
    #[test]
    fn odd_even_rotation_is_rotate_half() {
        let d = 8;
        let h = d / 2;
        let l = build(LrpeCore::Rotation, LrpeP::OddEven, d, false, 0);
        let x = seeded_normal(d, 1);
        let s = 7usize;
        let out = tf(&l, s, &x);
        for k in 0..h {
            let (sin, cos) = (s as f64 * inv_freq(10000.0, k, d)).sin_cos();
            let (a, b) = (x[k] as f64, x[h + k] as f64);
            assert!((out[2 * k] as f64 - (a * cos - b * sin)).abs() < 1e-6);
            assert!((out[2 * k + 1] as f64 - (b * cos + a * sin)).abs() < 1e-6);
        }
    }

    /// LRPE Eq. 74 (fairseq-evo gather): d = 8 → [0,4,1,5,2,6,3,7]; a permutation for every d,
    /// odd d included.
    #[test]
    fn odd_even_is_a_permutation() {
        let idx: Vec<usize> = (0..8).map(|j| odd_even_index(j, 8)).collect();
        assert_eq!(idx, [0, 4, 1, 5, 2, 6, 3, 7]);
        let idx: Vec<usize> = (0..5).map(|j| odd_even_index(j, 5)).collect();
        assert_eq!(idx, [0, 3, 1, 4, 2]);
        for d in 1..70 {
            let mut seen = vec![false; d];
            for j in 0..d {
                let i = odd_even_index(j, d);
                assert!(i < d && !seen[i], "d={d}");
                seen[i] = true;
            }
        }
    }

    /// LRPE Prop. 3.4 (fairseq-evo `urpe.py` `mix_rope`): mixed rotates the first
    /// e = round_up_even(d / 2) channels of P x and passes the rest through.
    #[test]
    fn mixed_core_rotates_first_block_only() {
        assert_eq!([2, 3, 4, 5, 6, 7, 64].map(mixed_rotated_width), [2, 2, 2, 2, 4, 4, 32]);
        assert_eq!(Lrpe::n_angles(LrpeCore::Mixed, 64), 16);
        assert_eq!(Lrpe::n_angles(LrpeCore::Rotation, 7), 3);
        assert_eq!(Lrpe::n_angles(LrpeCore::Complex, 7), 7);
        assert_eq!(Lrpe::n_angles(LrpeCore::Permutation, 7), 0);
        let d = 10;
        let l = build(LrpeCore::Mixed, LrpeP::Identity, d, false, 0);
        let e = mixed_rotated_width(d);
        // Fixed θ for mixed uses exponent −2k/e.
        assert_eq!(l.angles()[1], 10000f64.powf(-2.0 / e as f64));
        let x = seeded_normal(d, 2);
        let out = tf(&l, 37, &x);
        assert_eq!(&out[e..], &x[e..]);
        assert_ne!(&out[..e], &x[..e]);
    }

    /// Brute force: π^s by applying the gather s times.
    fn brute_power(perm: &[usize], s: usize) -> Vec<usize> {
        let mut cur: Vec<usize> = (0..perm.len()).collect();
        for _ in 0..s {
            cur = cur.iter().map(|&j| perm[j]).collect();
        }
        cur
    }

    /// LRPE Prop. 3.5, Eq. 24: y[j] = x[π^s(j)] via cycles equals repeated
    /// application of π, and the period is the lcm of the cycle lengths (the order of π).
    #[test]
    fn permutation_core_power_and_period() {
        for d in [1usize, 2, 5, 16, 33, 64] {
            for seed in [0u64, 1, 7, 12345] {
                let l = build(LrpeCore::Permutation, LrpeP::Identity, d, false, seed);
                let perm = l.permutation().expect("permutation core").to_vec();
                assert_eq!(perm, seeded_permutation(d, seed));
                for s in [0usize, 1, 2, 3, 10, 97] {
                    let want = brute_power(&perm, s);
                    let got: Vec<usize> = (0..d).map(|j| l.perm_power(s, j)).collect();
                    assert_eq!(got, want, "d={d} seed={seed} s={s}");
                }
                // Order of π by brute force: smallest p > 0 with π^p = id.
                let id: Vec<usize> = (0..d).collect();
                let mut cur: Vec<usize> = perm.clone();
                let mut order = 1u128;
                while cur != id {
                    cur = cur.iter().map(|&j| perm[j]).collect();
                    order += 1;
                }
                assert_eq!(l.permutation_period(), Some(order), "d={d} seed={seed}");
                // With distinct entries, T_s x = x exactly iff the period divides s.
                let x: Vec<f32> = (0..d).map(|j| j as f32 + 1.0).collect();
                let period = order as usize;
                assert_eq!(tf(&l, period, &x), x);
                assert_eq!(tf(&l, 3 * period + 5, &x), tf(&l, 5, &x));
                for s in 1..period.min(5000) {
                    assert_ne!(tf(&l, s, &x), x, "d={d} seed={seed} s={s}");
                }
            }
        }
        let l = build(LrpeCore::Rotation, LrpeP::Identity, 8, false, 0);
        assert_eq!(l.permutation_period(), None);
    }

    /// LRPE Eq. 73: the Householder vector is normalised (‖v̂‖ = 1) and P is a reflection
    /// (P v̂ = −v̂, so the identity core gives T_0 v̂ = −v̂).
    #[test]
    fn householder_is_normalised_reflection() {
        let d = 6;
        let v: Vec<f32> = vec![3.0, 0.0, 4.0, 0.0, 0.0, 0.0];
        let l = Lrpe::new(LrpeCore::Rotation, LrpeP::Householder, d, None, Some(&v), 0).expect("valid");
        let vh = l.householder_v().expect("householder");
        assert!((vh.iter().map(|a| a * a).sum::<f64>() - 1.0).abs() < 1e-15);
        let out = tf(&l, 0, &v);
        for j in 0..d {
            assert!((out[j] + v[j]).abs() < 1e-6);
        }
    }

    /// Constructor contract: wrong θ length, non-finite values, missing / stray / zero Householder
    /// vector and too-small d are errors, never panics.
    #[test]
    fn constructor_rejects_bad_inputs() {
        use LrpeCore::*;
        use LrpeP::*;
        let v = vec![1.0f32; 8];
        assert!(Lrpe::new(Rotation, Identity, 8, Some(&[1.0; 3]), None, 0).is_err());
        assert!(Lrpe::new(Rotation, Identity, 8, Some(&[1.0; 4]), None, 0).is_ok());
        assert!(Lrpe::new(Complex, Identity, 8, Some(&[1.0; 4]), None, 0).is_err());
        assert!(Lrpe::new(Permutation, Identity, 8, Some(&[]), None, 0).is_ok());
        assert!(Lrpe::new(Permutation, Identity, 8, Some(&[1.0]), None, 0).is_err());
        assert!(Lrpe::new(Rotation, Identity, 4, Some(&[1.0, f32::NAN]), None, 0).is_err());
        assert!(Lrpe::new(Rotation, Householder, 8, None, None, 0).is_err());
        assert!(Lrpe::new(Rotation, Householder, 8, None, Some(&[0.0; 8]), 0).is_err());
        assert!(Lrpe::new(Rotation, Householder, 8, None, Some(&v[..7]), 0).is_err());
        assert!(Lrpe::new(Rotation, Householder, 8, None, Some(&[f32::INFINITY; 8]), 0).is_err());
        assert!(Lrpe::new(Rotation, Identity, 8, None, Some(&v), 0).is_err());
        assert!(Lrpe::new(Rotation, Householder, 8, None, Some(&v), 0).is_ok());
        assert!(Lrpe::new(Rotation, Identity, 1, None, None, 0).is_err());
        assert!(Lrpe::new(Mixed, Identity, 1, None, None, 0).is_err());
        assert!(Lrpe::new(Complex, Identity, 0, None, None, 0).is_err());
        assert!(Lrpe::new(Permutation, OddEven, 1, None, None, 0).is_ok());
        assert!(Lrpe::new(Complex, OddEven, 1, None, None, 0).is_ok());
    }
}
