//! Running one activity attempt and turning its result into a completion.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use ratchet_core::{ActivityError, ErrorInfo, Timestamp};
use ratchet_store::{ClaimedTask, TaskCompletion, TaskResult};

use crate::runtime::{RunningTask, Shared};
use crate::ActivityContext;

/// Runs `task` on its own task; the completion goes to the group committer.
pub(crate) fn spawn(shared: Arc<Shared>, task: ClaimedTask) {
    shared.running_lock().insert(
        task.id,
        RunningTask {
            fence: task.fence,
            instance: task.owner.instance.clone(),
        },
    );
    let guard = shared.begin_work();
    tokio::spawn(async move {
        let _guard = guard;
        let Ok(_permit) = shared.activity_slots.clone().acquire_owned().await else {
            return;
        };
        let result = attempt(&shared, &task).await;
        let still_ours = shared.running_lock().remove(&task.id).is_some();
        if still_ours {
            let instance = task.owner.instance.clone();
            shared
                .committer
                .complete(TaskCompletion::of(&task, result), instance);
        }
    });
}

async fn attempt(shared: &Shared, task: &ClaimedTask) -> TaskResult {
    let Some(f) = shared.registry.activity_fn(&task.name) else {
        return TaskResult::Failed(ErrorInfo::new(
            "UnknownActivity",
            format!("no activity named \"{}\" is registered", task.name),
        ));
    };
    let ctx = ActivityContext {
        task: task.id,
        name: task.name.clone(),
        instance: task.owner.instance.clone(),
        step: task.owner.seq,
        attempt: task.attempt,
    };
    let timeout = task.options.start_to_close_timeout();
    let run = AssertUnwindSafe(f(ctx, task.input.clone())).catch_unwind();
    let error = match tokio::time::timeout(timeout, run).await {
        Ok(Ok(Ok(output))) => {
            let size = serde_json::to_vec(&output).map(|b| b.len()).unwrap_or(0);
            if size <= shared.config.max_payload_bytes {
                return TaskResult::Completed(output);
            }
            ActivityError::non_retryable(
                "LimitExceeded",
                format!(
                    "the output of activity \"{}\" is {size} bytes, over the limit of {} bytes",
                    task.name, shared.config.max_payload_bytes
                ),
            )
        }
        Ok(Ok(Err(e))) => e,
        Ok(Err(panic)) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the activity panicked".into());
            ActivityError::new("Panic", message)
        }
        Err(_) => ActivityError::new(
            "Timeout",
            format!(
                "attempt {} ran longer than its start-to-close timeout of {timeout:?}",
                task.attempt
            ),
        ),
    };
    if !error.retryable {
        return TaskResult::Failed(error.info);
    }
    match task
        .options
        .retry
        .delay_before(task.attempt + 1, &error.info.kind)
    {
        Some(delay) => {
            tracing::debug!(activity = %task.name, attempt = task.attempt, error = %error, ?delay, "activity failed; will retry");
            TaskResult::Retry {
                error: error.info,
                at: Timestamp::now().plus(delay),
            }
        }
        None => TaskResult::Failed(error.info),
    }
}
