//! `attnlab report`: measure every shipped model and write docs/results.md with its plots.
//!
//! Everything in the report is computed here from the model folders listed in www/models/index.json
//! (and their history.json): nothing is typed in by hand except the papers' claims, and each claim's
//! verdict is decided by a rule on the measured numbers, printed beside it.

use crate::common::{
    load_tokenizer, num, progress_bar, read_model_index, read_text, to_value, write_file, CliError, CliResult,
};
use crate::svg::{histogram_grid, HistPanel, LineChart, Scale, Series};
use attnlab_core::analysis::{self, PplPoint};
use attnlab_core::catalog::ModelIndex;
use attnlab_core::config::{Family, ModelConfig};
use attnlab_core::steer::{self, BiasOverride};
use attnlab_core::{Model, Sampler, SamplingConfig, Tokenizer};
use attnlab_train::trainer::{History, TrainDevice};
use clap::Args;
use serde::Serialize;
use serde_json::json;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

mod claims;
mod sections;
mod setup;
mod stats;

/// Regenerate docs/results.md (tables + SVG plots + results.json) from the shipped models.
///
/// Perplexity follows `attnlab eval`'s protocol on the same tokens of --text at every length (the
/// whole text by default). Differences between models come with paired bootstrap intervals over
/// evaluation blocks (and over seeds: models named `NAME-seedK` are seeds of `NAME`), and every claim
/// gets one of four verdicts: holds, does not hold, inconclusive, not tested. The slope edit of the
/// alibi model is an inference-time observation (MEP's Table 4 retrains: models `alibi-h0`,
/// `alibi-h4`, `alibi-h7` when present). LAA and gate statistics come from one traced forward pass
/// over --trace-tokens tokens. "Real English words" is the share of generated words found in --words
/// (the Brown training text).
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Folder with index.json and the model folders
    #[arg(long, value_name = "DIR", default_value = "www/models")]
    pub models: PathBuf,
    /// Text to evaluate [default: www/eval/heldout.txt]
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,
    /// Markdown file to write (plots and results.json go to a folder of the same stem beside it)
    #[arg(long, value_name = "FILE", default_value = "docs/results.md")]
    pub out: PathBuf,
    /// Context lengths (multiples of the training length 128)
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "128,256,512,1024,2048,4096")]
    pub lengths: Vec<usize>,
    /// Tokens of the text scored at every length (the first N; each length cuts them into windows);
    /// 0 = the whole text, cut to a multiple of the longest length
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub tokens: usize,
    /// Tokens of the traced pass for LAA and gate statistics
    #[arg(long, value_name = "N", default_value_t = 512)]
    pub trace_tokens: usize,
    /// Word list for the "real English words" check [default: data/brown/train.txt, else --text]
    #[arg(long, value_name = "FILE")]
    pub words: Option<PathBuf>,
    /// Samples per model for the English check (48 tokens each, temperature 0.8, seeds 0..N)
    #[arg(long, value_name = "N", default_value_t = 12)]
    pub samples: usize,
    /// Tokens per evaluation block of the bootstrap intervals (consecutive windows are grouped
    /// until a block has this many; a longer window is a block of its own)
    #[arg(long, value_name = "N", default_value_t = stats::BLOCK_TOKENS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub block_tokens: usize,
    /// Folder of `attnlab bench --out DIR/NAME.json` files (TransNormer Table 7: speed and memory
    /// against length) [default: docs/results/bench when it exists]
    #[arg(long, value_name = "DIR")]
    pub bench: Option<PathBuf>,
    /// Worker threads (one model job per thread)
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub threads: usize,
}

const SAMPLE_TOKENS: usize = 48;
const TEMPERATURE: f32 = 0.8;
const PROMPTS: [&str; 6] =
    ["The jury said", "In the morning", "He was", "The city of", "She looked at", "It is"];
const GATE_BINS: usize = 20;
/// MEP Table 4 uniform slopes (h = 2, 6, 9 → 2^-h) next to the default geometric set.
const SLOPE_PRESETS: [(&str, Option<f64>); 4] = [
    ("default", None),
    ("h=2 (2^-2)", Some(0.25)),
    ("h=6 (2^-6)", Some(1.0 / 64.0)),
    ("h=9 (2^-9)", Some(1.0 / 512.0)),
];

