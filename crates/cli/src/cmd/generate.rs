//! `attnlab generate`: prefill the prompt, then sample token by token through the decode path.

use crate::common::{f32_json, load_tokenizer, out, print_json, CliError, CliResult, ModelArgs};
use crate::gpu::Engine;
use attnlab_core::sampling::{Sampler, SamplingConfig};
use attnlab_core::tokenizer::EOS_TOKEN;
use clap::Args;
use serde_json::json;
use std::time::{Duration, Instant};

/// Generate text: prefill the prompt, then decode one token at a time, streaming the text to stdout.
///
/// Prefill and decode throughput are printed on stderr (or included in the --json output). Generation
/// stops after --max-tokens tokens, or earlier at the end-of-text token unless --ignore-eos.
#[derive(Debug, Clone, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt text (must not be empty)
    #[arg(long)]
    pub prompt: String,
    /// Number of tokens to generate; prompt tokens + this must fit the model's max_context
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: u32,
    /// Sampling seed (same seed, same text)
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Softmax temperature; 0 = greedy (argmax)
    #[arg(long, value_name = "T", default_value_t = 1.0, allow_negative_numbers = true)]
    pub temperature: f32,
    /// Keep only the K most likely tokens (0 = off)
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches P (1 = off)
    #[arg(long, value_name = "P", default_value_t = 1.0, allow_negative_numbers = true)]
    pub top_p: f32,
    /// Do not stop at the end-of-text token
    #[arg(long)]
    pub ignore_eos: bool,
}

fn tokens_per_s(n: usize, d: Duration) -> Option<f64> {
    let s = d.as_secs_f64();
    (n > 0 && s > 0.0).then(|| n as f64 / s)
}

/// Streams decoded text: holds back a trailing U+FFFD (a multi-byte character still incomplete).
struct Stream {
    printed: String,
    enabled: bool,
}

impl Stream {
    fn update(&mut self, full: &str) -> CliResult<()> {
        let stable = full.trim_end_matches('\u{FFFD}');
        if stable.len() > self.printed.len() && stable.starts_with(self.printed.as_str()) {
            if self.enabled {
                out(&stable[self.printed.len()..])?;
            }
            self.printed = stable.to_string();
        }
        Ok(())
    }

    fn finish(&mut self, full: &str) -> CliResult<()> {
        if self.enabled {
            let rest = full.strip_prefix(self.printed.as_str()).unwrap_or("");
            out(&format!("{rest}\n"))?;
        }
        self.printed = full.to_string();
        Ok(())
    }
}

pub fn run(a: GenerateArgs, json: bool) -> CliResult<()> {
    if a.prompt.is_empty() {
        return Err(CliError::usage("empty prompt: give --prompt some text"));
    }
    let sampling =
        SamplingConfig { temperature: a.temperature, top_k: a.top_k, top_p: a.top_p, seed: a.seed };
    let model = a.model.load_any_backend()?;
    let tok = load_tokenizer(&a.model.dir(), &model)?;
    // Only ids the tokenizer can write (a model's vocabulary may be padded beyond it).
    let mut sampler = Sampler::new(sampling)?.limit_vocab(tok.vocab_size());
    let prompt_ids = tok.encode(&a.prompt).map_err(|e| CliError::runtime(e.to_string()))?;
    check_length(prompt_ids.len(), a.max_tokens as usize, model.config().max_context)?;
    let eos = if a.ignore_eos { None } else { tok.token_to_id(EOS_TOKEN) };
    let mut engine = Engine::new(&model, a.model.backend.backend)?;
    let mut stream = Stream { printed: String::new(), enabled: !json };
    let decode = |ids: &[u32]| tok.decode(ids).map_err(|e| CliError::runtime(e.to_string()));
    let gen = generate(&mut engine, &prompt_ids, a.max_tokens as usize, eos, &mut sampler, |generated| {
        if json {
            Ok(())
        } else {
            stream.update(&decode(generated)?)
        }
    })?;
    let text = decode(&gen.tokens)?;
    stream.finish(&text)?;
    if json {
        return print_json(&gen.json(&a, &prompt_ids, &text));
    }
    eprintln!("{}", gen.summary(prompt_ids.len()));
    Ok(())
}

