//! Workflows written in Python, replayed by the Rust core. Each Python workflow is an ordinary
//! Ratchet orchestration whose body drives the coroutine: the coroutine's calls on its
//! context schedule steps at once, in program order (so replay sees the same steps in the
//! same order), and each `await` of a step yields to this driver, which awaits the Rust step
//! and resumes the coroutine with its result, or throws its error into it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use pyo3::exceptions::{PyStopIteration, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use ratchet::{ActivityOptions, OrchestrationContext, OrchestrationError, RetryPolicy};
use serde_json::Value;

use crate::convert::{parse, seconds, text};
use crate::error::{ActivityFailed, Cancelled, ChildFailed, ContinueAsNew, InvalidInput};

type StepResult = Result<Value, OrchestrationError>;
type Step = Pin<Box<dyn Future<Output = StepResult> + Send>>;

/// The steps scheduled and not yet awaited, by handle.
#[derive(Default)]
struct Steps {
    next: AtomicU64,
    pending: Mutex<HashMap<u64, Step>>,
}

impl Steps {
    fn add(&self, step: Step) -> u64 {
        let handle = self.next.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(handle, step);
        }
        handle
    }

    fn take(&self, handle: u64) -> Option<Step> {
        self.pending.lock().ok()?.remove(&handle)
    }

    /// Puts back a step that was raced and lost: it runs on, to be awaited later.
    fn put_back(&self, handle: u64, step: Step) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(handle, step);
        }
    }

    /// Takes the steps of `handles`, or none when one of them is no longer pending.
    fn take_all(&self, handles: &[u64]) -> Option<Vec<(u64, Step)>> {
        let mut taken = Vec::with_capacity(handles.len());
        for &handle in handles {
            match self.take(handle) {
                Some(step) => taken.push((handle, step)),
                None => {
                    for (handle, step) in taken {
                        self.put_back(handle, step);
                    }
                    return None;
                }
            }
        }
        Some(taken)
    }
}

/// The context a Python workflow gets (wrapped by `ratchet.WorkflowContext`).
#[pyclass(module = "ratchet._ratchet", frozen)]
pub(crate) struct NativeContext {
    ctx: OrchestrationContext,
    steps: Arc<Steps>,
}

#[pymethods]
impl NativeContext {
    /// Schedules an activity; answers the handle of its step.
    #[pyo3(signature = (name, input, max_attempts=None, retry_delay=None, timeout=None))]
    fn activity(
        &self,
        name: &str,
        input: &str,
        max_attempts: Option<u32>,
        retry_delay: Option<f64>,
        timeout: Option<f64>,
    ) -> PyResult<u64> {
        let input = parse(input, "activity input")?;
        let mut options = ActivityOptions::default();
        if let Some(n) = max_attempts {
            if n == 0 {
                return Err(InvalidInput::new_err("max_attempts: expected at least 1"));
            }
            options.retry = RetryPolicy { ..options.retry }.max_attempts(n);
        }
        if let Some(d) = retry_delay {
            options.retry =
                RetryPolicy { ..options.retry }.initial_interval(seconds(d, "retry_delay")?);
        }
        if let Some(t) = timeout {
            options = options.start_to_close(seconds(t, "timeout")?);
        }
        let step = self.ctx.activity_with::<Value>(name, input, options);
        Ok(self.steps.add(Box::pin(step)))
    }

    /// Schedules a durable timer of `seconds`.
    fn sleep(&self, secs: f64) -> PyResult<u64> {
        let step = self.ctx.sleep(seconds(secs, "sleep")?);
        Ok(self
            .steps
            .add(Box::pin(async move { step.await.map(|()| Value::Null) })))
    }

    /// Waits for the next signal `name`; with `timeout`, answers null when it runs out.
    #[pyo3(signature = (name, timeout=None))]
    fn signal(&self, name: &str, timeout: Option<f64>) -> PyResult<u64> {
        let step: Step = match timeout {
            Some(t) => {
                let wait = self
                    .ctx
                    .signal_timeout::<Value>(name, seconds(t, "timeout")?);
                Box::pin(async move { wait.await.map(Option::unwrap_or_default) })
            }
            None => Box::pin(self.ctx.signal::<Value>(name)),
        };
        Ok(self.steps.add(step))
    }

    /// Starts a child workflow (with `id`, or one derived from this instance).
    #[pyo3(signature = (name, input, id=None))]
    fn child(&self, name: &str, input: &str, id: Option<&str>) -> PyResult<u64> {
        let input = parse(input, "child input")?;
        let step = match id {
            Some(id) => self.ctx.sub_orchestration_with_id::<Value>(name, id, input),
            None => self.ctx.sub_orchestration::<Value>(name, input),
        };
        Ok(self.steps.add(Box::pin(step)))
    }

