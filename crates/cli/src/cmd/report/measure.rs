//! What `attnlab report` measures per model: perplexity and losses at every length, traced LAA and
//! gate statistics, samples for the English check, the slope edit, and the training history.

use super::{stats, GateSummary, LengthScore, ModelResult, ReportArgs, SlopeResult, Training};
use crate::common::{load_tokenizer, CliError, CliResult};
use attnlab_core::analysis::{self, PplPoint};
use attnlab_core::catalog::ModelEntry;
use attnlab_core::config::{Family, ModelConfig};
use attnlab_core::steer::{self, BiasOverride};
use attnlab_core::{Model, Sampler, SamplingConfig, Tokenizer};
use attnlab_train::trainer::History;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Tokens of each sample of the English check.
pub(super) const SAMPLE_TOKENS: usize = 48;
/// Sampling temperature of the English check.
pub(super) const TEMPERATURE: f32 = 0.8;
/// Prompts of the English check's samples, in turn.
pub(super) const PROMPTS: [&str; 6] =
    ["The jury said", "In the morning", "He was", "The city of", "She looked at", "It is"];
/// Bins of the gate histograms on [0, 1].
pub(super) const GATE_BINS: usize = 20;
/// MEP Table 4 uniform slopes (h = 2, 6, 9 → 2^-h) next to the default geometric set.
pub(super) const SLOPE_PRESETS: [(&str, Option<f64>); 4] = [
    ("default", None),
    ("h=2 (2^-2)", Some(0.25)),
    ("h=6 (2^-6)", Some(1.0 / 64.0)),
    ("h=9 (2^-9)", Some(1.0 / 512.0)),
];

/// Lower-case alphabetic words of a text (apostrophes inside words kept: "don't").
pub(super) fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphabetic() || c == '\''))
        .map(|w| w.trim_matches('\'').to_lowercase())
        .filter(|w| !w.is_empty())
        .collect()
}

/// The evaluation tokens: the first --tokens of the text, or (0) the whole text cut to a multiple
/// of the longest length, so that every length scores the same tokens.
fn eval_tokens(a: &ReportArgs, text: &str, tok: &Tokenizer) -> CliResult<Vec<u32>> {
    let ids = tok.encode(text).map_err(|e| CliError::runtime(e.to_string()))?;
    let max = *a.lengths.iter().max().unwrap_or(&128);
    let n = if a.tokens == 0 { ids.len() / max * max } else { a.tokens.max(max) };
    if ids.len() < n || n == 0 {
        return Err(CliError::usage(format!(
            "the text has {} tokens, fewer than --tokens {} (or the longest length {max})",
            ids.len(),
            a.tokens
        )));
    }
    Ok(ids[..n].to_vec())
}

/// Perplexity at every length with each window's mean loss and the loss per position.
fn score(
    a: &ReportArgs,
    m: &Model,
    tokens: &[u32],
    tick: &dyn Fn(),
) -> CliResult<(Vec<PplPoint>, Vec<LengthScore>)> {
    let cfg = m.config();
    let (mut points, mut scores) = (Vec::new(), Vec::new());
    for &len in &a.lengths {
        let losses = analysis::window_losses(
            cfg.vocab_size,
            cfg.max_context,
            tokens,
            len,
            0,
            &mut || tick(),
            &mut |w: &[u32]| m.session().prefill_all(w),
        )?;
        let window_nll: Vec<f64> = losses.iter().map(|w| w.iter().sum::<f64>() / w.len() as f64).collect();
        let mut sums = vec![0.0f64; len - 1];
        for w in &losses {
            sums.iter_mut().zip(w).for_each(|(s, l)| *s += l);
        }
        let nll = window_nll.iter().sum::<f64>() / window_nll.len() as f64;
        let count = losses.len() * (len - 1);
        points.push(PplPoint { length: len, windows: losses.len(), tokens: count, nll, ppl: nll.exp() });
        scores.push(LengthScore {
            length: len,
            position_nll: stats::octave_bins(&sums, losses.len()),
            window_nll,
        });
    }
    Ok((points, scores))
}

/// A model folder of the index, loaded and ready to measure.
pub(super) struct Loaded {
    pub entry: ModelEntry,
    /// Its folder (under --models, or under --seeds for an extra seed).
    pub dir: PathBuf,
    /// From its history.json (None for an initial checkpoint).
    pub training: Option<Training>,
    pub model: Model,
    pub tok: Tokenizer,
    /// The evaluation text in this model's tokens.
    pub tokens: Vec<u32>,
}

