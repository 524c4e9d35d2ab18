//! The event store's types: events, queries, append conditions, and the rules every backend
//! checks before it writes (Dynamic Consistency Boundaries: a decision reads the events that
//! match a query and appends only if no new matching event arrived since).

use std::fmt;

use ratchet_core::limits::LimitError;
use ratchet_core::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Result, StoreError};

/// Longest event type, in bytes.
pub const MAX_EVENT_TYPE_BYTES: usize = 256;
/// Longest tag (`key:value`), in bytes.
pub const MAX_TAG_BYTES: usize = 256;
/// Most tags on one event, or in one query item.
pub const MAX_TAGS: usize = 64;
/// Largest payload plus metadata of one event, serialized, in bytes.
pub const MAX_EVENT_BYTES: usize = 1 << 20;
/// Most events in one append.
pub const MAX_EVENTS_PER_APPEND: usize = 10_000;
/// Most items in one query.
pub const MAX_QUERY_ITEMS: usize = 64;
/// Most types in one query item.
pub const MAX_QUERY_TYPES: usize = 64;
/// Most types over all the items of one query: a read looks up each type of an item
/// without tags on its own, so this bounds the lookups of one read.
pub const MAX_QUERY_TYPES_IN_ALL: usize = 256;

/// An event's place in the store: strictly increasing, from 1, in the order appends commit.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Position(pub u64);

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An event to append.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewEvent {
    /// What happened, e.g. `StudentEnrolled`. Not empty.
    #[serde(rename = "type")]
    pub kind: String,
    /// `key:value` strings that put the event in consistency boundaries, e.g.
    /// `course:c1`. Order and repeats do not matter.
    #[serde(default)]
    pub tags: Vec<String>,
    /// The event's data.
    #[serde(default)]
    pub payload: Value,
    /// Data about the event (who, why, correlation ids).
    #[serde(default)]
    pub metadata: Value,
}

impl NewEvent {
    /// An event of type `kind` with `tags` and `payload`, no metadata.
    pub fn new<T: Into<String>>(
        kind: impl Into<String>,
        tags: impl IntoIterator<Item = T>,
        payload: Value,
    ) -> Self {
        Self {
            kind: kind.into(),
            tags: tags.into_iter().map(Into::into).collect(),
            payload,
            metadata: Value::Null,
        }
    }

    /// This event with `metadata`.
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }
}

/// An appended event, as read back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    /// Its position.
    pub position: Position,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its tags, sorted, without repeats.
    pub tags: Vec<String>,
    /// Its data.
    pub payload: Value,
    /// Its metadata.
    pub metadata: Value,
    /// When it was appended.
    pub recorded_at: Timestamp,
}

/// One item of an [`EventQuery`]: matches an event whose type is one of `types` (any type
/// when empty) and that carries every tag in `tags`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryItem {
    /// Event types, any of which matches; empty matches every type.
    #[serde(default)]
    pub types: Vec<String>,
    /// Tags the event must all carry.
    #[serde(default)]
    pub tags: Vec<String>,
}

impl QueryItem {
    /// An item matching events of any of `types` carrying all of `tags`.
    pub fn new<A: Into<String>, B: Into<String>>(
        types: impl IntoIterator<Item = A>,
        tags: impl IntoIterator<Item = B>,
    ) -> Self {
        Self {
            types: types.into_iter().map(Into::into).collect(),
            tags: tags.into_iter().map(Into::into).collect(),
        }
    }

    /// Whether `event` matches this item.
    pub fn matches(&self, kind: &str, tags: &[String]) -> bool {
        (self.types.is_empty() || self.types.iter().any(|t| t == kind))
            && self.tags.iter().all(|t| tags.contains(t))
    }
}

/// Which events a read, a subscription or a condition is about: the events matching any of
/// its items. A query with no items matches every event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EventQuery {
    /// The items, ORed.
    pub items: Vec<QueryItem>,
}

impl EventQuery {
    /// The query matching every event.
    pub fn all() -> Self {
        Self::default()
    }

    /// A query of one item.
    pub fn item(item: QueryItem) -> Self {
        Self { items: vec![item] }
    }

    /// This query with one more item (ORed).
    pub fn or(mut self, item: QueryItem) -> Self {
        self.items.push(item);
        self
    }

    /// The condition "no event matching this query after `head`": what protects a decision
    /// made on a read whose head was `head`.
    pub fn after(self, head: Position) -> AppendCondition {
        AppendCondition {
            fail_if_events_match: self,
            after: Some(head),
        }
    }

    /// Whether the query matches every event.
    pub fn matches_all(&self) -> bool {
        self.items.is_empty()
            || self
                .items
                .iter()
                .any(|i| i.types.is_empty() && i.tags.is_empty())
    }

