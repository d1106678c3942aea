//! The lab views' runtime side: steering the position bias live, and the analyses the views plot.
//!
//! Like `engine`, this module names attnlab-core types and touches neither the DOM nor the clock, so
//! it is compiled and tested natively. Everything returns one-line `String` errors for the page's
//! error box; out-of-range slider values are clamped here (and the clamped value is what the page
//! shows), so no input can put a NaN into a plot.

use std::rc::Rc;

use attnlab_core::analysis::{self, GateStats, KernelCurve, LayerSummary, MapWindow, PplPoint};
use attnlab_core::attention::{AttnMatrixKind, AttnStage, LayerAttention, LayerGates, TraceRequest};
use attnlab_core::steer::BiasOverride;
use attnlab_core::variants::KernelTerm;
use attnlab_core::{AttentionSpec, Model, Session};

use crate::engine::Engine;

/// Longest text the attention/LAA/gate views trace on the CPU: every layer's `H × n × n` matrices are
/// kept, so 512 tokens of a 4-layer, 4-head model is 16 MiB. Longer texts are cut to this many tokens
/// (the view says so).
pub const MAX_TRACE_TOKENS: usize = 512;
/// Longest text the views trace on WebGPU: the worker keeps n rows per layer on the GPU (never
/// n × n), the maps come downsampled to at most 512 cells a side, and the heatmap's zoom fetches
/// windows of them (down to single tokens) on demand.
pub const MAX_GPU_TRACE_TOKENS: usize = 8192;
/// Cells a side of a zoom window: a window wider than this many tokens is binned.
pub const TILE_SIDE: usize = 256;
/// Largest value a slope or kernel-scale slider may set (larger is clamped).
pub const MAX_SCALE: f64 = 1024.0;
/// Largest kernel-mix weight (larger is clamped).
pub const MAX_WEIGHT: f64 = 100.0;
/// Tokens scored per length in the in-browser perplexity sweep (windows are capped to fit).
pub const PPL_TOKEN_BUDGET: usize = 4096;
/// Tokens per forward slice of the perplexity sweep: the page yields to the browser between slices.
pub const PPL_SLICE: usize = 128;
/// Histogram bins of the gate view.
pub const GATE_BINS: usize = 20;

/// A live edit of the position bias of every steerable layer (alibi, gaussian, mep).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BiasEdit {
    /// Multiplies every head's slope m_h (1 = as trained).
    pub slope_scale: f64,
    /// MEP Table 4 presets: every head gets this slope before `slope_scale` applies.
    pub uniform_slope: Option<f64>,
    /// Replaces the layer's kernel with this mix (the α, β, γ sliders); `None` keeps the layer's own.
    #[serde(with = "crate::protocol::as_json")]
    pub mix: Option<Vec<KernelTerm>>,
}

impl Default for BiasEdit {
    fn default() -> Self {
        BiasEdit { slope_scale: 1.0, uniform_slope: None, mix: None }
    }
}

impl BiasEdit {
    /// True when the edit changes nothing (the trained model).
    pub fn is_identity(&self) -> bool {
        *self == BiasEdit::default()
    }

    /// The same edit with every number clamped into the range the sliders allow (NaN → default).
    pub fn clamped(&self) -> BiasEdit {
        let clamp = |v: f64, max: f64, fallback: f64| if v.is_nan() { fallback } else { v.clamp(0.0, max) };
        BiasEdit {
            slope_scale: clamp(self.slope_scale, MAX_SCALE, 1.0),
            uniform_slope: self.uniform_slope.map(|u| clamp(u, MAX_SCALE, 1.0)),
            mix: self.mix.as_ref().map(|terms| {
                terms
                    .iter()
                    .map(|t| KernelTerm {
                        scale: clamp(t.scale, MAX_SCALE, 1.0),
                        weight: clamp(t.weight, MAX_WEIGHT, 0.0),
                        p: t.p.map(|p| if p.is_finite() && p > 0.0 { p.min(2.0) } else { 1.0 }),
                        ..*t
                    })
                    .collect()
            }),
        }
    }
}

