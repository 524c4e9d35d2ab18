//! Running one activity or task attempt and turning its result into a completion.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt as _};
use ratchet_core::{ActivityError, ActivityOptions, ErrorInfo, Timestamp};
use ratchet_store::{ClaimedTask, LeaseRelease, TaskCompletion, TaskResult};
use serde_json::Value;
use tokio::sync::watch;
use tracing::Instrument as _;

use crate::runtime::Shared;
use crate::{ActivityContext, TaskContext};

/// Attempts that one task runs together at most (see [`spawn_siblings`]).
const SIBLINGS_PER_TASK: usize = 16;

/// Runs `task` on its own task once a slot of its queue is free; the completion goes to the
/// group committer. Until then it waits in the prefetch buffer, its lease renewed like a
/// running one's; on shutdown it goes back to the queue instead.
pub(crate) fn spawn(shared: Arc<Shared>, task: ClaimedTask) {
    tokio::spawn(attempt(shared, task));
}

/// Runs the activities that one turn scheduled together, up to [`SIBLINGS_PER_TASK`] of
/// them on one task. Spawned one by one, siblings start apart: tokio runs the last task
/// spawned first and queues the others behind whatever waits on that thread, and siblings
/// that start apart finish apart, so that a straggler costs its instance a commit and a turn
/// of its own (one instance in eleven of a fan-out of five HTTP calls, measured). On one task
/// they start in one poll and their answers are taken in one wake-up. A task keeps to one
/// thread at a time, hence the bound: a wide fan-out still spreads over the runtime's
/// threads. A panic stays within its attempt (its handler's is caught), so a group fails
/// nothing together.
pub(crate) fn spawn_siblings(shared: &Arc<Shared>, tasks: Vec<ClaimedTask>) {
    let mut tasks = tasks.into_iter().peekable();
    while tasks.peek().is_some() {
        let mut group: FuturesUnordered<_> = tasks
            .by_ref()
            .take(SIBLINGS_PER_TASK)
            .map(|task| attempt(shared.clone(), task))
            .collect();
        tokio::spawn(async move { while group.next().await.is_some() {} });
    }
}

/// One attempt of `task`, held as running from now on (see [`spawn`]).
fn attempt(shared: Arc<Shared>, mut task: ClaimedTask) -> impl Future<Output = ()> {
    let cancelled = shared.capacity.running.hold(&task);
    let guard = shared.begin_work();
    async move {
        let _guard = guard;
        let Some(slots) = shared.capacity.slots(&task.queue) else {
            tracing::warn!(queue = %task.queue, "claimed a task of a queue this process does not work");
            return;
        };
        // Shutting down wins over a free slot: no attempt starts once it began.
        let permit = tokio::select! {
            biased;
            _ = shared.lifecycle.closed() => None,
            permit = slots.acquire_owned() => permit.ok(),
        };
        if permit.is_none() {
            give_back(&shared, &task).await;
            return;
        }
        if !shared.capacity.running.start(task.id) {
            return;
        }
        let started = std::time::Instant::now();
        let span = attempt_span(&task);
        let spent = attempts_spent(&task);
        let lost_attempt = spent.is_some();
        // The handler takes the input: nothing after the attempt reads it.
        let input = std::mem::take(&mut task.input);
        let result = match (&task.owner, spent) {
            (_, Some(lost)) => lost,
            (Some(_), None) => activity(&shared, &task, input).instrument(span).await,
            (None, None) => {
                standalone(&shared, &task, input, cancelled)
                    .instrument(span)
                    .await
            }
        };
        crate::metrics::attempt(
            task.owner.is_some(),
            &task.name,
            &task.queue,
            &result,
            started.elapsed(),
        );
        drop(permit);
        if shared.capacity.running.release(task.id) {
            let instance = task.owner.as_ref().map(|o| o.instance.clone());
            let mut completion = TaskCompletion::of(&task, result);
            if lost_attempt {
                // The claim said attempt max + 1 only to say the last one was lost; the row
                // (and so the dead letter, or the step's error) keeps the attempts that ran.
                completion.attempt = task.attempt - 1;
            }
            shared.committer.complete(completion, instance);
        }
    }
}

/// Returns an attempt that never started to the queue at once. The shutdown gives back the
/// prefetch buffer it finds, but a claim that was landing as it began hands its tasks over
/// just after: without this, they came back only when the shutdown grace ran out.
async fn give_back(shared: &Shared, task: &ClaimedTask) {
    if !shared.capacity.running.release(task.id) {
        return;
    }
    let release = LeaseRelease {
        tasks: vec![(task.id, task.fence)],
        instances: Vec::new(),
        now: shared.now(),
    };
    if let Err(e) = shared.store.lease_release(release).await {
        tracing::debug!(error = %e, "could not give an unstarted task back; its lease expires on its own");
    }
}

/// The attempt's span, in the trace its metadata names (set by the turn that scheduled an
/// activity, or by whoever enqueued a task).
fn attempt_span(task: &ClaimedTask) -> tracing::Span {
    let span = if let Some(owner) = &task.owner {
        tracing::info_span!("ratchet.activity", activity = %task.name, instance = %owner.instance,
            step = owner.seq, attempt = task.attempt)
    } else {
        tracing::info_span!("ratchet.task", task = %task.name, queue = %task.queue,
            id = task.id.0, attempt = task.attempt)
    };
    let traceparent = task
        .metadata
        .as_ref()
        .and_then(|m| m.get(crate::trace::TRACEPARENT))
        .and_then(Value::as_str);
    crate::trace::join(&span, traceparent);
    span
}

