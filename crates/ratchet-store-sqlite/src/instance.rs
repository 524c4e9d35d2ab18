use ratchet_core::{ErrorInfo, HistoryEvent, ParentRef, Timestamp};
use ratchet_store::{
    parent_event, ClaimedInstance, CreateOutcome, HistoryRecord, IfExists, InboxEvent,
    InstanceClaim, InstanceClaimed, InstanceFollow, InstanceRecord, InstanceStatus, Lease,
    NewInboxEvent, NewInstance, NewSignal, Result, SignalOutcome, StopOutcome,
};
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::convert::{db_err, event, opt_json, status, to_json, u32_of, InstanceRow};
use crate::store::sql;

fn current_status(tx: &Connection, id: &str) -> Result<Option<InstanceStatus>> {
    Ok(status_and_fence(tx, id)?.map(|(s, _)| s))
}

fn status_and_fence(tx: &Connection, id: &str) -> Result<Option<(InstanceStatus, i64)>> {
    let row: Option<(String, i64)> = tx
        .prepare_cached(sql("instance_status"))
        .map_err(db_err)?
        .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
        .map_err(db_err)?;
    row.map(|(s, fence)| Ok((status(&s)?, fence))).transpose()
}

/// Removes every trace of an instance, so its id can start afresh.
fn erase(tx: &Transaction<'_>, id: &str) -> Result<()> {
    for name in [
        "instance_erase",
        "inbox_clear",
        "history_clear",
        "task_clear_instance",
        "signal_dedup_clear",
    ] {
        tx.prepare_cached(sql(name))
            .map_err(db_err)?
            .execute([id])
            .map_err(db_err)?;
    }
    Ok(())
}

pub(crate) fn create(
    tx: &Transaction<'_>,
    new: &NewInstance,
    lease: Option<&Lease>,
    now: Timestamp,
) -> Result<CreateOutcome> {
    Ok(create_as(tx, new, lease, now, None)?.0)
}

