//! Rotary position embedding (Su et al., "RoFormer", §3.2, Eq. 34): adjacent channel pairs rotated by
//! `s·base^(−2k/d)`. Angles, cos and sin are evaluated in f64 (WGSL/f32 sin and cos are only
//! trustworthy on [−π, π], and `s·θ_0` reaches thousands of radians); shared by `rope`, `retnet`, the
//! fixed LRPE angles and the GPU's uploaded tables.

/// Inverse frequency `base^(−2k/width)` in f64, shared by RoPE and the fixed LRPE angles so that the
/// rotation core with P = I and fixed θ is bit-identical to [`rope_rotate`] (LRPE App. D.1:
/// Type 2 with P = I and fixed θ is RoPE).
pub fn inv_freq(base: f64, k: usize, width: usize) -> f64 {
    base.powf(-2.0 * k as f64 / width as f64)
}

/// RoPE angles for position `s` of a head of width `d`: `(cos, sin)` of `s·base^(−2k/d)` for
/// k < d/2, computed in f64 and rounded to f32 (design.md: tables are built on the CPU in f64 and
/// uploaded). These are the tables the GPU backend uploads for `rope` and `retnet`.
pub fn rope_cos_sin(s: usize, d: usize, base: f64) -> (Vec<f32>, Vec<f32>) {
    (0..d / 2)
        .map(|k| {
            let (sin, cos) = (s as f64 * inv_freq(base, k, d)).sin_cos();
            (cos as f32, sin as f32)
        })
        .unzip()
}

/// Rotate `x` (one head, width d = `x.len()`) in place by RoPE at position `s`: adjacent pairs
/// (2k, 2k+1) rotated by `s·base^(−2k/d)`, `x[2k] ← x[2k] cos − x[2k+1] sin`,
/// `x[2k+1] ← x[2k+1] cos + x[2k] sin`; with odd d the last channel passes through. Angles, cos,
/// sin and the rotation are evaluated in f64 (WGSL/f32 sin and cos are only accurate on [−π, π]).
/// This is the LRPE rotation core with P = I and fixed θ for base 10000 (LRPE App. D.1).
pub fn rope_rotate(x: &mut [f32], s: usize, base: f64) {
    let d = x.len();
    let pos = s as f64;
    for k in 0..d / 2 {
        let (sin, cos) = (pos * inv_freq(base, k, d)).sin_cos();
        let (a, b) = (x[2 * k] as f64, x[2 * k + 1] as f64);
        x[2 * k] = (a * cos - b * sin) as f32;
        x[2 * k + 1] = (b * cos + a * sin) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded_normal;

    /// rope_cos_sin is the table form of rope_rotate (design.md: f64 tables uploaded as f32).
    #[test]
    fn rope_tables_agree_with_rotate() {
        let d = 16;
        let x = seeded_normal(d, 5);
        for s in [0usize, 3, 500] {
            let (cos, sin) = rope_cos_sin(s, d, 10000.0);
            assert_eq!(cos.len(), d / 2);
            let mut want = x.clone();
            rope_rotate(&mut want, s, 10000.0);
            for k in 0..d / 2 {
                let a = x[2 * k] * cos[k] - x[2 * k + 1] * sin[k];
                let b = x[2 * k + 1] * cos[k] + x[2 * k] * sin[k];
                assert!((a - want[2 * k]).abs() < 1e-5 && (b - want[2 * k + 1]).abs() < 1e-5);
            }
        }
        // Position 0 is the identity; k = 0 rotates by exactly s radians.
        let (cos, sin) = rope_cos_sin(0, 8, 10000.0);
        assert!(cos.iter().all(|&c| c == 1.0) && sin.iter().all(|&s| s == 0.0));
        let (cos, _) = rope_cos_sin(3, 8, 10000.0);
        assert_eq!(cos[0], (3.0f64).cos() as f32);
    }
}
