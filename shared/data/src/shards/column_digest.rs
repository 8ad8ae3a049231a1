//! One column's part of a `runfn-rows-v2` rows digest: the column's values hashed as they lie
//! in Arrow's buffers, column by column, instead of as text row by row (`runfn-rows-v1`).
//!
//! Three streams per column, each a blake3 hash over the split's rows in order:
//! - `values`: numbers and dates as their little-endian bytes (Int64 and Float64 8 bytes, Date32
//!   4 bytes; a null's slot as zeros), booleans one byte (0, 1; a null 0), texts their UTF-8
//!   bytes back to back (a null none); any other type its v1 text, back to back.
//! - `lengths`: for texts (and other types hashed as text) each row's byte length as u32 LE (a
//!   null 0); nothing for fixed-width types.
//! - `nulls`: the row number (u64 LE, from the split's first row) of every null.
//!
//! Without nulls a fixed-width column is one hash update over its buffer and a text column two
//! (its lengths, its bytes): no value is formatted or copied into a row buffer. The v1 digest's
//! per-value text (ryu, itoa, date formatting) and row loop were a quarter of shardify's wall
//! time on short rows.

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray, StringArray};
use arrow::datatypes::{ArrowPrimitiveType, DataType, Date32Type, Float64Type, Int64Type};

use crate::values::text_array;

#[derive(Debug, Clone)]
pub struct ColumnDigest {
    values: blake3::Hasher,
    lengths: blake3::Hasher,
    nulls: blake3::Hasher,
}

impl ColumnDigest {
    pub fn new() -> ColumnDigest {
        ColumnDigest {
            values: blake3::Hasher::new(),
            lengths: blake3::Hasher::new(),
            nulls: blake3::Hasher::new(),
        }
    }

    /// Adds `array`'s rows, the first being row `first_row` of the split.
    pub fn update(&mut self, array: &ArrayRef, first_row: u64) {
        if let Some(nulls) = array.nulls().filter(|n| n.null_count() > 0) {
            let positions: Vec<u8> = nulls
                .iter()
                .enumerate()
                .filter(|(_, valid)| !valid)
                .flat_map(|(row, _)| (first_row + row as u64).to_le_bytes())
                .collect();
            self.nulls.update(&positions);
        }
        match array.data_type() {
            DataType::Int64 => self.fixed(array.as_primitive::<Int64Type>(), i64::to_le_bytes),
            DataType::Float64 => self.fixed(array.as_primitive::<Float64Type>(), f64::to_le_bytes),
            DataType::Date32 => self.fixed(array.as_primitive::<Date32Type>(), i32::to_le_bytes),
            DataType::Boolean => {
                let booleans = array.as_boolean();
                let bytes: Vec<u8> = (0..booleans.len())
                    .map(|row| u8::from(booleans.is_valid(row) && booleans.value(row)))
                    .collect();
                self.values.update(&bytes);
            }
            DataType::Utf8 => self.texts(array.as_string::<i32>()),
            // The v1 text all the same, written without chrono's formatter.
            _ => match crate::calendar_text::texts(array) {
                Some(text) => self.texts(&text),
                None => self.texts(&text_array(array)),
            },
        }
    }

    /// The column's part of the digest: its three hashes.
    pub fn finish(&self) -> [u8; 96] {
        let mut out = [0u8; 96];
        out[..32].copy_from_slice(self.values.finalize().as_bytes());
        out[32..64].copy_from_slice(self.lengths.finalize().as_bytes());
        out[64..].copy_from_slice(self.nulls.finalize().as_bytes());
        out
    }

