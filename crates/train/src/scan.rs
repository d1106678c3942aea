//! Gated linear attention as one fused CPU op: the recurrence itself, forward and backward.
//!
//! Gated linear attention (GLA §2, Eq. 3; with a two-sided gate, ReGLA §2.1, Eq. 9) keeps a
//! per-head state `S_t ∈ R^{dk×dh}`:
//!
//! `S_t = (e^{lg_t} e^{lgv_t}ᵀ) ⊙ S_{t−1} + φk_t v_tᵀ`, `o_t = S_tᵀ φq_t`,
//!
//! with per-channel log-gates `lg_t ≤ 0` on the key axis and, for a two-sided gate (Fast Decay),
//! `lgv_t ≤ 0` on the value axis (0 for one-sided gates). This is the recurrence of the core's
//! decode step (`attnlab_core::attention::linear`) applied to every token of a training batch, on
//! the core's row kernels; the two agree up to rounding.
//!
//! candle's chunked composite of the same sum ([`gated_chunked`], kept as the reference behind
//! [`crate::TrainModel::with_library_ops`]) builds a graph of ~20 nodes per 16-token chunk; here a
//! `[B, H, T]` batch is one node. Its backward walks the tokens in reverse:
//!
//! * `dS_t = G_{t+1} ⊙ dS_{t+1} + φq_t do_tᵀ` (the state's gradient, carried back),
//! * `dφq_t = S_t do_t`, `dφk_t = dS_t v_t`, `dv_t = dS_tᵀ φk_t`,
//! * `dlg_t[j] = Σ_c dS_t[j, c] (G_t ⊙ S_{t−1})[j, c]` and `dlgv_t[c]` the same sum over `j`,
//!
//! which needs `S_{t−1}` and `S_t` in reverse order: the states are recomputed forward from
//! checkpoints kept every [`CHECKPOINT_EVERY`] tokens, so memory stays `O(T/C·dk·dh + C·dk·dh)` per
//! head instead of every token's state.
//!
//! **Accuracy.** On its own the op is within 1e-7 of f64, and its log-gate gradients within 1e-6 of
//! f64 finite differences at any gate strength (tests below). Inside a trained gla or fast-decay
//! model both this op and the chunked composite have batches whose model-level gradients are
//! 1e-4–1e-3 off an f64 reference, each on different batches, medians within 2× (docs/bench.md,
//! `attnlab bench --train --train-accuracy`).
//!
//! ## The chunked composite
//!
//! The reference of the fused op, built from candle's tensor ops: chunks of [`GATED_CHUNK`] tokens.
//! Inside a chunk, if the cumulative log-gate stays above `FACTORED_MIN_LOG_DECAY` the weights are
//! the matmul of `φq ⊙ e^{b}` and `φk ⊙ e^{−b}`; if not, the chunk is halved (down to
//! `MIN_GATED_CHUNK`) until it does, and a chunk that still decays too fast has its weights built
//! from the `[B, H, C, C, dk]` tensor of exponents `b_i − b_s`, masked to 0 above the diagonal
//! *before* `exp`, so every exponentiated value is `≤ 0` (no overflow, finite gradients). Between
//! chunks a `[B, H, dk, dh]` state is carried exactly as in the core's chunked prefill. Its log-gate
//! gradients pass through a cumulative sum whose terms cancel: at strong gates they are off by up to
//! 1e-3 relative (the tests below, against f64 finite differences).

use crate::attn::window_mask;
use crate::fused::f32_data;
use crate::model::Place;
use attnlab_core::kernels::{axpy, dot, dot_rows, weighted_rows};
use attnlab_core::lowering::Window;
use candle_core::{bail, CpuStorage, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor, D};

/// Tokens between two saved states in the backward's recomputation.
const CHECKPOINT_EVERY: usize = 16;

/// Gated linear attention for `fq, fk, lg: [B, H, T, dk]`, `v: [B, H, T, dh]` and optional
/// value-axis log-gates `lgv: [B, H, T, dh]`; returns `o: [B, H, T, dh]` (module docs). Every input
/// gets its gradient.
pub fn gated_scan(fq: &Tensor, fk: &Tensor, v: &Tensor, lg: &Tensor, lgv: Option<&Tensor>) -> Result<Tensor> {
    let (b, h, t, _) = fq.dims4()?;
    if fk.dims() != fq.dims() || lg.dims() != fq.dims() || v.rank() != 4 || v.dims()[..3] != [b, h, t] {
        bail!(
            "gated scan: q {:?}, k {:?}, log-gates {:?} and v {:?} do not agree",
            fq.dims(),
            fk.dims(),
            lg.dims(),
            v.dims()
        );
    }
    if let Some(g) = lgv {
        if g.dims() != v.dims() {
            bail!("gated scan: value log-gates {:?} do not match v {:?}", g.dims(), v.dims());
        }
    }
    // The inputs stacked in planes, `[3, B, H, T, dk]` and `[1 or 2, B, H, T, dh]`: the op has two
    // inputs, and the stack's backward hands each input a contiguous plane of the gradient.
    let keys = Tensor::stack(&[fq, fk, lg], 0)?;
    let values = match lgv {
        Some(g) => Tensor::stack(&[v, g], 0)?,
        None => v.unsqueeze(0)?.contiguous()?,
    };
    keys.apply_op2(&values, GatedScan { value_gates: lgv.is_some() })
}

