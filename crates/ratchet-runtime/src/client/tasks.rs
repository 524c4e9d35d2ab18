//! The client's side of standalone tasks: enqueue (one, many, or prepared for the caller's own
//! transaction), read, wait, cancel, retry, discard; pause, resume and limit queues.

use std::time::Duration;

use ratchet_core::limits::{check_duration, check_time, LimitError};
use ratchet_core::{TaskOptions, Timestamp};
use ratchet_store::{
    validate_queue_name, EnqueueOutcome, NewTask, QueueLimits, QueueStats, QueueUpdate, TaskAction,
    TaskActionOutcome, TaskFilter, TaskId, TaskRecord,
};
use serde::Serialize;
use serde_json::Value;

use super::{validate_name, Client};
use crate::{Error, Result};

/// One task to enqueue: its name, input and options.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRequest {
    /// The task's name, as its handler is registered.
    pub name: String,
    /// Its input.
    pub input: Value,
    /// Queue, priority, schedule, retries, unique key, metadata.
    pub options: TaskOptions,
}

impl TaskRequest {
    /// A request with default options.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the input does not serialize.
    pub fn new(name: &str, input: impl Serialize) -> Result<Self> {
        let input = serde_json::to_value(input)
            .map_err(|e| Error::InvalidInput(format!("input of task \"{name}\": {e}")))?;
        Ok(Self {
            name: name.to_string(),
            input,
            options: TaskOptions::default(),
        })
    }

    /// Sets the options.
    pub fn options(mut self, options: TaskOptions) -> Self {
        self.options = options;
        self
    }
}

/// Checks the times and durations of task options against the limits at the edge (a time
/// in the calendar, a duration of at most 100 years), naming the field as the HTTP API's
/// body does (`options.delay_ms`): so the time a task may run, now plus its delay, or any
/// retry after a backoff, is a time that can be written down.
///
/// # Errors
///
/// [`LimitError`] naming the first field at fault.
pub(crate) fn check_task_times(o: &TaskOptions) -> std::result::Result<(), LimitError> {
    let ms = |field: &str, ms: u64| check_duration(field, Duration::from_millis(ms));
    ms("options.delay_ms", o.delay_ms)?;
    if let Some(at) = o.run_at {
        check_time("options.run_at", at)?;
    }
    ms(
        "options.retry.initial_interval_ms",
        o.retry.initial_interval_ms,
    )?;
    ms("options.retry.max_interval_ms", o.retry.max_interval_ms)?;
    ms("options.timeout_ms", o.timeout_ms)
}

impl Client {
    /// Enqueues a task with default options (queue `default`).
    ///
    /// # Errors
    ///
    /// See [`Client::enqueue_many`].
    pub async fn enqueue(&self, name: &str, input: impl Serialize) -> Result<EnqueueOutcome> {
        self.enqueue_with(name, input, TaskOptions::default()).await
    }

    /// Enqueues a task. A task whose unique key an unfinished task holds is not enqueued: the
    /// outcome is [`EnqueueOutcome::Duplicate`] with that task's id.
    ///
    /// # Errors
    ///
    /// See [`Client::enqueue_many`].
    pub async fn enqueue_with(
        &self,
        name: &str,
        input: impl Serialize,
        options: TaskOptions,
    ) -> Result<EnqueueOutcome> {
        let request = TaskRequest::new(name, input)?.options(options);
        let mut outcomes = self.enqueue_many(vec![request]).await?;
        outcomes
            .pop()
            .ok_or_else(|| Error::InvalidInput("the store returned no outcome".into()))
    }

    /// Enqueues many tasks in one round trip, all or nothing: when any request is refused,
    /// none is enqueued.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownTask`] for a name this client's registry lacks,
    /// [`Error::InvalidInput`] for an input that does not decode as the handler's input, a bad
    /// queue name or unique key, [`Error::Limit`] for a time outside the calendar or a delay,
    /// timeout or retry interval over 100 years, [`Error::PayloadTooLarge`], or a store error.
    pub async fn enqueue_many(&self, requests: Vec<TaskRequest>) -> Result<Vec<EnqueueOutcome>> {
        let now = self.calls.now().await;
        let tasks = self.prepare_tasks_at(requests, now)?;
        let wakes_here = self.local.as_ref().is_some_and(|shared| {
            tasks
                .iter()
                .any(|t| shared.config.queues.contains_key(&t.queue))
        });
        let outcomes = self.calls.enqueue(tasks).await?;
        if wakes_here {
            if let Some(shared) = &self.local {
                shared.wake.work.notify_one();
            }
        }
        Ok(outcomes)
    }

    /// Checks requests and turns them into rows for a store, without enqueueing them: for
    /// enqueueing in the caller's own database transaction
    /// (`PostgresStore::task_enqueue_in`, `SqliteStore::task_enqueue_in`).
    ///
    /// # Errors
    ///
    /// As [`Client::enqueue_many`], store errors aside.
    pub fn prepare_tasks(&self, requests: Vec<TaskRequest>) -> Result<Vec<NewTask>> {
        self.prepare_tasks_at(requests, self.calls.clock().now())
    }

