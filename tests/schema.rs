//! The documented shape of each tool's section, as structs that refuse unknown fields: a field
//! added, renamed or removed without updating the README's schema fails here.
#![allow(dead_code)]

use serde::Deserialize;
use serde_json::Value;

use crate::util::tool;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Timing {
    tool: String,
    started_at: String,
    wall_s: f64,
    cpu_s: f64,
    max_rss_bytes: u64,
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
}

fn section<T: serde::de::DeserializeOwned>(record: &Value, key: &str) -> T {
    serde_json::from_value(record[key].clone())
        .unwrap_or_else(|e| panic!("`{key}` does not match its schema: {e}\n{}", record[key]))
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardSplit {
    rows: u64,
    shards: u64,
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
    checks: Vec<ValidateCheck>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ValidateCheck {
    name: String,
    column: Option<String>,
    value: Option<f64>,
    threshold: Option<f64>,
    passed: bool,
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
    checkpoints_written: u64,
    resumed_from: Option<Value>,
    metrics: String,
    parameters: i64,
    features: TrainFeatures,
    final_loss: Option<f64>,
    val: Option<EvalMetrics>,
    shards_index_blake3: String,
    distributed: Option<TrainDistributed>,
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
    overall: EvalMetrics,
    slices: std::collections::BTreeMap<String, std::collections::BTreeMap<String, EvalMetrics>>,
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
