//! register: lineage entries, consecutive versions under concurrency, aliases and their history,
//! refusal of ungated records, verify catching tampering, and a kill mid-registration.

use std::collections::BTreeSet;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::train::{fixture, train};
use crate::util::{Output, bin, spawn, tool};

/// A trained and evaluated record with a passed gate (no baseline).
pub fn gated_record(dir: &Path) -> String {
    let trained = train(&fixture().record, &dir.join("run"), &[]);
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let evaluated = tool("evaluate").args(["-q"]).stdin(trained.stdout).run();
    assert_eq!(evaluated.code, 0, "{}", evaluated.stderr);
    let gated = tool("gate")
        .args(["--no-baseline", "-q"])
        .stdin(evaluated.stdout)
        .run();
    assert_eq!(gated.code, 0, "{}", gated.stderr);
    gated.stdout
}

fn register(registry: &Path, args: &[&str], stdin: &str) -> Output {
    tool("register")
        .args(["--registry".as_ref(), registry.as_os_str(), "-q".as_ref()])
        .args(args)
        .stdin(stdin.to_string())
        .run()
}

#[test]
fn an_entry_carries_the_lineage_and_an_alias_resolves_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let record = gated_record(dir.path());
    let registry = dir.path().join("registry");
    let out = register(
        &registry,
        &["--name", "churn", "--promote", "prod"],
        &record,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let registered = out.json();
    let section = &registered["register"];
    assert_eq!(section["version"], 1);
    assert_eq!(
        section["weights_blake3"],
        registered["train"]["weights_blake3"]
    );
    assert_eq!(section["manifest_hash"], registered["manifest_hash"]);

    let resolved = register(&registry, &["resolve", "churn@prod"], "");
    assert_eq!(resolved.code, 0, "{}", resolved.stderr);
    let entry = resolved.json();
    assert_eq!(entry["version"], 1);
    assert_eq!(entry["aliases"], serde_json::json!(["prod"]));
    assert_eq!(entry["manifest_hash"], registered["manifest_hash"]);
    assert_eq!(entry["code_commit"], "9c41be0");
    assert_eq!(entry["gate"]["passed"], true);
    assert_eq!(
        entry["metrics"]["rows"],
        registered["evaluate"]["overall"]["rows"]
    );
    let weights = std::fs::read(entry["weights"].as_str().unwrap()).unwrap();
    assert_eq!(
        blake3::hash(&weights).to_hex().as_str(),
        entry["weights_blake3"]
    );

    // evaluate uses the registered model by reference.
    let baseline = tool("evaluate")
        .args(["--as", "baseline", "--model", "churn@prod", "-q"])
        .stdin(registered.to_string())
        .env("RUNFN_REGISTRY", &registry)
        .run();
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);
    assert_eq!(
        baseline.json()["baseline"]["weights_blake3"],
        entry["weights_blake3"]
    );

    // A second run's registration, then moving the alias back, with the history kept.
    assert_eq!(
        register(
            &registry,
            &["--name", "churn", "--promote", "prod"],
            &noted(&record, "a second run")
        )
        .code,
        0
    );
    let moved = register(
        &registry,
        &["alias", "churn@prod", "1", "--reason", "roll back"],
        "",
    );
    assert_eq!(moved.code, 0, "{}", moved.stderr);
    assert_eq!(moved.json()["from_version"], 2);
    let history = register(&registry, &["history", "churn"], "").json();
    let moves: Vec<(Value, Value)> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["from_version"].clone(), m["to_version"].clone()))
        .collect();
    assert_eq!(
        moves,
        vec![
            (Value::Null, 1.into()),
            (1.into(), 2.into()),
            (2.into(), 1.into())
        ]
    );
    assert_eq!(history[2]["reason"], "roll back");
    register(&registry, &["alias", "churn@prod", "9"], "")
        .assert_bad_input("register", "churn version 9: no such entry");
    register(&registry, &["resolve", "churn@staging"], "")
        .assert_bad_input("register", "no such alias");
    register(&registry, &["--name", "Churn/../x"], &record)
        .assert_bad_input("register", "must match [a-z0-9][a-z0-9._-]*");
}

