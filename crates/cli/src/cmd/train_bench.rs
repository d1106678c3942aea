//! `attnlab bench --train`: training-step throughput of one model on the CPU (candle, with the fused
//! softmax, cross-entropy, RMSNorm and log-sigmoid and with candle's composites) and on the GPU
//! (`attnlab_gpu::train`), side by side in one run, same weights and batches.

use crate::common::{out, print_json, table, write_file, CliError, CliResult};
use attnlab_core::Model;
use attnlab_gpu::train::ItemTime;
use attnlab_train::gpu::GpuTrain;
use attnlab_train::optim::{AdamW, AdamWConfig};
use attnlab_train::reference;
use attnlab_train::trainer::optimizer_step_windows;
use attnlab_train::TrainModel;
use serde_json::json;
use std::path::Path;
use std::time::Instant;

/// Shape of the measured steps.
pub struct TrainBench {
    pub batch: usize,
    pub seq_len: usize,
    /// Measured steps per device (after one warm-up step).
    pub steps: usize,
    /// Also time each item of one GPU step alone.
    pub profile: bool,
    /// Also measure the candle paths' gradients against the f64 reference, on each measured step's
    /// batch at the starting weights.
    pub accuracy: bool,
}

/// The profile of one GPU step: items summed by kernel (largest first), and the largest items.
struct StepProfile {
    items: usize,
    seconds: f64,
    by_kernel: Vec<KernelTotal>,
    largest: Vec<ItemTime>,
}

/// One kernel's items of a profiled step, together.
struct KernelTotal {
    kernel: &'static str,
    count: usize,
    seconds: f64,
}

impl StepProfile {
    fn new(items: &[ItemTime]) -> StepProfile {
        let mut by_kernel: Vec<KernelTotal> = Vec::new();
        for it in items {
            match by_kernel.iter_mut().find(|k| k.kernel == it.kernel) {
                Some(k) => {
                    k.count += 1;
                    k.seconds += it.seconds;
                }
                None => by_kernel.push(KernelTotal { kernel: it.kernel, count: 1, seconds: it.seconds }),
            }
        }
        by_kernel.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        let mut largest = items.to_vec();
        largest.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
        largest.truncate(16);
        StepProfile { items: items.len(), seconds: items.iter().map(|i| i.seconds).sum(), by_kernel, largest }
    }

    fn json(&self) -> serde_json::Value {
        json!({
            "items": self.items,
            "seconds": self.seconds,
            "by_kernel": self.by_kernel.iter()
                .map(|k| json!({ "kernel": k.kernel, "count": k.count, "seconds": k.seconds }))
                .collect::<Vec<_>>(),
            "largest": self.largest.iter()
                .map(|i| json!({ "kernel": i.kernel, "grid": i.grid, "seconds": i.seconds }))
                .collect::<Vec<_>>(),
        })
    }

    /// The by-kernel totals as a table.
    fn table(&self) -> String {
        let rows: Vec<Vec<String>> = (self.by_kernel.iter())
            .map(|k| {
                vec![
                    k.kernel.to_string(),
                    k.count.to_string(),
                    format!("{:.3}", k.seconds * 1e3),
                    format!("{:.1}", 100.0 * k.seconds / self.seconds.max(f64::MIN_POSITIVE)),
                ]
            })
            .collect();
        format!(
            "\none GPU step item by item ({} items, each submitted and waited for alone: {:.1} ms)\n{}",
            self.items,
            self.seconds * 1e3,
            table(&["kernel", "items", "ms", "%"], &rows, &[0])
        )
    }
}

/// Seconds of each of `steps` calls of `step` after one warm-up call, and their losses.
fn time_steps<E>(
    steps: usize,
    mut step: impl FnMut(usize) -> Result<f32, E>,
) -> Result<(Vec<f64>, Vec<f32>), E> {
    step(0)?;
    let mut secs = Vec::with_capacity(steps);
    let mut losses = Vec::with_capacity(steps);
    for s in 1..=steps {
        let t0 = Instant::now();
        losses.push(step(s)?);
        secs.push(t0.elapsed().as_secs_f64());
    }
    Ok((secs, losses))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Fixed pseudo-random windows of step `s`.
fn windows(b: &TrainBench, vocab: usize, s: usize) -> Vec<u32> {
    let mut x = (s as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..b.batch * (b.seq_len + 1))
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 33) % vocab as u64) as u32
        })
        .collect()
}

/// One trainer's timed steps: median tokens per second and the largest difference of its losses
/// from the fused candle run's (none for that run itself).
struct Timed {
    device: String,
    tokens_per_s: f64,
    max_loss_difference: Option<f32>,
}

