//! The `ratchet` command-line tool.

/// Prints a line; a closed stdout (`ratchet instances list | head`) ends the program quietly
/// instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if writeln!(std::io::stdout(), $($arg)*).is_err() {
            std::process::exit(0);
        }
    }};
}

mod demo;
mod events;
mod input;
mod logging;
mod otlp;
mod schedules;
mod server;
mod tasks;
mod tokens;
mod worker;
mod workflows;

use std::sync::Arc;
use std::time::Duration;

/// mimalloc rather than the system allocator: see Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use anyhow::{bail, Context};
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ratchet::{
    Client, InstanceStatus, PostgresConfig, PostgresStore, SqliteStore, Store, Timestamp,
};
use ratchet_api::{
    Api, HttpApi, IfExistsParam, InstanceQuery, LocalApi, PurgeRequest, SignalRequest,
    StartRequest, StopRequest, WriteParams,
};

/// Ratchet: durable workflows in plain async Rust, on an embedded SQLite file or PostgreSQL.
#[derive(Parser, Debug)]
#[command(name = "ratchet", version)]
struct Cli {
    /// The embedded SQLite database file (default: ratchet-demo.db for `demo`, ratchet.db otherwise).
    #[arg(long, global = true, env = "RATCHET_DB")]
    db: Option<String>,
    /// Use PostgreSQL instead of SQLite: postgres://user:password@host:port/database.
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The PostgreSQL schema holding Ratchet's tables.
    #[arg(long, global = true, env = "RATCHET_SCHEMA", default_value = "ratchet")]
    schema: String,
    /// PostgreSQL: poll only, without LISTEN/NOTIFY or prepared statements (for PgBouncer in
    /// transaction mode).
    #[arg(long, global = true)]
    no_notify: bool,
    /// Run `instances`, `tasks`, `queues` and `events` commands, and `workflows delete`, on
    /// this `ratchet server` (its URL) instead of the database: no database credentials needed.
    #[arg(long, global = true, env = "RATCHET_SERVER")]
    server: Option<String>,
    /// The bearer token for --server (`ratchet tokens create`).
    #[arg(long, global = true, env = "RATCHET_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Export traces to this OpenTelemetry collector (OTLP over HTTP with JSON, e.g.
    /// http://localhost:4318): a server's requests, and each instance's turns and activities
    /// in the trace of the request that started it (its W3C `traceparent`).
    #[arg(long, global = true, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    /// On an error, print every cause and where it happened (with RUST_BACKTRACE=1), not
    /// just what went wrong.
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a sample order workflow (reserve, charge with retries, ship in parallel, wait for
    /// delivery). Killing it and running it again resumes the unfinished orders.
    Demo(demo::DemoArgs),
    /// Run the sample orchestrations (`order`, `fanout`) until stopped; start several to
    /// share the work of one database.
    Worker(worker::WorkerArgs),
    /// Serve the HTTP API (docs/api.md) on --listen, running the sample orchestrations and
    /// task in the same process unless --no-worker.
    Server(server::ServerArgs),
    /// Create or upgrade the database schema (`worker` and `demo` do it too on SQLite; on
    /// PostgreSQL the demo does, and a worker with `--migrate`). No other command changes the
    /// schema: they need only the grants of docs/operations.md.
    Migrate,
    /// Inspect and steer orchestration instances.
    #[command(subcommand)]
    Instances(InstanceCommand),
    /// Enqueue, inspect and steer standalone tasks (dead letters included).
    #[command(subcommand)]
    Tasks(tasks::TaskCommand),
    /// Inspect queues; pause, resume and limit them across every process.
    #[command(subcommand)]
    Queues(tasks::QueueCommand),
    /// Make, list and revoke the API tokens `ratchet server --auth` asks for.
    #[command(subcommand)]
    Tokens(tokens::TokenCommand),
    /// Declarative workflows (the Serverless Workflow DSL): apply, validate, list, show and
    /// delete definitions kept in the database, which every worker loads when it starts.
    #[command(subcommand)]
    Workflows(workflows::WorkflowCommand),
    /// Cron expressions and intervals that start a workflow or enqueue a task, fired once
    /// per tick by whichever workers run: create, update, pause, resume, trigger, backfill,
    /// delete, list, describe.
    #[command(subcommand)]
    Schedules(schedules::ScheduleCommand),
    /// Append events (optionally only if no matching event arrived since a position), read
    /// them by type and tag, and follow them live.
    #[command(subcommand)]
    Events(events::EventCommand),
    /// Measure: the published scenarios of the systems Ratchet replaces (fanout, signals,
    /// tasks, events), on SQLite or PostgreSQL, optionally through a simulated distant
    /// database (`ratchet bench --help`). Runs the `ratchet-bench` binary built beside this one.
    #[command(disable_help_flag = true)]
    Bench {
        /// The bench command and its options.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
enum InstanceCommand {
    /// List instances, newest first.
    List {
        /// Only these statuses (comma-separated: Running,Failed,...).
        #[arg(long, value_delimiter = ',')]
        status: Vec<String>,
        /// Only this orchestration name.
        #[arg(long)]
        name: Option<String>,
        /// Only instances created in the last N seconds.
        #[arg(long)]
        since_secs: Option<u64>,
        /// Only instances whose custom status is this (JSON, or else a string).
        #[arg(long)]
        custom_status: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one instance as JSON: status, input, output, error, custom status.
    Show {
        /// Instance id.
        id: String,
        /// On one line (JSON lines) instead of indented.
        #[arg(long)]
        json: bool,
    },
    /// Print an instance's history, one event per line.
    History {
        /// Instance id.
        id: String,
        /// One JSON object per line: execution, seq and the event.
        #[arg(long)]
        json: bool,
    },
    /// Start an instance of an orchestration that a worker runs (e.g. `fanout` with
    /// `{"activities":5,"activity_ms":10}`).
    Start {
        /// Orchestration name.
        name: String,
        /// Input as JSON; `@path` reads it from a file, `-` from standard input.
        #[arg(long, default_value = "null")]
        input: String,
        /// Instance id (default: a new UUID).
        #[arg(long)]
        id: Option<String>,
        /// If the id exists, report it instead of failing.
        #[arg(long)]
        use_existing: bool,
        /// With --server: start it even if no live or recent worker runs this orchestration.
        #[arg(long)]
        allow_unknown: bool,
    },
    /// Raise a signal.
    Signal {
        /// Instance id.
        id: String,
        /// Signal name.
        name: String,
        /// Payload as JSON; `@path` reads it from a file, `-` from standard input.
        #[arg(long, default_value = "null")]
        payload: String,
        /// Raise at most once per this id.
        #[arg(long)]
        dedup: Option<String>,
    },
    /// Ask an instance to cancel (its code may clean up).
    Cancel {
        /// Instance id.
        id: String,
        /// Why.
        #[arg(long, default_value = "cancelled from the command line")]
        reason: String,
    },
    /// Stop an instance at once.
    Terminate {
        /// Instance id.
        id: String,
        /// Why.
        #[arg(long, default_value = "terminated from the command line")]
        reason: String,
    },
    /// Remove finished instances, with their history, that finished more than N days ago.
    Purge {
        /// Age in days (0 removes every finished instance).
        #[arg(long)]
        older_than_days: u64,
    },
    /// Wait for an instance to finish and print its outcome.
    Wait {
        /// Instance id.
        id: String,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 60)]
        timeout_secs: u64,
    },
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let matches = Cli::command().get_matches();
    let verbose = matches.get_flag("verbose");
    let tracing = match matches.get_one::<String>("otlp_endpoint") {
        Some(endpoint) => match otlp::init(endpoint) {
            Ok(tracing) => Some(tracing),
            Err(e) => {
                eprintln!("error: cannot export traces to {endpoint}: {e}");
                return std::process::ExitCode::FAILURE;
            }
        },
        None => {
            logging::init();
            None
        }
    };
    let result = run(matches).await;
    if let Some(tracing) = tracing {
        tracing.flush().await;
    }
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if verbose {
                eprintln!("Error: {e:?}");
            } else {
                eprintln!("{}", error_report(&e));
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error as an operator reads it: what went wrong, then each cause that says something
/// new (a cause whose text its parent's already holds is left out), and no backtrace.
fn error_report(e: &anyhow::Error) -> String {
    let mut out = format!("error: {e}");
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(&format!("\n  caused by: {text}"));
        }
    }
    out
}

async fn run(matches: clap::ArgMatches) -> anyhow::Result<()> {
    let mut cli = Cli::from_arg_matches(&matches)?;
    // A flag beats an environment variable: `--db x.db` runs on SQLite even where
    // DATABASE_URL is set; both as flags is a contradiction.
    let from_flag = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    if from_flag("db") {
        if from_flag("database_url") {
            bail!("choose one database: --db (SQLite) or --database-url (PostgreSQL)");
        }
        cli.database_url = None;
    }
    if let Command::Bench { args } = &cli.command {
        return run_bench(args, cli.database_url.as_deref());
    }
    // Checking definitions needs no database.
    if let Command::Workflows(workflows::WorkflowCommand::Validate { paths }) = &cli.command {
        return workflows::validate(paths);
    }
    if let Command::Workflows(workflows::WorkflowCommand::Render {
        file: Some(file),
        output,
        ..
    }) = &cli.command
    {
        return workflows::render_file(file, output.as_deref());
    }
    if let Command::Server(args) = &cli.command {
        if args.print_openapi {
            out!("{}", ratchet_server::openapi().to_pretty_json()?);
            return Ok(());
        }
    }
    // Bad events are refused before the database is opened (or created).
    let append = match &cli.command {
        Command::Events(events::EventCommand::Append(args)) => Some(events::parse_append(args)?),
        _ => None,
    };
    // On a server: the commands that have a remote form run over HTTP and open no database.
    if let Some(server) = cli.server.clone().filter(|s| !s.is_empty()) {
        let api = HttpApi::new(&server, cli.token.clone())?;
        return match cli.command {
            Command::Instances(cmd) => instances(&api, cmd).await,
            Command::Tasks(cmd) => tasks::tasks(&api, cmd).await,
            Command::Queues(cmd) => tasks::queues(&api, cmd).await,
            Command::Events(cmd) => events::run(&api, cmd, append).await,
            Command::Workflows(
                cmd @ (workflows::WorkflowCommand::List { .. }
                | workflows::WorkflowCommand::Show { .. }
                | workflows::WorkflowCommand::Delete { .. }),
            ) => workflows::run_api(&api, cmd).await,
            Command::Schedules(cmd) => schedules::run(&api, cmd).await,
            other => bail!(
                "--server runs the instances, tasks, queues, events and schedules commands and `workflows list`, `show` and `delete`; {} needs the database",
                command_name(&other)
            ),
        };
    }
    // Only these change the schema; every other command checks its version and says what to
    // run when it is behind, so that roles without CREATE can use them.
    let sqlite = cli.database_url.as_deref().is_none_or(str::is_empty);
    let migrates = match &cli.command {
        Command::Migrate | Command::Demo(_) => true,
        Command::Worker(args) => args.migrates(sqlite),
        Command::Server(args) => args.migrates(sqlite),
        _ => false,
    };
    let (store, about) = open_store(&cli, migrates).await?;
    // A worker or server whose role may not write would start and fail every claim: it
    // refuses to start instead, saying what to grant.
    if let (Command::Worker(_) | Command::Server(_), Some(pg)) = (&cli.command, store.postgres()) {
        pg.check_worker_grants()
            .await
            .with_context(|| format!("starting on {about}"))?;
    }
    match cli.command {
        Command::Demo(args) => demo::run(store, &about, args).await,
        Command::Worker(args) => worker::run(store, &about, args).await,
        Command::Server(args) => server::run(store.into_dyn(), &about, args).await,
        Command::Migrate => {
            let version = match store.postgres() {
                Some(pg) => pg.schema_version().await?,
                None => ratchet::SCHEMA_VERSION,
            };
            out!("{about}: schema at version {version}");
            Ok(())
        }
        Command::Instances(cmd) => instances(&local_api(store), cmd).await,
        Command::Tasks(cmd) => tasks::tasks(&local_api(store), cmd).await,
        Command::Queues(cmd) => tasks::queues(&local_api(store), cmd).await,
        Command::Tokens(cmd) => tokens::run(store.into_dyn(), cmd).await,
        Command::Workflows(cmd) => workflows::run(store.into_dyn(), cmd).await,
        Command::Schedules(cmd) => schedules::run(&local_api(store), cmd).await,
        Command::Events(cmd) => events::run(&local_api(store), cmd, append).await,
        Command::Bench { .. } => Ok(()),
    }
}

/// A command's name, for messages.
fn command_name(command: &Command) -> &'static str {
    match command {
        Command::Demo(_) => "demo",
        Command::Worker(_) => "worker",
        Command::Server(_) => "server",
        Command::Migrate => "migrate",
        Command::Instances(_) => "instances",
        Command::Tasks(_) => "tasks",
        Command::Queues(_) => "queues",
        Command::Tokens(_) => "tokens",
        Command::Workflows(_) => "workflows",
        Command::Schedules(_) => "schedules",
        Command::Events(_) => "events",
        Command::Bench { .. } => "bench",
    }
}

/// Runs the `ratchet-bench` binary that sits beside this one with `args`: the benchmark and
/// the counting allocator it needs stay out of this binary, which workers run.
fn run_bench(args: &[String], database_url: Option<&str>) -> anyhow::Result<()> {
    let name = format!("ratchet-bench{}", std::env::consts::EXE_SUFFIX);
    let path = std::env::current_exe()
        .context("finding this program")?
        .with_file_name(&name);
    if !path.exists() {
        bail!(
            "{} is missing: build it with `cargo build --release -p ratchet-cli`",
            path.display()
        );
    }
    let mut bench = std::process::Command::new(&path);
    bench.args(args);
    // A bench makes its own databases: a fresh file or schema per run, on this server.
    match database_url {
        Some(url) => bench.env("DATABASE_URL", url),
        None => bench.env_remove("DATABASE_URL"),
    };
    let status = bench
        .status()
        .with_context(|| format!("running {}", path.display()))?;
    match status.code() {
        Some(0) => Ok(()),
        // It said what went wrong itself.
        Some(code) => std::process::exit(code),
        None => bail!("{} was stopped by a signal", path.display()),
    }
}

/// The store the command runs on, and a line naming it for people.
enum OpenStore {
    Sqlite(Arc<SqliteStore>),
    Postgres(Arc<PostgresStore>),
}

impl OpenStore {
    fn postgres(&self) -> Option<&PostgresStore> {
        match self {
            Self::Postgres(pg) => Some(pg),
            Self::Sqlite(_) => None,
        }
    }

