//! Compare mode: the page's model (side A, with the bias sliders) beside a second model (side B, as
//! trained): an index model, or A itself as trained (one model under two slider settings). Plain
//! Rust, compiled and tested natively: what B is and how the URL names it, the papers' comparisons
//! as one-click presets, the difference matrix A − B, the scale both sides share, the selection
//! clamped to each side's layers and heads, and the lines of the overlays.

use attnlab_core::catalog::ModelIndex;

use crate::colors::Scale;
use crate::url_state::Tab;

/// What side B is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SideB {
    /// An index model, by its folder name.
    Model(String),
    /// The page's model as trained (A carries the sliders' edit).
    Trained,
}

/// The `b=` value of [`SideB::Trained`]: `@` is never part of a model name.
pub const TRAINED_CODE: &str = "@trained";

impl SideB {
    /// The `b=` value.
    pub fn code(&self) -> &str {
        match self {
            SideB::Model(name) => name,
            SideB::Trained => TRAINED_CODE,
        }
    }

    /// Read a `b=` value.
    pub fn parse(v: &str) -> Result<SideB, String> {
        if v == TRAINED_CODE {
            Ok(SideB::Trained)
        } else if crate::url_state::is_model_name(v) {
            Ok(SideB::Model(v.to_string()))
        } else {
            Err(format!("a model folder name or {TRAINED_CODE} (the page's model as trained) was expected"))
        }
    }

    /// B's name in labels and captions, `a` being the page model's name.
    pub fn label(&self, a: &str) -> String {
        match self {
            SideB::Model(name) => name.clone(),
            SideB::Trained => format!("{a} as trained"),
        }
    }

    /// Why B cannot be compared with: a name the index does not list (a stale link). Without an
    /// index every name is tried (the load then says what is wrong).
    pub fn check(&self, index: Option<&ModelIndex>) -> Result<(), String> {
        match (self, index) {
            (SideB::Model(name), Some(idx)) if idx.get(name).is_none() => {
                let names: Vec<&str> = idx.models.iter().map(|m| m.name.as_str()).collect();
                Err(format!(
                    "no model {name} in the models index (the models are: {}); no comparison is shown",
                    names.join(", ")
                ))
            }
            _ => Ok(()),
        }
    }
}

/// One of the papers' comparisons, set up in one click with the shipped models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Preset {
    /// The `preset=` value and the button's id stem.
    pub id: &'static str,
    pub label: &'static str,
    /// The page's model (A) and the model beside it (B), index names.
    pub a: &'static str,
    pub b: &'static str,
    /// A third model traced beside A and B on the same text, its lines drawn with theirs (the
    /// LAA overlay), while the preset is shown.
    pub reference: Option<&'static str>,
    pub tab: Tab,
    /// What the paper claims and where (shown under the buttons).
    pub claim: &'static str,
}

pub const PRESETS: [Preset; 3] = [
    Preset {
        id: "mep-alibi",
        label: "MEP kernels vs ALiBi",
        a: "mep",
        b: "alibi",
        reference: None,
        tab: Tab::Kernels,
        claim: "MEP (Gao, 2024, Fig. 1, Table 2): a mix of exponential and Gaussian kernels on ALiBi's \
                slopes decays more gently than ALiBi's single exponential and extrapolates better.",
    },
    Preset {
        id: "transnormer-fig2",
        label: "TransNormer Fig. 2: LAA",
        a: "transnormer",
        b: "linear-elu",
        // The paper's softmax reference is a vanilla Transformer: rope is the shipped softmax model
        // whose locality is learned, not imposed (alibi's −m·d penalty makes its attention local
        // by construction, which would flatter softmax in an LAA comparison).
        reference: Some("rope"),
        tab: Tab::Laa,
        claim: "TransNormer (Qin et al., 2022, Fig. 2): 1+elu linear attention dilutes (its LAA curve \
                stays near uniform), TransNormer's DiagAttention and NormAttention keep attention \
                local like softmax attention (here rope, drawn wide and pale).",
    },
    Preset {
        id: "regla-fig4",
        label: "ReGLA Fig. 4: gates from the extreme init",
        a: "regla-fig4",
        b: "gla-fig4",
        // Both initial checkpoints (regla-fig4-init, gla-fig4-init) come from the index's
        // `initial_of`, as for any model A or B on the gate tab.
        reference: None,
        tab: Tab::Gates,
        claim: "ReGLA (Lu et al., 2025, Fig. 4): from gate biases at ±6, ReGLA's refined gate leaves the \
                saturated extremes while GLA's sigmoid gate stays stuck there (below: both models' \
                gates before and after training).",
    },
];

/// The preset with id `id`.
pub fn preset(id: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.id == id)
}

