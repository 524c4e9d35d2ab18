//! Property: any interleaving of activity completions, grouped into turns in any way, yields
//! the same result, and the history it produces replays to the same state.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use ratchet_core::{
    boxed_orchestration, Execution, HistoryEvent, Limits, OrchestrationContext, OrchestrationError,
    Timestamp, TurnOutcome,
};
use serde_json::json;

async fn fan_out(ctx: OrchestrationContext, n: u32) -> Result<u64, OrchestrationError> {
    let calls = (0..n).map(|i| ctx.activity::<u64>("work", i));
    let values = ratchet_core::join_all(calls)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    // A value recorded after the join must replay identically too.
    let r = ctx.random();
    Ok(values.iter().sum::<u64>() + u64::from(r < 2.0))
}

fn execution() -> Execution {
    Execution::new(
        boxed_orchestration(fan_out),
        "prop",
        7,
        0,
        Limits::default(),
    )
}

/// Drives an execution: start, then completions in `order`, cut into turns after the indexes
/// in `cuts`. Returns the whole history and the final outcome.
fn drive(n: u32, order: &[u32], cuts: &[bool]) -> (Vec<HistoryEvent>, TurnOutcome) {
    let mut exec = execution();
    let start = HistoryEvent::ExecutionStarted {
        name: "fan".into(),
        version: 1,
        input: json!(n),
        parent: None,
        trace: None,
    };
    let mut history = exec.turn(Timestamp(1), vec![start]).events;
    let mut pending = Vec::new();
    let mut at = 2;
    for (i, seq) in order.iter().enumerate() {
        pending.push(HistoryEvent::ActivityCompleted {
            seq: *seq,
            output: json!(u64::from(*seq) * 10),
        });
        if cuts[i] || i + 1 == order.len() {
            let turn = exec.turn(Timestamp(at), std::mem::take(&mut pending));
            at += 1;
            history.extend(turn.events);
        }
    }
    (history, exec.outcome().clone())
}

fn expected(n: u32) -> TurnOutcome {
    TurnOutcome::Completed(json!((0..u64::from(n)).map(|s| s * 10).sum::<u64>() + 1))
}

fn scenario() -> impl Strategy<Value = (u32, Vec<u32>, Vec<bool>)> {
    (1u32..12).prop_flat_map(|n| {
        let order = Just((0..n).collect::<Vec<u32>>()).prop_shuffle();
        (
            Just(n),
            order,
            proptest::collection::vec(any::<bool>(), n as usize),
        )
    })
}

proptest! {
    #[test]
    fn any_interleaving_gives_the_same_result((n, order, cuts) in scenario()) {
        let (history, outcome) = drive(n, &order, &cuts);
        prop_assert_eq!(&outcome, &expected(n));
        // The same interleaving driven twice writes the same history.
        let (again, _) = drive(n, &order, &cuts);
        prop_assert_eq!(&again, &history);
        // A fresh execution replays that history without nondeterminism, to the same outcome.
        let mut replayed = execution();
        prop_assert!(replayed.replay(&history).is_ok());
        prop_assert_eq!(replayed.outcome(), &outcome);
        prop_assert_eq!(replayed.history_len(), history.len());
        // Exactly one completion per step is in history.
        let completions = history.iter().filter(|e| matches!(e, HistoryEvent::ActivityCompleted { .. })).count();
        prop_assert_eq!(completions, n as usize);
    }
}

#[test]
fn replay_stops_at_a_changed_step() {
    let (history, _) = drive(3, &[2, 0, 1], &[true, false, false]);
    let changed = |ctx: OrchestrationContext, _: u32| async move {
        let a: u64 = ctx.activity("other", 0).await?;
        Ok(a)
    };
    let mut exec = Execution::new(
        boxed_orchestration(changed),
        "prop",
        7,
        0,
        Limits::default(),
    );
    let err = exec.replay(&history).unwrap_err();
    assert_eq!(
        err.position, 2,
        "TurnStarted, ExecutionStarted, then the first ActivityScheduled"
    );
    assert!(
        err.detail.contains("\"work\"") && err.detail.contains("\"other\""),
        "{}",
        err.detail
    );
}
