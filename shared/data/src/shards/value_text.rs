//! A column's values in the text form the rows digest hashes (Arrow's display form), written
//! straight into the digest's bytes.
//!
//! Casting every column to strings first cost more than the Parquet encoding of the same rows
//! (dates went through chrono's formatter one value at a time). Strings, integers, floats (with
//! ryu, the formatter Arrow's display calls), booleans and dates of years 0 to 9999 are written
//! here, byte for byte as Arrow's cast writes them; any other column (timestamps, dates outside
//! those years) still goes through the cast.

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Float64Array, Int64Array, StringArray,
};
use arrow::compute::{max, min};
use arrow::datatypes::{DataType, Date32Type, Float64Type, Int64Type};

use crate::values::text_array;

pub enum ValueText {
    Strings(StringArray),
    Int64(Int64Array),
    Float64(Float64Array),
    Bool(BooleanArray),
    Date32(Date32Array),
    /// Anything else, cast to text by Arrow.
    Cast(StringArray),
}

/// 0000-01-01 and 9999-12-31 as days from 1970-01-01: the years chrono writes as four digits.
const FIRST_PLAIN_DAY: i32 = -719_528;
const LAST_PLAIN_DAY: i32 = 2_932_896;

impl ValueText {
    pub fn of(array: &ArrayRef) -> ValueText {
        match array.data_type() {
            DataType::Utf8 => ValueText::Strings(array.as_string::<i32>().clone()),
            DataType::Int64 => ValueText::Int64(array.as_primitive::<Int64Type>().clone()),
            DataType::Float64 => ValueText::Float64(array.as_primitive::<Float64Type>().clone()),
            DataType::Boolean => ValueText::Bool(array.as_boolean().clone()),
            DataType::Date32 => {
                let dates = array.as_primitive::<Date32Type>();
                let plain = match (min(dates), max(dates)) {
                    (Some(first), Some(last)) => first >= FIRST_PLAIN_DAY && last <= LAST_PLAIN_DAY,
                    _ => true,
                };
                if plain {
                    ValueText::Date32(dates.clone())
                } else {
                    ValueText::Cast(text_array(array))
                }
            }
            _ => ValueText::Cast(text_array(array)),
        }
    }

    /// Appends row `row`: `0x00` for a null, else `0x01`, the text's length (u32, little-endian)
    /// and the text.
    pub fn append(&self, row: usize, out: &mut Vec<u8>) {
        let valid = match self {
            ValueText::Strings(a) | ValueText::Cast(a) => a.is_valid(row),
            ValueText::Int64(a) => a.is_valid(row),
            ValueText::Float64(a) => a.is_valid(row),
            ValueText::Bool(a) => a.is_valid(row),
            ValueText::Date32(a) => a.is_valid(row),
        };
        if !valid {
            out.push(0);
            return;
        }
        let mut digits = [0u8; 20];
        let mut float = ryu::Buffer::new();
        let text: &[u8] = match self {
            ValueText::Strings(a) | ValueText::Cast(a) => a.value(row).as_bytes(),
            ValueText::Int64(a) => int_text(a.value(row), &mut digits),
            ValueText::Float64(a) => float.format(a.value(row)).as_bytes(),
            ValueText::Bool(a) => {
                if a.value(row) {
                    b"true"
                } else {
                    b"false"
                }
            }
            ValueText::Date32(a) => date_text(a.value(row), &mut digits),
        };
        out.push(1);
        out.extend_from_slice(&(text.len() as u32).to_le_bytes());
        out.extend_from_slice(text);
    }

    /// About the bytes of text in `rows`, to size a buffer: exact for strings, a guess for the
    /// rest.
    pub fn text_bytes(&self, rows: std::ops::Range<usize>) -> usize {
        match self {
            ValueText::Strings(a) | ValueText::Cast(a) => {
                let offsets = a.value_offsets();
                (offsets[rows.end] - offsets[rows.start]) as usize
            }
            ValueText::Int64(_) | ValueText::Date32(_) => rows.len() * 8,
            ValueText::Float64(_) => rows.len() * 12,
            ValueText::Bool(_) => rows.len() * 5,
        }
    }
}

