//! What a night came to: passed (and what it registered and moved), blocked by the gate,
//! failed at a stage, or stopped without a failure; the checks that failed with their numbers,
//! what the gate compared, and what the alias did. Read from a `Night` and the registry.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::alias::{AliasLog, describe_move, version_words};
use crate::gate::Gate;
use crate::night::Night;
use crate::plots::{Class, okabe_ito};
use runfn_registry::AliasMove;

/// What a night came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The gate passed and the model became the alias's version.
    Promoted,
    /// No baseline to compare with: the first model, promoted.
    FirstModel,
    /// Registered, the alias not moved (no `--promote`).
    Registered,
    /// The gate blocked the candidate.
    Blocked,
    /// A stage before or after the gate failed.
    Failed,
    /// No stage failed, yet nothing was registered: the night stopped (killed, or running).
    Incomplete,
}

impl Decision {
    pub const ALL: [Decision; 6] = [
        Decision::Promoted,
        Decision::FirstModel,
        Decision::Registered,
        Decision::Blocked,
        Decision::Failed,
        Decision::Incomplete,
    ];

    /// How the history's chart draws a night of this decision: green promoted, sky blue a
    /// first model, blue registered, vermillion blocked (ringed), grey failed, reddish purple
    /// incomplete; in `ALL`'s order.
    pub fn class(self) -> Class {
        let color = match self {
            Decision::Promoted => okabe_ito::GREEN,
            Decision::FirstModel => okabe_ito::SKY_BLUE,
            Decision::Registered => okabe_ito::BLUE,
            Decision::Blocked => okabe_ito::VERMILLION,
            Decision::Failed => okabe_ito::GREY,
            Decision::Incomplete => okabe_ito::REDDISH_PURPLE,
        };
        Class {
            word: self.word().to_string(),
            color,
            ringed: self == Decision::Blocked,
            order: Decision::ALL.iter().position(|d| *d == self).unwrap_or(0),
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Decision::Promoted => "promoted",
            Decision::FirstModel => "first model",
            Decision::Registered => "registered, not promoted",
            Decision::Blocked => "blocked",
            Decision::Failed => "failed",
            Decision::Incomplete => "incomplete",
        }
    }

    /// `passed`, `blocked`, `failed` or `incomplete`: never `passed` unless the night
    /// registered its model.
    pub fn status(self) -> &'static str {
        match self {
            Decision::Promoted | Decision::FirstModel | Decision::Registered => "passed",
            Decision::Blocked => "blocked",
            Decision::Failed => "failed",
            Decision::Incomplete => "incomplete",
        }
    }
}

/// A check of the failed stage's record that failed, with its numbers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedCheck {
    /// The record's section (`validate`, `leaks`, `gate`, `mf_hash`).
    pub section: String,
    pub name: String,
    /// The column, slice or field it is about.
    pub place: Option<String>,
    pub value: Option<f64>,
    pub threshold: Option<f64>,
    /// How the value had to compare with the threshold (`>=`), when the tool says.
    pub comparison: Option<String>,
    pub detail: Option<String>,
}

impl FailedCheck {
    /// `0.6 vs threshold 0.5`, `Δ -0.03 vs limit >= -0.01`, or nothing without numbers.
    pub fn numbers(&self) -> Option<String> {
        let value = self.value.map(number)?;
        Some(match (self.threshold, &self.comparison) {
            (Some(t), Some(c)) => format!("{value} vs limit {c} {}", number(t)),
            (Some(t), None) => format!("{value} vs threshold {}", number(t)),
            (None, _) => value,
        })
    }

    /// One line: `validate row_count_change: 0.6 vs threshold 0.5 (8000 rows, previously 20000)`.
    pub fn describe(&self) -> String {
        let mut line = format!("{} {}", self.section, self.name);
        if let Some(place) = &self.place {
            line.push_str(&format!(" [{place}]"));
        }
        if let Some(numbers) = self.numbers() {
            line.push_str(&format!(": {numbers}"));
        }
        if let Some(detail) = &self.detail {
            line.push_str(&format!(" ({detail})"));
        }
        line
    }
}

