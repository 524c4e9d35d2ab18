use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

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

    /// This time plus `d`, saturating.
    pub fn plus(self, d: Duration) -> Self {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Self(self.0.saturating_add(ms))
    }

    /// The time from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0))
    }
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
}
