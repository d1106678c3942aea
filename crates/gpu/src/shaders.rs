//! The WGSL sources, one file per op family, from `shaders/` at the repository root. WGSL has no
//! includes, so a [`Shader`] is composed: the generated prelude (kind constants and shared sizes
//! from [`crate::params`]) if it uses them, then the shared snippets it needs, then its own file.

/// A WGSL file as (file name, text).
pub type File = (&'static str, &'static str);

macro_rules! wgsl {
    ($f:literal) => {
        ($f, include_str!(concat!("../../../shaders/", $f)))
    };
}

/// The step uniform `st` at binding 1 (rows, first position).
const STEP: File = wgsl!("step.wgsl");
/// 64-wide workgroup reductions.
const REDUCE: File = wgsl!("reduce.wgsl");
/// A softmax layer's `AttnParams` at binding 0 and its position bias B_h(i, j).
const ATTENTION_COMMON: File = wgsl!("attention_common.wgsl");

/// One query row's streaming softmax over the KV cache (attention.wgsl's decode kernel, decode.wgsl).
const ATTENTION_ROW: File = wgsl!("attention_row.wgsl");
/// A normalized value from a row's statistics (RMSNorm, LayerNorm, SimpleRMSNorm).
const NORM_VALUE: File = wgsl!("norm_value.wgsl");
/// GELU (tanh and erf forms), SiLU.
const ACTIVATIONS: File = wgsl!("activations.wgsl");
/// Weight matrices read as vectors of four elements (after the snippet of a [`WeightVec`]).
const WEIGHTS: File = wgsl!("weights.wgsl");
/// f32 matrices: 16-byte vectors ([`WeightVec::F32`]).
const WEIGHTS_F32: File = wgsl!("weights_f32.wgsl");
/// f16 / bf16 matrices widened by integer operations ([`WeightVec::Halves`]).
const WEIGHTS_HALF: File = wgsl!("weights_half.wgsl");
/// f16 matrices widened by the hardware, shader-f16 ([`WeightVec::F16`]).
const WEIGHTS_F16: File = wgsl!("weights_f16.wgsl");

/// How the weight-reading shaders bind a model's matrices: the snippet placed before
/// weights.wgsl, by the matrices' storage and the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WeightVec {
    /// f32 values, four per 16-byte vector.
    F32,
    /// f16 or bf16 values two to a u32 word (four per 8-byte vector), widened by integer operations.
    Halves,
    /// f16 values (four per 8-byte vector) widened by the hardware: `enable f16;`, a device with
    /// `SHADER_F16`.
    F16,
}

impl WeightVec {
    /// The vectors for matrices stored as `kind` on a device with (or without) shader-f16.
    pub(crate) fn new(kind: crate::params::WeightKind, shader_f16: bool) -> WeightVec {
        use crate::params::WeightKind as K;
        match kind {
            K::F32 => WeightVec::F32,
            K::F16 if shader_f16 => WeightVec::F16,
            K::F16 | K::Bf16 => WeightVec::Halves,
        }
    }

    fn snippet(self) -> File {
        match self {
            WeightVec::F32 => WEIGHTS_F32,
            WeightVec::Halves => WEIGHTS_HALF,
            WeightVec::F16 => WEIGHTS_F16,
        }
    }
}
/// A linear layer's `FeatParams` at binding 0 and the feature maps of one (row, head).
const FEATURES: File = wgsl!("features.wgsl");
/// The fused decode's shared bindings, block input, norms and per-head output projection.
const DECODE_COMMON: File = wgsl!("decode_common.wgsl");
/// The trainer's parameter block, generic buffers and index helpers.
const TRAIN_COMMON: File = wgsl!("train_common.wgsl");

/// Snippets: not modules on their own, prepended to the shaders that use them.
pub const SNIPPETS: &[File] = &[
    STEP,
    REDUCE,
    ATTENTION_COMMON,
    ATTENTION_ROW,
    NORM_VALUE,
    ACTIVATIONS,
    WEIGHTS,
    WEIGHTS_F32,
    WEIGHTS_HALF,
    WEIGHTS_F16,
    FEATURES,
    DECODE_COMMON,
    TRAIN_COMMON,
];

/// A shader module: the prelude (if `prelude`), `snippets` in order, then `file`.
#[derive(Debug)]
pub struct Shader {
    /// File name of its own source (also the module's label).
    pub name: &'static str,
    file: &'static str,
    prelude: bool,
    snippets: &'static [File],
}

