//! Which model the page shows: the models index (`models/index.json`, parsed by attnlab-core's
//! `catalog`), the `?model=` query, the picker's grouping by family and the query string the picker
//! writes back into the URL. Plain Rust: compiled and tested natively.

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

/// The model to load for the page's query string (`location.search`): `?model=<name>` when given
/// (it must be listed in the index, when there is one), else the index's default, else
/// [`FALLBACK_MODEL`].
pub fn choose_model(search: &str, index: Option<&ModelIndex>) -> Result<String, String> {
    let asked = crate::lab::model_from_query(search)?;
    match (index, asked) {
        (Some(idx), Some(name)) if idx.get(&name).is_some() => Ok(name),
        (Some(idx), Some(name)) => {
            let names: Vec<&str> = idx.models.iter().map(|m| m.name.as_str()).collect();
            Err(format!(
                "?model={name}: no such model in models/{INDEX_FILE}; the models are: {}",
                names.join(", ")
            ))
        }
        (Some(idx), None) => Ok(idx.default.clone()),
        (None, Some(name)) => Ok(name),
        (None, None) => Ok(FALLBACK_MODEL.to_string()),
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

/// `search` (a URL's query, with or without the leading `?`) with its `model=` parameter set to
/// `name`: an existing one is replaced in place, other parameters are kept, otherwise it is added.
pub fn query_with_model(search: &str, name: &str) -> String {
    let query = search.strip_prefix('?').unwrap_or(search);
    let mut parts: Vec<String> = Vec::new();
    let mut set = false;
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        if kv == "model" || kv.starts_with("model=") {
            if !set {
                parts.push(format!("model={name}"));
                set = true;
            }
        } else {
            parts.push(kv.to_string());
        }
    }
    if !set {
        parts.push(format!("model={name}"));
    }
    format!("?{}", parts.join("&"))
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
    fn the_query_picks_a_listed_model_else_the_default() {
        let idx = index();
        assert_eq!(choose_model("", Some(&idx)), Ok("alibi".to_string()));
        assert_eq!(choose_model("?x=1", Some(&idx)), Ok("alibi".to_string()));
        assert_eq!(choose_model("?model=regla", Some(&idx)), Ok("regla".to_string()));
        assert_eq!(choose_model("?x=1&model=regla-init", Some(&idx)), Ok("regla-init".to_string()));
        let err = choose_model("?model=gla", Some(&idx)).unwrap_err();
        assert!(err.contains("gla") && err.contains("alibi, regla, mep, regla-init"), "{err}");
        // Malformed names are refused by the query check before the index is consulted.
        assert!(choose_model("?model=../x", Some(&idx)).unwrap_err().contains("folder"));
    }

    #[test]
    fn without_an_index_the_page_falls_back_to_the_default_folder() {
        assert_eq!(choose_model("", None), Ok(FALLBACK_MODEL.to_string()));
        assert_eq!(choose_model("?model=regla", None), Ok("regla".to_string()));
        assert!(choose_model("?model=..", None).is_err());
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

    #[test]
    fn the_picker_rewrites_only_the_model_parameter() {
        assert_eq!(query_with_model("", "gla"), "?model=gla");
        assert_eq!(query_with_model("?", "gla"), "?model=gla");
        assert_eq!(query_with_model("?model=alibi", "gla"), "?model=gla");
        assert_eq!(query_with_model("?a=1&model=alibi&b=2", "gla"), "?a=1&model=gla&b=2");
        assert_eq!(query_with_model("?a=1", "gla"), "?a=1&model=gla");
        assert_eq!(query_with_model("?model=x&model=y", "gla"), "?model=gla");
        assert_eq!(query_with_model("?modelx=1", "gla"), "?modelx=1&model=gla");
    }
}
