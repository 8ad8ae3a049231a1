//! The point decision: the evaluations' metrics compared with fixed limits, for evaluations
//! without per-row scores (the paired test is in `paired`).

use crate::check::{Check, Decision, absolute_gates, delta_bound, reason, same_rows};
use crate::evaluation::{Evaluation, Metrics};
use crate::policy::{Bound, Policy, Source};

/// Decides. `baseline` is `None` only when the caller allowed a first model without one.
pub fn decide(policy: &Policy, candidate: &Evaluation, baseline: Option<&Evaluation>) -> Decision {
    let (mut checks, mut gates_run) = absolute_gates(policy, candidate);
    if let Some(baseline) = baseline {
        if let Some(check) = same_rows(candidate, baseline) {
            checks.push(check);
        }
        for bound in &policy.min_delta {
            checks.push(min_delta(bound, &candidate.overall, &baseline.overall));
            gates_run.push(format!("{}_min_delta", bound.metric));
        }
        if let Some(max_drop) = policy.max_slice_drop {
            slice_checks(policy, max_drop, candidate, baseline, &mut checks);
            gates_run.push("max_slice_drop".to_string());
        }
    }
    let reasons: Vec<String> = checks.iter().filter(|c| !c.passed).map(reason).collect();
    Decision {
        passed: reasons.is_empty(),
        no_baseline: baseline.is_none(),
        gates_run,
        checks,
        reasons,
        method: "point",
        rule: None,
        confidence: None,
        resamples: None,
        underpowered: Vec::new(),
        undefined: Vec::new(),
        underpowered_drops: Vec::new(),
        unstable: Vec::new(),
        errors: None,
    }
}

fn compare(delta: f64, limit: f64, comparison: &str) -> bool {
    if comparison == "<=" {
        delta <= limit
    } else {
        delta >= limit
    }
}

fn min_delta(bound: &Bound, candidate: &Metrics, baseline: &Metrics) -> Check {
    // `min_delta` is an improvement floor: -0.002 allows 0.002 worse.
    let (limit, comparison) = delta_bound(&bound.metric, -bound.limit);
    let (c, b) = (
        candidate.get(&bound.metric).copied(),
        baseline.get(&bound.metric).copied(),
    );
    let delta = c.zip(b).map(|(c, b)| c - b);
    let mut note = missing_note(c, b);
    if note.is_none() && bound.source == Source::NoiseFloor {
        note = Some("limit from the noise floor".into());
    }
    Check {
        name: format!("{}_min_delta", bound.metric),
        metric: bound.metric.clone(),
        slice: None,
        baseline: b,
        candidate: c,
        delta,
        limit: Some(limit),
        comparison,
        passed: delta.is_some_and(|d| compare(d, limit, comparison)),
        note,
        test: None,
    }
}

fn missing_note(candidate: Option<f64>, baseline: Option<f64>) -> Option<String> {
    match (candidate, baseline) {
        (None, None) => Some("missing from both evaluations".into()),
        (None, Some(_)) => Some("missing from the candidate's evaluation".into()),
        (Some(_), None) => Some("missing from the baseline's evaluation".into()),
        _ => None,
    }
}

