//! Schedules through a runtime on each backend: overlap policies with runs that outlive
//! their interval, pause and resume, remaining actions, manual fires of a task, backfill
//! across daylight-saving changes in two zones, and bad schedules refused by field.

use std::sync::Arc;
use std::time::Duration;

use ratchet::{
    CatchUp, Client, Error, FireKind, FireRecord, InstanceStatus, OrchestrationContext,
    OrchestrationError, Overlap, ScheduleOptions, ScheduleRecord, StartOptions, Store, TaskContext,
    TaskError, TaskOptions, TaskState, Timestamp,
};

use crate::harness::start;

crate::on_every_backend!(
    overlap_policies_decide_what_a_tick_does_while_its_run_still_runs,
    pause_resume_and_remaining_actions,
    trigger_now_enqueues_a_task_that_knows_its_schedule,
    backfill_fires_each_missed_tick_once_across_daylight_saving_changes,
    bad_schedules_are_refused_naming_the_field,
    a_definitions_own_schedule_starts_it_after_each_run,
    hosts_whose_clocks_are_wrong_fire_each_tick_once_and_on_time,
    a_backfill_longer_than_the_records_kept_fires_each_tick_once,
    manual_and_backfilled_runs_leave_the_overlap_policy_its_run,
    an_outage_longer_than_a_look_fires_the_newest_missed_ticks,
);

fn ms(t: &str) -> Timestamp {
    let parsed = chrono::DateTime::parse_from_rfc3339(t).unwrap();
    Timestamp(parsed.timestamp_millis())
}

async fn fires(client: &Client, name: &str) -> Vec<FireRecord> {
    let mut f = client
        .schedule_fires(name, Timestamp(i64::MIN), Timestamp(i64::MAX), 1000)
        .await
        .unwrap();
    f.reverse();
    f
}

/// The fires of `name` that started a run, oldest first.
async fn runs(client: &Client, name: &str) -> Vec<FireRecord> {
    fires(client, name)
        .await
        .into_iter()
        .filter(|f| f.run.is_some())
        .collect()
}

async fn slow(ctx: OrchestrationContext, ms: u64) -> Result<(), OrchestrationError> {
    ctx.sleep(Duration::from_millis(ms)).await?;
    Ok(())
}

/// Five schedules every second, one per overlap policy, each starting a workflow that runs
/// 2.5 s: skip and buffer_one never run two at once, allow_all starts every tick, and
/// cancel_previous and terminate_previous stop each run for the next.
async fn overlap_policies_decide_what_a_tick_does_while_its_run_still_runs(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.orchestration("slow", slow)).await;
    let c = r.client();
    let policies = [
        Overlap::Skip,
        Overlap::BufferOne,
        Overlap::AllowAll,
        Overlap::CancelPrevious,
        Overlap::TerminatePrevious,
    ];
    for policy in policies {
        let options = ScheduleOptions::start("every 1s", "slow", 2_500)
            .unwrap()
            .overlap(policy);
        c.schedule_create(policy.as_str(), options).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(5_600)).await;
    for policy in policies {
        c.schedule_pause(policy.as_str(), "the test has seen enough")
            .await
            .unwrap();
    }
    // A pause is no stop: let the last runs settle.
    tokio::time::sleep(Duration::from_millis(3_000)).await;
    for policy in policies {
        let name = policy.as_str();
        let all = fires(c, name).await;
        let started = runs(c, name).await;
        let mut spans = Vec::new();
        for f in &started {
            let i = c.status(f.run.as_deref().unwrap()).await.unwrap();
            spans.push((
                i.created_at,
                i.finished_at.unwrap_or(Timestamp(i64::MAX)),
                i.status,
            ));
        }
        let overlapped = spans.windows(2).any(|w| w[1].0 < w[0].1);
        let ticks: Vec<i64> = all.iter().map(|f| f.nominal.0).collect();
        let mut unique = ticks.clone();
        unique.dedup();
        assert_eq!(ticks, unique, "{name}: each tick handled once: {all:?}");
        assert!(all.len() >= 4, "{name}: about five ticks: {all:?}");
        match policy {
            Overlap::Skip => {
                assert!(!overlapped, "skip: never two at once: {spans:?}");
                assert!(
                    all.iter()
                        .any(|f| f.skipped.as_deref() == Some("the previous run is still running")),
                    "skip: a tick was skipped: {all:?}"
                );
            }
            Overlap::BufferOne => {
                assert!(!overlapped, "buffer_one: never two at once: {spans:?}");
                assert!(
                    started.iter().any(|f| f.actual.0 - f.nominal.0 >= 1_000),
                    "buffer_one: a buffered tick ran once the run before it ended: {started:?}"
                );
            }
            Overlap::AllowAll => {
                assert_eq!(started.len(), all.len(), "allow_all: every tick runs");
                assert!(overlapped, "allow_all: runs overlap: {spans:?}");
            }
            Overlap::CancelPrevious | Overlap::TerminatePrevious => {
                let stopped = if policy == Overlap::CancelPrevious {
                    InstanceStatus::Cancelled
                } else {
                    InstanceStatus::Terminated
                };
                let (last, earlier) = spans.split_last().unwrap();
                assert!(!earlier.is_empty(), "{name}: several runs: {spans:?}");
                for s in earlier {
                    assert_eq!(
                        s.2, stopped,
                        "{name}: each run stopped for the next: {spans:?}"
                    );
                }
                assert_ne!(last.2, stopped, "{name}: the last run is left alone");
            }
        }
    }
    r.shutdown().await;
}

