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

/// The attempts held here, by task id.
#[derive(Default)]
pub(crate) struct Running {
    held: Mutex<HashMap<TaskId, Held>>,
}

impl Running {
    fn lock(&self) -> MutexGuard<'_, HashMap<TaskId, Held>> {
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
        match self.lock().get_mut(&id) {
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
        self.lock().values().filter(|h| h.queue == queue).count()
    }

    /// Activity attempts held here.
    pub(crate) fn activities(&self) -> usize {
        self.in_queue(ACTIVITY_QUEUE)
    }

    /// Whether an activity of `instance` is still held here.
    pub(crate) fn activity_of(&self, instance: &str) -> bool {
        self.lock()
            .values()
            .any(|h| h.instance.as_deref() == Some(instance))
    }
}