/// A number as the page writes it: 4 decimals, smaller ones in exponent form.
pub fn number(v: f64) -> String {
    if v != 0.0 && v.abs() < 1e-4 {
        format!("{v:.2e}")
    } else {
        format!("{}", (v * 1e4).round() / 1e4)
    }
}

/// The fields a check may carry, whichever tool wrote it (ds-validate, leak-check, gate).
#[derive(Debug, Default, Deserialize)]
struct CheckFields {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    passed: Option<bool>,
    #[serde(default)]
    explained: Option<String>,
    #[serde(default)]
    column: Option<String>,
    #[serde(default)]
    slice: Option<String>,
    #[serde(default)]
    metric: Option<String>,
    #[serde(default)]
    value: Option<f64>,
    #[serde(default)]
    threshold: Option<f64>,
    #[serde(default)]
    delta: Option<f64>,
    #[serde(default)]
    candidate: Option<f64>,
    #[serde(default)]
    limit: Option<f64>,
    #[serde(default)]
    comparison: Option<String>,
    #[serde(default)]
    count: Option<f64>,
    #[serde(default)]
    of: Option<f64>,
    #[serde(default)]
    fraction: Option<f64>,
    #[serde(default)]
    setting: Option<Value>,
    #[serde(default)]
    detail: Option<String>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

impl CheckFields {
    fn into_failed(self, section: &str) -> FailedCheck {
        let name = self.name.unwrap_or_else(|| "?".into());
        if let Some(count) = self.count {
            // leak-check: a count of rows (or entities, pairs) against the tolerance it had.
            let setting = self.setting.unwrap_or(Value::Null);
            let threshold = setting["max_count"]
                .as_f64()
                .or_else(|| setting["max_fraction"].as_f64());
            let mut detail = match (self.of, self.fraction) {
                (Some(of), Some(f)) => format!("{count} of {of} ({})", number(f)),
                _ => format!("{count} found"),
            };
            if let Some(setting) = setting.as_object().filter(|s| !s.is_empty()) {
                detail.push_str(&format!("; allowed {}", Value::Object(setting.clone())));
            }
            if let Some(note) = self.reason.or(self.note) {
                detail.push_str(&format!("; {note}"));
            }
            let value = if setting.get("max_fraction").is_some() && threshold.is_some() {
                self.fraction
            } else {
                Some(count)
            };
            return FailedCheck {
                section: section.into(),
                name,
                place: self.column,
                value,
                threshold,
                comparison: Some("<=".into()),
                detail: Some(detail),
            };
        }
        let (value, threshold) = match (self.value, self.delta.or(self.candidate), self.limit) {
            (Some(v), _, _) => (Some(v), self.threshold),
            (None, d, Some(l)) => (d, Some(l)),
            (None, d, None) => (d, self.threshold),
        };
        let place = match (self.slice, self.column, &self.metric) {
            (Some(slice), _, _) => Some(slice),
            (None, Some(column), _) => Some(column),
            (None, None, Some(_)) if section == "gate" => Some("overall".into()),
            _ => None,
        };
        let name = match &self.metric {
            Some(metric) if section == "gate" && !name.contains(metric.as_str()) => {
                format!("{name} ({metric})")
            }
            _ => name,
        };
        FailedCheck {
            section: section.into(),
            name,
            place,
            value,
            threshold,
            comparison: self.comparison,
            detail: self.detail.or(self.note).or(self.reason),
        }
    }
}

/// The failed checks of `record`: in each section with `"passed": false`, its checks that
/// failed (an explained drift is not a failure), its lint problems, or else its reason.
pub fn failed_checks(record: &Value) -> (Vec<FailedCheck>, Vec<String>) {
    let mut checks = Vec::new();
    let mut reasons = Vec::new();
    for (section, value) in record.as_object().into_iter().flatten() {
        if value.get("passed") != Some(&Value::Bool(false)) {
            continue;
        }
        let before = checks.len();
        for check in value["checks"].as_array().into_iter().flatten() {
            let fields: CheckFields = serde_json::from_value(check.clone()).unwrap_or_default();
            if fields.passed == Some(false) && fields.explained.is_none() {
                checks.push(fields.into_failed(section));
            }
        }
        for problem in value["problems"].as_array().into_iter().flatten() {
            checks.push(FailedCheck {
                section: section.clone(),
                name: "lint".into(),
                place: problem["field"].as_str().map(str::to_string),
                value: None,
                threshold: None,
                comparison: None,
                detail: problem["message"].as_str().map(str::to_string),
            });
        }
        if value["check"]["matched"] == Value::Bool(false) {
            checks.push(FailedCheck {
                section: section.clone(),
                name: "check".into(),
                place: None,
                value: None,
                threshold: None,
                comparison: None,
                detail: Some(format!(
                    "the manifest no longer hashes to {}",
                    value["check"]["expected"].as_str().unwrap_or("?")
                )),
            });
        }
        reasons.extend(
            value["reasons"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(|r| format!("{section}: {r}")),
        );
        if let Some(reason) = value["reason"].as_str() {
            reasons.push(format!("{section}: {reason}"));
        }
        if checks.len() == before
            && !reasons
                .iter()
                .any(|r| r.starts_with(&format!("{section}:")))
        {
            reasons.push(format!("{section}: failed (the section names no check)"));
        }
    }
    (checks, reasons)
}

/// A slice of the gate's comparison, with its counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SliceCount {
    pub place: String,
    pub rows: Option<f64>,
    pub positives: Option<f64>,
    pub status: String,
    pub delta: Option<f64>,
    pub interval: Option<(f64, f64)>,
}

/// What the gate compared and decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateView {
    pub passed: Option<bool>,
    pub no_baseline: bool,
    pub method: Option<String>,
    pub confidence: Option<f64>,
    /// The model compared with: `baseline.registered_as` (`churn@2`), else its model file.
    pub baseline: Option<String>,
    /// The registered version compared with, from `baseline`.
    pub baseline_version: Option<i64>,
    /// The metric of `delta`: `auc`.
    pub metric: String,
    pub candidate: Option<f64>,
    pub baseline_value: Option<f64>,
    /// Candidate − baseline overall.
    pub delta: Option<f64>,
    /// Δ's two-sided interval at `confidence` (a paired gate).
    pub interval: Option<(f64, f64)>,
    pub limit: Option<f64>,
    pub comparison: Option<String>,
    pub reasons: Vec<String>,
    /// Rows and positives of each slice the gate compared on `metric`.
    pub slices: Vec<SliceCount>,
}

