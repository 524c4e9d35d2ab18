//! The event store: appends, reads, and conditions that hold under concurrency.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::*;
use crate::{
    AppendCondition, AppendOutcome, Direction, EventAppend, EventQuery, EventRead, NewEvent,
    Position, QueryItem, StoreError,
};

fn ev(kind: &str, tags: &[&str], payload: Value) -> NewEvent {
    NewEvent::new(kind, tags.iter().copied(), payload)
}

fn plain(events: Vec<NewEvent>) -> EventAppend {
    EventAppend {
        events,
        ..EventAppend::default()
    }
}

fn guarded(events: Vec<NewEvent>, query: EventQuery, after: Option<Position>) -> EventAppend {
    EventAppend {
        events,
        condition: Some(AppendCondition {
            fail_if_events_match: query,
            after,
        }),
        idempotency_key: None,
    }
}

fn tag(t: &str) -> EventQuery {
    EventQuery::item(QueryItem::new(Vec::<String>::new(), [t]))
}

async fn append_one(store: &dyn Store, append: EventAppend) -> AppendOutcome {
    let out = store.event_append(vec![append], T0).await.unwrap();
    assert_eq!(out.len(), 1, "{out:?}");
    out[0]
}

async fn read_all(store: &dyn Store, query: EventQuery) -> crate::EventPage {
    store
        .event_read(EventRead::forward(query, None, 10_000))
        .await
        .unwrap()
}

fn positions(page: &crate::EventPage) -> Vec<u64> {
    page.events.iter().map(|e| e.position.0).collect()
}

pub async fn events_append_and_read_back_exactly(store: &dyn Store) {
    let empty = read_all(store, EventQuery::all()).await;
    assert_eq!((empty.events.len(), empty.head), (0, Position(0)));
    let odd = json!({ "nul": "a\u{0000}b", "big": u64::MAX, "neg": i64::MIN, "f": 0.1, "n": [1, { "x": null }] });
    let out = store
        .event_append(
            vec![
                plain(vec![
                    ev("A", &["z:1", "a:1", "z:1"], odd.clone())
                        .with_metadata(json!({ "by": "me" })),
                    ev("B", &[], json!(null)),
                ]),
                plain(vec![ev("C", &["k:é ü"], json!("c"))]),
            ],
            T0,
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![
            AppendOutcome::Appended {
                first: Position(1),
                last: Position(2)
            },
            AppendOutcome::Appended {
                first: Position(3),
                last: Position(3)
            },
        ]
    );
    let page = read_all(store, EventQuery::all()).await;
    assert_eq!(page.head, Position(3));
    assert_eq!(positions(&page), vec![1, 2, 3]);
    let a = &page.events[0];
    assert_eq!(a.kind, "A");
    assert_eq!(a.tags, vec!["a:1", "z:1"], "sorted, without repeats");
    assert_eq!(a.payload, odd, "payload round-trips exactly");
    assert_eq!(a.metadata, json!({ "by": "me" }));
    assert_eq!(a.recorded_at, T0);
    assert_eq!(page.events[2].tags, vec!["k:é ü"]);
}

pub async fn events_queries_match_types_and_all_tags(store: &dyn Store) {
    let events = vec![
        ev("Enrolled", &["course:c1", "student:s1"], json!(1)),
        ev("Enrolled", &["course:c2", "student:s1"], json!(2)),
        ev("Left", &["course:c1", "student:s1"], json!(3)),
        ev("Defined", &["course:c1"], json!(4)),
        ev("Enrolled", &["course:c1", "student:s2"], json!(5)),
    ];
    store.event_append(vec![plain(events)], T0).await.unwrap();
    let cases: Vec<(EventQuery, Vec<u64>)> = vec![
        (EventQuery::all(), vec![1, 2, 3, 4, 5]),
        (tag("course:c1"), vec![1, 3, 4, 5]),
        (
            EventQuery::item(QueryItem::new(["Enrolled"], ["course:c1"])),
            vec![1, 5],
        ),
        (
            EventQuery::item(QueryItem::new(
                Vec::<String>::new(),
                ["course:c1", "student:s1"],
            )),
            vec![1, 3],
        ),
        (
            EventQuery::item(QueryItem::new(["Left", "Defined"], Vec::<String>::new())),
            vec![3, 4],
        ),
        (
            EventQuery::item(QueryItem::new(["Defined"], Vec::<String>::new()))
                .or(QueryItem::new(Vec::<String>::new(), ["student:s2"])),
            vec![4, 5],
        ),
        (tag("course:c9"), vec![]),
        (
            EventQuery::item(QueryItem::new(["Nope"], Vec::<String>::new()))
                .or(QueryItem::default()),
            vec![1, 2, 3, 4, 5],
        ),
    ];
    for (query, expected) in cases {
        let page = read_all(store, query.clone()).await;
        assert_eq!(positions(&page), expected, "{query:?}");
        assert_eq!(page.head, Position(5));
    }
    let ranged = |after: Option<u64>, before: Option<u64>, limit, direction| EventRead {
        query: tag("course:c1"),
        after: after.map(Position),
        before: before.map(Position),
        limit,
        direction,
    };
    for (read, expected) in [
        (
            ranged(Some(1), None, 100, Direction::Forward),
            vec![3, 4, 5],
        ),
        (
            ranged(Some(1), Some(5), 100, Direction::Forward),
            vec![3, 4],
        ),
        (ranged(None, None, 2, Direction::Forward), vec![1, 3]),
        (ranged(None, None, 2, Direction::Backward), vec![5, 4]),
        (ranged(None, Some(4), 100, Direction::Backward), vec![3, 1]),
        (ranged(Some(5), None, 100, Direction::Forward), vec![]),
    ] {
        let page = store.event_read(read.clone()).await.unwrap();
        assert_eq!(positions(&page), expected, "{read:?}");
        assert_eq!(page.head, Position(5), "head even when nothing matches");
    }
}

