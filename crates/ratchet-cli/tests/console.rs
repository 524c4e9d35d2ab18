//! The web console in a real headless Chromium, driven over WebDriver (Debian's chromedriver)
//! by fantoccini, against `ratchet demo`'s server (its orders, then what the tests add) on
//! SQLite and on PostgreSQL. Every page is loaded and the browser's log must hold no error.
//!
//! Needs chromium and chromedriver: `scripts/test` installs them and sets
//! `RATCHET_REQUIRE_BROWSER=1`; without them (and without that variable) the tests say so and
//! pass without a browser.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

/// Where chromium and chromedriver are, or `None` (the test is skipped) when they are not
/// installed and the run does not require them.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let find = |var: &str, default: &str| {
        let path = PathBuf::from(std::env::var(var).unwrap_or_else(|_| default.to_string()));
        path.exists().then_some(path)
    };
    match (
        find("RATCHET_TEST_CHROMIUM", "/usr/bin/chromium"),
        find("RATCHET_TEST_CHROMEDRIVER", "/usr/bin/chromedriver"),
    ) {
        (Some(chromium), Some(driver)) => Some((chromium, driver)),
        _ if std::env::var("RATCHET_REQUIRE_BROWSER").is_ok_and(|v| v == "1") => {
            panic!("RATCHET_REQUIRE_BROWSER=1 but chromium or chromedriver is missing")
        }
        _ => {
            eprintln!("no chromium/chromedriver: the console's browser tests are skipped");
            None
        }
    }
}

/// A child process killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free TCP port on loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// chromedriver on a free port, and a headless Chromium session through it.
async fn session(chromium: &PathBuf, driver: &PathBuf) -> (Process, Client, tempfile::TempDir) {
    let port = free_port();
    let child = std::process::Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let process = Process(child);
    let profile = tempfile::tempdir().unwrap();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,900", "--hide-scrollbars",
                format!("--user-data-dir={}", profile.path().display()),
            ],
        }),
    );
    caps.insert("goog:loggingPrefs".into(), json!({"browser": "ALL"}));
    let url = format!("http://127.0.0.1:{port}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let client = loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&url)
            .await
        {
            Ok(c) => break c,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("no WebDriver session: {e}"),
        }
    };
    (process, client, profile)
}

/// chromedriver's log of the page (`POST /session/{id}/se/log`): console messages and
/// uncaught errors, each with its level.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

/// The errors the browser logged since the last call.
async fn errors(client: &Client) -> Vec<String> {
    let log = client.issue_cmd(BrowserLog).await.expect("the browser log");
    log.as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["level"] == "SEVERE")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// `ratchet demo` with a few orders, serving the console on a free port once they are done.
struct Console {
    _process: Process,
    base: String,
}

