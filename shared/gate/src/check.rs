//! What a gate decision is made of: its checks with their numbers, the paired test's statistics,
//! the checks every comparison shares (absolute bounds, the same test rows) and the sentence a
//! failed check gives. Both ways of deciding build on this: `point` (fixed limits) and `paired`
//! (per-row scores); neither imports the other.

use serde::Serialize;

use runfn_manifest::gates::{Direction, direction};

use crate::evaluation::Evaluation;
use crate::policy::{Bound, Policy};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub name: String,
    pub metric: String,
    /// `column=value` for a slice check, `null` overall.
    pub slice: Option<String>,
    pub baseline: Option<f64>,
    pub candidate: Option<f64>,
    /// candidate − baseline.
    pub delta: Option<f64>,
    /// The bound the compared value must meet, in the same units as `delta` (or as `candidate`
    /// for absolute gates).
    pub limit: Option<f64>,
    /// `>=` or `<=`: how the value is compared with `limit`.
    pub comparison: &'static str,
    pub passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The paired test's numbers (absent from point comparisons and from absolute gates).
    #[serde(flatten)]
    pub test: Option<PairedTest>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub passed: bool,
    /// True when there was no baseline and `--no-baseline` allowed that.
    pub no_baseline: bool,
    /// The gates that were applied (`auc_min_delta`, `max_slice_drop`, `ece_max`, ...), in order.
    /// Empty when none was: then only `same_test_rows` (if anything) was checked, and a
    /// candidate that got much worse still passes.
    pub gates_run: Vec<String>,
    pub checks: Vec<Check>,
    pub reasons: Vec<String>,
    /// `paired` (per-row scores of both models on the same rows) or `point` (the evaluations'
    /// metrics compared with fixed limits, for evaluations without per-row scores).
    pub method: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<runfn_manifest::eval_settings::Rule>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resamples: Option<usize>,
    /// Slices (`column=value`) whose test could not detect a drop of `max_slice_drop`.
    pub underpowered: Vec<String>,
    /// Slices whose metric is undefined there (one class).
    pub undefined: Vec<String>,
    /// Underpowered slices whose point estimate got worse by more than `max_slice_drop`: too
    /// small to tell, too large to stay unsaid (each with Δ and the rows it would need).
    pub underpowered_drops: Vec<String>,
    /// Where the candidate's seeds spread beyond the serving model's (`overall` or a slice).
    pub unstable: Vec<String>,
    /// Which error entered which test (paired decisions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<runfn_schema::record::GateErrors>,
}

impl Decision {
    /// The decision as the record's `gate` section.
    pub fn to_record(&self) -> runfn_schema::record::Gate {
        runfn_schema::record::Gate {
            passed: self.passed,
            no_baseline: self.no_baseline,
            gates_run: self.gates_run.clone(),
            checks: self.checks.iter().map(Check::to_record).collect(),
            reasons: self.reasons.clone(),
            method: self.method.to_string(),
            rule: self.rule.map(|rule| rule.name().to_string()),
            confidence: self.confidence,
            resamples: self.resamples.map(|n| n as u64),
            underpowered: self.underpowered.clone(),
            undefined: self.undefined.clone(),
            underpowered_drops: self.underpowered_drops.clone(),
            unstable: self.unstable.clone(),
            errors: self.errors.clone(),
        }
    }
}

impl Check {
    fn to_record(&self) -> runfn_schema::record::GateCheck {
        runfn_schema::record::GateCheck {
            name: self.name.clone(),
            metric: self.metric.clone(),
            slice: self.slice.clone(),
            baseline: self.baseline,
            candidate: self.candidate,
            delta: self.delta,
            limit: self.limit,
            comparison: self.comparison.to_string(),
            passed: self.passed,
            note: self.note.clone(),
            test: self
                .test
                .as_ref()
                .map(|t| runfn_schema::record::PairedNumbers {
                    status: t.status.to_string(),
                    method: t.method.to_string(),
                    se: t.se,
                    se_rows: t.se_rows,
                    se_training: t.se_training,
                    se_improvement: t.se_improvement,
                    improved: t.improved,
                    interval: t.interval,
                    bound: t.bound,
                    p_value: t.p_value,
                    p_adjusted: t.p_adjusted,
                    rows: t.rows,
                    positives: t.positives,
                    detectable_drop: t.detectable_drop,
                    rows_needed: t.rows_needed,
                }),
        }
    }
}

