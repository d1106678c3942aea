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

/// One config per architecture family of the checkpoint importer, each turning on the version-2
/// options that family needs (docs/model-format.md §2.1): grouped/multi-query attention, projection
/// biases, LayerNorm, exact and tanh GELU, parallel residual, partial and rescaled RoPE, learned
/// absolute positions, the embedding norm, untied heads, GQA on a linear-family layer, and keys
/// narrower than values (fla's GLA).
pub fn architecture_configs() -> Vec<(String, ModelConfig)> {
    use attnlab_core::config::{AbsolutePosition, Biases, FfnKind, NormKind};
    use attnlab_core::variants::rope::{Rope, RopeScaling};
    let base = |variant: &str| {
        let mut cfg = ModelConfig::preset(variant, tiny()).expect("preset");
        (cfg.n_heads, cfg.head_dim) = (4, 8);
        cfg.format_version = attnlab_core::config::FORMAT_VERSION;
        cfg
    };
    let rope = |rotary_dim, scaling| AttentionSpec::Rope(Rope { base: 500.0, rotary_dim, scaling });
    let all_biases = Biases { qkv: true, attn_out: true, ffn: true };
    let gpt_style = |mut cfg: ModelConfig| {
        (cfg.norm.kind, cfg.ffn.kind, cfg.biases) = (NormKind::Layernorm, FfnKind::Gelu, all_biases);
        cfg
    };

    let mut llama = base("rope");
    let llama3 = RopeScaling::Llama3 {
        factor: 8.0,
        low_freq_factor: 1.0,
        high_freq_factor: 4.0,
        original_max_position: 64,
    };
    llama.layers = vec![rope(None, Some(llama3)); 2];
    (llama.n_kv_heads, llama.tie_embeddings) = (Some(2), false);

    let mut qwen = base("rope");
    qwen.layers = vec![rope(None, Some(RopeScaling::Linear { factor: 2.0 })); 2];
    (qwen.n_kv_heads, qwen.biases.qkv) = (Some(1), true);

    let mut neox = gpt_style(base("rope"));
    neox.layers = vec![rope(Some(4), None); 2];
    (neox.ffn.kind, neox.parallel_residual, neox.tie_embeddings) = (FfnKind::GeluExact, true, false);

    let mut bloom = gpt_style(base("alibi"));
    bloom.embedding_norm = true;

    let mut gpt2 = gpt_style(base("nope"));
    gpt2.absolute_position = AbsolutePosition::Learned;

    let mut gqa_linear = base("gla");
    gqa_linear.layers[1] = AttentionSpec::default_for("hgrn2").expect("hgrn2");
    (gqa_linear.n_kv_heads, gqa_linear.parallel_residual) = (Some(2), true);

    // fla's GLA: keys half as wide as values (expand_k 0.5), GQA, the model's norm eps in the
    // output norm.
    let mut fla_gla = base("gla");
    let narrow = AttentionSpec::Gla(attnlab_core::variants::gla::Gla {
        head_norm_eps: Some(1e-6),
        ..Default::default()
    });
    fla_gla.layers = vec![narrow; fla_gla.n_layers];
    (fla_gla.qk_head_dim, fla_gla.n_kv_heads, fla_gla.tie_embeddings) = (Some(4), Some(2), false);

    [("arch-llama-gqa-llama3", llama), ("arch-qwen-mqa-qkv-bias", qwen), ("arch-neox", neox)]
        .into_iter()
        .chain([("arch-bloom", bloom), ("arch-gpt2", gpt2), ("arch-gqa-gla-hgrn2-parallel", gqa_linear)])
        .chain([("arch-fla-gla-narrow-keys", fla_gla)])
        .map(|(n, c)| {
            c.validate().unwrap_or_else(|e| panic!("{n}: {e}"));
            (n.to_string(), c)
        })
        .collect()
}

/// The import fixtures of `scripts/hf_fixtures.py` (`crates/core/tests/fixtures/hf/<name>/`), or the
/// folders under `ATTNLAB_HF_FIXTURES` when it is set (freshly generated ones).
pub fn hf_fixtures() -> Vec<std::path::PathBuf> {
    let root = std::env::var_os("ATTNLAB_HF_FIXTURES").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/tests/fixtures/hf")
    });
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("fixtures folder {}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    let custom = std::env::var_os("ATTNLAB_HF_FIXTURES").is_some();
    assert!(dirs.len() >= 9 || custom, "expected the committed fixtures in {}", root.display());
    dirs
}

/// `ids` [T] and `logits` [T, vocab] that the reference library recorded for a fixture.
pub fn hf_reference(dir: &std::path::Path, vocab: usize) -> (Vec<u32>, Vec<f32>) {
    let bytes = std::fs::read(dir.join("reference.safetensors")).expect("reference file");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("reference safetensors");
    let f32s = |name: &str| -> Vec<f32> {
        let t = st.tensor(name).expect("tensor");
        assert_eq!(t.dtype(), safetensors::Dtype::F32, "{name}");
        t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    };
    let ids: Vec<u32> = f32s("ids").into_iter().map(|x| x as u32).collect();
    let logits = f32s("logits");
    assert_eq!(logits.len(), ids.len() * vocab);
    (ids, logits)
}

/// Whether tensor `name` is a projection or norm bias (zeros in a random model).
fn is_bias(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    ["bq", "bk", "bv", "bo", "b_gate", "b_up", "b_down"].contains(&last) || name.ends_with("norm.bias")
}

/// `model` with every bias tensor (zeros in a random model) overwritten by seeded values in
/// ±0.25, so that a bias a backend forgets to add shows; and how many tensors were overwritten.
pub fn with_random_biases(model: &Model, seed: u64) -> (Model, usize) {
    let mut w = model.weights().clone();
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut touched = 0;
    for (_, t) in w.tensors.iter_mut().filter(|(name, _)| is_bias(name)) {
        for v in t.data.f32_mut().iter_mut() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            *v = ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.5;
        }
        touched += 1;
    }
    (Model::new(model.config().clone(), w).expect("model with random biases"), touched)
}

/// A random `fast-decay` model of `n` positions whose gate biases `b_f`, `b_z` are `bias` (σ(4) =
/// 0.982 per axis: the state outlives a scan chunk, so a carry that drops either decay shows).
pub fn mild_fast_decay(n: usize, bias: f32) -> Model {
    let cfg = ModelConfig::preset("fast-decay", SizePreset { max_context: n, ..tiny() }).expect("preset");
    let mut w = model(&cfg, 23).weights().clone();
    let mut touched = 0;
    for (_, t) in w.tensors.iter_mut().filter(|(name, _)| name.ends_with(".b_f") || name.ends_with(".b_z")) {
        t.data.f32_mut().iter_mut().for_each(|x| *x = bias);
        touched += 1;
    }
    assert_eq!(touched, 2 * cfg.n_layers, "fast-decay gate bias tensors");
    Model::new(cfg, w).expect("fast-decay model")
}