/// A paused schedule fires nothing; resumed, it goes on from its next tick and counts the
/// ticks it let pass. A schedule with two actions left starts two runs and stops.
async fn pause_resume_and_remaining_actions(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.orchestration("slow", slow)).await;
    let c = r.client();
    c.schedule_create(
        "ticking",
        ScheduleOptions::start("every 1s", "slow", 0)
            .unwrap()
            .overlap(Overlap::AllowAll),
    )
    .await
    .unwrap();
    c.schedule_create(
        "twice",
        ScheduleOptions::start("every 1s", "slow", 0)
            .unwrap()
            .overlap(Overlap::AllowAll)
            .remaining_actions(2),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let paused = c.schedule_pause("ticking", "maintenance").await.unwrap();
    assert!(paused.paused);
    assert_eq!(paused.note.as_deref(), Some("maintenance"));
    let before = fires(c, "ticking").await.len();
    assert!(before >= 1, "it fired before the pause");
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(
        fires(c, "ticking").await.len(),
        before,
        "nothing fires while paused"
    );
    let described = c.schedule_describe("ticking", 3, 10).await.unwrap();
    assert!(
        described.upcoming.is_empty(),
        "no upcoming ticks while paused"
    );
    let resumed = c.schedule_resume("ticking").await.unwrap();
    assert!(!resumed.paused);
    assert!(
        resumed.missed >= 2,
        "the ticks of the pause are counted: {resumed:?}"
    );
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let after = fires(c, "ticking").await;
    assert!(after.len() > before, "it fires again once resumed");
    let described = c.schedule_describe("ticking", 3, 10).await.unwrap();
    assert_eq!(described.upcoming.len(), 3);
    assert!(described
        .upcoming
        .windows(2)
        .all(|w| w[1].0 - w[0].0 == 1_000));
    let twice = c.schedule("twice").await.unwrap();
    assert_eq!(runs(c, "twice").await.len(), 2, "two actions, two runs");
    assert_eq!((twice.remaining, twice.next_fire_at), (Some(0), None));
    r.shutdown().await;
}

/// A manual fire of a paused schedule enqueues its task at once; the task's metadata names
/// the schedule and tick, and the schedule's description shows the run's outcome.
async fn trigger_now_enqueues_a_task_that_knows_its_schedule(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.task("report", |_ctx: TaskContext, n: u32| async move {
            Ok::<_, TaskError>(n * 2)
        })
    })
    .await;
    let c = r.client();
    let options = ScheduleOptions::enqueue(
        "0 3 * * *",
        "report",
        21,
        TaskOptions::default().metadata(serde_json::json!({"team": "data"})),
    )
    .unwrap()
    .time_zone("Europe/Paris")
    .paused("only by hand");
    c.schedule_create("nightly-report", options).await.unwrap();
    let fire = c.schedule_trigger_now("nightly-report").await.unwrap();
    assert_eq!(fire.kind, FireKind::Manual);
    let id: i64 = fire.run.as_deref().unwrap().parse().unwrap();
    let task = c
        .task_wait(ratchet::TaskId(id), crate::harness::WAIT)
        .await
        .unwrap();
    assert_eq!(task.output, Some(serde_json::json!(42)));
    let metadata = task.metadata.unwrap();
    assert_eq!(metadata["team"], "data");
    assert_eq!(metadata["ratchet_schedule"]["schedule"], "nightly-report");
    let described = c.schedule_describe("nightly-report", 2, 5).await.unwrap();
    assert_eq!(described.recent.len(), 1);
    assert_eq!(described.recent[0].status.as_deref(), Some("Completed"));
    assert_eq!(
        described.schedule.running.as_deref(),
        Some(id.to_string().as_str())
    );
    r.shutdown().await;
}

