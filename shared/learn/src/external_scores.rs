//! Scores written by a program outside runfn (`evaluate --scores`): a key column and a `score`
//! column, in Parquet or CSV, checked to be probabilities and to cover exactly the rows of the
//! split they claim, so any team's model is scored (and gated) on the same rows as runfn's own.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use runfn_core::InputError;
use runfn_core::side_file::{SCORES_LIMIT, blake3_bounded};
use runfn_data::label::{Positive, labels};

use crate::features::{display_strings, targets};
use crate::shard_reader::ShardReader;

/// The column holding each row's score.
pub const SCORE_COLUMN: &str = "score";

/// A scores file as read: its blake3 (of the bytes read), and each key's score.
#[derive(Debug, Clone)]
pub struct ScoresFile {
    pub path: PathBuf,
    pub blake3: String,
    pub key: String,
    scores: HashMap<String, f64>,
}

/// Where a score came from in the file, for an error that names it.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// A Parquet row, from 0.
    Row(u64),
    /// A CSV line, from 1 (the header is line 1).
    Line(u64),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Row(row) => write!(f, "row {row}"),
            Place::Line(line) => write!(f, "line {line}"),
        }
    }
}

impl ScoresFile {
    /// Reads `path` (Parquet when it starts with `PAR1`, else CSV with a header), whose rows are
    /// keyed by the column `key`. Every score must be a finite probability and every key unique.
    pub fn read(path: &Path, key: &str) -> Result<ScoresFile, InputError> {
        let blake3 = blake3_bounded(path, SCORES_LIMIT)?;
        let mut file = ScoresFile {
            path: path.to_path_buf(),
            blake3,
            key: key.to_string(),
            scores: HashMap::new(),
        };
        let mut first_place: HashMap<String, Place> = HashMap::new();
        let mut add = |file: &mut ScoresFile, k: String, score: f64, place: Place| {
            file.check_score(&k, score, place)?;
            if let Some(earlier) = first_place.get(&k) {
                return Err(file.refuse(format!(
                    "key `{}` appears twice ({earlier} and {place}): each row is scored once",
                    runfn_core::error::shown(&k)
                )));
            }
            first_place.insert(k.clone(), place);
            file.scores.insert(k, score);
            Ok(())
        };
        if is_parquet(path).map_err(|source| InputError::Io {
            path: path.to_path_buf(),
            source,
        })? {
            let pairs = file.parquet_pairs()?;
            for (i, (k, s)) in pairs.into_iter().enumerate() {
                add(&mut file, k, s, Place::Row(i as u64))?;
            }
        } else {
            let pairs = file.csv_pairs()?;
            for (line, k, s) in pairs {
                add(&mut file, k, s, Place::Line(line))?;
            }
        }
        if file.scores.is_empty() {
            return Err(file.refuse("holds no rows".into()));
        }
        Ok(file)
    }

    pub fn rows(&self) -> u64 {
        self.scores.len() as u64
    }

    /// The scores in the order of `keys` (the split's rows), which the file must cover exactly:
    /// no score for a row outside the split, none missing.
    pub fn in_order(&self, keys: &[String], split: &str) -> Result<Vec<f64>, InputError> {
        let mut out = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        for k in keys {
            match self.scores.get(k) {
                Some(score) => out.push(*score),
                None => missing.push(k),
            }
        }
        let covered = keys.len() - missing.len();
        if covered < self.scores.len() {
            let wanted: std::collections::HashSet<&str> = keys.iter().map(String::as_str).collect();
            let mut others: Vec<&String> = self
                .scores
                .keys()
                .filter(|k| !wanted.contains(k.as_str()))
                .collect();
            others.sort();
            return Err(self.refuse(format!(
                "{} of its {} keys are not rows of the `{split}` split (first: `{}`): the scores must be for exactly that split's rows",
                others.len(),
                self.scores.len(),
                runfn_core::error::shown(others[0])
            )));
        }
        if let Some(first) = missing.first() {
            return Err(self.refuse(format!(
                "{} of the {} rows of `{split}` have no score (first: {} `{}`)",
                missing.len(),
                keys.len(),
                self.key,
                runfn_core::error::shown(first)
            )));
        }
        Ok(out)
    }

