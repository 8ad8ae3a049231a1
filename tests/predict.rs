//! predict on a real table (telco): the registered model scores the whole snapshot with no label
//! read, in the snapshot's order with its keys; the test split scored by predict is exactly what
//! evaluate scored; the same customer gets the same score from the CSV snapshot and from the
//! shards; unseen categories are counted, not errors; bad input is exit 2 naming it.

use std::path::Path;

use serde_json::Value;

use crate::real_data::{TELCO, chain};
use crate::util::{python_with_pyarrow, tool};

fn os(path: &Path) -> &std::ffi::OsStr {
    path.as_os_str()
}

/// The telco chain's model, gated and registered as telco@prod in `d/registry`: its record,
/// the registry, and register's output.
fn registered_telco(d: &Path) -> (Value, std::path::PathBuf, crate::util::Output) {
    let record = chain(&TELCO, &d.join("run"));
    let gated = tool("gate")
        .args(["--no-baseline", "-q"])
        .stdin(record.to_string())
        .run();
    assert_eq!(gated.code, 0, "{}", gated.stderr);
    let registry = d.join("registry");
    let registered = tool("register")
        .args(["--registry".as_ref(), os(&registry)])
        .args(["--name", "telco", "--promote", "prod", "-q"])
        .stdin(gated.stdout)
        .run();
    assert_eq!(registered.code, 0, "{}", registered.stderr);
    (record, registry, registered)
}

#[test]
fn predict_scores_a_real_snapshot_in_its_order_with_its_keys_as_evaluate_does() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (record, registry, registered) = registered_telco(d);

    // The whole CSV snapshot, label and all, with the registered model; the record names the
    // entity, which becomes the key.
    let from_csv = d.join("scores.parquet");
    let out = tool("predict")
        .args(["--model", "telco@prod", "--registry"])
        .args([os(&registry)])
        .args(["--in", "testdata/real/telco/snapshot", "--out"])
        .args([os(&from_csv), "-q".as_ref()])
        .stdin(registered.stdout)
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let section = &out.json()["predict"];
    assert_eq!(section["rows"], 7043);
    assert_eq!(section["keys"], serde_json::json!(["customer_id"]));
    assert_eq!(section["registered_as"], "telco@1");
    assert_eq!(section["weights_blake3"], record["train"]["weights_blake3"]);
    assert_eq!(
        section["out_blake3"].as_str().unwrap(),
        blake3::hash(&std::fs::read(&from_csv).unwrap())
            .to_hex()
            .as_str()
    );
    assert_eq!(section["missing"]["total_charges"]["rows"], 11);
    crate::schema::predict_matches_its_schema(&out.json());

    // The test split's shards, with the model file itself and no record: evaluate's rows.
    let shards = Path::new(record["shards"]["dir"].as_str().unwrap()).join("test");
    let from_shards = d.join("test-scores.parquet");
    let weights = record["train"]["weights"].as_str().unwrap();
    let out = tool("predict")
        .args(["--model", weights, "--in"])
        .args([os(&shards), "--out".as_ref(), os(&from_shards)])
        .args(["--key", "customer_id", "-q"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);

    let compare = r#"
import csv, json, sys
import pyarrow.parquet as pq
csv_scores, shard_scores, evaluated, snapshot = sys.argv[1:]
a = pq.read_table(csv_scores).to_pydict()
b = pq.read_table(shard_scores).to_pydict()
e = pq.read_table(evaluated).column("score").to_pylist()
ids = [row["customer_id"] for row in csv.DictReader(open(snapshot))]
by_id = dict(zip(b["customer_id"], b["score"]))
print(json.dumps({
    "order": [str(k) for k in a["customer_id"]] == ids and a["row"] == list(range(len(ids))),
    "vs_evaluate": max(abs(x - y) for x, y in zip(b["score"], e)),
    "rows_vs_evaluate": [len(b["score"]), len(e)],
    "joined": sum(1 for k in a["customer_id"] if k in by_id),
    "vs_shards_by_key": max(abs(s - by_id[k]) for k, s in zip(a["customer_id"], a["score"]) if k in by_id),
    "models": sorted(set(a["model"])),
}))
"#;
    let python = std::process::Command::new(python_with_pyarrow())
        .args(["-c", compare])
        .args([os(&from_csv), os(&from_shards)])
        .arg(record["evaluate"]["row_scores"]["path"].as_str().unwrap())
        .arg("testdata/real/telco/snapshot/telco.csv")
        .output()
        .unwrap();
    assert!(
        python.status.success(),
        "{}",
        String::from_utf8_lossy(&python.stderr)
    );
    let found: Value = serde_json::from_slice(&python.stdout).unwrap();
    assert_eq!(
        found["order"], true,
        "rows in the snapshot's order: {found}"
    );
    assert_eq!(found["rows_vs_evaluate"][0], found["rows_vs_evaluate"][1]);
    assert!(found["vs_evaluate"].as_f64().unwrap() == 0.0, "{found}");
    assert_eq!(found["joined"], found["rows_vs_evaluate"][0], "{found}");
    // Float32 sums run in another order in another batch: equal to 1e-6, not bit for bit.
    assert!(
        found["vs_shards_by_key"].as_f64().unwrap() < 1e-6,
        "{found}"
    );
    assert_eq!(found["models"], serde_json::json!(["telco@1"]));
}