/// The three trainers side by side; the GPU's error when it could not run; with --train-accuracy
/// the fused and composite paths' gradient errors against f64.
struct Measured {
    cpu: Timed,
    library: Timed,
    gpu: Result<(Timed, Option<StepProfile>), String>,
    accuracy: Option<[Accuracy; 2]>,
}

/// One candle path's gradients against f64: per batch, the worst tensor's relative L2 error and
/// that tensor's name.
struct Accuracy(Vec<(f64, String)>);

impl Accuracy {
    /// The worst batch's error and tensor.
    fn worst(&self) -> (f64, &str) {
        self.0.iter().fold((0.0, ""), |w, (e, n)| if *e > w.0 { (*e, n) } else { w })
    }

    fn median(&self) -> f64 {
        median(self.0.iter().map(|(e, _)| *e).collect())
    }

    fn json(&self) -> serde_json::Value {
        let (worst, tensor) = self.worst();
        let per_batch: Vec<f64> = self.0.iter().map(|(e, _)| *e).collect();
        json!({ "worst": worst, "tensor": tensor, "median": self.median(), "per_batch": per_batch })
    }
}

/// The fused and the composite path's gradient errors against the model computed in f64, on the
/// batches of the measured steps, all at the starting weights (one batch is a noisy sample: where
/// a gradient is a sum that nearly cancels, its relative error varies by 10× between batches).
fn accuracy(model: &Model, b: &TrainBench) -> attnlab_train::Result<[Accuracy; 2]> {
    let exact = TrainModel::from_core(model)?.in_f64()?;
    let paths = [TrainModel::from_core(model)?, TrainModel::from_core(model)?.with_library_ops()];
    let mut errors = [Accuracy(Vec::new()), Accuracy(Vec::new())];
    for s in 0..b.steps {
        let batch = windows(b, model.config().vocab_size, s);
        let truth = reference::loss_and_gradients(&exact, &batch, b.batch)?.1;
        for (m, e) in paths.iter().zip(&mut errors) {
            let grads = reference::loss_and_gradients(m, &batch, b.batch)?.1;
            let (worst, name) = reference::worst_gradient_error(&grads, &truth);
            e.0.push((worst, name.to_string()));
        }
    }
    Ok(errors)
}

pub fn run(model: &Model, dir: &Path, b: &TrainBench, json: bool, out_file: Option<&Path>) -> CliResult<()> {
    let cfg = model.config();
    if b.seq_len == 0 || b.batch == 0 || b.steps == 0 || b.seq_len > cfg.max_context {
        return Err(CliError::usage(format!(
            "--train-batch, --train-seq-len and --train-steps must be > 0 and the length ≤ max_context {}",
            cfg.max_context
        )));
    }
    let m = measure(model, b)?;
    let report = m.json(model, dir, b);
    if let Some(path) = out_file {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::runtime(format!("cannot serialize the report: {e}")))?;
        write_file(path, (text + "\n").as_bytes())?;
    }
    if json {
        return print_json(&report);
    }
    out(&m.text(model, b))
}

/// Time `b.steps` steps of candle (fused ops, then candle's composites of the same ops, the
/// fused ops' reference) and of the WGSL trainer, each on a fresh copy of the weights and the
/// same windows.
fn measure(model: &Model, b: &TrainBench) -> CliResult<Measured> {
    let err = |e: attnlab_train::TrainError| CliError::runtime(e.to_string());
    let (lr, clip, vocab) = (1e-3, 1.0, model.config().vocab_size);
    let tokens = (b.batch * b.seq_len) as f64;
    let candle = |library_ops: bool| {
        let m = TrainModel::from_core(model)?;
        let m = if library_ops { m.with_library_ops() } else { m };
        let mut opt = AdamW::new(&m, AdamWConfig::default())?;
        time_steps(b.steps, |s| {
            optimizer_step_windows(&m, &mut opt, &windows(b, vocab, s), b.batch, lr, clip, s + 1).map(|r| r.0)
        })
    };
    let (cpu_s, cpu_loss) = candle(false).map_err(err)?;
    let (library_s, library_loss) = candle(true).map_err(err)?;
    let max_diff =
        |losses: &[f32]| cpu_loss.iter().zip(losses).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    let timed = |device: &str, secs: Vec<f64>, losses: Option<&[f32]>| Timed {
        device: device.to_string(),
        tokens_per_s: tokens / median(secs),
        max_loss_difference: losses.map(max_diff),
    };
    let fresh = TrainModel::from_core(model).map_err(err)?;
    let gpu = GpuTrain::new(&fresh, b.batch, b.seq_len, AdamWConfig::default()).and_then(|mut g| {
        let device = g.device();
        let (secs, losses) =
            time_steps(b.steps, |s| g.step(&windows(b, vocab, s), lr, clip, s + 1).map(|r| r.0))?;
        let profile =
            if b.profile { Some(StepProfile::new(&g.profile_step(&windows(b, vocab, 0))?)) } else { None };
        Ok((timed(&device, secs, Some(&losses)), profile))
    });
    Ok(Measured {
        cpu: timed("candle (CPU)", cpu_s, None),
        library: timed(LIBRARY_OPS, library_s, Some(&library_loss)),
        gpu: gpu.map_err(|e| e.to_string()),
        accuracy: if b.accuracy { Some(accuracy(model, b).map_err(err)?) } else { None },
    })
}

