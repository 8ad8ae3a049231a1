//! Reading a binary label as it comes: 0/1 and true/false as they are, any other values once
//! `manifest.data.label_positive` names the one that means positive. Every tool that reads the
//! label reads it here, so the profile, the leak checks, training and evaluation agree on which
//! rows are positive.

use std::collections::{BTreeMap, HashMap};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;
use runfn_core::InputError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::types::ColumnType;
use crate::values::numeric_values;
use crate::values::text_array;

/// A binary label as found in the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    Missing,
    Negative,
    Positive,
    /// Present but not a label: NaN, a value other than 0/1 or true/false with no positive
    /// value named, or a value of another type than the named one.
    Invalid,
}

/// `manifest.data.label_positive`: the label value that means positive. Compared by type, so a
/// manifest and a column that disagree on what the value is are caught, not read as all
/// negative: text matches only text, a number only numbers (1 matches 1 and 1.0), a boolean
/// only booleans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Positive {
    Bool(bool),
    Number(serde_json::Number),
    Text(String),
}

/// What a column's values are, as the comparison sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Number,
    Bool,
    /// Dates, times: never a label.
    Other,
}

impl Kind {
    fn of_type(column_type: ColumnType) -> Kind {
        match column_type {
            ColumnType::String => Kind::Text,
            ColumnType::Int64 | ColumnType::Float64 => Kind::Number,
            ColumnType::Bool => Kind::Bool,
            ColumnType::Date | ColumnType::Timestamp => Kind::Other,
        }
    }

    fn of_array(array: &ArrayRef) -> Kind {
        ColumnType::from_data_type(array.data_type()).map_or(Kind::Other, Kind::of_type)
    }

    fn plural(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Number => "numbers",
            Kind::Bool => "booleans",
            Kind::Other => "dates or times",
        }
    }
}

impl Positive {
    /// `manifest.data.label_positive` as the manifest wrote it; `None` when unset.
    pub fn from_manifest(value: Option<&Value>) -> Result<Option<Positive>, InputError> {
        match value {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(Positive::Text(text.clone()))),
            Some(Value::Number(number)) => Ok(Some(Positive::Number(number.clone()))),
            Some(Value::Bool(flag)) => Ok(Some(Positive::Bool(*flag))),
            Some(other) => Err(InputError::field(
                "manifest.data.label_positive",
                format!(
                    "must be the label value that means positive (text, a number or a boolean), found {}",
                    runfn_core::error::json_type_name(other)
                ),
            )),
        }
    }

    fn kind(&self) -> Kind {
        match self {
            Positive::Bool(_) => Kind::Bool,
            Positive::Number(_) => Kind::Number,
            Positive::Text(_) => Kind::Text,
        }
    }

    /// As a value is shown in a list: `YES`, `1`, `true`.
    pub fn text(&self) -> String {
        match self {
            Positive::Bool(flag) => flag.to_string(),
            Positive::Number(number) => number_text(number.as_f64().unwrap_or(f64::NAN)),
            Positive::Text(text) => text.clone(),
        }
    }

    /// As it is written in a manifest: `"YES"`, `1`, `true`.
    pub fn yaml(&self) -> String {
        match self {
            Positive::Text(text) => format!("{text:?}"),
            other => other.text(),
        }
    }

    fn kind_name(&self) -> &'static str {
        match self {
            Positive::Bool(_) => "a boolean",
            Positive::Number(_) => "a number",
            Positive::Text(_) => "text",
        }
    }
}

/// The labels of `array`. With no positive value named: true/false, or 0/1 in a numeric column;
/// anything else is invalid. With one: that value is positive, every other value of its type
/// negative (one-vs-rest when there are more than two), a value of another type or NaN invalid.
/// Null is missing either way.
pub fn labels(array: &ArrayRef, positive: Option<&Positive>) -> Vec<Label> {
    let Some(positive) = positive else {
        return zero_one(array);
    };
    let missing_or = |valid: bool, label: Label| if valid { label } else { Label::Missing };
    if Kind::of_array(array) != positive.kind() {
        return (0..array.len())
            .map(|i| missing_or(array.is_valid(i), Label::Invalid))
            .collect();
    }
    let yes_no = |hit: bool| {
        if hit {
            Label::Positive
        } else {
            Label::Negative
        }
    };
    match positive {
        Positive::Text(wanted) => {
            let text = text_array(array);
            (0..text.len())
                .map(|i| missing_or(text.is_valid(i), yes_no(text.value(i) == wanted)))
                .collect()
        }
        Positive::Number(wanted) => {
            let wanted = wanted.as_f64().unwrap_or(f64::NAN);
            numeric_values(array)
                .into_iter()
                .map(|value| match value {
                    None => Label::Missing,
                    Some(v) if v.is_nan() => Label::Invalid,
                    Some(v) => yes_no(v == wanted),
                })
                .collect()
        }
        Positive::Bool(wanted) => {
            let flags = array.as_boolean();
            (0..flags.len())
                .map(|i| missing_or(flags.is_valid(i), yes_no(flags.value(i) == *wanted)))
                .collect()
        }
    }
}

