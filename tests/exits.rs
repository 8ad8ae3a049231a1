//! Exit 4 (the environment failed; the same command may pass when retried) told apart from
//! exit 2 (the input is wrong) by the error's type; a crash ends in one line and exit 4, never
//! Rust's 101; limits on what a command may ask for are exit 2 naming the limit; and the test
//! faults reach only the tests' `-with-faults` builds.

use std::process::Stdio;

use serde_json::json;

use crate::train::{edited, fixture, train, weights_hash};
use crate::util::{Output, Run, bin, bin_for, spawn, tool};

#[test]
fn a_full_disk_under_stdout_is_exit_4() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let child = spawn(
        "mf-hash",
        &["testdata/demo/manifest.yaml".as_ref(), "-q".as_ref()],
        b"",
        Stdio::from(full),
    );
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("mf-hash: writing the record to stdout")
            && stderr.contains("no space left on the device")
            && stderr.contains("may pass when retried (exit 4)"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_store_is_exit_4_and_never_prints_the_credentials_in_its_url() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let endpoint = format!("http://AKIDUSER:s3cr3tPassw0rd@127.0.0.1:{port}");
    let out = tool("mf-hash")
        .args([
            "testdata/demo/manifest.yaml",
            "--data-digest",
            "s3://runfn-data/demo?token=t0kenValue99",
            "-q",
        ])
        .env("AWS_ENDPOINT_URL", &endpoint)
        .env("AWS_ACCESS_KEY_ID", "AKIDUSER")
        .env("AWS_SECRET_ACCESS_KEY", "not-the-url-password-0123")
        .env("AWS_REGION", "us-east-1")
        .env("RUNFN_STORE_RETRY_S", "1")
        .env("RUNFN_CACHE", dir.path())
        .run();
    out.assert_environment_failed("mf-hash", "cannot be reached");
    for secret in [
        "s3cr3tPassw0rd",
        "t0kenValue99",
        "not-the-url-password-0123",
    ] {
        assert!(!out.stderr.contains(secret), "{secret}: {}", out.stderr);
    }
    // The same command with a wrong input is still exit 2.
    let wrong = tool("mf-hash")
        .args(["testdata/demo/manifest.yaml", "--data-digest", "s3://"])
        .run();
    assert_eq!(wrong.code, 2, "{}", wrong.stderr);
}

#[test]
fn what_a_command_may_ask_for_is_bounded_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    tool("train")
        .args([
            "--threads".as_ref(),
            "100000".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ])
        .stdin(fixture().record.clone())
        .run()
        .assert_bad_input("train", "1..=1024");
    train(&fixture().record, &out, &["--dist-timeout", "1e300"])
        .assert_bad_input("train", "at most 86400");
    let wide = edited(|r| r["manifest"]["config"]["hidden"] = json!([65536, 65536]));
    train(&wide, &out, &[]).assert_bad_input("train", "above the limit of 268435456");
    let batch = edited(|r| r["manifest"]["config"]["global_batch"] = json!(1u64 << 30));
    train(&batch, &out, &[]).assert_bad_input("train", "above the limit of 16777216");
    assert!(!out.exists(), "a refused command left its folder");
}

fn train_with(env: &[(&str, &str)], out: &std::path::Path) -> Output {
    let mut run = Run::new(bin_for("train", env))
        .args(["--out".as_ref(), out.as_os_str(), "-q".as_ref()])
        .args(["--threads", "1"])
        .stdin(fixture().record.clone());
    for (key, value) in env {
        run = run.env(key, value);
    }
    run.run()
}

#[test]
fn a_crash_is_one_line_and_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let crashed = train_with(
        &[("RUNFN_TEST_PANIC_AT_STEP", "3")],
        &dir.path().join("run"),
    );
    assert_eq!(crashed.code, 4, "{}", crashed.stderr);
    assert_eq!(crashed.stdout, "");
    assert_eq!(crashed.stderr.lines().count(), 1, "{}", crashed.stderr);
    assert!(
        crashed.stderr.starts_with("train: internal error at ")
            && crashed.stderr.contains("injected fault: a panic at step 3")
            && crashed.stderr.contains("(the tool crashed)")
            && crashed.stderr.contains("may pass when retried (exit 4)"),
        "{}",
        crashed.stderr
    );
}

