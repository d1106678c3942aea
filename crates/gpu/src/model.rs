//! GPU model (weights + prepared per-layer data) and session (activations, KV caches, states).
//!
//! A forward pass is a list of [`Op`]s (pipeline + bind group + dispatch shape) built once per
//! session; each submission writes the step uniform (rows, first position) and the token ids, then
//! records the ops of every layer into one compute pass. Prefill runs in chunks of [`CHUNK`] rows
//! (softmax layers read the KV cache, linear layers carry their state), so activations stay
//! bounded and nothing n×n is ever stored.

use crate::context::GpuContext;
use crate::error::{GpuError, Result};
use crate::params::{
    uniform_bytes, AttnParams, BiasKind, EmbedParams, EwOp, EwParams, FeatKind, FeatParams, LrpeCoreKind,
    LrpePKind, MatmulParams, NormOp, NormParams, RotaryParams, SampleParams, ScanParams, Step, ATTN_KS,
    ATTN_TILE_VEC4, ATTN_TQ, MAX_DH, MAX_DK, SCAN_C,
};
use crate::shaders::{self, Shader};
use attnlab_core::attention::{BiasPlan, LayerPlan, LinearPlan};
use attnlab_core::config::{
    AbsolutePosition, FfnKind, LrpeCore, LrpeNormalize, LrpeP, ModelConfig, NormKind, TransnormerFlavor,
};
use attnlab_core::{gates, lrpe, ops, Error as CoreError, Model};
use bytemuck::Pod;
use std::collections::HashMap;
use wgpu::util::DeviceExt;

mod introspect;
mod sampling;
pub use introspect::{GpuTrace, MAX_MAP_SIDE};
pub use sampling::GpuSampling;

/// Prefill rows per submission (activation buffers hold this many rows).
pub const CHUNK: usize = 256;
/// Loop iterations one scan invocation may spend per submission (rows × dk).
const SCAN_BUDGET: usize = 32768;
/// Steps of at least this many rows use the chunked scan; shorter ones (decode) the sequential one.
const SCAN_CHUNKED_MIN: usize = 2 * SCAN_C;
// The sequential scan only walks fewer than SCAN_CHUNKED_MIN rows, the chunked passes SCAN_C rows.
const _: () = assert!(SCAN_CHUNKED_MIN * MAX_DK <= SCAN_BUDGET);
/// Loop iterations one tiled-attention invocation may spend (Mesa llvmpipe stops a loop nest after
/// ~65k); longer key ranges use the per-row kernel.
const ATTN_BUDGET: usize = 49152;

#[derive(Clone, Copy)]
enum Bind {
    Uniform,
    Read,
    Write,
}

struct Pipe {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
}

/// Dispatch shape of an op as a function of the step's row count.
#[derive(Clone, Copy)]
enum Disp {
    /// `rows · per_row` invocations of a 64-wide kernel.
    Threads(u32),
    /// A fixed number of invocations of a 64-wide kernel.
    Fixed(u32),
    /// Matmul 16×16 tiles over (out, rows); `last`: only the last row.
    Mat { outd: u32, last: bool },
    /// One workgroup per (group, row).
    Norm(u32),
    /// Attention: `tiled` ops run when the step has more than one row and ends at most at `max_end`
    /// (one workgroup per (head, ATTN_TQ rows)); the others (one workgroup per (head, row)) otherwise.
    Attn { heads: u32, max_end: u32, tiled: bool },
    /// Linear scan pass (`per` invocations of a 64-wide kernel per unit): pass 0 (sequential, per
    /// step) runs below SCAN_CHUNKED_MIN rows, the chunked passes 1 (per chunk), 2 (per step) and
    /// 3 (per row) at or above.
    Scan { pass: u8, per: u32 },
}

struct Op {
    pipe: usize,
    bind: wgpu::BindGroup,
    disp: Disp,
}

struct NormG {
    kind: NormOp,
    eps: f32,
    w: wgpu::Buffer,
    b: Option<wgpu::Buffer>,
}

enum Gate {
    None,
    Gla { down: wgpu::Buffer, up: wgpu::Buffer, rank: usize },
    Regla { wgr: wgpu::Buffer },
}

enum Post {
    None,
    Simple,
    HeadNorm { gain: wgpu::Buffer },
    HeadNormGate { gain: wgpu::Buffer, out_gate: wgpu::Buffer },
}

enum Kind {
    Softmax {
        bias_kind: BiasKind,
        params: AttnParams,
        aux: wgpu::Buffer,
        rope: Option<wgpu::Buffer>,
        relu_norm: bool,
    },
    Linear {
        feat_kind: FeatKind,
        params: FeatParams,
        aux: wgpu::Buffer,
        dk: usize,
        den_eps: f32,
        gate: Gate,
        post: Post,
    },
}

struct LayerG {
    attn_norm: NormG,
    ffn_norm: NormG,
    wqkv: wgpu::Buffer,
    wo: wgpu::Buffer,
    ffn_gate: Option<wgpu::Buffer>,
    ffn_up: wgpu::Buffer,
    ffn_down: wgpu::Buffer,
    kind: Kind,
}

/// A model uploaded to the GPU.
pub struct GpuModel {
    ctx: GpuContext,
    cfg: ModelConfig,
    pipes: Vec<Pipe>,
    pipe_ids: HashMap<String, usize>,
    /// Composed shader modules by file name.
    modules: HashMap<&'static str, wgpu::ShaderModule>,
    emb: wgpu::Buffer,
    head: wgpu::Buffer,
    pe: wgpu::Buffer,
    final_norm: NormG,
    layers: Vec<LayerG>,
    dummy: wgpu::Buffer,
}

impl std::fmt::Debug for GpuModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuModel").field("model", &self.cfg.name).field("layers", &self.layers.len()).finish()
    }
}

fn usize_u32(what: &str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| GpuError::Unsupported(format!("{what} = {v} does not fit in 32 bits")))
}

/// Host-side data of one layer before upload.
struct LayerData {
    attn_norm: (Vec<f32>, Option<Vec<f32>>),
    ffn_norm: (Vec<f32>, Option<Vec<f32>>),
    wqkv: Vec<f32>,
    wo: Vec<f32>,
    ffn_gate: Option<Vec<f32>>,
    ffn_up: Vec<f32>,
    ffn_down: Vec<f32>,
    kind: KindData,
}

enum KindData {
    Softmax {
        bias_kind: BiasKind,
        params: AttnParams,
        aux: Vec<f32>,
        rope: Option<Vec<f32>>,
        relu_norm: bool,
    },
    Linear {
        feat_kind: FeatKind,
        params: FeatParams,
        aux: Vec<f32>,
        dk: usize,
        den_eps: f32,
        gate: GateData,
        post: PostData,
    },
}

enum GateData {
    None,
    Gla { down: Vec<f32>, up: Vec<f32>, rank: usize },
    Regla { wgr: Vec<f32> },
}

enum PostData {
    None,
    Simple,
    HeadNorm { gain: Vec<f32> },
    HeadNormGate { gain: Vec<f32>, out_gate: Vec<f32> },
}

