//! Shared helpers of the core integration tests.
#![allow(dead_code)]

use attnlab_core::config::{AttentionSpec, ModelConfig, SizePreset, VARIANT_IDS};
use attnlab_core::variants::lrpe::{LrpeCore, LrpeNormalize, LrpeP, LrpeTheta};
use attnlab_core::variants::transnormer::{TransnormerFlavor, TransnormerRole};
use attnlab_core::Model;

/// A small size preset that still crosses chunk (64) and Diag-block (8) boundaries in tests.
pub fn tiny() -> SizePreset {
    SizePreset {
        vocab_size: 61,
        d_model: 32,
        n_layers: 2,
        n_heads: 2,
        head_dim: 16,
        ffn_hidden: 48,
        train_context: 32,
        max_context: 200,
    }
}

/// Every catalog variant plus the sub-options that change the math (TransNormer T1, LRPE cores × P,
/// LRPE denominator, hybrids), as named configs.
pub fn all_configs() -> Vec<(String, ModelConfig)> {
    let mut out = Vec::new();
    for id in VARIANT_IDS {
        let mut cfg = ModelConfig::preset(id, tiny()).expect("preset");
        if let AttentionSpec::Transnormer(_) = cfg.layers[0] {
            for l in cfg.layers.iter_mut() {
                if let AttentionSpec::Transnormer(attnlab_core::variants::transnormer::Transnormer {
                    block_size,
                    ..
                }) = l
                {
                    *block_size = 8;
                }
            }
        }
        out.push((id.to_string(), cfg));
    }
    let mut t1 = ModelConfig::preset("transnormer", tiny()).expect("preset");
    t1.layers = vec![
        AttentionSpec::Transnormer(attnlab_core::variants::transnormer::Transnormer {
            flavor: TransnormerFlavor::T1,
            role: TransnormerRole::Diag,
            block_size: 8,
        }),
        AttentionSpec::Transnormer(attnlab_core::variants::transnormer::Transnormer {
            flavor: TransnormerFlavor::T1,
            role: TransnormerRole::Norm,
            block_size: 8,
        }),
    ];
    out.push(("transnormer-t1".into(), t1));
    for core in [LrpeCore::Rotation, LrpeCore::Mixed, LrpeCore::Permutation, LrpeCore::Complex] {
        for p in [LrpeP::Identity, LrpeP::Householder, LrpeP::OddEven] {
            for theta in [LrpeTheta::Learned, LrpeTheta::Fixed] {
                let mut cfg = ModelConfig::preset("lrpe", tiny()).expect("preset");
                let spec = AttentionSpec::Lrpe(attnlab_core::variants::lrpe::LrpeSpec {
                    core,
                    p,
                    theta,
                    normalize: LrpeNormalize::Rmsnorm,
                    seed: 7,
                });
                cfg.layers = vec![spec.clone(), spec];
                out.push((format!("lrpe-{core:?}-{p:?}-{theta:?}"), cfg));
            }
        }
    }
    let mut den = ModelConfig::preset("lrpe", tiny()).expect("preset");
    let spec = AttentionSpec::Lrpe(attnlab_core::variants::lrpe::LrpeSpec {
        core: LrpeCore::Permutation,
        p: LrpeP::Identity,
        theta: LrpeTheta::Fixed,
        normalize: LrpeNormalize::Denominator,
        seed: 3,
    });
    den.layers = vec![spec.clone(), spec];
    out.push(("lrpe-denominator".into(), den));
    let mut hybrid = ModelConfig::preset("regla", tiny()).expect("preset");
    hybrid.layers[1] = AttentionSpec::Alibi(attnlab_core::variants::alibi::Alibi { slopes: None });
    out.push(("hybrid-regla-alibi".into(), hybrid));
    let mut hybrid = ModelConfig::preset("gla", tiny()).expect("preset");
    hybrid.layers[0] = AttentionSpec::default_for("mep").expect("mep");
    out.push(("hybrid-mep-gla".into(), hybrid));
    out
}

/// Deterministic pseudo-random token ids.
pub fn tokens(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 33) % vocab as u64) as u32
        })
        .collect()
}

/// max |a − b| / max |a| over one row.
pub fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    let scale = a.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
    a.iter().zip(b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

/// A random model of `cfg`.
pub fn model(cfg: &ModelConfig, seed: u64) -> Model {
    Model::random(cfg.clone(), seed).expect("random model")
}
