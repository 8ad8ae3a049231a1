use serde_json::{Value, json};

use crate::util::{assert_golden, testdata, tool};

fn worked_case() -> Value {
    serde_json::from_str(&std::fs::read_to_string(testdata("gate/worked-case.json")).unwrap())
        .unwrap()
}

/// Three baseline reruns at AUC 0.861/0.863/0.862 give a floor of 0.002; the candidate is better
/// overall and on enterprise customers, but customers in their first 30 days fall 0.02 against a
/// 0.01 limit: the gate blocks and names that slice.
#[test]
fn worked_case_blocks_on_the_first_30_days_slice() {
    let with_floor = tool("noise-floor")
        .args([
            "--values",
            "0.861,0.863,0.862",
            "--metric",
            "evaluate.overall.auc",
        ])
        .stdin(worked_case().to_string())
        .run();
    assert_eq!(with_floor.code, 0, "{}", with_floor.stderr);
    let out = tool("gate").stdin(with_floor.stdout).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    let record = out.json();
    let gate = &record["gate"];
    assert_eq!(gate["passed"], false);
    let checks = gate["checks"].as_array().unwrap();
    let overall = checks
        .iter()
        .find(|c| c["name"] == "auc_min_delta")
        .unwrap();
    assert_eq!(overall["passed"], true);
    assert!(
        (overall["limit"].as_f64().unwrap() + 0.002).abs() < 1e-12,
        "{overall}"
    );
    assert_eq!(overall["note"], "limit from the noise floor");
    let enterprise = checks
        .iter()
        .find(|c| c["slice"] == "tier=enterprise")
        .unwrap();
    assert_eq!(enterprise["passed"], true);
    let reasons = gate["reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0]
            .as_str()
            .unwrap()
            .starts_with("slice tenure_bucket=<30d: auc went from 0.7900 to 0.7700 (-0.0200)"),
        "{reasons:?}"
    );
    assert!(
        out.stderr
            .contains("gate: blocked: slice tenure_bucket=<30d"),
        "{}",
        out.stderr
    );
    assert_golden("gate", "worked-case", record);
}

#[test]
fn noise_floor_from_the_baselines_own_reruns_feeds_the_gate() {
    let floor = tool("noise-floor")
        .args([
            "testdata/gate/baseline-reruns.jsonl",
            "--metric",
            "evaluate.overall.auc",
        ])
        .run();
    assert_eq!(floor.code, 0, "{}", floor.stderr);
    let mut record = worked_case();
    record["noise_floor"] = floor.json()["noise_floor"].clone();
    record["evaluate"]["overall"]["auc"] = json!(0.8595);
    record["evaluate"]["slices"]["tenure_bucket"]["<30d"]["auc"] = json!(0.785);
    let out = tool("gate").stdin(record.to_string()).run();
    assert_eq!(
        out.code, 1,
        "0.0025 worse than the baseline is beyond a 0.002 floor"
    );
    assert!(
        out.json()["gate"]["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("overall: auc went from 0.8620 to 0.8595")
    );
    record["evaluate"]["overall"]["auc"] = json!(0.8605);
    let out = tool("gate").stdin(record.to_string()).run();
    assert_eq!(
        out.code, 0,
        "0.0015 worse is within the floor: {}",
        out.stdout
    );
}

#[test]
fn passes_when_no_slice_drops_too_far() {
    let mut record = worked_case();
    record["evaluate"]["slices"]["tenure_bucket"]["<30d"]["auc"] = json!(0.785);
    let out = tool("gate").stdin(record.to_string()).run();
    assert_eq!(out.code, 0, "{}", out.stdout);
    assert_eq!(out.json()["gate"]["passed"], true);
}

#[test]
fn baseline_from_a_file_and_gates_from_flags() {
    let mut record = worked_case();
    record.as_object_mut().unwrap().remove("baseline");
    let out = tool("gate")
        .args([
            "--baseline",
            "testdata/gate/prod-eval.json",
            "--gate",
            "auc_min_delta=0.01",
        ])
        .stdin(record.to_string())
        .run();
    assert_eq!(out.code, 1);
    let reasons = out.json()["gate"]["reasons"].clone();
    assert!(
        reasons.as_array().unwrap().iter().any(|r| r
            .as_str()
            .unwrap()
            .starts_with("overall: auc went from 0.8620 to 0.8660 (+0.0040)")),
        "{reasons}"
    );
}

#[test]
fn a_first_model_needs_no_baseline_flag() {
    let mut record = worked_case();
    record.as_object_mut().unwrap().remove("baseline");
    let blocked = tool("gate").stdin(record.to_string()).run();
    assert_eq!(blocked.code, 1);
    let gate = blocked.json()["gate"].clone();
    assert!(
        gate["reasons"][0]
            .as_str()
            .unwrap()
            .starts_with("no baseline: "),
        "{gate}"
    );
    let first = tool("gate")
        .args(["--no-baseline"])
        .stdin(record.to_string())
        .run();
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(first.json()["gate"]["no_baseline"], true);
}

#[test]
fn a_missing_metric_or_slice_is_a_failure_not_a_pass() {
    let mut record = worked_case();
    record["evaluate"]["slices"]
        .as_object_mut()
        .unwrap()
        .remove("tenure_bucket");
    record["manifest"]["eval"]["gates"]["brier_min_delta"] = json!(0.0);
    let out = tool("gate").stdin(record.to_string()).run();
    assert_eq!(out.code, 1);
    let reasons: Vec<String> = out.json()["gate"]["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    assert!(
        reasons
            .iter()
            .any(|r| r == "overall: brier brier_min_delta: missing from both evaluations"),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("tenure_bucket")
            && r.contains("slice column missing from the candidate's evaluation")),
        "{reasons:?}"
    );
}

