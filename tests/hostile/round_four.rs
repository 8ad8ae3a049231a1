//! The fourth hostile round: each test reproduces one finding of that round (its number in the
//! comment above it), and fails on the code before its fix.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use super::{is_fifo, mkfifo, os, run_with_limit_and_stdin};
use crate::train::{fixture, signal, start, train, wait_for_step};
use crate::util::{Output, python_stdout, tool, wait_within};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A model trained, evaluated and gated (no baseline) on the train fixture, once per test run:
/// the gated record (it names the weights file).
fn gated() -> &'static String {
    static GATED: OnceLock<String> = OnceLock::new();
    GATED.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        crate::register::gated_record(&dir)
    })
}

fn weights_of(record: &str) -> String {
    let record: Value = serde_json::from_str(record).unwrap();
    record["train"]["weights"].as_str().unwrap().to_string()
}

/// Runs `tool` with `args` and `stdin`, failing the test when it is still running after a
/// minute (a tool blocked on a FIFO).
fn within_a_minute(name: &str, args: &[&std::ffi::OsStr], stdin: &str) -> Output {
    run_with_limit_and_stdin(name, args, stdin.as_bytes(), Duration::from_secs(60))
        .unwrap_or_else(|| panic!("{name} {args:?} still ran after a minute (blocked?)"))
}

fn predict_into(out: &Path, model: &str, snapshot: &Path) -> Output {
    within_a_minute(
        "predict",
        &[
            "--model".as_ref(),
            model.as_ref(),
            "--in".as_ref(),
            os(snapshot),
            "--out".as_ref(),
            os(out),
            "-q".as_ref(),
        ],
        "",
    )
}

// 1. `predict --out` replaced a device, a FIFO, a socket or a symlink with a regular file.
#[test]
fn predict_out_refuses_special_files_and_writes_through_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = weights_of(gated());
    let snapshot = fixture().dir.join("snapshot");

    let fifo = d.join("fifo");
    mkfifo(&fifo);
    predict_into(&fifo, &model, &snapshot).assert_bad_input("predict", "is a FIFO");
    assert!(is_fifo(&fifo), "the FIFO stays a FIFO");

    let socket = d.join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    predict_into(&socket, &model, &snapshot).assert_bad_input("predict", "is a socket");
    assert!(
        std::fs::symlink_metadata(&socket)
            .unwrap()
            .file_type()
            .is_socket()
    );

    // A link to a device: the device is refused, and the link stays a link.
    let null = d.join("null.parquet");
    std::os::unix::fs::symlink("/dev/null", &null).unwrap();
    predict_into(&null, &model, &snapshot).assert_bad_input("predict", "a character device");
    assert!(
        std::fs::symlink_metadata(&null)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device()
    );

    // A link to a regular file: its target is written, 0644 as every output, the link kept.
    let target = d.join("target.parquet");
    std::fs::write(&target, b"old").unwrap();
    let link = d.join("link.parquet");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = predict_into(&link, &model, &snapshot);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(&std::fs::read(&target).unwrap()[..4], b"PAR1");
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        mode, 0o644,
        "predictions are shared data, like every output"
    );
}

/// `make TARGET` in `dir` with the tools taken from an empty folder (nothing real runs), `vars`
/// on its command line and `env` in its environment; the usual RUN_DIR, MODEL, CARGO and BIN
/// unless `vars` or `env` give them.
fn make_run(dir: &Path, target: &str, vars: &[String], env: &[(&str, &str)]) -> Output {
    let bin = dir.join("no-tools");
    std::fs::create_dir_all(&bin).unwrap();
    let usual = [
        ("RUN_DIR", "run".to_string()),
        ("MODEL", "churn".to_string()),
        ("CARGO", "true".to_string()),
        ("BIN", bin.display().to_string()),
    ];
    let given = |name: &str| {
        vars.iter().any(|v| v.starts_with(&format!("{name}=")))
            || env.iter().any(|(key, _)| *key == name)
    };
    let out = Command::new("timeout")
        .args(["120", "make", "--no-print-directory", "-f"])
        .arg(format!("{ROOT}/Makefile"))
        .arg(target)
        .current_dir(dir)
        .env("BUILD_PROFILE", "dev")
        .envs(env.iter().copied())
        .args(
            usual
                .iter()
                .filter(|(name, _)| !given(name))
                .map(|(name, value)| format!("{name}={value}")),
        )
        .args(vars)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `make run` in `dir` on a 3,000-row demo with the tests' binaries, and `vars`.
fn make_demo_run(dir: &Path, vars: &[String]) -> Output {
    let tools = crate::util::bin("report").parent().unwrap().to_path_buf();
    let mut all = vec![format!("BIN={}", tools.display()), "ROWS=3000".to_string()];
    all.extend_from_slice(vars);
    make_run(dir, "run", &all, &[])
}

// 2. RUN_DIR with a space or a glob made the Makefile delete files outside RUN_DIR.
#[test]
fn a_run_dir_with_a_space_or_a_glob_is_refused_and_nothing_outside_it_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let bystanders = [
        "b/failed.json",
        "runs/other/failed.json",
        "runs/other/failed.stage",
    ];
    for file in bystanders {
        std::fs::create_dir_all(d.join(file).parent().unwrap()).unwrap();
        std::fs::write(d.join(file), "kept").unwrap();
    }
    for run_dir in ["runs/a b", "runs/*", "runs/?ther", "runs/a\nb", ""] {
        let out = make_run(d, "run", &[format!("RUN_DIR={run_dir}")], &[]);
        assert_eq!(out.code, 2, "RUN_DIR={run_dir:?}: {}", out.stderr);
        assert!(out.stderr.contains("RUN_DIR is '"), "{}", out.stderr);
        for file in bystanders {
            assert!(d.join(file).exists(), "RUN_DIR={run_dir:?} removed {file}");
        }
    }
    // From the environment as from the command line.
    let out = make_run(d, "run", &[], &[("RUN_DIR", "runs/*")]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("RUN_DIR is 'runs/*'"), "{}", out.stderr);
    assert!(d.join("runs/other/failed.json").exists());
}

