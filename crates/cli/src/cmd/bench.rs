//! `attnlab bench`: prefill and decode throughput at several context lengths.

use crate::common::{
    layer_variants, num, out, print_json, progress_bar, table, write_file, CliError, CliResult, ModelArgs,
};
use crate::gpu::Engine;
use attnlab_gpu::DEFAULT_SPLIT_KEYS;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::time::Instant;

/// Measure prefill and decode throughput of the model.
///
/// For each context C: prefill tokens/s = C / time to prefill C tokens from an empty state; decode
/// tokens/s = N / time of N single-token steps after a prefill of C − N tokens (so decoding happens at
/// context C). Each figure is the median of --repeats runs. Token ids are a fixed pseudo-random
/// sequence (throughput does not depend on the text). Also reported: the weights' bytes in memory by
/// the dtype they are held in (F16/BF16 files keep their matrices in that dtype) and the process's
/// peak RSS.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Context lengths, comma-separated (each at most the model's max_context)
    /// [default: 128,512,2048,8192, those within max_context]
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub contexts: Option<Vec<usize>>,
    /// Decode steps N measured at each context
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub decode_tokens: u32,
    /// Repeats per measurement (the median is reported)
    #[arg(long, value_name = "R", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeats: u32,
    /// Also write the JSON report to this file
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Measure training steps instead: candle on the CPU and the GPU trainer, side by side (same
    /// weights and batches), tokens/s and the ratio
    #[arg(long)]
    pub train: bool,
    /// With --train: sequences per batch
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub train_batch: usize,
    /// With --train: tokens per sequence
    #[arg(long, value_name = "N", default_value_t = 128)]
    pub train_seq_len: usize,
    /// With --train: measured steps per device (after one warm-up step; the median is reported)
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub train_steps: usize,
    /// With --train: also time each kernel of one GPU step alone (where a step's time goes)
    #[arg(long, requires = "train")]
    pub profile: bool,
    /// With --train: also measure both candle paths' gradients against the model computed in f64,
    /// on each measured step's batch at the starting weights (per batch, the worst tensor's
    /// relative error; their median and worst)
    #[arg(long, requires = "train")]
    pub train_accuracy: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// Deterministic token ids in `0..vocab` (splitmix64).
fn bench_tokens(n: usize, vocab: usize) -> Vec<u32> {
    let mut x: u64 = 0x5EED_0FA7_7E00;
    (0..n)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) % vocab as u64) as u32
        })
        .collect()
}

