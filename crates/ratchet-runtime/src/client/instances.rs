use std::time::Duration;

use ratchet_store::{
    CreateOutcome, HistoryRecord, IfExists, InstanceFilter, InstanceFollow, InstanceRecord, Lease,
    NewInstance, NewSignal, SignalOutcome, StopOutcome, ThroughputBucket, ThroughputQuery,
};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{check_new_id, validate_id, validate_name, validate_reason, Client};
use crate::hub::{Heard, InstanceOutcome};
use crate::{Error, Result};

/// Options of [`Client::start_with`].
#[derive(Clone, Debug, Default)]
pub struct StartOptions {
    /// The instance id; a UUID is generated when `None`.
    pub id: Option<String>,
    /// What to do when the id is taken (default: refuse).
    pub if_exists: IfExists,
    /// The W3C `traceparent` the instance's turns and activities join (a malformed one is
    /// ignored, as the W3C asks). Default: the current span's, when an OpenTelemetry layer
    /// records it.
    pub trace: Option<String>,
}

impl StartOptions {
    /// Options with a caller-chosen id.
    pub fn id(id: impl Into<String>) -> Self {
        Self {
            id: Some(id.into()),
            ..Self::default()
        }
    }

    /// Sets what to do when the id is taken.
    pub fn if_exists(mut self, policy: IfExists) -> Self {
        self.if_exists = policy;
        self
    }

    /// Sets the W3C `traceparent` the instance joins.
    pub fn trace(mut self, traceparent: impl Into<String>) -> Self {
        self.trace = Some(traceparent.into());
        self
    }
}

/// A started instance; await it with [`InstanceHandle::wait`].
pub struct InstanceHandle {
    id: String,
    client: Client,
    finished: Watch,
}

/// What a waiting client listens to, subscribed before it first reads the instance so that
/// nothing finishing in between is missed: the runtime in this process, and the store's
/// notifications from other processes.
type Watch = mpsc::UnboundedReceiver<Heard>;

impl InstanceHandle {
    /// The instance id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Waits until the instance finishes, for at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`], or a store error.
    pub async fn wait(self, timeout: Duration) -> Result<InstanceOutcome> {
        self.client
            .wait_inner(&self.id, self.finished, timeout)
            .await
    }
}

impl Client {
    /// Starts listening for `id` finishing.
    fn watch(&self, id: &str) -> Watch {
        self.hub.subscribe(id)
    }

    /// Starts an orchestration with a generated id.
    ///
    /// # Errors
    ///
    /// See [`Client::start_with`].
    pub async fn start(&self, name: &str, input: impl Serialize) -> Result<InstanceHandle> {
        self.start_with(name, input, StartOptions::default()).await
    }

    /// Checks a start without making it: the name, the id, the input's size, and for the
    /// client of a runtime, that the orchestration is registered and takes this input. A
    /// batch checks every item this way before it writes any.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`], [`Error::PayloadTooLarge`] or
    /// [`Error::UnknownOrchestration`].
    pub fn check_start(&self, name: &str, input: &Value, options: &StartOptions) -> Result<()> {
        validate_name("orchestration", name)?;
        if let Some(id) = &options.id {
            check_new_id(id)?;
        }
        self.payload("the input", input)?;
        // Only a runtime's client refuses names it does not run: a client-only process
        // (`Builder::client`) starts orchestrations that other processes run.
        if let Some(shared) = &self.local {
            let (_, entry) = shared
                .registry
                .orchestration_entry(name, None)
                .ok_or_else(|| Error::UnknownOrchestration(name.to_string()))?;
            (entry.check)(input)
                .map_err(|e| Error::InvalidInput(format!("input of \"{name}\": {e}")))?;
        }
        Ok(())
    }

