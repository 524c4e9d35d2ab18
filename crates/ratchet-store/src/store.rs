use async_trait::async_trait;
use ratchet_core::Timestamp;
use serde::{Deserialize, Serialize};

use crate::{
    AppendOutcome, ClaimedInstance, ClaimedTask, CommitBatch, CommitOutcome, CreateOutcome,
    EnqueueOutcome, EventAppend, EventPage, EventRead, Fence, HistoryRecord, InstanceFilter,
    InstanceRecord, Lease, LeaseState, NewInstance, NewSignal, NewTask, QueueStats, QueueUpdate,
    Result, SignalOutcome, StopOutcome, TaskAction, TaskActionOutcome, TaskFilter, TaskId,
    TaskRecord,
};

/// Which orchestrations a claimer can run: a name and the versions it registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    /// Orchestration or activity name.
    pub name: String,
    /// Versions (orchestrations only; empty for activities).
    pub versions: Vec<u32>,
}

/// Parameters of [`Store::instance_claim`].
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceClaim {
    /// The lease to take.
    pub lease: Lease,
    /// At most this many instances (the caller's free capacity).
    pub limit: u32,
    /// Orchestrations the caller can run. An instance whose version is not pinned yet is
    /// claimable by any caller that registered its name.
    pub orchestrations: Vec<Registered>,
    /// The claim's time.
    pub now: Timestamp,
    /// Also claim ready activity tasks in the same round trip, so an idle poll costs one query.
    pub tasks: Option<TaskClaim>,
}

/// What [`Store::instance_claim`] returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceClaimed {
    /// Leased instances with their visible inbox events.
    pub instances: Vec<ClaimedInstance>,
    /// The earliest future time an inbox event or task becomes visible, so the caller can sleep
    /// exactly until then instead of polling.
    pub next_due: Option<Timestamp>,
    /// Tasks leased by [`InstanceClaim::tasks`].
    pub tasks: Vec<ClaimedTask>,
    /// How many of the instances and tasks were taken over from a lease that expired (its
    /// holder crashed, stalled or was cut off) rather than released.
    pub taken_over: u32,
}

/// Parameters of [`Store::task_claim`].
#[derive(Clone, Debug, PartialEq)]
pub struct TaskClaim {
    /// The lease to take.
    pub lease: Lease,
    /// The queues to take from, each with the most tasks to take from it (the caller's free
    /// capacity for that queue). A queue's shared settings (pause, rate, concurrency) may
    /// allow fewer.
    pub queues: Vec<QueueClaim>,
    /// Activity and task names the caller can run.
    pub names: Vec<String>,
    /// The claim's time.
    pub now: Timestamp,
}

/// One queue of a [`TaskClaim`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueClaim {
    /// The queue.
    pub queue: String,
    /// At most this many tasks from it.
    pub limit: u32,
}

impl TaskClaim {
    /// A claim of up to `limit` activity attempts.
    pub fn activities(lease: Lease, limit: u32, names: Vec<String>, now: Timestamp) -> Self {
        Self {
            lease,
            queues: vec![QueueClaim {
                queue: crate::ACTIVITY_QUEUE.to_string(),
                limit,
            }],
            names,
            now,
        }
    }
}

/// Parameters of [`Store::worker_alive`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerAlive {
    /// The process (the owner named in its leases).
    pub owner: String,
    /// Alive until then unless it says so again.
    pub until: Timestamp,
    /// How long after expiring its leases stay its own while it is alive.
    pub stall_grace: std::time::Duration,
    /// The time of the call.
    pub now: Timestamp,
    /// The task queues it claims from (a store may wake one of a queue's processes first
    /// for new work there).
    pub queues: Vec<String>,
    /// What it is and runs, for people and for checks that a name is served somewhere.
    pub about: WorkerAbout,
}

/// What a process says of itself in [`WorkerAlive`]: who it is, how much it runs at once,
/// and the names it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerAbout {
    /// A name people gave it (`ratchet worker --label`).
    pub label: Option<String>,
    /// The machine it runs on.
    pub host: Option<String>,
    /// Its process id there.
    pub pid: u32,
    /// Orchestration turns it runs at once at most.
    pub max_orchestrations: u32,
    /// Activities it runs at once at most.
    pub max_activities: u32,
    /// Orchestration names with their versions.
    pub orchestrations: Vec<(String, Vec<u32>)>,
    /// Activity names.
    pub activities: Vec<String>,
    /// Standalone task names.
    pub tasks: Vec<String>,
}

/// A process as [`Store::worker_list`] reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerRecord {
    /// Its id (the owner named in its leases).
    pub id: String,
    /// When it first said it was alive.
    pub started_at: Timestamp,
    /// When it last said so.
    pub seen_at: Timestamp,
    /// Alive until then unless it says so again.
    pub alive_until: Timestamp,
    /// The task queues it claims from.
    pub queues: Vec<String>,
    /// What it said of itself.
    pub about: WorkerAbout,
}

