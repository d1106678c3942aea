//! [`TrainModel`]: the trainable model. One `Var` per tensor of `tensor_specs(cfg)`, the
//! training-form forward pass (embeddings → pre-norm blocks → final norm → logits, §5 of
//! docs/model-format.md) and conversion to and from the core's model folder.

use crate::attn;
use crate::error::{Result, TrainError};
use attnlab_core::config::{AbsolutePosition, FfnKind, ModelConfig, NormKind};
use attnlab_core::lowering::Lowering;
use attnlab_core::model::tensor_specs;
use attnlab_core::weights::{Tensor as CoreTensor, Weights};
use attnlab_core::Model;
use candle_core::{DType, Device, Tensor, Var, D};
use std::collections::BTreeMap;
#[cfg(not(target_arch = "wasm32"))]
use std::path::Path;

/// A model whose every tensor is a trainable candle `Var` (CPU, f32; f64 for the reference).
#[derive(Debug)]
pub struct TrainModel {
    cfg: ModelConfig,
    /// Tensor names in the canonical order of `tensor_specs`.
    names: Vec<String>,
    vars: BTreeMap<String, Var>,
    /// Each layer's lowered form, built from the initial weights: `attn::forward` reads its structure,
    /// constants and tensor names (the learned values themselves come from `vars`).
    lowerings: Vec<Lowering>,
    device: Device,
    /// candle's composites instead of the fused ops of `fused` and `scan` (the reference the fused
    /// ops are tested and benchmarked against).
    library_ops: bool,
    /// The parameters' and constants' precision: f32, or f64 for [`TrainModel::in_f64`].
    dtype: DType,
}

impl TrainModel {
    /// Build from a config and a core weight set (checked against `tensor_specs`).
    pub fn from_weights(cfg: ModelConfig, weights: &Weights) -> Result<TrainModel> {
        TrainModel::from_core(&Model::new(cfg, weights.clone())?)
    }

    /// Copy the weights of a core model (parity tests use exactly the same numbers), and take each
    /// layer's lowering from it: the one inference runs and the GPU trainer uploads.
    pub fn from_core(model: &Model) -> Result<TrainModel> {
        let cfg = model.config().clone();
        let device = Device::Cpu;
        let mut vars = BTreeMap::new();
        let mut names = Vec::new();
        for s in tensor_specs(&cfg) {
            let data = model.weights().tensor(&s.name)?.data.to_f32().into_owned();
            let t = Tensor::from_vec(data, s.shape.as_slice(), &device)?;
            vars.insert(s.name.clone(), Var::from_tensor(&t)?);
            names.push(s.name);
        }
        let lowerings = model.lowerings().cloned().collect();
        Ok(TrainModel { cfg, names, vars, lowerings, device, library_ops: false, dtype: DType::F32 })
    }

    /// Seeded random initialisation, identical to `attnlab init` (`Model::random`).
    pub fn random(cfg: ModelConfig, seed: u64) -> Result<TrainModel> {
        TrainModel::from_core(&Model::random(cfg, seed)?)
    }

    #[cfg(not(target_arch = "wasm32"))]
    /// Load a model folder (`config.json` + `model.safetensors`) with the core's validation.
    pub fn load_dir(dir: &Path) -> Result<TrainModel> {
        TrainModel::from_core(&Model::load_dir(dir)?)
    }

    /// The same model computing its attention softmax, loss, RMSNorms and log-sigmoid gates with
    /// candle's composite ops instead of the fused ones (same values up to rounding; slower).
    pub fn with_library_ops(mut self) -> TrainModel {
        self.library_ops = true;
        self
    }

    /// The same model computed in f64: every parameter and every operation, with candle's composite
    /// ops (the fused ones are f32). Constants keep the values the core defines (its f32 tables are
    /// the same numbers in f64). The reference the f32 paths' gradients are measured against; not
    /// for training (the optimizer keeps f32 moments).
    pub fn in_f64(mut self) -> Result<TrainModel> {
        for var in self.vars.values_mut() {
            *var = Var::from_tensor(&var.as_tensor().to_dtype(DType::F64)?)?;
        }
        self.dtype = DType::F64;
        Ok(self.with_library_ops())
    }

