//! The trainer's pipelines (gemm.wgsl, train.wgsl) and the recorded ops that replay them: each op
//! is a pipeline, a bind group (its own parameter uniform first) and a fixed grid, since a training
//! step's shapes never change.

use crate::model::pipes::{bind_group_layout, spec, Bind, PipeSpec};
use crate::model::uniform;
use crate::params::GemmParams;
use crate::shaders;
use bytemuck::Pod;

use Bind::{Read as R, Uniform as U, Write as W};

/// A trainer kernel: an index into [`SPECS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum K {
    Gemm,
    EmbedFwd,
    EmbedBwd,
    RmsFwd,
    RmsBwd,
    RmsDw,
    SwigluFwd,
    SwigluBwd,
    Rotate,
    SoftmaxFwd,
    SoftmaxBwd,
    TableGrad,
    Xent,
    Sumsq,
    Adamw,
    FeatureFwd,
    FeatureBwd,
    CausalWeights,
    DenFwd,
    DenBwd,
    SrmsFwd,
    SrmsBwd,
    GateFwd,
    GateBwd,
    Colsum,
    Cumsum,
    MulAcc,
    GatedScores,
    GatedDfeat,
    GatedPv,
    GatedDp,
    GatedDv,
    RefinedFwd,
    RefinedBwd,
    ExpmaxFwd,
    ExpmaxBwd,
    RunmaxFwd,
    RunmaxBwd,
    Householder,
    Permute,
    RotGrad,
    KeyforgetFwd,
    KeyforgetBwd,
    BiasGrad,
    CopeFwd,
    CopeBwd,
    CopeGrads,
    ComplexFwd,
    ComplexBwd,
    ComplexGrad,
}

const fn train(entry: &'static str, slots: &'static [(u32, Bind)]) -> PipeSpec {
    spec(&shaders::TRAIN, entry, &[], slots)
}

const fn gated(entry: &'static str, slots: &'static [(u32, Bind)]) -> PipeSpec {
    spec(&shaders::TRAIN_GATED, entry, &[], slots)
}

/// Every trainer pipeline, in the order of [`K`] (the pipeline tests check each layout against its
/// entry point).
pub(crate) const SPECS: &[PipeSpec] = &[
    spec(&shaders::GEMM, "main", &[], &[(0, U), (1, R), (2, R), (3, W)]),
    train("embed_fwd", &[(0, U), (1, R), (2, R), (4, R), (5, W)]),
    train("embed_bwd", &[(0, U), (1, R), (4, R), (5, W)]),
    train("rms_fwd", &[(0, U), (1, R), (2, R), (5, W), (6, W)]),
    train("rms_bwd", &[(0, U), (1, R), (2, R), (3, R), (5, W)]),
    train("rms_dw", &[(0, U), (1, R), (2, R), (3, R), (5, W)]),
    train("swiglu_fwd", &[(0, U), (1, R), (2, R), (5, W)]),
    train("swiglu_bwd", &[(0, U), (1, R), (2, R), (3, R), (5, W), (6, W)]),
    train("rotate", &[(0, U), (1, R), (5, W)]),
    train("softmax_fwd", &[(0, U), (1, R), (5, W)]),
    train("softmax_bwd", &[(0, U), (1, R), (5, W)]),
    train("table_grad", &[(0, U), (1, R), (5, W)]),
    train("xent", &[(0, U), (4, R), (5, W), (6, W)]),
    train("sumsq", &[(0, U), (1, R), (5, W)]),
    train("adamw", &[(1, R), (5, W), (6, W), (7, W), (8, U)]),
    train("feature_fwd", &[(0, U), (1, R), (5, W)]),
    train("feature_bwd", &[(0, U), (1, R), (2, R), (5, W)]),
    train("causal_weights", &[(0, U), (1, R), (2, R), (5, W)]),
    train("den_fwd", &[(0, U), (1, R), (5, W), (6, W)]),
    train("den_bwd", &[(0, U), (1, R), (2, R), (3, R), (5, W), (6, W)]),
    train("srms_fwd", &[(0, U), (1, R), (5, W)]),
    train("srms_bwd", &[(0, U), (1, R), (2, R), (5, W)]),
    gated("gate_fwd", &[(0, U), (1, R), (2, R), (5, W)]),
    gated("gate_bwd", &[(0, U), (1, R), (2, R), (3, R), (5, W)]),
    gated("colsum", &[(0, U), (1, R), (5, W)]),
    gated("cumsum", &[(0, U), (5, W)]),
    gated("mul_acc", &[(0, U), (1, R), (2, R), (5, W)]),
    gated("gated_scores", &[(0, U), (1, R), (2, R), (3, R), (5, W)]),
    gated("gated_dfeat", &[(0, U), (1, R), (2, R), (3, R), (5, W)]),
    gated("gated_pv", &[(0, U), (1, R), (2, R), (3, R), (5, W)]),
    gated("gated_dp", &[(0, U), (1, R), (2, R), (3, R), (5, W)]),
    gated("gated_dv", &[(0, U), (1, R), (2, R), (3, R), (5, W)]),
    gated("refined_fwd", &[(0, U), (1, R), (2, R), (3, R), (5, W)]),
    gated("refined_bwd", &[(0, U), (1, R), (2, R), (3, R), (5, W), (6, W)]),
    gated("expmax_fwd", &[(0, U), (1, R), (5, W)]),
    gated("expmax_bwd", &[(0, U), (1, R), (2, R), (5, W)]),
    gated("runmax_fwd", &[(0, U), (1, R), (5, W), (6, W)]),
    gated("runmax_bwd", &[(0, U), (1, R), (2, R), (3, R), (5, W), (6, W), (7, W)]),
    train("householder", &[(0, U), (1, R), (5, W)]),
    train("permute", &[(0, U), (1, R), (4, R), (5, W)]),
    train("rot_grad", &[(0, U), (1, R), (2, R), (3, R), (5, W)]),
    gated("keyforget_fwd", &[(0, U), (1, R), (2, R), (5, W), (6, W)]),
    gated("keyforget_bwd", &[(0, U), (1, R), (2, R), (3, R), (5, W), (6, W), (7, W)]),
    train("bias_grad", &[(0, U), (1, R), (5, W)]),
    gated("cope_fwd", &[(0, U), (1, R), (2, R), (5, W), (6, W), (7, W)]),
    gated("cope_bwd", &[(0, U), (1, R), (2, R), (3, R), (5, W), (6, W), (7, W)]),
    gated("cope_grads", &[(0, U), (1, R), (2, R), (5, W)]),
    train("complex_fwd", &[(0, U), (1, R), (2, R), (5, W)]),
    train("complex_bwd", &[(0, U), (1, R), (2, R), (5, W)]),
    train("complex_grad", &[(0, U), (1, R), (2, R), (5, W)]),
];