/// Whether the sliders can steer a layer: parameter-free slope biases only (learned biases such as
/// KERPLE, T5 and FIRE are what training produced and are shown, not edited). The variant module
/// decides (core `steer`).
pub fn is_steerable(spec: &AttentionSpec) -> bool {
    BiasOverride::is_steerable(spec)
}

/// The kernel mix a steerable layer was trained with, written as MEP terms (ALiBi = one exp kernel).
pub fn trained_mix(spec: &AttentionSpec) -> Option<Vec<KernelTerm>> {
    spec.variant().kernel_mix()
}

impl BiasEdit {
    /// The core override this (clamped) slider state stands for.
    pub fn to_override(&self) -> BiasOverride {
        let edit = self.clamped();
        BiasOverride {
            slope_scale: Some(edit.slope_scale),
            uniform_slope: edit.uniform_slope,
            kernels: None,
            mix: edit.mix,
        }
    }
}

/// `spec` with `edit` applied (through the core's one steering implementation); layers that are not
/// steerable come back unchanged.
pub fn edited_spec(spec: &AttentionSpec, edit: &BiasEdit, n_heads: usize) -> Result<AttentionSpec, String> {
    edit.to_override().apply(spec, n_heads).map_err(|e| e.to_string())
}

/// What a trace of the current text gives the attention, LAA and gate views.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct TraceView {
    /// Readable label of every traced token (its own decoded text).
    pub labels: Vec<String>,
    /// Tokens of the text beyond the trace limit ([`MAX_TRACE_TOKENS`] on the CPU,
    /// [`MAX_GPU_TRACE_TOKENS`] on WebGPU) that were left out.
    pub cut: usize,
    /// Tokens per map cell side: 1 for exact matrices, more when a long trace's maps were binned
    /// (`attention[l].n` cells a side cover `labels.len()` tokens).
    pub stride: usize,
    /// Traced on WebGPU: the worker keeps the trace, and the heatmap's zoom fetches windows of it.
    pub on_gpu: bool,
    pub attention: Vec<LayerAttention>,
    /// Per-layer LAA and head summaries; empty unless the trace was of the probabilities stage.
    pub summaries: Vec<LayerSummary>,
    /// Tokens the summaries cover: the first ones, all of them when the maps are exact (LAA needs
    /// exact rows).
    pub summary_tokens: usize,
    pub gates: Vec<GateStats>,
    /// Gate values per token (mean over each head's features), for the views linked to the text.
    pub position_gates: Vec<PositionGates>,
}

/// How a trace covers its text: see the fields of [`TraceView`] of the same names.
#[derive(Debug, Clone, Copy)]
pub struct TraceShape {
    pub cut: usize,
    pub stride: usize,
    pub on_gpu: bool,
    pub summary_tokens: usize,
}

/// The zoom window of a heatmap over `tokens` tokens: `width` tokens a side from query `row0` and
/// key `col0` (clamped inside the map), binned to at most [`TILE_SIDE`] cells a side.
pub fn zoom_window(tokens: usize, width: usize, row0: usize, col0: usize) -> MapWindow {
    let width = width.clamp(1, tokens.max(1));
    let stride = width.div_ceil(TILE_SIDE);
    let side = width.div_ceil(stride);
    let last = tokens.saturating_sub(width);
    MapWindow { row0: row0.min(last), col0: col0.min(last), side, stride }
}

/// One gated layer's quantity (`f`, `g` or `r`) at every token: `means[pos * heads + h]` is head
/// h's mean over its key features at position `pos`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PositionGates {
    pub layer: usize,
    pub quantity: String,
    pub heads: usize,
    pub means: Vec<f32>,
}

/// Per-position, per-head means of every gate of `gates` (`[n, H, dk]` each).
pub fn position_gates(gates: &[LayerGates]) -> Vec<PositionGates> {
    let mut out = Vec::new();
    for lg in gates {
        let quantities = [("f", Some(&lg.f)), ("g", lg.g.as_ref()), ("r", lg.r.as_ref())];
        for (name, values) in quantities.into_iter().filter_map(|(n, v)| v.map(|v| (n, v))) {
            let means = values
                .chunks(lg.dim.max(1))
                .take(lg.n * lg.n_heads)
                .map(|c| (c.iter().map(|&v| v as f64).sum::<f64>() / c.len().max(1) as f64) as f32)
                .collect();
            out.push(PositionGates { layer: lg.layer, quantity: name.to_string(), heads: lg.n_heads, means });
        }
    }
    out
}

