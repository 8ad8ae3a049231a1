//! The shuffle's key: a 64-bit bijection of (seed, file, row) carried by each row as an extra
//! column while it is spilled and merged.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::error::DataError;

const KEY_COLUMN: &str = "__runfn_shuffle_key";

/// A bijective 64-bit mixer (Steele et al.'s splitmix64 finalizer).
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `schema` with the key column last.
pub(super) fn keyed_schema(schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(KEY_COLUMN, DataType::UInt64, false));
    Arc::new(Schema::new(fields))
}

/// `batch` with `keys` as its key column (`schema` is its keyed schema).
pub(super) fn with_keys(
    batch: &RecordBatch,
    schema: &SchemaRef,
    keys: Vec<u64>,
) -> Result<RecordBatch, DataError> {
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(UInt64Array::from(keys)));
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| DataError::Other(e.to_string()))
}
