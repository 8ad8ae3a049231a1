//! `manifest.leaks`: how much of each leak a run accepts, or that a check is off and why.
//!
//! ```yaml
//! leaks:
//!   exact_duplicates: {max_fraction: 0.02, reason: "twin listings are distinct sales"}
//!   entity_overlap: {max_count: 50}
//!   near_duplicates: {off: "listings repeat their boilerplate by design"}
//! ```
//!
//! Read by leak-check and linted by mf-hash with the same rules, so a manifest that lints clean
//! is one leak-check accepts.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::suggest;

/// The leak checks, in the order leak-check runs them.
pub const LEAK_CHECKS: [&str; 7] = [
    "entity_overlap",
    "time_order",
    "exact_duplicates",
    "near_duplicates",
    "unseen_categories",
    "future_features",
    "label_proxy",
];

const SETTING_KEYS: [&str; 4] = ["max_count", "max_fraction", "reason", "off"];

/// What a check is allowed to find before it fails.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum LeakSetting {
    /// Pass while `count <= max_count` and `count / of <= max_fraction` (each when given).
    Tolerance {
        #[serde(skip_serializing_if = "Option::is_none")]
        max_count: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        max_fraction: Option<f64>,
    },
    /// Still run and reported, never failing.
    Off { off: bool },
}

/// A check's setting and why it was chosen (mandatory for `off`).
#[derive(Debug, Clone, PartialEq)]
pub struct LeakDecision {
    pub setting: LeakSetting,
    pub reason: Option<String>,
}

impl LeakDecision {
    /// No leak at all: the default for a check the manifest does not mention.
    pub fn strict() -> LeakDecision {
        LeakDecision {
            setting: LeakSetting::Tolerance {
                max_count: Some(0),
                max_fraction: None,
            },
            reason: None,
        }
    }
}

/// A problem with `manifest.leaks`, naming its field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingError {
    pub field: String,
    pub message: String,
}

fn error(field: impl Into<String>, message: impl Into<String>) -> SettingError {
    SettingError {
        field: field.into(),
        message: message.into(),
    }
}

/// Reads `manifest.leaks` (absent or null: every check strict).
pub fn parse_leaks(value: Option<&Value>) -> Result<BTreeMap<String, LeakDecision>, SettingError> {
    let mut decisions: BTreeMap<String, LeakDecision> = LEAK_CHECKS
        .iter()
        .map(|c| (c.to_string(), LeakDecision::strict()))
        .collect();
    let checks = match value {
        None | Some(Value::Null) => return Ok(decisions),
        Some(Value::Object(checks)) => checks,
        Some(_) => {
            return Err(error(
                "manifest.leaks",
                "must be a mapping of check names to settings",
            ));
        }
    };
    for (name, setting) in checks {
        let field = format!("manifest.leaks.{name}");
        if !LEAK_CHECKS.contains(&name.as_str()) {
            return Err(error(
                field,
                format!(
                    "is not a leak check{} (checks: {})",
                    suggest::hint(name, &LEAK_CHECKS),
                    LEAK_CHECKS.join(", ")
                ),
            ));
        }
        let Value::Object(setting) = setting else {
            return Err(error(
                field,
                "must be a mapping: {max_count: N}, {max_fraction: F} or {off: \"reason\"}",
            ));
        };
        decisions.insert(name.clone(), decision(&field, setting)?);
    }
    Ok(decisions)
}

