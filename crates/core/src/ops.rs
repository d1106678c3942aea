//! Small dense kernels of the CPU reference: row-major matrices, dot products, norms, activations.
//!
//! Everything is f32. The hot loops ([`dot`], [`axpy`], [`Linear::apply_rows`]) run the SIMD
//! kernels of [`crate::kernels`], which return bit for bit what their plain scalar versions in
//! [`crate::kernels::reference`] return: one order of additions per output, so prefill and decode
//! round identically per row.

use crate::config::{NormConfig, NormKind};
use crate::kernels;
use crate::weights::TensorData;

/// A weight matrix `W` of shape `[out, inp]` (PyTorch layout): `y = W·x`. The matrix stays in the
/// dtype it was stored in (shared with the model's [`crate::weights::Weights`]) and each row is
/// widened to f32 where it is used, so F16 and F32 storage of the same values give the same numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct Linear {
    pub w: TensorData,
    /// Optional bias `[out]` (GPT-2, NeoX, BLOOM projections; Qwen-style q/k/v only).
    pub b: Option<Vec<f32>>,
    pub out: usize,
    pub inp: usize,
}

impl Linear {
    /// Wrap a row-major `[out, inp]` matrix (length checked by the loader), without bias.
    pub fn new(w: impl Into<TensorData>, out: usize, inp: usize) -> Linear {
        let w = w.into();
        debug_assert_eq!(w.len(), out * inp);
        Linear { w, b: None, out, inp }
    }

    /// This map with a bias `[out]` added to its output.
    pub fn with_bias(self, b: Vec<f32>) -> Linear {
        debug_assert_eq!(b.len(), self.out);
        Linear { b: Some(b), ..self }
    }

    /// `Y = X·Wᵀ (+ b)` for `rows` vectors stored row-major in `x`; returns `[rows, out]`. Every
    /// output is `dot(W[o], x_r)`, whatever the number of rows and the storage dtype
    /// ([`kernels::matmul`]: register tiles for prefill, one row at a time for decode).
    pub fn apply_rows(&self, x: &[f32], rows: usize) -> Vec<f32> {
        let (inp, out) = (self.inp, self.out);
        let mut y = vec![0.0; rows * out];
        kernels::matmul(self.w.stored(), inp, &x[..rows * inp], &mut y);
        if let Some(b) = &self.b {
            y.chunks_exact_mut(out).for_each(|yr| yr.iter_mut().zip(b).for_each(|(y, b)| *y += b));
        }
        y
    }

    /// Grouped-query attention as plain multi-head attention: each block of `head_dim` output rows
    /// (one key/value head) repeated `group` times in place, so that query head h reads key/value
    /// head h / group (Ainslie et al., "GQA", §2; transformers' `repeat_kv`). An f32 copy, for the
    /// GPU upload; the CPU repeats the projected heads instead ([`repeat_heads`]).
    pub fn repeat_heads(&self, group: usize, head_dim: usize) -> Linear {
        let w = repeat_heads(self.w.to_f32().into_owned(), group, head_dim * self.inp);
        let b = self.b.clone().map(|b| repeat_heads(b, group, head_dim));
        Linear { w: w.into(), b, out: self.out * group, inp: self.inp }
    }
}

/// Each block of `width` values repeated `group` times in place: `[a, b] → [a, a, b, b]` for
/// group 2. On rows of projected keys/values (`width = head_dim`) this is GQA's `repeat_kv`.
pub fn repeat_heads(v: Vec<f32>, group: usize, width: usize) -> Vec<f32> {
    if group == 1 {
        return v;
    }
    let mut out = Vec::with_capacity(v.len() * group);
    for head in v.chunks_exact(width) {
        (0..group).for_each(|_| out.extend_from_slice(head));
    }
    out
}

/// Dot product with eight partial sums in a fixed order ([`kernels::reference::dot`], SIMD).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    kernels::dot(a, b)
}

/// `y += a·x` ([`kernels::reference::axpy`], SIMD).
#[inline]
pub fn axpy(a: f32, x: &[f32], y: &mut [f32]) {
    kernels::axpy(a, x, y)
}

/// Residual-stream norm with its parameters (`weight`, and `bias` for LayerNorm).
#[derive(Debug, Clone, PartialEq)]
pub struct Norm {
    pub kind: NormKind,
    pub eps: f32,
    pub weight: Vec<f32>,
    pub bias: Option<Vec<f32>>,
}

impl Norm {
    /// Build from the config and loaded tensors.
    pub fn new(cfg: &NormConfig, weight: Vec<f32>, bias: Option<Vec<f32>>) -> Norm {
        Norm { kind: cfg.kind, eps: cfg.eps as f32, weight, bias }
    }

