//! The shipped configs of the variants whose presets changed (issue 14: √d embedding scale, T5
//! `max_distance`, LRPE denominator) keep their exact meaning: they parse to the settings they were
//! trained with, and writing them back adds none of the new options.

use attnlab_core::config::{AttentionSpec, ModelConfig};
use attnlab_core::variants::lrpe::{LrpeNormalize, LrpeP, LrpeTheta};

fn shipped(name: &str) -> (ModelConfig, String) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../www/models")
        .join(name)
        .join("config.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let cfg = ModelConfig::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let back = cfg.to_json();
    (cfg, back)
}

#[test]
fn shipped_sinusoidal_t5_and_lrpe_configs_keep_their_settings() {
    let (sin, back) = shipped("sinusoidal");
    assert!(!sin.scale_embeddings && sin.embedding_scale() == 1.0);
    assert!(!back.contains("scale_embeddings"));
    let (t5, _) = shipped("t5");
    for l in &t5.layers {
        let AttentionSpec::T5(t) = l else { panic!("t5 layer expected, got {}", l.variant_id()) };
        assert_eq!((t.num_buckets, t.max_distance), (32, 128));
    }
    let (lrpe, _) = shipped("lrpe");
    for l in &lrpe.layers {
        let AttentionSpec::Lrpe(s) = l else { panic!("lrpe layer expected, got {}", l.variant_id()) };
        assert_eq!(
            (s.p, s.theta, s.normalize),
            (LrpeP::Householder, LrpeTheta::Learned, LrpeNormalize::Rmsnorm)
        );
    }
}
