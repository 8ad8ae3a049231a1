//! A snapshot's profile: every column, computed per file (or per run of a large Parquet file's
//! row groups) in parallel and merged in file order.

use arrow::record_batch::RecordBatch;
use rayon::prelude::*;
use runfn_core::InputError;
use runfn_data::DataError;
use runfn_data::label::Positive;
use runfn_data::read::{BadValues, Piece, Snapshot, TypedBatch};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::column::ColumnProfile;

pub const PROFILE_FORMAT: &str = "runfn-profile-v1";

/// Rows of a large Parquet file profiled as one piece: enough that merging the pieces costs
/// little, few enough that one file keeps every core busy.
pub(crate) const PIECE_ROWS: u64 = 1 << 20;

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
    /// With `validate.window`: the profile of each full window, newest first. `predict` judges
    /// served rows against how far these windows stand from the whole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<Profile>,
}

impl Profile {
    pub(crate) fn empty(
        snapshot: &Snapshot,
        label: Option<&str>,
        positive: Option<&Positive>,
        identifiers: &[String],
    ) -> Profile {
        Profile {
            format: PROFILE_FORMAT.into(),
            sources: Vec::new(),
            rows: 0,
            label: label.map(String::from),
            bad_values: BadValues::default(),
            windows: Vec::new(),
            columns: snapshot
                .columns
                .iter()
                .map(|c| {
                    let is_label = Some(c.name.as_str()) == label;
                    let mut column = ColumnProfile::new(
                        &c.name,
                        c.column_type,
                        is_label,
                        identifiers.contains(&c.name),
                    );
                    if is_label {
                        column.label_positive = positive.cloned();
                    }
                    column
                })
                .collect(),
        }
    }

    /// A profile's JSON as ds-validate writes it; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Profile, InputError> {
        let profile: Profile = serde_json::from_str(text).map_err(|e| {
            InputError::field(origin, format!("not a {PROFILE_FORMAT} profile: {e}"))
        })?;
        if profile.format != PROFILE_FORMAT {
            return Err(InputError::field(
                origin,
                format!("format `{}`, expected `{PROFILE_FORMAT}`", profile.format),
            ));
        }
        Ok(profile)
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
        let label = self.label.as_deref().and_then(|l| self.column(l));
        let label_rate = label.and_then(|c| c.label).and_then(|l| l.rate());
        let mut summary = json!({
            "rows": self.rows,
            "files": self.sources.len(),
            "label": self.label,
            "label_rate": label_rate,
            "bad_values": self.bad_values.total(),
            "columns": columns,
        });
        // With a named positive value, which values were read as negative: more than one says
        // the label was read one-vs-rest.
        if let Some(column) = label
            && let Some(positive) = &column.label_positive
        {
            summary["label_positive"] = json!(positive);
            summary["label_negative"] = json!(
                column
                    .label_values
                    .as_ref()
                    .map(|v| v.negatives(positive))
                    .unwrap_or_default()
            );
        }
        summary
    }

    /// The label as the manifest describes it cannot be read from these values: text (or two
    /// codes other than 0/1) with no `label_positive`, or a `label_positive` of another type or
    /// that no row holds. An input error that says what to write; checked on a whole snapshot,
    /// where a value no row holds is a mistake, not a quiet day.
    pub fn check_label(&self) -> Result<(), InputError> {
        let Some(column) = self.label.as_deref().and_then(|l| self.column(l)) else {
            return Ok(());
        };
        let (Some(values), Some(counts)) = (&column.label_values, column.label) else {
            return Ok(());
        };
        runfn_data::label::check(
            &column.name,
            column.column_type,
            column.label_positive.as_ref(),
            values,
            counts.positives,
        )
    }
}

/// Profiles every file of `snapshot` in parallel; `label` is the label column, if any, and
/// `positive` the value that means positive (none: 0/1 or true/false); `identifiers` are entity
/// and free-text columns (no category counts).
pub fn profile_snapshot(
    snapshot: &Snapshot,
    label: Option<&str>,
    positive: Option<&Positive>,
    identifiers: &[String],
) -> Result<Profile, DataError> {
    profile_in_pieces(snapshot, label, positive, identifiers, PIECE_ROWS)
}

