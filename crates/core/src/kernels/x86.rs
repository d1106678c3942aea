//! x86-64 lanes: AVX2 with F16C (one 256-bit register, detected at run time) and the SSE2 baseline
//! (two 128-bit registers, every x86-64 CPU).

use super::lanes::{F32x8, F16_INF, F16_SCALE};
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
    const WIDE: bool = true;
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
    fn mul(self, o: Self) -> Self {
        // SAFETY: as in `zero`.
        Avx(unsafe { _mm256_mul_ps(self.0, o.0) })
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

/// Four f16 values, zero-extended to 32 bits, widened exactly: the magnitude's bits shifted into
/// f32 position and scaled by 2¹¹², infinities and NaNs given the all-ones exponent, the sign put
/// back.
#[inline(always)]
fn f16x4(v: __m128i) -> __m128 {
    // SAFETY: SSE2 only; no memory is touched.
    unsafe {
        let sign = _mm_slli_epi32::<16>(_mm_and_si128(v, _mm_set1_epi32(0x8000)));
        let mag = _mm_castsi128_ps(_mm_slli_epi32::<13>(_mm_and_si128(v, _mm_set1_epi32(0x7fff))));
        let mag = _mm_mul_ps(mag, _mm_set1_ps(F16_SCALE));
        let exp = _mm_castsi128_ps(_mm_set1_epi32(0x7f80_0000));
        let inf = _mm_and_ps(_mm_cmpge_ps(mag, _mm_set1_ps(F16_INF)), exp);
        _mm_or_ps(_mm_or_ps(mag, inf), _mm_castsi128_ps(sign))
    }
}

/// `[x0+x1, x2+x3, y0+y1, y2+y3]` (SSE3's `hadd`, from SSE2 shuffles).
#[inline(always)]
fn hadd(x: __m128, y: __m128) -> __m128 {
    // SAFETY: SSE only; no memory is touched.
    unsafe { _mm_add_ps(_mm_shuffle_ps::<0b10_00_10_00>(x, y), _mm_shuffle_ps::<0b11_01_11_01>(x, y)) }
}

impl F32x8 for Sse {
    const WIDE: bool = false;
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
        // SAFETY: SSE2 only; `s` is 16 readable bytes, unaligned load.
        let (h, z) = unsafe { (_mm_loadu_si128(s.as_ptr().cast()), _mm_setzero_si128()) };
        // SAFETY: SSE2 only; no memory is touched.
        unsafe { Sse(f16x4(_mm_unpacklo_epi16(h, z)), f16x4(_mm_unpackhi_epi16(h, z))) }
    }
    #[inline(always)]
    fn load_bf16(s: &[u16; 8]) -> Self {
        // SAFETY: SSE2 only; `s` is 16 readable bytes, unaligned load. Interleaved after zeros,
        // each value's bits land in the top half of an f32: that is its value.
        unsafe {
            let (h, z) = (_mm_loadu_si128(s.as_ptr().cast()), _mm_setzero_si128());
            Sse(_mm_castsi128_ps(_mm_unpacklo_epi16(z, h)), _mm_castsi128_ps(_mm_unpackhi_epi16(z, h)))
        }
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe { Sse(_mm_add_ps(self.0, o.0), _mm_add_ps(self.1, o.1)) }
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        // SAFETY: SSE only; no memory is touched.
        unsafe { Sse(_mm_mul_ps(self.0, o.0), _mm_mul_ps(self.1, o.1)) }
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
