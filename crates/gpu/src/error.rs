//! Typed errors of the GPU backend.

/// Everything that can go wrong on the GPU path; nothing here panics on GPU or user data.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no GPU adapter found (on Linux install Mesa lavapipe: mesa-vulkan-drivers libvulkan1): {0}")]
    NoAdapter(String),
    #[error("the GPU device could not be created: {0}")]
    RequestDevice(String),
    #[error("{what} needs {bytes} bytes, over the adapter limit of {limit} bytes")]
    ModelTooLarge { what: String, bytes: u64, limit: u64 },
    #[error("the adapter cannot run this model: {0}")]
    Unsupported(String),
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),
    #[error("the GPU ran out of memory: {0}")]
    OutOfMemory(String),
    #[error("GPU validation error: {0}")]
    Validation(String),
    #[error("GPU readback failed: {0}")]
    Readback(String),
    #[error(transparent)]
    Core(#[from] attnlab_core::Error),
}

/// Result with [`GpuError`].
pub type Result<T> = std::result::Result<T, GpuError>;
