//! What the commands read and print: JSON given inline, from a file (`@path`) or from standard
//! input (`-`), and times as RFC 3339.

use std::io::Read as _;

use anyhow::Context;
use ratchet::Timestamp;

/// The text of an option: the text itself, `@path` for a file's contents, or `-` for
/// standard input (for inputs too large for a command line).
pub(crate) fn text(text: &str, flag: &str) -> anyhow::Result<String> {
    if text == "-" {
        let mut all = String::new();
        std::io::stdin()
            .read_to_string(&mut all)
            .with_context(|| format!("{flag} -: reading standard input"))?;
        Ok(all)
    } else if let Some(path) = text.strip_prefix('@') {
        std::fs::read_to_string(path).with_context(|| format!("{flag} @{path}"))
    } else {
        Ok(text.to_string())
    }
}

/// The JSON of an option, given as [`text`] takes it.
pub(crate) fn json(given: &str, flag: &str) -> anyhow::Result<serde_json::Value> {
    serde_json::from_str(&text(given, flag)?).with_context(|| format!("{flag} must be JSON"))
}

/// A time as RFC 3339 in UTC, to the millisecond (`2026-11-24T00:51:02.123Z`).
/// Total: a stored time outside the calendar (years 1 to 9999) shows as its nearest end.
pub(crate) fn rfc3339(t: Timestamp) -> String {
    t.to_rfc3339()
}

/// A time written as RFC 3339 (`2026-11-24T02:30:00Z`, fractions allowed).
pub(crate) fn parse_rfc3339(text: &str) -> Result<Timestamp, String> {
    humantime::parse_rfc3339_weak(text)
        .map(Timestamp::from)
        .map_err(|e| format!("{text:?} is not an RFC 3339 time (2026-11-24T02:30:00Z): {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_comes_inline_or_from_a_file() {
        assert_eq!(json("{\"a\":1}", "--input").unwrap()["a"], 1);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("in.json");
        std::fs::write(&path, "[1,2,3]").unwrap();
        let read = json(&format!("@{}", path.display()), "--input").unwrap();
        assert_eq!(read, serde_json::json!([1, 2, 3]));
        let missing = json("@/nonexistent/in.json", "--input").unwrap_err();
        assert!(format!("{missing:#}").contains("/nonexistent/in.json"));
        assert!(json("{", "--input").is_err());
    }

    #[test]
    fn times_are_rfc3339() {
        assert_eq!(rfc3339(Timestamp(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(Timestamp(1_795_000_000_123)),
            "2026-11-18T11:06:40.123Z"
        );
        // A row written past the calendar (by an older version) still prints.
        assert_eq!(rfc3339(Timestamp(i64::MAX)), "9999-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(Timestamp(-1)), "1969-12-31T23:59:59.999Z");
    }
}
