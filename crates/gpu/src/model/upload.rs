//! Gathering a core [`Model`]'s weights and prepared data on the host, checking every buffer
//! against the adapter's limits, then uploading.

use super::fused::{self, Fused};
use super::layers::{Kind, Layer, Norm, Role};
use super::{plan, storage};
use crate::context::GpuContext;
use crate::error::{GpuError, Result};
use crate::params::{NormOp, WeightKind, MAX_DK};
use attnlab_core::config::{AbsolutePosition, NormKind};
use attnlab_core::weights::StorageDtype;
use attnlab_core::{ops, Error as CoreError, Model};
use half::{bf16, f16};

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
    /// How the weight matrices are held on the GPU.
    pub weight_kind: WeightKind,
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
    /// Bytes of the weight matrices on the GPU.
    pub matrix_bytes: u64,
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
        let weight_kind = match w.tensor("tok_emb.weight")?.data.dtype() {
            StorageDtype::F16 => WeightKind::F16,
            StorageDtype::Bf16 => WeightKind::Bf16,
            StorageDtype::F32 => WeightKind::F32,
        };
        let fused = Err(String::new());
        let mut host = HostModel { emb, head, final_norm, emb_norm, pe, layers, fused, weight_kind };
        // Matrices stay in the checkpoint's half dtype when every one of them converts exactly (a
        // model whose matrices mix dtypes is held in f32).
        if !host.all_matrices(|m| exact_in(host.weight_kind, m)) {
            host.weight_kind = WeightKind::F32;
        }
        host.fused = match fused::unsupported(cfg, &host) {
            Some(why) => Err(why),
            None => Ok(fused::plan(cfg, &host)),
        };
        Ok(host)
    }

    /// Whether `pred` holds for every weight matrix.
    fn all_matrices(&self, pred: impl Fn(&[f32]) -> bool) -> bool {
        let mut all = pred(&self.emb) && self.head.as_deref().is_none_or(&pred);
        for l in &self.layers {
            l.map(&mut |_, a: &Vec<f32>, role| all &= role == Role::Vector || pred(a));
        }
        all
    }

    /// Bytes of `n` values of an array of `role` on the GPU.
    fn bytes(&self, role: Role, n: usize) -> u64 {
        let width = match (role, self.weight_kind) {
            (Role::Matrix, WeightKind::F16 | WeightKind::Bf16) => 2,
            _ => 4,
        };
        (width * n) as u64
    }

    /// Fail with [`GpuError::ModelTooLarge`] (or `Unsupported` for a feature width over the
    /// kernels' registers) before any buffer exists.
    pub fn check(&self, ctx: &GpuContext) -> Result<()> {
        let check = |what: String, n: usize| ctx.check_size(&what, 4 * n as u64);
        let matrix = |what: String, n: usize| ctx.check_size(&what, self.bytes(Role::Matrix, n));
        matrix("tok_emb.weight".into(), self.emb.len())?;
        if let Some(hd) = &self.head {
            matrix("lm_head.weight".into(), hd.len())?;
        }
        check("absolute position table".into(), self.pe.len())?;
        for (i, l) in self.layers.iter().enumerate() {
            for (name, p) in l.projections() {
                matrix(format!("layers.{i}.{name}"), p.w.len())?;
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
        let mut matrix_bytes = 0;
        let kind = self.weight_kind;
        let mut buf = |label: &'static str, data: &Vec<f32>, role: Role| match role {
            Role::Matrix => {
                matrix_bytes += self.bytes(role, data.len());
                matrix_storage(dev, label, data, kind)
            }
            Role::Vector => storage(dev, label, data),
        };
        let emb = buf("tok_emb", &self.emb, Role::Matrix);
        let head = match &self.head {
            Some(hd) => buf("lm_head", hd, Role::Matrix),
            None => emb.clone(),
        };
        let layers = self.layers.iter().map(|l| l.map(&mut buf)).collect();
        let pe = buf("pe", &self.pe, Role::Vector);
        let final_norm = self.final_norm.map("final_norm", &mut buf);
        let emb_norm = self.emb_norm.as_ref().map(|n| n.map("emb_norm", &mut buf));
        let fused = self.fused.as_ref().map(|f| f.map(&mut buf)).map_err(Clone::clone);
        Uploaded {
            emb,
            head,
            pe,
            final_norm,
            emb_norm,
            layers,
            fused,
            matrix_bytes,
            dummy: storage(dev, "dummy", &[]),
        }
    }
}

