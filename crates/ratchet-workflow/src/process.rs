//! `run: shell` and `run: script`: processes a declarative workflow starts on the worker
//! that runs its step. A definition is data anyone with the write scope may apply, and a
//! process runs with the worker's rights, so no worker runs one unless it was started with
//! an allow-list naming its kind (`ratchet worker --allow-run shell`); every other worker
//! fails the step with an error that says so.
//!
//! A process runs as the built-in activity [`PROCESS_ACTIVITY`]: in a fresh directory that
//! is removed after it, with an environment of `PATH` and what the definition gives (none of
//! the worker's own variables, which hold its database URL and secrets), on a time limit
//! (the task's `timeout`, else [`DEFAULT_PROCESS_TIMEOUT`]) after which it is killed, and
//! with at most [`MAX_PROCESS_OUTPUT_BYTES`] read from each of its outputs. Its result is
//! recorded in history once; a worker that dies while it runs leaves the step to be run
//! again, so a process may run more than once, as any activity.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Stdio;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use ratchet_core::ActivityError;
use ratchet_runtime::{ActivityContext, Registry};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The activity that runs the processes of declarative workflows.
pub const PROCESS_ACTIVITY: &str = "ratchet/run";

/// The most read from a process's standard output, and from its standard error: 1 MiB. A
/// process that writes more fails its step.
pub const MAX_PROCESS_OUTPUT_BYTES: usize = 1 << 20;

/// How long a process may run when its task gives no `timeout`: 5 minutes.
pub const DEFAULT_PROCESS_TIMEOUT: Duration = Duration::from_secs(300);

/// The error kind of a process refused by the worker's allow-list.
pub const RUN_NOT_ALLOWED: &str = "RunNotAllowed";

/// The error kind of a process killed at its time limit.
pub(crate) const PROCESS_TIMEOUT: &str = "Timeout";

/// What a process is: a shell command (`sh -c`), or a script run by `python3` or `node`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessKind {
    /// `run.shell`: the command, run by `sh -c` with the arguments as `$1`, `$2`, ...
    Shell,
    /// `run.script` in `python`: the code, run by `python3` from a file (`sys.argv[1:]`
    /// are the arguments).
    Python,
    /// `run.script` in `js` or `javascript`: the code, run by `node` as an ES module from a
    /// file (`process.argv.slice(2)` are the arguments).
    Javascript,
}

impl ProcessKind {
    /// Its name in `--allow-run`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shell => "shell",
            Self::Python => "python",
            Self::Javascript => "javascript",
        }
    }
}

impl FromStr for ProcessKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "shell" => Ok(Self::Shell),
            "python" => Ok(Self::Python),
            "js" | "javascript" => Ok(Self::Javascript),
            other => Err(format!(
                "unknown kind of process {other:?} (expected shell, python or javascript)"
            )),
        }
    }
}

/// Which processes this worker runs: none unless named.
#[derive(Clone, Debug, Default)]
pub struct ProcessConfig {
    /// The kinds it runs.
    pub allow: BTreeSet<ProcessKind>,
}

/// The input of [`PROCESS_ACTIVITY`], recorded in history.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProcessInput {
    pub(crate) kind: ProcessKind,
    /// The command or the script's code.
    pub(crate) code: String,
    #[serde(default)]
    pub(crate) arguments: Vec<String>,
    #[serde(default)]
    pub(crate) environment: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) stdin: Option<String>,
    pub(crate) timeout_ms: u64,
    /// `await: false`: start it and answer at once.
    #[serde(default)]
    pub(crate) detach: bool,
}

/// What a process did: the DSL's process result. `code` is none when a signal ended it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub(crate) struct ProcessResult {
    pub(crate) code: Option<i32>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Registers [`PROCESS_ACTIVITY`] on `registry`, running the kinds `config` allows and
