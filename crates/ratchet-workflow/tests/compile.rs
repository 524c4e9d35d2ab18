//! The compiler on whole definitions: what it accepts, and every error at once with its line
//! and column.
#![allow(clippy::unwrap_used)]

use ratchet_workflow::{CompileErrors, Known, Workflow};

const EVERY_KIND: &str = include_str!("../../../examples/workflows/every-kind.yaml");

#[test]
fn every_supported_kind_compiles() {
    let w = Workflow::compile(EVERY_KIND).unwrap();
    assert_eq!(
        (w.namespace(), w.name(), w.version()),
        ("shop", "every-kind", "1.0.0")
    );
    assert_eq!(w.orchestration_name(), "shop/every-kind");
    assert_eq!(w.hash().len(), 64);
    // JSON is YAML: the same definition written as JSON compiles too.
    let json = r#"{"document": {"dsl": "1.0.0", "namespace": "a", "name": "b", "version": "1.0.0"},
                  "do": [{"one": {"set": {"x": "${ 1 + 1 }"}}}]}"#;
    Workflow::compile(json).unwrap();
}

fn errors(source: &str) -> CompileErrors {
    Workflow::compile(source).expect_err("errors")
}

/// `(line, column, fragment of the message)` for each expected error.
fn assert_errors(found: &CompileErrors, expected: &[(usize, usize, &str)]) {
    for (line, column, fragment) in expected {
        assert!(
            found
                .0
                .iter()
                .any(|e| e.line == *line && e.column == *column && e.message.contains(fragment)),
            "no error at {line}:{column} saying {fragment:?} in:\n{found}"
        );
    }
    assert_eq!(found.0.len(), expected.len(), "{found}");
}

#[test]
fn every_error_is_reported_at_once_with_its_position() {
    let source = r#"document:
  dsl: '1.0.0'
  namespace: shop
  name: broken
  version: '1.0.0'
do:
  - fetch:
      call: mcp
  - compute:
      set:
        x: ${ .a + }
  - jump:
      set: {}
      then: nowhere
  - compute:
      set: {}
      colour: red
  - tell:
      emit:
        event: {}
  - clock:
      set:
        t: ${ now }
"#;
    let found = errors(source);
    assert_errors(
        &found,
        &[
            (8, 13, "`call: mcp` is not supported"),
            (11, 12, "syntax error"),
            (14, 13, "`then: nowhere` names no task"),
            (15, 5, "two tasks named `compute`"),
            (17, 7, "unknown field `colour`"),
            (20, 16, "emit.event has no `with`"),
            (23, 12, "`now` is not available in workflows"),
        ],
    );
    // Sorted by position, each rendered as line:column: message.
    assert!(found
        .to_string()
        .starts_with("7 errors in the workflow\n  8:13: "));
}

#[test]
fn flow_errors_name_the_tasks() {
    let source = r#"document: {dsl: '1.0.0', namespace: a, name: b, version: '1.0.0'}
do:
  - first:
      set: {}
      then: end
  - orphan:
      set: {}
  - decide:
      switch:
        - yes:
            when: ${ true }
            then: missing
"#;
    assert_errors(
        &errors(source),
        &[
            (6, 5, "task `orphan` is never reached"),
            (8, 5, "task `decide` is never reached"),
            (12, 19, "`then: missing` names no task"),
        ],
    );
}

#[test]
fn a_document_is_required_with_every_field() {
    assert_errors(
        &errors("document:\n  dsl: '1.0.0'\n  name: -bad\n  version: '1'\ndo: []\n"),
        &[
            (2, 3, "`document` has no `namespace`"),
            (3, 9, "does not have the form the DSL requires"),
            (4, 12, "\"1\" is not a semantic version such as 1.0.0"),
            (5, 5, "has no task"),
        ],
    );
    assert_errors(
        &errors("do:\n  - a:\n      set: {x: 1}\n"),
        &[(1, 1, "no `document`")],
    );
    let e = errors("document: [");
    assert_eq!(e.0.len(), 1, "{e}");
    assert!(e.0[0].message.contains("not YAML or JSON"), "{e}");
}

#[test]
fn unknown_names_are_refused_when_the_registry_is_known() {
    let source = r#"document: {dsl: '1.0.0', namespace: a, name: b, version: '1.0.0'}
do:
  - pay:
      call: charge
  - next:
      run:
        workflow: {namespace: a, name: nobody, version: '1.0.0'}
"#;
    let known = Known {
        activities: Some(["pack".to_string()].into()),
        orchestrations: Some(["order".to_string()].into()),
    };
    let found = Workflow::compile_with(source, &known).unwrap_err();
    assert_errors(
        &found,
        &[
            (4, 13, "no activity named `charge`"),
            (7, 40, "no workflow `a/nobody` nor orchestration `nobody`"),
        ],
    );
    Workflow::compile(source).unwrap();
}