impl Shader {
    const fn new(file: File, prelude: bool, snippets: &'static [File]) -> Shader {
        Shader { name: file.0, file: file.1, prelude, snippets }
    }

    /// The composed WGSL source (weight matrices, if it reads any, as f32).
    pub fn source(&self) -> String {
        self.source_for(WeightVec::F32)
    }

    /// Whether it reads weight matrices (through weights.wgsl).
    pub fn reads_weights(&self) -> bool {
        self.snippets().any(|n| n == WEIGHTS.0)
    }

    /// The composed source reading weight matrices as `vectors` (their snippet before
    /// weights.wgsl; [`WeightVec::F16`] puts `enable f16;` first).
    pub fn source_for(&self, vectors: WeightVec) -> String {
        let mut s = String::new();
        if vectors == WeightVec::F16 {
            s.push_str("enable f16;\n");
        }
        s.push_str(crate::params::WGSL_STRUCTS);
        if self.prelude {
            s.push_str(&crate::params::wgsl_prelude());
        }
        for (name, text) in self.snippets {
            if *name == WEIGHTS.0 {
                s.push_str(vectors.snippet().1);
            }
            s.push_str(text);
        }
        s.push_str(self.file);
        s
    }

    /// Names of the snippets prepended to this shader.
    pub fn snippets(&self) -> impl Iterator<Item = &'static str> {
        self.snippets.iter().map(|f| f.0)
    }
}

/// matmul / gemv (tiled).
pub static MATMUL: Shader = Shader::new(wgsl!("matmul.wgsl"), true, &[WEIGHTS, STEP]);
/// gelu, silu gates.
pub static ELEMENTWISE: Shader = Shader::new(wgsl!("elementwise.wgsl"), true, &[STEP, ACTIVATIONS]);
/// RMSNorm, LayerNorm, SimpleRMSNorm over row groups.
pub static NORM: Shader = Shader::new(wgsl!("norm.wgsl"), true, &[STEP, REDUCE, NORM_VALUE]);
/// Token + sinusoidal embeddings.
pub static EMBED: Shader = Shader::new(wgsl!("embed.wgsl"), true, &[WEIGHTS, STEP]);
/// RoPE and the KV-cache store.
pub static ROTARY: Shader = Shader::new(wgsl!("rotary.wgsl"), false, &[STEP]);
/// Softmax attention with bias kinds, streaming softmax, Diag blocks.
pub static ATTENTION: Shader =
    Shader::new(wgsl!("attention.wgsl"), true, &[STEP, REDUCE, ATTENTION_COMMON, ATTENTION_ROW]);
/// Linear-family feature maps and log-gates (+ ReGLA running key max).
pub static LINEAR_FEATURES: Shader = Shader::new(wgsl!("linear_features.wgsl"), true, &[STEP, FEATURES]);
/// Gated linear-attention scan / fused decode state update / chunked prefill.
pub static LINEAR_SCAN: Shader = Shader::new(wgsl!("linear_scan.wgsl"), true, &[STEP]);
/// Greedy and temperature / top-k / top-p sampling.
pub static SAMPLE: Shader = Shader::new(wgsl!("sample.wgsl"), false, &[]);
/// Fused decode: softmax-family attention, the FFN and the logits of one row.
pub static DECODE: Shader = Shader::new(
    wgsl!("decode.wgsl"),
    true,
    &[WEIGHTS, STEP, REDUCE, NORM_VALUE, DECODE_COMMON, ATTENTION_COMMON, ATTENTION_ROW, ACTIVATIONS],
);
/// Fused decode: a linear-attention layer's attention of one row.
pub static DECODE_LINEAR: Shader = Shader::new(
    wgsl!("decode_linear.wgsl"),
    true,
    &[WEIGHTS, STEP, REDUCE, NORM_VALUE, DECODE_COMMON, FEATURES, ACTIVATIONS],
);
/// Introspection capture: a step's activation rows copied into a trace buffer.
pub static CAPTURE: Shader = Shader::new(wgsl!("capture.wgsl"), false, &[STEP]);
/// Introspection: bounded, downsampled attention matrices (softmax family and implied linear).
pub static ATTENTION_MAP: Shader =
    Shader::new(wgsl!("attention_map.wgsl"), true, &[REDUCE, ATTENTION_COMMON]);

