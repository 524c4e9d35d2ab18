use std::time::Duration;

use ratchet_core::{ErrorInfo, HistoryEvent, ParentRef, Timestamp};
use serde_json::json;

use super::*;
use crate::{
    parent_event, ContinueAsNew, InstanceFilter, NewInboxEvent, NewSignal, SignalOutcome,
    StopOutcome, TurnResult,
};

/// A W3C `traceparent`, as a server receives it.
const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

pub async fn create_and_claim(store: &dyn Store) {
    start(store, "a").await;
    let rec = store.instance_get("a").await.unwrap().unwrap();
    assert_eq!(rec.status, InstanceStatus::Pending);
    assert_eq!(rec.input, json!({ "n": 1 }));
    let claimed = claim(store, "p1", T0).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, "a");
    assert_eq!(claimed[0].history_len, 0);
    assert!(matches!(
        claimed[0].events[0].event,
        HistoryEvent::ExecutionStarted { trace: None, .. }
    ));
    // Leased: a second claimer gets nothing until the lease expires.
    assert!(claim(store, "p2", T0).await.is_empty());
    let later = claim(store, "p2", T0.plus(Duration::from_secs(31))).await;
    assert_eq!(later.len(), 1);
    assert!(
        later[0].fence > claimed[0].fence,
        "a new lease gets a larger fence"
    );
    // A start's trace reaches its first turn through the inbox.
    store
        .instance_create(
            vec![NewInstance {
                trace: Some(TRACE.into()),
                ..new_instance("traced", "wf")
            }],
            None,
            T0,
        )
        .await
        .unwrap();
    let claimed = claim(store, "p3", T0.plus(Duration::from_secs(120))).await;
    let traced = claimed.iter().find(|c| c.id == "traced").expect("claimed");
    assert!(
        matches!(&traced.events[0].event, HistoryEvent::ExecutionStarted { trace, .. }
            if trace.as_deref() == Some(TRACE)),
        "{:?}",
        traced.events[0].event
    );
}

pub async fn create_if_exists(store: &dyn Store) {
    start(store, "a").await;
    let again = store
        .instance_create(vec![new_instance("a", "wf")], None, T0)
        .await
        .unwrap();
    assert_eq!(
        again[0],
        CreateOutcome::AlreadyExists(InstanceStatus::Pending)
    );
    let mut reuse = new_instance("a", "wf");
    reuse.if_exists = IfExists::UseExisting;
    assert_eq!(
        store.instance_create(vec![reuse], None, T0).await.unwrap()[0],
        CreateOutcome::Existing(InstanceStatus::Pending)
    );
    let mut restart = new_instance("a", "wf");
    restart.if_exists = IfExists::RestartIfFinished;
    assert_eq!(
        store
            .instance_create(vec![restart.clone()], None, T0)
            .await
            .unwrap()[0],
        CreateOutcome::AlreadyExists(InstanceStatus::Pending),
        "a running instance is never restarted"
    );
    let c = claim(store, "p", T0).await.remove(0);
    let mut done = turn(&c, InstanceStatus::Completed);
    done.output = Some(json!("ok"));
    store.commit(batch(vec![done])).await.unwrap();
    restart.input = json!({ "n": 2 });
    assert!(matches!(
        store
            .instance_create(vec![restart], None, T0)
            .await
            .unwrap()[0],
        CreateOutcome::Created(_)
    ));
    let rec = store.instance_get("a").await.unwrap().unwrap();
    assert_eq!(
        (rec.status, rec.input, rec.history_len),
        (InstanceStatus::Pending, json!({ "n": 2 }), 0)
    );
    assert!(
        store.history_read("a", None).await.unwrap().is_empty(),
        "restart erases the old history"
    );
}

/// A turn of an instance's earlier life (here: its first turn sent again, as a retry after
/// a timed-out commit would) never lands in the life that a restart began.
pub async fn a_restart_fences_off_the_earlier_life(store: &dyn Store) {
    start(store, "a").await;
    let c = claim(store, "p", T0).await.remove(0);
    let mut done = turn(&c, InstanceStatus::Completed);
    done.output = Some(json!("first life"));
    store.commit(batch(vec![done.clone()])).await.unwrap();
    let mut restart = new_instance("a", "wf");
    restart.if_exists = IfExists::RestartIfFinished;
    assert!(matches!(
        store
            .instance_create(vec![restart], None, T0)
            .await
            .unwrap()[0],
        CreateOutcome::Created(None)
    ));
    let out = store.commit(batch(vec![done])).await.unwrap();
    assert!(
        matches!(out.turns[0], TurnResult::Stale),
        "the old life's turn: {out:?}"
    );
    let rec = store.instance_get("a").await.unwrap().unwrap();
    assert_eq!((rec.status, rec.history_len), (InstanceStatus::Pending, 0));
}

