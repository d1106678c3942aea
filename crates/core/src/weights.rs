//! `model.safetensors`: loading with full validation, saving, and seeded random initialisation.
//!
//! Which tensors a config needs (names, shapes, initialisers) is decided by `model::tensor_specs`;
//! this module only moves bytes and enforces the contract: every tensor present, nothing extra,
//! exact shapes, finite values. Tensors are stored as F32, F16 or BF16 (little-endian) and always
//! computed in f32. In memory a model's matrices ([`TensorSpec::matrix`]: token embedding, output
//! head, attention and FFN projections) keep the dtype of their file, so an F16 model takes 2 bytes
//! per parameter, and are widened to f32 where they are used: inside the matrix products
//! ([`TensorData::stored`], [`crate::kernels::matmul`]; F16C on x86-64, SIMD128 in wasm) and row by
//! row elsewhere ([`TensorData::row`]). Every other tensor (norms, biases, position and variant
//! parameters) is widened to f32 on load. The finiteness checked here is what lets the kernels'
//! f16 loads skip infinities and NaNs.

use crate::error::{Error, Result};
use crate::kernels::{self, Stored};
use crate::sampling::Rng;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use safetensors::{tensor::TensorView, Dtype, SafeTensors};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

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
    /// A matrix the model multiplies by, kept in its file's dtype in memory; `false`: widened to
    /// f32 when loaded.
    pub matrix: bool,
}

impl TensorSpec {
    /// Build a spec (widened to f32 in memory).
    pub fn new(name: impl Into<String>, shape: &[usize], init: Init) -> TensorSpec {
        TensorSpec { name: name.into(), shape: shape.to_vec(), init, matrix: false }
    }
    /// Build the spec of a matrix that keeps its file's dtype in memory.
    pub fn new_matrix(name: impl Into<String>, shape: &[usize], init: Init) -> TensorSpec {
        TensorSpec { matrix: true, ..TensorSpec::new(name, shape, init) }
    }
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// How tensors are stored, in `model.safetensors` and in memory (computation is always f32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
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

    /// `f32`, `f16` or `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            StorageDtype::F32 => "f32",
            StorageDtype::F16 => "f16",
            StorageDtype::Bf16 => "bf16",
        }
    }

    /// Bytes per value.
    pub fn width(self) -> usize {
        match self {
            StorageDtype::F32 => 4,
            StorageDtype::F16 | StorageDtype::Bf16 => 2,
        }
    }

    /// The storage dtype of a safetensors dtype, if the format allows it.
    pub fn of(dtype: Dtype) -> Option<StorageDtype> {
        match dtype {
            Dtype::F32 => Some(StorageDtype::F32),
            Dtype::F16 => Some(StorageDtype::F16),
            Dtype::BF16 => Some(StorageDtype::Bf16),
            _ => None,
        }
    }

    fn safetensors(self) -> Dtype {
        match self {
            StorageDtype::F32 => Dtype::F32,
            StorageDtype::F16 => Dtype::F16,
            StorageDtype::Bf16 => Dtype::BF16,
        }
    }
}

/// A tensor's values in the dtype they are stored in. Clones share the buffer: a model's
/// `Linear`s and its [`Weights`] hold the same matrices, never copies.
#[derive(Clone, PartialEq)]
pub enum TensorData {
    F32(Arc<Vec<f32>>),
    F16(Arc<Vec<f16>>),
    Bf16(Arc<Vec<bf16>>),
}

impl std::fmt::Debug for TensorData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", self.dtype().name(), self.len())
    }
}

impl From<Vec<f32>> for TensorData {
    fn from(v: Vec<f32>) -> TensorData {
        TensorData::F32(Arc::new(v))
    }
}

impl TensorData {
    /// The dtype the values are held in.
    pub fn dtype(&self) -> StorageDtype {
        match self {
            TensorData::F32(_) => StorageDtype::F32,
            TensorData::F16(_) => StorageDtype::F16,
            TensorData::Bf16(_) => StorageDtype::Bf16,
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::F16(v) => v.len(),
            TensorData::Bf16(v) => v.len(),
        }
    }

    /// True for a tensor without values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the values take in memory.
    pub fn bytes(&self) -> usize {
        self.len() * self.dtype().width()
    }