/// [`profile_snapshot`] with pieces of at least `piece_rows` rows.
pub(crate) fn profile_in_pieces(
    snapshot: &Snapshot,
    label: Option<&str>,
    positive: Option<&Positive>,
    identifiers: &[String],
    piece_rows: u64,
) -> Result<Profile, DataError> {
    // A label column the snapshot lacks is not an input error here: the label_missing check
    // reports it as a failed validation.
    let mut merged = Profile::empty(snapshot, label, positive, identifiers);
    // A window of pieces at a time on all cores, merged in piece order as each window ends: the
    // same left fold as merging them all at the end, holding a window's profiles.
    for window in pieces(snapshot, piece_rows)?.chunks(pieces_at_once()) {
        let per_piece: Vec<Profile> = window
            .par_iter()
            .map(|piece| {
                let mut profile = Profile::empty(snapshot, label, positive, identifiers);
                profile.open_piece(snapshot, piece);
                for typed in snapshot.read_piece(piece)? {
                    profile.add_typed(&typed?);
                }
                Ok(profile)
            })
            .collect::<Vec<Result<_, DataError>>>()
            // The first failing piece in file order, so the error is the same on every run.
            .into_iter()
            .collect::<Result<_, DataError>>()?;
        for profile in &per_piece {
            merged.merge(profile).map_err(DataError::Other)?;
        }
    }
    Ok(merged)
}

/// How many pieces are profiled side by side before they are merged: enough to keep every core
/// busy while pieces differ in size, few enough that their profiles stay small beside the data.
pub(crate) fn pieces_at_once() -> usize {
    4 * rayon::current_num_threads().max(1)
}

/// Every piece of every file (a large Parquet file cut into runs of row groups), in file order.
pub(crate) fn pieces(snapshot: &Snapshot, piece_rows: u64) -> Result<Vec<Piece>, DataError> {
    Ok((0..snapshot.files.len())
        .map(|file| snapshot.pieces(file, piece_rows))
        .collect::<Result<Vec<_>, DataError>>()?
        .into_iter()
        .flatten()
        .collect())
}

impl Profile {
    /// Starts profiling `piece`: the file it opens becomes a source.
    pub(crate) fn open_piece(&mut self, snapshot: &Snapshot, piece: &Piece) {
        if piece.first_row == 0 {
            self.sources
                .push(snapshot.files[piece.file].path.display().to_string());
        }
    }

    /// Adds a batch as read: its rows, its values that did not parse, every column.
    pub(crate) fn add_typed(&mut self, typed: &TypedBatch) {
        self.bad_values.merge(&typed.bad_values);
        self.add_rows(&typed.batch);
    }

