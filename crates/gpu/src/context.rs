//! Adapter and device negotiation, error capture and async readback.

use crate::error::{GpuError, Result};
use std::sync::{Arc, Mutex};

/// What the adapter offers, as negotiated (the device is created with the adapter's own limits).
#[derive(Debug, Clone)]
pub struct GpuCaps {
    /// Adapter name and backend.
    pub adapter: String,
    /// Largest storage-buffer binding in bytes.
    pub max_storage_binding: u64,
    /// Largest buffer in bytes.
    pub max_buffer: u64,
    /// Storage buffers per shader stage.
    pub max_storage_buffers_per_stage: u32,
    /// Invocations per workgroup.
    pub max_invocations_per_workgroup: u32,
    /// Workgroups per dispatch dimension.
    pub max_workgroups_per_dim: u32,
    /// Workgroup shared memory in bytes.
    pub max_workgroup_storage: u32,
    /// `shader-f16` is available and enabled: f16 matrices are read as f16 vectors and widened by
    /// the hardware (shaders/weights_f16.wgsl); without it, as u32 words widened by integer
    /// operations (weights_half.wgsl).
    /// The math is f32 either way.
    pub shader_f16: bool,
    /// Subgroup operations are available (not required, not used).
    pub subgroups: bool,
    /// The adapter runs on the CPU (lavapipe, SwiftShader, WARP): more workgroups add no parallelism.
    pub cpu: bool,
    /// Loop iterations one shader invocation may run, all loops together, where the driver caps them:
    /// Mesa's llvmpipe (lavapipe) ends every loop once 65,535 have run (gallivm's
    /// `LP_MAX_TGSI_LOOP_ITERATIONS`), silently. `None`: no known cap.
    pub loop_iterations: Option<u64>,
}

/// gallivm's `LP_MAX_TGSI_LOOP_ITERATIONS` (Mesa, src/gallium/auxiliary/gallivm/lp_bld_limits.h).
const LLVMPIPE_LOOP_ITERATIONS: u64 = 65_535;

#[derive(Default)]
struct Sticky {
    lost: Option<String>,
    error: Option<GpuError>,
    /// Queue submissions so far (all clones of the context).
    submissions: u64,
    /// Bytes copied back to the host so far.
    readback_bytes: u64,
    /// Compute dispatches recorded so far.
    dispatches: u64,
}

/// Counters of the host ↔ device traffic (for tests and benchmarks: one submission per decoded
/// token; only the sampled token, or the logits asked for, come back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Traffic {
    pub submissions: u64,
    pub readback_bytes: u64,
    /// Compute dispatches recorded (what a decode step costs in launches).
    pub dispatches: u64,
    /// Buffers and bind groups alive on the device, and its buffer memory in bytes (wgpu's internal
    /// counters; native backends only, zero on the web): a session allocates once, so decoding
    /// leaves them unchanged.
    pub buffers: i64,
    pub bind_groups: i64,
    pub buffer_bytes: i64,
}

/// A device and queue plus the errors they reported.
#[derive(Clone)]
pub struct GpuContext {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    caps: GpuCaps,
    sticky: Arc<Mutex<Sticky>>,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext").field("caps", &self.caps).finish()
    }
}

/// What the kernels need at the least (checked against the adapter before anything is created).
const NEED_STORAGE_PER_STAGE: u32 = 7;
const NEED_INVOCATIONS: u32 = 256;
const NEED_WORKGROUP_STORAGE: u32 = 2048;