fn decision(field: &str, setting: &Map<String, Value>) -> Result<LeakDecision, SettingError> {
    for key in setting.keys() {
        if !SETTING_KEYS.contains(&key.as_str()) {
            return Err(error(
                format!("{field}.{key}"),
                format!(
                    "unknown setting{} (settings: max_count, max_fraction, off, reason)",
                    suggest::hint(key, &SETTING_KEYS)
                ),
            ));
        }
    }
    let text = |key: &str| -> Result<Option<String>, SettingError> {
        match setting.get(key) {
            None => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_string())),
            Some(_) => Err(error(
                format!("{field}.{key}"),
                "needs a reason: a non-empty text saying why",
            )),
        }
    };
    if setting.contains_key("off") {
        let reason = text("off")?;
        if setting.contains_key("max_count") || setting.contains_key("max_fraction") {
            return Err(error(
                format!("{field}.off"),
                "turns the check off; drop max_count and max_fraction, or drop off",
            ));
        }
        if setting.contains_key("reason") {
            return Err(error(
                format!("{field}.reason"),
                "with off, the reason is off's own text: `off: \"why\"`",
            ));
        }
        return Ok(LeakDecision {
            setting: LeakSetting::Off { off: true },
            reason,
        });
    }
    let max_count = match setting.get("max_count") {
        None => None,
        Some(value) => Some(value.as_u64().ok_or_else(|| {
            error(
                format!("{field}.max_count"),
                format!("must be a whole number >= 0, found {value}"),
            )
        })?),
    };
    let max_fraction = match setting.get("max_fraction") {
        None => None,
        Some(value) => Some(
            value
                .as_f64()
                .filter(|f| f.is_finite() && (0.0..=1.0).contains(f))
                .ok_or_else(|| {
                    error(
                        format!("{field}.max_fraction"),
                        format!("must be a fraction between 0 and 1, found {value}"),
                    )
                })?,
        ),
    };
    if max_count.is_none() && max_fraction.is_none() {
        return Err(error(
            field,
            "sets no tolerance: give max_count, max_fraction, or off with a reason",
        ));
    }
    Ok(LeakDecision {
        setting: LeakSetting::Tolerance {
            max_count,
            max_fraction,
        },
        reason: text("reason")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value) -> Result<BTreeMap<String, LeakDecision>, String> {
        parse_leaks(Some(&value)).map_err(|e| format!("{}: {}", e.field, e.message))
    }

    #[test]
    fn tolerances_and_off_with_their_reasons() {
        let decisions = parse(json!({
            "exact_duplicates": {"max_fraction": 0.02, "reason": "twin listings are distinct sales"},
            "entity_overlap": {"max_count": 50},
            "near_duplicates": {"off": "listings repeat by design"},
        }))
        .unwrap();
        assert_eq!(
            decisions["exact_duplicates"],
            LeakDecision {
                setting: LeakSetting::Tolerance {
                    max_count: None,
                    max_fraction: Some(0.02)
                },
                reason: Some("twin listings are distinct sales".into())
            }
        );
        assert_eq!(
            serde_json::to_value(&decisions["entity_overlap"].setting).unwrap(),
            json!({"max_count": 50})
        );
        assert_eq!(
            decisions["near_duplicates"],
            LeakDecision {
                setting: LeakSetting::Off { off: true },
                reason: Some("listings repeat by design".into())
            }
        );
        assert_eq!(decisions["label_proxy"], LeakDecision::strict());
        assert_eq!(parse_leaks(None).unwrap().len(), LEAK_CHECKS.len());
    }

    #[test]
    fn each_bad_setting_names_its_field() {
        for (value, expected) in [
            (
                json!({"exact_duplicate": {"max_count": 1}}),
                "manifest.leaks.exact_duplicate: is not a leak check (did you mean `exact_duplicates`?)",
            ),
            (
                json!({"near_duplicates": {"off": ""}}),
                "manifest.leaks.near_duplicates.off: needs a reason",
            ),
            (
                json!({"near_duplicates": {"off": true}}),
                "manifest.leaks.near_duplicates.off: needs a reason",
            ),
            (
                json!({"exact_duplicates": {"max_fraction": 1.5}}),
                "manifest.leaks.exact_duplicates.max_fraction: must be a fraction between 0 and 1, found 1.5",
            ),
            (
                json!({"exact_duplicates": {"max_fraction": -0.1}}),
                "manifest.leaks.exact_duplicates.max_fraction: must be a fraction",
            ),
            (
                json!({"entity_overlap": {"max_count": -3}}),
                "manifest.leaks.entity_overlap.max_count: must be a whole number >= 0, found -3",
            ),
            (
                json!({"entity_overlap": {"max_count": 2.5}}),
                "manifest.leaks.entity_overlap.max_count: must be a whole number",
            ),
            (
                json!({"entity_overlap": {"max_cout": 2}}),
                "manifest.leaks.entity_overlap.max_cout: unknown setting (did you mean `max_count`?)",
            ),
            (
                json!({"entity_overlap": {"reason": "fine"}}),
                "manifest.leaks.entity_overlap: sets no tolerance",
            ),
            (
                json!({"entity_overlap": {"off": "fine", "max_count": 3}}),
                "manifest.leaks.entity_overlap.off: turns the check off",
            ),
            (
                json!({"entity_overlap": 3}),
                "manifest.leaks.entity_overlap: must be a mapping",
            ),
            (json!([1]), "manifest.leaks: must be a mapping"),
        ] {
            let err = parse(value.clone()).unwrap_err();
            assert!(err.starts_with(expected), "{value}: {err}");
        }
    }
}