/// Backfill fires each tick of the range once, the spring-forward day's once at the change
/// and the fall-back day's once, in Paris and New York; a second backfill fires nothing.
async fn backfill_fires_each_missed_tick_once_across_daylight_saving_changes(
    store: Arc<dyn Store>,
) {
    // No runtime: backfill writes the runs; nothing needs to run them here.
    let c = Client::new(store);
    for (name, zone, cron) in [
        ("paris", "Europe/Paris", "30 2 * * *"),
        ("new-york", "America/New_York", "30 1,2 * * *"),
    ] {
        let options = ScheduleOptions::start(cron, "report", ())
            .unwrap()
            .time_zone(zone)
            .start_at(ms("2025-01-01T00:00:00Z"))
            .catch_up(CatchUp::Skip);
        c.schedule_create(name, options).await.unwrap();
    }
    let backfill = |name: &'static str, from: &'static str, to: &'static str| {
        let c = c.clone();
        async move {
            let mut ticks: Vec<String> = c
                .schedule_backfill(name, ms(from), ms(to))
                .await
                .unwrap()
                .into_iter()
                .map(|f| {
                    assert_eq!(f.kind, FireKind::Backfill);
                    f.run.unwrap()
                })
                .collect();
            ticks.sort();
            ticks
        }
    };
    // Paris springs forward on 30 March 2025 (02:00 becomes 03:00: 02:30 does not exist)
    // and falls back on 26 October (03:00 becomes 02:00: 02:30 comes twice).
    assert_eq!(
        backfill("paris", "2025-03-29T00:00:00Z", "2025-03-31T23:00:00Z").await,
        [
            "paris@2025-03-29T01:30:00Z",
            "paris@2025-03-30T01:00:00Z",
            "paris@2025-03-31T00:30:00Z"
        ]
    );
    assert_eq!(
        backfill("paris", "2025-10-25T00:00:00Z", "2025-10-27T23:00:00Z").await,
        [
            "paris@2025-10-25T00:30:00Z",
            "paris@2025-10-26T00:30:00Z",
            "paris@2025-10-27T01:30:00Z"
        ]
    );
    // New York springs forward on 9 March 2025 (02:30 does not exist) and falls back on
    // 2 November (01:30 comes twice).
    assert_eq!(
        backfill("new-york", "2025-03-09T00:00:00Z", "2025-03-09T23:00:00Z").await,
        [
            "new-york@2025-03-09T06:30:00Z",
            "new-york@2025-03-09T07:00:00Z"
        ]
    );
    assert_eq!(
        backfill("new-york", "2025-11-02T00:00:00Z", "2025-11-02T23:00:00Z").await,
        [
            "new-york@2025-11-02T05:30:00Z",
            "new-york@2025-11-02T07:30:00Z"
        ]
    );
    assert!(
        backfill("paris", "2025-03-01T00:00:00Z", "2025-03-31T23:00:00Z")
            .await
            .len()
            == 28,
        "the rest of March, and nothing twice"
    );
    assert!(
        backfill("paris", "2025-03-29T00:00:00Z", "2025-03-31T23:00:00Z")
            .await
            .is_empty(),
        "a second backfill fires nothing"
    );
    let run = c.status("paris@2025-03-30T01:00:00Z").await.unwrap();
    assert_eq!(run.name, "report");
    let future = c
        .schedule_backfill(
            "paris",
            ms("2030-01-01T00:00:00Z"),
            ms("2030-02-01T00:00:00Z"),
        )
        .await
        .unwrap();
    assert!(
        future.is_empty(),
        "ticks to come are the schedule's own to fire"
    );
    let err = c
        .schedule_backfill(
            "paris",
            ms("2025-03-02T00:00:00Z"),
            ms("2025-03-01T00:00:00Z"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::InvalidSchedule { ref field, .. } if field == "range"),
        "{err}"
    );
}