// 3. Makefile variables ran as shell code (MODEL='x;touch pwned', a quote in a path, ...).
#[test]
fn make_variables_are_never_run_as_shell_code() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = [
        ("MODEL", "x;touch pwned"),
        ("MODEL", "`touch pwned`"),
        ("MODEL", "x && touch pwned"),
        ("MODEL", "$$(touch pwned)"),
        ("MODEL", "$(shell touch pwned)"),
        ("MODEL", "--help"),
        ("REGISTRY", "r';touch pwned;'"),
        ("MANIFEST", "m.yaml';touch pwned;'"),
        ("PREVIOUS", "p';touch pwned;'"),
        ("EXPLAINED", "e';touch pwned;'"),
        ("BIN", "b';touch pwned;'"),
        ("PREFIX", "p';touch pwned;'"),
        ("STORE", "s3://b/x';touch pwned;'"),
        ("SEEDS", "7;touch pwned"),
        ("ROWS", "10$(touch pwned)"),
        ("RETRAIN_ARGS", "X=1;touch pwned"),
    ];
    for (var, value) in cases {
        for target in ["run", "install", "retrain"] {
            let out = make_run(d, target, &[format!("{var}={value}")], &[]);
            assert_eq!(out.code, 2, "{var}={value} ({target}): {}", out.stderr);
            assert!(
                out.stderr.contains(&format!("{var} is '")),
                "{var}={value}: {}",
                out.stderr
            );
            assert!(!d.join("pwned").exists(), "{var}={value} ran as code");
        }
        let out = make_run(d, "run", &[], &[(var, value)]);
        assert_eq!(
            out.code, 2,
            "{var}={value} from the environment: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains(&format!("{var} is '")),
            "{var}={value} from the environment: {}",
            out.stderr
        );
        assert!(!d.join("pwned").exists(), "{var}={value} ran as code");
    }
}

// 4. A preempted training left a checkpoint line without a loss in metrics.jsonl, which report
// refused: every later night failed at the report stage.
#[test]
fn report_reads_the_metrics_of_a_training_preempted_and_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let record = crate::train::edited(|r| r["manifest"]["config"]["max_steps"] = 1500.into());
    let out = dir.path().join("run");
    // Not a logged step (every 25th), so the stop's checkpoint has a line of its own.
    let mut child = start(&record, &out, &[], &[]);
    wait_for_step(&out, 100, &mut child);
    signal(&child, "-TERM");
    let stopped = wait_within(child, Duration::from_secs(60));
    assert_eq!(stopped.code, 3, "{}", stopped.stderr);
    let stopped_at = stopped.json()["train"]["steps"].as_u64().unwrap();
    let metrics = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap();
    if !stopped_at.is_multiple_of(25) {
        assert!(
            metrics.lines().any(|line| {
                let line: Value = serde_json::from_str(line).unwrap();
                line.get("loss").is_none() && line.get("ckpt_blocking_s").is_some()
            }),
            "the stop at step {stopped_at} wrote its checkpoint line:\n{metrics}"
        );
    }
    let resumed = train(&record, &out, &[]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let report = tool("report").args(["-q"]).stdin(resumed.stdout).run();
    assert_eq!(report.code, 0, "{}", report.stderr);
}

fn registry_with_churn(d: &Path) -> (PathBuf, String) {
    let registry = d.join("registry");
    let out = within_a_minute(
        "register",
        &[
            "--registry".as_ref(),
            os(&registry),
            "--name".as_ref(),
            "churn".as_ref(),
            "--promote".as_ref(),
            "prod".as_ref(),
            "-q".as_ref(),
        ],
        gated(),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let hash = out.json()["register"]["weights_blake3"]
        .as_str()
        .unwrap()
        .to_string();
    (registry, hash)
}

/// Replaces `path` (a read-only blob, say) with a FIFO.
fn become_fifo(path: &Path) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::remove_file(path).unwrap();
    mkfifo(path);
}

// 5. FIFOs hung register (an artifact that became a FIFO), predict, register verify and
// register --name (a blob of the registry that became a FIFO).
#[test]
fn fifos_in_place_of_an_artifact_or_a_blob_are_named_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The model file became a FIFO after it was evaluated and gated.
    let mut record: Value = serde_json::from_str(gated()).unwrap();
    let moved = d.join("model.safetensors");
    std::fs::copy(weights_of(gated()), &moved).unwrap();
    record["train"]["weights"] = moved.display().to_string().into();
    become_fifo(&moved);
    let out = within_a_minute(
        "register",
        &[
            "--registry".as_ref(),
            os(&d.join("other")),
            "--name".as_ref(),
            "churn".as_ref(),
            "-q".as_ref(),
        ],
        &record.to_string(),
    );
    out.assert_bad_input("register", "is a FIFO");

    // The registry's weights blob became a FIFO.
    let (registry, hash) = registry_with_churn(d);
    become_fifo(&registry.join("blobs").join(&hash[..2]).join(&hash));
    let verify = within_a_minute(
        "register",
        &["--registry".as_ref(), os(&registry), "verify".as_ref()],
        "",
    );
    assert_ne!(verify.code, 0, "{}", verify.stdout);
    assert!(
        verify.stdout.contains("is a FIFO") || verify.stderr.contains("is a FIFO"),
        "{}\n{}",
        verify.stdout,
        verify.stderr
    );
    let predicted = within_a_minute(
        "predict",
        &[
            "--model".as_ref(),
            "churn@prod".as_ref(),
            "--registry".as_ref(),
            os(&registry),
            "--in".as_ref(),
            os(&fixture().dir.join("snapshot")),
            "--out".as_ref(),
            os(&d.join("p.parquet")),
        ],
        "",
    );
    predicted.assert_bad_input("predict", "is a FIFO");
    let again = within_a_minute(
        "register",
        &[
            "--registry".as_ref(),
            os(&registry),
            "--name".as_ref(),
            "churn2".as_ref(),
            "-q".as_ref(),
        ],
        gated(),
    );
    again.assert_bad_input("register", "is a FIFO");
}

