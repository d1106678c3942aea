//! The token mixer of a block, forward and backward, from its lowering: the softmax family
//! (`P = softmax(scale·q·kᵀ + B)` or T1's ReLU, `o = P·v`) and the linear family in its parallel
//! form (`P = (φq·φkᵀ) ⊙ D`, `D` causal or `γ_h^{i−s}`, `o = P·v`, optionally over the denominator
//! `max(Σ_s P_is, eps)`; per-channel gates in the exact form `P_is = Σ_j φq_i φk_s e^{B_i − B_s}`,
//! `gates.rs`), then the post step (SimpleRMSNorm, grouped RMSNorm, RMSNorm ⊙ silu gate). One
//! side's features and LRPE's transforms are in `features.rs`.

mod features;
mod gates;

use super::kernels::{grid, threads, K};
use super::record::{unsupported, Rec, Saved, Scratch};
use super::{init_storage, zeroed, Dims};
use crate::error::Result;
use crate::params::TrainParams;
use attnlab_core::config::ModelConfig;
use attnlab_core::lowering::{
    Bias, FeatureMap, Gate, Learned, LinearLowering, Lowering, Post as LwPost, Rotation, SoftmaxLowering,
    Window,
};
use attnlab_core::rotary::rope_cos_sin;
use attnlab_core::variants::lrpe::LrpeCore;
use features::lrpe_p;

/// A softmax layer's constants.
pub(super) struct Softmax {
    scale: f32,
    /// Diag block width (0: causal).
    block: u32,
    /// TransNormer T1's ReLU instead of softmax.
    relu: bool,
    /// The distance table `[H, T]` and, when learned, its gradient buffer.
    table: Option<(wgpu::Buffer, Option<wgpu::Buffer>)>,
    /// The table is a full bias `[H, T, T]` (FIRE).
    full: bool,
    /// CoPE: the number of integer positions and the name of the position embedding `[npos, dh]`.
    cope: Option<(usize, String)>,
}

/// A linear layer's constants.
pub(super) struct Linear {
    /// (feature-map mode of train.wgsl's `feature_fwd`, scale) of q and k.
    q: Feat,
    k: Feat,
    /// ln γ per head `[H]` (RetNet's fixed decay).
    decay: Option<wgpu::Buffer>,
    /// A per-channel log-gate from the layer's input, on the key axis.
    gate: Option<KeyGate>,
    /// Fast Decay's value-axis log-gate.
    value_gate: Option<SigmoidGate>,
    den: Option<f32>,
    /// LRPE's fixed transform P and its learned angles' gradient (the rotation is `Mixer::rope`).
    lrpe: Option<LrpeParts>,
    /// Feature width per head (2·head_dim for LRPE's complex core).
    dk: usize,
}

/// LRPE's P (LRPE §3.4, Eqs. 73–74) before the rotation `Λ(s)` (§3.3, Eq. 75), and where the
/// gradient of a learned θ's table goes.
struct LrpeParts {
    /// The unit Householder vector `[dh]`.
    householder: Option<wgpu::Buffer>,
    /// The odd-even gather table and its inverse (`[dh]` u32 each).
    odd_even: Option<(wgpu::Buffer, wgpu::Buffer)>,
    /// Gradient `[T, pairs, 2]` of the learned angles' (cos, sin) table.
    theta_grad: Option<wgpu::Buffer>,
    /// The permutation core's gather tables `π^s` and their inverses (`[T, dh]` u32 each).
    core_perm: Option<(wgpu::Buffer, wgpu::Buffer)>,
    /// The complex core's table `[T, dh, 2]` of (cos sα_j, sin sα_j) (its angles are not a rotation
    /// of pairs, so `Mixer::rope` is empty).
    complex: Option<wgpu::Buffer>,
}

/// A feature map of one side.
#[derive(Clone, Copy)]
enum Feat {
    /// train.wgsl's `feature_fwd` mode, and the scale.
    Map(u32, f32),
    /// `scale·exp(x − max over the head)` (ReGLA's query, §3.2, Eq. 11).
    ExpMax(f32),
    /// `scale·exp(k − running max)` (ReGLA's key), the state rescale folded into the log-gate.
    RunningMax(f32),
    /// HGRN2's key `(1 − β)σ(−k)`, written with the gate.
    KeyForget,
}

