//! `tags`: a team's own metadata on a run (owner, ticket, a description), free-form but small
//! and plain. They are part of the manifest, so they are hashed with the rest of it (two runs
//! that differ only in their owner are two runs); the night's page shows them and the registry
//! keeps them with the model they trained.

use std::collections::BTreeMap;

use serde_json::Value;

/// How many tags a manifest may carry: metadata, not a data store.
pub const MAX_TAGS: usize = 64;
/// The longest key and value, in bytes.
pub const MAX_KEY_BYTES: usize = 64;
pub const MAX_VALUE_BYTES: usize = 1024;

/// A manifest's tags, by key.
pub type Tags = BTreeMap<String, String>;

/// What is wrong with `tags` (absent is fine), each as (field, message).
pub fn problems(value: Option<&Value>) -> Vec<(String, String)> {
    let Some(value) = value else {
        return Vec::new();
    };
    let Value::Object(tags) = value else {
        return vec![(
            "tags".into(),
            format!(
                "must be a mapping of names to text (owner: ana), found {}",
                runfn_core::error::json_type_name(value)
            ),
        )];
    };
    let mut found = Vec::new();
    if tags.len() > MAX_TAGS {
        found.push((
            "tags".into(),
            format!("has {} tags; at most {MAX_TAGS}", tags.len()),
        ));
    }
    for (key, value) in tags {
        let field = format!("tags.{key}");
        if !is_key(key) {
            found.push((
                field.clone(),
                format!(
                    "`{key}` must be letters, digits, `.`, `_` or `-`, at most {MAX_KEY_BYTES} bytes"
                ),
            ));
        }
        match value {
            Value::String(text) if text.trim().is_empty() => {
                found.push((field, "is empty".into()));
            }
            Value::String(text) if text.len() > MAX_VALUE_BYTES => found.push((
                field,
                format!(
                    "is {} bytes; a tag holds at most {MAX_VALUE_BYTES}",
                    text.len()
                ),
            )),
            Value::String(_) => {}
            Value::Number(n) => found.push((
                field,
                format!("must be text, found the number {n} (quote it in YAML)"),
            )),
            Value::Bool(b) => {
                found.push((field, format!("must be text, found {b} (quote it in YAML)")))
            }
            other => found.push((
                field,
                format!(
                    "must be text, found {}",
                    runfn_core::error::json_type_name(other)
                ),
            )),
        }
    }
    found
}

/// The tags of a manifest that passed lint (none when it has none).
pub fn of(manifest: &Value) -> Tags {
    manifest
        .get("tags")
        .and_then(Value::as_object)
        .map(|tags| {
            tags.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn is_key(key: &str) -> bool {
    let mut chars = key.chars();
    key.len() <= MAX_KEY_BYTES
        && chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_text_tags_pass_and_are_read_back() {
        let manifest = json!({"tags": {"owner": "ana", "ticket": "ML-412", "cost-center": "7"}});
        assert!(problems(manifest.get("tags")).is_empty());
        assert!(problems(None).is_empty());
        let tags = of(&manifest);
        assert_eq!(tags.get("ticket").map(String::as_str), Some("ML-412"));
        assert_eq!(tags.len(), 3);
        assert!(of(&json!({})).is_empty());
    }

    #[test]
    fn every_bad_tag_is_named() {
        let many: serde_json::Map<String, Value> = (0..=MAX_TAGS)
            .map(|i| (format!("t{i}"), json!("x")))
            .collect();
        let cases = [
            (json!(["owner"]), "tags", "must be a mapping"),
            (json!({"owner": 7}), "tags.owner", "quote it in YAML"),
            (json!({"owner": true}), "tags.owner", "quote it in YAML"),
            (
                json!({"owner": {"name": "ana"}}),
                "tags.owner",
                "must be text",
            ),
            (json!({"owner": " "}), "tags.owner", "is empty"),
            (
                json!({"owner name": "ana"}),
                "tags.owner name",
                "must be letters",
            ),
            (
                json!({"note": "x".repeat(MAX_VALUE_BYTES + 1)}),
                "tags.note",
                "at most",
            ),
            (Value::Object(many), "tags", "at most 64"),
        ];
        for (tags, field, words) in cases {
            let found = problems(Some(&tags));
            assert!(
                found.iter().any(|(f, m)| f == field && m.contains(words)),
                "{tags}: {found:?}"
            );
        }
    }
}
