//! A compiled workflow: the subset of the DSL Ratchet runs, with expressions compiled, flow
//! directives resolved to positions and durations parsed, ready for the interpreter.

use std::time::Duration;

use serde_json::Value;

use crate::expr::Expr;

/// A value in the definition that may hold expressions: any string `${ ... }` in it is
/// evaluated, the rest is taken as written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Template {
    /// Written as is.
    Literal(Value),
    /// An expression.
    Expr(Expr),
    /// An array with expressions inside.
    Array(Vec<Template>),
    /// An object with expressions inside.
    Object(Vec<(String, Template)>),
}

/// Where a task goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flow {
    /// The next task of its list (the default).
    Continue,
    /// Leave the list the task is in (its composite task ends).
    Exit,
    /// End the workflow.
    End,
    /// The task at this index of the same list.
    Goto(usize),
}

/// A list of tasks run in order (`do`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Block {
    pub(crate) tasks: Vec<Task>,
}

/// One named task.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Task {
    pub(crate) name: String,
    /// Where the task is in the definition, as a JSON Pointer (`/do/0/tryGetPet/try/0/getPet`):
    /// the `instance` of the errors it raises.
    pub(crate) path: String,
    /// Runs only when this holds (`if`).
    pub(crate) when: Option<Expr>,
    /// The task's input, from what it receives (`input.from`).
    pub(crate) input_from: Option<Template>,
    /// The task's output, from what it produced (`output.as`).
    pub(crate) output_as: Option<Template>,
    /// The workflow's context after the task (`export.as`).
    pub(crate) export_as: Option<Template>,
    /// What its input, output and exported context must be (`input.schema`, ...).
    pub(crate) schemas: Schemas,
    /// The task's time limit (`timeout.after`): an activity's start-to-close, a listen's wait.
    pub(crate) timeout: Option<Duration>,
    /// Ratchet's extensions, in `metadata.ratchet`: the instance's custom status after the
    /// task (`status`), and the input of a new execution the workflow continues as after it
    /// (`continueAsNew`).
    pub(crate) status: Option<Template>,
    pub(crate) continue_as_new: Option<Template>,
    pub(crate) then: Flow,
    pub(crate) kind: Kind,
}

/// What a task does.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    /// Runs a list of tasks.
    Do(Block),
    /// Outputs this value.
    Set(Template),
    /// Goes where the first matching case says.
    Switch(Vec<Case>),
    /// Runs `body` for each item of a list.
    For {
        each: String,
        at: String,
        list: Expr,
        while_: Option<Expr>,
        body: Block,
    },
    /// Runs branches in parallel: all (output: their outputs in order), or the first to finish.
    Fork { compete: bool, branches: Block },
    /// Calls a Ratchet activity by name: its input is `with` (the DSL's named arguments, an
    /// object), or the task's input without it.
    Call {
        activity: String,
        with: Option<Template>,
    },
    /// Calls an HTTP endpoint (`call: http`), as a durable step.
    Http(Box<HttpCall>),
    /// Calls an operation of an OpenAPI document (`call: openapi`), as a durable step.
    OpenApi(Box<OpenApiCall>),
    /// Calls a unary method of a gRPC service (`call: grpc`), as a durable step.
    Grpc(Box<GrpcCall>),
    /// Runs one of the workflow's `use.functions` (a task) on `with`, or the task's input.
    Function {
        name: String,
        with: Option<Template>,
    },
    /// Sleeps on a durable timer.
    Wait(Duration),
    /// Waits for a signal (output: its payload); with the task's timeout, fails with a
    /// timeout error when none arrives.
    Listen { signal: String },
    /// Waits for any one of `filters` (`listen.to.any` and `one`), or for each of them in
    /// turn (`listen.to.all`); with `until`, for one after another until it holds. Events
    /// of the store count from when the task began; with the task's timeout, it fails with
    /// a timeout error when they do not all arrive in time.
    ListenMany {
        all: bool,
        filters: Vec<Filter>,
        /// `read: data`: output what each carries, not the envelope.
        data_only: bool,
        /// Written as `listen.to.one` without `read` (as the definition is shown again).
        one: bool,
        until: Option<Until>,
    },
    /// Appends a CloudEvent to the event store (`emit.event.with`: `type`, `source`, `data`,
    /// and `tags` for its consistency boundary; the other attributes become its metadata).
    /// Its output is the event.
    Emit(Template),
    /// Fails with an error.
    Raise(ErrorTemplate),
    /// Runs `body`; a matching error runs `catch` instead, after retries.
    Try { body: Block, catch: Catch },
    /// Runs a process on the worker (`run: shell`, `run: script`), as a durable step.
    Process(Box<ProcessCall>),
    /// Starts a sub-workflow (a declarative or Rust orchestration) and waits for its output.
    Run {
        /// What the definition names: `run.workflow.namespace`, `name`, `version`.
        target: (String, String, String),
        /// The orchestration that runs it.
        orchestration: String,
        input: Template,
    },
}

