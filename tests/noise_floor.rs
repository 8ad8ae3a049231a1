use serde_json::json;

use crate::util::{assert_golden, tool};

#[test]
fn three_values_give_a_floor_of_0_002() {
    let out = tool("noise-floor")
        .args(["--values", "0.861,0.863,0.862"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let section = &out.json()["noise_floor"];
    assert!(
        (section["floor"].as_f64().unwrap() - 0.002).abs() < 1e-12,
        "{section}"
    );
    assert_eq!(section["n"], 3);
    assert_eq!(section["method"], "range");
}

#[test]
fn reruns_golden_with_slices() {
    let out = tool("noise-floor")
        .args([
            "testdata/noise-floor/reruns.jsonl",
            "--metric",
            "evaluate.overall.auc",
        ])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let record = out.json();
    assert_eq!(
        record["train"]["seed"], 1234,
        "the first record passes through"
    );
    assert!(
        (record["noise_floor"]["slices"]["tenure_bucket"]["<30d"]["floor"]
            .as_f64()
            .unwrap()
            - 0.015)
            .abs()
            < 1e-12
    );
    assert_golden("noise-floor", "reruns", record);
}

#[test]
fn std_and_ci95_methods() {
    let std = tool("noise-floor")
        .args(["--values", "0.861,0.863,0.862", "--method", "std"])
        .run()
        .json();
    assert!((std["noise_floor"]["floor"].as_f64().unwrap() - 0.001).abs() < 1e-12);
    let ci = tool("noise-floor")
        .args(["--values", "0.861,0.863,0.862", "--method", "ci95"])
        .run()
        .json();
    let expected = 4.302652729911275 * 0.001 / 3f64.sqrt();
    assert!(
        (ci["noise_floor"]["floor"].as_f64().unwrap() - expected).abs() < 1e-9,
        "{ci}"
    );
}

#[test]
fn two_values_warn_and_one_is_an_error() {
    let two = tool("noise-floor").args(["--values", "0.861,0.863"]).run();
    assert_eq!(two.code, 0);
    assert!(
        two.stderr.contains("warning: only 2 reruns"),
        "{}",
        two.stderr
    );
    let quiet = tool("noise-floor")
        .args(["--values", "0.861,0.863", "-q"])
        .run();
    assert_eq!(quiet.stderr, "");
    tool("noise-floor")
        .args(["--values", "0.861"])
        .run()
        .assert_bad_input(
            "noise-floor",
            "values: needs at least 2 values to measure a spread, got 1",
        );
}

#[test]
fn bad_records_exit_2_naming_the_record() {
    let h = |hash: &str, auc: f64| {
        json!({"manifest_hash": hash, "evaluate": {"overall": {"auc": auc}}}).to_string()
    };
    let mixed = format!("{}\n{}\n", h("aa", 0.8), h("bb", 0.81));
    tool("noise-floor")
        .args(["--metric", "evaluate.overall.auc"])
        .stdin(mixed)
        .run()
        .assert_bad_input(
            "noise-floor",
            "record 2: manifest_hash: is \"bb\", but record 1 has \"aa\"",
        );
    let missing = format!(
        "{}\n{}\n",
        h("aa", 0.8),
        json!({"manifest_hash": "aa", "evaluate": {"overall": {}}})
    );
    tool("noise-floor")
        .args(["--metric", "evaluate.overall.auc"])
        .stdin(missing)
        .run()
        .assert_bad_input(
            "noise-floor",
            "record 2: evaluate.overall.auc: is missing or not a number",
        );
    let malformed = format!("{}\n{{\"evaluate\": \n", h("aa", 0.8));
    tool("noise-floor")
        .args(["--metric", "evaluate.overall.auc"])
        .stdin(malformed)
        .run()
        .assert_bad_input("noise-floor", "<stdin>: not valid JSON");
    let failed = format!(
        "{}\n{}\n",
        h("aa", 0.8),
        json!({"manifest_hash": "aa", "train": {"passed": false}})
    );
    tool("noise-floor")
        .args(["--metric", "evaluate.overall.auc"])
        .stdin(failed)
        .run()
        .assert_bad_input("noise-floor", "an earlier check failed (train)");
    tool("noise-floor")
        .args(["no/such.jsonl", "--metric", "a.b"])
        .run()
        .assert_bad_input("noise-floor", "no/such.jsonl: ");
    let out = tool("noise-floor").run();
    assert_eq!(out.code, 2, "--metric or --values is required");
}
