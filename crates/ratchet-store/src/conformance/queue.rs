//! Standalone tasks and their queues.

use std::time::Duration;

use ratchet_core::{ErrorInfo, TaskOptions};
use serde_json::json;

use super::*;
use crate::{
    ClaimedTask, CompletionResult, EnqueueOutcome, InstanceClaimed, LeaseRelease, LeaseState,
    QueueClaim, QueueLimits, QueueStats, QueueUpdate, TaskAction, TaskActionOutcome, TaskClaim,
    TaskCompletion, TaskFilter, TaskId, TaskResult, TaskState,
};

fn job(n: i64) -> NewTask {
    NewTask::standalone(
        "job".into(),
        json!(n),
        &TaskOptions::default().queue("q"),
        T0,
    )
}

fn job_with(n: i64, options: TaskOptions) -> NewTask {
    NewTask::standalone("job".into(), json!(n), &options.queue("q"), T0)
}

async fn enqueue(store: &dyn Store, tasks: Vec<NewTask>) -> Vec<TaskId> {
    store
        .task_enqueue(tasks, T0)
        .await
        .unwrap()
        .into_iter()
        .map(EnqueueOutcome::id)
        .collect()
}

/// A claim of up to `limit` tasks of queue "q" for `owner`, leased for 30 s.
fn claim_of(owner: &str, limit: u32, now: Timestamp) -> TaskClaim {
    TaskClaim {
        lease: lease(owner, now.plus(Duration::from_secs(30))),
        queues: vec![QueueClaim {
            queue: "q".into(),
            limit,
        }],
        names: vec!["job".into()],
        now,
    }
}

async fn take(store: &dyn Store, owner: &str, limit: u32, now: Timestamp) -> Vec<ClaimedTask> {
    store.task_claim(claim_of(owner, limit, now)).await.unwrap()
}

/// A worker's poll at T0 that claims no instances and up to 10 tasks of queue "q".
async fn poll_tasks(store: &dyn Store) -> InstanceClaimed {
    store
        .instance_claim(InstanceClaim {
            lease: lease("w", T0.plus(Duration::from_secs(30))),
            limit: 0,
            orchestrations: vec![],
            now: T0,
            tasks: Some(claim_of("w", 10, T0)),
        })
        .await
        .unwrap()
}

async fn finish(store: &dyn Store, task: &ClaimedTask, result: TaskResult) -> CompletionResult {
    let mut b = batch(vec![]);
    b.now = T0;
    b.completions = vec![TaskCompletion::of(task, result)];
    store.commit(b).await.unwrap().completions[0]
}

async fn state(store: &dyn Store, id: TaskId, now: Timestamp) -> Option<TaskState> {
    store.task_get(id, now).await.unwrap().map(|r| r.state)
}

pub async fn tasks_run_and_leave_the_hot_table(store: &dyn Store) {
    let meta = json!({ "tenant": "acme" });
    let ids = enqueue(
        store,
        vec![
            job(1),
            job_with(2, TaskOptions::default().metadata(meta.clone())),
            job(3),
        ],
    )
    .await;
    assert_eq!(state(store, ids[0], T0).await, Some(TaskState::Available));
    let claimed = take(store, "w", 10, T0).await;
    assert_eq!(claimed.len(), 3);
    assert!(claimed
        .iter()
        .all(|t| t.owner.is_none() && t.attempt == 1 && t.queue == "q"));
    assert_eq!(claimed[1].metadata, Some(meta));
    assert_eq!(state(store, ids[0], T0).await, Some(TaskState::Running));
    assert_eq!(
        finish(store, &claimed[0], TaskResult::Completed(json!("done"))).await,
        CompletionResult::Applied
    );
    assert_eq!(
        finish(
            store,
            &claimed[1],
            TaskResult::Failed(ErrorInfo::new("Bad", "no"))
        )
        .await,
        CompletionResult::Applied
    );
    let done = store.task_get(ids[0], T0).await.unwrap().unwrap();
    assert_eq!(
        (done.state, done.output, done.finished_at),
        (TaskState::Completed, Some(json!("done")), Some(T0))
    );
    let dead = store.task_get(ids[1], T0).await.unwrap().unwrap();
    assert_eq!(dead.state, TaskState::Dead);
    assert_eq!(dead.error, Some(ErrorInfo::new("Bad", "no")));
    assert_eq!(dead.input, json!(2));
    // A stale completion of a finished task is refused.
    assert_eq!(
        finish(store, &claimed[0], TaskResult::Completed(json!("again"))).await,
        CompletionResult::Stale
    );
    assert!(
        take(store, "w", 10, T0.plus(Duration::from_secs(60)))
            .await
            .iter()
            .all(|t| t.id == ids[2]),
        "finished tasks are never claimed again"
    );
}

