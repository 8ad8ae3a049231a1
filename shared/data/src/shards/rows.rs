//! A split's rows digest: blake3 over the rows themselves, in shard order, so two evaluations
//! can prove they scored the same rows whatever the shard file names, sizes or compression.
//!
//! Bytes hashed: `runfn-rows-v1\n`, each column as `name\0type\n`, then for every row and column
//! `0x00` for a null, else `0x01`, the value's text length (u32, little-endian) and its text
//! (numbers, dates and booleans in Arrow's display form). Length prefixes make the encoding
//! unambiguous; the header makes a renamed or retyped column another digest.

use std::path::Path;

use arrow::array::{Array, RecordBatch};

use crate::error::DataError;
use crate::read::Snapshot;
use crate::shards::index::ShardIndex;
use crate::source::{FileFormat, SourceFile};
use crate::types::{Column, arrow_schema};
use crate::values::text_array;

pub const ROWS_FORMAT: &str = "runfn-rows-v1";

#[derive(Debug, Clone)]
pub struct RowsDigest {
    hasher: blake3::Hasher,
    pub rows: u64,
}

impl RowsDigest {
    pub fn new(columns: &[Column]) -> RowsDigest {
        let mut hasher = blake3::Hasher::new();
        hasher.update(ROWS_FORMAT.as_bytes());
        hasher.update(b"\n");
        for column in columns {
            hasher.update(column.name.as_bytes());
            hasher.update(b"\0");
            hasher.update(column.column_type.name().as_bytes());
            hasher.update(b"\n");
        }
        RowsDigest { hasher, rows: 0 }
    }

    /// Adds `batch`'s rows, in order.
    pub fn update(&mut self, batch: &RecordBatch) {
        let texts: Vec<_> = batch.columns().iter().map(text_array).collect();
        let mut buffer = Vec::new();
        for row in 0..batch.num_rows() {
            buffer.clear();
            for text in &texts {
                if text.is_valid(row) {
                    let value = text.value(row).as_bytes();
                    buffer.push(1);
                    buffer.extend_from_slice(&(value.len() as u32).to_le_bytes());
                    buffer.extend_from_slice(value);
                } else {
                    buffer.push(0);
                }
            }
            self.hasher.update(&buffer);
        }
        self.rows += batch.num_rows() as u64;
    }

    /// 64 hex characters.
    pub fn finish(&self) -> String {
        self.hasher.finalize().to_hex().to_string()
    }
}

/// The rows digest of `split` recomputed from its shards in `dir`, read in index order.
pub fn split_rows_digest(
    dir: &Path,
    index: &ShardIndex,
    split: &str,
) -> Result<(String, u64), DataError> {
    let entry = index.splits.get(split).ok_or_else(|| {
        DataError::file(
            dir.join(crate::shards::INDEX_NAME),
            format!("has no split `{split}`"),
        )
    })?;
    let snapshot = Snapshot {
        root: dir.to_path_buf(),
        files: entry
            .shards
            .iter()
            .map(|shard| SourceFile {
                path: dir.join(&shard.path),
                format: FileFormat::Parquet,
                bytes: shard.bytes,
            })
            .collect(),
        columns: index.columns.clone(),
        schema: arrow_schema(&index.columns),
    };
    let mut digest = RowsDigest::new(&index.columns);
    for file in 0..snapshot.files.len() {
        for typed in snapshot.read_file(file)? {
            digest.update(&typed?.batch);
        }
    }
    Ok((digest.finish(), digest.rows))
}