impl GateView {
    /// The gate of `record`, with the baseline it compared; `None` without a gate section.
    pub fn of(record: &Value) -> Option<GateView> {
        let gate = match Gate::of(record)? {
            Ok(gate) => gate,
            Err(err) => Gate {
                passed: record["gate"]["passed"].as_bool(),
                reasons: vec![format!("the gate's section cannot be read: {err}")],
                ..Gate::default()
            },
        };
        let metric = "auc".to_string();
        let overall = gate
            .checks
            .iter()
            .filter(|c| c.slice.is_none() && c.metric.as_deref() == Some(metric.as_str()))
            .find(|c| c.interval.is_some() || c.name.ends_with("_min_delta"));
        let candidate = record["evaluate"]["overall"][&metric].as_f64();
        let baseline_value = record["baseline"]["overall"][&metric].as_f64();
        let delta = overall
            .and_then(|c| c.delta)
            .or(match (candidate, baseline_value) {
                (Some(c), Some(b)) => Some(c - b),
                _ => None,
            });
        let baseline = record["baseline"]["registered_as"]
            .as_str()
            .or_else(|| record["baseline"]["model"].as_str())
            .map(str::to_string);
        let baseline_version = record["baseline"]["registered_as"]
            .as_str()
            .and_then(version_of);
        let slices = gate
            .checks
            .iter()
            .filter(|c| c.slice.is_some() && c.metric.as_deref() == Some(metric.as_str()))
            .map(|c| SliceCount {
                place: c.place().to_string(),
                rows: c.rows,
                positives: c.positives,
                status: c.status().word().to_string(),
                delta: c.delta,
                interval: c.interval,
            })
            .collect();
        Some(GateView {
            passed: gate.passed,
            no_baseline: gate.no_baseline,
            method: gate.method.clone(),
            confidence: gate.confidence,
            baseline,
            baseline_version,
            candidate: overall.and_then(|c| c.candidate).or(candidate),
            baseline_value: overall.and_then(|c| c.baseline).or(baseline_value),
            delta,
            interval: overall.and_then(|c| c.interval),
            limit: overall.and_then(|c| c.limit),
            comparison: overall.and_then(|c| c.comparison.clone()),
            metric,
            reasons: gate.reasons,
            slices,
        })
    }

