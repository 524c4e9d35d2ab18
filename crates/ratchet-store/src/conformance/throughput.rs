//! Work started and finished over time.

use std::num::NonZeroU32;
use std::time::Duration;

use ratchet_core::{ErrorInfo, TaskOptions};
use serde_json::json;

use super::*;
use crate::{
    EnqueueOutcome, QueueClaim, TaskClaim, TaskCompletion, TaskResult, ThroughputBucket,
    ThroughputQuery,
};

const MINUTE: i64 = 60_000;

fn at(minutes: i64, ms: i64) -> Timestamp {
    Timestamp(T0.0 + minutes * MINUTE + ms)
}

/// Instances started, completed and failed and tasks completed and dead land in the bucket of
/// their time (creation, or finish), each bucket from its start inclusive to the next
/// exclusive; empty buckets and everything outside the range are left out.
pub async fn throughput_counts_by_bucket(store: &dyn Store) {
    // Minute 0: a, b and c start; minute 1: d starts; minute 2 (outside a 2-minute range): e.
    for (id, when) in [
        ("a", at(0, 0)),
        ("b", at(0, 59_999)),
        ("c", at(0, 30)),
        ("d", at(1, 0)),
        ("e", at(2, 0)),
    ] {
        store
            .instance_create(vec![new_instance(id, "wf")], None, when)
            .await
            .unwrap();
    }
    let claimed = claim(store, "p", at(0, 59_999)).await;
    assert_eq!(claimed.len(), 3, "e and d are not visible yet");
    // At the end of minute 0: a completes, b fails; c runs on.
    let turns = claimed
        .iter()
        .map(|c| {
            let status = match c.id.as_str() {
                "a" => InstanceStatus::Completed,
                "b" => InstanceStatus::Failed,
                _ => InstanceStatus::Running,
            };
            let mut t = turn(c, status);
            if status == InstanceStatus::Failed {
                t.error = Some(ErrorInfo::new("Boom", "bad"));
            }
            t
        })
        .collect();
    let mut b = batch(turns);
    b.now = at(0, 59_999);
    store.commit(b).await.unwrap();
    // In minute 1: c completes; a task completes and another dies; an activity completes (not
    // counted: it belongs to its orchestration).
    store
        .signal_raise(vec![crate::NewSignal {
            instance: "c".into(),
            name: "go".into(),
            payload: json!(0),
            dedup_id: None,
        }])
        .await
        .unwrap();
    let c = claim(store, "p", at(1, 5)).await;
    let c = c.iter().find(|c| c.id == "c").unwrap();
    let mut b = batch(vec![turn(c, InstanceStatus::Completed)]);
    b.now = at(1, 5);
    store.commit(b).await.unwrap();
    let tasks = (0..3)
        .map(|n| {
            NewTask::standalone(
                "job".into(),
                json!(n),
                &TaskOptions::default().queue("q"),
                at(1, 0),
            )
        })
        .collect();
    let ids: Vec<_> = store
        .task_enqueue(tasks, at(1, 0))
        .await
        .unwrap()
        .into_iter()
        .map(EnqueueOutcome::id)
        .collect();
    assert_eq!(ids.len(), 3);
    let taken = store
        .task_claim(TaskClaim {
            lease: lease("w", at(1, 0).plus(Duration::from_secs(30))),
            queues: vec![QueueClaim {
                queue: "q".into(),
                limit: 3,
            }],
            names: vec!["job".into()],
            now: at(1, 0),
        })
        .await
        .unwrap();
    assert_eq!(taken.len(), 3);
    let mut b = batch(vec![]);
    b.now = at(1, 10);
    b.completions = vec![
        TaskCompletion::of(&taken[0], TaskResult::Completed(json!(1))),
        TaskCompletion::of(&taken[1], TaskResult::Failed(ErrorInfo::new("Bad", "no"))),
    ];
    store.commit(b).await.unwrap();
    // The third completes in minute 2, outside the range.
    let mut b = batch(vec![]);
    b.now = at(2, 1);
    b.completions = vec![TaskCompletion::of(
        &taken[2],
        TaskResult::Completed(json!(3)),
    )];
    store.commit(b).await.unwrap();

    let minute = NonZeroU32::new(60_000).unwrap();
    let read = |from: Timestamp, to: Timestamp, bucket_ms: NonZeroU32| async move {
        store
            .throughput(ThroughputQuery {
                from,
                to,
                bucket_ms,
            })
            .await
            .unwrap()
    };
    assert_eq!(
        read(at(0, 0), at(2, 0), minute).await,
        vec![
            ThroughputBucket {
                start: at(0, 0),
                instances_started: 3,
                instances_completed: 1,
                instances_failed: 1,
                ..ThroughputBucket::default()
            },
            ThroughputBucket {
                start: at(1, 0),
                instances_started: 1,
                instances_completed: 1,
                tasks_completed: 1,
                tasks_failed: 1,
                ..ThroughputBucket::default()
            },
        ]
    );
    // A range that starts inside a minute buckets from its own start; empty buckets are left
    // out.
    let shifted = read(at(0, 40), at(3, 40), minute).await;
    assert_eq!(
        shifted
            .iter()
            .map(|b| (b.start, b.instances_started, b.tasks_completed))
            .collect::<Vec<_>>(),
        vec![(at(0, 40), 2, 1), (at(1, 40), 1, 1)],
        "b and d start in the first bucket, e in the second; a task finishes in each"
    );
    assert!(read(at(5, 0), at(9, 0), minute).await.is_empty());
    assert!(
        read(at(2, 0), at(1, 0), minute).await.is_empty(),
        "an empty range"
    );
    let whole = read(at(0, 0), at(3, 0), NonZeroU32::new(180_000).unwrap()).await;
    assert_eq!(whole.len(), 1);
    assert_eq!(
        (
            whole[0].instances_started,
            whole[0].instances_completed,
            whole[0].instances_failed,
            whole[0].tasks_completed,
            whole[0].tasks_failed
        ),
        (5, 2, 1, 2, 1)
    );
}
