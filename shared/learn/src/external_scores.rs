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

/// A scores file as read: its blake3 (of the bytes read), its key column and how many rows it
/// scored.
#[derive(Debug, Clone)]
pub struct ScoresFile {
    pub path: PathBuf,
    pub blake3: String,
    pub key: String,
    rows: u64,
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

/// Bytes a scores file may take per row of the split beyond the row's key: the score written
/// out in full, separators, quotes, Parquet's own lengths and levels, and a few columns of the
/// team's own beside the two that are read.
const BYTES_PER_ROW: u64 = 512;

/// Bytes any scores file may take besides its rows: a header, Parquet's footer and metadata.
const BYTES_BESIDES_ROWS: u64 = 1 << 20;

/// The split's rows as the scores file must cover them: each key's place in the split's order.
struct Wanted<'a> {
    split: &'a str,
    place: HashMap<&'a str, usize>,
    scores: Vec<Option<(f64, Place)>>,
    /// The most bytes a file scoring exactly these rows needs, whatever its format.
    most_bytes: u64,
}

impl<'a> Wanted<'a> {
    fn new(keys: &'a [String], split: &'a str) -> Wanted<'a> {
        let key_bytes: u64 = keys.iter().map(|k| k.len() as u64).sum();
        Wanted {
            split,
            place: keys
                .iter()
                .enumerate()
                .map(|(i, k)| (k.as_str(), i))
                .collect(),
            scores: vec![None; keys.len()],
            most_bytes: BYTES_BESIDES_ROWS + key_bytes + BYTES_PER_ROW * keys.len() as u64,
        }
    }
}

impl ScoresFile {
    /// Reads `path` (Parquet when it starts with `PAR1`, else CSV with a header), whose rows are
    /// keyed by the column `key`, and returns the scores in the order of `keys` (the rows of
    /// `split`), which the file must cover exactly. Every score must be a finite probability and
    /// every key unique. What the file may allocate is bounded by the split: a file larger than
    /// its rows could need is refused before it is read, and reading stops at the first key that
    /// is not a row of the split.
    pub fn read(
        path: &Path,
        key: &str,
        keys: &[String],
        split: &str,
    ) -> Result<(ScoresFile, Vec<f64>), InputError> {
        let blake3 = blake3_bounded(path, SCORES_LIMIT)?;
        let mut file = ScoresFile {
            path: path.to_path_buf(),
            blake3,
            key: key.to_string(),
            rows: 0,
        };
        let mut wanted = Wanted::new(keys, split);
        let size = std::fs::metadata(path)
            .map_err(|source| InputError::Io {
                path: path.to_path_buf(),
                source,
            })?
            .len();
        if size > wanted.most_bytes {
            return Err(file.refuse(format!(
                "is {size} bytes, more than the {} bytes that scores for the {} rows of `{split}` can take: not a scores file for that split",
                wanted.most_bytes,
                keys.len()
            )));
        }
        if is_parquet(path).map_err(|source| InputError::Io {
            path: path.to_path_buf(),
            source,
        })? {
            file.parquet_pairs(&mut wanted)?;
        } else {
            file.csv_pairs(&mut wanted)?;
        }
        if file.rows == 0 {
            return Err(file.refuse("holds no rows".into()));
        }
        let missing: Vec<usize> = (0..keys.len())
            .filter(|&i| wanted.scores[i].is_none())
            .collect();
        if let Some(&first) = missing.first() {
            return Err(file.refuse(format!(
                "{} of the {} rows of `{split}` have no score (first: {} `{}`)",
                missing.len(),
                keys.len(),
                file.key,
                runfn_core::error::shown(&keys[first])
            )));
        }
        let scores = wanted
            .scores
            .into_iter()
            .map(|s| s.expect("every row checked above").0)
            .collect();
        Ok((file, scores))
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn refuse(&self, message: String) -> InputError {
        InputError::field(self.path.display().to_string(), message)
    }

    /// Takes one row of the file: its key must be a row of the split not scored before, its
    /// score a probability.
    fn add(
        &mut self,
        wanted: &mut Wanted,
        key: &str,
        score: f64,
        place: Place,
    ) -> Result<(), InputError> {
        let shown = runfn_core::error::shown(&key.escape_debug().to_string());
        let Some(&at) = wanted.place.get(key) else {
            return Err(self.refuse(format!(
                "{place}: the key `{shown}` is not a row of the `{}` split: the scores must be for exactly that split's rows",
                wanted.split
            )));
        };
        self.check_score(&shown, score, place)?;
        if let Some((_, earlier)) = wanted.scores[at] {
            return Err(self.refuse(format!(
                "key `{shown}` appears twice ({earlier} and {place}): each row is scored once"
            )));
        }
        wanted.scores[at] = Some((score, place));
        self.rows += 1;
        Ok(())
    }

    fn check_score(&self, key: &str, score: f64, place: Place) -> Result<(), InputError> {
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

    /// Each column's name must appear once, or which one is the key (or the score) is a guess.
    fn check_unique_columns<'n>(
        &self,
        names: impl Iterator<Item = &'n str> + Clone,
    ) -> Result<(), InputError> {
        for wanted in [self.key.as_str(), SCORE_COLUMN] {
            let count = names.clone().filter(|n| *n == wanted).count();
            if count == 0 {
                return Err(self.refuse(format!(
                    "has no column `{wanted}` (columns: {})",
                    column_names(names.clone())
                )));
            }
            if count > 1 {
                return Err(self.refuse(format!(
                    "has {count} columns named `{wanted}`: which one is meant is unclear"
                )));
            }
        }
        Ok(())
    }

    /// Every Parquet row, its key read as text (as the shards' values are shown), in batches
    /// small enough that even keys of a mebibyte stay within a bounded memory.
    fn parquet_pairs(&mut self, wanted: &mut Wanted) -> Result<(), InputError> {
        let bad = |e: &dyn std::fmt::Display| format!("not a readable Parquet file: {e}");
        let handle = std::fs::File::open(&self.path).map_err(|source| InputError::Io {
            path: self.path.clone(),
            source,
        })?;
        let builder =
            ParquetRecordBatchReaderBuilder::try_new(handle).map_err(|e| self.refuse(bad(&e)))?;
        let schema = builder.schema().clone();
        self.check_unique_columns(schema.fields().iter().map(|f| f.name().as_str()))?;
        let score_type = schema
            .field_with_name(SCORE_COLUMN)
            .expect("checked above")
            .data_type();
        if !score_type.is_numeric() {
            return Err(self.refuse(format!(
                "column `{SCORE_COLUMN}` is {score_type}, not a number"
            )));
        }
        // Compressed bytes say little of what a column holds once decoded: its uncompressed
        // size, from the footer, is what reading it allocates.
        let decoded: i64 = builder
            .metadata()
            .row_groups()
            .iter()
            .map(|g| g.total_byte_size())
            .sum();
        if decoded.max(0) as u64 > wanted.most_bytes {
            return Err(self.refuse(format!(
                "decodes to {decoded} bytes, more than the {} bytes that scores for the {} rows of `{}` can take: not a scores file for that split",
                wanted.most_bytes,
                wanted.scores.len(),
                wanted.split
            )));
        }
        let mask = parquet::arrow::ProjectionMask::columns(
            builder.parquet_schema(),
            [self.key.as_str(), SCORE_COLUMN],
        );
        let reader = builder
            .with_projection(mask)
            .with_batch_size(1024)
            .build()
            .map_err(|e| self.refuse(bad(&e)))?;
        let mut row = 0u64;
        for batch in reader {
            let batch = batch.map_err(|e| self.refuse(bad(&e)))?;
            let keys =
                display_strings(&batch, &self.key, &self.path).map_err(|e| self.refuse(bad(&e)))?;
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
                let place = Place::Row(row);
                row += 1;
                if key_column.is_null(i) {
                    return Err(self.refuse(format!("{place}: the key `{}` is null", self.key)));
                }
                if scores.is_null(i) {
                    return Err(self.refuse(format!(
                        "{place} (key `{}`): the score is null",
                        runfn_core::error::shown(&k.escape_debug().to_string())
                    )));
                }
                self.add(wanted, &k, scores.value(i), place)?;
            }
        }
        Ok(())
    }

