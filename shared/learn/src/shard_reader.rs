//! Reads only the needed columns of one Parquet shard, batch by batch, with errors that name the
//! shard (a truncated or corrupt file is reported, never a panic).

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use arrow::array::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

const BATCH_ROWS: usize = 65_536;

#[derive(Debug)]
pub struct ShardReader {
    path: PathBuf,
    reader: ParquetRecordBatchReader,
    next_row: u64,
}

impl ShardReader {
    /// Opens `path` reading `columns`; a column the shard lacks is an error naming both.
    pub fn open(path: &Path, columns: &[&str]) -> Result<ShardReader> {
        let file = File::open(path).with_context(|| format!("{}", path.display()))?;
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .map_err(|e| anyhow!("{}: not a readable Parquet shard: {e}", path.display()))?;
        let schema = builder.schema().clone();
        let mut roots = Vec::with_capacity(columns.len());
        for name in columns {
            let index = schema.index_of(name).map_err(|_| {
                anyhow!(
                    "{}: has no column `{name}` (schema mismatch; the shard has: {})",
                    path.display(),
                    schema
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })?;
            roots.push(index);
        }
        roots.sort_unstable();
        roots.dedup();
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
        let reader = builder
            .with_projection(mask)
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        Ok(ShardReader {
            path: path.to_path_buf(),
            reader,
            next_row: 1,
        })
    }

    /// The next batch and the 1-based row number of its first row, or None at the end.
    pub fn next_batch(&mut self) -> Result<Option<(RecordBatch, u64)>> {
        match self.reader.next() {
            None => Ok(None),
            Some(Err(e)) => Err(anyhow!(
                "{}: near row {}: cannot decode: {e}",
                self.path.display(),
                self.next_row
            )),
            Some(Ok(batch)) => {
                let first = self.next_row;
                self.next_row += batch.num_rows() as u64;
                Ok(Some((batch, first)))
            }
        }
    }
}
