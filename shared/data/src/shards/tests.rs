use std::collections::BTreeMap;
use std::path::Path;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use super::*;
use crate::read::Snapshot;
use crate::split::Splits;

fn write_snapshot(dir: &Path, rows: usize) {
    std::fs::create_dir_all(dir).unwrap();
    for part in 0..2 {
        let mut text = String::from("id,day,n,note\n");
        for i in (part * rows / 2)..((part + 1) * rows / 2) {
            text.push_str(&format!(
                "C{i:07},2026-{:02}-{:02},{i},note {}\n",
                6 + i % 4,
                i % 28 + 1,
                i % 97
            ));
        }
        std::fs::write(dir.join(format!("part-{part}.csv")), text).unwrap();
    }
}

fn splits(snapshot: &Snapshot) -> Splits {
    let rules = [
        ("train", "day < 2026-08-01"),
        ("val", "2026-08"),
        ("test", "2026-09"),
    ];
    let rules: Vec<(String, String)> = rules
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    Splits::parse(&rules, Some("day"), |c| snapshot.column_type(c)).unwrap()
}

fn options(out: &Path, memory_bytes: u64) -> ShardOptions {
    ShardOptions {
        out: out.to_path_buf(),
        seed: 42,
        memory_bytes,
        shard_rows: 700,
        row_group_rows: 256,
        zstd_level: 3,
        source_name: None,
    }
}

fn run(data: &Path, out: &Path, memory_bytes: u64) -> ShardIndex {
    let snapshot = Snapshot::open(data, &BTreeMap::new()).unwrap();
    shardify(
        &snapshot,
        &splits(&snapshot),
        &options(out, memory_bytes),
        &|_| {},
    )
    .unwrap()
    .0
}

fn all_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    for split in ["train", "val", "test"] {
        for entry in std::fs::read_dir(dir.join(split)).unwrap() {
            let path = entry.unwrap().path();
            files.insert(
                path.strip_prefix(dir).unwrap().display().to_string(),
                std::fs::read(&path).unwrap(),
            );
        }
    }
    files.insert(
        "index.json".into(),
        std::fs::read(dir.join("index.json")).unwrap(),
    );
    files
}

fn ids(path: &Path) -> Vec<i64> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    reader
        .flat_map(|b| {
            b.unwrap()
                .column(2)
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect()
}

#[test]
fn splits_rows_into_shuffled_shards_with_an_index() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(&dir.path().join("data"), 4000);
    let index = run(&dir.path().join("data"), &dir.path().join("out"), 1 << 30);
    assert_eq!(index.splits["train"].rows, 2000);
    assert_eq!(index.splits["val"].rows, 1000);
    assert_eq!(index.splits["test"].rows, 1000);
    assert_eq!(index.unassigned_rows, 0);
    assert_eq!(index.splits["train"].shards.len(), 3, "700-row shards");
    assert_eq!(
        index.splits["train"]
            .shards
            .iter()
            .map(|s| s.rows)
            .collect::<Vec<_>>(),
        [700, 700, 600]
    );
    let out = dir.path().join("out");
    ShardIndex::load(&out, true).unwrap();
    let mut train: Vec<i64> = index
        .shard_paths(&out, "train")
        .iter()
        .flat_map(|p| ids(p))
        .collect();
    let shuffled = train.clone();
    train.sort();
    assert_ne!(shuffled, train, "rows are shuffled");
    let expected: Vec<i64> = (0..4000).filter(|i| 6 + i % 4 < 8).collect();
    assert_eq!(train, expected, "every train row exactly once");
}

#[test]
fn same_input_and_seed_give_identical_bytes_whatever_the_memory_budget() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(&dir.path().join("data"), 6000);
    run(&dir.path().join("data"), &dir.path().join("a"), 1 << 30);
    run(&dir.path().join("data"), &dir.path().join("b"), 1 << 30);
    // A tiny budget forces many buckets and spills to disk.
    run(&dir.path().join("data"), &dir.path().join("c"), 64 << 10);
    let a = all_files(&dir.path().join("a"));
    assert_eq!(a, all_files(&dir.path().join("b")));
    assert_eq!(a, all_files(&dir.path().join("c")));
}

