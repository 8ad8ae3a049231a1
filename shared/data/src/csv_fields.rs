//! The fields of CSV records, found sixteen bytes at a time: the tokenizer of `CsvBatches`.
//!
//! arrow's CSV decoder runs csv_core's state machine over every byte and copies each field into
//! a buffer of its own before the columns are built; on the 1 GiB churn CSV those two were a
//! fifth of a shardify run. Here the bytes that matter (comma, quote, CR, LF) are found with
//! vector compares, and a field is a span of the input, copied once, into its column.
//!
//! Only the plain RFC 4180 shape is handled: fields separated by commas, optionally quoted
//! (a doubled quote inside quotes is a quote), records ended by LF, CRLF or CR, every record
//! with the header's number of fields. Anything else (a blank line, a quote inside an unquoted
//! field, text after a closing quote, a ragged record) is `Scan::Unusual`, and the caller
//! decodes that batch with arrow's decoder, which gives the same rows or the same error as
//! before.

/// Where a scan stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Scan {
    /// The records asked for were found, or every record of the input (at its end).
    Done,
    /// The input ends inside a record: more bytes are needed.
    NeedMore,
    /// Something this tokenizer leaves to arrow's decoder.
    Unusual,
}

/// The records found so far in a batch's bytes, field by field.
#[derive(Debug, Default)]
pub struct Fields {
    /// Each field's start and end in the batch's bytes (quotes excluded), record after record.
    pub spans: Vec<(u32, u32)>,
    /// The fields (indices into `spans`) with a doubled quote to undo, in order.
    pub escaped: Vec<usize>,
    /// Records found.
    pub records: usize,
    /// Bytes of those records, terminators included.
    pub consumed: usize,
}

/// How many records a scan looks for.
#[derive(Debug, Clone, Copy)]
pub struct Want {
    pub records: usize,
    /// Stop sooner, at the end of a record, once this many bytes are taken and at least
    /// `least` records found.
    pub bytes: usize,
    pub least: usize,
}

impl Want {
    /// `records` records, however many bytes they take.
    #[cfg(test)]
    pub fn records(records: usize) -> Want {
        Want {
            records,
            bytes: usize::MAX,
            least: 0,
        }
    }

    fn satisfied(&self, records: usize, consumed: usize) -> bool {
        records >= self.records || (consumed >= self.bytes && records >= self.least)
    }
}

const COMMA: u8 = b',';
const QUOTE: u8 = b'"';
const CR: u8 = b'\r';
const LF: u8 = b'\n';

impl Fields {
    pub fn clear(&mut self) {
        self.spans.clear();
        self.escaped.clear();
        self.records = 0;
        self.consumed = 0;
    }

    /// Finds records of `columns` fields in `bytes` (a batch's bytes from its first record)
    /// after those already found, until `want` is met. `at_end`: no bytes follow `bytes`.
    /// On `NeedMore` the records found stay, and the scan resumes after them once the caller
    /// has more bytes (the same from the batch's start, more after).
    pub fn scan(&mut self, bytes: &[u8], at_end: bool, columns: usize, want: Want) -> Scan {
        if bytes.len() > u32::MAX as usize {
            return Scan::Unusual;
        }
        let mut specials = Specials::new(bytes, self.consumed);
        while !want.satisfied(self.records, self.consumed) {
            let record_start = self.consumed;
            if record_start == bytes.len() {
                return if at_end { Scan::Done } else { Scan::NeedMore };
            }
            let (fields, escaped) = (self.spans.len(), self.escaped.len());
            match self.record(bytes, at_end, &mut specials, record_start) {
                Ok(next) if self.spans.len() - fields == columns => {
                    let blank = columns == 1
                        && self.spans[fields].0 == self.spans[fields].1
                        && bytes[record_start] != QUOTE;
                    if blank {
                        return Scan::Unusual;
                    }
                    self.records += 1;
                    self.consumed = next;
                }
                Ok(_) => return Scan::Unusual,
                Err(scan) => {
                    self.spans.truncate(fields);
                    self.escaped.truncate(escaped);
                    return scan;
                }
            }
        }
        Scan::Done
    }

