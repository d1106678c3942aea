//! GPU ≡ CPU parity for every catalog variant (plus TransNormer T1, LRPE cores × P, the LRPE
//! denominator and hybrids) and the architecture configs of imported checkpoints: prefill logits of
//! every row and step-by-step decode logits must match the CPU reference within relative error
//! 1e-3. Runs on any adapter (CI: Mesa lavapipe). Without an adapter the tests fail unless
//! `ATTNLAB_SKIP_GPU=1`.

use attnlab_core::config::{AbsolutePosition, AttentionSpec, FfnConfig, FfnKind, ModelConfig, SizePreset};
use attnlab_core::Model;
use attnlab_gpu::{GpuContext, GpuError, GpuModel};
use common::{architecture_configs, configs_with, context, rel_err, tiny, tokens, with_random_biases};

mod common;

const TOL: f32 = 1e-3;

fn configs() -> Vec<(String, ModelConfig)> {
    configs_with(200)
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

/// The architecture options of imported checkpoints (GQA/MQA, partial and rescaled RoPE, projection
/// and LayerNorm biases, parallel residual, embedding norm, learned positions, exact GELU) on the
/// core's six architecture configs, every bias randomized (a random model's are zeros, which would
/// hide a missing bias add): the parity of the catalog test (prefill in steps of 48, prefill then
/// decode), and every row of a 200-row prefill in one step (chunked scan, tiled attention).
#[test]
fn architecture_options_match_the_cpu_reference() {
    let Some(ctx) = context() else { return };
    let (mut report, mut failures) = (Vec::new(), Vec::new());
    for (name, cfg) in architecture_configs() {
        let base = Model::random(cfg.clone(), 11).expect("random model");
        let (model, biases) = with_random_biases(&base, 7);
        let toks = tokens(40, cfg.vocab_size, 3);
        let effect = rel_err(
            &base.session().prefill(&toks).expect("cpu prefill"),
            &model.session().prefill(&toks).expect("cpu prefill"),
        );
        assert!(biases == 0 || effect > 0.01, "{name}: the biases barely move the logits ({effect})");
        let one_step = parity_one_step(&ctx, &name, &model, 200);
        match parity_of(&ctx, &name, &model, 100, 20).and_then(|(p, d)| Ok((p.max(one_step?), d))) {
            Ok((p, d)) => report.push(format!("{name:28} {biases:2} biases prefill {p:.2e} decode {d:.2e}")),
            Err(e) => failures.push(e),
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(failures.is_empty(), "architecture options, GPU/CPU parity failures:\n{}", failures.join("\n"));
}

/// Exact GELU moves the logits of a random model by less than the parity tolerance from the tanh
/// form: on the config that uses it (GPT-NeoX), the GPU must be at least 10× closer to the CPU's erf
/// form than the tanh form is, on every row of a prefill.
#[test]
fn exact_gelu_is_not_the_tanh_approximation() {
    let Some(ctx) = context() else { return };
    let (name, cfg) = architecture_configs()
        .into_iter()
        .find(|(_, c)| c.ffn.kind == FfnKind::GeluExact)
        .expect("an architecture config with exact GELU");
    let (model, _) = with_random_biases(&Model::random(cfg.clone(), 11).expect("random model"), 7);
    let tanh_cfg = ModelConfig { ffn: FfnConfig { kind: FfnKind::Gelu, ..cfg.ffn }, ..cfg.clone() };
    let tanh = Model::new(tanh_cfg, model.weights().clone()).expect("tanh model");
    let (v, n) = (cfg.vocab_size, 64);
    let toks = tokens(n, v, 4);
    let exact = model.session().prefill_all(&toks).expect("cpu prefill");
    let approx = tanh.session().prefill_all(&toks).expect("cpu prefill");
    let mut gm = pollster::block_on(GpuModel::new(ctx, &model)).expect("upload");
    let mut s = pollster::block_on(gm.session()).expect("session");
    let gpu = pollster::block_on(s.prefill_all(&toks)).expect("gpu prefill");
    let worst = |other: &[f32]| {
        (0..n).map(|r| rel_err(&exact[r * v..(r + 1) * v], &other[r * v..(r + 1) * v])).fold(0.0, f32::max)
    };
    let (gap, err) = (worst(&approx), worst(&gpu));
    eprintln!("{name}: tanh vs erf GELU {gap:.2e}, GPU vs CPU {err:.2e}");
    assert!(err * 10.0 < gap, "{name}: GPU error {err:.2e} is not well below the tanh/erf gap {gap:.2e}");
}

/// Worst error of every row of an `n`-row prefill in one step.
fn parity_one_step(ctx: &GpuContext, name: &str, model: &Model, n: usize) -> Result<f32, String> {
    let v = model.config().vocab_size;
    let toks = tokens(n, v, 9);
    let cpu = model.session().prefill_all(&toks).expect("cpu prefill");
    let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), model)).expect("upload");
    let mut s = pollster::block_on(gm.session_with_chunk(n)).expect("session");
    let gpu = pollster::block_on(s.prefill_all(&toks)).expect("gpu prefill");
    let mut worst = 0.0f32;
    for r in 0..n {
        let e = rel_err(&cpu[r * v..(r + 1) * v], &gpu[r * v..(r + 1) * v]);
        if e.is_nan() || e > TOL {
            return Err(format!("{name}: {n}-row prefill row {r} rel err {e}"));
        }
        worst = worst.max(e);
    }
    Ok(worst)
}

