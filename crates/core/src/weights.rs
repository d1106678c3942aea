//! `model.safetensors`: loading with full validation, saving, and seeded random initialisation.
//!
//! Which tensors a config needs (names, shapes, initialisers) is decided by `model::tensor_specs`;
//! this module only moves bytes and enforces the contract: every tensor present, nothing extra,
//! exact shapes, finite values. Tensors are stored as F32, F16 or BF16 (little-endian) and always
//! computed in f32: the shipped models are F16 on disk (half the download), widened on load.

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

/// How tensors are stored in `model.safetensors` (computation is always f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StorageDtype {
    /// 4 bytes per value, exact.
    #[default]
    F32,
    /// IEEE half: 2 bytes, 11-bit significand (relative rounding ≤ 2⁻¹¹), range ±65504.
    F16,
    /// bfloat16: 2 bytes, 8-bit significand, the f32 range.
    Bf16,
}

impl StorageDtype {
    /// Parse `f32`, `f16` or `bf16`.
    pub fn parse(s: &str) -> Result<StorageDtype> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Ok(StorageDtype::F32),
            "f16" => Ok(StorageDtype::F16),
            "bf16" => Ok(StorageDtype::Bf16),
            other => Err(Error::arg("dtype", format!("`{other}` is not one of f32, f16, bf16"))),
        }
    }

    fn safetensors(self) -> Dtype {
        match self {
            StorageDtype::F32 => Dtype::F32,
            StorageDtype::F16 => Dtype::F16,
            StorageDtype::Bf16 => Dtype::BF16,
        }
    }

    /// Little-endian bytes of `data` in this dtype, or the index of the first finite value the
    /// dtype cannot hold (it would become ±inf, which the loader refuses).
    fn encode(self, data: &[f32]) -> std::result::Result<Vec<u8>, usize> {
        fn narrow<H: Copy>(
            data: &[f32],
            conv: impl Fn(f32) -> H,
            is_inf: impl Fn(H) -> bool,
            le: impl Fn(H) -> [u8; 2],
        ) -> std::result::Result<Vec<u8>, usize> {
            let mut out = Vec::with_capacity(data.len() * 2);
            for (i, &v) in data.iter().enumerate() {
                let h = conv(v);
                if v.is_finite() && is_inf(h) {
                    return Err(i);
                }
                out.extend(le(h));
            }
            Ok(out)
        }
        match self {
            StorageDtype::F32 => Ok(data.iter().flat_map(|v| v.to_le_bytes()).collect()),
            StorageDtype::F16 => narrow(data, half::f16::from_f32, |h| h.is_infinite(), |h| h.to_le_bytes()),
            StorageDtype::Bf16 => {
                narrow(data, half::bf16::from_f32, |h| h.is_infinite(), |h| h.to_le_bytes())
            }
        }
    }
}

/// The storage dtype of a safetensors dtype, if the format allows it.
pub(crate) fn storage_dtype(dtype: Dtype) -> Option<StorageDtype> {
    match dtype {
        Dtype::F32 => Some(StorageDtype::F32),
        Dtype::F16 => Some(StorageDtype::F16),
        Dtype::BF16 => Some(StorageDtype::Bf16),
        _ => None,
    }
}

/// Widen stored bytes to f32, or `None` for a dtype the format does not allow.
pub(crate) fn decode(dtype: Dtype, raw: &[u8]) -> Option<(usize, Vec<f32>)> {
    match dtype {
        Dtype::F32 => {
            Some((4, raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()))
        }
        Dtype::F16 => {
            Some((2, raw.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32()).collect()))
        }
        Dtype::BF16 => {
            Some((2, raw.chunks_exact(2).map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32()).collect()))
        }
        _ => None,
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
            let raw = view.data();
            let Some((width, data)) = decode(view.dtype(), raw) else {
                return Err(Error::TensorDtype {
                    name: spec.name.clone(),
                    found: format!("{:?}", view.dtype()),
                });
            };
            if view.shape() != spec.shape.as_slice() {
                return Err(Error::TensorShape {
                    name: spec.name.clone(),
                    expected: spec.shape.clone(),
                    found: view.shape().to_vec(),
                });
            }
            if raw.len() != spec.numel() * width {
                return Err(Error::SafetensorsParse(format!(
                    "tensor `{}` holds {} bytes, expected {}",
                    spec.name,
                    raw.len(),
                    spec.numel() * width
                )));
            }
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
        self.to_safetensors_as(StorageDtype::F32, metadata)
    }

    /// Serialize with every tensor stored as `dtype`. A value that does not fit the dtype (|v| >
    /// 65504 for F16) is an error naming the tensor, never a silent ±inf.
    pub fn to_safetensors_as(
        &self,
        dtype: StorageDtype,
        metadata: Option<std::collections::HashMap<String, String>>,
    ) -> Result<Vec<u8>> {
        let mut bytes = Vec::with_capacity(self.tensors.len());
        for (name, t) in &self.tensors {
            let raw =
                dtype.encode(&t.data).map_err(|index| Error::NonFinite { name: name.clone(), index })?;
            bytes.push((name.clone(), t.shape.clone(), raw));
        }
        let mut views = Vec::with_capacity(bytes.len());
        for (name, shape, data) in &bytes {
            let view = TensorView::new(dtype.safetensors(), shape.clone(), data)
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