// 6. A small Parquet scores file of huge keys drove evaluate --scores to gigabytes and SIGABRT;
// a CSV of unknown keys was read whole before its exit 2.
#[test]
fn a_scores_file_is_bounded_by_the_split_and_refused_at_its_first_stranger() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let record = crate::external_model::sharded(d);
    let bomb = d.join("bomb.parquet");
    python_stdout(
        "import sys, pyarrow as pa, pyarrow.parquet as pq\n\
         w = pq.ParquetWriter(sys.argv[1], pa.schema([('customer_id', pa.string()), ('score', pa.float64())]), compression='zstd')\n\
         for g in range(8):\n    \
             keys = ['%06d' % (g * 8 + i) + 'x' * (1 << 20) for i in range(8)]\n    \
             w.write_table(pa.table({'customer_id': keys, 'score': [0.5] * 8}))\n\
         w.close()\n",
        &[os(&bomb)],
    );
    assert!(
        std::fs::metadata(&bomb).unwrap().len() < 1 << 20,
        "a small file"
    );
    let judge =
        |path: &Path| within_a_minute("evaluate", &["--scores".as_ref(), os(path)], &record);
    judge(&bomb).assert_bad_input("evaluate", "decodes to");

    // Strangers from the second line on: refused there, naming the line and the key.
    let strangers = d.join("strangers.csv");
    let mut text = String::from("customer_id,score\n");
    for i in 0..200_000 {
        text += &format!("stranger-{i},0.5\n");
    }
    std::fs::write(&strangers, &text).unwrap();
    judge(&strangers).assert_bad_input("evaluate", "bytes, more than the");
    let few = d.join("few-strangers.csv");
    std::fs::write(&few, "customer_id,score\nstranger-0,0.5\nstranger-1,0.5\n").unwrap();
    judge(&few).assert_bad_input(
        "evaluate",
        "line 2: the key `stranger-0` is not a row of the `test` split",
    );
}

// 7. predict scored a numeric feature that arrived as booleans as 1, exit 0.
#[test]
fn predict_refuses_booleans_where_the_model_learned_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = weights_of(gated());
    let served = served_with_spend(d, "served", &|_| "true".to_string());
    let out = predict_into(&d.join("p.parquet"), &model, &served);
    out.assert_bad_input("predict", "column `monthly_spend` is true/false");
    assert!(!d.join("p.parquet").exists());
}

// Low: predict blamed a 1e308 feature value on "the weights" (its scaled value overflows the
// model's 32-bit inputs), and called a column empty in every row "Utf8".
#[test]
fn predict_names_the_row_and_feature_a_score_cannot_take() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = weights_of(gated());
    let huge = served_with_spend(d, "huge", &|spend| {
        if spend == "0" {
            spend.to_string()
        } else {
            "1e308".to_string()
        }
    });
    let out = predict_into(&d.join("p.parquet"), &model, &huge);
    out.assert_bad_input(
        "predict",
        "feature `monthly_spend` is 1e308, beyond what the model takes",
    );
    assert!(!out.stderr.contains("weights"), "{}", out.stderr);
    let empty = served_with_spend(d, "empty", &|_| String::new());
    let out = predict_into(&d.join("p.parquet"), &model, &empty);
    out.assert_bad_input("predict", "column `monthly_spend` is empty in every row");
    assert!(!d.join("p.parquet").exists());
}

/// The train fixture's snapshot with each row's `monthly_spend` replaced by `change(value)`, in
/// `d/name`.
fn served_with_spend(d: &Path, name: &str, change: &dyn Fn(&str) -> String) -> PathBuf {
    let served = d.join(name);
    std::fs::create_dir_all(&served).unwrap();
    for entry in std::fs::read_dir(fixture().dir.join("snapshot")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "csv") {
            continue;
        }
        let mut reader = csv::Reader::from_path(&path).unwrap();
        let header = reader.headers().unwrap().clone();
        let at = header.iter().position(|h| h == "monthly_spend").unwrap();
        let mut writer = csv::Writer::from_path(served.join(path.file_name().unwrap())).unwrap();
        writer.write_record(&header).unwrap();
        for row in reader.records() {
            let row = row.unwrap();
            let fields: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, f)| if i == at { change(f) } else { f.to_string() })
                .collect();
            writer.write_record(&fields).unwrap();
        }
        writer.flush().unwrap();
    }
    served
}

