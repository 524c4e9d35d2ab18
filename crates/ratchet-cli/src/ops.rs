//! What the `instances`, `tasks` and `queues` commands do, on the database directly or on a
//! `ratchet server` (`--server`): each answers with the JSON the commands print, the same
//! objects either way (the server's API has the shapes of `--json`).

use std::time::Duration;

use anyhow::{bail, Context};
use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt as _;
use ratchet::{
    AppendOutcome, Client, Direction, EnqueueOutcome, EventAppend, EventQuery, EventRead,
    EventStore, IfExists, InstanceFilter, Position, QueueLimits, StartOptions, StoredEvent,
    TaskFilter, TaskId, TaskRequest, TaskState, Timestamp,
};
use serde_json::{json, Value};

use crate::input::rfc3339;

/// A task action.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Act {
    Cancel,
    Retry,
    Discard,
}

impl Act {
    fn path(self) -> &'static str {
        match self {
            Self::Cancel => "cancel",
            Self::Retry => "retry",
            Self::Discard => "discard",
        }
    }
}

/// The operations, each one store call (locally) or one request (remotely).
#[async_trait]
pub(crate) trait Ops: Send + Sync {
    async fn instances(&self, filter: InstanceFilter) -> anyhow::Result<Vec<Value>>;
    async fn instance(&self, id: &str) -> anyhow::Result<Value>;
    /// `{execution, seq, event}` each.
    async fn history(&self, id: &str) -> anyhow::Result<Vec<Value>>;
    /// `allow_unknown`: a server without a worker accepts a name no worker runs.
    async fn start(
        &self,
        name: &str,
        input: Value,
        id: Option<String>,
        use_existing: bool,
        allow_unknown: bool,
    ) -> anyhow::Result<String>;
    /// False when the dedup id was used before.
    async fn signal(
        &self,
        id: &str,
        name: &str,
        payload: Value,
        dedup: Option<String>,
    ) -> anyhow::Result<bool>;
    async fn cancel(&self, id: &str, reason: &str) -> anyhow::Result<()>;
    async fn terminate(&self, id: &str, reason: &str) -> anyhow::Result<()>;
    /// `{id, status, output, error}`, or an error at the timeout.
    async fn wait(&self, id: &str, timeout: Duration) -> anyhow::Result<Value>;
    async fn purge(&self, before: Timestamp) -> anyhow::Result<u64>;
    async fn tasks(&self, filter: TaskFilter) -> anyhow::Result<Vec<Value>>;
    async fn task(&self, id: i64) -> anyhow::Result<Value>;
    /// Each task's id and whether it was a duplicate; all or nothing.
    async fn enqueue(
        &self,
        requests: Vec<TaskRequest>,
        allow_unknown: bool,
    ) -> anyhow::Result<Vec<(i64, bool)>>;
    /// The task once finished, or an error at the timeout.
    async fn task_wait(&self, id: i64, timeout: Duration) -> anyhow::Result<Value>;
    /// True when a running task was asked to stop (not stopped yet).
    async fn task_act(&self, id: i64, act: Act) -> anyhow::Result<bool>;
    /// `{queue, paused, rate_per_second, burst, concurrency, tasks: {State: n}}` each.
    async fn queues(&self) -> anyhow::Result<Vec<Value>>;
    async fn queue_pause(&self, queue: &str, paused: bool) -> anyhow::Result<()>;
    async fn queue_limit(&self, queue: &str, limits: QueueLimits) -> anyhow::Result<()>;
}

/// What the `events` commands do, on the database or on a server.
#[async_trait]
pub(crate) trait EventOps: Send + Sync {
    async fn submit(&self, append: EventAppend) -> anyhow::Result<AppendOutcome>;
    async fn read(&self, read: EventRead) -> anyhow::Result<Vec<StoredEvent>>;
    /// The last position.
    async fn head(&self) -> anyhow::Result<Position>;
    /// Every matching event after `after`, then each new one.
    fn follow(
        &self,
        query: EventQuery,
        after: Option<Position>,
    ) -> anyhow::Result<BoxStream<'static, anyhow::Result<StoredEvent>>>;
}