#[test]
fn unseen_categories_are_counted_and_bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let record = chain(&TELCO, &d.join("run"));
    let model = record["train"]["weights"].as_str().unwrap().to_string();
    // Tomorrow's rows: a payment method the model never saw, and no label column.
    let text = std::fs::read_to_string("testdata/real/telco/snapshot/telco.csv").unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let label = header.iter().position(|c| *c == "churned").unwrap();
    let method = header.iter().position(|c| *c == "payment_method").unwrap();
    let keep = |fields: Vec<&str>| -> String {
        fields
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i != label)
            .map(|(_, f)| f)
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut out = keep(header.clone()) + "\n";
    for (i, line) in lines.enumerate() {
        let mut fields: Vec<&str> = line.split(',').collect();
        if i % 10 == 0 {
            fields[method] = "Crypto wallet";
        }
        out += &(keep(fields) + "\n");
    }
    let tomorrow = d.join("tomorrow.csv");
    std::fs::write(&tomorrow, out).unwrap();
    let predict = |model: &str, input: &Path, extra: &[&str]| {
        tool("predict")
            .args(["--model", model, "--in"])
            .args([os(input), "--out".as_ref(), os(&d.join("p.parquet"))])
            .args(extra)
            .run()
    };
    let scored = predict(&model, &tomorrow, &["-q"]);
    assert_eq!(scored.code, 0, "{}", scored.stderr);
    let unseen = &scored.json()["predict"]["unseen"]["payment_method"];
    assert_eq!(unseen["rows"], 705, "{unseen}");

    // A feature column missing: named, nothing written.
    let no_tenure = d.join("no-tenure.csv");
    let text = std::fs::read_to_string(&tomorrow)
        .unwrap()
        .replace("tenure,", "tenur,");
    std::fs::write(&no_tenure, text).unwrap();
    std::fs::remove_file(d.join("p.parquet")).unwrap();
    predict(&model, &no_tenure, &[])
        .assert_bad_input("predict", "has no column `tenure`, a feature of the model");
    assert!(!d.join("p.parquet").exists());
    // An unknown model name, a key that is no column.
    let registry = d.join("registry");
    std::fs::create_dir_all(&registry).unwrap();
    predict(
        "nosuch@prod",
        &tomorrow,
        &["--registry", registry.to_str().unwrap()],
    )
    .assert_bad_input("predict", "registry");
    predict(&model, &tomorrow, &["--key", "account"]).assert_bad_input(
        "predict",
        "--key: `account` is not a column of the snapshot",
    );
    // NaN in a feature: the row is named.
    let nan = d.join("nan.csv");
    let mut text = std::fs::read_to_string(&tomorrow).unwrap();
    text = text.replacen(",29.85,29.85", ",NaN,29.85", 1);
    std::fs::write(&nan, text).unwrap();
    let out = predict(&model, &nan, &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("row 1"), "{}", out.stderr);
}

/// A change made to one row, its fields by column name.
type RowEdit = Box<dyn Fn(&mut std::collections::BTreeMap<String, String>)>;

