//! Running one orchestration turn: from a leased instance and its inbox events to a commit.

use std::sync::Arc;

use ratchet_core::{
    ErrorInfo, Execution, HistoryEvent, OrchestrationError, ParentRef, Timestamp, Turn, TurnOutcome,
};
use ratchet_store::{
    parent_event, ClaimedInstance, CommitStart, ContinueAsNew, CreateOutcome, Fence, IfExists,
    Incarnation, InstanceStatus, LeaseRelease, NewInboxEvent, NewInstance, NewTask, StoreError,
    TaskOwner, TurnCommit, TurnResult,
};
use serde_json::Value;
use tracing::Instrument as _;

use crate::cache::Cached;
use crate::hub::InstanceOutcome;
use crate::registry::OrchestrationEntry;
use crate::runtime::Shared;
use crate::worker;

/// The turns of instances leased here by a commit or a start (handed over on a channel, so
/// the committer and the client need not know how a turn runs): each runs on its own task.
pub(crate) async fn run_locked(
    shared: Arc<Shared>,
    mut locked: tokio::sync::mpsc::UnboundedReceiver<ClaimedInstance>,
) {
    while let Some(claimed) = locked.recv().await {
        spawn(shared.clone(), claimed);
    }
}

/// Runs a turn for `claimed` on its own task.
pub(crate) fn spawn(shared: Arc<Shared>, claimed: ClaimedInstance) {
    let guard = shared.begin_work();
    tokio::spawn(async move {
        let _guard = guard;
        let Ok(_permit) = shared
            .capacity
            .orchestration_slots
            .clone()
            .acquire_owned()
            .await
        else {
            return;
        };
        run(&shared, claimed).await;
    });
}

async fn run(shared: &Arc<Shared>, claimed: ClaimedInstance) {
    let now = shared.now();
    let (mut cached, inbound, replay_error) = match prepare(shared, &claimed, now).await {
        Ok(p) => p,
        Err(message) => {
            tracing::warn!(instance = %claimed.id, %message, "cannot run turn; releasing the instance");
            release(shared, &claimed).await;
            return;
        }
    };
    let (commit, span) = execute(shared, &claimed, &mut cached, inbound, replay_error, now);
    let pending = Pending::before(shared, &claimed, cached, &commit, span, Origin::Leased);
    let answer = shared
        .committer
        .turn(commit)
        .instrument(pending.span.clone())
        .await;
    pending.after(shared, answer).await;
}

/// An activity's result on its way to the group commit, that a turn may run on.
pub(crate) struct FedResult {
    /// Its completion's position among the group commit's.
    pub(crate) at: u32,
    /// The execution of the activity's orchestration.
    pub(crate) execution: u32,
    /// What the orchestration reads.
    pub(crate) event: HistoryEvent,
}

/// Runs the next turn of `instance`, cached here, on the results of its activities that
/// finished in this process and are about to be committed, so that the results and the turn
/// they wake commit together: one commit on the orchestration's path instead of
/// two. The turn holds no lease: it carries its previous turn's fence, which the store finds
/// unchanged only if nothing claimed the instance since, and it is refused unless every
/// result is delivered to it in the same commit. Says what to commit, and what to do with
/// the answer; `None` when the instance is not cached here for the results' execution.
pub(crate) fn fed(
    shared: &Arc<Shared>,
    instance: &str,
    results: Vec<FedResult>,
) -> Option<(TurnCommit, Pending)> {
    let mut cached = shared.cache.take(instance)?;
    if results.iter().any(|r| r.execution != cached.execution) {
        shared.cache.put(instance.to_string(), cached);
        return None;
    }
    let claimed = ClaimedInstance {
        id: instance.to_string(),
        name: cached.name.clone(),
        version: Some(cached.version),
        execution: cached.execution,
        history_len: u32::try_from(cached.exec.history_len()).unwrap_or(u32::MAX),
        fence: cached.fence,
        incarnation: cached.incarnation,
        events: Vec::new(),
    };
    let (positions, inbound): (Vec<u32>, Vec<HistoryEvent>) =
        results.into_iter().map(|r| (r.at, r.event)).unzip();
    let now = shared.now();
    let (mut commit, span) = execute(shared, &claimed, &mut cached, inbound, None, now);
    commit.fed = positions;
    let pending = Pending::before(shared, &claimed, cached, &commit, span, Origin::Fed);
    Some((commit, pending))
}