pub async fn create_leased(store: &dyn Store) {
    let out = store
        .instance_create(
            vec![new_instance("a", "wf"), new_instance("b", "wf")],
            Some(lease("p1", T0.plus(Duration::from_secs(30)))),
            T0,
        )
        .await
        .unwrap();
    let CreateOutcome::Created(Some(claimed)) = &out[1] else {
        panic!("expected a leased instance: {out:?}")
    };
    assert_eq!(claimed.id, "b");
    assert_eq!(claimed.events.len(), 1);
    assert!(
        claim(store, "p2", T0).await.is_empty(),
        "created-and-leased instances are not claimable by others"
    );
    let r = store
        .commit(batch(vec![turn(claimed, InstanceStatus::Running)]))
        .await
        .unwrap();
    assert!(
        matches!(r.turns[0], TurnResult::Committed { .. }),
        "the create's fence is valid for a commit"
    );
}

/// A first turn that ran on its start before anything was written commits in the same batch
/// as the start that creates its instance, consuming the opening event; it is refused when
/// the start did not create the instance, which then loses nothing.
pub async fn turns_that_ran_on_their_start_commit_with_it(store: &dyn Store) {
    let r = store
        .commit(start_with_first_turn("a", 42, IfExists::Fail, 1))
        .await
        .unwrap();
    assert_eq!(r.starts, vec![CreateOutcome::Created(None)]);
    let TurnResult::Committed { tasks } = &r.turns[0] else {
        panic!("{r:?}")
    };
    assert_eq!(tasks.len(), 1, "its activity comes back leased");
    assert!(
        claim(store, "q", T0).await.is_empty(),
        "the turn consumed the opening event"
    );
    let history = store.history_read("a", Some(0)).await.unwrap();
    assert_eq!(history.len(), 2);
    assert!(matches!(
        history[1].event,
        HistoryEvent::ExecutionStarted { .. }
    ));
    let rec = store.instance_get("a").await.unwrap().unwrap();
    assert_eq!(rec.status, InstanceStatus::Running);
    assert_eq!(rec.version, Some(1));

    // The id is taken: the start is refused or finds it, and the turn never commits.
    for (policy, outcome) in [
        (
            IfExists::Fail,
            CreateOutcome::AlreadyExists(InstanceStatus::Running),
        ),
        (
            IfExists::UseExisting,
            CreateOutcome::Existing(InstanceStatus::Running),
        ),
    ] {
        let r = store
            .commit(start_with_first_turn("a", 43, policy, 1))
            .await
            .unwrap();
        assert_eq!(r.starts, vec![outcome]);
        assert_eq!(r.turns, vec![TurnResult::Stale]);
    }
    assert_eq!(store.history_read("a", Some(0)).await.unwrap().len(), 2);

    // A turn of another life than the one its start drew is refused; the created instance
    // keeps its opening event for whoever claims it.
    let mut b = start_with_first_turn("b", 44, IfExists::Fail, 1);
    b.turns[0].incarnation = crate::Incarnation(45);
    let r = store.commit(b).await.unwrap();
    assert_eq!(r.starts, vec![CreateOutcome::Created(None)]);
    assert_eq!(r.turns, vec![TurnResult::Stale]);
    let claimed = claim(store, "q", T0).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].incarnation, crate::Incarnation(44));
    assert!(matches!(
        claimed[0].events[0].event,
        HistoryEvent::ExecutionStarted { .. }
    ));
}

pub async fn commit_turn_appends_history(store: &dyn Store) {
    start(store, "a").await;
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::Running);
    t.custom_status = Some(json!("step 1"));
    let r = store.commit(batch(vec![t])).await.unwrap();
    assert!(matches!(r.turns[0], TurnResult::Committed { .. }));
    let rec = store.instance_get("a").await.unwrap().unwrap();
    assert_eq!(
        (rec.status, rec.version, rec.history_len),
        (InstanceStatus::Running, Some(1), 2)
    );
    assert_eq!(rec.custom_status, Some(json!("step 1")));
    let h = store.history_read("a", Some(0)).await.unwrap();
    assert_eq!(h.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![0, 1]);
    assert!(matches!(h[1].event, HistoryEvent::ExecutionStarted { .. }));
    // The consumed inbox event is gone and the lease released: nothing left to claim.
    assert!(claim(store, "p", T0).await.is_empty());
    // A second commit with the same fence and history start is refused: the turn already landed.
    let again = store
        .commit(batch(vec![turn(&c, InstanceStatus::Running)]))
        .await
        .unwrap();
    assert_eq!(again.turns[0], TurnResult::Stale);
}

