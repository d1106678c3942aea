//! Getting things out of the page: text to the clipboard ("copy link", "copy as CSV") and files
//! to the user's downloads (the figure exports: SVG, PNG, CSV, JSON).

use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    Blob, BlobPropertyBag, CanvasRenderingContext2d, HtmlAnchorElement, HtmlCanvasElement, HtmlImageElement,
    Url,
};

use crate::fetch::js_error_text;

/// Put `text` on the clipboard (needs a secure context: https or localhost).
pub async fn copy_text(text: &str) -> Result<(), String> {
    let window = web_sys::window().ok_or("no window")?;
    let clipboard = window.navigator().clipboard();
    JsFuture::from(clipboard.write_text(text)).await.map(|_| ()).map_err(|e| js_error_text(&e))
}

fn document() -> Result<web_sys::Document, String> {
    web_sys::window().and_then(|w| w.document()).ok_or_else(|| "no document".to_string())
}

/// Offer `href` (a blob: or data: URL) as the download `name`.
pub fn download_url(name: &str, href: &str) -> Result<(), String> {
    let doc = document()?;
    let a: HtmlAnchorElement = doc
        .create_element("a")
        .map_err(|e| js_error_text(&e))?
        .dyn_into()
        .map_err(|_| "not an anchor".to_string())?;
    a.set_href(href);
    a.set_download(name);
    let body = doc.body().ok_or("no body")?;
    body.append_child(&a).map_err(|e| js_error_text(&e))?;
    a.click();
    a.remove();
    Ok(())
}

/// Offer `text` as the download `name` of type `mime`.
pub fn download_text(name: &str, mime: &str, text: &str) -> Result<(), String> {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let options = BlobPropertyBag::new();
    options.set_type(mime);
    download_blob(name, Blob::new_with_str_sequence_and_options(&parts, &options))
}

/// Offer `bytes` as the download `name` (binary).
pub fn download_bytes(name: &str, bytes: &[u8]) -> Result<(), String> {
    let parts = js_sys::Array::of1(&js_sys::Uint8Array::from(bytes));
    let options = BlobPropertyBag::new();
    options.set_type("application/octet-stream");
    download_blob(name, Blob::new_with_u8_array_sequence_and_options(&parts, &options))
}

fn download_blob(name: &str, blob: Result<Blob, JsValue>) -> Result<(), String> {
    let blob = blob.map_err(|e| js_error_text(&e))?;
    let url = Url::create_object_url_with_blob(&blob).map_err(|e| js_error_text(&e))?;
    let result = download_url(name, &url);
    // The download has its bytes once started; the URL is released a little later.
    gloo_timers::callback::Timeout::new(10_000, move || {
        let _ = Url::revoke_object_url(&url);
    })
    .forget();
    result
}

/// The markup of `node` as XML (an exported SVG).
pub fn xml_of(node: &web_sys::Node) -> Result<String, String> {
    web_sys::XmlSerializer::new().and_then(|s| s.serialize_to_string(node)).map_err(|e| js_error_text(&e))
}

/// A PNG data URL of `svg` (a standalone SVG document of `width × height` pixels) drawn `scale`
/// times larger, by the browser's own SVG renderer.
pub async fn svg_to_png(svg: &str, width: f64, height: f64, scale: f64) -> Result<String, String> {
    let img = HtmlImageElement::new().map_err(|e| js_error_text(&e))?;
    let src = format!("data:image/svg+xml;charset=utf-8,{}", js_sys::encode_uri_component(svg));
    img.set_src(&src);
    JsFuture::from(img.decode())
        .await
        .map_err(|e| format!("the SVG could not be drawn: {}", js_error_text(&e)))?;
    let canvas: HtmlCanvasElement = document()?
        .create_element("canvas")
        .map_err(|e| js_error_text(&e))?
        .dyn_into()
        .map_err(|_| "not a canvas".to_string())?;
    canvas.set_width((width * scale).round().max(1.0) as u32);
    canvas.set_height((height * scale).round().max(1.0) as u32);
    let ctx: CanvasRenderingContext2d = canvas
        .get_context("2d")
        .map_err(|e| js_error_text(&e))?
        .ok_or("no canvas 2d context")?
        .dyn_into()
        .map_err(|_| "unexpected context type".to_string())?;
    ctx.draw_image_with_html_image_element_and_dw_and_dh(&img, 0.0, 0.0, width * scale, height * scale)
        .map_err(|e| js_error_text(&e))?;
    canvas.to_data_url_with_type("image/png").map_err(|e| js_error_text(&e))
}
