//! `ratchet worker`: a runtime that runs the sample orchestrations and task until stopped, so
//! several processes can share one database (start work with `ratchet instances start` and
//! `ratchet tasks enqueue`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use ratchet::{
    ActivityContext, ActivityError, OrchestrationContext, OrchestrationError, Ratchet,
    RuntimeConfig, Store, TaskContext, TaskError,
};
use serde::{Deserialize, Serialize};

/// Options of the worker.
#[derive(clap::Args, Debug)]
pub(crate) struct WorkerArgs {
    /// A name for this process, recorded by the `fanout` activities it runs (default: its pid).
    #[arg(long)]
    label: Option<String>,
    /// Lease length in milliseconds: a crashed worker's work is taken over this long after.
    #[arg(long, default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(100..))]
    lease_ms: u64,
    /// How long after expiring this worker's leases stay its own while it is alive, in
    /// milliseconds: a database stall shorter than this runs nothing twice, and a lease it
    /// holds without knowing (a claim whose answer a dropped connection lost) is taken over
    /// after the lease plus this.
    #[arg(long, default_value_t = 60_000)]
    stall_grace_ms: u64,
    /// How often to look for work when nothing woke the worker, in milliseconds.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..))]
    poll_ms: u64,
    /// Activities run at once.
    #[arg(long, default_value_t = 256)]
    max_activities: usize,
    /// Orchestration turns run at once.
    #[arg(long, default_value_t = 256)]
    max_orchestrations: usize,
    /// Remove finished instances older than this many days (default: keep them).
    #[arg(long)]
    retention_days: Option<u64>,
    /// A task queue to work, as NAME=CONCURRENCY; repeat for several (default: default=64).
    #[arg(long = "queue", value_parser = parse_queue)]
    queues: Vec<(String, usize)>,
    /// Create or upgrade the schema on start (the default on SQLite; on PostgreSQL run
    /// `ratchet migrate` once, or pass this, which needs CREATE on the database).
    #[arg(long, conflicts_with = "no_migrate")]
    migrate: bool,
    /// Never change the schema on start, also on SQLite.
    #[arg(long)]
    no_migrate: bool,
    /// Sends the calls of declarative workflows (`call: http`, `call: openapi`) for a host
    /// name to a fixed address instead of looking it up, as HOST=ADDRESS:PORT (as curl's
    /// --resolve; a URL that names its port keeps it); repeat for several.
    #[arg(long = "http-resolve", value_parser = parse_resolve)]
    http_resolve: Vec<(String, std::net::SocketAddr)>,
    /// A PEM file of root certificates that the calls of declarative workflows trust besides
    /// the web's (a private CA); repeat for several.
    #[arg(long = "http-ca")]
    http_ca: Vec<std::path::PathBuf>,
    /// A JSON or YAML file of the secrets declarative workflows may name (`use.secrets`), an
    /// object of name to value (`{"petstore": {"username": "..", "password": ".."}}`); a
    /// secret not in it is read from the environment variable RATCHET_SECRET_<NAME>.
    #[arg(long)]
    secrets: Option<std::path::PathBuf>,
    /// The directory `call: grpc` reads a `.proto` given as a `file://` URI from
    /// (`file://app/greet.proto` is DIR/app/greet.proto; nothing outside it is read).
    #[arg(long = "grpc-protos", value_name = "DIR")]
    grpc_protos: Option<std::path::PathBuf>,
    /// The processes of declarative workflows this worker runs: `shell` (`run: shell`),
    /// `python` and `javascript` (`run: script`); comma-separated or repeated. None by
    /// default: a process runs with the worker's rights (in a fresh directory, with only PATH
    /// and the variables the definition gives), so only workers told so run them.
    #[arg(long = "allow-run", value_name = "KIND", value_delimiter = ',', value_parser = parse_process_kind)]
    allow_run: Vec<ratchet::workflow::ProcessKind>,
}

fn parse_process_kind(text: &str) -> Result<ratchet::workflow::ProcessKind, String> {
    text.parse()
}

impl WorkerArgs {
    /// Whether this worker creates or upgrades the schema on start.
    pub(crate) fn migrates(&self, sqlite: bool) -> bool {
        self.migrate || (sqlite && !self.no_migrate)
    }
}

