//! The shuffle's gather of a text column: what arrow's `interleave` gives for `Utf8` parts, with
//! each short value copied as one fixed-size block.
//!
//! On a table of short rows (ids, codes, a few words) arrow's `interleave_bytes` and the
//! `memcpy` call it makes for every value of a few bytes were a seventh of a shardify run: the
//! call, not the bytes, was the cost. As in the rows digest (`value_text`), a value of up to
//! `SHORT_TEXT` bytes with that many bytes readable from its start is copied as a 16-byte
//! block and the write position then moved by its own length.

use arrow::array::{Array, BooleanBufferBuilder, StringArray};
use arrow::buffer::{NullBuffer, OffsetBuffer, ScalarBuffer};

use crate::shards::value_text::SHORT_TEXT;

/// The values of `parts` at `indices` ((part, row) pairs), nulls included, as `interleave`
/// gives them; `None` when the result would pass the 2 GiB of 32-bit offsets (the caller then
/// lets `interleave` say so).
pub fn gather_strings(parts: &[&StringArray], indices: &[(usize, usize)]) -> Option<StringArray> {
    let mut offsets: Vec<i32> = Vec::with_capacity(indices.len() + 1);
    offsets.push(0);
    let mut total: usize = 0;
    for &(part, row) in indices {
        let bounds = parts[part].value_offsets();
        total += (bounds[row + 1] - bounds[row]) as usize;
        offsets.push(i32::try_from(total).ok()?);
    }
    // Room for the last value's fixed-size block past the end.
    let mut values: Vec<u8> = Vec::with_capacity(total + SHORT_TEXT);
    let destination = values.as_mut_ptr();
    let mut at = 0;
    for &(part, row) in indices {
        let array = parts[part];
        let bounds = array.value_offsets();
        let (start, end) = (bounds[row] as usize, bounds[row + 1] as usize);
        let source = array.values().as_slice();
        let text = &source[start..end];
        let block = (text.len() <= SHORT_TEXT)
            .then(|| source.get(start..start + SHORT_TEXT))
            .flatten();
        // SAFETY: `values` has room for `total + SHORT_TEXT` bytes and `at + text.len()` never
        // passes `total`, so a block of SHORT_TEXT bytes at `at` is in bounds; the sources are
        // checked slices.
        unsafe {
            match block {
                Some(block) => {
                    std::ptr::copy_nonoverlapping(block.as_ptr(), destination.add(at), SHORT_TEXT)
                }
                None => {
                    std::ptr::copy_nonoverlapping(text.as_ptr(), destination.add(at), text.len())
                }
            }
        }
        at += text.len();
    }
    // SAFETY: bytes `..total` were each written above (every value's own bytes, in order).
    unsafe { values.set_len(total) };
    let nulls = parts.iter().any(|part| part.null_count() > 0).then(|| {
        let mut valid = BooleanBufferBuilder::new(indices.len());
        for &(part, row) in indices {
            valid.append(parts[part].is_valid(row));
        }
        NullBuffer::new(valid.finish())
    });
    let nulls = nulls.filter(|nulls| nulls.null_count() > 0);
    // SAFETY: the offsets start at 0 and never decrease (lengths are added), and end at the
    // values' length; each value is a copy of a whole value of a `StringArray`, so valid UTF-8
    // cut at value boundaries.
    let offsets = unsafe { OffsetBuffer::new_unchecked(ScalarBuffer::from(offsets)) };
    Some(unsafe { StringArray::new_unchecked(offsets, values.into(), nulls) })
}

#[cfg(test)]
mod tests {
    use arrow::array::ArrayRef;
    use arrow::compute::interleave;

    use super::*;

    /// A small deterministic generator (the shuffle's splitmix64 over a counter), so the cases
    /// are the same on every run.
    struct Draws(u64);

    impl Draws {
        fn below(&mut self, n: usize) -> usize {
            self.0 += 1;
            (crate::shards::keys::splitmix64(self.0) % n as u64) as usize
        }
    }

    /// Texts of 0 to 40 bytes (the block's edge at 16 on both sides), some multi-byte, some
    /// null; a part may be a slice of a larger array, so its offsets do not start at 0.
    fn part(draws: &mut Draws, rows: usize, nulls: bool) -> StringArray {
        let texts: Vec<Option<String>> = (0..rows + 3)
            .map(|_| {
                if nulls && draws.below(7) == 0 {
                    return None;
                }
                let len = [0, 1, 5, 15, 16, 17, 40][draws.below(7)];
                Some(
                    (0..len)
                        .map(|i| {
                            if (i + len) % 9 == 0 {
                                'é'
                            } else {
                                (b'a' + (i % 26) as u8) as char
                            }
                        })
                        .collect(),
                )
            })
            .collect();
        let array = StringArray::from(texts);
        array.slice(2, rows)
    }

    #[test]
    fn gives_what_interleave_gives() {
        let mut draws = Draws(7);
        for case in 0..200 {
            let nulls = case % 3 != 0;
            let parts: Vec<StringArray> = (0..1 + draws.below(4))
                .map(|_| {
                    let rows = 1 + draws.below(60);
                    part(&mut draws, rows, nulls)
                })
                .collect();
            let indices: Vec<(usize, usize)> = (0..draws.below(150))
                .map(|_| {
                    let p = draws.below(parts.len());
                    (p, draws.below(parts[p].len()))
                })
                .collect();
            let refs: Vec<&StringArray> = parts.iter().collect();
            let dyns: Vec<&dyn Array> = parts.iter().map(|p| p as &dyn Array).collect();
            let ours: ArrayRef = std::sync::Arc::new(gather_strings(&refs, &indices).unwrap());
            let theirs = interleave(&dyns, &indices).unwrap();
            assert_eq!(&ours, &theirs, "case {case}");
            assert_eq!(ours.null_count(), theirs.null_count(), "case {case}");
        }
    }

    #[test]
    fn no_rows_and_the_last_value_at_the_buffer_s_end() {
        let one = StringArray::from(vec!["abc"]);
        assert_eq!(gather_strings(&[&one], &[]).unwrap().len(), 0);
        let got = gather_strings(&[&one], &[(0, 0), (0, 0)]).unwrap();
        assert_eq!(got, StringArray::from(vec!["abc", "abc"]));
    }
}
