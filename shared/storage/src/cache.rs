//! The local side of a store: a cache folder per URL for what is read (reused while the
//! objects' sizes and ETags are unchanged) and a work folder per URL for what a tool writes
//! before it is published.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::error::StorageError;
use crate::mirror::{self, Sidecar};
use crate::remote::{Remote, is_remote};

/// runfn's cache folder: `RUNFN_CACHE`, else `$XDG_CACHE_HOME/runfn`, else `~/.cache/runfn`
/// (the folder libtorch and the test tools live in, too).
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("RUNFN_CACHE").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir).join("runfn");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache").join("runfn")
}

/// Staged copies made by this process, with the URLs they came from.
static STAGED: Mutex<Vec<(PathBuf, String)>> = Mutex::new(Vec::new());

fn remember(local: &Path, url: &str) {
    let mut staged = STAGED.lock().unwrap_or_else(|e| e.into_inner());
    if !staged.iter().any(|(p, _)| p == local) {
        staged.push((local.to_path_buf(), url.to_string()));
    }
}

/// How to name `path` to a user: the URL it was staged from (with the rest of the path) when it
/// lies in a staged copy, else the path itself. Messages and records then name the object in
/// the store, not a cache file.
pub fn display(path: &Path) -> String {
    let staged = STAGED.lock().unwrap_or_else(|e| e.into_inner());
    for (local, url) in staged.iter() {
        if let Ok(rest) = path.strip_prefix(local) {
            let rest = rest
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/");
            return if rest.is_empty() {
                url.clone()
            } else {
                format!("{url}/{rest}")
            };
        }
    }
    path.display().to_string()
}

fn slot(kind: &str, url: &str) -> PathBuf {
    let hash = blake3::hash(url.as_bytes()).to_hex();
    cache_root().join(kind).join(&hash.as_str()[..16])
}

/// The local folder a tool writes into before it publishes to `url` (the same folder on every
/// run, so a resumed run finds what it wrote).
pub fn work_dir(url: &str) -> PathBuf {
    slot("work", url)
}

/// The one object `entry` at `remote`, downloaded into the cache unless the cached copy has its
/// size and ETag.
fn stage_entry(remote: &Remote, entry: &crate::Entry) -> Result<PathBuf, StorageError> {
    let dir = slot("objects", &remote.url());
    let local = dir.join(remote.name());
    let mut sidecar = Sidecar::load(&dir, mirror::PULLED);
    if sidecar.matches(remote.name(), &local, entry) {
        return Ok(local);
    }
    let fetched = remote.download(&local)?;
    sidecar.set(remote.name(), &local, &fetched);
    sidecar.save(&dir, &remote.url())?;
    remember(&local, &remote.url());
    Ok(local)
}

/// Everything under `url` (a folder of objects) mirrored into the cache, or the one object at
/// `url` when it names an object. Returns the local folder (or file).
pub fn stage_prefix(url: &str) -> Result<PathBuf, StorageError> {
    let remote = Remote::parse(url)?;
    let entries = remote.list()?;
    if entries.is_empty() {
        return match remote.head()? {
            Some(entry) => stage_entry(&remote, &entry),
            None => Err(StorageError::new(
                remote.url(),
                "no object at or under this URL",
            )),
        };
    }
    let dir = staged_path(&remote.url());
    mirror::pull_entries(&remote, &entries, &dir, &|_| false)?;
    remember(&dir, &remote.url());
    Ok(dir)
}

/// A set of objects under `url` (a shard set, a checkpoint folder) mirrored into the cache with
/// its commit marks downloaded last, so the local copy is whole or has no mark.
pub fn stage_set(url: &str, is_mark: &dyn Fn(&str) -> bool) -> Result<PathBuf, StorageError> {
    let remote = Remote::parse(url)?;
    let dir = staged_path(&remote.url());
    mirror::pull(&remote, &dir, is_mark)?;
    remember(&dir, &remote.url());
    Ok(dir)
}

/// Where `stage_prefix`, `stage_set` and `stage_file` put what `url` names (nothing is read).
pub fn staged_path(url: &str) -> PathBuf {
    let name = url.trim_end_matches('/').rsplit('/').next().unwrap_or(url);
    slot("objects", url.trim_end_matches('/')).join(name)
}

/// `text` as a local path: itself when it is one, else the staged copy of the object or folder
/// of objects it names.
pub fn local_path(text: &str) -> Result<PathBuf, StorageError> {
    if is_remote(text) {
        stage_prefix(text)
    } else {
        Ok(PathBuf::from(text))
    }
}