/// The statistics of one paired check, as the record reports them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedTest {
    /// `passed`, `blocked`, `underpowered`, `undefined` or `not_gated`.
    pub status: &'static str,
    /// `delong` or `bootstrap`.
    pub method: &'static str,
    /// The standard error of the drop test: the test rows' alone (the deployed artifact's own
    /// paired difference), the same as `se_rows`.
    pub se: Option<f64>,
    pub se_rows: Option<f64>,
    /// The spread over training seeds (candidate's and baseline's noise floors together).
    pub se_training: Option<f64>,
    /// Rows and seeds together: the bar a gain must clear to count as an improvement.
    pub se_improvement: Option<f64>,
    /// Whether Δ is a gain beyond what the rows and the seeds allow (its one-sided lower bound
    /// with `se_improvement` above zero).
    pub improved: Option<bool>,
    /// Two-sided interval for Δ at the rule's confidence.
    pub interval: Option<[f64; 2]>,
    /// The one-sided confidence bound the rule compared with the limit.
    pub bound: Option<f64>,
    pub p_value: Option<f64>,
    /// Holm-adjusted within the slice column's family (the same as `p_value` overall).
    pub p_adjusted: Option<f64>,
    pub rows: u64,
    pub positives: u64,
    /// The smallest drop (in the metric's units, from no change) that this test blocks with 80%
    /// power.
    pub detectable_drop: Option<f64>,
    /// For a gated slice: the rows it would need for its test to detect `max_slice_drop` with
    /// 80% power (at its current positive rate).
    pub rows_needed: Option<u64>,
}

/// The absolute bounds on the candidate (`<metric>_min`, `<metric>_max`), which need no
/// baseline, and the names of the gates they are.
pub(crate) fn absolute_gates(policy: &Policy, candidate: &Evaluation) -> (Vec<Check>, Vec<String>) {
    let mut checks = Vec::new();
    let mut gates_run = Vec::new();
    for bound in &policy.min {
        checks.push(absolute(bound, candidate, "_min", ">="));
        gates_run.push(format!("{}_min", bound.metric));
    }
    for bound in &policy.max {
        checks.push(absolute(bound, candidate, "_max", "<="));
        gates_run.push(format!("{}_max", bound.metric));
    }
    (checks, gates_run)
}

pub(crate) fn absolute(
    bound: &Bound,
    candidate: &Evaluation,
    suffix: &str,
    comparison: &'static str,
) -> Check {
    let value = candidate.overall.get(&bound.metric).copied();
    let passed = value.is_some_and(|v| {
        if comparison == ">=" {
            v >= bound.limit
        } else {
            v <= bound.limit
        }
    });
    Check {
        name: format!("{}{suffix}", bound.metric),
        metric: bound.metric.clone(),
        slice: None,
        baseline: None,
        candidate: value,
        delta: None,
        limit: Some(bound.limit),
        comparison,
        passed,
        note: value
            .is_none()
            .then(|| "missing from the candidate's evaluation".to_string()),
        test: None,
    }
}

