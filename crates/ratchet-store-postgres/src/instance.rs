//! Instances: create, claim, signal, cancel, terminate, read, list, purge.

use std::collections::HashMap;

use ratchet_core::{ErrorInfo, HistoryEvent, Timestamp};
use ratchet_store::{
    ClaimedInstance, CreateOutcome, Fence, HistoryRecord, IfExists, InboxEvent, Incarnation,
    InstanceClaim, InstanceClaimed, InstanceFilter, InstanceFollow, InstanceRecord, Lease,
    NewInstance, NewSignal, SignalOutcome, StopOutcome, StoreError,
};

use crate::convert::{
    col, event, from_json, i32_of, instance_record, status, to_json, u32_of, Res,
};
use crate::param::{p, Param};
use crate::store::{one_row, Conn, ReadyFrom};

pub(crate) fn if_exists_name(policy: IfExists) -> &'static str {
    match policy {
        IfExists::UseExisting => "UseExisting",
        IfExists::RestartIfFinished => "RestartIfFinished",
        _ => "Fail",
    }
}

/// The instance's opening event, as its inbox holds it.
pub(crate) fn started_event(new: &NewInstance) -> HistoryEvent {
    HistoryEvent::ExecutionStarted {
        name: new.name.clone(),
        version: 0,
        input: new.input.clone(),
        parent: new.parent.clone(),
        trace: new.trace.clone(),
    }
}

/// The arrays `instance_create` takes, for instances to create (leased to `lease`'s owner
/// when given).
pub(crate) struct CreateArgs {
    ids: Vec<String>,
    names: Vec<String>,
    inputs: Vec<String>,
    parents: Vec<Option<String>>,
    parent_ids: Vec<Option<String>>,
    parent_executions: Vec<Option<i32>>,
    parent_seqs: Vec<Option<i32>>,
    policies: Vec<String>,
    started: Vec<HistoryEvent>,
    started_text: Vec<String>,
    owner: Option<String>,
    until: Option<i64>,
}

impl CreateArgs {
    pub(crate) fn of(instances: &[NewInstance], lease: Option<&Lease>) -> Self {
        let started: Vec<HistoryEvent> = instances.iter().map(started_event).collect();
        Self {
            ids: instances.iter().map(|i| i.id.clone()).collect(),
            names: instances.iter().map(|i| i.name.clone()).collect(),
            inputs: instances.iter().map(|i| to_json(&i.input)).collect(),
            parents: instances
                .iter()
                .map(|i| i.parent.as_ref().map(to_json))
                .collect(),
            parent_ids: instances
                .iter()
                .map(|i| i.parent.as_ref().map(|p| p.instance.clone()))
                .collect(),
            parent_executions: instances
                .iter()
                .map(|i| i.parent.as_ref().map(|p| i32_of(p.execution)))
                .collect(),
            parent_seqs: instances
                .iter()
                .map(|i| i.parent.as_ref().map(|p| i32_of(p.seq)))
                .collect(),
            policies: instances
                .iter()
                .map(|i| if_exists_name(i.if_exists).to_string())
                .collect(),
            started_text: started.iter().map(to_json).collect(),
            started,
            owner: lease.map(|l| l.owner.clone()),
            until: lease.map(|l| l.until.0),
        }
    }

    /// The statement's parameters.
    pub(crate) fn params<'a>(&'a self, now: &'a i64, notify: &'a bool) -> Vec<Param<'a>> {
        vec![
            p(now),
            p(notify),
            p(&self.owner),
            p(&self.until),
            p(&self.ids),
            p(&self.names),
            p(&self.inputs),
            p(&self.parents),
            p(&self.parent_ids),
            p(&self.parent_executions),
            p(&self.parent_seqs),
            p(&self.policies),
            p(&self.started_text),
        ]
    }
}

pub(crate) async fn create(
    c: &Conn,
    instances: &[NewInstance],
    lease: Option<&Lease>,
    now: Timestamp,
) -> Res<Vec<CreateOutcome>> {
    let args = CreateArgs::of(instances, lease);
    let params = args.params(&now.0, &false);
    // Created unleased: whoever runs it must hear of it.
    let rows = c
        .then_notify(
            lease.is_none(),
            ReadyFrom::NoTasks,
            "instance_create",
            &params,
        )
        .await?;
    let row = one_row("instance_create", rows)?;
    create_outcomes(&row, instances, lease, &args)
}

