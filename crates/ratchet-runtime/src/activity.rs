use ratchet_store::TaskId;

/// What an activity knows about the call it serves.
#[derive(Clone, Debug)]
pub struct ActivityContext {
    pub(crate) task: TaskId,
    pub(crate) name: String,
    pub(crate) instance: String,
    pub(crate) execution: u32,
    pub(crate) step: u32,
    pub(crate) attempt: u32,
}

impl ActivityContext {
    /// The activity's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The orchestration instance that called it.
    pub fn instance_id(&self) -> &str {
        &self.instance
    }

    /// The calling execution's number (it grows with each continue-as-new).
    pub fn execution(&self) -> u32 {
        self.execution
    }

    /// The calling step's number within the orchestration's execution.
    pub fn step(&self) -> u32 {
        self.step
    }

    /// This attempt's number, from 1. Activities run at least once: use
    /// (instance id, step) as an idempotency key for side effects.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The task's row id.
    pub fn task_id(&self) -> i64 {
        self.task.0
    }
}
