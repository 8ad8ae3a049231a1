//! Blocking transfers over the async client: one small runtime for the process, started only
//! when a store is used. Downloads and uploads stream in parts, so memory stays bounded by a few
//! parts whatever the file's size.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::OnceLock;

use futures::TryStreamExt;
use object_store::{ObjectMeta, ObjectStoreExt, PutPayload, WriteMultipart};
use tokio::runtime::Runtime;

use crate::error::StorageError;
use crate::remote::Remote;

/// An object under a prefix: its path relative to the prefix, size and ETag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub relative: String,
    pub size: u64,
    pub etag: Option<String>,
}

/// Parts in flight at once during a multipart upload.
const PARTS_IN_FLIGHT: usize = 2;

fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("object-store")
            .enable_all()
            .build()
            .expect("the object-store runtime starts")
    })
}

/// The multipart part size: `RUNFN_STORE_PART_MB` MiB (16; S3 needs at least 5).
pub(crate) fn part_size() -> usize {
    let mb = std::env::var("RUNFN_STORE_PART_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(16)
        .max(5);
    mb << 20
}

fn entry(meta: &ObjectMeta, prefix: &str) -> Entry {
    let location = meta.location.as_ref();
    let relative = location
        .strip_prefix(prefix)
        .map(|r| r.trim_start_matches('/'))
        .unwrap_or(location);
    Entry {
        relative: relative.to_string(),
        size: meta.size,
        etag: meta.e_tag.clone(),
    }
}

impl Remote {
    /// The object's size and ETag, or None when there is no object at this key.
    pub fn head(&self) -> Result<Option<Entry>, StorageError> {
        match runtime().block_on(self.store.head(&self.path())) {
            Ok(meta) => Ok(Some(entry(&meta, self.key()))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.error(e)),
        }
    }

    /// A small object's bytes (an index, a pointer, a record).
    pub fn get_bytes(&self) -> Result<Vec<u8>, StorageError> {
        runtime().block_on(async {
            let result = self
                .store
                .get(&self.path())
                .await
                .map_err(|e| self.error(e))?;
            let bytes = result.bytes().await.map_err(|e| self.error(e))?;
            Ok(bytes.to_vec())
        })
    }

    /// Writes one object whole (S3 makes a single PUT visible at once or not at all).
    /// Returns the new object's ETag.
    pub fn put_bytes(&self, bytes: Vec<u8>) -> Result<Option<String>, StorageError> {
        runtime()
            .block_on(self.store.put(&self.path(), PutPayload::from(bytes)))
            .map(|put| put.e_tag)
            .map_err(|e| self.error(e))
    }

    /// Uploads a file: one PUT up to a part's size, else a multipart upload read from the file
    /// part by part. A failed multipart upload is aborted, so no part lingers or shows. Returns
    /// the new object's ETag.
    pub fn upload_file(&self, path: &Path) -> Result<Option<String>, StorageError> {
        let url = self.url();
        let mut file = std::fs::File::open(path).map_err(|e| StorageError::io(&url, path, e))?;
        let size = file
            .metadata()
            .map_err(|e| StorageError::io(&url, path, e))?
            .len();
        let part = part_size();
        if size <= part as u64 {
            let mut bytes = Vec::with_capacity(size as usize);
            file.read_to_end(&mut bytes)
                .map_err(|e| StorageError::io(&url, path, e))?;
            return self.put_bytes(bytes);
        }
        runtime().block_on(async {
            let upload = self
                .store
                .put_multipart(&self.path())
                .await
                .map_err(|e| self.error(e))?;
            let mut writer = WriteMultipart::new_with_chunk_size(upload, part);
            let mut buffer = vec![0u8; part];
            let outcome: Result<(), StorageError> = async {
                loop {
                    let filled = read_full(&mut file, &mut buffer)
                        .map_err(|e| StorageError::io(&url, path, e))?;
                    if filled == 0 {
                        break;
                    }
                    writer
                        .wait_for_capacity(PARTS_IN_FLIGHT)
                        .await
                        .map_err(|e| self.error(e))?;
                    writer.write(&buffer[..filled]);
                }
                Ok(())
            }
            .await;
            match outcome {
                Ok(()) => writer
                    .finish()
                    .await
                    .map(|put| put.e_tag)
                    .map_err(|e| self.error(e)),
                Err(e) => {
                    let _ = writer.abort().await;
                    Err(e)
                }
            }
        })
    }

    /// Streams the object into `dest` (a temporary file beside it, synced, then renamed), so a
    /// download cut short leaves no file.
    pub fn download(&self, dest: &Path) -> Result<Entry, StorageError> {
        let url = self.url();
        let parent = dest.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| StorageError::io(&url, parent, e))?;
        let mut temp = tempfile::Builder::new()
            .prefix(".download-")
            .tempfile_in(parent)
            .map_err(|e| StorageError::io(&url, parent, e))?;
        let meta = self.stream_into(&mut |chunk| {
            temp.write_all(chunk)
                .map_err(|e| StorageError::io(&url, dest, e))
        })?;
        temp.as_file()
            .sync_all()
            .map_err(|e| StorageError::io(&url, dest, e))?;
        temp.persist(dest)
            .map_err(|e| StorageError::io(&url, dest, e.error))?;
        Ok(entry(&meta, self.key()))
    }

    /// Streams the object's bytes through `each`, a chunk at a time as they arrive (nothing
    /// is written to disk or held whole); returns the bytes read, refusing a read cut short.
    pub fn read_stream(&self, each: &mut (dyn FnMut(&[u8]) + Send)) -> Result<u64, StorageError> {
        self.stream_into(&mut |chunk| {
            each(chunk);
            Ok(())
        })
        .map(|meta| meta.size)
    }

    /// The object's bytes through `each` as they arrive, and its metadata; a stream that ends
    /// before the object's size is an error, not a short read.
    fn stream_into(
        &self,
        each: &mut (dyn FnMut(&[u8]) -> Result<(), StorageError> + Send),
    ) -> Result<ObjectMeta, StorageError> {
        let url = self.url();
        runtime().block_on(async {
            let result = self
                .store
                .get(&self.path())
                .await
                .map_err(|e| self.error(e))?;
            let meta = result.meta.clone();
            let mut stream = result.into_stream();
            let mut read = 0u64;
            while let Some(chunk) = stream.try_next().await.map_err(|e| self.error(e))? {
                each(&chunk)?;
                read += chunk.len() as u64;
            }
            if read != meta.size {
                return Err(StorageError::new(
                    &url,
                    format!("the read ended after {read} of {} bytes", meta.size),
                ));
            }
            Ok(meta)
        })
    }

    /// Every object below this prefix (as a folder: `key/…`), sorted by relative path.
    pub fn list(&self) -> Result<Vec<Entry>, StorageError> {
        let prefix = self.path();
        let key = self.key().to_string();
        let mut entries: Vec<Entry> = runtime().block_on(async {
            let prefix = (!key.is_empty()).then_some(&prefix);
            self.store
                .list(prefix)
                .map_ok(|meta| entry(&meta, &key))
                .try_collect()
                .await
                .map_err(|e| self.error(e))
        })?;
        entries.sort_by(|a, b| a.relative.cmp(&b.relative));
        Ok(entries)
    }

    /// Deletes the object; one that is already gone is fine.
    pub fn delete(&self) -> Result<(), StorageError> {
        match runtime().block_on(self.store.delete(&self.path())) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.error(e)),
        }
    }
}

/// Reads until `buffer` is full or the file ends; returns how much was read.
fn read_full(file: &mut std::fs::File, buffer: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
