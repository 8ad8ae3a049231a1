//! One check of a profile (alone, against the previous profile, or over its history), as
//! `validate.checks` lists it. Its own module so that the comparison and the explanations of
//! accepted drifts both build on it, neither on the other.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub column: Option<String>,
    pub value: Option<f64>,
    pub threshold: Option<f64>,
    /// What sampling alone could make the value at these sample sizes (exceeded with the
    /// check's share of `alpha`): the check fails only above both this and the threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
    pub passed: bool,
    /// Whether this check failing fails the run: false on a column `validate.fail_on` leaves
    /// out, whose failures are reported only.
    pub fails_run: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The reason given in --explained, when this failure was explained.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explained: Option<String>,
    /// Until when that explanation holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explained_until: Option<String>,
    /// The same check between earlier windows, when the snapshot was cut into windows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<runfn_schema::record::CheckHistory>,
}

impl Check {
    /// The check as `validate.checks` lists it.
    pub fn to_record(&self) -> runfn_schema::record::ValidateCheck {
        runfn_schema::record::ValidateCheck {
            name: self.name.to_string(),
            column: self.column.clone(),
            value: self.value,
            threshold: self.threshold,
            noise: self.noise,
            passed: self.passed,
            fails_run: self.fails_run,
            detail: self.detail.clone(),
            explained: self.explained.clone(),
            explained_until: self.explained_until.clone(),
            history: self.history.clone(),
        }
    }
}
