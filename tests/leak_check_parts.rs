//! leak-check cut into parts (`--part K/N --parts DIR`) and merged (`--parts DIR`) finds what
//! one process finds: the same record, every count, example and chance figure, and the same
//! twin pairs, byte for byte; what would make them differ is refused by name.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{Output, tool};

struct Table<'a> {
    /// `--in` (a snapshot) or `--shards` (shardify's folder).
    source: &'a str,
    snapshot: &'a Path,
    /// Split rules and the roles of the columns.
    args: &'a [&'a str],
    /// The record on stdin (the manifest's roles).
    record: String,
}

impl Table<'_> {
    fn leak_check(&self, extra: &[&std::ffi::OsStr]) -> Output {
        tool("leak-check")
            .args([self.source.as_ref(), self.snapshot.as_os_str()])
            // A budget that makes every sorter spill, in the parts and in one process.
            .args(["--memory", "2M", "-q"])
            .args(self.args)
            .args(extra)
            .stdin(self.record.clone())
            .run()
    }

    fn part(&self, dir: &Path, part: &str) -> Output {
        self.leak_check(&[
            "--part".as_ref(),
            part.as_ref(),
            "--parts".as_ref(),
            dir.as_os_str(),
        ])
    }

    /// Reducer `reducer` (R/M), keeping the pairs as the merge's --pairs-out asks.
    fn reduce(&self, dir: &Path, reducer: &str, pairs: &Path) -> Output {
        self.leak_check(&[
            "--reduce".as_ref(),
            reducer.as_ref(),
            "--parts".as_ref(),
            dir.as_os_str(),
            "--pairs-out".as_ref(),
            pairs.as_os_str(),
        ])
    }

    fn merge(&self, dir: &Path, pairs: &Path) -> Output {
        self.leak_check(&[
            "--parts".as_ref(),
            dir.as_os_str(),
            "--pairs-out".as_ref(),
            pairs.as_os_str(),
        ])
    }
}

/// The record without what differs between any two runs.
fn comparable(output: &Output) -> Value {
    let mut record = output.json();
    record.as_object_mut().unwrap().remove("timings");
    record
}

/// One process against `counts` parts each and their merge, then with `reducers` reducers
/// between them: the records and the pairs files must be equal. Returns one process's record.
fn parts_equal_one_process(work: &Path, table: &Table, counts: &[u32], reducers: u32) -> Value {
    std::fs::create_dir_all(work).unwrap();
    let pairs = work.join("one.pairs");
    let one = table.leak_check(&["--pairs-out".as_ref(), pairs.as_os_str()]);
    assert!(one.code <= 1, "{}", one.stderr);
    for &count in counts {
        let dir = work.join(format!("parts-{count}"));
        for k in 0..count {
            let done = table.part(&dir, &format!("{k}/{count}"));
            assert_eq!(done.code, 0, "{}", done.stderr);
            assert_eq!(done.json()["part"]["tool"], "leak-check");
        }
        let merged_pairs = work.join(format!("merged-{count}.pairs"));
        let same = |merged: &Output, how: &str| {
            assert_eq!(merged.code, one.code, "{}", merged.stderr);
            assert_eq!(
                comparable(merged),
                comparable(&one),
                "{}: {count} parts and their merge{how} differ from one process",
                table.snapshot.display()
            );
            assert_eq!(
                std::fs::read(&merged_pairs).unwrap(),
                std::fs::read(&pairs).unwrap(),
                "{}: the twin pairs of {count} parts{how} differ",
                table.snapshot.display()
            );
        };
        same(&table.merge(&dir, &merged_pairs), "");
        std::fs::remove_file(&merged_pairs).unwrap();
        for r in (0..reducers).rev() {
            let done = table.reduce(&dir, &format!("{r}/{reducers}"), &merged_pairs);
            assert_eq!(done.code, 0, "{}", done.stderr);
        }
        if reducers > 0 {
            assert!(!merged_pairs.exists(), "a reducer wrote --pairs-out");
            same(&table.merge(&dir, &merged_pairs), " with reducers");
        }
    }
    comparable(&one)
}

/// One process's record at the table's own flags.
fn parts_one(table: &Table) -> Value {
    comparable(&table.leak_check(&[]))
}

fn count_of(record: &Value, check: &str) -> u64 {
    record["leaks"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == check)
        .unwrap_or_else(|| panic!("no check {check}"))["count"]
        .as_u64()
        .unwrap()
}

/// The demo's roles are the demo manifest's (feature times included); the rest, flags.
fn demo_table(snapshot: &Path) -> Table<'_> {
    Table {
        source: "--in",
        snapshot,
        args: &[],
        record: crate::util::demo_record(),
    }
}

fn leaky_demo(out: &Path) {
    let made = tool("demo-data")
        .args(["--out".as_ref(), out.as_os_str()])
        .args(["--rows", "20000", "--parts", "5", "-q"])
        .args([
            "--trap-entity-overlap",
            "300",
            "--trap-duplicate-notes",
            "200",
        ])
        .args([
            "--trap-exact-duplicates",
            "200",
            "--trap-future-feature",
            "300",
        ])
        .run();
    assert_eq!(made.code, 0, "{}", made.stderr);
}