/// A case of a `switch`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Case {
    pub(crate) name: String,
    /// `None`: the default case.
    pub(crate) when: Option<Expr>,
    pub(crate) then: Flow,
}

/// An error to raise: every field may hold expressions.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ErrorTemplate {
    pub(crate) kind: Template,
    pub(crate) status: Template,
    pub(crate) title: Option<Template>,
    pub(crate) detail: Option<Template>,
}

/// The `catch` of a `try`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Catch {
    /// Only errors whose fields equal these (`errors.with`); all when empty.
    pub(crate) with: Vec<(String, Value)>,
    /// The variable the error is bound to (`as`, default `error`), with its `$`.
    pub(crate) var: String,
    /// Catch only when this holds (`when`), or unless it holds (`exceptWhen`).
    pub(crate) when: Option<Expr>,
    pub(crate) except_when: Option<Expr>,
    pub(crate) retry: Option<Retry>,
    /// Run on a caught error once retries are spent; its output is the try's output.
    pub(crate) body: Option<Block>,
}

/// How a `try` retries: durable timers between attempts.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Retry {
    /// Retry only when this holds of the caught error (`when`), or unless it holds
    /// (`exceptWhen`); otherwise the error goes to the `catch.do` at once.
    pub(crate) when: Option<Expr>,
    pub(crate) except_when: Option<Expr>,
    pub(crate) delay: Duration,
    pub(crate) backoff: Backoff,
    /// Attempts in all, the first included (`limit.attempt.count`; `u32::MAX` when only
    /// `limit.duration` bounds them).
    pub(crate) attempts: u32,
    /// How long one attempt may run (`limit.attempt.duration`): past it, the attempt fails
    /// with the DSL's timeout error, which the `catch` may retry like any other.
    pub(crate) attempt_limit: Option<Duration>,
    /// How long after the first attempt began a retry may still start (`limit.duration`).
    pub(crate) limit: Option<Duration>,
    /// A random extra delay between these two, added to each (`jitter.from`, `jitter.to`).
    pub(crate) jitter: Option<(Duration, Duration)>,
}

impl Retry {
    /// The delay before retry number `retry` (1 for the first): the backoff's, plus the
    /// jitter's share `random` (in `[0, 1)`) of its range.
    pub(crate) fn delay_before(&self, retry: u32, random: f64) -> Duration {
        let base = self.backoff.delay(self.delay, retry);
        match self.jitter {
            None => base,
            Some((from, to)) => {
                let extra = from + (to.saturating_sub(from)).mul_f64(random.clamp(0.0, 1.0));
                base.saturating_add(extra)
            }
        }
    }
}

/// What a call answers with (`output`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallOutput {
    /// The response's content, decoded when it is JSON.
    Content,
    /// The request, status, headers and content.
    Response,
    /// The response's content, base64-encoded.
    Raw,
}

impl CallOutput {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Content => "content",
            Self::Response => "response",
            Self::Raw => "raw",
        }
    }
}

/// How a call authenticates (`endpoint.authentication`): every field may hold expressions.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Auth {
    Basic {
        username: Template,
        password: Template,
    },
    Bearer {
        token: Template,
    },
    /// HTTP Digest (RFC 7616): the call is sent once without credentials, and again with
    /// the response to the service's challenge.
    Digest {
        username: Template,
        password: Template,
    },
    /// An OAuth2 (or OpenID Connect) client-credentials grant: the worker gets a token and
    /// sends it as bearer, keeping it until shortly before it expires.
    OAuth2(Box<OAuth2Policy>),
    /// Credentials from a secret of the worker, which it reads when it sends the call: never
    /// in the workflow's data.
    Secret {
        scheme: Scheme,
        secret: String,
    },
}

/// What a secret holds: `{username, password}` (basic, digest), `{token}`, or an OAuth2 or
/// OpenID Connect policy (`{authority, client: {id, secret}, ...}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheme {
    Basic,
    Bearer,
    Digest,
    OAuth2,
    Oidc,
}

impl Scheme {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Basic => "basic",
            Self::Bearer => "bearer",
            Self::Digest => "digest",
            Self::OAuth2 => "oauth2",
            Self::Oidc => "oidc",
        }
    }
}

/// An OAuth2 client-credentials policy (`oauth2`, or `oidc` whose token endpoint is
/// discovered from the authority).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OAuth2Policy {
    pub(crate) oidc: bool,
    pub(crate) authority: Template,
    /// `endpoints.token`, relative to the authority (`/oauth2/token` by default).
    pub(crate) token: Option<Template>,
    pub(crate) client_id: Template,
    pub(crate) client_secret: Option<Template>,
    /// `client.authentication: client_secret_basic` (else `client_secret_post`).
    pub(crate) client_basic: bool,
    pub(crate) scopes: Vec<String>,
    pub(crate) audiences: Vec<String>,
}

/// A resource to call: its URI (a URI template or an expression) and how to authenticate.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Endpoint {
    pub(crate) uri: Template,
    pub(crate) auth: Option<Auth>,
}

