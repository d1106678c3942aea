//! One side's features of a linear mixer: the feature map, LRPE's fixed P, its permutation and
//! complex cores (the rotation cores are RoPE's kernel), and their backward passes.

use super::{Feat, KeyGate, Linear, LrpeParts, Mixer};
use crate::params::TrainParams;
use crate::train::kernels::{grid, threads, K};
use crate::train::record::{Rec, Saved, Scratch};
use crate::train::{init_storage, init_words, zeroed, Dims};
use attnlab_core::lrpe::{odd_even_index, Lrpe};
use attnlab_core::variants::lrpe::LrpeCore;

/// LRPE's P buffers for `lrpe` (and the gradient buffer of learned angles over `t` positions).
pub(super) fn lrpe_p(dev: &wgpu::Device, lrpe: &Lrpe, learned_theta: bool, t: usize) -> LrpeParts {
    let dh = lrpe.dim();
    let householder = lrpe.householder_v().map(|v| {
        let v: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        init_storage(dev, "householder v", &v)
    });
    let odd_even = (lrpe.p() == attnlab_core::variants::lrpe::LrpeP::OddEven).then(|| {
        let idx: Vec<u32> = (0..dh).map(|j| odd_even_index(j, dh) as u32).collect();
        let mut inv = vec![0u32; dh];
        for (j, &i) in idx.iter().enumerate() {
            inv[i as usize] = j as u32;
        }
        (init_words(dev, "odd-even", &idx), init_words(dev, "odd-even inverse", &inv))
    });
    let theta_grad = learned_theta.then(|| zeroed(dev, "angles grad", t * lrpe.angles().len() * 2));
    let core_perm = (lrpe.core() == LrpeCore::Permutation).then(|| {
        let fwd: Vec<u32> = (0..t).flat_map(|s| (0..dh).map(move |j| lrpe.perm_power(s, j) as u32)).collect();
        let mut inv = vec![0u32; t * dh];
        for (e, &i) in fwd.iter().enumerate() {
            inv[e - e % dh + i as usize] = (e % dh) as u32;
        }
        (init_words(dev, "permutation powers", &fwd), init_words(dev, "inverse powers", &inv))
    });
    LrpeParts { householder, odd_even, theta_grad, core_perm, complex: None }
}

