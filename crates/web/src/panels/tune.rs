//! "Train on this text": fine-tunes the loaded model (as trained, without the sliders' edit) on a
//! text in the model's worker, with the trainer's own step (`attnlab_train::finetune` in the
//! fine-tune module `attnlab-tune`: on WebGPU the WGSL trainer, on the CPU candle; AdamW, warmup +
//! cosine, clipping). The loss is drawn as the steps arrive; Stop ends
//! training after the current step and keeps the steps done. The result becomes the page's model
//! (reported to the root through `on_tuned`), so every view shows it; the page's link still names
//! the model as loaded (a reload shows the original); "download the fine-tuned model" saves its
//! folder's three files.

use std::rc::Rc;

use web_sys::{HtmlInputElement, HtmlTextAreaElement};
use yew::prelude::*;

use crate::export;
use crate::form::{TuneForm, MAX_TUNE_STEPS};
use crate::host::{LoadTicket, ModelRef};
use crate::open::group;
use crate::plot::{Figure, LineChart, Series, LINE, PALETTE};
use crate::protocol::{ToWorker, TuneEvent, TuneSetup, TuneSummary, Tuned};

/// The largest text file the panel reads (bytes).
const MAX_TEXT_FILE_BYTES: f64 = 1_000_000.0;

#[derive(Properties, PartialEq)]
pub struct TuneProps {
    /// The page's model as trained; `None` while a model loads.
    pub model: Option<ModelRef>,
    /// The generator's text (prompt and output of the last run), for "use the generator's text".
    pub generator_text: Rc<String>,
    /// The latest load: a newer one drops a fine-tune in flight.
    pub load: LoadTicket,
    pub on_tuned: Callback<Tuned>,
}

pub enum TuneMsg {
    Text(String),
    Steps(String),
    Lr(String),
    UseGenerator,
    File(Option<web_sys::File>),
    FileRead(Result<String, String>),
    Start,
    Stop,
    Event { tune: u32, event: TuneEvent },
    Download,
    Downloaded(Result<(), String>),
}

pub struct TunePanel {
    text: String,
    form: TuneForm,
    /// The fine-tune in flight: its id and the load it started under.
    running: Option<(u32, LoadTicket, ModelRef)>,
    next_id: u32,
    setup: Option<TuneSetup>,
    /// (step, batch loss) of the shown fine-tune.
    losses: Vec<(f64, f64)>,
    last_ms: f64,
    outcome: Option<Result<TuneSummary, String>>,
    /// Where the download of the fine-tuned model stands (`None`: not asked).
    download: Option<Result<(), String>>,
}

impl TunePanel {
    fn start(&mut self, ctx: &Context<Self>) {
        let Some(model) = ctx.props().model.clone() else {
            self.outcome = Some(Err("no model is loaded yet".to_string()));
            return;
        };
        let options = match self.form.options() {
            Ok(o) => o,
            Err(e) => return self.outcome = Some(Err(e)),
        };
        self.next_id += 1;
        let tune = self.next_id;
        self.setup = None;
        self.losses.clear();
        self.outcome = None;
        self.download = None;
        let events = ctx.link().callback(move |event| TuneMsg::Event { tune, event });
        let msg = ToWorker::Tune { tune, of: model.id(), text: self.text.clone(), options };
        model.client().tune(msg, tune, events);
        self.running = Some((tune, ctx.props().load.clone(), model));
    }

    fn stop(&self) {
        if let Some((tune, _, model)) = &self.running {
            model.client().send(&ToWorker::StopTune { tune: *tune });
        }
    }

    /// An event of fine-tune `tune`; those of a fine-tune no longer shown are dropped.
    fn on_event(&mut self, ctx: &Context<Self>, tune: u32, event: TuneEvent) -> bool {
        let Some((current, ticket, _)) = &self.running else { return false };
        if *current != tune {
            return false;
        }
        if !ticket.is_current() {
            // Another model was loaded: this fine-tune's model would be stale.
            self.stop();
            self.running = None;
            self.outcome = Some(Err("stopped: another model was loaded".to_string()));
            return true;
        }
        match event {
            TuneEvent::Started(setup) => self.setup = Some(setup),
            TuneEvent::Step { step, ms } => {
                self.losses.push((step.step as f64, step.loss as f64));
                self.last_ms = ms;
            }
            TuneEvent::Finished(result) => {
                self.running = None;
                self.outcome = Some(result.map(|tuned| {
                    let summary = tuned.summary.clone();
                    ctx.props().on_tuned.emit(*tuned);
                    summary
                }));
            }
        }
        true
    }
}

impl Component for TunePanel {
    type Message = TuneMsg;
    type Properties = TuneProps;