fn parse_resolve(text: &str) -> Result<(String, std::net::SocketAddr), String> {
    ratchet::workflow::CallConfig::parse_resolve(text).map_err(|e| e.to_string())
}

/// How this process's declarative workflows reach the world.
fn calls(args: &WorkerArgs) -> anyhow::Result<ratchet::workflow::CallConfig> {
    let mut root_certificates = Vec::new();
    for path in &args.http_ca {
        let pem = std::fs::read(path)
            .with_context(|| format!("reading the --http-ca file {}", path.display()))?;
        root_certificates.push(pem);
    }
    let secrets = match &args.secrets {
        None => Default::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the --secrets file {}", path.display()))?;
            let value = serde_json::from_str(&text)
                .or_else(|_| ratchet::workflow::read_yaml(&text))
                .map_err(|e| {
                    anyhow::anyhow!("the --secrets file {} does not read: {e}", path.display())
                })?;
            match value {
                serde_json::Value::Object(fields) => fields.into_iter().collect(),
                _ => anyhow::bail!(
                    "the --secrets file {} is not an object of name to value",
                    path.display()
                ),
            }
        }
    };
    Ok(ratchet::workflow::CallConfig {
        resolve: args.http_resolve.clone(),
        root_certificates,
        secrets,
        secrets_from_env: true,
        proto_dir: args.grpc_protos.clone(),
    })
}

fn parse_queue(text: &str) -> Result<(String, usize), String> {
    let (name, concurrency) = text
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=CONCURRENCY, got {text:?}"))?;
    ratchet::validate_queue_name(name)?;
    match concurrency.parse::<usize>() {
        Ok(n) if n > 0 => Ok((name.to_string(), n)),
        _ => Err(format!(
            "concurrency must be a whole number from 1, got {concurrency:?}"
        )),
    }
}

/// Input of the sample `work` task.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Work {
    /// How long it works, in milliseconds.
    #[serde(default)]
    pub(crate) ms: u64,
    /// Attempts that fail (with a retryable error) before one succeeds.
    #[serde(default)]
    pub(crate) fail_attempts: u32,
}

/// What the sample `work` task returns.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct WorkDone {
    pub(crate) by: String,
    pub(crate) attempt: u32,
    /// When the attempt started, in milliseconds since the Unix epoch.
    pub(crate) started_ms: i64,
}

/// Input of the sample `fanout` orchestration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct FanOut {
    /// Activities to run in parallel.
    pub(crate) activities: u32,
    /// How long each one works, in milliseconds.
    #[serde(default)]
    pub(crate) activity_ms: u64,
}

/// What one `fanout` activity returns: its index, and the worker that ran it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Step {
    pub(crate) i: u32,
    pub(crate) by: String,
}

/// What `fanout_step` takes: `(i, ms)` from Rust, or `{i, ms}`, the named arguments a
/// declarative workflow's `call` gives.
#[derive(Deserialize)]
#[serde(untagged)]
enum StepInput {
    Tuple(u32, u64),
    Named { i: u32, ms: u64 },
}

impl StepInput {
    fn parts(self) -> (u32, u64) {
        match self {
            StepInput::Tuple(i, ms) | StepInput::Named { i, ms } => (i, ms),
        }
    }
}

async fn fanout(ctx: OrchestrationContext, input: FanOut) -> Result<Vec<Step>, OrchestrationError> {
    let steps =
        (0..input.activities).map(|i| ctx.activity::<Step>("fanout_step", (i, input.activity_ms)));
    ratchet::join_all(steps).await.into_iter().collect()
}

