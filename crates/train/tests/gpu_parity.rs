//! GPU trainer ≡ candle trainer (issue 14 item 1): for every catalog config the GPU trainer accepts,
//! the gradient of every tensor on one batch agrees with candle's backward pass (relative L2 error
//! ‖g_gpu − g_cpu‖ / ‖g_cpu‖ ≤ 1e-3 per tensor), and a short run of optimizer steps gives the same
//! losses; every config it does not accept yet is refused by name. Runs on any adapter (CI: Mesa
//! lavapipe); without one it fails unless `ATTNLAB_SKIP_GPU=1`.
#![cfg(feature = "gpu")]

use attnlab_core::config::ModelConfig;
use attnlab_core::Model;
use attnlab_gpu::GpuContext;
use attnlab_train::gpu::GpuTrain;
use attnlab_train::optim::{AdamW, AdamWConfig};
use attnlab_train::reference;
use attnlab_train::trainer::optimizer_step;
use attnlab_train::{TrainError, TrainModel};
use candle_core::Tensor;
use std::collections::BTreeMap;

#[path = "../../core/tests/common.rs"]
mod common;
use common::all_configs;

const BATCH: usize = 2;
/// Crosses TransNormer's Diag blocks of 8 three times.
const SEQ: usize = 24;

fn context() -> Option<GpuContext> {
    match pollster::block_on(GpuContext::new()) {
        Ok(c) => Some(c),
        Err(e) if std::env::var("ATTNLAB_SKIP_GPU").is_ok_and(|v| v == "1") => {
            eprintln!("skipping GPU test (ATTNLAB_SKIP_GPU=1): {e}");
            None
        }
        Err(e) => {
            panic!("no usable GPU adapter ({e}); install mesa-vulkan-drivers or set ATTNLAB_SKIP_GPU=1")
        }
    }
}

/// `rows` windows of `seq + 1` ids from an LCG.
fn windows(rows: usize, seq: usize, vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..rows * (seq + 1))
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) % vocab as u64) as u32
        })
        .collect()
}

/// Loss and every tensor's gradient from candle's backward pass.
fn candle_gradients(model: &TrainModel, batch: &[u32]) -> (f32, BTreeMap<String, Vec<f32>>) {
    let (loss, grads) = reference::loss_and_gradients(model, batch, BATCH).expect("gradients");
    let f32s = |g: Vec<f64>| g.into_iter().map(|v| v as f32).collect();
    (loss as f32, grads.into_iter().map(|(name, g)| (name, f32s(g))).collect())
}

fn norm(x: &[f32]) -> f64 {
    x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>().sqrt()
}

/// The worst per-tensor relative error ‖g_gpu − g_cpu‖ / ‖g_cpu‖, and its tensor. A gradient that is
/// zero in exact arithmetic (a per-head constant added to every logit of a softmax row, FIRE's
/// output bias b2: ~5e-9 against 1.9 for the embedding's) is rounding noise on both sides, so the
/// denominator has a floor of 1e-5 of the largest tensor gradient's norm.
fn worst_gradient_error(cpu: &BTreeMap<String, Vec<f32>>, gpu: &BTreeMap<String, Vec<f32>>) -> (f64, String) {
    let floor = 1e-5 * cpu.values().map(|c| norm(c)).fold(0.0, f64::max);
    let mut worst = (0.0, String::new());
    for (name, c) in cpu {
        let g = gpu.get(name).unwrap_or_else(|| panic!("the GPU trainer has no gradient for {name}"));
        assert_eq!(g.len(), c.len(), "{name}: gradient length");
        let diff: Vec<f32> = g.iter().zip(c).map(|(a, b)| a - b).collect();
        let rel = norm(&diff) / norm(c).max(floor).max(1e-30);
        if rel > worst.0 {
            worst = (rel, name.clone());
        }
    }
    worst
}

fn gpu_trainer(ctx: &GpuContext, model: &TrainModel) -> Result<GpuTrain, TrainError> {
    GpuTrain::with_context(ctx, model, BATCH, SEQ, AdamWConfig::default())
}