// 8. A background child of the alert command inherited the retrain lock: the next night printed
// "another retrain is running" and exited 0 without running.
#[test]
fn a_background_child_of_the_alert_never_holds_the_retrain_lock() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir_all(d.join("no-tools")).unwrap();
    // A distinctive duration, so the cleanup below ends only this test's sleeper.
    let sleeper = "sleep 47.31";
    let retrain = || {
        let out = Command::new("timeout")
            .args(["120", &format!("{ROOT}/scripts/retrain.sh")])
            .current_dir(d)
            .env("BUILD_PROFILE", "dev")
            .env("RUNFN_ALERT_CMD", format!("{sleeper} > /dev/null 2>&1 &"))
            .env("RETRAIN_RETRIES", "0")
            .arg(format!("BIN={}", d.join("no-tools").display()))
            .args(["RUN_DIR=run", "MODEL=churn", "CARGO=true"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (first, stderr) = retrain();
    assert_ne!(first, Some(0), "a night without tools fails: {stderr}");
    let (second, stderr) = retrain();
    let _ = Command::new("pkill").args(["-f", sleeper]).status();
    assert!(
        !stderr.contains("another retrain is running"),
        "the alert's child kept the lock: {stderr}"
    );
    assert_ne!(
        second,
        Some(0),
        "the second night ran (and failed the same way)"
    );
    let log = std::fs::read_to_string(d.join("run/retrain.log")).unwrap();
    assert_eq!(log.matches("== retrain started").count(), 2, "{log}");
}

// 9. register copied any readable file a record named as its model (an absolute path, `../`, a
// symlink: `/etc/shadow` with its blake3) into a world-readable blob.
#[test]
fn register_copies_models_only_from_where_the_run_wrote_them() {
    let here = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    // A private file outside the working folder, with the blake3 the record carries.
    let private = elsewhere.path().join("private.safetensors");
    std::fs::copy(weights_of(gated()), &private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let link = here.path().join("model.safetensors");
    std::os::unix::fs::symlink(&private, &link).unwrap();
    let register = |weights: &Path, extra: &[&str]| {
        let mut record: Value = serde_json::from_str(gated()).unwrap();
        record["train"]["weights"] = weights.display().to_string().into();
        tool("register")
            .current_dir(here.path())
            .env("RUNFN_ARTIFACTS", "")
            .args(["--registry", "registry", "--name", "churn", "-q"])
            .args(extra)
            .stdin(record.to_string())
            .run()
    };
    register(&private, &[]).assert_bad_input("register", "lies outside the working folder");
    let through_link = register(&link, &[]);
    through_link.assert_bad_input("register", "lies outside the working folder");
    assert!(
        through_link.stderr.contains("really"),
        "{}",
        through_link.stderr
    );
    let traversal = here
        .path()
        .join("..")
        .join(elsewhere.path().file_name().unwrap());
    register(&traversal.join("private.safetensors"), &[])
        .assert_bad_input("register", "lies outside the working folder");
    assert!(!here.path().join("registry").join("blobs").exists());

    // Named by the caller, the folder is allowed, and the blob stays as private as its file.
    let allowed = register(
        &private,
        &["--artifacts", elsewhere.path().to_str().unwrap()],
    );
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    let hash = allowed.json()["register"]["weights_blake3"]
        .as_str()
        .unwrap()
        .to_string();
    let blob = here
        .path()
        .join("registry/blobs")
        .join(&hash[..2])
        .join(&hash);
    let mode = std::fs::metadata(&blob).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o400, "the blob of a 0600 file is {mode:o}");
}

// 11, continued. `/dev/zero` on stdin was read for ~4 GB, then "out of memory" (exit 4): stdin is
// bounded like --record, and a NUL byte (never in JSON text) names it at once.
#[test]
fn dev_zero_on_stdin_is_named_at_once() {
    for name in ["register", "gate", "evaluate", "leak-check"] {
        let started = std::time::Instant::now();
        let out = Command::new(crate::util::bin(name))
            .arg("-q")
            .stdin(std::fs::File::open("/dev/zero").unwrap())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains("<stdin>: holds a NUL byte at offset 0"),
            "{name}: {stderr}"
        );
        assert!(out.stdout.is_empty());
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{name} read on"
        );
    }
}

