//! The API over HTTP: [`HttpApi`] sends each operation to a `ratchet server` by its
//! [`Route`], and reads its answer as the same types [`LocalApi`](crate::LocalApi) returns.

use std::time::Duration;

use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt as _;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::api::Api;
use crate::events::{
    AppendInput, AppendedView, CloudEventsInput, EventPageView, EventView, QueryInput, ReadQuery,
    StreamQuery,
};
use crate::instances::{
    BatchItem, HistoryPage, HistoryQuery, InstanceMessage, InstancePage, InstanceQuery,
    InstanceStreamQuery, InstanceView, PurgeRequest, Purged, Restarted, SignalRequest, Signalled,
    StartBatch, StartRequest, Started, StopRequest, WaitOutcome, WaitQuery, WriteParams,
};
use crate::problem::{ApiError, ProblemBody};
use crate::queues::{Done, Limits, QueueView};
use crate::routes::{self, Method, Route};
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

/// How long a request may take beyond what it asks the server to wait.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The API on a `ratchet server`, over HTTP (https through rustls).
#[derive(Clone, Debug)]
pub struct HttpApi {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// No body.
const NONE: Option<&()> = None;

impl HttpApi {
    /// The API of the server at `base` (`http://host:8080`), sending `token` as a bearer
    /// token when given.
    pub fn new(base: &str, token: Option<String>) -> Result<Self, ApiError> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ApiError::Usage(format!(
                "a server's address is an http:// or https:// URL, got {base:?}"
            )));
        }
        Ok(Self {
            http: reqwest::Client::new(),
            base,
            token,
        })
    }

    /// The server's address.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// One call: `route` with its path `segments`, a query and a body; a problem answer
    /// becomes [`ApiError::Problem`].
    async fn call<T: DeserializeOwned>(
        &self,
        route: Route,
        segments: &[&str],
        query: Option<&(impl Serialize + Sync + ?Sized)>,
        body: Option<&(impl Serialize + Sync + ?Sized)>,
        waits: Duration,
    ) -> Result<T, ApiError> {
        let url = format!("{}{}", self.base, route.fill(segments));
        let method = match route.method {
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Put => reqwest::Method::PUT,
            Method::Delete => reqwest::Method::DELETE,
        };
        let mut request = self
            .http
            .request(method, &url)
            .timeout(REQUEST_TIMEOUT + waits);
        if let Some(query) = query {
            request = request.query(query);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let transport = |e: reqwest::Error| ApiError::Transport {
            url: url.clone(),
            message: e.to_string(),
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(transport)?;
        if route.answers_text() {
            // A text answer (a probe's word, a drawing) read as a JSON string.
            if status.is_success() {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                return serde_json::from_value(serde_json::Value::String(text)).map_err(|e| {
                    ApiError::Decode {
                        url,
                        message: e.to_string(),
                    }
                });
            }
        }
        if !status.is_success() {
            let problem = serde_json::from_slice::<ProblemBody>(&bytes).unwrap_or_else(|_| {
                ProblemBody::new(
                    status.as_u16(),
                    "http-error",
                    "Request refused",
                    format!("{status}: {}", String::from_utf8_lossy(&bytes)),
                )
            });
            return Err(problem.into());
        }
        // An answer without a body (202) reads as `null`.
        let bytes: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
        serde_json::from_slice(bytes).map_err(|e| ApiError::Decode {
            url,
            message: e.to_string(),
        })
    }
}

/// What a wait asks the server to hold.
fn held(query: WaitQuery) -> Duration {
    Duration::from_millis(query.timeout_ms.unwrap_or(30_000))
}

#[async_trait]
impl Api for HttpApi {
    async fn instances_start(
        &self,
        start: &StartRequest,
        params: WriteParams,
    ) -> Result<Started, ApiError> {
        let route = routes::INSTANCES_START;
        self.call(route, &[], Some(&params), Some(start), Duration::ZERO)
            .await
    }

    async fn instances_start_batch(
        &self,
        batch: &StartBatch,
        params: WriteParams,
    ) -> Result<Vec<BatchItem>, ApiError> {
        let route = routes::INSTANCES_START_BATCH;
        self.call(route, &[], Some(&params), Some(batch), Duration::ZERO)
            .await
    }

    async fn instances_list(&self, query: &InstanceQuery) -> Result<InstancePage, ApiError> {
        let route = routes::INSTANCES_LIST;
        self.call(route, &[], Some(query), NONE, Duration::ZERO)
            .await
    }

    async fn instances_show(&self, id: &str) -> Result<InstanceView, ApiError> {
        let route = routes::INSTANCES_SHOW;
        self.call(route, &[id], NONE, NONE, Duration::ZERO).await
    }

    async fn instances_history(
        &self,
        id: &str,
        query: &HistoryQuery,
    ) -> Result<HistoryPage, ApiError> {
        let route = routes::INSTANCES_HISTORY;
        self.call(route, &[id], Some(query), NONE, Duration::ZERO)
            .await
    }

    async fn instances_signal(
        &self,
        id: &str,
        signal: &SignalRequest,
    ) -> Result<Signalled, ApiError> {
        let route = routes::INSTANCES_SIGNAL;
        self.call(route, &[id], NONE, Some(signal), Duration::ZERO)
            .await
    }

    async fn instances_cancel(&self, id: &str, stop: &StopRequest) -> Result<(), ApiError> {
        let route = routes::INSTANCES_CANCEL;
        self.call::<serde_json::Value>(route, &[id], NONE, Some(stop), Duration::ZERO)
            .await
            .map(drop)
    }

    async fn instances_terminate(&self, id: &str, stop: &StopRequest) -> Result<(), ApiError> {
        let route = routes::INSTANCES_TERMINATE;
        self.call::<serde_json::Value>(route, &[id], NONE, Some(stop), Duration::ZERO)
            .await
            .map(drop)
    }

    async fn instances_wait(&self, id: &str, query: WaitQuery) -> Result<WaitOutcome, ApiError> {
        let route = routes::INSTANCES_WAIT;
        self.call(route, &[id], Some(&query), NONE, held(query))
            .await
    }

    async fn instances_restart(&self, id: &str) -> Result<Restarted, ApiError> {
        let route = routes::INSTANCES_RESTART;
        self.call(route, &[id], NONE, NONE, Duration::ZERO).await
    }

    async fn instances_purge(&self, purge: &PurgeRequest) -> Result<Purged, ApiError> {
        let route = routes::INSTANCES_PURGE;
        self.call(route, &[], NONE, Some(purge), Duration::ZERO)
            .await
    }

    async fn tasks_enqueue(
        &self,
        task: &EnqueueRequest,
        params: WriteParams,
    ) -> Result<Enqueued, ApiError> {
        let route = routes::TASKS_ENQUEUE;
        self.call(route, &[], Some(&params), Some(task), Duration::ZERO)
            .await
    }

    async fn tasks_enqueue_batch(
        &self,
        batch: &EnqueueBatch,
        params: WriteParams,
    ) -> Result<Vec<Enqueued>, ApiError> {
        let route = routes::TASKS_ENQUEUE_BATCH;
        self.call(route, &[], Some(&params), Some(batch), Duration::ZERO)
            .await
    }

    async fn tasks_list(&self, query: &TaskQuery) -> Result<Vec<TaskView>, ApiError> {
        let route = routes::TASKS_LIST;
        self.call(route, &[], Some(query), NONE, Duration::ZERO)
            .await
    }

    async fn tasks_show(&self, id: i64) -> Result<TaskView, ApiError> {
        let route = routes::TASKS_SHOW;
        self.call(route, &[&id.to_string()], NONE, NONE, Duration::ZERO)
            .await
    }

    async fn tasks_wait(&self, id: i64, query: WaitQuery) -> Result<TaskView, ApiError> {
        let route = routes::TASKS_WAIT;
        self.call(route, &[&id.to_string()], Some(&query), NONE, held(query))
            .await
    }

    async fn tasks_act(&self, id: i64, act: TaskAct) -> Result<Acted, ApiError> {
        let route = match act {
            TaskAct::Cancel => routes::TASKS_CANCEL,
            TaskAct::Retry => routes::TASKS_RETRY,
            TaskAct::Discard => routes::TASKS_DISCARD,
        };
        self.call(route, &[&id.to_string()], NONE, NONE, Duration::ZERO)
            .await
    }

    async fn tasks_act_many(&self, ids: &ManyIds, act: TaskAct) -> Result<Vec<ActedOn>, ApiError> {
        let route = match act {
            TaskAct::Cancel => routes::TASKS_ACT_MANY_CANCEL,
            TaskAct::Retry => routes::TASKS_ACT_MANY_RETRY,
            TaskAct::Discard => routes::TASKS_ACT_MANY_DISCARD,
        };
        self.call(route, &[], NONE, Some(ids), Duration::ZERO).await
    }

    async fn queues_list(&self) -> Result<Vec<QueueView>, ApiError> {
        let route = routes::QUEUES_LIST;
        self.call(route, &[], NONE, NONE, Duration::ZERO).await
    }

    async fn queues_pause(&self, name: &str) -> Result<Done, ApiError> {
        let route = routes::QUEUES_PAUSE;
        self.call(route, &[name], NONE, NONE, Duration::ZERO).await
    }

    async fn queues_resume(&self, name: &str) -> Result<Done, ApiError> {
        let route = routes::QUEUES_RESUME;
        self.call(route, &[name], NONE, NONE, Duration::ZERO).await
    }

    async fn events_append(&self, append: &AppendInput) -> Result<AppendedView, ApiError> {
        let route = routes::EVENTS_APPEND;
        self.call(route, &[], NONE, Some(append), Duration::ZERO)
            .await
    }

    async fn events_append_cloudevents(
        &self,
        events: &CloudEventsInput,
    ) -> Result<AppendedView, ApiError> {
        let route = routes::EVENTS_APPEND_CLOUDEVENTS;
        self.call(route, &[], NONE, Some(events), Duration::ZERO)
            .await
    }

    async fn events_read(&self, query: &ReadQuery) -> Result<EventPageView, ApiError> {
        let route = routes::EVENTS_READ;
        self.call(route, &[], Some(query), NONE, Duration::ZERO)
            .await
    }

    async fn events_query(&self, query: &QueryInput) -> Result<EventPageView, ApiError> {
        let route = routes::EVENTS_QUERY;
        self.call(route, &[], NONE, Some(query), Duration::ZERO)
            .await
    }

    async fn events_stream(
        &self,
        query: &StreamQuery,
    ) -> Result<BoxStream<'static, Result<EventView, ApiError>>, ApiError> {
        let route = routes::EVENTS_STREAM;
        self.follow(route, &[], query, None, event_message, |_| false)
            .await
    }

    async fn instances_stream(
        &self,
        id: &str,
        query: &InstanceStreamQuery,
    ) -> Result<BoxStream<'static, Result<InstanceMessage, ApiError>>, ApiError> {
        let route = routes::INSTANCES_STREAM;
        let ends = |m: &InstanceMessage| matches!(m, InstanceMessage::End);
        self.follow(route, &[id], query, None, instance_message, ends)
            .await
    }

    async fn workers_claim(&self, worker: &str, body: &ClaimBody) -> Result<Claimed, ApiError> {
        let route = routes::WORKERS_CLAIM;
        let waits = Duration::from_millis(body.wait_ms.unwrap_or(0));
        self.call(route, &[worker], NONE, Some(body), waits).await
    }

    async fn workers_heartbeat(
        &self,
        worker: &str,
        body: &HeartbeatBody,
    ) -> Result<Leases, ApiError> {
        let route = routes::WORKERS_HEARTBEAT;
        self.call(route, &[worker], NONE, Some(body), Duration::ZERO)
            .await
    }

    async fn workers_complete(
        &self,
        worker: &str,
        body: &CompleteBody,
    ) -> Result<ReportedAll, ApiError> {
        let route = routes::WORKERS_COMPLETE;
        self.call(route, &[worker], NONE, Some(body), Duration::ZERO)
            .await
    }

    async fn workers_release(
        &self,
        worker: &str,
        body: &ReleaseBody,
    ) -> Result<Released, ApiError> {
        let route = routes::WORKERS_RELEASE;
        self.call(route, &[worker], NONE, Some(body), Duration::ZERO)
            .await
    }

    async fn system_health(&self) -> Result<String, ApiError> {
        let route = routes::SYSTEM_HEALTH;
        self.call(route, &[], NONE, NONE, Duration::ZERO).await
    }

    async fn system_ready(&self) -> Result<String, ApiError> {
        let route = routes::SYSTEM_READY;
        self.call(route, &[], NONE, NONE, Duration::ZERO).await
    }

    async fn system_registry(&self) -> Result<Registry, ApiError> {
        let route = routes::SYSTEM_REGISTRY;
        self.call(route, &[], NONE, NONE, Duration::ZERO).await
    }

    async fn system_whoami(&self) -> Result<WhoAmI, ApiError> {
        let route = routes::SYSTEM_WHOAMI;
        self.call(route, &[], NONE, NONE, Duration::ZERO).await
    }

    async fn system_workers(&self) -> Result<Vec<WorkerView>, ApiError> {
        let route = routes::SYSTEM_WORKERS;
        self.call(route, &[], NONE, NONE, Duration::ZERO).await
    }

    async fn system_throughput(&self, params: ThroughputParams) -> Result<Throughput, ApiError> {
        let route = routes::SYSTEM_THROUGHPUT;
        self.call(route, &[], Some(&params), NONE, Duration::ZERO)
            .await
    }

    async fn instances_graph(&self, id: &str) -> Result<String, ApiError> {
        let route = routes::INSTANCES_GRAPH;
        self.call(route, &[id], NONE, NONE, Duration::ZERO).await
    }

    async fn workflows_graph(
        &self,
        namespace: &str,
        name: &str,
        version: &str,
    ) -> Result<String, ApiError> {
        let route = routes::WORKFLOWS_GRAPH;
        self.call(
            route,
            &[namespace, name, version],
            NONE,
            NONE,
            Duration::ZERO,
        )
        .await
    }

    async fn workflows_list(&self) -> Result<Vec<WorkflowView>, ApiError> {
        let route = routes::WORKFLOWS_LIST;
        self.call(route, &[], NONE, NONE, Duration::ZERO).await
    }

    async fn workflows_apply(&self, definition: &Definition) -> Result<AppliedView, ApiError> {
        let route = routes::WORKFLOWS_APPLY;
        self.call(route, &[], NONE, Some(definition), Duration::ZERO)
            .await
    }

    async fn workflows_validate(&self, definition: &Definition) -> Result<Valid, ApiError> {
        let route = routes::WORKFLOWS_VALIDATE;
        self.call(route, &[], NONE, Some(definition), Duration::ZERO)
            .await
    }

    async fn workflows_show(
        &self,
        namespace: &str,
        name: &str,
        query: &ShowQuery,
    ) -> Result<WorkflowView, ApiError> {
        let route = routes::WORKFLOWS_SHOW;
        self.call(route, &[namespace, name], Some(query), NONE, Duration::ZERO)
            .await
    }

    async fn workflows_delete(
        &self,
        namespace: &str,
        name: &str,
        query: &DeleteQuery,
    ) -> Result<Vec<WorkflowView>, ApiError> {
        let route = routes::WORKFLOWS_DELETE;
        self.call(route, &[namespace, name], Some(query), NONE, Duration::ZERO)
            .await
    }

    async fn schedules_list(&self) -> Result<Vec<ScheduleView>, ApiError> {
        let route = routes::SCHEDULES_LIST;
        self.call(route, &[], NONE, NONE, Duration::ZERO).await
    }

    async fn schedules_create(&self, input: &ScheduleInput) -> Result<ScheduleView, ApiError> {
        let route = routes::SCHEDULES_CREATE;
        self.call(route, &[], NONE, Some(input), Duration::ZERO)
            .await
    }

    async fn schedules_describe(
        &self,
        name: &str,
        query: DescribeQuery,
    ) -> Result<DescriptionView, ApiError> {
        let route = routes::SCHEDULES_DESCRIBE;
        self.call(route, &[name], Some(&query), NONE, Duration::ZERO)
            .await
    }

    async fn schedules_update(
        &self,
        name: &str,
        input: &ScheduleInput,
    ) -> Result<ScheduleView, ApiError> {
        let route = routes::SCHEDULES_UPDATE;
        self.call(route, &[name], NONE, Some(input), Duration::ZERO)
            .await
    }

    async fn schedules_delete(&self, name: &str) -> Result<(), ApiError> {
        let route = routes::SCHEDULES_DELETE;
        self.call::<serde_json::Value>(route, &[name], NONE, NONE, Duration::ZERO)
            .await
            .map(drop)
    }

    async fn schedules_pause(
        &self,
        name: &str,
        input: &PauseInput,
    ) -> Result<ScheduleView, ApiError> {
        let route = routes::SCHEDULES_PAUSE;
        self.call(route, &[name], NONE, Some(input), Duration::ZERO)
            .await
    }

    async fn schedules_resume(&self, name: &str) -> Result<ScheduleView, ApiError> {
        let route = routes::SCHEDULES_RESUME;
        self.call(route, &[name], NONE, NONE, Duration::ZERO).await
    }

    async fn schedules_trigger(&self, name: &str) -> Result<FireView, ApiError> {
        let route = routes::SCHEDULES_TRIGGER;
        self.call(route, &[name], NONE, NONE, Duration::ZERO).await
    }

    async fn schedules_backfill(
        &self,
        name: &str,
        input: &BackfillInput,
    ) -> Result<Vec<FireView>, ApiError> {
        let route = routes::SCHEDULES_BACKFILL;
        self.call(route, &[name], NONE, Some(input), Duration::ZERO)
            .await
    }

    async fn queues_limit(&self, name: &str, limits: &Limits) -> Result<Done, ApiError> {
        let route = routes::QUEUES_LIMIT;
        self.call(route, &[name], NONE, Some(limits), Duration::ZERO)
            .await
    }
}

