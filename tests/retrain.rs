//! The daily retraining loop from make and cron: the snapshot is the one the manifest names, a
//! pinned snapshot that moved is refused by every tool that reads it, drift is checked against
//! what serves (MODEL@prod), a failed run alerts and leaves the registry as it was, and the log
//! is rotated by size.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{Output, demo_snapshot, failed_checks, file_hashes, testdata, tool};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The e2e manifest with its snapshot at `snapshot` (relative to the run's folder).
fn write_manifest(dir: &Path, name: &str, snapshot: &str) -> PathBuf {
    let text = std::fs::read_to_string(testdata("e2e/manifest.yaml")).unwrap();
    let text = text.replace("./snapshot@snapshot=e2e-20k", snapshot);
    assert!(text.contains(snapshot));
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

pub fn make(dir: &Path, targets: &[&str], vars: &[String]) -> Output {
    let out = Command::new("make")
        // The tests run the dev build they have just made, never a release build.
        .env("BUILD_PROFILE", "dev")
        .current_dir(dir)
        .args(["--no-print-directory", "-f", &format!("{ROOT}/Makefile")])
        .args(targets)
        .args([
            "RUN_DIR=run",
            "SEEDS=11 12",
            "MODEL=churn",
            "REGISTRY=registry",
        ])
        // The binaries are built already; `run` would otherwise build them.
        .arg("CARGO=true")
        .args(vars)
        .output()
        .expect("make runs");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// An alert command that writes its stdin and the alert's environment to files in `dir`.
pub fn alert_script(dir: &Path) -> String {
    let script = dir.join("alert.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncat > {0}/alert.stdin\nenv | grep '^RUNFN_ALERT_' | sort > {0}/alert.env\n",
            dir.display()
        ),
    )
    .unwrap();
    let status = Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    assert!(status.success());
    script.display().to_string()
}

#[test]
fn make_digests_and_reads_the_snapshot_the_manifest_names_never_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    demo_snapshot(&dir.path().join("lake/day1"), 3_000, &["--seed", "3"]);
    let manifest = write_manifest(dir.path(), "churn.yaml", "./lake/day1@snapshot=day1");
    let printed = tool("mf-hash")
        .current_dir(dir.path())
        .args([
            manifest.as_os_str(),
            "--print".as_ref(),
            "snapshot".as_ref(),
        ])
        .run();
    assert_eq!(
        (printed.code, printed.stdout.as_str()),
        (0, "./lake/day1\n")
    );

    let out = make(
        dir.path(),
        &["run/shards.json"],
        &[format!("MANIFEST={}", manifest.display())],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let expected = tool("mf-hash")
        .current_dir(dir.path())
        .args([
            manifest.as_os_str(),
            "--data-digest".as_ref(),
            "lake/day1".as_ref(),
        ])
        .run();
    assert_eq!(expected.code, 0, "{}", expected.stderr);
    let recorded = json(&dir.path().join("run/manifest.json"));
    assert_eq!(
        recorded["mf_hash"]["data_digest"]["digest"],
        expected.json()["mf_hash"]["data_digest"]["digest"]
    );
    assert_eq!(recorded["mf_hash"]["data_digest"]["path"], "./lake/day1");
    let validated = json(&dir.path().join("run/validate.json"));
    assert_eq!(
        validated["validate"]["profile"]["rows"], 3_000,
        "ds-validate read the named snapshot"
    );
    assert!(!out.stderr.contains("generating"), "{}", out.stderr);
    assert!(!dir.path().join("run/snapshot.json").exists());
    assert!(!dir.path().join("runs").exists() && !dir.path().join("run/snapshot").exists());

    // Nothing changed: nothing reruns. A new snapshot at the same path: everything does.
    let again = make(
        dir.path(),
        &["run/shards.json"],
        &[format!("MANIFEST={}", manifest.display())],
    );
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(!again.stderr.contains("run: "), "{}", again.stderr);
    std::fs::remove_dir_all(dir.path().join("lake/day1")).unwrap();
    demo_snapshot(&dir.path().join("lake/day1"), 2_000, &["--seed", "4"]);
    let moved = make(
        dir.path(),
        &["run/shards.json"],
        &[format!("MANIFEST={}", manifest.display())],
    );
    assert_eq!(moved.code, 0, "{}", moved.stderr);
    assert!(
        moved.stderr.contains("run: write the shards"),
        "{}",
        moved.stderr
    );
    assert_eq!(
        json(&dir.path().join("run/validate.json"))["validate"]["profile"]["rows"],
        2_000
    );

    // A manifest naming a snapshot that does not exist: the manifest stage fails naming it, and
    // the manifest's own alert command runs (no RUNFN_ALERT_CMD here).
    let missing = write_manifest(dir.path(), "missing.yaml", "./lake/nowhere@snapshot=1");
    let alert = format!(
        "alert: \"echo $RUNFN_ALERT_STAGE $RUNFN_ALERT_EXIT > {}/manifest-alert\"\n",
        dir.path().display()
    );
    let text = std::fs::read_to_string(&missing).unwrap();
    std::fs::write(&missing, format!("{alert}{text}")).unwrap();
    let printed = tool("mf-hash")
        .args([missing.as_os_str(), "--print".as_ref(), "alert".as_ref()])
        .run();
    assert_eq!(
        printed.stdout,
        alert["alert: \"".len()..alert.len() - 2].to_string() + "\n"
    );
    let failed = make(
        dir.path(),
        &["run"],
        &[format!("MANIFEST={}", missing.display())],
    );
    assert_ne!(failed.code, 0);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("manifest-alert")).unwrap(),
        "manifest 2\n"
    );
    assert!(
        failed
            .stderr
            .contains("mf-hash: --data-digest ./lake/nowhere: "),
        "{}",
        failed.stderr
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run/failed.stage")).unwrap(),
        "manifest 2\n"
    );
}

