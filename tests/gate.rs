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
    // A manifest edited after hashing is refused (tested below); this record was never hashed.
    record.as_object_mut().unwrap().remove("manifest_hash");
    let out = tool("gate").stdin(record.to_string()).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
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
            "evaluate.overall.auc: invalid type: string \"0.9\", expected f64",
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
        .stdin(candidate.stdout.clone())
        .run();
    // Per-row scores of other rows cannot be paired: refused as input, naming both digests.
    assert_eq!(gated.code, 2, "{}", gated.stdout);
    assert!(gated.stdout.is_empty());
    assert!(
        gated.stderr.starts_with(
            "gate: row_scores: the candidate's scores are of the rows with rows_blake3 "
        ),
        "{}",
        gated.stderr
    );

    // Without per-row scores (an evaluation from before they were recorded) the digests are
    // compared as a check, which blocks.
    let mut old_candidate = candidate.json();
    old_candidate["evaluate"]
        .as_object_mut()
        .unwrap()
        .remove("row_scores");
    let gated = tool("gate")
        .args(["--baseline".as_ref(), baseline.as_os_str(), "-q".as_ref()])
        .stdin(old_candidate.to_string())
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

/// Per-row scores of two models on the same 400 rows in two tiers, and the record that names
/// them, as evaluate writes them.
fn paired_files(dir: &std::path::Path) -> Value {
    use runfn_data::row_scores::RowScores;
    let n = 400u64;
    let labels: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
    let score = |shift: f64| -> Vec<f64> {
        (0..n)
            .map(|i| {
                let y = if i % 3 == 0 { 0.3 } else { 0.0 };
                (((i * 37 % 101) as f64 / 101.0) * 0.6 + y + shift).clamp(0.0, 1.0)
            })
            .collect()
    };
    let file = |name: &str, shift: f64| {
        let path = dir.join(format!("{name}.parquet"));
        let blake3 = RowScores {
            split: "test".into(),
            rows_blake3: "c".repeat(64),
            rows: (0..n).collect(),
            labels: labels.clone(),
            scores: score(shift),
            slices: vec![(
                "tier".into(),
                (0..n).map(|i| format!("t{}", i % 2)).collect(),
            )],
            ..RowScores::default()
        }
        .write(&path)
        .unwrap();
        json!({"overall": {"rows": n}, "rows_blake3": "c".repeat(64),
               "row_scores": {"path": path, "blake3": blake3}})
    };
    json!({
        "manifest": {"seed": 1, "eval": {"slices": ["tier"],
            "gates": {"auc_min_delta": -0.002, "max_slice_drop": 0.01}}},
        "evaluate": file("candidate", 0.01),
        "baseline": file("baseline", 0.0),
    })
}