    /// Every CSV record's key and score, with its line.
    fn csv_pairs(&mut self, wanted: &mut Wanted) -> Result<(), InputError> {
        let bad = |e: csv::Error| format!("not a readable CSV file: {e}");
        let mut reader = csv::ReaderBuilder::new()
            .from_path(&self.path)
            .map_err(|e| self.refuse(bad(e)))?;
        let header = reader.headers().map_err(|e| self.refuse(bad(e)))?.clone();
        // A file that is no table (`/proc/self/environ`, a binary) is refused without echoing
        // its first line, which may hold secrets.
        if header.iter().any(|h| h.chars().any(char::is_control)) {
            return Err(self.refuse(
                "is not a CSV scores file: its first line holds control characters (not shown)"
                    .into(),
            ));
        }
        self.check_unique_columns(header.iter())?;
        let position = |wanted: &str| header.iter().position(|h| h == wanted).expect("checked");
        let (key_at, score_at) = (position(&self.key), position(SCORE_COLUMN));
        let mut record = csv::StringRecord::new();
        loop {
            match reader.read_record(&mut record) {
                Ok(true) => {}
                Ok(false) => break,
                Err(e) => return Err(self.refuse(bad(e))),
            }
            let line = record.position().map_or(0, |p| p.line());
            let key = record.get(key_at).unwrap_or_default();
            let text = record.get(score_at).unwrap_or_default().trim();
            if key.is_empty() {
                return Err(self.refuse(format!("line {line}: the key `{}` is empty", self.key)));
            }
            let score = text.parse::<f64>().map_err(|_| {
                self.refuse(format!(
                    "line {line} (key `{}`): the score `{}` is not a number",
                    runfn_core::error::shown(&key.escape_debug().to_string()),
                    runfn_core::error::shown(&text.escape_debug().to_string())
                ))
            })?;
            self.add(wanted, key, score, Place::Line(line))?;
        }
        Ok(())
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
        let split = keys(&["a", "b"]);
        let (file, scores) = ScoresFile::read(
            &csv(dir.path(), "id,score\nb,0.25\na,0.75\n"),
            "id",
            &split,
            "test",
        )
        .unwrap();
        assert_eq!(scores, [0.75, 0.25]);
        assert_eq!(file.rows(), 2);
    }

    #[test]
    fn other_rows_missing_rows_and_bad_scores_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = |text: &str, split: &[&str]| -> String {
            ScoresFile::read(&csv(dir.path(), text), "id", &keys(split), "test")
                .unwrap_err()
                .to_string()
        };
        let other = err("id,score\na,0.5\nz,0.5\n", &["a"]);
        assert!(
            other.contains("line 3: the key `z` is not a row of the `test` split"),
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