/// The key-axis log-gate.
enum KeyGate {
    Sigmoid(SigmoidGate),
    /// ReGLA's refined gate (§3.3, Eqs. 16–18) from `σ(u·wgᵀ + bg)` and `σ(u·wrᵀ + br)`.
    Refined {
        wg: String,
        bg: String,
        wr: String,
        br: String,
    },
    /// HGRN2's forget gate from the key projection, with lower bounds β `[a]` (a constant, or a
    /// learned table and its gradient buffer).
    KeyForget {
        beta: wgpu::Buffer,
        grad: Option<wgpu::Buffer>,
    },
}

/// A log-sigmoid gate `lg = lnσ(up·(down·u) + bias) / normalizer`: GLA's low-rank gate (GLA §4.1;
/// fla's normaliser) with `down = (name, rank)`, or a full-rank one (Fast Decay, ReGLA §2.1,
/// Eq. 10) without it.
struct SigmoidGate {
    down: Option<(String, usize)>,
    up: String,
    bias: String,
    normalizer: f32,
}

/// The output step on the merged heads.
pub(super) enum Post {
    None,
    /// SimpleRMSNorm over all heads.
    Simple,
    /// RMSNorm over groups of `n` channels with the gain `gain`, then (with `gate`) `⊙ silu(u·Wgᵀ)`.
    Rms {
        gain: String,
        eps: f32,
        n: usize,
        gate: Option<String>,
    },
}

/// One per layer, built once: the variants' size difference does not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum Kind {
    Softmax(Softmax),
    Linear(Linear),
}

pub(super) struct Mixer {
    kind: Kind,
    /// RoPE `(cos, sin)` at each position and rotated pair `[T, n, 2]`, and n.
    rope: Option<(wgpu::Buffer, usize)>,
    post: Post,
}

/// What building one layer's mixer needs: the layer (for refusals), the shapes, the device and the
/// buffer of the layer's learned table, if it has one (written by the host each step).
pub(super) struct Setup<'a> {
    pub cfg: &'a ModelConfig,
    pub layer: usize,
    pub dims: Dims,
    pub dev: &'a wgpu::Device,
    pub learned: Option<&'a wgpu::Buffer>,
}

