//! The generator: the prompt and sampling settings, Generate / Stop, the streamed output with the
//! model that wrote it, and the throughput readouts. Runs start through the host's
//! [`Runner`]; the page-wide status line, error box and trace text are reported to the root
//! ([`GenReport`]).
//!
//! Each run carries an id, and it is also bound to the load it started under: when a new load starts
//! (a model switch), the run's later events are dropped, it is told to stop, and its text so far
//! stays, labelled as cut short. The run itself happens in the model's worker: this panel shows the
//! prefill's progress and the tokens (at most once per animation frame), and measures the decode
//! speed the user sees beside the worker's raw one.

use std::rc::Rc;

use web_sys::{HtmlInputElement, HtmlTextAreaElement};
use yew::prelude::*;

use crate::backend::Active;
use crate::engine::GenSettings;
use crate::form::{self, Field, SettingsForm, MAX_TOKENS_LIMIT};
use crate::global::now_ms;
use crate::host::{LoadTicket, RunHandle, Runner};
use crate::protocol::{DecodeStats, PrefillStats, RunEvent};
use crate::share::Share;
use crate::url_state::UrlState;

/// What the generator tells the page.
pub enum GenReport {
    /// The page's status line.
    Status(String),
    /// Show (or, with `None`, clear) the error box.
    Error(Option<String>),
    /// Whether a run is going (the page's `data-state`).
    Running(bool),
    /// The trace views' text: the prompt and the output of the last run.
    Text(Rc<String>),
}

#[derive(Properties, PartialEq)]
pub struct GeneratorProps {
    /// `None` while no model is ready (Generate is disabled).
    pub runner: Option<Runner>,
    /// Index name of the loaded model (labels the output).
    pub model: AttrValue,
    /// The latest load: a new one stops a running generation.
    pub load: LoadTicket,
    /// Regenerate this many tokens now (the output of the opened link).
    #[prop_or_default]
    pub autorun: Option<usize>,
    pub on_report: Callback<GenReport>,
}

pub enum GenMsg {
    Edit(Field, String),
    Generate,
    Stop,
    /// An event of run `run`.
    Run {
        run: u32,
        event: RunEvent,
    },
}

pub struct Generator {
    form: SettingsForm,
    /// Prompt of the run whose output is shown.
    shown_prompt: String,
    output: String,
    /// Model that produced the shown output, and whether a model switch cut it short.
    output_model: String,
    output_cut_by_switch: bool,
    running: bool,
    /// The run in flight (Stop goes to it).
    handle: Option<RunHandle>,
    run_id: u32,
    /// Prompt tokens through the model so far, of how many (while prefilling).
    prefilling: Option<(usize, usize)>,
    prefill: Option<PrefillStats>,
    decode: Option<DecodeStats>,
    /// When the prefill's end reached this page, and the decode speed seen here since (tokens on
    /// screen over page time): what the user sees, beside the worker's raw speed.
    decode_start_ms: Option<f64>,
    seen_tps: Option<f64>,
    /// Backend of the shown run.
    run_backend: Option<Active>,
    /// The page's URL state, and what it was when the current run started (the run's output goes
    /// into the link as `gen` only if nothing it depends on changed meanwhile).
    share: Option<Share>,
    run_state: Option<UrlState>,
}

fn per_second(count: usize, ms: f64) -> Option<f64> {
    (count > 0 && ms > 0.0).then(|| count as f64 * 1000.0 / ms)
}

impl Generator {
    fn report(ctx: &Context<Self>, report: GenReport) {
        ctx.props().on_report.emit(report);
    }

    /// Start a run with the form's settings; `tokens` replaces its token limit (regenerating a
    /// link's output: the same seed gives the same first tokens).
    fn generate(&mut self, ctx: &Context<Self>, tokens: Option<usize>) -> bool {
        if self.running {
            return false;
        }
        let Some(runner) = ctx.props().runner.clone() else {
            Self::report(ctx, GenReport::Error(Some("The model is not loaded yet.".to_string())));
            return true;
        };
        let settings = match self.form.settings() {
            Ok(s) => GenSettings { max_tokens: tokens.unwrap_or(s.max_tokens), ..s },
            Err(e) => {
                Self::report(ctx, GenReport::Error(Some(e)));
                return true;
            }
        };
        Self::report(ctx, GenReport::Error(None));
        self.run_id = self.run_id.wrapping_add(1);
        self.running = true;
        self.shown_prompt = self.form.prompt.clone();
        self.output.clear();
        self.output_model = ctx.props().model.to_string();
        self.output_cut_by_switch = false;
        self.prefilling = None;
        self.prefill = None;
        self.decode = None;
        self.decode_start_ms = None;
        self.seen_tps = None;
        Self::report(ctx, GenReport::Status("tokenizing…".to_string()));
        Self::report(ctx, GenReport::Running(true));
        self.run_backend = Some(runner.backend());
        if let Some(share) = &self.share {
            share.update(|s| s.gen = None);
            self.run_state = Some(share.get());
        }
        let run = self.run_id;
        let events = ctx.link().callback(move |event| GenMsg::Run { run, event });
        self.handle = Some(runner.start(run, self.form.prompt.clone(), settings, events));
        true
    }