    /// Normalize `x` into `y` (same length).
    pub fn apply(&self, x: &[f32], y: &mut [f32]) {
        let n = x.len() as f32;
        match self.kind {
            NormKind::Rmsnorm => {
                let ms = dot(x, x) / n;
                let inv = 1.0 / (ms + self.eps).sqrt();
                for ((yi, xi), wi) in y.iter_mut().zip(x).zip(&self.weight) {
                    *yi = xi * inv * wi;
                }
            }
            NormKind::Layernorm => {
                let mean = x.iter().sum::<f32>() / n;
                let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
                let inv = 1.0 / (var + self.eps).sqrt();
                for (i, (yi, xi)) in y.iter_mut().zip(x).enumerate() {
                    let b = self.bias.as_ref().map_or(0.0, |b| b[i]);
                    *yi = (xi - mean) * inv * self.weight[i] + b;
                }
            }
        }
    }

    /// Normalize every row of a row-major `[rows, dim]` buffer.
    pub fn apply_rows(&self, x: &[f32], dim: usize) -> Vec<f32> {
        let mut y = vec![0.0; x.len()];
        for (xr, yr) in x.chunks_exact(dim).zip(y.chunks_exact_mut(dim)) {
            self.apply(xr, yr);
        }
        y
    }
}

/// SiLU / swish: `x·σ(x)` ([`kernels::reference::silu`](crate::kernels::reference::silu), the
/// exponential of the vectorised kernels).
#[inline]
pub fn silu(x: f32) -> f32 {
    crate::kernels::reference::silu(x)
}

