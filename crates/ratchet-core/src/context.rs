use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::{ActivityOptions, ErrorInfo, HistoryEvent, OrchestrationError, Timestamp, ValueKind};

/// The result of a finished step, as delivered by an inbound event.
#[derive(Clone, Debug)]
pub(crate) enum StepResult {
    Activity(Result<Value, (ErrorInfo, u32)>),
    Timer,
    Sub(Result<Value, ErrorInfo>),
}

/// Live state shared by the context handles and the step futures of one execution.
pub(crate) struct State {
    pub(crate) instance: String,
    /// The life of the instance id (see [`OrchestrationContext::incarnation`]).
    pub(crate) incarnation: i64,
    pub(crate) execution: u32,
    pub(crate) now: Timestamp,
    next_seq: u32,
    results: HashMap<u32, StepResult>,
    step_names: HashMap<u32, String>,
    wakers: HashMap<u32, Waker>,
    /// Buffered signals by name, each with its arrival number so carried-over signals keep order.
    signals: HashMap<String, VecDeque<(u64, Value)>>,
    signals_arrived: u64,
    signal_wakers: Vec<Waker>,
    /// Set once cancellation is requested: steps numbered below `before` are cancelled.
    cancel: Option<(String, u32)>,
    /// Outbound events produced during the current turn.
    pub(crate) produced: Vec<HistoryEvent>,
    /// During replay, the outbound events history holds for the current turn.
    pub(crate) expected: Option<Vec<HistoryEvent>>,
    cursor: usize,
    /// The first disagreement between code and history in this turn.
    pub(crate) mismatch: Option<(usize, String)>,
    patches: HashMap<String, bool>,
    steps_this_turn: usize,
    pub(crate) max_steps_per_turn: usize,
    pub(crate) limit_error: Option<String>,
}

impl State {
    pub(crate) fn new(
        instance: String,
        incarnation: i64,
        execution: u32,
        max_steps_per_turn: usize,
    ) -> Self {
        Self {
            instance,
            incarnation,
            execution,
            now: Timestamp(0),
            next_seq: 0,
            results: HashMap::new(),
            step_names: HashMap::new(),
            wakers: HashMap::new(),
            signals: HashMap::new(),
            signals_arrived: 0,
            signal_wakers: Vec::new(),
            cancel: None,
            produced: Vec::new(),
            expected: None,
            cursor: 0,
            mismatch: None,
            patches: HashMap::new(),
            steps_this_turn: 0,
            max_steps_per_turn,
            limit_error: None,
        }
    }

    pub(crate) fn begin_turn(&mut self, at: Timestamp, expected: Option<Vec<HistoryEvent>>) {
        self.now = at;
        self.produced.clear();
        self.expected = expected;
        self.cursor = 0;
        self.mismatch = None;
        self.steps_this_turn = 0;
    }

    /// The number of outbound events replay still expects this turn.
    pub(crate) fn expected_remaining(&self) -> Option<&HistoryEvent> {
        self.expected.as_ref().and_then(|e| e.get(self.cursor))
    }

    pub(crate) fn cursor(&self) -> usize {
        self.cursor
    }

    pub(crate) fn cancel_requested(&self) -> bool {
        self.cancel.is_some()
    }

    fn take_seq(&mut self) -> u32 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Records an outbound event and, during replay, checks it against history.
    pub(crate) fn emit(&mut self, event: HistoryEvent) {
        if let Some(expected) = &self.expected {
            if self.mismatch.is_none() {
                match expected.get(self.cursor) {
                    Some(held) if same_step(held, &event) => {}
                    Some(held) => {
                        self.mismatch = Some((
                            self.cursor,
                            format!(
                                "history holds {} but the code asked for {}",
                                held.describe(),
                                event.describe()
                            ),
                        ))
                    }
                    None => {
                        self.mismatch = Some((
                            self.cursor,
                            format!(
                            "history holds nothing more for this turn but the code asked for {}",
                            event.describe()
                        ),
                        ))
                    }
                }
            }
            self.cursor += 1;
        }
        self.produced.push(event);
    }

    fn count_step(&mut self) {
        self.steps_this_turn += 1;
        if self.steps_this_turn > self.max_steps_per_turn && self.limit_error.is_none() {
            self.limit_error = Some(format!(
                "the orchestration scheduled more than {} steps in one turn (the fan-out width limit)",
                self.max_steps_per_turn
            ));
        }
    }

