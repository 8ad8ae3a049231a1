//! The whole chain on real public tables (testdata/real), as a user runs it on their own data:
//! the pinned snapshot verified, profiled, split, trained and scored, and the model compared with
//! a logistic regression fitted by scikit-learn on the same train split and scored on the same
//! test rows: with each manifest's own config, and with the default config (early stopping on
//! the val AUC), which has to come within 0.01 of it on every table.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::{Output, Run, bin_for, python_stdout, python_with_pyarrow, tool};

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
    stage_with(name, args, stdin, &[])
}

/// A stage run with `env` (a `RUNFN_TEST_*` variable picks the tool's test build).
fn stage_with(
    name: &str,
    args: &[&std::ffi::OsStr],
    stdin: String,
    env: &[(&str, &str)],
) -> Output {
    let mut run = Run::new(bin_for(name, env));
    for (key, value) in env {
        run = run.env(key, value);
    }
    let out = run.args(args).args(["-q"]).stdin(stdin).run();
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
    chain_with(manifest, table, dir, &[])
}

/// The chain with `train_env` in train's environment.
fn chain_with(manifest: &Path, table: &Table, dir: &Path, train_env: &[(&str, &str)]) -> Value {
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
    let trained = stage_with(
        "train",
        &[
            "--out".as_ref(),
            dir.join("train").as_os_str(),
            "--threads".as_ref(),
            "1".as_ref(),
        ],
        planned.stdout,
        train_env,
    );
    stage("evaluate", &[], trained.stdout).json()
}

