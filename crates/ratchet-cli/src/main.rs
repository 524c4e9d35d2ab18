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

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use ratchet::{Client, InstanceFilter, InstanceStatus, SqliteStore, Store, Timestamp};

/// Ratchet: durable workflows in plain async Rust, on an embedded SQLite file.
#[derive(Parser, Debug)]
#[command(name = "ratchet", version)]
struct Cli {
    /// The embedded SQLite database file (default: ratchet-demo.db for `demo`, ratchet.db otherwise).
    #[arg(long, global = true, env = "RATCHET_DB")]
    db: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a sample order workflow (reserve, charge with retries, ship in parallel, wait for
    /// delivery). Killing it and running it again resumes the unfinished orders.
    Demo(demo::DemoArgs),
    /// Create or upgrade the database schema (also done on every start).
    Migrate,
    /// Inspect and steer orchestration instances.
    #[command(subcommand)]
    Instances(InstanceCommand),
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
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Show one instance as JSON: status, input, output, error, custom status.
    Show {
        /// Instance id.
        id: String,
    },
    /// Print an instance's history, one event per line.
    History {
        /// Instance id.
        id: String,
    },
    /// Raise a signal.
    Signal {
        /// Instance id.
        id: String,
        /// Signal name.
        name: String,
        /// Payload as JSON.
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
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("RATCHET_LOG")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let default_db = match cli.command {
        Command::Demo(_) => "ratchet-demo.db",
        _ => "ratchet.db",
    };
    let db = cli.db.clone().unwrap_or_else(|| default_db.to_string());
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&db)
            .await
            .with_context(|| format!("opening the SQLite database {db}"))?,
    );
    match cli.command {
        Command::Demo(args) => demo::run(store, &db, args).await,
        Command::Migrate => {
            out!("{db}: schema at version {}", ratchet_store_version());
            Ok(())
        }
        Command::Instances(cmd) => instances(Client::new(store), cmd).await,
    }
}

fn ratchet_store_version() -> i64 {
    ratchet::SCHEMA_VERSION
}

async fn instances(client: Client, cmd: InstanceCommand) -> anyhow::Result<()> {
    match cmd {
        InstanceCommand::List {
            status,
            name,
            since_secs,
            limit,
        } => {
            let statuses = status
                .iter()
                .map(|s| s.parse::<InstanceStatus>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(anyhow::Error::msg)?;
            let created_after =
                since_secs.map(|s| Timestamp(Timestamp::now().as_millis() - (s as i64) * 1000));
            let filter = InstanceFilter {
                statuses,
                name,
                created_after,
                created_before: None,
                limit: Some(limit),
            };
            let list = client.list(filter).await?;
            out!(
                "{:<38} {:<16} {:<15} {:>4} {:>8}",
                "id",
                "name",
                "status",
                "exec",
                "history"
            );
            for r in list {
                out!(
                    "{:<38} {:<16} {:<15} {:>4} {:>8}",
                    r.id,
                    r.name,
                    r.status.to_string(),
                    r.execution,
                    r.history_len
                );
            }
        }
        InstanceCommand::Show { id } => {
            let r = client.status(&id).await?;
            let json = serde_json::json!({
                "id": r.id, "name": r.name, "version": r.version, "status": r.status.to_string(),
                "execution": r.execution, "input": r.input, "output": r.output, "error": r.error,
                "custom_status": r.custom_status, "parent": r.parent, "history_len": r.history_len,
                "created_at_ms": r.created_at.as_millis(), "finished_at_ms": r.finished_at.map(|t| t.as_millis()),
            });
            out!("{}", serde_json::to_string_pretty(&json)?);
        }
        InstanceCommand::History { id } => {
            for h in client.history(&id).await? {
                out!(
                    "{:>3} {:>4}  {}",
                    h.execution,
                    h.seq,
                    serde_json::to_string(&h.event)?
                );
            }
        }
        InstanceCommand::Signal {
            id,
            name,
            payload,
            dedup,
        } => {
            let payload: serde_json::Value =
                serde_json::from_str(&payload).context("--payload must be JSON")?;
            let raised = match dedup {
                Some(d) => client.signal_once(&id, &name, payload, &d).await?,
                None => client.signal(&id, &name, payload).await.map(|()| true)?,
            };
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
            client.cancel(&id, &reason).await?;
            out!("cancellation requested");
        }
        InstanceCommand::Terminate { id, reason } => {
            client.terminate(&id, &reason).await?;
            out!("terminated");
        }
        InstanceCommand::Wait { id, timeout_secs } => {
            let o = client.wait(&id, Duration::from_secs(timeout_secs)).await?;
            out!("{}: {}", o.id, o.status);
            if let Some(out) = o.output {
                out!("{}", serde_json::to_string_pretty(&out)?);
            }
            if let Some(e) = o.error {
                bail!("{e}");
            }
        }
    }
    Ok(())
}
