//! The read half of the shuffle for one file: its batches built, assigned to splits, keyed and
//! spilled on every core.
//!
//! A file's batches are found front to back (a CSV scan cannot start mid-file), but building
//! each one's columns, assigning its rows and gathering them into runs need nothing from the
//! other batches. So one reader hands out scanned batches in order and the cores take them as
//! they come (`par_bridge`), each with its own chunk of rows to spill. A snapshot of one large
//! file was read on one core before, while DuckDB reads one file on all of them (a single
//! 330 MB CSV: shardify 3.4 s against DuckDB's 2.9 s).
//!
//! Nothing written depends on which core took which batch: a row's key comes from its place in
//! the file, a bucket's runs are merged by key, the samples merge in any order, and what must
//! keep the file's order (the bad values' examples, the first error) is kept with each batch's
//! place and put back in order here.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use arrow::datatypes::SchemaRef;
use rayon::prelude::*;

use crate::error::DataError;
use crate::hashing_reader::ReadHash;
use crate::read::{BadValues, PendingBatch, Snapshot};
use crate::shards::cardinality::DistinctSample;
use crate::shards::keys::{splitmix64, with_keys};
use crate::shards::spill::{Chunk, Slot};
use crate::split::Splits;

/// Called with the number of rows read so far, for a progress bar.
pub type ShardProgress<'a> = &'a (dyn Fn(u64) + Sync);

/// What the read of every file shares.
pub struct ReadPlan<'a> {
    pub snapshot: &'a Snapshot,
    pub splits: &'a Splits,
    pub keyed_schema: &'a SchemaRef,
    pub slots: &'a [Mutex<Slot>],
    pub buckets: u64,
    pub seed_mix: u64,
    /// Bytes of rows a worker gathers before spilling them.
    pub chunk_bytes: u64,
    pub estimated_rows: u64,
    pub read_rows: &'a AtomicU64,
    pub progress: ShardProgress<'a>,
    /// Files whose read has started. A file is built on every core only when fewer files than
    /// cores are left to start: before that the files keep the cores busy on their own, and a
    /// core waiting on another's scan of a shared file would be a core idle (the wide and short
    /// benchmarks, 16 and 11 files, were 2-3% slower with every file shared).
    pub started: AtomicUsize,
}

/// What reading one file gave: its bad values (in file order), its rows per split (the last
/// in no split), the rows and bytes it spilled, and its sample of distinct values.
pub struct FileRead {
    pub bad: BadValues,
    pub counts: Vec<u64>,
    pub spilled: (u64, u64),
    pub sample: DistinctSample,
}

/// One worker's part of a file: the rows it holds unspilled, what it counted, each batch's bad
/// values and the earliest error it met, by the batch's place in the file.
struct Share {
    chunk: Chunk,
    counts: Vec<u64>,
    sample: DistinctSample,
    bad: Vec<(usize, BadValues)>,
    error: Option<(usize, DataError)>,
}

