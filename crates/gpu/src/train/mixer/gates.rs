//! The linear mixers' log-gates on the host side of the kernels: GLA's low-rank and Fast Decay's
//! full-rank sigmoid gates, ReGLA's refined gate, the running sums and their backward passes.

use super::{KeyGate, SigmoidGate};
use crate::error::Result;
use crate::params::TrainParams;
use crate::train::kernels::{threads, K};
use crate::train::record::{Rec, Saved, Scratch};
use crate::train::Dims;

impl Rec<'_, '_> {
    /// The key-axis log-gates (per position, before the running sums) into `s.bc`.
    pub(super) fn key_gate_fwd(&mut self, s: &Saved, g: &KeyGate) -> Result<()> {
        let Dims { r, a, d, .. } = self.p.dims;
        match g {
            KeyGate::Sigmoid(g) => self.gate_lg(&s.u1, g, &s.gd, &s.gz, &s.bc),
            KeyGate::Refined { wg, bg, wr, br } => {
                self.linear_fwd(&s.gz, &s.u1, wg, a, d, false)?;
                self.linear_fwd(&s.gr, &s.u1, wr, a, d, false)?;
                let tp = self.refined_params(bg, br)?;
                let params = self.p.params;
                self.dispatch(K::RefinedFwd, &tp, &[&s.gz, &s.gr, params, &s.bc], threads(r * a));
                Ok(())
            }
            KeyGate::KeyForget { beta, .. } => {
                let tp = TrainParams { rows: r as u32, width: a as u32, ..TrainParams::default() };
                self.dispatch(K::KeyforgetFwd, &tp, &[&s.k, beta, &s.fk, &s.bc], threads(r * a));
                Ok(())
            }
        }
    }

    pub(super) fn refined_params(&self, bg: &str, br: &str) -> Result<TrainParams> {
        let Dims { r, a, .. } = self.p.dims;
        Ok(TrainParams {
            rows: r as u32,
            width: a as u32,
            off0: self.off(bg)? as u32,
            off1: self.off(br)? as u32,
            ..TrainParams::default()
        })
    }

    /// Running sums of `buf` `[R, a]` over each sequence's positions (`back`: from the end).
    pub(super) fn cumsum(&mut self, buf: &wgpu::Buffer, back: bool) {
        let Dims { r, a, b, .. } = self.p.dims;
        let cs = TrainParams { n: (b * a) as u32, mode: u32::from(back), ..self.attn_params(r) };
        self.dispatch(K::Cumsum, &cs, &[buf], threads(b * a));
    }

    /// Per-position log-gates `lg` from the layer input `u`: `gd = u·downᵀ` (low rank),
    /// `gz = ·upᵀ`, `lg = lnσ(gz + bias)/normalizer`.
    pub(super) fn gate_lg(
        &mut self,
        u: &wgpu::Buffer,
        g: &SigmoidGate,
        gd: &wgpu::Buffer,
        gz: &wgpu::Buffer,
        lg: &wgpu::Buffer,
    ) -> Result<()> {
        let Dims { r, a, d, .. } = self.p.dims;
        match &g.down {
            Some((down, rank)) => {
                self.linear_fwd(gd, u, down, *rank, d, false)?;
                self.linear_fwd(gz, gd, &g.up, a, *rank, false)?;
            }
            None => self.linear_fwd(gz, u, &g.up, a, d, false)?,
        }
        let tp = self.gate_params(g, r, a)?;
        let params = self.p.params;
        self.dispatch(K::GateFwd, &tp, &[gz, params, lg], threads(r * a));
        Ok(())
    }

    pub(super) fn gate_params(&self, g: &SigmoidGate, r: usize, a: usize) -> Result<TrainParams> {
        Ok(TrainParams {
            rows: r as u32,
            width: a as u32,
            scale: g.normalizer,
            off0: self.off(&g.bias)? as u32,
            ..TrainParams::default()
        })
    }

    /// The refined gate's bias gradients, `c.dlg` turned into d zg in place and `c.dgr` = d zr (the
    /// input's gradient is added by [`Rec::post_gate_bwd`]).
    pub(super) fn refined_bwd(&mut self, s: &Saved, c: &Scratch, bg: &str, br: &str) -> Result<()> {
        let Dims { r, a, .. } = self.p.dims;
        let tp = self.refined_params(bg, br)?;
        let (params, grads) = (self.p.params, self.p.grads);
        self.dispatch(K::RefinedBwd, &tp, &[&s.gz, &s.gr, params, &c.dlg, &c.dgr], threads(r * a));
        for (dz, bias) in [(&c.dlg, bg), (&c.dgr, br)] {
            let cs = TrainParams { off0: self.off(bias)? as u32, ..tp };
            self.dispatch(K::Colsum, &cs, &[dz, grads], threads(a));
            self.written.insert(bias.to_string());
        }
        Ok(())
    }

    /// The running log-gate's gradient `dlg` from the two sides it scales: with `(x, dx)` pairs
    /// `(φq, dφq), (φk, dφk)` (or `(o, do), (v, dv)` on the value axis), dB = x₀ ⊙ dx₀ − x₁ ⊙ dx₁ and
    /// dlg_t = Σ_{i ≥ t} dB_i.
    pub(super) fn running_gate_bwd(
        &mut self,
        sides: [(&wgpu::Buffer, &wgpu::Buffer); 2],
        dlg: &wgpu::Buffer,
    ) -> Result<()> {
        let Dims { r, a, .. } = self.p.dims;
        for (flag, ((x, dx), scale)) in sides.into_iter().zip([1.0, -1.0]).enumerate() {
            let tp = TrainParams { n: (r * a) as u32, flag: flag as u32, scale, ..TrainParams::default() };
            self.dispatch(K::MulAcc, &tp, &[x, dx, dlg], threads(r * a));
        }
        self.cumsum(dlg, true);
        Ok(())
    }

    /// A sigmoid gate's bias gradient and `dz` (its pre-activation's gradient) from `dlg`; a
    /// low-rank gate also writes `up`'s gradient and `dgd` (the down projection's output gradient).
    /// The input's gradient is added by [`Rec::post_gate_bwd`].
    pub(super) fn sigmoid_gate_bwd(
        &mut self,
        s: &Saved,
        g: &SigmoidGate,
        gz: &wgpu::Buffer,
        dlg: &wgpu::Buffer,
        dz: &wgpu::Buffer,
        dgd: &wgpu::Buffer,
    ) -> Result<()> {
        let Dims { r, a, .. } = self.p.dims;
        let tp = self.gate_params(g, r, a)?;
        let (params, grads) = (self.p.params, self.p.grads);
        self.dispatch(K::GateBwd, &tp, &[gz, params, dlg, dz], threads(r * a));
        self.dispatch(K::Colsum, &tp, &[dz, grads], threads(a));
        self.written.insert(g.bias.clone());
        if let Some((_, rank)) = &g.down {
            self.linear_bwd(&s.gd, dgd, dz, &g.up, a, *rank, false)?;
        }
        Ok(())
    }
}
