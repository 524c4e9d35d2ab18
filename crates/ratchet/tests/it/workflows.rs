//! Declarative workflows (the Serverless Workflow DSL) run by the engine on every backend:
//! each step kind, expressions, errors caught and retried on durable timers, signals with a
//! timeout, a runtime lost mid-workflow, and two versions live at once.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ratchet::workflow::Workflow;
use ratchet::{ActivityContext, ActivityError, InstanceStatus, StartOptions, Store};
use serde_json::{json, Value};

use crate::harness::{start, WAIT};

fn compiled(source: &str) -> Workflow {
    Workflow::compile(source).unwrap_or_else(|e| panic!("{e}"))
}

/// Doubles `n`: a `call`'s named arguments are the activity's input.
async fn double(_ctx: ActivityContext, args: Value) -> Result<i64, ActivityError> {
    let n = args["n"]
        .as_i64()
        .ok_or_else(|| ActivityError::non_retryable("InvalidInput", format!("no n in {args}")))?;
    Ok(n * 2)
}

const ORDER: &str = r#"
document: {dsl: '1.0.0', namespace: shop, name: order, version: '1.0.0'}
do:
  - prepare:
      set:
        items: ${ .items }
        rush: ${ .rush // false }
  - doubled:
      for:
        each: n
        in: ${ .items }
      do:
        - one:
            call: double
            with:
              n: ${ $n }
            output:
              as: '${ $input + {total: (($input.total // 0) + .)} }'
  - both:
      fork:
        branches:
          - small:
              call: double
              with: {n: 1}
          - big:
              call: double
              with:
                n: ${ .total }
      export:
        as: '${ {branches: .} }'
  - route:
      switch:
        - rush:
            when: ${ $context.branches[1] > 10 }
            then: express
        - normal:
            then: standard
  - express:
      set:
        shipping: express
        branches: ${ $context.branches }
      then: end
  - standard:
      set:
        shipping: standard
        branches: ${ $context.branches }
"#;

async fn each_step_kind_runs_with_its_expressions(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.workflow(compiled(ORDER), 1).activity("double", double)
    })
    .await;
    let c = r.client();
    let big = c
        .start_with(
            "shop/order",
            json!({"items": [1, 2, 3]}),
            StartOptions::id("big"),
        )
        .await
        .unwrap();
    let small = c
        .start_with(
            "shop/order",
            json!({"items": [1]}),
            StartOptions::id("small"),
        )
        .await
        .unwrap();
    let big: Value = big.wait(WAIT).await.unwrap().into_result().unwrap();
    // 2 + 4 + 6 = 12, doubled in the fork: 24 > 10.
    assert_eq!(big, json!({"shipping": "express", "branches": [2, 24]}));
    let small: Value = small.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(small, json!({"shipping": "standard", "branches": [2, 4]}));
    r.shutdown().await;
}

const APPROVAL: &str = r#"
document: {dsl: '1.0.0', namespace: shop, name: approval, version: '1.0.0'}
do:
  - ask:
      call: double
      with:
        n: ${ .amount }
      output:
        as: '${ {doubled: .} }'
      export:
        as: ${ . }
  - wait-for-it:
      listen:
        to:
          one:
            with:
              type: approved
      timeout:
        after: {seconds: 1}
  - decide:
      set:
        by: ${ .by }
        doubled: ${ $context.doubled }
"#;

async fn a_signal_continues_and_its_absence_times_out(store: Arc<dyn Store>) {
    let r = start(&store, |b| {
        b.workflow(compiled(APPROVAL), 1).activity("double", double)
    })
    .await;
    let c = r.client();
    let yes = c
        .start_with(
            "shop/approval",
            json!({"amount": 5}),
            StartOptions::id("yes"),
        )
        .await
        .unwrap();
    c.signal("yes", "approved", json!({"by": "ada"}))
        .await
        .unwrap();
    let out: Value = yes.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!({"by": "ada", "doubled": 10}));
    let late = c
        .start_with(
            "shop/approval",
            json!({"amount": 5}),
            StartOptions::id("late"),
        )
        .await
        .unwrap();
    let outcome = late.wait(WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "Timeout");
    assert!(error.message.contains("approved"), "{error}");
    r.shutdown().await;
}

