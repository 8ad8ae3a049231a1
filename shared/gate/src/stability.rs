//! Instability is a finding, not noise: a candidate whose metric spreads over its training seeds
//! far more than the serving model's did is unstable there, overall or on a gated slice, even when
//! the seed it deploys looks fine. Each spread is compared with the serving model's by a one-sided
//! F-test on the two variances (with the seeds each had); the slices of one column are one Holm
//! family, as in the drop tests. `eval.unstable` decides whether a finding blocks (the default) or
//! warns.

use std::collections::BTreeMap;

use runfn_manifest::eval_settings::{EvalSettings, Unstable};
use runfn_schema::record::NoiseFloor;
use runfn_stats::holm::holm;
use runfn_stats::variance_ratio::larger_variance;

use crate::decide::{Check, Decision, reason};

/// One spread: the seeds' values (when recorded), their standard deviation and count.
struct Spread<'a> {
    std: f64,
    n: usize,
    values: &'a [f64],
}

/// The `unstable` checks of `candidate`'s spread against `baseline`'s (the serving model's, as
/// the registry stored it): overall, then each slice of the `columns` (all when `None`) both
/// measured. None when the two measured different metrics.
pub fn stability_checks(
    candidate: &NoiseFloor,
    baseline: &NoiseFloor,
    columns: Option<&[String]>,
    settings: &EvalSettings,
) -> Vec<Check> {
    if candidate.metric != baseline.metric {
        return Vec::new();
    }
    let metric = candidate
        .metric
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .to_string();
    let alpha = 1.0 - settings.confidence;
    let mut checks = Vec::new();
    let overall = compare(
        &metric,
        None,
        Spread {
            std: candidate.std,
            n: candidate.n,
            values: &candidate.values,
        },
        Spread {
            std: baseline.std,
            n: baseline.n,
            values: &baseline.values,
        },
    );
    checks.extend(overall.map(|(check, p)| settle(check, p, alpha, settings)));
    let empty = BTreeMap::new();
    let baseline_slices = baseline.slices.as_ref().unwrap_or(&empty);
    for (column, values) in candidate.slices.iter().flatten() {
        if columns.is_some_and(|c| !c.contains(column)) {
            continue;
        }
        let Some(theirs) = baseline_slices.get(column) else {
            continue;
        };
        let family: Vec<(Check, f64)> = values
            .iter()
            .filter_map(|(value, ours)| {
                let theirs = theirs.get(value)?;
                compare(
                    &metric,
                    Some(format!("{column}={value}")),
                    Spread {
                        std: ours.std,
                        n: ours.n,
                        values: &ours.values,
                    },
                    Spread {
                        std: theirs.std,
                        n: theirs.n,
                        values: &theirs.values,
                    },
                )
            })
            .collect();
        let adjusted = holm(&family.iter().map(|(_, p)| *p).collect::<Vec<_>>());
        for ((check, _), p) in family.into_iter().zip(adjusted) {
            checks.push(settle(check, p, alpha, settings));
        }
    }
    checks
}

/// The check of one spread against the serving model's, with its one-sided p-value.
fn compare(
    metric: &str,
    slice: Option<String>,
    ours: Spread,
    theirs: Spread,
) -> Option<(Check, f64)> {
    let (ratio, p) = larger_variance(
        ours.std * ours.std,
        ours.n,
        theirs.std * theirs.std,
        theirs.n,
    )?;
    let shown = |s: &Spread| {
        if s.values.is_empty() {
            format!("{} seeds", s.n)
        } else {
            let values: Vec<String> = s.values.iter().map(|v| format!("{v:.4}")).collect();
            format!("{} seeds: {}", s.n, values.join(", "))
        }
    };
    let note = format!(
        "the candidate's {metric} spreads over its seeds with std {:.4} ({}) against the serving model's {:.4} ({}): variance ratio {ratio:.1}",
        ours.std,
        shown(&ours),
        theirs.std,
        shown(&theirs)
    );
    Some((
        Check {
            name: "unstable".into(),
            metric: metric.to_string(),
            slice,
            baseline: Some(theirs.std),
            candidate: Some(ours.std),
            delta: Some(ours.std - theirs.std),
            limit: None,
            comparison: "<=",
            passed: true,
            note: Some(note),
            test: None,
        },
        p,
    ))
}

