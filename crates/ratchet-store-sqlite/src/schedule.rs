//! Schedules and their fire records.

use ratchet_core::Timestamp;
use ratchet_store::{
    CreateOutcome, FireKind, FireQuery, FireRecord, FireRun, Result, ScheduleAction,
    ScheduleFiring, ScheduleRecord, SchedulesDue, StopOutcome, StopRun, StoreError, TaskAction,
    FIRES_KEPT,
};
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::convert::db_err;
use crate::store::sql;
use crate::{instance, task};

/// The columns every schedule statement reads, in `schedule_get`'s order.
fn record(r: &rusqlite::Row<'_>) -> rusqlite::Result<(ScheduleRecord, String)> {
    let ts = |i: usize| -> rusqlite::Result<Option<Timestamp>> {
        Ok(r.get::<_, Option<i64>>(i)?.map(Timestamp))
    };
    let action: String = r.get(3)?;
    Ok((
        ScheduleRecord {
            name: r.get(0)?,
            spec: r.get(1)?,
            time_zone: r.get(2)?,
            // Decoded after the row is read (a bad one is corruption, not a driver error).
            action: ScheduleAction::Start {
                workflow: String::new(),
                input: serde_json::Value::Null,
            },
            overlap: r.get(4)?,
            catch_up: r.get(5)?,
            jitter_ms: u64::try_from(r.get::<_, i64>(6)?).unwrap_or(0),
            paused: r.get(7)?,
            note: r.get(8)?,
            start_at: ts(9)?,
            end_at: ts(10)?,
            remaining: r
                .get::<_, Option<i64>>(11)?
                .map(|n| u64::try_from(n).unwrap_or(0)),
            last_tick: ts(12)?,
            next_fire_at: ts(13)?,
            running: r.get(14)?,
            buffered: ts(15)?,
            missed: u64::try_from(r.get::<_, i64>(16)?).unwrap_or(0),
            version: r.get(17)?,
            created_at: Timestamp(r.get(18)?),
            updated_at: Timestamp(r.get(19)?),
            settled_through: ts(20)?,
        },
        action,
    ))
}

fn decoded((mut record, action): (ScheduleRecord, String)) -> Result<ScheduleRecord> {
    record.action = ScheduleAction::from_json(&action)?;
    Ok(record)
}

fn many(
    conn: &Connection,
    name: &str,
    params: impl rusqlite::Params,
) -> Result<Vec<ScheduleRecord>> {
    let mut stmt = conn.prepare_cached(sql(name)).map_err(db_err)?;
    let rows = stmt
        .query_map(params, record)
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    rows.into_iter().map(decoded).collect()
}

