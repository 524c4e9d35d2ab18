//! The event store: conditional, idempotent appends and reads by query.
//!
//! Appends run in the caller's `BEGIN IMMEDIATE` transaction: the file's write lock
//! serializes them across processes, so a condition checked here still holds at commit, and
//! positions (the highest plus one) commit in order without gaps.

use std::fmt::Write as _;

use ratchet_core::Timestamp;
use ratchet_store::{
    normalized_tags, AppendCondition, AppendOutcome, Direction, EventAppend, EventPage, EventQuery,
    EventRead, Position, Result, StoredEvent,
};
use rusqlite::types::Value as SqlValue;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Transaction};

use crate::convert::{db_err, position, to_json, EventRow};
use crate::store::sql;

/// Above this many distinct types in a read's type-only items, one scan with a sort replaces
/// the ordered seek per type (SQLite caps a compound select at 500 parts).
const MAX_TYPE_SEEKS: usize = 64;

/// A position as SQLite stores it; `None` (no bound) and out-of-range values become `default`.
fn bound(p: Option<Position>, default: i64) -> i64 {
    p.map_or(default, |p| i64::try_from(p.0).unwrap_or(i64::MAX))
}

/// The last position in the store, 0 when empty.
fn head(conn: &Connection) -> Result<i64> {
    conn.prepare_cached(sql("event_head"))
        .map_err(db_err)?
        .query_row([], |r| r.get(0))
        .map_err(db_err)
}

/// Applies `appends` in order: each is a duplicate, a conflict, or appended in full.
pub(crate) fn append(
    tx: &Transaction<'_>,
    appends: &[EventAppend],
    now: Timestamp,
) -> Result<Vec<AppendOutcome>> {
    let mut last = head(tx)?;
    appends
        .iter()
        .map(|a| append_one(tx, a, &mut last, now))
        .collect()
}

fn append_one(
    tx: &Transaction<'_>,
    append: &EventAppend,
    last: &mut i64,
    now: Timestamp,
) -> Result<AppendOutcome> {
    if let Some(key) = &append.idempotency_key {
        let earlier: Option<(i64, i64)> = tx
            .prepare_cached(sql("event_append_find"))
            .map_err(db_err)?
            .query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()
            .map_err(db_err)?;
        if let Some((first, last)) = earlier {
            return Ok(AppendOutcome::Duplicate {
                first: position(first)?,
                last: position(last)?,
            });
        }
    }
    if let Some(condition) = &append.condition {
        if let Some(position) = first_match(tx, condition)? {
            return Ok(AppendOutcome::Conflict { position });
        }
    }
    let first = *last + 1;
    let mut insert_event = tx.prepare_cached(sql("event_insert")).map_err(db_err)?;
    let mut insert_tag = tx.prepare_cached(sql("event_tag_insert")).map_err(db_err)?;
    for e in &append.events {
        *last += 1;
        let tags = normalized_tags(&e.tags);
        insert_event
            .execute(params![
                *last,
                e.kind,
                to_json(&tags),
                to_json(&e.payload),
                to_json(&e.metadata),
                now.0
            ])
            .map_err(db_err)?;
        for tag in &tags {
            insert_tag.execute(params![tag, *last]).map_err(db_err)?;
        }
    }
    if let Some(key) = &append.idempotency_key {
        tx.prepare_cached(sql("event_append_insert"))
            .map_err(db_err)?
            .execute(params![key, first, *last])
            .map_err(db_err)?;
    }
    Ok(AppendOutcome::Appended {
        first: position(first)?,
        last: position(*last)?,
    })
}

