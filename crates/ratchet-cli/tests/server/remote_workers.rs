//! Workers in other processes, over HTTP only: they claim, renew, report and give back
//! attempts through `/v1/workers/{worker}/…`, with the leases, fences and attempt accounting
//! of in-process workers. The worker here is this test, speaking the protocol by hand.

use reqwest::StatusCode;
use serde_json::{json, Value};

use super::{common, get, post, Server};

async fn claim(server: &Server, worker: &str, body: Value) -> Vec<Value> {
    let (status, claimed) = post(server, &format!("/v1/workers/{worker}/claim"), body).await;
    assert_eq!(status, StatusCode::OK, "{claimed}");
    claimed["tasks"].as_array().unwrap().clone()
}

async fn report(server: &Server, worker: &str, results: Value) -> Vec<String> {
    let (status, reported) = post(
        server,
        &format!("/v1/workers/{worker}/complete"),
        json!({ "results": results }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{reported}");
    reported["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["result"].as_str().unwrap().to_string())
        .collect()
}

async fn task(server: &Server, id: i64) -> Value {
    let (status, task) = get(server, &format!("/v1/tasks/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{task}");
    task
}

async fn enqueue(server: &Server, input: Value, options: Value) -> i64 {
    let (status, enqueued) = post(
        server,
        "/v1/tasks",
        json!({"name": "remote.echo", "input": input, "options": options}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{enqueued}");
    enqueued["id"].as_i64().unwrap()
}

async fn remote_workers(store_args: &[String]) {
    let server = Server::start(store_args, &["--no-worker"]);
    let echo = json!({"queues": [{"queue": "remote", "limit": 10}], "names": ["remote.echo"],
                      "lease_ms": 30000});
    // Nothing runs the name yet: an enqueue is refused. A worker's first claim makes it known.
    let (status, refused) = post(
        &server,
        "/v1/tasks",
        json!({"name": "remote.echo", "input": 1, "options": {"queue": "remote"}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(claim(&server, "w1", echo.clone()).await.is_empty());
    // (A server reads the fleet at most once a second.)
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (_, workers) = get(&server, "/v1/workers").await;
    let w1 = workers
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["id"] == "w1")
        .cloned()
        .unwrap_or_else(|| panic!("w1 is not in the fleet: {workers}"));
    assert_eq!(
        (w1["alive"].clone(), w1["tasks"].clone()),
        (json!(true), json!(["remote.echo"]))
    );

    let retry = json!({"max_attempts": 3, "initial_interval_ms": 1, "max_interval_ms": 1});
    let options = json!({"queue": "remote", "retry": retry, "metadata": {"who": "t"}});
    let done = enqueue(&server, json!({"n": 1}), options.clone()).await;
    let flaky = enqueue(&server, json!({"n": 2}), options.clone()).await;
    let cancelled = enqueue(&server, json!({"n": 3}), options.clone()).await;
    let mut claimed = claim(&server, "w1", echo.clone()).await;
    claimed.sort_by_key(|t| t["id"].as_i64());
    assert_eq!(claimed.len(), 3, "{claimed:?}");
    let first = &claimed[0];
    assert_eq!(
        (
            first["id"].as_i64(),
            first["name"].clone(),
            first["input"].clone()
        ),
        (Some(done), json!("remote.echo"), json!({"n": 1}))
    );
    assert_eq!(
        (first["attempt"].clone(), first["max_attempts"].clone()),
        (json!(1), json!(3))
    );
    assert_eq!(first["metadata"]["who"], "t");
    assert!(
        first.get("activity").is_none(),
        "a standalone task serves no step"
    );
    assert_eq!(task(&server, done).await["state"], "Running");
    let fence = |id: i64| {
        claimed
            .iter()
            .find(|t| t["id"].as_i64() == Some(id))
            .map(|t| t["fence"].as_i64().unwrap())
            .unwrap()
    };

    // A client cancels one while it runs: the heartbeat says so; the others hold.
    let (status, acted) = post(&server, &format!("/v1/tasks/{cancelled}/cancel"), json!({})).await;
    assert_eq!(
        (status, acted["outcome"].clone()),
        (StatusCode::OK, json!("requested"))
    );
    let beats: Vec<Value> = claimed
        .iter()
        .map(|t| json!({"id": t["id"], "fence": t["fence"]}))
        .collect();
    let (status, leases) = post(
        &server,
        "/v1/workers/w1/heartbeat",
        json!({"tasks": beats, "lease_ms": 30000}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{leases}");
    let lease_of = |id: i64| {
        leases["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["id"].as_i64() == Some(id))
            .map(|l| l["lease"].clone())
            .unwrap()
    };
    assert_eq!(
        (lease_of(done), lease_of(flaky), lease_of(cancelled)),
        (json!("kept"), json!("kept"), json!("cancel"))
    );

    // Ends: a success, a retryable failure, the cancellation, and a report on a stale fence.
    let results = json!([
        {"id": done, "fence": fence(done), "outcome": "completed", "output": {"echo": 1}},
        {"id": flaky, "fence": fence(flaky), "outcome": "failed",
         "error": {"kind": "Flaky", "message": "try again"}},
        {"id": cancelled, "fence": fence(cancelled), "outcome": "cancelled"},
        {"id": done, "fence": fence(done) + 7, "outcome": "completed", "output": 2},
    ]);
    assert_eq!(
        report(&server, "w1", results).await,
        ["applied", "applied", "applied", "stale"]
    );
    let finished = task(&server, done).await;
    assert_eq!(
        (finished["state"].clone(), finished["output"].clone()),
        (json!("Completed"), json!({"echo": 1}))
    );
    assert_eq!(task(&server, cancelled).await["state"], "Cancelled");
    let retrying = task(&server, flaky).await;
    assert_eq!(retrying["error"]["kind"], "Flaky", "{retrying}");

    // Its second attempt goes to w1, which is killed: nothing renews the lease. Once it runs
    // out, w2 takes the third attempt, and w1's late report is refused.
    let short = json!({"queues": [{"queue": "remote", "limit": 10}], "names": ["remote.echo"],
                       "lease_ms": 1000, "wait_ms": 5000});
    let second = claim(&server, "w1", short).await;
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(
        (second[0]["id"].as_i64(), second[0]["attempt"].clone()),
        (Some(flaky), json!(2))
    );
    let wait = json!({"queues": [{"queue": "remote", "limit": 10}], "names": ["remote.echo"],
                      "wait_ms": 20000});
    let third = claim(&server, "w2", wait.clone()).await;
    assert_eq!(third.len(), 1, "{third:?}");
    assert_eq!(
        (third[0]["id"].as_i64(), third[0]["attempt"].clone()),
        (Some(flaky), json!(3))
    );
    let late =
        json!([{"id": flaky, "fence": second[0]["fence"], "outcome": "completed", "output": 0}]);
    assert_eq!(report(&server, "w1", late).await, ["stale"]);
    // A failure no retry mends: a dead letter after three attempts.
    let fatal = json!([{"id": flaky, "fence": third[0]["fence"], "outcome": "failed",
                        "error": {"kind": "Fatal", "message": "no"}, "retryable": false}]);
    assert_eq!(report(&server, "w2", fatal).await, ["applied"]);
    let dead = task(&server, flaky).await;
    assert_eq!(
        (dead["state"].clone(), dead["attempt"].clone()),
        (json!("Dead"), json!(3)),
        "{dead}"
    );

    // A claim waiting for work gets a task enqueued meanwhile; one given back is claimed
    // again at once, its attempt not counted.
    let waiting = {
        let base = server.base.clone();
        let wait = wait.clone();
        tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{base}/v1/workers/w2/claim"))
                .json(&wait)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let later = enqueue(&server, json!({"n": 4}), options.clone()).await;
    let woken = waiting.await.unwrap();
    assert_eq!(woken["tasks"][0]["id"].as_i64(), Some(later), "{woken}");
    let (status, _) = post(
        &server,
        "/v1/workers/w2/release",
        json!({"tasks": [{"id": later, "fence": woken["tasks"][0]["fence"]}]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let again = claim(&server, "w1", echo.clone()).await;
    assert_eq!(
        (again[0]["id"].as_i64(), again[0]["attempt"].clone()),
        (Some(later), json!(1))
    );

    // Bad requests are refused, naming the field. Details deeper or larger than a payload
    // may be would make the task's row, or an activity's history, hard to read back.
    let mut deep = json!(1);
    for _ in 0..120 {
        deep = json!([deep]);
    }
    let failed = |details: Value| {
        json!({"results": [{"id": later, "fence": 1, "outcome": "failed",
                             "error": {"kind": "Boom", "message": "m", "details": details}}]})
    };
    for (path, body, field) in [
        (
            "/v1/workers/w1/complete",
            failed(deep),
            "results[0].error.details",
        ),
        (
            "/v1/workers/w1/complete",
            failed(json!("x".repeat(40 << 10))),
            "results[0].error.details",
        ),
        (
            "/v1/workers/w1/claim",
            json!({"names": ["remote.echo"], "queues": [{"queue": "remote", "limit": 1}], "lease_ms": 10}),
            "lease_ms",
        ),
        (
            "/v1/workers/w1/claim",
            json!({"names": [], "queues": [{"queue": "remote", "limit": 1}]}),
            "",
        ),
        (
            "/v1/workers/w1/complete",
            json!({"results": [{"id": later, "fence": 1, "outcome": "bogus"}]}),
            "results[0].outcome",
        ),
        (
            "/v1/workers/w1/complete",
            json!({"results": [{"id": later, "fence": 1, "outcome": "failed"}]}),
            "results[0].error",
        ),
    ] {
        let (status, problem) = post(&server, path, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
        if !field.is_empty() {
            assert_eq!(problem["field"], field, "{problem}");
        }
    }
}

/// Starts instance `id` of `remote/greet` for `who`, and claims its one attempt with `body`.
async fn started_and_claimed(server: &Server, body: &Value, id: &str, who: &str) -> Vec<Value> {
    let (status, started) = post(
        server,
        "/v1/instances",
        json!({"name": "remote/greet", "id": id, "input": {"who": who}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{started}");
    let attempts = claim(server, "far", body.clone()).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    attempts
}

/// A workflow the server's own runtime runs calls an activity that only a worker over HTTP
/// runs: the server accepts the definition once the worker made the name known, the worker
/// claims the activity's attempt with the step it serves, and its report ends the instance.
async fn remote_activities(store_args: &[String]) {
    let server = Server::start(store_args, &[]);
    let definition = |activity: &str| {
        json!({"source": format!(
            "document: {{dsl: '1.0.0', namespace: remote, name: {activity}, version: '1.0.0'}}\n\
             do:\n  - greet:\n      call: {activity}\n      with: {{who: '${{ .who }}'}}\n"
        )})
    };
    // Nothing runs `nobody`: refused, naming it.
    let (status, refused) = post(&server, "/v1/workflows", definition("nobody")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("no activity named `nobody`"),
        "{refused}"
    );
    // A worker's claim makes `greet` known at once: an apply reads the fleet afresh.
    let greet = json!({"activities": 5, "names": ["greet"], "lease_ms": 30000});
    assert!(claim(&server, "far", greet.clone()).await.is_empty());
    let (status, applied) = post(&server, "/v1/workflows", definition("greet")).await;
    assert_eq!(status, StatusCode::CREATED, "{applied}");
    assert_eq!(applied["name"], "remote/greet", "{applied}");

    let mut waiting = greet;
    waiting["wait_ms"] = json!(20000);
    let attempts = started_and_claimed(&server, &waiting, "rg1", "ann").await;
    let attempt = &attempts[0];
    assert_eq!(
        (
            attempt["name"].clone(),
            attempt["input"].clone(),
            attempt["activity"]["instance"].clone(),
            attempt["attempt"].clone()
        ),
        (
            json!("greet"),
            json!({"who": "ann"}),
            json!("rg1"),
            json!(1)
        ),
        "{attempt}"
    );
    let ended = report(
        &server,
        "far",
        json!([{"id": attempt["id"], "fence": attempt["fence"], "outcome": "completed",
                "output": {"hello": "ann"}}]),
    )
    .await;
    assert_eq!(ended, ["applied"]);
    let (_, done) = get(&server, "/v1/instances/rg1/wait?timeout_ms=20000").await;
    assert_eq!(
        (done["status"].clone(), done["output"].clone()),
        (json!("Completed"), json!({"hello": "ann"})),
        "{done}"
    );

    // Restarted, the server loads the stored definition though nothing here runs `greet`.
    drop(server);
    let server = Server::start(store_args, &[]);
    let attempts = started_and_claimed(&server, &waiting, "rg2", "bo").await;
    let ended = report(
        &server,
        "far",
        json!([{"id": attempts[0]["id"], "fence": attempts[0]["fence"],
                "outcome": "completed", "output": "hi bo"}]),
    )
    .await;
    assert_eq!(ended, ["applied"]);
    let (_, done) = get(&server, "/v1/instances/rg2/wait?timeout_ms=20000").await;
    assert_eq!(done["output"], "hi bo", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_workers_on_sqlite() {
    let (args, _store, _dir) = common::sqlite().await;
    let migrate = common::run(&args, &["migrate"]);
    assert!(migrate.status.success(), "{}", common::text(&migrate));
    remote_workers(&args).await;
    remote_activities(&args).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_workers_on_postgres() {
    let Some((args, _store)) = common::postgres().await else {
        return;
    };
    remote_workers(&args).await;
    remote_activities(&args).await;
}

/// A token of `worker:<queue>` works that queue through the worker routes and nothing else:
/// every other route of the API answers 403, route by route, and so does work of another
/// queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_token_works_its_queue_only() {
    let (args, _store, _dir) = common::sqlite().await;
    let migrate = common::run(&args, &["migrate"]);
    assert!(migrate.status.success(), "{}", common::text(&migrate));
    let token = |name: &str, scope: &str| {
        let out = common::run(
            &args,
            &["tokens", "create", "--name", name, "--scope", scope],
        );
        assert!(out.status.success(), "{}", common::text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let (worker, admin) = (token("mailer", "worker:remote"), token("ops", "admin"));
    let bad = common::run(
        &args,
        &["tokens", "create", "--name", "x", "--scope", "worker:$x"],
    );
    assert!(
        !bad.status.success(),
        "a queue name users cannot have is refused"
    );
    let server = Server::start(&args, &["--auth", "--no-worker"]);
    let call = |method: reqwest::Method, path: String, token: &str, body: Value| {
        let request = reqwest::Client::new()
            .request(method, server.url(&path))
            .bearer_auth(token)
            .json(&body);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            (
                status,
                response.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    use reqwest::Method;

    // Every route but the worker routes and the open ones, whatever it would do.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    let document: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut checked = 0;
    for (route, methods) in document["paths"].as_object().unwrap() {
        if route.starts_with("/v1/workers/{worker}/")
            || ["/healthz", "/readyz", "/openapi.json", "/v1/whoami"].contains(&route.as_str())
        {
            continue;
        }
        let concrete = route
            .replace("{id}", "1")
            .replace("{name}", "x")
            .replace("{namespace}", "ns")
            .replace("{version}", "1");
        for method in methods.as_object().unwrap().keys() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let (status, problem) =
                call(method.clone(), concrete.clone(), &worker, json!({})).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{method} {route}: {problem}");
            checked += 1;
        }
    }
    assert!(checked > 40, "only {checked} routes checked");

    // Its own queue: claimed, renewed and reported. Another queue's work, or activities: 403.
    let enqueue = |queue: &str| {
        call(
            Method::POST,
            "/v1/tasks?allow_unknown=true".into(),
            &admin,
            json!({"name": "remote.echo", "input": 1, "options": {"queue": queue}}),
        )
    };
    let (status, mine) = enqueue("remote").await;
    assert_eq!(status, StatusCode::CREATED, "{mine}");
    let (status, theirs) = enqueue("other").await;
    assert_eq!(status, StatusCode::CREATED, "{theirs}");
    let claim = |token: &str, queue: &str, activities: u32| {
        call(
            Method::POST,
            "/v1/workers/w1/claim".into(),
            token,
            json!({"queues": [{"queue": queue, "limit": 5}], "activities": activities,
                   "names": ["remote.echo"]}),
        )
    };
    let (status, claimed) = claim(&worker, "remote", 0).await;
    assert_eq!(status, StatusCode::OK, "{claimed}");
    assert_eq!(claimed["tasks"][0]["id"], mine["id"]);
    let fence = claimed["tasks"][0]["fence"].clone();
    assert_eq!(claim(&worker, "other", 0).await.0, StatusCode::FORBIDDEN);
    assert_eq!(claim(&worker, "remote", 1).await.0, StatusCode::FORBIDDEN);
    // The other queue's task, claimed with the admin's token: the worker's may not touch it.
    let (status, other) = claim(&admin, "other", 0).await;
    assert_eq!(status, StatusCode::OK, "{other}");
    let their_lease = json!({"id": theirs["id"], "fence": other["tasks"][0]["fence"]});
    for (route, body) in [
        ("heartbeat", json!({"tasks": [their_lease.clone()]})),
        ("release", json!({"tasks": [their_lease.clone()]})),
        (
            "complete",
            json!({"results": [{"id": theirs["id"], "fence": other["tasks"][0]["fence"],
                                         "outcome": "completed", "output": 1}]}),
        ),
    ] {
        let (status, problem) = call(
            Method::POST,
            format!("/v1/workers/w1/{route}"),
            &worker,
            body,
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{route}: {problem}");
    }
    let (status, beat) = call(
        Method::POST,
        "/v1/workers/w1/heartbeat".into(),
        &worker,
        json!({"tasks": [{"id": mine["id"], "fence": fence}]}),
    )
    .await;
    assert_eq!(
        (status, beat["tasks"][0]["lease"].clone()),
        (StatusCode::OK, json!("kept"))
    );
    let (status, reported) = call(
        Method::POST,
        "/v1/workers/w1/complete".into(),
        &worker,
        json!({"results": [{"id": mine["id"], "fence": fence, "outcome": "completed", "output": 2}]}),
    )
    .await;
    assert_eq!(
        (status, reported["results"][0]["result"].clone()),
        (StatusCode::OK, json!("applied"))
    );
    let (_, done) = call(
        Method::GET,
        format!("/v1/tasks/{}", mine["id"]),
        &admin,
        Value::Null,
    )
    .await;
    assert_eq!(done["state"], "Completed", "{done}");
}
