//! The read half of the shuffle: keyed rows cut into (split, bucket) slots, each slot an Arrow
//! IPC stream of sorted runs on disk.
//!
//! A reading thread gathers a chunk of its batches (a few MiB) once, in (slot, key) order, and
//! appends each slot's slice of that gather to the slot's stream as one run. Each row is copied
//! once on its way to disk. The earlier design cut each batch into its slots (a copy), buffered
//! the parts and merged them into a sorted run when the buffer was full (a second copy); those
//! two copies were a third of the read half. The chunk is small enough that its random gather
//! stays in the cache, and its runs are sorted, so the bucket's final merge
//! (`runs::gather_by_key`) reads every run front to back.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, AsArray, RecordBatch};
use arrow::buffer::Buffer;
use arrow::datatypes::{SchemaRef, UInt64Type};
use arrow::error::ArrowError;
use arrow::ipc::reader::FileDecoder;
use arrow::ipc::writer::StreamWriter;
use arrow::ipc::{Block, MessageHeader, MetadataVersion, root_as_message};

use crate::error::DataError;
use crate::shards::runs::gather_columns;
use crate::shards::writer::remove_if_present;

/// The write buffer of each spill file, at most and at least (see `Slot::buffer_bytes`).
const SPILL_BUFFER: usize = 64 << 10;
const MIN_SPILL_BUFFER: usize = 4 << 10;

/// A reading thread's keyed batches (key column last) not yet spilled, with each row's split.
#[derive(Default)]
pub struct Chunk {
    batches: Vec<RecordBatch>,
    splits: Vec<Vec<Option<u8>>>,
    bytes: u64,
    spilled_rows: u64,
    spilled_bytes: u64,
}

impl Chunk {
    pub fn push(&mut self, keyed: RecordBatch, splits: Vec<Option<u8>>) {
        self.bytes += keyed.get_array_memory_size() as u64;
        self.batches.push(keyed);
        self.splits.push(splits);
    }

    /// Bytes of the batches held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Rows spilled so far and their bytes in memory without the key column, as gathered (the
    /// size the writer will hold them at: the read batches' bytes count their builders' slack).
    pub fn spilled(&self) -> (u64, u64) {
        (self.spilled_rows, self.spilled_bytes)
    }

    /// Appends every assigned row to its slot (`split * buckets + bucket`, the bucket being the
    /// key's top bits), one sorted run per slot, and empties the chunk.
    pub fn spill(
        &mut self,
        buckets: u64,
        slots: &[Mutex<Slot>],
        schema: &SchemaRef,
    ) -> Result<(), DataError> {
        let batches = std::mem::take(&mut self.batches);
        let splits = std::mem::take(&mut self.splits);
        self.bytes = 0;
        let key_index = schema.fields().len() - 1;
        let keys: Vec<&[u64]> = batches
            .iter()
            .map(|batch| {
                batch
                    .column(key_index)
                    .as_primitive_opt::<UInt64Type>()
                    .map(|keys| &keys.values()[..])
                    .ok_or_else(|| DataError::Other("the shuffle key column is not UInt64".into()))
            })
            .collect::<Result<_, _>>()?;
        let (order, runs) = slot_order(&keys, &splits, buckets, slots.len());
        if order.is_empty() {
            return Ok(());
        }
        let parts: Vec<Vec<ArrayRef>> = (0..schema.fields().len())
            .map(|column| {
                batches
                    .iter()
                    .map(|batch| batch.column(column).clone())
                    .collect()
            })
            .collect();
        drop(batches);
        let columns: Vec<ArrayRef> =
            gather_columns(parts, &order, std::slice::from_ref(&(0..order.len())))?
                .into_iter()
                .flatten()
                .collect();
        let gathered = RecordBatch::try_new(schema.clone(), columns)
            .map_err(|e| DataError::Other(e.to_string()))?;
        self.spilled_rows += gathered.num_rows() as u64;
        self.spilled_bytes += gathered
            .columns()
            .iter()
            .take(key_index)
            .map(|column| column.get_array_memory_size() as u64)
            .sum::<u64>();
        for (slot, start, rows) in runs {
            slots[slot]
                .lock()
                .map_err(|_| DataError::Other("a shuffle thread panicked".into()))?
                .append(&gathered.slice(start, rows), schema)?;
        }
        Ok(())
    }
}

/// A slot's run in a chunk's order: (slot, its first place, its rows).
type Run = (usize, usize, usize);

/// Bits of the key below the bucket's by which rows are grouped before each group is sorted.
const GROUP_BITS: u32 = 8;

