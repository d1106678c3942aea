//! The shipped configs of the variants whose presets changed (issue 14: √d embedding scale, T5
//! `max_distance`, LRPE denominator) parse to the settings they were retrained with.

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

/// The shipped sinusoidal, T5 and LRPE models were retrained with the issue-14 fixes: embeddings
/// scaled by √d_model (Vaswani §3.4), T5 buckets up to a quarter of the training length (MEP/NeoX),
/// LRPE with the paper's denominator (its Householder vector is stored but not trained; `theta` is
/// learned).
#[test]
fn shipped_sinusoidal_t5_and_lrpe_configs_carry_the_fixes() {
    let (sin, _) = shipped("sinusoidal");
    assert!(sin.scale_embeddings);
    assert_eq!(sin.embedding_scale(), (sin.d_model as f32).sqrt());
    let (t5, _) = shipped("t5");
    for l in &t5.layers {
        let AttentionSpec::T5(t) = l else { panic!("t5 layer expected, got {}", l.variant_id()) };
        assert_eq!((t.num_buckets, t.max_distance), (32, t5.train_context / 4));
    }
    let (lrpe, back) = shipped("lrpe");
    for l in &lrpe.layers {
        let AttentionSpec::Lrpe(s) = l else { panic!("lrpe layer expected, got {}", l.variant_id()) };
        assert_eq!(
            (s.p, s.theta, s.normalize),
            (LrpeP::Householder, LrpeTheta::Learned, LrpeNormalize::Denominator)
        );
    }
    assert!(back.contains("denominator"));
}

/// The LRPE ablation differs from the shipped lrpe only in θ: fixed instead of learned (and its
/// name and description), so their perplexity gap is θ's doing.
#[test]
fn the_lrpe_ablation_differs_from_lrpe_only_in_theta() {
    let (lrpe, _) = shipped("lrpe");
    let (mut fixed, _) = shipped("lrpe-theta-fixed");
    for l in &mut fixed.layers {
        let AttentionSpec::Lrpe(s) = l else { panic!("lrpe layer expected, got {}", l.variant_id()) };
        assert_eq!(s.theta, LrpeTheta::Fixed);
        s.theta = LrpeTheta::Learned;
    }
    (fixed.name, fixed.description) = (lrpe.name.clone(), lrpe.description.clone());
    assert_eq!(fixed, lrpe);
}
