//! Training and scoring on libtorch (through `tch`): the pieces `train` and `evaluate` share.
//!
//! Everything that decides the numbers lives here so that a resumed run, a rerun and a later
//! evaluation apply exactly the same preprocessing, model and random streams.

pub mod adamw;
pub mod alerts;
pub mod async_checkpoint;
mod batch_queue;
pub mod checkpoint;
pub mod config;
pub mod data_parallel;
pub mod device;
pub mod early_stopping;
pub mod external_scores;
pub mod features;
pub mod inputs;
pub mod loader;
pub mod metrics;
pub mod model;
pub mod model_source;
pub mod schedule;
pub mod score;
pub mod seeds;
pub mod shard_pieces;
pub mod shard_reader;
pub mod tensor_file;
pub mod torch_failure;
pub mod trainer;
mod training;
pub mod watchdog;
pub mod weights;

pub use tch;
