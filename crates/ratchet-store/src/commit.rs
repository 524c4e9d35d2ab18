use ratchet_core::{ErrorInfo, HistoryEvent, ParentRef, Timestamp};
use serde_json::Value;

use crate::{
    ClaimedInstance, ClaimedTask, CreateOutcome, Fence, Incarnation, InstanceStatus, NewInstance,
    NewTask, StoreError, TaskCompletion,
};

/// A lease to take: who takes it and until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The process (runtime) taking it.
    pub owner: String,
    /// When it expires unless renewed.
    pub until: Timestamp,
}

/// An event to put in an instance's inbox.
#[derive(Clone, Debug, PartialEq)]
pub struct NewInboxEvent {
    /// Target instance.
    pub instance: String,
    /// The event.
    pub event: HistoryEvent,
    /// Not delivered before this time (timers).
    pub visible_at: Timestamp,
}

impl NewInboxEvent {
    /// An event visible once committed: a result, a signal, a cancel. Not stamped with the
    /// writer's `now`, which is only its estimate of the database's clock: a claimer whose
    /// estimate lagged would see the events written before this one without it.
    pub fn immediate(instance: impl Into<String>, event: HistoryEvent) -> Self {
        Self {
            instance: instance.into(),
            event,
            visible_at: Timestamp(0),
        }
    }
}

/// Everything one orchestration turn changes, committed atomically or not at all.
#[derive(Clone, Debug, PartialEq)]
pub struct TurnCommit {
    /// The instance.
    pub instance: String,
    /// The fence of the lease the turn ran under; a stale one refuses the whole turn. (A turn
    /// `fed` by completions ran under no lease: its fence is its previous turn's, and still
    /// matches only if nothing claimed the instance since.)
    pub fence: Fence,
    /// The life of the id the turn ran (from the claim): a turn of another life is stale.
    pub incarnation: Incarnation,
    /// The execution the turn belongs to.
    pub execution: u32,
    /// Pins the orchestration version on the first turn.
    pub version: Option<u32>,
    /// Inbox rows the turn consumed.
    pub consumed: Vec<i64>,
    /// Positions in the batch's `completions` whose events the turn consumed before they
    /// reached the inbox: it ran on the results of activities that finished in the
    /// committer's process. The turn commits only if each of them is applied and carries a
    /// result for this execution of its instance (the results are then in the turn's
    /// history, and none stays in the inbox); otherwise it is refused and the results go to
    /// the inbox for a turn that reads them there.
    pub fed: Vec<u32>,
    /// The position in the batch's `starts` of the start this first turn ran on, before its
    /// instance was written. The turn commits only if that start created its instance (it
    /// then consumes the start's opening event, and is checked against the fence the create
    /// gave the instance instead of its own `fence`).
    pub started: Option<u32>,
    /// Position of the first appended event (the history length before the turn).
    pub history_start: u32,
    /// Events to append.
    pub history: Vec<HistoryEvent>,
    /// New status.
    pub status: InstanceStatus,
    /// Output, when completed or cancelled with one.
    pub output: Option<Value>,
    /// Error, when failed or cancelled with one.
    pub error: Option<ErrorInfo>,
    /// New custom status, when the code set one.
    pub custom_status: Option<Value>,
    /// Activities to schedule.
    pub tasks: Vec<NewTask>,
    /// Inbox events to add: timers for this instance, results for a parent.
    pub inbox: Vec<NewInboxEvent>,
    /// Sub-orchestrations to start.
    pub children: Vec<NewInstance>,
    /// Continue as new: begin execution + 1 with this input and these carried-over events.
    pub continue_as_new: Option<ContinueAsNew>,
}

/// The next execution of an instance that continued as new.
#[derive(Clone, Debug, PartialEq)]
pub struct ContinueAsNew {
    /// The orchestration name.
    pub name: String,
    /// The instance's parent, for a sub-orchestration.
    pub parent: Option<ParentRef>,
    /// Its input.
    pub input: Value,
    /// Signals that arrived but were not consumed, delivered again to the new execution.
    pub carried: Vec<HistoryEvent>,
    /// The trace the instance belongs to (a W3C `traceparent`), kept across executions.
    pub trace: Option<String>,
}