pub async fn tasks_run_by_priority_then_time(store: &dyn Store) {
    let later = TaskOptions::default().run_at(T0.plus(Duration::from_millis(5)));
    let ids = enqueue(
        store,
        vec![
            job_with(1, TaskOptions::default().priority(5)),
            job_with(2, later.clone()),
            job(3),
            job_with(4, TaskOptions::default().priority(-1)),
            job_with(5, later.priority(-2)),
        ],
    )
    .await;
    let now = T0.plus(Duration::from_millis(10));
    let order: Vec<TaskId> = take(store, "w", 10, now)
        .await
        .iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(order, vec![ids[4], ids[3], ids[2], ids[1], ids[0]]);
}

pub async fn delayed_tasks_wait_for_their_time(store: &dyn Store) {
    let at = T0.plus(Duration::from_secs(5));
    let ids = enqueue(store, vec![job_with(1, TaskOptions::default().run_at(at))]).await;
    assert_eq!(state(store, ids[0], T0).await, Some(TaskState::Scheduled));
    assert!(take(store, "w", 10, T0).await.is_empty());
    let polled = poll_tasks(store).await;
    assert!(polled.tasks.is_empty());
    assert_eq!(
        polled.next_due,
        Some(at),
        "the poll says when to look again"
    );
    assert_eq!(take(store, "w", 10, at).await.len(), 1);
}

pub async fn unique_keys_hold_until_the_task_finishes(store: &dyn Store) {
    let keyed = || job_with(1, TaskOptions::default().unique_key("k"));
    let first = store.task_enqueue(vec![keyed()], T0).await.unwrap()[0];
    let EnqueueOutcome::Enqueued(id) = first else {
        panic!("{first:?}")
    };
    let again = store
        .task_enqueue(vec![keyed(), keyed(), job(2)], T0)
        .await
        .unwrap();
    assert_eq!(again[0], EnqueueOutcome::Duplicate(id));
    assert_eq!(again[1], EnqueueOutcome::Duplicate(id));
    assert!(matches!(again[2], EnqueueOutcome::Enqueued(_)));
    let fresh = store
        .task_enqueue(
            vec![
                job_with(3, TaskOptions::default().unique_key("new")),
                job_with(4, TaskOptions::default().unique_key("new")),
            ],
            T0,
        )
        .await
        .unwrap();
    assert!(matches!(fresh[0], EnqueueOutcome::Enqueued(_)));
    assert_eq!(
        fresh[1],
        EnqueueOutcome::Duplicate(fresh[0].id()),
        "one batch, one key"
    );
    let claimed = take(store, "w", 10, T0).await;
    let holder = claimed.iter().find(|t| t.id == id).unwrap();
    finish(store, holder, TaskResult::Completed(json!(null))).await;
    assert!(
        matches!(
            store.task_enqueue(vec![keyed()], T0).await.unwrap()[0],
            EnqueueOutcome::Enqueued(new) if new != id
        ),
        "a finished task frees its key"
    );
}

pub async fn retries_and_snoozes(store: &dyn Store) {
    let ids = enqueue(store, vec![job(1)]).await;
    let t = take(store, "w", 1, T0).await.remove(0);
    let at = T0.plus(Duration::from_secs(2));
    finish(
        store,
        &t,
        TaskResult::Retry {
            error: ErrorInfo::new("Flaky", "x"),
            at,
        },
    )
    .await;
    let rec = store.task_get(ids[0], T0).await.unwrap().unwrap();
    assert_eq!((rec.state, rec.attempt), (TaskState::Retrying, 2));
    assert_eq!(rec.error, Some(ErrorInfo::new("Flaky", "x")));
    assert!(take(store, "w", 1, T0).await.is_empty());
    let t = take(store, "w", 1, at).await.remove(0);
    assert_eq!(t.attempt, 2);
    let later = at.plus(Duration::from_secs(2));
    finish(store, &t, TaskResult::Snooze { at: later }).await;
    assert!(
        take(store, "w", 1, at).await.is_empty(),
        "snoozed until later"
    );
    let t = take(store, "w", 1, later).await.remove(0);
    assert_eq!(t.attempt, 2, "a snooze spends no attempt");
}

