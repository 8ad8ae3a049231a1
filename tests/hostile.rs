//! What a hostile (or only unlucky) user does: special files where outputs go, duplicate names,
//! empty and absurd inputs, half-broken records. Each case pins the documented refusal: exit 2,
//! one `tool: message` line naming the file, flag, field or row, nothing on stdout, and no file
//! written or replaced.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::util::{Output, spawn, tool};

/// A small CSV snapshot: 40 rows over July to September 2026, two labels.
fn small_csv(dir: &Path) -> PathBuf {
    let mut text = String::from("id,day,x,churned\n");
    for i in 1..=40 {
        text.push_str(&format!(
            "C{i},2026-0{}-1{},{i}.5,{}\n",
            i % 3 + 7,
            i % 9,
            i % 2
        ));
    }
    let path = dir.join("snap.csv");
    std::fs::write(&path, text).unwrap();
    path
}

fn mkfifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {}", path.display());
}

fn is_fifo(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

fn os(path: &Path) -> &std::ffi::OsStr {
    path.as_os_str()
}

/// Runs `tool` with `args` and empty stdin, killing it after `limit` (a tool that blocks on a
/// FIFO would otherwise hang the test run); `None` when it had to be killed.
fn run_with_limit(name: &str, args: &[&std::ffi::OsStr], limit: Duration) -> Option<Output> {
    run_with_limit_and_stdin(name, args, b"", limit)
}

/// `run_with_limit` with `stdin` written to the tool.
fn run_with_limit_and_stdin(
    name: &str,
    args: &[&std::ffi::OsStr],
    stdin: &[u8],
    limit: Duration,
) -> Option<Output> {
    let mut child = spawn(name, args, stdin, Stdio::piped());
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("output");
    Some(Output {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    })
}

fn ds_validate(snapshot: &Path, extra: &[&std::ffi::OsStr]) -> Output {
    tool("ds-validate")
        .args([std::ffi::OsStr::new("--in"), os(snapshot)])
        .args(extra)
        .run()
}

fn shardify(snapshot: &Path, out: &Path, splits: &[&str]) -> Output {
    let mut run = tool("shardify").args([
        "--in".as_ref(),
        os(snapshot),
        "--out".as_ref(),
        os(out),
        "--seed".as_ref(),
        std::ffi::OsStr::new("1"),
    ]);
    for split in splits {
        run = run.args(["--split", split]);
    }
    run.run()
}

const GOOD_SPLITS: [&str; 2] = ["train=day < 2026-08-01", "test=day >= 2026-08-01"];

// 1. Atomic writes replace only regular files.

#[test]
fn profile_out_through_a_symlink_writes_the_target_and_keeps_the_link() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    std::fs::create_dir(dir.path().join("real")).unwrap();
    let target = dir.path().join("real/profile.json");
    std::fs::write(&target, "old").unwrap();
    let link = dir.path().join("profile.json");
    std::os::unix::fs::symlink("real/profile.json", &link).unwrap();
    let out = ds_validate(&snapshot, &["--profile-out".as_ref(), os(&link)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link must stay a link"
    );
    let profile: Value = serde_json::from_slice(&std::fs::read(&target).unwrap()).unwrap();
    assert_eq!(profile["rows"], 40, "{profile}");
    assert_eq!(
        std::fs::read_dir(dir.path().join("real")).unwrap().count(),
        1
    );
}

#[test]
fn profile_out_on_a_fifo_is_refused_and_the_fifo_stays() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let fifo = dir.path().join("profile.json");
    mkfifo(&fifo);
    let out = ds_validate(&snapshot, &["--profile-out".as_ref(), os(&fifo)]);
    out.assert_bad_input("ds-validate", &format!("{}: is a FIFO", fifo.display()));
    assert!(is_fifo(&fifo), "the FIFO was replaced");
}

#[test]
fn profile_out_through_a_symlink_to_a_fifo_is_refused_like_dev_null() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let fifo = dir.path().join("null");
    mkfifo(&fifo);
    let link = dir.path().join("profile.json");
    std::os::unix::fs::symlink(&fifo, &link).unwrap();
    let out = ds_validate(&snapshot, &["--profile-out".as_ref(), os(&link)]);
    out.assert_bad_input("ds-validate", "is a FIFO");
    assert!(is_fifo(&fifo));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

// 2. Two splits of one name.

#[test]
fn duplicate_split_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let out = shardify(
        &snapshot,
        &dir.path().join("shards"),
        &["train=day < 2026-08-01", "train=day >= 2026-08-01"],
    );
    out.assert_bad_input("shardify", "split `train` is given twice");
    assert!(!dir.path().join("shards/index.json").exists());
}

#[test]
fn split_names_that_are_not_folder_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let out = shardify(
        &snapshot,
        &dir.path().join("shards"),
        &["../escape=day < 2026-08-01", "test=day >= 2026-08-01"],
    );
    out.assert_bad_input("shardify", "split `../escape`");
    assert!(!dir.path().join("escape").exists());
}

// 3. An empty snapshot proves nothing.

#[test]
fn header_only_csv_is_refused_by_ds_validate() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("empty.csv");
    std::fs::write(&snapshot, "id,day,x,churned\n").unwrap();
    let out = ds_validate(&snapshot, &[]);
    out.assert_bad_input(
        "ds-validate",
        &format!("{}: has no data rows", snapshot.display()),
    );
}

#[test]
fn header_only_csv_is_refused_by_shardify() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("empty.csv");
    std::fs::write(&snapshot, "id,day,x,churned\n").unwrap();
    shardify(&snapshot, &dir.path().join("shards"), &GOOD_SPLITS)
        .assert_bad_input("shardify", "has no data rows");
}

