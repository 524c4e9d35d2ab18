use std::sync::Arc;
use std::time::Duration;

use ratchet::{Builder, Ratchet, RuntimeConfig, SqliteStore, Store};

pub const WAIT: Duration = Duration::from_secs(20);

/// A fresh SQLite file in a directory kept for the test's lifetime.
pub async fn sqlite() -> Arc<dyn Store> {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("e2e.db")).await.unwrap();
    std::mem::forget(dir);
    Arc::new(store)
}

/// A store in a fresh schema of the test PostgreSQL; `None` skips the test (no server
/// configured, and not required).
pub async fn postgres() -> Option<Arc<dyn Store>> {
    let store = ratchet_store_postgres::testing::fresh_store().await?;
    Some(Arc::new(store))
}

/// A configuration with short leases and polls, so takeovers happen within a test.
pub fn fast() -> RuntimeConfig {
    RuntimeConfig {
        lease: Duration::from_millis(1500),
        heartbeat: Duration::from_millis(300),
        poll_interval: Duration::from_millis(100),
        shutdown_grace: Duration::from_secs(5),
        ..RuntimeConfig::default()
    }
}

pub async fn start(store: &Arc<dyn Store>, build: impl FnOnce(Builder) -> Builder) -> Ratchet {
    build(Ratchet::builder().store(store.clone()).config(fast()))
        .start()
        .await
        .unwrap()
}

/// Declares each listed `async fn(Arc<dyn Store>)` as a test on every backend.
#[macro_export]
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::harness::sqlite().await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(store) = $crate::harness::postgres().await {
                        super::$name(store).await;
                    }
                }
            )*
        }
    };
}
