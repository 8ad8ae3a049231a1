//! The whole chain on real public tables (testdata/real), as a user runs it on their own data:
//! the pinned snapshot verified, profiled, split, trained and scored, and the model compared with
//! a logistic regression fitted by scikit-learn on the same train split and scored on the same
//! test rows: with each manifest's own config, and with the default config (early stopping on
//! the val AUC), which has to come within 0.01 of it on every table.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{Output, python_with_pyarrow, tool};

/// The logistic-regression reference: standardized numbers (nulls take the train mean), one-hot
/// strings, fitted on the train shards, scored on the test shards. Prints the test AUC.
const LOGISTIC: &str = r#"
import json, sys
import numpy as np, pyarrow.parquet as pq, pyarrow as pa
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
shards, label, drop = sys.argv[1], sys.argv[2], set(sys.argv[3].split(","))
index = json.load(open(f"{shards}/index.json"))
def split(name):
    tables = [pq.read_table(f"{shards}/{s['path']}") for s in index["splits"][name]["shards"]]
    return pa.concat_tables(tables).to_pydict()
train, test = split("train"), split("test")
columns = [c for c in train if c != label and c not in drop and not c.startswith("_")]
def encode(rows, fit):
    out = []
    for c in columns:
        v = rows[c]
        if isinstance(next((x for x in train[c] if x is not None), 0), str):
            cats = fit.setdefault(c, sorted({x for x in train[c] if x is not None}))
            out += [[1.0 if x == k else 0.0 for x in v] for k in cats]
        else:
            if c not in fit:
                t = np.array([np.nan if x is None else float(x) for x in train[c]])
                fit[c] = (np.nanmean(t), np.nanstd(t) or 1.0)
            m, s = fit[c]
            out.append([((m if x is None else float(x)) - m) / s for x in v])
    return np.array(out).T
fit = {}
x_train, x_test = encode(train, fit), encode(test, fit)
model = LogisticRegression(max_iter=5000).fit(x_train, np.array(train[label], dtype=float))
print(roc_auc_score(np.array(test[label], dtype=float), model.predict_proba(x_test)[:, 1]))
"#;

pub struct Table {
    pub name: &'static str,
    pub label: &'static str,
    /// Columns that are not features: the entity and the time stamps.
    pub not_features: &'static str,
}

pub const EMAIL: Table = Table {
    name: "email",
    label: "spam",
    not_features: "email_id,time",
};
pub const TELCO: Table = Table {
    name: "telco",
    label: "churned",
    not_features: "customer_id",
};
pub const RESUME: Table = Table {
    name: "resume",
    label: "received_callback",
    not_features: "job_ad_id",
};

pub fn manifest(table: &Table) -> PathBuf {
    crate::util::testdata(&format!("real/{}/manifest.yaml", table.name))
}

fn stage(name: &str, args: &[&std::ffi::OsStr], stdin: String) -> Output {
    let out = tool(name).args(args).args(["-q"]).stdin(stdin).run();
    assert_eq!(out.code, 0, "{name}: {}", out.stderr);
    out
}

