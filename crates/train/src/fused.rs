//! Fused CPU ops of the candle trainer: the masked softmax of attention scores, the mean
//! cross-entropy of the logits, RMSNorm with its gain and the gates' ln σ(x), each one pass forward
//! and one pass backward over its tensor.
//!
//! candle's composites (`candle_nn::ops::softmax` after an additive mask, `candle_nn::loss::
//! cross_entropy`, RMSNorm as `sqr → mean → + eps → sqrt → div → mul`) take five to seven
//! elementwise passes forward and as many backward, each allocating a tensor of the input's size,
//! and every graph node costs candle's backward a zero-filled gradient slot and an add; the scores
//! (`[B, H, T, T]`) and the logits (`[B·T, V]`) are the largest tensors of a training step at the
//! shipped sizes, and the norms the most frequent. The composites stay as the reference
//! ([`crate::TrainModel::with_library_ops`]): tests pin the two paths together and `attnlab bench
//! --train` measures both.

use attnlab_core::lowering::Window;
use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp1, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor};
use std::sync::{Arc, Mutex};

/// The contiguous f32 data of an op's input.
pub(crate) fn f32_data<'a>(storage: &'a CpuStorage, layout: &Layout, op: &str) -> Result<&'a [f32]> {
    let CpuStorage::F32(v) = storage else { bail!("{op}: expects f32, got {:?}", storage.dtype()) };
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&v[start..end]),
        None => bail!("{op}: expects a contiguous input"),
    }
}

/// The contiguous f32 data of a backward op's two inputs, which must have one shape (a value and
/// its gradient).
fn f32_pair<'a>(
    op: &str,
    (a, al): (&'a CpuStorage, &Layout),
    (b, bl): (&'a CpuStorage, &Layout),
) -> Result<(&'a [f32], &'a [f32])> {
    if al.shape() != bl.shape() {
        bail!("{op}: shapes {:?} and {:?} differ", al.shape(), bl.shape());
    }
    Ok((f32_data(a, al, op)?, f32_data(b, bl, op)?))
}

/// The keys `lo..=i` query `i` sees under `window` (`Window`: `i − i mod w ≤ s ≤ i` for blocks).
fn visible(i: usize, window: Window) -> std::ops::RangeInclusive<usize> {
    let lo = match window {
        Window::Causal => 0,
        Window::Block(bs) => i - i % bs.max(1),
    };
    lo..=i
}

/// `softmax(scale·s + bias)` over the last dim of scores `s: [.., T, T]` with the keys outside
/// `window` masked: `p[i, j] = exp(z[i, j] − m) / Σ_visible exp(z[i, j'] − m)` for visible `j`,
/// exactly 0 otherwise (the composite's `−1e30` mask, whose exp is 0). `bias` is broadcast over
/// the leading dims of `s` (a `[H, T, T]` table for `[B, H, T, T]` scores) and gets its gradient.
pub fn masked_softmax(s: &Tensor, bias: Option<&Tensor>, scale: f64, window: Window) -> Result<Tensor> {
    let op = MaskedSoftmax { window, scale: scale as f32 };
    match bias {
        None => s.contiguous()?.apply_op1(op),
        Some(b) => {
            // Only leading dims may be broadcast: the bias's dims (leading 1s aside) end s's dims.
            let dims = b.dims();
            let own = &dims[dims.iter().take_while(|&&d| d == 1).count()..];
            if !s.dims().ends_with(own) {
                bail!(
                    "masked-softmax: a bias of shape {dims:?} does not broadcast over scores {:?}",
                    s.dims()
                );
            }
            s.contiguous()?.apply_op2(&b.contiguous()?, op)
        }
    }
}

struct MaskedSoftmax {
    window: Window,
    /// Multiplies the scores before the bias is added (in f32, as candle's affine does).
    scale: f32,
}

impl MaskedSoftmax {
    fn forward(&self, s: &[f32], shape: &Shape, bias: Option<&[f32]>) -> Result<(CpuStorage, Shape)> {
        let dims = shape.dims();
        let t = dims.last().copied().unwrap_or(0).max(1);
        if dims.len() < 2 || dims[dims.len() - 2] != t {
            bail!("masked-softmax: expects square [.., T, T] scores, got {dims:?}");
        }
        let bias_len = bias.map_or(t * t, <[f32]>::len);
        if bias_len == 0 || !bias_len.is_multiple_of(t * t) || !s.len().is_multiple_of(bias_len) {
            bail!("masked-softmax: a bias of {bias_len} values does not broadcast over scores {dims:?}");
        }
        let mut p = vec![0f32; s.len()];
        for (row, (sr, pr)) in s.chunks_exact(t).zip(p.chunks_exact_mut(t)).enumerate() {
            let keys = visible(row % t, self.window);
            let (lo, hi) = (*keys.start(), *keys.end());
            let (sr, pr) = (&sr[lo..=hi], &mut pr[lo..=hi]);
            // z = scale·s + bias into the output row, then exp(z − max) in place.
            pr.iter_mut().zip(sr).for_each(|(z, &sv)| *z = sv * self.scale);
            if let Some(b) = bias {
                let at = (row * t) % bias_len;
                pr.iter_mut().zip(&b[at + lo..=at + hi]).for_each(|(z, &bv)| *z += bv);
            }
            let max = pr.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for z in pr.iter_mut() {
                *z = (*z - max).exp();
                sum += *z;
            }
            pr.iter_mut().for_each(|pv| *pv /= sum);
        }
        Ok((CpuStorage::F32(p), shape.clone()))
    }

    /// `dz = p ⊙ (g − Σ_j g⊙p)` per row (0 on masked keys, where p is 0), times `scale`.
    fn grad(&self, p: &Tensor, grad: &Tensor, scale: f32) -> Result<Tensor> {
        p.apply_op2_no_bwd(&grad.contiguous()?, &SoftmaxGrad { window: self.window, scale })
    }
}

impl CustomOp1 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "masked-softmax"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        self.forward(f32_data(storage, layout, "masked-softmax")?, layout.shape(), None)
    }

    fn bwd(&self, _s: &Tensor, p: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(self.grad(p, grad, self.scale)?))
    }
}

