//! The page's state kept in its URL (`url_state`), shared by the panels through a yew context.
//!
//! Every panel reads what it shows from [`Share`] when it is created (so a link restores it, and a
//! view that comes back after another tab shows what it showed) and writes its part back when the
//! user changes it. The address is replaced (`history.replaceState`, no new history entry) 300 ms
//! after the last change, so typing a prompt does not rewrite it per key; "copy link" writes it at
//! once. Parameters of the link that only a loaded model can check (layers, heads) are checked by
//! the views once; a bad one becomes a warning of the page, like the ones [`UrlState::parse`] gives.

use std::cell::RefCell;
use std::rc::Rc;

use gloo_timers::callback::Timeout;
use wasm_bindgen::JsValue;
use yew::Callback;

use crate::url_state::UrlState;

/// The name the bias sliders' parameters are checked under.
pub const EDIT: &str = "slope, uniform, mix";

/// Milliseconds after the last change before the address is rewritten.
const WRITE_DELAY_MS: u32 = 300;

struct Inner {
    state: RefCell<UrlState>,
    timer: RefCell<Option<Timeout>>,
    /// Parameters of the opened link not yet checked against a model.
    unchecked: RefCell<Vec<&'static str>>,
    warn: Callback<String>,
}

/// The page's URL state; clones share it.
#[derive(Clone)]
pub struct Share(Rc<Inner>);

impl PartialEq for Share {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl Share {
    /// The state of the opened link; `warn` shows a warning about it.
    pub fn new(state: UrlState, warn: Callback<String>) -> Share {
        let s = &state;
        let given = [
            (EDIT, s.slope.is_some() || s.uniform.is_some() || s.mix.is_some()),
            ("kernel_layer", s.kernel_layer.is_some()),
            ("layer", s.layer.is_some() || s.head.is_some()),
            ("b", s.b.is_some()),
        ];
        let unchecked = given.into_iter().filter(|(_, g)| *g).map(|(p, _)| p).collect();
        Share(Rc::new(Inner {
            state: RefCell::new(state),
            timer: RefCell::new(None),
            unchecked: RefCell::new(unchecked),
            warn,
        }))
    }

    /// The current state.
    pub fn get(&self) -> UrlState {
        self.0.state.borrow().clone()
    }

    /// Change the state (see [`UrlState::update`]); the address follows shortly.
    pub fn update(&self, change: impl FnOnce(&mut UrlState)) {
        let changed = {
            let mut state = self.0.state.borrow_mut();
            let before = state.clone();
            state.update(change);
            *state != before
        };
        if changed {
            self.schedule();
        }
    }

    /// Fill in what the link left out with the values the page uses for it (so the address names
    /// them too); unlike [`Share::update`] this keeps the link's output (`gen`): nothing changed.
    pub fn complete(&self, fill: impl FnOnce(&mut UrlState)) {
        let changed = {
            let mut state = self.0.state.borrow_mut();
            let before = state.clone();
            fill(&mut state);
            *state != before
        };
        if changed {
            self.schedule();
        }
    }

    fn schedule(&self) {
        let me = self.clone();
        *self.0.timer.borrow_mut() = Some(Timeout::new(WRITE_DELAY_MS, move || me.write()));
    }

    /// Write the address now (what "copy link" copies).
    pub fn write(&self) {
        self.0.timer.borrow_mut().take();
        let Some(window) = web_sys::window() else { return };
        let query = self.0.state.borrow().query();
        let location = window.location();
        let url = format!(
            "{}{query}{}",
            location.pathname().unwrap_or_default(),
            location.hash().unwrap_or_default()
        );
        if let Ok(history) = window.history() {
            let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&url));
        }
    }

    /// A view checked parameter `param` of the opened link against the model: `problem` says what
    /// is wrong with it (shown once as a warning). Later checks of the same parameter (values the
    /// user set in the page, another model) are silent.
    pub fn checked(&self, param: &'static str, problem: Option<String>) {
        let from_link = {
            let mut unchecked = self.0.unchecked.borrow_mut();
            let found = unchecked.iter().position(|p| *p == param);
            found.map(|k| unchecked.remove(k)).is_some()
        };
        if let (true, Some(problem)) = (from_link, problem) {
            self.0.warn.emit(format!("{param}: {problem}"));
        }
    }
}
