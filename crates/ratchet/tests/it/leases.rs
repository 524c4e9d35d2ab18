use std::sync::Arc;
use std::time::Duration;

use ratchet::{
    ActivityContext, ActivityError, HistoryEvent, InstanceStatus, OrchestrationContext,
    OrchestrationError, Ratchet, RuntimeConfig, Store, TaskContext, TaskError, TaskOptions,
    TaskState, Timestamp,
};
use ratchet_store::{
    CommitBatch, CompletionResult, IfExists, InstanceClaim, Lease, LeaseRelease, NewInstance,
    NewSignal, NewTask, QueueClaim, Registered, TaskClaim, TaskCompletion, TaskResult,
};

use crate::harness::{fast, start, WAIT};

async fn once(ctx: OrchestrationContext, _: ()) -> Result<u32, OrchestrationError> {
    ctx.activity("work", ()).await
}

async fn a_dead_owners_lease_is_taken_over(store: Arc<dyn Store>) {
    // A process that leased the new instance and died before its first turn.
    let lease = Lease {
        owner: "dead-process".into(),
        until: Timestamp::now().plus(Duration::from_millis(700)),
    };
    let new = NewInstance {
        id: "orphan".into(),
        name: "once".into(),
        input: serde_json::json!(null),
        parent: None,
        if_exists: IfExists::Fail,
        trace: None,
    };
    store
        .instance_create(vec![new], Some(lease), Timestamp::now())
        .await
        .unwrap();
    let r = start(&store, |b| {
        b.orchestration("once", once)
            .activity("work", |ctx: ActivityContext, _: ()| async move {
                Ok::<_, ActivityError>(ctx.attempt())
            })
    })
    .await;
    let out: u32 = r
        .client()
        .wait("orphan", WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out, 1);
    r.shutdown().await;
}

async fn shutdown_releases_running_work(store: Arc<dyn Store>) {
    // A long lease: only an explicit release lets the second runtime take the activity soon.
    let long_lease = RuntimeConfig {
        lease: Duration::from_secs(120),
        heartbeat: Duration::from_secs(30),
        shutdown_grace: Duration::from_millis(200),
        ..fast()
    };
    let r1 = Ratchet::builder()
        .store(store.clone())
        .config(long_lease)
        .orchestration("once", once)
        .activity("work", |_ctx: ActivityContext, _: ()| async move {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<u32, ActivityError>(0)
        })
        .start()
        .await
        .unwrap();
    let id = r1
        .client()
        .start("once", ())
        .await
        .unwrap()
        .id()
        .to_string();
    while store.instance_get(&id).await.unwrap().unwrap().history_len == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    r1.shutdown().await;
    r1.shutdown().await; // a second shutdown is harmless
    let r2 = start(&store, |b| {
        b.orchestration("once", once)
            .activity("work", |ctx: ActivityContext, _: ()| async move {
                Ok::<_, ActivityError>(ctx.attempt())
            })
    })
    .await;
    let outcome = r2.client().wait(&id, WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Completed);
    assert_eq!(
        outcome.output,
        Some(serde_json::json!(1)),
        "a released attempt is not counted as failed"
    );
    r2.shutdown().await;
}