#[test]
fn a_paired_record_is_decided_by_the_test_and_schema_checked() {
    let dir = tempfile::tempdir().unwrap();
    let out = tool("gate")
        .stdin(paired_files(dir.path()).to_string())
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let record = out.json();
    crate::schema::gate_matches_its_schema(&record);
    let gate = &record["gate"];
    assert_eq!(gate["method"], "paired");
    assert_eq!(gate["rule"], "no_regression");
    let overall = gate["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "auc_min_delta")
        .unwrap();
    assert_eq!(overall["status"], "passed");
    assert_eq!(overall["method"], "delong");
    assert_eq!(overall["rows"], 400);
    assert!(overall["detectable_drop"].as_f64().unwrap() >= 0.002);
}

/// Rows that do not fit in --memory: where every gated metric is AUC, DeLong's tests sort them
/// on disk and the gate's section is the one the rows held in memory give; a gate on another
/// metric is refused before any row is read. Rows in another order in the baseline's file pair
/// by key, in memory and on disk, with the same decision; what the pairing refuses (a row on
/// one side, a label, a key twice, a slice value) it refuses on disk too, naming the same row.
#[test]
fn the_paired_test_stays_within_its_memory_and_pairs_rows_in_any_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut good = paired_files(dir.path());
    // The candidate's ranking moved row by row (a shift alone would leave every placement, and
    // so DeLong's variance, the baseline's), with ties among the scores.
    let candidate = dir.path().join("candidate-moved.parquet");
    let mut moved = runfn_data::row_scores::RowScores::read(std::path::Path::new(
        good["evaluate"]["row_scores"]["path"].as_str().unwrap(),
    ))
    .unwrap();
    for (i, score) in moved.scores.iter_mut().enumerate() {
        *score =
            (((*score + ((i * 13 % 7) as f64 - 3.0) * 0.02) * 50.0).round() / 50.0).clamp(0.0, 1.0);
    }
    let digest = moved.write(&candidate).unwrap();
    good["evaluate"]["row_scores"] = json!({"path": candidate, "blake3": digest});
    let gate =
        |record: &Value, extra: &[&str]| tool("gate").args(extra).stdin(record.to_string()).run();
    let held = gate(&good, &["--memory", "64K"]);
    assert_eq!(held.code, 0, "{}", held.stderr);
    let record = held.json();
    let timing = record["timings"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(timing["memory_budget_bytes"], 65536);
    let sorted = gate(&good, &["--memory", "10K"]);
    assert_eq!(sorted.code, 0, "{}", sorted.stderr);
    assert!(
        sorted.stderr.contains("the AUC tests sort them on disk"),
        "{}",
        sorted.stderr
    );
    assert_eq!(sorted.json()["gate"], record["gate"]);
    gate(
        &good,
        &["--memory", "10K", "--gate", "logloss_min_delta=-0.01"],
    )
    .assert_bad_input(
        "gate",
        "--memory: the paired test holds both models' scores for every row: 400 rows",
    );

    let path = std::path::PathBuf::from(good["baseline"]["row_scores"]["path"].as_str().unwrap());
    let mut scores = runfn_data::row_scores::RowScores::read(&path).unwrap();
    let n = scores.rows.len();
    let order: Vec<usize> = (0..n).map(|i| (i * 7 + 3) % n).collect();
    let shuffled = runfn_data::row_scores::RowScores {
        rows: order.iter().map(|&i| scores.rows[i]).collect(),
        labels: order.iter().map(|&i| scores.labels[i]).collect(),
        scores: order.iter().map(|&i| scores.scores[i]).collect(),
        slices: vec![(
            scores.slices[0].0.clone(),
            order
                .iter()
                .map(|&i| scores.slices[0].1[i].clone())
                .collect(),
        )],
        ..std::mem::take(&mut scores)
    };
    let other = dir.path().join("shuffled.parquet");
    let digest = shuffled.write(&other).unwrap();
    let mut reordered = good.clone();
    reordered["baseline"]["row_scores"] = json!({"path": other, "blake3": digest});
    let out = gate(&reordered, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["gate"], record["gate"]);
    let sorted = gate(&reordered, &["--memory", "10K"]);
    assert_eq!(sorted.code, 0, "{}", sorted.stderr);
    assert_eq!(sorted.json()["gate"], record["gate"]);

    // What the pairing refuses, it refuses on disk too, naming the same row.
    let baseline = shuffled;
    let variants: Vec<(&str, runfn_data::row_scores::RowScores)> = vec![
        ("fewer", {
            let mut b = baseline.clone();
            b.rows.remove(5);
            b.labels.remove(5);
            b.scores.remove(5);
            b.slices[0].1.remove(5);
            b
        }),
        ("relabelled", {
            let mut b = baseline.clone();
            b.labels[9] = !b.labels[9];
            b
        }),
        ("twice", {
            let mut b = baseline.clone();
            b.rows[11] = b.rows[12];
            b
        }),
        ("sliced", {
            let mut b = baseline.clone();
            b.slices[0].1[13] = "t9".into();
            b
        }),
    ];
    for (name, scores) in variants {
        let path = dir.path().join(format!("{name}.parquet"));
        let digest = scores.write(&path).unwrap();
        let mut bad = good.clone();
        bad["baseline"]["row_scores"] = json!({"path": path, "blake3": digest});
        let (held, sorted) = (gate(&bad, &[]), gate(&bad, &["--memory", "10K"]));
        assert_eq!(held.code, 2, "{name}: {}", held.stderr);
        let line = |out: &crate::util::Output| out.stderr.lines().last().unwrap_or("").to_string();
        assert_eq!(line(&sorted), line(&held), "{name}");
        assert!(sorted.stdout.is_empty(), "{name}");
    }
}

#[test]
fn paired_bad_input_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let good = paired_files(dir.path());
    let gate = |record: &Value| tool("gate").stdin(record.to_string()).run();

    // Scores for other rows: the baseline's file holds 399 of the 400.
    let mut other = good.clone();
    let fewer = dir.path().join("fewer.parquet");
    let mut scores = runfn_data::row_scores::RowScores::read(std::path::Path::new(
        good["baseline"]["row_scores"]["path"].as_str().unwrap(),
    ))
    .unwrap();
    scores.rows.pop();
    scores.labels.pop();
    scores.scores.pop();
    scores.slices[0].1.pop();
    let digest = scores.write(&fewer).unwrap();
    other["baseline"]["row_scores"] = json!({"path": fewer, "blake3": digest});
    gate(&other).assert_bad_input(
        "gate",
        "row_scores: the candidate's scores (400 rows) and the baseline's (399 rows) do not cover the same rows: row 399 is the candidate's only",
    );

    // A file changed after it was recorded, then one truncated (and recorded so).
    let path = std::path::PathBuf::from(good["baseline"]["row_scores"]["path"].as_str().unwrap());
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let out = gate(&good);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("baseline.row_scores.blake3") && out.stderr.contains("changed after"),
        "{}",
        out.stderr
    );
    let mut truncated = good.clone();
    truncated["baseline"]["row_scores"]["blake3"] =
        json!(blake3::hash(&bytes[..bytes.len() / 2]).to_hex().to_string());
    let out = gate(&truncated);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("not a readable Parquet file"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty());
    std::fs::write(&path, &bytes).unwrap();

    // NaN scores.
    let mut nan = runfn_data::row_scores::RowScores::read(&path).unwrap();
    nan.scores[7] = f64::NAN;
    let nan_path = dir.path().join("nan.parquet");
    let digest = nan.write(&nan_path).unwrap();
    let mut with_nan = good.clone();
    with_nan["baseline"]["row_scores"] = json!({"path": nan_path, "blake3": digest});
    let out = gate(&with_nan);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("row 7: score is NaN"), "{}", out.stderr);

    // The rule's settings.
    let mut confidence = good.clone();
    confidence["manifest"]["eval"]["confidence"] = json!(1.5);
    let out = gate(&confidence);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("manifest.eval.confidence: must be a number between 0.5 and 1"),
        "{}",
        out.stderr
    );
    let mut rule = good.clone();
    rule["manifest"]["eval"]["rule"] = json!("no_regresion");
    let out = gate(&rule);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("manifest.eval.rule: must be `no_regression` or `non_inferiority`")
            && out.stderr.contains("did you mean `no_regression`"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_manifest_edited_after_hashing_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut record = paired_files(dir.path());
    let hashed = tool("mf-hash")
        .args(["-", "-q"])
        .stdin(serde_json::to_string(&json!({
            "run_id": "edited", "seed": 1,
            "data": {"snapshot": "./s@snapshot=t", "label": "y", "splits": {"train": "id < 9", "test": "id >= 9"}},
            "code": {"commit": "9c41be0", "image": format!("registry.example.com/t@sha256:{}", "a".repeat(64))},
            "eval": record["manifest"]["eval"].clone(),
        })).unwrap())
        .run();
    assert_eq!(hashed.code, 0, "{}", hashed.stderr);
    let hashed = hashed.json();
    record["manifest"] = hashed["manifest"].clone();
    record["manifest_hash"] = hashed["manifest_hash"].clone();
    let honest = tool("gate").stdin(record.to_string()).run();
    assert_eq!(honest.code, 0, "{}\n{}", honest.stderr, honest.stdout);
    record["manifest"]["eval"]
        .as_object_mut()
        .unwrap()
        .remove("gates");
    let out = tool("gate").stdin(record.to_string()).run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("gate: manifest_hash: the record's manifest hashes to"),
        "{}",
        out.stderr
    );
}