#[test]
fn another_seed_gives_another_order() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(&dir.path().join("data"), 2000);
    let snapshot = Snapshot::open(&dir.path().join("data"), &BTreeMap::new()).unwrap();
    let mut other = options(&dir.path().join("b"), 1 << 30);
    other.seed = 43;
    shardify(
        &snapshot,
        &splits(&snapshot),
        &options(&dir.path().join("a"), 1 << 30),
        &|_| {},
    )
    .unwrap();
    shardify(&snapshot, &splits(&snapshot), &other, &|_| {}).unwrap();
    assert_ne!(
        ids(&dir.path().join("a/train/part-00000.parquet")),
        ids(&dir.path().join("b/train/part-00000.parquet"))
    );
}

#[test]
fn verify_catches_a_changed_shard_and_a_missing_index() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(&dir.path().join("data"), 2000);
    let out = dir.path().join("out");
    run(&dir.path().join("data"), &out, 1 << 30);
    let shard = out.join("val/part-00000.parquet");
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes.truncate(bytes.len() - 10);
    std::fs::write(&shard, bytes).unwrap();
    let err = ShardIndex::load(&out, true).unwrap_err().to_string();
    assert!(
        err.contains("val/part-00000.parquet: does not match index.json"),
        "{err}"
    );
    std::fs::remove_file(out.join("index.json")).unwrap();
    let err = ShardIndex::load(&out, false).unwrap_err().to_string();
    assert!(err.contains("shardify did not complete"), "{err}");
}

#[test]
fn a_row_in_two_splits_is_an_error_naming_file_and_row() {
    let dir = tempfile::tempdir().unwrap();
    write_snapshot(&dir.path().join("data"), 200);
    let snapshot = Snapshot::open(&dir.path().join("data"), &BTreeMap::new()).unwrap();
    let rules = vec![
        ("train".to_string(), "day < 2026-08-15".to_string()),
        ("val".to_string(), "2026-08".to_string()),
    ];
    let splits = Splits::parse(&rules, Some("day"), |c| snapshot.column_type(c)).unwrap();
    let err = shardify(
        &snapshot,
        &splits,
        &options(&dir.path().join("out"), 1 << 30),
        &|_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("part-0.csv: row 3 falls in both splits `train` and `val`"),
        "{err}"
    );
    assert!(!dir.path().join("out/index.json").exists());
}

#[test]
fn a_splits_rows_digest_names_its_rows_and_their_order_not_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write_snapshot(&data, 3000);
    let snapshot = Snapshot::open(&data, &BTreeMap::new()).unwrap();
    let shard = |out: &str, seed: u64, shard_rows: usize| {
        let options = ShardOptions {
            seed,
            shard_rows,
            ..options(&dir.path().join(out), 1 << 30)
        };
        shardify(&snapshot, &splits(&snapshot), &options, &|_| {})
            .unwrap()
            .0
    };
    let a = shard("a", 42, 700);
    let digest = |index: &ShardIndex, split: &str| index.splits[split].rows_blake3.clone().unwrap();
    // What the writer recorded is what a reader recomputes from the shards.
    for split in ["train", "val", "test"] {
        let (recomputed, rows) = split_rows_digest(&dir.path().join("a"), &a, split).unwrap();
        assert_eq!(
            (recomputed, rows),
            (digest(&a, split), a.splits[split].rows)
        );
    }
    // Other shard sizes, the same rows in the same order: the same digest.
    let b = shard("b", 42, 333);
    assert_ne!(a.splits["test"].shards.len(), b.splits["test"].shards.len());
    assert_eq!(digest(&a, "test"), digest(&b, "test"));
    // Another seed orders the same rows differently; other splits hold other rows.
    let c = shard("c", 43, 700);
    assert_ne!(digest(&a, "test"), digest(&c, "test"));
    assert_ne!(digest(&a, "test"), digest(&a, "val"));
    // The format is recorded; an index without it (written before v2) is recomputed as v1, and
    // a format this build does not know is named.
    assert_eq!(a.splits["test"].rows_format.as_deref(), Some(ROWS_FORMAT));
    let mut old = a.clone();
    old.splits.get_mut("test").unwrap().rows_format = None;
    let (v1, rows) = split_rows_digest(&dir.path().join("a"), &old, "test").unwrap();
    assert_eq!(rows, a.splits["test"].rows);
    assert_ne!(v1, digest(&a, "test"));
    old.splits.get_mut("test").unwrap().rows_format = Some("runfn-rows-v9".into());
    let err = split_rows_digest(&dir.path().join("a"), &old, "test")
        .unwrap_err()
        .to_string();
    assert!(err.contains("rows format `runfn-rows-v9`"), "{err}");
}