async fn a_completion_after_takeover_is_refused(store: Arc<dyn Store>) {
    // Heartbeats far apart, so the runtime learns of the takeover only from the refusal.
    let config = RuntimeConfig {
        lease: Duration::from_secs(20),
        heartbeat: Duration::from_secs(10),
        ..fast()
    };
    let r = Ratchet::builder()
        .store(store.clone())
        .config(config)
        .orchestration("once", once)
        .activity("work", |_ctx: ActivityContext, _: ()| async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            Ok::<u32, ActivityError>(1)
        })
        .start()
        .await
        .unwrap();
    let id = r.client().start("once", ()).await.unwrap().id().to_string();
    while store.instance_get(&id).await.unwrap().unwrap().history_len == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Another process takes the running attempt over, as if the lease had run out.
    let later = Timestamp::now().plus(Duration::from_secs(60));
    let stolen = store
        .task_claim(TaskClaim::activities(
            Lease {
                owner: "thief".into(),
                until: later.plus(Duration::from_secs(60)),
            },
            10,
            vec!["work".into()],
            later,
        ))
        .await
        .unwrap();
    assert_eq!(stolen.len(), 1, "the attempt was taken over");
    let refused = store.stats().stale_refused;
    let deadline = tokio::time::Instant::now() + WAIT;
    while store.stats().stale_refused == refused {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the late completion was never refused"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let completed = |history: &[ratchet::HistoryRecord]| {
        history
            .iter()
            .filter(|h| matches!(h.event, HistoryEvent::ActivityCompleted { .. }))
            .count()
    };
    assert_eq!(
        completed(&store.history_read(&id, None).await.unwrap()),
        0,
        "the refused completion left history unchanged"
    );
    let mut thief = CommitBatch {
        now: Timestamp::now(),
        ..CommitBatch::default()
    };
    thief.completions = vec![TaskCompletion::of(
        &stolen[0],
        TaskResult::Completed(serde_json::json!(2)),
    )];
    assert_eq!(
        store.commit(thief).await.unwrap().completions,
        vec![CompletionResult::Applied]
    );
    let out: u32 = r
        .client()
        .wait(&id, WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out, 2, "the new lease holder's result is the one recorded");
    assert_eq!(completed(&store.history_read(&id, None).await.unwrap()), 1);
    r.shutdown().await;
}

/// Claims every visible attempt named `name` of `queue` for a process that then dies: its
/// lease ran out by `at`. Returns the attempts taken.
async fn lost_worker_claims(
    store: &Arc<dyn Store>,
    queue: &str,
    name: &str,
    at: Timestamp,
) -> Vec<u32> {
    let claimed = store
        .task_claim(TaskClaim {
            lease: Lease {
                owner: "crashing-process".into(),
                until: at.plus(Duration::from_millis(1)),
            },
            queues: vec![QueueClaim {
                queue: queue.into(),
                limit: 10,
            }],
            names: vec![name.into()],
            now: at,
        })
        .await
        .unwrap();
    claimed.iter().map(|t| t.attempt).collect()
}

