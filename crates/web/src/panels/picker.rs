//! The model picker (one `<optgroup>` per family of the models index, the description below) and the
//! load section under it: the status line, the progress bar, the model's info, where its files came
//! from with "forget cached models", and the cache notices. The index, the choice and the load are
//! the root's; this panel shows them and empties the browser cache.

use std::rc::Rc;

use attnlab_core::catalog::ModelIndex;
use wasm_bindgen_futures::spawn_local;
use web_sys::HtmlSelectElement;
use yew::prelude::*;

use crate::app::Phase;
use crate::engine::ModelInfo;
use crate::host::ModelRef;
use crate::models;
use crate::protocol::LoadReport;
use crate::store;

#[derive(Properties, PartialEq)]
pub struct PickerProps {
    /// The models index; `None` while it loads, when the server has none, or when it is corrupt.
    pub index: Option<Rc<ModelIndex>>,
    /// The model shown or being loaded.
    pub model: Option<AttrValue>,
    pub phase: Phase,
    /// Load progress in [0, 1]; `None` while the total size is unknown.
    pub progress: Option<f64>,
    /// The page's status line (loading, then generation).
    pub status: AttrValue,
    /// The model in use, once loaded.
    pub loaded: Option<ModelRef>,
    /// Bytes of the model worker's wasm memory (0 until it reports).
    pub memory: u64,
    /// Where the current model's files came from (browser cache or network), with notices.
    pub report: Option<Rc<LoadReport>>,
    /// Id of the latest load (a new load clears the answer of "forget cached models").
    pub load: u32,
    pub on_pick: Callback<String>,
}

pub enum PickerMsg {
    /// "forget cached models": empty the browser cache of model files.
    ForgetCache,
    CacheForgotten(Result<(), String>),
}

/// The picker and the load section.
pub struct ModelPicker {
    /// Answer of "forget cached models".
    cache_note: Option<String>,
}

impl Component for ModelPicker {
    type Message = PickerMsg;
    type Properties = PickerProps;

    fn create(_ctx: &Context<Self>) -> Self {
        ModelPicker { cache_note: None }
    }

    fn changed(&mut self, ctx: &Context<Self>, old: &Self::Properties) -> bool {
        if ctx.props().load != old.load {
            self.cache_note = None;
        }
        true
    }

    fn update(&mut self, ctx: &Context<Self>, msg: Self::Message) -> bool {
        match msg {
            PickerMsg::ForgetCache => {
                let link = ctx.link().clone();
                spawn_local(
                    async move { link.send_message(PickerMsg::CacheForgotten(store::clear().await)) },
                );
                false
            }
            PickerMsg::CacheForgotten(result) => {
                self.cache_note = Some(match result {
                    Ok(()) => "cached models forgotten: the next load fetches from the network".to_string(),
                    Err(e) => format!("the browser cache could not be emptied: {e}"),
                });
                true
            }
        }
    }

    fn view(&self, ctx: &Context<Self>) -> Html {
        html! {
            <>
                { view_picker(ctx.props()) }
                { self.view_load(ctx) }
            </>
        }
    }
}

/// The model picker: one `<optgroup>` per family, the current model's description below.
fn view_picker(props: &PickerProps) -> Html {
    let Some(index) = &props.index else {
        return html! {};
    };
    let current = props.model.as_deref().unwrap_or("");
    let groups = models::by_family(index).into_iter().map(|(family, entries)| {
        html! {
            <optgroup label={family.to_string()}>
                { for entries.into_iter().map(|m| html! {
                    <option value={m.name.clone()} selected={m.name == current}>{ models::option_label(m) }</option>
                }) }
            </optgroup>
        }
    });
    let description = index.get(current).map(|m| m.description.clone()).unwrap_or_default();
    let on_change = props.on_pick.reform(|e: Event| e.target_unchecked_into::<HtmlSelectElement>().value());
    html! {
        <section class="picker">
            <label for="model-picker">{ "Model" }</label>
            <select id="model-picker" onchange={on_change} aria-describedby="model-description">
                if index.get(current).is_none() {
                    <option value="" selected=true disabled=true>{ placeholder(current) }</option>
                }
                { for groups }
            </select>
            <p id="model-description" class="muted">{ description }</p>
        </section>
    }
}

/// The picker's line when the model shown is not in the index (one opened from local files).
fn placeholder(current: &str) -> String {
    match current {
        "" => "choose a model".to_string(),
        name => format!("opened: {name}"),
    }
}

impl ModelPicker {
    fn view_load(&self, ctx: &Context<Self>) -> Html {
        let props = ctx.props();
        let bar = match (props.phase, props.progress) {
            (Phase::Loading, Some(f)) => html! {
                <progress id="load-progress" max="1" value={format!("{f:.4}")}></progress>
            },
            (Phase::Loading, None) => html! { <progress id="load-progress"></progress> },
            _ => html! {},
        };
        let info = match props.loaded.as_ref().map(|m| m.info()) {
            Some(info) => view_model_info(info, props.memory),
            None => html! {},
        };
        let source = match &props.report {
            Some(r) if props.phase == Phase::Ready => html! {
                <p id="model-source" class="muted model-source" data-source={r.code()}>
                    { r.text() }{ " " }
                    <button id="forget-cache" class="link" onclick={ctx.link().callback(|_| PickerMsg::ForgetCache)}
                        title="Delete the model files this page keeps in the browser cache">
                        { "forget cached models" }
                    </button>
                    if let Some(note) = &self.cache_note { { " · " }{ note } }
                </p>
            },
            _ => html! {},
        };
        let notice = match &props.report {
            Some(r) if !r.notices.is_empty() => html! {
                <p id="cache-notice" class="notice" role="status">{ r.notices.join("; ") }</p>
            },
            _ => html! {},
        };
        html! {
            <section class="load">
                <div id="status" class="status" role="status" aria-live="polite">{ props.status.as_str() }</div>
                { bar }
                { info }
                { source }
                { notice }
            </section>
        }
    }
}

/// The model's name, source architecture, variants, shape, parameter count and description.
fn view_model_info(info: &ModelInfo, memory: u64) -> Html {
    let variants = info.variants.join(" + ");
    let arch = info.architecture.as_deref().map(|a| format!(" · {a}")).unwrap_or_default();
    let memory_text = (memory > 0).then(|| format!(" · worker memory {}", crate::open::size(memory)));
    html! {
        <p id="model-info" class="model-info" data-params={info.params.to_string()}
            data-worker-bytes={memory.to_string()}
            data-architecture={info.architecture.clone().unwrap_or_else(|| "attnlab".to_string())}>
            <b>{ &info.name }</b>
            { format!(
                "{arch} · {variants} · {} layers × {} heads · d_model {} · vocab {} · context {} \
                 (trained at {}) · {} parameters",
                info.n_layers, info.n_heads, info.d_model, info.vocab_size, info.max_context,
                info.train_context, crate::open::group(info.params as u64)
            ) }
            { memory_text.unwrap_or_default() }
            if !info.description.is_empty() {
                <br/><span class="muted">{ &info.description }</span>
            }
        </p>
    }
}
