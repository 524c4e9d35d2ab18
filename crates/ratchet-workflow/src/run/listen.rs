//! `listen`: signals and events of the event store, one, any or all of them, until a
//! condition or an ending event. Events are CloudEvents: the store follows the filters'
//! types and tags; each event that comes is then checked against the filters' other
//! attributes and correlations here, as a pure function of recorded values, and the wait
//! goes on after it when none matches.

use std::collections::HashMap;

use futures::future::BoxFuture;
use futures::FutureExt as _;
use ratchet_core::Timestamp;
use ratchet_store::{EventQuery, Position, QueryItem, StoredEvent};
use serde_json::{json, Value};

use super::{tags_of, truthy, Fault, Run};
use crate::expr::Scope;
use crate::model::{EventFilter, Filter, Task, Template, Until};

/// Most events of the store one `listen` reads and rejects (their other attributes or
/// correlations do not match): each is a step of the instance's history.
pub(crate) const MAX_REJECTED_EVENTS: u32 = 10_000;

/// Most events a `listen.to.any` with `until` consumes.
pub(crate) const MAX_CONSUMED_EVENTS: usize = 1_000;

/// A filter ready to check events: its store query item and its expected correlations.
#[derive(Clone)]
struct Ready<'a> {
    filter: &'a EventFilter,
    item: QueryItem,
    /// For each correlation, the value it must have (computed from the task's input), if
    /// the definition gives one.
    expect: Vec<Option<Value>>,
}

impl<'a> Ready<'a> {
    fn new(
        run: &Run,
        task: &Task,
        filter: &'a EventFilter,
        input: &Value,
        scope: &Scope,
    ) -> Result<Ready<'a>, Fault> {
        let tags = match &filter.tags {
            Some(t) => tags_of(run, t, input, scope, task)?,
            None => Vec::new(),
        };
        let item = QueryItem::new(filter.kind.iter().cloned(), tags);
        let expect = filter
            .correlate
            .iter()
            .map(|(_, _, expect)| match expect {
                Some(t) => run.fill(t, input, scope).map(Some),
                None => Ok(None),
            })
            .collect::<Result<_, _>>()?;
        Ok(Ready {
            filter,
            item,
            expect,
        })
    }

    /// Whether the store's `event` (and `cloud`, it as a CloudEvent) meets this filter; the
    /// correlations it establishes go into `correlated`. An expression that fails on the
    /// event rejects it: an event from outside cannot fail the instance.
    fn accepts(
        &self,
        run: &Run,
        event: &StoredEvent,
        cloud: &Value,
        scope: &Scope,
        correlated: &mut HashMap<String, Value>,
    ) -> Result<bool, Fault> {
        let f = self.filter;
        if f.kind.as_ref().is_some_and(|k| *k != event.kind)
            || !self.item.tags.iter().all(|t| event.tags.contains(t))
        {
            return Ok(false);
        }
        let lenient = |r: Result<Value, Fault>| match r {
            Ok(v) => Ok(Some(v)),
            Err(Fault::Error(_)) => Ok(None),
            Err(other) => Err(other),
        };
        for (key, wanted) in &f.with {
            let attribute = cloud.get(key).cloned().unwrap_or(Value::Null);
            let ok = match wanted {
                Template::Literal(v) => *v == attribute,
                Template::Expr(e) => match lenient(run.eval(e, &attribute, scope))? {
                    Some(Value::Bool(b)) => b,
                    Some(other) => other == attribute,
                    None => false,
                },
                other => lenient(run.fill(other, &attribute, scope))? == Some(attribute),
            };
            if !ok {
                return Ok(false);
            }
        }
        let mut found = Vec::new();
        for ((key, from, _), expect) in f.correlate.iter().zip(&self.expect) {
            let Some(value) = lenient(run.eval(from, cloud, scope))? else {
                return Ok(false);
            };
            match expect.as_ref().or_else(|| correlated.get(key)) {
                Some(expected) if *expected != value => return Ok(false),
                _ => found.push((key.clone(), value)),
            }
        }
        correlated.extend(found);
        Ok(true)
    }
}

