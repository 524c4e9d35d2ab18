//! The client: start and steer instances, enqueue and steer tasks, append and read events.
//! Each method returns an awaitable; the work runs on the module's tokio runtime with the
//! GIL released.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;
use ratchet::{
    Client, EnqueueOutcome, EventAppend, EventRead, IfExists, InstanceFilter, InstanceStatus,
    StartOptions, TaskId, TaskRequest,
};
use serde_json::{json, Value};

use crate::convert::{parse, seconds, task, task_options, text, unix_time};
use crate::error::{invalid, to_py};

/// A client on one store.
#[pyclass(module = "ratchet._ratchet", frozen)]
pub(crate) struct NativeClient {
    pub(crate) client: Arc<Client>,
}

/// Where a store is: a `postgres://` or `postgresql://` URL (in `schema` when given), else a
/// SQLite file: a `sqlite:` URL (`sqlite:app.db`, `sqlite:///var/lib/app.db`) or a path
/// (`app.db`, relative to the working directory, is created there when missing).
pub(crate) enum Location {
    Postgres(String, ratchet::PostgresConfig),
    Sqlite(String),
}

impl Location {
    /// Where `url` says the store is.
    ///
    /// # Errors
    ///
    /// `InvalidInput` for an empty location, a URL of any other scheme (`mysql://`, or
    /// `http://` where only the database will do), or what looks like a database URL
    /// without its scheme (`user:pw@host/db`); the message never shows a password.
    pub(crate) fn of(url: &str, schema: Option<String>) -> PyResult<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let mut config = ratchet::PostgresConfig::default();
            if let Some(schema) = schema {
                config.schema = schema;
            }
            return Ok(Self::Postgres(url.to_string(), config));
        }
        let path = match url
            .strip_prefix("sqlite://")
            .or_else(|| url.strip_prefix("sqlite:"))
        {
            Some(path) => path,
            None => {
                if let Some(scheme) = scheme(url) {
                    return Err(invalid(format!(
                        "url: {} is not a store: {scheme}:// is none of postgres://, \
                         postgresql:// (PostgreSQL), sqlite: or a file path (SQLite){}",
                        masked(url),
                        if scheme == "http" || scheme == "https" {
                            "; ratchet.connect() and ratchet.Worker() take a ratchet \
                             server's http(s):// URL, this needs the database"
                        } else {
                            ""
                        }
                    )));
                }
                if url
                    .split('/')
                    .next()
                    .is_some_and(|first| first.contains('@'))
                {
                    return Err(invalid(format!(
                        "url: {} looks like a database URL without its scheme (postgres://); \
                         a SQLite file path has no user or password",
                        masked(url)
                    )));
                }
                url
            }
        };
        if path.is_empty() {
            return Err(invalid(
                "url: empty: give a postgres:// URL or the path of a SQLite file",
            ));
        }
        Ok(Self::Sqlite(path.to_string()))
    }

    /// The store, created or upgraded as needed.
    pub(crate) async fn open(self) -> ratchet::Result<Arc<dyn ratchet::Store>> {
        Ok(match self {
            Self::Postgres(url, config) => {
                Arc::new(ratchet::PostgresStore::connect_with(&url, config).await?)
            }
            Self::Sqlite(path) => Arc::new(ratchet::SqliteStore::open(path).await?),
        })
    }
}

/// The scheme of `url` when it starts with one followed by `//` (RFC 3986: a letter, then
/// letters, digits, `+`, `-` or `.`).
fn scheme(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// `url` as it may be shown: the password of its user info replaced by `***` (however many
/// `@`, `:` or `/` it holds) and its query and fragment left out, since they may carry one
/// too (`?password=`).
fn masked(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    let (head, tail) = rest.split_at(end);
    let head = match head.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{user}:***@{host}"),
            None => format!("{user_info}@{host}"),
        },
        None => head.to_string(),
    };
    let tail = if tail.is_empty() { "" } else { "?..." };
    format!("{scheme}{head}{tail}")
}

