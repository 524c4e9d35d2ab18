//! The event store's client: appends (merged across concurrent callers into one
//! transaction), reads, live subscriptions, projections, and appends as orchestration steps.

mod awaited;
mod projection;
mod step;
mod subscribe;

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use ratchet_core::Timestamp;
use ratchet_store::{
    AppendCondition, AppendOutcome, EventAppend, EventPage, EventQuery, EventRead, NewEvent,
    Position, Store, StoredEvent,
};

pub(crate) use awaited::register_await_activities;
pub use awaited::{
    await_event, await_event_after, events_head, EVENTS_AWAIT_ACTIVITY, EVENTS_HEAD_ACTIVITY,
};
pub use projection::{Projection, Projector};
pub(crate) use step::register_append_activity;
pub use step::{append_events, EVENTS_APPEND_ACTIVITY};

use crate::batcher::Batcher;
use crate::{Error, Result};

/// Appends merged into one store call at most.
const MAX_MERGED_APPENDS: usize = 512;
/// Events per page when a stream reads on.
const PAGE: u32 = 1_000;

/// Where an append landed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Appended {
    /// The first event's position.
    pub first: Position,
    /// The last event's position.
    pub last: Position,
}

/// The event store: append events, with or without a condition; read and follow them.
///
/// Concurrent appends from one process share a transaction (each still atomic on its own,
/// each with its own outcome), so many small appends cost few commits.
///
/// ```no_run
/// # async fn run(events: ratchet_runtime::EventStore) -> ratchet_runtime::Result<()> {
/// use ratchet_store::{EventQuery, NewEvent, QueryItem};
/// use serde_json::json;
/// let seat = EventQuery::item(QueryItem::new(["SeatBooked"], ["flight:f1"]));
/// let page = events.read(seat.clone(), None, 1000).await?;
/// if page.events.len() < 100 {
///     let booked = NewEvent::new("SeatBooked", ["flight:f1", "passenger:ada"], json!({}));
///     // Fails with Error::AppendConflict if someone booked since the read.
///     events.append_if(vec![booked], seat.after(page.head)).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct EventStore {
    store: Arc<dyn Store>,
    appends: Option<Arc<Batcher<EventAppend, AppendOutcome>>>,
    poll_interval: Duration,
}

