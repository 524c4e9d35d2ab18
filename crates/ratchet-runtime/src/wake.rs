//! Wake-ups of the dispatcher: local work created, work ready elsewhere, a nearer timer, or
//! capacity freed after a claim that found every slot taken.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use ratchet_core::Timestamp;
use tokio::sync::Notify;

/// What the dispatcher sleeps on.
#[derive(Default)]
pub(crate) struct Wake {
    /// Local work was created, or capacity freed after a full claim.
    pub(crate) work: Notify,
    /// The store says work became ready, maybe in another process.
    pub(crate) remote_work: Notify,
    /// The earliest timer committed here that the dispatcher may not know about yet.
    next_timer: Mutex<Option<Timestamp>>,
    /// Tells the dispatcher to recompute its sleep (a nearer timer), without a claim.
    pub(crate) timer_changed: Notify,
    /// Set when the dispatcher found no free slot: the next unit of work to finish wakes it.
    saturated: AtomicBool,
}

impl Wake {
    /// Records a timer committed by this process so the dispatcher wakes for it on time.
    pub(crate) fn timer_committed(&self, at: Timestamp) {
        let mut next = self.next_timer.lock().unwrap_or_else(|p| p.into_inner());
        if next.is_none_or(|n| at < n) {
            *next = Some(at);
            self.timer_changed.notify_one();
        }
    }

    /// The nearest timer committed here that is still ahead of `now` (one already due was
    /// seen by the claim that just ran, so it is forgotten).
    pub(crate) fn next_timer(&self, now: Timestamp) -> Option<Timestamp> {
        let mut next = self.next_timer.lock().unwrap_or_else(|p| p.into_inner());
        if next.is_some_and(|t| t <= now) {
            *next = None;
        }
        *next
    }

    /// The dispatcher found every slot taken: wake it when one frees.
    pub(crate) fn saturated(&self) {
        self.saturated.store(true, Ordering::SeqCst);
    }

    /// A unit of work ended; wakes the dispatcher if it waits for a free slot.
    pub(crate) fn work_finished(&self) {
        if self.saturated.swap(false, Ordering::SeqCst) {
            self.work.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_nearest_timer_until_it_is_due() {
        let wake = Wake::default();
        assert_eq!(wake.next_timer(Timestamp(0)), None);
        wake.timer_committed(Timestamp(500));
        wake.timer_committed(Timestamp(900));
        wake.timer_committed(Timestamp(300));
        assert_eq!(wake.next_timer(Timestamp(100)), Some(Timestamp(300)));
        assert_eq!(
            wake.next_timer(Timestamp(300)),
            None,
            "due: the claim saw it"
        );
    }
}
