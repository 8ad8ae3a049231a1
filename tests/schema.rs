//! The record's sections as runfn-schema types them (the types every tool writes and reads its
//! section through), tied to docs/record.md and to docs/schema/: the run-record table lists the
//! same fields as the types, every section a test reads parses into its type, serializes back to
//! exactly what the tool wrote (no field lost, `null` and absent kept apart) and holds the fields
//! the table lists without `?`; the JSON Schema files are the types', and a record the pipeline
//! wrote validates against them with Python's jsonschema, as a team's own script would.
#![allow(dead_code)]

use std::collections::BTreeSet;

use runfn_schema::record::{
    CkptInterval, Cost, Environment, EvalMetrics, Evaluate, ExternalTrain, Gate, Gpu, LeakCheck,
    Leaks, MfHash, NoiseFloor, Predict, Problem, Register, Report, ReportPair, ReportStage,
    ShardSplit, Shards, Timing, Train, TrainAlert, Validate, ValidateCheck,
};
use serde::de::{DeserializeOwned, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::util::tool;

/// A field as the README's run-record table lists it: `name`, `name?` (may be absent),
/// `name: [{...}]` or `name: {...}` (its own fields), `name: {<key>: {...}}` (a map of them).
#[derive(Debug, Clone, PartialEq)]
struct DocField {
    name: String,
    optional: bool,
    fields: Option<Vec<DocField>>,
    /// `fields` are those of each value of a map, not of an object.
    map: bool,
}

/// Splits `text` at the commas outside any brackets.
fn top_level_items(text: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' | '[' | '(' => depth += 1,
            '}' | ']' | ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(text[start..].trim());
    items.retain(|i| !i.is_empty());
    items
}

fn doc_fields(list: &str) -> Vec<DocField> {
    top_level_items(list)
        .into_iter()
        .map(|item| {
            let end = item
                .find(|c: char| !(c.is_ascii_alphanumeric() || "_<>".contains(c)))
                .unwrap_or(item.len());
            let (name, rest) = item.split_at(end);
            let optional = rest.starts_with('?');
            let rest = rest.trim_start_matches('?').trim();
            let (mut fields, mut map) = (None, false);
            if let Some(value) = rest.strip_prefix(':').map(str::trim) {
                let inner = value
                    .strip_prefix("[{")
                    .and_then(|v| v.strip_suffix("}]"))
                    .or_else(|| value.strip_prefix('{').and_then(|v| v.strip_suffix('}')));
                if let Some(inner) = inner.filter(|i| i.trim() != "...") {
                    let nested = doc_fields(inner);
                    match nested.as_slice() {
                        [one] if one.name.starts_with('<') => {
                            fields = one.fields.clone();
                            map = true;
                        }
                        _ => fields = Some(nested),
                    }
                }
            }
            DocField {
                name: name.to_string(),
                optional,
                fields,
                map,
            }
        })
        .collect()
}

/// The README's run-record table: key -> (written by, the fields of the first `{...}` in its
/// content, or `None` when it lists none).
fn readme_table() -> Vec<(String, String, Option<Vec<DocField>>)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/record.md"))
        .expect("docs/record.md");
    let after = readme
        .split_once("\n## The run record\n")
        .expect("docs/record.md has a `## The run record` section")
        .1;
    let mut lines = after
        .lines()
        .skip_while(|l| !l.starts_with("| key | written by | content |"));
    assert!(lines.next().is_some(), "the run-record table's header");
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line
                .trim_matches('|')
                .splitn(3, " | ")
                .map(str::trim)
                .collect();
            let [key, writer, content] = cells[..] else {
                panic!("a run-record row with three cells: {line}");
            };
            let fields = content.find("`{").map(|start| {
                let body = &content[start + 2..];
                let mut depth = 1;
                let end = body
                    .char_indices()
                    .find(|(_, c)| {
                        match c {
                            '{' => depth += 1,
                            '}' => depth -= 1,
                            _ => {}
                        }
                        depth == 0
                    })
                    .map(|(i, _)| i)
                    .unwrap_or_else(|| panic!("unbalanced braces: {line}"));
                doc_fields(&body[..end])
            });
            (
                key.trim_matches('`').to_string(),
                writer.to_string(),
                fields,
            )
        })
        .collect()
}

