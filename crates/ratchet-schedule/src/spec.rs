//! Specs and their ticks.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, TimeZone};
use chrono_tz::Tz;
use ratchet_core::limits::{MAX_DURATION, MAX_TIME_MS};
use ratchet_core::Timestamp;
use sha2::{Digest, Sha256};

/// Why a schedule was refused; `field` names the part at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    /// `spec`, `time_zone`, `start_at`, `end_at`, `end`, `overlap` or `catch_up`.
    pub field: &'static str,
    /// What is wrong with it.
    pub message: String,
}

fn error(field: &'static str, message: impl Into<String>) -> SpecError {
    SpecError {
        field,
        message: message.into(),
    }
}

/// When a schedule ticks.
#[derive(Clone, Debug)]
pub enum Spec {
    /// A cron expression, five fields or six (seconds first), read in the schedule's zone.
    Cron {
        /// The expression as written.
        expression: String,
        /// It, parsed.
        cron: Box<croner::Cron>,
    },
    /// Every `every`, at the Unix epoch plus `offset` plus a whole number of `every`: the same
    /// instants in every zone, unaffected by DST.
    Every {
        /// The interval (at least a second).
        every: Duration,
        /// Where in the interval it ticks (less than `every`).
        offset: Duration,
    },
    /// `after` this long from the end of the run before (the workflow DSL's `after`): ticks
    /// follow runs, not the calendar, so there is never more than one run.
    After {
        /// The pause between the end of a run and the start of the next (at least a second).
        delay: Duration,
    },
}

impl Spec {
    /// Whether ticks follow the end of each run (`after`) rather than the calendar.
    pub fn follows_runs(&self) -> bool {
        matches!(self, Self::After { .. })
    }
}

impl PartialEq for Spec {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// `5s`, `90m`, `1h30m`, `2d`: whole numbers with units s, m, h, d.
pub fn parse_duration(text: &str) -> Option<Duration> {
    duration(text.trim())
}

fn duration(text: &str) -> Option<Duration> {
    let mut total = 0u64;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u64 = number.parse().ok()?;
        number.clear();
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return None,
        };
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    number.is_empty().then_some(Duration::from_secs(total))
}

impl FromStr for Spec {
    type Err = SpecError;

    /// `every 30s`, `every 1h offset 15m`, `after 5m`, or a cron expression
    /// (`0 9 * * MON-FRI`, `*/10 * * * * *` with seconds).
    fn from_str(text: &str) -> Result<Self, SpecError> {
        let text = text.trim();
        if let Some(rest) = text.strip_prefix("after ") {
            let delay = duration(rest.trim())
                .filter(|d| (Duration::from_secs(1)..=MAX_DURATION).contains(d))
                .ok_or_else(|| {
                    error(
                        "spec",
                        format!(
                            "{rest:?} is not a delay of at least 1s and at most 100 years \
                             (write 30s, 5m, 1h30m, 1d)"
                        ),
                    )
                })?;
            return Ok(Self::After { delay });
        }
        if let Some(rest) = text.strip_prefix("every ") {
            let (every, offset) = match rest.split_once(" offset ") {
                Some((every, offset)) => (every.trim(), Some(offset.trim())),
                None => (rest.trim(), None),
            };
            let every = duration(every)
                .filter(|d| (Duration::from_secs(1)..=MAX_DURATION).contains(d))
                .ok_or_else(|| {
                    error(
                        "spec",
                        format!(
                            "{every:?} is not an interval of at least 1s and at most 100 years \
                             (write 30s, 5m, 1h30m, 1d)"
                        ),
                    )
                })?;
            let offset = match offset {
                None => Duration::ZERO,
                Some(o) => duration(o).filter(|d| *d < every).ok_or_else(|| {
                    error(
                        "spec",
                        format!("offset {o:?} is not a duration shorter than the interval"),
                    )
                })?,
            };
            return Ok(Self::Every { every, offset });
        }
        let cron = croner::Cron::new(text)
            .with_seconds_optional()
            .parse()
            .map_err(|e| error("spec", format!("{text:?} is not a cron expression: {e}")))?;
        Ok(Self::Cron {
            expression: text.to_string(),
            cron: Box::new(cron),
        })
    }
}

impl std::fmt::Display for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cron { expression, .. } => f.write_str(expression),
            Self::Every { every, offset } if offset.is_zero() => {
                write!(f, "every {}s", every.as_secs())
            }
            Self::Every { every, offset } => {
                write!(f, "every {}s offset {}s", every.as_secs(), offset.as_secs())
            }
            Self::After { delay } => write!(f, "after {}s", delay.as_secs()),
        }
    }
}

