use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ratchet::{
    EnqueueOutcome, Error, OrchestrationContext, OrchestrationError, QueueConfig, QueueLimits,
    Ratchet, RetryPolicy, RuntimeConfig, Store, TaskAction, TaskActionOutcome, TaskContext,
    TaskError, TaskFilter, TaskId, TaskOptions, TaskRequest, TaskState,
};
use serde_json::json;

use crate::harness::{fast, start, WAIT};

async fn double(_ctx: TaskContext, n: i64) -> Result<i64, TaskError> {
    Ok(n * 2)
}

fn quick_retries(attempts: u32) -> TaskOptions {
    TaskOptions::default().retry(
        RetryPolicy::default()
            .max_attempts(attempts)
            .initial_interval(Duration::from_millis(20))
            .jitter(0.5),
    )
}

async fn tasks_run_with_typed_results_and_metadata(store: Arc<dyn Store>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let r = start(&store, move |b| {
        b.task("double", double)
            .task("meta", move |ctx: TaskContext, _: ()| {
                let log = log.clone();
                async move {
                    log.lock()
                        .unwrap()
                        .push((ctx.queue().to_string(), ctx.metadata().cloned()));
                    Ok::<_, TaskError>(ctx.attempt())
                }
            })
    })
    .await;
    let c = r.client();
    let id = c.enqueue("double", 21).await.unwrap().id();
    let done = c.task_wait(id, WAIT).await.unwrap();
    assert_eq!(
        (done.state, done.output),
        (TaskState::Completed, Some(json!(42)))
    );
    assert!(done.finished_at.is_some());
    let id = c
        .enqueue_with(
            "meta",
            (),
            TaskOptions::default().metadata(json!({"tenant": 7})),
        )
        .await
        .unwrap()
        .id();
    assert_eq!(c.task_wait(id, WAIT).await.unwrap().output, Some(json!(1)));
    assert_eq!(
        seen.lock().unwrap().clone(),
        vec![("default".to_string(), Some(json!({"tenant": 7})))]
    );
    r.shutdown().await;
}

async fn bulk_enqueue_runs_each_task_once(store: Arc<dyn Store>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let r = start(&store, move |b| {
        b.task("count", move |_ctx: TaskContext, n: u32| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                Ok::<_, TaskError>(n)
            }
        })
    })
    .await;
    let c = r.client();
    let requests: Vec<TaskRequest> = (0..500)
        .map(|n| TaskRequest::new("count", n).unwrap())
        .collect();
    // (That this is one round trip is the conformance suite's `bulk_enqueue_is_one_round_trip`.)
    let outcomes = c.enqueue_many(requests).await.unwrap();
    for o in &outcomes {
        assert_eq!(
            c.task_wait(o.id(), WAIT).await.unwrap().state,
            TaskState::Completed
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 500);
    let stats = c.queues().await.unwrap();
    let default = stats.iter().find(|q| q.queue == "default").unwrap();
    assert_eq!(default.count(TaskState::Completed), 500);
    assert_eq!(default.depth(), 0);
    r.shutdown().await;
}

