//! How the OpenAPI document describes the strings the API checks: each kind once, with the
//! pattern and lengths of its check and the limits' own constants, for the request types to
//! name (`#[schema(value_type = Identifier)]`). These types only describe: requests read
//! plain strings, and the client checks them (`ratchet_core::limits::check_identifier`,
//! `validate_queue_name`, `validate_event_type`, `validate_tag`). The patterns follow the
//! checks as closely as a JSON Schema pattern can (normal form C, which identifiers must
//! also be in, has no pattern).

use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

/// What printable text holds none of, in the Basic Multilingual Plane: control characters,
/// format characters (bidi overrides and isolates, zero-width characters, the byte order
/// mark...), line and paragraph separators, surrogates, private use and noncharacters. (Code
/// points are spelled out: generators of values for a pattern do not read Unicode property
/// classes in a negated set. The check itself also refuses the planes' format, private-use
/// and unassigned characters, and text not in normal form C.)
const PRINTABLE: &str = concat!(
    r"\u0000-\u001F\u007F-\u009F\u00AD\u0600-\u0605\u061C\u06DD\u070F\u0890\u0891",
    r"\u08E2\u180E\u200B-\u200F\u2028-\u202E\u2060-\u2064\u2066-\u206F",
    r"\uE000-\uF8FF\uFDD0-\uFDEF\uFEFF\uFFF9-\uFFFB\uFFFE\uFFFF"
);

/// Control characters (what an existing id or a key may not hold).
const CONTROL: &str = r"\u0000-\u001F\u007F-\u009F";

/// A string schema.
struct Text {
    description: &'static str,
    min: Option<usize>,
    max: Option<usize>,
    pattern: Option<String>,
    format: Option<KnownFormat>,
}

impl Text {
    fn schema(self) -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(self.description))
            .min_length(self.min)
            .max_length(self.max)
            .pattern(self.pattern)
            .format(self.format.map(SchemaFormat::KnownFormat))
            .into()
    }
}

/// Implements the document's side of a described string.
macro_rules! described {
    ($($name:ident => $text:expr;)*) => {$(
        impl PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                $text.schema()
            }
        }
        impl ToSchema for $name {}
    )*};
}

/// A name or id a caller chooses (an instance id; an orchestration, task, signal or workflow
/// name): 1 to 255 bytes of printable text in normal form C.
pub enum Identifier {}
/// A schedule's name: as an [`Identifier`], 1 to 200 bytes.
pub enum ScheduleName {}
/// A queue's name: as an [`Identifier`], 1 to 128 bytes, not starting with `$`.
pub enum QueueName {}
/// An existing instance's id, as a path names it: 1 to 255 bytes without control
/// characters (ids stored before the rules of [`Identifier`] stay reachable).
pub enum InstanceId {}
/// An event's type.
pub enum EventType {}
/// A tag: `key:value`.
pub enum Tag {}
/// Event types, comma-separated.
pub enum TypeList {}
/// Tags, comma-separated.
pub enum TagList {}
/// A time, RFC 3339.
pub enum Time {}
/// A history position, `execution.seq`.
pub enum HistoryPosition {}
/// Instance statuses, comma-separated.
pub enum StatusList {}
/// Task states, comma-separated.
pub enum TaskStateList {}
/// A key that makes a call idempotent (a task's unique key).
pub enum Key {}

/// A comma-separated list of `names` (as written or in lower case), white space around each
/// ignored, empty items skipped.
fn names_list(names: impl Iterator<Item = &'static str>) -> String {
    let names: Vec<String> = names
        .flat_map(|n| [n.to_string(), n.to_ascii_lowercase()])
        .collect();
    let one = format!("(?:{})", names.join("|"));
    format!(r"^\s*(?:{one}\s*)?(?:,\s*(?:{one}\s*)?)*$")
}

/// A tag's key and value, as `validate_tag` reads them, without the anchors.
const TAG: &str = r"[A-Za-z0-9_.\-]+:";

