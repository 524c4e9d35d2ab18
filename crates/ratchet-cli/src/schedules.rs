//! `ratchet schedules`: cron expressions and intervals that start a workflow or enqueue a task,
//! fired exactly once per tick by whichever workers run.

use clap::{Args, Subcommand};
use ratchet::{CatchUp, Overlap, Timestamp};
use ratchet_api::{
    Api, BackfillInput, DescribeQuery, DescriptionView, OptionsInput, PauseInput, ScheduleInput,
};
use serde_json::Value;

use crate::input::{parse_rfc3339, rfc3339};

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
        #[arg(long, value_parser = parse_rfc3339)]
        from: Timestamp,
        /// The last time of the range (RFC 3339).
        #[arg(long, value_parser = parse_rfc3339)]
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
        upcoming: u32,
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
    #[arg(long, value_parser = parse_rfc3339)]
    start_at: Option<Timestamp>,
    /// No tick after this (RFC 3339).
    #[arg(long, value_parser = parse_rfc3339)]
    end_at: Option<Timestamp>,
    /// Start at most this many runs.
    #[arg(long)]
    remaining: Option<u64>,
}

fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    ratchet_schedule::parse_duration(text)
        .ok_or_else(|| format!("{text:?} is not a duration (30s, 5m, 1h30m)"))
}

impl Define {
    /// The schedule as the API takes it.
    fn input(&self) -> anyhow::Result<ScheduleInput> {
        if self.workflow.is_none() && self.task.is_none() {
            anyhow::bail!("give --workflow or --task");
        }
        Ok(ScheduleInput {
            name: Some(self.name.clone()),
            spec: self.spec.clone(),
            time_zone: Some(self.zone.clone()),
            workflow: self.workflow.clone(),
            task: self.task.clone(),
            input: crate::input::json(&self.input, "--input")?,
            options: self.task.as_ref().map(|_| OptionsInput {
                queue: self.queue.clone(),
                ..OptionsInput::default()
            }),
            overlap: Some(self.overlap.as_str().to_string()),
            catch_up: Some(self.catch_up.to_string()),
            jitter_ms: self
                .jitter
                .map(|j| u64::try_from(j.as_millis()).unwrap_or(u64::MAX)),
            paused: Some(self.paused.is_some()),
            note: self.paused.clone(),
            start_at: self.start_at.map(rfc3339),
            end_at: self.end_at.map(rfc3339),
            remaining_actions: self.remaining,
        })
    }
}

fn line(v: &impl serde::Serialize) -> anyhow::Result<String> {
    Ok(serde_json::to_string(v)?)
}

pub(crate) async fn run(api: &dyn Api, cmd: ScheduleCommand) -> anyhow::Result<()> {
    match cmd {
        ScheduleCommand::Create(define) => {
            println!("{}", line(&api.schedules_create(&define.input()?).await?)?);
        }
        ScheduleCommand::Update(define) => {
            println!(
                "{}",
                line(&api.schedules_update(&define.name, &define.input()?).await?)?
            );
        }
        ScheduleCommand::Pause { name, note } => {
            let pause = PauseInput { note };
            println!("{}", line(&api.schedules_pause(&name, &pause).await?)?);
        }
        ScheduleCommand::Resume { name } => {
            println!("{}", line(&api.schedules_resume(&name).await?)?);
        }
        ScheduleCommand::Trigger { name } => {
            println!("{}", line(&api.schedules_trigger(&name).await?)?);
        }
        ScheduleCommand::Backfill { name, from, to } => {
            let range = BackfillInput {
                from: rfc3339(from),
                to: rfc3339(to),
            };
            let fires = api.schedules_backfill(&name, &range).await?;
            for f in &fires {
                println!("{}", line(f)?);
            }
            eprintln!("{} tick(s) fired", fires.len());
        }
        ScheduleCommand::Delete { name } => {
            api.schedules_delete(&name).await?;
            println!("deleted schedule {name}");
        }
        ScheduleCommand::List { json } => {
            let all = api.schedules_list().await?;
            if json {
                for s in &all {
                    println!("{}", line(s)?);
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
                    let next = s.next_fire_at.as_deref().unwrap_or("-");
                    println!(
                        "{:<24} {:<20} {:<8} {:<25} {}",
                        s.name,
                        s.spec,
                        state,
                        next,
                        action_text(&s.action)
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
            let query = DescribeQuery {
                upcoming: Some(upcoming),
                recent: Some(recent),
            };
            let d = api.schedules_describe(&name, query).await?;
            if json {
                println!("{}", line(&d)?);
            } else {
                print_description(&d);
            }
        }
    }
    Ok(())
}

/// What each tick does, in words: `start fanout`, `enqueue work on reports`.
fn action_text(action: &Value) -> String {
    if let Some(start) = action.get("start") {
        return format!("start {}", start["workflow"].as_str().unwrap_or("?"));
    }
    if let Some(enqueue) = action.get("enqueue") {
        let queue = enqueue["options"]["queue"].as_str().unwrap_or("default");
        return format!(
            "enqueue {} on {queue}",
            enqueue["task"].as_str().unwrap_or("?")
        );
    }
    action.to_string()
}

fn print_description(d: &DescriptionView) {
    let s = &d.schedule;
    println!("schedule {} ({} in {})", s.name, s.spec, s.time_zone);
    let input = s
        .action
        .get("start")
        .or_else(|| s.action.get("enqueue"))
        .map_or(Value::Null, |a| a["input"].clone());
    println!("  each tick: {} with {input}", action_text(&s.action));
    println!(
        "  overlap {}, catch-up {}, jitter {} ms",
        s.overlap, s.catch_up, s.jitter_ms
    );
    if s.paused {
        println!("  paused: {}", s.note.as_deref().unwrap_or(""));
    }
    if let Some(n) = s.remaining_actions {
        println!("  {n} action(s) remaining");
    }
    println!("  missed ticks (not caught up): {}", s.missed);
    println!("  next ticks:");
    for t in &d.upcoming {
        println!("    {t}");
    }
    println!("  latest fires:");
    for r in &d.recent {
        let what = match (&r.run, &r.skipped) {
            (Some(run), _) => format!("{run} {}", r.status.as_deref().unwrap_or("gone")),
            (None, Some(why)) => format!("skipped: {why}"),
            (None, None) => "nothing".into(),
        };
        println!("    {} {:<9} +{} ms  {what}", r.tick, r.kind, r.late_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations_parse_or_say_why() {
        assert_eq!(
            parse_rfc3339("2026-11-24T02:30:00Z").unwrap(),
            Timestamp(1_795_487_400_000)
        );
        assert!(parse_rfc3339("tomorrow").unwrap_err().contains("RFC 3339"));
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
        let input = define.input().unwrap();
        assert_eq!(input.jitter_ms, Some(5_000));
        assert_eq!(input.remaining_actions, Some(3));
        assert_eq!(input.overlap.as_deref(), Some("allow_all"));
        assert_eq!(input.catch_up.as_deref(), Some("within 600s"));
        // The API reads it back as the same schedule.
        let o = input.into_options().unwrap();
        match o.action {
            ratchet::ScheduleAction::Enqueue { options, input, .. } => {
                assert_eq!(options.queue, "reports");
                assert_eq!(input["a"], 1);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(o.time_zone, "Europe/Paris");
    }
}
