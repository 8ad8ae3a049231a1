//! The seeded shuffle with bounded memory, and the whole shardify run.
//!
//! Each row gets a 64-bit key, a bijection of (seed, file, row), so keys never collide and the
//! order they give depends on nothing but the input and the seed. Rows are spread into buckets by
//! the top bits of their key into temporary Arrow IPC files of sorted runs (`spill`), then each
//! bucket's runs are merged in memory and appended to the split's shards. Buckets cover
//! increasing key ranges, so the concatenation is the full sort: the output is the same whatever
//! the number of buckets, the memory budget or the thread timing.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use rayon::prelude::*;

use crate::error::DataError;
use crate::hashing_reader::ReadHash;
use crate::read::{BadValues, Snapshot};
use crate::shards::cardinality::DistinctSample;
use crate::shards::column_parallel::GroupSlots;
use crate::shards::file_read::{FileRead, ReadPlan, ShardProgress};
use crate::shards::index::{INDEX_FORMAT, INDEX_NAME, ShardIndex, Source, SplitEntry};
use crate::shards::keys::{keyed_schema, splitmix64};
use crate::shards::rows::RowsDigest;
use crate::shards::runs::{gather_in_order, key_order};
use crate::shards::spill::Slot;
use crate::shards::writer::{
    ROW_GROUP_BYTES, ShardWriterOptions, SplitWriter, remove_if_present, sync_dir,
};
use crate::split::Splits;

const MAX_BUCKETS: u64 = 1024;
/// A read batch's rows in memory, at most (see `read_batch_rows`).
const CACHE_BATCH_BYTES: u64 = 4 << 20;
/// A piece of a bucket's gather, about (see `runs::gather_by_key`).
const GATHER_PIECE_BYTES: usize = 8 << 20;
/// A reading thread's chunk of rows gathered into runs at once, at most (see `chunk_bytes`).
const CACHE_CHUNK_BYTES: u64 = 16 << 20;

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

