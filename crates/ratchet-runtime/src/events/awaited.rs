//! Waiting for an event as an orchestration step: the store's head is recorded first (the
//! built-in activity [`EVENTS_HEAD_ACTIVITY`]), then [`EVENTS_AWAIT_ACTIVITY`] follows the
//! store from there (pushed by LISTEN/NOTIFY on PostgreSQL, by this process on SQLite) until
//! a matching event is appended or the deadline passes. The head and the deadline are fixed
//! before the wait begins, so a retry after a crash waits for the same events until the same
//! time, and replays read both from history.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use ratchet_core::{
    ActivityError, ActivityOptions, OrchestrationContext, OrchestrationError, Timestamp,
};
use ratchet_store::{EventQuery, Position, StoredEvent};
use serde::{Deserialize, Serialize};

use crate::client::Calls;
use crate::{ActivityContext, Registry};

/// The built-in activity that reads the event store's head position.
pub const EVENTS_HEAD_ACTIVITY: &str = "ratchet.events.head";
/// The built-in activity that waits for an event.
pub const EVENTS_AWAIT_ACTIVITY: &str = "ratchet.events.await";

/// How long a wait without a timeout may take.
const NO_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// What the wait activity takes: the query, the head it follows from, and the deadline.
#[derive(Serialize, Deserialize)]
struct Await {
    query: EventQuery,
    after: Position,
    /// Milliseconds since the epoch; none: no deadline.
    #[serde(default)]
    deadline_ms: Option<i64>,
}

/// Waits, as steps of the orchestration, for the first event matching `query` appended
/// after this call: `None` when `timeout` passes first (measured from the orchestration's
/// `now`). Two steps: the head position, then the wait.
///
/// # Errors
///
/// The steps' failures (a database out of reach through every retry, a malformed query).
pub async fn await_event(
    ctx: &OrchestrationContext,
    query: EventQuery,
    timeout: Option<Duration>,
) -> Result<Option<StoredEvent>, OrchestrationError> {
    let after = events_head(ctx).await?;
    let deadline = timeout.map(|t| ctx.now().plus(t));
    await_event_after(ctx, query, after, deadline).await
}

/// The event store's head, as a step of the orchestration: where a wait that must see
/// every event appended from now on starts.
///
/// # Errors
///
/// The step's failure (a database out of reach through every retry).
pub async fn events_head(ctx: &OrchestrationContext) -> Result<Position, OrchestrationError> {
    ctx.activity(EVENTS_HEAD_ACTIVITY, ()).await
}

/// Waits, as one step of the orchestration, for the first event matching `query` after
/// position `after`: `None` when `deadline` passes first. A loop that reads events one by
/// one (checking each against more than the query) passes the last one's position.
///
/// # Errors
///
/// The step's failure (a database out of reach through every retry, a malformed query).
pub async fn await_event_after(
    ctx: &OrchestrationContext,
    query: EventQuery,
    after: Position,
    deadline: Option<Timestamp>,
) -> Result<Option<StoredEvent>, OrchestrationError> {
    // An attempt may run until the deadline, and a little past it to answer.
    let left = deadline.map(|d| d.since(ctx.now()));
    let options = ActivityOptions::default()
        .start_to_close(left.map_or(NO_TIMEOUT, |t| t + Duration::from_secs(30)));
    ctx.activity_with(
        EVENTS_AWAIT_ACTIVITY,
        Await {
            query,
            after,
            deadline_ms: deadline.map(Timestamp::as_millis),
        },
        options,
    )
    .await
}

/// Registers the built-in head and wait activities (unless the registry has them), on the
/// runtime's own event store.
pub(crate) fn register_await_activities(registry: &mut Registry, calls: Arc<Calls>) {
    if !registry.has_activity(EVENTS_HEAD_ACTIVITY) {
        let calls = calls.clone();
        registry.activity(
            EVENTS_HEAD_ACTIVITY,
            move |_ctx: ActivityContext, (): ()| {
                let events = calls.events();
                async move {
                    events
                        .head()
                        .await
                        .map_err(|e| ActivityError::new("EventStore", e.to_string()))
                }
            },
        );
    }
    if !registry.has_activity(EVENTS_AWAIT_ACTIVITY) {
        registry.activity(
            EVENTS_AWAIT_ACTIVITY,
            move |_ctx: ActivityContext, wait: Await| {
                let events = calls.events();
                async move {
                    let mut stream = Box::pin(events.subscribe(wait.query, Some(wait.after)));
                    let left = wait.deadline_ms.map(|d| {
                        Duration::from_millis(
                            u64::try_from(d.saturating_sub(Timestamp::now().as_millis()))
                                .unwrap_or(0),
                        )
                    });
                    let next = async {
                        match stream.next().await {
                            Some(Ok(event)) => Ok(Some(event)),
                            Some(Err(e)) => Err(ActivityError::new("EventStore", e.to_string())),
                            None => Ok(None),
                        }
                    };
                    match left {
                        Some(left) => tokio::time::timeout(left, next).await.unwrap_or(Ok(None)),
                        None => next.await,
                    }
                }
            },
        );
    }
}
