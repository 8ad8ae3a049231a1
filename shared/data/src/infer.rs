//! Column types inferred from text values (CSV), tolerant of a few bad values.
//!
//! A column whose sampled values all parse as one type gets that type. One stray "n/a" in a
//! million numbers must not turn a numeric column into text: up to `TOLERANCE` of the non-empty
//! sampled values may fail to parse; they are then counted and reported as bad values when read.

use arrow::compute::kernels::cast_utils::Parser;
use arrow::datatypes::{Date32Type, Float64Type, Int64Type, TimestampMicrosecondType};

use crate::types::ColumnType;

/// Rows read from the start of a snapshot to infer types: enough that a rare value pattern
/// (a float among ints) is seen, few enough to take well under a second.
pub const SAMPLE_ROWS: usize = 100_000;

/// The largest share of sampled values that may fail to parse as the chosen type.
pub const TOLERANCE: f64 = 0.01;

/// Counts how many sampled values parse as each candidate type.
#[derive(Debug, Clone, Default)]
pub struct TypeVotes {
    non_empty: u64,
    bools: u64,
    ints: u64,
    floats: u64,
    dates: u64,
    timestamps: u64,
    nans: u64,
}

impl TypeVotes {
    pub fn add(&mut self, value: &str) {
        let value = value.trim();
        if value.is_empty() {
            return;
        }
        self.non_empty += 1;
        if parses_as(ColumnType::Bool, value) {
            self.bools += 1;
        }
        if parses_as(ColumnType::Int64, value) {
            self.ints += 1;
        }
        // An infinite or overflowing number (`inf`, `-inf`, `1e400`) votes for a numeric column
        // too: the column is numbers, and the reader then nulls such a value and reports it as
        // a bad value. Voting it out made a column with 1% of them text, trained as categories.
        if parses_as(ColumnType::Float64, value) || is_non_finite_number(value) {
            self.floats += 1;
        }
        if is_nan_literal(value) {
            self.nans += 1;
        }
        if parses_as(ColumnType::Date, value) {
            self.dates += 1;
        }
        if parses_as(ColumnType::Timestamp, value) {
            self.timestamps += 1;
        }
    }

    /// The most specific type that nearly all values parse as; text otherwise.
    pub fn decide(&self) -> ColumnType {
        if self.non_empty == 0 {
            return ColumnType::String;
        }
        let enough = |count: u64| count as f64 >= self.non_empty as f64 * (1.0 - TOLERANCE);
        [
            (ColumnType::Bool, self.bools),
            (ColumnType::Int64, self.ints),
            (ColumnType::Float64, self.floats),
            (ColumnType::Date, self.dates),
            (ColumnType::Timestamp, self.timestamps),
        ]
        .into_iter()
        // A NaN among integers makes the column a float column holding a NaN, not an integer
        // column with a bad value: NaN must reach the checks that look for it.
        .filter(|(column_type, _)| *column_type != ColumnType::Int64 || self.nans == 0)
        .find(|(_, count)| enough(*count))
        .map_or(ColumnType::String, |(column_type, _)| column_type)
    }
}

/// Whether `value` (trimmed, non-empty) is a valid literal of `column_type`, by the same parsers
/// the cast uses.
pub fn parses_as(column_type: ColumnType, value: &str) -> bool {
    match column_type {
        ColumnType::Bool => {
            value.eq_ignore_ascii_case("true") || value.eq_ignore_ascii_case("false")
        }
        ColumnType::Int64 => Int64Type::parse(value).is_some(),
        ColumnType::Float64 => {
            Float64Type::parse(value).is_some_and(f64::is_finite) || is_nan_literal(value)
        }
        // A date is exactly YYYY-MM-DD; longer strings are timestamps.
        ColumnType::Date => value.len() == 10 && Date32Type::parse(value).is_some(),
        ColumnType::Timestamp => {
            looks_like_a_timestamp(value) && TimestampMicrosecondType::parse(value).is_some()
        }
        ColumnType::String => true,
    }
}

/// What Arrow's timestamp parser requires before anything else: more than 10 bytes that,
/// leading ASCII whitespace aside (Arrow trims it on a second try), start with `YYYY-MM-DD`
/// followed by nothing, `T`, `t` or whitespace. Arrow formats an error message for every value
/// it refuses, and most values of a text column are refused: sampling spent more time on those
/// messages than on parsing.
fn looks_like_a_timestamp(value: &str) -> bool {
    let bytes = value.trim_ascii_start().as_bytes();
    value.len() > 10
        && bytes.len() >= 10
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes
            .get(10)
            .is_none_or(|&b| matches!(b, b'T' | b't') || b.is_ascii_whitespace())
}