/// A task or activity whose worker dies on every attempt (an OOM, a segfault) is not taken
/// over forever: once its attempts are spent, the next claimer dead-letters the task, or fails
/// the activity's step, with an error that says the worker was lost, without running it.
async fn a_crash_looping_task_spends_its_attempts(store: &Arc<dyn Store>) {
    let runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
    // An instance whose first turn scheduled activity "work" (written here as a runtime would),
    // so that no process of this test holds the activity's first attempt.
    let now = Timestamp::now();
    let created = store
        .instance_create(
            vec![NewInstance {
                id: "crashy".into(),
                name: "once".into(),
                input: serde_json::json!(null),
                parent: None,
                if_exists: IfExists::Fail,
                trace: None,
            }],
            Some(Lease {
                owner: "setup".into(),
                until: now.plus(Duration::from_secs(30)),
            }),
            now,
        )
        .await
        .unwrap();
    let Some(ratchet_store::CreateOutcome::Created(Some(claimed))) = created.first().cloned()
    else {
        panic!("not created: {created:?}")
    };
    let options = ratchet::ActivityOptions::default();
    let owner = ratchet_store::TaskOwner {
        instance: "crashy".into(),
        execution: 0,
        seq: 0,
    };
    let first_turn = ratchet_store::TurnCommit {
        instance: "crashy".into(),
        fence: claimed.fence,
        incarnation: claimed.incarnation,
        execution: 0,
        version: Some(1),
        consumed: claimed.events.iter().map(|e| e.id).collect(),
        fed: Vec::new(),
        started: None,
        history_start: 0,
        history: vec![
            HistoryEvent::TurnStarted { at: now },
            HistoryEvent::ExecutionStarted {
                name: "once".into(),
                version: 1,
                input: serde_json::json!(null),
                parent: None,
                trace: None,
            },
            HistoryEvent::ActivityScheduled {
                seq: 0,
                name: "work".into(),
                input: serde_json::json!(null),
                options: options.clone(),
            },
        ],
        status: InstanceStatus::Running,
        output: None,
        error: None,
        custom_status: None,
        tasks: vec![NewTask::activity(
            "work".into(),
            serde_json::json!(null),
            options,
            owner,
            now,
        )],
        inbox: vec![],
        children: vec![],
        continue_as_new: None,
    };
    let batch = CommitBatch {
        turns: vec![first_turn],
        now,
        ..CommitBatch::default()
    };
    assert!(matches!(
        store.commit(batch).await.unwrap().turns[0],
        ratchet_store::TurnResult::Committed { .. }
    ));
    let id = "crashy".to_string();
    // Enqueued through the store: no process here registered the task.
    let enqueued = store
        .task_enqueue(
            vec![NewTask::standalone(
                "poison".into(),
                serde_json::json!(null),
                &TaskOptions::default().queue("q").max_attempts(2),
                Timestamp::now(),
            )],
            Timestamp::now(),
        )
        .await
        .unwrap()[0]
        .id();
    let mut at = Timestamp::now();
    let mut attempts = (Vec::new(), Vec::new());
    while attempts.1.len() < 3 {
        at = at.plus(Duration::from_secs(1));
        attempts
            .0
            .extend(lost_worker_claims(store, "q", "poison", at).await);
        attempts
            .1
            .extend(lost_worker_claims(store, ratchet_store::ACTIVITY_QUEUE, "work", at).await);
    }
    // The default activity policy allows 3 attempts; the task was given 2.
    assert_eq!(attempts.0[..2], [1, 2]);
    assert_eq!(attempts.1, [1, 2, 3]);
    let counter = runs.clone();
    let counter2 = runs.clone();
    let r = start(store, move |b| {
        b.orchestration("once", once)
            .activity("work", move |_ctx: ActivityContext, _: ()| {
                let counter = counter.clone();
                async move {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok::<_, ActivityError>(0u32)
                }
            })
            .task("poison", move |_ctx: TaskContext, _: ()| {
                let counter = counter2.clone();
                async move {
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok::<_, TaskError>(())
                }
            })
            .queue("q", 4)
    })
    .await;
    let dead = r.client().task_wait(enqueued, WAIT).await.unwrap();
    assert_eq!(dead.state, TaskState::Dead, "{dead:?}");
    assert_eq!(
        dead.error.as_ref().map(|e| e.kind.as_str()),
        Some("WorkerLost")
    );
    // The attempts recorded are those that ran: 2 of 2, not the takeover that found none
    // left.
    assert_eq!((dead.attempt, dead.max_attempts), (2, 2), "{dead:?}");
    let out = r.client().wait(&id, WAIT).await.unwrap();
    assert_eq!(out.status, InstanceStatus::Failed, "{out:?}");
    let error = out.error.unwrap();
    assert!(
        error.message.contains("WorkerLost") || error.message.contains("lost"),
        "{error:?}"
    );
    assert!(
        error.message.contains("after 3 attempt(s)"),
        "the step failed after the 3 attempts that ran: {error:?}"
    );
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "no body ran past its budget"
    );
    r.shutdown().await;
}

async fn crash_looping_work_spends_its_attempts(store: Arc<dyn Store>) {
    a_crash_looping_task_spends_its_attempts(&store).await;
}

/// A runtime whose host clock is `skew_ms` off the true time.
async fn skewed(
    store: &Arc<dyn Store>,
    label: &'static str,
    skew_ms: i64,
    runs: Arc<std::sync::atomic::AtomicU32>,
) -> Ratchet {
    async fn fan(ctx: OrchestrationContext, n: u32) -> Result<Vec<String>, OrchestrationError> {
        let steps = (0..n).map(|i| ctx.activity::<String>("slow", i));
        ratchet::join_all(steps).await.into_iter().collect()
    }
    let clock =
        ratchet::Clock::with_local(Arc::new(move || Timestamp(Timestamp::now().0 + skew_ms)));
    start(store, move |b| {
        b.clock(clock).orchestration("fan", fan).activity(
            "slow",
            move |_ctx: ActivityContext, _: u32| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    // Longer than a lease: only heartbeats keep it.
                    tokio::time::sleep(Duration::from_millis(2500)).await;
                    Ok::<_, ActivityError>(label.to_string())
                }
            },
        )
    })
    .await
}