/// refusing the others.
pub fn register_processes(registry: &mut Registry, config: &ProcessConfig) {
    let allow = Arc::new(config.allow.clone());
    registry.activity(
        PROCESS_ACTIVITY,
        move |_ctx: ActivityContext, input: ProcessInput| {
            let allow = allow.clone();
            async move {
                if !allow.contains(&input.kind) {
                    return Err(ActivityError::non_retryable(
                        RUN_NOT_ALLOWED,
                        format!(
                            "this worker does not run {} processes: start it with --allow-run {}",
                            input.kind.as_str(),
                            input.kind.as_str()
                        ),
                    ));
                }
                if input.detach {
                    // Started and left: its time limit and clean-up run on their own.
                    tokio::spawn(async move {
                        let _ = run(&input).await;
                    });
                    return Ok(None);
                }
                run(&input).await.map(Some)
            }
        },
    );
}

/// Runs the process in a directory of its own (made under the system's temporary
/// directory, then removed), within its time limit.
async fn run(input: &ProcessInput) -> Result<ProcessResult, ActivityError> {
    let dir = tempfile::Builder::new()
        .prefix("ratchet-run-")
        .tempdir()
        .map_err(|e| {
            ActivityError::non_retryable("ProcessFailed", format!("making its directory: {e}"))
        })?;
    let limit = Duration::from_millis(input.timeout_ms);
    let outcome = tokio::time::timeout(limit, spawn_and_wait(dir.path(), input)).await;
    // Whatever the process left there goes, off the runtime's threads.
    let _ = tokio::task::spawn_blocking(move || drop(dir)).await;
    match outcome {
        Ok(result) => result,
        Err(_) => Err(ActivityError::non_retryable(
            PROCESS_TIMEOUT,
            format!("the process did not finish within {limit:?}: it was killed"),
        )),
    }
}

async fn spawn_and_wait(dir: &Path, input: &ProcessInput) -> Result<ProcessResult, ActivityError> {
    let failed = |what: String, e: std::io::Error| {
        ActivityError::non_retryable("ProcessFailed", format!("{what}: {e}"))
    };
    let mut command = match input.kind {
        ProcessKind::Shell => {
            let mut c = tokio::process::Command::new("sh");
            c.arg("-c").arg(&input.code).arg("sh");
            c
        }
        ProcessKind::Python | ProcessKind::Javascript => {
            let (program, file) = match input.kind {
                ProcessKind::Python => ("python3", "script.py"),
                _ => ("node", "script.mjs"),
            };
            let path = dir.join(file);
            tokio::fs::write(&path, &input.code)
                .await
                .map_err(|e| failed("writing the script".into(), e))?;
            let mut c = tokio::process::Command::new(program);
            c.arg(path);
            c
        }
    };
    command
        .args(&input.arguments)
        .current_dir(dir)
        .env_clear()
        .envs(std::env::var_os("PATH").map(|p| ("PATH", p)))
        .envs(&input.environment)
        .stdin(if input.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| failed(format!("starting {}", input.kind.as_str()), e))?;
    let stdin = child.stdin.take();
    let feed = async {
        if let (Some(mut pipe), Some(text)) = (stdin, &input.stdin) {
            // A process that does not read its input closes the pipe: not an error.
            let _ = pipe.write_all(text.as_bytes()).await;
        }
    };
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let (_, stdout, stderr) = tokio::join!(
        feed,
        read_capped(stdout, "its standard output"),
        read_capped(stderr, "its standard error")
    );
    let (stdout, stderr) = match (stdout, stderr) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(which), _) | (_, Err(which)) => {
            return Err(ActivityError::non_retryable(
                "ProcessFailed",
                format!("the process wrote more than {MAX_PROCESS_OUTPUT_BYTES} bytes to {which}"),
            ))
        }
    };
    let status = child
        .wait()
        .await
        .map_err(|e| failed("waiting for the process".into(), e))?;
    Ok(ProcessResult {
        code: status.code(),
        stdout,
        stderr,
    })
}

/// Reads a pipe to its end, at most [`MAX_PROCESS_OUTPUT_BYTES`]; more is an error.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
    pipe: Option<R>,
    which: &'static str,
) -> Result<String, &'static str> {
    let Some(pipe) = pipe else {
        return Ok(String::new());
    };
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_PROCESS_OUTPUT_BYTES).unwrap_or(u64::MAX) + 1;
    let _ = pipe.take(limit).read_to_end(&mut bytes).await;
    if bytes.len() > MAX_PROCESS_OUTPUT_BYTES {
        return Err(which);
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
