//! Object storage against a real S3-compatible server on the loopback address (moto, with
//! request signing, behind a proxy that can go away; scripts/s3-test-server.py): the demo run
//! through make with its snapshot, shards, checkpoints and registry blobs in buckets, then
//! resumed and scored from an empty cache as on another machine; the real telco table read from
//! a bucket giving what the local copy gives; a server gone in the middle of an upload; wrong
//! credentials.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{Output, Run, python_with_pyarrow, testdata, tool};

/// A running test server: moto behind the proxy, its key, and the folder it reports in.
struct S3Server {
    child: Child,
    dir: tempfile::TempDir,
    info: Value,
    python: PathBuf,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/s3-test-server.py")
}

impl S3Server {
    fn start(buckets: &[&str], cut_after_bytes: Option<u64>) -> S3Server {
        let python = python_with_pyarrow();
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(&python);
        command.arg(script()).arg("serve").arg(dir.path());
        for bucket in buckets {
            command.args(["--bucket", bucket]);
        }
        if let Some(bytes) = cut_after_bytes {
            command.args(["--cut-after-bytes", &bytes.to_string()]);
        }
        let mut child = command
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the S3 test server starts");
        let ready = dir.path().join("server.json");
        let started = Instant::now();
        while !ready.exists() {
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                panic!("the S3 test server ended ({status}): {err}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the S3 test server did not start within 60 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let info = serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
        S3Server {
            child,
            dir,
            info,
            python,
        }
    }

    fn field(&self, name: &str) -> String {
        self.info[name].as_str().unwrap().to_string()
    }

    fn secret(&self) -> String {
        self.field("secret_access_key")
    }

    /// The environment a user sets for a store: the standard variables, and short retry and
    /// timeout budgets so a test of a vanished server ends quickly.
    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID".into(), self.field("access_key_id")),
            ("AWS_SECRET_ACCESS_KEY".into(), self.secret()),
            ("AWS_ENDPOINT_URL".into(), self.field("endpoint")),
            ("AWS_REGION".into(), "us-east-1".into()),
            ("RUNFN_STORE_RETRY_S".into(), "2".into()),
            ("RUNFN_STORE_TIMEOUT_S".into(), "20".into()),
        ]
    }

    fn with_env(&self, mut run: Run, cache: &Path) -> Run {
        for (key, value) in self.env() {
            run = run.env(&key, value);
        }
        run.env("RUNFN_CACHE", cache)
    }

    fn helper(&self, args: &[&std::ffi::OsStr]) -> std::process::Output {
        let out = Command::new(&self.python)
            .arg(script())
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "s3-test-server.py {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn put_tree(&self, bucket: &str, prefix: &str, dir: &Path) {
        for (relative, _) in crate::util::file_hashes(dir) {
            let key = format!("{prefix}/{relative}");
            self.helper(&[
                "put".as_ref(),
                self.dir.path().as_os_str(),
                bucket.as_ref(),
                key.as_ref(),
                dir.join(&relative).as_os_str(),
            ]);
        }
    }

    /// `{key: size}` of the objects under `prefix`, and the keys of unfinished uploads.
    fn ls(
        &self,
        bucket: &str,
        prefix: &str,
    ) -> (std::collections::BTreeMap<String, u64>, Vec<String>) {
        let out = self.helper(&[
            "ls".as_ref(),
            self.dir.path().as_os_str(),
            bucket.as_ref(),
            prefix.as_ref(),
        ]);
        let listing: Value = serde_json::from_slice(&out.stdout).unwrap();
        let objects = listing["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["key"].as_str().unwrap().to_string(),
                    o["size"].as_u64().unwrap(),
                )
            })
            .collect();
        let uploads = listing["uploads_in_progress"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap().to_string())
            .collect();
        (objects, uploads)
    }

    fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        let file = self.dir.path().join("got");
        self.helper(&[
            "get".as_ref(),
            self.dir.path().as_os_str(),
            bucket.as_ref(),
            key.as_ref(),
            file.as_os_str(),
        ]);
        std::fs::read(file).unwrap()
    }

    /// Bytes the proxy has passed from the store to the tools so far (SIGHUP writes them).
    fn fetched(&self) -> u64 {
        let file = self.dir.path().join("traffic.json");
        let _ = std::fs::remove_file(&file);
        self.signal("HUP");
        let started = Instant::now();
        while !file.exists() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "the S3 test server wrote no traffic.json"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        json_file(&file)["to_clients"].as_u64().unwrap()
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([format!("-{name}"), self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer}"))
}

/// Files under `dir` (folders named in `skip` left out) that contain `secret`.
fn files_holding(dir: &Path, secret: &str, skip: &[&str]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !skip.contains(&name.as_str()) {
                    stack.push(path);
                }
            } else if std::fs::read(&path)
                .unwrap()
                .windows(secret.len())
                .any(|w| w == secret.as_bytes())
            {
                found.push(path);
            }
        }
    }
    found
}

