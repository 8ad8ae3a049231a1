//! A team's own model through runfn's chain, on a real table (telco): a scikit-learn gradient-
//! boosted model, trained by the team's Python script on runfn's shards with three seeds, judged by
//! `evaluate --scores`, given a noise floor, gated against the runfn-trained model serving as
//! prod, registered (its pickle stored content-addressed with the lineage) and resolved. The
//! scores, the artifact and the rows are checked, never copied: a scores file or a pickle changed
//! after evaluation is refused, and scores that are not exactly the test rows' are exit 2.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::real_data::TELCO;
use crate::util::{Output, python_with_pyarrow, tool};

/// The team's training script: reads the record (shardify's output) on stdin, fits a
/// HistGradientBoostingClassifier on the train shards with the given seed, pickles it, writes
/// its test scores (customer_id, score) as Parquet, prints its own test AUC on stderr, and adds
/// the documented `external_train` section to the record on stdout.
const TEAM_TRAINER: &str = r#"
import json, pickle, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
import sklearn
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import roc_auc_score
from blake3 import blake3
out, seed = sys.argv[1], int(sys.argv[2])
record = json.load(sys.stdin)
shards, data = record["shards"]["dir"], record["manifest"]["data"]
label, key = data["label"], data["entity"]
index = json.load(open(f"{shards}/index.json"))
def split(name):
    return pa.concat_tables(
        [pq.read_table(f"{shards}/{s['path']}") for s in index["splits"][name]["shards"]]
    ).to_pydict()
train, test = split("train"), split("test")
columns = [c for c in train if c not in (label, key) and not c.startswith("_")]
vocab = {c: sorted({v for v in train[c] if v is not None})
         for c in columns if isinstance(next((v for v in train[c] if v is not None), 0), str)}
def encode(rows):
    out = []
    for c in columns:
        if c in vocab:
            codes = {v: i for i, v in enumerate(vocab[c])}
            out.append([codes.get(v, np.nan) if v is not None else np.nan for v in rows[c]])
        else:
            out.append([np.nan if v is None else float(v) for v in rows[c]])
    return np.array(out, dtype=float).T
params = {"max_iter": 150, "learning_rate": 0.05, "max_leaf_nodes": 15,
          "early_stopping": True, "validation_fraction": 0.15, "max_features": 0.7}
model = HistGradientBoostingClassifier(
    categorical_features=[c in vocab for c in columns], random_state=seed, **params)
model.fit(encode(train), np.array(train[label], dtype=float))
scores = model.predict_proba(encode(test))[:, 1]
print(roc_auc_score(np.array(test[label], dtype=float), scores), file=sys.stderr)
artifact = f"{out}/model-seed{seed}.pkl"
with open(artifact, "wb") as f:
    pickle.dump({"model": model, "columns": columns, "vocab": vocab}, f)
pq.write_table(pa.table({key: test[key], "score": scores.astype(float)}),
               f"{out}/scores-seed{seed}.parquet")
record["external_train"] = {
    "artifact": artifact, "artifact_blake3": blake3(open(artifact, "rb").read()).hexdigest(),
    "framework": f"scikit-learn {sklearn.__version__}", "format": "pickle",
    "params": params, "seed": seed,
}
print(json.dumps(record))
"#;

fn os(path: &Path) -> &std::ffi::OsStr {
    path.as_os_str()
}

fn stage(name: &str, args: &[&std::ffi::OsStr], stdin: impl Into<Vec<u8>>) -> Output {
    let out = tool(name).args(args).args(["-q"]).stdin(stdin).run();
    assert_eq!(out.code, 0, "{name}: {}", out.stderr);
    out
}

/// mf-hash, ds-validate, leak-check, shardify: the record a team's trainer starts from.
pub fn sharded(dir: &Path) -> String {
    let manifest = crate::real_data::manifest(&TELCO);
    let snapshot = "testdata/real/telco/snapshot";
    let hashed = stage(
        "mf-hash",
        &[os(&manifest), "--data-digest".as_ref(), snapshot.as_ref()],
        "",
    );
    let validated = stage("ds-validate", &[], hashed.stdout);
    let checked = stage("leak-check", &[], validated.stdout);
    let shards = dir.join("shards");
    stage("shardify", &["--out".as_ref(), os(&shards)], checked.stdout).stdout
}

fn file_blake3(path: &Path) -> String {
    blake3::hash(&std::fs::read(path).unwrap())
        .to_hex()
        .to_string()
}