    /// Whether `self` and `other` are the same buffer (not merely equal values).
    pub fn same_buffer(&self, other: &TensorData) -> bool {
        match (self, other) {
            (TensorData::F32(a), TensorData::F32(b)) => Arc::ptr_eq(a, b),
            (TensorData::F16(a), TensorData::F16(b)) => Arc::ptr_eq(a, b),
            (TensorData::Bf16(a), TensorData::Bf16(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The values, if they are held as f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match self {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The values as the kernels read them: f32, or the bits of the half values.
    pub fn stored(&self) -> Stored<'_> {
        match self {
            TensorData::F32(v) => Stored::F32(v),
            TensorData::F16(v) => Stored::F16(v.reinterpret_cast()),
            TensorData::Bf16(v) => Stored::Bf16(v.reinterpret_cast()),
        }
    }

    /// Values `start .. start + scratch.len()` as f32: the stored slice itself when the tensor is
    /// f32, else widened into `scratch` (exactly: every f16 and bf16 value is an f32 value;
    /// [`kernels::widen`]: F16C on x86-64, SIMD128 in wasm).
    pub fn row<'a>(&'a self, start: usize, scratch: &'a mut [f32]) -> &'a [f32] {
        let end = start + scratch.len();
        match self.stored() {
            Stored::F32(v) => &v[start..end],
            Stored::F16(v) => {
                kernels::widen(Stored::F16(&v[start..end]), scratch);
                scratch
            }
            Stored::Bf16(v) => {
                kernels::widen(Stored::Bf16(&v[start..end]), scratch);
                scratch
            }
        }
    }

    /// `y[r] = dot(row r, x)` for every row of `width = x.len()` values: a matvec with one input
    /// row (a decode step), the rows read in their stored dtype ([`kernels::matmul`]).
    pub fn matvec(&self, x: &[f32], y: &mut [f32]) {
        kernels::matmul(self.stored(), x.len(), x, y)
    }

    /// Every value as f32 (borrowed when held as f32).
    pub fn to_f32(&self) -> Cow<'_, [f32]> {
        match self {
            TensorData::F32(v) => Cow::Borrowed(v.as_slice()),
            _ => {
                let mut out = vec![0.0; self.len()];
                self.row(0, &mut out);
                Cow::Owned(out)
            }
        }
    }

    /// The values as an f32 vector that may be edited; a half tensor becomes f32 (a shared buffer is
    /// copied first, so the other holders keep theirs).
    pub fn f32_mut(&mut self) -> &mut Vec<f32> {
        if !matches!(self, TensorData::F32(_)) {
            *self = TensorData::from(self.to_f32().into_owned());
        }
        match self {
            TensorData::F32(v) => Arc::make_mut(v),
            _ => unreachable!("widened to f32 above"),
        }
    }

    /// `values` held as `dtype` when every one of them converts exactly (values read from a file of
    /// that dtype and only moved about since, as the Hugging Face importer does), else as f32.
    pub fn lossless(values: Vec<f32>, dtype: StorageDtype) -> TensorData {
        match dtype {
            StorageDtype::F16 if values.iter().all(|&v| f16::from_f32(v).to_f32() == v) => {
                TensorData::F16(Arc::new(values.iter().map(|&v| f16::from_f32(v)).collect()))
            }
            StorageDtype::Bf16 if values.iter().all(|&v| bf16::from_f32(v).to_f32() == v) => {
                TensorData::Bf16(Arc::new(values.iter().map(|&v| bf16::from_f32(v)).collect()))
            }
            _ => TensorData::from(values),
        }
    }

    /// The little-endian values of a safetensors tensor, kept in their dtype; `None` for a dtype the
    /// format does not allow.
    pub(crate) fn from_le_bytes(dtype: Dtype, raw: &[u8]) -> Option<TensorData> {
        let pairs = || raw.chunks_exact(2).map(|b| [b[0], b[1]]);
        Some(match StorageDtype::of(dtype)? {
            StorageDtype::F32 => TensorData::from(
                raw.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect::<Vec<_>>(),
            ),
            StorageDtype::F16 => TensorData::F16(Arc::new(pairs().map(f16::from_le_bytes).collect())),
            StorageDtype::Bf16 => TensorData::Bf16(Arc::new(pairs().map(bf16::from_le_bytes).collect())),
        })
    }

    /// Index of the first NaN or ±inf.
    fn first_non_finite(&self) -> Option<usize> {
        match self {
            TensorData::F32(v) => v.iter().position(|x| !x.is_finite()),
            TensorData::F16(v) => v.iter().position(|x| !x.is_finite()),
            TensorData::Bf16(v) => v.iter().position(|x| !x.is_finite()),
        }
    }

    /// Little-endian bytes in `dtype`, or the index of the first finite value the dtype cannot hold
    /// (it would become ±inf, which the loader refuses).
    fn to_le_bytes(&self, dtype: StorageDtype) -> std::result::Result<Vec<u8>, usize> {
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
        let data = self.to_f32();
        match dtype {
            StorageDtype::F32 => Ok(data.iter().flat_map(|v| v.to_le_bytes()).collect()),
            StorageDtype::F16 => narrow(&data, f16::from_f32, |h| h.is_infinite(), |h| h.to_le_bytes()),
            StorageDtype::Bf16 => narrow(&data, bf16::from_f32, |h| h.is_infinite(), |h| h.to_le_bytes()),
        }
    }
}

/// A loaded tensor: its shape and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: TensorData,
}

impl Tensor {
    /// A tensor of f32 values.
    pub fn f32(shape: Vec<usize>, values: Vec<f32>) -> Tensor {
        Tensor { shape, data: TensorData::from(values) }
    }
}

/// All tensors of a model, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Weights {
    pub tensors: BTreeMap<String, Tensor>,
}

impl Weights {
    /// Parse safetensors bytes and check them against `specs`. Matrices keep the file's dtype; the
    /// other tensors are widened to f32.
    pub fn from_safetensors(bytes: &[u8], specs: &[TensorSpec]) -> Result<Weights> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| Error::SafetensorsParse(e.to_string()))?;
        let mut present: BTreeMap<String, TensorView<'_>> = st.tensors().into_iter().collect();
        let mut tensors = BTreeMap::new();
        for spec in specs {
            let view = present.remove(&spec.name).ok_or_else(|| Error::MissingTensor(spec.name.clone()))?;
            let raw = view.data();
            let Some(data) = TensorData::from_le_bytes(view.dtype(), raw) else {
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
            let expected = spec.numel() * data.dtype().width();
            if raw.len() != expected {
                return Err(Error::SafetensorsParse(format!(
                    "tensor `{}` holds {} bytes, expected {expected}",
                    spec.name,
                    raw.len()
                )));
            }
            if let Some(index) = data.first_non_finite() {
                return Err(Error::NonFinite { name: spec.name.clone(), index });
            }
            let data = if spec.matrix { data } else { TensorData::from(data.to_f32().into_owned()) };
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
            if let Some(index) = t.data.first_non_finite() {
                return Err(Error::NonFinite { name: spec.name.clone(), index });
            }
        }
        if let Some(extra) = self.tensors.keys().find(|k| !specs.iter().any(|s| &s.name == *k)) {
            return Err(Error::ExtraTensor(extra.clone()));
        }
        Ok(())
    }

