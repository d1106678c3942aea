//! attnlab-train: a candle (CPU) trainer for every attention variant of attnlab.
//!
//! * [`TrainModel`] holds one [`candle_core::Var`] per tensor of `attnlab_core::model::tensor_specs`
//!   and runs the training-form forward pass (full sequences, batch `[B, T]`) with autograd; it reads
//!   and writes exactly the core's model folder (`config.json` + `model.safetensors`).
//! * [`optim`]: AdamW with serialisable moments, warmup + cosine schedule, global-norm clipping.
//! * [`data`]: Brown corpus preparation (`attnlab data brown`) and token datasets.
//! * [`trainer`]: the training loop with validation, checkpoints, resume and `history.json`.
//! * `fused`: the attention softmax and the cross-entropy as single-pass CPU ops (candle's
//!   composites remain as [`TrainModel::with_library_ops`]); `scan`: gated linear attention's
//!   recurrence as one op, forward and backward (the chunked composite remains beside it).
//! * [`finetune`]: a step-at-a-time fine-tune on one text, without files (the page's worker).
//! * `gpu` (feature `gpu`): the same step on the GPU (`attnlab_gpu::train`), host-owned learned
//!   distance tables differentiated here.
//!
//! The parity tests pin the trainer's logits to the core CPU reference for every variant, and its
//! gradients (fused and composite paths) to an f64 reference of the same model
//! ([`TrainModel::in_f64`]).

mod attn;
pub mod data;
pub mod error;
pub mod finetune;
mod fused;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod model;
pub mod optim;
pub mod reference;
mod scan;
pub mod trainer;

pub use error::{Result, TrainError};
pub use model::TrainModel;
