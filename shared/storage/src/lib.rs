//! Object storage wherever runfn takes a path: `s3://bucket/prefix` (and S3-compatible servers
//! through `AWS_ENDPOINT_URL`), `gs://bucket/prefix` and `az://container/prefix`.
//!
//! The tools keep working on local files; this crate moves those files to and from a store:
//! - reads are **staged**: an object, or every object under a prefix, is downloaded (streamed,
//!   in bounded memory) into a cache folder and reused while its size and ETag are unchanged;
//! - a folder is **published** with its commit mark last (a shard set's `index.json`, a
//!   checkpoint's JSON) and older marks removed first, so a reader sees a whole set or none;
//! - large files go up as multipart uploads of `RUNFN_STORE_PART_MB` (16) MiB parts.
//!
//! Credentials come from the standard environment variables (`AWS_ACCESS_KEY_ID`, …) or the
//! AWS profile files; no secret is ever part of a message.

mod cache;
mod credentials;
mod error;
mod mirror;
mod remote;
mod transfer;

pub use cache::{display, local_path, stage_prefix, stage_set, staged_path, work_dir};
pub use error::StorageError;
pub use mirror::{Transferred, pull, push};
pub use remote::{Remote, is_remote};
pub use transfer::Entry;
