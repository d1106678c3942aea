//! `attnlab kernels`: position bias B_h(d) and kernel exp(B_h(d)) per head, with runtime overrides.

use crate::common::{
    load_model_dir, out, parse_kernels, parse_variant, print_json, BackendArg, CliError, CliResult, KernelMix,
};
use attnlab_core::analysis;
use attnlab_core::config::{AttentionSpec, ModelConfig, SizePreset};
use attnlab_core::lowering::{Bias, Lowering};
use attnlab_core::steer::BiasOverride;
use attnlab_core::Model;
use clap::{Args, ValueEnum};
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Output format of `kernels`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Columns layer,head,d,bias,kernel
    Csv,
    /// One object with a curve per head
    Json,
}

/// Print the position bias B_h(d) and the kernel exp(B_h(d)) of every head for d = 0..N.
///
/// Without --model a random model of --variant is built (init preset sizes, seed 0, max_context ≥ N):
/// parameter-free biases (alibi, gaussian, mep, sandwich) are exact, learned ones (kerple-log,
/// kerple-power, t5, fire, mep-param) show their random init. With --model the first layer of
/// --variant is used (or --layer, or layer 0). FIRE is evaluated for the query at position N−1.
/// --slope-scale and --kernels edit the bias as the page's sliders do.
#[derive(Debug, Clone, Args)]
pub struct KernelsArgs {
    /// Catalog variant id (required without --model; with --model it picks the first matching layer)
    #[arg(long, value_name = "ID", value_parser = parse_variant, required_unless_present = "model")]
    pub variant: Option<String>,
    /// Model folder to read the layer from (instead of a random model of --variant)
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub backend: BackendArg,
    /// Distances d = 0..N are printed
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    pub max_distance: u32,
    /// Multiply every head's slope by S (alibi, gaussian, mep)
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub slope_scale: Option<f64>,
    /// Replace a mep layer's kernel mix: kernel:scale:weight[:p],… with kernel ∈
    /// exp|gaussian|kerple-log|kerple-power (p: exponent of the kerple kernels)
    #[arg(long, value_name = "LIST", value_parser = parse_kernels)]
    pub kernels: Option<KernelMix>,
    /// Layer index to read (default: the first layer of --variant, else 0)
    #[arg(long, value_name = "L")]
    pub layer: Option<usize>,
    /// Heads of the random model built without --model [default: 4]
    #[arg(long, value_name = "N", conflicts_with = "model")]
    pub heads: Option<usize>,
    /// Output format (--json is the same as --format json)
    #[arg(long, value_enum, default_value_t = Format::Csv)]
    pub format: Format,
}

fn random_model(variant: &str, n: usize, heads: Option<usize>) -> CliResult<Model> {
    let d = SizePreset::default();
    let size = SizePreset {
        max_context: d.max_context.max(n),
        n_heads: heads.unwrap_or(d.n_heads),
        // Otherwise the `init` preset, so learned-bias values equal those of `attnlab init --seed 0`.
        ..d
    };
    if size.n_heads == 0 {
        return Err(CliError::usage("--heads must be > 0"));
    }
    let cfg = ModelConfig::preset(variant, size).map_err(|e| CliError::usage(e.to_string()))?;
    Ok(Model::random(cfg, 0)?)
}

fn pick_layer(model: &Model, a: &KernelsArgs) -> CliResult<usize> {
    let layers = &model.config().layers;
    let ids: Vec<&str> = layers.iter().map(|l| l.variant_id()).collect();
    match (a.layer, &a.variant) {
        (Some(l), v) => {
            let Some(id) = ids.get(l) else {
                return Err(CliError::usage(format!(
                    "--layer {l} is out of range (the model has {} layers)",
                    ids.len()
                )));
            };
            if let Some(v) = v {
                if id != v {
                    return Err(CliError::usage(format!(
                        "layer {l} is `{id}`, not `{v}` (layers: {})",
                        ids.join(", ")
                    )));
                }
            }
            Ok(l)
        }
        (None, Some(v)) => ids.iter().position(|id| id == v).ok_or_else(|| {
            CliError::usage(format!(
                "the model has no `{v}` layer (layers: {}); pick one with --layer L",
                ids.join(", ")
            ))
        }),
        (None, None) => Ok(0),
    }
}

fn slopes_of(spec: &AttentionSpec, h: usize) -> Option<Vec<f64>> {
    spec.variant().slopes(h)
}

/// Biases are f32 in the runtime: print them at f32 precision (shortest round-trip form, no `-0`).
fn f32c(x: f64) -> f32 {
    x as f32 + 0.0
}

fn f32s(v: &[f64]) -> Vec<f64> {
    v.iter().map(|x| crate::common::f32_json(f32c(*x))).collect()
}