fn logistic_auc(table: &Table, shards: &Path) -> f64 {
    let args = [
        shards.as_os_str(),
        table.label.as_ref(),
        table.not_features.as_ref(),
    ];
    python_stdout(LOGISTIC, &args).trim().parse().unwrap()
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

/// Shards of millions of rows are read in pieces, the pieces of every shard shuffled together.
/// On a real table cut the same way (the test build's pieces of at most 500 rows: the 4,899
/// telco train rows in ten pieces), the default config still does as well as a logistic
/// regression, with another data order than whole shards give.
#[test]
fn telco_read_in_pieces_does_as_well_as_a_logistic_regression() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = default_config_manifest(&TELCO, dir.path());
    let record = chain_with(
        &manifest,
        &TELCO,
        dir.path(),
        &[("RUNFN_TEST_PIECE_ROWS", "500")],
    );
    let train_rows = record["shards"]["splits"]["train"]["rows"]
        .as_u64()
        .unwrap();
    assert!(train_rows > 8 * 500, "{train_rows} train rows");
    let auc = record["evaluate"]["overall"]["auc"].as_f64().unwrap();
    let reference = logistic_auc(&TELCO, &dir.path().join("shards"));
    eprintln!("telco read in pieces: test AUC {auc:.4}, logistic regression {reference:.4}");
    assert!(
        auc >= reference - 0.01,
        "test AUC {auc:.4}, logistic regression {reference:.4}"
    );
    let whole = tempfile::tempdir().unwrap();
    let manifest = default_config_manifest(&TELCO, whole.path());
    let whole = chain_from(&manifest, &TELCO, whole.path());
    assert_ne!(
        record["train"]["weights_blake3"], whole["train"]["weights_blake3"],
        "the pieces changed the data order"
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

/// The police stops as they come (testdata/real/stops): `personSearch` is YES/NO and
/// `policePrecinct` holds the precincts' numbers 1-5. Trained on January to September, early
/// stopping on October, tested on November and December.
const STOPS_MANIFEST: &str = r#"run_id: stops-search
data:
  snapshot: ./testdata/real/stops/snapshot@blake3:b67503f7a515c4ebebbfc18715d90a21b593ea1f1128d3b0121f72efe5b7be75
  entity: idNum
  time: date
  label: personSearch
  label_positive: "YES"
  categorical: [policePrecinct]
  splits: {train: "date < 2017-10-01", val: "2017-10", test: "date >= 2017-11-01"}
code:
  commit: 9c41be0
  image: registry.example.com/train@sha256:4d2f6a0b8c1e3f5a7b9d0c2e4f6a8b0c1d3e5f7a9b0c2d4e6f8a0b1c3d5e7f9a
config:
  model: mlp
  hidden: [16]
  lr: 0.003
  max_steps: 300
  global_batch: 256
  eval_every: 100
  ckpt_every: 100
  features:
    numeric: [lat, long]
    categorical: [problem, race, gender, policePrecinct, neighborhood, preRace]
seed: 5
eval:
  slices: [policePrecinct]
"#;

const STOPS: Table = Table {
    name: "stops",
    label: "personSearch",
    not_features: "rownames,idNum,date",
};

/// Credit applications (testdata/real/credit): `Status` is good or bad, and bad is the outcome
/// to predict. No time column: split by a hash of the application.
const CREDIT_MANIFEST: &str = r#"run_id: credit-default
data:
  snapshot: ./testdata/real/credit/snapshot@blake3:2ddd2f4bb100a8baff51730bf3c43f0c45edd0f874319c4a2dbae5c5200fad4c
  entity: application_id
  label: Status
  label_positive: bad
  splits: {train: "hash(application_id) < 0.7", val: "0.7 <= hash(application_id) < 0.85", test: "hash(application_id) >= 0.85"}
code:
  commit: 9c41be0
  image: registry.example.com/train@sha256:4d2f6a0b8c1e3f5a7b9d0c2e4f6a8b0c1d3e5f7a9b0c2d4e6f8a0b1c3d5e7f9a
config: {model: mlp, hidden: [16], lr: 0.003, max_steps: 300, global_batch: 128, eval_every: 100, ckpt_every: 100}
seed: 3
leaks:
  exact_duplicates: {max_fraction: 0.01, reason: "applicants equal on every field are distinct applications"}
"#;

const CREDIT: Table = Table {
    name: "credit",
    label: "Status",
    not_features: "application_id",
};

/// `text` written as `dir/manifest.yaml`, with `edit` applied to its lines.
fn manifest_in(dir: &Path, text: &str, edit: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    let lines: Vec<String> = text
        .lines()
        .filter_map(|line| match edit(line) {
            Some(edited) if edited.is_empty() => None,
            Some(edited) => Some(edited),
            None => Some(line.to_string()),
        })
        .collect();
    let path = dir.join("manifest.yaml");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path
}

/// The share of `table`'s rows whose `label` is `positive`, among those `keep` selects from the
/// CSV's fields (by header name): the label rate counted outside runfn.
fn label_share(
    table: &str,
    label: &str,
    positive: &str,
    keep: &dyn Fn(&csv::StringRecord, &csv::StringRecord) -> bool,
) -> (u64, u64) {
    let path = crate::util::testdata(&format!("real/{table}/snapshot/{table}.csv"));
    let mut reader = csv::Reader::from_path(path).unwrap();
    let header = reader.headers().unwrap().clone();
    let column = header.iter().position(|h| h == label).unwrap();
    let (mut rows, mut positives) = (0, 0);
    for row in reader.records() {
        let row = row.unwrap();
        if keep(&header, &row) {
            rows += 1;
            positives += u64::from(&row[column] == positive);
        }
    }
    (rows, positives)
}

/// The preprocessing stored in a model file's safetensors metadata.
pub fn model_preprocessing(weights: &str) -> Value {
    let bytes = std::fs::read(weights).unwrap();
    let length = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + length]).unwrap();
    let meta: Value =
        serde_json::from_str(header["__metadata__"]["runfn"].as_str().unwrap()).unwrap();
    meta["preprocess"].clone()
}

