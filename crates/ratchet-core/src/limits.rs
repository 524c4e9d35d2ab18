//! Limits at the edge, stated once: the sizes, depths, counts, times and identifier rules
//! that input meets before Ratchet acts on it. Every edge (the Rust client, the HTTP API,
//! Python, the CLI, the workflow compiler) checks with these and names the field at fault;
//! docs/api.md ("Limits") lists them with their errors.
//!
//! The checks are pure: they return a [`LimitError`] naming the field and the rule, which
//! each edge maps to its own error (a 4xx problem over HTTP, `InvalidInput` in Python).

use std::borrow::Cow;
use std::time::Duration;

use serde_json::Value;

use crate::Timestamp;

/// The latest time Ratchet stores or formats: 9999-12-31T23:59:59.999Z, in milliseconds
/// since the Unix epoch. Later times cannot be written as RFC 3339.
pub const MAX_TIME_MS: i64 = 253_402_300_799_999;

/// The earliest time Ratchet stores or formats: 0001-01-01T00:00:00Z.
pub const MIN_TIME_MS: i64 = -62_135_596_800_000;

/// The longest duration a caller may give (a delay, a timeout, a retry interval, a schedule's
/// period): 100 years of 365.25 days.
pub const MAX_DURATION: Duration = Duration::from_millis(3_155_760_000_000);

/// How deeply a JSON value a caller gives (an input, a payload, an expression's result) may
/// nest. Below serde_json's own reading limit (128), with room for the envelopes Ratchet
/// stores values in, so every value written can be read back.
pub const MAX_JSON_DEPTH: usize = 100;

/// The bytes of an error's `kind` kept (a retry policy matches kinds; real ones are short).
/// A worker reporting over HTTP is refused past it; an error made in process is cut to 32
/// bytes less and its length.
pub const MAX_ERROR_KIND_BYTES: usize = 255;

/// The bytes of an error's message kept: room for a stack trace, not for a payload. A worker
/// reporting over HTTP is refused past it; an error made in process is cut to 4 KiB less, so
/// that what wraps it ("activity `x` failed after 3 attempt(s): ...") still fits and keeps its
/// end.
pub const MAX_ERROR_MESSAGE_BYTES: usize = 32 << 10;

/// What a cut message leaves below [`MAX_ERROR_MESSAGE_BYTES`] for the messages that wrap it.
const WRAPPING_ROOM: usize = 4 << 10;

/// The bytes of an error's `details` kept (as JSON): a failed call's answer fits.
pub const MAX_ERROR_DETAILS_BYTES: usize = 1 << 20;

/// `error` as Ratchet keeps it (in history, on the instance, in a task's last error): its
/// kind and message cut past [`MAX_ERROR_KIND_BYTES`] and [`MAX_ERROR_MESSAGE_BYTES`] at a
/// character boundary (the message to 4 KiB less), then saying how long they were; when its
/// details nest deeper than [`MAX_JSON_DEPTH`] (history wraps them deeper still, and
/// serde_json could not read them back) or pass [`MAX_ERROR_DETAILS_BYTES`], an object keeps
/// its small fields and anything else is dropped, the message saying what and why. An error
/// within the limits is returned as it is.
pub fn bounded_error(mut error: crate::ErrorInfo) -> crate::ErrorInfo {
    if error.kind.len() > MAX_ERROR_KIND_BYTES {
        // Room for the length it ends with: the kind kept stays within the limit.
        let end = char_boundary(&error.kind, MAX_ERROR_KIND_BYTES - 32);
        error.kind = start_and_length(&error.kind, end);
    }
    if error.message.len() > MAX_ERROR_MESSAGE_BYTES {
        let end = char_boundary(&error.message, MAX_ERROR_MESSAGE_BYTES - WRAPPING_ROOM);
        error.message = start_and_length(&error.message, end);
    }
    let over = error.details.as_ref().and_then(|details| {
        if json_depth_exceeds(details, MAX_JSON_DEPTH) {
            return Some(format!("they nest deeper than {MAX_JSON_DEPTH} levels"));
        }
        let size = json_size(details);
        (size > MAX_ERROR_DETAILS_BYTES)
            .then(|| format!("{size} bytes, over the limit of {MAX_ERROR_DETAILS_BYTES} bytes"))
    });
    if let Some(why) = over {
        // An object keeps its small fields (a workflow error's `type`, `status`, `title`,
        // `instance`): only what is too big or too deep goes.
        let (kept, dropped) = match error.details.take() {
            Some(Value::Object(fields)) => small_fields(fields),
            _ => (None, Vec::new()),
        };
        let what = match dropped.as_slice() {
            [] => "its details were dropped".to_string(),
            names => format!("its details' {} dropped", quoted_list(names)),
        };
        error.details = kept;
        error.message.push_str(&format!(" ({what}: {why})"));
    }
    error
}