#[async_trait]
impl EventOps for EventStore {
    async fn submit(&self, append: EventAppend) -> anyhow::Result<AppendOutcome> {
        Ok(EventStore::submit(self, append).await?)
    }

    async fn read(&self, read: EventRead) -> anyhow::Result<Vec<StoredEvent>> {
        Ok(self.read_with(read).await?.events)
    }

    async fn head(&self) -> anyhow::Result<Position> {
        Ok(EventStore::head(self).await?)
    }

    fn follow(
        &self,
        query: EventQuery,
        after: Option<Position>,
    ) -> anyhow::Result<BoxStream<'static, anyhow::Result<StoredEvent>>> {
        Ok(self
            .subscribe(query, after)
            .map(|e| e.map_err(anyhow::Error::from))
            .boxed())
    }
}

/// An instance as one JSON object, its times in RFC 3339.
pub(crate) fn instance_json(r: &ratchet::InstanceRecord) -> Value {
    json!({
        "id": r.id, "name": r.name, "version": r.version, "status": r.status.to_string(),
        "execution": r.execution, "input": r.input, "output": r.output, "error": r.error,
        "custom_status": r.custom_status, "parent": r.parent, "history_len": r.history_len,
        "created_at": rfc3339(r.created_at), "updated_at": rfc3339(r.updated_at),
        "finished_at": r.finished_at.map(rfc3339),
    })
}

/// A task as one JSON object, its times in RFC 3339.
pub(crate) fn task_json(t: &ratchet::TaskRecord) -> Value {
    json!({
        "id": t.id.0, "queue": t.queue, "name": t.name, "state": t.state.to_string(),
        "priority": t.priority, "attempt": t.attempt, "max_attempts": t.max_attempts,
        "input": t.input, "output": t.output, "error": t.error, "unique_key": t.unique_key,
        "metadata": t.metadata, "created_at": rfc3339(t.created_at),
        "run_at": rfc3339(t.visible_at), "finished_at": t.finished_at.map(rfc3339),
    })
}

/// On the database, through a client.
pub(crate) struct Local(pub(crate) Client);

#[async_trait]
impl Ops for Local {
    async fn instances(&self, filter: InstanceFilter) -> anyhow::Result<Vec<Value>> {
        Ok(self
            .0
            .list(filter)
            .await?
            .iter()
            .map(instance_json)
            .collect())
    }

    async fn instance(&self, id: &str) -> anyhow::Result<Value> {
        Ok(instance_json(&self.0.status(id).await?))
    }

    async fn history(&self, id: &str) -> anyhow::Result<Vec<Value>> {
        Ok(self
            .0
            .history(id)
            .await?
            .into_iter()
            .map(|h| json!({"execution": h.execution, "seq": h.seq, "event": h.event}))
            .collect())
    }

    async fn start(
        &self,
        name: &str,
        input: Value,
        id: Option<String>,
        use_existing: bool,
        _allow_unknown: bool,
    ) -> anyhow::Result<String> {
        let options = StartOptions {
            id,
            if_exists: if use_existing {
                IfExists::UseExisting
            } else {
                IfExists::Fail
            },
            ..StartOptions::default()
        };
        Ok(self
            .0
            .start_with(name, input, options)
            .await?
            .id()
            .to_string())
    }

    async fn signal(
        &self,
        id: &str,
        name: &str,
        payload: Value,
        dedup: Option<String>,
    ) -> anyhow::Result<bool> {
        Ok(match dedup {
            Some(d) => self.0.signal_once(id, name, payload, &d).await?,
            None => self.0.signal(id, name, payload).await.map(|()| true)?,
        })
    }

    async fn cancel(&self, id: &str, reason: &str) -> anyhow::Result<()> {
        Ok(self.0.cancel(id, reason).await?)
    }

    async fn terminate(&self, id: &str, reason: &str) -> anyhow::Result<()> {
        Ok(self.0.terminate(id, reason).await?)
    }

