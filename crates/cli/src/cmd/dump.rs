//! `attnlab dump`: logits (and optionally attention matrices and gates) of one forward pass as
//! safetensors.

use crate::common::{
    encode_text, layer_variants, load_tokenizer, out, print_json, read_text, spinner, table, to_value,
    write_file, CliError, CliResult, ModelArgs,
};
use crate::gpu::Engine;
use attnlab_core::attention::{AttnStage, TraceRequest};
use attnlab_core::model::Trace;
use attnlab_core::weights::{Tensor, Weights};
use clap::{Args, ValueEnum};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Which stage of the softmax scores `--attention` records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Stage {
    /// scale·q·k before the position bias
    Logits,
    /// scale·q·k + B
    Biased,
    /// softmax probabilities (linear layers: the implied matrix)
    Probabilities,
}

/// Dump one forward pass over a text to a safetensors file (all tensors F32).
///
/// Tensors: `logits` [tokens, vocab]; `tokens` [tokens] (the ids, exact as f32); with --attention
/// `attention.layer{i}` [heads, tokens, tokens] (rows = queries, zeros above the diagonal); with --gates
/// `gates.layer{i}.f` [tokens, heads, dim] for gated layers, plus `.g` and `.r` for ReGLA. The header
/// metadata names the model, the layer variants and each attention matrix's kind.
#[derive(Debug, Clone, Args)]
pub struct DumpArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Input text [default: www/eval/heldout.txt when present]
    #[arg(long, value_name = "FILE", conflicts_with = "ids")]
    pub text: Option<PathBuf>,
    /// Token ids instead of a text: a JSON array of integers (no tokenizer needed, e.g. to compare
    /// logits with another implementation)
    #[arg(long, value_name = "FILE")]
    pub ids: Option<PathBuf>,
    /// Output file (.safetensors)
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Also dump every layer's attention matrices
    #[arg(long)]
    pub attention: bool,
    /// Which score stage --attention records
    #[arg(long, value_enum, default_value_t = Stage::Probabilities)]
    pub stage: Stage,
    /// Also dump the gates of gated linear layers (the lowering has a decay gate)
    #[arg(long)]
    pub gates: bool,
    /// Use the first N tokens of the text (at most the model's max_context); a longer text is cut,
    /// with a note on stderr
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: u32,
}

/// Token ids from a JSON array file, each checked against the vocabulary.
fn read_ids(path: &Path, vocab: usize) -> CliResult<Vec<u32>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::runtime(format!("cannot read `{}`: {e}", path.display())))?;
    let bad = |why: String| CliError::usage(format!("--ids `{}`: {why}", path.display()));
    let values: Vec<serde_json::Value> =
        serde_json::from_str(&text).map_err(|e| bad(format!("not a JSON array of integers: {e}")))?;
    if values.is_empty() {
        return Err(bad("the array is empty".into()));
    }
    values
        .iter()
        .enumerate()
        .map(|(i, v)| match v.as_u64() {
            Some(id) if (id as usize) < vocab => Ok(id as u32),
            Some(id) => Err(bad(format!("element {i} is {id}, outside the vocabulary (vocab_size {vocab})"))),
            None => Err(bad(format!("element {i} ({v}) is not a non-negative integer"))),
        })
        .collect()
}