/// The e2e manifest with its snapshot in the bucket.
fn bucket_manifest(dir: &Path, from: &str, snapshot: &str) -> PathBuf {
    let text = std::fs::read_to_string(testdata(from)).unwrap();
    let (_, rest) = text.split_once("  snapshot: ").unwrap();
    let old = rest.lines().next().unwrap();
    let text = text.replace(old, snapshot);
    let path = dir.join("manifest.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn make_runs_the_demo_with_snapshot_shards_checkpoints_and_blobs_in_buckets() {
    let server = S3Server::start(&["runfn-data", "runfn-runs", "runfn-registry"], None);
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    let snapshot = crate::util::demo_snapshot(&work.join("snapshot"), 20_000, &["--seed", "7"]);
    server.put_tree("runfn-data", "demo", &snapshot);
    let manifest = bucket_manifest(
        work,
        "e2e/manifest.yaml",
        "s3://runfn-data/demo@snapshot=e2e-20k",
    );
    let cache = work.join("cache");
    let root = env!("CARGO_MANIFEST_DIR");
    let mut make = Command::new("make");
    // The tests run the dev build they have just made, never a release build.
    make.env("BUILD_PROFILE", "dev")
        .current_dir(work)
        .args([
            "--no-print-directory",
            "-f",
            &format!("{root}/Makefile"),
            "stages",
        ])
        .arg(format!("MANIFEST={}", manifest.display()))
        .args([
            "RUN_DIR=.",
            "SEEDS=11 12",
            "MODEL=churn",
            "REGISTRY=registry",
        ])
        .arg("STORE=s3://runfn-runs/demo")
        .env("RUNFN_CACHE", &cache)
        .env("RUNFN_REGISTRY_BLOBS", "s3://runfn-registry/blobs");
    for (key, value) in server.env() {
        make.env(key, value);
    }
    let out = make.output().expect("make runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");

    // The snapshot was read from the bucket: the digest names the URL and equals the local copy's.
    let hashed = json_file(&work.join("manifest.json"));
    assert_eq!(
        str_at(&hashed, "/mf_hash/data_digest/path"),
        "s3://runfn-data/demo"
    );
    let local = tool("mf-hash")
        .args([
            manifest.as_os_str(),
            "--data-digest".as_ref(),
            snapshot.as_os_str(),
            "-q".as_ref(),
        ])
        .run();
    assert_eq!(local.code, 0, "{}", local.stderr);
    assert_eq!(
        hashed["mf_hash"]["data_digest"]["digest"],
        local.json()["mf_hash"]["data_digest"]["digest"]
    );

    // The shards are in the bucket, index last, and nothing was written beside the records.
    let shards = json_file(&work.join("shards.json"));
    assert_eq!(
        str_at(&shards, "/shards/dir"),
        "s3://runfn-runs/demo/shards"
    );
    assert!(!work.join("shards").exists() && !work.join("train").exists());
    let (objects, uploads) = server.ls("runfn-runs", "demo/");
    assert!(uploads.is_empty(), "unfinished uploads: {uploads:?}");
    let index: Value =
        serde_json::from_slice(&server.get("runfn-runs", "demo/shards/index.json")).unwrap();
    assert_eq!(
        blake3::hash(&server.get("runfn-runs", "demo/shards/index.json"))
            .to_hex()
            .to_string(),
        str_at(&shards, "/shards/index_blake3")
    );
    for split in index["splits"].as_object().unwrap().values() {
        for shard in split["shards"].as_array().unwrap() {
            let key = format!("demo/shards/{}", str_at(shard, "/path"));
            assert_eq!(objects.get(&key), shard["bytes"].as_u64().as_ref(), "{key}");
        }
    }

    // Each training: weights and metrics in the bucket, the newest two checkpoints (the older
    // pruned there too), each checkpoint JSON beside its tensors.
    for seed in [11, 12] {
        let trained = json_file(&work.join(format!("train-seed{seed}.json")));
        let weights = str_at(&trained, "/train/weights");
        let prefix = weights
            .strip_prefix("s3://runfn-runs/")
            .and_then(|w| w.strip_suffix("/model.safetensors"))
            .unwrap_or_else(|| panic!("weights at {weights}"));
        let bytes = server.get("runfn-runs", &format!("{prefix}/model.safetensors"));
        assert_eq!(
            blake3::hash(&bytes).to_hex().to_string(),
            str_at(&trained, "/train/weights_blake3")
        );
        assert_eq!(
            str_at(&trained, "/train/metrics"),
            format!("s3://runfn-runs/{prefix}/metrics.jsonl")
        );
        let checkpoints: Vec<&String> = objects
            .keys()
            .filter(|k| k.starts_with(&format!("{prefix}/checkpoints/")))
            .collect();
        let stems = ["step-0000000200", "step-0000000300"];
        let expected: Vec<String> = stems
            .iter()
            .flat_map(|s| {
                ["json", "safetensors"].map(|ext| format!("{prefix}/checkpoints/{s}.{ext}"))
            })
            .collect();
        assert_eq!(checkpoints, expected.iter().collect::<Vec<_>>());
    }

    // The registry's blobs are in their bucket; its index stays here.
    let registered = json_file(&work.join("register.json"));
    let weights_blake3 = str_at(&registered, "/register/weights_blake3");
    let key = format!("blobs/{}/{weights_blake3}", &weights_blake3[..2]);
    assert_eq!(
        str_at(&registered, "/register/weights"),
        format!("s3://runfn-registry/{key}")
    );
    assert_eq!(
        blake3::hash(&server.get("runfn-registry", &key))
            .to_hex()
            .to_string(),
        weights_blake3
    );
    assert!(work.join("registry/index.sqlite").is_file());

    // No secret in any record, page or message.
    assert!(!stderr.contains(&server.secret()));
    assert_eq!(
        files_holding(work, &server.secret(), &["cache", "snapshot"]),
        Vec::<PathBuf>::new()
    );

    // Another machine (an empty cache, no local blobs): train resumes from the bucket's newest
    // checkpoint to the same weights, and the model registered is scored from the blob store.
    std::fs::remove_dir_all(work.join("registry/blobs")).unwrap();
    let elsewhere = work.join("cache-elsewhere");
    let planned = std::fs::read_to_string(work.join("ckpt.json")).unwrap();
    let first = json_file(&work.join("train-seed11.json"));
    let resumed = server
        .with_env(tool("train"), &elsewhere)
        .current_dir(work)
        .args([
            "--seed",
            "11",
            "--out",
            str_at(&first, "/train/weights").trim_end_matches("/model.safetensors"),
            "-q",
        ])
        .stdin(planned)
        .run();
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let resumed = resumed.json();
    assert_eq!(resumed["train"]["resumed_from"]["step"], 300);
    assert_eq!(resumed["train"]["steps_this_run"], 0);
    assert_eq!(
        resumed["train"]["weights_blake3"],
        first["train"]["weights_blake3"]
    );
    let scored = server
        .with_env(tool("evaluate"), &elsewhere)
        .current_dir(work)
        .args([
            "--as",
            "baseline",
            "--model",
            "churn@prod",
            "--registry",
            "registry",
            "-q",
        ])
        .stdin(std::fs::read_to_string(work.join("noise.json")).unwrap())
        .run();
    assert_eq!(scored.code, 0, "{}", scored.stderr);
    let evaluation = json_file(&work.join("eval-seed11.json"));
    assert_eq!(
        scored.json()["baseline"]["overall"]["auc"],
        evaluation["evaluate"]["overall"]["auc"],
        "the registered model, fetched from the blob store, scores as it did"
    );
}

/// One stage of the telco chain: exit 0, the record.
fn stage(run: Run, name: &str) -> Output {
    let out = run.run();
    assert_eq!(out.code, 0, "{name}: {}", out.stderr);
    out
}

#[test]
fn the_real_telco_table_read_from_a_bucket_gives_what_its_local_copy_gives() {
    let server = S3Server::start(&["runfn-data", "runfn-runs"], None);
    let dir = tempfile::tempdir().unwrap();
    let local = crate::real_data::chain(&crate::real_data::TELCO, dir.path());
    server.put_tree("runfn-data", "telco", &testdata("real/telco/snapshot"));
    // The same manifest, pinned to the same digest, with the snapshot in the bucket.
    let text = std::fs::read_to_string(testdata("real/telco/manifest.yaml"))
        .unwrap()
        .replace("./testdata/real/telco/snapshot@", "s3://runfn-data/telco@");
    let manifest = dir.path().join("manifest.yaml");
    std::fs::write(&manifest, text).unwrap();
    let cache = dir.path().join("cache");
    let hashed = stage(
        server.with_env(tool("mf-hash"), &cache).args([
            manifest.as_os_str(),
            "--data-digest".as_ref(),
            "s3://runfn-data/telco".as_ref(),
            "-q".as_ref(),
        ]),
        "mf-hash",
    );
    let validated = stage(
        server
            .with_env(tool("ds-validate"), &cache)
            .args(["-q"])
            .stdin(hashed.stdout),
        "ds-validate",
    );
    let checked = stage(
        server
            .with_env(tool("leak-check"), &cache)
            .args(["-q"])
            .stdin(validated.stdout),
        "leak-check",
    );
    let sharded = stage(
        server
            .with_env(tool("shardify"), &cache)
            .args(["--out", "s3://runfn-runs/telco/shards", "-q"])
            .stdin(checked.stdout.clone()),
        "shardify",
    );
    let planned = stage(
        tool("ckpt-interval")
            .args([
                "--cost",
                "0.01",
                "--mtbf",
                "3600",
                "--step-time",
                "0.002",
                "-q",
            ])
            .stdin(sharded.stdout),
        "ckpt-interval",
    );
    let trained = stage(
        server
            .with_env(tool("train"), &cache)
            .args([
                "--out",
                "s3://runfn-runs/telco/train",
                "--threads",
                "1",
                "-q",
            ])
            .stdin(planned.stdout),
        "train",
    );
    let remote = stage(
        server
            .with_env(tool("evaluate"), &cache)
            .args(["-q"])
            .stdin(trained.stdout),
        "evaluate",
    )
    .json();

    assert_eq!(
        remote["mf_hash"]["data_digest"]["digest"],
        local["mf_hash"]["data_digest"]["digest"]
    );
    // The same checks, with the same findings; the examples name the object in the bucket.
    for section in ["validate", "leaks"] {
        let strip = |v: &Value| {
            let mut v = v[section].clone();
            if let Some(o) = v.as_object_mut() {
                o.remove("profile_file");
            }
            v
        };
        let named_locally: Value = serde_json::from_str(
            &strip(&remote)
                .to_string()
                .replace("s3://runfn-data/telco/", "./testdata/real/telco/snapshot/"),
        )
        .unwrap();
        assert_eq!(named_locally, strip(&local), "{section}");
    }
    assert_eq!(remote["shards"]["splits"], local["shards"]["splits"]);
    // The same training (the weights file's lineage names the shards' index, whose source is
    // the URL here, so the file's hash differs; the losses and scores do not).
    assert_eq!(remote["train"]["final_loss"], local["train"]["final_loss"]);
    assert_eq!(remote["train"]["val"], local["train"]["val"]);
    assert_eq!(remote["evaluate"]["overall"], local["evaluate"]["overall"]);
    assert!(str_at(&remote, "/train/weights").starts_with("s3://runfn-runs/telco/train/"));
}

#[test]
fn a_store_gone_mid_upload_fails_the_run_shows_no_partial_set_and_a_rerun_completes() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot =
        crate::util::demo_snapshot(&dir.path().join("snapshot"), 200_000, &["--seed", "7"]);
    let manifest = bucket_manifest(
        dir.path(),
        "e2e/manifest.yaml",
        "s3://runfn-data/big@snapshot=big-200k",
    );
    let record = tool("mf-hash")
        .args([manifest.as_os_str(), "-q".as_ref()])
        .run();
    assert_eq!(record.code, 0, "{}", record.stderr);
    // The same shards written locally, to know their size and content.
    let local_out = dir.path().join("local-shards");
    let local = stage(
        tool("shardify")
            .args([
                "--in".as_ref(),
                snapshot.as_os_str(),
                "--out".as_ref(),
                local_out.as_os_str(),
                "-q".as_ref(),
            ])
            .stdin(record.stdout.clone()),
        "shardify (local)",
    );
    let total: u64 = crate::util::file_hashes(&local_out)
        .keys()
        .map(|r| std::fs::metadata(local_out.join(r)).unwrap().len())
        .sum();
    let largest = crate::util::file_hashes(&local_out)
        .keys()
        .map(|r| std::fs::metadata(local_out.join(r)).unwrap().len())
        .max()
        .unwrap();
    assert!(
        largest > 5 << 20,
        "a shard of {largest} bytes goes up in one PUT, not in parts"
    );

    // The proxy goes away once half the shards' bytes went up (in 5 MiB parts).
    let server = S3Server::start(&["runfn-data", "runfn-runs"], Some(total / 2));
    server.put_tree("runfn-data", "big", &snapshot);
    let cache = dir.path().join("cache");
    let shardify = || {
        server
            .with_env(tool("shardify"), &cache)
            .env("RUNFN_STORE_PART_MB", "5")
            .args(["--out", "s3://runfn-runs/big/shards", "-q"])
            .stdin(record.stdout.clone())
            .run()
    };
    let started = Instant::now();
    let cut = shardify();
    assert!(
        server.dir.path().join("cut.json").exists(),
        "the proxy never went away"
    );
    assert_eq!(
        cut.code, 4,
        "the store went away: a retry may pass; {}",
        cut.stderr
    );
    assert_eq!(cut.stdout, "", "nothing on stdout after a failed upload");
    assert_eq!(cut.stderr.lines().count(), 1, "{}", cut.stderr);
    assert!(
        cut.stderr.contains("s3://runfn-runs/big/shards/")
            && cut.stderr.contains("went away or cannot be reached"),
        "{}",
        cut.stderr
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
    // Nothing partial is visible: no index, so no set; a reader says so.
    let (objects, _) = server.ls("runfn-runs", "big/shards/");
    assert!(
        !objects.contains_key("big/shards/index.json"),
        "{objects:?}"
    );
    server.signal("USR2");
    let reader = server
        .with_env(tool("leak-check"), &cache)
        .args(["--shards", "s3://runfn-runs/big/shards", "-q"])
        .stdin(record.stdout.clone())
        .run();
    assert_eq!(reader.code, 2, "{}", reader.stderr);
    reader.assert_bad_input(
        "leak-check",
        "s3://runfn-runs/big/shards/index.json: is missing",
    );

    // With the server back, the same command completes: every shard byte-identical to the
    // local run's, the index last.
    let rerun = shardify();
    assert_eq!(rerun.code, 0, "{}", rerun.stderr);
    let remote_index: Value =
        serde_json::from_slice(&server.get("runfn-runs", "big/shards/index.json")).unwrap();
    let local_index = json_file(&local_out.join("index.json"));
    assert_eq!(remote_index["splits"], local_index["splits"]);
    assert_eq!(
        rerun.json()["shards"]["splits"],
        local.json()["shards"]["splits"]
    );
    let (objects, _) = server.ls("runfn-runs", "big/shards/");
    // Hidden files (the folder's lock) stay local.
    for relative in crate::util::file_hashes(&local_out)
        .keys()
        .filter(|r| !r.split('/').any(|part| part.starts_with('.')))
    {
        assert_eq!(
            objects.get(&format!("big/shards/{relative}")).copied(),
            Some(std::fs::metadata(local_out.join(relative)).unwrap().len()),
            "{relative}"
        );
    }
}

#[test]
fn wrong_credentials_exit_2_naming_the_bucket_and_print_no_secret() {
    let server = S3Server::start(&["runfn-data", "runfn-runs"], None);
    let dir = tempfile::tempdir().unwrap();
    let snapshot =
        crate::util::demo_snapshot(&dir.path().join("snapshot"), 2_000, &["--seed", "7"]);
    server.put_tree("runfn-data", "demo", &snapshot);
    let manifest = bucket_manifest(
        dir.path(),
        "e2e/manifest.yaml",
        "s3://runfn-data/demo@snapshot=e2e-2k",
    );
    let cache = dir.path().join("cache");
    let wrong_secret = "wrongSecretKey0123456789abcdefWRONGKEY00";
    let cases: [(&str, &str, &str); 2] = [
        ("a wrong secret", "AWS_SECRET_ACCESS_KEY", wrong_secret),
        (
            "an unknown key id",
            "AWS_ACCESS_KEY_ID",
            "AKIAUNKNOWNKEY000000",
        ),
    ];
    for (what, var, value) in cases {
        let digest = server
            .with_env(tool("mf-hash"), &cache)
            .env(var, value)
            .args([
                manifest.as_os_str(),
                "--data-digest".as_ref(),
                "s3://runfn-data/demo".as_ref(),
                "-q".as_ref(),
            ])
            .run();
        assert_eq!(digest.code, 2, "{what}: {}", digest.stderr);
        digest.assert_bad_input("mf-hash", "access to the bucket `runfn-data` was refused");
        let record = tool("mf-hash")
            .args([manifest.as_os_str(), "-q".as_ref()])
            .run();
        let shardify = server
            .with_env(tool("shardify"), &cache)
            .env(var, value)
            .args([
                "--in".as_ref(),
                snapshot.as_os_str(),
                "--out".as_ref(),
                "s3://runfn-runs/x".as_ref(),
                "-q".as_ref(),
            ])
            .stdin(record.stdout)
            .run();
        assert_eq!(shardify.code, 2, "{what}: {}", shardify.stderr);
        shardify.assert_bad_input("shardify", "access to the bucket `runfn-runs` was refused");
        for out in [&digest, &shardify] {
            assert!(
                !out.stderr.contains(&server.secret()),
                "{what}: {}",
                out.stderr
            );
            assert!(!out.stderr.contains(wrong_secret), "{what}: {}", out.stderr);
        }
    }
    let (objects, _) = server.ls("runfn-runs", "");
    assert!(objects.is_empty(), "nothing was written: {objects:?}");
}

#[test]
fn cron_retries_a_night_whose_store_was_away_for_20_s_and_the_night_completes() {
    // `make retrain` as cron runs it, with the snapshot, shards and checkpoints in buckets. As
    // soon as the shards are written the store goes away for 20 s: the stage that needs it ends
    // with exit 4, retrain.sh waits and runs the night again from that stage, and the night
    // completes without an alert.
    let server = S3Server::start(&["runfn-data", "runfn-runs"], None);
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    let snapshot = crate::util::demo_snapshot(&work.join("snapshot"), 8_000, &["--seed", "7"]);
    server.put_tree("runfn-data", "demo", &snapshot);
    let manifest = bucket_manifest(
        work,
        "e2e/manifest.yaml",
        "s3://runfn-data/demo@snapshot=e2e-8k",
    );
    let root = env!("CARGO_MANIFEST_DIR");
    let alerted = work.join("alerted");
    // As a crontab line runs it: cd FOLDER && CLONE/scripts/retrain.sh NAME=VALUE...
    let mut make = Command::new(format!("{root}/scripts/retrain.sh"));
    make.env("BUILD_PROFILE", "dev")
        .current_dir(work)
        .arg(format!("MANIFEST={}", manifest.display()))
        .args([
            "RUN_DIR=run",
            "SEEDS=11 12",
            "MODEL=churn",
            "REGISTRY=registry",
            "STORE=s3://runfn-runs/demo",
            // The tests build nothing: a build here (without the test features) relinks the
            // binaries the other tests are starting.
            "CARGO=true",
        ])
        .env("RUNFN_CACHE", work.join("cache"))
        .env("RETRAIN_BACKOFF_S", "8")
        .env("RETRAIN_RETRIES", "3")
        .env("RUNFN_ALERT_CMD", format!("touch '{}'", alerted.display()));
    for (key, value) in server.env() {
        make.env(key, value);
    }
    let mut child = make
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("retrain.sh runs");
    let shards = work.join("run/shards.json");
    let started = Instant::now();
    while !shards.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "make ended before the shards were written"
        );
        assert!(started.elapsed() < Duration::from_secs(300), "no shards");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.signal("USR1");
    let away = Instant::now();
    std::thread::sleep(Duration::from_secs(20));
    server.signal("USR2");
    let away_for = away.elapsed();
    let out = child.wait_with_output().unwrap();
    let log = std::fs::read_to_string(work.join("run/retrain.log")).unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        log
    );
    assert!(away_for >= Duration::from_secs(20));
    let retried = log
        .lines()
        .filter(|l| l.starts_with("== retrain: stage ") && l.contains("exited 4 (the environment"))
        .count();
    assert!(retried >= 1, "{log}");
    assert!(
        log.contains(&format!("exit 0 after {} attempt(s)", retried + 1)),
        "{log}"
    );
    assert!(
        log.contains("may pass when retried (exit 4)") && log.contains("cannot be reached"),
        "{log}"
    );
    assert!(log.contains("retrain will retry, no alert sent"), "{log}");
    assert!(!alerted.exists(), "a night that completed sent an alert");
    assert!(work.join("run/register.json").exists(), "{log}");
}

