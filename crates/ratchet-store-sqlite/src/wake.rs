//! Wake-ups between the stores of one process that share a file. SQLite cannot notify other
//! processes, but runtimes and clients in one process hear each other at once: an enqueue or
//! a signal wakes every runtime on the file, and a finished instance its waiting clients.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ratchet_store::{CommitBatch, CommitOutcome, CompletionResult, TurnResult, WakeupSender};

/// The sender shared by every store of this process on the file at `path`.
pub(crate) fn sender_for(path: &Path) -> WakeupSender {
    static SENDERS: OnceLock<Mutex<HashMap<PathBuf, WakeupSender>>> = OnceLock::new();
    let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut senders = SENDERS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    senders
        .entry(key)
        .or_insert_with(WakeupSender::in_process)
        .clone()
}

/// What of a group commit can wake others, taken before the batch is handed to the
/// database.
pub(crate) struct CommitShape {
    /// Per turn: its instance, whether it finishes, its activities, whether it makes work for
    /// others whatever its outcome (children, enqueued tasks, a parent's result), whether it
    /// continues as new.
    turns: Vec<(String, bool, usize, bool, bool)>,
    /// Per completion: the activity's instance.
    completions: Vec<Option<String>>,
}

impl CommitShape {
    pub(crate) fn of(batch: &CommitBatch) -> Self {
        Self {
            turns: batch
                .turns
                .iter()
                .map(|t| {
                    (
                        t.instance.clone(),
                        t.status.is_finished(),
                        t.tasks.iter().filter(|k| k.owner.is_some()).count(),
                        !t.children.is_empty()
                            || t.tasks.iter().any(|k| k.owner.is_none())
                            || t.inbox.iter().any(|e| e.instance != t.instance),
                        t.continue_as_new.is_some(),
                    )
                })
                .collect(),
            completions: batch
                .completions
                .iter()
                .map(|c| c.owner.as_ref().map(|o| o.instance.clone()))
                .collect(),
        }
    }

    /// Tells waiters which instances finished, and workers whether the commit left work that
    /// the committer did not take itself (tasks past its capacity, children, a parent's
    /// result, a completion for an instance it did not lock, an enqueued task).
    pub(crate) fn wake(self, sender: &WakeupSender, outcome: &CommitOutcome) {
        let locked: HashSet<&str> = outcome.locked.iter().map(|c| c.id.as_str()).collect();
        let mut work = false;
        for ((instance, finished, activities, others, continued), result) in
            self.turns.into_iter().zip(&outcome.turns)
        {
            let TurnResult::Committed { tasks } = result else {
                continue;
            };
            work |= others
                || tasks.len() < activities
                || (continued && !locked.contains(instance.as_str()));
            if finished {
                sender.finished(instance);
            }
        }
        for (instance, result) in self.completions.iter().zip(&outcome.completions) {
            if let (Some(instance), CompletionResult::Applied) = (instance, result) {
                work |= !locked.contains(instance.as_str());
            }
        }
        if work {
            sender.work_ready();
        }
    }
}
