//! `manifest.validate`: each check's limit, the false-alarm rate left to sampling noise, and
//! which columns can fail a run.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::suggest;

/// The settings `manifest.validate` may hold.
const KEYS: &[&str] = &[
    "null_rate_rise",
    "out_of_range",
    "new_categories",
    "numeric_drift",
    "categorical_drift",
    "row_count_change",
    "max_growth",
    "label_rate_shift",
    "bad_value_rate",
    "alpha",
    "fail_on",
    "max_label_missing",
    "window",
];

/// Which columns' checks can fail the run (`manifest.validate.fail_on`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FailOn {
    /// The model's features and the label; other columns' checks are reported only.
    #[default]
    Features,
    /// Every column.
    All,
}

impl FailOn {
    pub const NAMES: &'static str = "features, all";
}

/// Limits of each check, and how they apply; `manifest.validate` overrides any of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// Largest rise of a column's null rate (absolute).
    pub null_rate_rise: f64,
    /// Largest share of values outside the previous [min, max].
    pub out_of_range: f64,
    /// Largest share of rows in categories the previous snapshot did not have.
    pub new_categories: f64,
    /// Largest Wasserstein-1 distance of a numeric column, in the previous standard deviations.
    pub numeric_drift: f64,
    /// Largest total variation distance of a categorical column (the share of rows that would
    /// have to change category).
    pub categorical_drift: f64,
    /// Largest relative shrink of the row count. The name is older than the split into shrink
    /// and growth, and kept so that existing manifests keep their meaning for a shrink.
    pub row_count_change: f64,
    /// Largest relative growth of the row count; none: growth never fails. A cumulative
    /// snapshot grows every night by design, and the previous profile is not always last
    /// night's (`--previous-model` compares with the data the serving model was trained on,
    /// weeks back perhaps), so no pace can be told from it: a limit is the user's to set.
    pub max_growth: Option<f64>,
    /// Largest change of the label rate (absolute).
    pub label_rate_shift: f64,
    /// Largest share of values that do not parse as their column's type.
    pub bad_value_rate: f64,
    /// The chance that two samples of one distribution fail any drift check of a validation by
    /// sampling noise alone; each test gets its share (Bonferroni).
    pub alpha: f64,
    pub fail_on: FailOn,
    /// Largest share of rows without a label (a label that is sometimes missing is not a
    /// failure of the snapshot; the rows are left out of training).
    pub max_label_missing: f64,
    /// The drift window (`1 month`, `2 weeks`): the newest window of `manifest.data.time` is
    /// compared with the one before it, and judged against the same comparison between every
    /// earlier pair of windows. None: the snapshot is compared whole with `--previous`.
    pub window: Option<String>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            null_rate_rise: 0.005,
            out_of_range: 0.01,
            new_categories: 0.01,
            numeric_drift: 0.01,
            categorical_drift: 0.01,
            row_count_change: 0.5,
            max_growth: None,
            label_rate_shift: 0.03,
            bad_value_rate: 0.001,
            alpha: 0.001,
            fail_on: FailOn::Features,
            max_label_missing: 0.0,
            window: None,
        }
    }
}

/// A manifest setting ds-validate cannot use, with the field it is in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SettingsError {
    pub field: String,
    pub message: String,
}

