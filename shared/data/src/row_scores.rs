//! Per-row scores of one model on one split: the file `evaluate` writes and `gate` pairs.
//!
//! One Parquet file, a row per scored row in the split's rows-digest order:
//! `row` (UInt64, the position in that order), `key` (Utf8, only when a key column is declared),
//! `label` (Boolean), `score` (Float64), and one Utf8 column `slice:<column>` per slice column
//! with each row's value as text. The file's key-value metadata names the format, the split, the
//! rows digest and the key. Two files pair when they hold the same keys with the same labels.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, BooleanBuilder, Float64Builder, StringBuilder,
    UInt64Builder,
};
use arrow::datatypes::{DataType, Field, Float64Type, Schema, UInt64Type};
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::DataError;

pub const FORMAT: &str = "runfn-row-scores-v1";
const SLICE_PREFIX: &str = "slice:";

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RowScores {
    pub split: String,
    pub rows_blake3: String,
    /// The declared key column's name, when the rows are keyed by it rather than by position.
    pub key_column: Option<String>,
    /// Position in the split's rows-digest order.
    pub rows: Vec<u64>,
    /// The key column's values as text (with `key_column`).
    pub keys: Option<Vec<String>>,
    pub labels: Vec<bool>,
    pub scores: Vec<f64>,
    /// Slice column → each row's value as text.
    pub slices: Vec<(String, Vec<String>)>,
}

impl RowScores {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    /// Writes the file atomically and returns its blake3.
    pub fn write(&self, path: &Path) -> Result<String, DataError> {
        let bytes = self.to_parquet().map_err(|e| DataError::file(path, e))?;
        runfn_core::atomic::write_bytes_atomic(path, &bytes)
            .map_err(|e| DataError::file(path, e))?;
        Ok(blake3::hash(&bytes).to_hex().to_string())
    }

    fn to_parquet(&self) -> Result<Vec<u8>, parquet::errors::ParquetError> {
        let mut writer = RowScoresWriter::new(
            Vec::new(),
            &self.split,
            self.key_column.as_deref(),
            self.slices.iter().map(|(c, _)| c.clone()).collect(),
        )?;
        for (i, &row) in self.rows.iter().enumerate() {
            writer.push(
                row,
                self.keys.as_ref().map(|k| k[i].as_str()),
                self.labels[i],
                self.scores[i],
                self.slices.iter().map(|(_, v)| v[i].as_str()),
            )?;
        }
        writer.finish(&self.rows_blake3)
    }

    /// Reads a file `write` made. Every way it can be wrong names the file (and the row).
    pub fn read(path: &Path) -> Result<RowScores, DataError> {
        let mut out: Option<RowScores> = None;
        RowScores::read_each(path, |chunk| {
            match &mut out {
                None => out = Some(chunk),
                Some(out) => out.append(chunk),
            }
            Ok(())
        })?;
        out.ok_or_else(|| DataError::file(path, "holds no row group"))
    }

    /// The rows of `other` after these.
    fn append(&mut self, other: RowScores) {
        self.rows.extend(other.rows);
        if let (Some(keys), Some(more)) = (&mut self.keys, other.keys) {
            keys.extend(more);
        }
        self.labels.extend(other.labels);
        self.scores.extend(other.scores);
        for ((_, values), (_, more)) in self.slices.iter_mut().zip(other.slices) {
            values.extend(more);
        }
    }

    /// The file's rows and slice columns, from its footer alone: what a reader that holds
    /// every row checks against its budget before it reads one.
    pub fn shape(path: &Path) -> Result<(u64, usize), DataError> {
        let file = std::fs::File::open(path).map_err(|source| DataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| DataError::file(path, format!("not a readable Parquet file: {e}")))?;
        let rows = builder.metadata().file_metadata().num_rows().max(0) as u64;
        let slices = builder
            .schema()
            .fields()
            .iter()
            .filter(|f| f.name().starts_with(SLICE_PREFIX))
            .count();
        Ok((rows, slices))
    }