    /// Pushes the fields of the record at `start`; returns where the next record starts.
    fn record(
        &mut self,
        bytes: &[u8],
        at_end: bool,
        specials: &mut Specials,
        start: usize,
    ) -> Result<usize, Scan> {
        let more = if at_end {
            Scan::Unusual
        } else {
            Scan::NeedMore
        };
        let mut field = start;
        loop {
            // Where the field ends, and the byte after it (None at the end of the input).
            let (span, after) = if bytes.get(field) == Some(&QUOTE) {
                specials.pop_from(field + 1);
                let mut escaped = false;
                loop {
                    let Some(quote) = specials.next_quote() else {
                        // An open quote at the end of the input.
                        return Err(more);
                    };
                    match bytes.get(quote + 1) {
                        Some(&QUOTE) => {
                            escaped = true;
                            specials.pop_from(quote + 2);
                        }
                        next => {
                            if escaped {
                                self.escaped.push(self.spans.len());
                            }
                            let after = next.map(|_| quote + 1);
                            if after.is_none() && !at_end {
                                return Err(Scan::NeedMore);
                            }
                            break ((field + 1, quote), after);
                        }
                    }
                }
            } else {
                match specials.next_from(field) {
                    Some(end) if bytes[end] == QUOTE => return Err(Scan::Unusual),
                    Some(end) => ((field, end), Some(end)),
                    None if at_end => ((field, bytes.len()), None),
                    None => return Err(Scan::NeedMore),
                }
            };
            self.spans.push((span.0 as u32, span.1 as u32));
            let Some(after) = after else {
                // The last record, without a terminator.
                return Ok(bytes.len());
            };
            specials.pop_from(after + 1);
            match bytes[after] {
                COMMA => field = after + 1,
                LF => return Ok(after + 1),
                CR => {
                    return match bytes.get(after + 1) {
                        Some(&LF) => {
                            specials.pop_from(after + 2);
                            Ok(after + 2)
                        }
                        Some(_) => Ok(after + 1),
                        // A CR at the end of what was read: an LF may follow.
                        None if at_end => Ok(after + 1),
                        None => Err(Scan::NeedMore),
                    };
                }
                // Text after a closing quote.
                _ => return Err(Scan::Unusual),
            }
        }
    }
}

/// `span` of `bytes` with each doubled quote made one.
pub fn unescape(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut quote = false;
    for &b in bytes {
        if b == QUOTE && quote {
            quote = false;
            continue;
        }
        quote = b == QUOTE;
        out.push(b);
    }
    out
}

/// The positions of commas, quotes, CRs and LFs in `bytes`, in order, from a start.
struct Specials<'a> {
    bytes: &'a [u8],
    /// The block `mask` covers starts here.
    block: usize,
    /// Bit i: `bytes[block + i]` is special and not yet taken.
    mask: u64,
}