/// Runs the team's script for `seed`: the record with `external_train`, and the AUC the script
/// measured itself.
fn team_trains(dir: &Path, record: &str, seed: u64) -> (String, f64) {
    let mut child = Command::new(python_with_pyarrow())
        .args(["-c", TEAM_TRAINER])
        .arg(dir)
        .arg(seed.to_string())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(record.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    let auc: f64 = stderr.trim().lines().last().unwrap().parse().unwrap();
    (String::from_utf8(out.stdout).unwrap(), auc)
}

#[test]
fn a_scikit_learn_model_goes_through_evaluate_noise_floor_gate_and_register() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().canonicalize().unwrap();
    let record = sharded(&d);
    let registry = d.join("registry");

    // prod is the runfn-trained MLP, registered first.
    let trained = stage(
        "train",
        &[
            "--out".as_ref(),
            os(&d.join("mlp")),
            "--threads".as_ref(),
            "1".as_ref(),
        ],
        record.clone(),
    );
    let evaluated = stage("evaluate", &[], trained.stdout);
    let mlp = stage(
        "register",
        &[
            "--registry".as_ref(),
            os(&registry),
            "--name".as_ref(),
            "telco".as_ref(),
            "--promote".as_ref(),
            "prod".as_ref(),
            "--allow-ungated".as_ref(),
            "--reason".as_ref(),
            "first model".as_ref(),
        ],
        evaluated.stdout.clone(),
    );
    let mlp_evaluation = &evaluated.json()["evaluate"];

    // The team's model with three seeds, each judged by its scores.
    let mut judged = Vec::new();
    for seed in 1..=3u64 {
        let (with_artifact, own_auc) = team_trains(&d, &record, seed);
        let scores = d.join(format!("scores-seed{seed}.parquet"));
        let out = stage(
            "evaluate",
            &["--scores".as_ref(), os(&scores)],
            with_artifact,
        );
        let section = out.json()["evaluate"].clone();
        let artifact = d.join(format!("model-seed{seed}.pkl"));
        assert_eq!(section["weights_blake3"], file_blake3(&artifact));
        assert_eq!(section["model"], artifact.display().to_string());
        assert_eq!(section["scores"]["blake3"], file_blake3(&scores));
        assert_eq!(section["scores"]["key"], "customer_id");
        assert_eq!(section["scores"]["rows"], mlp_evaluation["overall"]["rows"]);
        // The rows are the MLP's rows, digested again from the shards.
        assert_eq!(section["rows_blake3"], mlp_evaluation["rows_blake3"]);
        // The scores were joined to their own rows: evaluate's AUC is the team's own.
        let auc = section["overall"]["auc"].as_f64().unwrap();
        assert!(
            (auc - own_auc).abs() < 1e-9,
            "evaluate {auc}, the script {own_auc}"
        );
        assert!(auc > 0.8, "{auc}");
        assert!(section["slices"]["contract"].as_object().unwrap().len() >= 3);
        crate::schema::evaluate_matches_its_schema(&out.json());
        judged.push(out.stdout);
    }
    let floor = stage(
        "noise-floor",
        &["--metric".as_ref(), "evaluate.overall.auc".as_ref()],
        judged.concat(),
    );
    let spread = &floor.json()["noise_floor"];
    assert_eq!(spread["n"], 3);
    assert!(spread["floor"].as_f64().unwrap() > 0.0, "{spread}");

    let against_prod = stage(
        "evaluate",
        &[
            "--as".as_ref(),
            "baseline".as_ref(),
            "--model".as_ref(),
            "telco@prod".as_ref(),
            "--registry".as_ref(),
            os(&registry),
        ],
        floor.stdout,
    );
    let gated = tool("gate")
        .args(["-q"])
        .stdin(against_prod.stdout.clone())
        .run();
    let gate = &gated.json()["gate"];
    assert_eq!(gated.code, 0, "{gate}");
    assert_eq!(gate["method"], "paired", "the gate paired the rows: {gate}");

    // Tampering after evaluation: a scores file or a pickle that changed is refused.
    let scores = d.join("scores-seed1.parquet");
    let original = std::fs::read(&scores).unwrap();
    let mut changed = original.clone();
    let at = changed.len() / 2;
    changed[at] ^= 0x55;
    std::fs::write(&scores, &changed).unwrap();
    tool("gate")
        .stdin(against_prod.stdout.clone())
        .run()
        .assert_bad_input("gate", "evaluate.scores");
    let register_refuses = |field: &str| {
        tool("register")
            .args(["--registry".as_ref(), os(&registry)])
            .args(["--name", "telco"])
            .stdin(gated.stdout.clone())
            .run()
            .assert_bad_input("register", field)
    };
    register_refuses("evaluate.scores");
    std::fs::write(&scores, &original).unwrap();
    let artifact = d.join("model-seed1.pkl");
    let pickle = std::fs::read(&artifact).unwrap();
    std::fs::write(&artifact, [pickle.as_slice(), b"\0"].concat()).unwrap();
    register_refuses("external_train.artifact");
    std::fs::write(&artifact, &pickle).unwrap();

    // Registered with its lineage, the pickle content-addressed; prod now names it.
    let registered = stage(
        "register",
        &[
            "--registry".as_ref(),
            os(&registry),
            "--name".as_ref(),
            "telco".as_ref(),
            "--promote".as_ref(),
            "prod".as_ref(),
        ],
        gated.stdout,
    );
    assert_eq!(registered.json()["register"]["version"], 2);
    let resolved = stage(
        "register",
        &[
            "resolve".as_ref(),
            "telco@prod".as_ref(),
            "--registry".as_ref(),
            os(&registry),
        ],
        "",
    )
    .json();
    assert_eq!(resolved["version"], 2);
    assert_eq!(resolved["blobs"]["weights_format"], "pickle");
    assert_eq!(
        resolved["weights_format"], "pickle",
        "at the top, as the guide says"
    );
    assert_eq!(resolved["framework"], resolved["blobs"]["framework"]);
    assert!(
        resolved["blobs"]["framework"]
            .as_str()
            .unwrap()
            .starts_with("scikit-learn ")
    );
    assert_eq!(resolved["weights_blake3"], file_blake3(&artifact));
    let stored = PathBuf::from(resolved["weights"].as_str().unwrap());
    assert_eq!(std::fs::read(stored).unwrap(), pickle);
    let scores_blob = resolved["blobs"]["scores"].as_str().unwrap();
    assert_eq!(scores_blob, file_blake3(&scores));
    assert_eq!(mlp.json()["register"]["version"], 1);

    // runfn cannot run the pickle, and says what to do instead of failing on its bytes; the
    // next candidate is judged against it by prod's own scores.
    tool("evaluate")
        .args(["--as", "baseline", "--model", "telco@prod", "--registry"])
        .args([os(&registry)])
        .stdin(evaluated.stdout.clone())
        .run()
        .assert_bad_input("evaluate", "is an outside model (pickle");
    let external_baseline = stage(
        "evaluate",
        &[
            "--as".as_ref(),
            "baseline".as_ref(),
            "--scores".as_ref(),
            os(&scores),
        ],
        evaluated.stdout,
    );
    let baseline = &external_baseline.json()["baseline"];
    assert_eq!(baseline["weights_blake3"], file_blake3(&scores));
    let gated = tool("gate")
        .args(["-q"])
        .stdin(external_baseline.stdout)
        .run();
    assert_eq!(gated.json()["gate"]["method"], "paired", "{}", gated.stdout);
}

