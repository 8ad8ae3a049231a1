//! An evaluation as `evaluate` writes it: `{overall: {metric: value}, slices: {column: {value: {metric: value}}}}`.

use std::collections::BTreeMap;

use runfn_core::InputError;
use runfn_core::error::json_type_name;
use serde_json::Value;

pub type Metrics = BTreeMap<String, f64>;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    pub overall: Metrics,
    /// column → slice value → metrics.
    pub slices: BTreeMap<String, BTreeMap<String, Metrics>>,
    /// The digest of the rows scored (`rows_blake3`); absent from evaluations made before it was
    /// recorded.
    pub rows_blake3: Option<String>,
    /// The per-row scores file (`row_scores`), which a paired comparison needs.
    pub row_scores: Option<RowScoresRef>,
    /// Slice column or feature → share of the scored rows whose category the model never saw.
    pub unseen: BTreeMap<String, f64>,
}

/// `row_scores`: where the per-row scores are and the blake3 they were written with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowScoresRef {
    pub path: String,
    pub blake3: String,
}

impl Evaluation {
    /// Reads an evaluation; `origin` (e.g. `baseline`) prefixes the field in errors.
    pub fn from_json(value: &Value, origin: &str) -> Result<Evaluation, InputError> {
        let object = value.as_object().ok_or_else(|| {
            InputError::field(
                origin,
                format!(
                    "must be an evaluation object, found {}",
                    json_type_name(value)
                ),
            )
        })?;
        let overall = match object.get("overall") {
            Some(overall) => metrics(overall, &format!("{origin}.overall"))?,
            None => return Err(InputError::field(format!("{origin}.overall"), "is missing")),
        };
        let mut slices = BTreeMap::new();
        if let Some(columns) = object.get("slices") {
            let columns = columns.as_object().ok_or_else(|| {
                InputError::field(
                    format!("{origin}.slices"),
                    format!("must be an object, found {}", json_type_name(columns)),
                )
            })?;
            for (column, values) in columns {
                let field = format!("{origin}.slices.{column}");
                let values = values.as_object().ok_or_else(|| {
                    InputError::field(
                        &field,
                        format!("must be an object, found {}", json_type_name(values)),
                    )
                })?;
                let mut by_value = BTreeMap::new();
                for (slice_value, slice_metrics) in values {
                    by_value.insert(
                        slice_value.clone(),
                        metrics(slice_metrics, &format!("{field}.{slice_value}"))?,
                    );
                }
                slices.insert(column.clone(), by_value);
            }
        }
        let rows_blake3 = match object.get("rows_blake3") {
            None | Some(Value::Null) => None,
            Some(Value::String(digest)) => Some(digest.clone()),
            Some(other) => {
                return Err(InputError::field(
                    format!("{origin}.rows_blake3"),
                    format!("must be a string, found {}", json_type_name(other)),
                ));
            }
        };
        let row_scores = match object.get("row_scores") {
            None | Some(Value::Null) => None,
            Some(value) => {
                let field = format!("{origin}.row_scores");
                let text = |key: &str| {
                    value
                        .get(key)
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .ok_or_else(|| {
                            InputError::field(format!("{field}.{key}"), "must be a string")
                        })
                };
                Some(RowScoresRef {
                    path: text("path")?,
                    blake3: text("blake3")?,
                })
            }
        };
        let mut unseen = BTreeMap::new();
        if let Some(Value::Object(columns)) = object.get("unseen") {
            for (column, share) in columns {
                let fraction = share
                    .get("fraction")
                    .and_then(Value::as_f64)
                    .ok_or_else(|| {
                        InputError::field(
                            format!("{origin}.unseen.{column}.fraction"),
                            "must be a number",
                        )
                    })?;
                unseen.insert(column.clone(), fraction);
            }
        }
        Ok(Evaluation {
            overall,
            slices,
            rows_blake3,
            row_scores,
            unseen,
        })
    }
}

/// Numeric fields of a metrics object; other fields (labels, notes) are ignored, but a known
/// metric that is not a number is an error.
fn metrics(value: &Value, field: &str) -> Result<Metrics, InputError> {
    let object = value.as_object().ok_or_else(|| {
        InputError::field(
            field,
            format!(
                "must be an object of metrics, found {}",
                json_type_name(value)
            ),
        )
    })?;
    let mut out = Metrics::new();
    for (name, metric) in object {
        match metric.as_f64() {
            Some(number) => {
                out.insert(name.clone(), number);
            }
            None if runfn_manifest::gates::direction(name).is_some() && !metric.is_null() => {
                return Err(InputError::field(
                    format!("{field}.{name}"),
                    format!("must be a number, found {}", json_type_name(metric)),
                ));
            }
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_documented_shape() {
        let value = json!({"overall": {"auc": 0.866, "logloss": 0.41, "rows": 20000},
                           "slices": {"tenure_bucket": {"<30d": {"auc": 0.77, "rows": 1800}}}});
        let eval = Evaluation::from_json(&value, "evaluate").unwrap();
        assert_eq!(eval.overall["auc"], 0.866);
        assert_eq!(eval.slices["tenure_bucket"]["<30d"]["rows"], 1800.0);
    }

    #[test]
    fn wrong_types_name_the_field() {
        let err =
            Evaluation::from_json(&json!({"overall": {"auc": "high"}}), "baseline").unwrap_err();
        assert_eq!(
            err.to_string(),
            "baseline.overall.auc: must be a number, found a string"
        );
        let err = Evaluation::from_json(&json!({"slices": {}}), "evaluate").unwrap_err();
        assert_eq!(err.to_string(), "evaluate.overall: is missing");
        let err = Evaluation::from_json(&json!({"overall": {}, "slices": {"tier": 3}}), "evaluate")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "evaluate.slices.tier: must be an object, found a number"
        );
    }
}