/// The README's fields at `path` (`key` or `key.field.field`).
fn readme_fields(path: &str) -> Vec<DocField> {
    let mut parts = path.split('.');
    let key = parts.next().unwrap();
    let mut fields = readme_table()
        .into_iter()
        .find(|(k, _, _)| k == key)
        .and_then(|(_, _, f)| f)
        .unwrap_or_else(|| panic!("the README lists no fields for `{key}`"));
    for part in parts {
        fields = fields
            .into_iter()
            .find(|f| f.name == part)
            .and_then(|f| f.fields)
            .unwrap_or_else(|| panic!("the README lists no fields for `{path}`"));
    }
    fields
}

/// The field names serde's derive gives a struct, read without a value to deserialize.
fn struct_fields<T: DeserializeOwned>() -> BTreeSet<&'static str> {
    struct Names<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Names<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(serde::de::Error::custom("field names taken"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Names(&mut fields));
    assert!(
        !fields.is_empty(),
        "{} is not a struct",
        std::any::type_name::<T>()
    );
    fields.iter().copied().collect()
}

/// Asserts that `value` (an object, or an array or map of them) holds every field the README
/// lists at `path` without `?`, and the same below for the fields it spells out.
fn assert_documented_fields_present(value: &Value, fields: &[DocField], path: &str) {
    if let Some(items) = value.as_array() {
        return items
            .iter()
            .for_each(|item| assert_documented_fields_present(item, fields, path));
    }
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("`{path}` is not an object: {value}"));
    for field in fields {
        let at = format!("{path}.{}", field.name);
        match object.get(&field.name) {
            None => assert!(
                field.optional,
                "`{at}` is in the README without `?` but missing from the output: {value}"
            ),
            Some(inner) => match (&field.fields, field.map) {
                (Some(nested), false) if !inner.is_null() => {
                    assert_documented_fields_present(inner, nested, &at)
                }
                (Some(nested), true) => inner
                    .as_object()
                    .unwrap_or_else(|| panic!("`{at}` is not a map: {inner}"))
                    .values()
                    .for_each(|v| assert_documented_fields_present(v, nested, &at)),
                _ => {}
            },
        }
    }
}

/// The section `key` of `record`, which must parse into its type, serialize back to exactly
/// what the tool wrote, and hold the README's fields.
fn section<T: DeserializeOwned + Serialize>(record: &Value, key: &str) -> T {
    let parsed: T = serde_json::from_value(record[key].clone())
        .unwrap_or_else(|e| panic!("`{key}` does not match its schema: {e}\n{}", record[key]));
    assert_eq!(
        serde_json::to_value(&parsed).unwrap(),
        record[key],
        "`{key}` does not serialize back to what the tool wrote"
    );
    assert_documented_fields_present(&record[key], &readme_fields(key), key);
    parsed
}

/// For tests elsewhere whose records hold optional parts (evaluate's contamination).
pub fn evaluate_matches_its_schema(record: &Value) {
    let _: Evaluate = section(record, "evaluate");
}

/// For the train tests whose records hold optional parts (early stopping).
pub fn train_matches_its_schema(record: &Value) {
    let _: Train = section(record, "train");
}

/// For the gate's tests: a paired decision's section.
pub fn gate_matches_its_schema(record: &Value) {
    let _: Gate = section(record, "gate");
}

fn timings(record: &Value) {
    let _: Vec<Timing> = section(record, "timings");
}

/// The keys mf-hash writes, with its timing: the whole record it makes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MfHashRecord {
    manifest: Value,
    manifest_hash: Option<String>,
    mf_hash: MfHash,
    timings: Vec<Timing>,
}

#[test]
fn mf_hash_record_matches_its_schema() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.csv"), "x\n").unwrap();
    let hash = "b456aff0ffa18e7358da860a2424ffc10f7c145bf2a30578b3979328bee86224";
    let out = tool("mf-hash")
        .args([
            "testdata/mf-hash/churn.yaml",
            "--check",
            hash,
            "--data-digest",
        ])
        .args([dir.path()])
        .run();
    let record: MfHashRecord = serde_json::from_str(&out.stdout).expect("mf-hash record schema");
    assert!(record.mf_hash.check.is_some() && record.mf_hash.data_digest.is_some());
    let _: MfHash = section(&out.json(), "mf_hash");
    timings(&out.json());
}

/// For predict's tests.
pub fn predict_matches_its_schema(record: &Value) {
    let _: Predict = section(record, "predict");
}

pub fn report_matches_its_schema(record: &Value) {
    let _: Report = section(record, "report");
}