// 4. Records that are not what they claim.

fn worked_case() -> Value {
    serde_json::from_str(&std::fs::read_to_string("testdata/gate/worked-case.json").unwrap())
        .unwrap()
}

#[test]
fn a_string_manifest_is_refused_by_gate() {
    let mut record = worked_case();
    record["manifest"] = json!("churn");
    let out = tool("gate").stdin(record.to_string()).run();
    out.assert_bad_input("gate", "manifest: must be an object");
}

#[test]
fn a_string_manifest_is_refused_by_register() {
    let dir = tempfile::tempdir().unwrap();
    let record = json!({"manifest": "churn", "manifest_hash": "ab", "gate": {"passed": true},
                        "train": {"weights": "m.safetensors", "weights_blake3": "cd"}});
    let out = tool("register")
        .args(["--registry".as_ref(), os(&dir.path().join("registry"))])
        .args(["--name", "churn"])
        .stdin(record.to_string())
        .run();
    out.assert_bad_input("register", "manifest: must be an object");
    assert!(!dir.path().join("registry").exists());
}

#[test]
fn noise_floor_refuses_a_record_without_manifest_hash() {
    let line = |hash: Option<&str>, auc: f64| {
        let mut record = json!({"evaluate": {"overall": {"auc": auc}}});
        if let Some(hash) = hash {
            record["manifest_hash"] = json!(hash);
        }
        record.to_string()
    };
    let input = [
        line(Some("aa"), 0.86),
        line(None, 0.87),
        line(Some("aa"), 0.88),
    ]
    .join("\n");
    let out = tool("noise-floor")
        .args(["--metric", "evaluate.overall.auc"])
        .stdin(input)
        .run();
    out.assert_bad_input("noise-floor", "record 2: manifest_hash: is missing");
    let input = [line(None, 0.86), line(None, 0.87)].join("\n");
    let out = tool("noise-floor")
        .args(["--metric", "evaluate.overall.auc"])
        .stdin(input)
        .run();
    out.assert_bad_input("noise-floor", "record 1: manifest_hash: is missing");
}

#[test]
fn gate_without_gates_says_none_ran_and_warns() {
    let record = json!({
        "manifest": {"run_id": "r"},
        "evaluate": {"overall": {"auc": 0.5, "rows": 1000}, "slices": {}},
        "baseline": {"overall": {"auc": 0.99, "rows": 1000}, "slices": {}},
    });
    let out = tool("gate").stdin(record.to_string()).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["gate"]["gates_run"], json!([]));
    assert!(
        out.stderr.contains("warning: no gate ran"),
        "{}",
        out.stderr
    );
}

#[test]
fn gate_names_the_gates_it_ran() {
    let record = json!({
        "manifest": {"run_id": "r", "eval": {"gates": {"auc_min_delta": -0.01}}},
        "evaluate": {"overall": {"auc": 0.5, "rows": 1000}, "slices": {}},
        "baseline": {"overall": {"auc": 0.99, "rows": 1000}, "slices": {}},
    });
    let out = tool("gate").stdin(record.to_string()).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.json()["gate"]["gates_run"], json!(["auc_min_delta"]));
    assert!(!out.stderr.contains("no gate ran"), "{}", out.stderr);
}

// 5. Numbers out of any sane range.

#[test]
fn ckpt_interval_refuses_an_mtbf_beyond_any_job() {
    let out = tool("ckpt-interval")
        .args(["--cost", "90", "--mtbf", "1e308"])
        .run();
    out.assert_bad_input("ckpt-interval", "--mtbf: 1e308 s is outside the sane range");
}

#[test]
fn ckpt_interval_refuses_a_subnormal_step_time() {
    let out = tool("ckpt-interval")
        .args(["--cost", "90", "--mtbf", "43200", "--step-time", "1e-320"])
        .run();
    out.assert_bad_input("ckpt-interval", "--step-time: ");
}

#[test]
fn ckpt_interval_results_are_finite_at_the_edges_of_the_range() {
    for args in [
        ["--cost", "1e12", "--mtbf", "1e-6", "--step-time", "1e-6"],
        ["--cost", "1e-6", "--mtbf", "1e12", "--step-time", "1e-6"],
    ] {
        let out = tool("ckpt-interval").args(args).run();
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        let section = &out.json()["ckpt_interval"];
        for key in [
            "young_s",
            "daly_s",
            "interval_s",
            "overhead_fraction",
            "expected_waste_fraction",
        ] {
            assert!(section[key].is_f64(), "{args:?}: {key} in {section}");
        }
        assert!(section["interval_steps"].as_u64().is_some(), "{section}");
        assert!(!out.stderr.contains("NaN"), "{}", out.stderr);
    }
}

#[test]
fn ckpt_interval_refuses_a_node_mtbf_that_leaves_the_range() {
    let out = tool("ckpt-interval")
        .args(["--cost", "90", "--node-mtbf", "1", "--nodes", "100000000"])
        .run();
    out.assert_bad_input("ckpt-interval", "--node-mtbf");
}

fn manifest_with(from: &str, to: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string("testdata/demo/manifest.yaml").unwrap();
    assert!(text.contains(from), "{from}");
    let path = dir.path().join("manifest.yaml");
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    (dir, path)
}

#[test]
fn mf_hash_refuses_a_number_that_overflows_a_float() {
    let (_dir, path) = manifest_with("lr: 0.003", "lr: 1e400");
    let out = tool("mf-hash").args([os(&path)]).run();
    out.assert_bad_input("mf-hash", "config.lr: line 15: `1e400` is beyond the range");
}