#[test]
fn an_ungated_or_failed_gate_record_is_refused_unless_allowed_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let record = gated_record(dir.path());
    let registry = dir.path().join("registry");
    let mut ungated: Value = serde_json::from_str(&record).unwrap();
    ungated.as_object_mut().unwrap().remove("gate");
    let out = register(&registry, &["--name", "churn"], &ungated.to_string());
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.json()["register"]["passed"], false);
    let allowed = register(
        &registry,
        &[
            "--name",
            "churn",
            "--allow-ungated",
            "--reason",
            "first model",
        ],
        &ungated.to_string(),
    );
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    let entry = register(&registry, &["show", "churn", "1"], "").json();
    assert_eq!(entry["ungated_reason"], "first model");
    let no_reason = tool("register")
        .args(["--allow-ungated"])
        .stdin(ungated.to_string())
        .run();
    assert_eq!(no_reason.code, 2, "--allow-ungated needs --reason");

    // A record whose evaluation scored other weights than train's (a best checkpoint) gated
    // those, not the model register would store.
    let mut other: Value = serde_json::from_str(&record).unwrap();
    other["evaluate"]["weights_blake3"] = Value::from("0".repeat(64));
    register(&registry, &["--name", "churn"], &other.to_string())
        .assert_bad_input("register", "evaluate.weights_blake3");
    assert_eq!(versions(&registry), [1], "nothing registered");
}

#[test]
fn eight_concurrent_registrations_get_eight_consecutive_versions() {
    let dir = tempfile::tempdir().unwrap();
    let record = gated_record(dir.path());
    let registry = dir.path().join("registry");
    // Eight runs (eight records: the same record again is one registration, see below).
    let children: Vec<_> = (0..8)
        .map(|i| {
            let record = noted(&record, &format!("run {i}"));
            spawn(
                "register",
                &[
                    "--registry".as_ref(),
                    registry.as_os_str(),
                    "--name".as_ref(),
                    "churn".as_ref(),
                    "-q".as_ref(),
                ],
                record.as_bytes(),
                Stdio::piped(),
            )
        })
        .collect();
    let mut versions: Vec<i64> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            v["register"]["version"].as_i64().unwrap()
        })
        .collect();
    versions.sort_unstable();
    assert_eq!(versions, (1..=8).collect::<Vec<_>>());
    let verify = register(&registry, &["verify"], "");
    assert_eq!(verify.code, 0, "{}", verify.stderr);
    assert_eq!(verify.json()["entries"], 8);
}

#[test]
fn verify_catches_a_tampered_or_missing_blob() {
    let dir = tempfile::tempdir().unwrap();
    let record = gated_record(dir.path());
    let registry = dir.path().join("registry");
    assert_eq!(register(&registry, &["--name", "churn"], &record).code, 0);
    let entry = register(&registry, &["show", "churn", "1"], "").json();
    let weights = Path::new(entry["weights"].as_str().unwrap()).to_path_buf();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&weights).unwrap().permissions().mode() & 0o777,
        0o444,
        "blobs are read-only"
    );
    std::fs::set_permissions(&weights, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut bytes = std::fs::read(&weights).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&weights, bytes).unwrap();
    let verify = register(&registry, &["verify"], "");
    assert_eq!(verify.code, 1);
    let problems = verify.json()["problems"].clone();
    assert_eq!(problems[0]["entry"], "churn@1");
    assert_eq!(problems[0]["blob"], "weights");
    assert!(problems[0]["problem"].as_str().unwrap().contains("corrupt"));
    let record_blob = registry
        .join("blobs")
        .join(&entry["blobs"]["record"].as_str().unwrap()[..2])
        .join(entry["blobs"]["record"].as_str().unwrap());
    std::fs::remove_file(record_blob).unwrap();
    let verify = register(&registry, &["verify"], "");
    assert_eq!(verify.json()["problems"].as_array().unwrap().len(), 2);
}

/// The blob files in the registry: whole blobs only, not the temp file of an interrupted write.
fn blob_files(registry: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let Ok(prefixes) = std::fs::read_dir(registry.join("blobs")) else {
        return names;
    };
    for prefix in prefixes {
        for file in std::fs::read_dir(prefix.unwrap().path()).unwrap() {
            let name = file.unwrap().file_name().into_string().unwrap();
            if name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()) {
                names.insert(name);
            }
        }
    }
    names
}

