//! Times as the API shows and reads them: RFC 3339 in UTC, to the millisecond.

use ratchet::Timestamp;

/// `2026-11-24T00:51:02.123Z`.
/// Total: a stored time outside the calendar (years 1 to 9999) shows as its nearest end.
pub(crate) fn rfc3339(t: Timestamp) -> String {
    t.to_rfc3339()
}

/// An RFC 3339 time (`2026-11-24T00:51:02Z`, fractions allowed).
pub(crate) fn parse_rfc3339(text: &str) -> Result<Timestamp, String> {
    let at = humantime::parse_rfc3339_weak(text)
        .map_err(|e| format!("{text:?} is not an RFC 3339 time ({e})"))?;
    let ms = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| format!("{text:?} is before 1970"))?
        .as_millis();
    i64::try_from(ms)
        .map(Timestamp)
        .map_err(|_| format!("{text:?} is too far in the future"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_through_rfc3339() {
        let t = Timestamp(1_795_000_000_123);
        assert_eq!(rfc3339(t), "2026-11-18T11:06:40.123Z");
        assert_eq!(parse_rfc3339(&rfc3339(t)), Ok(t));
        assert!(parse_rfc3339("yesterday").is_err());
    }

    #[test]
    fn any_stored_time_formats_without_a_panic() {
        for (ms, text) in [
            (260_000_000_000_000, "9999-12-31T23:59:59.999Z"),
            (i64::MAX, "9999-12-31T23:59:59.999Z"),
            (-86_400_000, "1969-12-31T00:00:00.000Z"),
            (i64::MIN, "0001-01-01T00:00:00.000Z"),
        ] {
            assert_eq!(rfc3339(Timestamp(ms)), text);
        }
    }
}