fn machine() -> serde_json::Value {
    let arch = std::process::Command::new("uname")
        .arg("-m")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| std::env::consts::ARCH.to_string());
    let cpu = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|info| {
        info.lines()
            .find(|l| l.starts_with("model name") || l.starts_with("Model") || l.starts_with("cpu model"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    let cores = std::thread::available_parallelism().map(|n| n.get()).ok();
    json!({ "arch": arch, "os": std::env::consts::OS, "cpu": cpu, "cores": cores })
}

/// One measurement at one context (or the medians of several).
struct Point {
    context: usize,
    prefill_s: f64,
    decode_s: f64,
    state_bytes: usize,
    /// GPU only: compute dispatches and queue submissions per decoded token.
    per_token: Option<(f64, f64)>,
    /// GPU with the fused decode: decode seconds and dispatches per token op by op, same run.
    op_by_op: Option<(f64, f64)>,
    /// GPU: seconds of the decode's tokens greedy, one submission each and in runs of
    /// [`GREEDY_RUN`].
    greedy: Option<(f64, f64)>,
    /// GPU with a fused softmax decode: decode seconds split-K (at [`DEFAULT_SPLIT_KEYS`] keys per
    /// workgroup) and with one workgroup per head, same run.
    split_k: Option<(f64, f64)>,
}

/// Tokens per submission of the bench's GPU-resident greedy runs.
const GREEDY_RUN: usize = 16;

/// Default contexts of the report.
pub const DEFAULT_CONTEXTS: [usize; 4] = [128, 512, 2048, 8192];

/// Session set-up (GPU: buffer allocation) is outside the timed region; prefill time includes the
/// readback of the last logits, each decode step the readback of its logits.
fn measure(engine: &mut Engine<'_>, tokens: &[u32], c: usize, n: usize) -> CliResult<Point> {
    let mut s = engine.session()?;
    let t = Instant::now();
    s.prefill(&tokens[..c])?;
    let prefill = t.elapsed().as_secs_f64();
    let state_bytes = s.state_bytes();
    drop(s);

    let mut s = engine.session()?;
    s.prefill(&tokens[..c - n])?;
    let mid = s.traffic();
    let t = Instant::now();
    for &id in &tokens[c - n..c] {
        s.step(id)?;
    }
    let decode = t.elapsed().as_secs_f64();
    let per_token = match (mid, s.traffic()) {
        (Some(a), Some(b)) => Some((
            (b.dispatches - a.dispatches) as f64 / n as f64,
            (b.submissions - a.submissions) as f64 / n as f64,
        )),
        _ => None,
    };
    Ok(Point {
        context: c,
        prefill_s: prefill,
        decode_s: decode,
        state_bytes,
        per_token,
        op_by_op: None,
        greedy: None,
        split_k: None,
    })
}

/// GPU with the fused decode: the same decode measured op by op (median of `repeats`), as
/// (decode seconds, dispatches per token); None otherwise.
fn op_by_op_decode(
    engine: &mut Engine<'_>,
    tokens: &[u32],
    c: usize,
    n: usize,
    repeats: u32,
) -> CliResult<Option<(f64, f64)>> {
    if engine.fused_decode() != Some(Ok(true)) {
        return Ok(None);
    }
    engine.set_fused_decode(false);
    let runs: CliResult<Vec<Point>> = (0..repeats.max(1)).map(|_| measure(engine, tokens, c, n)).collect();
    engine.set_fused_decode(true);
    let runs = runs?;
    let dispatches = runs.last().and_then(|p| p.per_token).map_or(0.0, |t| t.0);
    Ok(Some((median(runs.iter().map(|p| p.decode_s).collect()), dispatches)))
}

/// GPU with a fused decode of softmax layers: the decode split-K at [`DEFAULT_SPLIT_KEYS`] and with
/// one workgroup per head (medians of `repeats`), the model's own setting restored; None otherwise.
fn split_k_decode(
    engine: &mut Engine<'_>,
    tokens: &[u32],
    c: usize,
    n: usize,
    repeats: u32,
) -> CliResult<Option<(f64, f64)>> {
    if engine.fused_decode() != Some(Ok(true)) || !engine.has_softmax_layers() {
        return Ok(None);
    }
    let keep = engine.decode_split_keys();
    let mut timed = |keys: Option<u32>| -> CliResult<f64> {
        engine.set_decode_split_keys(keys);
        let runs: CliResult<Vec<Point>> =
            (0..repeats.max(1)).map(|_| measure(engine, tokens, c, n)).collect();
        Ok(median(runs?.iter().map(|p| p.decode_s).collect()))
    };
    let times = timed(Some(DEFAULT_SPLIT_KEYS)).and_then(|split| Ok((split, timed(None)?)));
    engine.set_decode_split_keys(keep);
    times.map(Some)
}

/// One untimed pass of every timed path (prefill, decode fused and op by op, greedy runs) on a short
/// context, so that pipelines the driver compiles on first use (lavapipe JIT-compiles each one)
/// stay out of the numbers.
fn warm_up(engine: &mut Engine<'_>, tokens: &[u32], c: usize, n: usize) -> CliResult<()> {
    let c = c.min(64);
    let n = n.min(4).min(c.saturating_sub(1));
    if n == 0 {
        return Ok(());
    }
    measure(engine, tokens, c, n)?;
    op_by_op_decode(engine, tokens, c, n, 1)?;
    split_k_decode(engine, tokens, c, n, 1)?;
    engine.greedy_timing(&tokens[..c - n], n, GREEDY_RUN)?;
    Ok(())
}

/// Tokens of the core ÷ candle prefill comparison (issue 4, ratio b).
const PEER_TOKENS: usize = 512;

/// Median seconds of (core `prefill_all`, candle `forward`) on the same weights and tokens. Both
/// produce every row's logits; the results must agree (1e-3 relative) or the comparison is void.
fn core_vs_candle(model: &attnlab_core::Model, tokens: &[u32], repeats: usize) -> CliResult<(f64, f64)> {
    let peer = attnlab_train::TrainModel::from_core(model).map_err(|e| CliError::runtime(e.to_string()))?;
    let (mut core, mut candle) = (Vec::new(), Vec::new());
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..repeats.max(1) {
        let t = Instant::now();
        a = model.session().prefill_all(tokens)?;
        core.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        b = peer.forward_ids(tokens).map_err(|e| CliError::runtime(e.to_string()))?;
        candle.push(t.elapsed().as_secs_f64());
    }
    let scale = a.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(1e-6);
    let err = a.iter().zip(&b).fold(0.0f32, |m, (x, y)| m.max((x - y).abs())) / scale;
    if a.len() != b.len() || err > 1e-3 {
        return Err(CliError::runtime(format!("core and candle logits differ (relative {err}); no ratio")));
    }
    Ok((median(core), median(candle)))
}

pub fn run(a: BenchArgs, json: bool) -> CliResult<()> {
    let n = a.decode_tokens as usize;
    let model = a.model.load_any_backend()?;
    if a.train {
        let b = super::train_bench::TrainBench {
            batch: a.train_batch,
            seq_len: a.train_seq_len,
            steps: a.train_steps,
            profile: a.profile,
            accuracy: a.train_accuracy,
        };
        return super::train_bench::run(&model, &a.model.dir(), &b, json, a.out.as_deref());
    }
    let cfg = model.config();
    let max = cfg.max_context;
    let contexts = contexts_to_measure(&a, max, n)?;
    let longest = contexts.iter().copied().max().unwrap_or(0);
    let tokens = bench_tokens(longest, cfg.vocab_size);

    let mut engine = Engine::new(&model, a.model.backend.backend)?;
    let pb = progress_bar((contexts.len() * a.repeats as usize) as u64, "bench", json);
    pb.set_message("warm-up");
    warm_up(&mut engine, &tokens, contexts.first().copied().unwrap_or(0), n)?;
    let mut points = Vec::new();
    for &c in &contexts {
        pb.set_message(format!("ctx {c}"));
        points.extend(measure_context(&mut engine, &tokens, c, n, a.repeats, &|| pb.inc(1))?);
    }
    pb.finish_and_clear();
    // The process's peak resident set, before the candle comparison adds its own f32 copy.
    let peak_rss = peak_rss_bytes();

    // Ratio (b): the core CPU reference's prefill against the trainer's candle forward, same weights.
    let peer = if a.model.backend.backend == crate::common::Backend::Cpu && max >= PEER_TOKENS {
        pb.set_message("core ÷ candle");
        Some(core_vs_candle(&model, &bench_tokens(PEER_TOKENS, cfg.vocab_size), a.repeats as usize)?)
    } else {
        None
    };
    // Decode time per token at the longest context ÷ at the shortest (1 = flat).
    let ratio = match (points.iter().min_by_key(|p| p.context), points.iter().max_by_key(|p| p.context)) {
        (Some(lo), Some(hi)) if lo.decode_s > 0.0 => {
            Some((lo.context, hi.context, hi.decode_s / lo.decode_s))
        }
        _ => None,
    };
    let run = Run { peak_rss, ratio, peer, device: engine.device() };
    let report = report_json(&a, &model, &engine, &points, &run);
    if let Some(path) = &a.out {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::runtime(format!("cannot serialize the report: {e}")))?;
        write_file(path, (text + "\n").as_bytes())?;
    }
    if json {
        return print_json(&report);
    }
    out(&render_text(&a, &model, &report, &points, &run))
}

/// Median timings of `repeats` runs at context `c`, with the GPU's op-by-op, split-K and greedy
/// comparisons of the same context (None when no run was measured).
fn measure_context(
    engine: &mut Engine<'_>,
    tokens: &[u32],
    c: usize,
    n: usize,
    repeats: u32,
    tick: &dyn Fn(),
) -> CliResult<Option<Point>> {
    let mut runs = Vec::with_capacity(repeats as usize);
    for _ in 0..repeats {
        runs.push(measure(engine, tokens, c, n)?);
        tick();
    }
    let prefill_s = median(runs.iter().map(|p| p.prefill_s).collect());
    let decode_s = median(runs.iter().map(|p| p.decode_s).collect());
    let op_by_op = op_by_op_decode(engine, tokens, c, n, repeats)?;
    let split_k = split_k_decode(engine, tokens, c, n, repeats)?;
    let greedy = engine.greedy_timing(&tokens[..c - n], n, GREEDY_RUN)?;
    Ok(runs.pop().map(|last| Point { prefill_s, decode_s, op_by_op, greedy, split_k, ..last }))
}

/// What one bench run measured besides its points.
struct Run {
    peak_rss: Option<u64>,
    /// Decode time per token at the longest context ÷ at the shortest: (shortest, longest, ratio).
    ratio: Option<(usize, usize, f64)>,
    /// Prefill seconds of the core CPU reference and of candle on the same tokens.
    peer: Option<(f64, f64)>,
    device: Option<String>,
}

/// The report as written by --out and printed by --json.
fn report_json(
    a: &BenchArgs,
    model: &attnlab_core::Model,
    engine: &Engine<'_>,
    points: &[Point],
    run: &Run,
) -> serde_json::Value {
    let (n, cfg) = (a.decode_tokens as usize, model.config());
    let (ratio, peer) = (run.ratio, run.peer);
    json!({
        "attnlab_version": env!("CARGO_PKG_VERSION"),
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "backend": a.model.backend.name(),
        "device": run.device,
        "loop_guard": attnlab_gpu::shaders::loop_guard(),
        "machine": machine(),
        "model": {
            "path": a.model.dir().display().to_string(),
            "name": cfg.name,
            "params": model.weights().num_params(),
            "variants": layer_variants(model),
            "vocab_size": cfg.vocab_size,
            "d_model": cfg.d_model,
            "n_layers": cfg.n_layers,
            "n_heads": cfg.n_heads,
            "head_dim": cfg.head_dim,
            "max_context": cfg.max_context,
        },
        "memory": memory_report(model, run.peak_rss),
        "decode_tokens": n,
        "repeats": a.repeats,
        "decode_time_ratio": ratio.map(|(lo, hi, r)| json!({ "from_context": lo, "to_context": hi, "ratio": r })),
        "core_vs_candle_prefill": peer.map(|(core, candle)| json!({
            "tokens": PEER_TOKENS, "core_s": core, "candle_s": candle, "ratio": core / candle,
        })),
        "results": points.iter().map(|p| json!({
            "context": p.context,
            "prefill_tokens": p.context,
            "prefill_s": p.prefill_s,
            "prefill_tokens_per_s": tokens_per_s(p.context, p.prefill_s),
            "decode_from": p.context - n,
            "decode_tokens": n,
            "decode_s": p.decode_s,
            "decode_tokens_per_s": tokens_per_s(n, p.decode_s),
            "state_bytes": p.state_bytes,
            "dispatches_per_token": p.per_token.map(|t| t.0),
            "submissions_per_token": p.per_token.map(|t| t.1),
            "op_by_op": p.op_by_op.map(|(s, d)| json!({
                "decode_s": s, "decode_tokens_per_s": tokens_per_s(n, s), "dispatches_per_token": d,
            })),
            "split_k": p.split_k.map(|(split, whole)| json!({
                "keys_per_split": DEFAULT_SPLIT_KEYS,
                "split_decode_tokens_per_s": tokens_per_s(n, split),
                "one_workgroup_per_head_decode_tokens_per_s": tokens_per_s(n, whole),
            })),
            "greedy": p.greedy.map(|(single, runs)| json!({
                "tokens": n,
                "one_submission_per_token_tokens_per_s": tokens_per_s(n, single),
                "tokens_per_submission": GREEDY_RUN,
                "gpu_resident_tokens_per_s": tokens_per_s(n, runs),
            })),
        })).collect::<Vec<_>>(),
        "gpu_matrices": engine
            .gpu_matrices()
            .map(|(dtype, bytes, reads)| json!({ "dtype": dtype, "bytes": bytes, "read_as": reads })),
        "fused_decode": engine.fused_decode().map(|f| match f {
            Ok(on) => json!({ "on": on }),
            Err(why) => json!({ "on": false, "why_not": why }),
        }),
    })
}

/// Peak resident set size of this process so far (Linux `VmHWM`), if known.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The weights' bytes in memory by the dtype they are held in (F16/BF16 files keep their matrices
/// in that dtype), per parameter, and the peak RSS of the run.
fn memory_report(model: &attnlab_core::Model, peak_rss: Option<u64>) -> serde_json::Value {
    let by_dtype = model.weights().bytes_by_dtype();
    let total: usize = by_dtype.values().sum();
    let params = model.weights().num_params().max(1);
    json!({
        "weight_bytes": by_dtype.iter().map(|(d, b)| (d.name().to_string(), json!(b))).collect::<serde_json::Map<_, _>>(),
        "weight_bytes_total": total,
        "weight_bytes_per_param": total as f64 / params as f64,
        "peak_rss_bytes": peak_rss,
    })
}

/// The contexts to measure: `--contexts`, or the defaults up to `max`; each must exceed `n`.
fn contexts_to_measure(a: &BenchArgs, max: usize, n: usize) -> CliResult<Vec<usize>> {
    let contexts = match &a.contexts {
        Some(c) => c.clone(),
        None => DEFAULT_CONTEXTS.iter().copied().filter(|&c| c <= max).collect(),
    };
    if contexts.is_empty() {
        return Err(CliError::usage(format!(
            "no context to measure: --contexts is empty or the defaults exceed the model's max_context {max}"
        )));
    }
    let too_long: Vec<String> = contexts.iter().filter(|&&c| c > max).map(usize::to_string).collect();
    if !too_long.is_empty() {
        return Err(CliError::usage(format!(
            "--contexts {} exceed the model's max_context {max}",
            too_long.join(",")
        )));
    }
    let too_short: Vec<String> = contexts.iter().filter(|&&c| c <= n).map(usize::to_string).collect();
    if !too_short.is_empty() {
        return Err(CliError::usage(format!(
            "--contexts {} must be larger than --decode-tokens {n} (decode is measured after a prefill of context − N tokens)",
            too_short.join(",")
        )));
    }
    Ok(contexts)
}

/// The human-readable report.
fn render_text(
    a: &BenchArgs,
    model: &attnlab_core::Model,
    report: &serde_json::Value,
    points: &[Point],
    run: &Run,
) -> String {
    let n = a.decode_tokens as usize;
    let params = &report["model"]["params"];
    let device = report["device"].as_str();
    let m = &report["machine"];
    let mut s = format!(
        "model {} ({}, {} params), backend {}, {} build\nmachine: {} {}, {} cores\n",
        a.model.dir().display(),
        crate::common::variants_summary(model),
        params,
        a.model.backend.name(),
        report["build"].as_str().unwrap_or(""),
        m["arch"].as_str().unwrap_or("?"),
        m["cpu"].as_str().unwrap_or("unknown CPU"),
        m["cores"].as_u64().map_or("?".to_string(), |c| c.to_string()),
    );
    s.push_str(&timing_table(points, n, a.repeats));
    if let Some((lo, hi, r)) = run.ratio {
        s.push_str(&format!("decode time per token at {hi} ÷ at {lo}: {r:.2}\n"));
    }
    if let Some(p) = points.iter().find(|p| p.per_token.is_some()) {
        s.push_str(&gpu_summary(model, report, p));
    }
    for p in points {
        s.push_str(&gpu_comparisons(p, n));
    }
    s.push_str(&memory_line(&report["memory"]));
    if let Some((core, candle)) = run.peer {
        s.push_str(&format!(
            "prefill of {PEER_TOKENS} tokens, core CPU reference {:.1} ms ÷ candle forward {:.1} ms: {:.2}\n",
            core * 1e3,
            candle * 1e3,
            core / candle
        ));
    }
    if let Some(d) = &device {
        s.push_str(&format!("device: {d}\n"));
    }
    if let Some(path) = &a.out {
        s.push_str(&format!("report written to {}\n", path.display()));
    }
    s
}

/// Prefill and decode speed at each context (medians of the repeats) and the decode state's size.
fn timing_table(points: &[Point], n: usize, repeats: u32) -> String {
    let mut s = String::new();
    let rows: Vec<Vec<String>> = points
        .iter()
        .map(|p| {
            vec![
                p.context.to_string(),
                num(tokens_per_s(p.context, p.prefill_s), 1),
                num(p.prefill_s * 1e3, 1),
                num(tokens_per_s(n, p.decode_s), 1),
                num(p.decode_s * 1e3 / n as f64, 3),
                format!("{:.1}", p.state_bytes as f64 / 1024.0),
            ]
        })
        .collect();
    s.push_str(&format!(
        "median of {} repeat(s); decode = {n} steps after a prefill of context − {n}\n",
        repeats
    ));
    s.push_str(&table(
        &["context", "prefill tok/s", "prefill ms", "decode tok/s", "ms/token", "state KiB"],
        &rows,
        &[],
    ));
    s
}

/// The weights' bytes in memory by dtype, per parameter, and the peak RSS.
fn memory_line(mem: &serde_json::Value) -> String {
    let mib = |b: u64| format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64);
    let held: Vec<String> = mem["weight_bytes"]
        .as_object()
        .map(|m| m.iter().map(|(d, b)| format!("{} {d}", mib(b.as_u64().unwrap_or(0)))).collect())
        .unwrap_or_default();
    format!(
        "weights in memory: {} ({:.2} bytes per parameter){}\n",
        held.join(" + "),
        mem["weight_bytes_per_param"].as_f64().unwrap_or(f64::NAN),
        mem["peak_rss_bytes"].as_u64().map_or(String::new(), |b| format!("; peak RSS {}", mib(b))),
    )
}

