//! The interpreter: a compiled workflow run as an ordinary Ratchet orchestration. Every
//! durable step (activity, timer, signal, sub-workflow) goes through the orchestration
//! context, so replay, caching, batching, crash recovery and cancellation work as for Rust
//! code; expressions are pure functions of recorded values, so replay computes the same.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::FutureExt as _;
use ratchet_core::{ActivityOptions, ErrorInfo, OrchestrationContext, OrchestrationError};
use serde_json::{json, Value};
use sha2::Digest as _;

use crate::call::{self, CallInput, Credentials, Target};
use crate::expr::{EvalError, Expr, Scope, EVAL_FUEL};
use crate::model::{
    Auth, Block, CallOutput, Catch, Endpoint, ErrorTemplate, Flow, Kind, Schema, Task, Template,
};
use crate::Workflow;

mod listen;
mod process;

/// The DSL's error types, as its specification names them.
const ERRORS: &str = "https://serverlessworkflow.io/spec/1.0.0/errors";

/// Other spellings of the standard error types in the specification's texts (its
/// conformance kit writes `.../dsl/errors/types/communication`): a `catch` that names a
/// standard type in any of them matches it.
const ERROR_TYPE_PREFIXES: [&str; 3] = [
    "https://serverlessworkflow.io/spec/1.0.0/errors/",
    "https://serverlessworkflow.io/dsl/errors/types/",
    "https://serverlessworkflow.io/spec/1.0/errors/",
];

/// The standard error type a `type` names, when it names one: `communication`.
fn standard_type(t: &str) -> Option<&str> {
    ERROR_TYPE_PREFIXES
        .iter()
        .find_map(|p| t.strip_prefix(p))
        .filter(|rest| !rest.is_empty() && !rest.contains('/'))
}

/// True when the error field `key` of a raised error matches what a `catch` filters on.
fn field_matches(key: &str, filter: &Value, raised: Option<&Value>) -> bool {
    let Some(raised) = raised else { return false };
    if key == "type" {
        if let (Some(f), Some(r)) = (filter.as_str(), raised.as_str()) {
            if let (Some(a), Some(b)) = (standard_type(f), standard_type(r)) {
                return a == b;
            }
        }
    }
    filter == raised
}

/// The type of the error a cancelled instance's pending step sees. A `catch` that names it
/// runs its `do` (compensation) and the cancellation goes on outward, so nested `try`s undo
/// their work in reverse order, as a saga does.
pub const CANCELLED: &str = "urn:ratchet:errors:cancelled";

/// Why a task did not complete.
enum Fault {
    /// A workflow error (the DSL's problem-details object): `try` may catch it.
    Error(Value),
    /// The instance was cancelled: a `catch` of [`CANCELLED`] compensates, then it goes on.
    Cancelled(OrchestrationError),
    /// The engine's own (continue-as-new, a bad payload): never caught.
    Engine(OrchestrationError),
}

impl Fault {
    fn error(
        kind: &str,
        status: u16,
        title: impl Into<String>,
        detail: impl Into<String>,
    ) -> Fault {
        Fault::Error(json!({
            "type": format!("{ERRORS}/{kind}"),
            "status": status,
            "title": title.into(),
            "detail": detail.into(),
        }))
    }

    fn expression(message: String) -> Fault {
        Fault::error("expression", 400, "Expression failed", message)
    }

    fn timeout(message: String) -> Fault {
        Fault::error("timeout", 408, "Timeout", message)
    }

    /// What the instance ends with when this fault reaches its top: a workflow error as the
    /// instance's error, the engine's own as they are.
    fn into_instance_error(self) -> OrchestrationError {
        match self {
            Fault::Engine(e) | Fault::Cancelled(e) => e,
            Fault::Error(error) => OrchestrationError::Application(info_of(&error)),
        }
    }

    /// The workflow ran out of its budget: the instance fails, whatever `try` it is in.
    fn budget(message: String) -> Fault {
        Fault::Engine(OrchestrationError::Application(ErrorInfo::new(
            "ExpressionBudget",
            message,
        )))
    }
}

/// Steps the workflow's own code (its expressions, and what running each task costs) may
/// take between two durable steps (an activity, a timer, a signal, an event, a
/// sub-workflow): a turn's worth. A `then:` loop that never waits on anything runs out of it
/// and fails its instance instead of holding a thread of the process forever. Counted the
/// same on every run, so a replay fails at the same task.
pub const TURN_FUEL: u64 = 10 * EVAL_FUEL;

/// What running one task costs the turn, besides its expressions.
const TASK_FUEL: u64 = 100;

impl From<OrchestrationError> for Fault {
    fn from(e: OrchestrationError) -> Fault {
        match e {
            OrchestrationError::Activity { name, error, .. } if name == call::CALL_ACTIVITY => {
                if error.kind == call::TIMEOUT {
                    Fault::timeout(error.message)
                } else if error.kind == call::AUTHORIZATION {
                    Fault::error("authorization", 403, "Authorization error", error.message)
                } else {
                    Fault::error("communication", 503, "Communication error", error.message)
                }
            }
            OrchestrationError::Activity { name, error, .. }
                if name == crate::process::PROCESS_ACTIVITY
                    && error.kind == crate::process::PROCESS_TIMEOUT =>
            {
                Fault::timeout(error.message)
            }
            OrchestrationError::Activity {
                name,
                error,
                attempts,
            } => Fault::Error(json!({
                "type": format!("{ERRORS}/runtime"),
                "status": 500,
                "title": error.kind,
                "detail": format!("activity `{name}` failed after {attempts} attempt(s): {}", error.message),
            })),
            OrchestrationError::SubOrchestration { instance, error } => Fault::Error(json!({
                "type": format!("{ERRORS}/runtime"),
                "status": 500,
                "title": error.kind,
                "detail": format!("sub-workflow {instance} failed: {}", error.message),
            })),
            cancelled @ OrchestrationError::Cancelled { .. } => Fault::Cancelled(cancelled),
            other => Fault::Engine(other),
        }
    }
}

