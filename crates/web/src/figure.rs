//! Exported figures: the caption (model, settings, attnlab version), the data as CSV and JSON, and
//! the heatmap as a standalone SVG around the canvas pixels the page painted. Plain Rust, compiled
//! and tested natively; the line charts are exported by their own renderer (`plot.rs`, export mode).

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::colors::Scale;
use crate::url_state::UrlState;

/// The attnlab version exported figures name.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Characters of the prompt quoted in a caption.
const PROMPT_CHARS: usize = 80;

/// The caption of a figure of `model` under the page's state: what produced it and with which
/// settings (two lines).
pub fn caption(model: &str, s: &UrlState) -> Vec<String> {
    let edit = s.edit();
    let mut bias = Vec::new();
    if edit.is_identity() {
        bias.push("as trained".to_string());
    }
    if edit.slope_scale != 1.0 {
        bias.push(format!("slope ×{}", edit.slope_scale));
    }
    if let Some(u) = edit.uniform_slope {
        bias.push(format!("uniform slope {u}"));
    }
    let mix = UrlState { mix: edit.mix, ..Default::default() }.query();
    if let Some(m) = mix.strip_prefix("?mix=") {
        bias.push(format!("kernel mix {m}"));
    }
    let prompt = s.prompt.as_deref().unwrap_or_default();
    let mut quoted: String = prompt.chars().take(PROMPT_CHARS).collect();
    if prompt.chars().count() > PROMPT_CHARS {
        quoted.push('…');
    }
    let opt = |v: Option<String>| v.unwrap_or_else(|| "default".to_string());
    let mut text = format!("text: prompt \"{}\"", quoted.replace(['\n', '\r'], " "));
    if let Some(n) = s.gen {
        let _ = write!(text, " + {n} generated tokens");
    }
    let _ = write!(
        text,
        " (seed {}, temperature {}, top-k {}, top-p {})",
        opt(s.seed.map(|v| v.to_string())),
        opt(s.temperature.map(|v| v.to_string())),
        opt(s.top_k.map(|v| v.to_string())),
        opt(s.top_p.map(|v| v.to_string()))
    );
    vec![format!("attnlab {VERSION} · model {model} · bias: {}", bias.join(", ")), text]
}

/// Quote a CSV field when it needs it.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Named `(x, y)` series (what a line chart draws).
pub type SeriesData<'a> = Vec<(&'a str, &'a [(f64, f64)])>;

/// Series as CSV: `series,<x>,<y>`, one row per point, numbers exactly as the chart has them.
pub fn series_csv(x_label: &str, y_label: &str, series: &SeriesData) -> String {
    let mut out = format!("series,{},{}\n", field(x_label), field(y_label));
    for (label, points) in series {
        for (x, y) in points.iter() {
            let _ = writeln!(out, "{},{x},{y}", field(label));
        }
    }
    out
}

/// Series as JSON, with the title, axis labels and caption.
pub fn series_json(
    title: &str,
    x_label: &str,
    y_label: &str,
    caption: &[String],
    series: &SeriesData,
) -> String {
    let series: Vec<Value> = series
        .iter()
        .map(|(label, points)| {
            json!({ "label": label, "x": points.iter().map(|p| p.0).collect::<Vec<_>>(),
                    "y": points.iter().map(|p| p.1).collect::<Vec<_>>() })
        })
        .collect();
    let v = json!({ "title": title, "x_label": x_label, "y_label": y_label, "caption": caption,
                    "attnlab": VERSION, "series": series });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// A heatmap's matrix (`[n, n]`, row = query) as JSON: token labels, rows with `null` for the
/// masked (future) keys, title and caption.
pub fn matrix_json(
    title: &str,
    value_name: &str,
    caption: &[String],
    labels: &[String],
    matrix: &[f32],
    n: usize,
) -> String {
    // Each f32 as its shortest decimal (what the page shows), not as the f64 it widens to.
    let exact = |v: f32| v.to_string().parse::<f64>().ok();
    let rows: Vec<Vec<Option<f64>>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| (j <= i).then(|| matrix.get(i * n + j).copied().and_then(exact)).flatten())
                .collect()
        })
        .collect();
    let v = json!({ "title": title, "values": value_name, "caption": caption, "attnlab": VERSION,
                    "tokens": &labels[..n.min(labels.len())], "matrix": rows });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// `lines` broken at spaces into lines of at most `width` characters (a longer word stays whole).
