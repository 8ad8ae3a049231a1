use serde_json::json;

use crate::util::{assert_golden, tool};

fn interval(args: &[&str]) -> serde_json::Value {
    let out = tool("ckpt-interval").args(args).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()["ckpt_interval"].clone()
}

fn close(actual: &serde_json::Value, expected: f64, tolerance: f64) -> bool {
    actual
        .as_f64()
        .is_some_and(|a| (a - expected).abs() <= tolerance)
}

#[test]
fn young_golden_for_90_s_and_12_h() {
    let out = tool("ckpt-interval")
        .args([
            "--cost",
            "90",
            "--mtbf",
            "43200",
            "--step-time",
            "0.5",
            "--method",
            "young",
        ])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let record = out.json();
    let section = &record["ckpt_interval"];
    assert!(close(&section["interval_s"], 2788.5, 0.1), "{section}");
    assert!(
        close(&section["overhead_fraction"], 0.0323, 0.0005),
        "{section}"
    );
    assert!(
        close(&section["expected_loss_per_failure_s"], 23.2 * 60.0, 6.0),
        "{section}"
    );
    assert_eq!(section["method"], "young");
    assert_golden("ckpt-interval", "young-90s-12h", record);
}

#[test]
fn dalys_published_figures() {
    for (mtbf_s, expected_min) in [("86400", 116.7), ("21600", 56.7), ("900", 9.14)] {
        let section = interval(&["--cost", "300", "--mtbf", mtbf_s]);
        assert_eq!(section["method"], "daly");
        assert!(
            close(
                &section["interval_s"],
                expected_min * 60.0,
                expected_min * 0.6
            ),
            "M={mtbf_s}: {section}"
        );
    }
    let section = interval(&["--cost", "300", "--mtbf", "150"]);
    assert_eq!(section["daly_s"], json!(150.0), "C >= 2M gives M");
    let section = interval(&["--cost", "300", "--mtbf", "120", "--blocking", "1"]);
    assert!(
        close(&section["daly_s"], 300.0, 1e-9),
        "an asynchronous write must finish first: {section}"
    );
}

#[test]
fn cost_and_step_time_come_from_the_record() {
    let record =
        json!({"train": {"ckpt_mean_s": 90.0, "step_time_s": 0.25}, "manifest_hash": "ab"});
    let out = tool("ckpt-interval")
        .args(["--mtbf", "43200", "--method", "young"])
        .stdin(record.to_string())
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result = out.json();
    assert_eq!(result["manifest_hash"], "ab", "the record passes through");
    assert!(close(&result["ckpt_interval"]["interval_s"], 2788.5, 0.1));
    assert_eq!(result["ckpt_interval"]["interval_steps"], json!(11154));
    let flag_wins = tool("ckpt-interval")
        .args(["--mtbf", "43200", "--cost", "10"])
        .stdin(record.to_string())
        .run();
    assert_eq!(
        flag_wins.json()["ckpt_interval"]["inputs"]["cost_s"],
        json!(10.0)
    );
}

#[test]
fn blocking_comes_from_the_record_when_train_wrote_in_the_background() {
    let blocking = |train: serde_json::Value, args: &[&str]| {
        let out = tool("ckpt-interval")
            .args(["--mtbf", "43200"])
            .args(args)
            .stdin(json!({ "train": train }).to_string())
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.json()["ckpt_interval"]["inputs"]["blocking_s"].clone()
    };
    let background = json!({"ckpt_mean_s": 90.0, "ckpt_async": true, "ckpt_blocking_s": 2.5});
    assert_eq!(blocking(background.clone(), &[]), json!(2.5));
    assert_eq!(
        blocking(background, &["--blocking", "4"]),
        json!(4.0),
        "the flag wins"
    );
    // A blocking save's figure is its whole cost: nothing to take from it.
    let blocking_save = json!({"ckpt_mean_s": 90.0, "ckpt_async": false, "ckpt_blocking_s": 90.1});
    assert_eq!(blocking(blocking_save, &[]), json!(null));
    // Back to back checkpoints can wait longer than one write; no more than the cost is charged.
    let back_to_back = json!({"ckpt_mean_s": 9.0, "ckpt_async": true, "ckpt_blocking_s": 9.5});
    assert_eq!(blocking(back_to_back, &[]), json!(9.0));
}

