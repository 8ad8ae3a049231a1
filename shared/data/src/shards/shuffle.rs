//! The seeded shuffle with bounded memory, and the whole shardify run.
//!
//! Each row gets a 64-bit key, a bijection of (seed, file, row), so keys never collide and the
//! order they give depends on nothing but the input and the seed. Rows are spread into buckets by
//! the top bits of their key (spilled to temporary Arrow IPC files once a bucket's buffer is
//! full), then each bucket is sorted in memory and appended to the split's shards. Buckets cover
//! increasing key ranges, so the concatenation is the full sort: the output is the same whatever
//! the number of buckets, the memory budget or the thread timing.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow::array::{ArrayRef, RecordBatch, UInt32Array, UInt64Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use rayon::prelude::*;

use crate::error::DataError;
use crate::read::{BadValues, Snapshot};
use crate::shards::index::{INDEX_FORMAT, INDEX_NAME, ShardIndex, Source, SplitEntry};
use crate::shards::rows::RowsDigest;
use crate::shards::runs::gather_by_key;
use crate::shards::writer::{ShardWriterOptions, SplitWriter, sync_dir};
use crate::source::FileFormat;
use crate::split::Splits;

const KEY_COLUMN: &str = "__runfn_shuffle_key";
const MAX_BUCKETS: u64 = 1024;
/// A read batch's rows in memory, at most (see `read_batch_rows`).
const CACHE_BATCH_BYTES: u64 = 4 << 20;
/// The write buffer of each spill file.
const SPILL_BUFFER: usize = 64 << 10;

#[derive(Debug, Clone)]
pub struct ShardOptions {
    pub out: PathBuf,
    pub seed: u64,
    /// Memory the shuffle may hold at once, in bytes.
    pub memory_bytes: u64,
    pub shard_rows: usize,
    pub row_group_rows: usize,
    pub zstd_level: i32,
    /// How the index names the snapshot (default: the folder read, which is a local copy when
    /// the snapshot came from a store).
    pub source_name: Option<String>,
}

/// Called with the number of rows read so far, for a progress bar.
pub type ShardProgress<'a> = &'a (dyn Fn(u64) + Sync);