pub async fn dead_letters_can_be_retried_or_discarded(store: &dyn Store) {
    let ids = enqueue(store, vec![job(1), job(2)]).await;
    for t in take(store, "w", 10, T0).await {
        finish(store, &t, TaskResult::Failed(ErrorInfo::new("Bad", "no"))).await;
    }
    let out = store
        .task_act(vec![ids[0], TaskId(999_999)], TaskAction::Retry, T0)
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![TaskActionOutcome::Done, TaskActionOutcome::NotFound]
    );
    let rec = store.task_get(ids[0], T0).await.unwrap().unwrap();
    assert_eq!(
        (rec.state, rec.attempt),
        (TaskState::Available, 1),
        "a fresh budget"
    );
    assert_eq!(
        store
            .task_act(vec![ids[0]], TaskAction::Retry, T0)
            .await
            .unwrap(),
        vec![TaskActionOutcome::Refused(TaskState::Available)],
        "only finished tasks are retried"
    );
    assert_eq!(
        store
            .task_act(vec![ids[0]], TaskAction::Discard, T0)
            .await
            .unwrap(),
        vec![TaskActionOutcome::Refused(TaskState::Available)],
        "only finished tasks are discarded"
    );
    let again = take(store, "w", 10, T0).await;
    assert_eq!(
        again.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![ids[0]],
        "same id"
    );
    assert_eq!(
        store
            .task_act(vec![ids[1]], TaskAction::Discard, T0)
            .await
            .unwrap(),
        vec![TaskActionOutcome::Done]
    );
    assert_eq!(store.task_get(ids[1], T0).await.unwrap(), None);
}

pub async fn tasks_can_be_cancelled_waiting_or_running(store: &dyn Store) {
    let ids = enqueue(store, vec![job(1), job(2), job(3)]).await;
    assert_eq!(
        store
            .task_act(vec![ids[0]], TaskAction::Cancel, T0)
            .await
            .unwrap(),
        vec![TaskActionOutcome::Done]
    );
    assert_eq!(state(store, ids[0], T0).await, Some(TaskState::Cancelled));
    let running = take(store, "w", 10, T0).await;
    assert_eq!(running.len(), 2, "a cancelled task never starts");
    assert_eq!(
        store
            .task_act(vec![ids[1]], TaskAction::Cancel, T0)
            .await
            .unwrap(),
        vec![TaskActionOutcome::Requested]
    );
    let beat = store
        .task_heartbeat(
            running.iter().map(|t| (t.id, t.fence)).collect(),
            T0.plus(Duration::from_secs(30)),
        )
        .await
        .unwrap();
    assert_eq!(beat, vec![LeaseState::CancelRequested, LeaseState::Kept]);
    finish(store, &running[0], TaskResult::Cancelled).await;
    assert_eq!(state(store, ids[1], T0).await, Some(TaskState::Cancelled));
    // A running task whose worker is gone (lease expired) is cancelled at once.
    let gone = T0.plus(Duration::from_secs(60));
    assert_eq!(
        store
            .task_act(vec![ids[2]], TaskAction::Cancel, gone)
            .await
            .unwrap(),
        vec![TaskActionOutcome::Done]
    );
    assert!(take(store, "w", 10, gone).await.is_empty());
    assert_eq!(
        store
            .task_act(vec![ids[2]], TaskAction::Cancel, gone)
            .await
            .unwrap(),
        vec![TaskActionOutcome::Refused(TaskState::Cancelled)]
    );
}

