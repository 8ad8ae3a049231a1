use serde_json::Value;

use crate::util::{demo_record, demo_snapshot, named_check, tool};

fn leaks(snapshot: &std::path::Path) -> (i32, Value) {
    let out = tool("leak-check")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .stdin(demo_record())
        .run();
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    (out.code, out.json()["leaks"].clone())
}

#[test]
fn a_clean_snapshot_passes_every_check() {
    let dir = tempfile::tempdir().unwrap();
    let (code, leaks) = leaks(&demo_snapshot(dir.path(), 20_000, &[]));
    assert_eq!(code, 0, "{leaks:#}");
    for name in [
        "entity_overlap",
        "time_order",
        "exact_duplicates",
        "near_duplicates",
        "future_features",
        "label_proxy",
    ] {
        let check = named_check(&leaks, name);
        assert_eq!(
            (check["passed"].as_bool(), check["count"].as_u64()),
            (Some(true), Some(0)),
            "{check}"
        );
        assert!(
            check
                .get("note")
                .is_none_or(|n| !n.as_str().unwrap().starts_with("skipped")),
            "{name} ran: {check}"
        );
    }
}

#[test]
fn each_planted_trap_is_found_by_its_check() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(
        dir.path(),
        20_000,
        &[
            "--trap-entity-overlap",
            "30",
            "--trap-exact-duplicates",
            "15",
            "--trap-duplicate-notes",
            "20",
            "--trap-future-feature",
            "25",
        ],
    );
    let (code, leaks) = leaks(&snapshot);
    assert_eq!(code, 1);
    assert_eq!(leaks["passed"], false);
    assert_eq!(named_check(&leaks, "entity_overlap")["count"], 30);
    assert_eq!(named_check(&leaks, "exact_duplicates")["count"], 15);
    assert_eq!(named_check(&leaks, "future_features")["count"], 25);
    let near = named_check(&leaks, "near_duplicates");
    // 20 notes copied with other case and spacing, 20 one-word edits, and the 15 exact-duplicate
    // rows, which copy the note along with every other feature.
    assert_eq!(near["count"], 55, "{near}");
    let example = &near["examples"][0];
    assert!(example["a"]["split"] != example["b"]["split"], "{example}");
    assert_eq!(named_check(&leaks, "label_proxy")["count"], 0);
    let overlap = &named_check(&leaks, "entity_overlap")["examples"][0];
    assert!(
        overlap["customer_id"].as_str().unwrap().starts_with('C'),
        "{overlap}"
    );
}

#[test]
fn a_feature_that_is_the_label_is_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let (code, leaks) = leaks(&demo_snapshot(dir.path(), 20_000, &["--trap-label-proxy"]));
    assert_eq!(code, 1);
    let proxy = named_check(&leaks, "label_proxy");
    assert_eq!(proxy["count"], 1, "{proxy}");
    assert_eq!(proxy["examples"][0]["column"], "account_closed");
    assert!(proxy["examples"][0]["auc"].as_f64().unwrap() >= 0.99);
}

#[test]
fn splits_out_of_time_order_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(dir.path(), 5_000, &[]);
    let out = tool("leak-check")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .args([
            "--split",
            "train=signup_date >= 2026-07-01",
            "--split",
            "test=signup_date < 2026-07-01",
        ])
        .stdin(demo_record())
        .run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    let check = named_check(&out.json()["leaks"], "time_order").clone();
    assert_eq!(check["count"], 1, "{check}");
    assert_eq!(check["examples"][0]["earlier"], "train");
}

#[test]
fn bad_inputs_exit_2_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(&dir.path().join("s"), 2_000, &[]);
    tool("leak-check").args(["--in".as_ref(), snapshot.as_os_str()]).args(["--split", "train=created < 2026-01-01"]).stdin(demo_record()).run()
        .assert_bad_input("leak-check", "manifest.data.splits.train: `created < 2026-01-01` uses the column `created`, which the snapshot does not have");
    let no_label = demo_record().replace("\"label\":\"churned\"", "\"label\":\"left\"");
    tool("leak-check")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .stdin(no_label)
        .run()
        .assert_bad_input(
            "leak-check",
            "manifest.data.label: names the column `left`, which the snapshot does not have",
        );
    tool("leak-check")
        .args(["--shards".as_ref(), dir.path().as_os_str()])
        .stdin(demo_record())
        .run()
        .assert_bad_input(
            "leak-check",
            "index.json: missing: the folder holds no finished shards",
        );
}
