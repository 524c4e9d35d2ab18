//! Claim cursors: where this process's next claim of a queue starts reading.
//!
//! A claim reads the ready index of a queue's priority in (ready_at, id) order. Every task
//! it takes and that then finishes leaves a dead entry at that index's front until vacuum
//! removes it, and while any transaction on the database holds an older snapshot (a report,
//! a backup, a forgotten `psql`) vacuum cannot: a claim from the front would walk every task
//! finished since, entry by entry, and slow down as long as that transaction lives.
//!
//! So each claim starts a little behind the newest position this process took, per
//! (task names, queue, priority). Everything behind that position was taken, or skipped
//! because another claim held it, when it was read. What can still appear behind it:
//!
//! - work written with a ready time a little in the past (an enqueue or commit whose time
//!   was taken before a claim that committed first): the bound stays [`WINDOW_MS`] behind
//!   the claim's time, and enqueues and commits never write a ready time before their own
//!   time;
//! - rows passed over for a while: the expired lease of a process that still says it is
//!   alive (taken over only after its stall grace), a row locked by a cancel, a claim that
//!   rolled back. Every [`RESCAN_MS`] the claim reads from the start instead (and at once
//!   in the process that says another is gone).
//!
//! The positions are only a hint for where to start: losing them (a restart, another
//! process) costs one read from the start, never a task.

use std::collections::HashMap;

/// How far behind the claim's time a bounded claim still looks.
pub(crate) const WINDOW_MS: i64 = 1_000;

/// How often a claim reads each queue from its start.
pub(crate) const RESCAN_MS: i64 = 10_000;

/// The (ready_at, id) bound of each (queue, priority) scan of one claim, as the arrays the
/// SQL takes; empty arrays read everything from the start.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub(crate) queues: Vec<String>,
    pub(crate) priorities: Vec<i16>,
    pub(crate) ready: Vec<i64>,
    pub(crate) ids: Vec<i64>,
}

/// The cursors of one queue for one set of task names.
#[derive(Debug, Default)]
struct QueueCursor {
    /// When the last claim read this queue from its start.
    full_scan_at: Option<i64>,
    /// The newest (ready_at, id) taken, per priority.
    taken: HashMap<i16, (i64, i64)>,
}

/// Every cursor of this process, keyed by the task names a claim runs (claims for other
/// names skip tasks that this one takes) and the queue.
#[derive(Debug, Default)]
pub(crate) struct ClaimCursors {
    queues: HashMap<(Vec<String>, String), QueueCursor>,
}

impl ClaimCursors {
    /// The bounds for a claim at `now` of `queues` by a process running `names`. A queue
    /// whose last read from the start is [`RESCAN_MS`] old (or in the future: a clock set
    /// back) is read from the start this time, and that is noted.
    pub(crate) fn bounds(&mut self, now: i64, queues: &[String], names: &[String]) -> Bounds {
        let mut bounds = Bounds::default();
        for queue in queues {
            let cursor = self
                .queues
                .entry((names.to_vec(), queue.clone()))
                .or_default();
            let fresh = cursor
                .full_scan_at
                .is_some_and(|at| at <= now && now - at < RESCAN_MS);
            if !fresh {
                cursor.full_scan_at = Some(now);
                continue;
            }
            for (priority, &taken) in &cursor.taken {
                let (ready, id) = taken.min((now.saturating_sub(WINDOW_MS), i64::MIN));
                bounds.queues.push(queue.clone());
                bounds.priorities.push(*priority);
                bounds.ready.push(ready);
                bounds.ids.push(id);
            }
        }
        bounds
    }

    /// Reads every queue from its start next time: something behind the cursors became
    /// claimable (a process this one knows of is gone).
    pub(crate) fn forget(&mut self) {
        self.queues.clear();
    }

    /// Moves the cursors past the tasks a claim by `names` took: `(queue, priority,
    /// visible_at, id)` each. A task's visible time is at or before the position the claim
    /// found it at (a lease taken over sat at its expiry), so the cursor never passes a task
    /// the claim did not reach.
    pub(crate) fn advance<'a>(
        &mut self,
        names: &[String],
        taken: impl IntoIterator<Item = (&'a str, i16, i64, i64)>,
    ) {
        for (queue, priority, visible_at, id) in taken {
            let Some(cursor) = self.queues.get_mut(&(names.to_vec(), queue.to_string())) else {
                continue;
            };
            let position = cursor.taken.entry(priority).or_insert((visible_at, id));
            *position = (*position).max((visible_at, id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["job".to_string()]
    }

    #[test]
    fn the_first_claim_reads_from_the_start_and_the_next_from_the_cursor() {
        let mut c = ClaimCursors::default();
        let q = vec!["q".to_string()];
        assert_eq!(c.bounds(100_000, &q, &names()), Bounds::default());
        c.advance(
            &names(),
            [("q", 0, 90_000, 7), ("q", 0, 95_000, 3), ("q", 1, 50, 9)],
        );
        let b = c.bounds(100_500, &q, &names());
        let mut got: Vec<_> = (0..b.queues.len())
            .map(|i| (b.priorities[i], b.ready[i], b.ids[i]))
            .collect();
        got.sort_unstable();
        assert_eq!(got, vec![(0, 95_000, 3), (1, 50, 9)]);
    }

    #[test]
    fn a_bound_stays_a_window_behind_the_claims_time() {
        let mut c = ClaimCursors::default();
        let q = vec!["q".to_string()];
        c.bounds(100_000, &q, &names());
        c.advance(&names(), [("q", 0, 100_000, 5)]);
        let b = c.bounds(100_200, &q, &names());
        assert_eq!((b.ready[0], b.ids[0]), (100_200 - WINDOW_MS, i64::MIN));
    }

    #[test]
    fn every_rescan_interval_and_after_a_clock_set_back_a_claim_reads_from_the_start() {
        let mut c = ClaimCursors::default();
        let q = vec!["q".to_string()];
        c.bounds(100_000, &q, &names());
        c.advance(&names(), [("q", 0, 10, 1)]);
        assert_eq!(
            c.bounds(100_000 + RESCAN_MS - 1, &q, &names()).queues.len(),
            1
        );
        assert_eq!(
            c.bounds(100_000 + RESCAN_MS, &q, &names()),
            Bounds::default()
        );
        assert_eq!(
            c.bounds(100_000 + RESCAN_MS + 1, &q, &names()).queues.len(),
            1
        );
        assert_eq!(c.bounds(50_000, &q, &names()), Bounds::default());
    }

    #[test]
    fn claims_for_other_names_keep_cursors_of_their_own() {
        let mut c = ClaimCursors::default();
        let q = vec!["q".to_string()];
        let other = vec!["other".to_string()];
        c.bounds(100_000, &q, &names());
        c.bounds(100_000, &q, &other);
        c.advance(&names(), [("q", 0, 99_999, 5)]);
        assert_eq!(c.bounds(100_001, &q, &other), Bounds::default());
        assert_eq!(c.bounds(100_001, &q, &names()).queues.len(), 1);
    }
}
