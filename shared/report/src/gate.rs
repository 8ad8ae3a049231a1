//! The gate's section read back for the page. Two shapes: a paired test (`method: "paired"`),
//! whose checks carry a status, Δ's interval and the test's numbers per slice, and the older
//! point comparison (`"point"`, or no `method` at all), whose checks only say passed or not.
//! Fields the page does not use are ignored, so the gate may add more without breaking it.

use serde::Deserialize;
use serde_json::Value;

use crate::plots::{Class, IntervalRow, okabe_ito};

/// What a paired check decided; a point check is `Passed` or `Blocked` by its `passed`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "String")]
pub enum Status {
    Passed,
    Blocked,
    /// The test could not have detected a drop of the limit there: warned about, not gated.
    Underpowered,
    /// The metric is undefined there (one class only).
    Undefined,
    /// Reported only (a slice under `min_slice_rows`, a new slice).
    NotGated,
    /// A status this page does not know yet, shown by its own word.
    Other(String),
}

impl From<String> for Status {
    fn from(word: String) -> Status {
        match word.as_str() {
            "passed" => Status::Passed,
            "blocked" => Status::Blocked,
            "underpowered" => Status::Underpowered,
            "undefined" => Status::Undefined,
            "not_gated" => Status::NotGated,
            _ => Status::Other(word),
        }
    }
}

impl Status {
    /// Every known status, in the order the page's legends and lists use.
    pub const KNOWN: [Status; 5] = [
        Status::Passed,
        Status::Blocked,
        Status::Underpowered,
        Status::Undefined,
        Status::NotGated,
    ];

    /// The status in words, as the page shows it.
    pub fn word(&self) -> &str {
        match self {
            Status::Passed => "passed",
            Status::Blocked => "blocked",
            Status::Underpowered => "underpowered",
            Status::Undefined => "undefined",
            Status::NotGated => "not gated",
            Status::Other(word) => word,
        }
    }

    /// How the Δ chart draws a row of this status: green passed, vermillion blocked (ringed),
    /// orange underpowered, grey undefined, sky blue not gated; in `KNOWN`'s order.
    pub fn class(&self) -> Class {
        let color = match self {
            Status::Passed => okabe_ito::GREEN,
            Status::Blocked => okabe_ito::VERMILLION,
            Status::Underpowered => okabe_ito::ORANGE,
            Status::Undefined => okabe_ito::GREY,
            Status::NotGated => okabe_ito::SKY_BLUE,
            Status::Other(_) => okabe_ito::REDDISH_PURPLE,
        };
        Class {
            word: self.word().to_string(),
            color,
            ringed: *self == Status::Blocked,
            order: Status::KNOWN
                .iter()
                .position(|known| known == self)
                .unwrap_or(Status::KNOWN.len()),
        }
    }
}

/// The `gate` section.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Gate {
    #[serde(default)]
    pub passed: Option<bool>,
    #[serde(default)]
    pub no_baseline: bool,
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub rule: Option<String>,
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub underpowered: Vec<String>,
    #[serde(default)]
    pub undefined: Vec<String>,
    #[serde(default)]
    pub checks: Vec<Check>,
    #[serde(default)]
    pub reasons: Vec<String>,
}

/// One of the gate's checks. Everything after `note` comes with paired checks only.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Check {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub metric: Option<String>,
    /// `column=value`; `None` overall.
    #[serde(default)]
    pub slice: Option<String>,
    #[serde(default)]
    pub baseline: Option<f64>,
    #[serde(default)]
    pub candidate: Option<f64>,
    /// candidate − baseline, in the metric's own units.
    #[serde(default)]
    pub delta: Option<f64>,
    #[serde(default)]
    pub limit: Option<f64>,
    #[serde(default)]
    pub comparison: Option<String>,
    #[serde(default)]
    pub passed: Option<bool>,
    #[serde(default)]
    pub note: Option<String>,
    #[serde(default)]
    pub status: Option<Status>,
    /// `delong` or `bootstrap`.
    #[serde(default)]
    pub method: Option<String>,
    #[serde(default)]
    pub se: Option<f64>,
    /// Two-sided interval for `delta` at the gate's confidence.
    #[serde(default)]
    pub interval: Option<(f64, f64)>,
    /// The one-sided bound the rule compared with `limit`.
    #[serde(default)]
    pub bound: Option<f64>,
    #[serde(default)]
    pub p_value: Option<f64>,
    /// Holm-adjusted within the slice's column.
    #[serde(default)]
    pub p_adjusted: Option<f64>,
    #[serde(default)]
    pub rows: Option<f64>,
    #[serde(default)]
    pub positives: Option<f64>,
    /// The smallest drop the test detects with 80% power.
    #[serde(default)]
    pub detectable_drop: Option<f64>,
}

