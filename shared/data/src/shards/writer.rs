//! Writing one split's rows, already in shuffled order, as Parquet shards of a fixed row count.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use arrow::datatypes::SchemaRef;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use crate::error::DataError;
use crate::shards::column_parallel::{ColumnParallelWriter, GroupSlots};
use crate::shards::index::ShardEntry;
use crate::shards::row_bytes;

/// Stable across parquet crate upgrades that do not change the bytes otherwise.
const CREATED_BY: &str = "runfn shardify (runfn-shards-v1)";

/// Rows handed to the Parquet writer at a time, counted from the start of each shard. The writer
/// decides page boundaries per call (its mini-batches start at each call's first row), so calls
/// of a fixed size make the bytes independent of how the rows arrived: the shuffle's buckets,
/// and so `--memory`, change the batches, never the file.
pub(super) const WRITE_ROWS: usize = 8192;
/// Data bytes (see `row_bytes`) a call holds at most, one row at least: counted on the rows, so
/// the cuts stay where they were whatever the batches. By rows alone, a call of 1 MiB values
/// held 8 GiB whatever `--memory` said.
pub(super) const WRITE_BYTES: u64 = 4 << 20;
/// Data bytes a row group holds at most, one row at least, on the same count: a group's rows
/// (or, encoded on the calling thread, its pages) are held until it closes, and the encoders
/// hold two more in the background. 32 MiB (about DuckDB's 122,880 rows of the churn rows'
/// 317 bytes) keeps 1 GB of wide rows under 300 MiB at the default budget; at 128 MiB (250k
/// churn rows a group) it peaked at 485 MiB, and as fast. Rows up to 134 bytes keep their
/// 250k-row groups.
pub(super) const ROW_GROUP_BYTES: u64 = 32 << 20;

pub struct ShardWriterOptions {
    pub shard_rows: usize,
    pub row_group_rows: usize,
    pub zstd_level: i32,
    /// Row groups that may be encoding in the background at once, shared by every shard of
    /// every split written with these options (a limit of 0: none, each call is encoded before
    /// `write` returns). Each holds its rows until it is encoded.
    pub background: Arc<GroupSlots>,
}

/// Cuts a stream of batches into shards `dir/<split>/part-NNNNN.parquet`, each written atomically
/// and hashed as it is written.
pub struct SplitWriter<'a> {
    dir: &'a Path,
    split: &'a str,
    schema: SchemaRef,
    options: &'a ShardWriterOptions,
    /// The columns written without a dictionary (see `cardinality`), by position.
    plain: Vec<bool>,
    current: Option<OpenShard>,
    /// The number of the first shard written: 0, or where a reducer of a parted run starts.
    first_shard: usize,
    /// Shards filled, oldest first, whose last row groups may still be encoding in the
    /// background: each is finished once its groups are done (see `poll`), or at the end.
    /// Nobody waits for them at a shard's or a split's end, so the encoders are not left with
    /// one group's widest column while the next rows could be gathered.
    closing: VecDeque<OpenShard>,
    pub shards: Vec<ShardEntry>,
    /// Rows received but not yet written, in order.
    pending: Vec<RecordBatch>,
    pending_rows: usize,
}

struct OpenShard {
    writer: ColumnParallelWriter<HashingWriter<BufWriter<tempfile::NamedTempFile>>>,
    rows: usize,
    path: PathBuf,
}