/// The first event after the condition's `after` that matches its query, if any: the lowest
/// of each item's first match. Each item is an ordered index walk that stops at its first hit.
fn first_match(conn: &Connection, condition: &AppendCondition) -> Result<Option<Position>> {
    let after = bound(condition.after, 0);
    let query = &condition.fail_if_events_match;
    let mut found: Option<i64> = None;
    let mut keep = |p: Option<i64>| {
        if let Some(p) = p {
            found = Some(found.map_or(p, |f| f.min(p)));
        }
    };
    if query.matches_all() {
        keep(
            conn.prepare_cached(sql("event_first_after"))
                .map_err(db_err)?
                .query_row([after], |r| r.get(0))
                .optional()
                .map_err(db_err)?,
        );
        return found.map(position).transpose();
    }
    let mut type_only: Vec<&str> = Vec::new();
    for item in &query.items {
        if item.tags.is_empty() {
            type_only.extend(item.types.iter().map(String::as_str));
            continue;
        }
        let tags = normalized_tags(&item.tags);
        let types = (!item.types.is_empty()).then(|| to_json(&item.types));
        keep(
            conn.prepare_cached(sql("event_first_with_tags"))
                .map_err(db_err)?
                .query_row(
                    params![tags[0], after, to_json(&tags[1..].to_vec()), types],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?,
        );
    }
    if !type_only.is_empty() {
        type_only.sort_unstable();
        type_only.dedup();
        keep(
            conn.prepare_cached(sql("event_first_of_types"))
                .map_err(db_err)?
                .query_row(params![to_json(&type_only), after], |r| r.get(0))
                .map_err(db_err)?,
        );
    }
    found.map(position).transpose()
}

/// The events `read` asks for and the head, from one snapshot.
pub(crate) fn read(conn: &Connection, read: &EventRead) -> Result<EventPage> {
    // A deferred transaction: its snapshot starts at the first read and holds for both, so
    // another process's append cannot land between the head and the events.
    let tx = conn.unchecked_transaction().map_err(db_err)?;
    let head = head(&tx)?;
    let after = bound(read.after, 0);
    let before = bound(read.before, i64::MAX);
    let limit = i64::from(read.limit);
    let rows = if read.query.matches_all() {
        let name = match read.direction {
            Direction::Forward => "event_read_all_forward",
            Direction::Backward => "event_read_all_backward",
        };
        let mut stmt = tx.prepare_cached(sql(name)).map_err(db_err)?;
        let rows = stmt
            .query_map(params![after, before, limit], EventRow::read)
            .map_err(db_err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err)?;
        rows
    } else {
        let (text, args) = matching(&read.query, after, before, read.direction, limit);
        let mut stmt = tx.prepare_cached(&text).map_err(db_err)?;
        let rows = stmt
            .query_map(params_from_iter(args), EventRow::read)
            .map_err(db_err)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(db_err)?;
        rows
    };
    tx.commit().map_err(db_err)?;
    let events = rows
        .into_iter()
        .map(EventRow::into_event)
        .collect::<Result<Vec<StoredEvent>>>()?;
    Ok(EventPage {
        events,
        head: position(head)?,
    })
}

/// The read of the events matching a query (not `matches_all`) strictly between `after` and
/// `before`, the first `limit` in `direction`, with its arguments. Each item's part takes at
/// most `limit` positions in order from an index (an item with tags walks its first tag and
/// looks the others up; type-only items seek each type), so a page costs about `limit` rows per
/// item however long the log. Only `?` placeholders carry values.
fn matching(
    query: &EventQuery,
    after: i64,
    before: i64,
    direction: Direction,
    limit: i64,
) -> (String, Vec<SqlValue>) {
    let order = match direction {
        Direction::Forward => "ASC",
        Direction::Backward => "DESC",
    };
    let mut parts: Vec<String> = Vec::new();
    let mut args: Vec<SqlValue> = Vec::new();
    let mut type_only: Vec<&str> = Vec::new();
    for item in &query.items {
        if item.tags.is_empty() {
            type_only.extend(item.types.iter().map(String::as_str));
            continue;
        }
        let tags = normalized_tags(&item.tags);
        let mut part = String::from(
            "SELECT t.position AS position FROM event_tags t \
             WHERE t.tag = ? AND t.position > ? AND t.position < ?",
        );
        args.extend([
            SqlValue::Text(tags[0].clone()),
            SqlValue::Integer(after),
            SqlValue::Integer(before),
        ]);
        for tag in &tags[1..] {
            part.push_str(
                " AND EXISTS (SELECT 1 FROM event_tags x WHERE x.tag = ? AND x.position = t.position)",
            );
            args.push(SqlValue::Text(tag.clone()));
        }
        if !item.types.is_empty() {
            part.push_str(
                " AND EXISTS (SELECT 1 FROM events y WHERE y.position = t.position \
                 AND y.type IN (SELECT value FROM json_each(?)))",
            );
            args.push(SqlValue::Text(to_json(&item.types)));
        }
        let _ = write!(part, " ORDER BY t.position {order} LIMIT ?");
        args.push(SqlValue::Integer(limit));
        parts.push(part);
    }
    type_only.sort_unstable();
    type_only.dedup();
    let range = SqlValue::Integer(after);
    if type_only.len() <= MAX_TYPE_SEEKS {
        for kind in type_only {
            parts.push(format!(
                "SELECT position FROM events WHERE type = ? AND position > ? AND position < ? \
                 ORDER BY position {order} LIMIT ?"
            ));
            args.extend([
                SqlValue::Text(kind.to_string()),
                range.clone(),
                SqlValue::Integer(before),
                SqlValue::Integer(limit),
            ]);
        }
    } else {
        parts.push(format!(
            "SELECT position FROM events WHERE type IN (SELECT value FROM json_each(?)) \
             AND position > ? AND position < ? ORDER BY position {order} LIMIT ?"
        ));
        args.extend([
            SqlValue::Text(to_json(&type_only)),
            range,
            SqlValue::Integer(before),
            SqlValue::Integer(limit),
        ]);
    }
    let union = parts
        .iter()
        .map(|p| format!("SELECT position FROM ({p})"))
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let text = format!(
        "SELECT position, type, tags, payload, metadata, recorded_at FROM events \
         WHERE position IN ({union}) ORDER BY position {order} LIMIT ?"
    );
    args.push(SqlValue::Integer(limit));
    (text, args)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use ratchet_store::{
        AppendCondition, AppendOutcome, Direction, EventAppend, EventQuery, EventRead, NewEvent,
        Position, QueryItem, Store, StoreError,
    };
    use serde_json::json;

    use super::*;
    use crate::SqliteStore;

    const T: Timestamp = Timestamp(1_000);

    async fn store() -> (SqliteStore, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("events.db"))
            .await
            .unwrap();
        (store, dir)
    }

    fn ev(kind: &str, tags: &[&str]) -> NewEvent {
        NewEvent::new(kind, tags.iter().copied(), json!({ "k": kind }))
    }

    fn plain(events: Vec<NewEvent>) -> EventAppend {
        EventAppend {
            events,
            ..EventAppend::default()
        }
    }

    fn when(query: EventQuery, after: u64, events: Vec<NewEvent>) -> EventAppend {
        EventAppend {
            events,
            condition: Some(AppendCondition {
                fail_if_events_match: query,
                after: (after > 0).then_some(Position(after)),
            }),
            idempotency_key: None,
        }
    }

    fn appended(first: u64, last: u64) -> AppendOutcome {
        AppendOutcome::Appended {
            first: Position(first),
            last: Position(last),
        }
    }

    fn item(types: &[&str], tags: &[&str]) -> QueryItem {
        QueryItem::new(types.iter().copied(), tags.iter().copied())
    }

    async fn positions(store: &SqliteStore, read: EventRead) -> (Vec<u64>, u64) {
        let page = store.event_read(read).await.unwrap();
        (
            page.events.iter().map(|e| e.position.0).collect(),
            page.head.0,
        )
    }

    /// 1 A{c1,s1}  2 B{c1}  3 A{c2,s1}  4 C{}  5 B{c1,s2}
    async fn seeded() -> (SqliteStore, tempfile::TempDir) {
        let (store, dir) = store().await;
        let out = store
            .event_append(
                vec![
                    plain(vec![ev("A", &["student:s1", "course:c1", "course:c1"])]),
                    plain(vec![
                        ev("B", &["course:c1"]),
                        ev("A", &["course:c2", "student:s1"]),
                    ]),
                    plain(vec![ev("C", &[]), ev("B", &["course:c1", "student:s2"])]),
                ],
                T,
            )
            .await
            .unwrap();
        assert_eq!(out, vec![appended(1, 1), appended(2, 3), appended(4, 5)]);
        (store, dir)
    }

    #[tokio::test]
    async fn events_round_trip_with_normalized_tags() {
        let (store, _dir) = seeded().await;
        let page = store
            .event_read(EventRead::forward(EventQuery::all(), None, 1))
            .await
            .unwrap();
        assert_eq!(page.head, Position(5));
        let e = &page.events[0];
        assert_eq!(
            (e.position, e.kind.as_str(), e.tags.clone()),
            (
                Position(1),
                "A",
                vec!["course:c1".to_string(), "student:s1".to_string()]
            )
        );
        assert_eq!(
            (e.payload.clone(), e.metadata.clone(), e.recorded_at),
            (json!({ "k": "A" }), json!(null), T)
        );
    }

    #[tokio::test]
    async fn reads_filter_order_and_limit() {
        let (store, _dir) = seeded().await;
        let read =
            |query: EventQuery, after: Option<u64>, before: Option<u64>, limit, direction| {
                EventRead {
                    query,
                    after: after.map(Position),
                    before: before.map(Position),
                    limit,
                    direction,
                }
            };
        let all = EventQuery::all();
        let fwd = Direction::Forward;
        let back = Direction::Backward;
        assert_eq!(
            positions(&store, read(all.clone(), None, None, 10, fwd)).await,
            (vec![1, 2, 3, 4, 5], 5)
        );
        assert_eq!(
            positions(&store, read(all.clone(), Some(1), Some(5), 10, back)).await,
            (vec![4, 3, 2], 5)
        );
        assert_eq!(
            positions(&store, read(all, None, None, 2, back)).await,
            (vec![5, 4], 5)
        );
        let c1 = EventQuery::item(item(&[], &["course:c1"]));
        assert_eq!(
            positions(&store, read(c1.clone(), None, None, 10, fwd))
                .await
                .0,
            vec![1, 2, 5]
        );
        assert_eq!(
            positions(&store, read(c1, None, None, 2, back)).await.0,
            vec![5, 2]
        );
        let b_c1 = EventQuery::item(item(&["B", "X"], &["course:c1"]));
        assert_eq!(
            positions(&store, read(b_c1, None, None, 10, fwd)).await.0,
            vec![2, 5]
        );
        let both = EventQuery::item(item(&[], &["student:s1", "course:c1"]));
        assert_eq!(
            positions(&store, read(both, None, None, 10, fwd)).await.0,
            vec![1]
        );
        let ored = EventQuery::item(item(&["C"], &[]))
            .or(item(&["A"], &["course:c2"]))
            .or(item(&[], &["student:s2"]));
        assert_eq!(
            positions(&store, read(ored.clone(), None, None, 10, fwd))
                .await
                .0,
            vec![3, 4, 5]
        );
        assert_eq!(
            positions(&store, read(ored.clone(), None, None, 2, back))
                .await
                .0,
            vec![5, 4]
        );
        assert_eq!(
            positions(&store, read(ored, Some(3), None, 10, fwd))
                .await
                .0,
            vec![4, 5]
        );
        let types = EventQuery::item(item(&["A", "C"], &[])).or(item(&["A"], &[]));
        assert_eq!(
            positions(&store, read(types, None, None, 10, back)).await.0,
            vec![4, 3, 1]
        );
        // As many types as one item may hold (64).
        let many: Vec<String> = (0..63)
            .map(|i| format!("T{i}"))
            .chain(["B".into()])
            .collect();
        let many = EventQuery::item(QueryItem::new(many, Vec::<String>::new()));
        assert_eq!(
            positions(&store, read(many, None, None, 1, back)).await.0,
            vec![5]
        );
        let none = EventQuery::item(item(&[], &["course:zz"]));
        assert_eq!(
            positions(&store, read(none, None, None, 10, fwd)).await,
            (vec![], 5)
        );
    }

    #[tokio::test]
    async fn conditions_see_earlier_appends_of_the_same_call() {
        let (store, _dir) = seeded().await;
        let c1 = EventQuery::item(item(&[], &["course:c1"]));
        let out = store
            .event_append(
                vec![
                    when(c1.clone(), 5, vec![ev("A", &["course:c1"])]),
                    when(c1.clone(), 5, vec![ev("A", &["course:c1"])]),
                    when(c1.clone(), 1, vec![ev("A", &["course:c1"])]),
                    when(
                        EventQuery::item(item(&["B"], &["course:c1", "student:s2"])),
                        0,
                        vec![ev("D", &[])],
                    ),
                    when(
                        EventQuery::item(item(&["C", "Z"], &[])),
                        4,
                        vec![ev("E", &[])],
                    ),
                    when(
                        EventQuery::item(item(&["Z"], &[])).or(item(&[], &["student:s1"])),
                        2,
                        vec![ev("F", &[])],
                    ),
                    when(
                        EventQuery::item(item(&["E"], &[])).or(item(&[], &["course:c2"])),
                        0,
                        vec![ev("G", &[])],
                    ),
                    when(EventQuery::all(), 9, vec![ev("H", &[])]),
                    when(EventQuery::item(item(&[], &[])), 7, vec![ev("I", &[])]),
                ],
                T,
            )
            .await
            .unwrap();
        let conflict = |p| AppendOutcome::Conflict {
            position: Position(p),
        };
        assert_eq!(
            out,
            vec![
                appended(6, 6),
                conflict(6),
                conflict(2),
                conflict(5),
                appended(7, 7),
                conflict(3),
                conflict(3),
                appended(8, 8),
                conflict(8),
            ]
        );
    }

    #[tokio::test]
    async fn idempotency_keys_append_once() {
        let (store, _dir) = store().await;
        let keyed = |key: &str, n| EventAppend {
            events: (0..n).map(|_| ev("A", &["k:v"])).collect(),
            idempotency_key: Some(key.into()),
            ..EventAppend::default()
        };
        let out = store
            .event_append(vec![keyed("a", 2), keyed("a", 1), keyed("b", 1)], T)
            .await
            .unwrap();
        let dup = AppendOutcome::Duplicate {
            first: Position(1),
            last: Position(2),
        };
        assert_eq!(out, vec![appended(1, 2), dup, appended(3, 3)]);
        let out = store.event_append(vec![keyed("a", 5)], T).await.unwrap();
        assert_eq!(out, vec![dup]);
        assert_eq!(
            positions(&store, EventRead::forward(EventQuery::all(), None, 10))
                .await
                .1,
            3
        );
    }

    #[tokio::test]
    async fn invalid_appends_write_nothing_and_reads_are_one_round_trip() {
        let (store, _dir) = store().await;
        let wakeups = store.wakeups().unwrap();
        let bad = store
            .event_append(
                vec![plain(vec![ev("A", &[])]), plain(vec![ev("A", &["notag"])])],
                T,
            )
            .await;
        assert!(matches!(bad, Err(StoreError::Invalid(_))), "{bad:?}");
        let bad = store
            .event_read(EventRead::forward(
                EventQuery::item(item(&[""], &[])),
                None,
                1,
            ))
            .await;
        assert!(matches!(bad, Err(StoreError::Invalid(_))), "{bad:?}");
        let before = store.stats().round_trips;
        assert_eq!(
            positions(&store, EventRead::forward(EventQuery::all(), None, 10)).await,
            (vec![], 0)
        );
        store
            .event_append(vec![plain(vec![ev("A", &[]), ev("B", &[])])], T)
            .await
            .unwrap();
        assert_eq!(store.stats().round_trips, before + 2);
        assert!(
            wakeups.events.has_changed().unwrap(),
            "appends wake readers"
        );
    }

    #[tokio::test]
    async fn a_corrupt_row_is_reported() {
        let (store, dir) = seeded().await;
        let conn = rusqlite::Connection::open(dir.path().join("events.db")).unwrap();
        conn.execute("UPDATE events SET payload = 'nope' WHERE position = 2", [])
            .unwrap();
        let out = store
            .event_read(EventRead::forward(EventQuery::all(), None, 10))
            .await;
        assert!(matches!(out, Err(StoreError::Corrupt(_))), "{out:?}");
    }
}