impl Check {
    /// The status, or for a check without one (a point check, `same_test_rows`), its `passed`.
    pub fn status(&self) -> Status {
        match (&self.status, self.passed) {
            (Some(status), _) => status.clone(),
            (None, Some(false)) => Status::Blocked,
            (None, _) => Status::Passed,
        }
    }

    /// `overall` or the slice's `column=value`.
    pub fn place(&self) -> &str {
        self.slice.as_deref().unwrap_or("overall")
    }

    /// A comparison of the metric between candidate and baseline, which the Δ plots show: an
    /// overall `<metric>_min_delta` or any slice's check, not `same_test_rows` or an absolute
    /// bound.
    fn compares(&self) -> bool {
        self.status.is_some()
            && self.metric.as_deref().is_some_and(|m| m != "rows")
            && (self.slice.is_some()
                || self.name.ends_with("_min_delta")
                || self.interval.is_some())
    }

    /// `93 rows, 8 positives` (`short`: `93 rows, 8 pos`), when the check has its counts.
    pub fn counts(&self, short: bool) -> Option<String> {
        let rows = self.rows?;
        Some(match self.positives {
            Some(p) if short => format!("{rows} rows, {p} pos"),
            Some(p) => format!("{rows} rows, {p} positives"),
            None => format!("{rows} rows"),
        })
    }

    /// Why the metric is undefined here, from the check's note or its counts.
    pub fn why_undefined(&self) -> String {
        let metric = self.metric.as_deref().unwrap_or("the metric");
        let counts = match (self.rows, self.positives) {
            (Some(r), Some(0.0)) => format!("no positives among its {r} rows"),
            (Some(r), Some(p)) if p == r => format!("only positives among its {r} rows"),
            (Some(r), Some(p)) => format!("{r} rows, {p} positives"),
            _ => "one class only".into(),
        };
        match &self.note {
            Some(note) => format!("{note} ({counts})"),
            None => format!("{metric} needs both classes: {counts}"),
        }
    }
}

