//! Introspection of linear layers for the lab views: the implied attention matrix (gates and decay
//! applied; exact weights for positive-score denominator layers, otherwise rows divided by Σ|row|
//! with signs kept — docs/ARCHITECTURE.md) and the gate values (F, and ReGLA's g and r).

use super::linear::Features;
use super::{AttnLayer, AttnMatrixKind, LayerAttention, LayerGates};
use crate::error::{Error, Result};
use crate::lowering::{Gate, LinearLowering};

impl AttnLayer {
    /// Implied attention matrix of a linear layer (design.md: gates/decay applied; exact weights for
    /// denominator variants, otherwise rows divided by Σ|row| with signs kept).
    pub(super) fn linear_matrix(
        &self,
        ll: &LinearLowering,
        f: &Features,
        t: usize,
        pos0: usize,
        layer: usize,
    ) -> Result<LayerAttention> {
        if pos0 != 0 {
            return Err(Error::arg("trace", "attention matrices are recorded from position 0 only"));
        }
        let (h, dk, dh) = (self.n_heads, ll.dk, self.head_dim);
        // A two-sided gate's value-axis decay differs per value channel; the map takes its mean over
        // the head's channels, so row i weighs v_s by Σ_j φq φk e^{b_i − b_s} · mean_v e^{c_i − c_s}.
        let vside = !f.lgv.is_empty();
        let mut accv = vec![0.0f32; if vside { dh } else { 0 }];
        // Only 1+elu features keep every score positive, so only there are the normalised rows the
        // layer's exact weights; LRPE rotations can make scores (and the denominator) negative.
        let den = ll.denominator.filter(|_| ll.scores_are_positive());
        let mut heads = Vec::with_capacity(h);
        let mut acc = vec![0.0f32; dk];
        for hh in 0..h {
            let at = |r: usize| (r * h + hh) * dk;
            let mut m = vec![0.0f32; t * t];
            for i in 0..t {
                let fq = &f.fq[at(i)..at(i) + dk];
                // acc = A_i − A_s accumulated backwards from s = i.
                acc.iter_mut().for_each(|x| *x = 0.0);
                accv.iter_mut().for_each(|x| *x = 0.0);
                let row = &mut m[i * t..(i + 1) * t];
                for si in (0..=i).rev() {
                    if si < i {
                        acc.iter_mut().zip(&f.lg[at(si + 1)..at(si + 1) + dk]).for_each(|(a, l)| *a += l);
                        if vside {
                            let vat = ((si + 1) * h + hh) * dh;
                            accv.iter_mut().zip(&f.lgv[vat..vat + dh]).for_each(|(a, l)| *a += l);
                        }
                    }
                    let fk = &f.fk[at(si)..at(si) + dk];
                    let mut p = 0.0f32;
                    for j in 0..dk {
                        p += fq[j] * fk[j] * acc[j].exp();
                    }
                    if vside {
                        p *= accv.iter().map(|a| a.exp()).sum::<f32>() / dh as f32;
                    }
                    row[si] = p;
                }
                let norm = match den {
                    Some(eps) => row.iter().sum::<f32>().max(eps),
                    None => row.iter().map(|x| x.abs()).sum::<f32>(),
                };
                if norm > 0.0 {
                    row.iter_mut().for_each(|x| *x /= norm);
                }
            }
            heads.push(m);
        }
        let kind =
            if den.is_some() { AttnMatrixKind::Probabilities } else { AttnMatrixKind::SignedNormalized };
        Ok(LayerAttention { layer, kind, n: t, heads })
    }

    pub(super) fn gate_trace(
        &self,
        ll: &LinearLowering,
        f: &Features,
        t: usize,
        layer: usize,
    ) -> Option<LayerGates> {
        let (h, dk) = (self.n_heads, ll.dk);
        let (fv, g, r) = match &ll.gate {
            // Two-sided gates: the key-axis factor σ(W_f x + b_f) (the value-axis factor is not traced).
            Gate::LowRank { .. } | Gate::PerHead { .. } | Gate::KeyForget { .. } | Gate::TwoSided { .. } => {
                (f.lg.iter().map(|x| x.exp()).collect(), None, None)
            }
            // F itself, without the running-max rescale folded into lg.
            Gate::Refined { .. } => {
                let fv: Vec<f32> =
                    f.g.iter()
                        .zip(&f.r)
                        .map(|(g, r)| (1.0 - r) * g * g + r * (1.0 - (1.0 - g) * (1.0 - g)))
                        .collect();
                (fv, Some(f.g.clone()), Some(f.r.clone()))
            }
            Gate::None => return None,
        };
        Some(LayerGates {
            layer,
            variant: self.spec.variant_id().to_string(),
            n: t,
            n_heads: h,
            dim: dk,
            f: fv,
            g,
            r,
        })
    }
}