/// The telco rows as a CSV of the rows `keep` keeps, with `edit` applied to each kept row's
/// fields (by column name), the label left out as serving rows have none.
fn telco_rows(
    path: &Path,
    keep: &dyn Fn(usize) -> bool,
    edit: &dyn Fn(&mut std::collections::BTreeMap<String, String>),
) {
    let text = std::fs::read_to_string("testdata/real/telco/snapshot/telco.csv").unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let columns: Vec<&String> = header.iter().filter(|c| *c != "churned").collect();
    let mut out = columns
        .iter()
        .map(|c| c.as_str())
        .collect::<Vec<_>>()
        .join(",")
        + "\n";
    for (i, line) in lines.enumerate().filter(|(i, _)| keep(*i)) {
        let _ = i;
        let mut row: std::collections::BTreeMap<String, String> = header
            .iter()
            .cloned()
            .zip(line.split(',').map(String::from))
            .collect();
        edit(&mut row);
        out += &(columns
            .iter()
            .map(|c| row[*c].clone())
            .collect::<Vec<_>>()
            .join(",")
            + "\n");
    }
    std::fs::write(path, out).unwrap();
}

/// Serving drift as a decision, measured both ways on the real table: random halves of the rows
/// the model was trained on (honest days) must not be flagged, and days with a planted change
/// (prices up by a third; a contract category renamed, as an upstream system does) must be, each
/// naming the feature. Both error rates over 16 trials each.
#[test]
fn serving_drift_flags_planted_changes_and_not_random_halves_of_the_training_rows() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_record, registry, registered) = registered_telco(d);
    let predict = |input: &Path| {
        tool("predict")
            .args(["--model", "telco@prod", "--registry"])
            .args([os(&registry), "--in".as_ref(), os(input), "--out".as_ref()])
            .args([os(&d.join("scores.parquet")), "-q".as_ref()])
            .stdin(registered.stdout.clone())
            .run()
    };
    let half = |trial: u64| {
        move |row: usize| blake3::hash(format!("{trial}/{row}").as_bytes()).as_bytes()[0] & 1 == 0
    };
    let (trials, mut false_alarms, mut misses) = (16u64, 0, 0);
    let mut table = String::new();
    for trial in 0..trials {
        let day = d.join(format!("honest-{trial}.csv"));
        telco_rows(&day, &half(trial), &|_| {});
        let out = predict(&day);
        assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
        let drift = &out.json()["predict"]["drift"];
        assert_eq!(drift["against"], "telco@1", "{drift}");
        assert!(drift["checks"].as_array().unwrap().len() >= 10, "{drift}");
        assert!(drift["score"]["value"].is_number(), "{drift}");
        false_alarms += u32::from(out.code == 1);

        let (feature, edit): (&str, RowEdit) = if trial % 2 == 0 {
            (
                "monthly_charges",
                Box::new(|row| {
                    let v: f64 = row["monthly_charges"].parse().unwrap();
                    row.insert("monthly_charges".into(), format!("{:.2}", v * 4.0 / 3.0));
                }),
            )
        } else {
            (
                "contract",
                Box::new(|row| {
                    if row["contract"] == "Month-to-month" {
                        row.insert("contract".into(), "Monthly".into());
                    }
                }),
            )
        };
        let day = d.join(format!("planted-{trial}.csv"));
        telco_rows(&day, &half(trial), &*edit);
        let out = predict(&day);
        let found = out.code == 1 && out.stderr.contains(&format!("`{feature}`"));
        misses += u32::from(!found);
        if trial < 2 {
            let checks = out.json()["predict"]["drift"]["checks"].clone();
            for c in checks
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["passed"] == false)
            {
                table += &format!(
                    "{} {} {} (limit {}, noise {})\n",
                    c["column"], c["name"], c["value"], c["threshold"], c["noise"]
                );
            }
        }
    }
    eprintln!(
        "serving drift on telco: {false_alarms}/{trials} honest halves flagged, {misses}/{trials} planted changes missed\n{table}"
    );
    assert!(
        false_alarms <= 1,
        "{false_alarms}/{trials} honest halves flagged"
    );
    assert_eq!(misses, 0, "{misses}/{trials} planted changes missed");
}

