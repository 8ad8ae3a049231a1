//! Column values in the plain forms the checkers compare: numbers and text.

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type, TimeUnit};

const MICROS_PER_DAY: f64 = 86_400_000_000.0;

/// The column as text (numbers and dates in their display form); `None` for nulls.
pub fn text_array(array: &ArrayRef) -> StringArray {
    match cast(array, &DataType::Utf8) {
        Ok(text) => text.as_string::<i32>().clone(),
        Err(_) => StringArray::from(vec![None::<&str>; array.len()]),
    }
}

/// Column values as f64 (temporal ones in microseconds since the epoch); nulls as `None`.
pub fn numeric_values(array: &ArrayRef) -> Vec<Option<f64>> {
    let (target, scale) = match array.data_type() {
        DataType::Date32 => (DataType::Int64, MICROS_PER_DAY),
        DataType::Timestamp(_, _) => (DataType::Timestamp(TimeUnit::Microsecond, None), 1.0),
        _ => (DataType::Float64, 1.0),
    };
    let Ok(converted) = cast(array, &target).and_then(|a| cast(&a, &DataType::Float64)) else {
        return vec![None; array.len()];
    };
    let values = converted.as_primitive::<Float64Type>();
    (0..values.len())
        .map(|i| values.is_valid(i).then(|| values.value(i) * scale))
        .collect()
}