async fn priorities_and_delays_order_the_work(store: Arc<dyn Store>) {
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = order.clone();
    let delayed_ran = Arc::new(std::sync::Mutex::new(None));
    let delayed_ran_at = delayed_ran.clone();
    // One slot, so tasks run one after the other; paused while enqueueing, so all are
    // waiting when it starts.
    let r = start(&store, move |b| {
        b.queue_with(
            "one",
            QueueConfig {
                concurrency: 1,
                prefetch: 0,
            },
        )
        .task("log", move |_ctx: TaskContext, n: u32| {
            let log = log.clone();
            let delayed_ran_at = delayed_ran_at.clone();
            async move {
                if n == 0 {
                    *delayed_ran_at.lock().unwrap() = Some(std::time::Instant::now());
                }
                log.lock().unwrap().push(n);
                Ok::<_, TaskError>(())
            }
        })
    })
    .await;
    let c = r.client();
    c.queue_pause("one").await.unwrap();
    let on = |priority: i16| TaskOptions::default().queue("one").priority(priority);
    let enqueued = std::time::Instant::now();
    let delayed = c
        .enqueue_with("log", 0, on(-10).delay(Duration::from_millis(700)))
        .await
        .unwrap()
        .id();
    // In one call, so that they share one time: a claim woken by an earlier, separate
    // enqueue could run after the resume with a time before the later ones, and rightly take
    // what it could see.
    let requests = [(1, 5), (2, 0), (3, -1), (4, 0)]
        .into_iter()
        .map(|(n, priority)| TaskRequest::new("log", n).unwrap().options(on(priority)))
        .collect();
    c.enqueue_many(requests).await.unwrap();
    assert_eq!(c.task(delayed).await.unwrap().state, TaskState::Scheduled);
    c.queue_resume("one").await.unwrap();
    c.task_wait(delayed, WAIT).await.unwrap();
    let ran = order.lock().unwrap().clone();
    // The delayed task outranks the others once visible; when it runs among them depends on
    // how fast a loaded machine runs them, so only the others' order is fixed.
    let ready: Vec<_> = ran.iter().copied().filter(|n| *n != 0).collect();
    assert_eq!(
        ready,
        vec![3, 2, 4, 1],
        "priority first, then time: {ran:?}"
    );
    assert_eq!(ran.len(), 5, "{ran:?}");
    // Measured from the call on this host's monotonic clock: the row's `created_at` is the
    // time the merged enqueue was written, which a loaded machine can put after the time the
    // delay counts from. The delay counts on the database's clock, which this process knows
    // to within half a round trip of its last measurement: on a machine loaded with the
    // whole test suite that was seen 18 ms off, so 50 ms are allowed (a delay not held at
    // all runs within a few milliseconds of the resume).
    let waited = delayed_ran.lock().unwrap().expect("the delayed task ran") - enqueued;
    assert!(
        waited >= Duration::from_millis(650),
        "the delay holds: ran after {waited:?}"
    );
    r.shutdown().await;
}

async fn retries_then_dead_letters_then_retry_by_hand(store: Arc<dyn Store>) {
    let fail_until = Arc::new(AtomicU32::new(3));
    let limit = fail_until.clone();
    let r = start(&store, move |b| {
        b.task("flaky", move |ctx: TaskContext, _: ()| {
            let limit = limit.clone();
            async move {
                if ctx.attempt() < limit.load(Ordering::SeqCst) {
                    return Err(TaskError::new(
                        "Flaky",
                        format!("attempt {}", ctx.attempt()),
                    ));
                }
                Ok(ctx.attempt())
            }
        })
        .task("fatal", |_ctx: TaskContext, _: ()| async move {
            Err::<(), _>(TaskError::non_retryable("Fatal", "never works"))
        })
    })
    .await;
    let c = r.client();
    let ok = c
        .enqueue_with("flaky", (), quick_retries(5))
        .await
        .unwrap()
        .id();
    let done = c.task_wait(ok, WAIT).await.unwrap();
    assert_eq!(
        (done.state, done.output),
        (TaskState::Completed, Some(json!(3)))
    );
    let fatal = c
        .enqueue_with("fatal", (), quick_retries(5))
        .await
        .unwrap()
        .id();
    let dead = c.task_wait(fatal, WAIT).await.unwrap();
    assert_eq!(
        (dead.state, dead.attempt),
        (TaskState::Dead, 1),
        "non-retryable: no retry"
    );
    assert_eq!(dead.error.unwrap().kind, "Fatal");
    fail_until.store(10, Ordering::SeqCst);
    let exhausted = c
        .enqueue_with("flaky", (), quick_retries(2))
        .await
        .unwrap()
        .id();
    let dead = c.task_wait(exhausted, WAIT).await.unwrap();
    assert_eq!((dead.state, dead.attempt), (TaskState::Dead, 2));
    assert_eq!(dead.error.unwrap().message, "attempt 2");
    let listed = c
        .tasks(TaskFilter {
            states: vec![TaskState::Dead],
            ..TaskFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 2, "dead letters stay inspectable");
    // By hand: retried with a fresh budget, it now succeeds.
    fail_until.store(1, Ordering::SeqCst);
    c.task_retry(exhausted).await.unwrap();
    let done = c.task_wait(exhausted, WAIT).await.unwrap();
    assert_eq!((done.state, done.attempt), (TaskState::Completed, 1));
    assert!(matches!(
        c.task_retry(exhausted).await,
        Err(Error::TaskRefused {
            state: TaskState::Completed,
            ..
        })
    ));
    c.task_discard(fatal).await.unwrap();
    assert!(matches!(c.task(fatal).await, Err(Error::TaskNotFound(_))));
    r.shutdown().await;
}

async fn snoozing_spends_no_attempt(store: Arc<dyn Store>) {
    let visits = Arc::new(AtomicU32::new(0));
    let counted = visits.clone();
    let r = start(&store, move |b| {
        b.task("later", move |ctx: TaskContext, _: ()| {
            let counted = counted.clone();
            async move {
                if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(TaskError::snooze(Duration::from_millis(150)));
                }
                Ok(ctx.attempt())
            }
        })
    })
    .await;
    let c = r.client();
    let id = c.enqueue("later", ()).await.unwrap().id();
    let rec = c.task_wait(id, WAIT).await.unwrap();
    assert_eq!(
        visits.load(Ordering::SeqCst),
        2,
        "it ran again after its snooze"
    );
    assert_eq!(
        (rec.state, rec.output),
        (TaskState::Completed, Some(json!(1))),
        "same attempt"
    );
    assert!(rec.error.is_none(), "a snooze is no failure");
    r.shutdown().await;
}

