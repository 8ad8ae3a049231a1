//! What the data tools need from `manifest.data`, read once from the run record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use runfn_core::{InputError, Record};
use runfn_manifest::snapshot::SnapshotRef;
use serde_json::Value;

use crate::error::DataError;
use crate::label::Positive;
use crate::read::Snapshot;
use crate::types::{ColumnType, read_schema_file};

/// `path` itself, or the local copy of the store URL it spells.
fn stage_if_remote(path: &Path) -> Result<PathBuf, InputError> {
    match path.to_str() {
        Some(text) if runfn_storage::is_remote(text) => Ok(runfn_storage::stage_prefix(text)?),
        _ => Ok(path.to_path_buf()),
    }
}

/// Where the snapshot mf-hash recorded is read from here: its path, or a URL's staged copy.
fn recorded_local(recorded: &str) -> PathBuf {
    if runfn_storage::is_remote(recorded) {
        runfn_storage::staged_path(recorded)
    } else {
        PathBuf::from(recorded)
    }
}

/// Data already split into shards, or a raw snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataSource {
    Shards(PathBuf),
    Snapshot(PathBuf),
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct DataSpec {
    /// The snapshot's location (the part of `manifest.data.snapshot` before `@`).
    pub snapshot: Option<String>,
    /// The content digest `manifest.data.snapshot` pins (`blake3:<hex>`), when it pins one.
    pub pinned: Option<String>,
    /// `(path, digest)` of `mf_hash.data_digest`: what mf-hash found at that path earlier in the
    /// run, so a stage reading the same path reads the same data.
    pub recorded: Option<(String, String)>,
    pub entity: Option<String>,
    pub time: Option<String>,
    pub label: Option<String>,
    /// The label value that means positive (`manifest.data.label_positive`), for a label that is
    /// not 0/1 or true/false.
    pub label_positive: Option<Positive>,
    /// Columns read as text whatever they look like (`manifest.data.categorical`): categories
    /// coded as integers, so every tool profiles, splits and learns them as categories.
    pub categorical: Vec<String>,
    /// Column holding the time the label was determined (`manifest.data.label_time`); defaults to `time`.
    pub label_time: Option<String>,
    /// `(name, rule)` in manifest order.
    pub splits: Vec<(String, String)>,
    /// Free-text columns checked for near-duplicates.
    pub text: Vec<String>,
    /// Feature column → column with the time the feature was computed.
    pub as_of: BTreeMap<String, String>,
}

