//! Declarative workflows for Ratchet, in the CNCF Serverless Workflow DSL 1.0 (YAML or JSON).
//!
//! [`Workflow::compile`] reads a definition and reports every error at once with its line
//! and column: constructs Ratchet does not run, expression errors, flow directives to
//! unknown tasks, unreachable tasks, duplicate names, and (with [`Known`]) activities and
//! sub-workflows no worker registers. [`Workflow::register`] makes it an orchestration: an
//! interpreter that drives the same durable context as Rust code, so a declarative workflow
//! has the same guarantees and costs the same round trips.
//!
//! Runtime expressions are jq (`${ .order.total > 100 }`), run by jaq.
#![deny(missing_docs)]

mod call;
mod compile;
mod decompile;
mod diagnostic;
mod expr;
mod gate;
mod graph;
mod model;
mod process;
mod run;
mod schema;
mod stored;

use std::sync::Arc;

use ratchet_runtime::Registry;
use serde_json::Value;
use sha2::Digest as _;

pub use call::{
    register_calls, CallConfig, CallConfigError, CALL_ACTIVITY, DEFAULT_CALL_TIMEOUT,
    MAX_REDIRECTS, MAX_RESPONSE_BYTES,
};
pub use compile::{Known, MAX_DEFINITION_BYTES, MAX_DEFINITION_NESTING};
pub use diagnostic::{CompileError, CompileErrors};
pub use expr::{
    EVAL_FUEL as EXPRESSION_FUEL, MAX_EXPRESSION_BYTES, MAX_NESTING as MAX_EXPRESSION_NESTING,
};
pub use process::{
    register_processes, ProcessConfig, ProcessKind, DEFAULT_PROCESS_TIMEOUT,
    MAX_PROCESS_OUTPUT_BYTES, PROCESS_ACTIVITY, RUN_NOT_ALLOWED,
};
pub use run::CANCELLED;
pub use run::TURN_FUEL;
pub use stored::{
    apply, keep_registered, register_stored, sync_schedule, Applied, ApplyError, ScheduleSync,
    LOOK_EVERY,
};

/// A compiled definition, ready to register and run.
/// Two workflows are equal when they define the same thing, whatever their source's
/// layout: the hash of the source is not compared.
#[derive(Clone, Debug)]
pub struct Workflow {
    namespace: String,
    name: String,
    version: String,
    hash: String,
    input_from: Option<model::Template>,
    output_as: Option<model::Template>,
    schemas: model::Schemas,
    body: model::Block,
    schedule: Option<DslSchedule>,
    /// The whole run's time limit (`timeout.after`), on a durable timer.
    timeout: Option<std::time::Duration>,
    /// `use.secrets`: what its calls may name (their values are the worker's).
    secrets: Vec<String>,
    /// `use.functions`: tasks its `call`s may name.
    functions: std::collections::BTreeMap<String, model::Task>,
}

/// A definition's own `schedule`: applying the definition creates or updates a schedule of
/// the same name (`namespace/name`) that starts it, or for `on` starts the instance that
/// listens for the events that start it.
#[derive(Clone, Debug, PartialEq)]
pub enum DslSchedule {
    /// `every`: at a fixed interval (whole seconds).
    Every(std::time::Duration),
    /// `cron`: a cron expression, read in UTC.
    Cron(String),
    /// `after`: this long after the previous run ended.
    After(std::time::Duration),
    /// `on`: when events of the event store come (an event consumption strategy).
    On(Trigger),
}

/// The events that start a workflow (`schedule.on`), compiled as a `listen` task that a
/// trigger instance ([`Workflow::trigger_name`]) runs again and again.
#[derive(Clone, Debug, PartialEq)]
pub struct Trigger(pub(crate) Box<model::Task>);

impl DslSchedule {
    /// As a schedule's spec: `every 300s`, the cron expression, `after 30s`.
    pub fn spec(&self) -> String {
        match self {
            Self::Every(d) => format!("every {}s", d.as_secs()),
            Self::Cron(c) => c.clone(),
            Self::After(d) => format!("after {}s", d.as_secs()),
            Self::On(_) => "on events".to_string(),
        }
    }
}

impl PartialEq for Workflow {
    fn eq(&self, other: &Self) -> bool {
        (
            &self.namespace,
            &self.name,
            &self.version,
            &self.input_from,
            &self.output_as,
            &self.schemas,
            &self.body,
            &self.schedule,
            &self.timeout,
            &self.secrets,
            &self.functions,
        ) == (
            &other.namespace,
            &other.name,
            &other.version,
            &other.input_from,
            &other.output_as,
            &other.schemas,
            &other.body,
            &other.schedule,
            &other.timeout,
            &other.secrets,
            &other.functions,
        )
    }
}

