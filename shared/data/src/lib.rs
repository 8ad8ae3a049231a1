//! The data plane: snapshots read as typed Arrow batches, split expressions, Parquet shards.

mod calendar_text;
mod csv_batches;
mod csv_fields;
pub mod error;
pub mod hashing_reader;
pub mod infer;
pub mod label;
pub mod partitioned;
pub mod read;
pub mod record;
pub mod rolling;
pub mod row_scores;
mod rule_tokens;
pub mod shards;
pub mod short_hash;
pub mod sorted_runs;
pub mod source;
pub mod spec;
pub mod spill_sort;
pub mod split;
pub mod types;
pub mod unsplit;
pub mod values;

pub use error::DataError;
pub use read::{BadValue, Snapshot, TypedBatch};
pub use types::ColumnType;
