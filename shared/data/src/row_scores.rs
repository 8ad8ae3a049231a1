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
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, StringArray, UInt64Array,
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
        let mut fields = vec![Field::new("row", DataType::UInt64, false)];
        let mut columns: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from(self.rows.clone()))];
        if let Some(keys) = &self.keys {
            fields.push(Field::new("key", DataType::Utf8, false));
            columns.push(Arc::new(StringArray::from_iter_values(keys)));
        }
        fields.push(Field::new("label", DataType::Boolean, false));
        columns.push(Arc::new(BooleanArray::from(self.labels.clone())));
        fields.push(Field::new("score", DataType::Float64, false));
        columns.push(Arc::new(Float64Array::from(self.scores.clone())));
        for (column, values) in &self.slices {
            fields.push(Field::new(
                format!("{SLICE_PREFIX}{column}"),
                DataType::Utf8,
                false,
            ));
            columns.push(Arc::new(StringArray::from_iter_values(values)));
        }
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(schema.clone(), columns)?;
        let metadata = [
            ("runfn.format", FORMAT.to_string()),
            ("runfn.split", self.split.clone()),
            ("runfn.rows_blake3", self.rows_blake3.clone()),
            (
                "runfn.key",
                self.key_column.clone().unwrap_or_else(|| "row".into()),
            ),
        ]
        .into_iter()
        .map(|(k, v)| KeyValue::new(k.to_string(), v))
        .collect();
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_key_value_metadata(Some(metadata))
            .build();
        let mut writer = ArrowWriter::try_new(Vec::new(), schema, Some(properties))?;
        writer.write(&batch)?;
        writer.into_inner()
    }

    /// Reads a file `write` made. Every way it can be wrong names the file (and the row).
    pub fn read(path: &Path) -> Result<RowScores, DataError> {
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
            .build()
            .map_err(|e| bad(format!("not a readable Parquet file: {e}")))?;
        let mut out = RowScores {
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
        let mut keys = Vec::new();
        for batch in reader {
            let batch = batch.map_err(|e| bad(format!("truncated or corrupt: {e}")))?;
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
            let first = out.scores.len();
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
            if out.key_column.is_some() {
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
            if let Some(i) = out.scores[first..].iter().position(|s| !s.is_finite()) {
                let row = out.rows[first + i];
                return Err(bad(format!(
                    "row {row}: score is {}, not a finite number",
                    out.scores[first + i]
                )));
            }
            if let Some(i) = out.scores[first..]
                .iter()
                .position(|s| !(0.0..=1.0).contains(s))
            {
                let row = out.rows[first + i];
                return Err(bad(format!(
                    "row {row}: score {} is not a probability in [0, 1]",
                    out.scores[first + i]
                )));
            }
        }
        if out.key_column.is_some() {
            out.keys = Some(keys);
        }
        Ok(out)
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