    async fn wait(&self, id: &str, timeout: Duration) -> anyhow::Result<Value> {
        let o = self.0.wait(id, timeout).await?;
        Ok(
            json!({"id": o.id, "status": o.status.to_string(), "output": o.output, "error": o.error}),
        )
    }

    async fn purge(&self, before: Timestamp) -> anyhow::Result<u64> {
        Ok(self.0.store().instance_purge(before).await?)
    }

    async fn tasks(&self, filter: TaskFilter) -> anyhow::Result<Vec<Value>> {
        Ok(self.0.tasks(filter).await?.iter().map(task_json).collect())
    }

    async fn task(&self, id: i64) -> anyhow::Result<Value> {
        Ok(task_json(&self.0.task(TaskId(id)).await?))
    }

    async fn enqueue(
        &self,
        requests: Vec<TaskRequest>,
        _allow_unknown: bool,
    ) -> anyhow::Result<Vec<(i64, bool)>> {
        Ok(self
            .0
            .enqueue_many(requests)
            .await?
            .into_iter()
            .map(|o| (o.id().0, !matches!(o, EnqueueOutcome::Enqueued(_))))
            .collect())
    }

    async fn task_wait(&self, id: i64, timeout: Duration) -> anyhow::Result<Value> {
        Ok(task_json(&self.0.task_wait(TaskId(id), timeout).await?))
    }

    async fn task_act(&self, id: i64, act: Act) -> anyhow::Result<bool> {
        let id = TaskId(id);
        Ok(match act {
            Act::Cancel => self.0.task_cancel(id).await? == ratchet::TaskActionOutcome::Requested,
            Act::Retry => self.0.task_retry(id).await.map(|()| false)?,
            Act::Discard => self.0.task_discard(id).await.map(|()| false)?,
        })
    }

    async fn queues(&self) -> anyhow::Result<Vec<Value>> {
        Ok(self
            .0
            .queues()
            .await?
            .into_iter()
            .map(|q| {
                let counts: serde_json::Map<String, Value> = TaskState::ALL
                    .iter()
                    .map(|s| (s.to_string(), q.count(*s).into()))
                    .collect();
                json!({
                    "queue": q.queue, "paused": q.paused,
                    "rate_per_second": q.limits.rate_per_second,
                    "burst": q.limits.burst, "concurrency": q.limits.concurrency,
                    "tasks": counts,
                })
            })
            .collect())
    }

    async fn queue_pause(&self, queue: &str, paused: bool) -> anyhow::Result<()> {
        if paused {
            self.0.queue_pause(queue).await?;
        } else {
            self.0.queue_resume(queue).await?;
        }
        Ok(())
    }

    async fn queue_limit(&self, queue: &str, limits: QueueLimits) -> anyhow::Result<()> {
        Ok(self.0.queue_limit(queue, limits).await?)
    }
}

/// On a `ratchet server`, over its HTTP API.
pub(crate) struct Remote {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// How long a request may take beyond what it waits for.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

impl Remote {
    pub(crate) fn new(server: &str, token: Option<String>) -> anyhow::Result<Self> {
        let base = server.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            bail!("--server takes an http:// or https:// URL, got {server:?}");
        }
        Ok(Self {
            http: reqwest::Client::new(),
            base,
            token,
        })
    }

