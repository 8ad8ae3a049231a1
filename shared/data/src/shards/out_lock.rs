//! One shardify at a time in an output folder, and what a killed one left there removed: its
//! spill folders (`.shardify-spill*`), shards not yet renamed into place (`SPLIT/.part.tmp*`) and
//! an index not yet renamed (`.index.json.tmp*`). Readers never see these (hidden names, and the
//! index names every shard), but nothing else would ever remove them, and a spill can be as
//! large as the snapshot.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use crate::error::DataError;

/// The lock's file, kept in the output folder (hidden: no reader or upload takes it).
pub const LOCK_NAME: &str = ".shardify.lock";

/// Held for the whole run; the lock goes with the process, however it ends.
#[derive(Debug)]
pub struct OutLock {
    _file: File,
}

/// Takes the folder's lock (another shardify writing there is an error naming the folder), then
/// removes what an earlier, killed run left. Returns the lock and how many leftovers went.
pub fn lock_and_sweep(out: &Path) -> Result<(OutLock, usize), DataError> {
    let path = out.join(LOCK_NAME);
    let io = |source| DataError::Io {
        path: path.clone(),
        source,
    };
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(DataError::file(
                out,
                format!(
                    "another shardify is writing to this folder (it holds {LOCK_NAME}); wait for it to end"
                ),
            ));
        }
        Err(TryLockError::Error(source)) => return Err(io(source)),
    }
    let removed = sweep(out)?;
    Ok((OutLock { _file: file }, removed))
}

/// Removes a killed run's leftovers from `out` and its split folders.
fn sweep(out: &Path) -> Result<usize, DataError> {
    let mut removed = 0;
    for entry in read_dir(out)? {
        let (name, path, is_dir) = entry;
        let outcome = if is_dir && name.starts_with(".shardify-spill") {
            std::fs::remove_dir_all(&path)
        } else if !is_dir && name.starts_with(".index.json.tmp") {
            std::fs::remove_file(&path)
        } else if is_dir && !name.starts_with('.') {
            for (inner, inner_path, inner_dir) in read_dir(&path)? {
                if !inner_dir && inner.starts_with(".part.tmp") {
                    remove(&inner_path)?;
                    removed += 1;
                }
            }
            continue;
        } else {
            continue;
        };
        match outcome {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(DataError::Io { path, source }),
        }
    }
    Ok(removed)
}

fn remove(path: &Path) -> Result<(), DataError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(DataError::Io {
            path: path.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// The entries of `dir`: name, path, and whether it is a folder (links are not followed).
fn read_dir(dir: &Path) -> Result<Vec<(String, std::path::PathBuf, bool)>, DataError> {
    let io = |source| DataError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let is_dir = entry.file_type().map_err(io)?.is_dir();
        out.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
            is_dir,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_run_s_leftovers_go_and_a_second_writer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        std::fs::create_dir_all(out.join(".shardify-spillAbc")).unwrap();
        std::fs::write(out.join(".shardify-spillAbc/slot-0.arrows"), b"x").unwrap();
        std::fs::create_dir_all(out.join("train")).unwrap();
        std::fs::write(out.join("train/.part.tmpQ1"), b"x").unwrap();
        std::fs::write(out.join("train/part-00000.parquet"), b"kept").unwrap();
        std::fs::write(out.join(".index.json.tmpZ"), b"{").unwrap();
        std::fs::write(out.join("index.json"), b"{}").unwrap();
        let (lock, removed) = lock_and_sweep(out).unwrap();
        assert_eq!(removed, 3);
        assert!(!out.join(".shardify-spillAbc").exists());
        assert!(!out.join("train/.part.tmpQ1").exists());
        assert!(!out.join(".index.json.tmpZ").exists());
        assert!(out.join("train/part-00000.parquet").exists() && out.join("index.json").exists());
        let err = lock_and_sweep(out).unwrap_err().to_string();
        assert!(err.contains("another shardify is writing"), "{err}");
        drop(lock);
        assert_eq!(lock_and_sweep(out).unwrap().1, 0);
    }
}