    /// Whether an event of type `kind` with `tags` matches.
    pub fn matches(&self, kind: &str, tags: &[String]) -> bool {
        self.matches_all() || self.items.iter().any(|i| i.matches(kind, tags))
    }

    /// Checks every type and tag.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] naming the first bad item.
    pub fn validate(&self) -> Result<()> {
        self.check()
            .map_err(|e| StoreError::Invalid(format!("query{}: {}", e.field, e.rule)))
    }

    /// Checks the counts of items, types and tags, then every type and tag, before a read
    /// or a condition is built of them.
    ///
    /// # Errors
    ///
    /// A [`LimitError`] whose field is a path into the items (`[3].types`, `[0].tags[2]`;
    /// empty for the items themselves), for an edge to put under its own name of the query.
    pub fn check(&self) -> std::result::Result<(), LimitError> {
        if self.items.len() > MAX_QUERY_ITEMS {
            return Err(LimitError::new(
                "",
                format!(
                    "{} items; at most {MAX_QUERY_ITEMS} are allowed",
                    self.items.len()
                ),
            ));
        }
        let mut types = 0;
        for (i, item) in self.items.iter().enumerate() {
            if item.types.len() > MAX_QUERY_TYPES {
                return Err(LimitError::new(
                    format!("[{i}].types"),
                    format!(
                        "{} types; at most {MAX_QUERY_TYPES} are allowed in an item",
                        item.types.len()
                    ),
                ));
            }
            types += item.types.len();
            if types > MAX_QUERY_TYPES_IN_ALL {
                return Err(LimitError::new(
                    format!("[{i}].types"),
                    format!("more than {MAX_QUERY_TYPES_IN_ALL} types over all items"),
                ));
            }
            if item.tags.len() > MAX_TAGS {
                return Err(LimitError::new(
                    format!("[{i}].tags"),
                    format!(
                        "{} tags; at most {MAX_TAGS} are allowed in an item",
                        item.tags.len()
                    ),
                ));
            }
        }
        let rule = |field: String, e: StoreError| {
            LimitError::new(
                field,
                match e {
                    StoreError::Invalid(m) => m,
                    other => other.to_string(),
                },
            )
        };
        for (i, item) in self.items.iter().enumerate() {
            for (k, t) in item.types.iter().enumerate() {
                validate_event_type(t).map_err(|e| rule(format!("[{i}].types[{k}]"), e))?;
            }
            for (k, t) in item.tags.iter().enumerate() {
                validate_tag(t).map_err(|e| rule(format!("[{i}].tags[{k}]"), e))?;
            }
        }
        Ok(())
    }
}

/// The condition of a conditional append: fail if an event matching `fail_if_events_match`
/// exists after `after` (or at all, when `after` is `None`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendCondition {
    /// The events that would invalidate the decision.
    pub fail_if_events_match: EventQuery,
    /// The position the decision saw; `None` when it saw none of the store.
    #[serde(default)]
    pub after: Option<Position>,
}

/// One atomic append: all of its events or none.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventAppend {
    /// The events, given positions in this order.
    pub events: Vec<NewEvent>,
    /// Append only if this holds.
    #[serde(default)]
    pub condition: Option<AppendCondition>,
    /// A key that makes the append idempotent: a second append with the same key appends
    /// nothing and returns the first one's positions.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

impl EventAppend {
    /// Checks the events, tags, sizes and the condition's query.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] naming the first problem; then nothing may be appended.
    pub fn validate(&self) -> Result<()> {
        if self.events.is_empty() {
            return Err(StoreError::Invalid(
                "an append needs at least one event".into(),
            ));
        }
        if self.events.len() > MAX_EVENTS_PER_APPEND {
            return Err(StoreError::Invalid(format!(
                "an append has {} events; at most {MAX_EVENTS_PER_APPEND} are allowed",
                self.events.len()
            )));
        }
        for (i, e) in self.events.iter().enumerate() {
            validate_event(e).map_err(|err| match err {
                StoreError::Invalid(m) => StoreError::Invalid(format!("event {i}: {m}")),
                other => other,
            })?;
        }
        if let Some(c) = &self.condition {
            c.fail_if_events_match.validate()?;
        }
        if let Some(k) = &self.idempotency_key {
            if k.is_empty() || k.len() > 256 {
                return Err(StoreError::Invalid(
                    "an idempotency key has 1 to 256 bytes".into(),
                ));
            }
        }
        Ok(())
    }
}

/// What became of one [`EventAppend`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AppendOutcome {
    /// Appended at positions `first..=last`.
    Appended {
        /// The first event's position.
        first: Position,
        /// The last event's position.
        last: Position,
    },
    /// The append's idempotency key was used before: nothing appended; the earlier append's
    /// positions.
    Duplicate {
        /// The first event's position.
        first: Position,
        /// The last event's position.
        last: Position,
    },
    /// An event matching the condition exists after its `after`: nothing appended.
    Conflict {
        /// The first such event.
        position: Position,
    },
}