/// Each key of the README's run-record table: who writes it, and the struct whose fields its
/// field list must name (`None`: the README lists no fields for it).
fn documented_keys() -> Vec<(&'static str, &'static str, Option<BTreeSet<&'static str>>)> {
    vec![
        ("manifest", "mf-hash", None),
        ("manifest_hash", "mf-hash", None),
        ("mf_hash", "mf-hash", Some(struct_fields::<MfHash>())),
        ("validate", "ds-validate", Some(struct_fields::<Validate>())),
        ("leaks", "leak-check", Some(struct_fields::<Leaks>())),
        ("shards", "shardify", Some(struct_fields::<Shards>())),
        (
            "ckpt_interval",
            "ckpt-interval",
            Some(struct_fields::<CkptInterval>()),
        ),
        ("train", "train", Some(struct_fields::<Train>())),
        (
            "external_train",
            "a team's own training script",
            Some(struct_fields::<ExternalTrain>()),
        ),
        (
            "noise_floor",
            "noise-floor",
            Some(struct_fields::<NoiseFloor>()),
        ),
        ("evaluate", "evaluate", Some(struct_fields::<Evaluate>())),
        ("baseline", "(the baseline's evaluation)", None),
        ("gate", "gate", Some(struct_fields::<Gate>())),
        ("register", "register", Some(struct_fields::<Register>())),
        ("report", "report", Some(struct_fields::<Report>())),
        ("predict", "predict", Some(struct_fields::<Predict>())),
        ("timings", "every tool", Some(struct_fields::<Timing>())),
    ]
}

/// The nested field lists the README spells out, and their structs.
fn documented_nested() -> Vec<(&'static str, BTreeSet<&'static str>)> {
    vec![
        ("mf_hash.problems", struct_fields::<Problem>()),
        ("validate.checks", struct_fields::<ValidateCheck>()),
        ("leaks.checks", struct_fields::<LeakCheck>()),
        ("shards.splits", struct_fields::<ShardSplit>()),
        ("evaluate.overall", struct_fields::<EvalMetrics>()),
        ("timings.environment", struct_fields::<Environment>()),
        ("timings.environment.gpu", struct_fields::<Gpu>()),
        ("timings.cost", struct_fields::<Cost>()),
        ("train.alerts", struct_fields::<TrainAlert>()),
        ("report.stages", struct_fields::<ReportStage>()),
        ("report.predictions", struct_fields::<ReportPair>()),
    ]
}

fn assert_same_fields(path: &str, readme: &[DocField], expected: &BTreeSet<&str>) {
    let listed: BTreeSet<&str> = readme.iter().map(|f| f.name.as_str()).collect();
    let only_readme: Vec<_> = listed.difference(expected).collect();
    let only_struct: Vec<_> = expected.difference(&listed).collect();
    assert!(
        only_readme.is_empty() && only_struct.is_empty(),
        "`{path}`: the README lists {only_readme:?} that its type in runfn-schema lacks, \
         and lacks {only_struct:?} that the struct has; update both with the tool"
    );
}

#[test]
fn readme_run_record_table_matches_the_schema_structs() {
    let table = readme_table();
    let keys: Vec<&str> = table.iter().map(|(k, _, _)| k.as_str()).collect();
    let expected = documented_keys();
    let expected_keys: Vec<&str> = expected.iter().map(|(k, _, _)| *k).collect();
    assert_eq!(keys, expected_keys, "the README's run-record keys");
    for ((key, writer, fields), (_, expected_writer, expected_fields)) in
        table.iter().zip(&expected)
    {
        assert_eq!(writer, expected_writer, "`{key}` written by");
        match (fields, expected_fields) {
            (None, None) => {}
            (Some(fields), Some(expected)) => assert_same_fields(key, fields, expected),
            (fields, _) => panic!(
                "`{key}`: the README lists {fields:?}; runfn-schema's types expect {expected_fields:?}"
            ),
        }
    }
    for (path, expected) in documented_nested() {
        assert_same_fields(path, &readme_fields(path), &expected);
    }
    // The keys mf-hash writes, with its timing: the whole record it makes.
    let mut written: BTreeSet<&str> = expected
        .iter()
        .filter(|(_, writer, _)| *writer == "mf-hash")
        .map(|(k, _, _)| *k)
        .collect();
    written.insert("timings");
    assert_eq!(written, struct_fields::<MfHashRecord>());
}

