//! The backend badge in the header: "WebGPU · <adapter>" or "CPU (wasm)", the force-CPU switch, and
//! the fallback notice with "Try WebGPU again". The state lives in the [`crate::host::ModelHost`].

use web_sys::HtmlInputElement;
use yew::prelude::*;

use crate::backend::BackendState;

#[derive(Properties, PartialEq)]
pub struct BadgeProps {
    pub state: BackendState,
    /// How many times the page asked for a WebGPU device (`data-probes`).
    pub probes: u32,
    pub on_force_cpu: Callback<bool>,
    pub on_retry: Callback<()>,
}

/// The badge, the force-CPU checkbox and the fallback notice.
#[function_component(BackendBadge)]
pub fn backend_badge(props: &BadgeProps) -> Html {
    let on_force =
        props.on_force_cpu.reform(|e: Event| e.target_unchecked_into::<HtmlInputElement>().checked());
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
            <label class="force-cpu muted" title="Generate with the CPU (wasm) runtime even when WebGPU works">
                <input id="force-cpu" type="checkbox" checked={props.state.force_cpu} onchange={on_force}/>
                { " force CPU" }
            </label>
            { notice }
        </div>
    }
}