/// Shards `snapshot` into `options.out`. Returns the index written and the blake3 of its bytes.
pub fn shardify(
    snapshot: &Snapshot,
    splits: &Splits,
    options: &ShardOptions,
    progress: ShardProgress,
) -> Result<(ShardIndex, String), DataError> {
    let out = &options.out;
    runfn_core::paths::create_dir_all(out).map_err(|e| DataError::Other(e.to_string()))?;
    // The digest refuses what the readers would (a FIFO, say) before any row is read.
    let digest = runfn_manifest::digest::digest_path(&snapshot.root, &|_| {})
        .map_err(|e| DataError::Other(e.to_string()))?;

    let buckets = bucket_count(snapshot, options.memory_bytes);
    let spill_dir = tempfile::Builder::new()
        .prefix(".shardify-spill")
        .tempdir_in(out)
        .map_err(|source| DataError::Io {
            path: out.clone(),
            source,
        })?;
    let keyed_schema = keyed_schema(&snapshot.schema);
    let split_count = splits.splits.len();
    // A quarter of the budget for the rows waiting in memory, shared by every (split, bucket).
    // No floor above what the budget allows: with hundreds of slots a 1 MiB floor alone held
    // hundreds of MiB.
    let flush_bytes = (options.memory_bytes / (4 * (split_count as u64).max(1) * buckets))
        .clamp(64 << 10, 64 << 20);
    let slots: Vec<Mutex<Slot>> = (0..split_count * buckets as usize)
        .map(|i| Mutex::new(Slot::new(spill_dir.path().join(format!("slot-{i}.arrows")))))
        .collect();

    let seed_mix = splitmix64(options.seed);
    let read_rows = std::sync::atomic::AtomicU64::new(0);
    let per_file: Vec<(BadValues, u64)> = (0..snapshot.files.len())
        .into_par_iter()
        .map(|file| {
            let mut bad = BadValues::default();
            let mut unassigned = 0u64;
            let batch_rows = read_batch_rows(snapshot, file, options.memory_bytes);
            for typed in snapshot.read_file_in(file, batch_rows)? {
                let typed = typed?;
                bad.merge(&typed.bad_values);
                let rows = typed.batch.num_rows();
                let assignment = splits.assign(&typed.batch).map_err(|overlap| {
                    DataError::file(
                        &snapshot.files[file].path,
                        format!(
                            "row {} falls in both splits `{}` and `{}`",
                            typed.first_row + overlap.row as u64 + 1,
                            overlap.first,
                            overlap.second
                        ),
                    )
                })?;
                unassigned += assignment.iter().filter(|a| a.is_none()).count() as u64;
                let keys: Vec<u64> = (0..rows as u64)
                    .map(|row| {
                        splitmix64(seed_mix ^ ((file as u64) << 40 | (typed.first_row + row)))
                    })
                    .collect();
                let keyed = with_keys(&typed.batch, &keyed_schema, keys.clone())?;
                partition(
                    &keyed,
                    &assignment,
                    &keys,
                    buckets,
                    &slots,
                    flush_bytes,
                    &keyed_schema,
                )?;
                progress(
                    read_rows.fetch_add(rows as u64, std::sync::atomic::Ordering::Relaxed)
                        + rows as u64,
                );
            }
            Ok((bad, unassigned))
        })
        .collect::<Vec<Result<_, DataError>>>()
        // The first failing file in file order, so the error is the same on every run.
        .into_iter()
        .collect::<Result<_, DataError>>()?;
    let mut bad_values = BadValues::default();
    let mut unassigned_rows = 0;
    for (bad, unassigned) in &per_file {
        bad_values.merge(bad);
        unassigned_rows += unassigned;
    }

    // Every row is read and placed: what could be wrong with the input (an unreadable file, a row
    // in two splits) has been found, and the shards of an earlier run are still whole. Only now
    // is the old index removed; without an index the folder holds no finished shards, so a run
    // killed from here on leaves nothing a reader could mistake for a complete set.
    remove_if_present(&out.join(INDEX_NAME))?;
    sync_dir(out)?;

    let writer_options = ShardWriterOptions {
        shard_rows: options.shard_rows,
        row_group_rows: options.row_group_rows,
        zstd_level: options.zstd_level,
        background_row_groups: background_row_groups(snapshot, options),
    };
    let mut split_entries = BTreeMap::new();
    for (index, split) in splits.splits.iter().enumerate() {
        let mut writer =
            SplitWriter::new(out, &split.name, snapshot.schema.clone(), &writer_options)?;
        let mut rows = 0u64;
        let mut digest = RowsDigest::new(&snapshot.columns);
        for bucket in 0..buckets as usize {
            let mut slot = slots[index * buckets as usize + bucket]
                .lock()
                .map_err(|_| DataError::Other("a shuffle thread panicked".into()))?;
            if let Some(sorted) = slot.sorted(&keyed_schema)? {
                rows += sorted.num_rows() as u64;
                // The digest and the encoding read the same rows: side by side on the cores.
                let ((), written) =
                    rayon::join(|| digest.update(&sorted), || writer.write(&sorted));
                written?;
            }
        }
        let shards = writer.finish()?;
        remove_stale_shards(
            &out.join(&split.name),
            &shards.iter().map(|s| s.path.clone()).collect::<Vec<_>>(),
            out,
        )?;
        sync_dir(&out.join(&split.name))?;
        split_entries.insert(
            split.name.clone(),
            SplitEntry {
                rule: split.rule.clone(),
                rows,
                shards,
                rows_blake3: Some(digest.finish()),
            },
        );
    }
    drop(slots);
    drop(spill_dir);

    let index = ShardIndex {
        format: INDEX_FORMAT.to_string(),
        seed: options.seed,
        source: Source {
            path: options
                .source_name
                .clone()
                .unwrap_or_else(|| snapshot.root.display().to_string()),
            files: digest.files,
            bytes: digest.bytes,
            digest: digest.digest,
        },
        columns: snapshot.columns.clone(),
        splits: split_entries,
        unassigned_rows,
        bad_values,
    };
    let mut text =
        serde_json::to_string_pretty(&index).map_err(|e| DataError::Other(e.to_string()))?;
    text.push('\n');
    runfn_core::atomic::write_bytes_atomic(&out.join(INDEX_NAME), text.as_bytes())
        .map_err(|e| DataError::Other(e.to_string()))?;
    Ok((index, blake3::hash(text.as_bytes()).to_hex().to_string()))
}

