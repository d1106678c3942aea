//! wasm32 SIMD128 lanes (two `v128` registers), compiled in with `-C target-feature=+simd128`
//! (`.cargo/config.toml`; every current browser runs it).

use super::lanes::{F32x8, F16_INF, F16_SCALE};
use core::arch::wasm32::*;

/// Two SIMD128 registers: lanes 0–3 and 4–7.
#[derive(Clone, Copy)]
pub(super) struct Simd128(v128, v128);

/// Four f16 values, zero-extended to 32 bits, widened exactly (as the SSE2 code: magnitude scaled
/// by 2¹¹², all-ones exponent for infinities and NaNs, sign put back).
#[inline(always)]
fn f16x4(v: v128) -> v128 {
    let sign = i32x4_shl(v128_and(v, u32x4_splat(0x8000)), 16);
    let mag = f32x4_mul(i32x4_shl(v128_and(v, u32x4_splat(0x7fff)), 13), f32x4_splat(F16_SCALE));
    let inf = v128_and(f32x4_ge(mag, f32x4_splat(F16_INF)), u32x4_splat(0x7f80_0000));
    v128_or(v128_or(mag, inf), sign)
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
    const WIDE: bool = false;
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
        let h = load16(s, 0);
        Simd128(f16x4(u32x4_extend_low_u16x8(h)), f16x4(u32x4_extend_high_u16x8(h)))
    }
    #[inline(always)]
    fn load_bf16(s: &[u16; 8]) -> Self {
        let h = load16(s, 0);
        Simd128(i32x4_shl(u32x4_extend_low_u16x8(h), 16), i32x4_shl(u32x4_extend_high_u16x8(h), 16))
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        Simd128(f32x4_add(self.0, o.0), f32x4_add(self.1, o.1))
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        Simd128(f32x4_mul(self.0, o.0), f32x4_mul(self.1, o.1))
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
