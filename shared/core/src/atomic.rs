//! Files appear whole or not at all: temp file in the same folder, fsync, rename, fsync the folder.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::InputError;

/// Writes `path` atomically with the bytes `write` produces. If `write` fails or the process dies
/// part-way, `path` keeps its old content (or stays absent) and the temp file is removed (or, after
/// a kill, left as a hidden `.name.tmp*` file that no reader mistakes for the output).
pub fn write_atomic<F>(path: &Path, write: F) -> Result<(), InputError>
where
    F: FnOnce(&mut dyn Write) -> std::io::Result<()>,
{
    let io_error = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        io_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a file path",
        ))
    })?;
    let mut temp = tempfile::Builder::new()
        .prefix(&format!(".{}.tmp", name.to_string_lossy()))
        // Outputs are data to share, not secrets: the usual 0644 rather than tempfile's 0600.
        .permissions(readable_by_all())
        .tempfile_in(dir)
        .map_err(io_error)?;
    {
        let mut writer = BufWriter::new(temp.as_file_mut());
        write(&mut writer).map_err(io_error)?;
        writer.flush().map_err(io_error)?;
    }
    temp.as_file().sync_all().map_err(io_error)?;
    temp.persist(path).map_err(|err| io_error(err.error))?;
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(io_error)
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
}