    fn refuse(&self, message: String) -> InputError {
        InputError::field(self.path.display().to_string(), message)
    }

    fn check_score(&self, key: &str, score: f64, place: Place) -> Result<(), InputError> {
        let key = runfn_core::error::shown(key);
        if !score.is_finite() {
            return Err(self.refuse(format!(
                "{place} (key `{key}`): the score is {score}: scores must be finite probabilities"
            )));
        }
        if !(0.0..=1.0).contains(&score) {
            return Err(self.refuse(format!(
                "{place} (key `{key}`): the score {score} is outside [0, 1]: give the probability of the positive label, not a margin or a logit"
            )));
        }
        Ok(())
    }

    /// The key (as text, as the shards' values are shown) and score of every Parquet row.
    fn parquet_pairs(&self) -> Result<Vec<(String, f64)>, InputError> {
        let bad =
            |e: &dyn std::fmt::Display| self.refuse(format!("not a readable Parquet file: {e}"));
        let handle = std::fs::File::open(&self.path).map_err(|source| InputError::Io {
            path: self.path.clone(),
            source,
        })?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(handle).map_err(|e| bad(&e))?;
        let schema = builder.schema().clone();
        for wanted in [self.key.as_str(), SCORE_COLUMN] {
            if schema.field_with_name(wanted).is_err() {
                return Err(self.refuse(format!(
                    "has no column `{wanted}` (columns: {})",
                    column_names(schema.fields().iter().map(|f| f.name().as_str()))
                )));
            }
        }
        let mut pairs = Vec::new();
        for batch in builder.build().map_err(|e| bad(&e))? {
            let batch = batch.map_err(|e| bad(&e))?;
            let keys = display_strings(&batch, &self.key, &self.path).map_err(|e| bad(&e))?;
            let key_column = batch.column_by_name(&self.key).expect("checked above");
            let scores = batch.column_by_name(SCORE_COLUMN).expect("checked above");
            let scores = arrow::compute::cast(scores, &DataType::Float64).map_err(|_| {
                self.refuse(format!(
                    "column `{SCORE_COLUMN}` is {}, not a number",
                    scores.data_type()
                ))
            })?;
            let scores = scores.as_primitive::<Float64Type>();
            for (i, k) in keys.into_iter().enumerate() {
                let place = Place::Row((pairs.len()) as u64);
                if key_column.is_null(i) {
                    return Err(self.refuse(format!("{place}: the key `{}` is null", self.key)));
                }
                if scores.is_null(i) {
                    return Err(self.refuse(format!("{place} (key `{k}`): the score is null")));
                }
                pairs.push((k, scores.value(i)));
            }
        }
        Ok(pairs)
    }

    /// The line, key and score of every CSV record.
    fn csv_pairs(&self) -> Result<Vec<(u64, String, f64)>, InputError> {
        let bad = |e: csv::Error| self.refuse(format!("not a readable CSV file: {e}"));
        let mut reader = csv::ReaderBuilder::new()
            .from_path(&self.path)
            .map_err(bad)?;
        let header = reader.headers().map_err(bad)?.clone();
        let position = |wanted: &str| {
            header.iter().position(|h| h == wanted).ok_or_else(|| {
                self.refuse(format!(
                    "has no column `{wanted}` (columns: {})",
                    column_names(header.iter())
                ))
            })
        };
        let (key_at, score_at) = (position(&self.key)?, position(SCORE_COLUMN)?);
        let mut pairs = Vec::new();
        for record in reader.records() {
            let record = record.map_err(bad)?;
            let line = record.position().map_or(0, |p| p.line());
            let key = record.get(key_at).unwrap_or_default().to_string();
            let text = record.get(score_at).unwrap_or_default().trim();
            if key.is_empty() {
                return Err(self.refuse(format!("line {line}: the key `{}` is empty", self.key)));
            }
            let score = text.parse::<f64>().map_err(|_| {
                self.refuse(format!(
                    "line {line} (key `{}`): the score `{}` is not a number",
                    runfn_core::error::shown(&key),
                    runfn_core::error::shown(text)
                ))
            })?;
            pairs.push((line, key, score));
        }
        Ok(pairs)
    }
}