/// What every task of one run shares.
struct Run {
    ctx: OrchestrationContext,
    /// The definition: its `use.functions`.
    definition: Arc<Workflow>,
    /// `$context`: what tasks exported.
    context: Mutex<Arc<Value>>,
    /// `$workflow`.
    workflow: Arc<Value>,
    /// Fuel left until the next durable step ([`TURN_FUEL`] after each).
    fuel: AtomicU64,
    /// The definition's hash: an OpenAPI document is read once per revision.
    revision: String,
    /// Calls that succeeded, by task path: part of the next call's idempotency key, so a
    /// retried call keeps its key and a call made again (a loop) gets a new one.
    answered: Mutex<HashMap<String, u64>>,
}

impl Run {
    fn context(&self) -> Arc<Value> {
        self.context
            .lock()
            .map(|c| c.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    fn set_context(&self, value: Value) {
        match self.context.lock() {
            Ok(mut c) => *c = Arc::new(value),
            Err(p) => *p.into_inner() = Arc::new(value),
        }
    }

    /// The variables a task's expressions see: the enclosing ones, its input and the
    /// workflow's context. Copying the input is charged to the turn by its size.
    fn scope(&self, outer: &Scope, input: &Value) -> Result<Scope, Fault> {
        self.spend(nodes(input), "copying task inputs")?;
        let mut scope = outer.clone();
        scope.insert("$input".into(), Arc::new(input.clone()));
        scope.insert("$context".into(), self.context());
        scope.insert("$workflow".into(), self.workflow.clone());
        Ok(scope)
    }

    /// Charges the turn `units` of fuel for `what`.
    fn spend(&self, units: u64, what: &str) -> Result<(), Fault> {
        let spent = self
            .fuel
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(units)
            });
        spent.map(|_| ()).map_err(|_| {
            self.fuel.store(0, Ordering::Relaxed);
            Fault::budget(out_of_turn(what))
        })
    }

    /// A durable step is done: the next turn's worth of fuel starts.
    fn durable<T>(&self, result: T) -> T {
        self.fuel.store(TURN_FUEL, Ordering::Relaxed);
        result
    }

    /// Runs an expression within the budgets: its own, and what is left of the turn's.
    fn eval(&self, expr: &Expr, input: &Value, scope: &Scope) -> Result<Value, Fault> {
        let left = self.fuel.load(Ordering::Relaxed);
        let budget = left.min(EVAL_FUEL);
        let (result, used) = expr.eval_with(input, scope, budget);
        self.fuel.fetch_sub(used.min(left), Ordering::Relaxed);
        result.map_err(|e| match e {
            EvalError::Failed(message) => Fault::expression(message),
            EvalError::Exhausted(_) if budget < EVAL_FUEL && used >= budget => {
                let code: String = expr.code.chars().take(80).collect();
                Fault::budget(out_of_turn(&format!("in `{code}`")))
            }
            EvalError::Exhausted(message) => Fault::budget(message),
        })
    }

    fn fill(&self, template: &Template, input: &Value, scope: &Scope) -> Result<Value, Fault> {
        Ok(match template {
            Template::Literal(v) => v.clone(),
            Template::Expr(e) => self.eval(e, input, scope)?,
            Template::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|t| self.fill(t, input, scope))
                    .collect::<Result<_, _>>()?,
            ),
            Template::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(k, t)| Ok((k.clone(), self.fill(t, input, scope)?)))
                    .collect::<Result<_, Fault>>()?,
            ),
        })
    }
}

/// Why a turn stopped, for its error.
fn out_of_turn(what: &str) -> String {
    format!(
        "the workflow ran out of its budget of {TURN_FUEL} steps between two durable steps ({what}): a loop that never waits on anything, or too much work for one turn"
    )
}

/// The number of nodes of a JSON value: what copying it costs.
fn nodes(v: &Value) -> u64 {
    let mut count = 0;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        count += 1;
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(fields) => stack.extend(fields.values()),
            _ => {}
        }
    }
    count
}

fn truthy(v: &Value) -> bool {
    !matches!(v, Value::Null | Value::Bool(false))
}

