//! CSV record batches with the numeric and date columns parsed as they are decoded.
//!
//! Reading every non-string column as text and casting it after cost a sixth of a shardify run.
//! For Int64, Float64 and Date32 arrow's CSV decoder and `cast` call the same parser
//! (`arrow_cast::parse::Parser::parse`), so such a column can be decoded to its type at once:
//! the values are exactly those the cast gives. A value that does not parse fails the whole
//! batch in the decoder, so the bytes of each batch are kept until it decodes, and a failing
//! batch is decoded again from them as text; the cast then nulls the bad values and the reader
//! reports them with their rows, as before.
//!
//! Dates are decoded as text (a `Utf8View`, which holds ten bytes in the view itself) and parsed
//! here: `YYYY-MM-DD` directly, anything else by the same `Parser::parse`. Arrow's parser took a
//! twentieth of a shardify run on a table with three date columns.
//!
//! Booleans and timestamps, whose CSV decoder parses differently from `cast`, are parsed here as
//! `cast` parses them: `true`/`false` and `YYYY-MM-DD HH:MM:SS` directly, and a column holding
//! any other text by `cast` itself (an error fails the batch as above). Decoding them as text
//! and casting after was a fifth of a shardify run on short rows with a timestamp.

use std::io::Read;
use std::sync::Arc;

use std::borrow::Cow;

use arrow::array::{
    Array, ArrayRef, ArrowPrimitiveType, AsArray, BooleanArray, BooleanBufferBuilder, Date32Array,
    PrimitiveArray, RecordBatch, StringBuilder, StringViewArray, StringViewBuilder,
};
use arrow::buffer::NullBuffer;
use arrow::compute::{CastOptions, cast_with_options};

use crate::csv_fields::{self, Fields, Scan, Want};
use arrow::compute::kernels::cast_utils::Parser;
use arrow::csv::ReaderBuilder;
use arrow::datatypes::{
    DataType, Date32Type, Field, Float64Type, Int64Type, Schema, SchemaRef, TimeUnit,
    TimestampMicrosecondType,
};
use arrow::error::ArrowError;

use crate::calendar_text::{self, plain_date};
use crate::types::{Column, ColumnType};

/// The first size of the byte buffer; it doubles while a batch does not fit in half of it.
const FIRST_BUFFER: usize = 1 << 20;

/// Bytes of CSV after which a batch ends (at a record's end) before its `batch_rows`. Each
/// column is built in a pass over the batch's bytes, and the consumers pass over the built
/// columns one by one: a batch that fits in a core's cache is read from memory once, not once
/// a column. 64k rows of the wide churn table (20 MiB) made the date parsing wait on memory
/// (perf: half of its samples on the first byte of the date); batches of 1 MiB made
/// `ds-validate profile` 20-25% faster there (2 and 4 MiB: the same; 0.5 MiB slower), and
/// on short rows they are still 18k rows.
const BATCH_BYTES: usize = 1 << 20;

