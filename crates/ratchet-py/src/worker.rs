//! Task workers in Python: the Rust runtime claims, heartbeats and completes tasks in batches;
//! Python takes the claimed tasks a batch at a time (`next_batch`) and hands their results
//! back a batch at a time (`complete`), so a batch costs two crossings, not two per task.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3_async_runtimes::tokio::future_into_py;
use ratchet::{
    ActivityContext, ActivityError, OrchestrationContext, QueueConfig, Ratchet, TaskContext,
    TaskError,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::client::Location;
use crate::convert::{parse, seconds, text};
use crate::error::{invalid, to_py, Closed};

/// What a handler answers: its output, or an error.
type Reply = Result<Value, TaskError>;

/// What goes to Python: a claimed task, or word that a running one was cancelled.
enum Msg {
    Job(Job),
    Cancelled(i64),
}

/// Tells Python that a handler stopped waiting for its answer (the task was cancelled, or its
/// lease lost and the wait dropped) unless disarmed by the answer: so the handler gets
/// CancelledError at its next await instead of running on for nothing.
struct CancelOnDrop {
    tx: mpsc::UnboundedSender<Msg>,
    id: i64,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.tx.send(Msg::Cancelled(self.id));
        }
    }
}

/// A claimed task on its way to Python.
struct Job {
    id: i64,
    name: String,
    attempt: u32,
    input: Value,
    reply: oneshot::Sender<Reply>,
}

/// The most tasks of one queue a worker runs at once or claims ahead, and the most it hands
/// Python in one batch: far more than a process can use, far below what its semaphores can
/// count. Python reads it as `_ratchet.MAX_PER_WORKER`.
pub(crate) const MAX_PER_WORKER: usize = 1_000_000;

/// A running worker: a Rust runtime whose task handlers wait for Python's answers.
#[pyclass(module = "ratchet._ratchet", frozen)]
pub(crate) struct NativeWorker {
    ratchet: Arc<Ratchet>,
    /// Registers newly applied declarative workflows while the worker runs.
    stored: tokio::task::JoinHandle<()>,
    jobs: Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Msg>>>,
    /// Replies awaited, by the key Python was given.
    pending: Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>,
    next_key: Arc<AtomicU64>,
}

/// Starts a worker on the store at `url` that runs the tasks `names` on `queues` (name,
/// concurrency, prefetch), the activities `activities` and the workflows `workflows` (name,
/// function): an awaitable of the worker.
#[pyfunction]
#[pyo3(signature = (url, names, queues, schema=None, label=None, activities=Vec::new(), workflows=Vec::new(), json=None, lease=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_worker(
    py: Python<'_>,
    url: String,
    names: Vec<String>,
    queues: Vec<(String, usize, Option<usize>)>,
    schema: Option<String>,
    label: Option<String>,
    activities: Vec<String>,
    workflows: Vec<(String, Py<PyAny>)>,
    json: Option<Py<PyAny>>,
    lease: Option<f64>,
) -> PyResult<Bound<'_, PyAny>> {
    if names.is_empty() && activities.is_empty() && workflows.is_empty() {
        return Err(invalid(
            "a worker needs at least one task, activity or workflow",
        ));
    }
    let (tx, rx) = mpsc::unbounded_channel::<Msg>();
    let location = Location::of(&url, schema)?;
    let mut config = ratchet::RuntimeConfig {
        label,
        ..ratchet::RuntimeConfig::default()
    };
    if let Some(lease) = lease {
        config.lease = seconds(lease, "lease")?;
        if config.lease < Duration::from_millis(500) {
            return Err(invalid(format!(
                "lease: expected at least 0.5 seconds, got {lease}"
            )));
        }
        config.heartbeat = config.lease / 3;
    }
    let mut b = Ratchet::builder().config(config);
    for name in &names {
        let tx = tx.clone();
        b = b.task(name, move |ctx: TaskContext, input: Value| {
            let tx = tx.clone();
            async move {
                let (reply, answer) = oneshot::channel();
                let job = Job {
                    id: ctx.id(),
                    name: ctx.name().to_string(),
                    attempt: ctx.attempt(),
                    input,
                    reply,
                };
                if tx.send(Msg::Job(job)).is_err() {
                    return Err(TaskError::new("WorkerStopped", "the Python worker has stopped"));
                }
                let mut guard = CancelOnDrop {
                    tx: tx.clone(),
                    id: ctx.id(),
                    armed: true,
                };
                tokio::select! {
                    answered = answer => {
                        guard.armed = false;
                        answered.unwrap_or_else(|_| {
                            Err(TaskError::new("WorkerStopped", "the Python worker dropped the task"))
                        })
                    }
                    () = ctx.cancelled() => Err(TaskError::new("Cancelled", "the task was cancelled")),
                }
            }
        });
    }
    for name in &activities {
        let tx = tx.clone();
        b = b.activity(name, move |ctx: ActivityContext, input: Value| {
            let tx = tx.clone();
            async move {
                let (reply, answer) = oneshot::channel();
                let job = Job {
                    id: ctx.task_id(),
                    name: ctx.name().to_string(),
                    attempt: ctx.attempt(),
                    input,
                    reply,
                };
                let stopped =
                    || ActivityError::new("WorkerStopped", "the Python worker has stopped");
                if tx.send(Msg::Job(job)).is_err() {
                    return Err(stopped());
                }
                let mut guard = CancelOnDrop {
                    tx: tx.clone(),
                    id: ctx.task_id(),
                    armed: true,
                };
                let answered = answer.await;
                guard.armed = false;
                answered.unwrap_or_else(|_| Err(stopped()))
            }
        });
    }
    if !workflows.is_empty() {
        let json = Arc::new(json.ok_or_else(|| invalid("workflows need the JSON encoder"))?);
        for (name, function) in workflows {
            let function = Arc::new(function);
            let json = json.clone();
            b = b.orchestration(&name, move |ctx: OrchestrationContext, input: Value| {
                crate::workflow::drive(function.clone(), json.clone(), ctx, input)
            });
        }
    }
    for (queue, concurrency, prefetch) in queues {
        let bad = |what: &str, n: usize, least: usize| {
            (n < least || n > MAX_PER_WORKER).then(|| {
                invalid(format!(
                    "queue {queue:?}: {what} must be from {least} to {MAX_PER_WORKER}, got {n}"
                ))
            })
        };
        if let Some(e) = bad("concurrency", concurrency, 1)
            .or_else(|| prefetch.and_then(|p| bad("prefetch", p, 0)))
        {
            return Err(e);
        }
        let mut config = QueueConfig::with_concurrency(concurrency);
        if let Some(prefetch) = prefetch {
            config.prefetch = prefetch;
        }
        b = b.queue_with(&queue, config);
    }
    future_into_py(py, async move {
        let store = location.open().await.map_err(to_py)?;
        let ratchet = b.store(store.clone()).start().await.map_err(to_py)?;
        // The declarative workflows applied to the store run here too.
        let stored = ratchet::workflow::keep_registered(store, ratchet.client().clone())
            .await
            .map_err(|e| to_py(ratchet::Error::Store(e)))?;
        Ok(NativeWorker {
            ratchet: Arc::new(ratchet),
            stored,
            jobs: Arc::new(tokio::sync::Mutex::new(rx)),
            pending: Arc::new(Mutex::new(HashMap::new())),
            next_key: Arc::new(AtomicU64::new(1)),
        })
    })
}