/// Leases are judged on the database's clock: a process whose clock runs 20 s ahead does not
/// take over a live process's leases, and one whose clock runs 20 s behind does not write
/// leases that the others see as expired. Each activity body runs once.
async fn leases_hold_whatever_a_hosts_clock_says(
    store: &Arc<dyn Store>,
    holder_skew_ms: i64,
    other_skew_ms: i64,
) {
    let holder_runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let other_runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let holder = skewed(store, "holder", holder_skew_ms, holder_runs.clone()).await;
    let other = skewed(store, "other", other_skew_ms, other_runs.clone()).await;
    // Started by the holder's client: its runtime leases the activities eagerly.
    let out: Vec<String> = holder
        .client()
        .start("fan", 8u32)
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    let ran = |r: &Arc<std::sync::atomic::AtomicU32>| r.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        (ran(&holder_runs), ran(&other_runs)),
        (8, 0),
        "every activity ran once, in the process that held its lease: {out:?}"
    );
    other.shutdown().await;
    holder.shutdown().await;
}

async fn a_clock_running_ahead_takes_no_live_lease(store: Arc<dyn Store>) {
    leases_hold_whatever_a_hosts_clock_says(&store, 0, 20_000).await;
}

async fn a_clock_running_behind_writes_no_expired_lease(store: Arc<dyn Store>) {
    leases_hold_whatever_a_hosts_clock_says(&store, -20_000, 0).await;
}

/// A turn fed by results that finished here is refused when something claimed its instance
/// since its last turn; the results then wait in the inbox, and the runtime, which forgets
/// the execution it cached, runs the instance again from the store. Here the "something" is
/// another process, on a handle of its own that sends no notifications: while the activity
/// runs, it signals the instance, claims it and gives it back without a turn. PostgreSQL
/// only: the SQLite stores of one process on one file share their wake-ups, so a second
/// handle there cannot play a process this runtime does not hear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_fed_turn_is_run_again_from_the_store() {
    async fn poked(ctx: OrchestrationContext, _: ()) -> Result<u32, OrchestrationError> {
        let value: u32 = ctx.activity("claimed_meanwhile", ()).await?;
        Ok(value * 2)
    }
    let Some(pg) = ratchet_store_postgres::testing::fresh_store().await else {
        return;
    };
    let url = ratchet_store_postgres::testing::database_url().unwrap();
    let config = ratchet::PostgresConfig {
        schema: pg.config().schema.clone(),
        notify: false,
        ..ratchet::PostgresConfig::default()
    };
    let intruder: Arc<dyn Store> = Arc::new(
        ratchet::PostgresStore::connect_with(&url, config)
            .await
            .unwrap(),
    );
    let store: Arc<dyn Store> = Arc::new(pg);
    let runs = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = runs.clone();
    let config = RuntimeConfig {
        // Only the refusal wakes the dispatcher, not a poll.
        poll_interval: Duration::from_secs(60),
        ..fast()
    };
    let r = start(&store, move |b| {
        b.config(config).orchestration("poked", poked).activity(
            "claimed_meanwhile",
            move |ctx: ActivityContext, _: ()| {
                let (intruder, counted) = (intruder.clone(), counted.clone());
                async move {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let id = ctx.instance_id().to_string();
                    // This runtime may claim the instance for the signal first (its first
                    // poll comes late on a loaded machine): the other process then signals
                    // again once that turn has given the instance back.
                    let mut claimed = Vec::new();
                    for _ in 0..100 {
                        intruder
                            .signal_raise(vec![NewSignal {
                                instance: id.clone(),
                                name: "poke".into(),
                                payload: serde_json::json!(null),
                                dedup_id: None,
                            }])
                            .await
                            .unwrap();
                        // A moment ahead, so that the signal is visible whatever clock
                        // stamped it.
                        let now = Timestamp::now().plus(Duration::from_secs(1));
                        let lease = Lease {
                            owner: "intruder".into(),
                            until: now.plus(Duration::from_secs(60)),
                        };
                        claimed = intruder
                            .instance_claim(InstanceClaim {
                                lease,
                                limit: 10,
                                orchestrations: vec![Registered {
                                    name: "poked".into(),
                                    versions: vec![1],
                                }],
                                now,
                                tasks: None,
                            })
                            .await
                            .unwrap()
                            .instances;
                        if !claimed.is_empty() {
                            intruder
                                .lease_release(LeaseRelease {
                                    instances: vec![(id.clone(), claimed[0].fence)],
                                    tasks: Vec::new(),
                                    now,
                                })
                                .await
                                .unwrap();
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    assert_eq!(claimed.len(), 1, "the other process claimed the instance");
                    Ok::<u32, ActivityError>(21)
                }
            },
        )
    })
    .await;
    let refused = store.stats().stale_refused;
    let out: u32 = r
        .client()
        .start("poked", ())
        .await
        .unwrap()
        .wait(WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out, 42);
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the activity ran once"
    );
    assert_eq!(
        store.stats().stale_refused,
        refused + 1,
        "the fed turn was refused, and nothing else"
    );
    r.shutdown().await;
}

