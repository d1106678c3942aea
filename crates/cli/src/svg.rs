//! Small static SVG charts for `attnlab report` (docs/results/*.svg): line charts with optional log
//! axes, and histogram panels. Self-contained markup (no scripts, no external fonts or links).

use std::fmt::Write;

/// Colours of successive series (Tableau 10, readable on white, distinct for colour-blind readers
/// in the first few entries).
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
    "#bab0ac",
];

/// Colour of series `i` (the palette repeats with dashes from the 11th series on).
pub fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// One line of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed line (reference curves, baselines).
    pub dashed: bool,
}

/// Axis scale.
#[derive(Clone, Copy, PartialEq)]
pub enum Scale {
    Linear,
    /// Base-2 log (context lengths).
    Log2,
    /// Base-10 log (perplexities).
    Log10,
}

/// A line chart.
pub struct LineChart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub x_scale: Scale,
    pub y_scale: Scale,
    /// Fixed y range; `None` fits the data.
    pub y_range: Option<(f64, f64)>,
    pub series: Vec<Series>,
    /// Vertical marker (e.g. the training length) with its label.
    pub marker: Option<(f64, &'a str)>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn fwd(scale: Scale, v: f64) -> f64 {
    match scale {
        Scale::Linear => v,
        Scale::Log2 => v.max(f64::MIN_POSITIVE).log2(),
        Scale::Log10 => v.max(f64::MIN_POSITIVE).log10(),
    }
}

/// Tick values for a range in data units.
fn ticks(scale: Scale, lo: f64, hi: f64) -> Vec<f64> {
    match scale {
        Scale::Log2 => {
            let (a, b) = (lo.log2().floor() as i32, hi.log2().ceil() as i32);
            (a..=b).map(|e| 2f64.powi(e)).filter(|v| *v >= lo * 0.999 && *v <= hi * 1.001).collect()
        }
        Scale::Log10 => {
            let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
            let mut out = Vec::new();
            for e in a..=b {
                for m in [1.0, 2.0, 5.0] {
                    let v = m * 10f64.powi(e);
                    if v >= lo * 0.999 && v <= hi * 1.001 {
                        out.push(v);
                    }
                }
            }
            out
        }
        Scale::Linear => {
            let span = (hi - lo).max(1e-12);
            let raw = span / 5.0;
            let mag = 10f64.powf(raw.log10().floor());
            let step = [1.0, 2.0, 2.5, 5.0, 10.0]
                .iter()
                .map(|m| m * mag)
                .find(|s| span / s <= 6.0)
                .unwrap_or(mag * 10.0);
            let first = (lo / step).ceil() as i64;
            let last = (hi / step).floor() as i64;
            (first..=last).map(|k| k as f64 * step).collect()
        }
    }
}

