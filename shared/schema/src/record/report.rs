use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `report`: where a run's time went, predicted vs measured, and the nights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub records: u64,
    pub runs: u64,
    pub stages: Vec<ReportStage>,
    /// `{stage, share}` or null.
    pub bottleneck: Option<Value>,
    pub total_wall_s: f64,
    /// `{total, per_run, currency}` or null.
    pub cost: Option<Value>,
    pub predictions: Vec<ReportPair>,
    pub flagged: Vec<String>,
    pub curves: Vec<Value>,
    /// Each night the inputs hold: its verdict, records and what was left out.
    pub nights: Vec<Value>,
    pub html: Option<String>,
    pub plots: Vec<String>,
    pub tensorboard: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Quartiles {
    pub p25: f64,
    pub median: f64,
    pub p75: f64,
    pub total: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportStage {
    pub stage: String,
    pub runs: u64,
    pub wall_s: Quartiles,
    pub cpu_s: Quartiles,
    pub max_rss_bytes: u64,
    pub share: f64,
    pub cost: Option<f64>,
}

/// A prediction (the checkpoint interval's overhead, say) beside what was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReportPair {
    pub name: String,
    pub kind: String,
    pub of: String,
    pub predicted: f64,
    pub measured: f64,
    pub unit: String,
    pub gap: Option<f64>,
    pub flagged: bool,
    pub source: String,
}