#[test]
fn mtbf_from_failures_and_from_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let failures = dir.path().join("failures.txt");
    std::fs::write(
        &failures,
        "# node failures\n2026-11-01T00:00:00Z\n2026-11-01T06:00:00Z\n2026-11-01T12:00:00Z\n",
    )
    .unwrap();
    let out = tool("ckpt-interval")
        .args(["--cost", "90", "--failures"])
        .args([&failures])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.json()["ckpt_interval"]["inputs"]["mtbf_s"],
        json!(21600.0)
    );
    let section = interval(&["--cost", "90", "--node-mtbf", "2592000", "--nodes", "60"]);
    assert_eq!(section["inputs"]["mtbf_s"], json!(43200.0));

    std::fs::write(&failures, "2026-11-01T00:00:00Z\nsoon\n").unwrap();
    let bad = tool("ckpt-interval")
        .args(["--cost", "90", "--failures"])
        .args([&failures])
        .run();
    bad.assert_bad_input("ckpt-interval", "failures.txt:2: `soon` is not a timestamp");
    std::fs::write(&failures, "2026-11-01T00:00:00Z\n").unwrap();
    let one = tool("ckpt-interval")
        .args(["--cost", "90", "--failures"])
        .args([&failures])
        .run();
    one.assert_bad_input(
        "ckpt-interval",
        "needs at least 2 distinct failure times, found 1",
    );
}

#[test]
fn zero_negative_nan_or_missing_inputs_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--cost", "0", "--mtbf", "43200"],
            "--cost: must be a positive number of seconds, got 0",
        ),
        (
            &["--cost", "-5", "--mtbf", "43200"],
            "--cost: must be a positive number of seconds, got -5",
        ),
        (
            &["--cost", "NaN", "--mtbf", "43200"],
            "--cost: must be a positive number of seconds, got NaN",
        ),
        (
            &["--cost", "90", "--mtbf", "0"],
            "--mtbf: must be a positive number of seconds, got 0",
        ),
        (
            &["--cost", "90", "--mtbf", "inf"],
            "--mtbf: must be a positive number of seconds, got inf",
        ),
        (
            &["--cost", "90", "--mtbf", "100", "--restart", "-1"],
            "--restart: must be zero or more seconds",
        ),
        (
            &["--cost", "90", "--mtbf", "100", "--blocking", "91"],
            "--blocking (91) cannot exceed --cost (90)",
        ),
        (
            &["--mtbf", "43200"],
            "--cost: is missing and the record has no `train.ckpt_mean_s`",
        ),
        (&["--cost", "90"], "--mtbf: is missing"),
    ];
    for (args, message) in cases {
        tool("ckpt-interval")
            .args(*args)
            .run()
            .assert_bad_input("ckpt-interval", message);
    }
    let out = tool("ckpt-interval")
        .args(["--cost", "ninety", "--mtbf", "1"])
        .run();
    assert_eq!(out.code, 2, "clap refuses a non-number");
    let wrong_type = tool("ckpt-interval")
        .args(["--mtbf", "1"])
        .stdin(r#"{"train": {"ckpt_mean_s": "slow"}}"#)
        .run();
    wrong_type.assert_bad_input(
        "ckpt-interval",
        "record: train.ckpt_mean_s: invalid type: string \"slow\", expected f64",
    );
    let malformed = tool("ckpt-interval")
        .args(["--cost", "1", "--mtbf", "1"])
        .stdin("{\"train\": ")
        .run();
    malformed.assert_bad_input("ckpt-interval", "<stdin>: not valid JSON");
}

#[test]
fn a_record_whose_earlier_check_failed_is_refused() {
    let out = tool("ckpt-interval")
        .args(["--cost", "90", "--mtbf", "43200"])
        .stdin(r#"{"mf_hash": {"passed": false}}"#)
        .run();
    out.assert_bad_input("ckpt-interval", "an earlier check failed (mf_hash)");
}