/// GELU, exact: `x·Φ(x) = ½x(1 + erf(x/√2))` (Hendrycks & Gimpel, "GELUs", §2), erf in f64.
#[inline]
pub fn gelu_exact(x: f32) -> f32 {
    let x = x as f64;
    (0.5 * x * (1.0 + libm::erf(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
}

/// GELU, tanh approximation (Hendrycks & Gimpel, §2; GPT-2's `gelu_new`, BLOOM).
#[inline]
pub fn gelu(x: f32) -> f32 {
    const C: f32 = 0.797_884_6; // sqrt(2/π)
    0.5 * x * (1.0 + (C * (x + 0.044715 * x * x * x)).tanh())
}

/// In-place softmax over a row (max-subtracted; an all-masked row stays finite because masks are
/// large finite negatives, never −inf): [`kernels::softmax`](crate::kernels::softmax), whose
/// exponential is Cephes' `expf` on eight lanes (within 1 ulp; the same bits on every CPU and in
/// wasm) and whose sum keeps eight partial sums like every dot product here.
pub fn softmax_inplace(x: &mut [f32]) {
    crate::kernels::softmax(x);
}

/// Sinusoidal absolute position embedding for position `pos` (Vaswani et al.), computed in f64.
pub fn sinusoidal_embedding(pos: usize, d: usize, out: &mut [f32]) {
    let half = d / 2;
    for k in 0..half {
        let freq = (10000f64).powf(-(2.0 * k as f64) / d as f64);
        let angle = pos as f64 * freq;
        out[2 * k] = angle.sin() as f32;
        out[2 * k + 1] = angle.cos() as f32;
    }
}

/// Epsilon of [`simple_rms_norm`], added **outside** the square root (fairseq-evo
/// `fairseq/modules/norm/rms_norm.py` `SimpleRMSNorm`).
pub const SIMPLE_RMS_EPS: f32 = 1e-8;

/// SimpleRMSNorm (TransNormer §4.2, Eq. 14's XNorm, as fairseq-evo `SimpleRMSNorm`):
/// `x / (‖x‖₂ / sqrt(n) + 1e-8)`, no gain.
/// The sum of squares is accumulated in f64. An all-zero input stays zero.
pub fn simple_rms_norm(x: &mut [f32]) {
    if x.is_empty() {
        return;
    }
    let ss: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let rms = (ss / x.len() as f64).sqrt();
    let denom = rms + SIMPLE_RMS_EPS as f64;
    for v in x.iter_mut() {
        *v = (*v as f64 / denom) as f32;
    }
}

/// RMSNorm with gain: `x / sqrt(mean(x²) + eps) ⊙ w` (eps inside the root; the residual-stream norm
/// of config.rs and the per-head output norm of GLA/ReGLA/RetNet, ReGLA §3.2;
/// per head as fla `layers/gla.py`).
///
/// # Panics
/// If `w.len() != x.len()` (caller bug, not data).
pub fn rms_norm(x: &mut [f32], w: &[f32], eps: f32) {
    assert_eq!(w.len(), x.len(), "rms_norm: gain length must equal input length");
    if x.is_empty() {
        return;
    }
    let ss: f64 = x.iter().map(|&v| v as f64 * v as f64).sum();
    let inv = 1.0 / (ss / x.len() as f64 + eps as f64).sqrt();
    for (v, &g) in x.iter_mut().zip(w) {
        *v = (*v as f64 * inv * g as f64) as f32;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{with_level, Level};
    use crate::rng::seeded_normal;
    use crate::test_util::close;
    use crate::weights::StorageDtype;

    /// SimpleRMSNorm (fairseq-evo `rms_norm.py`) output has
    /// unit RMS up to eps; zero input stays zero. RMSNorm with gain matches the formula.
    #[test]
    fn norms() {
        let mut x = seeded_normal(64, 8);
        for v in x.iter_mut() {
            *v *= 7.0;
        }
        simple_rms_norm(&mut x);
        let rms = (x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / 64.0).sqrt();
        assert!(close(rms, 1.0, 1e-6), "rms {rms}");
        let mut z = vec![0.0f32; 8];
        simple_rms_norm(&mut z);
        assert!(z.iter().all(|&v| v == 0.0));
        // eps is outside the root: x = [1e-8; n] has rms 1e-8 → x / 2e-8 = 0.5.
        let mut tiny = vec![1e-8f32; 4];
        simple_rms_norm(&mut tiny);
        assert!(tiny.iter().all(|&v| close(v as f64, 0.5, 1e-6)));

        let mut x = vec![3.0f32, -4.0];
        rms_norm(&mut x, &[1.0, 2.0], 0.0);
        let r = (12.5f64).sqrt();
        assert!(close(x[0] as f64, 3.0 / r, 1e-6) && close(x[1] as f64, -8.0 / r, 1e-6));
        let mut x = vec![3.0f32, -4.0];
        rms_norm(&mut x, &[1.0, 1.0], 1.0);
        assert!(close(x[0] as f64, 3.0 / (13.5f64).sqrt(), 1e-6));
    }

    /// `Linear` over `w` held as `dtype` (the values must be exact in it), with bias `b`.
    fn linear_as(w: &[f32], dtype: StorageDtype, out: usize, inp: usize, b: &Option<Vec<f32>>) -> Linear {
        let l = Linear::new(TensorData::lossless(w.to_vec(), dtype), out, inp);
        assert_eq!(l.w.dtype(), dtype);
        match b {
            Some(b) => l.with_bias(b.clone()),
            None => l,
        }
    }

    proptest::proptest! {
        /// `apply_rows` on F16 and BF16 storage equals it on F32 storage of the widened values, bit
        /// for bit, for one row (decode) and blocks of rows, at every kernel level of this machine;
        /// and every output is `dot(W[o], x_r) + b[o]`.
        #[test]
        fn matvec_on_half_storage_is_the_f32_matvec_of_the_widened_values(
            out in 1usize..24,
            inp in 1usize..40,
            rows in 1usize..40,
            seed in 0u64..1000,
            bias: bool,
        ) {
            let x = seeded_normal(rows * inp, seed + 1);
            let b = bias.then(|| seeded_normal(out, seed + 2));
            for dtype in [StorageDtype::F16, StorageDtype::Bf16] {
                let round = |v: f32| match dtype {
                    StorageDtype::F16 => half::f16::from_f32(v).to_f32(),
                    _ => half::bf16::from_f32(v).to_f32(),
                };
                let w: Vec<f32> = seeded_normal(out * inp, seed).into_iter().map(round).collect();
                let yf = linear_as(&w, StorageDtype::F32, out, inp, &b).apply_rows(&x, rows);
                for level in Level::available() {
                    let yh = with_level(level, || linear_as(&w, dtype, out, inp, &b).apply_rows(&x, rows));
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    proptest::prop_assert_eq!(bits(&yh), bits(&yf), "{:?}, {:?}", dtype, level);
                }
                for r in 0..rows {
                    for o in 0..out {
                        let dot_ro = dot(&w[o * inp..(o + 1) * inp], &x[r * inp..(r + 1) * inp]);
                        let expect = dot_ro + b.as_ref().map_or(0.0, |b| b[o]);
                        proptest::prop_assert_eq!(yf[r * out + o].to_bits(), expect.to_bits(), "row {} output {}", r, o);
                    }
                }
            }
        }
    }

    #[test]
    fn dot_matches_naive_sum() {
        let a: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..37).map(|i| (i as f32 * 0.11).cos()).collect();
        let naive: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
        assert!((dot(&a, &b) as f64 - naive).abs() < 1e-5);
    }

    #[test]
    fn softmax_rows_sum_to_one_even_with_masks() {
        let mut row = vec![1.0, -1.0e30, 3.0, 2.0];
        softmax_inplace(&mut row);
        assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert_eq!(row[1], 0.0);
    }

    #[test]
    fn rmsnorm_has_unit_rms_with_unit_gain() {
        let norm = Norm { kind: NormKind::Rmsnorm, eps: 1e-6, weight: vec![1.0; 8], bias: None };
        let x: Vec<f32> = (0..8).map(|i| i as f32 - 3.0).collect();
        let mut y = vec![0.0; 8];
        norm.apply(&x, &mut y);
        let rms = (dot(&y, &y) / 8.0).sqrt();
        assert!((rms - 1.0).abs() < 1e-4);
    }
}