/// `--memory` sizes the batches, never the scores: a small budget scores every row as the
/// default does (to float32 rounding: the matrix products of another batch size round in
/// another order), and a budget too small for a batch is refused by name with nothing written.
#[test]
fn a_memory_budget_changes_the_batches_not_the_scores() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let record = chain(&TELCO, &d.join("run"));
    let model = record["train"]["weights"].as_str().unwrap().to_string();
    let predict = |out: &Path, memory: &str| {
        tool("predict")
            .args([
                "--model",
                model.as_str(),
                "--in",
                "testdata/real/telco/snapshot",
            ])
            .args([
                "--out".as_ref(),
                os(out),
                "--memory".as_ref(),
                memory.as_ref(),
            ])
            .args(["--key", "customer_id", "-q"])
            .run()
    };
    let (default, small) = (d.join("default.parquet"), d.join("small.parquet"));
    assert_eq!(predict(&default, "64M").code, 0);
    let out = predict(&small, "1M");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let groups = "import sys, pyarrow.parquet as pq\n\
        a, b = (pq.ParquetFile(p) for p in sys.argv[1:])\n\
        import numpy as np\n\
        d = np.abs(a.read().column('score').to_numpy() - b.read().column('score').to_numpy())\n\
        assert d.max() <= 1e-6, d.max()\n\
        assert a.read().column('customer_id').equals(b.read().column('customer_id'))\n\
        print(a.metadata.num_row_groups, b.metadata.num_row_groups)\n";
    let counts = crate::util::python_stdout(groups, &[default.as_os_str(), small.as_os_str()]);
    let counts: Vec<u64> = counts
        .split_whitespace()
        .map(|c| c.parse().unwrap())
        .collect();
    assert!(counts[0] == 1 && counts[1] > 1, "row groups: {counts:?}");

    let refused = d.join("refused.parquet");
    predict(&refused, "64K").assert_bad_input("predict", "--memory: 65536 bytes is too little");
    assert!(!refused.exists());
}

/// `--part K/N --parts DIR` scores a part's files; `--parts DIR` alone merges them into the
/// predictions file one process writes, byte for byte, and the same section, the serving drift
/// (each part profiles its files, the merge merges them in file order) included. A missing part
/// and a changed predictions file are refused by name.
#[test]
fn parts_and_their_merge_write_what_one_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_, registry, registered) = registered_telco(d);
    // The telco table cut into five files, so that parts have files to share.
    let text = std::fs::read_to_string("testdata/real/telco/snapshot/telco.csv").unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let rows: Vec<&str> = lines.collect();
    let snapshot = d.join("snapshot");
    std::fs::create_dir(&snapshot).unwrap();
    for (i, chunk) in rows.chunks(rows.len().div_ceil(5)).enumerate() {
        let body = chunk.join("\n");
        std::fs::write(
            snapshot.join(format!("part-{i}.csv")),
            format!("{header}\n{body}\n"),
        )
        .unwrap();
    }
    let predict = |out: Option<&Path>, extra: &[&str]| {
        let mut command = tool("predict")
            .args(["--model", "telco@prod", "--registry"])
            .args([os(&registry), "--in".as_ref(), os(&snapshot), "-q".as_ref()])
            .args(extra);
        if let Some(out) = out {
            command = command.args(["--out".as_ref(), os(out)]);
        }
        command.stdin(registered.stdout.clone()).run()
    };
    let one_out = d.join("one.parquet");
    let one = predict(Some(&one_out), &[]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let parts = d.join("parts");
    let parts_arg = parts.to_str().unwrap();
    for k in 0..3 {
        let out = predict(None, &["--part", &format!("{k}/3"), "--parts", parts_arg]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(out.json()["part"]["part"], format!("{k}/3"));
    }
    let merged_out = d.join("merged.parquet");
    let merged = predict(Some(&merged_out), &["--parts", parts_arg]);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let (mut a, mut b) = (
        one.json()["predict"].clone(),
        merged.json()["predict"].clone(),
    );
    assert_eq!(a["rows"], 7043);
    assert!(
        a["drift"]["checks"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{a}"
    );
    a["out"] = Value::Null;
    b["out"] = Value::Null;
    assert_eq!(b, a);
    assert_eq!(
        std::fs::read(&merged_out).unwrap(),
        std::fs::read(&one_out).unwrap()
    );

    let part_file = parts.join("predict.part-2-of-3.parquet");
    let mut bytes = std::fs::read(&part_file).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 1;
    std::fs::write(&part_file, &bytes).unwrap();
    let changed = predict(Some(&d.join("changed.parquet")), &["--parts", parts_arg]);
    assert_eq!(changed.code, 2, "{}", changed.stderr);
    assert!(
        changed.stderr.contains("changed after the part wrote it"),
        "{}",
        changed.stderr
    );
    assert!(!d.join("changed.parquet").exists());
    std::fs::remove_file(parts.join("predict.part-0-of-3.json")).unwrap();
    let missing = predict(Some(&d.join("missing.parquet")), &["--parts", parts_arg]);
    assert!(missing.stdout.is_empty());
    let no_out = predict(None, &["--parts", parts_arg]);
    assert_eq!(no_out.code, 2, "{}", no_out.stderr);
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("lacks part 0 of 3"),
        "{}",
        missing.stderr
    );
}
