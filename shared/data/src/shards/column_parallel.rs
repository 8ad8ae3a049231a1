//! A Parquet writer that encodes the columns of each call on every core, and whole row groups in
//! the background.
//!
//! `ArrowWriter` encodes one column after another on the calling thread, which made writing the
//! shards the serial half of a shardify run. This writer does what `ArrowWriter::write` does
//! (each column writer fed the same leaves in the same order) but hands the column writers to
//! rayon, so the file bytes are exactly those `ArrowWriter` writes with the same row-group cuts:
//! only the time changes. A row group is cut at the row limit, as `ArrowWriter` cuts it, and
//! also before the first row that would take its data bytes past a limit (counted on the rows,
//! see `row_bytes`; `ArrowWriter`'s own byte limit estimates encoded bytes, which depend on
//! how the rows were batched).
//!
//! Encoding one call's columns side by side still waits on the widest column (a long text
//! column is most of the bytes, and of the zstd work), so with background slots allowed
//! a full row group is encoded as a task of its own thread pool while the caller goes on
//! producing rows; the groups are appended to the file in order as they finish. Each group has
//! its own column writers, so encoding groups at the same time changes nothing in the bytes.
//!
//! Groups in the background hold their rows until encoded, so they are counted against one
//! limit shared by every writer of a run (`GroupSlots`): a split's or a shard's last groups
//! still encode while the next one's rows are gathered, and nobody waits for them until the
//! file is finished, yet memory holds no more groups than the limit allows.
//!
//! The pool is not rayon's global one on purpose: the caller waits for a free slot and, at a
//! file's end, for its oldest group, and a wait on a global-pool thread deadlocked when that
//! thread had itself stolen work from the group it was waiting for. The encoding pool's threads
//! never wait on anything of the caller's, so a wait from anywhere is safe.

use std::collections::VecDeque;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, sync_channel};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use arrow::array::{Array, ArrayRef, RecordBatch};
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
use rayon::{ThreadPool, ThreadPoolBuilder};

use crate::shards::row_bytes;

pub struct ColumnParallelWriter<W: Write + Send> {
    file: SerializedFileWriter<W>,
    factory: ArrowRowGroupWriterFactory,
    schema: SchemaRef,
    max_row_group_rows: usize,
    /// Data bytes a row group holds at most (one row at least).
    max_row_group_bytes: u64,
    /// Row groups that may be encoding in the background at once, across the writers sharing
    /// it; a limit of 0 encodes each call on the calling thread (and its cores) before `write`
    /// returns.
    slots: Arc<GroupSlots>,
    open: Option<OpenGroup>,
    /// Row groups handed to the background, oldest first.
    in_flight: VecDeque<Receiver<Result<Vec<ArrowColumnChunk>>>>,
}

/// The row group being filled: its column writers, and (in background mode) the calls not yet
/// encoded, in order.
struct OpenGroup {
    writers: Vec<ArrowColumnWriter>,
    queued: Vec<RecordBatch>,
    rows: usize,
    bytes: u64,
}

