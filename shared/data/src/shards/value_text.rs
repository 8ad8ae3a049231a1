//! A column's values in the text form the rows digest hashes (Arrow's display form), as one
//! buffer of texts with offsets, so the digest's row loop only copies bytes.
//!
//! Casting every column to strings first cost more than the Parquet encoding of the same rows
//! (dates went through chrono's formatter one value at a time). Strings, integers, floats (with
//! ryu, the formatter Arrow's display calls), booleans and dates of years 0 to 9999 are written
//! here, byte for byte as Arrow's cast writes them; any other column (timestamps, dates outside
//! those years) still goes through the cast. Each column is written in one tight pass of its
//! own: formatting each value inside the row loop, one type dispatch per value, made the digest
//! a tenth of a shardify run's cores.

use std::ops::Range;

use arrow::array::{Array, ArrayRef, ArrowPrimitiveType, AsArray, PrimitiveArray, StringArray};
use arrow::buffer::{Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::compute::{max, min};
use arrow::datatypes::{DataType, Date32Type, Float64Type, Int64Type};

use crate::calendar_text::{civil_from_days, put_digits};
use crate::values::text_array;

/// A column's texts: row `i`'s is `values[offsets[i]..offsets[i + 1]]`, unless `nulls` says
/// the row is null.
#[derive(Debug)]
pub struct ValueText {
    offsets: OffsetBuffer<i32>,
    values: Buffer,
    nulls: Option<NullBuffer>,
    /// The texts came from Arrow's cast (a type, or dates, not written here).
    #[cfg_attr(not(test), allow(dead_code))]
    cast: bool,
}

/// Texts up to this long are copied as a fixed-size block (see `append`).
pub(crate) const SHORT_TEXT: usize = 16;

/// 0000-01-01 and 9999-12-31 as days from 1970-01-01: the years chrono writes as four digits.
const FIRST_PLAIN_DAY: i32 = -719_528;
const LAST_PLAIN_DAY: i32 = 2_932_896;

impl ValueText {
    /// `array`'s texts. Meant for a window of rows at a time: the texts written here are held
    /// in memory beside the column, with 32-bit offsets.
    pub fn of(array: &ArrayRef) -> ValueText {
        match array.data_type() {
            DataType::Utf8 => ValueText::strings(array.as_string::<i32>(), false),
            DataType::Int64 => {
                let mut digits = itoa::Buffer::new();
                written(array.as_primitive::<Int64Type>(), 8, move |value, out| {
                    out.extend_from_slice(digits.format(value).as_bytes());
                })
            }
            DataType::Float64 => {
                let mut float = ryu::Buffer::new();
                written(
                    array.as_primitive::<Float64Type>(),
                    12,
                    move |value, out| {
                        out.extend_from_slice(float.format(value).as_bytes());
                    },
                )
            }
            DataType::Boolean => {
                let booleans = array.as_boolean();
                let mut values = Vec::with_capacity(booleans.len() * 5);
                let mut offsets = Vec::with_capacity(booleans.len() + 1);
                offsets.push(0);
                for row in 0..booleans.len() {
                    if booleans.is_valid(row) {
                        let text: &[u8] = if booleans.value(row) {
                            b"true"
                        } else {
                            b"false"
                        };
                        values.extend_from_slice(text);
                    }
                    offsets.push(offset(&values));
                }
                ValueText::new(offsets, values, booleans.nulls().cloned())
            }
            DataType::Date32 => {
                let dates = array.as_primitive::<Date32Type>();
                match (min(dates), max(dates)) {
                    (Some(first), Some(last))
                        if first >= FIRST_PLAIN_DAY && last <= LAST_PLAIN_DAY =>
                    {
                        let span = (last - first) as usize + 1;
                        if span * 4 <= dates.len() {
                            // A window's dates usually cover a few hundred days: each day's
                            // text is written once and copied for every row that has it.
                            let table: Vec<[u8; 10]> = (first..=last).map(date_text).collect();
                            written(dates, 10, |days, out| {
                                out.extend_from_slice(&table[(days - first) as usize]);
                            })
                        } else {
                            written(dates, 10, |days, out| {
                                out.extend_from_slice(&date_text(days))
                            })
                        }
                    }
                    (Some(_), Some(_)) => ValueText::strings(&text_array(array), true),
                    // Every row is null.
                    _ => written(dates, 0, |_, _| {}),
                }
            }
            _ => ValueText::strings(&text_array(array), true),
        }
    }

    fn strings(array: &StringArray, cast: bool) -> ValueText {
        ValueText {
            offsets: array.offsets().clone(),
            values: array.values().clone(),
            nulls: array.nulls().cloned(),
            cast,
        }
    }

    fn new(offsets: Vec<i32>, values: Vec<u8>, nulls: Option<NullBuffer>) -> ValueText {
        ValueText {
            offsets: OffsetBuffer::new(ScalarBuffer::from(offsets)),
            values: Buffer::from_vec(values),
            nulls,
            cast: false,
        }
    }

    /// Whether the texts came from Arrow's cast rather than this module's writers.
    #[cfg(test)]
    pub(crate) fn cast_by_arrow(&self) -> bool {
        self.cast
    }

    /// Appends row `row`'s bytes: `0x00` for a null, else `0x01`, the text's length (u32,
    /// little-endian) and the text.
    #[inline]
    pub fn append(&self, row: usize, out: &mut Vec<u8>) {
        if self.nulls.as_ref().is_some_and(|nulls| nulls.is_null(row)) {
            out.push(0);
            return;
        }
        let start = self.offsets[row] as usize;
        let end = self.offsets[row + 1] as usize;
        let text = &self.values[start..end];
        // Most texts are a few bytes, and a copy of a length known only here is a call to
        // memcpy: with 16 bytes readable from the text's start (the column's later bytes), a
        // fixed 16-byte copy is made instead and the length then set to the text's own.
        let wide = (text.len() <= SHORT_TEXT)
            .then(|| self.values.get(start..start + SHORT_TEXT))
            .flatten();
        out.reserve(5 + text.len().max(SHORT_TEXT));
        let at = out.len();
        // SAFETY: `reserve` made room for 5 + max(len, SHORT_TEXT) bytes after `at`; every
        // byte up to the new length `at + 5 + len` is written here before `set_len`, and the
        // sources are in bounds (`text` and `wide` are checked slices).
        unsafe {
            let dst = out.as_mut_ptr().add(at);
            dst.write(1);
            std::ptr::copy_nonoverlapping(
                (text.len() as u32).to_le_bytes().as_ptr(),
                dst.add(1),
                4,
            );
            match wide {
                Some(wide) => std::ptr::copy_nonoverlapping(wide.as_ptr(), dst.add(5), SHORT_TEXT),
                None => std::ptr::copy_nonoverlapping(text.as_ptr(), dst.add(5), text.len()),
            }
            out.set_len(at + 5 + text.len());
        }
    }

    /// The bytes of the texts of `rows`.
    pub fn text_bytes(&self, rows: Range<usize>) -> usize {
        (self.offsets[rows.end] - self.offsets[rows.start]) as usize
    }
}

/// The texts of a primitive column, each valid value written by `write` (about `width` bytes).
fn written<T: ArrowPrimitiveType>(
    array: &PrimitiveArray<T>,
    width: usize,
    mut write: impl FnMut(T::Native, &mut Vec<u8>),
) -> ValueText {
    let mut values = Vec::with_capacity(array.len() * width);
    let mut offsets = Vec::with_capacity(array.len() + 1);
    offsets.push(0);
    match array.nulls() {
        None => {
            for &value in array.values().iter() {
                write(value, &mut values);
                offsets.push(offset(&values));
            }
        }
        Some(nulls) => {
            for (row, &value) in array.values().iter().enumerate() {
                if nulls.is_valid(row) {
                    write(value, &mut values);
                }
                offsets.push(offset(&values));
            }
        }
    }
    ValueText::new(offsets, values, array.nulls().cloned())
}

/// The end of `values` as a text offset. A window's texts are a few MiB: past 2 GiB something
/// upstream is wrong, and a wrapped offset would silently hash the wrong bytes.
fn offset(values: &[u8]) -> i32 {
    i32::try_from(values.len()).expect("a window's value texts exceed 2 GiB")
}

/// `YYYY-MM-DD` of a day counted from 1970-01-01, for years 0 to 9999 (the civil-from-days
/// algorithm of H. Hinnant, proleptic Gregorian as chrono).
fn date_text(days: i32) -> [u8; 10] {
    let mut buffer = [0u8; 10];
    let (year, month, day) = civil_from_days(i64::from(days));
    put_digits(&mut buffer, 0, year, 4);
    buffer[4] = b'-';
    put_digits(&mut buffer, 5, month, 2);
    buffer[7] = b'-';
    put_digits(&mut buffer, 8, day, 2);
    buffer
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

    use arrow::array::{BooleanArray, Date32Array, Float64Array, Int64Array};

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
        assert!(!ValueText::of(&dates).cast_by_arrow());
        assert_same_as_cast(&dates, "dates");
        // Outside years 0..9999 the whole column goes through the cast (and still agrees).
        let far = Arc::new(Date32Array::from(vec![
            Some(LAST_PLAIN_DAY + 1),
            Some(0),
            Some(FIRST_PLAIN_DAY - 1),
        ])) as ArrayRef;
        assert!(ValueText::of(&far).cast_by_arrow());
        assert_same_as_cast(&far, "far dates");
    }

    /// Dates over a span much shorter than the rows (the table of day texts), with nulls, and
    /// a column of nulls only.
    #[test]
    fn repeated_dates_are_written_as_arrow_writes_them() {
        let days: Vec<Option<i32>> = (0..20_000)
            .map(|i| (i % 13 != 0).then_some(18_000 + (i * 7_919) % 500))
            .collect();
        let dates = Arc::new(Date32Array::from(days)) as ArrayRef;
        assert!(!ValueText::of(&dates).cast_by_arrow());
        assert_same_as_cast(&dates, "repeated dates");
        assert_same_as_cast(&dates.slice(7, 1_000), "a slice of repeated dates");
        let nulls = Arc::new(Date32Array::from(vec![None::<i32>; 9])) as ArrayRef;
        assert_same_as_cast(&nulls, "null dates");
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
        assert!(!ValueText::of(&floats).cast_by_arrow());
        assert_same_as_cast(&floats, "floats");
    }
}