    /// Where the model's tensors live and their precision.
    pub(crate) fn place(&self) -> Place<'_> {
        Place { dev: &self.device, dtype: self.dtype }
    }

    /// Whether [`TrainModel::with_library_ops`] was asked for.
    pub fn library_ops(&self) -> bool {
        self.library_ops
    }

    /// The model's config.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// The device (always the CPU).
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `(name, var)` pairs in the canonical tensor order.
    pub fn named_vars(&self) -> Vec<(&str, &Var)> {
        self.names.iter().filter_map(|n| self.vars.get(n).map(|v| (n.as_str(), v))).collect()
    }

    /// Number of scalar parameters.
    pub fn num_params(&self) -> usize {
        self.vars.values().map(|v| v.elem_count()).sum()
    }

    /// The current values as a core weight set.
    pub fn to_weights(&self) -> Result<Weights> {
        let mut tensors = BTreeMap::new();
        for (name, var) in self.named_vars() {
            let data = var.as_tensor().flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?;
            tensors.insert(name.to_string(), CoreTensor::f32(var.dims().to_vec(), data));
        }
        Ok(Weights { tensors })
    }

    /// The current values as a validated core model.
    pub fn to_core(&self) -> Result<Model> {
        Ok(Model::new(self.cfg.clone(), self.to_weights()?)?)
    }

    #[cfg(not(target_arch = "wasm32"))]
    /// Write `config.json` and `model.safetensors` through the core (metadata `{"format":"attnlab"}`).
    pub fn save_dir(&self, dir: &Path) -> Result<()> {
        Ok(self.to_core()?.save_dir(dir)?)
    }

    /// Overwrite every parameter with the values of `weights` (same names and shapes).
    pub fn set_weights(&self, weights: &Weights) -> Result<()> {
        weights.check(&tensor_specs(&self.cfg))?;
        for (name, var) in self.named_vars() {
            let values = weights.tensor(name)?.data.to_f32().into_owned();
            let t = Tensor::from_vec(values, var.dims(), &self.device)?.to_dtype(self.dtype)?;
            var.set(&t)?;
        }
        Ok(())
    }

    /// The lowered form of layer `i`.
    pub(crate) fn lowering(&self, i: usize) -> Result<&Lowering> {
        self.lowerings.get(i).ok_or_else(|| TrainError::option("layer", format!("no layer {i}")))
    }

    /// The trainable variable `name`.
    #[cfg_attr(not(feature = "gpu"), allow(dead_code))]
    pub(crate) fn var(&self, name: &str) -> Result<&Var> {
        self.vars
            .get(name)
            .ok_or_else(|| TrainError::Core(attnlab_core::Error::MissingTensor(name.to_string())))
    }

    /// The tensor `name` (a bug if absent: names come from `tensor_specs`).
    pub(crate) fn w(&self, name: &str) -> Result<&Tensor> {
        self.vars
            .get(name)
            .map(|v| v.as_tensor())
            .ok_or_else(|| TrainError::Core(attnlab_core::Error::MissingTensor(name.to_string())))
    }

    /// Logits `[B, T, V]` for token ids `[B, T]` (u32), all positions from 0.
    pub fn forward(&self, tokens: &Tensor) -> Result<Tensor> {
        let (b, t) = tokens.dims2()?;
        let cfg = &self.cfg;
        let d = cfg.d_model;
        if t > cfg.max_context {
            return Err(TrainError::option(
                "seq-len",
                format!("{t} exceeds the model's max_context {}", cfg.max_context),
            ));
        }
        let emb = self.w("tok_emb.weight")?;
        let mut x = emb.index_select(&tokens.flatten_all()?, 0)?.reshape((b, t, d))?;
        if cfg.scale_embeddings {
            // Vaswani §3.4: token rows × √d_model; the tied head below reads the unscaled table.
            x = (x * cfg.embedding_scale() as f64)?;
        }
        match cfg.absolute_position {
            AbsolutePosition::Sinusoidal => {
                let mut pe = vec![0.0f32; t * d];
                for (p, row) in pe.chunks_exact_mut(d).enumerate() {
                    attnlab_core::ops::sinusoidal_embedding(p, d, row);
                }
                x = x.broadcast_add(&const_f64(
                    pe.into_iter().map(f64::from).collect(),
                    &[t, d],
                    self.place(),
                )?)?;
            }
            AbsolutePosition::Learned => x = x.broadcast_add(&self.w("pos_emb.weight")?.narrow(0, 0, t)?)?,
            AbsolutePosition::None => {}
        }
        if cfg.embedding_norm {
            x = self.norm(&x, "emb_norm")?;
        }
        for i in 0..cfg.n_layers {
            let a = attn::forward(self, i, &self.norm(&x, &format!("layers.{i}.attn_norm"))?)?;
            // Parallel residual (GPT-NeoX): the FFN reads the block input, not x + attn.
            let mid = if cfg.parallel_residual { x.clone() } else { (&x + &a)? };
            let f = self.ffn(i, &self.norm(&mid, &format!("layers.{i}.ffn_norm"))?)?;
            x = if cfg.parallel_residual { ((x + a)? + f)? } else { (mid + f)? };
        }
        let h = self.norm(&x, "final_norm")?;
        let head = if cfg.tie_embeddings { self.w("tok_emb.weight")? } else { self.w("lm_head.weight")? };
        linear(&h, head)
    }

    /// Logits `[T × V]` (row-major) of one token sequence: [`TrainModel::forward`] on a batch of one,
    /// the peer of the core's `prefill_all` (used by `attnlab bench` for the core ÷ candle ratio).
    pub fn forward_ids(&self, tokens: &[u32]) -> Result<Vec<f32>> {
        let t = Tensor::from_vec(tokens.to_vec(), (1, tokens.len()), &self.device)?;
        Ok(self.forward(&t)?.flatten_all()?.to_dtype(DType::F32)?.to_vec1::<f32>()?)
    }

    /// Mean next-token cross-entropy of `tokens[:, :-1] → tokens[:, 1:]` for a `[B, T+1]` batch.
    pub fn loss(&self, tokens: &Tensor) -> Result<Tensor> {
        let (b, t1) = tokens.dims2()?;
        if t1 < 2 {
            return Err(TrainError::option("seq-len", "a batch needs at least 2 tokens per row"));
        }
        let inp = tokens.narrow(1, 0, t1 - 1)?;
        let tgt = tokens.narrow(1, 1, t1 - 1)?.flatten_all()?;
        let logits = self.forward(&inp)?.reshape((b * (t1 - 1), self.cfg.vocab_size))?;
        if self.library_ops {
            return Ok(candle_nn::loss::cross_entropy(&logits, &tgt)?);
        }
        Ok(crate::fused::cross_entropy(&logits, &tgt)?)
    }

    /// RMSNorm over the last dim with the gain `g`: the fused op, or with `library_ops` candle's
    /// composite (the residual norms and the linear family's grouped output norm).
    pub(crate) fn rms_norm(&self, x: &Tensor, g: &Tensor, eps: f32) -> Result<Tensor> {
        if !self.library_ops {
            return Ok(crate::fused::rms_norm(x, g, eps)?);
        }
        let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
        Ok(x.broadcast_div(&(ms + f64::from(eps))?.sqrt()?)?.broadcast_mul(g)?)
    }

    /// Residual-stream norm `name` (RMSNorm or LayerNorm with `norm.eps`) over the last dim.
    fn norm(&self, x: &Tensor, name: &str) -> Result<Tensor> {
        let eps = self.cfg.norm.eps as f32 as f64;
        let w = self.w(&format!("{name}.weight"))?;
        match self.cfg.norm.kind {
            NormKind::Rmsnorm => self.rms_norm(x, w, eps as f32),
            NormKind::Layernorm => {
                let mean = x.mean_keepdim(D::Minus1)?;
                let xc = x.broadcast_sub(&mean)?;
                let var = xc.sqr()?.mean_keepdim(D::Minus1)?;
                let b = self.w(&format!("{name}.bias"))?;
                Ok(xc.broadcast_div(&(var + eps)?.sqrt()?)?.broadcast_mul(w)?.broadcast_add(b)?)
            }
        }
    }

    fn ffn(&self, i: usize, x: &Tensor) -> Result<Tensor> {
        let bias = self.cfg.biases.ffn;
        let lin = |x: &Tensor, n: &str| {
            let b = format!("layers.{i}.ffn.b_{n}");
            self.linear(x, &format!("layers.{i}.ffn.w_{n}"), bias.then_some(b.as_str()))
        };
        let up = lin(x, "up")?;
        let hidden = match self.cfg.ffn.kind {
            FfnKind::Swiglu => (lin(x, "gate")?.silu()? * up)?,
            FfnKind::Gelu => up.gelu()?,
            FfnKind::GeluExact => up.gelu_erf()?,
        };
        lin(&hidden, "down")
    }

    /// `x·Wᵀ (+ b)` with the parameters named `w` and, if given, `b`.
    pub(crate) fn linear(&self, x: &Tensor, w: &str, b: Option<&str>) -> Result<Tensor> {
        let y = linear(x, self.w(w)?)?;
        Ok(match b {
            Some(b) => y.broadcast_add(self.w(b)?)?,
            None => y,
        })
    }
}

