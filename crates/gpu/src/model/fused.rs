//! The fused decode (shaders/decode.wgsl): which models have it, the vectors and parameter blocks
//! its kernels read, and the layout of its activations `fa`.

use super::layers::{Kind, Norm, Role};
use super::upload::HostModel;
use crate::params::{BiasKind, DecodeParams, EwOp, FUSED_HEAD_ROWS, FUSED_MAX_D};
use attnlab_core::config::{FfnKind, ModelConfig};
use attnlab_core::ops::SIMPLE_RMS_EPS;

/// Words of `fa` before the first region (word 0: the step's token id).
const FA_HEAD: usize = 4;

/// One dispatch's `aux` vectors and parameter block, on the host or uploaded.
pub(super) struct Part<B> {
    pub vecs: B,
    pub params: DecodeParams,
}

/// Every block's part and the logits' (final norm), on the host or uploaded.
pub(super) struct Fused<B> {
    pub layers: Vec<Part<B>>,
    pub head: Part<B>,
    /// Words of the decode activations `fa`.
    pub fa_len: usize,
}

impl<B> Fused<B> {
    pub fn map<C>(&self, f: &mut impl FnMut(&'static str, &B, Role) -> C) -> Fused<C> {
        let mut part =
            |p: &Part<B>| Part { vecs: f("decode vectors", &p.vecs, Role::Vector), params: p.params };
        Fused {
            layers: self.layers.iter().map(&mut part).collect(),
            head: part(&self.head),
            fa_len: self.fa_len,
        }
    }

    /// Workgroups of the logits' dispatch.
    pub fn head_groups(&self) -> u32 {
        self.head.params.vocab.div_ceil(FUSED_HEAD_ROWS as u32)
    }
}

/// Why `host` decodes op by op (`None`: it has the fused decode).
pub(super) fn unsupported(cfg: &ModelConfig, host: &HostModel) -> Option<String> {
    if cfg.d_model > FUSED_MAX_D {
        return Some(format!("d_model {} exceeds the fused kernels' {FUSED_MAX_D}", cfg.d_model));
    }
    for (i, l) in host.layers.iter().enumerate() {
        match &l.kind {
            Kind::Linear(_) => return Some(format!("layer {i} is a linear-attention layer")),
            Kind::Softmax(s) if s.bias == BiasKind::Contextual => {
                return Some(format!("layer {i} has a contextual (CoPE) bias"))
            }
            Kind::Softmax(s) if i == 0 && s.rope.is_some() && !host.pe.is_empty() => {
                return Some("layer 0 has both RoPE and absolute positions".into())
            }
            Kind::Softmax(_) => {}
        }
    }
    None
}

/// Vectors appended one after another; each push returns its offset.
#[derive(Default)]
struct Vecs(Vec<f32>);

impl Vecs {
    /// `v`, or `n` zeros when absent (an absent bias adds nothing).
    fn push(&mut self, v: Option<&[f32]>, n: usize) -> u32 {
        let off = self.0.len() as u32;
        match v {
            Some(v) => self.0.extend_from_slice(v),
            None => self.0.resize(self.0.len() + n, 0.0),
        }
        off
    }

    /// A norm's gain and bias: (kind, eps, gain offset, bias offset).
    fn norm(&mut self, n: &Norm<Vec<f32>>, d: usize) -> (u32, f32, u32, u32) {
        let w = self.push(Some(&n.w), d);
        let b = self.push(n.b.as_deref(), d);
        (n.op.code(), n.eps, w, b)
    }
}

/// The fused decode's host data for `host` (check [`unsupported`] first).
pub(super) fn plan(cfg: &ModelConfig, host: &HostModel) -> Fused<Vec<f32>> {
    let (d, h, dh, hid) = (cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.ffn.hidden);
    let a = h * dh;
    let slices = hid.div_ceil(64);
    let fa_x = FA_HEAD;
    let fa_x1 = fa_x + d;
    let fa_ss = fa_x1 + d;
    let fa_pa = fa_ss + h;
    let fa_pf = fa_pa + h * d;
    let base = DecodeParams {
        d: d as u32,
        h: h as u32,
        dh: dh as u32,
        a: a as u32,
        hid: hid as u32,
        vocab: cfg.vocab_size as u32,
        slices: slices as u32,
        parallel: u32::from(cfg.parallel_residual),
        relu_eps: SIMPLE_RMS_EPS,
        fa_x: fa_x as u32,
        fa_x1: fa_x1 as u32,
        fa_ss: fa_ss as u32,
        fa_pa: fa_pa as u32,
        fa_pf: fa_pf as u32,
        ..DecodeParams::default()
    };
    let layers = host
        .layers
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let mut v = Vecs::default();
            let mut p = base;
            if let Kind::Softmax(s) = &l.kind {
                v.push(Some(&s.aux), 0);
                p.rope = u32::from(s.rope.is_some());
                p.relu_norm = u32::from(s.relu_norm);
            }
            if i == 0 {
                p.first = 1;
                p.use_pe = u32::from(!host.pe.is_empty());
                if let Some(n) = &host.emb_norm {
                    p.emb_norm = 1;
                    (p.emb_kind, p.emb_eps, p.off_emb_w, p.off_emb_b) = v.norm(n, d);
                }
            }
            (p.norm_kind, p.norm_eps, p.off_norm_w, p.off_norm_b) = v.norm(&l.attn_norm, d);
            (p.ffn_kind, p.ffn_eps, p.off_ffn_w, p.off_ffn_b) = v.norm(&l.ffn_norm, d);
            p.off_bqkv = v.push(l.wqkv.b.as_deref(), 3 * a);
            p.off_bo = v.push(l.wo.b.as_deref(), d);
            p.off_bup = v.push(l.ffn_up.b.as_deref(), hid);
            p.off_bgate = v.push(l.ffn_gate.as_ref().and_then(|g| g.b.as_deref()), hid);
            p.off_bdown = v.push(l.ffn_down.b.as_deref(), d);
            p.act = match (&l.ffn_gate, cfg.ffn.kind) {
                (Some(_), _) => EwOp::SiluGate,
                (None, FfnKind::GeluExact) => EwOp::GeluExact,
                (None, _) => EwOp::Gelu,
            }
            .code();
            Part { vecs: v.0, params: p }
        })
        .collect();
    let mut v = Vecs::default();
    let mut p = base;
    (p.norm_kind, p.norm_eps, p.off_norm_w, p.off_norm_b) = v.norm(&host.final_norm, d);
    Fused { layers, head: Part { vecs: v.0, params: p }, fa_len: fa_pf + slices * d }
}
