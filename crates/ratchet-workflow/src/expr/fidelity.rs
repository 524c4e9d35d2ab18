//! The metered evaluator computes what jaq itself computes: the same expressions run on
//! jaq's own values (unmetered) and on Ratchet's, with the same outputs and errors.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{data, Compiler, Ctx, Vars};
use jaq_json::Val;
use proptest::prelude::*;
use serde_json::{json, Value};

use super::{EvalError, Expr, Scope};

/// `code` on `input` by jaq alone: its first output as JSON, or `Err` for an error; `None`
/// when the output is not JSON (jaq allows objects with keys of any type, Ratchet's
/// expressions do not).
fn reference(code: &str, input: &Value) -> Option<Result<Value, ()>> {
    reference_run(code, input).unwrap_or(Some(Err(())))
}

fn reference_run(code: &str, input: &Value) -> Result<Option<Result<Value, ()>>, ()> {
    type F = jaq_core::Filter<data::JustLut<Val>>;
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let arena = Arena::default();
    let modules = Loader::new(defs)
        .load(&arena, File { code, path: () })
        .map_err(|_| ())?;
    let filter: F = Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|_| ())?;
    let ctx = Ctx::<data::JustLut<Val>>::new(&filter.lut, Vars::new([]));
    let input: Val = serde_json::from_value(input.clone()).map_err(|_| ())?;
    let first = filter.id.run((ctx, input)).next();
    Ok(match first {
        None => Some(Ok(Value::Null)),
        Some(Ok(v)) => serde_json::from_str(&v.to_string()).ok().map(Ok),
        Some(Err(_)) => Some(Err(())),
    })
}

const PROGRAMS: &[&str] = &[
    ".",
    ".a",
    ".[0]",
    ".[-1]",
    ".[1:]",
    ".[:-1]",
    ".[]?",
    "[.[]?]",
    "keys?",
    "length",
    "to_entries?",
    "[paths]",
    "[leaf_paths]",
    "tojson",
    "tostring",
    "type",
    "add?",
    ". == .",
    ". < [1]",
    "[., .] | sort",
    "[., 1, \"a\", null] | unique",
    ". + .",
    ". * 2",
    ". - [1]?",
    ".a = 1",
    ".[0] = 1",
    ".a.b |= 3",
    "del(.a)?",
    "del(.[0])?",
    "setpath([\"a\"]; 1)",
    "null | setpath([0]; 1)",
    "null | .a = 1",
    "null | .[2] = 1",
    "getpath([\"a\",\"b\"])?",
    "[.[]?] | reverse",
    "map(tostring)?",
    "with_entries(.value |= tostring)?",
    "[splits(\"a\")]?",
    "ascii_downcase?",
    "explode? | implode",
    "@base64? | @base64d",
    "indices(1)?",
    "index(\"a\")?",
    "contains(.)",
    "inside(.)",
    "has(0)?",
    "has(\"a\")?",
    "tojson | fromjson",
    "[.. | numbers]",
    "[.. | strings]",
    "flatten?",
    "min?",
    "max?",
    "group_by(type)?",
    "sort_by(tostring)?",
    "[limit(2; .[]?)]",
    "first(.[]?)",
    "[.[]?] | last",
    "to_entries? | from_entries",
    "tostream?",
    "[tostream?] | fromstream(.[])",
    "@json",
    "@text",
    "@html?",
    "@uri?",
    "@sh?",
    "@csv?",
    "walk(.)",
    "[recurse]",
    "any",
    "all",
    "isvalid(.a)",
    "splits(\", \")?",
    "ltrimstr(\"a\")",
    "rtrimstr(\"a\")",
    "startswith(\"a\")?",
    "if . then 1 else 2 end",
    ". // 5",
    "try error(.) catch .",
    "[.[]?] | add / length?",
    ".[\"a\"]?",
    ".[1:3] = [\"x\"]?",
    ".a += 1?",
    "{a: .}",
    "[.] | transpose?",
    "input_line_number?",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000_i64..1000).prop_map(Value::from),
        (-1e6_f64..1e6).prop_map(|f| json!(f)),
        "[a-c ,]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]{1,2}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

#[test]
fn metered_values_compute_what_jaq_computes() {
    use proptest::test_runner::{Config, TestRunner};
    // Each program compiled once; every generated input run through all of them.
    let programs: Vec<(&str, Option<Expr>)> = PROGRAMS
        .iter()
        .map(|code| (*code, Expr::compile(code, &[]).ok()))
        .collect();
    let mut runner = TestRunner::new(Config::with_cases(48));
    runner
        .run(&json_value(), |input| {
            for (code, expr) in &programs {
                let Some(expected) = reference(code, &input) else {
                    continue;
                };
                let got = match expr {
                    None => Err(()),
                    Some(expr) => match expr.eval(&input, &Scope::new()) {
                        Ok(v) => Ok(v),
                        Err(EvalError::Failed(_)) => Err(()),
                        Err(EvalError::Exhausted(e)) => panic!("`{code}` exhausted: {e}"),
                    },
                };
                prop_assert_eq!(got, expected, "`{}` on {}", code, input);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