impl CustomOp2 for MaskedSoftmax {
    fn name(&self) -> &'static str {
        "masked-softmax-bias"
    }

    fn cpu_fwd(
        &self,
        ss: &CpuStorage,
        sl: &Layout,
        bs: &CpuStorage,
        bl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let bias = f32_data(bs, bl, "masked-softmax-bias")?;
        self.forward(f32_data(ss, sl, "masked-softmax-bias")?, sl.shape(), Some(bias))
    }

    /// `ds = scale·dz`, `dbias = Σ dz` over the dims the bias was broadcast along.
    fn bwd(
        &self,
        _s: &Tensor,
        bias: &Tensor,
        p: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let dz = self.grad(p, grad, 1.0)?;
        let db = dz.apply_op1_no_bwd(&SumCopies { len: bias.elem_count() })?.reshape(bias.shape())?;
        Ok((Some((&dz * f64::from(self.scale))?), Some(db)))
    }
}

/// The softmax's backward of [`MaskedSoftmax`]: `(p, g) → scale · p ⊙ (g − Σ g⊙p)` over each row's
/// visible keys, 0 elsewhere.
struct SoftmaxGrad {
    window: Window,
    scale: f32,
}

impl CustomOp2 for SoftmaxGrad {
    fn name(&self) -> &'static str {
        "softmax-grad"
    }

    fn cpu_fwd(
        &self,
        ps: &CpuStorage,
        pl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (p, g) = f32_pair(self.name(), (ps, pl), (gs, gl))?;
        let t = pl.shape().dims().last().copied().unwrap_or(1).max(1);
        let mut dz = vec![0f32; p.len()];
        let rows = p.chunks_exact(t).zip(g.chunks_exact(t)).zip(dz.chunks_exact_mut(t));
        for (row, ((pr, gr), dr)) in rows.enumerate() {
            let keys = visible(row % t, self.window);
            let (pr, gr, dr) = (&pr[keys.clone()], &gr[keys.clone()], &mut dr[keys]);
            let dot: f32 = pr.iter().zip(gr).map(|(a, b)| a * b).sum();
            for ((d, &pv), &gv) in dr.iter_mut().zip(pr).zip(gr) {
                *d = self.scale * (pv * (gv - dot));
            }
        }
        Ok((CpuStorage::F32(dz), pl.shape().clone()))
    }
}