/// `[ctx, n, 2]` table of (cos, sin) of `pos · angle[k]`, in f64.
fn cos_sin_table(ctx: usize, angles: &[f64]) -> Vec<f32> {
    let mut t = Vec::with_capacity(ctx * angles.len() * 2);
    for s in 0..ctx {
        for &a in angles {
            let (sin, cos) = (s as f64 * a).sin_cos();
            t.push(cos as f32);
            t.push(sin as f32);
        }
    }
    t
}

fn rope_table(ctx: usize, dh: usize, base: f64) -> Vec<f32> {
    let angles: Vec<f64> = (0..dh / 2).map(|k| lrpe::inv_freq(base, k, dh)).collect();
    cos_sin_table(ctx, &angles)
}

fn layer_data(model: &Model, i: usize) -> Result<LayerData> {
    let cfg = model.config();
    let w = model.weights();
    let (h, dh, ctx) = (cfg.n_heads, cfg.head_dim, cfg.max_context);
    let a = h * dh;
    let attn = model
        .attention(i)
        .ok_or_else(|| CoreError::arg("layer", format!("layer {i} is missing from the model")))?;
    let norm = |name: &str| -> Result<(Vec<f32>, Option<Vec<f32>>)> {
        let g = w.get(&format!("{name}.weight"))?.to_vec();
        let b = match cfg.norm.kind {
            NormKind::Layernorm => Some(w.get(&format!("{name}.bias"))?.to_vec()),
            NormKind::Rmsnorm => None,
        };
        Ok((g, b))
    };
    let [wq, wk, wv, wo] = attn.projections();
    let mut wqkv = Vec::with_capacity(3 * a * cfg.d_model);
    wqkv.extend_from_slice(&wq.w);
    wqkv.extend_from_slice(&wk.w);
    wqkv.extend_from_slice(&wv.w);
    let kind = match attn.plan() {
        LayerPlan::Softmax { scale, bias, rope_base, block, relu_with_norm } => {
            let (bias_kind, aux, table_len, hidden, c, thr) = match bias {
                BiasPlan::None => (BiasKind::None, Vec::new(), 0usize, 0usize, 0.0f32, 0.0f32),
                BiasPlan::Table { len, values } => (BiasKind::Table, values.to_vec(), len, 0, 0.0, 0.0),
                BiasPlan::Fire { c, l_mult, init_l, w1, b1, w2, b2 } => {
                    let mut aux = Vec::new();
                    aux.extend_from_slice(w1);
                    aux.extend_from_slice(b1);
                    aux.extend_from_slice(w2);
                    aux.extend_from_slice(b2);
                    (BiasKind::Fire, aux, 0, w1.len(), c as f32, (l_mult * init_l).abs() as f32)
                }
            };
            let params = AttnParams {
                h: usize_u32("heads", h)?,
                dh: usize_u32("head_dim", dh)?,
                a: usize_u32("attn_dim", a)?,
                block: usize_u32("block", block.unwrap_or(0))?,
                scale,
                relu: u32::from(relu_with_norm),
                table_len: usize_u32("table", table_len)?,
                fire_hidden: usize_u32("fire hidden", hidden)?,
                fire_c: c,
                fire_thr: thr,
                ..AttnParams::default()
            };
            let rope = rope_base.map(|base| rope_table(ctx, dh, base));
            KindData::Softmax { bias_kind, params, aux, rope, relu_norm: relu_with_norm }
        }
        LayerPlan::Linear { kind, dk } => {
            let den_eps = attn.denominator_eps().unwrap_or(0.0);
            let mut pm = FeatParams {
                h: usize_u32("heads", h)?,
                dh: usize_u32("head_dim", dh)?,
                dk: usize_u32("dk", dk)?,
                a: usize_u32("attn_dim", a)?,
                ..FeatParams::default()
            };
            let mut aux = Vec::new();
            let (feat_kind, gate, post) = match kind {
                LinearPlan::LinearElu { .. } => {
                    pm.plus_one = 1;
                    (FeatKind::Elu, GateData::None, PostData::None)
                }
                LinearPlan::TransnormerNorm { flavor } => {
                    pm.plus_one = u32::from(flavor == TransnormerFlavor::T2);
                    (FeatKind::Elu, GateData::None, PostData::Simple)
                }
                LinearPlan::Lrpe { lrpe: l, normalize } => {
                    pm.lrpe_p = match l.p() {
                        LrpeP::Identity => LrpePKind::Identity,
                        LrpeP::Householder => LrpePKind::Householder,
                        LrpeP::OddEven => LrpePKind::OddEven,
                    }
                    .code();
                    if let Some(v) = l.householder_v() {
                        aux.extend(v.iter().map(|&x| x as f32));
                    } else {
                        aux.resize(dh, 0.0);
                    }
                    pm.off_vec = 0;
                    pm.off_tab = usize_u32("aux", aux.len())?;
                    match l.core() {
                        LrpeCore::Rotation | LrpeCore::Mixed => {
                            pm.lrpe_core = LrpeCoreKind::Rotation.code();
                            pm.n_angles = usize_u32("angles", l.angles().len())?;
                            aux.extend(cos_sin_table(ctx, l.angles()));
                        }
                        LrpeCore::Permutation => {
                            pm.lrpe_core = LrpeCoreKind::Permutation.code();
                            for s in 0..ctx {
                                for j in 0..dh {
                                    aux.push(l.perm_power(s, j) as f32);
                                }
                            }
                        }
                        LrpeCore::Complex => {
                            pm.lrpe_core = LrpeCoreKind::Complex.code();
                            aux.extend(cos_sin_table(ctx, l.angles()));
                        }
                    }
                    let post = match normalize {
                        LrpeNormalize::Rmsnorm => PostData::Simple,
                        LrpeNormalize::Denominator => PostData::None,
                    };
                    (FeatKind::Lrpe, GateData::None, post)
                }
                LinearPlan::Gla { down, up, bias, normalizer, out_gate, head_norm } => {
                    pm.scale = 1.0 / (dh as f32).sqrt();
                    pm.normalizer = normalizer as f32;
                    pm.gpre_stride = usize_u32("attn_dim", a)?;
                    aux.extend_from_slice(bias);
                    (
                        FeatKind::Gla,
                        GateData::Gla { down: down.w.clone(), up: up.w.clone(), rank: down.out },
                        PostData::HeadNormGate { gain: head_norm.to_vec(), out_gate: out_gate.w.clone() },
                    )
                }
                LinearPlan::Regla { wg, bg, wr, br, head_norm } => {
                    pm.scale = gates::regla_scale(dh) as f32;
                    pm.gpre_stride = usize_u32("attn_dim", 2 * a)?;
                    aux.extend_from_slice(bg);
                    aux.extend_from_slice(br);
                    let mut wgr = wg.w.clone();
                    wgr.extend_from_slice(&wr.w);
                    (
                        FeatKind::Regla,
                        GateData::Regla { wgr },
                        PostData::HeadNorm { gain: head_norm.to_vec() },
                    )
                }
                LinearPlan::Retnet { out_gate, head_norm, log_gamma } => {
                    pm.scale = 1.0 / (dh as f32).sqrt();
                    aux.extend_from_slice(log_gamma);
                    pm.off_tab = usize_u32("aux", aux.len())?;
                    aux.extend(rope_table(ctx, dh, 10000.0));
                    (
                        FeatKind::Retnet,
                        GateData::None,
                        PostData::HeadNormGate { gain: head_norm.to_vec(), out_gate: out_gate.w.clone() },
                    )
                }
            };
            KindData::Linear { feat_kind, params: pm, aux, dk, den_eps, gate, post }
        }
    };
    let ffn = |n: &str| -> Result<Vec<f32>> { Ok(w.get(&format!("layers.{i}.ffn.{n}"))?.to_vec()) };
    Ok(LayerData {
        attn_norm: norm(&format!("layers.{i}.attn_norm"))?,
        ffn_norm: norm(&format!("layers.{i}.ffn_norm"))?,
        wqkv,
        wo: wo.w.clone(),
        ffn_gate: if cfg.ffn.kind == FfnKind::Swiglu { Some(ffn("w_gate")?) } else { None },
        ffn_up: ffn("w_up")?,
        ffn_down: ffn("w_down")?,
        kind,
    })
}

