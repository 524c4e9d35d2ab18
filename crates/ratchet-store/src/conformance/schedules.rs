//! Schedules: every write a compare-and-set on the version, the due ones found with the next
//! time to look, and a fire written whole (state, records, runs) or not at all.

use super::*;
use crate::{
    FireKind, FireQuery, FireRecord, FireRun, NewFire, ScheduleAction, ScheduleFiring,
    ScheduleRecord, StopRun, TaskState, FIRES_KEPT,
};
use ratchet_core::ErrorInfo;

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
        settled_through: None,
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
        watch: true,
        stop: None,
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
            watch: true,
            stop: None,
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

/// `count` fires of `nominal`'s successive minutes, each a skipped tick of kind `kind`.
fn skipped_ticks(first: Timestamp, count: i64, kind: FireKind) -> Vec<NewFire> {
    (0..count)
        .map(|i| NewFire {
            nominal: Timestamp(first.0 + i * 60_000),
            kind,
            run: None,
            skipped: Some("a test".into()),
        })
        .collect()
}

/// A fire that leaves more than [`FIRES_KEPT`] records drops the oldest, and the newest tick
/// it dropped becomes the schedule's `settled_through` (what keeps a long backfill from
/// firing again what it fired): in the same transaction, only ever forward, and never
/// changed by a write of the schedule.
pub async fn dropped_fire_records_settle_their_ticks(store: &dyn Store) {
    store
        .schedule_put(schedule("nightly", Some(T0)), None)
        .await
        .unwrap();
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    let kept = i64::from(FIRES_KEPT);
    let fire = |version: i64, fires: Vec<NewFire>| ScheduleFiring {
        schedule: read.clone(),
        expect_version: version,
        fires,
        now: T0,
        watch: false,
        stop: None,
    };
    let minute = |i: i64| Timestamp(T0.0 + i * 60_000);
    store
        .schedule_fire(fire(1, skipped_ticks(T0, kept - 1, FireKind::Backfill)))
        .await
        .unwrap()
        .expect("fired");
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    assert_eq!(read.settled_through, None, "nothing dropped yet");
    // 1,500 ticks in all: the oldest 500 go.
    let records = store
        .schedule_fire(fire(
            2,
            skipped_ticks(minute(kept - 1), 501, FireKind::Backfill),
        ))
        .await
        .unwrap()
        .expect("fired");
    assert_eq!(records.len(), 501, "every fire is answered, dropped or not");
    let all = store
        .schedule_fires(FireQuery {
            schedule: "nightly".into(),
            from: Timestamp(i64::MIN),
            to: Timestamp(i64::MAX),
            limit: 5_000,
        })
        .await
        .unwrap();
    assert_eq!(all.len(), FIRES_KEPT as usize);
    assert_eq!(all.last().map(|f| f.nominal), Some(minute(500)));
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    assert_eq!(
        read.settled_through,
        Some(minute(499)),
        "the newest tick dropped"
    );
    // A write of the schedule (an update, a pause) leaves the mark as it is.
    let written = ScheduleRecord {
        paused: true,
        settled_through: None,
        ..read.clone()
    };
    assert!(store.schedule_put(written, Some(3)).await.unwrap());
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    assert_eq!(read.settled_through, Some(minute(499)));
    // A refused fire moves nothing; the next one moves it forward.
    let later = skipped_ticks(minute(1_500), 10, FireKind::Scheduled);
    assert_eq!(
        store.schedule_fire(fire(3, later.clone())).await.unwrap(),
        None
    );
    store
        .schedule_fire(fire(4, later))
        .await
        .unwrap()
        .expect("fired");
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    assert_eq!(read.settled_through, Some(minute(509)));
}