/// Starts `new` with its first turn run here before anything is written, and commits both in
/// the next group commit: one commit on the orchestration's path instead of two. The turn
/// draws the instance's incarnation itself (its code may use it). If the id is taken, the
/// start's outcome says so and the turn is refused. `entry` is the orchestration's latest
/// version, as a claim would run it.
pub(crate) async fn start_with_first_turn(
    shared: &Arc<Shared>,
    new: NewInstance,
    (version, entry): (u32, OrchestrationEntry),
) -> Result<CreateOutcome, Arc<StoreError>> {
    // Positive, as the stores draw it.
    let incarnation = Incarnation((uuid::Uuid::new_v4().as_u64_pair().0 >> 1) as i64);
    let claimed = ClaimedInstance {
        id: new.id.clone(),
        name: new.name.clone(),
        version: None,
        execution: 0,
        history_len: 0,
        fence: Fence(0),
        incarnation,
        events: Vec::new(),
    };
    let mut cached = fresh(shared, &claimed, version, &entry);
    cached.trace.clone_from(&new.trace);
    let inbound = vec![HistoryEvent::ExecutionStarted {
        name: new.name.clone(),
        version,
        input: new.input.clone(),
        parent: None,
        trace: new.trace.clone(),
    }];
    let now = shared.now();
    let (commit, span) = execute(shared, &claimed, &mut cached, inbound, None, now);
    let pending = Pending::before(shared, &claimed, cached, &commit, span, Origin::Start);
    let start = CommitStart {
        instance: new,
        incarnation,
    };
    let answer = shared
        .committer
        .start(start, commit)
        .instrument(pending.span.clone())
        .await;
    match answer {
        Ok((created, turn)) => {
            pending.after(shared, Ok(turn)).await;
            Ok(created)
        }
        Err(e) => {
            pending.after(shared, Err(e.clone())).await;
            Err(e)
        }
    }
}

/// Runs a turn on `inbound` and makes its commit (with the span it ran in).
fn execute(
    shared: &Arc<Shared>,
    claimed: &ClaimedInstance,
    cached: &mut Cached,
    inbound: Vec<HistoryEvent>,
    replay_error: Option<ErrorInfo>,
    now: Timestamp,
) -> (TurnCommit, tracing::Span) {
    let span = tracing::info_span!("ratchet.turn", instance = %claimed.id,
        orchestration = %claimed.name, execution = claimed.execution, events = inbound.len());
    crate::trace::join(&span, cached.trace.as_deref());
    // What this turn starts (activities, children) joins the trace under it.
    let carried = crate::trace::carried(&span, cached.trace.as_deref());
    let inbound_len = inbound.len();
    let started = std::time::Instant::now();
    let turn = span.in_scope(|| match replay_error {
        Some(error) => cached.exec.fail_turn(now, inbound, error),
        None => cached.exec.turn(now, inbound),
    });
    crate::metrics::turn(&claimed.name, started.elapsed());
    let mut commit = build_commit(shared, claimed, cached, turn, inbound_len, now);
    carry_trace(&mut commit, carried, cached.trace.as_ref());
    (commit, span)
}

/// Work a turn starts joins its trace: activities through their task's metadata (which a
/// standalone task may carry too), children through their start, the next execution keeps
/// the instance's.
fn carry_trace(commit: &mut TurnCommit, carried: Option<String>, own: Option<&String>) {
    if let Some(traceparent) = &carried {
        for task in commit.tasks.iter_mut().filter(|t| t.owner.is_some()) {
            task.metadata = Some(serde_json::json!({ crate::trace::TRACEPARENT: traceparent }));
        }
        for child in &mut commit.children {
            child.trace = Some(traceparent.clone());
        }
    }
    if let Some(next) = &mut commit.continue_as_new {
        next.trace = own.cloned();
    }
}