    /// `Δ auc +0.0123 [-0.0010, +0.0250] (95%), limit >= -0.002, against churn@2`.
    pub fn describe(&self) -> String {
        if self.no_baseline {
            return "no baseline to compare with (a first model)".into();
        }
        let signed = |v: f64| {
            if v != 0.0 && v.abs() < 1e-4 {
                format!("{v:+.2e}")
            } else {
                format!("{v:+.4}")
            }
        };
        let mut line = match self.delta {
            Some(d) => format!("Δ {} {}", self.metric, signed(d)),
            None => format!("no Δ {}", self.metric),
        };
        if let Some((lo, hi)) = self.interval {
            line.push_str(&format!(" [{}, {}]", signed(lo), signed(hi)));
            if let Some(c) = self.confidence {
                line.push_str(&format!(" ({}%)", (c * 1000.0).round() / 10.0));
            }
        }
        if let Some(limit) = self.limit {
            let cmp = self.comparison.as_deref().unwrap_or("vs");
            line.push_str(&format!(", limit {cmp} {}", signed(limit)));
        }
        if let Some(baseline) = &self.baseline {
            line.push_str(&format!(", candidate vs baseline {baseline}"));
        }
        line
    }
}

/// `churn@2` → 2.
fn version_of(reference: &str) -> Option<i64> {
    reference.rsplit_once('@')?.1.parse().ok()
}

/// The name in `churn@prod` or `churn@2`.
fn name_of(reference: &str) -> Option<String> {
    reference
        .split_once('@')
        .map(|(name, _)| name.to_string())
        .filter(|n| !n.is_empty() && !n.contains('/'))
}

/// The stage that failed, with what it said.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailedStage {
    pub stage: Option<String>,
    pub exit_code: Option<i32>,
    pub meaning: String,
    pub checks: Vec<FailedCheck>,
    /// The failing sections' reasons (the gate's, a refusal's).
    pub reasons: Vec<String>,
    /// `failed.err`, a line each.
    pub message: Vec<String>,
}

/// What the night registered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Registered {
    pub name: Option<String>,
    pub version: i64,
    pub promoted: Option<String>,
}

/// What the alias did during the night.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AliasView {
    /// `churn@prod`, or null when no model name was known.
    pub alias: Option<String>,
    pub registry: Option<String>,
    /// Whether the registry was found.
    pub found: bool,
    pub error: Option<String>,
    /// The version it points at now.
    pub version: Option<i64>,
    /// The version that served when the night began, as the night's records say (the
    /// baseline compared, the profile drift was measured against).
    pub before: Option<i64>,
    /// Whether this night moved it.
    pub moved: bool,
    /// This night's move.
    #[serde(rename = "move")]
    pub this_move: Option<AliasMove>,
    /// Other moves since the night began (by hand: `register alias`).
    pub moved_since: Vec<AliasMove>,
    pub summary: String,
}

/// What a night came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// `passed`, `blocked`, `failed` or `incomplete`.
    pub status: &'static str,
    pub decision: Decision,
    /// One line: the verdict and why, then what the alias did.
    pub summary: String,
    /// The verdict and why, without the alias.
    #[serde(skip)]
    pub headline: String,
    pub failed: Option<FailedStage>,
    pub gate: Option<GateView>,
    pub registered: Option<Registered>,
    pub prod: AliasView,
}

/// The night's record that went furthest among those with `section` (the failed stage's record
/// first: it went furthest of all).
pub fn furthest_with<'a>(night: &'a Night, section: &str) -> Option<&'a Value> {
    let failed = night.failure.as_ref().and_then(|f| f.record.as_ref());
    failed.filter(|r| r.get(section).is_some()).or_else(|| {
        night
            .records
            .iter()
            .filter(|f| f.record.get(section).is_some())
            .max_by_key(|f| f.record["timings"].as_array().map_or(0, Vec::len))
            .map(|f| &f.record)
    })
}