/// Runs `workflow` on `input`: the orchestration's body.
pub(crate) async fn run(
    ctx: OrchestrationContext,
    workflow: Arc<Workflow>,
    input: Value,
) -> Result<Value, OrchestrationError> {
    let run = Run::new(ctx, &workflow, &input);
    let body = async {
        let scope = run.scope(&Scope::new(), &input)?;
        valid(
            &workflow.schemas.input,
            &input,
            "the workflow's input",
            "input",
        )?;
        let input = match &workflow.input_from {
            Some(t) => run.fill(t, &input, &scope)?,
            None => input.clone(),
        };
        let (output, _) = block(&run, &workflow.body, input, &Scope::new()).await?;
        let output = match &workflow.output_as {
            Some(t) => run.fill(t, &output, &run.scope(&Scope::new(), &output)?)?,
            None => output,
        };
        valid(
            &workflow.schemas.output,
            &output,
            "the workflow's output",
            "output",
        )?;
        Ok(output)
    }
    .boxed();
    // A workflow's `timeout` races its body against a durable timer.
    let outcome = match workflow.timeout {
        None => body.await,
        Some(limit) => {
            let timer = async {
                run.ctx.sleep(limit).await.map_err(Fault::from)?;
                Err(Fault::timeout(format!(
                    "the workflow did not finish within its timeout of {limit:?}"
                )))
            }
            .boxed();
            ratchet_core::race(vec![body, timer]).await.1
        }
    };
    outcome.map_err(Fault::into_instance_error)
}

impl Run {
    fn new(ctx: OrchestrationContext, workflow: &Arc<Workflow>, input: &Value) -> Run {
        let started = ctx.now();
        Run {
            workflow: Arc::new(json!({
                "id": ctx.instance_id(),
                "input": input,
                "definition": {
                    "namespace": workflow.namespace,
                    "name": workflow.name,
                    "version": workflow.version,
                },
                "startedAt": { "epoch": { "milliseconds": started.as_millis() } },
            })),
            context: Mutex::new(Arc::new(json!({}))),
            fuel: AtomicU64::new(TURN_FUEL),
            revision: workflow.hash.clone(),
            definition: workflow.clone(),
            answered: Mutex::new(HashMap::new()),
            ctx,
        }
    }
}

/// Workflows one execution of a trigger starts before it continues as new, so its history
/// stays short however long it listens.
pub(crate) const TRIGGER_STARTS_PER_EXECUTION: u32 = 100;

/// A workflow's trigger (`schedule.on`): listens for the events its strategy names, from
/// the position its input gives (`{"after": N}`; none: from when it first runs), and for
/// each consumption starts the workflow with them (one event, or a list for `all` and
/// `until`) as instance `namespace/name:on:P`, where P is the position of the last event it
/// read, so each starts once whatever the crashes. It continues as new every
/// [`TRIGGER_STARTS_PER_EXECUTION`] starts.
pub(crate) async fn trigger(
    ctx: OrchestrationContext,
    workflow: Arc<Workflow>,
    input: Value,
) -> Result<Value, OrchestrationError> {
    let Some(crate::DslSchedule::On(crate::Trigger(task))) = &workflow.schedule else {
        return Err(OrchestrationError::Application(ErrorInfo::new(
            "NoTrigger",
            "this workflow has no `schedule.on`",
        )));
    };
    let Kind::ListenMany {
        all,
        filters,
        until,
        ..
    } = &task.kind
    else {
        return Err(OrchestrationError::Application(ErrorInfo::new(
            "NoTrigger",
            "`schedule.on` is not a strategy of events",
        )));
    };
    let run = Run::new(ctx, &workflow, &input);
    let name = workflow.orchestration_name();
    let mut after = input
        .get("after")
        .and_then(Value::as_u64)
        .map(ratchet_store::Position);
    let scope = run
        .scope(&Scope::new(), &input)
        .map_err(Fault::into_instance_error)?;
    for _ in 0..TRIGGER_STARTS_PER_EXECUTION {
        let (mut got, last) = listen::listen(
            &run,
            task,
            *all,
            filters,
            until.as_ref(),
            &input,
            &scope,
            after,
        )
        .await
        .map_err(Fault::into_instance_error)?;
        after = Some(last);
        let events = if *all || until.is_some() {
            Value::Array(got)
        } else {
            got.pop().unwrap_or(Value::Null)
        };
        let id = format!("{name}:on:{last}");
        run.durable(ratchet_runtime::start_instance(&run.ctx, &name, &id, events).await)?;
    }
    run.ctx
        .continue_as_new(json!({ "after": after.map(|p| p.0) }))
}

/// An uncaught workflow error as the instance's error: its title (or type) and detail, and
/// the error whole in its details.
fn info_of(error: &Value) -> ErrorInfo {
    let text = |key: &str| error.get(key).and_then(Value::as_str).map(str::to_string);
    let kind = text("title")
        .or_else(|| text("type").map(|t| t.rsplit('/').next().unwrap_or_default().to_string()))
        .unwrap_or_else(|| "WorkflowError".to_string());
    let message = text("detail")
        .or_else(|| text("title"))
        .unwrap_or_else(|| error.to_string());
    ErrorInfo::new(kind, message).with_details(error.clone())
}

/// Runs a task list from its first task; `true` when a task ended the workflow.
fn block<'a>(
    run: &'a Run,
    block: &'a Block,
    input: Value,
    outer: &'a Scope,
) -> BoxFuture<'a, Result<(Value, bool), Fault>> {
    async move {
        let mut value = input;
        let mut i = 0;
        while let Some(task) = block.tasks.get(i) {
            let (output, flow) = self::task(run, task, value, outer).await?;
            value = output;
            match flow {
                Flow::Continue => i += 1,
                Flow::Goto(j) => i = j,
                Flow::Exit => return Ok((value, false)),
                Flow::End => return Ok((value, true)),
            }
        }
        Ok((value, false))
    }
    .boxed()
}

