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
    let no_label =
        crate::util::rehashed(demo_record().replace("\"label\":\"churned\"", "\"label\":\"left\""));
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

/// The demo record with `manifest.leaks` set to `leaks`.
fn with_leaks(leaks: Value) -> String {
    let mut record: Value = serde_json::from_str(&demo_record()).unwrap();
    record["manifest"]["leaks"] = leaks;
    crate::util::rehash(&mut record);
    record.to_string()
}

fn twins_snapshot(dir: &std::path::Path) -> std::path::PathBuf {
    demo_snapshot(
        dir,
        6_000,
        &[
            "--trap-exact-duplicates",
            "15",
            "--trap-duplicate-notes",
            "10",
        ],
    )
}

#[test]
fn tolerances_and_off_decide_and_are_recorded_with_their_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = twins_snapshot(dir.path());
    let run = |leaks: Value| {
        let out = tool("leak-check")
            .args(["--in".as_ref(), snapshot.as_os_str()])
            .stdin(with_leaks(leaks))
            .run();
        assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
        (out.code, out.json()["leaks"].clone())
    };
    let (code, strict) = run(Value::Null);
    assert_eq!(code, 1);
    let exact = named_check(&strict, "exact_duplicates").clone();
    assert_eq!(
        (exact["count"].as_u64(), exact["passed"].as_bool()),
        (Some(15), Some(false))
    );
    assert_eq!(exact["setting"], serde_json::json!({"max_count": 0}));
    let of = exact["of"].as_u64().unwrap();
    assert!(of > 15 && of < 6_000, "rows of the later splits: {of}");
    assert_eq!(exact["fraction"].as_f64().unwrap(), 15.0 / of as f64);

    let (code, tolerated) = run(serde_json::json!({
        "exact_duplicates": {"max_count": 15, "reason": "resold listings"},
        "near_duplicates": {"off": "notes repeat by design"},
    }));
    assert_eq!(code, 0, "{tolerated:#}");
    let exact = named_check(&tolerated, "exact_duplicates");
    assert_eq!(
        (
            &exact["passed"],
            &exact["count"],
            &exact["setting"],
            &exact["reason"]
        ),
        (
            &Value::from(true),
            &Value::from(15),
            &serde_json::json!({"max_count": 15}),
            &Value::from("resold listings")
        )
    );
    let near = named_check(&tolerated, "near_duplicates");
    assert_eq!(
        (&near["passed"], &near["setting"], &near["reason"]),
        (
            &Value::from(true),
            &serde_json::json!({"off": true}),
            &Value::from("notes repeat by design")
        )
    );
    assert!(
        near["count"].as_u64().unwrap() > 0,
        "off still counts: {near}"
    );

    let (code, _) = run(serde_json::json!({
        "exact_duplicates": {"max_count": 14},
        "near_duplicates": {"off": "notes repeat by design"},
    }));
    assert_eq!(code, 1, "15 twins are one too many");
    let (code, share) = run(serde_json::json!({
        "exact_duplicates": {"max_fraction": 15.0 / of as f64},
        "near_duplicates": {"max_fraction": 1.0},
    }));
    assert_eq!(code, 0, "{share:#}");
}

#[test]
fn a_bad_leak_setting_exits_2_naming_the_field_and_mf_hash_lints_it() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(&dir.path().join("s"), 1_000, &[]);
    for (leaks, message) in [
        (
            serde_json::json!({"exact_duplicate": {"max_count": 1}}),
            "manifest.leaks.exact_duplicate: is not a leak check (did you mean `exact_duplicates`?)",
        ),
        (
            serde_json::json!({"exact_duplicates": {"max_fraction": 1.5}}),
            "manifest.leaks.exact_duplicates.max_fraction: must be a fraction between 0 and 1, found 1.5",
        ),
        (
            serde_json::json!({"entity_overlap": {"max_count": -1}}),
            "manifest.leaks.entity_overlap.max_count: must be a whole number >= 0, found -1",
        ),
        (
            serde_json::json!({"near_duplicates": {"off": ""}}),
            "manifest.leaks.near_duplicates.off: needs a reason",
        ),
    ] {
        tool("leak-check")
            .args(["--in".as_ref(), snapshot.as_os_str()])
            .stdin(with_leaks(leaks))
            .run()
            .assert_bad_input("leak-check", message);
    }
    let manifest = dir.path().join("m.yaml");
    let text = std::fs::read_to_string("testdata/demo/manifest.yaml").unwrap()
        + "leaks:\n  near_duplicates: {off: true}\n";
    std::fs::write(&manifest, text).unwrap();
    let out = tool("mf-hash").args([&manifest]).run();
    out.assert_bad_input(
        "mf-hash",
        "leaks.near_duplicates.off: needs a reason: a non-empty text saying why",
    );
}