/// The IANA time zone `name` (`Europe/Paris`, `UTC`).
///
/// # Errors
///
/// A [`SpecError`] on `time_zone` for a name the database does not know.
pub fn parse_zone(name: &str) -> Result<Tz, SpecError> {
    name.parse::<Tz>().map_err(|_| {
        error(
            "time_zone",
            format!("{name:?} is not an IANA time zone (such as Europe/Paris or UTC)"),
        )
    })
}

/// A spec in a zone, between an optional start and end.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// When it ticks.
    pub spec: Spec,
    /// The zone its cron expression is read in.
    pub zone: Tz,
    /// No tick before this.
    pub start: Option<Timestamp>,
    /// No tick after this.
    pub end: Option<Timestamp>,
}

/// How far ahead a cron expression is searched for its next tick: an expression with none in
/// this long (`0 0 30 2 *`) is refused when made.
const HORIZON_MS: i64 = 5 * 366 * 86_400_000;

impl Schedule {
    /// A schedule; refused when its start or end lies outside the calendar (years 1 to 9999),
    /// its end is before its start, or it would never tick: a start so late that no tick
    /// comes before the calendar ends is refused on `start_at`.
    ///
    /// # Errors
    ///
    /// A [`SpecError`] naming the field.
    pub fn new(
        spec: Spec,
        zone: Tz,
        start: Option<Timestamp>,
        end: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Self, SpecError> {
        for (field, t) in [("start_at", start), ("end_at", end)] {
            if let Some(t) = t {
                ratchet_core::limits::check_time(field, t).map_err(|e| SpecError {
                    field,
                    message: e.rule,
                })?;
            }
        }
        if let (Some(s), Some(e)) = (start, end) {
            if e < s {
                return Err(error("end", "the end is before the start"));
            }
        }
        let schedule = Self {
            spec,
            zone,
            start,
            end,
        };
        let from = start.map_or(now, |s| s.max(now));
        if !schedule.spec.follows_runs()
            && schedule.next_after(Timestamp(from.0 - 1)).is_none()
            && end.is_none()
        {
            let unbounded = Self {
                start: None,
                ..schedule.clone()
            };
            if start.is_some() && unbounded.next_after(now).is_some() {
                return Err(error(
                    "start_at",
                    "no tick comes between the start and the end of the calendar \
                     (9999-12-31T23:59:59.999Z)",
                ));
            }
            return Err(error("spec", format!("{} never fires", schedule.spec)));
        }
        Ok(schedule)
    }

    /// The first tick strictly after `after`, within the start and end; `None` when there is
    /// none (past the end, or past the end of the calendar: a tick must be a time that can be
    /// written down). For an `after` spec, `after` is when the run before ended.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let after = match self.start {
            Some(start) if start.0 > after.0 => Timestamp(start.0 - 1),
            _ => after,
        };
        let next = match &self.spec {
            Spec::Every { every, offset } => {
                let every = i64::try_from(every.as_millis()).ok()?;
                let offset = i64::try_from(offset.as_millis()).ok()?;
                let k = (after.0 - offset).div_euclid(every) + 1;
                Timestamp(k.checked_mul(every)?.checked_add(offset)?)
            }
            Spec::Cron { cron, .. } => {
                let from: DateTime<Tz> = self.zone.timestamp_millis_opt(after.0).single()?;
                let next = cron.find_next_occurrence(&from, false).ok()?;
                let next = Timestamp(next.timestamp_millis());
                if next.0 - after.0 > HORIZON_MS {
                    return None;
                }
                next
            }
            Spec::After { delay } => Timestamp(
                after
                    .0
                    .checked_add(i64::try_from(delay.as_millis()).ok()?)?,
            ),
        };
        if next.0 > MAX_TIME_MS || next <= after {
            return None;
        }
        match self.end {
            Some(end) if next > end => None,
            _ => Some(next),
        }
    }

    /// Up to `n` ticks after `after`, in order.
    pub fn upcoming(&self, after: Timestamp, n: usize) -> Vec<Timestamp> {
        let mut ticks = Vec::with_capacity(n);
        let mut at = after;
        while ticks.len() < n {
            let Some(next) = self.next_after(at) else {
                break;
            };
            ticks.push(next);
            at = next;
        }
        ticks
    }

    /// The ticks after `after` up to `to` inclusive, at most `limit` of them (the earliest).
    pub fn between(&self, after: Timestamp, to: Timestamp, limit: usize) -> Vec<Timestamp> {
        let mut ticks = Vec::new();
        let mut at = after;
        while ticks.len() < limit {
            match self.next_after(at) {
                Some(next) if next <= to => {
                    ticks.push(next);
                    at = next;
                }
                _ => break,
            }
        }
        ticks
    }
}

