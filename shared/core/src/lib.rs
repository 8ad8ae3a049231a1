//! The contract every runfn tool shares.
//!
//! A tool reads one JSON object (the run record), adds its own section under its own key, appends
//! one entry to `timings`, and writes the record to stdout. Exit codes, error lines, atomic file
//! writes and canonical JSON live here once so that every tool behaves the same way.

pub mod allocator;
pub mod atomic;
pub mod canonical;
pub mod cli;
pub mod direct_write;
pub mod environment;
pub mod error;
pub mod exit;
pub mod generate;
pub mod leftovers;
pub mod parts;
pub mod paths;
pub mod record;
pub mod retryable;
pub mod side_file;
pub mod snapshot_files;
pub mod stop;
pub mod timings;

pub use error::InputError;
pub use exit::Exit;
pub use record::Record;
pub use retryable::{Cause, EnvironmentFailed};
