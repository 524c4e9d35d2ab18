//! Schedules and their fire records.

use ratchet_core::{ErrorInfo, HistoryEvent, Timestamp};
use ratchet_store::{
    FireKind, FireQuery, FireRecord, FireRun, NewInstance, NewTask, ScheduleAction, ScheduleFiring,
    ScheduleRecord, SchedulesDue, StopRun, StoreError, FIRES_KEPT,
};
use tokio_postgres::Row;

use crate::convert::{col, to_json, Failure, Res};
use crate::instance::CreateArgs;
use crate::param::{p, Param};
use crate::share::WorkPayload;
use crate::store::{Conn, ReadyFrom};
use crate::task::{enqueue_outcomes, EnqueueArgs};

fn u64_of(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A row of the schedule statements' columns.
fn record(r: &Row) -> Res<ScheduleRecord> {
    let ts =
        |name: &str| -> Res<Option<Timestamp>> { Ok(col::<Option<i64>>(r, name)?.map(Timestamp)) };
    Ok(ScheduleRecord {
        name: col(r, "name")?,
        spec: col(r, "spec")?,
        time_zone: col(r, "time_zone")?,
        action: ScheduleAction::from_json(&col::<String>(r, "action")?)?,
        overlap: col(r, "overlap")?,
        catch_up: col(r, "catch_up")?,
        jitter_ms: u64_of(col(r, "jitter_ms")?),
        paused: col(r, "paused")?,
        note: col(r, "note")?,
        start_at: ts("start_at")?,
        end_at: ts("end_at")?,
        remaining: col::<Option<i64>>(r, "remaining")?.map(u64_of),
        last_tick: ts("last_tick")?,
        next_fire_at: ts("next_fire_at")?,
        running: col(r, "running")?,
        buffered: ts("buffered")?,
        missed: u64_of(col(r, "missed")?),
        version: col(r, "version")?,
        created_at: Timestamp(col(r, "created_at")?),
        updated_at: Timestamp(col(r, "updated_at")?),
        settled_through: ts("settled_through")?,
    })
}

/// The parameters `schedule_insert` writes `s` with, and `schedule_update` too (then with the
/// version it expects last).
struct ScheduleArgs<'a> {
    s: &'a ScheduleRecord,
    action: String,
    jitter_ms: i64,
    start_at: Option<i64>,
    end_at: Option<i64>,
    remaining: Option<i64>,
    last_tick: Option<i64>,
    next_fire_at: Option<i64>,
    buffered: Option<i64>,
    missed: i64,
    expect: Option<i64>,
}

impl<'a> ScheduleArgs<'a> {
    fn of(s: &'a ScheduleRecord, expect: Option<i64>) -> Self {
        Self {
            s,
            action: s.action.to_json(),
            jitter_ms: i64_of(s.jitter_ms),
            start_at: s.start_at.map(|t| t.0),
            end_at: s.end_at.map(|t| t.0),
            remaining: s.remaining.map(i64_of),
            last_tick: s.last_tick.map(|t| t.0),
            next_fire_at: s.next_fire_at.map(|t| t.0),
            buffered: s.buffered.map(|t| t.0),
            missed: i64_of(s.missed),
            expect,
        }
    }

    /// An insert, or a compare-and-set on the expected version.
    fn statement(&self) -> &'static str {
        if self.expect.is_some() {
            "schedule_update"
        } else {
            "schedule_insert"
        }
    }

    fn params(&self) -> Vec<Param<'_>> {
        let s = self.s;
        let mut params = vec![
            p(&s.name),
            p(&s.spec),
            p(&s.time_zone),
            p(&self.action),
            p(&s.overlap),
            p(&s.catch_up),
            p(&self.jitter_ms),
            p(&s.paused),
            p(&s.note),
            p(&self.start_at),
            p(&self.end_at),
            p(&self.remaining),
            p(&self.last_tick),
            p(&self.next_fire_at),
            p(&s.running),
            p(&self.buffered),
            p(&self.missed),
            p(&s.created_at.0),
            p(&s.updated_at.0),
        ];
        if self.expect.is_some() {
            params.push(p(&self.expect));
        }
        params
    }
}

