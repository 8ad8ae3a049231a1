//! How the gate decides, from `manifest.eval`: the rule, its confidence, what an underpowered
//! slice does, and when a baseline is too unfamiliar with the test rows to be compared.
//!
//! Read by `mf-hash` (so a typo fails before anything runs) and by `gate` (which applies it).

use serde_json::{Map, Value};

use crate::suggest;

/// The fields `manifest.eval` may have.
pub const EVAL_FIELDS: &[&str] = &[
    "baseline_model",
    "slices",
    "gates",
    "rule",
    "confidence",
    "underpowered",
    "unstable",
    "max_unseen_fraction",
    "unseen_reason",
    "resamples",
    "row_key",
];

pub const DEFAULT_CONFIDENCE: f64 = 0.95;
pub const DEFAULT_MAX_UNSEEN_FRACTION: f64 = 0.05;
pub const DEFAULT_RESAMPLES: usize = 2000;
/// More resamples than this add nothing but time.
pub const MAX_RESAMPLES: usize = 100_000;

/// What an `unstable` check (the candidate's seeds spread beyond the serving model's) does:
/// block the gate (the default: instability is a finding), or warn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unstable {
    #[default]
    Block,
    Warn,
}

/// What the paired test must show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Block only on evidence that the candidate is worse than the limit allows.
    #[default]
    NoRegression,
    /// Pass only on evidence that the candidate is no worse than the limit allows.
    NonInferiority,
}

impl Rule {
    /// The name the manifest and the record give it.
    pub fn name(self) -> &'static str {
        match self {
            Rule::NoRegression => "no_regression",
            Rule::NonInferiority => "non_inferiority",
        }
    }
}

/// What a slice too small to detect a drop of `max_slice_drop` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Underpowered {
    /// Named in the record, on stderr and on the page; the decision does not rest on it.
    #[default]
    Warn,
    /// Fails the gate.
    Block,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EvalSettings {
    pub rule: Rule,
    pub confidence: f64,
    pub underpowered: Underpowered,
    /// What a candidate whose seeds spread far more than the serving model's does to the gate.
    pub unstable: Unstable,
    pub max_unseen_fraction: f64,
    /// Why a baseline that meets unseen category values may still be compared.
    pub unseen_reason: Option<String>,
    pub resamples: usize,
    /// The column whose value keys each test row in the per-row scores (default: the row's
    /// position in the rows-digest order).
    pub row_key: Option<String>,
}

impl Default for EvalSettings {
    fn default() -> Self {
        EvalSettings {
            rule: Rule::default(),
            confidence: DEFAULT_CONFIDENCE,
            underpowered: Underpowered::default(),
            unstable: Unstable::default(),
            max_unseen_fraction: DEFAULT_MAX_UNSEEN_FRACTION,
            unseen_reason: None,
            resamples: DEFAULT_RESAMPLES,
            row_key: None,
        }
    }
}

/// A field of `eval` that is wrong, relative to `eval` (e.g. `confidence`), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingProblem {
    pub field: String,
    pub message: String,
}