/// Registers the sample orchestrations: the demo's `order` and `fanout`, whose activities
/// record `label`; and the activities of the insurance example
/// (`examples/workflows/insurance.yaml`).
pub(crate) fn register(
    builder: ratchet::Builder,
    label: String,
    runs: Arc<AtomicU64>,
) -> ratchet::Builder {
    let label = Arc::new(label);
    let by = label.clone();
    let builder = ratchet_bench::insurance::register(builder);
    crate::demo::register(builder)
        .task("work", move |ctx: TaskContext, work: Work| {
            let by = by.to_string();
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::Relaxed);
                // One line per attempt started (RATCHET_LOG=ratchet=info): scripts/chaos
                // counts them to check no attempt budget is exceeded.
                tracing::info!(task = ctx.id(), attempt = ctx.attempt(), "work started");
                let started_ms = ratchet::Timestamp::now().as_millis();
                if work.ms > 0 {
                    tokio::time::sleep(Duration::from_millis(work.ms)).await;
                }
                if ctx.attempt() <= work.fail_attempts {
                    return Err(TaskError::new(
                        "Planned",
                        format!("attempt {} fails as asked", ctx.attempt()),
                    ));
                }
                Ok(WorkDone {
                    by,
                    attempt: ctx.attempt(),
                    started_ms,
                })
            }
        })
        .orchestration("fanout", fanout)
        .activity(
            "fanout_step",
            move |ctx: ActivityContext, step: StepInput| {
                let (i, ms) = step.parts();
                let by = label.to_string();
                tracing::info!(
                    instance = %ctx.instance_id(),
                    step = ctx.step(),
                    attempt = ctx.attempt(),
                    "fanout_step started"
                );
                async move {
                    if ms > 0 {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                    Ok::<_, ActivityError>(Step { i, by })
                }
            },
        )
}

/// How often a worker looks for workflow definitions applied since it started.
/// A started runtime of the sample orchestrations and task.
pub(crate) struct Started {
    pub(crate) ratchet: Ratchet,
    pub(crate) label: String,
    /// The queues it works, for people: `default (64 at once)`.
    pub(crate) serves: String,
    runs: Arc<AtomicU64>,
}

/// Starts a runtime of the sample orchestrations and task on `store`, tuned by `args`. With
/// `activities_elsewhere` (a server's), its workflows may call activities that workers over
/// HTTP run.
pub(crate) async fn start(
    store: Arc<dyn Store>,
    args: WorkerArgs,
    activities_elsewhere: bool,
) -> anyhow::Result<Started> {
    let calls = calls(&args)?;
    let label = args
        .label
        .unwrap_or_else(|| format!("pid-{}", std::process::id()));
    let lease = Duration::from_millis(args.lease_ms);
    let config = RuntimeConfig {
        label: Some(label.clone()),
        lease,
        heartbeat: lease / 3,
        poll_interval: Duration::from_millis(args.poll_ms),
        stall_grace: Duration::from_millis(args.stall_grace_ms),
        max_activities: args.max_activities,
        max_orchestrations: args.max_orchestrations,
        retention: args
            .retention_days
            .map(|d| Duration::from_secs(d.saturating_mul(86_400))),
        ..RuntimeConfig::default()
    };
    let runs = Arc::new(AtomicU64::new(0));
    let mut builder = register(
        Ratchet::builder()
            .store(store.clone())
            .config(config)
            .calls(calls)
            .processes(ratchet::workflow::ProcessConfig {
                allow: args.allow_run.iter().copied().collect(),
            }),
        label.clone(),
        runs.clone(),
    );
    let queues = if args.queues.is_empty() {
        vec![("default".to_string(), 64)]
    } else {
        args.queues
    };
    for (name, concurrency) in &queues {
        builder = builder.queue(name, *concurrency);
    }
    if activities_elsewhere {
        builder = builder.activities_elsewhere();
    }
    let ratchet = builder.start().await.context("starting the runtime")?;
    // Runs for the life of the process.
    let _looking = ratchet::workflow::keep_registered(store.clone(), ratchet.client().clone())
        .await
        .context("loading the stored workflows")?;
    let serves = queues
        .iter()
        .map(|(name, n)| format!("{name} ({n} at once)"))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Started {
        ratchet,
        label,
        serves,
        runs,
    })
}

pub(crate) async fn run(
    store: crate::OpenStore,
    about: &str,
    args: WorkerArgs,
) -> anyhow::Result<()> {
    let Started {
        ratchet,
        label,
        serves,
        runs,
    } = start(store.into_dyn(), args, false).await?;
    out!(
        "worker {label} ({}) ready on {about}: orchestrations order, fanout; task work on queue(s) {serves}; Ctrl-C to stop",
        ratchet.runtime().owner()
    );
    wait_for_stop().await;
    out!("worker {label} stopping: finishing or releasing its work");
    ratchet.shutdown().await;
    out!(
        "worker {label} stopped after {} task attempt(s)",
        runs.load(Ordering::Relaxed)
    );
    Ok(())
}

/// Ctrl-C or SIGTERM.
pub(crate) async fn wait_for_stop() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