impl Rec<'_, '_> {
    /// One side's features before the rotation: the map, then LRPE's P and its permutation core
    /// (`tmp`, `tmp2`: scratch).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn side_fwd(
        &mut self,
        x: &wgpu::Buffer,
        fx: &wgpu::Buffer,
        pre: &wgpu::Buffer,
        f: Feat,
        p: Option<&LrpeParts>,
        tmp: [&wgpu::Buffer; 2],
    ) {
        let Dims { r, a, h, .. } = self.p.dims;
        let core = p.and_then(|p| p.core_perm.as_ref());
        let complex = p.and_then(|p| p.complex.as_ref());
        let out = match (core, complex) {
            (Some(_), _) => tmp[1],
            (None, Some(_)) => pre,
            (None, None) => fx,
        };
        let perm = TrainParams { n: (r * a) as u32, ..self.attn_params(r) };
        match p.and_then(|p| p.odd_even.as_ref()) {
            Some((idx, _)) => {
                self.feature_fwd(x, tmp[0], f);
                self.dispatch(K::Permute, &perm, &[tmp[0], idx, out], threads(r * a));
            }
            None => self.feature_fwd(x, out, f),
        }
        if let Some(v) = p.and_then(|p| p.householder.as_ref()) {
            let tp = TrainParams { n: (r * h) as u32, ..self.attn_params(r) };
            self.dispatch(K::Householder, &tp, &[v, out], threads(r * h));
        }
        if let Some((fwd, _)) = core {
            self.dispatch(K::Permute, &TrainParams { mode: 1, ..perm }, &[out, fwd, fx], threads(r * a));
        }
        if let Some(tab) = complex {
            self.dispatch(K::ComplexFwd, &perm, &[tab, out, fx], threads(r * a));
        }
    }

    /// One side's feature map, `fx` from `x`.
    pub(super) fn feature_fwd(&mut self, x: &wgpu::Buffer, fx: &wgpu::Buffer, f: Feat) {
        let Dims { r, a, h, .. } = self.p.dims;
        match f {
            Feat::Map(mode, scale) => {
                let tp = TrainParams { n: (r * a) as u32, mode, scale, ..TrainParams::default() };
                self.dispatch(K::FeatureFwd, &tp, &[x, fx], threads(r * a));
            }
            Feat::ExpMax(scale) => {
                let tp = TrainParams { n: (r * h) as u32, scale, ..self.attn_params(r) };
                self.dispatch(K::ExpmaxFwd, &tp, &[x, fx], threads(r * h));
            }
            // Written with the gate (`runmax_fwd` also rescales the log-gate).
            Feat::RunningMax(_) | Feat::KeyForget => {}
        }
    }

    /// dq, dk from dφq, dφk: the inverse rotation, then the feature maps' derivatives (a running
    /// key max also reads the log-gates' gradient `c.dlg`).
    pub(super) fn features_bwd(&mut self, s: &Saved, mx: &Mixer, ln: &Linear, c: &Scratch) {
        let Dims { r, a, b, h, t, .. } = self.p.dims;
        let sides = [(&s.q, &s.fq, &s.cq, &c.dfq, &c.dq, ln.q), (&s.k, &s.fk, &s.ck, &c.dfk, &c.dk, ln.k)];
        for (side, (x, fx, pre, dfx, dx, f)) in sides.into_iter().enumerate() {
            let p = ln.lrpe.as_ref();
            let perm = TrainParams { n: (r * a) as u32, ..self.attn_params(r) };
            // The complex core: its table's gradient, then back to head_dim channels (in c.tmp2).
            let dfx = match p.and_then(|p| p.complex.as_ref()) {
                Some(tab) => {
                    if let Some(grad) = p.and_then(|p| p.theta_grad.as_ref()) {
                        let tp = TrainParams { flag: side as u32, ..perm };
                        self.dispatch(K::ComplexGrad, &tp, &[pre, dfx, grad], threads(t * self.p.dims.dh));
                    }
                    self.dispatch(K::ComplexBwd, &perm, &[tab, dfx, &c.tmp2], threads(r * a));
                    &c.tmp2
                }
                None => dfx,
            };
            if let (Some(grad), Some((tab, n))) = (p.and_then(|p| p.theta_grad.as_ref()), mx.rope.as_ref()) {
                let tp = TrainParams { n: *n as u32, flag: side as u32, ..self.attn_params(r) };
                self.dispatch(K::RotGrad, &tp, &[tab, fx, dfx, grad], threads(t * n));
            }
            self.rotate(mx.rope.as_ref(), dfx, true);
            let dfx = match p.and_then(|p| p.core_perm.as_ref()) {
                Some((_, inv)) => {
                    self.dispatch(
                        K::Permute,
                        &TrainParams { mode: 1, ..perm },
                        &[dfx, inv, &c.tmp2],
                        threads(r * a),
                    );
                    &c.tmp2
                }
                None => dfx,
            };
            if let Some(v) = p.and_then(|p| p.householder.as_ref()) {
                let tp = TrainParams { n: (r * h) as u32, ..self.attn_params(r) };
                self.dispatch(K::Householder, &tp, &[v, dfx], threads(r * h));
            }
            let dfx = match p.and_then(|p| p.odd_even.as_ref()) {
                Some((_, inv)) => {
                    let tp = TrainParams { n: (r * a) as u32, ..self.attn_params(r) };
                    self.dispatch(K::Permute, &tp, &[dfx, inv, &c.tmp], threads(r * a));
                    &c.tmp
                }
                None => dfx,
            };
            match f {
                Feat::Map(mode, scale) => {
                    let tp = TrainParams { n: (r * a) as u32, mode, scale, ..TrainParams::default() };
                    self.dispatch(K::FeatureBwd, &tp, &[x, dfx, dx], threads(r * a));
                }
                Feat::ExpMax(scale) => {
                    let tp = TrainParams { n: (r * h) as u32, scale, ..self.attn_params(r) };
                    self.dispatch(K::ExpmaxBwd, &tp, &[x, dfx, dx], threads(r * h));
                }
                Feat::KeyForget => {
                    if let Some(KeyGate::KeyForget { beta, grad }) = &ln.gate {
                        let tp = TrainParams { rows: r as u32, width: a as u32, ..TrainParams::default() };
                        // c.tmp: each element's dβ, summed over the rows into the table's gradient.
                        self.dispatch(
                            K::KeyforgetBwd,
                            &tp,
                            &[x, beta, dfx, dx, &c.dlg, &c.tmp],
                            threads(r * a),
                        );
                        if let Some(g) = grad {
                            self.dispatch(K::Colsum, &tp, &[&c.tmp, g], threads(a));
                        }
                    }
                }
                Feat::RunningMax(_) => {
                    let tp = TrainParams { n: (b * h) as u32, ..self.attn_params(r) };
                    // c.dden (a denominator's scratch, unused with a gate) holds the running maxima.
                    self.dispatch(K::RunmaxBwd, &tp, &[x, fx, dfx, dx, &c.dlg, &c.dden], grid(b * h));
                }
            }
        }
    }
}
