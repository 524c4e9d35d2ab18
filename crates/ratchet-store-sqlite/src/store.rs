use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;
use ratchet_core::Timestamp;
use ratchet_store::{
    AppendOutcome, ClaimedTask, CommitBatch, CommitOutcome, CreateOutcome, EnqueueOutcome,
    EventAppend, EventPage, EventRead, Fence, HistoryRecord, InstanceClaim, InstanceClaimed,
    InstanceFilter, InstanceFollow, InstanceRecord, Lease, LeaseRelease, LeaseState, NamedQueries,
    NewInstance, NewSignal, NewTask, QueueStats, QueueUpdate, Result, SignalOutcome, StopOutcome,
    Store, StoreError, StoreStats, TaskAction, TaskActionOutcome, TaskClaim, TaskFilter, TaskId,
    TaskRecord, ThroughputBucket, ThroughputQuery, WakeupSender, Wakeups, WorkerAlive,
};
use ratchet_store::{
    NewToken, NewWorkflow, TokenRecord, WorkerRecord, WorkflowPut, WorkflowRecord,
};
use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::convert::db_err;
use crate::{
    checkpoint, commit, event, instance, list, migrate, queue, schedule, task, throughput, token,
    wake, worker, workflow,
};

/// The named statements of this backend, from `sql/*.sql`.
fn queries() -> &'static NamedQueries {
    static QUERIES: OnceLock<NamedQueries> = OnceLock::new();
    QUERIES.get_or_init(|| {
        NamedQueries::parse(&[
            include_str!("../sql/instances.sql"),
            include_str!("../sql/inbox.sql"),
            include_str!("../sql/history.sql"),
            include_str!("../sql/tasks.sql"),
            include_str!("../sql/queues.sql"),
            include_str!("../sql/events.sql"),
            include_str!("../sql/workers.sql"),
            include_str!("../sql/tokens.sql"),
            include_str!("../sql/workflows.sql"),
            include_str!("../sql/throughput.sql"),
            include_str!("../sql/schedules.sql"),
        ])
    })
}

/// The statement named `name`.
pub(crate) fn sql(name: &str) -> &'static str {
    queries().get(name)
}

#[derive(Default)]
struct Counters {
    round_trips: AtomicU64,
    commits: AtomicU64,
    stale: AtomicU64,
}

/// A [`Store`] on one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    counters: Arc<Counters>,
    /// Shared with this process's other stores on the same file.
    wakeups: WakeupSender,
    /// Checkpoints the file's log while any clone of this store lives.
    _checkpointer: Option<checkpoint::Checkpointer>,
}