/// A literal Arrow's float parser reads as an infinity: `inf`, `-Infinity`, `1e400`. Such a
/// value is a number the columns cannot hold; the reader turns it into a bad value.
pub fn is_non_finite_number(value: &str) -> bool {
    Float64Type::parse(value).is_some_and(f64::is_infinite)
}

fn is_nan_literal(value: &str) -> bool {
    value.eq_ignore_ascii_case("nan")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick refusal before Arrow's timestamp parser refuses nothing Arrow accepts.
    #[test]
    fn the_timestamp_prefilter_agrees_with_arrow() {
        let values = [
            "2024-01-02T03:04:05",
            "2024-01-02t03:04:05.123456",
            "2024-01-02 03:04:05Z",
            "2024-01-02 03:04:05.123+05:00",
            "2024-01-02T03:04",
            "2024-01-02T03:04:05-0800",
            "2024-1-02T03:04:05",
            "+2024-01-02T03:04:05",
            " 2024-01-02T03:04:05",
            "2024/01/02 03:04:05",
            "20240102T030405",
            "2024-01-02",
            "2024-01-02X03:04:05",
            "2024-01-02\t",
            "2024-01-02 ",
            " 2024-01-02",
            "\t2024-01-02T03:04:05 ",
            "Ticket 16819 about usage limits",
            "1.5e10000000",
            "",
        ];
        for value in values {
            assert_eq!(
                parses_as(ColumnType::Timestamp, value),
                value.len() > 10 && TimestampMicrosecondType::parse(value).is_some(),
                "{value:?}"
            );
        }
        assert!(parses_as(ColumnType::Timestamp, "2024-01-02 03:04:05Z"));
    }

    fn infer(values: &[&str]) -> ColumnType {
        let mut votes = TypeVotes::default();
        values.iter().for_each(|v| votes.add(v));
        votes.decide()
    }

    #[test]
    fn picks_the_most_specific_type() {
        assert_eq!(infer(&["1", "2", "-3", ""]), ColumnType::Int64);
        let mut labels = vec!["0"; 300];
        labels.push("NaN");
        assert_eq!(infer(&labels), ColumnType::Float64);
        assert_eq!(infer(&["1", "2.5", "1e3"]), ColumnType::Float64);
        assert_eq!(infer(&["true", "FALSE"]), ColumnType::Bool);
        assert_eq!(infer(&["2026-08-01", "2025-03-01"]), ColumnType::Date);
        assert_eq!(
            infer(&["2026-08-01T10:00:00Z", "2026-08-01 11:30:00"]),
            ColumnType::Timestamp
        );
        assert_eq!(infer(&["C0000001", "C0000002"]), ColumnType::String);
        assert_eq!(infer(&["", ""]), ColumnType::String);
        assert_eq!(infer(&["2026-08", "2026-09"]), ColumnType::String);
    }

    /// Infinities are numbers that no column holds: they vote for a numeric column (and are bad
    /// values when read), however many there are; a word is still text.
    #[test]
    fn infinities_vote_for_a_numeric_column() {
        let mut values: Vec<&str> = vec!["12"; 95];
        values.extend(["inf", "-inf", "1e400", "-Infinity", "INF"]);
        assert_eq!(infer(&values), ColumnType::Float64);
        assert!(is_non_finite_number("1e400") && is_non_finite_number("-inf"));
        assert!(!is_non_finite_number("1e300") && !is_non_finite_number("NaN"));
        assert!(!is_non_finite_number("infinite"));
        values.extend(["n/a"; 5]);
        assert_eq!(infer(&values), ColumnType::String);
    }

    #[test]
    fn a_rare_bad_value_does_not_make_a_numeric_column_text() {
        let mut values: Vec<String> = (0..5000).map(|i| format!("{}.5", i)).collect();
        values.push("n/a".into());
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        assert_eq!(infer(&refs), ColumnType::Float64);
        values.extend((0..100).map(|_| "n/a".to_string()));
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        assert_eq!(infer(&refs), ColumnType::String, "2% text is a text column");
    }
}
