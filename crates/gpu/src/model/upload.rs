//! Gathering a core [`Model`]'s weights and prepared data on the host, checking every buffer
//! against the adapter's limits, then uploading.

use super::fused::{self, Fused};
use super::layers::{Kind, Layer, Norm};
use super::{plan, storage};
use crate::context::GpuContext;
use crate::error::{GpuError, Result};
use crate::params::{NormOp, MAX_DK};
use attnlab_core::config::{AbsolutePosition, NormKind};
use attnlab_core::{ops, Error as CoreError, Model};

/// A model's arrays on the host, before upload.
pub(super) struct HostModel {
    emb: Vec<f32>,
    /// `None`: tied to the embedding.
    head: Option<Vec<f32>>,
    pub final_norm: Norm<Vec<f32>>,
    /// Norm of the embeddings (`embedding_norm`).
    pub emb_norm: Option<Norm<Vec<f32>>>,
    /// Absolute position table `[max_context, d]`, sinusoidal or learned (empty without).
    pub pe: Vec<f32>,
    pub layers: Vec<Layer<Vec<f32>>>,
    /// The fused decode's data, or why the model decodes op by op.
    fused: std::result::Result<Fused<Vec<f32>>, String>,
}

/// The uploaded arrays of a model.
pub(super) struct Uploaded {
    pub emb: wgpu::Buffer,
    pub head: wgpu::Buffer,
    pub pe: wgpu::Buffer,
    pub final_norm: Norm<wgpu::Buffer>,
    pub emb_norm: Option<Norm<wgpu::Buffer>>,
    pub layers: Vec<Layer<wgpu::Buffer>>,
    pub fused: std::result::Result<Fused<wgpu::Buffer>, String>,
    /// Bound where a kernel's optional input is absent.
    pub dummy: wgpu::Buffer,
}

fn norm(model: &Model, name: &str) -> Result<Norm<Vec<f32>>> {
    let cfg = model.config();
    let w = model.weights();
    let g = w.get(&format!("{name}.weight"))?.to_vec();
    let b = match cfg.norm.kind {
        NormKind::Layernorm => Some(w.get(&format!("{name}.bias"))?.to_vec()),
        NormKind::Rmsnorm => None,
    };
    let op = if b.is_some() { NormOp::Layer } else { NormOp::Rms };
    Ok(Norm { op, eps: cfg.norm.eps as f32, w: g, b })
}

fn layer(model: &Model, i: usize) -> Result<Layer<Vec<f32>>> {
    let plan::Attention { wqkv, wo, kind } = plan::attention(model, i)?;
    let (gate, up, down) = model
        .ffn_projections(i)
        .ok_or_else(|| CoreError::arg("layer", format!("layer {i} is missing from the model")))?;
    Ok(Layer {
        attn_norm: norm(model, &format!("layers.{i}.attn_norm"))?,
        ffn_norm: norm(model, &format!("layers.{i}.ffn_norm"))?,
        wqkv,
        wo,
        ffn_gate: gate.map(plan::proj),
        ffn_up: plan::proj(up),
        ffn_down: plan::proj(down),
        kind,
    })
}

/// The absolute position table added to the embeddings: sinusoidal (built in f64 like the core's),
/// learned (`pos_emb.weight`), or empty.
fn position_table(model: &Model) -> Result<Vec<f32>> {
    let cfg = model.config();
    let d = cfg.d_model;
    Ok(match cfg.absolute_position {
        AbsolutePosition::None => Vec::new(),
        AbsolutePosition::Learned => model.weights().get("pos_emb.weight")?.to_vec(),
        AbsolutePosition::Sinusoidal => {
            let mut t = vec![0.0f32; cfg.max_context * d];
            for (s, row) in t.chunks_exact_mut(d).enumerate() {
                ops::sinusoidal_embedding(s, d, row);
            }
            t
        }
    })
}

impl HostModel {
    /// Every array the GPU model holds, from `model`.
    pub fn gather(model: &Model) -> Result<HostModel> {
        let cfg = model.config();
        let w = model.weights();
        // Matrices held in F16/BF16 are widened here: the kernels read f32.
        let f32_of = |name: &str| -> Result<Vec<f32>> { Ok(w.tensor(name)?.data.to_f32().into_owned()) };
        let emb = f32_of("tok_emb.weight")?;
        let head = if cfg.tie_embeddings { None } else { Some(f32_of("lm_head.weight")?) };
        let final_norm = norm(model, "final_norm")?;
        let emb_norm = if cfg.embedding_norm { Some(norm(model, "emb_norm")?) } else { None };
        let pe = position_table(model)?;
        let layers = (0..cfg.n_layers).map(|i| layer(model, i)).collect::<Result<_>>()?;
        let mut host = HostModel { emb, head, final_norm, emb_norm, pe, layers, fused: Err(String::new()) };
        host.fused = match fused::unsupported(cfg, &host) {
            Some(why) => Err(why),
            None => Ok(fused::plan(cfg, &host)),
        };
        Ok(host)
    }

    /// Fail with [`GpuError::ModelTooLarge`] (or `Unsupported` for a feature width over the
    /// kernels' registers) before any buffer exists.
    pub fn check(&self, ctx: &GpuContext) -> Result<()> {
        let check = |what: String, n: usize| ctx.check_size(&what, 4 * n as u64);
        check("tok_emb.weight".into(), self.emb.len())?;
        if let Some(hd) = &self.head {
            check("lm_head.weight".into(), hd.len())?;
        }
        check("absolute position table".into(), self.pe.len())?;
        for (i, l) in self.layers.iter().enumerate() {
            for (name, p) in l.projections() {
                check(format!("layers.{i}.{name}"), p.w.len())?;
                check(format!("layers.{i}.{name} bias"), p.b.as_ref().map_or(0, Vec::len))?;
            }
            match &l.kind {
                Kind::Softmax(s) => {
                    check(format!("layers.{i} bias table"), s.aux.len())?;
                    check(format!("layers.{i} rope table"), s.rope.as_ref().map_or(0, Vec::len))?;
                }
                Kind::Linear(ln) => {
                    if ln.dk > MAX_DK {
                        return Err(GpuError::Unsupported(format!(
                            "layer {i}: feature width {} exceeds the kernels' {MAX_DK}",
                            ln.dk
                        )));
                    }
                    check(format!("layers.{i} feature tables"), ln.aux.len())?;
                }
            }
        }
        if let Ok(f) = &self.fused {
            for (i, part) in f.layers.iter().enumerate() {
                check(format!("layers.{i} decode vectors"), part.vecs.len())?;
            }
            check("decode activations".into(), f.fa_len)?;
        }
        Ok(())
    }

    /// Create every buffer (call inside the context's error scopes).
    pub fn upload(&self, dev: &wgpu::Device) -> Uploaded {
        let mut buf = |label: &'static str, data: &Vec<f32>| storage(dev, label, data);
        let emb = buf("tok_emb", &self.emb);
        let head = match &self.head {
            Some(hd) => buf("lm_head", hd),
            None => emb.clone(),
        };
        let layers = self.layers.iter().map(|l| l.map(&mut buf)).collect();
        Uploaded {
            emb,
            head,
            pe: buf("pe", &self.pe),
            final_norm: self.final_norm.map("final_norm", &mut buf),
            emb_norm: self.emb_norm.as_ref().map(|n| n.map("emb_norm", &mut buf)),
            layers,
            fused: self.fused.as_ref().map(|f| f.map(&mut buf)).map_err(Clone::clone),
            dummy: storage(dev, "dummy", &[]),
        }
    }
}
