//! The only module of the web app that names attnlab-core types.
//!
//! Everything the UI needs from the runtime goes through [`Engine`] and [`Generation`]: loading the
//! three model files, tokenizing the prompt, prefill, one decode step at a time, sampling and
//! detokenization. Errors come back as one-line strings (core's `Display`), ready for the error box.
//! Nothing here touches the DOM or the clock, so it compiles and is tested natively as well; the
//! analyses of the lab views (bias steering, perplexity, traces) extend [`Engine`] in `lab.rs`.

use attnlab_core::model::tensor_specs;
use attnlab_core::sampling::{Sampler, SamplingConfig};
use attnlab_core::tokenizer::{Tokenizer, EOS_TOKEN};
use attnlab_core::weights::Weights;
use attnlab_core::{Model, Session};

/// What the UI shows about the loaded model (read once from its config).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelInfo {
    /// `name` from config.json, or "(unnamed)".
    pub name: String,
    /// `description` from config.json (may be empty).
    pub description: String,
    /// Variant ids of the layers, deduplicated in layer order (one id unless the model is a hybrid).
    pub variants: Vec<String>,
    pub n_layers: usize,
    pub n_heads: usize,
    pub d_model: usize,
    pub vocab_size: usize,
    pub train_context: usize,
    pub max_context: usize,
    /// Number of parameters (tensor elements).
    pub params: usize,
    /// The Hugging Face class an imported checkpoint was converted from.
    pub architecture: Option<String>,
}

/// Sampling and length settings of one generation, as parsed from the form.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GenSettings {
    pub max_tokens: usize,
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub seed: u64,
}

impl Default for GenSettings {
    fn default() -> Self {
        GenSettings { max_tokens: 64, temperature: 0.8, top_k: 40, top_p: 0.95, seed: 0 }
    }
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// `max_tokens` were produced.
    MaxTokens,
    /// The model's `max_context` is reached; no further token fits.
    ContextFull,
    /// The model produced the end-of-text token (not included in the text).
    EndOfText,
}

/// A loaded model with its tokenizer.
pub struct Engine {
    pub(crate) model: Model,
    pub(crate) tokenizer: Tokenizer,
    /// The tokenizer's file as it was read (a fine-tuned model's download carries it).
    pub(crate) tokenizer_json: std::rc::Rc<str>,
    /// Id of `<|endoftext|>`, when the tokenizer has it: generation stops there.
    pub(crate) eos: Option<u32>,
    pub(crate) info: ModelInfo,
    /// Attention specs as trained (what "reset to trained" restores).
    pub(crate) trained: Vec<attnlab_core::AttentionSpec>,
}

impl Engine {
    /// Parse and validate the three model files (`config.json`, `model.safetensors`,
    /// `tokenizer.json`). Every failure is reported with the file at fault.
    pub fn load(config_json: &[u8], safetensors: &[u8], tokenizer_json: &[u8]) -> Result<Engine, String> {
        let config_text =
            std::str::from_utf8(config_json).map_err(|e| format!("config.json: not valid UTF-8 ({e})"))?;
        let model = Model::from_bytes(config_text, safetensors).map_err(|e| e.to_string())?;
        let tokenizer = Tokenizer::from_bytes(tokenizer_json).map_err(|e| e.to_string())?;
        Engine::from_model(model, tokenizer, String::from_utf8_lossy(tokenizer_json).into_owned(), None)
    }

    /// A loaded model with its tokenizer (parsed, and its file's text); `architecture` names the
    /// Hugging Face class it was imported from, if any. The tokenizer must fit the model's vocabulary.
    pub fn from_model(
        model: Model,
        tokenizer: Tokenizer,
        tokenizer_json: String,
        architecture: Option<String>,
    ) -> Result<Engine, String> {
        let cfg = model.config();
        tokenizer.check_fits(cfg.vocab_size).map_err(|e| e.to_string())?;
        let mut variants: Vec<String> = Vec::new();
        for spec in &cfg.layers {
            let id = spec.variant_id();
            if !variants.iter().any(|v| v == id) {
                variants.push(id.to_string());
            }
        }
        let info = ModelInfo {
            name: if cfg.name.is_empty() { "(unnamed)".to_string() } else { cfg.name.clone() },
            description: cfg.description.clone(),
            variants,
            n_layers: cfg.n_layers,
            n_heads: cfg.n_heads,
            d_model: cfg.d_model,
            vocab_size: cfg.vocab_size,
            train_context: cfg.train_context,
            max_context: cfg.max_context,
            params: model.weights().num_params(),
            architecture,
        };
        let eos = tokenizer.token_to_id(EOS_TOKEN);
        let trained = cfg.layers.clone();
        Ok(Engine { model, tokenizer, tokenizer_json: tokenizer_json.into(), eos, info, trained })
    }

