//! A snapshot's profile: every column, computed per file in parallel and merged in file order.

use rayon::prelude::*;
use runfn_data::DataError;
use runfn_data::read::{BadValues, Snapshot};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::column::ColumnProfile;

pub const PROFILE_FORMAT: &str = "runfn-profile-v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub format: String,
    /// The files profiled, in order.
    pub sources: Vec<String>,
    pub rows: u64,
    pub label: Option<String>,
    pub bad_values: BadValues,
    pub columns: Vec<ColumnProfile>,
}

impl Profile {
    fn empty(snapshot: &Snapshot, label: Option<&str>, identifiers: &[String]) -> Profile {
        Profile {
            format: PROFILE_FORMAT.into(),
            sources: Vec::new(),
            rows: 0,
            label: label.map(String::from),
            bad_values: BadValues::default(),
            columns: snapshot
                .columns
                .iter()
                .map(|c| {
                    ColumnProfile::new(
                        &c.name,
                        c.column_type,
                        Some(c.name.as_str()) == label,
                        identifiers.contains(&c.name),
                    )
                })
                .collect(),
        }
    }

    pub fn column(&self, name: &str) -> Option<&ColumnProfile> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// Merges `other` into this profile: rows, bad values and every column; columns only one
    /// side has are kept (a schema change shows up in `compare`, not here).
    pub fn merge(&mut self, other: &Profile) -> Result<(), String> {
        if other.format != self.format {
            return Err(format!(
                "profile format `{}` cannot merge with `{}`",
                other.format, self.format
            ));
        }
        if other.label != self.label {
            return Err(format!(
                "the profiles name different labels ({:?} and {:?})",
                self.label, other.label
            ));
        }
        self.rows += other.rows;
        self.sources.extend(other.sources.iter().cloned());
        self.bad_values.merge(&other.bad_values);
        for column in &other.columns {
            match self.columns.iter_mut().find(|c| c.name == column.name) {
                Some(mine) => mine.merge(column)?,
                None => self.columns.push(column.clone()),
            }
        }
        Ok(())
    }

    /// The profile without sketch internals, for the run record.
    pub fn summary(&self) -> Value {
        let columns: Map<String, Value> = self
            .columns
            .iter()
            .map(|c| (c.name.clone(), c.summary()))
            .collect();
        let label_rate = self
            .label
            .as_deref()
            .and_then(|l| self.column(l))
            .and_then(|c| c.label)
            .and_then(|l| l.rate());
        json!({
            "rows": self.rows,
            "files": self.sources.len(),
            "label": self.label,
            "label_rate": label_rate,
            "bad_values": self.bad_values.total(),
            "columns": columns,
        })
    }
}

/// Profiles every file of `snapshot` in parallel; `label` is the label column, if any;
/// `identifiers` are entity and free-text columns (no category counts).
pub fn profile_snapshot(
    snapshot: &Snapshot,
    label: Option<&str>,
    identifiers: &[String],
) -> Result<Profile, DataError> {
    // A label column the snapshot lacks is not an input error here: the label_missing check
    // reports it as a failed validation.
    let per_file: Vec<Profile> = (0..snapshot.files.len())
        .into_par_iter()
        .map(|file| {
            let mut profile = Profile::empty(snapshot, label, identifiers);
            profile
                .sources
                .push(snapshot.files[file].path.display().to_string());
            for typed in snapshot.read_file(file)? {
                let typed = typed?;
                profile.rows += typed.batch.num_rows() as u64;
                profile.bad_values.merge(&typed.bad_values);
                for (column, array) in profile.columns.iter_mut().zip(typed.batch.columns()) {
                    column.add(array);
                }
            }
            Ok(profile)
        })
        .collect::<Vec<Result<_, DataError>>>()
        // The first failing file in file order, so the error is the same on every run.
        .into_iter()
        .collect::<Result<_, DataError>>()?;
    let mut merged = Profile::empty(snapshot, label, identifiers);
    for profile in &per_file {
        merged.merge(profile).map_err(DataError::Other)?;
    }
    Ok(merged)
}