/// Labels from a bool column or a numeric column holding 0 and 1.
fn zero_one(array: &ArrayRef) -> Vec<Label> {
    if let Some(bools) = array.as_boolean_opt() {
        return (0..bools.len())
            .map(|i| match (bools.is_valid(i), bools.value(i)) {
                (false, _) => Label::Missing,
                (true, true) => Label::Positive,
                (true, false) => Label::Negative,
            })
            .collect();
    }
    if matches!(
        array.data_type(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
    ) {
        return (0..array.len())
            .map(|i| {
                if array.is_valid(i) {
                    Label::Invalid
                } else {
                    Label::Missing
                }
            })
            .collect();
    }
    numeric_values(array)
        .into_iter()
        .map(|value| match value {
            None => Label::Missing,
            Some(1.0) => Label::Positive,
            Some(0.0) => Label::Negative,
            Some(_) => Label::Invalid,
        })
        .collect()
}

/// Distinct label values counted past this are only noted: a column with more is no binary
/// label, and a message lists only a few.
const MAX_LABEL_VALUES: usize = 32;
/// Values a message lists.
const SHOWN_VALUES: usize = 10;

/// The distinct values of a label column with their counts, as text: what an error lists, and
/// which values a named positive made negative. Past `MAX_LABEL_VALUES` only the first values in
/// text order are kept, so the counts are exact and the same however the files are cut.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelValues {
    pub counts: BTreeMap<String, u64>,
    /// The column has more distinct values than were counted.
    pub more: bool,
}

impl LabelValues {
    /// Counts `array`'s values: per batch first, so a text is made once per distinct value.
    pub fn add(&mut self, array: &ArrayRef) {
        if Kind::of_array(array) == Kind::Number {
            let mut batch: HashMap<u64, u64> = HashMap::new();
            for value in numeric_values(array).into_iter().flatten() {
                // -0.0 and 0.0 are one label value.
                let value = if value == 0.0 { 0.0 } else { value };
                *batch.entry(value.to_bits()).or_default() += 1;
            }
            for (bits, count) in batch {
                self.count(number_text(f64::from_bits(bits)), count);
            }
        } else {
            let text = text_array(array);
            let mut batch: HashMap<&str, u64> = HashMap::new();
            for value in text.iter().flatten() {
                *batch.entry(value).or_default() += 1;
            }
            for (value, count) in batch {
                self.count(value.to_string(), count);
            }
        }
    }

    pub fn merge(&mut self, other: &LabelValues) {
        self.more |= other.more;
        for (value, count) in &other.counts {
            self.count(value.clone(), *count);
        }
    }

    /// A value dropped for being last in text order has `MAX_LABEL_VALUES` values before it from
    /// then on, so it never comes back: every count kept is exact.
    fn count(&mut self, value: String, count: u64) {
        *self.counts.entry(value).or_default() += count;
        if self.counts.len() > MAX_LABEL_VALUES {
            self.counts.pop_last();
            self.more = true;
        }
    }

    /// The values other than `positive`'s: those read as negative.
    pub fn negatives(&self, positive: &Positive) -> Vec<String> {
        let positive = positive.text();
        self.counts
            .keys()
            .filter(|v| **v != positive)
            .cloned()
            .collect()
    }

    /// `NO, YES`: the values in order (numbers by value), the first few.
    fn listed(&self, kind: Kind) -> String {
        let mut values: Vec<&String> = self.counts.keys().collect();
        if kind == Kind::Number {
            values.sort_by(|a, b| {
                let number = |v: &str| v.parse::<f64>().unwrap_or(f64::NAN);
                number(a).total_cmp(&number(b))
            });
        }
        let mut shown: Vec<&str> = values
            .iter()
            .take(SHOWN_VALUES)
            .map(|v| v.as_str())
            .collect();
        if self.more || values.len() > SHOWN_VALUES {
            shown.push("…");
        }
        shown.join(", ")
    }

