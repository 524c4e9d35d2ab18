//! `ratchet server` under hostile but ordinary use: many idle connections, a client that
//! sends its request head a byte at a time, more connections than the cap, a stop with
//! streams open, a token revoked while its stream is open. Each test asserts what the
//! server does, with bounds generous enough never to measure its speed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::json;

use super::{common, get, http, order, post, Server};

/// The `host:port` a server listens on.
fn address(server: &Server) -> String {
    server
        .base
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .to_string()
}

/// Sends one `GET path` on `conn` and reads the whole answer (it must carry a length).
fn exchange(conn: &mut TcpStream, host: &str, path: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\n\r\n");
    conn.write_all(request.as_bytes()).unwrap();
    read_answer(conn)
}

/// One answer's head and body, read up to its `content-length` (or to the close).
fn read_answer(conn: &mut TcpStream) -> String {
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(usize::MAX);
            if body.len() >= length {
                return text;
            }
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&got).to_string(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// The resident memory of process `pid`, in KiB (Linux).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Idle connections are cheap: 500 kept-alive connections, each after one request, add
/// less than 64 KiB each to the server's memory (it cloned its routes, with the OpenAPI
/// document, for each connection: about 1.6 MB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_cost_little_memory() {
    let (args, _store, _dir) = common::sqlite().await;
    let server = Server::start(&args, &[]);
    let host = address(&server);
    let Some(before) = rss_kib(server.child.id()) else {
        eprintln!("no /proc here: skipped");
        return;
    };
    const CONNECTIONS: u64 = 500;
    let held: Vec<TcpStream> = (0..CONNECTIONS)
        .map(|_| {
            let mut conn = TcpStream::connect(&host).unwrap();
            let answer = exchange(&mut conn, &host, "/healthz");
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            conn
        })
        .collect();
    let after = rss_kib(server.child.id()).unwrap();
    let each = after.saturating_sub(before) / CONNECTIONS;
    assert!(
        each < 64,
        "{CONNECTIONS} idle connections took {} KiB: {each} KiB each",
        after.saturating_sub(before)
    );
    drop(held);
}

/// A client that sends its request head a byte at a time is dropped once the header-read
/// timeout passes, without an answer; a prompt client on another connection is served
/// meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_request_head_is_dropped() {
    let (args, _store, _dir) = common::sqlite().await;
    let server = Server::start(&args, &["--header-timeout-ms", "1000"]);
    let host = address(&server);
    let mut slow = TcpStream::connect(&host).unwrap();
    let head = format!(
        "GET /healthz HTTP/1.1\r\nhost: {host}\r\nx-padding: {}\r\n\r\n",
        "a".repeat(100)
    );
    // 150 bytes, one each 100 ms: 15 s if the server kept listening.
    let mut sent = 0;
    for byte in head.as_bytes() {
        if slow.write_all(&[*byte]).is_err() {
            break;
        }
        sent += 1;
        std::thread::sleep(Duration::from_millis(100));
        if sent == 20 {
            let mut prompt = TcpStream::connect(&host).unwrap();
            let answer = exchange(&mut prompt, &host, "/healthz");
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        }
    }
    let answer = read_answer(&mut slow);
    assert!(
        !answer.contains(" 200 "),
        "a head sent over {sent} x 100 ms was served: {answer}"
    );
    assert!(sent < head.len(), "the server read the whole slow head");
}

/// Past `--max-connections`, a connection is answered 503 with `Retry-After` as a problem
/// and closed; once one closes, a new one is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_are_refused_clearly() {
    let (args, _store, _dir) = common::sqlite().await;
    let server = Server::start(&args, &["--max-connections", "3"]);
    let host = address(&server);
    let mut open: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut conn = TcpStream::connect(&host).unwrap();
            let answer = exchange(&mut conn, &host, "/healthz");
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            conn
        })
        .collect();
    let mut over = TcpStream::connect(&host).unwrap();
    let answer = exchange(&mut over, &host, "/healthz").to_ascii_lowercase();
    assert!(answer.starts_with("http/1.1 503"), "{answer}");
    assert!(answer.contains("retry-after: 1"), "{answer}");
    assert!(
        answer.contains("content-type: application/problem+json"),
        "{answer}"
    );
    assert!(answer.contains("too-many-connections"), "{answer}");
    drop(open.pop());
    // The server frees the place when it sees the close: try until it has.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut conn = TcpStream::connect(&host).unwrap();
        let answer = exchange(&mut conn, &host, "/healthz");
        if answer.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "no place freed: {answer}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads an SSE response to its end: `Ok` when the server ended it, `Err` when the
