//! The decompiler: any compiled definition written back as canonical YAML compiles to the
//! same workflow (compile → decompile → compile is the identity), for hand-written
//! definitions and for generated ones of every kind of task.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use ratchet_workflow::Workflow;
use serde_json::{json, Value};

fn round_trip(source: &str) {
    let first = Workflow::compile(source).unwrap_or_else(|e| panic!("{e}\n{source}"));
    let yaml = first.decompile();
    let second = Workflow::compile(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(
        first, second,
        "not the same workflow after decompiling:\n{yaml}"
    );
    assert_eq!(
        second.decompile(),
        yaml,
        "the canonical form is a fixed point"
    );
}

#[test]
fn a_schedule_survives_a_round_trip() {
    for schedule in [
        "{every: {minutes: 90}}",
        "{cron: '0 9 * * MON-FRI'}",
        "{after: PT30S}",
    ] {
        round_trip(&format!(
            "document: {{dsl: '1.0.0', namespace: ops, name: report, version: '1.0.0'}}\n\
             schedule: {schedule}\n\
             do:\n  - done:\n      set: {{ok: true}}\n"
        ));
    }
}

#[test]
fn every_kind_survives_a_round_trip() {
    round_trip(include_str!("../../../examples/workflows/every-kind.yaml"));
}

/// Expressions the generator draws from: each valid where any value is.
const EXPRS: [&str; 5] = [
    ".",
    ".a // 1",
    "[.[]?] | length",
    "$input",
    "{x: 1, y: \"q'\\\"\"}",
];

fn expr() -> impl Strategy<Value = String> {
    prop::sample::select(&EXPRS[..]).prop_map(|e| format!("${{ {e} }}"))
}

fn literal() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        (-1000i64..1000).prop_map(Value::from),
        "[a-z ]{0,8}".prop_map(Value::from),
        Just(json!("true")),
        Just(json!("12")),
        Just(json!({"k": [1, "two", null]})),
    ]
}

fn arg() -> impl Strategy<Value = Value> {
    prop_oneof![literal(), expr().prop_map(Value::from)]
}

fn duration() -> impl Strategy<Value = Value> {
    prop_oneof![
        (0u64..100_000).prop_map(|ms| json!({"milliseconds": ms})),
        Just(json!("PT1H2M3.5S")),
        Just(json!({"minutes": 2, "seconds": 1})),
    ]
}

/// A task list of `size` tasks (names unique), each a leaf kind or, while `depth` lasts, a
/// composite one with a list of its own.
fn tasks(depth: u32) -> BoxedStrategy<Vec<Value>> {
    let leaf = prop_oneof![
        arg().prop_map(|a| json!({"set": {"v": a}})),
        prop_oneof![
            arg().prop_map(|a| json!({"call": "act", "with": {"a": a}})),
            Just(json!({"call": "act"})),
        ],
        duration().prop_map(|d| json!({"wait": d})),
        "[a-z]{1,6}".prop_map(|s| json!({"listen": {"to": {"one": {"with": {"type": s}}}}})),
        (arg(), "[a-z]{1,6}").prop_map(|(d, s)| json!({"emit": {"event": {"with":
            {"type": s, "source": "https://x.example", "tags": [format!("k:{s}")], "data": d}}}})),
        (expr(), 100u32..600).prop_map(|(d, st)| json!({"if": "${ false }",
            "raise": {"error": {"type": "https://e.x/x", "status": st, "detail": d}}})),
        (expr(), "[a-z]{1,5}").prop_map(|(e, n)| json!({"run": {"workflow":
            {"namespace": "ns", "name": n, "version": "1.0.0", "input": {"v": e}}}})),
    ];
    let with_common = (
        leaf,
        prop::option::of(expr()),
        prop::option::of(expr()),
        prop::option::of(duration()),
        prop::option::of(expr()),
    )
        .prop_map(|(mut t, when, out, timeout, status)| {
            if let Some(s) = status {
                t["metadata"] = json!({"ratchet": {"status": s, "continueAsNew": {"n": s}}});
            }
            if let Some(w) = when {
                t["if"] = json!(w);
            }
            if let Some(o) = out {
                t["output"] = json!({"as": o});
                t["export"] = json!({"as": {"last": o}});
            }
            if let Some(d) = timeout {
                t["timeout"] = json!({"after": d});
            }
            t
        });
    let task = if depth == 0 {
        with_common.boxed()
    } else {
        let inner = tasks(depth - 1);
        prop_oneof![
            4 => with_common,
            1 => inner.clone().prop_map(|b| json!({"do": b})),
            1 => (inner.clone(), expr(), any::<bool>()).prop_map(|(b, e, w)| {
                let mut t = json!({"for": {"each": "it", "in": e, "at": "n"}, "do": b});
                if w {
                    t["while"] = json!("${ $n < 3 }");
                }
                t
            }),
            1 => (inner.clone(), any::<bool>()).prop_map(|(b, c)| json!({"fork": {"compete": c, "branches": b}})),
            1 => (inner.clone(), inner, any::<bool>(), 1u32..4, 0u8..4).prop_map(|(b, h, exp, n, more)| {
                let mut retry = json!({"delay": {"seconds": 1},
                    "backoff": if exp { json!({"exponential": {}}) } else { json!({"constant": {}}) },
                    "limit": {"attempt": {"count": n}}});
                match more {
                    1 => retry["jitter"] = json!({"from": {"milliseconds": 10}, "to": "PT0.25S"}),
                    2 => {
                        retry["limit"] = json!({"attempt": {"count": n, "duration": "PT5S"}, "duration": {"minutes": 1}});
                        retry["when"] = json!("${ .status >= 500 }");
                        retry["exceptWhen"] = json!("${ $err.status == 501 }");
                    }
                    3 => retry["limit"] = json!({"duration": {"minutes": 2}}),
                    _ => {}
                }
                json!({
                    "try": b,
                    "catch": {"errors": {"with": {"status": 500}}, "as": "err", "when": "${ $err.status > 0 }",
                              "retry": retry, "do": h}})
            }),
        ]
        .boxed()
    };
    prop::collection::vec(task, 1..4)
        .prop_map(|list| {
            let n = list.len();
            list.into_iter()
                .enumerate()
                .map(|(i, mut t)| {
                    // The last task may leave its list, end the workflow, or loop back to the
                    // first; a switch first routes to the last.
                    if i == n - 1 && n > 1 {
                        t["then"] = json!(["exit", "end", "t0"][i % 3]);
                    }
                    json!({ format!("t{i}"): t })
                })
                .collect()
        })
        .boxed()
}

fn workflow() -> impl Strategy<Value = String> {
    (tasks(2), any::<bool>()).prop_map(|(mut list, switch)| {
        if switch {
            let last = format!("t{}", list.len() - 1);
            list.insert(
                0,
                json!({"route": {"switch": [
                    {"big": {"when": "${ .a > 1 }", "then": last}},
                    {"other": {"then": "continue"}}
                ]}}),
            );
        }
        json!({
            "document": {"dsl": "1.0.0", "namespace": "gen", "name": "flow", "version": "0.1.0"},
            "input": {"from": "${ . }"},
            "do": list,
            "output": {"as": "${ . }"}
        })
        .to_string()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn compile_decompile_compile_is_the_identity(source in workflow()) {
        round_trip(&source);
    }
}