/// The blobs the index's entries refer to.
fn referenced_blobs(registry: &Path) -> BTreeSet<String> {
    let list = register(registry, &["list"], "").json();
    list.as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["blobs"].as_object().unwrap().values())
        .filter_map(|h| h.as_str().map(String::from))
        .collect()
}

fn versions(registry: &Path) -> Vec<i64> {
    let list = register(registry, &["list", "churn"], "").json();
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_i64().unwrap())
        .collect()
}

/// `record` with a note of its own, so its record blob is new to the registry: whether that blob
/// is on disk tells how far a registration got.
fn noted(record: &str, note: &str) -> String {
    let mut record: Value = serde_json::from_str(record).unwrap();
    record["note"] = json!(note);
    record.to_string()
}

/// Starts `register --name churn --promote prod` on `record`; with `pause`, it stops after its
/// blobs and creates that file (the registry's test-only pause point).
fn start_registration(registry: &Path, record: &str, pause: Option<&Path>) -> Child {
    let mut command = Command::new(bin(if pause.is_some() {
        "register-with-faults"
    } else {
        "register"
    }));
    command
        .env("RUNFN_ARTIFACTS", std::env::temp_dir())
        .args(["--registry".as_ref(), registry.as_os_str()])
        .args(["--name", "churn", "--promote", "prod", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(marker) = pause {
        command.env("RUNFN_TEST_PAUSE_AFTER_BLOBS", marker);
    }
    let mut child = command.spawn().expect("register starts");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(record.as_bytes())
        .unwrap();
    child
}

/// verify passes and the alias resolves; returns the number of entries.
fn assert_consistent(registry: &Path, when: &str) -> u64 {
    let verify = register(registry, &["verify"], "");
    assert_eq!(verify.code, 0, "{when}: {}", verify.stdout);
    let report = verify.json();
    assert_eq!(report["problems"], json!([]), "{when}");
    let prod = register(registry, &["resolve", "churn@prod"], "");
    assert_eq!(prod.code, 0, "{when}: the alias resolves: {}", prod.stderr);
    report["entries"].as_u64().unwrap()
}

#[test]
fn a_registration_killed_between_its_blobs_and_its_index_entry_leaves_the_index_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let record = gated_record(dir.path());
    let registry = dir.path().join("registry");
    let first = register(
        &registry,
        &["--name", "churn", "--promote", "prod"],
        &record,
    );
    assert_eq!(first.code, 0, "{}", first.stderr);
    let before = blob_files(&registry);
    assert_eq!(before, referenced_blobs(&registry));

    let own = noted(&record, "killed mid-registration");
    let marker = dir.path().join("paused");
    let mut child = start_registration(&registry, &own, Some(&marker));
    let started = Instant::now();
    while !marker.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the registration ended before its pause point"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no pause marker after a minute"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "killed, not exited: {status:?}");

    // It got as far as its blobs: one new one, its record, whole and referred to by nothing.
    let left = blob_files(&registry);
    let orphans: Vec<&String> = left.difference(&before).collect();
    assert_eq!(orphans.len(), 1, "{orphans:?}");
    let orphan = orphans[0];
    let bytes = std::fs::read(registry.join("blobs").join(&orphan[..2]).join(orphan)).unwrap();
    assert_eq!(blake3::hash(&bytes).to_hex().as_str(), orphan);
    let stored: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(stored["note"], "killed mid-registration");
    assert!(!referenced_blobs(&registry).contains(orphan));
    // No further: no version 2, the alias and its history as they were.
    assert_eq!(versions(&registry), [1]);
    let prod = register(&registry, &["resolve", "churn@prod"], "").json();
    assert_eq!(prod["version"], 1);
    let history = register(&registry, &["history", "churn"], "").json();
    assert_eq!(history.as_array().unwrap().len(), 1);
    // verify re-hashes the blobs entries refer to: an unreferenced one is no problem to it.
    assert_eq!(assert_consistent(&registry, "after the kill"), 1);

    // A rerun registers the same record whole, reusing the blob the killed one left.
    let rerun = register(&registry, &["--name", "churn", "--promote", "prod"], &own);
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    assert_eq!(rerun.json()["register"]["version"], 2);
    assert_eq!(blob_files(&registry), left, "the rerun stored no new blob");
    assert_eq!(
        referenced_blobs(&registry),
        left,
        "every blob is referred to now"
    );
    assert_eq!(assert_consistent(&registry, "after the rerun"), 2);
}

