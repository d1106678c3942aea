//! Text ⇄ token ids, wrapping the `tokenizers` crate (HuggingFace `tokenizer.json` format).
//!
//! The runtime never adds special tokens on its own: [`Tokenizer::encode`] returns exactly the ids of
//! the text, and [`Tokenizer::decode`] keeps special tokens in the output so that encode→decode is
//! the identity. Padding and truncation settings stored in a `tokenizer.json` are switched off on
//! load; context limits are the model layer's job ([`crate::Error::ContextTooLong`]).
//!
//! `attnlab init` trains its default tokenizer with [`Tokenizer::train_byte_bpe`] on the bundled
//! [`INIT_CORPUS`]: a GPT-2 style byte-level BPE, so any UTF-8 input tokenizes without an unknown
//! token.

use crate::{Error, Result};

/// The end-of-text special token of the byte-level BPE tokenizers attnlab trains.
pub const EOS_TOKEN: &str = "<|endoftext|>";

/// Plain English prose (original text written for this project) used to train the default
/// tokenizer of `attnlab init` (`Tokenizer::train_byte_bpe(INIT_CORPUS, 2048)`).
pub const INIT_CORPUS: &str = include_str!("init_corpus.txt");

/// A loaded tokenizer and the size of the id space it can emit.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// One more than the largest id of the model vocabulary and the added tokens.
    vocab: usize,
}

