//! Files appear whole or not at all: temp file in the same folder, fsync, rename, fsync the folder.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::InputError;
use crate::paths::{folder_error, special_kind};

/// Symlinks followed before giving up, as the kernel does (`ELOOP`).
const MAX_SYMLINKS: usize = 40;

/// Writes `path` atomically with the bytes `write` produces. If `write` fails or the process dies
/// part-way, `path` keeps its old content (or stays absent) and the temp file is removed (or, after
/// a kill, left as a hidden `.name.tmp*` file that no reader mistakes for the output).
///
/// A symlink is followed and its target replaced (the temp file goes next to the target, so the
/// rename stays within one folder and the link stays a link). A FIFO, socket or device is refused:
/// renaming over it would replace, say, `/dev/null` with a regular file.
pub fn write_atomic<F>(path: &Path, write: F) -> Result<(), InputError>
where
    F: FnOnce(&mut dyn Write) -> std::io::Result<()>,
{
    write_atomic_file(path, |file, _| {
        let mut writer = BufWriter::new(file);
        write(&mut writer)?;
        writer.flush()
    })
}

/// [`write_atomic`] for a writer that needs the temp file itself: `write` gets it, open for
/// writing and empty, and its path (to open it a second way, as [`crate::direct_write`] does).
pub fn write_atomic_file<F>(path: &Path, write: F) -> Result<(), InputError>
where
    F: FnOnce(&mut File, &Path) -> std::io::Result<()>,
{
    let mut file = AtomicFile::create(path)?;
    let temp_path = file.temp_path().to_path_buf();
    write(file.file_mut(), &temp_path).map_err(|source| InputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    file.commit()
}

/// A file written over time that appears at its path whole, on [`AtomicFile::commit`], or not
/// at all: dropped uncommitted (an error on the way, a panic), its temp file goes. For outputs
/// written while their rows stream past, where [`write_atomic`]'s one closure would have to
/// hold the whole computation.
#[derive(Debug)]
pub struct AtomicFile {
    path: PathBuf,
    target: PathBuf,
    temp: tempfile::NamedTempFile,
}

impl AtomicFile {
    /// An empty temp file beside `path`'s target (a symlink followed; a FIFO, socket, device
    /// or folder refused), after removing what killed writers of it left.
    pub fn create(path: &Path) -> Result<AtomicFile, InputError> {
        let target = replaceable_target(path)?;
        let io_error = |source| InputError::Io {
            path: path.to_path_buf(),
            source,
        };
        let dir = match target.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let name = target.file_name().ok_or_else(|| {
            io_error(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a file path",
            ))
        })?;
        remove_stale_temps(dir, &format!(".{}.tmp", name.to_string_lossy()));
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{}.tmp", name.to_string_lossy()))
            // Outputs are data to share, not secrets: the usual 0644 rather than tempfile's 0600.
            .permissions(readable_by_all())
            .tempfile_in(dir)
            .map_err(|source| match folder_error(dir, source) {
                InputError::Io { source, .. } => io_error(source),
                other => other,
            })?;
        Ok(AtomicFile {
            path: path.to_path_buf(),
            target,
            temp,
        })
    }

    pub fn file_mut(&mut self) -> &mut File {
        self.temp.as_file_mut()
    }

    pub fn temp_path(&self) -> &Path {
        self.temp.path()
    }

    /// Syncs the file, renames it over the target and syncs the folder.
    pub fn commit(self) -> Result<(), InputError> {
        let io_error = |source| InputError::Io {
            path: self.path.clone(),
            source,
        };
        self.temp.as_file().sync_all().map_err(io_error)?;
        let dir = match self.target.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        self.temp
            .persist(&self.target)
            .map_err(|err| io_error(err.error))?;
        File::open(&dir)
            .and_then(|dir| dir.sync_all())
            .map_err(io_error)
    }
}

