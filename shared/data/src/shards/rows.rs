//! A split's rows digest: blake3 over the rows themselves, in shard order, so two evaluations
//! can prove they scored the same rows whatever the shard file names, sizes or compression.
//!
//! `runfn-rows-v2` (written since shardify records `rows_format`): blake3 over
//! `runfn-rows-v2\n`, the row count (u64 LE), then per column `name\0type\n` and the column's
//! three stream hashes (values, lengths, null rows; see `column_digest`).
//!
//! `runfn-rows-v1` (indexes without `rows_format`; still recomputed for them): bytes hashed
//! `runfn-rows-v1\n`, each column as `name\0type\n`, then for every row and column `0x00` for a
//! null, else `0x01`, the value's text length (u32, little-endian) and its text (numbers,
//! dates and booleans in Arrow's display form).
//!
//! Either way length prefixes make the encoding unambiguous and the header makes a renamed or
//! retyped column another digest.

use std::ops::Range;
use std::path::Path;

use arrow::array::RecordBatch;
use rayon::prelude::*;

use crate::error::DataError;
use crate::read::Snapshot;
use crate::shards::column_digest::ColumnDigest;
use crate::shards::index::ShardIndex;
use crate::shards::value_text::{SHORT_TEXT, ValueText};
use crate::source::{FileFormat, SourceFile};
use crate::types::{Column, arrow_schema};

/// The format shardify writes.
pub const ROWS_FORMAT: &str = "runfn-rows-v2";
/// The first format: the one of every index without `rows_format`.
pub const ROWS_FORMAT_V1: &str = "runfn-rows-v1";

/// Rows whose bytes are built by one task.
const PIECE_ROWS: usize = 4 << 10;

#[derive(Debug, Clone)]
pub struct RowsDigest {
    /// The header hashed (v1: and every row since).
    hasher: blake3::Hasher,
    /// v2: each column's streams; `None` for v1.
    columns: Option<Vec<ColumnDigest>>,
    /// v2: the columns, named in `finish`.
    names: Vec<Column>,
    pub rows: u64,
}

impl RowsDigest {
    /// The digest shardify writes (`ROWS_FORMAT`).
    pub fn new(columns: &[Column]) -> RowsDigest {
        RowsDigest::v2(columns)
    }

    /// The digest of `format` (`None`: an index written before formats were recorded, v1).
    pub fn of_format(columns: &[Column], format: Option<&str>) -> Result<RowsDigest, String> {
        match format.unwrap_or(ROWS_FORMAT_V1) {
            ROWS_FORMAT => Ok(RowsDigest::v2(columns)),
            ROWS_FORMAT_V1 => Ok(RowsDigest::v1(columns)),
            other => Err(format!(
                "rows format `{other}` is not one this build knows ({ROWS_FORMAT_V1}, {ROWS_FORMAT})"
            )),
        }
    }

    pub fn format(&self) -> &'static str {
        match self.columns {
            Some(_) => ROWS_FORMAT,
            None => ROWS_FORMAT_V1,
        }
    }

    fn v1(columns: &[Column]) -> RowsDigest {
        let mut hasher = blake3::Hasher::new();
        hasher.update(ROWS_FORMAT_V1.as_bytes());
        hasher.update(b"\n");
        hash_columns(&mut hasher, columns);
        RowsDigest {
            hasher,
            columns: None,
            names: Vec::new(),
            rows: 0,
        }
    }

    fn v2(columns: &[Column]) -> RowsDigest {
        let mut hasher = blake3::Hasher::new();
        hasher.update(ROWS_FORMAT.as_bytes());
        hasher.update(b"\n");
        RowsDigest {
            hasher,
            columns: Some(vec![ColumnDigest::new(); columns.len()]),
            names: columns.to_vec(),
            rows: 0,
        }
    }

    /// Adds `batch`'s rows, in order. v2: every column's streams on their own task. v1: the
    /// bytes of pieces of rows are built on every core and hashed in order, which is the digest
    /// of one pass over the rows (blake3 is a stream: how the bytes are cut into updates does
    /// not change it).
    pub fn update(&mut self, batch: &RecordBatch) {
        if let Some(columns) = &mut self.columns {
            let first_row = self.rows;
            columns
                .par_iter_mut()
                .zip(batch.columns().par_iter())
                .for_each(|(digest, array)| digest.update(array, first_row));
            self.rows += batch.num_rows() as u64;
            return;
        }
        let rows = batch.num_rows();
        // A window of pieces at a time, so the bytes waiting to be hashed stay a few MiB.
        let window = PIECE_ROWS * rayon::current_num_threads().max(1);
        let mut start = 0;
        while start < rows {
            let len = window.min(rows - start);
            let slice = batch.slice(start, len);
            let texts: Vec<ValueText> = slice.columns().par_iter().map(ValueText::of).collect();
            let pieces: Vec<Vec<u8>> = (0..len.div_ceil(PIECE_ROWS))
                .into_par_iter()
                .map(|piece| {
                    let first = piece * PIECE_ROWS;
                    encode_rows(&texts, first..(first + PIECE_ROWS).min(len))
                })
                .collect();
            for piece in &pieces {
                self.hasher.update(piece);
            }
            start += len;
        }
        self.rows += rows as u64;
    }

    /// 64 hex characters.
    pub fn finish(&self) -> String {
        let Some(columns) = &self.columns else {
            return self.hasher.finalize().to_hex().to_string();
        };
        let mut hasher = self.hasher.clone();
        hasher.update(&self.rows.to_le_bytes());
        for (column, digest) in self.names.iter().zip(columns) {
            hash_columns(&mut hasher, std::slice::from_ref(column));
            hasher.update(&digest.finish());
        }
        hasher.finalize().to_hex().to_string()
    }
}

