//! `/v1/events`: what appending, reading and following events send and answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use crate::text::{EventType, Tag, TagList, TypeList};

/// An event as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventView {
    /// Its place in the store, from 1.
    pub position: u64,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: String,
    /// `key:value` strings: its consistency boundaries.
    pub tags: Vec<String>,
    /// Its data.
    pub payload: Value,
    /// Data about it.
    pub metadata: Value,
    /// When it was appended (RFC 3339).
    pub recorded_at: String,
}

/// One event to append.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventInput {
    /// What happened.
    #[serde(rename = "type")]
    #[schema(value_type = EventType)]
    pub kind: String,
    /// At most 64.
    #[serde(default)]
    #[schema(value_type = Vec<Tag>, max_items = 64)]
    pub tags: Vec<String>,
    /// Its data.
    #[serde(default)]
    pub payload: Value,
    /// Data about it.
    #[serde(default)]
    pub metadata: Value,
}

/// One item of a query: any of `types` (every type when empty), carrying all `tags`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemInput {
    /// At most 64 (and 256 over all the items of a query).
    #[serde(default)]
    #[schema(value_type = Vec<EventType>, max_items = 64)]
    pub types: Vec<String>,
    /// At most 64.
    #[serde(default)]
    #[schema(value_type = Vec<Tag>, max_items = 64)]
    pub tags: Vec<String>,
}

/// Fail the append if an event matching `fail_if_events_match` was appended after `after`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConditionInput {
    /// At most 64 items.
    #[schema(max_items = 64)]
    pub fail_if_events_match: Vec<ItemInput>,
    /// Only events after this position count (none: every event).
    #[serde(default)]
    #[schema(maximum = 9223372036854775807_u64)]
    pub after: Option<u64>,
}

/// Events to append together, all or none.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendInput {
    /// 1 to 10,000 events; each event's payload and metadata together at most 1 MiB
    /// serialized (413 over it).
    #[schema(min_items = 1, max_items = 10000)]
    pub events: Vec<EventInput>,
    /// Append only if it holds.
    #[serde(default)]
    pub condition: Option<ConditionInput>,
    /// Append at most once per key.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    pub idempotency_key: Option<String>,
}

/// Where an append went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AppendedView {
    /// The first event's position.
    pub first: u64,
    /// The last event's position.
    pub last: u64,
    /// True when an append with the same idempotency key was made before: nothing was
    /// appended, and the positions are the first append's.
    pub duplicate: bool,
}

/// A CloudEvent 1.0 in structured JSON, or an array of them (a batch): `specversion`
/// (`1.0`), `id`, `source` and `type` required; `data` any JSON; the extension `tags`, a list
/// of `key:value` strings, the event's tags; every other attribute (lower-case letters and
/// digits) a string, number, boolean or null, kept as the event's metadata.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CloudEventsInput {
    /// One event.
    One(serde_json::Map<String, Value>),
    /// A batch.
    Batch(Vec<Value>),
}

/// The JSON Schema of one CloudEvent as Ratchet appends it: exactly what
/// `NewEvent::from_cloud_event` and the event store's own rules accept, so that a client (or
/// a fuzzer) can tell a good event from a bad one before sending it.
fn cloud_event_schema() -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{
        AdditionalProperties, ArrayBuilder, ObjectBuilder, SchemaType, Type,
    };
    let non_empty = || {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
    };
    let primitive = ObjectBuilder::new().schema_type(SchemaType::Array(vec![
        Type::String,
        Type::Number,
        Type::Boolean,
        Type::Null,
    ]));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "specversion",
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["1.0"])),
        )
        .property("id", non_empty())
        .property("source", non_empty())
        .property("type", utoipa::openapi::Ref::from_schema_name("EventType"))
        .property(
            "data",
            ObjectBuilder::new().schema_type(SchemaType::AnyValue),
        )
        .property(
            "tags",
            ArrayBuilder::new()
                .items(utoipa::openapi::Ref::from_schema_name("Tag"))
                .max_items(Some(64)),
        )
        .required("specversion")
        .required("id")
        .required("source")
        .required("type")
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[a-z0-9]+$")),
        ))
        .additional_properties(Some(AdditionalProperties::RefOr(
            utoipa::openapi::RefOr::T(primitive.into()),
        )))
        .into()
}

impl utoipa::PartialSchema for CloudEventsInput {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        use utoipa::openapi::schema::{ArrayBuilder, OneOfBuilder};
        OneOfBuilder::new()
            .description(Some(
                "A CloudEvent 1.0 in structured JSON, or an array of 1 to 10,000 of them (a batch)",
            ))
            .item(cloud_event_schema())
            .item(
                ArrayBuilder::new()
                    .items(utoipa::openapi::RefOr::T(cloud_event_schema()))
                    .min_items(Some(1))
                    .max_items(Some(10_000)),
            )
            .into()
    }
}

impl ToSchema for CloudEventsInput {}

/// A page of events.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct EventPageView {
    /// In the order read.
    pub events: Vec<EventView>,
    /// The store's last position when the page was read.
    pub head: u64,
    /// Pass as `after` (forward) or `before` (backward) for the next page; absent when this
    /// page was not full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// Which way a page reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DirectionParam {
    /// Oldest first.
    #[default]
    Forward,
    /// Newest first.
    Backward,
}

/// A read of one item, in the query string.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ReadQuery {
    /// Types, comma-separated (any of them; at most 64).
    #[param(value_type = Option<TypeList>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub types: Option<String>,
    /// `key:value` tags, comma-separated (all of them; at most 64).
    #[param(value_type = Option<TagList>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<String>,
    /// Only events after this position.
    #[param(maximum = 9223372036854775807_u64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// Only events before this position.
    #[param(maximum = 9223372036854775807_u64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
    /// 1 to 1,000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Which way it reads.
    #[serde(default)]
    pub direction: DirectionParam,
}

/// A read with a query of many items, in the body.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueryInput {
    /// At most 64 items.
    #[serde(default)]
    #[schema(max_items = 64)]
    pub query: Vec<ItemInput>,
    /// Only events after this position.
    #[serde(default)]
    #[schema(maximum = 9223372036854775807_u64)]
    pub after: Option<u64>,
    /// Only events before this position.
    #[serde(default)]
    #[schema(maximum = 9223372036854775807_u64)]
    pub before: Option<u64>,
    /// 1 to 1,000 (default 100).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Which way it reads.
    #[serde(default)]
    pub direction: DirectionParam,
}

/// What a stream follows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    /// Types, comma-separated (any of them; at most 64).
    #[param(value_type = Option<TypeList>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub types: Option<String>,
    /// `key:value` tags, comma-separated (all of them; at most 64).
    #[param(value_type = Option<TagList>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<String>,
    /// Start after this position (default: from the first event); a `Last-Event-ID` header,
    /// which browsers send when they reconnect, wins over it.
    #[param(maximum = 9223372036854775807_u64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
}