const RETRIED: &str = r#"
document: {dsl: '1.0.0', namespace: shop, name: retried, version: '1.0.0'}
do:
  - pay:
      try:
        - charge:
            call: flaky
      catch:
        errors:
          with:
            status: 500
        as: failure
        retry:
          delay: {milliseconds: 50}
          backoff: {exponential: {}}
          limit:
            attempt: {count: 3}
        do:
          - refund:
              set:
                refunded: true
                why: ${ $failure.title }
  - check:
      if: ${ type == "number" and . < 0 }
      raise:
        error:
          type: https://example.com/errors/negative
          status: 422
          title: Negative
          detail: ${ "got \(.)" }
"#;

async fn errors_are_caught_retried_and_raised(store: Arc<dyn Store>) {
    let calls = Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    // Fails its first two calls, then answers the input; a negative input always fails.
    let flaky = move |_ctx: ActivityContext, n: i64| {
        let seen = seen.clone();
        async move {
            let call = seen.fetch_add(1, Ordering::SeqCst);
            if n > 0 && call < 2 {
                return Err(ActivityError::non_retryable("Declined", "try again"));
            }
            if n == 0 {
                return Err(ActivityError::non_retryable("Declined", "never"));
            }
            Ok(n)
        }
    };
    let r = start(&store, |b| {
        b.workflow(compiled(RETRIED), 1).activity("flaky", flaky)
    })
    .await;
    let c = r.client();
    // Two failures, then success on the third attempt, each after a durable timer.
    let ok = c
        .start_with("shop/retried", 7, StartOptions::id("ok"))
        .await
        .unwrap();
    let out: Value = ok.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!(7));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // Every attempt fails: the catch's `do` runs once retries are spent.
    let refunded = c
        .start_with("shop/retried", 0, StartOptions::id("refunded"))
        .await
        .unwrap();
    let out: Value = refunded.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!({"refunded": true, "why": "Declined"}));
    assert_eq!(calls.load(Ordering::SeqCst), 6);
    // An uncaught raise fails the instance with the error's title and detail.
    let negative = c
        .start_with("shop/retried", -1, StartOptions::id("negative"))
        .await
        .unwrap();
    let outcome = negative.wait(WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed);
    let error = outcome.error.unwrap();
    assert_eq!(
        (error.kind.as_str(), error.message.as_str()),
        ("Negative", "got -1")
    );
    r.shutdown().await;
}

const HUGE_RAISE: &str = r#"
document: {dsl: '1.0.0', namespace: shop, name: huge, version: '1.0.0'}
do:
  - boom:
      raise:
        error:
          type: https://example.com/errors/huge
          status: 500
          title: Huge
          detail: ${ "x" * . }
"#;

/// A raised error whose detail is 3 MB is kept cut (the detail's start in the message), with
/// its type, status, title and instance: the history and the instance stay small and readable.
async fn a_huge_raised_error_keeps_its_type_and_status(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.workflow(compiled(HUGE_RAISE), 1)).await;
    let c = r.client();
    let huge = c
        .start_with("shop/huge", 3_000_000, StartOptions::id("huge"))
        .await
        .unwrap();
    let outcome = huge.wait(WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed);
    let error = c.status("huge").await.unwrap().error.unwrap();
    assert_eq!(error, outcome.error.unwrap());
    assert_eq!(
        error.details,
        Some(
            json!({"type": "https://example.com/errors/huge", "status": 500,
                    "title": "Huge", "instance": "/do/0/boom"})
        )
    );
    assert!(error.message.len() < 32 << 10, "{}", error.message.len());
    assert!(
        error.message.ends_with("... (3000000 bytes) (its details' field `detail` was dropped: 3000106 bytes, over the limit of 1048576 bytes)"),
        "{}",
        &error.message[error.message.len() - 200..]
    );
    let history = c.history("huge").await.unwrap();
    let stored: usize = history
        .iter()
        .map(|h| serde_json::to_vec(&h.event).unwrap().len())
        .sum();
    assert!(stored < 64 << 10, "{stored} bytes of history");
    r.shutdown().await;
}

const TWO_STEPS: &str = r#"
document: {dsl: '1.0.0', namespace: shop, name: steps, version: 'VERSION'}
do:
  - first:
      call: count
  - pause:
      listen:
        to:
          one:
            with:
              type: go
  - last:
      set: '${ {version: "VERSION", go: .} }'
"#;

