//! Checkpoints of the write-ahead log on a thread and a connection of their own.
//!
//! SQLite checkpoints the log from inside the commit that crosses `wal_autocheckpoint`
//! pages: that commit copies pages into the file and waits for two `fsync`s while it holds
//! this store's only connection, and every claim and commit queued behind it waits too
//! (tens of milliseconds on a busy disk, one commit in ten under load). Here a thread copies
//! what the log holds every [`INTERVAL`] with a `PASSIVE` checkpoint, which takes no lock a
//! writer or a reader needs. A passive checkpoint never lets the log start over, though:
//! under steady writes new frames arrive while it copies, and the log would only grow. So
//! once the log passes [`RESTART_PAGES`] the thread asks for a `RESTART`, which waits for the
//! writer of the moment, copies the little the passive ones left, and lets the next commit
//! write the log from its start: one short pause instead of a long one per thousand pages.
//! The connection keeps a far larger automatic checkpoint, [`BACKSTOP_PAGES`], should this
//! thread stop.

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::Duration;

use rusqlite::Connection;

/// How often the thread checkpoints.
const INTERVAL: Duration = Duration::from_millis(100);

/// The log's length, in pages (4 KiB each), past which the thread restarts it.
const RESTART_PAGES: i64 = 4_000;

/// How long a restart waits for the writer of the moment, and then for readers still on the
/// log, before giving up until the next round: while it waits for readers it holds writers
/// back, so not long (another process's long read must not stall this one's commits).
const RESTART_WAIT: Duration = Duration::from_millis(100);

/// The writer's own automatic checkpoint, in pages (40 MiB of log).
pub(crate) const BACKSTOP_PAGES: i64 = 10_000;

/// Owns the checkpointing thread: once every clone is dropped, the thread stops within
/// [`INTERVAL`].
#[derive(Clone)]
pub(crate) struct Checkpointer {
    _stop: Sender<()>,
}

impl Checkpointer {
    /// Starts checkpointing the file at `path` (already in WAL mode). `None` when the thread
    /// or its connection cannot start: the backstop then checkpoints, as SQLite always did.
    pub(crate) fn start(path: &Path) -> Option<Checkpointer> {
        Self::spawn(path)
            .inspect_err(|e| {
                tracing::warn!(error = %e, "no background checkpoints for this SQLite file; its commits checkpoint instead");
            })
            .ok()
    }

    fn spawn(path: &Path) -> Result<Checkpointer, Box<dyn std::error::Error>> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(RESTART_WAIT)?;
        let (stop, stopped) = mpsc::channel::<()>();
        std::thread::Builder::new()
            .name("ratchet-sqlite-checkpoint".into())
            .spawn(move || {
                // Until every sender is dropped with the store's last clone.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(INTERVAL) {
                    checkpoint(&conn);
                }
            })?;
        Ok(Checkpointer { _stop: stop })
    }
}

/// One passive checkpoint, and a restart of the log when it grew long.
fn checkpoint(conn: &Connection) {
    let run = |statement: &str| conn.query_row(statement, [], |row| row.get::<_, i64>(1));
    let result = run("PRAGMA wal_checkpoint(PASSIVE)").and_then(|log_pages| {
        if log_pages >= RESTART_PAGES {
            run("PRAGMA wal_checkpoint(RESTART)")?;
        }
        Ok(())
    });
    if let Err(e) = result {
        tracing::debug!(error = %e, "a background checkpoint failed; the next one tries again");
    }
}