impl Gate {
    /// The record's gate section; `None` without one, an error naming the field when it has a
    /// shape the page cannot read (the page then says so instead of drawing a guess).
    pub fn of(record: &Value) -> Option<Result<Gate, String>> {
        let section = record.get("gate")?;
        Some(serde_json::from_value(section.clone()).map_err(|err| {
            section["checks"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .find_map(|(i, check)| {
                    let err = serde_json::from_value::<Check>(check.clone()).err()?;
                    Some(format!("gate.checks[{i}]: {err}"))
                })
                .unwrap_or_else(|| format!("gate: {err}"))
        }))
    }

    /// A paired test with intervals, as opposed to an old point comparison.
    pub fn is_paired(&self) -> bool {
        self.method.as_deref() == Some("paired")
    }

    /// The confidence in percent, for labels: `95%`.
    pub fn confidence_label(&self) -> String {
        match self.confidence {
            Some(c) => format!("{}%", (c * 1000.0).round() / 10.0),
            None => "stated".into(),
        }
    }

    /// The metrics whose Δ the gate tested per slice or overall, in the order of the checks.
    pub fn plotted_metrics(&self) -> Vec<String> {
        let mut metrics: Vec<String> = Vec::new();
        for check in self.checks.iter().filter(|c| c.compares()) {
            let metric = check.metric.clone().unwrap_or_default();
            if !metrics.contains(&metric) {
                metrics.push(metric);
            }
        }
        metrics
    }

    /// The Δ plot's rows for `metric`: overall first, then each slice in the gate's order.
    pub fn delta_rows(&self, metric: &str) -> Vec<IntervalRow> {
        let compared = || {
            self.checks
                .iter()
                .filter(|c| c.compares() && c.metric.as_deref() == Some(metric))
        };
        compared()
            .filter(|c| c.slice.is_none())
            .chain(compared().filter(|c| c.slice.is_some()))
            .map(|c| {
                let status = c.status();
                IntervalRow {
                    label: match c.counts(true) {
                        Some(counts) => format!("{} ({counts})", c.place()),
                        None => c.place().to_string(),
                    },
                    delta: c.delta,
                    interval: c.interval,
                    limit: c.limit,
                    note: match (&status, c.delta) {
                        (Status::Undefined, _) => Some("undefined: one class only".into()),
                        (_, None) => Some(format!("no Δ: {}", c.note.as_deref().unwrap_or("?"))),
                        _ => None,
                    },
                    class: status.class(),
                }
            })
            .collect()
    }

    /// Whether the lower values of `metric` are the better ones, as the checks' comparisons say
    /// (a lower-is-better metric is bounded from above: `<=`).
    pub fn lower_is_better(&self, metric: &str) -> bool {
        self.checks
            .iter()
            .find(|c| c.compares() && c.metric.as_deref() == Some(metric))
            .is_some_and(|c| c.comparison.as_deref() == Some("<="))
    }

    /// The places the paired test gated, found underpowered, undefined or only reported, each
    /// once per list with the checks that put it there.
    pub fn lists(&self) -> Lists<'_> {
        let mut lists = Lists {
            several_metrics: self.plotted_metrics().len() > 1,
            ..Lists::default()
        };
        for check in self.checks.iter().filter(|c| c.compares()) {
            let list = match check.status() {
                Status::Passed | Status::Blocked => &mut lists.gated,
                Status::Underpowered => &mut lists.underpowered,
                Status::Undefined => &mut lists.undefined,
                Status::NotGated => &mut lists.not_gated,
                Status::Other(_) => continue,
            };
            match list.iter_mut().find(|e| e.place == check.place()) {
                Some(entry) => entry.checks.push(check),
                None => list.push(Entry {
                    place: check.place().to_string(),
                    checks: vec![check],
                }),
            }
        }
        // The section's own lists may name places whose checks are not among those shown.
        for (names, list) in [
            (&self.underpowered, &mut lists.underpowered),
            (&self.undefined, &mut lists.undefined),
        ] {
            for name in names {
                if !list.iter().any(|e| e.place == *name) {
                    list.push(Entry {
                        place: name.clone(),
                        checks: Vec::new(),
                    });
                }
            }
        }
        lists
    }

    /// Whether any failed check concerns `place` (the gate blocked on it).
    pub fn blocked_on(&self, place: &str) -> bool {
        self.checks
            .iter()
            .any(|c| c.passed == Some(false) && c.place() == place)
    }
}

/// One place in a list, with the checks that put it there (none when only the section's own
/// list names it).
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub place: String,
    pub checks: Vec<&'a Check>,
}

/// The places of a paired gate by what the test could say about them.
#[derive(Debug, Clone, Default)]
pub struct Lists<'a> {
    pub gated: Vec<Entry<'a>>,
    pub underpowered: Vec<Entry<'a>>,
    pub undefined: Vec<Entry<'a>>,
    pub not_gated: Vec<Entry<'a>>,
    /// More than one metric was tested, so a place is named with its metrics.
    pub several_metrics: bool,
}