/// A YES/NO label and an integer-coded category through the whole chain: profiled as a label
/// with its positive value and as a category, kept as they are in the shards, learned (the
/// precincts as a vocabulary), and scored against the labels counted outside runfn.
#[test]
fn stops_a_yes_no_label_and_integer_coded_precincts_run_the_whole_chain() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest_in(dir.path(), STOPS_MANIFEST, &|_| None);
    let record = chain_from(&manifest, &STOPS, dir.path());

    let profile = &record["validate"]["profile"];
    let (rows, searched) = label_share("stops", "personSearch", "YES", &|_, _| true);
    assert_eq!((rows, searched), (43_699, 5_237));
    assert_eq!(profile["label_rate"], searched as f64 / rows as f64);
    assert_eq!(profile["label_positive"], "YES");
    assert_eq!(profile["label_negative"], serde_json::json!(["NO"]));
    let precinct = &profile["columns"]["policePrecinct"];
    assert_eq!(precinct["type"], "string", "{precinct}");
    let mut counted: Vec<&str> = precinct["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["value"].as_str().unwrap())
        .collect();
    counted.sort();
    assert_eq!(counted, ["1", "2", "3", "4", "5"], "{precinct}");

    // The shards keep the label as it is: every reader reads it through the manifest.
    let index: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("shards/index.json")).unwrap(),
    )
    .unwrap();
    let type_of = |name: &str| {
        index["columns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .map(|c| c["type"].clone())
    };
    assert_eq!(type_of("personSearch"), Some("string".into()));
    assert_eq!(type_of("policePrecinct"), Some("string".into()));

    let preprocess = model_preprocessing(record["train"]["weights"].as_str().unwrap());
    assert_eq!(preprocess["label_positive"], "YES");
    let vocab = preprocess["categorical"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "policePrecinct")
        .map(|f| f["vocab"].clone())
        .unwrap_or_else(|| panic!("policePrecinct is no category: {preprocess}"));
    let mut vocab: Vec<&str> = vocab
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    vocab.sort();
    assert_eq!(vocab, ["1", "2", "3", "4", "5"]);
    assert!(
        preprocess["numeric"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["name"] != "policePrecinct"),
        "{preprocess}"
    );

    // November and December, counted from the CSV: the rows and the searches evaluate scored.
    let (rows, searched) = label_share("stops", "personSearch", "YES", &|header, row| {
        let date = header.iter().position(|h| h == "date").unwrap();
        &row[date] >= "2017-11-01"
    });
    let overall = &record["evaluate"]["overall"];
    assert_eq!(overall["rows"], rows);
    assert_eq!(overall["label_rate"], searched as f64 / rows as f64);
    let auc = overall["auc"].as_f64().unwrap();
    assert!(auc > 0.65, "stops: test AUC {auc:.4}");
    let slices = record["evaluate"]["slices"]["policePrecinct"]
        .as_object()
        .unwrap();
    let names: Vec<&str> = slices.keys().map(String::as_str).collect();
    assert_eq!(names, ["1", "2", "3", "4", "5"]);
    eprintln!("stops: test AUC {auc:.4} on {rows} stops, {searched} searched");
}

/// good/bad with bad the positive value: the label rate is the share of bad applications, and
/// the model learns them about as well as a logistic regression does on the same rows.
#[test]
fn credit_bad_loans_are_the_positive_value_of_a_good_bad_label() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = manifest_in(dir.path(), CREDIT_MANIFEST, &|_| None);
    let record = chain_from(&manifest, &CREDIT, dir.path());
    let (rows, bad) = label_share("credit", "Status", "bad", &|_, _| true);
    let profile = &record["validate"]["profile"];
    assert_eq!(profile["label_rate"], bad as f64 / rows as f64);
    assert_eq!(profile["label_negative"], serde_json::json!(["good"]));
    let overall = &record["evaluate"]["overall"];
    let auc = overall["auc"].as_f64().unwrap();
    assert!(auc > 0.75, "credit: test AUC {auc:.4}");
    // A model that learned `good` as positive scores as well; the share of positives says which
    // value train and evaluate read as one (about 0.72 the wrong way round).
    let label_rate = overall["label_rate"].as_f64().unwrap();
    assert!((0.2..0.35).contains(&label_rate), "{overall}");
    eprintln!("credit: test AUC {auc:.4}, {label_rate:.4} bad");
}