/// Every path that makes a task claimable again (a snooze, a release, a retry by hand of a
/// dead or cancelled task) fences off the lease it had: a late completion carrying that
/// lease is refused instead of finishing the re-armed task.
pub async fn late_completions_after_a_rearm_are_refused(store: &dyn Store) {
    let ids = enqueue(store, vec![job(1), job(2), job(3)]).await;
    let held = take(store, "w", 3, T0).await;
    assert_eq!(held.len(), 3);
    // Snoozed: claimable again later, the same attempt.
    let later = T0.plus(Duration::from_secs(1));
    assert_eq!(
        finish(store, &held[0], TaskResult::Snooze { at: later }).await,
        CompletionResult::Applied
    );
    assert_eq!(
        finish(store, &held[0], TaskResult::Completed(json!("late"))).await,
        CompletionResult::Stale,
        "a second completion of the snoozed attempt"
    );
    // Released (a worker shutting down): claimable at once.
    store
        .lease_release(LeaseRelease {
            instances: vec![],
            tasks: vec![(held[1].id, held[1].fence)],
            now: later,
        })
        .await
        .unwrap();
    assert_eq!(
        finish(store, &held[1], TaskResult::Completed(json!("late"))).await,
        CompletionResult::Stale,
        "a completion of a released attempt"
    );
    // Cancelled while its worker was out of touch, then retried by hand.
    store
        .task_act(vec![ids[2]], TaskAction::Cancel, T0)
        .await
        .unwrap();
    let gone = T0.plus(Duration::from_secs(60));
    assert!(take(store, "w", 3, gone).await.len() <= 2);
    assert_eq!(state(store, ids[2], gone).await, Some(TaskState::Cancelled));
    assert_eq!(
        store
            .task_act(vec![ids[2]], TaskAction::Retry, gone)
            .await
            .unwrap(),
        vec![TaskActionOutcome::Done]
    );
    assert_eq!(
        finish(store, &held[2], TaskResult::Completed(json!("late"))).await,
        CompletionResult::Stale,
        "a completion from before the retry"
    );
    let rec = store.task_get(ids[2], gone).await.unwrap().unwrap();
    assert_eq!((rec.state, rec.output), (TaskState::Available, None));
}

/// `owner` is alive until `until`, keeping its expired leases for 10 minutes.
fn alive(owner: &str, until: Timestamp, now: Timestamp) -> crate::WorkerAlive {
    crate::WorkerAlive {
        owner: owner.into(),
        until,
        stall_grace: Duration::from_secs(600),
        now,
        queues: vec!["q".into()],
        about: crate::WorkerAbout {
            label: Some(format!("label of {owner}")),
            tasks: vec!["t".into()],
            ..Default::default()
        },
    }
}

/// The processes that say they are alive are listed with what they said of themselves; one
/// that says it is gone is not.
pub async fn workers_are_listed_with_what_they_run(store: &dyn Store) {
    store
        .worker_alive(alive("a", Timestamp(T0.0 + 60_000), T0))
        .await
        .unwrap();
    let later = Timestamp(T0.0 + 5);
    store
        .worker_alive(alive("b", Timestamp(T0.0 + 60_000), later))
        .await
        .unwrap();
    let listed = store.worker_list().await.unwrap();
    assert_eq!(
        listed.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
        vec!["b", "a"],
        "most recently seen first"
    );
    assert_eq!(listed[1].about.label.as_deref(), Some("label of a"));
    assert_eq!(listed[1].about.tasks, vec!["t".to_string()]);
    assert_eq!((listed[1].started_at, listed[0].seen_at), (T0, later));
    assert_eq!(listed[0].queues, vec!["q".to_string()]);
    store.worker_gone("a").await.unwrap();
    let left = store.worker_list().await.unwrap();
    assert_eq!(left.len(), 1);
}

