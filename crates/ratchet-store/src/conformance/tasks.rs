use std::time::Duration;

use ratchet_core::{ErrorInfo, HistoryEvent};
use serde_json::json;

use super::*;
use crate::{CompletionResult, LeaseRelease, TaskClaim, TaskCompletion, TaskResult, TurnResult};

async fn task_claim(store: &dyn Store, owner: &str, now: Timestamp) -> Vec<crate::ClaimedTask> {
    store
        .task_claim(TaskClaim::activities(
            lease(owner, now.plus(Duration::from_secs(30))),
            100,
            vec!["act".into()],
            now,
        ))
        .await
        .unwrap()
}

/// Starts "a" and commits a first turn scheduling `n` activities, none leased.
async fn scheduled(store: &dyn Store, n: u32) {
    start(store, "a").await;
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::Running);
    t.tasks = (0..n).map(|seq| activity("a", seq)).collect();
    store.commit(batch(vec![t])).await.unwrap();
}

pub async fn eager_task_lease_respects_capacity(store: &dyn Store) {
    start(store, "a").await;
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::Running);
    t.tasks = (0..5).map(|seq| activity("a", seq)).collect();
    let mut b = batch(vec![t]);
    b.task_lease = Some(lease("p", T0.plus(Duration::from_secs(30))));
    b.task_capacity = 3;
    let r = store.commit(b).await.unwrap();
    let TurnResult::Committed { tasks } = &r.turns[0] else {
        panic!("{r:?}")
    };
    assert_eq!(tasks.len(), 3, "eager lease is bounded by free capacity");
    assert_eq!(
        tasks
            .iter()
            .map(|t| t.owner.as_ref().unwrap().seq)
            .collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert!(tasks.iter().all(|t| t.attempt == 1));
    let rest = task_claim(store, "q", T0).await;
    assert_eq!(
        rest.iter()
            .map(|t| t.owner.as_ref().unwrap().seq)
            .collect::<Vec<_>>(),
        vec![3, 4],
        "the rest is claimable by anyone"
    );
}

pub async fn completion_delivers_and_locks(store: &dyn Store) {
    scheduled(store, 2).await;
    let tasks = task_claim(store, "p", T0).await;
    assert_eq!(tasks.len(), 2);
    let mut b = batch(vec![]);
    b.completions = vec![TaskCompletion::of(
        &tasks[0],
        TaskResult::Completed(json!("r0")),
    )];
    b.lock_instances = vec!["a".into()];
    b.instance_lease = Some(lease("p", T0.plus(Duration::from_secs(30))));
    let r = store.commit(b).await.unwrap();
    assert_eq!(r.completions, vec![CompletionResult::Applied]);
    assert_eq!(
        r.locked.len(),
        1,
        "the cached instance comes back leased in the same commit"
    );
    assert_eq!(
        r.locked[0].events[0].event,
        HistoryEvent::ActivityCompleted {
            seq: 0,
            output: json!("r0")
        }
    );
    assert!(
        claim(store, "q", T0).await.is_empty(),
        "and nobody else can claim it"
    );
    // A failure for good carries the attempt count.
    let mut b = batch(vec![turn(&r.locked[0], InstanceStatus::Running)]);
    b.completions = vec![TaskCompletion::of(
        &tasks[1],
        TaskResult::Failed(ErrorInfo::new("Bad", "no")),
    )];
    store.commit(b).await.unwrap();
    let c = claim(store, "p", T0).await.remove(0);
    assert_eq!(
        c.events[0].event,
        HistoryEvent::ActivityFailed {
            seq: 1,
            error: ErrorInfo::new("Bad", "no"),
            attempts: 1
        }
    );
    assert!(
        task_claim(store, "p", T0.plus(Duration::from_secs(60)))
            .await
            .is_empty(),
        "finished tasks leave the table"
    );
}

