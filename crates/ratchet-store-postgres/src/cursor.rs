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
//!   was taken before a claim that committed first): the bound stays a window behind the
//!   claim's time, and enqueues and commits never write a ready time before their own time;
//! - work whose transaction committed more than that window after its ready time (a large
//!   enqueue): its notification names that time, and [`ClaimCursors::pull_back`] moves the
//!   cursors there;
//! - rows passed over for a while: the expired lease of a process that still says it is
//!   alive (taken over only after its stall grace), a row locked by a cancel, a claim that
//!   rolled back. Every [`RESCAN_MS`] a claim rescans the queue (and at once, from the
//!   start, in every process when one says another is gone).
//!
//! Where work is announced (notifications on: every write that makes a task ready says from
//! when), the window is short ([`ANNOUNCED_WINDOW_MS`]), as whatever a claim misses is
//! announced, and a rescan starts at the queue's floor: the first row the last rescan saw
//! that was ready and not finished, whoever held it (a plain read sees rows other claims have
//! locked but not taken yet, and expired leases), and never later than the window before
//! its time. Claims from a second behind, and rescans from the very start, would walk every
//! task finished in that second, or since the oldest snapshot on the database: under a
//! report held for minutes, millions of entries, each on a page of its own once the table
//! reuses the space vacuum freed, enough to push everything else out of the cache.
//!
//! Where it is not (behind a transaction-pooling PgBouncer), the window is [`WINDOW_MS`] and
//! a rescan reads from the start: it is what finds work committed late.
//!
//! A rescan, or a pull back, starts a new epoch of that cursor: claims that began before it
//! cannot move it forward again past what the new epoch has not read.
//!
//! The positions are only a hint for where to start: losing them (a restart, another
//! process) costs one read from the start, never a task.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// How far behind the claim's time a bounded claim still looks, where late work is not
/// announced.
pub(crate) const WINDOW_MS: i64 = 1_000;

/// The same where late work is announced: the window spares most claims the pull back that
/// follows a write committed a few milliseconds after a claim.
pub(crate) const ANNOUNCED_WINDOW_MS: i64 = 100;
const _: () = assert!(ANNOUNCED_WINDOW_MS < WINDOW_MS);

/// How often a claim rescans each queue.
pub(crate) const RESCAN_MS: i64 = 10_000;

/// The (ready_at, id) bound of each (queue, priority) scan of one claim, as the arrays the
/// SQL takes; a (queue, priority) without one is read from its start.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub(crate) queues: Vec<String>,
    pub(crate) priorities: Vec<i16>,
    pub(crate) ready: Vec<i64>,
    pub(crate) ids: Vec<i64>,
    /// The queues this claim rescans: their scans also report where their floor is now.
    pub(crate) rescan: Vec<String>,
    /// The claim's time.
    now: i64,
    /// The epoch of each queue's cursor when these bounds were taken.
    epochs: HashMap<String, u64>,
    /// How many pull backs this process had heard of when these bounds were taken.
    pulls: u64,
}

impl Bounds {
    /// Starts the scan of `queue`'s `priority` at `(ready_at, id)`.
    fn push(&mut self, queue: &str, priority: i16, (ready, id): (i64, i64)) {
        self.queues.push(queue.to_string());
        self.priorities.push(priority);
        self.ready.push(ready);
        self.ids.push(id);
    }
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
    /// Where a rescan starts, per priority; a priority without one is rescanned from its
    /// start.
    floor: HashMap<i16, (i64, i64)>,
    /// Pull backs of this epoch that found the cursor behind their time, oldest first, as
    /// (the count of pull backs heard, ready_at): a claim that began before one may not move
    /// the cursor past its time, since what it reads was written before that work committed.
    pulls: VecDeque<(u64, i64)>,
    /// Claims that began before this many pull backs move nothing: the pull backs they would
    /// be held to are no longer kept.
    pulls_forgotten: u64,
}

