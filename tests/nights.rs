//! Nights of the retraining loop on a real table (testdata/real/stops, police stops in 2017), as
//! cron runs it: one manifest the user never edits (rolling splits, a YES/NO label, an
//! integer-coded category), each night a longer snapshot pinned into tonight's copy of it, then
//! `make run` from the user's folder with the clone elsewhere (`make -C`).
//! - nights 1-2: honest nights on more data of the same kind: the windows move, train grows, the
//!   gate promotes;
//! - night 3: a column the model does not use drifts (the row index jumps): reported, not failed;
//! - night 4: a feature drifts (every stop half a degree north): validate fails, the alert names
//!   the column, @prod does not move, and the night's page says so;
//! - the history page shows the four nights and their decisions.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::retrain::{alert_script, json};
use crate::util::{Output, file_hashes, testdata, tool};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The user's manifest, never edited between nights.
const MANIFEST: &str = r#"# Police stops: was the person searched? Retrained nightly on a snapshot that grows.
run_id: stops-search
data:
  snapshot: ./lake/tonight
  entity: idNum
  time: date
  label: personSearch
  label_positive: "YES"
  categorical: [policePrecinct]
  splits: {test: "last 1 month", val: "1 month before test", train: "before val"}
code:
  commit: 9c41be0
  image: registry.example.com/train@sha256:4d2f6a0b8c1e3f5a7b9d0c2e4f6a8b0c1d3e5f7a9b0c2d4e6f8a0b1c3d5e7f9a
config:
  model: mlp
  hidden: [16]
  lr: 0.003
  max_steps: 300
  global_batch: 256
  eval_every: 50
  features:
    numeric: [lat, long]
    categorical: [problem, preRace, race, gender, policePrecinct, neighborhood]
seed: 5
eval:
  slices: [policePrecinct]
  gates: {auc_min_delta: -0.03, max_slice_drop: 0.08, min_slice_rows: 200}
"#;

/// Tonight's snapshot: the stops before `until` (ISO dates compare as text), each row passed
/// through `change`.
fn snapshot(dir: &Path, night: usize, until: &str, change: &dyn Fn(&[&str], &mut Vec<String>)) {
    let table = std::fs::read_to_string(testdata("real/stops/snapshot/stops.csv")).unwrap();
    let mut lines = table.lines();
    let header_line = lines.next().unwrap();
    let header: Vec<&str> = header_line.split(',').collect();
    let date = header.iter().position(|c| *c == "date").unwrap();
    let mut text = format!("{header_line}\n");
    for line in lines {
        let mut fields: Vec<String> = line.split(',').map(str::to_string).collect();
        if fields[date].as_str() >= until {
            continue;
        }
        change(&header, &mut fields);
        text.push_str(&fields.join(","));
        text.push('\n');
    }
    let folder = dir.join("lake").join(format!("night{night}"));
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("stops.csv"), text).unwrap();
}