    /// Reads a file `write` made a row group at a time: `each` gets every group's rows, with
    /// the file's split, digest and key, in order (the first call, even for a file of no rows).
    /// Every way the file can be wrong names it (and the row).
    pub fn read_each(
        path: &Path,
        mut each: impl FnMut(RowScores) -> Result<(), DataError>,
    ) -> Result<(), DataError> {
        let bad = |message: String| DataError::file(path, message);
        let file = std::fs::File::open(path).map_err(|source| DataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
        let metadata: std::collections::BTreeMap<String, String> = builder
            .metadata()
            .file_metadata()
            .key_value_metadata()
            .into_iter()
            .flatten()
            .filter_map(|kv| Some((kv.key.clone(), kv.value.clone()?)))
            .collect();
        if metadata.get("runfn.format").map(String::as_str) != Some(FORMAT) {
            return Err(bad(format!("is not a {FORMAT} file (no runfn.format)")));
        }
        let schema = builder.schema().clone();
        let reader = builder
            .with_batch_size(CHUNK_ROWS)
            .build()
            .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
        let empty = RowScores {
            split: metadata.get("runfn.split").cloned().unwrap_or_default(),
            rows_blake3: metadata
                .get("runfn.rows_blake3")
                .cloned()
                .unwrap_or_default(),
            key_column: metadata.get("runfn.key").filter(|k| *k != "row").cloned(),
            slices: schema
                .fields()
                .iter()
                .filter_map(|f| f.name().strip_prefix(SLICE_PREFIX))
                .map(|c| (c.to_string(), Vec::new()))
                .collect(),
            ..RowScores::default()
        };
        let mut batches = 0;
        for batch in reader {
            let batch = batch.map_err(|e| bad(format!("truncated or corrupt: {e}")))?;
            let mut out = empty.clone();
            if out.key_column.is_some() {
                out.keys = Some(Vec::new());
            }
            read_batch(&batch, &mut out, &bad)?;
            each(out)?;
            batches += 1;
        }
        if batches == 0 {
            let mut out = empty;
            if out.key_column.is_some() {
                out.keys = Some(Vec::new());
            }
            each(out)?;
        }
        Ok(())
    }
}

/// One record batch's rows into `out`, every column checked.
fn read_batch(
    batch: &RecordBatch,
    out: &mut RowScores,
    bad: &dyn Fn(String) -> DataError,
) -> Result<(), DataError> {
    let column = |name: &str, kind: DataType| -> Result<&ArrayRef, DataError> {
        let array = batch
            .column_by_name(name)
            .ok_or_else(|| bad(format!("has no column `{name}`")))?;
        if array.data_type() != &kind || array.null_count() > 0 {
            return Err(bad(format!(
                "column `{name}` must be non-null {kind}, found {}",
                array.data_type()
            )));
        }
        Ok(array)
    };
    out.rows.extend(
        column("row", DataType::UInt64)?
            .as_primitive::<UInt64Type>()
            .values(),
    );
    out.labels.extend(
        column("label", DataType::Boolean)?
            .as_boolean()
            .iter()
            .flatten(),
    );
    out.scores.extend(
        column("score", DataType::Float64)?
            .as_primitive::<Float64Type>()
            .values(),
    );
    if let Some(keys) = &mut out.keys {
        keys.extend(
            column("key", DataType::Utf8)?
                .as_string::<i32>()
                .iter()
                .map(|k| k.unwrap_or_default().to_string()),
        );
    }
    for (name, values) in &mut out.slices {
        let array = column(&format!("{SLICE_PREFIX}{name}"), DataType::Utf8)?;
        values.extend(
            array
                .as_string::<i32>()
                .iter()
                .map(|v| v.unwrap_or_default().to_string()),
        );
    }
    if let Some(i) = out.scores.iter().position(|s| !s.is_finite()) {
        let row = out.rows[i];
        return Err(bad(format!(
            "row {row}: score is {}, not a finite number",
            out.scores[i]
        )));
    }
    if let Some(i) = out.scores.iter().position(|s| !(0.0..=1.0).contains(s)) {
        let row = out.rows[i];
        return Err(bad(format!(
            "row {row}: score {} is not a probability in [0, 1]",
            out.scores[i]
        )));
    }
    Ok(())
}

/// Rows per row group of the file (and per batch handed to the Parquet writer). Fixed, so the
/// file's bytes follow from its rows alone, whether they came held in memory or streamed in
/// batches of any size.
const CHUNK_ROWS: usize = 65_536;

/// A row scores file written a row at a time, holding at most [`CHUNK_ROWS`] rows: what
/// `evaluate` writes while the split streams past. [`RowScores::write`] goes through it too, so
/// both give the same bytes for the same rows.
pub struct RowScoresWriter<W: std::io::Write + Send> {
    split: String,
    key_column: Option<String>,
    writer: ArrowWriter<W>,
    schema: Arc<Schema>,
    keyed: bool,
    // Builders, so a row's texts are copied into the column once, with no String of their own.
    rows: UInt64Builder,
    keys: StringBuilder,
    labels: BooleanBuilder,
    scores: Float64Builder,
    slices: Vec<StringBuilder>,
}

impl<W: std::io::Write + Send> std::fmt::Debug for RowScoresWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowScoresWriter")
            .field("pending", &self.rows.len())
            .finish()
    }
}

