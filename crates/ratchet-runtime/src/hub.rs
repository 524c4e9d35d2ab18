use std::collections::HashMap;
use std::sync::Mutex;

use ratchet_core::ErrorInfo;
use ratchet_store::InstanceStatus;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use crate::Error;

/// How a finished instance ended.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceOutcome {
    /// The instance id.
    pub id: String,
    /// Final status.
    pub status: InstanceStatus,
    /// Output, when it returned one.
    pub output: Option<Value>,
    /// Error, when it failed, was terminated or was cancelled with one.
    pub error: Option<ErrorInfo>,
}

impl InstanceOutcome {
    /// The output decoded as `T` when the instance completed.
    ///
    /// # Errors
    ///
    /// [`Error::Failed`] when it did not complete, [`Error::Decode`] when the output is not a `T`.
    pub fn into_result<T: DeserializeOwned>(self) -> Result<T, Error> {
        match (self.status, self.output) {
            (InstanceStatus::Completed, Some(v)) => {
                serde_json::from_value(v).map_err(|e| Error::Decode {
                    id: self.id,
                    message: e.to_string(),
                })
            }
            (status, _) => Err(Error::Failed {
                id: self.id,
                status,
                error: self.error,
            }),
        }
    }
}

/// What a waiting client hears.
pub(crate) enum Heard {
    /// The runtime in this process finished the instance: here is how.
    Finished(InstanceOutcome),
    /// The store says the instance finished (maybe in another process), or that finishes may
    /// have been missed: read it.
    Look,
}

/// Wake-ups for clients waiting on instances, by instance id: outcomes the runtime in this
/// process publishes as its final turns commit (no round trip), and "look" hints the store
/// pushes for instances finished elsewhere. Only the waiters of an instance hear of it.
#[derive(Default)]
pub(crate) struct Hub {
    waiters: Mutex<HashMap<String, Vec<mpsc::UnboundedSender<Heard>>>>,
}

impl Hub {
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, Vec<mpsc::UnboundedSender<Heard>>>> {
        self.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn subscribe(&self, id: &str) -> mpsc::UnboundedReceiver<Heard> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut waiters = self.lock();
        let list = waiters.entry(id.to_string()).or_default();
        list.retain(|w| !w.is_closed());
        list.push(tx);
        rx
    }

    pub(crate) fn publish(&self, outcome: &InstanceOutcome) {
        let list = self.lock().remove(&outcome.id);
        for waiter in list.into_iter().flatten() {
            let _ = waiter.send(Heard::Finished(outcome.clone()));
        }
    }

    /// Tells the waiters of `id` to read it.
    pub(crate) fn look(&self, id: &str) {
        if let Some(list) = self.lock().get(id) {
            for waiter in list {
                let _ = waiter.send(Heard::Look);
            }
        }
    }

    /// Tells every waiter to read (hints may have been lost).
    pub(crate) fn look_all(&self) {
        for waiter in self.lock().values().flatten() {
            let _ = waiter.send(Heard::Look);
        }
    }

    /// Drops waiters that gave up (timed out), so an instance that never finishes leaks nothing.
    pub(crate) fn forget_closed(&self, id: &str) {
        let mut waiters = self.lock();
        if let Some(list) = waiters.get_mut(id) {
            list.retain(|w| !w.is_closed());
            if list.is_empty() {
                waiters.remove(id);
            }
        }
    }

    /// Passes the store's "finished" hints to the waiters, until the hub is gone.
    pub(crate) async fn forward(
        hub: std::sync::Weak<Hub>,
        mut finished: broadcast::Receiver<Option<String>>,
    ) {
        loop {
            let heard = finished.recv().await;
            let Some(hub) = hub.upgrade() else { return };
            match heard {
                Ok(Some(id)) => hub.look(&id),
                Ok(None) | Err(broadcast::error::RecvError::Lagged(_)) => hub.look_all(),
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