    /// Starts an orchestration. Nothing is written when the name is unknown to this process's
    /// registry, the input does not decode to the orchestration's input type, or it is too large.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownOrchestration`], [`Error::InvalidInput`], [`Error::PayloadTooLarge`],
    /// [`Error::AlreadyExists`], or a store error.
    pub async fn start_with(
        &self,
        name: &str,
        input: impl Serialize,
        options: StartOptions,
    ) -> Result<InstanceHandle> {
        let input = self.payload("the input", input)?;
        self.check_start(name, &input, &options)?;
        let id = options
            .id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        // (check_start found it registered when the client has a runtime.)
        let runnable_here = self
            .local
            .as_ref()
            .is_some_and(|shared| !shared.lifecycle.is_closing());
        let finished = self.watch(&id);
        // Also measures the clock's offset from the database's on first use, which the first
        // turn below reads too (its leases and times must be the database's).
        let now = self.calls.now().await;
        let lease = self
            .local
            .as_ref()
            .filter(|_| runnable_here)
            .map(|s| Lease {
                owner: s.owner.clone(),
                until: now.plus(s.config.lease),
            });
        let new = NewInstance {
            id: id.clone(),
            name: name.to_string(),
            input,
            parent: None,
            if_exists: options.if_exists,
            trace: match &options.trace {
                Some(given) => crate::trace::parse(given),
                None => crate::trace::of(&tracing::Span::current()),
            },
        };
        // A runtime here runs the first turn at once and commits it with the start.
        let first_turn = self
            .local
            .as_ref()
            .filter(|shared| runnable_here && shared.config.fed_turns)
            .and_then(|shared| {
                let entry = shared.registry.orchestration_entry(name, None)?;
                Some((shared, entry))
            });
        let ran_first_turn = first_turn.is_some();
        let outcome = match first_turn {
            Some((shared, entry)) => Some(
                crate::turn::start_with_first_turn(shared, new, entry)
                    .await
                    .map_err(|e| {
                        std::sync::Arc::try_unwrap(e)
                            .map(Error::Store)
                            .unwrap_or_else(|e| crate::batcher::SharedStoreError(e).into())
                    })?,
            ),
            None => self.calls.create(new, lease).await?,
        };
        match outcome {
            Some(CreateOutcome::Created(_)) if ran_first_turn => {}
            Some(CreateOutcome::Created(claimed)) => {
                if let (Some(shared), Some(claimed)) = (&self.local, claimed) {
                    shared.run_turn(claimed);
                } else if let Some(shared) = &self.local {
                    shared.wake.work.notify_one();
                }
            }
            Some(CreateOutcome::Existing(_)) => {}
            Some(CreateOutcome::AlreadyExists(status)) => {
                return Err(Error::AlreadyExists { id, status })
            }
            Some(_) | None => {
                return Err(Error::InvalidInput("the store returned no outcome".into()))
            }
        }
        Ok(InstanceHandle {
            id,
            client: self.clone(),
            finished,
        })
    }

    /// Raises a signal. If the orchestration is not waiting for it yet, it is buffered.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::Finished`], [`Error::PayloadTooLarge`], or a store error.
    pub async fn signal(&self, id: &str, name: &str, payload: impl Serialize) -> Result<()> {
        self.signal_inner(id, name, payload, None).await.map(|_| ())
    }

    /// Raises a signal at most once per `dedup_id`: returns `false` when it was raised before.
    ///
    /// # Errors
    ///
    /// As [`Client::signal`].
    pub async fn signal_once(
        &self,
        id: &str,
        name: &str,
        payload: impl Serialize,
        dedup_id: &str,
    ) -> Result<bool> {
        self.signal_inner(id, name, payload, Some(dedup_id.to_string()))
            .await
    }

