//! What the page's two threads say to each other. The model lives in a dedicated Web Worker
//! (`worker/`: loading, generation on either backend, the lab's analyses); the page's main thread
//! (`client.rs`, `host.rs`, the components) only renders. Messages are [`ToWorker`] and
//! [`FromWorker`], encoded with postcard (compact, and exact for every f32/f64, infinities
//! included, which JSON is not); the bytes travel as a transferred `ArrayBuffer`.
//!
//! Plain Rust, compiled and tested natively: both sides use the same types, so a message that
//! encodes decodes, and a change of a type changes both ends.

use attnlab_core::analysis::{GateStats, KernelCurve, MapWindow, PplPoint};
use attnlab_core::attention::{AttnStage, LayerAttention};
use attnlab_core::AttentionSpec;
use attnlab_train::finetune::{TuneOptions, TuneStep};
use serde::{Deserialize, Serialize};

use crate::backend::{Active, BackendState, Choice};
use crate::engine::{GenSettings, ModelInfo};
use crate::lab::{BiasEdit, TraceView};

/// A model the worker holds: each load, open or bias edit makes a new one.
pub type ModelId = u32;

/// What the page knows of a model the worker holds (no weights).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMeta {
    pub id: ModelId,
    pub info: ModelInfo,
    /// The attention specs as trained, and as used now (after the bias sliders' edit).
    #[serde(with = "as_json")]
    pub trained: Vec<AttentionSpec>,
    #[serde(with = "as_json")]
    pub current: Vec<AttentionSpec>,
    pub edit: BiasEdit,
}

/// Values that cross as their JSON text: attention specs (`"variant"`-tagged) and kernel terms
/// (optional fields left out) need a self-describing format, which postcard is not.
pub mod as_json {
    use serde::de::{DeserializeOwned, Error};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Serialize, S: Serializer>(value: &T, s: S) -> Result<S::Ok, S::Error> {
        let json = serde_json::to_string(value).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&json)
    }

    pub fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let json = String::deserialize(d)?;
        serde_json::from_str(&json).map_err(D::Error::custom)
    }
}

/// Where a model's files came from: shown under the model's description.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// Files read from the browser cache, and fetched from the network.
    pub from_cache: usize,
    pub from_network: usize,
    /// Why the browser cache was not used (or not written), when it was not.
    pub cache_off: Option<String>,
    /// One line per cached file that was corrupt and fetched again.
    pub notices: Vec<String>,
}

impl LoadReport {
    /// `data-source` of the line: "cache", "network" or "mixed".
    pub fn code(&self) -> &'static str {
        match (self.from_cache, self.from_network) {
            (_, 0) => "cache",
            (0, _) => "network",
            _ => "mixed",
        }
    }

    pub fn text(&self) -> String {
        let total = self.from_cache + self.from_network;
        let mut text = match (self.from_cache, self.from_network) {
            (_, 0) => "model files: from the browser cache (no download)".to_string(),
            (0, _) if self.cache_off.is_none() => {
                "model files: fetched from the network, now kept in the browser cache".to_string()
            }
            (0, _) => "model files: fetched from the network".to_string(),
            (c, _) => format!("model files: {c} of {total} from the browser cache, the rest fetched"),
        };
        if let Some(why) = &self.cache_off {
            text.push_str(&format!(" (not cached: {why})"));
        }
        text
    }
}

/// Prefill throughput of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PrefillStats {
    pub tokens: usize,
    pub ms: f64,
}

/// Decode throughput of a run: `compute_ms` is time inside the engine (the raw speed), `wall_ms`
/// the worker's wall time since the first token.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct DecodeStats {
    pub tokens: usize,
    pub compute_ms: f64,
    pub wall_ms: f64,
}

/// What a run reports, in order: status lines, prefill progress and its end, tokens (the whole text
/// so far, batched), the backend when it changes, and the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RunEvent {
    Status(String),
    /// `done` of `total` prompt tokens are through the model.
    Prefilling {
        done: usize,
        total: usize,
    },
    Prefilled(PrefillStats),
    Token {
        text: String,
        stats: DecodeStats,
    },
    /// The run continues on this backend (a GPU run that failed before its first token reruns on
    /// the CPU).
    Backend(Active),
    /// The final status line, or the error for the error box.
    Finished(Result<String, String>),
}

/// What a fine-tune ("train on this text") reports, in order: its setup, each finished step, and
/// the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TuneEvent {
    Started(TuneSetup),
    /// A step finished in `ms` milliseconds of the worker.
    Step {
        step: TuneStep,
        ms: f64,
    },
    /// The fine-tuned model is the page's model now; or why not (the model stays as it was).
    Finished(Result<Box<Tuned>, String>),
}

