//! The group committer: one service that writes the turn commits and task completions of many
//! instances in one store round trip, with a few flushes in flight at most: whatever gathers
//! while they travel leaves in the next.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ratchet_store::{
    CommitBatch, CommitStart, CompletionResult, CreateOutcome, Lease, StoreError, TaskCompletion,
    TaskResult, TurnCommit, TurnResult,
};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

use crate::runtime::Shared;
use crate::turn::{FedResult, Pending};

/// What a group commit answers for a turn: its outcome, and its start's when it ran on one.
pub(crate) struct TurnAnswer {
    turn: TurnResult,
    start: Option<CreateOutcome>,
}

/// Where a turn's outcome goes back to its runner.
type TurnReply = oneshot::Sender<Result<TurnAnswer, Arc<StoreError>>>;

/// A turn to commit, with the start of its instance when it is the first turn and ran before
/// the start was written.
pub(crate) struct TurnItem {
    commit: TurnCommit,
    start: Option<CommitStart>,
}

impl std::ops::Deref for TurnItem {
    type Target = TurnCommit;

    fn deref(&self) -> &TurnCommit {
        &self.commit
    }
}

type Turns = Vec<(Box<TurnItem>, TurnReply)>;

pub(crate) enum CommitItem {
    Turn(Box<TurnItem>, TurnReply),
    Completion(TaskCompletion, Option<String>),
    Stop,
}

/// The sending side, held by turn runners and activity workers.
#[derive(Clone)]
pub(crate) struct Committer {
    tx: mpsc::UnboundedSender<CommitItem>,
}

impl Committer {
    pub(crate) fn new() -> (Self, mpsc::UnboundedReceiver<CommitItem>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }

    /// Commits a turn with the next group commit and returns its outcome.
    pub(crate) async fn turn(&self, commit: TurnCommit) -> Result<TurnResult, Arc<StoreError>> {
        Ok(self.send(commit, None).await?.turn)
    }

    /// Creates an instance and commits the first turn that already ran on its start, with the
    /// next group commit, and returns both outcomes.
    pub(crate) async fn start(
        &self,
        start: CommitStart,
        commit: TurnCommit,
    ) -> Result<(CreateOutcome, TurnResult), Arc<StoreError>> {
        let answer = self.send(commit, Some(start)).await?;
        let created = answer
            .start
            .ok_or_else(|| Arc::new(StoreError::Invalid("the store answered no start".into())))?;
        Ok((created, answer.turn))
    }

    async fn send(
        &self,
        commit: TurnCommit,
        start: Option<CommitStart>,
    ) -> Result<TurnAnswer, Arc<StoreError>> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(CommitItem::Turn(
                Box::new(TurnItem { commit, start }),
                reply,
            ))
            .map_err(|_| Arc::new(StoreError::Closed))?;
        rx.await.map_err(|_| Arc::new(StoreError::Closed))?
    }

    /// Queues an activity or task completion (with its activity's instance); the committer
    /// retries it until the store takes it.
    pub(crate) fn complete(&self, completion: TaskCompletion, instance: Option<String>) {
        if self
            .tx
            .send(CommitItem::Completion(completion, instance))
            .is_err()
        {
            tracing::warn!(
                "completion dropped after shutdown; the task will run again after its lease"
            );
        }
    }

    pub(crate) fn stop(&self) {
        let _ = self.tx.send(CommitItem::Stop);
    }
}