#[test]
fn the_tools_never_read_the_test_faults() {
    let dir = tempfile::tempdir().unwrap();
    let faults = [
        ("RUNFN_TEST_LOSS_SPIKE_AT_STEP", "5"),
        ("RUNFN_TEST_PANIC_AT_STEP", "7"),
        ("RUNFN_TEST_SLOW_CKPT_WRITE_MS", "1"),
    ];
    let clean = weights_hash(&train(&fixture().record, &dir.path().join("clean"), &[]));
    // `train` with every fault variable set trains exactly as without them.
    let mut run = tool("train")
        .args([
            "--out".as_ref(),
            dir.path().join("set").as_os_str(),
            "-q".as_ref(),
        ])
        .args(["--threads", "1"])
        .stdin(fixture().record.clone());
    for (key, value) in faults {
        run = run.env(key, value);
    }
    assert_eq!(weights_hash(&run.run()), clean);
    // The tests' build does read them: the label flip changes the weights (so the check above
    // could fail).
    let flipped = train_with(&faults[..1], &dir.path().join("flipped"));
    assert_ne!(weights_hash(&flipped), clean);
    // Nor does the product's binary hold the variables' names at all.
    for name in ["train", "register"] {
        let bytes = std::fs::read(bin(name)).unwrap();
        assert!(
            !bytes.windows(11).any(|w| w == b"RUNFN_TEST_"),
            "{name} mentions RUNFN_TEST_"
        );
    }
    let bytes = std::fs::read(bin("register-with-faults")).unwrap();
    assert!(bytes.windows(11).any(|w| w == b"RUNFN_TEST_"));
}

/// `command` (a tool and its arguments, `$1` in them standing for a fresh 256 KiB file system)
/// run in a mount namespace of its own; its exit code and stderr. A CSV writer's error and an
/// Arrow or Parquet writer's error hid the OS error inside them: a full disk was exit 2.
fn on_a_full_disk(dir: &std::path::Path, command: &str) -> (i32, String) {
    let out = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs -o size=256k tmpfs \"$1\" || exit 99; {command}"
        ))
        .arg("sh")
        .arg(dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("unshare (util-linux) runs the command in a mount namespace of its own");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    assert_ne!(
        code, 99,
        "a tmpfs could not be mounted (the tests run as root): {stderr}"
    );
    (code, stderr)
}

#[test]
fn a_full_disk_under_the_data_writers_is_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = dir.path().join("tiny");
    std::fs::create_dir(&tiny).unwrap();
    let demo = bin("demo-data");
    let (code, stderr) = on_a_full_disk(
        &tiny,
        &format!(
            "{} --out \"$1/snap\" --rows 20000 --seed 1 -q",
            demo.display()
        ),
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("No space left on device")
            && stderr.contains("may pass when retried (exit 4)"),
        "{stderr}"
    );

    let snapshot = dir.path().join("snap");
    let made = tool("demo-data")
        .args([
            "--out".as_ref(),
            snapshot.as_os_str(),
            "--rows".as_ref(),
            "20000".as_ref(),
            "-q".as_ref(),
        ])
        .run();
    assert_eq!(made.code, 0, "{}", made.stderr);
    let record = tool("mf-hash")
        .args(["testdata/demo/manifest.yaml", "-q"])
        .run();
    assert_eq!(record.code, 0, "{}", record.stderr);
    let record_file = dir.path().join("record.json");
    std::fs::write(&record_file, record.stdout).unwrap();
    let (code, stderr) = on_a_full_disk(
        &tiny,
        &format!(
            "{} --in {} --out \"$1/shards\" -q < {} > /dev/null",
            bin("shardify").display(),
            snapshot.display(),
            record_file.display()
        ),
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("no space left on the device"), "{stderr}");
}