async fn a_workflow_resumes_in_a_new_runtime_on_the_version_it_started(store: Arc<dyn Store>) {
    let calls = Arc::new(AtomicU32::new(0));
    let count = |calls: Arc<AtomicU32>| {
        move |_ctx: ActivityContext, n: i64| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ActivityError>(n)
            }
        }
    };
    let v1 = TWO_STEPS.replace("VERSION", "1.0.0");
    let first = start(&store, |b| {
        b.workflow(compiled(&v1), 1)
            .activity("count", count(calls.clone()))
    })
    .await;
    first
        .client()
        .start_with("shop/steps", 1, StartOptions::id("old"))
        .await
        .unwrap();
    // Wait until the instance listens (its first step done), then lose the runtime.
    let deadline = std::time::Instant::now() + WAIT;
    while calls.load(Ordering::SeqCst) == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first step never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    first.shutdown().await;

    // A new runtime knows both versions, with a new cache: the old instance replays on 1.
    let v2 = TWO_STEPS.replace("VERSION", "2.0.0");
    let second = start(&store, |b| {
        b.workflow(compiled(&v1), 1)
            .workflow(compiled(&v2), 2)
            .activity("count", count(calls.clone()))
    })
    .await;
    let c = second.client();
    let new = c
        .start_with("shop/steps", 2, StartOptions::id("new"))
        .await
        .unwrap();
    c.signal("old", "go", "a").await.unwrap();
    c.signal("new", "go", "b").await.unwrap();
    let old: Value = c.wait("old", WAIT).await.unwrap().into_result().unwrap();
    let new: Value = new.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(old, json!({"version": "1.0.0", "go": "a"}));
    assert_eq!(new, json!({"version": "2.0.0", "go": "b"}));
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the old instance's first step ran once"
    );
    second.shutdown().await;
}

const SAGA: &str = r#"
document: {dsl: '1.0.0', namespace: shop, name: saga, version: '1.0.0'}
do:
  - book:
      try:
        - reserve:
            call: record
            with: {what: reserve}
        - pay:
            try:
              - charge:
                  call: record
                  with: {what: charge}
              - shipped:
                  listen:
                    to:
                      one:
                        with:
                          type: shipped
            catch:
              errors:
                with:
                  type: urn:ratchet:errors:cancelled
              as: why
              do:
                - refund:
                    call: record
                    with:
                      what: '${ "refund: " + $why.detail }'
      catch:
        errors:
          with:
            type: urn:ratchet:errors:cancelled
        do:
          - release:
              call: record
              with: {what: release}
"#;

async fn cancellation_runs_the_compensations_in_reverse_order(store: Arc<dyn Store>) {
    let done = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let log = done.clone();
    let record = move |_ctx: ActivityContext, args: Value| {
        let log = log.clone();
        async move {
            log.lock()
                .unwrap()
                .push(args["what"].as_str().unwrap_or("?").to_string());
            Ok::<_, ActivityError>(())
        }
    };
    let r = start(&store, |b| {
        b.workflow(compiled(SAGA), 1).activity("record", record)
    })
    .await;
    let c = r.client();
    c.start_with("shop/saga", json!(null), StartOptions::id("trip"))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + WAIT;
    while done.lock().unwrap().len() < 2 {
        assert!(std::time::Instant::now() < deadline, "never charged");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Let the turn that waits for the signal commit.
    tokio::time::sleep(Duration::from_millis(200)).await;
    c.cancel("trip", "plans changed").await.unwrap();
    let outcome = c.wait("trip", WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Cancelled);
    assert_eq!(
        *done.lock().unwrap(),
        ["reserve", "charge", "refund: plans changed", "release"],
        "the inner try compensates first"
    );
    r.shutdown().await;
}

const EMITS: &str = r#"
document: {dsl: '1.0.0', namespace: shop, name: emits, version: '1.0.0'}
do:
  - placed:
      emit:
        event:
          with:
            type: OrderPlaced
            source: https://shop.example
            tags: ['${ "order:" + .id }']
            data:
              total: ${ .total }
"#;

fn uuid_like(s: &str) -> bool {
    s.len() == 36 && s.chars().filter(|c| *c == '-').count() == 4
}

async fn emit_appends_to_the_event_store_once(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.workflow(compiled(EMITS), 1)).await;
    let c = r.client();
    let h = c
        .start_with(
            "shop/emits",
            json!({"id": "o7", "total": 12}),
            StartOptions::id("e1"),
        )
        .await
        .unwrap();
    let out: Value = h.wait(WAIT).await.unwrap().into_result().unwrap();
    let query =
        ratchet::EventQuery::item(ratchet::QueryItem::new(Vec::<String>::new(), ["order:o7"]));
    let page = c.events().read(query, None, 10).await.unwrap();
    assert_eq!(page.events.len(), 1, "{page:?}");
    let event = &page.events[0];
    assert_eq!(event.kind, "OrderPlaced");
    assert_eq!(event.payload, json!({"total": 12}));
    assert_eq!(event.metadata["source"], "https://shop.example");
    assert_eq!(event.metadata["specversion"], "1.0");
    // The task's output is the CloudEvent it emitted: what is stored, with the id and time
    // the runtime gave it (recorded, so a replay emits the same).
    let id = event.metadata["id"].as_str().unwrap();
    assert!(uuid_like(id), "{id}");
    assert_eq!(
        out,
        json!({
            "id": id,
            "specversion": "1.0",
            "source": "https://shop.example",
            "type": "OrderPlaced",
            "time": event.metadata["time"],
            "data": {"total": 12},
        })
    );
    assert!(out["time"].as_str().unwrap().ends_with('Z'), "{out}");
    r.shutdown().await;
}