/// A claim says how many of the instances and tasks it leased it took over from an expired
/// lease (the figure operators page on: work of crashed processes), and counts no others.
pub async fn claims_count_the_expired_leases_they_take_over(store: &dyn Store) {
    enqueue(store, vec![job(1), job(2)]).await;
    start(store, "i").await;
    let poll = |owner: &'static str, tasks: u32, now: Timestamp| {
        store.instance_claim(InstanceClaim {
            lease: lease(owner, now.plus(Duration::from_secs(30))),
            limit: 10,
            orchestrations: registered(&["wf"]),
            now,
            tasks: Some(claim_of(owner, tasks, now)),
        })
    };
    let first = poll("w1", 1, T0).await.unwrap();
    assert_eq!((first.instances.len(), first.tasks.len()), (1, 1));
    assert_eq!(first.taken_over, 0, "nothing was leased before");
    // w1 dies holding both leases; a minute later w2 takes them over, and the free task.
    let second = poll("w2", 10, T0.plus(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!((second.instances.len(), second.tasks.len()), (1, 2));
    assert_eq!(
        second.taken_over, 2,
        "the instance and one task were taken over; the other task was free"
    );
}

/// An expired lease of a process that says it is alive is not taken over (a database stall
/// kept it from renewing); once the process stops saying so, or says it is gone, it is.
pub async fn live_owners_keep_their_expired_leases(store: &dyn Store) {
    enqueue(store, vec![job(1), job(2)]).await;
    let held = take(store, "w1", 1, T0).await;
    assert_eq!(held.len(), 1);
    let alive_until = T0.plus(Duration::from_secs(120));
    store
        .worker_alive(alive("w1", alive_until, T0))
        .await
        .unwrap();
    let later = T0.plus(Duration::from_secs(60));
    let taken = take(store, "w2", 10, later).await;
    assert_eq!(
        taken.iter().map(|t| t.attempt).collect::<Vec<_>>(),
        [1],
        "only the free task, not w1's expired lease"
    );
    let after = alive_until.plus(Duration::from_secs(1));
    let taken = take(store, "w3", 10, after).await;
    assert!(
        taken.iter().any(|t| (t.id, t.attempt) == (held[0].id, 2)),
        "w1 stopped saying it is alive: its lease is taken over: {taken:?}"
    );
    store
        .worker_alive(alive("w3", after.plus(Duration::from_secs(600)), after))
        .await
        .unwrap();
    let much_later = after.plus(Duration::from_secs(60));
    assert!(
        take(store, "w4", 10, much_later).await.is_empty(),
        "w3 is alive"
    );
    store.worker_gone("w3").await.unwrap();
    let gone = take(store, "w4", 10, much_later).await;
    assert_eq!(
        gone.len(),
        taken.len(),
        "w3 is gone: its leases are taken over"
    );
    // A lease its live owner has not renewed for longer than its grace (it does not know it
    // holds it) is taken over too.
    let forever = much_later.plus(Duration::from_secs(100_000));
    store
        .worker_alive(alive("w4", forever, much_later))
        .await
        .unwrap();
    let past_grace = much_later.plus(Duration::from_secs(30 + 601));
    assert_eq!(
        take(store, "w5", 10, past_grace).await.len(),
        gone.len(),
        "past its grace, a live owner's expired lease is taken over"
    );
    // Instances the same way.
    start(store, "i").await;
    let c = claim(store, "p1", T0).await;
    assert_eq!(c.len(), 1);
    store
        .worker_alive(alive("p1", alive_until, T0))
        .await
        .unwrap();
    store
        .signal_raise(vec![crate::NewSignal {
            instance: "i".into(),
            name: "s".into(),
            payload: json!(1),
            dedup_id: None,
        }])
        .await
        .unwrap();
    assert!(claim(store, "p2", later).await.is_empty(), "p1 is alive");
    assert_eq!(claim(store, "p2", after).await.len(), 1, "p1 is not");
}

pub async fn paused_queues_start_nothing(store: &dyn Store) {
    enqueue(store, vec![job(1)]).await;
    let pause = |paused| QueueUpdate {
        queue: "q".into(),
        paused: Some(paused),
        limits: None,
    };
    store.queue_update(pause(true)).await.unwrap();
    assert!(take(store, "w", 10, T0).await.is_empty());
    let stats = store.queue_stats(T0).await.unwrap();
    let q = stats.iter().find(|s| s.queue == "q").unwrap();
    assert!(q.paused);
    assert_eq!(q.count(TaskState::Available), 1);
    store.queue_update(pause(false)).await.unwrap();
    assert_eq!(take(store, "w", 10, T0).await.len(), 1);
}

pub async fn queue_concurrency_holds_across_claimers(store: &dyn Store) {
    enqueue(store, (0..6).map(job).collect()).await;
    store
        .queue_update(QueueUpdate {
            queue: "q".into(),
            paused: None,
            limits: Some(QueueLimits {
                concurrency: Some(2),
                ..QueueLimits::default()
            }),
        })
        .await
        .unwrap();
    let a = take(store, "a", 10, T0).await;
    assert_eq!(a.len(), 2);
    assert!(
        take(store, "b", 10, T0).await.is_empty(),
        "the limit is shared"
    );
    finish(store, &a[0], TaskResult::Completed(json!(null))).await;
    assert_eq!(take(store, "b", 10, T0).await.len(), 1);
    // Expired leases no longer count as running.
    assert_eq!(
        take(store, "c", 10, T0.plus(Duration::from_secs(60)))
            .await
            .len(),
        2
    );
}

pub async fn queue_rate_limit_spends_tokens(store: &dyn Store) {
    enqueue(store, (0..10).map(job).collect()).await;
    store
        .queue_update(QueueUpdate {
            queue: "q".into(),
            paused: None,
            limits: Some(QueueLimits {
                rate_per_second: Some(10.0),
                burst: Some(2),
                concurrency: None,
            }),
        })
        .await
        .unwrap();
    assert_eq!(take(store, "a", 10, T0).await.len(), 2, "the burst");
    assert!(take(store, "b", 10, T0).await.is_empty(), "no tokens left");
    let polled = poll_tasks(store).await;
    assert_eq!(
        polled.next_due,
        Some(T0.plus(Duration::from_millis(100))),
        "the poll says when the next token comes"
    );
    assert_eq!(
        take(store, "b", 10, T0.plus(Duration::from_millis(100)))
            .await
            .len(),
        1
    );
    assert_eq!(
        take(store, "b", 10, T0.plus(Duration::from_secs(10)))
            .await
            .len(),
        2,
        "tokens never exceed the burst"
    );
    let stats = store.queue_stats(T0).await.unwrap();
    let q = stats.iter().find(|s| s.queue == "q").unwrap();
    assert_eq!(q.limits.rate_per_second, Some(10.0));
    assert_eq!(q.limits.burst, Some(2));
}

pub async fn queue_stats_and_task_lists(store: &dyn Store) {
    let later = TaskOptions::default().run_at(T0.plus(Duration::from_secs(60)));
    let ids = enqueue(store, vec![job(1), job(2), job(3), job_with(4, later)]).await;
    let other = NewTask::standalone(
        "mail".into(),
        json!(0),
        &TaskOptions::default().queue("r"),
        T0,
    );
    store.task_enqueue(vec![other], T0).await.unwrap();
    let t = take(store, "w", 2, T0).await;
    finish(store, &t[0], TaskResult::Completed(json!(1))).await;
    let stats = store.queue_stats(T0).await.unwrap();
    let q = stats.iter().find(|s| s.queue == "q").unwrap();
    assert_eq!(
        (
            q.count(TaskState::Available),
            q.count(TaskState::Running),
            q.count(TaskState::Scheduled),
            q.count(TaskState::Completed)
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(q.depth(), 2);
    assert_eq!(q.oldest_available, Some(T0), "job 3 waits since T0");
    assert!(stats
        .iter()
        .any(|s| s.queue == "r" && s.count(TaskState::Available) == 1));
    let list = |filter: TaskFilter| async move { store.task_list(filter, T0).await.unwrap() };
    assert_eq!(list(TaskFilter::default()).await.len(), 5);
    let in_q = list(TaskFilter {
        queue: Some("q".into()),
        ..TaskFilter::default()
    })
    .await;
    assert_eq!(
        in_q.iter().map(|r| r.id).collect::<Vec<_>>(),
        vec![ids[3], ids[2], ids[1], ids[0]],
        "newest first"
    );
    let done = list(TaskFilter {
        states: vec![TaskState::Completed, TaskState::Scheduled],
        ..TaskFilter::default()
    })
    .await;
    assert_eq!(done.len(), 2);
    let named = list(TaskFilter {
        name: Some("mail".into()),
        limit: Some(1),
        ..TaskFilter::default()
    })
    .await;
    assert_eq!(named.len(), 1);
    // A queue whose only task is delayed has nothing waiting until its time comes.
    let at = T0.plus(Duration::from_secs(60));
    let delayed = NewTask::standalone(
        "job".into(),
        json!(0),
        &TaskOptions::default().queue("s").run_at(at),
        T0,
    );
    store.task_enqueue(vec![delayed], T0).await.unwrap();
    let oldest = |stats: Vec<QueueStats>| {
        stats
            .into_iter()
            .find(|s| s.queue == "s")
            .map(|s| s.oldest_available)
    };
    assert_eq!(oldest(store.queue_stats(T0).await.unwrap()), Some(None));
    let after = at.plus(Duration::from_secs(5));
    assert_eq!(
        oldest(store.queue_stats(after).await.unwrap()),
        Some(Some(at)),
        "ready since its time, 5 s behind"
    );
}

pub async fn task_purge_removes_old_results(store: &dyn Store) {
    let ids = enqueue(store, vec![job(1), job(2)]).await;
    let t = take(store, "w", 1, T0).await.remove(0);
    finish(store, &t, TaskResult::Completed(json!(1))).await;
    assert_eq!(
        store.task_purge(T0).await.unwrap(),
        0,
        "finished exactly at the cut-off stays"
    );
    assert_eq!(
        store
            .task_purge(T0.plus(Duration::from_millis(1)))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.task_get(t.id, T0).await.unwrap(), None);
    assert!(
        store.task_get(ids[1], T0).await.unwrap().is_some(),
        "unfinished tasks stay"
    );
}

pub async fn bulk_enqueue_is_one_round_trip(store: &dyn Store) {
    enqueue(store, vec![job(0)]).await;
    let before = store.stats();
    let ids = enqueue(store, (1..=1000).map(job).collect()).await;
    let after = store.stats();
    assert_eq!(ids.len(), 1000);
    assert_eq!(after.round_trips - before.round_trips, 1);
    assert_eq!(after.commits - before.commits, 1);
    assert_eq!(take(store, "w", 2000, T0).await.len(), 1001);
}

pub async fn turns_enqueue_standalone_tasks_once(store: &dyn Store) {
    start(store, "a").await;
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::Running);
    let keyed = TaskOptions::default().queue("q").unique_key("from-a");
    t.tasks = vec![
        NewTask::standalone("job".into(), json!(1), &keyed, T0),
        activity("a", 0),
    ];
    let mut b = batch(vec![t]);
    b.task_lease = Some(lease("p", T0.plus(Duration::from_secs(30))));
    b.task_capacity = 10;
    let r = store.commit(b).await.unwrap();
    let crate::TurnResult::Committed { tasks } = &r.turns[0] else {
        panic!("{r:?}")
    };
    assert_eq!(
        tasks.iter().map(|t| t.queue.as_str()).collect::<Vec<_>>(),
        vec![crate::ACTIVITY_QUEUE],
        "only the activity is leased to the committer"
    );
    let queued = take(store, "w", 10, T0).await;
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].input, json!(1));
    assert!(queued[0].owner.is_none());
    let dup = store
        .task_enqueue(
            vec![NewTask::standalone("job".into(), json!(2), &keyed, T0)],
            T0,
        )
        .await
        .unwrap();
    assert_eq!(dup, vec![EnqueueOutcome::Duplicate(queued[0].id)]);
}

