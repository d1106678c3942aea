//! GPU sampling (temperature, top-k, top-p: `sample_top` in shaders/sample.wgsl) ≡ the CPU sampler
//! (attnlab_core::sampling): same logits and the same uniform draw give the same token, except
//! where the draw or the top-p cut lies within f32 rounding of a boundary (those cases are counted
//! and must be rare). Runs on any adapter (CI: lavapipe); without one the tests fail unless
//! `ATTNLAB_SKIP_GPU=1`.

use attnlab_core::config::{ModelConfig, SizePreset};
use attnlab_core::sampling::{Rng, Sampler, SamplingConfig};
use attnlab_core::Model;
use attnlab_gpu::{GpuModel, GpuSampling};
use common::{context, tiny};

mod common;

fn model(vocab: usize) -> Model {
    let preset = SizePreset { vocab_size: vocab, n_layers: 1, ..tiny(128) };
    Model::random(ModelConfig::preset("alibi", preset).expect("preset"), 3).expect("model")
}

/// Distance from `u` to the nearest cumulative boundary of the CPU's sorted kept distribution, and
/// whether top-p sits on a rounding edge (the kept set changes when top_p moves by 1e-4).
fn near_boundary(cfg: SamplingConfig, logits: &[f32], u: f64) -> bool {
    let probs = |c: SamplingConfig| Sampler::new(c).expect("sampler").probabilities(logits).expect("probs");
    let p = probs(cfg);
    if cfg.top_p < 1.0 {
        let kept = |c: SamplingConfig| probs(c).iter().filter(|&&x| x > 0.0).count();
        let lo = SamplingConfig { top_p: (cfg.top_p - 1e-4).max(1e-6), ..cfg };
        let hi = SamplingConfig { top_p: (cfg.top_p + 1e-4).min(1.0), ..cfg };
        if kept(lo) != kept(hi) {
            return true;
        }
    }
    let mut order: Vec<(usize, f64)> = p.iter().copied().enumerate().filter(|&(_, x)| x > 0.0).collect();
    order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut cum = 0.0;
    order.iter().any(|&(_, x)| {
        cum += x;
        (cum - u).abs() < 1e-4
    })
}

#[test]
fn gpu_sampling_matches_the_cpu_sampler() {
    let Some(ctx) = context() else { return };
    let mut rng = Rng::new(17);
    let (mut compared, mut skipped) = (0, 0);
    for vocab in [61usize, 300] {
        let m = model(vocab);
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &m)).expect("upload");
        let mut s = pollster::block_on(gm.session()).expect("session");
        for case in 0..160u64 {
            let temperature = [0.0f32, 0.5, 1.0, 1.7][case as usize % 4];
            let top_k = [0usize, 1, 5, 40][(case / 4) as usize % 4];
            let top_p = [1.0f32, 0.9, 0.3][(case / 16) as usize % 3];
            let mut logits: Vec<f32> = (0..vocab).map(|_| (rng.next_f64() as f32 - 0.5) * 8.0).collect();
            if case % 7 == 3 {
                logits[case as usize % vocab] = f32::NAN;
                logits[(case as usize * 3 + 1) % vocab] = f32::NEG_INFINITY;
            }
            if case % 11 == 5 {
                // Ties: the CPU keeps the lower id first.
                let hi = logits.iter().copied().fold(f32::MIN, f32::max);
                logits[2] = hi;
                logits[vocab - 1] = hi;
            }
            let cfg = SamplingConfig { temperature, top_k, top_p, seed: case };
            let mut cpu = Sampler::new(cfg).expect("sampler");
            let mut twin = Sampler::new(cfg).expect("sampler");
            let want = cpu.sample(&logits).expect("cpu sample");
            let u = twin.draw().unwrap_or(0.0);
            let gs = GpuSampling { temperature, top_k: top_k as u32, top_p, u, vocab: 0 };
            let got = pollster::block_on(s.sample_logits(&logits, &gs)).expect("gpu sample");
            if temperature > 0.0 && near_boundary(cfg, &logits, u) {
                skipped += 1;
                continue;
            }
            compared += 1;
            assert_eq!(
                got, want,
                "vocab {vocab}, case {case}: T {temperature}, top-k {top_k}, top-p {top_p}, u {u}"
            );
        }
    }
    eprintln!("{compared} draws compared, {skipped} within 1e-4 of a boundary skipped");
    assert!(skipped * 20 <= compared, "too many boundary cases skipped: {skipped} of {}", compared + skipped);
}

