//! The runtime's clock: this host's clock corrected by its measured offset from the database's.
//!
//! Leases, visibility times and timers are compared in the database against times a process
//! wrote. If each process wrote its own clock's times, a host whose clock ran 20 s ahead would
//! see every other process's lease as expired and run their work a second time. So every time
//! a process writes or compares is the database's clock as this process best knows it: the
//! local clock plus an offset measured against the store (one round trip, at start and then
//! every `clock_sync`), accurate to about half a round trip.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use ratchet_core::Timestamp;
use ratchet_store::Store;
use tokio::sync::Notify;

use crate::runtime::Shared;

/// A clock reading this host's time (injectable, so tests can run a process whose clock is
/// wrong).
pub type LocalClock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The database's time as this process knows it: a local clock plus a measured offset.
pub struct Clock {
    local: LocalClock,
    offset_ms: AtomicI64,
    synced: AtomicBool,
    synced_changed: Notify,
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Clock")
            .field("offset_ms", &self.offset_ms())
            .field("synced", &self.is_synced())
            .finish()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock {
    /// This host's system clock, not yet synchronised with a store.
    pub fn system() -> Self {
        Self::with_local(Arc::new(Timestamp::now))
    }

    /// A clock reading `local` (e.g. the system clock shifted, to test a host whose clock is
    /// wrong), not yet synchronised with a store.
    pub fn with_local(local: LocalClock) -> Self {
        Self {
            local,
            offset_ms: AtomicI64::new(0),
            synced: AtomicBool::new(false),
            synced_changed: Notify::new(),
        }
    }

    /// The database's time as last measured: the local clock plus the offset.
    pub fn now(&self) -> Timestamp {
        Timestamp((self.local)().0.saturating_add(self.offset_ms()))
    }

    /// How far the database's clock is ahead of the local one, in milliseconds.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }

    /// Whether an offset was measured yet.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Measures the offset against `store`'s clock: one round trip.
    ///
    /// # Errors
    ///
    /// The store's error; the offset is then unchanged.
    pub async fn sync(&self, store: &dyn Store) -> ratchet_store::Result<()> {
        let before = (self.local)();
        let db = store.clock().await?;
        let after = (self.local)();
        let offset = offset_of(before, db, after);
        let previous = self.offset_ms.swap(offset, Ordering::Relaxed);
        if !self.synced.swap(true, Ordering::AcqRel) || (previous - offset).abs() > 1_000 {
            tracing::debug!(
                offset_ms = offset,
                "clock offset from the database measured"
            );
        }
        self.synced_changed.notify_waiters();
        Ok(())
    }

    /// The database's time, measuring the offset first if it never was (then one round trip;
    /// if that fails, the local clock is used as it is).
    pub async fn now_synced(&self, store: &dyn Store) -> Timestamp {
        if !self.is_synced() {
            if let Err(e) = self.sync(store).await {
                tracing::debug!(error = %e, "could not read the database's clock; using this host's");
            }
        }
        self.now()
    }

    /// Resolves once an offset was measured.
    pub(crate) async fn synced(&self) {
        loop {
            let changed = self.synced_changed.notified();
            if self.is_synced() {
                return;
            }
            changed.await;
        }
    }
}

/// How far `db` (read by the database during a round trip that began at `before` and ended
/// at `after` on the local clock) is ahead of the local clock. The database read its clock
/// somewhere in the round trip: assume the middle.
fn offset_of(before: Timestamp, db: Timestamp, after: Timestamp) -> i64 {
    let local = before.0 + (after.0 - before.0) / 2;
    db.0 - local
}

/// The clock service: measures the offset at once (retrying until the store answers), then
/// every `clock_sync`.
pub(crate) async fn run(shared: Arc<Shared>) {
    let clock = shared.clock.clone();
    loop {
        let wait = match clock.sync(shared.store.as_ref()).await {
            Ok(()) => shared.config.clock_sync,
            Err(e) => {
                tracing::debug!(error = %e, "could not read the database's clock; will try again");
                shared.config.poll_interval
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shared.lifecycle.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_measured_from_the_middle_of_the_round_trip() {
        // The database's clock reads 10_050 halfway through a 100 ms round trip that began at
        // 30_000 on a local clock 20 s ahead.
        assert_eq!(
            offset_of(Timestamp(30_000), Timestamp(10_050), Timestamp(30_100)),
            -20_000
        );
        assert_eq!(offset_of(Timestamp(5), Timestamp(5), Timestamp(5)), 0);
    }

    #[test]
    fn a_shifted_local_clock_reads_the_offset_corrected_time() {
        let clock = Clock::with_local(Arc::new(|| Timestamp(1_000_000)));
        assert_eq!(clock.now(), Timestamp(1_000_000));
        clock.offset_ms.store(-20_000, Ordering::Relaxed);
        assert_eq!(clock.now(), Timestamp(980_000));
    }
}
