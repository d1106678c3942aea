//! The gated linear scan: `S_t = diag(exp(lg_t)) S_{t−1} + φk_t v_tᵀ`, `o_t = S_tᵀ φq_t`
//! ("Gated Linear Attention Transformers", §2, Eq. 3), with the feature maps, position transform,
//! gate and post step of a [`LinearLowering`]. Prefill runs the chunked form, decode the recurrence.
//! A two-sided gate (Fast Decay, ReGLA §2.1 Eqs. 9–10) also decays the value axis: state entry
//! `(j, v)` by `e^{lg_j + lgv_v}`.

// Reference math indexes several parallel slices with one index; range loops read like the formulas.
#![allow(clippy::needless_range_loop)]

use super::{AttnLayer, LayerState, LINEAR_CHUNK};
use crate::activations::{elu, elu_plus_one, exp_max_inplace, key_forget_log_gate, log_sigmoid, sigmoid};
use crate::error::{Error, Result};
use crate::kernels::{silu_mul, weighted_rows};
use crate::lowering::{Feature, FeatureMap, Gate, LinearLowering, Post, Rotation};
use crate::ops::{axpy, dot, repeat_heads, rms_norm, silu, simple_rms_norm};
use crate::rotary::rope_rotate;
use crate::variants::{gla::gla_log_gate, regla::regla_gate};

/// Per-token linear features of a chunk: `[T, H·dk]` for fq/fk/lg, `[T, H·dh]` for v and lgv (the
/// value-axis log-gates of a two-sided gate; empty otherwise), and ReGLA's g, r for the gate view.
pub(super) struct Features {
    pub fq: Vec<f32>,
    pub fk: Vec<f32>,
    pub lg: Vec<f32>,
    pub lgv: Vec<f32>,
    pub v: Vec<f32>,
    pub g: Vec<f32>,
    pub r: Vec<f32>,
}

/// Gate projections of a whole chunk, computed once.
enum GatePre {
    None,
    One(Vec<f32>),
    Two(Vec<f32>, Vec<f32>),
}

impl GatePre {
    /// (`group`, `width`: with grouped-query attention the low-rank gate is computed per key/value
    /// head, `width` channels each, and repeated for its query heads like the keys.)
    fn new(gate: &Gate, x: &[f32], t: usize, group: usize, width: usize) -> GatePre {
        match gate {
            Gate::LowRank { down, up, .. } => {
                GatePre::One(repeat_heads(up.apply_rows(&down.apply_rows(x, t), t), group, width))
            }
            Gate::Refined { wg, wr, .. } => GatePre::Two(wg.apply_rows(x, t), wr.apply_rows(x, t)),
            Gate::TwoSided { wf, wz, .. } => GatePre::Two(wf.apply_rows(x, t), wz.apply_rows(x, t)),
            Gate::None | Gate::PerHead { .. } | Gate::KeyForget { .. } => GatePre::None,
        }
    }
}

/// `scale · R_pos(map(x))` into `out` (`dk` wide); `buf` is one key head of scratch. `ExpRunningMax` is handled
/// by the caller (it needs the decode state).
fn apply_feature(
    side: Feature,
    rotation: Option<&Rotation>,
    x: &[f32],
    pos: usize,
    buf: &mut [f32],
    out: &mut [f32],
) {
    match side.map {
        FeatureMap::Identity | FeatureMap::ExpRunningMax => buf.copy_from_slice(x),
        FeatureMap::EluPlusOne => buf.iter_mut().zip(x).for_each(|(b, v)| *b = elu_plus_one(*v)),
        FeatureMap::Elu => buf.iter_mut().zip(x).for_each(|(b, v)| *b = elu(*v)),
        FeatureMap::Swish => buf.iter_mut().zip(x).for_each(|(b, v)| *b = silu(*v)),
        FeatureMap::ExpMax => {
            buf.copy_from_slice(x);
            exp_max_inplace(buf);
        }
    }
    match rotation {
        None => out.copy_from_slice(buf),
        Some(Rotation::Rope { inv_freq }) => {
            out.copy_from_slice(buf);
            rope_rotate(out, pos, inv_freq);
        }
        Some(Rotation::Lrpe { lrpe, .. }) => lrpe.apply(pos, buf, out),
    }
    if side.scale != 1.0 {
        out.iter_mut().for_each(|v| *v *= side.scale);
    }
}