pub fn wrap(lines: &[String], width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for line in lines {
        let mut cur = String::new();
        for word in line.split(' ') {
            if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
                out.push(std::mem::take(&mut cur));
            }
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
        out.push(cur);
    }
    out
}

/// Escape text for SVG (XML).
pub fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if (c as u32) < 0x20 && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The class of an exported figure's root `<svg>`: [`SVG_STYLE`] applies only under it, so the
/// figure drawn off screen for an export never restyles the page's own charts.
pub const EXPORT_CLASS: &str = "figure-export";

/// The style of exported SVG figures (what the page's stylesheet gives them on screen). Exports
/// keep dark text on a white background whatever the page's theme: they are paper figures.
pub const SVG_STYLE: &str = ".figure-export{color:#222}\
.figure-export text{font:11px ui-monospace,'SFMono-Regular',Menlo,Consolas,'DejaVu Sans Mono',monospace;fill:#222}\
.figure-export .chart-title{font-size:13px;font-weight:600}.figure-export .axis-label{fill:#555}\
.figure-export .grid{stroke:#ddd}.figure-export .marker line{stroke:#888}.figure-export .marker text{fill:#555}\
.figure-export .caption{font-size:10px;fill:#555}.figure-export.histogram text{font-size:9px}\
.figure-export.histogram .chart-title{font-size:10px}";

/// Width of one character of a chart's 11 px monospace text (0.6 em, rounded up).
pub const CHAR_W: f64 = 6.8;

/// A legend laid out in columns below a chart's axes (so that it never covers data).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LegendGrid {
    pub cols: usize,
    /// Width of a column: swatch, gap and the longest label.
    pub col_w: f64,
    pub rows: usize,
}

/// Swatch and gap before a legend label, and the space after it.
const LEGEND_SWATCH: f64 = 22.0;
const LEGEND_GAP: f64 = 14.0;

/// The columns of a legend of `labels` in `width` pixels: as many as the longest label allows
/// (one at least, four at most).
pub fn legend_grid(labels: &[&str], width: f64) -> LegendGrid {
    let longest = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let col_w = LEGEND_SWATCH + CHAR_W * longest as f64 + LEGEND_GAP;
    let cols = ((width / col_w).floor() as usize).clamp(1, 4).min(labels.len().max(1));
    LegendGrid { cols, col_w, rows: labels.len().div_ceil(cols) }
}

/// A histogram's bins over [0, 1] as CSV: `bin start,bin end,count`, one row per bin.
pub fn histogram_csv(counts: &[u64]) -> String {
    let n = counts.len().max(1) as f64;
    let mut out = "bin start,bin end,count\n".to_string();
    for (k, c) in counts.iter().enumerate() {
        let _ = writeln!(out, "{},{},{c}", k as f64 / n, (k + 1) as f64 / n);
    }
    out
}

