//! `attnlab report`: measure every shipped model and write docs/results.md with its plots.
//!
//! Everything in the report is computed here from the model folders listed in www/models/index.json
//! (and their history.json): nothing is typed in by hand except the papers' claims, and each claim's
//! verdict is decided by a rule on the measured numbers, printed beside it.

use crate::common::{
    num, progress_bar, read_model_index, read_text, to_value, write_file, CliError, CliResult,
};
use attnlab_core::analysis::PplPoint;
use attnlab_core::catalog::ModelIndex;
use attnlab_core::config::ModelConfig;
use attnlab_train::trainer::TrainDevice;
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

mod cache;
mod claims;
mod measure;
mod sections;
mod setup;
mod stats;

use measure::{
    measure_model, slope_ablation, words, Loaded, PROMPTS, SAMPLE_TOKENS, SLOPE_PRESETS, TEMPERATURE,
};

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
    /// Folder of extra seeds (an index.json listing `NAME-seedK` models of --models), measured and
    /// averaged with their models but not shipped to the page [default: seeds, when --models is
    /// www/models and seeds/index.json exists]
    #[arg(long, value_name = "DIR")]
    pub seeds: Option<PathBuf>,
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
    /// Keep each model's measurement in DIR and reuse it while the model's files, tokenizer, text,
    /// word list, these settings and the measuring code (a fingerprint taken at build time) are the
    /// same; results.md says how many were reused (e.g. `--cache data/cache/report`)
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct GateSummary {
    layer: usize,
    saturation: f64,
    mean: f64,
    /// Density on [0, 1] (integrates to 1).
    density: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LengthScore {
    length: usize,
    /// Mean loss of each window (nats/token), in text order: the bootstrap's raw material (not in
    /// results.json, which the page loads: ~20× its size).
    #[serde(skip, default)]
    window_nll: Vec<f64>,
    /// Mean loss over the windows' positions, in bins doubling from position 1: (first, last, nll).
    position_nll: Vec<(usize, usize, f64)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
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
    /// An extra seed from --seeds: measured for the report, not shipped to the page. Like the name and
    /// family, it comes from the indexes on every run (`run` sets it after measuring), so a cached
    /// measurement never carries a stale value.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    extra_seed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SlopeResult {
    preset: String,
    ppl: Vec<PplPoint>,
}

/// Each model's and each slope edit's result (None where not measured or reused yet).
type JobResults = (Vec<Option<ModelResult>>, Vec<Option<SlopeResult>>);

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
    let (words_path, english) = word_list(&a, &text_path)?;
    let seeds = read_seeds(&a, &index)?;
    // Load every model first: a broken folder fails before hours of work.
    let listed = index.models.iter().map(|e| (a.models.as_path(), e));
    let extra = seeds.iter().flat_map(|(dir, s)| s.models.iter().map(move |e| (dir.as_path(), e)));
    let models: Vec<Loaded> =
        listed.chain(extra).map(|(dir, e)| Loaded::load(&a, dir, e, &text)).collect::<CliResult<_>>()?;
    let setups: Vec<(String, setup::Setup)> = models
        .iter()
        .map(|l| {
            (l.entry.name.clone(), (l.model.config().train_context, l.training.as_ref().map(|t| t.budget)))
        })
        .collect();
    setup::check_seeds_alike(&setups).map_err(CliError::runtime)?;
    let t0 = Instant::now();
    let cache = cache::Cache::open(&a, &models, &words_path)?;
    let (mut results, slopes, reused) = measure_all(&a, &models, &english, &cache, json)?;
    for r in &mut results {
        r.extra_seed = index.get(&r.name).is_none();
    }
    let default_cfg = models.iter().find(|l| l.entry.name == index.default).map(|l| l.model.config().clone());
    let inputs =
        Inputs { text_path: &text_path, words_path: &words_path, started: t0, reused, seeds: seeds.as_ref() };
    write_report(&a, &index, &results, &slopes, default_cfg, &inputs, json)
}

/// The index of the extra seeds (--seeds, else `seeds` beside www/models) with its folder; each of
/// its models must be `NAME-seedK` of a model of `index` and not listed there too.
fn read_seeds(a: &ReportArgs, index: &ModelIndex) -> CliResult<Option<(PathBuf, ModelIndex)>> {
    let dir = match &a.seeds {
        Some(d) => d.clone(),
        None if a.models == Path::new(crate::common::MODELS_DIR) => PathBuf::from(crate::common::SEEDS_DIR),
        None => return Ok(None),
    };
    let Some(seeds) = read_model_index(&dir)? else {
        return match a.seeds {
            Some(_) => Err(CliError::usage(format!("`{}` has no index.json listing seeds", dir.display()))),
            None => Ok(None),
        };
    };
    for m in &seeds.models {
        let (group, k) = seed_of(&m.name);
        let problem = if index.get(&m.name).is_some() {
            Some(format!("is listed in `{}` too", a.models.display()))
        } else if k == 0 {
            Some("is not named NAME-seedK".to_string())
        } else if index.get(group).is_none() {
            Some(format!("is a seed of `{group}`, which `{}` does not list", a.models.display()))
        } else {
            None
        };
        if let Some(p) = problem {
            return Err(CliError::usage(format!("`{}`: `{}` {p}", dir.join("index.json").display(), m.name)));
        }
    }
    Ok(Some((dir, seeds)))
}