impl Setup<'_> {
    fn no(&self, what: &str) -> crate::error::GpuError {
        unsupported(self.cfg, self.layer, what)
    }

    /// The layer's learned table buffer.
    fn learned(&self, what: &str) -> Result<wgpu::Buffer> {
        self.learned.cloned().ok_or_else(|| self.no(&format!("{what} without a buffer")))
    }

    /// `(cos, sin)` of `s·f` at each position and frequency, `[T, n, 2]` (the core's tables).
    fn rope_table(&self, freqs: &[f64]) -> (wgpu::Buffer, usize) {
        let cs: Vec<f32> = (0..self.dims.t)
            .flat_map(|pos| {
                let (c, s) = rope_cos_sin(pos, freqs);
                c.into_iter().zip(s).flat_map(|(c, s)| [c, s])
            })
            .collect();
        (init_storage(self.dev, "rope table", &cs), freqs.len())
    }

    fn softmax(&self, sl: &SoftmaxLowering) -> Result<Mixer> {
        let (t, h, dev) = (self.dims.t, self.dims.h, self.dev);
        let table = match &sl.bias {
            Bias::None => None,
            Bias::Table { learned: Some(_), .. } => {
                Some((self.learned("a learned table")?, Some(zeroed(dev, "table grad", h * t))))
            }
            Bias::Table { len, values, learned: None } => {
                if *len < t || values.len() < h * len {
                    return Err(self.no("a distance table shorter than the training length"));
                }
                let rows: Vec<f32> =
                    (0..h).flat_map(|hh| values[hh * len..hh * len + t].iter().copied()).collect();
                Some((init_storage(dev, "bias table", &rows), None))
            }
            Bias::Fire { .. } => Some((self.learned("FIRE")?, Some(zeroed(dev, "bias grad", h * t * t)))),
            Bias::Contextual { .. } if sl.rope.is_some() => {
                return Err(self.no("contextual positions with RoPE"))
            }
            Bias::Contextual { .. } => None,
        };
        let block = match sl.window {
            Window::Causal => 0,
            Window::Block(w) => w as u32,
        };
        let cope = match &sl.bias {
            Bias::Contextual { npos, pos_emb } => Some((*npos, pos_emb.name.clone())),
            _ => None,
        };
        let full = matches!(sl.bias, Bias::Fire { .. });
        let kind =
            Kind::Softmax(Softmax { scale: sl.scale, block, relu: sl.relu_with_norm, table, full, cope });
        let post = if sl.relu_with_norm { Post::Simple } else { Post::None };
        Ok(Mixer { kind, rope: sl.rope.as_deref().map(|f| self.rope_table(f)), post })
    }

    fn linear(&self, ll: &LinearLowering) -> Result<Mixer> {
        let complex =
            matches!(&ll.rotation, Some(Rotation::Lrpe { lrpe, .. }) if lrpe.core() == LrpeCore::Complex);
        if ll.dk != self.dims.dh * if complex { 2 } else { 1 } {
            return Err(self.no("a feature width other than head_dim"));
        }
        let (decay, gate, value_gate) = self.gates(&ll.gate)?;
        if matches!(ll.k.map, FeatureMap::ExpRunningMax) && gate.is_none() {
            return Err(self.no("a running key max without a per-channel gate"));
        }
        let (mut rope, mut lrpe) = (None, None);
        match &ll.rotation {
            None => {}
            Some(Rotation::Rope { inv_freq }) => rope = Some(self.rope_table(inv_freq)),
            Some(Rotation::Lrpe { lrpe: l, theta, .. }) => {
                let mut parts = lrpe_p(self.dev, l, theta.is_some(), self.dims.t);
                let angles = match theta {
                    _ if l.angles().is_empty() => None,
                    Some(_) => Some((self.learned("learned angles")?, l.angles().len())),
                    None => Some(self.rope_table(l.angles())),
                };
                // The complex core's table is not a rotation of pairs: it goes with LRPE's parts.
                match complex {
                    true => parts.complex = angles.map(|(tab, _)| tab),
                    false => rope = angles,
                }
                lrpe = Some(parts);
            }
        }
        let k = match ll.gate {
            Gate::KeyForget { .. } => Feat::KeyForget,
            _ => self.feature(ll.k, ll)?,
        };
        let lin = Linear {
            q: self.feature(ll.q, ll)?,
            k,
            decay,
            gate,
            value_gate,
            den: ll.denominator,
            lrpe,
            dk: ll.dk,
        };
        Ok(Mixer { kind: Kind::Linear(lin), rope, post: post_step(&ll.post) })
    }

    /// One side's feature map.
    fn feature(&self, f: attnlab_core::lowering::Feature, ll: &LinearLowering) -> Result<Feat> {
        match f.map {
            FeatureMap::Identity => Ok(Feat::Map(0, f.scale)),
            FeatureMap::EluPlusOne => Ok(Feat::Map(1, f.scale)),
            FeatureMap::Elu => Ok(Feat::Map(2, f.scale)),
            FeatureMap::Swish => Ok(Feat::Map(3, f.scale)),
            _ if ll.rotation.is_some() => Err(self.no("an exponential feature map with a rotation")),
            FeatureMap::ExpMax => Ok(Feat::ExpMax(f.scale)),
            FeatureMap::ExpRunningMax => Ok(Feat::RunningMax(f.scale)),
        }
    }

    /// A full-rank sigmoid gate from `w` and `b` (over all heads).
    fn sigmoid_gate(
        &self,
        w: &Learned<attnlab_core::ops::Linear>,
        b: &Learned<Vec<f32>>,
    ) -> Result<SigmoidGate> {
        if w.value.out != self.dims.a {
            return Err(self.no("a gate narrower than the heads (grouped keys)"));
        }
        Ok(SigmoidGate { down: None, up: w.name.clone(), bias: b.name.clone(), normalizer: 1.0 })
    }

    /// RetNet's fixed decay, the key-axis gate and Fast Decay's value-axis gate.
    fn gates(&self, gate: &Gate) -> Result<(Option<wgpu::Buffer>, Option<KeyGate>, Option<SigmoidGate>)> {
        Ok(match gate {
            Gate::None => (None, None, None),
            Gate::PerHead { log_gamma } => (Some(init_storage(self.dev, "ln gamma", log_gamma)), None, None),
            Gate::LowRank { down, up, bias, normalizer } => {
                let mut g = self.sigmoid_gate(up, bias)?;
                g.down = Some((down.name.clone(), down.value.out));
                g.normalizer = *normalizer as f32;
                (None, Some(KeyGate::Sigmoid(g)), None)
            }
            Gate::TwoSided { wf, bf, wz, bz } => {
                (None, Some(KeyGate::Sigmoid(self.sigmoid_gate(wf, bf)?)), Some(self.sigmoid_gate(wz, bz)?))
            }
            Gate::Refined { wg, bg, wr, br } => {
                let (g, r) = (self.sigmoid_gate(wg, bg)?, self.sigmoid_gate(wr, br)?);
                (None, Some(KeyGate::Refined { wg: g.up, bg: g.bias, wr: r.up, br: r.bias }), None)
            }
            Gate::KeyForget { lower_bound, learned: row } => {
                let (beta, grad) = match row {
                    Some(_) => (
                        self.learned("lower bounds")?,
                        Some(zeroed(self.dev, "lower bound grad", lower_bound.len())),
                    ),
                    None => (init_storage(self.dev, "lower bounds", lower_bound), None),
                };
                (None, Some(KeyGate::KeyForget { beta, grad }), None)
            }
        })
    }
}

