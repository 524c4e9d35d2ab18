//! Schedules: every write a compare-and-set on the version, the due ones found with the next
//! time to look, and a fire written whole (state, records, runs) or not at all.

use super::*;
use crate::{
    FireKind, FireQuery, FireRecord, FireRun, NewFire, ScheduleAction, ScheduleFiring,
    ScheduleRecord,
};

fn schedule(name: &str, next_fire_at: Option<Timestamp>) -> ScheduleRecord {
    ScheduleRecord {
        name: name.into(),
        spec: "every 1m".into(),
        time_zone: "Europe/Paris".into(),
        action: ScheduleAction::Start {
            workflow: "report".into(),
            input: json!({"daily": true}),
        },
        overlap: "skip".into(),
        catch_up: "last 1".into(),
        jitter_ms: 250,
        paused: false,
        note: Some("a note".into()),
        start_at: Some(T0),
        end_at: None,
        remaining: Some(7),
        last_tick: None,
        next_fire_at,
        running: None,
        buffered: None,
        missed: 0,
        version: 0,
        created_at: T0,
        updated_at: T0,
    }
}

/// The fire records of `nightly` with a tick in `from..=to`, newest first.
async fn fires_between(store: &dyn Store, from: Timestamp, to: Timestamp) -> Vec<FireRecord> {
    store
        .schedule_fires(FireQuery {
            schedule: "nightly".into(),
            from,
            to,
            limit: 10,
        })
        .await
        .unwrap()
}

/// Created once; replaced only from the version read; listed by name; deleted once.
pub async fn schedules_are_written_by_compare_and_set(store: &dyn Store) {
    let s = schedule("nightly", Some(T0));
    assert!(store.schedule_put(s.clone(), None).await.unwrap());
    assert!(
        !store.schedule_put(s.clone(), None).await.unwrap(),
        "the name is taken"
    );
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    assert_eq!(
        read,
        ScheduleRecord {
            version: 1,
            ..s.clone()
        },
        "read back exactly"
    );
    let changed = ScheduleRecord {
        paused: true,
        spec: "0 2 * * *".into(),
        updated_at: Timestamp(T0.0 + 5),
        ..read.clone()
    };
    assert!(store.schedule_put(changed.clone(), Some(1)).await.unwrap());
    assert!(
        !store.schedule_put(changed.clone(), Some(1)).await.unwrap(),
        "a write from a stale read is refused"
    );
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    assert_eq!((read.version, read.paused, read.created_at), (2, true, T0));
    assert!(store
        .schedule_put(schedule("hourly", None), None)
        .await
        .unwrap());
    let names: Vec<String> = store
        .schedule_list()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["hourly", "nightly"]);
    assert!(store.schedule_delete("nightly").await.unwrap());
    assert!(!store.schedule_delete("nightly").await.unwrap());
    assert_eq!(store.schedule_get("nightly").await.unwrap(), None);
}

/// The unpaused ones whose time came, earliest first, and when the next one is due.
pub async fn schedules_due_are_found_with_the_next_time(store: &dyn Store) {
    let at = |ms: i64| Some(Timestamp(T0.0 + ms));
    for (name, next, paused) in [
        ("late", at(-5), false),
        ("now", at(0), false),
        ("soon", at(5_000), false),
        ("later", at(9_000), false),
        ("paused", at(-10), true),
        ("done", None, false),
    ] {
        let s = ScheduleRecord {
            paused,
            ..schedule(name, next)
        };
        store.schedule_put(s, None).await.unwrap();
    }
    let due = store.schedule_due(T0, 10).await.unwrap();
    let names: Vec<&str> = due.due.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["late", "now"]);
    assert_eq!(due.next, at(5_000));
    let due = store.schedule_due(T0, 1).await.unwrap();
    assert_eq!(due.due.len(), 1, "at most the limit");
    let due = store
        .schedule_due(Timestamp(T0.0 + 10_000), 10)
        .await
        .unwrap();
    assert_eq!((due.due.len(), due.next), (4, None));
}