    fn prepare_tasks_at(&self, requests: Vec<TaskRequest>, now: Timestamp) -> Result<Vec<NewTask>> {
        requests
            .into_iter()
            .map(|r| {
                validate_name("task", &r.name)?;
                if let Some(registry) = &self.registry {
                    match registry.task_entry(&r.name) {
                        Some(entry) => (entry.check)(&r.input).map_err(|e| {
                            Error::InvalidInput(format!("input of task \"{}\": {e}", r.name))
                        })?,
                        None if self.unregistered_tasks => {}
                        None => return Err(Error::UnknownTask(r.name.clone())),
                    }
                }
                validate_queue_name(&r.options.queue).map_err(Error::InvalidInput)?;
                if let Some(key) = &r.options.unique_key {
                    if key.is_empty() || key.len() > 255 || key.chars().any(char::is_control) {
                        return Err(Error::InvalidInput(
                            "a unique key must be 1 to 255 bytes without control characters".into(),
                        ));
                    }
                }
                check_task_times(&r.options)?;
                let input = self.payload("the task input", &r.input)?;
                if let Some(metadata) = &r.options.metadata {
                    self.payload("the task metadata", metadata)?;
                }
                Ok(NewTask::standalone(r.name, input, &r.options, now))
            })
            .collect()
    }

    /// Reads a task, running or finished.
    ///
    /// # Errors
    ///
    /// [`Error::TaskNotFound`], or a store error.
    pub async fn task(&self, id: TaskId) -> Result<TaskRecord> {
        self.store
            .task_get(id, self.calls.now().await)
            .await?
            .ok_or_else(|| Error::TaskNotFound(id.0))
    }

    /// Lists standalone tasks, newest first.
    ///
    /// # Errors
    ///
    /// A store error.
    pub async fn tasks(&self, filter: TaskFilter) -> Result<Vec<TaskRecord>> {
        Ok(self.store.task_list(filter, self.calls.now().await).await?)
    }

    /// Lists standalone tasks, newest first, only those with an id below `before` when given:
    /// pass the last id of a page for the next one (keyset pagination, as cheap deep as
    /// shallow).
    ///
    /// # Errors
    ///
    /// A store error.
    pub async fn tasks_before(
        &self,
        filter: TaskFilter,
        before: Option<TaskId>,
    ) -> Result<Vec<TaskRecord>> {
        Ok(self
            .store
            .task_list_before(filter, before, self.calls.now().await)
            .await?)
    }

