//! Appending events as an orchestration step, exactly once: the step runs as the built-in
//! activity [`EVENTS_APPEND_ACTIVITY`], whose append carries an idempotency key made of the
//! instance, execution and step. A retry after a crash (or a lost lease) finds the key and
//! returns the first append's positions, and the step's result is recorded in history once,
//! so replays never append again.

use std::sync::Arc;

use ratchet_core::{ActivityError, OrchestrationContext, StepFuture};
use ratchet_store::{AppendCondition, AppendOutcome, EventAppend, NewEvent};

use crate::client::Calls;
use crate::{ActivityContext, Error, Registry};

/// The name of the built-in activity that appends events for orchestrations.
pub const EVENTS_APPEND_ACTIVITY: &str = "ratchet.events.append";

/// Appends `events` as a step of the orchestration (conditionally with `condition`):
/// exactly once, whatever crashes or replays. Resolves to the append's outcome, a conflict
/// included; bad events fail the step without retries.
pub fn append_events(
    ctx: &OrchestrationContext,
    events: Vec<NewEvent>,
    condition: Option<AppendCondition>,
) -> StepFuture<AppendOutcome> {
    let append = EventAppend {
        events,
        condition,
        idempotency_key: None,
    };
    ctx.activity(EVENTS_APPEND_ACTIVITY, append)
}

/// The key that makes a step's append happen once.
fn step_key(ctx: &ActivityContext) -> String {
    format!(
        "ratchet:step:{}:{}:{}",
        ctx.instance_id(),
        ctx.execution(),
        ctx.step()
    )
}

/// Registers the built-in append activity (unless the registry has one of that name). It
/// appends through the runtime's own event store, made on the first append.
pub(crate) fn register_append_activity(registry: &mut Registry, calls: Arc<Calls>) {
    if registry.has_activity(EVENTS_APPEND_ACTIVITY) {
        return;
    }
    registry.activity(
        EVENTS_APPEND_ACTIVITY,
        move |ctx: ActivityContext, mut append: EventAppend| {
            let events = calls.events();
            async move {
                append.idempotency_key = Some(step_key(&ctx));
                events.submit(append).await.map_err(|e| match e {
                    Error::InvalidInput(m) => ActivityError::non_retryable("InvalidEvents", m),
                    other => ActivityError::new("EventStore", other.to_string()),
                })
            }
        },
    );
}
