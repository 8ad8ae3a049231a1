//! Leakage across splits, found in one parallel pass over the data.
//!
//! The pass ([`scan`]) gathers, per file, what each check needs; the checks then merge those
//! summaries in file order, so every count and example is the same on every run.

mod categories;
mod checks;
mod config;
mod keys;
mod location;
mod movement;
mod near_twins;
mod parted;
mod proxies;
mod report;
mod scan;
pub use config::{LeakConfig, conventional_order};
pub use location::Loc;
pub use parted::{check_part, merge_parts, part_files, reduce_parts};
pub use report::{LeakCheck, LeakReport, Pair};

use std::collections::BTreeSet;

use runfn_data::DataError;
use runfn_data::partitioned::Partitioned;
use runfn_manifest::leaks::LeakDecision;

/// Runs every leak check over `data`.
pub fn check(data: &Partitioned, config: &LeakConfig) -> Result<LeakReport, DataError> {
    let layout = scan::Layout::new(data, config)?;
    let spill = config.spill_root()?;
    let sinks = sinks(&layout, config, spill.path())?;
    let (files, bad_values) = data.fold(
        || scan::FileScan::new(&layout),
        |scan, batch| scan.add(&layout, &sinks, batch),
    )?;
    judge(
        data,
        config,
        &layout,
        files,
        sinks,
        bad_values.total(),
        None,
    )
}

/// The checks over every file's scan (`files`, in file order), their keys, texts and numbers in
/// `sinks`: what one process does once it has read the files, and the merge of parts once it has
/// put back what the parts read.
fn judge(
    data: &Partitioned,
    config: &LeakConfig,
    layout: &scan::Layout,
    files: Vec<scan::FileScan>,
    sinks: scan::Sinks,
    bad_values: u64,
    reduced: Option<(keys::Keys, keys::Keys)>,
) -> Result<LeakReport, DataError> {
    let rank = checks::ranks(data, config);
    let (merged, searches) =
        scan::Merged::new(files, layout, sinks, &rank, config.examples, reduced)?;
    // A rolling window with no rows would check nothing and pass: the manifest and the data
    // disagree, as shardify says too.
    if let Some(why) = data.empty_window(&merged.tallies.split_rows) {
        return Err(DataError::Other(why));
    }
    if let (Some(label), Some(index)) = (&config.label, layout.label) {
        runfn_data::label::check(
            label,
            data.snapshot.columns[index].column_type,
            config.label_positive.as_ref(),
            &merged.tallies.label_values,
            merged.tallies.positive_labels,
        )
        .map_err(|e| DataError::Other(e.to_string()))?;
    }
    let mut pairs = Vec::new();
    let mut checks = vec![
        checks::entity_overlap(&merged, data, config, layout)?,
        checks::time_order(&merged, data, config),
        checks::exact_duplicates(&merged, data, config, &mut pairs),
        checks::near_duplicates(searches, &merged, data, config, &mut pairs)?,
        checks::unseen_categories(&merged, data, layout)?,
        checks::future_features(&merged, data, config),
        checks::label_proxies(&merged, layout, data, config),
    ];
    for check in &mut checks {
        let decision = config.decision(check.name);
        // The default (no twin beyond chance) is the strict setting every check starts from; a
        // tolerance of the manifest's own rules as written.
        let configured = decision != LeakDecision::strict();
        check.apply(&decision, configured);
    }
    Ok(LeakReport::new(checks, bad_values, pairs))
}

