//! Column values in the plain forms the checkers compare: numbers and text.

use arrow::array::{ArrayRef, AsArray, StringArray};
use arrow::compute::cast;
use arrow::datatypes::DataType;

pub use crate::split::numeric_values;

/// The column as text (numbers and dates in their display form); `None` for nulls.
pub fn text_array(array: &ArrayRef) -> StringArray {
    match cast(array, &DataType::Utf8) {
        Ok(text) => text.as_string::<i32>().clone(),
        Err(_) => StringArray::from(vec![None::<&str>; array.len()]),
    }
}
