//! The variant catalog: one module per attention variant, one table ([`catalog!`]) that lists them.
//!
//! A variant module holds everything about its variant: the parameters it takes in `config.json`
//! (a struct, with its defaults and validation), the tensors it owns, its lowering to the shared
//! kernels ([`crate::lowering`]), and what the lab can show or steer of it (bias slopes and kernel
//! mixes, gate biases). The table below generates [`AttentionSpec`] (the per-layer config entry),
//! [`VARIANT_IDS`], and the id ↔ module dispatch; nothing else keeps a list of variants.
//!
//! Adding a variant: write `variants/<id>.rs` implementing [`Variant`], add one line to the table.
//! docs/ARCHITECTURE.md has the checklist; `tests::every_variant_keeps_the_contract` checks it.

use crate::bias;
use crate::config::{ModelConfig, SizePreset};
use crate::error::{Error, Result};
use crate::lowering::{Bias, Learned, LearnedTable, Lowering, SoftmaxLowering, Window};
use crate::ops::Linear;
use crate::weights::{TensorSpec, Weights};
use serde::{Deserialize, Serialize};

pub mod alibi;
pub mod cope;
pub mod fast_decay;
pub mod fire;
pub mod gaussian;
pub mod gla;
pub mod hgrn2;
pub mod kerple_log;
pub mod kerple_power;
pub mod linear_elu;
pub mod lrpe;
pub mod mep;
pub mod mep_param;
pub mod nope;
pub mod regla;
pub mod retnet;
pub mod rope;
pub mod sandwich;
pub mod sinusoidal;
pub mod t5;
pub mod transnormer;

pub use mep::{KernelKind, KernelTerm};

/// The two families of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Causal softmax attention with a KV cache.
    Softmax,
    /// Recurrent state, constant-memory decode.
    Linear,
}

/// What every variant module provides. Only [`Variant::family`] and [`Variant::lower`] are required.
pub trait Variant {
    /// Softmax family (KV cache) or linear family (recurrent state; TransNormer Diag blocks count as
    /// linear, their state is bounded by the block size).
    fn family(&self) -> Family;

    /// Checks against the model config for layer `i`; errors name the field (`layers[i].x`).
    fn validate(&self, _cfg: &ModelConfig, _i: usize) -> Result<()> {
        Ok(())
    }

    /// The spec of layer `i` of a preset model of `size`, where it differs from the default (the
    /// serde defaults, which fix the meaning of an absent key in a file, stay as they are): TransNormer
    /// Diag blocks in the first half of the layers and Norm blocks in the second; T5's `max_distance`
    /// relative to the training length; LRPE's denominator.
    fn preset_layer(&self, _i: usize, _size: &SizePreset) -> Option<AttentionSpec> {
        None
    }

    /// Tensors shared by every layer of this variant (KERPLE-style `pos.*` parameters).
    fn shared_tensors(&self, _cfg: &ModelConfig) -> Vec<TensorSpec> {
        Vec::new()
    }

    /// Tensors owned by layer `i` beyond `wq, wk, wv, wo`.
    fn layer_tensors(&self, _cfg: &ModelConfig, _i: usize) -> Vec<TensorSpec> {
        Vec::new()
    }

    /// The shared-kernel form of layer `ctx.layer`, from the config and the loaded weights.
    fn lower(&self, ctx: &LowerCtx) -> Result<Lowering>;

    /// Steerable bias knobs: the per-head slopes this bias uses now (alibi, gaussian, mep).
    fn slopes(&self, _n_heads: usize) -> Option<Vec<f64>> {
        None
    }

    /// The bias written as a MEP kernel mix (ALiBi = one exp kernel), for the kernel-mix sliders.
    fn kernel_mix(&self) -> Option<Vec<KernelTerm>> {
        None
    }

    /// This layer with new slopes and/or a new kernel mix (`None` keeps its own); `None` if it is not
    /// steerable.
    fn steered(&self, _slopes: Option<Vec<f64>>, _mix: Option<Vec<KernelTerm>>) -> Option<AttentionSpec> {
        None
    }

    /// The tensor holding the forget-gate bias of layer `i` (ReGLA Fig. 4's extreme initialisation).
    fn gate_bias_tensor(&self, _i: usize) -> Option<String> {
        None
    }

