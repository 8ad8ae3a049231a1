//! Four days of the retraining loop on a real table (testdata/real/telco), as cron runs it: each
//! day's snapshot is pinned with `mf-hash pin`, then `make run` on the pinned manifest.
//! Day 1 trains and promotes; day 2, a new snapshot from the same distribution (new customers),
//! retrains and is gated against day 1's model; day 3, a drifted snapshot (an upstream unit
//! change: monthly charges in cents), fails validation against what serves, fires the alert and
//! leaves @prod and the registry as they were; day 4, the drift explained, goes through.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::retrain::{alert_script, json, make};
use crate::util::{Output, failed_checks, file_hashes, testdata, tool};

/// Writes `header` and `rows` as a day's snapshot, `transform` applied to each row.
fn snapshot(
    dir: &Path,
    day: &str,
    header: &str,
    rows: &[&str],
    transform: impl Fn(&str) -> String,
) -> PathBuf {
    let folder = dir.join("lake").join(day);
    std::fs::create_dir_all(&folder).unwrap();
    let mut text = format!("{header}\n");
    for line in rows {
        text.push_str(&transform(line));
        text.push('\n');
    }
    std::fs::write(folder.join("customers.csv"), text).unwrap();
    folder
}

/// `mf-hash pin` of the telco manifest onto `lake/<day>`, as `<day>.yaml`.
fn pin(dir: &Path, day: &str) -> PathBuf {
    let out_path = dir.join(format!("{day}.yaml"));
    let pinned = tool("mf-hash")
        .current_dir(dir)
        .args(["pin".as_ref(), dir.join("telco.yaml").as_os_str()])
        .args(["--snapshot", &format!("./lake/{day}")])
        .args(["--out".as_ref(), out_path.as_os_str(), "-q".as_ref()])
        .run();
    assert_eq!(pinned.code, 0, "{}", pinned.stderr);
    out_path
}

fn day(dir: &Path, manifest: &Path, alert: &str, extra: &[String]) -> Output {
    let mut vars = vec![
        format!("MANIFEST={}", manifest.display()),
        format!("RUNFN_ALERT_CMD={alert}"),
    ];
    vars.extend_from_slice(extra);
    make(dir, &["run"], &vars)
}

