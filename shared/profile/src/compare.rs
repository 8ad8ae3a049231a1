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
        let identifier = roles.identifiers.iter().any(|c| c == name);
        if identifier && now.quantiles.is_some() {
            // A numeric entity id is new by design too: new customers get higher ids.
            checks.push(Check {
                name: "numeric_drift",
                column: Some(name.to_string()),
                value: None,
                threshold: None,
                passed: true,
                detail: Some("skipped: an identifier column".into()),
                explained: None,
            });
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
            // A side whose counts gave up has none to compare: checking against an empty map
            // would call every category new.
            let high_cardinality = f_then.truncated()
                || f_now.truncated()
                || now.distinct.estimate() > 0.5 * now.count.max(1) as f64;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::profile_of;

    /// A snapshot whose every column is a fixed function of the row number, so two of them
    /// differ only where a test changes one.
    #[derive(Clone)]
    struct Data {
        rows: usize,
        spend_shift: f64,
        plan: fn(usize) -> &'static str,
        /// Every this-many rows `score` is empty (0: never).
        score_null_every: usize,
        /// Every this-many rows the label is 1.
        positive_every: usize,
        day_month: u32,
    }

    impl Default for Data {
        fn default() -> Self {
            Data {
                rows: 1000,
                spend_shift: 0.0,
                plan: |i| ["basic", "pro", "team"][i % 3],
                score_null_every: 0,
                positive_every: 4,
                day_month: 1,
            }
        }
    }

    impl Data {
        fn csv(&self) -> String {
            let mut text = String::from("spend,plan,score,day,y\n");
            for i in 0..self.rows {
                let spend = 10.0 + (i * 37 % 100) as f64 + self.spend_shift;
                // Constant over blocks of five, so nulling one row in five keeps the shape.
                let score = if self.score_null_every > 0 && i % self.score_null_every == 0 {
                    String::new()
                } else {
                    ((i / 5) * 13 % 50).to_string()
                };
                text.push_str(&format!(
                    "{spend},{},{score},2026-{:02}-{:02},{}\n",
                    (self.plan)(i),
                    self.day_month,
                    i % 28 + 1,
                    (i % self.positive_every == 0) as u8
                ));
            }
            text
        }

        fn profile(&self) -> Profile {
            profile_of(&[("a.csv", &self.csv())], Some("y"))
        }
    }

    fn roles() -> Roles {
        Roles {
            label: Some("y".into()),
            identifiers: Vec::new(),
        }
    }

    fn against(before: &Data, after: &Data) -> Comparison {
        compare(
            Some(&before.profile()),
            &after.profile(),
            &Thresholds::default(),
            &roles(),
            &[],
        )
    }

    /// Failed checks by name and column.
    type Failures<'a> = Vec<(&'a str, Option<&'a str>)>;

    fn failures(comparison: &Comparison) -> Failures<'_> {
        comparison
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| (c.name, c.column.as_deref()))
            .collect()
    }

    fn find<'a>(comparison: &'a Comparison, name: &str, column: Option<&str>) -> &'a Check {
        comparison
            .checks
            .iter()
            .find(|c| c.name == name && c.column.as_deref() == column)
            .unwrap_or_else(|| panic!("no {name} {column:?} in {:?}", comparison.checks))
    }

    #[test]
    fn the_same_data_passes_every_check() {
        let comparison = against(&Data::default(), &Data::default());
        assert!(comparison.passed, "{:?}", failures(&comparison));
        let checks: Vec<(&str, Option<&str>)> = comparison
            .checks
            .iter()
            .map(|c| (c.name, c.column.as_deref()))
            .collect();
        assert_eq!(
            checks,
            [
                ("label_missing", Some("y")),
                ("label_invalid", Some("y")),
                ("bad_values", Some("spend")),
                ("bad_values", Some("plan")),
                ("bad_values", Some("score")),
                ("bad_values", Some("day")),
                ("bad_values", Some("y")),
                ("row_count_change", None),
                ("label_rate_shift", Some("y")),
                // Dates get no range or drift check: a new snapshot's dates are later by design.
                ("null_rate_rise", Some("day")),
                ("null_rate_rise", Some("plan")),
                ("new_categories", Some("plan")),
                ("categorical_drift", Some("plan")),
                ("null_rate_rise", Some("score")),
                ("out_of_range", Some("score")),
                ("numeric_drift", Some("score")),
                ("null_rate_rise", Some("spend")),
                ("out_of_range", Some("spend")),
                ("numeric_drift", Some("spend")),
            ]
        );
        let later = Data {
            day_month: 6,
            ..Data::default()
        };
        assert!(
            against(&Data::default(), &later).passed,
            "later dates are no drift"
        );
    }

    #[test]
    fn each_drift_fails_its_own_check_and_no_other() {
        let base = Data::default();
        let cases: [(Data, Failures); 6] = [
            (
                Data {
                    spend_shift: 40.0,
                    ..base.clone()
                },
                vec![
                    ("out_of_range", Some("spend")),
                    ("numeric_drift", Some("spend")),
                ],
            ),
            (
                // 2% of rows in a plan never seen before; the other shares move by under 1%.
                Data {
                    plan: |i| {
                        if i % 50 == 0 {
                            "enterprise"
                        } else {
                            ["basic", "pro", "team"][i % 3]
                        }
                    },
                    ..base.clone()
                },
                vec![("new_categories", Some("plan"))],
            ),
            (
                Data {
                    plan: |i| {
                        [
                            "basic", "basic", "basic", "basic", "basic", "pro", "pro", "pro",
                            "team", "team",
                        ][i % 10]
                    },
                    ..base.clone()
                },
                vec![("categorical_drift", Some("plan"))],
            ),
            (
                Data {
                    score_null_every: 5,
                    ..base.clone()
                },
                vec![("null_rate_rise", Some("score"))],
            ),
            (
                Data {
                    positive_every: 3,
                    ..base.clone()
                },
                vec![("label_rate_shift", Some("y"))],
            ),
            (
                Data {
                    rows: 2000,
                    ..base.clone()
                },
                vec![("row_count_change", None)],
            ),
        ];
        for (after, expected) in cases {
            let comparison = against(&base, &after);
            assert_eq!(failures(&comparison), expected);
            assert!(!comparison.passed);
        }
        let shifted = against(
            &base,
            &Data {
                spend_shift: 40.0,
                ..base.clone()
            },
        );
        let range = find(&shifted, "out_of_range", Some("spend"));
        assert!((0.35..0.45).contains(&range.value.unwrap()), "{range:?}");
        assert_eq!(range.threshold, Some(0.01));
        let nulls = against(
            &base,
            &Data {
                score_null_every: 5,
                ..base.clone()
            },
        );
        assert!((find(&nulls, "null_rate_rise", Some("score")).value.unwrap() - 0.2).abs() < 1e-12);
        let remixed = against(
            &base,
            &Data {
                plan: |i| {
                    [
                        "basic", "basic", "basic", "basic", "basic", "pro", "pro", "pro", "team",
                        "team",
                    ][i % 10]
                },
                ..base.clone()
            },
        );
        let drift = find(&remixed, "categorical_drift", Some("plan"));
        assert_eq!(drift.detail.as_deref(), Some("largest change in `basic`"));
        // Fewer nulls than before is no failure.
        let fewer = against(
            &Data {
                score_null_every: 5,
                ..base.clone()
            },
            &base,
        );
        assert_eq!(
            find(&fewer, "null_rate_rise", Some("score")).value,
            Some(0.0)
        );
    }

    #[test]
    fn a_removed_added_or_retyped_column_is_a_schema_change() {
        let before = profile_of(
            &[("a.csv", "a,b,c,y\n1,x,2026-01-01,0\n2,y,2026-01-02,1\n")],
            Some("y"),
        );
        let after = profile_of(
            &[("a.csv", "a,c,d,y\nq,2026-01-01,5,0\nr,2026-01-02,6,1\n")],
            Some("y"),
        );
        let comparison = compare(Some(&before), &after, &Thresholds::default(), &roles(), &[]);
        let changes: Vec<(Option<&str>, Option<&str>)> = comparison
            .checks
            .iter()
            .filter(|c| c.name == "schema_change")
            .map(|c| (c.column.as_deref(), c.detail.as_deref()))
            .collect();
        assert_eq!(
            changes,
            [
                (Some("a"), Some("column retyped from int64 to string")),
                (Some("b"), Some("column removed")),
                (Some("d"), Some("column added")),
            ]
        );
        assert!(
            comparison
                .checks
                .iter()
                .filter(|c| c.name == "schema_change")
                .all(|c| !c.passed)
        );
        assert!(!comparison.passed);
    }

    #[test]
    fn labels_missing_or_invalid_fail_without_a_previous_profile() {
        let check = |text: &str| {
            compare(
                None,
                &profile_of(&[("a.csv", text)], Some("y")),
                &Thresholds::default(),
                &roles(),
                &[],
            )
        };
        let clean = check("x,y\n1,0\n2,1\n3,0\n4,1\n");
        assert!(clean.passed, "{:?}", failures(&clean));
        assert!(
            clean.checks.iter().all(|c| c.name != "row_count_change"),
            "no drift checks"
        );

        let missing = check("x,y\n1,0\n2,\n3,0\n4,1\n");
        assert_eq!(failures(&missing), [("label_missing", Some("y"))]);
        assert_eq!(find(&missing, "label_missing", Some("y")).value, Some(0.25));
        let invalid = check("x,y\n1,0\n2,2\n3,0\n4,1\n");
        assert_eq!(failures(&invalid), [("label_invalid", Some("y"))]);
        let detail = find(&invalid, "label_invalid", Some("y")).detail.clone();
        assert_eq!(
            detail.as_deref(),
            Some("1 labels are neither 0/1 nor true/false (NaN included)")
        );

        let unlabelled = profile_of(&[("a.csv", "x\n1\n")], None);
        let absent = compare(None, &unlabelled, &Thresholds::default(), &roles(), &[]);
        assert_eq!(failures(&absent), [("label_missing", Some("y"))]);
        assert_eq!(
            find(&absent, "label_missing", Some("y")).detail.as_deref(),
            Some("the snapshot has no label column")
        );
    }

    #[test]
    fn values_that_do_not_parse_fail_above_their_threshold() {
        let with_bad = |bad: usize| {
            let mut text = String::from("x\n");
            for i in 0..1000 {
                text.push_str(&if i < bad {
                    "oops\n".to_string()
                } else {
                    format!("{i}\n")
                });
            }
            compare(
                None,
                &profile_of(&[("a.csv", &text)], None),
                &Thresholds::default(),
                &Roles::default(),
                &[],
            )
        };
        // 0.1% is the default limit: one in a thousand passes, two fail.
        assert!(with_bad(1).passed);
        let two = with_bad(2);
        assert_eq!(failures(&two), [("bad_values", Some("x"))]);
        let detail = find(&two, "bad_values", Some("x")).detail.clone().unwrap();
        assert!(
            detail.starts_with("2 values did not parse as int64; first \"oops\" at "),
            "{detail}"
        );
        assert!(detail.ends_with(" row 1"), "{detail}");
    }

    #[test]
    fn an_explained_failure_passes_and_an_explanation_elsewhere_does_not() {
        let base = Data::default();
        let after = Data {
            score_null_every: 5,
            ..base.clone()
        };
        let explain = |column: Option<&str>, check: &str| Explanation {
            column: column.map(String::from),
            check: check.into(),
            reason: "a new source".into(),
        };
        let run = |explanations: &[Explanation]| {
            compare(
                Some(&base.profile()),
                &after.profile(),
                &Thresholds::default(),
                &roles(),
                explanations,
            )
        };
        let explained = run(&[explain(Some("score"), "null_rate_rise")]);
        assert!(explained.passed);
        let check = find(&explained, "null_rate_rise", Some("score"));
        assert_eq!(
            (check.passed, check.explained.as_deref()),
            (false, Some("a new source"))
        );
        assert!(
            run(&[explain(None, "null_rate_rise")]).passed,
            "no column: every column"
        );
        assert!(!run(&[explain(Some("spend"), "null_rate_rise")]).passed);
        assert!(!run(&[explain(Some("score"), "numeric_drift")]).passed);
        assert!(
            find(&run(&[]), "null_rate_rise", Some("score"))
                .explained
                .is_none()
        );
    }

    #[test]
    fn identifier_and_high_cardinality_columns_skip_the_category_checks() {
        let text = |offset: usize| {
            let mut text = String::from("id,y\n");
            for i in 0..200 {
                text.push_str(&format!("c{},{}\n", i + offset, i % 2));
            }
            text
        };
        let (before, after) = (
            profile_of(&[("a.csv", &text(0))], Some("y")),
            profile_of(&[("a.csv", &text(1000))], Some("y")),
        );
        for roles in [
            roles(),
            Roles {
                label: Some("y".into()),
                identifiers: vec!["id".into()],
            },
        ] {
            let comparison = compare(Some(&before), &after, &Thresholds::default(), &roles, &[]);
            assert!(comparison.passed, "{:?}", failures(&comparison));
            let skipped = find(&comparison, "categorical_drift", Some("id"));
            assert!(
                skipped.detail.as_deref().unwrap().starts_with("skipped: "),
                "{skipped:?}"
            );
            assert!(comparison.checks.iter().all(|c| c.name != "new_categories"));
        }
    }

    /// With nothing declared, an id whose counts gave up and a code column that crossed the cap
    /// are skipped, not failed, while a drifted category beside them still fails.
    #[test]
    fn a_drifted_category_fails_beside_columns_whose_counts_gave_up() {
        let rows = 24_000;
        let text = |codes: usize, plan: fn(usize) -> &'static str| {
            let mut text = String::from("id,code,plan,y\n");
            for i in 0..rows {
                text.push_str(&format!("c{i},k{},{},{}\n", i % codes, plan(i), i % 2));
            }
            text
        };
        let even = |i: usize| ["basic", "pro", "team"][i % 3];
        let before = profile_of(&[("a.csv", &text(9_000, even))], Some("y"));
        let same = profile_of(&[("a.csv", &text(11_000, even))], Some("y"));
        let code = same.column("code").unwrap();
        assert!(code.frequencies.as_ref().unwrap().truncated());
        assert!(
            code.distinct.estimate() < 0.5 * rows as f64,
            "not caught by distinct"
        );

        let comparison = compare(Some(&before), &same, &Thresholds::default(), &roles(), &[]);
        assert!(comparison.passed, "{:?}", failures(&comparison));
        for column in ["id", "code"] {
            let skipped = find(&comparison, "categorical_drift", Some(column));
            assert_eq!(skipped.detail.as_deref(), Some("skipped: high cardinality"));
        }

        let mostly_basic = |i: usize| {
            if i % 10 < 6 {
                "basic"
            } else {
                ["pro", "team"][i % 2]
            }
        };
        let drifted = profile_of(&[("a.csv", &text(11_000, mostly_basic))], Some("y"));
        let comparison = compare(
            Some(&before),
            &drifted,
            &Thresholds::default(),
            &roles(),
            &[],
        );
        assert_eq!(failures(&comparison), [("categorical_drift", Some("plan"))]);
    }

    #[test]
    fn a_numeric_entity_id_skips_range_and_drift() {
        // Day two's customers have higher ids than day one's: not drift.
        let text = |offset: usize| {
            let mut text = String::from("customer_id,x,y\n");
            for i in 0..400 {
                text.push_str(&format!("{},{},{}\n", i + offset, i % 7, i % 2));
            }
            text
        };
        let (before, after) = (
            profile_of(&[("a.csv", &text(1))], Some("y")),
            profile_of(&[("a.csv", &text(401))], Some("y")),
        );
        let id = Roles {
            label: Some("y".into()),
            identifiers: vec!["customer_id".into()],
        };
        let comparison = compare(Some(&before), &after, &Thresholds::default(), &id, &[]);
        assert!(comparison.passed, "{:?}", failures(&comparison));
        let skipped = find(&comparison, "numeric_drift", Some("customer_id"));
        assert_eq!(
            skipped.detail.as_deref(),
            Some("skipped: an identifier column")
        );
        assert!(
            find(&comparison, "numeric_drift", Some("x"))
                .value
                .is_some()
        );
        // Not declared as the entity, the same ids are drift.
        let undeclared = compare(Some(&before), &after, &Thresholds::default(), &roles(), &[]);
        assert!(!undeclared.passed);
    }

    #[test]
    fn thresholds_come_from_the_manifest_with_defaults_for_the_rest() {
        let value = serde_json::json!({"numeric_drift": 0.2});
        let thresholds = Thresholds::from_manifest(Some(&value)).unwrap();
        assert_eq!(thresholds.numeric_drift, 0.2);
        assert_eq!(
            thresholds.null_rate_rise,
            Thresholds::default().null_rate_rise
        );
        assert_eq!(
            Thresholds::from_manifest(None).unwrap(),
            Thresholds::default()
        );
        let typo = serde_json::json!({"numeric_drfit": 0.2});
        let err = Thresholds::from_manifest(Some(&typo)).unwrap_err();
        assert!(
            err.starts_with("manifest.validate: unknown field `numeric_drfit`"),
            "{err}"
        );

        let base = Data::default();
        let shifted = Data {
            spend_shift: 40.0,
            ..base.clone()
        };
        let lenient = Thresholds {
            out_of_range: 0.5,
            numeric_drift: 1.0,
            ..Thresholds::default()
        };
        let comparison = compare(
            Some(&base.profile()),
            &shifted.profile(),
            &lenient,
            &roles(),
            &[],
        );
        assert!(comparison.passed, "{:?}", failures(&comparison));
    }
}