/// Runs until [`Committer::stop`].
pub(crate) async fn run(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<CommitItem>) {
    let max = shared.config.commit_batch;
    // Several flushes may be in flight: while one travels to the database or waits for its
    // commit, the items that gather leave in the next instead of waiting for it. (Against a
    // distant database this saves whole round trips; near it, it keeps both the database and
    // this process busy.)
    let mut flushes: JoinSet<Flushed> = JoinSet::new();
    let in_flight = shared.config.commit_concurrency.max(1);
    // The instances of the flushes in flight (with how many hold each), and the items kept
    // back because their instance is among them: two flushes locking one instance would run
    // one after the other in the database anyway, the second holding its other locks
    // while it waits.
    let mut busy: HashMap<String, usize> = HashMap::new();
    let mut held_turns: Turns = Vec::new();
    let mut held_completions: Completions = Vec::new();
    let mut retry: Completions = Vec::new();
    // Instances whose completions wait for their siblings, since when.
    let mut lingering: HashMap<String, tokio::time::Instant> = HashMap::new();
    let linger = shared.config.commit_linger;
    let mut backoff = Duration::from_millis(50);
    let mut stopping = false;
    loop {
        // Completions of a failed flush go again, after a pause that grows while they fail.
        while let Some(done) = flushes.try_join_next() {
            ended(done, &mut busy, &mut retry, &mut backoff);
        }
        if !retry.is_empty() {
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
        let mut turns = std::mem::take(&mut held_turns);
        let mut completions = std::mem::take(&mut retry);
        completions.append(&mut held_completions);
        if completions.is_empty() && turns.is_empty() {
            if stopping {
                break;
            }
            tokio::select! {
                item = rx.recv() => match item {
                    Some(CommitItem::Stop) | None => stopping = true,
                    Some(item) => push(item, &mut turns, &mut completions, &mut stopping),
                },
                // A flush that ends may need its completions sent again.
                Some(done) = flushes.join_next(), if !flushes.is_empty() => {
                    ended(done, &mut busy, &mut retry, &mut backoff);
                    continue;
                }
            }
        }
        // Let tasks that are ready right now (sibling activities finishing together) queue
        // their items too: a few yields cost microseconds and save whole round trips.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
        // Everything that queued while the previous flush ran goes into this one.
        while turns.len() + completions.len() < max {
            match rx.try_recv() {
                Ok(item) => push(item, &mut turns, &mut completions, &mut stopping),
                Err(_) => break,
            }
        }
        // Activities a turn scheduled together tend to finish together: the completions of an
        // instance whose other activities still run here wait for them, up to commit_linger
        // after the first of them came, so that it gets one commit and one turn for all of
        // them instead of one each. The others go now, without waiting for those.
        let mut waiting: Completions = Vec::new();
        if !stopping {
            let now = tokio::time::Instant::now();
            (completions, waiting) = completions.into_iter().partition(|(_, instance)| {
                let Some(i) = instance.as_deref() else {
                    return true;
                };
                if !shared.capacity.running.activity_of(i) {
                    return true;
                }
                let since = *lingering.entry(i.to_string()).or_insert(now);
                now >= since + linger
            });
        }
        for (_, instance) in &completions {
            if let Some(i) = instance {
                lingering.remove(i);
            }
        }
        // Items of an instance that a flush in flight holds wait for the next flush.
        if !busy.is_empty() {
            let (now, later): (Vec<_>, Vec<_>) = turns
                .into_iter()
                .partition(|(t, _)| !busy.contains_key(&t.instance));
            turns = now;
            held_turns = later;
            let (now, later): (Vec<_>, Vec<_>) = completions
                .into_iter()
                .partition(|(_, i)| i.as_ref().is_none_or(|i| !busy.contains_key(i)));
            completions = now;
            held_completions = later;
        }
        let held = !held_turns.is_empty() || !held_completions.is_empty();
        held_completions.append(&mut waiting);
        if turns.is_empty() && completions.is_empty() {
            // Only held or waiting items: wait for a flush to end and free their instances, for
            // another item, or until the first waiting completion is due. (With no flush in
            // flight, nothing holds any: a panicked flush left its marks.)
            if flushes.is_empty() {
                busy.clear();
            }
            let due = lingering.values().min().map(|since| *since + linger);
            tokio::select! {
                Some(done) = flushes.join_next(), if held && !flushes.is_empty() => {
                    ended(done, &mut busy, &mut retry, &mut backoff);
                }
                item = rx.recv(), if due.is_some() => match item {
                    Some(item) => push(item, &mut held_turns, &mut held_completions, &mut stopping),
                    None => stopping = true,
                },
                () = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)),
                    if due.is_some() => {}
                else => {}
            }
            continue;
        }
        while flushes.len() >= in_flight {
            match flushes.join_next().await {
                Some(done) => ended(done, &mut busy, &mut retry, &mut backoff),
                None => break,
            }
        }
        let mut instances: Vec<String> = turns
            .iter()
            .map(|(t, _)| t.instance.clone())
            .chain(completions.iter().filter_map(|(_, i)| i.clone()))
            .collect();
        instances.sort();
        instances.dedup();
        for instance in &instances {
            *busy.entry(instance.clone()).or_default() += 1;
        }
        let shared = shared.clone();
        flushes.spawn(async move {
            let result = flush(&shared, turns, &completions).await;
            (instances, result.map_err(|e| (e, completions)))
        });
    }
    // Shutting down: let the flushes in flight finish. Completions that still fail are lost
    // here and their tasks run again after their leases expire.
    while let Some(done) = flushes.join_next().await {
        if let Ok((_, Err((e, failed)))) = done {
            tracing::warn!(error = %e, lost = failed.len(), "group commit failed at shutdown; those tasks run again after their leases");
        }
    }
}