/// How many pull backs a cursor keeps for the claims in flight.
const KEPT_PULLS: usize = 64;

impl QueueCursor {
    /// A new epoch: claims that began before it move nothing, and the pull backs kept for
    /// them are dropped.
    fn new_epoch(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.pulls.clear();
    }
}

/// Every cursor of this process, keyed by the task names a claim runs (claims for other
/// names skip tasks that this one takes) and the queue.
#[derive(Debug, Default)]
pub(crate) struct ClaimCursors {
    queues: HashMap<(Vec<String>, String), QueueCursor>,
    /// The last epoch handed out: epochs are never reused, even across [`Self::forget`].
    epochs: u64,
    /// Pull backs heard so far.
    pulls: u64,
    /// Whether every write that makes a task ready announces from when (notifications on).
    announced: bool,
    /// The instance id after which the claim's next walk over instances with inbox events
    /// starts, when the oldest events give it too few ('' for the first).
    instance_walk: String,
}

impl ClaimCursors {
    /// Cursors for a store whose writes announce late work (`announced`), or do not.
    pub(crate) fn new(announced: bool) -> Self {
        Self {
            announced,
            ..Self::default()
        }
    }

    /// Where the next walk over instances with inbox events starts.
    pub(crate) fn instance_walk(&self) -> String {
        self.instance_walk.clone()
    }

    /// Records where a claim's walk stopped (`None`: no walk ran).
    pub(crate) fn walked_to(&mut self, last: Option<String>) {
        if let Some(last) = last {
            self.instance_walk = last;
        }
    }

    /// How far behind its time a claim still looks.
    fn window(&self) -> i64 {
        if self.announced {
            ANNOUNCED_WINDOW_MS
        } else {
            WINDOW_MS
        }
    }

    /// The bounds for a claim at `now` of `queues` by a process running `names`. A queue
    /// whose last rescan is [`RESCAN_MS`] old is rescanned this time, from its floor if it
    /// has one (from its start when that rescan is in the future: a clock set back), and
    /// that is noted.
    pub(crate) fn bounds(&mut self, now: i64, queues: &[String], names: &[String]) -> Bounds {
        let mut bounds = Bounds {
            now,
            pulls: self.pulls,
            ..Bounds::default()
        };
        let window = self.window();
        for queue in queues {
            let cursor = self
                .queues
                .entry((names.to_vec(), queue.clone()))
                .or_default();
            let fresh = cursor
                .full_scan_at
                .is_some_and(|at| at <= now && now - at < RESCAN_MS);
            if !fresh {
                if cursor.full_scan_at.is_some_and(|at| at > now) {
                    cursor.floor.clear();
                }
                cursor.full_scan_at = Some(now);
                cursor.taken.clear();
                self.epochs += 1;
                cursor.new_epoch(self.epochs);
                if self.announced {
                    bounds.rescan.push(queue.clone());
                }
                bounds.epochs.insert(queue.clone(), cursor.epoch);
                for (&priority, &floor) in &cursor.floor {
                    bounds.push(queue, priority, floor);
                }
                continue;
            }
            bounds.epochs.insert(queue.clone(), cursor.epoch);
            for (&priority, &taken) in &cursor.taken {
                bounds.push(
                    queue,
                    priority,
                    taken.min((now.saturating_sub(window), i64::MIN)),
                );
            }
            // A priority the last rescan did not reach (its claim's limit was filled first)
            // starts at its floor.
            for (&priority, &floor) in &cursor.floor {
                if !cursor.taken.contains_key(&priority) {
                    bounds.push(queue, priority, floor);
                }
            }
        }
        tracing::debug!(now, ready = ?bounds.ready, ids = ?bounds.ids, rescan = ?bounds.rescan, epochs = ?bounds.epochs, "bounds");
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
        let window = self.window();
        self.pulls += 1;
        for cursor in self.queues.values_mut() {
            // A rescan under way may be about to set a floor up to a window behind its time,
            // past this work, from a read that did not see it.
            let mut moved = self.announced
                && cursor
                    .full_scan_at
                    .is_some_and(|at| ready_at < at.saturating_sub(window));
            for position in cursor.taken.values_mut().chain(cursor.floor.values_mut()) {
                if *position > (ready_at, i64::MIN) {
                    *position = (ready_at, i64::MIN);
                    moved = true;
                }
            }
            if moved {
                self.epochs += 1;
                cursor.new_epoch(self.epochs);
            } else {
                // Behind this work already; a claim under way must not carry it past.
                cursor.pulls.push_back((self.pulls, ready_at));
                if cursor.pulls.len() > KEPT_PULLS {
                    if let Some((forgotten, _)) = cursor.pulls.pop_front() {
                        cursor.pulls_forgotten = forgotten;
                    }
                }
            }
            tracing::debug!(ready_at, moved, epoch = cursor.epoch, taken = ?cursor.taken, "pull back");
        }
    }

