//! The page's state in its URL: what a shared link carries, so that opening it elsewhere shows the
//! same view. Plain Rust, compiled and tested natively; the page keeps it in sync (`share.rs`).
//!
//! Every parameter is optional. [`UrlState::parse`] never fails: a parameter it cannot use (a value
//! out of range, a bad encoding, a name it does not know, one given twice) becomes a [`Warning`] that
//! names it, and the page uses its default. [`UrlState::query`] writes the state back, and parsing
//! what it writes gives the same state (property-tested below).
//!
//! | parameter | meaning |
//! |---|---|
//! | `model` | folder name under `models/` |
//! | `backend` | `auto`, `webgpu` (or `gpu`), `cpu` |
//! | `prompt` | the prompt (percent-encoded UTF-8; `+` reads as a space) |
//! | `max_tokens`, `temperature`, `top_k`, `top_p`, `seed` | the sampling settings, as in the form |
//! | `gen` | tokens of the shown output: the page regenerates them on load (same prompt, settings, seed) |
//! | `slope`, `uniform`, `mix` | the bias sliders: slope scale, MEP Table 4 uniform slope, kernel mix |
//! | `tab` | `kernels`, `attention`, `perplexity`, `laa`, `gates` |
//! | `kernel_layer`, `kernel_range`, `curve`, `log_y` | the kernel chart's layer, distance range (× training length), `bias` or `kernel`, log y (`1`/`0`) |
//! | `stage`, `layer`, `head`, `cell` | the attention view: `logits`, `biased` or `softmax`; zoomed layer and head; locked cell `query,key` |
//! | `b`, `compare`, `preset` | compare mode: model B (a folder name, or `@trained`: the page's model as trained), on (`1`) or off (`0`), the paper comparison it was set up by |
//!
//! `mix` is up to three `kernel:weight:scale[:p]` terms separated by commas, kernels `exp`,
//! `gaussian`, `kerple-log`, `kerple-power` (e.g. `mix=exp:0.33:1,exp:0.33:0.5,gaussian:0.33:1`).

use std::fmt::Write as _;

use attnlab_core::attention::AttnStage;
use attnlab_core::variants::{KernelKind, KernelTerm};

use crate::backend::Choice;
use crate::compare::{self, SideB};
use crate::form;
use crate::lab::{BiasEdit, MAX_SCALE, MAX_WEIGHT};

/// The lab's views (tabs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tab {
    #[default]
    Kernels,
    Attention,
    Extrapolation,
    Laa,
    Gates,
}

impl Tab {
    pub const ALL: [Tab; 5] = [Tab::Kernels, Tab::Attention, Tab::Extrapolation, Tab::Laa, Tab::Gates];

    /// The `tab=` value.
    pub fn code(self) -> &'static str {
        match self {
            Tab::Kernels => "kernels",
            Tab::Attention => "attention",
            Tab::Extrapolation => "perplexity",
            Tab::Laa => "laa",
            Tab::Gates => "gates",
        }
    }
}

/// What the kernel chart plots: the bias B(d) or the kernel exp(B(d)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Curve {
    #[default]
    Bias,
    Kernel,
}

/// Distance ranges of the kernel chart, in multiples of the training length.
pub const KERNEL_RANGES: [usize; 5] = [1, 2, 4, 8, 32];
/// The kernel chart's default distance range.
pub const DEFAULT_KERNEL_RANGE: usize = 4;
/// Most kernel-mix terms (the page's α, β, γ rows).
pub const MAX_MIX_TERMS: usize = 3;

/// A parameter of the link the page could not use, by name, with why and what is used instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub param: String,
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.param, self.message)
    }
}

