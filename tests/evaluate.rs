//! evaluate: metrics checked against scikit-learn, slices, the baseline role, and bad inputs.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::train::{fixture, tiny_run, train};
use crate::util::{Output, python_with_pyarrow, tool};

/// scikit-learn's metrics (and ECE over 10 equal-width bins in numpy) from evaluate's CSV.
const REFERENCE: &str = r#"
import csv, json, sys
import numpy as np
from sklearn.metrics import roc_auc_score, log_loss, brier_score_loss, accuracy_score
rows = list(csv.DictReader(open(sys.argv[1])))
y = np.array([int(r["label"]) for r in rows])
p = np.array([float(r["score"]) for r in rows])
bins = np.minimum((p * 10).astype(int), 9)
ece = sum(abs(p[bins == b].sum() - y[bins == b].sum()) for b in range(10)) / len(p)
print(json.dumps({
    "auc": roc_auc_score(y, p),
    "logloss": log_loss(y, np.clip(p, 1e-15, 1 - 1e-15)),
    "brier": brier_score_loss(y, p),
    "accuracy": accuracy_score(y, p >= 0.5),
    "positive_rate": float((p >= 0.5).mean()),
    "ece": float(ece),
    "rows": len(p),
}))
"#;

#[test]
fn metrics_agree_with_scikit_learn_and_slices_cover_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let trained = train(&fixture().record, &dir.path().join("run"), &[]);
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let predictions = dir.path().join("predictions.csv");
    let out = tool("evaluate")
        .args(["--predictions".as_ref(), predictions.as_os_str()])
        .args(["--bootstrap", "100", "-q"])
        .stdin(trained.stdout)
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let record = out.json();
    let section = &record["evaluate"];
    assert_eq!(section["split"], "test");
    assert_eq!(section["passed"], true);
    assert_eq!(
        section["weights_blake3"], record["train"]["weights_blake3"],
        "scored the model train wrote"
    );
    let overall = &section["overall"];

    let python = python_with_pyarrow();
    let reference = Command::new(python)
        .args(["-c", REFERENCE])
        .arg(&predictions)
        .output()
        .unwrap();
    assert!(
        reference.status.success(),
        "{}",
        String::from_utf8_lossy(&reference.stderr)
    );
    let expected: Value = serde_json::from_slice(&reference.stdout).unwrap();
    assert_eq!(overall["rows"], expected["rows"]);
    for metric in [
        "auc",
        "logloss",
        "brier",
        "accuracy",
        "positive_rate",
        "ece",
    ] {
        let (ours, theirs) = (
            overall[metric].as_f64().unwrap(),
            expected[metric].as_f64().unwrap(),
        );
        assert!(
            (ours - theirs).abs() < 1e-9,
            "{metric}: evaluate {ours}, scikit-learn {theirs}"
        );
    }
    let ci = &overall["ci95"]["auc"];
    let auc = overall["auc"].as_f64().unwrap();
    assert!(ci[0].as_f64().unwrap() < auc && auc < ci[1].as_f64().unwrap());

    for column in ["region", "tier"] {
        let slices = section["slices"][column].as_object().unwrap();
        assert!(slices.len() >= 3, "{column}: {slices:?}");
        let rows: u64 = slices.values().map(|m| m["rows"].as_u64().unwrap()).sum();
        assert_eq!(
            rows,
            overall["rows"].as_u64().unwrap(),
            "{column} slices cover every row"
        );
    }
}

#[test]
fn the_baseline_role_scores_the_same_rows_under_its_own_key() {
    let dir = tempfile::tempdir().unwrap();
    let trained = train(&fixture().record, &dir.path().join("run"), &[]);
    let model = trained.json()["train"]["weights"]
        .as_str()
        .unwrap()
        .to_string();
    let candidate = tool("evaluate").args(["-q"]).stdin(trained.stdout).run();
    assert_eq!(candidate.code, 0, "{}", candidate.stderr);
    let both = tool("evaluate")
        .args(["--as", "baseline", "--model", &model, "-q"])
        .stdin(candidate.stdout)
        .run();
    assert_eq!(both.code, 0, "{}", both.stderr);
    let record = both.json();
    assert_eq!(record["baseline"]["overall"], record["evaluate"]["overall"]);
    assert_eq!(record["baseline"]["model"], model);
}

