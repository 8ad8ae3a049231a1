use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `leaks`: what leak-check found across the splits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Leaks {
    pub passed: bool,
    pub bad_values: u64,
    pub checks: Vec<LeakCheck>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeakCheck {
    pub name: String,
    pub passed: bool,
    pub count: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
    /// The check's settings as applied (each check has its own).
    pub setting: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A few of the rows or pairs found, each check in its own shape.
    pub examples: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Exact twins: what chance alone gives, and the evidence beyond it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chance: Option<LeakChance>,
}

/// The twins chance alone gives a later split: the earliest split's own rate of rows with a twin
/// among its other rows (`rate`, leave-one-out), brought to each later split's reference size,
/// against which the observed count is tested (one-sided binomial, Bonferroni over the later
/// splits).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeakChance {
    /// The split the chance rate was measured on.
    pub reference: String,
    /// Its rows with a twin among its other rows, as a share.
    pub rate: f64,
    /// The twins expected by chance in the later splits.
    pub expected: f64,
    pub observed: u64,
    /// The smallest Bonferroni-adjusted one-sided p-value over the later splits.
    pub p_value: f64,
    pub alpha: f64,
    /// How far the rate moves between stretches of the reference (ten runs of its rows in file
    /// order) beyond sampling, as a standard deviation; null when too few rows to tell. Where
    /// it moves, a later split's excess is judged against that movement as well.
    #[serde(default)]
    pub movement: Option<f64>,
}