/// How a fine-tune was set up: the text is `tokens` tokens, trained in windows of `seq_len`;
/// `loss_before` is the text's mean next-token loss before any step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneSetup {
    /// Where the steps run ("WebGPU · <adapter>", or the CPU, with why not WebGPU if it was asked).
    pub device: String,
    pub tokens: usize,
    pub seq_len: usize,
    pub steps: usize,
    pub params: usize,
    pub loss_before: f32,
}

/// A finished (or stopped) fine-tune: the model after its last finished step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuned {
    pub meta: ModelMeta,
    pub summary: TuneSummary,
}

/// How a fine-tune went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneSummary {
    pub steps: usize,
    /// Stopped before the last step (by Stop, or for `note`).
    pub stopped: bool,
    /// Why training ended early other than by Stop (a non-finite loss), if it did.
    pub note: Option<String>,
    /// The text's mean next-token loss before the first and after the last step.
    pub loss_before: f32,
    pub loss_after: f32,
    /// Training tokens per second of the worker.
    pub tokens_per_s: f64,
}

/// A model opened from the user's files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Opened {
    pub meta: ModelMeta,
    /// The name it is shown under (its folder's, else from its config).
    pub name: String,
    /// What it is and what it needed ("opened … from local files").
    pub line: String,
}

/// What a model loaded beside the page's model is for: ReGLA Fig. 4's initial checkpoint (the gate
/// view), compare mode's model B, B's initial checkpoint (the gate view), or a preset's reference
/// model (TransNormer Fig. 2's softmax model, traced beside A and B). Each belongs to a page model
/// and goes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Aux {
    Initial,
    B,
    InitialB,
    Reference,
}

/// An analysis the lab asks of a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Task {
    /// Attention matrices at `stage`, gate statistics and LAA of `text` (cut to the trace limit).
    Trace { text: String, stage: AttnStage },
    /// One layer's maps over `window` of the WebGPU trace of `text` at `stage` (the heatmap's
    /// zoom; the worker traces the text again when it no longer holds that trace).
    Tile { text: String, stage: AttnStage, layer: usize, window: MapWindow },
    /// Gate statistics of `text` alone (ReGLA Fig. 4's initial checkpoint).
    GateStats { text: String },
    /// B_h(d) and exp(B_h(d)) of every head of `layer`, d < n.
    KernelCurves { layer: usize, n: usize },
    /// Perplexity against context length on `text` (progress comes as [`FromWorker::Sweep`]).
    PplSweep { text: String },
    /// The model's three files (a fine-tuned model's download).
    Files,
}

/// The answer to a [`Task`].
#[derive(Debug, Serialize, Deserialize)]
pub enum Answer {
    Trace(TraceView),
    Tile(LayerAttention),
    Gates(Vec<GateStats>),
    Curves(Vec<KernelCurve>),
    Sweep(Vec<PplPoint>),
    Files(ModelFiles),
}

/// A model as its folder's files: `config.json`, `model.safetensors`, `tokenizer.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFiles {
    pub config: String,
    pub weights: Vec<u8>,
    pub tokenizer: String,
}

/// From the page to the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToWorker {
    /// Load `models/<name>/` as the page's model. `seq` orders loads and opens: only the latest
    /// one becomes the page's model.
    Load {
        seq: u32,
        name: String,
    },
    /// Open the files sent with this message (with their paths in the picked folder, which a
    /// `File` sent to a worker does not carry) as the page's model.
    Open {
        seq: u32,
    },
    /// Load the index model `name` beside page model `of`, as its `aux` (a newer load of the same
    /// `aux` supersedes it).
    LoadAux {
        of: ModelId,
        aux: Aux,
        name: String,
    },
    /// Apply a bias edit to the trained page model `of`.
    Edit {
        of: ModelId,
        edit: BiasEdit,
    },
    /// The user's backend choice (Auto, WebGPU, CPU).
    Choose(Choice),
    /// "Try WebGPU again": probe the adapter and device anew.
    RetryGpu,
    Generate {
        run: u32,
        model: ModelId,
        prompt: String,
        settings: GenSettings,
    },
    /// Stop run `run` at its next token or prefill chunk.
    Stop {
        run: u32,
    },
    Analyze {
        req: u32,
        model: ModelId,
        task: Task,
    },
    /// The page no longer wants the answer to `req` (a sweep stops at its next slice).
    Cancel {
        req: u32,
    },
    /// Fine-tune the trained page model `of` on `text`; the result becomes the page's model.
    Tune {
        tune: u32,
        of: ModelId,
        text: String,
        options: TuneOptions,
    },
    /// Stop fine-tune `tune` after its current step (the model keeps the steps done).
    StopTune {
        tune: u32,
    },
    /// Are you there? (the page's watchdog, `client.rs`): answered with [`FromWorker::Pong`].
    Ping,
}

