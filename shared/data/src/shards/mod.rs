//! Parquet shards: each split written as `OUT/<split>/part-NNNNN.parquet`, rows shuffled by a
//! permutation derived from the seed, with `OUT/index.json` written last.

mod cardinality;
mod column_digest;
mod column_parallel;
mod file_read;
mod index;
mod keys;
mod out_lock;
mod parted;
mod remote;
mod row_bytes;
mod rows;
mod runs;
mod shuffle;
mod spill;
mod string_gather;
mod value_text;
mod writer;

pub use file_read::ShardProgress;
pub use index::{INDEX_FORMAT, INDEX_NAME, ShardEntry, ShardIndex, SplitEntry, verify_shards};
pub use out_lock::LOCK_NAME;
pub use parted::{Mapped, PART_TOOL, REDUCE_TOOL, merge as merge_parts, reduce, shardify_part};
pub use remote::{local_shards, publish};
pub use rows::{ROWS_FORMAT, ROWS_FORMAT_V1, RowsDigest, split_rows_digest};
pub use shuffle::{ShardOptions, shardify};

#[cfg(test)]
mod tests;
