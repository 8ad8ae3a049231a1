//! register: lineage entries, consecutive versions under concurrency, aliases and their history,
//! refusal of ungated records, verify catching tampering, and a kill mid-registration.

use std::path::Path;
use std::process::Stdio;

use serde_json::Value;

use crate::train::{fixture, train};
use crate::util::{Output, spawn, tool};

/// A trained and evaluated record with a passed gate (no baseline).
fn gated_record(dir: &Path) -> String {
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

    // A second registration, then moving the alias back, with the history kept.
    assert_eq!(
        register(
            &registry,
            &["--name", "churn", "--promote", "prod"],
            &record
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
}

#[test]
fn eight_concurrent_registrations_get_eight_consecutive_versions() {
    let dir = tempfile::tempdir().unwrap();
    let record = gated_record(dir.path());
    let registry = dir.path().join("registry");
    let children: Vec<_> = (0..8)
        .map(|_| {
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
    for delay_ms in [0u64, 2, 5, 10, 20] {
        let mut child = spawn(
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
            Stdio::null(),
        );
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let _ = child.wait();
        let verify = register(&registry, &["verify"], "");
        assert_eq!(
            verify.code, 0,
            "after a kill at {delay_ms} ms: {}",
            verify.stdout
        );
        let prod = register(&registry, &["resolve", "churn@prod"], "");
        assert_eq!(prod.code, 0, "the alias still resolves: {}", prod.stderr);
    }
    let list = register(&registry, &["list", "churn"], "").json();
    let versions: Vec<i64> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["version"].as_i64().unwrap())
        .collect();
    let expected: Vec<i64> = (1..=versions.len() as i64).collect();
    assert_eq!(versions, expected, "versions stay consecutive");
}
