//! `/v1/events`: append (with a condition and an idempotency key), read a page by query,
//! and follow live as Server-Sent Events, resuming after `Last-Event-ID`.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::{Stream, StreamExt};
use ratchet::{
    AppendCondition, AppendOutcome, Direction, EventAppend, EventQuery, EventRead, NewEvent,
    QueryItem, StoredEvent,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::text::{EventType, Tag, TagList, TypeList};
use super::{comma_list, page_size, position};
use crate::extract::{JsonBody, QueryParams};
use crate::held::Held;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;
use crate::time::rfc3339;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new()
        .routes(routes!(append, read))
        .routes(routes!(append_cloud_events))
        .routes(routes!(query))
        .routes(routes!(stream))
}

/// A Server-Sent Events message of `/v1/events/stream`: `id` is the event's position,
/// `data` the event as JSON (an [`EventView`]).
pub(crate) enum EventMessage {}

impl utoipa::PartialSchema for EventMessage {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        ObjectBuilder::new()
            .description(Some(
                "A Server-Sent Events message: `id` the event's position, `data` the event \
                 as JSON (an EventView)",
            ))
            .property("id", ObjectBuilder::new().schema_type(Type::String))
            .property("event", ObjectBuilder::new().schema_type(Type::String))
            .property(
                "data",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .content_media_type("application/json"),
            )
            .required("data")
            .into()
    }
}

impl ToSchema for EventMessage {}

/// An event as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EventView {
    position: u64,
    #[serde(rename = "type")]
    kind: String,
    tags: Vec<String>,
    payload: Value,
    metadata: Value,
    recorded_at: String,
}

impl From<StoredEvent> for EventView {
    fn from(e: StoredEvent) -> Self {
        Self {
            position: e.position.0,
            kind: e.kind,
            tags: e.tags,
            payload: e.payload,
            metadata: e.metadata,
            recorded_at: rfc3339(e.recorded_at),
        }
    }
}

/// One event to append.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct EventInput {
    #[serde(rename = "type")]
    #[schema(value_type = EventType)]
    kind: String,
    /// At most 64.
    #[serde(default)]
    #[schema(value_type = Vec<Tag>, max_items = 64)]
    tags: Vec<String>,
    #[serde(default)]
    payload: Value,
    #[serde(default)]
    metadata: Value,
}

/// One item of a query: any of `types` (every type when empty), carrying all `tags`.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ItemInput {
    /// At most 64 (and 256 over all the items of a query).
    #[serde(default)]
    #[schema(value_type = Vec<EventType>, max_items = 64)]
    types: Vec<String>,
    /// At most 64.
    #[serde(default)]
    #[schema(value_type = Vec<Tag>, max_items = 64)]
    tags: Vec<String>,
}

/// The query of a body's items, its counts, types and tags checked; a refusal names the
/// field under `field` (`query[3].types`).
fn to_query(items: Vec<ItemInput>, field: &str) -> Result<EventQuery, Problem> {
    let query = EventQuery {
        items: items
            .into_iter()
            .map(|i| QueryItem::new(i.types, i.tags))
            .collect(),
    };
    query
        .check()
        .map_err(|e| Problem::invalid(e.rule).field(format!("{field}{}", e.field)))?;
    Ok(query)
}

