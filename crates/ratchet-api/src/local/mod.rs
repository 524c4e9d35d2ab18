//! The API in process: [`LocalApi`] answers each operation on a [`Client`], with the types and
//! problems a server answers with (a server is this, behind HTTP).

use std::time::Duration;

use async_trait::async_trait;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ratchet_core::Timestamp;
use ratchet_runtime::{Client, Error, StartOptions, TaskRequest};
use ratchet_store::{
    EnqueueOutcome, IfExists, InstanceFilter, InstanceRecord, InstanceStatus, QueueLimits,
    QueueStats, StoreError, TaskAction, TaskActionOutcome, TaskFilter, TaskId, TaskRecord,
    TaskState,
};
use serde_json::Value;

use crate::api::Api;
use crate::events::{
    AppendInput, AppendedView, CloudEventsInput, EventPageView, EventView, QueryInput, ReadQuery,
    StreamQuery,
};
use crate::instances::{
    BatchItem, HistoryItem, HistoryPage, HistoryQuery, IfExistsParam, InstanceMessage,
    InstancePage, InstanceQuery, InstanceStreamQuery, InstanceView, ParentView, PurgeRequest,
    Purged, Restarted, SignalRequest, Signalled, StartBatch, StartRequest, Started, StopRequest,
    WaitOutcome, WaitQuery, WriteParams,
};
use crate::problem::{ApiError, ProblemBody};
use crate::queues::{Done, Limits, QueueView};
use crate::schedules::{
    BackfillInput, DescribeQuery, DescriptionView, FireView, PauseInput, ScheduleInput,
    ScheduleView,
};
use crate::system::{Registry, Throughput, ThroughputParams, WhoAmI, WorkerView};
use crate::tasks::{
    ActOutcome, Acted, ActedOn, EnqueueBatch, EnqueueRequest, Enqueued, ManyIds, TaskAct,
    TaskQuery, TaskView,
};
use crate::time::{parse_rfc3339, rfc3339};
use crate::work::{
    ClaimBody, Claimed, CompleteBody, HeartbeatBody, Leases, ReleaseBody, Released, ReportedAll,
};
use crate::workflows::{AppliedView, Definition, DeleteQuery, ShowQuery, Valid, WorkflowView};

mod events;
mod instance_stream;
mod schedules;
mod system;
mod work;
mod workflows;

pub use events::{one_item, position, to_query};
pub use work::{
    claim as worker_claim, complete as worker_complete, keys as lease_keys, MAX_CLAIM_WAIT,
};
pub use workflows::{
    apply as workflow_apply, compile as workflow_compile, validate as workflow_validate,
};

/// The most a page holds, as a server's default limit.
pub const MAX_PAGE: u32 = 1000;

/// A wait's hold when none is asked (as a server's).
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// The API on a client, in this process.
#[derive(Clone)]
pub struct LocalApi {
    client: Client,
}

impl LocalApi {
    /// The API on `client`.
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    /// The client it calls.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Task requests as the client takes them, each checked alone so that a refusal names
    /// the item at fault (`tasks[3].options.priority`; no prefix: the field alone).
    pub fn task_requests(
        &self,
        items: Vec<EnqueueRequest>,
        prefix: &str,
    ) -> Result<Vec<TaskRequest>, ApiError> {
        let at = |i: usize, field: Option<&str>| {
            let item = if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}[{i}]")
            };
            match field {
                Some(f) if item.is_empty() => f.to_string(),
                Some(f) => format!("{item}.{f}"),
                None => item,
            }
        };
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let options = item.options.into_options().map_err(|e| {
                    e.refield(|f| {
                        at(
                            i,
                            Some(&f.map_or_else(|| "options".into(), |f| format!("options.{f}"))),
                        )
                    })
                })?;
                let request = TaskRequest {
                    name: item.name,
                    input: item.input,
                    options,
                };
                self.client
                    .prepare_tasks(vec![request.clone()])
                    .map_err(|e| problem(e).refield(|f| at(i, f)))?;
                Ok(request)
            })
            .collect()
    }

    /// The options of a start (`trace`: the W3C context it carries, if any).
    pub fn start_options(start: &StartRequest, trace: Option<String>) -> StartOptions {
        StartOptions {
            id: start.id.clone(),
            if_exists: match start.if_exists {
                IfExistsParam::Fail => IfExists::Fail,
                IfExistsParam::UseExisting => IfExists::UseExisting,
                IfExistsParam::RestartIfFinished => IfExists::RestartIfFinished,
            },
            trace,
        }
    }

    /// Checks every start of a batch before any is written, naming the item at fault.
    pub fn check_batch(&self, batch: &StartBatch) -> Result<(), ApiError> {
        for (i, start) in batch.instances.iter().enumerate() {
            self.client
                .check_start(&start.name, &start.input, &Self::start_options(start, None))
                .map_err(|e| {
                    problem(e).refield(|f| match f {
                        Some(f) => format!("instances[{i}].{f}"),
                        None => format!("instances[{i}]"),
                    })
                })?;
        }
        Ok(())
    }

    /// Starts a checked batch (see [`LocalApi::check_batch`]) concurrently, so the client
    /// merges the starts into as few store calls as it can; each reports its own outcome.
    pub async fn start_checked(&self, batch: &StartBatch, trace: Option<String>) -> Vec<BatchItem> {
        let starts = batch.instances.iter().map(|start| {
            self.client.start_with(
                &start.name,
                &start.input,
                Self::start_options(start, trace.clone()),
            )
        });
        futures::future::join_all(starts)
            .await
            .into_iter()
            .map(|o| match o {
                Ok(handle) => BatchItem {
                    id: Some(handle.id().to_string()),
                    problem: None,
                },
                Err(e) => BatchItem {
                    id: None,
                    problem: Some(e.into()),
                },
            })
            .collect()
    }

    /// A start carrying a trace context.
    pub async fn start_traced(
        &self,
        start: &StartRequest,
        trace: Option<String>,
    ) -> Result<Started, ApiError> {
        let handle = self
            .client
            .start_with(&start.name, &start.input, Self::start_options(start, trace))
            .await
            .map_err(problem)?;
        Ok(Started {
            id: handle.id().to_string(),
        })
    }
}

