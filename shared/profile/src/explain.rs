//! Drifts a person has looked at and accepted, each within a bound: up to the largest value it
//! explains, and until a date. A larger drift, or the same drift after the date, fails again,
//! so an explanation given for last month's seasonal move cannot wave through next month's
//! unit change or an outage of the feed.

use serde::{Deserialize, Serialize};

use crate::check::Check;

/// One accepted drift, as `--explained` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Explanation {
    /// The column; none explains the check on every column (or a check without one).
    pub column: Option<String>,
    pub check: String,
    pub reason: String,
    /// The largest value of the check this explains.
    pub max_value: f64,
    /// The last day (YYYY-MM-DD) it holds; compared with the snapshot's newest date when the
    /// data has a time column, else with the day of the run.
    pub until: String,
}

/// What `--explained` must hold, for error messages.
pub const EXPLANATION_FORM: &str = "[{\"column\": \"temp\", \"check\": \"numeric_drift\", \
     \"reason\": \"spring\", \"max_value\": 0.6, \"until\": \"2026-06-30\"}]";

impl Explanation {
    /// Why this explanation cannot be used at all: a bound that is no bound, a date that is not
    /// one.
    pub fn problem(&self) -> Option<String> {
        if !(self.max_value.is_finite() && self.max_value >= 0.0) {
            return Some(format!(
                "max_value {} is not a bound (a finite number, 0 or more)",
                self.max_value
            ));
        }
        let date = self.until.as_bytes();
        let digits = |range: std::ops::Range<usize>| date[range].iter().all(u8::is_ascii_digit);
        let valid = date.len() == 10
            && digits(0..4)
            && date[4] == b'-'
            && digits(5..7)
            && date[7] == b'-'
            && digits(8..10)
            && (1..=12).contains(&self.until[5..7].parse::<u32>().unwrap_or(0))
            && (1..=31).contains(&self.until[8..10].parse::<u32>().unwrap_or(0));
        (!valid).then(|| format!("until `{}` is not a date (YYYY-MM-DD)", self.until))
    }

    fn names(&self, check: &Check) -> bool {
        self.check == check.name && (self.column.is_none() || self.column == check.column)
    }
}

/// Marks each failed check an explanation in force covers; a failed check that an explanation
/// names but does not cover says why in its detail.
pub fn apply(checks: &mut [Check], explanations: &[Explanation], today: &str) {
    for check in checks.iter_mut().filter(|c| !c.passed) {
        let value = check.value.unwrap_or(f64::INFINITY);
        let mut refused = Vec::new();
        for explanation in explanations.iter().filter(|e| e.names(check)) {
            // ISO dates compare as text.
            if explanation.until.as_str() < today {
                refused.push(format!(
                    "the explanation \"{}\" expired on {}",
                    explanation.reason, explanation.until
                ));
            } else if value > explanation.max_value {
                refused.push(format!(
                    "the explanation \"{}\" covers up to {}",
                    explanation.reason, explanation.max_value
                ));
            } else {
                check.explained = Some(explanation.reason.clone());
                check.explained_until = Some(explanation.until.clone());
                refused.clear();
                break;
            }
        }
        if !refused.is_empty() {
            let why = refused.join("; ");
            check.detail = Some(match check.detail.take() {
                Some(detail) => format!("{detail}; {why}"),
                None => why,
            });
        }
    }
}