impl GpuModel {
    /// Upload `model`. Sizes are checked against the adapter's limits before any buffer exists.
    pub async fn new(ctx: GpuContext, model: &Model) -> Result<GpuModel> {
        let cfg = model.config().clone();
        let (d, dh) = (cfg.d_model, cfg.head_dim);
        if dh > MAX_DH {
            return Err(GpuError::Unsupported(format!("head_dim {dh} exceeds the kernels' {MAX_DH}")));
        }
        let w = model.weights();
        let emb = w.get("tok_emb.weight")?.to_vec();
        let head = if cfg.tie_embeddings { None } else { Some(w.get("lm_head.weight")?.to_vec()) };
        let final_norm = {
            let g = w.get("final_norm.weight")?.to_vec();
            let b = match cfg.norm.kind {
                NormKind::Layernorm => Some(w.get("final_norm.bias")?.to_vec()),
                NormKind::Rmsnorm => None,
            };
            (g, b)
        };
        let pe = if cfg.absolute_position == AbsolutePosition::Sinusoidal {
            let mut t = vec![0.0f32; cfg.max_context * d];
            for (s, row) in t.chunks_exact_mut(d).enumerate() {
                ops::sinusoidal_embedding(s, d, row);
            }
            t
        } else {
            Vec::new()
        };
        let layers: Vec<LayerData> =
            (0..cfg.n_layers).map(|i| layer_data(model, i)).collect::<Result<_>>()?;
        // Limits first: every buffer this model will hold.
        let check = |what: String, n: usize| ctx.check_size(&what, 4 * n as u64);
        check("tok_emb.weight".into(), emb.len())?;
        if let Some(hd) = &head {
            check("lm_head.weight".into(), hd.len())?;
        }
        check("sinusoidal table".into(), pe.len())?;
        for (i, l) in layers.iter().enumerate() {
            check(format!("layers.{i}.attn.wqkv"), l.wqkv.len())?;
            check(format!("layers.{i}.ffn.w_up"), l.ffn_up.len())?;
            check(format!("layers.{i}.ffn.w_down"), l.ffn_down.len())?;
            match &l.kind {
                KindData::Softmax { aux, rope, .. } => {
                    check(format!("layers.{i} bias table"), aux.len())?;
                    check(format!("layers.{i} rope table"), rope.as_ref().map_or(0, Vec::len))?;
                }
                KindData::Linear { aux, dk, .. } => {
                    if *dk > MAX_DK {
                        return Err(GpuError::Unsupported(format!(
                            "layer {i}: feature width {dk} exceeds the kernels' {MAX_DK}"
                        )));
                    }
                    check(format!("layers.{i} feature tables"), aux.len())?;
                }
            }
        }
        let c2 = ctx.clone();
        let built = c2
            .scoped(|| {
                let dev = &ctx.device;
                let buf = |label: &str, data: &[f32]| storage(dev, label, data);
                let norm = |label: &str, n: &(Vec<f32>, Option<Vec<f32>>)| NormG {
                    kind: if n.1.is_some() { NormOp::Layer } else { NormOp::Rms },
                    eps: cfg.norm.eps as f32,
                    w: buf(label, &n.0),
                    b: n.1.as_ref().map(|b| buf(label, b)),
                };
                let emb_b = buf("tok_emb", &emb);
                let head_b = match &head {
                    Some(hd) => buf("lm_head", hd),
                    None => emb_b.clone(),
                };
                let layers_g: Vec<LayerG> = layers
                    .iter()
                    .map(|l| LayerG {
                        attn_norm: norm("attn_norm", &l.attn_norm),
                        ffn_norm: norm("ffn_norm", &l.ffn_norm),
                        wqkv: buf("wqkv", &l.wqkv),
                        wo: buf("wo", &l.wo),
                        ffn_gate: l.ffn_gate.as_ref().map(|g| buf("w_gate", g)),
                        ffn_up: buf("w_up", &l.ffn_up),
                        ffn_down: buf("w_down", &l.ffn_down),
                        kind: match &l.kind {
                            KindData::Softmax { bias_kind, params, aux, rope, relu_norm } => Kind::Softmax {
                                bias_kind: *bias_kind,
                                params: *params,
                                aux: buf("attn aux", aux),
                                rope: rope.as_ref().map(|r| buf("rope", r)),
                                relu_norm: *relu_norm,
                            },
                            KindData::Linear { feat_kind, params, aux, dk, den_eps, gate, post } => {
                                Kind::Linear {
                                    feat_kind: *feat_kind,
                                    params: *params,
                                    aux: buf("linear aux", aux),
                                    dk: *dk,
                                    den_eps: *den_eps,
                                    gate: match gate {
                                        GateData::None => Gate::None,
                                        GateData::Gla { down, up, rank } => Gate::Gla {
                                            down: buf("gla down", down),
                                            up: buf("gla up", up),
                                            rank: *rank,
                                        },
                                        GateData::Regla { wgr } => Gate::Regla { wgr: buf("regla wgr", wgr) },
                                    },
                                    post: match post {
                                        PostData::None => Post::None,
                                        PostData::Simple => Post::Simple,
                                        PostData::HeadNorm { gain } => {
                                            Post::HeadNorm { gain: buf("head norm", gain) }
                                        }
                                        PostData::HeadNormGate { gain, out_gate } => Post::HeadNormGate {
                                            gain: buf("head norm", gain),
                                            out_gate: buf("out gate", out_gate),
                                        },
                                    },
                                }
                            }
                        },
                    })
                    .collect();
                (emb_b, head_b, buf("pe", &pe), norm("final_norm", &final_norm), layers_g, buf("dummy", &[]))
            })
            .await?;
        let (emb, head, pe, final_norm, layers, dummy) = built;
        Ok(GpuModel {
            ctx,
            cfg,
            pipes: Vec::new(),
            pipe_ids: HashMap::new(),
            modules: HashMap::new(),
            emb,
            head,
            pe,
            final_norm,
            layers,
            dummy,
        })
    }