fn prod_version(dir: &Path) -> u64 {
    let out = tool("register")
        .current_dir(dir)
        .args(["resolve", "churn@prod", "--registry", "registry"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()["version"].as_u64().unwrap()
}

/// The gate's check of `name`.
fn gate_check<'a>(gate: &'a Value, name: &str) -> &'a Value {
    gate["gate"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no gate check {name}: {gate}"))
}

#[test]
fn four_days_of_retraining_on_a_real_table() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let alert = alert_script(d);
    // The user's manifest: the real table's, with its snapshot wherever the day's data lands.
    let template = std::fs::read_to_string(testdata("real/telco/manifest.yaml")).unwrap();
    let start = template.find("snapshot: ").unwrap() + "snapshot: ".len();
    let end = start + template[start..].find('\n').unwrap();
    let manifest = format!("{}./lake/day1{}", &template[..start], &template[end..]);
    std::fs::write(d.join("telco.yaml"), manifest).unwrap();
    let table = std::fs::read_to_string(testdata("real/telco/snapshot/telco.csv")).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let charges = header.iter().position(|c| *c == "monthly_charges").unwrap();

    // Day 1: the first 3,500 customers. Nothing serves yet: no drift checks, no baseline.
    let (day1_rows, day2_rows) = lines[1..].split_at(3_500);
    snapshot(d, "day1", lines[0], day1_rows, str::to_string);
    let first = day(d, &pin(d, "day1"), &alert, &[]);
    assert_eq!(first.code, 0, "day 1: {}", first.stderr);
    assert_eq!(prod_version(d), 1);
    let day1_gate = json(&d.join("run/gate.json"));
    assert_eq!(day1_gate["gate"]["no_baseline"], true);
    assert!(!d.join("alert.stdin").exists(), "no alert on a passing day");

    // Day 2: the other 3,543 customers, the same distribution (their ids are higher: the
    // entity is not drift-checked). Drift is checked against day 1's profile and passes; the
    // candidate is gated against day 1's model on day 2's frozen test rows.
    snapshot(d, "day2", lines[0], day2_rows, str::to_string);
    let second = day(d, &pin(d, "day2"), &alert, &[]);
    assert_eq!(second.code, 0, "day 2: {}", second.stderr);
    let day2_validate = json(&d.join("run/validate.json"))["validate"].clone();
    assert_eq!(
        day2_validate["previous_model"]["version"], 1,
        "{day2_validate}"
    );
    assert_eq!(day2_validate["passed"], true);
    let day2_gate = json(&d.join("run/gate.json"));
    let day2_floor = json(&d.join("run/noise.json"))["noise_floor"]["floor"].clone();
    assert_eq!(day2_gate["gate"]["passed"], true, "{day2_gate}");
    assert_eq!(day2_gate["gate"]["no_baseline"], false);
    assert_eq!(gate_check(&day2_gate, "same_test_rows")["passed"], true);
    assert_eq!(prod_version(d), 2);

    // Day 3: day 2's customers again, but monthly charges arrive in cents. Validation against @prod fails; the alert gets the
    // record; the registry's files and @prod are exactly as they were.
    let in_cents = |line: &str| {
        let mut fields: Vec<String> = line.split(',').map(str::to_string).collect();
        let value: f64 = fields[charges].parse().unwrap();
        fields[charges] = format!("{:.1}", value * 100.0);
        fields.join(",")
    };
    snapshot(d, "day3", lines[0], day2_rows, in_cents);
    let registry = file_hashes(&d.join("registry"));
    let third = day(d, &pin(d, "day3"), &alert, &[]);
    assert_ne!(third.code, 0, "day 3 must fail: {}", third.stderr);
    let alerted: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join("alert.stdin")).unwrap()).unwrap();
    let drifted = failed_checks(&alerted["validate"]);
    assert!(
        !drifted.is_empty() && drifted.iter().all(|c| c["column"] == "monthly_charges"),
        "only the unit change drifts: {drifted:?}"
    );
    let env = std::fs::read_to_string(d.join("alert.env")).unwrap();
    assert!(env.contains("RUNFN_ALERT_STAGE=validate\n"), "{env}");
    assert_eq!(
        file_hashes(&d.join("registry")),
        registry,
        "registry untouched"
    );
    assert_eq!(prod_version(d), 2);

    // Day 4: a person explains the drift (the new unit); the same snapshot goes through.
    let explained = d.join("explained.json");
    let reasons: Vec<Value> = drifted
        .iter()
        .map(|c| serde_json::json!({"column": c["column"], "check": c["name"], "reason": "billing now sends cents", "max_value": c["value"].as_f64().unwrap_or(0.0), "until": "2099-12-31"}))
        .collect();
    std::fs::write(&explained, Value::Array(reasons).to_string()).unwrap();
    std::fs::remove_file(d.join("alert.stdin")).unwrap();
    let fourth = day(
        d,
        &d.join("day3.yaml"),
        &alert,
        &[format!("EXPLAINED={}", explained.display())],
    );
    assert_eq!(fourth.code, 0, "day 4: {}", fourth.stderr);
    assert!(!d.join("alert.stdin").exists());
    assert_eq!(prod_version(d), 3);
    let day4_validate = json(&d.join("run/validate.json"))["validate"].clone();
    let day4_gate = json(&d.join("run/gate.json"));

    // The four days side by side (`cargo test daily -- --nocapture` shows them).
    let drift = |validate: &Value| {
        let check = validate["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "numeric_drift" && c["column"] == "monthly_charges")
            .cloned()
            .unwrap_or(Value::Null);
        format!(
            "monthly_charges drift {} ({})",
            check["value"], check["passed"]
        )
    };
    let gate = |record: &Value| {
        let overall = gate_check(record, "auc_min_delta");
        format!(
            "gate {} (auc delta {})",
            record["gate"]["passed"], overall["delta"]
        )
    };
    eprintln!("day 1: first run, no drift check; gate: no baseline; prod v1");
    eprintln!(
        "day 2: {}; {}, seeds' noise floor {day2_floor}; prod v2",
        drift(&day2_validate),
        gate(&day2_gate)
    );
    eprintln!(
        "day 3: {}; stopped at validate, alert called ({}), prod v2",
        drift(&alerted["validate"]),
        env.lines()
            .find(|l| l.starts_with("RUNFN_ALERT_SUMMARY"))
            .unwrap_or("")
    );
    eprintln!(
        "day 4: {} explained; {}; prod v3",
        drift(&day4_validate),
        gate(&day4_gate)
    );
}
