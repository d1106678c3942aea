//! AdamW with moments that can be saved and restored (so a resumed run continues exactly), the
//! warmup + cosine learning-rate schedule and global-norm gradient clipping.

use crate::error::{Result, TrainError};
use crate::model::TrainModel;
use candle_core::backprop::GradStore;
use candle_core::{Tensor, Var};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// AdamW hyper-parameters.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AdamWConfig {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig { beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1 }
    }
}

/// Whether weight decay applies to a tensor: matrices of the embeddings, projections, FFN and gate
/// projections; never norms, biases, position parameters, LRPE θ/v or FIRE.
pub fn decays(name: &str, rank: usize) -> bool {
    rank >= 2 && !name.starts_with("pos.") && !name.contains(".fire.") && !name.contains(".lrpe.")
}

/// AdamW (decoupled weight decay, bias-corrected moments) over the named parameters of a model.
#[derive(Debug)]
pub struct AdamW {
    cfg: AdamWConfig,
    /// Number of updates done so far.
    pub t: usize,
    m: BTreeMap<String, Tensor>,
    v: BTreeMap<String, Tensor>,
}

impl AdamW {
    /// Zero moments for every parameter of `model`.
    pub fn new(model: &TrainModel, cfg: AdamWConfig) -> Result<AdamW> {
        let mut m = BTreeMap::new();
        let mut v = BTreeMap::new();
        for (name, var) in model.named_vars() {
            m.insert(name.to_string(), var.as_tensor().zeros_like()?.detach());
            v.insert(name.to_string(), var.as_tensor().zeros_like()?.detach());
        }
        Ok(AdamW { cfg, t: 0, m, v })
    }

    /// One update with learning rate `lr`; `grad_scale` multiplies every gradient (clipping).
    pub fn step(&mut self, model: &TrainModel, grads: &GradStore, lr: f64, grad_scale: f64) -> Result<()> {
        self.t += 1;
        let (b1, b2) = (self.cfg.beta1, self.cfg.beta2);
        let bc1 = 1.0 - b1.powi(self.t as i32);
        let bc2 = 1.0 - b2.powi(self.t as i32);
        for (name, var) in model.named_vars() {
            let Some(g) = grads.get(var.as_tensor()) else { continue };
            let g = (g.detach() * grad_scale)?;
            let (Some(m), Some(v)) = (self.m.get_mut(name), self.v.get_mut(name)) else { continue };
            *m = ((&*m * b1)? + (&g * (1.0 - b1))?)?;
            *v = ((&*v * b2)? + (g.sqr()? * (1.0 - b2))?)?;
            let mhat = (&*m / bc1)?;
            let vhat = (&*v / bc2)?;
            let upd = (mhat / (vhat.sqrt()? + self.cfg.eps)?)?;
            let mut theta = var.as_tensor().detach();
            if decays(name, var.rank()) {
                theta = (theta * (1.0 - lr * self.cfg.weight_decay))?;
            }
            var.set(&(theta - (upd * lr)?)?)?;
        }
        Ok(())
    }

    /// The moments `(m, v)` by tensor name.
    pub fn moments(&self) -> (&BTreeMap<String, Tensor>, &BTreeMap<String, Tensor>) {
        (&self.m, &self.v)
    }

    /// An optimizer after `t` updates with these moments (a GPU run's, for its checkpoint).
    pub fn from_moments(
        cfg: AdamWConfig,
        t: usize,
        m: BTreeMap<String, Tensor>,
        v: BTreeMap<String, Tensor>,
    ) -> AdamW {
        AdamW { cfg, t, m, v }
    }

    /// Save the moments (`m.<name>`, `v.<name>`) as safetensors at `path`.
    pub fn save(&self, path: &Path) -> Result<()> {
        let mut all: HashMap<String, Tensor> = HashMap::new();
        for (k, t) in &self.m {
            all.insert(format!("m.{k}"), t.clone());
        }
        for (k, t) in &self.v {
            all.insert(format!("v.{k}"), t.clone());
        }
        candle_core::safetensors::save(&all, path).map_err(|e| TrainError::bad_file(path, e.to_string()))
    }

    /// Restore moments written by [`AdamW::save`]; every parameter of `model` must be present with
    /// its shape.
    pub fn load(&mut self, path: &Path, t: usize) -> Result<()> {
        let all = candle_core::safetensors::load(path, &candle_core::Device::Cpu)
            .map_err(|e| TrainError::bad_file(path, e.to_string()))?;
        for (prefix, store) in [("m", &mut self.m), ("v", &mut self.v)] {
            for (name, cur) in store.iter_mut() {
                let key = format!("{prefix}.{name}");
                let t = all
                    .get(&key)
                    .ok_or_else(|| TrainError::bad_file(path, format!("missing optimizer tensor `{key}`")))?;
                if t.dims() != cur.dims() {
                    return Err(TrainError::bad_file(
                        path,
                        format!(
                            "optimizer tensor `{key}` has shape {:?}, expected {:?}",
                            t.dims(),
                            cur.dims()
                        ),
                    ));
                }
                *cur = t.clone();
            }
        }
        self.t = t;
        Ok(())
    }
}

/// Learning rate at `step` (0-based): linear warmup over `warmup` steps to `peak`, then cosine decay
/// to `min_ratio · peak` at `total`.
pub fn lr_at(step: usize, total: usize, warmup: usize, peak: f64, min_ratio: f64) -> f64 {
    if warmup > 0 && step < warmup {
        return peak * (step + 1) as f64 / warmup as f64;
    }
    let span = total.saturating_sub(warmup).max(1);
    let progress = ((step - warmup.min(step)) as f64 / span as f64).min(1.0);
    let cos = 0.5 * (1.0 + (std::f64::consts::PI * progress).cos());
    peak * (min_ratio + (1.0 - min_ratio) * cos)
}

/// Global L2 norm of the gradients of `vars`, and the factor that scales it down to `max_norm`
/// (1 when already below, or when `max_norm <= 0`).
pub fn clip_factor(vars: &[(&str, &Var)], grads: &GradStore, max_norm: f64) -> Result<(f64, f64)> {
    let mut ss = 0.0f64;
    for (_, var) in vars {
        if let Some(g) = grads.get(var.as_tensor()) {
            ss += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
        }
    }
    let norm = ss.sqrt();
    let factor = if max_norm > 0.0 && norm > max_norm { max_norm / (norm + 1e-12) } else { 1.0 };
    Ok((norm, factor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays_to_the_floor() {
        assert!((lr_at(0, 100, 10, 1.0, 0.1) - 0.1).abs() < 1e-12);
        assert!((lr_at(9, 100, 10, 1.0, 0.1) - 1.0).abs() < 1e-12);
        assert!((lr_at(10, 100, 10, 1.0, 0.1) - 1.0).abs() < 1e-12);
        assert!(lr_at(55, 100, 10, 1.0, 0.1) < 1.0);
        assert!((lr_at(100, 100, 10, 1.0, 0.1) - 0.1).abs() < 1e-12);
        assert!((lr_at(0, 100, 0, 2.0, 0.0) - 2.0).abs() < 1e-12);
    }

    #[test]
    fn weight_decay_skips_norms_and_position_parameters() {
        assert!(decays("layers.0.attn.wq", 2));
        assert!(!decays("layers.0.attn_norm.weight", 1));
        assert!(!decays("pos.t5.bucket_bias", 2));
        assert!(!decays("layers.1.attn.fire.w2", 2));
    }
}
