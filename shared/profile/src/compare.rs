//! Checks of a profile, alone and against the previous snapshot's profile.
//!
//! A drift check fails when its value is beyond both its practical threshold (how much change
//! matters) and what sampling alone gives at these sample sizes (its `noise`). Two samples of
//! one distribution differ by chance, the more the fewer rows they hold: a threshold alone
//! fails a small table on noise, and noise alone would fail a large table on changes too small
//! to matter. The allowances share the false-alarm rate `validate.alpha` among every test of
//! the comparison (Bonferroni), so the more columns a table has, the less each may wander.
//! With a drift window, each check is also judged against its own history (`history.rs`).

use std::collections::BTreeMap;

use runfn_data::ColumnType;
use runfn_stats::drift::{
    l_infinity, new_category_share, out_of_range_counts, out_of_range_share, total_variation,
};
use runfn_stats::sampling;
use runfn_stats::transport::{
    spread_integral, wasserstein_allowance, wasserstein_counts, wasserstein_sketches,
};
use serde::Serialize;

use crate::check::Check;
use crate::column::ColumnProfile;
pub use crate::explain::Explanation;
use crate::profile::Profile;
use crate::scope::{Roles, Scope};
use crate::settings::Thresholds;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub passed: bool,
    pub checks: Vec<Check>,
}

/// `current` checked alone and against `previous`, failures a person explained let through.
/// `today` (YYYY-MM-DD) is the date explanations expire against.
pub fn compare(
    previous: Option<&Profile>,
    current: &Profile,
    thresholds: &Thresholds,
    roles: &Roles,
    explanations: &[Explanation],
    today: &str,
) -> Comparison {
    let mut checks = settled_checks(previous, current, thresholds, roles, None);
    crate::explain::apply(&mut checks, explanations, today);
    Comparison::of(checks)
}

impl Comparison {
    /// The verdict of `checks`: passed when every one passed, was explained, or cannot fail
    /// the run.
    pub fn of(checks: Vec<Check>) -> Comparison {
        let passed = checks
            .iter()
            .all(|c| c.passed || c.explained.is_some() || !c.fails_run);
        Comparison { passed, checks }
    }
}

/// Every check of `current` (alone, and against `previous` when given) with its allowance for
/// sampling noise and its verdict, before any explanation. `scale_from` is the profile whose
/// standard deviations measure numeric drift (none: `previous`'s): windows of one snapshot are
/// measured in the whole snapshot's, so that a calm week's narrow spread does not magnify the
/// next week's ordinary move, and every window pair of the history speaks in the same units.
pub fn settled_checks(
    previous: Option<&Profile>,
    current: &Profile,
    thresholds: &Thresholds,
    roles: &Roles,
    scale_from: Option<&Profile>,
) -> Vec<Check> {
    let mut pending = Vec::new();
    standalone_checks(current, thresholds, roles, &mut pending);
    if let Some(previous) = previous {
        drift_checks(
            previous,
            current,
            thresholds,
            roles,
            scale_from,
            &mut pending,
        );
    }
    let tests = pending.iter().filter(|p| p.sampling.is_some()).count();
    let alpha = thresholds.alpha / tests.max(1) as f64;
    let scope = Scope::new(roles, thresholds.fail_on, previous, current);
    pending
        .into_iter()
        .map(|pending| {
            let mut check = pending.settle(alpha);
            check.fails_run = scope.fails_run(check.name, check.column.as_deref());
            check
        })
        .collect()
}

/// What sampling noise in a check's value depends on; an allowance once the comparison's
/// number of tests, and so each test's share of alpha, is known.
enum Sampling {
    /// A Wasserstein-1 distance in units of the reference's spread: `spread` is the
    /// reference's ∫√(F(1−F))dx over its standard deviation.
    Transport {
        spread: f64,
        sd: f64,
        n: u64,
        m: u64,
    },
    /// A change (or, one-sided, a rise) of one share; `pooled` is its share in both together.
    Share {
        pooled: f64,
        n: u64,
        m: u64,
        two_sided: bool,
    },
    OutOfRange {
        n: u64,
        m: u64,
    },
    Unseen {
        singletons: u64,
        doubletons: u64,
        n: u64,
        m: u64,
    },
    /// A total variation distance between category distributions with these pooled shares.
    TotalVariation {
        shares: Vec<f64>,
        n: u64,
        m: u64,
    },
}

