//! Reading a snapshot as typed Arrow batches with one schema across all its files.
//!
//! A CSV value that does not parse as its column's type becomes null and is counted and
//! reported with its file and row, instead of failing the whole file or vanishing silently:
//! the batch it is in is cast column by column from text (see `csv_batches`).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use arrow::array::{Array, ArrayRef, BooleanArray, Float64Array, RecordBatch, StringArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rayon::prelude::*;
use serde::Serialize;

use crate::csv_batches::{CsvBatches, Pending};
use crate::error::DataError;
use crate::hashing_reader::{HashingReader, ReadHash};
use crate::infer::{SAMPLE_ROWS, TypeVotes};
use crate::source::{FileFormat, SourceFile, list_snapshot};
use crate::types::{Column, ColumnType, arrow_schema};

pub const BATCH_ROWS: usize = 64 * 1024;
/// Examples of bad values kept per column; the count is always exact.
const BAD_EXAMPLES: usize = 5;

/// A snapshot: its files and the one schema they are all read as.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub root: PathBuf,
    pub files: Vec<SourceFile>,
    /// The columns its batches have (those of [`Snapshot::project`], else all of the files').
    pub columns: Vec<Column>,
    pub schema: SchemaRef,
    /// Every column of the files, when `columns` is a projection of them.
    pub(crate) file_columns: Option<Vec<Column>>,
    /// Rows per batch of `read_file` and `read_piece` (see [`Snapshot::bound_batches`]).
    pub(crate) batch_rows: usize,
}

/// One batch of rows, already cast to the snapshot's schema.
#[derive(Debug, Clone)]
pub struct TypedBatch {
    pub batch: RecordBatch,
    /// Index into `Snapshot::files`.
    pub file: usize,
    /// Row number (0-based, data rows only) of the batch's first row within its file.
    pub first_row: u64,
    pub bad_values: BadValues,
}

/// A batch of one file read but not yet built and typed (see [`Snapshot::read_file_pending`]).
pub struct PendingBatch {
    batch: Pending,
    /// Index into `Snapshot::files`.
    pub file: usize,
    /// Row number (0-based, data rows only) of the batch's first row within its file.
    pub first_row: u64,
}

impl PendingBatch {
    pub fn rows(&self) -> usize {
        self.batch.rows()
    }
}

impl std::fmt::Debug for PendingBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingBatch")
            .field("file", &self.file)
            .field("first_row", &self.first_row)
            .field("rows", &self.rows())
            .finish_non_exhaustive()
    }
}

/// Rows of one file that can be read on their own: some of its Parquet row groups, or the
/// whole file (`row_groups` is `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub file: usize,
    pub row_groups: Option<std::ops::Range<usize>>,
    /// The piece's first row within its file (0-based, data rows).
    pub first_row: u64,
}

/// A value that did not parse as its column's type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BadValue {
    pub file: String,
    /// 1-based data row within the file (the CSV line is one more, for the header).
    pub row: u64,
    pub value: String,
}

/// Bad values per column: exact counts, the first few examples.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BadValues {
    pub columns: BTreeMap<String, BadColumn>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct BadColumn {
    pub count: u64,
    pub examples: Vec<BadValue>,
}

impl BadValues {
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    pub fn total(&self) -> u64 {
        self.columns.values().map(|c| c.count).sum()
    }

    fn add(&mut self, column: &str, value: BadValue) {
        let entry = self.columns.entry(column.to_string()).or_default();
        entry.count += 1;
        if entry.examples.len() < BAD_EXAMPLES {
            entry.examples.push(value);
        }
    }

    /// Merges `other`, keeping the earliest examples when both come in file order.
    pub fn merge(&mut self, other: &BadValues) {
        for (column, bad) in &other.columns {
            let entry = self.columns.entry(column.clone()).or_default();
            entry.count += bad.count;
            let room = BAD_EXAMPLES.saturating_sub(entry.examples.len());
            entry
                .examples
                .extend(bad.examples.iter().take(room).cloned());
        }
    }
}

impl Snapshot {
    /// Lists the files under `root` and settles the schema: `types` fixes some columns (from a
    /// schema file); the rest are inferred from the first `SAMPLE_ROWS` rows.
    pub fn open(root: &Path, types: &BTreeMap<String, ColumnType>) -> Result<Snapshot, DataError> {
        let snapshot = Snapshot::open_as(root, types)?;
        for name in types.keys() {
            if snapshot.column_type(name).is_none() {
                return Err(DataError::column(
                    name,
                    "is in the schema file but not in the snapshot",
                ));
            }
        }
        Ok(snapshot)
    }

    /// [`Snapshot::open`] without its check that every name in `types` is a column: for a caller
    /// whose types come from elsewhere than a schema file, and which says itself what is wrong
    /// with a name the snapshot lacks.
    pub fn open_as(
        root: &Path,
        types: &BTreeMap<String, ColumnType>,
    ) -> Result<Snapshot, DataError> {
        let files = list_snapshot(root)?;
        let (columns, has_rows) = match files[0].format {
            FileFormat::Csv => csv_columns(&files, types)?,
            FileFormat::JsonLines => json_columns(&files, types)?,
            FileFormat::Parquet => parquet_columns(&files, types)?,
        };
        // Profiling, splitting or sharding no rows "passes" every check and proves nothing.
        if !has_rows {
            return Err(match files.as_slice() {
                [only] => DataError::file(&only.path, "has no data rows"),
                _ => DataError::file(
                    root,
                    format!("has no data rows (in none of its {} files)", files.len()),
                ),
            });
        }
        let schema = arrow_schema(&columns);
        Ok(Snapshot {
            root: root.to_path_buf(),
            files,
            columns,
            schema,
            file_columns: None,
            batch_rows: crate::read::BATCH_ROWS,
        })
    }