/// `y = x·Wᵀ` for `x: [..., in]` and `W: [out, in]`.
pub(crate) fn linear(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let dims = x.dims().to_vec();
    let (inp, rows) = match dims.split_last() {
        Some((&inp, lead)) => (inp, lead.iter().product::<usize>()),
        None => return Err(TrainError::Candle(candle_core::Error::Msg("linear on a scalar".into()))),
    };
    let out = w.dim(0)?;
    let y = x.reshape((rows, inp))?.matmul(&w.t()?)?;
    let mut shape = dims;
    if let Some(last) = shape.last_mut() {
        *last = out;
    }
    Ok(y.reshape(shape)?)
}

/// Where a model's tensors live and in which precision: the CPU, in f32 (training) or f64 (the
/// reference, [`TrainModel::in_f64`]).
#[derive(Clone, Copy)]
pub(crate) struct Place<'a> {
    pub dev: &'a Device,
    pub dtype: DType,
}

impl<'a> Place<'a> {
    /// The place of tensor `x`.
    pub fn of(x: &'a Tensor) -> Place<'a> {
        Place { dev: x.device(), dtype: x.dtype() }
    }
}

/// A constant from f64 values at `at`: kept in f64, rounded once in f32.
pub(crate) fn const_f64(values: Vec<f64>, shape: &[usize], at: Place) -> Result<Tensor> {
    Ok(Tensor::from_vec(values, shape, at.dev)?.to_dtype(at.dtype)?)
}