/// Shards `snapshot` into `options.out`. Returns the index written and the blake3 of its bytes.
pub fn shardify(
    snapshot: &Snapshot,
    splits: &Splits,
    options: &ShardOptions,
    progress: ShardProgress,
) -> Result<(ShardIndex, String), DataError> {
    let out = &options.out;
    runfn_core::paths::create_dir_all(out).map_err(|e| DataError::Other(e.to_string()))?;
    // Held to the end of the run: a second shardify here is refused, and what a killed one
    // left (spills, unrenamed parts) goes now.
    let (_lock, _swept) = super::out_lock::lock_and_sweep(out)?;
    // The listing refuses what the readers would (a FIFO, say) before any row is read; the
    // files are hashed as they are read (see `hashing_reader`).
    let listing = runfn_manifest::digest::Listing::of(&snapshot.root)
        .map_err(|e| DataError::Other(e.to_string()))?;
    let read_hashes: Vec<ReadHash> = snapshot.files.iter().map(|_| ReadHash::default()).collect();

    let sizes = Sizes::of(snapshot, options.memory_bytes)?;
    let buckets = sizes.buckets;
    let spill_dir = tempfile::Builder::new()
        .prefix(".shardify-spill")
        .tempdir_in(out)
        .map_err(|source| DataError::Io {
            path: out.clone(),
            source,
        })?;
    let keyed_schema = keyed_schema(&snapshot.schema);
    let split_count = splits.splits.len();
    let chunk_bytes = chunk_bytes(options.memory_bytes);
    let slot_count = split_count * buckets as usize;
    let buffer_bytes = Slot::buffer_bytes(options.memory_bytes, slot_count);
    let slots: Vec<Mutex<Slot>> = (0..slot_count)
        .map(|i| {
            let path = spill_dir.path().join(format!("slot-{i}.arrows"));
            Mutex::new(Slot::new(path, buffer_bytes))
        })
        .collect();

    let seed_mix = splitmix64(options.seed);
    let read_rows = std::sync::atomic::AtomicU64::new(0);
    let estimated_rows = sizes.estimated_rows;
    let plan = ReadPlan {
        snapshot,
        splits,
        keyed_schema: &keyed_schema,
        slots: &slots,
        buckets,
        seed_mix,
        chunk_bytes,
        estimated_rows,
        read_rows: &read_rows,
        progress,
        started: std::sync::atomic::AtomicUsize::new(0),
    };
    let all: Vec<usize> = (0..snapshot.files.len()).collect();
    let per_file = read_files(&plan, &all, &sizes, options.memory_bytes, &read_hashes)?;
    let by_path: HashMap<&Path, &ReadHash> = snapshot
        .files
        .iter()
        .map(|f| f.path.as_path())
        .zip(&read_hashes)
        .collect();
    let (digest, _) = listing
        .digest(
            &|path| by_path.get(path).and_then(|hash| hash.get().copied()),
            &|_| {},
        )
        .map_err(|e| DataError::Other(e.to_string()))?;
    let Gathered {
        bad_values,
        counts,
        spilled_rows,
        spilled_bytes,
        sample,
    } = Gathered::of(
        per_file,
        estimated_rows,
        split_count,
        snapshot.columns.len(),
    );
    let unassigned_rows = counts[split_count];
    // Refused before the old shards go.
    if let Some(why) = splits.empty_window(&counts[..split_count]) {
        return Err(DataError::Other(why));
    }
    let group_rows = options.row_group_rows.min(options.shard_rows) as u64;

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
        background: GroupSlots::new(background_row_groups(
            spilled_bytes / spilled_rows.max(1),
            snapshot.columns.len(),
            options,
        )),
    };
    let mut split_entries = BTreeMap::new();
    // Splits whose rows are all written and whose last row groups may still be encoding: each
    // is finished once its groups are done (looked at after every bucket), so the next split's
    // rows are gathered meanwhile instead of the cores waiting on one group's widest column.
    let mut ending: Vec<OpenSplit> = Vec::new();
    let mut upcoming: Option<Result<Ordered, DataError>> = None;
    for (index, split) in splits.splits.iter().enumerate() {
        let mut open = OpenSplit {
            name: split.name.clone(),
            rule: split.rule.clone(),
            writer: SplitWriter::new(
                out,
                &split.name,
                snapshot.schema.clone(),
                &writer_options,
                sample.plain_columns(index, group_rows),
            )?,
            rows: 0,
            digest: RowsDigest::new(&snapshot.columns),
        };
        for bucket in 0..buckets as usize {
            let slot = index * buckets as usize + bucket;
            let current = upcoming
                .take()
                .unwrap_or_else(|| ordered_runs(&slots[slot], &keyed_schema))?;
            // The next slot's runs are mapped and put in key order (one core's sort) while
            // this one's are gathered and written, so the sort is not a pause between buckets
            // (5% of the wall time on narrow rows). Only where its order fits in a sixteenth
            // of the budget: the sort holds 32 bytes a row beside the bucket being written.
            let next_rows = counts
                .get((slot + 1) / buckets as usize)
                .map_or(0, |rows| rows / buckets);
            let prefetch = slot + 1 < slots.len()
                && next_rows.saturating_mul(ORDER_ROW_BYTES) <= options.memory_bytes / 16;
            let (next, written) = std::thread::scope(|scope| {
                let next = prefetch.then(|| {
                    let schema = &keyed_schema;
                    let next_slot = &slots[slot + 1];
                    scope.spawn(move || ordered_runs(next_slot, schema))
                });
                let written = match current {
                    Some((runs, order)) => write_bucket(&mut open, &keyed_schema, runs, &order)
                        .and_then(|()| {
                            ending =
                                finish_done(std::mem::take(&mut ending), out, &mut split_entries)?;
                            Ok(())
                        }),
                    None => Ok(()),
                };
                let next = next.map(|next| {
                    next.join().unwrap_or_else(|_| {
                        Err(DataError::Other("a shuffle thread panicked".into()))
                    })
                });
                (next, written)
            });
            written?;
            upcoming = next;
        }
        open.writer.end()?;
        ending.push(open);
    }
    for last in ending {
        last.finish(out, &mut split_entries)?;
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
    let blake3 = write_index(out, &index)?;
    Ok((index, blake3))
}