    async fn signal_inner(
        &self,
        id: &str,
        name: &str,
        payload: impl Serialize,
        dedup_id: Option<String>,
    ) -> Result<bool> {
        validate_id(id)?;
        validate_name("signal", name)?;
        let payload = self.payload("the signal payload", payload)?;
        let signal = NewSignal {
            instance: id.to_string(),
            name: name.to_string(),
            payload,
            dedup_id,
        };
        let outcome = self.calls.signal(signal).await?;
        match outcome {
            Some(SignalOutcome::Raised) => {
                self.wake_local();
                Ok(true)
            }
            Some(SignalOutcome::Duplicate) => Ok(false),
            Some(SignalOutcome::NotFound) => Err(Error::NotFound(id.to_string())),
            Some(SignalOutcome::Finished(status)) => Err(Error::Finished {
                id: id.to_string(),
                status,
            }),
            Some(_) | None => Err(Error::InvalidInput("the store returned no outcome".into())),
        }
    }

    fn wake_local(&self) {
        if let Some(shared) = &self.local {
            shared.wake.work.notify_one();
        }
    }

    /// Asks an instance to cancel. Its pending steps fail with `Cancelled`; the code may clean
    /// up, and the instance ends with status Cancelled. An instance whose code has not run yet
    /// runs none of its steps: each fails with `Cancelled`.
    ///
    /// # Errors
    ///
    /// [`Error::Limit`] (a reason over 32 KiB, naming the field `reason`), [`Error::NotFound`],
    /// [`Error::Finished`], or a store error.
    pub async fn cancel(&self, id: &str, reason: &str) -> Result<()> {
        validate_id(id)?;
        validate_reason(reason)?;
        let outcome = self.store.instance_cancel(id, reason).await?;
        self.stop_result(id, outcome)?;
        self.wake_local();
        Ok(())
    }

    /// Stops an instance at once without running more of its code: status Terminated.
    ///
    /// # Errors
    ///
    /// [`Error::Limit`] (a reason over 32 KiB, naming the field `reason`), [`Error::NotFound`],
    /// [`Error::Finished`], or a store error.
    pub async fn terminate(&self, id: &str, reason: &str) -> Result<()> {
        validate_id(id)?;
        validate_reason(reason)?;
        let outcome = self
            .store
            .instance_terminate(id, reason, self.calls.now().await)
            .await?;
        self.stop_result(id, outcome)?;
        if let Some(shared) = &self.local {
            shared.cache.forget(id);
            let error = ratchet_core::ErrorInfo::new("Terminated", reason);
            let status = ratchet_store::InstanceStatus::Terminated;
            self.hub.publish(&InstanceOutcome {
                id: id.to_string(),
                status,
                output: None,
                error: Some(error),
            });
            // A parent waiting for this instance has an event now.
            shared.wake.work.notify_one();
        }
        Ok(())
    }

    fn stop_result(&self, id: &str, outcome: StopOutcome) -> Result<()> {
        match outcome {
            StopOutcome::Done => Ok(()),
            StopOutcome::NotFound => Err(Error::NotFound(id.to_string())),
            StopOutcome::Finished(status) => Err(Error::Finished {
                id: id.to_string(),
                status,
            }),
            _ => Err(Error::InvalidInput(
                "the store returned an unknown outcome".into(),
            )),
        }
    }

    /// Reads an instance: status, output, error, custom status and more.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], or a store error.
    pub async fn status(&self, id: &str) -> Result<InstanceRecord> {
        self.store
            .instance_get(id)
            .await?
            .ok_or_else(|| Error::NotFound(id.to_string()))
    }

    /// Lists instances, newest first.
    ///
    /// # Errors
    ///
    /// A store error.
    pub async fn list(&self, filter: InstanceFilter) -> Result<Vec<InstanceRecord>> {
        Ok(self.store.instance_list(filter).await?)
    }

