//! `config.json` text → `ModelConfig::from_json` must return `Ok` or `Err`, never panic.
//!
//! For every config that validates, the target also checks that
//! * its own `to_json()` parses again (validation is stable under re-serialisation), and equals the
//!   original when `ATTNLAB_FUZZ_STRICT=1` (exact float round-trip);
//! * `model::tensor_specs` can be computed;
//! * if it is small (see `attnlab_fuzz::MAX_MODEL_PARAMS`, `MAX_TABLE_WORK`), `Model::random` builds
//!   it (or returns an error) and a 3-token prefill plus one decode step run without panicking —
//!   a config that passes `validate()` must never make the runtime panic.
#![no_main]

use attnlab_core::{model::tensor_specs, Model, ModelConfig};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn strict() -> bool {
    static STRICT: OnceLock<bool> = OnceLock::new();
    *STRICT.get_or_init(|| std::env::var_os("ATTNLAB_FUZZ_STRICT").is_some_and(|v| v == "1"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(cfg) = ModelConfig::from_json(text) else { return };

    let again = match ModelConfig::from_json(&cfg.to_json()) {
        Ok(c) => c,
        Err(e) => panic!("to_json() of a valid config does not parse again: {e}"),
    };
    if strict() {
        assert_eq!(again, cfg, "config round trip is not exact");
    }

    let specs = tensor_specs(&cfg);
    let params = specs
        .iter()
        .map(|s| s.shape.iter().fold(1usize, |a, &b| a.saturating_mul(b)))
        .fold(0usize, usize::saturating_add);
    if params > attnlab_fuzz::MAX_MODEL_PARAMS
        || attnlab_fuzz::table_work(&cfg) > attnlab_fuzz::MAX_TABLE_WORK
    {
        return;
    }
    let vocab = cfg.vocab_size as u32;
    let Ok(model) = Model::random(cfg, 0) else { return };
    let mut session = model.session();
    let _ = session.prefill(&[0, vocab - 1, vocab / 2]);
    let _ = session.step(vocab / 3);
});
