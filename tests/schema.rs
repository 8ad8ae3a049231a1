//! The documented shape of each tool's section, as structs that refuse unknown fields, tied to
//! the README's run-record table: `readme_run_record_table_matches_the_schema_structs` compares
//! the fields the README lists for each key with the structs' fields, and every section a test
//! reads must hold the fields the README lists without `?`. A field added, renamed or removed in
//! a tool, in the README or in a struct, without the other two, fails here.
#![allow(dead_code)]

use std::collections::BTreeSet;

use serde::Deserialize;
use serde::de::{DeserializeOwned, Visitor};
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Timing {
    tool: String,
    started_at: String,
    wall_s: f64,
    cpu_s: f64,
    max_rss_bytes: u64,
    environment: Environment,
    cost: Option<Cost>,
    seed: Option<u64>,
    #[serde(rename = "for")]
    role: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Environment {
    cpu_model: String,
    cores_online: u64,
    cores_available: u64,
    memory_bytes: u64,
    kernel: String,
    os: String,
    version: String,
    cores_used: Option<u64>,
    pinned_cpus: Option<Vec<u64>>,
    threads: Option<u64>,
    libtorch: Option<String>,
    device: Option<String>,
    gpus: Option<u64>,
    gpu: Option<Gpu>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Gpu {
    name: String,
    memory_bytes: u64,
    peak_memory_used_bytes: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cost {
    cpu: f64,
    gpu: f64,
    total: f64,
    currency: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MfHashRecord {
    manifest: Value,
    manifest_hash: Option<String>,
    mf_hash: MfHash,
    timings: Vec<Timing>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MfHash {
    passed: bool,
    format: String,
    problems: Vec<Problem>,
    check: Option<HashCheck>,
    data_digest: Option<DataDigest>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Problem {
    field: String,
    message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HashCheck {
    expected: String,
    matched: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DataDigest {
    path: String,
    digest: String,
    files: u64,
    bytes: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CkptInterval {
    young_s: f64,
    daly_s: f64,
    interval_s: f64,
    interval_steps: Option<u64>,
    overhead_fraction: f64,
    expected_loss_per_failure_s: f64,
    expected_waste_fraction: f64,
    method: String,
    inputs: CkptInputs,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CkptInputs {
    cost_s: f64,
    mtbf_s: f64,
    step_time_s: Option<f64>,
    restart_s: f64,
    blocking_s: Option<f64>,
    mtbf_source: String,
    /// `--cost`, `record: train.ckpt_mean_s` or `measured: <file>`.
    cost_source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NoiseFloor {
    metric: String,
    n: usize,
    mean: f64,
    std: f64,
    min: f64,
    max: f64,
    range: f64,
    floor: f64,
    method: String,
    values: Vec<f64>,
    slices:
        Option<std::collections::BTreeMap<String, std::collections::BTreeMap<String, SliceSpread>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SliceSpread {
    n: usize,
    mean: f64,
    std: f64,
    min: f64,
    max: f64,
    range: f64,
    floor: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Gate {
    passed: bool,
    no_baseline: bool,
    method: String,
    rule: Option<String>,
    confidence: Option<f64>,
    resamples: Option<u64>,
    gates_run: Vec<String>,
    underpowered: Vec<String>,
    undefined: Vec<String>,
    checks: Vec<GateCheck>,
    reasons: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GateCheck {
    name: String,
    metric: String,
    slice: Option<String>,
    baseline: Option<f64>,
    candidate: Option<f64>,
    delta: Option<f64>,
    limit: Option<f64>,
    comparison: String,
    passed: bool,
    note: Option<String>,
    // The paired test's numbers (absent from point comparisons and absolute gates).
    status: Option<String>,
    method: Option<String>,
    se: Option<f64>,
    se_rows: Option<f64>,
    se_training: Option<f64>,
    interval: Option<[f64; 2]>,
    bound: Option<f64>,
    p_value: Option<f64>,
    p_adjusted: Option<f64>,
    rows: Option<u64>,
    positives: Option<u64>,
    detectable_drop: Option<f64>,
}

/// The section `key` of `record`, which must match its struct and hold the README's fields.
fn section<T: serde::de::DeserializeOwned>(record: &Value, key: &str) -> T {
    let parsed = serde_json::from_value(record[key].clone())
        .unwrap_or_else(|e| panic!("`{key}` does not match its schema: {e}\n{}", record[key]));
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Register {
    passed: bool,
    reason: Option<String>,
    registry: String,
    name: String,
    version: i64,
    weights_blake3: String,
    weights: String,
    manifest_hash: String,
    promoted: Option<String>,
    ungated_reason: Option<String>,
    already_registered: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Quartiles {
    p25: f64,
    median: f64,
    p75: f64,
    total: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportStage {
    stage: String,
    runs: u64,
    wall_s: Quartiles,
    cpu_s: Quartiles,
    max_rss_bytes: u64,
    share: f64,
    cost: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportPair {
    name: String,
    kind: String,
    of: String,
    predicted: f64,
    measured: f64,
    unit: String,
    gap: Option<f64>,
    flagged: bool,
    source: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Report {
    records: u64,
    runs: u64,
    stages: Vec<ReportStage>,
    bottleneck: Option<Value>,
    total_wall_s: f64,
    cost: Option<Value>,
    predictions: Vec<ReportPair>,
    flagged: Vec<String>,
    curves: Vec<Value>,
    /// Each night the inputs hold: its verdict, records and what was left out (see report).
    nights: Vec<Value>,
    html: Option<String>,
    plots: Vec<String>,
    tensorboard: Option<Vec<String>>,
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
            "noise_floor",
            "noise-floor",
            Some(struct_fields::<NoiseFloor>()),
        ),
        ("evaluate", "evaluate", Some(struct_fields::<Evaluate>())),
        ("baseline", "(the baseline's evaluation)", None),
        ("gate", "gate", Some(struct_fields::<Gate>())),
        ("register", "register", Some(struct_fields::<Register>())),
        ("report", "report", Some(struct_fields::<Report>())),
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
        "`{path}`: the README lists {only_readme:?} that its struct in tests/schema.rs lacks, \
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
                "`{key}`: the README lists {fields:?}; tests/schema.rs expects {expected_fields:?}"
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Shards {
    dir: String,
    index_blake3: String,
    splits: std::collections::BTreeMap<String, ShardSplit>,
    unassigned_rows: u64,
    bad_values: u64,
    seed: u64,
    passed: bool,
    unsplit: Unsplit,
    splits_resolved: std::collections::BTreeMap<String, ResolvedSplit>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Unsplit {
    rows: u64,
    fraction: f64,
    max_fraction: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolvedSplit {
    rule: String,
    resolved: String,
    column: String,
    after: Option<String>,
    until: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardSplit {
    rows: u64,
    shards: u64,
    rows_blake3: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Leaks {
    passed: bool,
    bad_values: u64,
    checks: Vec<LeakCheck>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LeakCheck {
    name: String,
    passed: bool,
    count: u64,
    of: Option<u64>,
    fraction: Option<f64>,
    setting: Value,
    reason: Option<String>,
    examples: Vec<Value>,
    note: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Validate {
    passed: bool,
    profile: Value,
    profile_file: Option<String>,
    previous: Option<String>,
    previous_model: Option<PreviousModel>,
    no_previous: Option<String>,
    checks: Vec<ValidateCheck>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviousModel {
    reference: String,
    version: Option<i64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ValidateCheck {
    name: String,
    column: Option<String>,
    value: Option<f64>,
    threshold: Option<f64>,
    noise: Option<f64>,
    passed: bool,
    fails_run: bool,
    detail: Option<String>,
    explained: Option<String>,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Train {
    passed: bool,
    preempted: bool,
    reason: Option<String>,
    weights: Option<String>,
    weights_blake3: Option<String>,
    steps: u64,
    steps_this_run: u64,
    seed: u64,
    device: String,
    threads: i32,
    wall_s: f64,
    samples_per_s: f64,
    data_wait_fraction: f64,
    step_time_s: f64,
    ckpt_mean_s: Option<f64>,
    ckpt_async: bool,
    ckpt_blocking_s: Option<f64>,
    checkpoints_written: u64,
    resumed_from: Option<Value>,
    metrics: String,
    parameters: i64,
    features: TrainFeatures,
    final_loss: Option<f64>,
    val: Option<EvalMetrics>,
    best: Option<TrainBest>,
    early_stopping: Option<TrainEarlyStopping>,
    shards_index_blake3: String,
    distributed: Option<TrainDistributed>,
    alerts: Vec<TrainAlert>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainBest {
    step: u64,
    val_auc: f64,
    checkpoint: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainEarlyStopping {
    patience: u64,
    stopped_at_step: Option<u64>,
    best_step: Option<u64>,
    best_val_auc: Option<f64>,
    evaluations_since_best: u64,
    weights_step: u64,
    note: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainAlert {
    kind: String,
    step: u64,
    value: f64,
    threshold: f64,
    message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainDistributed {
    world_size: usize,
    backend: String,
    buckets: usize,
    bucket_bytes: usize,
    allreduce_s_per_step: f64,
    allreduce_fraction: f64,
    cpus: Option<Vec<usize>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrainFeatures {
    numeric: Vec<String>,
    categorical: Vec<String>,
    missing_indicators: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EvalMetrics {
    auc: Option<f64>,
    auc_note: Option<String>,
    logloss: f64,
    brier: f64,
    ece: f64,
    accuracy: f64,
    positive_rate: f64,
    label_rate: f64,
    mean_score: f64,
    rows: u64,
    ci95: Option<std::collections::BTreeMap<String, [f64; 2]>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Evaluate {
    passed: bool,
    model: String,
    registered_as: Option<String>,
    weights_blake3: String,
    model_manifest_hash: String,
    split: String,
    shards_index_blake3: String,
    rows_blake3: String,
    overall: EvalMetrics,
    slices: std::collections::BTreeMap<String, std::collections::BTreeMap<String, EvalMetrics>>,
    row_scores: RowScoresRef,
    unseen: std::collections::BTreeMap<String, Unseen>,
    contamination: Option<Contamination>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RowScoresRef {
    path: String,
    blake3: String,
    rows: u64,
    key: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Unseen {
    rows: u64,
    fraction: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Contamination {
    twin_rows: u64,
    twins_in: String,
    overall_without_twins: Option<EvalMetrics>,
    delta_auc: Option<f64>,
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