pub async fn stale_turn_is_refused_alone(store: &dyn Store) {
    start(store, "a").await;
    let a1 = claim(store, "p1", T0).await.remove(0);
    // p2 takes "a" over after p1's lease expired.
    let later = T0.plus(Duration::from_secs(31));
    assert_eq!(claim(store, "p2", later).await[0].id, "a");
    start(store, "b").await;
    let b1 = claim(store, "p1", later).await.remove(0);
    assert_eq!(b1.id, "b");
    let r = store
        .commit(batch(vec![
            turn(&a1, InstanceStatus::Running),
            turn(&b1, InstanceStatus::Running),
        ]))
        .await
        .unwrap();
    assert_eq!(r.turns[0], TurnResult::Stale, "the stale fence is refused");
    assert!(
        matches!(r.turns[1], TurnResult::Committed { .. }),
        "the other item still commits"
    );
    assert_eq!(
        store.instance_get("a").await.unwrap().unwrap().history_len,
        0,
        "history unchanged"
    );
    assert_eq!(store.stats().stale_refused, 1);
}

pub async fn continue_as_new_starts_next_execution(store: &dyn Store) {
    start(store, "a").await;
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::ContinuedAsNew);
    t.history
        .push(HistoryEvent::ContinuedAsNew { input: json!(2) });
    let carried = HistoryEvent::SignalReceived {
        name: "s".into(),
        payload: json!(1),
    };
    t.continue_as_new = Some(ContinueAsNew {
        name: "wf".into(),
        parent: None,
        input: json!(2),
        carried: vec![carried.clone()],
        trace: Some(TRACE.into()),
    });
    store.commit(batch(vec![t])).await.unwrap();
    let rec = store.instance_get("a").await.unwrap().unwrap();
    assert_eq!(
        (rec.execution, rec.history_len, rec.status),
        (1, 0, InstanceStatus::ContinuedAsNew)
    );
    let c = claim(store, "p", T0).await.remove(0);
    assert_eq!(c.execution, 1);
    let events: Vec<_> = c.events.iter().map(|e| e.event.clone()).collect();
    assert!(
        matches!(&events[0], HistoryEvent::ExecutionStarted { input, trace, .. }
            if *input == json!(2) && trace.as_deref() == Some(TRACE)),
        "the next execution keeps the input and the trace: {:?}",
        events[0]
    );
    assert_eq!(events[1], carried);
    store
        .commit(batch(vec![turn(&c, InstanceStatus::Running)]))
        .await
        .unwrap();
    assert_eq!(store.history_read("a", None).await.unwrap().len(), 3 + 3);
    assert_eq!(store.history_read("a", Some(1)).await.unwrap().len(), 3);
}

/// History read a page at a time, across executions and from inside a turn's events, gives
/// the whole history once, in order.
pub async fn history_pages_by_position(store: &dyn Store) {
    start(store, "a").await;
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::ContinuedAsNew);
    t.history
        .push(HistoryEvent::ContinuedAsNew { input: json!(2) });
    t.continue_as_new = Some(ContinueAsNew {
        name: "wf".into(),
        parent: None,
        input: json!(2),
        carried: vec![],
        trace: None,
    });
    store.commit(batch(vec![t])).await.unwrap();
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::Running);
    t.history
        .push(HistoryEvent::CustomStatusSet { status: json!("x") });
    store.commit(batch(vec![t])).await.unwrap();
    let whole = store.history_read("a", None).await.unwrap();
    assert_eq!(whole.len(), 6, "{whole:?}");
    for limit in [1, 2, 4, 100] {
        let mut paged = Vec::new();
        let mut after = None;
        loop {
            let page = store.history_page("a", after, limit).await.unwrap();
            assert!(page.len() <= limit as usize);
            let Some(last) = page.last() else { break };
            after = Some((last.execution, last.seq));
            paged.extend(page);
        }
        assert_eq!(paged, whole, "pages of {limit}");
    }
    let rest = store.history_page("a", Some((0, 1)), 2).await.unwrap();
    assert_eq!(
        rest.iter()
            .map(|r| (r.execution, r.seq))
            .collect::<Vec<_>>(),
        [(0, 2), (1, 0)],
        "from inside the first turn into the next execution"
    );
    assert!(store
        .history_page("none", None, 10)
        .await
        .unwrap()
        .is_empty());
}