    /// One event of the current run; events of a superseded run (or load) are dropped.
    fn on_event(&mut self, ctx: &Context<Self>, run: u32, event: RunEvent) -> bool {
        if run != self.run_id || !ctx.props().load.is_current() {
            return false;
        }
        match event {
            RunEvent::Status(status) => Self::report(ctx, GenReport::Status(status)),
            RunEvent::Prefilling { done, total } => self.prefilling = Some((done, total)),
            RunEvent::Prefilled(stats) => {
                self.prefilling = None;
                self.prefill = Some(stats);
                self.decode_start_ms = Some(now_ms());
                Self::report(ctx, GenReport::Status("generating…".to_string()));
            }
            RunEvent::Token { text, stats } => {
                self.output = text;
                self.decode = Some(stats);
                self.seen_tps = self.decode_start_ms.and_then(|t0| per_second(stats.tokens, now_ms() - t0));
                Self::report(ctx, GenReport::Status(format!("generating… {} tokens", stats.tokens)));
            }
            RunEvent::Backend(backend) => self.run_backend = Some(backend),
            RunEvent::Finished(result) => {
                self.running = false;
                self.handle = None;
                self.prefilling = None;
                self.report_text(ctx);
                let tokens = self.decode.map(|d| d.tokens).filter(|&n| n > 0 && result.is_ok());
                if let (Some(share), Some(started), Some(n)) = (&self.share, self.run_state.take(), tokens) {
                    share.update(|s| {
                        if s.same_run(&started) {
                            s.gen = Some(n);
                        }
                    });
                }
                match result {
                    Ok(status) => Self::report(ctx, GenReport::Status(status)),
                    Err(e) => {
                        Self::report(ctx, GenReport::Status("generation failed".to_string()));
                        Self::report(ctx, GenReport::Error(Some(format!("Generation failed: {e}"))));
                    }
                }
                Self::report(ctx, GenReport::Running(false));
            }
        }
        true
    }

    fn report_text(&self, ctx: &Context<Self>) {
        Self::report(ctx, GenReport::Text(Rc::new(format!("{}{}", self.shown_prompt, self.output))));
    }

    /// Stop a running generation because the model changes: its events are dropped from now on
    /// (the run id moves on) and its text so far stays, labelled as cut short.
    fn stop_for_switch(&mut self, ctx: &Context<Self>) {
        if !self.running {
            return;
        }
        if let Some(h) = self.handle.take() {
            h.stop();
        }
        self.run_id = self.run_id.wrapping_add(1);
        self.running = false;
        self.output_cut_by_switch = true;
        self.report_text(ctx);
        Self::report(ctx, GenReport::Running(false));
    }
}

impl Component for Generator {
    type Message = GenMsg;
    type Properties = GeneratorProps;

    fn create(ctx: &Context<Self>) -> Self {
        let share = ctx.link().context::<Share>(Callback::noop()).map(|(share, _)| share);
        let form = share.as_ref().map(restore_form).unwrap_or_default();
        Generator {
            form,
            shown_prompt: String::new(),
            output: String::new(),
            output_model: String::new(),
            output_cut_by_switch: false,
            running: false,
            handle: None,
            run_id: 0,
            prefilling: None,
            prefill: None,
            decode: None,
            decode_start_ms: None,
            seen_tps: None,
            run_backend: None,
            share,
            run_state: None,
        }
    }