impl<W: Write + Send> ColumnParallelWriter<W> {
    pub fn try_new(
        sink: W,
        schema: SchemaRef,
        properties: WriterProperties,
        max_row_group_bytes: u64,
        slots: Arc<GroupSlots>,
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
            max_row_group_bytes,
            slots,
            open: None,
            in_flight: VecDeque::new(),
        })
    }

    /// Encodes `batch` (or queues it for its row group's background task), closing a row group
    /// each time it reaches the row or the byte limit.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut remaining = batch.clone();
        while remaining.num_rows() > 0 {
            if self.open.is_none() {
                let index = self.file.flushed_row_groups().len() + self.in_flight.len();
                self.open = Some(OpenGroup {
                    writers: self.factory.create_column_writers(index)?,
                    queued: Vec::new(),
                    rows: 0,
                    bytes: 0,
                });
            }
            let group = self.open.as_mut().expect("opened above");
            let room = remaining
                .num_rows()
                .min(self.max_row_group_rows - group.rows);
            let (mut take, mut bytes) = row_bytes::rows_within(
                &remaining,
                room,
                self.max_row_group_bytes.saturating_sub(group.bytes),
            );
            let full_by_bytes = take < room;
            if take == 0 {
                if group.rows > 0 {
                    self.close_group()?;
                    continue;
                }
                // A row over the limit on its own is a group of its own.
                take = 1;
                bytes = row_bytes::range_bytes(&remaining, 0, 1);
            }
            let part = without_empty_validity(&remaining.slice(0, take))?;
            remaining = remaining.slice(take, remaining.num_rows() - take);
            if self.slots.limit == 0 {
                encode_calls(
                    &self.schema,
                    &mut group.writers,
                    std::slice::from_ref(&part),
                )?;
            } else {
                group.queued.push(part);
            }
            group.rows += take;
            group.bytes += bytes;
            if group.rows >= self.max_row_group_rows || full_by_bytes {
                self.close_group()?;
            }
        }
        Ok(())
    }

    /// Closes the open row group (short if it is not full): on this thread without background
    /// encoding, else as a task of the encoding pool once a slot is free. Rows written after it
    /// start a new group.
    pub fn close_group(&mut self) -> Result<()> {
        let Some(OpenGroup {
            mut writers,
            queued,
            ..
        }) = self.open.take()
        else {
            return Ok(());
        };
        let pool = if self.slots.limit == 0 {
            None
        } else {
            encoding_pool()
        };
        let Some(pool) = pool else {
            // Queued calls when the pool could not start: encoded here, same bytes.
            encode_calls(&self.schema, &mut writers, &queued)?;
            let chunks = close_writers(writers)?;
            return self.append(chunks);
        };
        self.poll()?;
        let slot = self.slots.acquire();
        let schema = self.schema.clone();
        let (sender, receiver) = sync_channel(1);
        self.in_flight.push_back(receiver);
        if writers.len() == schema.fields().len() {
            spawn_column_tasks(pool, &schema, writers, queued, slot, sender);
            return Ok(());
        }
        // A nested column has several writers: the group as one task.
        pool.spawn(move || {
            let encoded = catch_unwind(AssertUnwindSafe(|| {
                encode_calls(&schema, &mut writers, &queued)?;
                drop(queued);
                close_writers(writers)
            }))
            .unwrap_or_else(|_| {
                Err(ParquetError::General(
                    "encoding a row group panicked".into(),
                ))
            });
            // The rows are gone: the next group may start encoding while this one's pages wait
            // to be appended.
            drop(slot);
            // A writer dropped on an error elsewhere no longer waits for the group.
            let _ = sender.send(encoded);
        });
        Ok(())
    }

    /// Appends the background groups that are finished, in order, without waiting; true when
    /// none is left in flight.
    pub fn poll(&mut self) -> Result<bool> {
        while let Some(receiver) = self.in_flight.front() {
            match receiver.try_recv() {
                Ok(encoded) => {
                    self.in_flight.pop_front();
                    self.append(encoded?)?;
                }
                Err(TryRecvError::Empty) => return Ok(false),
                Err(TryRecvError::Disconnected) => return Err(ended_without_result()),
            }
        }
        Ok(true)
    }

    /// Waits for the oldest background group and appends it.
    fn append_oldest(&mut self) -> Result<()> {
        let Some(receiver) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let encoded = receiver.recv().map_err(|_| ended_without_result())?;
        self.append(encoded?)
    }

    /// Appends a finished row group's column chunks to the file, in column order.
    fn append(&mut self, chunks: Vec<ArrowColumnChunk>) -> Result<()> {
        let mut row_group = self.file.next_row_group()?;
        for chunk in chunks {
            chunk.append_to_row_group(&mut row_group)?;
        }
        row_group.close()?;
        Ok(())
    }

    /// Writes the last row group and the footer, and returns the sink.
    pub fn into_inner(mut self) -> Result<W> {
        self.close_group()?;
        while !self.in_flight.is_empty() {
            self.append_oldest()?;
        }
        self.file.into_inner()
    }
}