/// One night as cron runs it from the user's folder: pin tonight's folder into tonight's copy of
/// the manifest, then `make -C <clone> run` with paths relative to the user's folder.
fn night(dir: &Path, night: usize, alert: &str) -> Output {
    let pinned = tool("mf-hash")
        .current_dir(dir)
        .args([
            "pin",
            "stops.yaml",
            "--snapshot",
            &format!("./lake/night{night}"),
        ])
        .args(["--out", "runs/stops/tonight.yaml", "-q"])
        .run();
    assert_eq!(pinned.code, 0, "{}", pinned.stderr);
    let out = Command::new("make")
        // The tests run the dev build they have just made, never a release build.
        .env("BUILD_PROFILE", "dev")
        .current_dir(dir)
        // What a shell sets on `cd`: where the caller is, which make -C does not change.
        .env("PWD", dir)
        .env("RUNFN_ALERT_CMD", alert)
        .args(["--no-print-directory", "-C", ROOT, "run"])
        .args([
            "MANIFEST=runs/stops/tonight.yaml",
            "RUN_DIR=runs/stops",
            "MODEL=stops",
            "SEEDS=11 12",
            "REGISTRY=registry",
            // The binaries are built already.
            "CARGO=true",
        ])
        .output()
        .expect("make runs");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn prod_version(dir: &Path) -> Option<u64> {
    let out = tool("register")
        .current_dir(dir)
        .args(["resolve", "stops@prod", "--registry", "registry"])
        .run();
    (out.code == 0).then(|| out.json()["version"].as_u64().unwrap())
}

/// The checks of `section` that failed and fail the run, as `name column` strings.
fn failed(section: &Value) -> Vec<String> {
    section["checks"]
        .as_array()
        .map(|checks| {
            checks
                .iter()
                .filter(|c| c["passed"] == false && c["fails_run"] != false)
                .map(|c| {
                    format!(
                        "{} {}",
                        c["name"].as_str().unwrap_or(""),
                        c["column"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

struct Night {
    rows: String,
    flagged: Vec<String>,
    train_rows: u64,
    test_after: String,
    decision: String,
    prod: Option<u64>,
}

#[test]
fn four_nights_on_a_real_table_with_one_unchanged_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("stops.yaml"), MANIFEST).unwrap();
    let alert = alert_script(d);
    let unchanged = |_: &[&str], _: &mut Vec<String>| {};
    let column = |header: &[&str], name: &str| header.iter().position(|c| *c == name).unwrap();
    let run = d.join("runs/stops");
    let mut table: Vec<Night> = Vec::new();
    let mut record_night = |decision: &str| {
        let shards = json(&newest_night(&run).join("shards.json"));
        let night = newest_night(&run);
        let report = json(&night.join("report.json"))["report"].clone();
        let flagged: Vec<String> = report["predictions"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter(|p| p["flagged"] == true)
                    .map(|p| {
                        format!(
                            "{} {}: {} vs {}",
                            p["of"], p["name"], p["predicted"], p["measured"]
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let splits = &shards["shards"]["splits"];
        table.push(Night {
            rows: format!(
                "train {} / val {} / test {}",
                splits["train"]["rows"], splits["val"]["rows"], splits["test"]["rows"]
            ),
            flagged,
            train_rows: shards["shards"]["splits"]["train"]["rows"]
                .as_u64()
                .unwrap(),
            test_after: shards["shards"]["splits_resolved"]["test"]["after"]
                .as_str()
                .unwrap()
                .to_string(),
            decision: decision.to_string(),
            prod: prod_version(d),
        });
    };

    // Nights 1 and 2: the stops through August, then through September.
    for (n, until) in [(1, "2017-09-01"), (2, "2017-10-01")] {
        snapshot(d, n, until, &unchanged);
        let out = night(d, n, &alert);
        assert_eq!(out.code, 0, "night {n}: {}", out.stderr);
        assert!(!d.join("alert.stdin").exists(), "no alert on night {n}");
        assert_eq!(prod_version(d), Some(n as u64), "night {n} promotes");
        let shards = json(&run.join("shards.json"))["shards"].clone();
        assert_eq!(shards["unassigned_rows"], 0);
        assert!(
            out.stderr
                .contains("shardify: test: `last 1 month` is date > "),
            "the stages' messages reach the log: {}",
            out.stderr
        );
        record_night("promoted");
    }
    // Night 2 planned its checkpoints from what night 1 measured.
    let plan = json(&run.join("ckpt.json"))["ckpt_interval"]["inputs"].clone();
    assert!(
        plan["cost_source"]
            .as_str()
            .unwrap()
            .starts_with("measured: runs/stops/nights/"),
        "{plan}"
    );
    // Cron's other way in: scripts/retrain.sh from the user's folder. Nothing changed since
    // night 2, so nothing reruns; the log lands under RUN_DIR, in the user's folder.
    let retrain = Command::new(format!("{ROOT}/scripts/retrain.sh"))
        .env("BUILD_PROFILE", "dev")
        .current_dir(d)
        .env("PWD", d)
        .args([
            "MANIFEST=runs/stops/tonight.yaml",
            "RUN_DIR=runs/stops",
            "MODEL=stops",
            "SEEDS=11 12",
            "REGISTRY=registry",
            "CARGO=true",
        ])
        .output()
        .unwrap();
    assert_eq!(
        retrain.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&retrain.stderr)
    );
    let log = std::fs::read_to_string(run.join("retrain.log")).unwrap();
    assert!(log.contains("exit 0"), "{log}");
    assert_eq!(
        sorted_nights(&run).len(),
        2,
        "an unchanged rerun keeps no second night"
    );
    for landed in [
        "runs/stops/nights",
        "runs/stops/retrain.log",
        "registry/stops",
    ] {
        assert!(
            !Path::new(ROOT).join(landed).exists(),
            "nothing of the run lands in the clone: {landed}"
        );
    }
    assert!(d.join("registry").exists() && run.join("report.html").exists());

    // Night 3: the row index jumps (a new export numbers rows from a million): not a feature,
    // so its drift is reported and the night goes on.
    snapshot(d, 3, "2017-11-01", &|header, fields| {
        let i = column(header, "rownames");
        fields[i] = (fields[i].parse::<u64>().unwrap() + 1_000_000).to_string();
    });
    let third = night(d, 3, &alert);
    assert_eq!(third.code, 0, "night 3: {}", third.stderr);
    let validate = json(&run.join("validate.json"))["validate"].clone();
    assert!(failed(&validate).is_empty(), "{validate}");
    assert_eq!(validate["passed"], true);
    assert!(
        validate["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["column"] == "rownames" && c["fails_run"] == false),
        "the row index's drift is reported, not failed: {validate}"
    );
    assert_eq!(prod_version(d), Some(3));
    record_night("promoted (rownames drift reported)");

    // Night 4: every stop half a degree north (a geocoder change): `lat` is a feature.
    snapshot(d, 4, "2017-12-01", &|header, fields| {
        let i = column(header, "lat");
        fields[i] = format!("{:.8}", fields[i].parse::<f64>().unwrap() + 0.5);
    });
    let registry = file_hashes(&d.join("registry"));
    let fourth = night(d, 4, &alert);
    assert_ne!(fourth.code, 0, "night 4 must stop: {}", fourth.stderr);
    let env = std::fs::read_to_string(d.join("alert.env")).unwrap();
    assert!(env.contains("RUNFN_ALERT_STAGE=validate\n"), "{env}");
    let summary = env
        .lines()
        .find(|l| l.starts_with("RUNFN_ALERT_SUMMARY="))
        .unwrap()
        .to_string();
    assert!(
        summary.contains("ds-validate: failed: ") && summary.contains("lat"),
        "the alert names the check and the column: {summary}"
    );
    assert!(
        std::fs::read_to_string(run.join("failed.err"))
            .unwrap()
            .contains("lat"),
        "failed.err holds the tool's own message"
    );
    assert_eq!(
        file_hashes(&d.join("registry")),
        registry,
        "registry untouched"
    );
    assert_eq!(prod_version(d), Some(3), "@prod did not move");
    for stale in ["gate.json", "register.json", "report.json"] {
        assert!(
            !run.join(stale).exists(),
            "night 3's {stale} is not left to read as night 4's"
        );
    }
    let page = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        page.contains("validate") && page.contains("lat"),
        "the page says where and why"
    );
    assert!(
        !page.contains("first model"),
        "never an earlier night's records"
    );
    // What a reader sees, in a real browser: the night's verdict, the stage, the column, @prod.
    let checked = Command::new(format!("{ROOT}/scripts/check-report-page.sh"))
        .arg(run.join("report.html"))
        .arg(d.join("night4.png"))
        .args(["FAILED", "validate", "lat", "stops@prod did not move"])
        .output()
        .unwrap();
    assert_eq!(
        checked.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );

    // make draws the history page every night; here it is drawn again by hand.
    assert!(run.join("history.html").exists() && run.join("history.json").exists());
    // The history page over the kept nights.
    let nights: Vec<PathBuf> = sorted_nights(&run);
    assert_eq!(nights.len(), 4, "{nights:?}");
    let history = tool("report")
        .current_dir(d)
        .args(["history"])
        .args(nights.iter().map(|p| p.as_os_str()))
        .args([
            "--registry",
            "registry",
            "--model",
            "stops",
            "--html",
            "runs/stops/history.html",
        ])
        .run();
    assert_eq!(history.code, 0, "{}", history.stderr);
    let history_page = std::fs::read_to_string(run.join("history.html")).unwrap();
    for expected in ["validate", "lat"] {
        assert!(history_page.contains(expected), "{expected}");
    }

    // The nightly table (`cargo test nights -- --nocapture` shows it).
    for (i, night) in table.iter().enumerate() {
        eprintln!(
            "night {}: {}, test after {}, predictions off {:?}, {}, @prod v{}",
            i + 1,
            night.rows,
            night.test_after,
            night.flagged,
            night.decision,
            night.prod.unwrap_or(0)
        );
    }
    eprintln!("night 4: stopped at validate, @prod v3; alert: {summary}");
    assert!(
        table.windows(2).all(|w| w[0].train_rows < w[1].train_rows),
        "train grows every night"
    );
}

fn sorted_nights(run: &Path) -> Vec<PathBuf> {
    let mut nights: Vec<PathBuf> = std::fs::read_dir(run.join("nights"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect();
    nights.sort();
    nights
}

fn newest_night(run: &Path) -> PathBuf {
    sorted_nights(run).pop().expect("a kept night")
}
