//! Checks of a profile, alone and against the previous snapshot's profile.

use std::collections::BTreeMap;

use runfn_data::ColumnType;
use runfn_stats::drift::{
    jensen_shannon_numeric, l_infinity, new_category_share, out_of_range_share,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::column::ColumnProfile;
use crate::profile::Profile;

/// Bins for the numeric drift: the previous profile's deciles, plus both open ends.
const DRIFT_BINS: usize = 10;

/// Limits of each check; `manifest.validate` overrides any of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// Largest rise of a column's null rate (absolute).
    pub null_rate_rise: f64,
    /// Largest share of values outside the previous [min, max].
    pub out_of_range: f64,
    /// Largest share of rows in categories the previous snapshot did not have.
    pub new_categories: f64,
    /// Largest Jensen–Shannon divergence (base 2) of a numeric column.
    pub numeric_drift: f64,
    /// Largest change of any category's share (L-infinity).
    pub categorical_drift: f64,
    /// Largest relative change of the row count.
    pub row_count_change: f64,
    /// Largest change of the label rate (absolute).
    pub label_rate_shift: f64,
    /// Largest share of values that do not parse as their column's type.
    pub bad_value_rate: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            null_rate_rise: 0.05,
            out_of_range: 0.01,
            new_categories: 0.01,
            numeric_drift: 0.01,
            categorical_drift: 0.05,
            row_count_change: 0.5,
            label_rate_shift: 0.03,
            bad_value_rate: 0.001,
        }
    }
}

impl Thresholds {
    /// From `manifest.validate` (absent: the defaults). Unknown keys are errors.
    pub fn from_manifest(value: Option<&Value>) -> Result<Thresholds, String> {
        match value {
            None | Some(Value::Null) => Ok(Thresholds::default()),
            Some(value) => {
                serde_json::from_value(value.clone()).map_err(|e| format!("manifest.validate: {e}"))
            }
        }
    }
}

/// A drift a person has looked at and accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Explanation {
    pub column: Option<String>,
    pub check: String,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub column: Option<String>,
    pub value: Option<f64>,
    pub threshold: Option<f64>,
    pub passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The reason given in --explained, when this failure was explained.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explained: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub passed: bool,
    pub checks: Vec<Check>,
}

/// Columns whose checks would only measure that time moves on or ids are unique.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    pub label: Option<String>,
    /// Entity and free-text columns: every value is new by design.
    pub identifiers: Vec<String>,
}

pub fn compare(
    previous: Option<&Profile>,
    current: &Profile,
    thresholds: &Thresholds,
    roles: &Roles,
    explanations: &[Explanation],
) -> Comparison {
    let mut checks = Vec::new();
    standalone_checks(current, thresholds, roles, &mut checks);
    if let Some(previous) = previous {
        drift_checks(previous, current, thresholds, roles, &mut checks);
    }
    for check in checks.iter_mut().filter(|c| !c.passed) {
        if let Some(explanation) = explanations
            .iter()
            .find(|e| e.check == check.name && (e.column.is_none() || e.column == check.column))
        {
            check.explained = Some(explanation.reason.clone());
        }
    }
    let passed = checks.iter().all(|c| c.passed || c.explained.is_some());
    Comparison { passed, checks }
}

fn check(name: &'static str, column: Option<&str>, value: f64, threshold: f64) -> Check {
    Check {
        name,
        column: column.map(String::from),
        value: Some(value),
        threshold: Some(threshold),
        passed: value <= threshold,
        detail: None,
        explained: None,
    }
}

fn standalone_checks(
    current: &Profile,
    thresholds: &Thresholds,
    roles: &Roles,
    checks: &mut Vec<Check>,
) {
    if let Some(label) = &roles.label {
        match current.column(label) {
            None => checks.push(Check {
                name: "label_missing",
                column: Some(label.clone()),
                value: None,
                threshold: None,
                passed: false,
                detail: Some("the snapshot has no label column".into()),
                explained: None,
            }),
            Some(column) => {
                let missing = column.nulls as f64 / column.count.max(1) as f64;
                checks.push(Check {
                    detail: Some("share of rows without a label".into()),
                    ..check("label_missing", Some(label), missing, 0.0)
                });
                let invalid = column.label.map_or(0, |l| l.invalid);
                let rate = invalid as f64 / column.count.max(1) as f64;
                checks.push(Check {
                    detail: Some(format!(
                        "{invalid} labels are neither 0/1 nor true/false (NaN included)"
                    )),
                    ..check("label_invalid", Some(label), rate, 0.0)
                });
            }
        }
    }
    for column in &current.columns {
        let bad = current
            .bad_values
            .columns
            .get(&column.name)
            .map_or(0, |b| b.count);
        let rate = bad as f64 / column.count.max(1) as f64;
        let mut entry = check(
            "bad_values",
            Some(&column.name),
            rate,
            thresholds.bad_value_rate,
        );
        if let Some(first) = current
            .bad_values
            .columns
            .get(&column.name)
            .and_then(|b| b.examples.first())
        {
            entry.detail = Some(format!(
                "{bad} values did not parse as {}; first {:?} at {} row {}",
                column.column_type.name(),
                first.value,
                first.file,
                first.row
            ));
        }
        checks.push(entry);
    }
}