// 14. report history held every night's records at once: 4.4 GB over 200 nights, SIGABRT over
// 2,000 (make draws it every night). It now keeps one night's records at a time.
#[test]
fn report_history_holds_one_night_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = make_demo_run(d, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let night = std::fs::read_dir(d.join("run/nights"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let nights = d.join("many");
    for i in 0..200 {
        let copy = nights.join(format!("2026-01-01T{:02}{:02}00Z", i / 60, i % 60));
        std::fs::create_dir_all(&copy).unwrap();
        for file in std::fs::read_dir(&night).unwrap() {
            let file = file.unwrap().path();
            if file.is_file() {
                std::fs::copy(&file, copy.join(file.file_name().unwrap())).unwrap();
            }
        }
    }
    // And a night that failed after its stage printed 300 MB on stderr: the page keeps its end.
    let failed = nights.join("2026-01-02T000000Z");
    std::fs::create_dir_all(&failed).unwrap();
    std::fs::write(failed.join("failed.stage"), "validate 1\n").unwrap();
    std::fs::write(failed.join("failed.json"), "").unwrap();
    let err = std::fs::File::create(failed.join("failed.err")).unwrap();
    err.set_len(300 << 20).unwrap();
    drop(err);
    let mut err = std::fs::OpenOptions::new()
        .append(true)
        .open(failed.join("failed.err"))
        .unwrap();
    std::io::Write::write_all(&mut err, b"\nds-validate: failed: the last words\n").unwrap();
    // 200 nights' records parsed at once take about 480 MB; one night's, a few.
    let out = crate::util::output_of_success(
        Command::new("bash")
            .arg("-c")
            .arg("ulimit -d 262144 && exec \"$0\" history \"$1\"/*/ --registry \"$2\" --model churn --html \"$3\" -q")
            .arg(crate::util::bin("report"))
            .arg(&nights)
            .arg(d.join("registry"))
            .arg(d.join("history.html")),
    );
    let history: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = history["history"]["nights"].as_array().unwrap();
    assert_eq!(rows.len(), 201);
    let message = rows[200]["failed"]["message"].as_array().unwrap();
    assert!(
        message[0].as_str().unwrap().contains("earlier bytes"),
        "{message:?}"
    );
    assert_eq!(
        message.last().unwrap(),
        "ds-validate: failed: the last words"
    );
}

// 19. A failed night rerun with nothing changed was archived as a second night: its failed
// stage's record and stderr carry the rerun's own times.
#[test]
fn a_failed_night_rerun_unchanged_is_kept_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("manifest.json"),
        r#"{"manifest_hash": "a", "timings": []}"#,
    )
    .unwrap();
    std::fs::write(
        run.join("validate.json"),
        r#"{"validate": {}, "timings": []}"#,
    )
    .unwrap();
    let archive = |stage: &str, when: &str| {
        std::fs::write(run.join("failed.stage"), format!("{stage}\n")).unwrap();
        std::fs::write(
            run.join("failed.json"),
            format!(r#"{{"timings": [{{"started_at": "{when}"}}]}}"#),
        )
        .unwrap();
        std::fs::write(
            run.join("failed.err"),
            format!("leak-check: failed at {when}\n"),
        )
        .unwrap();
        crate::util::output_of_success(
            Command::new(format!("{ROOT}/scripts/archive-night.sh")).arg(&run),
        );
        std::fs::read_dir(run.join("nights"))
            .unwrap()
            .filter(|e| {
                !e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .count()
    };
    assert_eq!(archive("leaks 1", "2026-12-01T03:00:00Z"), 1);
    assert_eq!(
        archive("leaks 1", "2026-12-01T04:00:00Z"),
        1,
        "the same failure again"
    );
    assert_eq!(
        archive("leaks 4", "2026-12-01T05:00:00Z"),
        2,
        "another exit is another night"
    );
}

/// `ds-validate profile --in file`.
fn profiled(file: &Path) -> Output {
    tool("ds-validate")
        .args([
            "profile".as_ref(),
            "--in".as_ref(),
            file.as_os_str(),
            "-q".as_ref(),
        ])
        .run()
}

// Low: Parquet compressed with gzip, brotli or lz4 was refused ("disabled at compile time").
#[test]
fn parquet_in_every_codec_pyarrow_writes_is_read() {
    let dir = tempfile::tempdir().unwrap();
    crate::util::python_stdout(
        "import sys, pyarrow as pa, pyarrow.parquet as pq\n\
         t = pa.table({'x': [1.5, 2.5, None], 'c': ['a', 'b', 'a']})\n\
         for codec in ['gzip', 'brotli', 'lz4', 'snappy', 'zstd']:\n\
         \x20   pq.write_table(t, f'{sys.argv[1]}/{codec}.parquet', compression=codec)\n",
        &[dir.path().as_os_str()],
    );
    for codec in ["gzip", "brotli", "lz4", "snappy", "zstd"] {
        let file = dir.path().join(format!("{codec}.parquet"));
        let out = profiled(&file);
        assert_eq!(out.code, 0, "{codec}: {}", out.stderr);
        assert_eq!(out.json()["rows"], 3, "{codec}");
    }
}

// Low: a register killed while it copied a model left a full-size hidden temp blob that no
// later registration removed.
#[test]
fn a_killed_registrations_temp_blob_goes_with_the_next_registration() {
    let dir = tempfile::tempdir().unwrap();
    let weights_hash = {
        let record: Value = serde_json::from_str(gated()).unwrap();
        record["train"]["weights_blake3"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let folder = dir.path().join("registry/blobs").join(&weights_hash[..2]);
    std::fs::create_dir_all(&folder).unwrap();
    let stale = folder.join(format!(".{}.tmpAbC123", "f".repeat(64)));
    std::fs::write(&stale, vec![0u8; 4096]).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
    registry_with_churn(dir.path());
    assert!(
        !stale.exists(),
        "the killed registration's temp blob is still there"
    );
}

// Low: a night that failed before the first registration drew no history.html (report history
// was given a --registry that did not exist yet).
#[test]
fn a_first_night_that_fails_still_draws_the_history_page() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("explained.json"), "not json").unwrap();
    let run = make_demo_run(d, &["EXPLAINED=explained.json".into()]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(!d.join("registry").exists());
    assert!(d.join("run/history.html").is_file(), "{}", run.stderr);
    let history: Value =
        serde_json::from_slice(&std::fs::read(d.join("run/history.json")).unwrap()).unwrap();
    assert_eq!(
        history["history"]["nights"][0]["status"], "failed",
        "{history}"
    );
}

// Low: a Parquet timestamp beyond the microseconds a snapshot keeps became null uncounted.
#[test]
fn a_parquet_timestamp_out_of_range_is_a_counted_bad_value() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("when.parquet");
    crate::util::python_stdout(
        "import sys, pyarrow as pa, pyarrow.parquet as pq\n\
         when = pa.array([0, 93 * 10**14, 10**12], type=pa.timestamp('ms'))\n\
         pq.write_table(pa.table({'when': when, 'x': [1.0, 2.0, 3.0]}), sys.argv[1])\n",
        &[file.as_os_str()],
    );
    let out = profiled(&file);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let bad = &out.json()["bad_values"]["columns"]["when"];
    assert_eq!(bad["count"], 1, "{}", out.stdout);
    assert_eq!(bad["examples"][0]["row"], 2);
    assert!(
        bad["examples"][0]["value"]
            .as_str()
            .unwrap()
            .starts_with("9300000000000000"),
        "{bad}"
    );
}

// 10. gate passed a large regression when the noise floor held absurd values (a std of 1e308
// made the interval null; a std of -1 was used as 1).
#[test]
fn gate_refuses_a_noise_floor_no_spread_can_have() {
    let mut record: Value = serde_json::from_str(
        &std::fs::read_to_string(format!("{ROOT}/testdata/gate/worked-case.json")).unwrap(),
    )
    .unwrap();
    record["evaluate"]["overall"]["auc"] = 0.562.into();
    record["baseline"]["overall"]["auc"] = 0.839.into();
    let noise = |std: f64| {
        serde_json::json!({"metric": "evaluate.overall.auc", "n": 3, "mean": 0.56, "std": std,
            "min": 0.55, "max": 0.57, "range": 0.02, "floor": std.abs() * 2.0,
            "method": "std", "values": [0.55, 0.56, 0.57]})
    };
    for (std, field) in [(1e300, "noise_floor.std"), (-1.0, "noise_floor.std")] {
        record["noise_floor"] = noise(std);
        let out = tool("gate").stdin(record.to_string()).run();
        out.assert_bad_input("gate", field);
    }
    // A spread its values allow still gates: the regression blocks.
    record["noise_floor"] = noise(0.01);
    let out = tool("gate").stdin(record.to_string()).run();
    assert_eq!(out.code, 1, "{}", out.stderr);
}

// 17. A closed pipe was reported as a crash: `register list | head -c1` printed "internal error
// ... Broken pipe" and exited 4.
#[test]
fn a_reader_that_goes_away_ends_register_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, _) = registry_with_churn(dir.path());
    for args in [vec!["list"], vec!["resolve", "churn@prod"]] {
        let mut child = Command::new(crate::util::bin("register"))
            .args(["--registry".as_ref(), os(&registry)])
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader is gone before the first byte is written.
        drop(child.stdout.take());
        let out = wait_within(child, Duration::from_secs(60));
        assert_eq!(out.code, 0, "register {args:?}: {}", out.stderr);
        assert_eq!(out.stderr, "", "register {args:?}");
    }
}

/// Runs `sql` on the registry's index with Python's sqlite3 (as a hand edit would).
fn edit_index(registry: &Path, sql: &str) {
    let status = Command::new("python3")
        .args(["-c", "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nc.execute(sys.argv[2])\nc.commit()"])
        .arg(registry.join("index.sqlite"))
        .arg(sql)
        .status()
        .unwrap();
    assert!(status.success(), "{sql}");
}

// 13. register verify missed edits to the index: an entry's weights_blake3 pointed at another
// blob passed, and so did a blob name like ../../../../etc/passwd.
#[test]
fn verify_finds_an_index_that_disagrees_with_its_blobs() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, _) = registry_with_churn(dir.path());
    let verify = || {
        within_a_minute(
            "register",
            &["--registry".as_ref(), os(&registry), "verify".as_ref()],
            "",
        )
    };
    let clean = verify();
    assert_eq!(clean.code, 0, "{}{}", clean.stdout, clean.stderr);
    // Each hand edit of the index, and the problem verify must then name.
    for (sql, problem) in [
        (
            "UPDATE entries SET weights_blake3 = json_extract(blobs, '$.record')",
            "is not the weights blob",
        ),
        (
            "UPDATE entries SET weights_blake3 = '../../../../etc/passwd', blobs = json_set(blobs, '$.weights', '../../../../etc/passwd')",
            "is not a content address",
        ),
    ] {
        edit_index(&registry, sql);
        let found = verify();
        assert_ne!(found.code, 0, "{sql}: {}", found.stdout);
        assert!(
            found.stdout.contains(problem),
            "{sql}: {}{}",
            found.stdout,
            found.stderr
        );
    }
}

