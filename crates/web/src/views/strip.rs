//! The token strip: the traced text, one focusable element per token, shaded by the attention of
//! the hovered or pinned query over its keys. Its state is the trace views' selection: the pinned
//! cell `(query, key)` is the heatmap's locked cell (kept in the URL as `cell`), so pinning a token,
//! clicking a heatmap cell and a link all move the same selection.

use yew::prelude::*;

use crate::lab::TraceView;
use crate::linked::{self, Row, Source};

pub enum LinkMsg {
    /// The pointer (or the focus) is on this token, or left the strip.
    Hover(Option<usize>),
    /// A click, Enter or Space on a token: pin it as the query, or unpin it.
    Toggle(usize),
    /// An arrow key: pin this token as the query and focus it.
    Move(usize),
    /// Escape: no pinned or hovered token.
    Clear,
    /// A cell chosen on the heatmap (or none).
    Cell(Option<(usize, usize)>),
    Source(Source),
}

/// The selection shared by the strip, the heatmap, LAA and gates.
#[derive(Default)]
pub struct LinkState {
    hover: Option<usize>,
    /// The pinned cell as the URL has it (it may lie outside a shorter text).
    pub cell: Option<(usize, usize)>,
    pub source: Source,
    /// Give the pinned token the focus after the next render (arrow keys).
    pub refocus: bool,
}

impl LinkState {
    /// Nothing hovered; `cell` pinned (the URL's).
    pub fn new(cell: Option<(usize, usize)>) -> LinkState {
        LinkState { cell, ..LinkState::default() }
    }

    /// The pinned cell when it lies in an `n`-token text.
    pub fn cell_in(&self, n: usize) -> Option<(usize, usize)> {
        self.cell.filter(|&(i, j)| i < n && j < n)
    }

    /// The query the views show: the hovered token, else the pinned one.
    pub fn query(&self, n: usize) -> Option<usize> {
        self.hover.filter(|&i| i < n).or(self.cell_in(n).map(|c| c.0))
    }

    /// Apply `msg` in an `n`-token text; true when the pinned cell changed (the URL must follow).
    pub fn update(&mut self, msg: LinkMsg, n: usize) -> bool {
        let before = self.cell;
        // A query pinned from the strip keeps the key when it is visible from there, else its own.
        let pin = |q: usize, cell: Option<(usize, usize)>| Some((q, cell.map_or(q, |c| c.1).min(q)));
        match msg {
            LinkMsg::Hover(h) => self.hover = h,
            LinkMsg::Toggle(q) => {
                self.cell =
                    if self.cell_in(n).map(|c| c.0) == Some(q) { None } else { pin(q, self.cell_in(n)) };
            }
            LinkMsg::Move(q) => {
                self.cell = pin(q.min(n.saturating_sub(1)), self.cell_in(n));
                (self.hover, self.refocus) = (None, true);
            }
            LinkMsg::Clear => (self.cell, self.hover) = (None, None),
            LinkMsg::Cell(c) => self.cell = c,
            LinkMsg::Source(s) => self.source = s,
        }
        self.cell != before
    }

    /// The strip, its source selector and the aria-live read-out; `head` is the heatmap's.
    pub fn view(&self, t: &TraceView, head: (usize, usize), send: &Callback<LinkMsg>) -> Html {
        let n = t.labels.len();
        let query = self.query(n);
        let key = self.cell_in(n).filter(|c| Some(c.0) == query).map(|c| c.1);
        let row = query.and_then(|q| linked::row(&t.attention, self.source, head, q));
        let focus_at = self.cell_in(n).map_or(0, |c| c.0);
        let tokens = t
            .labels
            .iter()
            .enumerate()
            .map(|(k, label)| token(k, label, query, key, row.as_ref(), k == focus_at, n, send));
        html! {
            <div class="token-strip-box">
                { self.source_picker(t, head, send) }
                <div class="token-strip" role="listbox" id="token-strip"
                    data-query={query.map(|q| q.to_string()).unwrap_or_default()}
                    data-source={self.source.name()}
                    aria-label="tokens of the traced text: hover or focus a token to shade the text by its \
                        attention, click, Enter or Space pins it, arrow keys move it, Escape clears"
                    onmouseleave={send.reform(|_| LinkMsg::Hover(None))}>
                    { for tokens }
                </div>
                <p class="muted strip-legend">{ "shade ∝ |weight| (darkest: the row's largest; blue: negative) · \
                    outlined: query · underlined: key · grey: future keys" }</p>
                <p class="readout" id="token-readout" aria-live="polite">
                    { readout(t, query, key, row.as_ref(), self.source, head) }
                </p>
            </div>
        }
    }