fn task<'a>(
    run: &'a Run,
    task: &'a Task,
    raw: Value,
    outer: &'a Scope,
) -> BoxFuture<'a, Result<(Value, Flow), Fault>> {
    async move {
        match run_task(run, task, raw, outer).await {
            // An error says where it was raised: the innermost task that raised it.
            Err(Fault::Error(mut error)) => {
                if let Value::Object(fields) = &mut error {
                    fields
                        .entry("instance")
                        .or_insert_with(|| Value::String(task.path.clone()));
                }
                Err(Fault::Error(error))
            }
            other => other,
        }
    }
    .boxed()
}

/// Data that must match a schema: the DSL's validation error when it does not.
fn valid(schema: &Option<Schema>, value: &Value, whose: &str, key: &str) -> Result<(), Fault> {
    match schema {
        Some(s) => s.check(value).map_err(|why| {
            Fault::error(
                "validation",
                400,
                "Validation error",
                format!("{whose} does not match its {key}.schema: {why}"),
            )
        }),
        None => Ok(()),
    }
}

async fn run_task(
    run: &Run,
    task: &Task,
    raw: Value,
    outer: &Scope,
) -> Result<(Value, Flow), Fault> {
    {
        // The variables are built once for what the task received, and again only when
        // `input.from` makes its input something else.
        run.spend(TASK_FUEL, "running tasks")?;
        let raw_scope = run.scope(outer, &raw)?;
        if let Some(when) = &task.when {
            if !truthy(&run.eval(when, &raw, &raw_scope)?) {
                return Ok((raw, Flow::Continue));
            }
        }
        let whose = |what: &str| format!("task `{}`'s {what}", task.name);
        valid(&task.schemas.input, &raw, &whose("input"), "input")?;
        let (input, scope) = match &task.input_from {
            Some(t) => {
                let input = run.fill(t, &raw, &raw_scope)?;
                let scope = run.scope(outer, &input)?;
                (input, scope)
            }
            None => (raw, raw_scope),
        };
        if !run.ctx.is_replaying() {
            tracing::debug!(target: "ratchet_workflow::task", instance = %run.ctx.instance_id(),
                task = %task.name, path = %task.path, "task runs");
        }
        let (output, flow) = kind(run, task, input, &scope).await?;
        let output = match &task.output_as {
            Some(t) => run.fill(t, &output, &scope)?,
            None => output,
        };
        valid(&task.schemas.output, &output, &whose("output"), "output")?;
        if let Some(t) = &task.export_as {
            let context = run.fill(t, &output, &scope)?;
            valid(
                &task.schemas.export,
                &context,
                &whose("exported context"),
                "export",
            )?;
            run.set_context(context);
        }
        if let Some(t) = &task.status {
            run.ctx.set_custom_status(run.fill(t, &output, &scope)?);
        }
        if let Some(t) = &task.continue_as_new {
            let next = run.fill(t, &output, &scope)?;
            return match run.ctx.continue_as_new::<()>(next) {
                Err(e) => Err(Fault::Engine(e)),
                Ok(()) => Ok((output, flow)),
            };
        }
        Ok((output, flow))
    }
}

