//! Eight f32 lanes, the unit of every kernel: one accumulator of the reference dot product (lane
//! `l` sums the products of the elements `≡ l (mod 8)`), and the stored formats a matrix row is
//! read from.

/// Eight f32 lanes. Implemented by one AVX register, two SSE2 or wasm SIMD128 registers, and a
/// plain array (the portable code). Every operation is lane-wise and rounds like scalar f32.
pub(super) trait F32x8: Copy {
    /// Whether the type has registers enough for the wide matmul tile (4 input × 2 weight rows).
    const WIDE: bool;
    fn zero() -> Self;
    fn splat(v: f32) -> Self;
    fn load(s: &[f32; 8]) -> Self;
    /// Eight IEEE half values (their bits), widened exactly.
    fn load_f16(s: &[u16; 8]) -> Self;
    /// Eight bfloat16 values (their bits), widened exactly.
    fn load_bf16(s: &[u16; 8]) -> Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
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

/// How a matrix's values are stored: f32, or the bits of a 16-bit float.
pub(super) trait Format {
    type Elem: Copy;
    fn load<V: F32x8>(s: &[Self::Elem; 8]) -> V;
    /// One value as f32 (exact).
    fn widen(e: Self::Elem) -> f32;
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
}

impl Format for F16 {
    type Elem = u16;
    #[inline(always)]
    fn load<V: F32x8>(s: &[u16; 8]) -> V {
        V::load_f16(s)
    }
    #[inline(always)]
    fn widen(e: u16) -> f32 {
        half::f16::from_bits(e).to_f32()
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
}

/// `2¹¹²`: the exponent difference of f32 and f16. The f16 bits without the sign, shifted left by
/// 13, are an f32 `2⁻¹¹²` times the f16's value (subnormals included); the product is exact.
pub(super) const F16_SCALE: f32 = f32::from_bits(0x7780_0000);
/// The smallest magnitude that comes out of an f16 infinity or NaN by that product (the largest
/// finite f16 is 65504): such lanes get the f32 exponent of all ones.
pub(super) const F16_INF: f32 = 65536.0;

/// The lanes as a plain array: the portable code (no SIMD unit, or one this crate does not use).
/// Half values are widened by a 64K-entry table, one load each: in wasm without SIMD that made the
/// shipped F16 models decode 1.5–1.9× faster in the page than bit manipulation (docs/bench.md).
#[derive(Clone, Copy)]
pub(super) struct Scalar([f32; 8]);

impl F32x8 for Scalar {
    const WIDE: bool = false;
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
        let t = table(Table::F16);
        Scalar(s.map(|b| t[b as usize]))
    }
    #[inline(always)]
    fn load_bf16(s: &[u16; 8]) -> Self {
        let t = table(Table::Bf16);
        Scalar(s.map(|b| t[b as usize]))
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        let mut r = self.0;
        r.iter_mut().zip(o.0).for_each(|(a, b)| *a += b);
        Scalar(r)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        let mut r = self.0;
        r.iter_mut().zip(o.0).for_each(|(a, b)| *a *= b);
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

/// Which half format a table widens.
#[derive(Clone, Copy)]
enum Table {
    F16,
    Bf16,
}

/// Every value of a 16-bit float format as f32, by bit pattern (256 KiB, built on first use from
/// the exact conversions of [`Format::widen`]).
fn table(which: Table) -> &'static [f32; 65536] {
    use std::sync::OnceLock;
    type T = Box<[f32; 65536]>;
    fn build(to_f32: impl Fn(u16) -> f32) -> T {
        let mut t: T = vec![0.0f32; 65536].into_boxed_slice().try_into().unwrap_or_else(|_| unreachable!());
        t.iter_mut().enumerate().for_each(|(b, v)| *v = to_f32(b as u16));
        t
    }
    static F16_TABLE: OnceLock<T> = OnceLock::new();
    static BF16_TABLE: OnceLock<T> = OnceLock::new();
    match which {
        Table::F16 => F16_TABLE.get_or_init(|| build(F16::widen)),
        Table::Bf16 => BF16_TABLE.get_or_init(|| build(Bf16::widen)),
    }
}