/// The run a fire stops (overlap cancel_previous, terminate_previous) is stopped in the
/// fire's transaction: a fire that loses its compare-and-set stops nothing, so a lost race
/// never leaves the schedule with no run at all. A fire that does not watch (a backfill)
/// leaves `running` alone.
pub async fn a_fire_stops_the_previous_run_only_if_it_wins(store: &dyn Store) {
    start(store, "nightly@1").await;
    let task = NewTask::standalone(
        "export".into(),
        json!({}),
        &ratchet_core::TaskOptions::default(),
        T0,
    );
    let task_id = store.task_enqueue(vec![task], T0).await.unwrap()[0].id();
    store
        .schedule_put(
            ScheduleRecord {
                running: Some("nightly@1".into()),
                ..schedule("nightly", Some(T0))
            },
            None,
        )
        .await
        .unwrap();
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    let starting = |id: &str, minute: i64| NewFire {
        nominal: Timestamp(T0.0 + minute * 60_000),
        kind: FireKind::Scheduled,
        run: Some(FireRun::Instance(NewInstance {
            if_exists: IfExists::UseExisting,
            ..new_instance(id, "report")
        })),
        skipped: None,
    };
    let fire =
        |read: &ScheduleRecord, version: i64, fires: Vec<NewFire>, watch, stop| ScheduleFiring {
            schedule: read.clone(),
            expect_version: version,
            fires,
            now: Timestamp(T0.0 + 1),
            watch,
            stop: Some(stop),
        };
    let terminate = StopRun::Terminate {
        instance: "nightly@1".into(),
        reason: "replaced".into(),
    };
    // Another process wrote the schedule since version 1 was read.
    assert!(store
        .schedule_put(
            ScheduleRecord {
                note: Some("paused meanwhile".into()),
                ..read.clone()
            },
            Some(1)
        )
        .await
        .unwrap());
    let lost = fire(
        &read,
        1,
        vec![starting("nightly@2", 1)],
        true,
        terminate.clone(),
    );
    assert_eq!(store.schedule_fire(lost).await.unwrap(), None);
    let previous = store.instance_get("nightly@1").await.unwrap().unwrap();
    assert_eq!(
        previous.status,
        InstanceStatus::Pending,
        "a fire that lost stopped nothing"
    );
    assert!(store.instance_get("nightly@2").await.unwrap().is_none());
    let stale_task = fire(&read, 1, vec![], true, StopRun::CancelTask(task_id));
    assert_eq!(store.schedule_fire(stale_task).await.unwrap(), None);
    let waiting = store.task_get(task_id, T0).await.unwrap().unwrap();
    assert_eq!(waiting.state, TaskState::Available);
    // From the version stored: the previous run stops as the next starts.
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    let won = fire(
        &read,
        2,
        vec![starting("nightly@2", 1)],
        true,
        terminate.clone(),
    );
    store.schedule_fire(won).await.unwrap().expect("fired");
    let previous = store.instance_get("nightly@1").await.unwrap().unwrap();
    assert_eq!(previous.status, InstanceStatus::Terminated);
    assert_eq!(
        previous.error,
        Some(ErrorInfo::new("Terminated", "replaced"))
    );
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    assert_eq!(read.running.as_deref(), Some("nightly@2"), "watched");
    // A run that finished meanwhile is left alone, and the fire still writes.
    let again = fire(&read, 3, vec![], true, terminate);
    store.schedule_fire(again).await.unwrap().expect("fired");
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    let task_stop = fire(
        &read,
        4,
        vec![starting("nightly@3", 2)],
        false,
        StopRun::CancelTask(task_id),
    );
    store
        .schedule_fire(task_stop)
        .await
        .unwrap()
        .expect("fired");
    let cancelled = store.task_get(task_id, T0).await.unwrap().unwrap();
    assert_eq!(cancelled.state, TaskState::Cancelled);
    let read = store.schedule_get("nightly").await.unwrap().unwrap();
    assert!(store.instance_get("nightly@3").await.unwrap().is_some());
    assert_eq!(
        read.running.as_deref(),
        Some("nightly@2"),
        "a fire that does not watch leaves the watched run"
    );
}