/// How a turn came to run, which decides where its execution is cached and what a failed
/// commit gives back.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Under a lease of this process's: cached before the commit, so that a turn the same
    /// group commit locks for this process finds it; the lease goes back if the commit fails.
    Leased,
    /// On results on their way to the commit, under no lease: cached like a leased one.
    Fed,
    /// On its start: cached once the commit created the instance (until then the id may be
    /// another instance's, cached here).
    Start,
}

/// A turn on its way to the group commit: what to do once its answer comes.
pub(crate) struct Pending {
    instance: String,
    origin: Origin,
    /// The fence it ran under.
    fence: Fence,
    outcome: Option<InstanceOutcome>,
    first_timer: Option<Timestamp>,
    wakes_others: bool,
    /// The span it ran in.
    span: tracing::Span,
    /// A start's execution while it still runs, to cache once the commit created it.
    first: Option<Cached>,
}

impl Pending {
    fn before(
        shared: &Arc<Shared>,
        claimed: &ClaimedInstance,
        mut cached: Cached,
        commit: &TurnCommit,
        span: tracing::Span,
        origin: Origin,
    ) -> Self {
        let running = !commit.status.is_finished() && commit.continue_as_new.is_none();
        let mut first = None;
        if origin == Origin::Start {
            first = running.then_some(cached);
        } else if running {
            cached.fence = claimed.fence;
            shared.cache.put(claimed.id.clone(), cached);
        } else {
            shared.cache.forget(&claimed.id);
        }
        Self {
            instance: claimed.id.clone(),
            origin,
            fence: claimed.fence,
            outcome: outcome_of(&claimed.id, commit),
            first_timer: commit
                .inbox
                .iter()
                .filter(|e| e.instance == claimed.id)
                .map(|e| e.visible_at)
                .min(),
            // Children and a parent's result are work for whoever claims it, this process
            // included.
            wakes_others: !commit.children.is_empty()
                || commit.inbox.iter().any(|e| e.instance != claimed.id)
                || commit.tasks.iter().any(|t| t.owner.is_none()),
            span,
            first,
        }
    }

    /// Acts on the commit's answer: runs the activities leased with it, wakes whoever has work.
    pub(crate) async fn after(
        self,
        shared: &Arc<Shared>,
        answer: Result<TurnResult, Arc<StoreError>>,
    ) {
        let span = self.span.clone();
        self.act(shared, answer).instrument(span).await;
    }

    async fn act(self, shared: &Arc<Shared>, answer: Result<TurnResult, Arc<StoreError>>) {
        match (answer, self.origin) {
            (Ok(TurnResult::Committed { tasks }), _) => {
                if let Some(cached) = self.first {
                    shared.cache.put(self.instance.clone(), cached);
                }
                if let Some(at) = self.first_timer {
                    shared.wake.timer_committed(at);
                }
                worker::spawn_siblings(shared, tasks);
                if self.wakes_others {
                    shared.wake.work.notify_one();
                }
                if let Some(outcome) = self.outcome {
                    shared.hub.publish(&outcome);
                }
            }
            (Ok(_), Origin::Start) => {
                // The id was taken (the start says so), or the instance is there for whoever
                // claims it.
                shared.wake.work.notify_one();
            }
            (Ok(_), Origin::Leased) => {
                crate::metrics::turn_refused();
                shared.cache.forget(&self.instance);
                tracing::debug!(instance = %self.instance, "turn refused: the lease was lost");
            }
            (Ok(_), Origin::Fed) => {
                crate::metrics::turn_refused();
                shared.cache.forget(&self.instance);
                // Its results may wait in the inbox now: claim them.
                tracing::debug!(instance = %self.instance,
                    "fed turn refused: the instance was claimed since, or a result was refused");
                shared.wake.work.notify_one();
            }
            (Err(e), Origin::Start) => {
                tracing::debug!(instance = %self.instance, error = %e, "start failed");
            }
            (Err(e), origin) => {
                tracing::warn!(instance = %self.instance, error = %e, "turn commit failed; the instance will be retried");
                shared.cache.forget(&self.instance);
                if origin == Origin::Leased {
                    release_lease(shared, &self.instance, self.fence).await;
                }
            }
        }
    }
}

