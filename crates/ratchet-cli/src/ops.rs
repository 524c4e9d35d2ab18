//! What the commands whose operations are not in `ratchet-api` yet do on a `ratchet server`
//! (`--server`): the events, schedules and `workflows delete` commands. The instances, tasks
//! and queues commands call [`ratchet_api::Api`], in process or over HTTP alike.

use std::time::Duration;

use anyhow::{bail, Context};
use async_trait::async_trait;
use futures::stream::BoxStream;
use futures::StreamExt as _;
use ratchet::{
    AppendOutcome, Direction, EventAppend, EventQuery, EventRead, EventStore, Position,
    StoredEvent, Timestamp,
};
use ratchet_api::REQUEST_TIMEOUT;
use serde_json::{json, Value};

pub(crate) use ratchet_api::routes::escape as enc;

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

/// On a `ratchet server`, over its HTTP API.
pub(crate) struct Remote {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

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

fn items(v: Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items,
        _ => Vec::new(),
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