/// Rows per read batch: while a batch is read, typed, keyed and cut into slots it is held about
/// four times in memory, by each reading thread, so a batch gets a sixteenth of the budget
/// shared by the threads (a quarter of it in all; the rows waiting in the slots get another).
/// And no more than `CACHE_BATCH_BYTES` in memory: the CSV decoder builds each column in one
/// pass over the batch, and batches that fit in the cache decoded 2.7 times faster than 64Ki
/// rows of 300 bytes. 64Ki rows at most, 1Ki at least.
fn read_batch_rows(snapshot: &Snapshot, file: usize, memory_bytes: u64) -> usize {
    let threads = rayon::current_num_threads().max(1) as u64;
    let row = in_memory_row_bytes(snapshot, file).max(1);
    let rows = (memory_bytes / (16 * threads)).min(CACHE_BATCH_BYTES) / row;
    (rows as usize).clamp(1 << 10, crate::read::BATCH_ROWS)
}

/// About the bytes a row of `file` takes in memory.
fn in_memory_row_bytes(snapshot: &Snapshot, file: usize) -> u64 {
    snapshot
        .row_bytes(file)
        .saturating_mul(expansion(snapshot.files[file].format))
}

/// Bytes in memory per byte of the file: Arrow holds about twice CSV or JSON text and five times
/// the Parquet bytes.
fn expansion(format: FileFormat) -> u64 {
    match format {
        FileFormat::Parquet => 5,
        FileFormat::Csv | FileFormat::JsonLines => 2,
    }
}

/// Row groups each shard may encode in the background (see `ColumnParallelWriter`): as many as
/// fit, with the one being filled, in a third of the budget (the bucket being sorted has
/// another third), two at most (two keep both halves of the work busy), none when even one
/// does not fit.
fn background_row_groups(snapshot: &Snapshot, options: &ShardOptions) -> usize {
    let group_bytes = (options.row_group_rows as u64)
        .saturating_mul(in_memory_row_bytes(snapshot, 0))
        .max(1);
    ((options.memory_bytes / 3 / group_bytes) as usize)
        .saturating_sub(1)
        .min(2)
}

/// A bijective 64-bit mixer (Steele et al.'s splitmix64 finalizer).
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Enough buckets that one bucket of the largest split, sorted (about twice its size), fits in
/// a third of the budget. In-memory Arrow is about twice the CSV text and five times Parquet.
fn bucket_count(snapshot: &Snapshot, memory_bytes: u64) -> u64 {
    let in_memory = snapshot
        .bytes()
        .saturating_mul(expansion(snapshot.files[0].format))
        .saturating_mul(2);
    let per_bucket = (memory_bytes / 3).max(1);
    in_memory
        .div_ceil(per_bucket)
        .max(1)
        .next_power_of_two()
        .min(MAX_BUCKETS)
}

fn keyed_schema(schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new(KEY_COLUMN, DataType::UInt64, false));
    Arc::new(Schema::new(fields))
}

fn with_keys(
    batch: &RecordBatch,
    schema: &SchemaRef,
    keys: Vec<u64>,
) -> Result<RecordBatch, DataError> {
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(UInt64Array::from(keys)));
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| DataError::Other(e.to_string()))
}