    pub(crate) fn deliver(&mut self, event: &HistoryEvent) {
        let (seq, result) = match event {
            HistoryEvent::ActivityCompleted { seq, output } => {
                (*seq, StepResult::Activity(Ok(output.clone())))
            }
            HistoryEvent::ActivityFailed {
                seq,
                error,
                attempts,
            } => (*seq, StepResult::Activity(Err((error.clone(), *attempts)))),
            HistoryEvent::TimerFired { seq } => (*seq, StepResult::Timer),
            HistoryEvent::SubOrchestrationCompleted { seq, output } => {
                (*seq, StepResult::Sub(Ok(output.clone())))
            }
            HistoryEvent::SubOrchestrationFailed { seq, error } => {
                (*seq, StepResult::Sub(Err(error.clone())))
            }
            HistoryEvent::SignalReceived { name, payload } => {
                self.signals_arrived += 1;
                let order = self.signals_arrived;
                self.signals
                    .entry(name.clone())
                    .or_default()
                    .push_back((order, payload.clone()));
                self.signal_wakers.drain(..).for_each(Waker::wake);
                return;
            }
            HistoryEvent::CancelRequested { reason } => {
                if self.cancel.is_none() {
                    // Steps taken before the request fail; later ones (cleanup) run. A request
                    // that arrives before the code took any step cancels every step: none ran
                    // that needs cleaning up, and none should start.
                    let before = if self.next_seq == 0 {
                        u32::MAX
                    } else {
                        self.next_seq
                    };
                    self.cancel = Some((reason.clone(), before));
                    self.wakers.drain().for_each(|(_, w)| w.wake());
                    self.signal_wakers.drain(..).for_each(Waker::wake);
                }
                return;
            }
            _ => return,
        };
        self.results.entry(seq).or_insert(result);
        if let Some(w) = self.wakers.remove(&seq) {
            w.wake();
        }
    }

    /// Signals delivered but not consumed by the code, in arrival order.
    pub(crate) fn unconsumed_signals(&self) -> Vec<HistoryEvent> {
        let mut all: Vec<(u64, HistoryEvent)> = self
            .signals
            .iter()
            .flat_map(|(name, queue)| {
                queue.iter().map(move |(order, payload)| {
                    (
                        *order,
                        HistoryEvent::SignalReceived {
                            name: name.clone(),
                            payload: payload.clone(),
                        },
                    )
                })
            })
            .collect();
        all.sort_by_key(|(order, _)| *order);
        all.into_iter().map(|(_, e)| e).collect()
    }

    fn cancelled_before(&self, seq: u32) -> Option<String> {
        match &self.cancel {
            Some((reason, before)) if seq < *before => Some(reason.clone()),
            _ => None,
        }
    }

