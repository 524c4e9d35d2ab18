//! The API as one trait: every edge (the server, the command line, the SDKs' native module)
//! calls it, in process on a client or over HTTP to a server, with the same types.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::events::{
    AppendInput, AppendedView, CloudEventsInput, EventPageView, EventView, QueryInput, ReadQuery,
    StreamQuery,
};
use crate::instances::{
    BatchItem, HistoryItem, HistoryPage, HistoryQuery, InstanceMessage, InstancePage,
    InstanceQuery, InstanceStreamQuery, InstanceView, PurgeRequest, Purged, Restarted,
    SignalRequest, Signalled, StartBatch, StartRequest, Started, StopRequest, WaitOutcome,
    WaitQuery, WriteParams,
};
use crate::problem::ApiError;
use crate::queues::{Done, Limits, QueueView};
use crate::schedules::{
    BackfillInput, DescribeQuery, DescriptionView, FireView, PauseInput, ScheduleInput,
    ScheduleView,
};
use crate::system::{Registry, Throughput, ThroughputParams, WhoAmI, WorkerView};
use crate::tasks::{
    Acted, ActedOn, EnqueueBatch, EnqueueRequest, Enqueued, ManyIds, TaskAct, TaskQuery, TaskView,
};
use crate::work::{
    ClaimBody, Claimed, CompleteBody, HeartbeatBody, Leases, ReleaseBody, Released, ReportedAll,
};
use crate::workflows::{AppliedView, Definition, DeleteQuery, ShowQuery, Valid, WorkflowView};

/// The operations of Ratchet's API. Each method is the OpenAPI operation of the same name
/// ([`crate::routes`] says where it is on a server); the in-process implementation is
/// `LocalApi` (feature `local`), the remote one `HttpApi` (feature `http`).
#[async_trait]
pub trait Api: Send + Sync {
    /// Starts an instance (`params.allow_unknown`: a server accepts a name no worker runs).
    async fn instances_start(
        &self,
        start: &StartRequest,
        params: WriteParams,
    ) -> Result<Started, ApiError>;

    /// Starts many; each reports its own outcome, and one bad item refuses the batch.
    async fn instances_start_batch(
        &self,
        batch: &StartBatch,
        params: WriteParams,
    ) -> Result<Vec<BatchItem>, ApiError>;

    /// A page of instances, newest first.
    async fn instances_list(&self, query: &InstanceQuery) -> Result<InstancePage, ApiError>;

    /// One instance.
    async fn instances_show(&self, id: &str) -> Result<InstanceView, ApiError>;

    /// A page of an instance's history.
    async fn instances_history(
        &self,
        id: &str,
        query: &HistoryQuery,
    ) -> Result<HistoryPage, ApiError>;

    /// Raises a signal (`raised` is false when its dedup id was used before).
    async fn instances_signal(
        &self,
        id: &str,
        signal: &SignalRequest,
    ) -> Result<Signalled, ApiError>;

    /// Asks an instance to cancel: its code may clean up.
    async fn instances_cancel(&self, id: &str, stop: &StopRequest) -> Result<(), ApiError>;

    /// Stops an instance at once.
    async fn instances_terminate(&self, id: &str, stop: &StopRequest) -> Result<(), ApiError>;

    /// One long poll: the outcome once finished, or where it stands at the timeout.
    async fn instances_wait(&self, id: &str, query: WaitQuery) -> Result<WaitOutcome, ApiError>;

    /// Starts a finished instance afresh under its id, name and input.
    async fn instances_restart(&self, id: &str) -> Result<Restarted, ApiError>;

    /// Removes instances that finished before a time, with their histories.
    async fn instances_purge(&self, purge: &PurgeRequest) -> Result<Purged, ApiError>;

    /// Enqueues a task.
    async fn tasks_enqueue(
        &self,
        task: &EnqueueRequest,
        params: WriteParams,
    ) -> Result<Enqueued, ApiError>;

    /// Enqueues many, all or nothing.
    async fn tasks_enqueue_batch(
        &self,
        batch: &EnqueueBatch,
        params: WriteParams,
    ) -> Result<Vec<Enqueued>, ApiError>;

    /// Tasks, newest first.
    async fn tasks_list(&self, query: &TaskQuery) -> Result<Vec<TaskView>, ApiError>;

    /// One task.
    async fn tasks_show(&self, id: i64) -> Result<TaskView, ApiError>;

    /// One long poll: the task once finished, or as it stands at the timeout.
    async fn tasks_wait(&self, id: i64, query: WaitQuery) -> Result<TaskView, ApiError>;

