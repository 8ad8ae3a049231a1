//! The data bytes of a run of rows, counted so that the count depends on the rows alone.
//!
//! The shard writer cuts its calls and row groups by rows and by bytes: by rows alone, a call of
//! 8,192 rows of 1 MiB values held 8 GiB whatever `--memory` said. Where a cut falls decides the
//! file's bytes, so the count must not depend on how the rows arrived (the shuffle's buckets,
//! and so the budget, change the batches): it is a sum over rows of what each row's values
//! take — a text's or a binary's length, a fixed-width value's width — and never looks at
//! buffers (a validity bitmap is there or not depending on the batch a row came in). Being a
//! sum, a run's count is the same however the run is sliced.

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::DataType;

/// Bytes counted for a row's value of a type with neither a width nor offsets.
const OTHER_VALUE_BYTES: u64 = 8;

/// The data bytes of `len` rows of `batch` from `start`.
pub(crate) fn range_bytes(batch: &RecordBatch, start: usize, len: usize) -> u64 {
    batch
        .columns()
        .iter()
        .map(|column| column_bytes(column.as_ref(), start, len))
        .sum()
}

fn column_bytes(column: &dyn Array, start: usize, len: usize) -> u64 {
    if len == 0 {
        return 0;
    }
    let end = start + len;
    match column.data_type() {
        DataType::Utf8 => offsets_span(column.as_string::<i32>().value_offsets(), start, end),
        DataType::LargeUtf8 => offsets_span(column.as_string::<i64>().value_offsets(), start, end),
        DataType::Binary => offsets_span(column.as_binary::<i32>().value_offsets(), start, end),
        DataType::LargeBinary => {
            offsets_span(column.as_binary::<i64>().value_offsets(), start, end)
        }
        DataType::Utf8View => views_span(column.as_string_view().views(), start, end),
        DataType::BinaryView => views_span(column.as_binary_view().views(), start, end),
        DataType::Boolean | DataType::Null => len as u64,
        other => other
            .primitive_width()
            .map_or(OTHER_VALUE_BYTES, |width| width as u64)
            .saturating_mul(len as u64),
    }
}

/// The values' bytes between two rows of an offsets buffer (a null's span is empty).
fn offsets_span<O: arrow::array::OffsetSizeTrait>(offsets: &[O], start: usize, end: usize) -> u64 {
    (offsets[end].as_usize() - offsets[start].as_usize()) as u64
}

/// The values' bytes of a view array's rows: each view's low 32 bits are its length.
fn views_span(views: &[u128], start: usize, end: usize) -> u64 {
    views[start..end].iter().map(|v| *v as u32 as u64).sum()
}

/// The most rows from the start of `batch`, at most `max_rows`, whose data bytes are within
/// `max_bytes`, and their bytes. Zero rows when even the first row is over.
pub(crate) fn rows_within(batch: &RecordBatch, max_rows: usize, max_bytes: u64) -> (usize, u64) {
    let max_rows = max_rows.min(batch.num_rows());
    let all = range_bytes(batch, 0, max_rows);
    if all <= max_bytes {
        return (max_rows, all);
    }
    // The count grows with the rows: the last prefix within the limit, by bisection.
    let (mut within, mut over) = (0, max_rows);
    while over - within > 1 {
        let middle = within + (over - within) / 2;
        if range_bytes(batch, 0, middle) <= max_bytes {
            within = middle;
        } else {
            over = middle;
        }
    }
    (within, range_bytes(batch, 0, within))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::compute::concat_batches;

    use super::*;

    fn batch(texts: &[Option<&str>]) -> RecordBatch {
        let ids: ArrayRef = Arc::new(Int64Array::from_iter_values(0..texts.len() as i64));
        let texts: ArrayRef = Arc::new(StringArray::from(texts.to_vec()));
        RecordBatch::try_from_iter([("id", ids), ("text", texts)]).unwrap()
    }

    #[test]
    fn a_runs_bytes_are_its_rows_values_however_it_is_sliced_or_joined() {
        let whole = batch(&[Some("abc"), None, Some(""), Some("hello")]);
        assert_eq!(range_bytes(&whole, 0, 4), 4 * 8 + 8);
        assert_eq!(range_bytes(&whole, 1, 2), 2 * 8);
        // Joined from a batch with no nulls and one with: the same rows, the same count.
        let joined =
            concat_batches(&whole.schema(), &[whole.slice(0, 1), whole.slice(1, 3)]).unwrap();
        for (start, len) in [(0, 4), (1, 3), (2, 2), (3, 1)] {
            assert_eq!(
                range_bytes(&joined, start, len),
                range_bytes(&whole.slice(start, len), 0, len)
            );
        }
    }

    #[test]
    fn rows_within_takes_the_longest_prefix_under_the_limit() {
        let wide = "x".repeat(100);
        let rows = batch(&[Some(&wide), Some(&wide), Some(&wide)]);
        assert_eq!(rows_within(&rows, 10, 108), (1, 108));
        assert_eq!(rows_within(&rows, 10, 215), (1, 108));
        assert_eq!(rows_within(&rows, 10, 216), (2, 216));
        assert_eq!(rows_within(&rows, 2, 10_000), (2, 216));
        assert_eq!(rows_within(&rows, 10, 50), (0, 0));
    }
}
