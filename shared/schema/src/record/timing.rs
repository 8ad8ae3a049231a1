use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One entry of `timings`: one tool's run, what it cost and what it ran on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Timing {
    pub tool: String,
    pub started_at: String,
    pub wall_s: f64,
    pub cpu_s: f64,
    pub max_rss_bytes: u64,
    /// The `--memory` the tool ran within (what did not fit went to temporary files); its
    /// peak is `max_rss_bytes`. Absent for tools without a budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_budget_bytes: Option<u64>,
    pub environment: Environment,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// `baseline` or `candidate`: the comparison's work, mapped apart.
    #[serde(rename = "for", default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    pub cpu_model: String,
    pub cores_online: u64,
    pub cores_available: u64,
    pub memory_bytes: u64,
    pub kernel: String,
    pub os: String,
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_used: Option<u64>,
    /// Absent but in train's entries; null there when the ranks were not pinned.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub pinned_cpus: Option<Option<Vec<u64>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub libtorch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpus: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Gpu>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub name: String,
    pub memory_bytes: u64,
    pub peak_memory_used_bytes: u64,
}

/// What a stage cost at the manifest's `cost` rates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cost {
    pub cpu: f64,
    pub gpu: f64,
    pub total: f64,
    pub currency: Option<String>,
}

/// A field that may be absent (`None`) or present and null (`Some(None)`): serde reads a null
/// into the outer `None` unless told the field was there.
fn present<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Some)
}
