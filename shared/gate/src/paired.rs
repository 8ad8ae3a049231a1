//! The paired decision: candidate and baseline scored on the same rows, each gated metric's
//! difference Δ = candidate − baseline tested against its limit.
//!
//! Promotion deploys one artifact, the candidate seed's weights, so evidence of a regression is
//! judged on that artifact's own paired difference on the test rows: DeLong's variance for AUC,
//! a seeded paired bootstrap for the other metrics. The spread over training seeds (the noise
//! floor) never widens the interval that decides a drop; it only raises the bar for calling a gain
//! an improvement (`se_improvement`, `improved`), and a candidate whose seeds spread far more than
//! the serving model's is a finding of its own (`unstable`, in [`crate::stability`]). The reasoning
//! and the formulas: docs/gate-asymmetry.md.
//!
//! The rule decides what the evidence must show (`no_regression`: block only on evidence of a drop
//! beyond the limit; `non_inferiority`: pass only on evidence there is none). The slices of one
//! column are one family of tests, corrected together with Holm's method. A slice whose test could
//! not detect a drop of `max_slice_drop` is `underpowered` (the record says how many rows it would
//! need), one whose metric is undefined (one class) `undefined`; neither is silently passed or
//! blocked: each is named.

use std::collections::BTreeMap;

use runfn_manifest::eval_settings::{EvalSettings, Rule, Underpowered};
use runfn_manifest::gates::{Direction, direction};
use runfn_stats::bootstrap::{RowMetric, paired_bootstrap};
use runfn_stats::delong::paired_auc;
use runfn_stats::{holm::holm, normal};

use crate::check::{Check, Decision, PairedTest, absolute_gates, delta_bound, reason, same_rows};
use crate::evaluation::Evaluation;
use crate::policy::Policy;

/// Power at which `detectable_drop` is stated.
pub const POWER: f64 = 0.8;

/// Both models' scores on the same rows, aligned.
#[derive(Debug, Clone, Default)]
pub struct PairedScores {
    pub candidate: Vec<f64>,
    pub baseline: Vec<f64>,
    pub labels: Vec<bool>,
    /// Slice column → each row's value.
    pub slices: Vec<(String, SliceValues)>,
    /// Where the rows did not fit in memory: every AUC test already made from the files by
    /// external sorts (`spilled_delong`, the same numbers); the rows themselves are not held
    /// (`candidate`, `baseline`, `labels` and the slices' `ids` are empty).
    pub spilled: Option<SpilledAuc>,
}

/// The AUC tests of a gate whose rows were not held: overall, and per slice column each value's
/// (in value order).
#[derive(Debug, Clone, Default)]
pub struct SpilledAuc {
    pub overall: GroupAuc,
    pub slices: Vec<(String, Vec<(String, GroupAuc)>)>,
}

/// One group's rows, positives and paired AUC test.
#[derive(Debug, Clone)]
pub struct GroupAuc {
    pub rows: u64,
    pub positives: u64,
    pub test: Result<runfn_stats::delong::PairedAuc, runfn_stats::auc::AucError>,
}

impl Default for GroupAuc {
    fn default() -> GroupAuc {
        GroupAuc {
            rows: 0,
            positives: 0,
            test: Err(runfn_stats::auc::AucError::OneClass {
                positives: 0,
                negatives: 0,
            }),
        }
    }
}

/// One slice column's values, row by row: each row's value as an index into the column's
/// distinct values (a few, where the rows are millions).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SliceValues {
    pub names: Vec<String>,
    pub ids: Vec<u32>,
}

impl SliceValues {
    /// The values of `texts`, row by row.
    pub fn from_texts<T: AsRef<str>>(texts: impl IntoIterator<Item = T>) -> SliceValues {
        let mut out = SliceValues::default();
        let mut index: BTreeMap<String, u32> = BTreeMap::new();
        for text in texts {
            let text = text.as_ref();
            let id = match index.get(text) {
                Some(&id) => id,
                None => {
                    let id = out.names.len() as u32;
                    out.names.push(text.to_string());
                    index.insert(text.to_string(), id);
                    id
                }
            };
            out.ids.push(id);
        }
        out
    }

    /// Row `row`'s value.
    pub fn name(&self, row: usize) -> &str {
        &self.names[self.ids[row] as usize]
    }
}

/// The spread of one metric over training seeds (standard deviations), overall and per slice.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrainingNoise {
    /// The metric it was measured for, e.g. `auc`.
    pub metric: String,
    pub overall: Option<f64>,
    pub slices: BTreeMap<String, BTreeMap<String, f64>>,
}

impl TrainingNoise {
    fn std(&self, metric: &str, slice: Option<(&str, &str)>) -> Option<f64> {
        if self.metric != metric {
            return None;
        }
        match slice {
            None => self.overall,
            Some((column, value)) => self.slices.get(column)?.get(value).copied(),
        }
    }
}