/// A value refused, naming its field.
fn invalid<T>(parsed: Result<T, String>, field: &str) -> Result<T, ApiError> {
    parsed.map_err(|e| ProblemBody::invalid(e).field(field).into())
}

fn problem(e: Error) -> ApiError {
    ApiError::from(ProblemBody::from(e))
}

/// A page size asked for (1 to [`MAX_PAGE`]), or `default`.
fn page_size(asked: Option<u32>, default: u32) -> Result<u32, ApiError> {
    match asked {
        None => Ok(default),
        Some(0) => Err(ProblemBody::invalid("limit must be at least 1")
            .field("limit")
            .into()),
        Some(n) if n > MAX_PAGE => Err(ProblemBody::invalid(format!(
            "limit {n} is over the most of {MAX_PAGE}"
        ))
        .field("limit")
        .limit(u64::from(MAX_PAGE))
        .into()),
        Some(n) => Ok(n),
    }
}

/// A list of values given comma-separated in one query parameter.
pub fn comma_list(text: Option<&str>) -> Vec<String> {
    text.map(|t| {
        t.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    })
    .unwrap_or_default()
}

/// An instance list's cursor: the last instance's creation time and id, opaque to clients.
pub fn encode_cursor(at: Timestamp, id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{}/{id}", at.as_millis()))
}

/// A cursor [`encode_cursor`] gave.
pub fn decode_cursor(text: &str) -> Result<(Timestamp, String), ApiError> {
    let bad =
        || ApiError::from(ProblemBody::invalid("not a cursor this server gave").field("cursor"));
    let raw = URL_SAFE_NO_PAD.decode(text).map_err(|_| bad())?;
    let raw = String::from_utf8(raw).map_err(|_| bad())?;
    let (at, id) = raw.split_once('/').ok_or_else(bad)?;
    Ok((Timestamp(at.parse().map_err(|_| bad())?), id.to_string()))
}

/// A history position as `next` gives it: `execution.seq`.
pub fn parse_position(text: &str) -> Result<(u32, u32), ApiError> {
    text.split_once('.')
        .and_then(|(e, s)| Some((e.parse().ok()?, s.parse().ok()?)))
        .ok_or_else(|| {
            ProblemBody::invalid(format!(
                "{text:?} is not a history position (execution.seq, as `next` gives it)"
            ))
            .field("after")
            .into()
        })
}

impl InstanceQuery {
    /// The store's filter, with one more than the page (which tells whether a next exists).
    pub fn filter(&self, limit: u32) -> Result<InstanceFilter, ApiError> {
        let statuses = comma_list(self.status.as_deref())
            .iter()
            .map(|s| s.parse::<InstanceStatus>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ProblemBody::invalid(e).field("status"))?;
        let time = |text: &Option<String>, field: &str| {
            text.as_deref()
                .map(|t| invalid(parse_rfc3339(t), field))
                .transpose()
        };
        Ok(InstanceFilter {
            statuses,
            name: self.name.clone(),
            created_after: time(&self.created_after, "created_after")?,
            created_before: time(&self.created_before, "created_before")?,
            limit: Some(limit.saturating_add(1)),
            after: self.cursor.as_deref().map(decode_cursor).transpose()?,
            custom_status: self
                .custom_status
                .clone()
                .map(|text| serde_json::from_str(&text).unwrap_or(Value::String(text))),
            id_prefix: self.id_prefix.clone(),
        })
    }
}

