use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::clock::Clock;
use lru::LruCache;
use ratchet_core::{Execution, ParentRef};
use ratchet_store::{Incarnation, LeaseRelease, Store, ACTIVITY_QUEUE};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::task::JoinHandle;

use crate::committer::{self, Committer};
use crate::hub::Hub;
use crate::running::Running;
use crate::{
    dispatcher, heartbeat, maintenance, notifier, Client, Error, Registry, Result, RuntimeConfig,
};

/// A live execution kept between turns (the sticky cache).
pub(crate) struct Cached {
    pub(crate) exec: Execution,
    pub(crate) incarnation: Incarnation,
    pub(crate) execution: u32,
    pub(crate) version: u32,
    pub(crate) parent: Option<ParentRef>,
}

/// State shared by the runtime's services.
pub(crate) struct Shared {
    pub(crate) store: Arc<dyn Store>,
    /// The database's time as this process knows it (see `clock`).
    pub(crate) clock: Arc<Clock>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) config: RuntimeConfig,
    pub(crate) owner: String,
    cache: Mutex<LruCache<String, Cached>>,
    pub(crate) committer: Committer,
    pub(crate) orchestration_slots: Arc<Semaphore>,
    pub(crate) activity_slots: Arc<Semaphore>,
    /// Slots of each standalone-task queue this process works.
    pub(crate) queue_slots: HashMap<String, Arc<Semaphore>>,
    /// Wakes the dispatcher: local work was created, or capacity freed after a full claim.
    pub(crate) wake: Notify,
    /// Wakes the dispatcher: the store says work became ready, maybe in another process.
    pub(crate) remote_work: Notify,
    pub(crate) hub: Arc<Hub>,
    /// Starts, signals and enqueues of this runtime's clients, merged.
    pub(crate) calls: Arc<crate::client::Calls>,
    /// The earliest timer committed here that the dispatcher may not know about yet.
    pub(crate) next_timer: Mutex<Option<ratchet_core::Timestamp>>,
    /// Tells the dispatcher to recompute its sleep (a nearer timer), without a claim.
    pub(crate) timer_changed: Notify,
    /// Activity and task attempts held here.
    pub(crate) running: Running,
    /// Set when the dispatcher found no free slot: the next unit of work to finish wakes it.
    pub(crate) saturated: AtomicBool,
    /// Turns and activities in flight, for graceful shutdown.
    inflight: AtomicUsize,
    idle: Notify,
    closing: AtomicBool,
    /// Becomes true on shutdown: attempts waiting for a slot give their lease back.
    closed: watch::Sender<bool>,
}

impl Shared {
    /// The database's time as this process knows it.
    pub(crate) fn now(&self) -> ratchet_core::Timestamp {
        self.clock.now()
    }

    pub(crate) fn cache_lock(&self) -> MutexGuard<'_, LruCache<String, Cached>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves once shutdown began.
    pub(crate) async fn closed(&self) {
        let mut closed = self.closed.subscribe();
        let _ = closed.wait_for(|c| *c).await;
    }

    /// The slots of `queue`: activities share one pool, each task queue has its own.
    pub(crate) fn slots(&self, queue: &str) -> Option<Arc<Semaphore>> {
        if queue == ACTIVITY_QUEUE {
            Some(self.activity_slots.clone())
        } else {
            self.queue_slots.get(queue).cloned()
        }
    }

    /// Records a timer committed by this process so the dispatcher wakes for it on time.
    pub(crate) fn timer_committed(&self, at: ratchet_core::Timestamp) {
        let mut next = self.next_timer.lock().unwrap_or_else(|p| p.into_inner());
        if next.is_none_or(|n| at < n) {
            *next = Some(at);
            self.timer_changed.notify_one();
        }
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// Activities this process can start now without queueing.
    pub(crate) fn activity_room(&self) -> usize {
        self.config
            .max_activities
            .saturating_sub(self.running.activities())
    }

    /// Tasks of `queue` this process can take now: its slots plus its prefetch buffer, less
    /// what it holds.
    pub(crate) fn queue_room(&self, queue: &str) -> usize {
        let Some(q) = self.config.queues.get(queue) else {
            return 0;
        };
        (q.concurrency + q.prefetch).saturating_sub(self.running.in_queue(queue))
    }

    /// Marks one unit of work in flight until the guard drops.
    pub(crate) fn begin_work(self: &Arc<Self>) -> WorkGuard {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        WorkGuard(self.clone())
    }
}

pub(crate) struct WorkGuard(Arc<Shared>);

impl Drop for WorkGuard {
    fn drop(&mut self) {
        if self.0.saturated.swap(false, Ordering::SeqCst) {
            self.0.wake.notify_one();
        }
        if self.0.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
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
        let cache_size = NonZeroUsize::new(config.cache_size).unwrap_or(NonZeroUsize::MIN);
        let (committer, rx) = Committer::new();
        let clock = Arc::new(clock);
        let calls = Arc::new(crate::client::Calls::new(store.clone(), clock.clone()));
        crate::events::register_append_activity(&mut registry, calls.clone());
        let shared = Arc::new(Shared {
            store,
            clock,
            registry: Arc::new(registry),
            owner: format!("ratchet-{}", uuid::Uuid::new_v4()),
            cache: Mutex::new(LruCache::new(cache_size)),
            committer,
            orchestration_slots: Arc::new(Semaphore::new(config.max_orchestrations)),
            activity_slots: Arc::new(Semaphore::new(config.max_activities)),
            queue_slots: config
                .queues
                .iter()
                .map(|(name, q)| (name.clone(), Arc::new(Semaphore::new(q.concurrency))))
                .collect(),
            wake: Notify::new(),
            remote_work: Notify::new(),
            hub: Arc::new(Hub::default()),
            calls,
            next_timer: Mutex::new(None),
            timer_changed: Notify::new(),
            running: Running::default(),
            saturated: AtomicBool::new(false),
            inflight: AtomicUsize::new(0),
            idle: Notify::new(),
            closing: AtomicBool::new(false),
            closed: watch::channel(false).0,
            config,
        });
        tracing::info!(owner = %shared.owner, "runtime started");
        let committer = tokio::spawn(committer::run(shared.clone(), rx));
        let mut services = vec![
            tokio::spawn(crate::clock::run(shared.clone())),
            tokio::spawn(dispatcher::run(shared.clone())),
            tokio::spawn(heartbeat::run(shared.clone())),
            tokio::spawn(crate::liveness::run(shared.clone())),
            tokio::spawn(maintenance::run(shared.clone())),
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
        self.shared.cache_lock().len()
    }

    /// Stops claiming work, lets running turns and activities finish for up to
    /// `shutdown_grace`, releases the leases of whatever is still running so other processes
    /// take it at once, and stops. Calling it twice is harmless.
    pub async fn shutdown(&self) {
        if self.shared.closing.swap(true, Ordering::SeqCst) {
            return;
        }
        self.shared.closed.send_replace(true);
        self.shared.wake.notify_waiters();
        // The prefetch buffer goes back at once: other processes can run it now.
        let unstarted = self.shared.running.take_unstarted();
        if !unstarted.is_empty() {
            let release = LeaseRelease {
                tasks: unstarted,
                instances: Vec::new(),
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
        let drained = tokio::time::timeout(self.shared.config.shutdown_grace, async {
            loop {
                let idle = self.shared.idle.notified();
                if self.shared.inflight.load(Ordering::SeqCst) == 0 {
                    break;
                }
                idle.await;
            }
        })
        .await;
        if drained.is_err() {
            let tasks = self.shared.running.leases();
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
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.closed.send_replace(true);
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
