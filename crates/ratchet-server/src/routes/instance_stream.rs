//! `/v1/instances/{id}/stream`: an instance live, as Server-Sent Events, for pages that show
//! it while it runs.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt};
use ratchet_api::{parse_position, Api as _, InstanceMessage, InstanceStreamQuery};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::text::{HistoryPosition, InstanceId};
use crate::extract::{PathParam, QueryParams};
use crate::held::Held;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new().routes(routes!(stream))
}

/// The instance (an `instance` message, again whenever it changes), each history event after
/// the start (a `history` message whose id is its position `execution.seq`, so a reconnecting
/// client resumes where it was), and an `end` message once the instance has finished and its
/// whole history was sent.
#[utoipa::path(
    get,
    path = "/v1/instances/{id}/stream",
    tag = "instances",
    operation_id = "instances_stream",
    params(
        ("id" = InstanceId, Path, description = "Instance id"),
        InstanceStreamQuery,
        ("Last-Event-ID" = Option<HistoryPosition>, Header, description = "Resume after this history position (sent by browsers when they reconnect)")
    ),
    responses(
        (status = 200, description = "Server-Sent Events: `instance` (the instance as `GET /v1/instances/{id}` shows it), `history` (an event of its history, as the history route pages them), `end` (finished; nothing more comes)", content_type = "text/event-stream"),
        (status = 404, description = "No such instance", body = ProblemBody, content_type = "application/problem+json"),
        (status = 422, description = "A value is not acceptable; `field` names it", body = ProblemBody, content_type = "application/problem+json"),
        (status = 429, description = "Too many requests held open; `limit` says how many", body = ProblemBody, content_type = "application/problem+json"),
        (status = 503, description = "The database is out of reach", body = ProblemBody, content_type = "application/problem+json")
    )
)]
async fn stream(
    State(state): State<ServerState>,
    PathParam(id): PathParam<String>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<InstanceStreamQuery>,
    held: Held,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    let last_id = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .map_err(|_| Problem::bad_request("Last-Event-ID is not text"))
                .and_then(|t| {
                    parse_position(t).map_err(Problem::from)?;
                    Ok(t.to_string())
                })
        })
        .transpose()?;
    let query = match last_id {
        Some(after) => InstanceStreamQuery { after: Some(after) },
        None => query,
    };
    let messages = state
        .api
        .instances_stream(&id, &query)
        .await?
        .filter_map(move |item| {
            let id = id.clone();
            async move {
                match item {
                    Ok(message) => Some(Ok(sse(&message))),
                    // The next look tries again; the client needs no word of a pause.
                    Err(e) => {
                        tracing::warn!(error = %e, id = %id, "instance stream: reading failed; retrying");
                        None
                    }
                }
            }
        });
    // Ends when the server stops or the caller's token is revoked.
    let messages = held.bound(messages);
    Ok(Sse::new(messages).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// A message as Server-Sent Events carry it: a history event's id is its position.
fn sse(message: &InstanceMessage) -> Event {
    let event = Event::default().event(message.name());
    match message {
        InstanceMessage::Instance(view) => {
            event.data(serde_json::to_string(view).unwrap_or_default())
        }
        InstanceMessage::History(item) => event
            .id(format!("{}.{}", item.execution, item.seq))
            .data(serde_json::to_string(item).unwrap_or_default()),
        _ => event.data("{}"),
    }
}