/// How the comparison was made, for the record.
#[derive(Debug)]
pub struct Settings<'a> {
    pub eval: &'a EvalSettings,
    /// Seeds the bootstrap (with each check's name), so a rerun gives the same numbers.
    pub seed: u64,
}

/// Decides on per-row scores. `candidate` and `baseline` are the evaluations (their overall
/// metrics feed the absolute gates; the baseline's unseen shares decide comparability).
pub fn decide_paired(
    policy: &Policy,
    settings: &Settings,
    candidate: &Evaluation,
    baseline: &Evaluation,
    scores: &PairedScores,
    noise: &[&TrainingNoise],
) -> Decision {
    let (mut checks, mut gates_run) = absolute_gates(policy, candidate);
    if let Some(check) = same_rows(candidate, baseline) {
        checks.push(check);
    }
    checks.push(comparable(settings.eval, candidate, baseline));
    gates_run.push("baseline_comparable".into());
    let all_rows: Vec<u32> = (0..scores.labels.len() as u32).collect();
    let tester = Tester {
        settings,
        scores,
        noise,
    };
    for bound in &policy.min_delta {
        // `min_delta` is an improvement floor: -0.002 allows 0.002 worse.
        let (limit, comparison) = delta_bound(&bound.metric, -bound.limit);
        let measured = tester.measure(&bound.metric, None, &all_rows);
        let alpha = 1.0 - settings.eval.confidence;
        let mut check = tester.check(
            &format!("{}_min_delta", bound.metric),
            &bound.metric,
            None,
            measured,
            limit,
            comparison,
            alpha,
        );
        let p = check.test.as_ref().and_then(|t| t.p_value);
        if let Some(test) = check.test.as_mut() {
            test.p_adjusted = p;
        }
        decide_one(&mut check, settings.eval, p, false, None);
        checks.push(check);
        gates_run.push(format!("{}_min_delta", bound.metric));
    }
    if let Some(max_drop) = policy.max_slice_drop {
        slice_checks(&tester, policy, max_drop, &mut checks);
        gates_run.push("max_slice_drop".into());
    }
    let named = |status: &str| -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for slice in checks
            .iter()
            .filter(|c| c.test.as_ref().is_some_and(|t| t.status == status))
            .filter_map(|c| c.slice.clone())
        {
            if !names.contains(&slice) {
                names.push(slice);
            }
        }
        names
    };
    let underpowered = named("underpowered");
    let undefined = named("undefined");
    let underpowered_drops = policy
        .max_slice_drop
        .map(|max_drop| underpowered_drops(&checks, max_drop))
        .unwrap_or_default();
    let reasons: Vec<String> = checks.iter().filter(|c| !c.passed).map(reason).collect();
    Decision {
        passed: reasons.is_empty(),
        no_baseline: false,
        gates_run,
        checks,
        reasons,
        method: "paired",
        rule: Some(settings.eval.rule),
        confidence: Some(settings.eval.confidence),
        resamples: Some(settings.eval.resamples),
        underpowered,
        undefined,
        underpowered_drops,
        unstable: Vec::new(),
        errors: Some(runfn_schema::record::GateErrors {
            drop: "rows".into(),
            improvement: "rows+training".into(),
        }),
    }
}

/// The underpowered slice checks whose point estimate is worse than the baseline's by more than
/// `max_drop`: each as `column=value (Δ …, beyond max_slice_drop …; about N rows would tell)`.
fn underpowered_drops(checks: &[Check], max_drop: f64) -> Vec<String> {
    checks
        .iter()
        .filter_map(|c| {
            let test = c.test.as_ref()?;
            let delta = c.delta?;
            let worse = if direction(&c.metric) == Some(Direction::LowerIsBetter) {
                delta
            } else {
                -delta
            };
            (test.status == "underpowered" && worse > max_drop).then(|| {
                format!(
                    "{} {} Δ {delta:+.4}, beyond max_slice_drop {max_drop}{}",
                    c.slice.as_deref().unwrap_or("overall"),
                    c.metric,
                    test.rows_needed
                        .map(|n| format!("; about {n} rows would tell (it has {})", test.rows))
                        .unwrap_or_default()
                )
            })
        })
        .collect()
}

