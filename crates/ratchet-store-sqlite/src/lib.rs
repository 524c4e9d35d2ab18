//! Ratchet's embedded store: one SQLite file, the default for development and tests.
//!
//! The file is opened in WAL mode; every [`Store`](ratchet_store::Store) call runs as one
//! transaction on a blocking thread, which is this backend's "round trip". Several processes
//! may share one file (writes take SQLite's write lock with `BEGIN IMMEDIATE`). A thread of
//! each store checkpoints the log, so that commits do not wait for its copies and `fsync`s.
//!
//! # Tasks and queues
//!
//! Activity attempts and standalone tasks share one table of unfinished tasks; a finished
//! standalone task moves to `task_results` under the same id and frees its unique key, and
//! stays there until [`Store::task_purge`](ratchet_store::Store::task_purge). A queue's pause,
//! concurrency and rate limit live in the database, so they hold across every process that
//! shares the file: each claim reads them, and spends the rate limit's tokens, in its own
//! write transaction.
//!
//! # Events
//!
//! The event store is one table of events at increasing positions, one row per (tag, event)
//! for reads and conditions by tag, and the idempotency keys of appends. An append takes the
//! file's write lock (`BEGIN IMMEDIATE`), so its conditions are checked against every event
//! committed before it, by any process, and positions commit in order without gaps.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ratchet_store::StoreError> {
//! let store = ratchet_store_sqlite::SqliteStore::open("ratchet.db").await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod checkpoint;
mod commit;
mod convert;
mod event;
mod instance;
mod list;
mod migrate;
mod queue;
mod schedule;
mod store;
mod task;
mod throughput;
mod token;
mod wake;
mod worker;
mod workflow;

pub use migrate::SCHEMA_VERSION;
pub use store::SqliteStore;
