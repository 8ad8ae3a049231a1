//! The harness: finds the built tools, runs them, and compares their JSON with golden files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// The folder holding the workspace's binaries (`target/debug`), next to this test binary.
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps folder");
    deps.parent().expect("target profile folder").to_path_buf()
}

pub fn bin(tool: &str) -> PathBuf {
    let path = bin_dir().join(tool);
    let built = std::fs::metadata(&path).and_then(|m| m.modified());
    let Ok(built) = built else {
        panic!(
            "{} is not built: run `make test`, or `cargo build --workspace --bins --features train/fault-injection,register/fault-injection`",
            path.display()
        );
    };
    // A plain `cargo test` after an edit rebuilds this test binary but not the tools it runs:
    // testing those would test old code. Cargo's dep-info file beside the binary lists every
    // source it was built from.
    if let Some(source) = newer_source(&path, built) {
        panic!(
            "{} is older than {}: run `make test`, or `cargo build --workspace --bins --features train/fault-injection,register/fault-injection`",
            path.display(),
            source.display()
        );
    }
    path
}

/// `tool`, or its `-with-faults` build when `env` injects a test fault (a `RUNFN_TEST_*`
/// variable): only that build, made for the tests with the `fault-injection` feature, reads
/// them.
pub fn bin_for(tool: &str, env: &[(&str, &str)]) -> PathBuf {
    if env.iter().any(|(key, _)| key.starts_with("RUNFN_TEST_")) {
        bin(&format!("{tool}-with-faults"))
    } else {
        bin(tool)
    }
}

/// A source of the binary at `path` modified after `built`, per `path.d` (one `target: deps`
/// rule, spaces in names escaped with a backslash).
fn newer_source(path: &Path, built: std::time::SystemTime) -> Option<PathBuf> {
    let rules = std::fs::read_to_string(path.with_extension("d")).ok()?;
    let deps = rules
        .lines()
        .next()?
        .split_once(": ")?
        .1
        .replace("\\ ", "\0");
    deps.split_whitespace()
        .map(|d| PathBuf::from(d.replace('\0', " ")))
        .find(|d| {
            std::fs::metadata(d)
                .and_then(|m| m.modified())
                .is_ok_and(|modified| modified > built)
        })
}

