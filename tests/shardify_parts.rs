//! shardify cut into parts (`--part K/N`), an array of reducers (`--reduce R/M`) and a merge
//! (`--parts DIR`) writes the shards, the index and the record one process writes, byte for
//! byte; what would make them differ is refused by name.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{Output, file_hashes, tool};

/// Small shards and row groups, and a budget that cuts the key space into many buckets: shards
/// start mid-bucket and reducers meet mid-bucket.
const WRITING: [&str; 6] = [
    "--shard-rows",
    "997",
    "--row-group-rows",
    "300",
    "--memory",
    "2M",
];

struct Table<'a> {
    snapshot: &'a Path,
    splits: &'a [&'a str],
    extra: &'a [&'a str],
}

impl Table<'_> {
    fn shardify(&self, args: &[&std::ffi::OsStr], record: &str) -> Output {
        let mut run = tool("shardify")
            .args(["--in".as_ref(), self.snapshot.as_os_str()])
            .args(["--seed", "11", "-q"])
            .args(WRITING)
            .args(self.extra);
        for split in self.splits {
            run = run.args(["--split", split]);
        }
        run.args(args).stdin(record.to_string()).run()
    }

    fn part(&self, parts: &Path, part: &str, record: &str) -> Output {
        self.shardify(
            &[
                "--part".as_ref(),
                part.as_ref(),
                "--parts".as_ref(),
                parts.as_os_str(),
            ],
            record,
        )
    }

    fn reduce(&self, parts: &Path, out: &Path, reducer: &str, record: &str) -> Output {
        self.shardify(
            &[
                "--reduce".as_ref(),
                reducer.as_ref(),
                "--parts".as_ref(),
                parts.as_os_str(),
                "--out".as_ref(),
                out.as_os_str(),
            ],
            record,
        )
    }

    fn merge(&self, parts: &Path, out: &Path, record: &str) -> Output {
        self.shardify(
            &[
                "--parts".as_ref(),
                parts.as_os_str(),
                "--out".as_ref(),
                out.as_os_str(),
            ],
            record,
        )
    }

    fn one(&self, out: &Path, record: &str) -> Output {
        self.shardify(&["--out".as_ref(), out.as_os_str()], record)
    }
}

/// The record without what differs between any two runs (timings) or names the folder.
fn comparable(output: &Output) -> Value {
    let mut record = output.json();
    record.as_object_mut().unwrap().remove("timings");
    record["shards"].as_object_mut().unwrap().remove("dir");
    record
}

/// One process against `parts` parts, `reducers` reducers and the merge, and against the parts
/// merged with no reducer (the merge reduces): every file and the record must be equal.
fn parts_equal_one_process(dir: &Path, table: &Table, parts: u32, reducers: u32) {
    let record = "";
    let one = table.one(&dir.join("one"), record);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let (folder, out) = (dir.join("parts"), dir.join("two"));
    for k in 0..parts {
        let done = table.part(&folder, &format!("{k}/{parts}"), record);
        assert_eq!(done.code, 0, "{}", done.stderr);
        assert_eq!(done.json()["part"]["tool"], "shardify");
    }
    // The merge alone, before any reducer ran: it reduces itself.
    let alone = dir.join("three");
    let merged = table.merge(&folder, &alone, record);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    assert_eq!(comparable(&merged), comparable(&one));
    assert_eq!(file_hashes(&alone), file_hashes(&dir.join("one")));
    for r in (0..reducers).rev() {
        let done = table.reduce(&folder, &out, &format!("{r}/{reducers}"), record);
        assert_eq!(done.code, 0, "{}", done.stderr);
    }
    let merged = table.merge(&folder, &out, record);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    assert_eq!(comparable(&merged), comparable(&one));
    let (expected, found) = (file_hashes(&dir.join("one")), file_hashes(&out));
    assert_eq!(
        found,
        expected,
        "{}: the shards of {parts} parts and {reducers} reducers differ from one process's",
        table.snapshot.display()
    );
    let shards = expected.keys().filter(|f| f.ends_with(".parquet")).count();
    assert!(
        shards > reducers as usize,
        "{shards} shards: too few to cut"
    );
}