/// One runtime expression (jq), compiled as a workflow's expressions are, with no variables:
/// to try an expression, or to fuzz the evaluator.
#[derive(Clone, Debug)]
pub struct Expression(expr::Expr);

/// Why an expression gave no value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExpressionError {
    /// It does not compile, or is refused (a filter it may not call, a limit, or it cannot
    /// finish on null within its budget).
    #[error("{0}")]
    Compile(String),
    /// It raised an error, or gave something that is not JSON.
    #[error("{0}")]
    Failed(String),
    /// It ran out of its budget or broke a size limit.
    #[error("{0}")]
    Budget(String),
}

impl Expression {
    /// Compiles `code` (without `${ }`).
    ///
    /// # Errors
    ///
    /// [`ExpressionError::Compile`], saying what is wrong.
    pub fn compile(code: &str) -> Result<Expression, ExpressionError> {
        let _turn = gate::enter();
        expr::Expr::compile(code, &[])
            .map(Expression)
            .map_err(ExpressionError::Compile)
    }

    /// Runs it on `input` with an expression's budget ([`EXPRESSION_FUEL`]): its first
    /// output, `null` when it has none.
    ///
    /// # Errors
    ///
    /// [`ExpressionError::Failed`] or [`ExpressionError::Budget`].
    pub fn evaluate(&self, input: &Value) -> Result<Value, ExpressionError> {
        let (result, _) = self
            .0
            .eval_with(input, &expr::Scope::new(), EXPRESSION_FUEL);
        result.map_err(|e| match e {
            expr::EvalError::Failed(m) => ExpressionError::Failed(m),
            expr::EvalError::Exhausted(m) => ExpressionError::Budget(m),
        })
    }
}

/// YAML (or JSON) text whose top level is a mapping or a list, as JSON, read as a
/// definition's values are (plain `12` a number, `"12"` a string) and within the same
/// nesting limit ([`MAX_DEFINITION_NESTING`]).
///
/// # Errors
///
/// What does not read, with where.
pub fn read_yaml(text: &str) -> Result<Value, String> {
    compile::parse_document(text)
}

/// The orchestration name a declarative workflow runs under: `namespace/name`.
pub fn orchestration_name(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// The SHA-256 of a definition's source, in hex: what pins an instance to it.
fn content_hash(source: &str) -> String {
    sha2::Sha256::digest(source.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Workflow {
    /// Compiles a definition.
    ///
    /// # Errors
    ///
    /// [`CompileErrors`]: every error found, each with its line and column.
    pub fn compile(source: &str) -> Result<Workflow, CompileErrors> {
        Self::compile_with(source, &Known::default())
    }

    /// Compiles a definition, checking activity and orchestration names against `known`.
    ///
    /// Compiling runs each expression once on null, within its budget: it may take tens of
    /// milliseconds of a core and tens of megabytes for a hostile definition, so a process
    /// compiles at most as many definitions at once as it has cores (a caller beyond that
    /// waits, blocking its thread), and an async caller should compile on a blocking thread
    /// (as [`apply`] does).
    ///
    /// # Errors
    ///
    /// [`CompileErrors`]: every error found, each with its line and column.
    pub fn compile_with(source: &str, known: &Known) -> Result<Workflow, CompileErrors> {
        let _turn = gate::enter();
        compile::compile(source, known)
    }

    /// `document.namespace`.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// `document.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `document.version`, as written.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The SHA-256 of the source, in hex.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// Its own `schedule`, if it has one.
    pub fn schedule(&self) -> Option<&DslSchedule> {
        self.schedule.as_ref()
    }

    /// The orchestration name it runs under: `namespace/name`.
    pub fn orchestration_name(&self) -> String {
        orchestration_name(&self.namespace, &self.name)
    }

    /// The orchestration that starts it on events (`schedule.on`): `namespace/name:on`.
    pub fn trigger_name(&self) -> String {
        format!("{}:on", self.orchestration_name())
    }

    /// Registers the workflow as version `version` of its orchestration
    /// ([`Self::orchestration_name`]): instances started under that name run it, and each
    /// keeps the version it started on. A registry in use (a runtime's) takes it too: the
    /// runtime claims its instances from its next poll. With `schedule.on`, its trigger
    /// ([`Self::trigger_name`]) is registered as the same version.
    pub fn register(self, registry: &Registry, version: u32) {
        let name = self.orchestration_name();
        let trigger = self.trigger_name();
        let workflow = Arc::new(self);
        if matches!(workflow.schedule, Some(DslSchedule::On(_))) {
            let w = workflow.clone();
            registry.add_orchestration_version(&trigger, version, move |ctx, input: Value| {
                run::trigger(ctx, w.clone(), input)
            });
        }
        registry.add_orchestration_version(&name, version, move |ctx, input: Value| {
            run::run(ctx, workflow.clone(), input)
        });
    }
}
