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
}
