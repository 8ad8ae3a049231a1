use std::path::Path;

use serde_json::Value;

use crate::util::{demo_record, demo_snapshot, named_check, tool};

fn validate(snapshot: &Path, extra: &[&std::ffi::OsStr]) -> crate::util::Output {
    tool("ds-validate")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .args(extra)
        .stdin(demo_record())
        .run()
}

fn failed(validate: &Value) -> Vec<(String, String)> {
    validate["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false && c.get("explained").is_none())
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["column"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn profiles_a_clean_snapshot_and_saves_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(&dir.path().join("s"), 20_000, &[]);
    let profile = dir.path().join("profile.json");
    let out = validate(&snapshot, &["--profile-out".as_ref(), profile.as_os_str()]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let section = out.json()["validate"].clone();
    assert_eq!(section["passed"], true);
    let summary = &section["profile"];
    assert_eq!(summary["rows"], 20_000);
    let rate = summary["label_rate"].as_f64().unwrap();
    assert!((0.1..0.35).contains(&rate), "{rate}");
    let spend = &summary["columns"]["monthly_spend"];
    assert_eq!(spend["type"], "float64");
    assert!(
        spend["quantiles"]["p50"].as_f64().unwrap() > 0.0 && spend["std"].as_f64().unwrap() > 0.0
    );
    let region = &summary["columns"]["region"];
    assert_eq!(region["top"].as_array().unwrap().len(), 5);
    assert!((region["distinct"].as_f64().unwrap() - 5.0).abs() < 0.5);
    assert_eq!(summary["columns"]["signup_date"]["type"], "date");
    assert!(
        summary["columns"]["signup_date"]["min"]
            .as_str()
            .unwrap()
            .starts_with("2025-03")
    );
    assert!(profile.exists());
    assert!(
        out.stderr.contains("no --previous profile"),
        "{}",
        out.stderr
    );
}

#[test]
fn drift_against_the_previous_profile_fails_unless_explained() {
    let dir = tempfile::tempdir().unwrap();
    let before = demo_snapshot(&dir.path().join("before"), 20_000, &[]);
    let same = demo_snapshot(&dir.path().join("same"), 20_000, &["--seed", "8"]);
    let drifted = demo_snapshot(
        &dir.path().join("drifted"),
        20_000,
        &["--seed", "8", "--drift"],
    );
    let previous = dir.path().join("previous.json");
    assert_eq!(
        validate(&before, &["--profile-out".as_ref(), previous.as_os_str()]).code,
        0
    );

    let out = validate(
        &same,
        &[
            "--previous".as_ref(),
            previous.as_os_str(),
            "--profile-out".as_ref(),
            dir.path().join("p2.json").as_os_str(),
        ],
    );
    assert_eq!(
        out.code,
        0,
        "a new sample of the same process passes: {:?}",
        failed(&out.json()["validate"])
    );
    let section = out.json()["validate"].clone();
    let drift = section["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "numeric_drift" && c["column"] == "monthly_spend")
        .unwrap()
        .clone();
    assert!(
        drift["value"].as_f64().unwrap() >= 0.0 && drift["threshold"].as_f64().is_some(),
        "values are reported even when they pass: {drift}"
    );

    let out = validate(
        &drifted,
        &[
            "--previous".as_ref(),
            previous.as_os_str(),
            "--profile-out".as_ref(),
            dir.path().join("p3.json").as_os_str(),
        ],
    );
    assert_eq!(out.code, 1);
    let failures = failed(&out.json()["validate"]);
    for expected in [
        ("categorical_drift", "region"),
        ("numeric_drift", "monthly_spend"),
        ("label_rate_shift", "churned"),
    ] {
        assert!(
            failures.contains(&(expected.0.to_string(), expected.1.to_string())),
            "{expected:?} not in {failures:?}"
        );
    }
    assert!(
        out.stderr.contains("failed: categorical_drift `region`"),
        "{}",
        out.stderr
    );

    let explained = dir.path().join("explained.json");
    let reasons: Vec<Value> = failures.iter().map(|(check, column)| serde_json::json!({"column": column, "check": check, "reason": "new pricing and a central-region campaign"})).collect();
    std::fs::write(&explained, serde_json::to_string(&reasons).unwrap()).unwrap();
    let out = validate(
        &drifted,
        &[
            "--previous".as_ref(),
            previous.as_os_str(),
            "--explained".as_ref(),
            explained.as_os_str(),
            "--profile-out".as_ref(),
            dir.path().join("p4.json").as_os_str(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let region = out.json()["validate"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "categorical_drift" && c["column"] == "region")
        .unwrap()
        .clone();
    assert_eq!(
        region["explained"],
        "new pricing and a central-region campaign"
    );
}

#[test]
fn unparseable_values_are_counted_with_their_rows() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(&dir.path().join("s"), 5_000, &["--bad-rows", "40"]);
    let out = validate(
        &snapshot,
        &[
            "--profile-out".as_ref(),
            dir.path().join("p.json").as_os_str(),
        ],
    );
    assert_eq!(
        out.code, 1,
        "40 bad values in 5000 rows is above the 0.1% default"
    );
    let section = out.json()["validate"].clone();
    let bad: u64 = section["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"] == "bad_values" && c["passed"] == false)
        .map(|c| {
            let detail = c["detail"].as_str().unwrap();
            assert!(detail.contains(" row "), "{detail}");
            detail.split(' ').next().unwrap().parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(bad, 40);
    assert_eq!(section["profile"]["bad_values"], 40);
}

#[test]
fn nan_labels_fail_the_label_check() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("s");
    std::fs::create_dir(&snapshot).unwrap();
    let mut text = String::from("customer_id,signup_date,label_date,churned\n");
    for i in 0..200 {
        let label = if i == 17 {
            "NaN".to_string()
        } else {
            format!("{}", (i % 5 == 0) as u8)
        };
        text.push_str(&format!(
            "C{i},2026-01-{:02},2026-04-01,{label}\n",
            i % 28 + 1
        ));
    }
    std::fs::write(snapshot.join("a.csv"), text).unwrap();
    let out = validate(
        &snapshot,
        &[
            "--profile-out".as_ref(),
            dir.path().join("p.json").as_os_str(),
        ],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let check = named_check(&out.json()["validate"], "label_invalid").clone();
    assert_eq!(check["passed"], false);
    assert!(
        check["detail"].as_str().unwrap().starts_with("1 labels"),
        "{check}"
    );
}

#[test]
fn profile_merge_and_compare_spread_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(&dir.path().join("s"), 10_000, &[]);
    let mut parts = Vec::new();
    for part in ["part-00000.csv", "part-00001.csv"] {
        let path = dir.path().join(format!("{part}.profile.json"));
        let out = tool("ds-validate")
            .args(["profile", "--label", "churned", "--in"])
            .args([snapshot.join(part)])
            .args(["-o".as_ref(), path.as_os_str()])
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        parts.push(path);
    }
    let merged = tool("ds-validate")
        .args(["merge".as_ref(), parts[0].as_os_str(), parts[1].as_os_str()])
        .run();
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let whole = tool("ds-validate")
        .args(["profile", "--label", "churned", "--in"])
        .args([&snapshot])
        .run();
    let (merged, whole): (Value, Value) = (merged.json(), whole.json());
    assert_eq!(merged["rows"], whole["rows"]);
    let column = |p: &Value, name: &str| {
        p["columns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    let (m, w) = (
        column(&merged, "monthly_spend"),
        column(&whole, "monthly_spend"),
    );
    assert!(
        (m["moments"]["mean"].as_f64().unwrap() - w["moments"]["mean"].as_f64().unwrap()).abs()
            < 1e-9
    );
    assert_eq!(
        column(&merged, "churned")["label"],
        column(&whole, "churned")["label"]
    );
    let merged_path = dir.path().join("merged.json");
    std::fs::write(&merged_path, merged.to_string()).unwrap();
    let compared = tool("ds-validate")
        .args([
            "compare".as_ref(),
            "--previous".as_ref(),
            merged_path.as_os_str(),
            "--current".as_ref(),
            merged_path.as_os_str(),
        ])
        .run();
    assert_eq!(compared.code, 0, "{}", compared.stderr);
    assert_eq!(compared.json()["validate"]["passed"], true);
}

#[test]
fn profiles_shards_like_the_snapshot_they_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(&dir.path().join("s"), 6_000, &[]);
    let shards = dir.path().join("shards");
    let out = tool("shardify")
        .args([
            "--in".as_ref(),
            snapshot.as_os_str(),
            "--out".as_ref(),
            shards.as_os_str(),
        ])
        .stdin(demo_record())
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let from_shards = tool("ds-validate")
        .args([
            "--profile-out".as_ref(),
            dir.path().join("p1.json").as_os_str(),
        ])
        .stdin(out.stdout)
        .run();
    assert_eq!(from_shards.code, 0, "{}", from_shards.stderr);
    let from_snapshot = validate(
        &snapshot,
        &[
            "--profile-out".as_ref(),
            dir.path().join("p2.json").as_os_str(),
        ],
    );
    let (a, b) = (
        from_shards.json()["validate"]["profile"].clone(),
        from_snapshot.json()["validate"]["profile"].clone(),
    );
    assert_eq!(a["rows"], b["rows"]);
    assert_eq!(a["label_rate"], b["label_rate"]);
    assert_eq!(a["columns"]["region"]["top"], b["columns"]["region"]["top"]);
}

#[test]
fn bad_inputs_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(&dir.path().join("s"), 1_000, &[]);
    let record = demo_record().replace("\"label\":\"churned\"", "\"label\":\"left\"");
    tool("ds-validate")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .stdin(record)
        .run()
        .assert_bad_input(
            "ds-validate",
            "manifest.data.label: names the column `left`, which the snapshot does not have",
        );
    let explained = dir.path().join("explained.json");
    std::fs::write(&explained, "{\"column\": 3}").unwrap();
    validate(
        &snapshot,
        &[
            "--explained".as_ref(),
            explained.as_os_str(),
            "--profile-out".as_ref(),
            dir.path().join("p.json").as_os_str(),
        ],
    )
    .assert_bad_input("ds-validate", "explained.json: expected [{\"column\"");
    let not_profile = dir.path().join("np.json");
    std::fs::write(&not_profile, "{}").unwrap();
    tool("ds-validate")
        .args(["merge".as_ref(), not_profile.as_os_str()])
        .run()
        .assert_bad_input("ds-validate", "np.json: not a runfn-profile-v1 profile");
    tool("ds-validate")
        .args(["--in", "no/such/snapshot"])
        .stdin(demo_record())
        .run()
        .assert_bad_input("ds-validate", "no/such/snapshot: ");
    let with_validate = demo_record().replace(
        "\"seed\":7",
        "\"seed\":7,\"validate\":{\"numeric_drfit\":0.1}",
    );
    tool("ds-validate")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .stdin(with_validate)
        .run()
        .assert_bad_input(
            "ds-validate",
            "manifest.validate: unknown field `numeric_drfit`",
        );
}
