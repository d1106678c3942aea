//! attnlab-core: the model format, the variant catalog and the CPU reference runtime.
//!
//! The CPU reference is the specification the trainer and the GPU backend are tested against: it is
//! written for clarity, and every attention formula cites the paper, section and equation it
//! implements. Each catalog variant lives in one module under [`variants`]; the shared kernels run its
//! [`lowering`].

pub mod activations;
pub mod analysis;
pub mod attention;
pub mod bias;
pub mod catalog;
pub mod config;
pub mod error;
pub mod gates;
pub mod hf;
pub mod kernels;
pub mod lowering;
pub mod lrpe;
pub mod model;
pub mod ops;
pub mod rng;
pub mod rotary;
pub mod sampling;
pub mod steer;
#[cfg(test)]
mod test_util;
pub mod tokenizer;
pub mod variants;
pub mod weights;

pub use config::{AttentionSpec, ModelConfig};
pub use error::{Error, Result};
pub use model::{Model, Session, Trace};
pub use sampling::{Sampler, SamplingConfig};
pub use tokenizer::Tokenizer;