/// Writes `out/index.json` atomically (the last file of a run); returns its bytes' blake3.
pub(super) fn write_index(out: &Path, index: &ShardIndex) -> Result<String, DataError> {
    let mut text =
        serde_json::to_string_pretty(index).map_err(|e| DataError::Other(e.to_string()))?;
    text.push('\n');
    runfn_core::atomic::write_bytes_atomic(&out.join(INDEX_NAME), text.as_bytes())
        .map_err(|e| DataError::Other(e.to_string()))?;
    Ok(blake3::hash(text.as_bytes()).to_hex().to_string())
}

/// Each file's row sizes (on disk, decoded), and what follows from the whole snapshot's: the
/// buckets of the key space and the row estimate (the sample's rate). A part of a parted run
/// measures every file too, so that it cuts the key space and samples as one process does.
pub(super) struct Sizes {
    pub decoded_row_bytes: Vec<u64>,
    pub buckets: u64,
    pub estimated_rows: u64,
}

impl Sizes {
    pub(super) fn of(snapshot: &Snapshot, memory_bytes: u64) -> Result<Sizes, DataError> {
        let (row_bytes, decoded_row_bytes): (Vec<u64>, Vec<u64>) = (0..snapshot.files.len())
            .into_par_iter()
            .map(|file| snapshot.row_sizes(file))
            .collect::<Result<Vec<_>, DataError>>()?
            .into_iter()
            .unzip();
        let buckets = bucket_count(snapshot, &row_bytes, &decoded_row_bytes, memory_bytes);
        let estimated_rows = snapshot
            .files
            .iter()
            .zip(&row_bytes)
            .map(|(file, row)| file.bytes / row)
            .sum();
        Ok(Sizes {
            decoded_row_bytes,
            buckets,
            estimated_rows,
        })
    }
}

/// What the files' reads add up to, in file order.
pub(super) struct Gathered {
    pub bad_values: BadValues,
    /// Rows per split, the last in no split.
    pub counts: Vec<u64>,
    pub spilled_rows: u64,
    pub spilled_bytes: u64,
    pub sample: DistinctSample,
}

impl Gathered {
    pub(super) fn of(
        reads: Vec<FileRead>,
        estimated_rows: u64,
        splits: usize,
        columns: usize,
    ) -> Gathered {
        let mut out = Gathered {
            bad_values: BadValues::default(),
            counts: vec![0u64; splits + 1],
            spilled_rows: 0,
            spilled_bytes: 0,
            sample: DistinctSample::new(estimated_rows, splits, columns),
        };
        for read in reads {
            out.bad_values.merge(&read.bad);
            for (total, count) in out.counts.iter_mut().zip(read.counts) {
                *total += count;
            }
            out.spilled_rows += read.spilled.0;
            out.spilled_bytes += read.spilled.1;
            out.sample.merge(read.sample);
        }
        out
    }
}

/// Reads `files` (positions in the snapshot) into the plan's slots on every core, each file's
/// bytes hashed into its `read_hashes` entry; what each read gave, in the order of `files`.
pub(super) fn read_files(
    plan: &ReadPlan,
    files: &[usize],
    sizes: &Sizes,
    memory_bytes: u64,
    read_hashes: &[ReadHash],
) -> Result<Vec<FileRead>, DataError> {
    files
        .par_iter()
        .map(|&file| {
            let batch_rows = read_batch_rows(sizes.decoded_row_bytes[file], memory_bytes);
            plan.read(file, batch_rows, &read_hashes[file])
        })
        .collect::<Vec<Result<_, DataError>>>()
        // The first failing file in file order, so the error is the same on every run.
        .into_iter()
        .collect()
}

/// Bytes a row takes while its bucket is put in key order: the sort's (key, batch, row) and
/// the (batch, row) order it leaves.
const ORDER_ROW_BYTES: u64 = 32;