impl Lists<'_> {
    /// `tier=smb`, or with several metrics tested `tier=smb (auc, logloss)`.
    pub fn name(&self, entry: &Entry<'_>) -> String {
        let metrics: Vec<&str> = entry
            .checks
            .iter()
            .filter_map(|c| c.metric.as_deref())
            .collect();
        if self.several_metrics && !metrics.is_empty() {
            format!("{} ({})", entry.place, metrics.join(", "))
        } else {
            entry.place.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paired() -> Value {
        json!({"gate": {
        "passed": true, "no_baseline": false, "gates_run": ["auc_min_delta", "max_slice_drop"],
        "reasons": [], "method": "paired", "rule": "non_inferiority", "confidence": 0.95,
        "underpowered": ["tier=smb"], "undefined": ["tier=tiny"],
        "checks": [
            {"name": "same_test_rows", "metric": "rows", "slice": null, "baseline": 500.0,
             "candidate": 500.0, "delta": 0.0, "limit": 0.0, "comparison": "==", "passed": true},
            {"name": "max_slice_drop", "metric": "auc", "slice": "tier=smb", "baseline": 0.8,
             "candidate": 0.79, "delta": -0.01, "limit": -0.01, "comparison": ">=", "passed": true,
             "status": "underpowered", "interval": [-0.08, 0.06], "rows": 93, "positives": 8,
             "detectable_drop": 0.09, "future_field": {"x": 1}},
            {"name": "auc_min_delta", "metric": "auc", "slice": null, "baseline": 0.81,
             "candidate": 0.812, "delta": 0.002, "limit": -0.002, "comparison": ">=",
             "passed": true, "status": "passed", "interval": [-0.001, 0.005], "rows": 500,
             "positives": 60},
            {"name": "max_slice_drop", "metric": "auc", "slice": "tier=tiny", "baseline": null,
             "candidate": null, "delta": null, "limit": -0.01, "comparison": ">=",
             "passed": true, "status": "undefined", "rows": 12, "positives": 0},
            {"name": "max_slice_drop", "metric": "auc", "slice": "tier=new", "delta": 0.01,
             "limit": -0.01, "comparison": ">=", "passed": true, "status": "shiny"}
        ]}})
    }

    #[test]
    fn a_paired_gate_gives_rows_overall_first_and_lists_by_status() {
        let gate = Gate::of(&paired()).unwrap().unwrap();
        assert!(gate.is_paired());
        assert_eq!(gate.confidence_label(), "95%");
        assert_eq!(
            gate.plotted_metrics(),
            ["auc"],
            "same_test_rows is not plotted"
        );
        let rows = gate.delta_rows("auc");
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "overall (500 rows, 60 pos)",
                "tier=smb (93 rows, 8 pos)",
                "tier=tiny (12 rows, 0 pos)",
                "tier=new"
            ]
        );
        assert_eq!(rows[1].interval, Some((-0.08, 0.06)));
        assert_eq!(rows[1].class, Status::Underpowered.class());
        assert_eq!(rows[2].note.as_deref(), Some("undefined: one class only"));
        assert_eq!(rows[3].class, Status::Other("shiny".into()).class());
        assert_eq!(
            rows[3].class.word, "shiny",
            "an unknown status keeps its word"
        );

        let lists = gate.lists();
        let names = |l: &[Entry<'_>]| l.iter().map(|e| lists.name(e)).collect::<Vec<_>>();
        assert_eq!(names(&lists.gated), ["overall"]);
        assert_eq!(names(&lists.underpowered), ["tier=smb"]);
        assert_eq!(names(&lists.undefined), ["tier=tiny"]);
        assert!(lists.not_gated.is_empty());
        assert_eq!(
            lists.undefined[0].checks[0].why_undefined(),
            "auc needs both classes: no positives among its 12 rows"
        );
        assert!(!gate.blocked_on("tier=smb"));
    }

    #[test]
    fn a_point_gate_has_no_delta_plot_and_its_checks_are_passed_or_blocked() {
        let record = json!({"gate": {"passed": true, "no_baseline": false, "gates_run": [],
            "reasons": [], "checks": [
                {"name": "max_slice_drop", "metric": "auc", "slice": "tier=smb", "baseline": 0.8,
                 "candidate": 0.79, "delta": -0.01, "limit": -0.02, "comparison": ">=", "passed": true},
                {"name": "auc_min", "metric": "auc", "slice": null, "candidate": 0.6,
                 "limit": 0.7, "comparison": ">=", "passed": false}]}});
        let gate = Gate::of(&record).unwrap().unwrap();
        assert!(!gate.is_paired());
        assert!(gate.plotted_metrics().is_empty());
        assert_eq!(gate.checks[1].status(), Status::Blocked);
        assert!(gate.blocked_on("overall"));
        assert!(Gate::of(&json!({})).is_none());
        let bad = Gate::of(&json!({"gate": {"checks": [{"interval": "wide"}]}})).unwrap();
        assert!(
            bad.unwrap_err().starts_with("gate.checks[0]: invalid type"),
            "the check is named"
        );
    }
}