async fn unique_keys_make_enqueue_idempotent(store: Arc<dyn Store>) {
    let gate = Arc::new(tokio::sync::Notify::new());
    let open = gate.clone();
    let r = start(&store, move |b| {
        b.task("hold", move |_ctx: TaskContext, _: ()| {
            let open = open.clone();
            async move {
                open.notified().await;
                Ok::<_, TaskError>(())
            }
        })
    })
    .await;
    let c = r.client();
    let keyed = || TaskOptions::default().unique_key("order-7");
    let first = c.enqueue_with("hold", (), keyed()).await.unwrap();
    let EnqueueOutcome::Enqueued(id) = first else {
        panic!("{first:?}")
    };
    assert_eq!(
        c.enqueue_with("hold", (), keyed()).await.unwrap(),
        EnqueueOutcome::Duplicate(id),
        "a no-op while the first is not finished"
    );
    gate.notify_one();
    c.task_wait(id, WAIT).await.unwrap();
    let again = c.enqueue_with("hold", (), keyed()).await.unwrap();
    assert!(matches!(again, EnqueueOutcome::Enqueued(other) if other != id));
    gate.notify_one();
    c.task_wait(again.id(), WAIT).await.unwrap();
    r.shutdown().await;
}

async fn cancelling_stops_waiting_and_running_tasks(store: Arc<dyn Store>) {
    let started = Arc::new(tokio::sync::Notify::new());
    let signal = started.clone();
    let finished = Arc::new(AtomicU32::new(0));
    let done = finished.clone();
    let r = start(&store, move |b| {
        b.task("long", move |_ctx: TaskContext, _: ()| {
            let signal = signal.clone();
            let done = done.clone();
            async move {
                signal.notify_one();
                tokio::time::sleep(Duration::from_secs(60)).await;
                done.fetch_add(1, Ordering::SeqCst);
                Ok::<_, TaskError>(())
            }
        })
    })
    .await;
    let c = r.client();
    let later = c
        .enqueue_with(
            "long",
            (),
            TaskOptions::default().delay(Duration::from_secs(60)),
        )
        .await
        .unwrap()
        .id();
    assert_eq!(c.task_cancel(later).await.unwrap(), TaskActionOutcome::Done);
    assert_eq!(c.task(later).await.unwrap().state, TaskState::Cancelled);
    let running = c.enqueue("long", ()).await.unwrap().id();
    started.notified().await;
    assert_eq!(
        c.task_cancel(running).await.unwrap(),
        TaskActionOutcome::Requested
    );
    let rec = c.task_wait(running, WAIT).await.unwrap();
    assert_eq!(
        rec.state,
        TaskState::Cancelled,
        "stopped at its next heartbeat"
    );
    assert_eq!(
        finished.load(Ordering::SeqCst),
        0,
        "the handler never ran to its end"
    );
    r.shutdown().await;
}

