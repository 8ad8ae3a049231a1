//! Content digest of a data snapshot (a folder or a single file).
//!
//! Definition (`runfn-data-v1`): list every regular file under the root (symlinks followed, empty
//! folders ignored; a FIFO, socket or device anywhere is an error, as it is for the snapshot
//! readers, so no file is read that the digest leaves out), sort by relative path (`/`-separated, compared as bytes), hash each file's
//! content with blake3, then hash the tag and, per file in order, the path length (u64 LE), the path,
//! the size (u64 LE) and the 32-byte content hash. Renaming, adding, removing or editing any file
//! changes the digest; timestamps and permissions do not.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use runfn_core::parts::{Part, PartHeader};

use rayon::prelude::*;
use serde::Serialize;

const FORMAT_TAG: &[u8] = b"runfn-data-v1\n";
/// Files at least this large are memory-mapped and hashed on all cores; smaller ones are read
/// whole, and the parallelism comes from hashing many of them at once.
const MMAP_THRESHOLD: u64 = 1 << 20;

/// `mf_hash.data_digest`: the snapshot's content digest, as the record holds it.
pub use runfn_schema::record::DataDigest;

#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: is {kind}, not a regular file; a snapshot holds regular files and folders only"
    )]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{0}: the path is not valid UTF-8, so it has no portable name")]
    NotUtf8(PathBuf),
    #[error(
        "{path}: the file changed while it was hashed ({expected} bytes listed, {hashed} hashed)"
    )]
    Changed {
        path: PathBuf,
        expected: u64,
        hashed: u64,
    },
}

#[derive(Debug)]
struct Entry {
    relative: String,
    path: PathBuf,
    size: u64,
}

/// One file of a snapshot: its `/`-separated path under the root, size and content hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileDigest {
    pub path: String,
    pub bytes: u64,
    /// blake3 of the content, 64 hex.
    pub blake3: String,
}