impl TaskQuery {
    /// The store's filter of a page of `limit`.
    pub fn filter(&self, limit: u32) -> Result<TaskFilter, ApiError> {
        let states = comma_list(self.state.as_deref())
            .iter()
            .map(|s| s.parse::<TaskState>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ProblemBody::invalid(e).field("state"))?;
        Ok(TaskFilter {
            queue: self.queue.clone(),
            states,
            name: self.name.clone(),
            limit: Some(limit),
        })
    }
}

impl From<InstanceRecord> for InstanceView {
    fn from(r: InstanceRecord) -> Self {
        Self {
            parent: r.parent.map(|p| ParentView {
                instance: p.instance,
                execution: p.execution,
                seq: p.seq,
            }),
            id: r.id,
            name: r.name,
            version: r.version,
            status: r.status,
            execution: r.execution,
            input: r.input,
            output: r.output,
            error: r.error,
            custom_status: r.custom_status,
            history_len: r.history_len,
            created_at: rfc3339(r.created_at),
            updated_at: rfc3339(r.updated_at),
            finished_at: r.finished_at.map(rfc3339),
        }
    }
}

impl From<TaskRecord> for TaskView {
    fn from(t: TaskRecord) -> Self {
        Self {
            id: t.id.0,
            queue: t.queue,
            name: t.name,
            state: t.state,
            priority: t.priority,
            attempt: t.attempt,
            max_attempts: t.max_attempts,
            input: t.input,
            output: t.output,
            error: t.error,
            unique_key: t.unique_key,
            metadata: t.metadata,
            created_at: rfc3339(t.created_at),
            run_at: rfc3339(t.visible_at),
            finished_at: t.finished_at.map(rfc3339),
        }
    }
}

impl From<QueueStats> for QueueView {
    fn from(q: QueueStats) -> Self {
        Self {
            depth: q.depth(),
            counts: TaskState::ALL
                .iter()
                .map(|s| (s.as_str().to_lowercase(), q.count(*s)))
                .collect(),
            oldest_available: q.oldest_available.map(rfc3339),
            name: q.queue,
            paused: q.paused,
            limits: Limits {
                rate_per_second: q.limits.rate_per_second,
                burst: q.limits.burst,
                concurrency: q.limits.concurrency,
            },
        }
    }
}

impl From<EnqueueOutcome> for Enqueued {
    fn from(o: EnqueueOutcome) -> Self {
        Self {
            id: o.id().0,
            duplicate: matches!(o, EnqueueOutcome::Duplicate(_)),
        }
    }
}

impl From<TaskActionOutcome> for ActOutcome {
    fn from(o: TaskActionOutcome) -> Self {
        match o {
            TaskActionOutcome::Requested => Self::Requested,
            _ => Self::Done,
        }
    }
}

impl From<TaskAct> for TaskAction {
    fn from(a: TaskAct) -> Self {
        match a {
            TaskAct::Cancel => Self::Cancel,
            TaskAct::Retry => Self::Retry,
            TaskAct::Discard => Self::Discard,
        }
    }
}

impl From<Error> for ProblemBody {
    fn from(e: Error) -> Self {
        let detail = e.to_string();
        match e {
            Error::NotFound(_) | Error::TaskNotFound(_) => Self::not_found(detail),
            Error::AlreadyExists { .. } => {
                Self::conflict("already-exists", "Instance already exists", detail).field("id")
            }
            Error::Finished { .. } => {
                Self::conflict("finished", "Instance already finished", detail)
            }
            Error::UnknownOrchestration(_) | Error::UnknownTask(_) => Self::new(
                422,
                "unknown-name",
                "Nothing registered under this name",
                detail,
            )
            .field("name"),
            Error::TaskRefused { .. } => {
                Self::conflict("task-state", "Not possible in the task's state", detail)
            }
            Error::InvalidInput(_) | Error::Decode { .. } => Self::invalid(detail),
            Error::Limit(limit) => Self::invalid(detail).field(limit.field),
            Error::PayloadTooLarge { limit, .. } => Self::too_large(detail, limit as u64),
            Error::AppendConflict { position } => {
                Self::conflict("append-conflict", "Append condition failed", detail)
                    .position(position.0)
            }
            Error::Timeout(_) | Error::TaskTimeout(_) => {
                Self::new(408, "timeout", "Timed out", detail)
            }
            Error::ScheduleNotFound(_) => Self::not_found(detail),
            Error::ScheduleExists(_) => {
                Self::conflict("schedule-exists", "Schedule already exists", detail).field("name")
            }
            Error::InvalidSchedule { field, .. } => Self::invalid(detail).field(field),
            Error::Store(store) => Self::from(store),
            Error::Closed => Self::unavailable(detail),
            _ => Self::internal(detail),
        }
    }
}

