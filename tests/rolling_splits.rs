//! Rolling splits on a real table (testdata/real/stops, a year of police stops): windows counted
//! back from the snapshot's latest time move with the data, so one manifest serves every night;
//! shardify and leak-check resolve them alike; rows in no split are counted, said even under -q
//! and stop the run above `data.max_unsplit_fraction`; bad windows are refused naming the split.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::util::{Output, testdata, tool};

const ROLLING: [(&str, &str); 3] = [
    ("test", "last 1 month"),
    ("val", "1 month before test"),
    ("train", "before val"),
];

/// The stops table's rows whose `date` (ISO 8601, so text order is time order) is before `until`.
fn stops_until(dir: &Path, name: &str, until: &str) -> PathBuf {
    stops_where(dir, name, |date| date < until)
}

/// The stops table's rows whose `date` passes `keep`, as the snapshot folder `dir/name`.
fn stops_where(dir: &Path, name: &str, keep: impl Fn(&str) -> bool) -> PathBuf {
    let table = std::fs::read_to_string(testdata("real/stops/snapshot/stops.csv")).unwrap();
    let mut lines = table.lines();
    let header = lines.next().unwrap();
    let date = header.split(',').position(|c| c == "date").unwrap();
    let mut text = format!("{header}\n");
    for line in lines.filter(|l| keep(l.split(',').nth(date).unwrap())) {
        text.push_str(line);
        text.push('\n');
    }
    let folder = dir.join(name);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("stops.csv"), text).unwrap();
    folder
}

fn record(snapshot: &Path, splits: &[(&str, &str)], data: Value) -> String {
    let mut manifest_data = json!({
        "snapshot": format!("{}@snapshot=test", snapshot.display()),
        "entity": "idNum",
        "time": "date",
        "label": "personSearch",
        "label_positive": "YES",
        "splits": splits.iter().map(|(n, r)| (n.to_string(), json!(r))).collect::<serde_json::Map<_, _>>(),
    });
    for (key, value) in data.as_object().unwrap() {
        manifest_data[key] = value.clone();
    }
    json!({"manifest": {"run_id": "stops", "data": manifest_data, "seed": 3}}).to_string()
}

fn shardify(record: &str, out: &Path, extra: &[&str]) -> Output {
    tool("shardify")
        .args(["--out".as_ref(), out.as_os_str()])
        .args(extra)
        .stdin(record.to_string())
        .run()
}

fn rows(shards: &Value, split: &str) -> u64 {
    shards["splits"][split]["rows"].as_u64().unwrap()
}

#[test]
fn windows_move_with_the_data_under_one_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let mut train_rows = Vec::new();
    let mut seen_bounds = Vec::new();
    // Three nights: the snapshot ends in October, November, then holds the whole year.
    for (night, until) in ["2017-11-01", "2017-12-01", "2018-02-01"]
        .iter()
        .enumerate()
    {
        let snapshot = stops_until(dir.path(), &format!("night{night}"), until);
        let total = std::fs::read_to_string(snapshot.join("stops.csv"))
            .unwrap()
            .lines()
            .count() as u64
            - 1;
        let out = shardify(
            &record(&snapshot, &ROLLING, json!({})),
            &dir.path().join(format!("shards{night}")),
            &[],
        );
        assert_eq!(out.code, 0, "night {night}: {}", out.stderr);
        let shards = out.json()["shards"].clone();
        assert_eq!(shards["unassigned_rows"], 0, "{shards}");
        assert_eq!(shards["passed"], true);
        assert_eq!(
            rows(&shards, "train") + rows(&shards, "val") + rows(&shards, "test"),
            total,
            "every row in exactly one window"
        );
        let resolved = &shards["splits_resolved"];
        assert_eq!(resolved["test"]["rule"], "last 1 month");
        // The windows meet: val ends where test starts, train where val starts.
        assert_eq!(resolved["val"]["until"], resolved["test"]["after"]);
        assert_eq!(resolved["train"]["until"], resolved["val"]["after"]);
        assert_eq!(resolved["train"]["after"], Value::Null);
        assert!(
            resolved["test"]["resolved"]
                .as_str()
                .unwrap()
                .starts_with("date > 2017-"),
            "{resolved}"
        );
        assert!(
            out.stderr.contains("test: `last 1 month` is date > "),
            "{}",
            out.stderr
        );
        // Leak-check reads the same windows from the snapshot: the time order holds.
        let leaks = tool("leak-check")
            .stdin(record(&snapshot, &ROLLING, json!({})))
            .run();
        assert_eq!(leaks.code, 0, "{}", leaks.stderr);
        let time_order = leaks.json()["leaks"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "time_order")
            .cloned()
            .unwrap();
        assert_eq!(
            time_order["of"], 2,
            "three windows in time order: {time_order}"
        );
        train_rows.push(rows(&shards, "train"));
        seen_bounds.push(resolved["test"]["after"].clone());
    }
    assert!(
        train_rows.windows(2).all(|w| w[0] < w[1]),
        "train grows each night: {train_rows:?}"
    );
    assert!(
        seen_bounds.windows(2).all(|w| w[0] != w[1]),
        "the test window moves: {seen_bounds:?}"
    );
}

