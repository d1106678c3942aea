//! Which model the page shows: the models index (`models/index.json`, parsed by attnlab-core's
//! `catalog`), the model a link asks for (`url_state`'s `model`) and the picker's grouping by family.
//! Plain Rust: compiled and tested natively.

use attnlab_core::catalog::{ModelEntry, ModelIndex, INDEX_FILE};

/// The folder the page loads when the server has no models index (what `scripts/serve.sh` creates).
pub const FALLBACK_MODEL: &str = "default";

/// URL of the models index, relative to the page.
pub fn index_url() -> String {
    format!("models/{INDEX_FILE}")
}

/// Parse and validate the models index; the error names the file.
pub fn parse_index(text: &str) -> Result<ModelIndex, String> {
    ModelIndex::from_json(text).map_err(|e| format!("the models index is not valid: models/{e}"))
}

/// The model to load for the link's `model` parameter (`asked`, already checked to be a plain folder
/// name): the asked model when the index lists it (or when there is no index to check), else the
/// index's default, else [`FALLBACK_MODEL`]. The second value, when the index does not list the
/// asked model, says so and names the models it has (for the page's link warning).
pub fn choose_model(asked: Option<&str>, index: Option<&ModelIndex>) -> (String, Option<String>) {
    match (index, asked) {
        (Some(idx), Some(name)) if idx.get(name).is_some() => (name.to_string(), None),
        (Some(idx), Some(name)) => {
            let names: Vec<&str> = idx.models.iter().map(|m| m.name.as_str()).collect();
            let why = format!(
                "no model {name} in models/{INDEX_FILE} (the models are: {}); the default {} is shown",
                names.join(", "),
                idx.default
            );
            (idx.default.clone(), Some(why))
        }
        (Some(idx), None) => (idx.default.clone(), None),
        (None, Some(name)) => (name.to_string(), None),
        (None, None) => (FALLBACK_MODEL.to_string(), None),
    }
}

/// The index's models grouped by family, families in order of first appearance, models in index
/// order within a family (the picker's `<optgroup>`s).
pub fn by_family(index: &ModelIndex) -> Vec<(&str, Vec<&ModelEntry>)> {
    let mut groups: Vec<(&str, Vec<&ModelEntry>)> = Vec::new();
    for m in &index.models {
        match groups.iter_mut().find(|(f, _)| *f == m.family) {
            Some((_, list)) => list.push(m),
            None => groups.push((m.family.as_str(), vec![m])),
        }
    }
    groups
}

/// The picker's label of a model: its name, marked when it is an untrained initial checkpoint.
pub fn option_label(m: &ModelEntry) -> String {
    match &m.initial_of {
        Some(t) => format!("{} (untrained start of {t})", m.name),
        None => m.name.clone(),
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    const INDEX: &str = r#"{"default": "alibi", "models": [
        {"name": "alibi", "family": "softmax + position bias", "description": "a"},
        {"name": "regla", "family": "gated", "description": "r"},
        {"name": "mep", "family": "softmax + position bias", "description": "m"},
        {"name": "regla-init", "family": "gated", "description": "ri", "initial_of": "regla"}]}"#;

    fn index() -> ModelIndex {
        parse_index(INDEX).expect("index")
    }

    #[test]
    fn a_listed_model_is_chosen_else_the_default_with_a_warning() {
        let idx = index();
        assert_eq!(choose_model(None, Some(&idx)), ("alibi".to_string(), None));
        assert_eq!(choose_model(Some("regla"), Some(&idx)), ("regla".to_string(), None));
        assert_eq!(choose_model(Some("regla-init"), Some(&idx)), ("regla-init".to_string(), None));
        let (name, warning) = choose_model(Some("gla"), Some(&idx));
        assert_eq!(name, "alibi");
        let warning = warning.expect("a stale model is named");
        assert!(warning.contains("gla") && warning.contains("alibi, regla, mep, regla-init"), "{warning}");
    }

    #[test]
    fn without_an_index_the_page_falls_back_to_the_default_folder() {
        assert_eq!(choose_model(None, None), (FALLBACK_MODEL.to_string(), None));
        assert_eq!(choose_model(Some("regla"), None), ("regla".to_string(), None));
    }

    #[test]
    fn a_corrupt_index_is_a_message_naming_the_file() {
        for bad in ["{", "[]", r#"{"default": "x", "models": []}"#] {
            let err = parse_index(bad).unwrap_err();
            assert!(err.contains("models/index.json"), "{err}");
        }
    }

    #[test]
    fn families_group_in_order_of_first_appearance() {
        let idx = index();
        let groups: Vec<(&str, Vec<&str>)> = by_family(&idx)
            .into_iter()
            .map(|(f, ms)| (f, ms.into_iter().map(|m| m.name.as_str()).collect()))
            .collect();
        assert_eq!(
            groups,
            vec![("softmax + position bias", vec!["alibi", "mep"]), ("gated", vec!["regla", "regla-init"])]
        );
        let init = idx.get("regla-init").expect("listed");
        assert_eq!(option_label(init), "regla-init (untrained start of regla)");
        assert_eq!(option_label(idx.get("mep").expect("listed")), "mep");
    }
}