    /// Cancels, retries or discards a task (`tasks_cancel`, `tasks_retry`, `tasks_discard`).
    async fn tasks_act(&self, id: i64, act: TaskAct) -> Result<Acted, ApiError>;

    /// The same on many tasks in one call; each applies or is refused alone
    /// (`tasks_act_many_cancel`, `..._retry`, `..._discard`).
    async fn tasks_act_many(&self, ids: &ManyIds, act: TaskAct) -> Result<Vec<ActedOn>, ApiError>;

    /// Every queue, with its depths by state.
    async fn queues_list(&self) -> Result<Vec<QueueView>, ApiError>;

    /// Pauses a queue everywhere.
    async fn queues_pause(&self, name: &str) -> Result<Done, ApiError>;

    /// Resumes a queue.
    async fn queues_resume(&self, name: &str) -> Result<Done, ApiError>;

    /// Replaces a queue's limits (none given: none kept).
    async fn queues_limit(&self, name: &str, limits: &Limits) -> Result<Done, ApiError>;

    /// Every schedule, by name.
    async fn schedules_list(&self) -> Result<Vec<ScheduleView>, ApiError>;

    /// Creates a schedule (named in `input`); its first tick is the first after now.
    async fn schedules_create(&self, input: &ScheduleInput) -> Result<ScheduleView, ApiError>;

    /// A schedule, its next ticks and its latest fires with their runs' status.
    async fn schedules_describe(
        &self,
        name: &str,
        query: DescribeQuery,
    ) -> Result<DescriptionView, ApiError>;

    /// Replaces a schedule's spec, action and policies, keeping its progress.
    async fn schedules_update(
        &self,
        name: &str,
        input: &ScheduleInput,
    ) -> Result<ScheduleView, ApiError>;

    /// Deletes a schedule and its fire records (runs it started go on).
    async fn schedules_delete(&self, name: &str) -> Result<(), ApiError>;

    /// Pauses a schedule: nothing fires until it is resumed.
    async fn schedules_pause(
        &self,
        name: &str,
        input: &PauseInput,
    ) -> Result<ScheduleView, ApiError>;

    /// Resumes a schedule from its next tick.
    async fn schedules_resume(&self, name: &str) -> Result<ScheduleView, ApiError>;

    /// Fires a schedule now, whatever its spec, pause or overlap policy.
    async fn schedules_trigger(&self, name: &str) -> Result<FireView, ApiError>;

    /// Fires each tick of a past range that started no run yet, once.
    async fn schedules_backfill(
        &self,
        name: &str,
        input: &BackfillInput,
    ) -> Result<Vec<FireView>, ApiError>;

    /// Appends events together, all or none; a failed condition is a 409 problem whose
    /// `position` is the event that matched it.
    async fn events_append(&self, append: &AppendInput) -> Result<AppendedView, ApiError>;

    /// Appends CloudEvents (one or a batch) as events.
    async fn events_append_cloudevents(
        &self,
        events: &CloudEventsInput,
    ) -> Result<AppendedView, ApiError>;

    /// A page of events of one query item, given in the query string.
    async fn events_read(&self, query: &ReadQuery) -> Result<EventPageView, ApiError>;

    /// A page of events of a query of many items.
    async fn events_query(&self, query: &QueryInput) -> Result<EventPageView, ApiError>;

    /// Every matching event after the start, then each new one as it is appended. A read
    /// that fails (the database or the server out of reach) is an item of the stream, which
    /// carries on after it, resuming after the last event it gave.
    async fn events_stream(
        &self,
        query: &StreamQuery,
    ) -> Result<BoxStream<'static, Result<EventView, ApiError>>, ApiError>;

    /// Every stored version of every declarative workflow, by name and revision.
    async fn workflows_list(&self) -> Result<Vec<WorkflowView>, ApiError>;

    /// Stores a definition as a new revision (`created` is false when the same source was
    /// stored already).
    async fn workflows_apply(&self, definition: &Definition) -> Result<AppliedView, ApiError>;

    /// Checks that a definition compiles; nothing is stored.
    async fn workflows_validate(&self, definition: &Definition) -> Result<Valid, ApiError>;

    /// A stored version with its source (default: the newest).
    async fn workflows_show(
        &self,
        namespace: &str,
        name: &str,
        query: &ShowQuery,
    ) -> Result<WorkflowView, ApiError>;

    /// Deletes a workflow's versions (or one), never from under unfinished instances unless
    /// forced: the versions deleted.
    async fn workflows_delete(
        &self,
        namespace: &str,
        name: &str,
        query: &DeleteQuery,
    ) -> Result<Vec<WorkflowView>, ApiError>;

