//! Times as the API shows and reads them: RFC 3339 in UTC, to the millisecond.

use ratchet_core::Timestamp;

/// `2026-11-24T00:51:02.123Z`.
/// Total: a stored time outside the calendar (years 1 to 9999) shows as its nearest end.
pub fn rfc3339(t: Timestamp) -> String {
    t.to_rfc3339()
}

/// An RFC 3339 time (`2026-11-24T00:51:02Z`, fractions and offsets allowed; a time without
/// an offset is in UTC), in the calendar Ratchet keeps (years 1 to 9999).
pub fn parse_rfc3339(text: &str) -> Result<Timestamp, String> {
    let ms = match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(at) => at.timestamp_millis(),
        // Without an offset (`2026-11-24T00:51:02`), as this API has always read it.
        Err(e) => {
            let at = humantime::parse_rfc3339_weak(text)
                .map_err(|_| format!("{text:?} is not an RFC 3339 time ({e})"))?;
            Timestamp::from(at).as_millis()
        }
    };
    let t = Timestamp(ms);
    ratchet_core::limits::check_time("time", t).map_err(|e| format!("{text:?} {}", e.rule))?;
    Ok(t)
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
        // Offsets, lower case, the calendar's ends, and times before 1970.
        assert_eq!(parse_rfc3339("2026-11-18T12:06:40.123+01:00"), Ok(t));
        assert_eq!(parse_rfc3339("2026-11-18t11:06:40.123z"), Ok(t));
        assert_eq!(parse_rfc3339("2026-11-18T11:06:40.123"), Ok(t));
        assert_eq!(
            parse_rfc3339("0001-01-01T00:00:00Z"),
            Ok(Timestamp(ratchet_core::limits::MIN_TIME_MS))
        );
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), Ok(Timestamp(-1000)));
        assert!(parse_rfc3339("0000-12-31T23:59:59Z").is_err());
        assert!(parse_rfc3339("9999-12-31T23:59:59-01:00").is_err());
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
