//! The attempts this process holds leases on: activities and standalone tasks, started or
//! waiting for a slot (the prefetch buffer).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use ratchet_store::{ClaimedTask, Fence, TaskId, ACTIVITY_QUEUE};
use tokio::sync::watch;

/// One attempt held here.
struct Held {
    fence: Fence,
    queue: String,
    /// The instance of an activity (so the committer can wait for its siblings).
    instance: Option<String>,
    /// False while it waits for a slot: such attempts go back at once on shutdown.
    started: bool,
    /// Tells a standalone task's handler that a client cancelled it.
    cancel: watch::Sender<bool>,
}

/// The attempts held here, by task id, with how many each queue and each instance has: the
/// committer and the dispatcher ask for those counts on every batch, and thousands may be held.
#[derive(Default)]
struct Holdings {
    by_id: HashMap<TaskId, Held>,
    per_queue: HashMap<String, usize>,
    per_instance: HashMap<String, usize>,
}

impl Holdings {
    fn insert(&mut self, id: TaskId, held: Held) {
        *self.per_queue.entry(held.queue.clone()).or_default() += 1;
        if let Some(instance) = &held.instance {
            *self.per_instance.entry(instance.clone()).or_default() += 1;
        }
        if let Some(old) = self.by_id.insert(id, held) {
            self.forget(&old);
        }
    }

    fn remove(&mut self, id: &TaskId) -> Option<Held> {
        let held = self.by_id.remove(id)?;
        self.forget(&held);
        Some(held)
    }

    /// Takes `held` out of the counts.
    fn forget(&mut self, held: &Held) {
        let down = |counts: &mut HashMap<String, usize>, key: &str| {
            if let Some(n) = counts.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(key);
                }
            }
        };
        down(&mut self.per_queue, &held.queue);
        if let Some(instance) = &held.instance {
            down(&mut self.per_instance, instance);
        }
    }

    fn get(&self, id: &TaskId) -> Option<&Held> {
        self.by_id.get(id)
    }

    fn iter(&self) -> impl Iterator<Item = (&TaskId, &Held)> {
        self.by_id.iter()
    }
}

/// The attempts held here.
#[derive(Default)]
pub(crate) struct Running {
    held: Mutex<Holdings>,
}

impl Running {
    fn lock(&self) -> MutexGuard<'_, Holdings> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds `task`; the receiver learns when a client cancels it.
    pub(crate) fn hold(&self, task: &ClaimedTask) -> watch::Receiver<bool> {
        let (cancel, cancelled) = watch::channel(false);
        self.lock().insert(
            task.id,
            Held {
                fence: task.fence,
                queue: task.queue.clone(),
                instance: task.owner.as_ref().map(|o| o.instance.clone()),
                started: false,
                cancel,
            },
        );
        cancelled
    }

    /// Marks an attempt started; false when it is no longer held (its lease was lost).
    pub(crate) fn start(&self, id: TaskId) -> bool {
        match self.lock().by_id.get_mut(&id) {
            Some(held) => {
                held.started = true;
                true
            }
            None => false,
        }
    }

    /// Lets go of an attempt; false when it was not held any more.
    pub(crate) fn release(&self, id: TaskId) -> bool {
        self.lock().remove(&id).is_some()
    }

    /// Lets go of the attempts whose lease was lost, if still held with that fence.
    pub(crate) fn lost(&self, leases: &[(TaskId, Fence)]) -> Vec<TaskId> {
        let mut held = self.lock();
        let lost: Vec<TaskId> = leases
            .iter()
            .filter(|(id, fence)| held.get(id).is_some_and(|h| h.fence == *fence))
            .map(|(id, _)| *id)
            .collect();
        for id in &lost {
            held.remove(id);
        }
        lost
    }

    /// Tells the handler of `id` that a client cancelled it.
    pub(crate) fn cancel(&self, id: TaskId) {
        if let Some(held) = self.lock().get(&id) {
            let _ = held.cancel.send(true);
        }
    }

    /// The leases of every attempt held here.
    pub(crate) fn leases(&self) -> Vec<(TaskId, Fence)> {
        self.lock().iter().map(|(id, h)| (*id, h.fence)).collect()
    }

    /// Lets go of the attempts that have not started, and returns their leases.
    pub(crate) fn take_unstarted(&self) -> Vec<(TaskId, Fence)> {
        let mut held = self.lock();
        let unstarted: Vec<(TaskId, Fence)> = held
            .iter()
            .filter(|(_, h)| !h.started)
            .map(|(id, h)| (*id, h.fence))
            .collect();
        for (id, _) in &unstarted {
            held.remove(id);
        }
        unstarted
    }

    /// Attempts held for `queue`, started or waiting.
    pub(crate) fn in_queue(&self, queue: &str) -> usize {
        self.lock().per_queue.get(queue).copied().unwrap_or(0)
    }

    /// Activity attempts held here.
    pub(crate) fn activities(&self) -> usize {
        self.in_queue(ACTIVITY_QUEUE)
    }

    /// Whether an activity of `instance` is still held here.
    pub(crate) fn activity_of(&self, instance: &str) -> bool {
        self.lock().per_instance.contains_key(instance)
    }
}

#[cfg(test)]
mod tests {
    use ratchet_store::TaskOwner;

    use super::*;

    fn task(id: i64, instance: Option<&str>) -> ClaimedTask {
        ClaimedTask {
            id: TaskId(id),
            fence: Fence(1),
            queue: if instance.is_some() {
                ACTIVITY_QUEUE.into()
            } else {
                "q".into()
            },
            name: "t".into(),
            input: serde_json::Value::Null,
            options: Default::default(),
            owner: instance.map(|i| TaskOwner {
                instance: i.into(),
                execution: 0,
                seq: 0,
            }),
            attempt: 1,
            metadata: None,
        }
    }

    #[test]
    fn counts_follow_every_way_an_attempt_leaves() {
        let running = Running::default();
        let _a1 = running.hold(&task(1, Some("a")));
        let _a2 = running.hold(&task(2, Some("a")));
        let _b = running.hold(&task(3, Some("b")));
        let _q = running.hold(&task(4, None));
        assert_eq!((running.activities(), running.in_queue("q")), (3, 1));
        assert!(running.release(TaskId(1)));
        assert!(running.activity_of("a"), "its sibling is still held");
        assert_eq!(running.lost(&[(TaskId(2), Fence(1))]), vec![TaskId(2)]);
        assert!(!running.activity_of("a"));
        assert!(running.start(TaskId(3)));
        assert_eq!(running.take_unstarted(), vec![(TaskId(4), Fence(1))]);
        assert_eq!((running.activities(), running.in_queue("q")), (1, 0));
        assert!(running.activity_of("b") && !running.release(TaskId(4)));
        assert!(running.release(TaskId(3)) && !running.activity_of("b"));
        assert_eq!(running.activities(), 0);
    }
}