/// A check whose noise allowance is not known yet.
struct Pending {
    check: Check,
    sampling: Option<Sampling>,
}

impl From<Check> for Pending {
    fn from(check: Check) -> Pending {
        Pending {
            check,
            sampling: None,
        }
    }
}

impl Pending {
    fn with(check: Check, sampling: Sampling) -> Pending {
        Pending {
            check,
            sampling: Some(sampling),
        }
    }

    /// The check with its allowance at `alpha` and its verdict.
    fn settle(self, alpha: f64) -> Check {
        let Pending {
            mut check,
            sampling,
        } = self;
        let noise = match sampling {
            None => return check,
            Some(Sampling::TotalVariation { shares, n, m }) => {
                sampling::total_variation_allowance(&shares, n, m, alpha)
            }
            Some(Sampling::Transport { spread, sd, n, m }) => {
                wasserstein_allowance(spread, sd, n, m, alpha)
            }
            Some(Sampling::Share {
                pooled,
                n,
                m,
                two_sided,
            }) => sampling::share_allowance(pooled, n, m, alpha, two_sided),
            Some(Sampling::OutOfRange { n, m }) => sampling::out_of_range_allowance(n, m, alpha),
            Some(Sampling::Unseen {
                singletons,
                doubletons,
                n,
                m,
            }) => sampling::unseen_allowance(singletons, doubletons, n, m, alpha),
        };
        check.noise = Some(noise);
        if let (Some(value), Some(threshold)) = (check.value, check.threshold) {
            check.passed = value <= threshold.max(noise);
        }
        check
    }
}

fn check(name: &'static str, column: Option<&str>, value: f64, threshold: f64) -> Check {
    Check {
        name,
        column: column.map(String::from),
        value: Some(value),
        threshold: Some(threshold),
        noise: None,
        passed: value <= threshold,
        fails_run: true,
        detail: None,
        explained: None,
        explained_until: None,
        history: None,
    }
}

/// A check that did not run on this column, and why.
fn skipped(name: &'static str, column: &str, why: &str) -> Check {
    Check {
        name,
        column: Some(column.to_string()),
        value: None,
        threshold: None,
        noise: None,
        passed: true,
        fails_run: true,
        detail: Some(format!("skipped: {why}")),
        explained: None,
        explained_until: None,
        history: None,
    }
}

