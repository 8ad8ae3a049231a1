//! What a failed run must not leave behind: folders (and empty files) that did not exist when it
//! started. A tool that ends with bad input (exit 2) promises no partial file, but it may have
//! created its output folders before it found the problem; this removes them again, and only
//! them: a folder or file that existed before, or that holds anything, is kept.

use std::path::{Path, PathBuf};

#[derive(Debug, Default)]
pub struct Leftovers {
    /// Paths that did not exist at the start, deepest first.
    missing: Vec<PathBuf>,
}

impl Leftovers {
    /// Notes which of `paths`, and of their ancestors, do not exist yet.
    pub fn note<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Leftovers {
        let mut missing = Vec::new();
        for path in paths {
            for p in path.ancestors() {
                if p.as_os_str().is_empty() || p.symlink_metadata().is_ok() {
                    break;
                }
                if !missing.iter().any(|m: &PathBuf| m == p) {
                    missing.push(p.to_path_buf());
                }
            }
        }
        // Deepest first, so a folder is emptied of what was made in it before it is removed.
        missing.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        Leftovers { missing }
    }

    /// Removes each noted path that now exists and is empty (an empty file or an empty folder).
    pub fn remove_empty(&self) {
        for path in &self.missing {
            match path.symlink_metadata() {
                Ok(m) if m.is_dir() => {
                    let _ = std::fs::remove_dir(path);
                }
                Ok(m) if m.is_file() && m.len() == 0 => {
                    let _ = std::fs::remove_file(path);
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_was_new_and_is_empty_goes() {
        let dir = tempfile::tempdir().unwrap();
        let kept = dir.path().join("kept");
        std::fs::create_dir(&kept).unwrap();
        let out = dir.path().join("runs/a/out");
        let metrics = out.join("metrics.jsonl");
        let full = out.join("full");
        let left = Leftovers::note([
            out.as_path(),
            metrics.as_path(),
            full.as_path(),
            kept.as_path(),
        ]);
        std::fs::create_dir_all(out.join("checkpoints")).unwrap();
        std::fs::write(&metrics, "").unwrap();
        left.remove_empty();
        // `checkpoints` was not noted, so `out` is not empty and stays, with its parents.
        assert!(out.join("checkpoints").exists());
        assert!(!metrics.exists());
        std::fs::remove_dir(out.join("checkpoints")).unwrap();
        std::fs::write(&full, "x").unwrap();
        left.remove_empty();
        assert!(full.exists() && kept.exists());
        std::fs::remove_file(&full).unwrap();
        left.remove_empty();
        assert!(!dir.path().join("runs").exists());
        assert!(kept.exists());
    }
}
