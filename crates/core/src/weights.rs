//! `model.safetensors`: loading with full validation, saving, and seeded random initialisation.
//!
//! Which tensors a config needs (names, shapes, initialisers) is decided by `model::tensor_specs`;
//! this module only moves bytes and enforces the contract: every tensor present, nothing extra,
//! F32 little-endian, exact shapes, finite values.

use crate::error::{Error, Result};
use crate::sampling::Rng;
use safetensors::{tensor::TensorView, Dtype, SafeTensors};
use std::collections::BTreeMap;

/// How `attnlab init` fills a tensor.
#[derive(Debug, Clone, PartialEq)]
pub enum Init {
    /// N(0, std²).
    Normal(f32),
    /// U(lo, hi).
    Uniform(f32, f32),
    /// Every element equal.
    Const(f32),
    /// Explicit values (LRPE angles, deterministic vectors).
    Values(Vec<f32>),
}

/// One tensor the config requires.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorSpec {
    pub name: String,
    pub shape: Vec<usize>,
    pub init: Init,
}

impl TensorSpec {
    /// Build a spec.
    pub fn new(name: impl Into<String>, shape: &[usize], init: Init) -> TensorSpec {
        TensorSpec { name: name.into(), shape: shape.to_vec(), init }
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// A loaded f32 tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

/// All tensors of a model, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Weights {
    pub tensors: BTreeMap<String, Tensor>,
}

impl Weights {
    /// Parse safetensors bytes and check them against `specs`.
    pub fn from_safetensors(bytes: &[u8], specs: &[TensorSpec]) -> Result<Weights> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| Error::SafetensorsParse(e.to_string()))?;
        let mut present: BTreeMap<String, TensorView<'_>> = st.tensors().into_iter().collect();
        let mut tensors = BTreeMap::new();
        for spec in specs {
            let view = present.remove(&spec.name).ok_or_else(|| Error::MissingTensor(spec.name.clone()))?;
            if view.dtype() != Dtype::F32 {
                return Err(Error::TensorDtype {
                    name: spec.name.clone(),
                    found: format!("{:?}", view.dtype()),
                });
            }
            if view.shape() != spec.shape.as_slice() {
                return Err(Error::TensorShape {
                    name: spec.name.clone(),
                    expected: spec.shape.clone(),
                    found: view.shape().to_vec(),
                });
            }
            let raw = view.data();
            if raw.len() != spec.numel() * 4 {
                return Err(Error::SafetensorsParse(format!(
                    "tensor `{}` holds {} bytes, expected {}",
                    spec.name,
                    raw.len(),
                    spec.numel() * 4
                )));
            }
            let data: Vec<f32> =
                raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            if let Some(index) = data.iter().position(|v| !v.is_finite()) {
                return Err(Error::NonFinite { name: spec.name.clone(), index });
            }
            tensors.insert(spec.name.clone(), Tensor { shape: spec.shape.clone(), data });
        }
        if let Some(extra) = present.keys().next() {
            return Err(Error::ExtraTensor(extra.clone()));
        }
        Ok(Weights { tensors })
    }

    /// Check an in-memory weight set against `specs` (same rules as loading).
    pub fn check(&self, specs: &[TensorSpec]) -> Result<()> {
        for spec in specs {
            let t = self.tensors.get(&spec.name).ok_or_else(|| Error::MissingTensor(spec.name.clone()))?;
            if t.shape != spec.shape || t.data.len() != spec.numel() {
                return Err(Error::TensorShape {
                    name: spec.name.clone(),
                    expected: spec.shape.clone(),
                    found: t.shape.clone(),
                });
            }
            if let Some(index) = t.data.iter().position(|v| !v.is_finite()) {
                return Err(Error::NonFinite { name: spec.name.clone(), index });
            }
        }
        if let Some(extra) = self.tensors.keys().find(|k| !specs.iter().any(|s| &s.name == *k)) {
            return Err(Error::ExtraTensor(extra.clone()));
        }
        Ok(())
    }

    /// Serialize to safetensors bytes (F32, little-endian), with `metadata` in the header.
    pub fn to_safetensors(
        &self,
        metadata: Option<std::collections::HashMap<String, String>>,
    ) -> Result<Vec<u8>> {
        let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .tensors
            .iter()
            .map(|(n, t)| (n.clone(), t.shape.clone(), t.data.iter().flat_map(|v| v.to_le_bytes()).collect()))
            .collect();
        let mut views = Vec::with_capacity(bytes.len());
        for (name, shape, data) in &bytes {
            let view = TensorView::new(Dtype::F32, shape.clone(), data)
                .map_err(|e| Error::SafetensorsParse(format!("tensor `{name}`: {e}")))?;
            views.push((name.clone(), view));
        }
        safetensors::serialize(views, &metadata).map_err(|e| Error::SafetensorsParse(e.to_string()))
    }

    /// Seeded random weights following each spec's initialiser.
    pub fn random(specs: &[TensorSpec], seed: u64) -> Weights {
        let mut rng = Rng::new(seed);
        let mut tensors = BTreeMap::new();
        for spec in specs {
            let n = spec.numel();
            let data: Vec<f32> = match &spec.init {
                Init::Normal(std) => (0..n).map(|_| std * standard_normal(&mut rng)).collect(),
                Init::Uniform(lo, hi) => (0..n).map(|_| lo + (hi - lo) * rng.next_f64() as f32).collect(),
                Init::Const(c) => vec![*c; n],
                Init::Values(v) => v.clone(),
            };
            tensors.insert(spec.name.clone(), Tensor { shape: spec.shape.clone(), data });
        }
        Weights { tensors }
    }

    /// Borrow a tensor's data (the loader guarantees presence for every spec'd name).
    pub fn get(&self, name: &str) -> Result<&[f32]> {
        self.tensors
            .get(name)
            .map(|t| t.data.as_slice())
            .ok_or_else(|| Error::MissingTensor(name.to_string()))
    }

    /// Total number of parameters.
    pub fn num_params(&self) -> usize {
        self.tensors.values().map(|t| t.data.len()).sum()
    }
}

/// Box–Muller standard normal from the project RNG.
fn standard_normal(rng: &mut Rng) -> f32 {
    let u1 = rng.next_f64().max(1e-300);
    let u2 = rng.next_f64();
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}
