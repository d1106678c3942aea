//! The reference kernels: plain scalar loops that define every result of [`super`] bit for bit.
//!
//! A dot product of length `n` keeps eight partial sums, lane `l` adding `a[8c + l]·b[8c + l]` for
//! each full chunk `c` in order, then reduces them as
//! `((s0 + s4) + (s1 + s5)) + ((s2 + s6) + (s3 + s7))` and adds the scalar sum of the `n mod 8`
//! remaining products. Multiplications and additions are separate roundings (no fused
//! multiply-add). The SIMD kernels hold the eight sums in one or two vector registers and reduce
//! them in this order, so they return these very numbers on every CPU and in wasm.

/// `Σ a[i]·b[i]` in the reference order above, `a`'s values read through `to_f32` (the widening of
/// stored half values: the same operations on the widened values).
pub fn dot_by<T: Copy>(a: &[T], b: &[f32], to_f32: impl Fn(T) -> f32) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; 8];
    let chunks = n / 8;
    for c in 0..chunks {
        let (pa, pb) = (&a[c * 8..c * 8 + 8], &b[c * 8..c * 8 + 8]);
        for l in 0..8 {
            acc[l] += to_f32(pa[l]) * pb[l];
        }
    }
    let mut tail = 0.0f32;
    for i in chunks * 8..n {
        tail += to_f32(a[i]) * b[i];
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// [`dot_by`] of two f32 vectors.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    dot_by(a, b, |v| v)
}

/// `y += a·x`, element by element.
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

/// `out[j] = dot(q, m[j·stride ..][.. q.len()])`: a query against rows of a matrix (keys in the KV
/// cache, one head's slice of each row).
pub fn dot_rows(q: &[f32], m: &[f32], stride: usize, out: &mut [f32]) {
    for (j, o) in out.iter_mut().enumerate() {
        *o = dot(q, &m[j * stride..j * stride + q.len()]);
    }
}

/// `y += Σ_j p[j]·m[j·stride ..][.. y.len()]`, one [`axpy`] per row in order of `j`, rows with
/// `p[j] = 0` skipped (attention weights over cached values; an inner step of the linear scan).
pub fn weighted_rows(p: &[f32], m: &[f32], stride: usize, y: &mut [f32]) {
    for (j, &pj) in p.iter().enumerate().filter(|(_, p)| **p != 0.0) {
        axpy(pj, &m[j * stride..j * stride + y.len()], y);
    }
}

/// `y[r·out + o] = dot(W[o], x[r])` for a row-major `W` of rows of `n` stored values, read through
/// `to_f32`, and `x.len() / n` input rows: `Y = X·Wᵀ`.
pub fn matmul_by<T: Copy>(w: &[T], n: usize, x: &[f32], y: &mut [f32], to_f32: impl Fn(T) -> f32 + Copy) {
    let out = w.len() / n;
    for (xr, yr) in x.chunks_exact(n).zip(y.chunks_exact_mut(out)) {
        for (yo, wo) in yr.iter_mut().zip(w.chunks_exact(n)) {
            *yo = dot_by(wo, xr, to_f32);
        }
    }
}

// e^x as Cephes' `expf` computes it (S. L. Moshier, Cephes Math Library, `expf.c`): n = round(x·log₂e),
// r = x − n·ln 2 with ln 2 in two parts (exact products for |n| ≤ 127), e^r from a degree-5
// polynomial on |r| ≤ ½ ln 2, times 2ⁿ from the exponent bits. Within 1 ulp of e^x over the whole
// range (tested against f64), and the same bits on every CPU and in wasm (libm's `expf` is the
// platform's).

