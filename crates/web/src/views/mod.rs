//! The lab views: kernels (with the bias sliders), extrapolation (perplexity vs length), attention
//! heatmaps, locally accumulated attention and gates (with the before/after-training comparison of
//! ReGLA Fig. 4 when the index lists an initial checkpoint). Each view has a short "what am I looking
//! at" note. All model work is asked of the model's worker through the [`ModelRef`](crate::host::ModelRef)
//! the views get (on its CPU engine; the answers arrive as futures).
//!
//! `kernels` and `ppl` are components of their own; attention, LAA and gates show one trace of the
//! current text, computed by the `trace` component, each drawn by its own module.

mod attention;
mod gates;
mod kernels;
mod laa;
mod ppl;
mod strip;
mod trace;

use std::collections::BTreeMap;
use std::rc::Rc;

use yew::prelude::*;

pub use gates::{Compare, CompareState};
pub use kernels::KernelView;
pub use ppl::{PplView, Shipped};
pub use trace::{TraceKind, TraceViewComp};

/// `(length, perplexity)` points of one sweep.
pub type PplCurve = Rc<Vec<(usize, f64)>>;
/// LAA of one layer: `(layer, auc, curve)`.
pub type LayerLaa = (usize, f64, Vec<f64>);
/// LAA of the models seen in this page, by model name (the overlay).
pub type LaaOverlay = BTreeMap<String, Vec<LayerLaa>>;

/// Compare mode's model B, ready, with the index names of both sides.
#[derive(Clone, PartialEq)]
pub struct SideModel {
    pub a_name: AttrValue,
    pub name: AttrValue,
    pub model: crate::host::ModelRef,
}

/// Milliseconds to wait after the last change before a heavy recomputation starts.
const DEBOUNCE_MS: u32 = 350;

/// The "What am I looking at?" note: the paper's claim and how to read the plot.
fn note(paper: &str, read: &str) -> Html {
    html! {
        <details class="note">
            <summary>{ "What am I looking at?" }</summary>
            <p><b>{ "The claim. " }</b>{ paper }</p>
            <p><b>{ "How to read it. " }</b>{ read }</p>
            <p class="muted">{ "Attention maps show where a layer puts its weight, not why the model predicts \
                what it does: they are not explanations." }</p>
        </details>
    }
}
