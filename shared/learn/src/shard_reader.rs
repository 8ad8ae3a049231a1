//! Reads only the needed columns of one Parquet shard, batch by batch, with errors that name the
//! shard (a truncated or corrupt file is reported, never a panic).

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use arrow::array::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};

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
        ShardReader::open_rows(path, columns, 0..u64::MAX)
    }

    /// Like `open`, reading only the 0-based rows `rows` (cut to the shard's end): row groups
    /// outside them are not read at all, and the rest of the rows are skipped, not decoded into
    /// batches.
    pub fn open_rows(
        path: &Path,
        columns: &[&str],
        rows: std::ops::Range<u64>,
    ) -> Result<ShardReader> {
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
        // The row groups that hold any of `rows`, and the selection within them.
        let mut groups = Vec::new();
        let mut selectors = Vec::new();
        let mut group_start = 0u64;
        let mut first_selected = None;
        for (i, group) in builder.metadata().row_groups().iter().enumerate() {
            let group_rows = group.num_rows().max(0) as u64;
            let group_end = group_start + group_rows;
            let (from, to) = (rows.start.max(group_start), rows.end.min(group_end));
            if from < to {
                groups.push(i);
                first_selected.get_or_insert(from);
                selectors.extend(
                    [
                        RowSelector::skip((from - group_start) as usize),
                        RowSelector::select((to - from) as usize),
                        RowSelector::skip((group_end - to) as usize),
                    ]
                    .into_iter()
                    .filter(|s| s.row_count > 0),
                );
            }
            group_start = group_end;
        }
        let whole = rows.start == 0 && rows.end >= group_start;
        let mut builder = builder.with_projection(mask).with_batch_size(BATCH_ROWS);
        if !whole {
            builder = builder
                .with_row_groups(groups)
                .with_row_selection(RowSelection::from(selectors));
        }
        let reader = builder
            .build()
            .map_err(|e| anyhow!("{}: {e}", path.display()))?;
        Ok(ShardReader {
            path: path.to_path_buf(),
            reader,
            next_row: first_selected.map_or(1, |r| r + 1),
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    use super::*;

    /// Rows 0..n of column `x` (value = row) in row groups of `group` rows.
    fn shard(path: &Path, n: i64, group: usize) {
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from((0..n).collect::<Vec<_>>()))],
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(group))
            .build();
        let mut writer =
            ArrowWriter::try_new(File::create(path).unwrap(), schema, Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    fn read(path: &Path, rows: std::ops::Range<u64>) -> (Vec<i64>, Vec<u64>) {
        let mut reader = ShardReader::open_rows(path, &["x"], rows).unwrap();
        let (mut values, mut firsts) = (Vec::new(), Vec::new());
        while let Some((batch, first)) = reader.next_batch().unwrap() {
            firsts.push(first);
            let x = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            values.extend((0..x.len()).map(|i| x.value(i)));
        }
        (values, firsts)
    }

    #[test]
    fn a_row_range_reads_those_rows_across_row_groups_and_numbers_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.parquet");
        shard(&path, 23, 4);
        assert_eq!(read(&path, 5..14), ((5..14).collect(), vec![6]));
        assert_eq!(
            read(&path, 8..12).0,
            (8..12).collect::<Vec<_>>(),
            "one whole group"
        );
        assert_eq!(
            read(&path, 20..99).0,
            (20..23).collect::<Vec<_>>(),
            "cut at the end"
        );
        assert_eq!(read(&path, 0..u64::MAX).0.len(), 23);
        assert!(read(&path, 30..40).0.is_empty());
    }
}
