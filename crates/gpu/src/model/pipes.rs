//! Compute pipelines: every (shader, entry point) the backend runs is a [`PipeSpec`] naming its
//! override constants and its bindings (checked against the composed WGSL in the tests below);
//! [`GpuModel::pipe`] builds and caches one per (spec, override values).

use super::layers::Kind;
use super::GpuModel;
use crate::error::{GpuError, Result};
use crate::params::{BiasKind, FeatKind, ATTN_TILE_VEC4};
use crate::shaders::{self, Shader};

/// How a binding is bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Bind {
    Uniform,
    /// `var<storage, read>`.
    Read,
    /// `var<storage, read_write>`.
    Write,
}

use Bind::{Read as R, Uniform as U, Write as W};

/// A compute entry point with its override constants (set by the caller, in this order) and its
/// group-0 bindings.
pub(crate) struct PipeSpec {
    pub shader: &'static Shader,
    pub entry: &'static str,
    pub overrides: &'static [&'static str],
    pub slots: &'static [(u32, Bind)],
}

pub(crate) const fn spec(
    shader: &'static Shader,
    entry: &'static str,
    overrides: &'static [&'static str],
    slots: &'static [(u32, Bind)],
) -> PipeSpec {
    PipeSpec { shader, entry, overrides, slots }
}

pub(super) const MATMUL: PipeSpec =
    spec(&shaders::MATMUL, "main", &["WEIGHT_KIND"], &[(0, U), (1, U), (2, R), (3, R), (4, W), (5, R)]);
pub(super) const ELEMENTWISE: PipeSpec =
    spec(&shaders::ELEMENTWISE, "main", &[], &[(0, U), (1, U), (2, R), (3, W)]);
pub(super) const NORM: PipeSpec =
    spec(&shaders::NORM, "main", &[], &[(0, U), (1, U), (2, R), (3, R), (4, R), (5, W)]);
pub(super) const EMBED: PipeSpec =
    spec(&shaders::EMBED, "main", &["WEIGHT_KIND"], &[(0, U), (1, U), (2, R), (3, R), (4, R), (5, W)]);
pub(super) const ROTARY: PipeSpec =
    spec(&shaders::ROTARY, "main", &[], &[(0, U), (1, U), (2, W), (3, R), (4, W), (5, W)]);
const ATTN_SLOTS: &[(u32, Bind)] = &[(0, U), (1, U), (2, R), (3, R), (4, R), (5, R), (6, W)];
pub(super) const ATTENTION: PipeSpec = spec(&shaders::ATTENTION, "main", &["BIAS_KIND"], ATTN_SLOTS);
pub(super) const ATTENTION_TILED: PipeSpec =
    spec(&shaders::ATTENTION, "prefill", &["BIAS_KIND", "TILE_KEYS"], ATTN_SLOTS);
pub(super) const FEATURES: PipeSpec = spec(
    &shaders::LINEAR_FEATURES,
    "main",
    &["FEAT_KIND"],
    &[(0, U), (1, U), (2, R), (3, R), (4, R), (5, W), (6, W), (7, W), (8, W)],
);
pub(super) const REGLA_MAX: PipeSpec =
    spec(&shaders::LINEAR_FEATURES, "regla_max", &[], &[(0, U), (1, U), (2, R), (5, W), (9, W)]);
pub(super) const SCAN: PipeSpec = spec(
    &shaders::LINEAR_SCAN,
    "main",
    &[],
    &[(0, U), (1, U), (2, R), (3, R), (4, R), (5, R), (6, W), (8, W)],
);
pub(super) const SCAN_LOCAL: PipeSpec = spec(
    &shaders::LINEAR_SCAN,
    "chunk_local",
    &[],
    &[(0, U), (1, U), (2, R), (3, R), (4, R), (5, R), (8, W), (9, W)],
);
pub(super) const SCAN_CARRY: PipeSpec =
    spec(&shaders::LINEAR_SCAN, "chunk_carry", &[], &[(0, U), (1, U), (6, W), (9, W)]);
pub(super) const SCAN_OUT: PipeSpec =
    spec(&shaders::LINEAR_SCAN, "chunk_out", &[], &[(0, U), (1, U), (2, R), (8, W), (9, W)]);
pub(super) const SAMPLE_GREEDY: PipeSpec =
    spec(&shaders::SAMPLE, "main", &[], &[(0, U), (1, R), (2, W), (3, W)]);