/// Below this `exp` returns 0 (`e^x` < 2⁻¹²⁶ would be subnormal): `ln 2⁻¹²⁶`.
pub const EXP_LO: f32 = -87.336_54;
/// `exp` of larger arguments is `exp(EXP_HI)` ≈ 2.4·10³⁸ (`n` stays ≤ 127).
pub const EXP_HI: f32 = 88.37;
pub(super) const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 = LN2_HI − LN2_LO_NEG, LN2_HI with few mantissa bits so that n·LN2_HI is exact.
pub(super) const LN2_HI: f32 = 0.693_359_4;
pub(super) const LN2_LO_NEG: f32 = -2.121_944_4e-4;
/// 1.5·2²³: adding and subtracting it rounds |v| < 2²² to the nearest integer (ties to even).
pub(super) const ROUND: f32 = 12_582_912.0;
/// Cephes' polynomial for (e^r − 1 − r) / r², highest degree first.
pub(super) const EXP_POLY: [f32; 6] =
    [1.987_569_1e-4, 1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5e-1];

/// `2ⁿ` for an integer `n` in `-126..=127` held as f32.
pub fn pow2i(n: f32) -> f32 {
    f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// `e^x` (see above) for `x` that is not NaN.
// Comparisons, not `clamp`, which may call `fmaxf`/`fminf` (libm calls in wasm).
#[allow(clippy::manual_clamp)]
pub fn exp(x: f32) -> f32 {
    let xc = if x < EXP_LO {
        EXP_LO
    } else if x > EXP_HI {
        EXP_HI
    } else {
        x
    };
    let n = (xc * LOG2E + ROUND) - ROUND;
    let r = (xc - n * LN2_HI) - n * LN2_LO_NEG;
    let z = r * r;
    let mut p = EXP_POLY[0];
    for c in &EXP_POLY[1..] {
        p = p * r + c;
    }
    let y = (p * z + r) + 1.0;
    if x < EXP_LO {
        0.0
    } else {
        y * pow2i(n)
    }
}

/// `x ← softmax(x)`: `e^(x_i − max)` by [`exp`], divided by their sum, summed like [`dot`]'s
/// products (eight partial sums). An empty row stays empty; a row whose sum is 0 becomes zeros.
pub fn softmax(x: &mut [f32]) {
    let m = x.iter().fold(f32::MIN, |m, &v| if v > m { v } else { m });
    x.iter_mut().for_each(|v| *v = exp(*v - m));
    let s = dot_by(x, &vec![1.0; x.len()], |v| v);
    let inv = if s > 0.0 { 1.0 / s } else { 0.0 };
    x.iter_mut().for_each(|v| *v *= inv);
}

/// SiLU (swish), `x·σ(x) = x / (1 + e^(−x))`, with [`exp`] (below −[`EXP_HI`], where e^(−x) stops
/// at e^EXP_HI, that is `x / 2.4·10³⁸`, under 10⁻³⁵ in magnitude, for about 0).
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

/// `u[i] ← u[i]·silu(g[i])`: a SwiGLU FFN's gate (Shazeer, "GLU Variants Improve Transformer", eq. 6).
pub fn silu_mul(u: &mut [f32], g: &[f32]) {
    u.iter_mut().zip(g).for_each(|(u, &g)| *u *= silu(g));
}

/// [`dot_rows`] of several queries at once: `out[b·n + j] = dot(q_b, k_j)` for the `out.len() / n`
/// queries `q_b = q[b·q_stride ..][.. dh]` and the keys `k_j = m[j·stride ..][.. dh]`, `j < n`.
pub fn dot_rows_block(
    q: &[f32],
    q_stride: usize,
    dh: usize,
    m: &[f32],
    stride: usize,
    n: usize,
    out: &mut [f32],
) {
    for (b, o) in out.chunks_exact_mut(n).enumerate() {
        dot_rows(&q[b * q_stride..b * q_stride + dh], m, stride, o);
    }
}

/// [`weighted_rows`] of several weight rows at once: `y[b·y_stride ..][.. dh] += Σ_j p[b·n + j]·m_j`
/// for each of the `p.len() / n` rows `b`, `m_j = m[j·stride ..][.. dh]`.
pub fn weighted_rows_block(
    p: &[f32],
    n: usize,
    m: &[f32],
    stride: usize,
    y: &mut [f32],
    y_stride: usize,
    dh: usize,
) {
    for (b, pb) in p.chunks_exact(n).enumerate() {
        weighted_rows(pb, m, stride, &mut y[b * y_stride..b * y_stride + dh]);
    }
}