/// What a flush hands back: the instances it held, and the completions to send again if it
/// failed.
type Flushed = (Vec<String>, Result<(), (Arc<StoreError>, Completions)>);

/// Books a flush that ended: its instances are free, its completions go again if it failed.
fn ended(
    done: Result<Flushed, tokio::task::JoinError>,
    busy: &mut HashMap<String, usize>,
    retry: &mut Completions,
    backoff: &mut Duration,
) {
    let Ok((instances, result)) = done else {
        // A flush that panicked: its marks are cleared once no flush is in flight.
        tracing::error!("a group commit panicked");
        return;
    };
    for instance in instances {
        if let Some(n) = busy.get_mut(&instance) {
            *n -= 1;
            if *n == 0 {
                busy.remove(&instance);
            }
        }
    }
    match result {
        Err((e, failed)) => {
            tracing::warn!(error = %e, retry_in = ?backoff, "group commit failed; completions will be retried");
            retry.extend(failed);
        }
        Ok(()) => *backoff = Duration::from_millis(50),
    }
}

/// Completions with the instance of their activity, if any.
type Completions = Vec<(TaskCompletion, Option<String>)>;

fn push(item: CommitItem, turns: &mut Turns, completions: &mut Completions, stopping: &mut bool) {
    match item {
        CommitItem::Turn(t, reply) => turns.push((t, reply)),
        CommitItem::Completion(c, instance) => completions.push((c, instance)),
        CommitItem::Stop => *stopping = true,
    }
}

/// The next turns of instances cached here, run on the results of their activities in
/// `completions`, to commit with them: an instance none of whose activities still runs here,
/// and that has no turn of its own in the batch.
fn fed_turns(
    shared: &Arc<Shared>,
    turns: &[(Box<TurnItem>, TurnReply)],
    completions: &[(TaskCompletion, Option<String>)],
) -> Vec<(TurnCommit, Pending)> {
    if shared.lifecycle.is_closing() || !shared.config.fed_turns {
        return Vec::new();
    }
    // Each instance's results, in the batch's order.
    let mut order: Vec<&str> = Vec::new();
    let mut results: HashMap<&str, Vec<FedResult>> = HashMap::new();
    for (at, (c, _)) in completions.iter().enumerate() {
        let (Some(owner), Some(event), Ok(at)) = (&c.owner, c.event(), u32::try_from(at)) else {
            continue;
        };
        let instance = owner.instance.as_str();
        let result = FedResult {
            at,
            execution: owner.execution,
            event,
        };
        results
            .entry(instance)
            .or_insert_with(|| {
                order.push(instance);
                Vec::new()
            })
            .push(result);
    }
    let with_turn: HashSet<&str> = turns.iter().map(|(t, _)| t.instance.as_str()).collect();
    order
        .into_iter()
        .filter(|instance| {
            !with_turn.contains(instance) && !shared.capacity.running.activity_of(instance)
        })
        .filter_map(|instance| {
            let of = results.remove(instance)?;
            crate::turn::fed(shared, instance, of)
        })
        .collect()
}

