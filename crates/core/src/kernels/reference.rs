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
