//! Every kernel at every level this machine runs equals its scalar reference bit for bit.

use super::*;
use crate::rng::seeded_normal;
use half::{bf16, f16};
use proptest::prelude::*;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// `values` stored as `format` (0 = f32, 1 = f16, 2 = bf16): the stored bits and the values they
/// widen to.
fn stored(values: &[f32], format: u8) -> (Vec<f32>, Vec<u16>) {
    match format {
        1 => values.iter().map(|&v| f16::from_f32(v)).map(|h| (h.to_f32(), h.to_bits())).unzip(),
        2 => values.iter().map(|&v| bf16::from_f32(v)).map(|h| (h.to_f32(), h.to_bits())).unzip(),
        _ => (values.to_vec(), Vec::new()),
    }
}

fn as_stored<'a>(widened: &'a [f32], bits: &'a [u16], format: u8) -> Stored<'a> {
    match format {
        1 => Stored::F16(bits),
        2 => Stored::Bf16(bits),
        _ => Stored::F32(widened),
    }
}

proptest! {
    /// The tiled matmul (prefill), the one-row matvec (decode) and the reference agree on every
    /// output, for F32, F16 and BF16 storage; lengths and row counts are not multiples of the
    /// chunk or the tile.
    #[test]
    fn matmul_equals_the_reference(
        n in 1usize..80, out in 1usize..24, rows in 1usize..40, seed in 0u64..1000, format in 0u8..3,
    ) {
        let x = seeded_normal(rows * n, seed + 1);
        let (w, wbits) = stored(&seeded_normal(out * n, seed), format);
        let mut expect = vec![0.0; rows * out];
        reference::matmul_by(&w, n, &x, &mut expect, |v| v);
        for level in Level::available() {
            let mut y = vec![f32::NAN; rows * out];
            with_level(level, || matmul(as_stored(&w, &wbits, format), n, &x, &mut y));
            prop_assert_eq!(bits(&y), bits(&expect), "{:?}", level);
            for r in 0..rows {
                let mut y1 = vec![f32::NAN; out];
                let xr = &x[r * n..(r + 1) * n];
                with_level(level, || matmul(as_stored(&w, &wbits, format), n, xr, &mut y1));
                prop_assert_eq!(bits(&y1), bits(&expect[r * out..(r + 1) * out]), "{:?} row {}", level, r);
            }
        }
    }

    /// Attention rows: dots of a query with strided key rows, and the weighted sum of value rows
    /// (with zero weights skipped), as the reference loops of `dot` and `axpy`.
    #[test]
    fn attention_rows_equal_the_reference(
        n in 1usize..80, extra in 0usize..9, keys in 1usize..40, seed in 0u64..1000, zeros in 0usize..4,
    ) {
        let stride = n + extra;
        let q = seeded_normal(n, seed);
        let m = seeded_normal(keys * stride, seed + 1);
        let mut p = seeded_normal(keys, seed + 2);
        p.iter_mut().step_by(zeros + 1).skip(1).for_each(|v| *v = 0.0);
        let y0 = seeded_normal(n, seed + 3);
        let mut dots = vec![0.0; keys];
        reference::dot_rows(&q, &m, stride, &mut dots);
        let mut sum = y0.clone();
        reference::weighted_rows(&p, &m, stride, &mut sum);
        let mut ax = y0.clone();
        reference::axpy(p[0], &q, &mut ax);
        for level in Level::available() {
            let mut d = vec![f32::NAN; keys];
            with_level(level, || dot_rows(&q, &m, stride, &mut d));
            prop_assert_eq!(bits(&d), bits(&dots), "{:?}", level);
            let d1 = with_level(level, || dot(&q, &m[..n]));
            prop_assert_eq!(d1.to_bits(), reference::dot(&q, &m[..n]).to_bits());
            let mut s = y0.clone();
            with_level(level, || weighted_rows(&p, &m, stride, &mut s));
            prop_assert_eq!(bits(&s), bits(&sum), "{:?}", level);
            let mut a = y0.clone();
            with_level(level, || axpy(p[0], &q, &mut a));
            prop_assert_eq!(bits(&a), bits(&ax), "{:?}", level);
        }
    }
}