#[test]
fn ckpt_interval_section_matches_its_schema() {
    let record = tool("ckpt-interval")
        .args(["--cost", "90", "--mtbf", "43200"])
        .run()
        .json();
    let _: CkptInterval = section(&record, "ckpt_interval");
    timings(&record);
}

#[test]
fn noise_floor_section_matches_its_schema() {
    let record = tool("noise-floor")
        .args([
            "testdata/noise-floor/reruns.jsonl",
            "--metric",
            "evaluate.overall.auc",
        ])
        .run()
        .json();
    let floor: NoiseFloor = section(&record, "noise_floor");
    assert!(floor.slices.is_some());
    timings(&record);
}

#[test]
fn gate_section_matches_its_schema() {
    let record = tool("gate").args(["testdata/gate/worked-case.json"]).run();
    assert_eq!(record.code, 2, "a positional argument is a usage error");
    let record = tool("gate")
        .args(["--record", "testdata/gate/worked-case.json"])
        .run()
        .json();
    let _: Gate = section(&record, "gate");
    timings(&record);
}

#[test]
fn every_tool_documents_examples_and_output() {
    for name in [
        "mf-hash",
        "ckpt-interval",
        "noise-floor",
        "gate",
        "shardify",
        "ds-validate",
        "leak-check",
        "demo-data",
        "train",
        "evaluate",
        "register",
        "predict",
    ] {
        let out = tool(name).args(["--help"]).run();
        assert_eq!(out.code, 0, "{name} --help");
        for needle in ["Examples:", "Output", "Exit:"] {
            assert!(
                out.stdout.contains(needle),
                "{name} --help lacks {needle:?}"
            );
        }
    }
}

#[test]
fn data_tool_sections_match_their_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = crate::util::demo_snapshot(&dir.path().join("s"), 3_000, &[]);
    let validated = tool("ds-validate")
        .args([
            "--in".as_ref(),
            snapshot.as_os_str(),
            "--profile-out".as_ref(),
            dir.path().join("p.json").as_os_str(),
        ])
        .stdin(crate::util::demo_record())
        .run()
        .json();
    let _: Validate = section(&validated, "validate");
    let checked = tool("leak-check")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .stdin(validated.to_string())
        .run()
        .json();
    let _: Leaks = section(&checked, "leaks");
    let sharded = tool("shardify")
        .args([
            "--in".as_ref(),
            snapshot.as_os_str(),
            "--out".as_ref(),
            dir.path().join("shards").as_os_str(),
        ])
        .stdin(checked.to_string())
        .run()
        .json();
    let _: Shards = section(&sharded, "shards");
    let tools: Vec<&str> = sharded["timings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["mf-hash", "ds-validate", "leak-check", "shardify"],
        "each stage appends its timing"
    );
}

#[test]
fn train_and_evaluate_sections_match_their_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let trained = crate::train::train(
        &crate::train::fixture().record,
        &dir.path().join("run"),
        &[],
    );
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let out = tool("evaluate")
        .args(["--bootstrap", "20", "-q"])
        .stdin(trained.stdout)
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let record = out.json();
    let _: Train = section(&record, "train");
    let _: Evaluate = section(&record, "evaluate");
    timings(&record);
    let gated = tool("gate")
        .args(["--no-baseline", "-q"])
        .stdin(record.to_string())
        .run();
    assert_eq!(gated.code, 0, "{}", gated.stderr);
    let _: Gate = section(&gated.json(), "gate");
    let registered = tool("register")
        .args([
            "--registry".as_ref(),
            dir.path().join("registry").as_os_str(),
        ])
        .args(["--name", "churn", "--promote", "prod", "-q"])
        .stdin(gated.stdout)
        .run();
    assert_eq!(registered.code, 0, "{}", registered.stderr);
    let register: Register = section(&registered.json(), "register");
    assert_eq!(
        (register.version, register.promoted.as_deref()),
        (1, Some("prod"))
    );
    timings(&registered.json());

    let ranks = crate::train::train(
        &crate::train::fixture().record,
        &dir.path().join("ranks"),
        &["--nproc-per-node", "2"],
    );
    assert_eq!(ranks.code, 0, "{}", ranks.stderr);
    let record = ranks.json();
    let train: Train = section(&record, "train");
    let distributed = train.distributed.expect("a distributed section");
    assert_eq!(
        (distributed.world_size, distributed.backend.as_str()),
        (2, "gloo")
    );
    assert!(distributed.buckets >= 1 && distributed.bucket_bytes > 0);
    assert!(distributed.allreduce_s_per_step > 0.0 && distributed.allreduce_fraction > 0.0);
    // Two ranks pinned to disjoint halves of the CPUs (when there are at least two).
    if let Some(cpus) = &distributed.cpus {
        assert!(!cpus.is_empty());
    }
    timings(&record);
}