pub async fn events_append_if_fails_on_a_newer_match(store: &dyn Store) {
    let q = EventQuery::item(QueryItem::new(["Enrolled"], ["course:c1"]));
    // Nothing matches yet: appends.
    let first = append_one(
        store,
        guarded(
            vec![ev("Enrolled", &["course:c1"], json!(1))],
            q.clone(),
            None,
        ),
    )
    .await;
    assert!(matches!(first, AppendOutcome::Appended { .. }), "{first:?}");
    // `after` absent: any match fails, and nothing is appended.
    let again = append_one(
        store,
        guarded(
            vec![ev("Enrolled", &["course:c1"], json!(2))],
            q.clone(),
            None,
        ),
    )
    .await;
    assert_eq!(
        again,
        AppendOutcome::Conflict {
            position: Position(1)
        }
    );
    // A match at or before `after` is no conflict.
    let seen = append_one(
        store,
        guarded(
            vec![ev("Enrolled", &["course:c1"], json!(3))],
            q.clone(),
            Some(Position(1)),
        ),
    )
    .await;
    assert_eq!(
        seen,
        AppendOutcome::Appended {
            first: Position(2),
            last: Position(2)
        },
        "positions stay dense after a refused append"
    );
    // Non-matching events after `after` do not conflict: another type, another tag.
    store
        .event_append(
            vec![plain(vec![
                ev("Left", &["course:c1"], json!(4)),
                ev("Enrolled", &["course:c2"], json!(5)),
            ])],
            T0,
        )
        .await
        .unwrap();
    let other = append_one(
        store,
        guarded(vec![ev("X", &[], json!(6))], q.clone(), Some(Position(2))),
    )
    .await;
    assert!(matches!(other, AppendOutcome::Appended { .. }), "{other:?}");
    // A match-all condition fails on any newer event.
    let all = append_one(
        store,
        guarded(
            vec![ev("X", &[], json!(7))],
            EventQuery::all(),
            Some(Position(4)),
        ),
    )
    .await;
    assert_eq!(
        all,
        AppendOutcome::Conflict {
            position: Position(5)
        }
    );
    assert_eq!(read_all(store, EventQuery::all()).await.head, Position(5));
}

pub async fn events_every_item_of_a_condition_counts(store: &dyn Store) {
    store
        .event_append(
            vec![plain(vec![
                ev("Defined", &["course:c1"], json!(1)),
                ev("Enrolled", &["student:s1", "course:c2"], json!(2)),
            ])],
            T0,
        )
        .await
        .unwrap();
    // Only the second item matches (position 2); the first item matches nothing.
    let q = EventQuery::item(QueryItem::new(["Enrolled"], ["course:c1"]))
        .or(QueryItem::new(["Enrolled"], ["student:s1"]));
    let out = append_one(
        store,
        guarded(
            vec![ev("Enrolled", &["course:c1", "student:s1"], json!(3))],
            q.clone(),
            Some(Position(1)),
        ),
    )
    .await;
    assert_eq!(
        out,
        AppendOutcome::Conflict {
            position: Position(2)
        }
    );
    // Many items, the conflicting one last.
    let mut many = EventQuery::default();
    for i in 0..20 {
        many = many.or(QueryItem::new(["Enrolled"], [format!("course:x{i}")]));
    }
    many = many.or(QueryItem::new(Vec::<String>::new(), ["course:c2"]));
    let out = append_one(
        store,
        guarded(vec![ev("E", &[], json!(4))], many, Some(Position(1))),
    )
    .await;
    assert_eq!(
        out,
        AppendOutcome::Conflict {
            position: Position(2)
        }
    );
    assert_eq!(read_all(store, EventQuery::all()).await.head, Position(2));
}