    /// One request; a problem answer becomes an error that says what the server said.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        wait: Duration,
    ) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut request = self
            .http
            .request(method, &url)
            .timeout(REQUEST_TIMEOUT + wait);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("calling {url}"))?;
        let status = response.status();
        let text = response.text().await.context("reading the answer")?;
        let value: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        if status.is_success() {
            return Ok(value);
        }
        let detail = value["detail"].as_str().map_or_else(
            || format!("{status}: {value}"),
            |d| match value["field"].as_str() {
                Some(field) => format!("{d} (field {field})"),
                None => d.to_string(),
            },
        );
        bail!("{detail}")
    }

    pub(crate) async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(reqwest::Method::GET, path, None, Duration::ZERO)
            .await
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.call(reqwest::Method::POST, path, Some(body), Duration::ZERO)
            .await
    }

    pub(crate) async fn put(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.call(reqwest::Method::PUT, path, Some(body), Duration::ZERO)
            .await
    }

    pub(crate) async fn delete_at(&self, path: &str) -> anyhow::Result<Value> {
        self.call(reqwest::Method::DELETE, path, None, Duration::ZERO)
            .await
    }

    /// `DELETE /v1/workflows/{namespace}/{name}`: the versions deleted.
    pub(crate) async fn workflow_delete(
        &self,
        namespace: &str,
        name: &str,
        version: Option<&str>,
        force: bool,
    ) -> anyhow::Result<Vec<Value>> {
        let mut path = format!("/v1/workflows/{}/{}", enc(namespace), enc(name));
        let mut query = Vec::new();
        if let Some(version) = version {
            query.push(format!("version={}", enc(version)));
        }
        if force {
            query.push("force=true".to_string());
        }
        if !query.is_empty() {
            path = format!("{path}?{}", query.join("&"));
        }
        let gone = self
            .call(reqwest::Method::DELETE, &path, None, Duration::ZERO)
            .await?;
        Ok(items(gone))
    }
}

/// `s` as a path segment or query value.
pub(crate) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn items(v: Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items,
        _ => Vec::new(),
    }
}

#[async_trait]
impl Ops for Remote {
    async fn instances(&self, f: InstanceFilter) -> anyhow::Result<Vec<Value>> {
        let mut query = vec![format!("limit={}", f.limit.unwrap_or(100))];
        if !f.statuses.is_empty() {
            let s: Vec<String> = f.statuses.iter().map(ToString::to_string).collect();
            query.push(format!("status={}", enc(&s.join(","))));
        }
        if let Some(name) = &f.name {
            query.push(format!("name={}", enc(name)));
        }
        if let Some(after) = f.created_after {
            query.push(format!("created_after={}", enc(&rfc3339(after))));
        }
        if let Some(status) = &f.custom_status {
            query.push(format!("custom_status={}", enc(&status.to_string())));
        }
        let page = self
            .get(&format!("/v1/instances?{}", query.join("&")))
            .await?;
        Ok(items(page["items"].clone()))
    }

    async fn instance(&self, id: &str) -> anyhow::Result<Value> {
        self.get(&format!("/v1/instances/{}", enc(id))).await
    }

