//! Ratchet's embedded store: one SQLite file, the default for development and tests.
//!
//! The file is opened in WAL mode; every [`Store`](ratchet_store::Store) call runs as one
//! transaction on a blocking thread, which is this backend's "round trip". Several processes
//! may share one file (writes take SQLite's write lock with `BEGIN IMMEDIATE`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), ratchet_store::StoreError> {
//! let store = ratchet_store_sqlite::SqliteStore::open("ratchet.db").await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod commit;
mod convert;
mod instance;
mod migrate;
mod store;
mod task;

pub use migrate::SCHEMA_VERSION;
pub use store::SqliteStore;
