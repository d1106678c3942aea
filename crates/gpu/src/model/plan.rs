//! The one place that reads the core's lowered form of a layer (`AttnLayer::lowering()`,
//! `projections()`) and turns it into GPU parameter blocks and host arrays: the GPU dispatches on
//! the lowering (feature map, position transform, gate, post step), never on the variant.

use super::layers::{Gate, Kind, LinearLayer, Post, Proj, SoftmaxLayer};
use super::usize_u32;
use crate::error::{GpuError, Result};
use crate::params::{AttnParams, BiasKind, FeatKind, FeatParams, LrpeCoreKind, LrpePKind};
use attnlab_core::lowering::{
    self as lw, Bias, FeatureMap, LinearLowering, Lowering, Rotation, SoftmaxLowering, Window,
};
use attnlab_core::lrpe::Lrpe;
use attnlab_core::ops::{repeat_heads, Linear};
use attnlab_core::variants::lrpe::{LrpeCore, LrpeP};
use attnlab_core::{Error as CoreError, Model};

/// Shape of the model the tables are built for.
#[derive(Clone, Copy)]
struct Shape {
    h: usize,
    dh: usize,
    /// Query/key head width (≤ dh; see [`pad_keys`]).
    qk: usize,
    /// max_context (rows of the position tables).
    ctx: usize,
}

/// A layer's attention as the GPU runs it.
pub(super) struct Attention {
    /// `wq | wk | wv` fused, `[3a, d]`, with `bq | bk | bv` if any of them has a bias.
    pub wqkv: Proj<Vec<f32>>,
    pub wo: Proj<Vec<f32>>,
    pub kind: Kind<Vec<f32>>,
}

/// Attention of layer `i`.
pub(super) fn attention(model: &Model, i: usize) -> Result<Attention> {
    let cfg = model.config();
    let (h, dh, qk) = (cfg.n_heads, cfg.head_dim, cfg.key_head_dim());
    if qk > dh {
        return Err(GpuError::Unsupported(format!("qk_head_dim {qk} wider than head_dim {dh}")));
    }
    let shape = Shape { h, dh, qk, ctx: cfg.max_context };
    let attn = model
        .attention(i)
        .ok_or_else(|| CoreError::arg("layer", format!("layer {i} is missing from the model")))?;
    let [wq, wk, wv, wo] = attn.projections();
    let kind = match attn.lowering() {
        Lowering::Softmax(sl) => Kind::Softmax(softmax(shape, sl)?),
        Lowering::Linear(l) => Kind::Linear(linear(shape, l)?),
    };
    // Grouped-query attention runs as multi-head attention with each key/value head repeated.
    let group = attn.kv_group();
    let (wk, wv) = (wk.repeat_heads(group, qk), wv.repeat_heads(group, dh));
    let (q, k) = (pad_keys(shape, proj(wq), wq.inp), pad_keys(shape, proj(&wk), wk.inp));
    Ok(Attention { wqkv: fused([q, k, proj(&wv)], wq.inp), wo: proj(wo), kind })
}

/// The kernels read query and key heads `head_dim` wide: narrower keys (`qk_head_dim`, gla only)
/// get zero rows appended to each head of a projection `[H·qk, row]` (and its bias). Exact: a
/// padded channel has φq = φk = 0, so its state row stays 0 and adds nothing to φq·S; the cost is
/// the padding's share of the q/k work.
fn pad_keys(s: Shape, p: Proj<Vec<f32>>, row: usize) -> Proj<Vec<f32>> {
    let pad = |x: Vec<f32>, row: usize| -> Vec<f32> {
        if s.qk == s.dh {
            return x;
        }
        x.chunks_exact(s.qk * row)
            .flat_map(|head| head.iter().copied().chain(vec![0.0; (s.dh - s.qk) * row]))
            .collect()
    };
    Proj { w: pad(p.w, row), b: p.b.map(|b| pad(b, 1)) }
}