fn drift_checks(
    previous: &Profile,
    current: &Profile,
    thresholds: &Thresholds,
    roles: &Roles,
    checks: &mut Vec<Check>,
) {
    let before: BTreeMap<&str, &ColumnProfile> = previous
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let after: BTreeMap<&str, &ColumnProfile> = current
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    for (name, column) in &before {
        match after.get(name) {
            None => checks.push(schema_change(name, "removed")),
            Some(now) if now.column_type != column.column_type => checks.push(schema_change(
                name,
                &format!(
                    "retyped from {} to {}",
                    column.column_type.name(),
                    now.column_type.name()
                ),
            )),
            Some(_) => {}
        }
    }
    for name in after.keys().filter(|n| !before.contains_key(*n)) {
        checks.push(schema_change(name, "added"));
    }
    let change = (current.rows as f64 - previous.rows as f64).abs() / (previous.rows.max(1) as f64);
    checks.push(Check {
        detail: Some(format!(
            "{} rows, previously {}",
            current.rows, previous.rows
        )),
        ..check(
            "row_count_change",
            None,
            change,
            thresholds.row_count_change,
        )
    });
    if let Some(label) = &roles.label {
        let rate = |p: &Profile| p.column(label).and_then(|c| c.label).and_then(|l| l.rate());
        if let (Some(now), Some(then)) = (rate(current), rate(previous)) {
            checks.push(Check {
                detail: Some(format!("label rate {now:.4}, previously {then:.4}")),
                ..check(
                    "label_rate_shift",
                    Some(label),
                    (now - then).abs(),
                    thresholds.label_rate_shift,
                )
            });
        }
    }
    for (name, now) in &after {
        let Some(then) = before
            .get(name)
            .filter(|c| c.column_type == now.column_type)
        else {
            continue;
        };
        if roles.label.as_deref() == Some(*name) {
            continue;
        }
        let rise = now.null_rate() - then.null_rate();
        checks.push(check(
            "null_rate_rise",
            Some(name),
            rise.max(0.0),
            thresholds.null_rate_rise,
        ));
        if now.column_type.is_temporal() {
            // A new snapshot's dates are later by design: range and drift would always fire.
            continue;
        }
        if let (Some(q_then), Some(q_now), Some(min), Some(max)) = (
            &then.quantiles,
            &now.quantiles,
            then.moments.min,
            then.moments.max,
        ) {
            checks.push(check(
                "out_of_range",
                Some(name),
                out_of_range_share(min, max, q_now),
                thresholds.out_of_range,
            ));
            if let Ok(divergence) = jensen_shannon_numeric(q_then, q_now, DRIFT_BINS) {
                checks.push(check(
                    "numeric_drift",
                    Some(name),
                    divergence,
                    thresholds.numeric_drift,
                ));
            }
        }
        if let (Some(f_then), Some(f_now)) = (&then.frequencies, &now.frequencies) {
            let identifier = roles.identifiers.iter().any(|c| c == name);
            let high_cardinality =
                f_then.truncated() || now.distinct.estimate() > 0.5 * now.count.max(1) as f64;
            if identifier
                || high_cardinality
                || now.column_type == ColumnType::Bool && f_then.counts().is_empty()
            {
                let why = if identifier {
                    "an identifier or free-text column"
                } else {
                    "high cardinality"
                };
                checks.push(Check {
                    name: "categorical_drift",
                    column: Some(name.to_string()),
                    value: None,
                    threshold: None,
                    passed: true,
                    detail: Some(format!("skipped: {why}")),
                    explained: None,
                });
                continue;
            }
            let share = new_category_share(f_then.counts(), f_now.counts());
            checks.push(check(
                "new_categories",
                Some(name),
                share,
                thresholds.new_categories,
            ));
            let (distance, category) = l_infinity(f_then.counts(), f_now.counts());
            let mut entry = check(
                "categorical_drift",
                Some(name),
                distance,
                thresholds.categorical_drift,
            );
            entry.detail = category.map(|c| format!("largest change in `{c}`"));
            checks.push(entry);
        }
    }
}

fn schema_change(column: &str, what: &str) -> Check {
    Check {
        name: "schema_change",
        column: Some(column.to_string()),
        value: None,
        threshold: None,
        passed: false,
        detail: Some(format!("column {what}")),
        explained: None,
    }
}