async fn kind(run: &Run, task: &Task, input: Value, scope: &Scope) -> Result<(Value, Flow), Fault> {
    let ctx = &run.ctx;
    let then = task.then;
    let output = match &task.kind {
        Kind::Do(body) => {
            let (output, ended) = block(run, body, input, scope).await?;
            return Ok((output, if ended { Flow::End } else { then }));
        }
        Kind::Set(t) => run.fill(t, &input, scope)?,
        Kind::Switch(cases) => {
            for case in cases {
                let matched = match &case.when {
                    None => true,
                    Some(when) => truthy(&run.eval(when, &input, scope)?),
                };
                if matched {
                    return Ok((input, case.then));
                }
            }
            input
        }
        Kind::For {
            each,
            at,
            list,
            while_,
            body,
        } => {
            let items = match run.eval(list, &input, scope)? {
                Value::Array(items) => items,
                Value::Null => Vec::new(),
                other => {
                    return Err(Fault::expression(format!(
                        "task `{}`: for.in gave {other}, not a list",
                        task.name
                    )))
                }
            };
            let mut value = input;
            for (index, item) in items.into_iter().enumerate() {
                let mut inner = scope.clone();
                inner.insert(each.clone(), Arc::new(item));
                inner.insert(at.clone(), Arc::new(json!(index)));
                if let Some(w) = while_ {
                    if !truthy(&run.eval(w, &value, &inner)?) {
                        break;
                    }
                }
                let (output, ended) = block(run, body, value, &inner).await?;
                value = output;
                if ended {
                    return Ok((value, Flow::End));
                }
            }
            value
        }
        Kind::Fork { compete, branches } => {
            let runs: Vec<_> = branches
                .tasks
                .iter()
                .map(|b| self::task(run, b, input.clone(), scope))
                .collect();
            if *compete {
                let (_, first) = ratchet_core::race(runs).await;
                first?.0
            } else {
                let outputs = ratchet_core::join_all(runs).await;
                Value::Array(
                    outputs
                        .into_iter()
                        .map(|o| o.map(|(v, _)| v))
                        .collect::<Result<_, _>>()?,
                )
            }
        }
        Kind::Function { name, with } => {
            let args = match with {
                Some(t) => run.fill(t, &input, scope)?,
                None => input.clone(),
            };
            let Some(function) = run.definition.functions.get(name) else {
                return Err(Fault::expression(format!(
                    "task `{}`: no function `{name}` in use.functions",
                    task.name
                )));
            };
            // A function sees only its arguments and the workflow's variables.
            self::task(run, function, args, &Scope::new()).await?.0
        }
        Kind::Call { activity, with } => {
            let arg = match with {
                Some(t) => run.fill(t, &input, scope)?,
                None => input.clone(),
            };
            let mut options = ActivityOptions::default();
            if let Some(t) = task.timeout {
                options.start_to_close_ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX);
            }
            run.durable(ctx.activity_with::<Value>(activity, arg, options).await)?
        }
        Kind::Wait(d) => {
            run.durable(ctx.sleep(*d).await)?;
            input
        }
        Kind::Listen { signal } => match task.timeout {
            Some(t) => match run.durable(ctx.signal_timeout::<Value>(signal, t).await)? {
                Some(payload) => payload,
                None => {
                    return Err(Fault::timeout(format!(
                        "task `{}`: no `{signal}` signal within {t:?}",
                        task.name
                    )))
                }
            },
            None => run.durable(ctx.signal::<Value>(signal).await)?,
        },
        Kind::ListenMany {
            all,
            filters,
            data_only,
            one: _,
            until,
        } => {
            let (mut got, _) = listen::listen(
                run,
                task,
                *all,
                filters,
                until.as_ref(),
                &input,
                scope,
                None,
            )
            .await?;
            if *data_only {
                for e in &mut got {
                    *e = e["data"].take();
                }
            }
            // `all` and `until` give a list; `one` and `any` the one that came.
            if *all || until.is_some() {
                Value::Array(got)
            } else {
                got.pop().unwrap_or(Value::Null)
            }
        }
        Kind::Emit(t) => {
            let attributes = run.fill(t, &input, scope)?;
            let (event, cloud) = event_of(run, attributes)
                .map_err(|m| Fault::expression(format!("task `{}`: {m}", task.name)))?;
            run.durable(ratchet_runtime::append_events(ctx, vec![event], None).await)?;
            cloud
        }
        Kind::Http(c) => {
            let target = Target::Http {
                method: text_of(run.fill(&c.method, &input, scope)?, "with.method", task)?
                    .to_ascii_uppercase(),
                uri: uri_of(run, &c.endpoint, &input, scope, task)?,
                headers: strings_of(run, c.headers.as_ref(), &input, scope, task, "headers")?,
                query: strings_of(run, c.query.as_ref(), &input, scope, task, "query")?,
                body: match &c.body {
                    Some(b) => Some(run.fill(b, &input, scope)?),
                    None => None,
                },
                auth: credentials(run, c.endpoint.auth.as_ref(), &input, scope, task)?,
            };
            call_out(run, task, target, c.output, c.redirect, scope).await?
        }
        Kind::OpenApi(c) => {
            let parameters = match &c.parameters {
                None => serde_json::Map::new(),
                Some(p) => match run.fill(p, &input, scope)? {
                    Value::Object(fields) => fields,
                    other => {
                        return Err(Fault::expression(format!(
                            "task `{}`: with.parameters gave {other}, not an object",
                            task.name
                        )))
                    }
                },
            };
            let target = Target::Openapi {
                document: uri_of(run, &c.document, &input, scope, task)?,
                document_auth: credentials(run, c.document.auth.as_ref(), &input, scope, task)?,
                revision: run.revision.clone(),
                operation_id: c.operation.clone(),
                parameters,
                auth: credentials(run, c.auth.as_ref(), &input, scope, task)?,
            };
            call_out(run, task, target, c.output, c.redirect, scope).await?
        }
        Kind::Grpc(c) => {
            let arguments = match &c.arguments {
                None => serde_json::Map::new(),
                Some(a) => match run.fill(a, &input, scope)? {
                    Value::Object(fields) => fields,
                    other => {
                        return Err(Fault::expression(format!(
                            "task `{}`: with.arguments gave {other}, not an object",
                            task.name
                        )))
                    }
                },
            };
            let port = match &c.port {
                None => 443,
                Some(p) => {
                    let given = run.fill(p, &input, scope)?;
                    given
                        .as_u64()
                        .or_else(|| given.as_str().and_then(|s| s.trim().parse().ok()))
                        .and_then(|n| u16::try_from(n).ok())
                        .filter(|n| *n > 0)
                        .ok_or_else(|| {
                            Fault::expression(format!(
                                "task `{}`: with.service.port gave {given}, not a port",
                                task.name
                            ))
                        })?
                }
            };
            let target = Target::Grpc(Box::new(call::GrpcTarget {
                proto: uri_of(run, &c.proto, &input, scope, task)?,
                proto_auth: credentials(run, c.proto.auth.as_ref(), &input, scope, task)?,
                revision: run.revision.clone(),
                service: c.service.clone(),
                host: text_of(run.fill(&c.host, &input, scope)?, "with.service.host", task)?,
                port,
                method: c.method.clone(),
                arguments,
                auth: credentials(run, c.auth.as_ref(), &input, scope, task)?,
            }));
            call_out(run, task, target, CallOutput::Content, false, scope).await?
        }
        Kind::Process(p) => process::process(run, task, p, &input, scope).await?,
        Kind::Raise(error) => return Err(Fault::Error(raised(run, error, &input, scope)?)),
        Kind::Try { body, catch } => return try_catch(run, task, body, catch, input, scope).await,
        Kind::Run {
            orchestration,
            input: t,
            ..
        } => {
            let arg = run.fill(t, &input, scope)?;
            run.durable(ctx.sub_orchestration::<Value>(orchestration, arg).await)?
        }
    };
    Ok((output, then))
}

