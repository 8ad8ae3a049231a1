//! An evaluation as `evaluate` writes it: `{overall: {metric: value}, slices: {column: {value: {metric: value}}}}`.

use std::collections::BTreeMap;

use runfn_core::InputError;
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
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
    /// The format of `rows_blake3` (`runfn-rows-v2`); absent: `runfn-rows-v1`.
    pub rows_format: Option<String>,
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
    /// Reads an evaluation; `origin` (e.g. `baseline`) prefixes the field in errors. Any
    /// evaluation will do, runfn's own (`evaluate`'s section) or one written by another tool:
    /// `overall` is required, a metric runfn gates on must be a number (or null), and the other
    /// fields of a metrics object (counts, notes, intervals) are kept when they are numbers.
    pub fn from_json(value: &Value, origin: &str) -> Result<Evaluation, InputError> {
        let fields: Fields = runfn_core::record::typed(value, origin)?;
        Ok(Evaluation {
            overall: fields.overall.0,
            slices: fields
                .slices
                .into_iter()
                .map(|(column, values)| {
                    let values = values.into_iter().map(|(v, m)| (v, m.0)).collect();
                    (column, values)
                })
                .collect(),
            rows_blake3: fields.rows_blake3,
            rows_format: fields.rows_format,
            row_scores: fields.row_scores.map(|r| RowScoresRef {
                path: r.path,
                blake3: r.blake3,
            }),
            unseen: fields
                .unseen
                .into_iter()
                .map(|(column, share)| (column, share.fraction))
                .collect(),
        })
    }
}

/// What the gate reads of an evaluation.
#[derive(Deserialize)]
struct Fields {
    overall: MetricFields,
    #[serde(default)]
    slices: BTreeMap<String, BTreeMap<String, MetricFields>>,
    #[serde(default)]
    rows_blake3: Option<String>,
    #[serde(default)]
    rows_format: Option<String>,
    #[serde(default)]
    row_scores: Option<RowScoresFields>,
    #[serde(default)]
    unseen: BTreeMap<String, UnseenFields>,
}

#[derive(Deserialize)]
struct RowScoresFields {
    path: String,
    blake3: String,
}

#[derive(Deserialize)]
struct UnseenFields {
    fraction: f64,
}

/// The numbers of a metrics object. A metric the gates know (`auc`, `logloss`, ...) must be a
/// number or null; any other field is kept when it is a number and passed over otherwise.
struct MetricFields(Metrics);

impl<'de> Deserialize<'de> for MetricFields {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Numbers;
        impl<'de> Visitor<'de> for Numbers {
            type Value = MetricFields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of metrics")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetricFields, A::Error> {
                let mut out = Metrics::new();
                while let Some(name) = map.next_key::<String>()? {
                    let number = match runfn_manifest::gates::direction(&name) {
                        Some(_) => map.next_value::<Option<f64>>()?,
                        None => map.next_value::<Value>()?.as_f64(),
                    };
                    if let Some(number) = number {
                        out.insert(name, number);
                    }
                }
                Ok(MetricFields(out))
            }
        }
        deserializer.deserialize_map(Numbers)
    }
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
            "baseline.overall.auc: invalid type: string \"high\", expected f64"
        );
        let err = Evaluation::from_json(&json!({"slices": {}}), "evaluate").unwrap_err();
        assert_eq!(err.to_string(), "evaluate: missing field `overall`");
        let err = Evaluation::from_json(&json!({"overall": {}, "slices": {"tier": 3}}), "evaluate")
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "evaluate.slices.tier: invalid type: integer `3`, expected a map"
        );
        // Counts and notes pass; a note where a metric belongs does not.
        let eval = Evaluation::from_json(
            &json!({"overall": {"auc": null, "auc_note": "one class", "rows": 10, "ci95": {}}}),
            "evaluate",
        )
        .unwrap();
        assert_eq!(eval.overall.keys().collect::<Vec<_>>(), ["rows"]);
    }
}