/// The word list of the English check (--words, else data/brown/train.txt, else the evaluated
/// text) and its words.
fn word_list(a: &ReportArgs, text_path: &Path) -> CliResult<(PathBuf, HashSet<String>)> {
    let brown = PathBuf::from("data/brown/train.txt");
    let path =
        a.words.clone().unwrap_or_else(|| if brown.is_file() { brown } else { text_path.to_path_buf() });
    let text = std::fs::read_to_string(&path)
        .map_err(|e| CliError::runtime(format!("cannot read the word list `{}`: {e}", path.display())))?;
    let english = words(&text).into_iter().collect();
    Ok((path, english))
}

/// Every model's measurement and the slope edits of `alibi` (when it is listed): taken from the
/// cache where the key matches, measured otherwise (each stored as soon as it is measured); with
/// the number of models reused.
fn measure_all(
    a: &ReportArgs,
    models: &[Loaded],
    english: &HashSet<String>,
    cache: &cache::Cache,
    json: bool,
) -> CliResult<(Vec<ModelResult>, Vec<SlopeResult>, usize)> {
    let alibi = models.iter().position(|l| l.entry.name == "alibi");
    let results: Vec<Option<ModelResult>> =
        models.iter().enumerate().map(|(i, l)| cache.model(i, l)).collect();
    let slopes: Vec<Option<SlopeResult>> =
        (0..SLOPE_PRESETS.len()).map(|p| alibi.and_then(|i| cache.slope(i, p))).collect();
    let reused = results.iter().flatten().count();
    let mut jobs: Vec<Job> = (0..models.len()).filter(|&i| results[i].is_none()).map(Job::Model).collect();
    if alibi.is_some() {
        jobs.extend((0..SLOPE_PRESETS.len()).filter(|&p| slopes[p].is_none()).map(Job::Slope));
    }
    let (results, slopes) = run_jobs(a, models, english, jobs, (results, slopes), cache, json)?;
    let results: Vec<ModelResult> = results.into_iter().flatten().collect();
    if results.len() != models.len() {
        return Err(CliError::runtime("a model job did not finish"));
    }
    Ok((results, slopes.into_iter().flatten().collect(), reused))
}

/// Run `jobs` (measure a model, or one slope edit of `alibi`) on --threads threads, filling the
/// `done` slots and storing each result in the cache; the first error stops the run.
fn run_jobs(
    a: &ReportArgs,
    models: &[Loaded],
    english: &HashSet<String>,
    mut jobs: Vec<Job>,
    done: JobResults,
    cache: &cache::Cache,
    json: bool,
) -> CliResult<JobResults> {
    let alibi = models.iter().position(|l| l.entry.name == "alibi");
    // Longest jobs first (softmax models at long lengths) so the threads finish together.
    jobs.sort_by_key(|j| match j {
        Job::Model(i) => usize::from(models[*i].is_linear()),
        Job::Slope(_) => 0,
    });
    let windows = |n: usize| a.lengths.iter().map(|&l| n / l).sum::<usize>();
    let total_windows: usize = jobs
        .iter()
        .map(|j| match j {
            Job::Model(i) => windows(models[*i].tokens.len()),
            Job::Slope(_) => alibi.map_or(0, |i| windows(models[i].tokens.len())),
        })
        .sum();
    let pb = progress_bar(total_windows as u64, "report", json);
    let next = AtomicUsize::new(0);
    let (results, slopes) = (Mutex::new(done.0), Mutex::new(done.1));
    let failure: Mutex<Option<CliError>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..a.threads.max(1) {
            s.spawn(|| {
                while let Some(job) = jobs.get(next.fetch_add(1, Ordering::SeqCst)) {
                    if failure.lock().map(|f| f.is_some()).unwrap_or(true) {
                        break;
                    }
                    let tick = || pb.inc(1);
                    let outcome = match job {
                        Job::Model(i) => measure_model(a, english, &models[*i], &tick)
                            .and_then(|r| cache.store_model(*i, &r).map(|()| put(&results, *i, r))),
                        Job::Slope(p) => {
                            let i = alibi.unwrap_or(0);
                            slope_ablation(a, &models[i].tokens, &models[i].model, SLOPE_PRESETS[*p], &tick)
                                .and_then(|r| cache.store_slope(i, *p, &r).map(|()| put(&slopes, *p, r)))
                        }
                    };
                    if let Err(e) = outcome {
                        if let Ok(mut f) = failure.lock() {
                            f.get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    pb.finish_and_clear();
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    Ok((results.into_inner().unwrap_or_default(), slopes.into_inner().unwrap_or_default()))
}

/// Store job `i`'s result in its slot.
fn put<T>(slots: &Mutex<Vec<Option<T>>>, i: usize, v: T) {
    if let Ok(mut s) = slots.lock() {
        s[i] = Some(v);
    }
}

/// Where the texts came from, when the run started, and how many models came from the cache.
struct Inputs<'a> {
    text_path: &'a Path,
    words_path: &'a Path,
    started: Instant,
    reused: usize,
    /// The extra seeds' folder and index.
    seeds: Option<&'a (PathBuf, ModelIndex)>,
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
        seeds: inputs.seeds,
        results,
        slopes,
        lengths: &a.lengths,
        text_path,
        words_path,
        args: a,
        plots: &plots_rel,
        seconds: t0.elapsed().as_secs_f64(),
        reused: inputs.reused,
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
    /// The extra seeds' folder and index (--seeds).
    seeds: Option<&'a (PathBuf, ModelIndex)>,
    results: &'a [ModelResult],
    slopes: &'a [SlopeResult],
    lengths: &'a [usize],
    text_path: &'a Path,
    words_path: &'a Path,
    args: &'a ReportArgs,
    plots: &'a str,
    seconds: f64,
    /// Models whose measurement came from --cache.
    reused: usize,
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