/// `[k·len] → [len]`: the sum of the `k` consecutive copies (a broadcast bias's gradient; one
/// contiguous pass, where candle's sum over a leading dim walks strided).
struct SumCopies {
    len: usize,
}

impl CustomOp1 for SumCopies {
    fn name(&self) -> &'static str {
        "sum-copies"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_data(storage, layout, self.name())?;
        if self.len == 0 || !x.len().is_multiple_of(self.len) {
            bail!("sum-copies: {} values are no whole number of copies of {}", x.len(), self.len);
        }
        let mut sum = vec![0f32; self.len];
        for copy in x.chunks_exact(self.len) {
            sum.iter_mut().zip(copy).for_each(|(s, v)| *s += v);
        }
        Ok((CpuStorage::F32(sum), Shape::from(self.len)))
    }
}

/// RMSNorm over the last dim with a gain (Zhang & Sennrich 2019, eq. 4):
/// `y = x ⊙ g / √(mean(x²) + eps)` for `x: [.., n]` and `gain: [n]`.
pub fn rms_norm(x: &Tensor, gain: &Tensor, eps: f32) -> Result<Tensor> {
    x.contiguous()?.apply_op2(&gain.contiguous()?, RmsNorm { eps })
}

/// The gain's length `n`, checked: `gain` is `[n]` and `x` is `[.., n]` with `n > 0`.
fn gain_len(op: &str, xl: &Layout, gl: &Layout) -> Result<usize> {
    let n = xl.shape().dims().last().copied().unwrap_or(0);
    if gl.shape().dims() != [n] || n == 0 {
        bail!("{op}: a gain of shape {:?} does not match inputs {:?}", gl.shape(), xl.shape());
    }
    Ok(n)
}

struct RmsNorm {
    eps: f32,
}

/// `1 / √(mean(row²) + eps)`, in f64.
fn inv_rms(row: &[f32], eps: f32) -> f64 {
    let ms = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / row.len() as f64;
    1.0 / (ms + f64::from(eps)).sqrt()
}

impl CustomOp2 for RmsNorm {
    fn name(&self) -> &'static str {
        "rms-norm"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let n = gain_len(self.name(), xl, gl)?;
        let (x, g) = (f32_data(xs, xl, self.name())?, f32_data(gs, gl, self.name())?);
        let mut y = vec![0f32; x.len()];
        for (xr, yr) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)) {
            let r = inv_rms(xr, self.eps);
            yr.iter_mut().zip(xr).zip(g).for_each(|((y, &xv), &gv)| *y = (f64::from(xv) * r) as f32 * gv);
        }
        Ok((CpuStorage::F32(y), xl.shape().clone()))
    }

    /// With `r = 1/√(mean(x²) + eps)` per row: `dx = r·(g⊙dy) − x·r³·Σ(g⊙dy⊙x)/n` and
    /// `dg = Σ_rows dy ⊙ x·r`, both from one pass ([`RmsNormGrad`]).
    fn bwd(
        &self,
        x: &Tensor,
        g: &Tensor,
        _y: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let packed = x.apply_op3_no_bwd(g, &dy.contiguous()?, &RmsNormGrad { eps: self.eps })?;
        let len = x.elem_count();
        let dx = packed.narrow(0, 0, len)?.reshape(x.shape())?;
        Ok((Some(dx), Some(packed.narrow(0, len, g.elem_count())?)))
    }
}

/// The backward of [`RmsNorm`]: `(x, g, dy) → [dx (x's size), dg (n)]`, flat.
struct RmsNormGrad {
    eps: f32,
}

