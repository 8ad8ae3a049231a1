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
/// Hidden files and files starting with `_` (markers such as `_SUCCESS`) are skipped; any other
/// file of an unknown kind is an error rather than data silently left out. A FIFO, socket or
/// device anywhere under the root is an error too (reading one can block forever), the same rule
/// as the snapshot digest's (`runfn_manifest::digest`), so what is read is what is digested.
pub fn list_snapshot(root: &Path) -> Result<Vec<SourceFile>, DataError> {
    let metadata = std::fs::metadata(root).map_err(|source| DataError::Io {
        path: root.into(),
        source,
    })?;
    refuse_special(root, &metadata)?;
    let mut paths = Vec::new();
    if metadata.is_dir() {
        collect(root, &mut paths)?;
        paths.sort();
    } else {
        paths.push(root.to_path_buf());
    }
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

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), DataError> {
    let entries = std::fs::read_dir(dir).map_err(|source| DataError::Io {
        path: dir.into(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| DataError::Io {
            path: dir.into(),
            source,
        })?;
        let path = entry.path();
        let metadata = std::fs::metadata(&path).map_err(|source| DataError::Io {
            path: path.clone(),
            source,
        })?;
        refuse_special(&path, &metadata)?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name.starts_with('_') {
            continue;
        }
        if metadata.is_dir() {
            collect(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

fn refuse_special(path: &Path, metadata: &std::fs::Metadata) -> Result<(), DataError> {
    match runfn_core::paths::special_kind(&metadata.file_type()) {
        Some(kind) => Err(DataError::file(
            path,
            format!(
                "is {kind}, not a regular file; a snapshot holds regular files and folders only"
            ),
        )),
        None => Ok(()),
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
    fn special_files_are_refused_even_hidden() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.csv"), "a\n1\n").unwrap();
        let fifo = dir.path().join("_b.csv");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let err = list_snapshot(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("_b.csv: is a FIFO, not a regular file"),
            "{err}"
        );
        let err = list_snapshot(&fifo).unwrap_err().to_string();
        assert!(err.contains("is a FIFO"), "{err}");
    }
}