/// A histogram as JSON: title, caption, bin edges and counts.
pub fn histogram_json(title: &str, caption: &[String], counts: &[u64]) -> String {
    let n = counts.len().max(1) as f64;
    let edges: Vec<f64> = (0..=counts.len()).map(|k| k as f64 / n).collect();
    let v = json!({ "title": title, "caption": caption, "attnlab": VERSION, "bin_edges": edges,
                    "counts": counts });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// A zoomed heatmap as a standalone SVG, with its width and height: the page's own canvas pixels
/// (`image`, a PNG data URL of the `n × n` canvas) scaled up without smoothing, with token axes,
/// the colorbar of `scale`, the title and the caption.
pub fn heatmap_svg(
    title: &str,
    value_name: &str,
    caption: &[String],
    labels: &[String],
    n: usize,
    scale: &Scale,
    image: &str,
) -> (String, f64, f64) {
    let (left, top, size) = (HEATMAP_LEFT, HEATMAP_TOP, HEATMAP_SIZE);
    // The masked swatch after the colorbar's high end and value name (never over them); the figure
    // widens when a long value name needs it.
    let hi_text = format!(" {:.3} {value_name}", scale.hi).chars().count() as f64;
    let swatch = (left + 206.0 + CHAR_W * hi_text + 8.0).max(left + 410.0);
    let w = (left + size + 70.0).max(swatch + 16.0 + CHAR_W * 6.0 + 10.0);
    let cb_top = top + size + 70.0;
    // 10 px monospace captions: about 6 px a character.
    let caption = wrap(caption, ((w - 20.0) / 6.0) as usize);
    let h = cb_top + 40.0 + 14.0 * caption.len() as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{EXPORT_CLASS}\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\
<style>{SVG_STYLE}</style><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\
<text class=\"chart-title\" x=\"{left}\" y=\"18\">{}</text>\
<image x=\"{left}\" y=\"{top}\" width=\"{size}\" height=\"{size}\" preserveAspectRatio=\"none\" \
style=\"image-rendering:pixelated\" href=\"{image}\"/>\
<rect x=\"{left}\" y=\"{top}\" width=\"{size}\" height=\"{size}\" fill=\"none\" stroke=\"#222\"/>",
        xml(title)
    );
    heatmap_axes(&mut s, labels, n);
    heatmap_colorbar(&mut s, scale, value_name, cb_top, swatch);
    for (k, line) in caption.iter().enumerate() {
        let _ = write!(
            s,
            "<text class=\"caption\" x=\"10\" y=\"{:.1}\">{}</text>",
            cb_top + 34.0 + 14.0 * k as f64,
            xml(line)
        );
    }
    s.push_str("</svg>");
    (s, w, h)
}

/// Left edge, top edge and side of the exported heatmap's square, in px.
const HEATMAP_LEFT: f64 = 130.0;
const HEATMAP_TOP: f64 = 30.0;
const HEATMAP_SIZE: f64 = 420.0;

/// Five token ticks on each axis of the `n × n` heatmap (index and token text), and the axis names.
fn heatmap_axes(s: &mut String, labels: &[String], n: usize) {
    let (left, top, size) = (HEATMAP_LEFT, HEATMAP_TOP, HEATMAP_SIZE);
    let cell = size / n.max(1) as f64;
    let mut ticks: Vec<usize> = if n <= 1 { vec![0] } else { (0..5).map(|t| t * (n - 1) / 4).collect() };
    ticks.dedup();
    for k in ticks {
        let p = (k as f64 + 0.5) * cell;
        let label = xml(&format!("{k} {}", labels.get(k).map(|l| l.trim()).unwrap_or_default()));
        let _ = write!(
            s,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>\
<text transform=\"translate({:.1} {}) rotate(-45)\" text-anchor=\"end\">{label}</text>",
            left - 6.0,
            top + p + 4.0,
            left + p,
            top + size + 12.0
        );
    }
    let _ = write!(
        s,
        "<text class=\"axis-label\" x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">key (token attended to)</text>\
<text class=\"axis-label\" transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\">query (token attending)</text>",
        left + size / 2.0,
        top + size + 58.0,
        top + size / 2.0
    );
}

