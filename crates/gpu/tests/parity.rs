//! GPU ≡ CPU parity for every catalog variant (plus TransNormer T1, LRPE cores × P, the LRPE
//! denominator and hybrids): prefill logits of every row and step-by-step decode logits must match the
//! CPU reference within relative error 1e-3. Runs on any adapter (CI: Mesa lavapipe). Without an
//! adapter the tests fail unless `ATTNLAB_SKIP_GPU=1`.

use attnlab_core::config::{
    AttentionSpec, LrpeCore, LrpeNormalize, LrpeP, LrpeTheta, ModelConfig, SizePreset, TransnormerFlavor,
    TransnormerRole, VARIANT_IDS,
};
use attnlab_core::Model;
use attnlab_gpu::{GpuContext, GpuError, GpuModel};

const TOL: f32 = 1e-3;

fn context() -> Option<GpuContext> {
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

fn tiny(max_context: usize) -> SizePreset {
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

fn configs() -> Vec<(String, ModelConfig)> {
    let mut out = Vec::new();
    for id in VARIANT_IDS {
        let mut cfg = ModelConfig::preset(id, tiny(200)).expect("preset");
        for l in cfg.layers.iter_mut() {
            if let AttentionSpec::Transnormer { block_size, .. } = l {
                *block_size = 8;
            }
        }
        out.push((id.to_string(), cfg));
    }
    let mut t1 = ModelConfig::preset("transnormer", tiny(200)).expect("preset");
    t1.layers = [TransnormerRole::Diag, TransnormerRole::Norm]
        .into_iter()
        .map(|role| AttentionSpec::Transnormer { flavor: TransnormerFlavor::T1, role, block_size: 8 })
        .collect();
    out.push(("transnormer-t1".into(), t1));
    for (core, p) in [
        (LrpeCore::Rotation, LrpeP::Identity),
        (LrpeCore::Mixed, LrpeP::OddEven),
        (LrpeCore::Permutation, LrpeP::Householder),
        (LrpeCore::Complex, LrpeP::Householder),
    ] {
        let mut cfg = ModelConfig::preset("lrpe", tiny(200)).expect("preset");
        let spec = AttentionSpec::Lrpe {
            core,
            p,
            theta: LrpeTheta::Learned,
            normalize: LrpeNormalize::Rmsnorm,
            seed: 7,
        };
        cfg.layers = vec![spec.clone(), spec];
        out.push((format!("lrpe-{core:?}-{p:?}"), cfg));
    }
    let mut den = ModelConfig::preset("lrpe", tiny(200)).expect("preset");
    let spec = AttentionSpec::Lrpe {
        core: LrpeCore::Rotation,
        p: LrpeP::Identity,
        theta: LrpeTheta::Fixed,
        normalize: LrpeNormalize::Denominator,
        seed: 3,
    };
    den.layers = vec![spec.clone(), spec];
    out.push(("lrpe-denominator".into(), den));
    let mut hybrid = ModelConfig::preset("regla", tiny(200)).expect("preset");
    hybrid.layers[1] = AttentionSpec::Alibi { slopes: None };
    out.push(("hybrid-regla-alibi".into(), hybrid));
    out
}

fn tokens(n: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 33) % vocab as u64) as u32
        })
        .collect()
}

/// max |a − b| / max |a| over one row.
fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "row lengths differ");
    let scale = a.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
    a.iter().zip(b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs())) / scale
}

fn argmax(x: &[f32]) -> u32 {
    let mut best = 0;
    for (i, v) in x.iter().enumerate() {
        if *v > x[best] {
            best = i;
        }
    }
    best as u32
}

/// (worst prefill error, worst decode error) of one config's random-weight model.
fn parity(ctx: &GpuContext, name: &str, cfg: &ModelConfig) -> Result<(f32, f32), String> {
    let model = Model::random(cfg.clone(), 11).expect("random model");
    parity_of(ctx, name, &model, 100, 20)
}

