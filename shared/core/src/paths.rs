//! What a path is, said plainly: special files (FIFOs, sockets, devices) are named as such, and a
//! folder that cannot be made names the part of its path that is a file.

use std::fs::FileType;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use crate::error::InputError;

/// `Some("a FIFO")` (or a socket, a character or block device) for a file that is neither a
/// regular file, a folder nor a symlink. Reading one can block forever or never end, and
/// replacing one with a regular file breaks whatever uses it.
pub fn special_kind(file_type: &FileType) -> Option<&'static str> {
    if file_type.is_fifo() {
        Some("a FIFO")
    } else if file_type.is_socket() {
        Some("a socket")
    } else if file_type.is_char_device() {
        Some("a character device")
    } else if file_type.is_block_device() {
        Some("a block device")
    } else {
        None
    }
}

/// The first existing part of `path` (itself included) that is not a folder, following symlinks.
pub fn not_a_folder(path: &Path) -> Option<PathBuf> {
    let mut ancestors: Vec<&Path> = path
        .ancestors()
        .filter(|a| !a.as_os_str().is_empty())
        .collect();
    ancestors.reverse();
    ancestors
        .into_iter()
        .find(|part| std::fs::metadata(part).is_ok_and(|m| !m.is_dir()))
        .map(Path::to_path_buf)
}

/// `std::fs::create_dir_all`, with an error that names the file in the way instead of
/// "File exists (os error 17)".
pub fn create_dir_all(dir: &Path) -> Result<(), InputError> {
    std::fs::create_dir_all(dir).map_err(|source| {
        // A file system that takes no new folders (`/proc`, `/sys`) answers "No such file or
        // directory" although the parent is there: say what that means.
        match nearest_existing(dir) {
            Some(parent) if source.kind() == std::io::ErrorKind::NotFound => InputError::field(
                dir.display().to_string(),
                format!(
                    "cannot be made: `{}` exists but takes no new folder there ({source})",
                    parent.display()
                ),
            ),
            _ => folder_error(dir, source),
        }
    })
}

/// The error for a folder `dir` that could not be made or used: when part of its path is a file,
/// that part is named.
pub fn folder_error(dir: &Path, source: std::io::Error) -> InputError {
    match not_a_folder(dir) {
        Some(part) => InputError::field(
            dir.display().to_string(),
            format!(
                "cannot be a folder: `{}` is a file, not a folder",
                part.display()
            ),
        ),
        None => InputError::Io {
            path: dir.to_path_buf(),
            source,
        },
    }
}

/// The deepest ancestor of `dir` that exists, when that is its parent: the folder itself was
/// refused, not a missing part of its path.
fn nearest_existing(dir: &Path) -> Option<std::path::PathBuf> {
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty())?;
    std::fs::symlink_metadata(parent)
        .ok()
        .filter(|m| m.is_dir())
        .map(|_| parent.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_proc_refuses_is_not_called_missing() {
        let err = create_dir_all(Path::new("/proc/runfn-out"))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "/proc/runfn-out: cannot be made: `/proc` exists but takes no new folder"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_file_in_the_way_of_a_folder_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("runs");
        std::fs::write(&file, "").unwrap();
        let err = create_dir_all(&file.join("a/b")).unwrap_err().to_string();
        assert!(
            err.contains(&format!("`{}` is a file, not a folder", file.display())),
            "{err}"
        );
        create_dir_all(&dir.path().join("x/y")).unwrap();
        assert!(dir.path().join("x/y").is_dir());
        assert_eq!(not_a_folder(&dir.path().join("x/y")), None);
    }

    #[test]
    fn fifos_are_special_and_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let kind = std::fs::symlink_metadata(&fifo).unwrap().file_type();
        assert_eq!(special_kind(&kind), Some("a FIFO"));
        std::fs::write(dir.path().join("f"), "").unwrap();
        let kind = std::fs::metadata(dir.path().join("f")).unwrap().file_type();
        assert_eq!(special_kind(&kind), None);
    }
}