/// A turn that ran on results still on their way (`fed`): it commits with them, consuming
/// their inbox rows at once, only when each of them is applied and the instance was not
/// claimed since its last turn; otherwise the results wait in the inbox.
pub async fn turns_fed_by_completions_commit_with_them(store: &dyn Store) {
    start(store, "a").await;
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::Running);
    t.tasks = (0..2).map(|seq| activity("a", seq)).collect();
    let mut history_len = c.history_len + u32::try_from(t.history.len()).unwrap();
    store.commit(batch(vec![t])).await.unwrap();
    let tasks = task_claim(store, "p", T0).await;
    assert_eq!(tasks.len(), 2);
    let result = |seq: u32| HistoryEvent::ActivityCompleted {
        seq,
        output: json!(seq),
    };
    let fed_turn = |fence: crate::Fence, history_start: u32, seqs: &[u32], fed: Vec<u32>| {
        let mut history = vec![HistoryEvent::TurnStarted { at: T0 }];
        history.extend(seqs.iter().map(|&s| result(s)));
        TurnCommit {
            fence,
            history_start,
            history,
            consumed: Vec::new(),
            fed,
            ..turn(&c, InstanceStatus::Running)
        }
    };

    // A stale completion refuses the turn it fed.
    let mut stale = TaskCompletion::of(&tasks[0], TaskResult::Completed(json!(0)));
    stale.fence = crate::Fence(stale.fence.0 + 100);
    let mut b = batch(vec![fed_turn(c.fence, history_len, &[0], vec![0])]);
    b.completions = vec![stale];
    let r = store.commit(b).await.unwrap();
    assert_eq!(r.completions, vec![CompletionResult::Stale]);
    assert_eq!(r.turns, vec![TurnResult::Stale]);
    assert!(
        claim(store, "q", T0).await.is_empty(),
        "nothing was written"
    );

    // An instance claimed since (its fence moved on) refuses it too; the result waits in the
    // inbox for the claimer.
    let mut b = batch(vec![fed_turn(
        crate::Fence(c.fence.0 + 1),
        history_len,
        &[0],
        vec![0],
    )]);
    b.completions = vec![TaskCompletion::of(
        &tasks[0],
        TaskResult::Completed(json!(0)),
    )];
    let r = store.commit(b).await.unwrap();
    assert_eq!(r.completions, vec![CompletionResult::Applied]);
    assert_eq!(r.turns, vec![TurnResult::Stale]);
    let again = claim(store, "p", T0).await.remove(0);
    assert_eq!(
        again.history_len, history_len,
        "the refused turn wrote no history"
    );
    assert_eq!(again.events.len(), 1);
    assert_eq!(again.events[0].event, result(0));
    let t = turn(&again, InstanceStatus::Running);
    history_len += u32::try_from(t.history.len()).unwrap();
    store.commit(batch(vec![t])).await.unwrap();

    // A position that is not a completion of the batch refuses it.
    let lone = batch(vec![fed_turn(again.fence, history_len, &[1], vec![0])]);
    assert_eq!(
        store.commit(lone).await.unwrap().turns,
        vec![TurnResult::Stale]
    );

    // Applied and unclaimed: the turn commits with the result, which never waits in the inbox.
    let mut b = batch(vec![fed_turn(again.fence, history_len, &[1], vec![0])]);
    b.completions = vec![TaskCompletion::of(
        &tasks[1],
        TaskResult::Completed(json!(1)),
    )];
    let r = store.commit(b).await.unwrap();
    assert_eq!(r.completions, vec![CompletionResult::Applied]);
    assert!(
        matches!(r.turns[..], [TurnResult::Committed { .. }]),
        "{r:?}"
    );
    assert!(
        claim(store, "q", T0).await.is_empty(),
        "the turn consumed the result it ran on"
    );
    let history = store.history_read("a", Some(0)).await.unwrap();
    assert_eq!(history.len(), history_len as usize + 2);
    assert_eq!(history[history_len as usize + 1].event, result(1));
}