/// From the worker to the page.
#[derive(Debug, Serialize, Deserialize)]
pub enum FromWorker {
    /// The worker's wasm is running and hears messages.
    Ready,
    /// The backend state (the badge) and how many WebGPU probes there were.
    Backend {
        state: BackendState,
        probes: u32,
    },
    /// Progress of load or open `seq`.
    Progress {
        seq: u32,
        status: String,
        fraction: Option<f64>,
    },
    /// A load ended; on success the model is the page's model now.
    Loaded {
        seq: u32,
        result: Result<(ModelMeta, LoadReport), String>,
    },
    /// An open ended; on success the model is the page's model now.
    Opened {
        seq: u32,
        result: Result<Opened, String>,
    },
    /// Progress and end of a [`ToWorker::LoadAux`] (`name` as asked).
    AuxProgress {
        of: ModelId,
        aux: Aux,
        name: String,
        status: String,
    },
    AuxLoaded {
        of: ModelId,
        aux: Aux,
        name: String,
        result: Result<ModelMeta, String>,
    },
    /// The edited page model (a new id), or why the edit was refused (the last one stays).
    Edited {
        of: ModelId,
        result: Result<ModelMeta, String>,
    },
    Run {
        run: u32,
        event: RunEvent,
    },
    Answer {
        req: u32,
        result: Result<Answer, String>,
    },
    /// A perplexity sweep's progress: the fraction done and the lengths finished, and whether it
    /// runs on WebGPU.
    Sweep {
        req: u32,
        fraction: f64,
        points: Vec<PplPoint>,
        on_gpu: bool,
    },
    /// Bytes of the worker's wasm memory (what the model takes in the page).
    Memory {
        bytes: u64,
    },
    Tune {
        tune: u32,
        event: TuneEvent,
    },
    /// The answer to [`ToWorker::Ping`].
    Pong,
}