fn raised(run: &Run, error: &ErrorTemplate, input: &Value, scope: &Scope) -> Result<Value, Fault> {
    let mut e = json!({
        "type": run.fill(&error.kind, input, scope)?,
        "status": run.fill(&error.status, input, scope)?,
    });
    if let Some(t) = &error.title {
        e["title"] = run.fill(t, input, scope)?;
    }
    if let Some(t) = &error.detail {
        e["detail"] = run.fill(t, input, scope)?;
    }
    Ok(e)
}

async fn try_catch(
    run: &Run,
    task: &Task,
    body: &Block,
    catch: &Catch,
    input: Value,
    scope: &Scope,
) -> Result<(Value, Flow), Fault> {
    let mut attempt = 1;
    let began = run.ctx.now();
    loop {
        let error = match attempt_of(run, task, body, catch, attempt, input.clone(), scope).await {
            Ok((output, ended)) => return Ok((output, if ended { Flow::End } else { task.then })),
            Err(Fault::Error(error)) => error,
            Err(Fault::Cancelled(cancelled)) => {
                return compensate(run, catch, cancelled, input, scope).await
            }
            Err(engine) => return Err(engine),
        };
        let mut inner = scope.clone();
        inner.insert(catch.var.clone(), Arc::new(error.clone()));
        let filtered = catch
            .with
            .iter()
            .all(|(k, v)| field_matches(k, v, error.get(k)));
        let admitted = admits(run, &catch.when, &catch.except_when, &error, &inner)?;
        if !(filtered && admitted) {
            return Err(Fault::Error(error));
        }
        if let Some(retry) = &catch.retry {
            if attempt < retry.attempts
                && admits(run, &retry.when, &retry.except_when, &error, &inner)?
            {
                // Jitter from a value recorded in history: a replay waits the same.
                let random = if retry.jitter.is_some() {
                    run.ctx.random()
                } else {
                    0.0
                };
                let delay = retry.delay_before(attempt, random);
                // `limit.duration`: no retry starts once it has passed since the first
                // attempt began (the instance's clock, recorded, so a replay agrees).
                let too_late = retry.limit.is_some_and(|limit| {
                    let waited = run.ctx.now().as_millis().saturating_sub(began.as_millis());
                    let start_at = u128::try_from(waited).unwrap_or(0) + delay.as_millis();
                    start_at >= limit.as_millis()
                });
                if !too_late {
                    // A durable timer: a crash during the back-off resumes it, not restarts it.
                    run.durable(run.ctx.sleep(delay).await)?;
                    attempt += 1;
                    continue;
                }
            }
        }
        return match &catch.body {
            Some(handler) => {
                let (output, ended) = block(run, handler, input, &inner).await?;
                Ok((output, if ended { Flow::End } else { task.then }))
            }
            None => Ok((input, task.then)),
        };
    }
}

/// One attempt of a `try`'s body; with `limit.attempt.duration`, raced against a durable
/// timer, so an attempt that runs longer fails with the DSL's timeout error (which the
/// `catch` may retry) and what it left running is abandoned.
async fn attempt_of(
    run: &Run,
    task: &Task,
    body: &Block,
    catch: &Catch,
    attempt: u32,
    input: Value,
    scope: &Scope,
) -> Result<(Value, bool), Fault> {
    let Some(limit) = catch.retry.as_ref().and_then(|r| r.attempt_limit) else {
        return block(run, body, input, scope).await;
    };
    let timer = async move {
        run.durable(run.ctx.sleep(limit).await)?;
        let mut error = Fault::timeout(format!(
            "attempt {attempt} of task `{}` ran longer than its limit of {limit:?}",
            task.name
        ));
        if let Fault::Error(Value::Object(fields)) = &mut error {
            fields.insert(
                "instance".into(),
                Value::String(format!("{}/try", task.path)),
            );
        }
        Err::<(Value, bool), Fault>(error)
    }
    .boxed();
    ratchet_core::race(vec![block(run, body, input, scope), timer])
        .await
        .1
}

/// True when `when` (if any) holds of a caught error and `except_when` (if any) does not:
/// a `catch`'s filter, and a retry's. Both are evaluated, in that order.
fn admits(
    run: &Run,
    when: &Option<Expr>,
    except_when: &Option<Expr>,
    error: &Value,
    scope: &Scope,
) -> Result<bool, Fault> {
    let holds = match when {
        Some(w) => truthy(&run.eval(w, error, scope)?),
        None => true,
    };
    let excepted = match except_when {
        Some(w) => truthy(&run.eval(w, error, scope)?),
        None => false,
    };
    Ok(holds && !excepted)
}