    /// An instance live: the instance (again whenever it changes), each history event after
    /// the start, and an end once it finished and its whole history was given. A look that
    /// fails is an item of the stream, which carries on after it.
    async fn instances_stream(
        &self,
        id: &str,
        query: &InstanceStreamQuery,
    ) -> Result<BoxStream<'static, Result<InstanceMessage, ApiError>>, ApiError>;

    /// Claims attempts for `worker`: ready ones at once, else the first that become ready
    /// within `wait_ms`.
    async fn workers_claim(&self, worker: &str, body: &ClaimBody) -> Result<Claimed, ApiError>;

    /// Renews the leases of attempts `worker` runs; says of each whether it holds, was lost,
    /// or should stop because a client cancelled its task.
    async fn workers_heartbeat(
        &self,
        worker: &str,
        body: &HeartbeatBody,
    ) -> Result<Leases, ApiError>;

    /// Reports how attempts ended, in one commit: each applied, or refused when its lease was
    /// lost.
    async fn workers_complete(
        &self,
        worker: &str,
        body: &CompleteBody,
    ) -> Result<ReportedAll, ApiError>;

    /// Gives attempts `worker` will not run back to their queues at once; they count no
    /// attempt.
    async fn workers_release(&self, worker: &str, body: &ReleaseBody)
        -> Result<Released, ApiError>;

    /// Alive: the process answers (`ok`).
    async fn system_health(&self) -> Result<String, ApiError>;

    /// Ready: the database answers (`ready`), or a 503 problem.
    async fn system_ready(&self) -> Result<String, ApiError>;

    /// What the answering process's runtime runs.
    async fn system_registry(&self) -> Result<Registry, ApiError>;

    /// Who asks, and what they may do.
    async fn system_whoami(&self) -> Result<WhoAmI, ApiError>;

    /// Every process that said it is alive, most recently seen first.
    async fn system_workers(&self) -> Result<Vec<WorkerView>, ApiError>;

    /// Instances and tasks started, completed and failed per bucket of time.
    async fn system_throughput(&self, params: ThroughputParams) -> Result<Throughput, ApiError>;

    /// The graph of an instance's current execution, drawn from its history: an SVG.
    async fn instances_graph(&self, id: &str) -> Result<String, ApiError>;

    /// The graph of a stored workflow version: an SVG.
    async fn workflows_graph(
        &self,
        namespace: &str,
        name: &str,
        version: &str,
    ) -> Result<String, ApiError>;

    /// Waits up to `timeout` for an instance to finish, a long poll after another (a server
    /// holds one for a minute at most).
    async fn instances_wait_until(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<WaitOutcome, ApiError> {
        let deadline = Instant::now() + timeout;
        loop {
            let asked = Instant::now();
            let left = deadline.saturating_duration_since(asked);
            let query = WaitQuery {
                timeout_ms: Some(u64::try_from(left.as_millis()).unwrap_or(u64::MAX)),
            };
            let outcome = self.instances_wait(id, query).await?;
            if outcome.finished {
                return Ok(outcome);
            }
            if Instant::now() >= deadline {
                return Err(ApiError::Timeout(format!("instance {id:?}")));
            }
            pause_if_early(asked, left).await;
        }
    }

    /// Waits up to `timeout` for a task to finish, a long poll after another.
    async fn tasks_wait_until(&self, id: i64, timeout: Duration) -> Result<TaskView, ApiError> {
        let deadline = Instant::now() + timeout;
        loop {
            let asked = Instant::now();
            let left = deadline.saturating_duration_since(asked);
            let query = WaitQuery {
                timeout_ms: Some(u64::try_from(left.as_millis()).unwrap_or(u64::MAX)),
            };
            let task = self.tasks_wait(id, query).await?;
            if task.state.is_finished() {
                return Ok(task);
            }
            if Instant::now() >= deadline {
                return Err(ApiError::Timeout(format!("task {id}")));
            }
            pause_if_early(asked, left).await;
        }
    }

    /// An instance's whole history, a page after another.
    async fn instances_history_all(&self, id: &str) -> Result<Vec<HistoryItem>, ApiError> {
        let mut all = Vec::new();
        let mut query = HistoryQuery::default();
        loop {
            let page = self.instances_history(id, &query).await?;
            all.extend(page.items);
            match page.next {
                Some(next) => query.after = Some(next),
                None => return Ok(all),
            }
        }
    }
}

/// A long poll that answered unfinished well before its timeout (a server stopping, or one
/// that holds polls for less): a pause before the next, so a wait never spins.
async fn pause_if_early(asked: Instant, asked_for: Duration) {
    let took = asked.elapsed();
    if took < asked_for / 2 && took < Duration::from_millis(100) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