/// Each column as `name\0type\n`.
fn hash_columns(hasher: &mut blake3::Hasher, columns: &[Column]) {
    for column in columns {
        hasher.update(column.name.as_bytes());
        hasher.update(b"\0");
        hasher.update(column.column_type.name().as_bytes());
        hasher.update(b"\n");
    }
}

/// The hashed bytes of `rows`: per row and column a null mark, or a value mark, the text's
/// length and the text.
fn encode_rows(texts: &[ValueText], rows: Range<usize>) -> Vec<u8> {
    let text_bytes: usize = texts.iter().map(|text| text.text_bytes(rows.clone())).sum();
    // The last value's fixed-size copy may reach SHORT_TEXT bytes past the end: room for it,
    // so the buffer is never grown (and copied) for the last few bytes.
    let mut bytes = Vec::with_capacity(text_bytes + rows.len() * texts.len() * 5 + SHORT_TEXT);
    for row in rows {
        for text in texts {
            text.append(row, &mut bytes);
        }
    }
    bytes
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
        file_columns: None,
        batch_rows: crate::read::BATCH_ROWS,
    };
    let mut digest = RowsDigest::of_format(&index.columns, entry.rows_format.as_deref())
        .map_err(|e| DataError::file(dir.join(crate::shards::INDEX_NAME), e))?;
    for file in 0..snapshot.files.len() {
        for typed in snapshot.read_file(file)? {
            digest.update(&typed?.batch);
        }
    }
    Ok((digest.finish(), digest.rows))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::types::ColumnType;

    /// The digest is the spec's bytes hashed in one pass, whatever the pieces and windows: a
    /// batch longer than a window, with nulls in both columns, against the bytes built by hand.
    #[test]
    fn digest_is_the_documented_bytes_in_one_pass() {
        let rows = PIECE_ROWS * rayon::current_num_threads().max(1) * 2 + 123;
        let ids: Vec<Option<i64>> = (0..rows as i64)
            .map(|i| (i % 11 != 0).then_some(i - 500))
            .collect();
        let notes: Vec<Option<String>> = (0..rows)
            .map(|i| (i % 7 != 0).then(|| "é".repeat(i % 4)))
            .collect();
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, true),
                Field::new("note", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from(ids.clone())) as ArrayRef,
                Arc::new(StringArray::from(notes.clone())),
            ],
        )
        .unwrap();
        let columns = vec![
            Column {
                name: "id".into(),
                column_type: ColumnType::Int64,
            },
            Column {
                name: "note".into(),
                column_type: ColumnType::String,
            },
        ];
        let mut digest = RowsDigest::of_format(&columns, None).unwrap();
        digest.update(&batch.slice(0, 1000));
        digest.update(&batch.slice(1000, rows - 1000));

        let mut bytes = b"runfn-rows-v1\nid\0int64\nnote\0string\n".to_vec();
        let mut value = |text: Option<String>| match text {
            None => bytes.push(0),
            Some(text) => {
                bytes.push(1);
                bytes.extend_from_slice(&(text.len() as u32).to_le_bytes());
                bytes.extend_from_slice(text.as_bytes());
            }
        };
        for (id, note) in ids.into_iter().zip(notes) {
            value(id.map(|id| id.to_string()));
            value(note);
        }
        assert_eq!(digest.rows, rows as u64);
        assert_eq!(digest.finish(), blake3::hash(&bytes).to_hex().to_string());
    }
}