/// A scan's shape: `n = B·H` sequences of `t` tokens, key and value widths.
#[derive(Clone, Copy)]
struct Dims {
    n: usize,
    t: usize,
    dk: usize,
    dh: usize,
    value_gates: bool,
}

impl Dims {
    /// The shape of the planar inputs, checked.
    fn of(op: &str, kl: &Layout, vl: &Layout, value_gates: bool) -> Result<Dims> {
        let (kd, vd) = (kl.shape().dims(), vl.shape().dims());
        match (kd, vd) {
            ([3, b, h, t, dk], [p, b2, h2, t2, dh])
                if (b, h, t) == (b2, h2, t2) && *p == 1 + usize::from(value_gates) && t * dk * dh > 0 =>
            {
                Ok(Dims { n: b * h, t: *t, dk: *dk, dh: *dh, value_gates })
            }
            _ => bail!("{op}: planar inputs {kd:?} and {vd:?} do not fit together (or are empty)"),
        }
    }

    /// Floats of one plane and of one sequence in it, keys and values.
    fn sizes(&self) -> ((usize, usize), (usize, usize)) {
        let (ks, vs) = (self.t * self.dk, self.t * self.dh);
        ((self.n * ks, ks), (self.n * vs, vs))
    }
}

/// The planar inputs' shape and data, checked.
fn planar_inputs<'a>(
    op: &str,
    (ks, kl): (&'a CpuStorage, &Layout),
    (vs, vl): (&'a CpuStorage, &Layout),
    value_gates: bool,
) -> Result<(Dims, &'a [f32], &'a [f32])> {
    let d = Dims::of(op, kl, vl, value_gates)?;
    Ok((d, f32_data(ks, kl, op)?, f32_data(vs, vl, op)?))
}

/// One sequence's inputs with its gate factors `e^{lg}: [T, dk]` and `e^{lgv}: [T, dh]` (empty
/// for a one-sided gate), exponentiated once for every pass over the sequence.
struct Sequence<'a> {
    dims: Dims,
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    decay: Vec<f32>,
    value_decay: Vec<f32>,
}

impl<'a> Sequence<'a> {
    /// Sequence `s` of the planar inputs.
    fn new(dims: Dims, keys: &'a [f32], values: &'a [f32], s: usize) -> Sequence<'a> {
        let ((kp, ks), (vp, vs)) = dims.sizes();
        let plane = |x: &'a [f32], p: usize, size: usize, len: usize| &x[p * size + s * len..][..len];
        let lg = plane(keys, 2, kp, ks);
        let value_decay = match dims.value_gates {
            true => plane(values, 1, vp, vs).iter().map(|l| l.exp()).collect(),
            false => Vec::new(),
        };
        Sequence {
            dims,
            q: plane(keys, 0, kp, ks),
            k: plane(keys, 1, kp, ks),
            v: plane(values, 0, vp, vs),
            decay: lg.iter().map(|l| l.exp()).collect(),
            value_decay,
        }
    }

    /// Token `i`'s `φq`, `φk` and `v`.
    fn token(&self, i: usize) -> (&'a [f32], &'a [f32], &'a [f32]) {
        let (dk, dh) = (self.dims.dk, self.dims.dh);
        (&self.q[i * dk..][..dk], &self.k[i * dk..][..dk], &self.v[i * dh..][..dh])
    }

    /// `e^{lg_i}` and, for a two-sided gate, `e^{lgv_i}`.
    fn gates(&self, i: usize) -> (&[f32], Option<&[f32]>) {
        let (dk, dh) = (self.dims.dk, self.dims.dh);
        (&self.decay[i * dk..][..dk], self.dims.value_gates.then(|| &self.value_decay[i * dh..][..dh]))
    }

    /// `S ← G_i ⊙ S + φk_i v_iᵀ` in place (the core's decode step).
    fn advance(&self, s: &mut [f32], i: usize) {
        let ((_, k, v), (decay, value_decay)) = (self.token(i), self.gates(i));
        for ((row, &dj), &kj) in s.chunks_exact_mut(self.dims.dh).zip(decay).zip(k) {
            match value_decay {
                None => row.iter_mut().for_each(|x| *x *= dj),
                Some(ev) => row.iter_mut().zip(ev).for_each(|(x, &e)| *x *= dj * e),
            }
            axpy(kj, v, row);
        }
    }
}

struct GatedScan {
    value_gates: bool,
}