/// What a manifest says about the label and the categories, wrong: exit 2 from the first tool
/// that reads them, with the line to write.
#[test]
fn a_label_or_category_the_snapshot_does_not_fit_is_refused_with_what_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let hashed = |edit: &dyn Fn(&str) -> Option<String>| {
        let manifest = manifest_in(dir.path(), STOPS_MANIFEST, edit);
        stage(
            "mf-hash",
            &[
                manifest.as_os_str(),
                "--data-digest".as_ref(),
                "testdata/real/stops/snapshot".as_ref(),
            ],
            String::new(),
        )
        .stdout
    };
    let without_positive = hashed(&|l| l.contains("label_positive").then(String::new));
    let say = "manifest.data.label: `personSearch` holds NO, YES; say which is positive with data.label_positive: \"YES\"";
    for name in ["ds-validate", "leak-check"] {
        tool(name)
            .stdin(without_positive.clone())
            .run()
            .assert_bad_input(name, say);
    }

    let lowercase = hashed(&|l| {
        l.contains("label_positive")
            .then(|| "  label_positive: \"yes\"".to_string())
    });
    let absent =
        "manifest.data.label_positive: `yes` is not a value of `personSearch` (values: NO, YES)";
    for name in ["ds-validate", "leak-check"] {
        tool(name)
            .stdin(lowercase.clone())
            .run()
            .assert_bad_input(name, absent);
    }

    let misnamed = hashed(&|l| {
        l.contains("categorical: [policePrecinct]")
            .then(|| "  categorical: [precinct]".to_string())
    });
    let missing = "manifest.data.categorical: `precinct` is not a column of the snapshot (columns: rownames, idNum, date,";
    for name in ["ds-validate", "leak-check", "shardify"] {
        tool(name)
            .args(if name == "shardify" {
                vec!["--out".into(), dir.path().join("shards")]
            } else {
                vec![]
            })
            .stdin(misnamed.clone())
            .run()
            .assert_bad_input(name, missing);
    }
    assert!(!dir.path().join("shards").exists());

    // Skipping validation does not skip the question: train asks it too.
    let shards = dir.path().join("unchecked");
    let sharded = stage(
        "shardify",
        &["--out".as_ref(), shards.as_os_str()],
        without_positive,
    );
    tool("train")
        .args(["--out".as_ref(), dir.path().join("train").as_os_str()])
        .stdin(sharded.stdout)
        .run()
        .assert_bad_input("train", say);

    // Precinct numbers listed as categories, without data.categorical: train says what to add.
    let coded = hashed(&|l| {
        l.contains("categorical: [policePrecinct]")
            .then(String::new)
    });
    let shards = dir.path().join("coded");
    let sharded = stage("shardify", &["--out".as_ref(), shards.as_os_str()], coded);
    tool("train")
        .args(["--out".as_ref(), dir.path().join("train").as_os_str()])
        .stdin(sharded.stdout)
        .run()
        .assert_bad_input(
            "train",
            "manifest.config.features.categorical: `policePrecinct` holds int64 values in the shards; \
             to use its values as categories, list it in manifest.data.categorical",
        );
}

