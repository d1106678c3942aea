//! wasm32 SIMD128 lanes (two `v128` registers), compiled in with `-C target-feature=+simd128`
//! (`.cargo/config.toml`; every current browser runs it).

use super::lanes::{F32x8, Shape, F16_INF, F16_MASK, F16_SCALE};
use core::arch::wasm32::*;

/// Two SIMD128 registers: lanes 0–3 and 4–7.
#[derive(Clone, Copy)]
pub(super) struct Simd128(v128, v128);

/// Four finite f16 values in the top halves of 32-bit lanes, widened exactly (see
/// `lanes::F16_SCALE`).
#[inline(always)]
fn f16x4_finite(v: v128) -> v128 {
    f32x4_mul(v128_and(i32x4_shr(v, 3), u32x4_splat(F16_MASK)), f32x4_splat(F16_SCALE))
}

/// [`f16x4_finite`] for every f16: infinities and NaNs get the all-ones exponent.
#[inline(always)]
fn f16x4(v: v128) -> v128 {
    let f = f16x4_finite(v);
    let inf = v128_and(f32x4_ge(f32x4_abs(f), f32x4_splat(F16_INF)), u32x4_splat(0x7f80_0000));
    v128_or(f, inf)
}

/// Eight f16 values, each in the top half of a 32-bit lane (interleaved after zeros).
#[inline(always)]
fn f16_lanes(s: &[u16; 8]) -> (v128, v128) {
    let (h, z) = (load16(s, 0), u32x4_splat(0));
    (i16x8_shuffle::<0, 8, 1, 9, 2, 10, 3, 11>(z, h), i16x8_shuffle::<4, 12, 5, 13, 6, 14, 7, 15>(z, h))
}

/// `[x0+x1, x2+x3, y0+y1, y2+y3]`.
#[inline(always)]
fn hadd(x: v128, y: v128) -> v128 {
    f32x4_add(i32x4_shuffle::<0, 2, 4, 6>(x, y), i32x4_shuffle::<1, 3, 5, 7>(x, y))
}

/// The sixteen bytes at byte offset `bytes` of `s` (the check is on constant sizes: it folds away).
#[inline(always)]
fn load16<T>(s: &[T], bytes: usize) -> v128 {
    assert!(std::mem::size_of_val(s) >= bytes + 16);
    // SAFETY: the assertion keeps the 16 bytes at offset `bytes` inside `s`; v128 loads need no
    // alignment.
    unsafe { v128_load(s.as_ptr().cast::<u8>().add(bytes).cast()) }
}

impl F32x8 for Simd128 {
    const SHAPE: Shape = Shape::Narrow;
    #[inline(always)]
    fn zero() -> Self {
        Simd128(f32x4_splat(0.0), f32x4_splat(0.0))
    }
    #[inline(always)]
    fn splat(v: f32) -> Self {
        Simd128(f32x4_splat(v), f32x4_splat(v))
    }
    #[inline(always)]
    fn load(s: &[f32; 8]) -> Self {
        Simd128(load16(s, 0), load16(s, 16))
    }
    #[inline(always)]
    fn load_f16(s: &[u16; 8]) -> Self {
        let (lo, hi) = f16_lanes(s);
        Simd128(f16x4(lo), f16x4(hi))
    }
    #[inline(always)]
    fn load_f16_finite(s: &[u16; 8]) -> Self {
        let (lo, hi) = f16_lanes(s);
        Simd128(f16x4_finite(lo), f16x4_finite(hi))
    }
    #[inline(always)]
    fn load_bf16(s: &[u16; 8]) -> Self {
        // Each value's bits in the top half of an f32: that is its value.
        let (lo, hi) = f16_lanes(s);
        Simd128(lo, hi)
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        Simd128(f32x4_add(self.0, o.0), f32x4_add(self.1, o.1))
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        Simd128(f32x4_sub(self.0, o.0), f32x4_sub(self.1, o.1))
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        Simd128(f32x4_mul(self.0, o.0), f32x4_mul(self.1, o.1))
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        Simd128(f32x4_div(self.0, o.0), f32x4_div(self.1, o.1))
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        // The "pseudo" maximum `a < b ? b : a`: one instruction where f32x4_max also orders NaNs
        // and signed zeros.
        Simd128(f32x4_pmax(self.0, o.0), f32x4_pmax(self.1, o.1))
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        Simd128(f32x4_pmin(self.0, o.0), f32x4_pmin(self.1, o.1))
    }
    #[inline(always)]
    fn pow2i(self) -> Self {
        // The lanes hold integers, so the conversion is exact; `n + 127` shifted into the exponent
        // field is 2ⁿ.
        let p = |v: v128| i32x4_shl(i32x4_add(i32x4_trunc_sat_f32x4(v), i32x4_splat(127)), 23);
        Simd128(p(self.0), p(self.1))
    }
    #[inline(always)]
    fn zero_below(self, x: Self, lo: f32) -> Self {
        let lo = f32x4_splat(lo);
        Simd128(v128_andnot(self.0, f32x4_lt(x.0, lo)), v128_andnot(self.1, f32x4_lt(x.1, lo)))
    }
    #[inline(always)]
    fn store(self, s: &mut [f32; 8]) {
        // SAFETY: `s` is 32 writable bytes; v128 stores need no alignment.
        unsafe {
            v128_store(s.as_mut_ptr().cast(), self.0);
            v128_store(s.as_mut_ptr().add(4).cast(), self.1);
        }
    }
    #[inline(always)]
    fn sum4(a: [Self; 4]) -> [f32; 4] {
        let h = |v: Simd128| f32x4_add(v.0, v.1);
        let r = hadd(hadd(h(a[0]), h(a[1])), hadd(h(a[2]), h(a[3])));
        [
            f32x4_extract_lane::<0>(r),
            f32x4_extract_lane::<1>(r),
            f32x4_extract_lane::<2>(r),
            f32x4_extract_lane::<3>(r),
        ]
    }
}