impl Loaded {
    /// The model `entry` of the index in folder `models`.
    pub(super) fn load(a: &ReportArgs, models: &Path, entry: &ModelEntry, text: &str) -> CliResult<Self> {
        let dir = models.join(&entry.name);
        let model = crate::common::load_model_dir(&dir)?;
        let tok = load_tokenizer(&dir, &model)?;
        let tokens = eval_tokens(a, text, &tok)?;
        let training = read_history(&dir.join("history.json"));
        Ok(Self { entry: entry.clone(), dir, training, model, tok, tokens })
    }

    /// Whether every layer is linear attention (its long lengths are cheap).
    pub(super) fn is_linear(&self) -> bool {
        self.model.config().layers.iter().all(|l| l.family() == Family::Linear)
    }
}

/// Everything the report shows of one model: perplexity and losses at every length, LAA and gate
/// statistics of one traced pass, and the English check.
pub(super) fn measure_model(
    a: &ReportArgs,
    english: &HashSet<String>,
    l: &Loaded,
    tick: &dyn Fn(),
) -> CliResult<ModelResult> {
    let t = Instant::now();
    let (m, tokens) = (&l.model, &l.tokens);
    let (ppl, scores) = score(a, m, tokens, tick)?;
    let trace = analysis::trace_for_analysis(m, tokens, a.trace_tokens)?;
    let summaries = analysis::summarize_attention(m, &trace.attention);
    let at_train = analysis::trace_for_analysis(m, tokens, m.config().train_context)?;
    let laa_auc_train =
        analysis::summarize_attention(m, &at_train.attention).iter().map(|l| l.laa.auc).collect();
    let (gates, gates_all) = gate_summaries(&analysis::gate_stats(&trace.gates, GATE_BINS));
    let (english_share, words, sample) = english_check(a, english, m, &l.tok)?;
    Ok(ModelResult {
        name: l.entry.name.clone(),
        family: l.entry.family.clone(),
        variants: crate::common::variants_summary(m),
        params: m.weights().num_params(),
        train_context: m.config().train_context,
        dtype: stored_as(m),
        initial_of: l.entry.initial_of.clone(),
        ppl,
        scores,
        laa_auc: summaries.iter().map(|l| l.laa.auc).collect(),
        laa_auc_train,
        laa_curves: summaries.iter().map(|l| l.laa.curve.clone()).collect(),
        gates,
        gates_all,
        notes: config_notes(m.config()),
        english_share,
        words,
        sample,
        training: l.training.clone(),
        seconds: t.elapsed().as_secs_f64(),
        extra_seed: false,
    })
}

/// The forget-gate statistics (quantity F, all heads) of each layer, and of all layers pooled
/// (weighted by their counts; None when the model has no gates).
fn gate_summaries(stats: &[analysis::GateStats]) -> (Vec<GateSummary>, Option<GateSummary>) {
    let density = |h: &[u64]| {
        let total: u64 = h.iter().sum();
        h.iter().map(|c| *c as f64 / total.max(1) as f64 * h.len() as f64).collect::<Vec<f64>>()
    };
    let per_layer: Vec<&analysis::GateStats> =
        stats.iter().filter(|g| g.head.is_none() && g.quantity == "f").collect();
    let gates = per_layer
        .iter()
        .map(|g| GateSummary {
            layer: g.layer,
            saturation: g.saturation,
            mean: g.mean,
            density: density(&g.histogram),
        })
        .collect();
    let pooled = (!per_layer.is_empty()).then(|| {
        let count: u64 = per_layer.iter().map(|g| g.count).sum();
        let mut hist = vec![0u64; GATE_BINS];
        for g in &per_layer {
            hist.iter_mut().zip(&g.histogram).for_each(|(a, b)| *a += b);
        }
        let w = |f: &dyn Fn(&analysis::GateStats) -> f64| {
            per_layer.iter().map(|g| f(g) * g.count as f64).sum::<f64>() / count.max(1) as f64
        };
        GateSummary {
            layer: usize::MAX,
            saturation: w(&|g| g.saturation),
            mean: w(&|g| g.mean),
            density: density(&hist),
        }
    });
    (gates, pooled)
}

/// The English check: sampled continuations of fixed prompts; (share of their words found in
/// `english`, words, the first sample with its prompt).
fn english_check(
    a: &ReportArgs,
    english: &HashSet<String>,
    m: &Model,
    tok: &Tokenizer,
) -> CliResult<(f64, usize, String)> {
    let (mut total, mut known) = (0usize, 0usize);
    let mut first = String::new();
    for s in 0..a.samples {
        let prompt = PROMPTS[s % PROMPTS.len()];
        let out = sample_text(m, tok, prompt, s as u64)?;
        let w = words(&out);
        total += w.len();
        known += w.iter().filter(|w| english.contains(*w)).count();
        if s == 0 {
            first = format!("{prompt}{out}");
        }
    }
    Ok((known as f64 / total.max(1) as f64, total, first))
}

