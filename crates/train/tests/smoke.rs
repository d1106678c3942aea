//! Training smoke test (runs in CI): a tiny hybrid (ReGLA + ALiBi) trains for a few dozen steps on
//! the bundled init corpus, the loss goes down, the checkpoint loads in attnlab-core and generates;
//! an interrupted run resumes to the same weights (another architecture is refused); the best validation's model is kept and patience
//! stops a run that no longer improves; bad options and non-finite losses fail clearly.

use attnlab_core::config::{AttentionSpec, ModelConfig, SizePreset};
use attnlab_core::tokenizer::INIT_CORPUS;
use attnlab_core::{Model, Sampler, SamplingConfig, Tokenizer};
use attnlab_train::data::TokenData;
use attnlab_train::trainer::{best_validation, train, TrainOptions, ValRecord};
use attnlab_train::{TrainError, TrainModel};
use std::path::PathBuf;

fn tiny_cfg(vocab: usize) -> ModelConfig {
    let mut cfg = ModelConfig::preset("regla", SizePreset::tiny(vocab)).expect("preset");
    cfg.layers[1] = AttentionSpec::Alibi(attnlab_core::variants::alibi::Alibi { slopes: None });
    cfg
}

fn data() -> TokenData {
    let tok = Tokenizer::train_byte_bpe(INIT_CORPUS, 320).expect("tokenizer");
    TokenData::from_text(&tok, INIT_CORPUS, 0.1).expect("data")
}