/// Widening equals `half`'s conversion for every f16 and bf16 bit pattern but NaNs (zeros,
/// subnormals and infinities included), at every level and offset within a chunk; NaNs stay NaNs
/// (with their payload, not always quieted: weights are checked finite on load).
#[test]
fn widening_is_exact_for_every_half() {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let f16s: Vec<f32> = all.iter().map(|&b| f16::from_bits(b).to_f32()).collect();
    let bf16s: Vec<f32> = all.iter().map(|&b| bf16::from_bits(b).to_f32()).collect();
    for level in Level::available() {
        for (expect, src) in [(&f16s, Stored::F16(&all)), (&bf16s, Stored::Bf16(&all))] {
            for skip in 0..8 {
                let src = match src {
                    Stored::F16(s) => Stored::F16(&s[skip..]),
                    Stored::Bf16(s) => Stored::Bf16(&s[skip..]),
                    Stored::F32(s) => Stored::F32(&s[skip..]),
                };
                let mut out = vec![0.0f32; all.len() - skip];
                with_level(level, || widen(src, &mut out));
                for (i, (o, e)) in out.iter().zip(&expect[skip..]).enumerate() {
                    let same = o.to_bits() == e.to_bits() || (o.is_nan() && e.is_nan());
                    assert!(same, "{level:?}, {src:?}: bits {:#06x} gave {o:e}, not {e:e}", all[skip + i]);
                }
            }
        }
    }
}

/// Signed zeros and the `+ tail` of the reference: `-0·1` sums to `+0` in every path.
#[test]
fn signed_zeros_follow_the_reference() {
    for n in [1, 8, 9, 16] {
        let (a, b) = (vec![-0.0f32; n], vec![1.0f32; n]);
        for level in Level::available() {
            assert_eq!(
                with_level(level, || dot(&a, &b)).to_bits(),
                reference::dot(&a, &b).to_bits(),
                "{level:?}"
            );
        }
    }
}

/// The matrix products read every finite f16 exactly (their loads skip the handling of infinities
/// and NaNs): a matrix of all of them, by one row (decode) and by five (prefill); nine times over,
/// it is large enough (1.1 MB) for the decode step's streamed path too.
#[test]
fn matmul_reads_every_finite_f16() {
    let finite = (0..=u16::MAX).filter(|&b| f16::from_bits(b).is_finite());
    let w: Vec<u16> = finite.clone().chain((0..8).flat_map(|_| finite.clone())).collect();
    assert!(w.len() * 2 > super::generic::STREAMED_BYTES);
    let n = 16;
    let x = seeded_normal(5 * n, 3);
    for rows in [1, 5] {
        let x = &x[..rows * n];
        let mut expect = vec![0.0; rows * w.len() / n];
        reference::matmul_by(&w, n, x, &mut expect, |b| f16::from_bits(b).to_f32());
        for level in Level::available() {
            let mut y = vec![f32::NAN; expect.len()];
            with_level(level, || matmul(Stored::F16(&w), n, x, &mut y));
            assert_eq!(bits(&y), bits(&expect), "{level:?}, {rows} rows");
        }
    }
}

/// Cephes' `exp` is within 1.5 ulp of e^x (computed in f64) on a dense sweep of its range, 0 below
/// `EXP_LO` (where e^x is subnormal), exactly 1 at 0, and increasing.
#[test]
fn exp_is_within_one_and_a_half_ulp() {
    let ulp = |v: f32| f32::from_bits(v.to_bits() + 1) - v;
    let mut worst = 0.0f64;
    let mut last = 0.0f32;
    let steps = 2_000_000;
    for k in 0..=steps {
        let x = reference::EXP_LO + (reference::EXP_HI - reference::EXP_LO) * k as f32 / steps as f32;
        let (got, exact) = (reference::exp(x), f64::from(x).exp());
        worst = worst.max((f64::from(got) - exact).abs() / f64::from(ulp(exact as f32)));
        assert!(got >= last, "exp({x}) = {got} < exp of a smaller argument {last}");
        last = got;
    }
    assert!(worst <= 1.5, "worst error {worst} ulp");
    assert_eq!(reference::exp(0.0), 1.0);
    assert_eq!(reference::exp(-0.0), 1.0);
    assert_eq!(reference::exp(reference::EXP_LO - 1e-3), 0.0);
    assert_eq!(reference::exp(-1e30), 0.0);
    assert!(reference::exp(1e30).is_finite());
    eprintln!("exp: worst error {worst:.3} ulp");
}

