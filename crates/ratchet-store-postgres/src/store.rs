use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, QueueMode, RecyclingMethod, Runtime,
};
use futures::future::BoxFuture;
use ratchet_core::Timestamp;
use ratchet_store::{
    AppendOutcome, ClaimedTask, CommitBatch, CommitOutcome, CreateOutcome, EnqueueOutcome,
    EventAppend, EventPage, EventRead, Fence, HistoryRecord, InstanceClaim, InstanceClaimed,
    InstanceFilter, InstanceFollow, InstanceRecord, Lease, LeaseRelease, LeaseState, NamedQueries,
    NewInstance, NewSignal, NewTask, NewToken, QueueStats, QueueUpdate, Result, SignalOutcome,
    StopOutcome, Store, StoreError, StoreStats, TaskAction, TaskActionOutcome, TaskClaim,
    TaskFilter, TaskId, TaskRecord, ThroughputBucket, ThroughputQuery, TokenRecord, WakeupSender,
    Wakeups, WorkerAlive, WorkerRecord,
};
use ratchet_store::{NewWorkflow, WorkflowPut, WorkflowRecord};
use tokio::task::JoinHandle;
use tokio_postgres::Row;

use crate::convert::{db_err, pool_err, Failure, Res};
use crate::cursor::ClaimCursors;
use crate::param::{p, Param};
use crate::share::WakeShare;
use crate::{commit, event, instance, listen, migrate, queue, schedule, task, tls, PostgresConfig};

/// The named statements of this backend, from `sql/*.sql`, for `schema`.
fn queries(schema: &str) -> NamedQueries {
    NamedQueries::parse(&[
        include_str!("../sql/instances.sql"),
        include_str!("../sql/history.sql"),
        include_str!("../sql/tasks.sql"),
        include_str!("../sql/commit.sql"),
        include_str!("../sql/queues.sql"),
        include_str!("../sql/events.sql"),
        include_str!("../sql/workers.sql"),
        include_str!("../sql/tokens.sql"),
        include_str!("../sql/workflows.sql"),
        include_str!("../sql/throughput.sql"),
        include_str!("../sql/schedules.sql"),
    ])
    .map(|sql| migrate::in_schema(sql, schema))
}

#[derive(Default)]
struct Counters {
    round_trips: AtomicU64,
    commits: AtomicU64,
    stale: AtomicU64,
}

/// Stops the listener when the last handle on the store goes.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

struct Inner {
    pool: Pool,
    /// How every connection is made, kept to cancel a statement that overran.
    tls: tls::Tls,
    /// One connection of its own for saying this process is alive, so that a pool whose
    /// connections all wait behind a lock cannot keep it from being heard.
    lifeline: Pool,
    sql: NamedQueries,
    /// The group commit's parameter types, as this schema has them: read by the first commit,
    /// so that a store that never commits (a CLI command, a client) never pays for them.
    commit_types: tokio::sync::OnceCell<commit::CommitTypes>,
    config: PostgresConfig,
    counters: Counters,
    /// Where this process's claims start reading each queue.
    cursors: Arc<std::sync::Mutex<ClaimCursors>>,
    /// Which process claims first what an enqueue announces.
    share: Arc<std::sync::Mutex<WakeShare>>,
    /// Varies the key of each announcement, so the work spreads over the processes.
    wake_keys: AtomicU64,
    wakeups: Option<WakeupSender>,
    /// The statements built per query shape (event reads) that connections keep prepared:
    /// the most recently used ones only, with their parameter types.
    shapes: std::sync::Mutex<lru::LruCache<String, Vec<tokio_postgres::types::Type>>>,
    /// What each named statement took lately, to warn when one slows down far.
    watch: crate::watch::StatementWatch,
    _listener: Option<AbortOnDrop>,
}

/// How many statements built per query shape stay prepared on each connection. Callers
/// send a few shapes over and over; one who sends a new shape each time (a read token can)
/// must not grow every connection's statements, here and on the server, without end.
const KEPT_SHAPES: std::num::NonZeroUsize = match std::num::NonZeroUsize::new(128) {
    Some(n) => n,
    None => panic!("a cache holds at least one"),
};

/// A [`Store`] on PostgreSQL.
///
/// Cloning is cheap: clones share the connection pool, the counters and the listener.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

/// One pooled connection, running this store's named statements.
pub(crate) struct Conn {
    client: Object,
    store: Arc<Inner>,
}