/// The trainer's strided, batched matrix product.
pub static GEMM: Shader = Shader::new(wgsl!("gemm.wgsl"), false, &[]);
/// The trainer's row, attention, loss and AdamW kernels.
pub static TRAIN: Shader = Shader::new(wgsl!("train.wgsl"), false, &[REDUCE, ACTIVATIONS, TRAIN_COMMON]);

/// The trainer's per-channel gated linear attention.
pub static TRAIN_GATED: Shader = Shader::new(wgsl!("train_gated.wgsl"), false, &[TRAIN_COMMON]);

/// Every shader module.
pub static SHADERS: &[&Shader] = &[
    &MATMUL,
    &ELEMENTWISE,
    &NORM,
    &EMBED,
    &ROTARY,
    &ATTENTION,
    &LINEAR_FEATURES,
    &LINEAR_SCAN,
    &SAMPLE,
    &DECODE,
    &DECODE_LINEAR,
    &CAPTURE,
    &ATTENTION_MAP,
    &GEMM,
    &TRAIN,
    &TRAIN_GATED,
];

/// Whether naga guards every loop with its 64-bit iteration counter ("force_loop_bounding", on
/// by default since wgpu 25). Off here unless `ATTNLAB_LOOP_GUARD=on`: every loop in `shaders/`
/// runs to a bound fixed before it starts (a counter against a uniform or a constant, or `base`
/// stepping down by whole workgroups to a multiple of the workgroup below it), so none can run
/// forever. On an H200 (docs/bench.md) the guard cost the trainer 1.6× (a 16 × 128 step 174k
/// against 107k tokens/s) and decode 1.4×, as gfx-rs/wgpu#7698 reports for other pipelines.
pub fn loop_guard() -> bool {
    std::env::var("ATTNLAB_LOOP_GUARD").is_ok_and(|v| v == "on")
}

/// Compile `source` (a composed [`Shader`]) on `dev`, with naga's loop guard as [`loop_guard`]
/// says and every other runtime check (bounds checks included) kept.
pub fn create_module(dev: &wgpu::Device, label: Option<&str>, source: String) -> wgpu::ShaderModule {
    let desc = wgpu::ShaderModuleDescriptor { label, source: wgpu::ShaderSource::Wgsl(source.into()) };
    if loop_guard() {
        return dev.create_shader_module(desc);
    }
    let checks =
        wgpu::ShaderRuntimeChecks { force_loop_bounding: false, ..wgpu::ShaderRuntimeChecks::checked() };
    // SAFETY: the only check dropped is the loop guard, and every loop in these shaders is bounded
    // (see `loop_guard`); on WebGPU this is `create_shader_module`.
    unsafe { dev.create_shader_module_trusted(desc, checks) }
}

/// Every shader's own file, as written (without prelude and snippets).
pub fn files() -> impl Iterator<Item = File> {
    SHADERS.iter().map(|s| (s.name, s.file))
}

#[cfg(test)]
mod tests {
    use super::{files, WeightVec, SHADERS, SNIPPETS, WEIGHTS_F16, WEIGHTS_F32, WEIGHTS_HALF};

    fn validate_with(src: &str, caps: naga::valid::Capabilities) -> Result<naga::valid::ModuleInfo, String> {
        let module = naga::front::wgsl::parse_str(src).map_err(|e| e.emit_to_string(src))?;
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
            .validate(&module)
            .map_err(|e| format!("{e:?}"))
    }

    fn validate(src: &str) -> Result<naga::valid::ModuleInfo, String> {
        validate_with(src, naga::valid::Capabilities::default())
    }

