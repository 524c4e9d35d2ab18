//! `ratchet schedules`: cron expressions and intervals that start a workflow or enqueue a task,
//! fired exactly once per tick by whichever workers run.

use clap::{Args, Subcommand};
use ratchet::{
    CatchUp, Client, Overlap, ScheduleAction, ScheduleDescription, ScheduleOptions, ScheduleRecord,
    TaskOptions, Timestamp,
};
use ratchet_server::{DescriptionView, FireView, ScheduleView};

use crate::input::rfc3339;

#[derive(Subcommand, Debug)]
pub(crate) enum ScheduleCommand {
    /// Create a schedule; its first tick is the first after now.
    Create(Define),
    /// Replace a schedule's spec, action and policies, keeping its progress.
    Update(Define),
    /// Pause a schedule: nothing fires until it is resumed.
    Pause {
        /// The schedule.
        name: String,
        /// Why.
        #[arg(long, default_value = "")]
        note: String,
    },
    /// Resume a paused schedule from its next tick (the ticks it let pass are counted as
    /// missed; backfill them if they are wanted).
    Resume {
        /// The schedule.
        name: String,
    },
    /// Fire a schedule now, whatever its spec, pause or overlap policy say.
    Trigger {
        /// The schedule.
        name: String,
    },
    /// Fire each tick of a past range that has not started a run yet, once.
    Backfill {
        /// The schedule.
        name: String,
        /// The first time of the range (RFC 3339: 2026-11-01T00:00:00Z).
        #[arg(long, value_parser = parse_time)]
        from: Timestamp,
        /// The last time of the range (RFC 3339).
        #[arg(long, value_parser = parse_time)]
        to: Timestamp,
    },
    /// Delete a schedule and its fire records (runs it started go on).
    Delete {
        /// The schedule.
        name: String,
    },
    /// List schedules with their next fire.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Show a schedule, its next ticks and its latest fires with their runs' outcomes.
    Describe {
        /// The schedule.
        name: String,
        /// Next ticks to show.
        #[arg(long, default_value_t = 5)]
        upcoming: usize,
        /// Latest fires to show.
        #[arg(long, default_value_t = 10)]
        recent: u32,
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
}

/// A schedule's definition on the command line.
#[derive(Args, Debug)]
pub(crate) struct Define {
    /// Its unique name.
    name: String,
    /// When it ticks: a cron expression (`0 9 * * MON-FRI`; six fields for seconds) or
    /// `every <interval> [offset <duration>]` (`every 30s`, `every 1h offset 15m`).
    #[arg(long)]
    spec: String,
    /// The IANA zone the cron expression is read in.
    #[arg(long, default_value = "UTC")]
    zone: String,
    /// Each tick starts this orchestration (or declarative workflow, `namespace/name`).
    #[arg(long, required_unless_present = "task", conflicts_with = "task")]
    workflow: Option<String>,
    /// Each tick enqueues this task.
    #[arg(long)]
    task: Option<String>,
    /// The input, JSON (`@file`, or `-` for standard input).
    #[arg(long, default_value = "null")]
    input: String,
    /// The task's queue.
    #[arg(long, requires = "task")]
    queue: Option<String>,
    /// While the previous run still runs: skip, buffer_one, allow_all, cancel_previous,
    /// terminate_previous.
    #[arg(long, default_value = "skip")]
    overlap: Overlap,
    /// Ticks missed while no worker ran: skip, `last <n>`, `within <duration>`.
    #[arg(long, default_value = "last 1")]
    catch_up: CatchUp,
    /// Fire each tick up to this long late (`30s`), to spread load.
    #[arg(long, value_parser = parse_duration)]
    jitter: Option<std::time::Duration>,
    /// Create it paused, with this note.
    #[arg(long)]
    paused: Option<String>,
    /// No tick before this (RFC 3339).
    #[arg(long, value_parser = parse_time)]
    start_at: Option<Timestamp>,
    /// No tick after this (RFC 3339).
    #[arg(long, value_parser = parse_time)]
    end_at: Option<Timestamp>,
    /// Start at most this many runs.
    #[arg(long)]
    remaining: Option<u64>,
}

fn parse_time(text: &str) -> Result<Timestamp, String> {
    humantime::parse_rfc3339_weak(text)
        .map(Timestamp::from)
        .map_err(|e| format!("{text:?} is not an RFC 3339 time (2026-11-24T02:30:00Z): {e}"))
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    ratchet_schedule::parse_duration(text)
        .ok_or_else(|| format!("{text:?} is not a duration (30s, 5m, 1h30m)"))
}

impl Define {
    fn options(&self) -> anyhow::Result<ScheduleOptions> {
        let input = crate::input::json(&self.input, "--input")?;
        let mut options = match (&self.workflow, &self.task) {
            (Some(workflow), _) => ScheduleOptions::start(&self.spec, workflow, input)?,
            (None, Some(task)) => {
                let mut task_options = TaskOptions::default();
                if let Some(q) = &self.queue {
                    task_options = task_options.queue(q.clone());
                }
                ScheduleOptions::enqueue(&self.spec, task, input, task_options)?
            }
            (None, None) => anyhow::bail!("give --workflow or --task"),
        };
        options = options
            .time_zone(&self.zone)
            .overlap(self.overlap)
            .catch_up(self.catch_up);
        if let Some(j) = self.jitter {
            options = options.jitter(j);
        }
        if let Some(note) = &self.paused {
            options = options.paused(note);
        }
        options.start_at = self.start_at;
        options.end_at = self.end_at;
        options.remaining_actions = self.remaining;
        Ok(options)
    }
}

/// A schedule as the server's API shows it.
fn schedule_json(s: &ScheduleRecord) -> anyhow::Result<String> {
    Ok(serde_json::to_string(&ScheduleView::of(s))?)
}

fn fire_json(f: &ratchet::FireRecord) -> anyhow::Result<String> {
    Ok(serde_json::to_string(&FireView::of(f, None))?)
}

pub(crate) async fn run(client: Client, cmd: ScheduleCommand) -> anyhow::Result<()> {
    match cmd {
        ScheduleCommand::Create(define) => {
            let s = client
                .schedule_create(&define.name, define.options()?)
                .await?;
            println!("{}", schedule_json(&s)?);
        }
        ScheduleCommand::Update(define) => {
            let s = client
                .schedule_update(&define.name, define.options()?)
                .await?;
            println!("{}", schedule_json(&s)?);
        }
        ScheduleCommand::Pause { name, note } => {
            let s = client.schedule_pause(&name, &note).await?;
            println!("{}", schedule_json(&s)?);
        }
        ScheduleCommand::Resume { name } => {
            let s = client.schedule_resume(&name).await?;
            println!("{}", schedule_json(&s)?);
        }
        ScheduleCommand::Trigger { name } => {
            let f = client.schedule_trigger_now(&name).await?;
            println!("{}", fire_json(&f)?);
        }
        ScheduleCommand::Backfill { name, from, to } => {
            let fires = client.schedule_backfill(&name, from, to).await?;
            for f in &fires {
                println!("{}", fire_json(f)?);
            }
            eprintln!("{} tick(s) fired", fires.len());
        }
        ScheduleCommand::Delete { name } => {
            client.schedule_delete(&name).await?;
            println!("deleted schedule {name}");
        }
        ScheduleCommand::List { json } => {
            let all = client.schedules().await?;
            if json {
                for s in &all {
                    println!("{}", schedule_json(s)?);
                }
            } else if all.is_empty() {
                println!("no schedules: create one with `ratchet schedules create NAME --spec 'every 1h' --workflow NAME`");
            } else {
                println!(
                    "{:<24} {:<20} {:<8} {:<25} ACTION",
                    "NAME", "SPEC", "STATE", "NEXT FIRE"
                );
                for s in &all {
                    let state = if s.paused { "paused" } else { "active" };
                    let next = s.next_fire_at.map_or("-".into(), rfc3339);
                    let action = match &s.action {
                        ScheduleAction::Start { workflow, .. } => format!("start {workflow}"),
                        ScheduleAction::Enqueue { task, .. } => format!("enqueue {task}"),
                    };
                    println!(
                        "{:<24} {:<20} {:<8} {:<25} {action}",
                        s.name, s.spec, state, next
                    );
                }
            }
        }
        ScheduleCommand::Describe {
            name,
            upcoming,
            recent,
            json,
        } => {
            let d = client.schedule_describe(&name, upcoming, recent).await?;
            if json {
                println!("{}", serde_json::to_string(&DescriptionView::of(&d))?);
            } else {
                print_description(&d);
            }
        }
    }
    Ok(())
}

fn print_description(d: &ScheduleDescription) {
    let s = &d.schedule;
    println!("schedule {} ({} in {})", s.name, s.spec, s.time_zone);
    match &s.action {
        ScheduleAction::Start { workflow, input } => println!("  starts   {workflow} with {input}"),
        ScheduleAction::Enqueue {
            task,
            input,
            options,
        } => {
            println!("  enqueues {task} with {input} on queue {}", options.queue)
        }
    }
    println!(
        "  overlap {}, catch-up {}, jitter {} ms",
        s.overlap, s.catch_up, s.jitter_ms
    );
    if s.paused {
        println!("  paused: {}", s.note.as_deref().unwrap_or(""));
    }
    if let Some(n) = s.remaining {
        println!("  {n} action(s) remaining");
    }
    println!("  missed ticks (not caught up): {}", s.missed);
    println!("  next ticks:");
    for t in &d.upcoming {
        println!("    {}", rfc3339(*t));
    }
    println!("  latest fires:");
    for r in &d.recent {
        let what = match (&r.fire.run, &r.fire.skipped) {
            (Some(run), _) => format!("{run} {}", r.status.as_deref().unwrap_or("gone")),
            (None, Some(why)) => format!("skipped: {why}"),
            (None, None) => "nothing".into(),
        };
        println!(
            "    {} {:<9} +{} ms  {what}",
            rfc3339(r.fire.nominal),
            r.fire.kind.as_str(),
            r.fire.actual.as_millis() - r.fire.nominal.as_millis()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations_parse_or_say_why() {
        assert_eq!(
            parse_time("2026-11-24T02:30:00Z").unwrap(),
            Timestamp(1_795_487_400_000)
        );
        assert!(parse_time("tomorrow").unwrap_err().contains("RFC 3339"));
        assert_eq!(parse_duration("1m30s").unwrap().as_secs(), 90);
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn a_task_schedule_reads_its_queue_and_policies() {
        let define = Define {
            name: "n".into(),
            spec: "every 1m".into(),
            zone: "Europe/Paris".into(),
            workflow: None,
            task: Some("export".into()),
            input: "{\"a\":1}".into(),
            queue: Some("reports".into()),
            overlap: Overlap::AllowAll,
            catch_up: "within 10m".parse().unwrap(),
            jitter: Some(std::time::Duration::from_secs(5)),
            paused: None,
            start_at: None,
            end_at: None,
            remaining: Some(3),
        };
        let o = define.options().unwrap();
        assert_eq!(o.jitter_ms, 5_000);
        assert_eq!(o.remaining_actions, Some(3));
        match o.action {
            ScheduleAction::Enqueue { options, input, .. } => {
                assert_eq!(options.queue, "reports");
                assert_eq!(input["a"], 1);
            }
            other => panic!("{other:?}"),
        }
    }
}