    fn changed(&mut self, ctx: &Context<Self>, old: &Self::Properties) -> bool {
        if ctx.props().load.id() != old.load.id() {
            self.stop_for_switch(ctx);
        }
        if let Some(n) = ctx.props().autorun.filter(|_| old.autorun != ctx.props().autorun) {
            self.generate(ctx, Some(n));
        }
        true
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            GenMsg::Edit(field, value) => {
                if let Some(share) = &self.share {
                    share.update(|s| keep_field(s, field, &value));
                }
                self.form.set(field, value);
                true
            }
            GenMsg::Generate => self.generate(ctx, None),
            GenMsg::Stop => {
                if !self.running {
                    return false;
                }
                if let Some(h) = &self.handle {
                    h.stop();
                }
                Self::report(ctx, GenReport::Status("stopping…".to_string()));
                true
            }
            GenMsg::Run { run, event } => self.on_event(ctx, run, event),
        }
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        html! {
            <>
                { self.view_controls(ctx) }
                <section class="output">
                    <h2>{ "Output" }</h2>
                    { self.view_prefill() }
                    <pre id="output" aria-live="polite">
                        <span class="prompt-echo">{ &self.shown_prompt }</span>
                        <span id="generated" class="generated">{ &self.output }</span>
                    </pre>
                    if !self.output_model.is_empty() {
                        <p id="output-model" class="muted" data-model={self.output_model.clone()}
                            data-cut={self.output_cut_by_switch.to_string()}>
                            { format!("written by {}", self.output_model) }
                            if self.output_cut_by_switch {
                                { " · stopped early: the model was switched while it was generating" }
                            }
                        </p>
                    }
                    { self.view_stats() }
                </section>
            </>
        }
    }
}

/// The form as the link has it (the defaults where it says nothing), which the link then holds
/// in full: the settings a run uses are in the address whether or not they were changed.
fn restore_form(share: &Share) -> SettingsForm {
    let state = share.get();
    let mut form = SettingsForm::default();
    let fields: [(Field, Option<String>); 6] = [
        (Field::Prompt, state.prompt.clone()),
        (Field::MaxTokens, state.max_tokens.map(|v| v.to_string())),
        (Field::Temperature, state.temperature.map(|v| v.to_string())),
        (Field::TopK, state.top_k.map(|v| v.to_string())),
        (Field::TopP, state.top_p.map(|v| v.to_string())),
        (Field::Seed, state.seed.map(|v| v.to_string())),
    ];
    for (field, value) in fields {
        if let Some(v) = value {
            form.set(field, v);
        }
    }
    let all = [
        (Field::Prompt, form.prompt.clone()),
        (Field::MaxTokens, form.max_tokens.clone()),
        (Field::Temperature, form.temperature.clone()),
        (Field::TopK, form.top_k.clone()),
        (Field::TopP, form.top_p.clone()),
        (Field::Seed, form.seed.clone()),
    ];
    share.complete(|s| all.iter().for_each(|(field, v)| keep_field(s, *field, v)));
    form
}

/// Put what the user typed into `field` in the link, when it is a valid value (a half-typed number
/// leaves the last valid one there).
fn keep_field(s: &mut UrlState, field: Field, value: &str) {
    match field {
        Field::Prompt => s.prompt = Some(value.to_string()),
        Field::MaxTokens => s.max_tokens = form::parse_max_tokens(value).ok().or(s.max_tokens),
        Field::Temperature => s.temperature = form::parse_temperature(value).ok().or(s.temperature),
        Field::TopK => s.top_k = form::parse_top_k(value).ok().or(s.top_k),
        Field::TopP => s.top_p = form::parse_top_p(value).ok().or(s.top_p),
        Field::Seed => s.seed = form::parse_seed(value).ok().or(s.seed),
    }
}