#[test]
fn rows_in_no_split_are_said_even_quietly_and_stop_the_run_above_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = stops_until(dir.path(), "snapshot", "2018-02-01");
    // Fixed dates written for last year's data: December's stops fall in no split.
    let fixed = [
        ("train", "date < 2017-10-01"),
        ("val", "2017-10"),
        ("test", "2017-11"),
    ];
    let out = shardify(
        &record(&snapshot, &fixed, json!({})),
        &dir.path().join("shards"),
        &["-q"],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let shards = out.json()["shards"].clone();
    let unsplit = shards["unsplit"]["rows"].as_u64().unwrap();
    assert!(unsplit > 2_000, "{shards}");
    assert_eq!(shards["passed"], false);
    assert_eq!(shards["unsplit"]["max_fraction"], 0.01);
    assert!(
        out.stderr.contains(&format!(
            "shardify: failed: unsplit_rows: {unsplit} of 43699 rows"
        )),
        "said under -q, with the count: {}",
        out.stderr
    );
    // A later stage refuses the record, as after any failed check.
    let train = tool("leak-check").stdin(out.stdout.clone()).run();
    assert_eq!(train.code, 2, "{}", train.stderr);

    // Within a limit the manifest raises, it passes and still says how many were left out.
    let tolerant = shardify(
        &record(&snapshot, &fixed, json!({"max_unsplit_fraction": 0.2})),
        &dir.path().join("shards"),
        &["-q"],
    );
    assert_eq!(tolerant.code, 0, "{}", tolerant.stderr);
    assert!(
        tolerant
            .stderr
            .contains(&format!("shardify: warning: {unsplit} of 43699 rows")),
        "{}",
        tolerant.stderr
    );
    let bad = shardify(
        &record(&snapshot, &fixed, json!({"max_unsplit_fraction": "some"})),
        &dir.path().join("shards"),
        &[],
    );
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("manifest.data.max_unsplit_fraction"),
        "{}",
        bad.stderr
    );
}

#[test]
fn bad_windows_are_refused_naming_the_split() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = stops_until(dir.path(), "snapshot", "2018-02-01");
    let out_dir = dir.path().join("shards");
    let refused = |splits: &[(&str, &str)], data: Value, expected: &[&str]| {
        let out = shardify(&record(&snapshot, splits, data), &out_dir, &[]);
        assert_eq!(out.code, 2, "{splits:?}: {}", out.stderr);
        assert!(out.stdout.is_empty());
        for text in expected {
            assert!(out.stderr.contains(text), "{splits:?}: {}", out.stderr);
        }
        assert_eq!(out.stderr.trim().lines().count(), 1, "{}", out.stderr);
    };
    refused(
        &[("test", "last 0 days"), ("train", "before test")],
        json!({}),
        &["manifest.data.splits.test", "at least 1"],
    );
    refused(
        &[("test", "last 2 fortnights"), ("train", "before test")],
        json!({}),
        &["manifest.data.splits.test", "not a unit"],
    );
    // A time column that holds no time.
    refused(
        &ROLLING,
        json!({"time": "problem"}),
        &[
            "manifest.data.splits.",
            "`problem`",
            "string column",
            "dates or timestamps",
        ],
    );
    refused(
        &[("test", "last 1 month"), ("train", "before validation")],
        json!({}),
        &["manifest.data.splits.train", "no split `validation`"],
    );
    refused(
        &[("test", "1 week before train"), ("train", "before test")],
        json!({}),
        &["in a circle"],
    );
    // A window that selects no rows: a snapshot without November's stops, and a val window
    // that is the month before the last.
    let gap = stops_where(dir.path(), "gap", |date| {
        !("2017-11-01".."2017-12-01T06").contains(&date)
    });
    let out = shardify(&record(&gap, &ROLLING, json!({})), &out_dir, &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "manifest.data.splits.val: `1 month before test` selects no rows (date > 2017-11-"
        ),
        "{}",
        out.stderr
    );
    assert!(
        !out_dir.join("index.json").exists(),
        "no index left by a refused run"
    );
}
