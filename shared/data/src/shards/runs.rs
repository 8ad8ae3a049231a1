//! Gathering keyed rows from several batches in key order: how a bucket's sorted runs (see
//! `spill`) become its rows in shuffled order.
//!
//! Spilling sorted runs is what makes this gather cheap: merged in key order, each run is read
//! front to back. Sorting the whole bucket at the end instead gathered every column
//! at random across a bucket many times the size of the cache, and that gather (with the concat
//! before it) was the largest cost of the write half after zstd.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, StringArray};
use arrow::compute::interleave;
use arrow::datatypes::{SchemaRef, UInt64Type};
use rayon::prelude::*;

use crate::error::DataError;
use crate::shards::string_gather::gather_strings;

/// The rows of `batches` (key column last, keys unique across them) in key order, as
/// (batch, row).
pub fn key_order(
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Result<Vec<(usize, usize)>, DataError> {
    let key_index = schema.fields().len() - 1;
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let mut order: Vec<(u64, u32, u32)> = Vec::with_capacity(rows);
    for (batch_index, batch) in batches.iter().enumerate() {
        let keys = batch
            .column(key_index)
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| DataError::Other("the shuffle key column is not UInt64".into()))?;
        order.extend(
            keys.values()
                .iter()
                .enumerate()
                .map(|(row, &key)| (key, batch_index as u32, row as u32)),
        );
    }
    // A stable sort finds the runs already in order and merges them (O(n log runs)); the keys
    // are unique, so the order is the same whatever the sort. (rayon's parallel sort was
    // tried here: no gain that alternating runs could measure.)
    order.sort_by_key(|&(key, _, _)| key);
    Ok(order
        .into_iter()
        .map(|(_, batch, row)| (batch as usize, row as usize))
        .collect())
}

/// The rows of `batches` (each with the key column last) at `indices` (their order by key, see
/// [`key_order`], or a run of it), without the key column, cut into consecutive batches of
/// `lengths` rows (which sum to the indices given). Every piece of every column is gathered on its own task, so a wide text
/// column is not one core's work, and each input column is freed once its pieces exist, so the
/// rows are held about once, not twice. Pieces of a few MiB are also memory the allocator
/// reuses: a bucket-sized gather was fresh pages, faulted in, every time.
pub fn gather_in_order(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    indices: &[(usize, usize)],
    lengths: &[usize],
) -> Result<Vec<RecordBatch>, DataError> {
    let other = |e: arrow::error::ArrowError| DataError::Other(e.to_string());
    let key_index = schema.fields().len() - 1;
    // `indices` may name some of the rows only: a reducer of a parted run writes the part of a
    // bucket that falls in its shards.
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    if lengths.iter().sum::<usize>() != indices.len() || indices.len() > rows {
        return Err(DataError::Other(format!(
            "pieces of {} rows asked of {} of {rows} rows",
            lengths.iter().sum::<usize>(),
            indices.len()
        )));
    }
    let mut ranges = Vec::with_capacity(lengths.len());
    let mut start = 0;
    for &length in lengths {
        ranges.push(start..start + length);
        start += length;
    }

    let mut by_column: Vec<Vec<ArrayRef>> = vec![Vec::with_capacity(batches.len()); key_index];
    for batch in batches {
        for (parts, column) in by_column.iter_mut().zip(batch.into_parts().1) {
            parts.push(column);
        }
    }
    let columns = gather_columns(by_column, indices, &ranges)?;
    let schema = Arc::new(
        schema
            .project(&(0..key_index).collect::<Vec<_>>())
            .map_err(other)?,
    );
    ranges
        .iter()
        .enumerate()
        .map(|(piece, range)| {
            RecordBatch::try_new_with_options(
                schema.clone(),
                columns.iter().map(|column| column[piece].clone()).collect(),
                &RecordBatchOptions::new().with_row_count(Some(range.len())),
            )
            .map_err(other)
        })
        .collect()
}

/// Each column, given as its parts (one per batch), gathered at `indices` ((part, row) pairs)
/// and cut into `ranges` of them: every (column, range) is its own task, and a column's parts
/// are dropped once its pieces exist. The one gather of the shuffle, for the spill's runs and
/// for a bucket's merge.
pub fn gather_columns(
    columns: Vec<Vec<ArrayRef>>,
    indices: &[(usize, usize)],
    ranges: &[Range<usize>],
) -> Result<Vec<Vec<ArrayRef>>, DataError> {
    columns
        .into_par_iter()
        .map(|parts| {
            let strings: Option<Vec<&StringArray>> = parts
                .iter()
                .map(|part| part.as_string_opt::<i32>())
                .collect();
            let parts: Vec<&dyn Array> = parts.iter().map(|part| part.as_ref()).collect();
            ranges
                .par_iter()
                .map(|range| {
                    let indices = &indices[range.clone()];
                    match strings.as_deref().and_then(|s| gather_strings(s, indices)) {
                        Some(gathered) => Ok(Arc::new(gathered) as ArrayRef),
                        None => interleave(&parts, indices),
                    }
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| DataError::Other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray, UInt64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn gather_by_key(
        schema: &SchemaRef,
        batches: Vec<RecordBatch>,
        lengths: &[usize],
    ) -> Result<Vec<RecordBatch>, DataError> {
        let order = key_order(schema, &batches)?;
        gather_in_order(schema, batches, &order, lengths)
    }

    fn keyed(keys: &[u64]) -> RecordBatch {
        let schema = schema();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(
                    keys.iter().map(|&k| k as i64 * 10).collect::<Vec<_>>(),
                )) as ArrayRef,
                Arc::new(StringArray::from(
                    keys.iter()
                        .map(|k| (k % 3 != 0).then(|| format!("row {k}")))
                        .collect::<Vec<_>>(),
                )),
                Arc::new(UInt64Array::from(keys.to_vec())),
            ],
        )
        .unwrap()
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("x", DataType::Int64, false),
            Field::new("note", DataType::Utf8, true),
            Field::new("key", DataType::UInt64, false),
        ]))
    }

    /// Sorted runs and unsorted parts, merged, give every row once in key order, each row's
    /// values (nulls included) still together, in the pieces asked for.
    #[test]
    fn merges_runs_and_parts_in_key_order() {
        let batches = vec![keyed(&[3, 8, 20]), keyed(&[1, 9]), keyed(&[15, 2, 30, 4])];
        let sorted = [1, 2, 3, 4, 8, 9, 15, 20, 30];
        let whole = gather_by_key(&schema(), batches.clone(), &[9]).unwrap();
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].num_columns(), 2);
        assert_eq!(whole[0].columns(), &keyed(&sorted).columns()[..2]);

        let pieces = gather_by_key(&schema(), batches.clone(), &[2, 4, 3]).unwrap();
        let lengths: Vec<usize> = pieces.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(lengths, vec![2, 4, 3]);
        let expected = [&sorted[..2], &sorted[2..6], &sorted[6..]];
        for (piece, keys) in pieces.iter().zip(expected) {
            assert_eq!(piece.columns(), &keyed(keys).columns()[..2]);
        }
        assert!(gather_by_key(&schema(), batches, &[2, 4]).is_err());
    }
}
