//! The client: starts, steers and inspects orchestration instances and standalone tasks.

mod instances;
mod remote;
mod schedules;
mod tasks;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub use instances::{InstanceHandle, StartOptions};
pub use remote::{RemoteClaim, RemoteOutcome, RemoteResult};
pub use tasks::TaskRequest;

use ratchet_core::Timestamp;
use ratchet_store::{
    CreateOutcome, EnqueueOutcome, Lease, NewInstance, NewSignal, NewTask, SignalOutcome, Store,
};

use crate::batcher::Batcher;
use crate::clock::Clock;
use crate::hub::Hub;
use crate::runtime::Shared;
use crate::{Error, Registry, Result};

/// Starts, signals, cancels, terminates, inspects and awaits orchestration instances, and
/// enqueues, steers and inspects standalone tasks and their queues.
///
/// A client made by a [`crate::Runtime`] hands the instances it starts straight to that
/// runtime (no claim round trip), is woken by it when they finish, and checks task names and
/// inputs against its registry. A client made with [`Client::new`] talks to the store alone;
/// give it the registry with [`Client::with_registry`] to have tasks checked before they are
/// enqueued.
#[derive(Clone)]
pub struct Client {
    store: Arc<dyn ratchet_store::Store>,
    /// Starts, signals and enqueues that concurrent callers share.
    calls: Arc<Calls>,
    local: Option<Arc<Shared>>,
    /// Waiters by instance: the runtime's when local, the client's own otherwise.
    hub: Arc<Hub>,
    registry: Option<Arc<Registry>>,
    /// Enqueue task names the registry lacks (run by workers elsewhere) unchecked.
    unregistered_tasks: bool,
    max_payload_bytes: usize,
    poll_interval: Duration,
    /// The attempts handed to workers in other processes, and their liveness.
    remote: Arc<remote::Remote>,
}

/// Checks the id of an instance about to be created: printable, in normal form C, 1 to
/// 255 bytes ([`ratchet_core::limits::check_identifier`]), so that no two ids look alike in
/// a console or a terminal. An existing instance is addressed by [`validate_id`], which
/// keeps ids stored before this rule reachable.
pub(crate) fn check_new_id(id: &str) -> Result<()> {
    Ok(ratchet_core::limits::check_identifier("id", id, 255)?)
}

/// A cancel's or terminate's reason: kept in history and as the instance's error message, so
/// at most an error message's bytes ([`ratchet_core::limits::MAX_ERROR_MESSAGE_BYTES`]).
pub(crate) fn validate_reason(reason: &str) -> Result<()> {
    let max = ratchet_core::limits::MAX_ERROR_MESSAGE_BYTES;
    if reason.len() > max {
        return Err(Error::Limit(ratchet_core::limits::LimitError::new(
            "reason",
            format!("{} bytes, over the limit of {max} bytes", reason.len()),
        )));
    }
    Ok(())
}