impl From<StoreError> for ProblemBody {
    fn from(e: StoreError) -> Self {
        let detail = e.to_string();
        match e {
            StoreError::NotFound(_) => Self::not_found(detail),
            StoreError::Invalid(_) => Self::invalid(detail),
            StoreError::AlreadyExists { .. } => {
                Self::conflict("already-exists", "Instance already exists", detail)
            }
            StoreError::InUse { .. } => {
                Self::conflict("workflow-in-use", "Workflow in use", detail)
            }
            StoreError::Closed | StoreError::Backend(_) => Self::unavailable(detail),
            _ => Self::internal(detail),
        }
    }
}

#[async_trait]
impl Api for LocalApi {
    async fn instances_start(
        &self,
        start: &StartRequest,
        _params: WriteParams,
    ) -> Result<Started, ApiError> {
        self.start_traced(start, None).await
    }

    async fn instances_start_batch(
        &self,
        batch: &StartBatch,
        _params: WriteParams,
    ) -> Result<Vec<BatchItem>, ApiError> {
        self.check_batch(batch)?;
        Ok(self.start_checked(batch, None).await)
    }

    async fn instances_list(&self, query: &InstanceQuery) -> Result<InstancePage, ApiError> {
        let limit = page_size(query.limit, 100)?;
        let mut records = self
            .client
            .list(query.filter(limit)?)
            .await
            .map_err(problem)?;
        let more = records.len() > limit as usize;
        records.truncate(limit as usize);
        let next = more
            .then(|| records.last().map(|r| encode_cursor(r.created_at, &r.id)))
            .flatten();
        Ok(InstancePage {
            items: records.into_iter().map(InstanceView::from).collect(),
            next,
        })
    }

    async fn instances_show(&self, id: &str) -> Result<InstanceView, ApiError> {
        Ok(self.client.status(id).await.map_err(problem)?.into())
    }

    async fn instances_history(
        &self,
        id: &str,
        query: &HistoryQuery,
    ) -> Result<HistoryPage, ApiError> {
        let limit = page_size(query.limit, MAX_PAGE)?;
        let after = query.after.as_deref().map(parse_position).transpose()?;
        // One more than asked, to know whether a next page exists.
        let mut page = self
            .client
            .history_page(id, after, limit.saturating_add(1))
            .await
            .map_err(problem)?;
        let more = page.len() > limit as usize;
        page.truncate(limit as usize);
        let next = more
            .then(|| page.last().map(|r| format!("{}.{}", r.execution, r.seq)))
            .flatten();
        let items = page
            .into_iter()
            .map(|r| HistoryItem {
                execution: r.execution,
                seq: r.seq,
                event: r.event,
            })
            .collect();
        Ok(HistoryPage { items, next })
    }

    async fn instances_signal(
        &self,
        id: &str,
        signal: &SignalRequest,
    ) -> Result<Signalled, ApiError> {
        let raised = match &signal.dedup_id {
            Some(dedup) => self
                .client
                .signal_once(id, &signal.name, &signal.payload, dedup)
                .await
                .map_err(problem)?,
            None => {
                self.client
                    .signal(id, &signal.name, &signal.payload)
                    .await
                    .map_err(problem)?;
                true
            }
        };
        Ok(Signalled { raised })
    }

    async fn instances_cancel(&self, id: &str, stop: &StopRequest) -> Result<(), ApiError> {
        let reason = stop
            .reason
            .as_deref()
            .unwrap_or("cancelled through the API");
        self.client.cancel(id, reason).await.map_err(problem)
    }

    async fn instances_terminate(&self, id: &str, stop: &StopRequest) -> Result<(), ApiError> {
        let reason = stop
            .reason
            .as_deref()
            .unwrap_or("terminated through the API");
        self.client.terminate(id, reason).await.map_err(problem)
    }