/// The bytes of one field an error's details keep when they are over their limits.
const KEPT_DETAIL_BYTES: usize = 4 << 10;

/// The fields of oversized details that are each at most [`KEPT_DETAIL_BYTES`] and shallow,
/// up to 64 of them (`None` when none is), and the names of the others.
fn small_fields(fields: serde_json::Map<String, Value>) -> (Option<Value>, Vec<String>) {
    let mut kept = serde_json::Map::new();
    let mut dropped = Vec::new();
    for (name, value) in fields {
        let small = name.len() <= MAX_ERROR_KIND_BYTES
            && kept.len() < 64
            && !json_depth_exceeds(&value, MAX_JSON_DEPTH - 1)
            && serde_json::to_vec(&value).is_ok_and(|b| b.len() <= KEPT_DETAIL_BYTES);
        if small {
            kept.insert(name, value);
        } else {
            dropped.push(name);
        }
    }
    ((!kept.is_empty()).then_some(Value::Object(kept)), dropped)
}

/// `a`, `a` and `b`, or `a`, `b` and 3 more fields: names as a message lists them.
fn quoted_list(names: &[String]) -> String {
    let shown: Vec<String> = names
        .iter()
        .take(3)
        .map(|n| format!("`{}`", shown_name(n)))
        .collect();
    match (shown.as_slice(), names.len()) {
        ([one], 1) => format!("field {one} was"),
        ([a, b], 2) => format!("fields {a} and {b} were"),
        ([a, b, c], 3) => format!("fields {a}, {b} and {c} were"),
        (_, n) => format!(
            "fields {} and {} more were",
            shown.join(", "),
            n - shown.len()
        ),
    }
}

/// The largest character boundary of `text` at or below `at`.
fn char_boundary(text: &str, at: usize) -> usize {
    (0..=at.min(text.len()))
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// A value refused at the edge: which field, and which rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {rule}")]
pub struct LimitError {
    /// The field at fault, as the caller named it (`delay_ms`, `tasks[3].input`, `id`).
    pub field: String,
    /// What is wrong, and the limit.
    pub rule: String,
}

impl LimitError {
    /// A refusal of `field` for breaking `rule`.
    pub fn new(field: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            rule: rule.into(),
        }
    }
}

/// Checks that `t` lies in the calendar Ratchet can store and format (years 1 to 9999).
///
/// # Errors
///
/// [`LimitError`] naming `field` when `t` is outside [`MIN_TIME_MS`]..=[`MAX_TIME_MS`].
pub fn check_time(field: &str, t: Timestamp) -> Result<(), LimitError> {
    if (MIN_TIME_MS..=MAX_TIME_MS).contains(&t.as_millis()) {
        Ok(())
    } else {
        Err(LimitError::new(
            field,
            "must lie between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z",
        ))
    }
}

/// Checks a duration a caller gave against [`MAX_DURATION`].
///
/// # Errors
///
/// [`LimitError`] naming `field` when `d` is longer.
pub fn check_duration(field: &str, d: Duration) -> Result<(), LimitError> {
    if d <= MAX_DURATION {
        Ok(())
    } else {
        Err(LimitError::new(
            field,
            format!(
                "must be at most {} ms (100 years)",
                MAX_DURATION.as_millis()
            ),
        ))
    }
}

/// Checks that `value` nests at most [`MAX_JSON_DEPTH`] levels (a scalar is depth 0, `[1]`
/// depth 1). The walk is an explicit stack, so no value overflows it.
///
/// # Errors
///
/// [`LimitError`] naming `field` when it nests deeper.
pub fn check_json_depth(field: &str, value: &Value) -> Result<(), LimitError> {
    if json_depth_exceeds(value, MAX_JSON_DEPTH) {
        Err(too_deep(field))
    } else {
        Ok(())
    }
}

fn too_deep(field: impl Into<String>) -> LimitError {
    LimitError::new(field, format!("nests deeper than {MAX_JSON_DEPTH} levels"))
}

