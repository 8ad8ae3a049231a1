//! The run record: one JSON object that flows from tool to tool.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;

use serde_json::{Map, Value};

use runfn_schema::record::Section;
use serde::de::DeserializeOwned;

use crate::error::{InputError, json_type_name};

/// `value` read into `T`; an error names the field's path below `origin`.
pub fn typed<T: DeserializeOwned>(value: &Value, origin: &str) -> Result<T, InputError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let field = if path == "." {
            origin.to_string()
        } else {
            format!("{origin}.{path}")
        };
        InputError::field(field, err.into_inner().to_string())
    })
}

/// A run record. Sections written by other tools are kept exactly as they came, in their order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Record {
    fields: Map<String, Value>,
}

/// Whether a tool can start without a record on stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordInput {
    /// The tool needs a record: an empty input is an error.
    Required,
    /// The tool can run standalone from flags: no input (or a terminal on stdin) is an empty record.
    Optional,
}

impl Record {
    pub fn new() -> Record {
        Record::default()
    }

    /// Reads a record from `path`, or from stdin when `path` is `None` or `-`.
    pub fn read(path: Option<&Path>, input: RecordInput) -> Result<Record, InputError> {
        let reads_stdin = path.is_none_or(|p| p == Path::new("-"));
        if reads_stdin && input == RecordInput::Optional && std::io::stdin().is_terminal() {
            return Ok(Record::new());
        }
        let (text, origin) = read_text(path)?;
        Record::parse(&text, &origin, input)
    }

    /// Parses a record; `origin` names the input in error messages.
    pub fn parse(text: &str, origin: &str, input: RecordInput) -> Result<Record, InputError> {
        if text.trim().is_empty() {
            return match input {
                RecordInput::Optional => Ok(Record::new()),
                RecordInput::Required => Err(InputError::Empty {
                    origin: origin.to_string(),
                }),
            };
        }
        let value: Value = serde_json::from_str(text).map_err(|source| InputError::Json {
            origin: origin.to_string(),
            source,
        })?;
        Record::from_value(value, origin)
    }

    /// Parses a stream of records: JSON Lines, or any white-space-separated JSON objects.
    pub fn parse_stream(text: &str, origin: &str) -> Result<Vec<Record>, InputError> {
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
            .map(|(index, value)| {
                let value = value.map_err(|source| InputError::Json {
                    origin: origin.to_string(),
                    source,
                })?;
                Record::from_value(value, &format!("{origin}: record {}", index + 1))
            })
            .collect()
    }

    /// Reads a stream of records from each of `paths`, or from stdin when there are none.
    pub fn read_stream(paths: &[std::path::PathBuf]) -> Result<Vec<Record>, InputError> {
        if paths.is_empty() {
            let (text, origin) = read_text(None)?;
            return Record::parse_stream(&text, &origin);
        }
        let mut records = Vec::new();
        for path in paths {
            let (text, origin) = read_text(Some(path))?;
            records.extend(Record::parse_stream(&text, &origin)?);
        }
        Ok(records)
    }