/// Conditions whose `after` is far behind the head (more than a thousand events) take
/// another path on some backends: the same answers.
pub async fn events_conditions_far_behind_the_head(store: &dyn Store) {
    let mut events: Vec<NewEvent> = (0..1_200)
        .map(|i| ev("Filler", &[&format!("n:{i}")], json!(i)))
        .collect();
    events[4] = ev("Rare", &["seat:9", "row:1"], json!("5"));
    events[6] = ev("Odd", &[], json!("7"));
    store.event_append(vec![plain(events)], T0).await.unwrap();
    let probe = |query: EventQuery, after: Option<u64>| {
        guarded(vec![ev("Probe", &[], json!(0))], query, after.map(Position))
    };
    let cases = vec![
        (probe(tag("seat:9"), None), Some(5)),
        (probe(tag("seat:9"), Some(5)), None),
        (
            probe(
                EventQuery::item(QueryItem::new(["Rare"], ["row:1", "seat:9"])),
                Some(2),
            ),
            Some(5),
        ),
        (
            probe(EventQuery::item(QueryItem::new(["Nope"], ["seat:9"])), None),
            None,
        ),
        (
            probe(
                EventQuery::item(QueryItem::new(["Odd", "Rare"], Vec::<String>::new())),
                None,
            ),
            Some(5),
        ),
        (
            probe(
                EventQuery::item(QueryItem::new(["Odd"], Vec::<String>::new())),
                Some(5),
            ),
            Some(7),
        ),
        (probe(EventQuery::all(), Some(10)), Some(11)),
    ];
    for (append, expected) in cases {
        let what = format!("{:?}", append.condition);
        let out = append_one(store, append).await;
        match expected {
            Some(p) => assert_eq!(
                out,
                AppendOutcome::Conflict {
                    position: Position(p)
                },
                "{what}"
            ),
            None => assert!(
                matches!(out, AppendOutcome::Appended { .. }),
                "{what}: {out:?}"
            ),
        }
    }
}

pub async fn events_sequential_appends_with_one_after_fail_the_second(store: &dyn Store) {
    store
        .event_append(
            vec![plain(vec![ev("Defined", &["course:c1"], json!(1))])],
            T0,
        )
        .await
        .unwrap();
    let page = read_all(store, tag("course:c1")).await;
    let decide = || {
        guarded(
            vec![ev("Enrolled", &["course:c1", "student:s1"], json!(2))],
            tag("course:c1"),
            Some(page.head),
        )
    };
    let a = append_one(store, decide()).await;
    assert!(matches!(a, AppendOutcome::Appended { .. }), "{a:?}");
    let b = append_one(store, decide()).await;
    assert_eq!(
        b,
        AppendOutcome::Conflict {
            position: Position(2)
        }
    );
}

pub async fn events_appends_of_one_call_apply_in_order(store: &dyn Store) {
    let q = tag("seat:1");
    let key = |k: &str, mut a: EventAppend| {
        a.idempotency_key = Some(k.into());
        a
    };
    let out = store
        .event_append(
            vec![
                guarded(vec![ev("Booked", &["seat:1"], json!("a"))], q.clone(), None),
                // Sees the first append of this same call.
                guarded(vec![ev("Booked", &["seat:1"], json!("b"))], q.clone(), None),
                key(
                    "k1",
                    plain(vec![ev("Paid", &[], json!(1)), ev("Paid", &[], json!(2))]),
                ),
                key("k1", plain(vec![ev("Paid", &[], json!(3))])),
                plain(vec![ev("Other", &[], json!(4))]),
            ],
            T0,
        )
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![
            AppendOutcome::Appended {
                first: Position(1),
                last: Position(1)
            },
            AppendOutcome::Conflict {
                position: Position(1)
            },
            AppendOutcome::Appended {
                first: Position(2),
                last: Position(3)
            },
            AppendOutcome::Duplicate {
                first: Position(2),
                last: Position(3)
            },
            AppendOutcome::Appended {
                first: Position(4),
                last: Position(4)
            },
        ]
    );
    // A key used in an earlier call: nothing appended, the first append's positions back.
    let again = append_one(store, key("k1", plain(vec![ev("Paid", &[], json!(5))]))).await;
    assert_eq!(
        again,
        AppendOutcome::Duplicate {
            first: Position(2),
            last: Position(3)
        }
    );
    let page = read_all(store, EventQuery::all()).await;
    assert_eq!(positions(&page), vec![1, 2, 3, 4]);
}

