//! F16 and BF16 files keep their matrices in that dtype in memory (issue 13, must-show 5): 2 bytes
//! per matrix parameter, each matrix held once, and exactly the logits of the same model widened to
//! f32 first (widening f16/bf16 to f32 is exact and the matmuls read the widened rows).

mod common;
use attnlab_core::weights::StorageDtype;
use attnlab_core::{model::tensor_specs, Model, ModelConfig};
use common::*;

/// Every matrix of `m` is one buffer, shared by its weights and the layer that multiplies by it.
fn assert_held_once(name: &str, m: &Model) {
    let w = m.weights();
    for i in 0..m.config().n_layers {
        let attn = m.attention(i).expect("layer");
        for (p, l) in ["wq", "wk", "wv", "wo"].iter().zip(attn.projections()) {
            let t = w.tensor(&format!("layers.{i}.attn.{p}")).expect("tensor");
            assert!(l.w.same_buffer(&t.data), "{name}: layer {i} {p} is a copy");
        }
        let (gate, up, down) = m.ffn_projections(i).expect("ffn");
        for (p, l) in [("w_gate", gate), ("w_up", Some(up)), ("w_down", Some(down))] {
            if let Some(l) = l {
                let t = w.tensor(&format!("layers.{i}.ffn.{p}")).expect("tensor");
                assert!(l.w.same_buffer(&t.data), "{name}: layer {i} {p} is a copy");
            }
        }
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every catalog variant and every architecture option (GQA, biases, untied head, learned
/// positions…), stored as F16 and as BF16: matrices in that dtype, everything else f32, and
/// bit-identical logits (prefill of every row, then decode steps) against the widened model.
#[test]
fn half_files_keep_their_matrices_and_give_the_logits_of_the_widened_model() {
    let configs: Vec<(String, ModelConfig)> =
        all_configs().into_iter().chain(architecture_configs()).collect();
    for (name, cfg) in &configs {
        let (base, _) = with_random_biases(&model(cfg, 5), 3);
        let specs = tensor_specs(cfg);
        let matrix_params: usize = specs.iter().filter(|s| s.matrix).map(|s| s.numel()).sum();
        let other_params: usize = specs.iter().filter(|s| !s.matrix).map(|s| s.numel()).sum();
        for dtype in [StorageDtype::F16, StorageDtype::Bf16] {
            let bytes = base.weights().to_safetensors_as(dtype, None).expect("encode");
            let half = Model::from_bytes(&cfg.to_json(), &bytes).expect("load");
            for spec in &specs {
                let held = half.weights().tensor(&spec.name).expect("tensor").data.dtype();
                let want = if spec.matrix { dtype } else { StorageDtype::F32 };
                assert_eq!(held, want, "{name} {dtype:?}: {}", spec.name);
            }
            let by_dtype = half.weights().bytes_by_dtype();
            assert_eq!(by_dtype.get(&dtype), Some(&(2 * matrix_params)), "{name} {dtype:?}");
            assert_eq!(by_dtype.get(&StorageDtype::F32).copied().unwrap_or(0), 4 * other_params, "{name}");
            assert_held_once(name, &half);

            let wide = Model::new(cfg.clone(), half.weights().widened()).expect("widened model");
            assert_eq!(wide.weights().bytes_by_dtype().keys().collect::<Vec<_>>(), [&StorageDtype::F32]);
            let v = cfg.vocab_size;
            let toks = tokens(72, v, 11);
            let (a, b) = (
                half.session().prefill_all(&toks).expect("half"),
                wide.session().prefill_all(&toks).expect("f32"),
            );
            assert_eq!(bits(&a), bits(&b), "{name} {dtype:?}: prefill logits differ");
            let (mut sa, mut sb) = (half.session(), wide.session());
            sa.prefill(&toks[..66]).expect("half prefill");
            sb.prefill(&toks[..66]).expect("f32 prefill");
            for &t in &toks[66..] {
                assert_eq!(
                    bits(&sa.step(t).expect("half step")),
                    bits(&sb.step(t).expect("f32 step")),
                    "{name} {dtype:?}"
                );
            }
        }
    }
}

/// An F32 file holds 4 bytes per parameter (no second copy of any matrix) and re-saving an F16 model
/// as F16 writes back the same bytes.
#[test]
fn f32_files_hold_each_matrix_once_and_half_files_save_back_unchanged() {
    let cfg = ModelConfig::preset("regla", tiny()).expect("preset");
    let m = model(&cfg, 2);
    let f32_file =
        Model::from_bytes(&cfg.to_json(), &m.weights().to_safetensors(None).expect("f32")).expect("load");
    let held: usize = f32_file.weights().bytes_by_dtype().values().sum();
    assert_eq!(held, 4 * f32_file.weights().num_params());
    assert_held_once("regla f32", &f32_file);
    let bytes = m.weights().to_safetensors_as(StorageDtype::F16, None).expect("f16");
    let half = Model::from_bytes(&cfg.to_json(), &bytes).expect("load");
    assert_eq!(half.weights().to_safetensors_as(StorageDtype::F16, None).expect("save"), bytes);
}