/// Everything the URL can hold; `None` = not in the link (the page's default).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UrlState {
    pub model: Option<String>,
    pub backend: Option<Choice>,
    pub prompt: Option<String>,
    pub max_tokens: Option<usize>,
    pub temperature: Option<f32>,
    pub top_k: Option<usize>,
    pub top_p: Option<f32>,
    pub seed: Option<u64>,
    /// Tokens of the output shown when the link was made (regenerated on load).
    pub gen: Option<usize>,
    pub slope: Option<f64>,
    pub uniform: Option<f64>,
    pub mix: Option<Vec<KernelTerm>>,
    pub tab: Option<Tab>,
    pub kernel_layer: Option<usize>,
    pub kernel_range: Option<usize>,
    pub curve: Option<Curve>,
    pub log_y: Option<bool>,
    pub stage: Option<AttnStage>,
    pub layer: Option<usize>,
    pub head: Option<usize>,
    /// Locked heatmap cell `(query, key)`.
    pub cell: Option<(usize, usize)>,
    /// Compare mode: model B, whether the comparison is shown, and the preset (an id of
    /// [`compare::PRESETS`]) that set it up.
    pub b: Option<SideB>,
    pub compare: Option<bool>,
    pub preset: Option<String>,
}

/// The parameter names, in the order [`UrlState::query`] writes them.
pub const PARAMS: [&str; 24] = [
    "model",
    "backend",
    "prompt",
    "max_tokens",
    "temperature",
    "top_k",
    "top_p",
    "seed",
    "gen",
    "slope",
    "uniform",
    "mix",
    "tab",
    "kernel_layer",
    "kernel_range",
    "curve",
    "log_y",
    "stage",
    "layer",
    "head",
    "cell",
    "b",
    "compare",
    "preset",
];

/// Whether `name` can be a model folder under `models/`, or under a collection's folder there
/// (`len512/mep`): one or two parts of letters, digits, `.`, `_`, `-` (not `.` or `..`), at most 64
/// bytes each; so a link cannot point outside `models/` or at another origin.
pub fn is_model_name(name: &str) -> bool {
    let folder = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && p.len() <= 64
            && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    };
    match name.split_once('/') {
        Some((collection, model)) => folder(collection) && folder(model),
        None => folder(name),
    }
}

/// Percent-encode `text` for a query value: unreserved characters, `,`, `:` and `/` stay, every other
/// byte of its UTF-8 becomes `%XX`.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b',' | b':' | b'/') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Decode a query value: `%XX` escapes and `+` for a space; the result must be UTF-8.
pub fn decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut k = 0;
    while k < bytes.len() {
        match bytes[k] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes.get(k + 1..k + 3).and_then(|h| std::str::from_utf8(h).ok());
                let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
                let Some(byte) = byte else {
                    return Err(format!("bad percent-escape at byte {k}"));
                };
                out.push(byte);
                k += 2;
            }
            b => out.push(b),
        }
        k += 1;
    }
    String::from_utf8(out).map_err(|_| "not valid UTF-8 once decoded".to_string())
}

fn parse_float(text: &str, lo: f64, hi: f64, what: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= lo && *v <= hi)
        .ok_or_else(|| format!("{what}: a number from {lo} to {hi} was expected"))
}

fn parse_index(text: &str, what: &str) -> Result<usize, String> {
    text.trim().parse().map_err(|_| format!("{what}: a whole number from 0 was expected"))
}

fn kernel_code(k: KernelKind) -> &'static str {
    match k {
        KernelKind::Exp => "exp",
        KernelKind::Gaussian => "gaussian",
        KernelKind::KerpleLog => "kerple-log",
        KernelKind::KerplePower => "kerple-power",
    }
}

/// One `kernel:weight:scale[:p]` term of `mix`.
fn parse_term(text: &str) -> Result<KernelTerm, String> {
    let parts: Vec<&str> = text.split(':').collect();
    if !(3..=4).contains(&parts.len()) {
        return Err(format!("'{text}' is not kernel:weight:scale[:p]"));
    }
    let kernel = match parts[0] {
        "exp" => KernelKind::Exp,
        "gaussian" => KernelKind::Gaussian,
        "kerple-log" => KernelKind::KerpleLog,
        "kerple-power" => KernelKind::KerplePower,
        other => return Err(format!("unknown kernel '{other}' (exp, gaussian, kerple-log, kerple-power)")),
    };
    let weight = parse_float(parts[1], 0.0, MAX_WEIGHT, "weight")?;
    let scale = parse_float(parts[2], 0.0, MAX_SCALE, "scale")?;
    let p = match parts.get(3) {
        None => None,
        Some(p) => Some(
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|p| p.is_finite() && *p > 0.0 && *p <= 2.0)
                .ok_or_else(|| "p: a number in (0, 2] was expected".to_string())?,
        ),
    };
    Ok(KernelTerm { kernel, scale, weight, p })
}

