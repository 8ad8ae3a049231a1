//! Gathering keyed rows from several batches in key order: how a slot's buffered parts become a
//! sorted run when they are spilled, and how a bucket's runs become its sorted rows.
//!
//! Spilling sorted runs is what makes the bucket's final gather cheap: merged in key order, each
//! run is read front to back. Sorting the whole bucket at the end instead gathered every column
//! at random across a bucket many times the size of the cache, and that gather (with the concat
//! before it) was the largest cost of the write half after zstd.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::interleave;
use arrow::datatypes::{SchemaRef, UInt64Type};
use rayon::prelude::*;

use crate::error::DataError;

/// The rows of `batches` (each with the key column last, keys unique across them) in key
/// order. With `keep_key` the result keeps the key column (a run to spill), else it has
/// `schema` less its last field. Every column is gathered on its own task, and each input
/// column is freed once its gathered copy exists, so the rows are held about once, not twice.
pub fn gather_by_key(
    schema: &SchemaRef,
    batches: Vec<RecordBatch>,
    keep_key: bool,
) -> Result<RecordBatch, DataError> {
    let other = |e: arrow::error::ArrowError| DataError::Other(e.to_string());
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
    // are unique, so the order is the same whatever the sort.
    order.sort_by_key(|&(key, _, _)| key);
    let indices: Vec<(usize, usize)> = order
        .into_iter()
        .map(|(_, batch, row)| (batch as usize, row as usize))
        .collect();

    let kept = if keep_key { key_index + 1 } else { key_index };
    let mut by_column: Vec<Vec<ArrayRef>> = vec![Vec::with_capacity(batches.len()); kept];
    for batch in batches {
        for (parts, column) in by_column.iter_mut().zip(batch.into_parts().1) {
            parts.push(column);
        }
    }
    let columns = by_column
        .into_par_iter()
        .map(|parts| {
            let parts: Vec<&dyn Array> = parts.iter().map(|part| part.as_ref()).collect();
            interleave(&parts, &indices)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(other)?;
    let schema = if keep_key {
        schema.clone()
    } else {
        Arc::new(
            schema
                .project(&(0..key_index).collect::<Vec<_>>())
                .map_err(other)?,
        )
    };
    RecordBatch::try_new(schema, columns).map_err(other)
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray, UInt64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

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
    /// values (nulls included) still together.
    #[test]
    fn merges_runs_and_parts_in_key_order() {
        let batches = vec![keyed(&[3, 8, 20]), keyed(&[1, 9]), keyed(&[15, 2, 30, 4])];
        let run = gather_by_key(&schema(), batches.clone(), true).unwrap();
        let keys: Vec<u64> = run.column(2).as_primitive::<UInt64Type>().values().to_vec();
        assert_eq!(keys, vec![1, 2, 3, 4, 8, 9, 15, 20, 30]);
        assert_eq!(run, keyed(&keys));

        let rows = gather_by_key(&schema(), batches, false).unwrap();
        assert_eq!(rows.num_columns(), 2);
        assert_eq!(rows.columns(), &keyed(&keys).columns()[..2]);
    }
}