/// Every shipped checkpoint listed in www/models/index.json and the collections it lists (issue 4:
/// parity "on every shipped checkpoint present"): 48 prefilled rows and 8 decode steps each, F16
/// weights widened on load.
#[test]
fn shipped_checkpoints_match_the_cpu_reference() {
    let Some(ctx) = context() else { return };
    let models = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../www/models");
    let Ok(text) = std::fs::read_to_string(models.join("index.json")) else {
        eprintln!("no www/models/index.json: no shipped checkpoints to check");
        return;
    };
    let mut index = attnlab_core::catalog::ModelIndex::from_json(&text).expect("valid index.json");
    for c in index.collections.clone() {
        let path = models.join(&c.folder).join("index.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let sub = attnlab_core::catalog::ModelIndex::from_json(&text).expect("valid collection index");
        index.add_collection(&c, sub);
    }
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

/// The learned position table (`pos_emb.weight`, `[max_context, d]`) is checked against the
/// adapter's binding limit too: just under its size, upload is refused naming it.
#[test]
fn learned_position_table_is_size_checked() {
    let Some(ctx) = context() else { return };
    let (_, cfg) = architecture_configs()
        .into_iter()
        .find(|(_, c)| c.absolute_position == AbsolutePosition::Learned)
        .expect("an architecture config with learned positions");
    let model = Model::random(cfg.clone(), 1).expect("model");
    let table = 4 * (cfg.max_context * cfg.d_model) as u64;
    match pollster::block_on(GpuModel::new(ctx.with_binding_limit(table - 4), &model)) {
        Err(GpuError::ModelTooLarge { what, bytes, .. }) => {
            assert!(what.contains("position") && bytes == table, "{what} {bytes}");
        }
        Err(e) => panic!("expected ModelTooLarge, got {e}"),
        Ok(_) => panic!("expected ModelTooLarge, got a model"),
    }
    assert!(pollster::block_on(GpuModel::new(ctx.with_binding_limit(table), &model)).is_ok());
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
        let mut dispatches = Vec::new();
        for &t in &toks[16..18] {
            let before = ctx.traffic();
            pollster::block_on(s.step(t)).expect("step");
            let after = ctx.traffic();
            assert_eq!(after.submissions - before.submissions, 1, "{id}: submissions per step");
            dispatches.push(after.dispatches - before.dispatches);
            assert_eq!(after.readback_bytes - before.readback_bytes, 4 * cfg.vocab_size as u64, "{id}");
        }
        for &t in &toks[18..] {
            let before = ctx.traffic();
            pollster::block_on(s.step_greedy(t)).expect("greedy step");
            let after = ctx.traffic();
            assert_eq!(after.submissions - before.submissions, 1, "{id}: submissions per greedy step");
            assert_eq!(after.readback_bytes - before.readback_bytes, 4, "{id}: only the token id comes back");
        }
        // Every decode step records the same kernels (the bench reports this count per token).
        assert!(dispatches[0] >= 2 * cfg.n_layers as u64, "{id}: {dispatches:?} dispatches");
        assert_eq!(dispatches[0], dispatches[1], "{id}: dispatches per step");
    }
}

/// Issue 12 "a memory plan that allocates once per session": after the first step, decoding (single
/// steps, greedy steps and GPU-resident runs; fused and op by op) leaves the device's live buffers,
/// bind groups and buffer bytes (wgpu's internal counters) unchanged, so nothing allocated per
/// token stays alive. (A buffer made and dropped within a step would not show here; no buffer is
/// created on the step path: every one is made in `GpuModel::new` or `session()`.)
#[test]
fn decoding_leaves_the_device_allocation_unchanged() {
    let Some(ctx) = context() else { return };
    let live = |ctx: &GpuContext| {
        let t = ctx.traffic();
        (t.buffers, t.bind_groups, t.buffer_bytes)
    };
    for (id, fused) in [("alibi", true), ("regla", true), ("alibi", false)] {
        let cfg = ModelConfig::preset(id, tiny(128)).expect("preset");
        let model = Model::random(cfg.clone(), 4).expect("model");
        let toks = tokens(40, cfg.vocab_size, 3);
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        gm.set_fused_decode(fused);
        let mut s = pollster::block_on(gm.session()).expect("session");
        pollster::block_on(s.prefill(&toks[..16])).expect("prefill");
        pollster::block_on(s.step(toks[16])).expect("first step");
        pollster::block_on(s.step_greedy(toks[17])).expect("first greedy step");
        pollster::block_on(s.greedy_tokens(toks[18], 2)).expect("first greedy run");
        let before = live(&ctx);
        assert!(before.0 > 0, "wgpu's counters are on (feature `counters`)");
        for &t in &toks[20..30] {
            pollster::block_on(s.step(t)).expect("step");
            pollster::block_on(s.step_greedy(t)).expect("greedy step");
        }
        pollster::block_on(s.greedy_tokens(toks[30], 8)).expect("greedy run");
        assert_eq!(live(&ctx), before, "{id} (fused {fused}): live (buffers, bind groups, bytes)");
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

/// The chunked linear scan (steps of ≥ 128 rows, chunks of 64) and the tiled prefill attention
/// against the CPU reference for every parity config: 300 tokens prefilled with every row's logits
/// in steps of 200 (chunked, with a partial last chunk) + 100 (sequential scan), then 3 decode
/// steps that continue from the carried state; and 300 tokens in the default steps (256 + 44).
#[test]
fn chunked_scan_and_tiled_attention_match_the_cpu_reference() {
    let Some(ctx) = context() else { return };
    let (n, extra) = (300, 3);
    let (mut report, mut failures) = (Vec::new(), Vec::new());
    for (name, cfg) in configs_with(n + extra + 1) {
        let model = Model::random(cfg.clone(), 13).expect("random model");
        let v = cfg.vocab_size;
        let toks = tokens(n + extra, v, 21);
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        let mut cs = model.session();
        let cpu_all = cs.prefill_all(&toks[..n]).expect("cpu prefill");
        let mut worst = 0.0f32;
        let mut fail = None;
        {
            let mut gs = pollster::block_on(gm.session_with_chunk(200)).expect("session");
            let gpu_all = pollster::block_on(gs.prefill_all(&toks[..n])).expect("gpu prefill");
            for r in 0..n {
                let e = rel_err(&cpu_all[r * v..(r + 1) * v], &gpu_all[r * v..(r + 1) * v]);
                worst = worst.max(e);
                if (e.is_nan() || e > TOL) && fail.is_none() {
                    fail = Some(format!("{name}: prefill row {r} rel err {e}"));
                }
            }
            for (k, &t) in toks[n..].iter().enumerate() {
                let c = cs.step(t).expect("cpu step");
                let g = pollster::block_on(gs.step(t)).expect("gpu step");
                let e = rel_err(&c, &g);
                worst = worst.max(e);
                if (e.is_nan() || e > TOL) && fail.is_none() {
                    fail = Some(format!("{name}: decode step {k} after the chunked prefill, rel err {e}"));
                }
            }
        }
        {
            let mut gs = pollster::block_on(gm.session()).expect("session");
            let g = pollster::block_on(gs.prefill(&toks[..n])).expect("gpu prefill");
            let e = rel_err(&cpu_all[(n - 1) * v..n * v], &g);
            worst = worst.max(e);
            if (e.is_nan() || e > TOL) && fail.is_none() {
                fail = Some(format!("{name}: default-step prefill rel err {e}"));
            }
        }
        match fail {
            Some(f) => failures.push(f),
            None => report.push(format!("{name:28} worst {worst:.2e}")),
        }
    }
    eprintln!("{}", report.join("\n"));
    assert!(failures.is_empty(), "chunked/tiled parity failures:\n{}", failures.join("\n"));
}

/// Strong decay (gate biases of −20, so lg ≈ −20 per step and a chunk's log decay ≈ −1280): the
/// chunked scan never exponentiates a positive log-decay sum, so nothing overflows; logits stay
/// finite and match the CPU reference, in prefill (chunked) and in decode after it.
#[test]
fn chunked_scan_is_stable_under_strong_decay() {
    let Some(ctx) = context() else { return };
    for id in ["gla", "regla"] {
        let mut cfg = ModelConfig::preset(id, tiny(320)).expect("preset");
        for l in cfg.layers.iter_mut() {
            if let AttentionSpec::Gla(attnlab_core::variants::gla::Gla { gate_logit_normalizer, .. }) = l {
                *gate_logit_normalizer = 1.0;
            }
        }
        let base = Model::random(cfg.clone(), 17).expect("random model");
        let mut w = base.weights().clone();
        let mut touched = 0;
        for (name, t) in w.tensors.iter_mut() {
            if name.ends_with("gla.gk_bias") || name.ends_with("regla.b_g") {
                t.data.f32_mut().iter_mut().for_each(|x| *x = -20.0);
                touched += 1;
            }
        }
        assert_eq!(touched, cfg.n_layers, "{id}: gate bias tensors");
        let model = Model::new(cfg.clone(), w).expect("model");
        let v = cfg.vocab_size;
        let toks = tokens(304, v, 8);
        let mut cs = model.session();
        let cpu_all = cs.prefill_all(&toks[..300]).expect("cpu prefill");
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        let mut gs = pollster::block_on(gm.session_with_chunk(256)).expect("session");
        let gpu_all = pollster::block_on(gs.prefill_all(&toks[..300])).expect("gpu prefill");
        assert!(gpu_all.iter().all(|x| x.is_finite()), "{id}: non-finite logits");
        let mut worst = 0.0f32;
        for r in 0..300 {
            let e = rel_err(&cpu_all[r * v..(r + 1) * v], &gpu_all[r * v..(r + 1) * v]);
            assert!(e <= TOL, "{id}: strong-decay prefill row {r} rel err {e}");
            worst = worst.max(e);
        }
        for &t in &toks[300..] {
            let c = cs.step(t).expect("cpu step");
            let g = pollster::block_on(gs.step(t)).expect("gpu step");
            assert!(g.iter().all(|x| x.is_finite()), "{id}: non-finite decode logits");
            let e = rel_err(&c, &g);
            assert!(e <= TOL, "{id}: strong-decay decode rel err {e}");
            worst = worst.max(e);
        }
        eprintln!("{id} strong decay worst rel err {worst:.2e}");
    }
}

/// Fast Decay with mild gates (biases +4, so the state outlives a 64-row scan chunk): the chunked
/// prefill carries the state decayed along the key and the value axis, and decode continues from it.
#[test]
fn chunked_scan_carries_two_sided_gates() {
    let Some(ctx) = context() else { return };
    let model = common::mild_fast_decay(320, 4.0);
    let v = model.config().vocab_size;
    let toks = tokens(304, v, 8);
    let mut cs = model.session();
    let cpu_all = cs.prefill_all(&toks[..300]).expect("cpu prefill");
    let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
    let mut gs = pollster::block_on(gm.session_with_chunk(256)).expect("session");
    let gpu_all = pollster::block_on(gs.prefill_all(&toks[..300])).expect("gpu prefill");
    let mut worst = 0.0f32;
    for r in 0..300 {
        worst = worst.max(rel_err(&cpu_all[r * v..(r + 1) * v], &gpu_all[r * v..(r + 1) * v]));
    }
    for &t in &toks[300..] {
        let g = pollster::block_on(gs.step(t)).expect("gpu step");
        worst = worst.max(rel_err(&cs.step(t).expect("cpu step"), &g));
    }
    eprintln!("mild fast-decay worst rel err {worst:.2e}");
    assert!(worst <= TOL, "mild fast-decay: chunked prefill / decode rel err {worst:e}");
}

/// CoPE with its position embedding scaled ×50 (the contextual bias then moves the logits by O(1))
/// and 5 positions (contextual positions clamp at npos − 1): every prefill row (steps of 256 + 44
/// rows, per-row kernel) and decode steps after it match the CPU reference.
#[test]
fn contextual_bias_matches_the_cpu_reference_when_it_dominates() {
    let Some(ctx) = context() else { return };
    let mut cfg = ModelConfig::preset("cope", tiny(320)).expect("preset");
    for l in cfg.layers.iter_mut() {
        if let AttentionSpec::Cope(c) = l {
            c.npos_max = 5;
        }
    }
    let base = Model::random(cfg.clone(), 3).expect("random model");
    let with = |f: &dyn Fn(f32) -> f32| {
        let mut w = base.weights().clone();
        for (name, t) in w.tensors.iter_mut() {
            if name.ends_with("cope.pos_emb") {
                t.data.f32_mut().iter_mut().for_each(|x| *x = f(*x));
            }
        }
        Model::new(cfg.clone(), w).expect("model")
    };
    let (model, nope) = (with(&|x| 50.0 * x), with(&|_| 0.0));
    let (v, n) = (cfg.vocab_size, 300);
    let toks = tokens(n + 3, v, 5);
    let mut cs = model.session();
    let cpu = cs.prefill_all(&toks[..n]).expect("cpu prefill");
    let cpu_nope = nope.session().prefill_all(&toks[..n]).expect("cpu prefill");
    let effect = rel_err(&cpu[(n - 1) * v..], &cpu_nope[(n - 1) * v..]);
    assert!(effect > 0.1, "the bias barely moves the logits ({effect}): the test would not see it");
    let mut gm = pollster::block_on(GpuModel::new(ctx, &model)).expect("upload");
    let mut gs = pollster::block_on(gm.session()).expect("session");
    let gpu = pollster::block_on(gs.prefill_all(&toks[..n])).expect("gpu prefill");
    for r in 0..n {
        let e = rel_err(&cpu[r * v..(r + 1) * v], &gpu[r * v..(r + 1) * v]);
        assert!(e <= TOL, "cope prefill row {r} rel err {e}");
    }
    for &t in &toks[n..] {
        let e = rel_err(&cs.step(t).expect("cpu step"), &pollster::block_on(gs.step(t)).expect("gpu step"));
        assert!(e <= TOL, "cope decode rel err {e}");
    }
}

/// Issue 12 "GPU decode that is not dispatch-bound": every model (catalog variants of both families,
/// CoPE included, hybrids, imported architectures) decodes fused, a greedy token costing 2
/// dispatches per layer + 2 in one submission, with the same logits as the op-by-op path.
#[test]
fn fused_decode_dispatches_and_agrees_with_op_by_op() {
    let Some(ctx) = context() else { return };
    let (mut fused, mut op_by_op, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for (name, cfg) in configs_with(64).into_iter().chain(architecture_configs()).chain(diag_only(64)) {
        let (model, _) = with_random_biases(&Model::random(cfg.clone(), 5).expect("model"), 3);
        let toks = tokens(40, cfg.vocab_size, 8);
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        match gm.fused_decode() {
            Ok(on) => assert!(on, "{name}: fused decode is on by default"),
            Err(why) => {
                op_by_op.push(format!("{name} ({why})"));
                continue;
            }
        }
        let logits = |gm: &mut GpuModel| -> Vec<Vec<f32>> {
            let mut s = pollster::block_on(gm.session()).expect("session");
            let mut out = vec![pollster::block_on(s.prefill(&toks[..20])).expect("prefill")];
            out.extend(toks[20..30].iter().map(|&t| pollster::block_on(s.step(t)).expect("step")));
            for &t in &toks[30..] {
                let before = ctx.traffic();
                pollster::block_on(s.step_greedy(t)).expect("greedy step");
                let after = ctx.traffic();
                out.push(vec![(after.dispatches - before.dispatches) as f32]);
                assert_eq!(after.submissions - before.submissions, 1, "{name}: submissions per token");
            }
            out
        };
        let with = logits(&mut gm);
        gm.set_fused_decode(false);
        let without = logits(&mut gm);
        let budget = (2 * cfg.n_layers + 2) as f32;
        let dispatches = with[11..].iter().map(|d| d[0]).fold(0.0f32, f32::max);
        let baseline = without[11..].iter().map(|d| d[0]).fold(0.0f32, f32::max);
        let worst = (0..11).map(|k| rel_err(&without[k], &with[k])).fold(0.0f32, f32::max);
        if dispatches > budget || worst > 1e-4 {
            failures
                .push(format!("{name}: {dispatches} dispatches per token (≤ {budget}), rel err {worst:.1e}"));
        }
        fused.push(format!(
            "{name:28} {dispatches} dispatches per token (op by op {baseline}), rel err {worst:.1e}"
        ));
    }
    eprintln!("fused:\n{}\nop by op:\n{}", fused.join("\n"), op_by_op.join("\n"));
    assert!(failures.is_empty(), "fused decode:\n{}", failures.join("\n"));
    assert!(op_by_op.is_empty(), "every model decodes fused: {op_by_op:?}");
}

/// Issue 12 "Softmax decode at long context splits keys across workgroups (split-K)": with 64 keys
/// per split the fused decode runs a row of n keys in ⌈n / 64⌉ workgroups per head (up to 8 at 512
/// positions) and merges them in the FFN dispatch; over steps that cross split boundaries its logits
/// equal the CPU reference's and one workgroup per head's, at the same dispatches per token (and a
/// GPU-resident greedy run picks the tokens of single steps), for
/// every catalog variant (softmax layers split but CoPE's, which keep the whole row in one
/// workgroup; linear layers, also of hybrids and TransNormer, must be unaffected), TransNormer Diag blocks wider than a split and blocks that start
/// past position 0 (softmax and T1's ReLU with its norm over all heads) and the architecture configs.
#[test]
fn split_k_decode_matches_the_cpu_and_one_workgroup_per_head() {
    let Some(ctx) = context() else { return };
    let diag = diag_blocks(512, 512).into_iter().chain(diag_blocks(512, 96));
    let configs = configs_with(512).into_iter().chain(diag).chain(architecture_configs());
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, cfg) in configs {
        let (model, _) = with_random_biases(&Model::random(cfg.clone(), 5).expect("model"), 3);
        let n = cfg.max_context;
        let (toks, p) = (tokens(n, cfg.vocab_size, 9), n - 24);
        let mut cs = model.session();
        let mut cpu = vec![cs.prefill(&toks[..p]).expect("cpu prefill")];
        cpu.extend(toks[p..].iter().map(|&t| cs.step(t).expect("cpu step")));
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        let mut gpu = |keys: Option<u32>| -> (Vec<Vec<f32>>, u64) {
            gm.set_decode_split_keys(keys);
            let mut s = pollster::block_on(gm.session()).expect("session");
            let mut out = vec![pollster::block_on(s.prefill(&toks[..p])).expect("prefill")];
            let before = ctx.traffic().dispatches;
            out.extend(toks[p..].iter().map(|&t| pollster::block_on(s.step(t)).expect("step")));
            (out, (ctx.traffic().dispatches - before) / (n - p) as u64)
        };
        let (split, per_token) = gpu(Some(64));
        let (whole, per_token_whole) = gpu(None);
        // A GPU-resident greedy run across a split boundary (positions 250..266 of rows of 64-key
        // splits: 4, then 5 per head) picks the tokens of single greedy steps.
        gm.set_decode_split_keys(Some(64));
        let p2 = 250.min(n - 17);
        let greedy = |gm: &mut GpuModel, run: bool| -> Vec<u32> {
            let mut s = pollster::block_on(gm.session()).expect("session");
            pollster::block_on(s.prefill(&toks[..p2])).expect("prefill");
            if run {
                return pollster::block_on(s.greedy_tokens(toks[p2], 16)).expect("greedy run");
            }
            let mut t = toks[p2];
            (0..16)
                .map(|_| {
                    t = pollster::block_on(s.step_greedy(t)).expect("greedy step");
                    t
                })
                .collect()
        };
        let (run, steps) = (greedy(&mut gm, true), greedy(&mut gm, false));
        if run != steps {
            failures.push(format!("{name}: greedy run {run:?} ≠ single steps {steps:?}"));
        }
        let vs_cpu = (0..cpu.len()).map(|k| rel_err(&cpu[k], &split[k])).fold(0.0f32, f32::max);
        let vs_whole = (0..cpu.len()).map(|k| rel_err(&whole[k], &split[k])).fold(0.0f32, f32::max);
        if vs_cpu > TOL
            || vs_whole > 1e-4
            || per_token != per_token_whole
            || per_token > 2 * cfg.n_layers as u64 + 1
        {
            failures.push(format!(
                "{name}: rel err {vs_cpu:.1e} vs the CPU, {vs_whole:.1e} vs one workgroup per head; \
                 {per_token} dispatches per token ({per_token_whole} unsplit)"
            ));
        }
        checked += 1;
    }
    assert!(failures.is_empty(), "split-K decode:\n{}", failures.join("\n"));
    assert!(checked >= 30, "only {checked} configs");
}

/// TransNormer models of Diag layers only (softmax and T1's ReLU with its norm over all heads), so
/// the fused decode's block window and T1 norm are exercised (the catalog's TransNormer mixes in
/// Norm layers, which are linear).
fn diag_only(max_context: usize) -> Vec<(String, ModelConfig)> {
    diag_blocks(max_context, 8)
}

/// Two TransNormer Diag layers of each flavor, blocks of `block_size` keys.
fn diag_blocks(max_context: usize, block_size: usize) -> Vec<(String, ModelConfig)> {
    use attnlab_core::variants::transnormer::{Transnormer, TransnormerFlavor, TransnormerRole};
    [TransnormerFlavor::T2, TransnormerFlavor::T1]
        .into_iter()
        .map(|flavor| {
            let mut cfg = ModelConfig::preset("transnormer", tiny(max_context)).expect("preset");
            let spec =
                AttentionSpec::Transnormer(Transnormer { flavor, role: TransnormerRole::Diag, block_size });
            cfg.layers = vec![spec.clone(), spec];
            (format!("transnormer-diag-{flavor:?}"), cfg)
        })
        .collect()
}

/// Issue 12 "a GPU-resident loop": `greedy_tokens` generates n tokens in one submission and one
/// readback of n ids, the same tokens as n `step_greedy` calls, fused (alibi) and op by op (regla);
/// a run too long for the batch or the context is refused before any work.
#[test]
fn greedy_run_is_one_submission_with_the_tokens_of_single_steps() {
    let Some(ctx) = context() else { return };
    for id in ["alibi", "regla"] {
        let cfg = ModelConfig::preset(id, tiny(64)).expect("preset");
        let model = Model::random(cfg.clone(), 4).expect("model");
        let toks = tokens(16, cfg.vocab_size, 3);
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
        let single = {
            let mut s = pollster::block_on(gm.session()).expect("session");
            pollster::block_on(s.prefill(&toks[..15])).expect("prefill");
            let mut t = toks[15];
            let mut out = Vec::new();
            for _ in 0..12 {
                t = pollster::block_on(s.step_greedy(t)).expect("greedy step");
                out.push(t);
            }
            out
        };
        let mut s = pollster::block_on(gm.session()).expect("session");
        pollster::block_on(s.prefill(&toks[..15])).expect("prefill");
        let before = ctx.traffic();
        let run = pollster::block_on(s.greedy_tokens(toks[15], 12)).expect("greedy run");
        let after = ctx.traffic();
        assert_eq!(run, single, "{id}: greedy run vs single steps");
        assert_eq!(after.submissions - before.submissions, 1, "{id}: one submission");
        assert_eq!(after.readback_bytes - before.readback_bytes, 48, "{id}: 12 token ids come back");
        assert_eq!(s.len(), 27, "{id}: the session advanced 12");
        for n in [0, attnlab_gpu::GREEDY_BATCH + 1, 64 - 27 + 1] {
            let e = pollster::block_on(s.greedy_tokens(1, n)).expect_err("refused");
            assert!(matches!(e, GpuError::Unsupported(_) | GpuError::Core(_)), "{id}: {n} tokens: {e}");
        }
        assert_eq!(s.len(), 27, "{id}: a refused run does nothing");
    }
}

/// Issue 12 "F16 weights kept as f16 on the GPU": a checkpoint whose matrices are F16 or BF16 keeps
/// them in that dtype on the GPU (half the bytes of f32), widened to f32 as the kernels read them,
/// and matches the CPU reference on the same half weights (softmax fused, linear op by op, an
/// architecture with an untied head and biases). F16 matrices are read both ways the adapter allows:
/// as f16 vectors where it has shader-f16 (lavapipe does), and as u32 words widened by integer ops.
#[test]
fn half_weights_stay_half_on_the_gpu() {
    use attnlab_core::weights::StorageDtype;
    let Some(ctx) = context() else { return };
    let arch = architecture_configs().into_iter().find(|(n, _)| n.contains("llama")).expect("llama config");
    let mut failures = Vec::new();
    for (name, cfg) in
        [("alibi", ModelConfig::preset("alibi", tiny(64))), ("regla", ModelConfig::preset("regla", tiny(64)))]
            .into_iter()
            .map(|(n, c)| (n.to_string(), c.expect("preset")))
            .chain([arch])
    {
        let (base, _) = with_random_biases(&Model::random(cfg.clone(), 2).expect("model"), 5);
        let f32_bytes = pollster::block_on(GpuModel::new(ctx.clone(), &base)).expect("upload").matrices();
        assert_eq!(f32_bytes.0, "f32", "{name}");
        let words = ctx.without_shader_f16();
        let mut paths = vec![(StorageDtype::F16, "f16", &words), (StorageDtype::Bf16, "bf16", &words)];
        if ctx.caps().shader_f16 {
            paths.push((StorageDtype::F16, "f16", &ctx));
        }
        for (dtype, kind, ctx) in paths {
            let bytes = base.weights().to_safetensors_as(dtype, None).expect("safetensors");
            let model = Model::from_bytes(&cfg.to_json(), &bytes).expect("half model");
            let gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");
            assert_eq!(gm.matrices(), (kind, f32_bytes.1 / 2), "{name} {kind}: matrices held as {kind}");
            let reads = gm.matrix_reads();
            assert_eq!(
                reads == "f16 vectors (shader-f16)",
                ctx.caps().shader_f16 && kind == "f16",
                "{name} {kind}"
            );
            match parity_of(ctx, &format!("{name} {kind} ({reads})"), &model, 60, 20) {
                Ok((p, d)) => eprintln!("{name} {kind} ({reads}): prefill {p:.2e} decode {d:.2e}"),
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "half weights, GPU/CPU parity failures:\n{}", failures.join("\n"));
}

/// Widths that are not multiples of four (d_model 30, heads of 6, FFN 42) make the weight-reading
/// kernels read rows element by element instead of a vector at a time (shaders/weights.wgsl):
/// every fused decode dot product, the head projection, the FFN's down projection and the matmul's
/// staging and gemv take that path, with f32 and f16 matrices, and must still match the CPU.
#[test]
fn widths_off_the_vector_grid_match_the_cpu_reference() {
    use attnlab_core::weights::StorageDtype;
    let Some(ctx) = context() else { return };
    let size = SizePreset { d_model: 30, head_dim: 6, ffn_hidden: 42, ..tiny(64) };
    let mut failures = Vec::new();
    for id in ["alibi", "rope", "kerple-log", "regla", "fast-decay", "gla"] {
        let cfg = ModelConfig::preset(id, size).expect("preset");
        let base = Model::random(cfg.clone(), 4).expect("model");
        let bytes = base.weights().to_safetensors_as(StorageDtype::F16, None).expect("safetensors");
        let half = Model::from_bytes(&cfg.to_json(), &bytes).expect("half model");
        for (kind, model) in [("f32", &base), ("f16", &half)] {
            let gm = pollster::block_on(GpuModel::new(ctx.clone(), model)).expect("upload");
            assert_eq!(gm.matrices().0, kind, "{id}");
            assert_eq!(gm.fused_decode(), Ok(true), "{id}: decodes fused");
            match parity_of(&ctx, &format!("{id} {kind}"), model, 60, 20) {
                Ok((p, d)) => eprintln!("{id} {kind} (d 30): prefill {p:.2e} decode {d:.2e}"),
                Err(e) => failures.push(e),
            }
        }
    }
    assert!(failures.is_empty(), "widths off the vector grid:\n{}", failures.join("\n"));
}