    fn create(_ctx: &Context<Self>) -> Self {
        TunePanel {
            text: String::new(),
            form: TuneForm::default(),
            running: None,
            next_id: 0,
            setup: None,
            losses: Vec::new(),
            last_ms: 0.0,
            outcome: None,
            download: None,
        }
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            TuneMsg::Text(t) => self.text = t,
            TuneMsg::Steps(s) => self.form.steps = s,
            TuneMsg::Lr(s) => self.form.lr = s,
            TuneMsg::UseGenerator => self.text = ctx.props().generator_text.to_string(),
            TuneMsg::File(None) => return false,
            TuneMsg::File(Some(file)) => {
                if file.size() > MAX_TEXT_FILE_BYTES {
                    let mb = file.size() / 1e6;
                    self.outcome = Some(Err(format!(
                        "{}: {mb:.1} MB; the panel reads text files of up to 1 MB",
                        file.name()
                    )));
                    return true;
                }
                let name = file.name();
                ctx.link().send_future(async move {
                    let text = wasm_bindgen_futures::JsFuture::from(file.text()).await;
                    TuneMsg::FileRead(
                        text.ok()
                            .and_then(|t| t.as_string())
                            .ok_or_else(|| format!("{name}: could not be read as text")),
                    )
                });
                return false;
            }
            TuneMsg::FileRead(Ok(text)) => self.text = text,
            TuneMsg::FileRead(Err(e)) => self.outcome = Some(Err(e)),
            TuneMsg::Start if self.running.is_none() => self.start(ctx),
            TuneMsg::Start => return false,
            TuneMsg::Stop => self.stop(),
            TuneMsg::Event { tune, event } => return self.on_event(ctx, tune, event),
            TuneMsg::Download => {
                let Some(model) = ctx.props().model.clone() else { return false };
                ctx.link().send_future(async move { TuneMsg::Downloaded(download_model(&model).await) });
            }
            TuneMsg::Downloaded(result) => self.download = Some(result),
        }
        true
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        let link = ctx.link();
        let on_text = link.callback(|e: InputEvent| {
            TuneMsg::Text(e.target_unchecked_into::<HtmlTextAreaElement>().value())
        });
        let number = |f: fn(String) -> TuneMsg| {
            link.callback(move |e: InputEvent| f(e.target_unchecked_into::<HtmlInputElement>().value()))
        };
        let on_file = link.callback(|e: Event| {
            let input = e.target_unchecked_into::<HtmlInputElement>();
            let file = input.files().and_then(|l| l.get(0));
            input.set_value("");
            TuneMsg::File(file)
        });
        let running = self.running.is_some();
        let ready = ctx.props().model.is_some();
        html! {
            <section class="tune" id="tune" data-state={if running { "running" } else { "idle" }}>
                <h2>{ "Train on this text" }</h2>
                <p class="muted hint">
                    { "Fine-tunes the loaded model (as trained; the sliders reset) on the text below, in the \
                       page's worker with the trainer's own step, where the page generates (WebGPU: the WGSL \
                       trainer; CPU: candle): AdamW, warmup and cosine decay, 4 random windows per step. The result replaces the model in every view; the link \
                       still names the original, which a reload brings back." }
                </p>
                <textarea id="tune-text" rows="4" value={self.text.clone()} oninput={on_text} spellcheck="false"
                    placeholder="Paste a text to train on (at least 9 tokens), take the generator's, or read a .txt file"></textarea>
                <div class="tune-source">
                    <button id="tune-use-generator" onclick={link.callback(|_| TuneMsg::UseGenerator)}>
                        { "use the generator's text" }</button>
                    <input id="tune-file" class="file" type="file" accept=".txt,text/plain" onchange={on_file} />
                    <label class="button" for="tune-file">{ "read a .txt file" }</label>
                </div>
                <div class="settings">
                    <label>{ "steps" }
                        <input id="tune-steps" type="number" min="1" max={MAX_TUNE_STEPS.to_string()} step="1"
                            value={self.form.steps.clone()} oninput={number(TuneMsg::Steps)} />
                    </label>
                    <label>{ "learning rate" }
                        <input id="tune-lr" type="number" min="0" max="0.1" step="0.0005"
                            value={self.form.lr.clone()} oninput={number(TuneMsg::Lr)} />
                    </label>
                </div>
                <div class="buttons">
                    <button id="tune-start" class="primary" disabled={!ready || running}
                        onclick={link.callback(|_| TuneMsg::Start)}>{ "Train" }</button>
                    <button id="tune-stop" disabled={!running} onclick={link.callback(|_| TuneMsg::Stop)}>{ "Stop" }</button>
                </div>
                { self.view_progress() }
                { self.view_download(ctx) }
                { self.view_chart(ctx) }
            </section>
        }
    }
}