    async fn instances_wait(&self, id: &str, query: WaitQuery) -> Result<WaitOutcome, ApiError> {
        let timeout = query.timeout_ms.map_or(DEFAULT_WAIT, Duration::from_millis);
        match self.client.wait(id, timeout).await {
            Ok(o) => Ok(WaitOutcome {
                id: o.id,
                finished: true,
                status: o.status,
                output: o.output,
                error: o.error,
            }),
            Err(Error::Timeout(_)) => self.instance_outcome(id).await,
            Err(e) => Err(problem(e)),
        }
    }

    async fn instances_restart(&self, id: &str) -> Result<Restarted, ApiError> {
        let record = self.client.status(id).await.map_err(problem)?;
        if !record.status.is_finished() {
            return Err(ProblemBody::conflict(
                "running",
                "Instance still running",
                format!(
                    "instance {id:?} is {}: only a finished one restarts",
                    record.status
                ),
            )
            .into());
        }
        let options = StartOptions::id(id.to_string()).if_exists(IfExists::RestartIfFinished);
        self.client
            .start_with(&record.name, &record.input, options)
            .await
            .map_err(problem)?;
        Ok(Restarted { id: id.to_string() })
    }

    async fn instances_purge(&self, purge: &PurgeRequest) -> Result<Purged, ApiError> {
        let before = invalid(parse_rfc3339(&purge.finished_before), "finished_before")?;
        let removed = self
            .client
            .store()
            .instance_purge(before)
            .await
            .map_err(|e| ApiError::from(ProblemBody::from(e)))?;
        Ok(Purged { removed })
    }

    async fn tasks_enqueue(
        &self,
        task: &EnqueueRequest,
        _params: WriteParams,
    ) -> Result<Enqueued, ApiError> {
        let requests = self.task_requests(vec![task.clone()], "")?;
        self.enqueue_checked(requests)
            .await?
            .pop()
            .ok_or_else(|| ProblemBody::internal("the store returned no outcome").into())
    }

    async fn tasks_enqueue_batch(
        &self,
        batch: &EnqueueBatch,
        _params: WriteParams,
    ) -> Result<Vec<Enqueued>, ApiError> {
        let requests = self.task_requests(batch.tasks.clone(), "tasks")?;
        self.enqueue_checked(requests).await
    }

    async fn tasks_list(&self, query: &TaskQuery) -> Result<Vec<TaskView>, ApiError> {
        let limit = page_size(query.limit, 100)?;
        let tasks = self
            .client
            .tasks_before(query.filter(limit)?, query.before.map(TaskId))
            .await
            .map_err(problem)?;
        Ok(tasks.into_iter().map(TaskView::from).collect())
    }

    async fn tasks_show(&self, id: i64) -> Result<TaskView, ApiError> {
        Ok(self.client.task(TaskId(id)).await.map_err(problem)?.into())
    }

    async fn tasks_wait(&self, id: i64, query: WaitQuery) -> Result<TaskView, ApiError> {
        let timeout = query.timeout_ms.map_or(DEFAULT_WAIT, Duration::from_millis);
        match self.client.task_wait(TaskId(id), timeout).await {
            Ok(record) => Ok(record.into()),
            Err(Error::TaskTimeout(_)) => self.tasks_show(id).await,
            Err(e) => Err(problem(e)),
        }
    }

    async fn tasks_act(&self, id: i64, act: TaskAct) -> Result<Acted, ApiError> {
        let id = TaskId(id);
        let outcome = match act {
            TaskAct::Cancel => self.client.task_cancel(id).await.map_err(problem)?.into(),
            TaskAct::Retry => {
                self.client.task_retry(id).await.map_err(problem)?;
                ActOutcome::Done
            }
            TaskAct::Discard => {
                self.client.task_discard(id).await.map_err(problem)?;
                ActOutcome::Done
            }
        };
        Ok(Acted { outcome })
    }

    async fn tasks_act_many(&self, ids: &ManyIds, act: TaskAct) -> Result<Vec<ActedOn>, ApiError> {
        let ids: Vec<TaskId> = ids.ids.iter().copied().map(TaskId).collect();
        let outcomes = self
            .client
            .tasks_act(&ids, act.into())
            .await
            .map_err(problem)?;
        Ok(ids
            .iter()
            .zip(outcomes)
            .map(|(id, outcome)| match outcome {
                Ok(o) => ActedOn {
                    id: id.0,
                    outcome: Some(o.into()),
                    problem: None,
                },
                Err(e) => ActedOn {
                    id: id.0,
                    outcome: None,
                    problem: Some(e.into()),
                },
            })
            .collect())
    }