pub fn run(a: KernelsArgs, json: bool) -> CliResult<()> {
    a.backend.check()?;
    let n = a.max_distance as usize;
    let from_model = a.model.is_some();
    let mut model = match &a.model {
        Some(dir) => load_model_dir(dir)?,
        None => {
            let v =
                a.variant.as_deref().ok_or_else(|| CliError::usage("give --variant ID or --model DIR"))?;
            random_model(v, n, a.heads)?
        }
    };
    let max = model.config().max_context;
    if n > max {
        return Err(CliError::usage(format!("--max-distance {n} exceeds the model's max_context {max}")));
    }
    let layer = pick_layer(&model, &a)?;
    let h = model.config().n_heads;
    let id = model.config().layers[layer].variant_id();
    let (ov, mut notes) = apply_overrides(&mut model, layer, &a)?;
    let spec = model.config().layers[layer].clone();
    notes.extend(bias_notes(model.attention(layer).map(|l| l.lowering()), from_model, id, n));

    let curves = analysis::kernel_curves(&model, layer, n)?;
    if json || a.format == Format::Json {
        return print_json(&json!({
            "source": if from_model { "model" } else { "random-init" },
            "model": a.model.as_ref().map(|p| p.display().to_string()),
            "layer": layer,
            "variant": id,
            "spec": serde_json::to_value(&spec).unwrap_or(serde_json::Value::Null),
            "n_heads": h,
            "slopes": slopes_of(&spec, h),
            "override": { "slope_scale": a.slope_scale, "kernels": ov.kernels },
            "max_distance": n,
            "notes": notes,
            "heads": curves.iter().map(|c| json!({"head": c.head, "bias": f32s(&c.bias), "kernel": f32s(&c.kernel)})).collect::<Vec<_>>(),
        }));
    }
    for note in &notes {
        crate::common::note(note);
    }
    let mut s = String::with_capacity(32 * n * h + 32);
    s.push_str("layer,head,d,bias,kernel\n");
    for c in &curves {
        for (d, (b, k)) in c.bias.iter().zip(&c.kernel).enumerate() {
            let _ = writeln!(s, "{},{},{d},{},{}", c.layer, c.head, f32c(*b), f32c(*k));
        }
    }
    out(&s)
}

/// Apply `--slope-scale` and `--kernels` to `layer`; returns the override and a note for each
/// option the layer's variant ignores.
fn apply_overrides(
    model: &mut Model,
    layer: usize,
    a: &KernelsArgs,
) -> CliResult<(BiasOverride, Vec<String>)> {
    let original = model.config().layers[layer].clone();
    let id = original.variant_id();
    let mut notes = Vec::new();
    let ov = BiasOverride {
        slope_scale: a.slope_scale,
        uniform_slope: None,
        kernels: a.kernels.as_ref().map(|k| k.0.clone()),
        mix: None,
    };
    if ov == BiasOverride::default() {
        return Ok((ov, notes));
    }
    if a.kernels.is_some() && !matches!(original, AttentionSpec::Mep(_)) {
        notes.push(format!("--kernels only applies to mep layers; layer {layer} is `{id}` and is unchanged"));
    }
    if a.slope_scale.is_some() && !BiasOverride::is_steerable(&original) {
        notes.push(format!(
            "--slope-scale only applies to alibi, gaussian and mep layers; layer {layer} is `{id}`"
        ));
    }
    let spec = ov.apply(&original, model.config().n_heads)?;
    if spec != original {
        model.set_layer_spec(layer, spec)?;
    }
    Ok((ov, notes))
}

/// What the curves of a layer lowered to `lowering` mean: a random init's learned bias, no bias at
/// all, or FIRE's dependence on the query position (`n` the distances shown).
fn bias_notes(lowering: Option<&Lowering>, from_model: bool, id: &str, n: usize) -> Vec<String> {
    let mut notes = Vec::new();
    let learned = matches!(lowering, Some(Lowering::Softmax(sl))
        if matches!(sl.bias, Bias::Table { learned: Some(_), .. } | Bias::Fire { .. }));
    if !from_model && learned {
        notes.push(format!(
            "`{id}` has a learned bias: these values are the random init (seed 0); pass --model DIR for trained values"
        ));
    }
    match lowering {
        Some(Lowering::Linear(_)) => notes.push(format!(
            "`{id}` is a linear-attention layer without a distance bias: bias 0 and kernel 1 everywhere \
             (its decay lives in gates; see `attnlab analyze`)"
        )),
        Some(Lowering::Softmax(sl)) => match sl.bias {
            Bias::None => notes
                .push(format!("`{id}` adds no position bias to the logits: bias 0 and kernel 1 everywhere")),
            Bias::Fire { .. } => notes.push(format!(
                "FIRE depends on the query position: values are for the query at position {}",
                n - 1
            )),
            Bias::Table { .. } | Bias::Contextual { .. } => {}
        },
        None => {}
    }
    notes
}
