//! Training-form attention for every variant (docs/model-format.md §5.3–5.9), mirroring
//! `attnlab_core::attention` operation by operation but on whole `[B, H, T, ·]` tensors with
//! autograd. Learnable position and gate parameters (Kerple a/p with clamps, the T5 bucket table,
//! the FIRE MLP, mep-param a/p, LRPE θ and Householder v, GLA/ReGLA gates) are used inside the
//! graph so they receive gradients; fixed tables (ALiBi, Gaussian, Sandwich, MEP) are constants
//! built with the core's own `bias` functions.
//!
//! Linear family (§5.6): `o_i = Σ_{s≤i} (Σ_j φq_i[j] φk_s[j] e^{b_i[j] − b_s[j]}) v_s`.
//! * no decay (linear-elu, TransNormer Norm, LRPE): `P = (φq φkᵀ) ⊙ causal`, one matmul;
//! * per-head scalar decay (RetNet): `P = (φq φkᵀ) ⊙ Γ` with the constant `Γ[h,i,s] = γ_h^{i−s}`;
//! * per-channel gates (GLA, ReGLA): the chunked form with chunk [`GATED_CHUNK`]. Inside a chunk,
//!   if the cumulative log-gate stays above `FACTORED_MIN_LOG_DECAY` the weights are the matmul of
//!   `φq ⊙ e^{b}` and `φk ⊙ e^{−b}`; otherwise they are built from the `[B, H, C, C, dk]` tensor of
//!   exponents `b_i − b_s`, masked to 0 above the diagonal *before* `exp`, so every exponentiated
//!   value is `≤ 0` (no overflow, finite gradients). Between chunks a `[B, H, dk, dh]` state is
//!   carried exactly as in the core's chunked prefill.

// Reference math: several tensors are indexed in parallel.
#![allow(clippy::needless_range_loop)]

use crate::error::{Result, TrainError};
use crate::model::{const_f64, linear, TrainModel};
use attnlab_core::attention::HEAD_NORM_EPS;
use attnlab_core::bias;
use attnlab_core::config::AttentionSpec;
use attnlab_core::lrpe::{self, Lrpe};
use attnlab_core::variants::lrpe::{LrpeCore, LrpeNormalize, LrpeP, LrpeTheta};
use attnlab_core::variants::transnormer::{TransnormerFlavor, TransnormerRole};
use candle_core::{DType, Device, Tensor, D};

/// Chunk length of the gated (GLA, ReGLA) training form. Any value gives the same result up to
/// rounding; 16 bounds the `[B, H, C, C, dk]` intermediate and measured fastest (8 and 32 are slower).
pub const GATED_CHUNK: usize = 16;

/// Smallest chunk-local cumulative log-decay for which [`gated_chunked`] factors `e^{b_i − b_s}` into
/// `e^{b_i}·e^{−b_s}` (so no factor exceeds `e^{40}`); below it the exact pairwise form is used.
const FACTORED_MIN_LOG_DECAY: f32 = -40.0;

/// Additive mask value of the softmax family (the core's `bias::MASKED`).
const MASKED: f64 = bias::MASKED as f64;

