//! Merges concurrent client calls of one kind (starts, signals, enqueues) into one store call:
//! the first call goes at once; those that arrive while it is in flight leave together in the
//! next. A lone caller waits no longer than before; a crowd shares its round trips and
//! commits.

use std::future::Future;
use std::sync::Arc;

use futures::future::BoxFuture;
use ratchet_store::StoreError;
use tokio::sync::{mpsc, oneshot};

/// A store failure shared by every call of the batch it failed.
#[derive(Debug)]
pub(crate) struct SharedStoreError(pub(crate) Arc<StoreError>);

impl std::fmt::Display for SharedStoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for SharedStoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(self.0.as_ref())
    }
}

impl From<SharedStoreError> for crate::Error {
    fn from(e: SharedStoreError) -> Self {
        Self::Store(StoreError::copied(&e.0))
    }
}

type Reply<O> = oneshot::Sender<Result<Vec<O>, SharedStoreError>>;

/// The calling side of a batcher. Each request is a list of items (a start of one instance,
/// an enqueue of many tasks) and gets back one outcome per item.
pub(crate) struct Batcher<I, O> {
    tx: mpsc::UnboundedSender<(Vec<I>, Reply<O>)>,
}

/// The store call a batcher makes for one merged list.
type StoreCall<I, O> =
    Arc<dyn Fn(Vec<I>) -> BoxFuture<'static, Result<Vec<O>, StoreError>> + Send + Sync>;

impl<I: Send + 'static, O: Send + 'static> Batcher<I, O> {
    /// Starts the batching task on the current tokio runtime; `call` makes the store call for
    /// a merged list and returns one outcome per item, in order. `None` outside a runtime.
    pub(crate) fn spawn<F, Fut>(max_items: usize, call: F) -> Option<Self>
    where
        F: Fn(Vec<I>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<O>, StoreError>> + Send + 'static,
    {
        Self::spawn_with(max_items, CALLS_IN_FLIGHT, call)
    }

    /// [`Batcher::spawn`] with at most `in_flight` store calls at once.
    pub(crate) fn spawn_with<F, Fut>(max_items: usize, in_flight: usize, call: F) -> Option<Self>
    where
        F: Fn(Vec<I>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Vec<O>, StoreError>> + Send + 'static,
    {
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let call: StoreCall<I, O> = Arc::new(move |items| Box::pin(call(items)));
        handle.spawn(run(rx, max_items.max(1), in_flight.max(1), call));
        Some(Self { tx })
    }

    /// Sends `items` with the next batch and returns their outcomes.
    pub(crate) async fn submit(&self, items: Vec<I>) -> Result<Vec<O>, SharedStoreError> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send((items, reply))
            .map_err(|_| SharedStoreError(Arc::new(StoreError::Closed)))?;
        rx.await
            .map_err(|_| SharedStoreError(Arc::new(StoreError::Closed)))?
    }
}

async fn run<I: Send + 'static, O: Send + 'static>(
    mut rx: mpsc::UnboundedReceiver<(Vec<I>, Reply<O>)>,
    max_items: usize,
    calls_in_flight: usize,
    call: StoreCall<I, O>,
) {
    // A few calls travel at once (against a distant database each takes a round trip);
    // whatever gathers while all of them travel leaves in one call after.
    let mut in_flight = tokio::task::JoinSet::new();
    while let Some(first) = rx.recv().await {
        while in_flight.len() >= calls_in_flight {
            in_flight.join_next().await;
        }
        while in_flight.try_join_next().is_some() {}
        let mut requests = vec![first];
        let mut count = requests[0].0.len();
        while count < max_items {
            match rx.try_recv() {
                Ok(next) => {
                    count += next.0.len();
                    requests.push(next);
                }
                Err(_) => break,
            }
        }
        let mut items = Vec::with_capacity(count);
        let mut replies = Vec::with_capacity(requests.len());
        for (its, reply) in requests {
            replies.push((its.len(), reply));
            items.extend(its);
        }
        let call = call(items);
        in_flight.spawn(async move {
            match call.await {
                Ok(outcomes) => {
                    let mut outcomes = outcomes.into_iter();
                    for (n, reply) in replies {
                        let _ = reply.send(Ok(outcomes.by_ref().take(n).collect()));
                    }
                }
                Err(e) => {
                    let e = Arc::new(e);
                    for (_, reply) in replies {
                        let _ = reply.send(Err(SharedStoreError(e.clone())));
                    }
                }
            }
        });
    }
}

/// Store calls one batcher has in flight at most.
const CALLS_IN_FLIGHT: usize = 4;

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn concurrent_calls_share_store_calls_and_get_their_own_outcomes() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let batcher = Batcher::spawn(1000, move |items: Vec<u32>| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                Ok(items.into_iter().map(|i| i * 10).collect())
            }
        })
        .expect("inside a runtime");
        let batcher = Arc::new(batcher);
        let requests = (0..50u32).map(|i| {
            let b = batcher.clone();
            async move { (i, b.submit(vec![i, i + 100]).await) }
        });
        for (i, out) in futures::future::join_all(requests).await {
            assert_eq!(out.ok(), Some(vec![i * 10, (i + 100) * 10]));
        }
        assert!(
            calls.load(Ordering::SeqCst) <= 2,
            "50 concurrent requests took {} store calls",
            calls.load(Ordering::SeqCst)
        );
    }
}