    /// Adds a batch's rows to the row count and every column.
    pub(crate) fn add_rows(&mut self, batch: &RecordBatch) {
        self.rows += batch.num_rows() as u64;
        for (column, array) in self.columns.iter_mut().zip(batch.columns()) {
            column.add(array);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The profile of one snapshot folder holding `files` (name, CSV text).
    pub(crate) fn profile_of(files: &[(&str, &str)], label: Option<&str>) -> Profile {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let snapshot = Snapshot::open(dir.path(), &BTreeMap::new()).unwrap();
        profile_snapshot(&snapshot, label, None, &[]).unwrap()
    }

    /// A label of three values read one-vs-rest by its positive value: counted, summarized with
    /// the values read as negative, and checked against what the manifest says.
    #[test]
    fn a_text_label_is_counted_by_its_positive_value() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("x,y\n");
        for i in 0..20 {
            let y = ["NO", "YES", "NO", "MAYBE"][i % 4];
            text.push_str(&format!("{i},{y}\n"));
        }
        std::fs::write(dir.path().join("a.csv"), text).unwrap();
        let snapshot = Snapshot::open(dir.path(), &BTreeMap::new()).unwrap();
        let profile_with = |positive: Option<Positive>| {
            profile_snapshot(&snapshot, Some("y"), positive.as_ref(), &[]).unwrap()
        };
        let yes = profile_with(Some(Positive::Text("YES".into())));
        let counts = yes.column("y").unwrap().label.unwrap();
        assert_eq!(
            (counts.positives, counts.negatives, counts.invalid),
            (5, 15, 0)
        );
        let summary = yes.summary();
        assert_eq!(summary["label_rate"], 0.25);
        assert_eq!(summary["label_positive"], "YES");
        assert_eq!(summary["label_negative"], json!(["MAYBE", "NO"]));
        assert!(yes.check_label().is_ok());

        let unnamed = profile_with(None);
        assert!(unnamed.summary().get("label_positive").is_none());
        assert_eq!(
            unnamed.check_label().unwrap_err().to_string(),
            "manifest.data.label: `y` holds MAYBE, NO, YES; say which is positive with data.label_positive: \"MAYBE\""
        );
        let absent = profile_with(Some(Positive::Text("yes".into())));
        assert_eq!(
            absent.check_label().unwrap_err().to_string(),
            "manifest.data.label_positive: `yes` is not a value of `y` (values: MAYBE, NO, YES); did you mean \"YES\"?"
        );
        let mut merged = yes.clone();
        let err = merged.merge(&unnamed).unwrap_err();
        assert_eq!(
            err,
            "column `y`: its labels were read with different positive values"
        );
        // What a profile stores reads back the same, the positive value and the values included.
        let text = serde_json::to_string(&yes).unwrap();
        assert_eq!(serde_json::from_str::<Profile>(&text).unwrap(), yes);
    }

    fn csv(rows: std::ops::Range<usize>) -> String {
        let mut text = String::from("x,kind,y\n");
        for i in rows {
            let x = if i % 10 == 3 {
                String::new()
            } else {
                format!("{}", (i * 7919 % 1000) as f64 / 8.0)
            };
            text.push_str(&format!(
                "{x},{},{}\n",
                ["a", "b", "c", "d"][i * i % 4],
                (i % 3 == 0) as u8
            ));
        }
        text
    }

    /// The share of `sorted` at or below `value`.
    fn rank(sorted: &[f64], value: f64) -> f64 {
        sorted.partition_point(|v| *v <= value) as f64 / sorted.len() as f64
    }

    /// The real telco table (testdata/real/telco) as one Parquet file of 500-row groups.
    pub(crate) fn telco_parquet(dir: &std::path::Path) -> Snapshot {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/real/telco/snapshot");
        let csv = Snapshot::open(&root, &BTreeMap::new()).unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(500))
            .build();
        let file = std::fs::File::create(dir.join("telco.parquet")).unwrap();
        let mut writer =
            parquet::arrow::ArrowWriter::try_new(file, csv.schema.clone(), Some(props)).unwrap();
        for batch in csv.read_file(0).unwrap() {
            writer.write(&batch.unwrap().batch).unwrap();
        }
        writer.close().unwrap();
        Snapshot::open(dir, &BTreeMap::new()).unwrap()
    }

    /// A numeric column's non-null values, sorted.
    fn sorted_values(snapshot: &Snapshot, column: &str) -> Vec<f64> {
        let index = snapshot.schema.index_of(column).unwrap();
        let mut values = Vec::new();
        for typed in snapshot.read_file(0).unwrap() {
            let array = arrow::compute::cast(
                typed.unwrap().batch.column(index),
                &arrow::datatypes::DataType::Float64,
            )
            .unwrap();
            let array = array
                .as_any()
                .downcast_ref::<arrow::array::Float64Array>()
                .unwrap();
            values.extend(array.iter().flatten().filter(|v| v.is_finite()));
        }
        values.sort_by(f64::total_cmp);
        values
    }