#[test]
fn mf_hash_refuses_deep_nesting_at_once() {
    // 100,000 brackets (200 KB) took over ten minutes when every node rebuilt its path.
    let deep = format!("lr: {}{}", "[".repeat(100_000), "]".repeat(100_000));
    let (_dir, path) = manifest_with("lr: 0.003", &deep);
    let started = Instant::now();
    let out = tool("mf-hash").args([os(&path)]).run();
    out.assert_bad_input("mf-hash", "nested more than 64 levels deep");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn mf_hash_refuses_an_explicit_tag() {
    let (_dir, path) = manifest_with("lr: 0.003", "lr: !!str 0.003");
    let out = tool("mf-hash").args([os(&path)]).run();
    out.assert_bad_input(
        "mf-hash",
        "config.lr: line 15: the YAML tag `!!str` is not allowed",
    );
    let (_dir, path) = manifest_with("seed: 7", "seed: !!int 7");
    tool("mf-hash")
        .args([os(&path)])
        .run()
        .assert_bad_input("mf-hash", "seed: ");
}

#[test]
fn mf_hash_keeps_a_quoted_big_exponent_as_a_string() {
    let (_dir, path) = manifest_with("run_id: churn-demo", "run_id: \"1e400\"");
    let out = tool("mf-hash").args([os(&path)]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json()["manifest"]["run_id"], "1e400");
}

#[test]
fn evaluate_bootstrap_has_an_upper_bound() {
    let out = tool("evaluate").args(["--bootstrap", "100000000000"]).run();
    out.assert_bad_input("evaluate", "--bootstrap");
    assert!(out.stderr.contains("0..=100000"), "{}", out.stderr);
}

// 6. A FIFO among the snapshot's files.

#[test]
fn a_fifo_in_the_snapshot_is_refused_by_ds_validate_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("lake");
    std::fs::create_dir(&snapshot).unwrap();
    std::fs::rename(small_csv(dir.path()), snapshot.join("a.csv")).unwrap();
    mkfifo(&snapshot.join("b.csv"));
    let out = run_with_limit(
        "ds-validate",
        &["--in".as_ref(), os(&snapshot)],
        Duration::from_secs(30),
    )
    .expect("ds-validate hung on the FIFO");
    out.assert_bad_input("ds-validate", "b.csv: is a FIFO, not a regular file");
}

#[test]
fn a_fifo_in_the_snapshot_is_refused_by_the_data_digest() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("lake");
    std::fs::create_dir(&snapshot).unwrap();
    std::fs::rename(small_csv(dir.path()), snapshot.join("a.csv")).unwrap();
    mkfifo(&snapshot.join("b.csv"));
    let out = tool("mf-hash")
        .args([
            "testdata/demo/manifest.yaml".as_ref(),
            "--data-digest".as_ref(),
            os(&snapshot),
        ])
        .run();
    out.assert_bad_input("mf-hash", "b.csv: is a FIFO, not a regular file");
}

// 7. A failed rerun keeps the good output.

#[test]
fn a_failed_shardify_rerun_keeps_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let out_dir = dir.path().join("shards");
    let good = shardify(&snapshot, &out_dir, &GOOD_SPLITS);
    assert_eq!(good.code, 0, "{}", good.stderr);
    let index = std::fs::read(out_dir.join("index.json")).unwrap();
    // Rows of August fall in both splits: found only while reading.
    let bad = shardify(
        &snapshot,
        &out_dir,
        &["train=day < 2026-08-15", "test=day >= 2026-08-01"],
    );
    bad.assert_bad_input("shardify", "falls in both splits `train` and `test`");
    assert_eq!(
        std::fs::read(out_dir.join("index.json")).unwrap(),
        index,
        "index.json must be untouched"
    );
    let leaks = tool("leak-check")
        .args(["--shards".as_ref(), os(&out_dir)])
        .stdin(json!({"manifest": {"data": {"entity": "id"}}}).to_string())
        .run();
    assert_ne!(
        leaks.code, 2,
        "the old shards must still read: {}",
        leaks.stderr
    );
}

// 8. Exit 2 leaves nothing behind, and reading creates nothing.

#[test]
fn a_bad_previous_profile_leaves_no_profile_file() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let previous = dir.path().join("previous.json");
    std::fs::write(&previous, "{\"not\": \"a profile\"}").unwrap();
    let profile = dir.path().join("out/profile.json");
    let out = ds_validate(
        &snapshot,
        &[
            "--previous".as_ref(),
            os(&previous),
            "--profile-out".as_ref(),
            os(&profile),
        ],
    );
    out.assert_bad_input("ds-validate", "previous.json");
    assert!(!profile.exists(), "profile written despite exit 2");
}

#[test]
fn a_bad_explained_file_leaves_no_profile_file() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let explained = dir.path().join("explained.json");
    std::fs::write(&explained, "[{\"column\": 1}]").unwrap();
    let profile = dir.path().join("profile.json");
    let out = ds_validate(
        &snapshot,
        &[
            "--explained".as_ref(),
            os(&explained),
            "--profile-out".as_ref(),
            os(&profile),
        ],
    );
    out.assert_bad_input("ds-validate", "explained.json");
    assert!(!profile.exists(), "profile written despite exit 2");
}