/// Whether every value of `m` is exactly a value of `kind`.
fn exact_in(kind: WeightKind, m: &[f32]) -> bool {
    match kind {
        WeightKind::F32 => true,
        WeightKind::F16 => m.iter().all(|&v| f16::from_f32(v).to_f32() == v),
        WeightKind::Bf16 => m.iter().all(|&v| bf16::from_f32(v).to_f32() == v),
    }
}

/// A weight matrix's buffer: f32 words, or its values as halves two to a word (checked exact at
/// gather time), zero-padded to whole 16-byte units (the shaders bind it as an array of vectors:
/// shaders/weights.wgsl).
fn matrix_storage(dev: &wgpu::Device, label: &str, data: &[f32], kind: WeightKind) -> wgpu::Buffer {
    let mut bytes: Vec<u8> = match kind {
        WeightKind::F32 => bytemuck::cast_slice(data).to_vec(),
        WeightKind::F16 => data.iter().flat_map(|&v| f16::from_f32(v).to_bits().to_le_bytes()).collect(),
        WeightKind::Bf16 => data.iter().flat_map(|&v| bf16::from_f32(v).to_bits().to_le_bytes()).collect(),
    };
    bytes.resize(bytes.len().next_multiple_of(16), 0);
    super::storage_bytes(dev, label, &bytes)
}

#[cfg(test)]
mod tests {
    use super::{matrix_storage, storage};
    use crate::model::pipes::{bind_group_layout, MATMUL};
    use crate::params::{uniform_bytes, MatmulParams, Step, WeightKind};
    use crate::shaders::WeightVec;
    use crate::GpuContext;
    use half::{bf16, f16};
    use wgpu::util::DeviceExt;