    /// Whether the layer accepts query/key heads of another width than the value heads
    /// (`qk_head_dim`); the kernels of the other variants assume equal widths.
    fn free_key_width(&self) -> bool {
        false
    }
}

/// Generates [`AttentionSpec`], [`VARIANT_IDS`] and the dispatch from one list of
/// `"id" => EnumVariant(module::ParamStruct)`.
macro_rules! catalog {
    ($($id:literal => $name:ident($module:ident::$params:ident),)*) => {
        /// Per-layer attention spec in `config.json`: `"variant"` is the catalog id, the other keys are
        /// that variant's parameters (unknown keys are rejected).
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "variant")]
        pub enum AttentionSpec {
            $(#[serde(rename = $id)] $name($module::$params),)*
        }

        /// Every attention variant id of the catalog, as used in config, CLI and UI.
        pub const VARIANT_IDS: &[&str] = &[$($id),*];

        impl AttentionSpec {
            /// The catalog id of this spec.
            pub fn variant_id(&self) -> &'static str {
                match self { $(AttentionSpec::$name(_) => $id,)* }
            }

            /// The variant module behind this spec.
            pub fn variant(&self) -> &dyn Variant {
                match self { $(AttentionSpec::$name(v) => v,)* }
            }

            /// Default spec of a variant id (the catalog defaults).
            pub fn default_for(id: &str) -> Result<AttentionSpec> {
                match id {
                    $($id => Ok(AttentionSpec::$name($module::$params::default())),)*
                    other => Err(Error::UnknownVariant(other.to_string())),
                }
            }
        }
    };
}

catalog! {
    "nope" => Nope(nope::Nope),
    "sinusoidal" => Sinusoidal(sinusoidal::Sinusoidal),
    "rope" => Rope(rope::Rope),
    "alibi" => Alibi(alibi::Alibi),
    "kerple-log" => KerpleLog(kerple_log::KerpleLog),
    "kerple-power" => KerplePower(kerple_power::KerplePower),
    "t5" => T5(t5::T5),
    "sandwich" => Sandwich(sandwich::Sandwich),
    "fire" => Fire(fire::Fire),
    "gaussian" => Gaussian(gaussian::Gaussian),
    "mep" => Mep(mep::Mep),
    "mep-param" => MepParam(mep_param::MepParam),
    "cope" => Cope(cope::Cope),
    "linear-elu" => LinearElu(linear_elu::LinearElu),
    "transnormer" => Transnormer(transnormer::Transnormer),
    "lrpe" => Lrpe(lrpe::LrpeSpec),
    "gla" => Gla(gla::Gla),
    "regla" => Regla(regla::Regla),
    "fast-decay" => FastDecay(fast_decay::FastDecay),
    "retnet" => Retnet(retnet::Retnet),
    "hgrn2" => Hgrn2(hgrn2::Hgrn2),
}

impl AttentionSpec {
    /// Softmax or linear family (see [`Variant::family`]).
    pub fn family(&self) -> Family {
        self.variant().family()
    }
}

/// What a variant's lowering reads: the config, the layer index and the loaded weights.
pub struct LowerCtx<'a> {
    pub cfg: &'a ModelConfig,
    pub layer: usize,
    pub weights: &'a Weights,
}