/// Waits for `child` at most `limit`, reading its stdout and stderr meanwhile. A child still
/// running then is killed and the test fails at once, instead of waiting for it to end by itself.
pub fn wait_within(mut child: std::process::Child, limit: std::time::Duration) -> Output {
    use std::io::Read;
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            String::from_utf8(bytes).expect("output is UTF-8")
        })
    };
    let stdout = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = std::time::Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("child status") {
            break status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "pid {} still ran after {limit:?}; killed. stderr:\n{}",
                child.id(),
                stderr.join().unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
    Output {
        code: status.code().unwrap_or(-1),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

pub fn testdata(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(relative)
}

#[derive(Debug)]
pub struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The record on stdout, parsed.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON object ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// Asserts a bad-input ending: exit 2, nothing on stdout, one `tool: ...` line containing `message`.
    /// Exit 4: the environment failed; one line naming `message`, saying a retry may pass, and
    /// nothing on stdout.
    pub fn assert_environment_failed(&self, tool: &str, message: &str) {
        assert_eq!(
            self.code, 4,
            "expected exit 4\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        assert_eq!(
            self.stdout, "",
            "stdout must stay empty when the environment failed"
        );
        let line = self.stderr.lines().last().unwrap_or("");
        assert!(
            line.starts_with(&format!("{tool}: ")) && line.contains(message),
            "stderr {line:?} must start with `{tool}: ` and contain {message:?}"
        );
        assert!(
            line.contains("may pass when retried (exit 4)"),
            "stderr {line:?} must say a retry may help"
        );
    }

    pub fn assert_bad_input(&self, tool: &str, message: &str) {
        assert_eq!(
            self.code, 2,
            "expected exit 2\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        assert_eq!(self.stdout, "", "stdout must stay empty on bad input");
        let line = self.stderr.lines().last().unwrap_or("");
        assert!(
            line.starts_with(&format!("{tool}: ")),
            "stderr line must start with `{tool}: `: {line:?}"
        );
        assert!(
            line.contains(message),
            "stderr {line:?} does not contain {message:?}"
        );
    }
}

/// A tool invocation being set up.
pub struct Run {
    command: Command,
    stdin: Option<Vec<u8>>,
}

/// Runs `command` to its end, failing the test with its stderr unless it succeeded.
pub fn output_of_success(command: &mut Command) -> std::process::Output {
    let out = command.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn tool(name: &str) -> Run {
    Run::new(bin(name))
}

impl Run {
    /// The program at `path`, run in the tests' folder.
    pub fn new(path: PathBuf) -> Run {
        let mut command = Command::new(path);
        command.current_dir(env!("CARGO_MANIFEST_DIR"));
        // The tests' runs live in the temporary folder, outside the folder the tools run in:
        // register may copy models from there.
        command.env("RUNFN_ARTIFACTS", std::env::temp_dir());
        Run {
            command,
            stdin: None,
        }
    }

    pub fn args<I, S>(mut self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.command.args(args);
        self
    }

    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Run {
        self.stdin = Some(bytes.into());
        self
    }

    pub fn env(mut self, key: &str, value: impl AsRef<std::ffi::OsStr>) -> Run {
        self.command.env(key, value);
        self
    }

    pub fn current_dir(mut self, dir: &Path) -> Run {
        self.command.current_dir(dir);
        self
    }

    pub fn run(mut self) -> Output {
        self.command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = self.command.spawn().expect("tool starts");
        let mut stdin = child.stdin.take().expect("stdin pipe");
        let bytes = self.stdin.take().unwrap_or_default();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
        let output = child.wait_with_output().expect("tool runs");
        writer.join().expect("stdin writer");
        Output {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        }
    }
}

/// Starts `tool` with `args`, writes `stdin` to it and closes it; stdout as given, stderr piped.
pub fn spawn(
    tool: &str,
    args: &[&std::ffi::OsStr],
    stdin: &[u8],
    stdout: Stdio,
) -> std::process::Child {
    let mut child = Command::new(bin(tool))
        .env("RUNFN_ARTIFACTS", std::env::temp_dir())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("tool starts");
    let _ = child.stdin.take().expect("stdin pipe").write_all(stdin);
    child
}

/// Starts `command` with every stream piped and writes `stdin` to it from a thread, so a child
/// that never reads (or dies first) cannot block the test.
pub fn spawn_with_stdin(command: &mut Command, stdin: &[u8]) -> std::process::Child {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the command starts");
    let mut pipe = child.stdin.take().expect("stdin pipe");
    let bytes = stdin.to_vec();
    std::thread::spawn(move || {
        let _ = pipe.write_all(&bytes);
    });
    child
}

/// Checks the last `timings` entry belongs to `tool` and is well formed, then removes the
/// `timings` array, whose values differ on every run.
pub fn strip_timings(mut record: Value, tool: &str) -> Value {
    let timings = record
        .as_object_mut()
        .and_then(|o| o.remove("timings"))
        .expect("record has timings");
    let last = timings
        .as_array()
        .and_then(|t| t.last())
        .expect("a timings entry");
    assert_eq!(last["tool"], tool);
    assert!(
        last["started_at"]
            .as_str()
            .is_some_and(|s| s.ends_with('Z')),
        "{last}"
    );
    for field in ["wall_s", "cpu_s"] {
        assert!(
            last[field].as_f64().is_some_and(|v| v >= 0.0),
            "{field} in {last}"
        );
    }
    assert!(
        last["max_rss_bytes"].as_u64().is_some_and(|v| v > 0),
        "{last}"
    );
    let keys: Vec<&str> = last
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert!(keys.len() >= 6, "{last}");
    assert_eq!(
        keys[..6],
        [
            "tool",
            "started_at",
            "wall_s",
            "cpu_s",
            "max_rss_bytes",
            "environment"
        ],
        "{last}"
    );
    assert!(
        keys[6..]
            .iter()
            .all(|k| ["cost", "memory_budget_bytes"].contains(k)),
        "{last}"
    );
    record
}

/// Compares `actual` (timings stripped) with `testdata/<tool>/<case>.expected.json` as parsed JSON.
/// `RUNFN_BLESS=1` rewrites the golden file instead; review the diff.
pub fn assert_golden(tool: &str, case: &str, actual: Value) {
    let actual = strip_timings(actual, tool);
    let path = testdata(&format!("{tool}/{case}.expected.json"));
    if std::env::var_os("RUNFN_BLESS").is_some() {
        let text = serde_json::to_string_pretty(&actual).expect("serializable") + "\n";
        std::fs::write(&path, text).expect("golden file written");
        return;
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (create it with RUNFN_BLESS=1 make test)",
            path.display()
        )
    });
    let expected: Value = serde_json::from_str(&text).expect("golden file is JSON");
    assert_eq!(actual, expected, "output differs from {}", path.display());
}

/// Generates a demo snapshot with `demo-data` into `dir` (small, so tests stay fast).
pub fn demo_snapshot(dir: &Path, rows: usize, flags: &[&str]) -> PathBuf {
    let out = tool("demo-data")
        .args(["--out".as_ref(), dir.as_os_str()])
        .args(["--rows", &rows.to_string(), "--parts", "2", "-q"])
        .args(flags)
        .run();
    assert_eq!(out.code, 0, "demo-data failed: {}", out.stderr);
    dir.to_path_buf()
}

/// The record mf-hash makes of the demo manifest, as stdin for the data tools.
pub fn demo_record() -> String {
    let out = tool("mf-hash")
        .args(["testdata/demo/manifest.yaml", "-q"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
}

/// Every file under `dir`, by its path relative to `dir`, with the blake3 of its bytes.
pub fn file_hashes(dir: &Path) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).expect("a readable folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).expect("a readable file");
                out.insert(
                    path.strip_prefix(dir).unwrap().display().to_string(),
                    blake3::hash(&bytes).to_hex().to_string(),
                );
            }
        }
    }
    out
}

