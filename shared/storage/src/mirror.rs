//! A local folder and a prefix in a store kept as the same set of files, with commit marks
//! (a shard set's `index.json`, a checkpoint's JSON) handled so that a reader on either side
//! sees a whole set or none:
//! - `push` removes the store's marks that are gone or about to change, uploads the other
//!   files, then the marks, and only then removes the files the folder no longer has;
//! - `pull` downloads the other files, then the marks, and removes stale marks first.
//!
//! What was transferred is remembered in a hidden sidecar beside the folder (size, modification
//! time, ETag), so an unchanged file is neither uploaded nor downloaded again. The sidecar is
//! never inside the folder: a staged snapshot digests as the store's objects do.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use crate::error::StorageError;
use crate::remote::Remote;
use crate::transfer::Entry;

pub(crate) const PUSHED: &str = ".runfn-pushed.json";
pub(crate) const PULLED: &str = ".runfn-pulled.json";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Seen {
    size: u64,
    mtime_ns: u128,
    etag: Option<String>,
}

/// What was last transferred, by relative path.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Sidecar {
    #[serde(default)]
    files: BTreeMap<String, Seen>,
    #[serde(skip)]
    name: String,
}

fn mtime_ns(path: &Path) -> Option<(u64, u128)> {
    let meta = std::fs::metadata(path).ok()?;
    let mtime = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
    Some((meta.len(), mtime.as_nanos()))
}

/// Where the sidecar `name` of the folder `dir` lives: beside it, as `.<folder>.<name>`.
fn beside_path(dir: &Path, name: &str) -> (PathBuf, String) {
    let folder = dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let parent = dir
        .parent()
        .map_or_else(|| dir.to_path_buf(), Path::to_path_buf);
    (parent, format!(".{folder}{name}"))
}

impl Sidecar {
    /// The sidecar `name` kept beside the folder `dir`.
    fn beside(dir: &Path, name: &str) -> (PathBuf, Sidecar) {
        let (parent, file) = beside_path(dir, name);
        (parent.clone(), Sidecar::load(&parent, &file))
    }

    pub(crate) fn load(dir: &Path, name: &str) -> Sidecar {
        let mut sidecar: Sidecar = std::fs::read(dir.join(name))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        sidecar.name = name.to_string();
        sidecar
    }

    /// The local file is the one last transferred as `entry` (same size, untouched since, and
    /// the store's object still has that ETag).
    pub(crate) fn matches(&self, relative: &str, local: &Path, entry: &Entry) -> bool {
        let (Some(seen), Some((size, mtime))) = (self.files.get(relative), mtime_ns(local)) else {
            return false;
        };
        seen.size == size && seen.mtime_ns == mtime && size == entry.size && seen.etag == entry.etag
    }

    pub(crate) fn set(&mut self, relative: &str, local: &Path, entry: &Entry) {
        if let Some((size, mtime_ns)) = mtime_ns(local) {
            self.files.insert(
                relative.to_string(),
                Seen {
                    size,
                    mtime_ns,
                    etag: entry.etag.clone(),
                },
            );
        }
    }

    fn forget(&mut self, relative: &str) {
        self.files.remove(relative);
    }

    pub(crate) fn save(&self, dir: &Path, url: &str) -> Result<(), StorageError> {
        let text = serde_json::to_vec(self).expect("a sidecar serializes");
        runfn_core::atomic::write_bytes_atomic(&dir.join(&self.name), &text)
            .map_err(|e| StorageError::new(url, e.to_string()))
    }
}

/// The folder's files (hidden ones, such as sidecars and temporary files, left out) as
/// `/`-separated relative paths, sorted.
fn local_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, std::io::Error> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(folder) = stack.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && folder == dir => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            if entry.file_type()?.is_dir() {
                stack.push(path);
            } else {
                let relative = path
                    .strip_prefix(dir)
                    .expect("below the folder")
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                out.push((relative, path));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// What a push or pull did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Transferred {
    pub files: usize,
    pub bytes: u64,
    pub removed: usize,
}

