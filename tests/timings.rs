//! timings: every entry's environment, its cost under `manifest.cost`, and the entries that
//! noise-floor, gate and register carry from the records they read.

use serde_json::{Value, json};

use crate::train::{fixture, train};
use crate::util::tool;

fn entries(record: &Value) -> &Vec<Value> {
    record["timings"].as_array().expect("timings")
}

fn tools(record: &Value) -> Vec<&str> {
    entries(record)
        .iter()
        .map(|e| e["tool"].as_str().unwrap())
        .collect()
}

#[test]
fn every_entry_records_its_machine_and_train_its_libtorch_and_device() {
    let dir = tempfile::tempdir().unwrap();
    let trained = train(&fixture().record, &dir.path().join("run"), &[]);
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let record = trained.json();
    assert_eq!(tools(&record), ["mf-hash", "shardify", "train"]);
    for entry in entries(&record) {
        let env = &entry["environment"];
        let online = env["cores_online"].as_u64().unwrap();
        let available = env["cores_available"].as_u64().unwrap();
        assert!(available > 0 && available <= online, "{env}");
        assert!(env["memory_bytes"].as_u64().unwrap() > 1 << 20, "{env}");
        for field in ["cpu_model", "kernel", "os"] {
            assert!(!env[field].as_str().unwrap().is_empty(), "{field}: {env}");
        }
        assert_eq!(env["version"], env!("CARGO_PKG_VERSION"), "{env}");
        assert!(
            entry.get("cost").is_none(),
            "no cost without rates: {entry}"
        );
    }
    let os_release = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let env = &entries(&record)[2]["environment"];
    assert!(
        os_release.contains(env["os"].as_str().unwrap()),
        "{env} vs {os_release}"
    );
    assert_eq!(env["device"], "cpu");
    assert_eq!(env["gpus"], 0);
    assert_eq!(env["threads"], 1, "the test trains with --threads 1");
    assert!(env["cores_used"].as_u64().unwrap() >= 1, "{env}");
    assert_eq!(env["pinned_cpus"], Value::Null);
    assert!(env.get("gpu").is_none(), "{env}");
    let libtorch = std::env::var("LIBTORCH").expect("LIBTORCH is set for the tests");
    let built = std::fs::read_to_string(format!("{libtorch}/build-version")).unwrap();
    assert_eq!(env["libtorch"], built.trim(), "{env}");
}

fn costed_manifest(dir: &std::path::Path, cost: &str) -> std::path::PathBuf {
    let path = dir.join("manifest.yaml");
    let manifest = std::fs::read_to_string("testdata/train/manifest.yaml").unwrap();
    std::fs::write(&path, format!("{manifest}cost: {cost}\n")).unwrap();
    path
}

fn assert_priced(entry: &Value, core_hour: f64) {
    let cost = &entry["cost"];
    let cpu_s = entry["cpu_s"].as_f64().unwrap();
    let expected = cpu_s / 3600.0 * core_hour;
    assert!(
        (cost["cpu"].as_f64().unwrap() - expected).abs() <= 1e-9,
        "{entry}"
    );
    assert!(cost["cpu"].as_f64().unwrap() > 0.0, "{entry}");
    assert_eq!(cost["gpu"], 0.0, "no GPU on this stage: {entry}");
    assert_eq!(cost["total"], cost["cpu"], "{entry}");
    assert_eq!(cost["currency"], "USD", "{entry}");
}

#[test]
fn each_entry_is_priced_at_the_manifests_rates() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = costed_manifest(
        dir.path(),
        "{core_hour: 40.0, gpu_hour: 2.5, currency: USD}",
    );
    let hashed = tool("mf-hash")
        .args([manifest.as_os_str(), "-q".as_ref()])
        .run();
    assert_eq!(hashed.code, 0, "{}", hashed.stderr);
    let record = hashed.json();
    assert_eq!(record["manifest"]["cost"]["core_hour"], 40.0);
    assert_priced(&entries(&record)[0], 40.0);
    // A later tool prices its own entry from the record's manifest, and leaves the others be.
    let next = tool("ckpt-interval")
        .args([
            "--cost",
            "90",
            "--mtbf",
            "43200",
            "--step-time",
            "0.4",
            "-q",
        ])
        .stdin(hashed.stdout.clone())
        .run();
    assert_eq!(next.code, 0, "{}", next.stderr);
    let next = next.json();
    assert_eq!(entries(&next)[0], entries(&record)[0]);
    assert_priced(&entries(&next)[1], 40.0);
}

#[test]
fn a_bad_rate_is_a_lint_problem_or_exit_2_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = costed_manifest(dir.path(), "{core_hour: -0.04, gpu_hour: 2.5}");
    let out = tool("mf-hash")
        .args([manifest.as_os_str(), "-q".as_ref()])
        .run();
    out.assert_bad_input(
        "mf-hash",
        "cost.core_hour: must be a number >= 0, found -0.04",
    );
    // A record that did not come through mf-hash's lint is stopped by the first tool to price it.
    let mut record: Value = serde_json::from_str(&fixture().record).unwrap();
    record["manifest"]["cost"] = json!({"core_hour": 0.04, "gpu_hour": "2.5"});
    let out = tool("ckpt-interval")
        .args(["--cost", "90", "--mtbf", "43200", "--step-time", "0.4"])
        .stdin(record.to_string())
        .run();
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr
            .contains("ckpt-interval: manifest.cost.gpu_hour: must be a number >= 0"),
        "{}",
        out.stderr
    );
}