/// `table`'s manifest with its `config` reduced to `{model: mlp}`, written to `dir`. The snapshot
/// path in it stays relative to the repository root, where the tools run.
fn default_config_manifest(table: &Table, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(manifest(table)).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .map(|l| {
            if l.starts_with("config:") {
                "config: {model: mlp}"
            } else {
                l
            }
        })
        .collect();
    assert!(lines.contains(&"config: {model: mlp}"), "{text}");
    let path = dir.join("manifest.yaml");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// mf-hash (verifying the pinned digest), ds-validate, leak-check, shardify, ckpt-interval,
/// train, evaluate: the pipeline's stages, as a user chains them.
pub fn chain(table: &Table, dir: &Path) -> Value {
    chain_from(&manifest(table), table, dir)
}

fn chain_from(manifest: &Path, table: &Table, dir: &Path) -> Value {
    let snapshot = format!("testdata/real/{}/snapshot", table.name);
    let hashed = stage(
        "mf-hash",
        &[
            manifest.as_os_str(),
            "--data-digest".as_ref(),
            snapshot.as_ref(),
        ],
        String::new(),
    );
    let validated = stage("ds-validate", &[], hashed.stdout);
    // The tables' twins are real, distinct rows: the manifests tolerate a few, with a reason.
    let checked = stage("leak-check", &[], validated.stdout);
    let shards = dir.join("shards");
    let sharded = stage(
        "shardify",
        &["--out".as_ref(), shards.as_os_str()],
        checked.stdout,
    );
    // A plan with guessed figures, as a user writes it before the first run: report compares
    // them with what train measured.
    let planned = stage(
        "ckpt-interval",
        &["--cost", "0.01", "--mtbf", "3600", "--step-time", "0.002"].map(std::ffi::OsStr::new),
        sharded.stdout,
    );
    let trained = stage(
        "train",
        &[
            "--out".as_ref(),
            dir.join("train").as_os_str(),
            "--threads".as_ref(),
            "1".as_ref(),
        ],
        planned.stdout,
    );
    stage("evaluate", &[], trained.stdout).json()
}

fn logistic_auc(table: &Table, shards: &Path) -> f64 {
    let out = Command::new(python_with_pyarrow())
        .args(["-c", LOGISTIC])
        .arg(shards)
        .args([table.label, table.not_features])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn learns_as_well_as_a_logistic_regression(table: &Table) {
    let dir = tempfile::tempdir().unwrap();
    let record = chain(table, dir.path());
    let digest = &record["mf_hash"]["data_digest"]["digest"];
    let pinned = record["manifest"]["data"]["snapshot"].as_str().unwrap();
    assert!(
        pinned.ends_with(&format!("@{}", digest.as_str().unwrap())),
        "the record's digest is of the snapshot the manifest pins: {pinned} vs {digest}"
    );
    let twins = record["leaks"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "exact_duplicates")
        .unwrap()
        .clone();
    assert!(
        twins["count"].as_u64().unwrap() > 0 && twins["passed"] == true,
        "the tolerated twins are counted and let through: {twins}"
    );
    assert!(
        twins["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{twins}"
    );
    // What the twins do to the result: the test split scored without its rows that have a
    // training twin (the contamination effect). Real twins here are few and change little.
    let contamination = &record["evaluate"]["contamination"];
    let twin_rows = contamination["twin_rows"].as_u64().unwrap();
    let delta = contamination["delta_auc"].as_f64().unwrap();
    assert!(twin_rows > 0, "{contamination}");
    assert!(
        delta.abs() < 0.01,
        "{}: twins moved AUC by {delta}",
        table.name
    );
    eprintln!(
        "{}: {twin_rows} test rows with a training twin; AUC without them {} (delta {delta:+.5})",
        table.name, contamination["overall_without_twins"]["auc"]
    );
    let auc = record["evaluate"]["overall"]["auc"].as_f64().unwrap();
    let reference = logistic_auc(table, &dir.path().join("shards"));
    assert!(
        auc >= reference - 0.02,
        "{}: test AUC {auc:.4}, logistic regression {reference:.4}",
        table.name
    );
}

#[test]
fn email_spam_learns_as_well_as_a_logistic_regression() {
    learns_as_well_as_a_logistic_regression(&EMAIL);
}

#[test]
fn telco_churn_learns_as_well_as_a_logistic_regression() {
    learns_as_well_as_a_logistic_regression(&TELCO);
}

/// The default config (a manifest whose config is only `model: mlp`) on `table`: test AUC within
/// 0.01 of the logistic regression, the weights of the best val AUC.
fn default_config_does_as_well_as_a_logistic_regression(table: &Table) {
    let dir = tempfile::tempdir().unwrap();
    let manifest = default_config_manifest(table, dir.path());
    let record = chain_from(&manifest, table, dir.path());
    assert_eq!(
        record["manifest"]["config"],
        serde_json::json!({"model": "mlp"})
    );
    let stopping = &record["train"]["early_stopping"];
    assert_eq!(
        stopping["weights_step"], stopping["best_step"],
        "the weights are the best val AUC's: {stopping}"
    );
    let auc = record["evaluate"]["overall"]["auc"].as_f64().unwrap();
    let reference = logistic_auc(table, &dir.path().join("shards"));
    eprintln!(
        "{}: default config test AUC {auc:.4} (weights of step {} of {}), logistic regression {reference:.4}",
        table.name, stopping["weights_step"], record["train"]["steps"]
    );
    assert!(
        auc >= reference - 0.01,
        "{}: default config test AUC {auc:.4}, logistic regression {reference:.4}",
        table.name
    );
}

#[test]
fn email_spam_default_config_does_as_well_as_a_logistic_regression() {
    default_config_does_as_well_as_a_logistic_regression(&EMAIL);
}

#[test]
fn telco_churn_default_config_does_as_well_as_a_logistic_regression() {
    default_config_does_as_well_as_a_logistic_regression(&TELCO);
}

#[test]
fn resume_callback_default_config_does_as_well_as_a_logistic_regression() {
    default_config_does_as_well_as_a_logistic_regression(&RESUME);
}
