//! Which backend generates: WebGPU (the `attnlab-gpu` crate) or the CPU (wasm) reference runtime.
//!
//! Pure state and wording, compiled and tested natively; the worker (`worker/`, `gpu.rs`) probes
//! the GPU, uploads the model and maps `attnlab_gpu::GpuError` onto [`GpuFailure`].
//!
//! Rules: the user's [`Choice`] is Auto (the default), WebGPU or CPU. WebGPU is possible when a
//! device was created, no GPU error happened in this page (a device loss or any error
//! mid-generation turns the GPU off until "Try WebGPU again") and the current model fits the adapter
//! (a model the adapter refuses runs on the CPU; the next model is tried again). Auto uses WebGPU
//! only where it measured faster: the worker times a few decode steps of each model on both
//! backends at load ([`Speeds`]) and the CPU runs meanwhile. The lab views always use the CPU
//! engine.

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

/// The user's backend choice (the badge's selector; `?backend=gpu|cpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum Choice {
    /// The faster of the two, as measured for the current model.
    #[default]
    Auto,
    /// WebGPU whenever it works.
    Gpu,
    Cpu,
}

impl Choice {
    /// The selector's value: "auto", "webgpu" or "cpu".
    pub fn code(self) -> &'static str {
        match self {
            Choice::Auto => "auto",
            Choice::Gpu => "webgpu",
            Choice::Cpu => "cpu",
        }
    }

    /// The choice of a selector value or a `backend=` query value (`gpu` too); `None` otherwise.
    pub fn parse(value: &str) -> Option<Choice> {
        match value.to_ascii_lowercase().as_str() {
            "auto" => Some(Choice::Auto),
            "webgpu" | "gpu" => Some(Choice::Gpu),
            "cpu" => Some(Choice::Cpu),
            _ => None,
        }
    }
}

/// Decode speeds of the current model measured at load, tokens per second.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Speeds {
    pub gpu: f64,
    pub cpu: f64,
}

/// The backend used for generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Active {
    Gpu,
    Cpu,
}

/// Everything that decides the backend, and what the badge says about it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BackendState {
    pub probe: Probe,
    /// The user's choice (also `?backend=`).
    pub choice: Choice,
    /// The GPU failed in this page (device lost, an error mid-generation): off until a retry.
    pub broken: Option<GpuFailure>,
    /// The current model was refused by the GPU (too large, unsupported).
    pub model_refused: Option<GpuFailure>,
    /// The current model's measured decode speeds (Auto decides by them).
    pub speeds: Option<Speeds>,
}

impl BackendState {
    pub fn new(choice: Choice) -> BackendState {
        BackendState { probe: Probe::Pending, choice, broken: None, model_refused: None, speeds: None }
    }

    /// Whether WebGPU could run the current model now (whatever the choice).
    pub fn gpu_possible(&self) -> bool {
        matches!(self.probe, Probe::Ready { .. }) && self.broken.is_none() && self.model_refused.is_none()
    }

    /// Whether the worker should measure the current model's speeds (Auto, GPU possible, not yet
    /// measured).
    pub fn wants_speeds(&self) -> bool {
        self.choice == Choice::Auto && self.gpu_possible() && self.speeds.is_none()
    }

    /// The backend a generation started now runs on (the CPU while the probe is pending, and in
    /// Auto until WebGPU measured faster).
    pub fn active(&self) -> Active {
        if self.choice == Choice::Cpu || !self.gpu_possible() {
            return Active::Cpu;
        }
        match (self.choice, self.speeds) {
            (Choice::Auto, Some(s)) if s.gpu <= s.cpu => Active::Cpu,
            (Choice::Auto, None) => Active::Cpu,
            _ => Active::Gpu,
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
        self.choice != Choice::Cpu
            && matches!((&self.probe, &self.broken), (Probe::Failed(_), _) | (Probe::Ready { .. }, Some(_)))
    }

    /// Start negotiating an adapter and device again: the failure is forgotten and the badge says
    /// "checking WebGPU…" until the new probe answers.
    pub fn retry(&mut self) {
        self.probe = Probe::Pending;
        self.broken = None;
        self.model_refused = None;
        self.speeds = None;
    }

    /// A new model is shown: its predecessor's refusal and speeds no longer apply.
    pub fn new_model(&mut self) {
        self.model_refused = None;
        self.speeds = None;
    }

    /// `data-backend` of the badge: "webgpu", "cpu", "probing" or "measuring" (Auto timing both).
    pub fn code(&self) -> &'static str {
        match (self.active(), &self.probe) {
            (Active::Gpu, _) => "webgpu",
            (Active::Cpu, Probe::Pending) if self.choice != Choice::Cpu => "probing",
            (Active::Cpu, _) if self.wants_speeds() => "measuring",
            (Active::Cpu, _) => "cpu",
        }
    }