    /// The snapshot read with only the columns named in `keep` (in the files' order; names
    /// that are no column are left out): the others are not built, parsed or decoded, which
    /// is most of the work for a caller that needs a few columns of a wide table.
    pub fn project(mut self, keep: &[&str]) -> Snapshot {
        let all = self
            .file_columns
            .take()
            .unwrap_or_else(|| self.columns.clone());
        self.columns = all
            .iter()
            .filter(|c| keep.contains(&c.name.as_str()))
            .cloned()
            .collect();
        self.schema = arrow_schema(&self.columns);
        self.file_columns = Some(all);
        self
    }

    /// The indices among `all` of the columns batches carry.
    fn kept(&self, all: &[&str]) -> Vec<usize> {
        (0..all.len())
            .filter(|&i| self.columns.iter().any(|c| c.name == all[i]))
            .collect()
    }

    /// A Parquet file's reader limited to the columns batches carry.
    fn parquet_projected(
        &self,
        builder: ParquetRecordBatchReaderBuilder<File>,
    ) -> ParquetRecordBatchReaderBuilder<File> {
        if self.file_columns.is_none() {
            return builder;
        }
        let names: Vec<&str> = builder
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        let mask = ProjectionMask::roots(builder.parquet_schema(), self.kept(&names));
        builder.with_projection(mask)
    }