/// A baseline that met category values its preprocessing never saw scored those rows as
/// "unknown": comparing with it says little about the candidate. Counted as the baseline's share
/// of such rows beyond the candidate's own, so values both models bucket as rare (max_vocab) do
/// not count against the baseline.
fn comparable(settings: &EvalSettings, candidate: &Evaluation, baseline: &Evaluation) -> Check {
    let worst = baseline
        .unseen
        .iter()
        .map(|(column, share)| {
            let own = candidate.unseen.get(column).copied().unwrap_or(0.0);
            (column.clone(), *share, own)
        })
        .max_by(|a, b| (a.1 - a.2).total_cmp(&(b.1 - b.2)));
    let (share, own) = worst.as_ref().map_or((0.0, 0.0), |w| (w.1, w.2));
    let excess = (share - own).max(0.0);
    let over = excess > settings.max_unseen_fraction;
    let note = match (&worst, over, &settings.unseen_reason) {
        (Some((column, ..)), true, Some(reason)) => Some(format!(
            "{:.1}% of the test rows have `{column}` values the baseline never saw (the candidate {:.1}%); accepted: {reason}",
            share * 100.0,
            own * 100.0
        )),
        (Some((column, ..)), true, None) => Some(format!(
            "{:.1}% of the test rows have `{column}` values the baseline's preprocessing never saw (the candidate's: {:.1}%; limit {} more): it scored them as unknown, so the comparison is not fair; retrain the baseline or set eval.unseen_reason to accept it",
            share * 100.0,
            own * 100.0,
            settings.max_unseen_fraction
        )),
        _ => None,
    };
    Check {
        name: "baseline_comparable".into(),
        metric: "unseen_fraction".into(),
        slice: worst.map(|w| w.0),
        baseline: Some(share),
        candidate: Some(own),
        delta: Some(excess),
        limit: Some(settings.max_unseen_fraction),
        comparison: "<=",
        passed: !over || settings.unseen_reason.is_some(),
        note,
        test: None,
    }
}

/// A DeLong test's outcome as the check's numbers.
fn delong_measured(
    test: Result<runfn_stats::delong::PairedAuc, runfn_stats::auc::AucError>,
    base: Measured,
) -> Measured {
    match test {
        Ok(p) => Measured {
            candidate: Some(p.a),
            baseline: Some(p.b),
            se_rows: Some(p.variance.sqrt()),
            method: "delong",
            ..base
        },
        Err(_) => Measured {
            method: "delong",
            undefined: Some(format!(
                "auc is undefined here: {} positive and {} negative rows (DeLong needs at least 2 of each)",
                base.positives,
                base.rows - base.positives
            )),
            ..base
        },
    }
}

/// A check's numbers from the tests made on spilled rows (AUC only: a gate on another metric
/// holds its rows).
fn measure_spilled(spilled: &SpilledAuc, metric: &str, slice: Option<(&str, &str)>) -> Measured {
    let group = match slice {
        None => Some(&spilled.overall),
        Some((column, value)) => spilled
            .slices
            .iter()
            .find(|(c, _)| c == column)
            .and_then(|(_, values)| values.iter().find(|(v, _)| v == value))
            .map(|(_, group)| group),
    };
    let group = group.cloned().unwrap_or_default();
    let base = Measured {
        candidate: None,
        baseline: None,
        se_rows: None,
        method: "delong",
        rows: group.rows,
        positives: group.positives,
        undefined: None,
    };
    if metric != "auc" {
        return Measured {
            undefined: Some(format!(
                "`{metric}` needs every row in memory (a paired bootstrap); the rows did not fit in --memory"
            )),
            ..base
        };
    }
    delong_measured(group.test, base)
}

struct Tester<'a> {
    settings: &'a Settings<'a>,
    scores: &'a PairedScores,
    noise: &'a [&'a TrainingNoise],
}

/// Δ's point estimate and its noise from the rows, or why the metric is undefined there.
struct Measured {
    candidate: Option<f64>,
    baseline: Option<f64>,
    se_rows: Option<f64>,
    method: &'static str,
    rows: u64,
    positives: u64,
    undefined: Option<String>,
}

