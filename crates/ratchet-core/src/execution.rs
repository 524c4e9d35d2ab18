use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::task::{waker, ArcWake};
use serde_json::Value;

use crate::context::{lock, State};
use crate::{
    BoxedOrchestration, ErrorInfo, HistoryEvent, OrchestrationContext, OrchestrationError,
    Timestamp,
};

/// Limits that keep one instance from growing without bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most steps (activities, timers, sub-orchestrations) one turn may schedule.
    pub max_fan_out: usize,
    /// Most events one execution's history may hold; continue-as-new starts afresh.
    pub max_history: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_fan_out: 10_000,
            max_history: 50_000,
        }
    }
}

/// How an execution stands after a turn.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TurnOutcome {
    /// Still running; waiting for completions, timers or signals.
    Running,
    /// Returned successfully.
    Completed(Value),
    /// Failed: the code returned an error, replay found nondeterminism, or a limit was hit.
    Failed(ErrorInfo),
    /// Ended after cancellation was requested, with whatever the code returned.
    Cancelled {
        /// The output, if the code returned one.
        output: Option<Value>,
        /// The error, if the code returned one.
        error: Option<ErrorInfo>,
    },
    /// Asked to continue as new with this input.
    ContinueAsNew(Value),
}

impl TurnOutcome {
    /// True for every outcome but `Running`.
    pub fn is_final(&self) -> bool {
        !matches!(self, Self::Running)
    }
}

/// What one turn produced: the events to append to history, in order, and the outcome.
#[derive(Clone, Debug)]
pub struct Turn {
    /// `TurnStarted`, the inbound events consumed, then the outbound events.
    pub events: Vec<HistoryEvent>,
    /// Where the execution stands.
    pub outcome: TurnOutcome,
}

impl Turn {
    /// The outbound events the code produced this turn (what the runtime must act on).
    pub fn outbound(&self) -> impl Iterator<Item = &HistoryEvent> {
        self.events
            .iter()
            .filter(|e| !e.is_inbound() && !matches!(e, HistoryEvent::TurnStarted { .. }))
    }
}

/// Replay found that the code no longer matches history.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("nondeterminism at history position {position}: {detail}")]
pub struct Nondeterminism {
    /// Index of the disagreeing event in the execution's history.
    pub position: usize,
    /// What history holds versus what the code asked for.
    pub detail: String,
}

impl Nondeterminism {
    /// The structured error stored on the failed instance.
    pub fn to_info(&self) -> ErrorInfo {
        ErrorInfo::new("Nondeterminism", self.to_string())
    }
}

struct WakeFlag(AtomicBool);

impl ArcWake for WakeFlag {
    fn wake_by_ref(arc_self: &Arc<Self>) {
        arc_self.0.store(true, Ordering::SeqCst);
    }
}

/// One live execution of an orchestration: its future and the state its steps wait on.
///
/// Build it, [`replay`](Self::replay) the history already stored (empty for a new instance),
/// then call [`turn`](Self::turn) with each batch of new inbound events. Keeping an `Execution`
/// in memory between turns (the runtime's sticky cache) makes a turn cost only the new events.
pub struct Execution {
    orchestration: BoxedOrchestration,
    state: Arc<Mutex<State>>,
    future: Option<BoxFuture<'static, Result<Value, OrchestrationError>>>,
    flag: Arc<WakeFlag>,
    history_len: usize,
    outcome: TurnOutcome,
    limits: Limits,
    /// What the code's last poll panicked with: the turn fails the execution (or, in a
    /// replay, the replay fails) instead of the panic unwinding into whoever runs turns,
    /// a worker's loop or the group commit that also carries other instances' work.
    panicked: Option<String>,
}

/// Why running a turn's code went wrong.
enum RunError {
    /// A replay's code disagrees with history: the offset and what differs.
    Mismatch(usize, String),
    /// The code panicked, with this message.
    Panicked(String),
}

/// The message of a caught panic.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

impl Execution {
    /// A fresh execution of `orchestration` for `instance`, execution number `execution`.
    pub fn new(
        orchestration: BoxedOrchestration,
        instance: &str,
        incarnation: i64,
        execution: u32,
        limits: Limits,
    ) -> Self {
        Self {
            orchestration,
            state: Arc::new(Mutex::new(State::new(
                instance.to_string(),
                incarnation,
                execution,
                limits.max_fan_out,
            ))),
            future: None,
            flag: Arc::new(WakeFlag(AtomicBool::new(false))),
            history_len: 0,
            outcome: TurnOutcome::Running,
            limits,
            panicked: None,
        }
    }

