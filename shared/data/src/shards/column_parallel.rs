//! A Parquet writer that encodes the columns of each call on every core.
//!
//! `ArrowWriter` encodes one column after another on the calling thread, which made writing the
//! shards the serial half of a shardify run. This writer does what `ArrowWriter::write` does
//! (the same row-group cuts, each column writer fed the same leaves in the same order) but hands
//! the column writers to rayon, so the file bytes are exactly those `ArrowWriter` writes: only
//! the time changes.

use std::io::Write;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::{
    ArrowColumnChunk, ArrowColumnWriter, ArrowLeafColumn, ArrowRowGroupWriterFactory,
    compute_leaves,
};
use parquet::errors::{ParquetError, Result};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use rayon::prelude::*;

pub struct ColumnParallelWriter<W: Write + Send> {
    file: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    max_row_group_rows: usize,
    /// The open row group: one writer per leaf column, and the rows they hold.
    open: Option<(Vec<ArrowColumnWriter>, usize)>,
}

impl<W: Write + Send> ColumnParallelWriter<W> {
    pub fn try_new(
        sink: W,
        schema: SchemaRef,
        properties: WriterProperties,
    ) -> Result<ColumnParallelWriter<W>> {
        if properties.max_row_group_bytes().is_some() {
            return Err(ParquetError::General(
                "a row-group byte limit is not supported by the column-parallel writer".into(),
            ));
        }
        let max_row_group_rows = properties.max_row_group_row_count().unwrap_or(usize::MAX);
        // Built through ArrowWriter so the file carries the same schema metadata.
        let (file, factory) = ArrowWriter::try_new(sink, schema.clone(), Some(properties))?
            .into_serialized_writer()?;
        Ok(ColumnParallelWriter {
            file,
            factory,
            schema,
            max_row_group_rows: max_row_group_rows.max(1),
            open: None,
        })
    }

    /// Encodes `batch`, closing a row group each time it reaches the row limit.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut remaining = batch.clone();
        while remaining.num_rows() > 0 {
            if self.open.is_none() {
                let index = self.file.flushed_row_groups().len();
                self.open = Some((self.factory.create_column_writers(index)?, 0));
            }
            let (writers, rows) = self.open.as_mut().expect("opened above");
            let take = remaining.num_rows().min(self.max_row_group_rows - *rows);
            let part = remaining.slice(0, take);
            remaining = remaining.slice(take, remaining.num_rows() - take);

            let mut leaves: Vec<ArrowLeafColumn> = Vec::with_capacity(writers.len());
            for (field, column) in self.schema.fields().iter().zip(part.columns()) {
                leaves.extend(compute_leaves(field.as_ref(), column)?);
            }
            if leaves.len() != writers.len() {
                return Err(ParquetError::General(format!(
                    "{} leaf columns for {} column writers",
                    leaves.len(),
                    writers.len()
                )));
            }
            writers
                .par_iter_mut()
                .zip(leaves.par_iter())
                .map(|(writer, leaf)| writer.write(leaf))
                .collect::<Result<Vec<()>>>()?;
            *rows += take;
            if *rows >= self.max_row_group_rows {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Closes the open row group: its column chunks are finished in parallel, then appended to
    /// the file in column order.
    fn flush(&mut self) -> Result<()> {
        let Some((writers, _)) = self.open.take() else {
            return Ok(());
        };
        let chunks: Vec<ArrowColumnChunk> = writers
            .into_par_iter()
            .map(ArrowColumnWriter::close)
            .collect::<Result<_>>()?;
        let mut row_group = self.file.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        Ok(())
    }

    /// Writes the last row group and the footer, and returns the sink.
    pub fn into_inner(mut self) -> Result<W> {
        self.flush()?;
        self.file.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use parquet::basic::{Compression, ZstdLevel};

    use super::*;

    fn batch(start: i64, rows: usize) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("x", DataType::Float64, true),
            Field::new("note", DataType::Utf8, true),
        ]));
        let ids: Vec<i64> = (start..start + rows as i64).collect();
        let xs: Vec<Option<f64>> = ids
            .iter()
            .map(|i| (i % 7 != 0).then_some(*i as f64 * 0.25))
            .collect();
        let notes: Vec<Option<String>> = ids
            .iter()
            .map(|i| (i % 5 != 0).then(|| format!("note {}", i % 13)))
            .collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(ids)) as ArrayRef,
                Arc::new(Float64Array::from(xs)),
                Arc::new(StringArray::from(notes)),
            ],
        )
        .unwrap()
    }

    fn properties() -> WriterProperties {
        WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).unwrap()))
            .set_max_row_group_row_count(Some(1000))
            .build()
    }

    /// Calls of uneven sizes that cross row-group boundaries give exactly ArrowWriter's bytes.
    #[test]
    fn writes_the_bytes_arrow_writer_writes() {
        let calls = [(0, 700), (700, 700), (1400, 1), (1401, 2599)];
        let schema = batch(0, 1).schema();
        let mut expected =
            ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties())).unwrap();
        let mut parallel = ColumnParallelWriter::try_new(Vec::new(), schema, properties()).unwrap();
        for (start, rows) in calls {
            expected.write(&batch(start, rows)).unwrap();
            parallel.write(&batch(start, rows)).unwrap();
        }
        let expected = expected.into_inner().unwrap();
        let written = parallel.into_inner().unwrap();
        assert!(written.len() > 1000);
        assert_eq!(blake3::hash(&written), blake3::hash(&expected));
    }

    #[test]
    fn refuses_a_byte_limit() {
        let properties = WriterProperties::builder()
            .set_max_row_group_bytes(Some(1 << 20))
            .build();
        assert!(
            ColumnParallelWriter::try_new(Vec::new(), batch(0, 1).schema(), properties).is_err()
        );
    }
}