/// On the real tables (testdata/real: telco's strings, integers and floats; email's timestamps
/// too): the column-parallel writer gives `ArrowWriter`'s bytes across row groups and uneven
/// calls, and every column's digest text is the text Arrow's cast gives.
#[test]
fn real_tables_get_arrow_writers_bytes_and_the_casts_digest_text() {
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    use super::column_parallel::{ColumnParallelWriter, GroupSlots};
    use super::value_text::assert_same_as_cast;

    for table in ["telco", "email"] {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/real")
            .join(table)
            .join("snapshot");
        let snapshot = Snapshot::open(&root, &BTreeMap::new()).unwrap();
        let properties = || {
            WriterProperties::builder()
                .set_max_row_group_row_count(Some(1500))
                .build()
        };
        let mut expected =
            ArrowWriter::try_new(Vec::new(), snapshot.schema.clone(), Some(properties())).unwrap();
        // Two row groups in the background: the writer shardify uses when memory allows.
        let mut parallel = ColumnParallelWriter::try_new(
            Vec::new(),
            snapshot.schema.clone(),
            properties(),
            u64::MAX,
            GroupSlots::new(2),
        )
        .unwrap();
        let mut rows = 0;
        for typed in snapshot.read_file_in(0, 1000).unwrap() {
            let batch = typed.unwrap().batch;
            rows += batch.num_rows();
            let cut = batch.num_rows().min(333);
            for (start, len) in [(0, cut), (cut, batch.num_rows() - cut)] {
                expected.write(&batch.slice(start, len)).unwrap();
                parallel.write(&batch.slice(start, len)).unwrap();
            }
            for (index, column) in batch.columns().iter().enumerate() {
                assert_same_as_cast(column, &format!("{table}: column {index}"));
            }
        }
        assert!(rows > 3000, "{table}: {rows} rows");
        assert_eq!(
            parallel.into_inner().unwrap(),
            expected.into_inner().unwrap(),
            "{table}: Parquet bytes"
        );
    }
}

/// The index names the snapshot by the digest `mf-hash` gives it, though shardify hashes the
/// files as it reads their rows: on real tables, with a file the readers skip (hashed on its
/// own), and on JSON Lines.
#[test]
fn the_index_digest_is_the_snapshots_digest_though_hashed_while_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut roots = Vec::new();
    for table in ["economics", "telco", "email"] {
        let real = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/real")
            .join(table)
            .join("snapshot");
        let root = dir.path().join(table);
        std::fs::create_dir_all(&root).unwrap();
        for entry in std::fs::read_dir(&real).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, root.join(path.file_name().unwrap())).unwrap();
        }
        std::fs::write(root.join(".provenance"), format!("{table}\n")).unwrap();
        roots.push(root);
    }
    let json = dir.path().join("json");
    std::fs::create_dir_all(&json).unwrap();
    let lines: String = (0..500)
        .map(|i| format!("{{\"id\": {i}, \"day\": \"2026-0{}-01\"}}\n", 6 + i % 4))
        .collect();
    std::fs::write(json.join("part-0.jsonl"), lines).unwrap();
    roots.push(json);

    for root in roots {
        let snapshot = Snapshot::open(&root, &BTreeMap::new()).unwrap();
        let first = snapshot.columns[0].name.clone();
        let rules = vec![("all".to_string(), format!("hash({first}) < 1.0"))];
        let splits = Splits::parse(&rules, None, |c| snapshot.column_type(c)).unwrap();
        let out = dir.path().join("out");
        let (index, _) = shardify(&snapshot, &splits, &options(&out, 64 << 20), &|_| {}).unwrap();
        let expected = runfn_manifest::digest::digest_path(&root, &|_| {}).unwrap();
        assert_eq!(index.source.digest, expected.digest, "{}", root.display());
        assert_eq!(
            (index.source.files, index.source.bytes),
            (expected.files, expected.bytes)
        );
        std::fs::remove_dir_all(&out).unwrap();
    }
}