#[derive(Debug, Clone, Serialize)]
struct GateSummary {
    layer: usize,
    saturation: f64,
    mean: f64,
    /// Density on [0, 1] (integrates to 1).
    density: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
struct Training {
    /// Where the steps ran (candle on the CPU, or the WGSL trainer on a GPU).
    device: TrainDevice,
    steps: usize,
    /// The schedule's token budget: steps × batch × sequence length (what runs are compared on; a
    /// run stopped early or resumed after a repeated segment saw a different `tokens`).
    budget: u64,
    tokens: u64,
    seconds: f64,
    tokens_per_s: f64,
    /// Σ of the learning rate over the training steps (how far Adam can move one weight).
    lr_sum: f64,
    final_val_loss: Option<f64>,
    /// (tokens seen, validation loss).
    curve: Vec<(f64, f64)>,
}

/// One model's scores at one context length.
#[derive(Debug, Clone, Serialize)]
struct LengthScore {
    length: usize,
    /// Mean loss of each window (nats/token), in text order: the bootstrap's raw material (not in
    /// results.json, which the page loads: ~20× its size).
    #[serde(skip)]
    window_nll: Vec<f64>,
    /// Mean loss over the windows' positions, in bins doubling from position 1: (first, last, nll).
    position_nll: Vec<(usize, usize, f64)>,
}

#[derive(Debug, Clone, Serialize)]
struct ModelResult {
    name: String,
    family: String,
    variants: String,
    params: usize,
    /// The length the model was trained at (its config's train_context).
    train_context: usize,
    /// How its weights are stored: the widest storage dtype by bytes ("f16", "f32", …).
    dtype: String,
    initial_of: Option<String>,
    ppl: Vec<PplPoint>,
    scores: Vec<LengthScore>,
    /// LAA area per layer on the first --trace-tokens tokens.
    laa_auc: Vec<f64>,
    /// LAA area per layer on the first `train_context` tokens: the locality learned where the
    /// model was trained.
    laa_auc_train: Vec<f64>,
    laa_curves: Vec<Vec<f64>>,
    gates: Vec<GateSummary>,
    /// All layers' F pooled: saturation share and density.
    gates_all: Option<GateSummary>,
    /// Where the model's config departs from what the code now builds for its variant.
    notes: Vec<String>,
    english_share: f64,
    words: usize,
    sample: String,
    training: Option<Training>,
    seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
struct SlopeResult {
    preset: String,
    ppl: Vec<PplPoint>,
}

/// A unit of work for the thread pool.
enum Job {
    Model(usize),
    Slope(usize),
}

pub fn run(a: ReportArgs, json: bool) -> CliResult<()> {
    let index = read_model_index(&a.models)?.ok_or_else(|| {
        CliError::usage(format!("`{}` has no index.json listing the models to report", a.models.display()))
    })?;
    if a.lengths.is_empty() || a.lengths.iter().any(|&l| l < 2) {
        return Err(CliError::usage("--lengths needs values >= 2"));
    }
    let (text_path, text) = read_text(a.text.as_deref())?;
    let words_path = a.words.clone().unwrap_or_else(|| {
        let p = PathBuf::from("data/brown/train.txt");
        if p.is_file() {
            p
        } else {
            text_path.clone()
        }
    });
    let vocab_text = std::fs::read_to_string(&words_path).map_err(|e| {
        CliError::runtime(format!("cannot read the word list `{}`: {e}", words_path.display()))
    })?;
    let english: HashSet<String> = words(&vocab_text).into_iter().collect();

    // Load every model first: a broken folder fails before hours of work.
    let mut models = Vec::new();
    for e in &index.models {
        let dir = a.models.join(&e.name);
        let m = crate::common::load_model_dir(&dir)?;
        let tok = load_tokenizer(&dir, &m)?;
        let tokens = eval_tokens(&a, &text, &tok)?;
        let training = read_history(&dir.join("history.json"));
        models.push((e.clone(), training, m, tok, tokens));
    }
    let setups: Vec<(String, setup::Setup)> = models
        .iter()
        .map(|(e, training, m, ..)| {
            (e.name.clone(), (m.config().train_context, training.as_ref().map(|t| t.budget)))
        })
        .collect();
    setup::check_seeds_alike(&setups).map_err(CliError::runtime)?;
    let mut jobs: Vec<Job> = (0..models.len()).map(Job::Model).collect();
    let alibi = models.iter().position(|(e, ..)| e.name == "alibi");
    if alibi.is_some() {
        jobs.extend((0..SLOPE_PRESETS.len()).map(Job::Slope));
    }
    // Longest jobs first (softmax models at long lengths) so the threads finish together.
    jobs.sort_by_key(|j| match j {
        Job::Model(i) => {
            usize::from(models[*i].2.config().layers.iter().all(|l| l.family() == Family::Linear))
        }
        Job::Slope(_) => 0,
    });

    let windows = |n: usize| a.lengths.iter().map(|&l| n / l).sum::<usize>();
    let total_windows: usize = jobs
        .iter()
        .map(|j| match j {
            Job::Model(i) => windows(models[*i].4.len()),
            Job::Slope(_) => alibi.map_or(0, |i| windows(models[i].4.len())),
        })
        .sum();
    let pb = progress_bar(total_windows as u64, "report", json);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<ModelResult>>> = Mutex::new(vec![None; models.len()]);
    let slopes: Mutex<Vec<Option<SlopeResult>>> = Mutex::new(vec![None; SLOPE_PRESETS.len()]);
    let failure: Mutex<Option<CliError>> = Mutex::new(None);
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..a.threads.max(1) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::SeqCst);
                let Some(job) = jobs.get(k) else { break };
                if failure.lock().map(|f| f.is_some()).unwrap_or(true) {
                    break;
                }
                let tick = || pb.inc(1);
                let outcome = match job {
                    Job::Model(i) => {
                        let (e, training, m, tok, tokens) = &models[*i];
                        measure_model(&a, tokens, &english, e, training.clone(), m, tok, &tick).map(|r| {
                            if let Ok(mut v) = results.lock() {
                                v[*i] = Some(r);
                            }
                        })
                    }
                    Job::Slope(p) => {
                        let (_, _, m, _, tokens) = &models[alibi.unwrap_or(0)];
                        slope_ablation(&a, tokens, m, SLOPE_PRESETS[*p], &tick).map(|r| {
                            if let Ok(mut v) = slopes.lock() {
                                v[*p] = Some(r);
                            }
                        })
                    }
                };
                if let Err(e) = outcome {
                    if let Ok(mut f) = failure.lock() {
                        f.get_or_insert(e);
                    }
                }
            });
        }
    });
    pb.finish_and_clear();
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    let results: Vec<ModelResult> = results.into_inner().unwrap_or_default().into_iter().flatten().collect();
    let slopes: Vec<SlopeResult> = slopes.into_inner().unwrap_or_default().into_iter().flatten().collect();
    if results.len() != models.len() {
        return Err(CliError::runtime("a model job did not finish"));
    }

    let default_cfg =
        models.iter().find(|(e, ..)| e.name == index.default).map(|(_, _, m, ..)| m.config().clone());
    let inputs = Inputs { text_path: &text_path, words_path: &words_path, started: t0 };
    write_report(&a, &index, &results, &slopes, default_cfg, &inputs, json)
}