impl TunePanel {
    /// The setup, the progress bar and the outcome line, with the numbers as data attributes.
    fn view_progress(&self) -> Html {
        let first = self.losses.first().map(|p| p.1.to_string()).unwrap_or_default();
        let last = self.losses.last().map(|p| p.1.to_string()).unwrap_or_default();
        let setup = self.setup.as_ref().map(|s| {
            html! {
                <p class="muted" id="tune-setup" data-tokens={s.tokens.to_string()} data-loss-before={s.loss_before.to_string()} data-device={s.device.clone()}>
                    { format!("on {}: {} tokens in windows of {}, {} parameters; loss on the text before: {:.3}",
                        s.device, group(s.tokens as u64), s.seq_len, group(s.params as u64), s.loss_before) }
                </p>
            }
        });
        let bar = match (self.running.is_some(), &self.setup) {
            (true, Some(s)) => html! {
                <p class="muted">
                    <progress id="tune-progress" max={s.steps.to_string()} value={self.losses.len().to_string()}></progress>
                    { format!(" step {} of {} · batch loss {} · {:.0} ms per step", self.losses.len(), s.steps,
                        self.losses.last().map(|p| format!("{:.3}", p.1)).unwrap_or_default(), self.last_ms) }
                </p>
            },
            (true, None) => {
                html! { <p class="muted">{ "loading the trainer (once per page, about 1.7 MB) and setting up…" }</p> }
            }
            _ => html! {},
        };
        let (state, line) = match &self.outcome {
            None => ("none", String::new()),
            Some(Ok(s)) => ("done", outcome_line(s)),
            Some(Err(e)) => ("failed", format!("not trained: {e}")),
        };
        let after = match &self.outcome {
            Some(Ok(s)) => s.loss_after.to_string(),
            _ => String::new(),
        };
        html! {
            <>
                { for setup }
                { bar }
                <p id="tune-status" class="status" data-state={state} data-steps={self.losses.len().to_string()}
                    data-loss-first={first} data-loss-last={last} data-loss-after={after}>{ line }</p>
            </>
        }
    }

    /// After a fine-tune: download the model as its folder's three files.
    fn view_download(&self, ctx: &Context<Self>) -> Html {
        if !matches!(self.outcome, Some(Ok(_))) {
            return html! {};
        }
        let (state, line) = match &self.download {
            None => ("none", String::new()),
            Some(Ok(())) => (
                "done",
                "saved config.json, model.safetensors (F32) and tokenizer.json: put them in one \
                                     folder; Open model… reads it back"
                    .to_string(),
            ),
            Some(Err(e)) => ("failed", format!("download failed: {e}")),
        };
        html! {
            <p class="tune-download">
                <button id="tune-download" onclick={ctx.link().callback(|_| TuneMsg::Download)}>
                    { "download the fine-tuned model" }</button>
                { " " }<span id="tune-download-status" class="muted" data-state={state}>{ line }</span>
            </p>
        }
    }

    /// Batch loss against step, drawn as the steps arrive.
    fn view_chart(&self, ctx: &Context<Self>) -> Html {
        if self.losses.is_empty() {
            return html! {};
        }
        let name = ctx.props().model.as_ref().map(|m| m.info().name.clone()).unwrap_or_default();
        let series = vec![Series {
            label: "batch loss".into(),
            color: PALETTE[0].to_string(),
            points: self.losses.clone(),
            dashed: false,
            width: LINE,
        }];
        html! {
            <Figure chart={Rc::new(LineChart {
                id: "tune-loss".into(),
                title: "fine-tune: training loss per step".into(),
                x_label: "step".into(),
                y_label: "loss (nats per token)".into(),
                log_x: false,
                log_y: false,
                series,
                markers: vec![],
                legend_below: false,
            })} model={AttrValue::from(name)} />
        }
    }
}

/// The model's folder as three downloads (the names "Open model…" expects).
async fn download_model(model: &ModelRef) -> Result<(), String> {
    let files = model.files().await?;
    export::download_text("config.json", "application/json", &files.config)?;
    export::download_bytes("model.safetensors", &files.weights)?;
    export::download_text("tokenizer.json", "application/json", &files.tokenizer)
}

/// "trained 100 steps: loss on the text 4.812 → 3.106 (1,234 tok/s)", with why it stopped early.
fn outcome_line(s: &TuneSummary) -> String {
    let how = match (&s.note, s.stopped) {
        (Some(note), _) => format!(" (ended early: {note})"),
        (None, true) => " (stopped)".to_string(),
        (None, false) => String::new(),
    };
    format!(
        "trained {} steps{how}: loss on the text {:.3} → {:.3} ({:.0} training tokens/s); every view shows the fine-tuned model",
        s.steps, s.loss_before, s.loss_after, s.tokens_per_s
    )
}
