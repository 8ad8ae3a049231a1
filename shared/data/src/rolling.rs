//! Rolling splits: windows that move with the data, so one manifest (and one manifest hash)
//! serves every night of a growing snapshot.
//!
//! Forms, over `manifest.data.time` (a date or timestamp column), with the units `day`, `week`,
//! `month` and `year` (singular or plural):
//! - `last 1 month`: the month up to the snapshot's latest time value, that value included;
//! - `2 weeks before test`: the two weeks that end where the split `test` starts;
//! - `before val`: everything before the split `val` starts.
//!
//! Windows are half-open on the older side, `(start, end]`, so that consecutive windows share no
//! row and leave none out. Months and years are calendar months and years (`2017-03-31` less one
//! month is `2017-02-28`), counted back from the anchor.

use chrono::{DateTime, Months, NaiveDate};
use rayon::prelude::*;

use crate::error::DataError;
use crate::read::Snapshot;
use crate::types::ColumnType;
use crate::values::numeric_values;

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// A rolling rule, parsed.
#[derive(Debug, Clone, PartialEq)]
pub enum Rolling {
    /// `last N unit`: `(anchor - N units, anchor]`.
    Last(Span),
    /// `[N unit] before SPLIT`: ends where `SPLIT` starts; with no span, reaches back to the
    /// oldest row.
    Before { span: Option<Span>, split: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub count: u32,
    pub unit: Unit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Day,
    Week,
    Month,
    Year,
}

impl Rolling {
    /// The rule as a rolling window; `None` when it is not written as one (a fixed rule), an
    /// error when it starts like one but is malformed.
    pub fn parse(rule: &str) -> Option<Result<Rolling, String>> {
        let words: Vec<&str> = rule.split_whitespace().collect();
        let lower: Vec<String> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        let first = lower.first()?;
        if first == "last" {
            return Some(match &words[1..] {
                [count, unit] => Span::parse(count, unit).map(Rolling::Last),
                _ => Err("write `last N days|weeks|months|years`".into()),
            });
        }
        if first == "before" {
            return Some(match &words[1..] {
                [split] => Ok(Rolling::Before {
                    span: None,
                    split: split.to_string(),
                }),
                _ => Err("write `before SPLIT`, naming another split".into()),
            });
        }
        // `N unit before SPLIT`: recognised by its `before`, so `a before b` is not read as a
        // fixed rule and refused with a less useful message.
        let n = lower.len();
        if n >= 2 && (lower[n - 2] == "before" || lower[n - 1] == "before") {
            return Some(match &words[..] {
                [count, unit, _, split] => Span::parse(count, unit).map(|span| Rolling::Before {
                    span: Some(span),
                    split: split.to_string(),
                }),
                _ => Err("write `N days|weeks|months|years before SPLIT`".into()),
            });
        }
        None
    }

    /// The split this window is placed against, if any.
    pub fn depends_on(&self) -> Option<&str> {
        match self {
            Rolling::Last(_) => None,
            Rolling::Before { split, .. } => Some(split),
        }
    }
}

impl Span {
    fn parse(count: &str, unit: &str) -> Result<Span, String> {
        let count: u32 = count
            .parse()
            .map_err(|_| format!("`{count}` is not a whole number of {unit}"))?;
        if count == 0 {
            return Err("the window is empty: it needs at least 1 unit".into());
        }
        let lower = unit.to_ascii_lowercase();
        // One plural `s` at most: `dayss` is a typo, not days.
        let unit = match lower.strip_suffix('s').unwrap_or(&lower) {
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "year" => Unit::Year,
            _ => {
                return Err(format!(
                    "`{unit}` is not a unit (days, weeks, months or years)"
                ));
            }
        };
        Ok(Span { count, unit })
    }

    /// `micros` (since the epoch) moved back by this span; `None` when it leaves the calendar.
    pub fn before(&self, micros: f64) -> Option<f64> {
        let micros = micros as i64;
        let back = |days: i64| micros.checked_sub(days.checked_mul(MICROS_PER_DAY)?);
        let moved = match self.unit {
            Unit::Day => back(self.count as i64)?,
            Unit::Week => back(self.count as i64 * 7)?,
            Unit::Month | Unit::Year => {
                let months = match self.unit {
                    Unit::Year => self.count.checked_mul(12)?,
                    _ => self.count,
                };
                let time = DateTime::from_timestamp_micros(micros)?.naive_utc();
                time.checked_sub_months(Months::new(months))?
                    .and_utc()
                    .timestamp_micros()
            }
        };
        Some(moved as f64)
    }
}

/// True when any rule is a rolling window, so the snapshot's latest time is needed.
pub fn any_rolling(rules: &[(String, String)]) -> bool {
    rules.iter().any(|(_, rule)| Rolling::parse(rule).is_some())
}

/// The latest value of `column` over the whole snapshot (microseconds since the epoch), the
/// anchor rolling windows count back from; `None` when the column holds no value. Files are read
/// in parallel; the maximum does not depend on their order.
pub fn latest_time(snapshot: &Snapshot, column: &str) -> Result<Option<f64>, DataError> {
    let per_file: Vec<Option<f64>> = (0..snapshot.files.len())
        .into_par_iter()
        .map(|file| {
            let mut latest: Option<f64> = None;
            for batch in snapshot.read_file(file)? {
                let batch = batch?;
                if let Some(array) = batch.batch.column_by_name(column) {
                    for value in numeric_values(array).into_iter().flatten() {
                        latest = Some(latest.map_or(value, |l: f64| l.max(value)));
                    }
                }
            }
            Ok(latest)
        })
        .collect::<Result<_, DataError>>()?;
    Ok(per_file.into_iter().flatten().reduce(f64::max))
}

/// Why `anchor`, the newest value of the time column, cannot anchor rolling windows: it lies
/// more than a day after the clock of the run. A snapshot's rows happened; one dated in the future
/// is a typo (2099 for 2019), and as the anchor it would make `last 1 month` its month alone
/// while every stage passed.
pub fn future_anchor(column: &str, column_type: ColumnType, anchor: f64) -> Option<String> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_micros() as f64;
    (anchor > now + MICROS_PER_DAY as f64).then(|| {
        format!(
            "the newest `{column}` is {}, after today ({}): rolling windows count back from it, so fix or drop the mistyped row",
            format_point(anchor, column_type),
            format_point(now - now % MICROS_PER_DAY as f64, ColumnType::Date)
        )
    })
}