    /// The recorded time, in milliseconds since the Unix epoch.
    fn now(&self) -> i64 {
        self.ctx.now().as_millis()
    }

    /// A recorded random UUID.
    fn uuid(&self) -> String {
        self.ctx.uuid().to_string()
    }

    /// A recorded random number in [0, 1).
    fn random(&self) -> f64 {
        self.ctx.random()
    }

    /// Whether the patch `name` applies (new code), recorded on first use.
    fn is_patched(&self, name: &str) -> bool {
        self.ctx.is_patched(name)
    }

    /// Sets the custom status (JSON).
    fn set_custom_status(&self, status: &str) -> PyResult<()> {
        self.ctx.set_custom_status(parse(status, "custom status")?);
        Ok(())
    }

    /// Whether this call runs from history.
    fn is_replaying(&self) -> bool {
        self.ctx.is_replaying()
    }

    /// This instance's id.
    fn instance_id(&self) -> String {
        self.ctx.instance_id()
    }
}

/// What the coroutine did when resumed.
enum Yielded {
    /// It awaits one step, all of them, or the first of them.
    One(u64),
    All(Vec<u64>),
    Any(Vec<u64>),
    /// It returned (JSON).
    Returned(String),
    /// It raised.
    Raised(OrchestrationError),
}

/// How the coroutine is resumed.
enum Resume {
    Send(Py<PyAny>),
    Throw(PyErr),
}

/// Runs the Python workflow `function` as the body of an orchestration.
pub(crate) async fn drive(
    function: Arc<Py<PyAny>>,
    json: Arc<Py<PyAny>>,
    ctx: OrchestrationContext,
    input: Value,
) -> StepResult {
    let steps = Arc::new(Steps::default());
    let native = NativeContext {
        ctx: ctx.clone(),
        steps: steps.clone(),
    };
    let input = text(&input);
    let coro: Py<PyAny> = Python::attach(|py| -> PyResult<Py<PyAny>> {
        let native = Py::new(py, native)?;
        function.call1(py, (native, input))
    })
    .map_err(|e| python_error(&ctx, e))?;
    let mut resume = Python::attach(|py| Resume::Send(py.None()));
    loop {
        let yielded = Python::attach(|py| step(py, &coro, &json, &ctx, resume));
        resume = match yielded {
            Yielded::Returned(output) => {
                return serde_json::from_str(&output).map_err(|e| OrchestrationError::Payload {
                    message: format!("the workflow's output is not JSON: {e}"),
                })
            }
            Yielded::Raised(error) => return Err(error),
            Yielded::One(handle) => match steps.take(handle) {
                Some(step) => {
                    let result = step.await;
                    Resume::Send(Python::attach(|py| outcome(py, result)))
                }
                None => Resume::Throw(awaited_already()),
            },
            // Each step's outcome, in order: `ratchet.gather` raises the first failure, and
            // keeps every outcome with its step for a later await.
            Yielded::All(handles) => match steps.take_all(&handles) {
                Some(taken) => {
                    let results =
                        futures::future::join_all(taken.into_iter().map(|(_, step)| step)).await;
                    Resume::Send(Python::attach(|py| {
                        let outcomes: Vec<Py<PyAny>> =
                            results.into_iter().map(|r| outcome(py, r)).collect();
                        outcomes
                            .into_pyobject(py)
                            .map(|l| l.into_any().unbind())
                            .unwrap_or_else(|_| py.None())
                    }))
                }
                None => Resume::Throw(awaited_already()),
            },
            // The first to finish, listed first when several are ready (as `ratchet::race`);
            // the others run on and can be awaited later.
            Yielded::Any(handles) => match steps.take_all(&handles) {
                Some(mut racing) if !racing.is_empty() => {
                    let (index, result) = futures::future::poll_fn(|cx| {
                        for (i, (_, step)) in racing.iter_mut().enumerate() {
                            if let Poll::Ready(result) = step.as_mut().poll(cx) {
                                return Poll::Ready((i, result));
                            }
                        }
                        Poll::Pending
                    })
                    .await;
                    // The winner is done: dropping it drops nothing pending.
                    drop(racing.remove(index));
                    for (handle, step) in racing {
                        steps.put_back(handle, step);
                    }
                    Resume::Send(Python::attach(|py| {
                        (index, outcome(py, result))
                            .into_pyobject(py)
                            .map(|t| t.into_any().unbind())
                            .unwrap_or_else(|_| py.None())
                    }))
                }
                Some(_) => Resume::Throw(PyTypeError::new_err("race() of no steps")),
                None => Resume::Throw(awaited_already()),
            },
        };
    }
}