#[test]
fn shardify_in_parts_writes_what_one_process_writes_on_the_demo_and_two_real_tables() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let made = tool("demo-data")
        .args(["--out".as_ref(), demo.as_os_str()])
        .args(["--rows", "20000", "--parts", "5", "-q"])
        .run();
    assert_eq!(made.code, 0, "{}", made.stderr);
    let work = dir.path().join("demo-work");
    let table = Table {
        snapshot: &demo,
        splits: &[
            "train=signup_date < 2026-07-01",
            "val=2026-07",
            "test=2026-08..2026-09",
        ],
        extra: &["--time", "signup_date"],
    };
    parts_equal_one_process(&work, &table, 3, 2);

    // The same demo as Parquet files of several row groups each.
    let parquet = dir.path().join("demo-parquet");
    std::fs::create_dir_all(&parquet).unwrap();
    crate::util::python_stdout(
        "import glob, os, sys, pyarrow.csv as c, pyarrow.parquet as p\n\
         for f in sorted(glob.glob(os.path.join(sys.argv[1], '*.csv'))):\n\
         \x20   name = os.path.basename(f).replace('.csv', '.parquet')\n\
         \x20   p.write_table(c.read_csv(f), os.path.join(sys.argv[2], name), row_group_size=1500)\n",
        &[demo.as_os_str(), parquet.as_os_str()],
    );
    let table = Table {
        snapshot: &parquet,
        ..table
    };
    parts_equal_one_process(&dir.path().join("parquet-work"), &table, 3, 2);

    let telco = dir.path().join("telco");
    crate::parts::cut_into_files(
        Path::new("testdata/real/telco/snapshot/telco.csv"),
        &telco,
        6,
    );
    let table = Table {
        snapshot: &telco,
        splits: &[
            "train=hash(customer_id) < 0.8",
            "test=hash(customer_id) >= 0.8",
        ],
        extra: &[],
    };
    parts_equal_one_process(&dir.path().join("telco-work"), &table, 4, 3);

    // Police stops: rolling windows, resolved from the newest date by every part.
    let stops = dir.path().join("stops");
    crate::parts::cut_into_files(
        Path::new("testdata/real/stops/snapshot/stops.csv"),
        &stops,
        7,
    );
    let table = Table {
        snapshot: &stops,
        splits: &["test=last 2 months", "train=before test"],
        extra: &["--time", "date"],
    };
    parts_equal_one_process(&dir.path().join("stops-work"), &table, 3, 2);
}

/// Replaces one digit of `file` with another, keeping its size.
fn change_a_digit(file: &Path) {
    let mut bytes = std::fs::read(file).unwrap();
    let at = bytes.len() / 2
        + bytes[bytes.len() / 2..]
            .iter()
            .position(u8::is_ascii_digit)
            .unwrap();
    bytes[at] = if bytes[at] == b'7' { b'3' } else { b'7' };
    std::fs::write(file, bytes).unwrap();
}

fn slot_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "arrows"))
        .collect();
    files.sort();
    files
}