/// The model whose alias the night would move: what it registered, or compared with, or
/// measured drift against, or the manifest's name.
pub fn model_name(night: &Night) -> Option<String> {
    let at = |section: &str, path: &[&str]| -> Option<String> {
        let mut value = furthest_with(night, section)?;
        for key in path {
            value = value.get(key)?;
        }
        value.as_str().map(str::to_string)
    };
    at("register", &["register", "name"])
        .or_else(|| at("baseline", &["baseline", "registered_as"]).and_then(|r| name_of(&r)))
        .or_else(|| {
            at("validate", &["validate", "previous_model", "reference"]).and_then(|r| name_of(&r))
        })
        .or_else(|| {
            at("manifest", &["manifest", "eval", "baseline_model"]).and_then(|r| name_of(&r))
        })
        .or_else(|| at("manifest", &["manifest", "name"]))
}

/// The version that served when the night began, as its records say; `Some(None)` when they
/// say nothing served (a first model), `None` when they do not say.
fn served_before(night: &Night) -> Option<Option<i64>> {
    if let Some(record) = furthest_with(night, "baseline")
        && let Some(reference) = record["baseline"]["registered_as"].as_str()
    {
        return Some(version_of(reference));
    }
    if let Some(record) = furthest_with(night, "gate")
        && record["gate"]["no_baseline"] == Value::Bool(true)
    {
        return Some(None);
    }
    let record = furthest_with(night, "validate")?;
    let previous = record["validate"].get("previous_model")?;
    Some(previous["version"].as_i64())
}

impl Outcome {
    /// The night's outcome; `log` is its alias read from the registry (`None`: no model name
    /// was known to look it up). Moves of the alias from the night's start until `until` (the
    /// next night's start, in a history; `None`: until now) that the night did not make are
    /// named as made by another hand.
    pub fn of(night: &Night, log: Option<&AliasLog>, until: Option<&str>) -> Outcome {
        let gate = furthest_with(night, "gate").and_then(GateView::of);
        let registered = furthest_with(night, "register")
            .filter(|r| r["register"]["passed"] == Value::Bool(true))
            .and_then(|r| {
                Some(Registered {
                    name: r["register"]["name"].as_str().map(str::to_string),
                    version: r["register"]["version"].as_i64()?,
                    promoted: r["register"]["promoted"].as_str().map(str::to_string),
                })
            });
        let failed = night.failure.as_ref().map(|f| {
            let (checks, reasons) = f.record.as_ref().map(failed_checks).unwrap_or_default();
            FailedStage {
                stage: f.stage.clone(),
                exit_code: f.exit_code,
                meaning: f.meaning(),
                checks,
                reasons,
                message: f.message.clone(),
            }
        });
        let blocked_by_gate = night.failure.as_ref().is_some_and(|f| {
            f.record
                .as_ref()
                .is_some_and(|r| r["gate"]["passed"] == Value::Bool(false))
        });
        let decision = match (&failed, &registered) {
            (Some(_), _) if blocked_by_gate => Decision::Blocked,
            (Some(_), _) => Decision::Failed,
            (None, Some(r)) if r.promoted.is_some() => {
                if gate.as_ref().is_some_and(|g| g.no_baseline) {
                    Decision::FirstModel
                } else {
                    Decision::Promoted
                }
            }
            (None, Some(_)) => Decision::Registered,
            (None, None) => Decision::Incomplete,
        };
        let prod = alias_view(night, log, registered.as_ref(), until);
        let headline = headline(night, decision, failed.as_ref(), gate.as_ref(), &registered);
        Outcome {
            status: decision.status(),
            decision,
            summary: format!("{headline}. {}", prod.summary),
            headline,
            failed,
            gate,
            registered,
            prod,
        }
    }
}