#[test]
fn a_pinned_snapshot_that_moved_is_refused_by_every_tool_that_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(&dir.path().join("lake/day2"), 2_000, &["--seed", "5"]);
    let original = write_manifest(dir.path(), "churn.yaml", "./lake/old@snapshot=day1");
    let before = std::fs::read_to_string(&original).unwrap();

    // A snapshot that cannot be read: nothing written.
    let bad = tool("mf-hash")
        .current_dir(dir.path())
        .args([
            "pin",
            "churn.yaml",
            "--snapshot",
            "lake/none",
            "--out",
            "p.yaml",
        ])
        .run();
    bad.assert_bad_input("mf-hash", "--snapshot: lake/none: ");
    assert!(!dir.path().join("p.yaml").exists() && !dir.path().join("lake/none.pin.json").exists());

    let pinned = tool("mf-hash")
        .current_dir(dir.path())
        .args([
            "pin",
            "churn.yaml",
            "--snapshot",
            "./lake/day2",
            "--out",
            "pinned.yaml",
        ])
        .run();
    assert_eq!(pinned.code, 0, "{}", pinned.stderr);
    let digest = pinned.json()["pin"]["data_digest"]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let after = std::fs::read_to_string(dir.path().join("pinned.yaml")).unwrap();
    assert_eq!(
        after,
        before.replace("./lake/old@snapshot=day1", &format!("./lake/day2@{digest}")),
        "only the snapshot's value changed, comments and layout kept"
    );
    assert_eq!(std::fs::read_to_string(&original).unwrap(), before);
    assert!(dir.path().join("lake/day2.pin.json").is_file());

    let record = tool("mf-hash")
        .current_dir(dir.path())
        .args(["pinned.yaml", "-q"])
        .run();
    assert_eq!(record.code, 0, "{}", record.stderr);
    let reads = |name: &str, args: &[&str]| {
        tool(name)
            .current_dir(dir.path())
            .args(args)
            .stdin(record.stdout.clone())
            .run()
    };
    let digested = tool("mf-hash")
        .current_dir(dir.path())
        .args(["pinned.yaml", "--data-digest", "lake/day2"])
        .run();
    assert_eq!(digested.code, 0, "{}", digested.stderr);
    assert_eq!(reads("ds-validate", &["--profile-out", "p.json"]).code, 0);
    assert_eq!(reads("leak-check", &[]).code, 0);

    // One file of the snapshot changes: every reader refuses it, naming that file.
    let part = std::fs::read_dir(&snapshot)
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    let mut bytes = std::fs::read(&part).unwrap();
    let last = bytes.len() - 2;
    bytes[last] = if bytes[last] == b'0' { b'1' } else { b'0' };
    std::fs::write(&part, bytes).unwrap();
    let named = format!(
        "lake/day2/{} changed (same",
        part.file_name().unwrap().to_str().unwrap()
    );
    let changed = tool("mf-hash")
        .current_dir(dir.path())
        .args(["pinned.yaml", "--data-digest", "lake/day2"])
        .run();
    changed.assert_bad_input("mf-hash", &named);
    reads("ds-validate", &["--profile-out", "p2.json"]).assert_bad_input("ds-validate", &named);
    assert!(!dir.path().join("p2.json").exists(), "nothing written");
    reads("leak-check", &[]).assert_bad_input("leak-check", &named);
    reads("shardify", &["--out", "shards"]).assert_bad_input("shardify", &named);
    assert!(!dir.path().join("shards").exists(), "nothing written");

    // The daily run stops at the manifest stage, naming the file.
    let run = make(
        dir.path(),
        &["run/shards.json"],
        &[format!(
            "MANIFEST={}",
            dir.path().join("pinned.yaml").display()
        )],
    );
    assert_ne!(run.code, 0);
    assert!(run.stderr.contains(&named), "{}", run.stderr);
    assert!(!dir.path().join("run/manifest.json").exists());
}