/// connection broke.
async fn drain(response: reqwest::Response) -> Result<usize, reqwest::Error> {
    let mut body = response.bytes_stream();
    let mut read = 0;
    while let Some(chunk) = body.next().await {
        read += chunk?.len();
    }
    Ok(read)
}

/// Waits for the process to exit, up to `bound` (then kills it and fails).
fn exits_within(server: &mut Server, bound: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = server.child.kill();
            panic!("the server was still running {bound:?} after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM with 100 event streams, an instance stream and a long poll open: each ends
/// cleanly at once (the streams end, the wait answers where the instance stands), and the
/// server exits long before its grace (two minutes here) would close them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_ends_open_streams_and_long_polls() {
    let (args, _store, _dir) = common::sqlite().await;
    let mut server = Server::start(&args, &["--shutdown-grace-ms", "120000"]);
    let (status, _) = post(&server, "/v1/instances", order("held")).await;
    assert_eq!(status, StatusCode::CREATED);
    let mut open = Vec::new();
    for _ in 0..100 {
        let response = http()
            .get(server.url("/v1/events/stream"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        open.push(tokio::spawn(drain(response)));
    }
    let response = http()
        .get(server.url("/v1/instances/held/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    open.push(tokio::spawn(drain(response)));
    let wait = http()
        .get(server.url("/v1/instances/held/wait?timeout_ms=60000"))
        .send();
    let wait = tokio::spawn(async move {
        let response = wait.await?;
        let status = response.status();
        Ok::<_, reqwest::Error>((status, response.json::<serde_json::Value>().await?))
    });
    // Every request is in: the server counts 102 held open.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, page) = get(&server, "/metrics").await;
        if page
            .as_str()
            .is_some_and(|p| p.contains("ratchet_http_requests_held 102"))
        {
            break;
        }
        assert!(Instant::now() < deadline, "not every request came in");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let pid = server.child.id().to_string();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status();
    let status = tokio::task::block_in_place(|| exits_within(&mut server, Duration::from_secs(60)));
    assert!(status.success(), "server exited with {status}");
    for (i, stream) in open.into_iter().enumerate() {
        let ended = stream.await.unwrap();
        assert!(
            ended.is_ok(),
            "stream {i} broke instead of ending: {ended:?}"
        );
    }
    let (status, outcome) = wait.await.unwrap().expect("the wait was answered");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(outcome["finished"], json!(false), "{outcome}");
}

/// A token revoked while its event stream and instance stream are open ends both (within
/// seconds; the bound here is generous); a new request with it gets 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_tokens_streams_end() {
    let (args, _store, _dir) = common::sqlite().await;
    let migrate = common::run(&args, &["migrate"]);
    assert!(migrate.status.success(), "{}", common::text(&migrate));
    let out = common::run(
        &args,
        &["tokens", "create", "--name", "watcher", "--scope", "write"],
    );
    assert!(out.status.success(), "{}", common::text(&out));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let id = token.split('_').nth(1).unwrap().to_string();
    let server = Server::start(&args, &["--auth"]);
    let started = http()
        .post(server.url("/v1/instances"))
        .bearer_auth(&token)
        .json(&order("watched"))
        .send()
        .await
        .unwrap();
    assert_eq!(started.status(), StatusCode::CREATED);
    let mut open = Vec::new();
    for path in ["/v1/events/stream", "/v1/instances/watched/stream"] {
        let response = http()
            .get(server.url(path))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        open.push(tokio::spawn(drain(response)));
    }
    let out = common::run(&args, &["tokens", "revoke", &id]);
    assert!(out.status.success(), "{}", common::text(&out));
    for stream in open {
        let ended = tokio::time::timeout(Duration::from_secs(60), stream).await;
        let ended = ended.expect("the stream of a revoked token is still open after 60 s");
        assert!(ended.unwrap().is_ok(), "the stream broke instead of ending");
    }
    let refused = http()
        .get(server.url("/v1/events"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
}

/// Over HTTPS the cap holds too: a connection past it is closed before its handshake, and
/// a silent one is closed at the header-read timeout, handshake unfinished.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_connections_are_capped_and_timed() {
    let (args, _store, dir) = common::sqlite().await;
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert = dir.path().join("cert.pem");
    let key = dir.path().join("key.pem");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.key_pair.serialize_pem()).unwrap();
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let server = Server::start(
        &args,
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--max-connections",
            "1",
            "--header-timeout-ms",
            "1000",
        ],
    );
    let port = server.base.rsplit(':').next().unwrap().to_string();
    let client = || {
        reqwest::Client::builder()
            .add_root_certificate(
                reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).unwrap(),
            )
            .build()
            .unwrap()
    };
    let url = format!("https://localhost:{port}/healthz");
    // A silent connection holds the one place until the timeout closes it.
    let mut silent = TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut first = client().get(&url).send().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while first.is_ok() {
        // The silent connection may not be accepted yet: try until it holds the place.
        assert!(Instant::now() < deadline, "the cap of one never held");
        tokio::time::sleep(Duration::from_millis(50)).await;
        first = client().get(&url).send().await;
    }
    let mut buf = [0u8; 16];
    let read = silent.read(&mut buf);
    assert!(
        matches!(read, Ok(0)) || read.is_err(),
        "the silent connection was answered: {read:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client().get(&url).send().await {
            Ok(answer) => {
                assert_eq!(answer.status(), StatusCode::OK);
                break;
            }
            Err(e) => assert!(Instant::now() < deadline, "never served again: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends `request` (a whole request, head and body) on a new connection and reads the
/// answer's status code.
fn status_of(server: &Server, request: &str) -> u16 {
    let mut conn = TcpStream::connect(address(server)).unwrap();
    conn.write_all(request.as_bytes()).unwrap();
    let answer = read_answer(&mut conn);
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

/// A loopback server without `--auth` answers only requests that name it by a loopback
/// address or `localhost` with its port (a page on another name, rebound to 127.0.0.1 by
/// its DNS, gets 403), and refuses changes sent by a page of another origin (CSRF); its
/// own console's requests (same origin) go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_server_without_auth_answers_only_its_own_pages() {
    let (args, _store, _dir) = common::sqlite().await;
    let server = Server::start(&args, &[]);
    let port = server.base.rsplit(':').next().unwrap().to_string();
    let get_with = |host: &str| format!("GET /v1/queues HTTP/1.1\r\nhost: {host}\r\n\r\n");
    for good in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        format!("[::1]:{port}"),
        format!("127.1.2.3:{port}"),
    ] {
        assert_eq!(status_of(&server, &get_with(&good)), 200, "Host: {good}");
    }
    for bad in [
        "evil.example.com".to_string(),
        format!("evil.example.com:{port}"),
        format!("localhost.evil.example.com:{port}"),
        format!("10.0.0.1:{port}"),
        "localhost:1".to_string(),
        "127.0.0.1".to_string(),
    ] {
        assert_eq!(status_of(&server, &get_with(&bad)), 403, "Host: {bad}");
    }
    let no_host = "GET /v1/queues HTTP/1.0\r\n\r\n";
    assert_eq!(status_of(&server, no_host), 403, "no Host");

    let host = format!("127.0.0.1:{port}");
    let pause = |extra: &str| {
        format!(
            "POST /v1/queues/default/pause HTTP/1.1\r\nhost: {host}\r\n{extra}\
             content-length: 0\r\nconnection: close\r\n\r\n"
        )
    };
    for foreign in [
        "origin: https://evil.example.com\r\n".to_string(),
        format!("origin: http://evil.example.com:{port}\r\n"),
        "origin: http://127.0.0.1:1\r\n".to_string(),
        "origin: null\r\n".to_string(),
        "sec-fetch-site: cross-site\r\n".to_string(),
    ] {
        assert_eq!(status_of(&server, &pause(&foreign)), 403, "{foreign}");
    }
    let (_, queues) = get(&server, "/v1/queues").await;
    let default = queues
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "default");
    assert!(
        default.is_none_or(|q| q["paused"] == json!(false)),
        "a refused pause paused: {queues}"
    );
    for own in [
        format!("origin: http://127.0.0.1:{port}\r\nsec-fetch-site: same-origin\r\n"),
        format!("origin: http://localhost:{port}\r\n"),
        String::new(),
    ] {
        assert_eq!(status_of(&server, &pause(&own)), 200, "{own}");
    }
}

/// With `--auth` the token guards the server: a request with a valid token is answered
/// whatever name it used (a proxy in front may forward any).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_auth_answers_any_host() {
    let (args, _store, _dir) = common::sqlite().await;
    let migrate = common::run(&args, &["migrate"]);
    assert!(migrate.status.success(), "{}", common::text(&migrate));
    let out = common::run(
        &args,
        &["tokens", "create", "--name", "p", "--scope", "read"],
    );
    assert!(out.status.success(), "{}", common::text(&out));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let server = Server::start(&args, &["--auth"]);
    let request = format!(
        "GET /v1/queues HTTP/1.1\r\nhost: api.example.com\r\nauthorization: Bearer {token}\r\n\r\n"
    );
    assert_eq!(status_of(&server, &request), 200);
}

/// A query's items, types and tags are counted at the edge: over a limit is a 422 naming
/// the field, on every route that takes a query (before, any number of types was one
/// lookup each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_queries_are_bounded_at_the_edge() {
    let (args, _store, _dir) = common::sqlite().await;
    let server = Server::start(&args, &[]);
    let types = |n: usize| (0..n).map(|i| format!("T{i}")).collect::<Vec<_>>();
    let refused = |(status, p): (StatusCode, serde_json::Value), field: &str| {
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {p}");
        assert_eq!(p["field"], json!(field), "{p}");
    };
    let (status, _) = get(
        &server,
        &format!("/v1/events?types={}", types(64).join(",")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let many = types(65).join(",");
    refused(
        get(&server, &format!("/v1/events?types={many}")).await,
        "types",
    );
    let tags: Vec<String> = (0..65).map(|i| format!("k:{i}")).collect();
    refused(
        get(&server, &format!("/v1/events?tags={}", tags.join(","))).await,
        "tags",
    );
    refused(
        get(&server, &format!("/v1/events/stream?types={many}")).await,
        "types",
    );
    refused(
        post(
            &server,
            "/v1/events/query",
            json!({"query": [{"types": ["A"]}, {"types": types(65)}]}),
        )
        .await,
        "query[1].types",
    );
    let items: Vec<_> = (0..65).map(|_| json!({"types": ["A"]})).collect();
    refused(
        post(&server, "/v1/events/query", json!({ "query": items })).await,
        "query",
    );
    let items: Vec<_> = (0..5).map(|_| json!({ "types": types(64) })).collect();
    refused(
        post(&server, "/v1/events/query", json!({ "query": items })).await,
        "query[4].types",
    );
    let append = json!({"events": [{"type": "A"}],
        "condition": {"fail_if_events_match": [{"types": types(65)}]}});
    refused(
        post(&server, "/v1/events", append).await,
        "condition.fail_if_events_match[0].types",
    );
    let (_, page) = get(&server, "/v1/events").await;
    assert_eq!(page["events"], json!([]), "nothing was appended");
}

/// The smaller edges of reading a request: a body over the limit is a problem on every
/// route (cancel too) and is refused before `100 Continue`; a positional array is not an
/// object; a whole number written as a float is an integer; an optional body may be
/// `null`; an event over 1 MiB is 413 as documented; 429 says when to retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_read_strictly_where_json_is_loose() {
    let (args, _store, _dir) = common::sqlite().await;
    let server = Server::start(&args, &["--max-waiting", "1"]);
    let (status, _) = post(&server, "/v1/instances", order("o")).await;
    assert_eq!(status, StatusCode::CREATED);

    // 413 as a problem, also on the routes whose body is optional.
    let big = "x".repeat(5 << 20);
    for path in ["/v1/instances/o/cancel", "/v1/instances/o/terminate"] {
        let response = http()
            .post(server.url(path))
            .body(big.clone())
            .send()
            .await
            .unwrap();
        let (status, p) = super::answer(response).await;
        assert_eq!(
            (status, p["limit"].clone()),
            (StatusCode::PAYLOAD_TOO_LARGE, json!(4 << 20)),
            "{path}"
        );
    }
    // Refused before the body is sent: no `100 Continue`.
    let mut conn = TcpStream::connect(address(&server)).unwrap();
    let head = format!(
        "POST /v1/events HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nexpect: 100-continue\r\n\r\n",
        address(&server),
        5 << 20
    );
    conn.write_all(head.as_bytes()).unwrap();
    let answer = read_answer(&mut conn);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("application/problem+json"), "{answer}");

    // An optional body may be `null` (or nothing); `[null]` is not an object.
    let stop = |body: &'static str| {
        http()
            .post(server.url("/v1/instances/o/cancel"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let (status, p) = super::answer(stop("[\"why\"]").await.unwrap()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    let (status, p) = super::answer(stop("null").await.unwrap()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{p}");

    // Positional arrays are refused where an object is expected, nested ones too.
    let limits = |body: serde_json::Value| {
        let url = server.url("/v1/queues/default/limits");
        async move { super::answer(http().put(url).json(&body).send().await.unwrap()).await }
    };
    let (status, _) = limits(json!({"concurrency": 5})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, p) = limits(json!([null, null, null])).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    let (_, queues) = get(&server, "/v1/queues").await;
    let default = queues
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "default")
        .cloned()
        .unwrap();
    assert_eq!(default["limits"]["concurrency"], json!(5), "{default}");
    let batch = json!({"tasks": [["work", {}]]});
    let (status, p) = post(&server, "/v1/tasks/batch", batch).await;
    assert_eq!(
        (status, p["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("tasks[0]"))
    );

    // Whole numbers written as floats, as Python writes them, are integers.
    let task = json!({"name": "work", "input": {"ms": 1},
        "options": {"priority": 3.0, "delay_ms": 1168.0, "retry": {"max_attempts": 2.0}}});
    let (status, p) = post(&server, "/v1/tasks", task).await;
    assert_eq!(status, StatusCode::CREATED, "{p}");
    let task = json!({"name": "work", "input": {}, "options": {"priority": 3.5}});
    let (status, p) = post(&server, "/v1/tasks", task).await;
    assert_eq!(
        (status, p["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("options.priority"))
    );
    let (status, p) = get(&server, "/v1/events?limit=2").await;
    assert_eq!(status, StatusCode::OK, "{p}");

    // An event over 1 MiB is too large (413), naming it, within a body under 4 MiB.
    let event =
        json!({"events": [{"type": "A"}, {"type": "Big", "payload": "y".repeat(1_100_000)}]});
    let (status, p) = post(&server, "/v1/events", event).await;
    assert_eq!(
        (status, p["field"].clone(), p["limit"].clone()),
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            json!("events[1].payload"),
            json!(1 << 20)
        ),
        "{p}"
    );

    // 429 says when to try again.
    let (status, _) = post(&server, "/v1/instances", order("w")).await;
    assert_eq!(status, StatusCode::CREATED);
    let url = server.url("/v1/instances/w/wait?timeout_ms=20000");
    let holder = tokio::spawn(async move { http().get(url).send().await.unwrap().status() });
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, page) = get(&server, "/metrics").await;
        if page
            .as_str()
            .is_some_and(|p| p.contains("ratchet_http_requests_held 1"))
        {
            break;
        }
        assert!(Instant::now() < deadline, "the wait never held its place");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refused = http()
        .get(server.url("/v1/events/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        refused
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap()),
        Some("1")
    );
    let signal = json!({"name": "delivered", "payload": "here"});
    let (status, _) = post(&server, "/v1/instances/w/signals", signal).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(holder.await.unwrap(), StatusCode::OK);
}

/// The bearer scheme's name is case-insensitive (RFC 7235).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_in_any_case() {
    let (args, _store, _dir) = common::sqlite().await;
    let migrate = common::run(&args, &["migrate"]);
    assert!(migrate.status.success(), "{}", common::text(&migrate));
    let out = common::run(
        &args,
        &["tokens", "create", "--name", "c", "--scope", "read"],
    );
    assert!(out.status.success(), "{}", common::text(&out));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let server = Server::start(&args, &["--auth"]);
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let response = http()
            .get(server.url("/v1/queues"))
            .header("authorization", format!("{scheme} {token}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{scheme}");
    }
    let response = http()
        .get(server.url("/v1/queues"))
        .header("authorization", format!("Basic {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}

/// Identifiers a caller chooses are printable: an instance id, an orchestration, task or
/// signal name, a queue or schedule name holding a bidi override or a zero-width character
/// (which make two ids look alike in the console and the terminal) is refused with 422
/// naming the field, and nothing is written. One stored before the rule stays readable and
/// can be cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identifiers_with_invisible_or_reordering_characters_are_refused() {
    let (args, store, _dir) = common::sqlite().await;
    let server = Server::start(&args, &[]);
    let refused = |(status, p): (StatusCode, serde_json::Value), field: &str| {
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field}: {p}");
        assert_eq!(p["field"], json!(field), "{p}");
    };
    let spoof = "order-1\u{202E}gpj.exe";
    let zero_width = "order\u{200B}-1";
    refused(post(&server, "/v1/instances", order(spoof)).await, "id");
    refused(
        post(&server, "/v1/instances", order(zero_width)).await,
        "id",
    );
    refused(
        post(
            &server,
            "/v1/instances/batch",
            json!({"instances": [order("fine"), order(zero_width)]}),
        )
        .await,
        "instances[1].id",
    );
    refused(
        post(
            &server,
            "/v1/instances?allow_unknown=true",
            json!({"name": "ord\u{2066}er", "input": {}}),
        )
        .await,
        "name",
    );
    let (status, _) = post(&server, "/v1/instances", order("o")).await;
    assert_eq!(status, StatusCode::CREATED);
    refused(
        post(
            &server,
            "/v1/instances/o/signals",
            json!({"name": "deli\u{200D}vered"}),
        )
        .await,
        "name",
    );
    refused(
        post(
            &server,
            "/v1/tasks?allow_unknown=true",
            json!({"name": "wo\u{FEFF}rk", "input": {}}),
        )
        .await,
        "name",
    );
    let (status, p) = post(
        &server,
        "/v1/tasks",
        json!({"name": "work", "input": {}, "options": {"queue": "mail\u{200B}"}}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    let (status, p) = post(
        &server,
        "/v1/schedules",
        json!({"name": "night\u{202E}ly", "spec": "every 1h", "task": "work"}),
    )
    .await;
    assert_eq!(
        (status, p["field"].clone()),
        (StatusCode::UNPROCESSABLE_ENTITY, json!("name")),
        "{p}"
    );
    let (_, listed) = get(&server, "/v1/instances").await;
    let ids: Vec<_> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["o"], "nothing else was written");
    // What an answer quotes back of such input shows the override as its escape, and a
    // long name only its start and its length.
    let (status, p) = get(&server, "/v1/instances/order-1%E2%80%AEgpj.exe").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{p}");
    assert_eq!(
        p["detail"],
        json!("instance \"order-1\\u{202e}gpj.exe\" not found")
    );
    let long = "w".repeat(100_000);
    let (status, p) = post(&server, "/v1/tasks", json!({"name": long, "input": {}})).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    let detail = p["detail"].as_str().unwrap();
    assert!(detail.len() < 300, "{} bytes", detail.len());
    assert!(detail.contains("... (100000 bytes)"), "{detail}");
    let out = common::run(
        &args,
        &["tokens", "create", "--name", spoof, "--scope", "read"],
    );
    assert!(!out.status.success(), "{}", common::text(&out));
    assert!(
        common::text(&out).contains("U+202E"),
        "{}",
        common::text(&out)
    );

    // Stored before the rule: still read, listed and cancelled.
    let legacy = "legacy\u{200B}id";
    let created = store
        .instance_create(
            vec![ratchet_store::NewInstance {
                id: legacy.to_string(),
                name: "order".to_string(),
                input: json!({"id": legacy, "items": ["book"], "amount_cents": 1, "step_ms": 0}),
                parent: None,
                if_exists: ratchet::IfExists::Fail,
                trace: None,
            }],
            None,
            ratchet::Timestamp::now(),
        )
        .await
        .unwrap();
    assert_eq!(created.len(), 1);
    let path = format!("/v1/instances/{}", "legacy%E2%80%8Bid");
    let (status, shown) = get(&server, &path).await;
    assert_eq!(
        (status, shown["id"].clone()),
        (StatusCode::OK, json!(legacy))
    );
    let (status, p) = post(&server, &format!("{path}/cancel"), json!({})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{p}");
}

/// A request head over 64 KiB is refused (431) and its connection closed: a client cannot
/// make a connection hold more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_over_64_kib_is_refused() {
    let (args, _store, _dir) = common::sqlite().await;
    let server = Server::start(&args, &[]);
    let host = address(&server);
    let head = |padding: usize| {
        format!(
            "GET /healthz HTTP/1.1\r\nhost: {host}\r\nx-padding: {}\r\n\r\n",
            "a".repeat(padding)
        )
    };
    assert_eq!(status_of(&server, &head(60_000)), 200);
    assert_eq!(status_of(&server, &head(100_000)), 431);
}