impl Tester<'_> {
    fn measure(&self, metric: &str, slice: Option<(&str, &str)>, rows: &[u32]) -> Measured {
        let s = self.scores;
        if let Some(spilled) = &s.spilled {
            return measure_spilled(spilled, metric, slice);
        }
        let positives = rows.iter().filter(|&&r| s.labels[r as usize]).count() as u64;
        let base = Measured {
            candidate: None,
            baseline: None,
            se_rows: None,
            method: "bootstrap",
            rows: rows.len() as u64,
            positives,
            undefined: None,
        };
        if metric == "auc" {
            let pick = |v: &[f64]| rows.iter().map(|&r| v[r as usize]).collect::<Vec<f64>>();
            let labels: Vec<bool> = rows.iter().map(|&r| s.labels[r as usize]).collect();
            return delong_measured(
                paired_auc(&pick(&s.candidate), &pick(&s.baseline), &labels),
                base,
            );
        }
        let Some(row_metric) = RowMetric::parse(metric) else {
            return Measured {
                undefined: Some(format!("`{metric}` cannot be compared row by row")),
                ..base
            };
        };
        if rows.len() < 2 {
            return Measured {
                undefined: Some(format!("{} row: no spread to measure", rows.len())),
                ..base
            };
        }
        let scope = match slice {
            Some((column, value)) => format!("{metric}/{column}={value}"),
            None => metric.to_string(),
        };
        let boot = paired_bootstrap(
            row_metric,
            &s.candidate,
            &s.baseline,
            &s.labels,
            rows,
            self.settings.eval.resamples,
            self.settings.seed ^ fnv1a(&scope),
        );
        Measured {
            candidate: Some(boot.a),
            baseline: Some(boot.b),
            se_rows: Some(boot.se),
            ..base
        }
    }

    /// The check's numbers, before the decision (which for slices waits for Holm).
    #[allow(clippy::too_many_arguments)]
    fn check(
        &self,
        name: &str,
        metric: &str,
        slice: Option<(&str, &str)>,
        measured: Measured,
        limit: f64,
        comparison: &'static str,
        alpha: f64,
    ) -> Check {
        let confidence = self.settings.eval.confidence;
        let delta = measured
            .candidate
            .zip(measured.baseline)
            .map(|(c, b)| c - b);
        let training: Vec<f64> = self
            .noise
            .iter()
            .filter_map(|n| n.std(metric, slice))
            .collect();
        let se_training =
            (!training.is_empty()).then(|| training.iter().map(|s| s * s).sum::<f64>().sqrt());
        // The drop test: the artifact's own row noise, never its training's instability.
        let se = measured.se_rows;
        let se_improvement = measured
            .se_rows
            .map(|r| (r * r + se_training.map_or(0.0, |t| t * t)).sqrt());
        // In the metric's better direction: q > 0 is an improvement, the limit a floor on q.
        let sign = if direction(metric) == Some(Direction::LowerIsBetter) {
            -1.0
        } else {
            1.0
        };
        let floor = sign * limit;
        let z_conf = normal::quantile(confidence);
        let z_two = normal::quantile((1.0 + confidence) / 2.0);
        let (mut p_value, mut bound, mut interval, mut detectable) = (None, None, None, None);
        let improved = delta
            .zip(se_improvement)
            .map(|(d, se)| sign * d - z_conf * se > 0.0);
        if let (Some(d), Some(se)) = (delta, se) {
            let q = sign * d;
            let z = if se > 0.0 {
                (q - floor) / se
            } else if q < floor {
                f64::NEG_INFINITY
            } else if q > floor {
                f64::INFINITY
            } else {
                0.0
            };
            // no_regression: p of a drop beyond the floor; non_inferiority: p of none.
            p_value = Some(match self.settings.eval.rule {
                Rule::NoRegression => normal::cdf(z),
                Rule::NonInferiority => 1.0 - normal::cdf(z),
            });
            let one_sided = match self.settings.eval.rule {
                Rule::NoRegression => q + z_conf * se,
                Rule::NonInferiority => q - z_conf * se,
            };
            bound = Some(sign * one_sided);
            let (lo, hi) = (d - z_two * se, d + z_two * se);
            interval = Some([lo.min(hi), lo.max(hi)]);
            let resolution = normal::quantile(1.0 - alpha) + normal::quantile(POWER);
            detectable = Some(match self.settings.eval.rule {
                Rule::NoRegression => -floor + resolution * se,
                Rule::NonInferiority => (-floor
                    + (normal::quantile(POWER) - normal::quantile(1.0 - alpha)) * se)
                    .max(0.0),
            });
        }
        let note = measured.undefined.clone();
        Check {
            name: name.to_string(),
            metric: metric.to_string(),
            slice: slice.map(|(c, v)| format!("{c}={v}")),
            baseline: measured.baseline,
            candidate: measured.candidate,
            delta,
            limit: Some(limit),
            comparison,
            passed: true,
            note,
            test: Some(PairedTest {
                status: if measured.undefined.is_some() {
                    "undefined"
                } else {
                    "passed"
                },
                method: measured.method,
                se,
                se_rows: measured.se_rows,
                se_training,
                se_improvement,
                improved,
                interval,
                bound,
                p_value,
                p_adjusted: None,
                rows: measured.rows,
                positives: measured.positives,
                detectable_drop: detectable,
                rows_needed: None,
            }),
        }
    }
}

/// Settles one check from its (adjusted) p-value. `resolution_limit`: for slices, the
/// `max_slice_drop` a test must be able to detect, beyond the limit, not to be underpowered.
fn decide_one(
    check: &mut Check,
    settings: &EvalSettings,
    p_adjusted: Option<f64>,
    is_slice: bool,
    resolution_limit: Option<(f64, f64)>,
) {
    let Some(test) = check.test.as_mut() else {
        return;
    };
    if test.status == "undefined" {
        check.passed = true;
        return;
    }
    let alpha = 1.0 - settings.confidence;
    let evidence = p_adjusted.is_some_and(|p| p < alpha);
    // A slice is underpowered when its noise alone hides a drop of max_slice_drop beyond the
    // limit: the test's resolution ((z_{1-α'} + z_{0.8}) · se) is coarser than max_slice_drop.
    let underpowered = match (is_slice, resolution_limit, test.se) {
        (true, Some((max_drop, resolution)), Some(se)) => resolution * se > max_drop,
        _ => false,
    };
    let (passed, status) = match settings.rule {
        Rule::NoRegression if evidence => (false, "blocked"),
        Rule::NonInferiority if evidence => (true, "passed"),
        Rule::NonInferiority if !underpowered => (false, "blocked"),
        _ if underpowered => (settings.underpowered == Underpowered::Warn, "underpowered"),
        _ => (true, "passed"),
    };
    check.passed = passed;
    test.status = status;
    let words = verdict_words(check, settings, p_adjusted, status, passed);
    check.note = Some(words);
}

