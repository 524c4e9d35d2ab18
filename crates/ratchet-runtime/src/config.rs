use std::collections::BTreeMap;
use std::time::Duration;

use ratchet_core::Limits;

/// How this process works one standalone-task queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueConfig {
    /// Tasks of the queue run here at once.
    pub concurrency: usize,
    /// Tasks claimed ahead into a local buffer, so a freed slot starts the next one without
    /// waiting for a claim. The buffer goes back to the queue on shutdown.
    pub prefetch: usize,
}

impl QueueConfig {
    /// `concurrency` slots and a prefetch buffer of a quarter of that (at least 1).
    pub fn with_concurrency(concurrency: usize) -> Self {
        Self {
            concurrency,
            prefetch: (concurrency / 4).max(1),
        }
    }
}

/// How a runtime behaves. Every field has a sensible default; see [`RuntimeConfig::default`].
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// A name for this process, shown with what it runs (`GET /v1/workers`, the console).
    pub label: Option<String>,
    /// Orchestration turns run at once.
    pub max_orchestrations: usize,
    /// Activities run at once.
    pub max_activities: usize,
    /// How long a lease lasts; a crashed process's work is taken over after this.
    pub lease: Duration,
    /// How often running activities renew their leases (keep it well under `lease`).
    pub heartbeat: Duration,
    /// How often the runtime looks for work when nothing woke it.
    pub poll_interval: Duration,
    /// Live orchestrations kept in memory between turns.
    pub cache_size: usize,
    /// Items per group commit at most.
    pub commit_batch: usize,
    /// Group commits in flight at once at most.
    pub commit_concurrency: usize,
    /// How long a group commit holding an activity completion waits for that activity's
    /// siblings still running here, so that a fan-out's results share one commit.
    pub commit_linger: Duration,
    /// Whether an orchestration's next turn may run on the results of its activities that
    /// finished here before they are committed, and commit with them: one commit on its path
    /// instead of two. The store refuses such a turn if anything claimed the instance since its
    /// last turn, and the results then wait in its inbox as usual.
    pub fed_turns: bool,
    /// Per-instance limits.
    pub limits: Limits,
    /// Largest payload (input, output, signal) in bytes.
    pub max_payload_bytes: usize,
    /// How long shutdown waits for running work before releasing its leases.
    pub shutdown_grace: Duration,
    /// Finished instances (and their history) older than this are removed; `None` keeps them.
    pub retention: Option<Duration>,
    /// How often the retention purge runs.
    pub maintenance_interval: Duration,
    /// The standalone-task queues this process works, and how. Empty: the queue `default`
    /// with 64 slots when tasks are registered.
    pub queues: BTreeMap<String, QueueConfig>,
    /// Finished standalone tasks (results and dead letters) older than this are removed;
    /// `None` keeps them.
    pub task_retention: Option<Duration>,
    /// How long after expiring this process's leases stay its own while it says it is alive
    /// (on a connection of its own): a database stall shorter than this (a table lock, a slow
    /// statement) costs no lease and runs nothing twice. A lease it holds without knowing (its
    /// claim's answer was lost) is taken over after `lease` plus this.
    pub stall_grace: Duration,
    /// How often this process measures its clock's offset from the database's clock, which
    /// leases, visibility times and timers are judged by.
    pub clock_sync: Duration,
    /// Whether this process fires schedules (every process may: each tick fires once).
    pub schedules: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            label: None,
            max_orchestrations: 256,
            max_activities: 256,
            lease: Duration::from_secs(15),
            heartbeat: Duration::from_secs(5),
            poll_interval: Duration::from_secs(1),
            cache_size: 10_000,
            commit_batch: 512,
            commit_concurrency: 12,
            commit_linger: Duration::from_millis(2),
            fed_turns: true,
            limits: Limits::default(),
            max_payload_bytes: 1 << 20,
            shutdown_grace: Duration::from_secs(10),
            retention: None,
            maintenance_interval: Duration::from_secs(60),
            queues: BTreeMap::new(),
            task_retention: Some(Duration::from_secs(7 * 24 * 60 * 60)),
            clock_sync: Duration::from_secs(30),
            stall_grace: Duration::from_secs(60),
            schedules: true,
        }
    }
}

/// The most slots (orchestration turns, activities, a queue's tasks) a process may run at
/// once: far past what one process uses, and below what its semaphores can count.
pub const MAX_SLOTS: usize = 1_000_000;

impl RuntimeConfig {
    /// Checks the values fit together.
    ///
    /// # Errors
    ///
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("max_orchestrations", self.max_orchestrations),
            ("max_activities", self.max_activities),
            ("cache_size", self.cache_size),
            ("commit_batch", self.commit_batch),
            ("commit_concurrency", self.commit_concurrency),
            ("max_payload_bytes", self.max_payload_bytes),
            ("limits.max_fan_out", self.limits.max_fan_out),
            ("limits.max_history", self.limits.max_history),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(format!("{name} must be at least 1"));
        }
        let slots = [
            ("max_orchestrations", self.max_orchestrations),
            ("max_activities", self.max_activities),
        ];
        if let Some((name, _)) = slots.iter().find(|(_, v)| *v > MAX_SLOTS) {
            return Err(format!("{name} must be at most {MAX_SLOTS}"));
        }
        if self.lease < Duration::from_millis(100) {
            return Err("lease must be at least 100 ms".into());
        }
        if self.heartbeat >= self.lease {
            return Err("heartbeat must be shorter than lease".into());
        }
        if self.poll_interval.is_zero() {
            return Err("poll_interval must be positive".into());
        }
        if self.maintenance_interval.is_zero() {
            return Err("maintenance_interval must be positive".into());
        }
        if self.clock_sync.is_zero() {
            return Err("clock_sync must be positive".into());
        }
        for (name, q) in &self.queues {
            ratchet_store::validate_queue_name(name)?;
            if q.concurrency == 0 || q.concurrency > MAX_SLOTS {
                return Err(format!(
                    "queue {name}: concurrency must be 1 to {MAX_SLOTS}, got {}",
                    q.concurrency
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_counts_past_the_limit_are_refused_by_name() {
        let too_many = |edit: fn(&mut RuntimeConfig)| {
            let mut config = RuntimeConfig::default();
            edit(&mut config);
            config.validate().err().unwrap_or_default()
        };
        assert!(too_many(|c| c.max_orchestrations = usize::MAX).contains("max_orchestrations"));
        assert!(too_many(|c| c.max_activities = MAX_SLOTS + 1).contains("max_activities"));
        assert!(too_many(|c| {
            c.queues
                .insert("q".into(), QueueConfig::with_concurrency(usize::MAX));
        })
        .contains("queue q"));
        let at_limit = RuntimeConfig {
            max_orchestrations: MAX_SLOTS,
            max_activities: MAX_SLOTS,
            ..RuntimeConfig::default()
        };
        assert_eq!(at_limit.validate(), Ok(()));
    }
}