impl LowerCtx<'_> {
    /// Layer tensor `layers.{i}.attn.{name}` as a vector.
    pub fn tensor(&self, name: &str) -> Result<Vec<f32>> {
        Ok(self.weights.get(&format!("layers.{}.attn.{name}", self.layer))?.to_vec())
    }

    /// Model-wide tensor `name` (e.g. `pos.kerple_log.a`).
    pub fn shared(&self, name: &str) -> Result<&[f32]> {
        self.weights.get(name)
    }

    /// Layer matrix `layers.{i}.attn.{name}` of shape `[out, inp]`.
    pub fn linear(&self, name: &str, out: usize, inp: usize) -> Result<Linear> {
        Ok(Linear::new(self.weights.tensor(&self.layer_name(name))?.data.clone(), out, inp))
    }

    /// Full name of layer tensor `name`.
    pub fn layer_name(&self, name: &str) -> String {
        format!("layers.{}.attn.{name}", self.layer)
    }

    /// Layer tensor `name` as a [`Learned`] vector (the trainer keeps it in the graph).
    pub fn learned(&self, name: &str) -> Result<Learned<Vec<f32>>> {
        Ok(Learned { name: self.layer_name(name), value: self.tensor(name)? })
    }

    /// Layer matrix `name` (`[out, inp]`) as a [`Learned`] linear map.
    pub fn learned_linear(&self, name: &str, out: usize, inp: usize) -> Result<Learned<Linear>> {
        Ok(Learned { name: self.layer_name(name), value: self.linear(name, out, inp)? })
    }

    /// The single value of layer tensor `name`.
    pub fn learned_scalar(&self, name: &str) -> Result<Learned<f64>> {
        let v = self.tensor(name)?;
        let x = v.first().map(|x| *x as f64).ok_or_else(|| Error::arg(name, "empty tensor"))?;
        Ok(Learned { name: self.layer_name(name), value: x })
    }

    /// `1/sqrt(d_k)` with d_k the query/key head width, the logit scale.
    pub fn scale(&self) -> f32 {
        1.0 / (self.cfg.key_head_dim() as f32).sqrt()
    }

    /// A causal softmax layer with `bias` and optional RoPE inverse frequencies (one per pair).
    pub fn softmax(&self, bias: Bias, rope: Option<Vec<f64>>) -> Lowering {
        Lowering::Softmax(SoftmaxLowering {
            scale: self.scale(),
            bias,
            rope,
            window: Window::Causal,
            relu_with_norm: false,
        })
    }

    /// A causal softmax layer whose bias is the distance-only table `f(head, d)`, built in f64 for
    /// `d < max_context` and stored as f32 (±inf and NaN never reach a kernel: clamped to the mask).
    pub fn bias_table(&self, f: &dyn Fn(usize, f64) -> f64) -> Result<Lowering> {
        self.table(f, None)
    }

    /// [`LowerCtx::bias_table`] for a table the trainer rebuilds from parameters as `learned`.
    pub fn learned_bias_table(
        &self,
        f: &dyn Fn(usize, f64) -> f64,
        learned: LearnedTable,
    ) -> Result<Lowering> {
        self.table(f, Some(learned))
    }

    fn table(&self, f: &dyn Fn(usize, f64) -> f64, learned: Option<LearnedTable>) -> Result<Lowering> {
        let (h, len) = (self.cfg.n_heads, self.cfg.max_context);
        if h.saturating_mul(len) > MAX_BIAS_TABLE {
            return Err(Error::field(
                "max_context",
                format!("n_heads × max_context exceeds {MAX_BIAS_TABLE} bias entries"),
            ));
        }
        let mut values = Vec::with_capacity(h * len);
        for hh in 0..h {
            for d in 0..len {
                let b = f(hh, d as f64);
                values.push(if b.is_finite() { (b as f32).max(bias::MASKED) } else { bias::MASKED });
            }
        }
        Ok(self.softmax(Bias::Table { len, values, learned }, None))
    }
}

/// The extreme gate-bias initialisation of ReGLA's Fig. 4 (ReGLA §5.3): every gated layer's
/// forget-gate bias is set to `+b` on even channels and `−b` on odd ones, so half the gate activations
/// start near 1 and half near 0. The paper gives no values; `attnlab init --gate-bias-init 6` puts
/// σ(±6) at 0.9975 / 0.0025. Returns the number of layers changed.
pub fn set_extreme_gate_bias(cfg: &ModelConfig, weights: &mut Weights, b: f32) -> usize {
    let mut changed = 0;
    for (i, spec) in cfg.layers.iter().enumerate() {
        let Some(name) = spec.variant().gate_bias_tensor(i) else { continue };
        if let Some(t) = weights.tensors.get_mut(&name) {
            for (c, v) in t.data.f32_mut().iter_mut().enumerate() {
                *v = if c % 2 == 0 { b } else { -b };
            }
            changed += 1;
        }
    }
    changed
}

/// Largest bias table (heads × max_context entries) a config may ask for.
pub const MAX_BIAS_TABLE: usize = 1 << 26;

/// Config field name `layers[i].name`.
pub(crate) fn field(i: usize, name: &str) -> String {
    format!("layers[{i}].{name}")
}