/// Tasks whose enqueue committed long after its time (a large enqueue, a slow transaction)
/// are claimed by the next claims, even though claims at later times found the queue empty
/// meanwhile. A store that pushes wake-ups may take until the wake-up arrives.
pub async fn a_late_commit_behind_earlier_claims_is_claimed(store: &dyn Store) {
    enqueue(store, vec![job(0)]).await;
    assert_eq!(take(store, "w", 10, T0).await.len(), 1);
    let later = T0.plus(Duration::from_secs(5));
    assert!(take(store, "w", 10, later).await.is_empty());
    let mut wakeups = store.wakeups();
    if let Some(w) = wakeups.as_mut() {
        w.work.borrow_and_update();
    }
    // Written at T0 + 100 ms; its commit is seen only after the claim at T0 + 5 s.
    let written_at = T0.plus(Duration::from_millis(100));
    let late: Vec<NewTask> = (1..=50)
        .map(|n| {
            NewTask::standalone(
                "job".into(),
                json!(n),
                &TaskOptions::default().queue("q"),
                written_at,
            )
        })
        .collect();
    store.task_enqueue(late, written_at).await.unwrap();
    // Claims go on until the 50 are taken, each a millisecond later, waiting for a wake-up
    // (an earlier one may still arrive first) between those that find too few.
    let mut taken = 0;
    for step in 1..=200 {
        taken += take(store, "w", 20, later.plus(Duration::from_millis(step)))
            .await
            .len();
        if taken >= 50 {
            break;
        }
        if let Some(w) = wakeups.as_mut() {
            let _ = tokio::time::timeout(Duration::from_millis(100), w.work.changed()).await;
        }
    }
    assert_eq!(
        taken, 50,
        "the claims after the late commit take its 50 tasks"
    );
}
