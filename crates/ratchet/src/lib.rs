//! Ratchet: durable workflows on nothing but a database.
//!
//! Write an orchestration as a plain `async fn`; Ratchet records every step in history, so a
//! crash at any point loses nothing and repeats no step at the orchestration level. It runs on
//! an embedded SQLite file for development and on PostgreSQL in production
//! ([`Builder::sqlite`], [`Builder::postgres`]). Each backend is a cargo feature, both on by
//! default: `default-features = false, features = ["postgres"]` builds without SQLite.
//!
//! ```no_run
//! use std::time::Duration;
//! use ratchet::{ActivityContext, ActivityError, OrchestrationContext, OrchestrationError, Ratchet};
//!
//! async fn greet(_ctx: ActivityContext, name: String) -> Result<String, ActivityError> {
//!     Ok(format!("Hello, {name}!"))
//! }
//!
//! async fn hello(ctx: OrchestrationContext, names: Vec<String>) -> Result<Vec<String>, OrchestrationError> {
//!     let calls = names.iter().map(|n| ctx.activity::<String>("greet", n));
//!     ratchet::join_all(calls).await.into_iter().collect()
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let ratchet = Ratchet::builder()
//!     .sqlite("hello.db")
//!     .orchestration("hello", hello)
//!     .activity("greet", greet)
//!     .start()
//!     .await?;
//! let handle = ratchet.client().start("hello", vec!["Ada", "Linus"]).await?;
//! let greetings: Vec<String> = handle.wait(Duration::from_secs(10)).await?.into_result()?;
//! ratchet.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Tasks
//!
//! Work that needs no workflow goes to a queue: register a handler, enqueue, and workers claim,
//! retry, and complete in batches.
//!
//! ```no_run
//! use std::time::Duration;
//! use ratchet::{Ratchet, TaskContext, TaskError, TaskOptions};
//!
//! async fn send_email(ctx: TaskContext, to: String) -> Result<String, TaskError> {
//!     if ctx.attempt() < 2 {
//!         return Err(TaskError::new("SmtpBusy", "try again")); // retried with backoff
//!     }
//!     Ok(format!("sent to {to}"))
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let ratchet = Ratchet::builder().sqlite("tasks.db")
//!     .task("send_email", send_email)
//!     .queue("mail", 16)                                   // 16 at once in this process
//!     .start().await?;
//! let client = ratchet.client();
//! let options = TaskOptions::default().queue("mail").priority(-1).max_attempts(5)
//!     .delay(Duration::from_secs(1)).unique_key("welcome-ada");
//! let id = client.enqueue_with("send_email", "ada@example.com", options).await?.id();
//! let done = client.task_wait(id, Duration::from_secs(30)).await?; // state Completed, output
//! # Ok(()) }
//! ```
//!
//! # Events
//!
//! An event store with Dynamic Consistency Boundaries: read the events a decision depends
//! on, decide, and append only if none of them changed since.
//!
//! ```no_run
//! use ratchet::{EventQuery, NewEvent, Projector, QueryItem, Ratchet};
//! use serde_json::json;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let ratchet = Ratchet::builder().sqlite("events.db").start().await?;
//! let events = ratchet.client().events();
//! let mut enrolled = Projector::new(
//!     EventQuery::item(QueryItem::new(["StudentEnrolled"], ["course:c1"])),
//!     0_u32,
//!     |n, _| *n += 1,
//! );
//! let condition = events.project(&mut [&mut enrolled]).await?;
//! if *enrolled.state() < 30 {
//!     let event = NewEvent::new("StudentEnrolled", ["course:c1", "student:ada"], json!({}));
//!     // Error::AppendConflict if another enrollment in c1 landed since the read.
//!     events.append_if(vec![event], condition).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! # Guarantees
//!
//! - A turn's history append, the work it schedules and its status change commit atomically.
//! - Activities and tasks run at least once; a completion carrying a lost lease is refused.
//! - Signals are never dropped: raised before the orchestration waits, they are buffered.
//! - A replay that disagrees with history fails the instance with an error naming the event.
//!
//! # Determinism
//!
//! Orchestration code must reach the outside world only through its [`OrchestrationContext`]:
//! `ctx.now()`, `ctx.uuid()`, `ctx.random()`, activities, timers and signals. Use
//! [`join_all`] and [`race`] to combine steps (`futures::select!` picks at random and must not
//! be used).
#![deny(missing_docs)]

pub mod graph;

use std::future::Future;
#[cfg(feature = "sqlite")]
use std::path::PathBuf;
use std::sync::Arc;