/// Where the scan sends key occurrences, texts and numbers: the entity ids and the row hashes a
/// quarter of the budget each, the text columns a quarter shared among them, the label-proxy
/// candidates an eighth; the rest is for what each file's reader holds.
fn sinks(
    layout: &scan::Layout,
    config: &LeakConfig,
    root: &std::path::Path,
) -> Result<scan::Sinks, DataError> {
    let spilled = |source| DataError::Io {
        path: root.to_path_buf(),
        source,
    };
    let sketcher =
        runfn_stats::minhash::Sketcher::new(runfn_stats::minhash::MinHashParams::default())
            .map_err(|e| DataError::Other(e.to_string()))?;
    let quarter = config.memory_bytes / 4;
    let share = quarter / layout.text.len().max(1) as u64;
    Ok(scan::Sinks {
        entities: keys::KeySink::new(root, quarter).map_err(spilled)?,
        rows: keys::KeySink::new(root, quarter).map_err(spilled)?,
        texts: layout
            .text
            .iter()
            .map(|_| near_twins::ColumnSearch::new(sketcher.clone(), root, share))
            .collect::<Result<_, _>>()
            .map_err(spilled)?,
        root: root.to_path_buf(),
        // An eighth of the budget for the numbers of every candidate column.
        proxies: layout
            .proxies
            .iter()
            .map(|_| {
                proxies::ProxySink::new(root, config.memory_bytes / 8 / layout.proxies.len() as u64)
            })
            .collect::<Result<_, _>>()
            .map_err(spilled)?,
    })
}

/// One twin pair as a line of `leak-check --pairs-out`: the check, both rows by split, file and
/// 1-based data row (a shard and its row when read from shards), and for near twins the text
/// column and Jaccard.
pub fn pair_json(data: &Partitioned, pair: &Pair) -> serde_json::Value {
    let side = |(split, loc): (u8, Loc)| {
        serde_json::json!({
            "split": data.split_names.get(split as usize).map_or("?", String::as_str),
            "file": runfn_storage::display(&data.snapshot.files[loc.file as usize].path),
            "row": loc.row,
        })
    };
    let mut line = serde_json::json!({"check": pair.check});
    if let Some(column) = &pair.column {
        line["column"] = column.clone().into();
    }
    if let Some(jaccard) = pair.jaccard {
        line["jaccard"] = ((jaccard * 1000.0).round() / 1000.0).into();
    }
    line["earlier"] = side(pair.earlier);
    line["later"] = side(pair.later);
    line
}

/// For each row of the shards' split `split`, in shard-index order (the order evaluate scores
/// them in), whether it has an exact or near twin in the split `other`. Twins are found as
/// leak-check finds them, on the shards themselves, so the rows are identified exactly.
pub fn twin_mask(
    shards: &std::path::Path,
    config: &LeakConfig,
    split: &str,
    other: &str,
) -> Result<Vec<bool>, DataError> {
    let data = Partitioned::from_shards(shards)?;
    let index_of = |name: &str| {
        data.split_names
            .iter()
            .position(|n| n == name)
            .map(|i| i as u8)
            .ok_or_else(|| DataError::Other(format!("the shards have no split `{name}`")))
    };
    let (split, other) = (index_of(split)?, index_of(other)?);
    let config = LeakConfig {
        collect_pairs: true,
        split_order: conventional_order(&data.split_names),
        ..config.clone()
    };
    let report = check(&data, &config)?;
    let twins = report.twin_rows(split, other);
    let index = runfn_data::shards::ShardIndex::load(shards, false)?;
    let name = &data.split_names[split as usize];
    // Files of `split` in order: the shards of the splits before it come first.
    let before: usize = data.split_names[..split as usize]
        .iter()
        .map(|n| index.splits[n].shards.len())
        .sum();
    let mut mask = Vec::new();
    for (offset, shard) in index.splits[name].shards.iter().enumerate() {
        let file = (before + offset) as u32;
        mask.extend((1..=shard.rows).map(|row| twins.contains(&Loc { file, row })));
    }
    Ok(mask)
}