described! {
    Identifier => Text {
        description: "Printable text (no control, format, separator, private-use or \
                      unassigned characters: no bidi overrides, no zero-width characters), \
                      in Unicode normal form C; 1 to 255 bytes",
        min: Some(1),
        max: Some(255),
        pattern: Some(format!("^[^{PRINTABLE}]+$")),
        format: None,
    };
    ScheduleName => Text {
        description: "Printable text in normal form C, as an identifier; 1 to 200 bytes",
        min: Some(1),
        max: Some(200),
        pattern: Some(format!("^[^{PRINTABLE}]+$")),
        format: None,
    };
    QueueName => Text {
        description: "Printable text in normal form C, as an identifier, not starting with `$` \
                      (Ratchet's own queues); 1 to 128 bytes",
        min: Some(1),
        max: Some(128),
        pattern: Some(format!("^[^${PRINTABLE}][^{PRINTABLE}]*$")),
        format: None,
    };
    InstanceId => Text {
        description: "An instance's id: 1 to 255 bytes without control characters",
        min: Some(1),
        max: Some(255),
        pattern: Some(format!("^[^{CONTROL}]+$")),
        format: None,
    };
    EventType => Text {
        description: "An event type: printable text in normal form C, as an identifier, not \
                      only white space; 1 to 256 bytes",
        min: Some(1),
        max: Some(ratchet_store::MAX_EVENT_TYPE_BYTES),
        pattern: Some(format!(r"^[^{PRINTABLE}]*[^\s{PRINTABLE}][^{PRINTABLE}]*$")),
        format: None,
    };
    Tag => Text {
        description: "`key:value`, at most 256 bytes: the key of ASCII letters, digits, `_`, \
                      `-` and `.`, the value not empty; printable text in normal form C, as an \
                      identifier",
        min: Some(3),
        max: Some(ratchet_store::MAX_TAG_BYTES),
        pattern: Some(format!(r"^{TAG}[^{PRINTABLE}]+$")),
        format: None,
    };
    TypeList => Text {
        description: "Event types, comma-separated (empty items are skipped)",
        min: None,
        max: None,
        pattern: Some(format!("^[^{PRINTABLE}]*$")),
        format: None,
    };
    TagList => Text {
        description: "`key:value` tags, comma-separated (white space around each is \
                      ignored; empty items are skipped)",
        min: None,
        max: None,
        pattern: Some(format!(
            r"^\s*(?:{TAG}[^,{PRINTABLE}]*[^,\s{PRINTABLE}]\s*)?(?:,\s*(?:{TAG}[^,{PRINTABLE}]*[^,\s{PRINTABLE}]\s*)?)*$"
        )),
        format: None,
    };
    Time => Text {
        description: "RFC 3339 (`2026-11-24T00:51:02Z`; fractions and offsets allowed), \
                      years 1 to 9999",
        min: None,
        max: None,
        pattern: None,
        format: Some(KnownFormat::DateTime),
    };
    StatusList => Text {
        description: "Instance statuses, comma-separated (any of them)",
        min: None,
        max: None,
        pattern: Some(names_list(ratchet_store::InstanceStatus::ALL.iter().map(|s| s.as_str()))),
        format: None,
    };
    TaskStateList => Text {
        description: "Task states, comma-separated (any of them)",
        min: None,
        max: None,
        pattern: Some(names_list(ratchet_store::TaskState::ALL.iter().map(|s| s.as_str()))),
        format: None,
    };
    Key => Text {
        description: "1 to 255 bytes without control characters",
        min: Some(1),
        max: Some(255),
        pattern: Some(format!("^[^{CONTROL}]+$")),
        format: None,
    };
    HistoryPosition => Text {
        description: "A history position, `execution.seq`, as the API gives it",
        min: None,
        max: None,
        pattern: Some(r"^[0-9]{1,9}\.[0-9]{1,9}$".to_string()),
        format: None,
    };
}