impl DataSpec {
    pub fn from_record(record: &Record) -> Result<DataSpec, InputError> {
        let Some(data) = record.get_path("manifest.data") else {
            return Ok(DataSpec::default());
        };
        let data = data
            .as_object()
            .ok_or_else(|| InputError::field("manifest.data", "must be an object"))?;
        let string = |key: &str| -> Result<Option<String>, InputError> {
            match data.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(InputError::field(
                    format!("manifest.data.{key}"),
                    "must be a string",
                )),
            }
        };
        let (snapshot, pinned) = match string("snapshot")? {
            Some(text) => {
                let reference = SnapshotRef::parse(&text)
                    .map_err(|reason| InputError::field("manifest.data.snapshot", reason))?;
                (
                    Some(reference.location.to_string()),
                    reference.content_digest().map(str::to_string),
                )
            }
            None => (None, None),
        };
        let splits = match data.get("splits") {
            None => Vec::new(),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(name, rule)| match rule {
                    Value::String(rule) => Ok((name.clone(), rule.clone())),
                    _ => Err(InputError::field(
                        format!("manifest.data.splits.{name}"),
                        "must be a string",
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(InputError::field(
                    "manifest.data.splits",
                    "must be an object",
                ));
            }
        };
        let columns = |key: &str| -> Result<Vec<String>, InputError> {
            let field = format!("manifest.data.{key}");
            match data.get(key) {
                None => Ok(Vec::new()),
                Some(Value::String(column)) => Ok(vec![column.clone()]),
                Some(Value::Array(columns)) => columns
                    .iter()
                    .map(|c| {
                        c.as_str()
                            .map(String::from)
                            .ok_or_else(|| InputError::field(&field, "must list column names"))
                    })
                    .collect(),
                Some(_) => Err(InputError::field(
                    &field,
                    "must be a column name or a list of them",
                )),
            }
        };
        let as_of = match data.get("as_of") {
            None => BTreeMap::new(),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(feature, column)| match column {
                    Value::String(column) => Ok((feature.clone(), column.clone())),
                    _ => Err(InputError::field(
                        format!("manifest.data.as_of.{feature}"),
                        "must name a timestamp column",
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(InputError::field(
                    "manifest.data.as_of",
                    "must map features to their as-of columns",
                ));
            }
        };
        Ok(DataSpec {
            snapshot,
            pinned,
            recorded: record
                .get_path("mf_hash.data_digest")
                .and_then(|d| Some((d.get("path")?.as_str()?, d.get("digest")?.as_str()?)))
                .map(|(path, digest)| (path.to_string(), digest.to_string())),
            entity: string("entity")?,
            time: string("time")?,
            label: string("label")?,
            label_positive: Positive::from_manifest(data.get("label_positive"))?,
            categorical: columns("categorical")?,
            label_time: string("label_time")?,
            splits,
            text: columns("text")?,
            as_of,
        })
    }

    /// Every column the manifest names (entity, time, label, label_time) must exist: a label the
    /// data lacks is a manifest and a snapshot that disagree, not something to validate.
    pub fn require_columns(&self, has_column: impl Fn(&str) -> bool) -> Result<(), InputError> {
        let named = [
            ("entity", &self.entity),
            ("time", &self.time),
            ("label", &self.label),
            ("label_time", &self.label_time),
        ];
        for (role, column) in named {
            if let Some(column) = column
                && !has_column(column)
            {
                return Err(InputError::field(
                    format!("manifest.data.{role}"),
                    format!("names the column `{column}`, which the snapshot does not have"),
                ));
            }
        }
        Ok(())
    }

    /// The snapshot to read: `--in` when given, else the manifest's location when it exists here.
    /// A store URL (`s3://…`) is staged into the local cache first, and that copy is read.
    pub fn snapshot_path(&self, flag: Option<&std::path::Path>) -> Result<PathBuf, InputError> {
        if let Some(path) = flag {
            return stage_if_remote(path);
        }
        match &self.snapshot {
            Some(location) if runfn_storage::is_remote(location) => {
                Ok(runfn_storage::stage_prefix(location)?)
            }
            Some(location) if std::path::Path::new(location).exists() => {
                Ok(PathBuf::from(location))
            }
            Some(location) => Err(InputError::field(
                "manifest.data.snapshot",
                format!(
                    "`{location}` is not a local file or folder; give the snapshot with --in PATH"
                ),
            )),
            None => Err(InputError::field(
                "--in",
                "is missing and the record has no manifest.data.snapshot",
            )),
        }
    }

    /// Where a checker reads: `--shards`, else `--in`, else the record's `shards.dir`, else the
    /// manifest's snapshot.
    pub fn source(
        &self,
        record: &Record,
        input: Option<&Path>,
        shards: Option<&Path>,
    ) -> Result<DataSource, InputError> {
        if let Some(dir) = shards {
            return Ok(DataSource::Shards(crate::shards::local_shards(dir)?));
        }
        if input.is_none()
            && let Some(dir) = record.get_path("shards.dir").and_then(Value::as_str)
        {
            return Ok(DataSource::Shards(crate::shards::local_shards(Path::new(
                dir,
            ))?));
        }
        Ok(DataSource::Snapshot(self.snapshot_path(input)?))
    }

    /// Opens the snapshot at `path` (types from `schema_file` where it names them, the
    /// manifest's categorical columns as text) and checks that it has every column the manifest
    /// names and, when the manifest pins its digest (or, unpinned, mf-hash recorded the digest of
    /// this same path), that it still hashes to it (one blake3 pass over its files).
    pub fn open_snapshot(
        &self,
        path: &Path,
        schema_file: Option<&Path>,
    ) -> Result<Snapshot, DataError> {
        self.open_snapshot_hashing(path, schema_file, &|_| true)
    }

    /// [`DataSpec::open_snapshot`], checking a pinned snapshot by hashing only the files
    /// `hash_these` selects (by their path under the snapshot; the others' hashes come from the
    /// pin's listing, their paths and sizes checked): a part of a job hashes what it reads.
    pub fn open_snapshot_hashing(
        &self,
        path: &Path,
        schema_file: Option<&Path>,
        hash_these: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<Snapshot, DataError> {
        self.open_checked(path, schema_file, Some(hash_these))
    }

    /// [`DataSpec::open_snapshot`] without checking the snapshot's content: for a part of a
    /// parted run, whose files are hashed as they are read and whose merge checks the digest
    /// those hashes add up to ([`DataSpec::verify_digested`]).
    pub fn open_snapshot_unverified(
        &self,
        path: &Path,
        schema_file: Option<&Path>,
    ) -> Result<Snapshot, DataError> {
        self.open_checked(path, schema_file, None)
    }

    fn open_checked(
        &self,
        path: &Path,
        schema_file: Option<&Path>,
        hash_these: Option<&(dyn Fn(&str) -> bool + Sync)>,
    ) -> Result<Snapshot, DataError> {
        let mut types = match schema_file {
            Some(file) => read_schema_file(file)?,
            None => Default::default(),
        };
        let from_file: Vec<String> = types.keys().cloned().collect();
        for column in &self.categorical {
            types.insert(column.clone(), ColumnType::String);
        }
        let snapshot = Snapshot::open_as(path, &types)?;
        let names: Vec<&str> = snapshot.columns.iter().map(|c| c.name.as_str()).collect();
        if let Some(missing) = self
            .categorical
            .iter()
            .find(|c| !names.contains(&c.as_str()))
        {
            return Err(DataError::Other(
                InputError::field(
                    "manifest.data.categorical",
                    format!(
                        "`{missing}` is not a column of the snapshot{} (columns: {})",
                        runfn_manifest::suggest::hint(missing, &names),
                        names.join(", ")
                    ),
                )
                .to_string(),
            ));
        }
        if let Some(missing) = from_file.iter().find(|c| !names.contains(&c.as_str())) {
            return Err(DataError::column(
                missing,
                "is in the schema file but not in the snapshot",
            ));
        }
        if let Some(hash_these) = hash_these {
            self.verify_snapshot(path, hash_these)?;
        }
        self.require_columns(|c| snapshot.column_type(c).is_some())
            .map_err(|e| DataError::Other(e.to_string()))?;
        Ok(snapshot)
    }

    /// Refuses the snapshot at `path` unless it is the one the manifest pins (hashing the files
    /// `hash_these` selects, the others checked by path and size against the pin's listing) or
    /// the one mf-hash digested earlier in the run (hashed whole: there is no listing).
    pub fn verify_snapshot(
        &self,
        path: &Path,
        hash_these: &(dyn Fn(&str) -> bool + Sync),
    ) -> Result<(), DataError> {
        let checked = match (&self.pinned, &self.recorded) {
            (Some(pinned), _) => Some(runfn_manifest::pin::verify_some(path, pinned, hash_these)),
            (None, Some((recorded, digest))) if same_path(&recorded_local(recorded), path) => {
                Some(runfn_manifest::pin::verify_recorded(path, digest, &|_| {}))
            }
            _ => None,
        };
        if let Some(Err(err)) = checked {
            return Err(DataError::Other(format!("manifest.data.snapshot: {err}")));
        }
        Ok(())
    }

    /// Refuses a digest of the snapshot at `path` computed elsewhere (merged from the hashes
    /// of a parted run's reads) unless it is the one the manifest pins, or the one mf-hash
    /// recorded for this path: the check [`DataSpec::verify_snapshot`] makes by hashing.
    pub fn verify_digested(
        &self,
        path: &Path,
        digested: (
            runfn_manifest::digest::DataDigest,
            Vec<runfn_manifest::digest::FileDigest>,
        ),
    ) -> Result<(), DataError> {
        let checked = match (&self.pinned, &self.recorded) {
            (Some(pinned), _) => Some(runfn_manifest::pin::verify_digested(path, pinned, digested)),
            (None, Some((recorded, digest))) if same_path(&recorded_local(recorded), path) => Some(
                runfn_manifest::pin::verify_recorded_digested(path, digest, digested),
            ),
            _ => None,
        };
        if let Some(Err(err)) = checked {
            return Err(DataError::Other(format!("manifest.data.snapshot: {err}")));
        }
        Ok(())
    }

    /// The splits, from `--split NAME=RULE` flags when given, else the manifest.
    pub fn splits_or(&self, flags: &[String]) -> Result<Vec<(String, String)>, InputError> {
        if flags.is_empty() {
            if self.splits.is_empty() {
                return Err(InputError::field(
                    "manifest.data.splits",
                    "is missing; give --split NAME=RULE",
                ));
            }
            return Ok(self.splits.clone());
        }
        flags
            .iter()
            .map(|flag| {
                flag.split_once('=')
                    .map(|(name, rule)| (name.trim().to_string(), rule.trim().to_string()))
                    .ok_or_else(|| {
                        InputError::field("--split", format!("`{flag}` is not NAME=RULE"))
                    })
            })
            .collect()
    }
}

/// `./lake/x` and `lake/x` name the same place; nothing else is resolved.
fn same_path(a: &Path, b: &Path) -> bool {
    let parts = |p| {
        Path::components(p)
            .filter(|c| *c != std::path::Component::CurDir)
            .collect::<Vec<_>>()
    };
    parts(a) == parts(b)
}

/// Parses a size such as `1G`, `512M`, `64KiB` or a plain number of bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size such as 512M or 2G"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1u64,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(format!("`{text}` has an unknown unit (use K, M, G or T)")),
    };
    let bytes = number * scale as f64;
    if bytes < 1.0 {
        Err(format!("`{text}` is too small"))
    } else {
        Ok(bytes as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_manifest_data_section() {
        let record = Record::from_value(
            json!({"manifest": {"data": {"snapshot": "./lake/churn@snapshot=1", "entity": "id", "time": "day", "label": "y",
                "splits": {"train": "day < 2026-08-01", "test": "2026-08"}, "text": ["note"], "as_of": {"tickets": "tickets_as_of"}}}}),
            "t",
        )
        .unwrap();
        let spec = DataSpec::from_record(&record).unwrap();
        assert_eq!(spec.snapshot.as_deref(), Some("./lake/churn"));
        assert_eq!(spec.splits[1], ("test".to_string(), "2026-08".to_string()));
        assert_eq!(spec.as_of["tickets"], "tickets_as_of");
        let err = spec.snapshot_path(None).unwrap_err().to_string();
        assert!(err.contains("give the snapshot with --in PATH"), "{err}");
    }

    #[test]
    fn categorical_columns_are_read_as_text_and_must_exist() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.csv"), "precinct,y\n1,YES\n2,NO\n").unwrap();
        let spec_of = |data: Value| {
            DataSpec::from_record(
                &Record::from_value(json!({"manifest": {"data": data}}), "t").unwrap(),
            )
        };
        let spec =
            spec_of(json!({"label": "y", "label_positive": "YES", "categorical": ["precinct"]}))
                .unwrap();
        assert_eq!(spec.label_positive, Some(Positive::Text("YES".into())));
        let snapshot = spec.open_snapshot(dir.path(), None).unwrap();
        assert_eq!(snapshot.column_type("precinct"), Some(ColumnType::String));
        let plain = spec_of(json!({"label": "y"})).unwrap();
        assert_eq!(
            plain
                .open_snapshot(dir.path(), None)
                .unwrap()
                .column_type("precinct"),
            Some(ColumnType::Int64)
        );
        let err = spec_of(json!({"categorical": ["precint"]}))
            .unwrap()
            .open_snapshot(dir.path(), None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "manifest.data.categorical: `precint` is not a column of the snapshot (did you mean `precinct`?) (columns: precinct, y)"
        );
        let err = spec_of(json!({"categorical": [3]}))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "manifest.data.categorical: must list column names");
        let err = spec_of(json!({"label_positive": {"is": "YES"}}))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("manifest.data.label_positive: must be the label value"),
            "{err}"
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3X").is_err());
    }
}
