//! The runtime's lifecycle: the work in flight, and whether it is shutting down.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{watch, Notify};

/// Work in flight and the shutdown flag, shared by every service.
pub(crate) struct Lifecycle {
    /// Turns and activities in flight, for graceful shutdown.
    inflight: AtomicUsize,
    idle: Notify,
    closing: AtomicBool,
    /// Becomes true on shutdown: attempts waiting for a slot give their lease back.
    closed: watch::Sender<bool>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self {
            inflight: AtomicUsize::new(0),
            idle: Notify::new(),
            closing: AtomicBool::new(false),
            closed: watch::channel(false).0,
        }
    }
}

impl Lifecycle {
    /// True once shutdown began.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// Begins shutdown; false when it had begun already.
    pub(crate) fn close(&self) -> bool {
        if self.closing.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.closed.send_replace(true);
        true
    }

    /// Resolves once shutdown began.
    pub(crate) async fn closed(&self) {
        let mut closed = self.closed.subscribe();
        let _ = closed.wait_for(|c| *c).await;
    }

    /// Counts one unit of work in flight, until [`Lifecycle::work_done`].
    pub(crate) fn work_started(&self) {
        self.inflight.fetch_add(1, Ordering::SeqCst);
    }

    /// Ends one unit of work.
    pub(crate) fn work_done(&self) {
        if self.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }

    /// Waits until no work is in flight, for at most `grace`; false when the grace ran out.
    pub(crate) async fn drained(&self, grace: Duration) -> bool {
        tokio::time::timeout(grace, async {
            loop {
                let idle = self.idle.notified();
                if self.inflight.load(Ordering::SeqCst) == 0 {
                    return;
                }
                idle.await;
            }
        })
        .await
        .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drains_when_the_last_work_ends() {
        let life = std::sync::Arc::new(Lifecycle::default());
        assert!(life.drained(Duration::ZERO).await, "nothing in flight");
        life.work_started();
        life.work_started();
        assert!(!life.drained(Duration::from_millis(10)).await);
        let l = life.clone();
        let waiting = tokio::spawn(async move { l.drained(Duration::from_secs(10)).await });
        life.work_done();
        life.work_done();
        assert!(waiting.await.unwrap());
    }

    #[tokio::test]
    async fn closes_once() {
        let life = Lifecycle::default();
        assert!(!life.is_closing());
        assert!(life.close());
        assert!(!life.close(), "a second shutdown is a no-op");
        life.closed().await;
        assert!(life.is_closing());
    }
}