/// End to end: each token sampled on the GPU (top-k 5) is among the CPU reference's 5 most likely
/// tokens at that position, and a sampled decode step reads back 4 bytes in one submission.
#[test]
fn sampled_decode_stays_in_the_cpu_top_k_and_reads_back_one_token() {
    let Some(ctx) = context() else { return };
    let m = model(300);
    let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &m)).expect("upload");
    let mut s = pollster::block_on(gm.session()).expect("session");
    let mut cpu = m.session();
    let prompt = [5u32, 17, 42];
    let mut logits = cpu.prefill(&prompt).expect("cpu prefill");
    pollster::block_on(s.prefill(&prompt)).expect("gpu prefill");
    let mut sampler =
        Sampler::new(SamplingConfig { temperature: 1.0, top_k: 5, top_p: 1.0, seed: 9 }).expect("s");
    let mut tok = 7u32;
    for step in 0..24 {
        let before = ctx.traffic();
        let u = sampler.draw().expect("temperature > 0 draws");
        let next = pollster::block_on(
            s.step_sample(tok, &GpuSampling { temperature: 1.0, top_k: 5, top_p: 1.0, u, vocab: 0 }),
        )
        .expect("gpu step");
        let after = ctx.traffic();
        assert_eq!(after.submissions - before.submissions, 1, "one submission per token");
        assert_eq!(after.readback_bytes - before.readback_bytes, 4, "only the token is read back");
        logits = cpu.step(tok).expect("cpu step");
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        assert!(order[..5].contains(&(next as usize)), "step {step}: token {next} not in the CPU top 5");
        tok = next;
    }
    assert!(!logits.is_empty());
}

#[test]
fn bad_sampling_settings_are_typed_errors() {
    let Some(ctx) = context() else { return };
    let m = model(61);
    let mut gm = pollster::block_on(GpuModel::new(ctx, &m)).expect("upload");
    let mut s = pollster::block_on(gm.session()).expect("session");
    let logits = vec![0.0f32; 61];
    let ok = GpuSampling { temperature: 1.0, top_k: 0, top_p: 1.0, u: 0.5, vocab: 0 };
    for bad in [
        GpuSampling { temperature: f32::NAN, ..ok },
        GpuSampling { temperature: -1.0, ..ok },
        GpuSampling { top_p: 0.0, ..ok },
        GpuSampling { u: 1.0, ..ok },
    ] {
        assert!(pollster::block_on(s.sample_logits(&logits, &bad)).is_err(), "{bad:?} accepted");
    }
    assert!(pollster::block_on(s.sample_logits(&logits[..10], &ok)).is_err());
    // Uniform logits, u = 0.5 → the middle id in (weight desc, id asc) order.
    assert_eq!(pollster::block_on(s.sample_logits(&logits, &ok)).expect("sample"), 30);
}

/// A vocabulary limit (a tokenizer smaller than the model's vocabulary) bounds the GPU's pick,
/// greedy and sampled, even where the ids beyond it have the largest logits.
#[test]
fn a_vocabulary_limit_bounds_the_gpu_pick() {
    let Some(ctx) = context() else { return };
    let m = model(61);
    let mut gm = pollster::block_on(GpuModel::new(ctx, &m)).expect("upload");
    let mut s = pollster::block_on(gm.session()).expect("session");
    let logits: Vec<f32> = (0..61).map(|i| if i >= 40 { 10.0 } else { (i % 7) as f32 }).collect();
    for temperature in [0.0, 1.0] {
        for u in [0.0, 0.5, 0.99] {
            let g = GpuSampling { temperature, top_k: 0, top_p: 1.0, u, vocab: 40 };
            let id = pollster::block_on(s.sample_logits(&logits, &g)).expect("sample");
            assert!(id < 40, "t {temperature} u {u}: id {id}");
            let free = GpuSampling { vocab: 0, ..g };
            assert!(pollster::block_on(s.sample_logits(&logits, &free)).expect("sample") >= 40);
        }
    }
}