    /// The badge text: "WebGPU · <adapter>" or "CPU (wasm)", with Auto's reason.
    pub fn badge(&self) -> String {
        let tps = |v: f64| if v < 10.0 { format!("{v:.1}") } else { format!("{v:.0}") };
        let why = |fast: f64, slow: f64, other: &str| {
            format!(" · auto: {} tok/s vs {} on {other}", tps(fast), tps(slow))
        };
        match (&self.probe, self.active(), self.speeds.filter(|_| self.choice == Choice::Auto)) {
            (Probe::Ready { adapter }, Active::Gpu, Some(s)) => {
                format!("WebGPU · {adapter}{}", why(s.gpu, s.cpu, "the CPU"))
            }
            (Probe::Ready { adapter }, Active::Gpu, None) => format!("WebGPU · {adapter}"),
            (_, Active::Cpu, Some(s)) if self.gpu_possible() => {
                format!("CPU (wasm){}", why(s.cpu, s.gpu, "WebGPU"))
            }
            (Probe::Pending, _, _) if self.choice != Choice::Cpu => {
                "CPU (wasm) · checking WebGPU…".to_string()
            }
            _ if self.wants_speeds() => "CPU (wasm) · auto: timing WebGPU and the CPU…".to_string(),
            _ => "CPU (wasm)".to_string(),
        }
    }

    /// Why the CPU runs although WebGPU was possible or wanted; `None` on the GPU, while probing,
    /// when the user chose the CPU, or when Auto measured the CPU faster (the badge says so).
    pub fn notice(&self) -> Option<String> {
        if self.choice == Choice::Cpu {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A ready GPU with the user's choice WebGPU.
    fn ready() -> BackendState {
        let mut s = BackendState::new(Choice::Gpu);
        s.probe = Probe::Ready { adapter: "SwiftShader".to_string() };
        s
    }

    #[test]
    fn a_ready_gpu_generates_unless_the_cpu_is_chosen() {
        let s = ready();
        assert_eq!(
            (s.active(), s.code(), s.badge(), s.notice()),
            (Active::Gpu, "webgpu", "WebGPU · SwiftShader".to_string(), None)
        );
        let forced = BackendState { choice: Choice::Cpu, ..ready() };
        assert_eq!(
            (forced.active(), forced.code(), forced.badge()),
            (Active::Cpu, "cpu", "CPU (wasm)".to_string())
        );
        assert_eq!(forced.notice(), None, "the user's choice needs no notice");
        assert!(!forced.wants_speeds());
    }

    #[test]
    fn auto_measures_then_takes_the_faster_backend() {
        let mut s = BackendState { choice: Choice::Auto, ..ready() };
        assert!(s.wants_speeds());
        assert_eq!((s.active(), s.code()), (Active::Cpu, "measuring"), "the CPU runs while timing");
        s.speeds = Some(Speeds { gpu: 412.0, cpu: 95.4 });
        assert_eq!((s.active(), s.code()), (Active::Gpu, "webgpu"));
        assert_eq!(s.badge(), "WebGPU · SwiftShader · auto: 412 tok/s vs 95 on the CPU");
        s.speeds = Some(Speeds { gpu: 2.6, cpu: 1276.6 });
        assert_eq!((s.active(), s.code(), s.notice()), (Active::Cpu, "cpu", None));
        assert_eq!(s.badge(), "CPU (wasm) · auto: 1277 tok/s vs 2.6 on WebGPU");
        // The user's WebGPU choice overrides the measurement; a new model is measured anew.
        assert_eq!(BackendState { choice: Choice::Gpu, ..s.clone() }.active(), Active::Gpu);
        s.new_model();
        assert!(s.wants_speeds());
        // A refused model is not measured: the CPU runs, with the refusal's notice.
        s.fail(GpuFailure::ModelTooLarge("big".into()));
        assert!(!s.wants_speeds() && s.notice().is_some());
    }

    #[test]
    fn the_cpu_runs_while_probing() {
        let s = BackendState::new(Choice::Auto);
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
            let mut s = BackendState::new(Choice::Auto);
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

        let mut none = BackendState::new(Choice::Auto);
        none.fail(GpuFailure::NoAdapter("none".into()));
        assert!(none.can_retry());
        let mut refused = ready();
        refused.fail(GpuFailure::ModelTooLarge("big".into()));
        assert!(!refused.can_retry(), "a refused model is not the device's failure");
        let forced = BackendState { choice: Choice::Cpu, ..none.clone() };
        assert!(!forced.can_retry());
    }

    #[test]
    fn long_reasons_are_cut() {
        let r = GpuFailure::Other("é".repeat(1000)).reason();
        assert!(r.chars().count() < 200 && r.ends_with("…)"), "{r}");
    }

    #[test]
    fn backend_values() {
        for (value, choice) in [
            ("cpu", Choice::Cpu),
            ("CPU", Choice::Cpu),
            ("gpu", Choice::Gpu),
            ("webgpu", Choice::Gpu),
            ("auto", Choice::Auto),
        ] {
            assert_eq!(Choice::parse(value), Some(choice), "{value}");
        }
        assert_eq!(Choice::parse("quantum"), None);
        for c in [Choice::Auto, Choice::Gpu, Choice::Cpu] {
            assert_eq!(Choice::parse(c.code()), Some(c));
        }
    }
}
