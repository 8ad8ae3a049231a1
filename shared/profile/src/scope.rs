//! Which columns' checks can fail a run.
//!
//! With `validate.fail_on: features` (the default) a check fails the run only on a column the
//! model reads: a feature or the label. Drift elsewhere (a row number, an outcome recorded
//! after the fact, a column the features leave out) is computed and reported the same, but a
//! nightly retrain is not stopped by a column it never uses. Data-quality checks (bad values,
//! a null-rate rise, a schema change) also fail on the columns the data spec names (entity,
//! time, label time, text, as-of stamps), which splitting and leak checks read; their
//! distribution checks do not, since time moves on and ids are new by design.
//!
//! The features are `manifest.config.features` when it lists them, else what train chooses by
//! default: every int, float, bool and string column that is not the label or named by the
//! data spec (dates and timestamps never are). The lists are read from the record's JSON, so
//! this crate needs nothing of the training code.

use std::collections::BTreeSet;

use runfn_data::ColumnType;
use serde_json::Value;

use crate::profile::Profile;
use crate::settings::{FailOn, SettingsError};

/// What the manifest says the columns are.
#[derive(Debug, Clone, Default)]
pub struct Roles {
    pub label: Option<String>,
    /// Entity and free-text columns: every value is new by design.
    pub identifiers: Vec<String>,
    /// The other columns the data spec names (time, label time, as-of stamps): never features
    /// by default.
    pub reserved: Vec<String>,
    /// `manifest.config.features` when the manifest lists them: then exactly these.
    pub features: Option<Vec<String>>,
}

impl Roles {
    /// The feature lists of `manifest.config.features` (numeric, then categorical), or none
    /// when the manifest does not list them.
    pub fn features_from_manifest(
        manifest: Option<&Value>,
    ) -> Result<Option<Vec<String>>, SettingsError> {
        const FIELD: &str = "manifest.config.features";
        let Some(features) = manifest
            .and_then(|m| m.get("config"))
            .and_then(|c| c.get("features"))
            .filter(|f| !f.is_null())
        else {
            return Ok(None);
        };
        let Some(lists) = features.as_object() else {
            return Err(SettingsError::new(
                FIELD,
                "must be a map with the lists `numeric` and `categorical`",
            ));
        };
        let mut names = Vec::new();
        for kind in ["numeric", "categorical"] {
            match lists.get(kind) {
                None | Some(Value::Null) => {}
                Some(Value::Array(columns)) => {
                    for column in columns {
                        let name = column.as_str().ok_or_else(|| {
                            SettingsError::new(format!("{FIELD}.{kind}"), "must list column names")
                        })?;
                        names.push(name.to_string());
                    }
                }
                Some(_) => {
                    return Err(SettingsError::new(
                        format!("{FIELD}.{kind}"),
                        "must list column names",
                    ));
                }
            }
        }
        Ok(Some(names))
    }
}

/// Checks that run on every column but fail the run only where the data matter to the model
/// or to the pipeline: the rest measure what moves by design on the spec's own columns.
const QUALITY_CHECKS: &[&str] = &["bad_values", "null_rate_rise", "schema_change"];

/// The columns whose failed checks fail the run, decided once per comparison.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    fail_on: FailOn,
    label: Option<String>,
    features: BTreeSet<String>,
    named: BTreeSet<String>,
}

impl Scope {
    pub(crate) fn new(
        roles: &Roles,
        fail_on: FailOn,
        previous: Option<&Profile>,
        current: &Profile,
    ) -> Scope {
        let named: BTreeSet<String> = roles
            .identifiers
            .iter()
            .chain(&roles.reserved)
            .cloned()
            .collect();
        let features = match &roles.features {
            Some(listed) => listed.iter().cloned().collect(),
            // A column that is a feature on either side: one the snapshot lost or retyped was
            // read by the model trained on the previous one.
            None => previous
                .into_iter()
                .chain([current])
                .flat_map(|p| &p.columns)
                .filter(|c| {
                    matches!(
                        c.column_type,
                        ColumnType::Int64
                            | ColumnType::Float64
                            | ColumnType::Bool
                            | ColumnType::String
                    ) && roles.label.as_deref() != Some(c.name.as_str())
                        && !named.contains(&c.name)
                })
                .map(|c| c.name.clone())
                .collect(),
        };
        Scope {
            fail_on,
            label: roles.label.clone(),
            features,
            named,
        }
    }

    /// Whether `check` failing on `column` (none: the whole table) fails the run.
    pub(crate) fn fails_run(&self, check: &str, column: Option<&str>) -> bool {
        let Some(column) = column else {
            return true;
        };
        self.fail_on == FailOn::All
            || self.label.as_deref() == Some(column)
            || self.features.contains(column)
            || (self.named.contains(column) && QUALITY_CHECKS.contains(&check))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::profile::tests::profile_of;

    #[test]
    fn features_are_the_listed_ones_or_trains_default_choice() {
        let profile = profile_of(
            &[(
                "a.csv",
                "id,day,at,amount,plan,flag,note,y\n1,2026-01-01,2026-01-01T00:00:00Z,2.5,a,true,x,0\n",
            )],
            Some("y"),
        );
        let roles = Roles {
            label: Some("y".into()),
            identifiers: vec!["id".into(), "note".into()],
            reserved: vec!["at".into()],
            features: None,
        };
        let scope = Scope::new(&roles, FailOn::Features, None, &profile);
        let features: Vec<&str> = scope.features.iter().map(String::as_str).collect();
        assert_eq!(
            features,
            ["amount", "flag", "plan"],
            "no date, id, text or label"
        );
        for (check, column, fails) in [
            ("numeric_drift", Some("amount"), true),
            ("label_rate_shift", Some("y"), true),
            ("row_count_change", None, true),
            ("null_rate_rise", Some("day"), false),
            ("numeric_drift", Some("id"), false),
            ("null_rate_rise", Some("id"), true),
            ("bad_values", Some("at"), true),
            ("schema_change", Some("note"), true),
            ("categorical_drift", Some("note"), false),
        ] {
            assert_eq!(scope.fails_run(check, column), fails, "{check} {column:?}");
        }
        let all = Scope::new(&roles, FailOn::All, None, &profile);
        assert!(all.fails_run("null_rate_rise", Some("day")));

        let listed = Roles {
            features: Some(vec!["plan".into()]),
            ..roles
        };
        let scope = Scope::new(&listed, FailOn::Features, None, &profile);
        assert!(scope.fails_run("categorical_drift", Some("plan")));
        assert!(!scope.fails_run("numeric_drift", Some("amount")));
    }

    #[test]
    fn feature_lists_are_read_from_the_manifest() {
        let read = |manifest: Value| Roles::features_from_manifest(Some(&manifest));
        assert_eq!(read(json!({"config": {"model": "mlp"}})), Ok(None));
        assert_eq!(Roles::features_from_manifest(None), Ok(None));
        assert_eq!(
            read(json!({"config": {"features": {"categorical": ["plan"], "numeric": ["a", "b"]}}})),
            Ok(Some(vec!["a".into(), "b".into(), "plan".into()]))
        );
        assert_eq!(
            read(json!({"config": {"features": {"numeric": "a"}}}))
                .unwrap_err()
                .to_string(),
            "manifest.config.features.numeric: must list column names"
        );
        assert_eq!(
            read(json!({"config": {"features": ["a"]}}))
                .unwrap_err()
                .field,
            "manifest.config.features"
        );
    }
}
