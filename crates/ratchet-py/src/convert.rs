//! Payloads in and out: JSON text both ways (the Python side encodes and decodes it, with
//! orjson when installed), task options from their keyword arguments, records as JSON.

use std::time::Duration;

use pyo3::PyErr;
use ratchet::{RetryPolicy, TaskOptions, TaskRecord, Timestamp};
use serde_json::{json, Map, Value};

use crate::error::invalid;

/// `text` as JSON; `what` names it in the error.
pub(crate) fn parse(text: &str, what: &str) -> Result<Value, PyErr> {
    serde_json::from_str(text).map_err(|e| invalid(format!("{what} is not JSON: {e}")))
}

/// `value` as JSON text.
pub(crate) fn text(value: &impl serde::Serialize) -> String {
    // Ratchet's own records always serialize.
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// Task options from a JSON object of the keyword arguments `enqueue` takes. An unknown key
/// or a value of the wrong type is refused, naming it: nothing is enqueued.
pub(crate) fn task_options(options: &Value) -> Result<TaskOptions, PyErr> {
    let mut out = TaskOptions::default();
    let Some(fields) = options.as_object() else {
        return Err(invalid("task options must be a mapping"));
    };
    for (key, value) in fields {
        if value.is_null() {
            continue;
        }
        let bad = |expected: &str| {
            invalid(format!(
                "task option {key}: expected {expected}, got {value}"
            ))
        };
        match key.as_str() {
            "queue" => out.queue = value.as_str().ok_or_else(|| bad("a string"))?.to_string(),
            "priority" => {
                out.priority = value
                    .as_i64()
                    .and_then(|p| i16::try_from(p).ok())
                    .ok_or_else(|| bad("an integer from -32768 to 32767"))?;
            }
            "delay" => {
                out = out.delay(json_seconds(value).ok_or_else(|| bad("seconds, 0 or more"))?)
            }
            "run_at" => {
                let at = value.as_f64().filter(|t| t.is_finite() && *t >= 0.0);
                let at = at.ok_or_else(|| bad("a Unix time in seconds"))?;
                out = out.run_at(Timestamp((at * 1000.0) as i64));
            }
            "max_attempts" => {
                let n = value
                    .as_u64()
                    .and_then(|n| u32::try_from(n).ok())
                    .filter(|n| *n >= 1);
                out = out.max_attempts(n.ok_or_else(|| bad("an integer of at least 1"))?);
            }
            "retry_delay" => {
                let d = json_seconds(value).ok_or_else(|| bad("seconds, 0 or more"))?;
                out.retry = RetryPolicy { ..out.retry }.initial_interval(d);
            }
            "timeout" => {
                out = out.timeout(json_seconds(value).ok_or_else(|| bad("seconds, 0 or more"))?)
            }
            "unique_key" => out = out.unique_key(value.as_str().ok_or_else(|| bad("a string"))?),
            "metadata" => out = out.metadata(value.clone()),
            other => {
                return Err(invalid(format!(
                    "unknown task option {other:?} (known: queue, priority, delay, run_at, \
                     max_attempts, retry_delay, timeout, unique_key, metadata)"
                )))
            }
        }
    }
    Ok(out)
}

/// `value` seconds as a duration; `what` names it in the error.
pub(crate) fn seconds(value: f64, what: &str) -> Result<Duration, PyErr> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| invalid(format!("{what}: expected seconds, 0 or more, got {value}")))
}

/// `value` seconds, 0 or more, as a duration; one too long for a `Duration` is the longest
/// (the client then refuses it as over 100 years, naming the field, rather than panicking
/// here).
fn json_seconds(value: &Value) -> Option<Duration> {
    value
        .as_f64()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(|s| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX))
}

/// A task as Python sees it (times in milliseconds since the Unix epoch).
pub(crate) fn task(record: &TaskRecord) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(record.id.0));
    out.insert("queue".into(), json!(record.queue));
    out.insert("name".into(), json!(record.name));
    out.insert("state".into(), json!(record.state.as_str()));
    out.insert("priority".into(), json!(record.priority));
    out.insert("attempt".into(), json!(record.attempt));
    out.insert("max_attempts".into(), json!(record.max_attempts));
    out.insert("input".into(), record.input.clone());
    out.insert(
        "output".into(),
        record.output.clone().unwrap_or(Value::Null),
    );
    out.insert("error".into(), json!(record.error));
    out.insert("unique_key".into(), json!(record.unique_key));
    out.insert(
        "metadata".into(),
        record.metadata.clone().unwrap_or(Value::Null),
    );
    out.insert("created_at".into(), json!(record.created_at.as_millis()));
    out.insert("run_at".into(), json!(record.visible_at.as_millis()));
    out.insert(
        "finished_at".into(),
        json!(record.finished_at.map(Timestamp::as_millis)),
    );
    Value::Object(out)
}

/// A schedule from the JSON object `schedule_create` and `schedule_update` build: `spec`,
/// `time_zone`, `workflow` or `task` (with `options` as `enqueue` takes them), `input`,
/// `overlap`, `catch_up`, `jitter` (seconds), `paused` (a note), `start_at` and `end_at`
/// (Unix times in seconds), `remaining_actions`. A bad field is refused, naming it.
pub(crate) fn schedule_options(body: &Value) -> Result<ratchet::ScheduleOptions, PyErr> {
    let text = |key: &str| body.get(key).and_then(Value::as_str).map(str::to_string);
    let spec = text("spec").ok_or_else(|| invalid("schedule: spec must be a string"))?;
    let input = body.get("input").cloned().unwrap_or(Value::Null);
    let mut options = match (text("workflow"), text("task")) {
        (Some(workflow), None) => ratchet::ScheduleOptions::start(&spec, &workflow, input),
        (None, Some(task)) => {
            let task_options = task_options(body.get("options").unwrap_or(&json!({})))?;
            ratchet::ScheduleOptions::enqueue(&spec, &task, input, task_options)
        }
        _ => return Err(invalid("schedule: give either workflow or task")),
    }
    .map_err(crate::error::to_py)?;
    let policy = |e: ratchet::Error| crate::error::to_py(e);
    if let Some(zone) = text("time_zone") {
        options = options.time_zone(&zone);
    }
    if let Some(o) = text("overlap") {
        options = options.overlap(o.parse().map_err(|e| policy(ratchet::Error::from(e)))?);
    }
    if let Some(c) = text("catch_up") {
        options = options.catch_up(c.parse().map_err(|e| policy(ratchet::Error::from(e)))?);
    }
    if let Some(j) = body.get("jitter").filter(|v| !v.is_null()) {
        options = options
            .jitter(json_seconds(j).ok_or_else(|| invalid("schedule jitter: seconds, 0 or more"))?);
    }
    if let Some(note) = text("paused") {
        options = options.paused(&note);
    }
    let time = |key: &str| -> Result<Option<Timestamp>, PyErr> {
        match body.get(key).filter(|v| !v.is_null()) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|t| t.is_finite())
                .map(|t| Some(Timestamp((t * 1000.0) as i64)))
                .ok_or_else(|| invalid(format!("schedule {key}: a Unix time in seconds"))),
        }
    };
    options.start_at = time("start_at")?;
    options.end_at = time("end_at")?;
    options.remaining_actions = match body.get("remaining_actions").filter(|v| !v.is_null()) {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| invalid("schedule remaining_actions: an integer, 0 or more"))?,
        ),
    };
    Ok(options)
}