#[test]
fn errors_show_names_as_escapes_and_long_ones_cut() {
    let huge = "x".repeat(100_000);
    let source = format!(
        r#"document: {{dsl: '1.0.0', namespace: a, name: b, version: '1.0.0'}}
do:
  - pay:
      call: {huge}
  - ship:
      call: "pack\u202Egpj.exe"
"#
    );
    let known = Known {
        activities: Some(["pack".to_string()].into()),
        orchestrations: None,
    };
    let found = Workflow::compile_with(&source, &known).unwrap_err();
    assert_errors(
        &found,
        &[
            (4, 13, "no activity named `xxxxx"),
            (6, 13, "no activity named `pack\\u{202e}gpj.exe`"),
        ],
    );
    let shown = found.to_string();
    assert!(shown.contains("... (100000 bytes)`"), "{shown}");
    assert!(shown.len() < 1_000, "{} bytes", shown.len());
    assert!(!shown.contains('\u{202E}'), "{shown}");
}

#[test]
fn a_workflows_own_schedule_is_read_as_a_schedule_spec() {
    let with = |schedule: &str| {
        format!(
            "document: {{dsl: '1.0.0', namespace: ops, name: report, version: '1.0.0'}}\n\
             schedule: {schedule}\n\
             do:\n  - done:\n      set: {{ok: true}}\n"
        )
    };
    for (schedule, spec) in [
        ("{every: {minutes: 5}}", "every 300s"),
        ("{every: PT1H}", "every 3600s"),
        ("{cron: '30 2 * * *'}", "30 2 * * *"),
        ("{after: {seconds: 30}}", "after 30s"),
        ("{on: {one: {with: {type: x}}}}", "on events"),
    ] {
        let w = Workflow::compile(&with(schedule)).unwrap_or_else(|e| panic!("{schedule}: {e}"));
        assert_eq!(w.schedule().map(|s| s.spec()).as_deref(), Some(spec));
    }
    for (schedule, message) in [
        ("{on: {one: {with: {}}}}", "names no attribute"),
        ("{every: PT0.5S}", "whole number of seconds"),
        ("{every: PT1M, cron: '* * * * *'}", "one of"),
        ("{cron: 'not cron'}", "not a cron expression"),
        ("{cron: 'every 5s'}", "must be a cron expression"),
        ("{hourly: true}", "hourly"),
        ("{every: {days: 36526}}", "at most 100 years"),
        ("{after: P4294967295Y}", "at most 100 years"),
    ] {
        let found = errors(&with(schedule));
        assert!(
            found
                .0
                .iter()
                .any(|e| e.message.contains(message) && e.line == 2),
            "{schedule}: {found}"
        );
    }
}

#[test]
fn hostile_definitions_are_refused_without_harm() {
    let head = "document: {dsl: '1.0.0', namespace: a, name: b, version: '1.0.0'}\n";
    // Nesting past the limit, three ways: block sequences on one line, a staircase of
    // keys, flow brackets.
    let dashes = format!(
        "{head}do:\n  - x:\n      set:\n        v:\n          {}1\n",
        "- ".repeat(100_000)
    );
    let stairs: String = (0..1_000)
        .map(|i| format!("{}k:\n", " ".repeat(i + 1)))
        .collect();
    let stairs = format!("{head}input:\n{stairs}");
    let flow = format!("{head}do: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    for source in [&dashes, &stairs, &flow] {
        let e = errors(source).to_string();
        // (YAML's own scanner stops flow brackets at its recursion limit.)
        assert!(e.contains("nest") || e.contains("recursion limit"), "{e}");
    }
    // Too long.
    let long = format!("{head}# {}\ndo: []\n", "x".repeat(4 << 20));
    assert!(errors(&long).to_string().contains("at most 1048576 bytes"));
    // Expressions that would stop or hang whatever runs them.
    for (expr, why) in [
        ("${ halt }", "`halt` is not available"),
        ("'${ def f: 1 + f; f }'", "recursion"),
        ("${ [range(1e9)] }", "budget"),
        (
            &format!("'${{ {}1{} }}'", "(".repeat(100_000), ")".repeat(100_000)),
            "at most 16384 bytes",
        ),
        (
            &format!("'${{ {}1{} }}'", "(".repeat(1_000), ")".repeat(1_000)),
            "nest brackets",
        ),
    ] {
        let source = format!("{head}do:\n  - x:\n      set:\n        v: {expr}\n");
        let e = errors(&source);
        assert!(e.to_string().contains(why), "{expr}: {e}");
    }
    // An alias (YAML's shared nodes) is refused, not expanded.
    let alias = format!("{head}do:\n  - x:\n      set: &a {{v: 1}}\n  - y:\n      set: *a\n");
    assert!(Workflow::compile(&alias).is_err());
}