    async fn history(&self, id: &str) -> anyhow::Result<Vec<Value>> {
        let mut all = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let path = match after {
                Some(a) => format!("/v1/instances/{}/history?after={a}", enc(id)),
                None => format!("/v1/instances/{}/history", enc(id)),
            };
            let page = self.get(&path).await?;
            for item in items(page["items"].clone()) {
                all.push(json!({"execution": item["execution"], "seq": item["seq"],
                                "event": item["event"]}));
            }
            match page["next"].as_str() {
                Some(next) => after = Some(enc(next)),
                None => return Ok(all),
            }
        }
    }

    async fn start(
        &self,
        name: &str,
        input: Value,
        id: Option<String>,
        use_existing: bool,
        allow_unknown: bool,
    ) -> anyhow::Result<String> {
        let body = json!({"name": name, "input": input, "id": id,
            "if_exists": if use_existing { "use_existing" } else { "fail" }});
        let path = if allow_unknown {
            "/v1/instances?allow_unknown=true"
        } else {
            "/v1/instances"
        };
        let started = self.post(path, body).await?;
        started["id"]
            .as_str()
            .map(str::to_string)
            .context("the server answered without an id")
    }

    async fn signal(
        &self,
        id: &str,
        name: &str,
        payload: Value,
        dedup: Option<String>,
    ) -> anyhow::Result<bool> {
        let body = json!({"name": name, "payload": payload, "dedup_id": dedup});
        let raised = self
            .post(&format!("/v1/instances/{}/signals", enc(id)), body)
            .await?;
        Ok(raised["raised"].as_bool().unwrap_or(true))
    }

    async fn cancel(&self, id: &str, reason: &str) -> anyhow::Result<()> {
        let path = format!("/v1/instances/{}/cancel", enc(id));
        self.post(&path, json!({"reason": reason})).await.map(drop)
    }

    async fn terminate(&self, id: &str, reason: &str) -> anyhow::Result<()> {
        let path = format!("/v1/instances/{}/terminate", enc(id));
        self.post(&path, json!({"reason": reason})).await.map(drop)
    }

    async fn wait(&self, id: &str, timeout: Duration) -> anyhow::Result<Value> {
        // The server holds a wait for a minute at most: ask again until the timeout.
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let path = format!(
                "/v1/instances/{}/wait?timeout_ms={}",
                enc(id),
                left.as_millis()
            );
            let o = self.call(reqwest::Method::GET, &path, None, left).await?;
            if o["finished"] == true {
                return Ok(
                    json!({"id": o["id"], "status": o["status"], "output": o["output"],
                                 "error": o["error"]}),
                );
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("timed out waiting for instance \"{id}\"");
            }
        }
    }

    async fn purge(&self, before: Timestamp) -> anyhow::Result<u64> {
        let purged = self
            .post(
                "/v1/instances/purge",
                json!({"finished_before": rfc3339(before)}),
            )
            .await?;
        Ok(purged["removed"].as_u64().unwrap_or(0))
    }

    async fn tasks(&self, f: TaskFilter) -> anyhow::Result<Vec<Value>> {
        let mut query = vec![format!("limit={}", f.limit.unwrap_or(100))];
        if let Some(queue) = &f.queue {
            query.push(format!("queue={}", enc(queue)));
        }
        if !f.states.is_empty() {
            let s: Vec<String> = f.states.iter().map(ToString::to_string).collect();
            query.push(format!("state={}", enc(&s.join(","))));
        }
        if let Some(name) = &f.name {
            query.push(format!("name={}", enc(name)));
        }
        Ok(items(
            self.get(&format!("/v1/tasks?{}", query.join("&"))).await?,
        ))
    }

    async fn task(&self, id: i64) -> anyhow::Result<Value> {
        self.get(&format!("/v1/tasks/{id}")).await
    }

    async fn enqueue(
        &self,
        requests: Vec<TaskRequest>,
        allow_unknown: bool,
    ) -> anyhow::Result<Vec<(i64, bool)>> {
        let tasks: Vec<Value> = requests
            .into_iter()
            .map(|r| {
                let o = r.options;
                json!({"name": r.name, "input": r.input, "options": {
                    "queue": o.queue, "priority": o.priority, "delay_ms": o.delay_ms,
                    "run_at": o.run_at.map(rfc3339), "timeout_ms": o.timeout_ms,
                    "unique_key": o.unique_key, "metadata": o.metadata,
                    "retry": {"max_attempts": o.retry.max_attempts,
                              "initial_interval_ms": o.retry.initial_interval_ms,
                              "backoff": o.retry.backoff,
                              "max_interval_ms": o.retry.max_interval_ms,
                              "non_retryable": o.retry.non_retryable,
                              "jitter": o.retry.jitter}}})
            })
            .collect();
        let path = if allow_unknown {
            "/v1/tasks/batch?allow_unknown=true"
        } else {
            "/v1/tasks/batch"
        };
        let outcomes = self.post(path, json!({"tasks": tasks})).await?;
        Ok(items(outcomes)
            .iter()
            .map(|o| (o["id"].as_i64().unwrap_or(0), o["duplicate"] == true))
            .collect())
    }

    async fn task_wait(&self, id: i64, timeout: Duration) -> anyhow::Result<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let path = format!("/v1/tasks/{id}/wait?timeout_ms={}", left.as_millis());
            let t = self.call(reqwest::Method::GET, &path, None, left).await?;
            let finished = t["state"]
                .as_str()
                .and_then(|s| s.parse::<TaskState>().ok())
                .is_some_and(TaskState::is_finished);
            if finished {
                return Ok(t);
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("timed out waiting for task {id}");
            }
        }
    }

    async fn task_act(&self, id: i64, act: Act) -> anyhow::Result<bool> {
        let acted = self
            .post(&format!("/v1/tasks/{id}/{}", act.path()), json!({}))
            .await?;
        Ok(acted["outcome"] == "requested")
    }

    async fn queues(&self) -> anyhow::Result<Vec<Value>> {
        Ok(items(self.get("/v1/queues").await?)
            .into_iter()
            .map(|q| {
                // The server counts by lower-case state; the command shows them as named.
                let counts: serde_json::Map<String, Value> = TaskState::ALL
                    .iter()
                    .map(|s| {
                        let n = q["counts"][s.to_string().to_lowercase()].clone();
                        (s.to_string(), if n.is_null() { 0.into() } else { n })
                    })
                    .collect();
                json!({
                    "queue": q["name"], "paused": q["paused"],
                    "rate_per_second": q["limits"]["rate_per_second"],
                    "burst": q["limits"]["burst"], "concurrency": q["limits"]["concurrency"],
                    "tasks": counts,
                })
            })
            .collect())
    }

    async fn queue_pause(&self, queue: &str, paused: bool) -> anyhow::Result<()> {
        let verb = if paused { "pause" } else { "resume" };
        self.post(&format!("/v1/queues/{}/{verb}", enc(queue)), json!({}))
            .await
            .map(drop)
    }

    async fn queue_limit(&self, queue: &str, limits: QueueLimits) -> anyhow::Result<()> {
        let body = json!({"rate_per_second": limits.rate_per_second, "burst": limits.burst,
                          "concurrency": limits.concurrency});
        self.call(
            reqwest::Method::PUT,
            &format!("/v1/queues/{}/limits", enc(queue)),
            Some(body),
            Duration::ZERO,
        )
        .await
        .map(drop)
    }
}