    /// Widen every tensor that is not a matrix of `specs` to f32 (a no-op for loaded weights; the
    /// importer keeps every tensor in its checkpoint's dtype until the model is built).
    pub fn widen_non_matrices(&mut self, specs: &[TensorSpec]) {
        for spec in specs.iter().filter(|s| !s.matrix) {
            if let Some(t) = self.tensors.get_mut(&spec.name) {
                if t.data.as_f32().is_none() {
                    t.data = TensorData::from(t.data.to_f32().into_owned());
                }
            }
        }
    }

    /// Widen every half-precision matrix to f32 when all of them together take at most
    /// `max_f32_bytes` as f32 (a buffer shared by two tensors, tied embeddings, is widened once).
    /// Returns whether it did. Where the CPU has no instruction for the widening (wasm, SSE2), a
    /// small model's matrix products run faster on f32 (docs/bench.md, "f32 matrices for small
    /// models"); a large model keeps its halves.
    pub fn widen_small_matrices(&mut self, max_f32_bytes: usize) -> bool {
        let mut halves: Vec<TensorData> = Vec::new();
        for t in self.tensors.values().filter(|t| t.data.as_f32().is_none()) {
            if !halves.iter().any(|h| h.same_buffer(&t.data)) {
                halves.push(t.data.clone());
            }
        }
        let bytes: usize = halves.iter().map(|h| h.len() * 4).sum();
        if halves.is_empty() || bytes > max_f32_bytes {
            return false;
        }
        let widened: Vec<TensorData> =
            halves.iter().map(|h| TensorData::from(h.to_f32().into_owned())).collect();
        for t in self.tensors.values_mut() {
            if let Some(k) = halves.iter().position(|h| h.same_buffer(&t.data)) {
                t.data = widened[k].clone();
            }
        }
        true
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
                t.data.to_le_bytes(dtype).map_err(|index| Error::NonFinite { name: name.clone(), index })?;
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

    /// Seeded random weights following each spec's initialiser (f32).
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
            tensors.insert(spec.name.clone(), Tensor::f32(spec.shape.clone(), data));
        }
        Weights { tensors }
    }

    /// Every tensor widened to f32 (what a model stored in F16 computes with).
    pub fn widened(&self) -> Weights {
        let tensors = self
            .tensors
            .iter()
            .map(|(name, t)| (name.clone(), Tensor::f32(t.shape.clone(), t.data.to_f32().into_owned())))
            .collect();
        Weights { tensors }
    }

    /// Tensor `name` (the loader guarantees presence for every spec'd name).
    pub fn tensor(&self, name: &str) -> Result<&Tensor> {
        self.tensors.get(name).ok_or_else(|| Error::MissingTensor(name.to_string()))
    }

    /// Borrow the values of a tensor held as f32: every tensor but the matrices of a half-precision
    /// file (read those with [`Weights::tensor`] and [`TensorData::row`] or [`TensorData::to_f32`]).
    pub fn get(&self, name: &str) -> Result<&[f32]> {
        let data = &self.tensor(name)?.data;
        data.as_f32().ok_or_else(|| {
            Error::arg(name, format!("held as {}: read it row by row (TensorData::row)", data.dtype().name()))
        })
    }

    /// Total number of parameters.
    pub fn num_params(&self) -> usize {
        self.tensors.values().map(|t| t.data.len()).sum()
    }

    /// Bytes the tensors take in memory, per dtype held (dtypes without tensors are left out).
    pub fn bytes_by_dtype(&self) -> BTreeMap<StorageDtype, usize> {
        let mut out = BTreeMap::new();
        for t in self.tensors.values() {
            *out.entry(t.data.dtype()).or_insert(0) += t.data.bytes();
        }
        out
    }
}

