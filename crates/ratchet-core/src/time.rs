use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::limits::{MAX_TIME_MS, MIN_TIME_MS};

/// A point in time, in milliseconds since the Unix epoch.
///
/// Ratchet stores every time as an integer so both backends compare them the same way and
/// replay reproduces them exactly.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl Timestamp {
    /// The current wall-clock time. Orchestration code must use `ctx.now()` instead.
    pub fn now() -> Self {
        Self::from(SystemTime::now())
    }

    /// Milliseconds since the Unix epoch.
    pub fn as_millis(self) -> i64 {
        self.0
    }

    /// This time plus `d`, saturating at the end of the calendar (9999-12-31T23:59:59.999Z,
    /// [`crate::limits::MAX_TIME_MS`]): a delay, backoff or timer however long never lands on
    /// a time that cannot be written down.
    pub fn plus(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(ms).min(MAX_TIME_MS.max(self.0)))
    }

    /// This time moved into the calendar Ratchet stores and formats (years 1 to 9999): the
    /// nearest end of it for a time outside.
    pub fn clamped(self) -> Self {
        Self(self.0.clamp(MIN_TIME_MS, MAX_TIME_MS))
    }

    /// As RFC 3339 in UTC to the millisecond (`2026-11-24T00:51:02.123Z`). Total: a time
    /// outside the calendar (a row written by an older version, or straight into the
    /// database) is shown as the nearest end of it, never a panic.
    pub fn to_rfc3339(self) -> String {
        let ms = self.clamped().0;
        let (days, ms_of_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
        let (year, month, day) = civil_from_days(days);
        let (hour, minute) = (ms_of_day / 3_600_000, ms_of_day / 60_000 % 60);
        let (second, milli) = (ms_of_day / 1_000 % 60, ms_of_day % 1_000);
        format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`), for any day of the calendar Ratchet keeps.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

impl From<SystemTime> for Timestamp {
    fn from(t: SystemTime) -> Self {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Self(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
            Err(e) => Self(-i64::try_from(e.duration().as_millis()).unwrap_or(i64::MAX)),
        }
    }
}

impl From<Timestamp> for SystemTime {
    fn from(t: Timestamp) -> Self {
        if t.0 >= 0 {
            UNIX_EPOCH + Duration::from_millis(t.0.unsigned_abs())
        } else {
            UNIX_EPOCH - Duration::from_millis(t.0.unsigned_abs())
        }
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}ms", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_system_time() {
        let t = Timestamp(1_700_000_000_123);
        assert_eq!(Timestamp::from(SystemTime::from(t)), t);
        assert_eq!(
            t.plus(Duration::from_millis(7)).since(t),
            Duration::from_millis(7)
        );
        assert_eq!(t.since(t.plus(Duration::from_secs(1))), Duration::ZERO);
    }

    #[test]
    fn no_sum_lands_past_the_calendar() {
        let t = Timestamp(1_700_000_000_000);
        assert_eq!(t.plus(Duration::MAX), Timestamp(MAX_TIME_MS));
        assert_eq!(
            t.plus(Duration::from_millis(u64::MAX)),
            Timestamp(MAX_TIME_MS)
        );
        assert_eq!(
            Timestamp(MAX_TIME_MS - 5).plus(Duration::from_secs(3_600)),
            Timestamp(MAX_TIME_MS)
        );
        // A time already past it (an old row) does not move back.
        assert_eq!(
            Timestamp(i64::MAX).plus(Duration::from_secs(1)),
            Timestamp(i64::MAX)
        );
    }

    #[test]
    fn every_i64_formats_as_rfc3339_within_the_calendar() {
        for (ms, text) in [
            (0, "1970-01-01T00:00:00.000Z"),
            (1_795_000_000_123, "2026-11-18T11:06:40.123Z"),
            (951_782_400_000, "2000-02-29T00:00:00.000Z"),
            (-1, "1969-12-31T23:59:59.999Z"),
            (MAX_TIME_MS, "9999-12-31T23:59:59.999Z"),
            (MIN_TIME_MS, "0001-01-01T00:00:00.000Z"),
            (260_000_000_000_000, "9999-12-31T23:59:59.999Z"),
            (i64::MAX, "9999-12-31T23:59:59.999Z"),
            (i64::MIN, "0001-01-01T00:00:00.000Z"),
        ] {
            assert_eq!(Timestamp(ms).to_rfc3339(), text, "{ms}");
        }
        // Every day of the calendar: dates in range, each the day after the one before.
        let (first, last) = (
            MIN_TIME_MS.div_euclid(86_400_000),
            MAX_TIME_MS.div_euclid(86_400_000),
        );
        let mut before = civil_from_days(first);
        assert_eq!(before, (1, 1, 1));
        for day in first + 1..=last {
            let (y, m, d) = civil_from_days(day);
            let (by, bm, bd) = before;
            let leap = by % 4 == 0 && (by % 100 != 0 || by % 400 == 0);
            let length = match bm {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            let expected = match (bd == length, bm == 12) {
                (false, _) => (by, bm, bd + 1),
                (true, false) => (by, bm + 1, 1),
                (true, true) => (by + 1, 1, 1),
            };
            assert!(
                (y, m, d) == expected,
                "day {day}: {before:?} then {:?}",
                (y, m, d)
            );
            before = (y, m, d);
        }
        assert_eq!(before, (9999, 12, 31));
    }
}
