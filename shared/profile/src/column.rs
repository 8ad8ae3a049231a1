//! One column's profile: mergeable accumulators, and the summary people read.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

use arrow::array::{Array, ArrayRef};
use runfn_data::ColumnType;
use runfn_data::label::{Label, LabelValues, Positive, labels};
use runfn_data::values::{numeric_values, text_array};
use runfn_stats::sketch::frequencies::Frequencies;
use runfn_stats::sketch::hll::{HyperLogLog, hash_bytes};
use runfn_stats::sketch::quantiles::QuantileSketch;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// HyperLogLog precision: 2^12 registers, about 1.6% error, 4 KiB per column in a profile.
const HLL_PRECISION: u8 = 12;
const TOP_CATEGORIES: usize = 10;
/// Distinct values of a numeric column counted exactly: enough for terms, ages, counts and
/// codes, whose ties the quantile sketch can only approximate; a continuous column passes it
/// within its first batch and stops counting.
pub const VALUE_CAP: usize = 1_000;
const MICROS_PER_DAY: f64 = 86_400_000_000.0;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ColumnProfile {
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    pub count: u64,
    pub nulls: u64,
    /// NaN values of a float column (not counted in the moments or quantiles).
    pub nans: u64,
    pub moments: Moments,
    pub quantiles: Option<QuantileSketch>,
    pub distinct: HyperLogLog,
    pub frequencies: Option<Frequencies>,
    /// Exact counts of a numeric column's values (keyed by the value's shortest round-trip
    /// text), given up past [`VALUE_CAP`] distinct values. Absent from profiles written before
    /// they were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Frequencies>,
    pub label: Option<LabelCounts>,
    /// The label value counted as positive (`manifest.data.label_positive`); none: 0/1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_positive: Option<Positive>,
    /// The label's distinct values, for the messages that say what to write and for which values
    /// a named positive made negative. Absent in profiles written before they were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_values: Option<LabelValues>,
}

