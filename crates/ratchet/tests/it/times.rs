//! Times at the edge, on each backend: every time and duration a caller gives is refused past
//! its limit (the calendar's years 1 to 9999, durations of 100 years), naming the field, and
//! writes nothing; arithmetic on times a caller could not refuse (a retry's backoff) stays in
//! the calendar.

use std::sync::Arc;
use std::time::Duration;

use ratchet::{
    CatchUp, Client, Error, RetryPolicy, ScheduleOptions, Store, TaskContext, TaskError,
    TaskFilter, TaskOptions, TaskState, Timestamp,
};
use ratchet_core::limits::{MAX_DURATION, MAX_TIME_MS};

use crate::harness::{start, WAIT};

crate::on_every_backend!(
    times_and_durations_past_their_limits_are_refused_naming_the_field,
    a_retry_after_the_longest_backoff_stays_in_the_calendar,
);

fn ms(t: &str) -> Timestamp {
    let parsed = chrono::DateTime::parse_from_rfc3339(t).unwrap();
    Timestamp(parsed.timestamp_millis())
}

fn field_of(err: &Error) -> String {
    match err {
        Error::Limit(e) => e.field.clone(),
        Error::InvalidSchedule { field, .. } => field.clone(),
        other => panic!("expected a refusal naming a field, got {other}"),
    }
}

/// The reproductions of issue 33 (a delay of 260,000,000,000,000 ms, retry intervals at the
/// largest integer, a schedule starting 9999-12-31T23:30Z every hour) and their kin.
async fn times_and_durations_past_their_limits_are_refused_naming_the_field(store: Arc<dyn Store>) {
    let c = Client::new(store);
    let over = u64::try_from(MAX_DURATION.as_millis()).unwrap() + 1;
    let task_cases = [
        (
            TaskOptions {
                delay_ms: 260_000_000_000_000,
                ..TaskOptions::default()
            },
            "options.delay_ms",
        ),
        (
            TaskOptions::default().run_at(Timestamp(MAX_TIME_MS + 1)),
            "options.run_at",
        ),
        (
            TaskOptions::default().run_at(Timestamp(i64::MIN)),
            "options.run_at",
        ),
        (
            TaskOptions::default().retry(RetryPolicy {
                initial_interval_ms: u64::MAX,
                max_interval_ms: u64::MAX,
                ..RetryPolicy::default()
            }),
            "options.retry.initial_interval_ms",
        ),
        (
            TaskOptions::default().retry(RetryPolicy {
                max_interval_ms: over,
                ..RetryPolicy::default()
            }),
            "options.retry.max_interval_ms",
        ),
        (
            TaskOptions {
                timeout_ms: over,
                ..TaskOptions::default()
            },
            "options.timeout_ms",
        ),
    ];
    for (options, field) in task_cases {
        let err = c.enqueue_with("work", (), options).await.unwrap_err();
        assert_eq!(field_of(&err), field, "{err}");
        assert!(err.to_string().contains(field), "{err}");
    }
    assert!(
        c.tasks(TaskFilter::default()).await.unwrap().is_empty(),
        "nothing was enqueued"
    );
    // At the limit is fine.
    c.enqueue_with(
        "work",
        (),
        TaskOptions::default()
            .delay(MAX_DURATION)
            .run_at(Timestamp(MAX_TIME_MS)),
    )
    .await
    .unwrap();

    let hourly = || ScheduleOptions::start("every 1h", "report", ()).unwrap();
    let schedule_cases = [
        (hourly().start_at(ms("9999-12-31T23:30:00Z")), "start_at"),
        (
            ScheduleOptions::start("0 * * * *", "report", ())
                .unwrap()
                .start_at(ms("9999-12-31T23:30:00Z")),
            "start_at",
        ),
        (hourly().start_at(Timestamp(i64::MAX)), "start_at"),
        (hourly().end_at(Timestamp(MAX_TIME_MS + 1)), "end_at"),
        (
            ScheduleOptions {
                spec: "every 36526d".into(),
                ..hourly()
            },
            "spec",
        ),
        (
            ScheduleOptions {
                spec: "after 99999999d".into(),
                ..hourly()
            },
            "spec",
        ),
        (hourly().catch_up(CatchUp::Last(10_001)), "catch_up"),
        (
            hourly().catch_up(CatchUp::Within(MAX_DURATION + Duration::from_secs(1))),
            "catch_up",
        ),
        (
            ScheduleOptions::enqueue(
                "every 1h",
                "work",
                (),
                TaskOptions {
                    delay_ms: 260_000_000_000_000,
                    ..TaskOptions::default()
                },
            )
            .unwrap(),
            "options.delay_ms",
        ),
    ];
    for (options, field) in schedule_cases {
        let err = c
            .schedule_create("edge", options.clone())
            .await
            .unwrap_err();
        assert_eq!(field_of(&err), field, "{options:?}: {err}");
    }
    assert!(
        c.schedules().await.unwrap().is_empty(),
        "nothing was written"
    );
    // A schedule whose last tick is the calendar's last hour has no next one.
    let last = c
        .schedule_create("last", hourly().start_at(ms("9999-12-31T23:00:00Z")))
        .await
        .unwrap();
    assert_eq!(last.next_fire_at, Some(ms("9999-12-31T23:00:00Z")));
    let described = c.schedule_describe("last", 5, 5).await.unwrap();
    assert_eq!(described.upcoming, vec![ms("9999-12-31T23:00:00Z")]);
    for (from, to, field) in [
        (Timestamp(0), Timestamp(i64::MAX), "to"),
        (Timestamp(i64::MIN), Timestamp(0), "from"),
    ] {
        let err = c.schedule_backfill("last", from, to).await.unwrap_err();
        assert_eq!(field_of(&err), field, "{err}");
    }
}

/// A retry after a backoff the client could not refuse (a task written by an older version
/// with intervals of 2^64 ms) is due at the end of the calendar, not past it.
async fn a_retry_after_the_longest_backoff_stays_in_the_calendar(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.task("fails", |_ctx: TaskContext, _: ()| async move {
            Err::<(), _>(TaskError::new("Flaky", "once more"))
        })
    })
    .await;
    let options = TaskOptions::default().retry(RetryPolicy {
        max_attempts: 2,
        initial_interval_ms: u64::MAX,
        max_interval_ms: u64::MAX,
        backoff: 2.0,
        non_retryable: Vec::new(),
        jitter: 0.5,
    });
    let now = Timestamp::now();
    let task =
        ratchet_store::NewTask::standalone("fails".into(), serde_json::json!(null), &options, now);
    let id = store
        .task_enqueue(vec![task], now)
        .await
        .unwrap()
        .pop()
        .unwrap()
        .id();
    let c = r.client();
    let deadline = tokio::time::Instant::now() + WAIT;
    let retried = loop {
        let t = c.task(id).await.unwrap();
        if t.error.is_some() && t.state != TaskState::Running {
            break t;
        }
        assert!(tokio::time::Instant::now() < deadline, "no retry: {t:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(retried.state, TaskState::Retrying, "{retried:?}");
    assert_eq!(
        retried.visible_at,
        Timestamp(MAX_TIME_MS),
        "due at the end of the calendar"
    );
    r.shutdown().await;
}
