//! Ratchet's production store on PostgreSQL.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ratchet_store::StoreError> {
//! use ratchet_store_postgres::{PostgresConfig, PostgresStore};
//! let store = PostgresStore::connect("postgres://ratchet@localhost/app").await?;
//! // Its own schema, so several installations (or tests) share one database:
//! let other = PostgresStore::connect_with(
//!     "postgres://ratchet@localhost/app",
//!     PostgresConfig { schema: "billing".into(), ..PostgresConfig::default() },
//! ).await?;
//! # Ok(()) }
//! ```
//!
//! # Round trips
//!
//! Every [`Store`](ratchet_store::Store) call is one round trip: a single statement, most of
//! them a call to one of the SQL functions in `functions/`, which read and
//! write in one transaction on the server. A group commit of any number of turns and task
//! completions is one `commit_batch` call; a poll that claims instances and tasks is one
//! `claim` call; a release sends its statements together on one connection (pipelining).
//! The only extra round trip is preparing a statement the first time a connection runs it
//! (counted too); [`PostgresConfig::prepared_statements`] off sends each statement unnamed
//! with its types instead, still in one round trip.
//!
//! # Leases and fences
//!
//! Claims take rows with `FOR NO KEY UPDATE SKIP LOCKED`, so claimers never wait for each
//! other, and give each lease a new fence. A commit locks every instance it touches in id
//! order (no deadlocks between commits), then checks each item's fence, execution and
//! history position and applies or refuses it alone. A call that PostgreSQL still rolls back
//! for a deadlock or serialization conflict is run again.
//!
//! # Notifications
//!
//! With [`PostgresConfig::notify`] (the default), a transaction that makes work ready for
//! other processes sends `NOTIFY <schema>.work`, and one that finishes an instance sends its
//! id on `<schema>.done`; work leased to the committer in the same transaction notifies
//! nobody. One listening connection per store turns them into [`Wakeups`](ratchet_store::Wakeups),
//! reconnecting with backoff and waking everyone after a reconnect. Notifications are hints:
//! the runtime's poll covers any that are lost.
//!
//! # Schema
//!
//! Tables and functions live in one schema (default `ratchet`). Migrations are embedded and
//! applied in one transaction under an advisory lock on connect (or by `ratchet migrate`);
//! migrating twice is a no-op and a schema newer than this code is refused.
#![deny(missing_docs)]

mod commit;
mod config;
mod convert;
mod cursor;
mod event;
mod instance;
mod listen;
mod migrate;
mod param;
mod queue;
mod schedule;
mod share;
mod store;
mod task;
#[cfg(feature = "testing")]
pub mod testing;
mod throughput;
mod tls;
mod token;
mod watch;
mod worker;
mod workflow;

pub use config::PostgresConfig;
pub use migrate::SCHEMA_VERSION;
pub use store::PostgresStore;
pub use tls::describe;
/// The driver, for [`PostgresStore::task_enqueue_in`]'s transaction type.
pub use tokio_postgres;