/// Writes `s`, and tells every process's dispatcher that schedules changed (in the same round
/// trip; a refused write wakes them for nothing, which costs them one read).
pub(crate) async fn put(c: &Conn, s: &ScheduleRecord, expect: Option<i64>) -> Res<bool> {
    let args = ScheduleArgs::of(s, expect);
    let params = args.params();
    let rows = c
        .then_notify_on("schedules_notify", &[], true, args.statement(), &params)
        .await?;
    Ok(!rows.is_empty())
}

pub(crate) async fn get(c: &Conn, name: &str) -> Res<Option<ScheduleRecord>> {
    c.query("schedule_get", &[p(&name)])
        .await?
        .first()
        .map(record)
        .transpose()
}

pub(crate) async fn list(c: &Conn) -> Res<Vec<ScheduleRecord>> {
    c.query("schedule_list", &[])
        .await?
        .iter()
        .map(record)
        .collect()
}

pub(crate) async fn delete(c: &Conn, name: &str) -> Res<bool> {
    let rows = c
        .then_notify_on(
            "schedules_notify",
            &[],
            true,
            "schedule_delete",
            &[p(&name)],
        )
        .await?;
    Ok(!rows.is_empty())
}

pub(crate) async fn due(c: &Conn, now: Timestamp, limit: u32) -> Res<SchedulesDue> {
    let limit = i64::from(limit);
    let rows = c.query("schedule_due", &[p(&now.0), p(&limit)]).await?;
    let mut out = SchedulesDue::default();
    for r in &rows {
        if col::<Option<String>>(r, "name")?.is_some() {
            out.due.push(record(r)?);
        } else {
            out.next = col::<Option<i64>>(r, "next_fire_at")?.map(Timestamp);
        }
    }
    Ok(out)
}

/// The statement that stops a run (the one `instance_cancel`, `instance_terminate` or
/// `task_act` runs alone), and its parameters' values.
enum Stop {
    Cancel {
        sql: String,
        id: String,
        event: String,
    },
    Terminate {
        sql: String,
        id: String,
        error: String,
    },
    Task {
        sql: String,
        ids: Vec<i64>,
    },
}

impl Stop {
    fn of(c: &Conn, stop: &StopRun) -> Self {
        match stop {
            StopRun::Cancel { instance, reason } => Self::Cancel {
                sql: c.sql("instance_cancel").to_string(),
                id: instance.clone(),
                event: to_json(&HistoryEvent::CancelRequested {
                    reason: reason.clone(),
                }),
            },
            StopRun::Terminate { instance, reason } => Self::Terminate {
                sql: c.sql("instance_terminate").to_string(),
                id: instance.clone(),
                error: to_json(&ErrorInfo::new("Terminated", reason)),
            },
            StopRun::CancelTask(id) => Self::Task {
                sql: c.sql("task_act").to_string(),
                ids: vec![id.0],
            },
        }
    }
}