    /// `loop_guard` compiles without naga's loop guard on the premise that every loop ends: each
    /// `for` counts up by a step to an upper bound, doubles from a nonzero start to one, or halves
    /// to zero; each `loop` walks `base` down by a workgroup and breaks when it reaches its floor
    /// (the break right before the step). A new loop of another form fails here until argued for.
    #[test]
    fn every_loop_has_a_fixed_bound() {
        let counted = |header: &str| -> bool {
            let Some(inner) = header.strip_prefix("for (var ").and_then(|h| h.strip_suffix(") {")) else {
                return false;
            };
            let parts: Vec<&str> = inner.split(';').map(str::trim).collect();
            let [init, cond, step] = parts[..] else { return false };
            let Some((var, start)) = init.split_once(" = ") else { return false };
            let up = cond.starts_with(&format!("{var} < ")) || cond.starts_with(&format!("{var} <= "));
            let by = |op: &str| step.strip_prefix(&format!("{var} = {var} {op} "));
            match (by("+"), by("*"), by("/")) {
                (Some(inc), _, _) => {
                    let names = inc.split(|c: char| !(c.is_alphanumeric() || c == '_'));
                    up && inc != "0u" && names.into_iter().all(|n| n != var)
                }
                (_, Some("2u"), _) => up && start != "0u",
                (_, _, Some("2u")) => cond == format!("{var} > 0u"),
                _ => false,
            }
        };
        for (name, text) in files().chain(SNIPPETS.iter().copied()) {
            let lines: Vec<&str> = text.lines().map(str::trim).collect();
            for (i, line) in lines.iter().enumerate() {
                let code = line.split("//").next().unwrap_or("").trim();
                assert!(!code.starts_with("while"), "{name}:{}: a while loop", i + 1);
                if code.starts_with("for (") {
                    assert!(counted(code), "{name}:{}: `{code}` has no fixed bound", i + 1);
                }
                if code == "loop {" {
                    let body = &lines[i + 1..];
                    let step = body.iter().position(|l| l.starts_with("base = base - "));
                    let ok = step.is_some_and(|k| {
                        k >= 3 && body[k - 3].starts_with("if (base == ") && body[k - 2] == "break;"
                    });
                    assert!(ok, "{name}:{}: a loop that does not step `base` down to a break", i + 1);
                }
            }
        }
    }

    /// Every file in `shaders/` is listed here, and every composed shader parses and validates with
    /// naga (the compiler wgpu uses).
    #[test]
    fn every_shader_parses_and_validates() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shaders");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .expect("shaders/ exists")
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".wgsl"))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> =
            files().chain(SNIPPETS.iter().copied()).map(|(n, _)| n.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed, "every WGSL file must be listed in SHADERS or SNIPPETS");
        for shader in SHADERS {
            if let Err(e) = validate(&shader.source()) {
                panic!("{}: {e}", shader.name);
            }
        }
    }

    /// The weight-reading shaders validate with each way of binding matrices; the shader-f16 one
    /// with the f16 capabilities only (without them naga refuses `enable f16`).
    #[test]
    fn weight_readers_validate_with_every_weight_vec() {
        use naga::valid::Capabilities as C;
        let f16 = C::SHADER_FLOAT16 | C::SHADER_FLOAT16_IN_FLOAT32;
        let readers: Vec<_> = SHADERS.iter().filter(|s| s.reads_weights()).collect();
        assert_eq!(readers.len(), 4, "matmul, embed, decode, decode_linear");
        for shader in readers {
            for (vectors, alias) in [(WeightVec::F32, "vec4<u32>"), (WeightVec::Halves, "vec2<u32>")] {
                let src = shader.source_for(vectors);
                assert!(src.contains(&format!("alias WeightVec = {alias};")), "{}", shader.name);
                if let Err(e) = validate(&src) {
                    panic!("{} ({vectors:?}): {e}", shader.name);
                }
            }
            let src = shader.source_for(WeightVec::F16);
            assert!(src.starts_with("enable f16;") && src.contains("alias WeightVec = vec4<f16>;"));
            if let Err(e) = validate_with(&src, f16) {
                panic!("{} (shader-f16): {e}", shader.name);
            }
            assert!(validate(&src).is_err(), "{}: f16 source accepted without the capability", shader.name);
        }
    }

    /// Every snippet is prepended to at least one shader, so naga validates it there (the
    /// [`WeightVec`] snippets before weights.wgsl, `weight_readers_validate_with_every_weight_vec`).
    #[test]
    fn every_snippet_is_used() {
        let vec_snippets = [WEIGHTS_F32.0, WEIGHTS_HALF.0, WEIGHTS_F16.0];
        for (name, _) in SNIPPETS.iter().filter(|(n, _)| !vec_snippets.contains(n)) {
            assert!(
                SHADERS.iter().any(|s| s.snippets().any(|n| n == *name)),
                "{name} is prepended to no shader"
            );
        }
    }

    /// The validator is not a rubber stamp: a broken shader is rejected.
    #[test]
    fn a_broken_shader_is_rejected() {
        assert!(validate("@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }").is_err());
    }
}