/// The post step of a linear layer.
fn post_step(post: &LwPost) -> Post {
    match post {
        LwPost::None => Post::None,
        LwPost::SimpleRmsNorm => Post::Simple,
        LwPost::RmsNorm { gain, eps } => {
            Post::Rms { gain: gain.name.clone(), eps: *eps, n: gain.value.len(), gate: None }
        }
        LwPost::RmsNormGate { gain, eps, out_gate } => Post::Rms {
            gain: gain.name.clone(),
            eps: *eps,
            n: gain.value.len(),
            gate: Some(out_gate.name.clone()),
        },
    }
}

impl Mixer {
    /// The mixer of `setup`'s layer.
    pub fn new(setup: &Setup, lowering: &Lowering) -> Result<Mixer> {
        match lowering {
            Lowering::Softmax(sl) => setup.softmax(sl),
            Lowering::Linear(ll) => setup.linear(ll),
        }
    }

    /// The gradient buffer of a learned distance table.
    pub fn table_grad(&self) -> Option<&wgpu::Buffer> {
        match &self.kind {
            Kind::Softmax(Softmax { table: Some((_, g)), .. }) => g.as_ref(),
            Kind::Linear(Linear { lrpe: Some(p), .. }) => p.theta_grad.as_ref(),
            Kind::Linear(Linear { gate: Some(KeyGate::KeyForget { grad, .. }), .. }) => grad.as_ref(),
            _ => None,
        }
    }

    pub fn is_linear(&self) -> bool {
        matches!(self.kind, Kind::Linear(_))
    }

    /// Whether the layer has a key-axis gate, and the rank of its down projection (0: full rank).
    pub fn gate_rank(&self) -> Option<usize> {
        match &self.kind {
            Kind::Linear(Linear { gate: Some(KeyGate::Sigmoid(g)), .. }) => {
                Some(g.down.as_ref().map_or(0, |d| d.1))
            }
            Kind::Linear(Linear {
                gate: Some(KeyGate::Refined { .. } | KeyGate::KeyForget { .. }), ..
            }) => Some(0),
            _ => None,
        }
    }

    /// Whether the layer has a value-axis gate.
    pub fn has_value_gate(&self) -> bool {
        matches!(&self.kind, Kind::Linear(Linear { value_gate: Some(_), .. }))
    }

    /// The feature width per head of a linear layer (head_dim elsewhere).
    pub fn feature_width(&self, dh: usize) -> usize {
        match &self.kind {
            Kind::Linear(ln) => ln.dk,
            Kind::Softmax(_) => dh,
        }
    }

    /// True for LRPE's complex core (its pre-core features are saved).
    pub fn is_complex(&self) -> bool {
        matches!(&self.kind, Kind::Linear(Linear { lrpe: Some(LrpeParts { complex: Some(_), .. }), .. }))
    }

    /// CoPE's number of integer positions.
    pub fn cope_positions(&self) -> Option<usize> {
        match &self.kind {
            Kind::Softmax(Softmax { cope: Some((npos, _)), .. }) => Some(*npos),
            _ => None,
        }
    }