    /// The rarest value: positives are usually the few (a search, a default, a churn).
    fn rarest(&self) -> Option<&str> {
        self.counts
            .iter()
            .min_by(|a, b| a.1.cmp(b.1).then_with(|| a.0.cmp(b.0)))
            .map(|(value, _)| value.as_str())
    }
}

/// A number as `LabelValues` keys it: without a trailing `.0`, so an integer file and a float
/// file of one column list `1` once.
fn number_text(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

/// `value` as written in a manifest for a column of `kind`: text quoted.
fn yaml_of(value: &str, kind: Kind) -> String {
    match kind {
        Kind::Text => format!("{value:?}"),
        _ => value.to_string(),
    }
}

/// What is wrong with reading `column` (of `column_type`, holding `values`, `positives` of them
/// equal to `positive`) as a binary label, as an input error that says what to write: text, or
/// two numbers other than 0 and 1, with no positive value named; a positive value of another
/// type than the column's; one the column never holds. Values that are merely bad (a NaN, a
/// stray 2 among 0/1) are not this function's business: they are counted as invalid labels.
pub fn check(
    column: &str,
    column_type: ColumnType,
    positive: Option<&Positive>,
    values: &LabelValues,
    positives: u64,
) -> Result<(), InputError> {
    check_type(column, column_type, positive, values)?;
    let (Some(positive), false) = (positive, values.counts.is_empty()) else {
        return Ok(());
    };
    if positives == 0 {
        let kind = Kind::of_type(column_type);
        let wanted = positive.text();
        let hint = same_text(values, &wanted)
            .map(|v| format!("; did you mean {}?", yaml_of(v, kind)))
            .unwrap_or_default();
        return Err(InputError::field(
            "manifest.data.label_positive",
            format!(
                "`{wanted}` is not a value of `{column}` (values: {}){hint}",
                values.listed(kind)
            ),
        ));
    }
    Ok(())
}

/// The part of [`check`] that the values seen so far decide: a label that needs a positive value
/// named and has none, or one of another type than the column's. For a reader that stops at the
/// first bad row, before it has seen every value.
pub fn check_type(
    column: &str,
    column_type: ColumnType,
    positive: Option<&Positive>,
    values: &LabelValues,
) -> Result<(), InputError> {
    let kind = Kind::of_type(column_type);
    if values.counts.is_empty() {
        // Every label is null: nothing to judge the rule by (label_missing reports it).
        return Ok(());
    }
    let Some(positive) = positive else {
        let coded = kind == Kind::Number && !values.more && {
            let numbers: Vec<f64> = values
                .counts
                .keys()
                .filter_map(|v| v.parse().ok())
                .collect();
            numbers.len() == 2
                && numbers.iter().all(|v| !v.is_nan())
                && !numbers.iter().all(|v| *v == 0.0 || *v == 1.0)
        };
        if kind != Kind::Text && !coded {
            return Ok(());
        }
        let rarest = values.rarest().unwrap_or_default();
        return Err(InputError::field(
            "manifest.data.label",
            format!(
                "`{column}` holds {}; say which is positive with data.label_positive: {}",
                values.listed(kind),
                yaml_of(rarest, kind)
            ),
        ));
    };
    if positive.kind() != kind {
        let suggestion = same_text(values, &positive.text())
            .or_else(|| values.rarest())
            .unwrap_or_default();
        return Err(InputError::field(
            "manifest.data.label_positive",
            format!(
                "{} is {}, but `{column}` holds {} ({}); write data.label_positive: {}",
                positive.yaml(),
                positive.kind_name(),
                kind.plural(),
                values.listed(kind),
                yaml_of(suggestion, kind)
            ),
        ));
    }
    Ok(())
}

/// The value written as `wanted`, or the one that differs from it only in case.
fn same_text<'a>(values: &'a LabelValues, wanted: &str) -> Option<&'a str> {
    let mut keys = values.counts.keys();
    keys.clone()
        .find(|v| *v == wanted)
        .or_else(|| keys.find(|v| v.eq_ignore_ascii_case(wanted)))
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{BooleanArray, Float64Array, Int64Array, StringArray};
    use serde_json::json;
    use std::sync::Arc;

    use Label::{Invalid, Missing, Negative, Positive as Pos};

    fn positive(value: Value) -> Positive {
        Positive::from_manifest(Some(&value)).unwrap().unwrap()
    }

    fn text(values: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(values.to_vec()))
    }

    fn ints(values: &[Option<i64>]) -> ArrayRef {
        Arc::new(Int64Array::from(values.to_vec()))
    }

    fn floats(values: &[Option<f64>]) -> ArrayRef {
        Arc::new(Float64Array::from(values.to_vec()))
    }

    fn flags(values: &[Option<bool>]) -> ArrayRef {
        Arc::new(BooleanArray::from(values.to_vec()))
    }

    fn counted(array: &ArrayRef) -> LabelValues {
        let mut values = LabelValues::default();
        values.add(array);
        values
    }

    #[test]
    fn labels_from_numbers_flag_nan_and_other_values() {
        let array = floats(&[Some(1.0), Some(0.0), None, Some(f64::NAN), Some(2.0)]);
        assert_eq!(
            labels(&array, None),
            [Pos, Negative, Missing, Invalid, Invalid]
        );
        assert_eq!(labels(&ints(&[Some(0), Some(1)]), None), [Negative, Pos]);
        assert_eq!(
            labels(&text(&[Some("1"), None]), None),
            [Invalid, Missing],
            "text is no 0/1 label without a positive value"
        );
    }

    #[test]
    fn text_matches_only_the_same_text() {
        let yes = positive(json!("YES"));
        let column = text(&[Some("YES"), Some("NO"), None, Some("yes"), Some("MAYBE")]);
        assert_eq!(
            labels(&column, Some(&yes)),
            [Pos, Negative, Missing, Negative, Negative],
            "case counts, and every other value is negative (one-vs-rest)"
        );
        // The text "1" is not the number 1, nor is the number 1 the text "1".
        assert_eq!(
            labels(&ints(&[Some(1), None]), Some(&positive(json!("1")))),
            [Invalid, Missing]
        );
        assert_eq!(
            labels(&text(&[Some("1")]), Some(&positive(json!(1)))),
            [Invalid]
        );
    }

    #[test]
    fn a_number_matches_integers_and_floats_of_its_value() {
        for one in [json!(1), json!(1.0)] {
            let one = positive(one);
            assert_eq!(
                labels(&ints(&[Some(1), Some(2), None]), Some(&one)),
                [Pos, Negative, Missing]
            );
            assert_eq!(
                labels(&floats(&[Some(1.0), Some(1.5), Some(f64::NAN)]), Some(&one)),
                [Pos, Negative, Invalid]
            );
            assert_eq!(labels(&flags(&[Some(true)]), Some(&one)), [Invalid]);
        }
        let two = positive(json!(2));
        assert_eq!(
            labels(&ints(&[Some(1), Some(2)]), Some(&two)),
            [Negative, Pos]
        );
        // Zero names the other class of a 0/1 column: the rule flips it, as asked.
        assert_eq!(
            labels(&ints(&[Some(1), Some(0)]), Some(&positive(json!(0)))),
            [Negative, Pos]
        );
    }

    #[test]
    fn a_boolean_matches_only_booleans() {
        let column = flags(&[Some(true), Some(false), None]);
        assert_eq!(
            labels(&column, Some(&positive(json!(true)))),
            [Pos, Negative, Missing]
        );
        assert_eq!(
            labels(&column, Some(&positive(json!(false)))),
            [Negative, Pos, Missing]
        );
        assert_eq!(
            labels(&text(&[Some("true")]), Some(&positive(json!(true)))),
            [Invalid]
        );
        assert_eq!(
            labels(&ints(&[Some(1)]), Some(&positive(json!(true)))),
            [Invalid]
        );
    }

    #[test]
    fn only_scalars_name_a_positive_value() {
        assert_eq!(Positive::from_manifest(None).unwrap(), None);
        assert_eq!(Positive::from_manifest(Some(&Value::Null)).unwrap(), None);
        let err = Positive::from_manifest(Some(&json!(["YES"])))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("manifest.data.label_positive: must be the label value"),
            "{err}"
        );
        assert_eq!(positive(json!("YES")).yaml(), "\"YES\"");
        assert_eq!(positive(json!(2)).yaml(), "2");
        assert_eq!(positive(json!(1.0)).text(), "1");
    }

    #[test]
    fn values_are_counted_as_text_with_numbers_once() {
        let mut values = counted(&ints(&[Some(1), Some(0), None]));
        values.merge(&counted(&floats(&[Some(1.0), Some(2.5)])));
        let counts: Vec<(&str, u64)> = values
            .counts
            .iter()
            .map(|(v, c)| (v.as_str(), *c))
            .collect();
        assert_eq!(counts, [("0", 1), ("1", 2), ("2.5", 1)]);
        assert!(!values.more);
        let many: Vec<Option<i64>> = (0..40).map(Some).collect();
        let values = counted(&ints(&many));
        assert_eq!(values.counts.len(), MAX_LABEL_VALUES);
        assert!(values.more);
        assert_eq!(
            values.listed(Kind::Number),
            "0, 1, 2, 3, 10, 11, 12, 13, 14, 15, …"
        );
        // Cut anywhere and merged, the same values with the same counts.
        for cut in [1, 17, 39] {
            let mut parts = counted(&ints(&many[cut..]));
            parts.merge(&counted(&ints(&many[..cut])));
            parts.merge(&counted(&ints(&many[..cut])));
            let mut twice = counted(&ints(&many));
            twice.merge(&counted(&ints(&many[..cut])));
            assert_eq!(parts, twice, "cut {cut}");
        }
    }

    fn check_of(
        array: &ArrayRef,
        column_type: ColumnType,
        positive: Option<Value>,
    ) -> Result<(), String> {
        let positive = positive.map(self::positive);
        let found = labels(array, positive.as_ref());
        let positives = found.iter().filter(|l| **l == Pos).count() as u64;
        check(
            "personSearch",
            column_type,
            positive.as_ref(),
            &counted(array),
            positives,
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn a_text_label_without_a_positive_value_says_what_to_write() {
        let column = text(&[Some("NO"), Some("YES"), Some("NO"), None]);
        assert_eq!(
            check_of(&column, ColumnType::String, None).unwrap_err(),
            "manifest.data.label: `personSearch` holds NO, YES; say which is positive with data.label_positive: \"YES\""
        );
        assert_eq!(
            check_of(&column, ColumnType::String, Some(json!("YES"))),
            Ok(())
        );
        // Two codes other than 0/1 are a label that needs its positive value named too.
        let coded = ints(&[Some(1), Some(2), Some(2)]);
        assert_eq!(
            check_of(&coded, ColumnType::Int64, None).unwrap_err(),
            "manifest.data.label: `personSearch` holds 1, 2; say which is positive with data.label_positive: 1"
        );
        assert_eq!(check_of(&coded, ColumnType::Int64, Some(json!(2))), Ok(()));
        // 0/1 with a stray value is dirty data, left to the label_invalid check.
        let dirty = floats(&[Some(0.0), Some(1.0), Some(f64::NAN), Some(7.0)]);
        assert_eq!(check_of(&dirty, ColumnType::Float64, None), Ok(()));
        let all_null = text(&[None, None]);
        assert_eq!(check_of(&all_null, ColumnType::String, None), Ok(()));
    }

    #[test]
    fn a_positive_value_the_column_lacks_is_named_with_the_values() {
        let column = text(&[Some("NO"), Some("YES")]);
        assert_eq!(
            check_of(&column, ColumnType::String, Some(json!("yes"))).unwrap_err(),
            "manifest.data.label_positive: `yes` is not a value of `personSearch` (values: NO, YES); did you mean \"YES\"?"
        );
        assert_eq!(
            check_of(&column, ColumnType::String, Some(json!("Y"))).unwrap_err(),
            "manifest.data.label_positive: `Y` is not a value of `personSearch` (values: NO, YES)"
        );
        let numbers = ints(&[Some(0), Some(1), Some(10)]);
        assert_eq!(
            check_of(&numbers, ColumnType::Int64, Some(json!(2))).unwrap_err(),
            "manifest.data.label_positive: `2` is not a value of `personSearch` (values: 0, 1, 10)"
        );
    }

    #[test]
    fn a_positive_value_of_another_type_says_which_to_write() {
        let numbers = ints(&[Some(0), Some(1), Some(1)]);
        assert_eq!(
            check_of(&numbers, ColumnType::Int64, Some(json!("1"))).unwrap_err(),
            "manifest.data.label_positive: \"1\" is text, but `personSearch` holds numbers (0, 1); write data.label_positive: 1"
        );
        let words = text(&[Some("true"), Some("false")]);
        assert_eq!(
            check_of(&words, ColumnType::String, Some(json!(true))).unwrap_err(),
            "manifest.data.label_positive: true is a boolean, but `personSearch` holds text (false, true); write data.label_positive: \"true\""
        );
    }
}