/// The prompt must encode to tokens, and with `max_tokens` more fit the model's context.
fn check_length(prompt: usize, max_tokens: usize, max_context: usize) -> CliResult<()> {
    if prompt == 0 {
        return Err(CliError::usage("empty prompt: the prompt encodes to no tokens"));
    }
    if prompt + max_tokens > max_context {
        return Err(CliError::usage(format!(
            "the prompt ({prompt} tokens) plus --max-tokens {max_tokens} is {} tokens, more than the model's max_context \
             {max_context}; shorten the prompt or lower --max-tokens",
            prompt + max_tokens
        )));
    }
    Ok(())
}

/// What one generation wrote, why it stopped and how long its two phases took.
struct Generation {
    tokens: Vec<u32>,
    /// "max-tokens" or "eos".
    stop: &'static str,
    prefill_time: Duration,
    decode_time: Duration,
    decode_steps: usize,
}

/// Prefill `prompt`, then write up to `max_tokens` tokens (stopping before `eos`), calling
/// `on_token` with the tokens so far after each one.
fn generate(
    engine: &mut Engine,
    prompt: &[u32],
    max_tokens: usize,
    eos: Option<u32>,
    sampler: &mut Sampler,
    mut on_token: impl FnMut(&[u32]) -> CliResult<()>,
) -> CliResult<Generation> {
    let mut session = engine.session()?;
    let t0 = Instant::now();
    let logits = session.prefill(prompt)?;
    let prefill_time = t0.elapsed();
    // The first token comes from the prompt's logits; every later one from a decode step that also
    // samples (on the GPU inside the step's submission: only the token id is read back).
    let mut next = sampler.sample(&logits)?;
    let mut gen = Generation {
        tokens: Vec::with_capacity(max_tokens),
        stop: "max-tokens",
        prefill_time,
        decode_time: Duration::ZERO,
        decode_steps: 0,
    };
    for i in 0..max_tokens {
        let id = next;
        if Some(id) == eos {
            gen.stop = "eos";
            break;
        }
        gen.tokens.push(id);
        on_token(&gen.tokens)?;
        if i + 1 < max_tokens {
            let t = Instant::now();
            next = session.step_sample(id, sampler)?;
            gen.decode_time += t.elapsed();
            gen.decode_steps += 1;
        }
    }
    Ok(gen)
}

impl Generation {
    /// `--json`'s object.
    fn json(&self, a: &GenerateArgs, prompt_ids: &[u32], text: &str) -> serde_json::Value {
        json!({
            "prompt": a.prompt,
            "prompt_tokens": prompt_ids,
            "text": text,
            "tokens": self.tokens,
            "stop": self.stop,
            "sampling": {
                "temperature": f32_json(a.temperature),
                "top_k": a.top_k,
                "top_p": f32_json(a.top_p),
                "seed": a.seed,
            },
            "backend": a.model.backend.name(),
            "timings": {
                "prefill_tokens": prompt_ids.len(),
                "prefill_s": self.prefill_time.as_secs_f64(),
                "prefill_tokens_per_s": tokens_per_s(prompt_ids.len(), self.prefill_time),
                "decode_tokens": self.decode_steps,
                "decode_s": self.decode_time.as_secs_f64(),
                "decode_tokens_per_s": tokens_per_s(self.decode_steps, self.decode_time),
            },
        })
    }

    /// The timing line printed on stderr after the text.
    fn summary(&self, prompt_tokens: usize) -> String {
        let fmt = |v: Option<f64>| v.map_or("n/a".to_string(), |v| format!("{v:.1} tok/s"));
        format!(
            "prefill: {prompt_tokens} tokens in {:.1} ms ({}); decode: {} steps in {:.1} ms ({}); {} tokens generated{}",
            self.prefill_time.as_secs_f64() * 1e3,
            fmt(tokens_per_s(prompt_tokens, self.prefill_time)),
            self.decode_steps,
            self.decode_time.as_secs_f64() * 1e3,
            fmt(tokens_per_s(self.decode_steps, self.decode_time)),
            self.tokens.len(),
            if self.stop == "eos" { ", stopped at end-of-text" } else { "" },
        )
    }
}