#[test]
fn a_registration_killed_at_any_moment_leaves_a_consistent_registry() {
    let dir = tempfile::tempdir().unwrap();
    let record = gated_record(dir.path());
    let registry = dir.path().join("registry");
    assert_eq!(
        register(
            &registry,
            &["--name", "churn", "--promote", "prod"],
            &record
        )
        .code,
        0
    );
    let delays_ms = [0u64, 2, 5, 10, 20, 40];
    // Where each kill landed: before the record blob was stored, between the blobs and the
    // index entry, or after the entry was committed (the registration finished first).
    let (mut before_blobs, mut mid_way, mut after_commit) = (0, 0, 0);
    for (attempt, delay_ms) in delays_ms.into_iter().enumerate() {
        let (blobs, entries) = (blob_files(&registry), versions(&registry).len());
        let mut child = start_registration(
            &registry,
            &noted(&record, &format!("attempt {attempt}")),
            None,
        );
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        let status = child.wait().unwrap();
        let new_blobs = blob_files(&registry).len() - blobs.len();
        let new_entries = versions(&registry).len() - entries;
        match (new_blobs, new_entries) {
            (1, 1) => {
                assert!(status.success() || status.signal() == Some(9), "{status:?}");
                after_commit += 1;
            }
            (1, 0) => {
                assert_eq!(status.signal(), Some(9), "{status:?}");
                mid_way += 1;
            }
            (0, 0) => {
                assert_eq!(status.signal(), Some(9), "{status:?}");
                before_blobs += 1;
            }
            other => panic!("after a kill at {delay_ms} ms: (new blobs, new entries) {other:?}"),
        }
        assert_consistent(&registry, &format!("after a kill at {delay_ms} ms"));
    }
    eprintln!(
        "kills: {before_blobs} before the blobs, {mid_way} between blobs and index, {after_commit} after the commit"
    );
    assert_eq!(before_blobs + mid_way + after_commit, delays_ms.len());
    assert!(
        before_blobs + mid_way >= 1,
        "no kill interrupted a registration: the test did not test anything"
    );
    let versions = versions(&registry);
    let expected: Vec<i64> = (1..=versions.len() as i64).collect();
    assert_eq!(versions, expected, "versions stay consecutive");
    assert_eq!(versions.len(), 1 + after_commit);
}

#[test]
fn a_registration_retried_after_it_committed_adds_no_second_version() {
    // The first attempt commits, then cannot write its record (stdout on a full disk): exit 4,
    // which a cron wrapper retries. The retry finds the entry made from the same record and
    // returns it; a new record is a new version.
    let dir = tempfile::tempdir().unwrap();
    let record = gated_record(dir.path());
    let registry = dir.path().join("registry");
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let first = spawn(
        "register",
        &[
            "--registry".as_ref(),
            registry.as_os_str(),
            "--name".as_ref(),
            "churn".as_ref(),
            "--promote".as_ref(),
            "prod".as_ref(),
            "-q".as_ref(),
        ],
        record.as_bytes(),
        Stdio::from(full),
    )
    .wait_with_output()
    .unwrap();
    assert_eq!(
        first.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(versions(&registry), [1], "the first attempt committed");
    let retry = register(
        &registry,
        &["--name", "churn", "--promote", "prod"],
        &record,
    );
    assert_eq!(retry.code, 0, "{}", retry.stderr);
    assert_eq!(retry.json()["register"]["version"], 1);
    assert_eq!(retry.json()["register"]["already_registered"], true);
    assert_eq!(versions(&registry), [1], "no second version");
    let history = register(&registry, &["history", "churn"], "");
    assert_eq!(
        history.json().as_array().unwrap().len(),
        1,
        "one alias move"
    );
    let next = register(
        &registry,
        &["--name", "churn", "--promote", "prod"],
        &noted(&record, "the next night"),
    );
    assert_eq!(next.json()["register"]["version"], 2);
    assert_eq!(next.json()["register"]["already_registered"], false);
}