#[allow(clippy::too_many_arguments)]
fn partition(
    batch: &RecordBatch,
    assignment: &[Option<u8>],
    keys: &[u64],
    buckets: u64,
    slots: &[Mutex<Slot>],
    flush_bytes: u64,
    schema: &SchemaRef,
) -> Result<(), DataError> {
    let shift = 64 - buckets.trailing_zeros();
    // Rows by slot, in slot order (a vector indexed by slot: a map lookup per row cost more
    // than the rest of the partitioning).
    let mut indices: Vec<Vec<u32>> = vec![Vec::new(); slots.len()];
    for (row, split) in assignment.iter().enumerate() {
        if let Some(split) = split {
            let bucket = if buckets == 1 {
                0
            } else {
                (keys[row] >> shift) as usize
            };
            indices[*split as usize * buckets as usize + bucket].push(row as u32);
        }
    }
    for (slot, rows) in indices.into_iter().enumerate() {
        if rows.is_empty() {
            continue;
        }
        let part = take_record_batch(batch, &UInt32Array::from(rows))
            .map_err(|e| DataError::Other(e.to_string()))?;
        let mut slot = slots[slot]
            .lock()
            .map_err(|_| DataError::Other("a shuffle thread panicked".into()))?;
        slot.push(part, flush_bytes, schema)?;
    }
    Ok(())
}

/// One (split, bucket): rows buffered in memory, spilled to an Arrow IPC stream when full.
struct Slot {
    path: PathBuf,
    pending: Vec<RecordBatch>,
    pending_bytes: u64,
    spill: Option<StreamWriter<BufWriter<File>>>,
}

impl Slot {
    fn new(path: PathBuf) -> Slot {
        Slot {
            path,
            pending: Vec::new(),
            pending_bytes: 0,
            spill: None,
        }
    }

    fn push(
        &mut self,
        batch: RecordBatch,
        flush_bytes: u64,
        schema: &SchemaRef,
    ) -> Result<(), DataError> {
        self.pending_bytes += batch.get_array_memory_size() as u64;
        self.pending.push(batch);
        if self.pending_bytes >= flush_bytes {
            // Spilled as a sorted run, so the bucket's final gather reads each run in order.
            let merged = gather_by_key(schema, std::mem::take(&mut self.pending), true)?;
            let io = |e: arrow::error::ArrowError| DataError::file(&self.path, e);
            if self.spill.is_none() {
                let file = File::create(&self.path).map_err(|source| DataError::Io {
                    path: self.path.clone(),
                    source,
                })?;
                self.spill = Some(
                    // Each flush writes one merged batch, so a small buffer suffices; a 1 MiB
                    // buffer per slot cost as much as the rows themselves.
                    StreamWriter::try_new(BufWriter::with_capacity(SPILL_BUFFER, file), schema)
                        .map_err(io)?,
                );
            }
            if let Some(writer) = self.spill.as_mut() {
                writer.write(&merged).map_err(io)?;
            }
            self.pending_bytes = 0;
        }
        Ok(())
    }

    /// All rows of the slot sorted by key, without the key column: its spilled runs and the
    /// parts still in memory, merged.
    fn sorted(&mut self, schema: &SchemaRef) -> Result<Option<RecordBatch>, DataError> {
        let slot = self;
        let mut batches = Vec::new();
        if let Some(mut writer) = slot.spill.take() {
            writer
                .finish()
                .map_err(|e| DataError::file(&slot.path, e))?;
            drop(writer);
            let file = File::open(&slot.path).map_err(|source| DataError::Io {
                path: slot.path.clone(),
                source,
            })?;
            let reader = StreamReader::try_new(BufReader::with_capacity(1 << 20, file), None)
                .map_err(|e| DataError::file(&slot.path, e))?;
            for batch in reader {
                batches.push(batch.map_err(|e| DataError::file(&slot.path, e))?);
            }
            remove_if_present(&slot.path)?;
        }
        batches.append(&mut slot.pending);
        if batches.is_empty() {
            return Ok(None);
        }
        Ok(Some(gather_by_key(schema, batches, false)?))
    }
}

fn remove_if_present(path: &Path) -> Result<(), DataError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(DataError::Io {
            path: path.into(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Part files of an earlier run that the new index does not list.
fn remove_stale_shards(split_dir: &Path, keep: &[String], out: &Path) -> Result<(), DataError> {
    let Ok(entries) = std::fs::read_dir(split_dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        let relative = path
            .strip_prefix(out)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        if name.starts_with("part-") && name.ends_with(".parquet") && !keep.contains(&relative) {
            remove_if_present(&path)?;
        }
    }
    Ok(())
}