pub fn run(a: DumpArgs, json: bool) -> CliResult<()> {
    let model = a.model.load_any_backend()?;
    let (path, all) = input_tokens(&a, &model)?;
    let cfg = model.config();
    let n = all.len().min(a.max_tokens as usize);
    if n > cfg.max_context {
        return Err(CliError::usage(format!(
            "--max-tokens {n} exceeds the model's max_context {}; lower --max-tokens",
            cfg.max_context
        )));
    }
    let truncated = all.len() > n;
    if truncated {
        crate::common::note(&format!(
            "{}: {} tokens, dumping the first {n} (--max-tokens {n}; default 256)",
            path.display(),
            all.len()
        ));
    }
    let tokens = &all[..n];
    let stage = match a.stage {
        Stage::Logits => AttnStage::Logits,
        Stage::Biased => AttnStage::Biased,
        Stage::Probabilities => AttnStage::Probabilities,
    };
    let pb = spinner(&format!("running {n} tokens"), json);
    let mut engine = Engine::new(&model, a.model.backend.backend)?;
    let trace = engine.trace_all(tokens, TraceRequest { attention: a.attention, stage, gates: a.gates })?;
    pb.finish_and_clear();

    let mut meta = HashMap::from([
        ("format".to_string(), "attnlab-dump".to_string()),
        ("model".to_string(), a.model.dir().display().to_string()),
        (if a.ids.is_some() { "ids" } else { "text" }.to_string(), path.display().to_string()),
        ("backend".to_string(), a.model.backend.name().to_string()),
        ("variants".to_string(), layer_variants(&model).join(",")),
    ]);
    let tensors = dump_tensors(trace, tokens, cfg.vocab_size, &mut meta)?;
    let listing: Vec<(String, Vec<usize>)> =
        tensors.iter().map(|(k, t)| (k.clone(), t.shape.clone())).collect();
    let bytes =
        Weights { tensors }.to_safetensors(Some(meta)).map_err(|e| CliError::runtime(e.to_string()))?;
    write_file(&a.out, &bytes)?;

    if a.gates && !listing.iter().any(|(k, _)| k.starts_with("gates.")) {
        crate::common::note("--gates: this model has no gated linear layers; no gate tensors written");
    }
    if json {
        return print_json(&json!({
            "out": a.out.display().to_string(),
            "bytes": bytes.len(),
            "tokens": n,
            "text_tokens": all.len(),
            "truncated": truncated,
            "tensors": listing.iter().map(|(k, s)| json!({"name": k, "shape": s})).collect::<Vec<_>>(),
        }));
    }
    let cut = if truncated { format!(" of {}", all.len()) } else { String::new() };
    let mut s = format!("wrote {} ({} bytes, {n}{cut} tokens)\n", a.out.display(), bytes.len());
    s.push_str(&listing_table(&listing));
    out(&s)
}

/// The tokens to dump and the file they came from: `--ids`, or `--text` (or stdin) encoded with the
/// model's tokenizer.
fn input_tokens(a: &DumpArgs, model: &attnlab_core::Model) -> CliResult<(PathBuf, Vec<u32>)> {
    match &a.ids {
        Some(p) => Ok((p.clone(), read_ids(p, model.config().vocab_size)?)),
        None => {
            let (path, text) = read_text(a.text.as_deref())?;
            let tok = load_tokenizer(&a.model.dir(), model)?;
            let ids = encode_text(&tok, &text, &path)?;
            Ok((path, ids))
        }
    }
}

/// The dump's tensors: logits, tokens and each traced layer's attention and gates; `meta` gets the
/// attention kinds and gate variants.
fn dump_tensors(
    trace: Trace,
    tokens: &[u32],
    vocab: usize,
    meta: &mut HashMap<String, String>,
) -> CliResult<BTreeMap<String, Tensor>> {
    let n = tokens.len();
    let mut tensors = BTreeMap::new();
    tensors.insert("logits".to_string(), Tensor::f32(vec![n, vocab], trace.logits));
    tensors.insert("tokens".to_string(), Tensor::f32(vec![n], tokens.iter().map(|&t| t as f32).collect()));
    for la in trace.attention {
        let data: Vec<f32> = la.heads.concat();
        let name = format!("attention.layer{}", la.layer);
        meta.insert(format!("{name}.kind"), to_value(&la.kind)?.as_str().unwrap_or("").to_string());
        tensors.insert(name, Tensor::f32(vec![la.heads.len(), la.n, la.n], data));
    }
    for lg in trace.gates {
        let shape = vec![lg.n, lg.n_heads, lg.dim];
        let base = format!("gates.layer{}", lg.layer);
        meta.insert(format!("{base}.variant"), lg.variant.clone());
        for (q, v) in [("f", Some(lg.f)), ("g", lg.g), ("r", lg.r)] {
            if let Some(data) = v {
                tensors.insert(format!("{base}.{q}"), Tensor::f32(shape.clone(), data));
            }
        }
    }
    Ok(tensors)
}

/// The written tensors' names and shapes as a table.
fn listing_table(listing: &[(String, Vec<usize>)]) -> String {
    let rows: Vec<Vec<String>> = listing
        .iter()
        .map(|(k, s)| {
            vec![k.clone(), format!("[{}]", s.iter().map(usize::to_string).collect::<Vec<_>>().join(", "))]
        })
        .collect();
    table(&["tensor", "shape"], &rows, &[0, 1])
}
