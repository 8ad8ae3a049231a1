//! The predictions file: Parquet written a row group at a time into a temporary file beside the
//! target and renamed into place (or uploaded, for a store URL) once whole.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use runfn_core::InputError;
use runfn_core::atomic::{readable_by_all, replaceable_target};
use runfn_data::read::Snapshot;

/// `runfn-predictions-v1`: row, the key columns, score, model, model_blake3.
pub const FORMAT: &str = "runfn-predictions-v1";

pub struct Predictions {
    target: String,
    local: PathBuf,
    temp: tempfile::NamedTempFile,
    writer: ArrowWriter<std::fs::File>,
    schema: SchemaRef,
    keys: Vec<String>,
    model: String,
    model_blake3: String,
    rows: u64,
}

/// What was written: its rows and the file's blake3.
pub struct Written {
    pub rows: u64,
    pub blake3: String,
}

impl Predictions {
    /// Starts the file for `target` (a path, or a store URL written through the local cache).
    pub fn create(
        target: &str,
        snapshot: &Snapshot,
        keys: &[String],
        model: &str,
        model_blake3: &str,
        row_group_rows: usize,
    ) -> Result<Predictions> {
        let named = match runfn_storage::is_remote(target) {
            true => runfn_storage::staged_path(target),
            false => PathBuf::from(target),
        };
        // A symlink writes its target; a FIFO, socket or device (`/dev/null`) is refused rather
        // than replaced by a regular file, as every other tool's output flag does.
        let local =
            replaceable_target(&named).map_err(|e| InputError::field("--out", e.to_string()))?;
        let folder = match local.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        runfn_core::paths::create_dir_all(&folder)
            .map_err(|e| InputError::field("--out", e.to_string()))?;
        let temp = tempfile::Builder::new()
            .prefix(".predict.tmp")
            // Predictions are data to share, like every other output: 0644, not tempfile's 0600.
            .permissions(readable_by_all())
            .tempfile_in(&folder)
            .map_err(|e| InputError::field("--out", format!("{}: {e}", folder.display())))?;
        let mut fields = vec![Field::new("row", DataType::UInt64, false)];
        for key in keys {
            let field = snapshot.schema.field_with_name(key)?;
            fields.push(Field::new(key, field.data_type().clone(), true));
        }
        fields.push(Field::new("score", DataType::Float64, false));
        fields.push(Field::new("model", DataType::Utf8, false));
        fields.push(Field::new("model_blake3", DataType::Utf8, false));
        let schema = Arc::new(Schema::new(fields));
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::default()))
            .set_max_row_group_row_count(Some(row_group_rows))
            .set_key_value_metadata(Some(vec![
                KeyValue::new("runfn.format".to_string(), FORMAT.to_string()),
                KeyValue::new("runfn.model".to_string(), model.to_string()),
                KeyValue::new("runfn.model_blake3".to_string(), model_blake3.to_string()),
            ]))
            .build();
        let file = temp
            .reopen()
            .with_context(|| temp.path().display().to_string())?;
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(properties))?;
        Ok(Predictions {
            target: target.to_string(),
            local,
            temp,
            writer,
            schema,
            keys: keys.to_vec(),
            model: model.to_string(),
            model_blake3: model_blake3.to_string(),
            rows: 0,
        })
    }

    /// Appends the scores of one batch of snapshot rows, with their keys.
    pub fn push(&mut self, batch: &RecordBatch, scores: &[f64]) -> Result<()> {
        let n = scores.len();
        let mut columns: Vec<ArrayRef> = vec![Arc::new(UInt64Array::from_iter_values(
            self.rows..self.rows + n as u64,
        ))];
        for key in &self.keys {
            let column = batch
                .column_by_name(key)
                .with_context(|| format!("the snapshot's batch lacks its key column `{key}`"))?;
            columns.push(column.clone());
        }
        columns.push(Arc::new(Float64Array::from(scores.to_vec())));
        columns.push(Arc::new(StringArray::from(vec![self.model.as_str(); n])));
        columns.push(Arc::new(StringArray::from(vec![
            self.model_blake3.as_str();
            n
        ])));
        self.writer
            .write(&RecordBatch::try_new(self.schema.clone(), columns)?)?;
        self.rows += n as u64;
        Ok(())
    }

    /// Ends the row group being written here, whatever its size.
    pub fn end_row_group(&mut self) -> Result<()> {
        Ok(self.writer.flush()?)
    }

    /// Closes the file, syncs it, puts it in place (and in the store) and hashes it.
    pub fn finish(self) -> Result<Written> {
        let file = self.writer.into_inner()?;
        file.sync_all()
            .with_context(|| self.temp.path().display().to_string())?;
        drop(file);
        // The target may have become a special file while the rows were scored.
        replaceable_target(&self.local).map_err(|e| InputError::field("--out", e.to_string()))?;
        self.temp.persist(&self.local).map_err(|e| {
            InputError::field("--out", format!("{}: {}", self.local.display(), e.error))
        })?;
        if let Some(parent) = self.local.parent().filter(|p| !p.as_os_str().is_empty())
            && let Ok(dir) = std::fs::File::open(parent)
        {
            let _ = dir.sync_all();
        }
        if runfn_storage::is_remote(&self.target) {
            runfn_storage::Remote::parse(&self.target)?.upload_file(&self.local)?;
        }
        Ok(Written {
            rows: self.rows,
            blake3: runfn_core::side_file::blake3_bounded(&self.local, u64::MAX)?,
        })
    }
}