    async fn queues_list(&self) -> Result<Vec<QueueView>, ApiError> {
        let queues = self.client.queues().await.map_err(problem)?;
        Ok(queues.into_iter().map(QueueView::from).collect())
    }

    async fn queues_pause(&self, name: &str) -> Result<Done, ApiError> {
        self.client.queue_pause(name).await.map_err(problem)?;
        Ok(Done {
            queue: name.to_string(),
        })
    }

    async fn queues_resume(&self, name: &str) -> Result<Done, ApiError> {
        self.client.queue_resume(name).await.map_err(problem)?;
        Ok(Done {
            queue: name.to_string(),
        })
    }

    async fn events_append(&self, append: &AppendInput) -> Result<AppendedView, ApiError> {
        events::submit(&self.client, append.to_append()?).await
    }

    async fn events_append_cloudevents(
        &self,
        events: &CloudEventsInput,
    ) -> Result<AppendedView, ApiError> {
        let append = ratchet_store::EventAppend {
            events: events.to_events()?,
            condition: None,
            idempotency_key: None,
        };
        events::submit(&self.client, append).await
    }

    async fn events_read(&self, query: &ReadQuery) -> Result<EventPageView, ApiError> {
        let limit = page_size(query.limit, 100)?;
        let items = one_item(query.types.as_deref(), query.tags.as_deref())?;
        events::page(
            &self.client,
            items,
            query.after,
            query.before,
            limit,
            query.direction,
        )
        .await
    }

    async fn events_query(&self, query: &QueryInput) -> Result<EventPageView, ApiError> {
        let limit = page_size(query.limit, 100)?;
        let items = to_query(&query.query, "query")?;
        events::page(
            &self.client,
            items,
            query.after,
            query.before,
            limit,
            query.direction,
        )
        .await
    }

