//! attnlab-core: the model format, the variant catalog and the CPU reference runtime.
//!
//! The CPU reference is the specification the trainer and the GPU backend are tested against: it is
//! written for clarity, and every attention formula cites the digest section it implements.

pub mod analysis;
pub mod attention;
pub mod bias;
pub mod catalog;
pub mod config;
pub mod error;
pub mod gates;
pub mod lrpe;
pub mod model;
pub mod ops;
pub mod sampling;
pub mod tokenizer;
pub mod weights;

pub use config::{AttentionSpec, ModelConfig};
pub use error::{Error, Result};
pub use model::{Model, Session, Trace};
pub use sampling::{Sampler, SamplingConfig};
pub use tokenizer::Tokenizer;
