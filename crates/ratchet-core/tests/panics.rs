//! Orchestration code that panics fails its own execution, with the panic's message, and
//! never unwinds into the caller of the turn (a worker's loop, or the group commit that
//! carries other instances' work too).
#![allow(clippy::unwrap_used)]

use ratchet_core::{
    boxed_orchestration, Execution, HistoryEvent, Limits, OrchestrationContext, OrchestrationError,
    Timestamp, TurnOutcome,
};
use serde_json::json;

async fn panics_after_its_activity(
    ctx: OrchestrationContext,
    _: (),
) -> Result<u64, OrchestrationError> {
    let n: u64 = ctx.activity("work", ()).await?;
    if n > 1 {
        panic!("the result was {n}");
    }
    Ok(n)
}

fn start() -> HistoryEvent {
    HistoryEvent::ExecutionStarted {
        name: "p".into(),
        version: 1,
        input: json!(null),
        parent: None,
        trace: None,
    }
}

fn execution() -> Execution {
    Execution::new(
        boxed_orchestration(panics_after_its_activity),
        "p-1",
        1,
        0,
        Limits::default(),
    )
}

#[test]
fn a_panic_fails_the_execution_with_its_message() {
    let mut exec = execution();
    let first = exec.turn(Timestamp(1), vec![start()]);
    assert_eq!(first.outcome, TurnOutcome::Running);
    let done = HistoryEvent::ActivityCompleted {
        seq: 0,
        output: json!(7),
    };
    let turn = exec.turn(Timestamp(2), vec![done.clone()]);
    let TurnOutcome::Failed(error) = &turn.outcome else {
        panic!("{:?}", turn.outcome)
    };
    assert_eq!(error.kind, "Panicked");
    assert!(
        error.message.contains("the result was 7"),
        "{}",
        error.message
    );
    // The failed turn records what it consumed and the failure, nothing the code asked for.
    assert_eq!(turn.events[1], done);
    assert!(matches!(
        turn.events.last(),
        Some(HistoryEvent::ExecutionFailed { .. })
    ));
    assert_eq!(turn.events.len(), 3);
    // Later turns change nothing.
    let again = exec.turn(Timestamp(3), Vec::new());
    assert_eq!(again.outcome, turn.outcome);
    assert!(again.events.is_empty());

    // Replaying the history of a turn that did not panic then, but does now, is named as
    // nondeterminism rather than raised.
    let mut history = first.events.clone();
    history.push(HistoryEvent::TurnStarted { at: Timestamp(2) });
    history.push(done);
    history.push(HistoryEvent::ExecutionCompleted { output: json!(7) });
    let err = execution().replay(&history).unwrap_err();
    assert!(err.detail.contains("panicked while replaying"), "{err}");
}

#[test]
fn a_panic_while_the_code_starts_fails_it_too() {
    let orchestration = boxed_orchestration(|_ctx: OrchestrationContext, n: u32| {
        assert!(n < 5, "too large: {n}");
        async move { Ok::<u32, OrchestrationError>(n) }
    });
    let mut exec = Execution::new(orchestration, "p-2", 1, 0, Limits::default());
    let mut started = start();
    if let HistoryEvent::ExecutionStarted { input, .. } = &mut started {
        *input = json!(9);
    }
    let turn = exec.turn(Timestamp(1), vec![started]);
    match turn.outcome {
        TurnOutcome::Failed(e) => assert!(e.message.contains("too large: 9"), "{e:?}"),
        other => panic!("{other:?}"),
    }
}
