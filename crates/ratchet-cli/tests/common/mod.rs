//! Shared by the CLI's test binaries: worker processes and the stores they share.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ratchet::{Client, HistoryEvent, InstanceStatus, PostgresConfig, PostgresStore, Store};

/// A `ratchet` command on the given store arguments.
pub fn ratchet(store_args: &[String]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ratchet"));
    cmd.args(store_args);
    cmd
}

/// Runs `ratchet` on the given store arguments with `command`, to the end.
pub fn run(store_args: &[String], command: &[&str]) -> std::process::Output {
    ratchet(store_args)
        .args(command)
        .output()
        .expect("run ratchet")
}

/// What a finished command printed, stdout then stderr.
pub fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The `--database-url`/`--schema` arguments of a fresh PostgreSQL schema, with a store on
/// it; `None` skips the test when no server is configured.
pub async fn postgres() -> Option<(Vec<String>, Arc<PostgresStore>)> {
    let url = ratchet_store_postgres::testing::database_url()?;
    let schema = ratchet_store_postgres::testing::fresh_schema();
    let store = PostgresStore::connect_with(
        &url,
        PostgresConfig {
            schema: schema.clone(),
            ..PostgresConfig::default()
        },
    )
    .await
    .expect("connect");
    let args = vec!["--database-url".into(), url, "--schema".into(), schema];
    Some((args, Arc::new(store)))
}

/// The `--db` argument of a fresh SQLite file, with a store on it (and the directory that
/// holds it, to keep).
pub async fn sqlite() -> (Vec<String>, Arc<dyn Store>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("shared.db");
    let store = ratchet::SqliteStore::open(&path).await.expect("open");
    let args = vec!["--db".to_string(), path.display().to_string()];
    (args, Arc::new(store), dir)
}

/// A `ratchet server` process on a free port, killed when dropped.
pub struct Server {
    pub child: Child,
    /// Its address: `http://127.0.0.1:PORT`.
    pub base: String,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Server {
    /// Starts `ratchet server` on a free port with `extra` arguments and waits until it says
    /// where it serves.
    pub fn start(store_args: &[String], extra: &[&str]) -> Server {
        let mut child = ratchet(store_args)
            .args(["server", "--listen", "127.0.0.1:0", "--poll-ms", "200"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn ratchet server");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        // Made first, so that a failure below kills the process as it drops.
        let mut server = Server {
            child,
            base: String::new(),
            lines: rx,
        };
        let line = server
            .lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the server said where it serves");
        server.base = line
            .split_whitespace()
            .find(|w| w.starts_with("http://") || w.starts_with("https://"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        server
    }

    /// `path` on this server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("status").is_none()
    }

    /// SIGTERM; returns once it exited, asserting it stopped cleanly.
    pub fn stop(&mut self) {
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status();
        let status = self.child.wait().expect("reap");
        assert!(status.success(), "server exited with {status}");
        let said: Vec<String> =
            std::iter::from_fn(|| self.lines.recv_timeout(Duration::from_secs(10)).ok()).collect();
        assert!(
            said.iter().any(|l| l == "server stopped"),
            "last words: {said:?}"
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `ratchet worker` process, killed when dropped.
pub struct Worker {
    pub child: Child,
    pub label: String,
    /// Its lease owner id, from its ready line.
    pub owner: String,
    /// The lines it prints after its ready line.
    lines: std::sync::mpsc::Receiver<String>,
}

impl Worker {
    /// Starts a worker and waits until it says it is ready.
    pub fn start(store_args: &[String], label: &str, extra: &[&str]) -> Worker {
        let mut child = ratchet(store_args)
            .args(["worker", "--label", label])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn ratchet worker");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the worker said it is ready");
        assert!(line.contains("ready"), "unexpected first line: {line}");
        let owner = line
            .split(['(', ')'])
            .nth(1)
            .expect("owner id in the ready line")
            .to_string();
        Worker {
            child,
            label: label.to_string(),
            owner,
            lines: rx,
        }
    }

    /// SIGTERM, then waits for it to stop and returns how many task attempts it ran (it says
    /// so in its last line).
    pub fn stop(&mut self) -> u64 {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let status = self.child.wait().expect("reap");
        assert!(
            status.success(),
            "worker {} exited with {status}",
            self.label
        );
        // The reader thread ends at the end of its output: read until then.
        std::iter::from_fn(|| self.lines.recv_timeout(Duration::from_secs(10)).ok())
            .find_map(|line| {
                line.split(" stopped after ")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .parse()
                    .ok()
            })
            .unwrap_or_else(|| panic!("worker {} did not say what it ran", self.label))
    }

    /// SIGKILL: the process dies holding whatever it leased.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("reap");
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `count` `fanout` instances from a client of its own (no runtime in this process).
pub async fn start_fanouts(
    store: Arc<dyn Store>,
    count: usize,
    activities: u32,
    activity_ms: u64,
) -> Vec<String> {
    let client = Client::new(store);
    let mut ids = Vec::with_capacity(count);
    for _ in 0..count {
        let input = serde_json::json!({ "activities": activities, "activity_ms": activity_ms });
        ids.push(
            client
                .start("fanout", input)
                .await
                .unwrap()
                .id()
                .to_string(),
        );
    }
    ids
}

/// Waits for every instance and checks each: completed, output one step per activity in
/// order, each activity scheduled once and completed exactly once in history. Returns how
/// many activities each worker label ran.
pub async fn check_fanouts(
    store: Arc<dyn Store>,
    ids: &[String],
    activities: u32,
    timeout: Duration,
) -> HashMap<String, usize> {
    let client = Client::new(store.clone()).with_poll_interval(Duration::from_millis(500));
    let mut by_label: HashMap<String, usize> = HashMap::new();
    let waits = ids.iter().map(|id| {
        let client = client.clone();
        async move { (id, client.wait(id, timeout).await) }
    });
    for (id, outcome) in futures::future::join_all(waits).await {
        let outcome = outcome.unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(
            outcome.status,
            InstanceStatus::Completed,
            "{id}: {:?}",
            outcome.error
        );
        let steps = outcome.output.unwrap();
        let steps = steps.as_array().unwrap();
        assert_eq!(steps.len(), activities as usize, "{id}");
        for (i, step) in steps.iter().enumerate() {
            assert_eq!(step["i"], i, "{id}: step order");
            *by_label
                .entry(step["by"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        assert_each_step_once(store.as_ref(), id, activities as usize).await;
    }
    by_label
}

/// Checks an instance's history: `steps` activities, each scheduled once and completed
/// exactly once, and positions without gaps or repeats.
pub async fn assert_each_step_once(store: &dyn Store, id: &str, steps: usize) {
    let history = store.history_read(id, None).await.unwrap();
    let mut completed: HashMap<(u32, u32), usize> = HashMap::new();
    let mut scheduled = 0;
    for h in &history {
        match h.event {
            HistoryEvent::ActivityCompleted { seq, .. } => {
                *completed.entry((h.execution, seq)).or_default() += 1
            }
            HistoryEvent::ActivityScheduled { .. } => scheduled += 1,
            _ => {}
        }
    }
    assert_eq!(scheduled, steps, "{id}: each activity scheduled once");
    assert_eq!(completed.len(), steps, "{id}: every activity completed");
    assert!(
        completed.values().all(|n| *n == 1),
        "{id}: an activity completion appears twice: {completed:?}"
    );
    let seqs: Vec<u32> = history.iter().map(|h| h.seq).collect();
    assert_eq!(
        seqs,
        (0..history.len() as u32).collect::<Vec<_>>(),
        "{id}: history has no gaps"
    );
}