#[test]
fn a_slice_with_one_class_reports_a_null_auc_with_the_reason() {
    // Category `c` never churns.
    let rows: Vec<(String, &str, &str)> = (0..400)
        .map(|i| {
            let cat = ["a", "b", "c"][i % 3];
            let y = if cat != "c" && (i * 7) % 5 < 2 {
                "1"
            } else {
                "0"
            };
            (format!("{}", (i % 13) as f64 / 3.0), cat, y)
        })
        .collect();
    let rows: Vec<(&str, &str, &str)> = rows.iter().map(|(x, c, y)| (x.as_str(), *c, *y)).collect();
    let dir = tempfile::tempdir().unwrap();
    let config = serde_json::json!({"hidden": [4], "global_batch": 16, "max_steps": 30});
    let record = tiny_run(dir.path(), &rows, config);
    let trained = train(&record, &dir.path().join("run"), &[]);
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let out = tool("evaluate")
        .args(["--split", "val", "--slice", "cat", "-q"])
        .stdin(trained.stdout)
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let c = &out.json()["evaluate"]["slices"]["cat"]["c"];
    assert_eq!(c["auc"], Value::Null);
    assert!(
        c["auc_note"].as_str().unwrap().contains("both classes"),
        "{c}"
    );
    assert!(out.json()["evaluate"]["slices"]["cat"]["a"]["auc"].is_number());
}

#[test]
fn a_schema_that_differs_from_the_models_preprocessing_is_refused() {
    let config = serde_json::json!({"hidden": [4], "global_batch": 16, "max_steps": 10});
    let strings: Vec<(String, &str, &str)> = (0..200)
        .map(|i| {
            (
                format!("{}", i % 7),
                ["a", "b"][i % 2],
                ["0", "1"][(i / 3) % 2],
            )
        })
        .collect();
    let strings: Vec<(&str, &str, &str)> = strings
        .iter()
        .map(|(x, c, y)| (x.as_str(), *c, *y))
        .collect();
    let a = tempfile::tempdir().unwrap();
    let trained = train(
        &tiny_run(a.path(), &strings, config.clone()),
        &a.path().join("run"),
        &[],
    );
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let model = a.path().join("run/model.safetensors");

    // The same columns, but `cat` holds numbers.
    let numbers: Vec<(&str, &str, &str)> = strings.iter().map(|(x, _, y)| (*x, "3", *y)).collect();
    let b = tempfile::tempdir().unwrap();
    let other = tiny_run(b.path(), &numbers, config);
    tool("evaluate")
        .args(["--split", "val", "--model", model.to_str().unwrap()])
        .stdin(other)
        .run()
        .assert_bad_input("evaluate", "column `cat` is Int64, but the model's preprocessing treats it as a string column (schema mismatch)");
}

#[test]
fn bad_usage_names_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let trained = train(&fixture().record, &dir.path().join("run"), &[]);
    tool("evaluate")
        .args(["--split", "holdout"])
        .stdin(trained.stdout.clone())
        .run()
        .assert_bad_input("evaluate", "`holdout` is not a split");
    tool("evaluate")
        .args(["--model", "/nonexistent/model.safetensors"])
        .stdin(trained.stdout.clone())
        .run()
        .assert_bad_input("evaluate", "/nonexistent/model.safetensors");
    tool("evaluate")
        .args(["--model", "churn@prod", "--registry"])
        .args([dir.path()])
        .stdin(trained.stdout.clone())
        .run()
        .assert_bad_input("evaluate", "no registry at");
    let not_a_model = dir.path().join("model.safetensors");
    std::fs::write(&not_a_model, b"\x08\0\0\0\0\0\0\0{}garbage").unwrap();
    tool("evaluate")
        .args(["--model".as_ref(), not_a_model.as_os_str()])
        .stdin(trained.stdout.clone())
        .run()
        .assert_bad_input("evaluate", "model.safetensors");
    tool("evaluate")
        .stdin(crate::train::edited(|r| {
            r.as_object_mut().unwrap().remove("train");
        }))
        .run()
        .assert_bad_input("evaluate", "run train first");
}

