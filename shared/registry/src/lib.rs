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
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotFound(String),
}

pub type Result<T> = std::result::Result<T, RegistryError>;
