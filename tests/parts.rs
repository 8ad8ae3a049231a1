//! A data stage cut into parts (`--part K/N --parts DIR`) and merged (`--parts DIR`) writes what
//! one process writes: the same snapshot digest, the same profile file byte for byte, the same
//! validate section, windows and history included.

use std::ffi::OsStr;
use std::path::Path;

use serde_json::Value;

use crate::util::tool;

/// A seasonal table cut into one CSV file a month, with a drift-only manifest (two-week windows)
/// that pins it; returns the manifest's path.
fn monthly_snapshot(dir: &Path) -> std::path::PathBuf {
    let snapshot = dir.join("snap");
    std::fs::create_dir_all(&snapshot).unwrap();
    let text = crate::ds_validate::seasonal_csv(150, None);
    let mut lines = text.lines();
    let header = lines.next().unwrap().to_string();
    let mut files: std::collections::BTreeMap<String, String> = Default::default();
    for line in lines {
        let month = line[..7].to_string();
        files
            .entry(month)
            .or_insert_with(|| format!("{header}\n"))
            .push_str(&format!("{line}\n"));
    }
    for (month, body) in &files {
        std::fs::write(snapshot.join(format!("{month}.csv")), body).unwrap();
    }
    let manifest = dir.join("drift.json");
    let text = serde_json::json!({
        "data": {"snapshot": snapshot.display().to_string(), "time": "time"},
        "validate": {"window": "2 weeks", "fail_on": "all"},
    });
    std::fs::write(&manifest, text.to_string()).unwrap();
    let pin = tool("mf-hash")
        .args(["pin".as_ref(), manifest.as_os_str(), "-q".as_ref()])
        .run();
    assert_eq!(pin.code, 0, "{}", pin.stderr);
    manifest
}

fn without_timings(text: &str) -> Value {
    let mut record: Value = serde_json::from_str(text).unwrap();
    record.as_object_mut().unwrap().remove("timings");
    record
}