/// The model file with one byte of its weights flipped.
fn flipped(model: &std::path::Path) -> Vec<u8> {
    let mut bytes = std::fs::read(model).unwrap();
    let at = bytes.len() - 5;
    bytes[at] ^= 0x40;
    bytes
}

fn replace(path: &std::path::Path, bytes: &[u8]) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_model_that_is_not_what_the_record_or_registry_names_is_never_scored() {
    let dir = tempfile::tempdir().unwrap();
    let trained = train(&fixture().record, &dir.path().join("run"), &[]);
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let other = train(
        &fixture().record,
        &dir.path().join("other"),
        &["--seed", "5"],
    );
    assert_eq!(other.code, 0, "{}", other.stderr);
    let model = dir.path().join("run/model.safetensors");
    let good = std::fs::read(&model).unwrap();
    let other_model = std::fs::read(dir.path().join("other/model.safetensors")).unwrap();

    // One byte flipped: the file's own checksum catches it, with or without a record.
    let damaged = dir.path().join("damaged.safetensors");
    std::fs::write(&damaged, flipped(&model)).unwrap();
    tool("evaluate")
        .args(["--model".as_ref(), damaged.as_os_str()])
        .stdin(trained.stdout.clone())
        .run()
        .assert_bad_input(
            "evaluate",
            "damaged.safetensors: the model was modified or is corrupt",
        );
    replace(&model, &flipped(&model));
    tool("evaluate")
        .stdin(trained.stdout.clone())
        .run()
        .assert_bad_input(
            "evaluate",
            "model.safetensors: the model was modified or is corrupt",
        );
    // A valid model, but another one than the record's train.weights_blake3.
    replace(&model, &other_model);
    tool("evaluate")
        .stdin(trained.stdout.clone())
        .run()
        .assert_bad_input("evaluate", "model.safetensors: is not the model named");
    replace(&model, &good);
    let evaluated = tool("evaluate")
        .args(["-q"])
        .stdin(trained.stdout.clone())
        .run();
    assert_eq!(evaluated.code, 0, "{}", evaluated.stderr);

    // A registered model whose blob was replaced by another valid model.
    let gated = tool("gate")
        .args(["--no-baseline", "-q"])
        .stdin(evaluated.stdout)
        .run();
    assert_eq!(gated.code, 0, "{}", gated.stderr);
    let registry = dir.path().join("registry");
    let registered = tool("register")
        .args(["--registry".as_ref(), registry.as_os_str()])
        .args(["--name", "m", "-q"])
        .stdin(gated.stdout)
        .run();
    assert_eq!(registered.code, 0, "{}", registered.stderr);
    let hash = blake3::hash(&good).to_hex().to_string();
    let blob = walk_for(&registry, &hash).expect("the blob is stored under its hash");
    let score = |expect_ok: bool| {
        let out = tool("evaluate")
            .args(["--model", "m@1", "--as", "baseline", "-q", "--registry"])
            .args([registry.as_os_str()])
            .stdin(trained.stdout.clone())
            .run();
        if expect_ok {
            assert_eq!(out.code, 0, "{}", out.stderr);
        }
        out
    };
    score(true);
    replace(&blob, &other_model);
    score(false).assert_bad_input("evaluate", "is not the model named");
}

/// The file named `name` somewhere under `dir`.
fn walk_for(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
        if path.is_dir()
            && let Some(found) = walk_for(&path, name)
        {
            return Some(found);
        }
    }
    None
}