/// Bad specs, zones, windows and names are refused with the field at fault, and nothing is
/// written; an unknown schedule is named as such.
async fn bad_schedules_are_refused_naming_the_field(store: Arc<dyn Store>) {
    let c = Client::new(store);
    let ok = || ScheduleOptions::start("every 1m", "report", ()).unwrap();
    let cases = [
        (
            "a",
            ScheduleOptions {
                spec: "every 0s".into(),
                ..ok()
            },
            "spec",
        ),
        (
            "a",
            ScheduleOptions {
                spec: "61 * * * *".into(),
                ..ok()
            },
            "spec",
        ),
        (
            "a",
            ScheduleOptions {
                spec: "0 0 30 2 *".into(),
                ..ok()
            },
            "spec",
        ),
        ("a", ok().time_zone("Mars/Olympus_Mons"), "time_zone"),
        (
            "a",
            ok().start_at(Timestamp(2_000)).end_at(Timestamp(1_000)),
            "end",
        ),
        ("a", ok().jitter(Duration::from_secs(90_000)), "jitter"),
        ("", ok(), "name"),
        (
            "a",
            ScheduleOptions::enqueue(
                "every 1m",
                "t",
                (),
                TaskOptions::default().queue("$reserved"),
            )
            .unwrap(),
            "action",
        ),
    ];
    for (name, options, field) in cases {
        let err = c.schedule_create(name, options.clone()).await.unwrap_err();
        match &err {
            Error::InvalidSchedule { field: f, message } => {
                assert_eq!(f, field, "{options:?}: {message}");
                assert!(!message.is_empty());
            }
            other => panic!("{options:?}: expected a refusal on {field}, got {other}"),
        }
    }
    assert!(
        c.schedules().await.unwrap().is_empty(),
        "nothing was written"
    );
    c.schedule_create("a", ok()).await.unwrap();
    assert!(matches!(
        c.schedule_create("a", ok()).await,
        Err(Error::ScheduleExists(_))
    ));
    for err in [
        c.schedule_pause("nope", "").await.map(|_| ()).unwrap_err(),
        c.schedule_trigger_now("nope")
            .await
            .map(|_| ())
            .unwrap_err(),
        c.schedule_delete("nope").await.unwrap_err(),
        c.schedule_describe("nope", 1, 1)
            .await
            .map(|_| ())
            .unwrap_err(),
    ] {
        assert!(
            matches!(err, Error::ScheduleNotFound(ref n) if n == "nope"),
            "{err}"
        );
    }
    c.schedule_delete("a").await.unwrap();
    assert!(c.schedules().await.unwrap().is_empty());
}

const REPORT: &str = r#"
document: {dsl: '1.0.0', namespace: ops, name: report, version: '1.0.0'}
schedule:
  after: PT1S
do:
  - pause:
      wait: PT0.3S
  - done:
      set: {ok: true}
"#;

/// A definition's own `schedule` becomes a schedule named after it when applied: with
/// `after`, each run starts a second after the one before ended, never two at once; a new
/// version with `every` changes its spec and keeps the rest.
async fn a_definitions_own_schedule_starts_it_after_each_run(store: Arc<dyn Store>) {
    use ratchet::workflow::{self, Known, ScheduleSync, Workflow};
    let compiled = Workflow::compile(REPORT).unwrap();
    let r = start(&store, |b| b.workflow(compiled, 1)).await;
    let c = r.client();
    let applied = workflow::apply(store.as_ref(), REPORT, &Known::default(), Timestamp::now())
        .await
        .unwrap();
    let created = match workflow::sync_schedule(c, &applied.workflow).await.unwrap() {
        ScheduleSync::Created(s) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        (created.name.as_str(), created.spec.as_str()),
        ("ops/report", "after 1s")
    );
    assert!(matches!(
        workflow::sync_schedule(c, &applied.workflow).await.unwrap(),
        ScheduleSync::Unchanged(_)
    ));
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    c.schedule_pause("ops/report", "seen enough").await.unwrap();
    let started = runs(c, "ops/report").await;
    assert!(started.len() >= 2, "runs follow each other: {started:?}");
    for pair in started.windows(2) {
        let before = c
            .wait(pair[0].run.as_deref().unwrap(), crate::harness::WAIT)
            .await
            .unwrap();
        let ended = c.status(&before.id).await.unwrap().finished_at.unwrap();
        assert!(
            pair[1].nominal.0 >= ended.0 + 1_000,
            "the next run starts a second after the last ended: {pair:?}, ended at {ended:?}"
        );
    }
    let every = REPORT
        .replace("version: '1.0.0'", "version: '1.1.0'")
        .replace("after: PT1S", "every: PT2S");
    let applied = workflow::apply(store.as_ref(), &every, &Known::default(), Timestamp::now())
        .await
        .unwrap();
    let updated = match workflow::sync_schedule(c, &applied.workflow).await.unwrap() {
        ScheduleSync::Updated(s) => s,
        other => panic!("{other:?}"),
    };
    assert_eq!(updated.spec, "every 2s");
    assert!(updated.paused, "a pause made by hand stays");
    r.shutdown().await;
}