#[test]
fn pairs_out_lists_every_twin_pair_with_both_rows() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = twins_snapshot(&dir.path().join("s"));
    let pairs = dir.path().join("pairs.jsonl");
    let out = tool("leak-check")
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .args(["--pairs-out".as_ref(), pairs.as_os_str()])
        .stdin(demo_record())
        .run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    let leaks = out.json()["leaks"].clone();
    let lines: Vec<Value> = std::fs::read_to_string(&pairs)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for check in ["exact_duplicates", "near_duplicates"] {
        let of_check: Vec<&Value> = lines.iter().filter(|l| l["check"] == check).collect();
        let later: std::collections::BTreeSet<(String, u64)> = of_check
            .iter()
            .map(|l| {
                (
                    l["later"]["file"].as_str().unwrap().to_string(),
                    l["later"]["row"].as_u64().unwrap(),
                )
            })
            .collect();
        let count = named_check(&leaks, check)["count"].as_u64().unwrap();
        assert!(
            count > 0 && later.len() as u64 == count,
            "{check}: {} rows in pairs, count {count}",
            later.len()
        );
        assert!(
            of_check.len()
                > named_check(&leaks, check)["examples"]
                    .as_array()
                    .unwrap()
                    .len()
        );
        for line in of_check {
            assert_ne!(line["earlier"]["split"], line["later"]["split"], "{line}");
            assert!(
                line["earlier"]["file"].as_str().unwrap().ends_with(".csv"),
                "{line}"
            );
        }
    }
}

/// A year of scheduled events as a new user's table has them: one row per event, a day, a few
/// low-cardinality columns (operator, origin, hour) and, with `amount`, one numeric column of
/// many values; `copies` test rows replaced by copies of train rows. Seeded, so fixed.
fn events_snapshot(dir: &std::path::Path, amount: bool, copies: usize) -> std::path::PathBuf {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut rows: Vec<String> = Vec::new();
    for i in 0..6000u64 {
        let day = 1 + i * 365 / 6000;
        let date = format!(
            "2025-{:02}-{:02}",
            1 + (day - 1) / 31 % 12,
            1 + (day - 1) % 28
        );
        let mut row = format!("e{i},{date},op{},o{},{}", next(5), next(8), next(24));
        if amount {
            row += &format!(",{}.{:02}", 10 + next(990), next(100));
        }
        row += &format!(",{}", next(2));
        rows.push(row);
    }
    // Test is the last quarter (October on); each copy repeats a train row's features.
    let test_start = rows.iter().position(|r| r.contains(",2025-10-")).unwrap();
    for k in 0..copies {
        let source = rows[k * 7].clone();
        let target = test_start + k * 3;
        let id_and_day: Vec<&str> = rows[target].splitn(3, ',').take(2).collect();
        let features: Vec<&str> = source.splitn(3, ',').collect();
        rows[target] = format!("{},{},{}", id_and_day[0], id_and_day[1], features[2]);
    }
    let header = if amount {
        "event_id,day,operator,origin,hour,amount,late"
    } else {
        "event_id,day,operator,origin,hour,late"
    };
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("events.csv"),
        format!("{header}\n{}\n", rows.join("\n")),
    )
    .unwrap();
    dir.to_path_buf()
}

fn events_leaks(snapshot: &std::path::Path) -> (i32, Value) {
    let (code, leaks) = events_leak_section(snapshot);
    (code, named_check(&leaks, "exact_duplicates").clone())
}