/// How a model's weights are stored: the storage dtype holding most of its bytes ("f16", "f32", …).
fn stored_as(m: &Model) -> String {
    m.weights()
        .bytes_by_dtype()
        .into_iter()
        .max_by_key(|&(_, b)| b)
        .map_or("–".into(), |(d, _)| d.name().into())
}

/// The encodings that trained badly before issue 14's fixes, read off a model's config: what a
/// model shipped before them still carries.
fn config_notes(cfg: &ModelConfig) -> Vec<String> {
    use attnlab_core::config::{AbsolutePosition, AttentionSpec};
    use attnlab_core::variants::lrpe::LrpeNormalize;
    let mut notes = Vec::new();
    if cfg.absolute_position == AbsolutePosition::Sinusoidal && !cfg.scale_embeddings {
        notes.push(
            "sinusoidal positions added to token embeddings not scaled by √d_model (Vaswani §3.4): position \
                    dominates the input; the sinusoidal preset now sets `scale_embeddings`"
                .to_string(),
        );
    }
    if let Some(t) = cfg.layers.iter().find_map(|l| if let AttentionSpec::T5(t) = l { Some(t) } else { None })
    {
        if t.max_distance > cfg.train_context / 4 && t.max_distance > t.num_buckets / 2 + 1 {
            notes.push(format!(
                "T5 max_distance {} of training length {} (T5 and MEP's NeoX baseline use a quarter of it; the preset now does)",
                t.max_distance, cfg.train_context
            ));
        }
    }
    if cfg.layers.iter().any(|l| matches!(l, AttentionSpec::Lrpe(s) if s.normalize == LrpeNormalize::Rmsnorm))
    {
        notes.push("LRPE output normalised by RMSNorm, not the paper's denominator (App. C.2 Eq. 38; the preset now \
                    uses it)"
            .to_string());
    }
    notes
}

/// One seeded sample of [`SAMPLE_TOKENS`] tokens at temperature 0.8 (stops at end-of-text).
fn sample_text(m: &Model, tok: &Tokenizer, prompt: &str, seed: u64) -> CliResult<String> {
    let mut sampler = Sampler::new(SamplingConfig { temperature: TEMPERATURE, top_k: 0, top_p: 1.0, seed })?;
    let ids = tok.encode(prompt).map_err(|e| CliError::runtime(e.to_string()))?;
    let eos = tok.token_to_id(attnlab_core::tokenizer::EOS_TOKEN);
    let mut session = m.session();
    let mut logits = session.prefill(&ids)?;
    let mut out = Vec::new();
    for _ in 0..SAMPLE_TOKENS {
        let id = sampler.sample(&logits)?;
        if Some(id) == eos {
            break;
        }
        out.push(id);
        logits = session.step(id)?;
    }
    tok.decode(&out).map_err(|e| CliError::runtime(e.to_string()))
}

pub(super) fn slope_ablation(
    a: &ReportArgs,
    tokens: &[u32],
    m: &Model,
    (name, uniform): (&str, Option<f64>),
    tick: &dyn Fn(),
) -> CliResult<SlopeResult> {
    let mut m = m.clone();
    steer::apply_override(&mut m, &BiasOverride { uniform_slope: uniform, ..Default::default() })?;
    Ok(SlopeResult { preset: name.to_string(), ppl: score(a, &m, tokens, tick)?.0 })
}

/// Training summary from a history.json written by `attnlab train` (None when absent or unreadable:
/// initial checkpoints have none).
fn read_history(path: &Path) -> Option<Training> {
    let h: History = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let steps = h.options.steps;
    let per_step = h.tokens as f64 / steps.max(1) as f64;
    let curve: Vec<(f64, f64)> =
        h.valid.iter().map(|v| (v.step as f64 * per_step, f64::from(v.loss))).collect();
    Some(Training {
        device: h.options.device,
        steps,
        budget: h.options.budget(),
        tokens: h.tokens as u64,
        seconds: h.seconds,
        tokens_per_s: h.tokens as f64 / h.seconds.max(1e-9),
        // From the schedule, not the log (which may keep every k-th step only).
        lr_sum: (0..steps)
            .map(|s| {
                attnlab_train::optim::lr_at(s, steps, h.options.warmup, h.options.lr, h.options.min_lr_ratio)
            })
            .sum(),
        final_val_loss: curve.last().map(|c| c.1),
        curve,
    })
}