    /// Moves the cursors to where the scans of a claim by `names` that started at `from`
    /// got: `(queue, priority, ready_at, id)` each, everything before it taken or passed
    /// over, and for a rescan the first (ready_at, id) it saw ready and unfinished. A claim
    /// that started in an older epoch moves nothing.
    pub(crate) fn advance<'a>(
        &mut self,
        names: &[String],
        from: &Bounds,
        reached: impl IntoIterator<Item = Reached<'a>>,
    ) {
        let window = self.window();
        for reached in reached {
            let Some(cursor) = self
                .queues
                .get_mut(&(names.to_vec(), reached.queue.to_string()))
            else {
                continue;
            };
            if from.epochs.get(reached.queue) != Some(&cursor.epoch)
                || from.pulls < cursor.pulls_forgotten
            {
                tracing::debug!(now = from.now, from = ?from.epochs, epoch = cursor.epoch, position = ?reached.position, "advance ignored");
                continue;
            }
            tracing::debug!(now = from.now, epoch = cursor.epoch, position = ?reached.position, first = ?reached.first_unfinished, before = ?cursor.taken.get(&reached.priority), "advance");
            // Work announced while the claim ran may have committed after it began reading.
            let cap = cursor
                .pulls
                .iter()
                .filter(|(heard, _)| *heard > from.pulls)
                .map(|(_, ready_at)| (*ready_at, i64::MIN))
                .min()
                .unwrap_or((i64::MAX, i64::MAX));
            let reached_position = reached.position.min(cap);
            let position = cursor
                .taken
                .entry(reached.priority)
                .or_insert(reached_position);
            *position = (*position).max(reached_position);
            if let Some(first) = reached.first_unfinished.filter(|_| self.announced) {
                // Work committed a little after its ready time can still appear behind it.
                let floor = first
                    .min((from.now.saturating_sub(window), i64::MIN))
                    .min(cap);
                cursor.floor.insert(reached.priority, floor);
            }
        }
    }
}