/// A projection as uploaded: the weight widened to f32 (the kernels read f32), the bias as it is.
pub(super) fn proj(l: &Linear) -> Proj<Vec<f32>> {
    Proj { w: l.w.to_f32().into_owned(), b: l.b.clone() }
}

/// Projections stacked along their outputs into one matmul; a missing bias is zeros when another
/// has one (`inp`: their common input width).
fn fused(ps: [Proj<Vec<f32>>; 3], inp: usize) -> Proj<Vec<f32>> {
    let rows = |p: &Proj<Vec<f32>>| p.w.len() / inp.max(1);
    let b = ps
        .iter()
        .any(|p| p.b.is_some())
        .then(|| ps.iter().flat_map(|p| p.b.clone().unwrap_or_else(|| vec![0.0; rows(p)])).collect());
    Proj { w: ps.iter().flat_map(|p| p.w.iter().copied()).collect(), b }
}

/// The weight of a gate projection, whose kernels add no bias: one with a bias is refused.
fn unbiased(l: &Linear, what: &str) -> Result<Vec<f32>> {
    match l.b {
        None => Ok(l.w.to_f32().into_owned()),
        Some(_) => Err(GpuError::Unsupported(format!("a bias on the {what} projection"))),
    }
}

fn softmax(s: Shape, sl: &SoftmaxLowering) -> Result<SoftmaxLayer<Vec<f32>>> {
    let (scale, relu_with_norm) = (sl.scale, sl.relu_with_norm);
    let block = match sl.window {
        Window::Causal => None,
        Window::Block(w) => Some(w),
    };
    let mut params = AttnParams {
        h: usize_u32("heads", s.h)?,
        dh: usize_u32("head_dim", s.dh)?,
        a: usize_u32("attn_dim", s.h * s.dh)?,
        block: usize_u32("block", block.unwrap_or(0))?,
        scale,
        relu: u32::from(relu_with_norm),
        ..AttnParams::default()
    };
    let (kind, aux) = match &sl.bias {
        Bias::None => (BiasKind::None, Vec::new()),
        Bias::Table { len, values, .. } => {
            params.table_len = usize_u32("table", *len)?;
            (BiasKind::Table, values.clone())
        }
        Bias::Fire { c, l_mult, init_l, w1, b1, w2, b2 } => {
            params.fire_hidden = usize_u32("fire hidden", w1.len())?;
            params.fire_c = **c as f32;
            params.fire_thr = (**l_mult * init_l).abs() as f32;
            (BiasKind::Fire, [w1.as_slice(), b1.as_slice(), w2.as_slice(), b2.as_slice()].concat())
        }
        Bias::Contextual { npos, pos_emb } => {
            if relu_with_norm || *npos == 0 || pos_emb.len() != npos * s.dh {
                return Err(GpuError::Unsupported(format!(
                    "contextual (CoPE) bias with {npos} positions, {} embedding values{}",
                    pos_emb.len(),
                    if relu_with_norm { " and ReLU attention" } else { "" }
                )));
            }
            params.npos = usize_u32("npos", *npos)?;
            (BiasKind::Contextual, pos_emb.to_vec())
        }
    };
    let rope = sl.rope.as_ref().map(|freqs| cos_sin_table(s.ctx, freqs));
    Ok(SoftmaxLayer { bias: kind, params, aux, rope, relu_norm: relu_with_norm })
}