/// GPU ≡ CPU on `model`: prefill of `n` rows (chunks of 48), then prefill `p` and decode to `n`.
fn parity_of(ctx: &GpuContext, name: &str, model: &Model, n: usize, p: usize) -> Result<(f32, f32), String> {
    let v = model.config().vocab_size;
    let toks = tokens(n, v, 5);
    let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), model)).expect("upload");

    // Prefill of every row, in chunks of 48 rows (three submissions).
    let cpu_all = model.session().prefill_all(&toks).expect("cpu prefill");
    let gpu_all = {
        let mut s = pollster::block_on(gm.session_with_chunk(48)).expect("session");
        pollster::block_on(s.prefill_all(&toks)).expect("gpu prefill")
    };
    assert_eq!(cpu_all.len(), gpu_all.len(), "{name}: prefill_all length");
    let mut worst_prefill = 0.0f32;
    for r in 0..n {
        let e = rel_err(&cpu_all[r * v..(r + 1) * v], &gpu_all[r * v..(r + 1) * v]);
        if e > TOL {
            return Err(format!("{name}: prefill row {r} rel err {e}"));
        }
        worst_prefill = worst_prefill.max(e);
    }

    // Prefill p, then decode token by token (the prefill→decode hand-off included).
    let mut cs = model.session();
    let mut gs = pollster::block_on(gm.session()).expect("session");
    let c0 = cs.prefill(&toks[..p]).expect("cpu prefill");
    let g0 = pollster::block_on(gs.prefill(&toks[..p])).expect("gpu prefill");
    let mut worst_decode = rel_err(&c0, &g0);
    if worst_decode > TOL {
        return Err(format!("{name}: prefill(20) rel err {worst_decode}"));
    }
    for (k, &t) in toks[p..].iter().enumerate() {
        let c = cs.step(t).expect("cpu step");
        let g = pollster::block_on(gs.step(t)).expect("gpu step");
        let e = rel_err(&c, &g);
        if e > TOL {
            return Err(format!("{name}: decode step {k} rel err {e}"));
        }
        worst_decode = worst_decode.max(e);
    }
    assert_eq!(gs.len(), n);
    // Greedy sampling on the GPU agrees with argmax of the CPU logits.
    let c = cs.step(toks[0]).expect("cpu step");
    let g = pollster::block_on(gs.step_greedy(toks[0])).expect("gpu greedy");
    if g != argmax(&c) {
        return Err(format!("{name}: greedy token {g} != CPU argmax {}", argmax(&c)));
    }
    Ok((worst_prefill, worst_decode))
}