/// The GPU's dispatches and submissions per decoded token (at `p`'s context), how its matrices are
/// held, and whether decode runs fused.
fn gpu_summary(model: &attnlab_core::Model, report: &serde_json::Value, p: &Point) -> String {
    let mut s = String::new();
    let (d, sub) = p.per_token.unwrap_or_default();
    let layers = model.config().n_layers;
    s.push_str(&format!(
        "GPU per decoded token (context {}): {d:.1} compute dispatches, {sub:.1} queue submissions \
         ({layers} layers; issue 12's goal is at most 2 × layers + 2 = {})\n",
        p.context,
        2 * layers + 2
    ));
    let m = &report["gpu_matrices"];
    if let (Some(dtype), Some(bytes), Some(reads)) =
        (m["dtype"].as_str(), m["bytes"].as_u64(), m["read_as"].as_str())
    {
        s.push_str(&format!(
            "GPU weight matrices held as {dtype}: {:.1} MiB, read as {reads}\n",
            bytes as f64 / (1u64 << 20) as f64
        ));
    }
    match report["fused_decode"]["why_not"].as_str() {
        Some(why) => s.push_str(&format!("decode runs op by op: {why}\n")),
        None => s.push_str("decode runs fused (shaders/decode.wgsl)\n"),
    }
    s
}