/// Publishes `dir` to `remote` (see the module's note for the order). `is_mark` tells a commit
/// mark by its relative path.
pub fn push(
    dir: &Path,
    remote: &Remote,
    is_mark: &dyn Fn(&str) -> bool,
) -> Result<Transferred, StorageError> {
    let url = remote.url();
    let local = local_files(dir).map_err(|e| StorageError::io(&url, dir, e))?;
    let existing: BTreeMap<String, Entry> = remote
        .list()?
        .into_iter()
        .map(|e| (e.relative.clone(), e))
        .collect();
    let (home, mut sidecar) = Sidecar::beside(dir, PUSHED);
    let unchanged = |sidecar: &Sidecar, relative: &str, path: &Path| {
        existing
            .get(relative)
            .is_some_and(|entry| sidecar.matches(relative, path, entry))
    };
    let local_names: BTreeMap<&str, &PathBuf> =
        local.iter().map(|(r, p)| (r.as_str(), p)).collect();
    let mut done = Transferred::default();
    // Marks that are gone, or whose new version is about to go up: invisible first.
    for relative in existing.keys().filter(|r| is_mark(r)) {
        let keep = local_names
            .get(relative.as_str())
            .is_some_and(|path| unchanged(&sidecar, relative, path));
        if !keep {
            remote.join(relative).delete()?;
            sidecar.forget(relative);
            done.removed += usize::from(!local_names.contains_key(relative.as_str()));
        }
    }
    let (marks, files): (Vec<_>, Vec<_>) = local.iter().partition(|(r, _)| is_mark(r));
    for (relative, path) in files.into_iter().chain(marks) {
        if unchanged(&sidecar, relative, path) {
            continue;
        }
        let target = remote.join(relative);
        let etag = target.upload_file(path)?;
        let size = std::fs::metadata(path).map_or(0, |m| m.len());
        sidecar.set(
            relative,
            path,
            &Entry {
                relative: relative.clone(),
                size,
                etag,
            },
        );
        done.files += 1;
        done.bytes += size;
        // Saved after each file, so a push cut short resumes where it stopped.
        sidecar.save(&home, &url)?;
    }
    for relative in existing.keys().filter(|r| !is_mark(r)) {
        if !local_names.contains_key(relative.as_str()) {
            remote.join(relative).delete()?;
            sidecar.forget(relative);
            done.removed += 1;
        }
    }
    sidecar.save(&home, &url)?;
    Ok(done)
}

/// Mirrors `remote` into `dir` (see the module's note for the order).
pub fn pull(
    remote: &Remote,
    dir: &Path,
    is_mark: &dyn Fn(&str) -> bool,
) -> Result<Transferred, StorageError> {
    let entries = remote.list()?;
    pull_entries(remote, &entries, dir, is_mark)
}

pub(crate) fn pull_entries(
    remote: &Remote,
    entries: &[Entry],
    dir: &Path,
    is_mark: &dyn Fn(&str) -> bool,
) -> Result<Transferred, StorageError> {
    let url = remote.url();
    std::fs::create_dir_all(dir).map_err(|e| StorageError::io(&url, dir, e))?;
    let (home, mut sidecar) = Sidecar::beside(dir, PULLED);
    let wanted: BTreeMap<&str, &Entry> = entries.iter().map(|e| (e.relative.as_str(), e)).collect();
    let mut done = Transferred::default();
    let local = local_files(dir).map_err(|e| StorageError::io(&url, dir, e))?;
    let (stale_marks, stale_files): (Vec<_>, Vec<_>) = local
        .iter()
        .filter(|(relative, path)| {
            wanted
                .get(relative.as_str())
                .is_none_or(|entry| !sidecar.matches(relative, path, entry))
        })
        .partition(|(relative, _)| is_mark(relative));
    for (relative, path) in &stale_marks {
        remove(path, &url)?;
        sidecar.forget(relative);
    }
    let (marks, files): (Vec<_>, Vec<_>) = entries.iter().partition(|e| is_mark(&e.relative));
    for entry in files.into_iter().chain(marks) {
        let path = dir.join(&entry.relative);
        if sidecar.matches(&entry.relative, &path, entry) {
            continue;
        }
        let fetched = remote.join(&entry.relative).download(&path)?;
        sidecar.set(&entry.relative, &path, &fetched);
        done.files += 1;
        done.bytes += fetched.size;
    }
    for (relative, path) in &stale_files {
        if !wanted.contains_key(relative.as_str()) {
            remove(path, &url)?;
            sidecar.forget(relative);
            done.removed += 1;
        }
    }
    done.removed += stale_marks
        .iter()
        .filter(|(r, _)| !wanted.contains_key(r.as_str()))
        .count();
    sidecar.save(&home, &url)?;
    Ok(done)
}

fn remove(path: &Path, url: &str) -> Result<(), StorageError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StorageError::io(url, path, e)),
        _ => Ok(()),
    }
}