/// The outcomes of `instance_create`, in the order of `instances`.
pub(crate) fn create_outcomes(
    row: &tokio_postgres::Row,
    instances: &[NewInstance],
    lease: Option<&Lease>,
    args: &CreateArgs,
) -> Res<Vec<CreateOutcome>> {
    let started = &args.started;
    let outcomes: Vec<String> = col(row, "outcome")?;
    let statuses: Vec<Option<String>> = col(row, "status")?;
    let inbox_ids: Vec<Option<i64>> = col(row, "inbox_id")?;
    let fences: Vec<Option<i64>> = col(row, "fence")?;
    let incarnations: Vec<Option<i64>> = col(row, "incarnation")?;
    let mut out = Vec::with_capacity(instances.len());
    for (i, new) in instances.iter().enumerate() {
        let leased = (inbox_ids.get(i), fences.get(i), incarnations.get(i));
        out.push(create_outcome(
            outcomes.get(i).map(String::as_str),
            statuses.get(i).cloned().flatten().as_deref(),
            || match (lease, leased) {
                (Some(_), (Some(Some(inbox)), Some(Some(fence)), Some(Some(incarnation)))) => {
                    Some(ClaimedInstance {
                        id: new.id.clone(),
                        name: new.name.clone(),
                        version: None,
                        execution: 0,
                        history_len: 0,
                        fence: Fence(*fence),
                        incarnation: Incarnation(*incarnation),
                        events: vec![InboxEvent {
                            id: *inbox,
                            event: started[i].clone(),
                        }],
                    })
                }
                _ => None,
            },
        )?);
    }
    Ok(out)
}

/// One instance of `instance_create`'s answer: what it said of it, the status it found, and
/// for a created one, the lease it came with.
pub(crate) fn create_outcome(
    said: Option<&str>,
    found: Option<&str>,
    created: impl FnOnce() -> Option<ClaimedInstance>,
) -> Res<CreateOutcome> {
    let existing = || status(found.unwrap_or_default());
    Ok(match said {
        Some("created") => CreateOutcome::Created(created()),
        Some("existing") => CreateOutcome::Existing(existing()?),
        Some("exists") => CreateOutcome::AlreadyExists(existing()?),
        other => return Err(StoreError::Corrupt(format!("instance_create said {other:?}")).into()),
    })
}

pub(crate) async fn claim(c: &Conn, claim: &InstanceClaim) -> Res<InstanceClaimed> {
    // One (name, version) pair per registered version; a name without versions can still run
    // instances that have not pinned one.
    let mut reg_names = Vec::new();
    let mut reg_versions: Vec<Option<i32>> = Vec::new();
    for r in &claim.orchestrations {
        if r.versions.is_empty() {
            reg_names.push(r.name.clone());
            reg_versions.push(None);
        }
        for v in &r.versions {
            reg_names.push(r.name.clone());
            reg_versions.push(Some(i32_of(*v)));
        }
    }
    let limit = i32::try_from(claim.limit).unwrap_or(i32::MAX);
    let (task_queues, task_limits, task_names) = match &claim.tasks {
        Some(t) => crate::task::queue_arrays(t),
        None => Default::default(),
    };
    let (from, walk_from) = {
        let mut cursors = c.cursors();
        let from = cursors.bounds(claim.now.0, &task_queues, &task_names);
        (from, cursors.instance_walk())
    };
    // Instances and tasks share one lease in a poll.
    let row = c
        .one(
            "instance_claim",
            &[
                p(&claim.now.0),
                p(&claim.lease.owner),
                p(&claim.lease.until.0),
                p(&limit),
                p(&reg_names),
                p(&reg_versions),
                p(&task_queues),
                p(&task_limits),
                p(&task_names),
                p(&from.queues),
                p(&from.priorities),
                p(&from.ready),
                p(&from.ids),
                p(&from.rescan),
                p(&walk_from),
            ],
        )
        .await?;
    crate::task::advance_cursors(c, &task_names, &from, &row)?;
    c.cursors().walked_to(col(&row, "walk_next")?);
    let mut events = events_by_instance(&row)?;
    let ids: Vec<String> = col(&row, "i_id")?;
    let names: Vec<String> = col(&row, "i_name")?;
    let versions: Vec<Option<i32>> = col(&row, "i_version")?;
    let executions: Vec<i32> = col(&row, "i_execution")?;
    let lengths: Vec<i32> = col(&row, "i_history_len")?;
    let fences: Vec<i64> = col(&row, "i_fence")?;
    let incarnations: Vec<i64> = col(&row, "i_incarnation")?;
    let mut instances = Vec::with_capacity(ids.len());
    for (i, id) in ids.into_iter().enumerate() {
        // The claim gave back at once an instance whose events a concurrent turn consumed.
        let Some(events) = events.remove(&id) else {
            continue;
        };
        instances.push(ClaimedInstance {
            name: names.get(i).cloned().unwrap_or_default(),
            version: versions.get(i).copied().flatten().map(u32_of),
            execution: executions.get(i).copied().map_or(0, u32_of),
            history_len: lengths.get(i).copied().map_or(0, u32_of),
            fence: Fence(fences.get(i).copied().unwrap_or_default()),
            incarnation: Incarnation(incarnations.get(i).copied().unwrap_or_default()),
            id,
            events,
        });
    }
    let tasks = crate::task::TaskColumns::of_claim(&row)?.into_tasks()?;
    Ok(InstanceClaimed {
        instances,
        next_due: col::<Option<i64>>(&row, "next_due")?.map(Timestamp),
        tasks,
        taken_over: col::<i32>(&row, "taken_over").map(u32_of)?,
    })
}