    /// True when the output goes through a post step (`att` is not `o`).
    pub fn has_post(&self) -> bool {
        !matches!(self.post, Post::None)
    }
}

impl Rec<'_, '_> {
    /// `s.att` from `s.q, s.k, s.v` (and `s.u1` for the gates).
    pub(super) fn mixer_fwd(&mut self, s: &Saved, mx: &Mixer, c: &Scratch) -> Result<()> {
        let Dims { r, t, b, h, dh, .. } = self.p.dims;
        let rows = b * h * t;
        let dummy = self.dummy.clone();
        match &mx.kind {
            Kind::Softmax(sm) => {
                self.rotate(mx.rope.as_ref(), &s.q, false);
                self.rotate(mx.rope.as_ref(), &s.k, false);
                let qk = self.per_head(t, t, dh, sm.scale);
                self.gemm(qk, self.scores(&s.p), self.heads(&s.q), self.heads(&s.k).t());
                if let Some((npos, emb)) = &sm.cope {
                    let tp = TrainParams {
                        n: *npos as u32,
                        off0: self.off(emb)? as u32,
                        ..self.attn_params(rows)
                    };
                    let params = self.p.params;
                    self.dispatch(K::CopeFwd, &tp, &[&s.q, params, &s.p, &s.cg, &s.cpos], threads(rows));
                }
                let table = sm.table.as_ref().map(|(tab, _)| tab);
                let tp = TrainParams {
                    flag: if sm.full { 2 } else { u32::from(table.is_some()) },
                    off0: sm.block,
                    mode: u32::from(sm.relu),
                    ..self.attn_params(rows)
                };
                self.dispatch(K::SoftmaxFwd, &tp, &[table.unwrap_or(&dummy), &s.p], grid(rows));
            }
            Kind::Linear(ln) => {
                self.side_fwd(&s.q, &s.fq, &s.cq, ln.q, ln.lrpe.as_ref(), [&c.tmp, &c.tmp2]);
                if !matches!(ln.k, Feat::RunningMax(_) | Feat::KeyForget) {
                    self.side_fwd(&s.k, &s.fk, &s.ck, ln.k, ln.lrpe.as_ref(), [&c.tmp, &c.tmp2]);
                }
                match &ln.gate {
                    Some(g) => {
                        self.key_gate_fwd(s, g)?;
                        if let Feat::RunningMax(scale) = ln.k {
                            let tp = TrainParams { n: (b * h) as u32, scale, ..self.attn_params(r) };
                            self.dispatch(K::RunmaxFwd, &tp, &[&s.k, &s.fk, &s.bc], grid(b * h));
                        }
                        self.cumsum(&s.bc, false);
                        self.rotate(mx.rope.as_ref(), &s.fq, false);
                        self.rotate(mx.rope.as_ref(), &s.fk, false);
                        let tp = self.attn_params(rows);
                        self.dispatch(K::GatedScores, &tp, &[&s.fq, &s.fk, &s.bc, &s.p], grid(rows));
                    }
                    None => {
                        self.rotate(mx.rope.as_ref(), &s.fq, false);
                        self.rotate(mx.rope.as_ref(), &s.fk, false);
                        let (dk, qk) = (ln.dk, self.per_head(t, t, ln.dk, 1.0));
                        self.gemm(
                            qk,
                            self.scores(&s.p),
                            self.heads_w(&s.fq, dk),
                            self.heads_w(&s.fk, dk).t(),
                        );
                        let tp =
                            TrainParams { mode: u32::from(ln.decay.is_some()), ..self.attn_params(rows) };
                        let decay = ln.decay.as_ref().unwrap_or(&dummy);
                        self.dispatch(K::CausalWeights, &tp, &[decay, &dummy, &s.p], grid(rows));
                    }
                }
            }
        }
        match &mx.kind {
            Kind::Linear(Linear { value_gate: Some(vg), .. }) => {
                self.gate_lg(&s.u1, vg, &s.gd, &s.vz, &s.cv)?;
                self.cumsum(&s.cv, false);
                let tp = self.attn_params(rows);
                self.dispatch(K::GatedPv, &tp, &[&s.p, &s.v, &s.cv, &s.o], grid(rows));
            }
            _ => {
                self.gemm(self.per_head(t, dh, t, 1.0), self.heads(&s.o), self.scores(&s.p), self.heads(&s.v))
            }
        }
        if let Kind::Linear(Linear { den: Some(eps), .. }) = &mx.kind {
            let tp = TrainParams { eps: *eps, ..self.attn_params(rows) };
            self.dispatch(K::DenFwd, &tp, &[&s.p, &s.o, &s.den], grid(rows));
        }
        self.post_fwd(s, &mx.post)
    }