fn slice_checks(
    policy: &Policy,
    max_drop: f64,
    candidate: &Evaluation,
    baseline: &Evaluation,
    checks: &mut Vec<Check>,
) {
    let columns: Vec<String> = match &policy.slice_columns {
        Some(columns) => columns.clone(),
        None => baseline.slices.keys().cloned().collect(),
    };
    let metrics = policy.slice_metrics();
    for column in &columns {
        let (Some(c_values), Some(b_values)) =
            (candidate.slices.get(column), baseline.slices.get(column))
        else {
            let side = if candidate.slices.contains_key(column) {
                "baseline's"
            } else {
                "candidate's"
            };
            checks.push(slice_check(
                column,
                None,
                &metrics[0],
                None,
                None,
                max_drop,
                Some(format!("slice column missing from the {side} evaluation")),
                false,
            ));
            continue;
        };
        for (value, b_metrics) in b_values {
            let c_metrics = c_values.get(value);
            if let (Some(min_rows), Some(c_metrics)) = (policy.min_slice_rows, c_metrics) {
                let rows = c_metrics
                    .get("rows")
                    .copied()
                    .zip(b_metrics.get("rows").copied())
                    .map(|(c, b)| c.min(b));
                match rows {
                    Some(rows) if rows < min_rows as f64 => {
                        let note =
                            format!("{rows} rows < min_slice_rows {min_rows}: reported, not gated");
                        for metric in &metrics {
                            let mut check = slice_check(
                                column,
                                Some(value),
                                metric,
                                c_metrics.get(metric).copied(),
                                b_metrics.get(metric).copied(),
                                max_drop,
                                Some(note.clone()),
                                true,
                            );
                            check.name = "min_slice_rows".into();
                            checks.push(check);
                        }
                        continue;
                    }
                    None => {
                        let note = "rows missing, so min_slice_rows cannot be applied".to_string();
                        checks.push(slice_check(
                            column,
                            Some(value),
                            "rows",
                            None,
                            None,
                            max_drop,
                            Some(note),
                            false,
                        ));
                        continue;
                    }
                    Some(_) => {}
                }
            }
            for metric in &metrics {
                let c = c_metrics.and_then(|m| m.get(metric)).copied();
                let b = b_metrics.get(metric).copied();
                let note = if c_metrics.is_none() {
                    Some("slice missing from the candidate's evaluation".into())
                } else {
                    missing_note(c, b)
                };
                let (limit, comparison) = delta_bound(metric, max_drop);
                let passed = c
                    .zip(b)
                    .is_some_and(|(c, b)| compare(c - b, limit, comparison));
                checks.push(slice_check(
                    column,
                    Some(value),
                    metric,
                    c,
                    b,
                    max_drop,
                    note,
                    passed,
                ));
            }
        }
        for value in c_values.keys().filter(|v| !b_values.contains_key(*v)) {
            let c = c_values[value].get(&metrics[0]).copied();
            checks.push(slice_check(
                column,
                Some(value),
                &metrics[0],
                c,
                None,
                max_drop,
                Some("new slice: no baseline to compare with".into()),
                true,
            ));
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn slice_check(
    column: &str,
    value: Option<&String>,
    metric: &str,
    candidate: Option<f64>,
    baseline: Option<f64>,
    max_drop: f64,
    note: Option<String>,
    passed: bool,
) -> Check {
    let (limit, comparison) = delta_bound(metric, max_drop);
    Check {
        name: "max_slice_drop".into(),
        metric: metric.to_string(),
        slice: Some(match value {
            Some(value) => format!("{column}={value}"),
            None => column.to_string(),
        }),
        baseline,
        candidate,
        delta: candidate.zip(baseline).map(|(c, b)| c - b),
        limit: Some(limit),
        comparison,
        passed,
        note,
        test: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn eval(value: serde_json::Value) -> Evaluation {
        Evaluation::from_json(&value, "t").unwrap()
    }

    /// The worked case: floor 0.002 from three baseline reruns, candidate better overall, the
    /// enterprise slice better, the first-30-days slice 0.02 worse against a 0.01 limit.
    #[test]
    fn worked_case_blocks_on_the_first_30_days_slice() {
        let mut policy = Policy {
            max_slice_drop: Some(0.01),
            ..Policy::default()
        };
        policy.apply_noise_floor("evaluate.overall.auc", 0.863 - 0.861);
        let baseline = eval(
            json!({"overall": {"auc": 0.862}, "slices": {"tier": {"enterprise": {"auc": 0.88}}, "tenure_bucket": {"<30d": {"auc": 0.79}}}}),
        );
        let candidate = eval(
            json!({"overall": {"auc": 0.866}, "slices": {"tier": {"enterprise": {"auc": 0.89}}, "tenure_bucket": {"<30d": {"auc": 0.77}}}}),
        );
        let decision = decide(&policy, &candidate, Some(&baseline));
        assert!(!decision.passed);
        let overall = &decision.checks[0];
        assert_eq!(
            (overall.name.as_str(), overall.passed),
            ("auc_min_delta", true)
        );
        assert!((overall.limit.unwrap() + 0.002).abs() < 1e-12);
        let enterprise = decision
            .checks
            .iter()
            .find(|c| c.slice.as_deref() == Some("tier=enterprise"))
            .unwrap();
        assert!(enterprise.passed);
        let new_customers = decision
            .checks
            .iter()
            .find(|c| c.slice.as_deref() == Some("tenure_bucket=<30d"))
            .unwrap();
        assert!(!new_customers.passed);
        assert_eq!(decision.reasons.len(), 1);
        assert!(
            decision.reasons[0].contains("tenure_bucket=<30d"),
            "{}",
            decision.reasons[0]
        );
    }

    #[test]
    fn lower_is_better_metrics_are_gated_by_direction() {
        let mut policy = Policy::default();
        policy.set("logloss_min_delta", &json!(-0.01), "g").unwrap();
        let baseline = eval(json!({"overall": {"logloss": 0.40}}));
        let better = decide(
            &policy,
            &eval(json!({"overall": {"logloss": 0.38}})),
            Some(&baseline),
        );
        let slightly_worse = decide(
            &policy,
            &eval(json!({"overall": {"logloss": 0.405}})),
            Some(&baseline),
        );
        let worse = decide(
            &policy,
            &eval(json!({"overall": {"logloss": 0.42}})),
            Some(&baseline),
        );
        assert!(better.passed && slightly_worse.passed && !worse.passed);
        assert_eq!(worse.checks[0].comparison, "<=");
    }

    #[test]
    fn missing_metric_or_slice_fails_with_a_reason() {
        let mut policy = Policy {
            max_slice_drop: Some(0.01),
            slice_columns: Some(vec!["region".into()]),
            ..Policy::default()
        };
        policy.set("auc_min_delta", &json!(0), "g").unwrap();
        let baseline =
            eval(json!({"overall": {"auc": 0.8}, "slices": {"region": {"eu": {"auc": 0.8}}}}));
        let candidate = eval(json!({"overall": {"logloss": 0.3}, "slices": {"region": {}}}));
        let decision = decide(&policy, &candidate, Some(&baseline));
        assert!(!decision.passed);
        assert!(
            decision.reasons.iter().any(|r| r
                .contains("overall: auc auc_min_delta: missing from the candidate's evaluation")),
            "{:?}",
            decision.reasons
        );
        assert!(
            decision
                .reasons
                .iter()
                .any(|r| r.contains("slice region=eu") && r.contains("slice missing")),
            "{:?}",
            decision.reasons
        );
        let no_column = decide(
            &policy,
            &eval(json!({"overall": {"auc": 0.9}})),
            Some(&baseline),
        );
        assert!(
            no_column
                .reasons
                .iter()
                .any(|r| r.contains("slice column missing from the candidate's")),
            "{:?}",
            no_column.reasons
        );
    }

    #[test]
    fn small_slices_are_reported_not_gated() {
        let policy = Policy {
            max_slice_drop: Some(0.01),
            min_slice_rows: Some(500),
            ..Policy::default()
        };
        let baseline = eval(
            json!({"overall": {"auc": 0.8}, "slices": {"tier": {"tiny": {"auc": 0.9, "rows": 40}}}}),
        );
        let candidate = eval(
            json!({"overall": {"auc": 0.8}, "slices": {"tier": {"tiny": {"auc": 0.5, "rows": 40}}}}),
        );
        let decision = decide(&policy, &candidate, Some(&baseline));
        assert!(decision.passed);
        assert_eq!(decision.checks[0].name, "min_slice_rows");
    }

    #[test]
    fn different_test_rows_block() {
        let baseline = eval(json!({"overall": {"auc": 0.8, "rows": 1000}}));
        let candidate = eval(json!({"overall": {"auc": 0.9, "rows": 999}}));
        let decision = decide(&Policy::default(), &candidate, Some(&baseline));
        assert!(!decision.passed);
        assert!(
            decision.reasons[0].contains("not the same test split"),
            "{:?}",
            decision.reasons
        );
    }

    #[test]
    fn the_same_count_of_other_rows_blocks_and_the_same_rows_pass() {
        let scored = |digest: &str| {
            eval(json!({"overall": {"auc": 0.8, "rows": 1000}, "rows_blake3": digest}))
        };
        let (a, b) = ("a".repeat(64), "b".repeat(64));
        let decision = decide(&Policy::default(), &scored(&a), Some(&scored(&b)));
        assert!(!decision.passed);
        assert_eq!(
            decision.reasons,
            [
                "overall: scored on different rows: rows_blake3 aaaaaaaaaaaa (candidate) vs bbbbbbbbbbbb (baseline): not the same test split"
            ]
        );
        let same = decide(&Policy::default(), &scored(&a), Some(&scored(&a)));
        assert!(same.passed, "{:?}", same.reasons);
        assert_eq!(same.checks[0].note, None);

        // A v1 baseline record against a v2 candidate: the formats are named, not "other rows".
        let v2 = |digest: &str| {
            eval(
                json!({"overall": {"auc": 0.8, "rows": 1000}, "rows_blake3": digest,
                        "rows_format": "runfn-rows-v2"}),
            )
        };
        let mixed = decide(&Policy::default(), &v2(&a), Some(&scored(&b)));
        assert!(!mixed.passed);
        assert!(
            mixed.reasons[0].contains("runfn-rows-v2 (candidate) vs runfn-rows-v1 (baseline)"),
            "{:?}",
            mixed.reasons
        );
        assert!(decide(&Policy::default(), &v2(&a), Some(&v2(&a))).passed);

        // An evaluation from before rows digests: counts compared, and the check says so.
        let old = eval(json!({"overall": {"auc": 0.8, "rows": 1000}}));
        let counts = decide(&Policy::default(), &scored(&a), Some(&old));
        assert!(counts.passed);
        let note = counts.checks[0].note.as_deref().unwrap();
        assert!(note.starts_with("row counts only: the baseline"), "{note}");
    }

    #[test]
    fn without_a_baseline_only_absolute_gates_apply() {
        let mut policy = Policy {
            max_slice_drop: Some(0.0),
            ..Policy::default()
        };
        policy.set("auc_min", &json!(0.7), "g").unwrap();
        policy.set("auc_min_delta", &json!(0), "g").unwrap();
        let decision = decide(&policy, &eval(json!({"overall": {"auc": 0.65}})), None);
        assert!(decision.no_baseline);
        assert_eq!(decision.gates_run, ["auc_min"]);
        assert_eq!(decision.checks.len(), 1);
        assert_eq!(
            decision.reasons,
            ["overall: auc is 0.6500, but auc_min requires >= 0.7"]
        );
    }

    #[test]
    fn without_gates_none_is_said_to_have_run() {
        let candidate = eval(json!({"overall": {"auc": 0.5, "rows": 100}}));
        let baseline = eval(json!({"overall": {"auc": 0.99, "rows": 100}}));
        let decision = decide(&Policy::default(), &candidate, Some(&baseline));
        assert!(decision.gates_run.is_empty());
        assert_eq!(decision.checks.len(), 1, "only same_test_rows");
    }
}