/// A slot's runs read back, with their rows' order by key; `None` for a slot with no rows.
type Ordered = Option<(Vec<RecordBatch>, Vec<(usize, usize)>)>;

fn ordered_runs(slot: &Mutex<Slot>, schema: &SchemaRef) -> Result<Ordered, DataError> {
    let runs = slot
        .lock()
        .map_err(|_| DataError::Other("a shuffle thread panicked".into()))?
        .runs(schema)?;
    runs.map(|runs| key_order(schema, &runs).map(|order| (runs, order)))
        .transpose()
}

/// A bucket's rows gathered in key order and written: the digest and the encoding read the
/// same rows side by side on the cores.
fn write_bucket(
    open: &mut OpenSplit,
    schema: &SchemaRef,
    runs: Vec<RecordBatch>,
    order: &[(usize, usize)],
) -> Result<(), DataError> {
    let lengths = open.writer.piece_lengths(order.len(), piece_rows(&runs));
    for piece in gather_in_order(schema, runs, order, &lengths)? {
        open.rows += piece.num_rows() as u64;
        let (digest, writer) = (&mut open.digest, &mut open.writer);
        let ((), result) = rayon::join(|| digest.update(&piece), || writer.write(&piece));
        result?;
    }
    Ok(())
}

/// A split being written, or written and ending: its last row groups possibly still encoding.
struct OpenSplit<'a> {
    name: String,
    rule: String,
    writer: SplitWriter<'a>,
    rows: u64,
    digest: RowsDigest,
}

impl OpenSplit<'_> {
    /// Waits for the last row groups, puts the shards in place and enters the split.
    fn finish(
        self,
        out: &Path,
        entries: &mut BTreeMap<String, SplitEntry>,
    ) -> Result<(), DataError> {
        let shards = self.writer.finish()?;
        let split_dir = out.join(&self.name);
        remove_stale_shards(
            &split_dir,
            &shards.iter().map(|s| s.path.clone()).collect::<Vec<_>>(),
            out,
        )?;
        sync_dir(&split_dir)?;
        entries.insert(
            self.name,
            SplitEntry {
                rule: self.rule,
                rows: self.rows,
                shards,
                rows_blake3: Some(self.digest.finish()),
                rows_format: Some(self.digest.format().to_string()),
            },
        );
        Ok(())
    }
}

/// Finishes the splits of `ending` whose row groups are all written, without waiting; returns
/// the others.
fn finish_done<'a>(
    ending: Vec<OpenSplit<'a>>,
    out: &Path,
    entries: &mut BTreeMap<String, SplitEntry>,
) -> Result<Vec<OpenSplit<'a>>, DataError> {
    let mut still = Vec::with_capacity(ending.len());
    for mut split in ending {
        if split.writer.poll()? {
            split.finish(out, entries)?;
        } else {
            still.push(split);
        }
    }
    Ok(still)
}

/// Rows per read batch: while a batch is read, typed and keyed it is held about four times in
/// memory, by each reading thread, so a batch gets a sixteenth of the budget shared by the
/// threads (a quarter of it in all; the chunks get another, see `chunk_bytes`). And no more
/// than `CACHE_BATCH_BYTES` in memory: the CSV decoder builds each column in one pass over the
/// batch, and batches that fit in the cache decoded 2.7 times faster than 64Ki rows of 300
/// bytes. 64Ki rows at most, one at least (a floor of 1Ki rows of 1 MiB values held 3.5 GB at
/// `--memory 128M`).
fn read_batch_rows(decoded_row_bytes: u64, memory_bytes: u64) -> usize {
    let threads = rayon::current_num_threads().max(1) as u64;
    let rows = (memory_bytes / (16 * threads)).min(CACHE_BATCH_BYTES) / decoded_row_bytes.max(1);
    (rows as usize).clamp(1, crate::read::BATCH_ROWS)
}

