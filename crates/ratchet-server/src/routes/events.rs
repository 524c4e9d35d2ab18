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
use ratchet_api::{
    position, Api as _, AppendInput, AppendedView, CloudEventsInput, EventPageView, QueryInput,
    ReadQuery, StreamQuery,
};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::page_size;
use crate::extract::{JsonBody, QueryParams};
use crate::held::Held;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;

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
    answer(state.api.events_append(&input).await?)
}

/// 201 for an append, 200 for a repeated idempotency key.
fn answer(appended: AppendedView) -> Result<Response, Problem> {
    let status = if appended.duplicate {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(appended)).into_response())
}

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
    answer(state.api.events_append_cloudevents(&input).await?)
}

#[utoipa::path(
    get,
    path = "/v1/events",
    tag = "events",
    operation_id = "events_read",
    params(ReadQuery),
    responses(
        (status = 200, description = "A page of events", body = EventPageView),
        (status = 400, description = "Malformed JSON, query or path", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn read(
    State(state): State<ServerState>,
    QueryParams(query): QueryParams<ReadQuery>,
) -> Result<Json<EventPageView>, Problem> {
    let limit = page_size(query.limit, 100, &state)?;
    let query = ReadQuery {
        limit: Some(limit),
        ..query
    };
    Ok(Json(state.api.events_read(&query).await?))
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
    JsonBody(query): JsonBody<QueryInput>,
) -> Result<Json<EventPageView>, Problem> {
    let limit = page_size(query.limit, 100, &state)?;
    let query = QueryInput {
        limit: Some(limit),
        ..query
    };
    Ok(Json(state.api.events_query(&query).await?))
}

/// Every matching event after the start, then each new one as it is appended; each SSE
/// message's id is the event's position, so a reconnecting client resumes where it was and
/// loses or repeats nothing.
#[utoipa::path(
    get,
    path = "/v1/events/stream",
    tag = "events",
    operation_id = "events_stream",
    params(StreamQuery, ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this position (sent by browsers when they reconnect)")),
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
    QueryParams(query): QueryParams<StreamQuery>,
    held: Held,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
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
    position(query.after, "after")?;
    let query = match last_id {
        Some(id) => {
            position(Some(id), "Last-Event-ID")?;
            StreamQuery {
                after: Some(id),
                ..query
            }
        }
        None => query,
    };
    let events = state
        .api
        .events_stream(&query)
        .await?
        .filter_map(|item| async move {
            match item {
                Ok(event) => {
                    let id = event.position.to_string();
                    let data = serde_json::to_string(&event).unwrap_or_default();
                    // No SSE event name: a browser's `onmessage` sees every event, and the
                    // type is in the data.
                    Some(Ok(Event::default().id(id).data(data)))
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