/// A fire from the version read writes the schedule's state, a record per tick and the runs
/// (an instance with the given id, a task); a fire from a stale read writes nothing.
pub async fn a_fire_is_written_whole_or_not_at_all(store: &dyn Store) {
    store
        .schedule_put(schedule("nightly", Some(T0)), None)
        .await
        .unwrap();
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    let tick = |ms: i64| Timestamp(T0.0 + ms);
    let firing = |version: i64, nominal: Timestamp, id: &str| ScheduleFiring {
        schedule: ScheduleRecord {
            last_tick: Some(nominal),
            next_fire_at: Some(Timestamp(nominal.0 + 60_000)),
            running: Some(id.into()),
            ..read.clone()
        },
        expect_version: version,
        fires: vec![NewFire {
            nominal,
            kind: FireKind::Scheduled,
            run: Some(FireRun::Instance(NewInstance {
                if_exists: IfExists::UseExisting,
                ..new_instance(id, "report")
            })),
            skipped: None,
        }],
        now: Timestamp(nominal.0 + 3),
    };
    let records = store
        .schedule_fire(firing(1, tick(0), "nightly@1"))
        .await
        .unwrap()
        .expect("fired");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].run.as_deref(), Some("nightly@1"));
    assert_eq!(records[0].actual, tick(3));
    assert!(store.instance_get("nightly@1").await.unwrap().is_some());
    assert_eq!(
        store
            .schedule_fire(firing(1, tick(60_000), "nightly@2"))
            .await
            .unwrap(),
        None,
        "another process fired from this version first"
    );
    assert!(
        store.instance_get("nightly@2").await.unwrap().is_none(),
        "a refused fire starts nothing"
    );
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    assert_eq!(
        (read.version, read.last_tick, read.running.as_deref()),
        (2, Some(tick(0)), Some("nightly@1"))
    );
    // A skipped tick and a task, in one fire.
    let task = NewTask::standalone(
        "export".into(),
        json!({"n": 1}),
        &ratchet_core::TaskOptions::default(),
        tick(60_000),
    );
    let records = store
        .schedule_fire(ScheduleFiring {
            schedule: ScheduleRecord {
                last_tick: Some(tick(120_000)),
                ..read.clone()
            },
            expect_version: 2,
            fires: vec![
                NewFire {
                    nominal: tick(60_000),
                    kind: FireKind::Scheduled,
                    run: None,
                    skipped: Some("the previous run is still going".into()),
                },
                NewFire {
                    nominal: tick(120_000),
                    kind: FireKind::Scheduled,
                    run: Some(FireRun::Task(task)),
                    skipped: None,
                },
            ],
            now: tick(120_001),
        })
        .await
        .unwrap()
        .expect("fired");
    let task_id: i64 = records[1].run.as_deref().unwrap().parse().unwrap();
    let task = store
        .task_get(crate::TaskId(task_id), tick(120_001))
        .await
        .unwrap()
        .expect("the task was enqueued");
    assert_eq!(task.name, "export");
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    assert_eq!(
        read.running,
        Some(task_id.to_string()),
        "the last run started is the running one"
    );
    let fires = fires_between(store, Timestamp(i64::MIN), Timestamp(i64::MAX)).await;
    let seen: Vec<(i64, Option<&str>, bool)> = fires
        .iter()
        .map(|f| (f.nominal.0 - T0.0, f.run.as_deref(), f.skipped.is_some()))
        .collect();
    assert_eq!(
        seen,
        [
            (120_000, Some(task_id.to_string().as_str()), false),
            (60_000, None, true),
            (0, Some("nightly@1"), false)
        ],
        "newest first"
    );
    let within = fires_between(store, tick(1), tick(60_000)).await;
    assert_eq!(within.len(), 1, "only the range");
    store.schedule_delete("nightly").await.unwrap();
    let fires = fires_between(store, Timestamp(i64::MIN), Timestamp(i64::MAX)).await;
    assert!(fires.is_empty(), "a deleted schedule's records go with it");
}