impl GpuContext {
    /// Find an adapter, read its limits and features, and create a device with them.
    pub async fn new() -> Result<GpuContext> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: None,
                apply_limit_buckets: false,
            })
            .await
            .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
        let info = adapter.get_info();
        let limits = adapter.limits();
        let features = adapter.features();
        let caps = GpuCaps {
            adapter: format!("{} ({:?})", info.name, info.backend),
            max_storage_binding: limits.max_storage_buffer_binding_size,
            max_buffer: limits.max_buffer_size,
            max_storage_buffers_per_stage: limits.max_storage_buffers_per_shader_stage,
            max_invocations_per_workgroup: limits.max_compute_invocations_per_workgroup,
            max_workgroups_per_dim: limits.max_compute_workgroups_per_dimension,
            max_workgroup_storage: limits.max_compute_workgroup_storage_size,
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            subgroups: features.contains(wgpu::Features::SUBGROUP),
            cpu: info.device_type == wgpu::DeviceType::Cpu,
            loop_iterations: info.name.contains("llvmpipe").then_some(LLVMPIPE_LOOP_ITERATIONS),
        };
        if caps.max_storage_buffers_per_stage < NEED_STORAGE_PER_STAGE
            || caps.max_invocations_per_workgroup < NEED_INVOCATIONS
            || caps.max_workgroup_storage < NEED_WORKGROUP_STORAGE
            || limits.max_compute_workgroup_size_x < NEED_INVOCATIONS
            || limits.max_compute_workgroup_size_y < 16
        {
            return Err(GpuError::Unsupported(format!(
                "adapter {} offers {} storage buffers per stage, {} invocations and {} bytes of shared \
                 memory per workgroup; the kernels need {NEED_STORAGE_PER_STAGE}, {NEED_INVOCATIONS} and \
                 {NEED_WORKGROUP_STORAGE}",
                caps.adapter,
                caps.max_storage_buffers_per_stage,
                caps.max_invocations_per_workgroup,
                caps.max_workgroup_storage
            )));
        }
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("attnlab"),
                // Negotiated, never assumed: asked for only where the adapter offers it.
                required_features: if caps.shader_f16 {
                    wgpu::Features::SHADER_F16
                } else {
                    wgpu::Features::empty()
                },
                required_limits: limits,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::RequestDevice(e.to_string()))?;
        let sticky = Arc::new(Mutex::new(Sticky::default()));
        let s = sticky.clone();
        device.set_device_lost_callback(move |reason, msg| {
            if let Ok(mut g) = s.lock() {
                g.lost = Some(format!("{reason:?}: {msg}"));
            }
        });
        let s = sticky.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            if let Ok(mut g) = s.lock() {
                if g.error.is_none() {
                    g.error = Some(convert(e));
                }
            }
        }));
        Ok(GpuContext { device, queue, caps, sticky })
    }

    /// The negotiated capabilities.
    pub fn caps(&self) -> &GpuCaps {
        &self.caps
    }

    /// The same device with the largest storage binding lowered to `bytes` (never raised): models
    /// are then checked as on a smaller adapter, before any buffer is created. Tests use it for
    /// [`GpuError::ModelTooLarge`]; a caller may use it to keep headroom.
    pub fn with_binding_limit(&self, bytes: u64) -> GpuContext {
        let mut c = self.clone();
        c.caps.max_storage_binding = c.caps.max_storage_binding.min(bytes);
        c
    }

    /// This context with f16 matrices read as u32 words (integer widening) even where shader-f16
    /// is enabled: both paths can be tested and measured on one adapter.
    pub fn without_shader_f16(&self) -> GpuContext {
        let mut c = self.clone();
        c.caps.shader_f16 = false;
        c
    }

    /// Destroy the device, as a browser does when the GPU process resets: every later call on this
    /// context (and its clones) fails with [`GpuError::DeviceLost`]. Lets callers test their CPU
    /// fallback; the recorded loss is set at once, before the driver's callback arrives.
    pub fn destroy(&self) {
        if let Ok(mut g) = self.sticky.lock() {
            g.lost.get_or_insert_with(|| "Destroyed: the device was destroyed".to_string());
        }
        self.device.destroy();
    }

    /// Submissions and readback bytes since the context was created (shared by its clones).
    pub fn traffic(&self) -> Traffic {
        let hal = self.device.get_internal_counters().hal;
        let [buffers, bind_groups, buffer_bytes] =
            [hal.buffers.read(), hal.bind_groups.read(), hal.buffer_memory.read()].map(|n| n as i64);
        self.sticky
            .lock()
            .map(|g| Traffic {
                submissions: g.submissions,
                readback_bytes: g.readback_bytes,
                dispatches: g.dispatches,
                buffers,
                bind_groups,
                buffer_bytes,
            })
            .unwrap_or_default()
    }

    /// Count `n` compute dispatches recorded into a pass.
    pub(crate) fn count_dispatches(&self, n: u64) {
        if let Ok(mut g) = self.sticky.lock() {
            g.dispatches += n;
        }
    }

    /// Submit one command buffer inside the error scopes, counting it.
    pub(crate) async fn submit(&self, cmd: wgpu::CommandBuffer) -> Result<()> {
        if let Ok(mut g) = self.sticky.lock() {
            g.submissions += 1;
        }
        self.scoped(|| self.queue.submit([cmd])).await.map(|_| ())
    }

    /// Fail if the device was lost or reported an error outside a scope.
    pub(crate) fn check(&self) -> Result<()> {
        let mut g = self.sticky.lock().map_err(|_| GpuError::DeviceLost("error state poisoned".into()))?;
        if let Some(l) = &g.lost {
            return Err(GpuError::DeviceLost(l.clone()));
        }
        match g.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Fail with [`GpuError::ModelTooLarge`] if a buffer of `bytes` cannot be bound.
    pub(crate) fn check_size(&self, what: &str, bytes: u64) -> Result<()> {
        let limit = self.caps.max_storage_binding.min(self.caps.max_buffer);
        if bytes > limit {
            return Err(GpuError::ModelTooLarge { what: what.to_string(), bytes, limit });
        }
        Ok(())
    }

    /// Run `f` inside out-of-memory and validation error scopes.
    pub(crate) async fn scoped<T>(&self, f: impl FnOnce() -> T) -> Result<T> {
        self.check()?;
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let val = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        let v = val.pop().await;
        let o = oom.pop().await;
        if let Some(e) = o.or(v) {
            return Err(convert(e));
        }
        self.check()?;
        Ok(out)
    }

    /// Block until the device has finished everything submitted (native only; the web's queue
    /// is awaited through its map callbacks).
    #[cfg(not(target_arch = "wasm32"))]
    pub(crate) fn wait_idle(&self) -> Result<()> {
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        Ok(())
    }

    /// Map `buf` (MAP_READ) and copy out `len` f32/u32 words.
    pub(crate) async fn read_words(&self, buf: &wgpu::Buffer, len: usize) -> Result<Vec<u32>> {
        let bytes = (len * 4) as u64;
        if let Ok(mut g) = self.sticky.lock() {
            g.readback_bytes += bytes;
        }
        let slice = buf.slice(0..bytes);
        let (tx, rx) = futures_channel::oneshot::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.wait_idle()?;
        let res = rx.await.map_err(|_| GpuError::Readback("map callback dropped".into()))?;
        self.check()?;
        res.map_err(|e| GpuError::Readback(e.to_string()))?;
        let out = {
            let view = slice.get_mapped_range().map_err(|e| GpuError::Readback(e.to_string()))?;
            view.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        };
        buf.unmap();
        Ok(out)
    }
}

fn convert(e: wgpu::Error) -> GpuError {
    match e {
        wgpu::Error::OutOfMemory { source } => GpuError::OutOfMemory(source.to_string()),
        wgpu::Error::Validation { description, .. } => GpuError::Validation(description),
        wgpu::Error::Internal { description, .. } => GpuError::Validation(description),
    }
}