    /// The model's config.
    pub fn config(&self) -> &ModelConfig {
        &self.cfg
    }

    /// The device this model lives on.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// Get or build a pipeline for (shader, entry, override constants) with an explicit layout.
    fn pipe(
        &mut self,
        shader: &'static Shader,
        entry: &str,
        consts: &[(&str, f64)],
        slots: &[(u32, Bind)],
    ) -> usize {
        let name = shader.name;
        let key = format!("{name}:{entry}:{consts:?}");
        if let Some(&i) = self.pipe_ids.get(&key) {
            return i;
        }
        let dev = &self.ctx.device;
        let module = self
            .modules
            .entry(name)
            .or_insert_with(|| {
                dev.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(name),
                    source: wgpu::ShaderSource::Wgsl(shader.source().into()),
                })
            })
            .clone();
        let entries: Vec<wgpu::BindGroupLayoutEntry> = slots
            .iter()
            .map(|&(binding, k)| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: match k {
                        Bind::Uniform => wgpu::BufferBindingType::Uniform,
                        Bind::Read => wgpu::BufferBindingType::Storage { read_only: true },
                        Bind::Write => wgpu::BufferBindingType::Storage { read_only: false },
                    },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let layout = dev.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some(name),
            entries: &entries,
        });
        let pl = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(name),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(name),
            layout: Some(&pl),
            module: &module,
            entry_point: Some(entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: consts,
                zero_initialize_workgroup_memory: true,
            },
            cache: None,
        });
        self.pipes.push(Pipe { pipeline, layout });
        self.pipe_ids.insert(key, self.pipes.len() - 1);
        self.pipes.len() - 1
    }

    /// A new decode session with all state on the GPU (sized for the model's max_context).
    pub async fn session(&mut self) -> Result<GpuSession<'_>> {
        GpuSession::new(self, CHUNK, None).await
    }

    /// A session whose prefill submits at most `rows` tokens at a time (1..=[`CHUNK`]).
    pub async fn session_with_chunk(&mut self, rows: usize) -> Result<GpuSession<'_>> {
        GpuSession::new(self, rows.clamp(1, CHUNK), None).await
    }
}

fn storage(dev: &wgpu::Device, label: &str, data: &[f32]) -> wgpu::Buffer {
    let mut bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    if bytes.len() < 16 {
        bytes.resize(16, 0);
    }
    dev.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(label),
        contents: &bytes,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
    })
}

/// A uniform buffer holding the parameter block `value`.
fn uniform<T: Pod>(dev: &wgpu::Device, value: &T) -> wgpu::Buffer {
    dev.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("params"),
        contents: &uniform_bytes(value),
        usage: wgpu::BufferUsages::UNIFORM,
    })
}

fn zeros(dev: &wgpu::Device, label: &str, n: usize, extra: wgpu::BufferUsages) -> wgpu::Buffer {
    dev.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: (4 * n.max(4)) as u64,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC
            | extra,
        mapped_at_creation: false,
    })
}

/// Session activations (CHUNK rows) shared by all layers.
struct Acts {
    x: wgpu::Buffer,
    h: wgpu::Buffer,
    qkv: wgpu::Buffer,
    ao: wgpu::Buffer,
    an: wgpu::Buffer,
    og: wgpu::Buffer,
    ffu: wgpu::Buffer,
    ffg: wgpu::Buffer,
    gpre: wgpu::Buffer,
    glow: wgpu::Buffer,
    fq: wgpu::Buffer,
    fk: wgpu::Buffer,
    lg: wgpu::Buffer,
    mrow: wgpu::Buffer,
    logits: wgpu::Buffer,
}

/// Decode state of one [`GpuModel`]: KV caches / recurrent states and activations in GPU buffers.
pub struct GpuSession<'m> {
    model: &'m GpuModel,
    pos: usize,
    rows_cap: usize,
    step: wgpu::Buffer,
    tok: wgpu::Buffer,
    tok_out: wgpu::Buffer,
    logits: wgpu::Buffer,
    staging: wgpu::Buffer,
    staging_tok: wgpu::Buffer,
    forward: Vec<Op>,
    head_all: Vec<Op>,
    head_last: Vec<Op>,
    sample: Op,
    state_bytes: u64,
    /// Trace buffers and capture ops of a [`GpuModel::trace`] session.
    capture: Option<introspect::Capture>,
    /// Temperature / top-k / top-p sampling op.
    top: sampling::TopSampler,
}

impl std::fmt::Debug for GpuSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuSession").field("pos", &self.pos).field("state_bytes", &self.state_bytes).finish()
    }
}

/// Pipelines of a model, built before the session borrows it immutably.
struct PipeIds {
    matmul: usize,
    ew: usize,
    norm: usize,
    embed: usize,
    rotary: usize,
    attn: [usize; 3],
    /// Tiled prefill attention per bias kind.
    attn_tiled: [usize; 3],
    feat: [usize; 5],
    regla_max: usize,
    scan: usize,
    /// Chunked scan passes: local, carry, out.
    scan_chunk: [usize; 3],
    sample: usize,
}