impl Console {
    fn start(store_args: &[String]) -> Console {
        let mut child = common::ratchet(store_args)
            .args([
                "demo",
                "--orders",
                "4",
                "--step-ms",
                "10",
                "--quiet",
                "--listen",
                "127.0.0.1:0",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn ratchet demo");
        let stdout = child.stdout.take().expect("stdout");
        let process = Process(child);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let line = rx
                .recv_timeout(deadline.saturating_duration_since(std::time::Instant::now()))
                .expect("the demo serves the console");
            if line.starts_with("ratchet server on ") {
                let base = line
                    .split_whitespace()
                    .find(|w| w.starts_with("http://"))
                    .expect("an address")
                    .to_string();
                return Console {
                    _process: process,
                    base,
                };
            }
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// A declarative fan-out whose third branch fails: a failed instance with a parallel block.
const FAILING_FANOUT: &str =
    "document: {dsl: '1.0.0', namespace: demo, name: failing-fanout, version: '1.0.0'}
do:
  - ship:
      fork:
        branches:
          - a:
              call: fanout_step
              with: {i: 1, ms: 5}
          - b:
              call: fanout_step
              with: {i: 2, ms: 5}
          - c:
              call: fanout_step
              with: {i: 3, ms: 5}
  - check:
      raise:
        error:
          type: https://example.com/errors/short
          status: 409
          title: A parcel is missing
";

/// Beside the demo's orders: a failing fan-out, dead tasks (their attempts spent), tasks
/// waiting in a paused queue, events; everything through the API, as a user would.
async fn seed(console: &Console) {
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        let request = http.post(console.url(path)).json(&body);
        async move {
            let response = request.send().await.expect("request");
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            assert!(status.is_success(), "{status}: {text}");
        }
    };
    post("/v1/workflows", json!({"source": FAILING_FANOUT})).await;
    for i in 1..=2 {
        post(
            "/v1/instances",
            json!({"name": "demo/failing-fanout", "id": format!("fanout-{i}"), "input": {}}),
        )
        .await;
    }
    for i in 0..3 {
        post(
            "/v1/tasks",
            json!({"name": "work", "input": {"ms": 1, "fail_attempts": 9, "i": i},
                   "options": {"retry": {"max_attempts": 2, "initial_interval_ms": 10}}}),
        )
        .await;
    }
    post("/v1/queues/held/pause", json!({})).await;
    for i in 0..5 {
        post(
            "/v1/tasks",
            json!({"name": "work", "input": {"i": i}, "options": {"queue": "held"}}),
        )
        .await;
    }
    post(
        "/v1/events",
        json!({"events": [{"type": "OrderShipped", "tags": ["order:order-1"], "payload": {"parcels": 2}}]}),
    )
    .await;
    // Wait for the fan-outs to fail and the tasks to die.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let failed: Value = http
            .get(console.url("/v1/instances?status=Failed"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let dead: Value = http
            .get(console.url("/v1/tasks?state=Dead"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        // A page is `{items, next}`, or a plain list.
        let count = |v: &Value| {
            v.as_array()
                .or_else(|| v["items"].as_array())
                .map_or(0, Vec::len)
        };
        if count(&failed) >= 2 && count(&dead) >= 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the seed data never settled: {failed} {dead}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Saves a screenshot of the page as `<name>.png` in `RATCHET_CONSOLE_SCREENSHOTS`, when
/// that is set (`scripts/console-screenshots` sets it to docs/console).
async fn shot(client: &Client, name: &str) {
    let Ok(dir) = std::env::var("RATCHET_CONSOLE_SCREENSHOTS") else {
        return;
    };
    // Let charts and the graph finish drawing.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let png = client.screenshot().await.expect("a screenshot");
    let path = std::path::Path::new(&dir).join(format!("{name}.png"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(&path, png).unwrap();
}

/// [`shot`] with the element matching `css` scrolled to the top of the window.
async fn shot_at(client: &Client, name: &str, css: &str) {
    if std::env::var("RATCHET_CONSOLE_SCREENSHOTS").is_err() {
        return;
    }
    let script = "document.querySelector(arguments[0]).scrollIntoView({block: 'start'})";
    client
        .execute(script, vec![json!(css)])
        .await
        .expect("scroll");
    shot(client, name).await;
}

/// Opens a page and waits until an element matching `ready` shows.
async fn open(client: &Client, url: &str, ready: &str) {
    client.goto(url).await.expect("navigate");
    client
        .wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Css(ready))
        .await
        .unwrap_or_else(|e| panic!("{ready} never showed on {url}: {e}"));
}

/// Polls `check` every 100 ms until it answers `Some`, for at most 20 seconds.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The text of the first element matching `css`, or `None` when there is none.
async fn text(client: &Client, css: &str) -> Option<String> {
    let element = client.find(Locator::Css(css)).await.ok()?;
    element.text().await.ok()
}

/// How many elements match `css`.
async fn count(client: &Client, css: &str) -> usize {
    client
        .find_all(Locator::Css(css))
        .await
        .map_or(0, |all| all.len())
}

/// Clicks the element matching `css`, once it shows. A page that redraws (after an action,
/// or as live data comes) may replace the element between finding and clicking it: then it
/// is found again.
async fn click(client: &Client, css: &str) {
    let mut tries = 0;
    loop {
        let element = client
            .wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} to click: {e}"));
        match element.click().await {
            Ok(()) => return,
            Err(e) if tries < 20 => {
                let _ = e;
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{css}: {e}"),
        }
    }
}

/// Types `keys` into the element matching `css`, after clearing it.
async fn fill(client: &Client, css: &str, keys: &str) {
    let element = client
        .wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css} to fill: {e}"));
    element.clear().await.unwrap();
    element.send_keys(keys).await.unwrap();
}

/// Waits until the text of `css` holds `wanted`.
async fn wait_text(client: &Client, css: &str, wanted: &str) -> String {
    eventually(&format!("{css} shows {wanted:?}"), || async {
        text(client, css).await.filter(|t| t.contains(wanted))
    })
    .await
}

/// Waits until exactly `n` elements match `css`.
async fn wait_count(client: &Client, css: &str, n: usize) {
    eventually(&format!("{n} of {css}"), || async {
        (count(client, css).await == n).then_some(())
    })
    .await;
}

/// Fails on any error the browser logged since the last look.
async fn no_errors(client: &Client, page: &str) {
    let logged = errors(client).await;
    assert!(
        logged.is_empty(),
        "{page}: the browser logged errors: {logged:#?}"
    );
}

/// The API as a script sees it.
struct Api {
    http: reqwest::Client,
    base: String,
}

impl Api {
    async fn get(&self, path: &str) -> Value {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .expect("request");
        assert!(
            response.status().is_success(),
            "GET {path}: {}",
            response.status()
        );
        response.json().await.expect("JSON")
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert!(status.is_success(), "POST {path}: {status}: {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// Starts a demo order that ends waiting for its `delivered` signal.
    async fn start_order(&self, id: &str) {
        self.post(
            "/v1/instances",
            json!({"name": "order", "id": id,
                   "input": {"id": id, "amount_cents": 900, "items": ["cup"], "step_ms": 5}}),
        )
        .await;
        eventually(&format!("{id} awaits delivery"), || async {
            let i = self.get(&format!("/v1/instances/{id}")).await;
            (i["custom_status"] == "awaiting-delivery").then_some(())
        })
        .await;
    }

    async fn status(&self, id: &str) -> String {
        self.get(&format!("/v1/instances/{id}")).await["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

async fn the_console_serves_the_demo(store_args: Vec<String>) {
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let console = Console::start(&store_args);
    seed(&console).await;
    let api = Api {
        http: reqwest::Client::new(),
        base: console.base.clone(),
    };
    let (_driver, client, _profile) = session(&chromium, &driver).await;
    let page = |route: &str| console.url(&format!("/#{route}"));

    // Overview: the counts, the chart, the failures with their error, the live worker.
    open(&client, &page("/"), "[data-testid=failure-row]").await;
    assert_eq!(client.title().await.unwrap(), "Overview · Ratchet");
    wait_text(
        &client,
        "[data-testid=overview-tiles]",
        "Started, last hour",
    )
    .await;
    assert!(count(&client, "[data-testid=throughput-chart]").await == 1);
    assert_eq!(count(&client, "[data-testid=failure-row]").await, 2);
    wait_text(
        &client,
        "[data-testid=failures-list]",
        "A parcel is missing",
    )
    .await;
    assert_eq!(count(&client, "[data-testid=worker-row]").await, 1);
    shot(&client, "overview").await;
    no_errors(&client, "overview").await;

    // Instances: filters in the URL, each narrowing the list as the API does.
    open(
        &client,
        &page("/instances?status=Failed"),
        "[data-testid=instance-row]",
    )
    .await;
    // A link the page re-renders while it is read goes stale: that read counts as nothing
    // seen yet, and the check polls again.
    let ids = |client: &Client| {
        let client = client.clone();
        async move {
            let mut ids = Vec::new();
            for link in client
                .find_all(Locator::Css("[data-testid=instance-link]"))
                .await
                .unwrap_or_default()
            {
                ids.push(link.text().await.unwrap_or_default());
            }
            ids
        }
    };
    eventually("the failed instances", || async {
        let mut failed = ids(&client).await;
        failed.sort();
        (failed == ["fanout-1", "fanout-2"]).then_some(())
    })
    .await;
    // The id prefix typed in the form, applied: the URL keeps it, for a bookmark.
    open(&client, &page("/instances"), "[data-testid=instance-row]").await;
    fill(&client, "[data-testid=filter-id-prefix]", "order-").await;
    click(&client, "[data-testid=filter-apply]").await;
    wait_count(&client, "[data-testid=instance-row]", 4).await;
    let url = client.current_url().await.unwrap();
    assert!(url.as_str().contains("id_prefix=order-"), "{url}");
    // Pages of two, by keyset: older, older, then newer again.
    open(
        &client,
        &page("/instances?id_prefix=order-&limit=2"),
        "[data-testid=instance-row]",
    )
    .await;
    eventually("the first page", || async {
        (ids(&client).await == ["order-4", "order-3"]).then_some(())
    })
    .await;
    click(&client, "[data-testid=page-next]").await;
    eventually("the second page", || async {
        (ids(&client).await == ["order-2", "order-1"]).then_some(())
    })
    .await;
    click(&client, "[data-testid=page-prev]").await;
    eventually("the first page again", || async {
        (ids(&client).await == ["order-4", "order-3"]).then_some(())
    })
    .await;
    shot(&client, "instances").await;
    no_errors(&client, "instances").await;

    // An instance: its timeline and its graph.
    open(
        &client,
        &page("/instances/order-1"),
        "[data-testid=timeline-row]",
    )
    .await;
    wait_text(&client, "[data-testid=instance-status]", "Completed").await;
    assert!(count(&client, "[data-testid=timeline-row]").await >= 6);
    shot(&client, "instance").await;
    click(&client, "[data-testid=tab-graph]").await;
    client
        .wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Css("[data-testid=graph] svg"))
        .await
        .expect("the graph");
    shot_at(&client, "instance-graph", "[data-testid=tab-graph]").await;
    open(
        &client,
        &page("/instances/fanout-1"),
        "[data-testid=instance-error]",
    )
    .await;
    wait_text(
        &client,
        "[data-testid=instance-error]",
        "A parcel is missing",
    )
    .await;
    shot(&client, "instance-failed").await;
    no_errors(&client, "instance").await;

    // Live: a running order's page follows it as a signal sent from the page completes it.
    api.start_order("live-1").await;
    open(
        &client,
        &page("/instances/live-1"),
        "[data-testid=action-signal]",
    )
    .await;
    wait_text(&client, "[data-testid=instance-status]", "Running").await;
    wait_text(&client, "[data-testid=live-state]", "Live").await;
    click(&client, "[data-testid=action-signal]").await;
    fill(&client, "[data-testid=signal-name]", "delivered").await;
    fill(&client, "[data-testid=signal-payload]", "\"porch\"").await;
    click(&client, "[data-testid=signal-send]:not([disabled])").await;
    wait_text(
        &client,
        "[data-testid=action-result]",
        "POST /v1/instances/live-1/signals",
    )
    .await;
    // No reload: the stream brings the completion.
    wait_text(&client, "[data-testid=instance-status]", "Completed").await;
    wait_text(&client, "[data-testid=instance-output]", "porch").await;
    assert_eq!(api.status("live-1").await, "Completed");
    no_errors(&client, "signal").await;

    // Cancel and terminate, each confirmed and shown as the call it made.
    for (id, action, status) in [
        ("live-2", "cancel", "Cancelled"),
        ("live-3", "terminate", "Terminated"),
    ] {
        api.start_order(id).await;
        open(
            &client,
            &page(&format!("/instances/{id}")),
            &format!("[data-testid=action-{action}]"),
        )
        .await;
        click(&client, &format!("[data-testid=action-{action}]")).await;
        fill(
            &client,
            "[data-testid=stop-reason]",
            "from the console test",
        )
        .await;
        click(&client, "[data-testid=confirm]").await;
        wait_text(
            &client,
            "[data-testid=action-result]",
            &format!("POST /v1/instances/{id}/{action}"),
        )
        .await;
        eventually(&format!("{id} {status}"), || async {
            (api.status(id).await == status).then_some(())
        })
        .await;
        wait_text(&client, "[data-testid=instance-status]", status).await;
    }
    // Restart: the failed fan-out runs again (a new creation time), and fails again.
    let before = api.get("/v1/instances/fanout-2").await["created_at"].clone();
    open(
        &client,
        &page("/instances/fanout-2"),
        "[data-testid=action-restart]",
    )
    .await;
    click(&client, "[data-testid=action-restart]").await;
    click(&client, "[data-testid=confirm]").await;
    wait_text(
        &client,
        "[data-testid=action-result]",
        "POST /v1/instances/fanout-2/restart",
    )
    .await;
    eventually("fanout-2 restarted", || async {
        let now = api.get("/v1/instances/fanout-2").await;
        (now["created_at"] != before).then_some(())
    })
    .await;
    no_errors(&client, "instance actions").await;

    // Bulk cancel of a selection.
    api.start_order("bulk-1").await;
    api.start_order("bulk-2").await;
    open(
        &client,
        &page("/instances?id_prefix=bulk-"),
        "[data-testid=select-all]",
    )
    .await;
    wait_count(&client, "[data-testid=instance-row]", 2).await;
    click(&client, "[data-testid=select-all]").await;
    click(&client, "[data-testid=bulk-cancel]").await;
    click(&client, "[data-testid=confirm]").await;
    for id in ["bulk-1", "bulk-2"] {
        eventually(&format!("{id} cancelled"), || async {
            (api.status(id).await == "Cancelled").then_some(())
        })
        .await;
    }
    api.start_order("bulk-3").await;
    open(
        &client,
        &page("/instances?id_prefix=bulk-3"),
        "[data-testid=select-all]",
    )
    .await;
    wait_count(&client, "[data-testid=instance-row]", 1).await;
    click(&client, "[data-testid=select-all]").await;
    click(&client, "[data-testid=bulk-terminate]").await;
    click(&client, "[data-testid=confirm]").await;
    eventually("bulk-3 terminated", || async {
        (api.status("bulk-3").await == "Terminated").then_some(())
    })
    .await;
    no_errors(&client, "bulk cancel and terminate").await;

    // Queues: pause from the page (the dead tasks' queue, so that retried ones stay put).
    open(&client, &page("/tasks"), "[data-testid=queue-row]").await;
    shot(&client, "tasks").await;
    let queue = |name: &str| {
        let api = &api;
        let name = name.to_string();
        async move {
            api.get("/v1/queues")
                .await
                .as_array()
                .into_iter()
                .flatten()
                .find(|q| q["queue"] == name.as_str() || q["name"] == name.as_str())
                .cloned()
                .unwrap_or(Value::Null)
        }
    };
    click(
        &client,
        "[data-testid=queue-row][data-queue=default] [data-testid=queue-pause]",
    )
    .await;
    click(&client, "[data-testid=confirm]").await;
    eventually("default paused", || async {
        (queue("default").await["paused"] == true).then_some(())
    })
    .await;
    // Limits, edited.
    click(
        &client,
        "[data-testid=queue-row][data-queue=held] [data-testid=queue-edit-limits]",
    )
    .await;
    fill(&client, "[data-testid=limit-concurrency]", "3").await;
    click(&client, "[data-testid=confirm]").await;
    eventually("held limited", || async {
        (queue("held").await["limits"]["concurrency"] == 3).then_some(())
    })
    .await;
    // Dead letters: one discarded, the others retried.
    open(
        &client,
        &page("/tasks?state=Dead"),
        "[data-testid=task-row]",
    )
    .await;
    wait_count(&client, "[data-testid=task-row]", 3).await;
    wait_text(
        &client,
        "[data-testid=tasks-table]",
        "attempt 2 fails as asked",
    )
    .await;
    shot(&client, "tasks-dead").await;
    let dead: Vec<i64> = api
        .get("/v1/tasks?state=Dead")
        .await
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect();
    open(
        &client,
        &page(&format!("/tasks/{}", dead[0])),
        "[data-testid=action-discard]",
    )
    .await;
    wait_text(
        &client,
        "[data-testid=task-attempt-history]",
        "fails as asked",
    )
    .await;
    shot(&client, "task").await;
    click(&client, "[data-testid=action-discard]").await;
    click(&client, "[data-testid=confirm]").await;
    wait_text(&client, "[data-testid=action-result]", "discard").await;
    open(
        &client,
        &page("/tasks?state=Dead"),
        "[data-testid=task-row]",
    )
    .await;
    wait_count(&client, "[data-testid=task-row]", 2).await;
    click(&client, "[data-testid=select-all]").await;
    click(&client, "[data-testid=bulk-retry]").await;
    click(&client, "[data-testid=confirm]").await;
    for id in &dead[1..] {
        eventually(&format!("task {id} retried"), || async {
            let t = api.get(&format!("/v1/tasks/{id}")).await;
            (t["state"] == "Available").then_some(())
        })
        .await;
    }
    let gone = api
        .http
        .get(console.url(&format!("/v1/tasks/{}", dead[0])))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404, "the discarded task is gone");
    // A waiting task (its queue is paused) cancelled from its page.
    let held = api.get("/v1/tasks?queue=held&limit=1").await;
    let held = held[0]["id"].as_i64().unwrap();
    open(
        &client,
        &page(&format!("/tasks/{held}")),
        "[data-testid=action-cancel]:not([disabled])",
    )
    .await;
    click(&client, "[data-testid=action-cancel]").await;
    click(&client, "[data-testid=confirm]").await;
    wait_text(&client, "[data-testid=action-result]", "cancel").await;
    eventually(&format!("task {held} cancelled"), || async {
        let t = api.get(&format!("/v1/tasks/{held}")).await;
        (t["state"] == "Cancelled").then_some(())
    })
    .await;
    // Resume from the page.
    open(&client, &page("/tasks"), "[data-testid=queue-row]").await;
    click(
        &client,
        "[data-testid=queue-row][data-queue=default] [data-testid=queue-resume]",
    )
    .await;
    click(&client, "[data-testid=confirm]").await;
    eventually("default resumed", || async {
        (queue("default").await["paused"] == false).then_some(())
    })
    .await;
    no_errors(&client, "tasks").await;

    // Events: filtered by type, then followed live.
    open(
        &client,
        &page("/events?types=OrderShipped"),
        "[data-testid=event-row]",
    )
    .await;
    assert_eq!(count(&client, "[data-testid=event-row]").await, 1);
    click(&client, "[data-testid=events-follow]").await;
    wait_text(&client, "[data-testid=live-state]", "Live").await;
    api.post(
        "/v1/events",
        json!({"events": [{"type": "OrderShipped", "tags": ["order:order-2"], "payload": {"parcels": 1}}]}),
    )
    .await;
    wait_count(&client, "[data-testid=event-row]", 2).await;
    // Appended from the page: the followed list shows it, and the store has it.
    click(&client, "[data-testid=events-append]").await;
    fill(&client, "[data-testid=append-type]", "OrderShipped").await;
    fill(&client, "[data-testid=append-tags]", "order:order-3").await;
    fill(&client, "[data-testid=append-payload]", "{\"parcels\": 3}").await;
    click(&client, "[data-testid=append-send]:not([disabled])").await;
    wait_count(&client, "[data-testid=event-row]", 3).await;
    let stored = api.get("/v1/events?tags=order:order-3").await;
    assert_eq!(
        stored["events"][0]["payload"],
        json!({"parcels": 3}),
        "{stored}"
    );
    shot(&client, "events").await;
    no_errors(&client, "events").await;

    schedules(&client, &api, &page).await;

    // Dark mode, chosen on the page.
    open(&client, &page("/"), "[data-testid=failure-row]").await;
    // The toggle goes system, light, dark.
    let theme = || async {
        client
            .execute(
                "return document.documentElement.dataset.theme || ''",
                vec![],
            )
            .await
            .unwrap()
    };
    for _ in 0..3 {
        if theme().await == "dark" {
            break;
        }
        click(&client, "[data-testid=theme-toggle]").await;
    }
    assert_eq!(theme().await, "dark");
    shot(&client, "overview-dark").await;
    no_errors(&client, "dark").await;

    read_only_tokens_see_no_actions(&store_args, &client).await;
    client.close().await.unwrap();
}

/// Schedules: the empty list, a bad spec refused by the form (the problem names the field),
/// then one made through the API that fires every second: listed, its fires shown as they
/// come, paused with a note and fired by hand from its page.
async fn schedules(client: &Client, api: &Api, page: &impl Fn(&str) -> String) {
    open(client, &page("/schedules"), "[data-testid=schedules-empty]").await;
    wait_text(
        client,
        "[data-testid=schedules-empty]",
        "ratchet schedules create",
    )
    .await;
    click(client, "[data-testid=schedule-new]").await;
    fill(client, "[data-testid=schedule-name]", "bad-spec").await;
    fill(client, "[data-testid=schedule-spec]", "every now").await;
    fill(client, "[data-testid=schedule-target]", "fanout").await;
    fill(
        client,
        "[data-testid=schedule-input]",
        "{\"activities\": 1}",
    )
    .await;
    click(client, "[data-testid=schedule-create]:not([disabled])").await;
    wait_text(client, "[data-testid=schedule-problem]", "Field: spec").await;
    shot(client, "schedule-new").await;
    assert_eq!(
        count(client, "[data-testid=schedule-spec][aria-invalid=true]").await,
        1,
        "the spec is marked as the field at fault"
    );
    assert_eq!(api.get("/v1/schedules").await, json!([]), "nothing created");
    // The browser logs the refused request (422) as a failed load; nothing else.
    let logged = errors(client).await;
    assert!(
        logged.iter().all(|e| e.contains("422")),
        "the bad spec: {logged:#?}"
    );

    api.post(
        "/v1/schedules",
        json!({"name": "every-second", "spec": "every 1s", "workflow": "fanout",
               "input": {"activities": 1}}),
    )
    .await;
    // The list, read again (the URL is the same: a reload, not a navigation).
    click(client, "[data-testid=dialog-close]").await;
    click(client, "[data-testid=refresh]").await;
    let row = "[data-testid=schedule-row][data-schedule=every-second]";
    client
        .wait()
        .at_most(Duration::from_secs(15))
        .for_element(Locator::Css(row))
        .await
        .expect("the schedule listed");
    wait_text(
        client,
        &format!("{row} [data-testid=schedule-action]"),
        "start fanout",
    )
    .await;
    wait_text(
        client,
        &format!("{row} [data-testid=schedule-state]"),
        "Active",
    )
    .await;
    click(client, &format!("{row} [data-testid=schedule-link]")).await;
    // The console's worker fires it: its fires show as the page reads it again.
    wait_text(client, "[data-testid=schedule-name]", "every-second").await;
    let fired = client
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css(
            "[data-testid=fire-row][data-kind=scheduled] [data-testid=fire-run]",
        ))
        .await
        .expect("a fire of the schedule");
    let href = fired.attr("href").await.unwrap().unwrap_or_default();
    assert!(href.starts_with("#/instances/"), "{href}");
    assert!(count(client, "[data-testid=upcoming-tick]").await >= 1);

    // Paused with a note, from the page.
    click(client, "[data-testid=action-pause]").await;
    fill(client, "[data-testid=pause-note]", "from the console test").await;
    click(client, "[data-testid=confirm]").await;
    wait_text(
        client,
        "[data-testid=action-result]",
        "POST /v1/schedules/every-second/pause",
    )
    .await;
    wait_text(client, "[data-testid=schedule-state]", "Paused").await;
    wait_text(
        client,
        "[data-testid=schedule-note]",
        "from the console test",
    )
    .await;
    assert_eq!(
        api.get("/v1/schedules/every-second").await["schedule"]["paused"],
        true
    );

    // Fired by hand: a manual fire, listed.
    click(client, "[data-testid=action-trigger]").await;
    click(client, "[data-testid=confirm]").await;
    wait_text(
        client,
        "[data-testid=action-result]",
        "POST /v1/schedules/every-second/trigger",
    )
    .await;
    wait_count(client, "[data-testid=fire-row][data-kind=manual]", 1).await;
    shot(client, "schedule").await;
    open(client, &page("/schedules"), row).await;
    wait_text(
        client,
        &format!("{row} [data-testid=schedule-note]"),
        "from the console test",
    )
    .await;
    shot(client, "schedules").await;
    no_errors(client, "schedules").await;
}

/// A server that asks for tokens: the console asks for one, and with a read-only token shows
/// no action anywhere.
async fn read_only_tokens_see_no_actions(store_args: &[String], client: &Client) {
    let out = common::run(
        store_args,
        &["tokens", "create", "--name", "viewer", "--scope", "read"],
    );
    let printed = common::text(&out);
    let token = printed
        .split_whitespace()
        .find(|w| w.starts_with("rt_"))
        .unwrap_or_else(|| panic!("no token in {printed}"))
        .to_string();
    let mut child = common::ratchet(store_args)
        .args(["server", "--auth", "--no-worker", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn ratchet server");
    let stdout = child.stdout.take().expect("stdout");
    let _process = Process(child);
    let base = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| {
            line.starts_with("ratchet server on ").then(|| {
                line.split_whitespace()
                    .find(|w| w.starts_with("http://"))
                    .map(str::to_string)
            })?
        })
        .expect("the server's address");
    let page = |route: &str| format!("{base}/#{route}");
    open(
        client,
        &page("/instances/order-1"),
        "[data-testid=login-form]",
    )
    .await;
    shot(client, "login").await;
    fill(client, "[data-testid=login-token]", &token).await;
    click(client, "[data-testid=login-submit]").await;
    wait_text(client, "[data-testid=instance-status]", "Completed").await;
    wait_text(client, "[data-testid=scopes]", "read").await;
    assert_eq!(
        count(
            client,
            "[data-testid^=action-]:not([data-testid=action-result])"
        )
        .await,
        0,
        "instance actions"
    );
    open(client, &page("/instances"), "[data-testid=instance-row]").await;
    assert_eq!(
        count(client, "[data-testid=select-all]").await,
        0,
        "bulk selection"
    );
    open(
        client,
        &page("/tasks?state=Dead"),
        "[data-testid=queue-row]",
    )
    .await;
    for action in [
        "queue-pause",
        "queue-resume",
        "queue-edit-limits",
        "select-all",
        "select-row",
    ] {
        assert_eq!(
            count(client, &format!("[data-testid={action}]")).await,
            0,
            "{action}"
        );
    }
    open(client, &page("/events"), "[data-testid=event-row]").await;
    assert_eq!(
        count(client, "[data-testid=events-append]").await,
        0,
        "append"
    );
    open(
        client,
        &page("/schedules"),
        "[data-testid=schedule-row][data-schedule=every-second]",
    )
    .await;
    assert_eq!(
        count(client, "[data-testid=schedule-new]").await,
        0,
        "new schedule"
    );
    open(
        client,
        &page("/schedules/every-second"),
        "[data-testid=schedule-fields]",
    )
    .await;
    assert_eq!(
        count(
            client,
            "[data-testid^=action-]:not([data-testid=action-result])"
        )
        .await,
        0,
        "schedule actions"
    );
    no_errors(client, "read-only").await;
}
#[tokio::test]
async fn sqlite_the_console_serves_the_demo() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("console.db");
    the_console_serves_the_demo(vec!["--db".into(), db.display().to_string()]).await;
}

#[tokio::test]
async fn postgres_the_console_serves_the_demo() {
    let Some((args, _store)) = common::postgres().await else {
        return;
    };
    the_console_serves_the_demo(args).await;
}

/// A history holding a timer due past the calendar (as an older version stored a sleep of
/// 2^63 ms, or a row written straight into the database): the instance's page shows it,
/// dated the end of the calendar, and the browser logs no error (the timeline's date
/// formatting threw a RangeError on it).
#[tokio::test]
async fn a_timer_past_the_calendar_shows_without_an_error() {
    use ratchet::{HistoryEvent, InstanceStatus, Timestamp};
    use ratchet_store::{
        CommitBatch, IfExists, InstanceClaim, Lease, NewInstance, Registered, TurnCommit,
    };
    let Some((chromium, driver)) = browser() else {
        return;
    };
    let (args, store, _dir) = common::sqlite().await;
    let now = Timestamp::now();
    store
        .instance_create(
            vec![NewInstance {
                id: "far-timer".into(),
                name: "order".into(),
                input: json!({}),
                parent: None,
                if_exists: IfExists::Fail,
                trace: None,
            }],
            None,
            now,
        )
        .await
        .unwrap();
    let claimed = store
        .instance_claim(InstanceClaim {
            lease: Lease {
                owner: "an older version".into(),
                until: Timestamp(now.as_millis() + 3_600_000),
            },
            limit: 1,
            orchestrations: vec![Registered {
                name: "order".into(),
                versions: vec![1],
            }],
            now,
            tasks: None,
        })
        .await
        .unwrap()
        .instances
        .pop()
        .expect("claimed");
    let mut history = vec![HistoryEvent::TurnStarted { at: now }];
    history.extend(claimed.events.iter().map(|e| e.event.clone()));
    history.push(HistoryEvent::TimerCreated {
        seq: 0,
        fire_at: Timestamp(i64::MAX),
    });
    let committed = store
        .commit(CommitBatch {
            turns: vec![TurnCommit {
                instance: claimed.id.clone(),
                incarnation: claimed.incarnation,
                fence: claimed.fence,
                execution: claimed.execution,
                version: Some(1),
                consumed: claimed.events.iter().map(|e| e.id).collect(),
                fed: Vec::new(),
                started: None,
                history_start: claimed.history_len,
                history,
                status: InstanceStatus::Running,
                output: None,
                error: None,
                custom_status: None,
                tasks: Vec::new(),
                inbox: Vec::new(),
                children: Vec::new(),
                continue_as_new: None,
            }],
            now,
            ..CommitBatch::default()
        })
        .await
        .unwrap();
    assert!(committed.stale() == 0, "{committed:?}");
    // A server without a worker: nothing replays the instance meanwhile.
    let mut child = common::ratchet(&args)
        .args(["server", "--listen", "127.0.0.1:0", "--no-worker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn ratchet server");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let _server = Process(child);
    let line = lines.next().expect("a line").expect("its text");
    let base = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let (_driver, client, _profile) = session(&chromium, &driver).await;
    open(
        &client,
        &format!("{base}/#/instances/far-timer"),
        "[data-testid=timeline-row]",
    )
    .await;
    wait_text(&client, "[data-testid=timeline]", "9999").await;
    no_errors(&client, "an instance with a timer past the calendar").await;
    // Ends the browser too: killing chromedriver alone leaves Chromium running.
    client.close().await.unwrap();
}