/// Fail the append if an event matching `fail_if_events_match` was appended after `after`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ConditionInput {
    /// At most 64 items.
    #[schema(max_items = 64)]
    fail_if_events_match: Vec<ItemInput>,
    #[serde(default)]
    #[schema(maximum = 9223372036854775807_u64)]
    after: Option<u64>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AppendInput {
    /// 1 to 10,000 events; each event's payload and metadata together at most 1 MiB
    /// serialized (413 over it).
    #[schema(min_items = 1, max_items = 10000)]
    events: Vec<EventInput>,
    #[serde(default)]
    condition: Option<ConditionInput>,
    #[serde(default)]
    #[schema(min_length = 1, max_length = 256)]
    idempotency_key: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
struct AppendedView {
    first: u64,
    last: u64,
    /// True when an append with the same idempotency key was made before: nothing was
    /// appended, and the positions are the first append's.
    duplicate: bool,
}

#[utoipa::path(
    post,
    path = "/v1/events",
    tag = "events",
    operation_id = "events_append",
    request_body = AppendInput,
    responses(
        (status = 201, description = "Appended", body = AppendedView), (status = 200, description = "Appended before under this idempotency key: nothing appended", body = AppendedView), (status = 409, description = "The condition failed: `position` is the event that matches it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn append(
    State(state): State<ServerState>,
    JsonBody(input): JsonBody<AppendInput>,
) -> Result<Response, Problem> {
    let events = input
        .events
        .into_iter()
        .map(|e| NewEvent::new(e.kind, e.tags, e.payload).with_metadata(e.metadata));
    let events: Vec<NewEvent> = events.collect();
    sized(&events)?;
    let append = EventAppend {
        events,
        condition: input
            .condition
            .map(|c| {
                Ok::<_, Problem>(AppendCondition {
                    fail_if_events_match: to_query(
                        c.fail_if_events_match,
                        "condition.fail_if_events_match",
                    )?,
                    after: position(c.after, "condition.after")?,
                })
            })
            .transpose()?,
        idempotency_key: input.idempotency_key,
    };
    submit(&state, append).await
}

/// Refuses an event over [`ratchet::MAX_EVENT_BYTES`] with 413, naming it.
fn sized(events: &[NewEvent]) -> Result<(), Problem> {
    for (i, event) in events.iter().enumerate() {
        let size = ratchet::event_size(event);
        if size > ratchet::MAX_EVENT_BYTES {
            return Err(Problem::too_large(
                format!(
                    "the payload and metadata are {size} bytes; at most {} are allowed",
                    ratchet::MAX_EVENT_BYTES
                ),
                ratchet::MAX_EVENT_BYTES as u64,
            )
            .field(format!("events[{i}].payload")));
        }
    }
    Ok(())
}

/// Appends and answers 201 (or 200 for a repeated idempotency key, 409 for a failed
/// condition).
async fn submit(state: &ServerState, append: EventAppend) -> Result<Response, Problem> {
    let (status, first, last, duplicate) = match state.client.events().submit(append).await? {
        AppendOutcome::Appended { first, last } => (StatusCode::CREATED, first, last, false),
        AppendOutcome::Duplicate { first, last } => (StatusCode::OK, first, last, true),
        AppendOutcome::Conflict { position } => {
            return Err(ratchet::Error::AppendConflict { position }.into())
        }
        other => {
            return Err(Problem::from(ratchet::Error::InvalidInput(format!(
                "the store answered the append with {other:?}"
            ))))
        }
    };
    let body = AppendedView {
        first: first.0,
        last: last.0,
        duplicate,
    };
    Ok((status, Json(body)).into_response())
}

/// A CloudEvent 1.0 in structured JSON, or an array of them (a batch): `specversion`
/// (`1.0`), `id`, `source` and `type` required; `data` any JSON; the extension `tags`, a list
/// of `key:value` strings, the event's tags; every other attribute (lower-case letters and
/// digits) a string, number, boolean or null, kept as the event's metadata.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum CloudEventsInput {
    One(serde_json::Map<String, Value>),
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

/// Appends CloudEvents (the structured JSON mode of the CloudEvents HTTP binding, one
/// event or a batch): what a declarative workflow's `listen` and `schedule.on` see.
#[utoipa::path(
    post,
    path = "/v1/events/cloudevents",
    tag = "events",
    operation_id = "events_append_cloudevents",
    request_body(content(
        (CloudEventsInput = "application/cloudevents+json"),
        (CloudEventsInput = "application/cloudevents-batch+json"),
        (CloudEventsInput = "application/json")
    )),
    responses(
        (status = 201, description = "Appended", body = AppendedView),
        (status = 400, description = "Malformed JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "Not a CloudEvent Ratchet can append; `field` names the event", body = ProblemBody, content_type = "application/problem+json"),
        (status = 413, description = "The body or batch is over its limit; `limit` says it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn append_cloud_events(
    State(state): State<ServerState>,
    JsonBody(input): JsonBody<CloudEventsInput>,
) -> Result<Response, Problem> {
    let list = match input {
        CloudEventsInput::One(one) => vec![Value::Object(one)],
        CloudEventsInput::Batch(list) => list,
    };
    if list.is_empty() || list.len() > ratchet::MAX_EVENTS_PER_APPEND {
        return Err(Problem::invalid(format!(
            "a batch holds 1 to {} CloudEvents, not {}",
            ratchet::MAX_EVENTS_PER_APPEND,
            list.len()
        )));
    }
    let events = list
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            NewEvent::from_cloud_event(e)
                .map_err(|e| Problem::invalid(e.to_string()).field(format!("[{i}]")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    sized(&events)?;
    submit(
        &state,
        EventAppend {
            events,
            condition: None,
            idempotency_key: None,
        },
    )
    .await
}

/// A page of events.
#[derive(Debug, Serialize, ToSchema)]
struct EventPageView {
    events: Vec<EventView>,
    /// The store's last position when the page was read.
    head: u64,
    /// Pass as `after` (forward) or `before` (backward) for the next page; absent when this
    /// page was not full.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
enum DirectionParam {
    #[default]
    Forward,
    Backward,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ReadParams {
    /// Types, comma-separated (any of them; at most 64).
    #[param(value_type = Option<TypeList>)]
    types: Option<String>,
    /// `key:value` tags, comma-separated (all of them; at most 64).
    #[param(value_type = Option<TagList>)]
    tags: Option<String>,
    #[param(maximum = 9223372036854775807_u64)]
    after: Option<u64>,
    #[param(maximum = 9223372036854775807_u64)]
    before: Option<u64>,
    /// 1 to 1,000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    #[serde(default)]
    direction: DirectionParam,
}

/// A read with a query of many items, in the body.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct QueryInput {
    /// At most 64 items.
    #[serde(default)]
    #[schema(max_items = 64)]
    query: Vec<ItemInput>,
    #[serde(default)]
    #[schema(maximum = 9223372036854775807_u64)]
    after: Option<u64>,
    #[serde(default)]
    #[schema(maximum = 9223372036854775807_u64)]
    before: Option<u64>,
    /// 1 to 1,000 (default 100).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
    #[serde(default)]
    direction: DirectionParam,
}

/// The query of the `types` and `tags` parameters, checked; a refusal names the parameter.
fn one_item(types: Option<&str>, tags: Option<&str>) -> Result<EventQuery, Problem> {
    let (types, tags) = (comma_list(types), comma_list(tags));
    let query = if types.is_empty() && tags.is_empty() {
        EventQuery::all()
    } else {
        EventQuery::item(QueryItem::new(types, tags))
    };
    query.check().map_err(|e| {
        // `[0].types[2]` is the parameter `types`.
        let field = if e.field.starts_with("[0].tags") {
            "tags"
        } else {
            "types"
        };
        Problem::invalid(e.rule).field(field)
    })?;
    Ok(query)
}

#[utoipa::path(
    get,
    path = "/v1/events",
    tag = "events",
    operation_id = "events_read",
    params(ReadParams),
    responses(
        (status = 200, description = "A page of events", body = EventPageView),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn read(
    State(state): State<ServerState>,
    QueryParams(p): QueryParams<ReadParams>,
) -> Result<Json<EventPageView>, Problem> {
    let query = one_item(p.types.as_deref(), p.tags.as_deref())?;
    page(&state, query, p.after, p.before, p.limit, p.direction).await
}

#[utoipa::path(
    post,
    path = "/v1/events/query",
    tag = "events",
    operation_id = "events_query",
    request_body = QueryInput,
    responses(
        (status = 200, description = "A page of events", body = EventPageView),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 415, description = "The body is not JSON", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn query(
    State(state): State<ServerState>,
    JsonBody(q): JsonBody<QueryInput>,
) -> Result<Json<EventPageView>, Problem> {
    page(
        &state,
        to_query(q.query, "query")?,
        q.after,
        q.before,
        q.limit,
        q.direction,
    )
    .await
}

async fn page(
    state: &ServerState,
    query: EventQuery,
    after: Option<u64>,
    before: Option<u64>,
    limit: Option<u32>,
    direction: DirectionParam,
) -> Result<Json<EventPageView>, Problem> {
    let limit = page_size(limit, 100, state)?;
    let read = EventRead {
        query,
        after: position(after, "after")?,
        before: position(before, "before")?,
        limit,
        direction: match direction {
            DirectionParam::Forward => Direction::Forward,
            DirectionParam::Backward => Direction::Backward,
        },
    };
    let page = state.client.events().read_with(read).await?;
    let next = (page.events.len() == limit as usize)
        .then(|| page.events.last().map(|e| e.position.0))
        .flatten();
    Ok(Json(EventPageView {
        events: page.events.into_iter().map(EventView::from).collect(),
        head: page.head.0,
        next,
    }))
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct StreamParams {
    /// Types, comma-separated (any of them; at most 64).
    #[param(value_type = Option<TypeList>)]
    types: Option<String>,
    /// `key:value` tags, comma-separated (all of them; at most 64).
    #[param(value_type = Option<TagList>)]
    tags: Option<String>,
    /// Start after this position (default: from the first event); a `Last-Event-ID` header,
    /// which browsers send when they reconnect, wins over it.
    #[param(maximum = 9223372036854775807_u64)]
    after: Option<u64>,
}

/// Every matching event after the start, then each new one as it is appended; each SSE
/// message's id is the event's position, so a reconnecting client resumes where it was and
/// loses or repeats nothing.
#[utoipa::path(
    get,
    path = "/v1/events/stream",
    tag = "events",
    operation_id = "events_stream",
    params(StreamParams, ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this position (sent by browsers when they reconnect)")),
    responses(
        (status = 200, description = "Server-Sent Events: each message's `id` is the event's position and its `data` the event as JSON (an EventView)", content_type = "text/event-stream", body = EventMessage),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 429, description = "Too many requests held open; `limit` says how many", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn stream(
    State(state): State<ServerState>,
    headers: HeaderMap,
    QueryParams(p): QueryParams<StreamParams>,
    held: Held,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    let query = one_item(p.types.as_deref(), p.tags.as_deref())?;
    let last_id = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    Problem::bad_request("Last-Event-ID must be an event position")
                        .field("Last-Event-ID")
                })?,
        ),
        None => None,
    };
    let after = position(p.after, "after")?;
    let after = match last_id {
        Some(id) => position(Some(id), "Last-Event-ID")?,
        None => after,
    };
    let events = state
        .client
        .events()
        .subscribe(query, after)
        .filter_map(|item| async move {
            match item {
                Ok(event) => {
                    let position = event.position.0;
                    let data = serde_json::to_string(&EventView::from(event)).unwrap_or_default();
                    // No SSE event name: a browser's `onmessage` sees every event, and the
                    // type is in the data.
                    Some(Ok(Event::default().id(position.to_string()).data(data)))
                }
                // The subscription carries on after a pause; the client needs no word of it.
                Err(e) => {
                    tracing::warn!(error = %e, "event stream: reading failed; retrying");
                    None
                }
            }
        });
    // Ends when the server stops or the caller's token is revoked.
    let events = held.bound(events);
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}
