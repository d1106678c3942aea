//! Eight f32 lanes, the unit of every kernel: one accumulator of the reference dot product (lane
//! `l` sums the products of the elements `≡ l (mod 8)`), and the stored formats a matrix row is
//! read from.

/// Eight f32 lanes. Implemented by one AVX register, two SSE2 or wasm SIMD128 registers, and a
/// plain array (the portable code). Every operation is lane-wise and rounds like scalar f32.
pub(super) trait F32x8: Copy {
    /// How many accumulators the kernels keep at once: what the registers hold.
    const SHAPE: Shape;
    fn zero() -> Self;
    fn splat(v: f32) -> Self;
    fn load(s: &[f32; 8]) -> Self;
    /// Eight IEEE half values (their bits), widened exactly.
    fn load_f16(s: &[u16; 8]) -> Self;
    /// [`F32x8::load_f16`] of finite values (infinities and NaNs give unspecified lanes), where
    /// that is cheaper: the matrix products' loads. A model's weights are checked finite on load.
    #[inline(always)]
    fn load_f16_finite(s: &[u16; 8]) -> Self {
        Self::load_f16(s)
    }
    /// Eight bfloat16 values (their bits), widened exactly.
    fn load_bf16(s: &[u16; 8]) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// Lane-wise maximum and minimum of values that are not NaN (which operand a NaN or a pair of
    /// zeros of opposite signs gives is left to the instruction).
    fn max(self, o: Self) -> Self;
    fn min(self, o: Self) -> Self;
    /// `2ⁿ` for lanes holding integers `n` in `-126..=127`.
    fn pow2i(self) -> Self;
    /// The lanes of `self`, with 0 where `x < lo`.
    fn zero_below(self, x: Self, lo: f32) -> Self;
    fn store(self, s: &mut [f32; 8]);
    /// The reference reduction `((a0 + a4) + (a1 + a5)) + ((a2 + a6) + (a3 + a7))` of each of four
    /// accumulators.
    fn sum4(a: [Self; 4]) -> [f32; 4];
    /// The reference reduction of each of eight accumulators, as the eight lanes of the result.
    #[inline(always)]
    fn sum8(a: [Self; 8]) -> Self {
        let (lo, hi) = (Self::sum4([a[0], a[1], a[2], a[3]]), Self::sum4([a[4], a[5], a[6], a[7]]));
        Self::load(&[lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]])
    }
}

/// Register tiles of the kernels (outputs computed together), by the registers a type has.
#[derive(PartialEq, Eq)]
pub(super) enum Shape {
    /// Sixteen 8-lane registers (AVX2): prefill tiles of 4 input × 2 weight rows, 8 keys at a time.
    Wide,
    /// Eight (two 4-lane registers each: SSE2, SIMD128): 2 × 2 tiles, 4 keys at a time.
    #[cfg_attr(not(any(target_arch = "x86_64", target_feature = "simd128")), allow(dead_code))]
    Narrow,
    /// Plain arrays: one output at a time, as the scalar reference (the compiler's registers).
    Single,
}

/// How a matrix's values are stored: f32, or the bits of a 16-bit float.
pub(super) trait Format {
    type Elem: Copy;
    fn load<V: F32x8>(s: &[Self::Elem; 8]) -> V;
    /// [`Format::load`] of finite values (see [`F32x8::load_f16_finite`]).
    #[inline(always)]
    fn load_finite<V: F32x8>(s: &[Self::Elem; 8]) -> V {
        Self::load(s)
    }
    /// One value as f32 (exact).
    fn widen(e: Self::Elem) -> f32;
    /// [`Format::widen`] for many values in plain code: half values by table (fetched once).
    fn widener() -> impl Fn(Self::Elem) -> f32 + Copy;
    /// The values themselves when they are f32.
    fn as_f32(s: &[Self::Elem]) -> Option<&[f32]> {
        let _ = s;
        None
    }
}

pub(super) struct F32;
pub(super) struct F16;
pub(super) struct Bf16;

impl Format for F32 {
    type Elem = f32;
    #[inline(always)]
    fn load<V: F32x8>(s: &[f32; 8]) -> V {
        V::load(s)
    }
    #[inline(always)]
    fn widen(e: f32) -> f32 {
        e
    }
    #[inline(always)]
    fn widener() -> impl Fn(f32) -> f32 + Copy {
        |e| e
    }
    #[inline(always)]
    fn as_f32(s: &[f32]) -> Option<&[f32]> {
        Some(s)
    }
}