fn tick_label(v: f64) -> String {
    if v.abs() >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Data value of a position on a scale's axis (the inverse of `fwd`).
fn inv(scale: Scale, f: f64) -> f64 {
    match scale {
        Scale::Linear => f,
        Scale::Log2 => 2f64.powf(f),
        Scale::Log10 => 10f64.powf(f),
    }
}

/// The plot area in pixels and the axis ranges (in scale units) that map onto it.
struct Frame {
    left: f64,
    top: f64,
    pw: f64,
    ph: f64,
    x_scale: Scale,
    y_scale: Scale,
    fx: (f64, f64),
    fy: (f64, f64),
}

impl Frame {
    fn sx(&self, x: f64) -> f64 {
        self.left + (fwd(self.x_scale, x) - self.fx.0) / (self.fx.1 - self.fx.0) * self.pw
    }

    /// Pixel row of `y` (clamped to the plot area).
    fn sy(&self, y: f64) -> f64 {
        let f = fwd(self.y_scale, y).clamp(self.fy.0, self.fy.1);
        self.top + self.ph - (f - self.fy.0) / (self.fy.1 - self.fy.0) * self.ph
    }
}

impl LineChart<'_> {
    /// The chart as an SVG document of `width` × `height` pixels (legend on the right).
    pub fn render(&self, width: f64, height: f64) -> String {
        let (left, right, top, bottom) = (64.0, 190.0, 36.0, 48.0);
        let (pw, ph) = (width - left - right, height - top - bottom);
        let ((x0, x1), (y0, y1)) = self.data_ranges();
        let (fy0, fy1) = (fwd(self.y_scale, y0), fwd(self.y_scale, y1));
        let pad = (fy1 - fy0) * 0.04;
        let fy = if self.y_range.is_some() { (fy0, fy1) } else { (fy0 - pad, fy1 + pad) };
        let fx = (fwd(self.x_scale, x0), fwd(self.x_scale, x1));
        let f = Frame { left, top, pw, ph, x_scale: self.x_scale, y_scale: self.y_scale, fx, fy };
        let mut s = String::new();
        let _ = write!(
            s,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#fff"/>
<text x="{}" y="20" font-size="14" font-weight="bold">{}</text>
"##,
            left,
            esc(self.title)
        );
        self.write_grid(&mut s, &f, (x0, x1));
        let _ = writeln!(
            s,
            r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>
<text x="{}" y="{}" text-anchor="middle">{}</text>
<text transform="translate(16 {}) rotate(-90)" text-anchor="middle">{}</text>"##,
            left + pw / 2.0,
            height - 10.0,
            esc(self.x_label),
            top + ph / 2.0,
            esc(self.y_label)
        );
        if let Some((mx, label)) = self.marker.filter(|&(mx, _)| mx >= x0 && mx <= x1) {
            let x = f.sx(mx);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{}" stroke="#555" stroke-dasharray="2 3"/><text x="{:.1}" y="{}" fill="#555">{}</text>"##,
                top + ph,
                x + 4.0,
                top + 12.0,
                esc(label)
            );
        }
        for (i, ser) in self.series.iter().enumerate() {
            write_series(&mut s, &f, i, ser);
        }
        s.push_str("</svg>\n");
        s
    }

    /// The x and y ranges in data units: the finite points' extent (y replaced by `y_range` when
    /// set), never empty.
    fn data_ranges(&self) -> ((f64, f64), (f64, f64)) {
        let pts =
            self.series.iter().flat_map(|s| s.points.iter()).filter(|(x, y)| x.is_finite() && y.is_finite());
        let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in pts {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
        if x0 > x1 {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if let Some((a, b)) = self.y_range {
            (y0, y1) = (a, b);
        }
        if y1 <= y0 {
            y1 = y0 + 1.0;
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        ((x0, x1), (y0, y1))
    }

    /// Horizontal grid lines with y tick labels, then vertical ones with x tick labels.
    fn write_grid(&self, s: &mut String, f: &Frame, (x0, x1): (f64, f64)) {
        let (left, top, pw, ph) = (f.left, f.top, f.pw, f.ph);
        for t in ticks(self.y_scale, inv(self.y_scale, f.fy.0), inv(self.y_scale, f.fy.1)) {
            let y = f.sy(t);
            let _ = writeln!(
                s,
                r##"<line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                left + pw,
                left - 6.0,
                y + 4.0,
                tick_label(t)
            );
        }
        for t in ticks(self.x_scale, x0, x1) {
            let x = f.sx(t);
            let _ = writeln!(
                s,
                r##"<line x1="{x:.1}" x2="{x:.1}" y1="{top}" y2="{}" stroke="#e4e4e4"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
                top + ph,
                top + ph + 16.0,
                tick_label(t)
            );
        }
    }
}

/// Series `i`: its polyline (dots when it has at most 12 points) and its legend entry.
fn write_series(s: &mut String, f: &Frame, i: usize, ser: &Series) {
    let path: Vec<String> = ser
        .points
        .iter()
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .map(|&(x, y)| format!("{:.1},{:.1}", f.sx(x), f.sy(y)))
        .collect();
    let dash = if ser.dashed || i >= PALETTE.len() { r#" stroke-dasharray="6 4""# } else { "" };
    let c = color(i);
    let _ = writeln!(
        s,
        r##"<polyline fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"><title>{}</title></polyline>"##,
        path.join(" "),
        esc(&ser.name)
    );
    if ser.points.len() <= 12 {
        for p in &path {
            let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(s, r##"<circle cx="{x}" cy="{y}" r="2.5" fill="{c}"/>"##);
        }
    }
    let ly = f.top + 8.0 + i as f64 * 17.0;
    let lx = f.left + f.pw + 14.0;
    let _ = writeln!(
        s,
        r##"<line x1="{lx}" x2="{}" y1="{ly}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"##,
        lx + 22.0,
        lx + 28.0,
        ly + 4.0,
        esc(&ser.name)
    );
}

/// One histogram panel: bin heights as densities on [0, 1].
pub struct HistPanel {
    pub title: String,
    pub density: Vec<f64>,
    /// Second line under the title (e.g. the saturation fraction).
    pub subtitle: String,
}

/// Histogram panels in a grid of `cols` columns sharing one y scale (ReGLA Fig. 4 layout).
pub fn histogram_grid(title: &str, x_label: &str, panels: &[HistPanel], cols: usize) -> String {
    let cols = cols.max(1);
    let rows = panels.len().div_ceil(cols).max(1);
    let (pw, ph, gap) = (300.0, 170.0, 56.0);
    let width = 40.0 + cols as f64 * (pw + gap);
    let height = 40.0 + rows as f64 * (ph + gap + 24.0);
    let ymax = panels.iter().flat_map(|p| p.density.iter()).fold(0.0f64, |m, v| m.max(*v)).max(1e-9);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#fff"/>
<text x="20" y="22" font-size="14" font-weight="bold">{}</text>"##,
        esc(title)
    );
    for (k, p) in panels.iter().enumerate() {
        let (c, r) = (k % cols, k / cols);
        let x0 = 40.0 + c as f64 * (pw + gap);
        let y0 = 60.0 + r as f64 * (ph + gap + 24.0);
        let _ = writeln!(
            s,
            r##"<text x="{x0}" y="{}" font-weight="bold">{}</text><text x="{x0}" y="{}" fill="#555">{}</text>
<rect x="{x0}" y="{y0}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>"##,
            y0 - 20.0,
            esc(&p.title),
            y0 - 6.0,
            esc(&p.subtitle)
        );
        let n = p.density.len().max(1);
        let bw = pw / n as f64;
        for (i, d) in p.density.iter().enumerate() {
            let h = d / ymax * (ph - 4.0);
            let _ = writeln!(
                s,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{}"><title>[{:.2}, {:.2}): {d:.3}</title></rect>"##,
                x0 + i as f64 * bw + 0.5,
                y0 + ph - h,
                (bw - 1.0).max(0.5),
                color(k / 2),
                i as f64 / n as f64,
                (i + 1) as f64 / n as f64
            );
        }
        for t in [0.0, 0.5, 1.0] {
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{}" text-anchor="middle">{t}</text>"##,
                x0 + t * pw,
                y0 + ph + 14.0
            );
        }
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{}" text-anchor="middle" fill="#555">{}</text>"##,
            x0 + pw / 2.0,
            y0 + ph + 30.0,
            esc(x_label)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_chart_places_points_monotonically_and_escapes_text() {
        let chart = LineChart {
            title: "ppl <&>",
            x_label: "length",
            y_label: "ppl",
            x_scale: Scale::Log2,
            y_scale: Scale::Log10,
            y_range: None,
            series: vec![Series {
                name: "a&b".into(),
                points: vec![(128.0, 50.0), (256.0, 60.0), (4096.0, 900.0)],
                dashed: false,
            }],
            marker: Some((128.0, "train")),
        };
        let svg = chart.render(700.0, 400.0);
        assert!(svg.contains("ppl &lt;&amp;&gt;") && svg.contains("a&amp;b"));
        let line = svg.lines().find(|l| l.starts_with("<polyline")).unwrap();
        let pts: Vec<(f64, f64)> = line
            .split("points=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .split(' ')
            .map(|p| {
                let (x, y) = p.split_once(',').unwrap();
                (x.parse().unwrap(), y.parse().unwrap())
            })
            .collect();
        // Log2 x: 128 → 256 is one step, 256 → 4096 four; higher ppl is higher up (smaller y).
        let step = pts[1].0 - pts[0].0;
        assert!((pts[2].0 - pts[1].0 - 4.0 * step).abs() < 0.5, "{pts:?}");
        assert!(pts[0].1 > pts[1].1 && pts[1].1 > pts[2].1, "{pts:?}");
    }

    #[test]
    fn ticks_cover_ranges() {
        assert_eq!(ticks(Scale::Log2, 128.0, 4096.0), vec![128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0]);
        assert_eq!(ticks(Scale::Log10, 40.0, 600.0), vec![50.0, 100.0, 200.0, 500.0]);
        assert_eq!(ticks(Scale::Linear, 0.0, 1.0), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
    }

    #[test]
    fn histogram_bars_scale_to_the_tallest_panel() {
        let panels = vec![
            HistPanel { title: "before".into(), density: vec![4.0, 0.0, 0.0, 4.0], subtitle: String::new() },
            HistPanel { title: "after".into(), density: vec![1.0, 2.0, 1.0, 0.0], subtitle: String::new() },
        ];
        let svg = histogram_grid("gates", "F", &panels, 2);
        assert_eq!(svg.matches("<title>[").count(), 8);
        assert!(svg.contains("height=\"166.0\""), "the tallest bar fills the panel");
    }
}
