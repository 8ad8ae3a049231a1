//! Calendar dates as days since 1970-01-01, enough for a snapshot: no time zones, no parsing.

use std::fmt;

/// A proleptic Gregorian date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(i32);

impl Date {
    /// The date `year-month-day`; the caller passes a real date.
    pub const fn ymd(year: i32, month: u32, day: u32) -> Date {
        // Howard Hinnant's days_from_civil.
        let y = if month <= 2 { year - 1 } else { year };
        let era = if y >= 0 { y } else { y - 399 } / 400;
        let yoe = y - era * 400;
        let m = month as i32;
        let mp = if m > 2 { m - 3 } else { m + 9 };
        let doy = (153 * mp + 2) / 5 + day as i32 - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        Date(era * 146_097 + doe - 719_468)
    }

    pub const fn add_days(self, days: i32) -> Date {
        Date(self.0 + days)
    }

    /// Days from `earlier` to `self` (negative when `earlier` is later).
    pub const fn days_since(self, earlier: Date) -> i32 {
        self.0 - earlier.0
    }

    /// (year, month, day).
    pub const fn civil(self) -> (i32, u32, u32) {
        // Howard Hinnant's civil_from_days.
        let z = self.0 + 719_468;
        let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
        (year, month, day)
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (year, month, day) = self.civil();
        write!(f, "{year:04}-{month:02}-{day:02}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_formats() {
        assert_eq!(Date::ymd(1970, 1, 1), Date(0));
        assert_eq!(Date::ymd(2026, 9, 30).to_string(), "2026-09-30");
        assert_eq!(Date::ymd(2024, 2, 28).add_days(1).to_string(), "2024-02-29");
        assert_eq!(
            Date::ymd(2025, 12, 31).add_days(1).to_string(),
            "2026-01-01"
        );
        assert_eq!(
            Date::ymd(2026, 9, 30).days_since(Date::ymd(2025, 3, 1)),
            578
        );
        let mut date = Date::ymd(1999, 1, 1);
        while date < Date::ymd(2031, 1, 1) {
            let (y, m, d) = date.civil();
            assert_eq!(Date::ymd(y, m, d), date);
            date = date.add_days(1);
        }
    }
}