fn build_pipes(m: &mut GpuModel) -> PipeIds {
    use Bind::{Read as R, Uniform as U, Write as W};
    let uu = [(0, U), (1, U)];
    let s = |rest: &[(u32, Bind)]| -> Vec<(u32, Bind)> {
        uu.iter().copied().chain(rest.iter().copied()).collect()
    };
    let need_softmax: Vec<BiasKind> = m
        .layers
        .iter()
        .filter_map(|l| match &l.kind {
            Kind::Softmax { bias_kind, .. } => Some(*bias_kind),
            _ => None,
        })
        .collect();
    let need_linear: Vec<FeatKind> = m
        .layers
        .iter()
        .filter_map(|l| match &l.kind {
            Kind::Linear { feat_kind, .. } => Some(*feat_kind),
            _ => None,
        })
        .collect();
    let matmul = m.pipe(&shaders::MATMUL, "main", &[], &s(&[(2, R), (3, R), (4, W)]));
    let ew = m.pipe(&shaders::ELEMENTWISE, "main", &[], &s(&[(2, R), (3, W)]));
    let norm = m.pipe(&shaders::NORM, "main", &[], &s(&[(2, R), (3, R), (4, R), (5, W)]));
    let embed = m.pipe(&shaders::EMBED, "main", &[], &s(&[(2, R), (3, R), (4, R), (5, W)]));
    let sample = m.pipe(&shaders::SAMPLE, "main", &[], &[(0, U), (1, R), (2, W), (3, W)]);
    let mut ids = PipeIds {
        matmul,
        ew,
        norm,
        embed,
        rotary: usize::MAX,
        attn: [usize::MAX; 3],
        attn_tiled: [usize::MAX; 3],
        feat: [usize::MAX; 5],
        regla_max: usize::MAX,
        scan: usize::MAX,
        scan_chunk: [usize::MAX; 3],
        sample,
    };
    if !need_softmax.is_empty() {
        ids.rotary = m.pipe(&shaders::ROTARY, "main", &[], &s(&[(2, W), (3, R), (4, W), (5, W)]));
    }
    let tile_keys = (ATTN_TILE_VEC4 / m.cfg.head_dim.div_ceil(4).max(1)).max(1);
    // K and V tiles of ATTN_TILE_VEC4 vec4s each (16 KiB: WebGPU's default limit; an adapter below
    // it only gets the per-row kernel).
    let tiled_fits = m.ctx.caps().max_workgroup_storage as usize >= 2 * ATTN_TILE_VEC4 * 16;
    for k in need_softmax {
        let slots = s(&[(2, R), (3, R), (4, R), (5, R), (6, W)]);
        let bias = f64::from(k.code());
        ids.attn[k as usize] = m.pipe(&shaders::ATTENTION, "main", &[("BIAS_KIND", bias)], &slots);
        if tiled_fits {
            ids.attn_tiled[k as usize] = m.pipe(
                &shaders::ATTENTION,
                "prefill",
                &[("BIAS_KIND", bias), ("TILE_KEYS", tile_keys as f64)],
                &slots,
            );
        }
    }
    if !need_linear.is_empty() {
        ids.scan = m.pipe(
            &shaders::LINEAR_SCAN,
            "main",
            &[],
            &s(&[(2, R), (3, R), (4, R), (5, R), (6, W), (7, W), (8, W)]),
        );
        ids.scan_chunk = [
            m.pipe(
                &shaders::LINEAR_SCAN,
                "chunk_local",
                &[],
                &s(&[(2, R), (3, R), (4, R), (5, R), (8, W), (9, W)]),
            ),
            m.pipe(&shaders::LINEAR_SCAN, "chunk_carry", &[], &s(&[(6, W), (7, W), (9, W)])),
            m.pipe(&shaders::LINEAR_SCAN, "chunk_out", &[], &s(&[(2, R), (8, W), (9, W)])),
        ];
    }
    for k in need_linear {
        ids.feat[k as usize] = m.pipe(
            &shaders::LINEAR_FEATURES,
            "main",
            &[("FEAT_KIND", f64::from(k.code()))],
            &s(&[(2, R), (3, R), (4, R), (5, W), (6, W), (7, W), (8, W)]),
        );
        if k == FeatKind::Regla {
            ids.regla_max =
                m.pipe(&shaders::LINEAR_FEATURES, "regla_max", &[], &s(&[(2, R), (5, W), (9, W)]));
        }
    }
    ids
}