const AWAITS: &str = r#"
document: {dsl: '1.0.0', namespace: shop, name: awaits, version: '1.0.0'}
do:
  - accepted:
      listen:
        to:
          one:
            with:
              type: QuoteAccepted
              tags: ['${ "quote:" + .id }']
      timeout:
        after:
          milliseconds: 1500
  - done:
      set: '${ {by: .data.by, tags: .tags} }'
"#;

/// `listen` with tags waits for an event of the event store: one appended before the listen
/// began, or with other tags, does not count; none in time is a timeout error.
async fn listen_waits_for_an_event_of_the_event_store(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.workflow(compiled(AWAITS), 1)).await;
    let c = r.client();
    let accepted = |quote: &str, by: &str| {
        vec![ratchet::NewEvent::new(
            "QuoteAccepted",
            [format!("quote:{quote}")],
            json!({"by": by}),
        )]
    };
    c.events()
        .append(accepted("q1", "too early"))
        .await
        .unwrap();
    let h = c
        .start_with("shop/awaits", json!({"id": "q1"}), StartOptions::id("a1"))
        .await
        .unwrap();
    // Once it waits (its head read), events for another quote and of another type pass by.
    let deadline = std::time::Instant::now() + WAIT;
    while c.history("a1").await.unwrap().len() < 6 {
        assert!(
            std::time::Instant::now() < deadline,
            "the listen never began"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    c.events()
        .append(accepted("q2", "someone else"))
        .await
        .unwrap();
    c.events()
        .append(vec![ratchet::NewEvent::new(
            "QuoteRejected",
            ["quote:q1"],
            json!({}),
        )])
        .await
        .unwrap();
    c.events().append(accepted("q1", "ana")).await.unwrap();
    let out: Value = h.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!({"by": "ana", "tags": ["quote:q1"]}));

    let h = c
        .start_with("shop/awaits", json!({"id": "q3"}), StartOptions::id("a2"))
        .await
        .unwrap();
    let outcome = h.wait(WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed, "{outcome:?}");
    let error = outcome.error.expect("a timeout error");
    assert!(
        error.message.contains("no `QuoteAccepted` event"),
        "{error:?}"
    );
    r.shutdown().await;
}

const COUNTER: &str = r#"
document: {dsl: '1.0.0', namespace: shop, name: counter, version: '1.0.0'}
do:
  - step:
      set:
        n: ${ .n + 1 }
      metadata:
        ratchet:
          status: '${ "at " + (.n | tostring) }'
  - again:
      if: ${ .n < 3 }
      set:
        n: ${ .n }
      metadata:
        ratchet:
          continueAsNew: ${ . }
"#;

async fn a_workflow_continues_as_new_and_sets_its_status(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.workflow(compiled(COUNTER), 1)).await;
    let c = r.client();
    let h = c
        .start_with("shop/counter", json!({"n": 0}), StartOptions::id("n1"))
        .await
        .unwrap();
    let out: Value = h.wait(WAIT).await.unwrap().into_result().unwrap();
    assert_eq!(out, json!({"n": 3}));
    let record = c.status("n1").await.unwrap();
    assert_eq!(
        record.execution, 2,
        "two continues-as-new: executions 0, 1 and 2"
    );
    assert_eq!(record.custom_status, Some(json!("at 3")));
    r.shutdown().await;
}

