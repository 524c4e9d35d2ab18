//! Payloads in and out: JSON text both ways (the Python side encodes and decodes it, with
//! orjson when installed), and the checks of the seconds and times a caller gives.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::PyErr;
use ratchet::Timestamp;
use ratchet_core::limits::{
    check_duration, check_json_depth, check_time, MAX_DURATION, MAX_TIME_MS, MIN_TIME_MS,
};
use serde_json::Value;

use crate::error::invalid;

/// `text` as JSON, nested no deeper than Ratchet stores (`MAX_JSON_DEPTH`); `what` names it
/// in the error.
pub(crate) fn parse(text: &str, what: &str) -> Result<Value, PyErr> {
    let value =
        serde_json::from_str(text).map_err(|e| invalid(format!("{what} is not JSON: {e}")))?;
    check_json_depth(what, &value).map_err(|e| invalid(e.to_string()))?;
    Ok(value)
}

/// `value` as JSON text.
pub(crate) fn text(value: &impl serde::Serialize) -> String {
    // Ratchet's own records always serialize.
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// `value` seconds as a duration a caller may give: 0 or more, at most `MAX_DURATION` (100
/// years); `field` names it in the error. Never panics, whatever the float (NaN, infinite,
/// negative, 1e300).
pub(crate) fn seconds(value: f64, field: &str) -> Result<Duration, PyErr> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| check_duration(field, *d).is_ok())
        .ok_or_else(|| {
            invalid(format!(
                "{field}: expected seconds from 0 to {} (100 years), got {value}",
                MAX_DURATION.as_secs()
            ))
        })
}

/// `value`, a Unix time in seconds, as a time in the calendar Ratchet stores and formats
/// (years 1 to 9999); `field` names it in the error.
pub(crate) fn unix_time(value: f64, field: &str) -> Result<Timestamp, PyErr> {
    let refused = || {
        invalid(format!(
            "{field}: expected a Unix time in seconds from {} to {} (years 1 to 9999), got {value}",
            MIN_TIME_MS / 1000,
            MAX_TIME_MS / 1000
        ))
    };
    if !value.is_finite() {
        return Err(refused());
    }
    // The cast saturates far outside the calendar, where the check refuses it.
    let at = Timestamp((value * 1000.0) as i64);
    check_time(field, at).map_err(|_| refused())?;
    Ok(at)
}

/// Checks `value`, seconds a caller gave for `field`, as [`seconds`] does; answers it. For
/// the client, which converts options to the API's before it sends them.
///
/// # Errors
///
/// `InvalidInput` naming `field` for what is not a number, or out of range.
#[pyfunction]
pub(crate) fn check_seconds(field: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    let secs: f64 = value
        .extract()
        .map_err(|_| invalid(format!("{field}: expected seconds, got {value}")))?;
    seconds(secs, field)?;
    Ok(secs)
}

/// Checks `value`, a Unix time in seconds a caller gave for `field`, as [`unix_time`] does;
/// answers it. For the client.
///
/// # Errors
///
/// `InvalidInput` naming `field` for what is not a number, or out of range.
#[pyfunction]
pub(crate) fn check_unix_time(field: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    let secs: f64 = value.extract().map_err(|_| {
        invalid(format!(
            "{field}: expected a Unix time in seconds, got {value}"
        ))
    })?;
    unix_time(secs, field)?;
    Ok(secs)
}
