//! Which backend generates: WebGPU (the `attnlab-gpu` crate) or the CPU (wasm) reference runtime.
//!
//! Pure state and wording, compiled and tested natively; the worker (`worker.rs`, `gpu.rs`) probes
//! the GPU, uploads the model and maps `attnlab_gpu::GpuError` onto [`GpuFailure`].
//!
//! Rules: generation runs on WebGPU when a device was created, the user did not force the CPU, no
//! GPU error happened in this page (a device loss or any error mid-generation turns the GPU off until
//! reload) and the current model fits the adapter (a model the adapter refuses runs on the CPU; the
//! next model is tried again). The lab views always use the CPU engine.

/// Why the GPU path is not used.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum GpuFailure {
    /// The browser has no `navigator.gpu` (no WebGPU, or not a secure context).
    NoWebGpu,
    /// `requestAdapter` gave no adapter.
    NoAdapter(String),
    /// The adapter refused to create a device.
    RequestDevice(String),
    /// A buffer of the model exceeds the adapter's limits.
    ModelTooLarge(String),
    /// The adapter or kernels cannot run this model (head dim, limits).
    Unsupported(String),
    /// The device was lost.
    DeviceLost(String),
    /// The GPU ran out of memory.
    OutOfMemory(String),
    /// Validation, readback or any other GPU error.
    Other(String),
}

impl GpuFailure {
    /// True when only the current model is refused (another model may fit); false when the GPU
    /// itself is unusable for the rest of the page's life.
    pub fn is_model_specific(&self) -> bool {
        matches!(self, GpuFailure::ModelTooLarge(_) | GpuFailure::Unsupported(_))
    }

    /// A short reason for the fallback notice.
    pub fn reason(&self) -> String {
        let short = |s: &str| {
            let s = s.trim();
            match s.char_indices().nth(160) {
                Some((i, _)) => format!("{}…", &s[..i]),
                None => s.to_string(),
            }
        };
        match self {
            GpuFailure::NoWebGpu => "this browser has no WebGPU (navigator.gpu is missing)".to_string(),
            GpuFailure::NoAdapter(d) => format!("no WebGPU adapter ({})", short(d)),
            GpuFailure::RequestDevice(d) => format!("the WebGPU device could not be created ({})", short(d)),
            GpuFailure::ModelTooLarge(d) => format!("the model is too large for this GPU ({})", short(d)),
            GpuFailure::Unsupported(d) => format!("this GPU cannot run the model ({})", short(d)),
            GpuFailure::DeviceLost(d) => format!("the GPU device was lost ({})", short(d)),
            GpuFailure::OutOfMemory(d) => format!("the GPU ran out of memory ({})", short(d)),
            GpuFailure::Other(d) => format!("GPU error ({})", short(d)),
        }
    }
}

/// Where the GPU probe stands.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Probe {
    /// Still asking for an adapter and device.
    Pending,
    /// A device exists on this adapter.
    Ready { adapter: String },
    /// No usable GPU.
    Failed(GpuFailure),
}

/// The backend used for generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Active {
    Gpu,
    Cpu,
}

/// Everything that decides the backend, and what the badge says about it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BackendState {
    pub probe: Probe,
    /// The user's "force CPU" choice (also `?backend=cpu`).
    pub force_cpu: bool,
    /// The GPU failed in this page (device lost, an error mid-generation): off until reload.
    pub broken: Option<GpuFailure>,
    /// The current model was refused by the GPU (too large, unsupported).
    pub model_refused: Option<GpuFailure>,
}

impl BackendState {
    pub fn new(force_cpu: bool) -> BackendState {
        BackendState { probe: Probe::Pending, force_cpu, broken: None, model_refused: None }
    }

    /// The backend a generation started now runs on (the CPU while the probe is pending).
    pub fn active(&self) -> Active {
        match (&self.probe, self.force_cpu, &self.broken, &self.model_refused) {
            (Probe::Ready { .. }, false, None, None) => Active::Gpu,
            _ => Active::Cpu,
        }
    }

    /// Whether a GPU device exists (the model may still need uploading).
    pub fn gpu_usable(&self) -> bool {
        matches!(self.probe, Probe::Ready { .. }) && self.broken.is_none()
    }

    /// Record a GPU failure: the model's own refusal, or the GPU going away.
    pub fn fail(&mut self, failure: GpuFailure) {
        if failure.is_model_specific() {
            self.model_refused = Some(failure);
        } else if matches!(self.probe, Probe::Pending) {
            self.probe = Probe::Failed(failure);
        } else if self.broken.is_none() {
            self.broken = Some(failure);
        }
    }

    /// Whether "Try WebGPU again" is offered: the probe failed or the GPU was lost, and the CPU runs
    /// in its place (not for a model the GPU refused: that is the model, not the device).
    pub fn can_retry(&self) -> bool {
        !self.force_cpu
            && matches!((&self.probe, &self.broken), (Probe::Failed(_), _) | (Probe::Ready { .. }, Some(_)))
    }

    /// Start negotiating an adapter and device again: the failure is forgotten and the badge says
    /// "checking WebGPU…" until the new probe answers.
    pub fn retry(&mut self) {
        self.probe = Probe::Pending;
        self.broken = None;
        self.model_refused = None;
    }

    /// A new model is shown: its predecessor's refusal no longer applies.
    pub fn new_model(&mut self) {
        self.model_refused = None;
    }