impl Engine {
    /// Attention specs the model was trained with.
    pub fn trained_specs(&self) -> &[AttentionSpec] {
        &self.trained
    }

    /// Current attention spec of every layer (after slider edits).
    pub fn current_specs(&self) -> &[AttentionSpec] {
        &self.model.config().layers
    }

    /// Whether any layer can be steered by the bias sliders.
    pub fn has_steerable_layers(&self) -> bool {
        self.trained.iter().any(is_steerable)
    }

    /// A copy of this engine with `edit` applied to the trained specs of every steerable layer.
    pub fn edited(&self, edit: &BiasEdit) -> Result<Engine, String> {
        let mut model = self.model.clone();
        let h = self.info.n_heads;
        for (i, spec) in self.trained.iter().enumerate() {
            let new = edited_spec(spec, edit, h)?;
            if new != model.config().layers[i] {
                model.set_layer_spec(i, new).map_err(|e| e.to_string())?;
            }
        }
        Ok(Engine {
            model,
            tokenizer: self.tokenizer.clone(),
            tokenizer_json: self.tokenizer_json.clone(),
            eos: self.eos,
            info: self.info.clone(),
            trained: self.trained.clone(),
        })
    }

    /// B_h(d) and exp(B_h(d)) of every head of `layer` for d = 0..n (n capped at max_context).
    pub fn kernel_curves(&self, layer: usize, n: usize) -> Result<Vec<KernelCurve>, String> {
        let n = n.clamp(1, self.info.max_context);
        analysis::kernel_curves(&self.model, layer, n).map_err(|e| e.to_string())
    }

    /// Tokenize `text` (no special tokens).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self.tokenizer.encode(text).map_err(|e| e.to_string())
    }

    /// Trace `text` (cut to [`MAX_TRACE_TOKENS`]): attention matrices at `stage`, gate statistics,
    /// and (probabilities stage only) LAA summaries.
    pub fn trace(&self, text: &str, stage: AttnStage) -> Result<TraceView, String> {
        let (ids, cut) = self.trace_tokens(text, MAX_TRACE_TOKENS)?;
        let req = TraceRequest { attention: true, stage, gates: true };
        let trace = self.model.trace(&ids, req).map_err(|e| e.to_string())?;
        // LAA and the head summaries are defined on the weights a layer uses (probabilities stage).
        let summaries = if stage == AttnStage::Probabilities {
            analysis::summarize_attention(&self.model, &trace.attention)
        } else {
            Vec::new()
        };
        let shape = TraceShape { cut, stride: 1, on_gpu: false, summary_tokens: ids.len() };
        Ok(self.trace_view(&ids, shape, trace.attention, summaries, &trace.gates))
    }

    /// The first tokens of `text` a trace covers (at most `limit` and the model's context), and
    /// how many were left out.
    pub fn trace_tokens(&self, text: &str, limit: usize) -> Result<(Vec<u32>, usize), String> {
        let mut all = self.encode(text)?;
        if all.is_empty() {
            return Err(attnlab_core::Error::EmptyPrompt.to_string());
        }
        let n = all.len().min(limit.min(self.info.max_context));
        let cut = all.len() - n;
        all.truncate(n);
        Ok((all, cut))
    }

    /// The views' side of a trace of `ids` (from either backend).
    pub fn trace_view(
        &self,
        ids: &[u32],
        shape: TraceShape,
        attention: Vec<LayerAttention>,
        summaries: Vec<LayerSummary>,
        gates: &[LayerGates],
    ) -> TraceView {
        let labels =
            ids.iter().map(|&id| self.tokenizer.decode(&[id]).unwrap_or_else(|_| format!("#{id}"))).collect();
        TraceView {
            labels,
            cut: shape.cut,
            stride: shape.stride,
            on_gpu: shape.on_gpu,
            attention,
            summaries,
            summary_tokens: shape.summary_tokens,
            gates: analysis::gate_stats(gates, GATE_BINS),
            position_gates: position_gates(gates),
        }
    }

    /// Gate statistics of `text` alone, cut to the same length as [`Engine::trace`] (no attention
    /// matrices are kept): what the gate view's before/after-training comparison needs of the
    /// initial checkpoint.
    pub fn gate_stats(&self, text: &str) -> Result<Vec<GateStats>, String> {
        let (ids, _) = self.trace_tokens(text, MAX_TRACE_TOKENS)?;
        let req = TraceRequest { attention: false, stage: AttnStage::Probabilities, gates: true };
        let trace = self.model.trace(&ids, req).map_err(|e| e.to_string())?;
        Ok(analysis::gate_stats(&trace.gates, GATE_BINS))
    }

    /// The default perplexity-sweep lengths: 1×, 2×, …, 32× the training length, keeping those that
    /// fit both `max_context` and a text of `text_tokens` tokens.
    pub fn sweep_lengths(&self, text_tokens: usize) -> Vec<usize> {
        let t = self.info.train_context.max(2);
        (0..6).map(|k| t << k).filter(|&n| n <= self.info.max_context && n <= text_tokens).collect()
    }
}