/// The colorbar of `scale` at height `cb_top`: its gradient between the low and high values, the
/// value name, and the masked-cell swatch at `swatch`.
fn heatmap_colorbar(s: &mut String, scale: &Scale, value_name: &str, cb_top: f64, swatch: f64) {
    let left = HEATMAP_LEFT;
    let stops: String = scale
        .stops()
        .iter()
        .map(|(t, [r, g, b])| format!("<stop offset=\"{t}\" stop-color=\"rgb({r},{g},{b})\"/>"))
        .collect();
    let _ = write!(
        s,
        "<defs><linearGradient id=\"ramp\">{stops}</linearGradient></defs>\
<text x=\"{left}\" y=\"{:.1}\" text-anchor=\"end\">{:.3} </text>\
<rect x=\"{}\" y=\"{cb_top}\" width=\"200\" height=\"12\" fill=\"url(#ramp)\"/>\
<text x=\"{}\" y=\"{:.1}\"> {:.3} {}</text>\
<rect x=\"{swatch:.1}\" y=\"{cb_top}\" width=\"12\" height=\"12\" fill=\"rgb(154,154,160)\"/><text x=\"{:.1}\" y=\"{:.1}\">masked</text>",
        cb_top + 10.0,
        scale.lo,
        left + 4.0,
        left + 206.0,
        cb_top + 10.0,
        scale.hi,
        xml(value_name),
        swatch + 16.0,
        cb_top + 10.0
    );
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn the_caption_names_version_model_bias_and_settings() {
        let (s, _) = UrlState::parse(
            "?prompt=The+jury%0Asaid&seed=3&temperature=0.5&top_k=7&top_p=0.9&gen=12&slope=2&mix=exp:1:1",
        );
        let c = caption("alibi", &s);
        assert_eq!(c[0], format!("attnlab {VERSION} · model alibi · bias: slope ×2, kernel mix exp:1:1"));
        assert_eq!(c[1], "text: prompt \"The jury said\" + 12 generated tokens (seed 3, temperature 0.5, top-k 7, top-p 0.9)");
        let plain = caption("regla", &UrlState::default());
        assert!(plain[0].ends_with("bias: as trained") && plain[1].contains("seed default"), "{plain:?}");
        let long = UrlState { prompt: Some("x".repeat(200)), ..Default::default() };
        assert!(caption("m", &long)[1].contains(&format!("\"{}…\"", "x".repeat(PROMPT_CHARS))));
    }

    #[test]
    fn series_export_keeps_every_number_exactly() {
        let a = [(0.0, 0.1 + 0.2), (1.0, -0.001)];
        let b = [(2.0, 2.5)];
        let data: SeriesData = vec![("head 0", &a), ("a, \"b\"", &b)];
        let csv = series_csv("d", "B(d)", &data);
        assert_eq!(
            csv,
            "series,d,B(d)\nhead 0,0,0.30000000000000004\nhead 0,1,-0.001\n\"a, \"\"b\"\"\",2,2.5\n"
        );
        let v: Value = serde_json::from_str(&series_json("t", "d", "B", &["c".into()], &data)).expect("json");
        assert_eq!(v["series"][0]["y"][0].as_f64(), Some(0.1 + 0.2));
        assert_eq!(v["series"][0]["y"][1].as_f64(), Some(-0.001));
        assert_eq!(v["series"][1]["label"], "a, \"b\"");
        assert_eq!(v["attnlab"], VERSION);
    }

    #[test]
    fn legends_fit_their_width_in_columns() {
        let short = ["head 0", "head 1", "head 2", "head 3", "head 4"];
        let g = legend_grid(&short, 540.0);
        assert_eq!((g.cols, g.rows), (4, 2));
        assert!(g.col_w * g.cols as f64 <= 540.0);
        let long = ["uniform attention (AUC 0.784)", "layer 0 alibi (AUC 0.772)", "a", "b"];
        let g = legend_grid(&long, 540.0);
        assert_eq!((g.cols, g.rows), (2, 2), "{g:?}");
        assert!(g.col_w * g.cols as f64 <= 540.0 && g.col_w > CHAR_W * 29.0);
        // A label wider than the chart: one column, one row per label.
        assert_eq!(legend_grid(&["x".repeat(100).as_str(), "y"], 540.0).cols, 1);
        let one = legend_grid(&["one"], 540.0);
        assert_eq!((one.cols, one.rows), (1, 1));
        assert_eq!(legend_grid(&[], 540.0).rows, 0);
    }

    #[test]
    fn histogram_exports_hold_bins_and_counts() {
        let csv = histogram_csv(&[3, 0, 7, 1]);
        assert_eq!(csv, "bin start,bin end,count\n0,0.25,3\n0.25,0.5,0\n0.5,0.75,7\n0.75,1,1\n");
        let v: Value =
            serde_json::from_str(&histogram_json("layer 0 F", &["c".into()], &[3, 0, 7, 1])).expect("json");
        assert_eq!(v["counts"], json!([3, 0, 7, 1]));
        assert_eq!(v["bin_edges"], json!([0.0, 0.25, 0.5, 0.75, 1.0]));
        assert_eq!((v["title"].as_str(), v["attnlab"].as_str()), (Some("layer 0 F"), Some(VERSION)));
    }

    #[test]
    fn the_export_style_only_applies_to_exported_figures() {
        // Every rule is scoped under the export class (the off-screen figure must not restyle the page).
        for rule in SVG_STYLE.split('}').filter(|r| !r.is_empty()) {
            assert!(rule.starts_with(&format!(".{EXPORT_CLASS}")), "unscoped rule: {rule}");
        }
    }

    #[test]
    fn captions_wrap_at_spaces() {
        let w = wrap(&["aa bb cc".to_string(), "dddddd e".to_string()], 5);
        assert_eq!(w, vec!["aa bb", "cc", "dddddd", "e"]);
    }

    #[test]
    fn matrix_json_masks_future_keys() {
        let labels = vec!["a".to_string(), "b".to_string()];
        let text = matrix_json("t", "p", &[], &labels, &[1.0, 9.0, 0.1, 0.75], 2);
        let v: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(v["matrix"], json!([[1.0, null], [0.1, 0.75]]));
        assert!(
            text.contains("0.1,") && !text.contains("0.10000000149"),
            "f32 values as the page shows them: {text}"
        );
        assert_eq!(v["tokens"], json!(["a", "b"]));
    }

    #[test]
    fn the_heatmap_svg_is_well_formed_and_escaped() {
        let labels = vec!["<a>".to_string(), "&".to_string(), "c".to_string()];
        let (svg, w, h) = heatmap_svg(
            "L0 H1 \"x\"",
            "probability",
            &["cap & more".into()],
            &labels,
            3,
            &Scale::fit([0.0, 1.0].into_iter(), false),
            "data:image/png;base64,AAAA",
        );
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"") && svg.ends_with("</svg>"));
        assert!(
            svg.contains("L0 H1 &quot;x&quot;")
                && svg.contains("0 &lt;a&gt;")
                && svg.contains("cap &amp; more")
        );
        assert!(!svg.contains("<a>"));
        assert!(svg.contains(&format!("width=\"{w}\" height=\"{h}\"")));
        assert_eq!(svg.matches("<stop ").count(), 9);
        // A long value name pushes the masked swatch (and the figure's width) right.
        let long = "difference of signednormalized values";
        let (wide, w2, _) =
            heatmap_svg("t", long, &[], &labels, 3, &Scale::fit([0.0, 1.0].into_iter(), true), "x");
        let x: f64 = wide
            .split("<rect x=\"")
            .nth(3)
            .and_then(|r| r.split('"').next())
            .and_then(|v| v.parse().ok())
            .expect("swatch x");
        assert!(x >= 130.0 + 206.0 + CHAR_W * (long.len() + 7) as f64, "swatch at {x}");
        assert!(w2 >= x + 16.0 + CHAR_W * 6.0, "width {w2}");
        // Every opened element is closed (a crude well-formedness check; the e2e test parses it).
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    }
}