/// Leases to give back (graceful shutdown).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeaseRelease {
    /// Instances and the fences of their leases.
    pub instances: Vec<(String, Fence)>,
    /// Tasks and the fences of their leases.
    pub tasks: Vec<(TaskId, Fence)>,
    /// When they are given back: a released task is ready again from then (or from its own
    /// visible time, if later), so that claims looking for fresh work find it.
    pub now: Timestamp,
}

/// Counters a store keeps about its own traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Round trips to the database (one statement, function call or pipelined batch each).
    pub round_trips: u64,
    /// Writing transactions committed (a read, or a notification sent on its own, is none).
    pub commits: u64,
    /// Turn commits and task completions refused for a stale fence.
    pub stale_refused: u64,
}

/// The storage API of Ratchet. Every method is one round trip to the database and is shaped
/// for batches, so the runtime can group the work of many instances into one call.
///
/// Backends must pass the conformance suite (feature `conformance`).
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Creates instances, each with an `ExecutionStarted` inbox event; with `lease`, created
    /// instances come back leased to the caller so their first turn needs no claim.
    /// One round trip.
    ///
    /// # Errors
    ///
    /// Database failures only; per-instance conflicts are in the outcomes.
    async fn instance_create(
        &self,
        instances: Vec<NewInstance>,
        lease: Option<Lease>,
        now: Timestamp,
    ) -> Result<Vec<CreateOutcome>>;

    /// Leases up to `limit` instances that have visible inbox events and no live lease, and,
    /// when `claim.tasks` is set, ready tasks too. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn instance_claim(&self, claim: InstanceClaim) -> Result<InstanceClaimed>;

    /// Commits turns and task completions of many instances atomically per item, with a
    /// result per item: a stale item never fails the others. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures (then nothing of the batch was written).
    async fn commit(&self, batch: CommitBatch) -> Result<CommitOutcome>;

    /// Leases up to `limit` visible tasks. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn task_claim(&self, claim: TaskClaim) -> Result<Vec<ClaimedTask>>;

    /// Extends the leases of running tasks, and says for each whether it was lost or a client
    /// asked to cancel it. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn task_heartbeat(
        &self,
        tasks: Vec<(TaskId, Fence)>,
        until: Timestamp,
    ) -> Result<Vec<LeaseState>>;

    /// Enqueues standalone tasks (multi-row, one round trip for thousands). A task whose
    /// unique key an unfinished task holds is not enqueued; its outcome names that task.
    ///
    /// # Errors
    ///
    /// Database failures (then nothing was enqueued).
    async fn task_enqueue(
        &self,
        tasks: Vec<NewTask>,
        now: Timestamp,
    ) -> Result<Vec<EnqueueOutcome>>;

    /// Reads one task, running or finished. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn task_get(&self, id: TaskId, now: Timestamp) -> Result<Option<TaskRecord>>;

    /// Lists standalone tasks, newest first. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn task_list(&self, filter: TaskFilter, now: Timestamp) -> Result<Vec<TaskRecord>> {
        self.task_list_before(filter, None, now).await
    }

    /// Lists standalone tasks, newest first (by id), only those with an id below `before`
    /// when given: keyset pagination, where the last id of a page gives the next, and a page
    /// costs the same however deep it is. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn task_list_before(
        &self,
        filter: TaskFilter,
        before: Option<TaskId>,
        now: Timestamp,
    ) -> Result<Vec<TaskRecord>>;

    /// Cancels, retries or discards standalone tasks, with an outcome per task. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn task_act(
        &self,
        ids: Vec<TaskId>,
        action: TaskAction,
        now: Timestamp,
    ) -> Result<Vec<TaskActionOutcome>>;

    /// Pauses, resumes or limits a queue for every process. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn queue_update(&self, update: QueueUpdate) -> Result<()>;

    /// Settings and task counts by state of every queue that has settings or tasks.
    /// One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn queue_stats(&self, now: Timestamp) -> Result<Vec<QueueStats>>;

    /// Deletes finished standalone tasks that finished before `before`. Returns how many.
    /// One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn task_purge(&self, before: Timestamp) -> Result<u64>;

    /// Records that a process is alive until `alive.until`. While it is, no claim takes over
    /// a lease it holds that expired less than `alive.stall_grace` ago: its work waits for
    /// it. So a database stall (a table lock, a slow statement) that keeps it from renewing
    /// its leases or committing its results costs it no lease and runs nothing twice; a
    /// process that dies stops saying it is alive, and its work is taken over once both have
    /// expired; a lease it holds without knowing it (its claim's answer was lost) is taken
    /// over after the grace. One round trip, on a connection of its own where the backend
    /// pools them, so a pool stuck behind a lock cannot delay it.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn worker_alive(&self, alive: WorkerAlive) -> Result<()>;

    /// Forgets process `owner` (at shutdown, once it gave its leases back): whatever it still
    /// holds is taken over as soon as its leases expire. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn worker_gone(&self, owner: &str) -> Result<()>;

    /// Gives leases back so other processes can take the work at once. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn lease_release(&self, release: LeaseRelease) -> Result<()>;

    /// Raises signals, buffered in each instance's inbox in order. One round trip.
    ///
    /// A signal, like a cancel, carries no time: it is visible once committed. (A caller's time
    /// is only its estimate of the database's clock; a claimer whose estimate lagged would see
    /// the events written before it without it.)
    ///
    /// # Errors
    ///
    /// Database failures; per-signal outcomes otherwise.
    async fn signal_raise(&self, signals: Vec<NewSignal>) -> Result<Vec<SignalOutcome>>;

    /// Asks an instance to cancel: the code sees it on its next turn (the first turn that
    /// begins after this returns). One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn instance_cancel(&self, id: &str, reason: &str) -> Result<StopOutcome>;

    /// Stops an instance at once: status Terminated, pending work dropped, leases fenced
    /// off, the parent told. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn instance_terminate(
        &self,
        id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<StopOutcome>;

    /// Reads one instance. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn instance_get(&self, id: &str) -> Result<Option<InstanceRecord>>;

    /// Lists instances, newest first. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn instance_list(&self, filter: InstanceFilter) -> Result<Vec<InstanceRecord>>;

    /// Reads an instance's history: one execution, or all when `execution` is `None`.
    /// One round trip.
    ///
    /// # Errors
    ///
    /// Database failures; [`crate::StoreError::Corrupt`] for an unreadable event.
    async fn history_read(&self, id: &str, execution: Option<u32>) -> Result<Vec<HistoryRecord>>;

    /// Reads up to `limit` events of an instance's history, across its executions, after the
    /// position `after` (execution, seq) or from the start: a page costs the same wherever
    /// it is in a long history. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures; [`crate::StoreError::Corrupt`] for an unreadable event.
    async fn history_page(
        &self,
        id: &str,
        after: Option<(u32, u32)>,
        limit: u32,
    ) -> Result<Vec<HistoryRecord>>;

    /// Reads an instance together with up to `limit` events of its history after the position
    /// `after` (execution, seq), or from the start: what a live view polls, so that each look
    /// costs one round trip whether or not anything changed. `None` for an unknown id. The
    /// history is read first, so when the instance has finished a last call with the new
    /// position returns whatever the earlier call's history missed. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures; [`crate::StoreError::Corrupt`] for an unreadable event.
    async fn instance_follow(
        &self,
        id: &str,
        after: Option<(u32, u32)>,
        limit: u32,
    ) -> Result<Option<crate::InstanceFollow>>;

    /// Counts, per bucket of the query's range, the instances started, completed and failed
    /// and the standalone tasks completed and dead; buckets where nothing happened are left
    /// out, the others come in order. Each count is a range scan of an index on the time it
    /// counts by, so it costs what the range holds, not what the tables hold. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn throughput(
        &self,
        query: crate::ThroughputQuery,
    ) -> Result<Vec<crate::ThroughputBucket>>;

    /// Deletes finished instances (and their history) that finished before `before`.
    /// Returns how many. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn instance_purge(&self, before: Timestamp) -> Result<u64>;

    /// Appends events: each [`EventAppend`] atomically and in order, all in one transaction,
    /// with an outcome per append. A conditional append is checked against every event
    /// committed before it, including earlier appends of the same call, and appends nothing
    /// when its condition fails. Appends commit in position order, so a reader never sees a
    /// position below one it has already seen appear later. One round trip.
    ///
    /// # Errors
    ///
    /// [`crate::StoreError::Invalid`] for a bad event or query (then nothing is appended);
    /// database failures.
    async fn event_append(
        &self,
        appends: Vec<EventAppend>,
        now: Timestamp,
    ) -> Result<Vec<AppendOutcome>>;

    /// Reads the events matching a query in a range, with the store's head position from the
    /// same snapshot. One round trip.
    ///
    /// # Errors
    ///
    /// [`crate::StoreError::Invalid`] for a bad query; database failures.
    async fn event_read(&self, read: EventRead) -> Result<EventPage>;

    /// Records an API token (its hash). One round trip.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] when the id or hash is taken; database failures.
    async fn token_create(&self, token: crate::NewToken) -> Result<()>;

    /// The processes that said they were alive, most recently seen first (those that said
    /// they were gone, or were silent for a day, are forgotten). One round trip.
    ///
    /// # Errors
    ///
    /// Database failures only.
    async fn worker_list(&self) -> Result<Vec<WorkerRecord>>;

    /// Every recorded token, revoked ones included, oldest first. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures only.
    async fn token_list(&self) -> Result<Vec<crate::TokenRecord>>;

    /// Revokes a token at `now`: `false` when there is no such token or it was revoked
    /// already. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures only.
    async fn token_revoke(&self, id: &str, now: Timestamp) -> Result<bool>;

    /// Stores a workflow definition as the next revision of its namespace and name, unless
    /// its version is stored already (then: unchanged, or a conflict when the content
    /// differs). One round trip.
    ///
    /// # Errors
    ///
    /// Database failures; [`crate::StoreError::Invalid`] (nothing written) when another
    /// process stored a revision of the same workflow at the same moment: apply again.
    async fn workflow_put(
        &self,
        workflow: crate::NewWorkflow,
        now: Timestamp,
    ) -> Result<crate::WorkflowPut>;

    /// Stored definitions, by namespace, name and revision; only those of `namespace` and
    /// `name` when given. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn workflow_list(
        &self,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<Vec<crate::WorkflowRecord>>;

    /// Deletes the stored definitions of `namespace` and `name`: every version, or only the
    /// one whose `document.version` is `version`. Returns what it deleted, by revision. Unless
    /// `force`, it deletes nothing while an unfinished instance (pending, running, or
    /// continued as new) of the orchestration `namespace/name` is pinned to a revision it
    /// would delete, or has no revision yet and none would be left. The number of a deleted
    /// revision is never given again, so a worker that still holds one in memory never
    /// confuses it with a new one. One round trip, one transaction.
    ///
    /// # Errors
    ///
    /// [`crate::StoreError::NotFound`] when nothing is stored under the name (and version);
    /// [`crate::StoreError::InUse`] with how many instances, when refused; database failures.
    async fn workflow_delete(
        &self,
        namespace: &str,
        name: &str,
        version: Option<&str>,
        force: bool,
    ) -> Result<Vec<crate::WorkflowRecord>>;

    /// Writes a schedule: creates it when `expect_version` is `None` (refused when the name
    /// is taken), else replaces it if the stored one is still at that version. Returns
    /// whether it was written; the stored version is then one more (1 for a new one). One
    /// round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn schedule_put(
        &self,
        schedule: crate::ScheduleRecord,
        expect_version: Option<i64>,
    ) -> Result<bool>;

    /// The schedule `name`. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn schedule_get(&self, name: &str) -> Result<Option<crate::ScheduleRecord>>;

    /// Every schedule, by name. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn schedule_list(&self) -> Result<Vec<crate::ScheduleRecord>>;

    /// Deletes a schedule and its fire records; runs it started go on. Whether it existed.
    /// One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn schedule_delete(&self, name: &str) -> Result<bool>;

    /// Up to `limit` unpaused schedules due at `now`, and the next time one is due. One round
    /// trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn schedule_due(&self, now: Timestamp, limit: u32) -> Result<crate::SchedulesDue>;

    /// A fire, in one transaction: the schedule's new state (if it is still at the version
    /// read), the run it stops, a record per tick, and the runs they start (an instance with
    /// the fire's deterministic id, or a task). `None`, nothing written and nothing stopped,
    /// when another write came first. The records come back with their runs' ids. Keeps the
    /// newest [`crate::FIRES_KEPT`] records of the schedule, and moves its `settled_through`
    /// to the newest tick whose record it drops.
    ///
    /// # Errors
    ///
    /// Database failures. (An instance id that is taken already starts nothing: the record
    /// names that instance.)
    async fn schedule_fire(
        &self,
        firing: crate::ScheduleFiring,
    ) -> Result<Option<Vec<crate::FireRecord>>>;

    /// Fire records, newest first. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn schedule_fires(&self, query: crate::FireQuery) -> Result<Vec<crate::FireRecord>>;

    /// The token with this hash, revoked or not. One round trip.
    ///
    /// # Errors
    ///
    /// Database failures only.
    async fn token_find(&self, hash: &str) -> Result<Option<crate::TokenRecord>>;

    /// The database's clock, which every process's leases, visibility times and timers are
    /// judged by (each process measures its offset from it; see the runtime's `Clock`). One
    /// round trip on a server; the local clock on an embedded store, which has one host.
    ///
    /// # Errors
    ///
    /// Database failures.
    async fn clock(&self) -> Result<Timestamp> {
        Ok(Timestamp::now())
    }

    /// This store's traffic counters.
    fn stats(&self) -> StoreStats;

    /// Wake-ups the database pushes to this process (work ready elsewhere, instances
    /// finished), or `None` when the backend cannot push and callers must poll.
    fn wakeups(&self) -> Option<crate::Wakeups> {
        None
    }
}