/// Is a matrix of this kind drawn with the diverging colormap (signed values)?
pub fn is_signed(kind: AttnMatrixKind) -> bool {
    matches!(kind, AttnMatrixKind::Scores | AttnMatrixKind::SignedNormalized)
}

/// Perplexity versus context length in slices of [`PPL_SLICE`] tokens, so the page can yield between
/// slices. Same protocol as [`analysis::perplexity`] (non-overlapping windows from the start, a
/// fresh state per window, every position but the first scored); windows per length are capped so
/// that about [`PPL_TOKEN_BUDGET`] tokens are scored per length.
pub struct PplSweep<'m> {
    model: &'m Model,
    cursor: SweepCursor,
    session: Session<'m>,
}

impl<'m> PplSweep<'m> {
    /// Plan a sweep of `engine` over `tokens` at `lengths`.
    pub fn new(engine: &'m Engine, tokens: Vec<u32>, lengths: &[usize]) -> Result<PplSweep<'m>, String> {
        let cursor = SweepCursor::new(engine.info.max_context, tokens, lengths)?;
        Ok(PplSweep::resume(engine, cursor))
    }

    /// Go on with `cursor` (at a window's start) on the CPU.
    pub fn resume(engine: &'m Engine, cursor: SweepCursor) -> PplSweep<'m> {
        PplSweep { model: &engine.model, cursor, session: engine.model.session() }
    }

    /// Run one slice. Returns `true` once every length is done.
    pub fn advance(&mut self) -> Result<bool, String> {
        let Some(slice) = self.cursor.next(PPL_SLICE) else {
            return Ok(true);
        };
        if slice.fresh {
            self.session = self.model.session();
        }
        let logits = self.session.prefill_all(self.cursor.input(&slice)).map_err(|e| e.to_string())?;
        let (nll, count) =
            analysis::score_rows(&logits, self.model.config().vocab_size, self.cursor.targets(&slice));
        self.cursor.record(&slice, nll, count);
        Ok(self.cursor.finished())
    }

    /// Fraction of the sweep's tokens processed, in [0, 1].
    pub fn progress(&self) -> f64 {
        self.cursor.progress()
    }

    /// Points of the lengths finished so far.
    pub fn points(&self) -> &[PplPoint] {
        self.cursor.points()
    }
}

/// The bookkeeping of a perplexity sweep, shared by the CPU and WebGPU paths: which slice of which
/// window runs next, and the points of the lengths finished. Same protocol as
/// [`analysis::perplexity`] (non-overlapping windows from the start, a fresh state per window, every
/// position but the first scored); windows per length are capped so that about
/// [`PPL_TOKEN_BUDGET`] tokens are scored per length.
#[derive(Clone)]
pub struct SweepCursor {
    tokens: Rc<[u32]>,
    /// (length, windows) per length.
    plan: Vec<(usize, usize)>,
    length_idx: usize,
    window: usize,
    /// Next position inside the current window.
    pos: usize,
    nll: f64,
    count: usize,
    points: Vec<PplPoint>,
    done_tokens: usize,
    total_tokens: usize,
}

/// One slice of a window: tokens `start..end` of the text, in the window that ends at `window_end`;
/// `fresh` when it starts the window (a new state).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SweepSlice {
    pub start: usize,
    pub end: usize,
    pub window_end: usize,
    pub fresh: bool,
}

impl SweepCursor {
    /// Plan a sweep over `tokens` at `lengths` for a model of `max_context` positions.
    pub fn new(max_context: usize, tokens: Vec<u32>, lengths: &[usize]) -> Result<SweepCursor, String> {
        if lengths.is_empty() {
            return Err("no context length fits this text and model (the text is too short?)".to_string());
        }
        let mut plan = Vec::with_capacity(lengths.len());
        for &len in lengths {
            if len < 2 {
                return Err(format!("context length {len} is too short (need at least 2)"));
            }
            if len > max_context {
                return Err(format!("context length {len} exceeds max_context {max_context}"));
            }
            let windows = analysis::window_count(tokens.len(), len, (PPL_TOKEN_BUDGET / len).max(1));
            if windows == 0 {
                return Err(format!(
                    "context length {len} is longer than the text ({} tokens)",
                    tokens.len()
                ));
            }
            plan.push((len, windows));
        }
        let total_tokens = plan.iter().map(|(l, w)| l * w).sum();
        Ok(SweepCursor {
            tokens: tokens.into(),
            plan,
            length_idx: 0,
            window: 0,
            pos: 0,
            nll: 0.0,
            count: 0,
            points: Vec::new(),
            done_tokens: 0,
            total_tokens,
        })
    }