/// A run whose data holds twins across splits, let through by tolerances: evaluate scores the
/// test split with and without the rows that have a twin in train, and those rows are exactly
/// the ones leak-check pairs with a train row on the shards.
#[test]
fn contamination_scores_the_test_split_without_its_training_twins() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = crate::util::demo_snapshot(
        &dir.path().join("snapshot"),
        8_000,
        &[
            "--trap-exact-duplicates",
            "60",
            "--trap-duplicate-notes",
            "40",
        ],
    );
    let manifest = tool("mf-hash")
        .args(["testdata/train/manifest.yaml", "-q"])
        .run();
    let mut record: Value = serde_json::from_str(&manifest.stdout).unwrap();
    record["manifest"]["leaks"] = serde_json::json!({
        "exact_duplicates": {"max_fraction": 0.5, "reason": "resold accounts"},
        "near_duplicates": {"max_fraction": 0.5, "reason": "notes from templates"},
    });
    crate::util::rehash(&mut record);
    let checked = tool("leak-check")
        .args(["--in".as_ref(), snapshot.as_os_str(), "-q".as_ref()])
        .stdin(record.to_string())
        .run();
    assert_eq!(checked.code, 0, "{}", checked.stdout);
    let shards = dir.path().join("shards");
    let sharded = tool("shardify")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .args(["--out".as_ref(), shards.as_os_str()])
        .args(["--shard-rows", "700", "-q"])
        .stdin(checked.stdout)
        .run();
    assert_eq!(sharded.code, 0, "{}", sharded.stderr);
    // leak-check again, on the shards, for the pairs by shard and row.
    let pairs_file = dir.path().join("pairs.jsonl");
    let on_shards = tool("leak-check")
        .args([
            "--pairs-out".as_ref(),
            pairs_file.as_os_str(),
            "-q".as_ref(),
        ])
        .stdin(sharded.stdout.clone())
        .run();
    assert_eq!(on_shards.code, 0, "{}", on_shards.stderr);
    let trained = train(&sharded.stdout, &dir.path().join("run"), &[]);
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let predictions = dir.path().join("predictions.csv");
    let out = tool("evaluate")
        .args([
            "--predictions".as_ref(),
            predictions.as_os_str(),
            "-q".as_ref(),
        ])
        .stdin(trained.stdout)
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    crate::schema::evaluate_matches_its_schema(&out.json());
    let evaluated = out.json()["evaluate"].clone();
    let contamination = &evaluated["contamination"];

    // The test rows leak-check pairs with a train row, as positions in evaluate's order.
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(shards.join("index.json")).unwrap()).unwrap();
    let mut start = std::collections::BTreeMap::new();
    let mut offset = 0;
    for shard in index["splits"]["test"]["shards"].as_array().unwrap() {
        start.insert(
            shards
                .join(shard["path"].as_str().unwrap())
                .display()
                .to_string(),
            offset,
        );
        offset += shard["rows"].as_u64().unwrap();
    }
    let twins: std::collections::BTreeSet<u64> = std::fs::read_to_string(&pairs_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|p| p["earlier"]["split"] == "train" && p["later"]["split"] == "test")
        .map(|p| {
            start[p["later"]["file"].as_str().unwrap()] + p["later"]["row"].as_u64().unwrap() - 1
        })
        .collect();
    assert!(!twins.is_empty());
    assert_eq!(contamination["twin_rows"], twins.len(), "{contamination}");
    assert_eq!(contamination["twins_in"], "train");

    let kept: Vec<f64> = std::fs::read_to_string(&predictions)
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            let row: u64 = fields[0].parse().unwrap();
            (!twins.contains(&row)).then(|| fields[2].parse().unwrap())
        })
        .collect();
    let without = &contamination["overall_without_twins"];
    assert_eq!(without["rows"], kept.len());
    let mean = kept.iter().sum::<f64>() / kept.len() as f64;
    assert!(
        (without["mean_score"].as_f64().unwrap() - mean).abs() < 1e-12,
        "{without}"
    );
    let delta = evaluated["overall"]["auc"].as_f64().unwrap() - without["auc"].as_f64().unwrap();
    assert!((contamination["delta_auc"].as_f64().unwrap() - delta).abs() < 1e-15);
}