/// The GPU comparisons measured at `p`'s context: greedy runs, split-K, and fused against op by op.
fn gpu_comparisons(p: &Point, n: usize) -> String {
    let mut s = String::new();
    if let Some((single, runs)) = p.greedy {
        let (one, batched) = (tokens_per_s(n, single), tokens_per_s(n, runs));
        s.push_str(&format!(
            "context {}: greedy decode {} tok/s one submission per token, {} tok/s in GPU-resident runs of {GREEDY_RUN} ({:.2}×)\n",
            p.context,
            num(one, 1),
            num(batched, 1),
            batched / one.max(1e-12)
        ));
    }
    if let Some((split, whole)) = p.split_k {
        let (split, whole) = (tokens_per_s(n, split), tokens_per_s(n, whole));
        s.push_str(&format!(
            "context {}: decode split-K (≥ {DEFAULT_SPLIT_KEYS} keys per workgroup) {} tok/s, one workgroup per head {} tok/s ({:.2}×)\n",
            p.context,
            num(split, 1),
            num(whole, 1),
            split / whole.max(1e-12)
        ));
    }
    if let Some((secs, d)) = p.op_by_op {
        let (fused, plain) = (tokens_per_s(n, p.decode_s), tokens_per_s(n, secs));
        s.push_str(&format!(
            "context {}: decode op by op {} tok/s, {d:.1} dispatches per token; fused ÷ op by op {:.2}\n",
            p.context,
            num(plain, 1),
            fused / plain.max(1e-12)
        ));
    }
    s
}

/// `tokens / s`, infinite for a zero time.
fn tokens_per_s(tokens: usize, s: f64) -> f64 {
    if s > 0.0 {
        tokens as f64 / s
    } else {
        f64::INFINITY
    }
}
