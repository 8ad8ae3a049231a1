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
    let reasons: Vec<Value> = failures.iter().map(|(check, column)| serde_json::json!({"column": column, "check": check, "reason": "new pricing and a central-region campaign", "max_value": 10.0, "until": "2099-12-31"})).collect();
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
    assert_eq!(region["explained_until"], "2099-12-31");
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

/// Runs `ds-validate profile` on `input` with `churned` as the label, into `out`.
fn profile(input: &Path, out: &Path) {
    let result = tool("ds-validate")
        .args(["profile", "--label", "churned", "--in"])
        .args([input])
        .args(["-o".as_ref(), out.as_os_str()])
        .run();
    assert_eq!(result.code, 0, "{}", result.stderr);
}

/// The summary people read of a stored full profile, as `compare` reports it.
fn summary_of(profile: &Path) -> Value {
    let out = tool("ds-validate")
        .args([
            "compare".as_ref(),
            "--current".as_ref(),
            profile.as_os_str(),
        ])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()["validate"]["profile"].clone()
}

/// The share of `sorted` at or below `value`.
fn rank(sorted: &[f64], value: f64) -> f64 {
    sorted.partition_point(|v| *v <= value) as f64 / sorted.len() as f64
}

#[test]
fn profile_merge_and_compare_spread_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(&dir.path().join("s"), 10_000, &[]);
    let names = ["part-00000.csv", "part-00001.csv"];
    let mut parts = Vec::new();
    for part in names {
        let path = dir.path().join(format!("{part}.profile.json"));
        profile(&snapshot.join(part), &path);
        parts.push(path);
    }
    let merged = tool("ds-validate")
        .args(["merge".as_ref(), parts[0].as_os_str(), parts[1].as_os_str()])
        .run();
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    // The same rows as one file, profiled in one pass: no merge anywhere on this side.
    let texts: Vec<String> = names
        .iter()
        .map(|n| std::fs::read_to_string(snapshot.join(n)).unwrap())
        .collect();
    let header = texts[0].lines().next().unwrap().to_string();
    let rows: Vec<&str> = texts.iter().flat_map(|t| t.lines().skip(1)).collect();
    std::fs::create_dir(dir.path().join("one")).unwrap();
    let one_file = dir.path().join("one").join("all.csv");
    std::fs::write(&one_file, format!("{header}\n{}\n", rows.join("\n"))).unwrap();
    let whole_path = dir.path().join("whole.json");
    profile(&one_file, &whole_path);
    let whole: Value =
        serde_json::from_str(&std::fs::read_to_string(&whole_path).unwrap()).unwrap();
    let merged_path = dir.path().join("merged.json");
    std::fs::write(&merged_path, &merged.stdout).unwrap();
    let merged = merged.json();
    assert_eq!(merged["rows"], whole["rows"]);
    assert_eq!(merged["rows"], 10_000);

    // The truth, from the CSV text: monthly_spend and region come before the one quoted column.
    let columns: Vec<&str> = header.split(',').collect();
    let at = |name: &str| columns.iter().position(|c| *c == name).unwrap();
    assert!(at("region") < at("support_note") && at("monthly_spend") < at("support_note"));
    let field = |row: &str, name: &str| row.split(',').nth(at(name)).unwrap().to_string();
    let mut spend: Vec<f64> = rows
        .iter()
        .map(|r| field(r, "monthly_spend"))
        .filter(|v| !v.is_empty())
        .map(|v| v.parse().unwrap())
        .collect();
    spend.sort_by(f64::total_cmp);
    let n = spend.len() as f64;
    let mean = spend.iter().sum::<f64>() / n;
    let std = (spend.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let mut distinct = spend.clone();
    distinct.dedup();
    let mut regions = std::collections::BTreeMap::<String, u64>::new();
    for row in &rows {
        *regions.entry(field(row, "region")).or_default() += 1;
    }

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
    assert_eq!(m["moments"]["n"], spend.len());
    assert!((m["moments"]["mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    assert!(
        (m["moments"]["mean"].as_f64().unwrap() - w["moments"]["mean"].as_f64().unwrap()).abs()
            < 1e-9
    );
    assert_eq!(
        m["distinct"], w["distinct"],
        "HyperLogLog registers merge losslessly"
    );
    assert_eq!(
        column(&merged, "region")["frequencies"],
        column(&whole, "region")["frequencies"]
    );
    assert_eq!(
        column(&merged, "churned")["label"],
        column(&whole, "churned")["label"]
    );

    for (side, path) in [("merged", &merged_path), ("one pass", &whole_path)] {
        let summary = summary_of(path);
        let spend_summary = &summary["columns"]["monthly_spend"];
        let got = spend_summary["std"].as_f64().unwrap();
        assert!(
            (got - std).abs() < 1e-9 * std,
            "{side}: std {got}, exactly {std}"
        );
        // The t-digest's documented bound: under 1% rank error at every reported quantile.
        for (name, q) in [
            ("p01", 0.01),
            ("p05", 0.05),
            ("p25", 0.25),
            ("p50", 0.5),
            ("p75", 0.75),
            ("p95", 0.95),
            ("p99", 0.99),
        ] {
            let estimate = spend_summary["quantiles"][name].as_f64().unwrap();
            let error = (rank(&spend, estimate) - q).abs();
            assert!(
                error < 0.01,
                "{side}: {name} {estimate} is off by {error} in rank"
            );
        }
        // HyperLogLog at 2^12 registers: about 1.6% standard error; allow three of them.
        let estimate = spend_summary["distinct"].as_f64().unwrap();
        let exact = distinct.len() as f64;
        assert!(
            (estimate - exact).abs() < 0.05 * exact,
            "{side}: {estimate} distinct, exactly {exact}"
        );
        let top: std::collections::BTreeMap<String, u64> = summary["columns"]["region"]["top"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                (
                    t["value"].as_str().unwrap().to_string(),
                    t["count"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(top, regions, "{side}");
        assert_eq!(
            summary["columns"]["region"]["distinct"],
            regions.len() as f64,
            "{side}"
        );
    }

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

/// A made-up snapshot of 2000 rows whose every value is a fixed function of the row number; the
/// drifted one moves `spend` up by 60, puts 2.5% of rows in a new `plan` and blanks a quarter of
/// `score` (keeping its shape), and is later in time. `region` and the label do not move.
fn snapshot_csv(drifted: bool) -> String {
    let mut text = String::from("spend,plan,score,region,joined,churned\n");
    for i in 0..2000 {
        let spend = 20.0 + (i * 37 % 100) as f64 + if drifted { 60.0 } else { 0.0 };
        let plan = if drifted && i % 40 == 0 {
            "enterprise"
        } else {
            ["basic", "pro"][i % 2]
        };
        let score = if drifted && i % 4 == 0 {
            String::new()
        } else {
            ((i / 4) * 7 % 30).to_string()
        };
        let region = ["north", "south", "east", "west"][i * 3 % 4];
        let month = if drifted { 9 } else { 3 };
        let churned = (i % 5 == 0) as u8;
        text.push_str(&format!(
            "{spend},{plan},{score},{region},2026-{month:02}-{:02},{churned}\n",
            i % 28 + 1
        ));
    }
    text
}

#[test]
fn compare_names_exactly_the_drifted_columns_and_their_checks() {
    let dir = tempfile::tempdir().unwrap();
    let mut profiles = Vec::new();
    for (name, drifted) in [("before", false), ("after", true)] {
        let csv = dir.path().join(format!("{name}.csv"));
        std::fs::write(&csv, snapshot_csv(drifted)).unwrap();
        let path = dir.path().join(format!("{name}.profile.json"));
        profile(&csv, &path);
        profiles.push(path);
    }
    let compare = |explained: Option<&Path>| {
        tool("ds-validate")
            .args([
                "compare".as_ref(),
                "--previous".as_ref(),
                profiles[0].as_os_str(),
            ])
            .args(["--current".as_ref(), profiles[1].as_os_str()])
            .args(
                explained
                    .map(|p| ["--explained".as_ref(), p.as_os_str()])
                    .into_iter()
                    .flatten(),
            )
            .run()
    };
    let out = compare(None);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let record = out.json();
    let section = &record["validate"];
    assert_eq!(section["passed"], false);
    assert_eq!(section["previous"], profiles[0].display().to_string());
    assert_eq!(section["profile_file"], profiles[1].display().to_string());
    assert_eq!(section["profile"]["rows"], 2000);
    let checks: Vec<(String, String, bool)> = section["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["column"].as_str().unwrap_or("").to_string(),
                c["passed"].as_bool().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("label_missing", "churned", true),
        ("label_invalid", "churned", true),
        ("bad_values", "spend", true),
        ("bad_values", "plan", true),
        ("bad_values", "score", true),
        ("bad_values", "region", true),
        ("bad_values", "joined", true),
        ("bad_values", "churned", true),
        ("row_count_change", "", true),
        ("label_rate_shift", "churned", true),
        // Dates are only null-checked: later dates are no drift.
        ("null_rate_rise", "joined", true),
        ("null_rate_rise", "plan", true),
        ("new_categories", "plan", false),
        ("categorical_drift", "plan", true),
        ("null_rate_rise", "region", true),
        ("new_categories", "region", true),
        ("categorical_drift", "region", true),
        ("null_rate_rise", "score", false),
        ("out_of_range", "score", true),
        ("numeric_drift", "score", true),
        ("null_rate_rise", "spend", true),
        ("out_of_range", "spend", false),
        ("numeric_drift", "spend", false),
    ];
    let expected: Vec<(String, String, bool)> = expected
        .iter()
        .map(|(n, c, p)| (n.to_string(), c.to_string(), *p))
        .collect();
    assert_eq!(checks, expected);
    for check in section["checks"].as_array().unwrap() {
        let value = check["value"].as_f64().unwrap();
        // A check fails above both its threshold and its sampling noise; growth has no limit
        // unless the manifest sets one.
        let limit = match (check["threshold"].as_f64(), check["noise"].as_f64()) {
            (Some(threshold), noise) => threshold.max(noise.unwrap_or(0.0)),
            (None, _) => f64::INFINITY,
        };
        assert_eq!(check["passed"], value <= limit, "{check}");
        // With no manifest every column but the label is a feature, except a date.
        assert_eq!(check["fails_run"], check["column"] != "joined", "{check}");
    }
    let value = |name: &str, column: &str| {
        section["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name && c["column"] == column)
            .unwrap()["value"]
            .as_f64()
            .unwrap()
    };
    assert!((value("null_rate_rise", "score") - 0.25).abs() < 1e-12);
    assert!((value("new_categories", "plan") - 0.025).abs() < 1e-12);
    assert!(
        (value("out_of_range", "spend") - 0.6).abs() < 0.05,
        "{}",
        value("out_of_range", "spend")
    );
    for line in [
        "failed: new_categories `plan`",
        "failed: null_rate_rise `score`",
        "failed: out_of_range `spend`",
        "failed: numeric_drift `spend`",
    ] {
        assert!(out.stderr.contains(line), "{line} not in {}", out.stderr);
    }
    assert_eq!(out.stderr.matches("failed: ").count(), 4, "{}", out.stderr);

    let explained = dir.path().join("explained.json");
    let reasons: Vec<Value> = failed(section)
        .iter()
        .map(|(check, column)| serde_json::json!({"column": column, "check": check, "reason": "new price list", "max_value": 10.0, "until": "2099-12-31"}))
        .collect();
    assert_eq!(reasons.len(), 4);
    std::fs::write(&explained, serde_json::to_string(&reasons).unwrap()).unwrap();
    let out = compare(Some(&explained));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["validate"]["passed"], true);
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
    let record =
        crate::util::rehashed(demo_record().replace("\"label\":\"churned\"", "\"label\":\"left\""));
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
    let with_validate = crate::util::rehashed(demo_record().replace(
        "\"seed\":7",
        "\"seed\":7,\"validate\":{\"numeric_drfit\":0.1}",
    ));
    tool("ds-validate")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .stdin(with_validate)
        .run()
        .assert_bad_input(
            "ds-validate",
            "manifest.validate.numeric_drfit: unknown setting (did you mean `numeric_drift`?)",
        );
}

/// Hourly readings of `days` days from 2013-01-01: a temperature that follows the seasons and
/// a wind that does not; from day `celsius_from` on, the temperature is in Celsius.
pub(crate) fn seasonal_csv(days: usize, celsius_from: Option<usize>) -> String {
    let mut text = String::from("time,temp,wind,station\n");
    let mut state = 11u64;
    let mut noise = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let lengths = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    for day in 0..days {
        let (mut month, mut left) = (0, day);
        while left >= lengths[month] {
            left -= lengths[month];
            month += 1;
        }
        for hour in 0..24 {
            let season = (2.0 * std::f64::consts::PI * day as f64 / 365.0).sin();
            let mut temp = 50.0 + 25.0 * season + 10.0 * noise();
            if celsius_from.is_some_and(|from| day >= from) {
                temp = (temp - 32.0) * 5.0 / 9.0;
            }
            let wind = 10.0 + 8.0 * noise();
            let station = ["EWR", "JFK", "LGA"][hour % 3];
            text.push_str(&format!(
                "2013-{:02}-{:02}T{hour:02}:00:00Z,{temp:.1},{wind:.1},{station}\n",
                month + 1,
                left + 1
            ));
        }
    }
    text
}

fn column_check<'a>(section: &'a Value, name: &str, column: &str) -> &'a Value {
    section["checks"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["name"] == name && c["column"] == column)
        })
        .unwrap_or_else(|| panic!("no check {name} on {column} in {section}"))
}

/// A drift-only manifest (data and validate) over `csv`, pinned; its record from mf-hash.
fn drift_only_record(dir: &Path, csv: &str, validate: Value) -> Vec<u8> {
    let snapshot = dir.join("snap");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::write(snapshot.join("rows.csv"), csv).unwrap();
    let manifest = dir.join("drift.json");
    let text = serde_json::json!({
        "data": {"snapshot": snapshot.display().to_string(), "time": "time"},
        "validate": validate,
    });
    std::fs::write(&manifest, text.to_string()).unwrap();
    let lint = tool("mf-hash")
        .args([
            manifest.as_os_str(),
            "--drift-only".as_ref(),
            "--lint".as_ref(),
        ])
        .run();
    assert_eq!(lint.code, 0, "{}", lint.stderr);
    let pin = tool("mf-hash")
        .args(["pin".as_ref(), manifest.as_os_str(), "-q".as_ref()])
        .run();
    assert_eq!(pin.code, 0, "{}", pin.stderr);
    // A drift-only manifest is no training manifest: without --drift-only it is refused.
    let full = tool("mf-hash").args([manifest.as_os_str()]).run();
    assert_eq!(full.code, 2, "{}", full.stderr);
    let record = tool("mf-hash")
        .args([manifest.as_os_str(), "--drift-only".as_ref(), "-q".as_ref()])
        .run();
    assert_eq!(record.code, 0, "{}", record.stderr);
    record.stdout.into_bytes()
}

fn validate_record(dir: &Path, record: Vec<u8>, extra: &[&std::ffi::OsStr]) -> crate::util::Output {
    tool("ds-validate")
        .args([
            "--profile-out".as_ref(),
            dir.join("profile.json").as_os_str(),
        ])
        .args(extra)
        .stdin(record)
        .run()
}

/// A season moving as it always has passes night after night with one unchanged manifest; a
/// unit change fails the night it appears, though an explanation of seasonal drift is in force.
#[test]
fn drift_windows_pass_a_season_and_fail_a_unit_change() {
    let dir = tempfile::tempdir().unwrap();
    let validate = serde_json::json!({"window": "2 weeks", "fail_on": "all"});
    let spring = dir.path().join("spring");
    let record = drift_only_record(&spring, &seasonal_csv(150, None), validate.clone());
    let out = validate_record(&spring, record, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let section = &out.json()["validate"];
    let calibration = &section["calibration"];
    assert_eq!(calibration["method"], "history", "{calibration}");
    assert_eq!(calibration["window"], "2 weeks");
    assert_eq!(calibration["current"]["rows"], 14 * 24);
    assert_eq!(calibration["current"]["end"], "2013-05-30T23:00:00Z");
    let temp = column_check(section, "numeric_drift", "temp");
    assert!(temp["value"].as_f64() > temp["noise"].as_f64(), "{temp}");
    assert!(
        temp["history"]["p_holm"].as_f64().unwrap() > 0.001,
        "{temp}"
    );
    assert!(
        out.stderr.contains("judged against 8 earlier window pairs"),
        "{}",
        out.stderr
    );
    // The profile keeps its full windows, for predict (not the partial one it begins with).
    let profile: Value =
        serde_json::from_slice(&std::fs::read(spring.join("profile.json")).unwrap()).unwrap();
    assert_eq!(profile["windows"].as_array().unwrap().len(), 10);

    let explained = dir.path().join("explained.json");
    std::fs::write(
        &explained,
        serde_json::json!([{"column": "temp", "check": "numeric_drift", "reason": "spring",
                            "max_value": 1.0, "until": "2099-12-31"}])
        .to_string(),
    )
    .unwrap();
    let changed = dir.path().join("changed");
    let record = drift_only_record(&changed, &seasonal_csv(150, Some(136)), validate);
    let out = validate_record(
        &changed,
        record,
        &["--explained".as_ref(), explained.as_os_str()],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let section = &out.json()["validate"];
    let temp = column_check(section, "numeric_drift", "temp");
    assert_eq!(temp["passed"], false, "{temp}");
    assert!(temp.get("explained").is_none(), "{temp}");
    assert!(
        out.stderr.contains("failed: numeric_drift `temp`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("\"spring\" covers up to 1"),
        "{}",
        out.stderr
    );
}

/// Too short a history to chart says so and judges by sampling noise; a window the data cannot
/// fill twice, or without a time column, is bad input naming the setting.
#[test]
fn drift_windows_say_when_history_is_short_and_refuse_what_cannot_be_cut() {
    let dir = tempfile::tempdir().unwrap();
    let short = dir.path().join("short");
    let record = drift_only_record(
        &short,
        &seasonal_csv(84, None),
        serde_json::json!({"window": "2 weeks"}),
    );
    let out = validate_record(&short, record, &[]);
    let calibration = &out.json()["validate"]["calibration"];
    assert_eq!(calibration["method"], "sampling", "{calibration}");
    assert!(
        calibration["note"]
            .as_str()
            .unwrap()
            .contains("3 earlier window pairs"),
        "{calibration}"
    );
    let year = dir.path().join("year");
    let record = drift_only_record(
        &year,
        &seasonal_csv(20, None),
        serde_json::json!({"window": "1 year"}),
    );
    let out = validate_record(&year, record, &[]);
    out.assert_bad_input("ds-validate", "manifest.validate.window");
    assert!(out.stderr.contains("full window"), "{}", out.stderr);
}

/// compare takes a manifest's thresholds, fail_on and roles; a bad setting is exit 2 naming it.
#[test]
fn compare_takes_thresholds_from_a_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let mut profiles = Vec::new();
    for (name, drifted) in [("before", false), ("after", true)] {
        let csv = dir.path().join(format!("{name}.csv"));
        std::fs::write(&csv, snapshot_csv(drifted)).unwrap();
        let path = dir.path().join(format!("{name}.profile.json"));
        profile(&csv, &path);
        profiles.push(path);
    }
    let compare = |manifest: &str| {
        let path = dir.path().join("m.yaml");
        std::fs::write(&path, manifest).unwrap();
        tool("ds-validate")
            .args([
                "compare".as_ref(),
                "--previous".as_ref(),
                profiles[0].as_os_str(),
            ])
            .args(["--current".as_ref(), profiles[1].as_os_str()])
            .args(["--manifest".as_ref(), path.as_os_str()])
            .run()
    };
    let strict = compare("data:\n  label: churned\n");
    assert_eq!(strict.code, 1, "{}", strict.stderr);
    let lenient = compare(
        "data:\n  label: churned\nvalidate:\n  null_rate_rise: 0.5\n  out_of_range: 0.9\n  \
         numeric_drift: 9\n  new_categories: 0.5\n",
    );
    assert_eq!(lenient.code, 0, "{}", lenient.stderr);
    // Only the listed features fail the run: the drifted columns are reported, not failed.
    let features = compare(
        "data:\n  label: churned\nconfig:\n  features:\n    numeric: []\n    categorical: [region]\n",
    );
    assert_eq!(features.code, 0, "{}", features.stderr);
    assert!(
        features
            .stderr
            .contains("reported, not failed: numeric_drift `spend`"),
        "{}",
        features.stderr
    );
    compare("validate:\n  numeric_drfit: 0.2\n")
        .assert_bad_input("ds-validate", "manifest.validate.numeric_drfit");
}

/// `--memory` bounds what ds-validate holds: its batches were 64Ki rows whatever the rows' width,
/// and 300 rows of 1 MiB values took 320 MiB (64 GiB at 64Ki rows). The timings entry says the
/// budget, and the profile is the same at any budget.
#[test]
fn the_memory_budget_bounds_the_batches_on_rows_of_a_mebibyte() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = crate::util::mebibyte_values(dir.path(), 300);
    let run = |memory: &str| {
        let out = tool("ds-validate")
            .args(["--in".as_ref(), snapshot.as_os_str()])
            .args(["--memory", memory, "-q"])
            .stdin(demo_record())
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.json()
    };
    let small = run("96M");
    let entry = small["timings"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(entry["memory_budget_bytes"], 96 << 20);
    let peak = entry["max_rss_bytes"].as_u64().unwrap();
    assert!(
        peak <= 96 << 20,
        "peak RSS {} MiB at --memory 96M",
        peak >> 20
    );
    assert_eq!(
        small["validate"]["profile"],
        run("2G")["validate"]["profile"]
    );
}

/// A snapshot of many small files: each file is a piece with a profile of its own, and the
/// pieces are merged a window at a time as they are profiled, so what is held follows the
/// cores, not the file count (before, 1,500 files of 50 rows took 260 MiB of piece profiles).
#[test]
fn many_small_files_are_profiled_in_memory_that_does_not_follow_the_file_count() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("snapshot");
    std::fs::create_dir(&snapshot).unwrap();
    let mut state = 7u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let numbers: Vec<String> = (0..12).map(|i| format!("n{i}")).collect();
    let texts: Vec<String> = (0..6).map(|i| format!("t{i}")).collect();
    let header = [numbers.clone(), texts.clone()].concat().join(",");
    for file in 0..1500 {
        let mut csv = format!("{header}\n");
        for _ in 0..50 {
            let mut row: Vec<String> = (0..12)
                .map(|_| format!("{:.4}", next() as f64 / 1e9))
                .collect();
            row.extend((0..6).map(|_| format!("v{}", next() % 5000)));
            csv.push_str(&row.join(","));
            csv.push('\n');
        }
        std::fs::write(snapshot.join(format!("part-{file:05}.csv")), csv).unwrap();
    }
    let manifest = dir.path().join("drift.json");
    let text = serde_json::json!({"data": {"snapshot": snapshot.display().to_string()}});
    std::fs::write(&manifest, text.to_string()).unwrap();
    let pin = tool("mf-hash")
        .args(["pin".as_ref(), manifest.as_os_str(), "-q".as_ref()])
        .run();
    assert_eq!(pin.code, 0, "{}", pin.stderr);
    let record = tool("mf-hash")
        .args([manifest.as_os_str(), "--drift-only".as_ref(), "-q".as_ref()])
        .run();
    assert_eq!(record.code, 0, "{}", record.stderr);
    let out = tool("ds-validate").args(["-q"]).stdin(record.stdout).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let record = out.json();
    let entry = record["timings"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(entry["tool"], "ds-validate");
    let peak = entry["max_rss_bytes"].as_u64().unwrap();
    assert!(
        peak < 120 << 20,
        "peak RSS {} MiB on 1,500 files",
        peak >> 20
    );
    assert_eq!(
        record["validate"]["profile"]["rows"], 75_000,
        "{}",
        record["validate"]
    );
}
