//! What must hold when several processes use one database at once.

use std::collections::HashSet;
use std::time::Duration;

use ratchet_core::HistoryEvent;
use serde_json::json;

use super::*;
use crate::{ClaimedTask, TaskClaim, TaskCompletion, TaskResult};

pub async fn concurrent_claims_never_share_an_instance(store: &dyn Store) {
    let news: Vec<_> = (0..40)
        .map(|i| new_instance(&format!("i{i:02}"), "wf"))
        .collect();
    store.instance_create(news, None, T0).await.unwrap();
    let claim = |owner: &'static str| async move {
        store
            .instance_claim(InstanceClaim {
                lease: lease(owner, T0.plus(Duration::from_secs(30))),
                limit: 15,
                orchestrations: registered(&["wf"]),
                now: T0,
                tasks: None,
            })
            .await
            .unwrap()
            .instances
    };
    let (a, b, c, d) = tokio::join!(claim("a"), claim("b"), claim("c"), claim("d"));
    let mut seen = HashSet::new();
    for claimed in [a, b, c, d].iter().flatten() {
        assert!(
            seen.insert(claimed.id.clone()),
            "{} leased twice",
            claimed.id
        );
    }
    let rest = claim("e").await;
    for claimed in &rest {
        assert!(
            seen.insert(claimed.id.clone()),
            "{} leased twice",
            claimed.id
        );
    }
    assert_eq!(seen.len(), 40, "every instance is claimed by someone");
}

/// Two instances, each with `n` leased activities.
async fn two_instances_with_tasks(store: &dyn Store, n: u32) -> Vec<ClaimedTask> {
    for id in ["x", "y"] {
        start(store, id).await;
    }
    for c in claim(store, "p", T0).await {
        let mut t = turn(&c, InstanceStatus::Running);
        t.tasks = (0..n).map(|seq| activity(&c.id, seq)).collect();
        store.commit(batch(vec![t])).await.unwrap();
    }
    store
        .task_claim(TaskClaim::activities(
            lease("p", T0.plus(Duration::from_secs(30))),
            100,
            vec!["act".into()],
            T0,
        ))
        .await
        .unwrap()
}

pub async fn concurrent_commits_apply_each_completion_once(store: &dyn Store) {
    let tasks = two_instances_with_tasks(store, 10).await;
    assert_eq!(tasks.len(), 20);
    // Ten batches at once, each completing one task of x and one of y, in opposite orders
    // (a backend that locks in item order would deadlock here), and each also trying one
    // completion that another batch sends too.
    let xs: Vec<_> = tasks
        .iter()
        .filter(|t| t.owner.as_ref().unwrap().instance == "x")
        .collect();
    let ys: Vec<_> = tasks
        .iter()
        .filter(|t| t.owner.as_ref().unwrap().instance == "y")
        .collect();
    let batches = (0..10).map(|i| {
        let done = |t: &ClaimedTask| {
            TaskCompletion::of(
                t,
                TaskResult::Completed(json!(t.owner.as_ref().unwrap().seq)),
            )
        };
        let mut items = vec![done(xs[i]), done(ys[i])];
        if i % 2 == 1 {
            items.reverse();
        }
        items.push(done(xs[(i + 1) % 10]));
        let mut b = batch(vec![]);
        b.completions = items;
        async move { store.commit(b).await.unwrap() }
    });
    let outcomes = futures::future::join_all(batches).await;
    let applied: usize = outcomes
        .iter()
        .flat_map(|o| &o.completions)
        .filter(|c| **c == crate::CompletionResult::Applied)
        .count();
    assert_eq!(applied, 20, "each completion applied exactly once");
    let claimed = claim(store, "q", T0).await;
    for c in claimed {
        let mut seqs: Vec<u32> = c
            .events
            .iter()
            .filter_map(|e| match e.event {
                HistoryEvent::ActivityCompleted { seq, .. } => Some(seq),
                _ => None,
            })
            .collect();
        seqs.sort_unstable();
        assert_eq!(
            seqs,
            (0..10).collect::<Vec<_>>(),
            "{}: every step once",
            c.id
        );
    }
}