/// Keys are names as written: `%`, non-ASCII and spaces in a file's name read and write as boto3
/// reads and writes them. object_store's `Path::from` used to percent-encode them, so `a%b` was
/// fetched as the key `a%25b` and `é` as `%C3%A9`: another object, "not found". (A space in a
/// folder that is listed is not tested: the test server refuses the list request's signature.)
#[test]
fn keys_with_percent_spaces_and_non_ascii_read_and_write_as_boto3_names_them() {
    let server = S3Server::start(&["runfn-data", "runfn-runs"], None);
    let dir = tempfile::tempdir().unwrap();
    // The real telco table, in a file and a folder whose names hold the characters.
    let local = dir.path().join("données ü%");
    std::fs::create_dir_all(&local).unwrap();
    std::fs::copy(
        testdata("real/telco/snapshot/telco.csv"),
        local.join("part 100% é.csv"),
    )
    .unwrap();
    let prefix = "telco-é%20/v1";
    server.put_tree("runfn-data", prefix, &local);
    let (objects, _) = server.ls("runfn-data", prefix);
    assert_eq!(
        objects.keys().collect::<Vec<_>>(),
        ["telco-é%20/v1/part 100% é.csv"],
        "boto3 stored the names as written"
    );
    let url = format!("s3://runfn-data/{prefix}");
    let cache = dir.path().join("cache");
    let digest = |source: &std::ffi::OsStr| {
        let out = server
            .with_env(tool("mf-hash"), &cache)
            .args(["testdata/mf-hash/churn.yaml", "--data-digest"])
            .args([source, "-q".as_ref()])
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.json()["mf_hash"]["data_digest"]["digest"].clone()
    };
    let pinned = digest(local.as_os_str());
    assert_eq!(
        digest(url.as_ref()),
        pinned,
        "the same bytes under the same names"
    );
    // Read through a reader, and written back under a key with the same characters.
    let text: String = std::fs::read_to_string(testdata("real/telco/manifest.yaml"))
        .unwrap()
        .lines()
        .map(|line| match line.trim_start().starts_with("snapshot:") {
            true => format!("  snapshot: {url}@{}\n", pinned.as_str().unwrap()),
            false => format!("{line}\n"),
        })
        .collect();
    let manifest = dir.path().join("manifest.yaml");
    std::fs::write(&manifest, text).unwrap();
    let hashed = stage(
        server.with_env(tool("mf-hash"), &cache).args([
            manifest.as_os_str(),
            "--data-digest".as_ref(),
            url.as_ref(),
            "-q".as_ref(),
        ]),
        "mf-hash",
    );
    let validated = stage(
        server
            .with_env(tool("ds-validate"), &cache)
            .args(["-q"])
            .stdin(hashed.stdout),
        "ds-validate",
    );
    assert_eq!(validated.json()["validate"]["profile"]["rows"], 7043);
    let checked = stage(
        server
            .with_env(tool("leak-check"), &cache)
            .args(["-q"])
            .stdin(validated.stdout),
        "leak-check",
    );
    let out_url = "s3://runfn-runs/sorties-ü%/shards";
    let sharded = stage(
        server
            .with_env(tool("shardify"), &cache)
            .args(["--out", out_url, "-q"])
            .stdin(checked.stdout),
        "shardify",
    );
    assert_eq!(str_at(&sharded.json(), "/shards/dir"), out_url);
    let (written, _) = server.ls("runfn-runs", "sorties-ü%/shards");
    assert!(
        written.contains_key("sorties-ü%/shards/index.json"),
        "written under the key as named: {:?}",
        written.keys().collect::<Vec<_>>()
    );
    // A key with a control character is no key: exit 2 naming it, before any request.
    let out = server
        .with_env(tool("mf-hash"), &cache)
        .args(["testdata/real/telco/manifest.yaml", "--data-digest"])
        .args(["s3://runfn-data/a\tb"])
        .run();
    out.assert_bad_input(
        "mf-hash",
        "is not an object key: it holds a control character",
    );
}