#[test]
fn checkpoint_best_scores_the_kept_best_weights_and_needs_keep_best() {
    let dir = tempfile::tempdir().unwrap();
    let trained = train(
        &crate::train::keep_best_record(),
        &dir.path().join("run"),
        &[],
    );
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let best = trained.json()["train"]["best"].clone();
    let checkpoint = best["checkpoint"].as_str().unwrap().to_string();
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(&checkpoint).unwrap()).unwrap();
    let scored = tool("evaluate")
        .args(["--checkpoint", "best", "--split", "val", "-q"])
        .stdin(trained.stdout.clone())
        .run();
    assert_eq!(scored.code, 0, "{}", scored.stderr);
    let record = scored.json();
    crate::schema::evaluate_matches_its_schema(&record);
    let section = &record["evaluate"];
    assert_eq!(section["model"], checkpoint.as_str(), "says what it scored");
    assert_eq!(section["weights_blake3"], state["tensors"]["blake3"]);
    let auc = section["overall"]["auc"].as_f64().unwrap();
    let val_auc = best["val_auc"].as_f64().unwrap();
    assert!(
        (auc - val_auc).abs() < 1e-9,
        "the best checkpoint's weights score val as train did: {auc} vs {val_auc}"
    );
    let last = tool("evaluate")
        .args(["--split", "val", "-q"])
        .stdin(trained.stdout.clone())
        .run();
    assert_eq!(last.code, 0, "{}", last.stderr);
    let last = last.json();
    assert_eq!(last["evaluate"]["model"], last["train"]["weights"]);
    assert_ne!(
        last["evaluate"]["overall"]["auc"],
        section["overall"]["auc"]
    );

    let conflicting = tool("evaluate")
        .args(["--checkpoint", "best", "--model", "x.safetensors", "-q"])
        .stdin(trained.stdout.clone())
        .run();
    assert_eq!(conflicting.code, 2, "{}", conflicting.stderr);
    assert!(
        conflicting.stderr.contains("--model"),
        "{}",
        conflicting.stderr
    );

    let tensors = std::path::Path::new(&checkpoint).with_extension("safetensors");
    let mut bytes = std::fs::read(&tensors).unwrap();
    let last_byte = bytes.len() - 1;
    bytes[last_byte] ^= 1;
    std::fs::write(&tensors, bytes).unwrap();
    tool("evaluate")
        .args(["--checkpoint", "best", "-q"])
        .stdin(trained.stdout)
        .run()
        .assert_bad_input("evaluate", "checksum mismatch");

    let plain = train(&fixture().record, &dir.path().join("plain"), &[]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    tool("evaluate")
        .args(["--checkpoint", "best", "-q"])
        .stdin(plain.stdout)
        .run()
        .assert_bad_input("evaluate", "--checkpoint: best needs train.best");
}

/// The record with `edit` applied to its manifest and the manifest hashed again, as mf-hash
/// would: gate refuses a manifest edited after hashing.
fn rehashed(record: &str, edit: impl FnOnce(&mut Value)) -> String {
    let mut record: Value = serde_json::from_str(record).unwrap();
    edit(&mut record["manifest"]);
    let hashed = tool("mf-hash")
        .args(["-", "--format", "json", "-q"])
        .stdin(record["manifest"].to_string())
        .run();
    assert_eq!(hashed.code, 0, "{}", hashed.stderr);
    record["manifest_hash"] = hashed.json()["manifest_hash"].clone();
    record.to_string()
}