/// A point of a date or timestamp column as a person writes it: `2017-12-01` for a date,
/// `2017-12-01T05:52:35Z` (with fractions only when present) for a timestamp.
pub fn format_point(micros: f64, column_type: ColumnType) -> String {
    let micros = micros as i64;
    if column_type == ColumnType::Date && micros % MICROS_PER_DAY == 0 {
        let days = micros.div_euclid(MICROS_PER_DAY);
        return NaiveDate::from_num_days_from_ce_opt(days as i32 + 719_163)
            .map_or_else(|| micros.to_string(), |d| d.format("%Y-%m-%d").to_string());
    }
    match DateTime::from_timestamp_micros(micros) {
        Some(time) if micros % 1_000_000 == 0 => time.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Some(time) => time.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        None => micros.to_string(),
    }
}

/// The type a rolling window needs of the time column: a date or a timestamp.
pub fn check_time_column(column: &str, column_type: ColumnType) -> Result<(), String> {
    if column_type.is_temporal() {
        Ok(())
    } else {
        Err(format!(
            "`{column}` (manifest.data.time) is a {} column; a rolling window needs dates or timestamps (give the column's type in a schema file if it holds dates written another way)",
            column_type.name()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::compute::kernels::cast_utils::Parser;
    use arrow::datatypes::TimestampMicrosecondType;

    fn at(text: &str) -> f64 {
        TimestampMicrosecondType::parse(text).unwrap() as f64
    }

    #[test]
    fn parses_the_three_forms_and_only_them() {
        assert_eq!(
            Rolling::parse("last 1 month"),
            Some(Ok(Rolling::Last(Span {
                count: 1,
                unit: Unit::Month
            })))
        );
        assert_eq!(
            Rolling::parse("2 Weeks before test"),
            Some(Ok(Rolling::Before {
                span: Some(Span {
                    count: 2,
                    unit: Unit::Week
                }),
                split: "test".into()
            }))
        );
        assert_eq!(
            Rolling::parse("before val"),
            Some(Ok(Rolling::Before {
                span: None,
                split: "val".into()
            }))
        );
        for fixed in [
            "time < 2026-08-01",
            "2026-08",
            "hash(id) < 0.8",
            "split == test",
        ] {
            assert_eq!(Rolling::parse(fixed), None, "{fixed}");
        }
    }

    #[test]
    fn malformed_windows_say_what_to_write() {
        let error = |rule: &str| Rolling::parse(rule).unwrap().unwrap_err();
        assert!(error("last 0 days").contains("at least 1"));
        assert!(error("last 3 fortnights").contains("not a unit"));
        assert!(error("last month").contains("last N days"));
        assert!(error("last -1 days").contains("whole number"));
        assert!(error("1 month before").contains("before SPLIT"));
        assert!(error("before").contains("before SPLIT"));
    }

    #[test]
    fn months_are_calendar_months() {
        let span = |count, unit| Span { count, unit };
        assert_eq!(
            span(1, Unit::Month).before(at("2017-03-31T10:00:00")),
            Some(at("2017-02-28T10:00:00"))
        );
        assert_eq!(
            span(1, Unit::Year).before(at("2016-02-29T00:00:00")),
            Some(at("2015-02-28T00:00:00"))
        );
        assert_eq!(
            span(2, Unit::Week).before(at("2017-01-10T06:00:00")),
            Some(at("2016-12-27T06:00:00"))
        );
        assert_eq!(
            span(1, Unit::Day).before(at("2017-01-01T00:00:00")),
            Some(at("2016-12-31T00:00:00"))
        );
    }

    #[test]
    fn points_read_as_written() {
        assert_eq!(
            format_point(at("2017-12-01T05:52:35"), ColumnType::Timestamp),
            "2017-12-01T05:52:35Z"
        );
        assert_eq!(
            format_point(at("2017-12-01T00:00:00"), ColumnType::Date),
            "2017-12-01"
        );
        assert_eq!(
            format_point(at("2017-12-01T00:00:00.25"), ColumnType::Timestamp),
            "2017-12-01T00:00:00.250000Z"
        );
    }
}
