//! The `leaks` section.

use runfn_manifest::leaks::{LeakDecision, LeakSetting};
use serde::Serialize;
use serde_json::Value;

use crate::location::Loc;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeakReport {
    pub passed: bool,
    pub checks: Vec<LeakCheck>,
    /// Values that did not parse as their column's type (read as null), for the record.
    pub bad_values: u64,
    /// Every twin pair (exact and near duplicates), when `LeakConfig::collect_pairs` asked.
    #[serde(skip)]
    pub pairs: Vec<Pair>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeakCheck {
    pub name: &'static str,
    pub passed: bool,
    pub count: u64,
    /// What `count` is a share of (rows of the later splits, entities, split pairs, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of: Option<u64>,
    /// `count / of`, when `of` is not zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fraction: Option<f64>,
    /// The tolerance applied (`{max_count: 0}` unless `manifest.leaks` says otherwise), or
    /// `{off: true}`.
    pub setting: LeakSetting,
    /// Why the manifest set it so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub examples: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// What chance alone gives (exact twins): judged against it unless the manifest sets a
    /// tolerance of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chance: Option<runfn_schema::record::LeakChance>,
}

impl LeakReport {
    /// The report as the record's `leaks` section.
    pub fn to_record(&self) -> runfn_schema::record::Leaks {
        runfn_schema::record::Leaks {
            passed: self.passed,
            bad_values: self.bad_values,
            checks: self.checks.iter().map(LeakCheck::to_record).collect(),
        }
    }
}

impl LeakCheck {
    fn to_record(&self) -> runfn_schema::record::LeakCheck {
        runfn_schema::record::LeakCheck {
            name: self.name.to_string(),
            passed: self.passed,
            count: self.count,
            of: self.of,
            fraction: self.fraction,
            // Each check's tolerance has its own shape; a setting always serializes.
            setting: serde_json::to_value(&self.setting).unwrap_or(Value::Null),
            reason: self.reason.clone(),
            examples: self.examples.clone(),
            note: self.note.clone(),
            chance: self.chance.clone(),
        }
    }
}

/// Two rows of different splits that are twins: `later` in the split that comes after.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub check: &'static str,
    /// The text column compared (near duplicates).
    pub column: Option<String>,
    pub jaccard: Option<f64>,
    pub earlier: (u8, Loc),
    pub later: (u8, Loc),
}

impl LeakCheck {
    pub fn skipped(name: &'static str, why: impl Into<String>) -> LeakCheck {
        LeakCheck {
            note: Some(format!("skipped: {}", why.into())),
            ..LeakCheck::counted(name, 0, Vec::new())
        }
    }

    pub fn counted(name: &'static str, count: u64, examples: Vec<Value>) -> LeakCheck {
        LeakCheck {
            name,
            passed: count == 0,
            count,
            of: None,
            fraction: None,
            setting: LeakDecision::strict().setting,
            reason: None,
            examples,
            note: None,
            chance: None,
        }
    }

    /// Judges the count by `decision`: within every tolerance given, or off. A check that knows
    /// what chance alone gives (`chance`) and that the manifest left at its default fails only on
    /// evidence beyond chance (its p-value below the stated α).
    pub fn apply(&mut self, decision: &LeakDecision, configured: bool) {
        self.fraction = self
            .of
            .filter(|of| *of > 0)
            .map(|of| self.count as f64 / of as f64);
        self.passed = match &decision.setting {
            LeakSetting::Off { .. } => true,
            LeakSetting::Tolerance {
                max_count,
                max_fraction,
            } => {
                max_count.is_none_or(|max| self.count <= max)
                    && max_fraction.is_none_or(|max| self.fraction.unwrap_or(0.0) <= max)
            }
        };
        self.setting = decision.setting.clone();
        self.reason = decision.reason.clone();
        if let (Some(chance), false) = (&self.chance, configured) {
            self.passed = chance.p_value >= chance.alpha;
        }
    }
}

impl LeakReport {
    pub fn new(checks: Vec<LeakCheck>, bad_values: u64, pairs: Vec<Pair>) -> LeakReport {
        LeakReport {
            passed: checks.iter().all(|c| c.passed),
            checks,
            bad_values,
            pairs,
        }
    }
}
