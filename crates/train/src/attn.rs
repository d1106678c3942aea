//! Training-form attention for every variant (docs/model-format.md §5.3–5.9), mirroring
//! `attnlab_core::attention` operation by operation but on whole `[B, H, T, ·]` tensors with
//! autograd. Learnable position and gate parameters (Kerple a/p with clamps, the T5 bucket table,
//! the FIRE MLP, mep-param a/p, LRPE θ, GLA/ReGLA gates) are used inside the
//! graph so they receive gradients; fixed tables (ALiBi, Gaussian, Sandwich, MEP) are constants
//! built with the core's own `bias` functions, and LRPE's Householder v is read detached (fixed).
//!
//! Linear family (§5.6): `o_i = Σ_{s≤i} (Σ_j φq_i[j] φk_s[j] e^{b_i[j] − b_s[j]}) v_s`.
//! * no decay (linear-elu, TransNormer Norm, LRPE): `P = (φq φkᵀ) ⊙ causal`, one matmul;
//! * per-head scalar decay (RetNet): `P = (φq φkᵀ) ⊙ Γ` with the constant `Γ[h,i,s] = γ_h^{i−s}`;
//! * per-channel gates (GLA, ReGLA, Fast Decay): the recurrence as one fused op
//!   ([`scan::gated_scan`]), or with `library_ops` candle's chunked composite of it
//!   ([`scan::gated_chunked`]).

// Reference math: several tensors are indexed in parallel.
#![allow(clippy::needless_range_loop)]

use crate::error::{Result, TrainError};
use crate::fused;
use crate::model::{const_f64, linear, Place, TrainModel};
use crate::scan;
use attnlab_core::bias;
use attnlab_core::lowering::{
    Bias, FeatureMap, Gate as LwGate, LearnedTable, LinearLowering, LowerBoundRow, Lowering, Post, Rotation,
    SoftmaxLowering, Window,
};
use attnlab_core::lrpe::{self, Lrpe};
use attnlab_core::variants::lrpe::{LrpeCore, LrpeP};
use candle_core::{DType, Tensor, D};

/// Additive mask value of the softmax family (the core's `bias::MASKED`).
const MASKED: f64 = bias::MASKED as f64;

/// One attention layer: normed input `u: [B, T, d]` → `Wo · Attn(u)`, `[B, T, d]`. Dispatches on the
/// layer's lowered form (computed once when the model was built; only its structure, constants and
/// tensor names are read here, never the values of learned tensors).
pub(crate) fn forward(m: &TrainModel, i: usize, u: &Tensor) -> Result<Tensor> {
    let cfg = m.config();
    let (h, kv, dh, qk) = (cfg.n_heads, cfg.kv_heads(), cfg.head_dim, cfg.key_head_dim());
    let (p, b) = (|n: &str| format!("layers.{i}.attn.{n}"), cfg.biases.qkv);
    let proj = |w: &str, bias: &str| m.linear(u, &p(w), b.then(|| p(bias)).as_deref());
    let q = heads(&proj("wq", "bq")?, h, qk)?;
    let k = repeat_kv(&heads(&proj("wk", "bk")?, kv, qk)?, h / kv)?;
    let v = repeat_kv(&heads(&proj("wv", "bv")?, kv, dh)?, h / kv)?;
    let out = match m.lowering(i)? {
        Lowering::Softmax(sl) => softmax_layer(m, sl, &q, &k, &v)?,
        Lowering::Linear(ll) => linear_layer(m, ll, u, &q, &k, &v)?,
    };
    m.linear(&out, &p("wo"), cfg.biases.attn_out.then(|| p("bo")).as_deref())
}

/// Grouped-query attention: `[B, kv, T, dh]` → `[B, kv·group, T, dh]`, each kv head repeated
/// `group` times in place (the core's `Linear::repeat_heads`; transformers' `repeat_kv`).
fn repeat_kv(x: &Tensor, group: usize) -> Result<Tensor> {
    if group == 1 {
        return Ok(x.clone());
    }
    let (b, kv, t, dh) = x.dims4()?;
    Ok(x.unsqueeze(2)?.expand((b, kv, group, t, dh))?.reshape((b, kv * group, t, dh))?)
}