/// One Server-Sent Events message.
struct Message {
    /// Its `event:` name, if any.
    name: Option<String>,
    /// Its `id:`, if any.
    id: Option<String>,
    /// Its `data:`, lines joined.
    data: String,
}

impl Message {
    fn parse(text: &str) -> Self {
        let mut m = Message {
            name: None,
            id: None,
            data: String::new(),
        };
        for line in text.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => m.name = Some(value.to_string()),
                "id" => m.id = Some(value.to_string()),
                "data" => {
                    if !m.data.is_empty() {
                        m.data.push('\n');
                    }
                    m.data.push_str(value);
                }
                _ => {}
            }
        }
        m
    }
}

/// A stream of Server-Sent Events, connecting again after a dropped connection and resuming
/// after the last message with an id (`Last-Event-ID`).
struct Follow<T> {
    http: reqwest::Client,
    token: Option<String>,
    url: reqwest::Url,
    /// A message as the stream's item: none for one to skip (a keep-alive).
    decode: fn(&Message) -> Result<Option<T>, String>,
    /// Whether an item is the stream's last.
    ends: fn(&T) -> bool,
}

/// What the stream holds between items: the open answer, the text read but not parsed, the
/// items parsed but not given, and the last id seen.
struct Reading<T> {
    follow: Follow<T>,
    response: Option<reqwest::Response>,
    buffer: String,
    ready: std::collections::VecDeque<T>,
    last: Option<String>,
    ended: bool,
}

