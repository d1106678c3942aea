//! Helpers shared by the GPU test files (each file is its own crate and uses a subset).
#![allow(dead_code)]

use attnlab_core::config::{AttentionSpec, ModelConfig, SizePreset, VARIANT_IDS};
use attnlab_core::variants::lrpe::{LrpeCore, LrpeNormalize, LrpeP, LrpeTheta};
use attnlab_core::variants::transnormer::{TransnormerFlavor, TransnormerRole};
use attnlab_gpu::GpuContext;

/// The core's test helpers, for its architecture configs (one definition for both crates).
#[path = "../../../core/tests/common.rs"]
mod core_common;

/// The six architecture configs of the checkpoint importer (GQA/MQA, partial and rescaled RoPE,
/// projection biases, parallel residual, embedding norm, learned positions, exact GELU; see
/// `architecture_configs` in crates/core/tests/common.rs), 200 positions.
pub fn architecture_configs() -> Vec<(String, ModelConfig)> {
    core_common::architecture_configs()
}

// Only the import tests use these; the other test crates sharing this module do not.
#[allow(unused_imports)]
pub use core_common::{hf_fixtures, hf_reference, mild_fast_decay, with_random_biases};

/// A projection bias (`layers.i.attn.{bq,bk,bv,bo}`, `layers.i.ffn.{b_gate,b_up,b_down}`) or a
/// LayerNorm bias (`emb_norm`, `final_norm`, `layers.i.{attn,ffn}_norm`).
/// The adapter (CI: Mesa lavapipe). Without one the tests fail unless `ATTNLAB_SKIP_GPU=1`.
pub fn context() -> Option<GpuContext> {
    match pollster::block_on(GpuContext::new()) {
        Ok(c) => Some(c),
        Err(e) => {
            if std::env::var("ATTNLAB_SKIP_GPU").is_ok_and(|v| v == "1") {
                eprintln!("skipping GPU test (ATTNLAB_SKIP_GPU=1): {e}");
                None
            } else {
                panic!("no usable GPU adapter ({e}); install mesa-vulkan-drivers libvulkan1 or set ATTNLAB_SKIP_GPU=1");
            }
        }
    }
}

/// A tiny model shape (vocab 61, 2 layers × 2 heads of 16) with `max_context` positions.
pub fn tiny(max_context: usize) -> SizePreset {
    SizePreset {
        vocab_size: 61,
        d_model: 32,
        n_layers: 2,
        n_heads: 2,
        head_dim: 16,
        ffn_hidden: 48,
        train_context: 32,
        max_context,
    }
}

/// `n` pseudo-random token ids below `vocab` (an LCG: the same for a seed on every machine).
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
    assert_eq!(a.len(), b.len(), "row lengths differ");
    let scale = a.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
    a.iter().zip(b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

/// Every catalog id plus TransNormer T1, four LRPE core × P combinations, the LRPE denominator and
/// a ReGLA/ALiBi hybrid, on [`tiny`] shapes with `max_context` positions (Diag blocks of 8).
pub fn configs_with(max_context: usize) -> Vec<(String, ModelConfig)> {
    let mut out = Vec::new();
    for id in VARIANT_IDS {
        let mut cfg = ModelConfig::preset(id, tiny(max_context)).expect("preset");
        for l in cfg.layers.iter_mut() {
            if let AttentionSpec::Transnormer(attnlab_core::variants::transnormer::Transnormer {
                block_size,
                ..
            }) = l
            {
                *block_size = 8;
            }
        }
        out.push((id.to_string(), cfg));
    }
    let mut t1 = ModelConfig::preset("transnormer", tiny(max_context)).expect("preset");
    t1.layers = [TransnormerRole::Diag, TransnormerRole::Norm]
        .into_iter()
        .map(|role| {
            AttentionSpec::Transnormer(attnlab_core::variants::transnormer::Transnormer {
                flavor: TransnormerFlavor::T1,
                role,
                block_size: 8,
            })
        })
        .collect();
    out.push(("transnormer-t1".into(), t1));
    for (core, p) in [
        (LrpeCore::Rotation, LrpeP::Identity),
        (LrpeCore::Mixed, LrpeP::OddEven),
        (LrpeCore::Permutation, LrpeP::Householder),
        (LrpeCore::Complex, LrpeP::Householder),
    ] {
        let mut cfg = ModelConfig::preset("lrpe", tiny(max_context)).expect("preset");
        let spec = AttentionSpec::Lrpe(attnlab_core::variants::lrpe::LrpeSpec {
            core,
            p,
            theta: LrpeTheta::Learned,
            normalize: LrpeNormalize::Rmsnorm,
            seed: 7,
        });
        cfg.layers = vec![spec.clone(), spec];
        out.push((format!("lrpe-{core:?}-{p:?}"), cfg));
    }
    let mut den = ModelConfig::preset("lrpe", tiny(max_context)).expect("preset");
    let spec = AttentionSpec::Lrpe(attnlab_core::variants::lrpe::LrpeSpec {
        core: LrpeCore::Rotation,
        p: LrpeP::Identity,
        theta: LrpeTheta::Fixed,
        normalize: LrpeNormalize::Denominator,
        seed: 3,
    });
    den.layers = vec![spec.clone(), spec];
    out.push(("lrpe-denominator".into(), den));
    let mut hybrid = ModelConfig::preset("regla", tiny(max_context)).expect("preset");
    hybrid.layers[1] = AttentionSpec::Alibi(attnlab_core::variants::alibi::Alibi { slopes: None });
    out.push(("hybrid-regla-alibi".into(), hybrid));
    out
}