// 16. A secret was echoed: `evaluate --scores /proc/self/environ` printed a secret's value on
// stderr, which make copies into failed.err and the alert.
#[test]
fn a_scores_file_that_is_no_table_is_refused_without_echoing_it() {
    let dir = tempfile::tempdir().unwrap();
    let record = crate::external_model::sharded(dir.path());
    let secret = "hunter2-never-printed";
    let out = tool("evaluate")
        .args(["--scores", "/proc/self/environ", "--key", "customer_id"])
        .env("AWS_SECRET_ACCESS_KEY", secret)
        .stdin(record)
        .run();
    out.assert_bad_input("evaluate", "not shown");
    assert!(!out.stderr.contains(secret), "{}", out.stderr);
}

// 12. A registry on a read-only mount could not be read ("unable to open database file").
#[test]
fn a_registry_on_a_read_only_mount_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, _) = registry_with_churn(dir.path());
    let mount = dir.path().join("ro");
    std::fs::create_dir_all(&mount).unwrap();
    // In a mount namespace of its own, so the read-only bind goes away with the command.
    let script = format!(
        "set -e; mount --bind '{src}' '{ro}'; mount -o remount,bind,ro '{ro}'; \
         ! touch '{ro}/probe' 2> /dev/null; \
         '{register}' --registry '{ro}' resolve churn@prod > '{out}/resolved.json'; \
         '{register}' --registry '{ro}' list > /dev/null; \
         '{register}' --registry '{ro}' verify > /dev/null; \
         '{predict}' --model churn@prod --registry '{ro}' --in '{snapshot}' --out '{out}/p.parquet' -q > /dev/null",
        src = registry.display(),
        ro = mount.display(),
        register = crate::util::bin("register").display(),
        predict = crate::util::bin("predict").display(),
        snapshot = fixture().dir.join("snapshot").display(),
        out = dir.path().display(),
    );
    crate::util::output_of_success(Command::new("unshare").args(["-m", "sh", "-c", &script]));
    let resolved: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("resolved.json")).unwrap())
            .unwrap();
    assert_eq!(resolved["version"], 1);
    assert!(dir.path().join("p.parquet").exists());
}

// 20. mf-hash refused a template manifest whose snapshot is `./lake/tonight` (no immutable id),
// so a template could not be linted before it was pinned.
#[test]
fn a_template_manifest_lints_before_it_is_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let template = std::fs::read_to_string(format!("{ROOT}/testdata/e2e/manifest.yaml"))
        .unwrap()
        .replace("./snapshot@snapshot=e2e-20k", "./lake/tonight");
    let path = dir.path().join("template.yaml");
    std::fs::write(&path, &template).unwrap();
    let linted = tool("mf-hash").args([os(&path), "--lint".as_ref()]).run();
    assert_eq!(linted.code, 0, "{}", linted.stderr);
    assert_eq!(linted.json()["lint"]["pinned"], false);
    // Hashing still wants the pin, and a template still gets every other rule.
    tool("mf-hash")
        .args([os(&path), "-q".as_ref()])
        .run()
        .assert_bad_input("mf-hash", "has no immutable id");
    std::fs::write(&path, template.replace("./lake/tonight", "./lake/latest")).unwrap();
    tool("mf-hash")
        .args([os(&path), "--lint".as_ref()])
        .run()
        .assert_bad_input("mf-hash", "which moves");
    std::fs::write(&path, template.replace("seed: 11", "sed: 11")).unwrap();
    tool("mf-hash")
        .args([os(&path), "--lint".as_ref()])
        .run()
        .assert_bad_input("mf-hash", "unknown field");
}

