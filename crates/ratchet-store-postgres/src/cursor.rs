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
//!   in every process when one says another is gone);
//! - work whose transaction committed more than [`WINDOW_MS`] after its ready time (a large
//!   enqueue): its notification names that time, and [`ClaimCursors::pull_back`] moves the
//!   cursors there.
//!
//! A read from the start, or a pull back, starts a new epoch of that cursor: claims that
//! began before it cannot move it forward again past what the new epoch has not read.
//!
//! The positions are only a hint for where to start: losing them (a restart, another
//! process) costs one read from the start, never a task.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How far behind the claim's time a bounded claim still looks.
pub(crate) const WINDOW_MS: i64 = 1_000;

/// How often a claim reads each queue from its start.
pub(crate) const RESCAN_MS: i64 = 10_000;

/// The (ready_at, id) bound of each (queue, priority) scan of one claim, as the arrays the
/// SQL takes; a (queue, priority) without one is read from its start.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub(crate) queues: Vec<String>,
    pub(crate) priorities: Vec<i16>,
    pub(crate) ready: Vec<i64>,
    pub(crate) ids: Vec<i64>,
    /// The epoch of each queue's cursor when these bounds were taken.
    epochs: HashMap<String, u64>,
}

/// The cursors of one queue for one set of task names.
#[derive(Debug, Default)]
struct QueueCursor {
    /// When the last claim read this queue from its start.
    full_scan_at: Option<i64>,
    /// Bumped by every read from the start and pull back.
    epoch: u64,
    /// The newest (ready_at, id) reached in this epoch, per priority; a priority without
    /// one is read from its start.
    taken: HashMap<i16, (i64, i64)>,
}

/// Every cursor of this process, keyed by the task names a claim runs (claims for other
/// names skip tasks that this one takes) and the queue.
#[derive(Debug, Default)]
pub(crate) struct ClaimCursors {
    queues: HashMap<(Vec<String>, String), QueueCursor>,
    /// The last epoch handed out: epochs are never reused, even across [`Self::forget`].
    epochs: u64,
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
                cursor.taken.clear();
                self.epochs += 1;
                cursor.epoch = self.epochs;
            }
            bounds.epochs.insert(queue.clone(), cursor.epoch);
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

    /// Moves every cursor back to `ready_at`: work ready from then on was committed (a
    /// notification says so), perhaps behind where claims have got.
    pub(crate) fn pull_back(&mut self, ready_at: i64) {
        for cursor in self.queues.values_mut() {
            let mut moved = false;
            for position in cursor.taken.values_mut() {
                if *position > (ready_at, i64::MIN) {
                    *position = (ready_at, i64::MIN);
                    moved = true;
                }
            }
            if moved {
                self.epochs += 1;
                cursor.epoch = self.epochs;
            }
        }
    }

    /// Moves the cursors to where the scans of a claim by `names` that started at `from`
    /// got: `(queue, priority, ready_at, id)` each, everything before it taken or passed
    /// over. A claim that started in an older epoch moves nothing.
    pub(crate) fn advance<'a>(
        &mut self,
        names: &[String],
        from: &Bounds,
        reached: impl IntoIterator<Item = (&'a str, i16, i64, i64)>,
    ) {
        for (queue, priority, ready_at, id) in reached {
            let Some(cursor) = self.queues.get_mut(&(names.to_vec(), queue.to_string())) else {
                continue;
            };
            if from.epochs.get(queue) != Some(&cursor.epoch) {
                continue;
            }
            let position = cursor.taken.entry(priority).or_insert((ready_at, id));
            *position = (*position).max((ready_at, id));
        }
    }
}