#[test]
fn leak_check_in_parts_finds_what_one_process_finds_on_the_demo_and_two_real_tables() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    leaky_demo(&demo);
    let table = demo_table(&demo);
    // Three parts; five (a file each); seven (two parts with no file).
    let one = parts_equal_one_process(&dir.path().join("demo-work"), &table, &[3, 5, 7], 3);
    // Every planted leak is found, so the comparison covers every check's findings.
    for check in [
        "entity_overlap",
        "exact_duplicates",
        "near_duplicates",
        "future_features",
    ] {
        assert!(count_of(&one, check) > 0, "{check}: {one}");
    }

    // What only judging reads (the near-twin threshold) may differ between the parts and the
    // merge: the merge then finds what one process with the merge's flags finds.
    let work = dir.path().join("demo-work");
    let judged = |extra: &[&str]| {
        let pairs = work.join("judged.pairs");
        let mut args: Vec<&std::ffi::OsStr> = extra.iter().map(|a| a.as_ref()).collect();
        args.extend(["--pairs-out".as_ref(), pairs.as_os_str()]);
        let out = table.leak_check(&args);
        (comparable(&out), std::fs::read(&pairs).unwrap())
    };
    let strict = ["--jaccard", "0.95"];
    let one = judged(&strict);
    let merged = judged(
        &[
            &strict[..],
            &["--parts", work.join("parts-3").to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(merged, one);
    assert!(
        count_of(&one.0, "near_duplicates") < count_of(&parts_one(&table), "near_duplicates"),
        "a stricter threshold finds fewer near twins"
    );

    // The demo's shards (shardify's folder, a file per shard), as the pipeline reads them.
    let shards = dir.path().join("shards");
    let sharded = tool("shardify")
        .args([
            "--in".as_ref(),
            demo.as_os_str(),
            "--out".as_ref(),
            shards.as_os_str(),
        ])
        .args(["--shard-rows", "3000", "-q"])
        .stdin(crate::util::demo_record())
        .run();
    assert_eq!(sharded.code, 0, "{}", sharded.stderr);
    let table = Table {
        source: "--shards",
        snapshot: &shards,
        ..demo_table(&demo)
    };
    parts_equal_one_process(&dir.path().join("shards-work"), &table, &[3], 2);

    // Callbacks to resumes: job ads (the entity) in both splits, coarse rows with twins.
    let resume = dir.path().join("resume");
    crate::parts::cut_into_files(
        Path::new("testdata/real/resume/snapshot/resume.csv"),
        &resume,
        6,
    );
    let table = Table {
        source: "--in",
        snapshot: &resume,
        args: &[
            "--split",
            "train=hash(firstname) < 0.7",
            "--split",
            "test=hash(firstname) >= 0.7",
            "--entity",
            "job_ad_id",
            "--label",
            "received_callback",
        ],
        record: String::new(),
    };
    let one = parts_equal_one_process(&dir.path().join("resume-work"), &table, &[4], 2);
    assert!(count_of(&one, "entity_overlap") > 0, "{one}");

    // Police stops: rolling windows, resolved from the newest date by every part.
    let stops = dir.path().join("stops");
    crate::parts::cut_into_files(
        Path::new("testdata/real/stops/snapshot/stops.csv"),
        &stops,
        7,
    );
    let table = Table {
        source: "--in",
        snapshot: &stops,
        args: &[
            "--split",
            "test=last 2 months",
            "--split",
            "train=before test",
            "--time",
            "date",
        ],
        record: String::new(),
    };
    let one = parts_equal_one_process(&dir.path().join("stops-work"), &table, &[3], 2);
    // Every stop's id is new in the later window: the category check's counts and chance.
    assert!(count_of(&one, "unseen_categories") > 0, "{one}");
}

fn runs_of(dir: &Path, part: u32, count: u32) -> PathBuf {
    dir.join(format!("leak-check.part-{part}-of-{count}.runs"))
}

#[test]
fn what_would_make_leak_check_parts_differ_from_one_process_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    leaky_demo(&demo);
    let table = demo_table(&demo);
    let parts = dir.path().join("parts");
    let pairs = dir.path().join("pairs");
    let refused = |output: &Output, says: &str| {
        assert_eq!(output.code, 2, "{}", output.stderr);
        assert!(output.stdout.is_empty(), "{}", output.stdout);
        assert!(output.stderr.contains(says), "{says}: {}", output.stderr);
        assert!(!pairs.exists());
    };

    // --pairs-out is the merge's.
    let part = table.leak_check(&[
        "--part".as_ref(),
        "0/3".as_ref(),
        "--parts".as_ref(),
        parts.as_os_str(),
        "--pairs-out".as_ref(),
        pairs.as_os_str(),
    ]);
    refused(&part, "--pairs-out");

    for k in [0, 2] {
        assert_eq!(table.part(&parts, &format!("{k}/3")).code, 0);
    }
    refused(&table.merge(&parts, &pairs), "lacks part 1 of 3");
    assert_eq!(table.part(&parts, "1/3").code, 0);

    // Other roles at the merge than at the parts.
    let other = Table {
        args: &["--entity", "region"],
        ..demo_table(&demo)
    };
    refused(
        &other.merge(&parts, &pairs),
        "read the rows with other columns or splits",
    );

    // A run changed after its part wrote it (same length), and one cut short.
    let rows = runs_of(&parts, 1, 3).join("rows.run");
    let mut bytes = std::fs::read(&rows).unwrap();
    bytes[40] ^= 0x10;
    std::fs::write(&rows, &bytes).unwrap();
    refused(
        &table.merge(&parts, &pairs),
        "rows.run changed since its part wrote it",
    );
    std::fs::write(&rows, &bytes[..bytes.len() - 37]).unwrap();
    refused(&table.merge(&parts, &pairs), "rows.run has another length");
    assert_eq!(table.part(&parts, "1/3").code, 0);

    // A text store cut short.
    let store = std::fs::read_dir(runs_of(&parts, 2, 3))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("texts-")
        })
        .expect("part 2 stored texts");
    let text = std::fs::read(&store).unwrap();
    std::fs::write(&store, &text[..text.len() / 2]).unwrap();
    refused(&table.merge(&parts, &pairs), "has another length");
    assert_eq!(table.part(&parts, "2/3").code, 0);

    // The snapshot grew since the parts ran.
    let extra = demo.join("part-00005.csv");
    std::fs::copy(demo.join("part-00004.csv"), &extra).unwrap();
    refused(&table.merge(&parts, &pairs), "another snapshot");
    std::fs::remove_file(&extra).unwrap();

    // Reducers: a missing one, ones that kept no pairs for a merge that lists them, and ones
    // of parts run again since, are refused.
    let kept = dir.path().join("kept");
    assert_eq!(table.reduce(&parts, "1/2", &kept).code, 0);
    refused(&table.merge(&parts, &pairs), "lacks part 0 of 2");
    let no_pairs = table.leak_check(&[
        "--reduce".as_ref(),
        "0/2".as_ref(),
        "--parts".as_ref(),
        parts.as_os_str(),
    ]);
    assert_eq!(no_pairs.code, 0, "{}", no_pairs.stderr);
    refused(&table.merge(&parts, &pairs), "kept other examples or pairs");
    assert_eq!(table.reduce(&parts, "0/2", &kept).code, 0);
    assert_eq!(table.part(&parts, "2/3").code, 0);
    refused(&table.merge(&parts, &pairs), "reduced other parts");
    for r in 0..2 {
        assert_eq!(table.reduce(&parts, &format!("{r}/2"), &kept).code, 0);
    }

    // A part run again replaces what it left; the merge passes once every part is whole.
    std::fs::write(runs_of(&parts, 0, 3).join("leftover"), b"x").unwrap();
    assert_eq!(table.part(&parts, "0/3").code, 0);
    assert!(!runs_of(&parts, 0, 3).join("leftover").exists());
    for r in 0..2 {
        assert_eq!(table.reduce(&parts, &format!("{r}/2"), &kept).code, 0);
    }
    let merged = table.merge(&parts, &pairs);
    assert_eq!(merged.code, 1, "{}", merged.stderr);
    assert!(pairs.exists());
}

