//! Typed errors of the trainer. Every message is one line and names the file or field involved.

use std::path::Path;

/// Trainer error.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// An error from the core (config validation, model format, tokenizer).
    #[error("{0}")]
    Core(#[from] attnlab_core::Error),
    /// A tensor operation failed (a bug or an impossible shape).
    #[error("tensor operation failed: {0}")]
    Candle(#[from] candle_core::Error),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A file exists but its content is unusable.
    #[error("{path}: {reason}")]
    BadFile { path: String, reason: String },
    /// An option value is out of range or inconsistent with the model.
    #[error("invalid option `{name}`: {reason}")]
    InvalidOption { name: String, reason: String },
    /// The GPU trainer failed or refused the model (no adapter, an unsupported layer, a device
    /// error).
    #[cfg(feature = "gpu")]
    #[error("GPU training: {0}")]
    Gpu(#[from] attnlab_gpu::GpuError),
    /// The loss became NaN or infinite.
    #[error("loss is not finite ({loss}) at step {step}; stopping (lower --lr or check the data)")]
    NonFiniteLoss { step: usize, loss: f32 },
}

/// Trainer result.
pub type Result<T> = std::result::Result<T, TrainError>;

impl TrainError {
    /// I/O error on `path`.
    pub fn io(path: &Path, source: std::io::Error) -> TrainError {
        TrainError::Io { path: path.display().to_string(), source }
    }
    /// Unusable content in `path`.
    pub fn bad_file(path: &Path, reason: impl Into<String>) -> TrainError {
        TrainError::BadFile { path: path.display().to_string(), reason: reason.into() }
    }
    /// Bad option value.
    pub fn option(name: &str, reason: impl Into<String>) -> TrainError {
        TrainError::InvalidOption { name: name.to_string(), reason: reason.into() }
    }
}
