use std::sync::{Arc, Mutex};

use ratchet_store::{ClaimedInstance, LeaseRelease, Store};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::cache::StickyCache;
use crate::capacity::Capacity;
use crate::clock::Clock;
use crate::committer::{self, Committer};
use crate::hub::Hub;
use crate::lifecycle::Lifecycle;
use crate::wake::Wake;
use crate::{
    dispatcher, heartbeat, maintenance, notifier, turn, Client, Error, Registry, Result,
    RuntimeConfig,
};

/// What every service of a runtime shares: the store and its clock, the registry and
/// configuration, and the runtime's parts, each in a file of its own.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    /// The database's time as this process knows it (see `clock`).
    pub(crate) clock: Arc<Clock>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) config: RuntimeConfig,
    /// This process's name in the leases it takes.
    pub(crate) owner: String,
    pub(crate) committer: Committer,
    pub(crate) hub: Arc<Hub>,
    /// Starts, signals and enqueues of this runtime's clients, merged.
    pub(crate) calls: Arc<crate::client::Calls>,
    pub(crate) cache: StickyCache,
    pub(crate) capacity: Capacity,
    pub(crate) wake: Wake,
    pub(crate) lifecycle: Lifecycle,
    /// Instances leased here by a commit or a start: their turns run at once.
    pub(crate) locked: mpsc::UnboundedSender<ClaimedInstance>,
}

impl Shared {
    /// The database's time as this process knows it.
    pub(crate) fn now(&self) -> ratchet_core::Timestamp {
        self.clock.now()
    }

    /// The task queues the dispatcher claims from: the activities' when any is registered,
    /// and every configured queue.
    pub(crate) fn task_queues(&self) -> Vec<String> {
        let mut queues: Vec<String> = self.config.queues.keys().cloned().collect();
        if !self.registry.activity_names().is_empty() {
            queues.push(ratchet_store::ACTIVITY_QUEUE.to_string());
        }
        queues
    }

    /// Marks one unit of work in flight until the guard drops.
    pub(crate) fn begin_work(self: &Arc<Self>) -> WorkGuard {
        self.lifecycle.work_started();
        WorkGuard(self.clone())
    }

    /// Runs the turn of an instance leased here (by a commit or a start) as soon as it can.
    pub(crate) fn run_turn(&self, claimed: ClaimedInstance) {
        // The receiver lives as long as the runtime's services; after shutdown the instance's
        // lease simply expires.
        let _ = self.locked.send(claimed);
    }
}

pub(crate) struct WorkGuard(Arc<Shared>);

impl Drop for WorkGuard {
    fn drop(&mut self) {
        self.0.wake.work_finished();
        self.0.lifecycle.work_done();
    }
}

/// A running Ratchet runtime: claims orchestration turns and activities from the store, runs
/// them, and commits the results in groups. Stop it with [`Runtime::shutdown`].
pub struct Runtime {
    shared: Arc<Shared>,
    services: Mutex<Vec<JoinHandle<()>>>,
    committer: Mutex<Option<JoinHandle<()>>>,
}

impl Runtime {
    /// Starts the runtime's services on the current tokio runtime.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid configuration.
    pub fn start(store: Arc<dyn Store>, registry: Registry, config: RuntimeConfig) -> Result<Self> {
        Self::start_with_clock(store, registry, config, Clock::system())
    }

