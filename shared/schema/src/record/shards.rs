use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `shards`: where shardify wrote the splits, and what each holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Shards {
    /// The output folder or store prefix holding `index.json`.
    pub dir: String,
    pub index_blake3: String,
    pub splits: BTreeMap<String, ShardSplit>,
    pub unassigned_rows: u64,
    pub bad_values: u64,
    pub seed: u64,
    pub passed: bool,
    pub unsplit: Unsplit,
    pub splits_resolved: BTreeMap<String, ResolvedSplit>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShardSplit {
    pub rows: u64,
    pub shards: u64,
    /// Digest of the split's rows, in `rows_format`.
    pub rows_blake3: String,
    /// `runfn-rows-v2`; absent in records written before formats were recorded: `runfn-rows-v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows_format: Option<String>,
}

/// Rows no split rule took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Unsplit {
    pub rows: u64,
    pub fraction: f64,
    pub max_fraction: f64,
}

/// A rolling split's rule as resolved against the snapshot's latest time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolvedSplit {
    pub rule: String,
    pub resolved: String,
    pub column: String,
    pub after: Option<String>,
    pub until: String,
}