/// `call: http`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct HttpCall {
    pub(crate) method: Template,
    pub(crate) endpoint: Endpoint,
    pub(crate) headers: Option<Template>,
    pub(crate) query: Option<Template>,
    pub(crate) body: Option<Template>,
    pub(crate) output: CallOutput,
    /// Follow redirections, and take 3xx answers as success.
    pub(crate) redirect: bool,
}

/// `call: openapi`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct OpenApiCall {
    pub(crate) document: Endpoint,
    pub(crate) operation: String,
    pub(crate) parameters: Option<Template>,
    pub(crate) auth: Option<Auth>,
    pub(crate) output: CallOutput,
    pub(crate) redirect: bool,
}

/// `call: grpc`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GrpcCall {
    /// Where its `.proto` is.
    pub(crate) proto: Endpoint,
    /// `package.Service`.
    pub(crate) service: String,
    pub(crate) host: Template,
    /// None: 443, over TLS.
    pub(crate) port: Option<Template>,
    pub(crate) method: String,
    pub(crate) arguments: Option<Template>,
    pub(crate) auth: Option<Auth>,
}

/// How the delay between retries grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backoff {
    /// The same delay each time.
    Constant,
    /// The first delay times the attempt: 1, 2, 3, ... times.
    Linear,
    /// Twice the previous delay each time.
    Exponential,
}

impl Backoff {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Constant => "constant",
            Self::Linear => "linear",
            Self::Exponential => "exponential",
        }
    }

    /// The delay before retry number `retry` (1 for the first), from the first delay.
    pub(crate) fn delay(self, first: std::time::Duration, retry: u32) -> std::time::Duration {
        match self {
            Self::Constant => first,
            Self::Linear => first.saturating_mul(retry.max(1)),
            Self::Exponential => {
                first.saturating_mul(2_u32.saturating_pow(retry.saturating_sub(1)))
            }
        }
    }
}

/// A JSON Schema that data must match (`input.schema`, `output.schema`, `export.schema`),
/// compiled once. Two are equal when their documents are.
#[derive(Clone)]
pub(crate) struct Schema {
    pub(crate) document: Value,
    pub(crate) validator: std::sync::Arc<jsonschema::Validator>,
}

impl PartialEq for Schema {
    fn eq(&self, other: &Self) -> bool {
        self.document == other.document
    }
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Schema({})", self.document)
    }
}

impl Schema {
    /// `Err` says how `value` does not match (its first few mismatches, with where).
    pub(crate) fn check(&self, value: &Value) -> Result<(), String> {
        let found: Vec<String> = self
            .validator
            .iter_errors(value)
            .take(5)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    e.to_string()
                } else {
                    format!("at {at}: {e}")
                }
            })
            .collect();
        if found.is_empty() {
            Ok(())
        } else {
            Err(found.join("; "))
        }
    }
}

/// The schemas of a task or workflow.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Schemas {
    pub(crate) input: Option<Schema>,
    pub(crate) output: Option<Schema>,
    pub(crate) export: Option<Schema>,
}

/// What a `listen` waits for: a signal by name (a filter of only a `type`), or an event of
/// the event store.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Filter {
    Signal(String),
    Event(EventFilter),
}

/// An event of the event store a `listen` waits for: its type and tags pick what the store
/// follows; its other attributes and correlations are checked on each event that comes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct EventFilter {
    /// `type`; none: any type.
    pub(crate) kind: Option<String>,
    /// `tags`, all of which it carries (expressions of the task's input).
    pub(crate) tags: Option<Template>,
    /// Other CloudEvent attributes (`source`, `subject`, `data`, ...): a value it equals, or
    /// an expression of the attribute (`.`) that is `true` for a match (any other answer:
    /// the value it equals).
    pub(crate) with: Vec<(String, Template)>,
    /// `correlate`: a key, the expression that reads it from the event, and the value it
    /// must have (none: the first event's value, for the filters after it).
    pub(crate) correlate: Vec<(String, Expr, Option<Template>)>,
}

/// When a `listen.to.any` with `until` stops: an expression of the events consumed so far
/// (`.`) that holds, or an event matching one of these filters (not in the output).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Until {
    Holds(Expr),
    Event(Vec<Filter>),
}

/// `run: shell` or `run: script`: what the process is, what it is given, what the task
/// outputs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ProcessCall {
    pub(crate) kind: crate::process::ProcessKind,
    /// The command, or the script's code.
    pub(crate) code: Template,
    /// A list of strings.
    pub(crate) arguments: Option<Template>,
    /// An object of name to string.
    pub(crate) environment: Option<Template>,
    pub(crate) stdin: Option<Template>,
    pub(crate) output: ProcessOutput,
    /// `await` (default true): false starts it and outputs the task's input.
    pub(crate) wait: bool,
}

/// `run.return`: what a process's task outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProcessOutput {
    Stdout,
    Stderr,
    Code,
    All,
    None,
}