pub(super) const SAMPLE_TOP: PipeSpec =
    spec(&shaders::SAMPLE, "sample_top", &[], &[(0, U), (1, R), (2, W), (3, W), (4, W)]);
pub(super) const DECODE_ATTN: PipeSpec = spec(
    &shaders::DECODE,
    "attn_block",
    &["BIAS_KIND", "WEIGHT_KIND"],
    &[(0, U), (1, U), (2, U), (3, W), (4, R), (5, R), (6, R), (7, R), (8, W), (9, W), (10, R)],
);
pub(super) const DECODE_LINEAR: PipeSpec = spec(
    &shaders::DECODE_LINEAR,
    "linear_block",
    &["FEAT_KIND", "WEIGHT_KIND"],
    &[(0, U), (1, U), (2, U), (3, W), (4, R), (5, R), (6, R), (7, R), (8, R), (10, R)],
);
pub(super) const DECODE_FFN: PipeSpec = spec(
    &shaders::DECODE,
    "ffn_block",
    &["WEIGHT_KIND"],
    &[(1, U), (2, U), (3, W), (4, R), (11, R), (12, R), (13, R)],
);
pub(super) const DECODE_HEAD: PipeSpec =
    spec(&shaders::DECODE, "head_block", &["WEIGHT_KIND"], &[(2, U), (3, W), (4, R), (14, R), (15, W)]);
pub(super) const CAPTURE: PipeSpec = spec(&shaders::CAPTURE, "main", &[], &[(0, U), (1, U), (2, R), (3, W)]);
pub(super) const SOFTMAX_MAP: PipeSpec = spec(
    &shaders::ATTENTION_MAP,
    "softmax_map",
    &["BIAS_KIND"],
    &[(0, U), (1, U), (2, R), (3, R), (4, R), (5, W)],
);
pub(super) const LINEAR_MAP: PipeSpec =
    spec(&shaders::ATTENTION_MAP, "linear_map", &[], &[(1, U), (5, W), (6, R), (7, R), (8, R), (9, R)]);

/// Every spec (the tests check that each entry point of every shader has exactly one).
#[cfg(test)]
const ALL: &[&PipeSpec] = &[
    &MATMUL,
    &ELEMENTWISE,
    &NORM,
    &EMBED,
    &ROTARY,
    &ATTENTION,
    &ATTENTION_TILED,
    &FEATURES,
    &REGLA_MAX,
    &SCAN,
    &SCAN_LOCAL,
    &SCAN_CARRY,
    &SCAN_OUT,
    &SAMPLE_GREEDY,
    &SAMPLE_TOP,
    &DECODE_ATTN,
    &DECODE_LINEAR,
    &DECODE_FFN,
    &DECODE_HEAD,
    &CAPTURE,
    &SOFTMAX_MAP,
    &LINEAR_MAP,
];

/// A built pipeline and the bindings of its layout.
pub(super) struct Pipe {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
    pub slots: &'static [(u32, Bind)],
}

/// Pipelines of one block's attention.
pub(super) enum BlockPipes {
    Softmax(SoftmaxPipes),
    Linear(LinearPipes),
}

pub(super) struct SoftmaxPipes {
    pub rotary: usize,
    pub attn: usize,
    /// The tiled prefill kernel (absent when the adapter's workgroup memory is too small).
    pub tiled: Option<usize>,
}

pub(super) struct LinearPipes {
    pub feat: usize,
    /// ReGLA's running key max.
    pub regla_max: Option<usize>,
    pub scan: usize,
    /// Chunked scan passes: local, carry, out.
    pub chunk: [usize; 3],
}

/// Pipelines of the fused decode (shaders/decode.wgsl).
pub(super) struct DecodePipes {
    /// One per layer (its bias kind).
    pub attn: Vec<usize>,
    pub ffn: usize,
    pub head: usize,
}

/// Pipelines of a session, built before the session borrows the model immutably.
pub(super) struct PipeIds {
    pub matmul: usize,
    pub ew: usize,
    pub norm: usize,
    pub embed: usize,
    pub sample: usize,
    pub sample_top: usize,
    /// Introspection capture (trace sessions).
    pub capture: Option<usize>,
    /// One per layer.
    pub blocks: Vec<BlockPipes>,
    /// The fused decode, when the model has it and the session is not a trace.
    pub decode: Option<DecodePipes>,
}