/// The feature kernels of linear_features.wgsl cover the catalog's combinations of feature map,
/// position transform and gate; another combination is refused by name. Every post step runs on
/// the attention output whatever the features (record.rs `linear_post`).
fn linear(s: Shape, l: &LinearLowering) -> Result<LinearLayer<Vec<f32>>> {
    let (dh, a) = (s.dh, s.h * s.dh);
    let mut p = FeatParams {
        h: usize_u32("heads", s.h)?,
        dh: usize_u32("head_dim", dh)?,
        dk: usize_u32("dk", if s.qk < dh { dh } else { l.dk })?,
        a: usize_u32("attn_dim", a)?,
        ..FeatParams::default()
    };
    let mut aux = Vec::new();
    let (feat, gate) = match (&l.rotation, &l.gate, l.q.map) {
        (None, lw::Gate::None, FeatureMap::EluPlusOne | FeatureMap::Elu) => {
            p.plus_one = u32::from(l.q.map == FeatureMap::EluPlusOne);
            (FeatKind::Elu, Gate::None)
        }
        (Some(Rotation::Lrpe { lrpe, .. }), lw::Gate::None, FeatureMap::EluPlusOne) => {
            lrpe_tables(s, lrpe, &mut p, &mut aux)?;
            (FeatKind::Lrpe, Gate::None)
        }
        (None, lw::Gate::LowRank { down, up, bias, normalizer }, FeatureMap::Identity) => {
            p.scale = l.q.scale;
            p.normalizer = *normalizer as f32;
            p.gpre_stride = usize_u32("attn_dim", a)?;
            // Per key/value head in the model: repeated for the query heads, then padded.
            let group = s.h / (up.out / s.qk).max(1);
            let up_w = repeat_heads(unbiased(up, "GLA gate")?, group, s.qk * up.inp);
            let up = pad_keys(s, Proj { w: up_w, b: Some(repeat_heads(bias.to_vec(), group, s.qk)) }, up.inp);
            aux.extend(up.b.unwrap_or_default());
            (FeatKind::Gla, Gate::Gla { down: unbiased(down, "GLA gate")?, up: up.w, rank: down.out })
        }
        (None, lw::Gate::Refined { wg, bg, wr, br }, FeatureMap::ExpMax) => {
            p.scale = l.q.scale;
            p.gpre_stride = usize_u32("attn_dim", 2 * a)?;
            aux.extend_from_slice(bg);
            aux.extend_from_slice(br);
            let wgr = [unbiased(wg, "ReGLA gate")?, unbiased(wr, "ReGLA gate")?].concat();
            (FeatKind::Regla, Gate::FullRank { wgr })
        }
        (None, lw::Gate::TwoSided { wf, bf, wz, bz }, FeatureMap::Identity) if l.dk == dh => {
            // Fast Decay (ReGLA §2.1, Eqs. 9–10): gate rows w_f | w_z, biases b_f | b_z.
            p.scale = l.q.scale;
            p.gpre_stride = usize_u32("attn_dim", 2 * a)?;
            aux.extend_from_slice(bf);
            aux.extend_from_slice(bz);
            let wgr = [unbiased(wf, "Fast Decay gate")?, unbiased(wz, "Fast Decay gate")?].concat();
            (FeatKind::FastDecay, Gate::FullRank { wgr })
        }
        (Some(Rotation::Rope { inv_freq }), lw::Gate::PerHead { log_gamma }, FeatureMap::Identity) => {
            p.scale = l.q.scale;
            aux.extend_from_slice(log_gamma);
            p.off_tab = usize_u32("aux", aux.len())?;
            aux.extend(cos_sin_table(s.ctx, inv_freq));
            (FeatKind::Retnet, Gate::None)
        }
        (None, lw::Gate::KeyForget { lower_bound, .. }, FeatureMap::Swish) => {
            if lower_bound.len() != a || l.dk != dh {
                return Err(GpuError::Unsupported(format!(
                    "key-forget gate with {} lower bounds and feature width {} (expected {a} and {dh})",
                    lower_bound.len(),
                    l.dk
                )));
            }
            p.scale = l.q.scale;
            aux.extend_from_slice(lower_bound);
            (FeatKind::Hgrn2, Gate::None)
        }
        (rotation, gate, map) => {
            let rotation = match rotation {
                None => "none",
                Some(Rotation::Rope { .. }) => "rope",
                Some(Rotation::Lrpe { .. }) => "lrpe",
            };
            return Err(GpuError::Unsupported(format!(
                "no GPU kernel for feature map {map:?} with rotation {rotation} and gate {}",
                gate_name(gate)
            )));
        }
    };
    let den_eps = l.denominator.unwrap_or(0.0);
    Ok(LinearLayer { feat, params: p, aux, dk: p.dk as usize, den_eps, gate, post: post(&l.post, a)? })
}