#[test]
fn parts_and_their_merge_write_what_one_process_writes() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = monthly_snapshot(dir.path());
    let snapshot = dir.path().join("snap");
    let mf_hash = |extra: &[&OsStr]| {
        tool("mf-hash")
            .args([
                manifest.as_os_str(),
                "--drift-only".as_ref(),
                "--data-digest".as_ref(),
                snapshot.as_os_str(),
                "-q".as_ref(),
            ])
            .args(extra)
            .run()
    };
    let one = mf_hash(&[]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let digests = dir.path().join("digest-parts");
    for k in 0..3 {
        let part = mf_hash(&[
            "--part".as_ref(),
            format!("{k}/3").as_ref(),
            "--parts".as_ref(),
            digests.as_os_str(),
        ]);
        assert_eq!(part.code, 0, "{}", part.stderr);
        let done = &part.json()["part"];
        assert_eq!(done["part"], format!("{k}/3"), "{done}");
    }
    let merged = mf_hash(&["--parts".as_ref(), digests.as_os_str()]);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    assert_eq!(
        without_timings(&merged.stdout),
        without_timings(&one.stdout)
    );
    let record = one.stdout.clone();

    // ds-validate: one process, then three parts and their merge.
    let validate = |out: &Path, extra: &[&OsStr]| {
        tool("ds-validate")
            .args(["--profile-out".as_ref(), out.as_os_str(), "-q".as_ref()])
            .args(extra)
            .stdin(record.clone())
            .run()
    };
    let single = validate(&dir.path().join("one.json"), &[]);
    assert_eq!(single.code, 0, "{}", single.stderr);
    let profiles = dir.path().join("profile-parts");
    for k in 0..3 {
        let part = validate(
            &dir.path().join("unused.json"),
            &[
                "--part".as_ref(),
                format!("{k}/3").as_ref(),
                "--parts".as_ref(),
                profiles.as_os_str(),
            ],
        );
        assert_eq!(part.code, 0, "{}", part.stderr);
        assert!(part.json()["part"]["units"].as_u64().unwrap() >= 1);
    }
    assert!(
        !dir.path().join("unused.json").exists(),
        "a part writes its partial, not the profile"
    );
    let merged = validate(
        &dir.path().join("merged.json"),
        &["--parts".as_ref(), profiles.as_os_str()],
    );
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    assert_eq!(
        std::fs::read(dir.path().join("merged.json")).unwrap(),
        std::fs::read(dir.path().join("one.json")).unwrap(),
        "the merged profile file differs from one process's"
    );
    let section = |text: &str| {
        let mut record = without_timings(text);
        let validate = record["validate"].as_object_mut().unwrap();
        validate.remove("profile_file");
        record
    };
    assert_eq!(section(&merged.stdout), section(&single.stdout));
    assert_eq!(
        single.json()["validate"]["calibration"]["method"],
        "history"
    );

    // A part hashes the files it reads, not the whole snapshot: a byte changed in the last file
    // (the last part's) stops the last part, naming the file, and not the first.
    let mut files: Vec<_> = std::fs::read_dir(&snapshot)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let last = files.last().unwrap().clone();
    let kept_bytes = std::fs::read(&last).unwrap();
    let mut changed = kept_bytes.clone();
    let at = changed.len() - 3;
    changed[at] = if changed[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(&last, &changed).unwrap();
    let again = |k: u32| {
        validate(
            &dir.path().join("unused.json"),
            &[
                "--part".as_ref(),
                format!("{k}/3").as_ref(),
                "--parts".as_ref(),
                dir.path().join("again").as_os_str(),
            ],
        )
    };
    let name = last.file_name().unwrap().to_string_lossy().into_owned();
    again(2).assert_bad_input("ds-validate", &format!("{name} changed"));
    assert_eq!(again(0).code, 0, "part 0 does not read {name}");
    std::fs::write(&last, &kept_bytes).unwrap();

    // A missing part, or a snapshot that changed since the parts ran, is refused by name.
    let missing = profiles.join("ds-validate.part-1-of-3.json");
    let kept = dir.path().join("part-1");
    std::fs::rename(&missing, &kept).unwrap();
    let out = validate(
        &dir.path().join("merged-2.json"),
        &["--parts".as_ref(), profiles.as_os_str()],
    );
    out.assert_bad_input("ds-validate", "lacks part 1 of 3");
    assert!(!dir.path().join("merged-2.json").exists());
    std::fs::rename(&kept, &missing).unwrap();
    let extra = "time,temp,wind,station\n2013-05-31T00:00:00Z,60.0,9.0,EWR\n";
    std::fs::write(snapshot.join("2013-06.csv"), extra).unwrap();
    let out = mf_hash(&["--parts".as_ref(), digests.as_os_str()]);
    out.assert_bad_input("mf-hash", "changed since the parts ran");
    let unpinned = tool("ds-validate")
        .args(["--parts".as_ref(), profiles.as_os_str(), "-q".as_ref()])
        .args(["--in".as_ref(), snapshot.as_os_str()])
        .stdin(record.clone())
        .run();
    assert_eq!(unpinned.code, 2, "{}", unpinned.stderr);
    assert!(unpinned.stdout.is_empty());
}

/// A snapshot cut into `count` CSV files of consecutive rows (the real tables hold one file each,
/// and a part's unit of work is a file).
pub(crate) fn cut_into_files(table: &Path, out: &Path, count: usize) {
    std::fs::create_dir_all(out).unwrap();
    let text = std::fs::read_to_string(table).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let rows: Vec<&str> = lines.collect();
    for (k, chunk) in rows.chunks(rows.len().div_ceil(count)).enumerate() {
        let body = format!("{header}\n{}\n", chunk.join("\n"));
        std::fs::write(out.join(format!("part-{k:02}.csv")), body).unwrap();
    }
}

/// One process against `count` parts and their merge, for mf-hash --data-digest and ds-validate
/// on the snapshot `data` names: the records and the profile files must be equal byte for byte.
fn one_process_equals_parts(dir: &Path, data: Value, validate: Value, count: u32) {
    let snapshot = std::path::PathBuf::from(data["snapshot"].as_str().unwrap());
    let manifest = dir.join("drift.json");
    let text = serde_json::json!({"data": data, "validate": validate});
    std::fs::write(&manifest, text.to_string()).unwrap();
    let pin = tool("mf-hash")
        .args(["pin".as_ref(), manifest.as_os_str(), "-q".as_ref()])
        .run();
    assert_eq!(pin.code, 0, "{}", pin.stderr);
    let mf_hash = |extra: &[&OsStr]| {
        tool("mf-hash")
            .args([manifest.as_os_str(), "--drift-only".as_ref(), "-q".as_ref()])
            .args(["--data-digest".as_ref(), snapshot.as_os_str()])
            .args(extra)
            .run()
    };
    let validate = |out: &Path, record: &str, extra: &[&OsStr]| {
        tool("ds-validate")
            .args(["--profile-out".as_ref(), out.as_os_str(), "-q".as_ref()])
            .args(extra)
            .stdin(record.to_string())
            .run()
    };
    let one = mf_hash(&[]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let single = validate(&dir.join("one.json"), &one.stdout, &[]);
    assert!(single.code <= 1, "{}", single.stderr);
    let (digests, profiles) = (dir.join("digest-parts"), dir.join("profile-parts"));
    for k in 0..count {
        let part = format!("{k}/{count}");
        let args = |folder: &Path| -> Vec<std::ffi::OsString> {
            vec![
                "--part".into(),
                part.clone().into(),
                "--parts".into(),
                folder.into(),
            ]
        };
        let hashed = mf_hash(
            &args(&digests)
                .iter()
                .map(|a| a.as_os_str())
                .collect::<Vec<_>>(),
        );
        assert_eq!(hashed.code, 0, "{}", hashed.stderr);
        let profiled = validate(
            &dir.join("unused.json"),
            &one.stdout,
            &args(&profiles)
                .iter()
                .map(|a| a.as_os_str())
                .collect::<Vec<_>>(),
        );
        assert_eq!(profiled.code, 0, "{}", profiled.stderr);
    }
    let merged = mf_hash(&["--parts".as_ref(), digests.as_os_str()]);
    assert_eq!(merged.code, 0, "{}", merged.stderr);
    assert_eq!(
        without_timings(&merged.stdout),
        without_timings(&one.stdout)
    );
    let merged = validate(
        &dir.join("merged.json"),
        &one.stdout,
        &["--parts".as_ref(), profiles.as_os_str()],
    );
    assert_eq!(merged.code, single.code, "{}", merged.stderr);
    assert_eq!(
        std::fs::read(dir.join("merged.json")).unwrap(),
        std::fs::read(dir.join("one.json")).unwrap(),
        "{}: the merged profile file differs from one process's",
        snapshot.display()
    );
    let section = |text: &str| {
        let mut record = without_timings(text);
        record["validate"]
            .as_object_mut()
            .unwrap()
            .remove("profile_file");
        record
    };
    assert_eq!(section(&merged.stdout), section(&single.stdout));
}

#[test]
fn parts_equal_one_process_on_the_demo_and_two_real_tables() {
    let dir = tempfile::tempdir().unwrap();
    // The demo: five CSV files, its label and entity.
    let demo = dir.path().join("demo");
    let made = tool("demo-data")
        .args(["--out".as_ref(), demo.as_os_str()])
        .args(["--rows", "6000", "--parts", "5", "-q"])
        .run();
    assert_eq!(made.code, 0, "{}", made.stderr);
    let work = dir.path().join("demo-work");
    std::fs::create_dir_all(&work).unwrap();
    one_process_equals_parts(
        &work,
        serde_json::json!({"snapshot": demo.display().to_string(), "label": "churned",
                           "entity": "customer_id"}),
        serde_json::json!({"fail_on": "all"}),
        4,
    );
    // Telco: a label and an entity, no time.
    let telco = dir.path().join("telco");
    cut_into_files(
        Path::new("testdata/real/telco/snapshot/telco.csv"),
        &telco,
        6,
    );
    let work = dir.path().join("telco-work");
    std::fs::create_dir_all(&work).unwrap();
    one_process_equals_parts(
        &work,
        serde_json::json!({"snapshot": telco.display().to_string(), "label": "churned",
                           "entity": "customer_id"}),
        serde_json::json!({"fail_on": "all"}),
        4,
    );
    // Police stops: monthly windows over a year, judged against their history.
    let stops = dir.path().join("stops");
    cut_into_files(
        Path::new("testdata/real/stops/snapshot/stops.csv"),
        &stops,
        7,
    );
    let work = dir.path().join("stops-work");
    std::fs::create_dir_all(&work).unwrap();
    one_process_equals_parts(
        &work,
        serde_json::json!({"snapshot": stops.display().to_string(), "time": "date",
                           "entity": "idNum"}),
        serde_json::json!({"window": "1 month", "fail_on": "all"}),
        4,
    );
}
