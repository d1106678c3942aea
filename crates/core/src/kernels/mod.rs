//! The CPU hot loops with SIMD: dot products, `axpy`, attention rows over the KV cache and the
//! matrix products of prefill and decode, for matrices stored as F32, F16 or BF16.
//!
//! **One result per output, whatever runs it.** Every kernel returns bit for bit what its plain
//! scalar version in [`reference`](mod@reference) returns (the spec; tests compare them on random
//! shapes): a dot product keeps eight partial sums and reduces them in one fixed order, with no
//! fused multiply-add. So the tiled prefill matmul equals the decode matvec row by row, F16 storage
//! equals F32 storage of the same values, and the page's wasm computes the native numbers.
//!
//! **Where it runs.** The kernels are written once (`generic.rs`) over eight f32 lanes and compiled
//! for the instruction set at hand ([`Level`]): AVX2 with F16C on x86-64 where the CPU has them
//! (detected at run time), else SSE2 (every x86-64 CPU); SIMD128 in wasm built with
//! `+simd128` (`.cargo/config.toml`); plain arrays elsewhere (aarch64, wasm without SIMD), where
//! f16 values are widened by a 64K-entry table. Speeds: docs/bench.md, "SIMD kernels".

mod generic;
mod lanes;
pub mod reference;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod wasm;
#[cfg(target_arch = "x86_64")]
mod x86;

use lanes::{Bf16, F32x8, Format, Scalar, F16, F32};

/// A row-major matrix as it is stored: f32 values or the bits of IEEE half or bfloat16 values.
#[derive(Debug, Clone, Copy)]
pub enum Stored<'a> {
    F32(&'a [f32]),
    F16(&'a [u16]),
    Bf16(&'a [u16]),
}

/// The instruction set the kernels run with; the results are the same on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Level {
    /// Plain arrays (the compiler may vectorise them).
    Portable,
    /// x86-64 baseline: two 128-bit registers per eight lanes, f16 widened by bit manipulation.
    Sse2,
    /// x86-64 with AVX2 and F16C (detected at run time): one 256-bit register, `vcvtph2ps`.
    Avx2,
    /// wasm32 compiled with `+simd128`: two `v128` per eight lanes.
    Simd128,
}

impl Level {
    /// The best level of this CPU (or wasm build).
    pub fn detected() -> Level {
        #[cfg(target_arch = "x86_64")]
        return if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c") {
            Level::Avx2
        } else {
            Level::Sse2
        };
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        return Level::Simd128;
        #[allow(unreachable_code)]
        Level::Portable
    }

    /// Whether the level widens half values with one instruction (F16C); elsewhere the widening
    /// costs several operations per value in every matrix product.
    pub fn widens_halves_in_hardware(self) -> bool {
        self == Level::Avx2
    }

    /// Every level that can run here, portable first (what the tests compare).
    pub fn available() -> Vec<Level> {
        let d = Level::detected();
        [Level::Portable, Level::Sse2, Level::Avx2, Level::Simd128]
            .into_iter()
            .filter(|&l| l == Level::Portable || l == d || (l == Level::Sse2 && d == Level::Avx2))
            .collect()
    }
}

#[cfg(test)]
thread_local! {
    /// Set by tests to run the kernels at a level below the detected one.
    static FORCE: std::cell::Cell<Option<Level>> = const { std::cell::Cell::new(None) };
}

/// Runs `f` with the kernels of this thread at `level` (tests).
#[cfg(test)]
pub(crate) fn with_level<R>(level: Level, f: impl FnOnce() -> R) -> R {
    FORCE.with(|l| l.set(Some(level)));
    let r = f();
    FORCE.with(|l| l.set(None));
    r
}

/// The level chosen by [`choose_level`] (`u8::MAX`: none, the detected one).
static CHOSEN: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(u8::MAX);