/// The batches of one CSV file with a header. Each batch has the file's columns in order (or
/// those of [`CsvBatches::projected`]), the direct ones typed unless the batch had a value that
/// did not parse.
///
/// A batch's records are found by `csv_fields` and its columns built from the spans found;
/// a batch that tokenizer leaves alone (see `Scan::Unusual`) is decoded by arrow's decoder,
/// as every batch once was, so its rows, or its error, are those arrow gives.
pub struct CsvBatches<R> {
    input: R,
    /// The schema arrow's decoder reads a batch with (dates, timestamps and booleans as text).
    decoded_schema: SchemaRef,
    /// The batches' schema when every direct column parsed.
    direct_schema: SchemaRef,
    /// The date, timestamp and boolean columns, which the decoder reads as text.
    parsed_here: Vec<usize>,
    text_schema: SchemaRef,
    batch_rows: usize,
    buffer: Vec<u8>,
    /// `buffer[..filled]` holds bytes read; `buffer[position..filled]` is not yet decoded.
    filled: usize,
    position: usize,
    at_end: bool,
    /// Whether the next batch is the file's first, whose bytes start with the header.
    first: bool,
    fields: Fields,
    /// The file's columns a batch is built with, in file order (all of them unless
    /// [`CsvBatches::projected`]). The others are only stepped over: a caller that reads a few
    /// columns of a wide file does not pay for building the rest (a long text column is most
    /// of a row's bytes).
    keep: Vec<usize>,
    /// `direct_schema` with the kept columns only.
    kept_schema: SchemaRef,
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
        let parsed_here: Vec<usize> = (0..columns.len())
            .filter(|&i| parsed_from_text(direct_schema.field(i).data_type()))
            .collect();
        let mut decoded_fields: Vec<Field> = direct_schema
            .fields()
            .iter()
            .map(|f| f.as_ref().clone())
            .collect();
        for &i in &parsed_here {
            decoded_fields[i] = decoded_fields[i].clone().with_data_type(DataType::Utf8View);
        }
        CsvBatches {
            input,
            decoded_schema: Arc::new(Schema::new(decoded_fields)),
            direct_schema: direct_schema.clone(),
            parsed_here,
            text_schema: schema(columns, false),
            batch_rows,
            buffer: vec![0; FIRST_BUFFER],
            filled: 0,
            position: 0,
            at_end: false,
            first: true,
            fields: Fields::default(),
            keep: (0..columns.len()).collect(),
            kept_schema: direct_schema,
        }
    }

    /// The batches with only the file's columns at `keep` (indices into the columns given to
    /// `new`, in increasing order), whatever path decodes a batch.
    pub fn projected(mut self, keep: Vec<usize>) -> Result<CsvBatches<R>, ArrowError> {
        self.kept_schema = Arc::new(self.direct_schema.project(&keep)?);
        self.keep = keep;
        Ok(self)
    }

    /// `batch` (every column of the file) with only the kept columns.
    fn project(&self, batch: RecordBatch) -> Result<RecordBatch, ArrowError> {
        if self.keep.len() == batch.num_columns() {
            return Ok(batch);
        }
        batch.project(&self.keep)
    }

    fn next_batch(&mut self) -> Result<Option<Pending>, ArrowError> {
        let mut start = self.position;
        let header = usize::from(self.first);
        let columns = self.direct_schema.fields().len();
        self.fields.clear();
        loop {
            let bytes = &self.buffer[start..self.filled];
            match self
                .fields
                .scan(bytes, self.at_end, columns, self.want(header))
            {
                Scan::Done => break,
                Scan::NeedMore => self.fill(&mut start)?,
                Scan::Unusual => return Ok(self.decode_with_arrow(start)?.map(Pending::Built)),
            }
        }
        let end = start + self.fields.consumed;
        let bytes = &self.buffer[start..end];
        // Fields are cut at ASCII bytes, so a batch of valid UTF-8 has valid UTF-8 fields; an
        // invalid one is left to arrow, which names the line and field.
        if std::str::from_utf8(bytes).is_err() {
            return Ok(self.decode_with_arrow(start)?.map(Pending::Built));
        }
        let first = std::mem::replace(&mut self.first, false);
        self.position = end;
        // No rows: the input ended (at or before the header, for an empty file).
        if self.fields.records <= header {
            return Ok(None);
        }
        Ok(Some(Pending::Scanned(Scanned {
            bytes: bytes.to_vec(),
            fields: std::mem::take(&mut self.fields),
            header,
            first,
            plan: self.plan(),
        })))
    }

    /// What building a scanned batch needs, apart from its bytes.
    fn plan(&self) -> Arc<Plan> {
        Arc::new(Plan {
            kept_schema: self.kept_schema.clone(),
            keep: self.keep.clone(),
            columns: self.direct_schema.fields().len(),
            text_schema: self.text_schema.clone(),
            batch_rows: self.batch_rows,
        })
    }

    /// The next batch, its columns not yet built where building them can wait (see
    /// [`Pending`]).
    pub fn next_pending(&mut self) -> Result<Option<Pending>, ArrowError> {
        self.next_batch()
    }

    /// What a batch's scan looks for: `batch_rows` records after the header, or fewer of
    /// [`BATCH_BYTES`] (at least one).
    fn want(&self, header: usize) -> Want {
        Want {
            records: self.batch_rows.saturating_add(header),
            bytes: BATCH_BYTES,
            least: header + 1,
        }
    }

    /// The batch at `start` decoded by arrow's decoder (and typed as `next_batch` types it).
    fn decode_with_arrow(&mut self, mut start: usize) -> Result<Option<RecordBatch>, ArrowError> {
        self.position = start;
        let mut decoder = ReaderBuilder::new(self.decoded_schema.clone())
            .with_header(self.first)
            .with_batch_size(self.batch_rows)
            .build_decoder();
        loop {
            if self.position == self.filled && !self.at_end {
                self.fill(&mut start)?;
            }
            let decoded = decoder.decode(&self.buffer[self.position..self.filled])?;
            self.position += decoded;
            if decoder.capacity() == 0 || (decoded == 0 && self.at_end) {
                break;
            }
        }
        let first = std::mem::replace(&mut self.first, false);
        let typed = match decoder.flush() {
            Err(ArrowError::ParseError(_)) => None,
            Ok(Some(batch)) => self.with_parsed_here(batch)?,
            other => return other?.map(|batch| self.project(batch)).transpose(),
        };
        match typed {
            Some(batch) => Ok(Some(batch)),
            None => self
                .plan()
                .decode_as_text(&self.buffer[start..self.position], first),
        }
    }

    /// `batch` with its date, timestamp and boolean columns parsed; `None` when a value does
    /// not parse.
    fn with_parsed_here(&self, batch: RecordBatch) -> Result<Option<RecordBatch>, ArrowError> {
        let mut columns = batch.columns().to_vec();
        for &i in &self.parsed_here {
            let text = columns[i].as_string_view();
            let parsed = match self.direct_schema.field(i).data_type() {
                DataType::Date32 => parse_dates(text).map(|dates| Arc::new(dates) as ArrayRef),
                data_type => cast_all(&columns[i], data_type),
            };
            let Some(parsed) = parsed else {
                return Ok(None);
            };
            columns[i] = parsed;
        }
        let batch = RecordBatch::try_new(self.direct_schema.clone(), columns)?;
        self.project(batch).map(Some)
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
}

