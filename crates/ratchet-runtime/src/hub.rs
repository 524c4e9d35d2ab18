use std::collections::HashMap;
use std::sync::Mutex;

use ratchet_core::ErrorInfo;
use ratchet_store::InstanceStatus;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::oneshot;

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

/// In-process wake-ups for clients waiting on instances: the runtime publishes each outcome as
/// its final turn commits, so a waiting client in the same process needs no round trip.
#[derive(Default)]
pub(crate) struct Hub {
    waiters: Mutex<HashMap<String, Vec<oneshot::Sender<InstanceOutcome>>>>,
}

impl Hub {
    pub(crate) fn subscribe(&self, id: &str) -> oneshot::Receiver<InstanceOutcome> {
        let (tx, rx) = oneshot::channel();
        let mut waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        let list = waiters.entry(id.to_string()).or_default();
        list.retain(|w| !w.is_closed());
        list.push(tx);
        rx
    }

    pub(crate) fn publish(&self, outcome: &InstanceOutcome) {
        let list = self
            .waiters
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&outcome.id);
        for waiter in list.into_iter().flatten() {
            let _ = waiter.send(outcome.clone());
        }
    }

    /// Drops waiters that gave up (timed out), so an instance that never finishes leaks nothing.
    pub(crate) fn forget_closed(&self, id: &str) {
        let mut waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(list) = waiters.get_mut(id) {
            list.retain(|w| !w.is_closed());
            if list.is_empty() {
                waiters.remove(id);
            }
        }
    }
}
