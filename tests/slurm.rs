//! The demo night on a real Slurm cluster (Debian's slurm-wlm, started by the test: munge,
//! slurmctld and two slurmd, each node in a network namespace of its own with its own host name,
//! joined by a bridge; one node on loopback where the kernel refuses that, and the test says so):
//! the digest, the profile and shardify (with an array of reducers) as job arrays with dependent
//! merges, each seed's training as two ranks under srun, one per node (Gloo over the bridge), then
//! evaluate as an array and a merge, the noise floor, the gate and register
//! (`scripts/slurm-night.sh`). Its records equal the same night on one machine (`--local`: the
//! parts in turn, `train --nproc-per-node 2`), and its data stages' records and shards equal
//! `make`'s.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{bin, tool};

/// The cluster's daemons, stopped when the test ends however it ends.
struct Cluster {
    dir: PathBuf,
    conf: String,
    nodes: u32,
    /// The interface the nodes reach each other by, when there are two.
    ifname: Option<String>,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        let out = Command::new("scripts/slurm/test-cluster.sh")
            .arg("start")
            .arg(dir)
            .arg("2")
            .output()
            .expect("test-cluster.sh runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the test cluster did not start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let said = |key: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .map(String::from)
        };
        let conf = said("SLURM_CONF=").expect("test-cluster.sh prints SLURM_CONF");
        let nodes = said("NODES=").expect("test-cluster.sh prints NODES");
        Cluster {
            dir: dir.to_path_buf(),
            conf,
            nodes: nodes.parse().expect("NODES is a number"),
            ifname: said("GLOO_SOCKET_IFNAME="),
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("scripts/slurm/test-cluster.sh")
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

fn json_file(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id runs");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// A record without what is measured rather than computed: timings, the training's clock
/// figures (seconds, fractions, rates) and where its ranks were placed (`cpus`: the local
/// launcher pins ranks that share a machine); the losses, weights and scores stay.
fn computed(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| {
                    !["timings", "cpus"].contains(&key.as_str())
                        && !["_s", "_fraction", "_per_s", "_per_step"]
                            .iter()
                            .any(|end| key.ends_with(end))
                })
                .map(|(key, v)| (key.clone(), computed(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(computed).collect()),
        other => other.clone(),
    }
}

fn night(dir: &Path, manifest: &Path, local: bool, cluster: Option<&Cluster>) -> String {
    std::fs::create_dir_all(dir).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-night.sh");
    let mut command = Command::new("bash");
    command.arg(script);
    if local {
        command.arg("--local");
    }
    command
        .arg(manifest)
        .current_dir(dir)
        .env("BIN", bin("mf-hash").parent().unwrap())
        .env("SEEDS", "11 12")
        .env("PARTS", "3")
        .env("TASKS", "2");
    if let Some(cluster) = cluster {
        command
            .env("SLURM_CONF", &cluster.conf)
            .env("TRAIN_NODES", cluster.nodes.to_string());
        if let Some(ifname) = &cluster.ifname {
            command.env("GLOO_SOCKET_IFNAME", ifname);
        }
    }
    let out = command.output().expect("slurm-night.sh runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "slurm-night.sh failed: {stderr}");
    stderr
}

#[test]
fn the_demo_night_on_slurm_writes_the_records_of_one_machine() {
    if !is_root() {
        eprintln!("skipped: a Slurm cluster is started as root, and this test is not root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path();
    let snapshot = work.join("snapshot");
    let made = tool("demo-data")
        .args(["--out".as_ref(), snapshot.as_os_str()])
        .args(["--rows", "8000", "--parts", "3", "--seed", "7", "-q"])
        .run();
    assert_eq!(made.code, 0, "{}", made.stderr);
    let text = std::fs::read_to_string("testdata/e2e/manifest.yaml").unwrap();
    let text = text.replace(
        "./snapshot@snapshot=e2e-20k",
        &format!("{}@snapshot=slurm-8k", snapshot.display()),
    );
    let manifest = work.join("manifest.yaml");
    std::fs::write(&manifest, text).unwrap();

    let cluster = Cluster::start(&work.join("cluster"));
    if cluster.nodes < 2 {
        eprintln!("the kernel refused network namespaces: one Slurm node, both ranks on it");
    }
    let stderr = night(&work.join("slurm"), &manifest, false, Some(&cluster));
    assert!(stderr.contains("submitted; waiting"), "{stderr}");
    let nodes = cluster.nodes;
    drop(cluster);
    night(&work.join("local"), &manifest, true, None);

    // The arrays ran as arrays: one job log per task, a partial per part.
    let logs: Vec<String> = std::fs::read_dir(work.join("slurm/logs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for k in 0..3 {
        assert!(
            logs.iter()
                .any(|l| l.starts_with("digest-parts-") && l.ends_with(&format!("-{k}.err"))),
            "no log of the digest's array task {k}: {logs:?}"
        );
        for partial in [
            "ds-validate/ds-validate.part-{k}-of-3.json",
            "shardify/shardify.part-{k}-of-3.json",
            "shardify/shardify-reduce.part-{k}-of-3.json",
            "evaluate-seed11/evaluate.part-{k}-of-3.json",
        ] {
            let path = work
                .join("slurm/parts")
                .join(partial.replace("{k}", &k.to_string()));
            assert!(path.exists(), "{} is missing", path.display());
        }
    }
    let trained = json_file(&work.join("slurm/train-seed11.json"));
    assert_eq!(
        trained["train"]["distributed"]["world_size"], 2,
        "{}",
        trained["train"]["distributed"]
    );
    if nodes == 2 {
        // One rank on each node: srun's log names both.
        let log: String = logs
            .iter()
            .filter(|l| l.starts_with("train-seed11-") && l.ends_with(".err"))
            .map(|l| std::fs::read_to_string(work.join("slurm/logs").join(l)).unwrap())
            .collect();
        let hosts = std::fs::read_to_string(work.join("slurm/train-seed11.nodes")).unwrap();
        assert!(
            hosts.contains("node1") && hosts.contains("node2"),
            "the ranks ran on {hosts:?}: {log}"
        );
    }

    // Every record of the Slurm night equals one machine's, but for what clocks measured.
    for record in [
        "manifest.json",
        "validate.json",
        "leaks.json",
        "shards.json",
        "train-seed11.json",
        "train-seed12.json",
        "eval-seed11.json",
        "eval-seed12.json",
        "noise.json",
        "gate.json",
        "register.json",
    ] {
        let slurm = computed(&json_file(&work.join("slurm").join(record)));
        let local = computed(&json_file(&work.join("local").join(record)));
        assert!(slurm == local, "{record}: the Slurm night's differs");
    }
    assert_eq!(
        std::fs::read(work.join("slurm/profile.json")).unwrap(),
        std::fs::read(work.join("local/profile.json")).unwrap()
    );
    assert_eq!(
        json_file(&work.join("slurm/register.json"))["register"]["passed"],
        true
    );

    // The data stages' records equal make's on one machine (one process each, no parts).
    let made = work.join("make");
    std::fs::create_dir_all(&made).unwrap();
    let out = Command::new("make")
        .env("BUILD_PROFILE", "dev")
        .current_dir(&made)
        .args(["--no-print-directory", "-f"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Makefile"))
        .arg("./shards.json")
        .arg(format!("MANIFEST={}", manifest.display()))
        .args(["RUN_DIR=.", "MODEL=churn", "REGISTRY=registry"])
        .output()
        .expect("make runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for record in [
        "manifest.json",
        "validate.json",
        "leaks.json",
        "shards.json",
    ] {
        let slurm = computed(&json_file(&work.join("slurm").join(record)));
        let one = computed(&json_file(&made.join(record)));
        assert!(
            slurm == one,
            "{record}: the Slurm night's differs from make's"
        );
    }
    // The shards the parts, reducers and merge wrote are one process's, byte for byte.
    assert_eq!(
        crate::util::file_hashes(&work.join("slurm/shards")),
        crate::util::file_hashes(&made.join("shards"))
    );
}