impl Generator {
    /// The prompt box, the settings and the buttons.
    fn view_controls(&self, ctx: &Context<Self>) -> Html {
        let link = ctx.link();
        let text_input = |field: fn() -> Field| {
            link.callback(move |e: InputEvent| {
                GenMsg::Edit(field(), e.target_unchecked_into::<HtmlInputElement>().value())
            })
        };
        let on_prompt = link.callback(|e: InputEvent| {
            GenMsg::Edit(Field::Prompt, e.target_unchecked_into::<HtmlTextAreaElement>().value())
        });
        let on_keydown = link.batch_callback(|e: KeyboardEvent| {
            (e.key() == "Enter" && (e.ctrl_key() || e.meta_key())).then_some(GenMsg::Generate)
        });
        let ready = ctx.props().runner.is_some();
        let form = &self.form;
        html! {
            <section class="controls">
                <label for="prompt">{ "Prompt" }</label>
                <textarea id="prompt" rows="4" value={form.prompt.clone()} oninput={on_prompt}
                    onkeydown={on_keydown} spellcheck="false"></textarea>
                <div class="settings">
                    <label>{ "max tokens" }
                        <input id="max-tokens" type="number" min="1" max={MAX_TOKENS_LIMIT.to_string()}
                            step="1" value={form.max_tokens.clone()}
                            oninput={text_input(|| Field::MaxTokens)}/>
                    </label>
                    <label>{ "temperature" }
                        <input id="temperature" type="number" min="0" max="10" step="0.05"
                            value={form.temperature.clone()} oninput={text_input(|| Field::Temperature)}/>
                    </label>
                    <label title="0 = off">{ "top-k" }
                        <input id="top-k" type="number" min="0" step="1"
                            value={form.top_k.clone()} oninput={text_input(|| Field::TopK)}/>
                    </label>
                    <label title="1 = off">{ "top-p" }
                        <input id="top-p" type="number" min="0.01" max="1" step="0.01"
                            value={form.top_p.clone()} oninput={text_input(|| Field::TopP)}/>
                    </label>
                    <label>{ "seed" }
                        <input id="seed" type="number" min="0" step="1"
                            value={form.seed.clone()} oninput={text_input(|| Field::Seed)}/>
                    </label>
                </div>
                <div class="buttons">
                    <button id="generate" class="primary" disabled={!ready || self.running}
                        onclick={link.callback(|_| GenMsg::Generate)}>{ "Generate" }</button>
                    <button id="stop" disabled={!self.running}
                        onclick={link.callback(|_| GenMsg::Stop)}>{ "Stop" }</button>
                    <span class="hint muted">{ "Ctrl+Enter generates" }</span>
                </div>
            </section>
        }
    }

    /// The prefill's progress bar while the prompt goes through the model.
    fn view_prefill(&self) -> Html {
        let Some((done, total)) = self.prefilling else { return html! {} };
        html! {
            <p class="prefill-progress muted">
                <label for="prefill-progress">{ format!("prefill: {done} of {total} prompt tokens ") }</label>
                <progress id="prefill-progress" max={total.to_string()} value={done.to_string()}
                    data-done={done.to_string()} data-total={total.to_string()}></progress>
            </p>
        }
    }

    /// Which backend ran, and prefill and decode throughput (raw in the worker, and as seen here).
    fn view_stats(&self) -> Html {
        let prefill_tps = self.prefill.and_then(|p| per_second(p.tokens, p.ms));
        let decode_tps = self.decode.and_then(|d| per_second(d.tokens, d.compute_ms));
        let fmt = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "–".to_string());
        let raw = |v: Option<f64>| v.map(|v| format!("{v}")).unwrap_or_default();
        let prefill_detail =
            self.prefill.map(|p| format!(" ({} tokens in {:.1} ms)", p.tokens, p.ms)).unwrap_or_default();
        let decode_detail =
            self.decode.map(|d| format!(" ({} tokens) · seen: ", d.tokens)).unwrap_or_default();
        let on = match self.run_backend {
            Some(Active::Gpu) => {
                html! { <span id="run-backend" class="stat" data-backend="webgpu">{ "on WebGPU" }</span> }
            }
            Some(Active::Cpu) => {
                html! { <span id="run-backend" class="stat" data-backend="cpu">{ "on the CPU (wasm)" }</span> }
            }
            None => html! {},
        };
        html! {
            <div class="stats">
                { on }
                <span class="stat">
                    { "prefill: " }
                    <b id="prefill-tps" data-value={raw(prefill_tps)}>{ fmt(prefill_tps) }</b>
                    { " tok/s" }{ prefill_detail }
                </span>
                <span class="stat">
                    { "decode: " }
                    <b id="decode-tps" data-value={raw(decode_tps)}>{ fmt(decode_tps) }</b>
                    { " tok/s" }{ decode_detail }
                    if self.decode.is_some() {
                        <b id="decode-seen-tps" data-value={raw(self.seen_tps)}
                            data-worker-wall={raw(self.decode.and_then(|d| per_second(d.tokens, d.wall_ms)))}
                            title="tokens on screen per second of page time, rendering included">
                            { fmt(self.seen_tps) }</b>{ " tok/s" }
                    }
                </span>
            </div>
        }
    }
}
