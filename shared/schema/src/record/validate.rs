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
    /// With `validate.window`: which windows were compared, and how the limits were set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
}

/// How drift was judged when the snapshot was cut into windows of `validate.window`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// `validate.window`, as written.
    pub window: String,
    /// The newest window, `(start, end]`, compared with `reference`.
    pub current: WindowBounds,
    pub reference: WindowBounds,
    /// Earlier window pairs whose distances make each check's history.
    pub history_windows: usize,
    /// `history`: each drift check judged against its own history as well as against sampling
    /// noise; `sampling`: the history is too short (fewer than `min_history` pairs), so only
    /// sampling noise and the thresholds judge, as without a window.
    pub method: String,
    pub min_history: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WindowBounds {
    pub start: String,
    pub end: String,
    pub rows: u64,
}

/// A check's history: the same distance between earlier windows and their references.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckHistory {
    pub windows: usize,
    pub mean: f64,
    pub sd: f64,
    /// The chance an ordinary window reaches this value (one-sided, Student-t prediction).
    pub p: f64,
    /// `p` adjusted over every drift check of the run (Holm); the check fails only where it is
    /// at most `validate.alpha`.
    pub p_holm: f64,
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
    /// Until when the explanation holds (`until` of the explanation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explained_until: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<CheckHistory>,
}