/// Count, mean and sum of squared deviations, merged with Chan et al.'s parallel formula, so
/// the merge of many files gives the same mean and variance as one pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Moments {
    pub n: u64,
    pub mean: f64,
    pub m2: f64,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Moments {
    fn add(&mut self, x: f64) {
        self.n += 1;
        let delta = x - self.mean;
        self.mean += delta / self.n as f64;
        self.m2 += delta * (x - self.mean);
        self.min = Some(self.min.map_or(x, |m| m.min(x)));
        self.max = Some(self.max.map_or(x, |m| m.max(x)));
    }

    pub fn merge(&mut self, other: &Moments) {
        if other.n == 0 {
            return;
        }
        if self.n == 0 {
            *self = *other;
            return;
        }
        let n = self.n + other.n;
        let delta = other.mean - self.mean;
        self.m2 += other.m2 + delta * delta * self.n as f64 * other.n as f64 / n as f64;
        self.mean += delta * other.n as f64 / n as f64;
        self.n = n;
        self.min = self.min.zip(other.min).map(|(a, b)| a.min(b));
        self.max = self.max.zip(other.max).map(|(a, b)| a.max(b));
    }

    pub fn std(&self) -> Option<f64> {
        (self.n > 1).then(|| (self.m2 / (self.n - 1) as f64).sqrt())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelCounts {
    pub positives: u64,
    pub negatives: u64,
    /// Present but not 0/1 or true/false (NaN, 2, text).
    pub invalid: u64,
}

impl LabelCounts {
    pub fn rate(&self) -> Option<f64> {
        let known = self.positives + self.negatives;
        (known > 0).then(|| self.positives as f64 / known as f64)
    }
}

impl ColumnProfile {
    /// `is_identifier`: an entity or free-text column, whose every value is new by design; it
    /// gets no category counts (which would only cost time and a useless top list).
    pub fn new(
        name: &str,
        column_type: ColumnType,
        is_label: bool,
        is_identifier: bool,
    ) -> ColumnProfile {
        let numeric = column_type.is_numeric() || column_type.is_temporal();
        ColumnProfile {
            name: name.to_string(),
            column_type,
            count: 0,
            nulls: 0,
            nans: 0,
            moments: Moments::default(),
            quantiles: numeric.then(QuantileSketch::default),
            distinct: HyperLogLog::new(HLL_PRECISION).unwrap_or_default(),
            frequencies: (!is_identifier
                && matches!(column_type, ColumnType::String | ColumnType::Bool))
            .then(Frequencies::default),
            values: matches!(column_type, ColumnType::Int64 | ColumnType::Float64)
                .then(|| Frequencies::new(VALUE_CAP)),
            label: is_label.then(LabelCounts::default),
            label_positive: None,
            label_values: is_label.then(LabelValues::default),
        }
    }

    pub fn add(&mut self, array: &ArrayRef) {
        self.count += array.len() as u64;
        self.nulls += array.null_count() as u64;
        if self.quantiles.is_some() {
            let values = numeric_values(array);
            let mut finite = Vec::with_capacity(values.len());
            for value in values.into_iter().flatten() {
                if value.is_nan() {
                    self.nans += 1;
                } else {
                    self.moments.add(value);
                    finite.push(value);
                }
            }
            self.count_values(&finite);
            if let Some(quantiles) = self.quantiles.as_mut() {
                quantiles.add_batch(&finite);
            }
        }
        if self.quantiles.is_none() || self.frequencies.is_some() {
            let text = text_array(array);
            // Counted per batch first: one sketch update per distinct value, not per row. A
            // sketch that gave up (ids, free text) is past reading values at all, and a batch
            // with more distinct values than the cap gives up at once instead of filling a map
            // of 64k new values only to drop it.
            let cap = self.frequencies.as_ref().map_or(0, Frequencies::cap);
            let mut counting = self.frequencies.as_ref().is_some_and(|f| !f.truncated());
            let mut over_cap = false;
            let mut batch_counts: HashMap<Hashed, u64, BuildHashed> = HashMap::default();
            for row in 0..text.len() {
                if text.is_valid(row) {
                    let value = text.value(row);
                    let hash = hash_bytes(value.as_bytes());
                    if self.quantiles.is_none() {
                        self.distinct.insert(hash);
                    }
                    if counting {
                        *batch_counts.entry(Hashed { hash, value }).or_insert(0) += 1;
                        if batch_counts.len() > cap {
                            (counting, over_cap) = (false, true);
                        }
                    }
                }
            }
            if let Some(frequencies) = self.frequencies.as_mut() {
                if over_cap {
                    frequencies.give_up();
                }
                if counting {
                    // In hash order: exact counts or none do not depend on the order.
                    for (key, count) in batch_counts {
                        frequencies.add_n(key.value, count);
                    }
                } else {
                    frequencies.add_uncounted((text.len() - text.null_count()) as u64);
                }
            }
        }
        if let Some(values) = self.label_values.as_mut() {
            values.add(array);
        }
        if let Some(counts) = self.label.as_mut() {
            for label in labels(array, self.label_positive.as_ref()) {
                match label {
                    Label::Positive => counts.positives += 1,
                    Label::Negative => counts.negatives += 1,
                    Label::Invalid => counts.invalid += 1,
                    Label::Missing => {}
                }
            }
        }
    }

    /// Feeds the distinct count and, while it counts, the exact value counts; like category
    /// counts, per batch first, and a batch with more distinct values than the cap gives up.
    fn count_values(&mut self, finite: &[f64]) {
        let mut counting = self.values.as_ref().is_some_and(|v| !v.truncated());
        let mut over_cap = false;
        let mut batch_counts: HashMap<HashedNumber, u64, BuildHashed> = HashMap::default();
        for &value in finite {
            // -0.0 and 0.0 are one value to a person and to the model.
            let value = if value == 0.0 { 0.0 } else { value };
            let hash = hash_bytes(&value.to_le_bytes());
            self.distinct.insert(hash);
            if counting {
                *batch_counts
                    .entry(HashedNumber {
                        hash,
                        bits: value.to_bits(),
                    })
                    .or_insert(0) += 1;
                if batch_counts.len() > VALUE_CAP {
                    (counting, over_cap) = (false, true);
                }
            }
        }
        if let Some(values) = self.values.as_mut() {
            if over_cap {
                values.give_up();
            }
            if counting {
                for (key, count) in batch_counts {
                    values.add_n(&value_key(f64::from_bits(key.bits)), count);
                }
            } else {
                values.add_uncounted(finite.len() as u64);
            }
        }
    }

    /// The exact counts of a numeric column's values, when it kept them.
    pub fn value_counts(&self) -> Option<Vec<(f64, u64)>> {
        let values = self.values.as_ref().filter(|v| !v.truncated())?;
        values
            .counts()
            .iter()
            .map(|(key, count)| key.parse().ok().map(|value| (value, *count)))
            .collect()
    }

    pub fn merge(&mut self, other: &ColumnProfile) -> Result<(), String> {
        // A file whose column happened to hold only integers merges into a float column: both
        // are profiled as doubles.
        let numbers = [ColumnType::Int64, ColumnType::Float64];
        if numbers.contains(&self.column_type) && numbers.contains(&other.column_type) {
            self.column_type = self.column_type.max(other.column_type);
        } else if other.column_type != self.column_type {
            return Err(format!(
                "column `{}` is {} in one profile and {} in the other",
                self.name,
                self.column_type.name(),
                other.column_type.name()
            ));
        }
        self.count += other.count;
        self.nulls += other.nulls;
        self.nans += other.nans;
        self.moments.merge(&other.moments);
        if let (Some(mine), Some(theirs)) = (self.quantiles.as_ref(), other.quantiles.as_ref()) {
            self.quantiles = Some(QuantileSketch::merge([mine, theirs]));
        }
        self.distinct
            .merge(&other.distinct)
            .map_err(|e| format!("column `{}`: {e}", self.name))?;
        if let (Some(mine), Some(theirs)) = (self.frequencies.as_mut(), other.frequencies.as_ref())
        {
            mine.merge(theirs);
        }
        if other.label_positive != self.label_positive {
            return Err(format!(
                "column `{}`: its labels were read with different positive values",
                self.name
            ));
        }
        if let (Some(mine), Some(theirs)) =
            (self.label_values.as_mut(), other.label_values.as_ref())
        {
            mine.merge(theirs);
        }
        match (self.values.as_mut(), other.values.as_ref()) {
            (Some(mine), Some(theirs)) => mine.merge(theirs),
            // A part profiled before value counts existed: the whole's counts are unknown.
            (Some(_), None) => self.values = None,
            _ => {}
        }
        if let (Some(mine), Some(theirs)) = (self.label.as_mut(), other.label.as_ref()) {
            mine.positives += theirs.positives;
            mine.negatives += theirs.negatives;
            mine.invalid += theirs.invalid;
        }
        Ok(())
    }

    pub fn null_rate(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.nulls as f64 / self.count as f64
        }
    }

    /// The exact number of distinct values where every value was counted (categories, or a
    /// numeric column's value counts); the HyperLogLog estimate stands only where counts gave up.
    pub fn exact_distinct(&self) -> Option<u64> {
        let counted = |f: &runfn_stats::sketch::frequencies::Frequencies| {
            (!f.truncated() && f.other() == 0).then(|| f.counts().len() as u64)
        };
        self.frequencies
            .as_ref()
            .and_then(counted)
            .or_else(|| self.values.as_ref().and_then(counted))
    }

    /// What a person reads: no sketch internals, dates shown as dates.
    pub fn summary(&self) -> Value {
        let show = |v: f64| -> Value {
            match self.column_type {
                ColumnType::Date | ColumnType::Timestamp => json!(date_text(v, self.column_type)),
                _ => json!(v),
            }
        };
        let mut summary = json!({
            "type": self.column_type.name(),
            "count": self.count,
            "nulls": self.nulls,
            "null_rate": self.null_rate(),
            "distinct": self.exact_distinct().unwrap_or_else(|| self.distinct.estimate().round() as u64),
        });
        if self.nans > 0 {
            summary["nans"] = json!(self.nans);
        }
        if let (Some(min), Some(max)) = (self.moments.min, self.moments.max) {
            summary["min"] = show(min);
            summary["max"] = show(max);
            if !self.column_type.is_temporal() {
                summary["mean"] = json!(self.moments.mean);
                summary["std"] = json!(self.moments.std());
            }
        }
        if let Some(quantiles) = &self.quantiles {
            let mut q = serde_json::Map::new();
            for (name, p) in [
                ("p01", 0.01),
                ("p05", 0.05),
                ("p25", 0.25),
                ("p50", 0.5),
                ("p75", 0.75),
                ("p95", 0.95),
                ("p99", 0.99),
            ] {
                if let Some(value) = quantiles.quantile(p) {
                    q.insert(name.into(), show(value));
                }
            }
            summary["quantiles"] = Value::Object(q);
        }
        if let Some(frequencies) = self.frequencies.as_ref().filter(|f| f.truncated()) {
            summary["top_skipped"] = json!(format!(
                "over {} distinct values: categories not counted",
                frequencies.cap()
            ));
        } else if let Some(frequencies) = &self.frequencies {
            let total = frequencies.total().max(1) as f64;
            summary["top"] = frequencies.top(TOP_CATEGORIES).into_iter().map(|(value, count)| json!({"value": value, "count": count, "share": count as f64 / total})).collect();
        }
        if let Some(label) = &self.label {
            summary["label_rate"] = json!(label.rate());
            summary["label_invalid"] = json!(label.invalid);
        }
        summary
    }
}

/// A value with its XXH3 hash, computed once for HyperLogLog and reused by the batch's count
/// map (SipHash over long free text was a tenth of a profile's time). Equality still compares
/// the text, so counts stay exact whatever the hashes.
struct Hashed<'a> {
    hash: u64,
    value: &'a str,
}