/// [`create`], with the incarnation the caller drew when it has one. A created instance comes
/// with its fence and the id of its opening inbox row.
pub(crate) fn create_as(
    tx: &Transaction<'_>,
    new: &NewInstance,
    lease: Option<&Lease>,
    now: Timestamp,
    incarnation: Option<ratchet_store::Incarnation>,
) -> Result<(CreateOutcome, Option<(ratchet_store::Fence, i64)>)> {
    let mut last_fence = None;
    if let Some((existing, fence)) = status_and_fence(tx, &new.id)? {
        match new.if_exists {
            IfExists::UseExisting => return Ok((CreateOutcome::Existing(existing), None)),
            IfExists::RestartIfFinished if existing.is_finished() => {
                erase(tx, &new.id)?;
                last_fence = Some(fence);
            }
            _ => return Ok((CreateOutcome::AlreadyExists(existing), None)),
        }
    }
    let parent = new.parent.as_ref().map(to_json);
    let (fence, incarnation): (i64, i64) = tx
        .prepare_cached(sql("instance_insert"))
        .map_err(db_err)?
        .query_row(
            params![
                new.id,
                new.name,
                to_json(&new.input),
                parent,
                now.0,
                lease.map(|l| l.owner.as_str()),
                lease.map(|l| l.until.0),
                last_fence,
                incarnation.map(|i| i.0),
            ],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(db_err)?;
    let started = HistoryEvent::ExecutionStarted {
        name: new.name.clone(),
        version: 0,
        input: new.input.clone(),
        parent: new.parent.clone(),
        trace: new.trace.clone(),
    };
    let inbox_id = inbox_insert(
        tx,
        &NewInboxEvent {
            instance: new.id.clone(),
            event: started.clone(),
            visible_at: now,
        },
    )?;
    let created = CreateOutcome::Created(lease.map(|_| ClaimedInstance {
        id: new.id.clone(),
        name: new.name.clone(),
        version: None,
        execution: 0,
        history_len: 0,
        fence: ratchet_store::Fence(fence),
        incarnation: ratchet_store::Incarnation(incarnation),
        events: vec![InboxEvent {
            id: inbox_id,
            event: started,
        }],
    }));
    Ok((created, Some((ratchet_store::Fence(fence), inbox_id))))
}

pub(crate) fn inbox_insert(tx: &Connection, e: &NewInboxEvent) -> Result<i64> {
    tx.prepare_cached(sql("inbox_insert"))
        .map_err(db_err)?
        .execute(params![
            e.instance,
            e.event.kind(),
            to_json(&e.event),
            e.visible_at.0
        ])
        .map_err(db_err)?;
    Ok(tx.last_insert_rowid())
}

/// Delivers a sub-orchestration's result, only if the parent still runs the execution that
/// started it (a parent that continued as new or finished no longer waits for it).
pub(crate) fn deliver_to_parent(
    tx: &Connection,
    parent: &ParentRef,
    result: Result<serde_json::Value, ErrorInfo>,
) -> Result<()> {
    let execution: Option<i64> = tx
        .prepare_cached(sql("instance_active_execution"))
        .map_err(db_err)?
        .query_row([&parent.instance], |r| r.get(0))
        .optional()
        .map_err(db_err)?;
    if execution == Some(i64::from(parent.execution)) {
        inbox_insert(tx, &parent_event(parent, result))?;
    }
    Ok(())
}

/// Leases one instance if it is active and free; returns it with its visible inbox events.
pub(crate) fn lease(
    tx: &Connection,
    id: &str,
    lease: &Lease,
    now: Timestamp,
) -> Result<Option<ClaimedInstance>> {
    let row: Option<(String, Option<i64>, i64, i64, i64, i64)> = tx
        .prepare_cached(sql("instance_lease"))
        .map_err(db_err)?
        .query_row(params![id, lease.owner, lease.until.0, now.0], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .optional()
        .map_err(db_err)?;
    let Some((name, version, execution, history_len, fence, incarnation)) = row else {
        return Ok(None);
    };
    let mut stmt = tx.prepare_cached(sql("inbox_visible")).map_err(db_err)?;
    let rows = stmt
        .query_map(params![id, now.0], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    let events = rows
        .into_iter()
        .map(|(id, text)| {
            Ok(InboxEvent {
                id,
                event: event(&text)?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Some(ClaimedInstance {
        id: id.to_string(),
        name,
        version: version.map(u32_of),
        execution: u32_of(execution),
        history_len: u32_of(history_len),
        fence: ratchet_store::Fence(fence),
        incarnation: ratchet_store::Incarnation(incarnation),
        events,
    }))
}

pub(crate) fn claim(tx: &Transaction<'_>, claim: &InstanceClaim) -> Result<InstanceClaimed> {
    let registered: Vec<serde_json::Value> = claim
        .orchestrations
        .iter()
        .map(|r| serde_json::json!({ "name": r.name, "versions": r.versions }))
        .collect();
    let ids: Vec<(String, bool)> = {
        let mut stmt = tx
            .prepare_cached(sql("instance_claimable"))
            .map_err(db_err)?;
        let rows = stmt
            .query_map(
                params![claim.now.0, to_json(&registered), claim.limit],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .map_err(db_err)?
            .collect::<rusqlite::Result<Vec<(String, bool)>>>()
            .map_err(db_err)?;
        rows
    };
    let mut instances = Vec::with_capacity(ids.len());
    let mut taken_over = 0;
    for (id, expired) in ids {
        if let Some(c) = lease(tx, &id, &claim.lease, claim.now)? {
            instances.push(c);
            taken_over += u32::from(expired);
        }
    }
    let (tasks, next_token) = match &claim.tasks {
        Some(tasks) => {
            let claimed = crate::task::claim(tx, tasks)?;
            taken_over += claimed.taken_over;
            (claimed.tasks, claimed.next_token)
        }
        None => (Vec::new(), None),
    };
    let next_due: Option<i64> = tx
        .prepare_cached(sql("inbox_next_due"))
        .map_err(db_err)?
        .query_row([claim.now.0], |r| r.get(0))
        .map_err(db_err)?;
    let next_due = match (next_due.map(Timestamp), next_token) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Ok(InstanceClaimed {
        instances,
        next_due,
        tasks,
        taken_over,
    })
}

pub(crate) fn signal(tx: &Transaction<'_>, s: &NewSignal) -> Result<SignalOutcome> {
    match current_status(tx, &s.instance)? {
        None => return Ok(SignalOutcome::NotFound),
        Some(st) if st.is_finished() => return Ok(SignalOutcome::Finished(st)),
        Some(_) => {}
    }
    if let Some(dedup) = &s.dedup_id {
        let inserted = tx
            .prepare_cached(sql("signal_dedup_insert"))
            .map_err(db_err)?
            .execute(params![s.instance, dedup])
            .map_err(db_err)?;
        if inserted == 0 {
            return Ok(SignalOutcome::Duplicate);
        }
    }
    let event = HistoryEvent::SignalReceived {
        name: s.name.clone(),
        payload: s.payload.clone(),
    };
    inbox_insert(tx, &NewInboxEvent::immediate(s.instance.clone(), event))?;
    Ok(SignalOutcome::Raised)
}

pub(crate) fn cancel(tx: &Transaction<'_>, id: &str, reason: &str) -> Result<StopOutcome> {
    match current_status(tx, id)? {
        None => Ok(StopOutcome::NotFound),
        Some(st) if st.is_finished() => Ok(StopOutcome::Finished(st)),
        Some(_) => {
            let event = HistoryEvent::CancelRequested {
                reason: reason.to_string(),
            };
            inbox_insert(tx, &NewInboxEvent::immediate(id, event))?;
            Ok(StopOutcome::Done)
        }
    }
}

pub(crate) fn terminate(
    tx: &Transaction<'_>,
    id: &str,
    reason: &str,
    now: Timestamp,
) -> Result<StopOutcome> {
    match current_status(tx, id)? {
        None => return Ok(StopOutcome::NotFound),
        Some(st) if st.is_finished() => return Ok(StopOutcome::Finished(st)),
        Some(_) => {}
    }
    let error = ErrorInfo::new("Terminated", reason);
    let parent: Option<String> = tx
        .prepare_cached(sql("instance_terminate"))
        .map_err(db_err)?
        .query_row(params![id, to_json(&error), now.0], |r| r.get(0))
        .map_err(db_err)?;
    for name in ["inbox_clear", "task_clear_instance"] {
        tx.prepare_cached(sql(name))
            .map_err(db_err)?
            .execute([id])
            .map_err(db_err)?;
    }
    if let Some(parent) = opt_json::<ParentRef>(parent, "parent")? {
        deliver_to_parent(tx, &parent, Err(error))?;
    }
    Ok(StopOutcome::Done)
}

pub(crate) fn get(conn: &Connection, id: &str) -> Result<Option<InstanceRecord>> {
    let row = conn
        .prepare_cached(sql("instance_get"))
        .map_err(db_err)?
        .query_row([id], InstanceRow::read)
        .optional()
        .map_err(db_err)?;
    row.map(InstanceRow::into_record).transpose()
}

pub(crate) fn history(
    conn: &Connection,
    id: &str,
    execution: Option<u32>,
) -> Result<Vec<HistoryRecord>> {
    let mut stmt = conn.prepare_cached(sql("history_read")).map_err(db_err)?;
    let records = records_of(stmt.query(params![id, execution]).map_err(db_err)?);
    records
}

pub(crate) fn history_page(
    conn: &Connection,
    id: &str,
    after: Option<(u32, u32)>,
    limit: u32,
) -> Result<Vec<HistoryRecord>> {
    let mut stmt = conn.prepare_cached(sql("history_page")).map_err(db_err)?;
    let (execution, seq) = (after.map(|a| a.0), after.map(|a| a.1));
    let records = records_of(
        stmt.query(params![id, execution, seq, limit])
            .map_err(db_err)?,
    );
    records
}

/// An instance with up to `limit` history events after `after`, read in one snapshot (a
/// read transaction: another process may write between the two statements otherwise).
pub(crate) fn follow(
    conn: &Connection,
    id: &str,
    after: Option<(u32, u32)>,
    limit: u32,
) -> Result<Option<InstanceFollow>> {
    let tx = conn.unchecked_transaction().map_err(db_err)?;
    let history = history_page(&tx, id, after, limit)?;
    let Some(instance) = get(&tx, id)? else {
        return Ok(None);
    };
    tx.finish().map_err(db_err)?;
    Ok(Some(InstanceFollow { instance, history }))
}

/// History rows, one per event.
fn records_of(rows: rusqlite::Rows<'_>) -> Result<Vec<HistoryRecord>> {
    let rows = rows
        .mapped(|r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(db_err)?;
    rows.into_iter()
        .map(|(execution, seq, text)| {
            Ok(HistoryRecord {
                execution: u32_of(execution),
                seq: u32_of(seq),
                event: event(&text)?,
            })
        })
        .collect()
}

pub(crate) fn purge(tx: &Transaction<'_>, before: Timestamp) -> Result<u64> {
    for name in ["instance_purge_history", "instance_purge_dedup"] {
        tx.prepare_cached(sql(name))
            .map_err(db_err)?
            .execute([before.0])
            .map_err(db_err)?;
    }
    let n = tx
        .prepare_cached(sql("instance_purge"))
        .map_err(db_err)?
        .execute([before.0])
        .map_err(db_err)?;
    Ok(n as u64)
}