#[test]
fn an_unpinned_snapshot_that_moves_after_mf_hash_digested_it_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(&dir.path().join("lake/day3"), 2_000, &["--seed", "6"]);
    write_manifest(dir.path(), "churn.yaml", "./lake/day3@snapshot=day3");
    let record = tool("mf-hash")
        .current_dir(dir.path())
        .args(["churn.yaml", "--data-digest", "./lake/day3", "-q"])
        .run();
    assert_eq!(record.code, 0, "{}", record.stderr);
    let validate = || {
        tool("ds-validate")
            .current_dir(dir.path())
            .args(["--profile-out", "p.json", "-q"])
            .stdin(record.stdout.clone())
            .run()
    };
    assert_eq!(validate().code, 0);
    std::fs::remove_file(dir.path().join("p.json")).unwrap();
    let part = std::fs::read_dir(&snapshot)
        .unwrap()
        .map(|e| e.unwrap().path())
        .max()
        .unwrap();
    std::fs::remove_file(&part).unwrap();
    let moved = validate();
    moved.assert_bad_input("ds-validate", "since mf-hash digested it as blake3:");
    assert!(!dir.path().join("p.json").exists(), "nothing written");
}

#[test]
fn drift_against_prod_fails_the_next_run_alerts_and_leaves_the_registry_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let alert = alert_script(dir.path());
    demo_snapshot(&dir.path().join("lake/day1"), 4_000, &["--seed", "7"]);
    demo_snapshot(
        &dir.path().join("lake/day2"),
        4_000,
        &["--seed", "8", "--drift"],
    );
    let day1 = write_manifest(dir.path(), "day1.yaml", "./lake/day1@snapshot=day1");
    let day2 = write_manifest(dir.path(), "day2.yaml", "./lake/day2@snapshot=day2");
    let vars = |manifest: &Path| {
        vec![
            format!("MANIFEST={}", manifest.display()),
            format!("RUNFN_ALERT_CMD={alert}"),
        ]
    };

    // The first run: nothing serves yet, so no drift checks, said so; the model becomes @prod.
    let first = make(dir.path(), &["run"], &vars(&day1));
    assert_eq!(first.code, 0, "{}", first.stderr);
    let validated = json(&dir.path().join("run/validate.json"))["validate"].clone();
    assert_eq!(validated["previous_model"]["reference"], "churn@prod");
    assert_eq!(validated["previous_model"]["version"], Value::Null);
    assert!(
        validated["no_previous"]
            .as_str()
            .unwrap()
            .contains("the first run"),
        "{validated}"
    );
    assert!(first.stderr.contains("the first run, drift checks skipped"));
    assert!(
        !dir.path().join("alert.stdin").exists(),
        "no alert for a passing run"
    );
    let profile = tool("register")
        .current_dir(dir.path())
        .args(["profile", "churn@prod", "--registry", "registry"])
        .run();
    assert_eq!(profile.code, 0, "{}", profile.stderr);
    assert_eq!(
        profile.stdout,
        std::fs::read_to_string(dir.path().join("run/profile.json")).unwrap(),
        "the registry gives back the profile it stored"
    );
    tool("register")
        .current_dir(dir.path())
        .args(["profile", "churn@canary", "--registry", "registry"])
        .run()
        .assert_bad_input("register", "churn@canary: no such alias");
    tool("ds-validate")
        .current_dir(dir.path())
        .args([
            "--previous-model",
            "churn@prod",
            "--previous",
            "run/profile.json",
        ])
        .stdin(std::fs::read_to_string(dir.path().join("run/manifest.json")).unwrap())
        .run()
        .assert_bad_input("ds-validate", "--previous");

    // The next day's snapshot drifted: validation against @prod fails, the alert gets the
    // record, and the registry is byte-identical.
    let registry = file_hashes(&dir.path().join("registry"));
    let second = make(dir.path(), &["run"], &vars(&day2));
    assert_ne!(second.code, 0, "{}", second.stderr);
    let stdin: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("alert.stdin")).unwrap())
            .unwrap();
    assert_eq!(stdin["validate"]["passed"], false);
    assert_eq!(stdin["validate"]["previous_model"]["version"], 1);
    let failed = failed_checks(&stdin["validate"]);
    assert!(
        failed
            .iter()
            .any(|c| c["name"] == "label_rate_shift" || c["name"] == "numeric_drift"),
        "{failed:?}"
    );
    let env = std::fs::read_to_string(dir.path().join("alert.env")).unwrap();
    assert!(env.contains("RUNFN_ALERT_STAGE=validate\n"), "{env}");
    assert!(env.contains("RUNFN_ALERT_EXIT=1\n"), "{env}");
    assert!(
        env.contains(
            "RUNFN_ALERT_SUMMARY=runfn: churn run failed at stage validate (exit 1: a check failed): ds-validate: failed: "
        ),
        "the summary says which check failed: {env}"
    );
    assert!(!dir.path().join("run/validate.json").exists());
    assert_eq!(
        file_hashes(&dir.path().join("registry")),
        registry,
        "registry untouched"
    );

    // The drift explained: the run goes on past validation.
    let explained = dir.path().join("explained.json");
    let reasons: Vec<Value> = failed
        .iter()
        .map(|c| serde_json::json!({"column": c["column"], "check": c["name"], "reason": "new pricing", "max_value": c["value"].as_f64().unwrap_or(0.0), "until": "2099-12-31"}))
        .collect();
    std::fs::write(&explained, Value::Array(reasons).to_string()).unwrap();
    let mut explained_vars = vars(&day2);
    explained_vars.push(format!("EXPLAINED={}", explained.display()));
    let third = make(dir.path(), &["run/validate.json"], &explained_vars);
    assert_eq!(third.code, 0, "{}", third.stderr);
}

