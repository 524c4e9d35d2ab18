//! The figures an operator pages on, through the `metrics` facade: nothing is recorded until
//! the embedding program installs a recorder (`ratchet server` installs a Prometheus one).
//! Every name is here, so the set is one list.

use std::time::Duration;

use ratchet_store::TaskResult;

/// A turn ran (its code, before the commit).
pub(crate) fn turn(orchestration: &str, took: Duration) {
    let name = orchestration.to_string();
    metrics::counter!("ratchet_turns_total", "orchestration" => name.clone()).increment(1);
    metrics::histogram!("ratchet_turn_seconds", "orchestration" => name).record(took);
}

/// A turn's commit was refused: its lease was lost to another process.
pub(crate) fn turn_refused() {
    metrics::counter!("ratchet_stale_writes_total", "kind" => "turn").increment(1);
}

/// Turns that run on results not yet committed joined a group commit.
pub(crate) fn turns_fed(count: usize) {
    if count > 0 {
        metrics::counter!("ratchet_turns_fed_total").increment(count as u64);
    }
}

/// A group commit ended.
pub(crate) fn commit(turns: usize, completions: usize, took: Duration, ok: bool) {
    let result = if ok { "ok" } else { "error" };
    metrics::counter!("ratchet_commits_total", "result" => result).increment(1);
    metrics::histogram!("ratchet_commit_seconds").record(took);
    metrics::counter!("ratchet_committed_items_total", "kind" => "turn").increment(turns as u64);
    metrics::counter!("ratchet_committed_items_total", "kind" => "completion")
        .increment(completions as u64);
}

/// Completions refused for a lost lease.
pub(crate) fn completions_refused(count: usize) {
    metrics::counter!("ratchet_stale_writes_total", "kind" => "completion").increment(count as u64);
}

/// A claim (instances and tasks in one call) ended; `taken_over` of what it leased had a
/// lease that expired (its holder crashed or stalled) instead of one released.
pub(crate) fn claim(instances: usize, tasks: usize, taken_over: u32, took: Duration, ok: bool) {
    let result = if ok { "ok" } else { "error" };
    metrics::counter!("ratchet_lease_expiries_total").increment(u64::from(taken_over));
    metrics::counter!("ratchet_claims_total", "result" => result).increment(1);
    metrics::histogram!("ratchet_claim_seconds").record(took);
    metrics::counter!("ratchet_claimed_total", "kind" => "instance").increment(instances as u64);
    metrics::counter!("ratchet_claimed_total", "kind" => "task").increment(tasks as u64);
}

/// An attempt of an activity (with its orchestration) or a standalone task ended.
pub(crate) fn attempt(
    activity: bool,
    name: &str,
    queue: &str,
    result: &TaskResult,
    took: Duration,
) {
    let outcome = match result {
        TaskResult::Completed(_) => "completed",
        TaskResult::Failed(_) => "failed",
        TaskResult::Retry { .. } => "retry",
        TaskResult::Snooze { .. } => "snooze",
        TaskResult::Cancelled => "cancelled",
        _ => "other",
    };
    let (kind, name, queue) = (
        if activity { "activity" } else { "task" },
        name.to_string(),
        queue.to_string(),
    );
    metrics::counter!("ratchet_attempts_total", "kind" => kind, "name" => name.clone(),
        "queue" => queue.clone(), "outcome" => outcome)
    .increment(1);
    metrics::histogram!("ratchet_attempt_seconds", "kind" => kind, "name" => name, "queue" => queue)
        .record(took);
}

/// A wake-up arrived from the store: another process made work ready.
pub(crate) fn notification(kind: &'static str) {
    metrics::counter!("ratchet_notifications_total", "kind" => kind).increment(1);
}

/// A schedule's tick fired `late` after its time (jitter included), starting a run or not.
pub(crate) fn schedule_fire(schedule: &str, late: Duration, started: bool) {
    let outcome = if started { "started" } else { "skipped" };
    metrics::counter!("ratchet_schedule_fires_total", "schedule" => schedule.to_string(), "outcome" => outcome).increment(1);
    metrics::histogram!("ratchet_schedule_fire_delay_seconds").record(late.as_secs_f64());
}