/// The user renamed the `tier` values `basic` → `standard` and retrained: the model in
/// production never saw `standard` and scores those rows as unknown. evaluate counts them, and
/// gate refuses to call the comparison fair (it would hand the candidate a fake win) unless the
/// manifest accepts it with a reason.
#[test]
fn a_renamed_category_makes_the_baseline_not_comparable() {
    let dir = tempfile::tempdir().unwrap();
    let baseline = train(&fixture().record, &dir.path().join("prod"), &[]);
    assert_eq!(baseline.code, 0, "{}", baseline.stderr);
    let renamed = dir.path().join("renamed");
    std::fs::create_dir_all(&renamed).unwrap();
    for part in ["part-00000.csv", "part-00001.csv"] {
        let text = std::fs::read_to_string(fixture().dir.join("snapshot").join(part)).unwrap();
        std::fs::write(renamed.join(part), text.replace(",basic,", ",standard,")).unwrap();
    }
    let record = crate::train::shards_record(
        "testdata/train/manifest.yaml",
        &renamed,
        &dir.path().join("shards"),
    );
    let gate_renamed = |record: &str, prod: &Output, out: &str| {
        let candidate = train(record, &dir.path().join(out), &[]);
        assert_eq!(candidate.code, 0, "{}", candidate.stderr);
        let evaluated = tool("evaluate").args(["-q"]).stdin(candidate.stdout).run();
        assert_eq!(evaluated.code, 0, "{}", evaluated.stderr);
        let model = prod.json()["train"]["weights"]
            .as_str()
            .unwrap()
            .to_string();
        let compared = tool("evaluate")
            .args(["--as", "baseline", "--model", &model])
            .stdin(evaluated.stdout)
            .run();
        assert_eq!(compared.code, 0, "{}", compared.stderr);
        (compared.json(), tool("gate").stdin(compared.stdout).run())
    };
    let (compared, gated) = gate_renamed(&record, &baseline, "candidate");
    let share = |section: &str| {
        compared[section]["unseen"]["tier"]["fraction"]
            .as_f64()
            .unwrap()
    };
    assert!(
        share("baseline") > 0.2,
        "{}",
        compared["baseline"]["unseen"]
    );
    assert_eq!(share("evaluate"), 0.0, "{}", compared["evaluate"]["unseen"]);
    crate::schema::evaluate_matches_its_schema(&compared);
    assert_eq!(gated.code, 1, "{}", gated.stderr);
    let reasons = gated.json()["gate"]["reasons"].clone();
    assert!(
        reasons[0]
            .as_str()
            .unwrap()
            .starts_with("baseline_comparable: ")
            && reasons[0]
                .as_str()
                .unwrap()
                .contains("`tier` values the baseline's preprocessing never saw"),
        "{reasons}"
    );

    let accepted = rehashed(&record, |manifest| {
        manifest["eval"]["unseen_reason"] = "tier basic was renamed standard".into()
    });
    let (_, gated) = gate_renamed(&accepted, &baseline, "accepted");
    let check = gated.json()["gate"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "baseline_comparable")
        .unwrap()
        .clone();
    assert_eq!(check["passed"], true, "{check}");
    assert!(
        check["note"]
            .as_str()
            .unwrap()
            .contains("accepted: tier basic was renamed")
    );
}

#[test]
fn a_declared_row_key_keys_the_per_row_scores_and_must_be_unique() {
    let dir = tempfile::tempdir().unwrap();
    let trained = train(&fixture().record, &dir.path().join("run"), &[]);
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let keyed = rehashed(&trained.stdout, |m| {
        m["eval"]["row_key"] = "customer_id".into()
    });
    let out = tool("evaluate").args(["-q"]).stdin(keyed).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let section = out.json()["evaluate"].clone();
    assert_eq!(section["row_scores"]["key"], "customer_id");
    let path = section["row_scores"]["path"].as_str().unwrap();
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        section["row_scores"]["blake3"],
        blake3::hash(&bytes).to_hex().to_string()
    );
    let scores = runfn_data::row_scores::RowScores::read(std::path::Path::new(path)).unwrap();
    let keys = scores.keys.unwrap();
    assert_eq!(
        keys.len() as u64,
        section["overall"]["rows"].as_u64().unwrap()
    );
    assert!(keys.iter().all(|k| k.starts_with('C')), "{:?}", &keys[..3]);
    assert_eq!(
        scores.slices.len(),
        2,
        "region and tier, the key not among them"
    );

    let not_a_key = rehashed(&trained.stdout, |m| m["eval"]["row_key"] = "region".into());
    let out = tool("evaluate").args(["-q"]).stdin(not_a_key).run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.starts_with(
            "evaluate: manifest.eval.row_key: `region` is not a key of `test`: the value"
        ),
        "{}",
        out.stderr
    );
}