/// Largest workgroup count of one grid dimension that every adapter accepts (WebGPU's default).
const MAX_GROUPS: u32 = 65535;

/// A grid of `groups` workgroups, folded into y above [`MAX_GROUPS`] (the kernels flatten it).
pub(super) fn grid(groups: usize) -> [u32; 3] {
    let g = groups.max(1) as u32;
    if g <= MAX_GROUPS {
        [g, 1, 1]
    } else {
        [MAX_GROUPS, g.div_ceil(MAX_GROUPS), 1]
    }
}

/// A grid of 64-wide workgroups covering `n` invocations.
pub(super) fn threads(n: usize) -> [u32; 3] {
    grid(n.div_ceil(64))
}

/// A recorded dispatch.
pub(super) struct Op {
    kernel: K,
    bind: wgpu::BindGroup,
    grid: [u32; 3],
}

#[cfg(not(target_arch = "wasm32"))]
impl Op {
    /// The kernel's entry point and the grid (for the step profile).
    pub fn describe(&self) -> (&'static str, [u32; 3]) {
        let name = match self.kernel {
            K::Gemm => "gemm",
            k => SPECS[k as usize].entry,
        };
        (name, self.grid)
    }
}

/// The built pipelines and the ops recorded with them.
pub(super) struct Kernels {
    dev: wgpu::Device,
    pipes: Vec<(wgpu::ComputePipeline, wgpu::BindGroupLayout)>,
}