impl LeakReport {
    /// The rows of `split` that have a twin (exact or near) in `other`.
    pub fn twin_rows(&self, split: u8, other: u8) -> BTreeSet<Loc> {
        self.pairs
            .iter()
            .filter_map(|pair| match (pair.earlier, pair.later) {
                ((s, _), (t, loc)) if t == split && s == other => Some(loc),
                ((s, loc), (t, _)) if s == split && t == other => Some(loc),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    //! Each check on a few hand-written rows whose answer is known, and the same rows with the
    //! leak taken out.

    use std::collections::BTreeMap;

    use runfn_data::Snapshot;
    use runfn_data::split::Splits;

    use super::*;

    /// The CSV `text` as one file, split by `rules` (with `time` as manifest.data.time).
    fn partitioned(
        text: &str,
        rules: &[(&str, &str)],
        time: Option<&str>,
    ) -> (tempfile::TempDir, Partitioned) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.csv"), text).unwrap();
        let snapshot = Snapshot::open(dir.path(), &BTreeMap::new()).unwrap();
        let rules: Vec<(String, String)> = rules
            .iter()
            .map(|(n, r)| (n.to_string(), r.to_string()))
            .collect();
        let splits = Splits::parse(&rules, time, |c| snapshot.column_type(c)).unwrap();
        (dir, Partitioned::from_rules(snapshot, splits))
    }

    const BY_MONTH: [(&str, &str); 2] =
        [("train", "day < 2026-02-01"), ("test", "day >= 2026-02-01")];

    fn by_month(text: &str) -> (tempfile::TempDir, Partitioned) {
        partitioned(text, &BY_MONTH, Some("day"))
    }

    fn by_day() -> LeakConfig {
        LeakConfig {
            time: Some("day".into()),
            split_order: vec!["train".into(), "test".into()],
            time_split: true,
            ..LeakConfig::default()
        }
    }

    fn run<'a>(report: &'a LeakReport, name: &str) -> &'a LeakCheck {
        report
            .checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no check {name}"))
    }

    fn check_of(text: &str, config: &LeakConfig, name: &str) -> LeakCheck {
        let (_dir, data) = by_month(text);
        run(&check(&data, config).unwrap(), name).clone()
    }

    fn skipped(check: &LeakCheck) -> bool {
        check.passed
            && check.count == 0
            && check
                .note
                .as_deref()
                .is_some_and(|n| n.starts_with("skipped: "))
    }

    #[test]
    fn an_entity_in_two_splits_is_an_overlap() {
        let text = "id,day,x\nc1,2026-01-03,1\nc2,2026-01-04,2\nc2,2026-02-05,3\nc3,2026-02-06,4\nc3,2026-02-07,5\n";
        let config = LeakConfig {
            entity: Some("id".into()),
            ..by_day()
        };
        let found = check_of(text, &config, "entity_overlap");
        assert_eq!((found.passed, found.count), (false, 1), "{found:?}");
        assert_eq!(found.examples[0]["id"], "c2");
        let splits: Vec<_> = found.examples[0]["splits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["split"].clone(), s["at"]["row"].clone()))
            .collect();
        assert_eq!(
            splits,
            [("train".into(), 2.into()), ("test".into(), 3.into())]
        );

        // c3 twice, but only in test: not a leak.
        let apart = text.replace("c2,2026-02-05", "c4,2026-02-05");
        let clean = check_of(&apart, &config, "entity_overlap");
        assert_eq!((clean.passed, clean.count), (true, 0), "{clean:?}");
        assert!(skipped(&check_of(text, &by_day(), "entity_overlap")));
    }

    #[test]
    fn splits_out_of_time_order_are_found() {
        let text = "day,x\n2026-01-03,1\n2026-01-20,2\n2026-02-05,3\n2026-02-09,4\n";
        // The rules put the later month in train: train's last day is after test's first.
        let (_dir, data) = partitioned(
            text,
            &[("train", "day >= 2026-02-01"), ("test", "day < 2026-02-01")],
            Some("day"),
        );
        let report = check(&data, &by_day()).unwrap();
        let found = run(&report, "time_order");
        assert_eq!((found.passed, found.count), (false, 1), "{found:?}");
        assert_eq!(found.examples[0]["earlier"], "train");
        assert_eq!(found.examples[0]["earlier_max"], "2026-02-09 00:00:00");
        assert_eq!(found.examples[0]["later_min"], "2026-01-03 00:00:00");
        assert!(!report.passed);

        let clean = check_of(text, &by_day(), "time_order");
        assert_eq!((clean.passed, clean.count), (true, 0), "{clean:?}");
        let not_ranges = LeakConfig {
            time_split: false,
            ..by_day()
        };
        assert!(skipped(&check_of(text, &not_ranges, "time_order")));
    }

    #[test]
    fn a_row_repeated_across_splits_is_an_exact_twin() {
        // Row 4 repeats row 1's features in test, its text differing only in case and spaces;
        // id and day, which are not features, differ. Train's rows are all distinct, so chance
        // gives no twins.
        let text = "id,day,x,note\nc1,2026-01-03,1.5,Hello  World\nc2,2026-01-04,2.5,other\nc3,2026-01-05,3.5,third\nc4,2026-02-05,1.5,hello world\n";
        let config = LeakConfig {
            entity: Some("id".into()),
            ..by_day()
        };
        let found = check_of(text, &config, "exact_duplicates");
        assert_eq!((found.passed, found.count), (false, 1), "{found:?}");
        let rows: Vec<_> = found.examples[0]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["at"]["row"].as_u64().unwrap())
            .collect();
        assert_eq!(rows, [1, 4]);

        let differs = text.replace("c4,2026-02-05,1.5", "c4,2026-02-05,1.6");
        let clean = check_of(&differs, &config, "exact_duplicates");
        assert_eq!((clean.passed, clean.count), (true, 0), "{clean:?}");

        // Row 3 repeats row 2 within train: two of train's three rows have a twin there, so one
        // twin in test is what chance gives, and passes; a manifest tolerance still rules.
        let coarse = text.replace("c3,2026-01-05,3.5,third", "c3,2026-01-05,2.5,other");
        let chance = check_of(&coarse, &config, "exact_duplicates");
        assert_eq!((chance.passed, chance.count), (true, 1), "{chance:?}");
        let numbers = chance.chance.as_ref().unwrap();
        assert_eq!((numbers.reference.as_str(), numbers.observed), ("train", 1));
        assert!((numbers.rate - 2.0 / 3.0).abs() < 1e-12);
        assert!(numbers.p_value > numbers.alpha);
    }