    /// `data-backend` of the badge: "webgpu", "cpu" or "probing".
    pub fn code(&self) -> &'static str {
        match (self.active(), &self.probe) {
            (Active::Gpu, _) => "webgpu",
            (Active::Cpu, Probe::Pending) if !self.force_cpu => "probing",
            (Active::Cpu, _) => "cpu",
        }
    }

    /// The badge text: "WebGPU · <adapter>" or "CPU (wasm)".
    pub fn badge(&self) -> String {
        match (&self.probe, self.active()) {
            (Probe::Ready { adapter }, Active::Gpu) => format!("WebGPU · {adapter}"),
            (Probe::Pending, _) if !self.force_cpu => "CPU (wasm) · checking WebGPU…".to_string(),
            _ => "CPU (wasm)".to_string(),
        }
    }

    /// Why the CPU runs although WebGPU was wanted; `None` on the GPU, while probing, or when the
    /// user forced the CPU.
    pub fn notice(&self) -> Option<String> {
        if self.force_cpu {
            return None;
        }
        let failure = match (&self.probe, &self.broken, &self.model_refused) {
            (Probe::Failed(f), _, _) => f,
            (Probe::Ready { .. }, Some(f), _) => f,
            (Probe::Ready { .. }, None, Some(f)) => f,
            _ => return None,
        };
        Some(format!("WebGPU unavailable, generating on the CPU: {}", failure.reason()))
    }
}

/// `backend=cpu` in the page's query forces the CPU.
pub fn force_cpu_from_query(search: &str) -> bool {
    search.trim_start_matches('?').split('&').any(|pair| pair.eq_ignore_ascii_case("backend=cpu"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready() -> BackendState {
        let mut s = BackendState::new(false);
        s.probe = Probe::Ready { adapter: "SwiftShader".to_string() };
        s
    }

    #[test]
    fn a_ready_gpu_generates_unless_forced_off() {
        let s = ready();
        assert_eq!(
            (s.active(), s.code(), s.badge(), s.notice()),
            (Active::Gpu, "webgpu", "WebGPU · SwiftShader".to_string(), None)
        );
        let forced = BackendState { force_cpu: true, ..ready() };
        assert_eq!(
            (forced.active(), forced.code(), forced.badge()),
            (Active::Cpu, "cpu", "CPU (wasm)".to_string())
        );
        assert_eq!(forced.notice(), None, "the user's choice needs no notice");
    }

    #[test]
    fn the_cpu_runs_while_probing() {
        let s = BackendState::new(false);
        assert_eq!((s.active(), s.code(), s.notice()), (Active::Cpu, "probing", None));
        assert!(s.badge().starts_with("CPU (wasm)"));
    }

    #[test]
    fn probe_failures_fall_back_with_a_reason() {
        for (f, words) in [
            (GpuFailure::NoWebGpu, "navigator.gpu"),
            (GpuFailure::NoAdapter("none".into()), "no WebGPU adapter"),
            (GpuFailure::RequestDevice("x".into()), "device could not be created"),
        ] {
            let mut s = BackendState::new(false);
            s.fail(f);
            assert_eq!((s.active(), s.code(), s.badge()), (Active::Cpu, "cpu", "CPU (wasm)".to_string()));
            let n = s.notice().expect("a notice");
            assert!(n.contains("WebGPU unavailable") && n.contains(words), "{n}");
        }
    }

    #[test]
    fn a_refused_model_runs_on_the_cpu_and_the_next_model_tries_again() {
        let mut s = ready();
        s.fail(GpuFailure::ModelTooLarge("tok_emb needs 9 bytes".into()));
        assert_eq!(s.active(), Active::Cpu);
        assert!(s.gpu_usable(), "the device stays for other models");
        assert!(s.notice().expect("notice").contains("too large"));
        s.new_model();
        assert_eq!(s.active(), Active::Gpu);
    }

    #[test]
    fn device_loss_turns_the_gpu_off_for_good() {
        let mut s = ready();
        s.fail(GpuFailure::DeviceLost("Destroyed".into()));
        s.fail(GpuFailure::Other("later".into()));
        s.new_model();
        assert_eq!((s.active(), s.gpu_usable()), (Active::Cpu, false));
        let n = s.notice().expect("notice");
        assert!(n.contains("device was lost") && n.contains("Destroyed"), "the first failure is kept: {n}");
    }

    #[test]
    fn a_failed_or_lost_gpu_can_be_tried_again() {
        let mut lost = ready();
        assert!(!lost.can_retry(), "nothing to retry on a working GPU");
        lost.fail(GpuFailure::DeviceLost("Destroyed".into()));
        assert!(lost.can_retry());
        lost.retry();
        assert_eq!((lost.active(), lost.code(), lost.notice()), (Active::Cpu, "probing", None));
        lost.probe = Probe::Ready { adapter: "SwiftShader".to_string() };
        assert_eq!(lost.active(), Active::Gpu, "a new device generates again");

        let mut none = BackendState::new(false);
        none.fail(GpuFailure::NoAdapter("none".into()));
        assert!(none.can_retry());
        let mut refused = ready();
        refused.fail(GpuFailure::ModelTooLarge("big".into()));
        assert!(!refused.can_retry(), "a refused model is not the device's failure");
        let forced = BackendState { force_cpu: true, ..none.clone() };
        assert!(!forced.can_retry());
    }

    #[test]
    fn long_reasons_are_cut() {
        let r = GpuFailure::Other("é".repeat(1000)).reason();
        assert!(r.chars().count() < 200 && r.ends_with("…)"), "{r}");
    }

    #[test]
    fn backend_query() {
        assert!(force_cpu_from_query("?model=alibi&backend=cpu"));
        assert!(force_cpu_from_query("backend=CPU"));
        assert!(!force_cpu_from_query("?model=alibi"));
        assert!(!force_cpu_from_query("?backend=gpu"));
    }
}
