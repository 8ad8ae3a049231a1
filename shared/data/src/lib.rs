//! The data plane: snapshots read as typed Arrow batches, split expressions, Parquet shards.

pub mod error;
pub mod infer;
pub mod read;
pub mod shards;
pub mod source;
pub mod split;
pub mod types;

pub use error::DataError;
pub use read::{BadValue, Snapshot, TypedBatch};
pub use types::ColumnType;
