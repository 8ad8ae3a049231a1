//! Files a tool reads beside its record (a previous profile, a baseline record, a model, a
//! snapshot's listing), read with a bound: only a regular file, and no more than a stated size.
//! `/dev/zero` as a baseline grew a tool's memory until the kernel killed it, and a FIFO as a
//! listing blocked in `open` for ever.

use std::io::Read;
use std::path::Path;

use crate::error::InputError;
use crate::paths::special_kind;

/// The most a JSON side file (a record, a profile, a listing) may hold.
pub const JSON_LIMIT: u64 = 1 << 30;

/// The most a model file may hold.
pub const MODEL_LIMIT: u64 = 64 << 30;

/// The metadata of `path` when it is a regular file (after symlinks) of at most `limit` bytes;
/// otherwise an error naming the path and what it is. Looked at before opening: opening a FIFO
/// with no writer blocks.
fn regular_within(path: &Path, limit: u64) -> Result<std::fs::Metadata, InputError> {
    let metadata = std::fs::metadata(path).map_err(|source| InputError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let refuse = |message: String| InputError::field(path.display().to_string(), message);
    if let Some(kind) = special_kind(&metadata.file_type()) {
        return Err(refuse(format!("is {kind}, not a regular file")));
    }
    if metadata.is_dir() {
        return Err(refuse("is a folder, not a file".into()));
    }
    if metadata.len() > limit {
        return Err(refuse(format!(
            "is {} bytes, more than the {limit} bytes such a file may hold",
            metadata.len()
        )));
    }
    Ok(metadata)
}

/// The bytes of `path`, a regular file (after symlinks) of at most `limit` bytes; otherwise an
/// error naming the path and what it is. A missing file is the `NotFound` I/O error it always was.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let refuse = |message: String| InputError::field(path.display().to_string(), message);
    let metadata = regular_within(path, limit)?;
    let mut bytes = Vec::with_capacity(metadata.len() as usize);
    // The file may grow after the look: read one byte past the limit at most.
    std::fs::File::open(path)
        .and_then(|file| file.take(limit + 1).read_to_end(&mut bytes))
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(refuse(format!(
            "grew past the {limit} bytes such a file may hold while it was read"
        )));
    }
    Ok(bytes)
}

/// The most a part's file (rows or predictions, beside its partial) may hold.
pub const PART_FILE_LIMIT: u64 = 1 << 40;

/// The first 12 hex digits of a digest, as messages name it.
pub fn short_digest(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// The most a scores file an outside program wrote (`evaluate --scores`) may hold.
pub const SCORES_LIMIT: u64 = 8 << 30;

/// The blake3 of `path`, a regular file (after symlinks) of at most `limit` bytes, read as a
/// stream; otherwise an error naming the path and what it is.
pub fn blake3_bounded(path: &Path, limit: u64) -> Result<String, InputError> {
    let io = |source| InputError::Io {
        path: path.to_path_buf(),
        source,
    };
    let refuse = |message: String| InputError::field(path.display().to_string(), message);
    regular_within(path, limit)?;
    let mut hasher = blake3::Hasher::new();
    let file = std::fs::File::open(path).map_err(io)?;
    hasher
        .update_reader(file.take(limit.saturating_add(1)))
        .map_err(io)?;
    if hasher.count() > limit {
        return Err(refuse(format!(
            "grew past the {limit} bytes such a file may hold while it was read"
        )));
    }
    Ok(hasher.finalize().to_hex().to_string())
}

/// Refuses a file named in a record (`field`) whose bytes no longer have the blake3 the stage
/// that read it recorded: scores changed after evaluation would be gated or registered unseen.
pub fn check_unchanged(
    field: &str,
    path: &str,
    blake3: &str,
    limit: u64,
) -> Result<(), InputError> {
    let found = blake3_bounded(Path::new(path), limit)?;
    if found != blake3 {
        return Err(InputError::field(
            field,
            format!(
                "{path}: its blake3 is {found}, but {blake3} was recorded when it was read (the file changed since)"
            ),
        ));
    }
    Ok(())
}

/// `read_bounded` as UTF-8 text.
pub fn read_bounded_text(path: &Path, limit: u64) -> Result<String, InputError> {
    String::from_utf8(read_bounded(path, limit)?).map_err(|err| InputError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, err.utf8_error()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_folders_and_large_files_are_refused_by_name() {
        let err = read_bounded(Path::new("/dev/zero"), JSON_LIMIT).unwrap_err();
        assert_eq!(
            err.to_string(),
            "/dev/zero: is a character device, not a regular file"
        );
        let dir = tempfile::tempdir().unwrap();
        let err = read_bounded(dir.path(), JSON_LIMIT).unwrap_err();
        assert!(
            err.to_string().ends_with("is a folder, not a file"),
            "{err}"
        );
        let file = dir.path().join("big.json");
        std::fs::write(&file, vec![b' '; 100]).unwrap();
        let err = read_bounded(&file, 99).unwrap_err();
        assert!(
            err.to_string().contains("is 100 bytes, more than the 99"),
            "{err}"
        );
        assert_eq!(read_bounded(&file, 100).unwrap().len(), 100);
        let missing = read_bounded(&dir.path().join("none"), 10).unwrap_err();
        assert!(matches!(missing, InputError::Io { .. }), "{missing}");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let err = read_bounded(&fifo, 10).unwrap_err();
            assert!(
                err.to_string().ends_with("is a FIFO, not a regular file"),
                "{err}"
            );
        }
    }
}