/// `--memory` bounds what evaluate holds: at a budget of a kibibyte every sorter spills, and
/// the section, the row scores file and the predictions are those of a budget that holds
/// everything. The spill folder goes with the run, the timings entry names the budget, and a
/// bootstrap that cannot fit is refused before anything is scored.
#[test]
fn a_tiny_memory_budget_spills_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let trained = train(&fixture().record, &dir.path().join("run"), &[]);
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let keyed = rehashed(&trained.stdout, |m| {
        m["eval"]["row_key"] = "customer_id".into()
    });
    let spill = dir.path().join("tmp");
    std::fs::create_dir(&spill).unwrap();
    let run = |memory: &str| {
        let predictions = dir.path().join(format!("predictions-{memory}.csv"));
        let out = tool("evaluate")
            .args(["--memory", memory, "-q"])
            .args(["--predictions".as_ref(), predictions.as_os_str()])
            .env("TMPDIR", &spill)
            .stdin(keyed.clone())
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        let record = out.json();
        let row_scores = record["evaluate"]["row_scores"]["path"].as_str().unwrap();
        let row_scores = std::fs::read(row_scores).unwrap();
        let entry = record["timings"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        (
            record["evaluate"].clone(),
            row_scores,
            std::fs::read(predictions).unwrap(),
            entry,
        )
    };
    let (small, small_scores, small_predictions, entry) = run("1K");
    assert_eq!(entry["tool"], "evaluate");
    assert_eq!(entry["memory_budget_bytes"], 1024);
    // Each row is sorted once overall and once per slice column: past 2,048 records (the
    // sorter's smallest run) the runs go to disk.
    assert!(
        small["overall"]["rows"].as_u64().unwrap() * 3 > 2 * 2048,
        "enough rows that a kibibyte's sorter spills"
    );
    assert_eq!(
        std::fs::read_dir(&spill).unwrap().count(),
        0,
        "the spilled runs go with the run"
    );
    let (large, large_scores, large_predictions, _) = run("8G");
    assert_eq!(small, large);
    assert_eq!(small_scores, large_scores);
    assert_eq!(small_predictions, large_predictions);
    assert!(small["mistakes"].as_array().is_some_and(|m| m.len() == 10));
    assert!(small["score_bins"]["counts"].as_array().is_some());

    let out = tool("evaluate")
        .args(["--memory", "1K", "--bootstrap", "100", "-q"])
        .stdin(keyed)
        .run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("evaluate: --bootstrap: resamples every row in memory"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty());
}