/// Run every kernel at `level` from now on instead of the best one (benchmarks that compare
/// instruction sets: `attnlab --cpu-kernels sse2`). A level this CPU cannot run is refused by name.
pub fn choose_level(level: Level) -> std::result::Result<(), String> {
    let available = Level::available();
    if !available.contains(&level) {
        return Err(format!("the {level:?} kernels cannot run here (this CPU runs {available:?})"));
    }
    CHOSEN.store(level as u8, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// The level the kernels run with now.
pub fn level() -> Level {
    #[cfg(test)]
    if let Some(l) = FORCE.with(|l| l.get()) {
        return l;
    }
    let chosen = CHOSEN.load(std::sync::atomic::Ordering::Relaxed);
    [Level::Portable, Level::Sse2, Level::Avx2, Level::Simd128]
        .into_iter()
        .find(|&l| l as u8 == chosen)
        .unwrap_or_else(Level::detected)
}

/// A kernel call with its arguments, run on the lanes of the level at hand.
trait Kernel {
    type Out;
    fn run<V: F32x8>(self) -> Self::Out;
}

fn dispatch<K: Kernel>(k: K) -> K::Out {
    match level() {
        // SAFETY: `level` is Avx2 only where the CPU has AVX2 and F16C.
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => unsafe { x86::avx2(k) },
        #[cfg(target_arch = "x86_64")]
        Level::Sse2 => k.run::<x86::Sse>(),
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        Level::Simd128 => k.run::<wasm::Simd128>(),
        _ => k.run::<Scalar>(),
    }
}

/// `Σ a[i]·b[i]` over the shorter length ([`reference::dot`]).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    struct K<'a>(&'a [f32], &'a [f32]);
    impl Kernel for K<'_> {
        type Out = f32;
        #[inline(always)]
        fn run<V: F32x8>(self) -> f32 {
            generic::dot::<V>(self.0, self.1)
        }
    }
    dispatch(K(a, b))
}

/// `y += a·x` ([`reference::axpy`]).
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    struct K<'a>(f32, &'a [f32], &'a mut [f32]);
    impl Kernel for K<'_> {
        type Out = ();
        #[inline(always)]
        fn run<V: F32x8>(self) {
            generic::axpy::<V>(self.0, self.1, self.2)
        }
    }
    dispatch(K(a, x, y))
}

/// `out[j] = dot(q, m[j·stride ..][.. q.len()])` for every `j < out.len()` ([`reference::dot_rows`]).
pub fn dot_rows(q: &[f32], m: &[f32], stride: usize, out: &mut [f32]) {
    struct K<'a>(&'a [f32], &'a [f32], usize, &'a mut [f32]);
    impl Kernel for K<'_> {
        type Out = ();
        #[inline(always)]
        fn run<V: F32x8>(self) {
            generic::dot_rows::<V>(self.0, self.1, self.2, self.3)
        }
    }
    dispatch(K(q, m, stride, out))
}

/// `y += Σ_j p[j]·m[j·stride ..][.. y.len()]`, in order of `j`, zero weights skipped
/// ([`reference::weighted_rows`]).
pub fn weighted_rows(p: &[f32], m: &[f32], stride: usize, y: &mut [f32]) {
    struct K<'a>(&'a [f32], &'a [f32], usize, &'a mut [f32]);
    impl Kernel for K<'_> {
        type Out = ();
        #[inline(always)]
        fn run<V: F32x8>(self) {
            generic::weighted_rows::<V>(self.0, self.1, self.2, self.3)
        }
    }
    dispatch(K(p, m, stride, y))
}

/// `e^x` for each value of `x` in place ([`reference::exp`]) at the level at hand: the lanes'
/// exponential on its own, for the tests (softmax and SiLU inline it).
#[cfg(test)]
pub(crate) fn exp_inplace(x: &mut [f32]) {
    struct K<'a>(&'a mut [f32]);
    impl Kernel for K<'_> {
        type Out = ();
        #[inline(always)]
        fn run<V: F32x8>(self) {
            let (body, tail) = self.0.as_chunks_mut::<8>();
            for c in body {
                generic::exp(V::load(c)).store(c);
            }
            tail.iter_mut().for_each(|v| *v = reference::exp(*v));
        }
    }
    dispatch(K(x))
}

/// `u[i] ← u[i]·silu(g[i])` over the shorter length ([`reference::silu_mul`]).
pub fn silu_mul(u: &mut [f32], g: &[f32]) {
    struct K<'a>(&'a mut [f32], &'a [f32]);
    impl Kernel for K<'_> {
        type Out = ();
        #[inline(always)]
        fn run<V: F32x8>(self) {
            generic::silu_mul::<V>(self.0, self.1)
        }
    }
    dispatch(K(u, g))
}