impl CustomOp2 for GatedScan {
    fn name(&self) -> &'static str {
        "gated-scan"
    }

    fn cpu_fwd(
        &self,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (d, keys, values) = planar_inputs(self.name(), (ks, kl), (vs, vl), self.value_gates)?;
        let mut out = vec![0f32; d.n * d.t * d.dh];
        let mut s = vec![0f32; d.dk * d.dh];
        for (seq, o) in out.chunks_exact_mut(d.t * d.dh).enumerate() {
            let sq = Sequence::new(d, keys, values, seq);
            s.fill(0.0);
            for (i, oi) in o.chunks_exact_mut(d.dh).enumerate() {
                sq.advance(&mut s, i);
                weighted_rows(sq.token(i).0, &s, d.dh, oi);
            }
        }
        let dims = kl.shape().dims();
        Ok((CpuStorage::F32(out), Shape::from((dims[1], dims[2], d.t, d.dh))))
    }

    fn bwd(
        &self,
        keys: &Tensor,
        values: &Tensor,
        _o: &Tensor,
        grad: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let op = GatedScanGrad { value_gates: self.value_gates };
        let packed = keys.apply_op3_no_bwd(values, &grad.contiguous()?, &op)?;
        let (kn, vn) = (keys.elem_count(), values.elem_count());
        let dkeys = packed.narrow(0, 0, kn)?.reshape(keys.shape())?;
        let dvalues = packed.narrow(0, kn, vn)?.reshape(values.shape())?;
        Ok((Some(dkeys), Some(dvalues)))
    }
}

/// The backward of [`GatedScan`]: `(keys, values, do) → [d keys, d values]`, flat, each laid out
/// like its input.
struct GatedScanGrad {
    value_gates: bool,
}

impl CustomOp3 for GatedScanGrad {
    fn name(&self) -> &'static str {
        "gated-scan-grad"
    }

    fn cpu_fwd(
        &self,
        ks: &CpuStorage,
        kl: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (d, keys, values) = planar_inputs(self.name(), (ks, kl), (vs, vl), self.value_gates)?;
        let dout = f32_data(gs, gl, self.name())?;
        if dout.len() != d.n * d.t * d.dh {
            bail!(
                "{}: output gradient {:?} does not fit {} sequences of {}",
                self.name(),
                gl.shape(),
                d.n,
                d.t
            );
        }
        let ((kp, ks), (vp, vs)) = d.sizes();
        let mut grads = vec![0f32; keys.len() + values.len()];
        let (dkeys, dvalues) = grads.split_at_mut(keys.len());
        let (dq, rest) = dkeys.split_at_mut(kp);
        let (dk, dlg) = rest.split_at_mut(kp);
        let (dv, dlgv) = dvalues.split_at_mut(vp);
        let mut dlgv = dlgv.chunks_exact_mut(vs);
        let per_seq = dq.chunks_exact_mut(ks).zip(dk.chunks_exact_mut(ks)).zip(dlg.chunks_exact_mut(ks));
        let mut work = Backward::new(d);
        for (seq, (((dq, dk), dlg), dv)) in per_seq.zip(dv.chunks_exact_mut(vs)).enumerate() {
            let sq = Sequence::new(d, keys, values, seq);
            let grads = Grads { dq, dk, dlg, dv, dlgv: dlgv.next() };
            work.sequence(&sq, &dout[seq * d.t * d.dh..][..d.t * d.dh], grads);
        }
        let len = grads.len();
        Ok((CpuStorage::F32(grads), Shape::from(len)))
    }
}

/// One sequence's input gradients, `[T, dk]` and `[T, dh]` each.
struct Grads<'a> {
    dq: &'a mut [f32],
    dk: &'a mut [f32],
    dlg: &'a mut [f32],
    dv: &'a mut [f32],
    dlgv: Option<&'a mut [f32]>,
}

/// Buffers of the reverse walk over one sequence, reused across sequences.
struct Backward {
    /// The state before each checkpoint interval (`S_{c−1}` at token `c`, zeros at 0).
    checkpoints: Vec<f32>,
    /// `S_i` for the tokens of the interval being walked.
    states: Vec<f32>,
    /// The state's gradient `dS_i`.
    ds: Vec<f32>,
    /// Per value channel: `Σ_j e^{lg_i[j]} dS_i[j, ·] ⊙ S_{i−1}[j, ·]`, and one row of `dS ⊙ S`.
    value_sum: Vec<f32>,
    row: Vec<f32>,
}

impl Backward {
    fn new(d: Dims) -> Backward {
        let size = d.dk * d.dh;
        Backward {
            checkpoints: vec![0.0; d.t.div_ceil(CHECKPOINT_EVERY) * size],
            states: vec![0.0; CHECKPOINT_EVERY * size],
            ds: vec![0.0; size],
            value_sum: vec![0.0; d.dh],
            row: vec![0.0; d.dh],
        }
    }

