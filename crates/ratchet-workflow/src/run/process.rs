//! `run: shell` and `run: script` in the interpreter: the process's command, arguments,
//! environment and input are computed here (replayed), the worker runs it as the built-in
//! activity [`PROCESS_ACTIVITY`], and `return` picks what the task outputs.

use ratchet_core::ActivityOptions;
use serde_json::{json, Value};

use super::{Fault, Run};
use crate::expr::Scope;
use crate::model::{ProcessCall, ProcessOutput, Task, Template};
use crate::process::{ProcessInput, ProcessResult, DEFAULT_PROCESS_TIMEOUT, PROCESS_ACTIVITY};

/// The most of a failed process's standard error its error shows.
const STDERR_SHOWN: usize = 2_000;

/// Runs the process of `p`; its output as `run.return` says, or the task's input when it
/// is not awaited. A process that exits with another code than 0 fails the task with a
/// runtime error (unless `return` is `code` or `all`, which report it).
pub(super) async fn process(
    run: &Run,
    task: &Task,
    p: &ProcessCall,
    input: &Value,
    scope: &Scope,
) -> Result<Value, Fault> {
    let bad = |what: &str, got: &Value| {
        Fault::expression(format!(
            "task `{}`: {what} gave {got}, not what `run` takes",
            task.name
        ))
    };
    let text = |v: Value| match v {
        Value::String(s) => s,
        other => other.to_string(),
    };
    let fill = |t: &Option<Template>| -> Result<Option<Value>, Fault> {
        t.as_ref().map(|t| run.fill(t, input, scope)).transpose()
    };
    let code = match run.fill(&p.code, input, scope)? {
        Value::String(code) => code,
        other => return Err(bad("the command or code", &other)),
    };
    let arguments = match fill(&p.arguments)? {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.into_iter().map(text).collect(),
        Some(other) => return Err(bad("`arguments` (a list)", &other)),
    };
    let environment = match fill(&p.environment)? {
        None | Some(Value::Null) => Default::default(),
        Some(Value::Object(fields)) => fields.into_iter().map(|(k, v)| (k, text(v))).collect(),
        Some(other) => return Err(bad("`environment` (an object)", &other)),
    };
    let stdin = fill(&p.stdin)?.map(text);
    let timeout = task.timeout.unwrap_or(DEFAULT_PROCESS_TIMEOUT);
    let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    let step = ProcessInput {
        kind: p.kind,
        code,
        arguments,
        environment,
        stdin,
        timeout_ms,
        detach: !p.wait,
    };
    // The DSL's `try`/`catch.retry` decides about running it again, not the activity.
    let mut options = ActivityOptions::default();
    options.retry.max_attempts = 1;
    options.start_to_close_ms = timeout_ms.saturating_add(5_000);
    let done: Option<ProcessResult> =
        run.durable(run.ctx.activity_with(PROCESS_ACTIVITY, step, options).await)?;
    let Some(r) = done else {
        return Ok(input.clone());
    };
    if r.code != Some(0) && !matches!(p.output, ProcessOutput::Code | ProcessOutput::All) {
        let stderr: String = r.stderr.chars().take(STDERR_SHOWN).collect();
        let ended = match r.code {
            Some(code) => format!("exited with code {code}"),
            None => "was ended by a signal".to_string(),
        };
        return Err(Fault::error(
            "runtime",
            500,
            "Process failed",
            format!(
                "task `{}`: the {} process {ended}: {stderr}",
                task.name,
                p.kind.as_str()
            ),
        ));
    }
    Ok(match p.output {
        ProcessOutput::Stdout => Value::String(r.stdout),
        ProcessOutput::Stderr => Value::String(r.stderr),
        ProcessOutput::Code => json!(r.code),
        ProcessOutput::All => json!({"code": r.code, "stdout": r.stdout, "stderr": r.stderr}),
        ProcessOutput::None => Value::Null,
    })
}
