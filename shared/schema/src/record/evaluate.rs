use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Metrics of scores against labels: the test split's, a slice's, or the val split's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalMetrics {
    /// Null when the rows hold one class only; `auc_note` then says why.
    pub auc: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auc_note: Option<String>,
    pub logloss: f64,
    pub brier: f64,
    pub ece: f64,
    pub accuracy: f64,
    /// Share of rows scored at or above 0.5.
    pub positive_rate: f64,
    /// Share of rows whose label is 1.
    pub label_rate: f64,
    pub mean_score: f64,
    pub rows: u64,
    /// Metric → 95% bootstrap interval, with `--bootstrap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<BTreeMap<String, [f64; 2]>>,
}

/// `evaluate` (and `baseline`): a model scored on the frozen test split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Evaluate {
    pub passed: bool,
    pub model: String,
    /// `NAME@ALIAS` or `NAME@VERSION` when the model came from the registry.
    pub registered_as: Option<String>,
    pub weights_blake3: String,
    pub model_manifest_hash: String,
    pub split: String,
    pub shards_index_blake3: String,
    /// `runfn-rows-v1` digest of the rows scored.
    pub rows_blake3: String,
    pub overall: EvalMetrics,
    /// Slice column → value → metrics.
    pub slices: BTreeMap<String, BTreeMap<String, EvalMetrics>>,
    pub row_scores: RowScoresRef,
    /// Feature → the scored rows whose category the model never saw.
    pub unseen: BTreeMap<String, Unseen>,
    /// When `leaks` counts twins of training rows among the scored ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contamination: Option<Contamination>,
    /// The most confident wrong predictions (at most 10), with what the model saw; absent when
    /// there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mistakes: Vec<Mistake>,
}

/// A wrong prediction the model was sure of: a positive scored near 0, a negative near 1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mistake {
    /// The row's position in the scored split (as in the row scores file).
    pub row: u64,
    /// Its `manifest.eval.row_key` value, when the manifest declares one.
    pub key: Option<String>,
    pub label: bool,
    pub score: f64,
    /// Each feature's value in the row, as text (`null` for null).
    pub values: BTreeMap<String, String>,
}

/// The per-row scores file (`runfn-row-scores-v1`), which the paired gate reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RowScoresRef {
    pub path: String,
    pub blake3: String,
    pub rows: u64,
    /// The column that keys the rows.
    pub key: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unseen {
    pub rows: u64,
    pub fraction: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Contamination {
    pub twin_rows: u64,
    pub twins_in: String,
    pub overall_without_twins: Option<EvalMetrics>,
    pub delta_auc: Option<f64>,
}

/// `predict`: a snapshot scored with a model, and what the rows looked like to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Predict {
    pub passed: bool,
    /// The model file scored with.
    pub model: String,
    /// `NAME@VERSION` when the registry resolved it.
    pub registered_as: Option<String>,
    pub weights_blake3: String,
    pub model_manifest_hash: String,
    /// The snapshot scored, as named.
    pub snapshot: String,
    pub rows: u64,
    /// The predictions file (`runfn-predictions-v1` Parquet).
    pub out: String,
    pub out_blake3: String,
    /// The key columns carried beside each score.
    pub keys: Vec<String>,
    /// Categorical feature → the rows whose value the model never saw (scored as unknown).
    pub unseen: BTreeMap<String, Unseen>,
    /// Feature → the rows where it is null (imputed as in training).
    pub missing: BTreeMap<String, Unseen>,
}
