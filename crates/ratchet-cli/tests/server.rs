//! `ratchet server` as a real process, driven over HTTP on SQLite and on PostgreSQL: every
//! route, problem+json for each kind of bad input with nothing written, the long-poll wait,
//! the event stream resuming after a dropped connection, two servers on one database, and a
//! graceful stop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "server/hostile.rs"]
mod hostile;
#[path = "server/remote_workers.rs"]
mod remote_workers;
#[path = "server/times.rs"]
mod times;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{json, Value};

use common::Server;

fn http() -> reqwest::Client {
    reqwest::Client::new()
}

async fn post(server: &Server, path: &str, body: Value) -> (StatusCode, Value) {
    let response = http()
        .post(server.url(path))
        .json(&body)
        .send()
        .await
        .expect("request");
    answer(response).await
}

async fn get(server: &Server, path: &str) -> (StatusCode, Value) {
    answer(http().get(server.url(path)).send().await.expect("request")).await
}

async fn delete(server: &Server, path: &str) -> (StatusCode, Value) {
    answer(
        http()
            .delete(server.url(path))
            .send()
            .await
            .expect("request"),
    )
    .await
}

async fn answer(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let problem = response.headers().get("content-type").is_some_and(|v| {
        v.to_str()
            .unwrap_or("")
            .starts_with("application/problem+json")
    });
    let text = response.text().await.expect("body");
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if status.is_client_error() || status.is_server_error() {
        assert!(problem, "an error is problem+json: {status} {value}");
        assert_eq!(value["status"], status.as_u16(), "{value}");
        assert!(
            value["type"]
                .as_str()
                .is_some_and(|t| t.starts_with("urn:ratchet:problem:")),
            "{value}"
        );
    }
    (status, value)
}

fn order(id: &str) -> Value {
    json!({"name": "order", "id": id,
           "input": {"id": id, "items": ["book"], "amount_cents": 100, "step_ms": 0}})
}

/// Returns once the order `id` waits for its delivery signal (its custom status says so).
async fn awaiting_delivery(server: &Server, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, order) = get(server, &format!("/v1/instances/{id}")).await;
        if order["custom_status"] == "awaiting-delivery" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the order never awaited delivery: {order}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts, lists, pages, waits, signals, cancels, terminates and reads history.