/// Box–Muller standard normal from the project RNG.
fn standard_normal(rng: &mut Rng) -> f32 {
    let u1 = rng.next_f64().max(1e-300);
    let u2 = rng.next_f64();
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `row` of a half tensor equals `half`'s widening for every finite f16 and bf16 (63,488 and
    /// 65,280 values: both signs, subnormals and zeros included), at every offset within an
    /// 8-value chunk and every kernel level of this machine.
    #[test]
    fn widening_is_exact_for_every_finite_half() {
        let f16s: Vec<f32> =
            (0..=u16::MAX).map(f16::from_bits).filter(|h| h.is_finite()).map(f16::to_f32).collect();
        let bf16s: Vec<f32> =
            (0..=u16::MAX).map(bf16::from_bits).filter(|b| b.is_finite()).map(bf16::to_f32).collect();
        assert_eq!((f16s.len(), bf16s.len()), (63_488, 65_280));
        for level in kernels::Level::available() {
            for (values, dtype) in [(&f16s, StorageDtype::F16), (&bf16s, StorageDtype::Bf16)] {
                let data = TensorData::lossless(values.clone(), dtype);
                assert_eq!(data.dtype(), dtype);
                for skip in 0..8 {
                    let mut out = vec![0.0f32; values.len() - skip];
                    let row = kernels::with_level(level, || data.row(skip, &mut out).to_vec());
                    for (a, b) in row.iter().zip(&values[skip..]) {
                        assert_eq!(a.to_bits(), b.to_bits(), "{dtype:?}, {level:?}");
                    }
                }
            }
        }
    }

    proptest! {
        /// Rows of half tensors are the widened values; f32 rows are the stored slice.
        #[test]
        fn rows_are_the_widened_values(values in proptest::collection::vec(-1.0e4f32..1.0e4, 1..64), start in 0usize..8) {
            let start = start.min(values.len() - 1);
            let n = values.len() - start;
            for dtype in [StorageDtype::F32, StorageDtype::F16, StorageDtype::Bf16] {
                let rounded: Vec<f32> = match dtype {
                    StorageDtype::F32 => values.clone(),
                    StorageDtype::F16 => values.iter().map(|&v| f16::from_f32(v).to_f32()).collect(),
                    StorageDtype::Bf16 => values.iter().map(|&v| bf16::from_f32(v).to_f32()).collect(),
                };
                let data = TensorData::lossless(rounded.clone(), dtype);
                prop_assert_eq!(data.dtype(), dtype);
                let mut scratch = vec![0.0; n];
                prop_assert_eq!(data.row(start, &mut scratch), &rounded[start..]);
                let all = data.to_f32();
                prop_assert_eq!(all.as_ref(), rounded.as_slice());
            }
        }
    }

    /// A value that F16 cannot hold exactly keeps the tensor in f32.
    #[test]
    fn lossless_keeps_f32_when_a_value_would_round() {
        assert_eq!(TensorData::lossless(vec![0.5, 1.0 / 3.0], StorageDtype::F16).dtype(), StorageDtype::F32);
        assert_eq!(TensorData::lossless(vec![0.5, 98304.0], StorageDtype::F16).dtype(), StorageDtype::F32);
        assert_eq!(TensorData::lossless(vec![0.5, 98304.0], StorageDtype::Bf16).dtype(), StorageDtype::Bf16);
        let mut t = TensorData::lossless(vec![0.5, 2.0], StorageDtype::F16);
        let shared = t.clone();
        t.f32_mut()[0] = 3.0;
        assert_eq!((t.dtype(), shared.dtype()), (StorageDtype::F32, StorageDtype::F16));
        assert_eq!((t.to_f32()[0], shared.to_f32()[0]), (3.0, 0.5));
    }
}