    fn fixed<T: ArrowPrimitiveType, const N: usize>(
        &mut self,
        array: &PrimitiveArray<T>,
        le_bytes: fn(T::Native) -> [u8; N],
    ) {
        let values = array.values();
        if array.null_count() == 0 && cfg!(target_endian = "little") {
            // SAFETY: a primitive slice viewed as its bytes (no padding in i32, i64, f64); on
            // a little-endian machine those are the little-endian bytes.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    values.as_ptr().cast::<u8>(),
                    std::mem::size_of_val(&values[..]),
                )
            };
            self.values.update(bytes);
            return;
        }
        let mut bytes = Vec::with_capacity(values.len() * N);
        for (row, &value) in values.iter().enumerate() {
            if array.is_valid(row) {
                bytes.extend_from_slice(&le_bytes(value));
            } else {
                bytes.extend_from_slice(&[0; N]);
            }
        }
        self.values.update(&bytes);
    }

    fn texts(&mut self, array: &StringArray) {
        let offsets = array.value_offsets();
        let mut lengths = Vec::with_capacity(array.len() * 4);
        let mut nulls_hold_bytes = false;
        for row in 0..array.len() {
            let length = (offsets[row + 1] - offsets[row]) as u32;
            if array.is_null(row) {
                nulls_hold_bytes |= length > 0;
                lengths.extend_from_slice(&0u32.to_le_bytes());
            } else {
                lengths.extend_from_slice(&length.to_le_bytes());
            }
        }
        self.lengths.update(&lengths);
        if !nulls_hold_bytes {
            let (Some(&first), Some(&last)) = (offsets.first(), offsets.last()) else {
                return;
            };
            self.values
                .update(&array.values()[first as usize..last as usize]);
            return;
        }
        for row in 0..array.len() {
            if array.is_valid(row) {
                self.values.update(array.value(row).as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{BooleanArray, Date32Array, Float64Array, Int64Array};

    use super::*;

    fn digest(arrays: &[ArrayRef]) -> [u8; 96] {
        let mut column = ColumnDigest::new();
        let mut first_row = 0;
        for array in arrays {
            column.update(array, first_row);
            first_row += array.len() as u64;
        }
        column.finish()
    }

    /// The documented streams, built by hand, for every type (nulls included), and the same
    /// whatever the batches: one array, or its slices.
    #[test]
    fn each_type_hashes_the_documented_streams_whatever_the_batches() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![Some(-3), None, Some(7), Some(0)]));
        let floats: ArrayRef =
            Arc::new(Float64Array::from(vec![Some(1.5), Some(-0.0), None, None]));
        let dates: ArrayRef = Arc::new(Date32Array::from(vec![
            Some(19_000),
            None,
            Some(-1),
            Some(2),
        ]));
        let flags: ArrayRef = Arc::new(BooleanArray::from(vec![
            Some(true),
            None,
            Some(false),
            Some(true),
        ]));
        let texts: ArrayRef = Arc::new(StringArray::from(vec![
            Some("é"),
            None,
            Some(""),
            Some("ab"),
        ]));
        let le = |values: &[&[u8]]| values.concat();
        let nulls =
            |rows: &[u64]| -> Vec<u8> { rows.iter().flat_map(|r| r.to_le_bytes()).collect() };
        let expect = |values: Vec<u8>, lengths: Vec<u8>, null_rows: &[u64]| {
            let mut out = [0u8; 96];
            out[..32].copy_from_slice(blake3::hash(&values).as_bytes());
            out[32..64].copy_from_slice(blake3::hash(&lengths).as_bytes());
            out[64..].copy_from_slice(blake3::hash(&nulls(null_rows)).as_bytes());
            out
        };
        let cases = [
            (
                &ints,
                expect(
                    le(&[
                        &(-3i64).to_le_bytes(),
                        &[0; 8],
                        &7i64.to_le_bytes(),
                        &0i64.to_le_bytes(),
                    ]),
                    vec![],
                    &[1],
                ),
            ),
            (
                &floats,
                expect(
                    le(&[
                        &1.5f64.to_le_bytes(),
                        &(-0.0f64).to_le_bytes(),
                        &[0; 8],
                        &[0; 8],
                    ]),
                    vec![],
                    &[2, 3],
                ),
            ),
            (
                &dates,
                expect(
                    le(&[
                        &19_000i32.to_le_bytes(),
                        &[0; 4],
                        &(-1i32).to_le_bytes(),
                        &2i32.to_le_bytes(),
                    ]),
                    vec![],
                    &[1],
                ),
            ),
            (&flags, expect(vec![1, 0, 0, 1], vec![], &[1])),
            (
                &texts,
                expect(
                    "éab".as_bytes().to_vec(),
                    le(&[
                        &2u32.to_le_bytes(),
                        &0u32.to_le_bytes(),
                        &0u32.to_le_bytes(),
                        &2u32.to_le_bytes(),
                    ]),
                    &[1],
                ),
            ),
        ];
        for (array, expected) in cases {
            assert_eq!(
                digest(std::slice::from_ref(array)),
                expected,
                "{:?}",
                array.data_type()
            );
            let pieces = [array.slice(0, 1), array.slice(1, 2), array.slice(3, 1)];
            assert_eq!(
                digest(&pieces),
                expected,
                "{:?} in pieces",
                array.data_type()
            );
        }
    }

    /// A null whose slot holds bytes (arrow allows it) hashes as any null: no bytes, length 0.
    #[test]
    fn a_null_slot_s_bytes_are_not_hashed() {
        let clean: ArrayRef = Arc::new(StringArray::from(vec![Some("ab"), None, Some("c")]));
        let full = StringArray::from(vec!["ab", "zz", "c"]);
        let (offsets, values, _) = full.into_parts();
        let nulls = arrow::buffer::NullBuffer::from(vec![true, false, true]);
        let dirty: ArrayRef = Arc::new(StringArray::new(offsets, values, Some(nulls)));
        assert_eq!(digest(&[clean]), digest(&[dirty]));
    }
}