    #[test]
    fn a_large_parquet_file_is_profiled_in_pieces_like_it_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let snapshot = telco_parquet(dir.path());
        let pieces = snapshot.pieces(0, 1200).unwrap();
        let ranges: Vec<_> = pieces
            .iter()
            .map(|p| (p.row_groups.clone().unwrap(), p.first_row))
            .collect();
        assert_eq!(
            ranges,
            vec![
                (0..3, 0),
                (3..6, 1500),
                (6..9, 3000),
                (9..12, 4500),
                (12..15, 6000)
            ]
        );
        let label = Some("churned");
        let whole = profile_in_pieces(&snapshot, label, None, &[], u64::MAX).unwrap();
        let split = profile_in_pieces(&snapshot, label, None, &[], 1200).unwrap();
        assert_eq!((split.rows, whole.rows), (7043, 7043));
        assert_eq!(split.sources, whole.sources, "the file is listed once");
        for (a, b) in split.columns.iter().zip(&whole.columns) {
            assert_eq!(
                (a.count, a.nulls, a.nans),
                (b.count, b.nulls, b.nans),
                "{}",
                a.name
            );
            assert_eq!(
                (a.moments.n, a.moments.min, a.moments.max),
                (b.moments.n, b.moments.min, b.moments.max)
            );
            let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * y.abs().max(1.0);
            assert!(close(a.moments.mean, b.moments.mean), "{}", a.name);
            assert!(close(a.moments.m2, b.moments.m2), "{}", a.name);
            assert_eq!(a.distinct, b.distinct, "{}", a.name);
            assert_eq!(a.frequencies, b.frequencies, "{}", a.name);
            assert_eq!(a.label, b.label, "{}", a.name);
            if let (Some(x), Some(y)) = (&a.quantiles, &b.quantiles) {
                assert_eq!(x.count(), y.count());
                // Compared by rank in the column's own values: on a 0/1 column any value
                // between 0 and 1 is the same quantile.
                let sorted = sorted_values(&snapshot, &a.name);
                for p in [0.1, 0.5, 0.9] {
                    let (x, y) = (x.quantile(p).unwrap(), y.quantile(p).unwrap());
                    // The ranks a value spans, ties included: [share below, share at or below].
                    let span = |v: f64| {
                        let n = sorted.len() as f64;
                        (
                            sorted.partition_point(|s| *s < v) as f64 / n,
                            sorted.partition_point(|s| *s <= v) as f64 / n,
                        )
                    };
                    let ((lx, hx), (ly, hy)) = (span(x), span(y));
                    let gap = (lx.max(ly) - hx.min(hy)).max(0.0);
                    assert!(
                        gap <= 0.02,
                        "{} p{p}: {x} ({lx}-{hx}) vs {y} ({ly}-{hy})",
                        a.name
                    );
                }
            }
        }
        // The same pieces every time, so the same bytes every time.
        let again = profile_in_pieces(&snapshot, label, None, &[], 1200).unwrap();
        assert_eq!(
            serde_json::to_string(&again).unwrap(),
            serde_json::to_string(&split).unwrap()
        );
    }

    #[test]
    fn a_snapshot_profiled_in_parts_matches_it_profiled_whole() {
        let (first, second) = (csv(0..1200), csv(1200..3000));
        let second_rows: String = second.lines().skip(1).map(|l| format!("{l}\n")).collect();
        let parts = profile_of(&[("a.csv", &first), ("b.csv", &second)], Some("y"));
        let whole = profile_of(&[("all.csv", &format!("{first}{second_rows}"))], Some("y"));
        assert_eq!(parts.sources.len(), 2);
        assert_eq!((parts.rows, whole.rows), (3000, 3000));

        let values: Vec<f64> = {
            let mut v: Vec<f64> = (0..3000)
                .filter(|i| i % 10 != 3)
                .map(|i| (i * 7919 % 1000) as f64 / 8.0)
                .collect();
            v.sort_by(f64::total_cmp);
            v
        };
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let std = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        for profile in [&parts, &whole] {
            let x = profile.column("x").unwrap();
            assert_eq!((x.count, x.nulls), (3000, 300));
            assert_eq!(x.moments.n, 2700);
            assert!((x.moments.mean - mean).abs() < 1e-9);
            assert!((x.moments.std().unwrap() - std).abs() < 1e-9);
            assert_eq!(
                (x.moments.min, x.moments.max),
                (Some(values[0]), values.last().copied())
            );
            let sketch = x.quantiles.as_ref().unwrap();
            assert_eq!(sketch.count(), 2700);
            // The sketch's documented bound: under 1% rank error.
            for q in [0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99] {
                let error = (rank(&values, sketch.quantile(q).unwrap()) - q).abs();
                assert!(error < 0.01, "q {q}: rank error {error}");
            }
            // i -> i * 7919 mod 1000 is one-to-one on residues; the 100 ending in 3 are null.
            let distinct = x.distinct.estimate();
            assert!((distinct - 900.0).abs() < 900.0 * 0.05, "{distinct}");
        }
        let (px, wx) = (parts.column("x").unwrap(), whole.column("x").unwrap());
        assert_eq!(px.distinct, wx.distinct, "HyperLogLog merges losslessly");
        let (pk, wk) = (parts.column("kind").unwrap(), whole.column("kind").unwrap());
        assert_eq!(pk.frequencies, wk.frequencies);
        assert_eq!(pk.distinct, wk.distinct);
        assert_eq!(
            parts.column("y").unwrap().label,
            whole.column("y").unwrap().label
        );
        assert_eq!(parts.summary()["label_rate"], whole.summary()["label_rate"]);
    }

    /// Category counts that gave up and ones that did not merge to the same sketches however
    /// the rows are cut into files, so a profile does not depend on the chunking.
    #[test]
    fn category_sketches_do_not_depend_on_the_chunking() {
        let rows = runfn_stats::sketch::frequencies::DEFAULT_CAP + 2000;
        let csv = |range: std::ops::Range<usize>, header: bool| {
            let mut text = String::from(if header { "id,kind\n" } else { "" });
            for i in range {
                text.push_str(&format!(
                    "u{},{}\n",
                    i * 7 % rows,
                    ["x", "y", "z", "w"][i % 4]
                ));
            }
            text
        };
        let whole = profile_of(&[("all.csv", &csv(0..rows, true))], None);
        let cuts = [0, 3, 5000, 5001, 11_000, rows];
        let files: Vec<(String, String)> = cuts
            .windows(2)
            .enumerate()
            .map(|(i, w)| (format!("p{i}.csv"), csv(w[0]..w[1], true)))
            .collect();
        let named: Vec<(&str, &str)> = files
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        let parts = profile_of(&named, None);
        for name in ["id", "kind"] {
            let (p, w) = (parts.column(name).unwrap(), whole.column(name).unwrap());
            assert_eq!(p.frequencies, w.frequencies, "{name}");
            assert_eq!(p.distinct, w.distinct, "{name}");
            assert_eq!(p.summary(), w.summary(), "{name}");
        }
        assert!(
            whole
                .column("id")
                .unwrap()
                .frequencies
                .as_ref()
                .unwrap()
                .truncated()
        );
        let kind = whole.column("kind").unwrap().frequencies.clone().unwrap();
        assert_eq!(kind.counts()["x"], (rows / 4) as u64);
        assert!(!kind.truncated());
    }

    #[test]
    fn profiles_merge_only_with_the_same_format_and_label() {
        let a = profile_of(&[("a.csv", "x,y\n1,0\n2,1\n")], Some("y"));
        let b = profile_of(&[("b.csv", "x,z,y\n3,q,1\n")], Some("y"));
        let mut merged = a.clone();
        merged.merge(&b).unwrap();
        assert_eq!(merged.rows, 3);
        assert_eq!(merged.sources.len(), 2);
        let names: Vec<&str> = merged.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["x", "y", "z"], "a column only one side has is kept");
        assert_eq!(merged.column("x").unwrap().moments.mean, 2.0);
        let y = merged.column("y").unwrap().label.unwrap();
        assert_eq!((y.positives, y.negatives), (2, 1));

        let unlabelled = profile_of(&[("c.csv", "x,y\n1,0\n")], None);
        let err = a.clone().merge(&unlabelled).unwrap_err();
        assert!(err.contains("different labels"), "{err}");
        let mut other_format = b.clone();
        other_format.format = "runfn-profile-v0".into();
        let err = a.clone().merge(&other_format).unwrap_err();
        assert!(err.contains("`runfn-profile-v0`"), "{err}");
    }
}