fn i64_of(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(crate) fn put(
    tx: &Transaction<'_>,
    s: &ScheduleRecord,
    expect_version: Option<i64>,
) -> Result<bool> {
    let statement = if expect_version.is_some() {
        "schedule_update"
    } else {
        "schedule_insert"
    };
    let written = tx
        .prepare_cached(sql(statement))
        .map_err(db_err)?
        .execute(params![
            s.name,
            s.spec,
            s.time_zone,
            s.action.to_json(),
            s.overlap,
            s.catch_up,
            i64_of(s.jitter_ms),
            s.paused,
            s.note,
            s.start_at.map(|t| t.0),
            s.end_at.map(|t| t.0),
            s.remaining.map(i64_of),
            s.last_tick.map(|t| t.0),
            s.next_fire_at.map(|t| t.0),
            s.running,
            s.buffered.map(|t| t.0),
            i64_of(s.missed),
            s.created_at.0,
            s.updated_at.0,
            expect_version,
        ])
        .map_err(db_err)?;
    Ok(written == 1)
}

pub(crate) fn get(conn: &Connection, name: &str) -> Result<Option<ScheduleRecord>> {
    conn.prepare_cached(sql("schedule_get"))
        .map_err(db_err)?
        .query_row(params![name], record)
        .optional()
        .map_err(db_err)?
        .map(decoded)
        .transpose()
}

pub(crate) fn list(conn: &Connection) -> Result<Vec<ScheduleRecord>> {
    many(conn, "schedule_list", [])
}

pub(crate) fn delete(tx: &Transaction<'_>, name: &str) -> Result<bool> {
    tx.prepare_cached(sql("schedule_fires_delete"))
        .map_err(db_err)?
        .execute(params![name])
        .map_err(db_err)?;
    let deleted = tx
        .prepare_cached(sql("schedule_delete"))
        .map_err(db_err)?
        .execute(params![name])
        .map_err(db_err)?;
    Ok(deleted == 1)
}

pub(crate) fn due(conn: &Connection, now: Timestamp, limit: u32) -> Result<SchedulesDue> {
    let due = many(conn, "schedule_due", params![now.0, limit])?;
    let next: Option<i64> = conn
        .prepare_cached(sql("schedule_next"))
        .map_err(db_err)?
        .query_row(params![now.0], |r| r.get(0))
        .map_err(db_err)?;
    Ok(SchedulesDue {
        due,
        next: next.map(Timestamp),
    })
}

/// What a fire wrote, whether it made work ready for this process's workers to hear of, and
/// the instance it terminated (for those waiting on it).
pub(crate) struct Fired {
    pub(crate) records: Option<Vec<FireRecord>>,
    pub(crate) work: bool,
    pub(crate) finished: Option<String>,
}

/// Stops the run `stop` names; one that finished meanwhile (or is gone) is left alone.
/// Whether it made work ready, and the instance it terminated.
fn stop(tx: &Transaction<'_>, stop: &StopRun, now: Timestamp) -> Result<(bool, Option<String>)> {
    Ok(match stop {
        StopRun::Cancel { instance, reason } => (
            instance::cancel(tx, instance, reason)? == StopOutcome::Done,
            None,
        ),
        StopRun::Terminate { instance, reason } => {
            let done = instance::terminate(tx, instance, reason, now)? == StopOutcome::Done;
            (done, done.then(|| instance.clone()))
        }
        StopRun::CancelTask(id) => {
            task::act(tx, &[*id], TaskAction::Cancel, now)?;
            (false, None)
        }
    })
}

pub(crate) fn fire(tx: &Transaction<'_>, f: &ScheduleFiring) -> Result<Fired> {
    if !put(tx, &f.schedule, Some(f.expect_version))? {
        return Ok(Fired {
            records: None,
            work: false,
            finished: None,
        });
    }
    let (mut work, finished) = match &f.stop {
        Some(s) => stop(tx, s, f.now)?,
        None => (false, None),
    };
    let mut records = Vec::with_capacity(f.fires.len());
    for fire in &f.fires {
        let run = match &fire.run {
            None => None,
            Some(FireRun::Instance(new)) => {
                if let CreateOutcome::Created(_) = instance::create(tx, new, None, f.now)? {
                    work = true;
                }
                Some(new.id.clone())
            }
            Some(FireRun::Task(new)) => {
                work = true;
                task::enqueue(tx, new, f.now)?.id().0.to_string().into()
            }
        };
        tx.prepare_cached(sql("schedule_fire_insert"))
            .map_err(db_err)?
            .execute(params![
                f.schedule.name,
                fire.nominal.0,
                fire.kind.as_str(),
                f.now.0,
                run,
                fire.skipped,
            ])
            .map_err(db_err)?;
        records.push(fire.record(&f.schedule.name, f.now, run));
    }
    let watched = records.iter().rev().find_map(|r| r.run.clone());
    if let (true, Some(last)) = (f.watch, watched) {
        tx.prepare_cached(sql("schedule_set_running"))
            .map_err(db_err)?
            .execute(params![f.schedule.name, last])
            .map_err(db_err)?;
    }
    for statement in ["schedule_fires_settle", "schedule_fires_prune"] {
        tx.prepare_cached(sql(statement))
            .map_err(db_err)?
            .execute(params![f.schedule.name, FIRES_KEPT])
            .map_err(db_err)?;
    }
    Ok(Fired {
        records: Some(records),
        work,
        finished,
    })
}

pub(crate) fn fires(conn: &Connection, q: &FireQuery) -> Result<Vec<FireRecord>> {
    let mut stmt = conn.prepare_cached(sql("schedule_fires")).map_err(db_err)?;
    let rows = stmt
        .query_map(params![q.schedule, q.from.0, q.to.0, q.limit], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    rows.into_iter()
        .map(|(schedule, nominal, actual, kind, run, skipped)| {
            Ok(FireRecord {
                schedule,
                nominal: Timestamp(nominal),
                actual: Timestamp(actual),
                kind: kind.parse::<FireKind>().map_err(StoreError::Corrupt)?,
                run,
                skipped,
            })
        })
        .collect()
}