impl EvalSettings {
    /// Reads the settings from `eval` (absent fields take their defaults). Every problem is
    /// returned, each naming its field under `eval.`.
    pub fn parse(eval: &Map<String, Value>) -> Result<EvalSettings, Vec<SettingProblem>> {
        let mut settings = EvalSettings::default();
        let mut problems = Vec::new();
        let mut problem = |field: &str, message: String| {
            problems.push(SettingProblem {
                field: format!("eval.{field}"),
                message,
            })
        };
        for key in eval.keys() {
            if !EVAL_FIELDS.contains(&key.as_str()) {
                problem(
                    key,
                    format!("unknown field{}", suggest::hint(key, EVAL_FIELDS)),
                );
            }
        }
        if let Some(value) = eval.get("rule") {
            match value.as_str() {
                Some("no_regression") => settings.rule = Rule::NoRegression,
                Some("non_inferiority") => settings.rule = Rule::NonInferiority,
                _ => problem(
                    "rule",
                    format!(
                        "must be `no_regression` or `non_inferiority`, found {}{}",
                        value,
                        value
                            .as_str()
                            .map(|v| suggest::hint(v, &["no_regression", "non_inferiority"]))
                            .unwrap_or_default()
                    ),
                ),
            }
        }
        if let Some(value) = eval.get("confidence") {
            match value.as_f64() {
                Some(c) if c > 0.5 && c < 1.0 => settings.confidence = c,
                _ => problem(
                    "confidence",
                    format!(
                        "must be a number between 0.5 and 1 (exclusive), e.g. 0.95; found {value}"
                    ),
                ),
            }
        }
        if let Some(value) = eval.get("underpowered") {
            match value.as_str() {
                Some("warn") => settings.underpowered = Underpowered::Warn,
                Some("block") => settings.underpowered = Underpowered::Block,
                _ => problem(
                    "underpowered",
                    format!("must be `warn` or `block`, found {value}"),
                ),
            }
        }
        if let Some(value) = eval.get("unstable") {
            match value.as_str() {
                Some("warn") => settings.unstable = Unstable::Warn,
                Some("block") => settings.unstable = Unstable::Block,
                _ => problem(
                    "unstable",
                    format!("must be `block` or `warn`, found {value}"),
                ),
            }
        }
        if let Some(value) = eval.get("max_unseen_fraction") {
            match value.as_f64() {
                Some(f) if (0.0..=1.0).contains(&f) => settings.max_unseen_fraction = f,
                _ => problem(
                    "max_unseen_fraction",
                    format!("must be a share between 0 and 1, found {value}"),
                ),
            }
        }
        if let Some(value) = eval.get("unseen_reason") {
            match value.as_str() {
                Some(reason) if !reason.trim().is_empty() => {
                    settings.unseen_reason = Some(reason.to_string())
                }
                _ => problem(
                    "unseen_reason",
                    format!("must be a non-empty sentence saying why, found {value}"),
                ),
            }
        }
        if let Some(value) = eval.get("resamples") {
            match value.as_u64() {
                Some(n) if (100..=MAX_RESAMPLES as u64).contains(&n) => {
                    settings.resamples = n as usize
                }
                _ => problem(
                    "resamples",
                    format!("must be an integer from 100 to {MAX_RESAMPLES}, found {value}"),
                ),
            }
        }
        if let Some(value) = eval.get("row_key") {
            match value.as_str() {
                Some(column) if !column.is_empty() => settings.row_key = Some(column.to_string()),
                _ => problem("row_key", format!("must be a column name, found {value}")),
            }
        }
        if problems.is_empty() {
            Ok(settings)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> Result<EvalSettings, Vec<SettingProblem>> {
        EvalSettings::parse(value.as_object().unwrap())
    }

    #[test]
    fn defaults_and_every_field() {
        assert_eq!(parse(json!({})).unwrap(), EvalSettings::default());
        let settings = parse(json!({"rule": "non_inferiority", "confidence": 0.99,
            "underpowered": "block", "unstable": "warn", "max_unseen_fraction": 0.2, "unseen_reason": "plan renamed",
            "resamples": 500, "row_key": "id", "slices": ["a"], "gates": {}}))
        .unwrap();
        assert_eq!(settings.rule, Rule::NonInferiority);
        assert_eq!(settings.confidence, 0.99);
        assert_eq!(settings.underpowered, Underpowered::Block);
        assert_eq!(settings.unstable, Unstable::Warn);
        assert_eq!(settings.resamples, 500);
        assert_eq!(settings.row_key.as_deref(), Some("id"));
    }

    #[test]
    fn problems_name_the_field() {
        let problems =
            parse(json!({"confidence": 1.5, "rule": "no_regresion", "rules": 1})).unwrap_err();
        let text: Vec<String> = problems
            .iter()
            .map(|p| format!("{}: {}", p.field, p.message))
            .collect();
        assert_eq!(text.len(), 3, "{text:?}");
        assert!(text[0].starts_with("eval.rules: unknown field"), "{text:?}");
        assert!(
            text.iter()
                .any(|t| t.starts_with("eval.rule: must be") && t.contains("no_regression")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|t| t.starts_with("eval.confidence: must be a number between 0.5 and 1")),
            "{text:?}"
        );
    }
}
