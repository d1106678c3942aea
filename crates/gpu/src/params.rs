//! The host ↔ kernel contract: every parameter block a shader reads is a `#[repr(C)]` struct here,
//! and its WGSL declaration is generated from it ([`WGSL_STRUCTS`], prepended to every shader), so
//! the two cannot drift apart by hand. The tests below still compare the Rust layout with naga's
//! layout of the generated declaration (WGSL's alignment rules are not C's), and every kind code
//! is a `#[repr(u32)]` enum whose WGSL constants are generated from it ([`wgsl_prelude`]), together
//! with the sizes the kernels share with the host.

use bytemuck::{Pod, Zeroable};

/// A field of a parameter block as the tests compare it with WGSL.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
    /// The Rust scalar type (`u32` or `f32`), the same spelling as in WGSL.
    pub ty: &'static str,
}

/// A parameter block with a WGSL twin called [`GpuParams::NAME`].
#[cfg(test)]
pub(crate) trait GpuParams: Pod {
    const NAME: &'static str;
    /// Fields in declaration order.
    fn fields() -> Vec<Field>;
}

/// Declares `#[repr(C)]` Pod parameter blocks (u32 / f32 fields only), their field lists and their
/// WGSL declarations.
macro_rules! gpu_params {
    ($($(#[$m:meta])* struct $name:ident { $($(#[$fm:meta])* $f:ident: $t:ident,)* })*) => {
        /// WGSL declarations of every parameter block, generated from the Rust structs (the scalar
        /// types `u32` and `f32` are spelled the same in both languages).
        pub(crate) const WGSL_STRUCTS: &str = concat!($(
            "struct ", stringify!($name), " {\n",
            $("    ", stringify!($f), ": ", stringify!($t), ",\n",)*
            "}\n\n",
        )*);
        $(
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
        pub(crate) struct $name {
            $($(#[$fm])* pub $f: $t,)*
        }

        #[cfg(test)]
        impl GpuParams for $name {
            const NAME: &'static str = stringify!($name);
            fn fields() -> Vec<Field> {
                vec![$(Field {
                    name: stringify!($f),
                    offset: std::mem::offset_of!($name, $f),
                    size: std::mem::size_of::<$t>(),
                    ty: stringify!($t),
                },)*]
            }
        }
        )*
    };
}

gpu_params! {
    /// The step uniform every forward kernel binds at 1 (shaders/step.wgsl).
    struct Step {
        /// Rows of this step.
        rows: u32,
        /// Absolute position of its first row.
        pos0: u32,
        pad0: u32,
        pad1: u32,
    }

    /// matmul.wgsl: `y[r, y_off + o] (+)= Σ_i x[r·x_stride + x_off + i] · w[o·inp + i] (+ b[o])`.
    struct MatmulParams {
        outd: u32,
        inp: u32,
        x_stride: u32,
        x_off: u32,
        y_stride: u32,
        y_off: u32,
        accumulate: u32,
        last_only: u32,
        /// Add the bias `b[o]` (binding 5).
        bias: u32,
        pad0: u32,
        pad1: u32,
        pad2: u32,
    }

    /// norm.wgsl: a norm over groups of `gsz` values.
    struct NormParams {
        gsz: u32,
        /// A [`NormOp`].
        kind: u32,
        eps: f32,
        x_stride: u32,
        y_stride: u32,
        pad0: u32,
        pad1: u32,
        pad2: u32,
    }

    /// elementwise.wgsl.
    struct EwParams {
        width: u32,
        /// An [`EwOp`].
        op: u32,
        pad0: u32,
        pad1: u32,
    }

    /// embed.wgsl.
    struct EmbedParams {
        d: u32,
        use_pe: u32,
        vocab: u32,
        /// Factor on the token rows (`ModelConfig::embedding_scale`: √d_model or 1).
        emb_scale: f32,
    }

    /// rotary.wgsl.
    struct RotaryParams {
        h: u32,
        dh: u32,
        a: u32,
        rope: u32,
    }

    /// A softmax-family layer (attention_common.wgsl; attention.wgsl and attention_map.wgsl).
    struct AttnParams {
        h: u32,
        dh: u32,
        a: u32,
        /// TransNormer Diag block (0: causal).
        block: u32,
        scale: f32,
        /// T1 ReLU attention instead of softmax.
        relu: u32,
        /// Distance-table length ([`BiasKind::Table`]).
        table_len: u32,
        /// FIRE MLP width ([`BiasKind::Fire`]).
        fire_hidden: u32,
        fire_c: f32,
        fire_thr: f32,
        /// Integer positions of CoPE's embedding ([`BiasKind::Contextual`]).
        npos: u32,
        pad1: u32,
    }

    /// linear_features.wgsl: feature maps and log-gates of a linear-family layer.
    struct FeatParams {
        h: u32,
        dh: u32,
        dk: u32,
        a: u32,
        /// 1 + elu instead of elu ([`FeatKind::Elu`]).
        plus_one: u32,
        /// An [`LrpePKind`].
        lrpe_p: u32,
        /// An [`LrpeCoreKind`].
        lrpe_core: u32,
        n_angles: u32,
        scale: f32,
        normalizer: f32,
        /// Offset of the cos/sin (or permutation) table in `aux`.
        off_tab: u32,
        /// Offset of the per-layer vector (Householder v, gate biases, ln γ, HGRN2's lower bounds)
        /// in `aux`.
        off_vec: u32,
        /// Row stride of the gate pre-activations.
        gpre_stride: u32,
        /// ReGLA's running key max and seen flag `[H, 2]` at this offset of `kstate`.
        k_off: u32,
        /// Fast Decay: the value-axis log-gates `[rows, H, dh]` at this offset of the log-gate buffer.
        lgv_off: u32,
        pad2: u32,
    }

    /// linear_scan.wgsl: the gated scan and its chunked passes (`off_*`: scratch offsets).
    struct ScanParams {
        h: u32,
        dh: u32,
        dk: u32,
        a: u32,
        den_eps: f32,
        off_den: u32,
        off_s: u32,
        off_z: u32,
        /// The layer's state in the session's state buffer: S at `s_off`, z at `z_off`.
        s_off: u32,
        z_off: u32,
        /// 1: the value-axis log-gates `[rows, H, dh]` at `lgv_off` of `lg` decay S's columns too
        /// (Fast Decay); their chunk-local cumulative sums go to the scratch at `off_cv`.
        value_gate: u32,
        lgv_off: u32,
        off_cv: u32,
        pad0: u32,
        pad1: u32,
        pad2: u32,
    }

    /// sample.wgsl: greedy (`main`, `vocab` only) and temperature / top-k / top-p (`sample_top`).
    struct SampleParams {
        vocab: u32,
        top_k: u32,
        temperature: f32,
        top_p: f32,
        u: f32,
        npow2: u32,
        pad0: u32,
        pad1: u32,
    }

    /// capture.wgsl: rows of `width` copied into a trace buffer of `capacity` rows.
    struct CaptureParams {
        width: u32,
        capacity: u32,
        /// First word of the step's rows in the source buffer.
        src_off: u32,
        pad1: u32,
    }

    /// attention_map.wgsl: one layer's bounded, downsampled maps.
    struct MapParams {
        n: u32,
        out_n: u32,
        stride: u32,
        /// A [`MapStage`].
        stage: u32,
        h: u32,
        dk: u32,
        den: u32,
        den_eps: f32,
        /// 1: value-axis log-gates `[n, H, dh]` in `lgv` (Fast Decay); the map takes the mean of
        /// their decay over the head's value channels.
        value_gate: u32,
        dh: u32,
        /// The window's first query and first key (tokens): map row b is query
        /// min(n − 1, row0 + b·stride + stride − 1), column c covers keys col0 + [c·stride, (c+1)·stride).
        row0: u32,
        col0: u32,
    }

    /// gemm.wgsl (the trainer's strided, batched matrix product): `C_z(i, j) (+)= alpha·Σ_k A_z(i, k)
    /// B_z(k, j)`, `z = z1·nh + z2`, each operand at `off + z1·s1 + z2·s2 + row·rs + col·cs`.
    struct GemmParams {
        m: u32,
        n: u32,
        k: u32,
        /// Inner batch count (heads): `z2 = z mod nh`.
        nh: u32,
        a_rs: u32,
        a_cs: u32,
        a_s1: u32,
        a_s2: u32,
        b_rs: u32,
        b_cs: u32,
        b_s1: u32,
        b_s2: u32,
        c_rs: u32,
        c_cs: u32,
        c_s1: u32,
        c_s2: u32,
        a_off: u32,
        b_off: u32,
        c_off: u32,
        /// Add to C instead of writing it.
        accumulate: u32,
        alpha: f32,
        pad0: u32,
        pad1: u32,
        pad2: u32,
    }

    /// train.wgsl: the trainer's row, attention and loss kernels (each kernel's comment says which
    /// fields it reads).
    struct TrainParams {
        rows: u32,
        width: u32,
        /// Sequence length.
        t: u32,
        h: u32,
        dh: u32,
        /// Row stride of a q/k/v buffer.
        a: u32,
        /// A count: vocabulary, table length, rotated pairs, values.
        n: u32,
        /// A kernel's switch (accumulate, inverse rotation, add a table or a position row).
        flag: u32,
        scale: f32,
        eps: f32,
        /// Offset into the flat parameter or gradient buffer (softmax: the Diag block, 0 = causal).
        off0: u32,
        /// A kernel's variant (softmax or ReLU rows, feature map, mask or decay).
        mode: u32,
        /// A second offset into the flat parameter buffer.
        off1: u32,
        pad0: u32,
        pad1: u32,
        pad2: u32,
    }

    /// train.wgsl's `adamw`: one AdamW update of the flat parameter buffer.
    struct AdamParams {
        n: u32,
        /// The first `n_decay` values get weight decay.
        n_decay: u32,
        lr: f32,
        b1: f32,
        b2: f32,
        /// Bias corrections `1 − β^t`.
        bc1: f32,
        bc2: f32,
        eps: f32,
        /// `1 − lr·weight_decay`.
        decay: f32,
        /// Gradient factor of global-norm clipping.
        clip: f32,
        pad0: u32,
        pad1: u32,
    }

    /// decode.wgsl: one dispatch of the fused decode. `fa_*`: offsets of the regions of the
    /// decode activations `fa`; `off_*`: offsets of vectors in the layer's `aux` (norm gains and
    /// biases, projection biases). The `norm_*` fields describe the attention norm (the final norm
    /// in `head_block`).
    struct DecodeParams {
        d: u32,
        h: u32,
        dh: u32,
        a: u32,
        hid: u32,
        vocab: u32,
        /// Groups of 64 FFN units (`ffn_block` workgroups).
        slices: u32,
        /// Layer 0: the row is the token's embedding.
        first: u32,
        /// Add the absolute position table (`tab`, layer 0).
        use_pe: u32,
        /// RoPE table in `tab`.
        rope: u32,
        /// Norm of the embeddings (layer 0): 1, with `emb_kind` a [`NormOp`].
        emb_norm: u32,
        emb_kind: u32,
        emb_eps: f32,
        norm_kind: u32,
        norm_eps: f32,
        ffn_kind: u32,
        ffn_eps: f32,
        /// An [`EwOp`]: the FFN activation (`SiluGate`: SwiGLU).
        act: u32,
        /// GPT-NeoX parallel residual: the FFN's norm reads the block input.
        parallel: u32,
        /// A norm over all heads' outputs applied in `ffn_block` (1: on), `post_kind` a [`NormOp`]
        /// (T1 Diag's SimpleRMSNorm, a linear layer's RMSNorm over every channel), eps `post_eps`.
        post_norm: u32,
        post_kind: u32,
        post_eps: f32,
        fa_x: u32,
        fa_x1: u32,
        fa_ss: u32,
        fa_pa: u32,
        fa_pf: u32,
        off_emb_w: u32,
        off_emb_b: u32,
        off_norm_w: u32,
        off_norm_b: u32,
        off_bqkv: u32,
        off_bo: u32,
        off_ffn_w: u32,
        off_ffn_b: u32,
        off_bup: u32,
        off_bgate: u32,
        off_bdown: u32,
        /// Linear layers (decode_linear.wgsl): 1 low-rank GLA gate (`rank`, matrices in `aux` at
        /// `off_gdown`, `off_gup`), 2 ReGLA's gate rows `[2a, d]` in `wextra`.
        gate: u32,
        rank: u32,
        off_gdown: u32,
        off_gup: u32,
        /// Output norm of each head (RMSNorm over its dh channels, eps `head_eps`), before the gain.
        head_norm: u32,
        head_eps: f32,
        /// Multiply by the gain at `off_gain` (indexed by channel within the head, or by
        /// `head · dh + channel` when `gain_all`).
        gain: u32,
        gain_all: u32,
        off_gain: u32,
        /// Multiply by silu of the output gate, rows `[a, d]` in `wextra`.
        out_gate: u32,
        /// The layer's state in `fa`: S, z, ReGLA's key max (linear layers).
        s_off: u32,
        z_off: u32,
        k_off: u32,
        /// Denominator floor of a linear layer (0: no denominator).
        den_eps: f32,
        /// Softmax layers: split-K workgroups per head (each attends to one key range; `ffn_block`
        /// merges them); 0 in linear layers, whose block writes `PA[head]` and `SS[head]` itself.
        splits: u32,
        /// Fewest keys per split (more keys per split once the row has over `splits ×` as many).
        split_keys: u32,
        /// The attention's TransNormer Diag block (0: causal) and ReLU weights (T1), as in AttnParams.
        block: u32,
        relu: u32,
        /// Each split's (max, sum) `ML [H, splits, 2]` and normalized output `O [H, splits, dh]`.
        fa_ml: u32,
        fa_o: u32,
        /// Factor on the token's embedding row (layer 0; `ModelConfig::embedding_scale`).
        emb_scale: f32,
        pad1: u32,
    }
}

/// Declares `#[repr(u32)]` kind enums and the WGSL constant name of each variant.
macro_rules! gpu_kinds {
    ($($(#[$m:meta])* enum $name:ident { $($(#[$vm:meta])* $v:ident => $wgsl:ident,)* })*) => {
        $(
            $(#[$m])*
            #[repr(u32)]
            #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
            pub(crate) enum $name {
                $($(#[$vm])* $v,)*
            }

            impl $name {
                /// Every variant with its WGSL constant.
                pub(crate) const WGSL: &'static [(&'static str, $name)] = &[$((stringify!($wgsl), $name::$v),)*];

                /// The code the kernels compare with (the WGSL constant's value).
                pub(crate) const fn code(self) -> u32 {
                    self as u32
                }
            }
        )*

        /// Every kind constant as (WGSL name, value).
        pub(crate) fn kind_constants() -> Vec<(&'static str, u32)> {
            let mut out = Vec::new();
            $(out.extend($name::WGSL.iter().map(|&(n, k)| (n, k.code())));)*
            out
        }
    };
}

gpu_kinds! {
    /// Position bias of a softmax layer (override constant `BIAS_KIND`).
    enum BiasKind {
        None => BIAS_NONE,
        /// Per-head distance table B_h[i − j].
        Table => BIAS_TABLE,
        Fire => BIAS_FIRE,
        /// CoPE: gated, query-dependent positions (aux = position embedding `[npos, dh]`).
        Contextual => BIAS_CONTEXTUAL,
    }

    /// Feature map / log-gate of a linear layer (override constant `FEAT_KIND`).
    enum FeatKind {
        /// elu or 1 + elu, no decay (linear-elu, TransNormer Norm).
        Elu => FEAT_ELU,
        Lrpe => FEAT_LRPE,
        Gla => FEAT_GLA,
        Regla => FEAT_REGLA,
        Retnet => FEAT_RETNET,
        /// swish query, key-forget gate with its lower bound, key = 1 − forget gate (HGRN2).
        Hgrn2 => FEAT_HGRN2,
        /// Identity features, Fast Decay's two-sided gate: lnσ on the key and on the value axis.
        FastDecay => FEAT_FAST_DECAY,
    }

    /// LRPE's fixed P.
    enum LrpePKind {
        Identity => LRPE_P_IDENTITY,
        Householder => LRPE_P_HOUSEHOLDER,
        OddEven => LRPE_P_ODD_EVEN,
    }

    /// LRPE's core (mixed runs as rotation).
    enum LrpeCoreKind {
        Rotation => LRPE_CORE_ROTATION,
        Permutation => LRPE_CORE_PERMUTATION,
        Complex => LRPE_CORE_COMPLEX,
    }

    /// norm.wgsl's norms.
    enum NormOp {
        /// RMSNorm with gain, eps inside the root.
        Rms => NORM_RMS,
        /// LayerNorm with gain and bias.
        Layer => NORM_LAYER,
        /// SimpleRMSNorm x / (rms + eps), no gain.
        SimpleRms => NORM_SIMPLE_RMS,
    }

    /// elementwise.wgsl's epilogues.
    enum EwOp {
        /// y = gelu(y), tanh approximation.
        Gelu => EW_GELU,
        /// y = gelu(y), erf form.
        GeluExact => EW_GELU_EXACT,
        /// y = y · silu(a).
        SiluGate => EW_SILU_GATE,
    }

    /// How weight matrices are held on the GPU (shaders/weights.wgsl): f32 words, or two f16 or
    /// bf16 values per word, widened to f32 as they are read.
    enum WeightKind {
        F32 => WEIGHT_F32,
        F16 => WEIGHT_F16,
        Bf16 => WEIGHT_BF16,
    }

    /// The stage an attention map shows.
    enum MapStage {
        Logits => STAGE_LOGITS,
        Biased => STAGE_BIASED,
        Probabilities => STAGE_PROBABILITIES,
    }
}

/// Largest head dim the kernels hold in registers.
pub(crate) const MAX_DH: usize = 128;
/// Largest linear feature width per head.
pub(crate) const MAX_DK: usize = 256;
/// Rows per chunk of the chunked linear prefill.
pub(crate) const SCAN_C: usize = 64;
/// Query rows per workgroup of the tiled attention kernel.
pub(crate) const ATTN_TQ: usize = 16;
/// Key lanes per query row of the tiled attention kernel.
pub(crate) const ATTN_KS: usize = 16;
/// vec4 slots of one shared-memory K (or V) tile of the tiled attention kernel.
pub(crate) const ATTN_TILE_VEC4: usize = 512;
/// Widest model the fused decode holds in workgroup memory (d_model).
pub(crate) const FUSED_MAX_D: usize = 2048;
/// Vocabulary rows per workgroup of the fused decode's logits.
pub(crate) const FUSED_HEAD_ROWS: usize = 256;
/// Rows and outputs of a matmul workgroup's tile (matmul.wgsl).
pub(crate) const MATMUL_TILE: usize = 64;
/// Most split-K workgroups per head of the fused softmax decode.
pub(crate) const MAX_DECODE_SPLITS: usize = 32;
/// Fewest keys per split-K workgroup (one per lane).
pub(crate) const MIN_SPLIT_KEYS: usize = 64;
/// Default fewest keys per split-K workgroup ([`crate::GpuModel::set_decode_split_keys`]).
pub const DEFAULT_SPLIT_KEYS: u32 = 256;

/// Sizes shared by the host and the kernels (WGSL name, value).
pub(crate) fn size_constants() -> [(&'static str, usize); 10] {
    [
        ("MAX_DH", MAX_DH),
        ("MAX_DK", MAX_DK),
        ("SCAN_C", SCAN_C),
        ("ATTN_TQ", ATTN_TQ),
        ("ATTN_KS", ATTN_KS),
        ("ATTN_TILE_VEC4", ATTN_TILE_VEC4),
        ("MAX_MAP_SIDE", crate::model::MAX_MAP_SIDE),
        ("FUSED_MAX_D", FUSED_MAX_D),
        ("FUSED_HEAD_ROWS", FUSED_HEAD_ROWS),
        ("MATMUL_TILE", MATMUL_TILE),
    ]
}

/// The generated WGSL prelude: every kind constant and shared size, prepended to the shaders
/// that use them (crates/gpu/src/shaders.rs).
pub(crate) fn wgsl_prelude() -> String {
    let mut s = String::from("// Generated from crates/gpu/src/params.rs (kind enums, shared sizes).\n");
    for (name, v) in kind_constants() {
        s.push_str(&format!("const {name}: u32 = {v}u;\n"));
    }
    for (name, v) in size_constants() {
        s.push_str(&format!("const {name}: u32 = {v}u;\n"));
    }
    s
}

/// `value` as the bytes of a uniform buffer: a multiple of 16 bytes, at least 16.
pub(crate) fn uniform_bytes<T: Pod>(value: &T) -> Vec<u8> {
    let mut bytes = bytemuck::bytes_of(value).to_vec();
    bytes.resize(bytes.len().div_ceil(16).max(1) * 16, 0);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shaders::{self, Shader};
    use naga::{AddressSpace, Scalar, ScalarKind, TypeInner};

    /// One Rust parameter block and the shaders that declare and bind its WGSL twin.
    struct Twin {
        name: &'static str,
        size: usize,
        fields: Vec<Field>,
        shaders: Vec<&'static Shader>,
    }

    fn twin<T: GpuParams>(shaders: &[&'static Shader]) -> Twin {
        Twin { name: T::NAME, size: std::mem::size_of::<T>(), fields: T::fields(), shaders: shaders.to_vec() }
    }

    /// Every (Rust struct, WGSL struct of the same name, shader) pair.
    fn twins() -> Vec<Twin> {
        use shaders as s;
        vec![
            twin::<Step>(&[
                &s::MATMUL,
                &s::ELEMENTWISE,
                &s::NORM,
                &s::EMBED,
                &s::ROTARY,
                &s::ATTENTION,
                &s::LINEAR_FEATURES,
                &s::LINEAR_SCAN,
                &s::CAPTURE,
                &s::DECODE,
                &s::DECODE_LINEAR,
            ]),
            twin::<MatmulParams>(&[&s::MATMUL]),
            twin::<NormParams>(&[&s::NORM]),
            twin::<EwParams>(&[&s::ELEMENTWISE]),
            twin::<EmbedParams>(&[&s::EMBED]),
            twin::<RotaryParams>(&[&s::ROTARY]),
            twin::<AttnParams>(&[&s::ATTENTION, &s::ATTENTION_MAP, &s::DECODE]),
            twin::<DecodeParams>(&[&s::DECODE, &s::DECODE_LINEAR]),
            twin::<FeatParams>(&[&s::LINEAR_FEATURES, &s::DECODE_LINEAR]),
            twin::<ScanParams>(&[&s::LINEAR_SCAN]),
            twin::<SampleParams>(&[&s::SAMPLE]),
            twin::<CaptureParams>(&[&s::CAPTURE]),
            twin::<MapParams>(&[&s::ATTENTION_MAP]),
            twin::<GemmParams>(&[&s::GEMM]),
            twin::<TrainParams>(&[&s::TRAIN, &s::TRAIN_GATED]),
            twin::<AdamParams>(&[&s::TRAIN]),
        ]
    }

    fn parse(shader: &Shader) -> naga::Module {
        let src = shader.source();
        naga::front::wgsl::parse_str(&src)
            .unwrap_or_else(|e| panic!("{}: {}", shader.name, e.emit_to_string(&src)))
    }

    fn scalar_name(inner: &TypeInner) -> &'static str {
        match inner {
            TypeInner::Scalar(Scalar { kind: ScalarKind::Uint, width: 4 }) => "u32",
            TypeInner::Scalar(Scalar { kind: ScalarKind::Float, width: 4 }) => "f32",
            TypeInner::Scalar(Scalar { kind: ScalarKind::Sint, width: 4 }) => "i32",
            _ => "(not a 32-bit scalar)",
        }
    }

    /// (name, offset, size, scalar type) of a field.
    type Row = (String, usize, usize, &'static str);

    fn rows(fields: &[Field]) -> Vec<Row> {
        fields.iter().map(|f| (f.name.to_string(), f.offset, f.size, f.ty)).collect()
    }

    /// The WGSL struct `name` of `module` as fields, and its size.
    fn wgsl_struct(module: &naga::Module, name: &str) -> Option<(Vec<Row>, usize)> {
        let mut layouter = naga::proc::Layouter::default();
        layouter.update(module.to_ctx()).expect("layout");
        module.types.iter().find(|(_, t)| t.name.as_deref() == Some(name)).and_then(|(_, t)| match &t.inner {
            TypeInner::Struct { members, span } => {
                let fields = members
                    .iter()
                    .map(|m| {
                        let size = layouter[m.ty].size as usize;
                        let ty = scalar_name(&module.types[m.ty].inner);
                        (m.name.clone().unwrap_or_default(), m.offset as usize, size, ty)
                    })
                    .collect();
                Some((fields, *span as usize))
            }
            _ => None,
        })
    }

    /// Names of the struct types bound as uniform or storage variables of `module`.
    fn bound_structs(module: &naga::Module) -> Vec<String> {
        let mut out: Vec<String> = module
            .global_variables
            .iter()
            .filter(|(_, g)| matches!(g.space, AddressSpace::Uniform | AddressSpace::Storage { .. }))
            .filter_map(|(_, g)| {
                let t = &module.types[g.ty];
                matches!(t.inner, TypeInner::Struct { .. }).then(|| t.name.clone().unwrap_or_default())
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// Every Rust parameter block has the layout of its WGSL twin in every shader that binds it:
    /// the same field names in the same order, offsets, sizes, scalar types and total size.
    #[test]
    fn every_param_struct_matches_its_wgsl_twin() {
        for t in twins() {
            assert_eq!(t.size % 16, 0, "{}: a uniform block is a multiple of 16 bytes", t.name);
            for shader in &t.shaders {
                let module = parse(shader);
                let (fields, span) = wgsl_struct(&module, t.name)
                    .unwrap_or_else(|| panic!("{}: no WGSL struct {}", shader.name, t.name));
                assert_eq!(fields, rows(&t.fields), "{}: {} differs from its Rust twin", shader.name, t.name);
                assert_eq!(span, t.size, "{}: size of {}", shader.name, t.name);
            }
        }
    }

    /// The list of twins is complete: every struct a shader binds as a uniform or storage
    /// variable is registered for that shader, and every registered pair exists.
    #[test]
    fn every_bound_struct_has_a_registered_rust_twin() {
        let twins = twins();
        for shader in shaders::SHADERS {
            let bound = bound_structs(&parse(shader));
            let mut registered: Vec<String> = twins
                .iter()
                .filter(|t| t.shaders.iter().any(|s| s.name == shader.name))
                .map(|t| t.name.to_string())
                .collect();
            registered.sort();
            assert_eq!(
                bound, registered,
                "{}: bound parameter structs vs registered Rust twins",
                shader.name
            );
        }
    }

    /// The prelude declares every kind variant once, numbered in declaration order per enum.
    #[test]
    fn prelude_declares_every_kind() {
        let p = wgsl_prelude();
        assert_eq!(BiasKind::WGSL.len(), 4);
        for (i, (name, k)) in FeatKind::WGSL.iter().enumerate() {
            assert_eq!(k.code(), i as u32);
            assert!(p.contains(&format!("const {name}: u32 = {i}u;")), "{name}");
        }
        let mut names: Vec<&str> = kind_constants().iter().map(|c| c.0).collect();
        names.extend(size_constants().iter().map(|c| c.0));
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n, "WGSL constant names are unique");
    }

    /// Kind-valued expressions are compared with the generated names, never with bare numbers.
    #[test]
    fn shaders_compare_kinds_by_name() {
        let kinds = ["BIAS_KIND", "FEAT_KIND", "p.kind", "p.op", "p.lrpe_p", "p.lrpe_core", "mp.stage"];
        for (file, src) in shaders::files().chain(shaders::SNIPPETS.iter().copied()) {
            for k in kinds {
                for op in ["==", "!=", ">=", "<=", ">", "<"] {
                    let needle = format!("{k} {op} ");
                    for (at, _) in src.match_indices(&needle) {
                        let next = src[at + needle.len()..].chars().next().unwrap_or(' ');
                        assert!(
                            !next.is_ascii_digit(),
                            "{file}: `{k} {op} {next}…`: use the kind's constant"
                        );
                    }
                }
            }
        }
    }
}