    /// A deterministic pseudo-random number for `seq`; the value is recorded in history anyway.
    fn seeded(&self, seq: u32, salt: u8) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (&self.instance, self.incarnation, self.execution, seq, salt).hash(&mut h);
        splitmix(h.finish())
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Whether the code's event stands for the same step as the one history holds. Inputs are not
/// compared, so a changed payload is not a nondeterminism error; a changed name or order is.
fn same_step(held: &HistoryEvent, asked: &HistoryEvent) -> bool {
    use HistoryEvent as E;
    match (held, asked) {
        (
            E::ActivityScheduled {
                seq: a, name: n, ..
            },
            E::ActivityScheduled {
                seq: b, name: m, ..
            },
        ) => a == b && n == m,
        (E::TimerCreated { seq: a, .. }, E::TimerCreated { seq: b, .. }) => a == b,
        (
            E::SubOrchestrationScheduled {
                seq: a,
                name: n,
                instance: i,
                ..
            },
            E::SubOrchestrationScheduled {
                seq: b,
                name: m,
                instance: j,
                ..
            },
        ) => a == b && n == m && i == j,
        (
            E::ValueRecorded {
                seq: a, kind: k, ..
            },
            E::ValueRecorded {
                seq: b, kind: l, ..
            },
        ) => a == b && k == l,
        (E::PatchApplied { name: a }, E::PatchApplied { name: b }) => a == b,
        (
            E::TaskEnqueued {
                seq: a, name: n, ..
            },
            E::TaskEnqueued {
                seq: b, name: m, ..
            },
        ) => a == b && n == m,
        (a, b) => a.kind() == b.kind(),
    }
}

/// The handle orchestration code uses for everything durable.
///
/// Orchestration code must be deterministic: it must not read the clock, randomness, the
/// network or files directly, and must not spawn tasks. Everything that varies goes through
/// this context, which records it in history so that replay after a crash takes the same path.
/// Steps (activities, timers, sub-orchestrations, signal waits) are numbered in the order the
/// code creates them.
#[derive(Clone)]
pub struct OrchestrationContext {
    state: Arc<Mutex<State>>,
}

impl OrchestrationContext {
    pub(crate) fn new(state: Arc<Mutex<State>>) -> Self {
        Self { state }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// This instance's id.
    pub fn instance_id(&self) -> String {
        self.lock().instance.clone()
    }

    /// This life of the instance id: a random number drawn when the id was created, and drawn
    /// again when a finished instance is restarted under the same id (or the id is reused after
    /// a purge); continue-as-new keeps it. Keys derived from a step (`uuid()`, `random()`,
    /// sub-orchestration ids, the event-append step's idempotency key) include it, so two lives
    /// of one id never share them.
    pub fn incarnation(&self) -> i64 {
        self.lock().incarnation
    }

    /// This execution's number (0 for the first, +1 after each continue-as-new).
    pub fn execution(&self) -> u32 {
        self.lock().execution
    }

    /// The current turn's time, recorded in history: the same value on every replay.
    pub fn now(&self) -> Timestamp {
        self.lock().now
    }

    /// True while the code is re-executing steps already in history (useful to silence logs).
    pub fn is_replaying(&self) -> bool {
        self.lock().expected_remaining().is_some()
    }

    /// A UUID recorded in history: the same value on every replay.
    pub fn uuid(&self) -> uuid::Uuid {
        let value = self.record_value(ValueKind::Uuid, |s, seq| {
            let bytes = ((s.seeded(seq, 1) as u128) << 64 | s.seeded(seq, 2) as u128).to_be_bytes();
            Value::String(
                uuid::Builder::from_random_bytes(bytes)
                    .into_uuid()
                    .to_string(),
            )
        });
        value
            .as_str()
            .and_then(|s| uuid::Uuid::parse_str(s).ok())
            .unwrap_or_default()
    }

    /// A number in `[0, 1)` recorded in history: the same value on every replay.
    pub fn random(&self) -> f64 {
        let value = self.record_value(ValueKind::Random, |s, seq| {
            let unit = (s.seeded(seq, 3) >> 11) as f64 / (1u64 << 53) as f64;
            serde_json::json!(unit)
        });
        value.as_f64().unwrap_or(0.0)
    }

    fn record_value(&self, kind: ValueKind, fresh: impl FnOnce(&State, u32) -> Value) -> Value {
        let mut s = self.lock();
        let seq = s.take_seq();
        let value = match s.expected_remaining() {
            Some(HistoryEvent::ValueRecorded {
                seq: held,
                kind: k,
                value,
            }) if *held == seq && *k == kind => value.clone(),
            _ => fresh(&s, seq),
        };
        s.emit(HistoryEvent::ValueRecorded {
            seq,
            kind,
            value: value.clone(),
        });
        value
    }

    /// Versioning: true when this instance runs the code path after the patch `name`.
    ///
    /// New instances (and instances that reach this point for the first time) get `true`, and
    /// the decision is recorded. An instance whose history passed this point before the patch
    /// existed gets `false`, so it keeps following the old path.
    pub fn is_patched(&self, name: &str) -> bool {
        let mut s = self.lock();
        if let Some(known) = s.patches.get(name) {
            return *known;
        }
        // During replay only a recorded marker means the patch was taken; at the end of a
        // replayed turn the old code went on without it.
        let patched = match (s.expected.is_some(), s.expected_remaining()) {
            (_, Some(HistoryEvent::PatchApplied { name: held })) => held == name,
            (true, _) => false,
            (false, _) => true,
        };
        if patched {
            s.emit(HistoryEvent::PatchApplied {
                name: name.to_string(),
            });
        }
        s.patches.insert(name.to_string(), patched);
        patched
    }

    /// True once a client has asked to cancel this instance.
    pub fn is_cancelled(&self) -> bool {
        self.lock().cancel.is_some()
    }

    /// Sets a custom status that clients can read while the instance runs.
    pub fn set_custom_status(&self, status: impl Serialize) {
        let status = serde_json::to_value(status).unwrap_or(Value::Null);
        self.lock().emit(HistoryEvent::CustomStatusSet { status });
    }

    /// Calls an activity with default options; await the result.
    pub fn activity<T: DeserializeOwned>(
        &self,
        name: &str,
        input: impl Serialize,
    ) -> StepFuture<T> {
        self.activity_with(name, input, ActivityOptions::default())
    }

    /// Calls an activity with a retry policy and a start-to-close timeout.
    pub fn activity_with<T: DeserializeOwned>(
        &self,
        name: &str,
        input: impl Serialize,
        options: ActivityOptions,
    ) -> StepFuture<T> {
        let mut s = self.lock();
        let seq = s.take_seq();
        match serde_json::to_value(input) {
            Ok(input) => {
                s.count_step();
                s.step_names.insert(seq, name.to_string());
                s.emit(HistoryEvent::ActivityScheduled {
                    seq,
                    name: name.to_string(),
                    input,
                    options,
                });
                StepFuture::pending(self.state.clone(), seq)
            }
            Err(e) => StepFuture::failed(OrchestrationError::Payload {
                message: format!("input of activity \"{name}\" does not serialize: {e}"),
            }),
        }
    }

    /// Enqueues a standalone task as a step of this orchestration: it is committed with this
    /// turn, exactly once however often the orchestration is replayed. The step does not wait
    /// for the task.
    ///
    /// # Errors
    ///
    /// [`OrchestrationError::Payload`] when the input does not serialize.
    pub fn enqueue_task(
        &self,
        name: &str,
        input: impl Serialize,
        options: crate::TaskOptions,
    ) -> Result<(), OrchestrationError> {
        let input = serde_json::to_value(input).map_err(|e| OrchestrationError::Payload {
            message: format!("input of task \"{name}\" does not serialize: {e}"),
        })?;
        let mut s = self.lock();
        let seq = s.take_seq();
        s.count_step();
        s.emit(HistoryEvent::TaskEnqueued {
            seq,
            name: name.to_string(),
            input,
            options,
        });
        Ok(())
    }

    /// Sleeps on a durable timer for `duration`.
    pub fn sleep(&self, duration: Duration) -> StepFuture<()> {
        let at = self.now().plus(duration);
        self.sleep_until(at)
    }

    /// Sleeps on a durable timer until `at` (a time past the end of the calendar, 9999, is
    /// taken as its end).
    pub fn sleep_until(&self, at: Timestamp) -> StepFuture<()> {
        let at = at.clamped();
        let mut s = self.lock();
        let seq = s.take_seq();
        s.count_step();
        s.emit(HistoryEvent::TimerCreated { seq, fire_at: at });
        StepFuture::pending(self.state.clone(), seq)
    }

    /// Starts a sub-orchestration with an id derived from this step; await its output.
    pub fn sub_orchestration<T: DeserializeOwned>(
        &self,
        name: &str,
        input: impl Serialize,
    ) -> StepFuture<T> {
        self.sub_orchestration_inner(name, None, input)
    }

    /// Starts a sub-orchestration with a chosen instance id; await its output.
    pub fn sub_orchestration_with_id<T: DeserializeOwned>(
        &self,
        name: &str,
        instance: &str,
        input: impl Serialize,
    ) -> StepFuture<T> {
        self.sub_orchestration_inner(name, Some(instance.to_string()), input)
    }

    fn sub_orchestration_inner<T: DeserializeOwned>(
        &self,
        name: &str,
        instance: Option<String>,
        input: impl Serialize,
    ) -> StepFuture<T> {
        let mut s = self.lock();
        let seq = s.take_seq();
        // A derived id names the life too: a restarted parent's children are new instances,
        // not the finished children of its earlier life.
        let instance = instance.unwrap_or_else(|| {
            format!(
                "{}:{:08x}:{}:{}",
                s.instance, s.incarnation as u32, s.execution, seq
            )
        });
        match serde_json::to_value(input) {
            Ok(input) => {
                s.count_step();
                s.step_names.insert(seq, instance.clone());
                s.emit(HistoryEvent::SubOrchestrationScheduled {
                    seq,
                    instance,
                    name: name.to_string(),
                    input,
                });
                StepFuture::pending(self.state.clone(), seq)
            }
            Err(e) => StepFuture::failed(OrchestrationError::Payload {
                message: format!("input of sub-orchestration \"{name}\" does not serialize: {e}"),
            }),
        }
    }

    /// Waits for the next signal named `name`. Signals raised before the wait are buffered in
    /// the order they arrived, so none is lost.
    pub fn signal<T: DeserializeOwned>(&self, name: &str) -> SignalFuture<T> {
        let seq = self.lock().take_seq();
        SignalFuture {
            state: self.state.clone(),
            seq,
            name: name.to_string(),
            _t: PhantomData,
        }
    }

    /// Waits for the next signal named `name` for at most `timeout`: `Ok(None)` on timeout.
    pub fn signal_timeout<T: DeserializeOwned + Send + 'static>(
        &self,
        name: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<T>, OrchestrationError>> + Send + 'static {
        let signal = self.signal::<T>(name);
        let timer = self.sleep(timeout);
        async move {
            match futures::future::select(signal, timer).await {
                futures::future::Either::Left((value, _)) => value.map(Some),
                futures::future::Either::Right((fired, _)) => fired.map(|()| None),
            }
        }
    }

