//! The sections of the set-up commands: `mf-hash pin` and `demo-data`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::DataDigest;

/// `pin`: the manifest `mf-hash pin` wrote and the snapshot it pinned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pin {
    pub manifest: String,
    /// `<snapshot>@blake3:<hex>`.
    pub snapshot: String,
    /// `<snapshot>.pin.json`.
    pub listing: String,
    pub data_digest: DataDigest,
}

/// `demo_data`: the seeded demo snapshot and the traps planted in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DemoData {
    pub dir: String,
    /// `csv` or `parquet`.
    pub format: String,
    pub rows: u64,
    pub files: Vec<String>,
    pub columns: Vec<String>,
    pub seed: u64,
    pub label_rate: f64,
    /// Each planted trap and where it is.
    pub traps: Value,
}
