//! The shipped results table (`docs/results/results.json`, written by `attnlab report`; attnlab-site copies
//! it next to the page as `results.json`): every shipped model's perplexity at 1×…32× the training
//! length, drawn behind the in-browser curve of the extrapolation view. Only the fields the page
//! plots are read; the rest of the file is ignored. Plain Rust: compiled and tested natively.

use serde::Deserialize;

/// URL of the table, relative to the page.
pub const RESULTS_URL: &str = "results.json";

/// One shipped model's perplexity curve.
#[derive(Debug, Clone, PartialEq)]
pub struct ShippedCurve {
    pub name: String,
    pub family: String,
    /// `(context length, perplexity)`, by increasing length.
    pub points: Vec<(usize, f64)>,
    /// The training schedule's token budget (None when the table does not say): the shipped set may
    /// mix budgets while it is being retrained.
    pub budget: Option<u64>,
    /// An extra seed of a shipped model, measured by the report but not shipped to the page.
    pub extra_seed: bool,
}

impl ShippedCurve {
    /// The curve's legend label: `shipped: alibi · 22.5M tokens` (`extra seed: alibi-seed1 · …`).
    pub fn label(&self) -> String {
        let kind = if self.extra_seed { "extra seed" } else { "shipped" };
        match self.budget {
            Some(b) if b >= 1_000_000 => format!("{kind}: {} · {:.1}M tokens", self.name, b as f64 / 1e6),
            Some(b) => format!("{kind}: {} · {:.1}k tokens", self.name, b as f64 / 1e3),
            None => format!("{kind}: {}", self.name),
        }
    }
}

#[derive(Deserialize)]
struct Table {
    models: Vec<ModelRow>,
}

#[derive(Deserialize)]
struct ModelRow {
    name: String,
    #[serde(default)]
    family: String,
    #[serde(default)]
    ppl: Vec<PplRow>,
    #[serde(default)]
    training: Option<TrainingRow>,
    #[serde(default)]
    extra_seed: bool,
}

#[derive(Deserialize)]
struct TrainingRow {
    budget: Option<u64>,
}

#[derive(Deserialize)]
struct PplRow {
    length: usize,
    ppl: f64,
}

/// Parse the table: one curve per model that has perplexity rows (non-finite values dropped).
pub fn parse(text: &str) -> Result<Vec<ShippedCurve>, String> {
    let table: Table =
        serde_json::from_str(text).map_err(|e| format!("{RESULTS_URL} is not a results table: {e}"))?;
    let curves: Vec<ShippedCurve> = table
        .models
        .into_iter()
        .map(|m| {
            let mut points: Vec<(usize, f64)> = m
                .ppl
                .iter()
                .filter(|r| r.ppl.is_finite() && r.length > 0)
                .map(|r| (r.length, r.ppl))
                .collect();
            points.sort_by_key(|p| p.0);
            let budget = m.training.and_then(|t| t.budget);
            ShippedCurve { name: m.name, family: m.family, points, budget, extra_seed: m.extra_seed }
        })
        .filter(|c| !c.points.is_empty())
        .collect();
    if curves.is_empty() {
        return Err(format!("{RESULTS_URL} lists no perplexity curve"));
    }
    Ok(curves)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_parses() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/results/results.json");
        let text = std::fs::read_to_string(path).expect("docs/results/results.json");
        let curves = parse(&text).expect("parses");
        assert!(curves.len() >= 2, "{} curves", curves.len());
        for c in &curves {
            assert!(!c.name.is_empty());
            assert!(c.points.windows(2).all(|w| w[0].0 < w[1].0), "{}: lengths increase", c.name);
            assert!(c.points.iter().all(|p| p.1 > 1.0), "{}: perplexities > 1", c.name);
        }
    }

    #[test]
    fn unknown_fields_are_ignored_and_bad_tables_are_messages() {
        let t = r#"{"lengths": [2, 1], "models": [
            {"name": "a", "family": "f", "params": 3, "ppl": [{"length": 2, "ppl": 5.5, "nll": 1}, {"length": 1, "ppl": 4.0}]},
            {"name": "c", "ppl": [{"length": 1, "ppl": 3.0}], "training": {"budget": 22528000, "steps": 11000}},
            {"name": "c-seed1", "ppl": [{"length": 1, "ppl": 3.1}], "training": {"budget": 2048}, "extra_seed": true},
            {"name": "b", "ppl": []}]}"#;
        let curves = parse(t).expect("parses");
        assert_eq!(
            curves,
            vec![
                ShippedCurve {
                    name: "a".into(),
                    family: "f".into(),
                    points: vec![(1, 4.0), (2, 5.5)],
                    budget: None,
                    extra_seed: false
                },
                ShippedCurve {
                    name: "c".into(),
                    family: String::new(),
                    points: vec![(1, 3.0)],
                    budget: Some(22528000),
                    extra_seed: false
                },
                ShippedCurve {
                    name: "c-seed1".into(),
                    family: String::new(),
                    points: vec![(1, 3.1)],
                    budget: Some(2048),
                    extra_seed: true
                }
            ]
        );
        assert_eq!(curves[0].label(), "shipped: a");
        assert_eq!(curves[1].label(), "shipped: c · 22.5M tokens");
        assert_eq!(curves[2].label(), "extra seed: c-seed1 · 2.0k tokens");
        for bad in ["", "{", "[]", r#"{"models": []}"#, r#"{"models": [{"name": "b"}]}"#] {
            assert!(parse(bad).unwrap_err().contains(RESULTS_URL), "{bad}");
        }
    }
}
