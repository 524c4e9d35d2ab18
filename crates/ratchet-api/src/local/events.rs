//! Events in process: an append, a read and a stream as the client takes them, each input
//! checked first so a refusal names the field at fault.

use futures::stream::BoxStream;
use futures::StreamExt as _;
use ratchet_runtime::{Client, Error};
use ratchet_store::{
    AppendCondition, AppendOutcome, Direction, EventAppend, EventQuery, EventRead, NewEvent,
    Position, QueryItem, StoredEvent, MAX_EVENTS_PER_APPEND, MAX_EVENT_BYTES,
};

use super::{comma_list, problem};
use crate::events::{
    AppendInput, AppendedView, CloudEventsInput, DirectionParam, EventPageView, EventView,
    ItemInput,
};
use crate::problem::{ApiError, ProblemBody};
use crate::time::rfc3339;

impl From<StoredEvent> for EventView {
    fn from(e: StoredEvent) -> Self {
        Self {
            position: e.position.0,
            kind: e.kind,
            tags: e.tags,
            payload: e.payload,
            metadata: e.metadata,
            recorded_at: rfc3339(e.recorded_at),
        }
    }
}

/// An event position a caller gives: at most 2^63 - 1, as positions are stored.
pub fn position(given: Option<u64>, field: &str) -> Result<Option<Position>, ApiError> {
    match given {
        Some(p) if i64::try_from(p).is_err() => Err(ProblemBody::invalid(format!(
            "{p} is past the last position there can be (2^63 - 1)"
        ))
        .field(field)
        .into()),
        other => Ok(other.map(Position)),
    }
}

/// The query of a body's items, its counts, types and tags checked; a refusal names the
/// field under `field` (`query[3].types`).
pub fn to_query(items: &[ItemInput], field: &str) -> Result<EventQuery, ApiError> {
    let query = EventQuery {
        items: items
            .iter()
            .map(|i| QueryItem::new(&i.types, &i.tags))
            .collect(),
    };
    query.check().map_err(|e| {
        ApiError::from(ProblemBody::invalid(e.rule).field(format!("{field}{}", e.field)))
    })?;
    Ok(query)
}

/// The query of the `types` and `tags` parameters, checked; a refusal names the parameter.
pub fn one_item(types: Option<&str>, tags: Option<&str>) -> Result<EventQuery, ApiError> {
    let (types, tags) = (comma_list(types), comma_list(tags));
    let query = if types.is_empty() && tags.is_empty() {
        EventQuery::all()
    } else {
        EventQuery::item(QueryItem::new(types, tags))
    };
    query.check().map_err(|e| {
        // `[0].types[2]` is the parameter `types`.
        let field = if e.field.starts_with("[0].tags") {
            "tags"
        } else {
            "types"
        };
        ApiError::from(ProblemBody::invalid(e.rule).field(field))
    })?;
    Ok(query)
}

/// Refuses an event over [`MAX_EVENT_BYTES`] with 413, naming it.
fn sized(events: &[NewEvent]) -> Result<(), ApiError> {
    for (i, event) in events.iter().enumerate() {
        let size = ratchet_store::event_size(event);
        if size > MAX_EVENT_BYTES {
            return Err(ProblemBody::too_large(
                format!(
                    "the payload and metadata are {size} bytes; at most {MAX_EVENT_BYTES} are \
                     allowed"
                ),
                MAX_EVENT_BYTES as u64,
            )
            .field(format!("events[{i}].payload"))
            .into());
        }
    }
    Ok(())
}

impl AppendInput {
    /// The append it asks for, its sizes and condition checked.
    pub fn to_append(&self) -> Result<EventAppend, ApiError> {
        let events: Vec<NewEvent> = self
            .events
            .iter()
            .map(|e| {
                NewEvent::new(&e.kind, &e.tags, e.payload.clone()).with_metadata(e.metadata.clone())
            })
            .collect();
        sized(&events)?;
        let condition = match &self.condition {
            Some(c) => Some(AppendCondition {
                fail_if_events_match: to_query(
                    &c.fail_if_events_match,
                    "condition.fail_if_events_match",
                )?,
                after: position(c.after, "condition.after")?,
            }),
            None => None,
        };
        Ok(EventAppend {
            events,
            condition,
            idempotency_key: self.idempotency_key.clone(),
        })
    }
}

impl CloudEventsInput {
    /// The events, each read as a CloudEvent; a refusal names the one at fault (`[3]`).
    pub fn to_events(&self) -> Result<Vec<NewEvent>, ApiError> {
        let list = match self {
            Self::One(one) => vec![serde_json::Value::Object(one.clone())],
            Self::Batch(list) => list.clone(),
        };
        if list.is_empty() || list.len() > MAX_EVENTS_PER_APPEND {
            return Err(ProblemBody::invalid(format!(
                "a batch holds 1 to {MAX_EVENTS_PER_APPEND} CloudEvents, not {}",
                list.len()
            ))
            .into());
        }
        let events = list
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                NewEvent::from_cloud_event(e).map_err(|e| {
                    ApiError::from(ProblemBody::invalid(e.to_string()).field(format!("[{i}]")))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        sized(&events)?;
        Ok(events)
    }
}

/// Appends; a failed condition is the 409 problem naming the event that matched it.
pub(super) async fn submit(client: &Client, append: EventAppend) -> Result<AppendedView, ApiError> {
    let (first, last, duplicate) = match client.events().submit(append).await.map_err(problem)? {
        AppendOutcome::Appended { first, last } => (first, last, false),
        AppendOutcome::Duplicate { first, last } => (first, last, true),
        AppendOutcome::Conflict { position } => {
            return Err(problem(Error::AppendConflict { position }))
        }
        other => {
            return Err(ProblemBody::internal(format!(
                "the store answered the append with {other:?}"
            ))
            .into())
        }
    };
    Ok(AppendedView {
        first: first.0,
        last: last.0,
        duplicate,
    })
}

/// A page of events, up to `limit`.
pub(super) async fn page(
    client: &Client,
    query: EventQuery,
    after: Option<u64>,
    before: Option<u64>,
    limit: u32,
    direction: DirectionParam,
) -> Result<EventPageView, ApiError> {
    let read = EventRead {
        query,
        after: position(after, "after")?,
        before: position(before, "before")?,
        limit,
        direction: match direction {
            DirectionParam::Forward => Direction::Forward,
            DirectionParam::Backward => Direction::Backward,
        },
    };
    let page = client.events().read_with(read).await.map_err(problem)?;
    let next = (page.events.len() == limit as usize)
        .then(|| page.events.last().map(|e| e.position.0))
        .flatten();
    Ok(EventPageView {
        events: page.events.into_iter().map(EventView::from).collect(),
        head: page.head.0,
        next,
    })
}

/// Every matching event after `after`, then each new one; a read that fails is an item of
/// the stream, which carries on after it.
pub(super) fn follow(
    client: &Client,
    query: EventQuery,
    after: Option<Position>,
) -> BoxStream<'static, Result<EventView, ApiError>> {
    client
        .events()
        .subscribe(query, after)
        .map(|item| item.map(EventView::from).map_err(problem))
        .boxed()
}