impl Conn {
    /// This process's claim cursors.
    pub(crate) fn cursors(&self) -> std::sync::MutexGuard<'_, ClaimCursors> {
        crate::cursor::lock(&self.store.cursors)
    }

    /// The group commit's parameter types: a round trip of their own the first time only.
    pub(crate) async fn commit_types(&self) -> Res<&commit::CommitTypes> {
        self.store
            .commit_types
            .get_or_try_init(|| async {
                self.store
                    .counters
                    .round_trips
                    .fetch_add(1, Ordering::Relaxed);
                commit::CommitTypes::load(&self.client, &self.store.config.schema).await
            })
            .await
    }

    /// A key for an announcement of work: each one chooses another process.
    pub(crate) fn wake_key(&self) -> u64 {
        self.store.wake_keys.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs the statement `name`: one round trip (two the first time a connection prepares it).
    pub(crate) async fn query(&self, name: &str, params: &[Param<'_>]) -> Res<Vec<Row>> {
        let started = std::time::Instant::now();
        let rows = self.query_sql(self.store.sql.get(name), params).await?;
        self.store.watch.observe(name, started);
        Ok(rows)
    }

    /// Runs the statement `name` planned for these values (an unnamed statement, never a
    /// cached generic plan): for lists whose filters are optional, where the NULL ones must
    /// fold away for the planner to pick the index the others need. One round trip.
    pub(crate) async fn query_planned(&self, name: &str, params: &[Param<'_>]) -> Res<Vec<Row>> {
        Ok(self
            .client
            .query_typed(self.store.sql.get(name), params)
            .await?)
    }

    /// Opens a transaction on this connection; it rolls back when dropped uncommitted (a
    /// call that overran included).
    pub(crate) async fn transaction(&mut self) -> Res<deadpool_postgres::Transaction<'_>> {
        Ok(self.client.transaction().await?)
    }

    /// The text of the statement `name`.
    pub(crate) fn sql(&self, name: &str) -> &str {
        self.store.sql.get(name)
    }

    /// `sql` (written for schema `ratchet`) moved to this store's schema.
    pub(crate) fn in_schema(&self, sql: &str) -> String {
        migrate::in_schema(sql, &self.store.config.schema)
    }

    /// Runs `sql`: one round trip (two the first time a connection prepares it).
    pub(crate) async fn query_sql(&self, sql: &str, params: &[Param<'_>]) -> Res<Vec<Row>> {
        if !self.store.config.prepared_statements {
            return Ok(self.client.query_typed(sql, params).await?);
        }
        let statement = self.prepared(sql, params).await?;
        Ok(self.client.query(&statement, &values(params)).await?)
    }

    /// Runs `sql`, a statement built for the shape of its query (an event read): kept
    /// prepared as the named statements are, but only while it is among the
    /// [`KEPT_SHAPES`] shapes used last; a shape pushed out is closed on every connection.
    /// One round trip (two when this connection prepares it).
    pub(crate) async fn query_shaped(&self, sql: &str, params: &[Param<'_>]) -> Res<Vec<Row>> {
        if self.store.config.prepared_statements {
            let types: Vec<_> = params.iter().map(|(_, t)| t.clone()).collect();
            let pushed_out = {
                // The cache holds names only: a panic while it was held leaves it usable.
                let mut shapes = self
                    .store
                    .shapes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                match shapes.get(sql) {
                    Some(_) => None,
                    None => shapes.push(sql.to_string(), types),
                }
            };
            if let Some((old, types)) = pushed_out {
                self.store
                    .pool
                    .manager()
                    .statement_caches
                    .remove(&old, &types);
            }
        }
        self.query_sql(sql, params).await
    }

    /// `sql` prepared on this connection for `params`: a round trip the first time only.
    async fn prepared(&self, sql: &str, params: &[Param<'_>]) -> Res<tokio_postgres::Statement> {
        let types: Vec<_> = params.iter().map(|(_, t)| t.clone()).collect();
        let cached = self.client.statement_cache.size();
        let statement = self.client.prepare_typed_cached(sql, &types).await?;
        if self.client.statement_cache.size() > cached {
            // Preparing was a round trip of its own.
            self.store
                .counters
                .round_trips
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(statement)
    }

    /// Runs a statement that returns exactly one row.
    pub(crate) async fn one(&self, name: &str, params: &[Param<'_>]) -> Res<Row> {
        one_row(name, self.query(name, params).await?)
    }

    /// Whether calls send notifications.
    pub(crate) fn notify(&self) -> bool {
        self.store.config.notify
    }

    /// Runs the statement `name` and, when `wanted`, a `NOTIFY <schema>.work` after it: both
    /// go out together on this connection (one round trip), the notification as a transaction
    /// of its own. A NOTIFY inside a writing transaction holds PostgreSQL's notification lock
    /// through the commit's WAL flush, which serializes every notifying commit; alone it
    /// writes no WAL and lets go at once.
    pub(crate) async fn then_notify(
        &self,
        wanted: bool,
        ready_from: ReadyFrom,
        name: &str,
        params: &[Param<'_>],
    ) -> Res<Vec<Row>> {
        let payload = ready_from.payload();
        self.then_notify_on("work_notify", &[p(&payload)], wanted, name, params)
            .await
    }

    /// [`Conn::then_notify`] with the notifying statement `notify` and its `notify_params`.
    pub(crate) async fn then_notify_on(
        &self,
        notify: &str,
        notify_params: &[Param<'_>],
        wanted: bool,
        name: &str,
        params: &[Param<'_>],
    ) -> Res<Vec<Row>> {
        if !(wanted && self.notify()) {
            return self.query(name, params).await;
        }
        let started = std::time::Instant::now();
        let rows = self
            .with_notification(notify, notify_params, name, params)
            .await?;
        self.store.watch.observe(name, started);
        Ok(rows)
    }

    /// The statement `name` and the notifying statement `notify`, sent together.
    async fn with_notification(
        &self,
        notify: &str,
        notify_params: &[Param<'_>],
        name: &str,
        params: &[Param<'_>],
    ) -> Res<Vec<Row>> {
        let (main, note) = (self.store.sql.get(name), self.store.sql.get(notify));
        // The write must be sent before its notification: one heard first sends its hearers
        // to read before the write is visible, and they sleep on, its wake-up spent. Each
        // future sends its statement when first polled and `try_join!` polls in order, so
        // both statements are prepared before either runs (preparing first is what let a
        // connection's first notifying call send the notification first).
        if !self.store.config.prepared_statements {
            let (rows, _) = futures::try_join!(
                self.client.query_typed(main, params),
                self.client.query_typed(note, notify_params)
            )?;
            return Ok(rows);
        }
        let (main, note) = futures::try_join!(
            self.prepared(main, params),
            self.prepared(note, notify_params)
        )?;
        let (values, notify_values) = (values(params), values(notify_params));
        let (rows, _) = futures::try_join!(
            self.client.query(&main, &values),
            self.client.query(&note, &notify_values)
        )?;
        Ok(rows)
    }
}

/// The values of `params`, without their types.
fn values<'a>(params: &[Param<'a>]) -> Vec<&'a (dyn tokio_postgres::types::ToSql + Sync)> {
    params.iter().map(|(v, _)| *v).collect()
}

/// The one row a statement returns.
pub(crate) fn one_row(name: &str, rows: Vec<Row>) -> Res<Row> {
    rows.into_iter().next().ok_or_else(|| {
        Failure::Store(StoreError::Corrupt(format!(
            "statement {name} returned no row"
        )))
    })
}

/// What a `work` notification tells other processes' claim cursors: the earliest ready time
/// of the tasks made ready (its payload), so that a claim looks that far back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ReadyFrom {
    /// No tasks: instances or signals only.
    NoTasks,
    /// Tasks ready at this time or later.
    At(i64),
    /// Tasks anywhere: read every queue from its start.
    Anywhere,
}

impl ReadyFrom {
    /// The notification's payload.
    pub(crate) fn payload(self) -> String {
        match self {
            Self::NoTasks => String::new(),
            Self::At(at) => at.to_string(),
            Self::Anywhere => i64::MIN.to_string(),
        }
    }
}

impl PostgresStore {
    /// Connects with the default [`PostgresConfig`] (schema `ratchet`, migrations applied).
    ///
    /// # Errors
    ///
    /// See [`PostgresStore::connect_with`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, PostgresConfig::default()).await
    }

    /// Connects to the database at `url` (`postgres://user:password@host:port/db`), checks or
    /// applies the schema, and starts listening for notifications.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] for a bad URL or configuration, [`StoreError::Backend`] when the
    /// server cannot be reached, [`StoreError::SchemaTooNew`] when a newer Ratchet wrote the
    /// schema, [`StoreError::SchemaTooOld`] when the schema needs `ratchet migrate` and the
    /// configuration does not migrate on connect.
    pub async fn connect_with(url: &str, config: PostgresConfig) -> Result<Self> {
        config.validate()?;
        let (mut pg, tls) = tls::parse(url)?;
        // Every session bounds its statements, its waits for locks and its idle transactions
        // on the server, so a lock or a stuck client cannot hold a connection for long.
        let limits = config.session_options();
        if !limits.is_empty() {
            let options = match pg.get_options() {
                Some(given) => format!("{given} {limits}"),
                None => limits,
            };
            pg.options(&options);
        }
        if pg.get_application_name().is_none() {
            pg.application_name("ratchet");
        }
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(config.connect_timeout);
        }
        // Find a dead peer in a minute, not the two hours of the driver's default.
        if pg.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
            pg.keepalives_idle(Duration::from_secs(30));
        }
        let pool_of = |size: usize| {
            let manager = Manager::from_connect(
                pg.clone(),
                tls.clone(),
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            Pool::builder(manager)
                .max_size(size)
                // The connection returned last is taken first: a few backends stay busy and
                // warm in the CPU's caches instead of every one taking turns (6-9 % less
                // server CPU per fan-out orchestration and per steady task on 2 cores).
                .queue_mode(QueueMode::Lifo)
                .runtime(Runtime::Tokio1)
                .wait_timeout(Some(config.connect_timeout))
                .create_timeout(Some(config.connect_timeout))
                .recycle_timeout(Some(config.connect_timeout))
                .build()
                .map_err(|e| StoreError::Invalid(format!("connection pool: {e}")))
        };
        let pool = pool_of(config.pool_size)?;
        let lifeline = pool_of(1)?;
        {
            let mut client = pool.get().await.map_err(pool_err)?;
            if config.migrate {
                migrate::migrate(&mut client, &config.schema).await?;
            } else {
                migrate::check(&client, &config.schema).await?;
            }
        }
        let cursors = Arc::new(std::sync::Mutex::new(ClaimCursors::new(config.notify)));
        let share = Arc::<std::sync::Mutex<WakeShare>>::default();
        let (wakeups, listener) = if config.notify {
            let sender = WakeupSender::new();
            let handle = listen::spawn(
                pg,
                tls.clone(),
                config.schema.clone(),
                sender.clone(),
                cursors.clone(),
                share.clone(),
            );
            (Some(sender), Some(AbortOnDrop(handle)))
        } else {
            (None, None)
        };
        Ok(Self {
            inner: Arc::new(Inner {
                pool,
                tls,
                lifeline,
                sql: queries(&config.schema),
                commit_types: tokio::sync::OnceCell::new(),
                config,
                counters: Counters::default(),
                cursors,
                share,
                // Processes start their keys apart, so their first announcements spread too.
                wake_keys: AtomicU64::new(u64::from(std::process::id())),
                wakeups,
                shapes: std::sync::Mutex::new(lru::LruCache::new(KEPT_SHAPES)),
                watch: crate::watch::StatementWatch::default(),
                _listener: listener,
            }),
        })
    }

    /// The configuration this store runs with.
    pub fn config(&self) -> &PostgresConfig {
        &self.inner.config
    }

    /// The schema version in the database.
    ///
    /// # Errors
    ///
    /// Database failures.
    pub async fn schema_version(&self) -> Result<i64> {
        let client = self.inner.pool.get().await.map_err(pool_err)?;
        migrate::version(&client, &self.inner.config.schema)
            .await
            .map_err(Failure::into_store)
    }

    /// Refuses a role that lacks any of a worker's grants (docs/operations.md, "Roles and
    /// grants"), naming what it lacks: a worker or server started with one would otherwise
    /// run and fail every claim and commit with `permission denied`. One round trip.
    ///
    /// # Errors
    ///
    /// [`StoreError::PermissionDenied`], or database failures.
    pub async fn check_worker_grants(&self) -> Result<()> {
        let schema = &self.inner.config.schema;
        self.call(0, move |c| {
            Box::pin(async move { crate::worker::check_grants(&c, schema).await })
        })
        .await
    }

    /// Enqueues standalone tasks in the caller's own transaction, so they commit or roll
    /// back with the caller's work: one round trip on the caller's connection. (Prepare them
    /// with the client's `prepare_tasks`, which checks names and inputs.) Workers are notified
    /// when the transaction commits.
    ///
    /// # Errors
    ///
    /// Database failures (the caller's transaction is then aborted).
    pub async fn task_enqueue_in(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        tasks: &[ratchet_store::NewTask],
        now: Timestamp,
    ) -> Result<Vec<EnqueueOutcome>> {
        let args = task::EnqueueArgs::of(tasks);
        let notify = self.inner.config.notify;
        let params = args.params(&now.0, &notify);
        self.inner
            .counters
            .round_trips
            .fetch_add(1, Ordering::Relaxed);
        let rows = tx
            .query_typed(self.inner.sql.get("task_enqueue"), &params)
            .await
            .map_err(db_err)?;
        let row = rows
            .first()
            .ok_or_else(|| StoreError::Corrupt("task_enqueue returned no row".into()))?;
        task::enqueue_outcomes(row).map_err(Failure::into_store)
    }

    /// Appends events in the caller's own transaction, so they commit or roll back with the
    /// caller's work (an outbox): one round trip on the caller's connection. The transaction
    /// holds the event store's append lock until it ends, so keep it short. Subscribers are
    /// woken when it commits.
    ///
    /// # Errors
    ///
    /// [`StoreError::Invalid`] for a bad event or query; database failures (the caller's
    /// transaction is then aborted), including a transaction that is not READ COMMITTED.
    pub async fn event_append_in(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        appends: &[ratchet_store::EventAppend],
        now: Timestamp,
    ) -> Result<Vec<ratchet_store::AppendOutcome>> {
        ratchet_store::validate_appends(appends)?;
        self.inner
            .counters
            .round_trips
            .fetch_add(1, Ordering::Relaxed);
        let rows = event::append_in(tx, self.inner.sql.get("event_append"), appends, now)
            .await
            .map_err(Failure::into_store)?;
        if self.inner.config.notify {
            tx.execute(self.inner.sql.get("events_notify"), &[])
                .await
                .map_err(db_err)?;
        }
        Ok(rows)
    }

    /// Every named statement, for the test that prepares them all.
    pub fn statement_names() -> Vec<String> {
        queries("ratchet")
            .iter()
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// Prepares the statement `name`, to check it against the schema.
    ///
    /// # Errors
    ///
    /// The database's error when the statement does not compile.
    pub async fn prepare(&self, name: &str) -> Result<()> {
        let client = self.inner.pool.get().await.map_err(pool_err)?;
        client
            .prepare(self.inner.sql.get(name))
            .await
            .map(|_| ())
            .map_err(db_err)
    }

    /// Runs `f` on a pooled connection: one round trip and `commits` writing transactions. A call that
    /// a deadlock or serialization failure rolled back whole is run again (each try counts).
    async fn call<'a, T>(
        &'a self,
        commits: u64,
        f: impl Fn(Conn) -> BoxFuture<'a, Res<T>>,
    ) -> Result<T> {
        let timeout = self.inner.config.call_timeout;
        self.call_on(&self.inner.pool, timeout, commits, f).await
    }

    /// [`PostgresStore::call`] on a connection of `pool`, giving up after `timeout`.
    async fn call_on<'a, T>(
        &'a self,
        pool: &Pool,
        timeout: Duration,
        commits: u64,
        f: impl Fn(Conn) -> BoxFuture<'a, Res<T>>,
    ) -> Result<T> {
        let mut tries = 0;
        loop {
            let client = pool.get().await.map_err(pool_err)?;
            let cancel = client.cancel_token();
            let conn = Conn {
                client,
                store: self.inner.clone(),
            };
            self.inner
                .counters
                .round_trips
                .fetch_add(1, Ordering::Relaxed);
            let outcome = match tokio::time::timeout(timeout, f(conn)).await {
                Ok(outcome) => outcome,
                Err(_) => {
                    // The connection went back to the pool with the statement still running
                    // on the server (waiting for a lock, say): cancel it there, so that it
                    // neither holds the connection nor commits behind the caller's back.
                    let tls = self.inner.tls.clone();
                    tokio::spawn(async move {
                        if let Err(e) = tls.cancel(cancel).await {
                            tracing::debug!(error = %e, "could not cancel a statement that overran");
                        }
                    });
                    Err(Failure::Store(StoreError::backend(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("the database did not answer within {timeout:?}"),
                    ))))
                }
            };
            match outcome {
                Ok(value) => {
                    self.inner
                        .counters
                        .commits
                        .fetch_add(commits, Ordering::Relaxed);
                    return Ok(value);
                }
                Err(e) if e.is_transient_conflict() && tries < 3 => {
                    tries += 1;
                    tracing::debug!(error = ?e, tries, "transaction rolled back by a conflict; running it again");
                }
                Err(e) => return Err(e.into_store()),
            }
        }
    }
}

#[async_trait]
impl Store for PostgresStore {
    // Each closure borrows the call's arguments, so a retried call sends them again.
    async fn instance_create(
        &self,
        instances: Vec<NewInstance>,
        lease: Option<Lease>,
        now: Timestamp,
    ) -> Result<Vec<CreateOutcome>> {
        let (instances, lease) = (&instances, lease.as_ref());
        self.call(1, |c| {
            Box::pin(async move { instance::create(&c, instances, lease, now).await })
        })
        .await
    }

    async fn instance_claim(&self, claim: InstanceClaim) -> Result<InstanceClaimed> {
        let claim = &claim;
        self.call(1, |c| {
            Box::pin(async move { instance::claim(&c, claim).await })
        })
        .await
    }

    async fn commit(&self, batch: CommitBatch) -> Result<CommitOutcome> {
        let batch = &batch;
        let out = self
            .call(1, |c| {
                Box::pin(async move { commit::commit(&c, batch).await })
            })
            .await?;
        let stale = out.stale();
        self.inner
            .counters
            .stale
            .fetch_add(stale, Ordering::Relaxed);
        Ok(out)
    }

    async fn task_claim(&self, claim: TaskClaim) -> Result<Vec<ClaimedTask>> {
        let claim = &claim;
        self.call(1, |c| Box::pin(async move { task::claim(&c, claim).await }))
            .await
    }

    async fn task_heartbeat(
        &self,
        tasks: Vec<(TaskId, Fence)>,
        until: Timestamp,
    ) -> Result<Vec<LeaseState>> {
        let tasks = &tasks;
        self.call(1, |c| {
            Box::pin(async move { task::heartbeat(&c, tasks, until).await })
        })
        .await
    }

    async fn task_enqueue(
        &self,
        tasks: Vec<NewTask>,
        now: Timestamp,
    ) -> Result<Vec<EnqueueOutcome>> {
        let tasks = &tasks;
        self.call(1, |c| {
            Box::pin(async move { task::enqueue(&c, tasks, now).await })
        })
        .await
    }

    async fn task_get(&self, id: TaskId, now: Timestamp) -> Result<Option<TaskRecord>> {
        self.call(0, |c| Box::pin(async move { task::get(&c, id, now).await }))
            .await
    }

    async fn task_list_before(
        &self,
        filter: TaskFilter,
        before: Option<TaskId>,
        now: Timestamp,
    ) -> Result<Vec<TaskRecord>> {
        let filter = &filter;
        self.call(0, |c| {
            Box::pin(async move { task::list(&c, filter, before, now).await })
        })
        .await
    }

    async fn task_act(
        &self,
        ids: Vec<TaskId>,
        action: TaskAction,
        now: Timestamp,
    ) -> Result<Vec<TaskActionOutcome>> {
        let ids = &ids;
        self.call(1, |c| {
            Box::pin(async move { task::act(&c, ids, action, now).await })
        })
        .await
    }

    async fn queue_update(&self, update: QueueUpdate) -> Result<()> {
        let update = &update;
        self.call(1, |c| {
            Box::pin(async move { queue::update(&c, update).await })
        })
        .await
    }

    async fn queue_stats(&self, now: Timestamp) -> Result<Vec<QueueStats>> {
        self.call(0, |c| Box::pin(async move { queue::stats(&c, now).await }))
            .await
    }

    async fn task_purge(&self, before: Timestamp) -> Result<u64> {
        self.call(1, |c| {
            Box::pin(async move { task::purge(&c, before).await })
        })
        .await
    }

    async fn lease_release(&self, release: LeaseRelease) -> Result<()> {
        let commits = task::release_statements(&release);
        let release = &release;
        self.call(commits, |c| {
            Box::pin(async move { task::release(&c, release).await })
        })
        .await
    }

    async fn signal_raise(&self, signals: Vec<NewSignal>) -> Result<Vec<SignalOutcome>> {
        let signals = &signals;
        self.call(1, |c| {
            Box::pin(async move { instance::signal(&c, signals).await })
        })
        .await
    }

    async fn instance_cancel(&self, id: &str, reason: &str) -> Result<StopOutcome> {
        self.call(1, |c| {
            Box::pin(async move { instance::cancel(&c, id, reason).await })
        })
        .await
    }

    async fn instance_terminate(
        &self,
        id: &str,
        reason: &str,
        now: Timestamp,
    ) -> Result<StopOutcome> {
        self.call(1, |c| {
            Box::pin(async move { instance::terminate(&c, id, reason, now).await })
        })
        .await
    }

    async fn instance_get(&self, id: &str) -> Result<Option<InstanceRecord>> {
        self.call(0, |c| Box::pin(async move { instance::get(&c, id).await }))
            .await
    }

    async fn instance_list(&self, filter: InstanceFilter) -> Result<Vec<InstanceRecord>> {
        let filter = &filter;
        self.call(0, |c| {
            Box::pin(async move { instance::list(&c, filter).await })
        })
        .await
    }

    async fn history_read(&self, id: &str, execution: Option<u32>) -> Result<Vec<HistoryRecord>> {
        self.call(0, |c| {
            Box::pin(async move { instance::history(&c, id, execution).await })
        })
        .await
    }

    async fn history_page(
        &self,
        id: &str,
        after: Option<(u32, u32)>,
        limit: u32,
    ) -> Result<Vec<HistoryRecord>> {
        self.call(0, |c| {
            Box::pin(async move { instance::history_page(&c, id, after, limit).await })
        })
        .await
    }

    async fn instance_follow(
        &self,
        id: &str,
        after: Option<(u32, u32)>,
        limit: u32,
    ) -> Result<Option<InstanceFollow>> {
        self.call(0, |c| {
            Box::pin(async move { instance::follow(&c, id, after, limit).await })
        })
        .await
    }

    async fn throughput(&self, query: ThroughputQuery) -> Result<Vec<ThroughputBucket>> {
        query.validate()?;
        self.call(0, |c| {
            Box::pin(async move { crate::throughput::read(&c, &query).await })
        })
        .await
    }

    async fn instance_purge(&self, before: Timestamp) -> Result<u64> {
        self.call(1, |c| {
            Box::pin(async move { instance::purge(&c, before).await })
        })
        .await
    }

    async fn event_append(
        &self,
        appends: Vec<EventAppend>,
        now: Timestamp,
    ) -> Result<Vec<AppendOutcome>> {
        ratchet_store::validate_appends(&appends)?;
        if appends.is_empty() {
            return Ok(Vec::new());
        }
        let appends = &appends;
        self.call(1, |c| {
            Box::pin(async move { event::append(&c, appends, now).await })
        })
        .await
    }

    async fn event_read(&self, read: EventRead) -> Result<EventPage> {
        read.query.validate()?;
        let read = &read;
        self.call(0, |c| Box::pin(async move { event::read(&c, read).await }))
            .await
    }

    async fn worker_alive(&self, alive: WorkerAlive) -> Result<()> {
        let grace = i64::try_from(alive.stall_grace.as_millis()).unwrap_or(i64::MAX);
        let alive = &alive;
        // On the lifeline, not the pool; bounded by the connect timeout, so a stuck server
        // cannot hold the caller's loop for long.
        let timeout = self.inner.config.connect_timeout;
        self.call_on(&self.inner.lifeline, timeout, 1, |c| {
            Box::pin(async move {
                let about = ratchet_store::codec::to_json(&alive.about);
                let said = [
                    p(&alive.owner),
                    p(&alive.until.0),
                    p(&alive.now.0),
                    p(&grace),
                    p(&alive.queues),
                    p(&about),
                ];
                c.query("worker_alive", &said).await?;
                // Who else serves what, the listener reads when work arrives.
                crate::share::lock(&c.store.share).set_me(&alive.owner);
                Ok(())
            })
        })
        .await
    }

    async fn worker_gone(&self, owner: &str) -> Result<()> {
        self.call(1, |c| {
            Box::pin(async move {
                // Its expired leases, behind every process's claim cursors, are free now.
                c.then_notify(true, ReadyFrom::Anywhere, "worker_gone", &[p(&owner)])
                    .await?;
                c.cursors().forget();
                crate::share::lock(&c.store.share).forget();
                Ok(())
            })
        })
        .await
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRecord>> {
        self.call(0, |c| {
            Box::pin(async move { crate::worker::list(&c).await })
        })
        .await
    }

    async fn workflow_put(&self, workflow: NewWorkflow, now: Timestamp) -> Result<WorkflowPut> {
        let workflow = &workflow;
        self.call(1, |c| {
            Box::pin(async move { crate::workflow::put(&c, workflow, now).await })
        })
        .await
    }

    async fn workflow_list(
        &self,
        namespace: Option<&str>,
        name: Option<&str>,
    ) -> Result<Vec<WorkflowRecord>> {
        self.call(0, |c| {
            Box::pin(async move { crate::workflow::list(&c, namespace, name).await })
        })
        .await
    }

    async fn workflow_delete(
        &self,
        namespace: &str,
        name: &str,
        version: Option<&str>,
        force: bool,
    ) -> Result<Vec<WorkflowRecord>> {
        self.call(1, |c| {
            Box::pin(
                async move { crate::workflow::delete(&c, namespace, name, version, force).await },
            )
        })
        .await
    }

    async fn token_create(&self, token: NewToken) -> Result<()> {
        let token = &token;
        self.call(1, |c| {
            Box::pin(async move { crate::token::create(&c, token).await })
        })
        .await
    }

    async fn token_list(&self) -> Result<Vec<TokenRecord>> {
        self.call(0, |c| Box::pin(async move { crate::token::list(&c).await }))
            .await
    }

    async fn token_revoke(&self, id: &str, now: Timestamp) -> Result<bool> {
        self.call(1, |c| {
            Box::pin(async move { crate::token::revoke(&c, id, now).await })
        })
        .await
    }

    async fn schedule_put(
        &self,
        schedule: ratchet_store::ScheduleRecord,
        expect_version: Option<i64>,
    ) -> Result<bool> {
        let schedule = &schedule;
        self.call(1, |c| {
            Box::pin(async move { schedule::put(&c, schedule, expect_version).await })
        })
        .await
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<ratchet_store::ScheduleRecord>> {
        self.call(0, |c| {
            Box::pin(async move { schedule::get(&c, name).await })
        })
        .await
    }

    async fn schedule_list(&self) -> Result<Vec<ratchet_store::ScheduleRecord>> {
        self.call(0, |c| Box::pin(async move { schedule::list(&c).await }))
            .await
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        self.call(1, |c| {
            Box::pin(async move { schedule::delete(&c, name).await })
        })
        .await
    }

    async fn schedule_due(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<ratchet_store::SchedulesDue> {
        self.call(0, |c| {
            Box::pin(async move { schedule::due(&c, now, limit).await })
        })
        .await
    }

    async fn schedule_fire(
        &self,
        firing: ratchet_store::ScheduleFiring,
    ) -> Result<Option<Vec<ratchet_store::FireRecord>>> {
        let firing = &firing;
        self.call(1, |c| {
            Box::pin(async move { schedule::fire(c, firing).await })
        })
        .await
    }

    async fn schedule_fires(
        &self,
        query: ratchet_store::FireQuery,
    ) -> Result<Vec<ratchet_store::FireRecord>> {
        let query = &query;
        self.call(0, |c| {
            Box::pin(async move { schedule::fires(&c, query).await })
        })
        .await
    }

    async fn token_find(&self, hash: &str) -> Result<Option<TokenRecord>> {
        self.call(0, |c| {
            Box::pin(async move { crate::token::find(&c, hash).await })
        })
        .await
    }

    async fn clock(&self) -> Result<Timestamp> {
        self.call(0, |c| {
            Box::pin(async move {
                let row = c.one("clock", &[]).await?;
                Ok(Timestamp(crate::convert::col::<i64>(&row, "now")?))
            })
        })
        .await
    }

    fn stats(&self) -> StoreStats {
        let c = &self.inner.counters;
        StoreStats {
            round_trips: c.round_trips.load(Ordering::Relaxed),
            commits: c.commits.load(Ordering::Relaxed),
            stale_refused: c.stale.load(Ordering::Relaxed),
        }
    }

    fn wakeups(&self) -> Option<Wakeups> {
        self.inner.wakeups.as_ref().map(WakeupSender::subscribe)
    }
}
