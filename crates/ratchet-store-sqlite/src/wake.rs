//! Wake-ups between the stores of one process that share a file. SQLite cannot notify other
//! processes, but runtimes and clients in one process hear each other at once: an enqueue or
//! a signal wakes every runtime on the file, and a finished instance its waiting clients.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use ratchet_store::{
    CommitBatch, CommitOutcome, CompletionResult, CreateOutcome, TurnResult, WakeupSender,
};

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
    turns: Vec<TurnShape>,
    /// Per start: its instance.
    starts: Vec<String>,
    /// Per completion: the activity's instance.
    completions: Vec<Option<String>>,
}

/// What a turn's commit may leave for others.
struct TurnShape {
    instance: String,
    finishes: bool,
    activities: usize,
    /// Work for others whatever its outcome: children, enqueued tasks, a parent's result.
    for_others: bool,
    continues: bool,
    /// It ran on results of this batch's completions, or on its start, so they leave no work
    /// once it commits.
    fed: bool,
}

impl CommitShape {
    pub(crate) fn of(batch: &CommitBatch) -> Self {
        Self {
            turns: batch
                .turns
                .iter()
                .map(|t| TurnShape {
                    instance: t.instance.clone(),
                    finishes: t.status.is_finished(),
                    activities: t.tasks.iter().filter(|k| k.owner.is_some()).count(),
                    for_others: !t.children.is_empty()
                        || t.tasks.iter().any(|k| k.owner.is_none())
                        || t.inbox.iter().any(|e| e.instance != t.instance),
                    continues: t.continue_as_new.is_some(),
                    fed: !t.fed.is_empty() || t.started.is_some(),
                })
                .collect(),
            starts: batch.starts.iter().map(|s| s.instance.id.clone()).collect(),
            completions: batch
                .completions
                .iter()
                .map(|c| c.owner.as_ref().map(|o| o.instance.clone()))
                .collect(),
        }
    }

    /// Tells waiters which instances finished, and workers whether the commit left work that
    /// the committer did not take itself (tasks past its capacity, children, a parent's
    /// result, a completion for an instance it did not lock nor feed a turn, an enqueued
    /// task).
    pub(crate) fn wake(self, sender: &WakeupSender, outcome: &CommitOutcome) {
        let mut taken: HashSet<String> = outcome.locked.iter().map(|c| c.id.clone()).collect();
        let mut work = false;
        for (turn, result) in self.turns.into_iter().zip(&outcome.turns) {
            let TurnResult::Committed { tasks } = result else {
                continue;
            };
            work |= turn.for_others
                || tasks.len() < turn.activities
                || (turn.continues && !taken.contains(&turn.instance));
            if turn.finishes {
                sender.finished(turn.instance.clone());
            }
            if turn.fed {
                taken.insert(turn.instance);
            }
        }
        for (instance, result) in self.completions.iter().zip(&outcome.completions) {
            if let (Some(instance), CompletionResult::Applied) = (instance, result) {
                work |= !taken.contains(instance);
            }
        }
        for (instance, result) in self.starts.iter().zip(&outcome.starts) {
            work |= matches!(result, CreateOutcome::Created(_)) && !taken.contains(instance);
        }
        if work {
            sender.work_ready();
        }
    }
}