#[test]
fn gpu_gradients_match_candle_for_every_catalog_configuration() {
    let Some(ctx) = context() else { return };
    for (name, cfg) in all_configs() {
        let model =
            TrainModel::from_core(&Model::random(cfg.clone(), 5).expect("model")).expect("train model");
        let mut gpu = gpu_trainer(&ctx, &model).unwrap_or_else(|e| panic!("{name}: {e}"));
        let batch = windows(BATCH, SEQ, cfg.vocab_size, 3);
        let (cpu_loss, cpu) = candle_gradients(&model, &batch);
        let (gpu_loss, grads) = gpu.gradients(&batch).expect("gpu gradients");
        let (err, tensor) = worst_gradient_error(&cpu, &grads);
        println!(
            "{name:24} loss {cpu_loss:.6} vs {gpu_loss:.6}, worst gradient rel err {err:.2e} ({tensor})"
        );
        assert!(
            (cpu_loss - gpu_loss).abs() <= 1e-4 * cpu_loss.abs(),
            "{name}: loss {gpu_loss} vs {cpu_loss}"
        );
        assert!(err <= 1e-3, "{name}: gradient of {tensor} differs by {err:e} (relative L2) > 1e-3");
    }
}

/// ReGLA's running key max splits the positions into one chunk per invocation (⌈t / 64⌉ each): at
/// 150 positions, chunks of 3 with a short last one and empty ones after it, and runs of an equal
/// maximum that cross chunks (a vocabulary of 61 repeats tokens, so keys tie in the first layer).
#[test]
fn the_running_key_max_matches_candle_past_64_positions() {
    let Some(ctx) = context() else { return };
    const LONG: usize = 150;
    let cfg = ModelConfig::preset("regla", common::tiny()).expect("preset");
    let model = TrainModel::from_core(&Model::random(cfg.clone(), 11).expect("model")).expect("train model");
    let mut gpu = GpuTrain::with_context(&ctx, &model, BATCH, LONG, AdamWConfig::default()).expect("trainer");
    let batch = windows(BATCH, LONG, cfg.vocab_size, 4);
    let (cpu_loss, cpu) = candle_gradients(&model, &batch);
    let (gpu_loss, grads) = gpu.gradients(&batch).expect("gpu gradients");
    let (err, tensor) = worst_gradient_error(&cpu, &grads);
    assert!((cpu_loss - gpu_loss).abs() <= 1e-4 * cpu_loss.abs(), "loss {gpu_loss} vs {cpu_loss}");
    assert!(err <= 1e-3, "gradient of {tensor} differs by {err:e} (relative L2) > 1e-3");
}

/// Architecture options the GPU trainer does not have are refused by name before anything runs.
#[test]
fn architecture_options_it_does_not_train_are_refused_by_name() {
    let Some(ctx) = context() else { return };
    let mut cfg = ModelConfig::preset("alibi", common::tiny()).expect("preset");
    cfg.norm.kind = attnlab_core::config::NormKind::Layernorm;
    let model = TrainModel::random(cfg, 1).expect("model");
    match gpu_trainer(&ctx, &model) {
        Err(TrainError::Gpu(attnlab_gpu::GpuError::Unsupported(why))) => {
            assert!(why.contains("LayerNorm"), "the refusal names the option: {why}")
        }
        Err(e) => panic!("expected a refusal by name, got {e}"),
        Ok(_) => panic!("a LayerNorm model must be refused"),
    }
}

/// Five optimizer steps with clipping, warmup-sized learning rates and weight decay: the GPU's
/// losses and gradient norms follow candle's (a learned distance table, RoPE, ReGLA's gates and
/// running key max, LRPE's learned angles on the host, HGRN2's learned lower bounds).
#[test]
fn a_short_run_has_the_same_losses_on_the_gpu() {
    let Some(ctx) = context() else { return };
    for id in ["kerple-log", "rope", "regla", "lrpe", "hgrn2"] {
        let cfg = ModelConfig::preset(id, common::tiny()).expect("preset");
        let cpu = TrainModel::from_core(&Model::random(cfg.clone(), 9).expect("model")).expect("train model");
        let mut gpu = gpu_trainer(&ctx, &cpu).expect("gpu trainer");
        let mut opt = AdamW::new(&cpu, AdamWConfig::default()).expect("adamw");
        for step in 1..=5 {
            let batch = windows(BATCH, SEQ, cfg.vocab_size, 100 + step as u64);
            let lr = 3e-3 * step as f64 / 5.0;
            let t = Tensor::from_vec(batch.clone(), (BATCH, SEQ + 1), cpu.device()).expect("batch");
            let (cl, cn) = optimizer_step(&cpu, &mut opt, &t, lr, 0.5, step).expect("cpu step");
            let (gl, gn) = gpu.step(&batch, lr, 0.5, step).expect("gpu step");
            println!("{id} step {step}: loss {cl:.6} vs {gl:.6}, grad norm {cn:.5} vs {gn:.5}");
            assert!((cl - gl).abs() <= 1e-5 * cl.abs(), "{id} step {step}: loss {gl} vs {cl}");
            assert!((cn - gn).abs() <= 1e-5 * cn, "{id} step {step}: grad norm {gn} vs {cn}");
        }
        let (after_cpu, _) = candle_gradients(&cpu, &windows(BATCH, SEQ, cfg.vocab_size, 7));
        let moved = gpu.to_model().expect("gpu model");
        let (after_gpu, _) = candle_gradients(&moved, &windows(BATCH, SEQ, cfg.vocab_size, 7));
        assert!(
            (after_cpu - after_gpu).abs() <= 1e-3 * after_cpu,
            "{id}: held-out loss {after_gpu} vs {after_cpu}"
        );
    }
}