impl GpuModel {
    /// Get or build the pipeline of `spec` with its override constants set to `values`.
    pub(super) fn pipe(&mut self, spec: &'static PipeSpec, values: &[f64]) -> usize {
        debug_assert_eq!(spec.overrides.len(), values.len(), "{}: override values", spec.entry);
        let consts: Vec<(&str, f64)> = spec.overrides.iter().copied().zip(values.iter().copied()).collect();
        let name = spec.shader.name;
        let key = format!("{name}:{}:{consts:?}", spec.entry);
        if let Some(&i) = self.pipe_ids.get(&key) {
            return i;
        }
        // Every weight-reading pipeline gets the model's WEIGHT_KIND and reads its matrices as the
        // model's vectors (shaders/weights.wgsl).
        let vectors =
            if spec.shader.reads_weights() { self.weight_vec() } else { crate::shaders::WeightVec::F32 };
        let dev = &self.ctx.device;
        let module = self
            .modules
            .entry((name, vectors))
            .or_insert_with(|| {
                crate::shaders::create_module(dev, Some(name), spec.shader.source_for(vectors))
            })
            .clone();
        let layout = bind_group_layout(dev, name, spec.slots);
        let pl = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(name),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(name),
            layout: Some(&pl),
            module: &module,
            entry_point: Some(spec.entry),
            compilation_options: wgpu::PipelineCompilationOptions {
                constants: &consts,
                zero_initialize_workgroup_memory: true,
            },
            cache: None,
        });
        self.pipes.push(Pipe { pipeline, layout, slots: spec.slots });
        self.pipe_ids.insert(key, self.pipes.len() - 1);
        self.pipes.len() - 1
    }

    /// Every pipeline a session of this model runs (plus capture for a trace session), built
    /// inside a validation error scope.
    pub(super) async fn session_pipes(&mut self, trace: bool) -> Result<PipeIds> {
        let ctx = self.ctx.clone();
        ctx.check()?;
        let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let wk = f64::from(self.weight_kind.code());
        let ids = PipeIds {
            matmul: self.pipe(&MATMUL, &[wk]),
            ew: self.pipe(&ELEMENTWISE, &[]),
            norm: self.pipe(&NORM, &[]),
            embed: self.pipe(&EMBED, &[wk]),
            sample: self.pipe(&SAMPLE_GREEDY, &[]),
            sample_top: self.pipe(&SAMPLE_TOP, &[]),
            capture: trace.then(|| self.pipe(&CAPTURE, &[])),
            blocks: (0..self.layers.len()).map(|i| self.block_pipes(i)).collect(),
            decode: (!trace && self.fused_on()).then(|| self.decode_pipes()),
        };
        if let Some(e) = scope.pop().await {
            return Err(GpuError::Validation(format!("pipeline creation: {e}")));
        }
        Ok(ids)
    }

    fn block_pipes(&mut self, layer: usize) -> BlockPipes {
        enum Need {
            Softmax(BiasKind),
            Linear(FeatKind, bool),
        }
        let need = match &self.layers[layer].kind {
            Kind::Softmax(s) => Need::Softmax(s.bias),
            Kind::Linear(l) => Need::Linear(l.feat, l.feat == FeatKind::Regla),
        };
        match need {
            Need::Softmax(bias_kind) => {
                let bias = f64::from(bias_kind.code());
                // K and V tiles of ATTN_TILE_VEC4 vec4s each (16 KiB: WebGPU's default limit; an
                // adapter below it only gets the per-row kernel). A contextual (CoPE) bias needs the
                // gates of all of a query's later keys, which the tiles do not have: per-row only.
                let tiled_fits = self.ctx.caps().max_workgroup_storage as usize >= 2 * ATTN_TILE_VEC4 * 16
                    && bias_kind != BiasKind::Contextual;
                let tile_keys = (ATTN_TILE_VEC4 / self.cfg.head_dim.div_ceil(4).max(1)).max(1);
                BlockPipes::Softmax(SoftmaxPipes {
                    rotary: self.pipe(&ROTARY, &[]),
                    attn: self.pipe(&ATTENTION, &[bias]),
                    tiled: tiled_fits.then(|| self.pipe(&ATTENTION_TILED, &[bias, tile_keys as f64])),
                })
            }
            Need::Linear(feat, regla) => BlockPipes::Linear(LinearPipes {
                feat: self.pipe(&FEATURES, &[f64::from(feat.code())]),
                regla_max: regla.then(|| self.pipe(&REGLA_MAX, &[])),
                scan: self.pipe(&SCAN, &[]),
                chunk: [self.pipe(&SCAN_LOCAL, &[]), self.pipe(&SCAN_CARRY, &[]), self.pipe(&SCAN_OUT, &[])],
            }),
        }
    }
}

