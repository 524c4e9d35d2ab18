//! The deterministic heart of Ratchet: history events, the orchestration context, and replay.
//!
//! This crate does no I/O and needs no async runtime. An [`Execution`] holds one orchestration's
//! live future; the runtime feeds it the inbound events of a turn (start, activity results,
//! timer firings, signals, cancellation) and gets back the events to append to history and the
//! outcome. Because every source of variation goes through the [`OrchestrationContext`] and is
//! recorded, replaying the history after a crash drives the code down the same path; when it
//! does not, [`Nondeterminism`] names the event position and both sides.
#![deny(missing_docs)]

mod context;
mod error;
mod event;
mod execution;
pub mod limits;
mod options;
mod orchestration;
mod time;

pub use context::{race, OrchestrationContext, SignalFuture, StepFuture};
pub use error::{ActivityError, OrchestrationError, TaskError};
pub use event::{ErrorInfo, HistoryEvent, ParentRef, ValueKind};
pub use execution::{Execution, Limits, Nondeterminism, Turn, TurnOutcome};
pub use options::{ActivityOptions, RetryPolicy, TaskOptions};
pub use orchestration::{boxed_orchestration, input_check, BoxedOrchestration, InputCheck};
pub use time::Timestamp;

/// Runs all futures to completion and returns their outputs in order.
pub use futures::future::join_all;