async fn release(shared: &Arc<Shared>, claimed: &ClaimedInstance) {
    release_lease(shared, &claimed.id, claimed.fence).await;
}

async fn release_lease(shared: &Arc<Shared>, instance: &str, fence: Fence) {
    let release = LeaseRelease {
        instances: vec![(instance.to_string(), fence)],
        tasks: Vec::new(),
        now: shared.now(),
    };
    if let Err(e) = shared.store.lease_release(release).await {
        tracing::debug!(error = %e, "lease release failed; it expires on its own");
    }
}

type Prepared = (Cached, Vec<HistoryEvent>, Option<ErrorInfo>);

/// Finds the live execution in the cache, or rebuilds it by replaying its history.
async fn prepare(
    shared: &Arc<Shared>,
    claimed: &ClaimedInstance,
    _now: Timestamp,
) -> Result<Prepared, String> {
    let hit = shared.cache.take_for(claimed);
    let (cached, replay_error) = match hit {
        Some(cached) => (cached, None),
        None => {
            let (version, entry) = shared
                .registry
                .orchestration_entry(&claimed.name, claimed.version)
                .ok_or_else(|| {
                    format!(
                        "orchestration \"{}\" version {:?} is not registered here",
                        claimed.name, claimed.version
                    )
                })?;
            let mut cached = fresh(shared, claimed, version, &entry);
            let mut replay_error = None;
            if claimed.history_len > 0 {
                let history: Vec<HistoryEvent> = shared
                    .store
                    .history_read(&claimed.id, Some(claimed.execution))
                    .await
                    .map_err(|e| format!("history load failed: {e}"))?
                    .into_iter()
                    .map(|r| r.event)
                    .collect();
                (cached.parent, cached.trace) = started_of(&history);
                if let Err(nd) = cached.exec.replay(&history) {
                    tracing::error!(instance = %claimed.id, error = %nd, "replay found nondeterminism");
                    replay_error = Some(nd.to_info());
                }
            }
            (cached, replay_error)
        }
    };
    let mut cached = cached;
    let inbound: Vec<HistoryEvent> = claimed
        .events
        .iter()
        .map(|e| match &e.event {
            HistoryEvent::ExecutionStarted {
                name,
                input,
                parent,
                trace,
                ..
            } => {
                if cached.parent.is_none() {
                    cached.parent = parent.clone();
                }
                if cached.trace.is_none() {
                    cached.trace = trace.clone();
                }
                HistoryEvent::ExecutionStarted {
                    name: name.clone(),
                    version: cached.version,
                    input: input.clone(),
                    parent: parent.clone(),
                    trace: trace.clone(),
                }
            }
            other => other.clone(),
        })
        .collect();
    Ok((cached, inbound, replay_error))
}

/// A new execution of `claimed`'s, on `version` of its orchestration, with nothing replayed
/// yet (nor its parent and trace known).
fn fresh(
    shared: &Arc<Shared>,
    claimed: &ClaimedInstance,
    version: u32,
    entry: &OrchestrationEntry,
) -> Cached {
    Cached {
        exec: Execution::new(
            entry.run.clone(),
            &claimed.id,
            claimed.incarnation.0,
            claimed.execution,
            shared.config.limits,
        ),
        name: claimed.name.clone(),
        fence: claimed.fence,
        incarnation: claimed.incarnation,
        execution: claimed.execution,
        version,
        parent: None,
        trace: None,
    }
}