#[test]
fn bad_input_exits_2() {
    tool("gate")
        .stdin("{\"evaluate\": ")
        .run()
        .assert_bad_input("gate", "<stdin>: not valid JSON");
    tool("gate")
        .stdin("")
        .run()
        .assert_bad_input("gate", "<stdin>: no run record (input is empty)");
    tool("gate")
        .stdin("{}")
        .run()
        .assert_bad_input("gate", "evaluate: is missing");
    let mut record = worked_case();
    record["evaluate"]["overall"]["auc"] = json!("0.9");
    tool("gate")
        .stdin(record.to_string())
        .run()
        .assert_bad_input(
            "gate",
            "evaluate.overall.auc: must be a number, found a string",
        );
    tool("gate")
        .args(["--gate", "auc_min_detla=0"])
        .stdin(worked_case().to_string())
        .run()
        .assert_bad_input(
            "gate",
            "--gate auc_min_detla: `auc_min_detla` is not a gate (did you mean `auc_min_delta`?)",
        );
    tool("gate")
        .args(["--gate", "auc_min_delta"])
        .stdin(worked_case().to_string())
        .run()
        .assert_bad_input("gate", "--gate: `auc_min_delta` is not KEY=VALUE");
    let mut failed = worked_case();
    failed["validate"] = json!({"passed": false});
    tool("gate")
        .stdin(failed.to_string())
        .run()
        .assert_bad_input("gate", "an earlier check failed (validate)");
}

/// The fixture's snapshot copied with one test-period row's spend changed: the same split rules
/// and seed give a test split of the same size, holding other rows.
fn snapshot_with_one_test_row_changed(to: &std::path::Path) {
    let from = crate::train::fixture().dir.join("snapshot");
    std::fs::create_dir_all(to).unwrap();
    let mut changed = false;
    let mut parts: Vec<_> = std::fs::read_dir(&from)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    parts.sort();
    for part in parts {
        let mut text = String::new();
        for line in std::fs::read_to_string(&part).unwrap().lines() {
            let fields: Vec<&str> = line.splitn(8, ',').collect();
            if !changed && fields.len() == 8 && fields[1].starts_with("2026-08") {
                text.push_str(&format!(
                    "{},{}.01,{}",
                    fields[..6].join(","),
                    fields[6],
                    fields[7]
                ));
                changed = true;
            } else {
                text.push_str(line);
            }
            text.push('\n');
        }
        std::fs::write(to.join(part.file_name().unwrap()), text).unwrap();
    }
    assert!(changed, "no test-period row in the fixture");
}

#[test]
fn a_baseline_scored_on_other_rows_of_the_same_size_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let trained = crate::train::train(
        &crate::train::fixture().record,
        &dir.path().join("run"),
        &[],
    );
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let candidate = tool("evaluate")
        .args(["-q"])
        .stdin(trained.stdout.clone())
        .run();
    assert_eq!(candidate.code, 0, "{}", candidate.stderr);

    // The same model scored again on the same rows passes.
    let same = tool("evaluate")
        .args(["--as", "baseline", "-q"])
        .stdin(candidate.stdout.clone())
        .run();
    assert_eq!(same.code, 0, "{}", same.stderr);
    let gated = tool("gate").args(["-q"]).stdin(same.stdout).run();
    assert_eq!(gated.code, 0, "{}", gated.stdout);
    let check = &gated.json()["gate"]["checks"][0];
    assert_eq!(
        (check["name"].as_str(), check["passed"].as_bool()),
        (Some("same_test_rows"), Some(true))
    );

    // The same model on a test split of the same size with one row changed is refused.
    let other = dir.path().join("other");
    snapshot_with_one_test_row_changed(&other);
    let resharded = tool("shardify")
        .args(["--in".as_ref(), other.as_os_str()])
        .args([
            "--out".as_ref(),
            dir.path().join("other-shards").as_os_str(),
        ])
        .args(["--shard-rows", "2500", "-q"])
        .stdin(crate::train::fixture().record.clone())
        .run();
    assert_eq!(resharded.code, 0, "{}", resharded.stderr);
    let mut record: Value = serde_json::from_str(&trained.stdout).unwrap();
    record["shards"] = resharded.json()["shards"].clone();
    let elsewhere = tool("evaluate")
        .args(["-q"])
        .stdin(record.to_string())
        .run();
    assert_eq!(elsewhere.code, 0, "{}", elsewhere.stderr);
    let (c, b) = (candidate.json(), elsewhere.json());
    assert_eq!(
        c["evaluate"]["overall"]["rows"],
        b["evaluate"]["overall"]["rows"]
    );
    assert_ne!(c["evaluate"]["rows_blake3"], b["evaluate"]["rows_blake3"]);
    let baseline = dir.path().join("baseline.json");
    std::fs::write(&baseline, elsewhere.stdout).unwrap();
    let gated = tool("gate")
        .args(["--baseline".as_ref(), baseline.as_os_str(), "-q".as_ref()])
        .stdin(candidate.stdout)
        .run();
    assert_eq!(gated.code, 1, "{}", gated.stdout);
    let reasons = gated.json()["gate"]["reasons"].clone();
    assert!(
        reasons[0]
            .as_str()
            .unwrap()
            .starts_with("overall: scored on different rows: rows_blake3 "),
        "{reasons}"
    );
}
