//! Starting another instance as a step of an orchestration, without waiting for it: what
//! a workflow started by events (`schedule.on`) needs. The step runs as the built-in
//! activity [`START_ACTIVITY`]; the new instance's id is the caller's to choose, and a start
//! repeated after a crash finds it made already, so each id starts one instance once.

use std::sync::Arc;

use ratchet_core::{ActivityError, OrchestrationContext, OrchestrationError};
use ratchet_store::{CreateOutcome, IfExists, NewInstance};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::Calls;
use crate::{ActivityContext, Registry};

/// The built-in activity that starts an instance for an orchestration.
pub const START_ACTIVITY: &str = "ratchet.instances.start";

/// What the start step takes.
#[derive(Serialize, Deserialize)]
struct Start {
    name: String,
    id: String,
    input: Value,
}

/// Starts orchestration `name` as instance `id` with `input`, as a step of `ctx`'s
/// orchestration, and does not wait for it: `true` when this step made it, `false` when an
/// instance with that id existed already (nothing changed then).
///
/// # Errors
///
/// The step's failure: a store out of reach through every retry, or a bad name or id.
pub async fn start_instance(
    ctx: &OrchestrationContext,
    name: &str,
    id: &str,
    input: Value,
) -> Result<bool, OrchestrationError> {
    ctx.activity(
        START_ACTIVITY,
        Start {
            name: name.to_string(),
            id: id.to_string(),
            input,
        },
    )
    .await
}

/// Registers the built-in start activity (unless the registry has it).
pub(crate) fn register_start_activity(registry: &mut Registry, calls: Arc<Calls>) {
    if registry.has_activity(START_ACTIVITY) {
        return;
    }
    registry.activity(
        START_ACTIVITY,
        move |_ctx: ActivityContext, start: Start| {
            let calls = calls.clone();
            async move {
                crate::client::validate_name("orchestration", &start.name)
                    .and_then(|()| crate::client::check_new_id(&start.id))
                    .map_err(|e| ActivityError::non_retryable("InvalidInput", e.to_string()))?;
                let new = NewInstance {
                    id: start.id,
                    name: start.name,
                    input: start.input,
                    parent: None,
                    if_exists: IfExists::UseExisting,
                    trace: None,
                };
                match calls.create(new, None).await {
                    Ok(Some(CreateOutcome::Created(_))) => Ok(true),
                    Ok(_) => Ok(false),
                    Err(e) => Err(ActivityError::new("Store", e.to_string())),
                }
            }
        },
    );
}