async fn queue_concurrency_holds_across_runtimes(store: Arc<dyn Store>) {
    let now = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(AtomicU32::new(0));
    let make = |now: Arc<AtomicU32>, peak: Arc<AtomicU32>| {
        move |b: ratchet::Builder| {
            b.task("busy", move |_ctx: TaskContext, _: ()| {
                let (now, peak) = (now.clone(), peak.clone());
                async move {
                    let running = now.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(running, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    Ok::<_, TaskError>(())
                }
            })
        }
    };
    let r1 = start(&store, make(now.clone(), peak.clone())).await;
    let r2 = start(&store, make(now.clone(), peak.clone())).await;
    let c = r1.client();
    c.queue_limit(
        "default",
        QueueLimits {
            concurrency: Some(2),
            ..QueueLimits::default()
        },
    )
    .await
    .unwrap();
    let ids: Vec<_> = c
        .enqueue_many(
            (0..20)
                .map(|_| TaskRequest::new("busy", ()).unwrap())
                .collect(),
        )
        .await
        .unwrap();
    for o in ids {
        assert_eq!(
            c.task_wait(o.id(), WAIT).await.unwrap().state,
            TaskState::Completed
        );
    }
    assert!(
        peak.load(Ordering::SeqCst) <= 2,
        "peak {}",
        peak.load(Ordering::SeqCst)
    );
    r1.shutdown().await;
    r2.shutdown().await;
}

async fn long_tasks_keep_their_lease(store: Arc<dyn Store>) {
    // Lease 1.5 s, heartbeat 0.3 s: a 3 s task keeps its lease, and a second runtime that
    // starts meanwhile does not take it over.
    let runs = Arc::new(AtomicU32::new(0));
    let handler = |runs: Arc<AtomicU32>, ms: u64| {
        move |b: ratchet::Builder| {
            b.task("slow", move |ctx: TaskContext, _: ()| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok::<_, TaskError>(ctx.attempt())
                }
            })
        }
    };
    let r1 = start(&store, handler(runs.clone(), 3000)).await;
    let c = r1.client();
    let id = c.enqueue("slow", ()).await.unwrap().id();
    while runs.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r2 = start(&store, handler(runs.clone(), 0)).await;
    let rec = c.task_wait(id, WAIT).await.unwrap();
    assert_eq!(
        (rec.state, rec.output),
        (TaskState::Completed, Some(json!(1)))
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "nobody took it over");
    r1.shutdown().await;
    r2.shutdown().await;
}