/// The check's verdict as a sentence whose words match its numbers: Δ, its interval, and what the
/// evidence says about a change for the worse beyond what the limit allows.
fn verdict_words(
    check: &Check,
    settings: &EvalSettings,
    p_adjusted: Option<f64>,
    status: &str,
    passed: bool,
) -> String {
    let test = check.test.as_ref().expect("a paired check has its test");
    let alpha = 1.0 - settings.confidence;
    let worse = if direction(&check.metric) == Some(Direction::LowerIsBetter) {
        "rise"
    } else {
        "drop"
    };
    let lower_is_better = direction(&check.metric) == Some(Direction::LowerIsBetter);
    // The limit in the better direction: -0.005 allows a drop of 0.005; +0.01 asks for a gain.
    let floor = check
        .limit
        .map(|l| if lower_is_better { -l } else { l })
        .unwrap_or(0.0);
    let allowed = if floor <= 0.0 {
        format!("the allowed {:.4}", -floor)
    } else {
        format!("the required gain of {floor:.4}")
    };
    let measured = match (check.delta, test.interval) {
        (Some(d), Some([lo, hi])) => format!(
            "Δ {d:+.4} ({:.0}% interval {lo:+.4} to {hi:+.4})",
            settings.confidence * 100.0
        ),
        _ => "Δ not computable".to_string(),
    };
    let p = format_p(p_adjusted);
    match status {
        "blocked" => match settings.rule {
            Rule::NoRegression => {
                format!("{measured}: evidence of a {worse} beyond {allowed} (p {p} < {alpha:.3})")
            }
            Rule::NonInferiority => format!(
                "{measured}: no evidence that it stayed within {allowed} (p {p} >= {alpha:.3})"
            ),
        },
        "underpowered" => format!(
            "{measured}: underpowered: this test sees only a {worse} of {:.4} or more ({} rows, {} positives{}){}",
            test.detectable_drop.unwrap_or(f64::NAN),
            test.rows,
            test.positives,
            test.rows_needed
                .map(|n| format!("; about {n} rows would see {allowed}"))
                .unwrap_or_default(),
            if passed {
                "; warned, not gated (eval.underpowered: warn)"
            } else {
                "; eval.underpowered: block"
            }
        ),
        _ => match settings.rule {
            Rule::NoRegression => {
                format!("{measured}: no evidence of a {worse} beyond {allowed}")
            }
            Rule::NonInferiority => {
                format!("{measured}: evidence that it stayed within {allowed} (p {p} < {alpha:.3})")
            }
        },
    }
}

fn format_p(p: Option<f64>) -> String {
    p.map_or("null".into(), |p| format!("{p:.4}"))
}