    /// SimpleRMSNorm over each row of all heads (the core's eps).
    fn simple_rms_params(&self) -> TrainParams {
        let Dims { r, a, .. } = self.p.dims;
        TrainParams {
            rows: r as u32,
            width: a as u32,
            eps: attnlab_core::ops::SIMPLE_RMS_EPS,
            ..TrainParams::default()
        }
    }

    fn post_fwd(&mut self, s: &Saved, post: &Post) -> Result<()> {
        let Dims { r, a, d, .. } = self.p.dims;
        match post {
            Post::None => {}
            Post::Simple => {
                let tp = self.simple_rms_params();
                self.dispatch(K::SrmsFwd, &tp, &[&s.o, &s.att], grid(r));
            }
            Post::Rms { gain, eps, n, gate } => {
                let out = if gate.is_some() { &s.pn } else { &s.att };
                self.rms_fwd_groups(out, &s.o, &s.prstd, gain, r * a / n, *n, *eps)?;
                if let Some(g) = gate {
                    self.linear_fwd(&s.pg, &s.u1, g, a, d, false)?;
                    let sw = TrainParams { rows: r as u32, width: a as u32, ..TrainParams::default() };
                    self.dispatch(K::SwigluFwd, &sw, &[&s.pg, &s.pn, &s.att], threads(r * a));
                }
            }
        }
        Ok(())
    }

    /// From `c.datt` (dL/d att), the gradients of q, k, v into `c.dq, c.dk, c.dv` (the gates' input
    /// gradients come after them, [`Rec::post_gate_bwd`]).
    pub(super) fn mixer_bwd(&mut self, s: &Saved, mx: &Mixer, c: &Scratch) -> Result<()> {
        let rows = self.p.dims.b * self.p.dims.h * self.p.dims.t;
        let d_o = if mx.has_post() { &c.dout } else { &c.datt };
        self.post_bwd(s, &mx.post, c)?;
        if let Kind::Linear(Linear { den: Some(eps), .. }) = &mx.kind {
            let tp = TrainParams { eps: *eps, ..self.attn_params(rows) };
            self.dispatch(K::DenBwd, &tp, &[&s.o, &s.den, &s.p, d_o, &c.dden], grid(rows));
        }
        self.scores_and_values_bwd(s, mx, c, d_o)?;
        match &mx.kind {
            Kind::Softmax(sm) => self.softmax_attention_bwd(s, mx, sm, c),
            Kind::Linear(ln) => self.linear_attention_bwd(s, mx, ln, c),
        }
    }

    /// From the output gradient `d_o`, the scores' gradient `c.dp` and the values' `c.dv`; with a
    /// value gate (Fast Decay's two-sided gate), also its gradients.
    fn scores_and_values_bwd(
        &mut self,
        s: &Saved,
        mx: &Mixer,
        c: &Scratch,
        d_o: &wgpu::Buffer,
    ) -> Result<()> {
        let Dims { t, b, h, dh, .. } = self.p.dims;
        let rows = b * h * t;
        match &mx.kind {
            Kind::Linear(Linear { value_gate: Some(vg), .. }) => {
                let tp = self.attn_params(rows);
                self.dispatch(K::GatedDp, &tp, &[d_o, &s.v, &s.cv, &c.dp], grid(rows));
                self.dispatch(K::GatedDv, &tp, &[&s.p, d_o, &s.cv, &c.dv], grid(rows));
                // dC = do ⊙ o − v ⊙ dv, summed from the end: the value gate's dlg.
                self.running_gate_bwd([(&s.o, d_o), (&s.v, &c.dv)], &c.dlgv)?;
                self.sigmoid_gate_bwd(s, vg, &s.vz, &c.dlgv, &c.dvz, &c.dgd)?;
            }
            _ => {
                let (dp, pt) = (self.scores(&c.dp), self.scores(&s.p).t());
                self.gemm(self.per_head(t, t, dh, 1.0), dp, self.heads(d_o), self.heads(&s.v).t());
                self.gemm(self.per_head(t, dh, t, 1.0), self.heads(&c.dv), pt, self.heads(d_o));
            }
        }
        Ok(())
    }