/// Why a message could not be read (a bug, never user input: both ends are this crate).
#[derive(Debug, thiserror::Error)]
#[error("worker message: {0}")]
pub struct WireError(#[from] postcard::Error);

/// The bytes of a message.
pub fn encode<T: Serialize>(msg: &T) -> Result<Vec<u8>, WireError> {
    Ok(postcard::to_allocvec(msg)?)
}

/// A message from its bytes.
pub fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, WireError> {
    Ok(postcard::from_bytes(bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use attnlab_core::analysis::{GateStats, KernelCurve};
    use attnlab_core::attention::AttnMatrixKind;
    use attnlab_core::variants::{KernelKind, KernelTerm};

    fn round_trip<T: Serialize + for<'a> Deserialize<'a>>(msg: &T) -> T {
        decode(&encode(msg).expect("encodes")).expect("decodes")
    }

    #[test]
    fn requests_survive_the_wire() {
        let settings = GenSettings { max_tokens: 7, temperature: 0.5, top_k: 3, top_p: 0.9, seed: 42 };
        let requests = [
            ToWorker::Load { seq: 3, name: "mep".into() },
            ToWorker::Generate { run: 9, model: 2, prompt: "Ünïcode ✓".into(), settings },
            ToWorker::Tune {
                tune: 4,
                of: 2,
                text: "Ünïcode ✓".into(),
                options: TuneOptions { steps: 30, lr: 3e-3, batch: 2, seq_len: 48, seed: 5 },
            },
            ToWorker::StopTune { tune: 4 },
            ToWorker::Edit {
                of: 1,
                edit: BiasEdit { slope_scale: 0.25, uniform_slope: Some(1.0 / 128.0), mix: None },
            },
            // Kernel terms leave `p` out unless set: only a self-describing format reads them back.
            ToWorker::Edit {
                of: 1,
                edit: BiasEdit {
                    slope_scale: 1.0,
                    uniform_slope: None,
                    mix: Some(vec![
                        KernelTerm { kernel: KernelKind::Exp, scale: 0.5, weight: 0.8, p: None },
                        KernelTerm { kernel: KernelKind::KerplePower, scale: 1.0, weight: 0.2, p: Some(1.5) },
                    ]),
                },
            },
            ToWorker::Analyze {
                req: 5,
                model: 2,
                task: Task::Trace { text: "a b".into(), stage: AttnStage::Biased },
            },
            ToWorker::Cancel { req: 5 },
            ToWorker::LoadAux { of: 2, aux: Aux::B, name: "alibi".into() },
        ];
        for r in requests {
            assert_eq!(round_trip(&r), r);
        }
    }

    #[test]
    fn model_descriptions_survive_the_wire() {
        // A hybrid with a kernel mix: the specs are `"variant"`-tagged, which postcard cannot read.
        let mut cfg = attnlab_core::ModelConfig::preset("mep", attnlab_core::config::SizePreset::default())
            .expect("preset");
        cfg.layers[1] =
            attnlab_core::ModelConfig::preset("regla", Default::default()).expect("preset").layers[0].clone();
        let model = attnlab_core::Model::random(cfg, 1).expect("model");
        let info = ModelInfo {
            name: "hybrid".into(),
            description: String::new(),
            variants: vec!["mep".into(), "regla".into()],
            n_layers: 2,
            n_heads: 4,
            d_model: 64,
            vocab_size: 320,
            train_context: 128,
            max_context: 512,
            params: model.weights().num_params(),
            architecture: Some("LlamaForCausalLM".into()),
        };
        let specs = model.config().layers.clone();
        let meta =
            ModelMeta { id: 4, info, trained: specs.clone(), current: specs, edit: BiasEdit::default() };
        let back = match round_trip(&FromWorker::Loaded {
            seq: 1,
            result: Ok((meta.clone(), LoadReport::default())),
        }) {
            FromWorker::Loaded { result: Ok((m, _)), .. } => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(back, meta);
        assert_eq!(back.current[1].variant_id(), "regla");
    }

    #[test]
    fn numbers_are_exact_and_infinities_survive() {
        // A kernel bias of a vanishing Gaussian is −∞: JSON would turn it into null.
        let curve = KernelCurve {
            layer: 1,
            head: 2,
            bias: vec![0.0, -1e-300, f64::NEG_INFINITY],
            kernel: vec![1.0, 0.1, 0.0],
        };
        let back =
            match round_trip(&FromWorker::Answer { req: 1, result: Ok(Answer::Curves(vec![curve.clone()])) })
            {
                FromWorker::Answer { req: 1, result: Ok(Answer::Curves(c)) } => c,
                other => panic!("{other:?}"),
            };
        assert_eq!(back[0].bias, curve.bias);
        assert_eq!(back[0].kernel, curve.kernel);
    }

    #[test]
    fn traces_keep_every_matrix_entry() {
        let heads: Vec<Vec<f32>> =
            (0..3).map(|h| (0..16).map(|i| (h * 16 + i) as f32 / 7.0).collect()).collect();
        let trace = TraceView {
            labels: vec!["a".into(), " b".into(), "c".into(), "d".into()],
            cut: 2,
            stride: 1,
            on_gpu: true,
            attention: vec![LayerAttention { layer: 0, kind: AttnMatrixKind::Probabilities, n: 4, heads }],
            summaries: Vec::new(),
            summary_tokens: 4,
            gates: vec![GateStats {
                layer: 0,
                variant: "gla".into(),
                quantity: "f".into(),
                head: None,
                histogram: vec![1, 2],
                mean: 0.5,
                saturation: 0.25,
                count: 3,
            }],
            position_gates: vec![crate::lab::PositionGates {
                layer: 0,
                quantity: "f".into(),
                heads: 1,
                means: vec![0.25, 0.5],
            }],
        };
        let back = match round_trip(&FromWorker::Answer { req: 2, result: Ok(Answer::Trace(trace)) }) {
            FromWorker::Answer { result: Ok(Answer::Trace(t)), .. } => t,
            other => panic!("{other:?}"),
        };
        assert_eq!(back.labels[1], " b");
        assert_eq!(back.cut, 2);
        assert_eq!(back.attention[0].heads[2][15], 47.0 / 7.0);
        assert_eq!(back.gates[0].saturation, 0.25);
        assert_eq!(back.position_gates[0].means, vec![0.25, 0.5]);
    }

    #[test]
    fn a_truncated_message_is_an_error_not_a_panic() {
        let bytes = encode(&ToWorker::Load { seq: 1, name: "alibi".into() }).expect("encodes");
        assert!(decode::<ToWorker>(&bytes[..bytes.len() - 2]).is_err());
    }
}