    /// The model as its two files, `config.json` text and `model.safetensors` bytes (as stored):
    /// what the page's fine-tune module (`attnlab-tune`) starts from.
    pub fn model_files(&self) -> Result<(String, Vec<u8>), String> {
        let weights = self.model.weights().to_safetensors(None).map_err(|e| e.to_string())?;
        Ok((self.model.config().to_json(), weights))
    }

    /// The tokenizer's file (`tokenizer.json`) as it was read.
    pub fn tokenizer_json(&self) -> &str {
        &self.tokenizer_json
    }

    /// This engine with the weights `safetensors` (a fine-tune of its model, same config): the same
    /// tokenizer, name and description.
    pub fn with_weights(&self, safetensors: &[u8]) -> Result<Engine, String> {
        let cfg = self.model.config().clone();
        let weights =
            Weights::from_safetensors(safetensors, &tensor_specs(&cfg)).map_err(|e| e.to_string())?;
        let model = Model::new(cfg, weights).map_err(|e| e.to_string())?;
        let (tokenizer, json) = (self.tokenizer.clone(), self.tokenizer_json.to_string());
        let mut engine = Engine::from_model(model, tokenizer, json, self.info.architecture.clone())?;
        engine.info.name = self.info.name.clone();
        engine.info.description = self.info.description.clone();
        Ok(engine)
    }

    /// Shown as the model's name when its config has none (an imported checkpoint).
    pub fn name_if_unnamed(&mut self, name: &str) {
        if self.model.config().name.is_empty() {
            self.info.name = name.to_string();
        }
    }

    /// Facts about the loaded model.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// Tokenize `prompt` and set up sampling; no forward pass yet (call [`Generation::prefill`]).
    pub fn start(&self, prompt: &str, settings: &GenSettings) -> Result<Generation<'_>, String> {
        Ok(Generation {
            session: self.model.session(),
            decoder: self.decoder(prompt, settings)?,
            prefilled: 0,
            logits: None,
        })
    }

    /// Tokenize `prompt` and set up sampling, for a forward pass that runs elsewhere (the WebGPU
    /// backend): the [`Decoder`] turns logits (or a token picked on the GPU) into tokens and text.
    pub fn decoder(&self, prompt: &str, settings: &GenSettings) -> Result<Decoder<'_>, String> {
        if settings.max_tokens == 0 {
            return Err("max tokens must be at least 1".to_string());
        }
        let prompt_ids = self.tokenizer.encode(prompt).map_err(|e| e.to_string())?;
        if prompt_ids.is_empty() {
            return Err(attnlab_core::Error::EmptyPrompt.to_string());
        }
        if prompt_ids.len() > self.info.max_context {
            return Err(attnlab_core::Error::ContextTooLong {
                requested: prompt_ids.len(),
                max: self.info.max_context,
            }
            .to_string());
        }
        let sampler = Sampler::new(SamplingConfig {
            temperature: settings.temperature,
            top_k: settings.top_k,
            top_p: settings.top_p,
            seed: settings.seed,
        })
        .map_err(|e| e.to_string())?
        // Only ids the tokenizer can write (a model's vocabulary may be padded beyond it).
        .limit_vocab(self.tokenizer.vocab_size());
        Ok(Decoder {
            sampler,
            greedy: settings.temperature == 0.0,
            tokenizer: &self.tokenizer,
            eos: self.eos,
            prompt_ids,
            generated: Vec::new(),
            finished: None,
            max_tokens: settings.max_tokens,
            max_context: self.info.max_context,
        })
    }
}

/// Sampling, stopping rules and detokenization of one generation, independent of the backend
/// that computes the logits (the CPU `Session` in [`Generation`], or the GPU session of the page).
///
/// Feed it the logits after the prompt ([`accept_logits`](Decoder::accept_logits)); when the
/// returned token has no `finish`, run that token through the model and feed the next logits.
pub struct Decoder<'m> {
    sampler: Sampler,
    greedy: bool,
    tokenizer: &'m Tokenizer,
    eos: Option<u32>,
    prompt_ids: Vec<u32>,
    /// Every sampled id (a final end-of-text id included).
    generated: Vec<u32>,
    /// Set once the last token was produced.
    finished: Option<Finish>,
    max_tokens: usize,
    max_context: usize,
}

