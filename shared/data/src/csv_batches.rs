//! CSV record batches with the numeric and date columns parsed as they are decoded.
//!
//! Reading every non-string column as text and casting it after cost a sixth of a shardify run.
//! For Int64, Float64 and Date32 arrow's CSV decoder and `cast` call the same parser
//! (`arrow_cast::parse::Parser::parse`), so such a column can be decoded to its type at once:
//! the values are exactly those the cast gives. A value that does not parse fails the whole
//! batch in the decoder, so the bytes of each batch are kept until it decodes, and a failing
//! batch is decoded again from them as text; the cast then nulls the bad values and the reader
//! reports them with their rows, as before. Other columns (booleans and timestamps, whose CSV
//! and cast parsers differ) are always text.
//!
//! Dates are decoded as text (a `Utf8View`, which holds ten bytes in the view itself) and parsed
//! here: `YYYY-MM-DD` directly, anything else by the same `Parser::parse`. Arrow's parser took a
//! twentieth of a shardify run on a table with three date columns.

use std::io::Read;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Date32Array, RecordBatch, StringViewArray};
use arrow::compute::kernels::cast_utils::Parser;
use arrow::csv::ReaderBuilder;
use arrow::csv::reader::Decoder;
use arrow::datatypes::{DataType, Date32Type, Field, Schema, SchemaRef};
use arrow::error::ArrowError;

use crate::types::{Column, ColumnType};

/// The first size of the byte buffer; it doubles while a batch does not fit in half of it.
const FIRST_BUFFER: usize = 1 << 20;

/// The batches of one CSV file with a header. Each batch has the file's columns in order, the
/// direct ones typed unless the batch had a value that did not parse.
pub struct CsvBatches<R> {
    input: R,
    decoder: Decoder,
    /// The batches' schema when every direct column parsed.
    direct_schema: SchemaRef,
    /// The date columns, which the decoder reads as text.
    dates: Vec<usize>,
    text_schema: SchemaRef,
    batch_rows: usize,
    buffer: Vec<u8>,
    /// `buffer[..filled]` holds bytes read; `buffer[position..filled]` is not yet decoded.
    filled: usize,
    position: usize,
    at_end: bool,
    /// Whether the next batch is the file's first, whose bytes start with the header.
    first: bool,
}

impl<R> std::fmt::Debug for CsvBatches<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsvBatches")
            .field("batch_rows", &self.batch_rows)
            .field("position", &self.position)
            .finish_non_exhaustive()
    }
}