#[test]
fn what_would_make_shardify_parts_differ_from_one_process_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let made = tool("demo-data")
        .args(["--out".as_ref(), demo.as_os_str()])
        .args(["--rows", "9000", "--parts", "3", "-q"])
        .run();
    assert_eq!(made.code, 0, "{}", made.stderr);
    // mf-hash digests the snapshot: the merge checks the parts' reads against that digest.
    let digested = tool("mf-hash")
        .args(["testdata/demo/manifest.yaml", "-q"])
        .args(["--data-digest".as_ref(), demo.as_os_str()])
        .run();
    assert_eq!(digested.code, 0, "{}", digested.stderr);
    let record = digested.stdout;
    // The manifest's splits, given as flags too: the merges below without the record need them.
    let table = Table {
        snapshot: &demo,
        splits: &[
            "train=signup_date < 2026-07-01",
            "val=2026-07",
            "test=2026-08..2026-09",
        ],
        extra: &["--time", "signup_date"],
    };
    let (folder, out) = (dir.path().join("parts"), dir.path().join("out"));
    for k in 0..3 {
        let done = table.part(&folder, &format!("{k}/3"), &record);
        assert_eq!(done.code, 0, "{}", done.stderr);
    }

    // A part killed halfway left its slots folder under a temporary name: the part's next run
    // removes it.
    let left = folder.join(".shardify.part-0-of-3.slots.tmpKILLED");
    std::fs::create_dir_all(&left).unwrap();
    std::fs::write(left.join("slot-0.arrows"), b"half").unwrap();
    let again = table.part(&folder, "0/3", &record);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(!left.exists(), "the killed part's folder is still there");

    // A missing part.
    let partial = folder.join("shardify.part-1-of-3.json");
    let kept = std::fs::read(&partial).unwrap();
    std::fs::remove_file(&partial).unwrap();
    table
        .merge(&folder, &out, &record)
        .assert_bad_input("shardify", "lacks part 1 of 3");
    std::fs::write(&partial, &kept).unwrap();

    // Other writing flags than the parts'.
    tool("shardify")
        .args(["--in".as_ref(), demo.as_os_str()])
        .args(["--seed", "11"])
        .args([
            "--shard-rows",
            "500",
            "--row-group-rows",
            "300",
            "--memory",
            "2M",
            "-q",
        ])
        .args([
            "--reduce".as_ref(),
            "0/1".as_ref(),
            "--parts".as_ref(),
            folder.as_os_str(),
        ])
        .args(["--out".as_ref(), out.as_os_str()])
        .stdin(record.clone())
        .run()
        .assert_bad_input("shardify", "--shard-rows");

    // A slot file changed after its part wrote it.
    let slots = slot_files(&folder.join("shardify.part-2-of-3.slots"));
    let victim = &slots[slots.len() / 2];
    let original = std::fs::read(victim).unwrap();
    let mut bytes = original.clone();
    let last = bytes.len() - 9;
    bytes[last] ^= 1;
    std::fs::write(victim, &bytes).unwrap();
    let reduced = table.reduce(&folder, &out, "0/1", &record);
    reduced.assert_bad_input("shardify", "changed after the part wrote it");
    assert!(reduced.stderr.contains(&victim.display().to_string()));
    std::fs::write(victim, &original).unwrap();

    // Reducers of these parts, then a part run again on data that changed since: the merge
    // refuses the reducers' shards (here without the record, which would refuse the data
    // first), and once they ran again, the snapshot mf-hash digested.
    for r in 0..2 {
        let done = table.reduce(&folder, &out, &format!("{r}/2"), &record);
        assert_eq!(done.code, 0, "{}", done.stderr);
    }
    let merged = table.merge(&folder, &out, &record);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    let one = table.one(&dir.path().join("one"), &record);
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert_eq!(comparable(&merged), comparable(&one));
    assert_eq!(file_hashes(&out), file_hashes(&dir.path().join("one")));

    change_a_digit(&demo.join("part-00001.csv"));
    let again = table.part(&folder, "1/3", &record);
    assert_eq!(again.code, 0, "{}", again.stderr);
    table
        .merge(&folder, &out, "")
        .assert_bad_input("shardify", "reduced other parts");
    for r in 0..2 {
        let done = table.reduce(&folder, &out, &format!("{r}/2"), &record);
        assert_eq!(done.code, 0, "{}", done.stderr);
    }
    let refused = table.merge(&folder, &out, &record);
    refused.assert_bad_input("shardify", "since mf-hash digested it as");
    assert!(
        !out.join("index.json").exists(),
        "the reducers removed the old index; the refused merge wrote none"
    );
}