// 21. predict carried no key unless a record was piped in, though the registered model knows its
// manifest's entity and time.
#[test]
fn predict_keys_default_to_the_registered_models_entity_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let (registry, _) = registry_with_churn(dir.path());
    let out = within_a_minute(
        "predict",
        &[
            "--model".as_ref(),
            "churn@prod".as_ref(),
            "--registry".as_ref(),
            os(&registry),
            "--in".as_ref(),
            os(&fixture().dir.join("snapshot")),
            "--out".as_ref(),
            os(&dir.path().join("p.parquet")),
            "-q".as_ref(),
        ],
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.json()["predict"]["keys"],
        serde_json::json!(["customer_id", "signup_date"])
    );
}

/// shardify on a snapshot of one row a day from 2024-01-01 to 2024-03-31, with `splits`; the
/// rows of each split, or the failed run.
fn daily_splits(dir: &Path, splits: &[(&str, &str)]) -> Result<Value, Output> {
    let snapshot = dir.join("daily.csv");
    let mut text = String::from("id,day,x,y\n");
    let mut day = chrono_like_days();
    for i in 0..91 {
        text += &format!("r{i},{},{i},{}\n", day.next().unwrap(), i % 2);
    }
    std::fs::write(&snapshot, text).unwrap();
    let splits: serde_json::Map<String, Value> = splits
        .iter()
        .map(|(n, r)| (n.to_string(), Value::from(*r)))
        .collect();
    let record = serde_json::json!({"manifest": {"run_id": "daily", "seed": 1, "data": {
        "snapshot": format!("{}@snapshot=daily", snapshot.display()),
        "time": "day", "label": "y", "splits": splits}}});
    let out = tool("shardify")
        .args(["--out".as_ref(), os(&dir.join("shards")), "-q".as_ref()])
        .stdin(record.to_string())
        .run();
    if out.code != 0 {
        return Err(out);
    }
    Ok(out.json()["shards"]["splits"].clone())
}

/// 2024-01-01, 2024-01-02, ... as text (2024 is a leap year).
fn chrono_like_days() -> impl Iterator<Item = String> {
    let lengths = [31, 29, 31];
    (0..3).flat_map(move |m| (1..=lengths[m]).map(move |d| format!("2024-{:02}-{d:02}", m + 1)))
}

// 15. Rolling windows: `N units before SPLIT` was a day short when SPLIT is a fixed range with an
// inclusive start (`1 week before test` gave 6 days, `1 day before test` none); `dayss` was taken
// for days.
#[test]
fn a_window_before_a_fixed_month_holds_its_whole_span() {
    let dir = tempfile::tempdir().unwrap();
    let rows = |splits: &Value, name: &str| splits[name]["rows"].as_u64().unwrap();
    let week = daily_splits(
        dir.path(),
        &[
            ("test", "2024-03"),
            ("val", "1 week before test"),
            ("train", "before val"),
        ],
    )
    .unwrap();
    assert_eq!(rows(&week, "test"), 31);
    assert_eq!(rows(&week, "val"), 7, "{week}");
    assert_eq!(rows(&week, "train"), 91 - 31 - 7);
    let day = daily_splits(
        dir.path(),
        &[
            ("test", "2024-03"),
            ("val", "1 day before test"),
            ("train", "before val"),
        ],
    )
    .unwrap();
    assert_eq!(rows(&day, "val"), 1, "{day}");
    let typo = daily_splits(
        dir.path(),
        &[("test", "last 2 dayss"), ("train", "before test")],
    )
    .unwrap_err();
    typo.assert_bad_input("shardify", "`dayss` is not a unit");
}

/// A snapshot of one row a day through February 2024 and one on 2024-03-31 (a feed that went
/// quiet for a month), with `splits`; its record.
fn gappy_record(dir: &Path, splits: &[(&str, &str)]) -> String {
    let snapshot = dir.join("gappy.csv");
    let mut text = String::from("id,day,x,y\n");
    let days: Vec<String> = chrono_like_days()
        .filter(|d| !d.starts_with("2024-03") || d == "2024-03-31")
        .collect();
    for (i, day) in days.iter().enumerate() {
        text += &format!("r{i},{day},{i},{}\n", i % 2);
    }
    std::fs::write(&snapshot, text).unwrap();
    let splits: serde_json::Map<String, Value> = splits
        .iter()
        .map(|(n, r)| (n.to_string(), Value::from(*r)))
        .collect();
    serde_json::json!({"manifest": {"run_id": "gappy", "seed": 1, "data": {
        "snapshot": format!("{}@snapshot=gappy", snapshot.display()),
        "time": "day", "label": "y", "splits": splits}}})
    .to_string()
}

// 15, continued. A rolling window that selects no rows was refused by shardify but passed by
// leak-check (exit 0, nothing checked); a number compared with a date column was compared with
// microseconds since 1970.
#[test]
fn an_empty_window_or_a_number_against_a_date_is_refused_by_every_stage() {
    let dir = tempfile::tempdir().unwrap();
    let empty = gappy_record(
        dir.path(),
        &[
            ("test", "last 1 day"),
            ("val", "1 week before test"),
            ("train", "before val"),
        ],
    );
    let leaks = tool("leak-check").args(["-q"]).stdin(empty.clone()).run();
    leaks.assert_bad_input(
        "leak-check",
        "manifest.data.splits.val: `1 week before test` selects no rows",
    );
    let shards = tool("shardify")
        .args([
            "--out".as_ref(),
            os(&dir.path().join("shards")),
            "-q".as_ref(),
        ])
        .stdin(empty)
        .run();
    shards.assert_bad_input("shardify", "`1 week before test` selects no rows");

    let number = gappy_record(
        dir.path(),
        &[("test", "day >= 20240301"), ("train", "day < 20240301")],
    );
    let message =
        "`day` is a date column holding dates or times, but the rule compares it with a number";
    tool("leak-check")
        .args(["-q"])
        .stdin(number.clone())
        .run()
        .assert_bad_input("leak-check", message);
    tool("shardify")
        .args([
            "--out".as_ref(),
            os(&dir.path().join("shards2")),
            "-q".as_ref(),
        ])
        .stdin(number)
        .run()
        .assert_bad_input("shardify", message);
}