fn slice_checks(tester: &Tester, policy: &Policy, max_drop: f64, checks: &mut Vec<Check>) {
    let scores = tester.scores;
    let columns: Vec<String> = match &policy.slice_columns {
        Some(columns) => columns.clone(),
        None => scores.slices.iter().map(|(c, _)| c.clone()).collect(),
    };
    let settings = tester.settings.eval;
    let alpha = 1.0 - settings.confidence;
    for column in &columns {
        let Some((_, values)) = scores.slices.iter().find(|(c, _)| c == column) else {
            checks.push(Check {
                name: "max_slice_drop".into(),
                metric: policy.slice_metrics()[0].clone(),
                slice: Some(column.clone()),
                baseline: None,
                candidate: None,
                delta: None,
                limit: None,
                comparison: ">=",
                passed: false,
                note: Some(
                    "slice column missing from the per-row scores: score both models with it (evaluate --slice or manifest.eval.slices)"
                        .into(),
                ),
                test: None,
            });
            continue;
        };
        let mut groups: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
        for (i, &id) in values.ids.iter().enumerate() {
            groups
                .entry(values.names[id as usize].as_str())
                .or_default()
                .push(i as u32);
        }
        // Spilled rows: the groups are the tests', their rows not held (their counts are).
        let counts: BTreeMap<&str, u64> = match &scores.spilled {
            Some(spilled) => spilled
                .slices
                .iter()
                .find(|(c, _)| c == column)
                .map(|(_, values)| {
                    values
                        .iter()
                        .map(|(v, group)| (v.as_str(), group.rows))
                        .collect()
                })
                .unwrap_or_default(),
            None => groups
                .iter()
                .map(|(v, rows)| (*v, rows.len() as u64))
                .collect(),
        };
        for value in counts.keys() {
            groups.entry(value).or_default();
        }
        for metric in policy.slice_metrics() {
            let (limit, comparison) = delta_bound(&metric, max_drop);
            let mut family: Vec<Check> = Vec::new();
            let mut small: Vec<Check> = Vec::new();
            for (value, rows) in &groups {
                let measured = tester.measure(&metric, Some((column, value)), rows);
                let too_small = policy
                    .min_slice_rows
                    .is_some_and(|min| counts.get(value).copied().unwrap_or(0) < min);
                // The Holm family's size is known only after measuring; α' is filled below.
                let check = tester.check(
                    "max_slice_drop",
                    &metric,
                    Some((column, value)),
                    measured,
                    limit,
                    comparison,
                    alpha,
                );
                if too_small {
                    small.push(check);
                } else {
                    family.push(check);
                }
            }
            let gated: Vec<usize> = (0..family.len())
                .filter(|&i| {
                    family[i]
                        .test
                        .as_ref()
                        .is_some_and(|t| t.status != "undefined")
                })
                .collect();
            let size = gated.len().max(1);
            let p: Vec<f64> = gated
                .iter()
                .map(|&i| {
                    family[i]
                        .test
                        .as_ref()
                        .and_then(|t| t.p_value)
                        .unwrap_or(f64::NAN)
                })
                .collect();
            let adjusted = holm(&p);
            // The first step of Holm tests at α / k: the level a lone drop in one slice meets.
            let resolution = normal::quantile(1.0 - alpha / size as f64) + normal::quantile(POWER);
            for (k, &i) in gated.iter().enumerate() {
                let check = &mut family[i];
                if let Some(test) = check.test.as_mut() {
                    test.p_adjusted = Some(adjusted[k]).filter(|p| !p.is_nan());
                    if let Some(se) = test.se {
                        // se shrinks as 1/sqrt(rows): the rows at which resolution·se meets
                        // max_slice_drop.
                        test.rows_needed = (se > 0.0 && max_drop > 0.0).then(|| {
                            (test.rows as f64 * (resolution * se / max_drop).powi(2)).ceil() as u64
                        });
                        let floor = -max_drop;
                        test.detectable_drop = Some(match settings.rule {
                            Rule::NoRegression => -floor + resolution * se,
                            Rule::NonInferiority => (-floor
                                + (normal::quantile(POWER)
                                    - normal::quantile(1.0 - alpha / size as f64))
                                    * se)
                                .max(0.0),
                        });
                    }
                }
                let p_adjusted = check.test.as_ref().and_then(|t| t.p_adjusted);
                decide_one(
                    check,
                    settings,
                    p_adjusted,
                    true,
                    Some((max_drop, resolution)),
                );
            }
            for check in &mut family {
                if let Some(test) = check.test.as_mut()
                    && test.status == "undefined"
                {
                    check.passed = true;
                }
            }
            for mut check in small {
                if let Some(test) = check.test.as_mut()
                    && test.status != "undefined"
                {
                    test.status = "not_gated";
                }
                check.name = "min_slice_rows".into();
                check.note = Some(format!(
                    "{} rows < min_slice_rows {}: reported, not gated",
                    check.test.as_ref().map_or(0, |t| t.rows),
                    policy.min_slice_rows.unwrap_or(0)
                ));
                check.passed = true;
                family.push(check);
            }
            checks.extend(family);
        }
    }
}

