//! `/v1/instances/{id}/stream`: an instance live, as Server-Sent Events, for pages that show
//! it while it runs.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{stream, Stream, StreamExt};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::text::{HistoryPosition, InstanceId};
use crate::extract::{PathParam, QueryParams};
use crate::held::Held;
use crate::problem::{Problem, ProblemBody};
use crate::state::ServerState;
use ratchet_api::{parse_position, HistoryItem, InstanceView};

pub(crate) fn routes() -> OpenApiRouter<ServerState> {
    OpenApiRouter::new().routes(routes!(stream))
}

/// How long the stream waits between looks while nothing changes. One look is one round
/// trip (the instance and its new history together), so a page open on a running instance
/// costs the database four small reads a second.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// Most history events one look reads; a longer backlog comes over the next looks at once.
const PAGE: u32 = 500;

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct StreamParams {
    /// Start after this history position, `execution.seq` (default: from the first event);
    /// a `Last-Event-ID` header, which browsers send when they reconnect, wins over it.
    #[param(value_type = Option<HistoryPosition>)]
    after: Option<String>,
}

/// Where a stream is.
struct Follow {
    state: ServerState,
    id: String,
    after: Option<(u32, u32)>,
    /// The instance as last sent, to send it again only when it changes.
    sent: Option<String>,
    /// Whether the last look saw the whole history (no more waiting to be read).
    caught_up: bool,
    /// Whether an earlier look saw the instance finished.
    seen_finished: bool,
    done: bool,
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
        StreamParams,
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
    QueryParams(p): QueryParams<StreamParams>,
    held: Held,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    let last_id = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .map_err(|_| Problem::bad_request("Last-Event-ID is not text"))
                .and_then(|t| parse_position(t).map_err(Problem::from))
        })
        .transpose()?;
    let after = match last_id {
        Some(after) => Some(after),
        None => p.after.as_deref().map(parse_position).transpose()?,
    };
    // An unknown id is a 404 now, not an empty stream.
    state.client.status(&id).await?;
    let follow = Follow {
        state,
        id,
        after,
        sent: None,
        caught_up: false,
        seen_finished: false,
        done: false,
    };
    let messages = stream::unfold(follow, |mut f| async move {
        if f.done {
            return None;
        }
        if f.caught_up {
            tokio::time::sleep(LOOK_EVERY).await;
        }
        let messages = look(&mut f).await;
        Some((stream::iter(messages), f))
    })
    .flatten()
    .map(Ok);
    // Ends when the server stops or the caller's token is revoked.
    let messages = held.bound(messages);
    Ok(Sse::new(messages).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// One look: the messages for what changed since the last.
async fn look(f: &mut Follow) -> Vec<Event> {
    let seen = match f.state.client.follow(&f.id, f.after, PAGE).await {
        Ok(seen) => seen,
        Err(ratchet::Error::NotFound(_)) => {
            // Purged or deleted while followed: nothing more will come.
            f.done = true;
            return vec![Event::default().event("end").data("{}")];
        }
        Err(e) => {
            // The next look tries again; the client needs no word of a pause.
            tracing::warn!(error = %e, id = %f.id, "instance stream: reading failed; retrying");
            f.caught_up = true;
            return Vec::new();
        }
    };
    let mut messages = Vec::new();
    f.caught_up = seen.history.len() < PAGE as usize;
    for record in seen.history {
        f.after = Some((record.execution, record.seq));
        let id = format!("{}.{}", record.execution, record.seq);
        let item = HistoryItem {
            execution: record.execution,
            seq: record.seq,
            event: record.event,
        };
        let data = serde_json::to_string(&item).unwrap_or_default();
        messages.push(Event::default().event("history").id(id).data(data));
    }
    let finished = seen.instance.status.is_finished();
    let view = serde_json::to_string(&InstanceView::from(seen.instance)).unwrap_or_default();
    if f.sent.as_ref() != Some(&view) {
        messages.push(Event::default().event("instance").data(view.clone()));
        f.sent = Some(view);
    }
    // The history is read before the instance, so the look that first sees it finished may
    // have read the history before its last turn committed. The next look's history comes
    // after that, so it is complete: that look, read to the end, ends the stream. (It follows
    // at once, without the pause between looks.)
    if finished && f.caught_up {
        if f.seen_finished {
            f.done = true;
            messages.push(Event::default().event("end").data("{}"));
        } else {
            f.seen_finished = true;
            f.caught_up = false;
        }
    }
    messages
}
