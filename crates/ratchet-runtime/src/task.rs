use ratchet_store::TaskId;
use serde_json::Value;
use tokio::sync::watch;

/// What a task handler knows about the task it runs.
#[derive(Clone, Debug)]
pub struct TaskContext {
    pub(crate) id: TaskId,
    pub(crate) name: String,
    pub(crate) queue: String,
    pub(crate) attempt: u32,
    pub(crate) metadata: Option<Value>,
    pub(crate) cancelled: watch::Receiver<bool>,
}

impl TaskContext {
    /// The task's id.
    pub fn id(&self) -> i64 {
        self.id.0
    }

    /// The task's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its queue.
    pub fn queue(&self) -> &str {
        &self.queue
    }

    /// This attempt's number, from 1. Tasks run at least once: make side effects idempotent
    /// (the task id is a good key).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// What the enqueuer kept with the task.
    pub fn metadata(&self) -> Option<&Value> {
        self.metadata.as_ref()
    }

    /// True once a client asked to cancel the task. The handler is also stopped at its next
    /// await point; a long computation without one can check this.
    pub fn is_cancelled(&self) -> bool {
        *self.cancelled.borrow()
    }

    /// Resolves when a client asks to cancel the task.
    pub async fn cancelled(&self) {
        let mut cancelled = self.cancelled.clone();
        let _ = cancelled.wait_for(|c| *c).await;
    }
}