/// A cancellation reached a `try`: when its `catch` names [`CANCELLED`], its `do` runs (never
/// retried), and the cancellation goes on outward either way.
async fn compensate(
    run: &Run,
    catch: &Catch,
    cancelled: OrchestrationError,
    input: Value,
    scope: &Scope,
) -> Result<(Value, Flow), Fault> {
    let reason = match &cancelled {
        OrchestrationError::Cancelled { reason } => reason.clone(),
        _ => String::new(),
    };
    let error = json!({
        "type": CANCELLED,
        "status": 499,
        "title": "Cancelled",
        "detail": reason,
    });
    let mut inner = scope.clone();
    inner.insert(catch.var.clone(), Arc::new(error.clone()));
    let named = catch
        .with
        .iter()
        .any(|(k, v)| k == "type" && v == CANCELLED)
        && catch.with.iter().all(|(k, v)| error.get(k) == Some(v));
    let when = match &catch.when {
        Some(w) => truthy(&run.eval(w, &error, &inner)?),
        None => true,
    };
    if named && when {
        if let Some(handler) = &catch.body {
            block(run, handler, input, &inner).await?;
        }
    }
    Err(Fault::Cancelled(cancelled))
}

/// A DSL event (`type`, `source`, `data`, ...) as an event of the store, and as the
/// CloudEvent (1.0) the task outputs: `type` is its type, `data` its payload, `tags` (a list
/// of `key:value` strings) its consistency boundary, and every other attribute its metadata,
/// with `id` (a UUID recorded in history), `specversion`, `time` and `source` filled in
/// when the definition gives none.
fn event_of(run: &Run, with: Value) -> Result<(ratchet_store::NewEvent, Value), String> {
    let Value::Object(mut attributes) = with else {
        return Err(format!("emit.event.with gave {with}, not an object"));
    };
    let kind = match attributes.remove("type") {
        Some(Value::String(t)) if !t.is_empty() => t,
        other => {
            return Err(format!(
                "an event's type must be a non-empty string, not {other:?}"
            ))
        }
    };
    let payload = attributes.remove("data").unwrap_or(Value::Null);
    let tags = match attributes.remove("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .into_iter()
            .map(|t| match t {
                Value::String(s) => Ok(s),
                other => Err(format!("an event's tags are strings, not {other}")),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(format!("an event's tags are a list, not {other}")),
    };
    if !attributes.contains_key("id") {
        attributes.insert("id".into(), Value::String(run.ctx.uuid().to_string()));
    }
    attributes
        .entry("specversion")
        .or_insert_with(|| Value::String("1.0".into()));
    if !attributes.contains_key("time") {
        let now = run.ctx.now().to_rfc3339();
        attributes.insert("time".into(), Value::String(now));
    }
    if !attributes.contains_key("source") {
        let source = match run.workflow.get("definition") {
            Some(d) => format!(
                "urn:ratchet:workflow:{}/{}",
                d["namespace"].as_str().unwrap_or_default(),
                d["name"].as_str().unwrap_or_default()
            ),
            None => "urn:ratchet:workflow".to_string(),
        };
        attributes.insert("source".into(), Value::String(source));
    }
    let mut cloud = attributes.clone();
    cloud.insert("type".into(), Value::String(kind.clone()));
    cloud.insert("data".into(), payload.clone());
    Ok((
        ratchet_store::NewEvent {
            kind,
            tags,
            payload,
            metadata: Value::Object(attributes),
        },
        Value::Object(cloud),
    ))
}

/// A value the definition says is text: a string, or a number or boolean written as one.
fn text_of(v: Value, what: &str, task: &Task) -> Result<String, Fault> {
    match v {
        Value::String(s) => Ok(s),
        Value::Number(_) | Value::Bool(_) => Ok(v.to_string()),
        other => Err(Fault::expression(format!(
            "task `{}`: {what} gave {other}, not text",
            task.name
        ))),
    }
}

/// An endpoint's URI: its template expanded from the task's input, or its expression's value.
fn uri_of(
    run: &Run,
    endpoint: &Endpoint,
    input: &Value,
    scope: &Scope,
    task: &Task,
) -> Result<String, Fault> {
    match &endpoint.uri {
        Template::Literal(Value::String(template)) => call::uri::expand(template, input)
            .map_err(|m| Fault::expression(format!("task `{}`: {m}", task.name))),
        other => text_of(run.fill(other, input, scope)?, "the endpoint", task),
    }
}

/// Headers or query parameters: an object whose values become text.
fn strings_of(
    run: &Run,
    template: Option<&Template>,
    input: &Value,
    scope: &Scope,
    task: &Task,
    what: &str,
) -> Result<std::collections::BTreeMap<String, String>, Fault> {
    let Some(t) = template else {
        return Ok(Default::default());
    };
    match run.fill(t, input, scope)? {
        Value::Object(fields) => fields
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| Ok((k, text_of(v, &format!("with.{what}"), task)?)))
            .collect(),
        Value::Null => Ok(Default::default()),
        other => Err(Fault::expression(format!(
            "task `{}`: with.{what} gave {other}, not an object",
            task.name
        ))),
    }
}

fn credentials(
    run: &Run,
    auth: Option<&Auth>,
    input: &Value,
    scope: &Scope,
    task: &Task,
) -> Result<Option<Credentials>, Fault> {
    let text = |t: &Template, what: &str| text_of(run.fill(t, input, scope)?, what, task);
    Ok(match auth {
        None => None,
        Some(Auth::Basic { username, password }) => Some(Credentials::Basic {
            username: text(username, "basic.username")?,
            password: text(password, "basic.password")?,
        }),
        Some(Auth::Bearer { token }) => Some(Credentials::Bearer {
            token: text(token, "bearer.token")?,
        }),
        Some(Auth::Digest { username, password }) => Some(Credentials::Digest {
            username: text(username, "digest.username")?,
            password: text(password, "digest.password")?,
        }),
        Some(Auth::Secret { scheme, secret }) => Some(Credentials::Secret {
            scheme: scheme.as_str().to_string(),
            secret: secret.clone(),
        }),
        Some(Auth::OAuth2(p)) => Some(Credentials::OAuth2(Box::new(call::OAuth2 {
            oidc: p.oidc,
            authority: text(&p.authority, "oauth2.authority")?,
            token: match &p.token {
                Some(t) => Some(text(t, "oauth2.endpoints.token")?),
                None => None,
            },
            client_id: text(&p.client_id, "oauth2.client.id")?,
            client_secret: match &p.client_secret {
                Some(t) => Some(text(t, "oauth2.client.secret")?),
                None => None,
            },
            client_basic: p.client_basic,
            scopes: p.scopes.clone(),
            audiences: p.audiences.clone(),
        }))),
    })
}

/// Runs a call as a durable step and gives what the task outputs, or the DSL's
/// communication error for an answer outside 2xx (3xx too, when redirects are followed).
async fn call_out(
    run: &Run,
    task: &Task,
    target: Target,
    output: CallOutput,
    redirect: bool,
    scope: &Scope,
) -> Result<Value, Fault> {
    let loops: Vec<String> = scope
        .iter()
        .filter(|(k, _)| {
            k.starts_with('$') && !matches!(k.as_str(), "$input" | "$context" | "$workflow")
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let answered = run
        .answered
        .lock()
        .map(|a| a.get(&task.path).copied().unwrap_or(0))
        .unwrap_or(0);
    let key = idempotency_key(&run.ctx.instance_id(), &task.path, &loops, answered);
    let timeout = task.timeout.unwrap_or(call::DEFAULT_CALL_TIMEOUT);
    let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    let input = CallInput {
        target,
        output: output.as_str().to_string(),
        redirect,
        timeout_ms,
        idempotency_key: key,
    };
    // The DSL's `try` retries a call; the activity runs once per attempt, a little longer
    // than the call's own timeout so that the call reports it.
    let mut options = ActivityOptions::default();
    options.retry.max_attempts = 1;
    options.start_to_close_ms = timeout_ms.saturating_add(5_000);
    let mut answer: Value = run.durable(
        run.ctx
            .activity_with::<Value>(call::CALL_ACTIVITY, &input, options)
            .await,
    )?;
    let status = answer["statusCode"].as_u64().unwrap_or(0);
    let ok = if redirect { 200..400 } else { 200..300 };
    if ok.contains(&status) {
        if let Ok(mut a) = run.answered.lock() {
            *a.entry(task.path.clone()).or_insert(0) += 1;
        }
    } else {
        let request = &answer["request"];
        return Err(Fault::Error(json!({
            "type": format!("{ERRORS}/communication"),
            "status": status,
            "title": "Communication error",
            "detail": format!(
                "{} {} answered {status}",
                request["method"].as_str().unwrap_or_default(),
                request["uri"].as_str().unwrap_or_default()
            ),
            "response": answer,
        })));
    }
    Ok(match output {
        CallOutput::Response => answer,
        CallOutput::Content | CallOutput::Raw => answer
            .get_mut("content")
            .map(Value::take)
            .unwrap_or_default(),
    })
}

/// The `Idempotency-Key` of a call: the instance, the task's place, the loop variables in
/// scope and how many calls of this task already succeeded. Retries of a call (a `try`
/// running it again) send the same key; the next iteration of a loop sends another.
fn idempotency_key(instance: &str, path: &str, loops: &[String], answered: u64) -> String {
    let mut hash = sha2::Sha256::new();
    for part in [instance, path] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    for l in loops {
        hash.update(l.as_bytes());
        hash.update([0]);
    }
    hash.update(answered.to_le_bytes());
    // One string per call, not one per byte.
    use std::fmt::Write as _;
    let mut key = String::with_capacity(32);
    for b in &hash.finalize()[..16] {
        let _ = write!(key, "{b:02x}");
    }
    key
}

/// A listen filter's tags, computed.
fn tags_of(
    run: &Run,
    tags: &Template,
    input: &Value,
    scope: &Scope,
    task: &Task,
) -> Result<Vec<String>, Fault> {
    match run.fill(tags, input, scope)? {
        Value::Array(items) => Ok(items
            .into_iter()
            .map(|t| match t {
                Value::String(s) => s,
                other => other.to_string(),
            })
            .collect()),
        Value::String(one) => Ok(vec![one]),
        other => Err(Fault::expression(format!(
            "task `{}`: listen tags gave {other}, not a list",
            task.name
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's key is recorded in history: it must not change between versions (the first
    /// 16 bytes of the SHA-256, in lower-case hex).
    #[test]
    fn idempotency_keys_are_stable() {
        let key = idempotency_key("inst", "/do/0/get", &["$item=1".to_string()], 2);
        assert_eq!(key, "c7421f3102f34dc619424f6c79a6aa6a");
    }
}
