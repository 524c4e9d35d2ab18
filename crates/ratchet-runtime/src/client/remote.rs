//! Work for workers in other processes, which reach Ratchet through a server instead of the
//! database: they claim standalone tasks and activity attempts, renew their leases, and report
//! how each attempt ended. The leases, fences and attempt accounting are those of in-process
//! workers; what follows a failure (a retry at its policy's time, a dead letter, the step's
//! error) is decided here, from the task's own options, as a runtime decides it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ratchet_core::{ActivityError, ActivityOptions, ErrorInfo, Timestamp};
use ratchet_store::{
    validate_queue_name, ClaimedTask, CommitBatch, CompletionResult, Fence, Lease, LeaseRelease,
    LeaseState, QueueClaim, TaskClaim, TaskCompletion, TaskId, TaskOwner, TaskResult, WorkerAbout,
    WorkerAlive, ACTIVITY_QUEUE,
};
use serde_json::Value;

use super::{validate_name, Client};
use crate::worker::{after_failure, attempts_spent, output_refused};
use crate::{Error, Result};

/// The shortest and longest lease a remote worker may ask for.
const LEASE_RANGE: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(3600));

/// The most task and activity names one claim may carry.
const MAX_NAMES: usize = 1_000;

/// The most attempts one claim takes, over every queue.
const MAX_CLAIM: u32 = 1_000;

/// Attempts kept in memory between a claim and its end (their options, so a failure needs
/// no read); past it, an end reads the task instead.
const MAX_REMEMBERED: usize = 1_000_000;

/// A claim by a worker in another process.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteClaim {
    /// The worker, as its leases name it: one name per worker process (1 to 200 printable
    /// characters).
    pub worker: String,
    /// Queues of standalone tasks, each with the most attempts to take from it.
    pub queues: Vec<(String, u32)>,
    /// The most activity attempts of orchestrations to take.
    pub activities: u32,
    /// The task and activity names the worker runs.
    pub names: Vec<String>,
    /// How long the leases last unless renewed (1 s to 1 h).
    pub lease: Duration,
    /// How long to wait for work when none is ready.
    pub wait: Duration,
}

/// How an attempt a remote worker ran ended.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RemoteOutcome {
    /// Succeeded with this output.
    Completed(Value),
    /// Failed with this error: tried again as the task's retry policy says, unless
    /// `retryable` is false.
    Failed {
        /// The error.
        error: ErrorInfo,
        /// Whether another attempt may mend it.
        retryable: bool,
    },
    /// Not now: run again after this long, and this attempt does not count.
    Snooze(Duration),
    /// Stopped because a client asked to cancel the task (a heartbeat said so).
    Cancelled,
}

/// The end of one attempt a remote worker ran.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteResult {
    /// The task.
    pub id: TaskId,
    /// The fence of the lease it ran under, as claimed.
    pub fence: Fence,
    /// How it ended.
    pub outcome: RemoteOutcome,
}

/// What a server keeps of an attempt it handed out.
#[derive(Clone, Debug)]
struct Handed {
    options: ActivityOptions,
    owner: Option<TaskOwner>,
    attempt: u32,
    name: String,
    queue: String,
    /// Forgotten after this: the lease has long run out unless renewed.
    until: Instant,
}