fn alias_view(
    night: &Night,
    log: Option<&AliasLog>,
    registered: Option<&Registered>,
    until: Option<&str>,
) -> AliasView {
    let before = served_before(night);
    let Some(log) = log else {
        return AliasView {
            alias: None,
            registry: None,
            found: false,
            error: None,
            version: None,
            before: before.flatten(),
            moved: false,
            this_move: None,
            moved_since: Vec::new(),
            summary: "the alias was not looked up: no model name in the records (pass --model)"
                .into(),
        };
    };
    let name = log.name();
    let promoted_here = registered.filter(|r| r.promoted.as_deref() == Some(log.alias.as_str()));
    let this_move = promoted_here.and_then(|r| log.move_to(r.version)).cloned();
    let time = |text: &str| humantime::parse_rfc3339_weak(text).ok();
    let (start, end) = (
        night.started_at.as_deref().and_then(time),
        until.and_then(time),
    );
    let since = |m: &&AliasMove| match (start, time(&m.at)) {
        (Some(start), Some(at)) => at >= start && end.is_none_or(|end| at < end),
        _ => false,
    };
    let moved_since: Vec<AliasMove> = log
        .moves
        .iter()
        .filter(since)
        .filter(|m| Some(*m) != this_move.as_ref())
        .cloned()
        .collect();
    let moved = promoted_here.is_some();
    let mut summary = match (&log.error, log.found, promoted_here) {
        (Some(err), _, _) => format!("{name}: the registry could not be read ({err})"),
        (None, _, Some(r)) => {
            let from = this_move
                .as_ref()
                .map(|m| m.from_version)
                .or(before)
                .flatten();
            format!(
                "{name} moved from {} to {} (this night's registration)",
                version_words(from),
                version_words(Some(r.version))
            )
        }
        (None, false, None) => format!(
            "{name} did not move: there is no registry at {} (nothing serves yet)",
            log.registry.display()
        ),
        (None, true, None) => match (log.version, before) {
            (None, _) => format!("{name} did not move: it points at no version (nothing serves)"),
            (Some(now), Some(Some(then))) if now == then => {
                format!(
                    "{name} did not move: it is {}, as when the night began",
                    version_words(Some(now))
                )
            }
            (Some(now), _) => format!(
                "{name} did not move this night: it is {}",
                version_words(Some(now))
            ),
        },
    };
    if !moved_since.is_empty() {
        let moves: Vec<String> = moved_since.iter().map(describe_move).collect();
        summary.push_str(&format!(
            "; moved {}, not by it: {}",
            if until.is_some() {
                "before the next night began"
            } else {
                "since the night began"
            },
            moves.join("; ")
        ));
    }
    AliasView {
        alias: Some(name),
        registry: Some(log.registry.display().to_string()),
        found: log.found,
        error: log.error.clone(),
        version: log.version,
        before: before.flatten(),
        moved,
        this_move,
        moved_since,
        summary,
    }
}

