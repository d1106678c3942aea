//! `www/models/index.json`: the list of shipped model folders with their family and description,
//! and which one is the default of the page and the CLI. Parsed here once for both.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// File name of the index, inside the models folder.
pub const INDEX_FILE: &str = "index.json";
/// A tokenizer shared by the models of an indexed folder (beside index.json). A model folder
/// listed in the index may omit its own `tokenizer.json` and use this one: the shipped models all
/// share the Brown BPE, and one copy instead of 17 keeps www/models small.
pub const SHARED_TOKENIZER: &str = "tokenizer.json";

/// One shipped model folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    /// Folder name under the models folder (`[a-z0-9-]+`).
    pub name: String,
    /// Group shown in the picker, e.g. "softmax + position bias", "linear", "gated linear".
    pub family: String,
    /// One sentence on what the model is.
    pub description: String,
    /// For an initial checkpoint kept beside its trained model: that model's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_of: Option<String>,
}

/// The whole index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelIndex {
    /// Name of the default model.
    pub default: String,
    pub models: Vec<ModelEntry>,
    /// Indexed folders inside this one (each with its own index.json and shared tokenizer), whose
    /// models the page lists too, as `folder/name`: e.g. the runs trained at another length.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub collections: Vec<Collection>,
}

/// A nested collection of models: a folder beside the index's models holding its own index.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Collection {
    /// Folder name (`[a-z0-9-]+`), not a model's.
    pub folder: String,
    /// What sets its models apart, added to their family in the picker ("trained at length 512").
    pub label: String,
}

/// A folder name the page may put in a URL: lowercase ASCII letters, digits and `-`, 1–64 chars.
pub fn is_model_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

impl ModelIndex {
    /// Parse and validate: names well-formed and unique, the default and every `initial_of` listed.
    pub fn from_json(text: &str) -> Result<ModelIndex> {
        let bad = |reason: String| Error::Io { path: INDEX_FILE.into(), reason };
        let idx: ModelIndex = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        for (i, m) in idx.models.iter().enumerate() {
            if !is_model_name(&m.name) {
                return Err(bad(format!("models[{i}].name `{}` must be 1–64 of [a-z0-9-]", m.name)));
            }
            if idx.models[..i].iter().any(|o| o.name == m.name) {
                return Err(bad(format!("models[{i}].name `{}` is listed twice", m.name)));
            }
        }
        let listed = |n: &str| idx.models.iter().any(|m| m.name == n);
        for (i, c) in idx.collections.iter().enumerate() {
            if !is_model_name(&c.folder) {
                return Err(bad(format!("collections[{i}].folder `{}` must be 1–64 of [a-z0-9-]", c.folder)));
            }
            if listed(&c.folder) || idx.collections[..i].iter().any(|o| o.folder == c.folder) {
                return Err(bad(format!("collections[{i}].folder `{}` is listed twice", c.folder)));
            }
        }
        if !listed(&idx.default) {
            return Err(bad(format!("default `{}` is not among the models", idx.default)));
        }
        if let Some(m) = idx.models.iter().find(|m| m.initial_of.as_deref().is_some_and(|t| !listed(t))) {
            return Err(bad(format!("`{}` is the initial checkpoint of an unlisted model", m.name)));
        }
        Ok(idx)
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&ModelEntry> {
        self.models.iter().find(|m| m.name == name)
    }

    /// The initial checkpoint kept for `name`, if any.
    pub fn initial_of(&self, name: &str) -> Option<&ModelEntry> {
        self.models.iter().find(|m| m.initial_of.as_deref() == Some(name))
    }

    /// Append the models of `sub`, the index of collection `c`, as `folder/name` (the path of the
    /// folder under this index's) in family "family (label)". `sub`'s own collections are not
    /// followed: one level only.
    pub fn add_collection(&mut self, c: &Collection, sub: ModelIndex) {
        let path = |name: &str| format!("{}/{name}", c.folder);
        self.models.extend(sub.models.into_iter().map(|m| ModelEntry {
            name: path(&m.name),
            family: format!("{} ({})", m.family, c.label),
            description: m.description,
            initial_of: m.initial_of.as_deref().map(path),
        }));
    }
}

/// The folder of the collection that holds model `path` (`""` for the index's own models): where
/// its shared tokenizer lies.
pub fn collection_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(folder, _)| folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"default": "alibi", "models": [
        {"name": "alibi", "family": "softmax", "description": "d"},
        {"name": "regla-fig4", "family": "gated", "description": "d"},
        {"name": "regla-fig4-init", "family": "gated", "description": "d", "initial_of": "regla-fig4"}]}"#;

    #[test]
    fn parses_and_finds_initial_checkpoints() {
        let idx = ModelIndex::from_json(OK).unwrap();
        assert_eq!(idx.get("alibi").map(|m| m.family.as_str()), Some("softmax"));
        assert_eq!(idx.initial_of("regla-fig4").map(|m| m.name.as_str()), Some("regla-fig4-init"));
        assert!(idx.initial_of("alibi").is_none());
    }

    #[test]
    fn a_collection_adds_its_models_under_its_folder() {
        let with = OK.replace(
            r#""models": ["#,
            r#""collections": [{"folder": "len512", "label": "trained at length 512"}], "models": ["#,
        );
        let mut idx = ModelIndex::from_json(&with).unwrap();
        let c = idx.collections[0].clone();
        idx.add_collection(&c, ModelIndex::from_json(OK).unwrap());
        assert_eq!(idx.models.len(), 6);
        let m = idx.get("len512/regla-fig4-init").expect("prefixed");
        assert_eq!(m.family, "gated (trained at length 512)");
        assert_eq!(m.initial_of.as_deref(), Some("len512/regla-fig4"));
        assert_eq!(
            idx.initial_of("len512/regla-fig4").map(|m| m.name.as_str()),
            Some("len512/regla-fig4-init")
        );
        assert_eq!(idx.get("alibi").map(|m| m.family.as_str()), Some("softmax"), "its own models stay");
        assert_eq!((collection_of("len512/mep"), collection_of("mep")), ("len512", ""));
    }

    #[test]
    fn refuses_bad_indexes_by_name() {
        let coll = |folder: &str| {
            OK.replace(
                r#""models": ["#,
                &format!(r#""collections": [{{"folder": "{folder}", "label": "l"}}], "models": ["#),
            )
        };
        let cases = [
            (OK.replace(r#""default": "alibi""#, r#""default": "mep""#), "default `mep`"),
            (OK.replace(r#""name": "alibi""#, r#""name": "../etc""#), "models[0].name"),
            (OK.replace(r#""name": "regla-fig4","#, r#""name": "alibi","#), "listed twice"),
            (OK.replace(r#""initial_of": "regla-fig4""#, r#""initial_of": "gla""#), "unlisted"),
            (OK.replace(r#""family": "softmax","#, r#""family": "softmax", "size": 3,"#), "unknown field"),
            ("{".to_string(), "index.json"),
            (coll("../x"), "collections[0].folder"),
            (coll("alibi"), "listed twice"),
        ];
        for (text, want) in cases {
            let err = ModelIndex::from_json(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
    }
}