/// An event as the server shows it, back as the store's type (its time from RFC 3339).
fn stored(v: &Value) -> anyhow::Result<StoredEvent> {
    let recorded_at = v["recorded_at"]
        .as_str()
        .and_then(|t| crate::input::parse_rfc3339(t).ok())
        .map_or(0, Timestamp::as_millis);
    let mut v = v.clone();
    v["recorded_at"] = recorded_at.into();
    serde_json::from_value(v).context("reading an event the server sent")
}

/// A query as the API's list of items.
fn items_of(query: &EventQuery) -> Value {
    json!(query
        .items
        .iter()
        .map(|i| json!({"types": i.types, "tags": i.tags}))
        .collect::<Vec<_>>())
}

#[async_trait]
impl EventOps for Remote {
    async fn submit(&self, append: EventAppend) -> anyhow::Result<AppendOutcome> {
        let body = json!({
            "events": append.events.iter().map(|e| json!({"type": e.kind, "tags": e.tags,
                "payload": e.payload, "metadata": e.metadata})).collect::<Vec<_>>(),
            "condition": append.condition.as_ref().map(|c| json!({
                "fail_if_events_match": items_of(&c.fail_if_events_match),
                "after": c.after.map(|p| p.0)})),
            "idempotency_key": append.idempotency_key,
        });
        let url = format!("{}/v1/events", self.base);
        let mut request = self.http.post(&url).json(&body).timeout(REQUEST_TIMEOUT);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .with_context(|| format!("calling {url}"))?;
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        let position = |key: &str| Position(answer[key].as_u64().unwrap_or(0));
        match status.as_u16() {
            201 => Ok(AppendOutcome::Appended {
                first: position("first"),
                last: position("last"),
            }),
            200 => Ok(AppendOutcome::Duplicate {
                first: position("first"),
                last: position("last"),
            }),
            409 if answer["position"].is_u64() => Ok(AppendOutcome::Conflict {
                position: position("position"),
            }),
            _ => bail!(
                "{}",
                answer["detail"]
                    .as_str()
                    .map_or_else(|| format!("{status}: {answer}"), str::to_string)
            ),
        }
    }

