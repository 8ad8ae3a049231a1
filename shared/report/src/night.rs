//! One night of a run folder: the records that belong to the newest run of its manifest, the
//! stale ones earlier nights left there, and the stage that failed (`failed.stage`,
//! `failed.json`, `failed.err`) when the night stopped.
//!
//! make keeps every stage's record in one folder and, when a stage fails, removes only that
//! stage's record: the later stages' records of an earlier night stay. So a record belongs to
//! the night only when it descends from the night's manifest record, through records that are
//! still there. Each tool appends its own `timings` entry (its tool and start time) to the
//! entries it read, so a record's entries name the whole chain of runs that made it:
//! - the night's root is its manifest record (one mf-hash entry: `manifest.json`), or the failed
//!   stage's record when the manifest stage itself failed, whichever started last;
//! - a record descends from the root when its first entry is the root's, and its manifest hash
//!   and snapshot digest are the root's;
//! - each earlier entry of a record must be the own (last) entry of a record of the night (or
//!   of the failed record): an entry whose record is gone means that stage ran again, or failed,
//!   since this record was made.
//!
//! A folder that keeps no manifest record (a pipeline that saved only some records) has no
//! chain to check: its records of the newest first entry are the night.

use std::path::{Path, PathBuf};

use runfn_core::InputError;
use serde::Serialize;
use serde_json::Value;

/// A record file of a folder.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordFile {
    /// Its file name (`validate.json`).
    pub name: String,
    pub record: Value,
}

/// The stage that stopped the night, from make's `failed.*` files.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The stage (`validate`, `train-seed8`), from `failed.stage`.
    pub stage: Option<String>,
    pub exit_code: Option<i32>,
    /// `failed.json`: the stage's record, `None` when it wrote none (exit 2).
    pub record: Option<Value>,
    /// `failed.err`: what the stage said on stderr, a line each.
    pub message: Vec<String>,
}

impl Failure {
    /// The exit code in words, from the one exit table.
    pub fn meaning(&self) -> String {
        exit_meaning(self.exit_code)
    }

    /// `validate (exit 1: a check failed)`.
    pub fn describe(&self) -> String {
        format!(
            "{} (exit {}: {})",
            self.stage.as_deref().unwrap_or("an unknown stage"),
            self.exit_code
                .map_or_else(|| "?".to_string(), |c| c.to_string()),
            self.meaning()
        )
    }
}

/// What an exit code of a stage means (0-4 from runfn's exit table; above 128 a signal, as the
/// shell reports a killed process).
pub fn exit_meaning(code: Option<i32>) -> String {
    match code {
        Some(0) => "passed".into(),
        Some(1) => "a check failed".into(),
        Some(2) => "bad usage or input".into(),
        Some(3) => "training was preempted".into(),
        Some(4) => "the environment failed; a retry may pass".into(),
        Some(c) if c > 128 => format!("killed by signal {}", c - 128),
        Some(c) => format!("exit code {c}, not one of runfn's"),
        None => "exit code unknown".into(),
    }
}

/// A record left out of the night, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Skipped {
    pub file: String,
    pub why: String,
}

/// One night of a folder.
#[derive(Debug, Clone, PartialEq)]
pub struct Night {
    pub dir: PathBuf,
    /// The night's records, in file-name order.
    pub records: Vec<RecordFile>,
    /// The records left out: an earlier night's, a set-up record, a record with a failed check
    /// that is not the failed stage's.
    pub skipped: Vec<Skipped>,
    /// The stage that stopped this night; `None` when none did (or the `failed.*` files are an
    /// earlier night's, which `stale_failure` then says).
    pub failure: Option<Failure>,
    /// Why the folder's `failed.*` files were not taken as this night's.
    pub stale_failure: Option<String>,
    /// The night's root: its manifest record's file (`manifest.json`), or `failed.json`.
    pub root: Option<String>,
    pub manifest_hash: Option<String>,
    /// `mf_hash.data_digest` of the root: `{path, digest, files, bytes}`.
    pub data_digest: Option<Value>,
    /// When the night's manifest was hashed (its root entry's `started_at`).
    pub started_at: Option<String>,
}

