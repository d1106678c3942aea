//! A layer's weights and prepared kernel data, generic over where the arrays live: `Vec<f32>` on
//! the host (gathered from the core model, checked against the adapter's limits), `wgpu::Buffer`
//! once uploaded ([`Layer::map`] turns one into the other).

use crate::params::{AttnParams, BiasKind, FeatKind, FeatParams, NormOp};

/// What an array is to the kernels: a weight matrix (held in the model's [`crate::params::WeightKind`])
/// or a vector / table (f32).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Role {
    Matrix,
    Vector,
}

/// A residual or final norm: gain, and bias for LayerNorm.
pub(super) struct Norm<B> {
    pub op: NormOp,
    pub eps: f32,
    pub w: B,
    pub b: Option<B>,
}

/// A linear projection: weight `[out, in]` and optional bias `[out]` (added by the matmul kernel).
pub(super) struct Proj<B> {
    pub w: B,
    pub b: Option<B>,
}

/// One transformer block.
pub(super) struct Layer<B> {
    pub attn_norm: Norm<B>,
    pub ffn_norm: Norm<B>,
    /// `wq | wk | wv` fused into one `[3a, d]` matrix (biases `bq | bk | bv`).
    pub wqkv: Proj<B>,
    pub wo: Proj<B>,
    pub ffn_gate: Option<Proj<B>>,
    pub ffn_up: Proj<B>,
    pub ffn_down: Proj<B>,
    pub kind: Kind<B>,
}

/// The attention of a block.
pub(super) enum Kind<B> {
    Softmax(SoftmaxLayer<B>),
    Linear(LinearLayer<B>),
}

/// A softmax-family attention layer.
pub(super) struct SoftmaxLayer<B> {
    pub bias: BiasKind,
    pub params: AttnParams,
    /// Bias table `[H, table_len]` or FIRE parameters.
    pub aux: B,
    /// RoPE cos/sin table `[max_context, dh/2, 2]`.
    pub rope: Option<B>,
    /// T1 Diag: SimpleRMSNorm after the ReLU attention.
    pub relu_norm: bool,
}

/// A linear-family attention layer.
pub(super) struct LinearLayer<B> {
    pub feat: FeatKind,
    pub params: FeatParams,
    /// Feature tables and per-layer vectors (see `FeatParams::off_tab`, `off_vec`).
    pub aux: B,
    pub dk: usize,
    /// Denominator floor (0: no denominator).
    pub den_eps: f32,
    pub gate: Gate<B>,
    pub post: Post<B>,
}

/// Gate projections computed before the feature map.
pub(super) enum Gate<B> {
    None,
    /// Low-rank `d → rank → a`.
    Gla {
        down: B,
        up: B,
        rank: usize,
    },
    /// Two full-rank gate projections fused, `[2a, d]`: ReGLA's `w_g | w_r`, Fast Decay's `w_f | w_z`.
    FullRank {
        wgr: B,
    },
}

/// Output post-op of a linear layer.
pub(super) enum Post<B> {
    None,
    /// SimpleRMSNorm over the whole attention row.
    Simple,
    /// RMSNorm with gain over groups of `group` channels (one head, or all heads).
    RmsNorm {
        gain: B,
        group: usize,
        eps: f32,
    },
    /// [`Post::RmsNorm`], then `· silu(x W_gᵀ)`.
    RmsNormGate {
        gain: B,
        group: usize,
        eps: f32,
        out_gate: B,
    },
}

impl<B> Norm<B> {
    pub fn map<C>(&self, label: &'static str, f: &mut impl FnMut(&'static str, &B, Role) -> C) -> Norm<C> {
        let (w, b) = (f(label, &self.w, Role::Vector), self.b.as_ref().map(|b| f(label, b, Role::Vector)));
        Norm { op: self.op, eps: self.eps, w, b }
    }
}

impl<B> Proj<B> {
    pub fn map<C>(&self, label: &'static str, f: &mut impl FnMut(&'static str, &B, Role) -> C) -> Proj<C> {
        Proj { w: f(label, &self.w, Role::Matrix), b: self.b.as_ref().map(|b| f(label, b, Role::Vector)) }
    }
}

impl<B> Layer<B> {
    /// The block's projections by name (`w_gate` only with SwiGLU).
    pub fn projections(&self) -> impl Iterator<Item = (&'static str, &Proj<B>)> {
        let gate = self.ffn_gate.as_ref().map(|g| ("ffn.w_gate", g));
        [("attn.wqkv", &self.wqkv), ("attn.wo", &self.wo), ("ffn.w_up", &self.ffn_up)]
            .into_iter()
            .chain(gate)
            .chain([("ffn.w_down", &self.ffn_down)])
    }

    /// The same layer with every array passed through `f(label, array)`.
    pub fn map<C>(&self, f: &mut impl FnMut(&'static str, &B, Role) -> C) -> Layer<C> {
        Layer {
            attn_norm: self.attn_norm.map("attn_norm", f),
            ffn_norm: self.ffn_norm.map("ffn_norm", f),
            wqkv: self.wqkv.map("wqkv", f),
            wo: self.wo.map("wo", f),
            ffn_gate: self.ffn_gate.as_ref().map(|g| g.map("w_gate", f)),
            ffn_up: self.ffn_up.map("w_up", f),
            ffn_down: self.ffn_down.map("w_down", f),
            kind: match &self.kind {
                Kind::Softmax(s) => Kind::Softmax(SoftmaxLayer {
                    bias: s.bias,
                    params: s.params,
                    aux: f("attn aux", &s.aux, Role::Vector),
                    rope: s.rope.as_ref().map(|r| f("rope", r, Role::Vector)),
                    relu_norm: s.relu_norm,
                }),
                Kind::Linear(l) => Kind::Linear(LinearLayer {
                    feat: l.feat,
                    params: l.params,
                    aux: f("linear aux", &l.aux, Role::Vector),
                    dk: l.dk,
                    den_eps: l.den_eps,
                    gate: l.gate.map(f),
                    post: l.post.map(f),
                }),
            },
        }
    }
}

impl<B> Gate<B> {
    fn map<C>(&self, f: &mut impl FnMut(&'static str, &B, Role) -> C) -> Gate<C> {
        match self {
            Gate::None => Gate::None,
            Gate::Gla { down, up, rank } => Gate::Gla {
                down: f("gla down", down, Role::Matrix),
                up: f("gla up", up, Role::Matrix),
                rank: *rank,
            },
            Gate::FullRank { wgr } => Gate::FullRank { wgr: f("gate rows", wgr, Role::Matrix) },
        }
    }
}

impl<B> Post<B> {
    fn map<C>(&self, f: &mut impl FnMut(&'static str, &B, Role) -> C) -> Post<C> {
        match self {
            Post::None => Post::None,
            Post::Simple => Post::Simple,
            Post::RmsNorm { gain, group, eps } => {
                Post::RmsNorm { gain: f("rms norm", gain, Role::Vector), group: *group, eps: *eps }
            }
            Post::RmsNormGate { gain, group, eps, out_gate } => Post::RmsNormGate {
                gain: f("rms norm", gain, Role::Vector),
                group: *group,
                eps: *eps,
                out_gate: f("out gate", out_gate, Role::Matrix),
            },
        }
    }
}