/// Where the texts came from, and when the run started.
struct Inputs<'a> {
    text_path: &'a Path,
    words_path: &'a Path,
    started: Instant,
}

/// Render the markdown and plots, write them with results.json, and print the summary.
fn write_report(
    a: &ReportArgs,
    index: &ModelIndex,
    results: &[ModelResult],
    slopes: &[SlopeResult],
    default_cfg: Option<ModelConfig>,
    inputs: &Inputs,
    json: bool,
) -> CliResult<()> {
    let (text_path, words_path, t0) = (inputs.text_path, inputs.words_path, inputs.started);
    let (train_len, size) = default_cfg.map_or((128, String::new()), |c| {
        (
            c.train_context,
            format!(
                "vocab {}, d_model {}, {} layers × {} heads of {}, SwiGLU {}",
                c.vocab_size, c.d_model, c.n_layers, c.n_heads, c.head_dim, c.ffn.hidden
            ),
        )
    });
    let plots_dir = a.out.with_extension("");
    let bench_dir = a.bench.clone().or_else(|| Some(plots_dir.join("bench")).filter(|d| d.is_dir()));
    let bench = (bench_dir.as_deref().map(read_bench).transpose()?.unwrap_or_default(), bench_dir);
    let plots_rel = plots_dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let ctx = Context {
        index,
        results,
        slopes,
        lengths: &a.lengths,
        text_path,
        words_path,
        args: a,
        plots: &plots_rel,
        seconds: t0.elapsed().as_secs_f64(),
        train_len,
        size,
        bench,
    };
    let (markdown, plots) = ctx.render();
    for (name, svg) in &plots {
        write_file(&plots_dir.join(name), svg.as_bytes())?;
    }
    let raw = json!({
        "text": text_path.display().to_string(),
        "tokens_per_length": results.first().map(|r| r.ppl.first().map_or(0, |p| p.tokens + p.windows)),
        "lengths": a.lengths,
        "models": to_value(&results)?,
        "slope_ablation": to_value(&slopes)?,
    });
    let raw_text = serde_json::to_string_pretty(&raw).map_err(|e| CliError::runtime(e.to_string()))?;
    write_file(&plots_dir.join("results.json"), raw_text.as_bytes())?;
    write_file(&a.out, markdown.as_bytes())?;
    let summary = format!(
        "wrote {} ({} models, {} plots, results.json) in {:.0} s",
        a.out.display(),
        results.len(),
        plots.len(),
        t0.elapsed().as_secs_f64()
    );
    if json {
        return crate::common::print_json(
            &json!({"out": a.out.display().to_string(), "plots": plots.len(), "models": results.len()}),
        );
    }
    crate::common::out(&(summary + "\n"))
}