/// The page's fine-tune on the GPU (`GpuFineTune`, what the worker awaits on WebGPU) takes the same
/// steps as the CPU one (`FineTune`): same batches, schedule and losses.
#[test]
fn the_page_fine_tune_on_the_gpu_follows_the_cpu_one() {
    use attnlab_train::finetune::{FineTune, GpuFineTune, TuneOptions};
    let Some(ctx) = context() else { return };
    let model = Model::random(ModelConfig::preset("gla", common::tiny()).expect("preset"), 7).expect("model");
    let vocab = model.config().vocab_size;
    let tokens: Vec<u32> = (0..200).map(|i| ((i * 7 + i / 5) % vocab) as u32).collect();
    let opts = TuneOptions { steps: 6, lr: 3e-3, batch: 2, seq_len: 16, seed: 1 };
    let mut cpu = FineTune::new(&model, tokens.clone(), &opts).expect("cpu fine-tune");
    let mut gpu = pollster::block_on(GpuFineTune::new(&ctx, &model, tokens, &opts)).expect("gpu fine-tune");
    assert_eq!(gpu.seq_len(), cpu.seq_len());
    while !cpu.finished() {
        let (a, b) = (cpu.step().expect("cpu step"), pollster::block_on(gpu.step()).expect("gpu step"));
        assert_eq!(a.step, b.step);
        assert!((a.loss - b.loss).abs() <= 1e-5 * a.loss, "step {}: loss {} vs {}", a.step, b.loss, a.loss);
    }
    assert!(gpu.finished());
    let (a, b) = (cpu.text_loss().expect("cpu"), pollster::block_on(gpu.text_loss()).expect("gpu"));
    assert!((a - b).abs() <= 1e-4 * a, "loss on the text after: {b} vs {a}");
}

/// `attnlab bench --train --profile`: the profiled step is the whole step, item by item (one
/// cross-entropy, one gradient-norm pass, one embedding gradient, the gemms), every item timed,
/// and profiling leaves the model as it was (the next batch's loss and gradients are unchanged).
#[test]
fn a_profiled_step_times_every_item_and_changes_nothing() {
    let Some(ctx) = context() else { return };
    for (name, cfg) in all_configs().into_iter().filter(|(n, _)| n == "alibi" || n == "regla") {
        let model =
            TrainModel::from_core(&Model::random(cfg.clone(), 5).expect("model")).expect("train model");
        let mut gpu = gpu_trainer(&ctx, &model).expect("gpu trainer");
        let batch = windows(BATCH, SEQ, cfg.vocab_size, 3);
        let (before, grads_before) = gpu.gradients(&batch).expect("gradients");
        let items = gpu.profile_step(&windows(BATCH, SEQ, cfg.vocab_size, 9)).expect("profile");
        let count = |k: &str| items.iter().filter(|i| i.kernel == k).count();
        assert_eq!((count("xent"), count("sumsq"), count("embed_bwd")), (1, 1, 1), "{name}");
        // q, k, v, o, the three FFN matrices: forward, input gradient and weight gradient each.
        assert!(count("gemm") >= 3 * 7 * cfg.n_layers, "{name}: {} gemms", count("gemm"));
        assert!(items.iter().all(|i| i.seconds.is_finite() && i.seconds > 0.0), "{name}");
        assert!(items.iter().filter(|i| i.kernel != "copy").all(|i| i.grid.iter().all(|&g| g > 0)), "{name}");
        let (after, grads_after) = gpu.gradients(&batch).expect("gradients");
        assert_eq!(before, after, "{name}: profiling changed the loss");
        assert_eq!(grads_before, grads_after, "{name}: profiling changed the gradients");
    }
}