fn parse_mix(text: &str) -> Result<Vec<KernelTerm>, String> {
    let terms = text.split(',').map(parse_term).collect::<Result<Vec<_>, _>>()?;
    if terms.len() > MAX_MIX_TERMS {
        return Err(format!("at most {MAX_MIX_TERMS} terms, got {}", terms.len()));
    }
    if !terms.iter().any(|t| t.weight > 0.0) {
        return Err("every weight is zero: the mix would have no kernel".to_string());
    }
    Ok(terms)
}

fn write_mix(terms: &[KernelTerm]) -> String {
    let term = |t: &KernelTerm| {
        let mut s = format!("{}:{}:{}", kernel_code(t.kernel), t.weight, t.scale);
        if let Some(p) = t.p {
            let _ = write!(s, ":{p}");
        }
        s
    };
    terms.iter().map(term).collect::<Vec<_>>().join(",")
}

fn parse_stage(text: &str) -> Option<AttnStage> {
    match text {
        "logits" => Some(AttnStage::Logits),
        "biased" => Some(AttnStage::Biased),
        "softmax" => Some(AttnStage::Probabilities),
        _ => None,
    }
}

/// The `stage=` value.
pub fn stage_code(stage: AttnStage) -> &'static str {
    match stage {
        AttnStage::Logits => "logits",
        AttnStage::Biased => "biased",
        AttnStage::Probabilities => "softmax",
    }
}

fn parse_cell(text: &str) -> Result<(usize, usize), String> {
    let (i, j) = text.split_once(',').ok_or("'query,key' was expected")?;
    let i = i.trim().parse().map_err(|_| format!("query '{i}' is not a whole number"))?;
    let j = j.trim().parse().map_err(|_| format!("key '{j}' is not a whole number"))?;
    Ok((i, j))
}