async fn shutdown_returns_the_prefetch_buffer(store: Arc<dyn Store>) {
    // Long leases and a long grace: only the shutdown's early release frees the buffer soon.
    // The running task ends when the test releases it, so the grace never has to expire.
    let config = RuntimeConfig {
        lease: Duration::from_secs(120),
        heartbeat: Duration::from_secs(30),
        shutdown_grace: Duration::from_secs(120),
        ..fast()
    };
    let release = Arc::new(tokio::sync::Semaphore::new(0));
    let began = Arc::new(tokio::sync::Semaphore::new(0));
    let r1 = Arc::new(
        Ratchet::builder()
            .store(store.clone())
            .config(config)
            .queue_with(
                "default",
                QueueConfig {
                    concurrency: 1,
                    prefetch: 3,
                },
            )
            .task("block", {
                let (release, began) = (release.clone(), began.clone());
                move |_ctx: TaskContext, _: ()| {
                    let (release, began) = (release.clone(), began.clone());
                    async move {
                        began.add_permits(1);
                        let _ = release.acquire().await;
                        Ok::<u32, TaskError>(0)
                    }
                }
            })
            .start()
            .await
            .unwrap(),
    );
    let c = r1.client().clone();
    c.enqueue_many(
        (0..4)
            .map(|_| TaskRequest::new("block", ()).unwrap())
            .collect(),
    )
    .await
    .unwrap();
    let count = |state: TaskState| {
        let c = c.clone();
        async move {
            let stats = c.queues().await.unwrap();
            stats
                .iter()
                .find(|q| q.queue == "default")
                .map_or(0, |q| q.count(state))
        }
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    while count(TaskState::Running).await < 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the buffer never filled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Leased is not yet running: a shutdown before the first task began would give all four
    // back and have nothing to wait for.
    tokio::time::timeout(WAIT, began.acquire())
        .await
        .expect("no task began")
        .unwrap()
        .forget();
    // One runs, three wait in the buffer. Shutting down waits for the running one, but gives
    // the buffer back first.
    let stopping = tokio::spawn({
        let r1 = r1.clone();
        async move { r1.shutdown().await }
    });
    while count(TaskState::Available).await < 3 {
        assert!(
            !stopping.is_finished(),
            "the buffer came back only with the grace expiry"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !stopping.is_finished(),
        "shutdown did not wait for the running task"
    );
    release.add_permits(1);
    stopping.await.unwrap();
}

async fn orchestrations_enqueue_tasks_exactly_once(store: Arc<dyn Store>) {
    async fn flow(ctx: OrchestrationContext, n: i64) -> Result<String, OrchestrationError> {
        ctx.enqueue_task(
            "double",
            n,
            TaskOptions::default().unique_key(format!("flow-{}", ctx.instance_id())),
        )?;
        let go: String = ctx.signal("go").await?;
        Ok(go)
    }
    let r = start(&store, |b| {
        b.orchestration("flow", flow).task("double", double)
    })
    .await;
    let h = r.client().start("flow", 5).await.unwrap();
    let id = h.id().to_string();
    while store.instance_get(&id).await.unwrap().unwrap().history_len == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    r.shutdown().await;
    // A new runtime has no cache: the next turn replays the enqueue step from history.
    let r = start(&store, |b| {
        b.orchestration("flow", flow).task("double", double)
    })
    .await;
    r.client().signal(&id, "go", "went").await.unwrap();
    let out: String = r
        .client()
        .wait(&id, WAIT)
        .await
        .unwrap()
        .into_result()
        .unwrap();
    assert_eq!(out, "went");
    let tasks = r.client().tasks(TaskFilter::default()).await.unwrap();
    assert_eq!(tasks.len(), 1, "enqueued once: {tasks:?}");
    let done = r.client().task_wait(tasks[0].id, WAIT).await.unwrap();
    assert_eq!(done.output, Some(json!(10)));
    r.shutdown().await;
}

async fn bad_task_requests_enqueue_nothing(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.task("double", double)).await;
    let c = r.client();
    assert!(matches!(c.enqueue("nope", 1).await, Err(Error::UnknownTask(n)) if n == "nope"));
    assert!(matches!(
        c.enqueue("double", "not a number").await,
        Err(Error::InvalidInput(_))
    ));
    let huge = "x".repeat(2 << 20);
    assert!(matches!(
        c.enqueue_with("double", 1, TaskOptions::default().metadata(json!(huge)))
            .await,
        Err(Error::PayloadTooLarge { .. })
    ));
    assert!(matches!(
        c.enqueue_with("double", 1, TaskOptions::default().queue("$sys"))
            .await,
        Err(Error::InvalidInput(_))
    ));
    assert!(matches!(
        c.enqueue_with("double", 1, TaskOptions::default().queue(""))
            .await,
        Err(Error::InvalidInput(_))
    ));
    let mixed = vec![
        TaskRequest::new("double", 1).unwrap(),
        TaskRequest::new("double", "bad").unwrap(),
    ];
    assert!(c.enqueue_many(mixed).await.is_err());
    assert!(
        c.tasks(TaskFilter::default()).await.unwrap().is_empty(),
        "nothing was enqueued"
    );
    assert!(matches!(
        c.queue_limit(
            "default",
            QueueLimits {
                rate_per_second: Some(-1.0),
                ..QueueLimits::default()
            }
        )
        .await,
        Err(Error::InvalidInput(_))
    ));
    r.shutdown().await;
}

async fn finished_tasks_leave_after_retention(store: Arc<dyn Store>) {
    let r = Ratchet::builder()
        .store(store.clone())
        .config(RuntimeConfig {
            task_retention: Some(Duration::ZERO),
            maintenance_interval: Duration::from_millis(100),
            ..fast()
        })
        .task("double", double)
        .start()
        .await
        .unwrap();
    let c = r.client();
    let id = c.enqueue("double", 1).await.unwrap().id();
    let deadline = tokio::time::Instant::now() + WAIT;
    while !matches!(c.task(id).await, Err(Error::TaskNotFound(_))) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the result was never purged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    r.shutdown().await;
}

/// A task enqueued in the turn that ends the instance (completed, failed, or continued as new)
/// is committed with that turn: history says it was enqueued, so it must exist and run.
async fn tasks_enqueued_by_a_finishing_turn_are_kept(store: Arc<dyn Store>) {
    async fn flow(ctx: OrchestrationContext, how: String) -> Result<String, OrchestrationError> {
        let key = format!("{how}-{}", ctx.execution());
        ctx.enqueue_task("double", 1, TaskOptions::default().unique_key(key))?;
        match how.as_str() {
            "fail" => Err(OrchestrationError::new("Boom", "failed on purpose")),
            "again" if ctx.execution() == 0 => ctx.continue_as_new("again"),
            _ => Ok(how),
        }
    }
    let r = start(&store, |b| {
        b.orchestration("flow", flow).task("double", double)
    })
    .await;
    let c = r.client();
    for how in ["complete", "fail", "again"] {
        let h = c.start("flow", how).await.unwrap();
        c.wait(h.id(), WAIT).await.unwrap();
    }
    let tasks = c.tasks(TaskFilter::default()).await.unwrap();
    let mut keys: Vec<String> = tasks
        .iter()
        .map(|t| t.unique_key.clone().unwrap_or_default())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        ["again-0", "again-1", "complete-0", "fail-0"],
        "one task per finishing turn: {tasks:?}"
    );
    for task in &tasks {
        let done = c.task_wait(task.id, WAIT).await.unwrap();
        assert_eq!(done.output, Some(json!(2)), "{done:?}");
    }
    r.shutdown().await;
}