impl HttpApi {
    /// The stream of `route`, its first connection made now (so a refusal is this call's
    /// error).
    async fn follow<T: Send + 'static>(
        &self,
        route: Route,
        segments: &[&str],
        query: &(impl Serialize + Sync + ?Sized),
        last: Option<String>,
        decode: fn(&Message) -> Result<Option<T>, String>,
        ends: fn(&T) -> bool,
    ) -> Result<BoxStream<'static, Result<T, ApiError>>, ApiError> {
        let address = format!("{}{}", self.base, route.fill(segments));
        let url = self
            .http
            .get(&address)
            .query(query)
            .build()
            .map_err(|e| ApiError::Usage(format!("{address}: {e}")))?
            .url()
            .clone();
        let follow = Follow {
            http: self.http.clone(),
            token: self.token.clone(),
            url,
            decode,
            ends,
        };
        let response = follow.connect(last.as_deref()).await?;
        Ok(follow.items(response, last))
    }
}

impl<T: Send + 'static> Follow<T> {
    /// One connection, after `last` when given.
    async fn connect(&self, last: Option<&str>) -> Result<reqwest::Response, ApiError> {
        let mut request = self.http.get(self.url.clone());
        if let Some(id) = last {
            request = request.header("Last-Event-ID", id);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| ApiError::Transport {
            url: self.url.to_string(),
            message: e.to_string(),
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let bytes = response.bytes().await.unwrap_or_default();
        Err(serde_json::from_slice::<ProblemBody>(&bytes)
            .unwrap_or_else(|_| {
                ProblemBody::new(
                    status.as_u16(),
                    "http-error",
                    "Request refused",
                    status.to_string(),
                )
            })
            .into())
    }

    fn items(
        self,
        response: reqwest::Response,
        last: Option<String>,
    ) -> BoxStream<'static, Result<T, ApiError>> {
        let start = Reading {
            follow: self,
            response: Some(response),
            buffer: String::new(),
            ready: std::collections::VecDeque::new(),
            last,
            ended: false,
        };
        futures::stream::unfold(start, |mut r| async move {
            loop {
                if let Some(item) = r.ready.pop_front() {
                    if (r.follow.ends)(&item) {
                        r.ended = true;
                        r.ready.clear();
                    }
                    return Some((Ok(item), r));
                }
                if r.ended {
                    return None;
                }
                let Some(open) = r.response.as_mut() else {
                    match r.follow.connect(r.last.as_deref()).await {
                        Ok(response) => r.response = Some(response),
                        Err(e) => {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            return Some((Err(e), r));
                        }
                    }
                    continue;
                };
                match open.chunk().await {
                    Ok(Some(chunk)) => {
                        r.buffer.push_str(&String::from_utf8_lossy(&chunk));
                        while let Some(end) = r.buffer.find("\n\n") {
                            let text: String = r.buffer.drain(..end + 2).collect();
                            let message = Message::parse(&text);
                            match (r.follow.decode)(&message) {
                                Ok(Some(item)) => {
                                    if message.id.is_some() {
                                        r.last = message.id;
                                    }
                                    r.ready.push_back(item);
                                }
                                Ok(None) => {}
                                Err(e) => {
                                    let e = ApiError::Decode {
                                        url: r.follow.url.to_string(),
                                        message: e,
                                    };
                                    return Some((Err(e), r));
                                }
                            }
                        }
                    }
                    // Dropped: connect again after the last message seen.
                    Ok(None) | Err(_) => {
                        r.response = None;
                        r.buffer.clear();
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
            }
        })
        .boxed()
    }
}

/// An event of the event stream.
fn event_message(m: &Message) -> Result<Option<EventView>, String> {
    if m.data.is_empty() {
        return Ok(None);
    }
    serde_json::from_str(&m.data)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// A message of an instance's stream.
fn instance_message(m: &Message) -> Result<Option<InstanceMessage>, String> {
    let read = |e: serde_json::Error| e.to_string();
    Ok(match m.name.as_deref() {
        Some("instance") => Some(InstanceMessage::Instance(Box::new(
            serde_json::from_str(&m.data).map_err(read)?,
        ))),
        Some("history") => Some(InstanceMessage::History(Box::new(
            serde_json::from_str(&m.data).map_err(read)?,
        ))),
        Some("end") => Some(InstanceMessage::End),
        _ => None,
    })
}