    /// Reads an instance's whole history, every execution.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], or a store error.
    pub async fn history(&self, id: &str) -> Result<Vec<HistoryRecord>> {
        let history = self.store.history_read(id, None).await?;
        if history.is_empty() && self.store.instance_get(id).await?.is_none() {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(history)
    }

    /// Reads up to `limit` events of an instance's history after the position `after`
    /// (execution, seq), or from its start: pass the last event's position for the next page.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown id, or a store error.
    pub async fn history_page(
        &self,
        id: &str,
        after: Option<(u32, u32)>,
        limit: u32,
    ) -> Result<Vec<HistoryRecord>> {
        let page = self.store.history_page(id, after, limit).await?;
        if page.is_empty() && self.store.instance_get(id).await?.is_none() {
            return Err(Error::NotFound(id.to_string()));
        }
        Ok(page)
    }

    /// Reads an instance with up to `limit` events of its history after the position `after`
    /// (or from its start), in one round trip: what a live view polls. The history is read
    /// before the instance, so once the instance shows finished, one more call from the new
    /// position returns every event that remains.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] for an unknown id, or a store error.
    pub async fn follow(
        &self,
        id: &str,
        after: Option<(u32, u32)>,
        limit: u32,
    ) -> Result<InstanceFollow> {
        self.store
            .instance_follow(id, after, limit)
            .await?
            .ok_or_else(|| Error::NotFound(id.to_string()))
    }

    /// Counts instances started, completed and failed and standalone tasks completed and dead
    /// per bucket of a time range (buckets where nothing happened are left out).
    ///
    /// # Errors
    ///
    /// A store error; [`ratchet_store::StoreError::Invalid`] for too many buckets.
    pub async fn throughput(&self, query: ThroughputQuery) -> Result<Vec<ThroughputBucket>> {
        Ok(self.store.throughput(query).await?)
    }

    /// Waits until an instance finishes, for at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`Error::Timeout`], [`Error::NotFound`], or a store error.
    pub async fn wait(&self, id: &str, timeout: Duration) -> Result<InstanceOutcome> {
        let finished = self.watch(id);
        if let Some(outcome) = self.read_outcome(id).await? {
            return Ok(outcome);
        }
        self.wait_inner(id, finished, timeout).await
    }

    async fn read_outcome(&self, id: &str) -> Result<Option<InstanceOutcome>> {
        let record = self.status(id).await?;
        Ok(record.status.is_finished().then_some(InstanceOutcome {
            id: record.id,
            status: record.status,
            output: record.output,
            error: record.error,
        }))
    }

    async fn wait_inner(
        &self,
        id: &str,
        mut heard: Watch,
        timeout: Duration,
    ) -> Result<InstanceOutcome> {
        let deadline = tokio::time::Instant::now() + timeout;
        let result = loop {
            let tick = tokio::time::sleep_until(
                (tokio::time::Instant::now() + self.poll_interval).min(deadline),
            );
            // Woken by the local runtime when it commits the final turn, by the store when
            // another process finished it, or by the poll, which covers a lost notification.
            let look = tokio::select! {
                h = heard.recv() => match h {
                    Some(Heard::Finished(outcome)) => break Ok(outcome),
                    Some(Heard::Look) => {
                        // The store's hint can beat the outcome this process's runtime is
                        // about to hand over: give it a moment before paying for a read.
                        if self.local.is_some() {
                            if let Ok(Some(Heard::Finished(outcome))) =
                                tokio::time::timeout(LOCAL_GRACE, heard.recv()).await
                            {
                                break Ok(outcome);
                            }
                        }
                        true
                    }
                    None => true,
                },
                _ = tick => true,
            };
            if look {
                match self.read_outcome(id).await {
                    Ok(Some(outcome)) => break Ok(outcome),
                    Ok(None) => {}
                    // A database that is restarting does not end the wait: the next look may
                    // find it back.
                    Err(Error::Store(e)) if tokio::time::Instant::now() < deadline => {
                        tracing::debug!(%id, error = %e, "could not read the instance; will look again");
                    }
                    Err(e) => break Err(e),
                }
            }
            if tokio::time::Instant::now() >= deadline {
                break Err(Error::Timeout(id.to_string()));
            }
        };
        drop(heard);
        self.hub.forget_closed(id);
        result
    }
}

/// How long a hint from the store waits for the local runtime's own outcome.
const LOCAL_GRACE: Duration = Duration::from_millis(20);