    pub fn from_value(value: Value, origin: &str) -> Result<Record, InputError> {
        match value {
            Value::Object(fields) => {
                // Every tool reads the manifest's fields by path; a manifest that is not an
                // object would read as "no gates", "no lineage": silence, not an error.
                match fields.get("manifest") {
                    Some(Value::Object(_)) | None => Ok(Record { fields }),
                    Some(other) => Err(InputError::field(
                        format!("{origin}: manifest"),
                        format!(
                            "must be an object (the manifest mf-hash writes), found {}",
                            json_type_name(other)
                        ),
                    )),
                }
            }
            other => Err(InputError::NotAnObject {
                origin: origin.to_string(),
                found: json_type_name(&other),
            }),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.fields.get(key)
    }

    /// Looks up a dotted path such as `evaluate.overall.auc`.
    pub fn get_path(&self, path: &str) -> Option<&Value> {
        let mut parts = path.split('.');
        let first = parts.next()?;
        parts.try_fold(self.fields.get(first)?, |value, part| value.get(part))
    }

    /// The run's seed: `--seed` when given, else `manifest.seed`; an error names both when
    /// neither is there.
    pub fn seed(&self, flag: Option<u64>) -> Result<u64, InputError> {
        match flag {
            Some(seed) => Ok(seed),
            None => match self.get_path("manifest.seed") {
                None | Some(Value::Null) => Err(InputError::field(
                    "--seed",
                    "is missing and the record has no manifest.seed",
                )),
                Some(value) => value.as_u64().ok_or_else(|| {
                    InputError::field(
                        "manifest.seed",
                        format!("must be a non-negative integer, got {value}"),
                    )
                }),
            },
        }
    }

    /// Sets a key that is not a typed section (`manifest`, `manifest_hash`, `timings`).
    /// Rerunning a tool replaces its section; other sections are never touched.
    pub fn set_section(&mut self, key: &str, value: Value) {
        self.fields.insert(key.to_string(), value);
    }

    /// Sets this tool's own section from its type: what every tool writes goes through the one
    /// definition in `runfn_schema::record`, which `docs/schema/` is generated from.
    pub fn set<S: Section>(&mut self, section: &S) -> Result<(), serde_json::Error> {
        self.set_as(S::KEY, section)
    }

    /// [`Record::set`] under another key (`baseline`, an evaluation).
    pub fn set_as<S: Section>(&mut self, key: &str, section: &S) -> Result<(), serde_json::Error> {
        self.fields
            .insert(key.to_string(), serde_json::to_value(section)?);
        Ok(())
    }

    /// The section `S` (None when the record has none), read into its type: a field missing,
    /// unknown or of the wrong type is an error naming its path (`train.best.checkpoint`).
    pub fn section<S: Section>(&self) -> Result<Option<S>, InputError> {
        self.section_at(S::KEY)
    }

    /// [`Record::section`] under another key (`baseline`).
    pub fn section_at<S: Section>(&self, key: &str) -> Result<Option<S>, InputError> {
        match self.fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => typed(value, key).map(Some),
        }
    }

    /// The section `S`, which the caller needs: its absence is an error naming what writes it.
    pub fn require<S: Section>(&self, writer: &str) -> Result<S, InputError> {
        self.section()?.ok_or_else(|| {
            InputError::field(
                S::KEY,
                format!("is missing: run {writer} first (its section is what this tool reads)"),
            )
        })
    }

    /// Refuses a record in which an earlier check failed: any top-level section that is an object
    /// with `"passed": false`. `own` is the caller's own section, which it is about to rewrite.
    /// A `passed` that is not a boolean (`0`, `"false"`, `null`) is refused too, naming it: read
    /// as "not false", it let a failed stage through.
    pub fn refuse_failed_checks(&self, own: &str) -> Result<(), InputError> {
        let mut failed: Vec<&str> = Vec::new();
        for (key, value) in &self.fields {
            if key.as_str() == own {
                continue;
            }
            match value.get("passed") {
                None | Some(Value::Bool(true)) => {}
                Some(Value::Bool(false)) => failed.push(key.as_str()),
                Some(other) => {
                    return Err(InputError::field(
                        format!("{key}.passed"),
                        format!(
                            "must be true or false, found {}",
                            crate::error::json_type_name(other)
                        ),
                    ));
                }
            }
        }
        if failed.is_empty() {
            Ok(())
        } else {
            Err(InputError::EarlierCheckFailed {
                sections: failed.join(", "),
            })
        }
    }

    /// Appends an entry to the `timings` array, creating it when absent, with its `cost` when
    /// the manifest sets `cost`.
    pub fn push_timing(&mut self, mut entry: Value) -> Result<(), InputError> {
        let rates = match crate::timings::Rates::parse(self.get_path("manifest.cost")) {
            Ok(rates) => rates,
            // A record that already failed a check (mf-hash's lint names a bad cost) still
            // goes out with its reasons; the bad rate only stops a record that looks sound.
            Err(_) if self.refuse_failed_checks("").is_err() => None,
            Err(err) => return Err(err),
        };
        if let Some(rates) = rates
            && let Value::Object(fields) = &mut entry
        {
            let cost = rates.cost_of(&Value::Object(fields.clone()));
            fields.insert("cost".into(), cost);
        }
        match self
            .fields
            .entry("timings")
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            Value::Array(entries) => {
                entries.push(entry);
                Ok(())
            }
            other => Err(InputError::field(
                "timings",
                format!("must be an array, found {}", json_type_name(other)),
            )),
        }
    }

    pub fn into_value(self) -> Value {
        Value::Object(self.fields)
    }

    pub fn as_map(&self) -> &Map<String, Value> {
        &self.fields
    }

    /// Writes the record as one line of JSON (or indented with `pretty`) followed by a newline.
    pub fn write_to(&self, out: &mut impl Write, pretty: bool) -> std::io::Result<()> {
        if pretty {
            serde_json::to_writer_pretty(&mut *out, &self.fields)?;
        } else {
            serde_json::to_writer(&mut *out, &self.fields)?;
        }
        out.write_all(b"\n")?;
        out.flush()
    }
}