/// 11, continued: register on a full disk was exit 2 (its blob write's and SQLite's errors lost
/// their type on the way out).
#[test]
fn a_full_disk_under_the_registry_is_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let tiny = dir.path().join("tiny");
    std::fs::create_dir(&tiny).unwrap();
    let record = dir.path().join("gated.json");
    std::fs::write(&record, crate::register::gated_record(dir.path())).unwrap();
    let (code, stderr) = on_a_full_disk(
        &tiny,
        &format!(
            "head -c 250k /dev/zero > \"$1/fill\"; RUNFN_ARTIFACTS={} {} --registry \"$1/registry\" --name churn -q < {} > /dev/null",
            std::env::temp_dir().display(),
            bin("register").display(),
            record.display()
        ),
    );
    assert_eq!(code, 4, "{stderr}");
    assert!(
        stderr.contains("may pass when retried (exit 4)"),
        "{stderr}"
    );
}

/// A port on loopback that nothing listens on: a store there cannot be reached.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// An unreachable blob store at register was exit 2 (its error turned into a string on the
/// way out), and `register verify` reported it as a broken blob (exit 1): neither judged the
/// input, so both are exit 4, which a cron job retries.
#[test]
fn an_unreachable_blob_store_at_register_and_verify_is_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let record = crate::register::gated_record(dir.path());
    let registry = dir.path().join("registry");
    let store = |run: Run| {
        run.env(
            "AWS_ENDPOINT_URL",
            format!("http://127.0.0.1:{}", closed_port()),
        )
        .env("AWS_ACCESS_KEY_ID", "AKIDUSER")
        .env("AWS_SECRET_ACCESS_KEY", "not-shown-0123")
        .env("AWS_REGION", "us-east-1")
        .env("RUNFN_STORE_RETRY_S", "1")
        .env("RUNFN_CACHE", dir.path().join("cache"))
    };
    let registered = store(tool("register"))
        .args(["--registry".as_ref(), registry.as_os_str()])
        .args(["--name", "churn", "-q"])
        .env("RUNFN_REGISTRY_BLOBS", "s3://runfn-registry/blobs")
        .stdin(record.clone())
        .run();
    registered.assert_environment_failed("register", "cannot be reached");

    // A registry whose blobs were kept in a store that is now away.
    let local = dir.path().join("local");
    let made = tool("register")
        .args(["--registry".as_ref(), local.as_os_str()])
        .args(["--name", "churn", "-q"])
        .stdin(record)
        .run();
    assert_eq!(made.code, 0, "{}", made.stderr);
    std::fs::write(local.join("blob-store"), "s3://runfn-registry/blobs\n").unwrap();
    let verified = store(tool("register"))
        .args(["--registry".as_ref(), local.as_os_str(), "verify".as_ref()])
        .run();
    verified.assert_environment_failed("register", "cannot be reached");
}

