//! Steering a model's position bias at inference time: the page's sliders and the CLI's overrides
//! go through this one implementation. What a layer exposes (its slopes, its kernel mix, how it is
//! rebuilt with new ones) is the variant module's business ([`crate::variants::Variant`]); only
//! parameter-free slope biases (alibi, gaussian, mep) are steerable — learned biases are what
//! training produced and are shown, not edited.

use crate::config::AttentionSpec;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::variants::mep::validate_kernel_terms;
use crate::variants::KernelTerm;
use serde::{Deserialize, Serialize};

/// A runtime edit of the position bias of every steerable layer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BiasOverride {
    /// Multiplies every head's base slope. `None` keeps the spec's slopes.
    pub slope_scale: Option<f64>,
    /// Gives every head this slope before `slope_scale` applies (MEP Table 4's uniform "h" rows).
    #[serde(default)]
    pub uniform_slope: Option<f64>,
    /// Replaces the kernel list of mep layers (other layers keep theirs).
    pub kernels: Option<Vec<KernelTerm>>,
    /// Replaces the kernel of every steerable layer by this MEP mix (the page's α, β, γ sliders: an
    /// ALiBi layer becomes a mix).
    #[serde(default)]
    pub mix: Option<Vec<KernelTerm>>,
}

impl BiasOverride {
    /// `spec` with this override applied; layers that are not steerable come back unchanged.
    pub fn apply(&self, spec: &AttentionSpec, n_heads: usize) -> Result<AttentionSpec> {
        for (name, v) in [("slope_scale", self.slope_scale), ("uniform_slope", self.uniform_slope)] {
            if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(Error::arg(name, format!("{v} must be finite and >= 0")));
            }
        }
        let variant = spec.variant();
        let Some(base) = variant.slopes(n_heads) else { return Ok(spec.clone()) };
        let mix = match (&self.mix, &self.kernels, spec) {
            (Some(mix), _, _) => Some(mix.clone()),
            (None, Some(kernels), AttentionSpec::Mep(_)) => Some(kernels.clone()),
            _ => None,
        };
        if let Some(terms) = &mix {
            validate_kernel_terms(terms)
                .map_err(|(k, reason)| Error::arg(format!("kernels[{k}]"), reason))?;
        }
        let slopes = match (self.uniform_slope, self.slope_scale) {
            (None, None) if mix.is_none() => return Ok(spec.clone()),
            (None, None) => None,
            (uniform, scale) => {
                let start = uniform.map_or(base, |u| vec![u; n_heads]);
                Some(start.iter().map(|m| m * scale.unwrap_or(1.0)).collect())
            }
        };
        Ok(variant.steered(slopes, mix).unwrap_or_else(|| spec.clone()))
    }

    /// Whether `spec` is a layer an override can change (its variant exposes slopes).
    pub fn is_steerable(spec: &AttentionSpec) -> bool {
        spec.variant().slopes(1).is_some()
    }
}

/// Apply `o` to every layer of `model` (revalidating each changed spec).
pub fn apply_override(model: &mut Model, o: &BiasOverride) -> Result<()> {
    let h = model.config().n_heads;
    for i in 0..model.config().n_layers {
        let spec = o.apply(&model.config().layers[i], h)?;
        if spec != model.config().layers[i] {
            model.set_layer_spec(i, spec)?;
        }
    }
    Ok(())
}