/// `--part K/N --parts DIR` scores a part's shards; `--parts DIR` alone merges them into the
/// record, row scores file and predictions one process writes, byte for byte. A missing part,
/// a changed rows file and outside scores in parts are refused by name.
#[test]
fn parts_and_their_merge_write_what_one_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    let trained = train(&fixture().record, &dir.path().join("run"), &[]);
    assert_eq!(trained.code, 0, "{}", trained.stderr);
    let keyed = rehashed(&trained.stdout, |m| {
        m["eval"]["row_key"] = "customer_id".into()
    });
    let run = |name: &str, extra: &[&str]| {
        let row_scores = dir.path().join(format!("{name}.parquet"));
        let predictions = dir.path().join(format!("{name}.csv"));
        let out = tool("evaluate")
            .args(["--row-scores".as_ref(), row_scores.as_os_str()])
            .args(["--predictions".as_ref(), predictions.as_os_str()])
            .args(["--split", "train", "-q"])
            .args(extra)
            .stdin(keyed.clone())
            .run();
        (out, row_scores, predictions)
    };
    let (one, one_scores, one_predictions) = run("one", &[]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let parts = dir.path().join("parts");
    let parts_arg = parts.to_str().unwrap();
    for k in 0..3 {
        let out = tool("evaluate")
            .args(["--part", &format!("{k}/3"), "--parts", parts_arg])
            .args(["--split", "train", "-q"])
            .stdin(keyed.clone())
            .run();
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(out.json()["part"]["part"], format!("{k}/3"));
    }
    let (merged, merged_scores, merged_predictions) = run("merged", &["--parts", parts_arg]);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let (mut one_section, mut merged_section) = (
        one.json()["evaluate"].clone(),
        merged.json()["evaluate"].clone(),
    );
    assert!(one_section["overall"]["rows"].as_u64().unwrap() > 5000);
    for section in [&mut one_section, &mut merged_section] {
        section["row_scores"]["path"] = Value::Null;
    }
    assert_eq!(merged_section, one_section);
    assert_eq!(
        std::fs::read(merged_scores).unwrap(),
        std::fs::read(one_scores).unwrap()
    );
    assert_eq!(
        std::fs::read(merged_predictions).unwrap(),
        std::fs::read(one_predictions).unwrap()
    );

    let rows_file = parts.join("evaluate.part-1-of-3.rows");
    let bytes = std::fs::read(&rows_file).unwrap();
    let mut changed = bytes.clone();
    let at = changed.len() / 2;
    changed[at] ^= 1;
    std::fs::write(&rows_file, &changed).unwrap();
    let (out, _, _) = run("changed", &["--parts", parts_arg]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("evaluate.part-1-of-3.rows")
            && out.stderr.contains("changed after the part wrote it"),
        "{}",
        out.stderr
    );
    std::fs::remove_file(parts.join("evaluate.part-1-of-3.json")).unwrap();
    let (out, _, _) = run("missing", &["--parts", parts_arg]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("lacks part 1 of 3"), "{}", out.stderr);
    assert!(out.stdout.is_empty());

    // A part re-hashes the shards it scores and no others: a byte changed in the split's last
    // shard stops the last part, by name, and not the first.
    let copy = dir.path().join("shards-copy");
    let shards_dir = Path::new(
        serde_json::from_str::<Value>(&keyed).unwrap()["shards"]["dir"]
            .as_str()
            .unwrap(),
    )
    .to_path_buf();
    copy_dir(&shards_dir, &copy);
    let index: Value =
        serde_json::from_slice(&std::fs::read(copy.join("index.json")).unwrap()).unwrap();
    let last = index["splits"]["train"]["shards"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["path"]
        .as_str()
        .unwrap()
        .to_string();
    let mut bytes = std::fs::read(copy.join(&last)).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    std::fs::write(copy.join(&last), bytes).unwrap();
    let part = |k: u32| {
        tool("evaluate")
            .args(["--part", &format!("{k}/3"), "--parts"])
            .args([dir.path().join("copy-parts").as_os_str()])
            .args(["--shards".as_ref(), copy.as_os_str()])
            .args(["--split", "train", "-q"])
            .stdin(keyed.clone())
            .run()
    };
    assert_eq!(part(0).code, 0);
    let changed = part(2);
    assert_eq!(changed.code, 2, "{}", changed.stderr);
    assert!(
        changed.stderr.contains(&last) && changed.stderr.contains("does not match index.json"),
        "{}",
        changed.stderr
    );

    let scores = dir.path().join("outside.csv");
    std::fs::write(&scores, "customer_id,score\n").unwrap();
    let out = tool("evaluate")
        .args(["--scores".as_ref(), scores.as_os_str()])
        .args(["--part", "0/2", "--parts", parts_arg, "-q"])
        .stdin(keyed)
        .run();
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.starts_with("evaluate: --parts: "),
        "{}",
        out.stderr
    );
}

/// Copies the files of `from` (one level of folders deep) into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