/// `out[i·w..(i+1)·w] = Σ_{u≤i} src[first + u·stride..][..w]` for the `n` rows of a chunk: the
/// chunk-local inclusive cumulative log-gates, in f64 so that their differences stay exact to f32
/// precision even where the sums are large (strong decay).
fn chunk_cumsum(out: &mut [f64], src: &[f32], first: usize, stride: usize, n: usize, w: usize) {
    for i in 0..n {
        for j in 0..w {
            let prev = if i == 0 { 0.0 } else { out[(i - 1) * w + j] };
            out[i * w + j] = prev + src[first + i * stride + j] as f64;
        }
    }
}

/// `y += a · e^{c_to − c_from} ⊙ x`: a term carried from the step of `c_from` to that of `c_to` under
/// value-axis decay (cumulative log-gates, per value channel).
fn axpy_value_decayed(a: f32, c_to: &[f64], c_from: &[f64], x: &[f32], y: &mut [f32]) {
    for (((yv, xv), to), from) in y.iter_mut().zip(x).zip(c_to).zip(c_from) {
        *yv += a * ((to - from) as f32).exp() * xv;
    }
}

impl AttnLayer {
    /// Feature maps, log-gates and values of `t` tokens (state: the running key max of
    /// [`FeatureMap::ExpRunningMax`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn linear_features(
        &self,
        ll: &LinearLowering,
        x: &[f32],
        q: &[f32],
        k: &[f32],
        v: Vec<f32>,
        t: usize,
        pos0: usize,
        state: &mut LayerState,
    ) -> Result<Features> {
        // q, k and the key-axis gates are `qk` wide per head; values `head_dim`.
        let (h, qk, dk) = (self.n_heads, self.key_dim, ll.dk);
        let a = h * qk;
        let LayerState::Linear { key_max, .. } = state else {
            return Err(Error::arg("state", "linear layer was given a KV-cache state"));
        };
        let pre = GatePre::new(&ll.gate, x, t, self.kv_group, qk);
        let lgv = match (&ll.gate, &pre) {
            (Gate::TwoSided { .. }, _) if ll.denominator.is_some() => {
                return Err(Error::arg("gate", "a value-axis gate takes no denominator"));
            }
            // Value axis, `[T, H·dh]` like v: lgv = lnσ(W_z x + b_z) (ReGLA Eq. 10's first factor).
            (Gate::TwoSided { bz, .. }, GatePre::Two(_, pz)) => {
                let hd = self.n_heads * self.head_dim;
                pz.iter().enumerate().map(|(i, z)| log_sigmoid((z + bz[i % hd]) as f64) as f32).collect()
            }
            _ => Vec::new(),
        };
        let zeros = vec![0.0; t * h * dk];
        let mut f = Features {
            fq: zeros.clone(),
            fk: zeros.clone(),
            lg: zeros,
            lgv,
            v,
            g: Vec::new(),
            r: Vec::new(),
        };
        if matches!(ll.gate, Gate::Refined { .. }) {
            f.g = vec![0.0; t * a];
            f.r = vec![0.0; t * a];
        }
        let mut buf = vec![0.0f32; qk];
        for r in 0..t {
            let pos = pos0 + r;
            for hh in 0..h {
                let src = r * a + hh * qk;
                let dst = (r * h + hh) * dk;
                let (qh, kh) = (&q[src..src + qk], &k[src..src + qk]);
                self.log_gate(ll, &pre, src, hh, kh, &mut f, dst);
                apply_feature(ll.q, ll.rotation.as_ref(), qh, pos, &mut buf, &mut f.fq[dst..dst + dk]);
                if let Gate::KeyForget { lower_bound, .. } = &ll.gate {
                    // HGRN2 §3: the key is 1 − forget gate, (1 − β)·σ(−f) without cancellation.
                    for j in 0..dk {
                        let beta = lower_bound[hh * qk + j] as f64;
                        f.fk[dst + j] = ((1.0 - beta) * sigmoid(-kh[j] as f64)) as f32;
                    }
                } else if ll.k.map == FeatureMap::ExpRunningMax {
                    // φk = exp(k − M_t) with the running max M_t; the exact state rescale
                    // exp(M_{t−1} − M_t) is folded into this token's log-gate.
                    let kmax = kh.iter().copied().fold(f32::MIN, f32::max);
                    let prev = key_max[hh];
                    let m_new = prev.map_or(kmax, |p| p.max(kmax));
                    let shift = prev.map_or(0.0, |p| p - m_new);
                    key_max[hh] = Some(m_new);
                    for j in 0..dk {
                        f.fk[dst + j] = (kh[j] - m_new).exp();
                        f.lg[dst + j] += shift;
                    }
                } else {
                    apply_feature(ll.k, ll.rotation.as_ref(), kh, pos, &mut buf, &mut f.fk[dst..dst + dk]);
                }
            }
        }
        Ok(f)
    }

    /// This head's log-gates `lg[dst..dst + dk]` of the row whose projections start at `src` (`kh`:
    /// this head's key projection).
    #[allow(clippy::too_many_arguments)]
    fn log_gate(
        &self,
        ll: &LinearLowering,
        pre: &GatePre,
        src: usize,
        hh: usize,
        kh: &[f32],
        f: &mut Features,
        dst: usize,
    ) {
        let (qk, dk) = (self.key_dim, ll.dk);
        let lg = &mut f.lg[dst..dst + dk];
        match (&ll.gate, pre) {
            (Gate::PerHead { log_gamma }, _) => lg.iter_mut().for_each(|x| *x = log_gamma[hh]),
            (Gate::KeyForget { lower_bound, .. }, _) => {
                for j in 0..dk {
                    lg[j] = key_forget_log_gate(kh[j] as f64, lower_bound[hh * qk + j] as f64) as f32;
                }
            }
            (Gate::LowRank { bias, normalizer, .. }, GatePre::One(z)) => {
                let kv_head = hh / self.kv_group;
                for j in 0..dk {
                    let zj = z[src + j] + bias[kv_head * qk + j];
                    lg[j] = gla_log_gate(zj as f64, *normalizer) as f32;
                }
            }
            (Gate::TwoSided { bf, .. }, GatePre::Two(pf, _)) => {
                for j in 0..dk {
                    lg[j] = log_sigmoid((pf[src + j] + bf[hh * qk + j]) as f64) as f32;
                }
            }
            (Gate::Refined { bg, br, .. }, GatePre::Two(pg, pr)) => {
                for j in 0..dk {
                    let gate = regla_gate(
                        (pg[src + j] + bg[hh * qk + j]) as f64,
                        (pr[src + j] + br[hh * qk + j]) as f64,
                    );
                    lg[j] = gate.log_f as f32;
                    f.g[src + j] = gate.g as f32;
                    f.r[src + j] = gate.r as f32;
                }
            }
            _ => {}
        }
    }

    /// Chunked prefill (GLA §3.3, chunkwise form): inter-chunk from the carried state, intra-chunk pairwise
    /// with exponents `b_i − b_s <= 0` computed directly. Returns per-head outputs `[T, H·dh]`.
    pub(super) fn linear_chunked(
        &self,
        ll: &LinearLowering,
        f: &Features,
        t: usize,
        state: &mut LayerState,
    ) -> Result<Vec<f32>> {
        let (h, dh, dk) = (self.n_heads, self.head_dim, ll.dk);
        let LayerState::Linear { s, z, .. } = state else {
            return Err(Error::arg("state", "linear layer was given a KV-cache state"));
        };
        // Two-sided gates (never with a denominator: `linear_features` refuses that).
        let vside = !f.lgv.is_empty();
        let mut out = vec![0.0f32; t * h * dh];
        // Chunk-local cumulative log-gates (f64, see `chunk_cumsum`).
        let mut b = vec![0.0f64; LINEAR_CHUNK * dk];
        // c_i = Σ_{u=c0..i} lgv_u, the value-axis counterpart of b (two-sided gates only).
        let mut c = vec![0.0f64; if vside { LINEAR_CHUNK * dh } else { 0 }];
        for c0 in (0..t).step_by(LINEAR_CHUNK) {
            let n = (c0 + LINEAR_CHUNK).min(t) - c0;
            for hh in 0..h {
                // b_i = Σ_{u=c0..i} lg_u (inclusive, chunk-local); c likewise of lgv.
                chunk_cumsum(&mut b, &f.lg, (c0 * h + hh) * dk, h * dk, n, dk);
                if vside {
                    chunk_cumsum(&mut c, &f.lgv, (c0 * h + hh) * dh, h * dh, n, dh);
                }
                let chunk = ChunkHead { f, b: &b, c: &c, c0, n, hh, h, dh, dk };
                let sh = &mut s[hh * dk * dh..(hh + 1) * dk * dh];
                let zh = &mut z[hh * dk..(hh + 1) * dk];
                chunk.outputs(sh, zh, ll.denominator, &mut out);
                chunk.carry(sh, zh);
            }
        }
        Ok(out)
    }

    /// Recurrent step (GLA §2, Eq. 3): `S ← diag(e^{lg}) S + φk vᵀ`, `o = Sᵀ φq`; with a two-sided
    /// gate `S ← (e^{lg} e^{lgv}ᵀ) ⊙ S + φk vᵀ` (ReGLA §2.1, Eq. 9).
    pub(super) fn linear_recurrent(
        &self,
        ll: &LinearLowering,
        f: &Features,
        state: &mut LayerState,
    ) -> Result<Vec<f32>> {
        let (h, dh, dk) = (self.n_heads, self.head_dim, ll.dk);
        let LayerState::Linear { s, z, .. } = state else {
            return Err(Error::arg("state", "linear layer was given a KV-cache state"));
        };
        let den_eps = ll.denominator;
        let vside = !f.lgv.is_empty();
        let mut out = vec![0.0f32; h * dh];
        let mut ev = vec![1.0f32; dh];
        for hh in 0..h {
            if vside {
                ev.iter_mut().zip(&f.lgv[hh * dh..(hh + 1) * dh]).for_each(|(e, l)| *e = l.exp());
            }
            let sh = &mut s[hh * dk * dh..(hh + 1) * dk * dh];
            let zh = &mut z[hh * dk..(hh + 1) * dk];
            let fq = &f.fq[hh * dk..(hh + 1) * dk];
            let fk = &f.fk[hh * dk..(hh + 1) * dk];
            let lg = &f.lg[hh * dk..(hh + 1) * dk];
            let vh = &f.v[hh * dh..(hh + 1) * dh];
            let oh = &mut out[hh * dh..(hh + 1) * dh];
            let mut den = 0.0f32;
            for j in 0..dk {
                let decay = lg[j].exp();
                let row = &mut sh[j * dh..(j + 1) * dh];
                for ((sv, vv), e) in row.iter_mut().zip(vh).zip(&ev) {
                    *sv = decay * e * *sv + fk[j] * vv;
                }
                zh[j] = decay * zh[j] + fk[j];
                den += fq[j] * zh[j];
                if fq[j] != 0.0 {
                    axpy(fq[j], row, oh);
                }
            }
            if let Some(eps) = den_eps {
                let inv = 1.0 / den.max(eps);
                oh.iter_mut().for_each(|x| *x *= inv);
            }
        }
        Ok(out)
    }

    /// Output normalisation and gating of the raw per-head outputs `[T, H·dh]`.
    pub(super) fn linear_post(&self, ll: &LinearLowering, x: &[f32], mut o: Vec<f32>, t: usize) -> Vec<f32> {
        let (h, dh) = (self.n_heads, self.head_dim);
        match &ll.post {
            Post::None => {}
            Post::SimpleRmsNorm => o.chunks_exact_mut(h * dh).for_each(simple_rms_norm),
            Post::RmsNorm { gain, eps } => {
                o.chunks_exact_mut(gain.len()).for_each(|c| rms_norm(c, gain, *eps))
            }
            Post::RmsNormGate { gain, eps, out_gate } => {
                o.chunks_exact_mut(gain.len()).for_each(|c| rms_norm(c, gain, *eps));
                let g = out_gate.apply_rows(x, t);
                silu_mul(&mut o, &g);
            }
        }
        o
    }
}

