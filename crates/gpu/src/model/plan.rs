//! The one place that reads the core's per-layer attention API (`AttnLayer::plan()`,
//! `projections()`, `denominator_eps()`) and turns it into GPU parameter blocks and host arrays:
//! a change of that API is adapted here only.

use super::layers::{Gate, Kind, LinearLayer, Post, SoftmaxLayer};
use super::usize_u32;
use crate::error::Result;
use crate::params::{AttnParams, BiasKind, FeatKind, FeatParams, LrpeCoreKind, LrpePKind};
use attnlab_core::attention::{AttnLayer, BiasPlan, LayerPlan, LinearPlan};
use attnlab_core::config::{LrpeCore, LrpeNormalize, LrpeP, TransnormerFlavor};
use attnlab_core::lrpe::Lrpe;
use attnlab_core::{gates, lrpe, Error as CoreError, Model};

/// Shape of the model the tables are built for.
#[derive(Clone, Copy)]
struct Shape {
    h: usize,
    dh: usize,
    /// max_context (rows of the position tables).
    ctx: usize,
}

/// A layer's attention as the GPU runs it.
pub(super) struct Attention {
    /// `wq | wk | wv` fused, `[3a, d]`.
    pub wqkv: Vec<f32>,
    pub wo: Vec<f32>,
    pub kind: Kind<Vec<f32>>,
}

/// Attention of layer `i`.
pub(super) fn attention(model: &Model, i: usize) -> Result<Attention> {
    let cfg = model.config();
    let shape = Shape { h: cfg.n_heads, dh: cfg.head_dim, ctx: cfg.max_context };
    let attn = model
        .attention(i)
        .ok_or_else(|| CoreError::arg("layer", format!("layer {i} is missing from the model")))?;
    let [wq, wk, wv, wo] = attn.projections();
    let mut wqkv = Vec::with_capacity(3 * shape.h * shape.dh * cfg.d_model);
    wqkv.extend_from_slice(&wq.w);
    wqkv.extend_from_slice(&wk.w);
    wqkv.extend_from_slice(&wv.w);
    let kind = match attn.plan() {
        LayerPlan::Softmax { scale, bias, rope_base, block, relu_with_norm } => {
            Kind::Softmax(softmax(shape, scale, bias, rope_base, block, relu_with_norm)?)
        }
        LayerPlan::Linear { kind, dk } => Kind::Linear(linear(shape, attn, kind, dk)?),
    };
    Ok(Attention { wqkv, wo: wo.w.clone(), kind })
}

fn softmax(
    s: Shape,
    scale: f32,
    bias: BiasPlan<'_>,
    rope_base: Option<f64>,
    block: Option<usize>,
    relu_with_norm: bool,
) -> Result<SoftmaxLayer<Vec<f32>>> {
    let (kind, aux, table_len, hidden, c, thr) = match bias {
        BiasPlan::None => (BiasKind::None, Vec::new(), 0usize, 0usize, 0.0f32, 0.0f32),
        BiasPlan::Table { len, values } => (BiasKind::Table, values.to_vec(), len, 0, 0.0, 0.0),
        BiasPlan::Fire { c, l_mult, init_l, w1, b1, w2, b2 } => {
            let aux = [w1, b1, w2, b2].concat();
            (BiasKind::Fire, aux, 0, w1.len(), c as f32, (l_mult * init_l).abs() as f32)
        }
    };
    let params = AttnParams {
        h: usize_u32("heads", s.h)?,
        dh: usize_u32("head_dim", s.dh)?,
        a: usize_u32("attn_dim", s.h * s.dh)?,
        block: usize_u32("block", block.unwrap_or(0))?,
        scale,
        relu: u32::from(relu_with_norm),
        table_len: usize_u32("table", table_len)?,
        fire_hidden: usize_u32("fire hidden", hidden)?,
        fire_c: c,
        fire_thr: thr,
        ..AttnParams::default()
    };
    let rope = rope_base.map(|base| rope_table(s.ctx, s.dh, base));
    Ok(SoftmaxLayer { bias: kind, params, aux, rope, relu_norm: relu_with_norm })
}

fn linear(s: Shape, attn: &AttnLayer, kind: LinearPlan<'_>, dk: usize) -> Result<LinearLayer<Vec<f32>>> {
    let (dh, a) = (s.dh, s.h * s.dh);
    let mut p = FeatParams {
        h: usize_u32("heads", s.h)?,
        dh: usize_u32("head_dim", dh)?,
        dk: usize_u32("dk", dk)?,
        a: usize_u32("attn_dim", a)?,
        ..FeatParams::default()
    };
    let mut aux = Vec::new();
    let (feat, gate, post) = match kind {
        LinearPlan::LinearElu { .. } => {
            p.plus_one = 1;
            (FeatKind::Elu, Gate::None, Post::None)
        }
        LinearPlan::TransnormerNorm { flavor } => {
            p.plus_one = u32::from(flavor == TransnormerFlavor::T2);
            (FeatKind::Elu, Gate::None, Post::Simple)
        }
        LinearPlan::Lrpe { lrpe: l, normalize } => {
            lrpe_tables(s, l, &mut p, &mut aux)?;
            let post = match normalize {
                LrpeNormalize::Rmsnorm => Post::Simple,
                LrpeNormalize::Denominator => Post::None,
            };
            (FeatKind::Lrpe, Gate::None, post)
        }
        LinearPlan::Gla { down, up, bias, normalizer, out_gate, head_norm } => {
            p.scale = 1.0 / (dh as f32).sqrt();
            p.normalizer = normalizer as f32;
            p.gpre_stride = usize_u32("attn_dim", a)?;
            aux.extend_from_slice(bias);
            let gate = Gate::Gla { down: down.w.clone(), up: up.w.clone(), rank: down.out };
            (
                FeatKind::Gla,
                gate,
                Post::HeadNormGate { gain: head_norm.to_vec(), out_gate: out_gate.w.clone() },
            )
        }
        LinearPlan::Regla { wg, bg, wr, br, head_norm } => {
            p.scale = gates::regla_scale(dh) as f32;
            p.gpre_stride = usize_u32("attn_dim", 2 * a)?;
            aux.extend_from_slice(bg);
            aux.extend_from_slice(br);
            let wgr = [wg.w.as_slice(), wr.w.as_slice()].concat();
            (FeatKind::Regla, Gate::Regla { wgr }, Post::HeadNorm { gain: head_norm.to_vec() })
        }
        LinearPlan::Retnet { out_gate, head_norm, log_gamma } => {
            p.scale = 1.0 / (dh as f32).sqrt();
            aux.extend_from_slice(log_gamma);
            p.off_tab = usize_u32("aux", aux.len())?;
            aux.extend(rope_table(s.ctx, dh, 10000.0));
            let post = Post::HeadNormGate { gain: head_norm.to_vec(), out_gate: out_gate.w.clone() };
            (FeatKind::Retnet, Gate::None, post)
        }
    };
    let den_eps = attn.denominator_eps().unwrap_or(0.0);
    Ok(LinearLayer { feat, params: p, aux, dk, den_eps, gate, post })
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

fn rope_table(ctx: usize, dh: usize, base: f64) -> Vec<f32> {
    let angles: Vec<f64> = (0..dh / 2).map(|k| lrpe::inv_freq(base, k, dh)).collect();
    cos_sin_table(ctx, &angles)
}
