//! `ratchet._ratchet`: the native half of the Python package `ratchet`. Every call that waits
//! on the database is a Rust future handed to asyncio as an awaitable, so the GIL is free
//! while it runs; payloads cross as JSON text, encoded and decoded on the Python side.

use pyo3::prelude::*;

mod client;
mod convert;
mod error;
mod worker;
mod workflow;

/// Waits, without the GIL, for the runtime's threads to finish handing their last results to
/// Python: called at interpreter exit (`atexit`), so that none of them is still letting go of
/// the GIL when the interpreter finalizes (which aborts the process).
#[pyfunction]
fn quiesce(py: Python<'_>) {
    py.detach(|| std::thread::sleep(std::time::Duration::from_millis(50)));
}

/// Every operation of the API: `(operationId, method, path)`, the path with `{name}` for
/// each segment a call fills in. The HTTP client sends each call by it.
#[pyfunction]
fn routes() -> Vec<(&'static str, &'static str, &'static str)> {
    ratchet_api::routes::ROUTES
        .iter()
        .map(|r| (r.operation, r.method.as_str(), r.path))
        .collect()
}

/// The module Python imports as `ratchet._ratchet`.
#[pymodule]
fn _ratchet(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(client::connect, m)?)?;
    m.add_function(wrap_pyfunction!(worker::start_worker, m)?)?;
    m.add_function(wrap_pyfunction!(quiesce, m)?)?;
    m.add_function(wrap_pyfunction!(routes, m)?)?;
    m.add_function(wrap_pyfunction!(error::raise_problem, m)?)?;
    m.add_function(wrap_pyfunction!(convert::check_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(convert::check_unix_time, m)?)?;
    m.add("MAX_PER_WORKER", worker::MAX_PER_WORKER)?;
    m.add_class::<client::NativeClient>()?;
    m.add_class::<worker::NativeWorker>()?;
    m.add_class::<workflow::NativeContext>()?;
    error::register(m)?;
    Ok(())
}
