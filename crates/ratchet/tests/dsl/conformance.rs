//! The specification's conformance kit (`ctk/*.feature`), every scenario on every backend,
//! every `Then`/`And` line asserted; a line this runner does not know fails the test.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ratchet::workflow::{read_yaml, Workflow};
use ratchet::{InstanceStatus, StartOptions, Store};
use serde_json::Value;

use crate::harness::{start, WAIT};
use crate::standin::Standin;
use crate::{ran, standin};

fn features() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dsl/ctk");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "feature"))
        .collect();
    files.sort();
    files
}

/// A docstring as Gherkin means it: the gherkin crate keeps its media type (`"""yaml`) as
/// the first line and the indentation of the feature file, which Gherkin strips.
fn docstring(raw: &str) -> String {
    let mut lines: Vec<&str> = raw.lines().collect();
    if lines
        .first()
        .is_some_and(|l| matches!(l.trim(), "yaml" | "json"))
    {
        lines.remove(0);
    }
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A docstring's YAML, whatever its top level (a scalar too).
fn yaml(text: &str) -> Value {
    let indented: String = text.lines().map(|l| format!("  {l}\n")).collect();
    read_yaml(&format!("value:\n{indented}"))
        .unwrap_or_else(|e| panic!("the kit's YAML does not read: {e}\n{text}"))["value"]
        .clone()
}

/// The value at a dotted path (`request.headers`).
fn at<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

/// The names quoted in `'a', 'b.c'`.
fn quoted(text: &str) -> Vec<String> {
    text.split('\'')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[derive(Debug)]
struct Outcome {
    instance: String,
    status: InstanceStatus,
    output: Option<Value>,
    error: Option<Value>,
}

async fn execute(
    store: &Arc<dyn Store>,
    standin: &Standin,
    definition: &str,
    input: Value,
    instance: &str,
) -> Outcome {
    let workflow = Workflow::compile(definition).unwrap_or_else(|e| panic!("{e}\n{definition}"));
    let name = workflow.orchestration_name();
    let r = start(store, |b| b.calls(standin.calls()).workflow(workflow, 1)).await;
    let handle = r
        .client()
        .start_with(&name, input, StartOptions::id(instance))
        .await
        .unwrap();
    let done = handle.wait(WAIT).await.unwrap();
    r.shutdown().await;
    Outcome {
        instance: instance.to_string(),
        status: done.status,
        output: done.output.clone(),
        error: done
            .error
            .as_ref()
            .map(|e| e.details.clone().unwrap_or_else(|| serde_json::json!(e))),
    }
}

/// Asserts one `Then`/`And` line against the outcome.
fn check(line: &str, doc: Option<&str>, outcome: &Outcome, scenario: &str) {
    let said = format!("{scenario}: `{line}` with {outcome:?}");
    let output = || {
        outcome
            .output
            .as_ref()
            .unwrap_or_else(|| panic!("no output: {said}"))
    };
    let tasks = ran::tasks(&outcome.instance);
    let position = |name: &str| {
        tasks
            .iter()
            .position(|t| t == name)
            .unwrap_or_else(|| panic!("{name} did not run ({tasks:?}): {said}"))
    };
    let doc = || yaml(doc.unwrap_or_else(|| panic!("no docstring: {said}")));
    if line == "the workflow should complete" {
        assert_eq!(outcome.status, InstanceStatus::Completed, "{said}");
    } else if line == "the workflow should complete with output:" {
        assert_eq!(outcome.status, InstanceStatus::Completed, "{said}");
        assert_eq!(output(), &doc(), "{said}");
    } else if line == "the workflow should fault" {
        assert_eq!(outcome.status, InstanceStatus::Failed, "{said}");
    } else if line == "the workflow should fault with error:" {
        assert_eq!(outcome.status, InstanceStatus::Failed, "{said}");
        assert_eq!(outcome.error.as_ref(), Some(&doc()), "{said}");
    } else if let Some(names) = line.strip_prefix("the workflow output should have properties ") {
        let names = quoted(names);
        assert!(!names.is_empty(), "{said}");
        for name in names {
            assert!(at(output(), &name).is_some(), "no `{name}`: {said}");
        }
    } else if let Some(rest) = line.strip_prefix("the workflow output should have a '") {
        let (name, what) = rest.split_once('\'').unwrap_or_else(|| panic!("{said}"));
        let value = at(output(), name).unwrap_or_else(|| panic!("no `{name}`: {said}"));
        if what == " property with value:" {
            assert_eq!(value, &doc(), "{said}");
        } else if let Some(count) = what
            .strip_prefix(" property containing ")
            .and_then(|c| c.strip_suffix(" items"))
        {
            let count: usize = count.parse().unwrap_or_else(|_| panic!("{said}"));
            assert_eq!(value.as_array().map(Vec::len), Some(count), "{said}");
        } else {
            panic!("a line this runner does not know: {said}");
        }
    } else if let Some(name) = line.strip_suffix(" should run first") {
        assert_eq!(
            tasks.first().map(String::as_str),
            Some(name),
            "{tasks:?}: {said}"
        );
    } else if let Some(name) = line.strip_suffix(" should run last") {
        assert_eq!(
            tasks.last().map(String::as_str),
            Some(name),
            "{tasks:?}: {said}"
        );
    } else if let Some((later, earlier)) = line.split_once(" should run after ") {
        assert!(position(later) > position(earlier), "{tasks:?}: {said}");
    } else if let Some((earlier, later)) = line.split_once(" should run before ") {
        assert!(position(earlier) < position(later), "{tasks:?}: {said}");
    } else {
        panic!("a line this runner does not know: {said}");
    }
}

/// Runs every scenario of every feature; returns how many ran and how many lines were
/// asserted.
async fn run_kit(store: Arc<dyn Store>) -> (usize, usize) {
    ran::record();
    // Both backends' runs share this process's record of what ran: ids apart.
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let standin = standin::start().await;
    let (mut scenarios, mut lines) = (0, 0);
    for path in features() {
        let feature = gherkin::Feature::parse_path(&path, gherkin::GherkinEnv::default())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for (n, scenario) in feature.scenarios.iter().enumerate() {
            let title = format!("{} / {}", feature.name, scenario.name);
            let stem = path.file_stem().unwrap().to_string_lossy().to_string();
            let instance = format!("kit{run}-{stem}-{n}");
            let mut definition = None;
            let mut input = Value::Object(Default::default());
            let mut outcome = None;
            for step in &scenario.steps {
                let line = step.value.trim();
                let doc = step.docstring.as_deref().map(docstring);
                let doc = doc.as_deref();
                match line {
                    "a workflow with definition:" => definition = doc.map(str::to_string),
                    "given the workflow input is:" => {
                        input = yaml(doc.unwrap_or_else(|| panic!("{title}: no input")))
                    }
                    "the workflow is executed" => {
                        let definition = definition
                            .as_deref()
                            .unwrap_or_else(|| panic!("{title}: no definition"));
                        outcome = Some(
                            execute(&store, &standin, definition, input.clone(), &instance).await,
                        );
                    }
                    _ => {
                        let outcome = outcome
                            .as_ref()
                            .unwrap_or_else(|| panic!("{title}: `{line}` before execution"));
                        check(line, doc, outcome, &title);
                        lines += 1;
                    }
                }
            }
            assert!(outcome.is_some(), "{title}: never executed");
            scenarios += 1;
        }
    }
    (scenarios, lines)
}

async fn the_conformance_kit_passes(store: Arc<dyn Store>) {
    let (scenarios, lines) = run_kit(store).await;
    // The kit as copied: 21 scenarios, 45 `Then`/`And` lines.
    assert_eq!(scenarios, 21);
    assert_eq!(lines, 45);
}

crate::on_every_backend!(the_conformance_kit_passes);