    /// Events in this execution's history so far.
    pub fn history_len(&self) -> usize {
        self.history_len
    }

    /// Where the execution stands after the last turn.
    pub fn outcome(&self) -> &TurnOutcome {
        &self.outcome
    }

    /// Signals delivered but not yet consumed by the code, in arrival order; continue-as-new
    /// carries them over to the next execution so none is lost.
    pub fn unconsumed_signals(&self) -> Vec<HistoryEvent> {
        lock(&self.state).unconsumed_signals()
    }

    /// Re-executes the code against stored history, turn by turn, checking that it makes the
    /// same decisions.
    ///
    /// # Errors
    ///
    /// [`Nondeterminism`] names the first position where code and history disagree.
    pub fn replay(&mut self, history: &[HistoryEvent]) -> Result<(), Nondeterminism> {
        let mut start = 0;
        while start < history.len() {
            let at = match &history[start] {
                HistoryEvent::TurnStarted { at } => *at,
                other => {
                    return Err(Nondeterminism {
                        position: start + self.history_len,
                        detail: format!("history holds {} where a turn should start", other.kind()),
                    })
                }
            };
            let end = history[start + 1..]
                .iter()
                .position(|e| matches!(e, HistoryEvent::TurnStarted { .. }))
                .map_or(history.len(), |i| start + 1 + i);
            let body = &history[start + 1..end];
            let inbound: Vec<HistoryEvent> =
                body.iter().filter(|e| e.is_inbound()).cloned().collect();
            let outbound: Vec<HistoryEvent> =
                body.iter().filter(|e| !e.is_inbound()).cloned().collect();
            let first_outbound = start + 1 + inbound.len();
            self.run(at, &inbound, Some(outbound))
                .map_err(|e| match e {
                    RunError::Mismatch(offset, detail) => Nondeterminism {
                        position: self.history_len + first_outbound + offset,
                        detail,
                    },
                    RunError::Panicked(message) => Nondeterminism {
                        position: self.history_len + first_outbound,
                        detail: format!("the code panicked while replaying: {message}"),
                    },
                })?;
            start = end;
        }
        self.history_len += history.len();
        Ok(())
    }

    /// Runs one turn: delivers `inbound`, polls the code until it can make no progress and
    /// returns the events to append and the outcome. A turn that breaks a limit fails the
    /// execution instead of scheduling anything.
    pub fn turn(&mut self, at: Timestamp, inbound: Vec<HistoryEvent>) -> Turn {
        if self.outcome.is_final() {
            return Turn {
                events: Vec::new(),
                outcome: self.outcome.clone(),
            };
        }
        let outbound = match self.run(at, &inbound, None) {
            Ok(outbound) => outbound,
            Err(RunError::Mismatch(_, detail)) => {
                return self.fail_turn(at, inbound, ErrorInfo::new("Nondeterminism", detail))
            }
            Err(RunError::Panicked(message)) => {
                return self.fail_turn(
                    at,
                    inbound,
                    ErrorInfo::new("Panicked", format!("the orchestration panicked: {message}")),
                )
            }
        };
        let limit = lock(&self.state).limit_error.take();
        let total = self.history_len + 1 + inbound.len() + outbound.len();
        let limit = limit.or_else(|| {
            (total > self.limits.max_history).then(|| {
                format!(
                    "history would hold {total} events, over the limit of {}",
                    self.limits.max_history
                )
            })
        });
        if let Some(message) = limit {
            return self.fail_turn(at, inbound, OrchestrationError::Limit { message }.to_info());
        }
        let mut events = Vec::with_capacity(1 + inbound.len() + outbound.len());
        events.push(HistoryEvent::TurnStarted { at });
        events.extend(inbound);
        events.extend(outbound);
        self.history_len += events.len();
        Turn {
            events,
            outcome: self.outcome.clone(),
        }
    }

    /// A turn that consumes `inbound` and fails the execution with `error`, scheduling nothing.
    pub fn fail_turn(
        &mut self,
        at: Timestamp,
        inbound: Vec<HistoryEvent>,
        error: ErrorInfo,
    ) -> Turn {
        let mut events = Vec::with_capacity(inbound.len() + 2);
        events.push(HistoryEvent::TurnStarted { at });
        events.extend(inbound);
        events.push(HistoryEvent::ExecutionFailed {
            error: error.clone(),
        });
        self.history_len += events.len();
        self.future = None;
        self.outcome = TurnOutcome::Failed(error.clone());
        Turn {
            events,
            outcome: TurnOutcome::Failed(error),
        }
    }

