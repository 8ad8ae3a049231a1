use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `validate`: the snapshot's profile and its drift checks against the previous one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Validate {
    pub passed: bool,
    /// The profile's summary (the full, mergeable profile is `profile_file`).
    pub profile: Value,
    pub profile_file: Option<String>,
    pub previous: Option<String>,
    pub checks: Vec<ValidateCheck>,
    /// With `--previous-model`: the served model's profile compared against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_model: Option<PreviousModel>,
    /// Why no drift was checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_previous: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviousModel {
    pub reference: String,
    /// Null when nothing serves yet.
    pub version: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ValidateCheck {
    pub name: String,
    pub column: Option<String>,
    pub value: Option<f64>,
    pub threshold: Option<f64>,
    /// What sampling alone reaches at these sizes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
    pub passed: bool,
    /// False for a column `validate.fail_on` leaves out: reported only.
    pub fails_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained: Option<String>,
}