fn opts(steps: usize) -> TrainOptions {
    TrainOptions {
        steps,
        batch: 4,
        seq_len: 32,
        lr: 1e-2,
        warmup: 3,
        val_every: 10,
        val_batches: 2,
        seed: 7,
        ..TrainOptions::default()
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("attnlab-smoke-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn tiny_training_lowers_the_loss_and_the_checkpoint_generates_in_core() {
    let started = std::time::Instant::now();
    let data = data();
    let cfg = tiny_cfg(data.vocab);
    let out = tmp("train");
    let model = TrainModel::random(cfg, 1).expect("model");
    let s = train(model, &data, &opts(30), &out, false, false).expect("training runs");
    let losses: Vec<f32> = s.history.train.iter().map(|r| r.loss).collect();
    assert_eq!(losses.len(), 30);
    let head: f32 = losses[..5].iter().sum::<f32>() / 5.0;
    let tail: f32 = losses[25..].iter().sum::<f32>() / 5.0;
    assert!(tail < head - 0.5, "loss did not decrease enough: first 5 mean {head}, last 5 mean {tail}");
    assert_eq!(s.history.valid.len(), 3, "validation at steps 10, 20, 30");
    assert!(out.join("history.json").is_file());

    // The checkpoint is a core model folder: load, check the tokenizer, generate.
    let core = Model::load_dir(&out).expect("core loads the checkpoint");
    let tok = Tokenizer::from_file(&out.join("tokenizer.json")).expect("tokenizer");
    tok.check_fits(core.config().vocab_size).expect("tokenizer fits");
    let prompt = tok.encode("The ").expect("encode");
    let mut sess = core.session();
    let mut logits = sess.prefill(&prompt).expect("prefill");
    let mut sampler = Sampler::new(SamplingConfig { seed: 3, ..SamplingConfig::default() }).expect("sampler");
    let mut generated = Vec::new();
    for _ in 0..16 {
        let id = sampler.sample(&logits).expect("sample");
        generated.push(id);
        logits = sess.step(id).expect("step");
    }
    assert_eq!(generated.len(), 16);
    assert!(!tok.decode(&generated).expect("decode").is_empty());
    std::fs::remove_dir_all(&out).ok();
    eprintln!("smoke training took {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn an_interrupted_run_resumes_to_the_same_weights() {
    let data = data();
    let cfg = tiny_cfg(data.vocab);
    let (a, b) = (tmp("full"), tmp("resumed"));
    let mut o = opts(12);
    o.val_every = 4;
    train(TrainModel::random(cfg.clone(), 2).expect("model"), &data, &o, &a, false, false).expect("full run");
    let mut first = o.clone();
    first.stop_at = Some(8);
    let s1 = train(TrainModel::random(cfg.clone(), 2).expect("model"), &data, &first, &b, false, false)
        .expect("first segment");
    assert_eq!(s1.step, 8);
    let s2 =
        train(TrainModel::random(cfg, 99).expect("model"), &data, &o, &b, true, false).expect("resumed run");
    assert_eq!((s2.resumed_from, s2.step), (8, 12));
    assert_eq!(s2.history.train.len(), 12);
    let wa = TrainModel::load_dir(&a).expect("a").to_weights().expect("wa");
    let wb = TrainModel::load_dir(&b).expect("b").to_weights().expect("wb");
    for (name, ta) in &wa.tensors {
        let tb = &wb.tensors[name];
        let diff = ta
            .data
            .to_f32()
            .iter()
            .zip(tb.data.to_f32().iter())
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        assert!(diff <= 1e-6, "{name}: resumed weights differ by {diff}");
    }
    // Resuming another architecture from that checkpoint is refused by name, and leaves it as it was.
    let other = ModelConfig::preset("alibi", SizePreset::tiny(data.vocab)).expect("preset");
    let e = train(TrainModel::random(other, 2).expect("model"), &data, &o, &b, true, false)
        .expect_err("a different architecture must not resume");
    let msg = e.to_string();
    assert!(msg.contains("config.json") && msg.contains("architecture differs"), "{msg}");
    let kept = TrainModel::load_dir(&b).expect("b").to_weights().expect("kept");
    assert_eq!(kept.tensors.len(), wb.tensors.len());
    std::fs::remove_dir_all(&a).ok();
    std::fs::remove_dir_all(&b).ok();
}

#[test]
fn batches_of_different_steps_do_not_share_windows() {
    let data: Vec<u32> = (0..100_000).collect();
    let o = TrainOptions { batch: 8, seq_len: 16, ..TrainOptions::default() };
    let starts = |step: usize| -> Vec<u32> {
        attnlab_train::trainer::batch_for_step(&data, &o, step).chunks(17).map(|w| w[0]).collect()
    };
    let mut seen = std::collections::BTreeSet::new();
    for step in 0..20 {
        for s in starts(step) {
            assert!(seen.insert(s), "window start {s} repeats (step {step})");
        }
    }
    assert_eq!(starts(3), starts(3), "batches are reproducible");
    let o2 = TrainOptions { seed: 1, ..o.clone() };
    assert_ne!(
        attnlab_train::trainer::batch_for_step(&data, &o2, 3),
        attnlab_train::trainer::batch_for_step(&data, &o, 3)
    );
}

#[test]
fn bad_options_and_data_fail_with_one_clear_line() {
    let data = data();
    let model = TrainModel::random(tiny_cfg(data.vocab), 1).expect("model");
    let mut o = opts(5);
    o.seq_len = 1000;
    let e = train(model, &data, &o, &tmp("bad"), false, false).expect_err("seq-len > max_context");
    assert!(matches!(e, TrainError::InvalidOption { .. }), "{e}");
    assert!(e.to_string().contains("max_context") && !e.to_string().contains('\n'), "{e}");
    let small = TrainModel::random(tiny_cfg(100), 1).expect("model");
    let e = train(small, &data, &opts(5), &tmp("bad2"), false, false).expect_err("vocab too small");
    assert!(e.to_string().contains("vocab_size"), "{e}");
    let e = TokenData::load(&tmp("missing")).expect_err("missing data");
    assert!(e.to_string().contains("tokenizer.json"), "{e}");
}

#[test]
fn a_non_finite_loss_stops_the_run_naming_the_step() {
    let data = data();
    let model = TrainModel::random(tiny_cfg(data.vocab), 1).expect("model");
    let mut o = opts(20);
    o.lr = 1e30;
    o.warmup = 0;
    o.grad_clip = 0.0;
    o.adamw.weight_decay = 0.0;
    let out = tmp("nan");
    let e = train(model, &data, &o, &out, false, false).expect_err("the loss must blow up");
    assert!(matches!(e, TrainError::NonFiniteLoss { .. }), "{e}");
    assert!(e.to_string().contains("at step"), "{e}");
    std::fs::remove_dir_all(&out).ok();
}

/// `best/` holds the model of the lowest validation loss: after a run whose loss falls it is the
/// last checkpoint's model, byte for byte, with that validation's step and loss.
#[test]
fn the_best_validation_keeps_its_model() {
    let data = data();
    let out = tmp("best");
    let model = TrainModel::random(tiny_cfg(data.vocab), 1).expect("model");
    let s = train(model, &data, &opts(20), &out, false, false).expect("training runs");
    let best = best_validation(&s.history.valid).expect("validations");
    assert_eq!(s.best.as_ref(), Some(best));
    assert_eq!(best.step, 20, "the loss still falls at step 20: {:?}", s.history.valid);
    let kept: ValRecord = serde_json::from_str(
        &std::fs::read_to_string(out.join("best/validation.json")).expect("validation.json"),
    )
    .expect("json");
    assert_eq!(&kept, best);
    let bytes = |p: PathBuf| std::fs::read(p).expect("model file");
    assert_eq!(bytes(out.join("best/model.safetensors")), bytes(out.join("model.safetensors")));
    Model::load_dir(&out.join("best")).expect("best/ is a model folder");
    std::fs::remove_dir_all(&out).ok();
}

/// With a learning rate too small to change any f32 weight, no validation improves on the first:
/// `--patience 2` ends the run two validations later, `best/` stays at the first validation, and a
/// resumed run with the same patience takes no further step.
#[test]
fn patience_stops_a_run_that_no_longer_improves() {
    let data = data();
    let out = tmp("patience");
    let o = TrainOptions { lr: 1e-12, val_every: 2, patience: Some(2), ..opts(20) };
    let model = || TrainModel::random(tiny_cfg(data.vocab), 1).expect("model");
    let s = train(model(), &data, &o, &out, false, false).expect("training runs");
    assert!(s.stopped_early);
    assert_eq!(s.step, 6, "validations at 2 (best), 4, 6: {:?}", s.history.valid);
    assert_eq!(s.best.as_ref().map(|b| b.step), Some(2));
    let kept: ValRecord = serde_json::from_str(
        &std::fs::read_to_string(out.join("best/validation.json")).expect("validation.json"),
    )
    .expect("json");
    assert_eq!(kept.step, 2);
    let again = train(model(), &data, &o, &out, true, false).expect("resumes");
    assert_eq!((again.step, again.stopped_early), (6, true), "no step after patience is spent");
    let refused = train(
        model(),
        &data,
        &TrainOptions { patience: Some(0), ..opts(4) },
        &tmp("patience0"),
        false,
        false,
    );
    assert!(matches!(refused, Err(TrainError::InvalidOption { .. })), "{:?}", refused.err());
    std::fs::remove_dir_all(&out).ok();
}