/// Every assigned row as (batch, row), by slot (`split * buckets + bucket`, the bucket being
/// the key's top bits) and within a slot by key; and each slot's run as (slot, start, rows).
///
/// A counting sort on the slot and the key's next `GROUP_BITS` bits, then a sort of each
/// group: the keys are uniform (splitmix64), so the groups are small and sorted in the cache.
/// Sorting each slot's rows whole was a fourteenth of the read half on narrow rows. The keys
/// are unique, so the order is the one any sort by key gives.
fn slot_order(
    keys: &[&[u64]],
    splits: &[Vec<Option<u8>>],
    buckets: u64,
    slots: usize,
) -> (Vec<(usize, usize)>, Vec<Run>) {
    let bucket_bits = buckets.trailing_zeros();
    let group = |split: u8, key: u64| -> usize {
        let bucket = key.checked_shr(64 - bucket_bits).unwrap_or(0) as usize;
        let within = ((key << bucket_bits) >> (64 - GROUP_BITS)) as usize;
        ((split as usize * buckets as usize + bucket) << GROUP_BITS) | within
    };
    let mut starts = vec![0usize; (slots << GROUP_BITS) + 1];
    for (keys, splits) in keys.iter().zip(splits) {
        for (&key, split) in keys.iter().zip(splits) {
            if let Some(split) = *split {
                starts[group(split, key) + 1] += 1;
            }
        }
    }
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let rows = starts[starts.len() - 1];
    let mut placed = vec![(0u64, 0u32, 0u32); rows];
    let mut next = starts.clone();
    for (batch, (keys, splits)) in keys.iter().zip(splits).enumerate() {
        for (row, (&key, split)) in keys.iter().zip(splits).enumerate() {
            if let Some(split) = *split {
                let at = &mut next[group(split, key)];
                placed[*at] = (key, batch as u32, row as u32);
                *at += 1;
            }
        }
    }
    for pair in starts.windows(2) {
        placed[pair[0]..pair[1]].sort_unstable_by_key(|&(key, _, _)| key);
    }
    let runs = (0..slots)
        .map(|slot| {
            let (start, end) = (starts[slot << GROUP_BITS], starts[(slot + 1) << GROUP_BITS]);
            (slot, start, end - start)
        })
        .filter(|&(_, _, rows)| rows > 0)
        .collect();
    let order = placed
        .into_iter()
        .map(|(_, batch, row)| (batch as usize, row as usize))
        .collect();
    (order, runs)
}

/// One (split, bucket): its sorted runs, in an Arrow IPC stream.
pub struct Slot {
    path: PathBuf,
    buffer_bytes: usize,
    spill: Option<StreamWriter<BufWriter<File>>>,
    rows: u64,
}

impl Slot {
    pub fn new(path: PathBuf, buffer_bytes: usize) -> Slot {
        Slot {
            path,
            buffer_bytes,
            spill: None,
            rows: 0,
        }
    }

    /// The write buffer of each of `slots` spill files: together a sixteenth of the budget. At
    /// `--memory 128M` there are hundreds of slots, and 64 KiB each was a fifth of the budget.
    pub fn buffer_bytes(memory_bytes: u64, slots: usize) -> usize {
        let share = memory_bytes / (16 * slots.max(1) as u64);
        (share.min(SPILL_BUFFER as u64) as usize).max(MIN_SPILL_BUFFER)
    }

    fn append(&mut self, run: &RecordBatch, schema: &SchemaRef) -> Result<(), DataError> {
        let io = |e: arrow::error::ArrowError| DataError::library(&self.path, &e);
        if self.spill.is_none() {
            let file = File::create(&self.path).map_err(|source| DataError::Io {
                path: self.path.clone(),
                source,
            })?;
            self.spill = Some(
                // A run arrives whole, so a small buffer suffices (it only gathers the IPC
                // writer's small writes); a 1 MiB buffer per slot cost as much memory as the
                // rows themselves.
                StreamWriter::try_new(BufWriter::with_capacity(self.buffer_bytes, file), schema)
                    .map_err(io)?,
            );
        }
        if let Some(writer) = self.spill.as_mut() {
            // The IPC writer writes a slice's own rows only.
            writer.write(run).map_err(io)?;
            self.rows += run.num_rows() as u64;
        }
        Ok(())
    }

    /// Ends the slot's stream and makes it durable, for a reducer to read (a part of a parted
    /// run): the rows it holds, and its file (`None` when no row came).
    pub fn seal(&mut self) -> Result<(u64, Option<&std::path::Path>), DataError> {
        let Some(mut writer) = self.spill.take() else {
            return Ok((0, None));
        };
        let io = |e: arrow::error::ArrowError| DataError::library(&self.path, &e);
        writer.finish().map_err(io)?;
        let file = writer
            .into_inner()
            .map_err(io)?
            .into_inner()
            .map_err(|e| DataError::library(&self.path, e.error()))?;
        file.sync_all().map_err(|source| DataError::Io {
            path: self.path.clone(),
            source,
        })?;
        Ok((self.rows, Some(&self.path)))
    }