/// Which way a read goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Oldest first.
    #[default]
    Forward,
    /// Newest first.
    Backward,
}

/// Parameters of [`crate::Store::event_read`]: the events matching `query` with a position
/// strictly between `after` and `before`, the first `limit` in `direction`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventRead {
    /// Which events.
    pub query: EventQuery,
    /// Only positions above this.
    pub after: Option<Position>,
    /// Only positions below this.
    pub before: Option<Position>,
    /// At most this many.
    pub limit: u32,
    /// Oldest or newest first.
    pub direction: Direction,
}

impl EventRead {
    /// The first `limit` events matching `query` after `after`, oldest first.
    pub fn forward(query: EventQuery, after: Option<Position>, limit: u32) -> Self {
        Self {
            query,
            after,
            before: None,
            limit,
            direction: Direction::Forward,
        }
    }
}

/// What [`crate::Store::event_read`] returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventPage {
    /// The matching events, in the read's direction.
    pub events: Vec<StoredEvent>,
    /// The last position in the whole store when the read ran (0 when empty), from the same
    /// snapshot as `events`: every matching event at or below it and in range was returned or
    /// cut off by `limit`.
    pub head: Position,
}

/// Checks an event type.
///
/// # Errors
///
/// [`StoreError::Invalid`] when empty, too long, holding a character that is not printable
/// (control, format or separator: no bidirectional overrides or zero-width characters, which
/// would make two types look alike in a console or a terminal), or not in Unicode
/// normalization form C, so that one type has one spelling for the queries that match it.
pub fn validate_event_type(kind: &str) -> Result<()> {
    if kind.trim().is_empty() {
        return Err(StoreError::Invalid(
            "an event type must not be empty".into(),
        ));
    }
    ratchet_core::limits::check_identifier("event type", kind, MAX_EVENT_TYPE_BYTES)
        .map_err(|e| StoreError::Invalid(format!("event type {}", e.rule)))
}

/// Checks a tag: `key:value`, the key of letters, digits, `_`, `-` and `.`, the value not
/// empty, printable and in normal form C, as an event type.
///
/// # Errors
///
/// [`StoreError::Invalid`] naming the tag and what is wrong with it.
pub fn validate_tag(tag: &str) -> Result<()> {
    // (Quoted as shown_name shows it: a tag of a megabyte is not echoed back whole.)
    let bad = |why: &str| {
        Err(StoreError::Invalid(format!(
            "tag \"{}\": {why}",
            ratchet_core::limits::shown_name(tag)
        )))
    };
    if tag.len() > MAX_TAG_BYTES {
        return bad(&format!("longer than {MAX_TAG_BYTES} bytes"));
    }
    let Some((key, value)) = tag.split_once(':') else {
        return bad("a tag is key:value");
    };
    if key.is_empty()
        || !key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return bad("the key must be letters, digits, '_', '-' or '.'");
    }
    if value.is_empty() {
        return bad("the value must not be empty");
    }
    if let Err(e) = ratchet_core::limits::check_identifier("tag", tag, MAX_TAG_BYTES) {
        return bad(&e.rule);
    }
    Ok(())
}

/// Checks one event: its type, tags and size.
///
/// # Errors
///
/// [`StoreError::Invalid`] naming the problem.
pub fn validate_event(e: &NewEvent) -> Result<()> {
    validate_event_type(&e.kind)?;
    if e.tags.len() > MAX_TAGS {
        return Err(StoreError::Invalid(format!(
            "{} tags; at most {MAX_TAGS} are allowed",
            e.tags.len()
        )));
    }
    for t in &e.tags {
        validate_tag(t)?;
    }
    let size = event_size(e);
    if size > MAX_EVENT_BYTES {
        return Err(StoreError::Invalid(format!(
            "payload and metadata are {size} bytes; at most {MAX_EVENT_BYTES} are allowed"
        )));
    }
    for (field, value) in [("payload", &e.payload), ("metadata", &e.metadata)] {
        ratchet_core::limits::check_json_depth(field, value)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
    }
    Ok(())
}

/// The size of an event's payload and metadata, serialized: what [`MAX_EVENT_BYTES`]
/// bounds.
pub fn event_size(e: &NewEvent) -> usize {
    json_len(&e.payload) + json_len(&e.metadata)
}

/// The length of `value` serialized, counted without building the text (appends check every
/// event's size before the backend serializes it to store it).
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// An event's tags as stored: sorted, without repeats.
pub fn normalized_tags(tags: &[String]) -> Vec<String> {
    let mut t = tags.to_vec();
    t.sort();
    t.dedup();
    t
}

