//! Imported Hugging Face checkpoints ≡ the reference library (issue 13): for every fixture built by
//! `scripts/hf_fixtures.py` (small random Llama, GPT-NeoX, BLOOM and GPT-2 models with varied options),
//! the CPU reference's logits on the recorded token ids equal transformers' own logits within 1e-4
//! relative (max |Δ| / max |reference| per position), for prefill and for step-by-step decode.

mod common;
use attnlab_core::hf::{import_dir, ImportOptions};
use attnlab_core::weights::StorageDtype;
use attnlab_core::Model;
use common::{hf_fixtures as fixtures, hf_reference as reference, rel_err};

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
