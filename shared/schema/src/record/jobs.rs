//! The sections of the two planning tools: ckpt-interval and noise-floor.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `ckpt_interval`: the optimal checkpoint interval (Young, Daly).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CkptInterval {
    pub young_s: f64,
    pub daly_s: f64,
    pub interval_s: f64,
    pub interval_steps: Option<u64>,
    pub overhead_fraction: f64,
    pub expected_loss_per_failure_s: f64,
    pub expected_waste_fraction: f64,
    pub method: String,
    pub inputs: CkptInputs,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CkptInputs {
    pub cost_s: f64,
    pub mtbf_s: f64,
    pub step_time_s: Option<f64>,
    pub restart_s: f64,
    pub blocking_s: Option<f64>,
    pub mtbf_source: String,
    /// `--cost`, `record: train.ckpt_mean_s` or `measured: <file>`.
    pub cost_source: String,
}

/// `noise_floor`: the spread of a metric over seeded reruns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoiseFloor {
    pub metric: String,
    pub n: usize,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub range: f64,
    pub floor: f64,
    pub method: String,
    pub values: Vec<f64>,
    /// Slice column → slice value → the metric's spread on that slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slices: Option<BTreeMap<String, BTreeMap<String, SliceSpread>>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SliceSpread {
    pub n: usize,
    pub mean: f64,
    pub std: f64,
    pub min: f64,
    pub max: f64,
    pub range: f64,
    pub floor: f64,
    /// The metric on this slice for each seed, in the order the records came.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<f64>,
}