impl Decoder<'_> {
    /// The prompt's token ids (what prefill runs).
    pub fn prompt_ids(&self) -> &[u32] {
        &self.prompt_ids
    }

    /// Number of prompt tokens.
    pub fn prompt_len(&self) -> usize {
        self.prompt_ids.len()
    }

    /// Tokens generated so far.
    pub fn generated_len(&self) -> usize {
        self.generated.len()
    }

    /// Tokens that may still be generated before the limit on new tokens.
    pub fn tokens_left(&self) -> usize {
        self.max_tokens.saturating_sub(self.generated.len())
    }

    /// Temperature 0: the token is the argmax of the logits (the GPU may pick it itself).
    pub fn is_greedy(&self) -> bool {
        self.greedy
    }

    /// Why the generation ended, once it has.
    pub fn finished(&self) -> Option<Finish> {
        self.finished
    }

    /// Sample the next token from `logits` (those of the last position fed to the model).
    pub fn accept_logits(&mut self, logits: &[f32]) -> Result<TokenOut, String> {
        if self.finished.is_some() {
            return Err("the generation has already finished".to_string());
        }
        let id = self.sampler.sample(logits).map_err(|e| e.to_string())?;
        self.accept_token(id)
    }

    /// The sampler, for a backend that picks the token itself from the sampler's draws (the GPU's
    /// `step_sample`), so a seed means the same on both backends.
    pub fn sampler_mut(&mut self) -> &mut Sampler {
        &mut self.sampler
    }

    /// Take `id` as the next token (chosen elsewhere, e.g. the GPU's argmax): stopping rules and
    /// the decoded text. When the result has no `finish`, `id` must be fed to the model next.
    pub fn accept_token(&mut self, id: u32) -> Result<TokenOut, String> {
        if self.finished.is_some() {
            return Err("the generation has already finished".to_string());
        }
        self.generated.push(id);
        // Positions in the model so far: the prompt plus every generated token but this one.
        let fed = self.prompt_ids.len() + self.generated.len() - 1;
        let finish = if self.eos == Some(id) {
            Some(Finish::EndOfText)
        } else if self.generated.len() >= self.max_tokens {
            Some(Finish::MaxTokens)
        } else if fed >= self.max_context {
            Some(Finish::ContextFull)
        } else {
            None
        };
        self.finished = finish;
        let text_ids = match finish {
            Some(Finish::EndOfText) => &self.generated[..self.generated.len() - 1],
            _ => &self.generated[..],
        };
        let text = self.tokenizer.decode(text_ids).map_err(|e| e.to_string())?;
        Ok(TokenOut { id, text, finish })
    }
}

/// One generation in progress: the session (KV cache / recurrent state) plus the sampler.
///
/// Call [`prefill`](Generation::prefill) once, then [`next_token`](Generation::next_token) until it
/// returns `Ok(None)`. Each call does one forward pass at most, so the UI can yield between calls.
pub struct Generation<'m> {
    session: Session<'m>,
    decoder: Decoder<'m>,
    /// Prompt tokens already through the model.
    prefilled: usize,
    /// Logits for the next position; `None` until the whole prompt is through.
    logits: Option<Vec<f32>>,
}

/// One produced token.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenOut {
    pub id: u32,
    /// The whole continuation decoded so far (decoding the full sequence keeps multi-byte
    /// characters and merged pieces intact, unlike concatenating per-token strings).
    pub text: String,
    /// Set when this was the last token of the generation.
    pub finish: Option<Finish>,
}