/// Forwards connections from `listen` to `to` once `after` has passed: a store that is away (its
/// port refuses) and comes back.
fn late_proxy(
    listen: std::net::SocketAddr,
    to: String,
    after: Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        let listener = std::net::TcpListener::bind(listen).expect("the proxy's port is free");
        listener.set_nonblocking(true).unwrap();
        let started = Instant::now();
        // Bounded in time: the proxy stops by itself.
        while started.elapsed() < Duration::from_secs(60) {
            match listener.accept() {
                Ok((client, _)) => {
                    client.set_nonblocking(false).unwrap();
                    let server = std::net::TcpStream::connect(&to).unwrap();
                    for (mut from, mut into) in [
                        (client.try_clone().unwrap(), server.try_clone().unwrap()),
                        (server, client),
                    ] {
                        std::thread::spawn(move || {
                            let _ = std::io::copy(&mut from, &mut into);
                            let _ = into.shutdown(std::net::Shutdown::Write);
                        });
                    }
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })
}

/// Retries stop when the time budget (RUNFN_STORE_RETRY_S) is spent, not after a count: a store
/// whose port refuses for 5 s and then answers is reached within a 30 s budget.
#[test]
fn a_store_that_comes_back_within_the_retry_budget_is_reached() {
    let dir = tempfile::tempdir().unwrap();
    let server = S3Server::start(&["runfn-data"], None);
    let snapshot =
        crate::util::demo_snapshot(&dir.path().join("snapshot"), 2_000, &["--seed", "3"]);
    server.put_tree("runfn-data", "small", &snapshot);
    let endpoint = server.field("endpoint");
    let real = endpoint.trim_start_matches("http://").to_string();
    // A port that refuses now: taken, then freed.
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let away = free.local_addr().unwrap();
    drop(free);
    let proxy = late_proxy(away, real, Duration::from_secs(5));
    let started = Instant::now();
    let out = server
        .with_env(tool("mf-hash"), &dir.path().join("cache"))
        .env("AWS_ENDPOINT_URL", format!("http://{away}"))
        .env("RUNFN_STORE_RETRY_S", "30")
        .args([
            "testdata/e2e/manifest.yaml",
            "--data-digest",
            "s3://runfn-data/small",
            "-q",
        ])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "the store answered only after 5 s"
    );
    drop(proxy);
}

