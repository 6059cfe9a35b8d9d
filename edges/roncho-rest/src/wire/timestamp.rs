//! Timestamps as Honcho writes and reads them.

use roncho_core::{Error, Result};

/// Formats microseconds since the epoch as Honcho's serializer does: ISO
/// 8601 in UTC with a `Z`, microseconds when there are any. Years 0–9999
/// (every timestamp roncho writes) are written digit by digit: a context
/// or a page formats one per message; other years (none written by roncho)
/// as `time` writes them, or empty past its range.
pub fn timestamp(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    if !(0..=9999).contains(&year) {
        return timestamp_of_any_year(seconds, fraction);
    }
    let of_day = seconds.rem_euclid(86_400);
    let mut text = *b"0000-00-00T00:00:00.000000Z";
    let mut put = |at: usize, width: usize, mut value: i64| {
        for place in (at..at + width).rev() {
            text[place] = b'0' + (value % 10) as u8;
            value /= 10;
        }
    };
    put(0, 4, year);
    put(5, 2, month);
    put(8, 2, day);
    put(11, 2, of_day / 3_600);
    put(14, 2, of_day / 60 % 60);
    put(17, 2, of_day % 60);
    let end = if fraction == 0 {
        text[19] = b'Z';
        20
    } else {
        put(20, 6, fraction);
        27
    };
    text[..end].iter().map(|&byte| char::from(byte)).collect()
}

/// The proleptic Gregorian (year, month, day) of a day counted from
/// 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let of_era = days.rem_euclid(146_097);
    let year_of_era = (of_era - of_era / 1_460 + of_era / 36_524 - of_era / 146_096) / 365;
    let of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * of_year + 2) / 153;
    let day = of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// [`timestamp`] for years outside 0–9999, through `time`.
fn timestamp_of_any_year(seconds: i64, fraction: i64) -> String {
    let Ok(moment) = time::OffsetDateTime::from_unix_timestamp(seconds) else {
        return String::new();
    };
    let (year, month, day) = (moment.year(), u8::from(moment.month()), moment.day());
    let (hour, minute, second) = (moment.hour(), moment.minute(), moment.second());
    let base = format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}");
    if fraction == 0 {
        format!("{base}Z")
    } else {
        format!("{base}.{fraction:06}Z")
    }
}

/// Parses a request's ISO 8601 timestamp into microseconds since the epoch.
pub fn parse_timestamp(field: &str, text: &str) -> Result<i64> {
    roncho_core::filter::parse_timestamp(text)
        .ok_or_else(|| Error::invalid(field, format!("`{text}` is not an ISO 8601 datetime")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_written_as_time_writes_them_in_every_year() {
        // Every boundary of a day, a month, a leap day and a century, in
        // years 0 to 9999 and either side of them, against `time`'s own.
        let mut days: Vec<i64> = (-720_000..=2_933_000).step_by(997).collect();
        for year in [-1, 0, 1, 1600, 1700, 1900, 1969, 1970, 2000, 2024, 2100, 9999, 10_000] {
            let start = time::Date::from_calendar_date(year, time::Month::January, 1).map(|date| {
                (date - time::Date::from_calendar_date(1970, time::Month::January, 1).unwrap()).whole_days()
            });
            if let Ok(start) = start {
                days.extend((start - 2..start + 370).chain([start + 58, start + 59, start + 60]));
            }
        }
        for day in days {
            for micros_of_day in [0, 1, 999_999, 1_000_000, 43_199_000_001, 86_399_999_999] {
                let micros = day * 86_400_000_000 + micros_of_day;
                let seconds = micros.div_euclid(1_000_000);
                let fraction = micros.rem_euclid(1_000_000);
                assert_eq!(timestamp(micros), timestamp_of_any_year(seconds, fraction), "{micros}");
            }
        }
        assert_eq!(timestamp(i64::MIN), "");
        assert_eq!(timestamp(i64::MAX), "");
    }

    #[test]
    fn timestamps_are_iso_utc_with_microseconds_when_there_are_any() {
        assert_eq!(timestamp(1_764_083_091_000_000), "2025-11-25T15:04:51Z");
        assert_eq!(timestamp(1_764_083_091_000_042), "2025-11-25T15:04:51.000042Z");
        assert_eq!(
            parse_timestamp("created_at", &timestamp(1_764_083_091_123_456)).unwrap(),
            1_764_083_091_123_456
        );
    }
}