/// Many tasks are cancelled, retried or discarded in one store call, each applied or refused
/// alone, with the outcomes in the caller's order (a task named twice gets its outcome twice).
async fn many_tasks_are_acted_on_in_one_store_call(store: Arc<dyn Store>) {
    // A client on the store alone: nothing here runs the tasks.
    let c = ratchet::Client::new(store.clone());
    let later = TaskOptions::default().delay(Duration::from_secs(600));
    let requests = (0..300)
        .map(|n| TaskRequest::new("later", n).unwrap().options(later.clone()))
        .collect();
    let ids: Vec<TaskId> = c
        .enqueue_many(requests)
        .await
        .unwrap()
        .into_iter()
        .map(EnqueueOutcome::id)
        .collect();
    // Unknown, and named twice, in no particular order.
    let mut asked: Vec<TaskId> = ids.iter().rev().copied().collect();
    asked.insert(7, TaskId(i64::MAX));
    asked.push(ids[0]);
    let before = store.stats().round_trips;
    let cancelled = c.tasks_act(&asked, TaskAction::Cancel).await.unwrap();
    let spent = store.stats().round_trips - before;
    assert!(
        spent <= 2,
        "cancelling {} tasks took {spent} round trips",
        asked.len()
    );
    assert_eq!(cancelled.len(), asked.len());
    for (id, outcome) in asked.iter().zip(&cancelled) {
        match outcome {
            Err(Error::TaskNotFound(missing)) => assert_eq!(missing, &i64::MAX),
            Ok(done) => assert_eq!(*done, TaskActionOutcome::Done, "task {id:?}"),
            Err(e) => panic!("task {id:?}: {e}"),
        }
    }
    assert_eq!(c.task(ids[42]).await.unwrap().state, TaskState::Cancelled);
    // Retried, they wait again; a waiting task cannot be discarded, a cancelled one can.
    let retried = c.tasks_act(&ids[..10], TaskAction::Retry).await.unwrap();
    assert!(retried
        .iter()
        .all(|o| matches!(o, Ok(TaskActionOutcome::Done))));
    let discarded = c.tasks_act(&ids[5..15], TaskAction::Discard).await.unwrap();
    for (n, outcome) in discarded.iter().enumerate() {
        if n < 5 {
            assert!(
                matches!(
                    outcome,
                    Err(Error::TaskRefused {
                        action: "discard",
                        ..
                    })
                ),
                "{outcome:?}"
            );
        } else {
            assert!(
                matches!(outcome, Ok(TaskActionOutcome::Done)),
                "{outcome:?}"
            );
        }
    }
    assert!(matches!(c.task(ids[10]).await, Err(Error::TaskNotFound(_))));
    assert_eq!(c.task(ids[5]).await.unwrap().state, TaskState::Available);
    assert!(c
        .tasks_act(&[], TaskAction::Cancel)
        .await
        .unwrap()
        .is_empty());
    let too_many = vec![ids[0]; 10_001];
    assert!(matches!(
        c.tasks_act(&too_many, TaskAction::Cancel).await,
        Err(Error::InvalidInput(_))
    ));
}