    async fn read(&self, read: EventRead) -> anyhow::Result<Vec<StoredEvent>> {
        let body = json!({"query": items_of(&read.query), "after": read.after.map(|p| p.0),
            "before": read.before.map(|p| p.0), "limit": read.limit,
            "direction": if read.direction == Direction::Backward { "backward" } else { "forward" }});
        let page = self.post("/v1/events/query", body).await?;
        items(page["events"].clone()).iter().map(stored).collect()
    }

    async fn head(&self) -> anyhow::Result<Position> {
        let page = self.get("/v1/events?limit=1&direction=backward").await?;
        Ok(Position(page["head"].as_u64().unwrap_or(0)))
    }

    fn follow(
        &self,
        query: EventQuery,
        after: Option<Position>,
    ) -> anyhow::Result<BoxStream<'static, anyhow::Result<StoredEvent>>> {
        // The stream takes one item of types (any) and tags (all), as flags give it.
        if query.items.len() > 1 {
            bail!(
                "following a query of several items needs the database: give one --type/--tag set"
            );
        }
        let item = query.items.first().cloned().unwrap_or_default();
        let mut url = format!(
            "{}/v1/events/stream?after={}",
            self.base,
            after.map_or(0, |p| p.0)
        );
        if !item.types.is_empty() {
            url.push_str(&format!("&types={}", enc(&item.types.join(","))));
        }
        if !item.tags.is_empty() {
            url.push_str(&format!("&tags={}", enc(&item.tags.join(","))));
        }
        let (http, token) = (self.http.clone(), self.token.clone());
        // Reconnects after a dropped connection, resuming after the last event seen.
        let stream = futures::stream::unfold(
            (
                String::new(),
                None::<reqwest::Response>,
                Vec::<StoredEvent>::new(),
                None::<u64>,
            ),
            move |(mut buffer, mut response, mut ready, mut last)| {
                let (http, token, url) = (http.clone(), token.clone(), url.clone());
                async move {
                    loop {
                        if !ready.is_empty() {
                            let event = ready.remove(0);
                            return Some((Ok(event), (buffer, response, ready, last)));
                        }
                        let Some(open) = response.as_mut() else {
                            let mut request = http.get(&url);
                            if let Some(id) = last {
                                request = request.header("Last-Event-ID", id.to_string());
                            }
                            if let Some(token) = &token {
                                request = request.bearer_auth(token);
                            }
                            match request.send().await {
                                Ok(r) if r.status().is_success() => response = Some(r),
                                Ok(r) => {
                                    let e = anyhow::anyhow!("the server answered {}", r.status());
                                    return Some((Err(e), (buffer, None, ready, last)));
                                }
                                Err(e) => {
                                    tokio::time::sleep(Duration::from_secs(1)).await;
                                    return Some((Err(e.into()), (buffer, None, ready, last)));
                                }
                            }
                            continue;
                        };
                        match open.chunk().await {
                            Ok(Some(chunk)) => {
                                buffer.push_str(&String::from_utf8_lossy(&chunk));
                                while let Some(end) = buffer.find("\n\n") {
                                    let message: String = buffer.drain(..end + 2).collect();
                                    let data =
                                        message.lines().find_map(|l| l.strip_prefix("data: "));
                                    if let Some(data) = data {
                                        let parsed = serde_json::from_str::<Value>(data)
                                            .map_err(anyhow::Error::from)
                                            .and_then(|v| stored(&v));
                                        match parsed {
                                            Ok(e) => {
                                                last = Some(e.position.0);
                                                ready.push(e);
                                            }
                                            Err(e) => {
                                                return Some((
                                                    Err(e),
                                                    (buffer, response, ready, last),
                                                ))
                                            }
                                        }
                                    }
                                }
                            }
                            // Dropped: connect again after the last event seen.
                            Ok(None) | Err(_) => {
                                response = None;
                                buffer.clear();
                                tokio::time::sleep(Duration::from_millis(200)).await;
                            }
                        }
                    }
                }
            },
        );
        Ok(stream.boxed())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_escaped_in_paths() {
        assert_eq!(super::enc("order/7 x"), "order%2F7%20x");
        assert_eq!(super::enc("plain-id_1.2~"), "plain-id_1.2~");
    }
}