impl Kernels {
    /// Build every trainer pipeline (call inside a validation error scope).
    pub fn new(dev: &wgpu::Device) -> Kernels {
        let module = |sh: &shaders::Shader| shaders::create_module(dev, Some(sh.name), sh.source());
        let gemm = module(&shaders::GEMM);
        let (train, gated) = (module(&shaders::TRAIN), module(&shaders::TRAIN_GATED));
        let pipes = SPECS
            .iter()
            .map(|s| {
                let module = match s.shader.name {
                    n if n == shaders::GEMM.name => &gemm,
                    n if n == shaders::TRAIN_GATED.name => &gated,
                    _ => &train,
                };
                let layout = bind_group_layout(dev, s.entry, s.slots);
                let pl = dev.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some(s.entry),
                    bind_group_layouts: &[Some(&layout)],
                    immediate_size: 0,
                });
                let pipeline = dev.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(s.entry),
                    layout: Some(&pl),
                    module,
                    entry_point: Some(s.entry),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        constants: &[],
                        zero_initialize_workgroup_memory: true,
                    },
                    cache: None,
                });
                (pipeline, layout)
            })
            .collect();
        Kernels { dev: dev.clone(), pipes }
    }

    /// An op of `kernel` with its parameter block `params` (a fresh uniform) and `bufs` bound to
    /// the other slots of its layout in order.
    pub fn op<T: Pod>(&self, kernel: K, params: &T, bufs: &[&wgpu::Buffer], grid: [u32; 3]) -> Op {
        self.op_on(kernel, &uniform(&self.dev, params), bufs, grid)
    }

    /// An op of `kernel` whose parameter block is the uniform buffer `uni` (rewritten per use).
    pub fn op_on(&self, kernel: K, uni: &wgpu::Buffer, bufs: &[&wgpu::Buffer], grid: [u32; 3]) -> Op {
        let spec = &SPECS[kernel as usize];
        let mut rest = bufs.iter().copied();
        let entries: Vec<wgpu::BindGroupEntry> = spec
            .slots
            .iter()
            .filter_map(|&(binding, kind)| {
                let buf = if kind == Bind::Uniform { Some(uni) } else { rest.next() }?;
                Some(wgpu::BindGroupEntry { binding, resource: buf.as_entire_binding() })
            })
            .collect();
        debug_assert!(rest.next().is_none(), "{}: more buffers than bindings", spec.entry);
        debug_assert_eq!(entries.len(), spec.slots.len(), "{}: one buffer per binding", spec.entry);
        let bind = self.dev.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(spec.entry),
            layout: &self.pipes[kernel as usize].1,
            entries: &entries,
        });
        Op { kernel, bind, grid }
    }

    /// Replay `ops` in one compute pass.
    pub fn encode(&self, enc: &mut wgpu::CommandEncoder, ops: &[&Op]) {
        let mut pass =
            enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: None, timestamp_writes: None });
        for op in ops {
            pass.set_pipeline(&self.pipes[op.kernel as usize].0);
            pass.set_bind_group(0, &op.bind, &[]);
            pass.dispatch_workgroups(op.grid[0], op.grid[1], op.grid[2]);
        }
    }
}

/// A gemm operand: a strided view of a buffer, `X(row, col) = buf[off + z1·s1 + z2·s2 + row·rs +
/// col·cs]` for batch index `z = z1·nh + z2`.
#[derive(Clone, Copy)]
pub(super) struct Mat<'a> {
    pub buf: &'a wgpu::Buffer,
    off: u32,
    rs: u32,
    cs: u32,
    s1: u32,
    s2: u32,
}

impl<'a> Mat<'a> {
    /// Row-major rows of `stride` values starting at `off`.
    pub fn rows(buf: &'a wgpu::Buffer, off: usize, stride: usize) -> Mat<'a> {
        Mat { buf, off: off as u32, rs: stride as u32, cs: 1, s1: 0, s2: 0 }
    }

    /// The transpose view.
    pub fn t(self) -> Mat<'a> {
        Mat { rs: self.cs, cs: self.rs, ..self }
    }

    /// With batch strides `s1` (outer index) and `s2` (inner index, heads).
    pub fn batched(self, s1: usize, s2: usize) -> Mat<'a> {
        Mat { s1: s1 as u32, s2: s2 as u32, ..self }
    }
}

/// A gemm's shape: `C (m × n) (+)= alpha · A (m × k) · B (k × n)` over `batch` matrices, `nh` of
/// them per outer index.
#[derive(Clone, Copy)]
pub(super) struct Shape {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub batch: usize,
    pub nh: usize,
    pub alpha: f32,
    pub accumulate: bool,
}

impl Shape {
    /// One unbatched product, written.
    pub fn mnk(m: usize, n: usize, k: usize) -> Shape {
        Shape { m, n, k, batch: 1, nh: 1, alpha: 1.0, accumulate: false }
    }
}

impl Kernels {
    /// The op `c = alpha·a·b` (or `c += …`).
    pub fn gemm(&self, s: Shape, c: Mat, a: Mat, b: Mat) -> Op {
        let p = GemmParams {
            m: s.m as u32,
            n: s.n as u32,
            k: s.k as u32,
            nh: s.nh.max(1) as u32,
            a_rs: a.rs,
            a_cs: a.cs,
            a_s1: a.s1,
            a_s2: a.s2,
            b_rs: b.rs,
            b_cs: b.cs,
            b_s1: b.s1,
            b_s2: b.s2,
            c_rs: c.rs,
            c_cs: c.cs,
            c_s1: c.s1,
            c_s2: c.s2,
            a_off: a.off,
            b_off: b.off,
            c_off: c.off,
            accumulate: u32::from(s.accumulate),
            alpha: s.alpha,
            ..GemmParams::default()
        };
        let grid = [s.n.div_ceil(64) as u32, s.m.div_ceil(64) as u32, s.batch as u32];
        self.op(K::Gemm, &p, &[a.buf, b.buf, c.buf], grid)
    }
}
