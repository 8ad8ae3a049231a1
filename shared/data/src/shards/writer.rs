//! Writing one split's rows, already in shuffled order, as Parquet shards of a fixed row count.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::error::DataError;
use crate::shards::index::ShardEntry;

/// Stable across parquet crate upgrades that do not change the bytes otherwise.
const CREATED_BY: &str = "runfn shardify (runfn-shards-v1)";

pub struct ShardWriterOptions {
    pub shard_rows: usize,
    pub row_group_rows: usize,
    pub zstd_level: i32,
}

/// Cuts a stream of batches into shards `dir/<split>/part-NNNNN.parquet`, each written atomically
/// and hashed as it is written.
pub struct SplitWriter<'a> {
    dir: &'a Path,
    split: &'a str,
    schema: SchemaRef,
    options: &'a ShardWriterOptions,
    current: Option<OpenShard>,
    pub shards: Vec<ShardEntry>,
}

struct OpenShard {
    writer: ArrowWriter<HashingWriter<BufWriter<tempfile::NamedTempFile>>>,
    rows: usize,
    path: PathBuf,
}

impl<'a> SplitWriter<'a> {
    pub fn new(
        dir: &'a Path,
        split: &'a str,
        schema: SchemaRef,
        options: &'a ShardWriterOptions,
    ) -> Result<SplitWriter<'a>, DataError> {
        let split_dir = dir.join(split);
        runfn_core::paths::create_dir_all(&split_dir)
            .map_err(|e| DataError::Other(e.to_string()))?;
        Ok(SplitWriter {
            dir,
            split,
            schema,
            options,
            current: None,
            shards: Vec::new(),
        })
    }

    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), DataError> {
        let mut offset = 0;
        while offset < batch.num_rows() {
            if self.current.is_none() {
                self.current = Some(self.open()?);
            }
            let shard = self.current.as_mut().expect("opened above");
            let take = (self.options.shard_rows - shard.rows).min(batch.num_rows() - offset);
            shard
                .writer
                .write(&batch.slice(offset, take))
                .map_err(|e| DataError::file(&shard.path, e))?;
            shard.rows += take;
            offset += take;
            if shard.rows == self.options.shard_rows {
                self.close_current()?;
            }
        }
        Ok(())
    }

    /// Closes the last shard. A split with no rows gets no shard.
    pub fn finish(mut self) -> Result<Vec<ShardEntry>, DataError> {
        self.close_current()?;
        Ok(self.shards)
    }

    fn open(&self) -> Result<OpenShard, DataError> {
        let relative = format!("{}/part-{:05}.parquet", self.split, self.shards.len());
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
        let properties = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_max_row_group_row_count(Some(self.options.row_group_rows))
            .set_created_by(CREATED_BY.to_string())
            .build();
        let sink = HashingWriter::new(BufWriter::with_capacity(1 << 20, temp));
        let writer = ArrowWriter::try_new(sink, self.schema.clone(), Some(properties))
            .map_err(|e| DataError::file(&path, e))?;
        Ok(OpenShard {
            writer,
            rows: 0,
            path,
        })
    }

    fn close_current(&mut self) -> Result<(), DataError> {
        let Some(shard) = self.current.take() else {
            return Ok(());
        };
        let io = |source| DataError::Io {
            path: shard.path.clone(),
            source,
        };
        let sink = shard
            .writer
            .into_inner()
            .map_err(|e| DataError::file(&shard.path, e))?;
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

/// Fsyncs a folder so the renames inside it survive a crash.
pub fn sync_dir(dir: &Path) -> Result<(), DataError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|source| DataError::Io {
            path: dir.into(),
            source,
        })
}
