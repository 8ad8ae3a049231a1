//! `index.json`: what a shard folder holds, and the proof that it is whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::DataError;
use crate::read::BadValues;
use crate::types::Column;

pub const INDEX_NAME: &str = "index.json";
pub const INDEX_FORMAT: &str = "runfn-shards-v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardIndex {
    pub format: String,
    pub seed: u64,
    pub source: Source,
    pub columns: Vec<Column>,
    /// Split name → rule and shards, in manifest order.
    pub splits: BTreeMap<String, SplitEntry>,
    /// Rows that matched no split: counted, left out.
    pub unassigned_rows: u64,
    /// Values that did not parse as their column's type (stored as nulls).
    pub bad_values: BadValues,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub path: String,
    pub files: u64,
    pub bytes: u64,
    /// `blake3:<hex>` over the snapshot's files (the `runfn-data-v1` digest of mf-hash).
    pub digest: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitEntry {
    pub rule: String,
    pub rows: u64,
    pub shards: Vec<ShardEntry>,
    /// The rows digest of the split's rows in shard order; absent in indexes written before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_blake3: Option<String>,
    /// The format of `rows_blake3` (`runfn-rows-v2`); absent: `runfn-rows-v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_format: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardEntry {
    /// Relative to the shard folder, `/`-separated.
    pub path: String,
    pub rows: u64,
    pub bytes: u64,
    pub blake3: String,
}

impl ShardIndex {
    /// Reads `dir/index.json`; with `verify`, re-hashes every shard and refuses a mismatch.
    pub fn load(dir: &Path, verify: bool) -> Result<ShardIndex, DataError> {
        let path = dir.join(INDEX_NAME);
        let text = runfn_core::side_file::read_bounded_text(
            &path,
            runfn_core::side_file::JSON_LIMIT,
        )
        .map_err(|err| match err {
            runfn_core::InputError::Io { source, .. }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                DataError::file(
                    &path,
                    "missing: the folder holds no finished shards (shardify did not complete)",
                )
            }
            runfn_core::InputError::Io { source, .. } => DataError::Io {
                path: path.clone(),
                source,
            },
            other => DataError::Other(other.to_string()),
        })?;
        let index: ShardIndex = serde_json::from_str(&text)
            .map_err(|e| DataError::file(&path, format!("not a shard index: {e}")))?;
        if index.format != INDEX_FORMAT {
            return Err(DataError::file(
                &path,
                format!("format `{}`, expected `{INDEX_FORMAT}`", index.format),
            ));
        }
        index.confine(dir)?;
        if verify {
            index.verify(dir)?;
        }
        Ok(index)
    }

    /// Every shard the index names is a plain relative path inside `dir` (no `..`, no absolute
    /// path, no empty segment) and, where it exists, a regular file, not a symlink (which could
    /// lead out of the folder), a device such as `/dev/zero` or a FIFO (whose `open` blocks).
    /// A missing shard is left to whoever reads it, which names it.
    pub fn confine(&self, dir: &Path) -> Result<(), DataError> {
        let index = dir.join(INDEX_NAME);
        for shard in self.splits.values().flat_map(|s| &s.shards) {
            let plain = !shard.path.is_empty()
                && shard.path.split('/').all(|part| {
                    !part.is_empty() && part != "." && part != ".." && !part.contains('\\')
                });
            if !plain {
                return Err(DataError::file(
                    &index,
                    format!(
                        "names the shard `{}`, which is not a path inside the shard folder",
                        shard.path
                    ),
                ));
            }
            // A folder on the way that is a link could lead out as well.
            let parts: Vec<&str> = shard.path.split('/').collect();
            for depth in 1..parts.len() {
                let folder = dir.join(parts[..depth].join("/"));
                if let Ok(metadata) = std::fs::symlink_metadata(&folder)
                    && !metadata.is_dir()
                {
                    return Err(DataError::file(
                        &folder,
                        "is not a folder (a symbolic link?); shards must lie inside the shard folder",
                    ));
                }
            }
            let path = dir.join(&shard.path);
            match std::fs::symlink_metadata(&path) {
                Ok(metadata) if metadata.file_type().is_file() => {}
                Ok(metadata) => {
                    let kind = if metadata.file_type().is_symlink() {
                        "a symbolic link"
                    } else if metadata.is_dir() {
                        "a folder"
                    } else {
                        runfn_core::paths::special_kind(&metadata.file_type())
                            .unwrap_or("not a regular file")
                    };
                    return Err(DataError::file(
                        &path,
                        format!(
                            "is {kind}; a shard must be a regular file inside the shard folder"
                        ),
                    ));
                }
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Re-hashes every shard: a missing, truncated or altered shard is an error naming it.
    pub fn verify(&self, dir: &Path) -> Result<(), DataError> {
        verify_shards(dir, self.splits.values().flat_map(|s| &s.shards))
    }

    /// The shard files of `split`, in order.
    pub fn shard_paths(&self, dir: &Path, split: &str) -> Vec<PathBuf> {
        self.splits
            .get(split)
            .map(|s| s.shards.iter().map(|e| dir.join(&e.path)).collect())
            .unwrap_or_default()
    }

    /// blake3 of the index file's bytes: names this exact set of shards.
    pub fn file_blake3(dir: &Path) -> Result<String, DataError> {
        let path = dir.join(INDEX_NAME);
        let bytes = runfn_core::side_file::read_bounded(&path, runfn_core::side_file::JSON_LIMIT)
            .map_err(|err| match err {
            runfn_core::InputError::Io { source, .. } => DataError::Io { path, source },
            other => DataError::Other(other.to_string()),
        })?;
        Ok(blake3::hash(&bytes).to_hex().to_string())
    }
}

/// Checks `shards` (entries of the index in `dir`) against their sizes and blake3s, each hashed
/// as a stream on all cores, so checking holds no shard in memory: [`ShardIndex::verify`] checks
/// them all, a part only those it reads.
pub fn verify_shards<'a>(
    dir: &Path,
    shards: impl IntoIterator<Item = &'a ShardEntry>,
) -> Result<(), DataError> {
    use rayon::prelude::*;
    shards
        .into_iter()
        .collect::<Vec<_>>()
        .par_iter()
        .try_for_each(|shard| {
            let path = dir.join(&shard.path);
            let io = |source| DataError::Io {
                path: path.clone(),
                source,
            };
            let file = std::fs::File::open(&path).map_err(io)?;
            let mut hasher = blake3::Hasher::new();
            hasher.update_reader(file).map_err(io)?;
            if hasher.count() != shard.bytes || hasher.finalize().to_hex().as_str() != shard.blake3
            {
                return Err(DataError::file(
                    &path,
                    "does not match index.json (changed or truncated since shardify wrote it)",
                ));
            }
            Ok(())
        })
}