#[test]
fn scores_that_are_not_exactly_the_test_rows_probabilities_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let record = sharded(d);
    let parsed: Value = serde_json::from_str(&record).unwrap();
    let shards = PathBuf::from(parsed["shards"]["dir"].as_str().unwrap());
    // The test split's and the val split's customers, as the shards hold them.
    let keys_of = |split: &str| -> Vec<String> {
        let script = "import json,sys,pyarrow.parquet as pq\n\
            d,s=sys.argv[1],sys.argv[2]\n\
            i=json.load(open(d+'/index.json'))\n\
            for sh in i['splits'][s]['shards']:\n    \
                [print(k) for k in pq.read_table(d+'/'+sh['path'],columns=['customer_id']).column(0).to_pylist()]\n";
        crate::util::python_stdout(script, &[shards.as_os_str(), split.as_ref()])
            .lines()
            .map(String::from)
            .collect()
    };
    let test = keys_of("test");
    let val = keys_of("val");
    let write = |name: &str, rows: &[(String, String)]| -> PathBuf {
        let path = d.join(name);
        let mut text = String::from("customer_id,score\n");
        for (k, s) in rows {
            text += &format!("{k},{s}\n");
        }
        std::fs::write(&path, text).unwrap();
        path
    };
    let good: Vec<(String, String)> = test.iter().map(|k| (k.clone(), "0.25".into())).collect();
    let judge = |path: &Path| {
        tool("evaluate")
            .args(["--scores".as_ref(), os(path)])
            .stdin(record.clone())
            .run()
    };
    assert_eq!(judge(&write("good.csv", &good)).code, 0);

    let mut other = good.clone();
    other[0].0 = val[0].clone();
    judge(&write("other.csv", &other))
        .assert_bad_input("evaluate", "is not a row of the `test` split");
    let val_scores: Vec<(String, String)> = val.iter().map(|k| (k.clone(), "0.5".into())).collect();
    judge(&write("val.csv", &val_scores))
        .assert_bad_input("evaluate", "is not a row of the `test` split");
    let missing = &good[1..];
    judge(&write("missing.csv", missing)).assert_bad_input("evaluate", "have no score");
    let mut twice = good.clone();
    twice.push(good[3].clone());
    judge(&write("twice.csv", &twice)).assert_bad_input("evaluate", "appears twice");
    for (name, bad) in [
        ("nan", "NaN"),
        ("inf", "inf"),
        ("margin", "3.2"),
        ("negative", "-0.1"),
    ] {
        let mut rows = good.clone();
        rows[5].1 = bad.into();
        judge(&write(&format!("{name}.csv"), &rows)).assert_bad_input("evaluate", "line 7");
    }
    let out = tool("evaluate")
        .args([
            "--scores".as_ref(),
            os(&write("good2.csv", &good)),
            "--key".as_ref(),
            "contract".as_ref(),
        ])
        .stdin(record.clone())
        .run();
    out.assert_bad_input(
        "evaluate",
        "good2.csv: has no column `contract` (columns: customer_id, score)",
    );
}
