//! Rotary position embedding (Su et al., "RoFormer", §3.2, Eq. 34): adjacent channel pairs rotated by
//! `s·base^(−2k/d)`. Angles, cos and sin are evaluated in f64 (WGSL/f32 sin and cos are only
//! trustworthy on [−π, π], and `s·θ_0` reaches thousands of radians); shared by `rope`, `retnet`, the
//! fixed LRPE angles and the GPU's uploaded tables.

use crate::variants::rope::RopeScaling;

/// Inverse frequency `base^(−2k/width)` in f64, shared by RoPE and the fixed LRPE angles so that the
/// rotation core with P = I and fixed θ is bit-identical to [`rope_rotate`] (LRPE App. D.1:
/// Type 2 with P = I and fixed θ is RoPE).
pub fn inv_freq(base: f64, k: usize, width: usize) -> f64 {
    base.powf(-2.0 * k as f64 / width as f64)
}

/// Per-pair inverse frequencies of a RoPE head of width `head_dim`: `base^(−2k/rotary_dim)` for the
/// pairs k < rotary_dim/2, then 0 for the remaining pairs, whose channels pass through unrotated
/// (GPT-NeoX's partial rotary, `rotary_pct`), each frequency rescaled by `scaling` (context
/// extension). Every backend builds its rotation from this one vector.
pub fn rope_inv_freqs(
    head_dim: usize,
    base: f64,
    rotary_dim: usize,
    scaling: Option<&RopeScaling>,
) -> Vec<f64> {
    (0..head_dim / 2)
        .map(|k| match k < rotary_dim / 2 {
            true => scaling
                .map_or_else(|| inv_freq(base, k, rotary_dim), |s| s.apply(inv_freq(base, k, rotary_dim))),
            false => 0.0,
        })
        .collect()
}

/// RoPE angles for position `s`: `(cos, sin)` of `s·inv_freq[k]` for every pair k, computed in f64
/// and rounded to f32 (design.md: tables are built on the CPU in f64 and uploaded). These are the
/// tables the GPU backend and the trainer use.
pub fn rope_cos_sin(s: usize, inv_freq: &[f64]) -> (Vec<f32>, Vec<f32>) {
    inv_freq
        .iter()
        .map(|f| {
            let (sin, cos) = (s as f64 * f).sin_cos();
            (cos as f32, sin as f32)
        })
        .unzip()
}

/// Rotate `x` (one head) in place by RoPE at position `s`: adjacent pairs (2k, 2k+1) rotated by
/// `s·inv_freq[k]`, `x[2k] ← x[2k] cos − x[2k+1] sin`, `x[2k+1] ← x[2k+1] cos + x[2k] sin`; channels
/// past the pairs of `inv_freq` (or of a frequency 0) pass through. Angles, cos, sin and the rotation
/// are evaluated in f64 (WGSL/f32 sin and cos are only accurate on [−π, π]). With
/// `rope_inv_freqs(d, 10000, d, None)` this is the LRPE rotation core with P = I and fixed θ (LRPE
/// App. D.1).
pub fn rope_rotate(x: &mut [f32], s: usize, inv_freq: &[f64]) {
    let pos = s as f64;
    for (k, f) in inv_freq.iter().enumerate().take(x.len() / 2) {
        let (sin, cos) = (pos * f).sin_cos();
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
        let freqs = rope_inv_freqs(d, 10000.0, d, None);
        for s in [0usize, 3, 500] {
            let (cos, sin) = rope_cos_sin(s, &freqs);
            assert_eq!(cos.len(), d / 2);
            let mut want = x.clone();
            rope_rotate(&mut want, s, &freqs);
            for k in 0..d / 2 {
                let a = x[2 * k] * cos[k] - x[2 * k + 1] * sin[k];
                let b = x[2 * k + 1] * cos[k] + x[2 * k] * sin[k];
                assert!((a - want[2 * k]).abs() < 1e-5 && (b - want[2 * k + 1]).abs() < 1e-5);
            }
        }
        // Position 0 is the identity; k = 0 rotates by exactly s radians.
        let freqs = rope_inv_freqs(8, 10000.0, 8, None);
        let (cos, sin) = rope_cos_sin(0, &freqs);
        assert!(cos.iter().all(|&c| c == 1.0) && sin.iter().all(|&s| s == 0.0));
        let (cos, _) = rope_cos_sin(3, &freqs);
        assert_eq!(cos[0], (3.0f64).cos() as f32);
    }

    /// Partial rotary (NeoX `rotary_pct`): the first `rotary_dim` channels rotate exactly as a full
    /// RoPE head of that width, the rest pass through bit for bit.
    #[test]
    fn partial_rotary_rotates_only_the_leading_channels() {
        let x = seeded_normal(16, 9);
        let mut part = x.clone();
        rope_rotate(&mut part, 37, &rope_inv_freqs(16, 10000.0, 6, None));
        let mut full = x[..6].to_vec();
        rope_rotate(&mut full, 37, &rope_inv_freqs(6, 10000.0, 6, None));
        assert_eq!(&part[..6], &full[..]);
        assert_eq!(&part[6..], &x[6..]);
    }
}