/// leak-check's exit and `leaks` section on an events snapshot.
fn events_leak_section(snapshot: &std::path::Path) -> (i32, Value) {
    let manifest = snapshot.parent().unwrap().join("events.yaml");
    std::fs::write(
        &manifest,
        "run_id: events\ndata:\n  snapshot: ./snapshot@snapshot=events\n  entity: event_id\n  time: day\n  label: late\n  \
         categorical: [hour]\n  splits: {train: \"day < 2025-10-01\", test: \"day >= 2025-10-01\"}\n\
         code: {commit: 9c41be0, image: \"registry.example.com/t@sha256:4d2f6a0b8c1e3f5a7b9d0c2e4f6a8b0c1d3e5f7a9b0c2d4e6f8a0b1c3d5e7f9a\"}\n\
         config: {model: mlp}\nseed: 1\n",
    )
    .unwrap();
    let record = tool("mf-hash")
        .args([manifest.as_os_str(), "-q".as_ref()])
        .run();
    assert_eq!(record.code, 0, "{}", record.stderr);
    let out = tool("leak-check")
        .args(["--in".as_ref(), snapshot.as_os_str(), "-q".as_ref()])
        .stdin(record.stdout)
        .run();
    assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
    (out.code, out.json()["leaks"].clone())
}

/// A category renamed in the test rows only (the gate cannot see it: the serving model never
/// saw the new name either) fails as unseen beyond chance; the same table as it is passes.
#[test]
fn a_category_the_train_split_never_has_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let (code, honest) =
        events_leak_section(&events_snapshot(&dir.path().join("a/snapshot"), true, 0));
    assert_eq!(code, 0, "{honest:#}");
    let unseen = named_check(&honest, "unseen_categories");
    assert_eq!(unseen["count"], 0, "{unseen:#}");

    let snapshot = events_snapshot(&dir.path().join("b/snapshot"), true, 0);
    let file = snapshot.join("events.csv");
    let renamed: Vec<String> = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .map(|line| {
            if line.contains(",2025-1") && line.contains(",op3,") {
                line.replace(",op3,", ",op3-renamed,")
            } else {
                line.to_string()
            }
        })
        .collect();
    std::fs::write(&file, renamed.join("\n") + "\n").unwrap();
    let (code, leaks) = events_leak_section(&snapshot);
    assert_eq!(code, 1, "{leaks:#}");
    let unseen = named_check(&leaks, "unseen_categories");
    assert_eq!(unseen["passed"], false, "{unseen:#}");
    let example = &unseen["examples"][0];
    assert_eq!(example["column"], "operator", "{unseen:#}");
    assert_eq!(example["values"][0]["value"], "op3-renamed", "{unseen:#}");
    assert!(example["share"].as_f64().unwrap() > 0.1, "{unseen:#}");
    assert!(
        unseen["chance"]["rate"].as_f64().unwrap() < 0.01,
        "{unseen:#}"
    );
}

/// Twins are judged against chance: coarse rows have twins in train by chance (the same
/// scheduled event on another day), which never fails a night; copied rows still do, where the
/// chance rate leaves room to see them.
#[test]
fn exact_twins_are_judged_against_what_chance_gives() {
    let dir = tempfile::tempdir().unwrap();
    // Only the schedule's columns: nearly every test row has a twin in train by chance.
    let (code, coarse) = events_leaks(&events_snapshot(&dir.path().join("a/snapshot"), false, 0));
    assert_eq!(code, 0, "{coarse:#}");
    let chance = &coarse["chance"];
    assert!(coarse["count"].as_u64().unwrap() > 1000, "{coarse:#}");
    assert!(chance["rate"].as_f64().unwrap() > 0.5, "{chance}");
    assert!(chance["p_value"].as_f64().unwrap() >= chance["alpha"].as_f64().unwrap());
    assert_eq!(chance["reference"], "train");

    // With a numeric column of many values chance gives almost none: 1% copied rows fail.
    let (code, honest) = events_leaks(&events_snapshot(&dir.path().join("b/snapshot"), true, 0));
    assert_eq!(code, 0, "{honest:#}");
    let (code, copied) = events_leaks(&events_snapshot(&dir.path().join("c/snapshot"), true, 15));
    assert_eq!(code, 1, "{copied:#}");
    assert!(copied["count"].as_u64().unwrap() >= 15, "{copied:#}");
    let chance = &copied["chance"];
    assert!(chance["expected"].as_f64().unwrap() < 3.0, "{chance}");
    assert!(chance["p_value"].as_f64().unwrap() < chance["alpha"].as_f64().unwrap());
    assert!(!copied["examples"].as_array().unwrap().is_empty());
}