fn gate_name(g: &lw::Gate) -> &'static str {
    match g {
        lw::Gate::None => "none",
        lw::Gate::PerHead { .. } => "per-head",
        lw::Gate::LowRank { .. } => "low-rank",
        lw::Gate::Refined { .. } => "refined",
        lw::Gate::KeyForget { .. } => "key-forget",
        lw::Gate::TwoSided { .. } => "two-sided",
    }
}

/// The post step over rows of `a` channels: RMSNorm groups are `gain.len()` channels wide (one
/// head, or all of them).
fn post(post: &lw::Post, a: usize) -> Result<Post<Vec<f32>>> {
    let group = |gain: &[f32]| {
        if gain.is_empty() || !a.is_multiple_of(gain.len()) {
            return Err(GpuError::Unsupported(format!(
                "an RMSNorm gain of {} channels does not tile the {a} attention channels",
                gain.len()
            )));
        }
        Ok(gain.len())
    };
    Ok(match post {
        lw::Post::None => Post::None,
        lw::Post::SimpleRmsNorm => Post::Simple,
        lw::Post::RmsNorm { gain, eps } => {
            Post::RmsNorm { group: group(gain)?, eps: *eps, gain: gain.to_vec() }
        }
        lw::Post::RmsNormGate { gain, eps, out_gate } => Post::RmsNormGate {
            group: group(gain)?,
            eps: *eps,
            gain: gain.to_vec(),
            out_gate: unbiased(out_gate, "output gate")?,
        },
    })
}

/// LRPE: P and core codes in `p`; Householder v (or zeros) at offset 0, then the core's table.
fn lrpe_tables(s: Shape, l: &Lrpe, p: &mut FeatParams, aux: &mut Vec<f32>) -> Result<()> {
    let dh = s.dh;
    let kind = match l.p() {
        LrpeP::Identity => LrpePKind::Identity,
        LrpeP::Householder => LrpePKind::Householder,
        LrpeP::OddEven => LrpePKind::OddEven,
    };
    p.lrpe_p = kind.code();
    if let Some(v) = l.householder_v() {
        aux.extend(v.iter().map(|&x| x as f32));
    } else {
        aux.resize(dh, 0.0);
    }
    p.off_vec = 0;
    p.off_tab = usize_u32("aux", aux.len())?;
    match l.core() {
        LrpeCore::Rotation | LrpeCore::Mixed => {
            p.lrpe_core = LrpeCoreKind::Rotation.code();
            p.n_angles = usize_u32("angles", l.angles().len())?;
            aux.extend(cos_sin_table(s.ctx, l.angles()));
        }
        LrpeCore::Permutation => {
            p.lrpe_core = LrpeCoreKind::Permutation.code();
            for pos in 0..s.ctx {
                for j in 0..dh {
                    aux.push(l.perm_power(pos, j) as f32);
                }
            }
        }
        LrpeCore::Complex => {
            p.lrpe_core = LrpeCoreKind::Complex.code();
            aux.extend(cos_sin_table(s.ctx, l.angles()));
        }
    }
    Ok(())
}

/// `[ctx, n, 2]` table of (cos, sin) of `pos · angle[k]`, in f64.
fn cos_sin_table(ctx: usize, angles: &[f64]) -> Vec<f32> {
    let mut t = Vec::with_capacity(ctx * angles.len() * 2);
    for s in 0..ctx {
        for &a in angles {
            let (sin, cos) = (s as f64 * a).sin_cos();
            t.push(cos as f32);
            t.push(sin as f32);
        }
    }
    t
}