/// What the coroutine is sent for a finished step: its result as JSON text, or the exception
/// it failed with (raised by the step's `__await__`, and kept with the step).
fn outcome(py: Python<'_>, result: StepResult) -> Py<PyAny> {
    match result {
        Ok(value) => text(&value)
            .into_pyobject(py)
            .map(|s| s.into_any().unbind())
            .unwrap_or_else(|_| py.None()),
        Err(e) => thrown(e).into_value(py).into_any(),
    }
}

/// Thrown into the coroutine for a step it hands back that is no longer pending (the
/// Python side keeps each step's outcome, so only a step misused through the native API).
fn awaited_already() -> PyErr {
    PyTypeError::new_err("this step was awaited already")
}

/// A failed step as the exception thrown into the coroutine.
fn thrown(e: OrchestrationError) -> PyErr {
    let message = e.to_string();
    match e {
        OrchestrationError::Activity { .. } => ActivityFailed::new_err(message),
        OrchestrationError::SubOrchestration { .. } => ChildFailed::new_err(message),
        OrchestrationError::Cancelled { reason } => Cancelled::new_err(reason),
        other => InvalidInput::new_err(other.to_string()),
    }
}

/// Resumes the coroutine once.
fn step(
    py: Python<'_>,
    coro: &Py<PyAny>,
    json: &Py<PyAny>,
    ctx: &OrchestrationContext,
    resume: Resume,
) -> Yielded {
    let coro = coro.bind(py);
    let resumed = match resume {
        Resume::Send(value) => coro.call_method1("send", (value,)),
        Resume::Throw(error) => coro.call_method1("throw", (error.into_value(py),)),
    };
    match resumed {
        Ok(yielded) => read_yield(&yielded).unwrap_or_else(|e| {
            // An await of something that is not a step: thrown back on the next resume would
            // loop; it fails the workflow instead, naming what was awaited.
            Yielded::Raised(OrchestrationError::new("TypeError", e.to_string()))
        }),
        Err(e) if e.is_instance_of::<PyStopIteration>(py) => {
            let value = e
                .value(py)
                .getattr("value")
                .and_then(|v| json.call1(py, (v,)))
                .and_then(|s| s.extract::<String>(py));
            match value {
                Ok(output) => Yielded::Returned(output),
                Err(e) => Yielded::Raised(OrchestrationError::Payload {
                    message: format!("the workflow's output is not JSON-serializable: {e}"),
                }),
            }
        }
        Err(e) => Yielded::Raised(python_error(ctx, e)),
    }
}

/// What the coroutine yielded: `("one", handle)`, `("all", [handles])` or `("any", [handles])`.
fn read_yield(yielded: &Bound<'_, PyAny>) -> PyResult<Yielded> {
    let bad = || {
        PyTypeError::new_err(format!(
            "a workflow can await only its context's steps (ctx.activity, ctx.sleep, \
             ctx.signal, ctx.child, ratchet.gather, ratchet.race), not {}",
            yielded.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    };
    let tuple = yielded.downcast::<PyTuple>().map_err(|_| bad())?;
    if tuple.len() != 2 {
        return Err(bad());
    }
    let kind: String = tuple.get_item(0)?.extract().map_err(|_| bad())?;
    let what = tuple.get_item(1)?;
    match kind.as_str() {
        "ratchet.one" => Ok(Yielded::One(what.extract()?)),
        "ratchet.all" => Ok(Yielded::All(what.extract()?)),
        "ratchet.any" => Ok(Yielded::Any(what.extract()?)),
        _ => Err(bad()),
    }
}

/// An exception the workflow raised, as how the instance ends.
fn python_error(ctx: &OrchestrationContext, e: PyErr) -> OrchestrationError {
    Python::attach(|py| {
        if e.is_instance_of::<Cancelled>(py) {
            return OrchestrationError::Cancelled {
                reason: e.value(py).to_string(),
            };
        }
        if e.is_instance_of::<ContinueAsNew>(py) {
            let input = e
                .value(py)
                .getattr("input")
                .and_then(|i| i.extract::<String>())
                .map_err(|e| e.to_string())
                .and_then(|i| serde_json::from_str::<Value>(&i).map_err(|e| e.to_string()));
            return match input {
                Ok(input) => ctx
                    .continue_as_new::<Value>(input)
                    .err()
                    .unwrap_or_else(|| OrchestrationError::new("ContinueAsNew", "no input")),
                Err(message) => OrchestrationError::Payload { message },
            };
        }
        let kind = e
            .get_type(py)
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "Exception".to_string());
        OrchestrationError::new(kind, e.value(py).to_string())
    })
}