/// The model file is all a serving team needs: `scripts/score-reference.py` (numpy, pyarrow and
/// safetensors, nothing of runfn) reads it and the test split's shards and gives the scores
/// evaluate wrote, to 1e-6, on real tables (numeric, missing-value indicators, categories).
#[test]
fn the_reference_scorer_outside_runfn_gives_evaluates_scores_to_1e_6() {
    let python = python_with_pyarrow();
    for table in [&TELCO, &RESUME] {
        let dir = tempfile::tempdir().unwrap();
        let record = chain(table, dir.path());
        let shards = PathBuf::from(record["shards"]["dir"].as_str().unwrap());
        let index: Value =
            serde_json::from_str(&std::fs::read_to_string(shards.join("index.json")).unwrap())
                .unwrap();
        let files: Vec<PathBuf> = index["splits"]["test"]["shards"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| shards.join(s["path"].as_str().unwrap()))
            .collect();
        let numbers = |out: std::process::Output, what: &str| -> Vec<f64> {
            assert!(
                out.status.success(),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(|l| l.parse().unwrap())
                .collect()
        };
        let reference = numbers(
            Command::new(&python)
                .arg("scripts/score-reference.py")
                .arg(record["train"]["weights"].as_str().unwrap())
                .args(&files)
                .output()
                .unwrap(),
            "score-reference.py",
        );
        let evaluated: Vec<f64> = python_stdout(
            "import sys, pyarrow.parquet as pq\n\
             for s in pq.read_table(sys.argv[1]).column('score').to_pylist(): print(repr(s))",
            &[record["evaluate"]["row_scores"]["path"]
                .as_str()
                .unwrap()
                .as_ref()],
        )
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
        assert_eq!(reference.len(), evaluated.len(), "{}: rows", table.name);
        let worst = reference
            .iter()
            .zip(&evaluated)
            .map(|(r, e)| (r - e).abs())
            .fold(0.0, f64::max);
        assert!(
            worst < 1e-6,
            "{}: scores differ by up to {worst:e}",
            table.name
        );
        let spread = evaluated.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
            - evaluated.iter().cloned().fold(f64::INFINITY, f64::min);
        assert!(
            spread > 0.1,
            "{}: a model that scores everything alike",
            table.name
        );
    }
}

/// evaluate keeps the most confident wrong predictions with what the model saw, and the report
/// page shows them: on telco, the ten rows are the ten wrong ones furthest from their label in
/// the row scores file, their values are the shard rows', and the page lists them.
#[test]
fn the_most_confident_mistakes_are_kept_with_their_values_and_shown() {
    let dir = tempfile::tempdir().unwrap();
    let record = chain(&TELCO, dir.path());
    let mistakes = record["evaluate"]["mistakes"].as_array().unwrap();
    assert_eq!(mistakes.len(), 10);
    crate::schema::evaluate_matches_its_schema(&record);
    let shards = PathBuf::from(record["shards"]["dir"].as_str().unwrap());
    let check = r#"
import json, sys, glob
import pyarrow.parquet as pq, pyarrow as pa
scores = pq.read_table(sys.argv[1]).to_pydict()
wrong = [(abs((1.0 if l else 0.0) - s), r) for r, l, s in zip(scores["row"], scores["label"], scores["score"]) if l != (s >= 0.5)]
wrong.sort(key=lambda x: (-x[0], x[1]))
index = json.load(open(sys.argv[2] + "/index.json"))
test = pa.concat_tables([pq.read_table(sys.argv[2] + "/" + s["path"]) for s in index["splits"]["test"]["shards"]]).to_pydict()
first = int(sys.argv[3])
print(json.dumps({"rows": [r for _, r in wrong[:10]], "tenure": str(test["tenure"][first]), "contract": test["contract"][first]}))
"#;
    let first = mistakes[0]["row"].as_u64().unwrap();
    let first = first.to_string();
    let args = [
        record["evaluate"]["row_scores"]["path"]
            .as_str()
            .unwrap()
            .as_ref(),
        shards.as_os_str(),
        first.as_ref(),
    ];
    let expected: Value = serde_json::from_str(&python_stdout(check, &args)).unwrap();
    let rows: Vec<u64> = mistakes
        .iter()
        .map(|m| m["row"].as_u64().unwrap())
        .collect();
    assert_eq!(serde_json::json!(rows), expected["rows"]);
    for m in mistakes {
        let (label, score) = (m["label"].as_bool().unwrap(), m["score"].as_f64().unwrap());
        assert_ne!(label, score >= 0.5, "a mistake: {m}");
    }
    assert_eq!(mistakes[0]["values"]["tenure"], expected["tenure"]);
    assert_eq!(mistakes[0]["values"]["contract"], expected["contract"]);
    let page = dir.path().join("report.html");
    let report = tool("report")
        .args(["--html".as_ref(), page.as_os_str(), "-q".as_ref()])
        .stdin(record.to_string())
        .run();
    assert_eq!(report.code, 0, "{}", report.stderr);
    let html = std::fs::read_to_string(&page).unwrap();
    let table = html
        .split_once("<h2>Most confident mistakes</h2>")
        .expect("the page lists the mistakes")
        .1;
    assert!(
        table.contains(&format!("<tr><td>{first}</td>")),
        "row {first}"
    );
    assert!(table.contains("<th>contract</th>"));
}