/// FNV-1a: a stable 64-bit name for a check, to give each its own bootstrap stream.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A deterministic stream of uniforms, so each test's data is fixed.
    struct Uniform(u64);
    impl Uniform {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// `n` rows in two tiers (`big`: 90%, `small`: 10%), a 30% positive rate; both models see a
    /// signal of `skill`, the candidate's weakened to `drop_skill` on the rows of tier `small`
    /// (or everywhere with `everywhere`).
    fn scores(n: usize, skill: f64, weakened: Option<(&str, f64)>) -> PairedScores {
        let mut u = Uniform(17);
        let mut out = PairedScores::default();
        let mut tiers = Vec::new();
        for i in 0..n {
            let y = u.next() < 0.3;
            let tier = if i % 10 == 0 { "small" } else { "big" };
            let noise_b = u.next();
            let noise_c = u.next();
            let base = |s: f64, e: f64| (0.5 * e + if y { s } else { 0.0 }).min(1.0);
            let c_skill = match weakened {
                Some((t, s)) if t == tier || t == "*" => s,
                _ => skill,
            };
            out.baseline.push(base(skill, noise_b));
            out.candidate.push(base(c_skill, noise_c));
            out.labels.push(y);
            tiers.push(tier.to_string());
        }
        out.slices
            .push(("tier".into(), SliceValues::from_texts(tiers)));
        out
    }

    fn policy() -> Policy {
        let mut policy = Policy {
            max_slice_drop: Some(0.01),
            ..Policy::default()
        };
        policy.set("auc_min_delta", &json!(-0.002), "g").unwrap();
        policy
    }

    fn run(policy: &Policy, eval: &EvalSettings, scores: &PairedScores) -> Decision {
        let settings = Settings { eval, seed: 7 };
        decide_paired(
            policy,
            &settings,
            &Evaluation::default(),
            &Evaluation::default(),
            scores,
            &[],
        )
    }

    fn check<'d>(decision: &'d Decision, slice: Option<&str>) -> &'d Check {
        decision
            .checks
            .iter()
            .find(|c| c.slice.as_deref() == slice && c.test.is_some())
            .unwrap()
    }

    #[test]
    fn two_equally_good_models_pass() {
        let decision = run(
            &policy(),
            &EvalSettings::default(),
            &scores(4000, 0.3, None),
        );
        assert!(decision.passed, "{:?}", decision.reasons);
        let overall = check(&decision, None);
        let test = overall.test.as_ref().unwrap();
        assert_eq!(test.method, "delong");
        assert!(test.se.unwrap() > 0.0 && test.p_value.unwrap() > 0.05);
        assert_eq!(test.rows, 4000);
        let [lo, hi] = test.interval.unwrap();
        assert!(lo < overall.delta.unwrap() && overall.delta.unwrap() < hi);
    }

    #[test]
    fn a_real_drop_on_a_slice_blocks_and_names_it() {
        let decision = run(
            &policy(),
            &EvalSettings::default(),
            &scores(20000, 0.3, Some(("small", 0.05))),
        );
        assert!(!decision.passed);
        let small = check(&decision, Some("tier=small"));
        let test = small.test.as_ref().unwrap();
        assert_eq!(test.status, "blocked", "{small:?}");
        assert!(test.p_adjusted.unwrap() < 0.05);
        assert!(test.detectable_drop.unwrap() < -small.delta.unwrap());
        assert!(
            decision
                .reasons
                .iter()
                .any(|r| r.starts_with("slice tier=small: auc went from")),
            "{:?}",
            decision.reasons
        );
        assert_eq!(
            check(&decision, Some("tier=big"))
                .test
                .as_ref()
                .unwrap()
                .status,
            "passed"
        );
    }

    #[test]
    fn a_small_slice_is_underpowered_warned_or_blocked_as_asked() {
        let data = scores(600, 0.3, Some(("small", 0.29)));
        let decision = run(&policy(), &EvalSettings::default(), &data);
        assert!(decision.passed, "{:?}", decision.reasons);
        assert!(
            decision.underpowered.contains(&"tier=small".to_string()),
            "{:?}",
            decision.underpowered
        );
        let small = check(&decision, Some("tier=small"));
        assert!(small.note.as_deref().unwrap().contains("warned, not gated"));
        let strict = EvalSettings {
            underpowered: Underpowered::Block,
            ..EvalSettings::default()
        };
        let blocked = run(&policy(), &strict, &data);
        assert!(!blocked.passed);
        assert!(blocked.reasons.iter().any(|r| r.contains("tier=small")));
    }

    #[test]
    fn a_slice_with_one_class_is_undefined_not_missing() {
        let mut data = scores(2000, 0.3, None);
        for i in (0..2000).step_by(10) {
            data.labels[i] = false;
        }
        let decision = run(&policy(), &EvalSettings::default(), &data);
        assert!(decision.passed, "{:?}", decision.reasons);
        assert_eq!(decision.undefined, ["tier=small"]);
        let small = check(&decision, Some("tier=small"));
        assert!(
            small.note.as_deref().unwrap().contains("0 positive"),
            "{small:?}"
        );
    }

    #[test]
    fn non_inferiority_needs_evidence_and_training_noise_only_raises_the_bar_for_a_gain() {
        let data = scores(1500, 0.3, None);
        let strict = EvalSettings {
            rule: Rule::NonInferiority,
            ..EvalSettings::default()
        };
        let mut overall_only = Policy::default();
        overall_only
            .set("auc_min_delta", &json!(-0.002), "g")
            .unwrap();
        let decision = run(&overall_only, &strict, &data);
        assert!(
            !decision.passed,
            "no evidence of staying within 0.002 on 1500 rows"
        );
        let loose = {
            let mut p = Policy::default();
            p.set("auc_min_delta", &json!(-0.2), "g").unwrap();
            p
        };
        assert!(run(&loose, &strict, &data).passed);

        let noise = TrainingNoise {
            metric: "auc".into(),
            overall: Some(0.03),
            slices: BTreeMap::new(),
        };
        let settings = Settings {
            eval: &strict,
            seed: 7,
        };
        let with_noise = decide_paired(
            &loose,
            &settings,
            &Evaluation::default(),
            &Evaluation::default(),
            &data,
            &[&noise, &noise],
        );
        let test = check(&with_noise, None).test.clone().unwrap();
        assert!((test.se_training.unwrap() - 0.03 * 2f64.sqrt()).abs() < 1e-12);
        let se_rows = test.se_rows.unwrap();
        // Seeds raise the bar for an improvement, never widen the drop test.
        assert_eq!(test.se, Some(se_rows));
        assert!((test.se_improvement.unwrap() - (se_rows * se_rows + 0.0018).sqrt()).abs() < 1e-12);
        assert_eq!(test.improved, Some(false));
    }

    /// The finding this rule came from: one slice's training labels shuffled, its seeds' AUCs
    /// spread widely, and that spread, added to the test, hid a drop of 0.16 on the deployed
    /// model. The drop test uses the artifact's row noise alone.
    #[test]
    fn a_candidates_own_instability_never_shields_a_drop() {
        let data = scores(20000, 0.3, Some(("small", 0.05)));
        let unstable = TrainingNoise {
            metric: "auc".into(),
            overall: Some(0.002),
            slices: [("tier".to_string(), [("small".to_string(), 0.073)].into())].into(),
        };
        let eval = EvalSettings::default();
        let settings = Settings {
            eval: &eval,
            seed: 7,
        };
        let decision = decide_paired(
            &policy(),
            &settings,
            &Evaluation::default(),
            &Evaluation::default(),
            &data,
            &[&unstable],
        );
        let small = check(&decision, Some("tier=small"));
        let test = small.test.as_ref().unwrap();
        assert_eq!(test.status, "blocked", "{small:?}");
        assert!(test.se_training.unwrap() > 2.0 * test.se_rows.unwrap());
        assert_eq!(test.se, test.se_rows);
        assert!(!decision.passed);
    }

    #[test]
    fn an_underpowered_slice_says_how_many_rows_it_would_need() {
        let data = scores(3000, 0.3, Some(("small", 0.29)));
        let decision = run(&policy(), &EvalSettings::default(), &data);
        let small = check(&decision, Some("tier=small")).test.clone().unwrap();
        assert_eq!(small.status, "underpowered");
        let needed = small.rows_needed.unwrap();
        assert!(
            needed > small.rows,
            "{needed} rows needed, {} there",
            small.rows
        );
        // A little past the rows it says it needs, the same slice is no longer underpowered.
        let scale = (1.25 * needed as f64 / small.rows as f64).ceil() as usize;
        let more = scores(3000 * scale, 0.3, Some(("small", 0.29)));
        let decision = run(&policy(), &EvalSettings::default(), &more);
        let small = check(&decision, Some("tier=small")).test.clone().unwrap();
        assert_ne!(small.status, "underpowered", "{small:?}");
    }

    #[test]
    fn other_metrics_are_bootstrapped_reproducibly() {
        let mut logloss = Policy::default();
        logloss
            .set("logloss_min_delta", &json!(-0.01), "g")
            .unwrap();
        let data = scores(3000, 0.3, Some(("*", 0.0)));
        let one = run(&logloss, &EvalSettings::default(), &data);
        let two = run(&logloss, &EvalSettings::default(), &data);
        assert_eq!(one, two);
        let test = check(&one, None).test.clone().unwrap();
        assert_eq!(test.method, "bootstrap");
        assert_eq!(check(&one, None).comparison, "<=");
        assert!(
            !one.passed,
            "a model with no skill has a worse log loss: {:?}",
            one.checks
        );
    }

    #[test]
    fn a_baseline_that_never_saw_the_values_is_not_comparable() {
        let baseline = Evaluation {
            unseen: [("plan".to_string(), 0.38)].into(),
            ..Evaluation::default()
        };
        let candidate = Evaluation {
            unseen: [("plan".to_string(), 0.01)].into(),
            ..Evaluation::default()
        };
        let data = scores(1000, 0.3, None);
        let eval = EvalSettings::default();
        let settings = Settings {
            eval: &eval,
            seed: 1,
        };
        let decision = decide_paired(&policy(), &settings, &candidate, &baseline, &data, &[]);
        assert!(!decision.passed);
        assert!(
            decision.reasons[0]
                .starts_with("baseline_comparable: 38.0% of the test rows have `plan`"),
            "{:?}",
            decision.reasons
        );
        let accepted = EvalSettings {
            unseen_reason: Some("plan codes were renamed; the old model is retired".into()),
            ..EvalSettings::default()
        };
        let settings = Settings {
            eval: &accepted,
            seed: 1,
        };
        let accepted = decide_paired(&policy(), &settings, &candidate, &baseline, &data, &[]);
        assert!(accepted.passed, "{:?}", accepted.reasons);
    }
}
