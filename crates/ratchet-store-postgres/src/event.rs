//! The event store: conditional appends through `ratchet.event_append` (see
//! `migrations/0005_events.sql` for why the condition holds), and reads built per query shape.

use ratchet_core::Timestamp;
use ratchet_store::{
    normalized_tags, AppendOutcome, Direction, EventAppend, EventPage, EventRead, Position,
    QueryItem, StoreError, StoredEvent,
};
use tokio_postgres::Row;

use crate::convert::{col, from_json, to_json, Failure, Res};
use crate::param::{p, Param};
use crate::store::Conn;

/// Separates tags (and types) packed into one text; validation keeps control characters out
/// of both.
const SEP: &str = "\u{1f}";

/// `event_append`'s parallel arrays.
#[derive(Default)]
struct AppendArgs {
    event_append: Vec<i32>,
    event_index: Vec<i32>,
    kind: Vec<String>,
    tags: Vec<String>,
    payload: Vec<String>,
    metadata: Vec<String>,
    count: Vec<i32>,
    conditional: Vec<bool>,
    after: Vec<i64>,
    key: Vec<Option<String>>,
    item_append: Vec<i32>,
    item_types: Vec<String>,
    item_tags: Vec<String>,
}

fn as_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl AppendArgs {
    fn of(appends: &[EventAppend]) -> Self {
        let mut a = Self::default();
        for (i, append) in appends.iter().enumerate() {
            let n = as_i32(i + 1);
            for (k, e) in append.events.iter().enumerate() {
                a.event_append.push(n);
                a.event_index.push(as_i32(k + 1));
                a.kind.push(e.kind.clone());
                a.tags.push(normalized_tags(&e.tags).join(SEP));
                a.payload.push(to_json(&e.payload));
                a.metadata.push(to_json(&e.metadata));
            }
            a.count.push(as_i32(append.events.len()));
            a.conditional.push(append.condition.is_some());
            a.after.push(
                append
                    .condition
                    .as_ref()
                    .and_then(|c| c.after)
                    .map_or(0, |p| i64::try_from(p.0).unwrap_or(i64::MAX)),
            );
            a.key.push(append.idempotency_key.clone());
            if let Some(c) = &append.condition {
                let q = &c.fail_if_events_match;
                if q.matches_all() {
                    a.item_append.push(n);
                    a.item_types.push(String::new());
                    a.item_tags.push(String::new());
                } else {
                    for item in &q.items {
                        a.item_append.push(n);
                        a.item_types.push(item.types.join(SEP));
                        a.item_tags.push(normalized_tags(&item.tags).join(SEP));
                    }
                }
            }
        }
        a
    }

    /// The parameters of `event_append`, in order.
    fn params<'a>(&'a self, now: &'a i64) -> [Param<'a>; 14] {
        [
            p(&self.event_append),
            p(&self.event_index),
            p(&self.kind),
            p(&self.tags),
            p(&self.payload),
            p(&self.metadata),
            p(&self.count),
            p(&self.conditional),
            p(&self.after),
            p(&self.key),
            p(&self.item_append),
            p(&self.item_types),
            p(&self.item_tags),
            p(now),
        ]
    }
}

fn position(v: i64) -> Position {
    Position(u64::try_from(v).unwrap_or(0))
}

fn bound(p: Option<Position>) -> Option<i64> {
    p.map(|p| i64::try_from(p.0).unwrap_or(i64::MAX))
}

/// Appends in order in one transaction; notifies subscribers when something was appended.
pub(crate) async fn append(
    c: &Conn,
    appends: &[EventAppend],
    now: Timestamp,
) -> Res<Vec<AppendOutcome>> {
    let a = AppendArgs::of(appends);
    let params = a.params(&now.0);
    // Unconditional appends always append, so their notification can go out beside them;
    // a conditional one may append nothing, and a spare wake-up only costs a read.
    let rows = c
        .then_notify_on("events_notify", &[], true, "event_append", &params)
        .await?;
    rows.iter().map(outcome).collect()
}

/// Appends on the caller's transaction with the statement `sql`.
pub(crate) async fn append_in(
    tx: &tokio_postgres::Transaction<'_>,
    sql: &str,
    appends: &[EventAppend],
    now: Timestamp,
) -> Res<Vec<AppendOutcome>> {
    let a = AppendArgs::of(appends);
    let rows = tx.query_typed(sql, &a.params(&now.0)).await?;
    rows.iter().map(outcome).collect()
}

fn outcome(row: &Row) -> Res<AppendOutcome> {
    let kind: String = col(row, "outcome")?;
    let first = position(col(row, "first_position")?);
    let last = position(col(row, "last_position")?);
    Ok(match kind.as_str() {
        "appended" => AppendOutcome::Appended { first, last },
        "duplicate" => AppendOutcome::Duplicate { first, last },
        "conflict" => AppendOutcome::Conflict { position: first },
        other => {
            return Err(Failure::Store(StoreError::Corrupt(format!(
                "event_append outcome {other:?}"
            ))))
        }
    })
}