/// libtorch failing to allocate (here a 8192-wide layer under a 3 GB address-space limit) is
/// memory exhausted: exit 4 saying so in one line, not "the tool crashed" with c10's stack.
#[test]
fn libtorch_out_of_memory_is_exit_4_saying_so() {
    let dir = tempfile::tempdir().unwrap();
    let wide = edited(|r| r["manifest"]["config"]["hidden"] = json!([8192, 8192]));
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 3000000 && exec \"$0\" --out \"$1\" --threads 1 -q")
        .arg(bin("train"))
        .arg(dir.path().join("run"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(wide.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    assert!(out.stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("train: ")
            && stderr.contains("can't allocate memory")
            && stderr.contains("the environment failed (out of memory)")
            && !stderr.contains("frame #")
            && !stderr.contains("crashed"),
        "{stderr}"
    );
}

/// Runs `name` twice with the same arguments and stdin: once read whole, once with its reader
/// gone before the first byte (`tool | head -c 1`). The second must end as the first did, with
/// nothing more on stderr: a reader that goes away is no error, as with any Unix tool.
fn ends_the_same_without_a_reader(name: &str, args: &[&std::ffi::OsStr], stdin: &str) {
    let start = || {
        std::process::Command::new(bin(name))
            .env("RUNFN_ARTIFACTS", std::env::temp_dir())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let feed = |child: &mut std::process::Child| {
        let mut pipe = child.stdin.take().unwrap();
        let bytes = stdin.as_bytes().to_vec();
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = pipe.write_all(&bytes);
        });
    };
    let mut read = start();
    feed(&mut read);
    let read = crate::util::wait_within(read, std::time::Duration::from_secs(300));
    assert!(
        !read.stdout.is_empty(),
        "{name} {args:?} wrote nothing: {}",
        read.stderr
    );
    let mut gone = start();
    drop(gone.stdout.take());
    feed(&mut gone);
    let gone = crate::util::wait_within(gone, std::time::Duration::from_secs(300));
    assert_eq!(
        (gone.code, gone.stderr.as_str()),
        (read.code, read.stderr.as_str()),
        "{name} {args:?} without a reader"
    );
}

#[test]
fn every_tool_stops_quietly_when_its_reader_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).into_os_string();
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let q = os("-q");
    // What only prints: help, a generated man page, the version.
    for tool in ["mf-hash", "register", "report"] {
        for flag in ["--help", "--version"] {
            ends_the_same_without_a_reader(tool, &[os(flag)], "");
        }
    }
    ends_the_same_without_a_reader("shardify", &[os("--generate"), os("man")], "");

    let manifest = os("testdata/demo/manifest.yaml");
    ends_the_same_without_a_reader("mf-hash", &[manifest, q], "");
    ends_the_same_without_a_reader(
        "demo-data",
        &[os("--out"), &d("demo"), os("--rows"), os("3000"), q],
        "",
    );
    ends_the_same_without_a_reader(
        "ckpt-interval",
        &[
            os("--cost"),
            os("90"),
            os("--mtbf"),
            os("43200"),
            os("--step-time"),
            os("0.4"),
        ],
        "",
    );
    let record = crate::util::demo_record();
    let demo = d("demo");
    ends_the_same_without_a_reader("ds-validate", &[os("--in"), &demo, q], &record);
    ends_the_same_without_a_reader("leak-check", &[os("--in"), &demo, q], &record);
    ends_the_same_without_a_reader(
        "shardify",
        &[os("--in"), &demo, os("--out"), &d("shards"), q],
        &record,
    );
    let snapshot = crate::train::fixture().dir.join("snapshot");

    // The model's stages, each on the record of the one before.
    ends_the_same_without_a_reader(
        "train",
        &[os("--out"), &d("run"), os("--threads"), os("1"), q],
        &fixture().record,
    );
    let gated = crate::register::gated_record(&dir.path().join("gated"));
    let evaluated = {
        let mut record: serde_json::Value = serde_json::from_str(&gated).unwrap();
        record.as_object_mut().unwrap().remove("gate");
        record.to_string()
    };
    ends_the_same_without_a_reader("evaluate", &[q], &evaluated);
    ends_the_same_without_a_reader("gate", &[q], &evaluated);
    ends_the_same_without_a_reader(
        "noise-floor",
        &[os("--values"), os("0.861,0.863,0.862"), q],
        &evaluated,
    );
    let registry = d("registry");
    ends_the_same_without_a_reader(
        "register",
        &[
            os("--registry"),
            &registry,
            os("--name"),
            os("churn"),
            os("--promote"),
            os("prod"),
            q,
        ],
        &gated,
    );
    for args in [&["list"][..], &["resolve", "churn@prod"], &["verify"]] {
        let mut all = vec![os("--registry"), registry.as_os_str()];
        all.extend(args.iter().map(|a| std::ffi::OsStr::new(*a)));
        ends_the_same_without_a_reader("register", &all, "");
    }
    ends_the_same_without_a_reader(
        "predict",
        &[
            os("--model"),
            os("churn@prod"),
            os("--registry"),
            &registry,
            os("--in"),
            snapshot.as_os_str(),
            os("--out"),
            &d("scores.parquet"),
            q,
        ],
        &gated,
    );
    ends_the_same_without_a_reader("report", &[q], &gated);
}
