//! GPU ≡ the reference library on imported Hugging Face checkpoints (issue 13): every fixture of
//! `crates/core/tests/fixtures/hf/` (small random Llama, GPT-NeoX, BLOOM and GPT-2 models with
//! varied options, built by `scripts/hf_fixtures.py`) is imported with `hf::import_dir` and run on
//! the GPU backend; its prefill logits at every position (in one chunk and in chunks of 7 rows) and
//! its step-by-step decode logits must equal transformers' own logits (`reference.safetensors`)
//! within 1e-4 relative (max |Δ| / max |reference| per position). Runs on any adapter (CI: Mesa
//! lavapipe); without one the test fails unless `ATTNLAB_SKIP_GPU=1`.

use attnlab_core::hf::{import_dir, ImportOptions};
use attnlab_core::Model;
use attnlab_gpu::GpuModel;
use common::{context, hf_fixtures as fixtures, hf_reference as reference, rel_err};

mod common;

const TOL: f32 = 1e-4;

/// Worst per-position error of `got` ([T, V]) against `want`.
fn worst(want: &[f32], got: &[f32], v: usize) -> f32 {
    assert_eq!(want.len(), got.len(), "logit counts differ");
    (0..want.len() / v)
        .map(|t| rel_err(&want[t * v..(t + 1) * v], &got[t * v..(t + 1) * v]))
        .fold(0.0, f32::max)
}

#[test]
fn imported_checkpoints_on_the_gpu_match_the_reference_library() {
    let Some(ctx) = context() else { return };
    eprintln!("adapter: {:?}", ctx.caps());
    let mut rows = Vec::new();
    let mut failures = Vec::new();
    for dir in fixtures() {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let imported = import_dir(&dir, ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let model = Model::new(imported.config.clone(), imported.weights).expect("model");
        let v = imported.config.vocab_size;
        let (ids, want) = reference(&dir, v);
        let mut gm = pollster::block_on(GpuModel::new(ctx.clone(), &model)).expect("upload");

        // Prefill of every position: one chunk, then chunks of 7 rows.
        let mut e_prefill = 0.0f32;
        for chunk in [ids.len(), 7] {
            let mut s = pollster::block_on(gm.session_with_chunk(chunk)).expect("session");
            let got = pollster::block_on(s.prefill_all(&ids)).expect("gpu prefill");
            e_prefill = e_prefill.max(worst(&want, &got, v));
        }
        // Decode token by token from an empty session.
        let mut s = pollster::block_on(gm.session()).expect("session");
        let mut got = Vec::with_capacity(want.len());
        for &id in &ids {
            got.extend(pollster::block_on(s.step(id)).expect("gpu step"));
        }
        let e_decode = worst(&want, &got, v);

        let row = format!(
            "| {name:<34} | {:<18} | {:>3} | {e_prefill:.2e} | {e_decode:.2e} |",
            imported.architecture,
            ids.len()
        );
        if !(e_prefill <= TOL && e_decode <= TOL) {
            failures.push(row.clone());
        }
        rows.push(row);
    }
    eprintln!(
        "| fixture | architecture | T | prefill | decode |\n|---|---|---|---|---|\n{}",
        rows.join("\n")
    );
    assert!(failures.is_empty(), "over {TOL:e} relative to the reference library:\n{}", failures.join("\n"));
}
