//! A training job: what the loop is given (`TrainJob`), how it talks to the tool (`Reporter`),
//! the faults a test may inject, and what it returns (the record's `train` section). The loop's
//! parts build on these; `crate::trainer` runs a job and re-exports them for the tool.

use std::path::PathBuf;
use std::time::Duration;

use runfn_data::shards::ShardIndex;
use runfn_dist::ProcessGroup;
use tch::Device;

use crate::config::TrainConfig;
use crate::features::Reserved;
pub use crate::watchdog::StallHandler;

/// The record's `train` section and its parts: one definition, in runfn-schema.
pub use runfn_schema::record::{
    ResumedFrom, Train as TrainReport, TrainBest as BestReport,
    TrainDistributed as DistributedReport, TrainFeatures,
};

#[derive(Debug)]
pub struct TrainJob {
    pub config: TrainConfig,
    pub manifest_hash: String,
    pub run_id: Option<String>,
    pub seed: u64,
    /// The local folder written (a work folder when the run's output is in a store).
    pub out: PathBuf,
    /// Where `out/checkpoints` is published as each checkpoint is written, and fetched from
    /// before a resume: the store copy of the run's output (`--out s3://…`).
    pub store: Option<runfn_storage::Remote>,
    pub shards_dir: PathBuf,
    pub index: ShardIndex,
    pub index_blake3: String,
    pub reserved: Reserved,
    pub device: Device,
    pub bf16: bool,
    pub fresh: bool,
    /// Also checkpoint when this many seconds passed since the last one (from `ckpt_interval`).
    pub ckpt_every_s: Option<f64>,
    /// Write checkpoints in the background from a copy in host memory (see
    /// [`crate::async_checkpoint`]); off, the loop waits for each whole save.
    pub ckpt_async: bool,
    pub loader_prefetch: usize,
    pub loader_lookahead: usize,
    pub loader_cache_bytes: usize,
    /// libtorch intra-op threads (None: the checkpoint's on resume, else libtorch's default).
    pub threads: Option<i32>,
    /// The process group when this is one rank of a data-parallel job.
    pub group: Option<ProcessGroup>,
    /// The cores this rank may use: the machine's, or its share when ranks share the machine.
    pub cores: usize,
    /// The CPUs this rank was pinned to, when it was.
    pub pinned_cpus: Option<Vec<usize>>,
    /// Gradient all-reduce bucket size.
    pub bucket_bytes: usize,
    /// Faults a test injects (none in a real run).
    pub faults: Faults,
}

/// How the loop talks to the tool: messages and warnings for stderr.
pub trait Reporter {
    fn info(&self, message: String);
    fn warn(&self, message: String);
    /// A live alert: `train: alert: ...`, silenced by `-q` like every human message (the
    /// metrics line, the record and the alert command still carry it).
    fn alert(&self, message: String) {
        self.info(format!("alert: {message}"));
    }
}

/// Faults a test injects into the loop. A real run has none: only the `train-with-faults`
/// binary, built with the `fault-injection` feature that only the tests enable, fills them in
/// (from `RUNFN_TEST_*` variables); `train` never reads those variables.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// The loop stops making progress for good at this step (the stall watchdog's tests).
    pub hang_at: Option<u64>,
    /// From this step on, every batch arrives this late, as from a throttled input (the
    /// throughput and input-bound alerts).
    pub slow_input: Option<(u64, Duration)>,
    /// This step trains on its batch's labels flipped (the loss-spike alert).
    pub flip_labels_at: Option<u64>,
    /// Every background checkpoint write starts this late, as on a slow disk (exits that must
    /// wait for it).
    pub slow_ckpt_write: Duration,
    /// The loop panics at this step (a crash must end in one line and exit 4).
    pub panic_at: Option<u64>,
    /// Not a fault: shards are read in pieces of at most this many rows instead of the batch's
    /// default (2^17 and up), so the tests' small shards are cut into pieces too.
    pub piece_rows: Option<u64>,
}

/// Of the `cores` a rank has, one is left to its input pipeline (decoding, batching, dropout
/// masks): on a small machine an intra-op thread competing with it costs more than it gains, and
/// libgomp's spinning workers make that contention worse.
pub fn default_threads(cores: usize) -> i32 {
    cores.saturating_sub(1).max(1) as i32
}