/// A − B over the visible (causal) cells of two `[n, n]` matrices; masked cells are 0. `None`
/// when either matrix is too short.
pub fn difference(a: &[f32], b: &[f32], n: usize) -> Option<Vec<f32>> {
    if a.len() < n * n || b.len() < n * n {
        return None;
    }
    Some((0..n * n).map(|k| if k % n <= k / n { a[k] - b[k] } else { 0.0 }).collect())
}

/// One colour scale for two matrices (`[na, na]`, `[nb, nb]`) shown side by side, fitted to the
/// visible cells of both (diverging when either holds signed values).
pub fn shared_scale((a, na): (&[f32], usize), (b, nb): (&[f32], usize), signed: bool) -> Scale {
    fn visible(m: &[f32], n: usize) -> impl Iterator<Item = f32> + '_ {
        (0..n).flat_map(move |i| (0..=i).map(move |j| m.get(i * n + j).copied().unwrap_or(f32::NAN)))
    }
    Scale::fit(visible(a, na).chain(visible(b, nb)), signed)
}

/// `(layer, head)` of a selection as one side can show it (a model with fewer layers or heads shows
/// its last one), and what was changed when it was clamped.
pub fn clamp_selection(
    (layer, head): (usize, usize),
    layers: usize,
    heads: usize,
    model: &str,
) -> ((usize, usize), Option<String>) {
    let l = layer.min(layers.saturating_sub(1));
    let h = head.min(heads.saturating_sub(1));
    if (l, h) == (layer, head) {
        return ((l, h), None);
    }
    let note = format!(
        "{model} has {layers} layers of {heads} heads: layer {layer}, head {head} is shown as layer {l}, head {h}"
    );
    ((l, h), Some(note))
}

/// Which side a line of an overlay belongs to (and which channels a model's analyses run on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
    /// A preset's reference model.
    Reference,
}

/// A line of an overlay chart: side A solid, side B dashed, the reference wide and pale, in the
/// colour of its `index` (head or layer), so the same head of every model shares a colour.
#[derive(Debug, Clone, PartialEq)]
pub struct OverlayLine {
    pub label: String,
    pub side: Side,
    pub index: usize,
    pub points: Vec<(f64, f64)>,
}

/// Lines of one model for [`overlay`]: `(index, what, points)` each.
pub type Lines = Vec<(usize, String, Vec<(f64, f64)>)>;

/// The lines of both models on one axis: `a` and `b` are `(index, what, points)` per line (heads,
/// layers), labelled `A <name> · <what>`.
pub fn overlay(a_name: &str, a: Lines, b_name: &str, b: Lines) -> Vec<OverlayLine> {
    let mut out = side_lines(Side::A, a_name, a);
    out.extend(side_lines(Side::B, b_name, b));
    out
}

/// The lines of one side, labelled `<A|B|ref> <name> · <what>`.
pub fn side_lines(side: Side, name: &str, lines: Lines) -> Vec<OverlayLine> {
    let tag = match side {
        Side::A => "A",
        Side::B => "B",
        Side::Reference => "ref",
    };
    lines
        .into_iter()
        .map(|(index, what, points)| OverlayLine {
            label: format!("{tag} {name} · {what}"),
            side,
            index,
            points,
        })
        .collect()
}

/// A histogram over [0, 1] as `(bin centre, share of the values)` points, so histograms of
/// different token counts share an axis.
pub fn histogram_shares(counts: &[u64]) -> Vec<(f64, f64)> {
    let total = counts.iter().sum::<u64>().max(1) as f64;
    let n = counts.len().max(1) as f64;
    counts.iter().enumerate().map(|(k, &c)| ((k as f64 + 0.5) / n, c as f64 / total)).collect()
}