impl<W: std::io::Write + Send> RowScoresWriter<W> {
    /// A file of the rows of `split`, keyed by `key_column` (else by position), with a
    /// `slice:<column>` column for each of `slices`. The rows digest, known once every row has
    /// passed, goes into the footer at [`RowScoresWriter::finish`].
    pub fn new(
        out: W,
        split: &str,
        key_column: Option<&str>,
        slices: Vec<String>,
    ) -> Result<RowScoresWriter<W>, parquet::errors::ParquetError> {
        let mut fields = vec![Field::new("row", DataType::UInt64, false)];
        if key_column.is_some() {
            fields.push(Field::new("key", DataType::Utf8, false));
        }
        fields.push(Field::new("label", DataType::Boolean, false));
        fields.push(Field::new("score", DataType::Float64, false));
        for column in &slices {
            fields.push(Field::new(
                format!("{SLICE_PREFIX}{column}"),
                DataType::Utf8,
                false,
            ));
        }
        let schema = Arc::new(Schema::new(fields));
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(CHUNK_ROWS))
            .build();
        Ok(RowScoresWriter {
            split: split.to_string(),
            key_column: key_column.map(str::to_string),
            writer: ArrowWriter::try_new(out, schema.clone(), Some(properties))?,
            schema,
            keyed: key_column.is_some(),
            rows: UInt64Builder::new(),
            keys: StringBuilder::new(),
            labels: BooleanBuilder::new(),
            scores: Float64Builder::new(),
            slices: slices.iter().map(|_| StringBuilder::new()).collect(),
        })
    }

    /// One row: its position, its key (when the file is keyed), label, score and each slice
    /// column's value, in the order the slices were named.
    pub fn push<'a>(
        &mut self,
        row: u64,
        key: Option<&str>,
        label: bool,
        score: f64,
        slices: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), parquet::errors::ParquetError> {
        self.rows.append_value(row);
        if self.keyed {
            self.keys.append_value(key.unwrap_or_default());
        }
        self.labels.append_value(label);
        self.scores.append_value(score);
        for (values, value) in self.slices.iter_mut().zip(slices) {
            values.append_value(value);
        }
        if self.rows.len() == CHUNK_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), parquet::errors::ParquetError> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let mut columns: Vec<ArrayRef> = vec![Arc::new(self.rows.finish())];
        if self.keyed {
            columns.push(Arc::new(self.keys.finish()));
        }
        columns.push(Arc::new(self.labels.finish()));
        columns.push(Arc::new(self.scores.finish()));
        for values in &mut self.slices {
            columns.push(Arc::new(values.finish()));
        }
        let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
        self.writer.write(&batch)?;
        // Each chunk is a row group of its own, wherever the Parquet writer would cut.
        self.writer.flush()
    }

    /// Writes what is pending and the footer, which names the format, the split, the rows
    /// digest and the key; returns the output.
    pub fn finish(mut self, rows_blake3: &str) -> Result<W, parquet::errors::ParquetError> {
        self.flush()?;
        for (key, value) in [
            ("runfn.format", FORMAT.to_string()),
            ("runfn.split", self.split.clone()),
            ("runfn.rows_blake3", rows_blake3.to_string()),
            (
                "runfn.key",
                self.key_column.clone().unwrap_or_else(|| "row".into()),
            ),
        ] {
            self.writer
                .append_key_value_metadata(KeyValue::new(key.to_string(), value));
        }
        self.writer.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RowScores {
        RowScores {
            split: "test".into(),
            rows_blake3: "ab".repeat(32),
            key_column: None,
            rows: vec![0, 1, 2],
            keys: None,
            labels: vec![true, false, true],
            scores: vec![0.9, 0.2, 0.4],
            slices: vec![("tier".into(), vec!["a".into(), "b".into(), "a".into()])],
        }
    }

    #[test]
    fn round_trips_and_digests_what_it_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scores.parquet");
        let digest = sample().write(&path).unwrap();
        assert_eq!(
            digest,
            blake3::hash(&std::fs::read(&path).unwrap())
                .to_hex()
                .to_string()
        );
        assert_eq!(RowScores::read(&path).unwrap(), sample());
        let keyed = RowScores {
            key_column: Some("id".into()),
            keys: Some(vec!["x".into(), "y".into(), "z".into()]),
            ..sample()
        };
        keyed.write(&path).unwrap();
        assert_eq!(RowScores::read(&path).unwrap(), keyed);
    }

    /// More rows than a chunk, keyed, with a slice: the writer fed row by row gives the bytes
    /// `RowScores::write` gives, and they read back whole.
    #[test]
    fn rows_streamed_past_a_chunk_write_the_same_file() {
        let n = CHUNK_ROWS + 1_234;
        let scores = RowScores {
            split: "test".into(),
            rows_blake3: "cd".repeat(32),
            key_column: Some("id".into()),
            rows: (0..n as u64).collect(),
            keys: Some((0..n).map(|i| format!("k{i}")).collect()),
            labels: (0..n).map(|i| i % 3 == 0).collect(),
            scores: (0..n).map(|i| (i % 97) as f64 / 96.0).collect(),
            slices: vec![(
                "tier".into(),
                (0..n).map(|i| format!("t{}", i % 5)).collect(),
            )],
        };
        let held = scores.to_parquet().unwrap();
        let mut streamed =
            RowScoresWriter::new(Vec::new(), "test", Some("id"), vec!["tier".into()]).unwrap();
        for i in 0..n {
            let tier = format!("t{}", i % 5);
            streamed
                .push(
                    i as u64,
                    Some(&format!("k{i}")),
                    i % 3 == 0,
                    (i % 97) as f64 / 96.0,
                    [tier.as_str()],
                )
                .unwrap();
        }
        assert_eq!(streamed.finish(&"cd".repeat(32)).unwrap(), held);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scores.parquet");
        std::fs::write(&path, &held).unwrap();
        assert_eq!(RowScores::read(&path).unwrap(), scores);
    }

    #[test]
    fn truncated_nan_and_foreign_files_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("scores.parquet");
        sample().write(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let err = RowScores::read(&path).unwrap_err().to_string();
        assert!(
            err.contains("scores.parquet: not a readable Parquet file"),
            "{err}"
        );
        let nan = RowScores {
            scores: vec![0.9, f64::NAN, 0.4],
            ..sample()
        };
        nan.write(&path).unwrap();
        let err = RowScores::read(&path).unwrap_err().to_string();
        assert!(
            err.ends_with("row 1: score is NaN, not a finite number"),
            "{err}"
        );
        std::fs::write(&path, b"row,score\n0,0.5\n").unwrap();
        assert!(RowScores::read(&path).is_err());
    }
}
