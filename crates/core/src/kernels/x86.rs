//! x86-64 lanes: AVX2 with F16C (one 256-bit register, detected at run time) and the SSE2 baseline
//! (two 128-bit registers, every x86-64 CPU).

use super::lanes::{F32x8, Shape, F16_INF, F16_MASK, F16_SCALE};
use super::Kernel;
use std::arch::x86_64::*;

/// Runs `k` on [`Avx`] lanes, compiled with AVX2 and F16C.
///
/// # Safety
/// Only where the CPU has AVX2 and F16C (`super::level` checks).
#[target_feature(enable = "avx2,f16c")]
pub(super) unsafe fn avx2<K: Kernel>(k: K) -> K::Out {
    k.run::<Avx>()
}

/// One AVX register. Only [`avx2`] runs kernels on it, so its intrinsics execute only where the
/// features were detected, and they are inlined into that entry.
#[derive(Clone, Copy)]
pub(super) struct Avx(__m256);

impl F32x8 for Avx {
    const SHAPE: Shape = Shape::Wide;
    #[inline(always)]
    fn zero() -> Self {
        // SAFETY: AVX is present (see the type's doc); no memory is touched.
        Avx(unsafe { _mm256_setzero_ps() })
    }
    #[inline(always)]
    fn splat(v: f32) -> Self {
        // SAFETY: as in `zero`.
        Avx(unsafe { _mm256_set1_ps(v) })
    }
    #[inline(always)]
    fn load(s: &[f32; 8]) -> Self {
        // SAFETY: AVX is present; `s` is 32 readable bytes, the load is unaligned.
        Avx(unsafe { _mm256_loadu_ps(s.as_ptr()) })
    }
    #[inline(always)]
    fn load_f16(s: &[u16; 8]) -> Self {
        // SAFETY: F16C is present; `s` is 16 readable bytes, the load is unaligned.
        Avx(unsafe { _mm256_cvtph_ps(_mm_loadu_si128(s.as_ptr().cast())) })
    }
    #[inline(always)]
    fn load_bf16(s: &[u16; 8]) -> Self {
        // SAFETY: AVX2 is present; `s` is 16 readable bytes. Each value's bits go to the top half of
        // an f32: that is its value.
        Avx(unsafe {
            _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(_mm_loadu_si128(
                s.as_ptr().cast(),
            ))))
        })
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        // SAFETY: as in `zero`.
        Avx(unsafe { _mm256_add_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        // SAFETY: as in `zero`.
        Avx(unsafe { _mm256_sub_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        // SAFETY: as in `zero`.
        Avx(unsafe { _mm256_mul_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        // SAFETY: as in `zero`.
        Avx(unsafe { _mm256_div_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        // SAFETY: as in `zero`.
        Avx(unsafe { _mm256_max_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        // SAFETY: as in `zero`.
        Avx(unsafe { _mm256_min_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn pow2i(self) -> Self {
        // SAFETY: AVX2 is present; no memory is touched. The lanes hold integers, so the
        // conversion is exact; `n + 127` shifted into the exponent field is 2ⁿ.
        Avx(unsafe {
            let n = _mm256_add_epi32(_mm256_cvtps_epi32(self.0), _mm256_set1_epi32(127));
            _mm256_castsi256_ps(_mm256_slli_epi32::<23>(n))
        })
    }
    #[inline(always)]
    fn zero_below(self, x: Self, lo: f32) -> Self {
        // SAFETY: as in `zero`.
        Avx(unsafe { _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LT_OQ>(x.0, _mm256_set1_ps(lo)), self.0) })
    }
    #[inline(always)]
    fn store(self, s: &mut [f32; 8]) {
        // SAFETY: AVX is present; `s` is 32 writable bytes, the store is unaligned.
        unsafe { _mm256_storeu_ps(s.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn sum4(a: [Self; 4]) -> [f32; 4] {
        // SAFETY: AVX (and its SSE3 `hadd`) is present; `out` is 16 writable bytes.
        unsafe {
            // Lanes l and l + 4 added: [a0+a4, a1+a5, a2+a6, a3+a7].
            let h = |v: Avx| _mm_add_ps(_mm256_castps256_ps128(v.0), _mm256_extractf128_ps::<1>(v.0));
            let (s0, s1, s2, s3) = (h(a[0]), h(a[1]), h(a[2]), h(a[3]));
            // hadd(x, y) = [x0+x1, x2+x3, y0+y1, y2+y3]; twice gives each (s0+s1)+(s2+s3).
            let r = _mm_hadd_ps(_mm_hadd_ps(s0, s1), _mm_hadd_ps(s2, s3));
            let mut out = [0.0f32; 4];
            _mm_storeu_ps(out.as_mut_ptr(), r);
            out
        }
    }
    #[inline(always)]
    fn sum8(a: [Self; 8]) -> Self {
        // SAFETY: AVX (and its `hadd`) is present; no memory is touched.
        unsafe {
            // [a0+a4, a1+a5, a2+a6, a3+a7 | the same of b]
            let h = |a: Avx, b: Avx| {
                let lo = _mm256_permute2f128_ps::<0x20>(a.0, b.0);
                _mm256_add_ps(lo, _mm256_permute2f128_ps::<0x31>(a.0, b.0))
            };
            let (ae, bf, cg, dh) = (h(a[0], a[4]), h(a[1], a[5]), h(a[2], a[6]), h(a[3], a[7]));
            // hadd works within each 128-bit half: twice gives [sa, sb, sc, sd | se, sf, sg, sh].
            Avx(_mm256_hadd_ps(_mm256_hadd_ps(ae, bf), _mm256_hadd_ps(cg, dh)))
        }
    }
}

/// Two SSE2 registers (lanes 0–3 and 4–7): the x86-64 baseline, no detection needed. Its
/// intrinsics need `unsafe` only because they are `#[target_feature(enable = "sse2")]` functions;
/// SSE2 is part of every x86-64 CPU.
#[derive(Clone, Copy)]
pub(super) struct Sse(__m128, __m128);

/// Four finite f16 values in the top halves of 32-bit lanes, widened exactly (see
/// `lanes::F16_SCALE`).
#[inline(always)]
fn f16x4_finite(v: __m128i) -> __m128 {
    // SAFETY: SSE2 only; no memory is touched.
    unsafe {
        let bits = _mm_and_si128(_mm_srai_epi32::<3>(v), _mm_set1_epi32(F16_MASK as i32));
        _mm_mul_ps(_mm_castsi128_ps(bits), _mm_set1_ps(F16_SCALE))
    }
}

/// [`f16x4_finite`] for every f16: infinities and NaNs get the all-ones exponent.
#[inline(always)]
fn f16x4(v: __m128i) -> __m128 {
    let f = f16x4_finite(v);
    // SAFETY: SSE only; no memory is touched.
    unsafe {
        let abs = _mm_and_ps(f, _mm_castsi128_ps(_mm_set1_epi32(i32::MAX)));
        let exp = _mm_castsi128_ps(_mm_set1_epi32(0x7f80_0000));
        _mm_or_ps(f, _mm_and_ps(_mm_cmpge_ps(abs, _mm_set1_ps(F16_INF)), exp))
    }
}

/// Eight f16 values, each in the top half of a 32-bit lane (interleaved after zeros).
#[inline(always)]
fn f16_lanes(s: &[u16; 8]) -> (__m128i, __m128i) {
    // SAFETY: SSE2 only; `s` is 16 readable bytes, unaligned load.
    unsafe {
        let (h, z) = (_mm_loadu_si128(s.as_ptr().cast()), _mm_setzero_si128());
        (_mm_unpacklo_epi16(z, h), _mm_unpackhi_epi16(z, h))
    }
}

/// `[x0+x1, x2+x3, y0+y1, y2+y3]` (SSE3's `hadd`, from SSE2 shuffles).
#[inline(always)]
fn hadd(x: __m128, y: __m128) -> __m128 {
    // SAFETY: SSE only; no memory is touched.
    unsafe { _mm_add_ps(_mm_shuffle_ps::<0b10_00_10_00>(x, y), _mm_shuffle_ps::<0b11_01_11_01>(x, y)) }
}

impl F32x8 for Sse {
    const SHAPE: Shape = Shape::Narrow;
    #[inline(always)]
    fn zero() -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe { Sse(_mm_setzero_ps(), _mm_setzero_ps()) }
    }
    #[inline(always)]
    fn splat(v: f32) -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe { Sse(_mm_set1_ps(v), _mm_set1_ps(v)) }
    }
    #[inline(always)]
    fn load(s: &[f32; 8]) -> Self {
        // SAFETY: SSE only; `s` is 32 readable bytes, unaligned loads.
        unsafe { Sse(_mm_loadu_ps(s.as_ptr()), _mm_loadu_ps(s.as_ptr().add(4))) }
    }
    #[inline(always)]
    fn load_f16(s: &[u16; 8]) -> Self {
        let (lo, hi) = f16_lanes(s);
        Sse(f16x4(lo), f16x4(hi))
    }
    #[inline(always)]
    fn load_f16_finite(s: &[u16; 8]) -> Self {
        let (lo, hi) = f16_lanes(s);
        Sse(f16x4_finite(lo), f16x4_finite(hi))
    }
    #[inline(always)]
    fn load_bf16(s: &[u16; 8]) -> Self {
        // Each value's bits in the top half of an f32: that is its value.
        let (lo, hi) = f16_lanes(s);
        // SAFETY: SSE2 only; no memory is touched.
        unsafe { Sse(_mm_castsi128_ps(lo), _mm_castsi128_ps(hi)) }
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe { Sse(_mm_add_ps(self.0, o.0), _mm_add_ps(self.1, o.1)) }
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe { Sse(_mm_sub_ps(self.0, o.0), _mm_sub_ps(self.1, o.1)) }
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe { Sse(_mm_mul_ps(self.0, o.0), _mm_mul_ps(self.1, o.1)) }
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe { Sse(_mm_div_ps(self.0, o.0), _mm_div_ps(self.1, o.1)) }
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe { Sse(_mm_max_ps(self.0, o.0), _mm_max_ps(self.1, o.1)) }
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe { Sse(_mm_min_ps(self.0, o.0), _mm_min_ps(self.1, o.1)) }
    }
    #[inline(always)]
    fn pow2i(self) -> Self {
        // SAFETY: SSE2 only; no memory is touched. As `Avx::pow2i`.
        let p = |v: __m128| unsafe {
            let n = _mm_add_epi32(_mm_cvtps_epi32(v), _mm_set1_epi32(127));
            _mm_castsi128_ps(_mm_slli_epi32::<23>(n))
        };
        Sse(p(self.0), p(self.1))
    }
    #[inline(always)]
    fn zero_below(self, x: Self, lo: f32) -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe {
            let lo = _mm_set1_ps(lo);
            Sse(_mm_andnot_ps(_mm_cmplt_ps(x.0, lo), self.0), _mm_andnot_ps(_mm_cmplt_ps(x.1, lo), self.1))
        }
    }
    #[inline(always)]
    fn store(self, s: &mut [f32; 8]) {
        // SAFETY: SSE only; `s` is 32 writable bytes, unaligned stores.
        unsafe {
            _mm_storeu_ps(s.as_mut_ptr(), self.0);
            _mm_storeu_ps(s.as_mut_ptr().add(4), self.1);
        }
    }
    #[inline(always)]
    fn sum4(a: [Self; 4]) -> [f32; 4] {
        // SAFETY: SSE only; `out` is 16 writable bytes.
        unsafe {
            let h = |v: Sse| _mm_add_ps(v.0, v.1);
            let r = hadd(hadd(h(a[0]), h(a[1])), hadd(h(a[2]), h(a[3])));
            let mut out = [0.0f32; 4];
            _mm_storeu_ps(out.as_mut_ptr(), r);
            out
        }
    }
}