/// Softmax family (§5.4): optional RoPE on q and k, the bias, the window, softmax (or T1's ReLU and
/// SimpleRMSNorm). Returns `[B, T, H·dh]`.
fn softmax_layer(m: &TrainModel, sl: &SoftmaxLowering, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Tensor> {
    let t = q.dim(2)?;
    let at = m.place();
    let (q, k) = match &sl.rope {
        Some(freqs) => {
            let (cos, sin) = rope_tables(t, freqs, at)?;
            (rotate_pairs(q, &cos, &sin)?, rotate_pairs(k, &cos, &sin)?)
        }
        None => (q.clone(), k.clone()),
    };
    let bias = match &sl.bias {
        Bias::Contextual { npos, pos_emb } => {
            Scores::Contextual { npos: *npos, pos_emb: m.w(&pos_emb.name)? }
        }
        other => Scores::Additive(position_bias(m, other, t)?),
    };
    let o = merge(&softmax_kernel(&q, &k, v, sl, &bias, at, m.library_ops())?)?;
    if sl.relu_with_norm {
        simple_rms_norm(&o)
    } else {
        Ok(o)
    }
}

/// Linear family (§5.6): gate, feature maps, position transform, scan, post step. Returns
/// `[B, T, H·dh]`.
fn linear_layer(
    m: &TrainModel,
    ll: &LinearLowering,
    u: &Tensor,
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
) -> Result<Tensor> {
    // `qk`: the query/key head width (the value heads may be wider, `qk_head_dim`).
    let (h, t, qk) = (q.dim(1)?, q.dim(2)?, q.dim(3)?);
    let at = m.place();
    let (mut gate, key) = log_gate(m, &ll.gate, u, k, h, qk)?;
    let fq = feature_map(ll.q.map, q)?;
    let fk = match key {
        Some(key) => key,
        None if ll.k.map == FeatureMap::ExpRunningMax => {
            // φk = exp(k − M_t) with the running key max M_t = max_{s≤t} max_j k_s[j] (a masked max over
            // [T, T]); the state rescale e^{M_{t−1} − M_t} is folded into the log-gate (0 at t = 0).
            let kmax = k.max_keepdim(D::Minus1)?.transpose(2, 3)?; // [B, H, 1, T]
            let cm = kmax.broadcast_add(&causal_additive(t, at)?)?.max_keepdim(D::Minus1)?; // [B,H,T,1]
            let prev = if t > 1 {
                Tensor::cat(&[cm.narrow(2, 0, 1)?, cm.narrow(2, 0, t - 1)?], 2)?
            } else {
                cm.clone()
            };
            gate = match gate {
                Gate::PerChannel { lg, lgv } => {
                    Gate::PerChannel { lg: lg.broadcast_add(&(prev - &cm)?)?, lgv }
                }
                _ => return Err(unsupported("a running key max needs a per-channel gate")),
            };
            k.broadcast_sub(&cm)?.exp()?
        }
        None => feature_map(ll.k.map, k)?,
    };
    let (fq, fk) = match &ll.rotation {
        None => (fq, fk),
        Some(Rotation::Rope { inv_freq }) => {
            let (cos, sin) = rope_tables(t, inv_freq, at)?;
            (rotate_pairs(&fq, &cos, &sin)?, rotate_pairs(&fk, &cos, &sin)?)
        }
        Some(Rotation::Lrpe { lrpe, theta, householder }) => {
            let tr = LrpeTransform::new(m, lrpe, theta.as_deref(), householder.as_deref(), t, at)?;
            (tr.apply(&fq)?, tr.apply(&fk)?)
        }
    };
    let scaled = |x: Tensor, s: f32| -> Result<Tensor> { Ok(if s == 1.0 { x } else { (x * s as f64)? }) };
    let (fq, fk) = (scaled(fq, ll.q.scale)?, scaled(fk, ll.k.scale)?);
    let o = linear_attention(&fq, &fk, v, &gate, ll.denominator.map(f64::from), m.library_ops())?;
    post_step(m, &ll.post, u, &merge(&o)?)
}

/// `φ(x)` of one side, elementwise or over the head (`[B, H, T, dh]`).
fn feature_map(map: FeatureMap, x: &Tensor) -> Result<Tensor> {
    Ok(match map {
        FeatureMap::Identity => x.clone(),
        FeatureMap::EluPlusOne => elu_plus_one(x)?,
        FeatureMap::Elu => x.elu(1.0)?,
        FeatureMap::Swish => x.silu()?,
        // exp(x − max_j x_j) (ReGLA §3.2, Eq. 11).
        FeatureMap::ExpMax => x.broadcast_sub(&x.max_keepdim(D::Minus1)?)?.exp()?,
        FeatureMap::ExpRunningMax => return Err(unsupported("a running key max is a key-side map")),
    })
}

/// The layer's log-gate, and the key when the gate replaces it ([`LwGate::KeyForget`]).
fn log_gate(
    m: &TrainModel,
    gate: &LwGate,
    u: &Tensor,
    k: &Tensor,
    h: usize,
    dh: usize,
) -> Result<(Gate, Option<Tensor>)> {
    let proj =
        |w: &str, b: &str| -> Result<Tensor> { heads(&linear(u, m.w(w)?)?.broadcast_add(m.w(b)?)?, h, dh) };
    let lib = m.library_ops();
    Ok(match gate {
        LwGate::None => (Gate::None, None),
        LwGate::PerHead { log_gamma } => {
            (Gate::PerHead(log_gamma.iter().map(|&g| f64::from(g)).collect()), None)
        }
        LwGate::LowRank { down, up, bias, normalizer } => {
            // Per key/value head, repeated for its query heads like the keys (fla's GLA).
            let pre =
                linear(&linear(u, m.w(&down.name)?)?, m.w(&up.name)?)?.broadcast_add(m.w(&bias.name)?)?;
            let kv = pre.dim(2)? / dh;
            let z = repeat_kv(&heads(&pre, kv, dh)?, h / kv)?;
            (Gate::key_axis((log_sigmoid(&z, lib)? / *normalizer)?), None)
        }
        LwGate::Refined { wg, bg, wr, br } => {
            let (ag, ar) = (proj(&wg.name, &bg.name)?, proj(&wr.name, &br.name)?);
            // ln F = lnσ(a_g) + logaddexp(lnσ(a_g), ln 2 + lnσ(a_r) + lnσ(−a_g)), ≤ 0
            // (ReGLA §3.3, Eqs. 16–18, in log space).
            let lsg = log_sigmoid(&ag, lib)?;
            let other = ((log_sigmoid(&ar, lib)? + log_sigmoid(&ag.neg()?, lib)?)? + std::f64::consts::LN_2)?;
            (Gate::key_axis((&lsg + log_add_exp(&lsg, &other)?)?.minimum(0.0)?), None)
        }
        LwGate::TwoSided { wf, bf, wz, bz } => {
            // Fast Decay (ReGLA §2.1, Eq. 10): lnσ(W_f x + b_f) on the key axis, lnσ(W_z x + b_z) on
            // the value axis.
            let pz = linear(u, m.w(&wz.name)?)?.broadcast_add(m.w(&bz.name)?)?;
            let z = heads(&pz, h, pz.dim(2)? / h)?;
            let lg = log_sigmoid(&proj(&wf.name, &bf.name)?, lib)?;
            (Gate::PerChannel { lg, lgv: Some(log_sigmoid(&z, lib)?) }, None)
        }
        LwGate::KeyForget { lower_bound, learned } => {
            let beta = match learned {
                Some(row) => lower_bound_row(m, row)?,
                None => const_f64(
                    lower_bound.iter().map(|&b| f64::from(b)).collect(),
                    &[lower_bound.len()],
                    m.place(),
                )?,
            };
            let unbounded = match learned {
                Some(r) => r.row == 0,
                None => lower_bound.iter().all(|b| *b == 0.0),
            };
            key_forget(k, &beta.reshape((1, h, 1, dh))?, unbounded, lib)?
        }
    })
}

/// HGRN's gate and key ("HGRN2", §3): `lg = ln(β + (1 − β)σ(f))`, key `(1 − β)σ(−f)`, with the key
/// projection as `f` (`β: [1, H, 1, dh]`; `unbounded`: β is identically 0, so `lg = lnσ(f)`).
fn key_forget(f: &Tensor, beta: &Tensor, unbounded: bool, lib: bool) -> Result<(Gate, Option<Tensor>)> {
    let one_minus = (beta.neg()? + 1.0)?;
    let key = log_sigmoid(&f.neg()?, lib)?.exp()?.broadcast_mul(&one_minus)?;
    let lg = if unbounded {
        log_sigmoid(f, lib)?
    } else {
        log_sigmoid(f, lib)?.exp()?.broadcast_mul(&one_minus)?.broadcast_add(beta)?.log()?.minimum(0.0)?
    };
    Ok((Gate::key_axis(lg), Some(key)))
}

/// Row `row.row` of `cumsoftmax − softmax[0]` of the `[n_layers, width]` parameter, in the graph.
pub(crate) fn lower_bound_row(m: &TrainModel, row: &LowerBoundRow) -> Result<Tensor> {
    let logits = m.w(&row.tensor)?;
    let sm = candle_nn::ops::softmax(logits, 0)?;
    let n = row.row;
    if n == 0 {
        return Ok(sm.narrow(0, 0, 1)?.zeros_like()?.squeeze(0)?);
    }
    Ok(sm.narrow(0, 1, n)?.sum(0)?)
}

/// Output step on the merged heads `o: [B, T, H·dh]`.
fn post_step(m: &TrainModel, post: &Post, u: &Tensor, o: &Tensor) -> Result<Tensor> {
    let grouped = |gain: &str, eps: f32| -> Result<Tensor> {
        let g = m.w(gain)?;
        let (b, t, a) = o.dims3()?;
        let n = g.dim(0)?;
        Ok(m.rms_norm(&o.reshape((b, t, a / n, n))?, g, eps)?.reshape((b, t, a))?)
    };
    match post {
        Post::None => Ok(o.clone()),
        Post::SimpleRmsNorm => simple_rms_norm(o),
        Post::RmsNorm { gain, eps } => grouped(&gain.name, *eps),
        Post::RmsNormGate { gain, eps, out_gate } => {
            Ok((grouped(&gain.name, *eps)? * linear(u, m.w(&out_gate.name)?)?.silu()?)?)
        }
    }
}

fn unsupported(what: &str) -> TrainError {
    TrainError::Candle(candle_core::Error::Msg(format!("no training form: {what}")))
}

/// `[B, T, H·dh]` → `[B, H, T, dh]`.
fn heads(x: &Tensor, h: usize, dh: usize) -> Result<Tensor> {
    let (b, t, _) = x.dims3()?;
    Ok(x.reshape((b, t, h, dh))?.transpose(1, 2)?.contiguous()?)
}

/// `[B, H, T, w]` → `[B, T, H·w]`.
fn merge(x: &Tensor) -> Result<Tensor> {
    let (b, h, t, w) = x.dims4()?;
    Ok(x.transpose(1, 2)?.contiguous()?.reshape((b, t, h * w))?)
}

/// `1 + elu(x)`.
fn elu_plus_one(x: &Tensor) -> Result<Tensor> {
    Ok((x.elu(1.0)? + 1.0)?)
}

/// `ln σ(x) = min(x, 0) − ln(1 + e^{−|x|})`, stable at both ends: one fused op, or with
/// `library_ops` candle's composite.
fn log_sigmoid(x: &Tensor, library_ops: bool) -> Result<Tensor> {
    if !library_ops {
        return Ok(fused::log_sigmoid(x)?);
    }
    Ok((x.minimum(0.0)? - (x.abs()?.neg()?.exp()? + 1.0)?.log()?)?)
}

/// `ln(eᵃ + eᵇ) = max(a, b) + ln(1 + e^{−|a − b|})`.
fn log_add_exp(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let m = a.maximum(b)?;
    Ok((m + ((a - b)?.abs()?.neg()?.exp()? + 1.0)?.log()?)?)
}

/// SimpleRMSNorm over the last dim: `x / (√mean(x²) + 1e−8)` (fairseq-evo `SimpleRMSNorm`).
fn simple_rms_norm(x: &Tensor) -> Result<Tensor> {
    let rms = x.sqr()?.mean_keepdim(D::Minus1)?.sqrt()?;
    Ok(x.broadcast_div(&(rms + attnlab_core::ops::SIMPLE_RMS_EPS as f64)?)?)
}

/// `[T, T]` additive causal mask: 0 for `s ≤ i`, [`MASKED`] above the diagonal.
fn causal_additive(t: usize, at: Place) -> Result<Tensor> {
    let v: Vec<f64> = (0..t * t).map(|x| if x % t <= x / t { 0.0 } else { MASKED }).collect();
    const_f64(v, &[t, t], at)
}

/// `[T, T]` 0/1 mask of the visible keys.
pub(crate) fn window_mask(t: usize, w: Window, at: Place) -> Result<Tensor> {
    let v: Vec<f64> = (0..t * t)
        .map(|x| {
            let (i, s) = (x / t, x % t);
            let lo = match w {
                Window::Causal => 0,
                Window::Block(bs) => i - i % bs,
            };
            if s <= i && s >= lo {
                1.0
            } else {
                0.0
            }
        })
        .collect();
    const_f64(v, &[t, t], at)
}

/// What is added to the scaled logits.
enum Scores<'a> {
    /// A `[H, T, T]` bias (or none).
    Additive(Option<Tensor>),
    /// CoPE's q·k-dependent bias with `pos_emb: [npos, dh]` (see [`contextual_bias`]).
    Contextual { npos: usize, pos_emb: &'a Tensor },
}

/// Softmax-family kernel (§5.4): `softmax(scale·q·kᵀ + B + mask)·v`, or for TransNormer T1 Diag
/// `ReLU(scale·q·kᵀ) ⊙ mask · v`. The fused softmax skips invisible keys as the core does; with
/// `library_ops` (candle's composites) masked keys get `−1e30`, whose exp is exactly 0.
fn softmax_kernel(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    sl: &SoftmaxLowering,
    scores: &Scores,
    at: Place,
    library_ops: bool,
) -> Result<Tensor> {
    let qk = q.matmul(&k.t()?.contiguous()?)?;
    if let (false, false, Scores::Additive(bias)) = (library_ops, sl.relu_with_norm, scores) {
        return Ok(fused::masked_softmax(&qk, bias.as_ref(), f64::from(sl.scale), sl.window)?.matmul(v)?);
    }
    let mask = window_mask(q.dim(2)?, sl.window, at)?;
    let add = ((mask.ones_like()? - &mask)? * MASKED)?;
    let mut s = (qk * sl.scale as f64)?;
    match scores {
        Scores::Additive(Some(b)) => s = s.broadcast_add(b)?,
        Scores::Additive(None) => {}
        Scores::Contextual { npos, pos_emb } => {
            s = (&s + contextual_bias(q, &s.broadcast_add(&add)?, *npos, pos_emb, &mask, library_ops)?)?
        }
    }
    let p = if sl.relu_with_norm {
        s.relu()?.broadcast_mul(&mask)?
    } else if library_ops {
        candle_nn::ops::softmax(&s.broadcast_add(&add)?, D::Minus1)?
    } else {
        fused::masked_softmax(&s, None, 1.0, sl.window)?
    };
    Ok(p.matmul(v)?)
}

/// CoPE (Golovneva et al., "Contextual Position Encoding", §3) for `q: [B, H, T, dh]` and masked
/// scaled logits `s: [B, H, T, T]`: gates `σ(s)` (0 on masked keys), positions `p_ij = Σ_{t≥j} g_it`
/// (a matmul with the causal 0/1 `mask`), clamped to `npos − 1`, and `q·e[p]` interpolated between
/// `⌊p⌋` and `⌈p⌉`. The integer parts carry no gradient; the weight `p − ⌊p⌋` and `q·e` do.
fn contextual_bias(
    q: &Tensor,
    s: &Tensor,
    npos: usize,
    pos_emb: &Tensor,
    mask: &Tensor,
    library_ops: bool,
) -> Result<Tensor> {
    let gates = log_sigmoid(s, library_ops)?.exp()?;
    let pos = gates.broadcast_matmul(mask)?.minimum((npos - 1) as f64)?;
    let lo = pos.detach().floor()?;
    let hi = pos.detach().ceil()?.minimum((npos - 1) as f64)?;
    let w = (&pos - &lo)?;
    let int_logits = q.broadcast_matmul(&pos_emb.t()?)?.contiguous()?; // [B, H, T, npos]
    let at = |idx: &Tensor| -> Result<Tensor> {
        Ok(int_logits.gather(&idx.to_dtype(DType::U32)?.contiguous()?, 3)?)
    };
    let (l_lo, l_hi) = (at(&lo)?, at(&hi)?);
    Ok(((l_hi * &w)? + (l_lo * (w.neg()? + 1.0)?)?)?)
}

/// Position bias `B_h(i, j)` as `[H, T, T]` (§5.5), `None` without one. Entries above the diagonal are
/// 0 (masked later). A learned table is rebuilt in the graph from its parameters; a fixed one is
/// gathered from the lowering's values.
pub(crate) fn position_bias(m: &TrainModel, bias: &Bias, t: usize) -> Result<Option<Tensor>> {
    let at = m.place();
    let delta: Vec<f64> = (0..t * t).map(|x| (x / t).saturating_sub(x % t) as f64).collect();
    Ok(Some(match bias {
        Bias::None => return Ok(None),
        Bias::Contextual { .. } => return Err(unsupported("a contextual bias is not a table")),
        Bias::Table { len, values, learned: None } => {
            let h = values.len() / len;
            let v: Vec<f64> = (0..h)
                .flat_map(|hh| delta.iter().map(move |&d| f64::from(values[hh * len + d as usize])))
                .collect();
            const_f64(v, &[h, t, t], at)?
        }
        Bias::Table { learned: Some(lt), .. } => {
            learned_table(m, lt, &delta)?.reshape((m.config().n_heads, t, t))?
        }
        Bias::Fire { c, l_mult, init_l, w1, b1, w2, b2 } => {
            // FIRE (Li et al., 2023; mcleish7/arithmetic `FIRE`): u = ψ(i − j)/(ψ(max(i, |l_mult·L|)) + 1e−6),
            // ψ(x) = ln(1 + |c·x|), then the MLP.
            let c = m.w(&c.name)?.reshape((1, 1))?;
            let l_mult = m.w(&l_mult.name)?.reshape((1, 1))?;
            let rel = const_f64(delta.clone(), &[t, t], at)?;
            let qpos = const_f64((0..t * t).map(|x| (x / t) as f64).collect(), &[t, t], at)?;
            let psi = |x: &Tensor| -> Result<Tensor> { Ok((c.broadcast_mul(x)?.abs()? + 1.0)?.log()?) };
            let query = qpos.broadcast_maximum(&(l_mult * *init_l)?.abs()?)?;
            let u = psi(&rel)?.broadcast_div(&(psi(&query)? + 1e-6)?)?; // [T, T]
            let k = bias::FIRE_HIDDEN;
            let w1 = m.w(&w1.name)?.reshape((1, 1, k))?;
            let b1 = m.w(&b1.name)?.reshape((1, 1, k))?;
            let hid = u.unsqueeze(2)?.broadcast_mul(&w1)?.broadcast_add(&b1)?.relu()?; // [T, T, K]
            let out = linear(&hid, m.w(&w2.name)?)?.broadcast_add(m.w(&b2.name)?)?; // [T, T, H]
            out.permute((2, 0, 1))?.contiguous()?
        }
    }))
}

/// A distance table from learned per-head parameters, in the graph: `[H, n]`, the bias of each head
/// at the `n` distances `delta` (the attention's `i − j`, 0 above the diagonal, or `0..T` for the GPU
/// trainer's distance table).
pub(crate) fn learned_table(m: &TrainModel, lt: &LearnedTable, delta: &[f64]) -> Result<Tensor> {
    let cfg = m.config();
    let (h, n, at) = (cfg.n_heads, delta.len(), m.place());
    let dmat = const_f64(delta.to_vec(), &[1, n], at)?;
    let per_head = |name: &str| -> Result<Tensor> { Ok(m.w(name)?.reshape((h, 1))?) };
    // −p·ln(1 + a·δ) with a, p ≥ 0.01.
    let kerple_log = |a: &str, p: &str| -> Result<Tensor> {
        let a = per_head(a)?.maximum(bias::KERPLE_MIN)?;
        let p = per_head(p)?.maximum(bias::KERPLE_MIN)?;
        Ok(p.broadcast_mul(&(a.broadcast_mul(&dmat)? + 1.0)?.log()?)?.neg()?)
    };
    Ok(match lt {
        LearnedTable::KerpleLog { a, p } => kerple_log(a, p)?.broadcast_as((h, n))?.contiguous()?,
        // −a·δ^p with a ≥ 0.01, p ∈ [0.01, 2], and B(0) = 0; δ^p = exp(p·ln max(δ, 1)).
        LearnedTable::KerplePower { a, p } => {
            let a = per_head(a)?.maximum(bias::KERPLE_MIN)?;
            let p = per_head(p)?.clamp(bias::KERPLE_MIN, bias::KERPLE_POWER_MAX_P)?;
            let ln_d = const_f64(delta.iter().map(|&x| x.max(1.0).ln()).collect(), &[1, n], at)?;
            let nz = const_f64(delta.iter().map(|&x| f64::from(u8::from(x > 0.0))).collect(), &[1, n], at)?;
            a.broadcast_mul(&p.broadcast_mul(&ln_d)?.exp()?.broadcast_mul(&nz)?)?.neg()?
        }
        // W[bucket(δ), h]·scale: the bucket index is fixed, the table is gathered in the graph.
        LearnedTable::Buckets { table, num_buckets, max_distance, scale } => {
            let idx: Vec<u32> = delta
                .iter()
                .map(|&d| bias::t5_bucket(d as usize, *num_buckets, *max_distance) as u32)
                .collect();
            let g = m.w(table)?.index_select(&Tensor::from_vec(idx, n, at.dev)?, 0)?; // [n, H]
            (g.t()?.contiguous()? * *scale)?
        }
        // LSE[ln w_K − p·ln(1 + a·δ), ln w_G − g_h·δ²]; a term with weight ≤ 0 is dropped.
        LearnedTable::MepParam { a, p, kerple_weight, gaussian_weight, gaussian_slopes } => {
            let kerple =
                if *kerple_weight > 0.0 { Some((kerple_log(a, p)? + kerple_weight.ln())?) } else { None };
            let gauss = if *gaussian_weight > 0.0 {
                let v: Vec<f64> = gaussian_slopes
                    .iter()
                    .flat_map(|g| delta.iter().map(move |&d| gaussian_weight.ln() - (g.max(0.0) * d) * d))
                    .collect();
                Some(const_f64(v, &[h, n], at)?)
            } else {
                None
            };
            match (kerple, gauss) {
                (Some(a), Some(b)) => log_add_exp(&a.broadcast_as((h, n))?.contiguous()?, &b)?,
                (Some(a), None) => a.broadcast_as((h, n))?.contiguous()?,
                (None, Some(b)) => b,
                (None, None) => Tensor::zeros((h, n), at.dtype, at.dev)?,
            }
        }
    })
}

/// RoPE `(cos, sin)` tables `[T, dh/2]` of `s·inv_freq[k]`, evaluated in f64 (§5.4).
fn rope_tables(t: usize, inv_freq: &[f64], at: Place) -> Result<(Tensor, Tensor)> {
    let n = inv_freq.len();
    let (mut c, mut s) = (Vec::with_capacity(t * n), Vec::with_capacity(t * n));
    for pos in 0..t {
        for f in inv_freq {
            let (sn, cs) = (pos as f64 * f).sin_cos();
            c.push(cs);
            s.push(sn);
        }
    }
    Ok((const_f64(c, &[t, n], at)?, const_f64(s, &[t, n], at)?))
}

/// Rotate adjacent pairs `(2k, 2k+1)`, `k < n`, of `x: [B, H, T, w]` by `(cos, sin): [T, n]`; channels
/// `2n..w` pass through.
fn rotate_pairs(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (b, h, t, w) = x.dims4()?;
    let n = cos.dim(1)?;
    let pairs = x.narrow(3, 0, 2 * n)?.reshape((b, h, t, n, 2))?;
    let x0 = pairs.narrow(4, 0, 1)?.squeeze(4)?;
    let x1 = pairs.narrow(4, 1, 1)?.squeeze(4)?;
    let o0 = (x0.broadcast_mul(cos)? - x1.broadcast_mul(sin)?)?;
    let o1 = (x1.broadcast_mul(cos)? + x0.broadcast_mul(sin)?)?;
    let rot = Tensor::stack(&[o0, o1], 4)?.reshape((b, h, t, 2 * n))?;
    if 2 * n < w {
        Ok(Tensor::cat(&[rot, x.narrow(3, 2 * n, w - 2 * n)?], 3)?)
    } else {
        Ok(rot)
    }
}

/// The LRPE transform `T_s(x) = Λ(s)(P x)` of one layer (§5.9; LRPE §3.2, Eq. 75), in the graph.
struct LrpeTransform {
    core: LrpeCore,
    /// Unit Householder vector, normalised from the stored `v` and detached: P is fixed (LRPE §3.4,
    /// Eq. 73 with a random v; fairseq-evo `urpe.py` keeps `householder_learned = False`), so `v`
    /// gets no gradient and the optimizer never moves it.
    householder: Option<Tensor>,
    /// Odd-even gather index.
    odd_even: Option<Tensor>,
    /// `(cos, sin)` of `s·θ`: `[T, n]` (rotation/mixed) or `[T, dh]` (complex).
    cos_sin: Option<(Tensor, Tensor)>,
    /// Permutation core: gather index `[T, dh]` with `π^s(j)`.
    perm: Option<Tensor>,
}

impl LrpeTransform {
    /// The transform of `lrpe` at positions `0..t`, with its learned angles (`theta`) and Householder
    /// vector (`householder`) taken from the graph when named.
    fn new(
        m: &TrainModel,
        lrpe: &Lrpe,
        theta: Option<&str>,
        householder: Option<&str>,
        t: usize,
        at: Place,
    ) -> Result<LrpeTransform> {
        let (core, dh) = (lrpe.core(), m.config().head_dim);
        let householder = match householder {
            Some(name) => {
                let v = m.w(name)?.detach();
                Some(v.broadcast_div(&v.sqr()?.sum_all()?.sqrt()?)?)
            }
            None => None,
        };
        let odd_even = if lrpe.p() == LrpeP::OddEven {
            let idx: Vec<u32> = (0..dh).map(|j| lrpe::odd_even_index(j, dh) as u32).collect();
            Some(Tensor::from_vec(idx, dh, at.dev)?)
        } else {
            None
        };
        let n = lrpe.angles().len();
        let cos_sin = if n > 0 {
            // Angles s·θ_k: learned θ stays in the graph so it gets gradients.
            let th = match theta {
                Some(name) => m.w(name)?.reshape((1, n))?,
                None => const_f64(lrpe.angles().to_vec(), &[1, n], at)?,
            };
            let ang = const_f64((0..t).map(|s| s as f64).collect(), &[t, 1], at)?.broadcast_mul(&th)?;
            Some((ang.cos()?, ang.sin()?))
        } else {
            None
        };
        let perm = if core == LrpeCore::Permutation {
            let idx: Vec<u32> =
                (0..t).flat_map(|s| (0..dh).map(move |j| lrpe.perm_power(s, j) as u32)).collect();
            Some(Tensor::from_vec(idx, (t, dh), at.dev)?)
        } else {
            None
        };
        Ok(LrpeTransform { core, householder, odd_even, cos_sin, perm })
    }

    /// Apply to `x: [B, H, T, dh]`; returns `[B, H, T, dk]`.
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let mut y = x.clone();
        if let Some(v) = &self.householder {
            let dot = y.broadcast_mul(v)?.sum_keepdim(D::Minus1)?;
            y = (&y - dot.broadcast_mul(v)?.affine(2.0, 0.0)?)?;
        }
        if let Some(idx) = &self.odd_even {
            y = y.index_select(idx, 3)?.contiguous()?;
        }
        match self.core {
            LrpeCore::Rotation | LrpeCore::Mixed => match &self.cos_sin {
                Some((c, s)) => rotate_pairs(&y, c, s),
                None => Ok(y),
            },
            LrpeCore::Complex => match &self.cos_sin {
                Some((c, s)) => Ok(Tensor::cat(&[y.broadcast_mul(c)?, y.broadcast_mul(s)?], 3)?),
                None => Ok(y),
            },
            LrpeCore::Permutation => match &self.perm {
                Some(idx) => {
                    let idx = idx.broadcast_as(y.dims())?.contiguous()?;
                    Ok(y.gather(&idx, 3)?)
                }
                None => Ok(y),
            },
        }
    }
}