impl SqliteStore {
    /// Opens (creating if needed) the file at `path` and applies migrations.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`] when the file cannot be opened, [`StoreError::SchemaTooNew`] when
    /// a newer Ratchet wrote it.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path.as_ref(), true).await
    }

    /// Opens the existing file at `path` without changing its schema (for commands that only
    /// read or steer, which should not create a database where a path was mistyped).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] when there is no such file, [`StoreError::SchemaTooOld`] when
    /// it needs `ratchet migrate`, [`StoreError::SchemaTooNew`] when a newer Ratchet wrote it,
    /// [`StoreError::Backend`] when it cannot be opened.
    pub async fn open_existing(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if !path.exists() {
            return Err(StoreError::NotFound(format!(
                "the SQLite database {} (no such file; `ratchet migrate --db {}` creates it)",
                path.display(),
                path.display()
            )));
        }
        Self::open_with(path, false).await
    }

    async fn open_with(path: &Path, migrate: bool) -> Result<Self> {
        let path = path.to_path_buf();
        let at = path.clone();
        let conn = tokio::task::spawn_blocking(move || -> Result<Connection> {
            let mut conn = Connection::open(&path).map_err(db_err)?;
            conn.busy_timeout(std::time::Duration::from_secs(10))
                .map_err(db_err)?;
            // WAL lets readers run beside the writer; NORMAL sync is safe against process crashes.
            conn.pragma_update(None, "journal_mode", "WAL")
                .map_err(db_err)?;
            conn.pragma_update(None, "synchronous", "NORMAL")
                .map_err(db_err)?;
            // 8 MB of page cache, and not more: a commit after a b-tree rebalance that swapped
            // page numbers (SQLite parks a page at the lock-byte page number meanwhile) walks
            // every cached page, so its cost grows with the cache. At 64 MB the fan-out lost
            // 12 % over a minute as the cache filled; reads it misses come from the OS's cache.
            conn.pragma_update(None, "cache_size", -8_192)
                .map_err(db_err)?;
            conn.set_prepared_statement_cache_capacity(64);
            // Checkpoints run on a thread of their own (checkpoint.rs); this connection's
            // commits checkpoint only as a backstop.
            conn.pragma_update(None, "wal_autocheckpoint", checkpoint::BACKSTOP_PAGES)
                .map_err(db_err)?;
            if migrate {
                migrate::migrate(&mut conn)?;
            } else {
                migrate::check(&conn)?;
            }
            Ok(conn)
        })
        .await
        .map_err(|e| StoreError::backend(std::io::Error::other(e.to_string())))??;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            counters: Arc::default(),
            wakeups: wake::sender_for(&at),
            _checkpointer: checkpoint::Checkpointer::start(&at),
        })
    }

    /// Enqueues standalone tasks in the caller's own transaction on this database file, so
    /// they commit or roll back with the caller's work. (Prepare them with the client's
    /// `prepare_tasks`, which checks names and inputs.) A worker in this process does not
    /// learn of them until its next poll.
    ///
    /// # Errors
    ///
    /// Database failures.
    pub fn task_enqueue_in(
        &self,
        tx: &Transaction<'_>,
        tasks: &[ratchet_store::NewTask],
        now: Timestamp,
    ) -> Result<Vec<ratchet_store::EnqueueOutcome>> {
        self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        let outcomes = tasks
            .iter()
            .map(|t| task::enqueue(tx, t, now))
            .collect::<Result<Vec<_>>>()?;
        // Early for a transaction that may yet roll back: a spare claim, nothing worse.
        self.wakeups.work_ready();
        Ok(outcomes)
    }

    /// Every named statement, for the test that prepares them all.
    pub fn statement_names() -> Vec<&'static str> {
        queries().iter().map(|(name, _)| name).collect()
    }

    /// Prepares the statement `name`, to check it against the schema.
    ///
    /// # Errors
    ///
    /// The database's error when the statement does not compile.
    pub async fn prepare(&self, name: &'static str) -> Result<()> {
        self.read(move |conn| conn.prepare(sql(name)).map(|_| ()).map_err(db_err))
            .await
    }

    /// Runs `f` on the connection on a blocking thread: one round trip.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let guard = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&guard)
        })
        .await
        .map_err(|e| StoreError::backend(std::io::Error::other(e.to_string())))?
    }

    /// Runs `f` in one write transaction on a blocking thread: one round trip, one commit.
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.counters.round_trips.fetch_add(1, Ordering::Relaxed);
        let conn = self.conn.clone();
        let counters = self.counters.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|p| p.into_inner());
            let tx = guard
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(db_err)?;
            let out = f(&tx)?;
            tx.commit().map_err(db_err)?;
            counters.commits.fetch_add(1, Ordering::Relaxed);
            Ok(out)
        })
        .await
        .map_err(|e| StoreError::backend(std::io::Error::other(e.to_string())))?
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn instance_create(
        &self,
        instances: Vec<NewInstance>,
        lease: Option<Lease>,
        now: Timestamp,
    ) -> Result<Vec<CreateOutcome>> {
        let leased = lease.is_some();
        let out: Vec<CreateOutcome> = self
            .write(move |tx| {
                instances
                    .iter()
                    .map(|i| instance::create(tx, i, lease.as_ref(), now))
                    .collect()
            })
            .await?;
        if !leased && out.iter().any(|o| matches!(o, CreateOutcome::Created(_))) {
            self.wakeups.work_ready();
        }
        Ok(out)
    }

    async fn instance_claim(&self, claim: InstanceClaim) -> Result<InstanceClaimed> {
        self.write(move |tx| instance::claim(tx, &claim)).await
    }

    async fn commit(&self, batch: CommitBatch) -> Result<CommitOutcome> {
        let shape = wake::CommitShape::of(&batch);
        let out = self.write(move |tx| commit::commit(tx, batch)).await?;
        shape.wake(&self.wakeups, &out);
        let stale = out.stale();
        self.counters.stale.fetch_add(stale, Ordering::Relaxed);
        Ok(out)
    }

    async fn task_claim(&self, claim: TaskClaim) -> Result<Vec<ClaimedTask>> {
        self.write(move |tx| Ok(task::claim(tx, &claim)?.tasks))
            .await
    }

    async fn task_heartbeat(
        &self,
        tasks: Vec<(TaskId, Fence)>,
        until: Timestamp,
    ) -> Result<Vec<LeaseState>> {
        self.write(move |tx| task::heartbeat(tx, &tasks, until))
            .await
    }

    async fn task_enqueue(
        &self,
        tasks: Vec<NewTask>,
        now: Timestamp,
    ) -> Result<Vec<EnqueueOutcome>> {
        let out: Vec<EnqueueOutcome> = self
            .write(move |tx| tasks.iter().map(|t| task::enqueue(tx, t, now)).collect())
            .await?;
        if out.iter().any(|o| matches!(o, EnqueueOutcome::Enqueued(_))) {
            self.wakeups.work_ready();
        }
        Ok(out)
    }

    async fn task_get(&self, id: TaskId, now: Timestamp) -> Result<Option<TaskRecord>> {
        self.read(move |conn| task::get(conn, id, now)).await
    }

    async fn task_list_before(
        &self,
        filter: TaskFilter,
        before: Option<TaskId>,
        now: Timestamp,
    ) -> Result<Vec<TaskRecord>> {
        self.read(move |conn| task::list(conn, &filter, before, now))
            .await
    }

    async fn task_act(
        &self,
        ids: Vec<TaskId>,
        action: TaskAction,
        now: Timestamp,
    ) -> Result<Vec<TaskActionOutcome>> {
        let out = self
            .write(move |tx| task::act(tx, &ids, action, now))
            .await?;
        if action == TaskAction::Retry {
            self.wakeups.work_ready();
        }
        Ok(out)
    }

    async fn queue_update(&self, update: QueueUpdate) -> Result<()> {
        let resumed = update.paused == Some(false) || update.limits.is_some();
        self.write(move |tx| queue::update(tx, &update)).await?;
        if resumed {
            self.wakeups.work_ready();
        }
        Ok(())
    }

    async fn queue_stats(&self, now: Timestamp) -> Result<Vec<QueueStats>> {
        self.read(move |conn| queue::stats(conn, now)).await
    }

    async fn task_purge(&self, before: Timestamp) -> Result<u64> {
        self.write(move |tx| task::purge(tx, before)).await
    }

    async fn worker_alive(&self, alive: WorkerAlive) -> Result<()> {
        // (One process's stores hear each other's work directly: the queues choose nobody
        // to wake here; they are kept for people.)
        let WorkerAlive {
            owner,
            until,
            stall_grace,
            now,
            queues,
            about,
        } = alive;
        let (queues, about) = (
            crate::convert::to_json(&queues),
            crate::convert::to_json(&about),
        );
        let grace = i64::try_from(stall_grace.as_millis()).unwrap_or(i64::MAX);
        self.write(move |tx| {
            tx.prepare_cached(sql("worker_forget_silent"))
                .map_err(db_err)?
                .execute([now.0])
                .map_err(db_err)?;
            tx.prepare_cached(sql("worker_alive"))
                .map_err(db_err)?
                .execute(rusqlite::params![
                    owner, until.0, now.0, grace, queues, about
                ])
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn worker_gone(&self, owner: &str) -> Result<()> {
        let owner = owner.to_string();
        self.write(move |tx| {
            tx.prepare_cached(sql("worker_gone"))
                .map_err(db_err)?
                .execute([owner])
                .map_err(db_err)?;
            Ok(())
        })
        .await?;
        // Its leases may be ready for others now.
        self.wakeups.work_ready();
        Ok(())
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRecord>> {
        self.read(worker::list).await
    }

    async fn workflow_put(&self, workflow: NewWorkflow, now: Timestamp) -> Result<WorkflowPut> {
        self.write(move |tx| workflow::put(tx, &workflow, now))
            .await
    }

    async fn workflow_list(
        &self,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<Vec<WorkflowRecord>> {
        let (namespace, name) = (namespace.map(str::to_string), name.map(str::to_string));
        self.read(move |conn| workflow::list(conn, namespace.as_deref(), name.as_deref()))
            .await
    }

    async fn workflow_delete(
        &self,
        namespace: &str,
        name: &str,
        version: Option<&str>,
        force: bool,
    ) -> Result<Vec<WorkflowRecord>> {
        let (namespace, name) = (namespace.to_string(), name.to_string());
        let version = version.map(str::to_string);
        self.write(move |tx| workflow::delete(tx, &namespace, &name, version.as_deref(), force))
            .await
    }

    async fn schedule_put(
        &self,
        schedule: ratchet_store::ScheduleRecord,
        expect_version: Option<i64>,
    ) -> Result<bool> {
        let written = self
            .write(move |tx| schedule::put(tx, &schedule, expect_version))
            .await?;
        if written {
            self.wakeups.schedules_changed();
        }
        Ok(written)
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<ratchet_store::ScheduleRecord>> {
        let name = name.to_string();
        self.read(move |conn| schedule::get(conn, &name)).await
    }

    async fn schedule_list(&self) -> Result<Vec<ratchet_store::ScheduleRecord>> {
        self.read(schedule::list).await
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        let name = name.to_string();
        let deleted = self.write(move |tx| schedule::delete(tx, &name)).await?;
        if deleted {
            self.wakeups.schedules_changed();
        }
        Ok(deleted)
    }

    async fn schedule_due(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<ratchet_store::SchedulesDue> {
        self.read(move |conn| schedule::due(conn, now, limit)).await
    }

    async fn schedule_fire(
        &self,
        firing: ratchet_store::ScheduleFiring,
    ) -> Result<Option<Vec<ratchet_store::FireRecord>>> {
        let fired = self.write(move |tx| schedule::fire(tx, &firing)).await?;
        if let Some(id) = fired.finished {
            self.wakeups.finished(id);
        }
        if fired.work {
            self.wakeups.work_ready();
        }
        Ok(fired.records)
    }

    async fn schedule_fires(
        &self,
        query: ratchet_store::FireQuery,
    ) -> Result<Vec<ratchet_store::FireRecord>> {
        self.read(move |conn| schedule::fires(conn, &query)).await
    }

    async fn token_create(&self, new: NewToken) -> Result<()> {
        self.write(move |tx| token::create(tx, &new)).await
    }

    async fn token_list(&self) -> Result<Vec<TokenRecord>> {
        self.read(token::list).await
    }

    async fn token_revoke(&self, id: &str, now: Timestamp) -> Result<bool> {
        let id = id.to_string();
        self.write(move |tx| token::revoke(tx, &id, now)).await
    }

    async fn token_find(&self, hash: &str) -> Result<Option<TokenRecord>> {
        let hash = hash.to_string();
        self.read(move |conn| token::find(conn, &hash)).await
    }

    async fn lease_release(&self, release: LeaseRelease) -> Result<()> {
        self.write(move |tx| task::release(tx, &release)).await?;
        self.wakeups.work_ready();
        Ok(())
    }

    async fn signal_raise(&self, signals: Vec<NewSignal>) -> Result<Vec<SignalOutcome>> {
        let out: Vec<SignalOutcome> = self
            .write(move |tx| signals.iter().map(|s| instance::signal(tx, s)).collect())
            .await?;
        if out.contains(&SignalOutcome::Raised) {
            self.wakeups.work_ready();
        }
        Ok(out)
    }

    async fn instance_cancel(&self, id: &str, reason: &str) -> Result<StopOutcome> {
        let (id, reason) = (id.to_string(), reason.to_string());
        let out = self
            .write(move |tx| instance::cancel(tx, &id, &reason))
            .await?;
        if out == StopOutcome::Done {
            self.wakeups.work_ready();
        }
        Ok(out)
    }

    async fn instance_terminate(
        &self,
        id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<StopOutcome> {
        let finished = id.to_string();
        let (id, reason) = (id.to_string(), reason.to_string());
        let out = self
            .write(move |tx| instance::terminate(tx, &id, &reason, now))
            .await?;
        if out == StopOutcome::Done {
            self.wakeups.finished(finished);
            self.wakeups.work_ready();
        }
        Ok(out)
    }

    async fn instance_get(&self, id: &str) -> Result<Option<InstanceRecord>> {
        let id = id.to_string();
        self.read(move |conn| instance::get(conn, &id)).await
    }

    async fn instance_list(&self, filter: InstanceFilter) -> Result<Vec<InstanceRecord>> {
        self.read(move |conn| list::list(conn, &filter)).await
    }

    async fn history_read(&self, id: &str, execution: Option<u32>) -> Result<Vec<HistoryRecord>> {
        let id = id.to_string();
        self.read(move |conn| instance::history(conn, &id, execution))
            .await
    }

    async fn history_page(
        &self,
        id: &str,
        after: Option<(u32, u32)>,
        limit: u32,
    ) -> Result<Vec<HistoryRecord>> {
        let id = id.to_string();
        self.read(move |conn| instance::history_page(conn, &id, after, limit))
            .await
    }

    async fn instance_follow(
        &self,
        id: &str,
        after: Option<(u32, u32)>,
        limit: u32,
    ) -> Result<Option<InstanceFollow>> {
        let id = id.to_string();
        self.read(move |conn| instance::follow(conn, &id, after, limit))
            .await
    }

    async fn throughput(&self, query: ThroughputQuery) -> Result<Vec<ThroughputBucket>> {
        query.validate()?;
        self.read(move |conn| throughput::read(conn, &query)).await
    }

    async fn instance_purge(&self, before: Timestamp) -> Result<u64> {
        self.write(move |tx| instance::purge(tx, before)).await
    }

    async fn event_append(
        &self,
        appends: Vec<EventAppend>,
        now: Timestamp,
    ) -> Result<Vec<AppendOutcome>> {
        ratchet_store::validate_appends(&appends)?;
        let out: Vec<AppendOutcome> = self
            .write(move |tx| event::append(tx, &appends, now))
            .await?;
        if out
            .iter()
            .any(|o| matches!(o, AppendOutcome::Appended { .. }))
        {
            self.wakeups.events_appended();
        }
        Ok(out)
    }

    async fn event_read(&self, read: EventRead) -> Result<EventPage> {
        read.query.validate()?;
        self.read(move |conn| event::read(conn, &read)).await
    }

    fn stats(&self) -> StoreStats {
        StoreStats {
            round_trips: self.counters.round_trips.load(Ordering::Relaxed),
            commits: self.counters.commits.load(Ordering::Relaxed),
            stale_refused: self.counters.stale.load(Ordering::Relaxed),
        }
    }

    fn wakeups(&self) -> Option<Wakeups> {
        Some(self.wakeups.subscribe())
    }
}