impl<R: Read> Iterator for CsvBatches<R> {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.next_batch() {
            Ok(Some(pending)) => Some(pending.build()),
            Ok(None) => None,
            Err(error) => Some(Err(error)),
        }
    }
}

/// A batch as `CsvBatches` hands it out: built, or scanned with its columns still to build.
///
/// Finding a batch's records is one pass that must go front to back (a quote changes what
/// every later byte means); building its columns from the spans found is most of the work and
/// needs nothing from the other batches. A reader of one large file builds its scanned batches
/// on every core (shardify did a single-file snapshot on one core while the scan and the build
/// took turns). `build` gives the batch `next` gives.
pub enum Pending {
    Built(RecordBatch),
    Scanned(Scanned),
}

/// A scanned batch: its bytes, its fields' spans in them, and how to build it.
pub struct Scanned {
    bytes: Vec<u8>,
    fields: Fields,
    header: usize,
    first: bool,
    plan: Arc<Plan>,
}

/// What building a batch needs from its reader.
struct Plan {
    kept_schema: SchemaRef,
    keep: Vec<usize>,
    columns: usize,
    text_schema: SchemaRef,
    batch_rows: usize,
}

impl Pending {
    /// Rows the batch holds, known before it is built.
    pub fn rows(&self) -> usize {
        match self {
            Pending::Built(batch) => batch.num_rows(),
            Pending::Scanned(scanned) => scanned.fields.records - scanned.header,
        }
    }

    pub fn build(self) -> Result<RecordBatch, ArrowError> {
        let scanned = match self {
            Pending::Built(batch) => return Ok(batch),
            Pending::Scanned(scanned) => scanned,
        };
        let rows = scanned.fields.records - scanned.header;
        let plan = &scanned.plan;
        let built = match build_direct(
            &plan.kept_schema,
            &plan.keep,
            plan.columns,
            &scanned.bytes,
            &scanned.fields,
            scanned.header,
        ) {
            Some(batch) => batch,
            None => match plan.decode_as_text(&scanned.bytes, scanned.first)? {
                Some(batch) => batch,
                None => RecordBatch::new_empty(plan.kept_schema.clone()),
            },
        };
        if built.num_rows() != rows {
            return Err(ArrowError::CsvError(format!(
                "a batch scanned as {rows} records decoded as {}",
                built.num_rows()
            )));
        }
        Ok(built)
    }
}