/// Decay of a linear-attention layer.
enum Gate {
    /// No decay.
    None,
    /// Fixed per-head log-decay (RetNet), f64.
    PerHead(Vec<f64>),
    /// Per-token, per-channel log-gates `[B, H, T, dk]`, all `≤ 0` (GLA, ReGLA), and for a two-sided
    /// gate also value-axis log-gates `[B, H, T, dh]` (Fast Decay).
    PerChannel { lg: Tensor, lgv: Option<Tensor> },
}

impl Gate {
    /// Per-channel log-gates on the key axis only.
    fn key_axis(lg: Tensor) -> Gate {
        Gate::PerChannel { lg, lgv: None }
    }
}

/// Gated linear attention (§5.6) for features `fq, fk: [B, H, T, dk]`, values `v: [B, H, T, dh]`;
/// with `den_eps` the output is divided by `max(Σ_s P[i, s], eps)`. Returns `[B, H, T, dh]`.
/// Per-channel gates run the fused recurrence ([`scan::gated_scan`]), or with `library_ops` candle's
/// chunked composite.
fn linear_attention(
    fq: &Tensor,
    fk: &Tensor,
    v: &Tensor,
    gate: &Gate,
    den_eps: Option<f64>,
    library_ops: bool,
) -> Result<Tensor> {
    let (_, h, t, _) = fq.dims4()?;
    let at = Place::of(fq);
    let decay = match gate {
        Gate::PerChannel { lg, lgv } => {
            if den_eps.is_some() {
                return Err(TrainError::Candle(candle_core::Error::Msg(
                    "per-channel gates with a denominator are not part of the catalog".into(),
                )));
            }
            return match library_ops {
                true => scan::gated_chunked(fq, fk, v, lg, lgv.as_ref()),
                false => Ok(scan::gated_scan(fq, fk, v, lg, lgv.as_ref())?),
            };
        }
        Gate::None => window_mask(t, Window::Causal, at)?.reshape((1, 1, t, t))?,
        Gate::PerHead(lg) => {
            let mut d = Vec::with_capacity(h * t * t);
            for &l in lg {
                for x in 0..t * t {
                    let (i, s) = (x / t, x % t);
                    d.push(if s <= i { ((i - s) as f64 * l).exp() } else { 0.0 });
                }
            }
            const_f64(d, &[1, h, t, t], at)?
        }
    };
    let p = fq.matmul(&fk.t()?.contiguous()?)?.broadcast_mul(&decay)?;
    let o = p.matmul(v)?;
    match den_eps {
        Some(eps) => Ok(o.broadcast_div(&p.sum_keepdim(D::Minus1)?.maximum(eps)?)?),
        None => Ok(o),
    }
}