/// Checks a whole batch of appends.
///
/// # Errors
///
/// [`StoreError::Invalid`] for the first bad append, naming it.
pub fn validate_appends(appends: &[EventAppend]) -> Result<()> {
    for (i, a) in appends.iter().enumerate() {
        a.validate().map_err(|err| match err {
            StoreError::Invalid(m) if appends.len() > 1 => {
                StoreError::Invalid(format!("append {i}: {m}"))
            }
            other => other,
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn queries_are_bounded_in_items_types_and_tags_with_the_field_named() {
        let types = |n: usize| (0..n).map(|i| format!("T{i}")).collect::<Vec<_>>();
        let ok = EventQuery::item(QueryItem::new(types(MAX_QUERY_TYPES), ["k:v"]));
        assert!(ok.check().is_ok());
        let wide = EventQuery::all()
            .or(QueryItem::new(["A"], ["k:v"]))
            .or(QueryItem::new(
                types(MAX_QUERY_TYPES + 1),
                Vec::<String>::new(),
            ));
        let e = wide.check().unwrap_err();
        assert_eq!(e.field, "[1].types", "{e}");
        assert!(wide.validate().is_err());
        let mut many = EventQuery::all();
        for _ in 0..MAX_QUERY_TYPES_IN_ALL / MAX_QUERY_TYPES + 1 {
            many = many.or(QueryItem::new(types(MAX_QUERY_TYPES), Vec::<String>::new()));
        }
        let e = many.check().unwrap_err();
        assert_eq!(
            e.field,
            format!("[{}].types", MAX_QUERY_TYPES_IN_ALL / MAX_QUERY_TYPES)
        );
        let tags: Vec<String> = (0..=MAX_TAGS).map(|i| format!("k:{i}")).collect();
        let e = EventQuery::item(QueryItem::new(["A"], tags))
            .check()
            .unwrap_err();
        assert_eq!(e.field, "[0].tags");
        let mut items = EventQuery::all();
        for _ in 0..=MAX_QUERY_ITEMS {
            items = items.or(QueryItem::new(["A"], Vec::<String>::new()));
        }
        assert_eq!(items.check().unwrap_err().field, "");
        let bad = EventQuery::item(QueryItem::new(["A"], ["k:v", "nocolon"]));
        assert_eq!(bad.check().unwrap_err().field, "[0].tags[1]");
    }

    #[test]
    fn tags_are_key_value() {
        assert!(validate_tag("course:c1").is_ok());
        assert!(validate_tag("a.b-c_d:x:y").is_ok());
        for bad in ["", "course", ":c1", "course:", "co urse:c1", "c:a\nb"] {
            assert!(validate_tag(bad).is_err(), "{bad:?} accepted");
        }
        // A tag of a megabyte is refused without being echoed back whole.
        let huge = format!("k:{}", "v".repeat(1 << 20));
        let StoreError::Invalid(message) = validate_tag(&huge).unwrap_err() else {
            panic!("not Invalid");
        };
        assert!(message.len() < 200, "{} bytes of message", message.len());
        assert!(message.contains("longer than"), "{message}");
    }

    #[test]
    fn queries_match_by_type_and_all_tags() {
        let tags = vec!["course:c1".to_string(), "student:s1".to_string()];
        let q = EventQuery::item(QueryItem::new(["Enrolled"], ["course:c1"]));
        assert!(q.matches("Enrolled", &tags));
        assert!(!q.matches("Left", &tags));
        let q = EventQuery::item(QueryItem::new(["Left"], ["course:c1"])).or(QueryItem::new(
            Vec::<String>::new(),
            ["student:s1", "course:c1"],
        ));
        assert!(q.matches("Enrolled", &tags), "second item matches");
        let q = EventQuery::item(QueryItem::new(Vec::<String>::new(), ["course:c2"]));
        assert!(!q.matches("Enrolled", &tags));
        assert!(EventQuery::all().matches("X", &[]));
    }

    #[test]
    fn bad_appends_name_the_problem() {
        let ok = NewEvent::new("A", ["k:v"], json!(1));
        let cases = [
            (vec![], "at least one event"),
            (vec![NewEvent::new(" ", ["k:v"], json!(1))], "type"),
            (
                vec![ok.clone(), NewEvent::new("A", ["nokey"], json!(1))],
                "event 1",
            ),
            (
                vec![NewEvent::new(
                    "A",
                    ["k:v"],
                    json!("x".repeat(MAX_EVENT_BYTES)),
                )],
                "bytes",
            ),
        ];
        for (events, expected) in cases {
            let a = EventAppend {
                events,
                ..Default::default()
            };
            let err = a.validate().expect_err("refused").to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