#[pymethods]
impl NativeWorker {
    /// Up to `max` claimed tasks as `(key, task id, name, attempt, input JSON)`, and the ids
    /// of running tasks cancelled since, waiting at most `timeout` seconds for the first of
    /// either (two empty lists when none came).
    fn next_batch<'py>(
        &self,
        py: Python<'py>,
        max: usize,
        timeout: f64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let timeout = seconds(timeout, "timeout")?;
        let jobs = self.jobs.clone();
        let pending = self.pending.clone();
        let keys = self.next_key.clone();
        future_into_py(py, async move {
            let mut rx = jobs.lock().await;
            let mut batch = Vec::new();
            let mut cancelled = Vec::new();
            let mut take = |msg: Msg| match msg {
                Msg::Job(job) => batch.push(job),
                Msg::Cancelled(id) => cancelled.push(id),
            };
            match tokio::time::timeout(timeout, rx.recv()).await {
                Ok(Some(msg)) => take(msg),
                Ok(None) => return Err(Closed::new_err("the worker has shut down")),
                Err(_) => return Ok((Vec::new(), Vec::new())),
            }
            for _ in 1..max.max(1) {
                match rx.try_recv() {
                    Ok(msg) => take(msg),
                    Err(_) => break,
                }
            }
            drop(rx);
            let mut out = Vec::with_capacity(batch.len());
            let mut waiting = pending.lock().map_err(|_| Closed::new_err("poisoned"))?;
            for job in batch {
                // One key per task handed over: 2^64 of them outlast any worker.
                let key = keys.fetch_add(1, Ordering::Relaxed);
                waiting.insert(key, job.reply);
                out.push((key, job.id, job.name, job.attempt, text(&job.input)));
            }
            Ok((out, cancelled))
        })
    }

    /// Hands back results, each `(key, ok, JSON)`: the output when `ok`, else `{kind,
    /// message}`. No I/O here: the runtime commits them in its next batch. Answers how many
    /// were still awaited (a task cancelled meanwhile is not).
    fn complete(&self, results: Vec<(u64, bool, String)>) -> PyResult<usize> {
        let mut replies = Vec::with_capacity(results.len());
        {
            let mut waiting = self
                .pending
                .lock()
                .map_err(|_| Closed::new_err("poisoned"))?;
            for (key, ok, json) in results {
                if let Some(reply) = waiting.remove(&key) {
                    replies.push((reply, ok, json));
                }
            }
        }
        let mut delivered = 0;
        for (reply, ok, json) in replies {
            let answer = if ok {
                match parse(&json, "task output") {
                    Ok(value) => Ok(value),
                    Err(e) => Err(TaskError::new("BadOutput", e.to_string())),
                }
            } else {
                let error: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
                let kind = error["kind"].as_str().unwrap_or("Error").to_string();
                let message = error["message"].as_str().unwrap_or_default().to_string();
                Err(TaskError::new(kind, message))
            };
            if reply.send(answer).is_ok() {
                delivered += 1;
            }
        }
        Ok(delivered)
    }

    /// A client on this worker's runtime: what it starts runs here first, handed over in
    /// memory, and its waits are woken in memory.
    fn client(&self) -> crate::client::NativeClient {
        crate::client::NativeClient::new(self.ratchet.client().clone())
    }

    /// Stops claiming, finishes or gives back what runs, and stops: an awaitable.
    fn shutdown<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let ratchet = self.ratchet.clone();
        let pending = self.pending.clone();
        self.stored.abort();
        future_into_py(py, async move {
            ratchet.shutdown().await;
            // Tasks Python never answered fail now, to be retried elsewhere.
            if let Ok(mut waiting) = pending.lock() {
                waiting.clear();
            }
            Ok(())
        })
    }
}