#[test]
fn retrain_rotates_its_log_and_alerts_on_a_run_that_fails_early() {
    let dir = tempfile::tempdir().unwrap();
    let alert = alert_script(dir.path());
    let log = dir.path().join("retrain.log");
    let retrain = |extra: &[(&str, &str)]| {
        let mut command = Command::new(format!("{ROOT}/scripts/retrain.sh"));
        command
            .env("BUILD_PROFILE", "dev")
            .env("RETRAIN_LOCK", dir.path().join("lock"))
            .env("RETRAIN_LOG", &log)
            .env("RUNFN_ALERT_CMD", &alert)
            .arg(format!("RUN_DIR={}", dir.path().join("run").display()))
            .arg(format!(
                "MANIFEST={}",
                dir.path().join("missing.yaml").display()
            ))
            .arg("CARGO=true");
        for (key, value) in extra {
            command.env(key, value);
        }
        command.output().unwrap()
    };
    let rotated = [("RETRAIN_LOG_MAX_BYTES", "1"), ("RETRAIN_LOG_KEEP", "2")];
    for _ in 0..4 {
        let out = retrain(&rotated);
        assert_eq!(
            out.status.code(),
            Some(2),
            "the manifest stage's code: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let runs = |path: &Path| {
        std::fs::read_to_string(path)
            .unwrap()
            .matches("== retrain started")
            .count()
    };
    assert_eq!(runs(&log), 1, "each run starts a new log");
    assert_eq!(runs(&log.with_extension("log.1")), 1);
    assert_eq!(runs(&log.with_extension("log.2")), 1);
    assert!(
        !log.with_extension("log.3").exists(),
        "only KEEP rotated logs"
    );
    // Under the default bound, runs append to the same log.
    retrain(&[]);
    assert_eq!(runs(&log), 2);

    let env = std::fs::read_to_string(dir.path().join("alert.env")).unwrap();
    assert!(env.contains("RUNFN_ALERT_STAGE=manifest\n"), "{env}");
    assert!(env.contains("RUNFN_ALERT_EXIT=2\n"), "{env}");
    assert!(
        env.contains("(exit 2: bad usage or input): mf-hash: ") && env.contains("missing.yaml: "),
        "the summary carries the tool's one-line message: {env}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("alert.stdin")).unwrap(),
        "",
        "bad input writes no record"
    );
    let bad = retrain(&[("RETRAIN_LOG_KEEP", "x")]);
    assert_eq!(bad.status.code(), Some(2));
}
