//! The files of a snapshot, one walk for every tool: what the readers read is exactly what the
//! digest covers and a pin lists. Names starting with `.` or `_` (hidden files, `_SUCCESS` and
//! other job markers) are not data and are left out at any depth; a FIFO, socket or device is
//! refused (reading one can block forever); symbolic links are followed; the files come sorted
//! by their relative path's bytes.

use std::path::{Path, PathBuf};

/// One regular file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotFile {
    /// `/`-separated, relative to the snapshot's root (the file's own name when the root is a file).
    pub relative: String,
    pub path: PathBuf,
    pub size: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: is {kind}, not a regular file; a snapshot holds regular files and folders only", path.display())]
    NotRegular { path: PathBuf, kind: &'static str },
    #[error("{}: the name is not UTF-8", .0.display())]
    NotUtf8(PathBuf),
}

/// Whether a file or folder named `name` is left out of a snapshot.
pub fn is_skipped(name: &str) -> bool {
    name.starts_with('.') || name.starts_with('_')
}

/// The snapshot at `root` (a file or a folder) as its files.
pub fn snapshot_files(root: &Path) -> Result<Vec<SnapshotFile>, WalkError> {
    let io = |path: &Path, source| WalkError::Io {
        path: path.to_path_buf(),
        source,
    };
    let metadata = std::fs::metadata(root).map_err(|e| io(root, e))?;
    if let Some(kind) = crate::paths::special_kind(&metadata.file_type()) {
        return Err(WalkError::NotRegular {
            path: root.to_path_buf(),
            kind,
        });
    }
    if metadata.is_file() {
        let name = root
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| WalkError::NotUtf8(root.into()))?;
        return Ok(vec![SnapshotFile {
            relative: name.to_string(),
            path: root.to_path_buf(),
            size: metadata.len(),
        }]);
    }
    let mut files = Vec::new();
    let walk = walkdir::WalkDir::new(root)
        .follow_links(true)
        .into_iter()
        .filter_entry(|entry| {
            entry.depth() == 0 || !entry.file_name().to_str().is_some_and(is_skipped)
        });
    for item in walk {
        let item = item.map_err(|err| {
            let path = err.path().unwrap_or(root).to_path_buf();
            let source = err
                .into_io_error()
                .unwrap_or_else(|| std::io::Error::other("a symbolic link loop"));
            WalkError::Io { path, source }
        })?;
        if let Some(kind) = crate::paths::special_kind(&item.file_type()) {
            return Err(WalkError::NotRegular {
                path: item.into_path(),
                kind,
            });
        }
        if !item.file_type().is_file() {
            continue;
        }
        let relative = item
            .path()
            .strip_prefix(root)
            .ok()
            .and_then(|p| p.to_str())
            .ok_or_else(|| WalkError::NotUtf8(item.path().into()))?
            .replace(std::path::MAIN_SEPARATOR, "/");
        let size = item
            .metadata()
            .map_err(|e| io(item.path(), e.into()))?
            .len();
        files.push(SnapshotFile {
            relative,
            path: item.into_path(),
            size,
        });
    }
    files.sort_by(|a, b| a.relative.as_bytes().cmp(b.relative.as_bytes()));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_and_hidden_names_are_left_out_at_any_depth_and_the_rest_sorted_by_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (name, text) in [
            ("a-b.csv", "1"),
            ("a/b.csv", "22"),
            ("_SUCCESS", ""),
            (".hidden.csv", "x"),
            ("part/_temporary/x.csv", "x"),
            ("part/.crc/y.csv", "y"),
            ("part/z.csv", "333"),
        ] {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let files = snapshot_files(root).unwrap();
        let listed: Vec<(&str, u64)> = files
            .iter()
            .map(|f| (f.relative.as_str(), f.size))
            .collect();
        assert_eq!(listed, [("a-b.csv", 1), ("a/b.csv", 2), ("part/z.csv", 3)]);
        let one = snapshot_files(&root.join("a-b.csv")).unwrap();
        assert_eq!(one[0].relative, "a-b.csv");
    }

    #[test]
    fn a_fifo_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("data.csv");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string naming a path in a folder this test owns.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let err = snapshot_files(dir.path()).unwrap_err().to_string();
        assert!(err.contains("data.csv: is a FIFO"), "{err}");
    }
}