    /// Gradients of one sequence's inputs from its output gradient `dout: [T, dh]`.
    fn sequence(&mut self, sq: &Sequence, dout: &[f32], g: Grads) {
        let d = sq.dims;
        let (size, dh, dk, t) = (d.dk * d.dh, d.dh, d.dk, d.t);
        // Forward once, keeping the state before every interval.
        let mut s = vec![0f32; size];
        for i in 0..t {
            if i % CHECKPOINT_EVERY == 0 {
                self.checkpoints[i / CHECKPOINT_EVERY * size..][..size].copy_from_slice(&s);
            }
            sq.advance(&mut s, i);
        }
        self.ds.fill(0.0);
        let mut dlgv = g.dlgv;
        for c in (0..t.div_ceil(CHECKPOINT_EVERY)).rev() {
            let (c0, len) = (c * CHECKPOINT_EVERY, CHECKPOINT_EVERY.min(t - c * CHECKPOINT_EVERY));
            // The interval's states S_{c0} … S_{c0+len−1}, from its checkpoint.
            let start = &self.checkpoints[c * size..][..size];
            for i in 0..len {
                let (done, rest) = self.states.split_at_mut(i * size);
                rest[..size].copy_from_slice(if i == 0 { start } else { &done[(i - 1) * size..] });
                sq.advance(&mut rest[..size], c0 + i);
            }
            for i in (0..len).rev() {
                let tt = c0 + i;
                let (q, k, v) = sq.token(tt);
                let st = &self.states[i * size..][..size];
                let prev = if i == 0 { start } else { &self.states[(i - 1) * size..][..size] };
                let go = &dout[tt * dh..][..dh];
                // o_t = S_tᵀ φq_t: dφq_t = S_t do_t, dS_t += φq_t do_tᵀ.
                dot_rows(go, st, dh, &mut g.dq[tt * dk..][..dk]);
                for (row, &qj) in self.ds.chunks_exact_mut(dh).zip(q) {
                    axpy(qj, go, row);
                }
                // S_t = G_t ⊙ S_{t−1} + φk_t v_tᵀ.
                dot_rows(v, &self.ds, dh, &mut g.dk[tt * dk..][..dk]);
                weighted_rows(k, &self.ds, dh, &mut g.dv[tt * dh..][..dh]);
                let scratch = (&mut self.value_sum[..], &mut self.row[..]);
                let dlg = &mut g.dlg[tt * dk..][..dk];
                let dlgv = dlgv.as_deref_mut().map(|x| &mut x[tt * dh..][..dh]);
                gate_grads(&mut self.ds, scratch, prev, sq.gates(tt), (dlg, dlgv));
            }
        }
    }
}

/// With `ds = dS_t` and `prev = S_{t−1}`: the log-gates' gradients `dlg[j] = Σ_c dS[j, c]·G[j, c]·
/// S_{t−1}[j, c]` (and `dlgv[c]` the same sum over `j` when the values are gated), then
/// `dS ← G ⊙ dS`, the gradient of `S_{t−1}`.
fn gate_grads(
    ds: &mut [f32],
    (value_sum, row): (&mut [f32], &mut [f32]),
    prev: &[f32],
    (decay, value_decay): (&[f32], Option<&[f32]>),
    (dlg, dlgv): (&mut [f32], Option<&mut [f32]>),
) {
    let dh = row.len();
    value_sum.fill(0.0);
    for (((drow, prow), &dj), g) in ds.chunks_exact_mut(dh).zip(prev.chunks_exact(dh)).zip(decay).zip(dlg) {
        match value_decay {
            None => {
                *g = dj * dot(drow, prow);
                drow.iter_mut().for_each(|x| *x *= dj);
            }
            Some(ev) => {
                row.iter_mut().zip(drow.iter()).zip(prow).for_each(|((r, &a), &b)| *r = a * b);
                *g = dj * dot(row, ev);
                axpy(dj, row, value_sum);
                drow.iter_mut().zip(ev).for_each(|(x, &e)| *x *= dj * e);
            }
        }
    }
    if let (Some(ev), Some(dlgv)) = (value_decay, dlgv) {
        dlgv.iter_mut().zip(ev).zip(value_sum.iter()).for_each(|((x, &e), &v)| *x = e * v);
    }
}

/// Chunk length of the gated (GLA, ReGLA) training form. Any value gives the same result up to
/// rounding; 16 bounds the `[B, H, C, C, dk]` intermediate and measured fastest (8 and 32 are slower)
/// where the gates are mild; strongly decaying chunks are shrunk (see [`MIN_GATED_CHUNK`]).
const GATED_CHUNK: usize = 16;

/// Smallest chunk-local cumulative log-decay for which [`gated_chunked`] factors `e^{b_i − b_s}` into
/// `e^{b_i}·e^{−b_s}` (so no factor exceeds `e^{40}`); below it the exact pairwise form is used.
const FACTORED_MIN_LOG_DECAY: f32 = -40.0;

/// Shortest chunk [`gated_chunked`] shrinks a strongly decaying chunk to before it takes the
/// pairwise form (whose `[B, H, C, C, dk]` tensor grows with C).
const MIN_GATED_CHUNK: usize = 4;