/// Where one (queue, priority) scan of a claim got.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reached<'a> {
    pub(crate) queue: &'a str,
    pub(crate) priority: i16,
    /// Everything before this (ready_at, id) was taken or passed over.
    pub(crate) position: (i64, i64),
    /// For a rescan: the first (ready_at, id) it saw ready and unfinished, or (its time,
    /// max) when there was none.
    pub(crate) first_unfinished: Option<(i64, i64)>,
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

    /// Scans that got to (queue, priority, ready_at, id), none of them a rescan.
    fn at(reached: &[(&'static str, i16, i64, i64)]) -> Vec<Reached<'static>> {
        reached
            .iter()
            .map(|&(queue, priority, ready, id)| Reached {
                queue,
                priority,
                position: (ready, id),
                first_unfinished: None,
            })
            .collect()
    }

    /// A rescan's scan of priority `priority` of "q" that saw `first` first.
    fn rescanned(priority: i16, first: (i64, i64)) -> Reached<'static> {
        Reached {
            queue: "q",
            priority,
            position: (0, 0),
            first_unfinished: Some(first),
        }
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
            at(&[("q", 0, 90_000, 7), ("q", 0, 95_000, 3), ("q", 1, 50, 9)]),
        );
        let b = c.bounds(100_500, &queue(), &names());
        assert_eq!(positions(&b), vec![(0, 95_000, 3), (1, 50, 9)]);
    }

    #[test]
    fn a_bound_stays_a_window_behind_the_claims_time() {
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, at(&[("q", 0, 100_000, 5)]));
        let b = c.bounds(100_200, &queue(), &names());
        assert_eq!(positions(&b), vec![(0, 100_200 - WINDOW_MS, i64::MIN)]);
    }

    #[test]
    fn every_rescan_interval_and_after_a_clock_set_back_a_claim_reads_from_the_start() {
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, at(&[("q", 0, 10, 1)]));
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
            at(&[("q", 0, 100_000, i64::MAX), ("q", 1, 100_000, 4)]),
        );
        let rescan = c.bounds(100_000 + RESCAN_MS, &queue(), &names());
        assert!(positions(&rescan).is_empty());
        c.advance(&names(), &rescan, at(&[("q", 0, 20_000, 8)]));
        let next = c.bounds(100_000 + RESCAN_MS + 1, &queue(), &names());
        assert_eq!(positions(&next), vec![(0, 20_000, 8)]);
    }

    #[test]
    fn a_claim_begun_before_a_rescan_or_pull_back_moves_nothing() {
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, at(&[("q", 0, 90_000, 1)]));
        let old = c.bounds(100_001, &queue(), &names());
        c.pull_back(40_000);
        c.advance(&names(), &old, at(&[("q", 0, 99_000, 2)]));
        assert_eq!(
            positions(&c.bounds(100_002, &queue(), &names())),
            vec![(0, 40_000, i64::MIN)]
        );
        let old = c.bounds(100_003, &queue(), &names());
        let rescan = c.bounds(100_000 + RESCAN_MS, &queue(), &names());
        c.advance(&names(), &old, at(&[("q", 0, 99_000, 2)]));
        assert!(positions(&c.bounds(100_000 + RESCAN_MS + 1, &queue(), &names())).is_empty());
        c.advance(&names(), &rescan, at(&[("q", 0, 30_000, 3)]));
        assert_eq!(
            positions(&c.bounds(100_000 + RESCAN_MS + 2, &queue(), &names())),
            vec![(0, 30_000, 3)]
        );
    }

    #[test]
    fn a_claim_under_way_does_not_carry_the_cursor_past_work_announced_meanwhile() {
        let mut c = ClaimCursors::new(true);
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, at(&[("q", 0, 100_050, 1)]));
        // Begun before the enqueue of tasks ready at 100,100 committed, it did not see them
        // and found nothing more: on its own it would move the cursor to its time.
        let under_way = c.bounds(100_200, &queue(), &names());
        c.pull_back(100_100);
        let after = c.bounds(100_210, &queue(), &names());
        c.advance(&names(), &under_way, at(&[("q", 0, 100_200, i64::MAX)]));
        assert_eq!(
            positions(&c.bounds(100_300, &queue(), &names())),
            vec![(0, 100_100, i64::MIN)]
        );
        // A claim begun after the pull back saw that work: it moves the cursor on.
        c.advance(&names(), &after, at(&[("q", 0, 100_250, i64::MAX)]));
        assert_eq!(
            positions(&c.bounds(100_400, &queue(), &names())),
            vec![(0, 100_250, i64::MAX)]
        );
    }

    #[test]
    fn a_pull_back_to_a_time_ahead_of_the_cursor_changes_nothing() {
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, at(&[("q", 0, 50_000, 1)]));
        let before = c.bounds(100_001, &queue(), &names());
        c.pull_back(60_000);
        c.advance(&names(), &before, at(&[("q", 0, 55_000, 2)]));
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
        c.advance(&names(), &b, at(&[("q", 0, 99_999, 5)]));
        assert!(positions(&c.bounds(100_001, &queue(), &other)).is_empty());
        assert_eq!(positions(&c.bounds(100_001, &queue(), &names())).len(), 1);
    }

    #[test]
    fn a_rescan_starts_at_the_first_unfinished_task_the_last_one_saw() {
        let mut c = ClaimCursors::new(true);
        let b = c.bounds(100_000, &queue(), &names());
        assert_eq!(b.rescan, queue(), "the first claim is a rescan");
        c.advance(
            &names(),
            &b,
            [rescanned(0, (95_000, 3)), rescanned(1, (100_000, i64::MAX))],
        );
        let later = 100_000 + RESCAN_MS;
        let b = c.bounds(later, &queue(), &names());
        assert_eq!(b.rescan, queue());
        // Priority 1 had nothing unfinished: its floor is the window behind that claim.
        assert_eq!(
            positions(&b),
            vec![(0, 95_000, 3), (1, 100_000 - ANNOUNCED_WINDOW_MS, i64::MIN)]
        );
        assert!(c.bounds(later + 1, &queue(), &names()).rescan.is_empty());
    }

    #[test]
    fn a_priority_the_rescan_did_not_reach_starts_at_its_floor() {
        let mut c = ClaimCursors::new(true);
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, [rescanned(0, (10, 1)), rescanned(1, (20, 2))]);
        let b = c.bounds(100_000 + RESCAN_MS, &queue(), &names());
        c.advance(&names(), &b, at(&[("q", 0, 99_000, 4)]));
        let b = c.bounds(100_001 + RESCAN_MS, &queue(), &names());
        assert_eq!(positions(&b), vec![(0, 99_000, 4), (1, 20, 2)]);
    }

    #[test]
    fn a_pull_back_or_a_clock_set_back_moves_the_floor() {
        let mut c = ClaimCursors::new(true);
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, [rescanned(0, (95_000, 3))]);
        c.pull_back(40_000);
        let b = c.bounds(100_000 + RESCAN_MS, &queue(), &names());
        assert_eq!(positions(&b), vec![(0, 40_000, i64::MIN)]);
        c.advance(&names(), &b, [rescanned(0, (105_000, 3))]);
        let b = c.bounds(50_000, &queue(), &names());
        assert_eq!(b.rescan, queue());
        assert!(
            positions(&b).is_empty(),
            "a clock set back rescans from the start"
        );
    }

    #[test]
    fn a_rescan_begun_before_a_pull_back_leaves_the_floor_alone() {
        let mut c = ClaimCursors::new(true);
        let rescan = c.bounds(100_000, &queue(), &names());
        c.pull_back(40_000);
        c.advance(&names(), &rescan, [rescanned(0, (95_000, 3))]);
        assert!(positions(&c.bounds(100_000 + RESCAN_MS, &queue(), &names())).is_empty());
    }

    #[test]
    fn where_work_is_announced_a_claim_looks_a_short_window_back() {
        let mut c = ClaimCursors::new(true);
        let b = c.bounds(100_000, &queue(), &names());
        c.advance(&names(), &b, at(&[("q", 0, 100_000, i64::MAX)]));
        let b = c.bounds(100_050, &queue(), &names());
        assert_eq!(
            positions(&b),
            vec![(0, 100_050 - ANNOUNCED_WINDOW_MS, i64::MIN)]
        );
    }

    #[test]
    fn where_work_is_not_announced_a_rescan_reads_from_the_start() {
        let mut c = ClaimCursors::default();
        let b = c.bounds(100_000, &queue(), &names());
        assert!(b.rescan.is_empty(), "no floor is asked for");
        c.advance(&names(), &b, [rescanned(0, (95_000, 3))]);
        let b = c.bounds(100_000 + RESCAN_MS, &queue(), &names());
        assert!(positions(&b).is_empty());
    }
}