#[test]
fn reading_a_registry_that_does_not_exist_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("registry");
    for command in [
        vec!["verify"],
        vec!["list"],
        vec!["list", "churn"],
        vec!["resolve", "churn@prod"],
        vec!["show", "churn", "1"],
        vec!["history", "churn"],
        vec!["alias", "churn@prod", "1", "--reason", "x"],
    ] {
        let out = tool("register")
            .args(["--registry".as_ref(), os(&registry)])
            .args(&command)
            .run();
        out.assert_bad_input(
            "register",
            &format!("no registry at {}", registry.display()),
        );
        assert!(
            !registry.exists(),
            "{command:?} created {}",
            registry.display()
        );
    }
}

#[test]
fn evaluate_with_a_missing_registry_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let registry = dir.path().join("registry");
    let out = tool("evaluate")
        .args(["--registry".as_ref(), os(&registry)])
        .args(["--model", "churn@prod"])
        .stdin(json!({"manifest": {"seed": 1}}).to_string())
        .run();
    out.assert_bad_input(
        "evaluate",
        &format!("no registry at {}", registry.display()),
    );
    assert!(!registry.exists());
}

// 9. Messages that name what is wrong.

#[test]
fn a_ragged_csv_row_is_named_by_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("ragged.csv");
    std::fs::write(&snapshot, "a,b\n1,2\n3,4\n5,6\n7,8\n9\n11,12\n").unwrap();
    ds_validate(&snapshot, &[]).assert_bad_input(
        "ds-validate",
        "ragged.csv: ragged CSV: data row 5 (line 6) has 1 fields, the header has 2",
    );
}

#[test]
fn a_bad_json_lines_line_is_named_by_its_number() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("rows.jsonl");
    std::fs::write(
        &snapshot,
        "{\"a\": 1}\n{\"a\": 2}\n{\"a\": 3,\n{\"a\": 4}\n",
    )
    .unwrap();
    ds_validate(&snapshot, &[])
        .assert_bad_input("ds-validate", "rows.jsonl: line 3: not valid JSON");
}

#[test]
fn an_output_under_a_regular_file_names_that_file() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let blocker = dir.path().join("runs");
    std::fs::write(&blocker, "").unwrap();
    let message = format!("`{}` is a file, not a folder", blocker.display());
    shardify(&snapshot, &blocker.join("shards"), &GOOD_SPLITS)
        .assert_bad_input("shardify", &message);
    ds_validate(
        &snapshot,
        &[
            "--profile-out".as_ref(),
            os(&blocker.join("p/profile.json")),
        ],
    )
    .assert_bad_input("ds-validate", &message);
    ds_validate(
        &snapshot,
        &["--profile-out".as_ref(), os(&blocker.join("profile.json"))],
    )
    .assert_bad_input("ds-validate", &message);
}

#[test]
fn a_negative_seed_is_called_negative_not_missing() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let out = tool("shardify")
        .args(["--in".as_ref(), os(&snapshot)])
        .args(["--out".as_ref(), os(&dir.path().join("shards"))])
        .args(["--split", GOOD_SPLITS[0], "--split", GOOD_SPLITS[1]])
        .stdin(json!({"manifest": {"seed": -3}}).to_string())
        .run();
    out.assert_bad_input(
        "shardify",
        "manifest.seed: must be a non-negative integer, got -3",
    );
}

const TOOLS: [&str; 12] = [
    "ckpt-interval",
    "demo-data",
    "ds-validate",
    "evaluate",
    "gate",
    "leak-check",
    "mf-hash",
    "noise-floor",
    "register",
    "report",
    "shardify",
    "train",
];

#[test]
fn usage_errors_are_one_line_with_the_tool_name() {
    for name in TOOLS {
        let out = tool(name).args(["--no-such-flag"]).run();
        out.assert_bad_input(name, "'--no-such-flag'");
        assert_eq!(out.stderr.lines().count(), 1, "{name}: {}", out.stderr);
    }
    tool("shardify")
        .args(["--shard-rows", "0"])
        .run()
        .assert_bad_input("shardify", "--shard-rows");
}

#[test]
fn help_and_version_go_to_stdout_with_exit_0() {
    for name in TOOLS {
        let help = tool(name).args(["--help"]).run();
        assert_eq!(help.code, 0, "{name}: {}", help.stderr);
        assert!(help.stdout.contains("Usage:"), "{name}: {}", help.stdout);
        let version = tool(name).args(["--version"]).run();
        assert_eq!(version.code, 0, "{name}");
        assert!(
            version.stdout.starts_with(name),
            "{name}: {}",
            version.stdout
        );
    }
}

// The README's other promises of exit 2.

#[test]
fn a_record_with_a_failed_earlier_check_is_refused() {
    let mut record = worked_case();
    record["validate"] = json!({"passed": false});
    tool("gate")
        .stdin(record.to_string())
        .run()
        .assert_bad_input("gate", "an earlier check failed (validate)");
}

#[test]
fn mf_hash_refuses_what_cannot_be_hashed_exactly() {
    for (from, to, message) in [
        ("seed: 7", "seed: 7\nseed: 8", "duplicate key `seed`"),
        ("lr: 0.003", "lr: .nan", "not a finite number"),
        ("seed: 7", "seed: 7\n1: one", "string key"),
        ("lr: 0.003", "lr: [0.003", "manifest.yaml: "),
        ("seed: 7", "seed: !custom 7", "the YAML tag `!custom`"),
    ] {
        let (_dir, path) = manifest_with(from, to);
        tool("mf-hash")
            .args([os(&path)])
            .run()
            .assert_bad_input("mf-hash", message);
    }
    // Integers beyond 2^53 are a lint problem (bad input too), named by field.
    let (_dir, path) = manifest_with("seed: 7", "seed: 9007199254740993");
    let out = tool("mf-hash").args([os(&path)]).run();
    out.assert_bad_input("mf-hash", "seed: ");
}

