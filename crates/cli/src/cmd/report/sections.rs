//! Sections of `attnlab report` added with its statistics: models trained before a fix, loss
//! against position, and speed and memory against length (TransNormer Table 7).

use super::{num, BenchPoint, Context, ModelResult, TABLE7_MODELS};
use crate::svg::{LineChart, Scale, Series};
use std::fmt::Write as _;

impl Context<'_> {
    pub(super) fn section_speed(&self, md: &mut String) {
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
    pub(super) fn section_notes(&self, md: &mut String) {
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
    pub(super) fn eval_tokens(&self) -> usize {
        self.results.first().and_then(|r| r.ppl.first()).map_or(0, |p| p.windows * p.length)
    }

    /// Mean loss over positions `first..=last` of `name`'s windows at `len` (its seeds averaged),
    /// from the position bins (which double from 1, so these ranges are unions of bins).
    pub(super) fn position_loss(&self, name: &str, len: usize, first: usize, last: usize) -> Option<f64> {
        self.seed_mean(name, |r| {
            let bins = &r.scores.iter().find(|s| s.length == len)?.position_nll;
            let inside: Vec<_> = bins.iter().filter(|(lo, hi, _)| *lo >= first && *hi <= last).collect();
            let count: usize = inside.iter().map(|(lo, hi, _)| hi - lo + 1).sum();
            let total: f64 = inside.iter().map(|(lo, hi, l)| l * (hi - lo + 1) as f64).sum();
            (count > 0).then(|| total / count as f64)
        })
    }

    pub(super) fn section_positions(&self, md: &mut String, plots: &mut Vec<(String, String)>) {
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
}