fn standalone_checks(
    current: &Profile,
    thresholds: &Thresholds,
    roles: &Roles,
    checks: &mut Vec<Pending>,
) {
    if let Some(label) = &roles.label {
        match current.column(label) {
            None => checks.push(
                Check {
                    name: "label_missing",
                    column: Some(label.clone()),
                    value: None,
                    threshold: None,
                    passed: false,
                    detail: Some("the snapshot has no label column".into()),
                    ..check("label_missing", Some(label), 0.0, 0.0)
                }
                .into(),
            ),
            Some(column) => {
                let missing = column.nulls as f64 / column.count.max(1) as f64;
                checks.push(
                    Check {
                        detail: Some(
                            "share of rows without a label (validate.max_label_missing)".into(),
                        ),
                        ..check(
                            "label_missing",
                            Some(label),
                            missing,
                            thresholds.max_label_missing,
                        )
                    }
                    .into(),
                );
                let invalid = column.label.map_or(0, |l| l.invalid);
                let rate = invalid as f64 / column.count.max(1) as f64;
                checks.push(
                    Check {
                        detail: Some(format!(
                            "{invalid} labels are neither 0/1 nor true/false (NaN included)"
                        )),
                        ..check("label_invalid", Some(label), rate, 0.0)
                    }
                    .into(),
                );
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
        checks.push(entry.into());
    }
}

/// A shrink beyond `row_count_change` fails; growth fails only past `max_growth`, when set.
fn row_count(previous: &Profile, current: &Profile, thresholds: &Thresholds) -> Check {
    let (then, now) = (previous.rows, current.rows);
    let base = then.max(1) as f64;
    let rows = format!("{now} rows, previously {then}");
    if now < then {
        let shrink = (then - now) as f64 / base;
        return Check {
            detail: Some(format!("{rows}: {:.1}% fewer", shrink * 100.0)),
            ..check(
                "row_count_change",
                None,
                shrink,
                thresholds.row_count_change,
            )
        };
    }
    let growth = (now - then) as f64 / base;
    let more = format!("{rows}: {:.1}% more", growth * 100.0);
    match thresholds.max_growth {
        Some(limit) => Check {
            detail: Some(more),
            ..check("row_count_change", None, growth, limit)
        },
        None => Check {
            threshold: None,
            passed: true,
            detail: Some(format!(
                "{more}; growth is not limited (validate.max_growth)"
            )),
            ..check("row_count_change", None, growth, 0.0)
        },
    }
}

fn drift_checks(
    previous: &Profile,
    current: &Profile,
    thresholds: &Thresholds,
    roles: &Roles,
    scale_from: Option<&Profile>,
    checks: &mut Vec<Pending>,
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
            None => checks.push(schema_change(name, "removed").into()),
            Some(now) if now.column_type != column.column_type => checks.push(
                schema_change(
                    name,
                    &format!(
                        "retyped from {} to {}",
                        column.column_type.name(),
                        now.column_type.name()
                    ),
                )
                .into(),
            ),
            Some(_) => {}
        }
    }
    for name in after.keys().filter(|n| !before.contains_key(*n)) {
        checks.push(schema_change(name, "added").into());
    }
    checks.push(row_count(previous, current, thresholds).into());
    if let Some(label) = &roles.label {
        let counts = |p: &Profile| p.column(label).and_then(|c| c.label);
        if let (Some(now), Some(then)) = (counts(current), counts(previous))
            && let (Some(rate_now), Some(rate_then)) = (now.rate(), then.rate())
        {
            let (n, m) = (
                then.positives + then.negatives,
                now.positives + now.negatives,
            );
            checks.push(Pending::with(
                Check {
                    detail: Some(format!(
                        "label rate {rate_now:.4}, previously {rate_then:.4}"
                    )),
                    ..check(
                        "label_rate_shift",
                        Some(label),
                        (rate_now - rate_then).abs(),
                        thresholds.label_rate_shift,
                    )
                },
                Sampling::Share {
                    pooled: (then.positives + now.positives) as f64 / (n + m) as f64,
                    n,
                    m,
                    two_sided: true,
                },
            ));
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
        let scale = scale_from
            .and_then(|p| p.column(name))
            .and_then(|c| c.moments.std());
        column_checks(name, then, now, thresholds, roles, scale, checks);
    }
}

fn column_checks(
    name: &str,
    then: &ColumnProfile,
    now: &ColumnProfile,
    thresholds: &Thresholds,
    roles: &Roles,
    scale: Option<f64>,
    checks: &mut Vec<Pending>,
) {
    let rise = now.null_rate() - then.null_rate();
    checks.push(Pending::with(
        check(
            "null_rate_rise",
            Some(name),
            rise.max(0.0),
            thresholds.null_rate_rise,
        ),
        Sampling::Share {
            pooled: (then.nulls + now.nulls) as f64 / (then.count + now.count).max(1) as f64,
            n: then.count,
            m: now.count,
            two_sided: false,
        },
    ));
    if now.column_type.is_temporal() {
        // A new snapshot's dates are later by design: range and drift would always fire.
        return;
    }
    let identifier = roles.identifiers.iter().any(|c| c == name);
    if identifier && now.quantiles.is_some() {
        // A numeric entity id is new by design too: new customers get higher ids.
        checks.push(skipped("numeric_drift", name, "an identifier column").into());
        return;
    }
    if let (Some(q_then), Some(q_now), Some(min), Some(max)) = (
        &then.quantiles,
        &now.quantiles,
        then.moments.min,
        then.moments.max,
    ) {
        let (n, m) = (q_then.count(), q_now.count());
        // Exact value counts where they were kept: a discrete column's ties then cost the
        // comparison nothing.
        let counts_now = now.value_counts();
        let outside = match &counts_now {
            Some(counts) => out_of_range_counts(min, max, counts),
            None => out_of_range_share(min, max, q_now),
        };
        checks.push(Pending::with(
            check("out_of_range", Some(name), outside, thresholds.out_of_range),
            Sampling::OutOfRange { n, m },
        ));
        let exact = then.value_counts().zip(counts_now);
        let distance = match &exact {
            Some((a, b)) => wasserstein_counts(a, b),
            None => wasserstein_sketches(q_then, q_now),
        };
        // In the given standard deviation, else the reference's; a constant reference has
        // none, so the current one's (or, both constant, the column's own units) stands in.
        let scale = [scale, then.moments.std(), now.moments.std()]
            .into_iter()
            .flatten()
            .find(|s| *s > 0.0 && s.is_finite())
            .unwrap_or(1.0);
        // Sampling noise is what two samples of one distribution show: under that hypothesis
        // both sides are draws of it, so its spread is estimated from them pooled (the
        // reference alone says nothing of noise when it happens to be constant, a dry week's
        // rainfall).
        let pooled = runfn_stats::sketch::quantiles::QuantileSketch::merge([q_then, q_now]);
        let mut pooled_moments = then.moments;
        pooled_moments.merge(&now.moments);
        if let (Some(distance), Some(spread)) = (distance, spread_integral(&pooled)) {
            let source = if exact.is_some() {
                "exact value counts"
            } else {
                "quantile sketches"
            };
            let mean_shift = (now.moments.n > 0 && then.moments.n > 0)
                .then_some(now.moments.mean - then.moments.mean);
            checks.push(Pending::with(
                Check {
                    detail: Some(format!(
                        "Wasserstein-1 {} over an sd of {}, from {source}{}",
                        number(distance),
                        number(scale),
                        mean_shift.map_or(String::new(), |d| format!("; mean moved {}", number(d)))
                    )),
                    ..check(
                        "numeric_drift",
                        Some(name),
                        distance / scale,
                        thresholds.numeric_drift,
                    )
                },
                Sampling::Transport {
                    spread: spread / scale,
                    sd: pooled_moments.std().unwrap_or(scale) / scale,
                    n,
                    m,
                },
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
            checks.push(skipped("categorical_drift", name, why).into());
            return;
        }
        let seen = |times: u64| f_then.counts().values().filter(|c| **c == times).count() as u64;
        checks.push(Pending::with(
            check(
                "new_categories",
                Some(name),
                new_category_share(f_then.counts(), f_now.counts()),
                thresholds.new_categories,
            ),
            Sampling::Unseen {
                singletons: seen(1),
                doubletons: seen(2),
                n: f_then.total(),
                m: f_now.total(),
            },
        ));
        let (before, after) = (f_then.counts(), f_now.counts());
        let (n, m) = (before.values().sum::<u64>(), after.values().sum::<u64>());
        let pooled: BTreeMap<&String, u64> =
            before
                .iter()
                .chain(after)
                .fold(BTreeMap::new(), |mut pooled, (key, count)| {
                    *pooled.entry(key).or_default() += count;
                    pooled
                });
        let shares: Vec<f64> = pooled
            .values()
            .map(|c| *c as f64 / (n + m).max(1) as f64)
            .collect();
        let (largest, category) = l_infinity(before, after);
        checks.push(Pending::with(
            Check {
                detail: category.map(|key| {
                    format!(
                        "total variation over {} categories; largest change in `{key}` ({})",
                        pooled.len(),
                        number(largest)
                    )
                }),
                ..check(
                    "categorical_drift",
                    Some(name),
                    total_variation(before, after),
                    thresholds.categorical_drift,
                )
            },
            Sampling::TotalVariation { shares, n, m },
        ));
    }
}

/// A number as a person reads it: four significant digits.
fn number(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let digits = (3 - value.abs().log10().floor() as i32).max(0) as usize;
    format!("{value:.digits$}")
}

fn schema_change(column: &str, what: &str) -> Check {
    Check {
        value: None,
        threshold: None,
        passed: false,
        detail: Some(format!("column {what}")),
        ..check("schema_change", Some(column), 0.0, 0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::tests::profile_of;

    /// The day explanations are judged on in these tests.
    const TODAY: &str = "2026-06-15";

    fn compare(
        previous: Option<&Profile>,
        current: &Profile,
        thresholds: &Thresholds,
        roles: &Roles,
        explanations: &[Explanation],
    ) -> Comparison {
        super::compare(previous, current, thresholds, roles, explanations, TODAY)
    }

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
            ..Roles::default()
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
                    positive_every: 2,
                    ..base.clone()
                },
                vec![("label_rate_shift", Some("y"))],
            ),
            (
                Data {
                    rows: 400,
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
        assert_eq!(
            drift.detail.as_deref(),
            Some("total variation over 3 categories; largest change in `basic` (0.1660)")
        );
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
            max_value: 1.0,
            until: "2026-12-31".into(),
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

    /// An explanation holds up to the value it names and until its date: a larger drift, or the
    /// same drift after the date, fails again and says why.
    #[test]
    fn an_explanation_is_bounded_by_its_value_and_its_date() {
        let base = Data::default();
        let after = Data {
            score_null_every: 5,
            ..base.clone()
        };
        let rise = find(
            &compare(
                Some(&base.profile()),
                &after.profile(),
                &Thresholds::default(),
                &roles(),
                &[],
            ),
            "null_rate_rise",
            Some("score"),
        )
        .value
        .unwrap();
        let bounded = |max_value: f64, until: &str| {
            let explanation = Explanation {
                column: Some("score".into()),
                check: "null_rate_rise".into(),
                reason: "the feed moved".into(),
                max_value,
                until: until.into(),
            };
            compare(
                Some(&base.profile()),
                &after.profile(),
                &Thresholds::default(),
                &roles(),
                &[explanation],
            )
        };
        let held = bounded(rise, TODAY);
        assert!(held.passed, "the bound and the last day are inclusive");
        let check = find(&held, "null_rate_rise", Some("score"));
        assert_eq!(check.explained_until.as_deref(), Some(TODAY));

        let larger = bounded(rise / 2.0, "2099-01-01");
        assert!(!larger.passed);
        let detail = find(&larger, "null_rate_rise", Some("score"))
            .detail
            .clone();
        assert!(
            detail.unwrap().contains("\"the feed moved\" covers up to"),
            "the failure says the explanation fell short"
        );
        let expired = bounded(1.0, "2026-06-14");
        assert!(!expired.passed);
        let detail = find(&expired, "null_rate_rise", Some("score"))
            .detail
            .clone();
        assert!(detail.unwrap().contains("expired on 2026-06-14"));
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
                ..Roles::default()
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
            ..Roles::default()
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
    fn lenient_thresholds_let_a_shift_pass() {
        let base = Data::default();
        let shifted = Data {
            spend_shift: 40.0,
            ..base.clone()
        };
        let lenient = Thresholds {
            out_of_range: 0.5,
            // 40 on a column of sd 29: a Wasserstein distance of 1.4 sd.
            numeric_drift: 1.5,
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