/// The limits at the edge, stated once: times, durations, nesting and identifiers.
pub use ratchet_core::limits;
pub use ratchet_core::{
    join_all, race, ActivityError, ActivityOptions, ErrorInfo, HistoryEvent, Limits,
    OrchestrationContext, OrchestrationError, RetryPolicy, TaskError, TaskOptions, Timestamp,
};
/// Traces: the W3C `traceparent` an instance carries into its turns and activities.
pub use ratchet_runtime::trace;
pub use ratchet_runtime::{
    append_events, ActivityContext, Appended, CatchUp, Client, Clock, Error, EventStore,
    FireResult, InstanceHandle, InstanceOutcome, Overlap, Projection, Projector, QueueConfig,
    RegisteredNames, Registry, RemoteClaim, RemoteOutcome, RemoteResult, Result, Runtime,
    RuntimeConfig, ScheduleDescription, ScheduleOptions, StartOptions, TaskContext, TaskRequest,
    EVENTS_APPEND_ACTIVITY,
};
pub use ratchet_store::{
    event_size, validate_queue_name, AppendCondition, AppendOutcome, ClaimedTask, CloudEventError,
    CompletionResult, Direction, EnqueueOutcome, EventAppend, EventPage, EventQuery, EventRead,
    Fence, FireKind, FireRecord, HistoryRecord, IfExists, InstanceFilter, InstanceFollow,
    InstanceRecord, InstanceStatus, LeaseState, NewEvent, NewToken, NewWorkflow, Position,
    QueryItem, QueueLimits, QueueStats, ScheduleAction, ScheduleRecord, Store, StoreError,
    StoreStats, StoredEvent, TaskAction, TaskActionOutcome, TaskFilter, TaskId, TaskOwner,
    TaskRecord, TaskState, ThroughputBucket, ThroughputQuery, TokenRecord, WorkerAbout,
    WorkerRecord, WorkflowPut, WorkflowRecord, ACTIVITY_QUEUE, MAX_EVENTS_PER_APPEND,
    MAX_EVENT_BYTES, MAX_EVENT_TYPE_BYTES, MAX_QUERY_ITEMS, MAX_QUERY_TYPES,
    MAX_QUERY_TYPES_IN_ALL, MAX_TAGS, MAX_TAG_BYTES,
};
#[cfg(feature = "postgres")]
pub use ratchet_store_postgres::{
    describe as describe_database_url, PostgresConfig, PostgresStore,
};
#[cfg(feature = "sqlite")]
pub use ratchet_store_sqlite::{SqliteStore, SCHEMA_VERSION};
/// Declarative workflows: the Serverless Workflow DSL, compiled and run as orchestrations.
pub use ratchet_workflow as workflow;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A runtime and a client on one store: the usual way to embed Ratchet.
pub struct Ratchet {
    runtime: Runtime,
    client: Client,
}

impl Ratchet {
    /// Starts building: choose a store, register orchestrations and activities, then `start`.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The client, which hands the instances it starts straight to this runtime.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The runtime.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The store's traffic counters.
    pub fn stats(&self) -> StoreStats {
        self.client.store().stats()
    }

    /// Finishes or releases running work and stops. See [`Runtime::shutdown`].
    pub async fn shutdown(&self) {
        self.runtime.shutdown().await;
    }
}

/// Builds a [`Ratchet`].
#[derive(Default)]
pub struct Builder {
    registry: Registry,
    config: RuntimeConfig,
    queues: Vec<(String, QueueConfig)>,
    store: Option<Arc<dyn Store>>,
    #[cfg(feature = "sqlite")]
    sqlite: Option<PathBuf>,
    #[cfg(feature = "postgres")]
    postgres: Option<(String, PostgresConfig)>,
    clock: Option<Clock>,
    calls: Option<workflow::CallConfig>,
    processes: workflow::ProcessConfig,
}

impl Builder {
    /// How the calls of declarative workflows (`call: http`, `call: openapi`) reach the
    /// world from this process: host names sent to fixed addresses, private root
    /// certificates. Without it, they go out as DNS and the web's roots say.
    pub fn calls(mut self, config: workflow::CallConfig) -> Self {
        self.calls = Some(config);
        self
    }

    /// Which processes of declarative workflows (`run: shell`, `run: script` in python or
    /// js) this process runs. None by default: a definition is data, and a process runs with
    /// this process's rights, so a worker runs them only when told which.
    pub fn processes(mut self, config: workflow::ProcessConfig) -> Self {
        self.processes = config;
        self
    }

    /// Uses the embedded SQLite file at `path` (created if missing).
    #[cfg(feature = "sqlite")]
    pub fn sqlite(mut self, path: impl Into<PathBuf>) -> Self {
        self.sqlite = Some(path.into());
        self
    }

    /// Uses PostgreSQL at `url` (`postgres://user:password@host:port/db`), in the schema
    /// `ratchet`, created or upgraded on start.
    #[cfg(feature = "postgres")]
    pub fn postgres(self, url: impl Into<String>) -> Self {
        self.postgres_with(url, PostgresConfig::default())
    }

    /// Uses PostgreSQL at `url` with `config` (schema, pool size, notifications, ...).
    #[cfg(feature = "postgres")]
    pub fn postgres_with(mut self, url: impl Into<String>, config: PostgresConfig) -> Self {
        self.postgres = Some((url.into(), config));
        self
    }