/// `x ← softmax(x)` ([`reference::softmax`]).
pub fn softmax(x: &mut [f32]) {
    struct K<'a>(&'a mut [f32]);
    impl Kernel for K<'_> {
        type Out = ();
        #[inline(always)]
        fn run<V: F32x8>(self) {
            generic::softmax::<V>(self.0)
        }
    }
    dispatch(K(x))
}

/// [`dot_rows`] of several queries at once ([`reference::dot_rows_block`]): `out[b·n + j]` is query
/// `q[b·q_stride ..][.. dh]` against key row `j < n` of `m`; register tiles of queries × keys read
/// each key row once per tile of queries.
pub fn dot_rows_block(
    q: &[f32],
    q_stride: usize,
    dh: usize,
    m: &[f32],
    stride: usize,
    n: usize,
    out: &mut [f32],
) {
    struct K<'a>(&'a [f32], usize, usize, &'a [f32], usize, usize, &'a mut [f32]);
    impl Kernel for K<'_> {
        type Out = ();
        #[inline(always)]
        fn run<V: F32x8>(self) {
            generic::dot_rows_block::<V>(self.0, self.1, self.2, self.3, self.4, self.5, self.6)
        }
    }
    dispatch(K(q, q_stride, dh, m, stride, n, out))
}

/// [`weighted_rows`] of several weight rows at once ([`reference::weighted_rows_block`]): row `b`
/// of `p` (`n` weights) into `y[b·y_stride ..][.. dh]`. Its bits are those of [`weighted_rows`] row
/// by row where `y` holds no −0 and `m` is finite (see `generic::weighted_rows_block`).
pub fn weighted_rows_block(
    p: &[f32],
    n: usize,
    m: &[f32],
    stride: usize,
    y: &mut [f32],
    y_stride: usize,
    dh: usize,
) {
    struct K<'a>(&'a [f32], usize, &'a [f32], usize, &'a mut [f32], usize, usize);
    impl Kernel for K<'_> {
        type Out = ();
        #[inline(always)]
        fn run<V: F32x8>(self) {
            generic::weighted_rows_block::<V>(self.0, self.1, self.2, self.3, self.4, self.5, self.6)
        }
    }
    dispatch(K(p, n, m, stride, y, y_stride, dh))
}

/// `Y = X·Wᵀ`: `y[r·out + o] = dot(W[o], x[r])` for `W` of rows of `n` values and the `x.len() / n`
/// rows of `x` ([`reference::matmul_by`]). Register tiles of input × weight rows: each loaded (and
/// widened) weight vector serves several input rows.
pub fn matmul(w: Stored<'_>, n: usize, x: &[f32], y: &mut [f32]) {
    struct K<'a, W: Format>(&'a [W::Elem], usize, &'a [f32], &'a mut [f32]);
    impl<W: Format> Kernel for K<'_, W> {
        type Out = ();
        #[inline(always)]
        fn run<V: F32x8>(self) {
            generic::matmul::<V, W>(self.0, self.1, self.2, self.3)
        }
    }
    match w {
        Stored::F32(w) => dispatch(K::<F32>(w, n, x, y)),
        Stored::F16(w) => dispatch(K::<F16>(w, n, x, y)),
        Stored::Bf16(w) => dispatch(K::<Bf16>(w, n, x, y)),
    }
}

/// `out = src` as f32, exactly, over the shorter length.
pub fn widen(src: Stored<'_>, out: &mut [f32]) {
    struct K<'a, W: Format>(&'a [W::Elem], &'a mut [f32]);
    impl<W: Format> Kernel for K<'_, W> {
        type Out = ();
        #[inline(always)]
        fn run<V: F32x8>(self) {
            generic::widen::<V, W>(self.0, self.1)
        }
    }
    match src {
        Stored::F32(s) => dispatch(K::<F32>(s, out)),
        Stored::F16(s) => dispatch(K::<F16>(s, out)),
        Stored::Bf16(s) => dispatch(K::<Bf16>(s, out)),
    }
}

#[cfg(test)]
mod tests;