/// A fire in one transaction: the compare-and-set first (nothing else is written, and nothing
/// stopped, when it finds another version), then the run it stops, the runs it starts, the
/// records, the pruning, the commit; a notification after, for the runs made ready.
pub(crate) async fn fire(mut c: Conn, f: &ScheduleFiring) -> Res<Option<Vec<FireRecord>>> {
    let instances: Vec<NewInstance> = f
        .fires
        .iter()
        .filter_map(|x| match &x.run {
            Some(FireRun::Instance(i)) => Some(i.clone()),
            _ => None,
        })
        .collect();
    let tasks: Vec<NewTask> = f
        .fires
        .iter()
        .filter_map(|x| match &x.run {
            Some(FireRun::Task(t)) => Some(t.clone()),
            _ => None,
        })
        .collect();
    let update = c.sql("schedule_update").to_string();
    let (create, enqueue) = (
        c.sql("instance_create").to_string(),
        c.sql("task_enqueue").to_string(),
    );
    let (insert, prune) = (
        c.sql("schedule_fire_insert").to_string(),
        c.sql("schedule_fires_prune").to_string(),
    );
    let set_running = c.sql("schedule_set_running").to_string();
    let stop = f.stop.as_ref().map(|s| Stop::of(&c, s));
    let notify = c.notify();
    let tx = c.transaction().await?;
    let args = ScheduleArgs::of(&f.schedule, Some(f.expect_version));
    let claimed = tx.query_typed(&update, &args.params()).await?;
    if claimed.is_empty() {
        return Ok(None);
    }
    let now = f.now.0;
    let no = false;
    // A run that finished meanwhile, or is gone, is left alone: its outcome is not an error.
    match &stop {
        Some(Stop::Cancel { sql, id, event }) => {
            tx.query_typed(sql, &[p(id), p(event), p(&notify)]).await?;
        }
        Some(Stop::Terminate { sql, id, error }) => {
            tx.query_typed(sql, &[p(id), p(error), p(&now), p(&notify)])
                .await?;
        }
        Some(Stop::Task { sql, ids }) => {
            let action = "Cancel";
            tx.query_typed(sql, &[p(ids), p(&action), p(&now), p(&notify)])
                .await?;
        }
        None => {}
    }
    if !instances.is_empty() {
        let args = CreateArgs::of(&instances, None);
        let rows = tx.query_typed(&create, &args.params(&now, &no)).await?;
        let row = rows.first().ok_or_else(|| {
            Failure::Store(StoreError::Corrupt(
                "instance_create returned no row".into(),
            ))
        })?;
        crate::instance::create_outcomes(row, &instances, None, &args)?;
    }
    let mut task_ids = Vec::new();
    if !tasks.is_empty() {
        let args = EnqueueArgs::of(&tasks);
        let rows = tx.query_typed(&enqueue, &args.params(&now, &no)).await?;
        let row = rows.first().ok_or_else(|| {
            Failure::Store(StoreError::Corrupt("task_enqueue returned no row".into()))
        })?;
        task_ids = enqueue_outcomes(row)?
            .into_iter()
            .map(|o| o.id().0.to_string())
            .collect();
    }
    let mut task_ids = task_ids.into_iter();
    let mut records = Vec::with_capacity(f.fires.len());
    for fire in &f.fires {
        let run = match &fire.run {
            None => None,
            Some(FireRun::Instance(i)) => Some(i.id.clone()),
            Some(FireRun::Task(_)) => task_ids.next(),
        };
        records.push(fire.record(&f.schedule.name, f.now, run));
    }
    let nominals: Vec<i64> = records.iter().map(|r| r.nominal.0).collect();
    let kinds: Vec<String> = records
        .iter()
        .map(|r| r.kind.as_str().to_string())
        .collect();
    let runs: Vec<Option<String>> = records.iter().map(|r| r.run.clone()).collect();
    let skipped: Vec<Option<String>> = records.iter().map(|r| r.skipped.clone()).collect();
    tx.query_typed(
        &insert,
        &[
            p(&f.schedule.name),
            p(&now),
            p(&nominals),
            p(&kinds),
            p(&runs),
            p(&skipped),
        ],
    )
    .await?;
    let watched = records.iter().rev().find_map(|r| r.run.clone());
    if let (true, Some(last)) = (f.watch, watched) {
        tx.query_typed(&set_running, &[p(&f.schedule.name), p(&last)])
            .await?;
    }
    let kept = i64::from(FIRES_KEPT);
    tx.query_typed(&prune, &[p(&f.schedule.name), p(&kept)])
        .await?;
    tx.commit().await?;
    if c.notify() && !(instances.is_empty() && tasks.is_empty()) {
        let payload = if tasks.is_empty() {
            ReadyFrom::NoTasks.payload()
        } else {
            WorkPayload::encode(now, None)
        };
        c.query("work_notify", &[p(&payload)]).await?;
    }
    Ok(Some(records))
}

pub(crate) async fn fires(c: &Conn, q: &FireQuery) -> Res<Vec<FireRecord>> {
    let limit = i64::from(q.limit);
    c.query(
        "schedule_fires",
        &[p(&q.schedule), p(&q.from.0), p(&q.to.0), p(&limit)],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(FireRecord {
            schedule: col(r, "schedule")?,
            nominal: Timestamp(col(r, "nominal")?),
            actual: Timestamp(col(r, "actual")?),
            kind: col::<String>(r, "kind")?
                .parse::<FireKind>()
                .map_err(StoreError::Corrupt)?,
            run: col(r, "run")?,
            skipped: col(r, "skipped")?,
        })
    })
    .collect()
}
