//! Times at the edge over HTTP (issue 33, item 7): a time past 9999-12-31 is refused with a
//! problem naming its field and nothing is written; a row holding one anyway (written by an
//! older version, or straight into the database) still lists, its times shown as the end of
//! the calendar, on both backends, over HTTP and in the CLI.

use ratchet::{
    FireKind, RetryPolicy, ScheduleAction, ScheduleRecord, Store, TaskOptions, Timestamp,
};
use ratchet_store::{NewFire, NewTask, ScheduleFiring};
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::common::{run, text};
use super::{get, post, Server};

/// The last millisecond of the calendar, as the API shows it.
const LAST: &str = "9999-12-31T23:59:59.999Z";

async fn refused(server: &Server, path: &str, body: Value, field: &str) {
    let (status, problem) = post(server, path, body.clone()).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{body}: {problem}"
    );
    assert_eq!(problem["field"], field, "{body}: {problem}");
}

/// The reproductions of the issue: each used to be accepted (the schedule with no answer
/// at all) and then took every listing down.
async fn times_past_the_calendar_are_refused(server: &Server) {
    refused(
        server,
        "/v1/tasks",
        json!({"name": "work", "input": {"ms": 1}, "options": {"delay_ms": 260_000_000_000_000_u64}}),
        "options.delay_ms",
    )
    .await;
    refused(
        server,
        "/v1/tasks",
        json!({"name": "work", "input": {"ms": 1}, "options": {"retry": {
            "initial_interval_ms": u64::MAX, "max_interval_ms": u64::MAX}}}),
        "options.retry.initial_interval_ms",
    )
    .await;
    refused(
        server,
        "/v1/tasks/batch",
        json!({"tasks": [{"name": "work", "input": {"ms": 1}},
                         {"name": "work", "input": {"ms": 1}, "options": {"timeout_ms": u64::MAX}}]}),
        "tasks[1].options.timeout_ms",
    )
    .await;
    refused(
        server,
        "/v1/schedules",
        json!({"name": "late", "spec": "every 1h", "workflow": "fanout",
               "start_at": "9999-12-31T23:30:00Z"}),
        "start_at",
    )
    .await;
    refused(
        server,
        "/v1/schedules",
        json!({"name": "late", "spec": "every 1h", "task": "work",
               "options": {"delay_ms": 260_000_000_000_000_u64}}),
        "options.delay_ms",
    )
    .await;
    let (status, tasks) = get(server, "/v1/tasks").await;
    assert_eq!(status, StatusCode::OK, "{tasks}");
    assert_eq!(tasks, json!([]), "nothing was enqueued");
    let (status, schedules) = get(server, "/v1/schedules").await;
    assert_eq!(status, StatusCode::OK, "{schedules}");
    assert_eq!(schedules, json!([]), "nothing was written: {schedules}");
}

/// A task, a schedule and a fire record whose times lie past the calendar (and one before
/// it), written through the store as an older version or a hand-made row would be.
async fn write_rows_past_the_calendar(store: &dyn Store) -> i64 {
    let far = Timestamp(i64::MAX);
    let options = TaskOptions::default().retry(RetryPolicy {
        initial_interval_ms: u64::MAX,
        max_interval_ms: u64::MAX,
        ..RetryPolicy::default()
    });
    let mut task = NewTask::standalone("work".into(), json!({"ms": 1}), &options, far);
    task.visible_at = far;
    let id = store
        .task_enqueue(vec![task], far)
        .await
        .unwrap()
        .pop()
        .unwrap()
        .id()
        .0;
    let schedule = ScheduleRecord {
        name: "far".into(),
        spec: "every 1h".into(),
        time_zone: "UTC".into(),
        action: ScheduleAction::Start {
            workflow: "fanout".into(),
            input: json!({}),
        },
        overlap: "skip".into(),
        catch_up: "last 1".into(),
        jitter_ms: 0,
        paused: false,
        note: None,
        start_at: Some(far),
        end_at: Some(far),
        remaining: None,
        last_tick: Some(far),
        next_fire_at: Some(far),
        running: None,
        buffered: Some(Timestamp(i64::MIN)),
        missed: 0,
        settled_through: None,
        version: 0,
        created_at: far,
        updated_at: far,
    };
    assert!(store.schedule_put(schedule.clone(), None).await.unwrap());
    let fired = store
        .schedule_fire(ScheduleFiring {
            schedule: schedule.clone(),
            expect_version: 1,
            fires: vec![NewFire {
                nominal: Timestamp(i64::MIN),
                kind: FireKind::Scheduled,
                run: None,
                skipped: Some("made by hand".into()),
            }],
            now: far,
            watch: true,
            stop: None,
        })
        .await
        .unwrap();
    assert!(fired.is_some());
    id
}

async fn rows_past_the_calendar_still_list(server: &Server, store: &dyn Store, args: &[String]) {
    let id = write_rows_past_the_calendar(store).await;
    let (status, tasks) = get(server, "/v1/tasks").await;
    assert_eq!(status, StatusCode::OK, "{tasks}");
    let listed = &tasks[0];
    assert_eq!(listed["id"], id, "{tasks}");
    assert_eq!(
        (&listed["run_at"], &listed["created_at"]),
        (&json!(LAST), &json!(LAST))
    );
    let (status, task) = get(server, &format!("/v1/tasks/{id}")).await;
    assert_eq!((status, &task["run_at"]), (StatusCode::OK, &json!(LAST)));
    let (status, schedules) = get(server, "/v1/schedules").await;
    assert_eq!(status, StatusCode::OK, "{schedules}");
    assert_eq!(schedules[0]["next_fire_at"], LAST, "{schedules}");
    assert_eq!(schedules[0]["buffered"], "0001-01-01T00:00:00.000Z");
    let (status, described) = get(server, "/v1/schedules/far").await;
    assert_eq!(status, StatusCode::OK, "{described}");
    assert_eq!(
        described["upcoming"],
        json!([]),
        "no tick after the calendar"
    );
    assert_eq!(described["recent"][0]["tick"], "0001-01-01T00:00:00.000Z");
    // The CLI on the same database prints them too.
    for command in [
        &["tasks", "list", "--json"][..],
        &["tasks", "show", &id.to_string(), "--json"],
        &["schedules", "list", "--json"],
        &["schedules", "describe", "far", "--json"],
    ] {
        let out = run(args, command);
        assert!(out.status.success(), "{command:?}: {}", text(&out));
        assert!(
            text(&out).contains("9999-12-31T23:59:59"),
            "{command:?}: {}",
            text(&out)
        );
    }
}

async fn times_at_the_edge(args: &[String], store: &dyn Store) {
    let mut server = Server::start(args, &[]);
    times_past_the_calendar_are_refused(&server).await;
    rows_past_the_calendar_still_list(&server, store, args).await;
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_at_the_edge_on_sqlite() {
    let (args, store, _dir) = super::common::sqlite().await;
    times_at_the_edge(&args, store.as_ref()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_at_the_edge_on_postgres() {
    let Some((args, store)) = super::common::postgres().await else {
        return;
    };
    times_at_the_edge(&args, store.as_ref()).await;
}