/// Checks a value on its way to the store: at most `max_bytes` written, and at most
/// [`MAX_JSON_DEPTH`] levels (deeper, it could be written but not read back, since history
/// wraps it deeper still). `what` names the value and is called only for the error, so a
/// value within its limits costs no text.
///
/// # Errors
///
/// The message naming the value and the limit it breaks.
pub fn check_payload(
    what: impl FnOnce() -> String,
    value: &Value,
    max_bytes: usize,
) -> Result<(), String> {
    let size = json_size(value);
    if size > max_bytes {
        return Err(format!(
            "{} is {size} bytes, over the limit of {max_bytes} bytes",
            what()
        ));
    }
    if json_depth_exceeds(value, MAX_JSON_DEPTH) {
        return Err(too_deep(what()).to_string());
    }
    Ok(())
}

/// The bytes `value` takes written as compact JSON, counted as it is written rather than
/// written out: a size check costs no copy of what it checks.
pub fn json_size(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // A `Value` always serializes; were it ever not to, it is too large to keep.
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

/// Whether `value` nests deeper than `limit` levels, found without recursion.
pub fn json_depth_exceeds(value: &Value, limit: usize) -> bool {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(fields) => Box::new(fields.values()),
            _ => continue,
        };
        if depth + 1 > limit {
            return true;
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    false
}

/// Checks an identifier a caller chose (an instance id, a name): 1 to `max_bytes` bytes,
/// printable (no control, format or separator characters, so no bidirectional overrides
/// and no zero-width characters that would make two ids look alike in a console or a
/// terminal), and in Unicode normalization form C, so one text has one spelling.
///
/// # Errors
///
/// [`LimitError`] naming `field` and the first rule broken.
pub fn check_identifier(field: &str, s: &str, max_bytes: usize) -> Result<(), LimitError> {
    if s.is_empty() {
        return Err(LimitError::new(field, "must not be empty"));
    }
    if s.len() > max_bytes {
        return Err(LimitError::new(
            field,
            format!("is {} bytes; at most {max_bytes} are allowed", s.len()),
        ));
    }
    if let Some(c) = s.chars().find(|&c| !printable(c)) {
        return Err(LimitError::new(
            field,
            format!(
                "holds U+{:04X}, a control, format or separator character",
                u32::from(c)
            ),
        ));
    }
    if !unicode_normalization::is_nfc(s) {
        return Err(LimitError::new(
            field,
            "must be in Unicode normalization form C (NFC)",
        ));
    }
    Ok(())
}

/// Whether `c` may appear in an identifier: not a control (Cc), format (Cf: bidirectional
/// overrides and isolates, zero-width joiners and spaces, the byte order mark...), line or
/// paragraph separator, private-use, surrogate or unassigned character.
pub fn printable(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    !matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::PrivateUse
            | G::Surrogate
            | G::Unassigned
    )
}

/// A run of characters without a space that an error message shows whole; a longer one shows
/// its first [`SHOWN_RUN_KEEP`] characters and its length.
pub const MAX_SHOWN_RUN: usize = 120;

/// The characters kept of a run longer than [`MAX_SHOWN_RUN`].
pub const SHOWN_RUN_KEEP: usize = 60;

/// The characters an error message shows at most; a longer one ends in `...`.
pub const MAX_SHOWN_MESSAGE: usize = 1_000;

/// An error message that quotes input, as it is shown: each character that is not
/// [`printable`] written as its escape (`\u{202e}`), so that a right-to-left override or a
/// newline in a name cannot disguise the message; each run of more than [`MAX_SHOWN_RUN`]
/// characters without a space cut to its start and its length; and the whole at most
/// [`MAX_SHOWN_MESSAGE`] characters. A megabyte name is not echoed back, and the words around
/// it (what is wrong) stay.
pub fn shown_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_SHOWN_MESSAGE + 16));
    let mut shown = 0_usize;
    for run in runs(message) {
        let part = if !run.starts_with(char::is_whitespace) && run.chars().count() > MAX_SHOWN_RUN {
            let end = run
                .char_indices()
                .nth(SHOWN_RUN_KEEP)
                .map_or(run.len(), |(at, _)| at);
            Cow::Owned(start_and_length(run, end))
        } else {
            Cow::Borrowed(run)
        };
        for c in part.chars() {
            if shown >= MAX_SHOWN_MESSAGE {
                out.push_str("...");
                return out;
            }
            push_escaped(&mut out, c);
            shown += 1;
        }
    }
    out
}

/// The bytes of a name an error message shows whole; a longer one shows its start and its
/// length.
pub const MAX_SHOWN_NAME: usize = 64;