    async fn events_stream(
        &self,
        query: &StreamQuery,
    ) -> Result<futures::stream::BoxStream<'static, Result<EventView, ApiError>>, ApiError> {
        let items = one_item(query.types.as_deref(), query.tags.as_deref())?;
        let after = position(query.after, "after")?;
        Ok(events::follow(&self.client, items, after))
    }

    async fn instances_stream(
        &self,
        id: &str,
        query: &InstanceStreamQuery,
    ) -> Result<futures::stream::BoxStream<'static, Result<InstanceMessage, ApiError>>, ApiError>
    {
        let after = query.after.as_deref().map(parse_position).transpose()?;
        instance_stream::follow(&self.client, id, after).await
    }

    async fn workers_claim(&self, worker: &str, body: &ClaimBody) -> Result<Claimed, ApiError> {
        work::claim(&self.client, worker, body, std::future::pending()).await
    }

    async fn workers_heartbeat(
        &self,
        worker: &str,
        body: &HeartbeatBody,
    ) -> Result<Leases, ApiError> {
        work::heartbeat(&self.client, worker, &body.tasks, body.lease_ms).await
    }

    async fn workers_complete(
        &self,
        _worker: &str,
        body: &CompleteBody,
    ) -> Result<ReportedAll, ApiError> {
        work::complete(&self.client, body.to_results()?).await
    }

    async fn workers_release(
        &self,
        worker: &str,
        body: &ReleaseBody,
    ) -> Result<Released, ApiError> {
        work::release(&self.client, worker, &body.tasks).await
    }

    async fn system_health(&self) -> Result<String, ApiError> {
        Ok("ok".into())
    }

    async fn system_ready(&self) -> Result<String, ApiError> {
        self.client.store().clock().await.map_err(|e| {
            ApiError::from(ProblemBody::unavailable(format!(
                "the database does not answer: {e}"
            )))
        })?;
        Ok("ready".into())
    }

    async fn system_registry(&self) -> Result<Registry, ApiError> {
        Ok(system::registry(&self.client))
    }

    async fn system_whoami(&self) -> Result<WhoAmI, ApiError> {
        // In process there is no token to ask for: every scope.
        Ok(WhoAmI {
            auth: false,
            scopes: ["read", "write", "admin"].map(String::from).to_vec(),
            token: None,
            name: None,
        })
    }

    async fn system_workers(&self) -> Result<Vec<WorkerView>, ApiError> {
        let now = Timestamp::now();
        let workers = self
            .client
            .store()
            .worker_list()
            .await
            .map_err(|e| ApiError::from(ProblemBody::from(e)))?;
        Ok(workers
            .into_iter()
            .map(|w| WorkerView::of(w, now))
            .collect())
    }

    async fn system_throughput(&self, params: ThroughputParams) -> Result<Throughput, ApiError> {
        system::throughput(&self.client, params).await
    }

    async fn instances_graph(&self, id: &str) -> Result<String, ApiError> {
        let drawn =
            ratchet::graph::instance(self.client.store().as_ref(), id, Some("/v1/instances/"))
                .await
                .map_err(|e| ApiError::from(ProblemBody::from(e)))?
                .ok_or_else(|| {
                    ApiError::from(ProblemBody::not_found(format!("no instance {id}")))
                })?;
        Ok(ratchet::graph::render(&drawn))
    }

    async fn workflows_graph(
        &self,
        namespace: &str,
        name: &str,
        version: &str,
    ) -> Result<String, ApiError> {
        let stored = workflows::versions(&self.client, namespace, name).await?;
        let Some(w) = stored.into_iter().find(|w| w.version == version) else {
            return Err(workflows::missing(namespace, name, Some(version)));
        };
        let compiled = workflows::compile(w.source, ratchet_workflow::Known::default())
            .await
            .map_err(|e| {
                ApiError::from(ProblemBody::new(
                    500,
                    "stored-definition-invalid",
                    "Stored definition invalid",
                    format!("the stored definition no longer compiles: {e}"),
                ))
            })?;
        Ok(compiled.render())
    }

    async fn workflows_list(&self) -> Result<Vec<WorkflowView>, ApiError> {
        let stored = self
            .client
            .store()
            .workflow_list(None, None)
            .await
            .map_err(|e| ApiError::from(ProblemBody::from(e)))?;
        Ok(stored
            .into_iter()
            .map(|w| WorkflowView::of(w, false))
            .collect())
    }

    async fn workflows_apply(&self, definition: &Definition) -> Result<AppliedView, ApiError> {
        workflows::apply(&self.client, definition, workflows::known(&self.client)).await
    }

    async fn workflows_validate(&self, definition: &Definition) -> Result<Valid, ApiError> {
        workflows::validate(definition, workflows::known(&self.client)).await
    }

    async fn workflows_show(
        &self,
        namespace: &str,
        name: &str,
        query: &ShowQuery,
    ) -> Result<WorkflowView, ApiError> {
        let stored = workflows::versions(&self.client, namespace, name).await?;
        let found = match &query.version {
            Some(v) => stored.into_iter().find(|w| &w.version == v),
            None => stored.into_iter().last(),
        };
        found
            .map(|w| WorkflowView::of(w, true))
            .ok_or_else(|| workflows::missing(namespace, name, query.version.as_deref()))
    }

    async fn workflows_delete(
        &self,
        namespace: &str,
        name: &str,
        query: &DeleteQuery,
    ) -> Result<Vec<WorkflowView>, ApiError> {
        let deleted = self
            .client
            .store()
            .workflow_delete(namespace, name, query.version.as_deref(), query.force)
            .await
            .map_err(|e| ApiError::from(ProblemBody::from(e)))?;
        Ok(deleted
            .into_iter()
            .map(|w| WorkflowView::of(w, false))
            .collect())
    }

    async fn schedules_list(&self) -> Result<Vec<ScheduleView>, ApiError> {
        let all = self.client.schedules().await.map_err(problem)?;
        Ok(all.iter().map(ScheduleView::from).collect())
    }

    async fn schedules_create(&self, input: &ScheduleInput) -> Result<ScheduleView, ApiError> {
        let Some(name) = input.name.clone() else {
            return Err(ProblemBody::invalid("a schedule needs a name")
                .field("name")
                .into());
        };
        let options = input.clone().into_options()?;
        let created = self
            .client
            .schedule_create(&name, options)
            .await
            .map_err(problem)?;
        Ok(ScheduleView::from(&created))
    }

    async fn schedules_describe(
        &self,
        name: &str,
        query: DescribeQuery,
    ) -> Result<DescriptionView, ApiError> {
        let upcoming = query.upcoming.unwrap_or(5).min(1_000) as usize;
        let recent = query.recent.unwrap_or(10).min(1_000);
        let d = self
            .client
            .schedule_describe(name, upcoming, recent)
            .await
            .map_err(problem)?;
        Ok(DescriptionView::from(&d))
    }

    async fn schedules_update(
        &self,
        name: &str,
        input: &ScheduleInput,
    ) -> Result<ScheduleView, ApiError> {
        if input.name.as_ref().is_some_and(|n| n != name) {
            return Err(ProblemBody::invalid("a schedule cannot be renamed")
                .field("name")
                .into());
        }
        let options = input.clone().into_options()?;
        let updated = self
            .client
            .schedule_update(name, options)
            .await
            .map_err(problem)?;
        Ok(ScheduleView::from(&updated))
    }

    async fn schedules_delete(&self, name: &str) -> Result<(), ApiError> {
        self.client.schedule_delete(name).await.map_err(problem)
    }

    async fn schedules_pause(
        &self,
        name: &str,
        input: &PauseInput,
    ) -> Result<ScheduleView, ApiError> {
        let paused = self
            .client
            .schedule_pause(name, &input.note)
            .await
            .map_err(problem)?;
        Ok(ScheduleView::from(&paused))
    }

    async fn schedules_resume(&self, name: &str) -> Result<ScheduleView, ApiError> {
        let resumed = self.client.schedule_resume(name).await.map_err(problem)?;
        Ok(ScheduleView::from(&resumed))
    }

    async fn schedules_trigger(&self, name: &str) -> Result<FireView, ApiError> {
        let fire = self
            .client
            .schedule_trigger_now(name)
            .await
            .map_err(problem)?;
        Ok(FireView::of(&fire, None))
    }

    async fn schedules_backfill(
        &self,
        name: &str,
        input: &BackfillInput,
    ) -> Result<Vec<FireView>, ApiError> {
        let from = invalid(parse_rfc3339(&input.from), "from")?;
        let to = invalid(parse_rfc3339(&input.to), "to")?;
        let fires = self
            .client
            .schedule_backfill(name, from, to)
            .await
            .map_err(problem)?;
        Ok(fires.iter().map(|f| FireView::of(f, None)).collect())
    }

    async fn queues_limit(&self, name: &str, limits: &Limits) -> Result<Done, ApiError> {
        let limits = QueueLimits {
            rate_per_second: limits.rate_per_second,
            burst: limits.burst,
            concurrency: limits.concurrency,
        };
        self.client
            .queue_limit(name, limits)
            .await
            .map_err(problem)?;
        Ok(Done {
            queue: name.to_string(),
        })
    }
}