    pub fn column_type(&self, name: &str) -> Option<ColumnType> {
        self.columns
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.column_type)
    }

    /// Total bytes of the snapshot's files.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.bytes).sum()
    }

    /// The batches of file `file`, in order.
    pub fn read_file(
        &self,
        file: usize,
    ) -> Result<Box<dyn Iterator<Item = Result<TypedBatch, DataError>> + Send + '_>, DataError>
    {
        self.read_file_in(file, self.batch_rows)
    }

    /// The pieces of `file` that can be read on their own, in order, as row ranges: runs of
    /// Parquet row groups of at least `min_rows` rows, so one large file can be profiled on
    /// every core; a CSV or JSON Lines file is one piece. The pieces depend on the file alone,
    /// never on the number of threads, so what is computed from them is the same on every
    /// machine.
    pub fn pieces(&self, file: usize, min_rows: u64) -> Result<Vec<Piece>, DataError> {
        let source = &self.files[file];
        if source.format != FileFormat::Parquet {
            return Ok(vec![Piece {
                file,
                row_groups: None,
                first_row: 0,
            }]);
        }
        let metadata = parquet_builder(&source.path)?.metadata().clone();
        let mut pieces = Vec::new();
        let (mut start, mut rows, mut first_row) = (0, 0u64, 0u64);
        let groups = metadata.num_row_groups();
        for group in 0..groups {
            rows += metadata.row_group(group).num_rows().max(0) as u64;
            if rows >= min_rows || group + 1 == groups {
                pieces.push(Piece {
                    file,
                    row_groups: Some(start..group + 1),
                    first_row,
                });
                (start, first_row, rows) = (group + 1, first_row + rows, 0);
            }
        }
        if pieces.is_empty() {
            pieces.push(Piece {
                file,
                row_groups: None,
                first_row: 0,
            });
        }
        Ok(pieces)
    }

    /// The batches of one piece (see [`Snapshot::pieces`]), in order.
    pub fn read_piece(
        &self,
        piece: &Piece,
    ) -> Result<Box<dyn Iterator<Item = Result<TypedBatch, DataError>> + Send + '_>, DataError>
    {
        let Some(groups) = piece.row_groups.clone() else {
            return self.read_file(piece.file);
        };
        let path = &self.files[piece.file].path;
        let reader = self
            .parquet_projected(parquet_builder(path)?)
            .with_row_groups(groups.collect())
            .with_batch_size(self.batch_rows)
            .build()
            .map_err(|e| not_parquet(path, e))?;
        Ok(self.typed_batches(Box::new(reader), piece.file, piece.first_row))
    }

    /// Like `read_file`, in batches of `batch_rows` rows (a reader with a memory budget sizes
    /// its batches by bytes, not rows).
    pub fn read_file_in(
        &self,
        file: usize,
        batch_rows: usize,
    ) -> Result<Box<dyn Iterator<Item = Result<TypedBatch, DataError>> + Send + '_>, DataError>
    {
        self.read_file_hashing(file, batch_rows, None)
    }

    /// Like `read_file_in`, and a CSV or JSON Lines file's bytes are hashed as they are read:
    /// `hash` holds the file's blake3 once its last batch is read (a Parquet file is read in
    /// pieces, not front to back, so `hash` stays empty).
    pub fn read_file_hashing(
        &self,
        file: usize,
        batch_rows: usize,
        hash: Option<&ReadHash>,
    ) -> Result<Box<dyn Iterator<Item = Result<TypedBatch, DataError>> + Send + '_>, DataError>
    {
        let pending = self.read_file_pending(file, batch_rows, hash)?;
        Ok(Box::new(pending.map(move |batch| self.finish(batch?))))
    }

    /// Like `read_file_hashing`, and a CSV batch comes with its columns still to build and
    /// type ([`PendingBatch`]): the caller builds them with [`Snapshot::finish`] on whatever
    /// thread it likes, so one file's batches are built on every core. The batches come in
    /// file order with their first rows known.
    pub fn read_file_pending(
        &self,
        file: usize,
        batch_rows: usize,
        hash: Option<&ReadHash>,
    ) -> Result<Box<dyn Iterator<Item = Result<PendingBatch, DataError>> + Send + '_>, DataError>
    {
        let batch_rows = batch_rows.max(1);
        let source = &self.files[file];
        let open = || -> Result<Box<dyn std::io::Read + Send>, DataError> {
            let file = File::open(&source.path).map_err(|e| DataError::Io {
                path: source.path.clone(),
                source: e,
            })?;
            Ok(match hash {
                Some(hash) => Box::new(HashingReader::new(file, hash.clone())),
                None => Box::new(file),
            })
        };
        let path = source.path.clone();
        let raw: Box<dyn Iterator<Item = Result<Pending, arrow::error::ArrowError>> + Send> =
            match source.format {
                FileFormat::Csv => {
                    let all = self.file_columns.as_ref().unwrap_or(&self.columns);
                    let mut batches = CsvBatches::new(open()?, all, batch_rows);
                    if let Some(all) = &self.file_columns {
                        let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
                        batches = batches
                            .projected(self.kept(&names))
                            .map_err(|e| DataError::file(&path, e))?;
                    }
                    Box::new(std::iter::from_fn(move || {
                        batches.next_pending().transpose()
                    }))
                }
                FileFormat::JsonLines => {
                    let reader = arrow::json::ReaderBuilder::new(self.schema.clone())
                        .with_batch_size(batch_rows)
                        .build(BufReader::new(open()?))
                        .map_err(|e| DataError::file(&path, e))?;
                    Box::new(reader.map(|batch| batch.map(Pending::Built)))
                }
                FileFormat::Parquet => {
                    let reader = self
                        .parquet_projected(parquet_builder(&path)?)
                        .with_batch_size(batch_rows)
                        .build()
                        .map_err(|e| not_parquet(&path, e))?;
                    Box::new(reader.map(|batch| batch.map(Pending::Built)))
                }
            };
        Ok(self.pending_batches(raw, file, 0))
    }

    /// `raw`, the batches of `file` from row `first_row` on, each with its first row, a read
    /// error described with the file's row or line.
    fn pending_batches(
        &self,
        raw: Box<dyn Iterator<Item = Result<Pending, arrow::error::ArrowError>> + Send>,
        file: usize,
        first_row: u64,
    ) -> Box<dyn Iterator<Item = Result<PendingBatch, DataError>> + Send + 'static> {
        let source = &self.files[file];
        let (path, format) = (source.path.clone(), source.format);
        let mut next_row = first_row;
        Box::new(raw.map(move |batch| {
            let batch =
                batch.map_err(|e| DataError::file(&path, describe_read_error(e, &path, format)))?;
            let first_row = next_row;
            next_row += batch.rows() as u64;
            Ok(PendingBatch {
                batch,
                file,
                first_row,
            })
        }))
    }

    /// A pending batch built and cast to the snapshot's schema, as `read_file_hashing` gives it.
    pub fn finish(&self, pending: PendingBatch) -> Result<TypedBatch, DataError> {
        let source = &self.files[pending.file];
        let batch = pending.batch.build().map_err(|e| {
            DataError::file(
                &source.path,
                describe_read_error(e, &source.path, source.format),
            )
        })?;
        self.type_batch(batch, pending.file, pending.first_row)
    }

    /// `raw`, the batches of `file` from row `first_row` on, cast to the snapshot's schema, a
    /// read error described with the file's row or line.
    fn typed_batches(
        &self,
        raw: Box<dyn Iterator<Item = Result<RecordBatch, arrow::error::ArrowError>> + Send>,
        file: usize,
        first_row: u64,
    ) -> Box<dyn Iterator<Item = Result<TypedBatch, DataError>> + Send + '_> {
        let raw = Box::new(raw.map(|batch| batch.map(Pending::Built)));
        Box::new(
            self.pending_batches(raw, file, first_row)
                .map(move |batch| self.finish(batch?)),
        )
    }

    /// About how many bytes a row of `file` takes in its file: its size over its rows (from a
    /// Parquet footer), or over the line breaks in its first MiB (CSV, JSON Lines).
    pub fn row_bytes(&self, file: usize) -> u64 {
        use std::io::Read;
        let source = &self.files[file];
        let rows = match source.format {
            FileFormat::Parquet => parquet_builder(&source.path)
                .ok()
                .map(|b| b.metadata().file_metadata().num_rows().max(1) as u64),
            FileFormat::Csv | FileFormat::JsonLines => {
                let mut head = Vec::new();
                File::open(&source.path)
                    .ok()
                    .and_then(|f| f.take(1 << 20).read_to_end(&mut head).ok())
                    .map(|read| {
                        let lines = head.iter().filter(|&&b| b == b'\n').count().max(1) as u64;
                        // Rows in the whole file at the density of its first MiB.
                        source.bytes * lines / (read as u64).max(1)
                    })
            }
        };
        (source.bytes / rows.unwrap_or(1).max(1)).max(1)
    }

    /// About how many bytes a row of `file` takes on disk ([`row_bytes`]) and in memory once
    /// read: Arrow holds about twice CSV or JSON text; a Parquet row is measured
    /// ([`memory_row_bytes`]), because its bytes on disk say little. One look at the file for
    /// both.
    ///
    /// [`row_bytes`]: Snapshot::row_bytes
    /// [`memory_row_bytes`]: Snapshot::memory_row_bytes
    pub fn row_sizes(&self, file: usize) -> Result<(u64, u64), DataError> {
        let on_disk = self.row_bytes(file).max(1);
        let decoded = match self.files[file].format {
            FileFormat::Parquet => self.memory_row_bytes(file)?.max(1),
            FileFormat::Csv | FileFormat::JsonLines => on_disk.saturating_mul(2),
        };
        Ok((on_disk, decoded))
    }

    /// Sizes the batches of `read_file` and `read_piece` so that rayon's threads, each holding
    /// its batch about `copies` times, hold no more than `memory_bytes` of rows at the widest
    /// file's decoded row size: one row at least, `BATCH_ROWS` at most. Returns the rows per
    /// batch. (At 64Ki rows whatever their width, rows of 1 MiB values made 64 GiB batches.)
    pub fn bound_batches(&mut self, memory_bytes: u64, copies: u64) -> Result<usize, DataError> {
        let mut widest = 1;
        for file in 0..self.files.len() {
            widest = widest.max(self.row_sizes(file)?.1);
        }
        let readers = rayon::current_num_threads().max(1) as u64;
        let share = memory_bytes / readers.saturating_mul(copies.max(1));
        self.batch_rows = ((share / widest) as usize).clamp(1, BATCH_ROWS);
        Ok(self.batch_rows)
    }

    /// About how many bytes a row of `file` takes once decoded: for Parquet, the most of the
    /// footer's uncompressed bytes of the columns read over the rows of its widest row group
    /// (a file of compressible 1 MiB values is a few hundred bytes a row on disk and a MiB in
    /// memory) and what its first rows decode to (values repeated through a dictionary are
    /// small in the footer); else [`row_bytes`].
    ///
    /// [`row_bytes`]: Snapshot::row_bytes
    pub fn memory_row_bytes(&self, file: usize) -> Result<u64, DataError> {
        let on_disk = self.row_bytes(file);
        let source = &self.files[file];
        if source.format != FileFormat::Parquet {
            return Ok(on_disk);
        }
        // Sixteen rows: a MiB each is still a small read.
        const PROBE_ROWS: usize = 16;
        let decoded = match self.read_file_in(file, PROBE_ROWS)?.next() {
            Some(first) => {
                let first = first?;
                (first.batch.get_array_memory_size() / first.batch.num_rows().max(1)) as u64
            }
            None => 0,
        };
        let Ok(builder) = parquet_builder(&source.path) else {
            return Ok(on_disk.max(decoded));
        };
        // Only the columns read count: a wide column the snapshot leaves out is never decoded.
        let read = |chunk: &parquet::file::metadata::ColumnChunkMetaData| {
            let name = chunk.column_path().parts().first().map(String::as_str);
            self.columns.iter().any(|c| Some(c.name.as_str()) == name)
        };
        let widest = builder
            .metadata()
            .row_groups()
            .iter()
            .filter(|group| group.num_rows() > 0)
            .map(|group| {
                let bytes: i64 = group
                    .columns()
                    .iter()
                    .filter(|chunk| read(chunk))
                    .map(|chunk| chunk.uncompressed_size().max(0))
                    .sum();
                bytes as u64 / group.num_rows() as u64
            })
            .max()
            .unwrap_or(0);
        Ok(widest.max(on_disk).max(decoded))
    }

    /// Casts a raw batch to the snapshot schema, collecting values that do not parse.
    fn type_batch(
        &self,
        batch: RecordBatch,
        file: usize,
        first_row: u64,
    ) -> Result<TypedBatch, DataError> {
        let path = &self.files[file].path;
        let mut bad_values = BadValues::default();
        let options = CastOptions {
            safe: true,
            ..Default::default()
        };
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
        for column in &self.columns {
            let raw = batch
                .column_by_name(&column.name)
                .ok_or_else(|| DataError::file(path, format!("has no column `{}`", column.name)))?;
            let target = column.column_type.data_type();
            let typed = cast_with_options(raw, &target, &options)
                .map_err(|e| DataError::file(path, format!("column `{}`: {e}", column.name)))?;
            let typed = finite(raw, typed)
                .map_err(|e| DataError::file(path, format!("column `{}`: {e}", column.name)))?;
            if typed.null_count() > raw.null_count() {
                collect_bad(raw, &typed, &column.name, path, first_row, &mut bad_values);
            }
            arrays.push(typed);
        }
        let batch = RecordBatch::try_new(self.schema.clone(), arrays)
            .map_err(|e| DataError::file(path, e))?;
        Ok(TypedBatch {
            batch,
            file,
            first_row,
            bad_values,
        })
    }
}