impl<R: Read> CsvBatches<R> {
    pub fn new(input: R, columns: &[Column], batch_rows: usize) -> CsvBatches<R> {
        let batch_rows = batch_rows.max(1);
        let direct_schema = schema(columns, true);
        let dates: Vec<usize> = (0..columns.len())
            .filter(|&i| direct_schema.field(i).data_type() == &DataType::Date32)
            .collect();
        let mut decoded_fields: Vec<Field> = direct_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for &i in &dates {
            decoded_fields[i] = decoded_fields[i].clone().with_data_type(DataType::Utf8View);
        }
        let decoder = ReaderBuilder::new(Arc::new(Schema::new(decoded_fields)))
            .with_header(true)
            .with_batch_size(batch_rows)
            .build_decoder();
        CsvBatches {
            input,
            decoder,
            direct_schema,
            dates,
            text_schema: schema(columns, false),
            batch_rows,
            buffer: vec![0; FIRST_BUFFER],
            filled: 0,
            position: 0,
            at_end: false,
            first: true,
        }
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ArrowError> {
        let mut start = self.position;
        loop {
            if self.position == self.filled && !self.at_end {
                self.fill(&mut start)?;
            }
            let decoded = self
                .decoder
                .decode(&self.buffer[self.position..self.filled])?;
            self.position += decoded;
            if self.decoder.capacity() == 0 || (decoded == 0 && self.at_end) {
                break;
            }
        }
        let first = std::mem::replace(&mut self.first, false);
        let typed = match self.decoder.flush() {
            Err(ArrowError::ParseError(_)) => None,
            Ok(Some(batch)) => self.with_dates(batch)?,
            other => return other,
        };
        match typed {
            Some(batch) => Ok(Some(batch)),
            None => self.decode_as_text(&self.buffer[start..self.position], first),
        }
    }

    /// `batch` with its date columns parsed; `None` when a date does not parse.
    fn with_dates(&self, batch: RecordBatch) -> Result<Option<RecordBatch>, ArrowError> {
        let mut columns = batch.columns().to_vec();
        for &i in &self.dates {
            let Some(dates) = parse_dates(columns[i].as_string_view()) else {
                return Ok(None);
            };
            columns[i] = Arc::new(dates) as ArrayRef;
        }
        RecordBatch::try_new(self.direct_schema.clone(), columns).map(Some)
    }

    /// Reads more bytes after `filled`, first making room: the bytes of the batch under way
    /// (from `start`) are kept, moved to the front or given a larger buffer.
    fn fill(&mut self, start: &mut usize) -> Result<(), ArrowError> {
        if self.filled == self.buffer.len() {
            if *start >= self.buffer.len() / 2 {
                self.buffer.copy_within(*start..self.filled, 0);
                self.filled -= *start;
                self.position -= *start;
                *start = 0;
            } else {
                self.buffer.resize(self.buffer.len() * 2, 0);
            }
        }
        let read = loop {
            match self.input.read(&mut self.buffer[self.filled..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        self.filled += read;
        self.at_end = read == 0;
        Ok(())
    }

    /// A batch's bytes decoded again, every non-string column as text.
    fn decode_as_text(
        &self,
        bytes: &[u8],
        header: bool,
    ) -> Result<Option<RecordBatch>, ArrowError> {
        let mut decoder = ReaderBuilder::new(self.text_schema.clone())
            .with_header(header)
            .with_batch_size(self.batch_rows + usize::from(header))
            .build_decoder();
        let mut rest = bytes;
        while !rest.is_empty() {
            let decoded = decoder.decode(rest)?;
            if decoded == 0 {
                break;
            }
            rest = &rest[decoded..];
        }
        decoder.decode(&[])?;
        decoder.flush()
    }
}

impl<R: Read> Iterator for CsvBatches<R> {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_batch().transpose()
    }
}

/// Dates decoded as text, parsed as the CSV decoder and the cast parse them
/// (`Date32Type::parse`); `None` when a value does not parse.
fn parse_dates(text: &StringViewArray) -> Option<Date32Array> {
    let mut days = Vec::with_capacity(text.len());
    for view in text.iter() {
        days.push(match view {
            None => 0,
            Some(value) => plain_date(value.as_bytes()).or_else(|| Date32Type::parse(value))?,
        });
    }
    Some(Date32Array::new(days.into(), text.nulls().cloned()))
}

/// Days from 1970-01-01 of a valid `YYYY-MM-DD` (proleptic Gregorian, as chrono); `None` for
/// any other text, which is left to arrow's parser.
fn plain_date(text: &[u8]) -> Option<i32> {
    let &[y0, y1, y2, y3, b'-', m0, m1, b'-', d0, d1] = text else {
        return None;
    };
    let digit = |c: u8| c.checked_sub(b'0').filter(|d| *d < 10).map(i32::from);
    let year = ((digit(y0)? * 10 + digit(y1)?) * 10 + digit(y2)?) * 10 + digit(y3)?;
    let month = digit(m0)? * 10 + digit(m1)?;
    let day = digit(d0)? * 10 + digit(d1)?;
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        1..=12 => 31,
        _ => return None,
    };
    if !(1..=month_days).contains(&day) {
        return None;
    }
    // H. Hinnant's days-from-civil: years start in March, so the leap day ends a year.
    let year = year - i32::from(month <= 2);
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    Some(era * 146_097 + day_of_era - 719_468)
}

/// The batches' columns: their own type where the decoder and the cast parse alike (`direct`;
/// `CsvBatches` decodes the dates of such a batch as text and parses them itself), else text.
/// A string column is read as the `Utf8` it stays; other text as `Utf8View`, which holds a
/// value of up to 12 bytes (any number or date) in the view itself: building a `Utf8` array
/// copied each value into a growing buffer.
pub fn schema(columns: &[Column], direct: bool) -> SchemaRef {
    Arc::new(Schema::new(
        columns
            .iter()
            .map(|c| {
                let data_type = match c.column_type {
                    ColumnType::String => DataType::Utf8,
                    ColumnType::Int64 | ColumnType::Float64 | ColumnType::Date if direct => {
                        c.column_type.data_type()
                    }
                    _ => DataType::Utf8View,
                };
                Field::new(&c.name, data_type, true)
            })
            .collect::<Vec<_>>(),
    ))
}

#[cfg(test)]
mod tests {
    use arrow::array::ArrayRef;
    use arrow::compute::{CastOptions, cast_with_options, concat_batches};

    use super::*;

    fn columns() -> Vec<Column> {
        [
            ("id", ColumnType::Int64),
            ("x", ColumnType::Float64),
            ("day", ColumnType::Date),
            ("flag", ColumnType::Bool),
            ("note", ColumnType::String),
        ]
        .into_iter()
        .map(|(name, column_type)| Column {
            name: name.into(),
            column_type,
        })
        .collect()
    }

    /// 50 rows; `bad` rows get an id that is not a number.
    fn csv(bad: &[usize]) -> Vec<u8> {
        let mut text = String::from("id,x,day,flag,note\n");
        for row in 0..50 {
            let id = if bad.contains(&row) {
                format!("x{row}")
            } else {
                row.to_string()
            };
            let x = if row % 7 == 0 {
                String::new()
            } else {
                format!("{}.25", row)
            };
            let note = if row % 5 == 0 {
                format!("\"line one, {row}\nline two\"")
            } else {
                format!("n{row}")
            };
            text += &format!(
                "{id},{x},2026-01-{:02},{},{note}\n",
                row % 28 + 1,
                row % 2 == 0
            );
        }
        text.into_bytes()
    }

    /// Hands out at most `step` bytes per read, to cut records and fields anywhere.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(out.len()).min(self.0.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// Every batch cast to the column types, as `read` does, and joined.
    fn typed(batches: Vec<RecordBatch>) -> RecordBatch {
        typed_as(&columns(), batches)
    }

    fn typed_as(columns: &[Column], batches: Vec<RecordBatch>) -> RecordBatch {
        let target = Arc::new(Schema::new(
            columns
                .iter()
                .map(|c| Field::new(&c.name, c.column_type.data_type(), true))
                .collect::<Vec<_>>(),
        ));
        let cast: Vec<RecordBatch> = batches
            .iter()
            .map(|batch| {
                let arrays: Vec<ArrayRef> = batch
                    .columns()
                    .iter()
                    .zip(target.fields())
                    .map(|(column, field)| {
                        cast_with_options(column, field.data_type(), &CastOptions::default())
                            .unwrap()
                    })
                    .collect();
                RecordBatch::try_new(target.clone(), arrays).unwrap()
            })
            .collect();
        concat_batches(&target, &cast).unwrap()
    }

    /// Whatever the reads, the buffer and the bad values, the rows are those of decoding all
    /// as text and casting; batches with a bad value (the first, with the header, among them)
    /// come back as text, the others typed.
    #[test]
    fn gives_the_casts_values_and_falls_back_to_text_per_batch() {
        let bytes = csv(&[1, 23]);
        let expected = typed(
            ReaderBuilder::new(schema(&columns(), false))
                .with_header(true)
                .with_batch_size(1000)
                .build(&bytes[..])
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap(),
        );
        for (step, buffer) in [(1 << 20, FIRST_BUFFER), (1, 7), (13, 64), (4096, 100)] {
            let mut reader = CsvBatches::new(Trickle(&bytes, step), &columns(), 8);
            reader.buffer = vec![0; buffer];
            let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
            assert_eq!(batches.len(), 7, "step {step}");
            let text_batches: Vec<usize> = (0..batches.len())
                .filter(|&i| batches[i].column(0).data_type() == &DataType::Utf8View)
                .collect();
            assert_eq!(text_batches, vec![0, 2], "step {step}");
            assert_eq!(typed(batches), expected, "step {step}, buffer {buffer}");
        }
    }

    /// A date that does not parse (February 30th) sends its batch back as text, like any bad
    /// value, and the rows are still those of the cast.
    #[test]
    fn a_bad_date_sends_its_batch_back_as_text() {
        let text = String::from_utf8(csv(&[])).unwrap();
        let bytes = text
            .replacen(",2026-01-20,", ",2026-02-30,", 1)
            .into_bytes();
        assert_ne!(bytes, csv(&[]));
        let expected = typed(
            ReaderBuilder::new(schema(&columns(), false))
                .with_header(true)
                .build(&bytes[..])
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap(),
        );
        let batches: Vec<RecordBatch> = CsvBatches::new(&bytes[..], &columns(), 8)
            .collect::<Result<_, _>>()
            .unwrap();
        let text_batches: Vec<usize> = (0..batches.len())
            .filter(|&i| batches[i].column(0).data_type() == &DataType::Utf8View)
            .collect();
        assert_eq!(text_batches, vec![2]);
        assert_eq!(batches[0].column(2).data_type(), &DataType::Date32);
        assert_eq!(typed(batches), expected);
    }

    /// The real tables read as decoding all as text and casting reads them, also telco with a
    /// bill typed by hand as `n/a` (the batch holding it comes back as text, the rest typed).
    #[test]
    fn real_tables_read_as_text_and_cast_read_them() {
        let telco = std::fs::read(real("telco").join("telco.csv")).unwrap();
        let text = String::from_utf8(telco.clone()).unwrap();
        let dirty = text
            .replacen(",29.85,29.85\n", ",29.85,n/a\n", 1)
            .into_bytes();
        assert_ne!(dirty, telco);
        let cases = [
            ("telco", telco, 0),
            (
                "email",
                std::fs::read(real("email").join("email.csv")).unwrap(),
                0,
            ),
            ("telco n/a", dirty, 1),
            (
                "economics",
                std::fs::read(real("economics").join("economics.csv")).unwrap(),
                0,
            ),
        ];
        for (table, bytes, text_batches) in cases {
            let root = real(table.split(' ').next().unwrap());
            let snapshot =
                crate::read::Snapshot::open(&root, &std::collections::BTreeMap::new()).unwrap();
            let columns = &snapshot.columns;
            let expected = ReaderBuilder::new(schema(columns, false))
                .with_header(true)
                .with_batch_size(100)
                .build(&bytes[..])
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let batches: Vec<RecordBatch> = CsvBatches::new(&bytes[..], columns, 100)
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(batches.len() > 3, "{table}");
            if table == "economics" {
                // Its month column is a date, parsed here in every batch.
                assert!(
                    batches
                        .iter()
                        .all(|batch| batch.column(1).data_type() == &DataType::Date32)
                );
            }
            let direct = schema(columns, true);
            let as_text = batches
                .iter()
                .filter(|batch| batch.schema() != direct)
                .count();
            assert_eq!(
                as_text, text_batches,
                "{table}: batches decoded again as text"
            );
            assert_eq!(
                typed_as(columns, batches),
                typed_as(columns, expected),
                "{table}"
            );
        }
    }

    fn real(table: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/real")
            .join(table)
            .join("snapshot")
    }

    /// The direct date parse gives arrow's parser's days for every day of years 0 to 9999, and
    /// leaves to it (or refuses with it) every other text: impossible days and months, other
    /// shapes, signs and spaces.
    #[test]
    fn plain_dates_are_the_days_arrow_parses() {
        let mut checked = 0;
        for year in 0..=9999 {
            for month in 0..=13 {
                for day in 0..=32 {
                    let text = format!("{year:04}-{month:02}-{day:02}");
                    let arrow = Date32Type::parse(&text);
                    match plain_date(text.as_bytes()) {
                        Some(days) => {
                            assert_eq!(Some(days), arrow, "{text}");
                            checked += 1;
                        }
                        None => assert_eq!(arrow, None, "{text}"),
                    }
                }
            }
        }
        assert_eq!(checked, 3_652_425);
        for text in [
            "2026-7-01",
            "2026-07-1",
            "+026-07-01",
            "2026/07/01",
            " 2026-07-01",
            "2026-07-01 ",
            "2026-07-01T00:00:00",
            "20260701",
            "2026-0a-01",
            "",
            "-001-01-01",
        ] {
            assert_eq!(plain_date(text.as_bytes()), None, "{text} is left to arrow");
        }
        let text = StringViewArray::from(vec![Some("2026-07-01"), None, Some("2026-7-2")]);
        let parsed = parse_dates(&text).unwrap();
        assert_eq!(parsed.value(0), Date32Type::parse("2026-07-01").unwrap());
        assert!(parsed.is_null(1));
        assert_eq!(parsed.value(2), Date32Type::parse("2026-7-2").unwrap());
        assert!(parse_dates(&StringViewArray::from(vec!["2026-02-30"])).is_none());
    }

    #[test]
    fn a_ragged_row_is_an_error() {
        let mut bytes = csv(&[]);
        bytes.extend_from_slice(b"1,2\n");
        let result: Result<Vec<RecordBatch>, _> =
            CsvBatches::new(&bytes[..], &columns(), 8).collect();
        assert!(
            result
                .unwrap_err()
                .to_string()
                .contains("incorrect number of fields")
        );
    }
}