/// Opens the store at `url` (created or upgraded as needed): an awaitable of a client.
#[pyfunction]
#[pyo3(signature = (url, schema=None))]
pub(crate) fn connect(
    py: Python<'_>,
    url: String,
    schema: Option<String>,
) -> PyResult<Bound<'_, PyAny>> {
    let location = Location::of(&url, schema)?;
    future_into_py(py, async move {
        // A client that runs nothing here accepts any orchestration or task name: the
        // workers that run them may be anywhere.
        let store = location.open().await.map_err(to_py)?;
        Ok(NativeClient {
            client: Arc::new(Client::new(store)),
        })
    })
}

fn if_exists(policy: &str) -> PyResult<IfExists> {
    match policy {
        "fail" => Ok(IfExists::Fail),
        "use_existing" => Ok(IfExists::UseExisting),
        "restart_if_finished" => Ok(IfExists::RestartIfFinished),
        other => Err(invalid(format!(
            "if_exists: expected fail, use_existing or restart_if_finished, got {other:?}"
        ))),
    }
}

#[pymethods]
impl NativeClient {
    /// Starts an instance of `name` with the JSON `input`; answers its id.
    #[pyo3(signature = (name, input, id=None, if_exists="fail"))]
    fn start<'py>(
        &self,
        py: Python<'py>,
        name: String,
        input: String,
        id: Option<String>,
        if_exists: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let input = parse(&input, "input")?;
        let mut options = StartOptions::default().if_exists(self::if_exists(if_exists)?);
        options.id = id;
        let client = self.client.clone();
        future_into_py(py, async move {
            let handle = client
                .start_with(&name, input, options)
                .await
                .map_err(to_py)?;
            Ok(handle.id().to_string())
        })
    }

    /// Raises the signal `name` with the JSON `payload`; once per `dedup_id` when given.
    /// Answers whether it was raised (false for a repeat).
    #[pyo3(signature = (id, name, payload, dedup_id=None))]
    fn signal<'py>(
        &self,
        py: Python<'py>,
        id: String,
        name: String,
        payload: String,
        dedup_id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let payload = parse(&payload, "payload")?;
        let client = self.client.clone();
        future_into_py(py, async move {
            match dedup_id {
                Some(dedup) => client
                    .signal_once(&id, &name, payload, &dedup)
                    .await
                    .map_err(to_py),
                None => client
                    .signal(&id, &name, payload)
                    .await
                    .map(|()| true)
                    .map_err(to_py),
            }
        })
    }

    /// Asks an instance to cancel.
    fn cancel<'py>(
        &self,
        py: Python<'py>,
        id: String,
        reason: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        future_into_py(py, async move {
            client.cancel(&id, &reason).await.map_err(to_py)
        })
    }

    /// Stops an instance at once.
    fn terminate<'py>(
        &self,
        py: Python<'py>,
        id: String,
        reason: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        future_into_py(py, async move {
            client.terminate(&id, &reason).await.map_err(to_py)
        })
    }

    /// The instance as JSON.
    fn status<'py>(&self, py: Python<'py>, id: String) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        future_into_py(py, async move {
            let record = client.status(&id).await.map_err(to_py)?;
            Ok(text(&record))
        })
    }

    /// Waits up to `timeout` seconds for the instance to finish; its outcome as JSON.
    fn wait<'py>(&self, py: Python<'py>, id: String, timeout: f64) -> PyResult<Bound<'py, PyAny>> {
        let timeout = seconds(timeout, "timeout")?;
        let client = self.client.clone();
        future_into_py(py, async move {
            let outcome = client.wait(&id, timeout).await.map_err(to_py)?;
            Ok(text(&json!({
                "id": outcome.id,
                "status": outcome.status.as_str(),
                "output": outcome.output,
                "error": outcome.error,
            })))
        })
    }

    /// Instances, newest first, as a JSON list.
    #[pyo3(signature = (statuses=Vec::new(), name=None, id_prefix=None, limit=100))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        statuses: Vec<String>,
        name: Option<String>,
        id_prefix: Option<String>,
        limit: u32,
    ) -> PyResult<Bound<'py, PyAny>> {
        let statuses = statuses
            .iter()
            .map(|s| s.parse::<InstanceStatus>().map_err(invalid))
            .collect::<PyResult<Vec<_>>>()?;
        let filter = InstanceFilter {
            statuses,
            name,
            id_prefix,
            limit: Some(limit),
            ..InstanceFilter::default()
        };
        let client = self.client.clone();
        future_into_py(py, async move {
            let records = client.list(filter).await.map_err(to_py)?;
            Ok(text(&records))
        })
    }

    /// The instance's whole history as a JSON list of `{execution, seq, event}`.
    fn history<'py>(&self, py: Python<'py>, id: String) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        future_into_py(py, async move {
            let records = client.history(&id).await.map_err(to_py)?;
            let items: Vec<Value> = records
                .into_iter()
                .map(|r| json!({"execution": r.execution, "seq": r.seq, "event": r.event}))
                .collect();
            Ok(text(&items))
        })
    }

    /// Enqueues tasks in one round trip, all or nothing: each a `(name, input JSON, options
    /// JSON)`. Answers `(id, duplicate)` per task, in order.
    fn enqueue_many<'py>(
        &self,
        py: Python<'py>,
        tasks: Vec<(String, String, String)>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut requests = Vec::with_capacity(tasks.len());
        for (i, (name, input, options)) in tasks.iter().enumerate() {
            let input = parse(input, &format!("input of task {i}"))?;
            let options = task_options(&parse(options, "options")?)?;
            requests.push(
                TaskRequest::new(name, input)
                    .map_err(to_py)?
                    .options(options),
            );
        }
        let client = self.client.clone();
        future_into_py(py, async move {
            let outcomes = client.enqueue_many(requests).await.map_err(to_py)?;
            Ok(outcomes
                .into_iter()
                .map(|o| (o.id().0, matches!(o, EnqueueOutcome::Duplicate(_))))
                .collect::<Vec<_>>())
        })
    }

    /// Standalone tasks, newest first (only ids below `before` when given), as a JSON list.
    #[pyo3(signature = (queue=None, states=Vec::new(), name=None, limit=100, before=None))]
    fn tasks<'py>(
        &self,
        py: Python<'py>,
        queue: Option<String>,
        states: Vec<String>,
        name: Option<String>,
        limit: u32,
        before: Option<i64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let states = states
            .iter()
            .map(|s| s.parse::<ratchet::TaskState>().map_err(invalid))
            .collect::<PyResult<Vec<_>>>()?;
        let filter = ratchet::TaskFilter {
            queue,
            states,
            name,
            limit: Some(limit),
        };
        let client = self.client.clone();
        future_into_py(py, async move {
            let records = client
                .tasks_before(filter, before.map(TaskId))
                .await
                .map_err(to_py)?;
            Ok(text(&records.iter().map(task).collect::<Vec<_>>()))
        })
    }

    /// The task as JSON.
    fn task<'py>(&self, py: Python<'py>, id: i64) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        future_into_py(py, async move {
            let record = client.task(TaskId(id)).await.map_err(to_py)?;
            Ok(text(&task(&record)))
        })
    }

    /// Waits up to `timeout` seconds for the task to finish; the task as JSON.
    fn task_wait<'py>(
        &self,
        py: Python<'py>,
        id: i64,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = seconds(timeout, "timeout")?;
        let client = self.client.clone();
        future_into_py(py, async move {
            let record = client.task_wait(TaskId(id), timeout).await.map_err(to_py)?;
            Ok(text(&task(&record)))
        })
    }

    /// `cancel`, `retry` or `discard` a task.
    fn task_act<'py>(
        &self,
        py: Python<'py>,
        id: i64,
        action: String,
    ) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        future_into_py(py, async move {
            let id = TaskId(id);
            match action.as_str() {
                "cancel" => client.task_cancel(id).await.map(|_| ()),
                "retry" => client.task_retry(id).await,
                "discard" => client.task_discard(id).await,
                other => return Err(invalid(format!("unknown task action {other:?}"))),
            }
            .map_err(to_py)
        })
    }

    /// Compiles a declarative workflow (the Serverless Workflow DSL, YAML or JSON) and stores
    /// it as the next revision of its workflow; answers `(namespace/name, revision,
    /// created)`. Every compile error comes at once, each with its line and column.
    fn apply_workflow<'py>(&self, py: Python<'py>, source: String) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        future_into_py(py, async move {
            let applied = ratchet::workflow::apply(
                client.store().as_ref(),
                &source,
                &ratchet::workflow::Known::default(),
                ratchet::Timestamp::now(),
            )
            .await
            .map_err(|e| match e {
                ratchet::workflow::ApplyError::Changed { .. } => {
                    crate::error::Refused::new_err(e.to_string())
                }
                ratchet::workflow::ApplyError::Store(s) => to_py(ratchet::Error::Store(s)),
                other => invalid(other.to_string()),
            })?;
            // Its own `schedule`, when it has one, makes or updates the schedule named after it.
            ratchet::workflow::sync_schedule(&client, &applied.workflow)
                .await
                .map_err(to_py)?;
            Ok((
                applied.workflow.orchestration_name(),
                applied.revision,
                applied.created,
            ))
        })
    }

    /// A schedule call: `verb` is create, update (with `body`, the JSON object
    /// `convert::schedule_options` reads), pause (`body`: the note), resume, trigger,
    /// backfill (`body`: `[from, to]`, Unix seconds), delete, list or describe (`body`:
    /// `[upcoming, recent]`). Answers JSON: the schedule, a fire, the fires, the schedules,
    /// or the description (times in milliseconds).
    #[pyo3(signature = (verb, name=None, body=None))]
    fn schedule<'py>(
        &self,
        py: Python<'py>,
        verb: String,
        name: Option<String>,
        body: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let client = self.client.clone();
        future_into_py(py, async move {
            let name = name.unwrap_or_default();
            let body = body.unwrap_or_else(|| "null".into());
            let value = |text: &str| -> PyResult<Value> {
                serde_json::from_str(text).map_err(|e| invalid(format!("{verb}: {e}")))
            };
            let answer = match verb.as_str() {
                "create" | "update" => {
                    let options = crate::convert::schedule_options(&value(&body)?)?;
                    let record = if verb == "create" {
                        client.schedule_create(&name, options).await
                    } else {
                        client.schedule_update(&name, options).await
                    };
                    json!(record.map_err(to_py)?)
                }
                "pause" => {
                    let note = value(&body)?.as_str().unwrap_or_default().to_string();
                    json!(client.schedule_pause(&name, &note).await.map_err(to_py)?)
                }
                "resume" => json!(client.schedule_resume(&name).await.map_err(to_py)?),
                "trigger" => json!(client.schedule_trigger_now(&name).await.map_err(to_py)?),
                "backfill" => {
                    let (from, to): (f64, f64) = serde_json::from_value(value(&body)?)
                        .map_err(|e| invalid(format!("backfill: {e}")))?;
                    let from = unix_time(from, "backfill start")?;
                    let to = unix_time(to, "backfill end")?;
                    let fires = client
                        .schedule_backfill(&name, from, to)
                        .await
                        .map_err(to_py)?;
                    json!(fires)
                }
                "delete" => {
                    client.schedule_delete(&name).await.map_err(to_py)?;
                    Value::Null
                }
                "list" => json!(client.schedules().await.map_err(to_py)?),
                "describe" => {
                    let (upcoming, recent): (usize, u32) = serde_json::from_value(value(&body)?)
                        .map_err(|e| invalid(format!("describe: {e}")))?;
                    json!(client
                        .schedule_describe(&name, upcoming, recent)
                        .await
                        .map_err(to_py)?)
                }
                other => return Err(invalid(format!("unknown schedule call {other:?}"))),
            };
            Ok(text(&answer))
        })
    }

    /// Appends events (a JSON `{events, condition, idempotency_key}`), all or none; answers
    /// the first and last positions.
    fn append<'py>(&self, py: Python<'py>, append: String) -> PyResult<Bound<'py, PyAny>> {
        let append: EventAppend =
            serde_json::from_str(&append).map_err(|e| invalid(format!("append: {e}")))?;
        let client = self.client.clone();
        future_into_py(py, async move {
            let done = client.events().append_with(append).await.map_err(to_py)?;
            Ok((done.first.0, done.last.0))
        })
    }

    /// Reads events (a JSON `{query, after, before, limit, direction}`); answers the page as
    /// JSON `{events, head}`.
    fn read<'py>(&self, py: Python<'py>, read: String) -> PyResult<Bound<'py, PyAny>> {
        let read: EventRead =
            serde_json::from_str(&read).map_err(|e| invalid(format!("read: {e}")))?;
        let client = self.client.clone();
        future_into_py(py, async move {
            let page = client.events().read_with(read).await.map_err(to_py)?;
            Ok(text(&json!({"events": page.events, "head": page.head})))
        })
    }
}
