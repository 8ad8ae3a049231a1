//! The `leaks` section.

use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeakReport {
    pub passed: bool,
    pub checks: Vec<LeakCheck>,
    /// Values that did not parse as their column's type (read as null), for the record.
    pub bad_values: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeakCheck {
    pub name: &'static str,
    pub passed: bool,
    pub count: u64,
    pub examples: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl LeakCheck {
    pub fn skipped(name: &'static str, why: impl Into<String>) -> LeakCheck {
        LeakCheck {
            name,
            passed: true,
            count: 0,
            examples: Vec::new(),
            note: Some(format!("skipped: {}", why.into())),
        }
    }

    pub fn counted(name: &'static str, count: u64, examples: Vec<Value>) -> LeakCheck {
        LeakCheck {
            name,
            passed: count == 0,
            count,
            examples,
            note: None,
        }
    }
}

impl LeakReport {
    pub fn new(checks: Vec<LeakCheck>, bad_values: u64) -> LeakReport {
        LeakReport {
            passed: checks.iter().all(|c| c.passed),
            checks,
            bad_values,
        }
    }
}