/// `value` in decimal, as `i64`'s `Display` writes it.
fn int_text(value: i64, buffer: &mut [u8; 20]) -> &[u8] {
    let mut rest = value.unsigned_abs();
    let mut at = buffer.len();
    loop {
        at -= 1;
        buffer[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if value < 0 {
        at -= 1;
        buffer[at] = b'-';
    }
    &buffer[at..]
}

/// `YYYY-MM-DD` of a day counted from 1970-01-01, for years 0 to 9999 (the civil-from-days
/// algorithm of H. Hinnant, proleptic Gregorian as chrono).
fn date_text(days: i32, buffer: &mut [u8; 20]) -> &[u8] {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    let put = |buffer: &mut [u8; 20], at: usize, value: i64, width: usize| {
        let mut value = value;
        for i in (0..width).rev() {
            buffer[at + i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(buffer, 0, year, 4);
    buffer[4] = b'-';
    put(buffer, 5, month, 2);
    buffer[7] = b'-';
    put(buffer, 8, day, 2);
    &buffer[..10]
}

/// Asserts that every row of `array` gets the bytes the cast's text gives (`context` names the
/// column in the message). Shared by the tests here and the real-table test of the shards.
#[cfg(test)]
pub(crate) fn assert_same_as_cast(array: &ArrayRef, context: &str) {
    let fast = ValueText::of(array);
    let cast = text_array(array);
    for row in 0..array.len() {
        let mut expected = Vec::new();
        if cast.is_valid(row) {
            let text = cast.value(row).as_bytes();
            expected.push(1);
            expected.extend_from_slice(&(text.len() as u32).to_le_bytes());
            expected.extend_from_slice(text);
        } else {
            expected.push(0);
        }
        let mut written = Vec::new();
        fast.append(row, &mut written);
        assert_eq!(
            String::from_utf8_lossy(&written),
            String::from_utf8_lossy(&expected),
            "{context}: row {row} of {:?}",
            array.data_type()
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn dates_are_written_as_arrow_writes_them() {
        // Every day of 1890..2110 (leap years and 1900/2000 included) and the edges of the years
        // written with four digits.
        let mut days: Vec<Option<i32>> = (-29_220..51_000).map(Some).collect();
        days.extend([
            None,
            Some(FIRST_PLAIN_DAY),
            Some(FIRST_PLAIN_DAY + 59),
            Some(FIRST_PLAIN_DAY + 60),
            Some(LAST_PLAIN_DAY),
            Some(-1),
            Some(0),
        ]);
        let dates = Arc::new(Date32Array::from(days)) as ArrayRef;
        assert!(matches!(ValueText::of(&dates), ValueText::Date32(_)));
        assert_same_as_cast(&dates, "dates");
        // Outside years 0..9999 the whole column goes through the cast (and still agrees).
        let far = Arc::new(Date32Array::from(vec![
            Some(LAST_PLAIN_DAY + 1),
            Some(0),
            Some(FIRST_PLAIN_DAY - 1),
        ])) as ArrayRef;
        assert!(matches!(ValueText::of(&far), ValueText::Cast(_)));
        assert_same_as_cast(&far, "far dates");
    }

    #[test]
    fn integers_booleans_and_strings_are_written_as_arrow_writes_them() {
        assert_same_as_cast(
            &(Arc::new(Int64Array::from(vec![
                Some(0),
                Some(7),
                Some(-7),
                Some(1_000_000_007),
                None,
                Some(i64::MAX),
                Some(i64::MIN),
            ])) as ArrayRef),
            "integers",
        );
        assert_same_as_cast(
            &(Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])) as ArrayRef),
            "booleans",
        );
        assert_same_as_cast(
            &(Arc::new(StringArray::from(vec![
                Some("a"),
                None,
                Some(""),
                Some("日本"),
            ])) as ArrayRef),
            "strings",
        );
        // Floats: shortest round-trip digits, exponents both ways, signed zero, the subnormal
        // edge and the values that are not numbers.
        let floats = Arc::new(Float64Array::from(vec![
            Some(0.1),
            None,
            Some(-2.0),
            Some(12.89),
            Some(-0.0),
            Some(1e21),
            Some(1.5e-7),
            Some(123_456_789.125),
            Some(f64::MAX),
            Some(f64::MIN_POSITIVE),
            Some(5e-324),
            Some(f64::NAN),
            Some(f64::INFINITY),
            Some(f64::NEG_INFINITY),
        ])) as ArrayRef;
        assert!(matches!(ValueText::of(&floats), ValueText::Float64(_)));
        assert_same_as_cast(&floats, "floats");
    }
}