/// Locks `cursors`; a poisoned lock still holds valid hints.
pub(crate) fn lock(cursors: &Mutex<ClaimCursors>) -> MutexGuard<'_, ClaimCursors> {
    cursors.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["job".to_string()]
    }

    fn queue() -> Vec<String> {
        vec!["q".to_string()]
    }

    fn positions(b: &Bounds) -> Vec<(i16, i64, i64)> {
        let mut got: Vec<_> = (0..b.queues.len())
            .map(|i| (b.priorities[i], b.ready[i], b.ids[i]))
            .collect();
        got.sort_unstable();
        got
    }

    #[test]
    fn the_first_claim_reads_from_the_start_and_the_next_from_the_cursor() {
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        assert!(positions(&b).is_empty());
        c.advance(
            &names(),
            &b,
            [("q", 0, 90_000, 7), ("q", 0, 95_000, 3), ("q", 1, 50, 9)],
        );
        let b = c.bounds(100_500, &queue(), &names());
        assert_eq!(positions(&b), vec![(0, 95_000, 3), (1, 50, 9)]);
    }

    #[test]
    fn a_bound_stays_a_window_behind_the_claims_time() {
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, [("q", 0, 100_000, 5)]);
        let b = c.bounds(100_200, &queue(), &names());
        assert_eq!(positions(&b), vec![(0, 100_200 - WINDOW_MS, i64::MIN)]);
    }

    #[test]
    fn every_rescan_interval_and_after_a_clock_set_back_a_claim_reads_from_the_start() {
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, [("q", 0, 10, 1)]);
        assert_eq!(
            positions(&c.bounds(100_000 + RESCAN_MS - 1, &queue(), &names())).len(),
            1
        );
        assert!(positions(&c.bounds(100_000 + RESCAN_MS, &queue(), &names())).is_empty());
        assert!(positions(&c.bounds(50_000, &queue(), &names())).is_empty());
    }

    #[test]
    fn a_read_from_the_start_that_fills_its_limit_moves_the_cursor_back() {
        // Late work sits far behind the cursor; the rescan takes only a claim's worth of it,
        // and the claims after it must go on from there, not jump back ahead.
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(
            &names(),
            &b,
            [("q", 0, 100_000, i64::MAX), ("q", 1, 100_000, 4)],
        );
        let rescan = c.bounds(100_000 + RESCAN_MS, &queue(), &names());
        assert!(positions(&rescan).is_empty());
        c.advance(&names(), &rescan, [("q", 0, 20_000, 8)]);
        let next = c.bounds(100_000 + RESCAN_MS + 1, &queue(), &names());
        assert_eq!(positions(&next), vec![(0, 20_000, 8)]);
    }

    #[test]
    fn a_claim_begun_before_a_rescan_or_pull_back_moves_nothing() {
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, [("q", 0, 90_000, 1)]);
        let old = c.bounds(100_001, &queue(), &names());
        c.pull_back(40_000);
        c.advance(&names(), &old, [("q", 0, 99_000, 2)]);
        assert_eq!(
            positions(&c.bounds(100_002, &queue(), &names())),
            vec![(0, 40_000, i64::MIN)]
        );
        let old = c.bounds(100_003, &queue(), &names());
        let rescan = c.bounds(100_000 + RESCAN_MS, &queue(), &names());
        c.advance(&names(), &old, [("q", 0, 99_000, 2)]);
        assert!(positions(&c.bounds(100_000 + RESCAN_MS + 1, &queue(), &names())).is_empty());
        c.advance(&names(), &rescan, [("q", 0, 30_000, 3)]);
        assert_eq!(
            positions(&c.bounds(100_000 + RESCAN_MS + 2, &queue(), &names())),
            vec![(0, 30_000, 3)]
        );
    }

    #[test]
    fn a_pull_back_to_a_time_ahead_of_the_cursor_changes_nothing() {
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, [("q", 0, 50_000, 1)]);
        let before = c.bounds(100_001, &queue(), &names());
        c.pull_back(60_000);
        c.advance(&names(), &before, [("q", 0, 55_000, 2)]);
        assert_eq!(
            positions(&c.bounds(100_002, &queue(), &names())),
            vec![(0, 55_000, 2)]
        );
    }

    #[test]
    fn claims_for_other_names_keep_cursors_of_their_own() {
        let mut c = ClaimCursors::default();
        let other = vec!["other".to_string()];
        let b = c.bounds(100_000, &queue(), &names());
        c.bounds(100_000, &queue(), &other);
        c.advance(&names(), &b, [("q", 0, 99_999, 5)]);
        assert!(positions(&c.bounds(100_001, &queue(), &other)).is_empty());
        assert_eq!(positions(&c.bounds(100_001, &queue(), &names())).len(), 1);
    }
}
