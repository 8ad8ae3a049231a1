//! Dates and timestamps (microseconds, no zone) to and from their common text, without chrono's
//! general formatter and parser, giving exactly what arrow's `cast` gives.
//!
//! Reading a timestamp column of a CSV went through arrow's `string_to_datetime` and writing
//! its rows digest through chrono's `Display`: on a table of short rows with a timestamp
//! column the two were a fifth of a shardify run. Each function here handles the one shape
//! nearly every table writes (`YYYY-MM-DD HH:MM:SS` or with a `T`; years 0 to 9999) and
//! answers `None` for anything else, which the caller leaves to arrow, so no value can come out
//! different (the tests compare both ways against `cast` on every case they can think of).

use arrow::array::{Array, ArrayRef, AsArray, StringArray, StringBuilder};
use arrow::compute::cast;
use arrow::datatypes::{DataType, TimestampMicrosecondType};

const MICROS_PER_SECOND: i64 = 1_000_000;
const MICROS_PER_DAY: i64 = 86_400 * MICROS_PER_SECOND;

/// Days from 1970-01-01 of a valid `YYYY-MM-DD` (proleptic Gregorian, as chrono); `None` for
/// any other text, which is left to arrow's parser. Tables, not branches, for the month: with
/// dates in random order a `match` on the month mispredicted (perf: 2.9% of a churn run with
/// the `match`, 1.8% with the tables; no change alternating runs could see).
pub(crate) fn plain_date(text: &[u8]) -> Option<i32> {
    /// Days in each month of a common year, and before each month.
    const MONTH_DAYS: [i32; 13] = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    const BEFORE_MONTH: [i32; 13] = [0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    /// Days from 0001-01-01 to 1970-01-01.
    const BEFORE_1970: i32 = 719_162;
    let bytes: &[u8; 10] = text.try_into().ok()?;
    let digit = |i: usize| i32::from(bytes[i].wrapping_sub(b'0'));
    let digits = [0, 1, 2, 3, 5, 6, 8, 9].map(digit);
    if bytes[4] != b'-' || bytes[7] != b'-' || digits.iter().any(|&d| d > 9) {
        return None;
    }
    let year = ((digits[0] * 10 + digits[1]) * 10 + digits[2]) * 10 + digits[3];
    let month = (digits[4] * 10 + digits[5]) as usize;
    let day = digits[6] * 10 + digits[7];
    if !(1..=12).contains(&month) {
        return None;
    }
    let leap = i32::from(year % 4 == 0 && (year % 100 != 0 || year % 400 == 0));
    let february = i32::from(month == 2);
    if day < 1 || day > MONTH_DAYS[month] + leap * february {
        return None;
    }
    // Days before the year from 0001-01-01 (negative for year 0), then before the month.
    let past = year - 1;
    let before_year = past * 365 + past.div_euclid(4) - past.div_euclid(100) + past.div_euclid(400);
    let leap_day = leap * i32::from(month > 2);
    Some(before_year + BEFORE_MONTH[month] + leap_day + day - 1 - BEFORE_1970)
}

/// Microseconds since 1970-01-01 of `YYYY-MM-DD HH:MM:SS` (or `YYYY-MM-DDTHH:MM:SS`), as
/// `cast` to `Timestamp(Microsecond, None)` reads it; `None` for any other text, a leap second
/// included (`cast` rolls `23:59:60` into the next day).
pub fn parse_plain(text: &[u8]) -> Option<i64> {
    let bytes: &[u8; 19] = text.try_into().ok()?;
    if !(bytes[10] == b' ' || bytes[10] == b'T') || bytes[13] != b':' || bytes[16] != b':' {
        return None;
    }
    let days = plain_date(&bytes[..10])?;
    let two = |at: usize| -> Option<i64> {
        let (high, low) = (
            bytes[at].wrapping_sub(b'0'),
            bytes[at + 1].wrapping_sub(b'0'),
        );
        (high <= 9 && low <= 9).then_some(i64::from(high * 10 + low))
    };
    let (hour, minute, second) = (two(11)?, two(14)?, two(17)?);
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    Some(
        i64::from(days) * MICROS_PER_DAY + ((hour * 60 + minute) * 60 + second) * MICROS_PER_SECOND,
    )
}

/// The text `cast` to `Utf8` gives `micros`: `YYYY-MM-DDTHH:MM:SS`, then `.mmm` when the
/// fraction is whole milliseconds and `.uuuuuu` otherwise; `None` outside years 0 to 9999
/// (written with a sign by `cast`).
pub fn format(micros: i64, out: &mut [u8; 26]) -> Option<usize> {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let in_day = micros.rem_euclid(MICROS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return None;
    }
    let seconds = in_day / MICROS_PER_SECOND;
    let fraction = in_day % MICROS_PER_SECOND;
    let mut put = |at: usize, value: i64, digits: usize| put_digits(out, at, value, digits);
    put(0, year, 4);
    put(5, month, 2);
    put(8, day, 2);
    put(11, seconds / 3600, 2);
    put(14, seconds / 60 % 60, 2);
    put(17, seconds % 60, 2);
    let length = if fraction == 0 {
        19
    } else if fraction % 1000 == 0 {
        put(20, fraction / 1000, 3);
        23
    } else {
        put(20, fraction, 6);
        26
    };
    for (at, byte) in [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')] {
        out[at] = byte;
    }
    if length > 19 {
        out[19] = b'.';
    }
    Some(length)
}

/// `value` as `width` decimal digits, zero-padded, at `out[at..]`.
pub(crate) fn put_digits(out: &mut [u8], at: usize, mut value: i64, width: usize) {
    for i in (0..width).rev() {
        out[at + i] = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// A timestamp column's text as `cast` writes it, each value formatted here where it can be.
pub fn texts(array: &ArrayRef) -> Option<StringArray> {
    let stamps = array.as_primitive_opt::<TimestampMicrosecondType>()?;
    if stamps.data_type() != &DataType::Timestamp(arrow::datatypes::TimeUnit::Microsecond, None) {
        return None;
    }
    let mut builder = StringBuilder::with_capacity(stamps.len(), stamps.len() * 19);
    let mut out = [0u8; 26];
    for (row, value) in stamps.iter().enumerate() {
        let Some(micros) = value else {
            builder.append_null();
            continue;
        };
        match format(micros, &mut out) {
            // SAFETY: `format` writes ASCII digits and separators only.
            Some(length) => {
                builder.append_value(unsafe { std::str::from_utf8_unchecked(&out[..length]) })
            }
            None => {
                let one = stamps.slice(row, 1);
                let text = cast(&one, &DataType::Utf8).ok()?;
                builder.append_option(text.as_string::<i32>().iter().next().flatten());
            }
        }
    }
    Some(builder.finish())
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01 (H. Hinnant's
/// `civil_from_days`), as chrono counts them.
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{StringArray, TimestampMicrosecondArray};
    use arrow::compute::{CastOptions, cast_with_options};
    use arrow::datatypes::TimeUnit;

    use super::*;

    /// A spread of instants: every day boundary of years 0 to 9999 in steps, fractions of every
    /// kind, and the edges where `format` must hand over to `cast`.
    fn instants() -> Vec<i64> {
        let mut out = vec![
            0, 1, 10, 999, 1000, 100_000, 120_000, 123_456, 1_500_000, -1, -1000,
        ];
        let (first, last) = (
            -62_167_219_200 * MICROS_PER_SECOND,
            253_402_300_800 * MICROS_PER_SECOND,
        );
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = first + (state % (last - first) as u64) as i64;
            out.push(match state >> 60 {
                0..=5 => at - at.rem_euclid(MICROS_PER_SECOND),
                6..=9 => at - at.rem_euclid(1000),
                _ => at,
            });
        }
        out.extend([first, first - 1, last - 1, last, i64::MIN / 2, i64::MAX / 2]);
        out
    }

    #[test]
    fn formatted_text_is_what_cast_writes() {
        let values = instants();
        let array: ArrayRef = Arc::new(TimestampMicrosecondArray::from(
            values
                .iter()
                .map(|&v| Some(v))
                .chain([None])
                .collect::<Vec<_>>(),
        ));
        let expected = cast(&array, &DataType::Utf8).unwrap();
        let got = texts(&array).unwrap();
        assert_eq!(&got, expected.as_string::<i32>());
        let mut out = [0u8; 26];
        assert_eq!(format(last_day(), &mut out), Some(19));
        assert_eq!(format(253_402_300_800 * MICROS_PER_SECOND, &mut out), None);
    }

    fn last_day() -> i64 {
        253_402_214_400 * MICROS_PER_SECOND
    }

    /// Every instant's text, with a space or a `T`, reads back as `cast` reads it; texts of
    /// another shape, out-of-range fields and leap seconds are left to `cast`.
    #[test]
    fn plain_parses_are_what_cast_reads() {
        let options = CastOptions {
            safe: true,
            ..Default::default()
        };
        let mut out = [0u8; 26];
        let mut texts: Vec<String> = instants()
            .iter()
            .filter_map(|&v| {
                format(v - v.rem_euclid(MICROS_PER_SECOND), &mut out).map(|n| out[..n].to_vec())
            })
            .map(|bytes| String::from_utf8(bytes).unwrap())
            .flat_map(|text| [text.replace('T', " "), text])
            .collect();
        texts.extend(
            [
                "2025-01-01 24:00:00",
                "2025-01-01 23:60:00",
                "2025-01-01 23:59:60",
                "2025-02-29 00:00:00",
                "2024-02-29 12:00:00",
                "2025-1-01 00:00:00",
                "2025-01-01 00:00:0x",
                "2025-01-01x00:00:00",
                "2025-01-01 00:00:00Z",
                "0000-01-01 00:00:00",
                "9999-12-31T23:59:59",
                " 2025-01-01 00:00:0",
            ]
            .map(String::from),
        );
        let strings: ArrayRef = Arc::new(StringArray::from(texts.clone()));
        let read = cast_with_options(
            &strings,
            &DataType::Timestamp(TimeUnit::Microsecond, None),
            &options,
        )
        .unwrap();
        let read = read.as_primitive::<TimestampMicrosecondType>();
        let mut handed_over = 0;
        for (row, text) in texts.iter().enumerate() {
            match parse_plain(text.as_bytes()) {
                Some(micros) => assert_eq!(
                    Some(micros),
                    read.is_valid(row).then(|| read.value(row)),
                    "{text}"
                ),
                None => handed_over += 1,
            }
        }
        // Only the odd dozen is left to `cast`.
        assert_eq!(handed_over, 9, "texts left to cast");
    }
}