    /// The next slice of at most `max` tokens (never across a window's end); `None` when done.
    pub fn next(&self, max: usize) -> Option<SweepSlice> {
        let &(len, _) = self.plan.get(self.length_idx)?;
        let window_start = self.window * len;
        let start = window_start + self.pos;
        let window_end = window_start + len;
        Some(SweepSlice {
            start,
            end: (start + max.max(1)).min(window_end),
            window_end,
            fresh: self.pos == 0,
        })
    }

    /// The tokens a slice feeds the model.
    pub fn input(&self, s: &SweepSlice) -> &[u32] {
        &self.tokens[s.start..s.end]
    }

    /// The tokens a slice's rows predict (row p predicts the next token; the window's last row has
    /// no target).
    pub fn targets(&self, s: &SweepSlice) -> &[u32] {
        &self.tokens[s.start + 1..s.window_end]
    }

    /// A slice ran: `nll` summed over its `count` scored rows.
    pub fn record(&mut self, s: &SweepSlice, nll: f64, count: usize) {
        let Some(&(len, windows)) = self.plan.get(self.length_idx) else { return };
        self.nll += nll;
        self.count += count;
        self.done_tokens += s.end - s.start;
        self.pos += s.end - s.start;
        if self.pos < len {
            return;
        }
        self.pos = 0;
        self.window += 1;
        if self.window == windows {
            let mean = self.nll / self.count.max(1) as f64;
            self.points.push(PplPoint {
                length: len,
                windows,
                tokens: self.count,
                nll: mean,
                ppl: mean.exp(),
            });
            (self.nll, self.count, self.window) = (0.0, 0, 0);
            self.length_idx += 1;
        }
    }

    /// Whether every length is done.
    pub fn finished(&self) -> bool {
        self.length_idx == self.plan.len()
    }

    /// Fraction of the sweep's tokens processed, in [0, 1].
    pub fn progress(&self) -> f64 {
        self.done_tokens as f64 / self.total_tokens.max(1) as f64
    }