/// A name (an id, an orchestration or task name, a schedule's) as an error message quotes it:
/// whole when at most [`MAX_SHOWN_NAME`] bytes, else its start and its length, so that a
/// megabyte of input is not echoed back; a character that could disguise the message (a
/// right-to-left override, a newline) as its escape ([`escaped`]).
pub fn shown_name(name: &str) -> String {
    if name.len() <= MAX_SHOWN_NAME {
        return escaped(name);
    }
    escaped(&start_and_length(name, char_boundary(name, MAX_SHOWN_NAME)))
}

/// `text` cut at byte `end` (a character boundary), followed by its whole length.
fn start_and_length(text: &str, end: usize) -> String {
    format!("{}... ({} bytes)", &text[..end], text.len())
}

/// `text` with each character that is not [`printable`] (but a space) written as its escape
/// (`\u{202e}`): a name as a message may quote it.
pub fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_escaped(&mut out, c);
    }
    out
}

fn push_escaped(out: &mut String, c: char) {
    if printable(c) || c == ' ' {
        out.push(c);
    } else {
        out.extend(c.escape_unicode());
    }
}

/// `text` as runs of whitespace, single quote marks (`` ` ``, `"`, `'`) and runs of the other
/// characters, in order: a quoted name is its own run, between its quotes.
fn runs(text: &str) -> impl Iterator<Item = &str> {
    fn class(c: char) -> u8 {
        if c.is_whitespace() {
            0
        } else if matches!(c, '`' | '"' | '\'') {
            1
        } else {
            2
        }
    }
    let mut rest = text;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let len = if class(first) == 1 {
            first.len_utf8()
        } else {
            rest.char_indices()
                .find(|&(_, c)| class(c) != class(first))
                .map_or(rest.len(), |(i, _)| i)
        };
        let (run, tail) = rest.split_at(len);
        rest = tail;
        Some(run)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn times_outside_the_calendar_are_refused() {
        assert!(check_time("at", Timestamp(MAX_TIME_MS)).is_ok());
        assert!(check_time("at", Timestamp(MIN_TIME_MS)).is_ok());
        let e = check_time("delay_ms", Timestamp(MAX_TIME_MS + 1)).unwrap_err();
        assert_eq!(e.field, "delay_ms");
        assert!(e.to_string().contains("9999-12-31"), "{e}");
        assert!(check_time("at", Timestamp(MIN_TIME_MS - 1)).is_err());
        assert!(check_duration("d", MAX_DURATION).is_ok());
        assert!(check_duration("d", MAX_DURATION + Duration::from_millis(1)).is_err());
    }

    #[test]
    fn json_size_is_the_written_length() {
        for value in [
            json!(null),
            json!(12.5),
            json!("quote \" and \u{1} and é"),
            json!({"a": [1, {"b": "c"}], "idempotencyKey": "580c0fd3"}),
            json!("x".repeat(70_000)),
        ] {
            let written = serde_json::to_vec(&value).map(|b| b.len()).unwrap_or(0);
            assert_eq!(json_size(&value), written, "{value}");
        }
    }

    #[test]
    fn payloads_are_named_only_when_refused() {
        let unnamed = || -> String { panic!("named a value within its limits") };
        assert_eq!(check_payload(unnamed, &json!({"a": [1, 2]}), 11), Ok(()));
        assert_eq!(
            check_payload(|| "the input".into(), &json!({"a": [1, 2]}), 10),
            Err("the input is 11 bytes, over the limit of 10 bytes".into())
        );
        let mut deep = json!(1);
        for _ in 0..=MAX_JSON_DEPTH {
            deep = json!([deep]);
        }
        assert_eq!(
            check_payload(|| "the output".into(), &deep, usize::MAX),
            Err(format!(
                "the output: nests deeper than {MAX_JSON_DEPTH} levels"
            ))
        );
    }

    #[test]
    fn depth_is_counted_without_recursion() {
        assert!(check_json_depth("input", &json!({"a": [1, {"b": 2}]})).is_ok());
        let mut deep = json!(1);
        for _ in 0..MAX_JSON_DEPTH {
            deep = json!([deep]);
        }
        assert!(check_json_depth("input", &deep).is_ok());
        let deeper = json!({ "x": deep });
        let e = check_json_depth("input", &deeper).unwrap_err();
        assert!(e.to_string().contains("deeper than 100"), "{e}");
        // A value far deeper than any stack could recurse through.
        let mut huge = Value::Null;
        for _ in 0..200_000 {
            huge = Value::Array(vec![huge]);
        }
        assert!(json_depth_exceeds(&huge, MAX_JSON_DEPTH));
        // Dropping it recursively would overflow the stack: take it apart by hand.
        let mut v = huge;
        while let Value::Array(mut items) = v {
            v = items.pop().unwrap_or(Value::Null);
        }
    }

    #[test]
    fn identifiers_are_printable_and_normalized() {
        assert!(check_identifier("id", "order-1", 255).is_ok());
        assert!(check_identifier("id", "Bestellung-Größe-東京", 255).is_ok());
        for bad in [
            "",
            "a\u{202E}b", // right-to-left override
            "a\u{2066}b", // left-to-right isolate
            "a\u{200B}b", // zero-width space
            "a\u{200D}b", // zero-width joiner
            "a\u{FEFF}b", // byte order mark
            "a\nb",       // control
            "a\u{2028}b", // line separator
            "e\u{0301}",  // decomposed é: not NFC
            "a\u{E000}b", // private use
        ] {
            let e = check_identifier("id", bad, 255).unwrap_err();
            assert_eq!(e.field, "id", "{bad:?}");
        }
        let e = check_identifier("name", &"x".repeat(300), 255).unwrap_err();
        assert!(e.to_string().contains("300 bytes"), "{e}");
    }

    #[test]
    fn messages_escape_what_hides_and_cut_what_is_long() {
        let spoof = shown_message("task `order-1\u{202E}gpj.exe` is unknown");
        assert_eq!(spoof, "task `order-1\\u{202e}gpj.exe` is unknown");
        assert_eq!(shown_message("a\nb"), "a\\u{a}b");
        let long = format!(
            "with.method `{}` is not an HTTP method",
            "x".repeat(100_000)
        );
        let shown = shown_message(&long);
        assert!(shown.len() < 200, "{shown}");
        assert!(
            shown.ends_with("... (100000 bytes)` is not an HTTP method"),
            "{shown}"
        );
        let words = "word ".repeat(1_000);
        let shown = shown_message(&words);
        assert_eq!(shown.chars().count(), MAX_SHOWN_MESSAGE + 3);
        assert!(shown.ends_with("..."));
        let plain = "task `b`: `call` names an activity no worker runs";
        assert_eq!(shown_message(plain), plain);
    }

    #[test]
    fn errors_are_kept_within_their_limits() {
        use crate::ErrorInfo;
        let small = ErrorInfo::new("Declined", "card declined")
            .with_details(serde_json::json!({"code": 51}));
        assert_eq!(bounded_error(small.clone()), small);
        // Cut at a character boundary: 'é' is two bytes and straddles the limit.
        let message = format!("x{}", "é".repeat(MAX_ERROR_MESSAGE_BYTES));
        let kept = bounded_error(ErrorInfo::new("é".repeat(200), message.clone()));
        assert!(
            kept.kind.len() <= MAX_ERROR_KIND_BYTES,
            "{}",
            kept.kind.len()
        );
        assert_eq!(kept.kind, format!("{}... (400 bytes)", "é".repeat(111)));
        assert!(kept.message.len() < MAX_ERROR_MESSAGE_BYTES + 32);
        assert!(kept
            .message
            .ends_with(&format!("... ({} bytes)", message.len())));
        let deep = (0..150).fold(serde_json::json!(0), |v, _| serde_json::json!([v]));
        let kept = bounded_error(ErrorInfo::new("Deep", "m").with_details(deep));
        assert_eq!(kept.details, None);
        assert_eq!(
            kept.message,
            "m (its details were dropped: they nest deeper than 100 levels)"
        );
        // A workflow error keeps its small fields; the big one goes, named.
        let error = serde_json::json!({"type": "https://example.com/huge", "status": 500,
            "detail": "d".repeat(MAX_ERROR_DETAILS_BYTES)});
        let kept = bounded_error(ErrorInfo::new("Huge", "m").with_details(error));
        assert_eq!(
            kept.details,
            Some(serde_json::json!({"type": "https://example.com/huge", "status": 500}))
        );
        assert!(
            kept.message
                .starts_with("m (its details' field `detail` was dropped: "),
            "{}",
            kept.message
        );
        let big = serde_json::json!("y".repeat(MAX_ERROR_DETAILS_BYTES));
        let kept = bounded_error(ErrorInfo::new("Big", "m").with_details(big));
        assert_eq!(kept.details, None);
        assert!(
            kept.message.contains("over the limit of 1048576 bytes"),
            "{}",
            kept.message
        );
    }
}
