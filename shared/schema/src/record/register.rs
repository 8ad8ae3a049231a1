use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `register`: the entry the model got in the registry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Register {
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub registry: String,
    pub name: String,
    pub version: i64,
    pub weights_blake3: String,
    pub weights: String,
    pub manifest_hash: String,
    /// The alias moved to this version, if any.
    pub promoted: Option<String>,
    pub ungated_reason: Option<String>,
    /// The same record was registered before (a retried night): no new version.
    pub already_registered: bool,
}

/// The shape of a `register` section when the record could not be registered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterRefused {
    pub passed: bool,
    pub reason: String,
}

/// The `register` section either way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RegisterSection {
    Registered(Register),
    Refused(RegisterRefused),
}