/// The whole text of `path`, or of stdin when `path` is `None` or `-`, with the name to use for it
/// in messages (`<stdin>` or the path).
pub fn read_text(path: Option<&Path>) -> Result<(String, String), InputError> {
    match path {
        Some(path) if path != Path::new("-") => {
            let text = crate::side_file::read_bounded_text(path, crate::side_file::JSON_LIMIT)?;
            Ok((text, path.display().to_string()))
        }
        _ => Ok((
            read_stdin(&mut std::io::stdin().lock(), crate::side_file::JSON_LIMIT)?,
            "<stdin>".to_string(),
        )),
    }
}

/// Standard input as text, bounded like `--record`: at most `limit` bytes, and refused at the
/// first NUL byte (JSON text never holds one raw), so `/dev/zero` or a binary file piped in by
/// mistake is named at once instead of read for ever.
fn read_stdin(input: &mut impl Read, limit: u64) -> Result<String, InputError> {
    let io = |source| InputError::Io {
        path: "<stdin>".into(),
        source,
    };
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let n = match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        if let Some(at) = chunk[..n].iter().position(|&b| b == 0) {
            return Err(InputError::field(
                "<stdin>",
                format!(
                    "holds a NUL byte at offset {}: not JSON text (a device or a binary file piped in?)",
                    bytes.len() + at
                ),
            ));
        }
        if (bytes.len() + n) as u64 > limit {
            return Err(InputError::field(
                "<stdin>",
                format!("is more than the {limit} bytes a run record may hold"),
            ));
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(bytes).map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            e.utf8_error(),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stdin_is_bounded_and_a_nul_byte_ends_it_at_once() {
        let mut zeros = std::io::repeat(0).take(1 << 40);
        let err = read_stdin(&mut zeros, 1 << 30).unwrap_err().to_string();
        assert!(
            err.starts_with("<stdin>: holds a NUL byte at offset 0"),
            "{err}"
        );
        let mut spaces = std::io::repeat(b' ').take(200);
        let err = read_stdin(&mut spaces, 100).unwrap_err().to_string();
        assert!(err.contains("more than the 100 bytes"), "{err}");
        let mut record = &b"{\"a\": 1}"[..];
        assert_eq!(read_stdin(&mut record, 100).unwrap(), "{\"a\": 1}");
    }

    #[test]
    fn the_seed_comes_from_the_flag_then_the_manifest() {
        let with =
            Record::parse(r#"{"manifest": {"seed": 7}}"#, "t", RecordInput::Required).unwrap();
        assert_eq!(with.seed(None).unwrap(), 7);
        assert_eq!(with.seed(Some(9)).unwrap(), 9);
        let without = Record::parse(r#"{"manifest": {}}"#, "t", RecordInput::Required).unwrap();
        let err = without.seed(None).unwrap_err().to_string();
        assert!(
            err.contains("--seed") && err.contains("manifest.seed"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_seed_is_named_not_called_missing() {
        let record =
            Record::parse(r#"{"manifest": {"seed": -3}}"#, "t", RecordInput::Required).unwrap();
        assert_eq!(
            record.seed(None).unwrap_err().to_string(),
            "manifest.seed: must be a non-negative integer, got -3"
        );
        let record =
            Record::parse(r#"{"manifest": {"seed": 1.5}}"#, "t", RecordInput::Required).unwrap();
        assert!(record.seed(None).is_err());
    }

    #[test]
    fn the_manifest_must_be_an_object() {
        let err = Record::parse(r#"{"manifest": "x"}"#, "r.json", RecordInput::Required)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "r.json: manifest: must be an object (the manifest mf-hash writes), found a string"
        );
        let err = Record::parse_stream("{}\n{\"manifest\": [1]}\n", "runs.jsonl")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("runs.jsonl: record 2: manifest: "), "{err}");
    }

    #[test]
    fn keeps_foreign_sections_and_their_order() {
        let text = r#"{"zeta": {"a": 1}, "alpha": [1, 2.5, "x"], "manifest_hash": "ab"}"#;
        let mut record = Record::parse(text, "t", RecordInput::Required).unwrap();
        record.set_section("gate", json!({"passed": true}));
        let keys: Vec<&String> = record.as_map().keys().collect();
        assert_eq!(keys, ["zeta", "alpha", "manifest_hash", "gate"]);
        assert_eq!(record.get("alpha"), Some(&json!([1, 2.5, "x"])));
    }

    #[test]
    fn empty_input_is_an_error_only_when_required() {
        assert!(
            Record::parse("  \n", "t", RecordInput::Optional)
                .unwrap()
                .as_map()
                .is_empty()
        );
        let err = Record::parse("", "in.json", RecordInput::Required).unwrap_err();
        assert_eq!(err.to_string(), "in.json: no run record (input is empty)");
    }

    #[test]
    fn rejects_non_objects_and_malformed_json() {
        let err = Record::parse("[1]", "r.json", RecordInput::Required).unwrap_err();
        assert_eq!(
            err.to_string(),
            "r.json: the run record must be a JSON object, found an array"
        );
        let err = Record::parse("{\"a\": ", "r.json", RecordInput::Required).unwrap_err();
        assert!(
            err.to_string().starts_with("r.json: not valid JSON: "),
            "{err}"
        );
    }

    #[test]
    fn streams_of_records_name_the_bad_line() {
        let records = Record::parse_stream("{\"a\": 1}\n{\"a\": 2}\n", "runs.jsonl").unwrap();
        assert_eq!(records.len(), 2);
        let err = Record::parse_stream("{\"a\": 1}\n{\"a\": \n", "runs.jsonl").unwrap_err();
        assert!(
            err.to_string().starts_with("runs.jsonl: not valid JSON: "),
            "{err}"
        );
        assert!(err.to_string().contains("line 3"), "{err}");
        let err = Record::parse_stream("{}\n[2]\n", "runs.jsonl").unwrap_err();
        assert_eq!(
            err.to_string(),
            "runs.jsonl: record 2: the run record must be a JSON object, found an array"
        );
    }

    #[test]
    fn dotted_paths_reach_nested_values() {
        let record =
            Record::from_value(json!({"evaluate": {"overall": {"auc": 0.9}}}), "t").unwrap();
        assert_eq!(record.get_path("evaluate.overall.auc"), Some(&json!(0.9)));
        assert_eq!(record.get_path("evaluate.overall.brier"), None);
        assert_eq!(record.get_path("nope"), None);
    }

    #[test]
    fn refuses_failed_checks_but_not_its_own_section() {
        let record = Record::from_value(
            json!({"mf_hash": {"passed": true}, "validate": {"passed": false}, "gate": {"passed": false}}),
            "t",
        )
        .unwrap();
        let err = record.refuse_failed_checks("gate").unwrap_err();
        assert!(err.to_string().contains("(validate)"), "{err}");
        let ok = Record::from_value(json!({"gate": {"passed": false}}), "t").unwrap();
        assert!(ok.refuse_failed_checks("gate").is_ok());
    }

    #[test]
    fn a_passed_that_is_not_a_boolean_is_refused() {
        for passed in [json!(0), json!("false"), json!(null), json!("true")] {
            let record =
                Record::from_value(json!({"validate": {"passed": passed.clone()}}), "t").unwrap();
            let err = record.refuse_failed_checks("gate").unwrap_err();
            assert!(
                err.to_string()
                    .starts_with("validate.passed: must be true or false, found "),
                "{passed}: {err}"
            );
        }
    }

    #[test]
    fn timings_must_be_an_array() {
        let mut record = Record::from_value(json!({"timings": 3}), "t").unwrap();
        let err = record.push_timing(json!({})).unwrap_err();
        assert_eq!(err.to_string(), "timings: must be an array, found a number");
        let mut record = Record::new();
        record.push_timing(json!({"tool": "a"})).unwrap();
        record.push_timing(json!({"tool": "b"})).unwrap();
        assert_eq!(
            record.get("timings"),
            Some(&json!([{"tool": "a"}, {"tool": "b"}]))
        );
    }
}
