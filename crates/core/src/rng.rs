//! Seeded generators behind every random draw of attnlab (weights, LRPE permutation and Householder
//! vector): `attnlab init`, the trainer and the GPU backend reproduce them bit for bit.

/// SplitMix64 (Steele, Lea & Flood 2014; Vigna's reference `splitmix64.c`), the generator behind
/// every seeded draw in attnlab. With wrapping u64 arithmetic:
///
/// ```text
/// state = state + 0x9E3779B97F4A7C15
/// z = state
/// z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
/// z = (z ^ (z >> 27)) * 0x94D049BB133111EB
/// return z ^ (z >> 31)
/// ```
///
/// The initial state is the seed itself. Seed 0 yields `0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, …`.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// Generator whose state starts at `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// Next 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform f64 in [0, 1): `(next_u64() >> 11) · 2⁻⁵³`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Deterministic random permutation of `0..d` from a seed (LRPE App. D.1 asks for a random,
/// deterministic permutation; fairseq-evo `urpe.py` uses an unseeded `randperm`; we fix the
/// algorithm so trainer, CPU and GPU agree).
///
/// Algorithm, exactly: `rng = SplitMix64::new(seed)`; `p = [0, 1, …, d−1]`; for `i = d−1` down to
/// `1`: `j = rng.next_u64() % (i + 1)` (u64 remainder; the modulo bias is < 2⁻⁵⁰ for d ≤ 4096 and is
/// part of the definition), swap `p[i]` and `p[j]`. Returns `p`, read as the gather `π(j) = p[j]`.
/// Example: d = 8, seed 0 → `[2, 5, 0, 3, 4, 6, 1, 7]`.
pub fn seeded_permutation(d: usize, seed: u64) -> Vec<usize> {
    let mut rng = SplitMix64::new(seed);
    let mut p: Vec<usize> = (0..d).collect();
    for i in (1..d).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        p.swap(i, j);
    }
    p
}

/// Deterministic N(0, 1) vector (for the Householder v of `attnlab init`; LRPE App. D.1, Eq. 73:
/// sampled from N(0, I), deterministic).
///
/// Algorithm, exactly (Box–Muller, all in f64, rounded to f32 at the end): `rng =
/// SplitMix64::new(seed)`; for each pair index i = 0, 1, …: `u1 = ((rng.next_u64() >> 11) + 1) · 2⁻⁵³`
/// (in (0, 1], so the log is finite), then `u2 = (rng.next_u64() >> 11) · 2⁻⁵³` (in [0, 1));
/// `r = sqrt(−2 ln u1)`, `φ = 2π u2`; `out[2i] = r cos φ`, `out[2i+1] = r sin φ`. An odd n drops the
/// final sine. (Use a different seed per layer; the same seed as [`seeded_permutation`] is harmless
/// but correlated.)
pub fn seeded_normal(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = SplitMix64::new(seed);
    let scale = 1.0 / (1u64 << 53) as f64;
    let mut out = Vec::with_capacity(n + 1);
    while out.len() < n {
        let u1 = ((rng.next_u64() >> 11) + 1) as f64 * scale;
        let u2 = (rng.next_u64() >> 11) as f64 * scale;
        let r = (-2.0 * u1.ln()).sqrt();
        let (sin, cos) = (2.0 * std::f64::consts::PI * u2).sin_cos();
        out.push((r * cos) as f32);
        out.push((r * sin) as f32);
    }
    out.truncate(n);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LRPE App. D.1 (deterministic permutation): the seeded permutation is a permutation,
    /// deterministic, seed-dependent, and pinned (the values come from an independent Python
    /// SplitMix64 + Fisher–Yates).
    #[test]
    fn seeded_permutation_is_deterministic_permutation() {
        let mut rng = SplitMix64::new(0);
        assert_eq!(
            [rng.next_u64(), rng.next_u64(), rng.next_u64()],
            [0xE220_A839_7B1D_CDAF, 0x6E78_9E6A_A1B9_65F4, 0x06C4_5D18_8009_454F]
        );
        assert_eq!(seeded_permutation(8, 0), [2, 5, 0, 3, 4, 6, 1, 7]);
        assert_eq!(seeded_permutation(10, 42), [0, 9, 5, 8, 6, 4, 7, 2, 1, 3]);
        assert!(seeded_permutation(0, 3).is_empty());
        for d in 0..100 {
            let p = seeded_permutation(d, d as u64 * 31);
            assert_eq!(p, seeded_permutation(d, d as u64 * 31));
            let mut sorted = p.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..d).collect::<Vec<_>>());
        }
        let perms: Vec<Vec<usize>> = (0..10).map(|s| seeded_permutation(64, s)).collect();
        for i in 0..perms.len() {
            for j in i + 1..perms.len() {
                assert_ne!(perms[i], perms[j]);
            }
        }
    }

    /// seeded_normal (Householder init, LRPE App. D.1, Eq. 73): deterministic, finite, ~N(0, 1).
    #[test]
    fn seeded_normal_is_deterministic_standard_normal() {
        let a = seeded_normal(20_001, 9);
        assert_eq!(a.len(), 20_001);
        assert_eq!(a, seeded_normal(20_001, 9));
        assert_eq!(&seeded_normal(7, 9)[..], &a[..7]);
        assert_ne!(seeded_normal(8, 10), seeded_normal(8, 9));
        assert!(a.iter().all(|v| v.is_finite()));
        let n = a.len() as f64;
        let mean = a.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = a.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.04, "var {var}");
    }
}
