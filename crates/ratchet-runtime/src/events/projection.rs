//! Projections: state folded from the events matching a query, read together for one
//! decision, and the append condition that protects exactly that decision.

use ratchet_store::{AppendCondition, EventQuery, Position, StoredEvent};

use super::{EventStore, PAGE};
use crate::Result;

/// State built from the events matching [`Projection::query`].
pub trait Projection: Send {
    /// The events this projection needs.
    fn query(&self) -> EventQuery;
    /// Folds in one matching event (called in position order).
    fn apply(&mut self, event: &StoredEvent);
}

/// A [`Projection`] from a query, a starting state and a fold function.
///
/// ```
/// use ratchet_runtime::Projector;
/// use ratchet_store::{EventQuery, QueryItem};
/// let enrolled = Projector::new(
///     EventQuery::item(QueryItem::new(["StudentEnrolled"], ["course:c1"])),
///     0_u32,
///     |count, _event| *count += 1,
/// );
/// assert_eq!(*enrolled.state(), 0);
/// ```
pub struct Projector<S> {
    query: EventQuery,
    state: S,
    apply: Fold<S>,
}

/// How a [`Projector`] folds one event into its state.
type Fold<S> = Box<dyn FnMut(&mut S, &StoredEvent) + Send>;

impl<S> Projector<S> {
    /// A projector over `query` starting at `initial`.
    pub fn new(
        query: EventQuery,
        initial: S,
        apply: impl FnMut(&mut S, &StoredEvent) + Send + 'static,
    ) -> Self {
        Self {
            query,
            state: initial,
            apply: Box::new(apply),
        }
    }

    /// The state so far.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The state, consuming the projector.
    pub fn into_state(self) -> S {
        self.state
    }
}

impl<S: Send> Projection for Projector<S> {
    fn query(&self) -> EventQuery {
        self.query.clone()
    }

    fn apply(&mut self, event: &StoredEvent) {
        (self.apply)(&mut self.state, event);
    }
}

pub(super) async fn project(
    events: &EventStore,
    projections: &mut [&mut dyn Projection],
) -> Result<AppendCondition> {
    let queries: Vec<EventQuery> = projections.iter().map(|p| p.query()).collect();
    // One query for all: the union of the items, or everything when any matches all.
    let union = if queries.iter().any(EventQuery::matches_all) {
        EventQuery::all()
    } else {
        EventQuery {
            items: queries.iter().flat_map(|q| q.items.clone()).collect(),
        }
    };
    let mut after: Option<Position> = None;
    let head = loop {
        let page = events.read(union.clone(), after, PAGE).await?;
        for event in &page.events {
            for (p, q) in projections.iter_mut().zip(&queries) {
                if q.matches(&event.kind, &event.tags) {
                    p.apply(event);
                }
            }
        }
        if page.events.len() < PAGE as usize {
            // Every matching event up to this page's head has been folded in.
            break page.head;
        }
        after = page.events.last().map(|e| e.position);
    };
    Ok(AppendCondition {
        fail_if_events_match: union,
        after: Some(head),
    })
}
