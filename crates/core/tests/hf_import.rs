//! Imported Hugging Face checkpoints ≡ the reference library (issue 13): for every fixture built by
//! `scripts/hf_fixtures.py` (small random Llama, GPT-NeoX, BLOOM and GPT-2 models with varied options),
//! the CPU reference's logits on the recorded token ids equal transformers' own logits within 1e-4
//! relative (max |Δ| / max |reference| per position), for prefill and for step-by-step decode.

mod common;
use attnlab_core::hf::{import_dir, ImportOptions};
use attnlab_core::weights::StorageDtype;
use attnlab_core::Model;
use common::rel_err;
use std::path::{Path, PathBuf};

fn fixtures() -> Vec<PathBuf> {
    // ATTNLAB_HF_FIXTURES points the test at freshly generated fixtures (scripts/hf_fixtures.py).
    let root = std::env::var_os("ATTNLAB_HF_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf"));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("fixtures folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 9 || std::env::var_os("ATTNLAB_HF_FIXTURES").is_some(),
        "expected the committed fixtures in {}",
        root.display()
    );
    dirs
}

/// `ids` [T] and `logits` [T, V] recorded by the reference library.
fn reference(dir: &Path, vocab: usize) -> (Vec<u32>, Vec<f32>) {
    let bytes = std::fs::read(dir.join("reference.safetensors")).expect("reference file");
    let st = safetensors::SafeTensors::deserialize(&bytes).expect("reference safetensors");
    let f32s = |name: &str| -> Vec<f32> {
        let t = st.tensor(name).expect("tensor");
        t.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    };
    let ids: Vec<u32> = f32s("ids").into_iter().map(|x| x as u32).collect();
    let logits = f32s("logits");
    assert_eq!(logits.len(), ids.len() * vocab);
    (ids, logits)
}

#[test]
fn imported_checkpoints_match_the_reference_library_on_prefill_and_decode() {
    let mut table = Vec::new();
    for dir in fixtures() {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let imported = import_dir(&dir, ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected_dtype = match () {
            _ if name.contains("bf16") => StorageDtype::Bf16,
            _ if name.contains("f16") => StorageDtype::F16,
            _ => StorageDtype::F32,
        };
        assert_eq!(imported.dtype, expected_dtype, "{name}");
        let model = Model::new(imported.config.clone(), imported.weights).expect("model");
        let v = imported.config.vocab_size;
        let (ids, want) = reference(&dir, v);
        let prefill = model.session().prefill_all(&ids).expect("prefill");
        let mut s = model.session();
        let (mut e_prefill, mut e_decode) = (0.0f32, 0.0f32);
        for (t, &id) in ids.iter().enumerate() {
            let row = &want[t * v..(t + 1) * v];
            e_prefill = e_prefill.max(rel_err(row, &prefill[t * v..(t + 1) * v]));
            e_decode = e_decode.max(rel_err(row, &s.step(id).expect("step")));
        }
        table.push(format!(
            "{name:<36} {:<20} prefill {e_prefill:.1e}  decode {e_decode:.1e}",
            imported.architecture
        ));
        eprintln!("{}", table.last().map_or("", |s| s.as_str()));
    }
    for line in &table {
        let worst = line.split_whitespace().filter_map(|w| w.parse::<f32>().ok()).fold(0.0f32, f32::max);
        assert!(worst <= 1e-4, "over 1e-4 relative: {line}");
    }
}