impl LocalApi {
    /// Enqueues checked requests (see [`LocalApi::task_requests`]) in one store call.
    pub async fn enqueue_checked(
        &self,
        requests: Vec<TaskRequest>,
    ) -> Result<Vec<Enqueued>, ApiError> {
        let outcomes = self.client.enqueue_many(requests).await.map_err(problem)?;
        Ok(outcomes.into_iter().map(Enqueued::from).collect())
    }

    /// Where an instance stands, as a wait that timed out answers.
    pub async fn instance_outcome(&self, id: &str) -> Result<WaitOutcome, ApiError> {
        let r = self.client.status(id).await.map_err(problem)?;
        Ok(WaitOutcome {
            finished: r.status.is_finished(),
            id: r.id,
            status: r.status,
            output: r.output,
            error: r.error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_forgeries() {
        let cursor = encode_cursor(Timestamp(1_795_000_000_123), "order/7");
        assert_eq!(
            decode_cursor(&cursor).ok(),
            Some((Timestamp(1_795_000_000_123), "order/7".to_string()))
        );
        assert_eq!(
            decode_cursor("%%%").err().and_then(|e| e.status()),
            Some(422)
        );
        let forged = decode_cursor(&URL_SAFE_NO_PAD.encode("x/y")).err();
        assert_eq!(
            forged.as_ref().and_then(|e| e.problem()?.field.as_deref()),
            Some("cursor")
        );
    }

    #[test]
    fn errors_map_to_statuses_with_stable_types() {
        let p = ProblemBody::from(Error::UnknownTask("nope".into()));
        assert_eq!(p.status, 422);
        assert_eq!(p.kind, "urn:ratchet:problem:unknown-name");
        assert_eq!(p.field.as_deref(), Some("name"));
        let p = ProblemBody::from(Error::PayloadTooLarge {
            what: "the input".into(),
            size: 10,
            limit: 5,
        });
        assert_eq!((p.status, p.limit), (413, Some(5)));
        assert_eq!(ProblemBody::from(Error::TaskNotFound(3)).status, 404);
        let p = ProblemBody::from(StoreError::InUse {
            workflow: "shop/order".into(),
            instances: 2,
        });
        assert_eq!(
            (p.status, p.kind.as_str()),
            (409, "urn:ratchet:problem:workflow-in-use")
        );
        assert!(p.detail.contains("2 unfinished"), "{}", p.detail);
        let json = serde_json::to_value(ProblemBody::not_found("x")).ok();
        assert_eq!(
            json.as_ref().map(|j| j["type"].clone()),
            Some("urn:ratchet:problem:not-found".into())
        );
        assert!(
            json.is_some_and(|j| j.get("field").is_none()),
            "absent fields are left out"
        );
    }
}