/// The `e_instance`, `e_id`, `e_event` columns of a claim or commit: inbox events grouped by
/// instance, oldest first.
pub(crate) fn events_by_instance(
    row: &tokio_postgres::Row,
) -> Res<HashMap<String, Vec<InboxEvent>>> {
    let owners: Vec<String> = col(row, "e_instance")?;
    let ids: Vec<i64> = col(row, "e_id")?;
    let texts: Vec<String> = col(row, "e_event")?;
    let mut grouped: HashMap<String, Vec<InboxEvent>> = HashMap::new();
    for ((owner, id), text) in owners.into_iter().zip(ids).zip(texts) {
        grouped.entry(owner).or_default().push(InboxEvent {
            id,
            event: event(&text)?,
        });
    }
    Ok(grouped)
}

pub(crate) async fn signal(c: &Conn, signals: &[NewSignal]) -> Res<Vec<SignalOutcome>> {
    let instances: Vec<String> = signals.iter().map(|s| s.instance.clone()).collect();
    let dedup: Vec<Option<String>> = signals.iter().map(|s| s.dedup_id.clone()).collect();
    let events: Vec<String> = signals
        .iter()
        .map(|s| {
            to_json(&HistoryEvent::SignalReceived {
                name: s.name.clone(),
                payload: s.payload.clone(),
            })
        })
        .collect();
    let params = [p(&false), p(&instances), p(&dedup), p(&events)];
    let rows = c
        .then_notify(true, ReadyFrom::NoTasks, "signal_raise", &params)
        .await?;
    let row = one_row("signal_raise", rows)?;
    let outcomes: Vec<String> = col(&row, "outcome")?;
    let statuses: Vec<Option<String>> = col(&row, "status")?;
    outcomes
        .iter()
        .zip(statuses)
        .map(|(outcome, st)| {
            Ok(match outcome.as_str() {
                "raised" => SignalOutcome::Raised,
                "duplicate" => SignalOutcome::Duplicate,
                "not_found" => SignalOutcome::NotFound,
                "finished" => SignalOutcome::Finished(status(&st.unwrap_or_default())?),
                other => {
                    return Err(StoreError::Corrupt(format!("signal_raise said {other}")).into())
                }
            })
        })
        .collect()
}

fn stop_outcome(row: &tokio_postgres::Row, what: &str) -> Res<StopOutcome> {
    let outcome: String = col(row, "outcome")?;
    let st: Option<String> = col(row, "status")?;
    Ok(match outcome.as_str() {
        "done" => StopOutcome::Done,
        "not_found" => StopOutcome::NotFound,
        "finished" => StopOutcome::Finished(status(&st.unwrap_or_default())?),
        other => return Err(StoreError::Corrupt(format!("{what} said {other}")).into()),
    })
}

pub(crate) async fn cancel(c: &Conn, id: &str, reason: &str) -> Res<StopOutcome> {
    let event = to_json(&HistoryEvent::CancelRequested {
        reason: reason.to_string(),
    });
    let row = c
        .one("instance_cancel", &[p(&id), p(&event), p(&c.notify())])
        .await?;
    stop_outcome(&row, "instance_cancel")
}

pub(crate) async fn terminate(
    c: &Conn,
    id: &str,
    reason: &str,
    now: Timestamp,
) -> Res<StopOutcome> {
    let error = to_json(&ErrorInfo::new("Terminated", reason));
    let row = c
        .one(
            "instance_terminate",
            &[p(&id), p(&error), p(&now.0), p(&c.notify())],
        )
        .await?;
    stop_outcome(&row, "instance_terminate")
}

