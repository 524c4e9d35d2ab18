//! The notifier: turns the store's pushed "work is ready" hints (another process created
//! work, or the store reconnected) into a wake-up of the dispatcher. Hints arriving while
//! the dispatcher claims fold into one more claim.

use std::sync::Arc;

use tokio::sync::watch;

use crate::runtime::Shared;

pub(crate) async fn run(shared: Arc<Shared>, mut work: watch::Receiver<u64>) {
    while work.changed().await.is_ok() {
        work.borrow_and_update();
        crate::metrics::notification("work");
        shared.wake.remote_work.notify_one();
    }
}
