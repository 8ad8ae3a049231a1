use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `gate`: the candidate against the baseline, every check with its numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    pub passed: bool,
    /// True when there was no baseline and `--no-baseline` allowed that.
    pub no_baseline: bool,
    /// The gates applied (`auc_min_delta`, `max_slice_drop`, `ece_max`, ...), in order.
    pub gates_run: Vec<String>,
    pub checks: Vec<GateCheck>,
    pub reasons: Vec<String>,
    /// `paired` (per-row scores of both models on the same rows) or `point`.
    pub method: String,
    /// `no_regression` or `non_inferiority`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resamples: Option<u64>,
    /// Slices (`column=value`) whose test could not detect a drop of `max_slice_drop`.
    pub underpowered: Vec<String>,
    /// Slices whose metric is undefined there (one class).
    pub undefined: Vec<String>,
    /// Underpowered slices whose point estimate got worse by more than `max_slice_drop`.
    #[serde(default)]
    pub underpowered_drops: Vec<String>,
    /// Where the candidate's seeds spread beyond the serving model's (`overall` or a slice).
    #[serde(default)]
    pub unstable: Vec<String>,
    /// Which error entered which test (paired decisions only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<GateErrors>,
}

/// The sources of error each test of a paired decision used: the drop test the rows' alone
/// (`rows`), the improvement claim the rows' and the training seeds' (`rows+training`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateErrors {
    pub drop: String,
    pub improvement: String,
}

/// One check. The paired test's numbers are there for paired comparisons only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GateCheck {
    pub name: String,
    pub metric: String,
    /// `column=value` for a slice check, null overall.
    pub slice: Option<String>,
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    /// candidate − baseline.
    pub delta: Option<f64>,
    /// The bound the compared value must meet.
    pub limit: Option<f64>,
    /// `>=` or `<=`.
    pub comparison: String,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    #[serde(flatten)]
    pub test: Option<PairedNumbers>,
}

/// A paired test's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PairedNumbers {
    pub status: String,
    pub method: String,
    /// The drop test's standard error: the test rows' alone.
    pub se: Option<f64>,
    pub se_rows: Option<f64>,
    /// The spread over training seeds; it enters only `se_improvement`.
    pub se_training: Option<f64>,
    /// Rows and seeds together: the bar a gain must clear to count as an improvement.
    #[serde(default)]
    pub se_improvement: Option<f64>,
    #[serde(default)]
    pub improved: Option<bool>,
    pub interval: Option<[f64; 2]>,
    pub bound: Option<f64>,
    pub p_value: Option<f64>,
    pub p_adjusted: Option<f64>,
    pub rows: u64,
    pub positives: u64,
    pub detectable_drop: Option<f64>,
    /// For a gated slice: the rows it would need to detect `max_slice_drop` with 80% power.
    #[serde(default)]
    pub rows_needed: Option<u64>,
}