crate::on_every_backend!(
    many_tasks_are_acted_on_in_one_store_call,
    tasks_enqueued_by_a_finishing_turn_are_kept,
    tasks_run_with_typed_results_and_metadata,
    bulk_enqueue_runs_each_task_once,
    priorities_and_delays_order_the_work,
    retries_then_dead_letters_then_retry_by_hand,
    snoozing_spends_no_attempt,
    unique_keys_make_enqueue_idempotent,
    cancelling_stops_waiting_and_running_tasks,
    queue_concurrency_holds_across_runtimes,
    long_tasks_keep_their_lease,
    shutdown_returns_the_prefetch_buffer,
    orchestrations_enqueue_tasks_exactly_once,
    bad_task_requests_enqueue_nothing,
    finished_tasks_leave_after_retention,
);

/// The caller's own work and its tasks commit, or roll back, together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_enqueue_in_the_callers_sqlite_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tx.db");
    let store = ratchet::SqliteStore::open(&path).await.unwrap();
    let client = Ratchet::builder()
        .store(Arc::new(store.clone()))
        .task("double", double)
        .client()
        .await
        .unwrap();
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
        .unwrap();
    for commit in [false, true] {
        let tx = conn.transaction().unwrap();
        tx.execute("INSERT INTO orders DEFAULT VALUES", []).unwrap();
        let tasks = client
            .prepare_tasks(vec![TaskRequest::new("double", 2).unwrap()])
            .unwrap();
        let out = store
            .task_enqueue_in(&tx, &tasks, ratchet::Timestamp::now())
            .unwrap();
        assert!(matches!(out[0], EnqueueOutcome::Enqueued(_)));
        if commit {
            tx.commit().unwrap();
        } else {
            tx.rollback().unwrap();
        }
    }
    let orders: i64 = conn
        .query_row("SELECT count(*) FROM orders", [], |r| r.get(0))
        .unwrap();
    assert_eq!(orders, 1);
    assert_eq!(
        client.tasks(TaskFilter::default()).await.unwrap().len(),
        1,
        "the rolled-back task is gone with its order"
    );
    assert!(matches!(
        client.prepare_tasks(vec![TaskRequest::new("nope", 1).unwrap()]),
        Err(Error::UnknownTask(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_enqueue_in_the_callers_postgres_transaction() {
    use ratchet::PostgresStore;
    let Some(store) = ratchet_store_postgres::testing::fresh_store().await else {
        return;
    };
    let schema = store.config().schema.clone();
    let url = ratchet_store_postgres::testing::database_url().unwrap();
    let r = Ratchet::builder()
        .store(Arc::new(store.clone()) as Arc<dyn Store>)
        .config(fast())
        .task("double", double)
        .start()
        .await
        .unwrap();
    let (mut pg, connection) = ratchet_store_postgres::tokio_postgres::connect(
        &url,
        ratchet_store_postgres::tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(connection);
    pg.batch_execute(&format!(
        "CREATE TABLE {schema}.orders (id serial PRIMARY KEY)"
    ))
    .await
    .unwrap();
    let mut ids = Vec::new();
    for commit in [false, true] {
        let tx = pg.transaction().await.unwrap();
        tx.execute(&format!("INSERT INTO {schema}.orders DEFAULT VALUES"), &[])
            .await
            .unwrap();
        let tasks = r
            .client()
            .prepare_tasks(vec![TaskRequest::new("double", 4).unwrap()])
            .unwrap();
        let out = PostgresStore::task_enqueue_in(&store, &tx, &tasks, ratchet::Timestamp::now())
            .await
            .unwrap();
        ids.push(out[0].id());
        if commit {
            tx.commit().await.unwrap();
        } else {
            tx.rollback().await.unwrap();
        }
    }
    assert!(matches!(
        r.client().task(ids[0]).await,
        Err(Error::TaskNotFound(_))
    ));
    let done = r.client().task_wait(ids[1], WAIT).await.unwrap();
    assert_eq!(done.output, Some(json!(8)), "committed, then run");
    r.shutdown().await;
}