#[test]
fn schemas_are_compiled_with_the_definition() {
    let with_schema = |schema: &str| {
        format!(
            "document: {{dsl: '1.0.0', namespace: a, name: b, version: '1.0.0'}}\n\
             input:\n  schema:\n{schema}\ndo:\n  - one:\n      set: {{x: 1}}\n"
        )
    };
    Workflow::compile(&with_schema(
        "    format: json\n    document: {type: object, required: [a]}",
    ))
    .unwrap();
    // Nothing is fetched: a reference elsewhere is refused, as is what is not a schema.
    let remote = errors(&with_schema(
        "    document: {$ref: 'https://schemas.example/order.json'}",
    ));
    assert!(
        remote
            .to_string()
            .contains("not a JSON Schema Ratchet can use"),
        "{remote}"
    );
    let broken = errors(&with_schema("    document: {type: 12}"));
    assert!(
        broken
            .to_string()
            .contains("not a JSON Schema Ratchet can use"),
        "{broken}"
    );
    let fetched = errors(&with_schema(
        "    resource: {endpoint: 'https://schemas.example/order.json'}",
    ));
    assert!(
        fetched.to_string().contains("a schema from a resource"),
        "{fetched}"
    );
}

#[test]
fn named_errors_retries_and_timeouts_are_the_inline_ones() {
    let named = r#"document: {dsl: '1.0.0', namespace: a, name: b, version: '1.0.0'}
use:
  errors:
    late: {type: 'https://x.example/late', status: 504, title: Late}
  retries:
    patient:
      delay: {seconds: 2}
      backoff: {linear: {}}
      limit: {attempt: {count: 4}}
  timeouts:
    short: {after: PT3S}
do:
  - guarded:
      try:
        - wait: {wait: PT1S, timeout: short}
      catch:
        retry: patient
  - fail:
      raise:
        error: late
"#;
    let inline = r#"document: {dsl: '1.0.0', namespace: a, name: b, version: '1.0.0'}
do:
  - guarded:
      try:
        - wait: {wait: PT1S, timeout: {after: PT3S}}
      catch:
        retry:
          delay: {seconds: 2}
          backoff: {linear: {}}
          limit: {attempt: {count: 4}}
  - fail:
      raise:
        error: {type: 'https://x.example/late', status: 504, title: Late}
"#;
    assert_eq!(
        Workflow::compile(named).unwrap(),
        Workflow::compile(inline).unwrap()
    );
    let unknown = errors(&named.replace("error: late", "error: lost"));
    assert!(
        unknown
            .to_string()
            .contains("names no error of the workflow's use.errors"),
        "{unknown}"
    );
}

#[test]
fn retry_policies_are_checked_whole() {
    let with_retry = |retry: &str| {
        format!(
            "document: {{dsl: '1.0.0', namespace: a, name: b, version: '1.0.0'}}\n\
             do:\n  - guarded:\n      try:\n        - w: {{wait: PT1S}}\n      catch:\n        retry: {retry}\n"
        )
    };
    // Every field of the reference's retry policy compiles.
    Workflow::compile(&with_retry(
        "{when: '${ .status >= 500 }', exceptWhen: '${ $error.status == 501 }', delay: PT1S, \
         backoff: {linear: {}}, jitter: {from: PT0.1S, to: PT0.5S}, \
         limit: {attempt: {count: 5, duration: PT10S}, duration: {minutes: 1}}}",
    ))
    .unwrap();
    // A duration alone bounds the attempts.
    Workflow::compile(&with_retry("{limit: {duration: PT1M}}")).unwrap();
    for (retry, says) in [
        (
            "{jitter: {from: PT2S, to: PT1S}}",
            "retry.jitter.from is longer than retry.jitter.to",
        ),
        ("{jitter: {from: PT2S}}", "retry.jitter needs `to`"),
        ("{jitter: {to: PT2S, by: 3}}", "`by`"),
        (
            "{limit: {attempt: {count: 0}}}",
            "retry.limit.attempt.count is a whole number, at least 1",
        ),
        (
            "{limit: {attempt: {duration: PT1S}}}",
            "retry.limit needs attempt.count or duration",
        ),
        (
            "{limit: {attempt: {count: 2, duration: PT0S}}}",
            "retry.limit.attempt.duration must be longer than zero",
        ),
        (
            "{limit: {duration: {days: 99999}}}",
            "retry.limit.duration: a duration is at most 100 years",
        ),
        ("{when: '${ $nowhere }'}", "retry.when"),
        ("{exceptWhen: '${ .a | frobnicate }'}", "retry.exceptWhen"),
    ] {
        let found = errors(&with_retry(retry));
        assert!(found.to_string().contains(says), "{retry}: {found}");
    }
}
