//! `model.safetensors` bytes → `Weights::from_safetensors(bytes, &tensor_specs(&cfg))` and
//! `Model::from_bytes(config_json, bytes)` for a fixed tiny config
//! (`ModelConfig::preset("alibi", attnlab_fuzz::tiny_sizes())`) must return `Ok` or `Err`, never
//! panic. When the model loads, a short prefill and a decode step must not panic either.
#![no_main]

use attnlab_core::{model::tensor_specs, weights::Weights, Model};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fuzz_target!(|data: &[u8]| {
    static SPECS: OnceLock<Vec<attnlab_core::weights::TensorSpec>> = OnceLock::new();
    let specs = SPECS.get_or_init(|| tensor_specs(attnlab_fuzz::safetensors_config()));

    let weights = Weights::from_safetensors(data, specs);
    let model = Model::from_bytes(attnlab_fuzz::safetensors_config_json(), data);
    // Both paths run the same checks: they must agree on success.
    assert_eq!(weights.is_ok(), model.is_ok(), "Weights::from_safetensors and Model::from_bytes disagree");

    if let Ok(model) = model {
        let mut session = model.session();
        let _ = session.prefill(&[0, 15, 7]);
        let _ = session.step(3);
    }
});