    #[test]
    fn texts_that_differ_by_a_word_across_splits_are_near_twins() {
        let long = "the customer called about a billing error on the march invoice and asked for \
                    a refund of the duplicate charge and then asked to move to the annual plan";
        let edited = long.replace("march", "april");
        let other = "a short unrelated note about delivery times in the northern region warehouse";
        let text =
            format!("day,note\n2026-01-03,{long}\n2026-01-04,{other}\n2026-02-05,{edited}\n");
        let config = LeakConfig {
            text: vec!["note".into()],
            ..by_day()
        };
        let found = check_of(&text, &config, "near_duplicates");
        assert_eq!((found.passed, found.count), (false, 1), "{found:?}");
        let example = &found.examples[0];
        assert_eq!(
            (
                example["a"]["split"].as_str(),
                example["b"]["split"].as_str()
            ),
            (Some("train"), Some("test"))
        );
        assert_eq!(
            (
                example["a"]["at"]["row"].as_u64(),
                example["b"]["at"]["row"].as_u64()
            ),
            (Some(1), Some(3))
        );
        let jaccard = example["jaccard"].as_f64().unwrap();
        assert!((0.8..1.0).contains(&jaccard), "{jaccard}");

        let rewritten = format!("day,note\n2026-01-03,{long}\n2026-02-05,{other}\n");
        let clean = check_of(&rewritten, &config, "near_duplicates");
        assert_eq!((clean.passed, clean.count), (true, 0), "{clean:?}");
        assert!(skipped(&check_of(
            &text,
            &LeakConfig::default(),
            "near_duplicates"
        )));
    }

    #[test]
    fn a_feature_stamped_after_the_label_is_from_the_future() {
        let text = "day,label_date,balance,balance_at\n\
                    2026-01-03,2026-03-01,10,2026-02-01\n\
                    2026-01-04,2026-03-01,20,2026-03-02\n\
                    2026-02-05,2026-03-01,30,2026-03-01\n";
        let config = LeakConfig {
            label_time: Some("label_date".into()),
            as_of: BTreeMap::from([("balance".into(), "balance_at".into())]),
            ..by_day()
        };
        let found = check_of(text, &config, "future_features");
        assert_eq!((found.passed, found.count), (false, 1), "{found:?}");
        assert_eq!(found.examples[0]["feature"], "balance");
        assert_eq!(found.examples[0]["at"]["row"], 2);
        assert_eq!(found.examples[0]["as_of"], "2026-03-02 00:00:00");

        // Stamped on the label's own day is not later than it.
        let in_time = text.replace("2026-03-02", "2026-02-28");
        let clean = check_of(&in_time, &config, "future_features");
        assert_eq!((clean.passed, clean.count), (true, 0), "{clean:?}");
        let no_as_of = LeakConfig {
            label_time: Some("label_date".into()),
            ..by_day()
        };
        assert!(skipped(&check_of(text, &no_as_of, "future_features")));
    }

