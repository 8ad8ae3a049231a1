//! The whole run from make on a tiny snapshot: every stage to a registered model whose lineage
//! matches what the stages wrote; nothing to do the second time; a changed config retrains and is
//! gated against @prod; retrain's lock and its exit code.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::util::testdata;

/// `make stages` in `dir` (RUN_DIR=.) with `manifest`, seeds 11 and 12, model churn; the e2e
/// snapshot is generated on first use.
pub fn make(dir: &Path, manifest: &str, extra: &[&str]) -> Output {
    let root = env!("CARGO_MANIFEST_DIR");
    // The e2e manifest names ./snapshot; make generates only the demo manifest's snapshot.
    if !dir.join("snapshot").exists() {
        crate::util::demo_snapshot(&dir.join("snapshot"), 20_000, &["--seed", "7"]);
    }
    Command::new("make")
        // The tests run the dev build they have just made, never a release build.
        .env("BUILD_PROFILE", "dev")
        .current_dir(dir)
        .args([
            "--no-print-directory",
            "-f",
            &format!("{root}/Makefile"),
            "stages",
        ])
        .arg(format!("MANIFEST={}", testdata(manifest).display()))
        .args([
            "RUN_DIR=.",
            "SEEDS=11 12",
            "MODEL=churn",
            "REGISTRY=registry",
        ])
        .args(extra)
        .output()
        .expect("make runs")
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn resolve(dir: &Path) -> Value {
    let out = Command::new(crate::util::bin("register"))
        .current_dir(dir)
        .args(["resolve", "churn@prod", "--registry", "registry"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn make_runs_every_stage_to_a_registered_model_with_its_lineage() {
    let dir = tempfile::tempdir().unwrap();
    let first = make(dir.path(), "e2e/manifest.yaml", &[]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let entry = resolve(dir.path());
    let manifest = json(&dir.path().join("manifest.json"));
    let trained = json(&dir.path().join("train-seed11.json"));
    let gate = json(&dir.path().join("gate.json"));
    assert_eq!(entry["version"], 1);
    assert_eq!(entry["manifest_hash"], manifest["manifest_hash"]);
    assert_eq!(entry["weights_blake3"], trained["train"]["weights_blake3"]);
    assert_eq!(entry["gate"]["passed"], true);
    assert_eq!(
        gate["gate"]["no_baseline"], true,
        "the first run says it has no baseline"
    );
    assert_eq!(
        json(&dir.path().join("noise.json"))["noise_floor"]["n"],
        2,
        "the noise floor spans both seeds"
    );
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr.contains("run: train seed 12"),
        "make says where it stands: {stderr}"
    );

    // Nothing changed: no stage runs.
    let registered = dir.path().join("register.json");
    let before = std::fs::metadata(&registered).unwrap().modified().unwrap();
    let again = make(dir.path(), "e2e/manifest.yaml", &[]);
    assert!(again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        !stderr.contains("run: "),
        "a second make ran stages: {stderr}"
    );
    assert_eq!(
        std::fs::metadata(&registered).unwrap().modified().unwrap(),
        before
    );

    // A changed config retrains and is gated against churn@prod on the same test split.
    let second = make(dir.path(), "e2e/manifest-changed.yaml", &[]);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let gate = json(&dir.path().join("gate.json"));
    assert_eq!(gate["gate"]["no_baseline"], false);
    assert_eq!(gate["baseline"]["registered_as"], "churn@1");
    let entry = resolve(dir.path());
    assert_eq!(entry["version"], 2);
    assert_ne!(
        entry["manifest_hash"], manifest["manifest_hash"],
        "the new manifest's model is @prod"
    );
}

#[test]
fn retrain_takes_a_lock_and_reports_a_failed_stage() {
    let dir = tempfile::tempdir().unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    let lock = dir.path().join("retrain.lock");
    let log = dir.path().join("retrain.log");
    let retrain = || {
        Command::new(format!("{root}/scripts/retrain.sh"))
            .env("BUILD_PROFILE", "dev")
            .env("RETRAIN_LOCK", &lock)
            .env("RETRAIN_LOG", &log)
            .arg(format!("RUN_DIR={}", dir.path().join("run").display()))
            .arg(format!(
                "MANIFEST={}",
                dir.path().join("missing.yaml").display()
            ))
            // The tests build nothing: a build here (without the test features) relinks the
            // binaries the other tests are starting.
            .arg("CARGO=true")
            .output()
            .unwrap()
    };
    // Another run holds the lock: this one says so and exits 0 without running anything.
    let mut holder = Command::new("flock")
        .arg(&lock)
        .args(["sleep", "2"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let blocked = retrain();
    // The lock is held by flock's child, so wait for it to end rather than killing flock.
    let _ = holder.wait();
    assert_eq!(blocked.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&blocked.stderr).contains("another retrain is running"));
    assert!(!log.exists(), "the blocked run did nothing");
    // A stage that fails (here: the manifest is missing) makes retrain fail, with the log kept.
    let failed = retrain();
    assert_ne!(failed.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&failed.stderr).contains("a stage failed"));
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("retrain started") && text.contains("missing.yaml"),
        "{text}"
    );
}
