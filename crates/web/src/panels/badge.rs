//! The backend badge in the header: "WebGPU · <adapter>" or "CPU (wasm)" (with Auto's measured
//! reason), the backend selector (Auto / WebGPU / CPU), and the fallback notice with "Try WebGPU
//! again". The state lives in the model's worker; the page's [`crate::host::ModelHost`] mirrors it.

use web_sys::HtmlSelectElement;
use yew::prelude::*;

use crate::backend::{BackendState, Choice};

#[derive(Properties, PartialEq)]
pub struct BadgeProps {
    pub state: BackendState,
    /// How many times the page asked for a WebGPU device (`data-probes`).
    pub probes: u32,
    pub on_choose: Callback<Choice>,
    pub on_retry: Callback<()>,
}

/// The badge, the backend selector and the fallback notice.
#[function_component(BackendBadge)]
pub fn backend_badge(props: &BadgeProps) -> Html {
    let on_choose = props.on_choose.reform(|e: Event| {
        Choice::parse(&e.target_unchecked_into::<HtmlSelectElement>().value()).unwrap_or_default()
    });
    let chosen = props.state.choice;
    let option = |c: Choice, label: &'static str| {
        html! { <option value={c.code()} selected={c == chosen}>{ label }</option> }
    };
    let retry = props.state.can_retry().then(|| {
        html! {
            <button id="retry-webgpu" class="link" onclick={props.on_retry.reform(|_| ())}
                title="Ask the browser for a WebGPU adapter and device again (the page and your text stay)">
                { "Try WebGPU again" }
            </button>
        }
    });
    let notice = match props.state.notice() {
        Some(n) => html! {
            <p id="backend-notice" class="backend-notice" role="status">{ n }{ " " }{ for retry }</p>
        },
        None => html! {},
    };
    html! {
        <div class="backend">
            <span id="backend" class="badge" data-backend={props.state.code()} data-probes={props.probes.to_string()}>
                { format!("backend: {}", props.state.badge()) }
            </span>
            <label class="backend-choice muted"
                title="Auto: the faster backend for this model, timed at load; or always WebGPU, or always the CPU">
                { "generate on " }
                <select id="backend-choice" onchange={on_choose}>
                    { option(Choice::Auto, "Auto") }{ option(Choice::Gpu, "WebGPU") }{ option(Choice::Cpu, "CPU") }
                </select>
            </label>
            { notice }
        </div>
    }
}
