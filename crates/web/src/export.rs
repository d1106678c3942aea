//! Getting things out of the page: text to the clipboard ("copy link", "copy as CSV").

use wasm_bindgen_futures::JsFuture;

/// Put `text` on the clipboard (needs a secure context: https or localhost).
pub async fn copy_text(text: &str) -> Result<(), String> {
    let window = web_sys::window().ok_or("no window")?;
    let clipboard = window.navigator().clipboard();
    JsFuture::from(clipboard.write_text(text)).await.map(|_| ()).map_err(|e| crate::fetch::js_error_text(&e))
}