/// Decides one check from its (Holm-adjusted) p-value.
fn settle(mut check: Check, p: f64, alpha: f64, settings: &EvalSettings) -> Check {
    let found = p < alpha;
    let words = if found {
        match settings.unstable {
            Unstable::Block => format!(
                "; larger beyond what the seeds allow (F-test p {p:.4} < {alpha:.3}): unstable, blocking (eval.unstable: block)"
            ),
            Unstable::Warn => format!(
                "; larger beyond what the seeds allow (F-test p {p:.4} < {alpha:.3}): unstable, warned (eval.unstable: warn)"
            ),
        }
    } else {
        format!("; within what the seeds allow (F-test p {p:.4})")
    };
    check.passed = !(found && settings.unstable == Unstable::Block);
    if let Some(note) = check.note.as_mut() {
        note.push_str(&words);
    }
    check
}

/// Adds the stability checks to `decision`: the gate names them, and a blocking one fails it.
pub fn add_stability(decision: &mut Decision, checks: Vec<Check>) {
    if checks.is_empty() {
        return;
    }
    decision.gates_run.push("unstable".into());
    for check in &checks {
        if !check.passed {
            decision.reasons.push(reason(check));
        }
        let warned = check
            .note
            .as_deref()
            .is_some_and(|n| n.contains("unstable, "));
        if warned {
            decision
                .unstable
                .push(check.slice.clone().unwrap_or_else(|| "overall".into()));
        }
    }
    decision.checks.extend(checks);
    decision.passed = decision.reasons.is_empty();
}

#[cfg(test)]
mod tests {
    use super::*;
    use runfn_schema::record::SliceSpread;

    fn floor(std: f64, slice_std: f64, values: Vec<f64>) -> NoiseFloor {
        NoiseFloor {
            metric: "evaluate.overall.auc".into(),
            n: 3,
            mean: 0.8,
            std,
            min: 0.8 - std,
            max: 0.8 + std,
            range: 2.0 * std,
            floor: 2.0 * std,
            method: "std".into(),
            values: vec![0.8 - std, 0.8, 0.8 + std],
            slices: Some(
                [(
                    "operator".to_string(),
                    [(
                        "a".to_string(),
                        SliceSpread {
                            n: 3,
                            mean: 0.6,
                            std: slice_std,
                            min: 0.5,
                            max: 0.7,
                            range: 0.2,
                            floor: 2.0 * slice_std,
                            values,
                        },
                    )]
                    .into(),
                )]
                .into(),
            ),
        }
    }

    /// The finding: one operator's training labels shuffled; its seeds' slice AUCs 0.529, 0.599
    /// and 0.675 (std 0.073) against the serving model's 0.004.
    #[test]
    fn a_slice_whose_seeds_spread_far_more_than_the_serving_models_blocks() {
        let candidate = floor(0.002, 0.073, vec![0.529, 0.599, 0.675]);
        let baseline = floor(0.002, 0.004, vec![0.688, 0.690, 0.696]);
        let settings = EvalSettings::default();
        let checks = stability_checks(&candidate, &baseline, None, &settings);
        assert_eq!(checks.len(), 2);
        let slice = checks.iter().find(|c| c.slice.is_some()).unwrap();
        assert!(!slice.passed, "{slice:?}");
        let note = slice.note.as_deref().unwrap();
        assert!(note.contains("0.5290, 0.5990, 0.6750"), "{note}");
        assert!(note.contains("unstable, blocking"), "{note}");
        assert!(checks.iter().find(|c| c.slice.is_none()).unwrap().passed);

        let mut decision = Decision {
            passed: true,
            no_baseline: false,
            gates_run: Vec::new(),
            checks: Vec::new(),
            reasons: Vec::new(),
            method: "paired",
            rule: None,
            confidence: None,
            resamples: None,
            underpowered: Vec::new(),
            undefined: Vec::new(),
            underpowered_drops: Vec::new(),
            unstable: Vec::new(),
            errors: None,
        };
        add_stability(&mut decision, checks);
        assert!(!decision.passed);
        assert_eq!(decision.unstable, ["operator=a"]);
        assert!(
            decision.reasons[0].starts_with("slice operator=a: auc unstable:"),
            "{:?}",
            decision.reasons
        );

        let warn = EvalSettings {
            unstable: Unstable::Warn,
            ..EvalSettings::default()
        };
        let checks = stability_checks(&candidate, &baseline, None, &warn);
        assert!(checks.iter().all(|c| c.passed));
    }

    #[test]
    fn spreads_like_the_serving_models_pass() {
        let candidate = floor(0.003, 0.02, vec![0.58, 0.60, 0.62]);
        let baseline = floor(0.002, 0.015, vec![0.59, 0.60, 0.62]);
        let checks = stability_checks(&candidate, &baseline, None, &EvalSettings::default());
        assert!(checks.iter().all(|c| c.passed), "{checks:?}");
    }
}