    /// Softmax attention from `c.dp`: through the softmax, into the bias table's gradient (and
    /// CoPE's), then into `c.dq` and `c.dk` (rotated back for RoPE).
    fn softmax_attention_bwd(&mut self, s: &Saved, mx: &Mixer, sm: &Softmax, c: &Scratch) -> Result<()> {
        let Dims { t, b, h, dh, .. } = self.p.dims;
        let rows = b * h * t;
        let tp = TrainParams { off0: sm.block, mode: u32::from(sm.relu), ..self.attn_params(rows) };
        self.dispatch(K::SoftmaxBwd, &tp, &[&s.p, &c.dp], grid(rows));
        if let Some((_, Some(grad))) = &sm.table {
            match sm.full {
                true => {
                    let bp = TrainParams { n: (h * t * t) as u32, ..tp };
                    self.dispatch(K::BiasGrad, &bp, &[&c.dp, grad], threads(h * t * t));
                }
                false => self.dispatch(K::TableGrad, &tp, &[&c.dp, grad], threads(h * t)),
            }
        }
        if let Some((npos, emb)) = &sm.cope {
            let tp = TrainParams { n: *npos as u32, off0: self.off(emb)? as u32, ..self.attn_params(rows) };
            let params = self.p.params;
            self.dispatch(K::CopeBwd, &tp, &[&s.q, params, &s.cg, &c.dp, &s.cpos, &c.dint], threads(rows));
        }
        let (sc, q, k) = (sm.scale, &s.q, &s.k);
        self.gemm(self.per_head(t, dh, t, sc), self.heads(&c.dq), self.scores(&c.dp), self.heads(k));
        self.gemm(self.per_head(t, dh, t, sc), self.heads(&c.dk), self.scores(&c.dp).t(), self.heads(q));
        if let Some((npos, emb)) = &sm.cope {
            self.cope_grads(s, c, *npos, emb)?;
        }
        self.rotate(mx.rope.as_ref(), &c.dq, true);
        self.rotate(mx.rope.as_ref(), &c.dk, true);
        Ok(())
    }

    /// Linear attention from `c.dp`: into the feature maps' gradients `c.dfq, c.dfk` (through the
    /// gated scan, or the causal decay/denominator weights), then the gate's and the features'.
    fn linear_attention_bwd(&mut self, s: &Saved, mx: &Mixer, ln: &Linear, c: &Scratch) -> Result<()> {
        let Dims { t, b, h, .. } = self.p.dims;
        let rows = b * h * t;
        match &ln.gate {
            Some(g) => {
                let tp = self.attn_params(rows);
                for (mode, other, dfx) in [(0, &s.fk, &c.dfq), (1, &s.fq, &c.dfk)] {
                    let tp = TrainParams { mode, ..tp };
                    self.dispatch(K::GatedDfeat, &tp, &[&c.dp, other, &s.bc, dfx], grid(rows));
                }
                self.running_gate_bwd([(&s.fq, &c.dfq), (&s.fk, &c.dfk)], &c.dlg)?;
                // The key features first: a running key max reads dlg, which a refined
                // gate's backward overwrites.
                self.features_bwd(s, mx, ln, c);
                match g {
                    KeyGate::Sigmoid(g) => self.sigmoid_gate_bwd(s, g, &s.gz, &c.dlg, &c.dgz, &c.dgd)?,
                    KeyGate::Refined { bg, br, .. } => self.refined_bwd(s, c, bg, br)?,
                    // Its input is the key projection: features_bwd wrote dk.
                    KeyGate::KeyForget { .. } => {}
                }
            }
            None => {
                let tp = TrainParams {
                    mode: u32::from(ln.decay.is_some()),
                    flag: u32::from(ln.den.is_some()),
                    ..self.attn_params(rows)
                };
                let dummy = self.dummy.clone();
                let decay = ln.decay.as_ref().unwrap_or(&dummy);
                self.dispatch(K::CausalWeights, &tp, &[decay, &c.dden, &c.dp], grid(rows));
                let dk = ln.dk;
                let (fq, fk) = (self.heads_w(&s.fq, dk), self.heads_w(&s.fk, dk));
                let (dfq, dfk) = (self.heads_w(&c.dfq, dk), self.heads_w(&c.dfk, dk));
                self.gemm(self.per_head(t, dk, t, 1.0), dfq, self.scores(&c.dp), fk);
                self.gemm(self.per_head(t, dk, t, 1.0), dfk, self.scores(&c.dp).t(), fq);
                self.features_bwd(s, mx, ln, c);
            }
        }
        Ok(())
    }