/// A Parquet file's reader builder (its footer read), or why the file cannot be read as one.
fn parquet_builder(path: &Path) -> Result<ParquetRecordBatchReaderBuilder<File>, DataError> {
    let file = File::open(path).map_err(|e| DataError::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| not_parquet(path, e))
}

fn not_parquet(path: &Path, error: parquet::errors::ParquetError) -> DataError {
    DataError::file(path, format!("not a readable Parquet file: {error}"))
}

/// `typed` with the infinities that a text value (`inf`, `1e400`) was cast to made null, so that
/// they are bad values like any other that is no number a column can hold: type inference does
/// not count them as floats either, and a feature must be finite.
fn finite(raw: &ArrayRef, typed: ArrayRef) -> Result<ArrayRef, arrow::error::ArrowError> {
    let from_text = matches!(
        raw.data_type(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    );
    let Some(floats) = typed.as_any().downcast_ref::<Float64Array>() else {
        return Ok(typed);
    };
    if !from_text || !floats.iter().flatten().any(f64::is_infinite) {
        return Ok(typed);
    }
    let infinite: BooleanArray = floats.iter().map(|v| v.map(f64::is_infinite)).collect();
    arrow::compute::nullif(&typed, &infinite)
}

/// Values that were present before the cast and null after it did not parse.
fn collect_bad(
    raw: &ArrayRef,
    typed: &ArrayRef,
    column: &str,
    path: &Path,
    first_row: u64,
    bad: &mut BadValues,
) {
    let text = cast_with_options(raw, &DataType::Utf8, &CastOptions::default()).ok();
    let text = text
        .as_ref()
        .and_then(|t| t.as_any().downcast_ref::<StringArray>());
    // A value no text can show (a Parquet timestamp beyond the microseconds the snapshot keeps)
    // is still a bad value: shown as its stored number and type.
    let stored = cast_with_options(raw, &DataType::Int64, &CastOptions::default()).ok();
    let stored = stored
        .as_ref()
        .and_then(|n| n.as_any().downcast_ref::<arrow::array::Int64Array>());
    for row in 0..raw.len() {
        if raw.is_valid(row) && typed.is_null(row) {
            let value = match text.filter(|t| t.is_valid(row)) {
                Some(t) => t.value(row).to_string(),
                None => match stored.filter(|n| n.is_valid(row)) {
                    Some(n) => format!("{} (stored as {})", n.value(row), raw.data_type()),
                    None => format!("a {} value", raw.data_type()),
                },
            };
            if value.trim().is_empty() {
                continue;
            }
            let file = path.display().to_string();
            bad.add(
                column,
                BadValue {
                    file,
                    row: first_row + row as u64 + 1,
                    value,
                },
            );
        }
    }
}

/// arrow's readers say neither the row of a ragged CSV record nor the line of bad JSON; on such
/// an error the file is scanned again to find and name it.
fn describe_read_error(error: arrow::error::ArrowError, path: &Path, format: FileFormat) -> String {
    let message = error.to_string();
    let located = match format {
        FileFormat::Csv if message.contains("incorrect number of fields") => {
            locate_ragged_csv(path)
        }
        FileFormat::JsonLines => locate_bad_json_line(path),
        _ => None,
    };
    located.unwrap_or(message)
}

/// The first record whose field count differs from the header's.
fn locate_ragged_csv(path: &Path) -> Option<String> {
    let reader = csv::ReaderBuilder::new().from_path(path).ok()?;
    for record in reader.into_records() {
        if let Err(err) = record
            && let csv::ErrorKind::UnequalLengths {
                pos: Some(pos),
                expected_len,
                len,
            } = err.kind()
        {
            return Some(format!(
                "ragged CSV: data row {} (line {}) has {len} fields, the header has {expected_len}",
                pos.record(),
                pos.line()
            ));
        }
    }
    None
}

/// The first line that is not one JSON object.
fn locate_bad_json_line(path: &Path) -> Option<String> {
    use std::io::BufRead;
    let reader = BufReader::new(File::open(path).ok()?);
    for (index, line) in reader.split(b'\n').enumerate() {
        let line = line.ok()?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<serde_json::Value>(&line) {
            Ok(serde_json::Value::Object(_)) => {}
            Ok(other) => {
                return Some(format!(
                    "line {}: expected one JSON object per line, found {}",
                    index + 1,
                    runfn_core::error::json_type_name(&other)
                ));
            }
            Err(err) => return Some(format!("line {}: not valid JSON: {err}", index + 1)),
        }
    }
    None
}

fn csv_header(path: &Path) -> Result<Vec<String>, DataError> {
    let mut reader = csv::Reader::from_path(path).map_err(|e| DataError::file(path, e))?;
    let header = reader.headers().map_err(|e| DataError::file(path, e))?;
    let names: Vec<String> = header.iter().map(str::to_string).collect();
    if names.is_empty() || names.iter().all(String::is_empty) {
        return Err(DataError::file(path, "has no header row"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for name in &names {
        if name.is_empty() {
            return Err(DataError::file(path, "the header has an empty column name"));
        }
        if !seen.insert(name) {
            return Err(DataError::file(
                path,
                format!("the header names `{name}` twice"),
            ));
        }
    }
    Ok(names)
}

/// The columns, and whether any file has a data row.
fn csv_columns(
    files: &[SourceFile],
    types: &BTreeMap<String, ColumnType>,
) -> Result<(Vec<Column>, bool), DataError> {
    let names = csv_header(&files[0].path)?;
    for file in &files[1..] {
        let other = csv_header(&file.path)?;
        if other != names {
            return Err(DataError::file(
                &file.path,
                format!("its header differs from {}'s", files[0].path.display()),
            ));
        }
    }
    let mut votes = vec![TypeVotes::default(); names.len()];
    let mut sample = CsvSample::new(files);
    let mut block = sample.next_block()?;
    while !block.is_empty() {
        // The next block is parsed while this one's values are voted on, column by column, on
        // the other cores: sampling was the serial start of every run on a CSV snapshot.
        let (next, ()) = rayon::join(
            || sample.next_block(),
            || {
                votes.par_iter_mut().enumerate().for_each(|(column, vote)| {
                    for record in &block {
                        if let Some(value) = record.get(column) {
                            vote.add(value);
                        }
                    }
                })
            },
        );
        block = next?;
    }
    let sampled = sample.rows;
    let columns = names
        .into_iter()
        .zip(votes)
        .map(|(name, vote)| {
            let column_type = types.get(&name).copied().unwrap_or_else(|| vote.decide());
            Column { name, column_type }
        })
        .collect();
    Ok((columns, sampled > 0))
}

/// The first `SAMPLE_ROWS` rows of a CSV snapshot, over its files in order, in blocks.
struct CsvSample<'a> {
    files: std::slice::Iter<'a, SourceFile>,
    reader: Option<(&'a SourceFile, csv::Reader<File>)>,
    rows: usize,
}

/// Rows of the sample voted on at once.
const SAMPLE_BLOCK_ROWS: usize = 8 << 10;

impl<'a> CsvSample<'a> {
    fn new(files: &'a [SourceFile]) -> CsvSample<'a> {
        CsvSample {
            files: files.iter(),
            reader: None,
            rows: 0,
        }
    }

    /// The next rows (blank lines skipped, as arrow-csv skips them); none once the sample is
    /// complete or the files are read.
    fn next_block(&mut self) -> Result<Vec<csv::StringRecord>, DataError> {
        let mut block = Vec::new();
        while block.len() < SAMPLE_BLOCK_ROWS && self.rows < SAMPLE_ROWS {
            let Some((file, reader)) = self.reader.as_mut() else {
                let Some(file) = self.files.next() else {
                    break;
                };
                let reader = csv::ReaderBuilder::new()
                    .flexible(true)
                    .from_path(&file.path)
                    .map_err(|e| DataError::file(&file.path, e))?;
                self.reader = Some((file, reader));
                continue;
            };
            let mut bytes = csv::ByteRecord::new();
            if !reader
                .read_byte_record(&mut bytes)
                .map_err(|e| DataError::file(&file.path, e))?
            {
                self.reader = None;
                continue;
            }
            // Checked here rather than by read_record, whose error on the first data row
            // points at the header ("record 0 (line 1)").
            let position = bytes.position().cloned();
            let record = csv::StringRecord::from_byte_record(bytes).map_err(|err| {
                let field = err.utf8_error().field();
                let name = reader
                    .byte_headers()
                    .ok()
                    .and_then(|h| h.get(field))
                    .map(|h| format!(" `{}`", String::from_utf8_lossy(h)))
                    .unwrap_or_default();
                let (row, line) = position.map_or((0, 0), |p| (p.record(), p.line()));
                DataError::file(
                    &file.path,
                    format!(
                        "data row {row} (line {line}): field {}{name} is not valid UTF-8",
                        field + 1
                    ),
                )
            })?;
            if record.iter().all(str::is_empty) && record.len() <= 1 {
                continue;
            }
            block.push(record);
            self.rows += 1;
        }
        Ok(block)
    }
}

/// The columns, inferred from the first `SAMPLE_ROWS` lines over the files in order, and whether
/// there was any line at all. A line that is not a JSON object is named by file and line.
fn json_columns(
    files: &[SourceFile],
    types: &BTreeMap<String, ColumnType>,
) -> Result<(Vec<Column>, bool), DataError> {
    use std::io::BufRead;
    let mut values = Vec::new();
    'files: for file in files {
        let reader = BufReader::new(File::open(&file.path).map_err(|e| DataError::Io {
            path: file.path.clone(),
            source: e,
        })?);
        for (index, line) in reader.lines().enumerate() {
            let line = line.map_err(|e| DataError::Io {
                path: file.path.clone(),
                source: e,
            })?;
            if line.trim().is_empty() {
                continue;
            }
            let at = |message: String| {
                DataError::file(&file.path, format!("line {}: {message}", index + 1))
            };
            match serde_json::from_str::<serde_json::Value>(&line) {
                Ok(value @ serde_json::Value::Object(_)) => values.push(value),
                Ok(other) => {
                    return Err(at(format!(
                        "expected one JSON object per line, found {}",
                        runfn_core::error::json_type_name(&other)
                    )));
                }
                Err(err) => return Err(at(format!("not valid JSON: {err}"))),
            }
            if values.len() >= SAMPLE_ROWS {
                break 'files;
            }
        }
    }
    let has_rows = !values.is_empty();
    let schema = arrow::json::reader::infer_json_schema_from_iterator(values.into_iter().map(Ok))
        .map_err(|e| DataError::file(&files[0].path, e))?;
    Ok((columns_of_schema(&schema, &files[0].path, types)?, has_rows))
}

fn parquet_columns(
    files: &[SourceFile],
    types: &BTreeMap<String, ColumnType>,
) -> Result<(Vec<Column>, bool), DataError> {
    let mut result: Option<Vec<Column>> = None;
    let mut rows = 0i64;
    for file in files {
        let builder = parquet_builder(&file.path)?;
        rows += builder.metadata().file_metadata().num_rows();
        let columns = columns_of_schema(builder.schema(), &file.path, types)?;
        match &result {
            None => result = Some(columns),
            Some(first) if *first != columns => {
                return Err(DataError::file(
                    &file.path,
                    format!("its schema differs from {}'s", files[0].path.display()),
                ));
            }
            Some(_) => {}
        }
    }
    result
        .map(|columns| (columns, rows > 0))
        .ok_or_else(|| DataError::Other("no Parquet files".into()))
}

fn columns_of_schema(
    schema: &Schema,
    path: &Path,
    types: &BTreeMap<String, ColumnType>,
) -> Result<Vec<Column>, DataError> {
    schema
        .fields()
        .iter()
        .map(|field| {
            let column_type = match types.get(field.name()) {
                Some(t) => *t,
                None => ColumnType::from_data_type(field.data_type()).ok_or_else(|| {
                    DataError::file(
                        path,
                        format!(
                            "column `{}` has the unsupported type {}",
                            field.name(),
                            field.data_type()
                        ),
                    )
                })?,
            };
            Ok(Column {
                name: field.name().clone(),
                column_type,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn float_column(batch: &TypedBatch, index: usize) -> &Float64Array {
        batch
            .batch
            .column(index)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap()
    }

    fn read_all(snapshot: &Snapshot) -> Result<Vec<TypedBatch>, DataError> {
        let mut out = Vec::new();
        for file in 0..snapshot.files.len() {
            for batch in snapshot.read_file(file)? {
                out.push(batch?);
            }
        }
        Ok(out)
    }

    /// Every batch of `snapshot`, in one.
    fn read_joined(snapshot: &Snapshot) -> RecordBatch {
        let batches: Vec<RecordBatch> = read_all(snapshot)
            .unwrap()
            .into_iter()
            .map(|b| b.batch)
            .collect();
        arrow::compute::concat_batches(&snapshot.schema, &batches).unwrap()
    }

    /// A projected snapshot reads the kept columns of the full read, row for row, from CSV,
    /// JSON Lines and Parquet (telco, written in each format), and carries only them.
    #[test]
    fn a_projection_reads_the_kept_columns_in_every_format() {
        let telco =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/real/telco/snapshot");
        let csv = Snapshot::open(&telco, &BTreeMap::new()).unwrap();
        let joined = read_joined(&csv);
        let dir = tempfile::tempdir().unwrap();
        let (json, parquet) = (dir.path().join("json"), dir.path().join("parquet"));
        std::fs::create_dir_all(&json).unwrap();
        std::fs::create_dir_all(&parquet).unwrap();
        let mut writer =
            arrow::json::LineDelimitedWriter::new(File::create(json.join("telco.jsonl")).unwrap());
        writer.write(&joined).unwrap();
        writer.finish().unwrap();
        let mut writer = parquet::arrow::ArrowWriter::try_new(
            File::create(parquet.join("telco.parquet")).unwrap(),
            joined.schema(),
            None,
        )
        .unwrap();
        writer.write(&joined).unwrap();
        writer.close().unwrap();
        let names: Vec<String> = csv.columns.iter().map(|c| c.name.clone()).collect();
        for root in [telco, json, parquet] {
            let full = Snapshot::open(&root, &BTreeMap::new()).unwrap();
            let all = read_joined(&full);
            for keep in [vec![0, 5, 18], vec![names.len() - 1], vec![2, 1]] {
                let kept: Vec<&str> = keep.iter().map(|&i| names[i].as_str()).collect();
                let projected = full.clone().project(&kept);
                let mut in_order = keep.clone();
                in_order.sort();
                assert_eq!(projected.columns.len(), keep.len());
                let got = read_joined(&projected);
                assert_eq!(got, all.project(&in_order).unwrap(), "{root:?} {kept:?}");
            }
        }
    }

    #[test]
    fn invalid_utf8_names_its_data_row_and_line() {
        let dir = tempfile::tempdir().unwrap();
        for (text, row, line) in [
            (&b"id,x,y\n\xff\xfe,1,0\n2,3,1\n"[..], 1, 2),
            (&b"id,x,y\n1,1,0\n2,\xff,1\n"[..], 2, 3),
        ] {
            std::fs::write(dir.path().join("a.csv"), text).unwrap();
            let err = Snapshot::open(dir.path(), &BTreeMap::new())
                .and_then(|snapshot| read_all(&snapshot))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("data row {row} (line {line}): field")),
                "{err}"
            );
        }
    }

    #[test]
    fn the_type_sample_spans_files_and_stops_at_sample_rows() {
        let rows =
            |count: usize, value: &str| format!("a,b\n{}", format!("1,{value}\n").repeat(count));
        // The sample reaches into the second file (blank lines are no rows): text there.
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "part-0.csv", &(rows(9_000, "2") + "\n\n"));
        write(dir.path(), "part-1.csv", &rows(9_000, "x"));
        let snapshot = Snapshot::open(dir.path(), &BTreeMap::new()).unwrap();
        let types: Vec<_> = snapshot.columns.iter().map(|c| c.column_type).collect();
        assert_eq!(types, [ColumnType::Int64, ColumnType::String]);
        // Rows past the sample are not looked at: the text after `SAMPLE_ROWS` rows of numbers
        // is a bad value when read, not the column's type.
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "part-0.csv", &rows(SAMPLE_ROWS - 5, "2"));
        write(
            dir.path(),
            "part-1.csv",
            &(rows(5, "3") + &"1,x\n".repeat(5_000)),
        );
        let snapshot = Snapshot::open(dir.path(), &BTreeMap::new()).unwrap();
        let types: Vec<_> = snapshot.columns.iter().map(|c| c.column_type).collect();
        assert_eq!(types, [ColumnType::Int64, ColumnType::Int64]);
    }

    /// A numeric column with a few percent of infinities (`inf`, `-inf`, `1e400`) stays numeric,
    /// and each infinity is a bad value with its row, null in the batch: before, type inference
    /// voted them out, the column became text and was trained as categories.
    #[test]
    fn infinities_in_a_numeric_column_are_bad_values_not_text() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("id,spend\n");
        let infinities = ["inf", "-inf", "1e400", "-Infinity"];
        for i in 0..1000 {
            let spend = if i % 50 == 7 {
                infinities[(i / 50) % 4].to_string()
            } else {
                format!("{i}.5")
            };
            text.push_str(&format!("C{i},{spend}\n"));
        }
        write(dir.path(), "part-0.csv", &text);
        let snapshot = Snapshot::open(dir.path(), &BTreeMap::new()).unwrap();
        let types: Vec<_> = snapshot.columns.iter().map(|c| c.column_type).collect();
        assert_eq!(types, [ColumnType::String, ColumnType::Float64]);
        let batches = read_all(&snapshot).unwrap();
        let bad = &batches[0].bad_values.columns["spend"];
        assert_eq!(bad.count, 20);
        assert_eq!(
            (bad.examples[0].row, bad.examples[0].value.as_str()),
            (8, "inf")
        );
        let spend = float_column(&batches[0], 1);
        assert_eq!(spend.null_count(), 20);
        assert!(spend.iter().flatten().all(f64::is_finite));
    }

    #[test]
    fn csv_types_are_inferred_and_bad_values_reported_with_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("id,spend,day,tier\n");
        for i in 0..2000 {
            let spend = if i == 1500 {
                "n/a".to_string()
            } else {
                format!("{}.25", i)
            };
            text.push_str(&format!("C{i},{spend},2026-08-{:02},gold\n", i % 28 + 1));
        }
        write(dir.path(), "part-0.csv", &text);
        let snapshot = Snapshot::open(dir.path(), &BTreeMap::new()).unwrap();
        let types: Vec<_> = snapshot.columns.iter().map(|c| c.column_type).collect();
        assert_eq!(
            types,
            [
                ColumnType::String,
                ColumnType::Float64,
                ColumnType::Date,
                ColumnType::String
            ]
        );
        let batches = read_all(&snapshot).unwrap();
        let bad = &batches[0].bad_values.columns["spend"];
        assert_eq!(bad.count, 1);
        assert_eq!(
            (bad.examples[0].row, bad.examples[0].value.as_str()),
            (1501, "n/a")
        );
        let spend = float_column(&batches[0], 1);
        assert!(spend.is_null(1500));
        assert_eq!(spend.value(3), 3.25);
    }

    #[test]
    fn schema_file_types_win() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.csv", "code,n\n001,1\n002,2\n");
        let types = BTreeMap::from([("code".to_string(), ColumnType::String)]);
        let snapshot = Snapshot::open(dir.path(), &types).unwrap();
        assert_eq!(snapshot.column_type("code"), Some(ColumnType::String));
        assert_eq!(snapshot.column_type("n"), Some(ColumnType::Int64));
        let batches = read_all(&snapshot).unwrap();
        let n = batches[0]
            .batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(n.values(), &[1, 2]);
    }

    #[test]
    fn ragged_csv_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.csv", "x,y\n1,2\n3\n");
        let snapshot = Snapshot::open(dir.path(), &BTreeMap::new()).unwrap();
        let err = read_all(&snapshot).unwrap_err().to_string();
        assert!(
            err.contains("a.csv: ragged CSV: data row 2 (line 3) has 1 fields, the header has 2"),
            "{err}"
        );
    }

    #[test]
    fn a_ragged_row_deep_in_the_file_is_named_by_its_own_number() {
        let dir = tempfile::tempdir().unwrap();
        let mut text = String::from("x,y\n");
        for i in 0..(BATCH_ROWS + 10) {
            text.push_str(&format!("{i},{i}\n"));
        }
        text.push_str("1,2,3\n");
        write(dir.path(), "a.csv", &text);
        let snapshot = Snapshot::open(dir.path(), &BTreeMap::new()).unwrap();
        let err = read_all(&snapshot).unwrap_err().to_string();
        let row = BATCH_ROWS + 11;
        assert!(
            err.contains(&format!("data row {row} (line {})", row + 1)),
            "{err}"
        );
    }

    #[test]
    fn empty_snapshots_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.csv", "x,y\n");
        let err = Snapshot::open(&dir.path().join("a.csv"), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(err.ends_with("a.csv: has no data rows"), "{err}");
        write(dir.path(), "b.csv", "x,y\n\n");
        let err = Snapshot::open(dir.path(), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("has no data rows (in none of its 2 files)"),
            "{err}"
        );
        write(dir.path(), "b.csv", "x,y\n1,2\n");
        assert!(Snapshot::open(dir.path(), &BTreeMap::new()).is_ok());
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.jsonl", "\n");
        let err = Snapshot::open(dir.path(), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("has no data rows"), "{err}");
    }

    #[test]
    fn bad_json_lines_are_named_by_line() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.jsonl", "{\"n\": 1}\n\n{\"n\": 2\n");
        let err = Snapshot::open(dir.path(), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("a.jsonl: line 3: not valid JSON"), "{err}");
        write(dir.path(), "a.jsonl", "{\"n\": 1}\n[2]\n");
        let err = Snapshot::open(dir.path(), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 2: expected one JSON object per line, found an array"),
            "{err}"
        );
    }

    #[test]
    fn headers_must_agree_and_be_unique() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.csv", "x,y\n1,2\n");
        write(dir.path(), "b.csv", "x,z\n1,2\n");
        let err = Snapshot::open(dir.path(), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("b.csv: its header differs"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.csv", "x,x\n1,2\n");
        let err = Snapshot::open(dir.path(), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("names `x` twice"), "{err}");
    }

    #[test]
    fn truncated_parquet_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.parquet", "PAR1 this is not really parquet");
        let err = Snapshot::open(dir.path(), &BTreeMap::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("a.parquet: not a readable Parquet file"),
            "{err}"
        );
    }

    #[test]
    fn json_lines_are_read() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "a.jsonl",
            "{\"id\": \"a\", \"n\": 1, \"x\": 0.5}\n{\"id\": \"b\", \"n\": 2, \"x\": 1.5}\n",
        );
        let snapshot = Snapshot::open(dir.path(), &BTreeMap::new()).unwrap();
        assert_eq!(snapshot.column_type("n"), Some(ColumnType::Int64));
        assert_eq!(read_all(&snapshot).unwrap()[0].batch.num_rows(), 2);
    }
}