impl ReadPlan<'_> {
    /// Reads `file` in batches of `batch_rows` rows, its bytes hashed into `hash`.
    pub fn read(
        &self,
        file: usize,
        batch_rows: usize,
        hash: &ReadHash,
    ) -> Result<FileRead, DataError> {
        let failed = AtomicBool::new(false);
        let pending = self
            .snapshot
            .read_file_pending(file, batch_rows, Some(hash))?;
        let files = self.snapshot.files.len();
        let left = files - self.started.fetch_add(1, Ordering::Relaxed).min(files - 1);
        if left >= rayon::current_num_threads() {
            let mut share = self.share();
            for batch in pending {
                self.take(&mut share, batch?)?;
            }
            share
                .chunk
                .spill(self.buckets, self.slots, self.keyed_schema)?;
            return Ok(self.gather(vec![share]));
        }
        let mut shares: Vec<Share> = pending
            .enumerate()
            // Once a batch failed no later one is handed out; every earlier one was, so the
            // first error in file order is among those met.
            .take_while(|_| !failed.load(Ordering::Relaxed))
            .par_bridge()
            .fold(
                || self.share(),
                |mut share, (place, batch)| {
                    if let Err(error) = batch.and_then(|batch| self.take(&mut share, batch)) {
                        failed.store(true, Ordering::Relaxed);
                        share.keep_error(place, error);
                    }
                    share
                },
            )
            .map(|mut share| {
                if share.error.is_none()
                    && let Err(error) =
                        share
                            .chunk
                            .spill(self.buckets, self.slots, self.keyed_schema)
                {
                    share.keep_error(usize::MAX, error);
                }
                share
            })
            .collect();
        if let Some((_, error)) = shares
            .iter_mut()
            .filter_map(|share| share.error.take())
            .min_by_key(|(place, _)| *place)
        {
            return Err(error);
        }
        Ok(self.gather(shares))
    }

    /// The shares of one file put together, the bad values in file order.
    fn gather(&self, shares: Vec<Share>) -> FileRead {
        let split_count = self.splits.splits.len();
        let mut read = FileRead {
            bad: BadValues::default(),
            counts: vec![0; split_count + 1],
            spilled: (0, 0),
            sample: self.sample(),
        };
        let mut bad = Vec::new();
        for share in shares {
            for (total, count) in read.counts.iter_mut().zip(&share.counts) {
                *total += count;
            }
            let (rows, bytes) = share.chunk.spilled();
            read.spilled = (read.spilled.0 + rows, read.spilled.1 + bytes);
            read.sample.merge(share.sample);
            bad.extend(share.bad);
        }
        bad.sort_by_key(|(place, _)| *place);
        for (_, values) in &bad {
            read.bad.merge(values);
        }
        read
    }

    fn sample(&self) -> DistinctSample {
        DistinctSample::new(
            self.estimated_rows,
            self.splits.splits.len(),
            self.snapshot.columns.len(),
        )
    }

    fn share(&self) -> Share {
        Share {
            chunk: Chunk::default(),
            counts: vec![0; self.splits.splits.len() + 1],
            sample: self.sample(),
            bad: Vec::new(),
            error: None,
        }
    }

    /// Builds `pending`, assigns and keys its rows, and adds them to `share`'s chunk, spilling
    /// the chunk when it is full.
    fn take(&self, share: &mut Share, pending: PendingBatch) -> Result<(), DataError> {
        let typed = self.snapshot.finish(pending)?;
        let file = typed.file;
        if !typed.bad_values.is_empty() {
            share
                .bad
                .push((typed.first_row as usize, typed.bad_values.clone()));
        }
        let rows = typed.batch.num_rows();
        let assignment = self.splits.assign(&typed.batch).map_err(|overlap| {
            DataError::file(
                &self.snapshot.files[file].path,
                format!(
                    "row {} falls in both splits `{}` and `{}`",
                    typed.first_row + overlap.row as u64 + 1,
                    overlap.first,
                    overlap.second
                ),
            )
        })?;
        let split_count = self.splits.splits.len();
        for split in &assignment {
            share.counts[split.map_or(split_count, usize::from)] += 1;
        }
        let keys: Vec<u64> = (0..rows as u64)
            .map(|row| splitmix64(self.seed_mix ^ ((file as u64) << 40 | (typed.first_row + row))))
            .collect();
        share.sample.observe(&typed.batch, &keys, &assignment);
        share.chunk.push(
            with_keys(&typed.batch, self.keyed_schema, keys)?,
            assignment,
        );
        if share.chunk.bytes() >= self.chunk_bytes {
            share
                .chunk
                .spill(self.buckets, self.slots, self.keyed_schema)?;
        }
        let rows = rows as u64;
        (self.progress)(self.read_rows.fetch_add(rows, Ordering::Relaxed) + rows);
        Ok(())
    }
}

impl Share {
    fn keep_error(&mut self, place: usize, error: DataError) {
        if self.error.as_ref().is_none_or(|(first, _)| place < *first) {
            self.error = Some((place, error));
        }
    }
}
