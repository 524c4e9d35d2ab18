//! Appending events as an orchestration step, exactly once: the step runs as the built-in
//! activity [`EVENTS_APPEND_ACTIVITY`], whose append carries an idempotency key made of the
//! instance, its life (incarnation), execution and step. A retry after a crash (or a lost lease) finds the key and
//! returns the first append's positions, and the step's result is recorded in history once,
//! so replays never append again.

use std::sync::Arc;

use ratchet_core::{ActivityError, OrchestrationContext, StepFuture};
use ratchet_store::{AppendCondition, AppendOutcome, EventAppend, NewEvent};
use serde::{Deserialize, Serialize};

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
    let step = StepAppend {
        append: EventAppend {
            events,
            condition,
            idempotency_key: None,
        },
        incarnation: ctx.incarnation(),
    };
    ctx.activity(EVENTS_APPEND_ACTIVITY, step)
}

/// The built-in activity's input: the append, and the life of the instance id that asks
/// for it (an activity knows its instance, execution and step, but not which life).
#[derive(Serialize, Deserialize)]
struct StepAppend {
    #[serde(flatten)]
    append: EventAppend,
    #[serde(default)]
    incarnation: i64,
}

/// The key that makes a step's append happen once, in one life of the instance id.
fn step_key(ctx: &ActivityContext, incarnation: i64) -> String {
    format!(
        "ratchet:step:{}:{incarnation}:{}:{}",
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
        move |ctx: ActivityContext, step: StepAppend| {
            let events = calls.events();
            async move {
                let mut append = step.append;
                append.idempotency_key = Some(step_key(&ctx, step.incarnation));
                events.submit(append).await.map_err(|e| match e {
                    Error::InvalidInput(m) => ActivityError::non_retryable("InvalidEvents", m),
                    other => ActivityError::new("EventStore", other.to_string()),
                })
            }
        },
    );
}
