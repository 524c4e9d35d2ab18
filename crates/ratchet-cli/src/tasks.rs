//! `ratchet tasks ...` and `ratchet queues ...`: standalone tasks and their queues.

use std::time::Duration;

use anyhow::{bail, Context};
use clap::Subcommand;
use ratchet::TaskState;
use ratchet_api::{
    ActOutcome, Api, EnqueueBatch, EnqueueRequest, Limits, ManyIds, OptionsInput, RetryInput,
    TaskAct, TaskQuery, TaskView, WriteParams,
};

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

fn line(t: &TaskView) -> String {
    let error = t
        .error
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    format!(
        "{:>10} {:<14} {:<20} {:<10} {:>3}/{:<3} {}",
        t.id,
        t.queue,
        t.name,
        t.state.to_string(),
        t.attempt,
        t.max_attempts,
        error
    )
}

pub(crate) async fn tasks(api: &dyn Api, cmd: TaskCommand) -> anyhow::Result<()> {
    match cmd {
        TaskCommand::List {
            queue,
            state,
            name,
            limit,
            json,
        } => {
            // Checked here, so a typo is refused before anything is asked.
            for s in &state {
                s.parse::<TaskState>().map_err(anyhow::Error::msg)?;
            }
            let query = TaskQuery {
                queue,
                state: (!state.is_empty()).then(|| state.join(",")),
                name,
                limit: Some(limit),
                before: None,
            };
            let tasks = api.tasks_list(&query).await?;
            if json {
                for t in &tasks {
                    out!("{}", serde_json::to_string(t)?);
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
        TaskCommand::Show { id, json } => show(&api.tasks_show(id).await?, json)?,
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
            let options = OptionsInput {
                queue: Some(queue),
                priority: Some(priority),
                delay_ms: Some(delay_ms),
                retry: max_attempts.map(|n| RetryInput {
                    max_attempts: Some(n),
                    ..RetryInput::default()
                }),
                metadata: metadata
                    .map(|m| crate::input::json(&m, "--metadata"))
                    .transpose()?,
                ..OptionsInput::default()
            };
            let request = |i: u32| EnqueueRequest {
                name: name.clone(),
                input: input.clone(),
                options: OptionsInput {
                    unique_key: match (&unique_key, count) {
                        (Some(key), 1) => Some(key.clone()),
                        (Some(key), _) => Some(format!("{key}-{i}")),
                        (None, _) => None,
                    },
                    ..options.clone()
                },
            };
            let params = WriteParams { allow_unknown };
            if count == 1 {
                let enqueued = api.tasks_enqueue(&request(0), params).await?;
                if enqueued.duplicate {
                    out!("duplicate: task {} holds the unique key", enqueued.id);
                } else {
                    out!("{}", enqueued.id);
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
                let batch = EnqueueBatch {
                    tasks: (next..end).map(request).collect(),
                };
                let outcomes = api.tasks_enqueue_batch(&batch, params).await.with_context(|| {
                    format!("enqueueing tasks {next}..{end} of {count} ({enqueued} were enqueued before)")
                })?;
                for outcome in &outcomes {
                    if outcome.duplicate {
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
            let t = api
                .tasks_wait_until(id, Duration::from_secs(timeout_secs))
                .await?;
            show(&t, false)?;
            if t.state != TaskState::Completed {
                bail!("task {id} ended {}", t.state);
            }
        }
        TaskCommand::Retry { ids } => act(api, ids, TaskAct::Retry, |_| "queued again").await?,
        TaskCommand::Discard { ids } => act(api, ids, TaskAct::Discard, |_| "discarded").await?,
        TaskCommand::Cancel { ids } => {
            act(api, ids, TaskAct::Cancel, |outcome| {
                if outcome == Some(ActOutcome::Requested) {
                    "cancellation requested; it stops at its worker's next heartbeat"
                } else {
                    "cancelled"
                }
            })
            .await?;
        }
    }
    Ok(())
}

/// An action on every task in one call, where each applies or is refused alone: prints the
/// ones it applied to, then fails naming each refused one.
async fn act(
    api: &dyn Api,
    ids: Vec<i64>,
    act: TaskAct,
    done: impl Fn(Option<ActOutcome>) -> &'static str,
) -> anyhow::Result<()> {
    let mut refused = Vec::new();
    for acted in api.tasks_act_many(&ManyIds { ids }, act).await? {
        match &acted.problem {
            None => out!("{}: {}", acted.id, done(acted.outcome)),
            Some(problem) => refused.push(format!("task {}: {problem}", acted.id)),
        }
    }
    if !refused.is_empty() {
        bail!("{}", refused.join("; "));
    }
    Ok(())
}

fn show(t: &TaskView, one_line: bool) -> anyhow::Result<()> {
    if one_line {
        out!("{}", serde_json::to_string(t)?);
    } else {
        out!("{}", serde_json::to_string_pretty(t)?);
    }
    Ok(())
}

pub(crate) async fn queues(api: &dyn Api, cmd: QueueCommand) -> anyhow::Result<()> {
    match cmd {
        QueueCommand::List { json } => {
            let queues = api.queues_list().await?;
            if json {
                for q in &queues {
                    out!("{}", serde_json::to_string(q)?);
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
                    q.limits.rate_per_second.map(|r| format!("{r}/s")),
                    q.limits.burst.map(|b| format!("burst {b}")),
                    q.limits.concurrency.map(|c| format!("{c} at once")),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(", ");
                out!(
                    "{:<16} {:<7} {:>9} {:>9} {:>8} {:>9} {:>9} {:>6} {:>9}  {limits}",
                    q.name,
                    if q.paused { "yes" } else { "no" },
                    q.count(TaskState::Scheduled),
                    q.count(TaskState::Available),
                    q.count(TaskState::Running),
                    q.count(TaskState::Retrying),
                    q.count(TaskState::Completed),
                    q.count(TaskState::Dead),
                    q.count(TaskState::Cancelled)
                );
            }
        }
        QueueCommand::Pause { queue } => {
            api.queues_pause(&queue).await?;
            out!("{queue}: paused everywhere");
        }
        QueueCommand::Resume { queue } => {
            api.queues_resume(&queue).await?;
            out!("{queue}: resumed");
        }
        QueueCommand::Limit {
            queue,
            rate,
            burst,
            concurrency,
        } => {
            let limits = Limits {
                rate_per_second: rate,
                burst,
                concurrency,
            };
            api.queues_limit(&queue, &limits).await?;
            out!("{queue}: limits set");
        }
    }
    Ok(())
}