proptest! {
    /// `exp` and `softmax` at every level equal their references bit for bit, on lengths that are
    /// not multiples of eight and values from far below `EXP_LO` to above `EXP_HI`.
    #[test]
    fn exp_and_softmax_equal_the_reference(n in 0usize..70, scale in 0.1f32..200.0, seed in 0u64..1000) {
        let x: Vec<f32> = seeded_normal(n, seed).iter().map(|v| v * scale).collect();
        let exps: Vec<f32> = x.iter().map(|&v| reference::exp(v)).collect();
        let mut soft = x.clone();
        reference::softmax(&mut soft);
        if n > 0 {
            let total: f32 = soft.iter().sum();
            prop_assert!((total - 1.0).abs() < 1e-5, "softmax sums to {}", total);
        }
        for level in Level::available() {
            let mut e = x.clone();
            with_level(level, || exp_inplace(&mut e));
            prop_assert_eq!(bits(&e), bits(&exps), "{:?}", level);
            let mut s = x.clone();
            with_level(level, || softmax(&mut s));
            prop_assert_eq!(bits(&s), bits(&soft), "{:?}", level);
        }
    }
}

proptest! {
    /// The SwiGLU gate at every level equals its reference bit for bit, and SiLU is within 4 ulp of
    /// `x·σ(x)` computed in f64 (away from its zero crossing at 0, where ulps shrink to nothing).
    #[test]
    fn silu_mul_equals_the_reference(n in 0usize..70, scale in 0.1f32..60.0, seed in 0u64..1000) {
        let g: Vec<f32> = seeded_normal(n, seed).iter().map(|v| v * scale).collect();
        let u0 = seeded_normal(n, seed + 1);
        let mut expect = u0.clone();
        reference::silu_mul(&mut expect, &g);
        for level in Level::available() {
            let mut u = u0.clone();
            with_level(level, || silu_mul(&mut u, &g));
            prop_assert_eq!(bits(&u), bits(&expect), "{:?}", level);
        }
        for &x in g.iter().filter(|x| x.abs() > 1e-3) {
            let exact = f64::from(x) / (1.0 + (-f64::from(x)).exp());
            let ulp = f64::from((exact as f32).abs().next_up() - (exact as f32).abs());
            let abs = (f64::from(reference::silu(x)) - exact).abs();
            // Below −EXP_HI, e^(−x) stops at e^EXP_HI: x / 2.4·10³⁸ instead of about 0.
            prop_assert!(abs / ulp <= 4.0 || abs < 1e-35, "silu({}) off by {} ulp", x, abs / ulp);
        }
    }
}

proptest! {
    /// Several queries at once equal the reference (dot_rows and weighted_rows row by row) bit for
    /// bit, with weights zero for some rows only, for all rows, and none; head widths that are not
    /// multiples of 8 or 16; row strides wider than a row.
    #[test]
    fn attention_blocks_equal_the_reference(
        dh in 1usize..70, extra in 0usize..9, keys in 1usize..30, rows in 1usize..6, seed in 0u64..1000,
        zeros in 0usize..4,
    ) {
        let stride = dh + extra;
        let q = seeded_normal(rows * stride, seed);
        let m = seeded_normal(keys * stride, seed + 1);
        let mut p = seeded_normal(rows * keys, seed + 2);
        // Some keys zero for every row, some for one row only.
        for j in (0..keys).step_by(zeros + 2) {
            (0..rows).for_each(|b| p[b * keys + j] = 0.0);
        }
        p.iter_mut().step_by(zeros + 3).for_each(|v| *v = 0.0);
        let y0 = seeded_normal(rows * stride, seed + 3);
        let mut dots = vec![0.0; rows * keys];
        reference::dot_rows_block(&q, stride, dh, &m, stride, keys, &mut dots);
        let mut sums = y0.clone();
        reference::weighted_rows_block(&p, keys, &m, stride, &mut sums, stride, dh);
        for level in Level::available() {
            let mut d = vec![f32::NAN; rows * keys];
            with_level(level, || dot_rows_block(&q, stride, dh, &m, stride, keys, &mut d));
            prop_assert_eq!(bits(&d), bits(&dots), "{:?}", level);
            let mut s = y0.clone();
            with_level(level, || weighted_rows_block(&p, keys, &m, stride, &mut s, stride, dh));
            prop_assert_eq!(bits(&s), bits(&sums), "{:?}", level);
        }
    }
}
