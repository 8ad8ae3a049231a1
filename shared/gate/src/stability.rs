//! Instability is a finding, not noise: a candidate whose metric spreads over its training seeds
//! far more than the serving model's did is unstable there, overall or on a gated slice, even when
//! the seed it deploys looks fine. Each spread is compared with the serving model's by a one-sided
//! F-test on the two variances (with the seeds each had); the slices of one column are one Holm
//! family, as in the drop tests. Only where the drop test gates (not a slice under
//! `min_slice_rows`, nor one with one class), and only a spread larger than the test rows' own
//! noise there (`se_rows`) is a finding: on a few dozen rows a metric moves in steps, three seeds
//! can agree exactly by chance, and no variance ratio against that zero means anything.
//! `eval.unstable` decides whether a finding blocks (the default) or warns.

use std::collections::BTreeMap;

use runfn_manifest::eval_settings::{EvalSettings, Unstable};
use runfn_schema::record::NoiseFloor;
use runfn_stats::holm::holm;
use runfn_stats::variance_ratio::larger_variance;

use crate::check::{Check, Decision, reason};

/// Where the drop tests gated `metric`: `overall` or `column=value`, with the test rows' standard
/// error of Δ there.
pub fn gated_resolutions(decision: &Decision, metric: &str) -> BTreeMap<String, f64> {
    decision
        .checks
        .iter()
        .filter(|c| c.metric == metric)
        .filter(|c| c.name == "max_slice_drop" || c.name.ends_with("_min_delta"))
        .filter_map(|c| {
            let test = c.test.as_ref()?;
            let gated = !matches!(test.status, "undefined" | "not_gated");
            let place = c.slice.clone().unwrap_or_else(|| "overall".into());
            gated.then_some((place, test.se_rows?))
        })
        .collect()
}

/// One spread: the seeds' values (when recorded), their standard deviation and count.
struct Spread<'a> {
    std: f64,
    n: usize,
    values: &'a [f64],
}

/// The `unstable` checks of `candidate`'s spread against `baseline`'s (the serving model's, as
/// the registry stored it), where `gated` (place → the test rows' standard error there) says the
/// drop tests gated: overall, then each slice both measured. None when the two measured
/// different metrics.
pub fn stability_checks(
    candidate: &NoiseFloor,
    baseline: &NoiseFloor,
    gated: &BTreeMap<String, f64>,
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
    let overall = gated.get("overall").and_then(|&se_rows| {
        compare(
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
            se_rows,
        )
    });
    checks.extend(overall.map(|(check, p)| settle(check, p, alpha, settings)));
    let empty = BTreeMap::new();
    let baseline_slices = baseline.slices.as_ref().unwrap_or(&empty);
    for (column, values) in candidate.slices.iter().flatten() {
        let Some(theirs) = baseline_slices.get(column) else {
            continue;
        };
        let family: Vec<(Check, f64)> = values
            .iter()
            .filter_map(|(value, ours)| {
                let theirs = theirs.get(value)?;
                let place = format!("{column}={value}");
                let se_rows = *gated.get(&place)?;
                compare(
                    &metric,
                    Some(place),
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
                    se_rows,
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

/// The check of one spread against the serving model's, with its one-sided p-value (1 when the
/// candidate's spread is within the test rows' own noise, `se_rows`: no finding there).
fn compare(
    metric: &str,
    slice: Option<String>,
    ours: Spread,
    theirs: Spread,
    se_rows: f64,
) -> Option<(Check, f64)> {
    // Three seeds estimate a spread with two degrees of freedom: now and then they agree far
    // more closely than the training's real spread, and a ratio against that would be the
    // reference's luck, not the candidate's instability. The reference is never taken below
    // the test rows' own noise there.
    let reference = theirs.std.max(se_rows);
    let (ratio, p) = larger_variance(ours.std * ours.std, ours.n, reference * reference, theirs.n)?;
    let p = if ours.std > se_rows { p } else { 1.0 };
    let shown = |s: &Spread| {
        if s.values.is_empty() {
            format!("{} seeds", s.n)
        } else {
            let values: Vec<String> = s.values.iter().map(|v| format!("{v:.4}")).collect();
            format!("{} seeds: {}", s.n, values.join(", "))
        }
    };
    let note = format!(
        "the candidate's {metric} spreads over its seeds with std {:.4} ({}) against the serving model's {:.4} ({}), the test rows' own noise {se_rows:.4}: variance ratio {ratio:.1} (against the larger of the two)",
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
        let gated: BTreeMap<String, f64> = [
            ("overall".to_string(), 0.003),
            ("operator=a".to_string(), 0.012),
        ]
        .into();
        let checks = stability_checks(&candidate, &baseline, &gated, &settings);
        assert_eq!(checks.len(), 2);
        let slice = checks.iter().find(|c| c.slice.is_some()).unwrap();
        assert!(!slice.passed, "{slice:?}");
        let note = slice.note.as_deref().unwrap();
        assert!(note.contains("0.5290, 0.5990, 0.6750"), "{note}");
        assert!(note.contains("unstable, blocking"), "{note}");
        assert!(checks.iter().find(|c| c.slice.is_none()).unwrap().passed);

        // A decision with nothing to block yet, as a gate with no gate configured makes it.
        let mut decision = crate::point::decide(
            &crate::Policy::default(),
            &crate::Evaluation::default(),
            Some(&crate::Evaluation::default()),
        );
        assert!(decision.passed, "{:?}", decision.reasons);
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
        let checks = stability_checks(&candidate, &baseline, &gated, &warn);
        assert!(checks.iter().all(|c| c.passed));

        // A slice the drop test does not gate (too few rows) is not judged; nor is a spread
        // within the rows' own noise there, however exactly the serving model's seeds agreed.
        let only_overall: BTreeMap<String, f64> = [("overall".to_string(), 0.003)].into();
        let checks = stability_checks(&candidate, &baseline, &only_overall, &settings);
        assert_eq!(checks.len(), 1);
        let exact = floor(0.002, 0.0, vec![0.6, 0.6, 0.6]);
        let noisy_rows: BTreeMap<String, f64> = [("operator=a".to_string(), 0.09)].into();
        let checks = stability_checks(&candidate, &exact, &noisy_rows, &settings);
        assert!(checks.iter().all(|c| c.passed), "{checks:?}");
    }

    #[test]
    fn spreads_like_the_serving_models_pass() {
        let candidate = floor(0.003, 0.02, vec![0.58, 0.60, 0.62]);
        let baseline = floor(0.002, 0.015, vec![0.59, 0.60, 0.62]);
        let gated: BTreeMap<String, f64> = [
            ("overall".to_string(), 0.003),
            ("operator=a".to_string(), 0.012),
        ]
        .into();
        let checks = stability_checks(&candidate, &baseline, &gated, &EvalSettings::default());
        assert!(checks.iter().all(|c| c.passed), "{checks:?}");
    }
}