/// The checks of a `leaks` or `validate` section that failed.
pub fn failed_checks(section: &Value) -> Vec<&Value> {
    section["checks"]
        .as_array()
        .map(|c| c.iter().filter(|c| c["passed"] == false).collect())
        .unwrap_or_default()
}

/// The named check of a `leaks` or `validate` section.
pub fn named_check<'a>(section: &'a Value, name: &str) -> &'a Value {
    section["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no check {name} in {section}"))
}

/// A Python with pyarrow, from the project's own set-up script (a cached virtualenv).
pub fn python_with_pyarrow() -> PathBuf {
    let out = Command::new("scripts/python-env.sh")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("scripts/python-env.sh runs");
    assert!(
        out.status.success(),
        "scripts/python-env.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).expect("a path").trim())
}

/// What `script` (Python, in the test venv) prints given `args`; a failure fails the test with
/// its stderr.
pub fn python_stdout(script: &str, args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(python_with_pyarrow())
        .args(["-c", script])
        .args(args)
        .output()
        .expect("the test venv's python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// A Parquet snapshot folder under `dir` of the train fixture's first `rows` rows with every
/// `region` a MiB long, compressible (a few hundred KB on disk) and written in pages of one
/// value: a Parquet page is decompressed whole, so a file's own pages are the floor of any
/// reader's memory, and these leave the reader's batches the only thing to bound.
pub fn mebibyte_values(dir: &Path, rows: usize) -> PathBuf {
    let part = crate::train::fixture()
        .dir
        .join("snapshot")
        .join("part-00000.csv");
    let snapshot = dir.join("wide");
    std::fs::create_dir_all(&snapshot).unwrap();
    let script = "import sys, pyarrow as pa, pyarrow.csv as csv, pyarrow.parquet as pq\n\
        t = csv.read_csv(sys.argv[1]).slice(0, int(sys.argv[3]))\n\
        big = pa.array([r + 'x' * (1 << 20) for r in t.column('region').to_pylist()])\n\
        t = t.set_column(t.schema.get_field_index('region'), 'region', big)\n\
        pq.write_table(t, sys.argv[2], compression='zstd', write_batch_size=1,\n\
                       use_dictionary=False)\n";
    let parquet = snapshot.join("part.parquet");
    let rows = rows.to_string();
    python_stdout(
        script,
        &[part.as_os_str(), parquet.as_os_str(), rows.as_ref()],
    );
    snapshot
}

/// Sets the record's `manifest_hash` to its manifest's hash, as mf-hash would after an edit of
/// the manifest: every tool refuses a manifest edited after hashing.
pub fn rehash(record: &mut serde_json::Value) {
    record["manifest_hash"] = runfn_manifest::manifest_hash(&record["manifest"])
        .expect("a manifest to hash")
        .into();
}

/// `record` (JSON text) with its `manifest_hash` set to its manifest's hash: a test's edit of the
/// manifest, made as mf-hash would have hashed it.
pub fn rehashed(record: String) -> String {
    let mut value: serde_json::Value = serde_json::from_str(&record).expect("a JSON record");
    rehash(&mut value);
    value.to_string()
}
