use serde_json::json;

use crate::util::{assert_golden, testdata, tool};

/// Pinned so that no refactor can change a manifest's identity silently. A deliberate change of
/// normalization needs a new format tag (runfn-manifest-v2) and new pins.
const CHURN_HASH: &str = "b456aff0ffa18e7358da860a2424ffc10f7c145bf2a30578b3979328bee86224";
const CHURN_LR_HASH: &str = "b0522b6c6c7fb2c129947694e53d15207fa2afdc122db997ad43e920c6c1d560";
const CHURN_HIDDEN_REORDERED_HASH: &str =
    "a40109f34953e19e706f5906b967d4e7bab46da19a9f7fcc04e50f30a394d614";

fn hash_of(args: &[&str]) -> String {
    let out = tool("mf-hash").args(args).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()["manifest_hash"]
        .as_str()
        .expect("hash")
        .to_string()
}

#[test]
fn example_manifest_golden() {
    let out = tool("mf-hash").args(["testdata/mf-hash/churn.yaml"]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_golden("mf-hash", "churn", out.json());
}

#[test]
fn golden_hashes_are_pinned() {
    assert_eq!(hash_of(&["testdata/mf-hash/churn.yaml"]), CHURN_HASH);
    assert_eq!(hash_of(&["testdata/mf-hash/churn-lr.yaml"]), CHURN_LR_HASH);
    assert_eq!(
        hash_of(&["testdata/mf-hash/churn-hidden-reordered.yaml"]),
        CHURN_HIDDEN_REORDERED_HASH
    );
}

#[test]
fn yaml_and_json_with_other_order_and_spelling_hash_the_same() {
    assert_eq!(
        hash_of(&["testdata/mf-hash/churn-reordered.json"]),
        CHURN_HASH
    );
    let yaml = std::fs::read(testdata("mf-hash/churn.yaml")).unwrap();
    let out = tool("mf-hash").stdin(yaml).run();
    assert_eq!(out.json()["manifest_hash"], CHURN_HASH);
    let json_text = std::fs::read(testdata("mf-hash/churn-reordered.json")).unwrap();
    let out = tool("mf-hash").args(["-"]).stdin(json_text).run();
    assert_eq!(out.json()["manifest_hash"], CHURN_HASH);
}

#[test]
fn lint_problems_exit_1_with_the_record_and_every_field_named() {
    let out = tool("mf-hash")
        .args(["testdata/mf-hash/bad-lint.yaml"])
        .run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_golden("mf-hash", "bad-lint", out.json());
    assert!(
        out.stderr.contains("mf-hash: problem: code.image: "),
        "{}",
        out.stderr
    );
}

#[test]
fn check_flag_compares_the_hash() {
    let ok = tool("mf-hash")
        .args(["testdata/mf-hash/churn.yaml", "--check", CHURN_HASH])
        .run();
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(
        ok.json()["mf_hash"]["check"],
        json!({"expected": CHURN_HASH, "matched": true})
    );
    let changed = tool("mf-hash")
        .args(["testdata/mf-hash/churn-lr.yaml", "--check", CHURN_HASH])
        .run();
    assert_eq!(changed.code, 1);
    let record = changed.json();
    assert_eq!(record["mf_hash"]["passed"], false);
    assert_eq!(record["mf_hash"]["problems"][0]["field"], "manifest_hash");
    let bad = tool("mf-hash")
        .args(["testdata/mf-hash/churn.yaml", "--check", "abc"])
        .run();
    bad.assert_bad_input(
        "mf-hash",
        "--check: `abc` is not 64 lowercase hex characters",
    );
}

#[test]
fn bad_input_exits_2_naming_the_file_and_line() {
    let out = tool("mf-hash")
        .args(["testdata/mf-hash/malformed.yaml"])
        .run();
    out.assert_bad_input("mf-hash", "testdata/mf-hash/malformed.yaml: ");
    assert!(out.stderr.contains("line"), "{}", out.stderr);
    let out = tool("mf-hash")
        .args(["testdata/mf-hash/duplicate-key.json"])
        .run();
    out.assert_bad_input("mf-hash", "duplicate key `seed`");
    let out = tool("mf-hash")
        .args(["testdata/mf-hash/missing.yaml"])
        .run();
    out.assert_bad_input("mf-hash", "testdata/mf-hash/missing.yaml: ");
    let out = tool("mf-hash").stdin("[1, 2]").run();
    out.assert_bad_input(
        "mf-hash",
        "<stdin>: the manifest must be a mapping of fields, found an array",
    );
    let out = tool("mf-hash").stdin("").run();
    out.assert_bad_input("mf-hash", "<stdin>: the manifest is empty");
    let out = tool("mf-hash").args(["--format", "toml"]).run();
    assert_eq!(out.code, 2, "clap usage errors are exit 2 too");
}

#[test]
fn data_digest_is_added_and_verifies_a_blake3_pin() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("snapshot");
    std::fs::create_dir_all(data.join("part")).unwrap();
    std::fs::write(data.join("part/a.csv"), "id,churned\n1,0\n").unwrap();
    std::fs::write(data.join("b.csv"), "id,churned\n2,1\n").unwrap();
    let out = tool("mf-hash")
        .args(["testdata/mf-hash/churn.yaml", "--data-digest"])
        .args([&data])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let digest = out.json()["mf_hash"]["data_digest"].clone();
    assert_eq!(
        (digest["files"].as_u64(), digest["bytes"].as_u64()),
        (Some(2), Some(30))
    );
    let pinned = digest["digest"].as_str().unwrap().to_string();
    assert!(pinned.starts_with("blake3:") && pinned.len() == 7 + 64);

    let manifest = std::fs::read_to_string(testdata("mf-hash/churn.yaml")).unwrap();
    let pinned_manifest = manifest.replace("@snapshot=5d1a90c2", &format!("@{pinned}"));
    let path = dir.path().join("pinned.yaml");
    std::fs::write(&path, &pinned_manifest).unwrap();
    let ok = tool("mf-hash")
        .args([&path])
        .args(["--data-digest".as_ref(), data.as_os_str()])
        .run();
    assert_eq!(ok.code, 0, "{}", ok.stderr);

    std::fs::write(data.join("b.csv"), "id,churned\n2,0\n").unwrap();
    let changed = tool("mf-hash")
        .args([&path])
        .args(["--data-digest".as_ref(), data.as_os_str()])
        .run();
    changed.assert_bad_input("mf-hash", &format!("since it was pinned as {pinned}"));
    assert!(
        changed.stderr.contains("without a listing"),
        "pinned by hand, so no listing names the file: {}",
        changed.stderr
    );

    let missing = tool("mf-hash")
        .args([
            "testdata/mf-hash/churn.yaml",
            "--data-digest",
            "no/such/folder",
        ])
        .run();
    missing.assert_bad_input("mf-hash", "--data-digest no/such/folder: ");
}