impl<'m> GpuSession<'m> {
    /// `trace`: capacity in tokens of the introspection capture (see [`GpuModel::trace`]).
    async fn new(model: &'m mut GpuModel, chunk: usize, trace: Option<usize>) -> Result<GpuSession<'m>> {
        let (pipe_ids, mut capture, top_pipe) = {
            let ctx = model.ctx.clone();
            ctx.check()?;
            let oom = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let ids = build_pipes(model);
            let capture = trace.map(|cap| {
                let slots = [(0, Bind::Uniform), (1, Bind::Uniform), (2, Bind::Read), (3, Bind::Write)];
                introspect::Capture::new(model.pipe(&shaders::CAPTURE, "main", &[], &slots), cap)
            });
            let top_slots =
                [(0, Bind::Uniform), (1, Bind::Read), (2, Bind::Write), (3, Bind::Write), (4, Bind::Write)];
            let top_pipe = model.pipe(&shaders::SAMPLE, "sample_top", &[], &top_slots);
            if let Some(e) = oom.pop().await {
                return Err(GpuError::Validation(format!("pipeline creation: {e}")));
            }
            (ids, capture, top_pipe)
        };
        let model: &'m GpuModel = model;
        let cfg = &model.cfg;
        let ctx = &model.ctx;
        let (d, h, dh, v, ctxlen) = (cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.vocab_size, cfg.max_context);
        let a = h * dh;
        let hid = cfg.ffn.hidden;
        let dkmax = model
            .layers
            .iter()
            .map(|l| match &l.kind {
                Kind::Linear { dk, .. } => *dk,
                _ => dh,
            })
            .max()
            .unwrap_or(dh);
        // No scan invocation walks more than SCAN_BUDGET values (the ~65k loop iterations some
        // drivers, Mesa llvmpipe, allow one invocation): the sequential scan only runs steps of fewer
        // than SCAN_CHUNKED_MIN rows, the chunked passes SCAN_C rows per invocation.
        let rows = chunk.min(ctxlen).max(1);
        // Chunked-scan scratch: cum log decay [rows, H, dk], local denominator [rows, H], chunk
        // states S [chunks, H, dk, dh] and z [chunks, H, dh, dk].
        let any_linear = model.layers.iter().any(|l| matches!(l.kind, Kind::Linear { .. }));
        let n_chunks = rows.div_ceil(SCAN_C);
        let off_den = rows * h * dkmax;
        let off_s = off_den + rows * h;
        let off_z = off_s + n_chunks * h * dkmax * dh;
        let scratch_len = if any_linear { off_z + n_chunks * h * dh * dkmax } else { 4 };
        let rank = model
            .layers
            .iter()
            .map(|l| match &l.kind {
                Kind::Linear { gate: Gate::Gla { rank, .. }, .. } => *rank,
                _ => 1,
            })
            .max()
            .unwrap_or(1);
        // Limits before allocation.
        let sizes: Vec<(String, usize)> = vec![
            ("activations qkv".into(), rows * 3 * a),
            ("activations ffn".into(), rows * hid),
            ("linear features".into(), rows * h * dkmax),
            ("logits".into(), rows * v),
            ("KV cache of one layer".into(), ctxlen * a),
            ("linear state of one layer".into(), h * dkmax * dh),
            ("chunked scan scratch".into(), scratch_len),
        ];
        for (what, n) in &sizes {
            ctx.check_size(what, 4 * *n as u64)?;
        }
        let mut state_bytes = 0u64;
        let dev = &ctx.device;
        let built = ctx
            .scoped(|| {
                let z = |label: &str, n: usize| zeros(dev, label, n, wgpu::BufferUsages::empty());
                let acts = Acts {
                    x: z("x", rows * d),
                    h: z("h", rows * d),
                    qkv: z("qkv", rows * 3 * a),
                    ao: z("ao", rows * a),
                    an: z("an", rows * a),
                    og: z("og", rows * a),
                    ffu: z("ffu", rows * hid),
                    ffg: z("ffg", rows * hid),
                    gpre: z("gpre", rows * 2 * a),
                    glow: z("glow", rows * rank),
                    fq: z("fq", rows * h * dkmax),
                    fk: z("fk", rows * h * dkmax),
                    lg: z("lg", rows * h * dkmax),
                    mrow: z("mrow", rows * h * 2),
                    logits: z("logits", rows * v),
                };
                let scan_scratch = z("chunked scan scratch", scratch_len);
                let step = dev.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("step"),
                    size: 16,
                    usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let tok = zeros(dev, "tokens", rows, wgpu::BufferUsages::empty());
                let tok_out = zeros(dev, "token out", 4, wgpu::BufferUsages::empty());
                let staging = dev.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("staging"),
                    size: (4 * rows * v) as u64,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let staging_tok = dev.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("staging token"),
                    size: 16,
                    usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                    mapped_at_creation: false,
                });
                let mut b = Builder { m: model, step: &step, ops: Vec::new() };
                let ids = &pipe_ids;
                // Embedding.
                b.op(
                    ids.embed,
                    &[
                        &uniform(
                            dev,
                            &EmbedParams {
                                d: d as u32,
                                use_pe: u32::from(cfg.absolute_position == AbsolutePosition::Sinusoidal),
                                vocab: v as u32,
                                ..EmbedParams::default()
                            },
                        ),
                        &tok,
                        &model.emb,
                        &model.pe,
                        &acts.x,
                    ],
                    Disp::Threads(d as u32),
                );
                for l in &model.layers {
                    b.norm(ids, &l.attn_norm, &acts.x, &acts.h, d, d, d);
                    b.matmul(ids, &acts.h, &l.wqkv, &acts.qkv, 3 * a, d, d, 3 * a, false, false);
                    let mut attn_out = &acts.ao;
                    match &l.kind {
                        Kind::Softmax { bias_kind, params, aux, rope, relu_norm } => {
                            let kc = z("k cache", ctxlen * a);
                            let vc = z("v cache", ctxlen * a);
                            state_bytes += 8 * (ctxlen * a) as u64;
                            b.op(
                                ids.rotary,
                                &[
                                    &uniform(
                                        dev,
                                        &RotaryParams {
                                            h: h as u32,
                                            dh: dh as u32,
                                            a: a as u32,
                                            rope: u32::from(rope.is_some()),
                                        },
                                    ),
                                    &acts.qkv,
                                    rope.as_ref().unwrap_or(&model.dummy),
                                    &kc,
                                    &vc,
                                ],
                                Disp::Threads(h as u32),
                            );
                            if let Some(c) = capture.as_mut() {
                                c.softmax(&mut b, &acts.qkv, &kc);
                            }
                            let attn_params = uniform(dev, params);
                            let bufs = [&attn_params, &acts.qkv, &kc, &vc, aux, &acts.ao];
                            let tiled = ids.attn_tiled[*bias_kind as usize];
                            let max_end = if tiled == usize::MAX {
                                0
                            } else {
                                attn_tiled_max_end(
                                    dh,
                                    *bias_kind,
                                    params.fire_hidden as usize,
                                    params.block as usize,
                                )
                            };
                            let heads = h as u32;
                            if tiled != usize::MAX {
                                b.op(tiled, &bufs, Disp::Attn { heads, max_end, tiled: true });
                            }
                            b.op(
                                ids.attn[*bias_kind as usize],
                                &bufs,
                                Disp::Attn { heads, max_end, tiled: false },
                            );
                            if *relu_norm {
                                b.simple_norm(ids, &acts.ao, &acts.an, a, a, gates::SIMPLE_RMS_EPS);
                                attn_out = &acts.an;
                            }
                        }
                        Kind::Linear { feat_kind, params, aux, dk, den_eps, gate, post } => {
                            let s_buf = z("linear state", h * dk * dh);
                            let z_buf = z("linear denominator", h * dh * dk);
                            let kstate = z("regla key max", 2 * h);
                            state_bytes += 4 * (2 * h * dk * dh + 2 * h) as u64;
                            let fparams = uniform(dev, params);
                            match gate {
                                Gate::None => {}
                                Gate::Gla { down, up, rank } => {
                                    b.matmul(
                                        ids, &acts.h, down, &acts.glow, *rank, d, d, *rank, false, false,
                                    );
                                    b.matmul(
                                        ids, &acts.glow, up, &acts.gpre, a, *rank, *rank, a, false, false,
                                    );
                                }
                                Gate::Regla { wgr } => {
                                    b.matmul(ids, &acts.h, wgr, &acts.gpre, 2 * a, d, d, 2 * a, false, false);
                                    b.op_slots(
                                        ids.regla_max,
                                        &[(0, &fparams), (2, &acts.qkv), (5, &acts.mrow), (9, &kstate)],
                                        Disp::Fixed(h as u32),
                                    );
                                }
                            }
                            b.op(
                                ids.feat[*feat_kind as usize],
                                &[
                                    &fparams, &acts.qkv, &acts.gpre, aux, &acts.mrow, &acts.fq, &acts.fk,
                                    &acts.lg,
                                ],
                                Disp::Threads(h as u32),
                            );
                            if let Some(c) = capture.as_mut() {
                                let gpre = matches!(gate, Gate::Regla { .. }).then_some(&acts.gpre);
                                c.linear(&mut b, [&acts.fq, &acts.fk, &acts.lg], *dk, gpre);
                            }
                            let scan_params = uniform(
                                dev,
                                &ScanParams {
                                    h: h as u32,
                                    dh: dh as u32,
                                    dk: *dk as u32,
                                    a: a as u32,
                                    den_eps: *den_eps,
                                    off_den: off_den as u32,
                                    off_s: off_s as u32,
                                    off_z: off_z as u32,
                                },
                            );
                            let hd = (h * dh) as u32;
                            b.op(
                                ids.scan,
                                &[
                                    &scan_params,
                                    &acts.fq,
                                    &acts.fk,
                                    &acts.lg,
                                    &acts.qkv,
                                    &s_buf,
                                    &z_buf,
                                    &acts.ao,
                                ],
                                Disp::Scan { pass: 0, per: hd },
                            );
                            let [local, carry, out] = ids.scan_chunk;
                            b.op_slots(
                                local,
                                &[
                                    (0, &scan_params),
                                    (2, &acts.fq),
                                    (3, &acts.fk),
                                    (4, &acts.lg),
                                    (5, &acts.qkv),
                                    (8, &acts.ao),
                                    (9, &scan_scratch),
                                ],
                                Disp::Scan { pass: 1, per: hd },
                            );
                            b.op_slots(
                                carry,
                                &[(0, &scan_params), (6, &s_buf), (7, &z_buf), (9, &scan_scratch)],
                                Disp::Scan { pass: 2, per: hd },
                            );
                            b.op_slots(
                                out,
                                &[(0, &scan_params), (2, &acts.fq), (8, &acts.ao), (9, &scan_scratch)],
                                Disp::Scan { pass: 3, per: hd },
                            );
                            match post {
                                Post::None => {}
                                Post::Simple => {
                                    b.simple_norm(ids, &acts.ao, &acts.an, a, a, gates::SIMPLE_RMS_EPS);
                                    attn_out = &acts.an;
                                }
                                Post::HeadNorm { gain } => {
                                    b.gain_norm(ids, &acts.ao, &acts.an, gain, dh, a, attn_eps());
                                    attn_out = &acts.an;
                                }
                                Post::HeadNormGate { gain, out_gate } => {
                                    b.gain_norm(ids, &acts.ao, &acts.an, gain, dh, a, attn_eps());
                                    b.matmul(ids, &acts.h, out_gate, &acts.og, a, d, d, a, false, false);
                                    b.ew(ids, EwOp::SiluGate, a, &acts.og, &acts.an);
                                    attn_out = &acts.an;
                                }
                            }
                        }
                    }
                    b.matmul(ids, attn_out, &l.wo, &acts.x, d, a, a, d, true, false);
                    b.norm(ids, &l.ffn_norm, &acts.x, &acts.h, d, d, d);
                    b.matmul(ids, &acts.h, &l.ffn_up, &acts.ffu, hid, d, d, hid, false, false);
                    match &l.ffn_gate {
                        Some(g) => {
                            b.matmul(ids, &acts.h, g, &acts.ffg, hid, d, d, hid, false, false);
                            b.ew(ids, EwOp::SiluGate, hid, &acts.ffg, &acts.ffu);
                        }
                        None => b.ew(ids, EwOp::Gelu, hid, &acts.ffg, &acts.ffu),
                    }
                    b.matmul(ids, &acts.ffu, &l.ffn_down, &acts.x, d, hid, hid, d, true, false);
                }
                b.norm(ids, &model.final_norm, &acts.x, &acts.h, d, d, d);
                let forward = std::mem::take(&mut b.ops);
                b.matmul(ids, &acts.h, &model.head, &acts.logits, v, d, d, v, false, false);
                let head_all = std::mem::take(&mut b.ops);
                b.matmul(ids, &acts.h, &model.head, &acts.logits, v, d, d, v, false, true);
                let head_last = std::mem::take(&mut b.ops);
                let sample_params =
                    uniform(dev, &SampleParams { vocab: v as u32, ..SampleParams::default() });
                let sample = Op {
                    pipe: ids.sample,
                    bind: bind_group(
                        model,
                        ids.sample,
                        &[(0, &sample_params), (1, &acts.logits), (2, &tok), (3, &tok_out)],
                    ),
                    disp: Disp::Fixed(1),
                };
                (step, tok, tok_out, acts.logits, staging, staging_tok, forward, head_all, head_last, sample)
            })
            .await?;
        let (step, tok, tok_out, logits, staging, staging_tok, forward, head_all, head_last, sample) = built;
        let top =
            ctx.scoped(|| sampling::TopSampler::new(model, top_pipe, &logits, &tok, &tok_out)).await??;
        Ok(GpuSession {
            model,
            pos: 0,
            rows_cap: rows,
            step,
            tok,
            tok_out,
            logits,
            staging,
            staging_tok,
            forward,
            head_all,
            head_last,
            sample,
            state_bytes,
            capture,
            top,
        })
    }

    /// Tokens processed so far.
    pub fn len(&self) -> usize {
        self.pos
    }

    /// No token processed yet.
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }

    /// Bytes of KV caches and recurrent states held on the GPU.
    pub fn state_bytes(&self) -> u64 {
        self.state_bytes
    }

    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        let cfg = &self.model.cfg;
        if tokens.is_empty() {
            return Err(CoreError::EmptyPrompt.into());
        }
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= cfg.vocab_size) {
            return Err(CoreError::TokenOutOfRange { id, vocab: cfg.vocab_size }.into());
        }
        if self.pos + tokens.len() > cfg.max_context {
            return Err(CoreError::ContextTooLong {
                requested: self.pos + tokens.len(),
                max: cfg.max_context,
            }
            .into());
        }
        Ok(())
    }

    fn encode(&self, enc: &mut wgpu::CommandEncoder, ops: &[&[Op]], rows: u32) {
        let maxd = self.model.ctx.caps().max_workgroups_per_dim.max(1);
        let mut pass =
            enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
        let end = (self.pos as u64).saturating_add(u64::from(rows));
        let chunked = rows as usize >= SCAN_CHUNKED_MIN;
        for op in ops.iter().flat_map(|o| o.iter()) {
            let (x, y) = match op.disp {
                Disp::Threads(per) => split((rows * per).div_ceil(64), maxd),
                Disp::Fixed(n) => split(n.div_ceil(64), maxd),
                Disp::Mat { outd, last } => (outd.div_ceil(16), if last { 1 } else { rows.div_ceil(16) }),
                Disp::Norm(groups) => (groups, rows),
                Disp::Attn { heads, max_end, tiled } => {
                    let use_tiled = rows > 1 && end <= u64::from(max_end);
                    match (tiled, use_tiled) {
                        (true, true) => (heads, rows.div_ceil(ATTN_TQ as u32)),
                        (false, false) => (heads, rows),
                        _ => continue,
                    }
                }
                Disp::Scan { pass: kind, per } => match (kind, chunked) {
                    (0, false) | (2, true) => split(per.div_ceil(64), maxd),
                    (1, true) => split((rows.div_ceil(SCAN_C as u32) * per).div_ceil(64), maxd),
                    (3, true) => split((rows * per).div_ceil(64), maxd),
                    _ => continue,
                },
            };
            let pipe = &self.model.pipes[op.pipe];
            pass.set_pipeline(&pipe.pipeline);
            pass.set_bind_group(0, &op.bind, &[]);
            pass.dispatch_workgroups(x.max(1), y.max(1), 1);
        }
    }

    /// Run `tokens` through the model; returns the logits of every row (`all`) or of the last one.
    async fn run(&mut self, tokens: &[u32], all: bool) -> Result<Vec<f32>> {
        self.check_tokens(tokens)?;
        let v = self.model.cfg.vocab_size;
        let ctx = self.model.ctx.clone();
        let mut out = Vec::with_capacity(if all { tokens.len() * v } else { v });
        let n_chunks = tokens.len().div_ceil(self.rows_cap);
        for (ci, chunk) in tokens.chunks(self.rows_cap).enumerate() {
            let rows = chunk.len();
            let last = ci + 1 == n_chunks;
            let step = Step { rows: rows as u32, pos0: self.pos as u32, ..Step::default() };
            ctx.queue.write_buffer(&self.step, 0, bytemuck::bytes_of(&step));
            ctx.queue.write_buffer(&self.tok, 0, &words(chunk));
            let mut enc = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
            let read = if all {
                self.encode(&mut enc, &[&self.forward, &self.head_all], rows as u32);
                rows * v
            } else if last {
                self.encode(&mut enc, &[&self.forward, &self.head_last], rows as u32);
                v
            } else {
                self.encode(&mut enc, &[&self.forward], rows as u32);
                0
            };
            if read > 0 {
                enc.copy_buffer_to_buffer(&self.logits, 0, &self.staging, 0, (4 * read) as u64);
            }
            let cmd = enc.finish();
            ctx.submit(cmd).await?;
            self.pos += rows;
            if read > 0 {
                out.extend(ctx.read_words(&self.staging, read).await?.into_iter().map(f32::from_bits));
            }
        }
        Ok(out)
    }

    /// Prefill `tokens`; returns the logits of the last token (`[vocab]`).
    pub async fn prefill(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.run(tokens, false).await
    }

    /// Prefill `tokens`; returns the logits of every token (`[n, vocab]`).
    pub async fn prefill_all(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.run(tokens, true).await
    }

    /// One decode step (one submission); returns the logits of `token`'s position.
    pub async fn step(&mut self, token: u32) -> Result<Vec<f32>> {
        self.run(&[token], false).await
    }

    /// One decode step that also picks the next token by argmax on the GPU, in the same submission;
    /// only that token id is read back.
    pub async fn step_greedy(&mut self, token: u32) -> Result<u32> {
        self.check_tokens(&[token])?;
        let ctx = self.model.ctx.clone();
        let step = Step { rows: 1, pos0: self.pos as u32, ..Step::default() };
        ctx.queue.write_buffer(&self.step, 0, bytemuck::bytes_of(&step));
        ctx.queue.write_buffer(&self.tok, 0, &words(&[token]));
        let mut enc = ctx.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: None });
        self.encode(&mut enc, &[&self.forward, &self.head_last, std::slice::from_ref(&self.sample)], 1);
        enc.copy_buffer_to_buffer(&self.tok_out, 0, &self.staging_tok, 0, 4);
        let cmd = enc.finish();
        ctx.submit(cmd).await?;
        self.pos += 1;
        let w = ctx.read_words(&self.staging_tok, 1).await?;
        w.first().copied().ok_or_else(|| GpuError::Readback("empty token readback".into()))
    }
}