/// The pieces a bucket is gathered in end where the writer's calls end (every `WRITE_ROWS` rows
/// from each shard's first row), so no call is concatenated from two pieces: checked against
/// that rule itself, after rows already written that end mid-call, on a call's end and on a
/// shard's end, and with shards that are not a whole number of calls.
#[test]
fn gather_pieces_end_where_the_writer_calls_end() {
    use crate::shards::column_parallel::GroupSlots;
    use crate::shards::writer::{ShardWriterOptions, SplitWriter, WRITE_ROWS};
    use arrow::array::{ArrayRef, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    let shard_rows = 20_000;
    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
    let options = ShardWriterOptions {
        shard_rows,
        row_group_rows: 4096,
        zstd_level: 1,
        background: GroupSlots::new(0),
    };
    let call_ends_at = |row: usize| (row % shard_rows).is_multiple_of(WRITE_ROWS);
    for written in [0, 5_000, WRITE_ROWS, 19_999, 20_000, 33_333] {
        let dir = tempfile::tempdir().unwrap();
        let mut writer =
            SplitWriter::new(dir.path(), "train", schema.clone(), &options, vec![false]).unwrap();
        if written > 0 {
            let values = Int64Array::from_iter_values(0..written as i64);
            let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(values) as ArrayRef]);
            writer.write(&batch.unwrap()).unwrap();
        }
        for (rows, about) in [(100_000, 10_000), (3, 10_000), (50_000, 1), (8_192, 8_192)] {
            let lengths = writer.piece_lengths(rows, about);
            assert_eq!(lengths.iter().sum::<usize>(), rows, "{written} then {rows}");
            let mut end = written;
            for (i, length) in lengths.iter().enumerate() {
                end += length;
                if i + 1 < lengths.len() {
                    assert!(*length >= about, "{written} then {rows}: {lengths:?}");
                    assert!(call_ends_at(end), "{written} then {rows}: {lengths:?}");
                }
            }
        }
    }
}

/// Which columns get a dictionary, in each shard's first row group.
fn dictionaries(path: &Path) -> Vec<(String, bool)> {
    let reader =
        parquet::file::reader::SerializedFileReader::new(std::fs::File::open(path).unwrap());
    let metadata = parquet::file::reader::FileReader::metadata(&reader.unwrap()).clone();
    metadata
        .row_group(0)
        .columns()
        .iter()
        .map(|c| {
            (
                c.column_path().string(),
                c.dictionary_page_offset().is_some(),
            )
        })
        .collect()
}