impl CustomOp3 for RmsNormGrad {
    fn name(&self) -> &'static str {
        "rms-norm-grad"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
        ds: &CpuStorage,
        dl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (x, dy) = f32_pair(self.name(), (xs, xl), (ds, dl))?;
        let n = gain_len(self.name(), xl, gl)?;
        let g = f32_data(gs, gl, self.name())?;
        let mut dx = vec![0f32; x.len()];
        let mut dg = vec![0f64; n];
        for ((xr, dr), dxr) in x.chunks_exact(n).zip(dy.chunks_exact(n)).zip(dx.chunks_exact_mut(n)) {
            let r = inv_rms(xr, self.eps);
            let dot: f64 =
                xr.iter().zip(dr).zip(g).map(|((&xv, &dv), &gv)| f64::from(xv * gv) * f64::from(dv)).sum();
            let c = r * r * r * dot / n as f64;
            for (i, d) in dxr.iter_mut().enumerate() {
                let (xv, dv) = (f64::from(xr[i]), f64::from(dr[i]));
                *d = (r * f64::from(g[i]) * dv - xv * c) as f32;
                dg[i] += dv * xv * r;
            }
        }
        let mut out = dx;
        out.extend(dg.iter().map(|&v| v as f32));
        Ok((CpuStorage::F32(out), Shape::from(x.len() + n)))
    }
}

/// `ln σ(x) = min(x, 0) − ln(1 + e^{−|x|})` elementwise, stable at both ends (the gates' log
/// space); its backward is `dy · σ(−x)`.
pub fn log_sigmoid(x: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op1(LogSigmoid)
}

struct LogSigmoid;

impl CustomOp1 for LogSigmoid {
    fn name(&self) -> &'static str {
        "log-sigmoid"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_data(storage, layout, self.name())?;
        let y = x.iter().map(|&v| v.min(0.0) - (-v.abs()).exp().ln_1p()).collect();
        Ok((CpuStorage::F32(y), layout.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, _y: &Tensor, dy: &Tensor) -> Result<Option<Tensor>> {
        Ok(Some(x.apply_op2_no_bwd(&dy.contiguous()?, &LogSigmoidGrad)?))
    }
}

/// The backward of [`LogSigmoid`]: `(x, dy) → dy · σ(−x)`, with `σ(−x) = e^{−x}/(1 + e^{−x})` for
/// `x ≥ 0` and `1/(1 + eˣ)` below (no overflow either way).
struct LogSigmoidGrad;

impl CustomOp2 for LogSigmoidGrad {
    fn name(&self) -> &'static str {
        "log-sigmoid-grad"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ds: &CpuStorage,
        dl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (x, dy) = f32_pair(self.name(), (xs, xl), (ds, dl))?;
        let sigmoid_neg =
            |v: f32| if v >= 0.0 { (-v).exp() / (1.0 + (-v).exp()) } else { 1.0 / (1.0 + v.exp()) };
        let dx = x.iter().zip(dy).map(|(&v, &d)| d * sigmoid_neg(v)).collect();
        Ok((CpuStorage::F32(dx), xl.shape().clone()))
    }
}

/// Mean next-token cross-entropy of `logits: [N, V]` against `targets` (N ids < V):
/// `(1/N) Σ_n (log Σ_v exp(x[n, v]) − x[n, target_n])`, a scalar.
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    let targets = Arc::new(targets.flatten_all()?.to_dtype(DType::U32)?.to_vec1::<u32>()?);
    logits.contiguous()?.apply_op1(CrossEntropy { targets, probs: Mutex::new(None) })
}

struct CrossEntropy {
    targets: Arc<Vec<u32>>,
    /// The forward's softmax of every row, taken by the backward (which then needs no exps).
    probs: Mutex<Option<Vec<f32>>>,
}

/// The rows of `[N, V]` logits with their targets, checked.
fn rows<'a>(
    x: &'a [f32],
    layout: &Layout,
    targets: &'a [u32],
) -> Result<impl Iterator<Item = (&'a [f32], usize)>> {
    let (n, v) = layout.shape().dims2()?;
    if targets.len() != n {
        bail!("cross-entropy: {} targets for {n} rows of logits", targets.len());
    }
    if let Some(t) = targets.iter().find(|&&t| t as usize >= v) {
        bail!("cross-entropy: target id {t} is outside the vocabulary of {v}");
    }
    Ok(x.chunks_exact(v.max(1)).zip(targets.iter().map(|&t| t as usize)))
}