    /// Ends this execution and starts a fresh one with `input` and an empty history. Return the
    /// value from the orchestration: `return ctx.continue_as_new(next)`.
    pub fn continue_as_new<T>(&self, input: impl Serialize) -> Result<T, OrchestrationError> {
        match serde_json::to_value(input) {
            Ok(input) => Err(OrchestrationError::ContinueAsNew { input }),
            Err(e) => Err(OrchestrationError::Payload {
                message: format!("continue-as-new input does not serialize: {e}"),
            }),
        }
    }
}

pub(crate) fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A pending activity, timer or sub-orchestration; resolves when its result is in history.
#[must_use = "a step does nothing for the code until it is awaited"]
pub struct StepFuture<T> {
    state: Option<Arc<Mutex<State>>>,
    seq: u32,
    early: Option<OrchestrationError>,
    _t: PhantomData<fn() -> T>,
}

impl<T> StepFuture<T> {
    fn pending(state: Arc<Mutex<State>>, seq: u32) -> Self {
        Self {
            state: Some(state),
            seq,
            early: None,
            _t: PhantomData,
        }
    }

    fn failed(e: OrchestrationError) -> Self {
        Self {
            state: None,
            seq: 0,
            early: Some(e),
            _t: PhantomData,
        }
    }

    /// The step number this future waits on.
    pub fn step(&self) -> u32 {
        self.seq
    }
}

/// Turns a delivered payload into the type the code asked for.
fn decode<T: DeserializeOwned>(
    value: Value,
    what: impl FnOnce() -> String,
) -> Result<T, OrchestrationError> {
    serde_json::from_value::<T>(value).map_err(|e| OrchestrationError::Payload {
        message: format!("{} does not match the expected type: {e}", what()),
    })
}

impl<T: DeserializeOwned> Future for StepFuture<T> {
    type Output = Result<T, OrchestrationError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Some(e) = self.early.take() {
            return Poll::Ready(Err(e));
        }
        let Some(state) = self.state.clone() else {
            return Poll::Ready(Err(OrchestrationError::Payload {
                message: "step polled after completion".into(),
            }));
        };
        let mut s = lock(&state);
        let seq = self.seq;
        if let Some(result) = s.results.get(&seq).cloned() {
            let name = s.step_names.get(&seq).cloned().unwrap_or_default();
            drop(s);
            return Poll::Ready(match result {
                StepResult::Activity(Ok(v)) => {
                    decode(v, || format!("the output of activity \"{name}\""))
                }
                StepResult::Activity(Err((error, attempts))) => Err(OrchestrationError::Activity {
                    name,
                    error,
                    attempts,
                }),
                StepResult::Timer => decode(Value::Null, || "a timer".to_string()),
                StepResult::Sub(Ok(v)) => {
                    decode(v, || format!("the output of sub-orchestration \"{name}\""))
                }
                StepResult::Sub(Err(error)) => Err(OrchestrationError::SubOrchestration {
                    instance: name,
                    error,
                }),
            });
        }
        if let Some(reason) = s.cancelled_before(seq) {
            return Poll::Ready(Err(OrchestrationError::Cancelled { reason }));
        }
        s.wakers.insert(seq, cx.waker().clone());
        Poll::Pending
    }
}

/// A wait for the next signal of one name.
#[must_use = "a signal wait does nothing until it is awaited"]
pub struct SignalFuture<T> {
    state: Arc<Mutex<State>>,
    seq: u32,
    name: String,
    _t: PhantomData<fn() -> T>,
}

impl<T: DeserializeOwned> Future for SignalFuture<T> {
    type Output = Result<T, OrchestrationError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = lock(&self.state);
        if let Some((_, payload)) = s.signals.get_mut(&self.name).and_then(VecDeque::pop_front) {
            drop(s);
            let name = self.name.clone();
            return Poll::Ready(decode(payload, || {
                format!("the payload of signal \"{name}\"")
            }));
        }
        if let Some(reason) = s.cancelled_before(self.seq) {
            return Poll::Ready(Err(OrchestrationError::Cancelled { reason }));
        }
        s.signal_wakers.push(cx.waker().clone());
        Poll::Pending
    }
}

/// Runs all futures and returns the first to finish with its index. Deterministic: when several
/// are ready, the one listed first wins (unlike `futures::select!`, which picks at random).
pub async fn race<F: Future + Unpin>(futures: Vec<F>) -> (usize, F::Output) {
    let (output, index, _rest) = futures::future::select_all(futures).await;
    (index, output)
}