/// A near-unique text column (a row group's dictionary would pass the writer's limit) is
/// written plain from the start; an id whose dictionary fits, and the categories, keep theirs.
/// The choice comes from a sample fixed by the keys, so the bytes are the same whatever the
/// memory. On a real table (telco, 7k rows) every dictionary fits and is kept.
#[test]
fn near_unique_columns_are_written_without_a_dictionary() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mut text = String::from("id,day,n,note\n");
    for i in 0..40_000 {
        text.push_str(&format!(
            "C{i:07},2026-{:02}-{:02},{},ticket {i} about the {} page: {}\n",
            6 + i % 4,
            i % 28 + 1,
            i % 97,
            ["billing", "export", "login"][i % 3],
            "it failed again after the update. ".repeat(4)
        ));
    }
    std::fs::write(data.join("part-0.csv"), text).unwrap();
    let shard = |memory: u64| {
        let out = dir.path().join(format!("out-{memory}"));
        let snapshot = Snapshot::open(&data, &BTreeMap::new()).unwrap();
        let options = ShardOptions {
            shard_rows: 1_000_000,
            row_group_rows: 250_000,
            ..options(&out, memory)
        };
        shardify(&snapshot, &splits(&snapshot), &options, &|_| {}).unwrap();
        out
    };
    let out = shard(1 << 30);
    let expected: Vec<(String, bool)> = [("id", true), ("day", true), ("n", true), ("note", false)]
        .iter()
        .map(|(c, d)| (c.to_string(), *d))
        .collect();
    assert_eq!(
        dictionaries(&out.join("train/part-00000.parquet")),
        expected
    );
    assert_eq!(all_files(&out), all_files(&shard(4 << 20)));

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/real/telco/snapshot");
    let snapshot = Snapshot::open(&root, &BTreeMap::new()).unwrap();
    let rules = vec![("all".to_string(), "hash(customer_id) < 1.0".to_string())];
    let splits = Splits::parse(&rules, None, |c| snapshot.column_type(c)).unwrap();
    let out = dir.path().join("telco");
    let options = ShardOptions {
        shard_rows: 1_000_000,
        row_group_rows: 250_000,
        ..options(&out, 1 << 30)
    };
    shardify(&snapshot, &splits, &options, &|_| {}).unwrap();
    let columns = dictionaries(&out.join("all/part-00000.parquet"));
    assert_eq!(columns.len(), 21);
    assert!(
        columns.iter().all(|(_, dictionary)| *dictionary),
        "{columns:?}"
    );
}

/// On the real tables (telco's strings, integers and floats with nulls; email's timestamps,
/// hashed through their text; stops' nulls, coordinates and timestamps) the rows digest that
/// shardify records is the one recomputed from the shards, and one value changed in one row
/// changes it.
#[test]
fn real_tables_rows_digests_are_recomputed_from_their_shards() {
    for (table, id) in [
        ("telco", "customer_id"),
        ("email", "email_id"),
        ("stops", "idNum"),
    ] {
        let source = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/real")
            .join(table)
            .join("snapshot");
        let dir = tempfile::tempdir().unwrap();
        let shard = |data: &Path, out: &str| {
            let snapshot = Snapshot::open(data, &BTreeMap::new()).unwrap();
            let rules: Vec<(String, String)> = [
                ("train", format!("hash({id}) < 0.7")),
                ("test", format!("hash({id}) >= 0.7")),
            ]
            .into_iter()
            .map(|(a, b)| (a.to_string(), b))
            .collect();
            let splits = Splits::parse(&rules, None, |c| snapshot.column_type(c)).unwrap();
            let out = dir.path().join(out);
            let index = shardify(&snapshot, &splits, &options(&out, 1 << 30), &|_| {})
                .unwrap()
                .0;
            (index, out)
        };
        let (index, out) = shard(&source, "a");
        for (split, entry) in &index.splits {
            let (recomputed, rows) = split_rows_digest(&out, &index, split).unwrap();
            assert_eq!(
                (Some(recomputed), rows),
                (entry.rows_blake3.clone(), entry.rows),
                "{table} {split}"
            );
        }
        // The last character of the third data row changes (its length does not).
        let file = std::fs::read_dir(&source).unwrap().next().unwrap().unwrap();
        let text = std::fs::read_to_string(file.path()).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let last = lines[3].pop().unwrap();
        lines[3].push(if last == '7' { '8' } else { '7' });
        let changed = dir.path().join("changed");
        std::fs::create_dir_all(&changed).unwrap();
        std::fs::write(changed.join(file.file_name()), lines.join("\n") + "\n").unwrap();
        let (other, _) = shard(&changed, "b");
        let digests = |index: &ShardIndex| -> Vec<Option<String>> {
            index
                .splits
                .values()
                .map(|s| s.rows_blake3.clone())
                .collect()
        };
        let differ = digests(&index)
            .iter()
            .zip(digests(&other))
            .filter(|(a, b)| **a != *b)
            .count();
        assert_eq!(differ, 1, "{table}: one split holds the changed row");
    }
}