impl CustomOp1 for CrossEntropy {
    fn name(&self) -> &'static str {
        "cross-entropy"
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        let x = f32_data(storage, layout, self.name())?;
        let v = layout.shape().dims2()?.1.max(1);
        let mut probs = vec![0f32; x.len()];
        let mut total = 0f64;
        for ((row, t), pr) in rows(x, layout, &self.targets)?.zip(probs.chunks_exact_mut(v)) {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for (p, &xv) in pr.iter_mut().zip(row) {
                *p = (xv - max).exp();
                sum += *p;
            }
            pr.iter_mut().for_each(|p| *p /= sum);
            total += f64::from(max + sum.ln() - row[t]);
        }
        if let Ok(mut kept) = self.probs.lock() {
            *kept = Some(probs);
        }
        let n = self.targets.len().max(1) as f64;
        Ok((CpuStorage::F32(vec![(total / n) as f32]), Shape::from(())))
    }

    /// `dx[n, v] = g · (softmax(x[n])[v] − [v = target_n]) / N`.
    fn bwd(&self, logits: &Tensor, _loss: &Tensor, grad: &Tensor) -> Result<Option<Tensor>> {
        let scale = grad.to_dtype(DType::F32)?.to_scalar::<f32>()? / self.targets.len().max(1) as f32;
        let kept = self.probs.lock().ok().and_then(|mut p| p.take());
        let Some(mut dx) = kept else { bail!("cross-entropy: a second backward through one forward") };
        let v = logits.dims2()?.1.max(1);
        for (dr, &t) in dx.chunks_exact_mut(v).zip(self.targets.iter()) {
            dr.iter_mut().for_each(|d| *d *= scale);
            dr[t as usize] -= scale;
        }
        Ok(Some(Tensor::from_vec(dx, logits.shape(), logits.device())?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn tensor(v: Vec<f32>, shape: &[usize]) -> Tensor {
        Tensor::from_vec(v, shape, &Device::Cpu).expect("tensor")
    }

    #[test]
    fn block_window_rows_sum_to_one_over_their_block_only() {
        let (t, bs) = (7, 3);
        let s = tensor((0..2 * t * t).map(|i| (i as f32 * 0.7).sin() * 5.0).collect(), &[2, t, t]);
        let p = masked_softmax(&s, None, 0.5, Window::Block(bs)).expect("softmax");
        let p = p.flatten_all().and_then(|x| x.to_vec1::<f32>()).expect("values");
        for (row, r) in p.chunks(t).enumerate() {
            let i = row % t;
            let keys = i - i % bs..=i;
            let inside: f32 = r[keys.clone()].iter().sum();
            assert!((inside - 1.0).abs() < 1e-6, "row {row}: {inside}");
            assert!(r.iter().enumerate().all(|(j, &v)| keys.contains(&j) || v == 0.0), "row {row}: {r:?}");
        }
    }

    #[test]
    fn log_sigmoid_is_finite_at_both_ends_with_gradient_sigmoid_of_minus_x() {
        let xs = vec![-1e30, -200.0, -20.0, -1.0, 0.0, 1.0, 20.0, 200.0, 1e30];
        let x = candle_core::Var::from_tensor(&tensor(xs.clone(), &[xs.len()])).expect("var");
        let y = log_sigmoid(x.as_tensor()).expect("log-sigmoid");
        let grad = y.sum_all().and_then(|s| s.backward()).expect("backward");
        let dx = grad.get(x.as_tensor()).expect("gradient").to_vec1::<f32>().expect("values");
        let y = y.to_vec1::<f32>().expect("values");
        for ((&x, &y), &dx) in xs.iter().zip(&y).zip(&dx) {
            let (x64, y64) = (f64::from(x), f64::from(y));
            let exact = x64.min(0.0) - (-x64.abs()).exp().ln_1p();
            assert!((y64 - exact).abs() <= 1e-6 * exact.abs().max(1e-30), "ln σ({x}) = {y}, not {exact}");
            let sigmoid_neg = 1.0 / (1.0 + x64.exp());
            assert!((f64::from(dx) - sigmoid_neg).abs() <= 1e-6 * sigmoid_neg.max(1e-30), "σ(−{x}) = {dx}");
        }
    }

    /// The fused RMSNorm's gradients against central differences of its own forward in f64.
    #[test]
    fn rms_norm_gradients_match_finite_differences() {
        let (rows, n, eps) = (3, 5, 1e-5f32);
        let xv: Vec<f32> = (0..rows * n).map(|i| (i as f32 * 0.9).sin() * 2.0).collect();
        let gv: Vec<f32> = (0..n).map(|i| 0.5 + i as f32 * 0.3).collect();
        let dyv: Vec<f32> = (0..rows * n).map(|i| (i as f32 * 1.7).cos()).collect();
        let loss = |x: &[f64], g: &[f64]| -> f64 {
            let mut l = 0.0;
            for (r, xr) in x.chunks(n).enumerate() {
                let inv = 1.0 / (xr.iter().map(|v| v * v).sum::<f64>() / n as f64 + f64::from(eps)).sqrt();
                l += (0..n).map(|i| xr[i] * inv * g[i] * f64::from(dyv[r * n + i])).sum::<f64>();
            }
            l
        };
        let (x, g) = (
            candle_core::Var::new(xv.clone(), &Device::Cpu),
            candle_core::Var::new(gv.clone(), &Device::Cpu),
        );
        let (x, g) = (x.expect("x"), g.expect("g"));
        let x2 = x.as_tensor().reshape((rows, n)).expect("rows");
        let y = rms_norm(&x2, g.as_tensor(), eps).expect("rms-norm");
        let weighted = (y * tensor(dyv.clone(), &[rows, n])).and_then(|p| p.sum_all()).expect("sum");
        let grads = weighted.backward().expect("backward");
        let to64 = |v: &[f32]| v.iter().map(|&a| f64::from(a)).collect::<Vec<f64>>();
        let (x64, g64) = (to64(&xv), to64(&gv));
        let numeric = |of_x: bool, i: usize| {
            let h = 1e-6;
            let (mut xp, mut gp, mut xm, mut gm) = (x64.clone(), g64.clone(), x64.clone(), g64.clone());
            if of_x {
                xp[i] += h;
                xm[i] -= h
            } else {
                gp[i] += h;
                gm[i] -= h
            }
            (loss(&xp, &gp) - loss(&xm, &gm)) / (2.0 * h)
        };
        for (var, of_x, len) in [(&x, true, rows * n), (&g, false, n)] {
            let got = grads.get(var.as_tensor()).expect("gradient").to_vec1::<f32>().expect("values");
            for (i, &v) in got.iter().enumerate().take(len) {
                let want = numeric(of_x, i);
                assert!(
                    (f64::from(v) - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "d{} [{i}]: {v} vs {want}",
                    if of_x { "x" } else { "g" }
                );
            }
        }
        let e = rms_norm(&x2, &tensor(vec![1.0; 4], &[4]), eps).unwrap_err();
        assert!(e.to_string().contains("does not match"), "{e}");
    }

    #[test]
    fn bad_targets_and_shapes_are_errors_not_panics() {
        let logits = tensor(vec![0.0; 6], &[2, 3]);
        let e = cross_entropy(&logits, &Tensor::new(&[1u32, 3], &Device::Cpu).expect("ids")).unwrap_err();
        assert!(e.to_string().contains("target id 3 is outside the vocabulary of 3"), "{e}");
        let s = tensor(vec![0.0; 18], &[2, 3, 3]);
        let e = masked_softmax(&s, Some(&tensor(vec![0.0; 4], &[4])), 1.0, Window::Causal).unwrap_err();
        assert!(e.to_string().contains("does not broadcast"), "{e}");
        // [2, 1, 3] would divide the scores' size but broadcasts along a middle dim: refused.
        let s = tensor(vec![0.0; 36], &[2, 2, 3, 3]);
        let e =
            masked_softmax(&s, Some(&tensor(vec![0.0; 18], &[2, 1, 3, 3])), 1.0, Window::Causal).unwrap_err();
        assert!(e.to_string().contains("does not broadcast"), "{e}");
        let ok = masked_softmax(&s, Some(&tensor(vec![0.0; 18], &[1, 2, 3, 3])), 1.0, Window::Causal);
        assert!(ok.is_ok(), "{ok:?}");
        let e = masked_softmax(&tensor(vec![0.0; 6], &[2, 3]), None, 1.0, Window::Causal).unwrap_err();
        assert!(e.to_string().contains("square"), "{e}");
    }
}