/// How long a temp file must have gone unwritten before it counts as a killed writer's: a live
/// writer touches its file with every block it writes.
pub const STALE_TEMP: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Removes the files of `dir` whose names start with `prefix` (a temp file of one output, or
/// of one kind of output) and that nobody has written for [`STALE_TEMP`]: what a process
/// killed halfway through a write left (a full-size hidden blob, a checkpoint). Best effort: a
/// file that cannot be removed stays, as it would have.
pub fn remove_stale_temps(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if !name.starts_with(prefix) || !name.contains(".tmp") {
            continue;
        }
        let idle = entry
            .metadata()
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|m| m.modified().ok())
            .and_then(|modified| now.duration_since(modified).ok());
        if idle.is_some_and(|idle| idle >= STALE_TEMP) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The file a write to `path` replaces: `path` itself, or the end of its chain of symlinks.
/// Refuses folders and special files, naming `path`. For writers that stream into their own temp
/// file (predictions, shards) and rename it into place at the end: rename onto what this returns.
pub fn replaceable_target(path: &Path) -> Result<PathBuf, InputError> {
    let refuse = |message: String| InputError::field(path.display().to_string(), message);
    let mut current = path.to_path_buf();
    for _ in 0..MAX_SYMLINKS {
        let metadata = match std::fs::symlink_metadata(&current) {
            Ok(metadata) => metadata,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(current),
            // Not a folder somewhere on the way, or unreadable: the temp file's creation says so.
            Err(_) => return Ok(current),
        };
        let file_type = metadata.file_type();
        if file_type.is_symlink() {
            let link = std::fs::read_link(&current).map_err(|source| InputError::Io {
                path: current.clone(),
                source,
            })?;
            current = match current.parent() {
                Some(parent) if link.is_relative() => parent.join(link),
                _ => link,
            };
        } else if file_type.is_dir() {
            return Err(refuse("is a folder, not a file".into()));
        } else if let Some(kind) = special_kind(&file_type) {
            let shown = if current == path {
                String::new()
            } else {
                format!(" (`{}`)", current.display())
            };
            return Err(refuse(format!(
                "is {kind}{shown}, not a regular file; refusing to replace it"
            )));
        } else {
            return Ok(current);
        }
    }
    Err(refuse(format!(
        "more than {MAX_SYMLINKS} symlinks to follow (a loop?)"
    )))
}

/// `rw-r--r--`, the mode files normally get.
pub fn readable_by_all() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(0o644)
}

/// Writes `bytes` to `path` atomically.
pub fn write_bytes_atomic(path: &Path, bytes: &[u8]) -> Result<(), InputError> {
    write_atomic(path, |out| out.write_all(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A killed writer's temp file goes with the next write of the same output once it has sat
    /// unwritten for the stale age; a fresh one (a writer still at work) stays.
    #[test]
    fn a_killed_writers_temp_file_is_removed_by_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join(".out.json.tmpAbC123");
        let fresh = dir.path().join(".out.json.tmpXyZ789");
        let other = dir.path().join(".other.json.tmpQqQ000");
        for file in [&old, &fresh, &other] {
            std::fs::write(file, b"partial").unwrap();
        }
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for file in [&old, &other] {
            File::options()
                .write(true)
                .open(file)
                .unwrap()
                .set_modified(hour_ago)
                .unwrap();
        }
        write_bytes_atomic(&dir.path().join("out.json"), b"{}").unwrap();
        assert!(!old.exists(), "the stale temp of out.json stays");
        assert!(fresh.exists(), "a temp being written was removed");
        assert!(other.exists(), "another output's temp was removed");
    }

    #[test]
    fn writes_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        write_bytes_atomic(&path, b"{\"a\":1}\n").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"{\"a\":1}\n");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn failed_write_keeps_the_old_file_and_removes_the_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        write_bytes_atomic(&path, b"old").unwrap();
        let err = write_atomic(&path, |out| {
            out.write_all(b"half of the new")?;
            Err(std::io::Error::other("disk on fire"))
        })
        .unwrap_err();
        assert!(err.to_string().contains("disk on fire"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn missing_folder_names_the_path() {
        let err = write_bytes_atomic(Path::new("/nonexistent-runfn/out.json"), b"x").unwrap_err();
        assert!(
            err.to_string().starts_with("/nonexistent-runfn/out.json: "),
            "{err}"
        );
    }

    #[test]
    fn a_symlink_is_followed_and_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("real")).unwrap();
        let target = dir.path().join("real/out.json");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink("real/out.json", &link).unwrap();
        write_bytes_atomic(&link, b"new").unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        assert_eq!(
            std::fs::read_dir(dir.path().join("real")).unwrap().count(),
            1
        );
    }

    #[test]
    fn fifos_and_folders_are_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let err = write_bytes_atomic(&fifo, b"x").unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}: is a FIFO", fifo.display())),
            "{err}"
        );
        use std::os::unix::fs::FileTypeExt;
        assert!(
            std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo()
        );
        let link = dir.path().join("to-pipe");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        let err = write_bytes_atomic(&link, b"x").unwrap_err().to_string();
        assert!(err.contains("is a FIFO (`"), "{err}");
        let err = write_bytes_atomic(dir.path(), b"x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a folder"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_file_in_the_way_of_the_folder_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("runs"), "").unwrap();
        let err = write_bytes_atomic(&dir.path().join("runs/out.json"), b"x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a file, not a folder"), "{err}");
    }
}