impl Plan {
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
        decoder
            .flush()?
            .map(|batch| {
                if self.keep.len() == batch.num_columns() {
                    Ok(batch)
                } else {
                    batch.project(&self.keep)
                }
            })
            .transpose()
    }
}

/// The batch of the records in `fields` (after `header` of them, `columns` fields each), of the
/// columns at `keep` (whose fields `schema` holds), each built from its spans of `bytes`
/// (valid UTF-8) as arrow's decoder builds it: an empty value is null, a number or date parsed
/// by the parser arrow's decoder calls (`Parser::parse`). `None` when a value does not parse:
/// the caller decodes the batch as text, as for arrow's decoder.
fn build_direct(
    schema: &SchemaRef,
    keep: &[usize],
    columns: usize,
    bytes: &[u8],
    fields: &Fields,
    header: usize,
) -> Option<RecordBatch> {
    let rows = fields.records - header;
    let arrays = keep
        .iter()
        .zip(schema.fields())
        .map(|(&column, field)| {
            let values = FieldValues {
                bytes,
                fields,
                first: header * columns + column,
                step: columns,
                rows,
            };
            values.build(field.data_type())
        })
        .collect::<Option<Vec<ArrayRef>>>()?;
    RecordBatch::try_new(schema.clone(), arrays).ok()
}

/// One column's values in a batch's spans.
struct FieldValues<'a> {
    bytes: &'a [u8],
    fields: &'a Fields,
    /// The span of row 0, and the spans between rows.
    first: usize,
    step: usize,
    rows: usize,
}