/// `mf-hash --data-digest` of a snapshot in a bucket, in parts: each part reads only its own
/// objects, as streams hashed as they arrive (nothing is staged: the cache stays empty), and
/// what it fetched is its share of the bytes within 10%; the merge gives one process's record.
#[test]
fn parts_of_a_snapshot_in_a_bucket_read_only_their_share_and_stage_nothing() {
    let server = S3Server::start(&["runfn-data"], None);
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let made = tool("demo-data")
        .args(["--out".as_ref(), demo.as_os_str()])
        .args(["--rows", "6000", "--parts", "5", "-q"])
        .run();
    assert_eq!(made.code, 0, "{}", made.stderr);
    server.put_tree("runfn-data", "demo", &demo);
    let url = "s3://runfn-data/demo";
    let manifest = dir.path().join("drift.json");
    std::fs::write(
        &manifest,
        serde_json::json!({"data": {"snapshot": url}}).to_string(),
    )
    .unwrap();
    let mf_hash = |cache: &Path, extra: &[&std::ffi::OsStr]| {
        server
            .with_env(tool("mf-hash"), cache)
            .args([manifest.as_os_str(), "--drift-only".as_ref(), "-q".as_ref()])
            .args(["--data-digest", url])
            .args(extra)
            .run()
    };
    let one = mf_hash(&dir.path().join("cache-one"), &[]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let (cache, parts) = (dir.path().join("cache-parts"), dir.path().join("parts"));
    let mut shares = Vec::new();
    for k in 0..3 {
        let before = server.fetched();
        let part = format!("{k}/3");
        let done = mf_hash(
            &cache,
            &[
                "--part".as_ref(),
                part.as_ref(),
                "--parts".as_ref(),
                parts.as_os_str(),
            ],
        );
        assert_eq!(done.code, 0, "{}", done.stderr);
        let fetched = server.fetched() - before;
        let partial = json_file(&parts.join(format!("mf-hash.part-{k}-of-3.json")));
        let share: u64 = partial["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["bytes"].as_u64().unwrap())
            .sum();
        assert!(share > 0, "part {k} got no file");
        assert!(
            fetched >= share && fetched as f64 <= share as f64 * 1.10,
            "part {k} fetched {fetched} bytes for a share of {share}"
        );
        shares.push((share, fetched));
    }
    let total: u64 = crate::util::file_hashes(&demo)
        .keys()
        .map(|f| std::fs::metadata(demo.join(f)).unwrap().len())
        .sum();
    assert_eq!(shares.iter().map(|(s, _)| s).sum::<u64>(), total);
    eprintln!("bytes a part fetched against its share: {shares:?}");
    assert!(
        !cache.exists() || crate::util::file_hashes(&cache).is_empty(),
        "a part staged files: {:?}",
        crate::util::file_hashes(&cache)
    );
    let merged = mf_hash(&cache, &["--parts".as_ref(), parts.as_os_str()]);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let computed = |out: &Output| {
        let mut record = out.json();
        record.as_object_mut().unwrap().remove("timings");
        record
    };
    assert_eq!(computed(&merged), computed(&one));
    assert_eq!(one.json()["mf_hash"]["data_digest"]["path"], url);
}