    /// Waits until a task finishes (completed, dead or cancelled), for at most `timeout`.
    /// Store errors on the way (a database restarting) do not end the wait before its deadline.
    ///
    /// # Errors
    ///
    /// [`Error::TaskNotFound`], [`Error::TaskTimeout`], or the store error of the last look.
    pub async fn task_wait(&self, id: TaskId, timeout: Duration) -> Result<TaskRecord> {
        let deadline = tokio::time::Instant::now() + timeout;
        let poll = self.poll_interval.min(Duration::from_millis(100));
        loop {
            match self.task(id).await {
                Ok(record) if record.state.is_finished() => return Ok(record),
                Ok(_) => {}
                // A database that is restarting does not end the wait: the next look may find
                // it back.
                Err(Error::Store(e)) if tokio::time::Instant::now() < deadline => {
                    tracing::debug!(task = id.0, error = %e, "could not read the task; will look again");
                }
                Err(e) => return Err(e),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::TaskTimeout(id.0));
            }
            tokio::time::sleep_until((tokio::time::Instant::now() + poll).min(deadline)).await;
        }
    }

    /// Cancels a task: a waiting one at once ([`TaskActionOutcome::Done`]), a running one when
    /// its worker next hears from the store ([`TaskActionOutcome::Requested`]).
    ///
    /// # Errors
    ///
    /// [`Error::TaskNotFound`], [`Error::TaskRefused`] for a finished task, or a store error.
    pub async fn task_cancel(&self, id: TaskId) -> Result<TaskActionOutcome> {
        self.task_act(id, TaskAction::Cancel, "cancel").await
    }

    /// Runs a dead (or cancelled) task again with a fresh budget of attempts.
    ///
    /// # Errors
    ///
    /// [`Error::TaskNotFound`], [`Error::TaskRefused`] for a task that is not dead or cancelled,
    /// or a store error.
    pub async fn task_retry(&self, id: TaskId) -> Result<()> {
        self.task_act(id, TaskAction::Retry, "retry").await?;
        if let Some(shared) = &self.local {
            shared.wake.work.notify_one();
        }
        Ok(())
    }

    /// Removes a finished task for good.
    ///
    /// # Errors
    ///
    /// [`Error::TaskNotFound`], [`Error::TaskRefused`] for an unfinished task, or a store error.
    pub async fn task_discard(&self, id: TaskId) -> Result<()> {
        self.task_act(id, TaskAction::Discard, "discard").await?;
        Ok(())
    }

    async fn task_act(
        &self,
        id: TaskId,
        action: TaskAction,
        verb: &'static str,
    ) -> Result<TaskActionOutcome> {
        let outcome = self
            .store
            .task_act(vec![id], action, self.calls.now().await)
            .await?
            .pop();
        match outcome {
            Some(outcome) => acted(id, outcome, verb),
            None => Err(Error::InvalidInput("the store returned no outcome".into())),
        }
    }

    /// Cancels, retries or discards many standalone tasks in one store call. Each applies or
    /// is refused alone: the outcomes follow `ids`, each as [`Client::task_cancel`],
    /// [`Client::task_retry`] or [`Client::task_discard`] gives it. A task named twice is
    /// acted on once, and both places get its outcome.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for more than 10,000 ids, or a store error (then none was
    /// acted on).
    pub async fn tasks_act(
        &self,
        ids: &[TaskId],
        action: TaskAction,
    ) -> Result<Vec<Result<TaskActionOutcome>>> {
        if ids.len() > MAX_TASKS_PER_ACTION {
            return Err(Error::InvalidInput(format!(
                "{} task ids; at most {MAX_TASKS_PER_ACTION} per action",
                ids.len()
            )));
        }
        // In id order, once each: the store locks the tasks one after another, and two
        // actions that lock the same tasks in the same order cannot deadlock.
        let mut unique = ids.to_vec();
        unique.sort_unstable();
        unique.dedup();
        let outcomes = if unique.is_empty() {
            Vec::new()
        } else {
            self.store
                .task_act(unique.clone(), action, self.calls.now().await)
                .await?
        };
        if outcomes.len() != unique.len() {
            return Err(Error::InvalidInput(format!(
                "the store returned {} outcomes for {} tasks",
                outcomes.len(),
                unique.len()
            )));
        }
        let verb = match action {
            TaskAction::Cancel => "cancel",
            TaskAction::Retry => "retry",
            TaskAction::Discard => "discard",
            _ => "act on",
        };
        if action == TaskAction::Retry && outcomes.contains(&TaskActionOutcome::Done) {
            if let Some(shared) = &self.local {
                shared.wake.work.notify_one();
            }
        }
        Ok(ids
            .iter()
            .map(|id| {
                // Found: `unique` holds every id.
                let at = unique.binary_search(id).unwrap_or_default();
                acted(*id, outcomes[at], verb)
            })
            .collect())
    }

    /// Pauses a queue in every process: no task of it starts until it is resumed. Running
    /// tasks finish.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad queue name, or a store error.
    pub async fn queue_pause(&self, queue: &str) -> Result<()> {
        self.queue_update(queue, Some(true), None).await
    }

    /// Resumes a paused queue.
    ///
    /// # Errors
    ///
    /// As [`Client::queue_pause`].
    pub async fn queue_resume(&self, queue: &str) -> Result<()> {
        self.queue_update(queue, Some(false), None).await?;
        if let Some(shared) = &self.local {
            shared.wake.work.notify_one();
        }
        Ok(())
    }

    /// Sets the limits of a queue that hold across every process (rate, burst, concurrency);
    /// `QueueLimits::default()` removes them.
    ///
    /// # Errors
    ///
    /// As [`Client::queue_pause`], and [`Error::InvalidInput`] for a rate that is not a
    /// positive number.
    pub async fn queue_limit(&self, queue: &str, limits: QueueLimits) -> Result<()> {
        if let Some(rate) = limits.rate_per_second {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(Error::InvalidInput(format!(
                    "a rate limit must be a positive number of tasks per second, got {rate}"
                )));
            }
        }
        if limits.burst == Some(0) || limits.concurrency == Some(0) {
            return Err(Error::InvalidInput(
                "burst and concurrency must be at least 1 (leave them unset for no limit)".into(),
            ));
        }
        self.queue_update(queue, None, Some(limits)).await
    }

    async fn queue_update(
        &self,
        queue: &str,
        paused: Option<bool>,
        limits: Option<QueueLimits>,
    ) -> Result<()> {
        validate_queue_name(queue).map_err(Error::InvalidInput)?;
        let update = QueueUpdate {
            queue: queue.to_string(),
            paused,
            limits,
        };
        Ok(self.store.queue_update(update).await?)
    }

    /// Every queue's settings and its tasks counted by state.
    ///
    /// # Errors
    ///
    /// A store error.
    pub async fn queues(&self) -> Result<Vec<QueueStats>> {
        Ok(self.store.queue_stats(self.calls.now().await).await?)
    }
}

/// The most tasks one [`Client::tasks_act`] acts on: one store call, its locks held together.
const MAX_TASKS_PER_ACTION: usize = 10_000;

/// A task action's outcome as the client reports it: a task not found, or one whose state
/// refuses the action, is an error naming it.
fn acted(id: TaskId, outcome: TaskActionOutcome, verb: &'static str) -> Result<TaskActionOutcome> {
    match outcome {
        TaskActionOutcome::NotFound => Err(Error::TaskNotFound(id.0)),
        TaskActionOutcome::Refused(state) => Err(Error::TaskRefused {
            id: id.0,
            action: verb,
            state,
        }),
        done => Ok(done),
    }
}