/// Within `--memory` the key occurrences, texts, band keys, candidate pairs and numbers go to
/// disk: on 200k demo rows with a text column the checks held 345 MB before; with `--memory
/// 64M` they hold under 100 MB, and report exactly what a budget that holds everything reports,
/// examples included. What they spilled is gone afterwards.
#[test]
fn a_small_memory_budget_spills_and_finds_the_same_leaks() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = demo_snapshot(
        &dir.path().join("snapshot"),
        200_000,
        &[
            "--trap-duplicate-notes",
            "200",
            "--trap-entity-overlap",
            "40",
            "--trap-exact-duplicates",
            "30",
        ],
    );
    let spill = dir.path().join("tmp");
    std::fs::create_dir(&spill).unwrap();
    let run = |memory: &str| {
        let out = tool("leak-check")
            .args(["--in".as_ref(), snapshot.as_os_str()])
            .args(["--memory", memory])
            .env("TMPDIR", &spill)
            .stdin(demo_record())
            .run();
        assert!(out.code == 0 || out.code == 1, "{}", out.stderr);
        out.json()
    };
    let (small_record, large_record) = (run("64M"), run("8G"));
    let (small, large) = (&small_record["leaks"], &large_record["leaks"]);
    // The section is the same at any budget; the timings entry says budget and peak.
    assert_eq!(small, large);
    for (check, least) in [
        ("near_duplicates", 250),
        ("entity_overlap", 40),
        ("exact_duplicates", 30),
    ] {
        let found = named_check(small, check);
        assert!(found["count"].as_u64().unwrap() >= least, "{found}");
        assert!(!found["examples"].as_array().unwrap().is_empty(), "{found}");
    }
    let timing = small_record["timings"].as_array().unwrap().last().unwrap();
    let peak = timing["max_rss_bytes"].as_u64().unwrap();
    eprintln!("leak-check --memory 64M: peak {} MiB", peak >> 20);
    assert_eq!(timing["memory_budget_bytes"], 64 << 20);
    assert!(peak < 160 << 20, "peak {} MiB", peak >> 20);
    assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 0, "spill left");
}

/// Near twins by the million stay within the budget: every verified pair was kept in memory
/// (over a quarter of a GiB for 3M pairs at `--memory 256M`), now each run's pairs are handed
/// over as they verify and the later rows with a twin are counted on disk.
#[test]
fn a_million_verified_near_twins_stay_within_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs.csv");
    // 6,000 groups of 30 texts, each one word away from its group's: about 1.3M cross-split
    // pairs at Jaccard >= 0.8.
    let mut text = String::from("doc_id,note\n");
    let mut state = 7u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let words: Vec<String> = (0..5000)
        .map(|i| format!("w{i:x}q{}", next() % 997))
        .collect();
    let mut row = 0;
    for _ in 0..6000 {
        let base: Vec<usize> = (0..40).map(|_| (next() % 5000) as usize).collect();
        for _ in 0..30 {
            let mut t = base.clone();
            t[(next() % 40) as usize] = (next() % 5000) as usize;
            let note: Vec<&str> = t.iter().map(|&w| words[w].as_str()).collect();
            text.push_str(&format!("doc-{row:08},{}\n", note.join(" ")));
            row += 1;
        }
    }
    std::fs::write(&docs, text).unwrap();
    let out = tool("leak-check")
        .args(["--in".as_ref(), docs.as_os_str()])
        .args([
            "--split",
            "a=hash(doc_id) < 0.5",
            "--split",
            "b=hash(doc_id) >= 0.5",
        ])
        .args(["--text", "note", "--memory", "64M", "-q"])
        .env("TMPDIR", dir.path())
        .run();
    assert_eq!(out.code, 1, "{}", out.stderr);
    let record = out.json();
    let twins = named_check(&record["leaks"], "near_duplicates");
    assert!(twins["count"].as_u64().unwrap() > 80_000, "{twins}");
    let peak = record["timings"].as_array().unwrap().last().unwrap()["max_rss_bytes"]
        .as_u64()
        .unwrap();
    eprintln!(
        "leak-check --memory 64M over 180k near-twin texts: peak {} MiB",
        peak >> 20
    );
    // Held whole, the pairs took it to 115 MiB.
    assert!(peak < 96 << 20, "peak {} MiB", peak >> 20);
}