#[test]
fn ds_validate_refuses_a_label_the_snapshot_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let profile = dir.path().join("profile.json");
    let out = tool("ds-validate")
        .args(["--in".as_ref(), os(&snapshot)])
        .args(["--profile-out".as_ref(), os(&profile)])
        .stdin(json!({"manifest": {"data": {"label": "nope"}}}).to_string())
        .run();
    out.assert_bad_input("ds-validate", "nope");
    assert!(!profile.exists());
}

#[test]
fn ckpt_interval_refuses_zero_negative_nan_and_missing_values() {
    for (args, message) in [
        (
            vec!["--cost", "0", "--mtbf", "43200"],
            "--cost: must be a positive",
        ),
        (
            vec!["--cost", "-1", "--mtbf", "43200"],
            "--cost: must be a positive",
        ),
        (
            vec!["--cost", "nan", "--mtbf", "43200"],
            "--cost: must be a positive",
        ),
        (
            vec!["--cost", "90", "--mtbf", "inf"],
            "--mtbf: must be a positive number of seconds, got inf",
        ),
        (
            vec!["--cost", "90", "--mtbf", "43200", "--restart", "-5"],
            "--restart: ",
        ),
        (vec!["--cost", "90"], "--mtbf: is missing"),
        (vec!["--mtbf", "43200"], "--cost: is missing"),
    ] {
        tool("ckpt-interval")
            .args(&args)
            .run()
            .assert_bad_input("ckpt-interval", message);
    }
}

#[test]
fn noise_floor_refuses_one_value_and_a_missing_metric() {
    tool("noise-floor")
        .args(["--values", "0.86"])
        .run()
        .assert_bad_input("noise-floor", "values");
    let input = [
        json!({"manifest_hash": "aa", "evaluate": {"overall": {"auc": 0.86}}}).to_string(),
        json!({"manifest_hash": "aa", "evaluate": {"overall": {}}}).to_string(),
    ]
    .join("\n");
    tool("noise-floor")
        .args(["--metric", "evaluate.overall.auc"])
        .stdin(input)
        .run()
        .assert_bad_input("noise-floor", "record 2: evaluate.overall.auc");
}

#[test]
fn evaluate_refuses_a_record_without_a_model() {
    tool("evaluate")
        .stdin(json!({"manifest": {"seed": 1}}).to_string())
        .run()
        .assert_bad_input("evaluate", "--model");
}

#[test]
fn gate_refuses_a_gate_that_is_not_a_number() {
    tool("gate")
        .args(["--gate", "auc_min_delta=abc"])
        .stdin(worked_case().to_string())
        .run()
        .assert_bad_input("gate", "--gate");
}

#[test]
fn register_refuses_a_name_that_is_not_safe() {
    let dir = tempfile::tempdir().unwrap();
    tool("register")
        .args(["--registry".as_ref(), os(&dir.path().join("registry"))])
        .args(["resolve", "../churn@prod"])
        .run()
        .assert_bad_input(
            "register",
            "name `../churn`: must match [a-z0-9][a-z0-9._-]*",
        );
    let record = json!({"manifest": {}, "manifest_hash": "ab", "gate": {"passed": true},
                        "train": {"weights": "w.safetensors", "weights_blake3": "cd"}});
    tool("register")
        .args(["--registry".as_ref(), os(&dir.path().join("registry"))])
        .args(["--name", "../x"])
        .stdin(record.to_string())
        .run()
        .assert_bad_input("register", "--name `../x`: must match");
    assert!(!dir.path().join("registry").exists());
}

#[test]
fn leak_check_refuses_a_snapshot_that_is_not_there() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere.csv");
    tool("leak-check")
        .args(["--in".as_ref(), os(&missing)])
        .stdin(json!({"manifest": {"data": {"splits": {"train": "hash(id) < 0.5", "test": "hash(id) >= 0.5"}}}}).to_string())
        .run()
        .assert_bad_input("leak-check", "nowhere.csv");
}

