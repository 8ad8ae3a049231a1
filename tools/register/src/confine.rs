//! Where register may copy a model or scores file from. A record names its files by path, and a
//! record is only text: without a bound, one naming `/etc/shadow` (or a symlink to it, or
//! `../../..`) with that file's blake3 would have register copy it into the registry, where
//! every reader of the registry could read it. So a local file is copied only when its real
//! path (symlinks resolved) lies inside the working folder or a folder the caller named with
//! `--artifacts`. A store URL names a content-addressed object the caller's own store holds:
//! nothing local to confine.

use std::path::{Path, PathBuf};

use runfn_core::InputError;

/// Folders (`:`-separated) that files may also come from, for every registration of a caller
/// (a test harness's temporary folder, a team's shared model store).
pub const ARTIFACTS_ENV: &str = "RUNFN_ARTIFACTS";

/// The folders files may come from: the working folder, each `--artifacts` folder and each of
/// RUNFN_ARTIFACTS (a store URL among them allows nothing more and is skipped).
pub fn roots(artifacts: &[String]) -> Result<Vec<PathBuf>, InputError> {
    let here = std::env::current_dir()
        .and_then(std::fs::canonicalize)
        .map_err(|e| InputError::field("the working folder", e.to_string()))?;
    let mut roots = vec![here];
    let from_env = std::env::var(ARTIFACTS_ENV).unwrap_or_default();
    let named = artifacts.iter().cloned().chain(
        from_env
            .split(':')
            .filter(|f| !f.is_empty())
            .map(String::from),
    );
    for folder in named {
        let folder = folder.as_str();
        if runfn_storage::is_remote(folder) {
            continue;
        }
        let real = std::fs::canonicalize(folder).map_err(|e| {
            InputError::field(
                format!("--artifacts (or {ARTIFACTS_ENV}) {folder}"),
                e.to_string(),
            )
        })?;
        if !real.is_dir() {
            return Err(InputError::field(
                format!("--artifacts (or {ARTIFACTS_ENV}) {folder}"),
                "not a folder",
            ));
        }
        roots.push(real);
    }
    Ok(roots)
}

/// Refuses `path` (the record's `field`) when its real path lies outside every root. A file
/// that does not exist passes here: copying it fails with its own message.
pub fn check(field: &str, path: &str, roots: &[PathBuf]) -> Result<(), InputError> {
    if runfn_storage::is_remote(path) {
        return Ok(());
    }
    let Ok(real) = std::fs::canonicalize(Path::new(path)) else {
        return Ok(());
    };
    if roots.iter().any(|root| real.starts_with(root)) {
        return Ok(());
    }
    let shown = if real.as_os_str() == Path::new(path).as_os_str() {
        String::new()
    } else {
        format!(" (really {})", real.display())
    };
    Err(InputError::field(
        field,
        format!(
            "{path}{shown} lies outside the working folder{}: register copies a file only from where the run wrote it; pass --artifacts DIR to allow the folder that holds it",
            if roots.len() > 1 {
                " and the --artifacts folders"
            } else {
                ""
            }
        ),
    ))
}