    fn into_dyn(self) -> Arc<dyn Store> {
        match self {
            Self::Sqlite(s) => s,
            Self::Postgres(p) => p,
        }
    }
}

async fn open_store(cli: &Cli, migrate: bool) -> anyhow::Result<(OpenStore, String)> {
    if let Some(url) = cli.database_url.as_deref().filter(|u| !u.is_empty()) {
        let mut config = PostgresConfig {
            schema: cli.schema.clone(),
            migrate,
            ..PostgresConfig::default()
        };
        if cli.no_notify {
            config = config.pgbouncer();
        }
        let about = format!(
            "PostgreSQL {} (schema {})",
            ratchet::describe_database_url(url),
            cli.schema
        );
        let store = PostgresStore::connect_with(url, config)
            .await
            .with_context(|| format!("connecting to {about}"))?;
        return Ok((OpenStore::Postgres(Arc::new(store)), about));
    }
    let default_db = match cli.command {
        Command::Demo(_) => "ratchet-demo.db",
        _ => "ratchet.db",
    };
    let db = cli.db.clone().unwrap_or_else(|| default_db.to_string());
    let store = if migrate {
        SqliteStore::open(&db).await
    } else {
        // A mistyped path is an error, not a new empty database.
        SqliteStore::open_existing(&db).await
    }
    .with_context(|| format!("opening the SQLite database {db}"))?;
    Ok((OpenStore::Sqlite(Arc::new(store)), db))
}

async fn instances(api: &dyn Api, cmd: InstanceCommand) -> anyhow::Result<()> {
    match cmd {
        InstanceCommand::List {
            status,
            name,
            since_secs,
            custom_status,
            limit,
            json,
        } => {
            // Checked here, so a typo is refused before anything is asked.
            for s in &status {
                s.parse::<InstanceStatus>().map_err(anyhow::Error::msg)?;
            }
            let created_after = since_secs.map(|s| {
                let ms = i64::try_from(s.saturating_mul(1000)).unwrap_or(i64::MAX);
                Timestamp(Timestamp::now().as_millis().saturating_sub(ms)).clamped()
            });
            let query = InstanceQuery {
                status: (!status.is_empty()).then(|| status.join(",")),
                name,
                created_after: created_after.map(ratchet_api::time::rfc3339),
                limit: Some(limit),
                custom_status,
                ..InstanceQuery::default()
            };
            let list = api.instances_list(&query).await?.items;
            if json {
                for r in &list {
                    out!("{}", serde_json::to_string(r)?);
                }
                return Ok(());
            }
            out!(
                "{:<38} {:<16} {:<15} {:>4} {:>8}  created",
                "id",
                "name",
                "status",
                "exec",
                "history"
            );
            for r in list {
                out!(
                    "{:<38} {:<16} {:<15} {:>4} {:>8}  {}",
                    r.id,
                    r.name,
                    r.status.to_string(),
                    r.execution,
                    r.history_len,
                    r.created_at
                );
            }
        }
        InstanceCommand::Show { id, json } => {
            let r = api.instances_show(&id).await?;
            if json {
                out!("{}", serde_json::to_string(&r)?);
            } else {
                out!("{}", serde_json::to_string_pretty(&r)?);
            }
        }
        InstanceCommand::History { id, json } => {
            for h in api.instances_history_all(&id).await? {
                if json {
                    out!("{}", serde_json::to_string(&h)?);
                } else {
                    out!(
                        "{:>3} {:>4}  {}",
                        h.execution,
                        h.seq,
                        serde_json::to_string(&h.event)?
                    );
                }
            }
        }
        InstanceCommand::Start {
            name,
            input,
            id,
            use_existing,
            allow_unknown,
        } => {
            let start = StartRequest {
                id,
                if_exists: if use_existing {
                    IfExistsParam::UseExisting
                } else {
                    IfExistsParam::Fail
                },
                ..StartRequest::new(name, input::json(&input, "--input")?)
            };
            let started = api
                .instances_start(&start, WriteParams { allow_unknown })
                .await?;
            out!("{}", started.id);
        }
        InstanceCommand::Purge { older_than_days } => {
            let age = i64::try_from(older_than_days.saturating_mul(86_400_000)).unwrap_or(i64::MAX);
            let before = Timestamp(Timestamp::now().as_millis().saturating_sub(age)).clamped();
            let purge = PurgeRequest {
                finished_before: ratchet_api::time::rfc3339(before),
            };
            let purged = api.instances_purge(&purge).await?;
            out!("removed {} finished instance(s)", purged.removed);
        }
        InstanceCommand::Signal {
            id,
            name,
            payload,
            dedup,
        } => {
            let signal = SignalRequest {
                name,
                payload: input::json(&payload, "--payload")?,
                dedup_id: dedup,
            };
            let raised = api.instances_signal(&id, &signal).await?.raised;
            out!(
                "{}",
                if raised {
                    "raised"
                } else {
                    "duplicate: already raised"
                }
            );
        }
        InstanceCommand::Cancel { id, reason } => {
            let stop = StopRequest {
                reason: Some(reason),
            };
            api.instances_cancel(&id, &stop).await?;
            out!("cancellation requested");
        }
        InstanceCommand::Terminate { id, reason } => {
            let stop = StopRequest {
                reason: Some(reason),
            };
            api.instances_terminate(&id, &stop).await?;
            out!("terminated");
        }
        InstanceCommand::Wait { id, timeout_secs } => {
            let o = api
                .instances_wait_until(&id, Duration::from_secs(timeout_secs))
                .await?;
            out!("{}: {}", o.id, o.status);
            if let Some(output) = &o.output {
                out!("{}", serde_json::to_string_pretty(output)?);
            }
            if let Some(error) = o.error {
                // A declarative workflow's error whole: type, status, title, detail, instance.
                if let Some(details) = &error.details {
                    out!("{}", serde_json::to_string_pretty(details)?);
                }
                bail!("{error}");
            }
        }
    }
    Ok(())
}

/// The API on the database, in this process.
fn local_api(store: OpenStore) -> LocalApi {
    LocalApi::new(Client::new(store.into_dyn()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_error_names_each_cause_once() {
        let e = anyhow::Error::msg("error connecting to server: Connection refused")
            .context("database error: error connecting to server: Connection refused")
            .context("connecting to PostgreSQL postgres://u@h/db");
        assert_eq!(
            super::error_report(&e),
            "error: connecting to PostgreSQL postgres://u@h/db\n  caused by: database error: error connecting to server: Connection refused"
        );
    }
}
