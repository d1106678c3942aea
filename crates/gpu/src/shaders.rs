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
/// Softmax attention with bias kinds, streaming softmax, Diag blocks.
pub const ATTENTION: &str = include_str!("../../../shaders/attention.wgsl");
/// Linear-family feature maps and log-gates (+ ReGLA running key max).
pub const LINEAR_FEATURES: &str = include_str!("../../../shaders/linear_features.wgsl");
/// Gated linear-attention scan / fused decode state update.
pub const LINEAR_SCAN: &str = include_str!("../../../shaders/linear_scan.wgsl");
/// Greedy sampling (argmax).
pub const SAMPLE: &str = include_str!("../../../shaders/sample.wgsl");

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
];

#[cfg(test)]
mod tests {
    use super::SHADERS;

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
        let mut listed: Vec<String> = SHADERS.iter().map(|(n, _)| n.to_string()).collect();
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