/// Comparing on different test data compares nothing: both evaluations must have scored the same
/// rows. With both rows digests that is exact; equal counts alone only show the sizes agree.
pub(crate) fn same_rows(candidate: &Evaluation, baseline: &Evaluation) -> Option<Check> {
    let (c, b) = (
        candidate.overall.get("rows").copied(),
        baseline.overall.get("rows").copied(),
    );
    let digests = candidate
        .rows_blake3
        .as_deref()
        .zip(baseline.rows_blake3.as_deref());
    if c.is_none() && b.is_none() && digests.is_none() {
        return None;
    }
    let counts_match = c == b;
    let format = |e: &Evaluation| {
        e.rows_format
            .clone()
            .unwrap_or_else(|| "runfn-rows-v1".into())
    };
    let (passed, note) = match digests {
        // Digests of two formats differ whatever the rows: say so rather than "other rows".
        Some(_) if format(candidate) != format(baseline) => (
            false,
            Some(format!(
                "rows digests of two formats: {} (candidate) vs {} (baseline); score both on the same shards (evaluate --as baseline re-scores the baseline there)",
                format(candidate),
                format(baseline)
            )),
        ),
        Some((cd, bd)) if cd != bd => (
            false,
            Some(format!(
                "scored on different rows: rows_blake3 {} (candidate) vs {} (baseline)",
                short(cd),
                short(bd)
            )),
        ),
        Some(_) if counts_match => (true, None),
        None if counts_match => (
            true,
            Some(format!(
                "row counts only: {} no rows_blake3 (evaluated before rows digests)",
                match (&candidate.rows_blake3, &baseline.rows_blake3) {
                    (None, None) => "neither evaluation has",
                    (None, Some(_)) => "the candidate has",
                    _ => "the baseline has",
                }
            )),
        ),
        _ => (
            false,
            Some("candidate and baseline were not scored on the same test split".to_string()),
        ),
    };
    Some(Check {
        name: "same_test_rows".into(),
        metric: "rows".into(),
        slice: None,
        baseline: b,
        candidate: c,
        delta: c.zip(b).map(|(c, b)| c - b),
        limit: Some(0.0),
        comparison: "==",
        passed,
        note,
        test: None,
    })
}

/// The first 12 hex digits, enough to tell two digests apart in a message.
fn short(digest: &str) -> &str {
    digest.get(..12).unwrap_or(digest)
}

/// The bound on `delta` for a metric that may worsen by at most `allowed_worsening` (≥ 0 means
/// it may get worse by that much), and the comparison, by the metric's direction.
pub(crate) fn delta_bound(metric: &str, allowed_worsening: f64) -> (f64, &'static str) {
    match direction(metric) {
        Some(Direction::LowerIsBetter) => (allowed_worsening, "<="),
        _ => (-allowed_worsening, ">="),
    }
}

/// One sentence a person can act on.
pub(crate) fn reason(check: &Check) -> String {
    let place = match &check.slice {
        Some(slice) => format!("slice {slice}"),
        None => "overall".to_string(),
    };
    let (metric, name, comparison) = (&check.metric, &check.name, check.comparison);
    if let Some(test) = &check.test {
        let note = check.note.as_deref().unwrap_or("not computable");
        // The note says Δ, its interval and what they show against the limit, in words.
        return match (check.candidate, check.baseline, check.delta, test.interval) {
            (Some(c), Some(b), Some(_), Some(_)) => format!(
                "{place}: {metric} went from {b:.4} to {c:.4} ({} rows, {} positives); {name}: {note}",
                test.rows, test.positives,
            ),
            _ => format!("{place}: {metric} {name}: {note}"),
        };
    }
    if name == "baseline_comparable" {
        return format!(
            "baseline_comparable: {}",
            check.note.as_deref().unwrap_or("not comparable")
        );
    }
    match (check.candidate, check.baseline, check.delta, check.limit) {
        (Some(c), Some(b), _, _) if name == "same_test_rows" && c != b => {
            format!(
                "{place}: the candidate was scored on {c} rows and the baseline on {b}: not the same test split"
            )
        }
        _ if name == "same_test_rows" => format!(
            "{place}: {}: not the same test split",
            check.note.as_deref().unwrap_or("scored on different rows")
        ),
        (Some(c), Some(b), Some(d), Some(limit)) => format!(
            "{place}: {metric} went from {b:.4} to {c:.4} ({d:+.4}); {name} requires delta {comparison} {limit:+.4}"
        ),
        (Some(c), None, None, Some(limit)) if check.note.is_none() => {
            format!("{place}: {metric} is {c:.4}, but {name} requires {comparison} {limit}")
        }
        _ => format!(
            "{place}: {metric} {name}: {}",
            check.note.as_deref().unwrap_or("not computable")
        ),
    }
}
