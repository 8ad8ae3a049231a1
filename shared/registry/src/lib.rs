//! The model registry: `DIR/index.sqlite` (SQLite in WAL mode) lists entries and aliases;
//! `DIR/blobs/ab/<blake3>` holds the bytes they refer to (weights, evaluation, manifest, profile,
//! the whole run record), written atomically and read-only.
//!
//! A registration writes its blobs first, then inserts the entry (and moves an alias) in one
//! IMMEDIATE transaction that also assigns the version, so concurrent registrations get distinct
//! consecutive versions and a process killed at any point leaves either no entry or a whole one.
//! Blobs of a registration that never committed are unreferenced, never dangling.

mod blobs;
mod names;
mod store;

pub use blobs::{BlobStore, Blobs};
pub use names::{ModelRef, validate_name};
pub use store::{AliasMove, Entry, NewEntry, Problem, Registration, Registry};

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{path}: {source}")]
    Io {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Sql {
        path: std::path::PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// SQLite's failure that is the machine's, not the registry's: a full disk, an I/O error,
    /// memory, a database still locked after the wait. Exit 4: a retry may pass.
    #[error("{path}: {message}")]
    SqlEnvironment {
        path: std::path::PathBuf,
        message: String,
        #[source]
        cause: runfn_core::retryable::EnvironmentFailed,
    },
    /// The blob store's error, kept whole: an unreachable store is the environment's.
    #[error(transparent)]
    Store(#[from] runfn_storage::StorageError),
    /// A bounded read's or an atomic write's refusal, kept whole (a full disk stays one).
    #[error(transparent)]
    Input(#[from] runfn_core::InputError),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
}

pub type Result<T> = std::result::Result<T, RegistryError>;

impl RegistryError {
    /// An error of the index at `path`, told apart by SQLite's result code.
    pub fn sql(path: &std::path::Path, source: rusqlite::Error) -> RegistryError {
        use runfn_core::retryable::{Cause, EnvironmentFailed};
        use rusqlite::ErrorCode as Code;
        let cause = match &source {
            rusqlite::Error::SqliteFailure(failure, _) => match failure.code {
                Code::DiskFull => Some(Cause::DiskFull),
                Code::SystemIoFailure => Some(Cause::DeviceError),
                Code::OutOfMemory => Some(Cause::OutOfMemory),
                // Still busy after the connection's busy timeout: another writer held it.
                Code::DatabaseBusy | Code::DatabaseLocked => Some(Cause::TimedOut),
                _ => None,
            },
            _ => None,
        };
        match cause {
            Some(cause) => RegistryError::SqlEnvironment {
                path: path.to_path_buf(),
                message: source.to_string(),
                cause: EnvironmentFailed::new(cause),
            },
            None => RegistryError::Sql {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use runfn_core::retryable::{Cause, cause_of_error};
    use rusqlite::ffi;

    use super::*;

    fn cause(error: &RegistryError) -> Option<Cause> {
        let mut next: Option<&(dyn Error + 'static)> = Some(error);
        while let Some(error) = next {
            if let Some(cause) = cause_of_error(error) {
                return Some(cause);
            }
            next = error.source();
        }
        None
    }

    /// A full disk, an I/O error or a lock still held after the wait is exit 4 (a retry may
    /// pass); a constraint or a damaged file is the registry's own problem, exit 2.
    #[test]
    fn sqlite_failures_of_the_machine_are_the_environments() {
        let failure = |code| {
            RegistryError::sql(
                std::path::Path::new("registry/index.sqlite"),
                rusqlite::Error::SqliteFailure(ffi::Error::new(code), None),
            )
        };
        assert_eq!(cause(&failure(ffi::SQLITE_FULL)), Some(Cause::DiskFull));
        assert_eq!(cause(&failure(ffi::SQLITE_IOERR)), Some(Cause::DeviceError));
        assert_eq!(cause(&failure(ffi::SQLITE_BUSY)), Some(Cause::TimedOut));
        assert_eq!(cause(&failure(ffi::SQLITE_LOCKED)), Some(Cause::TimedOut));
        assert_eq!(cause(&failure(ffi::SQLITE_CONSTRAINT)), None);
        assert_eq!(cause(&failure(ffi::SQLITE_CORRUPT)), None);
        let store = RegistryError::from(runfn_storage::StorageError::io(
            "s3://bucket/blobs",
            std::path::Path::new("cache/ab"),
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        ));
        assert_eq!(cause(&store), Some(Cause::Unreachable));
    }
}