crate::on_every_backend!(
    a_clock_running_ahead_takes_no_live_lease,
    a_clock_running_behind_writes_no_expired_lease,
    crash_looping_work_spends_its_attempts,
    a_dead_owners_lease_is_taken_over,
    shutdown_releases_running_work,
    a_completion_after_takeover_is_refused
);

/// A session holds `LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE` for four leases' time while two
/// runtimes work a queue: their renewals and completions wait behind it, but they keep saying
/// they are alive on a connection of their own, so no lease is taken over, no task runs twice,
/// and both resume by themselves when the lock goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_lock_costs_no_lease_and_reruns_nothing() {
    use std::collections::HashMap;
    use std::sync::Mutex;
    // Calls give up after 2 s, as they would after 30 s by default: the lock outlasts them.
    let config = ratchet::PostgresConfig {
        call_timeout: Duration::from_secs(2),
        ..ratchet::PostgresConfig::default()
    };
    let Some(pg) = ratchet_store_postgres::testing::fresh_store_with(config).await else {
        return;
    };
    let schema = pg.config().schema.clone();
    let store: Arc<dyn Store> = Arc::new(pg);
    let runs: Arc<Mutex<HashMap<i64, u32>>> = Arc::default();
    let worker = |runs: Arc<Mutex<HashMap<i64, u32>>>| {
        move |ctx: TaskContext, ms: u64| {
            let runs = runs.clone();
            async move {
                *runs.lock().unwrap().entry(ctx.id()).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok::<_, TaskError>(ctx.attempt())
            }
        }
    };
    // A grace longer than the lock; a lease nobody knows it holds (a claim whose answer was
    // lost to the timeout) is taken over after it.
    let config = RuntimeConfig {
        stall_grace: Duration::from_secs(8),
        ..fast()
    };
    let (r1, r2, c1) = (runs.clone(), runs.clone(), config.clone());
    let a = start(&store, move |b| {
        b.config(c1).task("work", worker(r1)).queue("default", 8)
    })
    .await;
    let b = start(&store, move |b| {
        b.config(config)
            .task("work", worker(r2))
            .queue("default", 8)
    })
    .await;
    // The first ones run through the lock and past it; the others queue behind them.
    let requests = (0..300)
        .map(|i| ratchet::TaskRequest::new("work", if i < 8 { 9_000u64 } else { 100 }).unwrap())
        .collect();
    let ids: Vec<ratchet::TaskId> = a
        .client()
        .enqueue_many(requests)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.id())
        .collect();
    // Once work is under way, lock the table for 6 s: four times the 1.5 s lease.
    while runs.lock().unwrap().len() < 20 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let url = ratchet_store_postgres::testing::database_url().unwrap();
    let (mut locker, connection) = ratchet_store_postgres::tokio_postgres::connect(
        &url,
        ratchet_store_postgres::tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    let tx = locker.transaction().await.unwrap();
    tx.batch_execute(&format!(
        "LOCK TABLE {schema}.tasks IN ACCESS EXCLUSIVE MODE"
    ))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(6)).await;
    tx.commit().await.unwrap();
    for id in &ids {
        let done = a
            .client()
            .task_wait(*id, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(done.state, TaskState::Completed, "task {}", id.0);
    }
    let runs = runs.lock().unwrap().clone();
    let twice: Vec<_> = runs.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "tasks run more than once: {twice:?}");
    assert_eq!(runs.len(), ids.len());
    a.shutdown().await;
    b.shutdown().await;
}