    /// Uses an already opened store.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Reads this host's time from `clock` instead of the system clock (to test a host whose
    /// clock is wrong: its offset from the database's clock is measured and corrected).
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Sets the runtime configuration.
    pub fn config(mut self, config: RuntimeConfig) -> Self {
        self.config = config;
        self
    }

    /// Registers version 1 of an orchestration.
    pub fn orchestration<I, O, F, Fut>(mut self, name: &str, f: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(OrchestrationContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<O, OrchestrationError>> + Send + 'static,
    {
        self.registry.orchestration(name, f);
        self
    }

    /// Registers one version of an orchestration (new instances run the highest).
    pub fn orchestration_version<I, O, F, Fut>(mut self, name: &str, version: u32, f: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(OrchestrationContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<O, OrchestrationError>> + Send + 'static,
    {
        self.registry.orchestration_version(name, version, f);
        self
    }

    /// The names registered so far (to compile declarative workflows against).
    pub fn names(&self) -> RegisteredNames {
        self.registry.names()
    }

    /// Registers a declarative workflow as version `version` of its orchestration
    /// (`namespace/name`, see [`workflow::Workflow::orchestration_name`]).
    pub fn workflow(self, workflow: workflow::Workflow, version: u32) -> Self {
        workflow.register(&self.registry, version);
        self
    }

    /// Registers an activity.
    pub fn activity<I, O, F, Fut>(mut self, name: &str, f: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(ActivityContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<O, ActivityError>> + Send + 'static,
    {
        self.registry.activity(name, f);
        self
    }

    /// Lets this process's orchestrations (and declarative workflows) call activities it
    /// does not register: workers elsewhere run them, claiming them by name over HTTP
    /// (`POST /v1/workers/{worker}/claim` with `activities`). See
    /// [`Registry::activities_elsewhere`].
    pub fn activities_elsewhere(mut self) -> Self {
        self.registry.activities_elsewhere();
        self
    }

    /// Registers a standalone task handler.
    pub fn task<I, O, F, Fut>(mut self, name: &str, f: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(TaskContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<O, TaskError>> + Send + 'static,
    {
        self.registry.task(name, f);
        self
    }

    /// Works the task queue `name` with `concurrency` slots (and a prefetch buffer of a
    /// quarter of that). Without any, a process with task handlers works `default` with 64.
    pub fn queue(self, name: &str, concurrency: usize) -> Self {
        self.queue_with(name, QueueConfig::with_concurrency(concurrency))
    }

    /// Works the task queue `name` as `config` says.
    pub fn queue_with(mut self, name: &str, config: QueueConfig) -> Self {
        self.queues.push((name.to_string(), config));
        self
    }

    async fn open(&mut self) -> Result<Arc<dyn Store>> {
        if let Some(store) = self.store.take() {
            return Ok(store);
        }
        #[cfg(feature = "sqlite")]
        if let Some(path) = self.sqlite.take() {
            return Ok(Arc::new(SqliteStore::open(path).await?));
        }
        #[cfg(feature = "postgres")]
        if let Some((url, config)) = self.postgres.take() {
            return Ok(Arc::new(PostgresStore::connect_with(&url, config).await?));
        }
        Err(Error::Config(
            "choose a store: .sqlite(path), .postgres(url) or .store(store)".into(),
        ))
    }

    /// Opens the store and returns a client that runs nothing here: for a process that only
    /// starts instances and enqueues tasks. Task names and inputs are checked against the
    /// tasks registered on this builder.
    ///
    /// # Errors
    ///
    /// As [`Builder::start`].
    pub async fn client(mut self) -> Result<Client> {
        let store = self.open().await?;
        Ok(Client::new(store).with_registry(Arc::new(self.registry)))
    }

    /// Opens the store and starts the runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] when the store cannot be opened, [`Error::Config`] for a bad
    /// configuration or when no store was chosen.
    pub async fn start(mut self) -> Result<Ratchet> {
        let store = self.open().await?;
        let mut config = self.config;
        config.queues.extend(self.queues);
        let clock = self.clock.unwrap_or_default();
        // Every process can run the calls of declarative workflows.
        if !self.registry.has_activity(workflow::CALL_ACTIVITY) {
            let calls = self.calls.take().unwrap_or_default();
            workflow::register_calls(&mut self.registry, &calls)
                .map_err(|e| Error::Config(e.to_string()))?;
        }
        // Every process answers their processes: it runs those it allows, refuses others.
        if !self.registry.has_activity(workflow::PROCESS_ACTIVITY) {
            workflow::register_processes(&mut self.registry, &self.processes);
        }
        let runtime = Runtime::start_with_clock(store, self.registry, config, clock)?;
        let client = runtime.client();
        Ok(Ratchet { runtime, client })
    }
}
