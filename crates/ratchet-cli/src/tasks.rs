//! `ratchet tasks ...` and `ratchet queues ...`: standalone tasks and their queues.

use std::time::Duration;

use anyhow::{bail, Context};

use clap::Subcommand;
use ratchet::{QueueLimits, TaskFilter, TaskOptions, TaskRequest, TaskState};
use serde_json::Value;

use crate::ops::{Act, Ops};
use crate::text;

#[derive(Subcommand, Debug)]
pub(crate) enum TaskCommand {
    /// List standalone tasks, newest first.
    List {
        /// Only this queue.
        #[arg(long)]
        queue: Option<String>,
        /// Only these states (comma-separated: Available,Running,Dead,...).
        #[arg(long, value_delimiter = ',')]
        state: Vec<String>,
        /// Only this task name.
        #[arg(long)]
        name: Option<String>,
        /// At most this many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Show one task as JSON: state, attempts, input, output, last error.
    Show {
        /// Task id.
        id: i64,
        /// On one line (JSON lines) instead of indented.
        #[arg(long)]
        json: bool,
    },
    /// Enqueue a task (a worker with a handler of that name runs it).
    Enqueue {
        /// Task name.
        name: String,
        /// Input as JSON; `@path` reads it from a file, `-` from standard input.
        #[arg(long, default_value = "null")]
        input: String,
        /// Queue.
        #[arg(long, default_value = "default")]
        queue: String,
        /// Lower runs first.
        #[arg(long, default_value_t = 0, allow_hyphen_values = true)]
        priority: i16,
        /// Run no earlier than this many milliseconds from now.
        #[arg(long, default_value_t = 0)]
        delay_ms: u64,
        /// Attempts in all (at least 1).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        max_attempts: Option<u32>,
        /// While a task with this key is unfinished, enqueueing it again does nothing. With
        /// --count, the key of task i is KEY-i.
        #[arg(long)]
        unique_key: Option<String>,
        /// Metadata as JSON (`@path` and `-` as for --input).
        #[arg(long)]
        metadata: Option<String>,
        /// Enqueue this many copies, in calls of up to 5,000 (a progress bar on a terminal).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        count: u32,
        /// With --server: enqueue even if no live or recent worker runs this task.
        #[arg(long)]
        allow_unknown: bool,
    },
    /// Wait for a task to finish and print it.
    Wait {
        /// Task id.
        id: i64,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 60)]
        timeout_secs: u64,
    },
    /// Run dead (or cancelled) tasks again, with a fresh budget of attempts.
    Retry {
        /// Task ids.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
    /// Remove finished tasks (dead letters, results) for good.
    Discard {
        /// Task ids.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
    /// Cancel tasks: waiting ones at once, running ones at their worker's next heartbeat.
    Cancel {
        /// Task ids.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
}

#[derive(Subcommand, Debug)]
pub(crate) enum QueueCommand {
    /// Every queue with its settings and its tasks by state.
    List {
        /// One JSON object per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Start no task of the queue anywhere until it is resumed.
    Pause {
        /// Queue name.
        queue: String,
    },
    /// Resume a paused queue.
    Resume {
        /// Queue name.
        queue: String,
    },
    /// Set the queue's limits across every process; no option removes them.
    Limit {
        /// Queue name.
        queue: String,
        /// Tasks started per second at most.
        #[arg(long)]
        rate: Option<f64>,
        /// Tasks that may start at once after a quiet spell.
        #[arg(long)]
        burst: Option<u32>,
        /// Tasks running at once at most.
        #[arg(long)]
        concurrency: Option<u32>,
    },
}

/// Tasks per enqueue call of `tasks enqueue --count`: memory stays bounded however many.
const ENQUEUE_BATCH: u32 = 5_000;

fn line(t: &Value) -> String {
    let error = match t["error"].is_null() {
        true => String::new(),
        false => serde_json::from_value::<ratchet::ErrorInfo>(t["error"].clone())
            .map(|e| e.to_string())
            .unwrap_or_else(|_| t["error"].to_string()),
    };
    format!(
        "{:>10} {:<14} {:<20} {:<10} {:>3}/{:<3} {}",
        t["id"],
        text(&t["queue"]),
        text(&t["name"]),
        text(&t["state"]),
        t["attempt"],
        t["max_attempts"],
        error
    )
}

pub(crate) async fn tasks(ops: &dyn Ops, cmd: TaskCommand) -> anyhow::Result<()> {
    match cmd {
        TaskCommand::List {
            queue,
            state,
            name,
            limit,
            json,
        } => {
            let states = state
                .iter()
                .map(|s| s.parse::<TaskState>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(anyhow::Error::msg)?;
            let filter = TaskFilter {
                queue,
                states,
                name,
                limit: Some(limit),
            };
            let tasks = ops.tasks(filter).await?;
            if json {
                for t in &tasks {
                    out!("{t}");
                }
                return Ok(());
            }
            out!(
                "{:>10} {:<14} {:<20} {:<10} {:>7} last error",
                "id",
                "queue",
                "name",
                "state",
                "attempt"
            );
            for t in &tasks {
                out!("{}", line(t));
            }
        }
        TaskCommand::Show { id, json } => show(&ops.task(id).await?, json)?,
        TaskCommand::Enqueue {
            name,
            input,
            queue,
            priority,
            delay_ms,
            max_attempts,
            unique_key,
            metadata,
            count,
            allow_unknown,
        } => {
            let input = crate::input::json(&input, "--input")?;
            let mut options = TaskOptions::default()
                .queue(queue)
                .priority(priority)
                .delay(Duration::from_millis(delay_ms));
            if let Some(n) = max_attempts {
                options = options.max_attempts(n);
            }
            if let Some(metadata) = metadata {
                options = options.metadata(crate::input::json(&metadata, "--metadata")?);
            }
            let request = |i: u32| -> ratchet::Result<TaskRequest> {
                let mut options = options.clone();
                options.unique_key = match (&unique_key, count) {
                    (Some(key), 1) => Some(key.clone()),
                    (Some(key), _) => Some(format!("{key}-{i}")),
                    (None, _) => None,
                };
                Ok(TaskRequest::new(&name, &input)?.options(options))
            };
            if count == 1 {
                let outcomes = ops.enqueue(vec![request(0)?], allow_unknown).await?;
                match outcomes.first() {
                    Some((id, false)) => out!("{id}"),
                    Some((id, true)) => out!("duplicate: task {id} holds the unique key"),
                    None => bail!("the store returned no outcome"),
                }
                return Ok(());
            }
            // In bounded calls: a million tasks never sit in memory at once. Each call is
            // all or nothing; a failure leaves the earlier calls' tasks enqueued, and says so.
            let progress = indicatif::ProgressBar::new(u64::from(count));
            let (mut enqueued, mut duplicates) = (0_u64, 0_u64);
            let mut next = 0;
            while next < count {
                let end = count.min(next + ENQUEUE_BATCH);
                let requests = (next..end)
                    .map(request)
                    .collect::<ratchet::Result<Vec<_>>>()?;
                let outcomes = ops.enqueue(requests, allow_unknown).await.with_context(|| {
                    format!("enqueueing tasks {next}..{end} of {count} ({enqueued} were enqueued before)")
                })?;
                for (_, duplicate) in &outcomes {
                    if *duplicate {
                        duplicates += 1;
                    } else {
                        enqueued += 1;
                    }
                }
                progress.inc(u64::from(end - next));
                next = end;
            }
            progress.finish_and_clear();
            out!("enqueued {enqueued}, {duplicates} duplicate(s)");
        }
        TaskCommand::Wait { id, timeout_secs } => {
            let t = ops.task_wait(id, Duration::from_secs(timeout_secs)).await?;
            show(&t, false)?;
            if t["state"] != "Completed" {
                bail!("task {id} ended {}", text(&t["state"]));
            }
        }
        TaskCommand::Retry { ids } => {
            for id in ids {
                ops.task_act(id, Act::Retry).await?;
                out!("{id}: queued again");
            }
        }
        TaskCommand::Discard { ids } => {
            for id in ids {
                ops.task_act(id, Act::Discard).await?;
                out!("{id}: discarded");
            }
        }
        TaskCommand::Cancel { ids } => {
            for id in ids {
                let requested = ops.task_act(id, Act::Cancel).await?;
                out!(
                    "{id}: {}",
                    if requested {
                        "cancellation requested; it stops at its worker's next heartbeat"
                    } else {
                        "cancelled"
                    }
                );
            }
        }
    }
    Ok(())
}

fn show(t: &Value, one_line: bool) -> anyhow::Result<()> {
    if one_line {
        out!("{t}");
    } else {
        out!("{}", serde_json::to_string_pretty(t)?);
    }
    Ok(())
}

pub(crate) async fn queues(ops: &dyn Ops, cmd: QueueCommand) -> anyhow::Result<()> {
    match cmd {
        QueueCommand::List { json } => {
            let queues = ops.queues().await?;
            if json {
                for q in &queues {
                    out!("{q}");
                }
                return Ok(());
            }
            out!(
                "{:<16} {:<7} {:>9} {:>9} {:>8} {:>9} {:>9} {:>6} {:>9}  limits",
                "queue",
                "paused",
                "scheduled",
                "available",
                "running",
                "retrying",
                "completed",
                "dead",
                "cancelled"
            );
            for q in &queues {
                let limits = [
                    q["rate_per_second"].as_f64().map(|r| format!("{r}/s")),
                    q["burst"].as_u64().map(|b| format!("burst {b}")),
                    q["concurrency"].as_u64().map(|c| format!("{c} at once")),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", ");
                let n = |s: TaskState| q["tasks"][s.to_string()].as_u64().unwrap_or(0);
                out!(
                    "{:<16} {:<7} {:>9} {:>9} {:>8} {:>9} {:>9} {:>6} {:>9}  {limits}",
                    text(&q["queue"]),
                    if q["paused"] == true { "yes" } else { "no" },
                    n(TaskState::Scheduled),
                    n(TaskState::Available),
                    n(TaskState::Running),
                    n(TaskState::Retrying),
                    n(TaskState::Completed),
                    n(TaskState::Dead),
                    n(TaskState::Cancelled)
                );
            }
        }
        QueueCommand::Pause { queue } => {
            ops.queue_pause(&queue, true).await?;
            out!("{queue}: paused everywhere");
        }
        QueueCommand::Resume { queue } => {
            ops.queue_pause(&queue, false).await?;
            out!("{queue}: resumed");
        }
        QueueCommand::Limit {
            queue,
            rate,
            burst,
            concurrency,
        } => {
            let limits = QueueLimits {
                rate_per_second: rate,
                burst,
                concurrency,
            };
            ops.queue_limit(&queue, limits).await?;
            out!("{queue}: limits set");
        }
    }
    Ok(())
}