/// The parent and the trace an execution's start recorded.
fn started_of(history: &[HistoryEvent]) -> (Option<ParentRef>, Option<String>) {
    history
        .iter()
        .find_map(|e| match e {
            HistoryEvent::ExecutionStarted { parent, trace, .. } => {
                Some((parent.clone(), trace.clone()))
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// Checks what the turn asks for against this process's registry and limits; the first
/// violation fails the instance instead of scheduling anything.
fn violation(shared: &Shared, turn: &Turn) -> Option<ErrorInfo> {
    let limit = shared.config.max_payload_bytes;
    let too_big = |what: &dyn Fn() -> String, v: &Value| {
        let message = ratchet_core::limits::check_payload(what, v, limit).err()?;
        Some(OrchestrationError::Limit { message }.to_info())
    };
    for event in turn.outbound() {
        let found = match event {
            HistoryEvent::ActivityScheduled { name, input, .. } => {
                if !shared.registry.routes_activity(name) {
                    Some(ErrorInfo::new(
                        "UnknownActivity",
                        format!("no activity named \"{name}\" is registered"),
                    ))
                } else {
                    too_big(&|| format!("the input of activity \"{name}\""), input)
                }
            }
            HistoryEvent::SubOrchestrationScheduled {
                name,
                input,
                instance,
                ..
            } => {
                if let Err(e) = crate::client::check_new_id(instance) {
                    Some(ErrorInfo::new(
                        "InvalidInput",
                        format!("sub-orchestration \"{name}\": {e}"),
                    ))
                } else if !shared.registry.has_orchestration(name) {
                    Some(ErrorInfo::new(
                        "UnknownOrchestration",
                        format!("no orchestration named \"{name}\" is registered"),
                    ))
                } else {
                    too_big(
                        &|| format!("the input of sub-orchestration \"{name}\""),
                        input,
                    )
                }
            }
            HistoryEvent::TaskEnqueued {
                name,
                input,
                options,
                ..
            } => match shared.registry.task_entry(name) {
                None => Some(ErrorInfo::new(
                    "UnknownTask",
                    format!("no task named \"{name}\" is registered"),
                )),
                Some(entry) => (entry.check)(input)
                    .err()
                    .map(|e| {
                        ErrorInfo::new("InvalidInput", format!("input of task \"{name}\": {e}"))
                    })
                    .or_else(|| {
                        ratchet_store::validate_queue_name(&options.queue)
                            .err()
                            .map(|e| ErrorInfo::new("InvalidInput", e))
                    })
                    .or_else(|| too_big(&|| format!("the input of task \"{name}\""), input)),
            },
            HistoryEvent::ExecutionCompleted { output }
            | HistoryEvent::ExecutionCancelled {
                output: Some(output),
                ..
            } => too_big(&|| "the orchestration's output".into(), output),
            HistoryEvent::ContinuedAsNew { input } => {
                too_big(&|| "the continue-as-new input".into(), input)
            }
            HistoryEvent::CustomStatusSet { status } => {
                too_big(&|| "the custom status".into(), status)
            }
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

fn build_commit(
    shared: &Shared,
    claimed: &ClaimedInstance,
    cached: &Cached,
    turn: Turn,
    inbound_len: usize,
    now: Timestamp,
) -> TurnCommit {
    let mut commit = TurnCommit {
        instance: claimed.id.clone(),
        fence: claimed.fence,
        incarnation: claimed.incarnation,
        execution: claimed.execution,
        version: Some(cached.version),
        consumed: claimed.events.iter().map(|e| e.id).collect(),
        fed: Vec::new(),
        started: None,
        history_start: claimed.history_len,
        history: Vec::new(),
        status: InstanceStatus::Running,
        output: None,
        error: None,
        custom_status: None,
        tasks: Vec::new(),
        inbox: Vec::new(),
        children: Vec::new(),
        continue_as_new: None,
    };
    let (events, outcome) = match violation(shared, &turn) {
        Some(error) => {
            let mut events: Vec<HistoryEvent> =
                turn.events.into_iter().take(1 + inbound_len).collect();
            events.push(HistoryEvent::ExecutionFailed {
                error: error.clone(),
            });
            (events, TurnOutcome::Failed(error))
        }
        None => (turn.events, turn.outcome),
    };
    for event in events.iter().skip(1 + inbound_len) {
        match event {
            HistoryEvent::ActivityScheduled {
                seq,
                name,
                input,
                options,
            } => commit.tasks.push(NewTask::activity(
                name.clone(),
                input.clone(),
                options.clone(),
                TaskOwner {
                    instance: claimed.id.clone(),
                    execution: claimed.execution,
                    seq: *seq,
                },
                now,
            )),
            // Committed with the turn, so exactly once however often the code is replayed.
            HistoryEvent::TaskEnqueued {
                name,
                input,
                options,
                ..
            } => commit.tasks.push(NewTask::standalone(
                name.clone(),
                input.clone(),
                options,
                now,
            )),
            HistoryEvent::TimerCreated { seq, fire_at } => commit.inbox.push(NewInboxEvent {
                instance: claimed.id.clone(),
                event: HistoryEvent::TimerFired { seq: *seq },
                visible_at: *fire_at,
            }),
            HistoryEvent::SubOrchestrationScheduled {
                seq,
                instance,
                name,
                input,
            } => commit.children.push(NewInstance {
                id: instance.clone(),
                name: name.clone(),
                input: input.clone(),
                parent: Some(ParentRef {
                    instance: claimed.id.clone(),
                    execution: claimed.execution,
                    seq: *seq,
                }),
                if_exists: IfExists::Fail,
                trace: None,
            }),
            HistoryEvent::CustomStatusSet { status } => commit.custom_status = Some(status.clone()),
            _ => {}
        }
    }
    commit.history = events;
    let parent_result = match outcome {
        TurnOutcome::Running => None,
        TurnOutcome::Completed(output) => {
            commit.status = InstanceStatus::Completed;
            commit.output = Some(output.clone());
            Some(Ok(output))
        }
        TurnOutcome::Failed(error) => {
            commit.status = InstanceStatus::Failed;
            commit.error = Some(error.clone());
            Some(Err(error))
        }
        TurnOutcome::Cancelled { output, error } => {
            commit.status = InstanceStatus::Cancelled;
            commit.output = output;
            commit.error = error;
            Some(Err(ErrorInfo::new(
                "Cancelled",
                "the sub-orchestration was cancelled",
            )))
        }
        TurnOutcome::ContinueAsNew(input) => {
            commit.status = InstanceStatus::ContinuedAsNew;
            commit.continue_as_new = Some(ContinueAsNew {
                name: claimed.name.clone(),
                parent: cached.parent.clone(),
                input,
                carried: cached.exec.unconsumed_signals(),
                trace: None,
            });
            None
        }
        _ => None,
    };
    if let (Some(parent), Some(result)) = (&cached.parent, parent_result) {
        commit.inbox.push(parent_event(parent, result));
    }
    // A finished instance waits for nothing more: its activities, children and timers are
    // dropped (an execution that continues as new drops its activities and timers in the
    // store). Standalone tasks are effects, not waits: history records them, so they commit
    // with the turn whatever its outcome.
    if commit.status.is_finished() || commit.continue_as_new.is_some() {
        commit.tasks.retain(|t| t.owner.is_none());
    }
    if commit.status.is_finished() {
        commit.children.clear();
        commit.inbox.retain(|e| e.instance != claimed.id);
    }
    commit
}

fn outcome_of(id: &str, commit: &TurnCommit) -> Option<InstanceOutcome> {
    commit.status.is_finished().then(|| InstanceOutcome {
        id: id.to_string(),
        status: commit.status,
        output: commit.output.clone(),
        error: commit.error.clone(),
    })
}
