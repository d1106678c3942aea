//! The WGSL sources, one file per op family, from `shaders/` at the repository root.

/// matmul / gemv (tiled).
pub const MATMUL: &str = include_str!("../../../shaders/matmul.wgsl");
/// gelu, silu gates.
pub const ELEMENTWISE: &str = include_str!("../../../shaders/elementwise.wgsl");
/// RMSNorm, LayerNorm, SimpleRMSNorm over row groups.
pub const NORM: &str = include_str!("../../../shaders/norm.wgsl");
/// Token + sinusoidal embeddings.
pub const EMBED: &str = include_str!("../../../shaders/embed.wgsl");
/// RoPE and the KV-cache store.
pub const ROTARY: &str = include_str!("../../../shaders/rotary.wgsl");
/// Softmax attention with bias kinds, streaming softmax, Diag blocks (attention_common.wgsl prepended).
pub const ATTENTION: &str = concat!(
    include_str!("../../../shaders/attention_common.wgsl"),
    include_str!("../../../shaders/attention.wgsl")
);
/// Linear-family feature maps and log-gates (+ ReGLA running key max).
pub const LINEAR_FEATURES: &str = include_str!("../../../shaders/linear_features.wgsl");
/// Gated linear-attention scan / fused decode state update.
pub const LINEAR_SCAN: &str = include_str!("../../../shaders/linear_scan.wgsl");
/// Greedy sampling (argmax).
pub const SAMPLE: &str = include_str!("../../../shaders/sample.wgsl");
/// Softmax-layer parameters and position bias B_h(i, j): a snippet prepended to the kernels that need
/// them (WGSL has no includes).
pub const ATTENTION_COMMON: &str = include_str!("../../../shaders/attention_common.wgsl");
/// Introspection capture: a step's activation rows copied into a trace buffer.
pub const CAPTURE: &str = include_str!("../../../shaders/capture.wgsl");
/// Introspection: bounded, downsampled attention matrices (softmax family and implied linear).
pub const ATTENTION_MAP: &str = concat!(
    include_str!("../../../shaders/attention_common.wgsl"),
    include_str!("../../../shaders/attention_map.wgsl")
);

/// Every shader as (file name, source).
pub const SHADERS: &[(&str, &str)] = &[
    ("matmul.wgsl", MATMUL),
    ("elementwise.wgsl", ELEMENTWISE),
    ("norm.wgsl", NORM),
    ("embed.wgsl", EMBED),
    ("rotary.wgsl", ROTARY),
    ("attention.wgsl", ATTENTION),
    ("linear_features.wgsl", LINEAR_FEATURES),
    ("linear_scan.wgsl", LINEAR_SCAN),
    ("sample.wgsl", SAMPLE),
    ("capture.wgsl", CAPTURE),
    ("attention_map.wgsl", ATTENTION_MAP),
];

/// Snippets (file name, source): not modules on their own, prepended to the shaders that use them.
pub const SNIPPETS: &[(&str, &str)] = &[("attention_common.wgsl", ATTENTION_COMMON)];

#[cfg(test)]
mod tests {
    use super::{SHADERS, SNIPPETS};

    /// Every file in `shaders/` is listed here, parses and validates with naga (the compiler wgpu uses).
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
        let mut listed: Vec<String> = SHADERS.iter().chain(SNIPPETS).map(|(n, _)| n.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed, "every WGSL file must be listed in SHADERS");
        for (name, src) in SHADERS {
            let module = naga::front::wgsl::parse_str(src)
                .unwrap_or_else(|e| panic!("{name}: {}", e.emit_to_string(src)));
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::default(),
            )
            .validate(&module)
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        }
    }

    /// Every snippet is prepended to at least one shader, so naga validates it there.
    #[test]
    fn every_snippet_is_used() {
        for (name, src) in SNIPPETS {
            assert!(SHADERS.iter().any(|(_, s)| s.starts_with(src)), "{name} is prepended to no shader");
        }
    }

    /// The validator is not a rubber stamp: a broken shader is rejected.
    #[test]
    fn a_broken_shader_is_rejected() {
        let bad = "@compute @workgroup_size(1) fn main() { let x: f32 = 1u; }";
        let parsed = naga::front::wgsl::parse_str(bad);
        let ok = parsed.is_ok_and(|m| {
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::default(),
            )
            .validate(&m)
            .is_ok()
        });
        assert!(!ok);
    }
}