pub(crate) async fn get(c: &Conn, id: &str) -> Res<Option<InstanceRecord>> {
    let rows = c.query("instance_get", &[p(&id)]).await?;
    rows.first().map(instance_record).transpose()
}

pub(crate) async fn list(c: &Conn, f: &InstanceFilter) -> Res<Vec<InstanceRecord>> {
    let statuses: Option<Vec<String>> = (!f.statuses.is_empty())
        .then(|| f.statuses.iter().map(|s| s.as_str().to_string()).collect());
    let limit = i64::from(f.limit.unwrap_or(100));
    let custom_status = f.custom_status.as_ref().map(ratchet_store::codec::to_json);
    // Every id starts with the empty prefix.
    let pattern = f
        .id_prefix
        .as_deref()
        .filter(|p| !p.is_empty())
        .map(like_prefix);
    let rows = c
        .query_planned(
            "instance_list",
            &[
                p(&statuses),
                p(&f.name),
                p(&f.created_after.map(|t| t.0)),
                p(&f.created_before.map(|t| t.0)),
                p(&limit),
                p(&f.after.as_ref().map(|(t, _)| t.0)),
                p(&f.after.as_ref().map(|(_, id)| id.as_str())),
                p(&custom_status),
                p(&pattern),
            ],
        )
        .await?;
    rows.iter().map(instance_record).collect()
}

/// The LIKE pattern of the strings that start with `prefix`: its backslashes, `%` and `_`
/// escaped (backslash is LIKE's escape character), then `%`.
fn like_prefix(prefix: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '\\' | '%' | '_') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

pub(crate) async fn history(c: &Conn, id: &str, execution: Option<u32>) -> Res<Vec<HistoryRecord>> {
    let execution = execution.map(i32_of);
    let rows = c.query("history_read", &[p(&id), p(&execution)]).await?;
    records_of(&rows)
}

pub(crate) async fn history_page(
    c: &Conn,
    id: &str,
    after: Option<(u32, u32)>,
    limit: u32,
) -> Res<Vec<HistoryRecord>> {
    let execution = after.map(|(e, _)| i32_of(e));
    let seq = after.map(|(_, s)| i32_of(s));
    let rows = c
        .query(
            "history_page",
            &[p(&id), p(&execution), p(&seq), p(&i64::from(limit))],
        )
        .await?;
    let page = records_of(&rows)?
        .into_iter()
        .filter(|r| after.is_none_or(|after| (r.execution, r.seq) > after))
        .take(limit as usize)
        .collect();
    Ok(page)
}

/// An instance with up to `limit` history events after `after`. The two reads go out together
/// (one round trip), the history first: a finished instance's last events are then never
/// missed by a caller that reads again from its new position.
pub(crate) async fn follow(
    c: &Conn,
    id: &str,
    after: Option<(u32, u32)>,
    limit: u32,
) -> Res<Option<InstanceFollow>> {
    let (history, instance) = futures::try_join!(history_page(c, id, after, limit), get(c, id))?;
    Ok(instance.map(|instance| InstanceFollow { instance, history }))
}

/// History rows (one per turn: its events from position `seq`) as one record per event.
fn records_of(rows: &[tokio_postgres::Row]) -> Res<Vec<HistoryRecord>> {
    let mut records = Vec::new();
    for r in rows {
        let execution = u32_of(col(r, "execution")?);
        let first = u32_of(col(r, "seq")?);
        let events: Vec<ratchet_core::HistoryEvent> = from_json(col(r, "events")?, "history")?;
        for (i, event) in events.into_iter().enumerate() {
            records.push(HistoryRecord {
                execution,
                seq: first + u32::try_from(i).unwrap_or(u32::MAX),
                event,
            });
        }
    }
    Ok(records)
}

pub(crate) async fn purge(c: &Conn, before: Timestamp) -> Res<u64> {
    let row = c.one("instance_purge", &[p(&before.0)]).await?;
    let purged: i64 = col(&row, "purged")?;
    Ok(u64::try_from(purged).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::like_prefix;

    #[test]
    fn like_prefixes_escape_what_like_would_match_loosely() {
        assert_eq!(like_prefix("ord-"), "ord-%");
        assert_eq!(like_prefix("a_b%c\\d"), "a\\_b\\%c\\\\d%");
        assert_eq!(like_prefix("é"), "é%");
    }
}