impl<'a> SplitWriter<'a> {
    pub fn new(
        dir: &'a Path,
        split: &'a str,
        schema: SchemaRef,
        options: &'a ShardWriterOptions,
        plain: Vec<bool>,
    ) -> Result<SplitWriter<'a>, DataError> {
        let split_dir = dir.join(split);
        runfn_core::paths::create_dir_all(&split_dir)
            .map_err(|e| DataError::Other(e.to_string()))?;
        Ok(SplitWriter {
            dir,
            split,
            schema,
            options,
            plain,
            current: None,
            first_shard: 0,
            closing: VecDeque::new(),
            shards: Vec::new(),
            pending: Vec::new(),
            pending_rows: 0,
        })
    }

    /// Numbers the shards from `shard` on: the rows written are the split's from shard
    /// `shard`'s first row, so each shard gets the bytes one writer of the whole split gives it
    /// (calls and row groups are counted from each shard's start).
    pub fn starting_at(mut self, shard: usize) -> SplitWriter<'a> {
        self.first_shard = shard;
        self
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), DataError> {
        if batch.num_rows() > 0 {
            self.pending_rows += batch.num_rows();
            self.pending.push(batch.clone());
        }
        self.drain(false)
    }

    /// Lengths to cut the next `rows` rows into, each about `about` rows or more, such that no
    /// call of this writer takes rows from two pieces (only the first call may join rows still
    /// pending): pieces so cut are written without a concatenation.
    pub fn piece_lengths(&self, rows: usize, about: usize) -> Vec<usize> {
        let shard_rows = self.options.shard_rows;
        let mut fill = self.current.as_ref().map_or(0, |s| s.rows);
        // The end of the next call, counted from the first of the new rows.
        let mut end = -(self.pending_rows as i64);
        let mut lengths = Vec::new();
        let mut start = 0;
        if rows == 0 {
            return lengths;
        }
        loop {
            let call = WRITE_ROWS.min(shard_rows - fill);
            end += call as i64;
            fill = (fill + call) % shard_rows;
            if end >= rows as i64 {
                lengths.push(rows - start);
                break;
            }
            if end > 0 && end as usize - start >= about {
                lengths.push(end as usize - start);
                start = end as usize;
            }
        }
        lengths
    }

    /// Writes the pending rows in calls of `WRITE_ROWS` or `WRITE_BYTES` (fewer rows at a
    /// shard's end), closing each shard when full; with `all`, also the last short call.
    fn drain(&mut self, all: bool) -> Result<(), DataError> {
        loop {
            let room = self.current.as_ref().map_or(self.options.shard_rows, |s| {
                self.options.shard_rows - s.rows
            });
            let Some(take) = self.next_call(room, all) else {
                return Ok(());
            };
            let chunk = self.take_pending(take)?;
            if self.current.is_none() {
                self.current = Some(self.open()?);
            }
            let shard = self.current.as_mut().expect("opened above");
            shard
                .writer
                .write(&chunk)
                .map_err(|e| DataError::library(&shard.path, &e))?;
            shard.rows += take;
            if shard.rows == self.options.shard_rows {
                self.close_current()?;
            }
            self.poll()?;
        }
    }

    /// Appends the finished background groups of the shards being written and closed, and
    /// finishes the closed shards whose groups are all done, oldest first; never waits. True
    /// when no shard is left closing and no group of the current one is in flight.
    pub fn poll(&mut self) -> Result<bool, DataError> {
        let current_done = match self.current.as_mut() {
            Some(shard) => shard
                .writer
                .poll()
                .map_err(|e| DataError::library(&shard.path, &e))?,
            None => true,
        };
        while let Some(shard) = self.closing.front_mut() {
            let done = shard
                .writer
                .poll()
                .map_err(|e| DataError::library(&shard.path, &e))?;
            if !done {
                return Ok(false);
            }
            let shard = self.closing.pop_front().expect("looked at above");
            self.finalize(shard)?;
        }
        Ok(current_done)
    }

    /// Rows of the next call: the most pending rows within `WRITE_ROWS` (and the shard's
    /// `room`) whose data bytes are within `WRITE_BYTES`, one row at least. None while more
    /// rows could still join the call (unless `all`), or when nothing is pending.
    fn next_call(&self, room: usize, all: bool) -> Option<usize> {
        let most = WRITE_ROWS.min(room);
        let (mut rows, mut bytes) = (0, 0);
        for batch in &self.pending {
            let wanted = most - rows;
            let (taken, taken_bytes) = row_bytes::rows_within(batch, wanted, WRITE_BYTES - bytes);
            rows += taken;
            bytes += taken_bytes;
            if rows == most {
                return Some(rows);
            }
            if taken < wanted.min(batch.num_rows()) {
                // The next row would pass the byte limit.
                return Some(rows.max(1));
            }
        }
        (all && rows > 0).then_some(rows)
    }

    /// The first `rows` pending rows as one batch.
    fn take_pending(&mut self, rows: usize) -> Result<RecordBatch, DataError> {
        let mut parts = Vec::new();
        let mut needed = rows;
        while needed > 0 {
            let front = &self.pending[0];
            if front.num_rows() <= needed {
                needed -= front.num_rows();
                parts.push(self.pending.remove(0));
            } else {
                parts.push(front.slice(0, needed));
                self.pending[0] = front.slice(needed, front.num_rows() - needed);
                needed = 0;
            }
        }
        self.pending_rows -= rows;
        if parts.len() == 1 {
            return Ok(parts.pop().expect("one part"));
        }
        concat_batches(&self.schema, &parts).map_err(|e| DataError::Other(e.to_string()))
    }

    /// Writes what is pending and hands the last row group to the encoders without waiting for
    /// it, so the encoding overlaps whatever the caller does before `poll` or `finish`.
    pub fn end(&mut self) -> Result<(), DataError> {
        self.drain(true)?;
        self.close_current()
    }

    /// Writes what is pending and closes the last shard, waiting for its groups. A split with
    /// no rows gets no shard.
    pub fn finish(mut self) -> Result<Vec<ShardEntry>, DataError> {
        self.end()?;
        while let Some(shard) = self.closing.pop_front() {
            self.finalize(shard)?;
        }
        Ok(self.shards)
    }

    fn open(&self) -> Result<OpenShard, DataError> {
        // The shards still closing have their numbers already.
        let number = self.first_shard + self.shards.len() + self.closing.len();
        let relative = format!("{}/part-{number:05}.parquet", self.split);
        let path = self.dir.join(&relative);
        let parent = path.parent().unwrap_or(self.dir);
        let temp = tempfile::Builder::new()
            .prefix(".part.tmp")
            .permissions(runfn_core::atomic::readable_by_all())
            .tempfile_in(parent)
            .map_err(|source| DataError::Io {
                path: path.clone(),
                source,
            })?;
        let level = ZstdLevel::try_new(self.options.zstd_level)
            .map_err(|e| DataError::Other(format!("--zstd-level: {e}")))?;
        let mut properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_row_count(Some(self.options.row_group_rows))
            .set_created_by(CREATED_BY.to_string());
        for (field, &plain) in self.schema.fields().iter().zip(&self.plain) {
            if plain {
                properties = properties
                    .set_column_dictionary_enabled(ColumnPath::from(field.name().as_str()), false);
            }
        }
        let properties = properties.build();
        let sink = HashingWriter::new(BufWriter::with_capacity(1 << 20, temp));
        let writer = ColumnParallelWriter::try_new(
            sink,
            self.schema.clone(),
            properties,
            ROW_GROUP_BYTES,
            self.options.background.clone(),
        )
        .map_err(|e| DataError::library(&path, &e))?;
        Ok(OpenShard {
            writer,
            rows: 0,
            path,
        })
    }

    /// Ends the current shard: its last group is handed to the encoders, and the shard is
    /// finished once that group is done (see `poll`).
    fn close_current(&mut self) -> Result<(), DataError> {
        let Some(mut shard) = self.current.take() else {
            return Ok(());
        };
        shard
            .writer
            .close_group()
            .map_err(|e| DataError::library(&shard.path, &e))?;
        self.closing.push_back(shard);
        Ok(())
    }

    /// Waits for a shard's last row groups, writes its footer, fsyncs it and renames it into
    /// place.
    fn finalize(&mut self, shard: OpenShard) -> Result<(), DataError> {
        let io = |source| DataError::Io {
            path: shard.path.clone(),
            source,
        };
        let sink = shard
            .writer
            .into_inner()
            .map_err(|e| DataError::library(&shard.path, &e))?;
        let (buffered, hasher, bytes) = sink.into_parts();
        let temp = buffered.into_inner().map_err(|e| io(e.into_error()))?;
        temp.as_file().sync_all().map_err(io)?;
        temp.persist(&shard.path).map_err(|e| io(e.error))?;
        let relative = shard
            .path
            .strip_prefix(self.dir)
            .unwrap_or(&shard.path)
            .to_string_lossy()
            .replace('\\', "/");
        self.shards.push(ShardEntry {
            path: relative,
            rows: shard.rows as u64,
            bytes,
            blake3: hasher.finalize().to_hex().to_string(),
        });
        Ok(())
    }
}

/// Hashes bytes on their way to the file, so a shard is never read back just to hash it.
struct HashingWriter<W> {
    inner: W,
    hasher: blake3::Hasher,
    bytes: u64,
}

impl<W: Write> HashingWriter<W> {
    fn new(inner: W) -> HashingWriter<W> {
        HashingWriter {
            inner,
            hasher: blake3::Hasher::new(),
            bytes: 0,
        }
    }

    fn into_parts(self) -> (W, blake3::Hasher, u64) {
        (self.inner, self.hasher, self.bytes)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.hasher.update(&buf[..written]);
        self.bytes += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Removes `path`; a file already gone is not an error.
pub fn remove_if_present(path: &Path) -> Result<(), DataError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(DataError::Io {
            path: path.into(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Fsyncs a folder so the renames inside it survive a crash.
pub fn sync_dir(dir: &Path) -> Result<(), DataError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| DataError::Io {
            path: dir.into(),
            source,
        })
}