fn headline(
    night: &Night,
    decision: Decision,
    failed: Option<&FailedStage>,
    gate: Option<&GateView>,
    registered: &Option<Registered>,
) -> String {
    let stage = || {
        failed.map_or_else(String::new, |f| {
            format!(
                " at {} (exit {}: {})",
                f.stage.as_deref().unwrap_or("an unknown stage"),
                f.exit_code.map_or_else(|| "?".into(), |c| c.to_string()),
                f.meaning
            )
        })
    };
    let why = || {
        let f = failed?;
        f.checks
            .first()
            .map(FailedCheck::describe)
            .or_else(|| f.reasons.first().cloned())
            .or_else(|| f.message.last().cloned())
    };
    match decision {
        Decision::Blocked => format!(
            "BLOCKED{}: {}",
            stage(),
            gate.map_or_else(|| "the gate blocked".into(), GateView::describe)
        ),
        Decision::Failed => match why() {
            Some(why) => format!("FAILED{}: {why}", stage()),
            None => format!("FAILED{}", stage()),
        },
        Decision::Incomplete => {
            let furthest = night
                .records
                .iter()
                .max_by_key(|f| f.record["timings"].as_array().map_or(0, Vec::len))
                .map_or_else(|| "none".into(), |f| f.name.clone());
            format!(
                "INCOMPLETE: no stage failed, but nothing was registered (the furthest record is \
                 {furthest}: killed, or still running)"
            )
        }
        Decision::Promoted | Decision::FirstModel | Decision::Registered => {
            let r = registered.as_ref().expect("a passed night registered");
            format!(
                "PASSED: {} version {} registered ({}){}",
                r.name.as_deref().unwrap_or("the model"),
                r.version,
                decision.word(),
                gate.filter(|g| !g.no_baseline)
                    .map(|g| format!("; {}", g.describe()))
                    .unwrap_or_default()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn failed_checks_carry_their_numbers_and_explained_drift_is_not_one() {
        let record = json!({
            "validate": {"passed": false, "checks": [
                {"name": "row_count_change", "column": null, "value": 0.6, "threshold": 0.5,
                 "passed": false, "detail": "8000 rows, previously 20000"},
                {"name": "categorical_drift", "column": "region", "value": 0.2,
                 "threshold": 0.05, "passed": false, "explained": "campaign in central"},
                {"name": "bad_values", "column": "age", "value": 0.0, "threshold": 0.001,
                 "passed": true}]},
            "leaks": {"passed": true, "checks": [{"name": "x", "passed": false, "count": 1}]},
        });
        let (checks, reasons) = failed_checks(&record);
        assert_eq!(checks.len(), 1, "{checks:?}");
        assert_eq!(
            checks[0].describe(),
            "validate row_count_change: 0.6 vs threshold 0.5 (8000 rows, previously 20000)"
        );
        assert!(reasons.is_empty());

        let gate = json!({"gate": {"passed": false, "reasons": ["overall: auc fell"], "checks": [
            {"name": "auc_min_delta", "metric": "auc", "slice": null, "delta": -0.03,
             "limit": -0.01, "comparison": ">=", "passed": false, "note": "evidence of a drop"}]}});
        let (checks, reasons) = failed_checks(&gate);
        assert_eq!(
            checks[0].describe(),
            "gate auc_min_delta [overall]: -0.03 vs limit >= -0.01 (evidence of a drop)"
        );
        assert_eq!(reasons, ["gate: overall: auc fell"]);

        let leaks = json!({"leaks": {"passed": false, "checks": [
            {"name": "entity_overlap", "passed": false, "count": 12, "of": 400,
             "fraction": 0.03, "setting": {"max_count": 0}, "examples": []}]}});
        let (checks, _) = failed_checks(&leaks);
        assert_eq!(
            checks[0].describe(),
            "leaks entity_overlap: 12 vs limit <= 0 (12 of 400 (0.03); allowed {\"max_count\":0})"
        );
        let lint = json!({"mf_hash": {"passed": false, "problems": [
            {"field": "seed", "message": "is missing"}]}});
        assert_eq!(
            failed_checks(&lint).0[0].describe(),
            "mf_hash lint [seed] (is missing)"
        );
        let bare = json!({"train": {"passed": false}});
        assert_eq!(
            failed_checks(&bare).1,
            ["train: failed (the section names no check)"]
        );
    }

    #[test]
    fn the_gate_view_names_the_baseline_and_the_overall_interval() {
        let record = json!({
            "evaluate": {"overall": {"auc": 0.81}},
            "baseline": {"registered_as": "churn@2", "overall": {"auc": 0.82}},
            "gate": {"passed": false, "no_baseline": false, "method": "paired", "confidence": 0.95,
                     "reasons": [], "checks": [
                {"name": "same_test_rows", "metric": "rows", "slice": null, "delta": 0.0,
                 "passed": true},
                {"name": "auc_min_delta", "metric": "auc", "slice": null, "baseline": 0.82,
                 "candidate": 0.81, "delta": -0.01, "interval": [-0.02, 0.0], "limit": -0.002,
                 "comparison": ">=", "passed": false, "status": "blocked"},
                {"name": "max_slice_drop", "metric": "auc", "slice": "tier=smb", "delta": 0.01,
                 "interval": [-0.05, 0.07], "rows": 93, "positives": 8, "passed": true,
                 "status": "underpowered"}]}});
        let gate = GateView::of(&record).unwrap();
        assert_eq!(gate.baseline_version, Some(2));
        assert_eq!(
            gate.describe(),
            "Δ auc -0.0100 [-0.0200, +0.0000] (95%), limit >= -0.0020, candidate vs baseline churn@2"
        );
        assert_eq!(gate.slices.len(), 1);
        assert_eq!(
            (gate.slices[0].rows, gate.slices[0].positives),
            (Some(93.0), Some(8.0))
        );
        assert_eq!(gate.slices[0].status, "underpowered");
    }
}