    fn source_picker(&self, t: &TraceView, (l, h): (usize, usize), send: &Callback<LinkMsg>) -> Html {
        let names = [
            format!("layer {l}, head {h} (the heatmap's)"),
            format!("layer {l}, mean over heads"),
            format!("mean over all {} layers", t.attention.len()),
        ];
        let onchange = send.reform(|e: Event| {
            let select: web_sys::HtmlSelectElement = e.target_unchecked_into();
            LinkMsg::Source(Source::parse(&select.value()).unwrap_or_default())
        });
        html! {
            <label class="inline">{ "shade the text by: " }
                <select id="strip-source" onchange={onchange}>
                    { for Source::ALL.iter().zip(names).map(|(s, name)| html! {
                        <option value={s.name()} selected={*s == self.source}>{ name }</option>
                    }) }
                </select>
            </label>
        }
    }
}

/// One token of the strip: its weight in `row` (keys up to the query), query/key/future classes.
#[allow(clippy::too_many_arguments)]
fn token(
    k: usize,
    label: &str,
    query: Option<usize>,
    key: Option<usize>,
    row: Option<&Row>,
    tab_stop: bool,
    n: usize,
    send: &Callback<LinkMsg>,
) -> Html {
    let weight = row.and_then(|r| r.text(k));
    let style = row.filter(|_| weight.is_some()).map(|r| {
        let var =
            if r.signed && r.weights.get(k).is_some_and(|w| *w < 0.0) { "--shade-neg" } else { "--shade" };
        format!("background:color-mix(in srgb, var({var}) {:.1}%, transparent)", 100.0 * r.alpha(k))
    });
    let future = query.is_some_and(|q| k > q);
    let class = classes!(
        "tok",
        (query == Some(k)).then_some("query"),
        (key == Some(k)).then_some("key"),
        future.then_some("future")
    );
    let title = match (&weight, future) {
        (Some(w), _) => format!("{k} {label:?}: {w}"),
        (None, true) => format!("{k} {label:?}: future key (masked)"),
        (None, false) => format!("{k} {label:?}"),
    };
    let onkeydown = send.reform(move |e: KeyboardEvent| {
        let msg = match e.key().as_str() {
            "ArrowLeft" | "ArrowUp" => LinkMsg::Move(k.saturating_sub(1)),
            "ArrowRight" | "ArrowDown" => LinkMsg::Move((k + 1).min(n.saturating_sub(1))),
            "Home" => LinkMsg::Move(0),
            "End" => LinkMsg::Move(n.saturating_sub(1)),
            "Enter" | " " => LinkMsg::Toggle(k),
            "Escape" => LinkMsg::Clear,
            _ => return LinkMsg::Hover(Some(k)),
        };
        e.prevent_default();
        msg
    });
    html! {
        <span class={class} data-pos={k.to_string()} data-weight={weight.unwrap_or_default()}
            role="option" aria-selected={(query == Some(k)).to_string()} title={title}
            tabindex={if tab_stop { "0" } else { "-1" }} style={style.unwrap_or_default()}
            onmouseenter={send.reform(move |_| LinkMsg::Hover(Some(k)))}
            onfocus={send.reform(move |_| LinkMsg::Hover(Some(k)))}
            onclick={send.reform(move |_| LinkMsg::Toggle(k))}
            onkeydown={onkeydown}>{ shown(label) }</span>
    }
}

/// A token as the strip writes it: line breaks and empty tokens made visible.
fn shown(label: &str) -> String {
    if label.is_empty() {
        "∅".to_string()
    } else {
        label.replace('\n', "↵")
    }
}

/// The read-out: what is shaded, and the pinned key's (else the strongest key's) weight.
fn readout(
    t: &TraceView,
    query: Option<usize>,
    key: Option<usize>,
    row: Option<&Row>,
    source: Source,
    (l, h): (usize, usize),
) -> String {
    let (Some(q), Some(r)) = (query, row) else {
        return "hover or focus a token to shade the text by its attention; click pins it".to_string();
    };
    let label = |k: usize| t.labels.get(k).map(|s| format!("{s:?}")).unwrap_or_default();
    let what = match source {
        Source::Head => format!("layer {l}, head {h}"),
        Source::LayerMean => format!("layer {l}, mean over heads"),
        Source::AllLayers => "mean over all layers".to_string(),
    };
    let strongest = (0..r.weights.len()).max_by(|&a, &b| r.weights[a].abs().total_cmp(&r.weights[b].abs()));
    match (key, strongest) {
        (Some(j), _) if j > q => {
            format!("query {q} {} → key {j} {}: masked (future key)", label(q), label(j))
        }
        (Some(j), _) => format!(
            "query {q} {} → key {j} {}: {} ({what})",
            label(q),
            label(j),
            r.text(j).unwrap_or_default()
        ),
        (None, Some(j)) => format!(
            "query {q} {} ({what}): strongest key {j} {}: {}",
            label(q),
            label(j),
            r.text(j).unwrap_or_default()
        ),
        (None, None) => format!("query {q} {}", label(q)),
    }
}