/// Two runtimes whose host clocks are 30 s behind and 20 s ahead fire the same schedule:
/// each tick once, on the database's time (neither 20 s early nor 30 s late).
async fn hosts_whose_clocks_are_wrong_fire_each_tick_once_and_on_time(store: Arc<dyn Store>) {
    let skewed = |skew_ms: i64| {
        ratchet::Clock::with_local(Arc::new(move || Timestamp(Timestamp::now().0 + skew_ms)))
    };
    let behind = start(&store, |b| {
        b.clock(skewed(-30_000)).orchestration("slow", slow)
    })
    .await;
    let ahead = start(&store, |b| {
        b.clock(skewed(20_000)).orchestration("slow", slow)
    })
    .await;
    let c = Client::new(store.clone());
    c.schedule_create(
        "skewed",
        ScheduleOptions::start("every 1s", "slow", 0)
            .unwrap()
            .overlap(Overlap::AllowAll),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    c.schedule_pause("skewed", "").await.unwrap();
    let all = fires(&c, "skewed").await;
    assert!(all.len() >= 2, "{all:?}");
    for pair in all.windows(2) {
        assert_eq!(
            pair[1].nominal.0 - pair[0].nominal.0,
            1_000,
            "every tick once: {all:?}"
        );
    }
    for f in &all {
        let late = f.actual.0 - f.nominal.0;
        // Not early by the 20 s one host is ahead, nor late by the 30 s the other is behind
        // (how late exactly is the benchmark's to say, not a test's on a busy machine).
        assert!(
            (0..10_000).contains(&late),
            "fired on the database's time: {f:?}"
        );
    }
    behind.shutdown().await;
    ahead.shutdown().await;
}

/// Every task of every queue, by state counts.
async fn tasks_in_all(c: &Client) -> u64 {
    c.queues()
        .await
        .unwrap()
        .iter()
        .map(|q| TaskState::ALL.iter().map(|s| q.count(*s)).sum::<u64>())
        .sum()
}

/// A backfill of 1,500 ticks of a schedule that enqueues a task fires each once, though the
/// schedule keeps the records of 1,000: running it again enqueues nothing (it enqueued the
/// 500 whose records were dropped a second time).
async fn a_backfill_longer_than_the_records_kept_fires_each_tick_once(store: Arc<dyn Store>) {
    let c = Client::new(store);
    let options = ScheduleOptions::enqueue("every 1m", "report", (), TaskOptions::default())
        .unwrap()
        .paused("by hand only");
    let created = c.schedule_create("minutely", options).await.unwrap();
    let last = Timestamp(created.created_at.0 / 60_000 * 60_000);
    let first = Timestamp(last.0 - 1_499 * 60_000);
    let fired = c.schedule_backfill("minutely", first, last).await.unwrap();
    assert_eq!(fired.len(), 1_500);
    assert_eq!(tasks_in_all(&c).await, 1_500);
    let again = c.schedule_backfill("minutely", first, last).await.unwrap();
    assert!(again.is_empty(), "nothing fires twice: {} did", again.len());
    assert_eq!(tasks_in_all(&c).await, 1_500, "no task enqueued twice");
    let settled = c.schedule("minutely").await.unwrap().settled_through;
    assert_eq!(
        settled,
        Some(Timestamp(first.0 + 499 * 60_000)),
        "the ticks whose records were dropped are settled"
    );
    // A part of the range, or more of it: still nothing twice.
    let part = c
        .schedule_backfill("minutely", Timestamp(first.0 + 100 * 60_000), last)
        .await
        .unwrap();
    assert!(part.is_empty());
    assert_eq!(tasks_in_all(&c).await, 1_500);
}

/// The run an overlap policy watches stays the schedule's own: a manual run started while
/// it goes does not take its place, nor does a backfill, so the next tick is still skipped
/// while it runs; once it has finished, a manual run does take its place.
async fn manual_and_backfilled_runs_leave_the_overlap_policy_its_run(store: Arc<dyn Store>) {
    // No runtime: every run stays Pending (going) until it is terminated here.
    let c = Client::new(store.clone());
    let created = c
        .schedule_create(
            "watched",
            ScheduleOptions::start("every 1m", "report", ())
                .unwrap()
                .paused("by hand only"),
        )
        .await
        .unwrap();
    c.start_with("report", (), StartOptions::id("watched@own"))
        .await
        .unwrap();
    let r = c.schedule("watched").await.unwrap();
    let own = ScheduleRecord {
        running: Some("watched@own".into()),
        ..r.clone()
    };
    assert!(store.schedule_put(own, Some(r.version)).await.unwrap());
    let manual = c.schedule_trigger_now("watched").await.unwrap();
    let backfilled = c
        .schedule_backfill(
            "watched",
            Timestamp(created.created_at.0 - 180_000),
            created.created_at,
        )
        .await
        .unwrap();
    assert_eq!(backfilled.len(), 3);
    assert_eq!(
        c.schedule("watched").await.unwrap().running.as_deref(),
        Some("watched@own"),
        "the policy still watches the run that goes on"
    );
    // Those runs end; the watched one does not: it is still the one watched.
    for run in backfilled.iter().chain([&manual]) {
        c.terminate(run.run.as_deref().unwrap(), "done")
            .await
            .unwrap();
    }
    assert_eq!(
        c.schedule("watched").await.unwrap().running.as_deref(),
        Some("watched@own")
    );
    // Once it has ended, a manual run is the one watched.
    c.terminate("watched@own", "done").await.unwrap();
    let manual = c.schedule_trigger_now("watched").await.unwrap();
    assert_eq!(
        c.schedule("watched").await.unwrap().running,
        manual.run,
        "a manual run started while none goes is watched"
    );
}

/// A schedule every second whose processes were all down for 2,500 ticks fires, with
/// `last 2`, the two newest of the ticks it missed (and those still on time), not the
/// newest of each 1,000 it looks at.
async fn an_outage_longer_than_a_look_fires_the_newest_missed_ticks(store: Arc<dyn Store>) {
    let c = Client::new(store.clone());
    let options = ScheduleOptions::start("every 1s", "slow", 0)
        .unwrap()
        .overlap(Overlap::AllowAll)
        .catch_up(CatchUp::Last(2));
    let created = c.schedule_create("outage", options).await.unwrap();
    // Its last tick handled, 2,500 s before: every process was down since.
    let down = Timestamp(created.created_at.0 / 1_000 * 1_000 - 2_500_000);
    let before = ScheduleRecord {
        last_tick: Some(down),
        next_fire_at: Some(Timestamp(down.0 + 1_000)),
        ..created.clone()
    };
    assert!(store.schedule_put(before, Some(1)).await.unwrap());
    let back = Timestamp::now();
    let r = start(&store, |b| b.orchestration("slow", slow)).await;
    let deadline = tokio::time::Instant::now() + crate::harness::WAIT;
    while c.schedule("outage").await.unwrap().last_tick < Some(back) {
        assert!(tokio::time::Instant::now() < deadline, "never caught up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.schedule_pause("outage", "seen enough").await.unwrap();
    r.shutdown().await;
    // Late beyond the grace of 5 s when fired: missed ticks caught up.
    let missed: Vec<FireRecord> = runs(&c, "outage")
        .await
        .into_iter()
        .filter(|f| f.actual.0 - f.nominal.0 > 5_000)
        .collect();
    assert_eq!(missed.len(), 2, "the two newest missed: {missed:?}");
    assert!(
        missed.iter().all(|f| f.actual.0 - f.nominal.0 <= 10_000),
        "none from the start of the outage: {missed:?}"
    );
    let after = c.schedule("outage").await.unwrap();
    assert!(
        after.missed >= 2_480,
        "the rest counted as missed: {}",
        after.missed
    );
}