impl Night {
    /// The night's records, and the failed stage's record when it wrote one: everything the
    /// night ran, for the workflow map.
    pub fn all_records(&self) -> Vec<Value> {
        self.records
            .iter()
            .map(|f| f.record.clone())
            .chain(self.failure.as_ref().and_then(|f| f.record.clone()))
            .collect()
    }

    /// The night's record whose file is `name` (`register.json`).
    pub fn record(&self, name: &str) -> Option<&Value> {
        self.records
            .iter()
            .find(|f| f.name == name)
            .map(|f| &f.record)
    }
}

/// Whether `dir` holds a night of its own: a record, or a failed stage's files.
pub fn holds_night(dir: &Path) -> Result<bool, InputError> {
    Ok(dir.join("failed.stage").is_file()
        || dir.join("failed.json").is_file()
        || !record_files(dir)?.is_empty())
}

/// The nights of a folder given as input: itself when it holds one, else each of its
/// subfolders that does (a parent of run folders), in name order.
pub fn night_dirs(input: &Path) -> Result<Vec<PathBuf>, InputError> {
    if holds_night(input)? {
        return Ok(vec![input.to_path_buf()]);
    }
    let mut dirs = Vec::new();
    for sub in sorted_entries(input)? {
        if sub.is_dir() && holds_night(&sub)? {
            dirs.push(sub);
        }
    }
    Ok(dirs)
}