impl SettingsError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> SettingsError {
        SettingsError {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl Thresholds {
    /// From `manifest.validate` (absent: the defaults). Unknown keys are errors.
    pub fn from_manifest(value: Option<&Value>) -> Result<Thresholds, SettingsError> {
        const FIELD: &str = "manifest.validate";
        let map = match value {
            None | Some(Value::Null) => return Ok(Thresholds::default()),
            Some(Value::Object(map)) => map,
            Some(_) => return Err(SettingsError::new(FIELD, "must be a map of settings")),
        };
        // Checked before serde, whose messages name neither the field nor the close name.
        for key in map.keys() {
            if !KEYS.contains(&key.as_str()) {
                return Err(SettingsError::new(
                    format!("{FIELD}.{key}"),
                    format!(
                        "unknown setting{}; known: {}",
                        suggest::hint(key, KEYS),
                        KEYS.join(", ")
                    ),
                ));
            }
        }
        // Checked before serde, whose message for an enum would not name the field.
        if let Some(fail_on) = map.get("fail_on")
            && !matches!(fail_on.as_str(), Some("features" | "all"))
        {
            return Err(SettingsError::new(
                format!("{FIELD}.fail_on"),
                format!("{fail_on} is not one of: {}", FailOn::NAMES),
            ));
        }
        let thresholds: Thresholds = serde_json::from_value(Value::Object(map.clone()))
            .map_err(|e| SettingsError::new(FIELD, e.to_string()))?;
        let limits = [
            ("null_rate_rise", Some(thresholds.null_rate_rise)),
            ("out_of_range", Some(thresholds.out_of_range)),
            ("new_categories", Some(thresholds.new_categories)),
            ("numeric_drift", Some(thresholds.numeric_drift)),
            ("categorical_drift", Some(thresholds.categorical_drift)),
            ("row_count_change", Some(thresholds.row_count_change)),
            ("max_growth", thresholds.max_growth),
            ("label_rate_shift", Some(thresholds.label_rate_shift)),
            ("bad_value_rate", Some(thresholds.bad_value_rate)),
            ("max_label_missing", Some(thresholds.max_label_missing)),
        ];
        for (name, limit) in limits {
            if let Some(limit) = limit.filter(|l| !(l.is_finite() && *l >= 0.0)) {
                return Err(SettingsError::new(
                    format!("{FIELD}.{name}"),
                    format!("{limit} is not a limit (a number, 0 or more)"),
                ));
            }
        }
        if let Some(window) = &thresholds.window
            && let Err(message) = window_span(window)
        {
            return Err(SettingsError::new(format!("{FIELD}.window"), message));
        }
        if thresholds.max_label_missing > 1.0 {
            return Err(SettingsError::new(
                format!("{FIELD}.max_label_missing"),
                format!(
                    "{} is not a share of rows (0 to 1)",
                    thresholds.max_label_missing
                ),
            ));
        }
        if !(thresholds.alpha > 0.0 && thresholds.alpha < 1.0) {
            return Err(SettingsError::new(
                format!("{FIELD}.alpha"),
                format!(
                    "{} is not a false-alarm rate (a number between 0 and 1, such as 0.001)",
                    thresholds.alpha
                ),
            ));
        }
        Ok(thresholds)
    }
}

/// A drift window as `manifest.validate.window` writes it: `N days|weeks|months|years`, the
/// words rolling splits use.
pub fn window_span(text: &str) -> Result<(u32, String), String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [count, unit] = words[..] else {
        return Err(format!(
            "`{text}` is not a window; write `N days|weeks|months|years`, such as `1 month`"
        ));
    };
    let count: u32 = count
        .parse()
        .ok()
        .filter(|c| *c > 0)
        .ok_or_else(|| format!("`{count}` is not a whole number of {unit} above 0"))?;
    let lower = unit.to_ascii_lowercase();
    let unit = lower.strip_suffix('s').unwrap_or(&lower);
    if !["day", "week", "month", "year"].contains(&unit) {
        return Err(format!(
            "`{unit}` is not a unit (days, weeks, months or years)"
        ));
    }
    Ok((count, unit.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn settings_come_from_the_manifest_with_defaults_for_the_rest() {
        let value = json!({"numeric_drift": 0.2, "fail_on": "all", "max_growth": 0.1});
        let thresholds = Thresholds::from_manifest(Some(&value)).unwrap();
        assert_eq!(thresholds.numeric_drift, 0.2);
        assert_eq!(thresholds.fail_on, FailOn::All);
        assert_eq!(thresholds.max_growth, Some(0.1));
        assert_eq!(
            thresholds.null_rate_rise,
            Thresholds::default().null_rate_rise
        );
        assert_eq!(
            Thresholds::from_manifest(None).unwrap(),
            Thresholds::default()
        );
        assert_eq!(Thresholds::default().fail_on, FailOn::Features);
        assert_eq!(Thresholds::default().max_growth, None);
    }

    #[test]
    fn a_bad_setting_names_its_field() {
        let error = |value: Value| Thresholds::from_manifest(Some(&value)).unwrap_err();
        let typo = error(json!({"numeric_drfit": 0.2}));
        assert_eq!(typo.field, "manifest.validate.numeric_drfit");
        assert!(
            typo.message
                .starts_with("unknown setting (did you mean `numeric_drift`?)"),
            "{typo}"
        );
        assert_eq!(
            error(json!({"fail_on": "feature"})).to_string(),
            "manifest.validate.fail_on: \"feature\" is not one of: features, all"
        );
        assert_eq!(
            error(json!({"fail_on": 1})).to_string(),
            "manifest.validate.fail_on: 1 is not one of: features, all"
        );
        assert_eq!(
            error(json!({"alpha": 0})).to_string(),
            "manifest.validate.alpha: 0 is not a false-alarm rate (a number between 0 and 1, such as 0.001)"
        );
        assert_eq!(
            error(json!({"max_growth": -1})).field,
            "manifest.validate.max_growth"
        );
        assert_eq!(
            error(json!([1])).to_string(),
            "manifest.validate: must be a map of settings"
        );
    }
}