/// One head of one chunk of [`AttnLayer::linear_chunked`]: positions `c0..c0 + n`, with the
/// chunk-local cumulative log-gates `b` (key axis) and `c` (value axis; empty for one-sided gates).
struct ChunkHead<'a> {
    f: &'a Features,
    b: &'a [f64],
    c: &'a [f64],
    c0: usize,
    n: usize,
    hh: usize,
    h: usize,
    dh: usize,
    dk: usize,
}

impl ChunkHead<'_> {
    /// Where position `r`'s row of width `w` lies for this head in a `[T, H·w]` buffer.
    fn row(&self, r: usize, w: usize) -> std::ops::Range<usize> {
        let first = (r * self.h + self.hh) * w;
        first..first + w
    }

    /// Position `r`'s value row for this head.
    fn value(&self, r: usize) -> &[f32] {
        &self.f.v[self.row(r, self.dh)]
    }

    /// Row `i` of the value-axis cumulative log-gates.
    fn c_row(&self, i: usize) -> &[f64] {
        &self.c[i * self.dh..(i + 1) * self.dh]
    }

    fn vside(&self) -> bool {
        !self.c.is_empty()
    }

    /// The chunk's outputs into `out` (`[T, H·dh]`), from the state `sh, zh` carried into it.
    fn outputs(&self, sh: &[f32], zh: &[f32], den_eps: Option<f32>, out: &mut [f32]) {
        let (dh, dk, b) = (self.dh, self.dk, self.b);
        let mut qd = vec![0.0f32; dk];
        for i in 0..self.n {
            let fq = &self.f.fq[self.row(self.c0 + i, dk)];
            let oh = &mut out[self.row(self.c0 + i, dh)];
            // Inter-chunk: (φq ⊙ e^{b_i}) · S_start.
            for j in 0..dk {
                qd[j] = fq[j] * (b[i * dk + j] as f32).exp();
            }
            let mut den = dot(&qd, zh);
            weighted_rows(&qd, sh, dh, oh);
            if self.vside() {
                oh.iter_mut().zip(self.c_row(i)).for_each(|(o, ci)| *o *= (*ci as f32).exp());
            }
            // Intra-chunk: Σ_{s<=i} (Σ_j φq_i φk_s e^{b_i − b_s}) (e^{c_i − c_s} ⊙) v_s.
            for si in 0..=i {
                let fk = &self.f.fk[self.row(self.c0 + si, dk)];
                let mut p = 0.0f32;
                for j in 0..dk {
                    p += fq[j] * fk[j] * ((b[i * dk + j] - b[si * dk + j]) as f32).exp();
                }
                den += p;
                let vs = self.value(self.c0 + si);
                if self.vside() {
                    axpy_value_decayed(p, self.c_row(i), self.c_row(si), vs, oh);
                } else {
                    axpy(p, vs, oh);
                }
            }
            if let Some(eps) = den_eps {
                let inv = 1.0 / den.max(eps);
                oh.iter_mut().for_each(|x| *x *= inv);
            }
        }
    }

    /// Carry the state past the chunk: S ← e^{b_L} S + Σ_s (φk_s ⊙ e^{b_L − b_s}) v_sᵀ (two-sided:
    /// entry (j, v) also times e^{c_L[v]}, and the term of s times e^{c_L[v] − c_s[v]}).
    fn carry(&self, sh: &mut [f32], zh: &mut [f32]) {
        let (dh, dk, b, last) = (self.dh, self.dk, self.b, self.n - 1);
        for j in 0..dk {
            let decay = (b[last * dk + j] as f32).exp();
            let row = &mut sh[j * dh..(j + 1) * dh];
            if self.vside() {
                row.iter_mut().zip(self.c_row(last)).for_each(|(x, cv)| *x *= decay * (*cv as f32).exp());
            } else {
                row.iter_mut().for_each(|x| *x *= decay);
            }
            zh[j] *= decay;
            for si in 0..self.n {
                let w = self.f.fk[self.row(self.c0 + si, dk).start + j]
                    * ((b[last * dk + j] - b[si * dk + j]) as f32).exp();
                if w != 0.0 {
                    if self.vside() {
                        axpy_value_decayed(
                            w,
                            self.c_row(last),
                            self.c_row(si),
                            self.value(self.c0 + si),
                            row,
                        );
                    } else {
                        axpy(w, self.value(self.c0 + si), row);
                    }
                    zh[j] += w;
                }
            }
        }
    }
}