    #[test]
    fn a_feature_that_alone_predicts_the_label_is_a_proxy() {
        let mut text = String::from("day,y,refund,reason,noise\n");
        for i in 0..40 {
            let y = (i % 3 == 0) as u8;
            // refund is paid only to churners; reason names it; noise cycles regardless.
            let refund = if y == 1 { 50 + i } else { i % 7 };
            let reason = if y == 1 { "cancelled" } else { "renewed" };
            let day = if i < 30 { "2026-01-10" } else { "2026-02-10" };
            text.push_str(&format!("{day},{y},{refund},{reason},{}\n", i % 5));
        }
        let config = LeakConfig {
            label: Some("y".into()),
            ..by_day()
        };
        let found = check_of(&text, &config, "label_proxy");
        assert_eq!((found.passed, found.count), (false, 2), "{found:?}");
        let columns: Vec<_> = found.examples.iter().map(|e| e["column"].clone()).collect();
        assert_eq!(columns, ["refund", "reason"]);
        assert_eq!(found.examples[0]["auc"], 1.0);
        assert_eq!(found.examples[0]["rows"], 30, "train rows only");

        let mut mixed = String::from("day,y,refund,reason,noise\n");
        for (i, line) in text.lines().skip(1).enumerate() {
            let fields: Vec<&str> = line.split(',').collect();
            // The same values, with the label no longer following them.
            let y = (i % 2 == 0) as u8;
            mixed.push_str(&format!(
                "{},{y},{},{},{}\n",
                fields[0], fields[2], fields[3], fields[4]
            ));
        }
        let clean = check_of(&mixed, &config, "label_proxy");
        assert_eq!((clean.passed, clean.count), (true, 0), "{clean:?}");
        assert!(skipped(&check_of(&text, &by_day(), "label_proxy")));
    }

    /// A YES/NO label is read by its positive value, so a proxy of it is found as of a 0/1 one;
    /// without the value, leak-check says what to write instead of reading no label at all.
    #[test]
    fn a_text_label_is_read_by_its_positive_value() {
        let mut text = String::from("day,y,refund\n");
        for i in 0..40 {
            let y = ["NO", "YES"][usize::from(i % 3 == 0)];
            let refund = if y == "YES" { 50 + i } else { i % 7 };
            let day = if i < 30 { "2026-01-10" } else { "2026-02-10" };
            text.push_str(&format!("{day},{y},{refund}\n"));
        }
        let config = LeakConfig {
            label: Some("y".into()),
            label_positive: Some(runfn_data::label::Positive::Text("YES".into())),
            ..by_day()
        };
        let found = check_of(&text, &config, "label_proxy");
        assert_eq!((found.passed, found.count), (false, 1), "{found:?}");
        assert_eq!(found.examples[0]["auc"], 1.0);

        let (_dir, data) = by_month(&text);
        let unnamed = LeakConfig {
            label_positive: None,
            ..config.clone()
        };
        assert_eq!(
            check(&data, &unnamed).unwrap_err().to_string(),
            "manifest.data.label: `y` holds NO, YES; say which is positive with data.label_positive: \"YES\""
        );
        let wrong = LeakConfig {
            label_positive: Some(runfn_data::label::Positive::Text("Yes".into())),
            ..config
        };
        assert_eq!(
            check(&data, &wrong).unwrap_err().to_string(),
            "manifest.data.label_positive: `Yes` is not a value of `y` (values: NO, YES); did you mean \"YES\"?"
        );
    }