    /// `X · Wᵀ` for the `[rows, inp]` matrix `x` and the `[w.len() / inp, inp]` matrix `w` held as
    /// `kind`, through matmul.wgsl reading `vectors`: `[rows, outputs]`.
    fn matmul(
        ctx: &GpuContext,
        w: &[f32],
        x: &[f32],
        inp: u32,
        kind: WeightKind,
        vectors: WeightVec,
    ) -> Vec<f32> {
        let dev = &ctx.device;
        let (n, rows) = (w.len() as u32 / inp, x.len() as u32 / inp);
        let uni = |bytes: &[u8]| {
            dev.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: None,
                contents: bytes,
                usage: wgpu::BufferUsages::UNIFORM,
            })
        };
        let p = MatmulParams { outd: n, inp, x_stride: inp, y_stride: n, ..MatmulParams::default() };
        let (p, st) = (uni(&uniform_bytes(&p)), uni(&uniform_bytes(&Step { rows, ..Step::default() })));
        let (x, wb, b) = (storage(dev, "x", x), matrix_storage(dev, "w", w, kind), storage(dev, "b", &[]));
        let len = (rows * n) as usize;
        let y = super::super::zeros(dev, "y", len, wgpu::BufferUsages::empty());
        let read = dev.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 4 * len as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let module = crate::shaders::create_module(dev, None, MATMUL.shader.source_for(vectors));
        let layout = bind_group_layout(dev, "matmul", MATMUL.slots);
        let pl = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: None,
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: None,
            layout: Some(&pl),
            module: &module,
            entry_point: Some("main"),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &[("WEIGHT_KIND", f64::from(kind.code()))],
                zero_initialize_workgroup_memory: true,
            },
            cache: None,
        });
        let entries: Vec<wgpu::BindGroupEntry> = [&p, &st, &x, &wb, &y, &b]
            .iter()
            .zip(MATMUL.slots)
            .map(|(buf, &(binding, _))| wgpu::BindGroupEntry { binding, resource: buf.as_entire_binding() })
            .collect();
        let bg = dev.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &layout,
            entries: &entries,
        });
        let mut enc = dev.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &bg, &[]);
            pass.dispatch_workgroups(n.div_ceil(64), rows.div_ceil(64), 1);
        }
        enc.copy_buffer_to_buffer(&y, 0, &read, 0, 4 * len as u64);
        pollster::block_on(ctx.submit(enc.finish())).expect("submit");
        let words = pollster::block_on(ctx.read_words(&read, len)).expect("readback");
        words.into_iter().map(f32::from_bits).collect()
    }

    /// `w`'s values as matmul.wgsl reads them, each path: element by element (`[n, 1]` · [1]),
    /// a vector at a time in a decode step (`[n / 4, 4]` · each unit row) and in the tiled
    /// prefill (`[n / 4, 4]` · the 4 × 4 identity); `w.len()` a multiple of 4.
    fn read_through_matmul(
        ctx: &GpuContext,
        w: &[f32],
        kind: WeightKind,
        vectors: WeightVec,
    ) -> Vec<(&'static str, Vec<f32>)> {
        let mut reads = vec![("elements", matmul(ctx, w, &[1.0], 1, kind, vectors))];
        let unit = |j: usize| -> Vec<f32> { (0..4).map(|i| f32::from(u8::from(i == j))).collect() };
        let mut by_vector = vec![0.0; w.len()];
        for j in 0..4 {
            for (o, v) in matmul(ctx, w, &unit(j), 4, kind, vectors).into_iter().enumerate() {
                by_vector[o * 4 + j] = v;
            }
        }
        reads.push(("vectors, one row", by_vector));
        let identity: Vec<f32> = (0..4).flat_map(unit).collect();
        let tiled = matmul(ctx, w, &identity, 4, kind, vectors);
        let n = w.len() / 4;
        reads.push(("vectors, tiled", (0..w.len()).map(|i| tiled[(i % 4) * n + i / 4]).collect()));
        reads
    }

    /// Every finite f16 value, and bf16 values over the whole exponent range, read through the
    /// matmul kernel from half words equal their f32 values exactly, element by element and a
    /// vector at a time (the WGSL widening is integer bit work, checked here against the `half`
    /// crate); where the adapter has shader-f16, every f16 value widened by the hardware too; f32
    /// values through the f32 vectors.
    #[test]
    fn the_kernels_widen_every_half_exactly() {
        let ctx = match pollster::block_on(GpuContext::new()) {
            Ok(c) => c,
            Err(e) if std::env::var("ATTNLAB_SKIP_GPU").is_ok_and(|v| v == "1") => {
                return eprintln!("skipped: {e}")
            }
            Err(e) => panic!("no usable GPU adapter ({e}); set ATTNLAB_SKIP_GPU=1 to skip"),
        };
        // Whole vectors: lengths a multiple of 4 (zeros added).
        let whole = |mut v: Vec<f32>| {
            v.resize(v.len().next_multiple_of(4), 0.0);
            v
        };
        let f16s: Vec<f32> =
            whole((0..=u16::MAX).map(f16::from_bits).filter(|v| v.is_finite()).map(f16::to_f32).collect());
        let bf16s: Vec<f32> = whole(
            (0..=u16::MAX)
                .step_by(7)
                .map(bf16::from_bits)
                .filter(|v| v.is_finite())
                .map(bf16::to_f32)
                .collect(),
        );
        let f32s: Vec<f32> = (0..4096u32).map(|i| (i as f32 - 2048.5) * 1.37e-3 * (i % 7) as f32).collect();
        let mut paths = vec![
            (f16s.clone(), WeightKind::F16, WeightVec::Halves),
            (bf16s, WeightKind::Bf16, WeightVec::Halves),
            (f32s, WeightKind::F32, WeightVec::F32),
        ];
        if ctx.caps().shader_f16 {
            paths.push((f16s, WeightKind::F16, WeightVec::F16));
        }
        for (values, kind, vectors) in paths {
            for (path, got) in read_through_matmul(&ctx, &values, kind, vectors) {
                let wrong: Vec<String> = values
                    .iter()
                    .zip(&got)
                    .filter(|(a, b)| a != b)
                    .take(5)
                    .map(|(a, b)| format!("{a:e} read as {b:e}"))
                    .collect();
                assert!(wrong.is_empty(), "{kind:?} ({vectors:?}, {path}): {}", wrong.join(", "));
            }
        }
    }
}
