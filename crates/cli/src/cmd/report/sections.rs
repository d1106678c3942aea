//! The sections of docs/results.md, in the order `render` writes them: perplexity against length,
//! loss against position, the slope edit, LAA, gates, speed and memory against length (TransNormer
//! Table 7), the claims (in `claims`), training cost and the English check.

use super::{
    num, r3, stats, BenchPoint, Context, ModelResult, PROMPTS, SAMPLE_TOKENS, TABLE7_MODELS, TEMPERATURE,
};
use crate::svg::{histogram_grid, HistPanel, LineChart, Scale, Series};
use attnlab_core::analysis::{self, PplPoint};
use attnlab_train::trainer::TrainDevice;
use std::fmt::Write as _;

impl Context<'_> {
    fn section_speed(&self, md: &mut String) {
        let _ = writeln!(
            md,
            "## 6. Speed and memory against length (TransNormer Table 7 shape)\n\n\
             From `attnlab bench` (CPU, release build, one thread each; files in `{}`): prefill tokens/s of a whole \
             context, decode tokens/s of single steps at that context, and the decode state (KV cache or recurrent \
             state) in bytes. Reproduce: `attnlab bench --model www/models/NAME --contexts 512,1024,2048,4096 --out \
             docs/results/bench/NAME.json` for {}.\n",
            self.bench.1.as_ref().map_or("–".into(), |d| d.display().to_string()),
            TABLE7_MODELS.map(|m| format!("`{m}`")).join(", ")
        );
        if self.bench.0.is_empty() {
            md.push_str("No bench files: not measured.\n\n");
            return;
        }
        md.push_str(
            "| model | context | prefill tok/s | decode tok/s | state bytes |\n|---|---:|---:|---:|---:|\n",
        );
        for (name, points) in &self.bench.0 {
            for (c, pre, dec, state) in points {
                let _ = writeln!(md, "| `{name}` | {c} | {pre:.0} | {dec:.0} | {state:.0} |");
            }
        }
        md.push('\n');
    }

    /// (shortest, longest) bench point of `name`.
    pub(super) fn bench_ends(&self, name: &str) -> Option<(BenchPoint, BenchPoint)> {
        let points = &self.bench.0.iter().find(|(n, _)| n == name)?.1;
        Some((*points.iter().min_by_key(|p| p.0)?, *points.iter().max_by_key(|p| p.0)?))
    }

    /// The models whose configs predate a fix of the code (read off each config).
    fn section_notes(&self, md: &mut String) {
        let noted: Vec<&ModelResult> = self.results.iter().filter(|r| !r.notes.is_empty()).collect();
        if noted.is_empty() {
            return;
        }
        md.push_str(
            "**Models trained before a fix.** These shipped models load and run exactly as trained, but their configs \
             differ from what the code now builds for their variant; their rows will change when they are retrained:\n\n",
        );
        for r in noted {
            let _ = writeln!(md, "- `{}`: {}.", r.name, r.notes.join("; "));
        }
        md.push('\n');
    }

    /// Tokens scored at every length (the first model's; all models share the tokenizer).
    fn eval_tokens(&self) -> usize {
        self.results.first().and_then(|r| r.ppl.first()).map_or(0, |p| p.windows * p.length)
    }

    /// Mean loss over positions `first..=last` of `name`'s windows at `len` (its seeds averaged),
    /// from the position bins (which double from 1, so these ranges are unions of bins).
    fn position_loss(&self, name: &str, len: usize, first: usize, last: usize) -> Option<f64> {
        self.seed_mean(name, |r| {
            let bins = &r.scores.iter().find(|s| s.length == len)?.position_nll;
            let inside: Vec<_> = bins.iter().filter(|(lo, hi, _)| *lo >= first && *hi <= last).collect();
            let count: usize = inside.iter().map(|(lo, hi, _)| hi - lo + 1).sum();
            let total: f64 = inside.iter().map(|(lo, hi, l)| l * (hi - lo + 1) as f64).sum();
            (count > 0).then(|| total / count as f64)
        })
    }

    fn section_positions(&self, md: &mut String, plots: &mut Vec<(String, String)>) {
        let len = self.lengths.iter().max().copied().unwrap_or(self.train_len);
        let t = self.train_len.max(2);
        let _ = writeln!(
            md,
            "## 2. Loss versus position (extrapolation inside one window)\n\n\
             Mean loss (nats/token) by position inside the {len}-token windows of §1 (each window from an empty \
             state): the first column is the positions a model saw in training (1–{}), the others the octaves \
             beyond it. A model that extrapolates keeps its loss flat or falling past the training length; one \
             that does not rises there, which window perplexity averages away.\n",
            t - 1
        );
        let mut ranges = vec![(1, t - 1)];
        let mut lo = t;
        while lo < len {
            ranges.push((lo, (2 * lo - 1).min(len - 1)));
            lo *= 2;
        }
        let head: Vec<String> = ranges.iter().map(|(a, b)| format!("{a}–{b}")).collect();
        let _ = writeln!(md, "| model | {} |\n|---|{}", head.join(" | "), "---:|".repeat(ranges.len()));
        let mut series = Vec::new();
        for r in self.groups() {
            let cells: Vec<String> = ranges
                .iter()
                .map(|&(a, b)| self.position_loss(&r.name, len, a, b).map_or("–".into(), |v| num(v, 3)))
                .collect();
            let _ = writeln!(md, "| `{}` | {} |", r.name, cells.join(" | "));
            let Some(score) = r.scores.iter().find(|s| s.length == len) else { continue };
            let points = score.position_nll.iter().filter_map(|&(a, b, _)| {
                Some((((a * b) as f64).sqrt(), self.position_loss(&r.name, len, a, b)?))
            });
            series.push(Series {
                name: r.name.clone(),
                points: points.collect(),
                dashed: r.family.contains("linear"),
            });
        }
        md.push('\n');
        let chart = LineChart {
            title: "Loss vs position inside a window",
            x_label: "position (tokens, log scale)",
            y_label: "mean loss (nats/token)",
            x_scale: Scale::Log2,
            y_scale: Scale::Linear,
            y_range: None,
            series,
            marker: Some((t as f64, "train length")),
        };
        plots.push(("positions.svg".into(), chart.render(860.0, 480.0)));
        let _ = writeln!(md, "![loss vs position]({}/positions.svg)\n", self.plots);
    }

    pub(super) fn render(&self) -> (String, Vec<(String, String)>) {
        let mut md = String::new();
        let mut plots = Vec::new();
        let p = self.plots;
        let _ = writeln!(
            md,
            "# Results\n\n_Generated by `attnlab report` from the models in `{}` (listed in its index.json){} — do not edit by hand; \
             rerun the command. Raw numbers: [{p}/results.json]({p}/results.json)._\n\n\
             Every model has the default model's size preset ({}) and was trained on the Brown corpus train \
             split (`scripts/train_shipped.sh`); {} {} The report took {:.0} s with {} threads on this machine{}.\n\n\
             **Statistics.** A difference between two models is Δ = ln ppl(A) − ln ppl(B), the mean difference of \
             their losses in nats per token on the same tokens, with a 95 % paired bootstrap interval: the scored \
             windows are grouped into blocks of at least {} tokens (at least {} blocks per interval), and {} resamples draw seed pairs (seed k of A \
             with seed k of B), then blocks, with replacement (fixed resampling seed). Each claim's verdict is \
             **holds** (the whole interval satisfies the rule), **does not hold** (none of it does), **inconclusive** \
             (the interval straddles the threshold) or **not tested** (with the reason).\n",
            self.args.models.display(),
            self.seeds.map_or(String::new(), |(dir, _)| format!(
                " and the extra seeds in `{}` (measured here, not shipped to the page)",
                dir.display()
            )),
            self.size,
            self.setup_sentence(),
            self.seed_sentence(),
            self.seconds,
            self.args.threads,
            self.reuse_phrase(),
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

    /// How many models' measurements came from the cache (empty when none did).
    fn reuse_phrase(&self) -> String {
        match (self.reused, &self.args.cache) {
            (0, _) | (_, None) => String::new(),
            (n, Some(dir)) => format!(
                "; {n} of the {} models were measured by an earlier run and reused from `{}` (same files, \
                 tokenizer, text, word list, settings and measuring code)",
                self.results.len(),
                dir.display()
            ),
        }
    }

    /// The header's sentence on seeds.
    fn seed_sentence(&self) -> String {
        match self.seed_counts() {
            (1, 1) => "One seed per model (`NAME-seedK` folders, in the index or in --seeds, would add seeds): the intervals below cover \
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
        let series =
            self.trained().map(|r| ppl_series(&r.name, &r.ppl, r.family.contains("linear"))).collect();
        let chart = self.ppl_chart("Test perplexity vs context length", series);
        plots.push(("ppl.svg".into(), chart.render(860.0, 480.0)));
        let _ = writeln!(md, "![perplexity vs length]({}/ppl.svg)\n", self.plots);
    }

    /// Perplexity (log) against context length (log₂), the training length marked.
    fn ppl_chart<'a>(&self, title: &'a str, series: Vec<Series>) -> LineChart<'a> {
        LineChart {
            title,
            x_label: "context length (tokens)",
            y_label: "perplexity (log scale)",
            x_scale: Scale::Log2,
            y_scale: Scale::Log10,
            y_range: None,
            series,
            marker: Some((self.train_len as f64, "train length")),
        }
    }

    /// MEP Table 4 retrains ALiBi with one slope 2^-h on every head at L_train = 512; at this
    /// report's training length L, with slope × L_train constant, the paper's h becomes
    /// h − log2(512 / L) (h = 2, 9 → 0, 7 at L = 128): the K of the retrained `alibi-hK`.
    pub(super) fn table4_slope(&self, paper_h: i64) -> i64 {
        let shift = (512.0 / self.train_len.max(1) as f64).log2().round() as i64;
        (paper_h - shift).max(0)
    }

    /// How the paper's h = 2 and 9 map to this training length, for the section's text.
    fn table4_rescaling(&self) -> String {
        match self.table4_slope(9) {
            9 => "the paper's own setting at L = 512, so K = h".to_string(),
            k9 => format!(
                "slope × length constant rescales the paper's h = 2 and 9 at L = 512 to K = {} and {k9} at {}",
                self.table4_slope(2),
                self.train_len
            ),
        }
    }

    fn section_slopes(&self, md: &mut String, plots: &mut Vec<(String, String)>) {
        let _ = writeln!(
            md,
            "## 3. Slope ablation on the alibi model (MEP Table 4 style)\n\n\
             **Inference-only:** the trained `alibi` model is evaluated with its slopes replaced — every head's slope set \
             to 2^-2, 2^-6 or 2^-9 (\"h = 2, 6, 9\" in the paper's notation), next to the default geometric set it was \
             trained with. MEP's Table 4 **retrains** a model for each slope setting ({}), so these numbers mix the \
             effect of the slopes with the mismatch between trained weights and edited biases: an observation, not a \
             test of Table 4. The claims of §7 test Table 4 on retrained models `alibi-hK` (every head's slope 2^-K) \
             when the index has them.\n",
            self.table4_rescaling()
        );
        if self.slopes.is_empty() {
            md.push_str("No `alibi` model in the index: not measured.\n\n");
            return;
        }
        let rows: Vec<(String, Vec<&[PplPoint]>)> =
            self.slopes.iter().map(|s| (s.preset.clone(), vec![s.ppl.as_slice()])).collect();
        self.ppl_table(md, &rows);
        let series = self.slopes.iter().map(|s| ppl_series(&s.preset, &s.ppl, false)).collect();
        let chart = self.ppl_chart("alibi: slopes replaced at inference", series);
        plots.push(("slopes.svg".into(), chart.render(760.0, 420.0)));
        let _ = writeln!(md, "![slope ablation]({}/slopes.svg)\n", self.plots);
        let _ = writeln!(
            md,
            "**Retrained (MEP Table 4 proper):** one model per slope setting, every head at 2^-K, trained like `alibi` \
             ({}). The paper: uniform h = 9 destroys extrapolation, uniform h = 2 is worse than the default set at \
             short lengths.\n",
            self.table4_rescaling()
        );
        let (k2, k9) = (self.table4_slope(2), self.table4_slope(9));
        let (h2, h9) = (format!("alibi-h{k2}"), format!("alibi-h{k9}"));
        let (w2, w9) = (format!("2^-{k2} on every head"), format!("2^-{k9} on every head"));
        self.retrained_table(md, &[("alibi", "geometric slopes"), (&h2, &w2), (&h9, &w9)]);
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
        self.laa_table(md, uniform_l.auc, uniform.auc);
        self.laa_chart(md, plots, &uniform.curve);
    }

    /// Section 4's table: LAA area per layer at the training length `l`, and the mean at `n`.
    fn laa_table(&self, md: &mut String, uniform_at_l: f64, uniform_at_n: f64) {
        let (n, l) = (self.args.trace_tokens, self.train_len);
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
            num(uniform_at_l, 3),
            num(uniform_at_n, 3)
        );
    }

    /// Section 4's chart: the first and last layer's LAA curves of alibi, linear-elu and
    /// transnormer beside uniform attention's.
    fn laa_chart(&self, md: &mut String, plots: &mut Vec<(String, String)>, uniform: &[f64]) {
        // A curve sampled at r = k / (len − 1).
        let points = |curve: &[f64]| -> Vec<(f64, f64)> {
            curve.iter().enumerate().map(|(k, v)| (k as f64 / (curve.len() - 1) as f64, *v)).collect()
        };
        let mut series = Vec::new();
        for name in ["alibi", "linear-elu", "transnormer"] {
            if let Some(r) = self.get(name) {
                let last = r.laa_curves.len().saturating_sub(1);
                for (layer, curve) in r.laa_curves.iter().enumerate().filter(|(l, _)| *l == 0 || *l == last) {
                    series.push(Series {
                        name: format!("{name} L{layer}"),
                        points: points(curve),
                        dashed: layer != 0,
                    });
                }
            }
        }
        series.push(Series { name: "uniform".into(), points: points(uniform), dashed: true });
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
        let gated: Vec<_> = ["gla-fig4-init", "gla-fig4", "regla-fig4-init", "regla-fig4", "gla", "regla"]
            .into_iter()
            .filter_map(|name| self.get(name).and_then(|r| Some((name, r, r.gates_all.as_ref()?))))
            .collect();
        if gated.is_empty() {
            md.push_str("No gated model of this list in the index: not measured.\n\n");
            return;
        }
        let _ = writeln!(
            md,
            "| model | saturation (all layers) | mean F | per-layer saturation |\n|---|---:|---:|---|"
        );
        let mut panels = Vec::new();
        for (name, r, all) in gated {
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

    fn section_training(&self, md: &mut String, plots: &mut Vec<(String, String)>) {
        let _ = writeln!(
            md,
            "## 8. Training cost\n\nFrom each model's history.json (`attnlab train`, release build). \
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
        let seeds = self.seeds.map(|(_, s)| s.models.as_slice()).unwrap_or_default();
        for m in self.index.models.iter().chain(seeds) {
            let _ = writeln!(md, "| `{}` | {} | {} |", m.name, m.family, m.description);
        }
        md.push('\n');
    }
}

/// One model's (or slope setting's) perplexity against context length.
fn ppl_series(name: &str, ppl: &[PplPoint], dashed: bool) -> Series {
    Series { name: name.to_string(), points: ppl.iter().map(|p| (p.length as f64, p.ppl)).collect(), dashed }
}