/// The telco table (testdata/real/telco) copied into `dir/snapshot` with `edit` applied to the
/// `monthly_charges` field of each data row (by row number from 0), and its manifest without the
/// pin, as `dir/manifest.yaml`; the tools run in `dir`.
fn telco_with_charges(dir: &Path, edit: &dyn Fn(usize, &str) -> String) -> PathBuf {
    let root = crate::util::testdata("real/telco");
    let text = std::fs::read_to_string(root.join("snapshot/telco.csv")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let column = header
        .split(',')
        .position(|h| h == "monthly_charges")
        .unwrap();
    let mut out = format!("{header}\n");
    for (row, line) in lines.enumerate() {
        let mut fields: Vec<String> = line.split(',').map(str::to_string).collect();
        fields[column] = edit(row, &fields[column]);
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    std::fs::create_dir_all(dir.join("snapshot")).unwrap();
    std::fs::write(dir.join("snapshot/telco.csv"), out).unwrap();
    let manifest = std::fs::read_to_string(root.join("manifest.yaml"))
        .unwrap()
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("snapshot:") {
                "  snapshot: ./snapshot@snapshot=telco-edited".to_string()
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let path = dir.join("manifest.yaml");
    std::fs::write(&path, manifest + "\n").unwrap();
    path
}

fn stage_in(dir: &Path, name: &str, args: &[&str], stdin: &str) -> Output {
    tool(name)
        .current_dir(dir)
        .args(args)
        .args(["-q"])
        .stdin(stdin.as_bytes().to_vec())
        .run()
}

/// Two in a hundred `monthly_charges` of a real table are `inf`, `-inf` or `1e400`: the column
/// stays numeric and validation stops on its bad values, naming it. Before, type inference voted
/// the infinities out, the column became text and the model learned each charge as a category,
/// with exit 0.
#[test]
fn infinities_in_a_numeric_feature_stop_validation_instead_of_making_it_text() {
    let dir = tempfile::tempdir().unwrap();
    let infinities = ["inf", "-inf", "1e400", "-Infinity"];
    let manifest = telco_with_charges(dir.path(), &|row, value| {
        if row % 50 == 3 {
            infinities[row / 50 % 4].to_string()
        } else {
            value.to_string()
        }
    });
    let hashed = stage_in(
        dir.path(),
        "mf-hash",
        &[manifest.to_str().unwrap(), "--data-digest", "snapshot"],
        "",
    );
    assert_eq!(hashed.code, 0, "{}", hashed.stderr);
    let validated = stage_in(dir.path(), "ds-validate", &[], &hashed.stdout);
    assert_eq!(validated.code, 1, "{}", validated.stderr);
    let section = &validated.json()["validate"];
    let failed: Vec<(String, String)> = crate::util::failed_checks(section)
        .into_iter()
        .map(|check| {
            (
                check["name"].as_str().unwrap_or("").to_string(),
                check["column"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert!(
        failed.contains(&("bad_values".to_string(), "monthly_charges".to_string())),
        "{failed:?}"
    );
    assert!(
        validated.stderr.contains("monthly_charges"),
        "{}",
        validated.stderr
    );
    let column = &section["profile"]["columns"]["monthly_charges"];
    assert_eq!(column["type"], "float64", "{column}");
}

/// Four `monthly_charges` of 1e300 in a real table: their squares overflow a float, and the
/// deviation the model standardizes with was written as `null` (train exit 0), which evaluate
/// then blamed on the model file. Now the deviation is finite and the chain scores the model.
#[test]
fn huge_values_in_a_feature_give_a_finite_deviation_and_a_model_evaluate_reads() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = telco_with_charges(dir.path(), &|row, value| {
        if [10, 2000, 4000, 6000].contains(&row) {
            "1e300".to_string()
        } else {
            value.to_string()
        }
    });
    let mut record = String::new();
    for (name, args) in [
        (
            "mf-hash",
            vec![manifest.to_str().unwrap(), "--data-digest", "snapshot"],
        ),
        ("ds-validate", vec![]),
        ("leak-check", vec![]),
        ("shardify", vec!["--out", "shards"]),
        ("train", vec!["--out", "train", "--threads", "1"]),
        ("evaluate", vec![]),
    ] {
        let out = stage_in(dir.path(), name, &args, &record);
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        record = out.stdout;
    }
    let record: Value = serde_json::from_str(&record).unwrap();
    let weights = dir
        .path()
        .join(record["train"]["weights"].as_str().unwrap());
    let preprocess = crate::real_data::model_preprocessing(weights.to_str().unwrap());
    let charges = preprocess["numeric"]
        .as_array()
        .unwrap()
        .iter()
        .find(|feature| feature["name"] == "monthly_charges")
        .unwrap()
        .clone();
    let std = charges["std"].as_f64().unwrap_or(f64::NAN);
    assert!(std.is_finite() && std > 1e297, "{charges}");
    assert!(record["evaluate"]["overall"]["auc"].as_f64().is_some());
}

/// 1e308 and -1e308 are finite; their range is not. It was written as `"floor": null` with exit 0.
#[test]
fn noise_floor_refuses_values_whose_spread_overflows() {
    let out = tool("noise-floor")
        .args(["--values=1e308,-1e308", "--metric", "evaluate.overall.auc"])
        .stdin(worked_case().to_string())
        .run();
    out.assert_bad_input("noise-floor", "their mean or spread overflows a float");
}

/// `mf-hash pin --out` where nothing can be written: exit 2, and no listing left beside the
/// snapshot (it was written first, then the manifest failed).
#[test]
fn mf_hash_pin_to_an_unwritable_out_writes_nothing() {
    let (dir, manifest) = manifest_with("snapshot: ", "snapshot: ");
    let snapshot = dir.path().join("snap");
    std::fs::create_dir(&snapshot).unwrap();
    small_csv(&snapshot);
    let listing = dir.path().join("snap.pin.json");
    let out = tool("mf-hash")
        .current_dir(dir.path())
        .args(["pin", manifest.to_str().unwrap(), "--snapshot", "snap"])
        .args(["--out", "/proc/pinned.yaml"])
        .run();
    out.assert_bad_input("mf-hash", "/proc/pinned.yaml");
    assert!(!listing.exists(), "{}", listing.display());
    // The same pin to a folder that can be written leaves both files.
    let out = tool("mf-hash")
        .current_dir(dir.path())
        .args(["pin", manifest.to_str().unwrap(), "--snapshot", "snap"])
        .args(["--out", "pinned.yaml", "-q"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(listing.exists() && dir.path().join("pinned.yaml").exists());
}

/// An earlier stage whose `passed` is not a boolean is refused, naming the field: `0`, `"false"`
/// and `null` read as "not false" and let a failed stage through.
#[test]
fn a_passed_that_is_not_a_boolean_is_refused() {
    for passed in [json!(0), json!("false"), json!(null)] {
        let mut record = worked_case();
        record["validate"] = json!({ "passed": passed });
        let out = tool("ckpt-interval")
            .args(["--cost", "90", "--mtbf", "43200", "--step-time", "0.4"])
            .stdin(record.to_string())
            .run();
        out.assert_bad_input("ckpt-interval", "validate.passed: must be true or false");
    }
}

/// Side files read without a bound: `/dev/zero` as a baseline record or a previous profile grew
/// the tool until the kernel killed it. Each is refused at once, naming the file and what it is.
#[test]
fn side_files_that_are_devices_are_refused_without_reading_them() {
    let out = run_with_limit(
        "gate",
        &[
            "--baseline".as_ref(),
            "/dev/zero".as_ref(),
            "--record".as_ref(),
            "testdata/gate/worked-case.json".as_ref(),
        ],
        Duration::from_secs(30),
    )
    .expect("gate read /dev/zero without end");
    out.assert_bad_input(
        "gate",
        "/dev/zero: is a character device, not a regular file",
    );
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("lake");
    std::fs::create_dir(&snapshot).unwrap();
    std::fs::rename(small_csv(dir.path()), snapshot.join("a.csv")).unwrap();
    let out = run_with_limit(
        "ds-validate",
        &[
            "--in".as_ref(),
            os(&snapshot),
            "--previous".as_ref(),
            "/dev/zero".as_ref(),
        ],
        Duration::from_secs(30),
    )
    .expect("ds-validate read /dev/zero without end");
    out.assert_bad_input(
        "ds-validate",
        "/dev/zero: is a character device, not a regular file",
    );
}

/// A snapshot's listing (`<snapshot>.pin.json`) that is a FIFO: verifying a pinned snapshot
/// that moved read it and blocked in `open` for ever. Now refused, naming it.
#[test]
fn a_fifo_as_the_snapshot_listing_is_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("snap");
    std::fs::create_dir(&snapshot).unwrap();
    small_csv(&snapshot);
    let (_manifest_dir, manifest) = manifest_with(
        "./runs/demo/snapshot@snapshot=demo-seed7-200k",
        &format!("{}@blake3:{}", snapshot.display(), "0".repeat(64)),
    );
    mkfifo(&dir.path().join("snap.pin.json"));
    let out = run_with_limit(
        "mf-hash",
        &[os(&manifest), "--data-digest".as_ref(), os(&snapshot)],
        Duration::from_secs(30),
    )
    .expect("mf-hash blocked on the FIFO listing");
    out.assert_bad_input("mf-hash", "snap.pin.json: is a FIFO, not a regular file");
}

// Shard paths are confined to the index's folder, and only regular files are opened.

/// The small snapshot sharded into `dir/shards`, and its index as JSON.
fn sharded(dir: &Path) -> (PathBuf, Value) {
    let snapshot = small_csv(dir);
    let out = dir.join("shards");
    let good = shardify(&snapshot, &out, &GOOD_SPLITS);
    assert_eq!(good.code, 0, "{}", good.stderr);
    let index = serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    (out, index)
}

fn leak_check_shards(shards: &Path) -> Option<Output> {
    run_with_limit_and_stdin(
        "leak-check",
        &["--shards".as_ref(), os(shards)],
        json!({"manifest": {"data": {"entity": "id"}}})
            .to_string()
            .as_bytes(),
        Duration::from_secs(20),
    )
}

#[test]
fn an_index_naming_a_path_outside_its_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (out, index) = sharded(dir.path());
    let first = index["splits"]["train"]["shards"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::copy(out.join(&first), dir.path().join("outside.parquet")).unwrap();
    for bad in [
        "../outside.parquet".to_string(),
        dir.path().join("outside.parquet").display().to_string(),
        format!("train/../../{first}"),
        String::new(),
    ] {
        let mut edited = index.clone();
        edited["splits"]["train"]["shards"][0]["path"] = json!(bad);
        std::fs::write(out.join("index.json"), edited.to_string()).unwrap();
        leak_check_shards(&out)
            .expect("ends")
            .assert_bad_input("leak-check", "which is not a path inside the shard folder");
    }
}

#[test]
fn a_shard_that_is_a_link_a_device_or_a_fifo_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let (out, index) = sharded(dir.path());
    let first = index["splits"]["train"]["shards"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let shard = out.join(&first);
    let kept = dir.path().join("kept.parquet");
    std::fs::rename(&shard, &kept).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &shard).unwrap();
    leak_check_shards(&out)
        .expect("ends without reading /dev/zero")
        .assert_bad_input(
            "leak-check",
            "is a symbolic link; a shard must be a regular file",
        );
    std::fs::remove_file(&shard).unwrap();
    std::os::unix::fs::symlink(&kept, &shard).unwrap();
    leak_check_shards(&out)
        .expect("ends")
        .assert_bad_input("leak-check", "is a symbolic link");
    std::fs::remove_file(&shard).unwrap();
    mkfifo(&shard);
    leak_check_shards(&out)
        .expect("ends without blocking on the FIFO")
        .assert_bad_input("leak-check", "is a FIFO; a shard must be a regular file");
    std::fs::remove_file(&shard).unwrap();
    std::fs::rename(&kept, &shard).unwrap();
    assert_ne!(leak_check_shards(&out).expect("ends").code, 2, "restored");
}

#[test]
fn split_rules_read_quotes_before_operators() {
    // A category holding `==`, a column whose name has a space.
    let dir = tempfile::tempdir().unwrap();
    let mut text = String::from("id,home region,churned\n");
    for i in 0..30 {
        let region = ["a==b", "north", "in (x)"][i % 3];
        text.push_str(&format!("C{i},\"{region}\",{}\n", i % 2));
    }
    let snapshot = dir.path().join("snap.csv");
    std::fs::write(&snapshot, text).unwrap();
    let out = dir.path().join("shards");
    let sharded = shardify(
        &snapshot,
        &out,
        &[
            r#"train=`home region` != "a==b""#,
            r#"test="home region" in ("a==b")"#,
        ],
    );
    assert_eq!(sharded.code, 0, "{}", sharded.stderr);
    let index: Value =
        serde_json::from_slice(&std::fs::read(out.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["splits"]["train"]["rows"], 20, "{index}");
    assert_eq!(index["splits"]["test"]["rows"], 10, "{index}");
}

#[test]
fn a_rerun_removes_what_a_killed_shardify_left_and_two_at_once_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = small_csv(dir.path());
    let out = dir.path().join("shards");
    // What a shardify killed mid-run leaves: a spill folder, a part and an index not renamed.
    std::fs::create_dir_all(out.join(".shardify-spillX1/")).unwrap();
    std::fs::write(out.join(".shardify-spillX1/slot-3.arrows"), vec![7u8; 4096]).unwrap();
    std::fs::create_dir_all(out.join("train")).unwrap();
    std::fs::write(out.join("train/.part.tmpK2"), b"PAR1").unwrap();
    std::fs::write(out.join(".index.json.tmpP3"), b"{").unwrap();
    let good = shardify(&snapshot, &out, &GOOD_SPLITS);
    assert_eq!(good.code, 0, "{}", good.stderr);
    for left in [
        ".shardify-spillX1",
        "train/.part.tmpK2",
        ".index.json.tmpP3",
    ] {
        assert!(!out.join(left).exists(), "{left} is still there");
    }
    // While one shardify holds the folder, another is refused and changes nothing.
    let index = std::fs::read(out.join("index.json")).unwrap();
    let held = std::fs::File::open(out.join(".shardify.lock")).unwrap();
    held.lock().unwrap();
    shardify(&snapshot, &out, &GOOD_SPLITS)
        .assert_bad_input("shardify", "another shardify is writing to this folder");
    assert_eq!(std::fs::read(out.join("index.json")).unwrap(), index);
    drop(held);
    assert_eq!(shardify(&snapshot, &out, &GOOD_SPLITS).code, 0);
}

#[test]
fn a_repeated_yaml_key_is_named_at_the_key() {
    let (_dir, path) = manifest_with("lr: 0.003", "lr: 0.003, lr: 0.3");
    tool("mf-hash")
        .args([os(&path)])
        .run()
        .assert_bad_input("mf-hash", "config.lr: line 15: duplicate key `lr`");
}

#[test]
fn a_huge_name_is_not_echoed_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let name = "N".repeat(100_000);
    let out = tool("register")
        .args(["--registry".as_ref(), os(&dir.path().join("registry"))])
        .args(["resolve", &format!("{name}@prod")])
        .run();
    assert_eq!(out.code, 2, "{}", out.stderr.len());
    assert!(
        out.stderr.len() < 400,
        "{} bytes on stderr",
        out.stderr.len()
    );
    assert!(out.stderr.contains("(100000 characters)"), "{}", out.stderr);
}

#[test]
fn a_setting_s_error_names_its_field_once() {
    let typo = crate::train::edited(|r| r["manifest"]["config"]["max_step"] = 10.into());
    let dir = tempfile::tempdir().unwrap();
    let out = crate::train::train(&typo, &dir.path().join("run"), &[]);
    out.assert_bad_input(
        "train",
        "train: manifest.config.max_step: unknown setting (did you mean `max_steps`?)",
    );
}

/// One walk of a snapshot for the readers and the digest: job markers (`_SUCCESS`, a
/// `_temporary/` folder) and hidden files (`.crc`) are left out of both, at any depth, so the
/// digest changes only when the data read changes. The digest used to hash them while the
/// readers skipped them: a pinned snapshot "moved" when a job wrote a marker.
#[test]
fn the_digest_covers_exactly_the_files_the_readers_read() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("snap");
    std::fs::create_dir_all(snapshot.join("part=1")).unwrap();
    small_csv(&snapshot.join("part=1"));
    let digest = |path: &Path| {
        let out = tool("mf-hash")
            .args([
                "testdata/mf-hash/churn.yaml".as_ref(),
                "--data-digest".as_ref(),
                os(path),
            ])
            .args(["-q"])
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.json()["mf_hash"]["data_digest"].clone()
    };
    let rows = |path: &Path| {
        let out = tool("ds-validate")
            .args(["--in".as_ref(), os(path), "-q".as_ref()])
            .stdin(json!({"manifest": {"data": {"label": "churned"}}}).to_string())
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.json()["validate"]["profile"]["rows"].clone()
    };
    let (before, read_before) = (digest(&snapshot), rows(&snapshot));
    for marker in [
        "_SUCCESS",
        ".hidden.csv",
        "part=1/.snap.csv.crc",
        "part=1/_temporary/0/part-9.csv",
        "_logs/history.csv",
    ] {
        let path = snapshot.join(marker);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "id,day,x,churned\nX,2026-07-01,1,1\n").unwrap();
    }
    let after = digest(&snapshot);
    assert_eq!(after["digest"], before["digest"], "markers are not data");
    assert_eq!(
        (after["files"].clone(), rows(&snapshot)),
        (json!(1), read_before)
    );
    // A data file is data wherever it is.
    std::fs::write(
        snapshot.join("part=1/more.csv"),
        "id,day,x,churned\nY,2026-07-01,1,1\n",
    )
    .unwrap();
    assert_ne!(digest(&snapshot)["digest"], before["digest"]);
}

mod round_four;
