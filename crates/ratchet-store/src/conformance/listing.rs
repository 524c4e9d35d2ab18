//! What an operator's console reads: instance lists by every filter at once, paged by keyset;
//! task lists paged by keyset; an instance followed from a history position.

use std::time::Duration;

use ratchet_core::{ErrorInfo, TaskOptions};
use serde_json::{json, Value};

use super::*;
use crate::{
    EnqueueOutcome, InstanceFilter, StopOutcome, TaskClaim, TaskCompletion, TaskFilter, TaskId,
    TaskResult, TaskState,
};

/// Every page of `filter`, `limit` at a time, walked by keyset: the ids in order.
async fn walk(store: &dyn Store, filter: InstanceFilter, limit: u32) -> Vec<String> {
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .instance_list(InstanceFilter {
                limit: Some(limit),
                after: after.clone(),
                ..filter.clone()
            })
            .await
            .unwrap();
        assert!(page.len() <= limit as usize);
        let Some(last) = page.last() else { break };
        after = Some((last.created_at, last.id.clone()));
        seen.extend(page.iter().map(|r| r.id.clone()));
    }
    seen
}

/// An id prefix selects the ids that start with it, character for character (case, `_` and
/// `%` mean nothing special, and a multibyte character is one character), and every filter
/// combines with the others and with keyset pages, which never repeat or skip an instance.
pub async fn list_filters_combine_by_id_prefix_and_page_by_keyset(store: &dyn Store) {
    // Creation times in ms after T0; two pairs share a millisecond (ordered by id).
    let made = [
        ("ord-1", "wf", 0),
        ("ord-2", "wf", 10),
        ("ord-3", "child", 10),
        ("orc-1", "wf", 20),
        ("ord-4", "wf", 30),
        ("ORD-5", "wf", 40),
        ("ord_6", "wf", 50),
        ("ordx6", "wf", 50),
        ("ordé", "wf", 60),
        ("orde", "wf", 70),
    ];
    for (id, name, at) in made {
        store
            .instance_create(vec![new_instance(id, name)], None, Timestamp(T0.0 + at))
            .await
            .unwrap();
    }
    let claimed = claim(store, "p", Timestamp(T0.0 + 5000)).await;
    assert_eq!(claimed.len(), made.len());
    let turns = claimed
        .iter()
        .map(|c| {
            let status = match c.id.as_str() {
                "ord-1" => InstanceStatus::Completed,
                "ord-2" | "ord-3" | "ord-4" | "orc-1" => InstanceStatus::Failed,
                _ => InstanceStatus::Running,
            };
            let mut t = turn(c, status);
            if status == InstanceStatus::Failed {
                t.error = Some(ErrorInfo::new("Boom", "bad"));
            }
            if c.id == "ord-4" || c.id == "ord-2" {
                t.custom_status = Some(json!(c.id == "ord-4"));
            }
            t
        })
        .collect();
    store.commit(batch(turns)).await.unwrap();

    let prefix = |p: &str| InstanceFilter {
        id_prefix: Some(p.into()),
        ..InstanceFilter::default()
    };
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        walk(store, prefix("ord-"), 100).await,
        ids(&["ord-4", "ord-3", "ord-2", "ord-1"]),
        "newest first, ties by id"
    );
    assert_eq!(
        walk(store, prefix("ord"), 2).await,
        ids(&["orde", "ordé", "ordx6", "ord_6", "ord-4", "ord-3", "ord-2", "ord-1"]),
        "not ORD-5 (case matters), not orc-1"
    );
    assert_eq!(walk(store, prefix("ord_"), 1).await, ids(&["ord_6"]));
    assert_eq!(walk(store, prefix("ord%"), 1).await, Vec::<String>::new());
    assert_eq!(walk(store, prefix("ordé"), 1).await, ids(&["ordé"]));
    assert_eq!(walk(store, prefix("ord-4"), 1).await, ids(&["ord-4"]));
    assert_eq!(walk(store, prefix("ord-40"), 1).await, Vec::<String>::new());
    assert_eq!(walk(store, prefix(""), 3).await.len(), made.len());
    assert_eq!(
        walk(store, prefix("\u{10FFFF}"), 3).await,
        Vec::<String>::new()
    );

    let failed = InstanceFilter {
        statuses: vec![InstanceStatus::Failed],
        ..prefix("ord-")
    };
    assert_eq!(
        walk(store, failed.clone(), 1).await,
        ids(&["ord-4", "ord-3", "ord-2"])
    );
    let failed_wf = InstanceFilter {
        name: Some("wf".into()),
        ..failed.clone()
    };
    assert_eq!(walk(store, failed_wf, 1).await, ids(&["ord-4", "ord-2"]));
    let window = InstanceFilter {
        created_after: Some(Timestamp(T0.0 + 10)),
        created_before: Some(Timestamp(T0.0 + 30)),
        ..failed.clone()
    };
    assert_eq!(walk(store, window, 1).await, ids(&["ord-3", "ord-2"]));
    let custom = InstanceFilter {
        custom_status: Some(Value::Bool(false)),
        ..failed.clone()
    };
    assert_eq!(walk(store, custom, 1).await, ids(&["ord-2"]));
    let several = InstanceFilter {
        statuses: vec![InstanceStatus::Completed, InstanceStatus::Running],
        ..InstanceFilter::default()
    };
    assert_eq!(
        walk(store, several, 2).await,
        ids(&["orde", "ordé", "ordx6", "ord_6", "ORD-5", "ord-1"])
    );
    let everything = walk(store, InstanceFilter::default(), 3).await;
    assert_eq!(everything.len(), made.len());
    assert_eq!(everything[..3], ids(&["orde", "ordé", "ordx6"]));
}