/// One orchestration along the fed path, as a runtime that caches it drives it: its start
/// commits with its first turn, which schedules two activities, and their results commit
/// with the turn they feed, which finishes it. Both commits go through, the history holds
/// every event, and nothing is left to claim. (A backend's own test can look at what this
/// wrote along the way.)
pub async fn fed_path_commits_start_to_finish(store: &dyn Store) {
    let b = start_with_first_turn("f", 7, IfExists::Fail, 2);
    let first = b.turns[0].clone();
    let history_len = u32::try_from(first.history.len()).unwrap();
    let r = store.commit(b).await.unwrap();
    assert_eq!(r.starts, vec![CreateOutcome::Created(None)]);
    let TurnResult::Committed { tasks } = &r.turns[0] else {
        panic!("{r:?}")
    };
    assert_eq!(tasks.len(), 2, "both activities come back leased");

    let result = |seq: u32| HistoryEvent::ActivityCompleted {
        seq,
        output: json!(seq),
    };
    // A created instance is unleased under fence 0, which its first turn left as it was.
    let last = TurnCommit {
        fence: crate::Fence(0),
        history_start: history_len,
        history: vec![HistoryEvent::TurnStarted { at: T0 }, result(0), result(1)],
        fed: vec![0, 1],
        started: None,
        tasks: Vec::new(),
        status: InstanceStatus::Completed,
        output: Some(json!(1)),
        ..first
    };
    let mut b = batch(vec![last]);
    b.completions = tasks
        .iter()
        .enumerate()
        .map(|(seq, task)| TaskCompletion::of(task, TaskResult::Completed(json!(seq))))
        .collect();
    let r = store.commit(b).await.unwrap();
    assert_eq!(r.completions, vec![CompletionResult::Applied; 2]);
    assert!(
        matches!(r.turns[..], [TurnResult::Committed { .. }]),
        "{r:?}"
    );
    let rec = store.instance_get("f").await.unwrap().unwrap();
    assert_eq!(rec.status, InstanceStatus::Completed);
    let history = store.history_read("f", Some(0)).await.unwrap();
    assert_eq!(history.len(), history_len as usize + 3);
    assert!(matches!(
        history[1].event,
        HistoryEvent::ExecutionStarted { .. }
    ));
    assert_eq!(history[history_len as usize + 2].event, result(1));
    assert!(
        claim(store, "q", T0).await.is_empty(),
        "nothing is left to claim"
    );
}

pub async fn stale_completion_is_refused_alone(store: &dyn Store) {
    scheduled(store, 2).await;
    let first = task_claim(store, "p1", T0).await;
    let later = T0.plus(Duration::from_secs(31));
    let retaken = task_claim(store, "p2", later).await;
    assert_eq!(retaken.len(), 2, "expired task leases are taken over");
    assert!(
        retaken.iter().all(|t| t.attempt == 2),
        "a takeover is a new attempt: the lost one counts"
    );
    let mut b = batch(vec![]);
    b.completions = vec![
        TaskCompletion::of(&first[0], TaskResult::Completed(json!("late"))),
        TaskCompletion::of(&retaken[1], TaskResult::Completed(json!("ok"))),
    ];
    let r = store.commit(b).await.unwrap();
    assert_eq!(
        r.completions,
        vec![CompletionResult::Stale, CompletionResult::Applied]
    );
    let c = claim(store, "p", later).await.remove(0);
    assert_eq!(c.events.len(), 1, "the stale completion left no trace");
    assert_eq!(
        c.events[0].event,
        HistoryEvent::ActivityCompleted {
            seq: 1,
            output: json!("ok")
        }
    );
}