/// One attention layer: normed input `u: [B, T, d]` → `Wo · Attn(u)`, `[B, T, d]`.
pub(crate) fn forward(m: &TrainModel, i: usize, u: &Tensor) -> Result<Tensor> {
    let cfg = m.config();
    let t = u.dim(1)?;
    let (h, dh) = (cfg.n_heads, cfg.head_dim);
    let dev = m.device();
    let p = |n: &str| format!("layers.{i}.attn.{n}");
    let q = heads(&linear(u, m.w(&p("wq"))?)?, h, dh)?;
    let k = heads(&linear(u, m.w(&p("wk"))?)?, h, dh)?;
    let v = heads(&linear(u, m.w(&p("wv"))?)?, h, dh)?;
    let scale = 1.0 / (dh as f32).sqrt();
    let spec = &cfg.layers[i];
    let out = match spec {
        AttentionSpec::Transnormer(attnlab_core::variants::transnormer::Transnormer {
            role: TransnormerRole::Diag,
            flavor,
            block_size,
        }) => {
            let relu = *flavor == TransnormerFlavor::T1;
            let o = softmax_kernel(&q, &k, &v, scale, None, Window::Block(*block_size), relu, dev)?;
            let o = merge(&o)?;
            if relu {
                simple_rms_norm(&o)?
            } else {
                o
            }
        }
        AttentionSpec::Nope(_) | AttentionSpec::Sinusoidal(_) => {
            merge(&softmax_kernel(&q, &k, &v, scale, None, Window::Causal, false, dev)?)?
        }
        AttentionSpec::Rope(attnlab_core::variants::rope::Rope { base }) => {
            let (cos, sin) = rope_tables(t, dh, *base, dev)?;
            let q = rotate_pairs(&q, &cos, &sin)?;
            let k = rotate_pairs(&k, &cos, &sin)?;
            merge(&softmax_kernel(&q, &k, &v, scale, None, Window::Causal, false, dev)?)?
        }
        AttentionSpec::Alibi(_)
        | AttentionSpec::Gaussian(_)
        | AttentionSpec::KerpleLog(_)
        | AttentionSpec::KerplePower(_)
        | AttentionSpec::T5(_)
        | AttentionSpec::Sandwich(_)
        | AttentionSpec::Fire(_)
        | AttentionSpec::Mep(_)
        | AttentionSpec::MepParam(_) => {
            let bias = position_bias(m, i, spec, t)?;
            merge(&softmax_kernel(&q, &k, &v, scale, Some(&bias), Window::Causal, false, dev)?)?
        }
        AttentionSpec::Transnormer(attnlab_core::variants::transnormer::Transnormer {
            role: TransnormerRole::Norm,
            flavor,
            ..
        }) => {
            let (fq, fk) = if *flavor == TransnormerFlavor::T1 {
                (q.elu(1.0)?, k.elu(1.0)?)
            } else {
                (elu_plus_one(&q)?, elu_plus_one(&k)?)
            };
            simple_rms_norm(&merge(&linear_attention(&fq, &fk, &v, &Gate::None, None)?)?)?
        }
        AttentionSpec::LinearElu(attnlab_core::variants::linear_elu::LinearElu { eps }) => {
            let (fq, fk) = (elu_plus_one(&q)?, elu_plus_one(&k)?);
            merge(&linear_attention(&fq, &fk, &v, &Gate::None, Some(*eps as f32 as f64))?)?
        }
        AttentionSpec::Lrpe(attnlab_core::variants::lrpe::LrpeSpec {
            core,
            p: pm,
            theta,
            normalize,
            seed,
        }) => {
            let tr = LrpeTransform::new(m, i, *core, *pm, *theta, *seed, t, dh, dev)?;
            let fq = tr.apply(&elu_plus_one(&q)?)?;
            let fk = tr.apply(&elu_plus_one(&k)?)?;
            match normalize {
                LrpeNormalize::Denominator => {
                    merge(&linear_attention(&fq, &fk, &v, &Gate::None, Some(1e-6))?)?
                }
                LrpeNormalize::Rmsnorm => {
                    simple_rms_norm(&merge(&linear_attention(&fq, &fk, &v, &Gate::None, None)?)?)?
                }
            }
        }
        AttentionSpec::Gla(attnlab_core::variants::gla::Gla { gate_logit_normalizer, .. }) => {
            let pre = linear(&linear(u, m.w(&p("gla.gk_down"))?)?, m.w(&p("gla.gk_up"))?)?;
            let z = heads(&pre.broadcast_add(m.w(&p("gla.gk_bias"))?)?, h, dh)?;
            let lg = (log_sigmoid(&z)? / *gate_logit_normalizer)?;
            let fq = (&q * scale as f64)?;
            let o = linear_attention(&fq, &k, &v, &Gate::PerChannel(lg), None)?;
            let o = merge(&head_rms_norm(&o, m.w(&p("gla.head_norm"))?)?)?;
            (o * linear(u, m.w(&p("gla.out_gate"))?)?.silu()?)?
        }
        AttentionSpec::Regla(_) => {
            let ag = heads(&linear(u, m.w(&p("regla.w_g"))?)?.broadcast_add(m.w(&p("regla.b_g"))?)?, h, dh)?;
            let ar = heads(&linear(u, m.w(&p("regla.w_r"))?)?.broadcast_add(m.w(&p("regla.b_r"))?)?, h, dh)?;
            // ln F = lnσ(a_g) + logaddexp(lnσ(a_g), ln 2 + lnσ(a_r) + lnσ(−a_g)), ≤ 0
            // (ReGLA §3.3, Eqs. 16–18, in log space).
            let lsg = log_sigmoid(&ag)?;
            let other = ((log_sigmoid(&ar)? + log_sigmoid(&ag.neg()?)?)? + std::f64::consts::LN_2)?;
            let log_f = (&lsg + log_add_exp(&lsg, &other)?)?.minimum(0.0)?;
            // φq = c(dh)·exp(q − max q) (ReGLA §3.1, Eq. 11, Thm 3.1).
            let c = attnlab_core::variants::regla::regla_scale(dh) as f32 as f64;
            let fq = (q.broadcast_sub(&q.max_keepdim(D::Minus1)?)?.exp()? * c)?;
            // Running key max M_t = max_{s≤t} max_j k_s[j] as a masked max over [T, T].
            let kmax = k.max_keepdim(D::Minus1)?.transpose(2, 3)?; // [B, H, 1, T]
            let cm = kmax.broadcast_add(&causal_additive(t, dev)?)?.max_keepdim(D::Minus1)?; // [B,H,T,1]
            let fk = k.broadcast_sub(&cm)?.exp()?;
            // The rescale e^{M_{t−1} − M_t} of the state is folded into the log-gate (0 at t = 0).
            let prev = if t > 1 {
                Tensor::cat(&[cm.narrow(2, 0, 1)?, cm.narrow(2, 0, t - 1)?], 2)?
            } else {
                cm.clone()
            };
            let lg = log_f.broadcast_add(&(prev - &cm)?)?;
            let o = linear_attention(&fq, &fk, &v, &Gate::PerChannel(lg), None)?;
            merge(&head_rms_norm(&o, m.w(&p("regla.head_norm"))?)?)?
        }
        AttentionSpec::Retnet(_) => {
            let (cos, sin) = rope_tables(t, dh, 10000.0, dev)?;
            let fq = (rotate_pairs(&q, &cos, &sin)? * scale as f64)?;
            let fk = rotate_pairs(&k, &cos, &sin)?;
            let lg: Vec<f64> = (0..h)
                .map(|hh| attnlab_core::variants::retnet::retnet_gamma(hh).ln() as f32 as f64)
                .collect();
            let o = linear_attention(&fq, &fk, &v, &Gate::PerHead(lg), None)?;
            let o = merge(&head_rms_norm(&o, m.w(&p("retnet.head_norm"))?)?)?;
            (o * linear(u, m.w(&p("retnet.out_gate"))?)?.silu()?)?
        }
    };
    linear(&out, m.w(&p("wo"))?)
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

/// `ln σ(x) = min(x, 0) − ln(1 + e^{−|x|})`, stable at both ends.
fn log_sigmoid(x: &Tensor) -> Result<Tensor> {
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

/// Per-head RMSNorm with gain `w: [dh]` and eps [`HEAD_NORM_EPS`] over the last dim.
fn head_rms_norm(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
    Ok(x.broadcast_div(&(ms + HEAD_NORM_EPS as f64)?.sqrt()?)?.broadcast_mul(w)?)
}

/// `[T, T]` additive causal mask: 0 for `s ≤ i`, [`MASKED`] above the diagonal.
fn causal_additive(t: usize, dev: &Device) -> Result<Tensor> {
    let v: Vec<f64> = (0..t * t).map(|x| if x % t <= x / t { 0.0 } else { MASKED }).collect();
    const_f64(v, &[t, t], dev)
}

/// `[T, T]` 0/1 mask of the visible keys.
fn window_mask(t: usize, w: Window, dev: &Device) -> Result<Tensor> {
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
    const_f64(v, &[t, t], dev)
}

/// Which keys a softmax-family query sees.
#[derive(Debug, Clone, Copy)]
enum Window {
    Causal,
    Block(usize),
}

/// Softmax-family kernel (§5.4): `softmax(scale·q·kᵀ + B + mask)·v`, or for TransNormer T1 Diag
/// `ReLU(scale·q·kᵀ) ⊙ mask · v`. Masked keys get `−1e30`, whose exp is exactly 0, so this equals
/// the core's skipping of invisible keys.
#[allow(clippy::too_many_arguments)]
fn softmax_kernel(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    scale: f32,
    bias: Option<&Tensor>,
    window: Window,
    relu: bool,
    dev: &Device,
) -> Result<Tensor> {
    let t = q.dim(2)?;
    let mut s = (q.matmul(&k.t()?.contiguous()?)? * scale as f64)?;
    if let Some(b) = bias {
        s = s.broadcast_add(b)?;
    }
    let mask = window_mask(t, window, dev)?;
    let p = if relu {
        s.relu()?.broadcast_mul(&mask)?
    } else {
        let add = ((mask.ones_like()? - &mask)? * MASKED)?;
        candle_nn::ops::softmax(&s.broadcast_add(&add)?, D::Minus1)?
    };
    Ok(p.matmul(v)?)
}

/// Position bias `B_h(i, j)` as `[H, T, T]` (§5.5). Entries above the diagonal are 0 (masked later).
fn position_bias(m: &TrainModel, i: usize, spec: &AttentionSpec, t: usize) -> Result<Tensor> {
    let cfg = m.config();
    let (h, dh) = (cfg.n_heads, cfg.head_dim);
    let dev = m.device();
    // Distance matrix δ = i − j (0 above the diagonal).
    let delta: Vec<f64> = (0..t * t).map(|x| (x / t).saturating_sub(x % t) as f64).collect();
    let dmat = const_f64(delta.clone(), &[1, t, t], dev)?;
    let slopes = |s: &Option<Vec<f64>>| s.clone().unwrap_or_else(|| bias::alibi_slopes(h));
    // A fixed table B_h(δ) in f64, rounded to f32 and floored as in the core's build_table.
    let table = |f: &dyn Fn(usize, f64) -> f64| -> Result<Tensor> {
        let mut v = Vec::with_capacity(h * t * t);
        for hh in 0..h {
            for &dd in &delta {
                let x = f(hh, dd);
                v.push(if x.is_finite() { (x as f32).max(bias::MASKED) as f64 } else { MASKED });
            }
        }
        const_f64(v, &[h, t, t], dev)
    };
    let per_head = |name: &str| -> Result<Tensor> { Ok(m.w(name)?.reshape((h, 1, 1))?) };
    match spec {
        AttentionSpec::Alibi(attnlab_core::variants::alibi::Alibi { slopes: s }) => {
            let sl = slopes(s);
            table(&|hh, dd| bias::alibi(sl[hh], dd))
        }
        AttentionSpec::Gaussian(attnlab_core::variants::gaussian::Gaussian { slopes: s }) => {
            let sl = slopes(s);
            table(&|hh, dd| bias::gaussian(sl[hh], dd))
        }
        AttentionSpec::Sandwich(attnlab_core::variants::sandwich::Sandwich { dbar }) => {
            let db = dbar.unwrap_or(dh - dh % 2).max(2);
            table(&|hh, dd| bias::sandwich(dd, hh, h, db))
        }
        AttentionSpec::Mep(attnlab_core::variants::mep::Mep { kernels, slopes: s }) => {
            let sl = slopes(s);
            table(&|hh, dd| bias::mep_log_kernel(kernels, sl[hh], dd))
        }
        // −p·ln(1 + a·δ) with a, p ≥ 0.01 (MEP Eqs. 18–19; KERPLE `mpu/layers.py`).
        AttentionSpec::KerpleLog(_) => {
            let a = per_head("pos.kerple_log.a")?.maximum(bias::KERPLE_MIN)?;
            let p = per_head("pos.kerple_log.p")?.maximum(bias::KERPLE_MIN)?;
            Ok(p.broadcast_mul(&(a.broadcast_mul(&dmat)? + 1.0)?.log()?)?.neg()?)
        }
        // −a·δ^p with a ≥ 0.01, p ∈ [0.01, 2], and B(0) = 0 (KERPLE `ParallelKerplePower`).
        // δ^p = exp(p·ln max(δ, 1)).
        AttentionSpec::KerplePower(_) => {
            let a = per_head("pos.kerple_power.a")?.maximum(bias::KERPLE_MIN)?;
            let p = per_head("pos.kerple_power.p")?.clamp(bias::KERPLE_MIN, bias::KERPLE_POWER_MAX_P)?;
            let ln_d = const_f64(delta.iter().map(|&x| x.max(1.0).ln()).collect(), &[1, t, t], dev)?;
            let nz =
                const_f64(delta.iter().map(|&x| if x > 0.0 { 1.0 } else { 0.0 }).collect(), &[1, t, t], dev)?;
            let pow = p.broadcast_mul(&ln_d)?.exp()?.broadcast_mul(&nz)?;
            Ok(a.broadcast_mul(&pow)?.neg()?)
        }
        // W[bucket(δ), h]·√dh (MEP Eq. 22; GPT-NeoX scales T5's table by √dh): the bucket index is
        // fixed, the table is gathered in the graph.
        AttentionSpec::T5(attnlab_core::variants::t5::T5 { num_buckets, max_distance }) => {
            let idx: Vec<u32> = delta
                .iter()
                .map(|&dd| bias::t5_bucket(dd as usize, *num_buckets, *max_distance) as u32)
                .collect();
            let idx = Tensor::from_vec(idx, t * t, dev)?;
            let g = m.w("pos.t5.bucket_bias")?.index_select(&idx, 0)?; // [T·T, H]
            Ok((g.t()?.contiguous()?.reshape((h, t, t))? * (dh as f64).sqrt())?)
        }
        // FIRE (Li et al., 2023; mcleish7/arithmetic `FIRE`): u = ψ(i − j)/(ψ(max(i, |l_mult·L|)) + 1e−6),
        // ψ(x) = ln(1 + |c·x|), then the MLP.
        AttentionSpec::Fire(attnlab_core::variants::fire::Fire { init_l }) => {
            let p = |n: &str| format!("layers.{i}.attn.fire.{n}");
            let l = init_l.unwrap_or(cfg.train_context as f64);
            let c = m.w(&p("c"))?.reshape((1, 1))?;
            let l_mult = m.w(&p("l_mult"))?.reshape((1, 1))?;
            let rel = const_f64(delta.clone(), &[t, t], dev)?;
            let qpos = const_f64((0..t * t).map(|x| (x / t) as f64).collect(), &[t, t], dev)?;
            let psi = |x: &Tensor| -> Result<Tensor> { Ok((c.broadcast_mul(x)?.abs()? + 1.0)?.log()?) };
            let thr = (l_mult * l)?.abs()?;
            let query = qpos.broadcast_maximum(&thr)?;
            let u = psi(&rel)?.broadcast_div(&(psi(&query)? + 1e-6)?)?; // [T, T]
            let k = bias::FIRE_HIDDEN;
            let w1 = m.w(&p("w1"))?.reshape((1, 1, k))?;
            let b1 = m.w(&p("b1"))?.reshape((1, 1, k))?;
            let hid = u.unsqueeze(2)?.broadcast_mul(&w1)?.broadcast_add(&b1)?.relu()?; // [T, T, K]
            let out = linear(&hid, m.w(&p("w2"))?)?.broadcast_add(m.w(&p("b2"))?)?; // [T, T, H]
            Ok(out.permute((2, 0, 1))?.contiguous()?)
        }
        // LSE[ln w_K − p·ln(1 + a δ), ln w_G − g_h δ²] (MEP Eqs. 27–28); a term with weight ≤ 0 is dropped.
        AttentionSpec::MepParam(attnlab_core::variants::mep_param::MepParam {
            kerple_weight,
            gaussian_weight,
            gaussian_scale,
        }) => {
            let a = per_head("pos.mep_param.a")?.maximum(bias::KERPLE_MIN)?;
            let p = per_head("pos.mep_param.p")?.maximum(bias::KERPLE_MIN)?;
            let kerple = if *kerple_weight > 0.0 {
                let lk = p.broadcast_mul(&(a.broadcast_mul(&dmat)? + 1.0)?.log()?)?.neg()?;
                Some((lk + kerple_weight.ln())?)
            } else {
                None
            };
            let gauss = if *gaussian_weight > 0.0 {
                let sl = bias::alibi_slopes(h);
                let v: Vec<f64> = (0..h)
                    .flat_map(|hh| {
                        let gs = (gaussian_scale * sl[hh]).max(0.0);
                        delta.iter().map(move |&dd| gaussian_weight.ln() - (gs * dd) * dd).collect::<Vec<_>>()
                    })
                    .collect();
                Some(const_f64(v, &[h, t, t], dev)?)
            } else {
                None
            };
            match (kerple, gauss) {
                (Some(a), Some(b)) => log_add_exp(&a.broadcast_as((h, t, t))?.contiguous()?, &b),
                (Some(a), None) => Ok(a.broadcast_as((h, t, t))?.contiguous()?),
                (None, Some(b)) => Ok(b),
                (None, None) => Ok(Tensor::zeros((h, t, t), DType::F32, dev)?),
            }
        }
        other => Err(TrainError::Candle(candle_core::Error::Msg(format!(
            "variant {} has no position bias",
            other.variant_id()
        )))),
    }
}

/// RoPE `(cos, sin)` tables `[T, dh/2]` of `s·base^(−2k/dh)`, evaluated in f64 (§5.4).
fn rope_tables(t: usize, dh: usize, base: f64, dev: &Device) -> Result<(Tensor, Tensor)> {
    let n = dh / 2;
    let (mut c, mut s) = (Vec::with_capacity(t * n), Vec::with_capacity(t * n));
    for pos in 0..t {
        for k in 0..n {
            let (sn, cs) = (pos as f64 * attnlab_core::rotary::inv_freq(base, k, dh)).sin_cos();
            c.push(cs);
            s.push(sn);
        }
    }
    Ok((const_f64(c, &[t, n], dev)?, const_f64(s, &[t, n], dev)?))
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
    /// Unit Householder vector (graph tensor, normalised from the learnable `v`).
    householder: Option<Tensor>,
    /// Odd-even gather index.
    odd_even: Option<Tensor>,
    /// `(cos, sin)` of `s·θ`: `[T, n]` (rotation/mixed) or `[T, dh]` (complex).
    cos_sin: Option<(Tensor, Tensor)>,
    /// Permutation core: gather index `[T, dh]` with `π^s(j)`.
    perm: Option<Tensor>,
}

impl LrpeTransform {
    #[allow(clippy::too_many_arguments)]
    fn new(
        m: &TrainModel,
        i: usize,
        core: LrpeCore,
        p: LrpeP,
        theta: LrpeTheta,
        seed: u64,
        t: usize,
        dh: usize,
        dev: &Device,
    ) -> Result<LrpeTransform> {
        let name = |n: &str| format!("layers.{i}.attn.lrpe.{n}");
        let householder = if p == LrpeP::Householder {
            let v = m.w(&name("householder_v"))?;
            let norm = v.sqr()?.sum_all()?.sqrt()?;
            Some(v.broadcast_div(&norm)?)
        } else {
            None
        };
        let odd_even = if p == LrpeP::OddEven {
            let idx: Vec<u32> = (0..dh).map(|j| lrpe::odd_even_index(j, dh) as u32).collect();
            Some(Tensor::from_vec(idx, dh, dev)?)
        } else {
            None
        };
        let n = Lrpe::n_angles(core, dh);
        let cos_sin = if n > 0 {
            // Angles s·θ_k: learned θ stays in the graph so it gets gradients.
            let th = if theta == LrpeTheta::Learned {
                m.w(&name("theta"))?.reshape((1, n))?
            } else {
                let fixed = Lrpe::new(core, LrpeP::Identity, dh, None, None, seed)?;
                const_f64(fixed.angles().to_vec(), &[1, n], dev)?
            };
            let pos = const_f64((0..t).map(|s| s as f64).collect(), &[t, 1], dev)?;
            let ang = pos.broadcast_mul(&th)?;
            Some((ang.cos()?, ang.sin()?))
        } else {
            None
        };
        let perm = if core == LrpeCore::Permutation {
            let l = Lrpe::new(core, LrpeP::Identity, dh, None, None, seed)?;
            let idx: Vec<u32> =
                (0..t).flat_map(|s| (0..dh).map(|j| l.perm_power(s, j) as u32).collect::<Vec<_>>()).collect();
            Some(Tensor::from_vec(idx, (t, dh), dev)?)
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
    /// Per-token, per-channel log-gates `[B, H, T, dk]`, all `≤ 0` (GLA, ReGLA).
    PerChannel(Tensor),
}

/// Gated linear attention (§5.6) for features `fq, fk: [B, H, T, dk]`, values `v: [B, H, T, dh]`;
/// with `den_eps` the output is divided by `max(Σ_s P[i, s], eps)`. Returns `[B, H, T, dh]`.
fn linear_attention(
    fq: &Tensor,
    fk: &Tensor,
    v: &Tensor,
    gate: &Gate,
    den_eps: Option<f64>,
) -> Result<Tensor> {
    let (_, h, t, _) = fq.dims4()?;
    let dev = fq.device();
    let decay = match gate {
        Gate::PerChannel(lg) => {
            if den_eps.is_some() {
                return Err(TrainError::Candle(candle_core::Error::Msg(
                    "per-channel gates with a denominator are not part of the catalog".into(),
                )));
            }
            return gated_chunked(fq, fk, v, lg);
        }
        Gate::None => window_mask(t, Window::Causal, dev)?.reshape((1, 1, t, t))?,
        Gate::PerHead(lg) => {
            let mut d = Vec::with_capacity(h * t * t);
            for &l in lg {
                for x in 0..t * t {
                    let (i, s) = (x / t, x % t);
                    d.push(if s <= i { ((i - s) as f64 * l).exp() } else { 0.0 });
                }
            }
            const_f64(d, &[1, h, t, t], dev)?
        }
    };
    let p = fq.matmul(&fk.t()?.contiguous()?)?.broadcast_mul(&decay)?;
    let o = p.matmul(v)?;
    match den_eps {
        Some(eps) => Ok(o.broadcast_div(&p.sum_keepdim(D::Minus1)?.maximum(eps)?)?),
        None => Ok(o),
    }
}

/// Chunked gated form with per-channel log-gates (module docs): every exponent is `≤ 0`.
fn gated_chunked(fq: &Tensor, fk: &Tensor, v: &Tensor, lg: &Tensor) -> Result<Tensor> {
    let (b, h, t, dk) = fq.dims4()?;
    let dh = v.dim(3)?;
    let dev = fq.device();
    let mut state = Tensor::zeros((b, h, dk, dh), DType::F32, dev)?;
    let mut outs = Vec::new();
    let mut c0 = 0;
    while c0 < t {
        let n = GATED_CHUNK.min(t - c0);
        let q = fq.narrow(2, c0, n)?;
        let k = fk.narrow(2, c0, n)?;
        let vv = v.narrow(2, c0, n)?;
        // b_i = Σ_{u=c0..i} lg_u, chunk-local and inclusive.
        let bc = lg.narrow(2, c0, n)?.contiguous()?.cumsum(2)?;
        // Inter-chunk: (φq ⊙ e^{b_i}) · S_start.
        let inter = (&q * bc.exp()?)?.matmul(&state)?;
        let p = if bc.min_all()?.to_scalar::<f32>()? >= FACTORED_MIN_LOG_DECAY {
            // Mild decay inside the chunk: e^{b_i − b_s} = e^{b_i}·e^{−b_s} with e^{−b_s} ≤ e^{40}, so
            // the pairwise weights are one masked matmul.
            let mask = window_mask(n, Window::Causal, dev)?.reshape((1, 1, n, n))?;
            let qd = (&q * bc.exp()?)?;
            let kd = (&k * bc.neg()?.exp()?)?;
            qd.matmul(&kd.t()?.contiguous()?)?.broadcast_mul(&mask)?
        } else {
            // Strong decay: exponents b_i − b_s masked to 0 above the diagonal before exp.
            let mask = window_mask(n, Window::Causal, dev)?.reshape((1, 1, n, n, 1))?;
            let diff = bc.unsqueeze(3)?.broadcast_sub(&bc.unsqueeze(2)?)?; // [B,H,i,s,dk]
            let e = diff.broadcast_mul(&mask)?.exp()?.broadcast_mul(&mask)?;
            let qk = q.unsqueeze(3)?.broadcast_mul(&k.unsqueeze(2)?)?;
            (qk * e)?.sum(D::Minus1)? // [B,H,n,n]
        };
        outs.push((inter + p.matmul(&vv)?)?);
        // Carry: S ← e^{b_last} ⊙ S + (φk ⊙ e^{b_last − b_s})ᵀ v.
        let last = bc.narrow(2, n - 1, 1)?; // [B,H,1,dk]
        let kw = (&k * last.broadcast_sub(&bc)?.exp()?)?;
        state = (state.broadcast_mul(&last.exp()?.transpose(2, 3)?)? + kw.t()?.contiguous()?.matmul(&vv)?)?;
        c0 += n;
    }
    Ok(Tensor::cat(&outs, 2)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Naive f64 reference of §5.6: `o_i = Σ_{s≤i} Σ_j φq_i[j] φk_s[j] e^{Σ_{s<u≤i} lg_u[j]} v_s`.
    fn naive(fq: &[f32], fk: &[f32], v: &[f32], lg: &[f32], t: usize, dk: usize, dh: usize) -> Vec<f64> {
        let mut o = vec![0.0f64; t * dh];
        for i in 0..t {
            for s in 0..=i {
                let mut p = 0.0f64;
                for j in 0..dk {
                    let decay: f64 = (s + 1..=i).map(|u| lg[u * dk + j] as f64).sum();
                    p += fq[i * dk + j] as f64 * fk[s * dk + j] as f64 * decay.exp();
                }
                for c in 0..dh {
                    o[i * dh + c] += p * v[s * dh + c] as f64;
                }
            }
        }
        o
    }

    /// Both the factored (mild gates) and the pairwise (strong gates, cumulative decay far below
    /// −40 within a chunk) paths equal the naive reference and stay finite.
    #[test]
    fn gated_chunked_matches_the_naive_recurrence_for_mild_and_strong_gates() {
        let (t, dk, dh) = (37, 4, 3);
        let dev = Device::Cpu;
        let val = |i: usize, a: f32| (i as f32 * a).sin() * 0.9;
        let fq: Vec<f32> = (0..t * dk).map(|i| val(i, 0.37).abs() + 0.1).collect();
        let fk: Vec<f32> = (0..t * dk).map(|i| val(i, 0.71).abs() + 0.1).collect();
        let v: Vec<f32> = (0..t * dh).map(|i| val(i, 1.3)).collect();
        for scale in [0.05f32, 9.0] {
            let lg: Vec<f32> = (0..t * dk).map(|i| -scale * (val(i, 0.53).abs() + 0.05)).collect();
            let tq = |x: &[f32], w: usize| Tensor::from_vec(x.to_vec(), (1, 1, t, w), &dev).expect("tensor");
            let got = gated_chunked(&tq(&fq, dk), &tq(&fk, dk), &tq(&v, dh), &tq(&lg, dk))
                .expect("chunked")
                .flatten_all()
                .expect("flat")
                .to_vec1::<f32>()
                .expect("vec");
            let want = naive(&fq, &fk, &v, &lg, t, dk, dh);
            let max_ref = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            for (g, w) in got.iter().zip(&want) {
                assert!(g.is_finite());
                assert!((*g as f64 - w).abs() <= 1e-5 * max_ref, "scale {scale}: {g} vs {w}");
            }
        }
    }
}