impl EventStore {
    /// An event store on `store`. Inside a tokio runtime, concurrent appends are merged.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self::with_appends_in_flight(store, 1)
    }

    /// An event store whose merged appends keep up to `calls` store calls in flight at once.
    ///
    /// Appends commit one after another in the database (that is what makes conditions
    /// hold), so on a nearby database one call at a time is fastest: everything that arrives
    /// while it runs leaves together in the next, and the database never hands its append
    /// lock from one of this process's transactions to another. Against a distant database
    /// a second or third call in flight saves a caller most of a round trip of waiting.
    pub fn with_appends_in_flight(store: Arc<dyn Store>, calls: usize) -> Self {
        let s = store.clone();
        let appends =
            Batcher::spawn_with(MAX_MERGED_APPENDS, calls, move |items: Vec<EventAppend>| {
                let store = s.clone();
                async move { store.event_append(items, Timestamp::now()).await }
            })
            .map(Arc::new);
        // Subscriptions are woken by pushes; without them (or only from this process) they poll.
        let poll_interval = if store.wakeups().is_some_and(|w| w.cross_process) {
            Duration::from_secs(1)
        } else {
            Duration::from_millis(100)
        };
        Self {
            store,
            appends,
            poll_interval,
        }
    }

    /// Sets how often a subscription polls when no wake-up came (a fallback for lost
    /// notifications, and the only way to hear other processes on SQLite).
    pub fn with_poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Appends `events` atomically.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for an empty type, a malformed tag or an oversized event
    /// (nothing appended); [`Error::Store`] for database failures.
    pub async fn append(&self, events: Vec<NewEvent>) -> Result<Appended> {
        self.append_with(EventAppend {
            events,
            ..EventAppend::default()
        })
        .await
    }

    /// Appends `events` atomically only if no event matching
    /// `condition.fail_if_events_match` exists after `condition.after`.
    ///
    /// # Errors
    ///
    /// [`Error::AppendConflict`] naming the first such event (nothing appended); otherwise
    /// as [`EventStore::append`].
    pub async fn append_if(
        &self,
        events: Vec<NewEvent>,
        condition: AppendCondition,
    ) -> Result<Appended> {
        self.append_with(EventAppend {
            events,
            condition: Some(condition),
            idempotency_key: None,
        })
        .await
    }

    /// Appends with every option: a condition, an idempotency key (a repeat returns the
    /// first append's positions and appends nothing).
    ///
    /// # Errors
    ///
    /// As [`EventStore::append_if`].
    pub async fn append_with(&self, append: EventAppend) -> Result<Appended> {
        match self.submit(append).await? {
            AppendOutcome::Appended { first, last } | AppendOutcome::Duplicate { first, last } => {
                Ok(Appended { first, last })
            }
            AppendOutcome::Conflict { position } => Err(Error::AppendConflict { position }),
            other => Err(Error::Store(ratchet_store::StoreError::Corrupt(format!(
                "unknown append outcome {other:?}"
            )))),
        }
    }

    /// Appends and returns the store's outcome as is (a conflict is an outcome, not an error).
    ///
    /// # Errors
    ///
    /// [`Error::PayloadTooLarge`] for an event whose payload and metadata are over
    /// [`ratchet_store::MAX_EVENT_BYTES`]; [`Error::InvalidInput`] for bad events;
    /// [`Error::Store`] for database failures.
    pub async fn submit(&self, append: EventAppend) -> Result<AppendOutcome> {
        // An event over the size limit is too large, not malformed (413 over HTTP).
        for (i, event) in append.events.iter().enumerate() {
            let size = ratchet_store::event_size(event);
            if size > ratchet_store::MAX_EVENT_BYTES {
                return Err(Error::PayloadTooLarge {
                    what: format!("event {i}'s payload and metadata"),
                    size,
                    limit: ratchet_store::MAX_EVENT_BYTES,
                });
            }
        }
        // Checked alone first: a bad append must not fail the others it would be merged with.
        append.validate().map_err(invalid)?;
        let outcomes = match &self.appends {
            Some(b) => b.submit(vec![append]).await?,
            None => self
                .store
                .event_append(vec![append], Timestamp::now())
                .await
                .map_err(invalid)?,
        };
        outcomes.into_iter().next().ok_or_else(|| {
            Error::Store(ratchet_store::StoreError::Corrupt(
                "an append returned no outcome".into(),
            ))
        })
    }

    /// One page: up to `limit` events matching `query` after `after`, oldest first, with the
    /// head position they were read at.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a malformed query; [`Error::Store`] for database failures.
    pub async fn read(
        &self,
        query: EventQuery,
        after: Option<Position>,
        limit: u32,
    ) -> Result<EventPage> {
        self.read_with(EventRead::forward(query, after, limit))
            .await
    }

    /// One page of any [`EventRead`] (a range, newest first, ...).
    ///
    /// # Errors
    ///
    /// As [`EventStore::read`].
    pub async fn read_with(&self, read: EventRead) -> Result<EventPage> {
        self.store.event_read(read).await.map_err(invalid)
    }

    /// The store's last position (0 when empty): where a subscription "from now" starts.
    ///
    /// # Errors
    ///
    /// [`Error::Store`] for database failures.
    pub async fn head(&self) -> Result<Position> {
        let read = EventRead {
            limit: 0,
            ..EventRead::forward(EventQuery::all(), None, 0)
        };
        Ok(self.read_with(read).await?.head)
    }

    /// Every event matching `query` after `after`, oldest first, read page by page; ends at
    /// the head as of the last page.
    pub fn read_all(
        &self,
        query: EventQuery,
        after: Option<Position>,
    ) -> impl Stream<Item = Result<StoredEvent>> + Send + 'static {
        subscribe::stream(self.clone(), query, after, false)
    }

    /// Every event matching `query` after `after`, then each new one as it is appended:
    /// pushed where the store pushes (PostgreSQL's LISTEN/NOTIFY, this process on SQLite),
    /// with a poll as the fallback. Never skips or repeats an event, in position order.
    /// A database failure is yielded as an error and the stream carries on after a pause.
    pub fn subscribe(
        &self,
        query: EventQuery,
        after: Option<Position>,
    ) -> impl Stream<Item = Result<StoredEvent>> + Send + 'static {
        subscribe::stream(self.clone(), query, after, true)
    }

    /// Folds the events matching every projection's query into the projections in one read
    /// (page by page for long histories), and returns the condition that protects a decision
    /// made on them: "no event matching any of these queries after what was read".
    ///
    /// # Errors
    ///
    /// As [`EventStore::read`].
    pub async fn project(
        &self,
        projections: &mut [&mut dyn Projection],
    ) -> Result<AppendCondition> {
        projection::project(self, projections).await
    }
}

fn invalid(e: ratchet_store::StoreError) -> Error {
    match e {
        ratchet_store::StoreError::Invalid(m) => Error::InvalidInput(m),
        other => Error::Store(other),
    }
}