/// The delay, less than `jitter`, that the schedule `name` adds to its tick at `nominal`:
/// drawn from both, so every process agrees on it and each tick gets its own.
pub fn jitter(name: &str, nominal: Timestamp, jitter: Duration) -> Duration {
    let most = jitter.as_millis();
    if most == 0 {
        return Duration::ZERO;
    }
    let digest = Sha256::digest(format!("{name}\u{0}{}", nominal.0).as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    let draw = u128::from(u64::from_le_bytes(bytes)) % most;
    Duration::from_millis(u64::try_from(draw).unwrap_or(0))
}

/// `t` as RFC 3339 in UTC, with milliseconds only when there are some
/// (`2026-11-24T02:30:00Z`). Total: a time outside the calendar (years 1 to 9999) shows as
/// its nearest end.
pub fn rfc3339(t: Timestamp) -> String {
    match chrono::DateTime::<chrono::Utc>::from_timestamp_millis(t.clamped().0) {
        Some(d) => d.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
        None => t.clamped().to_rfc3339(),
    }
}

/// The id of the instance a schedule's tick starts: `<name>@<tick in RFC 3339>`, the same in
/// every process, so a tick can never start two.
pub fn tick_id(name: &str, nominal: Timestamp) -> String {
    format!("{name}@{}", rfc3339(nominal))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(zone: Tz, y: i32, mo: u32, d: u32, h: u32, mi: u32) -> Timestamp {
        Timestamp(
            zone.with_ymd_and_hms(y, mo, d, h, mi, 0)
                .earliest()
                .expect("a time")
                .timestamp_millis(),
        )
    }

    fn local(zone: Tz, t: Timestamp) -> String {
        zone.timestamp_millis_opt(t.0)
            .single()
            .expect("a time")
            .format("%Y-%m-%d %H:%M:%S %Z")
            .to_string()
    }

    fn daily(expr: &str, zone: &str) -> Schedule {
        let zone = parse_zone(zone).expect("zone");
        Schedule::new(expr.parse().expect("spec"), zone, None, None, Timestamp(0))
            .expect("schedule")
    }

    #[test]
    fn a_daily_time_in_the_skipped_hour_fires_once_on_a_spring_forward_day() {
        for (zone, y, mo, d) in [
            ("America/New_York", 2026, 3, 7),
            ("Europe/Paris", 2026, 3, 28),
        ] {
            let s = daily("30 2 * * *", zone);
            let ticks = s.upcoming(at(s.zone, y, mo, d, 12, 0), 3);
            let shown: Vec<String> = ticks.iter().map(|t| local(s.zone, *t)).collect();
            // The day of the change has no 02:30: it fires once, at the change.
            assert_eq!(shown.len(), 3);
            assert!(shown[0].contains(" 03:00:00 "), "{zone}: {shown:?}");
            assert!(
                shown[1].contains(" 02:30:00 ") && shown[2].contains(" 02:30:00 "),
                "{shown:?}"
            );
            assert!(ticks.windows(2).all(|w| w[1].0 - w[0].0 >= 23 * 3_600_000));
        }
    }

    #[test]
    fn a_daily_time_in_the_repeated_hour_fires_once_on_a_fall_back_day() {
        for (zone, y, mo, d) in [
            ("America/New_York", 2026, 10, 31),
            ("Europe/Paris", 2026, 10, 24),
        ] {
            let s = daily(
                if zone == "Europe/Paris" {
                    "30 2 * * *"
                } else {
                    "30 1 * * *"
                },
                zone,
            );
            let from = at(s.zone, y, mo, d, 12, 0);
            let day = s.between(from, Timestamp(from.0 + 2 * 86_400_000), 10);
            assert_eq!(
                day.len(),
                2,
                "{zone}: {:?}",
                day.iter().map(|t| local(s.zone, *t)).collect::<Vec<_>>()
            );
            // A day of 25 hours between them: not twice in the repeated hour.
            assert_eq!(day[1].0 - day[0].0, 25 * 3_600_000, "{zone}");
        }
    }

    #[test]
    fn intervals_tick_on_the_epoch_plus_their_offset_in_every_zone() {
        let s: Spec = "every 1h offset 15m".parse().expect("spec");
        let utc = Schedule::new(s.clone(), Tz::UTC, None, None, Timestamp(0)).expect("ok");
        let ny = Schedule::new(
            s,
            parse_zone("America/New_York").expect("zone"),
            None,
            None,
            Timestamp(0),
        )
        .expect("ok");
        let from = Timestamp(1_800_000_000_000);
        assert_eq!(utc.upcoming(from, 5), ny.upcoming(from, 5));
        assert!(utc
            .upcoming(from, 5)
            .iter()
            .all(|t| t.0 % 3_600_000 == 900_000));
        assert_eq!(
            utc.next_after(Timestamp(900_000)),
            Some(Timestamp(4_500_000)),
            "strictly after"
        );
    }

    #[test]
    fn seconds_start_and_end_bound_the_ticks() {
        let s = Schedule::new(
            "*/10 * * * * *".parse().expect("spec"),
            Tz::UTC,
            Some(Timestamp(1_000_000)),
            Some(Timestamp(1_060_000)),
            Timestamp(0),
        )
        .expect("schedule");
        let ticks = s.upcoming(Timestamp(0), 100);
        assert_eq!(ticks.first(), Some(&Timestamp(1_000_000)));
        assert_eq!(ticks.last(), Some(&Timestamp(1_060_000)));
        assert_eq!(ticks.len(), 7);
        assert_eq!(
            s.between(Timestamp(1_000_000), Timestamp(1_030_000), 10)
                .len(),
            3
        );
        assert_eq!(
            s.between(Timestamp(0), Timestamp(2_000_000), 2).len(),
            2,
            "limited"
        );
    }

    #[test]
    fn bad_specs_zones_and_ranges_name_their_field() {
        for (spec, zone, start, end, field) in [
            ("61 * * * *", "UTC", None, None, "spec"),
            ("* * *", "UTC", None, None, "spec"),
            ("0 0 30 2 *", "UTC", None, None, "spec"),
            ("every 0s", "UTC", None, None, "spec"),
            ("every 10q", "UTC", None, None, "spec"),
            ("every 1h offset 1h", "UTC", None, None, "spec"),
            ("0 * * * *", "Mars/Olympus", None, None, "time_zone"),
            ("0 * * * *", "UTC", Some(10), Some(5), "end"),
            ("every 36526d", "UTC", None, None, "spec"),
            ("every 1h offset 36600d", "UTC", None, None, "spec"),
            ("after 99999999999d", "UTC", None, None, "spec"),
            // Starting 9999-12-31T23:30Z every hour: the first tick would be in year 10000.
            (
                "every 1h",
                "UTC",
                Some(253_402_299_000_000),
                None,
                "start_at",
            ),
            (
                "0 * * * *",
                "UTC",
                Some(253_402_299_000_000),
                None,
                "start_at",
            ),
            (
                "every 1h",
                "UTC",
                Some(260_000_000_000_000),
                None,
                "start_at",
            ),
            ("every 1h", "UTC", None, Some(i64::MAX), "end_at"),
        ] {
            let made = spec
                .parse::<Spec>()
                .and_then(|s| Ok((s, parse_zone(zone)?)))
                .and_then(|(s, z)| {
                    Schedule::new(s, z, start.map(Timestamp), end.map(Timestamp), Timestamp(0))
                });
            let e = made.expect_err(spec);
            assert_eq!(e.field, field, "{spec} {zone}: {e}");
        }
    }

    #[test]
    fn jitter_is_the_same_everywhere_and_within_its_bound() {
        let bound = Duration::from_secs(30);
        let a = jitter("nightly", Timestamp(1_000), bound);
        assert_eq!(a, jitter("nightly", Timestamp(1_000), bound));
        assert!(a < bound);
        let spread: std::collections::BTreeSet<_> = (0..50)
            .map(|i| jitter("nightly", Timestamp(i * 60_000), bound))
            .collect();
        assert!(spread.len() > 40, "each tick its own draw");
        assert_eq!(jitter("x", Timestamp(1), Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn no_tick_comes_after_the_end_of_the_calendar() {
        let last_hour = Timestamp(253_402_297_200_000); // 9999-12-31T23:00:00Z
        for text in ["every 1h", "0 * * * *", "after 1h"] {
            let s = Schedule::new(
                text.parse().expect("spec"),
                Tz::UTC,
                None,
                None,
                Timestamp(0),
            )
            .expect("schedule");
            if !s.spec.follows_runs() {
                let next = s.next_after(Timestamp(last_hour.0 - 1));
                assert_eq!(next, Some(last_hour), "{text}");
            }
            assert_eq!(s.next_after(last_hour), None, "{text}: no next tick");
            assert_eq!(s.upcoming(last_hour, 3), vec![], "{text}");
            assert_eq!(s.next_after(Timestamp(i64::MAX - 1)), None, "{text}");
        }
    }

    #[test]
    fn ticks_print_within_the_calendar() {
        assert_eq!(
            rfc3339(Timestamp(1_800_000_000_000)),
            "2027-01-15T08:00:00Z"
        );
        assert_eq!(
            rfc3339(Timestamp(1_800_000_000_250)),
            "2027-01-15T08:00:00.250Z"
        );
        assert_eq!(rfc3339(Timestamp(i64::MAX)), "9999-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(Timestamp(i64::MIN)), "0001-01-01T00:00:00Z");
    }

    #[test]
    fn specs_print_as_they_parse() {
        for text in ["every 30s", "every 3600s offset 900s", "0 9 * * MON-FRI"] {
            let spec: Spec = text.parse().expect("spec");
            assert_eq!(spec.to_string(), text);
            assert_eq!(spec.to_string().parse::<Spec>().expect("again"), spec);
        }
    }
}