/// Checks the id of an instance being addressed: 1 to 255 bytes, no control characters.
pub(crate) fn validate_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > 255 {
        return Err(Error::InvalidInput(format!(
            "an instance id must be 1 to 255 bytes, got {}",
            id.len()
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::InvalidInput(
            "an instance id must not contain control characters".into(),
        ));
    }
    Ok(())
}

/// Checks a name a caller gives to something it creates (an orchestration or task to run,
/// a signal to raise, a workflow a schedule starts): printable, in normal form C, 1 to 255
/// bytes; the refusal names the field `name` and says what `what` it was.
pub(crate) fn validate_name(what: &str, name: &str) -> Result<()> {
    ratchet_core::limits::check_identifier("name", name, 255).map_err(|e| {
        Error::Limit(ratchet_core::limits::LimitError::new(
            e.field,
            format!("the {what} name {}", e.rule),
        ))
    })
}

impl Client {
    /// A client on the store alone (no runtime in this process).
    pub fn new(store: Arc<dyn ratchet_store::Store>) -> Self {
        let defaults = crate::RuntimeConfig::default();
        // A store that pushes "finished" needs the poll only as a fallback.
        let poll_interval = if store.wakeups().is_some_and(|w| w.cross_process) {
            Duration::from_secs(1)
        } else {
            Duration::from_millis(200)
        };
        let hub = Arc::new(Hub::default());
        // The store's "finished" hints reach this client's waiters through a task of its own,
        // which ends with the client.
        if let (Some(wakeups), Ok(handle)) =
            (store.wakeups(), tokio::runtime::Handle::try_current())
        {
            handle.spawn(Hub::forward(Arc::downgrade(&hub), wakeups.finished));
        }
        Self {
            calls: Arc::new(Calls::new(store.clone(), Arc::new(Clock::system()))),
            store,
            local: None,
            hub,
            registry: None,
            unregistered_tasks: false,
            max_payload_bytes: defaults.max_payload_bytes,
            poll_interval,
            remote: Arc::default(),
        }
    }

    /// Checks task names and inputs against `registry` before enqueueing.
    pub fn with_registry(mut self, registry: Arc<Registry>) -> Self {
        self.registry = Some(registry);
        self
    }

    pub(crate) fn local(shared: Arc<Shared>) -> Self {
        Self {
            store: shared.store.clone(),
            calls: shared.calls.clone(),
            hub: shared.hub.clone(),
            registry: Some(shared.registry.clone()),
            unregistered_tasks: false,
            max_payload_bytes: shared.config.max_payload_bytes,
            poll_interval: shared.config.poll_interval,
            remote: Arc::default(),
            local: Some(shared),
        }
    }

    /// Enqueues tasks whose names the registry lacks without checking them (workers in other
    /// processes run them; the caller checks the names against the fleet); names it has are
    /// still checked, input included.
    pub fn with_unregistered_tasks(mut self) -> Self {
        self.unregistered_tasks = true;
        self
    }

    /// Sets how often a wait polls the store when no runtime in this process can wake it.
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// The event store on this client's database; concurrent appends through it (and its
    /// clones) share transactions.
    pub fn events(&self) -> crate::EventStore {
        self.calls.events()
    }

    /// What this client checks names against: the registry of its runtime, or the one given
    /// to [`Client::with_registry`]; `None` for a client on the store alone.
    pub fn registry(&self) -> Option<&Registry> {
        self.registry.as_deref()
    }

    /// The store this client talks to.
    pub fn store(&self) -> &Arc<dyn ratchet_store::Store> {
        &self.store
    }

    pub(crate) fn payload(&self, what: &str, value: impl Serialize) -> Result<Value> {
        let value = serde_json::to_value(value)
            .map_err(|e| Error::InvalidInput(format!("{what} does not serialize: {e}")))?;
        let size = ratchet_core::limits::json_size(&value);
        if size > self.max_payload_bytes {
            return Err(Error::PayloadTooLarge {
                what: what.to_string(),
                size,
                limit: self.max_payload_bytes,
            });
        }
        // Stored values are wrapped in history events and rows: one nested near serde_json's
        // reading limit would be written and then never read back.
        ratchet_core::limits::check_json_depth(what, &value)
            .map_err(|e| Error::InvalidInput(e.to_string()))?;
        Ok(value)
    }
}

/// The store calls a client makes for starts, signals and enqueues, each merged with the same
/// calls of concurrent callers (see `batcher`); direct calls outside a tokio runtime.
pub(crate) struct Calls {
    store: Arc<dyn Store>,
    /// The database's time as this process knows it.
    clock: Arc<Clock>,
    creates: Option<Batcher<(NewInstance, Option<Lease>), CreateOutcome>>,
    signals: Option<Batcher<NewSignal, SignalOutcome>>,
    enqueues: Option<Batcher<NewTask, EnqueueOutcome>>,
    /// Made on first use, so clients that never touch events spawn no append batcher.
    events: std::sync::OnceLock<crate::EventStore>,
}

/// Items per merged call at most.
const MAX_MERGED: usize = 1024;

impl Calls {
    pub(crate) fn new(store: Arc<dyn Store>, clock: Arc<Clock>) -> Self {
        let (s, c) = (store.clone(), clock.clone());
        let creates = Batcher::spawn(
            MAX_MERGED,
            move |items: Vec<(NewInstance, Option<Lease>)>| {
                let (store, clock) = (s.clone(), c.clone());
                async move {
                    let now = clock.now_synced(store.as_ref()).await;
                    create_all(store.as_ref(), items, now).await
                }
            },
        );
        let s = store.clone();
        let signals = Batcher::spawn(MAX_MERGED, move |items: Vec<NewSignal>| {
            let store = s.clone();
            async move { store.signal_raise(items).await }
        });
        let (s, c) = (store.clone(), clock.clone());
        let enqueues = Batcher::spawn(MAX_MERGED, move |items: Vec<NewTask>| {
            let (store, clock) = (s.clone(), c.clone());
            async move {
                let now = clock.now_synced(store.as_ref()).await;
                store.task_enqueue(items, now).await
            }
        });
        Self {
            store,
            clock,
            creates,
            signals,
            enqueues,
            events: std::sync::OnceLock::new(),
        }
    }

    /// The clock every time this process writes comes from.
    pub(crate) fn clock(&self) -> Arc<Clock> {
        self.clock.clone()
    }

    /// The database's time, measuring the clock's offset first if it never was.
    pub(crate) async fn now(&self) -> Timestamp {
        self.clock.now_synced(self.store.as_ref()).await
    }

    /// The event store of these calls, made on first use: the client's appends and the
    /// runtime's append steps share its merged transactions.
    pub(crate) fn events(&self) -> crate::EventStore {
        self.events
            .get_or_init(|| crate::EventStore::new(self.store.clone()))
            .clone()
    }

    /// Creates one instance, leased to `lease` when given.
    pub(crate) async fn create(
        &self,
        new: NewInstance,
        lease: Option<Lease>,
    ) -> Result<Option<CreateOutcome>> {
        let outcomes = match &self.creates {
            Some(b) => b.submit(vec![(new, lease)]).await?,
            None => {
                let now = self.now().await;
                self.store.instance_create(vec![new], lease, now).await?
            }
        };
        Ok(outcomes.into_iter().next())
    }

    /// Raises one signal.
    pub(crate) async fn signal(&self, signal: NewSignal) -> Result<Option<SignalOutcome>> {
        let outcomes = match &self.signals {
            Some(b) => b.submit(vec![signal]).await?,
            None => self.store.signal_raise(vec![signal]).await?,
        };
        Ok(outcomes.into_iter().next())
    }

    /// Enqueues tasks.
    pub(crate) async fn enqueue(&self, tasks: Vec<NewTask>) -> Result<Vec<EnqueueOutcome>> {
        Ok(match &self.enqueues {
            Some(b) => b.submit(tasks).await?,
            None => {
                let now = self.now().await;
                self.store.task_enqueue(tasks, now).await?
            }
        })
    }
}

/// Creates merged starts: those leased to the runtime of this process in one call, the
/// others in another (they differ in lease), outcomes back in order.
async fn create_all(
    store: &dyn Store,
    items: Vec<(NewInstance, Option<Lease>)>,
    now: Timestamp,
) -> std::result::Result<Vec<CreateOutcome>, ratchet_store::StoreError> {
    let lease = items.iter().find_map(|(_, l)| l.clone());
    let (leased, unleased): (Vec<_>, Vec<_>) = items
        .into_iter()
        .enumerate()
        .partition(|(_, (_, l))| l.is_some());
    let mut outcomes: Vec<(usize, CreateOutcome)> = Vec::new();
    for (group, lease) in [(leased, lease), (unleased, None)] {
        if group.is_empty() {
            continue;
        }
        let (positions, news): (Vec<usize>, Vec<NewInstance>) =
            group.into_iter().map(|(i, (n, _))| (i, n)).unzip();
        let created = store.instance_create(news, lease, now).await?;
        outcomes.extend(positions.into_iter().zip(created));
    }
    outcomes.sort_by_key(|(i, _)| *i);
    Ok(outcomes.into_iter().map(|(_, o)| o).collect())
}