/// What met a wait: the index of the filter (its list's order, the `until` filters after
/// the others) and its envelope.
type Met = (usize, Value);

/// One step of a wait: what met it, or `None` when the deadline passed first.
type Wait<'a> = BoxFuture<'a, Result<Option<Met>, Fault>>;

/// Follows the store from `after` for the first event one of `ready` accepts; returns it
/// with the position to follow on from.
async fn next_event(
    run: &Run,
    task: &Task,
    ready: &[(usize, Ready<'_>)],
    mut after: Position,
    deadline: Option<Timestamp>,
    scope: &Scope,
    correlated: &mut HashMap<String, Value>,
) -> Result<Option<(Met, Position)>, Fault> {
    // An empty list of filters is `any: []`: every event of the store.
    let query = EventQuery {
        items: ready.iter().map(|(_, r)| r.item.clone()).collect(),
    };
    let mut rejected = 0;
    loop {
        let got =
            ratchet_runtime::await_event_after(&run.ctx, query.clone(), after, deadline).await;
        let Some(event) = run.durable(got)? else {
            return Ok(None);
        };
        after = event.position;
        let cloud = event.to_cloud_event();
        if ready.is_empty() {
            return Ok(Some(((0, cloud), after)));
        }
        for (index, r) in ready {
            if r.accepts(run, &event, &cloud, scope, correlated)? {
                return Ok(Some(((*index, cloud), after)));
            }
        }
        rejected += 1;
        if rejected > MAX_REJECTED_EVENTS {
            return Err(Fault::error(
                "runtime",
                500,
                "Too many events rejected",
                format!(
                    "task `{}`: {MAX_REJECTED_EVENTS} events of the store matched its types and tags but not its other attributes or correlations; narrow the filter with `tags`",
                    task.name
                ),
            ));
        }
    }
}

/// What a wait for any of `filters` waited for, for its timeout error: "`a` signal or
/// `OrderCancelled` event".
fn waited_for(filters: &[Filter]) -> String {
    if filters.is_empty() {
        return "event".to_string();
    }
    let each: Vec<String> = filters
        .iter()
        .map(|f| match f {
            Filter::Signal(name) => format!("`{name}` signal"),
            Filter::Event(e) => match &e.kind {
                Some(kind) => format!("`{kind}` event"),
                None => "matching event".to_string(),
            },
        })
        .collect();
    each.join(" or ")
}

/// Waits for a signal until `deadline`: `None` when it passes first.
async fn signal(
    run: &Run,
    name: &str,
    deadline: Option<Timestamp>,
) -> Result<Option<Value>, Fault> {
    let ctx = &run.ctx;
    let payload = match deadline {
        Some(d) => run.durable(ctx.signal_timeout::<Value>(name, d.since(ctx.now())).await)?,
        None => Some(run.durable(ctx.signal::<Value>(name).await)?),
    };
    Ok(payload.map(|data| json!({"type": name, "data": data})))
}

/// `listen`: the envelopes of what it consumed, in order: one for `one` and `any`, one per
/// filter for `all`, and for `any` with `until` each until it holds; and the position of
/// the last event it read. The task's timeout bounds the whole listen; events count from
/// `from`, or from when it began.
#[allow(clippy::too_many_arguments)]
pub(super) async fn listen(
    run: &Run,
    task: &Task,
    all: bool,
    filters: &[Filter],
    until: Option<&Until>,
    input: &Value,
    scope: &Scope,
    from: Option<Position>,
) -> Result<(Vec<Value>, Position), Fault> {
    let ctx = &run.ctx;
    let deadline = task.timeout.map(|t| ctx.now().plus(t));
    let timed_out = |what: &str| {
        Fault::timeout(format!(
            "task `{}`: no {what} within {:?}",
            task.name,
            task.timeout.unwrap_or_default()
        ))
    };
    let ending: &[Filter] = match until {
        Some(Until::Event(filters)) => filters,
        _ => &[],
    };
    let every: Vec<&Filter> = filters.iter().chain(ending).collect();
    let mut ready = Vec::new();
    for (i, f) in every.iter().enumerate() {
        if let Filter::Event(e) = f {
            ready.push((i, Ready::new(run, task, e, input, scope)?));
        }
    }
    // Events count from here: one step reads the store's head.
    let follows = !ready.is_empty() || filters.is_empty();
    let head = match from {
        Some(p) => p,
        None if follows => run.durable(ratchet_runtime::events_head(ctx).await)?,
        None => Position(0),
    };
    let mut correlated = HashMap::new();
    if all {
        let mut last = head;
        let mut got = Vec::new();
        for (i, f) in filters.iter().enumerate() {
            let one = match f {
                Filter::Signal(name) => signal(run, name, deadline).await?,
                Filter::Event(_) => {
                    let mine: Vec<_> = ready.iter().filter(|(j, _)| *j == i).cloned().collect();
                    next_event(run, task, &mine, head, deadline, scope, &mut correlated)
                        .await?
                        .map(|((_, e), at)| {
                            last = last.max(at);
                            e
                        })
                }
            };
            match one {
                Some(v) => got.push(v),
                None => return Err(timed_out("event or signal of `listen.to.all`")),
            }
        }
        return Ok((got, last));
    }
    // Any: one wait for the store's events, one for each signal, and the deadline's timer;
    // with `until`, again after each, following the store on from the last event.
    let mut got = Vec::new();
    let mut after = head;
    loop {
        let mut cursor = None;
        let mut waits: Vec<Wait<'_>> = Vec::new();
        for (i, f) in every.iter().enumerate() {
            if let Filter::Signal(name) = f {
                let name = name.clone();
                waits.push(
                    async move {
                        let data = run.ctx.signal::<Value>(&name).await?;
                        Ok(Some((i, json!({"type": name, "data": data}))))
                    }
                    .boxed(),
                );
            }
        }
        let racing_signals = !waits.is_empty();
        if follows {
            let (ready, correlated, cursor) = (&ready, &mut correlated, &mut cursor);
            waits.push(
                async move {
                    let found =
                        next_event(run, task, ready, after, deadline, scope, correlated).await?;
                    Ok(found.map(|(met, at)| {
                        *cursor = Some(at);
                        met
                    }))
                }
                .boxed(),
            );
        }
        // The store's follower stops at the deadline by itself; signals need a timer.
        if let (Some(d), true) = (deadline, racing_signals) {
            waits.push(
                async move {
                    run.ctx.sleep(d.since(run.ctx.now())).await?;
                    Ok(None)
                }
                .boxed(),
            );
        }
        let (_, first) = ratchet_core::race(waits).await;
        let met = run.durable(first)?;
        if let Some(at) = cursor {
            after = at;
        }
        let Some((index, envelope)) = met else {
            if until.is_some() {
                return Err(timed_out("end of `listen.to.until`"));
            }
            return Err(timed_out(&waited_for(filters)));
        };
        let Some(until) = until else {
            return Ok((vec![envelope], after));
        };
        // An event of `until`'s own filters ends it and is not part of the output.
        if index >= filters.len() {
            return Ok((got, after));
        }
        got.push(envelope);
        if let Until::Holds(condition) = until {
            let so_far = Value::Array(got.clone());
            if truthy(&run.eval(condition, &so_far, scope)?) {
                return Ok((got, after));
            }
        }
        if got.len() >= MAX_CONSUMED_EVENTS {
            return Err(Fault::error(
                "runtime",
                500,
                "Too many events",
                format!(
                    "task `{}`: consumed {MAX_CONSUMED_EVENTS} events without meeting `listen.to.until`",
                    task.name
                ),
            ));
        }
    }
}