async fn flush(
    shared: &Arc<Shared>,
    mut turns: Turns,
    completions: &[(TaskCompletion, Option<String>)],
) -> Result<(), Arc<StoreError>> {
    // Turns fed by this batch's results join it; each acts on its answer on its own task.
    let fed = fed_turns(shared, &turns, completions);
    crate::metrics::turns_fed(fed.len());
    for (commit, pending) in fed {
        let (reply, answer) = oneshot::channel();
        turns.push((
            Box::new(TurnItem {
                commit,
                start: None,
            }),
            reply,
        ));
        let guard = shared.begin_work();
        let shared = shared.clone();
        tokio::spawn(async move {
            let _guard = guard;
            let answer = answer
                .await
                .unwrap_or_else(|_| Err(Arc::new(StoreError::Closed)))
                .map(|a| a.turn);
            pending.after(&shared, answer).await;
        });
    }
    let now = shared.now();
    let until = now.plus(shared.config.lease);
    let lease = Lease {
        owner: shared.owner.clone(),
        until,
    };
    let lock_instances: Vec<String> = if shared.lifecycle.is_closing() {
        Vec::new()
    } else {
        // Instances cached here that may have new events: those receiving completions. And
        // every instance whose turn commits now, cached or not: events that arrived during
        // the turn found it leased, so nobody else takes them (a fed turn refused while this
        // turn ran put its results in the inbox and dropped the cache); this commit ends the
        // lease and must take them. Those continuing as new start from nothing anyway.
        let committing = turns
            .iter()
            .filter(|(t, _)| !t.status.is_finished() || t.continue_as_new.is_some())
            .map(|(t, _)| t.instance.clone());
        let mut ids = shared
            .cache
            .cached_of(completions.iter().filter_map(|(_, i)| i.clone()));
        ids.extend(committing);
        ids.sort();
        ids.dedup();
        ids
    };
    // A first turn that ran on its start points at it among the batch's starts.
    let mut starts = Vec::new();
    let (turn_items, replies): (Vec<TurnCommit>, Vec<_>) = turns
        .into_iter()
        .map(|(item, reply)| {
            let TurnItem { mut commit, start } = *item;
            if let Some(start) = start {
                commit.started = u32::try_from(starts.len()).ok();
                starts.push(start);
            }
            let started = commit.started;
            (commit, (reply, started))
        })
        .unzip();
    // The store leases a batch's first activities to this process as it writes them; one
    // that only a worker elsewhere runs must wait in the queue for it instead, so a batch
    // holding one leases none (the dispatcher claims the others here by name). A runtime
    // that runs every activity it calls skips the look.
    let elsewhere = shared.registry.calls_activities_elsewhere()
        && turn_items
            .iter()
            .flat_map(|t| &t.tasks)
            .any(|t| t.owner.is_some() && !shared.registry.has_activity(&t.name));
    let task_capacity = if elsewhere {
        0
    } else {
        u32::try_from(shared.capacity.activity_room()).unwrap_or(u32::MAX)
    };
    let batch = CommitBatch {
        starts,
        turns: turn_items,
        completions: completions.iter().map(|(c, _)| c.clone()).collect(),
        task_lease: (!shared.lifecycle.is_closing()).then(|| lease.clone()),
        task_capacity,
        lock_instances: lock_instances.clone(),
        instance_lease: Some(lease),
        now,
    };
    let (turn_count, completion_count) = (batch.turns.len(), batch.completions.len());
    let asked = std::time::Instant::now();
    let answer = shared.store.commit(batch).await;
    crate::metrics::commit(
        turn_count,
        completion_count,
        asked.elapsed(),
        answer.is_ok(),
    );
    let outcome = match answer {
        Ok(outcome) => outcome,
        Err(e) => {
            let e = Arc::new(e);
            for (reply, _) in replies {
                let _ = reply.send(Err(e.clone()));
            }
            return Err(e);
        }
    };
    for ((reply, started), turn) in replies.into_iter().zip(outcome.turns) {
        let start = started.and_then(|k| outcome.starts.get(k as usize).cloned());
        let _ = reply.send(Ok(TurnAnswer { turn, start }));
    }
    // A retry is due at its backoff time: the dispatcher wakes for it then, not at its poll.
    for ((c, _), result) in completions.iter().zip(&outcome.completions) {
        if let (TaskResult::Retry { at, .. }, CompletionResult::Applied) = (&c.result, result) {
            shared.wake.timer_committed(*at);
        }
    }
    let stale = outcome
        .completions
        .iter()
        .filter(|c| **c == CompletionResult::Stale)
        .count();
    if stale > 0 {
        crate::metrics::completions_refused(stale);
        tracing::debug!(stale, "completions refused for a lost lease");
    }
    for claimed in outcome.locked {
        shared.run_turn(claimed);
    }
    Ok(())
}