impl FieldValues<'_> {
    /// Row `row`'s text, its doubled quotes undone.
    fn text(&self, row: usize) -> Cow<'_, str> {
        let index = self.first + row * self.step;
        let (start, end) = self.fields.spans[index];
        let raw = &self.bytes[start as usize..end as usize];
        let raw = if !self.fields.escaped.is_empty()
            && self.fields.escaped.binary_search(&index).is_ok()
        {
            Cow::Owned(csv_fields::unescape(raw))
        } else {
            Cow::Borrowed(raw)
        };
        // SAFETY: `bytes` is valid UTF-8 (checked by the caller) and spans start and end at
        // ASCII bytes (quotes, commas, terminators, the ends), so each is valid UTF-8; undoing
        // a doubled quote removes an ASCII byte.
        match raw {
            Cow::Borrowed(raw) => Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) }),
            Cow::Owned(raw) => Cow::Owned(unsafe { String::from_utf8_unchecked(raw) }),
        }
    }

    fn build(&self, data_type: &DataType) -> Option<ArrayRef> {
        Some(match data_type {
            DataType::Utf8 => {
                let capacity: usize = (0..self.rows)
                    .map(|row| {
                        let (start, end) = self.fields.spans[self.first + row * self.step];
                        (end - start) as usize
                    })
                    .sum();
                let mut builder = StringBuilder::with_capacity(self.rows, capacity);
                self.each_text(|text| builder.append_option(text));
                Arc::new(builder.finish())
            }
            DataType::Utf8View => {
                let mut builder = StringViewBuilder::with_capacity(self.rows);
                self.each_text(|text| builder.append_option(text));
                Arc::new(builder.finish())
            }
            DataType::Int64 => Arc::new(self.parsed::<Int64Type>(integer)?),
            // An infinity fails the batch here like any bad value, so that the cast path nulls
            // and reports it (see `read::finite`).
            DataType::Float64 => Arc::new(self.parsed::<Float64Type>(|text| {
                Float64Type::parse(text).filter(|value| !value.is_infinite())
            })?),
            DataType::Date32 => Arc::new(self.parsed::<Date32Type>(|text| {
                plain_date(text.as_bytes()).or_else(|| Date32Type::parse(text))
            })?),
            DataType::Timestamp(TimeUnit::Microsecond, None) => {
                match self.parsed::<TimestampMicrosecondType>(|text| {
                    calendar_text::parse_plain(text.as_bytes())
                }) {
                    Some(stamps) => Arc::new(stamps),
                    None => cast_all(&self.texts(), data_type)?,
                }
            }
            DataType::Boolean => match self.booleans() {
                Some(booleans) => Arc::new(booleans),
                None => cast_all(&self.texts(), data_type)?,
            },
            _ => return None,
        })
    }

    /// The column as `true`/`false` (empty values null), as `cast` reads those two words;
    /// `None` at any other text.
    fn booleans(&self) -> Option<BooleanArray> {
        let mut values = BooleanBufferBuilder::new(self.rows);
        let mut nulls = BooleanBufferBuilder::new(self.rows);
        for row in 0..self.rows {
            match &*self.text(row) {
                "" => {
                    values.append(false);
                    nulls.append(false);
                }
                "true" => {
                    values.append(true);
                    nulls.append(true);
                }
                "false" => {
                    values.append(false);
                    nulls.append(true);
                }
                _ => return None,
            }
        }
        let nulls = NullBuffer::new(nulls.finish());
        let nulls = (nulls.null_count() > 0).then_some(nulls);
        Some(BooleanArray::new(values.finish(), nulls))
    }

    /// The column's texts, empty values null.
    fn texts(&self) -> ArrayRef {
        let mut builder = StringViewBuilder::with_capacity(self.rows);
        self.each_text(|text| builder.append_option(text));
        Arc::new(builder.finish())
    }

    /// Calls `append` with each row's text in order, `None` for an empty one (a null).
    ///
    /// The spans are walked in order, and so are the fields with doubled quotes (the scan
    /// lists them in order): finding each row in that list by a search was a seventh of
    /// shardify's time on quoted text.
    fn each_text(&self, mut append: impl FnMut(Option<&str>)) {
        let escaped = &self.fields.escaped;
        let mut next = escaped.partition_point(|&index| index < self.first);
        let spans = self.fields.spans[self.first..]
            .iter()
            .step_by(self.step)
            .take(self.rows);
        for (row, &(start, end)) in spans.enumerate() {
            let index = self.first + row * self.step;
            while escaped.get(next).is_some_and(|&at| at < index) {
                next += 1;
            }
            let raw = &self.bytes[start as usize..end as usize];
            if escaped.get(next) == Some(&index) {
                let text = csv_fields::unescape(raw);
                // SAFETY: as in `text`: undoing a doubled quote removes an ASCII byte.
                append(Some(unsafe { std::str::from_utf8_unchecked(&text) }));
            } else if raw.is_empty() {
                append(None);
            } else {
                // SAFETY: as in `text`: the span starts and ends at ASCII bytes of valid UTF-8.
                append(Some(unsafe { std::str::from_utf8_unchecked(raw) }));
            }
        }
    }

    /// The column parsed by `parse`, empty values null; `None` when a value does not parse.
    ///
    /// The spans are walked in order and the null bitmap is begun at the first empty value:
    /// a column without nulls (the common case) builds none, and a value without doubled
    /// quotes is parsed where it lies.
    fn parsed<T: ArrowPrimitiveType>(
        &self,
        parse: impl Fn(&str) -> Option<T::Native>,
    ) -> Option<PrimitiveArray<T>> {
        let mut values = Vec::with_capacity(self.rows);
        let mut nulls: Option<BooleanBufferBuilder> = None;
        let spans = self.fields.spans[self.first..]
            .iter()
            .step_by(self.step)
            .take(self.rows);
        for (row, &(start, end)) in spans.enumerate() {
            if start == end {
                values.push(T::Native::default());
                nulls
                    .get_or_insert_with(|| {
                        let mut nulls = BooleanBufferBuilder::new(self.rows);
                        nulls.append_n(row, true);
                        nulls
                    })
                    .append(false);
                continue;
            }
            values.push(if self.fields.escaped.is_empty() {
                // SAFETY: as in `text`: the span starts and ends at ASCII bytes of valid UTF-8.
                parse(unsafe {
                    std::str::from_utf8_unchecked(&self.bytes[start as usize..end as usize])
                })?
            } else {
                parse(&self.text(row))?
            });
            if let Some(nulls) = nulls.as_mut() {
                nulls.append(true);
            }
        }
        let nulls = nulls.map(|mut nulls| NullBuffer::new(nulls.finish()));
        Some(PrimitiveArray::new(values.into(), nulls))
    }
}

/// An integer as `Int64Type::parse` reads it. Up to 18 digits cannot overflow, so they are read
/// without the overflow check the parse makes at every digit (that parse was a twentieth of
/// shardify's time on rows of integers); anything else goes to the parse itself.
fn integer(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    let (negative, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    if digits.is_empty() || digits.len() > 18 {
        return Int64Type::parse(text);
    }
    let mut value: i64 = 0;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return Int64Type::parse(text);
        }
        value = value * 10 + i64::from(digit);
    }
    Some(if negative { -value } else { value })
}