/// The remote workers' attempts and liveness, shared by a client's clones.
#[derive(Debug, Default)]
pub(crate) struct Remote {
    handed: Mutex<HashMap<(TaskId, Fence), Handed>>,
    /// What each worker last said of itself, and when.
    alive: Mutex<HashMap<String, Alive>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere while it was held leaves plain data, still good to use.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Client {
    /// Claims work for a worker in another process: up to each queue's limit of ready
    /// standalone tasks and up to `activities` activity attempts, of the names it runs. When
    /// none is ready, waits up to `claim.wait` for some, or until `stop` resolves (a server
    /// stopping; a claim under way finishes first, so nothing is leased and then dropped).
    /// The worker is counted alive (a name it runs is served) while it claims or renews
    /// leases.
    ///
    /// An attempt whose lost predecessor was the last of its budget is not handed out: it
    /// ends here as a `WorkerLost` failure, as it would in a runtime.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] or [`Error::Limit`] for a bad worker name, queue, name or
    /// duration; a store error.
    pub async fn remote_claim(
        &self,
        claim: RemoteClaim,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<Vec<ClaimedTask>> {
        check_claim(&claim)?;
        let mut stop = std::pin::pin!(stop);
        let deadline = tokio::time::Instant::now() + claim.wait;
        let mut work = self.store.wakeups().map(|w| w.work);
        loop {
            if let Some(work) = &mut work {
                work.borrow_and_update();
            }
            self.remote_alive(&claim.worker, Some(&claim), claim.lease)
                .await?;
            let now = self.calls.now().await;
            let mut queues: Vec<QueueClaim> = claim
                .queues
                .iter()
                .filter(|(_, limit)| *limit > 0)
                .map(|(queue, limit)| QueueClaim {
                    queue: queue.clone(),
                    limit: *limit,
                })
                .collect();
            if claim.activities > 0 {
                queues.push(QueueClaim {
                    queue: ACTIVITY_QUEUE.to_string(),
                    limit: claim.activities,
                });
            }
            let claimed = self
                .store
                .task_claim(TaskClaim {
                    lease: Lease {
                        owner: claim.worker.clone(),
                        until: now.plus(claim.lease),
                    },
                    queues,
                    names: claim.names.clone(),
                    now,
                })
                .await?;
            let (spent, claimed): (Vec<_>, Vec<_>) = claimed
                .into_iter()
                .partition(|task| attempts_spent(task).is_some());
            if !spent.is_empty() {
                self.end_spent(spent).await?;
            }
            if !claimed.is_empty() {
                self.remember(&claimed, claim.lease);
                return Ok(claimed);
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return Ok(Vec::new());
            }
            // Woken by new work where the store says so; polled otherwise, and as a fallback.
            let poll = self.poll_interval.min(left);
            let woken = async {
                match &mut work {
                    Some(work) => {
                        let _ = tokio::time::timeout(poll, work.changed()).await;
                    }
                    None => tokio::time::sleep(poll).await,
                }
            };
            tokio::select! {
                () = woken => {}
                () = &mut stop => return Ok(Vec::new()),
            }
        }
    }

    /// Renews the leases of attempts a remote worker runs, for `lease` more: for each, kept,
    /// lost (taken over, or the task is gone: its end will be refused) or kept with a request
    /// to cancel it.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad worker name or lease; a store error.
    pub async fn remote_heartbeat(
        &self,
        worker: &str,
        tasks: Vec<(TaskId, Fence)>,
        lease: Duration,
    ) -> Result<Vec<LeaseState>> {
        check_worker(worker)?;
        check_lease(lease)?;
        if tasks.len() > MAX_CLAIM as usize * 10 {
            return Err(Error::InvalidInput(format!(
                "{} leases; at most {} per heartbeat",
                tasks.len(),
                MAX_CLAIM * 10
            )));
        }
        self.remote_alive(worker, None, lease).await?;
        let now = self.calls.now().await;
        let states = self
            .store
            .task_heartbeat(tasks.clone(), now.plus(lease))
            .await?;
        let until = Instant::now() + lease * 2;
        let mut handed = lock(&self.remote.handed);
        for (key, state) in tasks.iter().zip(&states) {
            match state {
                LeaseState::Lost => {
                    handed.remove(key);
                }
                _ => {
                    if let Some(h) = handed.get_mut(key) {
                        h.until = until;
                    }
                }
            }
        }
        Ok(states)
    }

    /// Gives attempts a remote worker will not run back to their queues at once (a worker
    /// stopping); they count no attempt.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a bad worker name; a store error.
    pub async fn remote_release(&self, worker: &str, tasks: Vec<(TaskId, Fence)>) -> Result<()> {
        check_worker(worker)?;
        {
            let mut handed = lock(&self.remote.handed);
            for key in &tasks {
                handed.remove(key);
            }
        }
        let now = self.calls.now().await;
        self.store
            .lease_release(LeaseRelease {
                instances: Vec::new(),
                tasks,
                now,
            })
            .await?;
        Ok(())
    }

    /// Ends attempts remote workers ran, in one commit: each applied, or refused as stale
    /// when its lease was lost (taken over, or the task is gone). A failure is retried as
    /// the task's policy says; an output over the payload limit fails the attempt for good.
    ///
    /// # Errors
    ///
    /// A store error (then none was applied).
    pub async fn remote_complete(
        &self,
        results: Vec<RemoteResult>,
    ) -> Result<Vec<CompletionResult>> {
        if results.len() > MAX_CLAIM as usize * 10 {
            return Err(Error::InvalidInput(format!(
                "{} results; at most {} per call",
                results.len(),
                MAX_CLAIM * 10
            )));
        }
        let known: Vec<Option<Handed>> = {
            let handed = lock(&self.remote.handed);
            results
                .iter()
                .map(|r| handed.get(&(r.id, r.fence)).cloned())
                .collect()
        };
        // Attempts claimed through another server (or before a restart) are read: their
        // options decide what follows a failure.
        let reads = results.iter().zip(&known).map(|(r, known)| async move {
            match known {
                Some(h) => Ok(Some(h.clone())),
                None => self.handed_by_store(r.id).await,
            }
        });
        let found = futures::future::try_join_all(reads).await?;
        let now = self.calls.now().await;
        let mut completions = Vec::with_capacity(results.len());
        let mut positions = Vec::with_capacity(results.len());
        let mut answers = vec![CompletionResult::Stale; results.len()];
        for (n, (result, handed)) in results.iter().zip(found).enumerate() {
            // A task that is gone (finished, discarded) has no lease to honour.
            let Some(handed) = handed else { continue };
            let outcome = self.remote_result(&result.outcome, &handed, now);
            completions.push(TaskCompletion {
                id: result.id,
                fence: result.fence,
                owner: handed.owner.clone(),
                attempt: handed.attempt,
                result: outcome,
            });
            positions.push(n);
        }
        if !completions.is_empty() {
            let outcome = self.store.commit(completing(completions, now)).await?;
            for (at, applied) in positions.into_iter().zip(outcome.completions) {
                answers[at] = applied;
            }
        }
        let mut handed = lock(&self.remote.handed);
        for r in &results {
            handed.remove(&(r.id, r.fence));
        }
        Ok(answers)
    }

    /// The queue of each task (by id and the fence of its lease), `None` for one that is gone: what a server checks a worker's
    /// token against before it renews or reports attempts.
    ///
    /// # Errors
    ///
    /// A store error.
    pub async fn remote_queues(&self, tasks: &[(TaskId, Fence)]) -> Result<Vec<Option<String>>> {
        let known: Vec<Option<String>> = {
            let handed = lock(&self.remote.handed);
            tasks
                .iter()
                .map(|key| handed.get(key).map(|h| h.queue.clone()))
                .collect()
        };
        let reads = tasks.iter().zip(known).map(|((id, _), known)| async move {
            match known {
                Some(queue) => Ok(Some(queue)),
                None => Ok::<_, Error>(self.handed_by_store(*id).await?.map(|h| h.queue)),
            }
        });
        futures::future::try_join_all(reads).await
    }

    /// What a remote outcome commits, by the attempt's options.
    fn remote_result(
        &self,
        outcome: &RemoteOutcome,
        handed: &Handed,
        now: Timestamp,
    ) -> TaskResult {
        let what = if handed.owner.is_some() {
            "activity"
        } else {
            "task"
        };
        let error = match outcome {
            RemoteOutcome::Completed(output) => {
                match output_refused(what, &handed.name, output, self.max_payload_bytes) {
                    Some(refused) => refused,
                    None => return TaskResult::Completed(output.clone()),
                }
            }
            RemoteOutcome::Cancelled => return TaskResult::Cancelled,
            RemoteOutcome::Snooze(delay) => ActivityError::snooze(*delay),
            RemoteOutcome::Failed { error, retryable } => ActivityError {
                info: error.clone(),
                retryable: *retryable,
                snooze: None,
            },
        };
        after_failure(error, &handed.options, handed.attempt, now)
    }

    /// An attempt as the store holds it, for an end this process did not hand out.
    async fn handed_by_store(&self, id: TaskId) -> Result<Option<Handed>> {
        let now = self.calls.now().await;
        Ok(self.store.task_get(id, now).await?.map(|record| Handed {
            options: record.options,
            owner: record.owner,
            attempt: record.attempt,
            name: record.name,
            queue: record.queue,
            until: Instant::now(),
        }))
    }

    /// Ends, as an in-process worker would, attempts whose lost predecessor was the last.
    async fn end_spent(&self, spent: Vec<ClaimedTask>) -> Result<()> {
        let now = self.calls.now().await;
        let completions = spent
            .iter()
            .filter_map(|task| {
                attempts_spent(task).map(|result| {
                    let mut completion = TaskCompletion::of(task, result);
                    // The claim said max + 1 only to say the last one was lost.
                    completion.attempt = task.attempt - 1;
                    completion
                })
            })
            .collect();
        self.store.commit(completing(completions, now)).await?;
        Ok(())
    }

    /// Keeps what a failure of each claimed attempt needs, until its lease has long run out.
    fn remember(&self, claimed: &[ClaimedTask], lease: Duration) {
        let now = Instant::now();
        let until = now + lease * 2;
        let mut handed = lock(&self.remote.handed);
        if handed.len() + claimed.len() > MAX_REMEMBERED {
            handed.retain(|_, h| h.until > now);
        }
        for task in claimed {
            if handed.len() >= MAX_REMEMBERED {
                // Past the bound its end reads the task instead.
                break;
            }
            handed.insert(
                (task.id, task.fence),
                Handed {
                    options: task.options.clone(),
                    owner: task.owner.clone(),
                    attempt: task.attempt,
                    name: task.name.clone(),
                    queue: task.queue.clone(),
                    until,
                },
            );
        }
    }

    /// Says the worker is alive, at most once a third of its lease, with the names and
    /// queues of its last claim (a heartbeat carries none of its own).
    async fn remote_alive(
        &self,
        worker: &str,
        claim: Option<&RemoteClaim>,
        lease: Duration,
    ) -> Result<()> {
        let now = Instant::now();
        let said = {
            let mut alive = lock(&self.remote.alive);
            let entry = alive.get(worker).cloned();
            let about = match claim {
                Some(claim) => Some(Alive::of(claim, now)),
                None => entry.clone(),
            };
            let fresh = entry.as_ref().is_some_and(|e| {
                now.saturating_duration_since(e.at) < lease / 3
                    && about.as_ref().is_none_or(|a| a.same(e))
            });
            if fresh {
                return Ok(());
            }
            let said = about.unwrap_or_else(|| Alive {
                at: now,
                about: WorkerAbout {
                    label: Some(worker.to_string()),
                    ..WorkerAbout::default()
                },
                queues: Vec::new(),
            });
            if alive.len() >= 10_000 {
                alive.retain(|_, e| now.saturating_duration_since(e.at) < LEASE_RANGE.1);
            }
            said
        };
        let at = self.calls.now().await;
        self.store
            .worker_alive(WorkerAlive {
                owner: worker.to_string(),
                until: at.plus(lease),
                stall_grace: Duration::ZERO,
                now: at,
                queues: said.queues.clone(),
                about: said.about.clone(),
            })
            .await?;
        lock(&self.remote.alive).insert(worker.to_string(), Alive { at: now, ..said });
        Ok(())
    }
}

/// What a remote worker last said of itself, and when.
#[derive(Clone, Debug)]
pub(crate) struct Alive {
    at: Instant,
    about: WorkerAbout,
    queues: Vec<String>,
}

impl Alive {
    fn of(claim: &RemoteClaim, at: Instant) -> Self {
        let names = |runs: bool| {
            if runs {
                claim.names.clone()
            } else {
                Vec::new()
            }
        };
        Self {
            at,
            about: WorkerAbout {
                label: Some(claim.worker.clone()),
                activities: names(claim.activities > 0),
                tasks: names(!claim.queues.is_empty()),
                ..WorkerAbout::default()
            },
            queues: claim.queues.iter().map(|(q, _)| q.clone()).collect(),
        }
    }

    fn same(&self, other: &Alive) -> bool {
        self.about == other.about && self.queues == other.queues
    }
}

/// A commit of attempts' ends alone.
fn completing(completions: Vec<TaskCompletion>, now: Timestamp) -> CommitBatch {
    CommitBatch {
        starts: Vec::new(),
        turns: Vec::new(),
        completions,
        task_lease: None,
        task_capacity: 0,
        lock_instances: Vec::new(),
        instance_lease: None,
        now,
    }
}

fn check_worker(worker: &str) -> Result<()> {
    Ok(ratchet_core::limits::check_identifier(
        "worker", worker, 200,
    )?)
}

fn check_lease(lease: Duration) -> Result<()> {
    if lease < LEASE_RANGE.0 || lease > LEASE_RANGE.1 {
        return Err(Error::InvalidInput(format!(
            "a lease must be from 1 s to 1 h, got {} ms",
            lease.as_millis()
        )));
    }
    Ok(())
}

fn check_claim(claim: &RemoteClaim) -> Result<()> {
    check_worker(&claim.worker)?;
    check_lease(claim.lease)?;
    if claim.names.is_empty() || claim.names.len() > MAX_NAMES {
        return Err(Error::InvalidInput(format!(
            "a claim names 1 to {MAX_NAMES} tasks or activities it runs, got {}",
            claim.names.len()
        )));
    }
    for name in &claim.names {
        validate_name("task", name)?;
    }
    if claim.queues.len() > MAX_NAMES {
        return Err(Error::InvalidInput(format!(
            "a claim takes from at most {MAX_NAMES} queues"
        )));
    }
    for (queue, _) in &claim.queues {
        validate_queue_name(queue).map_err(|e| Error::InvalidInput(e.to_string()))?;
    }
    let total = claim
        .queues
        .iter()
        .map(|(_, limit)| u64::from(*limit))
        .sum::<u64>()
        + u64::from(claim.activities);
    if total == 0 || total > u64::from(MAX_CLAIM) {
        return Err(Error::InvalidInput(format!(
            "a claim takes 1 to {MAX_CLAIM} attempts in all, got {total}"
        )));
    }
    Ok(())
}