/// A pinned snapshot is hashed once over the parts: each part hashes the files it reads, so a
/// file changed since the pin stops the part that reads it, by name, and not the others.
#[test]
fn each_part_checks_its_own_files_against_the_pin() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let made = tool("demo-data")
        .args(["--out".as_ref(), demo.as_os_str()])
        .args(["--rows", "4000", "--parts", "4", "-q"])
        .run();
    assert_eq!(made.code, 0, "{}", made.stderr);
    let manifest = dir.path().join("drift.json");
    let text = serde_json::json!({
        "data": {"snapshot": demo, "entity": "customer_id", "time": "signup_date",
                 "label": "churned",
                 "splits": {"train": "signup_date < 2026-07-01", "test": "signup_date >= 2026-07-01"}},
        "validate": {},
    });
    std::fs::write(&manifest, text.to_string()).unwrap();
    let pinned = tool("mf-hash")
        .args(["pin".as_ref(), manifest.as_os_str(), "-q".as_ref()])
        .run();
    assert_eq!(pinned.code, 0, "{}", pinned.stderr);
    let record = tool("mf-hash")
        .args([manifest.as_os_str(), "--drift-only".as_ref(), "-q".as_ref()])
        .run();
    assert_eq!(record.code, 0, "{}", record.stderr);
    let part = |k: u32| {
        tool("leak-check")
            .args(["--part", &format!("{k}/2"), "--parts"])
            .args([dir.path().join("parts")])
            .args(["-q"])
            .stdin(record.stdout.clone())
            .run()
    };
    // The last file, one digit changed (its size kept).
    let last = demo.join("part-00003.csv");
    let mut bytes = std::fs::read(&last).unwrap();
    let at = bytes.len() - 3;
    bytes[at] = if bytes[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(&last, &bytes).unwrap();
    assert_eq!(part(0).code, 0, "{}", part(0).stderr);
    let refused = part(1);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("part-00003.csv"),
        "{}",
        refused.stderr
    );
}
