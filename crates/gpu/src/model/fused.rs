//! The fused decode (shaders/decode.wgsl): which models have it, the vectors and parameter blocks
//! its kernels read, and the layout of its activations `fa`.

use super::layers::{Gate, Kind, Layer, LinearLayer, Norm, Post, Role};
use super::upload::HostModel;
use crate::params::{
    BiasKind, DecodeParams, EwOp, NormOp, DEFAULT_SPLIT_KEYS, FUSED_HEAD_ROWS, FUSED_MAX_D,
    MAX_DECODE_SPLITS, MAX_DH, MIN_SPLIT_KEYS,
};
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
            Kind::Linear(ln) => {
                if let Some(why) = linear_unsupported(ln, cfg.head_dim, cfg.n_heads) {
                    return Some(format!("layer {i}: {why}"));
                }
            }
            Kind::Softmax(s) if i == 0 && s.rope.is_some() && !host.pe.is_empty() => {
                return Some("layer 0 has both RoPE and absolute positions".into())
            }
            Kind::Softmax(_) => {}
        }
    }
    None
}

/// Why a linear layer has no fused decode.
fn linear_unsupported(ln: &LinearLayer<Vec<f32>>, dh: usize, h: usize) -> Option<String> {
    if let Gate::Gla { rank, .. } = ln.gate {
        if rank > MAX_DH {
            return Some(format!("GLA gate rank {rank} exceeds the fused kernel's {MAX_DH}"));
        }
    }
    if let (Gate::FullRank { .. }, Post::RmsNormGate { .. }) = (&ln.gate, &ln.post) {
        return Some("full-rank gates together with an output gate".into());
    }
    match ln.post {
        Post::RmsNorm { group, .. } | Post::RmsNormGate { group, .. } if group != dh && group != h * dh => {
            Some(format!("an output norm over groups of {group} channels"))
        }
        _ => None,
    }
}

/// A linear layer's tables, gate matrices and post-op in `v` and `p`.
fn plan_linear(ln: &LinearLayer<Vec<f32>>, dh: usize, v: &mut Vecs, p: &mut DecodeParams) {
    // features() reads the feature tables from offset 0.
    v.push(Some(&ln.aux), 0);
    p.den_eps = ln.den_eps;
    match &ln.gate {
        Gate::None => {}
        Gate::Gla { down, up, rank } => {
            (p.gate, p.rank) = (1, *rank as u32);
            p.off_gdown = v.push(Some(down), 0);
            p.off_gup = v.push(Some(up), 0);
        }
        Gate::FullRank { .. } => p.gate = 2,
    }
    match &ln.post {
        Post::None => {}
        Post::Simple => {
            (p.post_norm, p.post_kind, p.post_eps) = (1, NormOp::SimpleRms.code(), SIMPLE_RMS_EPS)
        }
        Post::RmsNorm { gain, group, eps } | Post::RmsNormGate { gain, group, eps, .. } => {
            (p.gain, p.off_gain) = (1, v.push(Some(gain), 0));
            if *group == dh {
                (p.head_norm, p.head_eps) = (1, *eps);
            } else {
                p.gain_all = 1;
                (p.post_norm, p.post_kind, p.post_eps) = (1, NormOp::Rms.code(), *eps);
            }
            p.out_gate = u32::from(matches!(ln.post, Post::RmsNormGate { .. }));
        }
    }
}

/// Split-K workgroups per head of a model's softmax decode: enough for `max_context` keys at
/// [`MIN_SPLIT_KEYS`] each, at most [`MAX_DECODE_SPLITS`].
fn decode_splits(max_context: usize) -> usize {
    max_context.div_ceil(MIN_SPLIT_KEYS).clamp(1, MAX_DECODE_SPLITS)
}

/// Split-K workgroups a decode row at position `i` uses (decode.wgsl `split_k`): its keys (from
/// its Diag block's start when `block` > 0) in ranges of at least `keys`, at most `splits` of them.
pub(super) fn splits_used(i: u32, block: u32, splits: u32, keys: u32) -> u32 {
    let j0 = if block > 0 { i - i % block } else { 0 };
    let len = i + 1 - j0;
    let ks = keys.max(len.div_ceil(splits.max(1)));
    (len - 1) / ks + 1
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
    let (base, fa_len) = base_params(cfg);
    let layers = host.layers.iter().enumerate().map(|(i, l)| layer_part(cfg, host, i, l, base)).collect();
    let mut v = Vecs::default();
    let mut p = base;
    (p.norm_kind, p.norm_eps, p.off_norm_w, p.off_norm_b) = v.norm(&host.final_norm, cfg.d_model);
    Fused { layers, head: Part { vecs: v.0, params: p }, fa_len }
}

/// The parameters every part shares: the model's sizes and the scratch arena's layout (the
/// residual, its copy, the per-head sums, the split partials), and the arena's length.
fn base_params(cfg: &ModelConfig) -> (DecodeParams, usize) {
    let (d, h, dh, hid) = (cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.ffn.hidden);
    let slices = hid.div_ceil(64);
    let splits = decode_splits(cfg.max_context);
    let fa_x = FA_HEAD;
    let fa_x1 = fa_x + d;
    let fa_ss = fa_x1 + d;
    let fa_ml = fa_ss + h;
    let fa_o = fa_ml + h * splits * 2;
    let fa_pa = fa_o + h * splits * dh;
    let fa_pf = fa_pa + h * splits * d;
    let base = DecodeParams {
        d: d as u32,
        h: h as u32,
        dh: dh as u32,
        a: (h * dh) as u32,
        hid: hid as u32,
        vocab: cfg.vocab_size as u32,
        slices: slices as u32,
        parallel: u32::from(cfg.parallel_residual),
        fa_x: fa_x as u32,
        fa_x1: fa_x1 as u32,
        fa_ss: fa_ss as u32,
        fa_pa: fa_pa as u32,
        fa_pf: fa_pf as u32,
        fa_ml: fa_ml as u32,
        fa_o: fa_o as u32,
        split_keys: DEFAULT_SPLIT_KEYS,
        emb_scale: cfg.embedding_scale(),
        ..DecodeParams::default()
    };
    (base, fa_pf + slices * d)
}

/// Layer `i`'s part: its attention kind's parameters, its norms and biases (the embedding's norm
/// and absolute positions on the first layer), and its feed-forward activation.
fn layer_part(
    cfg: &ModelConfig,
    host: &HostModel,
    i: usize,
    l: &Layer<Vec<f32>>,
    base: DecodeParams,
) -> Part<Vec<f32>> {
    let (d, dh, hid, a) = (cfg.d_model, cfg.head_dim, cfg.ffn.hidden, cfg.n_heads * cfg.head_dim);
    let mut v = Vecs::default();
    let mut p = base;
    match &l.kind {
        Kind::Softmax(s) => {
            v.push(Some(&s.aux), 0);
            p.rope = u32::from(s.rope.is_some());
            // A CoPE key's position sums the gates of every later key: one split per row.
            let splits = if s.bias == BiasKind::Contextual { 1 } else { decode_splits(cfg.max_context) };
            (p.splits, p.block, p.relu) = (splits as u32, s.params.block, s.params.relu);
            if s.relu_norm {
                (p.post_norm, p.post_kind, p.post_eps) = (1, NormOp::SimpleRms.code(), SIMPLE_RMS_EPS);
            }
        }
        Kind::Linear(ln) => plan_linear(ln, dh, &mut v, &mut p),
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
}