/// Expressions and loops that only go wrong on the data a signal brings: each fails its
/// own instance with `ExpressionBudget` (a `try` does not catch it), the runtime keeps
/// running, and an instance beside them finishes.
const HOSTILE: &str = r#"
document: {dsl: '1.0.0', namespace: shop, name: hostile, version: '1.0.0'}
do:
  - wait:
      listen:
        to:
          one:
            with: {type: go}
  - guarded:
      try:
        - bomb:
            switch:
              - recurse:
                  when: ${ .kind == "recurse" }
                  then: recurse
              - range:
                  when: ${ .kind == "range" }
                  then: range
              - loop:
                  when: ${ .kind == "loop" }
                  then: loop
              - fine:
                  then: exit
        - recurse:
            set: '${ .n as $n | def f: if $n == null then 0 else 1 + f end; f }'
            then: exit
        - range:
            set: ${ [range(.n // 0)] }
            then: exit
        - loop:
            set: {spin: true}
            then: loop
      catch:
        errors:
          with: {status: 400}
        do:
          - caught:
              set: {caught: true}
  - done:
      set: {done: true}
"#;

async fn budgets_fail_the_instance_that_runs_out(store: Arc<dyn Store>) {
    let r = start(&store, |b| b.workflow(compiled(HOSTILE), 1)).await;
    let c = r.client();
    let mut started = Vec::new();
    for kind in ["recurse", "range", "loop", "fine"] {
        let h = c
            .start_with("shop/hostile", json!({}), StartOptions::id(kind))
            .await
            .unwrap();
        c.signal(kind, "go", json!({"kind": kind, "n": 1e9}))
            .await
            .unwrap();
        started.push((kind, h));
    }
    for (kind, h) in started {
        let outcome = h.wait(WAIT).await.unwrap();
        if kind == "fine" {
            assert_eq!(outcome.output, Some(json!({"done": true})), "{outcome:?}");
            continue;
        }
        assert_eq!(outcome.status, InstanceStatus::Failed, "{kind}");
        let error = outcome.error.unwrap();
        assert_eq!(error.kind, "ExpressionBudget", "{kind}: {error}");
        let why = match kind {
            "recurse" => "recursion",
            "range" => "budget of 1000000 steps",
            _ => "between two durable steps",
        };
        assert!(error.message.contains(why), "{kind}: {error}");
    }
    r.shutdown().await;
}

/// A definition stored before a rule it breaks existed (here written straight into the
/// table): every worker registers it as failing, so its instances fail at once, naming why,
/// rather than waiting for a worker that will never run them.
async fn a_stored_definition_that_no_longer_compiles_fails_its_instances(store: Arc<dyn Store>) {
    let source = "document: {dsl: '1.0.0', namespace: old, name: halting, version: '1.0.0'}
do:
  - wait:
      listen:
        to:
          one:
            with: {type: go}
  - stop:
      set: ${ halt }
";
    let new = ratchet::NewWorkflow {
        namespace: "old".into(),
        name: "halting".into(),
        version: "1.0.0".into(),
        hash: "0".repeat(64),
        source: source.into(),
    };
    store
        .workflow_put(new, ratchet::Timestamp::now())
        .await
        .unwrap();
    let r = start(&store, |b| b).await;
    let _looking = ratchet::workflow::keep_registered(store.clone(), r.client().clone())
        .await
        .unwrap();
    let c = r.client();
    let h = c.start("old/halting", json!({})).await.unwrap();
    let outcome = h.wait(WAIT).await.unwrap();
    assert_eq!(outcome.status, InstanceStatus::Failed);
    let error = outcome.error.unwrap();
    assert_eq!(error.kind, "DefinitionInvalid");
    assert!(error.message.contains("`halt` is not available"), "{error}");
    r.shutdown().await;
}

crate::on_every_backend!(
    a_stored_definition_that_no_longer_compiles_fails_its_instances,
    budgets_fail_the_instance_that_runs_out,
    listen_waits_for_an_event_of_the_event_store,
    a_workflow_continues_as_new_and_sets_its_status,
    emit_appends_to_the_event_store_once,
    cancellation_runs_the_compensations_in_reverse_order,
    each_step_kind_runs_with_its_expressions,
    a_signal_continues_and_its_absence_times_out,
    errors_are_caught_retried_and_raised,
    a_huge_raised_error_keeps_its_type_and_status,
    a_workflow_resumes_in_a_new_runtime_on_the_version_it_started,
);