/// The caption's model line of a figure of both sides.
pub fn caption_model(a: &str, b: &str, difference: bool) -> String {
    if difference {
        format!("{a} − {b} (A − B)")
    } else {
        format!("{a} (A) vs {b} (B)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> ModelIndex {
        ModelIndex::from_json(
            r#"{"default": "mep", "models": [{"name": "mep", "family": "f", "description": "d"},
                {"name": "alibi", "family": "f", "description": "d"}]}"#,
        )
        .expect("index")
    }

    #[test]
    fn b_is_a_model_name_or_the_trained_model() {
        assert_eq!(SideB::parse("alibi"), Ok(SideB::Model("alibi".into())));
        assert_eq!(SideB::parse(TRAINED_CODE), Ok(SideB::Trained));
        assert!(SideB::parse("../x").is_err() && SideB::parse("").is_err() && SideB::parse("@x").is_err());
        assert_eq!(SideB::Trained.code(), "@trained");
        assert_eq!(SideB::Trained.label("mep"), "mep as trained");
        let idx = index();
        assert!(SideB::Model("alibi".into()).check(Some(&idx)).is_ok());
        assert!(SideB::Trained.check(Some(&idx)).is_ok());
        let stale = SideB::Model("gone".into()).check(Some(&idx)).unwrap_err();
        assert!(stale.contains("no model gone") && stale.contains("mep, alibi"), "{stale}");
        assert!(SideB::Model("gone".into()).check(None).is_ok());
    }

    #[test]
    fn presets_name_shipped_models_and_distinct_ids() {
        let shipped =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../www/models/index.json"))
                .expect("www/models/index.json");
        let idx = ModelIndex::from_json(&shipped).expect("shipped index");
        for p in PRESETS {
            assert!(idx.get(p.a).is_some() && idx.get(p.b).is_some(), "{} names a model not shipped", p.id);
            assert!(p.reference.is_none_or(|r| idx.get(r).is_some()), "{}: reference not shipped", p.id);
            assert_ne!(p.a, p.b);
            assert_ne!(p.reference, Some(p.b));
            assert_eq!(preset(p.id), Some(&p));
        }
        assert_eq!(preset("nope"), None);
        assert_eq!(preset("mep-alibi").map(|p| p.tab), Some(Tab::Kernels));
        // TransNormer Fig. 2 is three-way: a softmax model beside the two linear ones.
        let fig2 = preset("transnormer-fig2").expect("fig. 2");
        let softmax = fig2.reference.and_then(|r| idx.get(r)).expect("a reference model");
        assert_eq!(softmax.family, "softmax attention");
        // ReGLA Fig. 4: both models have an initial checkpoint in the index (before and after).
        let fig4 = preset("regla-fig4").expect("fig. 4");
        for m in [fig4.a, fig4.b] {
            assert_eq!(idx.initial_of(m).map(|i| i.name.clone()), Some(format!("{m}-init")));
        }
    }

    #[test]
    fn the_difference_is_a_minus_b_on_visible_cells() {
        let a = [1.0, 9.0, 0.25, 0.75];
        let b = [1.0, -9.0, 0.5, 0.5];
        assert_eq!(difference(&a, &b, 2), Some(vec![0.0, 0.0, -0.25, 0.25]));
        assert_eq!(difference(&a, &b[..3], 2), None);
    }

    #[test]
    fn both_sides_share_one_scale() {
        // Masked cells (9, −9) do not count; the range spans both matrices.
        let s = shared_scale((&[0.5, 9.0, 0.25, 0.75], 2), (&[1.0, -9.0, 0.1, 0.2], 2), false);
        assert_eq!((s.lo, s.hi), (0.1, 1.0));
        let d = shared_scale((&[-2.0, 0.0, 1.0, 0.5], 2), (&[0.5], 1), true);
        assert_eq!((d.lo, d.hi), (-2.0, 2.0));
        // Matrices of different sizes (texts tokenized differently) still share one range.
        let m = shared_scale((&[0.5], 1), (&[0.2, 7.0, 0.3, 0.9], 2), false);
        assert_eq!((m.lo, m.hi), (0.2, 0.9));
    }

    #[test]
    fn selections_clamp_to_each_model_and_say_so() {
        assert_eq!(clamp_selection((1, 2), 4, 4, "mep"), ((1, 2), None));
        let ((l, h), note) = clamp_selection((3, 5), 2, 4, "alibi");
        assert_eq!((l, h), (1, 3));
        let note = note.expect("a note");
        assert!(note.contains("alibi has 2 layers of 4 heads") && note.contains("layer 1, head 3"), "{note}");
    }

    #[test]
    fn overlays_label_both_sides_and_histograms_become_shares() {
        let lines = overlay(
            "mep",
            vec![(0, "head 0".into(), vec![(0.0, 1.0)])],
            "alibi",
            vec![(0, "head 0".into(), vec![(0.0, 2.0)]), (1, "head 1".into(), vec![])],
        );
        assert_eq!(lines.len(), 3);
        assert_eq!((lines[0].label.as_str(), lines[0].side), ("A mep · head 0", Side::A));
        assert_eq!(
            (lines[1].label.as_str(), lines[1].side, lines[1].index),
            ("B alibi · head 0", Side::B, 0)
        );
        assert_eq!(lines[1].points, vec![(0.0, 2.0)]);
        let r = side_lines(Side::Reference, "rope", vec![(2, "layer 2".into(), vec![(0.5, 0.25)])]);
        assert_eq!((r[0].label.as_str(), r[0].side, r[0].index), ("ref rope · layer 2", Side::Reference, 2));
        assert_eq!(histogram_shares(&[1, 3]), vec![(0.25, 0.25), (0.75, 0.75)]);
        assert_eq!(histogram_shares(&[0, 0]), vec![(0.25, 0.0), (0.75, 0.0)]);
        assert_eq!(caption_model("mep", "alibi", true), "mep − alibi (A − B)");
        assert_eq!(caption_model("mep", "alibi", false), "mep (A) vs alibi (B)");
    }
}
