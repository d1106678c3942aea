//! "Open model…": a folder input (`webkitdirectory`), a multi-file input, the privacy note and the
//! open's own progress line. The files go to the root (`on_files`), which also takes files dropped
//! on the page; the previous model stays in use until the opened one is ready.

use web_sys::{File, FileList, HtmlInputElement};
use yew::prelude::*;

/// Where an open stands.
#[derive(Clone, PartialEq)]
pub enum OpenState {
    Idle,
    /// Reading or converting: the line and the fraction done (`None` while unknown).
    Busy(String, Option<f64>),
    /// The last open's outcome line.
    Done(String),
    Failed,
}

#[derive(Properties, PartialEq)]
pub struct OpenProps {
    pub state: OpenState,
    pub on_files: Callback<Vec<File>>,
}

/// Every file of a `FileList`.
pub fn files_of(list: Option<FileList>) -> Vec<File> {
    let Some(list) = list else { return Vec::new() };
    (0..list.length()).filter_map(|i| list.get(i)).collect()
}

/// The two inputs, the note and the progress line.
#[function_component(OpenModel)]
pub fn open_model(props: &OpenProps) -> Html {
    let on_change = props.on_files.reform(|e: Event| {
        let input = e.target_unchecked_into::<HtmlInputElement>();
        let files = files_of(input.files());
        // Picking the same folder again must fire `change` again.
        input.set_value("");
        files
    });
    let (code, line, bar) = match &props.state {
        OpenState::Idle => ("idle", String::new(), html! {}),
        OpenState::Busy(text, Some(f)) => (
            "busy",
            text.clone(),
            html! { <progress id="open-progress" max="1" value={format!("{f:.4}")}></progress> },
        ),
        OpenState::Busy(text, None) => {
            ("busy", text.clone(), html! { <progress id="open-progress"></progress> })
        }
        OpenState::Done(text) => ("done", text.clone(), html! {}),
        OpenState::Failed => {
            ("failed", "the model was not opened (see the message above)".to_string(), html! {})
        }
    };
    html! {
        <section class="open-model" id="open-model">
            <span class="open-title">{ "Open model…" }</span>
            <input id="open-folder" class="file" type="file" webkitdirectory=true multiple=true onchange={on_change.clone()} />
            <label class="button" for="open-folder">{ "folder" }</label>
            <input id="open-files" class="file" type="file" multiple=true accept=".json,.safetensors" onchange={on_change} />
            <label class="button" for="open-files">{ "files" }</label>
            <span class="muted hint" id="open-note">
                { "an attnlab or Hugging Face (Llama, GPT-NeoX, BLOOM, GPT-2, fla GLA) folder: config.json, \
                   model.safetensors (or its index and shards), tokenizer.json; or drop the folder or its \
                   files on the page. \
                   Files are read locally: nothing is uploaded." }
            </span>
            <p id="open-status" class="status" data-state={code}>{ line }</p>
            { bar }
        </section>
    }
}