/// A rerun's record: the stages all seeds share, then its own train and evaluate entries.
fn rerun(seed: u64, auc: f64) -> Value {
    let entry = |tool: &str, at: String| json!({"tool": tool, "started_at": at, "wall_s": 1.5, "cpu_s": 1.0, "max_rss_bytes": 1});
    json!({
        "manifest_hash": "ab".repeat(32),
        "train": {"passed": true, "seed": seed},
        "evaluate": {"passed": true, "overall": {"auc": auc}},
        "timings": [
            entry("mf-hash", "2026-11-02T08:00:00.000Z".into()),
            entry("shardify", "2026-11-02T08:01:00.000Z".into()),
            entry("train", format!("2026-11-02T08:1{seed}:00.000Z")),
            entry("evaluate", format!("2026-11-02T08:2{seed}:00.000Z")),
        ],
    })
}

#[test]
fn noise_floor_carries_every_seeds_timings_and_the_shared_stages_once() {
    let records: Vec<Value> = [(1, 0.861), (2, 0.863), (3, 0.862)]
        .into_iter()
        .map(|(seed, auc)| rerun(seed, auc))
        .collect();
    let input: String = records.iter().map(|r| format!("{r}\n")).collect();
    let out = tool("noise-floor")
        .args(["--metric", "evaluate.overall.auc", "-q"])
        .stdin(input)
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let record = out.json();
    let timings = entries(&record);
    assert_eq!(
        tools(&record),
        [
            "mf-hash",
            "shardify",
            "train",
            "evaluate",
            "train",
            "evaluate",
            "train",
            "evaluate",
            "noise-floor"
        ]
    );
    assert_eq!(timings[0], records[0]["timings"][0], "shared: untagged");
    assert_eq!(timings[1], records[0]["timings"][1], "shared: untagged");
    for (i, seed) in [1, 2, 3].into_iter().enumerate() {
        for (j, tool) in ["train", "evaluate"].into_iter().enumerate() {
            let mut expected = records[i]["timings"][2 + j].clone();
            expected["seed"] = json!(seed);
            assert_eq!(timings[2 + 2 * i + j], expected, "{tool} of seed {seed}");
        }
    }
    let wall: f64 = timings[..8]
        .iter()
        .map(|e| e["wall_s"].as_f64().unwrap())
        .sum();
    assert_eq!(
        wall, 12.0,
        "2 shared stages and 3 seeds of 2 stages, 1.5 s each"
    );
}

#[test]
fn gate_carries_the_baselines_evaluation_and_register_keeps_it_all() {
    let dir = tempfile::tempdir().unwrap();
    let trained = train(&fixture().record, &dir.path().join("run"), &[]);
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let evaluate = || {
        let out = tool("evaluate")
            .args(["-q"])
            .stdin(trained.stdout.clone())
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        out
    };
    let candidate = evaluate();
    // The baseline scored the same rows in a run of its own, trained earlier (its other stages
    // here are the candidate's); only its evaluation is this comparison's work.
    let mut baseline = evaluate().json();
    baseline["timings"][2]["started_at"] = json!("2026-01-05T03:00:00.000Z");
    let baseline_file = dir.path().join("baseline.json");
    std::fs::write(&baseline_file, baseline.to_string()).unwrap();
    let gated = tool("gate")
        .args(["--baseline".as_ref(), baseline_file.as_os_str()])
        .args(["--gate", "auc_min_delta=-0.01", "-q"])
        .stdin(candidate.stdout.clone())
        .run();
    assert_eq!(gated.code, 0, "{}", gated.stderr);
    let record = gated.json();
    assert_eq!(
        tools(&record),
        [
            "mf-hash", "shardify", "train", "evaluate", "evaluate", "gate"
        ]
    );
    let candidate = candidate.json();
    assert_eq!(entries(&record)[..4], entries(&candidate)[..]);
    let mut carried = entries(&baseline)[3].clone();
    carried["for"] = json!("baseline");
    assert_eq!(entries(&record)[4], carried);

    let registered = tool("register")
        .args([
            "--registry".as_ref(),
            dir.path().join("registry").as_os_str(),
        ])
        .args(["--name", "churn", "-q"])
        .stdin(gated.stdout.clone())
        .run();
    assert_eq!(registered.code, 0, "{}", registered.stderr);
    let registered = registered.json();
    assert_eq!(entries(&registered)[..6], entries(&record)[..]);
    assert_eq!(entries(&registered)[6]["tool"], "register");
}

/// A tool's `max_rss_bytes` is its own peak, not its parent's: getrusage's peak survives exec,
/// so a 3 MiB tool started from a 300 MiB process (a test harness, an orchestrator in Python)
/// reported 313 MiB, and the memory-budget tests failed whenever the harness had grown.
#[test]
fn the_peak_memory_is_the_tools_own_whatever_started_it() {
    let script = r#"
import json, subprocess, sys
big = bytearray(300 * 1024 * 1024)
for i in range(0, len(big), 4096):
    big[i] = 1
out = subprocess.run(sys.argv[1:], capture_output=True, text=True, check=True).stdout
print(json.loads(out)["timings"][-1]["max_rss_bytes"])
"#;
    let out = std::process::Command::new(crate::util::python_with_pyarrow())
        .args(["-c", script])
        .arg(crate::util::bin("ckpt-interval"))
        .args(["--cost", "1", "--mtbf", "10", "-q"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rss: u64 = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        rss > 0 && rss < 64 << 20,
        "ckpt-interval's peak: {} MiB",
        rss >> 20
    );
}