pub async fn events_bad_input_appends_nothing(store: &dyn Store) {
    store
        .event_append(vec![plain(vec![ev("Ok", &["k:v"], json!(1))])], T0)
        .await
        .unwrap();
    let good = || plain(vec![ev("Ok", &["k:v"], json!(1))]);
    let bad_query = guarded(
        vec![ev("Ok", &[], json!(1))],
        EventQuery::item(QueryItem::new(Vec::<String>::new(), ["no-colon"])),
        None,
    );
    let cases = vec![
        (plain(vec![ev("", &[], json!(1))]), "event type"),
        (plain(vec![ev("Ok", &["course"], json!(1))]), "key:value"),
        (plain(vec![ev("Ok", &[":x"], json!(1))]), "key"),
        // A right-to-left override would show this type as `Shippedgpj.exe` reversed.
        (
            plain(vec![ev("Shipped\u{202E}exe.jpg", &[], json!(1))]),
            "U+202E",
        ),
        (plain(vec![ev("Ok", &["k:a\u{200B}b"], json!(1))]), "U+200B"),
        // The same word in two spellings (e + combining acute) would match two queries.
        (
            plain(vec![ev("Cafe\u{301}", &[], json!(1))]),
            "normalization",
        ),
        (plain(vec![ev("Ok", &["k:"], json!(1))]), "value"),
        (
            plain(vec![ev(
                "Ok",
                &[],
                json!("x".repeat(crate::MAX_EVENT_BYTES + 1)),
            )]),
            "bytes",
        ),
        (plain(vec![]), "at least one event"),
        (bad_query, "key:value"),
    ];
    for (bad, expected) in cases {
        // A good append beside the bad one is refused too: the call is all or nothing.
        let err = store.event_append(vec![good(), bad], T0).await.unwrap_err();
        assert!(
            matches!(&err, StoreError::Invalid(m) if m.contains(expected)),
            "{err}"
        );
    }
    let err = store
        .event_read(EventRead::forward(tag("bad"), None, 10))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err}");
    let page = read_all(store, EventQuery::all()).await;
    assert_eq!(
        page.head,
        Position(1),
        "nothing of the bad calls was written"
    );
}

/// 16 writers race to book 5 seats, each deciding on what it read: exactly 5 get one.
pub async fn events_concurrent_conditional_appends_never_overbook(store: &dyn Store) {
    const SEATS: usize = 5;
    let q = tag("flight:f1");
    let writer = |w: usize| {
        let q = q.clone();
        async move {
            let mut booked = 0;
            for _ in 0..20 {
                let page = read_all(store, q.clone()).await;
                if page.events.len() >= SEATS {
                    break;
                }
                let out = append_one(
                    store,
                    guarded(
                        vec![ev(
                            "Booked",
                            &["flight:f1", &format!("writer:{w}")],
                            json!(w),
                        )],
                        q.clone(),
                        Some(page.head),
                    ),
                )
                .await;
                if matches!(out, AppendOutcome::Appended { .. }) {
                    booked += 1;
                }
            }
            booked
        }
    };
    let booked: usize = futures::future::join_all((0..16).map(writer))
        .await
        .into_iter()
        .sum();
    let page = read_all(store, q).await;
    assert_eq!(page.events.len(), SEATS, "exactly the seats there are");
    assert_eq!(booked, SEATS, "every append that reported success is there");
}

/// Writers append while a reader follows with `after`: the reader sees every position once,
/// in order, with no gaps, so no event that committed late was ever skipped.
pub async fn events_readers_never_skip_a_late_commit(store: &dyn Store) {
    const WRITERS: usize = 8;
    const EACH: usize = 40;
    let total = (WRITERS * EACH) as u64;
    let done = std::sync::atomic::AtomicBool::new(false);
    let writers = async {
        futures::future::join_all((0..WRITERS).map(|w| async move {
            for i in 0..EACH {
                store
                    .event_append(
                        vec![plain(vec![ev("E", &[&format!("w:{w}")], json!(i))])],
                        T0,
                    )
                    .await
                    .unwrap();
            }
        }))
        .await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
    };
    let reader = async {
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            // Checked before the read: once the writers are done, an empty read is the end.
            let finished = done.load(std::sync::atomic::Ordering::SeqCst);
            let page = store
                .event_read(EventRead::forward(EventQuery::all(), after, 7))
                .await
                .unwrap();
            for e in &page.events {
                seen.push(e.position.0);
            }
            after = page.events.last().map(|e| e.position).or(after);
            if page.events.is_empty() {
                if finished {
                    break;
                }
                tokio::task::yield_now().await;
            }
        }
        seen
    };
    let (_, seen) = tokio::join!(writers, reader);
    let expected: Vec<u64> = (1..=total).collect();
    assert_eq!(seen, expected, "every position once, in order");
    let distinct: HashSet<_> = seen.iter().collect();
    assert_eq!(distinct.len() as u64, total);
}
