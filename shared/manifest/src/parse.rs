//! Reading a manifest from YAML or JSON into the JSON data model, strictly: duplicate keys,
//! non-string keys, YAML tags and non-finite or overflowing numbers are errors, not silent surprises.

use std::fmt;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Yaml,
}

impl Format {
    /// From a file name's extension; `None` when it says nothing.
    pub fn from_extension(path: &std::path::Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "json" => Some(Format::Json),
            "yaml" | "yml" => Some(Format::Yaml),
            _ => None,
        }
    }

    /// JSON when the text starts with `{`, else YAML.
    pub fn sniff(text: &str) -> Format {
        if text.trim_start().starts_with('{') {
            Format::Json
        } else {
            Format::Yaml
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct ParseError {
    pub origin: String,
    pub message: String,
}

/// Parses `text` (from `origin`, used in messages) as a manifest object.
pub fn parse_manifest(text: &str, format: Format, origin: &str) -> Result<Value, ParseError> {
    let error = |message: String| ParseError {
        origin: origin.to_string(),
        message,
    };
    if text.trim().is_empty() {
        return Err(error("the manifest is empty".into()));
    }
    let value = match format {
        Format::Json => {
            let mut de = serde_json::Deserializer::from_str(text);
            let value = StrictValue
                .deserialize(&mut de)
                .map_err(|e| error(e.to_string()))?;
            de.end().map_err(|e| error(e.to_string()))?;
            value
        }
        Format::Yaml => {
            if let Some(refusal) = crate::yaml_events::first_refusal(text) {
                return Err(error(format!("{}: {}", refusal.field, refusal.message)));
            }
            let de = serde_norway::Deserializer::from_str(text);
            StrictValue
                .deserialize(de)
                .map_err(|e| error(e.to_string()))?
        }
    };
    match value {
        Value::Object(_) => Ok(value),
        other => Err(error(format!(
            "the manifest must be a mapping of fields, found {}",
            runfn_core::error::json_type_name(&other)
        ))),
    }
}

/// Deserializes any self-describing input into a `serde_json::Value`, refusing what JSON cannot
/// say exactly.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, number, boolean, null, list or mapping")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v).map(Value::Number).ok_or_else(|| {
            E::custom(format!(
                "{v} is not a finite number (NaN and infinities cannot be hashed)"
            ))
        })
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key_seed(StrictKey)? {
            if fields.contains_key(&key) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            let value = map.next_value_seed(StrictValue)?;
            fields.insert(key, value);
        }
        Ok(Value::Object(fields))
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, _: A) -> Result<Value, A::Error> {
        Err(de::Error::custom("YAML tags are not allowed in a manifest"))
    }
}

/// Mapping keys must be strings; a number or boolean key would hash as a string and surprise.
struct StrictKey;

impl<'de> DeserializeSeed<'de> for StrictKey {
    type Value = String;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = String;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_str<E>(self, v: &str) -> Result<String, E> {
        Ok(v.to_string())
    }
    fn visit_string<E>(self, v: String) -> Result<String, E> {
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_and_json_give_the_same_value() {
        let yaml =
            "# comment\nseed: 1234\nconfig: {lr: 0.003, hidden: [64, 32]}\nname: x\nnothing: ~\n";
        let json_text = r#"{"name": "x", "nothing": null, "config": {"hidden": [64, 32], "lr": 0.003}, "seed": 1234}"#;
        let a = parse_manifest(yaml, Format::Yaml, "a.yaml").unwrap();
        let b = parse_manifest(json_text, Format::Json, "b.json").unwrap();
        assert_eq!(a, b);
        assert_eq!(a["config"]["lr"], json!(0.003));
    }

    #[test]
    fn duplicate_keys_are_errors_in_both_formats() {
        let err = parse_manifest("seed: 1\nseed: 2\n", Format::Yaml, "m.yaml").unwrap_err();
        assert!(err.to_string().starts_with("m.yaml: "), "{err}");
        assert!(err.to_string().contains("duplicate"), "{err}");
        let err = parse_manifest(r#"{"a": {"b": 1, "b": 2}}"#, Format::Json, "m.json").unwrap_err();
        assert!(err.to_string().contains("duplicate key `b`"), "{err}");
    }

    #[test]
    fn refuses_what_json_cannot_say() {
        let err = parse_manifest("lr: .nan\n", Format::Yaml, "m.yaml").unwrap_err();
        assert!(err.to_string().contains("not a finite number"), "{err}");
        let err = parse_manifest("1: a\n", Format::Yaml, "m.yaml").unwrap_err();
        assert!(err.to_string().contains("string key"), "{err}");
        let err = parse_manifest("- 1\n- 2\n", Format::Yaml, "m.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "m.yaml: the manifest must be a mapping of fields, found an array"
        );
        let err = parse_manifest("config:\n  lr: 1e400\n", Format::Yaml, "m.yaml").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("m.yaml: config.lr: line 2: `1e400`"),
            "{err}"
        );
        let err = parse_manifest("seed: !!str 7\n", Format::Yaml, "m.yaml").unwrap_err();
        assert!(err.to_string().starts_with("m.yaml: seed: "), "{err}");
        let err = parse_manifest("", Format::Yaml, "m.yaml").unwrap_err();
        assert_eq!(err.to_string(), "m.yaml: the manifest is empty");
    }

    #[test]
    fn malformed_input_names_the_line() {
        let err = parse_manifest("{\"seed\": 1,\n \"x\": }", Format::Json, "m.json").unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = parse_manifest("a: [1, 2\nb: 3\n", Format::Yaml, "m.yaml").unwrap_err();
        assert!(err.to_string().contains("line"), "{err}");
    }

    #[test]
    fn sniffs_and_reads_extensions() {
        assert_eq!(Format::sniff("  {\"a\":1}"), Format::Json);
        assert_eq!(Format::sniff("a: 1"), Format::Yaml);
        assert_eq!(Format::from_extension("m.YML".as_ref()), Some(Format::Yaml));
        assert_eq!(Format::from_extension("m.txt".as_ref()), None);
    }
}