/// docs/schema/ is what runfn-schema's types generate; `RUNFN_BLESS=1` rewrites it.
#[test]
fn docs_schema_files_are_the_types_schemas() {
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema");
    let files = runfn_schema::record::schema_files();
    if std::env::var_os("RUNFN_BLESS").is_some() {
        std::fs::create_dir_all(&folder).unwrap();
        for (name, text) in &files {
            std::fs::write(folder.join(name), text).unwrap();
        }
    }
    let mut expected: Vec<String> = files.iter().map(|(name, _)| name.clone()).collect();
    expected.sort();
    let mut present: Vec<String> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e} (write it with RUNFN_BLESS=1)", folder.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    present.sort();
    assert_eq!(present, expected, "the files of docs/schema/");
    for (name, text) in &files {
        let written = std::fs::read_to_string(folder.join(name)).unwrap();
        assert!(
            written == *text,
            "docs/schema/{name} differs from what the types generate (RUNFN_BLESS=1 rewrites it)"
        );
    }
}

/// A team's own script validates records with docs/schema/record.json and any JSON Schema
/// validator: Python's jsonschema accepts the records a pipeline wrote, and refuses a record
/// with a field of the wrong type, a misspelt field, or a section that lacks a field.
#[test]
fn records_the_pipeline_wrote_validate_against_docs_schema_in_python() {
    let dir = tempfile::tempdir().unwrap();
    let trained = crate::train::train(
        &crate::train::fixture().record,
        &dir.path().join("run"),
        &[],
    );
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let evaluated = tool("evaluate").args(["-q"]).stdin(trained.stdout).run();
    assert_eq!(evaluated.code, 0, "{}", evaluated.stderr);
    let gated = tool("gate")
        .args(["--no-baseline", "-q"])
        .stdin(evaluated.stdout)
        .run();
    assert_eq!(gated.code, 0, "{}", gated.stderr);
    let registered = tool("register")
        .args([
            "--registry".as_ref(),
            dir.path().join("registry").as_os_str(),
        ])
        .args(["--name", "churn", "-q"])
        .stdin(gated.stdout)
        .run();
    assert_eq!(registered.code, 0, "{}", registered.stderr);
    let good = registered.json();
    let mut wrong_type = good.clone();
    wrong_type["train"]["steps"] = Value::from("many");
    let mut misspelt = good.clone();
    let auc = misspelt["evaluate"]["overall"]["auc"].clone();
    misspelt["evaluate"]["overall"]["acu"] = auc;
    let mut missing = good.clone();
    missing["gate"].as_object_mut().unwrap().remove("checks");
    let cases = [
        ("good", &good),
        ("wrong_type", &wrong_type),
        ("misspelt", &misspelt),
        ("missing", &missing),
    ];
    for (name, record) in cases {
        std::fs::write(dir.path().join(format!("{name}.json")), record.to_string()).unwrap();
    }
    let script = r#"
import json, sys
from jsonschema import Draft202012Validator
schema = json.load(open("docs/schema/record.json"))
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema)
for path in sys.argv[1:]:
    errors = sorted(validator.iter_errors(json.load(open(path))), key=lambda e: list(e.path))
    first = errors[0] if errors else None
    where = ".".join(str(p) for p in first.path) if first else ""
    print(path.rsplit("/", 1)[-1], len(errors), where, first.message[:80] if first else "")
"#;
    let out = std::process::Command::new(crate::util::python_with_pyarrow())
        .arg("-c")
        .arg(script)
        .args(
            cases
                .iter()
                .map(|(n, _)| dir.path().join(format!("{n}.json"))),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("good.json 0 "), "{stdout}");
    assert!(lines[1].starts_with("wrong_type.json 1 train"), "{stdout}");
    assert!(lines[2].starts_with("misspelt.json 1 evaluate"), "{stdout}");
    assert!(lines[3].starts_with("missing.json 1 gate"), "{stdout}");
}