/// Lower-case alphabetic words of a text (apostrophes inside words kept: "don't").
fn words(text: &str) -> Vec<String> {
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

#[allow(clippy::too_many_arguments)]
fn measure_model(
    a: &ReportArgs,
    tokens: &[u32],
    english: &HashSet<String>,
    e: &attnlab_core::catalog::ModelEntry,
    training: Option<Training>,
    m: &Model,
    tok: &Tokenizer,
    tick: &dyn Fn(),
) -> CliResult<ModelResult> {
    let t = Instant::now();
    let (ppl, scores) = score(a, m, tokens, tick)?;

    let trace = analysis::trace_for_analysis(m, tokens, a.trace_tokens)?;
    let summaries = analysis::summarize_attention(m, &trace.attention);
    let at_train = analysis::trace_for_analysis(m, tokens, m.config().train_context)?;
    let laa_auc_train =
        analysis::summarize_attention(m, &at_train.attention).iter().map(|l| l.laa.auc).collect();
    let stats = analysis::gate_stats(&trace.gates, GATE_BINS);
    let density = |h: &[u64]| {
        let total: u64 = h.iter().sum();
        h.iter().map(|c| *c as f64 / total.max(1) as f64 * h.len() as f64).collect::<Vec<f64>>()
    };
    // Per-layer F statistics (all heads), then all layers pooled, weighted by their counts.
    let per_layer: Vec<&analysis::GateStats> =
        stats.iter().filter(|g| g.head.is_none() && g.quantity == "f").collect();
    let gates: Vec<GateSummary> = per_layer
        .iter()
        .map(|g| GateSummary {
            layer: g.layer,
            saturation: g.saturation,
            mean: g.mean,
            density: density(&g.histogram),
        })
        .collect();
    let gates_all = (!per_layer.is_empty()).then(|| {
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

    // English check: sampled continuations of fixed prompts.
    let (mut total, mut known) = (0usize, 0usize);
    let mut sample = String::new();
    for s in 0..a.samples {
        let prompt = PROMPTS[s % PROMPTS.len()];
        let out = sample_text(m, tok, prompt, s as u64)?;
        let w = words(&out);
        total += w.len();
        known += w.iter().filter(|w| english.contains(*w)).count();
        if s == 0 {
            sample = format!("{prompt}{out}");
        }
    }
    Ok(ModelResult {
        name: e.name.clone(),
        family: e.family.clone(),
        variants: crate::common::variants_summary(m),
        params: m.weights().num_params(),
        train_context: m.config().train_context,
        dtype: stored_as(m),
        initial_of: e.initial_of.clone(),
        ppl,
        scores,
        laa_auc: summaries.iter().map(|l| l.laa.auc).collect(),
        laa_auc_train,
        laa_curves: summaries.iter().map(|l| l.laa.curve.clone()).collect(),
        gates,
        gates_all,
        notes: config_notes(m.config()),
        english_share: known as f64 / total.max(1) as f64,
        words: total,
        sample,
        training,
        seconds: t.elapsed().as_secs_f64(),
    })
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

fn slope_ablation(
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
        budget: (steps * h.options.batch * h.options.seq_len) as u64,
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

/// An `attnlab bench` point: (context, prefill tok/s, decode tok/s, state bytes).
type BenchPoint = (usize, f64, f64, f64);
/// One model's bench points.
type BenchPoints = Vec<BenchPoint>;

/// The bench files of the Table 7 models in `dir`, by model name (a missing file is skipped; an
/// unreadable one is an error naming it).
fn read_bench(dir: &Path) -> CliResult<Vec<(String, BenchPoints)>> {
    let mut out = Vec::new();
    for name in TABLE7_MODELS {
        let path = dir.join(format!("{name}.json"));
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let bad = |why: &str| {
            CliError::usage(format!("`{}` is not an `attnlab bench` report: {why}", path.display()))
        };
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
        let rows = v["results"].as_array().ok_or_else(|| bad("no results"))?;
        let points = rows
            .iter()
            .map(|r| {
                let f = |k: &str| r[k].as_f64().ok_or_else(|| bad(&format!("a result has no {k}")));
                Ok((
                    f("context")? as usize,
                    f("prefill_tokens_per_s")?,
                    f("decode_tokens_per_s")?,
                    f("state_bytes")?,
                ))
            })
            .collect::<CliResult<BenchPoints>>()?;
        out.push((name.to_string(), points));
    }
    Ok(out)
}

/// Models of the speed-and-memory table (TransNormer Table 7): TransNormer, its 1+elu linear
/// baseline and a softmax model.
const TABLE7_MODELS: [&str; 3] = ["transnormer", "linear-elu", "alibi"];

struct Context<'a> {
    index: &'a ModelIndex,
    results: &'a [ModelResult],
    slopes: &'a [SlopeResult],
    lengths: &'a [usize],
    text_path: &'a Path,
    words_path: &'a Path,
    args: &'a ReportArgs,
    plots: &'a str,
    seconds: f64,
    /// Training length of the models (the default model's train_context): the unit of "1×".
    train_len: usize,
    /// Size preset of the default model, in words.
    size: String,
    /// `attnlab bench` points of the Table 7 models, and the folder they came from.
    bench: (Vec<(String, BenchPoints)>, Option<PathBuf>),
}

/// `(group, seed)` of a model name: `NAME-seedK` (K ≥ 1) is seed K of `NAME`; any other name is
/// seed 0 of itself.
fn seed_of(name: &str) -> (&str, usize) {
    match name.rsplit_once("-seed").map(|(base, k)| (base, k.parse::<usize>())) {
        Some((base, Ok(k))) if !base.is_empty() && k > 0 => (base, k),
        _ => (name, 0),
    }
}

impl Context<'_> {
    fn get(&self, name: &str) -> Option<&ModelResult> {
        self.results.iter().find(|r| r.name == name)
    }

    /// The seeds of model `name` (itself and every `name-seedK`), seed 0 first.
    fn seeds(&self, name: &str) -> Vec<&ModelResult> {
        let mut v: Vec<&ModelResult> = self.results.iter().filter(|r| seed_of(&r.name).0 == name).collect();
        v.sort_by_key(|r| seed_of(&r.name).1);
        v
    }

    /// Perplexity of `name` at `mult` × the training length (the mean over its seeds).
    fn ppl_at(&self, name: &str, mult: usize) -> Option<f64> {
        let len = self.train_len * mult;
        self.seed_mean(name, |r| r.ppl.iter().find(|p| p.length == len).map(|p| p.ppl))
    }

    /// The mean over `name`'s seeds of what `of` reads from each (None when no seed has it).
    fn seed_mean(&self, name: &str, of: impl Fn(&ModelResult) -> Option<f64>) -> Option<f64> {
        let v: Vec<f64> = self.seeds(name).into_iter().filter_map(of).collect();
        (!v.is_empty()).then(|| stats::mean_std(&v).0)
    }

    /// Δ = loss(`a`) − loss(`b`) at `mult` × the training length (nats/token) with its paired
    /// bootstrap interval over evaluation blocks and seed pairs (seed k of A with seed k of B), and
    /// the number of seed pairs; or why it cannot be computed.
    fn delta(&self, a: &str, b: &str, mult: usize) -> Result<(stats::Interval, usize), String> {
        let len = self.train_len * mult;
        let (sa, sb) = (self.seeds(a), self.seeds(b));
        if let Some(n) = [(a, &sa), (b, &sb)].iter().find(|(_, s)| s.is_empty()).map(|(n, _)| n) {
            return Err(format!("needs `{n}`, not in the index"));
        }
        self.alike(&[a, b])?;
        let blocks = |r: &ModelResult| {
            r.scores
                .iter()
                .find(|s| s.length == len)
                .map(|s| stats::block_means(&s.window_nll, len, self.args.block_tokens))
        };
        let diffs: Option<Vec<Vec<f64>>> = sa
            .iter()
            .zip(&sb)
            .map(|(x, y)| Some(blocks(x)?.iter().zip(&blocks(y)?).map(|(p, q)| p - q).collect()))
            .collect();
        let diffs = diffs.ok_or_else(|| format!("length {len} was not measured"))?;
        let blocks = diffs.first().map_or(0, Vec::len);
        if blocks < stats::MIN_BLOCKS {
            return Err(format!(
                "only {blocks} evaluation blocks at length {len}; an interval needs at least {}",
                stats::MIN_BLOCKS
            ));
        }
        let i = stats::paired_bootstrap(&diffs, stats::RESAMPLES, stats::BOOTSTRAP_SEED)
            .ok_or_else(|| format!("`{a}` and `{b}` were not scored on the same blocks"))?;
        Ok((i, diffs.len()))
    }

    /// LAA area of `name`'s layer `layer` on --trace-tokens tokens (the mean over its seeds).
    fn laa_auc(&self, name: &str, layer: usize) -> Option<f64> {
        self.seed_mean(name, |r| r.laa_auc.get(layer).copied())
    }

    /// LAA area of `name`'s layer `layer` at its training length (the mean over its seeds).
    fn laa_auc_train(&self, name: &str, layer: usize) -> Option<f64> {
        self.seed_mean(name, |r| r.laa_auc_train.get(layer).copied())
    }

    /// Mean over layers of `name`'s LAA area at its training length (the mean over its seeds).
    fn laa_mean_train(&self, name: &str) -> Option<f64> {
        let layers = self.get(name)?.laa_auc_train.len();
        let v: Vec<f64> = (0..layers).filter_map(|i| self.laa_auc_train(name, i)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// Trained models, one row per seed group (its seed 0).
    fn groups(&self) -> impl Iterator<Item = &ModelResult> {
        self.trained().filter(|r| seed_of(&r.name).1 == 0)
    }

    /// Seeds per trained model: (fewest, most).
    fn seed_counts(&self) -> (usize, usize) {
        let counts: Vec<usize> = self.groups().map(|r| self.seeds(&r.name).len()).collect();
        (counts.iter().copied().min().unwrap_or(0), counts.iter().copied().max().unwrap_or(0))
    }

    fn longest(&self) -> usize {
        self.lengths.iter().max().copied().unwrap_or(self.train_len) / self.train_len.max(1)
    }

    fn trained(&self) -> impl Iterator<Item = &ModelResult> {
        self.results.iter().filter(|r| r.initial_of.is_none())
    }

    fn render(&self) -> (String, Vec<(String, String)>) {
        let mut md = String::new();
        let mut plots = Vec::new();
        let p = self.plots;
        let _ = writeln!(
            md,
            "# Results\n\n_Generated by `attnlab report` from the models in `{}` (listed in its index.json) — do not edit by hand; \
             rerun the command. Raw numbers: [{p}/results.json]({p}/results.json)._\n\n\
             Every model has the default model's size preset ({}) and was trained on the Brown corpus train \
             split (`scripts/train_shipped.sh`); {} {} The report took {:.0} s with {} threads on this machine.\n\n\
             **Statistics.** A difference between two models is Δ = ln ppl(A) − ln ppl(B), the mean difference of \
             their losses in nats per token on the same tokens, with a 95 % paired bootstrap interval: the scored \
             windows are grouped into blocks of at least {} tokens (at least {} blocks per interval), and {} resamples draw seed pairs (seed k of A \
             with seed k of B), then blocks, with replacement (fixed resampling seed). Each claim's verdict is \
             **holds** (the whole interval satisfies the rule), **does not hold** (none of it does), **inconclusive** \
             (the interval straddles the threshold) or **not tested** (with the reason).\n",
            self.args.models.display(),
            self.size,
            self.setup_sentence(),
            self.seed_sentence(),
            self.seconds,
            self.args.threads,
            self.args.block_tokens,
            stats::MIN_BLOCKS,
            stats::RESAMPLES,
        );
        self.section_notes(&mut md);
        self.section_ppl(&mut md, &mut plots);
        self.section_positions(&mut md, &mut plots);
        self.section_slopes(&mut md, &mut plots);
        self.section_laa(&mut md, &mut plots);
        self.section_gates(&mut md, &mut plots);
        self.section_speed(&mut md);
        self.section_claims(&mut md);
        self.section_training(&mut md, &mut plots);
        self.section_english(&mut md);
        (md, plots)
    }

    /// A perplexity table: one row per model with its seeds' points (mean ± std over seeds).
    fn ppl_table(&self, md: &mut String, rows: &[(String, Vec<&[PplPoint]>)]) {
        let head: Vec<String> =
            self.lengths.iter().map(|l| format!("{}× ({l})", l / self.train_len.max(1))).collect();
        let _ = writeln!(md, "| model | {} |\n|---|{}", head.join(" | "), "---:|".repeat(self.lengths.len()));
        for (name, seeds) in rows {
            let cells: Vec<String> = self
                .lengths
                .iter()
                .map(|l| {
                    let v: Vec<f64> = seeds
                        .iter()
                        .filter_map(|pts| pts.iter().find(|p| p.length == *l).map(|p| p.ppl))
                        .collect();
                    match stats::mean_std(&v) {
                        (m, _) if v.len() == 1 => num(m, 1),
                        (m, sd) if v.len() > 1 => format!("{} ± {sd:.2}", num(m, 1)),
                        _ => "–".into(),
                    }
                })
                .collect();
            let _ = writeln!(md, "| {name} | {} |", cells.join(" | "));
        }
        md.push('\n');
    }

    /// The header's sentence on seeds.
    fn seed_sentence(&self) -> String {
        match self.seed_counts() {
            (1, 1) => "One seed per model (`NAME-seedK` folders would add seeds): the intervals below cover \
                       evaluation noise only, not what another seed could change."
                .into(),
            (lo, hi) if lo == hi => {
                format!("{lo} seeds per model (init and data order); tables give mean ± std over seeds.")
            }
            (lo, hi) => format!(
                "{lo} to {hi} seeds per model (init and data order); tables give mean ± std over seeds."
            ),
        }
    }

    fn section_ppl(&self, md: &mut String, plots: &mut Vec<(String, String)>) {
        let _ = writeln!(
            md,
            "## 1. Perplexity versus length (MEP Table 2 shape)\n\n\
             Test perplexity on {} tokens of `{}` (held-out Brown test documents) at 1×–{}× the training \
             length {}. Protocol of `attnlab eval`: the tokens are cut into non-overlapping windows of each length, \
             each window runs from an empty state, every position but the first is scored; the same tokens at every \
             length. Lower is better.\n",
            self.eval_tokens(),
            self.text_path.display(),
            self.longest(),
            self.train_len
        );
        let rows: Vec<(String, Vec<&[PplPoint]>)> = self
            .groups()
            .map(|r| {
                (format!("`{}`", r.name), self.seeds(&r.name).iter().map(|s| s.ppl.as_slice()).collect())
            })
            .collect();
        self.ppl_table(md, &rows);
        let chart = LineChart {
            title: "Test perplexity vs context length",
            x_label: "context length (tokens)",
            y_label: "perplexity (log scale)",
            x_scale: Scale::Log2,
            y_scale: Scale::Log10,
            y_range: None,
            series: self
                .trained()
                .map(|r| Series {
                    name: r.name.clone(),
                    points: r.ppl.iter().map(|p| (p.length as f64, p.ppl)).collect(),
                    dashed: r.family.contains("linear"),
                })
                .collect(),
            marker: Some((self.train_len as f64, "train length")),
        };
        plots.push(("ppl.svg".into(), chart.render(860.0, 480.0)));
        let _ = writeln!(md, "![perplexity vs length]({}/ppl.svg)\n", self.plots);
    }

    fn section_slopes(&self, md: &mut String, plots: &mut Vec<(String, String)>) {
        let _ = writeln!(
            md,
            "## 3. Slope ablation on the alibi model (MEP Table 4 style)\n\n\
             **Inference-only:** the trained `alibi` model is evaluated with its slopes replaced — every head's slope set \
             to 2^-2, 2^-6 or 2^-9 (\"h = 2, 6, 9\" in the paper's notation), next to the default geometric set it was \
             trained with. MEP's Table 4 **retrains** a model for each slope setting (at L = 512; slope × length \
             constant rescales its h to h − 2 at 128), so these numbers mix the effect of the slopes with the mismatch \
             between trained weights and edited biases: an observation, not a test of Table 4. The claims of §6 test \
             Table 4 on retrained models `alibi-hK` (every head's slope 2^-K) when the index has them.\n"
        );
        if self.slopes.is_empty() {
            md.push_str("No `alibi` model in the index: not measured.\n\n");
            return;
        }
        let rows: Vec<(String, Vec<&[PplPoint]>)> =
            self.slopes.iter().map(|s| (s.preset.clone(), vec![s.ppl.as_slice()])).collect();
        self.ppl_table(md, &rows);
        let chart = LineChart {
            title: "alibi: slopes replaced at inference",
            x_label: "context length (tokens)",
            y_label: "perplexity (log scale)",
            x_scale: Scale::Log2,
            y_scale: Scale::Log10,
            y_range: None,
            series: self
                .slopes
                .iter()
                .map(|s| Series {
                    name: s.preset.clone(),
                    points: s.ppl.iter().map(|p| (p.length as f64, p.ppl)).collect(),
                    dashed: false,
                })
                .collect(),
            marker: Some((self.train_len as f64, "train length")),
        };
        plots.push(("slopes.svg".into(), chart.render(760.0, 420.0)));
        let _ = writeln!(md, "![slope ablation]({}/slopes.svg)\n", self.plots);
        md.push_str(
            "**Retrained (MEP Table 4 proper):** one model per slope setting, every head at 2^-K, trained like `alibi` \
             (the paper's h = 2 and 9 at L = 512 are K = 0 and 7 at 128). The paper: uniform h = 9 destroys \
             extrapolation, uniform h = 2 is worse than the default set at short lengths.\n\n",
        );
        self.retrained_table(
            md,
            &[
                ("alibi", "geometric slopes"),
                ("alibi-h0", "2^-0 on every head"),
                ("alibi-h7", "2^-7 on every head"),
            ],
        );
        md.push_str(
            "**Retrained kernel mixes (MEP Table 3):** ALiBi alone, with ALiBi·0.5, with a Gaussian, and all three \
             (`mep`), equal weights. The paper: ALiBi + ALiBi·0.5 helps at 2048–8192, ALiBi + Gaussian at 512–1024 \
             (differences of 0.1–0.3 perplexity at 22–24).\n\n",
        );
        self.retrained_table(
            md,
            &[
                ("alibi", "exp"),
                ("mep-exp-half", "exp + exp·0.5"),
                ("mep-exp-gauss", "exp + Gaussian"),
                ("mep", "exp + exp·0.5 + Gaussian"),
            ],
        );
    }

    /// A perplexity table of the retrained ablation models `names` (name, what it is), seeds averaged
    /// like §1, when the index has all of them; otherwise a line naming the missing ones.
    fn retrained_table(&self, md: &mut String, names: &[(&str, &str)]) {
        let missing: Vec<String> =
            names.iter().filter(|(n, _)| self.get(n).is_none()).map(|(n, _)| format!("`{n}`")).collect();
        if !missing.is_empty() {
            let _ = writeln!(md, "Not measured: {} not in the index.\n", missing.join(", "));
            return;
        }
        let rows: Vec<(String, Vec<&[PplPoint]>)> = names
            .iter()
            .map(|(n, what)| {
                (format!("`{n}` ({what})"), self.seeds(n).iter().map(|s| s.ppl.as_slice()).collect())
            })
            .collect();
        self.ppl_table(md, &rows);
    }

    fn section_laa(&self, md: &mut String, plots: &mut Vec<(String, String)>) {
        let (n, l) = (self.args.trace_tokens, self.train_len);
        let (uniform, uniform_l) = (analysis::laa_uniform(n), analysis::laa_uniform(l));
        let _ = writeln!(
            md,
            "## 4. Locally accumulated attention per layer (TransNormer Fig. 2)\n\n\
             LAA(r) = the attention mass within the nearest r·n tokens, averaged over query positions and heads, on the \
             first n tokens; the table gives its area (AUC; 1 = all mass on the nearest token, {} = uniform causal \
             attention at n = {l}). Per layer at n = the model's training length (where it learned its attention), \
             and the mean over layers at n = {n} (the traced pass of the gate statistics and the curves below). \
             Linear layers are read through their implied attention matrix (rows normalised by Σ|row|). \
             TransNormer's claim: 1+elu linear attention is diluted (low AUC) and TransNormer's DiagAttention \
             layers restore locality.\n",
            num(uniform_l.auc, 3)
        );
        let _ = writeln!(
            md,
            "| model | n | layer 0 | layer 1 | layer 2 | layer 3 | mean | mean at n = {n} |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|"
        );
        for r in self.groups().filter(|r| !r.laa_auc.is_empty()) {
            let at_l: Vec<f64> =
                (0..r.laa_auc_train.len()).filter_map(|i| self.laa_auc_train(&r.name, i)).collect();
            let at_n: Vec<f64> = (0..r.laa_auc.len()).filter_map(|i| self.laa_auc(&r.name, i)).collect();
            let cells: Vec<String> = (0..4).map(|i| at_l.get(i).map_or("–".into(), |v| num(*v, 3))).collect();
            let _ = writeln!(
                md,
                "| `{}` | {} | {} | {} | {} |",
                r.name,
                r.train_context,
                cells.join(" | "),
                r3(self.laa_mean_train(&r.name)),
                num(at_n.iter().sum::<f64>() / at_n.len().max(1) as f64, 3)
            );
        }
        let _ = writeln!(
            md,
            "| uniform attention | {l} | {0} | {0} | {0} | {0} | {0} | {1} |\n",
            num(uniform_l.auc, 3),
            num(uniform.auc, 3)
        );
        let mut series = Vec::new();
        for name in ["alibi", "linear-elu", "transnormer"] {
            if let Some(r) = self.get(name) {
                for (layer, curve) in
                    r.laa_curves.iter().enumerate().filter(|(l, _)| *l == 0 || *l + 1 == r.laa_curves.len())
                {
                    series.push(Series {
                        name: format!("{name} L{layer}"),
                        points: curve
                            .iter()
                            .enumerate()
                            .map(|(k, v)| (k as f64 / (curve.len() - 1) as f64, *v))
                            .collect(),
                        dashed: layer != 0,
                    });
                }
            }
        }
        series.push(Series {
            name: "uniform".into(),
            points: uniform
                .curve
                .iter()
                .enumerate()
                .map(|(k, v)| (k as f64 / (uniform.curve.len() - 1) as f64, *v))
                .collect(),
            dashed: true,
        });
        let chart = LineChart {
            title: "LAA curves: first (solid) and last (dashed) layer",
            x_label: "neighbourhood r (share of the sequence)",
            y_label: "accumulated attention",
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            y_range: Some((0.0, 1.0)),
            series,
            marker: None,
        };
        plots.push(("laa.svg".into(), chart.render(760.0, 420.0)));
        let _ = writeln!(md, "![LAA curves]({}/laa.svg)\n", self.plots);
    }

    fn section_gates(&self, md: &mut String, plots: &mut Vec<(String, String)>) {
        let _ = writeln!(
            md,
            "## 5. Forget-gate distributions before and after training (ReGLA Fig. 4)\n\n\
             The forget gate F of every gated layer on the first {} tokens (all layers, heads and channels pooled; 20 bins on \
             [0, 1], shown as densities). `*-fig4-init` are the initial checkpoints with gate biases at ±6 (half the \
             channels start near 1, half near 0); `*-fig4` are the same models after training. `gla-fig4` uses a plain \
             sigmoid gate (normalizer 1) like the paper's Fast Decay baseline. Saturation = share of F < 0.05 or > 0.95. \
             The paper does not give its bias values, data or steps (ReGLA digest §5).\n",
            self.args.trace_tokens
        );
        let _ = writeln!(
            md,
            "| model | saturation (all layers) | mean F | per-layer saturation |\n|---|---:|---:|---|"
        );
        let mut panels = Vec::new();
        for name in ["gla-fig4-init", "gla-fig4", "regla-fig4-init", "regla-fig4", "gla", "regla"] {
            let Some(r) = self.get(name) else { continue };
            let Some(all) = &r.gates_all else { continue };
            let per: Vec<String> = r.gates.iter().map(|g| num(g.saturation, 3)).collect();
            let _ = writeln!(
                md,
                "| `{name}` | {} | {} | {} |",
                num(all.saturation, 3),
                num(all.mean, 3),
                per.join(", ")
            );
            if name.contains("fig4") {
                panels.push(HistPanel {
                    title: format!("{} ({})", name, if name.ends_with("-init") { "before" } else { "after" }),
                    density: all.density.clone(),
                    subtitle: format!("saturation {}", num(all.saturation, 3)),
                });
            }
        }
        md.push('\n');
        if !panels.is_empty() {
            plots.push((
                "gates.svg".into(),
                histogram_grid("Forget gate F: before vs after training", "F", &panels, 2),
            ));
            let _ = writeln!(md, "![gate histograms]({}/gates.svg)\n", self.plots);
        }
    }

    fn section_claims(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "## 7. Claims versus results\n\nEach verdict applies the rule in the \"test\" column to the numbers above: \
             perplexity claims to the 95 % interval of Δ (the statistics paragraph at the top; Δ < 0 means the first \
             model is better), LAA and gate claims to one traced pass. Models of {} — far smaller than the papers'.\n",
            self.scale_phrase()
        );
        let sections = [
            ("MEP (multiple-kernel position encoding)", self.claims_mep()),
            ("ReGLA (refined gated linear attention)", self.claims_regla()),
            ("LRPE (linearized relative position encoding)", self.claims_lrpe()),
            ("TransNormer (Norm/Diag attention)", self.claims_transnormer()),
        ];
        for (title, rows) in sections {
            let _ = writeln!(
                md,
                "### {title}\n\n| claim (paper) | test | measured | verdict |\n|---|---|---|---|"
            );
            for row in rows {
                let _ = writeln!(md, "| {} | {} | {} | {} |", row[0], row[1], row[2], row[3]);
            }
            md.push('\n');
        }
    }

    /// "~1.1M parameters trained on 1.0M–22.5M tokens", read from the trained models.
    fn scale_phrase(&self) -> String {
        let millions = |v: &[f64]| {
            let (lo, hi) = v.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
            match v.len() {
                0 => "an unknown number of".into(),
                _ if hi - lo < 0.05 * hi => format!("~{}", approx_count(hi)),
                _ => format!("{}–{}", approx_count(lo), approx_count(hi)),
            }
        };
        let params: Vec<f64> = self.groups().map(|r| r.params as f64).collect();
        let budgets: Vec<f64> =
            self.groups().filter_map(|r| r.training.as_ref()).map(|t| t.budget as f64).collect();
        format!("{} parameters trained on {} tokens", millions(&params), millions(&budgets))
    }

    fn section_training(&self, md: &mut String, plots: &mut Vec<(String, String)>) {
        let _ = writeln!(
            md,
            "## 8. Training cost on this machine\n\nFrom each model's history.json (`attnlab train`, release build). \
             `cpu`: candle on a 2-core machine, either two runs at a time with one thread each or one run alone \
             with two threads (`scripts/train_shipped.sh`, `LANES` and `THREADS`; docs/budget.md says which); \
             `gpu`: the WGSL trainer on a rented GPU (`scripts/device_train.sh`; the card is in docs/budget.md). \
             tokens/s is per run, so it compares runs only on the same device and sharing.\n\n\
             | model | params | device | steps | tokens | time | tokens/s | final val loss |\n\
             |---|---:|---|---:|---:|---:|---:|---:|"
        );
        let (mut cpu_seconds, mut gpu_seconds) = (0.0, 0.0);
        let mut series = Vec::new();
        for r in self.trained() {
            let Some(t) = &r.training else {
                let _ = writeln!(md, "| `{}` | {} | – | – | – | – | – | – |", r.name, r.params);
                continue;
            };
            let (device, seconds) = match t.device {
                TrainDevice::Cpu => ("cpu", &mut cpu_seconds),
                TrainDevice::Gpu => ("gpu", &mut gpu_seconds),
            };
            *seconds += t.seconds;
            let _ = writeln!(
                md,
                "| `{}` | {} | {device} | {} | {} | {:.1} min | {:.0} | {} |",
                r.name,
                r.params,
                t.steps,
                t.tokens,
                t.seconds / 60.0,
                t.tokens_per_s,
                t.final_val_loss.map_or("–".into(), |v| num(v, 3))
            );
            series.push(Series {
                name: r.name.clone(),
                points: t.curve.clone(),
                dashed: r.family.contains("linear"),
            });
        }
        let _ = writeln!(
            md,
            "\nTotal training time: {:.1} h on the CPU, {:.1} min on the GPU.\n",
            cpu_seconds / 3600.0,
            gpu_seconds / 60.0
        );
        let chart = LineChart {
            title: "Validation loss during training",
            x_label: "training tokens",
            y_label: "validation loss (nats/token)",
            x_scale: Scale::Linear,
            y_scale: Scale::Linear,
            y_range: None,
            series,
            marker: None,
        };
        plots.push(("training.svg".into(), chart.render(860.0, 460.0)));
        let _ = writeln!(md, "![validation loss]({}/training.svg)\n", self.plots);
    }

    fn section_english(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "## 9. Does it write English? (temperature {TEMPERATURE})\n\n\
             For each model, {} samples of {SAMPLE_TOKENS} tokens at temperature {TEMPERATURE} (no top-k/top-p; seeds 0…{}; \
             prompts {}) are split into words (letters and inner apostrophes, lower-cased); the share of those words that \
             occur in `{}` is reported. Default model of the page and CLI: `{}`.\n\n\
             | model | real-word share | words | first sample |\n|---|---:|---:|---|",
            self.args.samples,
            self.args.samples.saturating_sub(1),
            PROMPTS.map(|p| format!("\"{p}\"")).join(", "),
            self.words_path.display(),
            self.index.default
        );
        for r in self.trained() {
            let sample = r.sample.replace('|', "\\|").replace('\n', " ");
            let _ = writeln!(
                md,
                "| `{}` | {:.1}% | {} | {} |",
                r.name,
                100.0 * r.english_share,
                r.words,
                sample.trim()
            );
        }
        md.push('\n');
        md.push_str("## Models\n\n| model | family | what it is |\n|---|---|---|\n");
        for m in &self.index.models {
            let _ = writeln!(md, "| `{}` | {} | {} |", m.name, m.family, m.description);
        }
        md.push('\n');
    }
}

/// `22528000.0` → "22.5M", `2048.0` → "2.0k": a count at a glance.
fn approx_count(x: f64) -> String {
    match x {
        _ if x >= 1e6 => format!("{:.1}M", x / 1e6),
        _ if x >= 1e3 => format!("{:.1}k", x / 1e3),
        _ => format!("{x:.0}"),
    }
}

fn r3(x: Option<f64>) -> String {
    x.map_or("–".to_string(), |v| num(v, 3))
}

#[cfg(test)]
mod tests {
    use super::seed_of;

    #[test]
    fn seed_suffixes_group_models() {
        assert_eq!(seed_of("alibi-seed2"), ("alibi", 2));
        assert_eq!(seed_of("mep-param-seed1"), ("mep-param", 1));
        assert_eq!(seed_of("alibi"), ("alibi", 0));
        // Seed 0 is the bare name; a suffix that is no number is part of the name.
        assert_eq!(seed_of("alibi-seed0"), ("alibi-seed0", 0));
        assert_eq!(seed_of("x-seedy"), ("x-seedy", 0));
        assert_eq!(seed_of("-seed3"), ("-seed3", 0));
    }
}
