use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::EvalMetrics;

/// `train`: what a training run did and wrote. A run stopped before it could measure anything
/// (a stalled loop) writes [`Train::stopped`]'s shape: `passed`, `preempted` and `reason` only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Train {
    pub passed: bool,
    /// Stopped on request (SIGTERM) after checkpointing the step it was in; a rerun resumes.
    pub preempted: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub weights: Option<String>,
    pub weights_blake3: Option<String>,
    pub steps: u64,
    pub steps_this_run: u64,
    pub seed: u64,
    pub device: String,
    pub threads: i32,
    pub wall_s: f64,
    pub samples_per_s: f64,
    pub data_wait_fraction: f64,
    pub step_time_s: f64,
    /// Mean seconds a checkpoint's save took, start to commit (in the background when async).
    pub ckpt_mean_s: Option<f64>,
    /// Whether checkpoints were written in the background.
    pub ckpt_async: bool,
    /// Mean seconds the loop was held up per checkpoint.
    pub ckpt_blocking_s: Option<f64>,
    pub checkpoints_written: u64,
    pub resumed_from: Option<ResumedFrom>,
    /// metrics.jsonl.
    pub metrics: String,
    pub parameters: i64,
    pub features: TrainFeatures,
    pub final_loss: Option<f64>,
    pub val: Option<EvalMetrics>,
    /// With `keep_best` or early stopping: the kept checkpoint of the highest val AUC.
    pub best: Option<TrainBest>,
    /// What early stopping did (null: `patience` 0).
    pub early_stopping: Option<TrainEarlyStopping>,
    pub shards_index_blake3: String,
    /// The data-parallel job, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distributed: Option<TrainDistributed>,
    /// The live alerts this run raised.
    pub alerts: Vec<TrainAlert>,
}

/// The shape of a `train` section written when the loop could not finish (a stall).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainStopped {
    pub passed: bool,
    pub preempted: bool,
    pub reason: String,
}

/// The `train` section either way: finished (passed or not) or stopped early.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum TrainSection {
    Finished(Box<Train>),
    Stopped(TrainStopped),
}

/// The checkpoint a run resumed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumedFrom {
    pub checkpoint: String,
    pub step: u64,
    pub load_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainBest {
    pub step: u64,
    pub val_auc: f64,
    /// The checkpoint's JSON, which `evaluate --checkpoint best` scores.
    pub checkpoint: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainEarlyStopping {
    pub patience: u64,
    /// The step the run stopped at, before max_steps (null: it ran to max_steps).
    pub stopped_at_step: Option<u64>,
    pub best_step: Option<u64>,
    pub best_val_auc: Option<f64>,
    pub evaluations_since_best: u64,
    /// The step whose weights `train.weights` holds: the best's, else the last step's.
    pub weights_step: u64,
    /// Why the last step's weights were written: no val split, or no val AUC to compare.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What kind of live alert: each has its own threshold in `config.alerts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    ThroughputDrop,
    LossSpike,
    CheckpointAge,
    InputBound,
}

impl AlertKind {
    pub const ALL: [AlertKind; 4] = [
        AlertKind::ThroughputDrop,
        AlertKind::LossSpike,
        AlertKind::CheckpointAge,
        AlertKind::InputBound,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AlertKind::ThroughputDrop => "throughput_drop",
            AlertKind::LossSpike => "loss_spike",
            AlertKind::CheckpointAge => "checkpoint_age",
            AlertKind::InputBound => "input_bound",
        }
    }
}

/// One alert, as it appears in metrics.jsonl, in `train.alerts` and on the command's stdin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainAlert {
    pub kind: AlertKind,
    pub step: u64,
    /// What was measured: samples/s, the loss, seconds since the checkpoint, the wait fraction.
    pub value: f64,
    /// The level it crossed, in the same unit.
    pub threshold: f64,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainDistributed {
    pub world_size: usize,
    pub backend: String,
    pub buckets: usize,
    pub bucket_bytes: usize,
    /// Mean seconds per step in the gradient all-reduce (rank 0's view).
    pub allreduce_s_per_step: f64,
    /// The share of step time spent in it.
    pub allreduce_fraction: f64,
    /// The CPUs rank 0 was pinned to (null: not pinned).
    pub cpus: Option<Vec<usize>>,
}

/// The model's inputs, in the order the weights expect them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrainFeatures {
    pub numeric: Vec<String>,
    pub categorical: Vec<String>,
    pub missing_indicators: Vec<String>,
}