fn column_names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    runfn_core::error::shown(&names.collect::<Vec<_>>().join(", "))
}

/// Whether the file starts with Parquet's magic bytes.
fn is_parquet(path: &Path) -> std::io::Result<bool> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path)?;
    let mut read = 0;
    while read < 4 {
        match file.read(&mut magic[read..])? {
            0 => break,
            n => read += n,
        }
    }
    Ok(read == 4 && &magic == b"PAR1")
}

/// A split's rows as an outside model's scores are judged: each row's label and the text of
/// each of `columns` (slices, the key), in shard-index order.
#[derive(Debug, Default)]
pub struct SplitRows {
    pub labels: Vec<bool>,
    pub columns: Vec<(String, Vec<String>)>,
}

/// Reads the label (positive as `positive` names it) and `columns` of `shards`, in order.
pub fn read_split(
    shards: &[PathBuf],
    label: &str,
    positive: Option<&Positive>,
    columns: &[String],
) -> Result<SplitRows> {
    let mut wanted: Vec<&str> = vec![label];
    wanted.extend(columns.iter().map(String::as_str).filter(|c| *c != label));
    let mut out = SplitRows {
        columns: columns.iter().map(|c| (c.clone(), Vec::new())).collect(),
        ..SplitRows::default()
    };
    for path in shards {
        let mut reader = ShardReader::open(path, &wanted)?;
        while let Some((batch, first_row)) = reader.next_batch()? {
            let array = batch
                .column_by_name(label)
                .ok_or_else(|| anyhow::anyhow!("{}: no label column `{label}`", path.display()))?;
            let read = labels(array, positive);
            let targets = targets(array, &read, label, positive, path, first_row)?;
            out.labels.extend(targets.iter().map(|&y| y == 1.0));
            for (name, values) in &mut out.columns {
                values.extend(display_strings(&batch, name, path)?);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("scores.csv");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn keys(list: &[&str]) -> Vec<String> {
        list.iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn scores_come_back_in_the_splits_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = ScoresFile::read(&csv(dir.path(), "id,score\nb,0.25\na,0.75\n"), "id").unwrap();
        assert_eq!(
            file.in_order(&keys(&["a", "b"]), "test").unwrap(),
            [0.75, 0.25]
        );
        assert_eq!(file.rows(), 2);
    }

    #[test]
    fn other_rows_missing_rows_and_bad_scores_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = |text: &str, split: &[&str]| -> String {
            match ScoresFile::read(&csv(dir.path(), text), "id") {
                Err(e) => e.to_string(),
                Ok(file) => file.in_order(&keys(split), "test").unwrap_err().to_string(),
            }
        };
        let other = err("id,score\na,0.5\nz,0.5\n", &["a"]);
        assert!(
            other.contains("1 of its 2 keys are not rows of the `test` split (first: `z`)"),
            "{other}"
        );
        let missing = err("id,score\na,0.5\n", &["a", "b"]);
        assert!(
            missing.contains("1 of the 2 rows of `test` have no score (first: id `b`)"),
            "{missing}"
        );
        let twice = err("id,score\na,0.5\na,0.6\n", &["a"]);
        assert!(
            twice.contains("key `a` appears twice (line 2 and line 3)"),
            "{twice}"
        );
        let nan = err("id,score\na,NaN\n", &["a"]);
        assert!(nan.contains("line 2 (key `a`): the score is NaN"), "{nan}");
        let inf = err("id,score\na,inf\n", &["a"]);
        assert!(inf.contains("the score is inf"), "{inf}");
        let logit = err("id,score\na,2.5\n", &["a"]);
        assert!(logit.contains("the score 2.5 is outside [0, 1]"), "{logit}");
        let text = err("id,score\na,high\n", &["a"]);
        assert!(text.contains("the score `high` is not a number"), "{text}");
        let ragged = err("id,score\na,0.5,9\n", &["a"]);
        assert!(ragged.contains("not a readable CSV file"), "{ragged}");
        let no_key = err("row,score\na,0.5\n", &["a"]);
        assert!(
            no_key.contains("has no column `id` (columns: row, score)"),
            "{no_key}"
        );
    }
}