    /// Points of the lengths finished so far.
    pub fn points(&self) -> &[PplPoint] {
        &self.points
    }
}

/// Text of a matrix as CSV: a header row of key labels, then one row per query.
pub fn matrix_csv(labels: &[String], matrix: &[f32], n: usize) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut out = String::from("query\\key");
    for l in labels.iter().take(n) {
        out.push(',');
        out.push_str(&quote(l));
    }
    out.push('\n');
    for i in 0..n {
        out.push_str(&quote(labels.get(i).map(String::as_str).unwrap_or("")));
        for j in 0..n {
            out.push(',');
            if j <= i {
                out.push_str(&format!("{}", matrix[i * n + j]));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use attnlab_core::config::SizePreset;
    use attnlab_core::tokenizer::INIT_CORPUS;
    use attnlab_core::variants::KernelKind;
    use attnlab_core::{ModelConfig, Tokenizer};

    const VOCAB: usize = 320;

    fn engine(variant: &str) -> Engine {
        let size = SizePreset {
            vocab_size: VOCAB,
            d_model: 32,
            n_layers: 2,
            n_heads: 4,
            head_dim: 8,
            ffn_hidden: 64,
            train_context: 16,
            max_context: 256,
        };
        let cfg = ModelConfig::preset(variant, size).expect("preset");
        let model = Model::random(cfg.clone(), 3).expect("model");
        // One folder per call: tests of one process (cargo test's threads) build the same variant.
        static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("attnlab-web-lab-{variant}-{}-{call}", std::process::id()));
        model.save_dir(&dir).expect("save");
        let c = std::fs::read(dir.join("config.json")).expect("config");
        let w = std::fs::read(dir.join("model.safetensors")).expect("weights");
        let _ = std::fs::remove_dir_all(&dir);
        let t = Tokenizer::train_byte_bpe(INIT_CORPUS, VOCAB).expect("tokenizer").to_json().expect("json");
        Engine::load(&c, &w, t.as_bytes()).expect("engine")
    }

    fn curve0(e: &Engine) -> Vec<f64> {
        e.kernel_curves(0, 64).expect("curves")[1].bias.clone()
    }

    /// MEP Eq. 17: ALiBi is B = −m·d, so scaling every slope scales the curve.
    /// Zoom windows: at most TILE_SIDE cells a side, binned above it, kept inside the map.
    #[test]
    fn zoom_windows_bin_to_the_tile_side_and_stay_inside_the_map() {
        let w = zoom_window(8192, 8192, 0, 0);
        assert_eq!((w.side, w.stride), (256, 32));
        let w = zoom_window(8192, 300, 8000, 10);
        assert_eq!((w.row0, w.col0, w.side, w.stride), (7892, 10, 150, 2));
        let w = zoom_window(100, 64, 50, 0);
        assert_eq!((w.row0, w.side, w.stride), (36, 64, 1));
        assert_eq!(zoom_window(100, 0, 0, 0).side, 1);
        assert!(zoom_window(8192, 8, 9000, 9000).check(8192, TILE_SIDE).is_ok());
    }

    #[test]
    fn slope_scale_scales_the_alibi_curve() {
        let e = engine("alibi");
        let base = curve0(&e);
        let edited = e.edited(&BiasEdit { slope_scale: 2.0, ..Default::default() }).expect("edit");
        let scaled = curve0(&edited);
        for (b, s) in base.iter().zip(&scaled) {
            assert!((2.0 * b - s).abs() < 1e-4 * (1.0 + b.abs()), "{b} {s}");
        }
        assert_ne!(base, scaled);
        // Reset: an identity edit gives the trained curve back.
        let reset = edited.edited(&BiasEdit::default()).expect("reset");
        assert_eq!(curve0(&reset), base);
    }

    /// MEP Table 4 presets: uniform slopes give every head the same curve −u·d.
    #[test]
    fn uniform_slope_preset_gives_identical_heads() {
        let e = engine("alibi");
        let u = 2f64.powi(-6);
        let edited = e.edited(&BiasEdit { uniform_slope: Some(u), ..Default::default() }).expect("edit");
        let curves = edited.kernel_curves(0, 32).expect("curves");
        for c in &curves {
            assert_eq!(c.bias, curves[0].bias);
            assert!((c.bias[10] + 10.0 * u).abs() < 1e-6, "{}", c.bias[10]);
        }
    }

    /// MEP Eqs. 25–26: the mix sliders turn an ALiBi model into a kernel mix evaluated by
    /// log-sum-exp; moving one weight changes the curve, and the all-on-one-kernel mix is that kernel.
    #[test]
    fn mix_weights_change_the_curve_and_extremes_stay_finite() {
        let e = engine("alibi");
        let mix = |w: [f64; 3]| BiasEdit {
            mix: Some(vec![
                KernelTerm { kernel: KernelKind::Exp, scale: 1.0, weight: w[0], p: None },
                KernelTerm { kernel: KernelKind::Exp, scale: 0.5, weight: w[1], p: None },
                KernelTerm { kernel: KernelKind::Gaussian, scale: 1.0, weight: w[2], p: None },
            ]),
            ..Default::default()
        };
        let a = curve0(&e.edited(&mix([1.0, 1.0, 1.0])).expect("a"));
        let b = curve0(&e.edited(&mix([1.0, 0.2, 1.0])).expect("b"));
        assert_ne!(a, b);
        // All weight on the first kernel = ALiBi (up to the weight's log, which is 0 at w = 1).
        let only_exp = curve0(&e.edited(&mix([1.0, 0.0, 0.0])).expect("exp"));
        let alibi = curve0(&e);
        for (x, y) in only_exp.iter().zip(&alibi) {
            assert!((x - y).abs() < 1e-4, "{x} {y}");
        }
        // Extremes: zero slopes, huge slopes, all weights zero (an error, not a NaN).
        let zero = e.edited(&BiasEdit { slope_scale: 0.0, ..mix([1.0, 1.0, 1.0]) }).expect("zero");
        assert!(curve0(&zero).iter().all(|v| v.is_finite()));
        let huge = e.edited(&BiasEdit { slope_scale: 1e9, ..mix([1.0, 1.0, 1.0]) }).expect("huge");
        assert!(curve0(&huge).iter().all(|v| v.is_finite()));
        let none = e.edited(&mix([0.0, 0.0, 0.0])).err().expect("all-zero weights must be refused");
        assert!(none.contains("weight"), "{none}");
        let nan = BiasEdit { slope_scale: f64::NAN, ..Default::default() }.clamped();
        assert_eq!(nan.slope_scale, 1.0);
    }

    /// The cursor's slices of any size score the same windows: 512-token slices on fresh states at
    /// each window's start (the WebGPU path's) give the CPU sweep's points.
    #[test]
    fn sweep_slices_of_any_size_give_the_same_points() {
        let e = engine("alibi");
        let ids = e.encode(INIT_CORPUS).expect("encode");
        let lengths = e.sweep_lengths(ids.len());
        let mut sweep = PplSweep::new(&e, ids.clone(), &lengths).expect("sweep");
        while !sweep.advance().expect("advance") {}
        let mut cursor = SweepCursor::new(e.info.max_context, ids, &lengths).expect("cursor");
        let mut session = e.model.session();
        while let Some(slice) = cursor.next(512) {
            if slice.fresh {
                session = e.model.session();
            }
            assert!(slice.end - slice.start <= 512 && slice.end <= slice.window_end);
            let logits = session.prefill_all(cursor.input(&slice)).expect("prefill");
            let (nll, count) = analysis::score_rows(&logits, e.info.vocab_size, cursor.targets(&slice));
            cursor.record(&slice, nll, count);
        }
        assert!(cursor.finished() && (cursor.progress() - 1.0).abs() < 1e-12);
        assert_eq!(cursor.points().len(), sweep.points().len());
        for (a, b) in cursor.points().iter().zip(sweep.points()) {
            assert_eq!((a.length, a.windows, a.tokens), (b.length, b.windows, b.tokens));
            assert!((a.nll - b.nll).abs() < 1e-5, "{}: {} vs {}", a.length, a.nll, b.nll);
        }
    }

    #[test]
    fn learned_biases_are_not_steered() {
        let e = engine("kerple-log");
        assert!(!e.has_steerable_layers());
        let edited = e.edited(&BiasEdit { slope_scale: 3.0, ..Default::default() }).expect("edit");
        assert_eq!(edited.current_specs(), e.trained_specs());
    }

    /// The sliced sweep reproduces analysis::perplexity (ARCHITECTURE §8) for both families.
    #[test]
    fn sliced_perplexity_matches_the_reference_protocol() {
        for variant in ["alibi", "regla"] {
            let e = engine(variant);
            let ids = e.encode(INIT_CORPUS).expect("encode");
            let lengths = e.sweep_lengths(ids.len());
            assert_eq!(lengths, vec![16, 32, 64, 128, 256]);
            let mut sweep = PplSweep::new(&e, ids.clone(), &lengths).expect("sweep");
            let mut slices = 0;
            while !sweep.advance().expect("advance") {
                slices += 1;
                assert!(sweep.progress() < 1.0 + 1e-12);
            }
            assert!(slices > lengths.len(), "long windows are cut into slices");
            for p in sweep.points() {
                let windows = p.windows;
                let reference = analysis::perplexity(&e.model, &ids, &[p.length], windows, |_, _| {})
                    .expect("reference")[0]
                    .clone();
                assert_eq!(reference.tokens, p.tokens);
                assert!(
                    (reference.nll - p.nll).abs() < 1e-4,
                    "{variant} {}: {} vs {}",
                    p.length,
                    reference.nll,
                    p.nll
                );
            }
        }
    }

    #[test]
    fn trace_gives_matrices_labels_laa_and_gates() {
        let e = engine("regla");
        let view = e.trace(INIT_CORPUS, AttnStage::Probabilities).expect("trace");
        assert_eq!(view.labels.len(), MAX_TRACE_TOKENS.min(256));
        assert!(view.cut > 0);
        assert_eq!(view.attention.len(), 2);
        assert_eq!(view.summaries.len(), 2);
        assert!(view.summaries.iter().all(|s| s.laa.auc.is_finite() && s.laa.auc > 0.0));
        assert!(view.gates.iter().any(|g| g.quantity == "f" && g.head.is_none()));
        // Per-position gates: every token, every head, each a mean of gate values in [0, 1].
        let f = view.position_gates.iter().find(|g| g.quantity == "f").expect("F per position");
        assert_eq!(f.means.len(), view.labels.len() * f.heads);
        assert!(f.means.iter().all(|v| (0.0..=1.0).contains(v)));
        let mean_f = view.gates.iter().find(|g| g.quantity == "f" && g.layer == f.layer && g.head.is_none());
        let overall = f.means.iter().map(|&v| v as f64).sum::<f64>() / f.means.len() as f64;
        assert!((overall - mean_f.expect("stats").mean).abs() < 1e-5, "the positions' mean is the layer's");
        let soft = engine("alibi");
        let logits = soft.trace("The jury said it", AttnStage::Logits).expect("logits");
        assert!(is_signed(logits.attention[0].kind));
        assert!(soft.trace("", AttnStage::Logits).is_err());
    }

    #[test]
    fn gate_stats_equal_the_full_trace() {
        let e = engine("regla");
        let full = e.trace(INIT_CORPUS, AttnStage::Probabilities).expect("trace").gates;
        let only = e.gate_stats(INIT_CORPUS).expect("gates");
        assert!(!only.is_empty());
        assert_eq!(only.len(), full.len());
        for (a, b) in only.iter().zip(&full) {
            assert_eq!(
                (a.layer, &a.quantity, a.head, &a.histogram),
                (b.layer, &b.quantity, b.head, &b.histogram)
            );
            assert_eq!(a.saturation, b.saturation);
        }
        assert!(engine("alibi").gate_stats("The jury").expect("no gates").is_empty());
        assert!(e.gate_stats("").is_err());
    }

    #[test]
    fn csv_has_a_header_and_one_row_per_query() {
        let labels = vec!["a".to_string(), "b\"".to_string()];
        let csv = matrix_csv(&labels, &[1.0, 0.0, 0.25, 0.75], 2);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines, vec!["query\\key,\"a\",\"b\"\"\"", "\"a\",1,", "\"b\"\"\",0.25,0.75"]);
    }
}