/// Reads the night of `dir`: its records (`*.json` files holding an object with a `timings`
/// list; an earlier report's output left out) and its `failed.*` files.
pub fn read(dir: &Path) -> Result<Night, InputError> {
    let mut files = Vec::new();
    for path in record_files(dir)? {
        let name = file_name(&path);
        if name == "failed.json" {
            continue;
        }
        let value = read_json(&path)?;
        // An earlier report's output repeats the run it read; counted again, it would be "the
        // record that went furthest" and stand in for the night.
        if value.get("report").is_some() {
            continue;
        }
        files.push(RecordFile {
            name,
            record: value,
        });
    }
    let failure = read_failure(dir)?;
    let mut night = select(files, failure);
    night.dir = dir.to_path_buf();
    Ok(night)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// A night's file, bounded like every record a tool reads (a FIFO or a device is refused).
fn read_text(path: &Path) -> Result<String, InputError> {
    runfn_core::side_file::read_bounded_text(path, runfn_core::side_file::JSON_LIMIT)
}

/// The most of `failed.err` a page shows: its end, where the stage's last words are.
const ERR_TAIL: u64 = 64 << 10;

/// The last [`ERR_TAIL`] bytes of `failed.err`, from the first whole line in them, with a first
/// line saying how much came before. A stage that printed gigabytes (a loop, a dump) still
/// ends with the line that says why it stopped.
fn read_err_tail(path: &Path) -> Result<Vec<String>, InputError> {
    use std::io::{Read, Seek, SeekFrom};
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let metadata = std::fs::metadata(path).map_err(io)?;
    if !metadata.is_file() {
        return Err(InputError::field(
            path.display().to_string(),
            "is not a regular file",
        ));
    }
    let mut file = std::fs::File::open(path).map_err(io)?;
    let skipped = metadata.len().saturating_sub(ERR_TAIL);
    file.seek(SeekFrom::Start(skipped)).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(ERR_TAIL).read_to_end(&mut bytes).map_err(io)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().collect();
    if skipped > 0 && !lines.is_empty() {
        lines.remove(0);
    }
    let kept = lines
        .into_iter()
        .map(|l| l.trim_end().to_string())
        .filter(|l| !l.is_empty());
    Ok(if skipped > 0 {
        std::iter::once(format!(
            "… {skipped} earlier bytes of {} left out",
            path.display()
        ))
        .chain(kept)
        .collect()
    } else {
        kept.collect()
    })
}

fn read_json(path: &Path) -> Result<Value, InputError> {
    serde_json::from_str(&read_text(path)?).map_err(|source| InputError::Json {
        origin: path.display().to_string(),
        source,
    })
}

/// `failed.stage` (`<stage> <exit code>`), `failed.json` (empty after exit 2) and
/// `failed.err`; `None` when none of them is there.
fn read_failure(dir: &Path) -> Result<Option<Failure>, InputError> {
    let (stage_path, record_path, err_path) = (
        dir.join("failed.stage"),
        dir.join("failed.json"),
        dir.join("failed.err"),
    );
    if !stage_path.is_file() && !record_path.is_file() {
        return Ok(None);
    }
    let (mut stage, mut exit_code) = (None, None);
    if stage_path.is_file() {
        let text = read_text(&stage_path)?;
        let mut words = text.split_whitespace();
        stage = words.next().map(str::to_string);
        exit_code = match words.next() {
            None => None,
            Some(code) => Some(code.parse().map_err(|_| {
                InputError::field(
                    stage_path.display().to_string(),
                    format!("expected `<stage> <exit code>`, got {:?}", text.trim()),
                )
            })?),
        };
    }
    let record = if record_path.is_file() && !read_text(&record_path)?.trim().is_empty() {
        let value = read_json(&record_path)?;
        if !value.is_object() {
            return Err(InputError::field(
                record_path.display().to_string(),
                "must hold the failed stage's record (a JSON object) or nothing",
            ));
        }
        Some(value)
    } else {
        None
    };
    let message = if err_path.is_file() {
        read_err_tail(&err_path)?
    } else {
        Vec::new()
    };
    Ok(Some(Failure {
        stage,
        exit_code,
        record,
        message,
    }))
}

/// The `*.json` files of `dir` that hold a run record (an object with a `timings` list), in
/// name order.
pub fn record_files(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let mut files = Vec::new();
    for path in sorted_entries(dir)? {
        if path.extension().is_some_and(|e| e == "json") && path.is_file() {
            let holds_record = serde_json::from_str::<Value>(&read_text(&path)?)
                .ok()
                .is_some_and(|v| v.get("timings").is_some_and(Value::is_array));
            if holds_record {
                files.push(path);
            }
        }
    }
    Ok(files)
}

pub fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, InputError> {
    let io = |source| InputError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut paths = std::fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(io)?;
    paths.sort();
    Ok(paths)
}

/// A timings entry's identity: one tool run, known by its tool and start time.
type Key = (String, String);

fn entries(record: &Value) -> &[Value] {
    record["timings"].as_array().map_or(&[][..], Vec::as_slice)
}

fn key(entry: &Value) -> Key {
    (
        entry["tool"].as_str().unwrap_or("?").to_string(),
        entry["started_at"].as_str().unwrap_or("").to_string(),
    )
}

fn first(record: &Value) -> Option<Key> {
    entries(record).first().map(key)
}

fn own(record: &Value) -> Option<Key> {
    entries(record).last().map(key)
}

/// Start times compared as times (RFC 3339), falling back to the text.
fn later(a: &str, b: &str) -> bool {
    match (
        humantime::parse_rfc3339_weak(a),
        humantime::parse_rfc3339_weak(b),
    ) {
        (Ok(a), Ok(b)) => a > b,
        _ => a > b,
    }
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

/// The night among `files` and `failure` (see the module's doc).
pub fn select(files: Vec<RecordFile>, failure: Option<Failure>) -> Night {
    let mut skipped = Vec::new();
    let mut candidates = Vec::new();
    for file in files {
        if file.record.get("manifest_hash").is_none() {
            skipped.push(Skipped {
                file: file.name,
                why: "made without a manifest (no manifest_hash), as a set-up record such as \
                      demo-data's is: part of no night"
                    .into(),
            });
            continue;
        }
        let failed: Vec<&str> = file
            .record
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(_, v)| v.get("passed") == Some(&Value::Bool(false)))
            .map(|(k, _)| k.as_str())
            .collect();
        if !failed.is_empty() {
            skipped.push(Skipped {
                why: format!(
                    "a failed check ({}) in a record that is not the failed stage's failed.json",
                    failed.join(", ")
                ),
                file: file.name,
            });
            continue;
        }
        candidates.push(file);
    }

    let roots: Vec<&RecordFile> = candidates
        .iter()
        .filter(|f| entries(&f.record).len() == 1)
        .collect();
    let failed_record = failure.as_ref().and_then(|f| f.record.clone());
    let failed_record = failed_record.as_ref();
    let strict = !roots.is_empty() || failed_record.is_some_and(|r| entries(r).len() == 1);
    // The night's root: the newest manifest record, or with none kept, the newest first entry.
    let mut root: Option<(Key, String)> = None;
    let mut consider = |k: Option<Key>, name: &str| {
        if let Some(k) = k
            && root.as_ref().is_none_or(|(r, _)| later(&k.1, &r.1))
        {
            root = Some((k, name.to_string()));
        }
    };
    if strict {
        for file in &roots {
            consider(first(&file.record), &file.name);
        }
    } else {
        for file in &candidates {
            consider(first(&file.record), &file.name);
        }
    }
    if let Some(record) = failed_record {
        consider(first(record), "failed.json");
    }

    let mut failure = failure;
    let mut stale_failure = None;
    if let (Some(record), Some((root_key, _))) = (failed_record, &root)
        && first(record).as_ref() != Some(root_key)
    {
        stale_failure = Some(format!(
            "failed.json is of an earlier night (its manifest was hashed at {}, this night's at {})",
            first(record).map_or_else(|| "?".into(), |k| k.1),
            root_key.1
        ));
    }
    if stale_failure.is_some() {
        failure = None;
    }
    let root_record: Option<Value> = root.as_ref().and_then(|(_, name)| {
        if name == "failed.json" {
            failure.as_ref().and_then(|f| f.record.clone())
        } else {
            candidates
                .iter()
                .find(|f| &f.name == name)
                .map(|f| f.record.clone())
        }
    });
    let identity = |r: &Value| (r.get("manifest_hash").cloned(), data_digest(r));
    let root_identity = root_record.as_ref().map(identity);

    // The manifest stage that failed without a record leaves no record of this night at all.
    let manifest_failed_bare = failure
        .as_ref()
        .is_some_and(|f| f.stage.as_deref() == Some("manifest") && f.record.is_none());

    let mut night: Vec<RecordFile> = Vec::new();
    for file in candidates {
        let why = if manifest_failed_bare {
            Some(
                "the manifest stage failed this night (no record): every record here is an \
                 earlier night's"
                    .to_string(),
            )
        } else {
            match &root {
                None => None,
                Some((root_key, _)) if first(&file.record).as_ref() != Some(root_key) => {
                    Some(format!(
                        "an earlier night's: its manifest was hashed at {} (manifest_hash {}), \
                         this night's at {}",
                        first(&file.record).map_or_else(|| "?".into(), |k| k.1),
                        short(file.record["manifest_hash"].as_str().unwrap_or("?")),
                        root_key.1
                    ))
                }
                Some(_) if root_identity.as_ref() != Some(&identity(&file.record)) => Some(
                    "its manifest_hash or snapshot digest differs from this night's manifest \
                     record (edited after the fact?)"
                        .to_string(),
                ),
                Some(_) => None,
            }
        };
        match why {
            Some(why) => skipped.push(Skipped {
                file: file.name,
                why,
            }),
            None => night.push(file),
        }
    }

    // Every earlier entry of a night's record must be some night record's own entry; removing
    // a record can orphan another, so repeat until nothing changes.
    if strict {
        loop {
            let owned: std::collections::HashSet<Key> = night
                .iter()
                .filter_map(|f| own(&f.record))
                .chain(
                    failure
                        .as_ref()
                        .and_then(|f| f.record.as_ref().and_then(own)),
                )
                .collect();
            let orphan = |record: &Value| {
                let list = entries(record);
                list[..list.len().saturating_sub(1)]
                    .iter()
                    .map(key)
                    .find(|k| !owned.contains(k))
            };
            let mut changed = false;
            let mut kept = Vec::new();
            for file in night {
                match orphan(&file.record) {
                    Some((tool, at)) => {
                        changed = true;
                        skipped.push(Skipped {
                            file: file.name,
                            why: format!(
                                "stale: its {tool} entry ({at}) is no longer any record's here \
                                 (that stage ran again, or failed, since this record was made)"
                            ),
                        });
                    }
                    None => kept.push(file),
                }
            }
            night = kept;
            if let Some(record) = failure.as_ref().and_then(|f| f.record.as_ref())
                && let Some((tool, at)) = orphan(record)
            {
                stale_failure = Some(format!(
                    "failed.json is stale: its {tool} entry ({at}) is no longer any record's here"
                ));
                failure = None;
                changed = true;
            }
            if !changed {
                break;
            }
        }
    }
    // make removes a failing stage's record: when it is there and of this night, that stage
    // passed in a later run, and the failure files are left over from an earlier one.
    if let Some(stage) = failure.as_ref().and_then(|f| f.stage.clone())
        && stage != "manifest"
        && night.iter().any(|f| f.name == format!("{stage}.json"))
    {
        stale_failure = Some(format!(
            "failed.stage names {stage}, but {stage}.json is this night's: the stage passed in a \
             later run"
        ));
        failure = None;
    }
    night.sort_by(|a, b| a.name.cmp(&b.name));
    skipped.sort_by(|a, b| a.file.cmp(&b.file));
    let (root_name, started_at) = match &root {
        Some((k, name)) if !manifest_failed_bare => (Some(name.clone()), Some(k.1.clone())),
        _ => (None, None),
    };
    let (manifest_hash, data_digest) = match (&root_record, manifest_failed_bare) {
        (Some(r), false) => (
            r["manifest_hash"].as_str().map(str::to_string),
            data_digest(r),
        ),
        _ => (None, None),
    };
    Night {
        dir: PathBuf::new(),
        records: night,
        skipped,
        failure,
        stale_failure,
        root: root_name,
        manifest_hash,
        data_digest,
        started_at,
    }
}

fn data_digest(record: &Value) -> Option<Value> {
    record
        .get("mf_hash")
        .and_then(|m| m.get("data_digest"))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(tool: &str, at: &str) -> Value {
        json!({"tool": tool, "started_at": at})
    }

    /// A record whose timings are `chain`'s entries: `(tool, started_at)`.
    fn record(hash: &str, chain: &[(&str, &str)]) -> Value {
        json!({
            "manifest_hash": hash,
            "mf_hash": {"passed": true, "data_digest": {"digest": format!("d-{hash}")}},
            "timings": chain.iter().map(|(t, a)| entry(t, a)).collect::<Vec<_>>(),
        })
    }

    fn file(name: &str, record: Value) -> RecordFile {
        RecordFile {
            name: name.into(),
            record,
        }
    }

    const OLD: &[(&str, &str)] = &[
        ("mf-hash", "2026-12-01T03:17:00.000Z"),
        ("ds-validate", "2026-12-01T03:17:01.000Z"),
        ("leak-check", "2026-12-01T03:17:02.000Z"),
        ("gate", "2026-12-01T03:17:03.000Z"),
        ("register", "2026-12-01T03:17:04.000Z"),
    ];
    const NEW: &[(&str, &str)] = &[
        ("mf-hash", "2026-12-02T03:17:00.000Z"),
        ("ds-validate", "2026-12-02T03:17:01.000Z"),
        ("leak-check", "2026-12-02T03:17:02.000Z"),
        ("gate", "2026-12-02T03:17:03.000Z"),
    ];

    fn names(night: &Night) -> Vec<&str> {
        night.records.iter().map(|f| f.name.as_str()).collect()
    }

    fn skipped(night: &Night) -> Vec<&str> {
        night.skipped.iter().map(|s| s.file.as_str()).collect()
    }

    /// Night 1 passed to register; night 2 hashed a new manifest and failed at validate: only
    /// its manifest record is the night's, every record of night 1 is stale.
    #[test]
    fn a_failed_night_keeps_only_its_own_records() {
        let files = vec![
            file("manifest.json", record("b", &NEW[..1])),
            file("leaks.json", record("a", &OLD[..3])),
            file("gate.json", record("a", &OLD[..4])),
            file("register.json", record("a", OLD)),
        ];
        let mut failed = record("b", &NEW[..2]);
        failed["validate"] = json!({"passed": false});
        let night = select(
            files,
            Some(Failure {
                stage: Some("validate".into()),
                exit_code: Some(1),
                record: Some(failed),
                message: vec!["ds-validate: failed".into()],
            }),
        );
        assert_eq!(names(&night), ["manifest.json"]);
        assert_eq!(
            skipped(&night),
            ["gate.json", "leaks.json", "register.json"]
        );
        assert!(night.skipped[0].why.contains("an earlier night's"));
        assert_eq!(
            night.failure.as_ref().unwrap().describe(),
            "validate (exit 1: a check failed)"
        );
        assert_eq!(night.manifest_hash.as_deref(), Some("b"));
        assert_eq!(night.started_at.as_deref(), Some(NEW[0].1));
        assert_eq!(
            night.all_records().len(),
            2,
            "the failed record is mapped too"
        );
    }

    /// The same manifest reran (no new manifest record): the gate failed with bad input (no
    /// record), so the register record made after the earlier gate run is stale, and so is
    /// anything else whose chain passes through a record that is gone.
    #[test]
    fn a_rerun_stage_orphans_the_records_made_after_its_earlier_run() {
        let files = vec![
            file("manifest.json", record("a", &OLD[..1])),
            file("validate.json", record("a", &OLD[..2])),
            file("leaks.json", record("a", &OLD[..3])),
            file("register.json", record("a", OLD)),
        ];
        let night = select(
            files,
            Some(Failure {
                stage: Some("gate".into()),
                exit_code: Some(2),
                record: None,
                message: vec![],
            }),
        );
        assert_eq!(
            names(&night),
            ["leaks.json", "manifest.json", "validate.json"]
        );
        assert_eq!(skipped(&night), ["register.json"]);
        assert!(
            night.skipped[0].why.contains("gate entry"),
            "{:?}",
            night.skipped
        );
    }

    #[test]
    fn a_bare_manifest_failure_leaves_no_record_of_the_night() {
        let night = select(
            vec![
                file("manifest.json", record("a", &OLD[..1])),
                file("validate.json", record("a", &OLD[..2])),
            ],
            Some(Failure {
                stage: Some("manifest".into()),
                exit_code: Some(2),
                record: None,
                message: vec!["mf-hash: snapshot moved".into()],
            }),
        );
        assert!(night.records.is_empty());
        assert_eq!(night.skipped.len(), 2);
        assert!(night.failure.is_some() && night.manifest_hash.is_none());
    }

    #[test]
    fn failure_files_of_an_earlier_run_are_not_the_nights() {
        // The stage's record is there: it passed after the failure files were written.
        let night = select(
            vec![
                file("manifest.json", record("a", &OLD[..1])),
                file("validate.json", record("a", &OLD[..2])),
            ],
            Some(Failure {
                stage: Some("validate".into()),
                exit_code: Some(2),
                record: None,
                message: vec![],
            }),
        );
        assert!(night.failure.is_none());
        assert!(
            night
                .stale_failure
                .unwrap()
                .contains("passed in a later run")
        );
        // failed.json made from an older manifest.
        let mut failed = record("a", &OLD[..2]);
        failed["validate"] = json!({"passed": false});
        let night = select(
            vec![file("manifest.json", record("b", &NEW[..1]))],
            Some(Failure {
                stage: Some("validate".into()),
                exit_code: Some(1),
                record: Some(failed),
                message: vec![],
            }),
        );
        assert!(night.failure.is_none());
        assert_eq!(names(&night), ["manifest.json"]);
        assert!(night.stale_failure.unwrap().contains("earlier night"));
    }

    #[test]
    fn without_a_manifest_record_the_newest_first_entry_is_the_night() {
        let night = select(
            vec![
                file("prepared.json", record("b", &NEW[..3])),
                file("registered.json", record("a", OLD)),
                file("gated.json", record("b", NEW)),
                file(
                    "snapshot.json",
                    json!({"timings": [entry("demo-data", "x")]}),
                ),
            ],
            None,
        );
        assert_eq!(names(&night), ["gated.json", "prepared.json"]);
        assert_eq!(skipped(&night), ["registered.json", "snapshot.json"]);
        assert!(night.skipped[1].why.contains("set-up record"));
    }

    #[test]
    fn a_record_with_another_digest_is_not_the_nights() {
        let mut edited = record("a", &OLD[..2]);
        edited["mf_hash"]["data_digest"]["digest"] = json!("other");
        let night = select(
            vec![
                file("manifest.json", record("a", &OLD[..1])),
                file("validate.json", edited),
            ],
            None,
        );
        assert_eq!(skipped(&night), ["validate.json"]);
        assert!(night.skipped[0].why.contains("snapshot digest"));
    }

    #[test]
    fn exit_codes_are_named() {
        assert_eq!(exit_meaning(Some(1)), "a check failed");
        assert_eq!(exit_meaning(Some(137)), "killed by signal 9");
        assert_eq!(exit_meaning(None), "exit code unknown");
    }
}
