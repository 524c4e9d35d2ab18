//! Wake-ups a database pushes to this process (PostgreSQL's LISTEN/NOTIFY). They are hints:
//! every consumer keeps a poll fallback, so a lost wake-up costs latency, never correctness.

use tokio::sync::{broadcast, watch};

/// What a store pushes: work became ready, or an instance finished.
#[derive(Debug)]
pub struct Wakeups {
    /// Changes whenever work became ready somewhere, and after a reconnect (when wake-ups may
    /// have been lost). Bursts coalesce: a receiver sees one change for many notifications.
    pub work: watch::Receiver<u64>,
    /// Ids of instances that finished; `None` after a reconnect, when some may have been missed.
    pub finished: broadcast::Receiver<Option<String>>,
    /// Changes after events were appended (and after a reconnect, when some wake-ups may have
    /// been missed). Bursts coalesce.
    pub events: watch::Receiver<u64>,
    /// Changes after a schedule was created, changed or deleted (and after a reconnect), so
    /// that a dispatcher sleeping until the next tick it knew of looks again.
    pub schedules: watch::Receiver<u64>,
    /// True when other processes' work arrives too (PostgreSQL); false when only this
    /// process's stores on the same database are heard (SQLite), so waits across processes
    /// still lean on polling.
    pub cross_process: bool,
}

/// The sending side of [`Wakeups`], held by a backend's listener.
#[derive(Clone, Debug)]
pub struct WakeupSender {
    work: watch::Sender<u64>,
    finished: broadcast::Sender<Option<String>>,
    events: watch::Sender<u64>,
    schedules: watch::Sender<u64>,
    cross_process: bool,
}

impl Default for WakeupSender {
    fn default() -> Self {
        Self::new()
    }
}

impl WakeupSender {
    /// A sender of wake-ups from every process, with no subscribers yet.
    pub fn new() -> Self {
        Self {
            work: watch::channel(0).0,
            finished: broadcast::channel(1024).0,
            events: watch::channel(0).0,
            schedules: watch::channel(0).0,
            cross_process: true,
        }
    }

    /// A sender of wake-ups from this process only.
    pub fn in_process() -> Self {
        Self {
            cross_process: false,
            ..Self::new()
        }
    }

    /// A new receiver pair.
    pub fn subscribe(&self) -> Wakeups {
        Wakeups {
            work: self.work.subscribe(),
            finished: self.finished.subscribe(),
            events: self.events.subscribe(),
            schedules: self.schedules.subscribe(),
            cross_process: self.cross_process,
        }
    }

    /// Work became ready.
    pub fn work_ready(&self) {
        self.work.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// An instance finished.
    pub fn finished(&self, id: String) {
        // No receivers is fine: nobody waits.
        let _ = self.finished.send(Some(id));
    }

    /// Events were appended.
    pub fn events_appended(&self) {
        self.events.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A schedule was written.
    pub fn schedules_changed(&self) {
        self.schedules.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wake-ups may have been lost (a reconnect): wake every consumer to look again.
    pub fn resync(&self) {
        self.work_ready();
        self.events_appended();
        self.schedules_changed();
        let _ = self.finished.send(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bursts_coalesce_and_resync_reaches_waiters() {
        let sender = WakeupSender::new();
        let mut w = sender.subscribe();
        for _ in 0..10 {
            sender.work_ready();
        }
        w.work.changed().await.expect("sender alive");
        w.work.borrow_and_update();
        assert!(
            !w.work.has_changed().expect("sender alive"),
            "ten hints, one wake-up"
        );
        sender.finished("a".into());
        sender.resync();
        assert_eq!(w.finished.recv().await.ok(), Some(Some("a".to_string())));
        assert_eq!(w.finished.recv().await.ok(), Some(None));
        assert!(w.work.has_changed().expect("sender alive"));
    }
}