pub async fn retry_reschedules_task(store: &dyn Store) {
    scheduled(store, 1).await;
    let t = task_claim(store, "p", T0).await.remove(0);
    let at = T0.plus(Duration::from_secs(2));
    let mut b = batch(vec![]);
    b.completions = vec![TaskCompletion::of(
        &t,
        TaskResult::Retry {
            error: ErrorInfo::new("Flaky", "x"),
            at,
        },
    )];
    store.commit(b).await.unwrap();
    assert!(
        task_claim(store, "p", T0).await.is_empty(),
        "not visible before its backoff"
    );
    let again = task_claim(store, "p", at).await;
    assert_eq!(again[0].attempt, 2);
    assert!(again[0].fence > t.fence);
    assert!(
        claim(store, "p", at).await.is_empty(),
        "a retry tells the orchestration nothing"
    );
}

pub async fn heartbeat_and_release(store: &dyn Store) {
    scheduled(store, 2).await;
    let t = task_claim(store, "p", T0).await;
    let far = T0.plus(Duration::from_secs(300));
    let ok = store
        .task_heartbeat(
            vec![
                (t[0].id, t[0].fence),
                (t[1].id, crate::Fence(t[1].fence.0 + 7)),
            ],
            far,
        )
        .await
        .unwrap();
    assert_eq!(
        ok,
        vec![crate::LeaseState::Kept, crate::LeaseState::Lost],
        "a wrong fence is not extended"
    );
    let mid = T0.plus(Duration::from_secs(60));
    let taken = task_claim(store, "q", mid).await;
    assert_eq!(
        taken.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![t[1].id],
        "the heartbeated lease holds"
    );
    store
        .lease_release(LeaseRelease {
            tasks: vec![(t[0].id, t[0].fence)],
            instances: vec![],
            now: mid,
        })
        .await
        .unwrap();
    assert_eq!(
        task_claim(store, "q", mid).await.len(),
        1,
        "a released task is claimable at once"
    );
    // Instance leases can be released too, with task leases in the same round trip.
    store
        .signal_raise(vec![crate::NewSignal {
            instance: "a".into(),
            name: "s".into(),
            payload: json!(1),
            dedup_id: None,
        }])
        .await
        .unwrap();
    let c = claim(store, "p", mid).await.remove(0);
    let release = LeaseRelease {
        instances: vec![(c.id.clone(), c.fence)],
        tasks: vec![(taken[0].id, taken[0].fence)],
        now: mid,
    };
    store.lease_release(release.clone()).await.unwrap();
    // Again, now that its statements are prepared: releasing twice is harmless, and both
    // kinds of lease go in one round trip.
    let before = store.stats();
    store.lease_release(release).await.unwrap();
    assert_eq!(
        store.stats().round_trips - before.round_trips,
        1,
        "one release call, one round trip"
    );
    assert_eq!(claim(store, "q", mid).await.len(), 1);
    assert_eq!(
        task_claim(store, "r", mid).await.len(),
        1,
        "the task is free again"
    );
}

pub async fn one_claim_takes_instances_and_tasks(store: &dyn Store) {
    scheduled(store, 2).await;
    store
        .signal_raise(vec![crate::NewSignal {
            instance: "a".into(),
            name: "s".into(),
            payload: json!(1),
            dedup_id: None,
        }])
        .await
        .unwrap();
    let before = store.stats();
    let until = T0.plus(Duration::from_secs(30));
    let claimed = store
        .instance_claim(crate::InstanceClaim {
            lease: lease("p", until),
            limit: 10,
            orchestrations: registered(&["wf"]),
            now: T0,
            tasks: Some(TaskClaim::activities(
                lease("p", until),
                1,
                vec!["act".into()],
                T0,
            )),
        })
        .await
        .unwrap();
    assert_eq!(
        store.stats().round_trips - before.round_trips,
        1,
        "an idle-or-busy poll is one round trip"
    );
    assert_eq!(claimed.instances.len(), 1);
    assert_eq!(
        claimed.tasks.len(),
        1,
        "tasks are claimed up to their own limit"
    );
    assert_eq!(
        task_claim(store, "q", T0).await.len(),
        1,
        "the other task is still claimable"
    );
}