pub async fn child_result_reaches_parent(store: &dyn Store) {
    start(store, "parent").await;
    let c = claim(store, "p", T0).await.remove(0);
    let parent = ParentRef {
        instance: "parent".into(),
        execution: 0,
        seq: 4,
    };
    let mut t = turn(&c, InstanceStatus::Running);
    t.children.push(NewInstance {
        parent: Some(parent.clone()),
        ..new_instance("kid", "child")
    });
    store.commit(batch(vec![t])).await.unwrap();
    let kid = claim(store, "p", T0).await.remove(0);
    assert_eq!(kid.id, "kid");
    let mut done = turn(&kid, InstanceStatus::Completed);
    done.output = Some(json!("toy"));
    done.inbox.push(parent_event(&parent, Ok(json!("toy"))));
    store.commit(batch(vec![done])).await.unwrap();
    let p = claim(store, "p", T0).await.remove(0);
    assert_eq!(
        p.events[0].event,
        HistoryEvent::SubOrchestrationCompleted {
            seq: 4,
            output: json!("toy")
        }
    );
    assert_eq!(
        store.instance_get("kid").await.unwrap().unwrap().parent,
        Some(parent)
    );
}

pub async fn timers_become_visible_at_their_time(store: &dyn Store) {
    start(store, "a").await;
    let c = claim(store, "p", T0).await.remove(0);
    let mut t = turn(&c, InstanceStatus::Running);
    let fire = T0.plus(Duration::from_secs(5));
    t.inbox.push(NewInboxEvent {
        instance: "a".into(),
        event: HistoryEvent::TimerFired { seq: 0 },
        visible_at: fire,
    });
    store.commit(batch(vec![t])).await.unwrap();
    let early = store
        .instance_claim(InstanceClaim {
            lease: lease("p", fire),
            limit: 10,
            orchestrations: registered(&["wf"]),
            now: T0,
            tasks: None,
        })
        .await
        .unwrap();
    assert!(early.instances.is_empty());
    assert_eq!(
        early.next_due,
        Some(fire),
        "the claim says when to look again"
    );
    let due = claim(store, "p", fire).await;
    assert_eq!(due[0].events[0].event, HistoryEvent::TimerFired { seq: 0 });
}