impl<'a> Specials<'a> {
    fn new(bytes: &'a [u8], from: usize) -> Specials<'a> {
        Specials {
            bytes,
            block: from,
            mask: block_mask(bytes, from),
        }
    }

    /// The next special position, taken.
    fn next(&mut self) -> Option<usize> {
        while self.mask == 0 {
            self.block += 64;
            if self.block >= self.bytes.len() {
                self.block = self.bytes.len();
                return None;
            }
            self.mask = block_mask(self.bytes, self.block);
        }
        let bit = self.mask.trailing_zeros() as usize;
        self.mask &= self.mask - 1;
        Some(self.block + bit)
    }

    /// The next special position at or after `from`, taken (those before are dropped).
    fn next_from(&mut self, from: usize) -> Option<usize> {
        self.pop_from(from);
        self.next()
    }

    /// The next quote, taken (other specials before it are dropped: inside quotes they are
    /// text).
    fn next_quote(&mut self) -> Option<usize> {
        loop {
            let at = self.next()?;
            if self.bytes[at] == QUOTE {
                return Some(at);
            }
        }
    }

    /// Drops the specials before `from`.
    fn pop_from(&mut self, from: usize) {
        if from >= self.block + 64 {
            self.block = from;
            self.mask = block_mask(self.bytes, from);
        } else if from > self.block {
            self.mask &= u64::MAX << (from - self.block);
        }
    }
}

/// Bit i set when `bytes[at + i]` is a comma, quote, CR or LF (64 bytes, fewer at the end).
fn block_mask(bytes: &[u8], at: usize) -> u64 {
    let Some(block) = bytes.get(at..at + 64) else {
        let tail = bytes.get(at..).unwrap_or(&[]);
        return tail
            .iter()
            .enumerate()
            .filter(|(_, b)| matches!(**b, COMMA | QUOTE | CR | LF))
            .fold(0, |mask, (i, _)| mask | 1 << i);
    };
    simd_mask(block.try_into().expect("64 bytes"))
}

#[cfg(target_arch = "x86_64")]
fn simd_mask(block: &[u8; 64]) -> u64 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8,
    };
    // SAFETY: SSE2 is part of every x86_64; each load reads 16 of the block's 64 bytes.
    unsafe {
        let (comma, quote, cr, lf) = (
            _mm_set1_epi8(COMMA as i8),
            _mm_set1_epi8(QUOTE as i8),
            _mm_set1_epi8(CR as i8),
            _mm_set1_epi8(LF as i8),
        );
        let mut mask = 0u64;
        for part in 0..4 {
            let v = _mm_loadu_si128(block.as_ptr().add(part * 16).cast::<__m128i>());
            let hits = _mm_or_si128(
                _mm_or_si128(_mm_cmpeq_epi8(v, comma), _mm_cmpeq_epi8(v, quote)),
                _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, lf)),
            );
            mask |= (_mm_movemask_epi8(hits) as u16 as u64) << (part * 16);
        }
        mask
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn simd_mask(block: &[u8; 64]) -> u64 {
    block
        .iter()
        .enumerate()
        .filter(|(_, b)| matches!(**b, COMMA | QUOTE | CR | LF))
        .fold(0, |mask, (i, _)| mask | 1 << i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(text: &str, columns: usize, at_end: bool) -> (Scan, Vec<String>, usize) {
        let mut found = Fields::default();
        let scan = found.scan(text.as_bytes(), at_end, columns, Want::records(usize::MAX));
        let values = found
            .spans
            .iter()
            .enumerate()
            .map(|(i, &(a, b))| {
                let raw = &text.as_bytes()[a as usize..b as usize];
                let value = if found.escaped.contains(&i) {
                    unescape(raw)
                } else {
                    raw.to_vec()
                };
                String::from_utf8(value).unwrap()
            })
            .collect();
        (scan, values, found.records)
    }

    #[test]
    fn finds_plain_quoted_and_escaped_fields_across_terminators() {
        let long = "x".repeat(150);
        let text = format!(
            "a,b,c\n1,\"two, too\",\"say \"\"hi\"\"\"\r\n,{long},\"\"\r\"line\none\",é,\"\"\"\"\n4,5,6"
        );
        let (scan, values, records) = fields(&text, 3, true);
        assert_eq!(scan, Scan::Done);
        assert_eq!(records, 5);
        let expected = [
            "a",
            "b",
            "c",
            "1",
            "two, too",
            "say \"hi\"",
            "",
            &long,
            "",
            "line\none",
            "é",
            "\"",
            "4",
            "5",
            "6",
        ];
        assert_eq!(values, expected);
        // The same bytes, not known to end: the last record may go on.
        let (scan, values, records) = fields(&text, 3, false);
        assert_eq!((scan, records), (Scan::NeedMore, 4));
        assert_eq!(values, expected[..12]);
    }

    #[test]
    fn stops_at_the_record_that_reaches_the_bytes_asked_for_but_not_before_the_least() {
        let text = b"a,b\n1,2\n3,4\n5,6\n";
        let want = |bytes, least| Want {
            records: 100,
            bytes,
            least,
        };
        let scanned = |want| {
            let mut found = Fields::default();
            assert_eq!(found.scan(text, true, 2, want), Scan::Done);
            (found.records, found.consumed)
        };
        // 4 bytes a record: the third record ends at 12, the first past 10.
        assert_eq!(scanned(want(10, 0)), (3, 12));
        assert_eq!(scanned(want(12, 0)), (3, 12));
        assert_eq!(scanned(want(1, 2)), (2, 8));
        assert_eq!(scanned(want(usize::MAX, 0)), (4, 16));
    }

    #[test]
    fn stops_at_the_records_asked_for_and_resumes_with_more_bytes() {
        let text = b"a,b\n\"1\n2\",3\r\n4,5\r\n6,7\n";
        let mut found = Fields::default();
        assert_eq!(found.scan(text, false, 2, Want::records(2)), Scan::Done);
        assert_eq!((found.records, found.consumed), (2, 13));
        // Every cut of the bytes: what is found before the cut is kept, the rest after.
        for cut in 0..text.len() {
            let mut found = Fields::default();
            let first = found.scan(&text[..cut], false, 2, Want::records(10));
            assert!(matches!(first, Scan::NeedMore), "cut {cut}");
            assert_eq!(
                found.scan(text, true, 2, Want::records(10)),
                Scan::Done,
                "cut {cut}"
            );
            assert_eq!(found.records, 4, "cut {cut}");
            assert_eq!(found.consumed, text.len(), "cut {cut}");
            assert_eq!(found.spans.len(), 8, "cut {cut}");
            assert_eq!(found.spans[2], (5, 8), "cut {cut}");
        }
    }

    #[test]
    fn leaves_what_it_does_not_handle_to_arrow() {
        for text in [
            "a,b\n1,2\n\n3,4\n", // a blank line
            "a,b\n1,x\"y\n",     // a quote inside an unquoted field
            "a,b\n\"1\"x,2\n",   // text after a closing quote
            "a,b\n1,2,3\n",      // too many fields
            "a,b\n1\n",          // too few
            "a,b\n1,\"open\n",   // an open quote at the end
        ] {
            assert_eq!(fields(text, 2, true).0, Scan::Unusual, "{text:?}");
        }
        assert_eq!(fields("a\n1\n\n2\n", 1, true).0, Scan::Unusual);
        assert_eq!(fields("a\n1\n\"\"\n2\n", 1, true).0, Scan::Done);
    }

    #[test]
    fn the_vector_mask_is_the_bytes_mask() {
        let bytes: Vec<u8> = (0..200u32)
            .map(|i| b"ab,\"\r\nxyz"[i as usize * 7 % 9])
            .collect();
        for at in 0..bytes.len() {
            let expected = bytes[at..]
                .iter()
                .take(64)
                .enumerate()
                .filter(|(_, b)| matches!(**b, COMMA | QUOTE | CR | LF))
                .fold(0u64, |m, (i, _)| m | 1 << i);
            assert_eq!(block_mask(&bytes, at), expected, "at {at}");
        }
    }
}