impl Tokenizer {
    /// Parse a `tokenizer.json` document. Errors are [`Error::Tokenizer`] with the parser's message.
    ///
    /// The document is first parsed as plain JSON (so truncated or garbled bytes never reach the
    /// `tokenizers` deserializers, some of which `expect()` on malformed input); a panic that
    /// still escapes `tokenizers` on a well-formed but invalid document (for example a
    /// `Precompiled` normalizer without its charsmap) is caught and reported as an error on native
    /// targets (wasm32 builds abort on panics).
    pub fn from_bytes(bytes: &[u8]) -> Result<Tokenizer> {
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| Error::Tokenizer(e.to_string()))?;
        let inner = guard("parsing", move || serde_json::from_value::<tokenizers::Tokenizer>(value))?
            .map_err(|e| Error::Tokenizer(e.to_string()))?;
        Self::from_inner(inner)
    }

    /// Read and parse a `tokenizer.json` file ([`Error::Io`] if it cannot be read).
    pub fn from_file(path: &std::path::Path) -> Result<Tokenizer> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        Self::from_bytes(&bytes).map_err(|e| match e {
            Error::Tokenizer(msg) => Error::Tokenizer(format!("{}: {msg}", path.display())),
            other => other,
        })
    }

    fn from_inner(mut inner: tokenizers::Tokenizer) -> Result<Tokenizer> {
        // The model layer owns context limits; never truncate or pad silently.
        inner.with_truncation(None).map_err(|e| Error::Tokenizer(e.to_string()))?;
        inner.with_padding(None);
        let vocab = inner.get_vocab(true).values().map(|&id| id as usize + 1).max().unwrap_or(0);
        if vocab == 0 {
            return Err(Error::Tokenizer("the vocabulary is empty".into()));
        }
        Ok(Tokenizer { inner, vocab })
    }

    /// Size of the id space, added tokens included: every id this tokenizer emits is below it.
    ///
    /// This is one more than the largest id (model vocabulary and added tokens); for the usual
    /// gap-free `tokenizer.json` it equals the number of tokens.
    pub fn vocab_size(&self) -> usize {
        self.vocab
    }

    /// Encode `text` to ids, adding no special tokens. The empty string gives an empty vector.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = guard("encoding", || self.inner.encode(text, false))?
            .map_err(|e| Error::Tokenizer(format!("encoding failed: {e}")))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Decode ids to text (special tokens are kept). An id `>= vocab_size()` is
    /// [`Error::TokenOutOfRange`]. Byte sequences that are not valid UTF-8 (a partial character
    /// at the end of `ids`) decode to U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        if let Some(&id) = ids.iter().find(|&&id| id as usize >= self.vocab) {
            return Err(Error::TokenOutOfRange { id, vocab: self.vocab });
        }
        guard("decoding", || self.inner.decode(ids, false))?
            .map_err(|e| Error::Tokenizer(format!("decoding failed: {e}")))
    }

    /// The id of a token string (model vocabulary or added token), if it has one.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The token string of an id, if it has one.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Serialize as a compact (single-line) `tokenizer.json` document.
    pub fn to_json(&self) -> Result<String> {
        self.inner.to_string(false).map_err(|e| Error::Tokenizer(format!("serialization failed: {e}")))
    }

    /// Check that every id this tokenizer can emit is `< model_vocab` (the model's `vocab_size`).
    /// A model vocabulary larger than the tokenizer's is allowed (unused embedding rows).
    pub fn check_fits(&self, model_vocab: usize) -> Result<()> {
        if self.vocab > model_vocab {
            return Err(Error::Tokenizer(format!(
                "the tokenizer's vocabulary has {} ids but the model's vocab_size is {model_vocab}; \
                 every token id must be below the model's vocab_size",
                self.vocab
            )));
        }
        Ok(())
    }

    /// Train a GPT-2 style byte-level BPE on `text`, up to `vocab_size` tokens.
    ///
    /// The vocabulary is `<|endoftext|>` (id 0, a special token), the 256 byte tokens (ids 1..=256,
    /// in the order of their ByteLevel characters), then one token per merge, learned by the
    /// `tokenizers` `BpeTrainer` (min frequency 0, no alphabet limit). Pre-tokenizer, decoder and
    /// post-processor are ByteLevel with `add_prefix_space = false`, so decode(encode(s)) == s for
    /// every string. Training stops early (fewer tokens) when `text` has no pair left to merge.
    /// `text` is fed line by line (line endings kept); the result is deterministic: same inputs,
    /// same `tokenizer.json`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn train_byte_bpe(text: &str, vocab_size: usize) -> Result<Tokenizer> {
        use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
        use tokenizers::normalizers::NormalizerWrapper;
        use tokenizers::pre_tokenizers::byte_level::ByteLevel;
        use tokenizers::{AddedToken, TokenizerBuilder};

        const MIN_VOCAB: usize = 257;
        if vocab_size < MIN_VOCAB {
            return Err(Error::arg(
                "vocab_size",
                format!(
                    "{vocab_size} is too small for a byte-level BPE (256 byte tokens + {EOS_TOKEN} = {MIN_VOCAB})"
                ),
            ));
        }
        let byte_level = ByteLevel::new(false, true, true);
        let mut tokenizer =
            TokenizerBuilder::<BPE, NormalizerWrapper, ByteLevel, ByteLevel, ByteLevel>::new()
                .with_model(BPE::default())
                .with_normalizer(None)
                .with_pre_tokenizer(Some(byte_level))
                .with_post_processor(Some(byte_level))
                .with_decoder(Some(byte_level))
                .build()
                .map_err(|e| Error::Tokenizer(format!("building the BPE tokenizer: {e}")))?;
        let mut trainer = BpeTrainerBuilder::new()
            .show_progress(false)
            .vocab_size(vocab_size)
            .min_frequency(0)
            .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
            .special_tokens(vec![AddedToken::from(EOS_TOKEN, true)])
            .build();
        tokenizer
            .train(&mut trainer, text.split_inclusive('\n'))
            .map_err(|e| Error::Tokenizer(format!("BPE training failed: {e}")))?;
        Self::from_inner(tokenizer.into())
    }
}

/// Run a `tokenizers` call, turning a panic inside it into [`Error::Tokenizer`].
///
/// `tokenizers` has `expect()`s on some malformed-configuration paths. Its tokenizer state is
/// only a read-mostly cache of whole entries, so continuing after a caught panic is sound
/// (hence `AssertUnwindSafe`). On wasm32 (panic = abort) this is a plain call.
fn guard<T>(what: &str, f: impl FnOnce() -> T) -> Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown error".into());
        Error::Tokenizer(format!("{what} failed inside the tokenizers library: {msg}"))
    })
}

