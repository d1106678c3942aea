//! Typed errors for every load, parse and run path. Nothing in attnlab-core panics on user data.

use thiserror::Error;

/// Every failure attnlab-core can report. Messages name the field, tensor or value at fault.
#[derive(Debug, Error)]
pub enum Error {
    /// `config.json` is not valid JSON or does not match the schema.
    #[error("config.json: {0}")]
    ConfigParse(String),
    /// A config field has a bad value; `field` is a JSON path such as `layers[2].block_size`.
    #[error("config.json: field `{field}`: {reason}")]
    ConfigField { field: String, reason: String },
    /// A variant id that is not in the catalog.
    #[error("unknown variant `{0}` (known: {known})", known = crate::config::VARIANT_IDS.join(", "))]
    UnknownVariant(String),
    /// The safetensors container could not be parsed (truncated, corrupt header, bad offsets).
    #[error("model.safetensors: {0}")]
    SafetensorsParse(String),
    /// A tensor the config requires is absent.
    #[error("model.safetensors: missing tensor `{0}`")]
    MissingTensor(String),
    /// A tensor that no part of the config uses.
    #[error("model.safetensors: unexpected tensor `{0}` (not used by this config)")]
    ExtraTensor(String),
    /// A tensor whose shape differs from what the config implies.
    #[error("model.safetensors: tensor `{name}` has shape {found:?}, expected {expected:?}")]
    TensorShape { name: String, expected: Vec<usize>, found: Vec<usize> },
    /// A tensor with a dtype other than F32, F16 or BF16.
    #[error("model.safetensors: tensor `{name}` has dtype {found}, expected F32, F16 or BF16")]
    TensorDtype { name: String, found: String },
    /// A tensor holding NaN or ±inf.
    #[error("model.safetensors: tensor `{name}` has a non-finite value at flat index {index}")]
    NonFinite { name: String, index: usize },
    /// tokenizer.json could not be loaded or does not fit the model.
    #[error("tokenizer.json: {0}")]
    Tokenizer(String),
    /// A file could not be read or written.
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    /// The prompt is empty (after tokenization).
    #[error("empty prompt: give at least one token of text")]
    EmptyPrompt,
    /// The context would exceed the model's configured maximum.
    #[error("context of {requested} tokens exceeds the model's max_context {max} (raise max_context in config.json or shorten the input)")]
    ContextTooLong { requested: usize, max: usize },
    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary (size {vocab})")]
    TokenOutOfRange { id: u32, vocab: usize },
    /// A file of a Hugging Face checkpoint is unusable (`file` names it; the reason names the field or
    /// tensor).
    #[error("{file}: {reason}")]
    Import { file: String, reason: String },
    /// An architecture or option the importer does not implement; refused, never approximated.
    #[error("{0}")]
    Unsupported(String),
    /// An invalid argument to a runtime call (sampling settings, overrides, lengths).
    #[error("invalid argument `{name}`: {reason}")]
    InvalidArgument { name: String, reason: String },
}

/// Shorthand result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Convenience constructor for [`Error::ConfigField`].
    pub fn field(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::ConfigField { field: field.into(), reason: reason.into() }
    }
    /// Convenience constructor for [`Error::InvalidArgument`].
    pub fn arg(name: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument { name: name.into(), reason: reason.into() }
    }
    /// Convenience constructor for [`Error::Import`].
    pub fn import(file: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::Import { file: file.into(), reason: reason.into() }
    }
    /// Convenience constructor for [`Error::Io`].
    pub fn io(path: impl AsRef<std::path::Path>, err: impl std::fmt::Display) -> Self {
        Error::Io { path: path.as_ref().display().to_string(), reason: err.to_string() }
    }
}
