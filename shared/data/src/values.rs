//! Column values in the plain forms the checkers compare: numbers, text, labels.

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
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

/// A binary label as found in the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    Missing,
    Negative,
    Positive,
    /// Present but neither 0/1 nor true/false (NaN, 2, "yes"...).
    Invalid,
}

/// Labels from a bool column or a numeric column holding 0 and 1.
pub fn labels(array: &ArrayRef) -> Vec<Label> {
    if let Some(bools) = array.as_boolean_opt() {
        return (0..bools.len())
            .map(|i| match (bools.is_valid(i), bools.value(i)) {
                (false, _) => Label::Missing,
                (true, true) => Label::Positive,
                (true, false) => Label::Negative,
            })
            .collect();
    }
    if matches!(
        array.data_type(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    ) {
        return (0..array.len())
            .map(|i| {
                if array.is_valid(i) {
                    Label::Invalid
                } else {
                    Label::Missing
                }
            })
            .collect();
    }
    numeric_values(array)
        .into_iter()
        .map(|value| match value {
            None => Label::Missing,
            Some(1.0) => Label::Positive,
            Some(0.0) => Label::Negative,
            Some(_) => Label::Invalid,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, Int64Array};
    use std::sync::Arc;

    #[test]
    fn labels_from_numbers_flag_nan_and_other_values() {
        let array: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(1.0),
            Some(0.0),
            None,
            Some(f64::NAN),
            Some(2.0),
        ]));
        assert_eq!(
            labels(&array),
            [
                Label::Positive,
                Label::Negative,
                Label::Missing,
                Label::Invalid,
                Label::Invalid
            ]
        );
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![0, 1]));
        assert_eq!(labels(&ints), [Label::Negative, Label::Positive]);
    }
}