impl ContinueAsNew {
    /// The events that open the next execution's inbox: its start, then the carried signals.
    pub fn inbox_events(&self) -> Vec<HistoryEvent> {
        let started = HistoryEvent::ExecutionStarted {
            name: self.name.clone(),
            version: 0,
            input: self.input.clone(),
            parent: self.parent.clone(),
            trace: self.trace.clone(),
        };
        std::iter::once(started)
            .chain(self.carried.iter().cloned())
            .collect()
    }
}

/// The outcome of one turn commit.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TurnResult {
    /// Written. `tasks` are the scheduled activities leased to the committer (eager dispatch).
    Committed {
        /// Activities leased to the committer in the same commit.
        tasks: Vec<ClaimedTask>,
    },
    /// Refused: the lease was lost (stale fence) or the instance was terminated. Nothing
    /// of this turn was written.
    Stale,
}

/// The outcome of one task completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompletionResult {
    /// Written.
    Applied,
    /// Refused: the attempt's lease was taken over (stale fence) or the task is gone.
    Stale,
}

/// An instance created by a group commit, whose first turn already ran in the same batch: the
/// caller ran it on the start before anything was written.
#[derive(Clone, Debug, PartialEq)]
pub struct CommitStart {
    /// The instance, created as [`crate::Store::instance_create`] would, unleased.
    pub instance: NewInstance,
    /// Its life, drawn by the caller: the first turn's code already saw it.
    pub incarnation: Incarnation,
}

/// A group commit: turn commits and task completions of many instances in one round trip.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CommitBatch {
    /// Instances to create first, for turns of this batch that ran on their starts.
    pub starts: Vec<CommitStart>,
    /// Turns to commit.
    pub turns: Vec<TurnCommit>,
    /// Task attempts to complete.
    pub completions: Vec<TaskCompletion>,
    /// Lease scheduled activities to this owner, at most `task_capacity` of them.
    pub task_lease: Option<Lease>,
    /// How many new tasks the committer can run now.
    pub task_capacity: u32,
    /// Instances cached by the committer: if after this batch they have visible inbox events
    /// and no live lease, lease them to `instance_lease` and return them, so their next turn
    /// needs no claim.
    pub lock_instances: Vec<String>,
    /// The lease for `lock_instances`.
    pub instance_lease: Option<Lease>,
    /// The commit's time.
    pub now: Timestamp,
}

impl CommitBatch {
    /// Refuses what no store writes: a start with a parent (a group commit creates top-level
    /// instances; children are started by their parent's turn).
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`].
    pub fn check(&self) -> Result<(), StoreError> {
        if self.starts.iter().any(|s| s.instance.parent.is_some()) {
            return Err(StoreError::Invalid(
                "a group commit creates top-level instances only".into(),
            ));
        }
        Ok(())
    }
}

/// The per-item outcome of a [`CommitBatch`], in the same order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CommitOutcome {
    /// One per start (`Created` carries no lease).
    pub starts: Vec<CreateOutcome>,
    /// One per turn.
    pub turns: Vec<TurnResult>,
    /// One per completion.
    pub completions: Vec<CompletionResult>,
    /// Instances from `lock_instances` now leased to the caller, with their inbox events.
    pub locked: Vec<ClaimedInstance>,
}

impl CommitOutcome {
    /// How many turns and completions were refused for a stale fence.
    pub fn stale(&self) -> u64 {
        let turns = self
            .turns
            .iter()
            .filter(|t| matches!(t, TurnResult::Stale))
            .count();
        let completions = self
            .completions
            .iter()
            .filter(|c| matches!(c, CompletionResult::Stale))
            .count();
        (turns + completions) as u64
    }
}

/// The event a parent receives when its child's id is taken by an existing instance: the
/// child is not started and the parent's step fails at once.
pub fn child_exists_event(child: &str, parent: &ParentRef) -> NewInboxEvent {
    let error = ErrorInfo::new(
        "AlreadyExists",
        format!("instance \"{child}\" already exists"),
    );
    parent_event(parent, Err(error))
}

/// A parent to deliver a finished child's result to.
pub fn parent_event(parent: &ParentRef, result: Result<Value, ErrorInfo>) -> NewInboxEvent {
    let event = match result {
        Ok(output) => HistoryEvent::SubOrchestrationCompleted {
            seq: parent.seq,
            output,
        },
        Err(error) => HistoryEvent::SubOrchestrationFailed {
            seq: parent.seq,
            error,
        },
    };
    NewInboxEvent::immediate(parent.instance.clone(), event)
}