/// Chunked gated form with per-channel log-gates (module docs, "The chunked composite"): every exponent is `≤ 0`. With
/// value-axis log-gates `lgv: [B, H, T, dh]` (Fast Decay) the term of token s in output i is also
/// scaled by `e^{c_i − c_s}` per value channel, `c` the chunk-local cumulative `lgv`.
pub(crate) fn gated_chunked(
    fq: &Tensor,
    fk: &Tensor,
    v: &Tensor,
    lg: &Tensor,
    lgv: Option<&Tensor>,
) -> crate::Result<Tensor> {
    let (b, h, t, dk) = fq.dims4()?;
    let dh = v.dim(3)?;
    let mut state = Tensor::zeros((b, h, dk, dh), fq.dtype(), fq.device())?;
    let mut outs = Vec::new();
    let mut c0 = 0;
    while c0 < t {
        let mut n = GATED_CHUNK.min(t - c0);
        // b_i = Σ_{u=c0..i} lg_u, chunk-local and inclusive.
        let mut bc = lg.narrow(2, c0, n)?.contiguous()?.cumsum(2)?;
        let mut cv = lgv.map(|l| l.narrow(2, c0, n)?.contiguous()?.cumsum(2)).transpose()?;
        // Strong decay on either axis: a shorter chunk from the same start (its cumulative gates
        // are a prefix of these) until the factored forms are safe or the chunk is MIN_GATED_CHUNK long.
        let strong = |x: &Tensor| -> Result<bool> { Ok(min_value(x)? < FACTORED_MIN_LOG_DECAY) };
        while n > MIN_GATED_CHUNK && (strong(&bc)? || cv.as_ref().map(strong).transpose()? == Some(true)) {
            n = (n / 2).max(MIN_GATED_CHUNK);
            bc = bc.narrow(2, 0, n)?;
            cv = cv.map(|c| c.narrow(2, 0, n)).transpose()?;
        }
        let q = fq.narrow(2, c0, n)?;
        let k = fk.narrow(2, c0, n)?;
        let vv = v.narrow(2, c0, n)?;
        // Inter-chunk: (φq ⊙ e^{b_i}) · S_start (⊙ e^{c_i}).
        let mut inter = (&q * bc.exp()?)?.matmul(&state)?;
        if let Some(cv) = &cv {
            inter = (inter * cv.exp()?)?;
        }
        let p = if min_value(&bc)? >= FACTORED_MIN_LOG_DECAY {
            // Mild decay inside the chunk: e^{b_i − b_s} = e^{b_i}·e^{−b_s} with e^{−b_s} ≤ e^{40}, so
            // the pairwise weights are one masked matmul.
            let mask = window_mask(n, Window::Causal, Place::of(fq))?.reshape((1, 1, n, n))?;
            let qd = (&q * bc.exp()?)?;
            let kd = (&k * bc.neg()?.exp()?)?;
            qd.matmul(&kd.t()?.contiguous()?)?.broadcast_mul(&mask)?
        } else {
            // Strong decay: exponents b_i − b_s masked to 0 above the diagonal before exp.
            let mask = window_mask(n, Window::Causal, Place::of(fq))?.reshape((1, 1, n, n, 1))?;
            let diff = bc.unsqueeze(3)?.broadcast_sub(&bc.unsqueeze(2)?)?; // [B,H,i,s,dk]
            let e = diff.broadcast_mul(&mask)?.exp()?.broadcast_mul(&mask)?;
            let qk = q.unsqueeze(3)?.broadcast_mul(&k.unsqueeze(2)?)?;
            (qk * e)?.sum(D::Minus1)? // [B,H,n,n]
        };
        let intra = match &cv {
            None => p.matmul(&vv)?,
            Some(cv) => value_decayed(&p, &vv, cv)?,
        };
        outs.push((inter + intra)?);
        // Carry: S ← e^{b_last} ⊙ S + (φk ⊙ e^{b_last − b_s})ᵀ v (value side: S ⊙ e^{c_last} by
        // column, v_s ⊙ e^{c_last − c_s}).
        let last = bc.narrow(2, n - 1, 1)?; // [B,H,1,dk]
        let kw = (&k * last.broadcast_sub(&bc)?.exp()?)?;
        let mut decayed = state.broadcast_mul(&last.exp()?.transpose(2, 3)?)?;
        let mut vw = vv.clone();
        if let Some(cv) = &cv {
            let lastv = cv.narrow(2, n - 1, 1)?; // [B,H,1,dh]
            decayed = decayed.broadcast_mul(&lastv.exp()?)?;
            vw = (vw * lastv.broadcast_sub(cv)?.exp()?)?;
        }
        state = (decayed + kw.t()?.contiguous()?.matmul(&vw)?)?;
        c0 += n;
    }
    Ok(Tensor::cat(&outs, 2)?)
}

/// The smallest entry of `x`, in f32 (f32 and f64 tensors alike).
fn min_value(x: &Tensor) -> Result<f32> {
    x.min_all()?.to_dtype(DType::F32)?.to_scalar::<f32>()
}