/// Digests `root`; `progress` is called with each file's size once that file is hashed.
pub fn digest_path(
    root: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<DataDigest, DigestError> {
    digest_files(root, progress).map(|(digest, _)| digest)
}

/// Digests `root` and lists each file's digest, sorted by path (what a pin keeps to name the
/// file that changed).
pub fn digest_files(
    root: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(DataDigest, Vec<FileDigest>), DigestError> {
    Listing::of(root)?.digest(&|_| None, progress)
}

/// A file's blake3 and the number of bytes it covers, computed by whoever read the file anyway.
pub type KnownHash = (blake3::Hash, u64);

/// The files of a snapshot, listed and checked (a FIFO or device refused), not yet hashed: a
/// reader can list first, hash each file as it reads it, and finish the digest from those
/// hashes, so a snapshot is read once instead of twice.
#[derive(Debug)]
pub struct Listing {
    root: PathBuf,
    entries: Vec<Entry>,
}

impl Listing {
    pub fn of(root: &Path) -> Result<Listing, DigestError> {
        Ok(Listing {
            root: root.to_path_buf(),
            entries: list_files(root)?,
        })
    }

    /// The digest, and each file's: a file's hash is taken from `known` (given the file's path
    /// as listed) when it gives one covering the file's listed size, and computed now
    /// otherwise. `progress` is called with the size of each file hashed now.
    pub fn digest(
        self,
        known: &(dyn Fn(&Path) -> Option<KnownHash> + Sync),
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<(DataDigest, Vec<FileDigest>), DigestError> {
        let entries = self.entries;
        let hashes: Vec<blake3::Hash> = entries
            .par_iter()
            .map(|entry| match known(&entry.path) {
                Some((hash, bytes)) if bytes == entry.size => Ok(hash),
                _ => {
                    let hash = hash_file(entry)?;
                    progress(entry.size);
                    Ok(hash)
                }
            })
            .collect::<Result<_, DigestError>>()?;
        let mut combined = blake3::Hasher::new();
        combined.update(FORMAT_TAG);
        for (entry, hash) in entries.iter().zip(&hashes) {
            combined.update(&(entry.relative.len() as u64).to_le_bytes());
            combined.update(entry.relative.as_bytes());
            combined.update(&entry.size.to_le_bytes());
            combined.update(hash.as_bytes());
        }
        let digest = DataDigest {
            path: self.root.display().to_string(),
            digest: format!("blake3:{}", combined.finalize().to_hex()),
            files: entries.len() as u64,
            bytes: entries.iter().map(|e| e.size).sum(),
        };
        let files = entries
            .into_iter()
            .zip(hashes)
            .map(|(entry, hash)| FileDigest {
                path: entry.relative,
                bytes: entry.size,
                blake3: hash.to_hex().to_string(),
            })
            .collect();
        Ok((digest, files))
    }
}

impl Listing {
    /// The digest with only the files `hash_these` selects (by their path under the root) hashed
    /// now; every other file's hash is taken from `recorded` (a pin's listing) where its path and
    /// size match, and hashed now where they do not. A part of a job checks its own files this
    /// way, not the whole snapshot.
    pub fn digest_some(
        self,
        hash_these: &(dyn Fn(&str) -> bool + Sync),
        recorded: &[FileDigest],
    ) -> Result<(DataDigest, Vec<FileDigest>), DigestError> {
        let recorded: HashMap<&str, &FileDigest> =
            recorded.iter().map(|f| (f.path.as_str(), f)).collect();
        let trusted: HashMap<PathBuf, KnownHash> = self
            .entries
            .iter()
            .filter(|entry| !hash_these(&entry.relative))
            .filter_map(|entry| {
                let file = recorded.get(entry.relative.as_str())?;
                let hash = blake3::Hash::from_hex(&file.blake3).ok()?;
                Some((entry.path.clone(), (hash, file.bytes)))
            })
            .collect();
        self.digest(&|path| trusted.get(path).copied(), &|_| {})
    }
}

/// One part's share of a snapshot's digest (`mf-hash --data-digest --part K/N`): its files'
/// hashes; the merge combines every part's into the digest one process computes.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DigestPart {
    pub part: PartHeader,
    pub files: Vec<FileDigest>,
}

/// The partial's format tag.
pub const DIGEST_PART_FORMAT: &str = "mf-hash-part-v1";

impl Listing {
    fn units(&self) -> impl Iterator<Item = (&str, u64)> {
        self.entries.iter().map(|e| (e.relative.as_str(), e.size))
    }

    /// Each file's part under `count` parts: contiguous runs of the sorted listing, by bytes.
    pub fn assignment(&self, count: u32) -> Vec<u32> {
        let sizes: Vec<u64> = self.entries.iter().map(|e| e.size).collect();
        runfn_core::parts::assign(&sizes, count)
    }

    /// The objects under a store prefix as a listing, with the names and sizes the store
    /// lists (`relative`, `size`), sorted as a local walk sorts them and without the names a
    /// local walk skips (hidden or `_`-prefixed at any depth): the listing of the prefix's
    /// staged copy, without staging it. Its files are hashed by whoever reads the store
    /// ([`Listing::part_files`], [`Listing::digest_part_from`]); `root` (the URL) names them.
    pub fn of_store(root: &str, objects: impl IntoIterator<Item = (String, u64)>) -> Listing {
        let mut entries: Vec<Entry> = objects
            .into_iter()
            .filter(|(relative, _)| {
                !relative
                    .split('/')
                    .any(runfn_core::snapshot_files::is_skipped)
            })
            .map(|(relative, size)| Entry {
                path: PathBuf::from(root).join(&relative),
                relative,
                size,
            })
            .collect();
        entries.sort_by(|a, b| a.relative.cmp(&b.relative));
        Listing {
            root: PathBuf::from(root),
            entries,
        }
    }

    /// The files of `part` (path under the root, size), in listing order.
    pub fn part_files(&self, part: Part) -> Vec<(&str, u64)> {
        let assignment = self.assignment(part.count);
        self.entries
            .iter()
            .zip(assignment)
            .filter(|(_, at)| *at == part.index)
            .map(|(e, _)| (e.relative.as_str(), e.size))
            .collect()
    }

    /// Part `part`'s partial from its files' hashes, computed by the caller (in the order of
    /// [`Listing::part_files`]): a part that reads a store hashes each object as it streams.
    pub fn digest_part_from(&self, part: Part, hashes: Vec<blake3::Hash>) -> DigestPart {
        let assignment = self.assignment(part.count);
        let mine: Vec<usize> = (0..self.entries.len())
            .filter(|&i| assignment[i] == part.index)
            .collect();
        self.partial(part, &mine, hashes)
    }

    /// Hashes the files of `part` alone.
    pub fn digest_part(
        &self,
        part: Part,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<DigestPart, DigestError> {
        let assignment = self.assignment(part.count);
        let mine: Vec<usize> = (0..self.entries.len())
            .filter(|&i| assignment[i] == part.index)
            .collect();
        let hashes: Vec<blake3::Hash> = mine
            .par_iter()
            .map(|&i| {
                let hash = hash_file(&self.entries[i])?;
                progress(self.entries[i].size);
                Ok(hash)
            })
            .collect::<Result<_, DigestError>>()?;
        Ok(self.partial(part, &mine, hashes))
    }

    fn partial(&self, part: Part, mine: &[usize], hashes: Vec<blake3::Hash>) -> DigestPart {
        DigestPart {
            part: PartHeader {
                format: DIGEST_PART_FORMAT.into(),
                part,
                listing: runfn_core::parts::fingerprint(self.units()),
                units: self.entries.len() as u64,
                done: mine.iter().map(|&i| i as u64).collect(),
            },
            files: mine
                .iter()
                .zip(hashes)
                .map(|(&i, hash)| FileDigest {
                    path: self.entries[i].relative.clone(),
                    bytes: self.entries[i].size,
                    blake3: hash.to_hex().to_string(),
                })
                .collect(),
        }
    }

    /// The digest from every part's hashes, without reading a file: the same digest one process
    /// computes. Refuses parts that cut another listing (the snapshot changed since, or they are
    /// another snapshot's) or do not cover it file by file as the assignment says.
    pub fn digest_from_parts(
        self,
        parts: &[DigestPart],
    ) -> Result<(DataDigest, Vec<FileDigest>), String> {
        let listing = runfn_core::parts::fingerprint(self.units());
        let count = parts.first().map_or(1, |p| p.part.part.count);
        if let Some(other) = parts.iter().find(|p| p.part.listing != listing) {
            return Err(format!(
                "part {} hashed another listing of the snapshot ({} files listed now): it changed since the parts ran",
                other.part.part,
                self.entries.len()
            ));
        }
        if let Some(other) = parts.iter().find(|p| p.part.format != DIGEST_PART_FORMAT) {
            return Err(format!(
                "part {}: format `{}`, expected `{DIGEST_PART_FORMAT}`",
                other.part.part, other.part.format
            ));
        }
        let headers: Vec<&PartHeader> = parts.iter().map(|p| &p.part).collect();
        runfn_core::parts::check_coverage(&headers, &self.assignment(count))?;
        let mut known: HashMap<&str, (&str, u64)> = HashMap::new();
        for part in parts {
            if part.files.len() != part.part.done.len() {
                return Err(format!(
                    "part {} lists {} files for {} done",
                    part.part.part,
                    part.files.len(),
                    part.part.done.len()
                ));
            }
            for (file, &unit) in part.files.iter().zip(&part.part.done) {
                let entry = &self.entries[unit as usize];
                if file.path != entry.relative || file.bytes != entry.size {
                    return Err(format!(
                        "part {} hashed `{}` ({} bytes) where the listing has `{}` ({} bytes)",
                        part.part.part, file.path, file.bytes, entry.relative, entry.size
                    ));
                }
                known.insert(entry.relative.as_str(), (file.blake3.as_str(), file.bytes));
            }
        }
        let hashes: HashMap<PathBuf, KnownHash> = self
            .entries
            .iter()
            .map(|e| {
                let (hex, bytes) = known[e.relative.as_str()];
                let hash = blake3::Hash::from_hex(hex)
                    .map_err(|_| format!("`{}`: `{hex}` is not a blake3 hash", e.relative))?;
                Ok((e.path.clone(), (hash, bytes)))
            })
            .collect::<Result<_, String>>()?;
        self.digest(&|path| hashes.get(path).copied(), &|_| {})
            .map_err(|e| e.to_string())
    }
}

/// Total bytes under `root`, for a progress bar, without hashing.
pub fn total_bytes(root: &Path) -> Result<u64, DigestError> {
    Ok(list_files(root)?.iter().map(|e| e.size).sum())
}

/// The snapshot's files as every reader sees them (runfn-core's one walk): the digest covers
/// exactly the files a tool reads.
fn list_files(root: &Path) -> Result<Vec<Entry>, DigestError> {
    use runfn_core::snapshot_files::{WalkError, snapshot_files};
    let files = snapshot_files(root).map_err(|err| match err {
        WalkError::Io { path, source } => DigestError::Io { path, source },
        WalkError::NotRegular { path, kind } => DigestError::NotRegular { path, kind },
        WalkError::NotUtf8(path) => DigestError::NotUtf8(path),
    })?;
    Ok(files
        .into_iter()
        .map(|f| Entry {
            relative: f.relative,
            path: f.path,
            size: f.size,
        })
        .collect())
}

/// Bytes of files mapped at once, over all the threads hashing files: a large file is mapped a
/// window at a time, the hash runs on every core over the window, and the window is unmapped
/// before the next (a whole-file map kept every page it touched resident until the end). Mapped
/// pages count as resident memory: two threads with a 64 MiB window each took `shardify
/// --memory 128M` to 133 MiB before it had read a row.
const MAPPED_AT_ONCE: u64 = 32 << 20;
const MIN_WINDOW: u64 = 1 << 20;

/// Each hashing thread's window: its share of `MAPPED_AT_ONCE`, whole MiB (map offsets are
/// multiples of the page size).
fn map_window() -> u64 {
    let threads = rayon::current_num_threads().max(1) as u64;
    (MAPPED_AT_ONCE / threads).max(MIN_WINDOW) / MIN_WINDOW * MIN_WINDOW
}

fn hash_mapped(
    hasher: &mut blake3::Hasher,
    path: &Path,
    size: u64,
    window: u64,
) -> std::io::Result<()> {
    let file = File::open(path)?;
    let mut offset = 0;
    while offset < size {
        let len = window.min(size - offset);
        // SAFETY: the map is read-only and dropped before the next window; a file truncated
        // meanwhile can fault the read (SIGBUS), the risk every mmap reader takes, and one
        // changed in place hashes differently, which the caller reports.
        let window = unsafe {
            memmap2::MmapOptions::new()
                .offset(offset)
                .len(len as usize)
                .map(&file)?
        };
        hasher.update_rayon(&window);
        offset += len;
    }
    Ok(())
}

fn hash_file(entry: &Entry) -> Result<blake3::Hash, DigestError> {
    let io_error = |source| DigestError::Io {
        path: entry.path.clone(),
        source,
    };
    let mut hasher = blake3::Hasher::new();
    if entry.size >= MMAP_THRESHOLD {
        hash_mapped(&mut hasher, &entry.path, entry.size, map_window()).map_err(io_error)?;
    } else {
        hasher
            .update_reader(File::open(&entry.path).map_err(io_error)?)
            .map_err(io_error)?;
    }
    if hasher.count() != entry.size {
        return Err(DigestError::Changed {
            path: entry.path.clone(),
            expected: entry.size,
            hashed: hasher.count(),
        });
    }
    Ok(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file hashed a window at a time, windows ending anywhere in it, hashes as its bytes do;
    /// the window is a whole number of MiB, and all the threads' windows stay within
    /// `MAPPED_AT_ONCE` wherever one MiB each fits.
    #[test]
    fn a_file_hashed_in_windows_hashes_as_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let bytes: Vec<u8> = (0..(3 * MIN_WINDOW + 12_345) as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        write(dir.path(), "big.bin", &bytes);
        for window in [MIN_WINDOW, 2 * MIN_WINDOW, 64 * MIN_WINDOW] {
            let mut hasher = blake3::Hasher::new();
            hash_mapped(
                &mut hasher,
                &dir.path().join("big.bin"),
                bytes.len() as u64,
                window,
            )
            .unwrap();
            assert_eq!(hasher.finalize(), blake3::hash(&bytes), "window {window}");
        }
        let window = map_window();
        assert_eq!(window % MIN_WINDOW, 0);
        let threads = rayon::current_num_threads() as u64;
        assert!(window * threads <= MAPPED_AT_ONCE.max(threads * MIN_WINDOW));
    }

    fn write(dir: &Path, name: &str, bytes: &[u8]) {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }

    fn digest(dir: &Path) -> String {
        digest_path(dir, &|_| {}).unwrap().digest
    }

    /// A hash the reader already has is used when it covers the listed size, and ignored (the
    /// file hashed again) when it does not, so a reader that stopped early cannot shorten a
    /// file's share of the digest.
    #[test]
    fn hashes_known_from_reading_are_used_only_when_they_cover_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.csv", b"x\n1\n");
        write(dir.path(), "sub/b.csv", b"x\n2\n3\n");
        let plain = digest_files(dir.path(), &|_| {}).unwrap();
        let b = dir.path().join("sub").join("b.csv");
        let digest_with = |known: Option<KnownHash>| {
            let hashed_now = std::sync::atomic::AtomicU64::new(0);
            let digest = Listing::of(dir.path())
                .unwrap()
                .digest(&|path| if path == b { known } else { None }, &|bytes| {
                    hashed_now.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
                })
                .unwrap();
            (digest, hashed_now.into_inner())
        };
        let right = (blake3::hash(b"x\n2\n3\n"), 6);
        assert_eq!(digest_with(Some(right)), (plain.clone(), 4));
        // A wrong hash of the right length is taken as given: proof the known hash is used.
        let (wrong, hashed_now) = digest_with(Some((blake3::hash(b"other!"), 6)));
        assert_ne!(wrong.0.digest, plain.0.digest);
        assert_eq!(hashed_now, 4);
        // Short of the listed size: hashed again, same digest as without it.
        assert_eq!(digest_with(Some((blake3::hash(b"x\n2\n"), 4))), (plain, 10));
    }

    #[test]
    fn pinned_definition_for_one_small_folder() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "b/x.csv", b"1,2\n");
        write(dir.path(), "a.csv", b"id\n");
        let mut expected = blake3::Hasher::new();
        expected.update(b"runfn-data-v1\n");
        for (name, content) in [("a.csv", &b"id\n"[..]), ("b/x.csv", &b"1,2\n"[..])] {
            expected.update(&(name.len() as u64).to_le_bytes());
            expected.update(name.as_bytes());
            expected.update(&(content.len() as u64).to_le_bytes());
            expected.update(blake3::hash(content).as_bytes());
        }
        let result = digest_path(dir.path(), &|_| {}).unwrap();
        assert_eq!(
            result.digest,
            format!("blake3:{}", expected.finalize().to_hex())
        );
        assert_eq!((result.files, result.bytes), (2, 7));
    }

    #[test]
    fn content_names_and_membership_all_count() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "part-0.csv", b"a,b\n1,2\n");
        write(
            dir.path(),
            "big.bin",
            &vec![7u8; (MMAP_THRESHOLD + 5) as usize],
        );
        let original = digest(dir.path());
        assert_eq!(digest(dir.path()), original, "deterministic");

        write(dir.path(), "part-0.csv", b"a,b\n1,3\n");
        let edited = digest(dir.path());
        assert_ne!(edited, original);

        std::fs::rename(dir.path().join("part-0.csv"), dir.path().join("part-1.csv")).unwrap();
        let renamed = digest(dir.path());
        assert_ne!(renamed, edited);

        write(dir.path(), "extra", b"");
        assert_ne!(digest(dir.path()), renamed);
    }

    #[test]
    fn a_fifo_is_refused_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.csv", b"x\n1\n");
        let fifo = dir.path().join("b.csv");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let err = digest_path(dir.path(), &|_| {}).unwrap_err().to_string();
        assert!(
            err.contains("b.csv: is a FIFO, not a regular file"),
            "{err}"
        );
        let err = digest_path(&fifo, &|_| {}).unwrap_err().to_string();
        assert!(err.contains("is a FIFO"), "{err}");
    }

    #[test]
    fn missing_root_names_the_path() {
        let err = digest_path(Path::new("/nonexistent/snapshot"), &|_| {}).unwrap_err();
        assert!(
            err.to_string().starts_with("/nonexistent/snapshot: "),
            "{err}"
        );
    }
}
