//! Which files make up a snapshot, and in which order.

use std::path::{Path, PathBuf};

use crate::error::DataError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Csv,
    JsonLines,
    Parquet,
}

impl FileFormat {
    fn of(path: &Path) -> Option<FileFormat> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "csv" => Some(FileFormat::Csv),
            "jsonl" | "ndjson" | "json" => Some(FileFormat::JsonLines),
            "parquet" | "pq" => Some(FileFormat::Parquet),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub path: PathBuf,
    pub format: FileFormat,
    pub bytes: u64,
}

/// The data files of a snapshot: the file itself, or every file under the folder in path order.
/// The files are runfn-core's one snapshot walk, which the digest uses too, so what is read is
/// what is digested: names starting with `.` or `_` (markers such as `_SUCCESS`) are skipped at
/// any depth, a FIFO, socket or device is refused, and the order is the relative paths' bytes.
/// Any other file of an unknown kind is an error rather than data silently left out.
pub fn list_snapshot(root: &Path) -> Result<Vec<SourceFile>, DataError> {
    use runfn_core::snapshot_files::{WalkError, snapshot_files};
    let paths: Vec<PathBuf> = snapshot_files(root)
        .map_err(|err| match err {
            WalkError::Io { path, source } => DataError::Io { path, source },
            WalkError::NotRegular { path, kind } => DataError::file(
                &path,
                format!(
                    "is {kind}, not a regular file; a snapshot holds regular files and folders only"
                ),
            ),
            WalkError::NotUtf8(path) => DataError::file(&path, "the name is not UTF-8"),
        })?
        .into_iter()
        .map(|f| f.path)
        .collect();
    let mut files = Vec::new();
    for path in paths {
        let format = FileFormat::of(&path).ok_or_else(|| {
            DataError::file(
                &path,
                "not a snapshot file: expected .csv, .jsonl or .parquet",
            )
        })?;
        let bytes = std::fs::metadata(&path)
            .map_err(|source| DataError::Io {
                path: path.clone(),
                source,
            })?
            .len();
        files.push(SourceFile {
            path,
            format,
            bytes,
        });
    }
    match files.first() {
        None => Err(DataError::file(root, "the snapshot holds no data files")),
        Some(first) => match files.iter().find(|f| f.format != first.format) {
            Some(other) => Err(DataError::file(
                &other.path,
                format!(
                    "the snapshot mixes {:?} and {:?} files; use one format",
                    first.format, other.format
                ),
            )),
            None => Ok(files),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_files_in_order_and_refuses_strangers() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("b")).unwrap();
        std::fs::write(dir.path().join("b/part-1.csv"), "a\n1\n").unwrap();
        std::fs::write(dir.path().join("a.csv"), "a\n1\n").unwrap();
        std::fs::write(dir.path().join("_SUCCESS"), "").unwrap();
        std::fs::write(dir.path().join(".hidden"), "").unwrap();
        let files = list_snapshot(dir.path()).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|f| f.path.strip_prefix(dir.path()).unwrap().to_path_buf())
            .collect();
        assert_eq!(
            names,
            [PathBuf::from("a.csv"), PathBuf::from("b/part-1.csv")]
        );
        std::fs::write(dir.path().join("notes.txt"), "").unwrap();
        let err = list_snapshot(dir.path()).unwrap_err();
        assert!(
            err.to_string().contains("notes.txt: not a snapshot file"),
            "{err}"
        );
    }

    #[test]
    fn special_files_are_refused_and_a_hidden_one_is_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.csv"), "a\n1\n").unwrap();
        let mkfifo = |path: &Path| {
            assert!(
                std::process::Command::new("mkfifo")
                    .arg(path)
                    .status()
                    .unwrap()
                    .success()
            )
        };
        // A marker name is not data: left out like `_SUCCESS`, so nothing ever opens it.
        mkfifo(&dir.path().join("_b.csv"));
        let files = list_snapshot(dir.path()).unwrap();
        assert_eq!(files.len(), 1);
        let fifo = dir.path().join("c.csv");
        mkfifo(&fifo);
        let err = list_snapshot(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("c.csv: is a FIFO, not a regular file"),
            "{err}"
        );
        let err = list_snapshot(&fifo).unwrap_err().to_string();
        assert!(err.contains("is a FIFO"), "{err}");
    }
}