/// A takeover of an expired lease counts as an attempt. When the lost attempt was the last of
/// the budget, the claim says attempt max + 1 (the row keeps max) and the attempt is not run:
/// work that kills its worker every time (out of memory, a crash) ends as a dead letter, or
/// fails its orchestration step, after exactly its attempts, instead of being taken over
/// forever.
pub(crate) fn attempts_spent(task: &ClaimedTask) -> Option<TaskResult> {
    let max = task.options.retry.max_attempts.max(1);
    (task.attempt > max).then(|| {
        tracing::warn!(task = task.id.0, name = %task.name, attempt = task.attempt, max,
            "the worker of the last allowed attempt was lost; not running it again");
        TaskResult::Failed(ErrorInfo::new(
            "WorkerLost",
            format!(
                "the worker running attempt {} of {max} was lost (its lease expired) and no attempts are left",
                task.attempt - 1
            ),
        ))
    })
}

async fn activity(shared: &Shared, task: &ClaimedTask, input: Value) -> TaskResult {
    let (Some(f), Some(owner)) = (shared.registry.activity_fn(&task.name), &task.owner) else {
        return TaskResult::Failed(ErrorInfo::new(
            "UnknownActivity",
            format!("no activity named \"{}\" is registered", task.name),
        ));
    };
    let ctx = ActivityContext {
        task: task.id,
        name: task.name.clone(),
        instance: owner.instance.clone(),
        execution: owner.execution,
        step: owner.seq,
        attempt: task.attempt,
    };
    run(shared, task, "activity", f(ctx, input)).await
}

async fn standalone(
    shared: &Shared,
    task: &ClaimedTask,
    input: Value,
    mut cancelled: watch::Receiver<bool>,
) -> TaskResult {
    let Some(entry) = shared.registry.task_entry(&task.name) else {
        return TaskResult::Failed(ErrorInfo::new(
            "UnknownTask",
            format!("no task named \"{}\" is registered", task.name),
        ));
    };
    let ctx = TaskContext {
        id: task.id,
        name: task.name.clone(),
        queue: task.queue.clone(),
        attempt: task.attempt,
        metadata: task.metadata.clone(),
        cancelled: cancelled.clone(),
    };
    let handler = (entry.run)(ctx, input);
    // A cancelled task stops at its next await point: its future is dropped.
    tokio::select! {
        result = run(shared, task, "task", handler) => result,
        _ = cancelled.wait_for(|c| *c) => TaskResult::Cancelled,
    }
}

/// Runs a handler under the attempt's timeout, catching a panic, and decides what comes next
/// from its retry policy.
async fn run(
    shared: &Shared,
    task: &ClaimedTask,
    what: &str,
    handler: BoxFuture<'static, Result<Value, ActivityError>>,
) -> TaskResult {
    let timeout = task.options.start_to_close_timeout();
    let error = match tokio::time::timeout(timeout, AssertUnwindSafe(handler).catch_unwind()).await
    {
        Ok(Ok(Ok(output))) => {
            match output_refused(what, &task.name, &output, shared.config.max_payload_bytes) {
                Some(refused) => refused,
                None => return TaskResult::Completed(output),
            }
        }
        Ok(Ok(Err(e))) => e,
        Ok(Err(panic)) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| format!("the {what} panicked"));
            ActivityError::new("Panic", message)
        }
        Err(_) => ActivityError::new(
            "Timeout",
            format!(
                "attempt {} ran longer than its timeout of {timeout:?}",
                task.attempt
            ),
        ),
    };
    after_failure(error, &task.options, task.attempt, shared.now())
}

/// Why an attempt's output cannot be kept: over `max_bytes`, or nested too deep (a failure
/// no retry mends). `None` when it can.
pub(crate) fn output_refused(
    what: &str,
    name: &str,
    output: &Value,
    max_bytes: usize,
) -> Option<ActivityError> {
    let named = || format!("the output of {what} \"{name}\"");
    ratchet_core::limits::check_payload(named, output, max_bytes)
        .err()
        .map(|message| ActivityError::non_retryable("LimitExceeded", message))
}

/// What follows attempt `attempt` that failed with `error` at `now`: a snooze, the next
/// attempt at the time its retry policy gives, or the end of the task.
pub(crate) fn after_failure(
    mut error: ActivityError,
    options: &ActivityOptions,
    attempt: u32,
    now: Timestamp,
) -> TaskResult {
    // Whatever the code (or a remote worker) made of it, the error kept has limits.
    error.info = ratchet_core::limits::bounded_error(error.info);
    if let Some(delay) = error.snooze {
        return TaskResult::Snooze {
            at: now.plus(delay),
        };
    }
    if !error.retryable {
        return TaskResult::Failed(error.info);
    }
    let retry = &options.retry;
    match retry.delay_before(attempt + 1, &error.info.kind) {
        Some(delay) => {
            let delay = retry.jittered(delay, unit_random());
            tracing::debug!(attempt, error = %error, ?delay, "attempt failed; will retry");
            TaskResult::Retry {
                error: error.info,
                at: now.plus(delay),
            }
        }
        None => TaskResult::Failed(error.info),
    }
}

/// A random number in `[0, 1)`, for jitter.
fn unit_random() -> f64 {
    (uuid::Uuid::new_v4().as_u128() >> 75) as f64 / (1u64 << 53) as f64
}