/// Bytes of keyed batches a reading thread gathers into runs at once: the chunk and its gather
/// are held together, so an eighth of the budget shared by the threads (a quarter in all). And
/// no more than `CACHE_CHUNK_BYTES`, so the gather's random reads stay in the cache.
pub(super) fn chunk_bytes(memory_bytes: u64) -> u64 {
    let threads = rayon::current_num_threads().max(1) as u64;
    (memory_bytes / (8 * threads)).min(CACHE_CHUNK_BYTES)
}

/// Rows per piece of a bucket's gather: about `GATHER_PIECE_BYTES` (the writer then cuts the
/// pieces where its calls start, see `SplitWriter::piece_lengths`).
pub(super) fn piece_rows(runs: &[RecordBatch]) -> usize {
    let rows: usize = runs.iter().map(RecordBatch::num_rows).sum();
    let bytes: usize = runs.iter().map(RecordBatch::get_array_memory_size).sum();
    let row = (bytes / rows.max(1)).max(1);
    (GATHER_PIECE_BYTES / row).max(1)
}

/// Row groups the run may encode in the background at once, across its shards and splits (see
/// `ColumnParallelWriter`): as many as fit, with the one being filled, in two thirds of the
/// budget (the bucket being merged has a sixth), two at most, none when even one does not fit.
/// (In half the budget, `--memory 512M` on the churn CSV got none and encoded on the calling
/// thread: 4.9 s instead of 3.9 s, for a peak of 340 MiB with one.) A group holds its rows (`row_bytes` is
/// measured on the rows spilled: the estimate from the file's bytes, twice the CSV text, was
/// twice the real size of the churn rows), the pieces its first and last rows share with its
/// neighbours, its encoded pages (a third of the rows, at most) and a dictionary of up to 1 MiB
/// per column. With one group where two fit, the encoding of each group's text column, one
/// core's work, set the pace of the whole write half; with the rows alone counted, short rows
/// at `--memory 128M` went a tenth over the budget.
pub(super) fn background_row_groups(
    row_bytes: u64,
    columns: usize,
    options: &ShardOptions,
) -> usize {
    // A group is cut at `ROW_GROUP_BYTES` of its values' bytes too; in memory they take more
    // (offsets, validity), twice as much at most for the short values where it matters.
    let rows_bytes = (options.row_group_rows as u64)
        .saturating_mul(row_bytes)
        .min(2 * ROW_GROUP_BYTES);
    let group_bytes = rows_bytes
        .saturating_add(rows_bytes / 3)
        .saturating_add(2 * GATHER_PIECE_BYTES as u64)
        .saturating_add((columns as u64) << 20)
        .max(1);
    ((options.memory_bytes / 3 * 2 / group_bytes) as usize)
        .saturating_sub(1)
        .min(2)
}

/// Enough buckets that one bucket of the largest split, sorted (about twice its size), fits in
/// a sixth of the budget, each file's rows counted at their size in memory. (A third let a
/// bucket's mapped runs and gathered pieces, beside the row groups encoding, take 485 MiB of
/// 1 GB of wide rows at `--memory 1G`; a sixth took 275 MiB, as fast.)
fn bucket_count(
    snapshot: &Snapshot,
    row_bytes: &[u64],
    decoded_row_bytes: &[u64],
    memory_bytes: u64,
) -> u64 {
    let in_memory: u64 = snapshot
        .files
        .iter()
        .zip(row_bytes.iter().zip(decoded_row_bytes))
        .map(|(file, (on_disk, decoded))| {
            (file.bytes / on_disk.max(&1))
                .max(1)
                .saturating_mul(*decoded)
                .saturating_mul(2)
        })
        .fold(0, u64::saturating_add);
    let per_bucket = (memory_bytes / 6).max(1);
    in_memory
        .div_ceil(per_bucket)
        .max(1)
        .next_power_of_two()
        .min(MAX_BUCKETS)
}

/// Part files of an earlier run that the new index does not list.
pub(super) fn remove_stale_shards(
    split_dir: &Path,
    keep: &[String],
    out: &Path,
) -> Result<(), DataError> {
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