/// Columns of an event row.
const COLUMNS: &str = "position, type, tags, payload, metadata, recorded_at";

/// The rows one query item matches in the read's range, the first `$3` in `order`. The
/// statement is prepared once per shape (the recent shapes stay prepared: see
/// `Conn::query_shaped`) and runs on a generic plan, made without the
/// values, so each shape is written to have one good plan whatever they are:
/// - with tags: the first tag's events in order from `event_tags`, each checked in full,
///   until `$3` match;
/// - types only: one ordered seek on `(type, position)` per type;
/// - neither: the primary key range.
fn item_rows(
    item: &QueryItem,
    order: &str,
    next: &mut usize,
    arrays: &mut Vec<Vec<String>>,
) -> Vec<String> {
    let mut param = |values: Vec<String>| {
        arrays.push(values);
        *next += 1;
        *next - 1
    };
    if !item.tags.is_empty() {
        let tags = param(normalized_tags(&item.tags));
        let types = if item.types.is_empty() {
            String::new()
        } else {
            format!(" AND e.type = ANY (${})", param(item.types.clone()))
        };
        return vec![format!(
            "(SELECT e.position, e.type, e.tags, e.payload, e.metadata, e.recorded_at \
             FROM ratchet.event_tags t JOIN ratchet.events e ON e.position = t.position \
             WHERE t.tag = (${tags})[1] AND t.position > $1 \
             AND ($2::bigint IS NULL OR t.position < $2) AND e.tags @> ${tags}{types} \
             ORDER BY t.position {order} LIMIT $3)"
        )];
    }
    let range = "position > $1 AND ($2::bigint IS NULL OR position < $2)";
    if !item.types.is_empty() {
        // Every parameter is a text array; a single type goes as a one-element one.
        return item
            .types
            .iter()
            .map(|kind| {
                let kind = param(vec![kind.clone()]);
                format!(
                    "(SELECT {COLUMNS} FROM ratchet.events WHERE type = (${kind})[1] \
                     AND {range} ORDER BY position {order} LIMIT $3)"
                )
            })
            .collect();
    }
    vec![format!(
        "(SELECT {COLUMNS} FROM ratchet.events WHERE {range} ORDER BY position {order} LIMIT $3)"
    )]
}

/// The read's statement: the head row joined with the matching events, so both come from
/// one snapshot.
fn read_sql(read: &EventRead, arrays: &mut Vec<Vec<String>>) -> String {
    let order = match read.direction {
        Direction::Forward => "ASC",
        Direction::Backward => "DESC",
    };
    let mut next = 4;
    let items = if read.query.matches_all() {
        vec![QueryItem::default()]
    } else {
        read.query.items.clone()
    };
    let parts: Vec<String> = items
        .iter()
        .flat_map(|item| item_rows(item, order, &mut next, arrays))
        .collect();
    let events = match parts.as_slice() {
        [one] => one.clone(),
        // An event matching several items comes once.
        _ => format!(
            "(SELECT DISTINCT ON (position) {COLUMNS} FROM ({}) m \
             ORDER BY position {order} LIMIT $3)",
            parts.join(" UNION ALL ")
        ),
    };
    format!(
        "SELECT h.position AS head, e.* FROM ratchet.event_head h \
         LEFT JOIN {events} e ON true ORDER BY e.position {order}"
    )
}

/// Reads the matching events and the head.
pub(crate) async fn read(c: &Conn, read: &EventRead) -> Res<EventPage> {
    let mut arrays = Vec::new();
    let sql = c.in_schema(&read_sql(read, &mut arrays));
    let after = bound(read.after).unwrap_or(0);
    let before = bound(read.before);
    let limit = i64::from(read.limit);
    let mut params: Vec<Param<'_>> = vec![p(&after), p(&before), p(&limit)];
    params.extend(arrays.iter().map(p));
    let rows = c.query_shaped(&sql, &params).await?;
    let mut page = EventPage::default();
    for row in &rows {
        page.head = position(col(row, "head")?);
        let Some(at): Option<i64> = col(row, "position")? else {
            continue;
        };
        let payload: String = col(row, "payload")?;
        let metadata: String = col(row, "metadata")?;
        page.events.push(StoredEvent {
            position: position(at),
            kind: col(row, "type")?,
            tags: col(row, "tags")?,
            payload: from_json(&payload, "event payload")?,
            metadata: from_json(&metadata, "event metadata")?,
            recorded_at: Timestamp(col(row, "recorded_at")?),
        });
    }
    Ok(page)
}