#[test]
fn commit_from_git_fills_the_commit_and_refuses_a_dirty_tree() {
    let dir = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = std::process::Command::new("git")
            .current_dir(dir.path())
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .expect("git runs");
        assert!(
            status.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        String::from_utf8(status.stdout).unwrap()
    };
    git(&["init", "-q"]);
    std::fs::copy(
        testdata("mf-hash/churn.yaml"),
        dir.path().join("manifest.yaml"),
    )
    .unwrap();
    git(&["add", "manifest.yaml"]);
    git(&["commit", "-qm", "manifest"]);
    let head = git(&["rev-parse", "HEAD"]).trim().to_string();

    let out = tool("mf-hash")
        .current_dir(dir.path())
        .args(["manifest.yaml", "--commit-from-git"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["manifest"]["code"]["commit"], head);

    std::fs::write(dir.path().join("train.py"), "print('changed')\n").unwrap();
    let dirty = tool("mf-hash")
        .current_dir(dir.path())
        .args(["manifest.yaml", "--commit-from-git"])
        .run();
    dirty.assert_bad_input("mf-hash", "has uncommitted changes");
    assert!(dirty.stderr.contains("train.py"), "{}", dirty.stderr);
}

#[test]
fn help_shows_examples_and_output_schema() {
    let out = tool("mf-hash").args(["--help"]).run();
    assert_eq!(out.code, 0);
    assert!(
        out.stdout.contains("Examples:") && out.stdout.contains("\"manifest_hash\""),
        "{}",
        out.stdout
    );
}