    /// CoPE's bias gradients to the queries (added to `c.dq`) and to its position embedding.
    fn cope_grads(&mut self, s: &Saved, c: &Scratch, npos: usize, emb: &str) -> Result<()> {
        let Dims { b, h, t, dh, .. } = self.p.dims;
        let rows = b * h * t;
        let (params, grads) = (self.p.params, self.p.grads);
        let tp = TrainParams { width: npos as u32, off0: self.off(emb)? as u32, ..self.attn_params(rows) };
        let dq = TrainParams { n: (rows * dh) as u32, ..tp };
        self.dispatch(K::CopeGrads, &dq, &[&c.dint, params, &c.dq], threads(rows * dh));
        let de = TrainParams { n: (npos * dh) as u32, mode: 1, ..tp };
        self.dispatch(K::CopeGrads, &de, &[&c.dint, &s.q, grads], threads(npos * dh));
        self.written.insert(emb.to_string());
        Ok(())
    }

    /// `c.dout` (dL/d o) from `c.datt` through the post step (nothing without one).
    fn post_bwd(&mut self, s: &Saved, post: &Post, c: &Scratch) -> Result<()> {
        let Dims { r, a, .. } = self.p.dims;
        match post {
            Post::None => {}
            Post::Simple => {
                let tp = self.simple_rms_params();
                self.dispatch(K::SrmsBwd, &tp, &[&s.o, &c.datt, &c.dout], grid(r));
            }
            Post::Rms { gain, eps, n, gate } => {
                let dn = match gate {
                    Some(_) => {
                        let sw = TrainParams { rows: r as u32, width: a as u32, ..TrainParams::default() };
                        self.dispatch(
                            K::SwigluBwd,
                            &sw,
                            &[&s.pg, &s.pn, &c.datt, &c.dpg, &c.dpn],
                            threads(r * a),
                        );
                        &c.dpn
                    }
                    None => &c.datt,
                };
                self.rms_bwd_groups(&c.dout, dn, &s.o, &s.prstd, gain, r * a / n, *n, *eps)?;
            }
        }
        Ok(())
    }

    /// The input gradients of the post gate and of a low-rank gate added to `c.du`, and their
    /// weights' gradients (after q, k, v wrote `c.du`).
    pub(super) fn post_gate_bwd(&mut self, s: &Saved, mx: &Mixer, c: &Scratch) -> Result<()> {
        let Dims { a, d, .. } = self.p.dims;
        if let Post::Rms { gate: Some(g), .. } = &mx.post {
            self.linear_bwd(&s.u1, &c.du, &c.dpg, g, a, d, true)?;
        }
        if let Kind::Linear(ln) = &mx.kind {
            if let Some(KeyGate::Refined { wg, wr, .. }) = &ln.gate {
                self.linear_bwd(&s.u1, &c.du, &c.dlg, wg, a, d, true)?;
                self.linear_bwd(&s.u1, &c.du, &c.dgr, wr, a, d, true)?;
            }
            let key = match &ln.gate {
                Some(KeyGate::Sigmoid(g)) => Some(g),
                _ => None,
            };
            for (g, dz) in [(key, &c.dgz), (ln.value_gate.as_ref(), &c.dvz)] {
                match g {
                    Some(SigmoidGate { down: Some((down, rank)), .. }) => {
                        self.linear_bwd(&s.u1, &c.du, &c.dgd, down, *rank, d, true)?
                    }
                    Some(g) => self.linear_bwd(&s.u1, &c.du, dz, &g.up, a, d, true)?,
                    None => {}
                }
            }
        }
        Ok(())
    }
}