impl UrlState {
    /// The state a query string (`location.search`, with or without `?`) describes, and a warning
    /// for every parameter it could not use (that field stays `None`: the page's default).
    pub fn parse(search: &str) -> (UrlState, Vec<Warning>) {
        let query = search.strip_prefix('?').unwrap_or(search);
        let mut s = UrlState::default();
        let mut warnings = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = decode(raw_key).unwrap_or_else(|_| raw_key.to_string());
            let mut warn = |message: String| warnings.push(Warning { param: key.clone(), message });
            if !PARAMS.contains(&key.as_str()) {
                warn("not a parameter of this page; ignored".to_string());
                continue;
            }
            if seen.contains(&key) {
                warn("given more than once; the first is used".to_string());
                continue;
            }
            seen.push(key.clone());
            let value = match decode(raw_value) {
                Ok(v) => v,
                Err(e) => {
                    warn(format!("{e}; the default is used"));
                    continue;
                }
            };
            if let Err(e) = s.set(&key, &value) {
                warn(format!("'{value}' cannot be used ({e}); the default is used"));
            }
        }
        s.fill_preset();
        (s, warnings)
    }

    /// Set parameter `key` from its decoded `value`.
    fn set(&mut self, key: &str, v: &str) -> Result<(), String> {
        let bool_of = |v: &str| match v {
            "1" | "true" => Ok(true),
            "0" | "false" => Ok(false),
            _ => Err("1 or 0 was expected".to_string()),
        };
        match key {
            "model" if is_model_name(v) => self.model = Some(v.to_string()),
            "model" => {
                return Err(
                    "a model is named by its folder under models/ (letters, digits, '.', '_', '-'), or \
                     collection/folder"
                        .into(),
                )
            }
            "backend" => self.backend = Some(Choice::parse(v).ok_or("auto, webgpu or cpu was expected")?),
            "prompt" => self.prompt = Some(v.to_string()),
            "max_tokens" => self.max_tokens = Some(form::parse_max_tokens(v)?),
            "temperature" => self.temperature = Some(form::parse_temperature(v)?),
            "top_k" => self.top_k = Some(form::parse_top_k(v)?),
            "top_p" => self.top_p = Some(form::parse_top_p(v)?),
            "seed" => self.seed = Some(form::parse_seed(v)?),
            "gen" => {
                self.gen = Some(form::parse_max_tokens(v).map_err(|_| {
                    format!("a whole number from 1 to {} was expected", form::MAX_TOKENS_LIMIT)
                })?)
            }
            "slope" => self.slope = Some(parse_float(v, 0.0, MAX_SCALE, "slope scale")?),
            "uniform" => self.uniform = Some(parse_float(v, 0.0, MAX_SCALE, "uniform slope")?),
            "mix" => self.mix = Some(parse_mix(v)?),
            "tab" => {
                self.tab = Some(Tab::ALL.into_iter().find(|t| t.code() == v).ok_or_else(|| {
                    let names: Vec<&str> = Tab::ALL.iter().map(|t| t.code()).collect();
                    format!("one of {} was expected", names.join(", "))
                })?)
            }
            "kernel_layer" => self.kernel_layer = Some(parse_index(v, "layer")?),
            "kernel_range" => {
                let r = v.trim().parse().ok().filter(|r| KERNEL_RANGES.contains(r));
                self.kernel_range = Some(r.ok_or("one of 1, 2, 4, 8, 32 was expected")?);
            }
            "curve" => {
                self.curve = Some(match v {
                    "bias" => Curve::Bias,
                    "kernel" => Curve::Kernel,
                    _ => return Err("bias or kernel was expected".into()),
                })
            }
            "log_y" => self.log_y = Some(bool_of(v)?),
            "stage" => self.stage = Some(parse_stage(v).ok_or("logits, biased or softmax was expected")?),
            "layer" => self.layer = Some(parse_index(v, "layer")?),
            "head" => self.head = Some(parse_index(v, "head")?),
            "cell" => self.cell = Some(parse_cell(v)?),
            "b" => self.b = Some(SideB::parse(v)?),
            "compare" => self.compare = Some(bool_of(v)?),
            "preset" => {
                let p = compare::preset(v).ok_or_else(|| {
                    let ids: Vec<&str> = compare::PRESETS.iter().map(|p| p.id).collect();
                    format!("one of {} was expected", ids.join(", "))
                })?;
                self.preset = Some(p.id.to_string());
            }
            _ => return Err("not a parameter of this page".into()),
        }
        Ok(())
    }

    /// The query string of this state (`?a=1&b=2`, or `""` when it holds nothing), parameters in
    /// the order of [`PARAMS`].
    pub fn query(&self) -> String {
        let mut parts: Vec<(&str, String)> = Vec::new();
        let mut put = |key: &'static str, value: Option<String>| {
            if let Some(v) = value {
                parts.push((key, v));
            }
        };
        let num = |v: Option<usize>| v.map(|v| v.to_string());
        put("model", self.model.clone());
        put("backend", self.backend.map(|c| c.code().to_string()));
        put("prompt", self.prompt.clone());
        put("max_tokens", num(self.max_tokens));
        put("temperature", self.temperature.map(|v| v.to_string()));
        put("top_k", num(self.top_k));
        put("top_p", self.top_p.map(|v| v.to_string()));
        put("seed", self.seed.map(|v| v.to_string()));
        put("gen", num(self.gen));
        put("slope", self.slope.map(|v| v.to_string()));
        put("uniform", self.uniform.map(|v| v.to_string()));
        put("mix", self.mix.as_deref().map(write_mix));
        put("tab", self.tab.map(|t| t.code().to_string()));
        put("kernel_layer", num(self.kernel_layer));
        put("kernel_range", num(self.kernel_range));
        put("curve", self.curve.map(|c| if c == Curve::Bias { "bias" } else { "kernel" }.to_string()));
        put("log_y", self.log_y.map(|b| if b { "1" } else { "0" }.to_string()));
        put("stage", self.stage.map(|s| stage_code(s).to_string()));
        put("layer", num(self.layer));
        put("head", num(self.head));
        put("cell", self.cell.map(|(i, j)| format!("{i},{j}")));
        put("b", self.b.as_ref().map(|b| b.code().to_string()));
        put("compare", self.compare.map(|b| if b { "1" } else { "0" }.to_string()));
        put("preset", self.preset.clone());
        if parts.is_empty() {
            return String::new();
        }
        let joined: Vec<String> = parts.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
        format!("?{}", joined.join("&"))
    }

    /// What a link's `preset` sets and the link leaves out: models A and B, compare on, the tab.
    fn fill_preset(&mut self) {
        let Some(p) = self.preset.as_deref().and_then(compare::preset) else { return };
        self.model.get_or_insert_with(|| p.a.to_string());
        self.b.get_or_insert_with(|| SideB::Model(p.b.to_string()));
        self.compare.get_or_insert(true);
        self.tab.get_or_insert(p.tab);
    }

    /// Set up `preset`: its models, compare on and its tab.
    pub fn set_preset(&mut self, p: &compare::Preset) {
        self.model = Some(p.a.to_string());
        self.b = Some(SideB::Model(p.b.to_string()));
        self.compare = Some(true);
        self.tab = Some(p.tab);
        self.preset = Some(p.id.to_string());
    }

    /// The model B shown beside the page's model: `None` unless compare is on.
    pub fn compared(&self) -> Option<&SideB> {
        self.b.as_ref().filter(|_| self.compare == Some(true))
    }

    /// The bias edit of the sliders (the trained model when the link has none).
    pub fn edit(&self) -> BiasEdit {
        BiasEdit {
            slope_scale: self.slope.unwrap_or(1.0),
            uniform_slope: self.uniform,
            mix: self.mix.clone(),
        }
    }

    /// Keep `edit` (the trained model: no slider parameters).
    pub fn set_edit(&mut self, edit: &BiasEdit) {
        self.slope = (edit.slope_scale != 1.0).then_some(edit.slope_scale);
        self.uniform = edit.uniform_slope;
        self.mix = edit.mix.clone();
    }

    /// What the shown output depends on: model, prompt, sampling settings but the token limit (a
    /// shorter limit reproduces a prefix), seed and the bias edit.
    fn run_inputs(&self) -> impl PartialEq + '_ {
        let f = |v: Option<f32>| v.map(f32::to_bits);
        (
            (&self.model, &self.prompt, f(self.temperature), self.top_k, f(self.top_p), self.seed),
            (self.slope.map(f64::to_bits), self.uniform.map(f64::to_bits), &self.mix),
        )
    }

    /// Whether the output of a run made under `other` is what this state would regenerate.
    pub fn same_run(&self, other: &UrlState) -> bool {
        self.run_inputs() == other.run_inputs()
    }

    /// Apply `change`; when it changes what the shown output depends on (see `gen`), the output is
    /// no longer the link's to reproduce and `gen` goes.
    pub fn update(&mut self, change: impl FnOnce(&mut UrlState)) {
        let before = self.clone();
        change(self);
        if self.run_inputs() != before.run_inputs() && self.gen == before.gen {
            self.gen = None;
        }
        // A preset names its models: another model A or B is no longer that comparison.
        let p = self.preset.as_deref().and_then(compare::preset);
        if p.is_some_and(|p| {
            self.model.as_deref() != Some(p.a) || self.b != Some(SideB::Model(p.b.to_string()))
        }) {
            self.preset = None;
        }
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn params(warnings: &[Warning]) -> Vec<&str> {
        warnings.iter().map(|w| w.param.as_str()).collect()
    }

    #[test]
    fn an_empty_query_is_the_default_state() {
        for q in ["", "?", "?&&"] {
            assert_eq!(UrlState::parse(q), (UrlState::default(), vec![]));
        }
        assert_eq!(UrlState::default().query(), "");
    }

    #[test]
    fn every_parameter_is_read() {
        let q = "?model=alibi&backend=cpu&prompt=Once+upon%20a%20t%C3%AFme%26more&max_tokens=12&temperature=0.5\
                 &top_k=3&top_p=0.9&seed=42&gen=7&slope=4&uniform=0.25&mix=exp:0.5:1,gaussian:0.2:2,kerple-power:1:0.5:1.5\
                 &tab=attention&kernel_layer=1&kernel_range=8&curve=kernel&log_y=1&stage=logits&layer=1&head=3&cell=5,2\
                 &b=mep&compare=1&preset=mep-alibi";
        let (s, w) = UrlState::parse(q);
        assert_eq!(w, vec![]);
        let mix = vec![
            KernelTerm { kernel: KernelKind::Exp, weight: 0.5, scale: 1.0, p: None },
            KernelTerm { kernel: KernelKind::Gaussian, weight: 0.2, scale: 2.0, p: None },
            KernelTerm { kernel: KernelKind::KerplePower, weight: 1.0, scale: 0.5, p: Some(1.5) },
        ];
        assert_eq!(
            s,
            UrlState {
                model: Some("alibi".into()),
                backend: Some(Choice::Cpu),
                prompt: Some("Once upon a tïme&more".into()),
                max_tokens: Some(12),
                temperature: Some(0.5),
                top_k: Some(3),
                top_p: Some(0.9),
                seed: Some(42),
                gen: Some(7),
                slope: Some(4.0),
                uniform: Some(0.25),
                mix: Some(mix.clone()),
                tab: Some(Tab::Attention),
                kernel_layer: Some(1),
                kernel_range: Some(8),
                curve: Some(Curve::Kernel),
                log_y: Some(true),
                stage: Some(AttnStage::Logits),
                layer: Some(1),
                head: Some(3),
                cell: Some((5, 2)),
                b: Some(SideB::Model("mep".into())),
                compare: Some(true),
                preset: Some("mep-alibi".into()),
            }
        );
        assert_eq!(s.edit(), BiasEdit { slope_scale: 4.0, uniform_slope: Some(0.25), mix: Some(mix) });
        // Written back in a fixed order, with the prompt percent-encoded.
        assert!(s
            .query()
            .starts_with("?model=alibi&backend=cpu&prompt=Once%20upon%20a%20t%C3%AFme%26more&max_tokens=12"));
    }

    #[test]
    fn each_bad_parameter_is_named_and_left_at_its_default() {
        let q = "?model=../etc&backend=quantum&prompt=%E2%28%A1&max_tokens=0&temperature=abc&top_k=-1\
                 &top_p=1.5&seed=-3&gen=x&slope=NaN&uniform=5000&mix=exp:0:1&tab=nope&kernel_layer=a\
                 &kernel_range=3&curve=x&log_y=maybe&stage=x&layer=-1&head=h&cell=3&b=../x&compare=yes&preset=fig99";
        let (s, w) = UrlState::parse(q);
        assert_eq!(s, UrlState::default(), "nothing bad is used");
        assert_eq!(params(&w), PARAMS.to_vec(), "one warning per parameter, by name: {w:?}");
        let text = |p: &str| w.iter().find(|w| w.param == p).map(|w| w.to_string()).unwrap_or_default();
        assert!(
            text("temperature").contains("'abc'") && text("temperature").contains("0 to 10"),
            "{}",
            text("temperature")
        );
        assert!(text("prompt").contains("UTF-8"), "{}", text("prompt"));
        assert!(text("mix").contains("weight is zero"), "{}", text("mix"));
        assert!(text("model").contains("folder"), "{}", text("model"));
    }

    #[test]
    fn a_model_is_a_folder_or_a_collections_folder() {
        for ok in ["alibi", "mep-seed1", "len512/mep", "A.b_c"] {
            assert!(is_model_name(ok), "{ok}");
            let (s, w) = UrlState::parse(&format!("?model={}", encode(ok)));
            assert_eq!((s.model.as_deref(), w.len()), (Some(ok), 0), "{ok}");
        }
        assert_eq!(encode("len512/mep"), "len512/mep", "links stay readable");
        for bad in ["", "/", "len512/", "/mep", "a/b/c", "../mep", "len512/..", ".", "a b", "https://x"] {
            assert!(!is_model_name(bad), "{bad:?}");
        }
        assert!(!is_model_name(&"x".repeat(65)) && is_model_name(&format!("{0}/{0}", "x".repeat(64))));
    }

    #[test]
    fn unknown_repeated_and_badly_escaped_parameters_are_named() {
        let (s, w) =
            UrlState::parse("?zoom=3&seed=1&seed=2&prompt=%zz&mix=exp:1:1,exp:1:1,exp:1:1,exp:1:1&mix=");
        assert_eq!(s.seed, Some(1), "the first of a repeated parameter is used");
        assert_eq!(s.prompt, None);
        assert_eq!(params(&w), vec!["zoom", "seed", "prompt", "mix", "mix"]);
        assert!(w[0].message.contains("not a parameter"));
        assert!(w[1].message.contains("more than once"));
        assert!(w[2].message.contains("percent-escape"));
        assert!(w[3].message.contains("at most 3"));
    }

    #[test]
    fn the_output_is_dropped_when_what_it_depends_on_changes() {
        let (mut s, _) = UrlState::parse("?prompt=a&seed=1&gen=5&max_tokens=9");
        s.update(|s| s.max_tokens = Some(3));
        s.update(|s| s.tab = Some(Tab::Gates));
        assert_eq!(s.gen, Some(5), "the token limit and the view do not change the output");
        s.update(|s| s.seed = Some(2));
        assert_eq!(s.gen, None);
        s.update(|s| s.gen = Some(4));
        assert_eq!(s.gen, Some(4), "setting gen itself keeps it");
        s.update(|s| s.set_edit(&BiasEdit { slope_scale: 2.0, ..Default::default() }));
        assert_eq!(s.gen, None, "a bias edit changes the output");
        s.update(|s| s.gen = Some(4));
        s.update(|s| s.prompt = Some("b".into()));
        assert_eq!(s.gen, None);
    }

    #[test]
    fn compare_state_is_kept_and_a_preset_fills_what_its_link_leaves_out() {
        let (s, w) = UrlState::parse("?preset=transnormer-fig2");
        assert_eq!(w, vec![]);
        assert_eq!(s.model.as_deref(), Some("transnormer"));
        assert_eq!(s.compared(), Some(&SideB::Model("linear-elu".into())));
        assert_eq!(s.tab, Some(Tab::Laa));
        assert_eq!(UrlState::parse(&s.query()).0, s, "written back in full");
        // What the link says wins over the preset.
        let (s, _) = UrlState::parse("?preset=mep-alibi&tab=attention&compare=0");
        assert_eq!((s.tab, s.compared()), (Some(Tab::Attention), None));
        assert_eq!(s.b, Some(SideB::Model("alibi".into())), "B is kept while compare is off");
        let (t, _) = UrlState::parse("?b=%40trained&compare=1");
        assert_eq!(t.compared(), Some(&SideB::Trained));
        assert_eq!(t.query(), "?b=%40trained&compare=1");
        // Another model A or B is no longer the preset's comparison; another tab still is.
        let (mut s, _) = UrlState::parse("?preset=regla-fig4");
        s.update(|s| s.tab = Some(Tab::Attention));
        assert_eq!(s.preset.as_deref(), Some("regla-fig4"));
        s.update(|s| s.b = Some(SideB::Trained));
        assert_eq!(s.preset, None);
        let mut s = UrlState::default();
        s.update(|s| s.set_preset(&compare::PRESETS[0]));
        assert_eq!(s.preset.as_deref(), Some("mep-alibi"));
        s.update(|s| s.model = Some("alibi".into()));
        assert_eq!(s.preset, None);
    }

    #[test]
    fn decode_inverts_encode_and_reads_plus_as_space() {
        for t in ["", "a b+c&d=e#f%g", "naïve — 日本語 🙂", "\n\t\"'<>"] {
            assert_eq!(decode(&encode(t)).as_deref(), Ok(t));
        }
        assert_eq!(decode("a+b%2Bc").as_deref(), Ok("a b+c"));
        assert!(decode("%").is_err() && decode("%4").is_err() && decode("%FF").is_err());
    }

    fn term() -> impl Strategy<Value = KernelTerm> {
        let kind = prop_oneof![
            Just(KernelKind::Exp),
            Just(KernelKind::Gaussian),
            Just(KernelKind::KerpleLog),
            Just(KernelKind::KerplePower)
        ];
        let p = prop::option::of(prop_oneof![Just(2.0), 1e-6f64..2.0]);
        (kind, 0.0..=MAX_WEIGHT, 0.0..=MAX_SCALE, p).prop_map(|(kernel, weight, scale, p)| KernelTerm {
            kernel,
            weight,
            scale,
            p,
        })
    }

    prop_compose! {
        fn sampling()(max_tokens in prop::option::of(1..=form::MAX_TOKENS_LIMIT),
                      temperature in prop::option::of(0.0f32..=10.0),
                      top_k in prop::option::of(any::<usize>()),
                      top_p in prop::option::of(prop_oneof![Just(1.0f32), 1e-6f32..1.0]),
                      seed in prop::option::of(any::<u64>()),
                      gen in prop::option::of(1..=form::MAX_TOKENS_LIMIT))
            -> (Option<usize>, Option<f32>, Option<usize>, Option<f32>, Option<u64>, Option<usize>) {
            (max_tokens, temperature, top_k, top_p, seed, gen)
        }
    }

    prop_compose! {
        fn state()(model in prop::option::of("[A-Za-z0-9_-][A-Za-z0-9._-]{0,30}"),
                   backend in prop::option::of(prop_oneof![Just(Choice::Auto), Just(Choice::Gpu), Just(Choice::Cpu)]),
                   prompt in prop::option::of(any::<String>()),
                   sampling in sampling(),
                   slope in prop::option::of(0.0..=MAX_SCALE),
                   uniform in prop::option::of(0.0..=MAX_SCALE),
                   mix in prop::option::of(prop::collection::vec(term(), 1..=MAX_MIX_TERMS)
                       .prop_filter("some weight", |m| m.iter().any(|t| t.weight > 0.0))),
                   tab in prop::option::of(prop::sample::select(Tab::ALL.to_vec())),
                   kernel_layer in prop::option::of(any::<usize>()),
                   kernel_range in prop::option::of(prop::sample::select(KERNEL_RANGES.to_vec())),
                   curve in prop::option::of(prop_oneof![Just(Curve::Bias), Just(Curve::Kernel)]),
                   log_y in prop::option::of(any::<bool>()),
                   stage in prop::option::of(prop_oneof![Just(AttnStage::Logits), Just(AttnStage::Biased), Just(AttnStage::Probabilities)]),
                   layer in prop::option::of(any::<usize>()),
                   head in prop::option::of(any::<usize>()),
                   cell in prop::option::of((any::<usize>(), any::<usize>())),
                   b in prop::option::of(prop_oneof![Just(SideB::Trained),
                       "[A-Za-z0-9_-][A-Za-z0-9._-]{0,30}".prop_map(SideB::Model)]),
                   compare in prop::option::of(any::<bool>()))
            -> UrlState {
            let (max_tokens, temperature, top_k, top_p, seed, gen) = sampling;
            // (No preset: a preset fills what its link leaves out, tested on its own.)
            UrlState { model, backend, prompt, max_tokens, temperature, top_k, top_p, seed, gen, slope, uniform,
                mix, tab, kernel_layer, kernel_range, curve, log_y, stage, layer, head, cell, b, compare,
                preset: None }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Writing a state and reading it back gives the same state, with no warning.
        #[test]
        fn the_query_round_trips(s in state()) {
            let q = s.query();
            prop_assert_eq!(UrlState::parse(&q), (s.clone(), vec![]));
            // The written query is plain ASCII without spaces (safe in any address bar).
            prop_assert!(q.bytes().all(|b| b.is_ascii_graphic()));
        }

        /// Any query at all parses without a panic; every parameter it names is either used or warned
        /// about, and the state it gives writes a query that reads back warning-free.
        #[test]
        fn any_query_parses(q in "[?&=a-z_%0-9A-F,:.+-]{0,80}|.{0,80}") {
            let (s, warnings) = UrlState::parse(&q);
            for w in &warnings {
                prop_assert!(!w.message.is_empty());
            }
            let (again, w2) = UrlState::parse(&s.query());
            prop_assert_eq!(again, s);
            prop_assert!(w2.is_empty());
        }
    }
}