/// `o_i[v] = Σ_{s≤i} P[i, s] e^{c_i[v] − c_s[v]} v_s[v]` for the key-axis weights `p: [B, H, n, n]`
/// (0 above the diagonal) and the chunk-local cumulative value log-gates `cv: [B, H, n, dh]`:
/// factored as `e^{c_i} ⊙ (P · (e^{−c_s} ⊙ v))` while `c ≥ FACTORED_MIN_LOG_DECAY`, otherwise from the
/// masked `[B, H, n, n, dh]` exponents (all `≤ 0`).
fn value_decayed(p: &Tensor, vv: &Tensor, cv: &Tensor) -> crate::Result<Tensor> {
    if min_value(cv)? >= FACTORED_MIN_LOG_DECAY {
        return Ok((p.matmul(&(vv * cv.neg()?.exp()?)?)? * cv.exp()?)?);
    }
    let n = p.dim(2)?;
    let mask = window_mask(n, Window::Causal, Place::of(p))?.reshape((1, 1, n, n, 1))?;
    let diff = cv.unsqueeze(3)?.broadcast_sub(&cv.unsqueeze(2)?)?; // [B,H,i,s,dh]
    let e = diff.broadcast_mul(&mask)?.exp()?.broadcast_mul(&mask)?;
    let terms = e.broadcast_mul(&p.unsqueeze(4)?)?.broadcast_mul(&vv.unsqueeze(2)?)?;
    Ok(terms.sum(3)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Naive f64 reference of §5.6: `o_i = Σ_{s≤i} Σ_j φq_i[j] φk_s[j] e^{Σ_{s<u≤i} lg_u[j]} v_s`, with
    /// value-axis log-gates `lgv` (`[T, dh]`, Fast Decay) also `v_s[c]·e^{Σ_{s<u≤i} lgv_u[c]}`.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        fq: &[f64],
        fk: &[f64],
        v: &[f64],
        lg: &[f64],
        lgv: &[f64],
        t: usize,
        dk: usize,
        dh: usize,
    ) -> Vec<f64> {
        let sum = |g: &[f64], w: usize, s: usize, i: usize, c: usize| -> f64 {
            (s + 1..=i).map(|u| g.get(u * w + c).copied().unwrap_or(0.0)).sum()
        };
        let mut o = vec![0.0f64; t * dh];
        for i in 0..t {
            for s in 0..=i {
                let mut p = 0.0f64;
                for j in 0..dk {
                    p += fq[i * dk + j] * fk[s * dk + j] * sum(lg, dk, s, i, j).exp();
                }
                for c in 0..dh {
                    o[i * dh + c] += p * v[s * dh + c] * sum(lgv, dh, s, i, c).exp();
                }
            }
        }
        o
    }

    /// Deterministic test values: `[B, H, T, w]` of `f(i)` for the flat index `i`.
    fn filled(dims: (usize, usize, usize, usize), f: impl Fn(usize) -> f32) -> Tensor {
        let n = dims.0 * dims.1 * dims.2 * dims.3;
        Tensor::from_vec((0..n).map(f).collect::<Vec<_>>(), dims, &Device::Cpu).expect("tensor")
    }

    /// Relative L2 distance of two tensors.
    fn rel_l2(a: &Tensor, b: &Tensor) -> f64 {
        let (a, b) = (a.flatten_all().expect("a"), b.flatten_all().expect("b"));
        let (a, b) = (a.to_vec1::<f32>().expect("a"), b.to_vec1::<f32>().expect("b"));
        let diff: f64 = a.iter().zip(&b).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum();
        let norm: f64 = b.iter().map(|y| (*y as f64).powi(2)).sum();
        (diff / norm.max(1e-300)).sqrt()
    }

    /// The fused recurrence ([`scan::gated_scan`]) gives the chunked composite's output and the
    /// gradients of φq, φk and v for mild and strong gates, one- and two-sided, keys narrower than
    /// values, several sequences, and a length that leaves a short last checkpoint interval. The
    /// log-gates' gradients are compared at mild gates only: at strong ones the composite's own error
    /// grows to 1e-3 (next test, against f64 finite differences, which the fused op meets to 1e-6).
    #[test]
    fn fused_gated_scan_matches_the_chunked_composite_and_its_gradients() {
        let (b, h, t, dk, dh) = (2, 3, 37, 4, 6);
        let val = |i: usize, a: f32| (i as f32 * a).sin() * 0.9;
        for scale in [0.05f32, 6.0, 40.0] {
            for two_sided in [false, true] {
                let vars: Vec<candle_core::Var> = [
                    filled((b, h, t, dk), |i| val(i, 0.37).abs() + 0.1),
                    filled((b, h, t, dk), |i| val(i, 0.71).abs() + 0.1),
                    filled((b, h, t, dh), |i| val(i, 1.3)),
                    filled((b, h, t, dk), |i| -scale * (val(i, 0.53).abs() + 0.05)),
                    filled((b, h, t, dh), |i| -scale * (val(i, 0.29).abs() + 0.05)),
                ]
                .into_iter()
                .map(|x| candle_core::Var::from_tensor(&x).expect("var"))
                .collect();
                let weights = filled((b, h, t, dh), |i| val(i, 0.11));
                let run = |fused: bool| {
                    let [fq, fk, v, lg, lgv] = [0, 1, 2, 3, 4].map(|i| vars[i].as_tensor());
                    let side = two_sided.then_some(lgv);
                    let o = match fused {
                        true => gated_scan(fq, fk, v, lg, side).expect("fused"),
                        false => gated_chunked(fq, fk, v, lg, side).expect("chunked"),
                    };
                    let grads =
                        (&o * &weights).expect("mul").sum_all().expect("sum").backward().expect("bwd");
                    let g: Vec<Option<Tensor>> = vars.iter().map(|x| grads.get(x).cloned()).collect();
                    (o, g)
                };
                let ((o, g), (o_ref, g_ref)) = (run(true), run(false));
                let case = format!("scale {scale}, two-sided {two_sided}");
                assert!(rel_l2(&o, &o_ref) < 1e-6, "{case}: output {}", rel_l2(&o, &o_ref));
                for (i, name) in ["φq", "φk", "v", "lg", "lgv"].iter().enumerate() {
                    match (&g[i], &g_ref[i]) {
                        (Some(x), Some(r)) => {
                            let e = rel_l2(x, r);
                            let compared = i < 3 || scale < 1.0;
                            assert!(e < 1e-5 || !compared, "{case}: gradient of {name} differs by {e:.2e}");
                        }
                        (None, None) => assert!(i == 4 && !two_sided, "{case}: no gradient for {name}"),
                        _ => panic!("{case}: one path has a gradient for {name}, the other not"),
                    }
                }
            }
        }
    }

    /// Central differences of `loss` in each entry of `x`, in f64.
    fn central_differences(loss: impl Fn(&[f64]) -> f64, x: &[f64]) -> Vec<f64> {
        (0..x.len())
            .map(|i| {
                let (mut up, mut down) = (x.to_vec(), x.to_vec());
                let step = 1e-6 * x[i].abs().max(1.0);
                up[i] += step;
                down[i] -= step;
                (loss(&up) - loss(&down)) / (2.0 * step)
            })
            .collect()
    }

    /// A `[1, 1, t, w]` variable of `x` in f32.
    fn var(x: &[f64], t: usize) -> candle_core::Var {
        let x32: Vec<f32> = x.iter().map(|&y| y as f32).collect();
        let w = x.len() / t;
        candle_core::Var::from_tensor(&Tensor::from_vec(x32, (1, 1, t, w), &Device::Cpu).expect("t"))
            .expect("var")
    }

    /// Inputs that do not fit, or an empty sequence, are named errors, not panics.
    #[test]
    fn bad_shapes_are_errors() {
        let z = |dims: (usize, usize, usize, usize)| {
            Tensor::zeros(dims, DType::F32, &Device::Cpu).expect("zeros")
        };
        let (q, v) = (z((1, 2, 5, 4)), z((1, 2, 5, 3)));
        assert!(gated_scan(&q, &q, &v, &z((1, 2, 5, 3)), None).is_err(), "log-gates of the wrong width");
        assert!(gated_scan(&q, &q, &z((1, 2, 4, 3)), &q, None).is_err(), "values of another length");
        assert!(gated_scan(&q, &q, &v, &q, Some(&q)).is_err(), "value log-gates of the wrong width");
        let (e, ev) = (z((1, 2, 0, 4)), z((1, 2, 0, 3)));
        let err = gated_scan(&e, &e, &ev, &e, None).expect_err("an empty sequence");
        assert!(err.to_string().contains("empty"), "{err}");
    }

    /// At every gate strength, one- and two-sided, the fused recurrence's log-gate gradients equal
    /// central differences of the f64 reference [`naive`] to f32 rounding; the chunked composite's
    /// reach them through a cumulative sum whose terms cancel, and are printed beside for the record.
    #[test]
    fn fused_gated_scan_log_gate_gradients_equal_f64_finite_differences() {
        let (t, dk, dh) = (37, 4, 6);
        let val = |i: usize, a: f64| (i as f64 * a).sin() * 0.9;
        let fq: Vec<f64> = (0..t * dk).map(|i| val(i, 0.37).abs() + 0.1).collect();
        let fk: Vec<f64> = (0..t * dk).map(|i| val(i, 0.71).abs() + 0.1).collect();
        let v: Vec<f64> = (0..t * dh).map(|i| val(i, 1.3)).collect();
        let w: Vec<f64> = (0..t * dh).map(|i| val(i, 0.11)).collect();
        let loss = |lg: &[f64], lgv: &[f64]| -> f64 {
            naive(&fq, &fk, &v, lg, lgv, t, dk, dh).iter().zip(&w).map(|(o, w)| o * w).sum()
        };
        let (qv, kv, vv, wv) = (var(&fq, t), var(&fk, t), var(&v, t), var(&w, t));
        for (scale, two_sided) in [0.05, 6.0, 40.0].into_iter().flat_map(|s| [(s, false), (s, true)]) {
            let lg: Vec<f64> = (0..t * dk).map(|i| -scale * (val(i, 0.53).abs() + 0.05)).collect();
            let lgv: Vec<f64> = match two_sided {
                true => (0..t * dh).map(|i| -scale * (val(i, 0.29).abs() + 0.05)).collect(),
                false => Vec::new(),
            };
            let want_lg = central_differences(|g| loss(g, &lgv), &lg);
            let want_lgv = central_differences(|g| loss(&lg, g), &lgv);
            let (lgt, lgvt) = (var(&lg, t), two_sided.then(|| var(&lgv, t)));
            let errors = |fused: bool| -> (f64, f64) {
                let side = lgvt.as_ref().map(|x| x.as_tensor());
                let o = match fused {
                    true => gated_scan(&qv, &kv, &vv, &lgt, side).expect("fused"),
                    false => gated_chunked(&qv, &kv, &vv, &lgt, side).expect("chunked"),
                };
                let grads =
                    (&o * wv.as_tensor()).expect("mul").sum_all().expect("sum").backward().expect("bwd");
                let err = |var: &candle_core::Var, want: &[f64]| {
                    let got = grads.get(var).expect("grad").flatten_all().expect("f");
                    let got = got.to_vec1::<f32>().expect("v");
                    let diff: f64 = got.iter().zip(want).map(|(g, w)| (*g as f64 - w).powi(2)).sum();
                    (diff / want.iter().map(|w| w * w).sum::<f64>()).sqrt()
                };
                (err(&lgt, &want_lg), lgvt.as_ref().map_or(0.0, |x| err(x, &want_lgv)))
            };
            let (fused, chunked) = (errors(true), errors(false));
            println!(
                "scale {scale}, two-sided {two_sided}: relative error of d lg, d lgv: fused {:.2e}, {:.2e}; \
                 chunked {:.2e}, {:.2e}",
                fused.0, fused.1, chunked.0, chunked.1
            );
            assert!(
                fused.0 < 1e-5 && fused.1 < 1e-5,
                "scale {scale}, two-sided {two_sided}: fused {fused:?}"
            );
        }
    }

    /// Both the factored (mild gates) and the pairwise (strong gates, cumulative decay far below
    /// −40 within a chunk) paths equal the naive reference and stay finite, one-sided (GLA, ReGLA)
    /// and two-sided (Fast Decay, ReGLA Eq. 9–10).
    #[test]
    fn gated_chunked_matches_the_naive_recurrence_for_mild_and_strong_gates() {
        let (t, dk, dh) = (37, 4, 3);
        let dev = Device::Cpu;
        let val = |i: usize, a: f32| (i as f32 * a).sin() * 0.9;
        let fq: Vec<f32> = (0..t * dk).map(|i| val(i, 0.37).abs() + 0.1).collect();
        let fk: Vec<f32> = (0..t * dk).map(|i| val(i, 0.71).abs() + 0.1).collect();
        let v: Vec<f32> = (0..t * dh).map(|i| val(i, 1.3)).collect();
        // Per-token log-gates of about −0.03 (16-token chunks, factored), −3.4 (shrunk to 8), −5 (to
        // 4) and −23 (4 tokens, still the pairwise form); 37 tokens leave short tail chunks.
        for scale in [0.05f32, 6.0, 9.0, 40.0] {
            let lg: Vec<f32> = (0..t * dk).map(|i| -scale * (val(i, 0.53).abs() + 0.05)).collect();
            let lgv: Vec<f32> = (0..t * dh).map(|i| -scale * (val(i, 0.29).abs() + 0.05)).collect();
            let tq = |x: &[f32], w: usize| Tensor::from_vec(x.to_vec(), (1, 1, t, w), &dev).expect("tensor");
            for two_sided in [false, true] {
                let lgv_t = tq(&lgv, dh);
                let side = two_sided.then_some(&lgv_t);
                let got = gated_chunked(&tq(&fq, dk), &tq(&fk, dk), &tq(&v, dh), &tq(&lg, dk), side)
                    .expect("chunked")
                    .flatten_all()
                    .expect("flat")
                    .to_vec1::<f32>()
                    .expect("vec");
                let wide = |x: &[f32]| x.iter().map(|&y| y as f64).collect::<Vec<_>>();
                let lgv_side = if two_sided { wide(&lgv) } else { vec![] };
                let want = naive(&wide(&fq), &wide(&fk), &wide(&v), &wide(&lg), &lgv_side, t, dk, dh);
                let max_ref = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
                for (g, w) in got.iter().zip(&want) {
                    assert!(g.is_finite());
                    let ok = (*g as f64 - w).abs() <= 1e-5 * max_ref;
                    assert!(ok, "scale {scale}, two-sided {two_sided}: {g} vs {w}");
                }
            }
        }
    }
}