    /// Delivers `inbound`, polls, and returns the outbound events; during replay checks them
    /// against `expected` and returns the offset and description of the first disagreement.
    fn run(
        &mut self,
        at: Timestamp,
        inbound: &[HistoryEvent],
        expected: Option<Vec<HistoryEvent>>,
    ) -> Result<Vec<HistoryEvent>, RunError> {
        let replaying = expected.is_some();
        lock(&self.state).begin_turn(at, expected);
        for event in inbound {
            if let HistoryEvent::ExecutionStarted { input, .. } = event {
                if self.future.is_none() && !self.outcome.is_final() {
                    let ctx = OrchestrationContext::new(self.state.clone());
                    let orchestration = &self.orchestration;
                    let input = input.clone();
                    match catch_unwind(AssertUnwindSafe(|| orchestration(ctx, input))) {
                        Ok(future) => self.future = Some(future),
                        Err(payload) => self.panicked = Some(panic_message(payload.as_ref())),
                    }
                    self.flag.0.store(true, Ordering::SeqCst);
                }
            } else {
                lock(&self.state).deliver(event);
            }
        }
        self.poll_until_stuck();
        if let Some(message) = self.panicked.take() {
            // What the code asked for before it panicked is dropped with it.
            lock(&self.state).produced.clear();
            return Err(RunError::Panicked(message));
        }
        let mut s = lock(&self.state);
        if replaying {
            if let Some((offset, detail)) = s.mismatch.take() {
                return Err(RunError::Mismatch(offset, detail));
            }
            if let Some(held) = s.expected_remaining() {
                let detail = format!(
                    "history holds {} but the code asked for nothing more this turn",
                    held.describe()
                );
                return Err(RunError::Mismatch(s.cursor(), detail));
            }
        }
        s.expected = None;
        Ok(std::mem::take(&mut s.produced))
    }

    fn poll_until_stuck(&mut self) {
        let Some(future) = self.future.as_mut() else {
            return;
        };
        let waker = waker(self.flag.clone());
        let mut cx = Context::from_waker(&waker);
        // Leaf steps wake the flag when their result arrives; combinators such as
        // `FuturesUnordered` only re-poll children that were woken, so poll until quiet.
        for _ in 0..100_000 {
            self.flag.0.store(false, Ordering::SeqCst);
            let polled = catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
            let polled = match polled {
                Ok(polled) => polled,
                Err(payload) => {
                    self.future = None;
                    self.panicked = Some(panic_message(payload.as_ref()));
                    return;
                }
            };
            match polled {
                Poll::Ready(result) => {
                    self.future = None;
                    let outcome = self.finish(result);
                    self.outcome = outcome;
                    return;
                }
                Poll::Pending if self.flag.0.load(Ordering::SeqCst) => continue,
                Poll::Pending => return,
            }
        }
    }

    fn finish(&mut self, result: Result<Value, OrchestrationError>) -> TurnOutcome {
        let mut s = lock(&self.state);
        let cancelled = s.cancel_requested();
        let (outcome, event) = match result {
            Err(OrchestrationError::ContinueAsNew { input }) if !cancelled => (
                TurnOutcome::ContinueAsNew(input.clone()),
                HistoryEvent::ContinuedAsNew { input },
            ),
            Ok(output) if cancelled => (
                TurnOutcome::Cancelled {
                    output: Some(output.clone()),
                    error: None,
                },
                HistoryEvent::ExecutionCancelled {
                    output: Some(output),
                    error: None,
                },
            ),
            Err(e) if cancelled => {
                let error = crate::limits::bounded_error(e.to_info());
                (
                    TurnOutcome::Cancelled {
                        output: None,
                        error: Some(error.clone()),
                    },
                    HistoryEvent::ExecutionCancelled {
                        output: None,
                        error: Some(error),
                    },
                )
            }
            Ok(output) => (
                TurnOutcome::Completed(output.clone()),
                HistoryEvent::ExecutionCompleted { output },
            ),
            Err(e) => {
                let error = crate::limits::bounded_error(e.to_info());
                (
                    TurnOutcome::Failed(error.clone()),
                    HistoryEvent::ExecutionFailed { error },
                )
            }
        };
        s.emit(event);
        outcome
    }
}