    /// The slot's sorted runs, read back; the stream is removed once read.
    ///
    /// The file is mapped, not read: the runs' arrays point into the page cache, so the bucket
    /// is neither copied nor put in freshly zeroed heap pages (reading it was most of what the
    /// main thread did between buckets, with the other cores waiting). Nor is it populated up
    /// front: the pages are mapped as the bucket's gather touches them, on every core, instead
    /// of all on the main thread first (a tenth of the write half's main-thread time).
    pub fn runs(&mut self, schema: &SchemaRef) -> Result<Option<Vec<RecordBatch>>, DataError> {
        let Some(mut writer) = self.spill.take() else {
            return Ok(None);
        };
        let io = |e: arrow::error::ArrowError| DataError::library(&self.path, &e);
        writer.finish().map_err(io)?;
        let file = writer.into_inner().map_err(io)?;
        file.into_inner()
            .map_err(|e| DataError::library(&self.path, e.error()))?;
        // The spill file is this run's own, in its private temporary folder, and is never
        // written again once finished above.
        let runs = read_runs(&self.path, schema)?;
        // Unlinked: the mapped pages stay until the last run pointing into them is dropped.
        remove_if_present(&self.path)?;
        Ok(Some(runs))
    }
}

/// The sorted runs of a slot file this run wrote and finished, mapped (see [`Slot::runs`]) and
/// decoded without validation.
fn read_runs(path: &std::path::Path, schema: &SchemaRef) -> Result<Vec<RecordBatch>, DataError> {
    let file = File::open(path).map_err(|source| DataError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // SAFETY: the file is this run's own, finished, and never written again.
    let map =
        unsafe { memmap2::MmapOptions::new().map(&file) }.map_err(|source| DataError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    decode_runs(&mapped_buffer(map), schema).map_err(|e| DataError::library(path, &e))
}

/// The record batches of the IPC stream `append` wrote, decoded without validating them again.
///
/// The stream is the one this run wrote from valid arrays, in a temporary folder only this
/// user can write; validating it again (UTF-8 above all) cost 2.6% of a churn run.
/// `StreamDecoder::with_skip_validation` (arrow-ipc 60) still validates record batches, so the
/// stream's messages are walked here and each is handed to a `FileDecoder`, which honours it.
/// A stream message is a continuation marker, the metadata length, the metadata and the body.
pub(super) fn decode_runs(
    stream: &Buffer,
    schema: &SchemaRef,
) -> Result<Vec<RecordBatch>, ArrowError> {
    let bad = |what: &str| ArrowError::IpcError(format!("spill stream: {what}"));
    // SAFETY: see above: the stream is this run's own, written from valid arrays.
    let decoder =
        unsafe { FileDecoder::new(schema.clone(), MetadataVersion::V5).with_skip_validation(true) };
    let bytes = stream.as_slice();
    let mut runs = Vec::new();
    let mut at = 0usize;
    loop {
        let prefix = bytes.get(at..at + 8).ok_or_else(|| bad("cut short"))?;
        if prefix[..4] != [0xff; 4] {
            return Err(bad("no continuation marker"));
        }
        let metadata = i32::from_le_bytes(prefix[4..].try_into().expect("4 bytes")) as usize;
        if metadata == 0 {
            return Ok(runs);
        }
        let message = bytes
            .get(at + 8..at + 8 + metadata)
            .ok_or_else(|| bad("metadata cut short"))?;
        let message = root_as_message(message).map_err(|e| bad(&e.to_string()))?;
        let body = usize::try_from(message.bodyLength()).map_err(|_| bad("body length"))?;
        let end = at + 8 + metadata + body;
        if end > bytes.len() {
            return Err(bad("body cut short"));
        }
        if message.header_type() == MessageHeader::RecordBatch {
            let block = Block::new(0, (8 + metadata) as i32, body as i64);
            let run = decoder.read_record_batch(&block, &stream.slice_with_length(at, end - at))?;
            runs.extend(run);
        }
        at = end;
    }
}

/// `map` as an Arrow buffer that owns it: arrays decoded from it point into the mapping, which
/// is unmapped when the last of them is dropped.
fn mapped_buffer(map: memmap2::Mmap) -> Buffer {
    let len = map.len();
    match NonNull::new(map.as_ptr().cast_mut()) {
        // SAFETY: the pointer and length are the mapping's, and the mapping lives as long as
        // the buffer's owner, which is the mapping itself.
        Some(ptr) if len > 0 => unsafe { Buffer::from_custom_allocation(ptr, len, Arc::new(map)) },
        _ => Buffer::from_vec(Vec::<u8>::new()),
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Int64Array, StringArray, UInt64Array};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn run(first: i64, rows: usize) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, true),
            Field::new("note", DataType::Utf8, true),
            Field::new("key", DataType::UInt64, false),
        ]));
        let n: Vec<Option<i64>> = (first..first + rows as i64)
            .map(|i| (i % 5 != 0).then_some(i))
            .collect();
        let notes: Vec<Option<String>> = (first..first + rows as i64)
            .map(|i| (i % 3 != 0).then(|| format!("note é {i}")))
            .collect();
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(n)) as ArrayRef,
                Arc::new(StringArray::from(notes)),
                Arc::new(UInt64Array::from_iter_values(
                    (0..rows as u64).map(|k| k * 7),
                )),
            ],
        )
        .unwrap()
    }

    /// Runs appended to a slot (slices among them) come back whole and in order, nulls and
    /// multi-byte text included; a stream cut short is an error, not a partial read.
    #[test]
    fn a_slots_runs_come_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let whole = run(0, 1000);
        let runs = [whole.slice(3, 400), run(5000, 7), whole.slice(900, 100)];
        let schema = whole.schema();
        let mut slot = Slot::new(dir.path().join("slot.arrows"), 4 << 10);
        assert!(slot.runs(&schema).unwrap().is_none());
        for r in &runs {
            slot.append(r, &schema).unwrap();
        }
        assert_eq!(slot.runs(&schema).unwrap().unwrap(), runs.to_vec());
        assert!(!dir.path().join("slot.arrows").exists());

        let mut slot = Slot::new(dir.path().join("cut.arrows"), 4 << 10);
        slot.append(&runs[0], &schema).unwrap();
        let mut writer = slot.spill.take().unwrap();
        writer.finish().unwrap();
        let bytes = writer.into_inner().unwrap().into_inner().unwrap();
        drop(bytes);
        let written = std::fs::read(dir.path().join("cut.arrows")).unwrap();
        let stream = Buffer::from_vec(written.clone());
        assert_eq!(
            decode_runs(&stream, &schema).unwrap(),
            vec![runs[0].clone()]
        );
        for cut in [written.len() - 8, written.len() / 2, 4] {
            let short = Buffer::from_vec(written[..cut].to_vec());
            assert!(decode_runs(&short, &schema).is_err(), "cut at {cut}");
        }
    }

    /// The counting sort gives each slot's rows in key order, as sorting the slot whole does,
    /// with rows in no split left out, for one bucket and for many.
    #[test]
    fn slot_order_is_the_order_a_sort_by_slot_and_key_gives() {
        use crate::shards::keys::splitmix64;
        let keys: Vec<Vec<u64>> = (0..3u64)
            .map(|batch| {
                (0..5000)
                    .map(|row| splitmix64(batch * 10_000 + row))
                    .collect()
            })
            .collect();
        let splits: Vec<Vec<Option<u8>>> = (0..3usize)
            .map(|batch| {
                (0..5000usize)
                    .map(|row| match (batch + row) % 7 {
                        0 => None,
                        n => Some((n % 2) as u8),
                    })
                    .collect()
            })
            .collect();
        let key_slices: Vec<&[u64]> = keys.iter().map(Vec::as_slice).collect();
        for buckets in [1u64, 2, 8] {
            let shift = 64 - buckets.trailing_zeros();
            let mut expected: Vec<(usize, u64, usize, usize)> = Vec::new();
            for (batch, (keys, splits)) in keys.iter().zip(&splits).enumerate() {
                for (row, (&key, split)) in keys.iter().zip(splits).enumerate() {
                    if let Some(split) = split {
                        let bucket = if buckets == 1 {
                            0
                        } else {
                            (key >> shift) as usize
                        };
                        expected.push((
                            *split as usize * buckets as usize + bucket,
                            key,
                            batch,
                            row,
                        ));
                    }
                }
            }
            expected.sort();
            let (order, runs) = slot_order(&key_slices, &splits, buckets, 2 * buckets as usize);
            let expected_order: Vec<(usize, usize)> = expected
                .iter()
                .map(|&(_, _, batch, row)| (batch, row))
                .collect();
            assert_eq!(order, expected_order, "{buckets} buckets");
            let mut expected_runs: Vec<(usize, usize, usize)> = Vec::new();
            for (at, &(slot, ..)) in expected.iter().enumerate() {
                match expected_runs.last_mut() {
                    Some(run) if run.0 == slot => run.2 += 1,
                    _ => expected_runs.push((slot, at, 1)),
                }
            }
            assert_eq!(runs, expected_runs, "{buckets} buckets");
        }
    }
}
