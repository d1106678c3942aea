//! `tokenizer.json` bytes → `Tokenizer::from_bytes` must return `Ok` or `Err`, never panic; a
//! tokenizer that loads must encode a fixed text (`attnlab_fuzz::TOKENIZER_SAMPLE`) and decode the
//! result, plus the ids 0 and `vocab_size() - 1`, returning errors rather than panicking.
//!
//! `ATTNLAB_FUZZ_SKIP_KNOWN=1` skips inputs that hit already-reported bugs (see
//! `attnlab_fuzz::known_tokenizer_bug`), so that a run can get past them and look for new ones.
#![no_main]

use attnlab_core::tokenizer::Tokenizer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if attnlab_fuzz::skip_known() && attnlab_fuzz::known_tokenizer_bug(data) {
        return;
    }
    let Ok(tok) = Tokenizer::from_bytes(data) else { return };
    let vocab = tok.vocab_size();
    assert!(vocab > 0, "a loaded tokenizer has an empty id space");
    let _ = tok.check_fits(vocab);
    if let Ok(ids) = tok.encode(attnlab_fuzz::TOKENIZER_SAMPLE) {
        if let Some(&bad) = ids.iter().find(|&&id| id as usize >= vocab) {
            panic!("encode emitted id {bad}, outside vocab_size() = {vocab}");
        }
        let _ = tok.decode(&ids);
    }
    let _ = tok.encode("");
    let last = u32::try_from(vocab - 1).unwrap_or(u32::MAX);
    let _ = tok.decode(&[0, last]);
    let _ = tok.decode(&[last.saturating_add(1)]);
});