    #[test]
    fn the_report_passes_only_when_every_check_does() {
        let text = "day,x\n2026-01-03,1\n2026-02-05,2\n";
        let (_dir, data) = by_month(text);
        let report = check(&data, &by_day()).unwrap();
        assert!(report.passed, "{report:?}");
        let names: Vec<_> = report.checks.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "entity_overlap",
                "time_order",
                "exact_duplicates",
                "near_duplicates",
                "unseen_categories",
                "future_features",
                "label_proxy"
            ]
        );
        assert_eq!(report.bad_values, 0);
        let unknown = LeakConfig {
            entity: Some("customer".into()),
            ..by_day()
        };
        let err = check(&data, &unknown).unwrap_err().to_string();
        assert!(
            err.contains("customer") && err.contains("manifest.data.entity"),
            "{err}"
        );
    }

    const TWINS: &str = "id,day,x,note\nc1,2026-01-03,1.5,a\nc2,2026-01-04,2.5,b\nc3,2026-01-05,3.5,c\nc4,2026-02-05,1.5,a\nc5,2026-02-06,1.5,A\nc6,2026-02-07,9.5,z\nc7,2026-02-08,8.5,y\n";

    fn twins_with(decisions: &[(&str, serde_json::Value)]) -> LeakCheck {
        let manifest: serde_json::Map<String, serde_json::Value> = decisions
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        let config = LeakConfig {
            entity: Some("id".into()),
            decisions: runfn_manifest::leaks::parse_leaks(Some(&manifest.into())).unwrap(),
            ..by_day()
        };
        check_of(TWINS, &config, "exact_duplicates")
    }

    #[test]
    fn a_tolerance_passes_twins_within_it_and_the_record_keeps_the_setting() {
        // Rows 4 and 5 of test (of 4 test rows) repeat row 1 of train.
        let strict = twins_with(&[]);
        assert_eq!(
            (strict.passed, strict.count, strict.of),
            (false, 2, Some(4)),
            "{strict:?}"
        );
        assert_eq!(strict.fraction, Some(0.5));
        assert_eq!(
            serde_json::to_value(&strict.setting).unwrap(),
            serde_json::json!({"max_count": 0})
        );
        let counted = twins_with(&[("exact_duplicates", serde_json::json!({"max_count": 2}))]);
        assert!(counted.passed, "{counted:?}");
        let one = twins_with(&[("exact_duplicates", serde_json::json!({"max_count": 1}))]);
        assert!(!one.passed);
        let share = twins_with(&[(
            "exact_duplicates",
            serde_json::json!({"max_fraction": 0.5, "reason": "resales"}),
        )]);
        assert!(share.passed, "{share:?}");
        assert_eq!(share.reason.as_deref(), Some("resales"));
        let below = twins_with(&[(
            "exact_duplicates",
            serde_json::json!({"max_fraction": 0.49}),
        )]);
        assert!(!below.passed);
        let off = twins_with(&[(
            "exact_duplicates",
            serde_json::json!({"off": "twins are distinct sales"}),
        )]);
        assert_eq!((off.passed, off.count), (true, 2), "still counted: {off:?}");
        assert_eq!(
            serde_json::to_value(&off.setting).unwrap(),
            serde_json::json!({"off": true})
        );
        assert_eq!(off.reason.as_deref(), Some("twins are distinct sales"));
    }

    #[test]
    fn every_twin_pair_is_kept_when_asked() {
        let (_dir, data) = by_month(TWINS);
        let config = LeakConfig {
            entity: Some("id".into()),
            text: vec!["note".into()],
            collect_pairs: true,
            ..by_day()
        };
        let report = check(&data, &config).unwrap();
        let exact: Vec<_> = report
            .pairs
            .iter()
            .filter(|p| p.check == "exact_duplicates")
            .map(|p| (p.earlier.0, p.earlier.1.row, p.later.0, p.later.1.row))
            .collect();
        assert_eq!(exact, [(0, 1, 1, 4), (0, 1, 1, 5)]);
        let twins: Vec<u64> = report.twin_rows(1, 0).iter().map(|l| l.row).collect();
        assert_eq!(twins, [4, 5]);
        let line = pair_json(&data, &report.pairs[0]);
        assert_eq!(line["check"], "exact_duplicates");
        assert_eq!(
            (
                line["earlier"]["split"].as_str(),
                line["later"]["row"].as_u64()
            ),
            (Some("train"), Some(4))
        );
        assert!(line["later"]["file"].as_str().unwrap().ends_with("a.csv"));
        let not_asked = check(
            &data,
            &LeakConfig {
                collect_pairs: false,
                ..config
            },
        )
        .unwrap();
        assert!(not_asked.pairs.is_empty());
    }
}