/// Per-head slopes given in a config: one finite, non-negative value per head.
pub(crate) fn check_slopes(slopes: &Option<Vec<f64>>, cfg: &ModelConfig, i: usize) -> Result<()> {
    if let Some(s) = slopes {
        if s.len() != cfg.n_heads {
            return Err(Error::field(
                field(i, "slopes"),
                format!("has {} values, need n_heads = {}", s.len(), cfg.n_heads),
            ));
        }
        if let Some(bad) = s.iter().find(|v| !(v.is_finite() && **v >= 0.0)) {
            return Err(Error::field(
                field(i, "slopes"),
                format!("value {bad} is not a finite non-negative number"),
            ));
        }
    }
    Ok(())
}

/// `value` must be finite and > 0 (`layers[i].name`).
pub(crate) fn check_positive(value: f64, i: usize, name: &str) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(Error::field(field(i, name), "must be finite and > 0"))
    }
}

/// Rotary variants need pairs of channels.
pub(crate) fn check_even_head_dim(cfg: &ModelConfig, what: &str) -> Result<()> {
    if cfg.head_dim.is_multiple_of(2) {
        Ok(())
    } else {
        Err(Error::field("head_dim", format!("{what} needs an even head_dim")))
    }
}

/// The given slopes, else the official ALiBi slopes of `n_heads` heads.
pub(crate) fn slopes_or_alibi(slopes: &Option<Vec<f64>>, n_heads: usize) -> Vec<f64> {
    slopes.clone().unwrap_or_else(|| bias::alibi_slopes(n_heads))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SizePreset;
    use crate::model::Model;

    /// The add-a-variant checklist of docs/ARCHITECTURE.md, checked for every catalog entry: a
    /// default that round-trips through JSON under its id, a valid preset, declared tensors that
    /// exist with their shapes in a random model, and a lowering of the declared family.
    #[test]
    fn every_variant_keeps_the_contract() {
        for id in VARIANT_IDS {
            let spec = AttentionSpec::default_for(id).expect("catalog default");
            assert_eq!(spec.variant_id(), *id);
            let json = serde_json::to_value(&spec).expect("serialise");
            assert_eq!(json["variant"], *id);
            let back: AttentionSpec = serde_json::from_value(json).expect("parse back");
            assert_eq!(back, spec);
            let cfg = ModelConfig::preset(id, SizePreset::default()).expect("preset");
            let model = Model::random(cfg.clone(), 1).expect("random model");
            for (i, layer) in cfg.layers.iter().enumerate() {
                let v = layer.variant();
                for t in v.layer_tensors(&cfg, i).iter().chain(&v.shared_tensors(&cfg)) {
                    let w = model.weights().get(&t.name).expect("declared tensor present");
                    assert_eq!(w.len(), t.shape.iter().product::<usize>(), "{id}: {}", t.name);
                }
                let ctx = LowerCtx { cfg: &cfg, layer: i, weights: model.weights() };
                let family = match v.lower(&ctx).expect("lowering") {
                    Lowering::Softmax(_) => Family::Softmax,
                    Lowering::Linear(_) => Family::Linear,
                };
                let diag = matches!(layer, AttentionSpec::Transnormer(t) if t.role == transnormer::TransnormerRole::Diag);
                assert!(family == v.family() || diag, "{id}: lowering family differs from family()");
                if let Some(name) = v.gate_bias_tensor(i) {
                    assert!(model.weights().get(&name).is_ok(), "{id}: gate bias {name}");
                }
                if let Some(s) = v.slopes(cfg.n_heads) {
                    assert_eq!(s.len(), cfg.n_heads);
                    assert!(v.steered(Some(s), v.kernel_mix()).is_some(), "{id}: slopes but not steerable");
                }
            }
        }
    }

    #[test]
    fn unknown_fields_are_rejected_for_every_variant() {
        for id in VARIANT_IDS {
            let mut json =
                serde_json::to_value(AttentionSpec::default_for(id).expect("default")).expect("json");
            json["no_such_field"] = 1.into();
            assert!(serde_json::from_value::<AttentionSpec>(json).is_err(), "{id} accepted an unknown field");
        }
    }
}