// 15, continued. A future-dated typo row (2099) became the anchor of `last 1 month`: the test
// split was its month alone and every stage passed until noise-floor failed.
#[test]
fn a_future_dated_row_cannot_anchor_a_rolling_window() {
    let dir = tempfile::tempdir().unwrap();
    let record = gappy_record(
        dir.path(),
        &[("test", "last 1 month"), ("train", "before test")],
    );
    let snapshot = dir.path().join("gappy.csv");
    let mut text = std::fs::read_to_string(&snapshot).unwrap();
    text += "typo,2099-01-05,1,0\n";
    std::fs::write(&snapshot, text).unwrap();
    let message = "the newest `day` is 2099-01-05, after today";
    tool("shardify")
        .args([
            "--out".as_ref(),
            os(&dir.path().join("shards")),
            "-q".as_ref(),
        ])
        .stdin(record.clone())
        .run()
        .assert_bad_input("shardify", message);
    tool("leak-check")
        .args(["-q"])
        .stdin(record)
        .run()
        .assert_bad_input("leak-check", message);
}

// 14, in part. `predict --memory 64M` reached 2.7 GB on a 780 KB Parquet file of 1 MiB values:
// its batches were sized by the file's compressed bytes per row. They are sized by the
// footer's uncompressed bytes of the columns read, so the budget is refused by name, with
// nothing written, and a budget that holds the batches scores them.
#[test]
fn predict_sizes_its_batches_by_what_a_parquet_row_decodes_to() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let model = weights_of(gated());
    let part = fixture().dir.join("snapshot").join("part-00000.csv");
    let snapshot = d.join("wide");
    std::fs::create_dir(&snapshot).unwrap();
    let script = "import sys, pyarrow as pa, pyarrow.csv as csv, pyarrow.parquet as pq\n\
        t = csv.read_csv(sys.argv[1]).slice(0, 300)\n\
        big = pa.array([r + 'x' * (1 << 20) for r in t.column('region').to_pylist()])\n\
        t = t.set_column(t.schema.get_field_index('region'), 'region', big)\n\
        pq.write_table(t, sys.argv[2], compression='zstd')\n";
    let parquet = snapshot.join("part.parquet");
    python_stdout(script, &[part.as_os_str(), parquet.as_os_str()]);
    assert!(
        std::fs::metadata(&parquet).unwrap().len() < 4 << 20,
        "compressible"
    );
    let predict = |out: &Path, memory: &str| {
        within_a_minute(
            "predict",
            &[
                "--model".as_ref(),
                model.as_ref(),
                "--in".as_ref(),
                os(&snapshot),
                "--out".as_ref(),
                os(out),
                "--memory".as_ref(),
                memory.as_ref(),
                "-q".as_ref(),
            ],
            "",
        )
    };
    let refused = d.join("refused.parquet");
    predict(&refused, "64M").assert_bad_input("predict", "--memory: 67108864 bytes is too little");
    assert!(!refused.exists());
    let scored = d.join("scored.parquet");
    let out = predict(&scored, "8G");
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    assert!(scored.exists());
}

// 14, shardify's part. `shardify --memory 128M` reached 3.5 GB on a Parquet file of 1 MiB values:
// its read batches had a floor of 1Ki rows sized by the file's compressed bytes a row, and the
// writer held 8Ki-row calls and 250k-row groups whatever their bytes. Batches are sized by what a
// row decodes to, and calls and row groups are cut by their values' bytes too (on the rows, so
// the shards stay byte-identical whatever the budget). The file is written with pages of one
// value: a Parquet page is decompressed whole, so a file's own pages are the floor of any
// reader's memory (see `util::mebibyte_values`).
#[test]
fn shardify_holds_its_budget_on_rows_of_a_mebibyte() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let snapshot = crate::util::mebibyte_values(d, 300);
    let record = crate::util::demo_record();
    let shardify = |out: &Path, memory: &str| {
        let out = tool("shardify")
            .args(["--in".as_ref(), os(&snapshot), "--out".as_ref(), os(out)])
            .args([
                "--memory",
                memory,
                "--split",
                "train=hash(customer_id) < 0.7",
            ])
            .args(["--split", "test=hash(customer_id) >= 0.7", "-q"])
            .stdin(record.clone())
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.json()["timings"]
            .as_array()
            .and_then(|t| t.last())
            .and_then(|t| t["max_rss_bytes"].as_u64())
            .expect("shardify's timings entry has max_rss_bytes")
    };
    // 109-122 MiB at 128M here, with the binary's own 16 MiB: 192M leaves a margin for a
    // loaded machine, and the code before the fix took 614 MiB at either.
    let peak = shardify(&d.join("small"), "192M");
    assert!(
        peak <= 192 << 20,
        "peak RSS {} MiB with --memory 192M",
        peak >> 20
    );
    shardify(&d.join("large"), "2G");
    let shards = |name: &str| {
        let mut hashes = crate::util::file_hashes(&d.join(name));
        hashes.retain(|path, _| path.ends_with(".parquet"));
        hashes
    };
    assert_eq!(shards("small").len(), 2);
    assert_eq!(shards("small"), shards("large"));
}