/// Whether a column of `data_type` is decoded as text and parsed here (`with_parsed_here`).
fn parsed_from_text(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Date32 | DataType::Boolean | DataType::Timestamp(_, _)
    )
}

/// `text` cast to `data_type` as the reader's cast would, every value parsed; `None` when one
/// does not (the batch is then decoded as text and the reader's cast counts the bad values).
fn cast_all(text: &ArrayRef, data_type: &DataType) -> Option<ArrayRef> {
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    cast_with_options(text, data_type, &options).ok()
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
                    ColumnType::Int64
                    | ColumnType::Float64
                    | ColumnType::Date
                    | ColumnType::Timestamp
                    | ColumnType::Bool
                        if direct =>
                    {
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

    #[test]
    fn a_batch_ends_after_its_bytes_even_when_more_rows_are_allowed() {
        // 3.5 MiB of 128-byte records (a header of 19 bytes first).
        let mut text = String::from("id,x,day,flag,note\n");
        let rows = 7 * BATCH_BYTES / 2 / 128;
        for row in 0..rows {
            let line = format!("{row},1.5,2026-01-02,true,");
            text += &line;
            text += &"n".repeat(127 - line.len());
            text += "\n";
        }
        let batches: Vec<RecordBatch> = CsvBatches::new(text.as_bytes(), &columns(), usize::MAX)
            .collect::<Result<_, _>>()
            .unwrap();
        let sizes: Vec<usize> = batches.iter().map(RecordBatch::num_rows).collect();
        // The first batch's record past BATCH_BYTES is the header's and 8192 records'.
        let per_batch = BATCH_BYTES / 128;
        assert_eq!(
            sizes,
            [per_batch, per_batch, per_batch, rows - 3 * per_batch]
        );
        let ids = typed(batches);
        let ids = ids.column(0).as_primitive::<Int64Type>();
        assert!(ids.values().iter().copied().eq(0..rows as i64));
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

    /// A projected reader gives the kept columns of the full reader's rows, in every path: a
    /// batch built directly, one decoded again as text (a bad id), one left to arrow's decoder
    /// (a blank line); a bad value in a column not kept does not send its batch back as text.
    #[test]
    fn a_projection_gives_the_kept_columns_of_every_path() {
        let text = String::from_utf8(csv(&[1, 23])).unwrap();
        let blank = text.replacen("\n10,", "\n\n10,", 1);
        assert_ne!(blank, text);
        for (case, bytes) in [
            ("bad ids", text.into_bytes()),
            ("blank line", blank.into_bytes()),
        ] {
            for keep in [vec![1, 2], vec![0, 4], vec![3], vec![0, 1, 2, 3, 4]] {
                let kept: Vec<Column> = keep.iter().map(|&i| columns()[i].clone()).collect();
                let full: Vec<RecordBatch> = CsvBatches::new(&bytes[..], &columns(), 8)
                    .collect::<Result<_, _>>()
                    .unwrap();
                let expected = typed(full).project(&keep).unwrap();
                for (step, buffer) in [(1 << 20, FIRST_BUFFER), (1, 7), (13, 64)] {
                    let mut reader = CsvBatches::new(Trickle(&bytes, step), &columns(), 8)
                        .projected(keep.clone())
                        .unwrap();
                    reader.buffer = vec![0; buffer];
                    let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>().unwrap();
                    assert!(batches.iter().all(|b| b.num_columns() == keep.len()));
                    let got = typed_as(&kept, batches);
                    assert_eq!(got, expected, "{case}, keep {keep:?}, step {step}");
                }
            }
        }
        // The ids of rows 1 and 23 are bad; without the id column every batch is typed.
        let bytes = csv(&[1, 23]);
        let batches: Vec<RecordBatch> = CsvBatches::new(&bytes[..], &columns(), 8)
            .projected(vec![1, 2])
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            batches
                .iter()
                .all(|b| b.column(0).data_type() == &DataType::Float64)
        );
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
    /// bill typed by hand as `n/a` (the batch holding it comes back as text, the rest typed),
    /// telco with CRLF line ends, and email with every field quoted (as some exporters write).
    #[test]
    fn real_tables_read_as_text_and_cast_read_them() {
        let telco = std::fs::read(real("telco").join("telco.csv")).unwrap();
        let text = String::from_utf8(telco.clone()).unwrap();
        let dirty = text
            .replacen(",29.85,29.85\n", ",29.85,n/a\n", 1)
            .into_bytes();
        assert_ne!(dirty, telco);
        let crlf = text.replace('\n', "\r\n").into_bytes();
        let email = String::from_utf8(std::fs::read(real("email").join("email.csv")).unwrap());
        let quoted: String = email
            .unwrap()
            .lines()
            .map(|line| format!("\"{}\"\n", line.replace(',', "\",\"")))
            .collect();
        let cases = [
            ("telco", telco, 0),
            ("telco crlf", crlf, 0),
            ("email quoted", quoted.into_bytes(), 0),
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
            // Every real shape here is one the fast tokenizer takes (none left to arrow).
            let mut fields = Fields::default();
            let found = fields.scan(&bytes, true, columns.len(), Want::records(usize::MAX));
            assert_eq!(found, Scan::Done, "{table}");
            let lines = bytes.iter().filter(|&&b| b == b'\n').count();
            assert_eq!(fields.records, lines, "{table}: records");
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

    /// Random CSV in every shape the tokenizer handles and some it leaves to arrow (blank
    /// lines, a quote inside a field, text after a closing quote), with CRLF, CR and LF,
    /// doubled quotes, multi-byte text, empty and bad values, with or without a final
    /// terminator: whatever the reads, buffer and batch size, the rows are arrow's.
    #[test]
    fn gives_arrows_rows_for_any_shape_of_csv() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for case in 0..60 {
            let mut text = String::from("id,x,day,flag,note\n");
            let rows = 1 + next(40);
            for row in 0..rows {
                let id = match next(12) {
                    0 => String::new(),
                    1 if case % 3 == 0 => format!("x{row}"),
                    2 => format!("\"{row}\""),
                    _ => format!("-{row}"),
                };
                let x = match next(5) {
                    0 => String::new(),
                    1 => "1e3".into(),
                    _ => format!("{}.5", next(1000)),
                };
                let day = match next(6) {
                    0 => String::new(),
                    1 => "2024-2-9".into(),
                    _ => format!("2026-0{}-1{}", 1 + next(9), next(9)),
                };
                let note = match next(9) {
                    0 => String::new(),
                    1 => "\"\"".into(),
                    2 => "\"a, \"\"b\"\"\r\nc\"".into(),
                    3 => "é".repeat(next(30) as usize),
                    4 if case % 4 == 1 => "say \"hi\"".into(),
                    5 if case % 4 == 2 => "\"closed\" then".into(),
                    _ => "n".repeat(next(80) as usize),
                };
                let end = match next(4) {
                    0 => "\r\n",
                    1 if case % 5 == 0 => "\r",
                    2 if case % 7 == 3 => "\n\n",
                    _ => "\n",
                };
                text += &format!("{id},{x},{day},{},{note}", next(2) == 0);
                if row + 1 < rows || next(2) == 0 {
                    text += end;
                }
            }
            let bytes = text.into_bytes();
            let expected = ReaderBuilder::new(schema(&columns(), false))
                .with_header(true)
                .with_batch_size(1000)
                .build(&bytes[..])
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .map(typed);
            for (step, buffer, batch) in [(1 << 20, FIRST_BUFFER, 7), (1, 7, 3), (13, 64, 1000)] {
                let mut reader = CsvBatches::new(Trickle(&bytes, step), &columns(), batch);
                reader.buffer = vec![0; buffer];
                let batches = reader.collect::<Result<Vec<_>, _>>();
                match (&expected, batches) {
                    (Ok(expected), Ok(batches)) => assert_eq!(
                        &typed(batches),
                        expected,
                        "case {case}, step {step}: {}",
                        String::from_utf8_lossy(&bytes)
                    ),
                    (Err(expected), Err(error)) => {
                        assert_eq!(error.to_string(), expected.to_string(), "case {case}")
                    }
                    (expected, got) => panic!(
                        "case {case}, step {step}: arrow {:?}, here {:?}: {}",
                        expected.as_ref().map(|b| b.num_rows()),
                        got.map(|b| b.len()),
                        String::from_utf8_lossy(&bytes)
                    ),
                }
            }
        }
    }

    /// Timestamps and booleans, parsed here where they are plain and by `cast` where they are
    /// not (other spellings, zones, a leap second, bad values): whatever the batch size, the
    /// rows are those of decoding as text and casting, and plain batches come out typed.
    #[test]
    fn timestamps_and_booleans_are_what_the_cast_reads() {
        let columns: Vec<Column> = [("at", ColumnType::Timestamp), ("ok", ColumnType::Bool)]
            .into_iter()
            .map(|(name, column_type)| Column {
                name: name.into(),
                column_type,
            })
            .collect();
        let stamps = [
            "2025-03-01 10:20:30",
            "2025-03-01T10:20:30",
            "",
            "2025-03-01 10:20:30Z",
            "2025-12-31 23:59:60",
            "2025-02-30 00:00:00",
            "2025-03-01",
            "later",
            "2024-02-29 00:00:01",
            "2025-03-01 10:20:30.250",
        ];
        let flags = ["true", "false", "", "TRUE", "t", "yes", "0", "maybe"];
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        for case in 0..40 {
            let mut text = String::from("at,ok\n");
            for row in 0..(1 + case * 7) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                // Most cases hold the plain forms only, so their batches take the direct path.
                let odd = case % 3 == 0 && state.is_multiple_of(5);
                let at = if odd {
                    stamps[(state >> 8) as usize % stamps.len()]
                } else {
                    stamps[row % 3]
                };
                let ok = if odd {
                    flags[(state >> 16) as usize % flags.len()]
                } else {
                    flags[row % 3]
                };
                text += &format!("{at},{ok}\n");
            }
            let bytes = text.into_bytes();
            let expected = typed_as(
                &columns,
                ReaderBuilder::new(schema(&columns, false))
                    .with_header(true)
                    .build(&bytes[..])
                    .unwrap()
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap(),
            );
            for batch_rows in [3, 1000] {
                let batches: Vec<RecordBatch> = CsvBatches::new(&bytes[..], &columns, batch_rows)
                    .collect::<Result<_, _>>()
                    .unwrap();
                if case % 3 != 0 {
                    assert!(batches.iter().all(|b| b.schema() == schema(&columns, true)));
                }
                assert_eq!(typed_as(&columns, batches), expected, "case {case}");
            }
        }
    }

    /// An empty file, a header alone (with or without its terminator) and a header with
    /// blank lines give no batch, as arrow's decoder gives none.
    #[test]
    fn no_rows_give_no_batch() {
        for text in [
            "",
            "id,x,day,flag,note",
            "id,x,day,flag,note\n",
            "id,x,day,flag,note\n\n\n",
        ] {
            let batches: Vec<RecordBatch> = CsvBatches::new(text.as_bytes(), &columns(), 8)
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(batches.is_empty(), "{text:?}");
        }
    }

    /// The fast integer read gives what arrow's parse gives, on every kind of text it may meet.
    #[test]
    fn integers_read_as_arrow_reads_them() {
        let texts = [
            "0",
            "7",
            "-0",
            "+0",
            "007",
            "-12",
            "+12",
            "123456789012345678",
            "-123456789012345678",
            "1234567890123456789",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "",
            "-",
            "+",
            "1.5",
            "1e3",
            " 1",
            "1 ",
            "12a",
            "a12",
            "--1",
            "+-1",
            "0x10",
            "١٢",
        ];
        for text in texts {
            assert_eq!(integer(text), Int64Type::parse(text), "{text:?}");
        }
        // Every length, every digit in every place, and a stranger in every place.
        let mut state = 7u64;
        for length in 1..=20 {
            for _ in 0..500 {
                let mut text: String = (0..length)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        char::from(b'0' + (state >> 59) as u8 % 10)
                    })
                    .collect();
                for sign in ["", "-", "+"] {
                    let signed = format!("{sign}{text}");
                    assert_eq!(integer(&signed), Int64Type::parse(&signed), "{signed:?}");
                }
                let at = (state >> 40) as usize % length;
                text.replace_range(at..at + 1, [":", "/", "a", " "][(state >> 20) as usize % 4]);
                assert_eq!(integer(&text), Int64Type::parse(&text), "{text:?}");
            }
        }
    }
}
