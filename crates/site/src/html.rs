//! The page's `index.html`: the root `index.html` with its asset marker replaced by the stylesheet
//! and the module script that loads the wasm bundle.

/// The line of the template that `render` replaces with the asset tags (it must appear once).
pub const ASSETS_MARKER: &str = "<!-- attnlab-site: assets -->";

/// Why a template cannot be rendered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    #[error("index.html has no `{ASSETS_MARKER}` line, where the stylesheet and the script go")]
    MissingMarker,
    #[error("index.html has `{ASSETS_MARKER}` more than once")]
    RepeatedMarker,
    #[error("index.html still has trunk directives (`data-trunk`); attnlab-site does not read them")]
    TrunkDirective,
}

/// The built file names, relative to the page (plain names without quotes or slashes).
#[derive(Debug, Clone)]
pub struct Assets {
    pub css: String,
    pub js: String,
    pub wasm: String,
    /// The model's worker script (it imports `js` and runs the same wasm in a Web Worker).
    pub worker: String,
    /// The fine-tune module's glue and wasm (`attnlab-tune`), which the worker fetches only when
    /// the user trains.
    pub tune_js: String,
    pub tune_wasm: String,
}

/// The worker script: a module that defines the fine-tune module's loader (`__attnlabLoadTune`:
/// imports its glue and starts its wasm, on the first call) and starts the wasm glue; the module's
/// `main` finds itself in a worker and runs the model's side (crates/web `worker/`).
pub fn worker_script(a: &Assets) -> String {
    format!(
        "globalThis.__attnlabLoadTune = async () => {{ const m = await import(\"./{}\"); \
         await m.default({{ module_or_path: \"./{}\" }}); return m; }};\n\
         import init from \"./{}\";\nawait init({{ module_or_path: \"./{}\" }});\n",
        a.tune_js, a.tune_wasm, a.js, a.wasm
    )
}

/// Renders the page: every line of `template` is kept except the marker line, which becomes the
/// asset tags at the marker's indentation. All URLs are relative, so the site works from any path.
pub fn render(template: &str, assets: &Assets) -> Result<String, TemplateError> {
    if template.contains("data-trunk") {
        return Err(TemplateError::TrunkDirective);
    }
    match template.matches(ASSETS_MARKER).count() {
        0 => return Err(TemplateError::MissingMarker),
        1 => {}
        _ => return Err(TemplateError::RepeatedMarker),
    }
    let mut out = String::with_capacity(template.len() + 512);
    for line in template.split_inclusive('\n') {
        if line.contains(ASSETS_MARKER) {
            let indent = &line[..line.len() - line.trim_start().len()];
            for tag in asset_tags(assets) {
                out.push_str(indent);
                out.push_str(&tag);
                out.push('\n');
            }
        } else {
            out.push_str(line);
        }
    }
    Ok(out)
}

/// The stylesheet, preloads of the glue and the wasm (so the download starts with the page, as
/// trunk's output did), and the inline module script that starts the app.
fn asset_tags(a: &Assets) -> Vec<String> {
    vec![
        format!(r#"<link rel="stylesheet" href="./{}" />"#, a.css),
        format!(r#"<link rel="modulepreload" href="./{}" crossorigin="anonymous" />"#, a.js),
        format!(
            r#"<link rel="preload" href="./{}" as="fetch" type="application/wasm" crossorigin="anonymous" />"#,
            a.wasm
        ),
        format!(
            r#"<script type="module">import init from "./{}"; globalThis.__attnlabWorker = "./{}"; await init({{ module_or_path: "./{}" }});</script>"#,
            a.js, a.worker, a.wasm
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assets() -> Assets {
        Assets {
            css: "style-1.css".into(),
            js: "app-2.js".into(),
            wasm: "app-2_bg.wasm".into(),
            worker: "worker-3.js".into(),
            tune_js: "tune-4.js".into(),
            tune_wasm: "tune-4_bg.wasm".into(),
        }
    }

    #[test]
    fn replaces_the_marker_line_and_keeps_the_rest() {
        let template = "<head>\n  <meta a />\n  <!-- attnlab-site: assets -->\n</head>\n";
        let page = render(template, &assets()).expect("renders");
        assert!(
            page.starts_with("<head>\n  <meta a />\n  <link rel=\"stylesheet\" href=\"./style-1.css\" />\n")
        );
        assert!(page.ends_with("</script>\n</head>\n"));
        assert!(page.contains(
            r#"import init from "./app-2.js"; globalThis.__attnlabWorker = "./worker-3.js"; await init({ module_or_path: "./app-2_bg.wasm" });"#
        ));
        let worker = worker_script(&assets());
        assert_eq!(
            worker,
            "globalThis.__attnlabLoadTune = async () => { const m = await import(\"./tune-4.js\"); \
             await m.default({ module_or_path: \"./tune-4_bg.wasm\" }); return m; };\n\
             import init from \"./app-2.js\";\nawait init({ module_or_path: \"./app-2_bg.wasm\" });\n"
        );
        assert!(!page.contains(ASSETS_MARKER));
        assert!(!page.contains("href=\"/"), "only relative URLs");
    }

    #[test]
    fn refuses_templates_without_exactly_one_marker_or_with_trunk_directives() {
        assert_eq!(render("<head></head>", &assets()).unwrap_err(), TemplateError::MissingMarker);
        let twice = format!("{ASSETS_MARKER}\n{ASSETS_MARKER}\n");
        assert_eq!(render(&twice, &assets()).unwrap_err(), TemplateError::RepeatedMarker);
        let trunk = format!("<link data-trunk rel=\"css\" href=\"a.css\" />\n{ASSETS_MARKER}\n");
        assert_eq!(render(&trunk, &assets()).unwrap_err(), TemplateError::TrunkDirective);
    }

    #[test]
    fn the_repository_template_renders() {
        let template = include_str!("../../../index.html");
        let page = render(template, &assets()).expect("index.html renders");
        assert!(page.contains("Content-Security-Policy"));
        assert!(page.contains("'wasm-unsafe-eval'"), "the CSP allows compiling the wasm module");
    }
}
