//! Shard sets in object storage. `index.json` is the set's commit mark: shardify uploads every
//! shard, then the index, and removes an older index before anything else, so a reader finds
//! either a whole set whose index names every shard's blake3, or no index.

use std::path::{Path, PathBuf};

use runfn_core::InputError;
use runfn_storage::{Remote, StorageError, Transferred};

use crate::shards::INDEX_NAME;

fn is_index(relative: &str) -> bool {
    relative == INDEX_NAME
}

/// The shard folder `dir` as a local folder: itself, or the staged copy of a store URL (shards
/// first, the index last; unchanged shards are not downloaded again).
pub fn local_shards(dir: &Path) -> Result<PathBuf, InputError> {
    let Some(url) = dir.to_str().filter(|t| runfn_storage::is_remote(t)) else {
        return Ok(dir.to_path_buf());
    };
    let local = runfn_storage::stage_set(url, &is_index)?;
    if !local.join(INDEX_NAME).exists() {
        return Err(InputError::field(
            format!("{}/{INDEX_NAME}", url.trim_end_matches('/')),
            "is missing: no finished shard set is there (shardify never ran, or has not finished)",
        ));
    }
    Ok(local)
}

/// Publishes the local shard folder `local` to `url`, its index last.
pub fn publish(local: &Path, url: &str) -> Result<Transferred, StorageError> {
    let remote = Remote::parse(url)?;
    runfn_storage::push(local, &remote, &is_index)
}
