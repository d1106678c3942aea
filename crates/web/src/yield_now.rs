//! Yielding to the browser's event loop between units of work.
//!
//! `setTimeout(0)` is clamped to ≥ 4 ms once timers nest, which costs more than a decode step of a
//! small model, and is throttled to 1 s in background tabs. A `MessageChannel` message is a
//! macrotask with neither penalty (the technique React's scheduler uses): input events (a click on
//! Stop) and rendering still get their turn between two tokens.

use gloo_timers::future::TimeoutFuture;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::MessageChannel;

/// Let the browser handle pending events and render, then continue.
pub async fn yield_now() {
    let mut posted = false;
    let promise = js_sys::Promise::new(&mut |resolve, _reject| {
        let Ok(channel) = MessageChannel::new() else {
            return;
        };
        let (receiver, sender) = (channel.port1(), channel.port2());
        // The closure owns the channel, keeping both ports alive until the message arrives.
        let on_message = Closure::once_into_js(move || {
            let _ = resolve.call0(&JsValue::UNDEFINED);
            drop(channel);
        });
        receiver.set_onmessage(Some(on_message.unchecked_ref()));
        posted = sender.post_message(&JsValue::UNDEFINED).is_ok();
    });
    if posted {
        let _ = JsFuture::from(promise).await;
    } else {
        TimeoutFuture::new(0).await;
    }
}

/// Give the browser time to paint (a status line) before a long synchronous step.
pub async fn next_paint() {
    TimeoutFuture::new(20).await;
}