impl Format for F16 {
    type Elem = u16;
    #[inline(always)]
    fn load<V: F32x8>(s: &[u16; 8]) -> V {
        V::load_f16(s)
    }
    #[inline(always)]
    fn load_finite<V: F32x8>(s: &[u16; 8]) -> V {
        V::load_f16_finite(s)
    }
    #[inline(always)]
    fn widen(e: u16) -> f32 {
        half::f16::from_bits(e).to_f32()
    }
    #[inline(always)]
    fn widener() -> impl Fn(u16) -> f32 + Copy {
        let t = table();
        move |b| t[b as usize]
    }
}

impl Format for Bf16 {
    type Elem = u16;
    #[inline(always)]
    fn load<V: F32x8>(s: &[u16; 8]) -> V {
        V::load_bf16(s)
    }
    #[inline(always)]
    fn widen(e: u16) -> f32 {
        f32::from_bits((e as u32) << 16)
    }
    #[inline(always)]
    fn widener() -> impl Fn(u16) -> f32 + Copy {
        Self::widen
    }
}

// Widening f16 with integer and f32 lane operations (SSE2, SIMD128), exactly: with a value's 16
// bits in the top half of a 32-bit lane, an arithmetic shift right by 3 and `F16_MASK` leave
// `sign | magnitude << 13`, an f32 that is 2⁻¹¹² times the value (subnormals included); the
// product by `F16_SCALE = 2¹¹²` is exact. Infinities and NaNs come out at `F16_INF` or more (the
// largest finite f16 is 65504) and get the all-ones exponent (left out for finite values, which
// halves the cost).
#[cfg(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(super) const F16_MASK: u32 = 0x8fff_e000;
#[cfg(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(super) const F16_SCALE: f32 = f32::from_bits(0x7780_0000);
#[cfg(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128")))]
pub(super) const F16_INF: f32 = 65536.0;

/// The lanes as a plain array: the portable code (no SIMD unit, or one this crate does not use).
/// F16 values are widened by a 64K-entry table, one load each: in wasm without SIMD that made the
/// shipped F16 models decode 1.5–1.9× faster in the page than bit manipulation (docs/bench.md).
#[derive(Clone, Copy)]
pub(super) struct Scalar([f32; 8]);

impl F32x8 for Scalar {
    const SHAPE: Shape = Shape::Single;
    #[inline(always)]
    fn zero() -> Self {
        Scalar([0.0; 8])
    }
    #[inline(always)]
    fn splat(v: f32) -> Self {
        Scalar([v; 8])
    }
    #[inline(always)]
    fn load(s: &[f32; 8]) -> Self {
        Scalar(*s)
    }
    #[inline(always)]
    fn load_f16(s: &[u16; 8]) -> Self {
        let t = table();
        Scalar(s.map(|b| t[b as usize]))
    }
    #[inline(always)]
    fn load_bf16(s: &[u16; 8]) -> Self {
        Scalar(s.map(Bf16::widen))
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        let mut r = self.0;
        r.iter_mut().zip(o.0).for_each(|(a, b)| *a += b);
        Scalar(r)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        let mut r = self.0;
        r.iter_mut().zip(o.0).for_each(|(a, b)| *a -= b);
        Scalar(r)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        let mut r = self.0;
        r.iter_mut().zip(o.0).for_each(|(a, b)| *a *= b);
        Scalar(r)
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        let mut r = self.0;
        r.iter_mut().zip(o.0).for_each(|(a, b)| *a /= b);
        Scalar(r)
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        let mut r = self.0;
        r.iter_mut().zip(o.0).for_each(|(a, b)| *a = if b > *a { b } else { *a });
        Scalar(r)
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        let mut r = self.0;
        r.iter_mut().zip(o.0).for_each(|(a, b)| *a = if b < *a { b } else { *a });
        Scalar(r)
    }
    #[inline(always)]
    fn pow2i(self) -> Self {
        Scalar(self.0.map(super::reference::pow2i))
    }
    #[inline(always)]
    fn zero_below(self, x: Self, lo: f32) -> Self {
        let mut r = self.0;
        r.iter_mut().zip(x.0).for_each(|(a, x)| *a = if x < lo { 0.0 } else { *a });
        Scalar(r)
    }
    #[inline(always)]
    fn store(self, s: &mut [f32; 8]) {
        *s = self.0;
    }
    #[inline(always)]
    fn sum4(a: [Self; 4]) -> [f32; 4] {
        a.map(|Scalar(a)| ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7])))
    }
}

/// Every f16 value as f32, by bit pattern (256 KiB, built on first use from [`Format::widen`]).
fn table() -> &'static [f32; 65536] {
    use std::sync::OnceLock;
    static TABLE: OnceLock<Box<[f32; 65536]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: Box<[f32; 65536]> =
            vec![0.0f32; 65536].into_boxed_slice().try_into().unwrap_or_else(|_| unreachable!());
        t.iter_mut().enumerate().for_each(|(b, v)| *v = F16::widen(b as u16));
        t
    })
}
