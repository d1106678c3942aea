//! `attnlab analyze`: attention summaries, LAA curves and gate statistics of one forward pass.

use crate::common::{
    encode_text, load_tokenizer, num, out, print_json, read_text, spinner, table, to_value, CliError,
    CliResult, ModelArgs,
};
use attnlab_core::analysis;
use attnlab_core::config::ModelConfig;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;

/// Largest attention trace (all layers × heads × n × n f32) analyze will record.
const MAX_TRACE_BYTES: usize = 3 << 30;

/// Analyze attention on a text: entropy, attended distance, LAA curves and gate statistics.
///
/// Per layer and head: the row entropy, mean attended distance, weight on the token itself and on the
/// first token, locally accumulated attention (LAA) curves with their area
/// (AUC; higher = more local) next to the uniform-attention baseline, and gate statistics (F, and g, r
/// for ReGLA) of gated layers.
///
/// Linear-attention layers are analysed through their implied attention matrix (gates/decay applied,
/// rows normalised by Σ|row|, signs kept); the metrics use |A|.
#[derive(Debug, Clone, Args)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text to analyze [default: www/eval/heldout.txt when present]
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,
    /// Analyze the first N tokens of the text (at most the model's max_context)
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: u32,
    /// Histogram bins of the gate statistics on [0, 1]
    #[arg(long, value_name = "B", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub bins: u32,
}

pub fn run(a: AnalyzeArgs, json: bool) -> CliResult<()> {
    let (path, text) = read_text(a.text.as_deref())?;
    let model = a.model.load_any_backend()?;
    let tok = load_tokenizer(&a.model.dir(), &model)?;
    let tokens = encode_text(&tok, &text, &path)?;
    let n = tokens.len().min(a.max_tokens as usize);
    check_trace_size(model.config(), n)?;

    let mut engine = crate::gpu::Engine::new(&model, a.model.backend.backend)?;
    let pb = spinner(&format!("tracing {n} tokens"), json);
    let trace = engine.trace(&tokens, n)?;
    pb.set_message("summarizing");
    let summaries = analysis::summarize_attention(&model, &trace.attention);
    let uniform = analysis::laa_uniform(n);
    let gates = analysis::gate_stats(&trace.gates, a.bins as usize);
    pb.finish_and_clear();

    if json {
        return print_json(&json!({
            "model": a.model.dir().display().to_string(),
            "backend": a.model.backend.name(),
            "device": engine.device(),
            "text": path.display().to_string(),
            "text_tokens": tokens.len(),
            "tokens": n,
            "laa_points": analysis::LAA_POINTS,
            "layers": to_value(&summaries)?,
            "laa_uniform": to_value(&uniform)?,
            "gate_bins": a.bins,
            "saturation_thresholds": [analysis::SATURATION_LOW, analysis::SATURATION_HIGH],
            "gates": to_value(&gates)?,
        }));
    }

    let mut s = format!(
        "model {} ({}), text {}: first {n} of {} tokens\n\nattention (per head; `all` = head average, layer LAA AUC \
         from the head-averaged curve)\n",
        a.model.dir().display(),
        crate::common::variants_summary(&model),
        path.display(),
        tokens.len()
    );
    s.push_str(&attention_table(&summaries)?);
    s.push_str(&format!("uniform causal attention baseline: LAA AUC {} (n = {n})\n", num(uniform.auc, 4)));
    s.push_str(&gate_table(&gates, a.bins));
    out(&s)
}

/// Refuse `n` tokens the model cannot hold, or whose attention trace would not fit in memory.
fn check_trace_size(cfg: &ModelConfig, n: usize) -> CliResult<()> {
    if n > cfg.max_context {
        return Err(CliError::usage(format!(
            "--max-tokens {n} exceeds the model's max_context {}; lower --max-tokens",
            cfg.max_context
        )));
    }
    let trace_bytes = 4usize.saturating_mul(cfg.n_layers * cfg.n_heads).saturating_mul(n * n);
    if trace_bytes > MAX_TRACE_BYTES {
        return Err(CliError::usage(format!(
            "recording attention for {n} tokens needs {} MiB (layers × heads × n²); lower --max-tokens",
            trace_bytes >> 20
        )));
    }
    Ok(())
}

/// One row per layer (head averages and the layer's LAA area), then one per head.
fn attention_table(summaries: &[analysis::LayerSummary]) -> CliResult<String> {
    let mut rows = Vec::new();
    for l in summaries {
        let hn = l.heads.len().max(1) as f64;
        let mean = |f: &dyn Fn(&analysis::HeadSummary) -> f64| l.heads.iter().map(f).sum::<f64>() / hn;
        let kind = to_value(&l.kind)?.as_str().unwrap_or("").to_string();
        rows.push(vec![
            l.layer.to_string(),
            "all".into(),
            l.variant.clone(),
            kind,
            num(mean(&|h| h.entropy), 3),
            num(mean(&|h| h.mean_distance), 2),
            num(mean(&|h| h.self_weight), 3),
            num(mean(&|h| h.first_token_weight), 3),
            num(l.laa.auc, 4),
        ]);
        for h in &l.heads {
            rows.push(vec![
                String::new(),
                h.head.to_string(),
                String::new(),
                String::new(),
                num(h.entropy, 3),
                num(h.mean_distance, 2),
                num(h.self_weight, 3),
                num(h.first_token_weight, 3),
                num(h.laa_auc, 4),
            ]);
        }
    }
    Ok(table(
        &["layer", "head", "variant", "matrix", "entropy", "mean-dist", "self", "first", "LAA-AUC"],
        &rows,
        &[2, 3],
    ))
}

/// The gate statistics pooled over heads, one row per layer and quantity (empty without gates).
fn gate_table(gates: &[analysis::GateStats], bins: u32) -> String {
    let all_heads: Vec<_> = gates.iter().filter(|g| g.head.is_none()).collect();
    if all_heads.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = all_heads
        .iter()
        .map(|g| {
            let hist: Vec<String> = g.histogram.iter().map(u64::to_string).collect();
            vec![
                g.layer.to_string(),
                g.variant.clone(),
                g.quantity.clone(),
                num(g.mean, 4),
                num(g.saturation, 4),
                g.count.to_string(),
                hist.join(" "),
            ]
        })
        .collect();
    format!(
        "\ngates (all heads; saturation = share < {} or > {}; histogram over {bins} bins on [0, 1])\n{}",
        analysis::SATURATION_LOW,
        analysis::SATURATION_HIGH,
        table(&["layer", "variant", "gate", "mean", "saturation", "count", "histogram"], &rows, &[1, 2, 6])
    )
}