async fn instances(server: &Server) {
    let (status, started) = post(server, "/v1/instances", order("o1")).await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    assert_eq!(started["id"], "o1");
    // A long poll held open while the order waits for its signal wakes when it finishes.
    let waiting = {
        let url = server.url("/v1/instances/o1/wait?timeout_ms=30000");
        tokio::spawn(async move {
            let asked = Instant::now();
            let (status, body) = answer(http().get(url).send().await.unwrap()).await;
            (status, body, asked.elapsed())
        })
    };
    // The signal goes in once the order waits for it.
    awaiting_delivery(server, "o1").await;
    // A signal it does not wait for is kept; its repeat under the same dedup id is not.
    let noise = json!({"name": "noise", "dedup_id": "n1"});
    let (status, raised) = post(server, "/v1/instances/o1/signals", noise.clone()).await;
    assert_eq!(
        (status, raised["raised"].clone()),
        (StatusCode::ACCEPTED, json!(true))
    );
    let (status, again) = post(server, "/v1/instances/o1/signals", noise).await;
    assert_eq!(
        (status, again["raised"].clone()),
        (StatusCode::OK, json!(false))
    );
    let signal = json!({"name": "delivered", "payload": "porch"});
    let (status, _) = post(server, "/v1/instances/o1/signals", signal).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, done, took) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(done["status"], "Completed", "{done}");
    assert_eq!(done["output"]["delivered"], "porch");
    assert!(
        took < Duration::from_secs(25),
        "the wait ran to its timeout"
    );

    let (status, history) = get(server, "/v1/instances/o1/history?limit=3").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(history["items"].as_array().unwrap().len(), 3);
    let next = history["next"].as_str().expect("a next page");
    assert_eq!(
        next,
        format!(
            "{}.{}",
            history["items"][2]["execution"], history["items"][2]["seq"]
        ),
        "the next page starts after the last event of this one"
    );
    let (_, rest) = get(
        server,
        &format!("/v1/instances/o1/history?after={next}&limit=1000"),
    )
    .await;
    assert_eq!(rest["items"][0]["seq"], 3);
    assert!(rest.get("next").is_none());
    let (status, problem) = get(server, "/v1/instances/o1/history?after=7").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(problem["field"], "after");
    let (status, _) = get(server, "/v1/instances/nobody/history").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, whole) = get(server, "/v1/instances/o1/history").await;
    assert_eq!(
        whole["items"].as_array().unwrap().len(),
        3 + rest["items"].as_array().unwrap().len()
    );

    // A batch of starts, one of whose ids is taken: each item has its own outcome.
    let batch = json!({"instances": [order("o2"), order("o1"), order("o3")]});
    let (status, outcomes) = post(server, "/v1/instances/batch", batch).await;
    assert_eq!(status, StatusCode::OK, "{outcomes}");
    assert_eq!(outcomes[0]["id"], "o2");
    assert_eq!(
        outcomes[1]["problem"]["type"],
        "urn:ratchet:problem:already-exists"
    );
    assert_eq!(outcomes[2]["id"], "o3");
    // (A cancel reaches the steps in flight: the order's wait for its signal.)
    awaiting_delivery(server, "o2").await;
    // A reason past 32 KiB is refused naming it; nothing is written.
    let (status, problem) = post(
        server,
        "/v1/instances/o2/cancel",
        json!({"reason": "r".repeat(40_000)}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    assert_eq!(problem["field"], "reason", "{problem}");
    let (status, _) = post(
        server,
        "/v1/instances/o2/cancel",
        json!({"reason": "no stock"}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, _) = post(server, "/v1/instances/o3/terminate", json!({})).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, o3) = get(server, "/v1/instances/o3/wait?timeout_ms=10000").await;
    assert_eq!(o3["status"], "Terminated", "{o3}");
    let (_, o2) = get(server, "/v1/instances/o2/wait?timeout_ms=10000").await;
    assert_eq!(o2["status"], "Cancelled", "{o2}");
    let (status, _) = post(server, "/v1/instances/o3/terminate", json!({})).await;
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "a finished instance cannot stop again"
    );

    // Keyset pages: every instance once, newest first.
    let mut seen = Vec::new();
    let mut path = "/v1/instances?limit=2".to_string();
    loop {
        let (status, page) = get(server, &path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        seen.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["id"].clone()),
        );
        match page["next"].as_str() {
            Some(cursor) => path = format!("/v1/instances?limit=2&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    let (_, waiting) = get(server, "/v1/instances?custom_status=awaiting-delivery").await;
    let waiting: Vec<&str> = waiting["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["id"].as_str())
        .collect();
    // (o3 was terminated wherever it had got to.)
    assert!(
        waiting.contains(&"o2") && !waiting.contains(&"o1"),
        "o2 was cancelled while it awaited delivery; o1 is done: {waiting:?}"
    );
    let (_, finished) = get(server, "/v1/instances?status=Completed,Terminated").await;
    assert_eq!(finished["items"].as_array().unwrap().len(), 2);

    // A finished instance restarts under its id; a running one does not.
    let (status, _) = post(server, "/v1/instances/o3/restart", json!({})).await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, o3) = get(server, "/v1/instances/o3").await;
    assert!(
        !o3["status"].as_str().unwrap().ends_with("ed"),
        "running again: {o3}"
    );
    let (status, _) = post(server, "/v1/instances/o3/restart", json!({})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, _) = post(server, "/v1/instances/o3/terminate", json!({})).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, purged) = post(
        server,
        "/v1/instances/purge",
        json!({"finished_before": "2999-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(
        (status, purged["removed"].clone()),
        (StatusCode::OK, json!(3))
    );
    let (_, left) = get(server, "/v1/instances").await;
    assert_eq!(left["items"], json!([]), "{left}");
    let (status, _) = get(server, "/v1/instances/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Enqueues one and a batch, waits, lists, and steers tasks and queues.
async fn tasks(server: &Server) {
    let task = json!({"name": "work", "input": {"ms": 1},
                      "options": {"priority": -1, "unique_key": "k1", "metadata": {"who": "t"},
                                  "retry": {"max_attempts": 2, "initial_interval_ms": 10}}});
    let (status, enqueued) = post(server, "/v1/tasks", task).await;
    assert_eq!(status, StatusCode::CREATED, "{enqueued}");
    let id = enqueued["id"].as_i64().unwrap();
    let (_, done) = get(server, &format!("/v1/tasks/{id}/wait?timeout_ms=20000")).await;
    assert_eq!(done["state"], "Completed", "{done}");
    assert_eq!(done["metadata"]["who"], "t");
    assert_eq!(done["max_attempts"], 2);

    // A batch: a task that fails every attempt becomes a dead letter, retried and discarded.
    let batch = json!({"tasks": [
        {"name": "work", "input": {"ms": 1, "fail_attempts": 5}, "options": {"retry": {"max_attempts": 1}}},
        {"name": "work", "input": {"ms": 1}, "options": {"delay_ms": 3600000}}
    ]});
    let (status, outcomes) = post(server, "/v1/tasks/batch", batch).await;
    assert_eq!(status, StatusCode::CREATED, "{outcomes}");
    let dead = outcomes[0]["id"].as_i64().unwrap();
    let later = outcomes[1]["id"].as_i64().unwrap();
    let (_, dead_task) = get(server, &format!("/v1/tasks/{dead}/wait?timeout_ms=20000")).await;
    assert_eq!(dead_task["state"], "Dead", "{dead_task}");
    let (_, scheduled) = get(server, &format!("/v1/tasks/{later}")).await;
    assert_eq!(scheduled["state"], "Scheduled", "{scheduled}");
    let (_, listed) = get(server, "/v1/tasks?state=Dead,Scheduled").await;
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    let (status, acted) = post(server, "/v1/tasks/cancel", json!({"ids": [later, 999999]})).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(acted[0]["outcome"], "done");
    assert_eq!(acted[1]["problem"]["status"], 404);
    let (status, _) = post(server, &format!("/v1/tasks/{dead}/discard"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = get(server, &format!("/v1/tasks/{dead}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = post(server, &format!("/v1/tasks/{later}/retry"), json!({})).await;
    assert_eq!(status, StatusCode::OK);

    let (status, _) = post(server, "/v1/queues/slow/pause", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let limits = http()
        .put(server.url("/v1/queues/slow/limits"))
        .json(&json!({"concurrency": 2, "rate_per_second": 5.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(limits.status(), StatusCode::OK);
    let (_, queues) = get(server, "/v1/queues").await;
    let slow = queues
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "slow")
        .expect("the queue is listed");
    assert_eq!(
        (
            slow["paused"].clone(),
            slow["limits"]["concurrency"].clone()
        ),
        (json!(true), json!(2))
    );
    let (status, _) = post(server, "/v1/queues/slow/resume", json!({})).await;
    assert_eq!(status, StatusCode::OK);
}

/// Appends (conditional, idempotent), reads, and follows events across a dropped connection.
async fn events(server: &Server) {
    let event = |n: u32| json!({"type": "Enrolled", "tags": ["course:c1"], "payload": {"n": n}});
    let (status, first) = post(
        server,
        "/v1/events",
        json!({"events": [event(1), event(2)]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let last = first["last"].as_u64().unwrap();
    let guarded = json!({"events": [event(3)], "idempotency_key": "once",
                         "condition": {"fail_if_events_match": [{"tags": ["course:c1"]}], "after": last}});
    let (status, _) = post(server, "/v1/events", guarded.clone()).await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, again) = post(server, "/v1/events", guarded).await;
    assert_eq!(
        (status, again["duplicate"].clone()),
        (StatusCode::OK, json!(true))
    );
    let stale = json!({"events": [event(4)],
                       "condition": {"fail_if_events_match": [{"tags": ["course:c1"]}], "after": last}});
    let (status, conflict) = post(server, "/v1/events", stale).await;
    assert_eq!(status, StatusCode::CONFLICT, "{conflict}");
    assert_eq!(conflict["position"], last + 1);

    // CloudEvents in structured JSON: the attributes kept as metadata, the tags extension
    // as tags; one that breaks the CloudEvents rules is refused, naming its attribute.
    let cloud = json!({"specversion": "1.0", "id": "ce-1", "source": "https://school.example",
                       "type": "Graded", "subject": "s1", "tags": ["course:c2"], "data": {"grade": "A"}});
    let response = http()
        .post(server.url("/v1/events/cloudevents"))
        .header("content-type", "application/cloudevents+json")
        .body(cloud.to_string())
        .send()
        .await
        .unwrap();
    let (status, appended) = answer(response).await;
    assert_eq!(status, StatusCode::CREATED, "{appended}");
    let (_, graded) = get(server, "/v1/events?tags=course:c2").await;
    let graded = &graded["events"][0];
    assert_eq!(
        (graded["type"].clone(), graded["payload"].clone()),
        (json!("Graded"), json!({"grade": "A"}))
    );
    assert_eq!(graded["metadata"]["subject"], "s1");
    assert_eq!(graded["metadata"]["id"], "ce-1");
    let (status, refused) = post(
        server,
        "/v1/events/cloudevents",
        json!([cloud, {"specversion": "1.0", "id": "2", "source": "s", "type": "T", "Sub": "x"}]),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(
        refused["detail"].as_str().unwrap().contains("`Sub`"),
        "{refused}"
    );
    assert_eq!(refused["field"], "[1]");

    let (_, page) = get(server, "/v1/events?tags=course:c1&limit=2").await;
    assert_eq!(page["events"].as_array().unwrap().len(), 2);
    let (_, back) = post(
        server,
        "/v1/events/query",
        json!({"query": [{"types": ["Enrolled"]}], "direction": "backward", "limit": 1}),
    )
    .await;
    assert_eq!(back["events"][0]["payload"]["n"], 3);

    // Follow: read two, drop the connection, append two more, resume from the last id seen.
    let mut seen = Vec::new();
    let mut last_id = None;
    for round in 0..2 {
        let mut request = http().get(server.url("/v1/events/stream?types=Enrolled"));
        if let Some(id) = &last_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.bytes_stream();
        let mut buffer = String::new();
        let want = if round == 0 { 2 } else { 3 };
        let mut got = 0;
        while got < want {
            let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
                .await
                .expect("an event arrives")
                .expect("the stream goes on")
                .unwrap();
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let message: String = buffer.drain(..end + 2).collect();
                let id = message.lines().find_map(|l| l.strip_prefix("id: "));
                let data = message.lines().find_map(|l| l.strip_prefix("data: "));
                if let (Some(id), Some(data)) = (id, data) {
                    let event: Value = serde_json::from_str(data).unwrap();
                    seen.push(event["payload"]["n"].as_u64().unwrap());
                    last_id = Some(id.to_string());
                    got += 1;
                }
            }
        }
        drop(body);
        if round == 0 {
            let (status, _) = post(
                server,
                "/v1/events",
                json!({"events": [event(5), event(6)]}),
            )
            .await;
            assert_eq!(status, StatusCode::CREATED);
        }
    }
    assert_eq!(seen, vec![1, 2, 3, 5, 6], "no event lost or repeated");
}

/// Each kind of bad input gets its problem, and writes nothing.
async fn bad_input(server: &Server) {
    let (_, before) = get(server, "/v1/instances?limit=1000").await;
    let (_, tasks_before) = get(server, "/v1/tasks?limit=1000").await;
    let raw = |body: &'static str, content_type: &'static str| {
        let url = server.url("/v1/instances");
        async move {
            let response = http()
                .post(url)
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .unwrap();
            answer(response).await
        }
    };
    let (status, p) = raw("{\"name\": \"order\"", "application/json").await;
    assert_eq!(
        (status, p["type"].clone()),
        (
            StatusCode::BAD_REQUEST,
            json!("urn:ratchet:problem:bad-request")
        )
    );
    let (status, _) = raw("{\"name\": \"order\"}", "text/plain").await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let (status, p) = post(server, "/v1/instances", json!({"name": 7})).await;
    assert_eq!(
        (status, p["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("name"))
    );
    let (status, p) = post(
        server,
        "/v1/instances",
        json!({"name": "order", "colour": 1}),
    )
    .await;
    assert_eq!(
        (status, p["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("colour"))
    );
    let (status, p) = post(
        server,
        "/v1/instances",
        json!({"name": "x'); DROP TABLE instances;--"}),
    )
    .await;
    assert_eq!(
        (status, p["type"].clone()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!("urn:ratchet:problem:unknown-name")
        )
    );
    let (status, p) = post(
        server,
        "/v1/instances",
        json!({"name": "order", "input": {"id": 1}}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "an input the orchestration cannot read: {p}"
    );
    let big = "x".repeat(5 << 20);
    let (status, p) = post(
        server,
        "/v1/instances",
        json!({"name": "order", "input": big}),
    )
    .await;
    assert_eq!(
        (status, p["limit"].clone()),
        (StatusCode::PAYLOAD_TOO_LARGE, json!(4 << 20))
    );
    let (status, p) = post(
        server,
        "/v1/instances",
        json!({"name": "fanout", "input": {"activities": 1, "pad": "y".repeat(1 << 20)}}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "over the client's payload limit: {p}"
    );
    // One bad item refuses the whole batch.
    let batch = json!({"instances": [order("b1"), {"name": "nope"}]});
    let (status, p) = post(server, "/v1/instances/batch", batch).await;
    assert_eq!(
        (status, p["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("instances[1].name"))
    );
    let batch = json!({"tasks": [{"name": "work", "input": {}}, {"name": "work", "input": {}, "options": {"retry": {"jitter": 3.0}}}]});
    let (status, p) = post(server, "/v1/tasks/batch", batch).await;
    assert_eq!(
        (status, p["field"].clone()),
        (
            StatusCode::UNPROCESSABLE_ENTITY,
            json!("tasks[1].options.retry.jitter")
        )
    );
    let batch = json!({"tasks": [{"name": "work", "input": {}}, {"name": "work", "input": {}, "options": {"queue": "$mine"}}]});
    let (status, _) = post(server, "/v1/tasks/batch", batch).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = post(
        server,
        "/v1/tasks",
        json!({"name": "work", "input": {}, "options": {"priority": 40000}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = post(server, "/v1/events", json!({"events": [{"type": ""}]})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, p) = get(server, "/v1/instances?limit=0").await;
    assert_eq!(
        (status, p["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("limit"))
    );
    let (status, _) = get(server, "/v1/instances?colour=red").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = get(server, "/v1/instances?cursor=forged").await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = get(server, "/v1/tasks/abc").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = get(server, "/v1/nothing-here").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let response = http()
        .delete(server.url("/v1/queues"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer(response).await.0, StatusCode::METHOD_NOT_ALLOWED);

    let (_, after) = get(server, "/v1/instances?limit=1000").await;
    let (_, tasks_after) = get(server, "/v1/tasks?limit=1000").await;
    assert_eq!(before["items"], after["items"], "no instance was written");
    assert_eq!(tasks_before, tasks_after, "no task was written");
}

async fn every_route(store_args: &[String], store: &dyn ratchet::Store) {
    let mut server = Server::start(store_args, &[]);
    let (status, _) = get(&server, "/healthz").await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = get(&server, "/readyz").await;
    assert_eq!(status, StatusCode::OK);
    let (_, registry) = get(&server, "/v1/registry").await;
    assert_eq!(registry["tasks"], json!(["work"]));
    let (status, served) = get(&server, "/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let checked_in: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    // docs/openapi.json is the document of a server with --auth; this one asks for no token,
    // and says so: no security requirement, no 401, a 403 for another host or origin.
    assert!(served.get("security").is_none(), "no token asked");
    let text = served.to_string();
    assert!(!text.contains("\"401\""), "no 401 without tokens");
    assert!(text.contains("forbidden-host"), "the 403 of another host");
    let without_tokens = |doc: &Value| {
        let mut doc = doc.clone();
        doc.as_object_mut().unwrap().remove("security");
        for item in doc["paths"].as_object_mut().unwrap().values_mut() {
            for op in item.as_object_mut().unwrap().values_mut() {
                let responses = op["responses"].as_object_mut().unwrap();
                responses.remove("401");
                responses.remove("403");
                op.as_object_mut().unwrap().remove("security");
            }
        }
        doc
    };
    assert_eq!(
        without_tokens(&served),
        without_tokens(&checked_in),
        "the served document is docs/openapi.json but for its tokens"
    );
    bad_input(&server).await;
    instances(&server).await;
    tasks(&server).await;
    events(&server).await;
    workflows(&server).await;
    schedules(&server).await;
    console_routes(&server).await;
    instance_stream(&server).await;
    a_lost_lease_is_taken_over(&server, store).await;
    metrics(&server).await;
    server.stop();
}

/// `/v1/schedules`: a bad schedule is refused naming its field; one made over HTTP fires
/// (the server runs a worker), pauses, fires by hand, refuses a bad backfill range and goes.
async fn schedules(server: &Server) {
    let (status, problem) = post(
        server,
        "/v1/schedules",
        json!({"name": "s", "spec": "every 1s", "time_zone": "Moon/Base", "workflow": "fanout"}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(problem["field"], "time_zone", "{problem}");
    let (status, problem) = post(
        server,
        "/v1/schedules",
        json!({"name": "s", "spec": "every 1s", "workflow": "fanout", "overlap": "sometimes"}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(problem["field"], "overlap", "{problem}");
    let (status, problem) = post(
        server,
        "/v1/schedules",
        json!({"name": "s", "spec": "every 1s", "task": "work", "options": {"queue": "$x"}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(problem["field"], "action", "{problem}");
    let (status, created) = post(
        server,
        "/v1/schedules",
        json!({"name": "every-second", "spec": "every 1s", "workflow": "fanout",
               "input": {"activities": 1}, "overlap": "allow_all"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["action"]["start"]["workflow"], "fanout");
    let (status, _) = post(
        server,
        "/v1/schedules",
        json!({"name": "every-second", "spec": "every 1s", "workflow": "fanout"}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let described = loop {
        let (status, d) = get(server, "/v1/schedules/every-second?upcoming=3&recent=5").await;
        assert_eq!(status, StatusCode::OK, "{d}");
        if d["recent"].as_array().is_some_and(|r| !r.is_empty()) {
            break d;
        }
        assert!(std::time::Instant::now() < deadline, "it fired: {d}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(described["upcoming"].as_array().unwrap().len(), 3);
    let run = described["recent"][0]["run"].as_str().unwrap();
    assert!(run.starts_with("every-second@"), "{described}");
    let (status, paused) = post(
        server,
        "/v1/schedules/every-second/pause",
        json!({"note": "by the test"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (paused["paused"].clone(), paused["note"].clone()),
        (json!(true), json!("by the test"))
    );
    let (status, fire) = post(server, "/v1/schedules/every-second/trigger", json!(null)).await;
    assert_eq!(status, StatusCode::CREATED, "{fire}");
    assert_eq!(fire["kind"], "manual");
    let (status, problem) = post(
        server,
        "/v1/schedules/every-second/backfill",
        json!({"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(problem["field"], "range", "{problem}");
    let (_, list) = get(server, "/v1/schedules").await;
    assert_eq!(list[0]["name"], "every-second");
    // The same verbs from the CLI on the server, with the same output as on the database.
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ratchet"))
            .args(["--server", &server.base, "schedules"])
            .args(args)
            .env_remove("DATABASE_URL")
            .output()
            .unwrap();
        (out.status.success(), common::text(&out))
    };
    let (ok, out) = cli(&[
        "create",
        "by-cli",
        "--spec",
        "0 3 * * *",
        "--zone",
        "Europe/Paris",
        "--task",
        "work",
        "--queue",
        "reports",
        "--paused",
        "later",
    ]);
    assert!(ok, "{out}");
    let created: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(
        created["action"]["enqueue"]["options"]["queue"], "reports",
        "{out}"
    );
    let (ok, out) = cli(&["describe", "by-cli", "--json"]);
    assert!(ok, "{out}");
    let described: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(described["schedule"]["paused"], true);
    let (ok, out) = cli(&["create", "by-cli", "--spec", "every 5x", "--task", "work"]);
    assert!(!ok && out.contains("(field spec)"), "{out}");
    let (ok, out) = cli(&["delete", "by-cli"]);
    assert!(ok, "{out}");
    let (status, _) = delete(server, "/v1/schedules/every-second").await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = get(server, "/v1/schedules/every-second").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// What the console reads beside the rest: its own files, who is asking, throughput, lists by
/// id prefix and tasks paged by id.
async fn console_routes(server: &Server) {
    let page = http().get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
    let html = page.text().await.unwrap();
    assert!(html.contains("/console/app.js"), "{html}");
    let script = http()
        .get(server.url("/console/app.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(script.status(), StatusCode::OK);
    assert!(script.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));
    let (status, _) = get(server, "/console/missing.js").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (_, who) = get(server, "/v1/whoami").await;
    assert_eq!(
        who,
        json!({"auth": false, "scopes": ["read", "write", "admin"]})
    );

    // Every instance this server made so far was made in the last hour.
    let (_, all) = get(server, "/v1/instances?limit=1000").await;
    let made = all["items"].as_array().unwrap().len() as u64;
    assert!(made >= 2, "{all}");
    let (_, throughput) = get(server, "/v1/stats/throughput?minutes=60").await;
    let sum = |key: &str| {
        throughput["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b[key].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(sum("started"), made, "{throughput}");
    let finished_ok = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["status"] == "Completed")
        .count() as u64;
    assert_eq!(sum("completed"), finished_ok, "{throughput}");
    for bad in [
        "minutes=0",
        "minutes=1441",
        "bucket_seconds=0",
        "bucket_seconds=3601",
    ] {
        let (status, problem) = get(server, &format!("/v1/stats/throughput?{bad}")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
        assert_eq!(
            problem["field"],
            bad.split('=').next().unwrap(),
            "{problem}"
        );
    }

    // An id prefix: exactly the ids that start with it.
    let ids = |page: &Value| -> Vec<String> {
        page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].as_str().unwrap().to_string())
            .collect()
    };
    let every = ids(&all);
    let (_, prefixed) = get(server, "/v1/instances?limit=1000&id_prefix=wf-").await;
    let expected: Vec<String> = every
        .iter()
        .filter(|id| id.starts_with("wf-"))
        .cloned()
        .collect();
    assert!(
        !expected.is_empty() && expected.len() < every.len(),
        "{every:?}"
    );
    assert_eq!(ids(&prefixed), expected);
    let (_, none) = get(server, "/v1/instances?id_prefix=wf%25").await;
    assert_eq!(ids(&none), Vec::<String>::new(), "% is no wildcard");

    // Tasks paged by id: two pages of two are the newest four, in order, without overlap.
    for n in 0..4 {
        let (status, _) = post(
            server,
            "/v1/tasks",
            json!({"name": "work", "input": {"n": n}, "options": {"queue": "paged", "delay_ms": 60000}}),
        )
        .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let task_ids = |list: &Value| -> Vec<i64> {
        list.as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect()
    };
    let (_, newest) = get(server, "/v1/tasks?queue=paged&limit=4").await;
    let newest = task_ids(&newest);
    assert_eq!(newest.len(), 4);
    let (_, first) = get(server, "/v1/tasks?queue=paged&limit=2").await;
    let first = task_ids(&first);
    let (_, second) = get(
        server,
        &format!("/v1/tasks?queue=paged&limit=2&before={}", first[1]),
    )
    .await;
    let second = task_ids(&second);
    assert_eq!([first, second].concat(), newest);
}

/// An instance followed live: its state, each history event once, and the end; a reconnect
/// resumes after the last event seen.
async fn instance_stream(server: &Server) {
    let (status, _) = post(server, "/v1/instances", order("live")).await;
    assert_eq!(status, StatusCode::CREATED);
    awaiting_delivery(server, "live").await;
    let (status, _) = get(server, "/v1/instances/nobody/stream").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    /// Reads messages until `end`, or until `until` says enough.
    async fn read(
        server: &Server,
        last_id: Option<&str>,
        until: impl Fn(&[(String, Option<String>, Value)]) -> bool,
    ) -> Vec<(String, Option<String>, Value)> {
        let mut request = http().get(server.url("/v1/instances/live/stream"));
        if let Some(id) = last_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.bytes_stream();
        let mut buffer = String::new();
        let mut messages = Vec::new();
        loop {
            let chunk = tokio::time::timeout(Duration::from_secs(10), body.next())
                .await
                .expect("a message arrives")
                .expect("the stream goes on")
                .unwrap();
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let message: String = buffer.drain(..end + 2).collect();
                let field = |name: &str| {
                    message
                        .lines()
                        .find_map(|l| l.strip_prefix(&format!("{name}: ")[..]))
                        .map(str::to_string)
                };
                let Some(kind) = field("event") else { continue };
                let data = serde_json::from_str(&field("data").unwrap_or_default()).unwrap();
                let ended = kind == "end";
                messages.push((kind, field("id"), data));
                if ended || until(&messages) {
                    return messages;
                }
            }
        }
    }
    let waiting = |m: &[(String, Option<String>, Value)]| {
        m.iter()
            .any(|(kind, _, data)| kind == "instance" && data["status"] == "Running")
            && m.iter().any(|(_, _, data)| {
                data["event"]["type"] == "CustomStatusSet"
                    && data["event"]["status"] == "awaiting-delivery"
            })
    };
    let before = read(server, None, waiting).await;
    assert!(waiting(&before), "{before:?}");
    let history = |m: &[(String, Option<String>, Value)]| -> Vec<String> {
        m.iter()
            .filter(|(kind, _, _)| kind == "history")
            .map(|(_, id, _)| id.clone().expect("a history message has an id"))
            .collect()
    };
    let seen = history(&before);
    let last = seen.last().unwrap().clone();

    let (status, _) = post(
        server,
        "/v1/instances/live/signals",
        json!({"name": "delivered", "payload": "porch"}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let after = read(server, Some(&last), |_| false).await;
    let (kind, _, _) = after.last().unwrap();
    assert_eq!(kind, "end", "{after:?}");
    let finished = after
        .iter()
        .rev()
        .find(|(kind, _, _)| kind == "instance")
        .map(|(_, _, data)| data.clone())
        .unwrap();
    assert_eq!(finished["status"], "Completed", "{finished}");
    assert_eq!(finished["output"]["delivered"], "porch");
    // The two reads together are the whole history, each event once and in order.
    let rest = history(&after);
    assert!(
        rest.iter().all(|id| !seen.contains(id)),
        "{seen:?} {rest:?}"
    );
    let (_, whole) = get(server, "/v1/instances/live/history?limit=1000").await;
    let positions: Vec<String> = whole["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}.{}", r["execution"], r["seq"]))
        .collect();
    assert_eq!([seen, rest].concat(), positions);
}

/// Definitions checked, applied per version, listed and read back; errors each at its line
/// and column, nothing stored for a refused one.
async fn workflows(server: &Server) {
    let source = "document: {dsl: '1.0.0', namespace: demo, name: greet, version: '1.0.0'}\n\
                  do:\n  - step:\n      call: fanout_step\n      with: {i: 1, ms: 0}\n";
    let broken = "document: {dsl: '1.0.0', namespace: demo, name: bad, version: '1.0.0'}\n\
                  do:\n  - step:\n      call: nobody\n  - next:\n      set: ${ .a + }\n";
    let (status, p) = post(server, "/v1/workflows/validate", json!({"source": broken})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    assert_eq!(p["type"], "urn:ratchet:problem:invalid-workflow");
    let errors = p["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{p}");
    assert_eq!(
        (errors[0]["line"].clone(), errors[0]["column"].clone()),
        (json!(4), json!(13))
    );
    assert!(
        errors[0]["message"]
            .as_str()
            .unwrap()
            .contains("no activity named `nobody`"),
        "{p}"
    );
    let (status, _) = post(server, "/v1/workflows", json!({"source": broken})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, valid) = post(server, "/v1/workflows/validate", json!({"source": source})).await;
    assert_eq!(
        (status, valid["name"].clone()),
        (StatusCode::OK, json!("demo/greet"))
    );

    let (status, applied) = post(server, "/v1/workflows", json!({"source": source})).await;
    assert_eq!(status, StatusCode::CREATED, "{applied}");
    assert_eq!(applied["revision"], 1);
    // The server's own worker runs it at once.
    let (status, started) = post(
        server,
        "/v1/instances",
        json!({"name": "demo/greet", "id": "wf1", "input": {}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let (_, done) = get(server, "/v1/instances/wf1/wait?timeout_ms=20000").await;
    assert_eq!(done["status"], "Completed", "{done}");
    assert_eq!(done["output"]["i"], 1, "{done}");
    let (status, again) = post(server, "/v1/workflows", json!({"source": source})).await;
    assert_eq!(
        (status, again["created"].clone()),
        (StatusCode::OK, json!(false))
    );
    let changed = source.replace("i: 1", "i: 2");
    let (status, p) = post(server, "/v1/workflows", json!({"source": changed})).await;
    assert_eq!(status, StatusCode::CONFLICT, "{p}");
    let (status, p) = post(
        server,
        "/v1/workflows",
        json!({"source": source, "extra": 1}),
    )
    .await;
    assert_eq!(
        (status, p["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("extra"))
    );

    let (_, listed) = get(server, "/v1/workflows").await;
    let listed = listed.as_array().unwrap();
    assert_eq!(
        listed.len(),
        1,
        "nothing of the refused ones is stored: {listed:?}"
    );
    assert_eq!(listed[0]["name"], "demo/greet");
    assert!(listed[0].get("source").is_none());
    let (_, shown) = get(server, "/v1/workflows/demo/greet").await;
    assert_eq!(shown["source"], source);
    let (status, _) = get(server, "/v1/workflows/demo/greet?version=9").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    graphs(server).await;
    workflows_deleted(server).await;
}

/// A stored definition's graph and an instance's, as SVG; unknown ones not found.
async fn graphs(server: &Server) {
    let svg = |path: &str| {
        let url = server.url(path);
        async move {
            let response = http().get(url).send().await.expect("request");
            let status = response.status();
            let kind = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            (status, kind, response.text().await.unwrap_or_default())
        }
    };
    let (status, kind, body) = svg("/v1/workflows/demo/greet/1.0.0/graph.svg").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(kind.starts_with("image/svg+xml"), "{kind}");
    assert!(
        body.starts_with("<svg") && body.contains(">step<") && body.contains("call fanout_step")
    );
    let (status, _, _) = svg("/v1/workflows/demo/greet/9.9.9/graph.svg").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // wf1 ran: its step completed, drawn from its history.
    let (status, kind, body) = svg("/v1/instances/wf1/graph.svg").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(kind.starts_with("image/svg+xml"), "{kind}");
    assert!(
        body.contains(">fanout_step<") && body.contains("status-completed"),
        "{body}"
    );
    let (status, _, _) = svg("/v1/instances/nobody/graph.svg").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Deleted per version or whole; unknown ones not found; one an unfinished instance runs on
/// refused (409 `workflow-in-use`, nothing deleted) until forced.
async fn workflows_deleted(server: &Server) {
    let (status, p) = delete(server, "/v1/workflows/demo/nobody").await;
    assert_eq!(
        (status, p["type"].clone()),
        (
            StatusCode::NOT_FOUND,
            json!("urn:ratchet:problem:not-found")
        )
    );
    let (status, p) = delete(server, "/v1/workflows/demo/greet?version=9").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{p}");
    // wf1 finished: nothing holds revision 1.
    let (status, gone) = delete(server, "/v1/workflows/demo/greet?version=1.0.0").await;
    assert_eq!(status, StatusCode::OK, "{gone}");
    let gone = gone.as_array().unwrap();
    assert_eq!(gone.len(), 1, "{gone:?}");
    assert_eq!(
        (
            gone[0]["name"].clone(),
            gone[0]["version"].clone(),
            gone[0]["revision"].clone()
        ),
        (json!("demo/greet"), json!("1.0.0"), json!(1))
    );
    assert!(gone[0].get("source").is_none());
    let (status, _) = get(server, "/v1/workflows/demo/greet").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let waits = "document: {dsl: '1.0.0', namespace: demo, name: waits, version: '1.0.0'}\n\
                 do:\n  - pause:\n      listen:\n        to:\n          one:\n            \
                 with:\n              type: go\n";
    let (status, applied) = post(server, "/v1/workflows", json!({"source": waits})).await;
    assert_eq!(status, StatusCode::CREATED, "{applied}");
    let (status, started) = post(
        server,
        "/v1/instances",
        json!({"name": "demo/waits", "id": "wf-waits", "input": {}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    // Its first turn pins it to revision 1, then it waits for an event.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, shown) = get(server, "/v1/instances/wf-waits").await;
        if shown["status"] == "Running" {
            break;
        }
        assert!(Instant::now() < deadline, "never ran: {shown}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, p) = delete(server, "/v1/workflows/demo/waits").await;
    assert_eq!(
        (status, p["type"].clone()),
        (
            StatusCode::CONFLICT,
            json!("urn:ratchet:problem:workflow-in-use")
        )
    );
    assert!(
        p["detail"].as_str().unwrap().contains("1 unfinished"),
        "{p}"
    );
    let (status, _) = get(server, "/v1/workflows/demo/waits").await;
    assert_eq!(status, StatusCode::OK, "nothing was deleted");
    let (status, gone) = delete(server, "/v1/workflows/demo/waits?force=true").await;
    assert_eq!(status, StatusCode::OK, "{gone}");
    assert_eq!(gone[0]["revision"], 1, "{gone}");
    let (status, _) = get(server, "/v1/workflows/demo/waits").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = post(server, "/v1/instances/wf-waits/terminate", json!({})).await;
    assert!(status.is_success(), "{status}");
}

/// A worker dies holding a task: once its lease expires the server's runtime takes the task
/// over, runs it as a new attempt, and counts the expiry.
async fn a_lost_lease_is_taken_over(server: &Server, store: &dyn ratchet::Store) {
    use ratchet_store::{Lease, NewTask, QueueClaim, TaskClaim};
    let now = ratchet::Timestamp::now();
    // Delayed a second, so that only the dying worker below can claim it first.
    let due = now.plus(Duration::from_secs(1));
    let options = ratchet::TaskOptions::default().run_at(due);
    let task = NewTask::standalone("work".into(), json!({"ms": 1}), &options, now);
    let id = store.task_enqueue(vec![task], now).await.unwrap()[0].id();
    let taken = store
        .task_claim(TaskClaim {
            lease: Lease {
                owner: "a-worker-that-dies".into(),
                until: due.plus(Duration::from_millis(200)),
            },
            queues: vec![QueueClaim {
                queue: options.queue.clone(),
                limit: 1,
            }],
            names: vec!["work".into()],
            now: due,
        })
        .await
        .unwrap();
    assert_eq!(taken.len(), 1, "the dying worker holds the task");
    let (_, done) = get(server, &format!("/v1/tasks/{}/wait?timeout_ms=20000", id.0)).await;
    assert_eq!(done["state"], "Completed", "{done}");
    assert_eq!(done["attempt"], 2, "the lost attempt counts: {done}");
}

/// `/metrics` parses as Prometheus text and holds the figures an operator pages on, each
/// non-zero after the run above.
async fn metrics(server: &Server) {
    // A task waits in a paused queue: its queue is behind.
    let (status, _) = post(server, "/v1/queues/held/pause", json!({})).await;
    assert!(status.is_success(), "{status}");
    let held = json!({"name": "work", "input": {"ms": 1}, "options": {"queue": "held"}});
    let (status, enqueued) = post(server, "/v1/tasks", held).await;
    assert_eq!(status, StatusCode::CREATED, "{enqueued}");
    // Well past the 20 ms asserted below: after a 20 ms sleep, PostgreSQL runs once read 9 ms
    // (the task's visible time and the server's clock are read at different moments).
    tokio::time::sleep(Duration::from_millis(60)).await;
    let response = http().get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("Prometheus text format");
    let total = |name: &str| -> f64 {
        scrape
            .samples
            .iter()
            .filter(|s| s.metric == name)
            .map(|s| match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => *v,
                prometheus_parse::Value::Histogram(buckets) => {
                    buckets.last().map_or(0.0, |b| b.count)
                }
                prometheus_parse::Value::Summary(_) => 0.0,
            })
            .sum()
    };
    for name in [
        "ratchet_turns_total",
        "ratchet_turns_fed_total",
        "ratchet_turn_seconds",
        "ratchet_commits_total",
        "ratchet_commit_seconds",
        "ratchet_committed_items_total",
        "ratchet_claims_total",
        "ratchet_attempts_total",
        "ratchet_attempt_seconds",
        "ratchet_store_round_trips_total",
        "ratchet_store_commits_total",
        "ratchet_queue_tasks",
        "ratchet_lease_expiries_total",
        "ratchet_http_requests_total",
        "ratchet_http_request_seconds",
    ] {
        assert!(total(name) > 0.0, "{name} is missing or zero in:\n{text}");
    }
    let by_route = scrape.samples.iter().any(|s| {
        s.metric == "ratchet_http_requests_total"
            && s.labels.get("route") == Some("/v1/instances/:id/wait")
            && s.labels.get("status") == Some("200")
    });
    assert!(by_route, "requests are counted by route pattern and status");
    let of_held = |name: &str| {
        scrape
            .samples
            .iter()
            .find(|s| s.metric == name && s.labels.get("queue") == Some("held"))
            .map(|s| match s.value {
                prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
                _ => 0.0,
            })
    };
    assert_eq!(of_held("ratchet_queue_depth"), Some(1.0), "{text}");
    assert!(
        of_held("ratchet_queue_oldest_ready_seconds").is_some_and(|s| s >= 0.02),
        "the held task has waited at least 20 ms: {text}"
    );
    let (_, queues) = get(server, "/v1/queues").await;
    let held = queues
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "held");
    assert!(
        held.is_some_and(|q| q["oldest_available"].is_string() && q["depth"] == 1),
        "{queues}"
    );
    let failed_attempts = scrape
        .samples
        .iter()
        .any(|s| s.metric == "ratchet_attempts_total" && s.labels.get("outcome") == Some("failed"));
    assert!(
        failed_attempts,
        "the dead letter's failed attempt is counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_on_sqlite() {
    let (args, store, _dir) = common::sqlite().await;
    every_route(&args, store.as_ref()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_on_postgres() {
    let Some((args, store)) = common::postgres().await else {
        return;
    };
    every_route(&args, store.as_ref()).await;
}

/// Two servers on one PostgreSQL: what one starts, the other waits for and sees finish.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_share_one_postgres() {
    let Some((args, _store)) = common::postgres().await else {
        return;
    };
    let a = Server::start(&args, &[]);
    let b = Server::start(&args, &["--no-worker"]);
    let fanout =
        |i: usize| json!({"name": "fanout", "id": format!("f{i}"), "input": {"activities": 3}});
    let (status, started) = post(
        &b,
        "/v1/instances/batch",
        json!({"instances": (0..10).map(fanout).collect::<Vec<_>>()}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    for i in 0..10 {
        let (_, done) = get(&b, &format!("/v1/instances/f{i}/wait?timeout_ms=20000")).await;
        assert_eq!(done["status"], "Completed", "{done}");
    }
    let (_, registry) = get(&b, "/v1/registry").await;
    assert_eq!(registry["worker"], false);

    // The fleet: A says what it runs; B, which runs nothing, refuses what nobody runs.
    let (_, workers) = get(&b, "/v1/workers").await;
    let listed = workers.as_array().unwrap();
    assert_eq!(listed.len(), 1, "{workers}");
    assert_eq!(listed[0]["alive"], true);
    assert!(listed[0]["orchestrations"]
        .as_array()
        .unwrap()
        .iter()
        .any(|o| o["name"] == "fanout"));
    assert_eq!(listed[0]["tasks"], json!(["work"]));
    assert!(listed[0]["label"].as_str().unwrap().starts_with("pid-"));
    let (status, p) = post(&b, "/v1/instances", json!({"name": "nobody-runs-this"})).await;
    assert_eq!(
        (status, p["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("name"))
    );
    let batch = json!({"tasks": [{"name": "work", "input": {}}, {"name": "nope"}]});
    let (status, p) = post(&b, "/v1/tasks/batch", batch).await;
    assert_eq!(
        (status, p["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("tasks[1].name"))
    );
    let (status, _) = post(
        &b,
        "/v1/instances?allow_unknown=true",
        json!({"name": "nobody-runs-this"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "allowed when asked");
    let (status, _) = post(&b, "/v1/tasks", json!({"name": "work", "input": {"ms": 1}})).await;
    assert_eq!(status, StatusCode::CREATED, "A runs it");
    // The same from the CLI on B.
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ratchet"))
            .args(["--server", &b.base])
            .args(args)
            .env_remove("DATABASE_URL")
            .output()
            .unwrap()
    };
    let refused = cli(&["tasks", "enqueue", "nope"]);
    assert!(!refused.status.success());
    assert!(
        common::text(&refused).contains("no live or recent worker runs task"),
        "{}",
        common::text(&refused)
    );
    let allowed = cli(&["tasks", "enqueue", "nope", "--allow-unknown"]);
    assert!(allowed.status.success(), "{}", common::text(&allowed));
    let allowed = cli(&["instances", "start", "nope", "--allow-unknown"]);
    assert!(allowed.status.success(), "{}", common::text(&allowed));
    drop(a);
}

/// The README's curl lines work as written (on a fresh file, with the server's address for
/// `localhost:8080`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_curl_examples_work() {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let section = readme
        .split("## Over HTTP")
        .nth(1)
        .and_then(|s| s.split("```sh").nth(1))
        .and_then(|s| s.split("```").next())
        .expect("the README's HTTP example");
    // Lines ending in a backslash go on.
    let commands: Vec<String> = section
        .replace("\\\n", " ")
        .lines()
        .filter(|l| l.starts_with("curl "))
        .map(str::to_string)
        .collect();
    assert_eq!(commands.len(), 6, "{commands:?}");
    let (args, _store, _dir) = common::sqlite().await;
    let server = Server::start(&args, &[]);
    let address = server.base.trim_start_matches("http://").to_string();
    let mut outputs = Vec::new();
    for command in &commands {
        let command = command.replace("localhost:8080", &address);
        let out = std::process::Command::new("sh")
            .args(["-c", &command])
            .output()
            .expect("run curl (the tests need curl installed)");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{command}: {}", common::text(&out));
        assert!(!text.contains("urn:ratchet:problem"), "{command}: {text}");
        outputs.push(text);
    }
    let waited: Value = serde_json::from_str(&outputs[2]).unwrap();
    assert_eq!(waited["status"], "Completed", "{waited}");
    assert_eq!(waited["output"]["delivered"], "front door");
    let read: Value = serde_json::from_str(&outputs[5]).unwrap();
    assert_eq!(read["events"][0]["payload"]["student"], "s-1");
}

/// With `--auth`, every request but the probes needs a token of the right scope, and a revoked
/// token is refused within a second (the server reads a token at most once a second).
async fn auth(store_args: &[String]) {
    let token = |name: &str, scope: &str| {
        let out = common::run(
            store_args,
            &["tokens", "create", "--name", name, "--scope", scope],
        );
        assert!(out.status.success(), "{}", common::text(&out));
        let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(token.starts_with("rt_"), "{token}");
        token
    };
    // Tokens are made before the server runs: it reads them from the database per request.
    let migrate = common::run(store_args, &["migrate"]);
    assert!(migrate.status.success(), "{}", common::text(&migrate));
    let (reader, writer, admin) = (
        token("dash", "read"),
        token("ci", "write"),
        token("ops", "admin"),
    );
    let server = Server::start(store_args, &["--auth"]);
    let call = |method: reqwest::Method, path: &str, token: Option<&str>, body: Option<Value>| {
        let mut request = http().request(method, server.url(path));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move { answer(request.send().await.unwrap()).await }
    };
    use reqwest::Method;
    // A server with --auth serves docs/openapi.json as it is.
    let (_, served) = call(Method::GET, "/openapi.json", None, None).await;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let checked_in: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(
        served, checked_in,
        "the served document is docs/openapi.json"
    );
    for open in ["/healthz", "/readyz", "/openapi.json"] {
        assert_eq!(
            call(Method::GET, open, None, None).await.0,
            StatusCode::OK,
            "{open}"
        );
    }
    // whoami tells a caller without a token that it needs one, and a token what it may do.
    let (status, who) = call(Method::GET, "/v1/whoami", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(who, json!({"auth": true, "scopes": []}));
    let (_, who) = call(Method::GET, "/v1/whoami", Some(&reader), None).await;
    assert_eq!(
        (who["scopes"].clone(), who["name"].clone()),
        (json!(["read"]), json!("dash"))
    );
    let (_, who) = call(Method::GET, "/v1/whoami", Some(&admin), None).await;
    assert_eq!(who["scopes"], json!(["read", "write", "admin"]));
    let (status, _) = call(Method::GET, "/v1/whoami", Some("rt_nobody_x"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, p) = call(Method::GET, "/v1/queues", None, None).await;
    assert_eq!(
        (status, p["type"].clone()),
        (
            StatusCode::UNAUTHORIZED,
            json!("urn:ratchet:problem:unauthorized")
        )
    );
    let (status, _) = call(Method::GET, "/v1/queues", Some("rt_nope_nope"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        call(Method::GET, "/v1/queues", Some(&reader), None).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call(Method::GET, "/metrics", Some(&reader), None).await.0,
        StatusCode::OK
    );
    let start = json!({"name": "fanout", "id": "a1", "input": {"activities": 1}});
    let (status, p) = call(
        Method::POST,
        "/v1/instances",
        Some(&reader),
        Some(start.clone()),
    )
    .await;
    assert_eq!(
        (status, p["type"].clone()),
        (
            StatusCode::FORBIDDEN,
            json!("urn:ratchet:problem:forbidden")
        )
    );
    assert_eq!(
        call(Method::POST, "/v1/instances", Some(&writer), Some(start))
            .await
            .0,
        StatusCode::CREATED
    );
    let pause = "/v1/queues/default/pause";
    assert_eq!(
        call(Method::POST, pause, Some(&writer), Some(json!({})))
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        call(Method::POST, pause, Some(&admin), Some(json!({})))
            .await
            .0,
        StatusCode::OK
    );
    let id = writer.split('_').nth(1).unwrap().to_string();
    let out = common::run(store_args, &["tokens", "revoke", &id]);
    assert!(out.status.success(), "{}", common::text(&out));
    // Read a moment ago, the token may still be let in; a second after, it is not.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (status, p) = call(Method::GET, "/v1/queues", Some(&writer), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{p}");
    // The CLI on the server: no database credentials, the token's scope holds.
    let remote = |token: &str, args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ratchet"))
            .args(["--server", &server.base, "--token", token])
            .args(args)
            .env_remove("DATABASE_URL")
            .output()
            .unwrap()
    };
    let started = remote(
        &admin,
        &[
            "instances",
            "start",
            "fanout",
            "--id",
            "r1",
            "--input",
            r#"{"activities":2}"#,
        ],
    );
    assert!(started.status.success(), "{}", common::text(&started));
    assert_eq!(String::from_utf8_lossy(&started.stdout).trim(), "r1");
    let waited = remote(
        &reader,
        &["instances", "wait", "r1", "--timeout-secs", "20"],
    );
    assert!(
        common::text(&waited).contains("r1: Completed"),
        "{}",
        common::text(&waited)
    );
    let listed = remote(&reader, &["instances", "list", "--json"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains("\"id\":\"r1\""),
        "{}",
        common::text(&listed)
    );
    let history = remote(&reader, &["instances", "history", "r1"]);
    assert!(
        common::text(&history).contains("ExecutionStarted"),
        "{}",
        common::text(&history)
    );
    // (The admin paused the queue above.)
    let resumed = remote(&admin, &["queues", "resume", "default"]);
    assert!(resumed.status.success(), "{}", common::text(&resumed));
    let enqueued = remote(
        &admin,
        &["tasks", "enqueue", "work", "--input", r#"{"ms":1}"#],
    );
    let task = String::from_utf8_lossy(&enqueued.stdout).trim().to_string();
    assert!(task.parse::<i64>().is_ok(), "{}", common::text(&enqueued));
    let done = remote(&reader, &["tasks", "wait", &task, "--timeout-secs", "20"]);
    assert!(done.status.success(), "{}", common::text(&done));
    let queues = remote(&reader, &["queues", "list"]);
    assert!(
        common::text(&queues).contains("default"),
        "{}",
        common::text(&queues)
    );
    let refused = remote(&reader, &["queues", "resume", "default"]);
    assert!(!refused.status.success());
    assert!(
        common::text(&refused).contains("needs the admin scope"),
        "{}",
        common::text(&refused)
    );
    // `workflows delete` on the server needs the write scope, like an apply.
    let refused = remote(&reader, &["workflows", "delete", "demo/nothing"]);
    assert!(!refused.status.success());
    assert!(
        common::text(&refused).contains("needs the write scope"),
        "{}",
        common::text(&refused)
    );
    let source = "document: {dsl: '1.0.0', namespace: demo, name: gone, version: '1.0.0'}\n\
                  do:\n  - done:\n      set: '${ {a: 1} }'\n";
    let (status, applied) = call(
        Method::POST,
        "/v1/workflows",
        Some(&admin),
        Some(json!({"source": source})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{applied}");
    let deleted = remote(&admin, &["workflows", "delete", "demo/gone"]);
    assert!(deleted.status.success(), "{}", common::text(&deleted));
    assert_eq!(
        String::from_utf8_lossy(&deleted.stdout).trim(),
        "deleted demo/gone 1.0.0 (revision 1)"
    );
    let again = remote(&admin, &["workflows", "delete", "demo/gone"]);
    assert!(!again.status.success());
    assert!(
        common::text(&again).contains("not found: workflow demo/gone"),
        "{}",
        common::text(&again)
    );
    let missing = remote(&reader, &["instances", "show", "no/such id"]);
    assert!(
        common::text(&missing).contains("not found"),
        "{}",
        common::text(&missing)
    );
    // Events: append (a condition that fails exits 3), read, and follow.
    let append = |args: &[&str]| {
        let mut all = vec!["events", "append", "--type", "Seen", "--tag", "k:1"];
        all.extend_from_slice(args);
        remote(&admin, &all)
    };
    let first = append(&[]);
    assert!(first.status.success(), "{}", common::text(&first));
    let again = append(&["--fail-if-tag", "k:1", "--after", "0"]);
    assert_eq!(again.status.code(), Some(3), "{}", common::text(&again));
    let read = remote(&reader, &["events", "read", "--tag", "k:1", "--json"]);
    let lines = String::from_utf8_lossy(&read.stdout).to_string();
    assert_eq!(lines.lines().count(), 1, "{}", common::text(&read));
    assert!(lines.contains("\"type\":\"Seen\""), "{lines}");
    let mut tail = std::process::Command::new(env!("CARGO_BIN_EXE_ratchet"))
        .args(["--server", &server.base, "--token", &reader])
        .args(["events", "tail", "--type", "Seen", "--json"])
        .env_remove("DATABASE_URL")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut followed = BufReader::new(tail.stdout.take().unwrap()).lines();
    let seen = followed.next().unwrap().unwrap();
    assert!(
        seen.contains("\"position\":1") || seen.contains("Seen"),
        "{seen}"
    );
    assert!(append(&[]).status.success());
    let next = followed.next().unwrap().unwrap();
    assert!(next.contains("\"type\":\"Seen\""), "{next}");
    let _ = tail.kill();
    let _ = tail.wait();
    let out = common::run(store_args, &["tokens", "list", "--json"]);
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(listed.lines().count(), 3, "{listed}");
    assert!(!listed.contains(&writer), "a list never shows a secret");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_scopes_on_sqlite() {
    let (args, _store, _dir) = common::sqlite().await;
    auth(&args).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_and_scopes_on_postgres() {
    let Some((args, _store)) = common::postgres().await else {
        return;
    };
    auth(&args).await;
}

/// Past its limit of requests held open, a server answers 429 instead of holding more; a
/// request let go frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_waiting_requests_get_429() {
    let (args, _store, _dir) = common::sqlite().await;
    let server = Server::start(&args, &["--max-waiting", "1"]);
    let (status, _) = post(&server, "/v1/instances", order("held")).await;
    assert_eq!(status, StatusCode::CREATED);
    // The order waits for a signal that never comes: its wait holds the one place.
    let url = server.url("/v1/instances/held/wait?timeout_ms=3000");
    let holder = tokio::spawn(async move { http().get(url).send().await.unwrap().status() });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, p) = get(&server, "/v1/instances/held/wait?timeout_ms=10").await;
    assert_eq!(
        (status, p["limit"].clone()),
        (StatusCode::TOO_MANY_REQUESTS, json!(1))
    );
    let (status, _) = get(&server, "/v1/events/stream").await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(holder.await.unwrap(), StatusCode::OK);
    let (status, p) = get(&server, "/v1/instances/held/wait?timeout_ms=10").await;
    assert_eq!(
        (status, p["finished"].clone()),
        (StatusCode::OK, json!(false))
    );
}

/// `--tls-cert`/`--tls-key` serve HTTPS, which a client that trusts the certificate reaches
/// and a plain HTTP request does not; a bad certificate stops the server before it serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_speaks_https_with_a_certificate() {
    let (args, _store, dir) = common::sqlite().await;
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.key_pair.serialize_pem()).unwrap();
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let mut server = Server::start(&args, &["--tls-cert", &cert_arg, "--tls-key", &key_arg]);
    assert!(server.base.starts_with("https://"), "{}", server.base);
    let port = server.base.rsplit(':').next().unwrap().to_string();
    let trusted = reqwest::Client::builder()
        .add_root_certificate(
            reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).unwrap(),
        )
        .build()
        .unwrap();
    let answer = trusted
        .get(format!("https://localhost:{port}/v1/registry"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let plain = http()
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await;
    assert!(
        plain.is_err() || !plain.unwrap().status().is_success(),
        "plain HTTP is not served"
    );
    server.stop();

    std::fs::write(&key, "not a key").unwrap();
    let out = common::run(
        &args,
        &[
            "server",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            &cert_arg,
            "--tls-key",
            &key_arg,
        ],
    );
    assert!(!out.status.success());
    assert!(
        common::text(&out).contains("TLS certificate"),
        "{}",
        common::text(&out)
    );
}

/// Outside loopback the server refuses to serve without auth.
#[test]
fn a_public_address_needs_auth_or_an_explicit_opt_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.db").display().to_string();
    let out = common::run(&["--db".into(), db], &["server", "--listen", "0.0.0.0:0"]);
    assert!(!out.status.success());
    assert!(
        common::text(&out).contains("--insecure-no-auth"),
        "{}",
        common::text(&out)
    );
}

/// A stand-in OpenTelemetry collector: keeps every span sent to its OTLP/HTTP JSON endpoint.
struct Collector {
    url: String,
    spans: std::sync::Arc<std::sync::Mutex<Vec<Value>>>,
}

impl Collector {
    async fn start() -> Collector {
        let spans = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = spans.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    let sent: Value = serde_json::from_slice(&body).expect("OTLP JSON");
                    let resources = sent["resourceSpans"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    for resource in resources {
                        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                            for span in scope["spans"].as_array().into_iter().flatten() {
                                kept.lock().unwrap().push(span.clone());
                            }
                        }
                    }
                    axum::Json(json!({}))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Collector { url, spans }
    }

    fn named(&self, name: &str) -> Vec<Value> {
        let spans = self.spans.lock().unwrap();
        spans
            .iter()
            .filter(|s| s["name"] == name)
            .cloned()
            .collect()
    }
}

/// A start's `traceparent` reaches its instance: the request, every turn and every activity
/// arrive at the collector in the caller's trace, each under the span that caused it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_carries_its_trace_into_the_turns_and_activities() {
    let (args, _store, _dir) = common::sqlite().await;
    let collector = Collector::start().await;
    let mut server = Server::start(&args, &["--otlp-endpoint", &collector.url]);
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller = "00f067aa0ba902b7";
    let response = http()
        .post(server.url("/v1/instances"))
        .header("traceparent", format!("00-{trace_id}-{caller}-01"))
        .json(&json!({"name": "fanout", "id": "traced", "input": {"activities": 2}}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::CREATED);
    let (_, done) = get(&server, "/v1/instances/traced/wait?timeout_ms=20000").await;
    assert_eq!(done["status"], "Completed", "{done}");
    // A malformed traceparent is ignored, as the W3C asks: the start still succeeds.
    let response = http()
        .post(server.url("/v1/instances"))
        .header("traceparent", "00-not-a-trace-01")
        .json(&json!({"name": "fanout", "id": "untraced", "input": {"activities": 1}}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::CREATED);
    let (_, done) = get(&server, "/v1/instances/untraced/wait?timeout_ms=20000").await;
    assert_eq!(done["status"], "Completed", "{done}");
    // Stopping sends the spans not yet exported.
    server.stop();

    let requests: Vec<Value> = collector
        .named("POST /v1/instances")
        .into_iter()
        .filter(|s| s["traceId"] == trace_id)
        .collect();
    assert_eq!(requests.len(), 1, "{:?}", collector.spans.lock().unwrap());
    let request = &requests[0];
    assert_eq!(
        request["parentSpanId"], caller,
        "the request joins the caller's span"
    );
    let in_trace = |name: &str| -> Vec<Value> {
        collector
            .named(name)
            .into_iter()
            .filter(|s| s["traceId"] == trace_id)
            .collect()
    };
    let turns = in_trace("ratchet.turn");
    assert!(
        turns.len() >= 2,
        "a turn schedules, a later one completes: {turns:?}"
    );
    for turn in &turns {
        assert_eq!(turn["parentSpanId"], request["spanId"], "{turn}");
    }
    let activities = in_trace("ratchet.activity");
    assert_eq!(activities.len(), 2, "{activities:?}");
    let turn_ids: Vec<&Value> = turns.iter().map(|t| &t["spanId"]).collect();
    for activity in &activities {
        assert!(
            turn_ids.contains(&&activity["parentSpanId"]),
            "an activity is a child of the turn that scheduled it: {activity}"
        );
    }
    // The untraced instance has traces of its own, none of them the caller's.
    let all_turns = collector.named("ratchet.turn");
    assert!(
        all_turns.len() > turns.len(),
        "the second instance's turns are traced too"
    );
}
