//! Capacity: the slots turns, activities and each task queue run in, and the attempts held
//! here (running, or waiting in the prefetch buffer).

use std::collections::HashMap;
use std::sync::Arc;

use ratchet_store::ACTIVITY_QUEUE;
use tokio::sync::Semaphore;

use crate::running::Running;
use crate::RuntimeConfig;

/// How much more this process can take.
pub(crate) struct Capacity {
    /// Turns running at once.
    pub(crate) orchestration_slots: Arc<Semaphore>,
    activity_slots: Arc<Semaphore>,
    max_activities: usize,
    /// Slots of each standalone-task queue this process works, and how many it may hold
    /// (slots plus prefetch).
    queues: HashMap<String, (Arc<Semaphore>, usize)>,
    /// Activity and task attempts held here.
    pub(crate) running: Running,
}

impl Capacity {
    pub(crate) fn new(config: &RuntimeConfig) -> Self {
        Self {
            orchestration_slots: Arc::new(Semaphore::new(config.max_orchestrations)),
            activity_slots: Arc::new(Semaphore::new(config.max_activities)),
            max_activities: config.max_activities,
            queues: config
                .queues
                .iter()
                .map(|(name, q)| {
                    let slots = Arc::new(Semaphore::new(q.concurrency));
                    (name.clone(), (slots, q.concurrency + q.prefetch))
                })
                .collect(),
            running: Running::default(),
        }
    }

    /// The slots of `queue`: activities share one pool, each task queue has its own.
    pub(crate) fn slots(&self, queue: &str) -> Option<Arc<Semaphore>> {
        if queue == ACTIVITY_QUEUE {
            Some(self.activity_slots.clone())
        } else {
            self.queues.get(queue).map(|(slots, _)| slots.clone())
        }
    }

    /// Turns this process can start now.
    pub(crate) fn orchestration_room(&self) -> usize {
        self.orchestration_slots.available_permits()
    }

    /// Activities this process can start now without queueing.
    pub(crate) fn activity_room(&self) -> usize {
        self.max_activities
            .saturating_sub(self.running.activities())
    }

    /// Tasks of `queue` this process can take now: its slots plus its prefetch buffer, less
    /// what it holds.
    pub(crate) fn queue_room(&self, queue: &str) -> usize {
        self.queues.get(queue).map_or(0, |(_, most)| {
            most.saturating_sub(self.running.in_queue(queue))
        })
    }
}

#[cfg(test)]
mod tests {
    use ratchet_core::ActivityOptions;
    use ratchet_store::{ClaimedTask, Fence, TaskId};

    use super::*;
    use crate::QueueConfig;

    fn task(id: i64, queue: &str) -> ClaimedTask {
        ClaimedTask {
            id: TaskId(id),
            fence: Fence(1),
            queue: queue.into(),
            name: "t".into(),
            input: serde_json::Value::Null,
            options: ActivityOptions::default(),
            owner: None,
            attempt: 1,
            metadata: None,
        }
    }

    #[test]
    fn room_is_slots_plus_prefetch_less_what_is_held() {
        let mut config = RuntimeConfig {
            max_activities: 2,
            ..RuntimeConfig::default()
        };
        let mut q = QueueConfig::with_concurrency(3);
        q.prefetch = 2;
        config.queues.insert("mail".into(), q);
        let capacity = Capacity::new(&config);
        assert_eq!(capacity.queue_room("mail"), 5);
        assert_eq!(capacity.queue_room("other"), 0, "a queue not worked here");
        assert_eq!(capacity.activity_room(), 2);
        let _held = [
            capacity.running.hold(&task(1, "mail")),
            capacity.running.hold(&task(2, "mail")),
            capacity.running.hold(&task(3, ACTIVITY_QUEUE)),
        ];
        assert_eq!(capacity.queue_room("mail"), 3);
        assert_eq!(capacity.activity_room(), 1);
        assert!(capacity.slots("mail").is_some() && capacity.slots("other").is_none());
    }
}