impl PartialEq for Hashed<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl Eq for Hashed<'_> {}

impl Hash for Hashed<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// A number's bits with their XXH3 hash, computed once for HyperLogLog and the count map.
#[derive(PartialEq, Eq)]
struct HashedNumber {
    hash: u64,
    bits: u64,
}

impl Hash for HashedNumber {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// A value's key in the exact counts: the shortest text that reads back as the same f64.
fn value_key(value: f64) -> String {
    format!("{value:?}")
}

/// Passes a `Hashed` key's hash through unchanged.
#[derive(Default)]
struct PassHash(u64);

impl Hasher for PassHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `Hashed` and `HashedNumber` keys use this hasher, and they write one u64.
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}

type BuildHashed = BuildHasherDefault<PassHash>;

fn date_text(value: f64, column_type: ColumnType) -> String {
    let days = (value / MICROS_PER_DAY).floor() as i64;
    let seconds = (value / 1e6).floor() as i64;
    match arrow::temporal_conversions::timestamp_s_to_datetime(seconds) {
        Some(time) if column_type == ColumnType::Date => time.date().to_string(),
        Some(time) => time.to_string(),
        None => format!("{days} days"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{BooleanArray, Date32Array, Float64Array, Int64Array, StringArray};

    use super::*;

    fn floats(values: &[Option<f64>]) -> ArrayRef {
        Arc::new(Float64Array::from(values.to_vec()))
    }

    fn strings(values: &[Option<&str>]) -> ArrayRef {
        Arc::new(StringArray::from(values.to_vec()))
    }

    fn profiled(column_type: ColumnType, arrays: &[ArrayRef]) -> ColumnProfile {
        let mut column = ColumnProfile::new("c", column_type, false, false);
        for array in arrays {
            column.add(array);
        }
        column
    }

    #[test]
    fn a_numeric_column_counts_nulls_and_nans_apart_from_its_moments() {
        let column = profiled(
            ColumnType::Float64,
            &[floats(&[
                Some(1.0),
                Some(2.0),
                None,
                Some(f64::NAN),
                Some(3.0),
                Some(4.0),
            ])],
        );
        assert_eq!((column.count, column.nulls, column.nans), (6, 1, 1));
        assert_eq!(column.moments.n, 4);
        assert_eq!(column.moments.mean, 2.5);
        assert_eq!(
            (column.moments.min, column.moments.max),
            (Some(1.0), Some(4.0))
        );
        // Sample variance of 1..4: 5/3.
        assert!((column.moments.std().unwrap() - (5.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(column.quantiles.as_ref().unwrap().count(), 4);
        assert_eq!(column.distinct.estimate().round(), 4.0);
        assert!(column.frequencies.is_none() && column.label.is_none());
        assert!((column.null_rate() - 1.0 / 6.0).abs() < 1e-12);

        let summary = column.summary();
        assert_eq!(summary["nans"], 1);
        assert_eq!(summary["mean"], 2.5);
        assert_eq!(
            (summary["min"].as_f64(), summary["max"].as_f64()),
            (Some(1.0), Some(4.0))
        );
        let median = summary["quantiles"]["p50"].as_f64().unwrap();
        assert!((2.0..=3.0).contains(&median), "{median}");
        assert!(summary.get("top").is_none());
    }

    #[test]
    fn a_categorical_column_counts_categories_and_distinct_values() {
        let column = profiled(
            ColumnType::String,
            &[
                strings(&[Some("a"), Some("b"), None]),
                strings(&[Some("a"), Some("c"), Some("a")]),
            ],
        );
        assert_eq!((column.count, column.nulls, column.nans), (6, 1, 0));
        assert!(column.quantiles.is_none());
        assert_eq!(column.moments.n, 0);
        let counts: Vec<(&str, u64)> = column
            .frequencies
            .as_ref()
            .unwrap()
            .counts()
            .iter()
            .map(|(k, v)| (k.as_str(), *v))
            .collect();
        assert_eq!(counts, [("a", 3), ("b", 1), ("c", 1)]);
        assert_eq!(column.distinct.estimate().round(), 3.0);
        let summary = column.summary();
        assert_eq!(summary["top"][0]["value"], "a");
        assert_eq!(summary["top"][0]["count"], 3);
        assert_eq!(summary["top"][0]["share"], 0.6);
        assert!(summary.get("mean").is_none() && summary.get("quantiles").is_none());

        let mut id = ColumnProfile::new("id", ColumnType::String, false, true);
        id.add(&strings(&[Some("x"), Some("y")]));
        assert!(
            id.frequencies.is_none(),
            "identifiers get no category counts"
        );
        assert_eq!(id.distinct.estimate().round(), 2.0);
    }

    /// An undeclared id stops paying for category counts once it is clearly high-cardinality;
    /// a category beside it keeps exact counts.
    #[test]
    fn a_high_cardinality_column_gives_up_its_counts_and_a_category_keeps_them() {
        use runfn_stats::sketch::frequencies::DEFAULT_CAP;
        let rows = DEFAULT_CAP + 500;
        let ids: Vec<String> = (0..rows).map(|i| format!("C{i:07}")).collect();
        let kinds: Vec<&str> = (0..rows).map(|i| ["a", "b", "c"][i % 3]).collect();
        let (mut id, mut kind) = (
            ColumnProfile::new("id", ColumnType::String, false, false),
            ColumnProfile::new("kind", ColumnType::String, false, false),
        );
        for start in (0..rows).step_by(4096) {
            let end = (start + 4096).min(rows);
            let batch: Vec<Option<&str>> =
                ids[start..end].iter().map(|s| Some(s.as_str())).collect();
            id.add(&strings(&batch));
            let batch: Vec<Option<&str>> = kinds[start..end].iter().map(|s| Some(*s)).collect();
            kind.add(&strings(&batch));
        }
        // One batch over the cap gives up at once, to the same sketch.
        let mut one_batch = ColumnProfile::new("id", ColumnType::String, false, false);
        let all: Vec<Option<&str>> = ids.iter().map(|s| Some(s.as_str())).collect();
        one_batch.add(&strings(&all));
        assert_eq!(one_batch, id);
        let id_counts = id.frequencies.as_ref().unwrap();
        assert!(id_counts.truncated() && id_counts.counts().is_empty());
        assert_eq!(id_counts.total(), rows as u64, "values are still counted");
        let distinct = id.distinct.estimate();
        assert!(
            (distinct - rows as f64).abs() < rows as f64 * 0.05,
            "{distinct}"
        );
        let summary = id.summary();
        assert!(summary.get("top").is_none(), "{summary}");
        assert_eq!(
            summary["top_skipped"],
            "over 10000 distinct values: categories not counted"
        );

        let kind_counts = kind.frequencies.as_ref().unwrap();
        assert!(!kind_counts.truncated());
        let exact: Vec<u64> = kind_counts.counts().values().copied().collect();
        let expected: Vec<u64> = (0..3)
            .map(|k| (0..rows).filter(|i| i % 3 == k).count() as u64)
            .collect();
        assert_eq!(exact, expected);
        assert!(kind.summary().get("top_skipped").is_none());
    }

    #[test]
    fn an_all_null_column_has_no_range() {
        let column = profiled(ColumnType::Float64, &[floats(&[None, None, None])]);
        assert_eq!((column.count, column.nulls), (3, 3));
        assert_eq!(column.null_rate(), 1.0);
        assert_eq!((column.moments.n, column.moments.min), (0, None));
        assert_eq!(column.moments.std(), None);
        let summary = column.summary();
        assert!(summary.get("min").is_none() && summary.get("mean").is_none());
        assert_eq!(summary["distinct"], 0.0);
        assert_eq!(profiled(ColumnType::Float64, &[]).null_rate(), 0.0);
    }

    #[test]
    fn label_values_are_sorted_into_positive_negative_and_invalid() {
        let mut label = ColumnProfile::new("y", ColumnType::Int64, true, false);
        label.add(
            &(Arc::new(Int64Array::from(vec![
                Some(1),
                Some(0),
                Some(1),
                None,
                Some(2),
            ])) as ArrayRef),
        );
        let counts = label.label.unwrap();
        assert_eq!(
            (counts.positives, counts.negatives, counts.invalid),
            (2, 1, 1)
        );
        assert_eq!(counts.rate(), Some(2.0 / 3.0));
        assert_eq!(label.summary()["label_invalid"], 1);
        assert_eq!(LabelCounts::default().rate(), None);

        let mut flags = ColumnProfile::new("y", ColumnType::Bool, true, false);
        flags.add(&(Arc::new(BooleanArray::from(vec![Some(true), Some(false), None])) as ArrayRef));
        let counts = flags.label.unwrap();
        assert_eq!(
            (counts.positives, counts.negatives, counts.invalid),
            (1, 1, 0)
        );
        assert!(
            flags.frequencies.is_some(),
            "a bool column is also categorical"
        );
    }

    #[test]
    fn dates_are_shown_as_dates() {
        // 2026-01-01 is day 20454 since the epoch.
        let days: ArrayRef = Arc::new(Date32Array::from(vec![20454, 20484]));
        let column = profiled(ColumnType::Date, &[days]);
        let summary = column.summary();
        assert_eq!(summary["min"], "2026-01-01");
        assert_eq!(summary["max"], "2026-01-31");
        assert!(summary.get("mean").is_none(), "a mean date is not shown");
    }

    /// Merging the moments of any cut of the data gives the moments of the whole.
    #[test]
    fn moments_merge_like_one_pass() {
        let values: Vec<f64> = (0..50)
            .map(|i| ((i * 37) % 23) as f64 * 1.5 - 4.0)
            .collect();
        let mut whole = Moments::default();
        values.iter().for_each(|v| whole.add(*v));
        for cut in [0, 1, 17, 49, 50] {
            let (mut left, mut right) = (Moments::default(), Moments::default());
            values[..cut].iter().for_each(|v| left.add(*v));
            values[cut..].iter().for_each(|v| right.add(*v));
            left.merge(&right);
            assert_eq!(left.n, whole.n, "cut {cut}");
            assert!((left.mean - whole.mean).abs() < 1e-12, "cut {cut}");
            assert!(
                (left.m2 - whole.m2).abs() < 1e-9,
                "cut {cut}: {} vs {}",
                left.m2,
                whole.m2
            );
            assert_eq!((left.min, left.max), (whole.min, whole.max), "cut {cut}");
        }
    }

    #[test]
    fn columns_merge_counts_and_sketches_and_refuse_other_types() {
        let mut ints = ColumnProfile::new("c", ColumnType::Int64, false, false);
        ints.add(&(Arc::new(Int64Array::from(vec![Some(1), None, Some(2)])) as ArrayRef));
        let floats = profiled(
            ColumnType::Float64,
            &[floats(&[Some(2.0), Some(f64::NAN), Some(9.5)])],
        );
        ints.merge(&floats).unwrap();
        assert_eq!(ints.column_type, ColumnType::Float64);
        assert_eq!((ints.count, ints.nulls, ints.nans), (6, 1, 1));
        assert_eq!((ints.moments.n, ints.moments.max), (4, Some(9.5)));
        assert_eq!(ints.quantiles.as_ref().unwrap().count(), 4);
        assert_eq!(
            ints.distinct.estimate().round(),
            3.0,
            "2 in both counts once"
        );

        let text = profiled(ColumnType::String, &[strings(&[Some("a")])]);
        let err = ints.merge(&text).unwrap_err();
        assert_eq!(
            err,
            "column `c` is float64 in one profile and string in the other"
        );

        let mut left = profiled(ColumnType::String, &[strings(&[Some("a"), Some("b")])]);
        left.merge(&profiled(
            ColumnType::String,
            &[strings(&[Some("b"), None])],
        ))
        .unwrap();
        assert_eq!(left.frequencies.as_ref().unwrap().counts()["b"], 2);
        assert_eq!((left.count, left.nulls), (4, 1));
        assert_eq!(left.distinct.estimate().round(), 2.0);
    }
}