// The tests train tokenizers, which is native-only.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    fn small() -> Tokenizer {
        Tokenizer::train_byte_bpe(
            "the cat sat on the mat.\nthe dog sat on the log.\nThe end, the end!\n",
            300,
        )
        .expect("training on a tiny text works")
    }

    fn init() -> Tokenizer {
        Tokenizer::train_byte_bpe(INIT_CORPUS, 2048).expect("training on the init corpus works")
    }

    const SAMPLES: &[&str] = &[
        "Hello, world! The quick brown fox jumps over the lazy dog.",
        "  leading and trailing spaces  \n\ttabs\r\nand CRLF\n\n",
        "Ünïcödé: naïve café, 日本語のテキスト, Ελληνικά, русский, עברית, 🦀🚀",
        "\u{1F600}\u{0007}ǅ",
        "\u{0000}\u{001F}\u{007F}\u{0085}\u{200B}\u{FEFF}\u{10FFFF}",
        "<|endoftext|>between<|endoftext|>",
        "1234567890 3.14159 -42 1e-9",
    ];

    #[test]
    fn round_trip_ascii_and_unicode() {
        for tok in [small(), init()] {
            for s in SAMPLES {
                let ids = tok.encode(s).expect("encode");
                assert!(ids.iter().all(|&id| (id as usize) < tok.vocab_size()));
                assert_eq!(&tok.decode(&ids).expect("decode"), s, "round trip of {s:?}");
            }
        }
    }

    #[test]
    fn unseen_bytes_tokenize_as_bytes() {
        // None of these characters occur in the tiny training text: they must still encode, one
        // token per UTF-8 byte, and round-trip exactly.
        let tok = small();
        let s = "\u{1F600}\u{0007}ǅ";
        let ids = tok.encode(s).expect("encode");
        assert_eq!(ids.len(), s.len());
        assert_eq!(tok.decode(&ids).expect("decode"), s);
    }

    #[test]
    fn empty_string_is_empty() {
        let tok = small();
        assert_eq!(tok.encode("").expect("encode"), Vec::<u32>::new());
        assert_eq!(tok.decode(&[]).expect("decode"), "");
    }

    #[test]
    fn special_token_is_id_zero_and_kept() {
        let tok = small();
        assert_eq!(tok.token_to_id(EOS_TOKEN), Some(0));
        assert_eq!(tok.id_to_token(0).as_deref(), Some(EOS_TOKEN));
        let ids = tok.encode("a<|endoftext|>b").expect("encode");
        assert!(ids.contains(&0));
        assert_eq!(tok.decode(&ids).expect("decode"), "a<|endoftext|>b");
    }

    #[test]
    fn training_is_deterministic() {
        let a = Tokenizer::train_byte_bpe(INIT_CORPUS, 1000).expect("train");
        let b = Tokenizer::train_byte_bpe(INIT_CORPUS, 1000).expect("train");
        let ja = a.to_json().expect("json");
        assert_eq!(ja, b.to_json().expect("json"));
        let text = "A short sentence about the weather in the hills.";
        assert_eq!(a.encode(text).expect("encode"), b.encode(text).expect("encode"));
    }

    #[test]
    fn init_corpus_reaches_2048() {
        let tok = init();
        assert_eq!(tok.vocab_size(), 2048);
        assert_eq!(tok.inner.get_vocab_size(true), 2048);
        // Merges actually compress English text.
        let text = "The children walked along the river to the old station.";
        let ids = tok.encode(text).expect("encode");
        assert!(ids.len() * 3 < text.len(), "{} ids for {} bytes", ids.len(), text.len());
    }

    #[test]
    fn small_vocab_or_text_limits() {
        assert!(matches!(
            Tokenizer::train_byte_bpe("abc", 256),
            Err(Error::InvalidArgument { ref name, .. }) if name == "vocab_size"
        ));
        // Nothing to merge: only the special token and the 256 bytes.
        let tok = Tokenizer::train_byte_bpe("", 1000).expect("train");
        assert_eq!(tok.vocab_size(), 257);
        assert_eq!(tok.decode(&tok.encode("xyz").expect("encode")).expect("decode"), "xyz");
    }

    #[test]
    fn json_round_trip() {
        let tok = small();
        let json = tok.to_json().expect("json");
        let back = Tokenizer::from_bytes(json.as_bytes()).expect("parse");
        assert_eq!(back.vocab_size(), tok.vocab_size());
        for s in SAMPLES {
            assert_eq!(back.encode(s).expect("encode"), tok.encode(s).expect("encode"));
        }
        assert_eq!(back.to_json().expect("json"), json);
    }

    #[test]
    fn file_round_trip_and_io_error() {
        let tok = small();
        let dir = std::env::temp_dir().join(format!("attnlab-tok-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("tokenizer.json");
        std::fs::write(&path, tok.to_json().expect("json")).expect("write");
        let back = Tokenizer::from_file(&path).expect("load");
        assert_eq!(back.vocab_size(), tok.vocab_size());
        std::fs::write(&path, "{").expect("write");
        let err = Tokenizer::from_file(&path).expect_err("truncated");
        assert!(matches!(err, Error::Tokenizer(ref m) if m.contains("tokenizer.json")), "{err}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
        let err = Tokenizer::from_file(&dir.join("missing.json")).expect_err("missing");
        assert!(matches!(err, Error::Io { .. }), "{err}");
    }

    #[test]
    fn decode_out_of_range() {
        let tok = small();
        let v = tok.vocab_size();
        let err = tok.decode(&[1, 2, v as u32, 3]).expect_err("out of range");
        assert!(matches!(err, Error::TokenOutOfRange { id, vocab } if id as usize == v && vocab == v));
        assert!(tok.decode(&[u32::MAX]).is_err());
        assert!(tok.decode(&[v as u32 - 1]).is_ok());
    }

    #[test]
    fn corrupt_json_errors() {
        let json = small().to_json().expect("json");
        let bytes = json.as_bytes();
        // Truncations at many points, garbage, wrong types, invalid UTF-8: errors, never panics.
        for cut in (0..bytes.len()).step_by(97).chain([1, bytes.len() - 1]) {
            assert!(
                matches!(Tokenizer::from_bytes(&bytes[..cut]), Err(Error::Tokenizer(_))),
                "truncated at {cut}"
            );
        }
        for bad in [
            &b""[..],
            b"not json",
            b"{}",
            b"[]",
            b"null",
            b"{\"model\": 3}",
            b"\xff\xfe\x00",
            br#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,"pre_tokenizer":null,"post_processor":null,"decoder":null,"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}}"#,
        ] {
            let r = Tokenizer::from_bytes(bad);
            assert!(matches!(r, Err(Error::Tokenizer(_))), "{:?} → {r:?}", String::from_utf8_lossy(bad));
        }
        // Well-formed JSON that makes `tokenizers` panic internally: still an error.
        let mut value: serde_json::Value = serde_json::from_str(&json).expect("value");
        value["normalizer"] = serde_json::json!({"type": "Precompiled"});
        let r = Tokenizer::from_bytes(value.to_string().as_bytes());
        assert!(matches!(r, Err(Error::Tokenizer(_))), "{r:?}");
        let mangled = json.replace("\"vocab\"", "\"vocabulary\"");
        assert!(Tokenizer::from_bytes(mangled.as_bytes()).is_err());
        let msg = Tokenizer::from_bytes(b"{").expect_err("bad").to_string();
        assert!(msg.starts_with("tokenizer.json: ") && msg.len() > "tokenizer.json: ".len(), "{msg}");
    }

    #[test]
    fn check_fits_names_both_sizes() {
        let tok = small();
        let v = tok.vocab_size();
        assert!(tok.check_fits(v).is_ok());
        assert!(tok.check_fits(v + 64).is_ok());
        let msg = tok.check_fits(v - 1).expect_err("too small").to_string();
        assert!(msg.contains(&v.to_string()) && msg.contains(&(v - 1).to_string()), "{msg}");
    }

    #[test]
    fn truncation_in_json_is_ignored() {
        let tok = small();
        let mut value: serde_json::Value =
            serde_json::from_str(&tok.to_json().expect("json")).expect("value");
        value["truncation"] = serde_json::json!({
            "direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 0
        });
        let loaded = Tokenizer::from_bytes(value.to_string().as_bytes()).expect("parse");
        let text = "the cat sat on the mat and the dog sat on the log";
        assert_eq!(loaded.encode(text).expect("encode"), tok.encode(text).expect("encode"));
    }
}