#[test]
fn every_variant_matches_the_cpu_reference() {
    let Some(ctx) = context() else { return };
    eprintln!("adapter: {:?}", ctx.caps());
    let (mut report, mut failures) = (Vec::new(), Vec::new());
    for (name, cfg) in configs() {
        match parity(&ctx, &name, &cfg) {
            Ok((p, d)) => report.push(format!("{name:28} prefill {p:.2e} decode {d:.2e}")),
            Err(e) => failures.push(e),
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(failures.is_empty(), "GPU/CPU parity failures:\n{}", failures.join("\n"));
}

/// Every shipped checkpoint listed in www/models/index.json (issue 4: parity "on every shipped
/// checkpoint present"): 48 prefilled rows and 8 decode steps each, F16 weights widened on load.
#[test]
fn shipped_checkpoints_match_the_cpu_reference() {
    let Some(ctx) = context() else { return };
    let models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../www/models");
    let Ok(text) = std::fs::read_to_string(models.join("index.json")) else {
        eprintln!("no www/models/index.json: no shipped checkpoints to check");
        return;
    };
    let index = attnlab_core::catalog::ModelIndex::from_json(&text).expect("valid index.json");
    let (mut report, mut failures) = (Vec::new(), Vec::new());
    for entry in &index.models {
        let model =
            Model::load_dir(&models.join(&entry.name)).unwrap_or_else(|e| panic!("{}: {e}", entry.name));
        match parity_of(&ctx, &entry.name, &model, 48, 40) {
            Ok((p, d)) => report.push(format!("{:28} prefill {p:.2e} decode {d:.2e}", entry.name)),
            Err(e) => failures.push(e),
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(failures.is_empty(), "shipped checkpoints, GPU/CPU parity failures:\n{}", failures.join("\n"));
}

#[test]
fn errors_are_typed_not_panics() {
    let Some(ctx) = context() else { return };
    let cfg = ModelConfig::preset("alibi", SizePreset { train_context: 16, ..tiny(16) }).expect("preset");
    let model = Model::random(cfg, 1).expect("model");
    let mut gm = pollster::block_on(GpuModel::new(ctx, &model)).expect("upload");
    let mut s = pollster::block_on(gm.session()).expect("session");
    assert!(matches!(pollster::block_on(s.prefill(&[])), Err(GpuError::Core(_))));
    assert!(matches!(pollster::block_on(s.prefill(&[1000])), Err(GpuError::Core(_))));
    assert!(matches!(pollster::block_on(s.prefill(&[1; 17])), Err(GpuError::Core(_))));
    assert!(pollster::block_on(s.prefill(&[1; 16])).is_ok());
    assert!(matches!(pollster::block_on(s.step(1)), Err(GpuError::Core(_))));
}

/// Issue 4 "bad input": a model over the adapter's binding limit is refused before any buffer
/// exists, naming the tensor; a device lost mid-generation is a typed error the caller can recover
/// from (the CPU session, which the page falls back to, still has every token).
#[test]
fn model_too_large_and_device_loss_are_typed_errors() {
    let Some(ctx) = context() else { return };
    let cfg = ModelConfig::preset("alibi", tiny(64)).expect("preset");
    let model = Model::random(cfg.clone(), 1).expect("model");
    match pollster::block_on(GpuModel::new(ctx.with_binding_limit(4096), &model)) {
        Err(GpuError::ModelTooLarge { what, bytes, limit }) => {
            assert!(limit == 4096 && bytes > limit && !what.is_empty(), "{what} {bytes} {limit}");
        }
        Err(e) => panic!("expected ModelTooLarge, got {e}"),
        Ok(_) => panic!("expected ModelTooLarge, got a model"),
    }
    let toks = tokens(24, cfg.vocab_size, 2);
    let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
    let mut s = pollster::block_on(gm.session()).expect("session");
    let mut cpu = model.session();
    let g = pollster::block_on(s.prefill(&toks[..16])).expect("gpu prefill");
    let c = cpu.prefill(&toks[..16]).expect("cpu prefill");
    assert!(rel_err(&c, &g) <= TOL);
    ctx.destroy();
    match pollster::block_on(s.step(toks[16])) {
        Err(GpuError::DeviceLost(msg)) => assert!(msg.contains("Destroyed"), "{msg}"),
        Err(e) => panic!("expected DeviceLost, got {e}"),
        Ok(_) => panic!("a destroyed device produced logits"),
    }
    // The caller continues on the CPU from the same tokens.
    for &t in &toks[16..] {
        cpu.step(t).expect("cpu continues after the GPU is lost");
    }
    assert_eq!(cpu.len(), 24);
}

/// Issue 4 "all state on the GPU": a decode step is one queue submission and reads back only the
/// logits (`step`) or only the sampled token id, 4 bytes (`step_greedy`).
#[test]
fn one_submission_per_token_and_minimal_readback() {
    let Some(ctx) = context() else { return };
    for id in ["alibi", "regla"] {
        let cfg = ModelConfig::preset(id, tiny(64)).expect("preset");
        let model = Model::random(cfg.clone(), 4).expect("model");
        let toks = tokens(20, cfg.vocab_size, 3);
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        let mut s = pollster::block_on(gm.session()).expect("session");
        pollster::block_on(s.prefill(&toks[..16])).expect("prefill");
        for &t in &toks[16..18] {
            let before = ctx.traffic();
            pollster::block_on(s.step(t)).expect("step");
            let after = ctx.traffic();
            assert_eq!(after.submissions - before.submissions, 1, "{id}: submissions per step");
            assert_eq!(after.readback_bytes - before.readback_bytes, 4 * cfg.vocab_size as u64, "{id}");
        }
        for &t in &toks[18..] {
            let before = ctx.traffic();
            pollster::block_on(s.step_greedy(t)).expect("greedy step");
            let after = ctx.traffic();
            assert_eq!(after.submissions - before.submissions, 1, "{id}: submissions per greedy step");
            assert_eq!(after.readback_bytes - before.readback_bytes, 4, "{id}: only the token id comes back");
        }
    }
}

/// 8192-token prefill for one softmax and one linear variant (no n×n buffer exists: activations are
/// CHUNK rows, the KV cache is n × attn_dim); the last row matches the CPU reference.
#[test]
fn long_prefill_8192() {
    let Some(ctx) = context() else { return };
    for id in ["alibi", "regla"] {
        let cfg = ModelConfig::preset(id, SizePreset { n_layers: 1, ..tiny(8192) }).expect("preset");
        let model = Model::random(cfg.clone(), 3).expect("model");
        let toks = tokens(8192, cfg.vocab_size, 9);
        let cpu = model.session().prefill(&toks).expect("cpu");
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        let mut s = pollster::block_on(gm.session()).expect("session");
        let gpu = pollster::block_on(s.prefill(&toks)).expect("gpu");
        let e = rel_err(&cpu, &gpu);
        eprintln!("{id} 8192 prefill rel err {e:.2e}");
        assert!(e <= TOL, "{id}: 8192-token prefill rel err {e}");
    }
}