/// The candle run with candle's composites in place of the fused ops.
const LIBRARY_OPS: &str =
    "candle (CPU), composite softmax, cross-entropy, RMSNorm, log-sigmoid and chunked gated scan";

impl Measured {
    /// `--json`'s report (also written to `--out`).
    fn json(&self, model: &Model, dir: &Path, b: &TrainBench) -> serde_json::Value {
        let cpu_tps = self.cpu.tokens_per_s;
        let gpu = match &self.gpu {
            Ok((g, profile)) => json!({
                "device": g.device, "tokens_per_s": g.tokens_per_s, "gpu_over_cpu": g.tokens_per_s / cpu_tps,
                "max_loss_difference": g.max_loss_difference, "profile": profile.as_ref().map(StepProfile::json),
                "loop_guard": attnlab_gpu::shaders::loop_guard(), "split_k": attnlab_gpu::train::split_k(),
            }),
            Err(e) => json!({ "error": e }),
        };
        let cfg = model.config();
        json!({
            "model": { "path": dir.display().to_string(), "name": cfg.name, "params": model.weights().num_params() },
            "batch": b.batch, "seq_len": b.seq_len, "steps": b.steps,
            "cpu": { "device": self.cpu.device, "tokens_per_s": cpu_tps },
            "cpu_library_ops": {
                "device": self.library.device, "tokens_per_s": self.library.tokens_per_s,
                "over_fused": self.library.tokens_per_s / cpu_tps,
                "max_loss_difference": self.library.max_loss_difference,
            },
            "gpu": gpu,
            "gradient_error_vs_f64": self.accuracy.as_ref().map(|[f, c]| json!({
                "fused": f.json(), "composite": c.json(),
            })),
        })
    }

    /// The table of the three trainers (tokens/s, ratio to candle, loss difference) and the GPU
    /// step's profile when asked for.
    fn text(&self, model: &Model, b: &TrainBench) -> String {
        let cpu_tps = self.cpu.tokens_per_s;
        let row = |t: &Timed| {
            vec![
                t.device.clone(),
                format!("{:.0}", t.tokens_per_s),
                format!("{:.2}", t.tokens_per_s / cpu_tps),
                t.max_loss_difference.map_or(String::new(), |d| format!("{d:.1e}")),
            ]
        };
        let mut rows = vec![row(&self.cpu), row(&self.library)];
        let mut profile_text = String::new();
        match &self.gpu {
            Ok((g, profile)) => {
                rows.push(row(g));
                profile_text = profile.as_ref().map(StepProfile::table).unwrap_or_default();
            }
            Err(e) => rows.push(vec!["GPU".into(), "—".into(), "—".into(), e.clone()]),
        }
        format!(
            "training steps of `{}` ({} parameters), batch {} × {} tokens, median of {} steps\n{}",
            model.config().name,
            model.weights().num_params(),
            b.batch,
            b.seq_len,
            b.steps,
            table(&["device", "tokens/s", "÷ CPU", "max |Δ loss|"], &rows, &[0, 3])
        ) + &self.accuracy_text()
            + &profile_text
    }

    /// The --train-accuracy line (empty without it).
    fn accuracy_text(&self) -> String {
        self.accuracy.as_ref().map_or(String::new(), |[f, c]| {
            let path = |a: &Accuracy| {
                let (worst, tensor) = a.worst();
                format!("median {:.2e}, worst {worst:.2e} ({tensor})", a.median())
            };
            format!(
                "\ngradients against f64 on {} batches, worst tensor's relative L2 error per batch: fused {}; \
                 composite {}\n",
                f.0.len(),
                path(f),
                path(c)
            )
        })
    }
}