/// Largest step end (first position + rows) for which the tiled attention kernel stays within
/// ATTN_BUDGET loop iterations per invocation (mirrors the loops of `prefill` in attention.wgsl);
/// longer steps use the per-row kernel.
fn attn_tiled_max_end(dh: usize, bias_kind: BiasKind, fire_hidden: usize, block: usize) -> u32 {
    let dh4 = dh.div_ceil(4).max(1);
    let tk = (ATTN_TILE_VEC4 / dh4).max(1);
    let per_key = 2 * dh4 + 2 + if bias_kind == BiasKind::Fire { fire_hidden + 1 } else { 0 };
    let per_tile = (tk * dh4).div_ceil(ATTN_TQ * ATTN_KS) * 9 + tk.div_ceil(ATTN_KS) * per_key + 2;
    let fixed = dh4 * 5 + (ATTN_KS - 1) * (2 * dh4 + 2) + dh + 16;
    let tiles = ATTN_BUDGET.saturating_sub(fixed) / per_tile;
    if block > 0 && (block + ATTN_TQ).div_ceil(tk) < tiles {
        // A Diag block bounds the key range of every query tile.
        return u32::MAX;
    }
    u32::try_from(tiles * tk).unwrap_or(u32::MAX)
}

fn attn_eps() -> f32 {
    attnlab_core::attention::HEAD_NORM_EPS
}

fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn split(n: u32, maxd: u32) -> (u32, u32) {
    if n <= maxd {
        (n, 1)
    } else {
        (maxd, n.div_ceil(maxd))
    }
}

fn bind_group(m: &GpuModel, pipe: usize, slots: &[(u32, &wgpu::Buffer)]) -> wgpu::BindGroup {
    let entries: Vec<wgpu::BindGroupEntry> = slots
        .iter()
        .map(|&(binding, buf)| wgpu::BindGroupEntry { binding, resource: buf.as_entire_binding() })
        .collect();
    m.ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &m.pipes[pipe].layout,
        entries: &entries,
    })
}

/// Records ops; bindings 0 = op params, 1 = step uniform, 2.. = the buffers in order.
struct Builder<'a> {
    m: &'a GpuModel,
    step: &'a wgpu::Buffer,
    ops: Vec<Op>,
}

impl Builder<'_> {
    fn op(&mut self, pipe: usize, bufs: &[&wgpu::Buffer], disp: Disp) {
        let mut slots: Vec<(u32, &wgpu::Buffer)> = vec![(0, bufs[0]), (1, self.step)];
        for (i, b) in bufs[1..].iter().enumerate() {
            slots.push((2 + i as u32, b));
        }
        self.ops.push(Op { pipe, bind: bind_group(self.m, pipe, &slots), disp });
    }

    fn op_slots(&mut self, pipe: usize, slots: &[(u32, &wgpu::Buffer)], disp: Disp) {
        let mut s: Vec<(u32, &wgpu::Buffer)> = slots.to_vec();
        s.push((1, self.step));
        self.ops.push(Op { pipe, bind: bind_group(self.m, pipe, &s), disp });
    }

    #[allow(clippy::too_many_arguments)]
    fn matmul(
        &mut self,
        ids: &PipeIds,
        x: &wgpu::Buffer,
        w: &wgpu::Buffer,
        y: &wgpu::Buffer,
        outd: usize,
        inp: usize,
        x_stride: usize,
        y_stride: usize,
        accumulate: bool,
        last: bool,
    ) {
        let p = uniform(
            &self.m.ctx.device,
            &MatmulParams {
                outd: outd as u32,
                inp: inp as u32,
                x_stride: x_stride as u32,
                x_off: 0,
                y_stride: y_stride as u32,
                y_off: 0,
                accumulate: u32::from(accumulate),
                last_only: u32::from(last),
            },
        );
        self.op(ids.matmul, &[&p, x, w, y], Disp::Mat { outd: outd as u32, last });
    }

    #[allow(clippy::too_many_arguments)]
    fn norm(
        &mut self,
        ids: &PipeIds,
        n: &NormG,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        gsz: usize,
        xs: usize,
        ys: usize,
    ) {
        let p = self.norm_params(n.kind, gsz, n.eps, xs, ys);
        let b = n.b.as_ref().unwrap_or(&self.m.dummy);
        self.op(ids.norm, &[&p, x, &n.w, b, y], Disp::Norm(1));
    }

    fn simple_norm(
        &mut self,
        ids: &PipeIds,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        gsz: usize,
        width: usize,
        eps: f32,
    ) {
        let p = self.norm_params(NormOp::SimpleRms, gsz, eps, width, width);
        let dummy = &self.m.dummy;
        self.op(ids.norm, &[&p, x, dummy, dummy, y], Disp::Norm((width / gsz) as u32));
    }

    #[allow(clippy::too_many_arguments)]
    fn gain_norm(
        &mut self,
        ids: &PipeIds,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        gain: &wgpu::Buffer,
        gsz: usize,
        width: usize,
        eps: f32,
    ) {
        let p = self.norm_params(NormOp::Rms, gsz, eps, width, width);
        let dummy = &self.m.dummy;
        self.op(ids.norm, &[&p, x, gain, dummy, y], Disp::Norm((width / gsz) as u32));
    }

    fn norm_params(&self, kind: NormOp, gsz: usize, eps: f32, xs: usize, ys: usize) -> wgpu::Buffer {
        let p = NormParams {
            gsz: gsz as u32,
            kind: kind.code(),
            eps,
            x_stride: xs as u32,
            y_stride: ys as u32,
            ..NormParams::default()
        };
        uniform(&self.m.ctx.device, &p)
    }

    fn ew(&mut self, ids: &PipeIds, op: EwOp, width: usize, a: &wgpu::Buffer, y: &wgpu::Buffer) {
        let p = uniform(
            &self.m.ctx.device,
            &EwParams { width: width as u32, op: op.code(), ..EwParams::default() },
        );
        self.op(ids.ew, &[&p, a, y], Disp::Threads(width as u32));
    }
}