fn task(n: i64) -> NewTask {
    NewTask::standalone(
        "job".into(),
        json!(n),
        &TaskOptions::default().queue("q"),
        T0,
    )
}

/// Task lists page by keyset on the id, across waiting, running and finished tasks, with the
/// filters applied on every page; activities are never listed.
pub async fn task_lists_page_by_keyset(store: &dyn Store) {
    start(store, "owner").await;
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::Running);
    t.tasks.push(activity("owner", 1));
    store.commit(batch(vec![t])).await.unwrap();
    let ids: Vec<TaskId> = store
        .task_enqueue((1..=5).map(task).collect(), T0)
        .await
        .unwrap()
        .into_iter()
        .map(EnqueueOutcome::id)
        .collect();
    let claimed = store
        .task_claim(TaskClaim {
            lease: lease("w", T0.plus(Duration::from_secs(30))),
            queues: vec![crate::QueueClaim {
                queue: "q".into(),
                limit: 2,
            }],
            names: vec!["job".into()],
            now: T0,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let mut b = batch(vec![]);
    b.completions = vec![TaskCompletion::of(
        &claimed[0],
        TaskResult::Completed(json!(1)),
    )];
    store.commit(b).await.unwrap();

    let walk = |filter: TaskFilter, limit: u32| async move {
        let mut seen = Vec::new();
        let mut before = None;
        loop {
            let page = store
                .task_list_before(
                    TaskFilter {
                        limit: Some(limit),
                        ..filter.clone()
                    },
                    before,
                    T0,
                )
                .await
                .unwrap();
            assert!(page.len() <= limit as usize);
            let Some(last) = page.last() else { break };
            before = Some(last.id);
            seen.extend(page.iter().map(|r| r.id));
        }
        seen
    };
    let newest_first: Vec<TaskId> = ids.iter().rev().copied().collect();
    assert_eq!(walk(TaskFilter::default(), 2).await, newest_first);
    assert_eq!(walk(TaskFilter::default(), 100).await, newest_first);
    let waiting = TaskFilter {
        states: vec![TaskState::Available],
        ..TaskFilter::default()
    };
    assert_eq!(walk(waiting, 1).await, newest_first[..3].to_vec());
    let done = TaskFilter {
        states: vec![TaskState::Completed, TaskState::Running],
        ..TaskFilter::default()
    };
    let mut finished_or_running = vec![claimed[0].id, claimed[1].id];
    finished_or_running.sort_by(|a, b| b.cmp(a));
    assert_eq!(walk(done, 1).await, finished_or_running);
    let elsewhere = TaskFilter {
        queue: Some("elsewhere".into()),
        ..TaskFilter::default()
    };
    assert!(walk(elsewhere, 1).await.is_empty());
    assert!(store
        .task_list_before(TaskFilter::default(), Some(ids[0]), T0)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .task_list(TaskFilter::default(), T0)
            .await
            .unwrap()
            .len(),
        5,
        "the list without a keyset is the first page"
    );
}

/// Following an instance reads it with the history after a position, in one round trip,
/// whether or not anything changed; a status change that records no history (terminate) is
/// seen too.
pub async fn instances_are_followed_from_a_position(store: &dyn Store) {
    assert!(store
        .instance_follow("missing", None, 10)
        .await
        .unwrap()
        .is_none());
    start(store, "a").await;
    let first = store.instance_follow("a", None, 10).await.unwrap().unwrap();
    assert_eq!(first.instance.status, InstanceStatus::Pending);
    assert!(first.history.is_empty(), "no turn yet");
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::Running);
    t.custom_status = Some(json!("step 1"));
    store.commit(batch(vec![t])).await.unwrap();
    let all = store.instance_follow("a", None, 10).await.unwrap().unwrap();
    assert_eq!(all.instance.status, InstanceStatus::Running);
    assert_eq!(all.instance.custom_status, Some(json!("step 1")));
    assert_eq!(all.history, store.history_read("a", None).await.unwrap());
    assert_eq!(all.history.len(), 2);
    let one = store.instance_follow("a", None, 1).await.unwrap().unwrap();
    assert_eq!(one.history, all.history[..1].to_vec());
    let at = |r: &crate::HistoryRecord| Some((r.execution, r.seq));
    let rest = store
        .instance_follow("a", at(&one.history[0]), 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rest.history, all.history[1..].to_vec());
    let before = store.stats();
    let idle = store
        .instance_follow("a", at(&all.history[1]), 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store.stats().round_trips - before.round_trips,
        1,
        "one round trip, idle or not"
    );
    assert!(idle.history.is_empty());
    assert_eq!(
        store.instance_terminate("a", "enough", T0).await.unwrap(),
        StopOutcome::Done
    );
    let ended = store
        .instance_follow("a", at(&all.history[1]), 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ended.instance.status, InstanceStatus::Terminated);
    assert!(ended.history.is_empty());
}