impl GpuModel {
    fn decode_pipes(&mut self) -> DecodePipes {
        let wk = f64::from(self.weight_kind.code());
        let attn = (0..self.layers.len())
            .map(|i| match &self.layers[i].kind {
                Kind::Softmax(s) => {
                    let bias = f64::from(s.bias.code());
                    self.pipe(&DECODE_ATTN, &[bias, wk])
                }
                Kind::Linear(l) => {
                    let feat = f64::from(l.feat.code());
                    self.pipe(&DECODE_LINEAR, &[feat, wk])
                }
            })
            .collect();
        DecodePipes { attn, ffn: self.pipe(&DECODE_FFN, &[wk]), head: self.pipe(&DECODE_HEAD, &[wk]) }
    }
}

pub(crate) fn bind_group_layout(
    dev: &wgpu::Device,
    label: &str,
    slots: &[(u32, Bind)],
) -> wgpu::BindGroupLayout {
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
    dev.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(label), entries: &entries })
}

#[cfg(test)]
mod tests {
    use super::{Bind, PipeSpec, ALL};
    use crate::shaders::SHADERS;
    use naga::{AddressSpace, StorageAccess};

    fn module(spec: &PipeSpec) -> (naga::Module, naga::valid::ModuleInfo) {
        let src = spec.shader.source();
        let module = naga::front::wgsl::parse_str(&src).expect("parses (checked in shaders.rs)");
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        )
        .validate(&module)
        .expect("validates (checked in shaders.rs)");
        (module, info)
    }

    /// The bindings an entry point uses, with the kind their declaration asks for.
    fn used_slots(module: &naga::Module, info: &naga::valid::ModuleInfo, entry: &str) -> Vec<(u32, Bind)> {
        let index = module.entry_points.iter().position(|e| e.name == entry).expect("entry point exists");
        let uses = info.get_entry_point(index);
        let mut out: Vec<(u32, Bind)> = module
            .global_variables
            .iter()
            .filter(|(h, _)| !uses[*h].is_empty())
            .filter_map(|(_, g)| {
                let b = g.binding.as_ref()?;
                assert_eq!(b.group, 0, "{entry}: only group 0 is used");
                let kind = match g.space {
                    AddressSpace::Uniform => Bind::Uniform,
                    AddressSpace::Storage { access } if access.contains(StorageAccess::STORE) => Bind::Write,
                    AddressSpace::Storage { .. } => Bind::Read,
                    _ => return None,
                };
                Some((b.binding, kind))
            })
            .collect();
        out.sort();
        out
    }

    /// Each spec's layout is exactly the bindings its entry point uses, of the declared kinds, and
    /// its override constants exist in the shader.
    #[test]
    fn every_pipeline_layout_matches_its_entry_point() {
        for spec in ALL.iter().copied().chain(crate::train::SPECS) {
            let (module, info) = module(spec);
            let mut slots = spec.slots.to_vec();
            slots.sort();
            let what = format!("{}:{}", spec.shader.name, spec.entry);
            assert_eq!(used_slots(&module, &info, spec.entry), slots, "{what}: bindings");
            for name in spec.overrides {
                assert!(
                    module.overrides.iter().any(|(_, o)| o.name.as_deref() == Some(*name)),
                    "{what}: no override constant {name}"
                );
            }
        }
    }

    /// Every entry point of every shader has exactly one spec.
    #[test]
    fn every_entry_point_has_one_spec() {
        for shader in SHADERS {
            let src = shader.source();
            let module = naga::front::wgsl::parse_str(&src).expect("parses");
            for e in &module.entry_points {
                let n = ALL
                    .iter()
                    .copied()
                    .chain(crate::train::SPECS)
                    .filter(|s| s.shader.name == shader.name && s.entry == e.name)
                    .count();
                assert_eq!(n, 1, "{}:{} has {n} pipeline specs", shader.name, e.name);
            }
        }
    }
}