fn ended_without_result() -> ParquetError {
    ParquetError::General("a row group's encoding task ended without a result".into())
}

/// How many row groups may be encoding in the background at once, shared by the writers of one
/// run: each group holds its rows until encoded.
#[derive(Debug)]
pub struct GroupSlots {
    limit: usize,
    busy: Mutex<usize>,
    freed: Condvar,
}

impl GroupSlots {
    /// `limit` groups at once; 0 for none (every call is encoded before `write` returns).
    pub fn new(limit: usize) -> Arc<GroupSlots> {
        Arc::new(GroupSlots {
            limit,
            busy: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    /// Waits for a free slot. Slots are freed by encoding tasks, which never wait on the
    /// caller, so the wait ends.
    fn acquire(self: &Arc<GroupSlots>) -> SlotGuard {
        let mut busy = self
            .busy
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        while *busy >= self.limit {
            busy = self
                .freed
                .wait(busy)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
        *busy += 1;
        SlotGuard(self.clone())
    }
}

/// A taken slot, freed when dropped (also when its task panics).
struct SlotGuard(Arc<GroupSlots>);

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let mut busy = self
            .0
            .busy
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *busy -= 1;
        self.0.freed.notify_all();
    }
}

/// The pool that encodes background row groups, as many threads as rayon's global pool (so
/// `--threads` bounds it too); `None` if its threads could not be started.
fn encoding_pool() -> Option<&'static ThreadPool> {
    static POOL: OnceLock<Option<ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        ThreadPoolBuilder::new()
            .num_threads(rayon::current_num_threads())
            .thread_name(|index| format!("parquet-encode-{index}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// A closed row group's columns (one writer each), each fed its calls and closed as a task of
/// its own on the encoding pool, widest first; the last to finish frees the group's slot and
/// sends the chunks in column order.
///
/// The group was one task that encoded its columns with rayon's `par_iter`. A pool thread that
/// waited there for a column stolen by the other thread picked up the next group's task
/// meanwhile, so the first group stayed unfinished, holding its slot, until the second group's
/// widest column was done: the caller waited for a slot and one core idled, a tenth of the
/// write half on the 1 GiB churn CSV. Tasks that never wait cannot be stacked that way.
fn spawn_column_tasks(
    pool: &ThreadPool,
    schema: &SchemaRef,
    writers: Vec<ArrowColumnWriter>,
    calls: Vec<RecordBatch>,
    slot: SlotGuard,
    sender: GroupSender,
) {
    let group = Arc::new(GroupTasks {
        chunks: Mutex::new((0..writers.len()).map(|_| None).collect()),
        left: AtomicUsize::new(writers.len()),
        done: Mutex::new(Some((slot, sender))),
    });
    let mut columns: Vec<(usize, ArrowColumnWriter, Vec<ArrayRef>, usize)> = writers
        .into_iter()
        .enumerate()
        .map(|(index, writer)| {
            let arrays: Vec<ArrayRef> = calls
                .iter()
                .map(|call| call.column(index).clone())
                .collect();
            let bytes = arrays
                .iter()
                .map(|array| array.get_array_memory_size())
                .sum();
            (index, writer, arrays, bytes)
        })
        .collect();
    drop(calls);
    // The widest column first: the others fill the other cores around it.
    columns.sort_by_key(|&(index, _, _, bytes)| (std::cmp::Reverse(bytes), index));
    for (index, mut writer, arrays, _) in columns {
        let field = schema.fields()[index].clone();
        let group = group.clone();
        pool.spawn(move || {
            let chunk = catch_unwind(AssertUnwindSafe(move || {
                for array in &arrays {
                    for leaf in compute_leaves(field.as_ref(), array)? {
                        writer.write(&leaf)?;
                    }
                }
                drop(arrays);
                writer.close()
            }))
            .unwrap_or_else(|_| {
                Err(ParquetError::General(
                    "encoding a column chunk panicked".into(),
                ))
            });
            group.finish(index, chunk);
        });
    }
}

/// Where a background row group's column chunks go, in column order.
type GroupSender = SyncSender<Result<Vec<ArrowColumnChunk>>>;

/// The column tasks of one row group (see `spawn_column_tasks`).
struct GroupTasks {
    chunks: Mutex<Vec<Option<Result<ArrowColumnChunk>>>>,
    left: AtomicUsize,
    done: Mutex<Option<(SlotGuard, GroupSender)>>,
}

impl GroupTasks {
    /// Enters column `index`'s chunk; the last column frees the slot and sends the group.
    fn finish(&self, index: usize, chunk: Result<ArrowColumnChunk>) {
        let mut chunks = self
            .chunks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        chunks[index] = Some(chunk);
        drop(chunks);
        if self.left.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let chunks = std::mem::take(
            &mut *self
                .chunks
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let group = chunks
            .into_iter()
            .map(|chunk| chunk.unwrap_or_else(|| Err(ended_without_result())))
            .collect::<Result<Vec<_>>>();
        let done = self
            .done
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some((slot, sender)) = done {
            // The rows are gone: the next group may start encoding while this one's pages
            // wait to be appended.
            drop(slot);
            // A writer dropped on an error elsewhere no longer waits for the group.
            let _ = sender.send(group);
        }
    }
}

/// Feeds each call's leaves to the column writers, every column writer on its own rayon task,
/// each fed the calls in order.
fn encode_calls(
    schema: &SchemaRef,
    writers: &mut [ArrowColumnWriter],
    calls: &[RecordBatch],
) -> Result<()> {
    let mut leaves: Vec<Vec<ArrowLeafColumn>> = (0..writers.len())
        .map(|_| Vec::with_capacity(calls.len()))
        .collect();
    for call in calls {
        let mut leaf_index = 0;
        for (field, column) in schema.fields().iter().zip(call.columns()) {
            for leaf in compute_leaves(field.as_ref(), column)? {
                if let Some(slot) = leaves.get_mut(leaf_index) {
                    slot.push(leaf);
                }
                leaf_index += 1;
            }
        }
        if leaf_index != writers.len() {
            return Err(ParquetError::General(format!(
                "{leaf_index} leaf columns for {} column writers",
                writers.len()
            )));
        }
    }
    writers
        .par_iter_mut()
        .zip(leaves.into_par_iter())
        .map(|(writer, leaves)| leaves.iter().try_for_each(|leaf| writer.write(leaf)))
        .collect::<Result<Vec<()>>>()?;
    Ok(())
}

/// Finishes a row group's column chunks, in parallel, in column order.
fn close_writers(writers: Vec<ArrowColumnWriter>) -> Result<Vec<ArrowColumnChunk>> {
    writers
        .into_par_iter()
        .map(ArrowColumnWriter::close)
        .collect::<Result<_>>()
}

/// `batch` with the validity buffer of each column that holds no null left out.
///
/// The Parquet writer cuts a call into mini-batches of 1,024 rows when a column's definition
/// levels are materialized (it has a validity buffer) and of 20,000 when they are uniform, and a
/// page ends at a mini-batch's end. Whether a column of a call still carries a validity buffer
/// with no null in it depends on the batches its rows were gathered from (a slice keeps its
/// parent's buffer), so with the buffer kept a page could end elsewhere under another
/// `--memory`: a table with one bad value became other bytes at 8M than at 1G.
fn without_empty_validity(batch: &RecordBatch) -> Result<RecordBatch> {
    if batch
        .columns()
        .iter()
        .all(|c| c.nulls().is_none() || c.null_count() > 0)
    {
        return Ok(batch.clone());
    }
    let columns = batch
        .columns()
        .iter()
        .map(|column| {
            if column.nulls().is_none() || column.null_count() > 0 {
                return Ok(column.clone());
            }
            let data = column.to_data().into_builder().nulls(None).build()?;
            Ok(arrow::array::make_array(data))
        })
        .collect::<std::result::Result<Vec<_>, arrow::error::ArrowError>>()?;
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
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

    /// Calls of uneven sizes that cross row-group boundaries give exactly ArrowWriter's bytes,
    /// encoded on the calling thread or with up to 1, 2 or 5 row groups in the background.
    #[test]
    fn writes_the_bytes_arrow_writer_writes() {
        let calls = [(0, 700), (700, 700), (1400, 1), (1401, 2599), (4000, 3333)];
        let schema = batch(0, 1).schema();
        let mut expected =
            ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties())).unwrap();
        for (start, rows) in calls {
            expected.write(&batch(start, rows)).unwrap();
        }
        let expected = expected.into_inner().unwrap();
        for background in [0, 1, 2, 5] {
            let mut parallel = ColumnParallelWriter::try_new(
                Vec::new(),
                schema.clone(),
                properties(),
                u64::MAX,
                GroupSlots::new(background),
            )
            .unwrap();
            for (start, rows) in calls {
                parallel.write(&batch(start, rows)).unwrap();
            }
            let written = parallel.into_inner().unwrap();
            assert!(written.len() > 1000);
            assert_eq!(
                blake3::hash(&written),
                blake3::hash(&expected),
                "background {background}"
            );
        }
    }

    /// Writing from a rayon thread (here the only thread of its pool) that waits for its groups
    /// does not deadlock: the groups are encoded on a pool of their own.
    #[test]
    fn waits_inside_a_one_thread_pool_without_deadlock() {
        let schema = batch(0, 1).schema();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let written = pool.install(|| {
            let mut parallel = ColumnParallelWriter::try_new(
                Vec::new(),
                schema,
                properties(),
                u64::MAX,
                GroupSlots::new(1),
            )
            .unwrap();
            for start in (0..6000).step_by(1500) {
                parallel.write(&batch(start, 1500)).unwrap();
            }
            parallel.into_inner().unwrap()
        });
        assert!(written.len() > 1000);
    }

    /// Two writers sharing one background slot, written in turns with groups crossing calls:
    /// each file gets exactly `ArrowWriter`'s bytes for its own rows, whether its groups were
    /// appended by `poll` along the way or at the end.
    #[test]
    fn writers_sharing_a_slot_write_their_own_bytes() {
        let schema = batch(0, 1).schema();
        let expected = |first: i64| {
            let mut writer =
                ArrowWriter::try_new(Vec::new(), schema.clone(), Some(properties())).unwrap();
            writer.write(&batch(first, 3500)).unwrap();
            writer.into_inner().unwrap()
        };
        let slots = GroupSlots::new(1);
        let open = || {
            ColumnParallelWriter::try_new(
                Vec::new(),
                schema.clone(),
                properties(),
                u64::MAX,
                slots.clone(),
            )
            .unwrap()
        };
        let (mut a, mut b) = (open(), open());
        for start in (0..3500).step_by(700) {
            a.write(&batch(start, 700)).unwrap();
            b.write(&batch(10_000 + start, 700)).unwrap();
            a.poll().unwrap();
        }
        a.close_group().unwrap();
        b.close_group().unwrap();
        while !a.poll().unwrap() {
            std::thread::yield_now();
        }
        assert_eq!(a.into_inner().unwrap(), expected(0));
        assert_eq!(b.into_inner().unwrap(), expected(10_000));
    }

    #[test]
    fn refuses_a_byte_limit() {
        let properties = WriterProperties::builder()
            .set_max_row_group_bytes(Some(1 << 20))
            .build();
        assert!(
            ColumnParallelWriter::try_new(
                Vec::new(),
                batch(0, 1).schema(),
                properties,
                u64::MAX,
                GroupSlots::new(0)
            )
            .is_err()
        );
    }
}