impl Generation<'_> {
    /// Number of prompt tokens.
    pub fn prompt_len(&self) -> usize {
        self.decoder.prompt_len()
    }

    /// Tokens generated so far.
    pub fn generated_len(&self) -> usize {
        self.decoder.generated_len()
    }

    /// Run the whole prompt through the model.
    pub fn prefill(&mut self) -> Result<(), String> {
        if self.logits.is_some() {
            return Err("prefill was already run for this generation".to_string());
        }
        while self.prefill_chunk(usize::MAX)? < self.prompt_len() {}
        Ok(())
    }

    /// Run up to `max` more prompt tokens through the model (the session continues where the last
    /// chunk ended, so chunks give the same state as one pass); returns the prompt tokens done.
    /// The page runs long prompts in chunks so that Stop and progress get their turn in between.
    pub fn prefill_chunk(&mut self, max: usize) -> Result<usize, String> {
        let ids = self.decoder.prompt_ids();
        if self.logits.is_some() || self.prefilled >= ids.len() {
            return Ok(self.prefilled);
        }
        let end = self.prefilled.saturating_add(max.max(1)).min(ids.len());
        let logits = self.session.prefill(&ids[self.prefilled..end]).map_err(|e| e.to_string())?;
        self.prefilled = end;
        if end == ids.len() {
            self.logits = Some(logits);
        }
        Ok(end)
    }

    /// Why the generation ended, once it has.
    pub fn finished(&self) -> Option<Finish> {
        self.decoder.finished()
    }

    /// Sample one token from the current logits and, unless the generation ends with it, run the
    /// decode step that produces the next logits. `Ok(None)` once the generation has finished.
    pub fn next_token(&mut self) -> Result<Option<TokenOut>, String> {
        if self.decoder.finished().is_some() {
            return Ok(None);
        }
        let Some(logits) = self.logits.as_ref() else {
            return Err("next_token called before prefill".to_string());
        };
        let out = self.decoder.accept_logits(logits)?;
        // The last token is never fed back: no decode step for it.
        if out.finish.is_none() {
            self.logits = Some(self.session.step(out.id).map_err(|e| e.to_string())?);
        }
        Ok(Some(out))
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use attnlab_core::config::SizePreset;
    use attnlab_core::tokenizer::INIT_CORPUS;
    use attnlab_core::ModelConfig;

    const VOCAB: usize = 320;

    /// The three model files of a small random alibi model with a byte-level BPE tokenizer.
    fn model_files(max_context: usize) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let size = SizePreset {
            vocab_size: VOCAB,
            d_model: 32,
            n_layers: 2,
            n_heads: 2,
            head_dim: 16,
            ffn_hidden: 64,
            train_context: max_context.min(16),
            max_context,
        };
        let cfg = ModelConfig::preset("alibi", size).expect("preset");
        let model = Model::random(cfg, 7).expect("random model");
        let dir = std::env::temp_dir().join(format!(
            "attnlab-web-engine-{}-{max_context}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        model.save_dir(&dir).expect("save model");
        let config = std::fs::read(dir.join("config.json")).expect("read config");
        let weights = std::fs::read(dir.join("model.safetensors")).expect("read weights");
        let _ = std::fs::remove_dir_all(&dir);
        let tokenizer = Tokenizer::train_byte_bpe(INIT_CORPUS, VOCAB).expect("train tokenizer");
        let tokenizer = tokenizer.to_json().expect("tokenizer json").into_bytes();
        (config, weights, tokenizer)
    }

    fn engine(max_context: usize) -> Engine {
        let (c, w, t) = model_files(max_context);
        Engine::load(&c, &w, &t).expect("load engine")
    }

    fn settings(max_tokens: usize, seed: u64) -> GenSettings {
        GenSettings { max_tokens, temperature: 1.0, top_k: 0, top_p: 1.0, seed }
    }

    /// Runs a whole generation; returns (ids, final text, finish).
    fn run(engine: &Engine, prompt: &str, s: GenSettings) -> (Vec<u32>, String, Finish, usize) {
        let mut g = engine.start(prompt, &s).expect("start");
        g.prefill().expect("prefill");
        let (mut ids, mut text) = (Vec::new(), String::new());
        while let Some(out) = g.next_token().expect("next token") {
            ids.push(out.id);
            text = out.text;
            assert_eq!(out.finish, g.finished());
        }
        (ids, text, g.finished().expect("finished"), g.prompt_len())
    }

    #[test]
    fn a_prompt_prefilled_in_chunks_generates_what_one_pass_does() {
        let e = engine(128);
        let prompt = "The history of the city and of the river that runs through it";
        let s = settings(10, 5);
        let (whole, ..) = run(&e, prompt, s);
        let mut g = e.start(prompt, &s).expect("start");
        let (n, mut done, mut chunks) = (g.prompt_len(), 0, 0);
        assert!(g.next_token().is_err(), "no token before the whole prompt is through");
        while done < n {
            let next = g.prefill_chunk(3).expect("chunk");
            assert!(next > done && next <= n, "each chunk advances by at most 3");
            assert!(next - done <= 3);
            done = next;
            chunks += 1;
        }
        assert_eq!(chunks, n.div_ceil(3));
        assert_eq!(g.prefill_chunk(3).expect("after the end"), n, "nothing more to do");
        let mut ids = Vec::new();
        while let Some(out) = g.next_token().expect("next token") {
            ids.push(out.id);
        }
        assert_eq!(ids, whole);
    }

    #[test]
    fn a_fine_tune_through_the_module_changes_what_the_engine_predicts_and_keeps_its_tokenizer() {
        let e = engine(64);
        let text = "The jury said the city had no evidence. The jury said the river ran through the city.";
        let ids = e.encode(text).expect("encode");
        let (config, weights) = e.model_files().expect("files");
        let options = r#"{"steps":8,"lr":0.005,"batch":2,"seq_len":16,"seed":0}"#;
        let mut tuner = attnlab_tune::Tuner::new(&config, &weights, &ids, options).expect("tuner");
        let before = tuner.text_loss().expect("loss");
        while !tuner.finished() {
            tuner.step().expect("step");
        }
        assert!(tuner.text_loss().expect("loss") < before);
        let tuned = e.with_weights(&tuner.weights().expect("weights")).expect("engine");
        assert_eq!(tuned.info().name, e.info().name);
        assert_eq!(tuned.encode(text).expect("encode"), ids);
        let logits = |x: &Engine| x.model.session().prefill_all(&ids).expect("prefill");
        assert_ne!(logits(&tuned), logits(&e), "the tuned weights are in use");
        assert!(e.with_weights(&weights[..64]).is_err(), "truncated weights are refused");
        // The downloaded folder of the tuned model loads as the same engine.
        let (config, weights) = tuned.model_files().expect("files");
        assert_eq!(tuned.tokenizer_json(), e.tokenizer_json());
        let reloaded = Engine::load(config.as_bytes(), &weights, tuned.tokenizer_json().as_bytes())
            .expect("the files load");
        assert_eq!(logits(&reloaded), logits(&tuned));
    }

    #[test]
    fn info_describes_the_model() {
        let e = engine(64);
        let info = e.info();
        assert_eq!(info.variants, vec!["alibi".to_string()]);
        assert_eq!((info.n_layers, info.vocab_size, info.max_context), (2, VOCAB, 64));
    }

    #[test]
    fn generation_is_seeded_and_streams_decoded_text() {
        let e = engine(64);
        let (ids, text, finish, _) = run(&e, "The history of", settings(8, 3));
        let again = run(&e, "The history of", settings(8, 3));
        assert_eq!((ids.clone(), text.clone()), (again.0, again.1), "same seed, same tokens");
        match finish {
            Finish::MaxTokens => assert_eq!(ids.len(), 8),
            Finish::EndOfText => assert!(ids.len() <= 8),
            Finish::ContextFull => panic!("context cannot be full here"),
        }
        let shown: Vec<u32> = ids.iter().copied().filter(|&id| Some(id) != e.eos).collect();
        assert_eq!(text, e.tokenizer.decode(&shown).expect("decode"));
    }

    /// A model whose vocabulary is padded beyond its tokenizer (Pythia: 50,304 logits, 50,277
    /// ids) never samples an id the tokenizer cannot write, even where those logits dominate.
    #[test]
    fn sampling_stays_within_the_tokenizer() {
        let (c, w, _) = model_files(64);
        let small = Tokenizer::train_byte_bpe(INIT_CORPUS, 280).expect("tokenizer").to_json().expect("json");
        let e = Engine::load(&c, &w, small.as_bytes()).expect("a smaller tokenizer fits");
        let padded: Vec<f32> = (0..VOCAB).map(|i| if i >= 280 { 10.0 } else { 0.0 }).collect();
        for temperature in [0.0, 1.0] {
            let mut d =
                e.decoder("The jury", &GenSettings { temperature, ..settings(50, 3) }).expect("decoder");
            for _ in 0..20 {
                let out = d.accept_logits(&padded).expect("a token the tokenizer writes");
                assert!(out.id < 280, "sampled id {} has no token", out.id);
                if out.finish.is_some() {
                    break;
                }
            }
        }
    }

    #[test]
    fn greedy_generation_matches_the_session_directly() {
        let e = engine(64);
        let s = GenSettings { temperature: 0.0, ..settings(5, 0) };
        let (ids, _, _, _) = run(&e, "Once upon a time", s);
        let prompt = e.tokenizer.encode("Once upon a time").expect("encode");
        let mut session = e.model.session();
        let mut logits = session.prefill(&prompt).expect("prefill");
        for &id in &ids {
            let argmax = logits
                .iter()
                .enumerate()
                .fold((0usize, f32::NEG_INFINITY), |best, (i, &v)| if v > best.1 { (i, v) } else { best })
                .0;
            assert_eq!(id as usize, argmax);
            logits = session.step(id).expect("step");
        }
    }

    #[test]
    fn a_decoder_fed_by_another_backend_matches_generation() {
        // The page's GPU path: prefill/step elsewhere, the decoder samples (or takes an argmax id).
        let e = engine(24);
        for temperature in [0.0, 0.9] {
            let s = GenSettings { temperature, ..settings(1000, 5) };
            let (ids, text, finish, _) = run(&e, "The jury said", s);
            let mut d = e.decoder("The jury said", &s).expect("decoder");
            assert_eq!(d.is_greedy(), temperature == 0.0);
            let mut session = e.model.session();
            let mut logits = session.prefill(d.prompt_ids()).expect("prefill");
            let mut got = Vec::new();
            let last = loop {
                let out = if d.is_greedy() {
                    let argmax = logits
                        .iter()
                        .enumerate()
                        .fold((0usize, f32::NEG_INFINITY), |b, (i, &v)| if v > b.1 { (i, v) } else { b })
                        .0;
                    d.accept_token(argmax as u32).expect("accept token")
                } else {
                    d.accept_logits(&logits).expect("accept logits")
                };
                got.push(out.id);
                if out.finish.is_some() {
                    break out;
                }
                logits = session.step(out.id).expect("step");
            };
            assert_eq!((got, last.text, last.finish), (ids, text, Some(finish)));
            assert!(d.accept_logits(&logits).is_err(), "nothing after the end");
        }
    }

    #[test]
    fn stops_when_the_context_is_full() {
        let e = engine(24);
        let (ids, _, finish, prompt_len) = run(&e, "The jury said", settings(1000, 1));
        if finish == Finish::ContextFull {
            assert_eq!(ids.len(), 24 - prompt_len + 1, "every position up to max_context is used");
        } else {
            assert_eq!(finish, Finish::EndOfText);
        }
    }

    #[test]
    fn bad_requests_are_errors() {
        let e = engine(24);
        let empty = e.start("", &settings(4, 0)).err().expect("empty prompt must fail");
        assert!(empty.contains("empty prompt"), "{empty}");
        let long = "word ".repeat(200);
        let too_long = e.start(&long, &settings(4, 0)).err().expect("long prompt must fail");
        assert!(too_long.contains("max_context"), "{too_long}");
        assert!(e.start("hi", &settings(0, 0)).is_err());
        let bad_p = GenSettings { top_p: 0.0, ..settings(4, 0) };
        assert!(e.start("hi", &bad_p).is_err());
        let mut g = e.start("hi", &settings(4, 0)).expect("start");
        assert!(g.next_token().is_err(), "next_token before prefill");
        g.prefill().expect("prefill");
        assert!(g.prefill().is_err(), "second prefill");
    }

    #[test]
    fn corrupt_or_mismatched_files_are_errors_not_panics() {
        let (c, w, t) = model_files(32);
        let err = |r: Result<Engine, String>| r.err().expect("must fail");
        assert!(err(Engine::load(b"\xff\xfe", &w, &t)).contains("config.json"));
        assert!(!err(Engine::load(b"{ not json", &w, &t)).is_empty());
        assert!(!err(Engine::load(&c, &w[..w.len() / 2], &t)).is_empty());
        assert!(!err(Engine::load(&c, &w, b"{}")).is_empty());
        assert!(!err(Engine::load(&c, &w, &t[..t.len() / 2])).is_empty());
        // A tokenizer with more ids than the model's vocabulary.
        let big = Tokenizer::train_byte_bpe(INIT_CORPUS, VOCAB + 200).expect("train");
        let big = big.to_json().expect("json").into_bytes();
        assert!(err(Engine::load(&c, &w, &big)).contains("tokenizer"));
    }
}