pub async fn signals_buffer_in_order_and_dedup(store: &dyn Store) {
    start(store, "a").await;
    let sig = |n: i64, dedup: Option<&str>| NewSignal {
        instance: "a".into(),
        name: "go".into(),
        payload: json!(n),
        dedup_id: dedup.map(str::to_string),
    };
    let out = store
        .signal_raise(vec![
            sig(1, Some("x")),
            sig(2, None),
            sig(3, Some("x")),
            NewSignal {
                instance: "nope".into(),
                ..sig(4, None)
            },
        ])
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![
            SignalOutcome::Raised,
            SignalOutcome::Raised,
            SignalOutcome::Duplicate,
            SignalOutcome::NotFound
        ]
    );
    let c = claim(store, "p", T0).await.remove(0);
    let payloads: Vec<_> = c
        .events
        .iter()
        .filter_map(|e| match &e.event {
            HistoryEvent::SignalReceived { payload, .. } => Some(payload.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(payloads, vec![json!(1), json!(2)]);
    store
        .commit(batch(vec![turn(&c, InstanceStatus::Running)]))
        .await
        .unwrap();
    // The dedup id outlives the consumed inbox row.
    assert_eq!(
        store.signal_raise(vec![sig(5, Some("x"))]).await.unwrap(),
        vec![SignalOutcome::Duplicate]
    );
}

pub async fn cancel_and_terminate(store: &dyn Store) {
    start(store, "a").await;
    start(store, "b").await;
    assert_eq!(
        store.instance_cancel("a", "changed my mind").await.unwrap(),
        StopOutcome::Done
    );
    assert_eq!(
        store.instance_cancel("zz", "x").await.unwrap(),
        StopOutcome::NotFound
    );
    let c = claim(store, "p", T0).await;
    let a = c.iter().find(|c| c.id == "a").unwrap();
    assert!(a.events.iter().any(|e| e.event
        == HistoryEvent::CancelRequested {
            reason: "changed my mind".into()
        }));
    let b = c.iter().find(|c| c.id == "b").unwrap().clone();
    assert_eq!(
        store.instance_terminate("b", "stop now", T0).await.unwrap(),
        StopOutcome::Done
    );
    let rec = store.instance_get("b").await.unwrap().unwrap();
    assert_eq!(rec.status, InstanceStatus::Terminated);
    assert_eq!(rec.error, Some(ErrorInfo::new("Terminated", "stop now")));
    // The turn that was running when it was terminated is refused.
    let r = store
        .commit(batch(vec![turn(&b, InstanceStatus::Running)]))
        .await
        .unwrap();
    assert_eq!(r.turns[0], TurnResult::Stale);
    assert_eq!(
        store.instance_terminate("b", "again", T0).await.unwrap(),
        StopOutcome::Finished(InstanceStatus::Terminated)
    );
    let sig = NewSignal {
        instance: "b".into(),
        name: "s".into(),
        payload: json!(null),
        dedup_id: None,
    };
    assert_eq!(
        store.signal_raise(vec![sig]).await.unwrap(),
        vec![SignalOutcome::Finished(InstanceStatus::Terminated)]
    );
}

/// A cancel or a signal is visible as soon as it is committed, to a claimer at any time (here
/// the start's, long before the database's clock): stamped with a caller's estimate of that
/// clock, it could be missed by a claimer whose estimate lagged, which would then see the
/// start without the cancel that followed it.
pub async fn cancels_and_signals_are_visible_at_once(store: &dyn Store) {
    start(store, "a").await;
    assert_eq!(
        store.instance_cancel("a", "changed my mind").await.unwrap(),
        StopOutcome::Done
    );
    let sig = NewSignal {
        instance: "a".into(),
        name: "go".into(),
        payload: json!(1),
        dedup_id: None,
    };
    assert_eq!(
        store.signal_raise(vec![sig]).await.unwrap(),
        vec![SignalOutcome::Raised]
    );
    let c = claim(store, "p", T0).await;
    let events: Vec<&HistoryEvent> = c[0].events.iter().map(|e| &e.event).collect();
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(matches!(events[0], HistoryEvent::ExecutionStarted { .. }));
    assert_eq!(
        events[1],
        &HistoryEvent::CancelRequested {
            reason: "changed my mind".into()
        }
    );
    assert!(matches!(events[2], HistoryEvent::SignalReceived { .. }));
}

pub async fn claim_respects_versions_and_leases(store: &dyn Store) {
    start(store, "a").await;
    store
        .instance_create(vec![new_instance("other", "unknown-name")], None, T0)
        .await
        .unwrap();
    let c = claim(store, "p", T0).await;
    assert_eq!(
        c.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        vec!["a"],
        "unregistered names are not claimed"
    );
    // Pin "a" to version 1 and give it another event.
    store
        .commit(batch(vec![turn(&c[0], InstanceStatus::Running)]))
        .await
        .unwrap();
    store
        .signal_raise(vec![NewSignal {
            instance: "a".into(),
            name: "s".into(),
            payload: json!(0),
            dedup_id: None,
        }])
        .await
        .unwrap();
    let v2_only = store
        .instance_claim(InstanceClaim {
            lease: lease("p", T0.plus(Duration::from_secs(30))),
            limit: 10,
            orchestrations: vec![Registered {
                name: "wf".into(),
                versions: vec![2],
            }],
            now: T0,
            tasks: None,
        })
        .await
        .unwrap();
    assert!(
        v2_only.instances.is_empty(),
        "a process only runs versions it registered"
    );
    assert_eq!(claim(store, "p", T0).await.len(), 1);
}

/// A poll whose window of the oldest events holds only instances it cannot take (here 400
/// pinned to a version it lacks, one signal each) still reaches the instances behind them,
/// within a few polls: each walks on over a bounded number of instances from where the last
/// one stopped.
pub async fn claims_reach_instances_behind_a_window_they_cannot_take(store: &dyn Store) {
    let pinned: Vec<String> = (0..400).map(|i| format!("pinned-{i:03}")).collect();
    let starts = pinned.iter().map(|id| new_instance(id, "wf")).collect();
    store.instance_create(starts, None, T0).await.unwrap();
    // A poll of a process that runs version `v` of "wf".
    let poll = |v: u32, limit: u32, now: Timestamp| InstanceClaim {
        lease: lease(&format!("v{v}"), now.plus(Duration::from_secs(30))),
        limit,
        orchestrations: vec![Registered {
            name: "wf".into(),
            versions: vec![v],
        }],
        now,
        tasks: None,
    };
    let claimed = store
        .instance_claim(poll(2, 400, T0))
        .await
        .unwrap()
        .instances;
    assert_eq!(claimed.len(), 400);
    let turns = claimed
        .iter()
        .map(|c| TurnCommit {
            version: Some(2),
            ..turn(c, InstanceStatus::Running)
        })
        .collect();
    store.commit(batch(turns)).await.unwrap();
    let signals = pinned
        .iter()
        .map(|id| NewSignal {
            instance: id.clone(),
            name: "s".into(),
            payload: json!(0),
            dedup_id: None,
        })
        .collect();
    store.signal_raise(signals).await.unwrap();
    // Behind the 400 signals (visible from 0) in time, and after the pinned ids in id order.
    let later = T0.plus(Duration::from_secs(1));
    let late: Vec<String> = (0..3).map(|i| format!("zz-late-{i}")).collect();
    let starts = late.iter().map(|id| new_instance(id, "wf")).collect();
    store.instance_create(starts, None, later).await.unwrap();

    let mut reached = Vec::new();
    for n in 0..4 {
        let got = store
            .instance_claim(poll(1, 10, later))
            .await
            .unwrap()
            .instances;
        for c in got {
            assert!(c.id.starts_with("zz-late-"), "poll {n} leased {}", c.id);
            reached.push(c.id);
        }
    }
    reached.sort();
    assert_eq!(reached, late, "every instance behind the window is reached");
    // The pinned ones are still there for a process that runs version 2.
    let v2_claimed = store.instance_claim(poll(2, 500, later)).await.unwrap();
    assert_eq!(v2_claimed.instances.len(), 400);
}

/// A poll with room for any number of instances (a process configured with an absurd
/// `max_orchestrations`) claims as usual: its reads stay bounded and nothing overflows.
pub async fn a_claim_takes_any_limit(store: &dyn Store) {
    start(store, "a").await;
    let claimed = store
        .instance_claim(InstanceClaim {
            lease: lease("p", T0.plus(Duration::from_secs(30))),
            limit: u32::MAX,
            orchestrations: registered(&["wf"]),
            now: T0,
            tasks: None,
        })
        .await
        .unwrap();
    assert_eq!(claimed.instances.len(), 1);
}

pub async fn list_filters_and_history(store: &dyn Store) {
    for (i, id) in ["a", "b", "c"].iter().enumerate() {
        let t = Timestamp(T0.0 + i as i64 * 1000);
        store
            .instance_create(
                vec![new_instance(id, if *id == "c" { "child" } else { "wf" })],
                None,
                t,
            )
            .await
            .unwrap();
    }
    let c = claim(store, "p", Timestamp(T0.0 + 5000)).await;
    let a = c.iter().find(|c| c.id == "a").unwrap();
    let mut done = turn(a, InstanceStatus::Failed);
    done.error = Some(ErrorInfo::new("Boom", "bad"));
    done.custom_status = Some(json!("charging"));
    let b = c.iter().find(|c| c.id == "b").unwrap();
    let mut waiting = turn(b, InstanceStatus::Running);
    waiting.custom_status = Some(json!({"step": 2, "of": 3}));
    store.commit(batch(vec![done, waiting])).await.unwrap();
    for (wanted, found) in [
        (json!("charging"), vec!["a"]),
        (json!({"step": 2, "of": 3}), vec!["b"]),
        (json!("shipping"), vec![]),
    ] {
        let listed = store
            .instance_list(InstanceFilter {
                custom_status: Some(wanted.clone()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            listed.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
            found,
            "custom status {wanted}"
        );
    }
    let all = store
        .instance_list(InstanceFilter::default())
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec!["c", "b", "a"],
        "newest first"
    );
    let failed = store
        .instance_list(InstanceFilter {
            statuses: vec![InstanceStatus::Failed],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].error, Some(ErrorInfo::new("Boom", "bad")));
    assert!(failed[0].finished_at.is_some());
    let by_name = store
        .instance_list(InstanceFilter {
            name: Some("child".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_name.len(), 1);
    let window = InstanceFilter {
        created_after: Some(Timestamp(T0.0 + 500)),
        created_before: Some(Timestamp(T0.0 + 1500)),
        ..Default::default()
    };
    assert_eq!(store.instance_list(window).await.unwrap()[0].id, "b");
    let limited = store
        .instance_list(InstanceFilter {
            limit: Some(2),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(limited.len(), 2);
    assert_eq!(store.history_read("a", None).await.unwrap().len(), 2);
    assert!(store
        .history_read("missing", None)
        .await
        .unwrap()
        .is_empty());
    assert!(store.instance_get("missing").await.unwrap().is_none());
}

/// Keyset pagination walks every instance once, newest first, also through instances created
/// in the same millisecond (ordered by id), with no OFFSET.
pub async fn list_pages_by_keyset(store: &dyn Store) {
    let ids = ["a", "b", "c", "d", "e"];
    for id in ids {
        start(store, id).await;
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .instance_list(InstanceFilter {
                limit: Some(2),
                after: after.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        let Some(last) = page.last() else { break };
        after = Some((last.created_at, last.id.clone()));
        seen.extend(page.iter().map(|r| r.id.clone()));
    }
    assert_eq!(seen, vec!["e", "d", "c", "b", "a"]);
}

/// Tokens are found by their hash until revoked (and after, marked so); an id or a hash is
/// recorded once.
pub async fn tokens_are_found_by_hash_and_revoked(store: &dyn Store) {
    use crate::NewToken;
    let token = |id: &str, hash: &str| NewToken {
        id: id.into(),
        name: format!("token {id}"),
        hash: hash.into(),
        scopes: vec!["read".into(), "write".into()],
        created_at: T0,
    };
    store.token_create(token("a", "h-a")).await.unwrap();
    store.token_create(token("b", "h-b")).await.unwrap();
    assert!(matches!(
        store.token_create(token("a", "h-c")).await,
        Err(crate::StoreError::Invalid(_))
    ));
    assert!(
        store.token_create(token("c", "h-a")).await.is_err(),
        "a hash is unique"
    );
    let found = store.token_find("h-a").await.unwrap().unwrap();
    assert_eq!(
        (found.id.as_str(), found.scopes.clone(), found.revoked_at),
        ("a", vec!["read".to_string(), "write".to_string()], None)
    );
    assert!(store.token_find("h-nope").await.unwrap().is_none());
    assert!(store.token_revoke("a", Timestamp(T0.0 + 5)).await.unwrap());
    assert!(
        !store.token_revoke("a", Timestamp(T0.0 + 6)).await.unwrap(),
        "once"
    );
    assert!(!store.token_revoke("zzz", T0).await.unwrap());
    let revoked = store.token_find("h-a").await.unwrap().unwrap();
    assert_eq!(revoked.revoked_at, Some(Timestamp(T0.0 + 5)));
    let all = store.token_list().await.unwrap();
    assert_eq!(
        all.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        vec!["a", "b"]
    );
}

pub async fn purge_removes_finished(store: &dyn Store) {
    start(store, "a").await;
    start(store, "b").await;
    let c = claim(store, "p", T0).await;
    let a = c.iter().find(|c| c.id == "a").unwrap();
    store
        .commit(batch(vec![turn(a, InstanceStatus::Completed)]))
        .await
        .unwrap();
    assert_eq!(
        store.instance_purge(T0).await.unwrap(),
        0,
        "finished exactly at the cut-off stays"
    );
    assert_eq!(
        store
            .instance_purge(T0.plus(Duration::from_millis(1)))
            .await
            .unwrap(),
        1
    );
    assert!(store.instance_get("a").await.unwrap().is_none());
    assert!(store.history_read("a", None).await.unwrap().is_empty());
    assert!(
        store.instance_get("b").await.unwrap().is_some(),
        "running instances are never purged"
    );
}

pub async fn stats_count_round_trips(store: &dyn Store) {
    // A backend may spend one more round trip the first time a connection prepares a
    // statement; after that, every call is one.
    start(store, "warm-up").await;
    let _ = store.instance_get("warm-up").await.unwrap();
    let before = store.stats();
    start(store, "a").await;
    let _ = store.instance_get("a").await.unwrap();
    let after = store.stats();
    assert_eq!(
        after.round_trips - before.round_trips,
        2,
        "one round trip per call"
    );
    assert_eq!(after.commits - before.commits, 1, "reads do not commit");
}

pub async fn terminated_child_fails_parent_step(store: &dyn Store) {
    start(store, "parent").await;
    let c = claim(store, "p", T0).await.remove(0);
    let parent = ParentRef {
        instance: "parent".into(),
        execution: 0,
        seq: 3,
    };
    let mut t = turn(&c, InstanceStatus::Running);
    t.children.push(NewInstance {
        parent: Some(parent.clone()),
        ..new_instance("kid", "child")
    });
    store.commit(batch(vec![t])).await.unwrap();
    assert_eq!(
        store.instance_terminate("kid", "enough", T0).await.unwrap(),
        StopOutcome::Done
    );
    let p = claim(store, "p", T0).await;
    assert_eq!(p.len(), 1, "only the parent has work: the child is gone");
    assert_eq!(
        p[0].events[0].event,
        HistoryEvent::SubOrchestrationFailed {
            seq: 3,
            error: ErrorInfo::new("Terminated", "enough")
        }
    );
}

pub async fn taken_child_id_fails_parent_step(store: &dyn Store) {
    start(store, "taken").await;
    start(store, "parent").await;
    let c = claim(store, "p", T0).await;
    let p = c.iter().find(|c| c.id == "parent").unwrap();
    let parent = ParentRef {
        instance: "parent".into(),
        execution: 0,
        seq: 1,
    };
    let mut t = turn(p, InstanceStatus::Running);
    t.children.push(NewInstance {
        parent: Some(parent.clone()),
        ..new_instance("taken", "child")
    });
    let r = store.commit(batch(vec![t])).await.unwrap();
    assert!(
        matches!(r.turns[0], TurnResult::Committed { .. }),
        "the parent's turn still commits"
    );
    let again = claim(store, "p", T0).await;
    let p = again.iter().find(|c| c.id == "parent").unwrap();
    assert!(matches!(
        &p.events[0].event,
        HistoryEvent::SubOrchestrationFailed { seq: 1, error } if error.kind == "AlreadyExists"
    ));
    assert_eq!(
        store.instance_get("taken").await.unwrap().unwrap().name,
        "wf",
        "the existing instance is untouched"
    );
}

pub async fn payloads_round_trip_exactly(store: &dyn Store) {
    // NUL, other control characters, non-ASCII text, extreme numbers and deep nesting: stored
    // as given, whatever the database's JSON types would refuse or normalize.
    let input = json!({
        "nul": "a\u{0000}b",
        "ctl": "\u{0001}\t\n",
        "text": "żółw 🐢 \"quoted\" \\ back",
        "big": u64::MAX,
        "neg": i64::MIN,
        "float": 0.1,
        "deep": [[[[{"k": null}]]]],
        "dup_order": {"b": 1, "a": 2},
    });
    let mut new = new_instance("odd", "wf");
    new.input = input.clone();
    store.instance_create(vec![new], None, T0).await.unwrap();
    assert_eq!(
        store.instance_get("odd").await.unwrap().unwrap().input,
        input
    );
    let c = claim(store, "p", T0).await.remove(0);
    let mut done = turn(&c, InstanceStatus::Completed);
    done.output = Some(input.clone());
    store.commit(batch(vec![done])).await.unwrap();
    let rec = store.instance_get("odd").await.unwrap().unwrap();
    assert_eq!(rec.output, Some(input.clone()));
    let history = store.history_read("odd", None).await.unwrap();
    assert!(
        matches!(&history[1].event, HistoryEvent::ExecutionStarted { input: i, .. } if *i == input)
    );
}

/// Waiters hear of an instance once its finishing turn committed, and never of a finish that
/// a stale turn tried (it was refused, the instance still runs).
pub async fn finishes_are_heard_once_committed_and_refused_ones_never(store: &dyn Store) {
    let Some(mut wakeups) = store.wakeups() else {
        return;
    };
    // A listener that just connected may announce a resync first; take what is heard until
    // the instance we wait for, skipping those.
    async fn heard(wakeups: &mut crate::Wakeups, wait: Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match tokio::time::timeout_at(deadline, wakeups.finished.recv()).await {
                Ok(Ok(Some(id))) => return Some(id),
                Ok(Ok(None)) | Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }
    let finish = async |claimed: &ClaimedInstance| {
        store
            .commit(batch(vec![turn(claimed, InstanceStatus::Completed)]))
            .await
            .unwrap()
    };
    start(store, "a").await;
    finish(&claim(store, "p", T0).await.remove(0)).await;
    assert_eq!(
        heard(&mut wakeups, Duration::from_secs(10))
            .await
            .as_deref(),
        Some("a")
    );

    start(store, "b").await;
    let stale = claim(store, "p1", T0).await.remove(0);
    let later = T0.plus(Duration::from_secs(31));
    let live = claim(store, "p2", later).await.remove(0);
    assert_eq!(finish(&stale).await.turns[0], TurnResult::Stale);
    assert_eq!(
        heard(&mut wakeups, Duration::from_millis(500)).await,
        None,
        "a refused finish is not announced"
    );
    finish(&live).await;
    assert_eq!(
        heard(&mut wakeups, Duration::from_secs(10))
            .await
            .as_deref(),
        Some("b")
    );
}