    /// Starts the runtime with `clock` as this host's clock (its offset from the database's
    /// clock is measured before the first claim and then every `clock_sync`).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] for an invalid configuration.
    pub fn start_with_clock(
        store: Arc<dyn Store>,
        mut registry: Registry,
        mut config: RuntimeConfig,
        clock: Clock,
    ) -> Result<Self> {
        if config.queues.is_empty() && !registry.task_names().is_empty() {
            config
                .queues
                .insert("default".into(), crate::QueueConfig::with_concurrency(64));
        }
        config.validate().map_err(Error::Config)?;
        let (committer, rx) = Committer::new();
        let clock = Arc::new(clock);
        let calls = Arc::new(crate::client::Calls::new(store.clone(), clock.clone()));
        crate::events::register_append_activity(&mut registry, calls.clone());
        crate::events::register_await_activities(&mut registry, calls.clone());
        crate::started::register_start_activity(&mut registry, calls.clone());
        let (locked, locked_rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            store,
            clock,
            registry: Arc::new(registry),
            owner: format!("ratchet-{}", uuid::Uuid::new_v4()),
            committer,
            hub: Arc::new(Hub::default()),
            calls,
            cache: StickyCache::new(config.cache_size),
            capacity: Capacity::new(&config),
            wake: Wake::default(),
            lifecycle: Lifecycle::default(),
            locked,
            config,
        });
        tracing::info!(owner = %shared.owner, "runtime started");
        let committer = tokio::spawn(committer::run(shared.clone(), rx));
        let mut services = vec![
            tokio::spawn(crate::clock::run(shared.clone())),
            tokio::spawn(turn::run_locked(shared.clone(), locked_rx)),
            tokio::spawn(dispatcher::run(shared.clone())),
            tokio::spawn(heartbeat::run(shared.clone())),
            tokio::spawn(crate::liveness::run(shared.clone())),
            tokio::spawn(maintenance::run(shared.clone())),
            tokio::spawn(crate::schedule::service::run(shared.clone())),
        ];
        if let Some(wakeups) = shared.store.wakeups() {
            services.push(tokio::spawn(notifier::run(shared.clone(), wakeups.work)));
            services.push(tokio::spawn(Hub::forward(
                Arc::downgrade(&shared.hub),
                wakeups.finished,
            )));
        }
        Ok(Self {
            shared,
            services: Mutex::new(services),
            committer: Mutex::new(Some(committer)),
        })
    }

    /// A client that starts work on this runtime without a claim round trip and is woken by it
    /// when instances finish.
    pub fn client(&self) -> Client {
        Client::local(self.shared.clone())
    }

    /// This runtime's lease owner id.
    pub fn owner(&self) -> &str {
        &self.shared.owner
    }

    /// Number of live orchestrations in the sticky cache.
    pub fn cached_instances(&self) -> usize {
        self.shared.cache.len()
    }

    /// Stops claiming work, lets running turns and activities finish for up to
    /// `shutdown_grace`, releases the leases of whatever is still running so other processes
    /// take it at once, and stops. Calling it twice is harmless.
    pub async fn shutdown(&self) {
        if !self.shared.lifecycle.close() {
            return;
        }
        self.shared.wake.work.notify_waiters();
        // The prefetch buffer goes back at once: other processes can run it now.
        let unstarted = self.shared.capacity.running.take_unstarted();
        if !unstarted.is_empty() {
            let release = LeaseRelease {
                tasks: unstarted,
                instances: Vec::new(),
                now: self.shared.now(),
            };
            if let Err(e) = self.shared.store.lease_release(release).await {
                tracing::warn!(error = %e, "could not give prefetched tasks back; their leases expire on their own");
            }
        }
        let services: Vec<_> =
            std::mem::take(&mut *self.services.lock().unwrap_or_else(|p| p.into_inner()));
        for s in &services {
            s.abort();
        }
        let drained = self
            .shared
            .lifecycle
            .drained(self.shared.config.shutdown_grace)
            .await;
        if !drained {
            let tasks = self.shared.capacity.running.leases();
            tracing::warn!(
                tasks = tasks.len(),
                "shutdown grace expired; releasing leases of running activities"
            );
            if let Err(e) = self
                .shared
                .store
                .lease_release(LeaseRelease {
                    tasks,
                    instances: Vec::new(),
                    now: self.shared.now(),
                })
                .await
            {
                tracing::warn!(error = %e, "could not release leases; they expire on their own");
            }
        }
        self.shared.committer.stop();
        let handle = self
            .committer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
        // Whatever this process still holds may be taken over once its lease expires.
        if let Err(e) = self.shared.store.worker_gone(&self.shared.owner).await {
            tracing::debug!(error = %e, "could not say this process is gone; that lapses on its own");
        }
        tracing::info!(owner = %self.shared.owner, "runtime stopped");
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shared.lifecycle.close();
        for s in self
            .services
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            s.abort();
        }
        self.shared.committer.stop();
    }
}
