//! A Hugging Face checkpoint → `hf::import` must return `Ok` or `Err`, never panic.
//!
//! The input is `config.json` text, index text and one shard's bytes, separated by
//! `attnlab_fuzz::HF_SEP` (`attnlab_fuzz::hf_split`; an empty index means a single
//! `model.safetensors`, otherwise the shard is named after the first file the index names). When
//! the checkpoint imports, the model must build and run a 3-token prefill and one decode step
//! without panicking.
#![no_main]

use attnlab_core::hf::{self, ImportOptions};
use attnlab_core::Model;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (config, index, shard) = attnlab_fuzz::hf_split(data);
    let _ = hf::is_hf_config(&config);
    let name = hf::shard_files(index.as_deref())
        .ok()
        .and_then(|files| files.into_iter().next())
        .unwrap_or_else(|| hf::SINGLE_FILE.to_string());
    let shards = vec![(name, shard.to_vec())];
    let Ok(imported) = hf::import(&config, index.as_deref(), shards, ImportOptions::default()) else {
        return;
    };
    let vocab = imported.config.vocab_size as u32;
    let model = match Model::new(imported.config, imported.weights) {
        Ok(m) => m,
        Err(e) => panic!("an imported checkpoint does not build a model: {e}"),
    };
    let mut session = model.session();
    let _ = session.prefill(&[0, vocab - 1, vocab / 2]);
    let _ = session.step(vocab / 3);
});
