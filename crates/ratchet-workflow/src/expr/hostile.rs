//! Expressions written to take a process down: each is refused when compiled or stopped
//! when run, with an error that says why, and the test process lives to check the next.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{EvalError, Expr, Scope, EVAL_FUEL};

fn refused(code: &str) -> String {
    match Expr::compile(code, &[]) {
        Ok(_) => panic!("`{}` compiled", &code[..code.len().min(60)]),
        Err(e) => e,
    }
}

/// Compiles (with `$x` bound) and runs `code` on `input` with `$x` = `x`. The code runs only
/// when `$x` is given, so the trial run on null at compile time passes: these are the
/// expressions that need data to go wrong.
fn run(code: &str, input: Value, x: Value) -> Result<Value, EvalError> {
    let code = format!("if $x == null then null else ({code}) end");
    let expr = Expr::compile(&code, &["$x".to_string()]).unwrap_or_else(|e| panic!("{e}"));
    let scope = Scope::from([("$x".to_string(), Arc::new(x))]);
    expr.eval(&input, &scope)
}

fn exhausted(code: &str, x: Value) -> String {
    assert!(!x.is_null());
    match run(code, Value::Null, x) {
        Err(EvalError::Exhausted(why)) => why,
        other => panic!("`{code}` gave {other:?}"),
    }
}

#[test]
fn filters_that_reach_outside_the_workflow_are_refused_by_name() {
    for (code, name) in [
        ("halt", "halt"),
        ("1 | halt_error", "halt_error"),
        ("halt_error(1)", "halt_error"),
        ("debug", "debug"),
        ("debug(\"x\")", "debug"),
        ("stderr", "stderr"),
        ("[inputs]", "inputs"),
        ("input", "input"),
        ("env.HOME", "env"),
        ("$ENV.HOME", "$ENV"),
        ("now", "now"),
        ("0 | localtime", "localtime"),
        ("0 | strflocaltime(\"%H\")", "strflocaltime"),
        ("input_filename", "input_filename"),
        ("{a: (1 | halt)}", "halt"),
        ("\"\\(halt)\"", "halt"),
        ("def f: halt; 1", "halt"),
        ("_ratchet_matches(\"a\"; \"\")", "_ratchet_matches"),
    ] {
        let e = refused(code);
        assert!(e.contains(&format!("`{name}`")), "`{code}`: {e}");
    }
    // The same words as fields, keys and strings are data, not calls.
    for code in [
        ".halt",
        "{halt: 1}",
        "{halt}",
        ".debug.now",
        "\"halt\"",
        "{env: .env}",
    ] {
        assert!(Expr::compile(code, &[]).is_ok(), "`{code}` was refused");
    }
}

#[test]
fn deep_or_long_expressions_are_refused_before_they_are_parsed() {
    let parens = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(refused(&parens).contains("at most 16384 bytes"));
    let parens = format!("{}1{}", "(".repeat(2_000), ")".repeat(2_000));
    assert!(refused(&parens).contains("nest brackets at most 64 deep"));
    let arrays = format!("{}1{}", "[".repeat(65), "]".repeat(65));
    assert!(refused(&arrays).contains("nest"));
    let strings = format!("{}1{}", "\"\\(".repeat(65), ")\"".repeat(65));
    assert!(refused(&strings).contains("nest"));
    assert!(refused(&"1 + ".repeat(1_100_000)).contains("bytes"));
    // Long chains are within the length limit: they compile, or are refused, but nothing
    // overflows.
    for chain in [
        ".|".repeat(8_000) + ".",
        "1+".repeat(8_000) + "1",
        "-".repeat(16_000) + "1",
    ] {
        let _ = Expr::compile(&chain, &[]);
    }
    let nested_ifs = "if . then ".repeat(1_500) + "1" + &" else 2 end".repeat(1_500);
    let _ = Expr::compile(&nested_ifs, &[]);
}

#[test]
fn expressions_that_cannot_finish_are_refused_at_compile_time() {
    let e = refused("def f: 1 + f; f");
    assert!(e.contains("recursion") && e.contains("cannot run"), "{e}");
    for code in [
        "[range(1e9)]",
        "last(range(1e15))",
        "[limit(1e9; repeat(1))] | length",
        "def f: f; f",
        "until(false; .)",
        "reduce range(1e12) as $i (0; . + $i)",
    ] {
        let e = refused(code);
        assert!(
            e.contains("budget") || e.contains("recursion"),
            "`{code}`: {e}"
        );
    }
}

#[test]
fn values_cannot_outgrow_their_limits() {
    // One step that would allocate ten gigabytes.
    let e = exhausted("$x * 10000000000", json!("x"));
    assert!(e.contains("string of 10000000000 bytes"), "{e}");
    // Doubling: forty steps to a terabyte.
    let e = exhausted("reduce range(40) as $i ($x; . + .)", json!("x"));
    assert!(e.contains("string"), "{e}");
    let e = exhausted("reduce range(40) as $i ($x; . + .)", json!([1]));
    assert!(e.contains("elements") || e.contains("budget"), "{e}");
    // A value shared by reference 2^40 times over: small in memory, huge to walk.
    for walk in [
        "tojson",
        "tostring",
        "\"\\(.)\"",
        ". == ($x | . as $y | reduce range(40) as $i (1; [., .]))",
        "[..] | length",
        "flatten | length",
    ] {
        let code = format!("reduce range(40) as $i ($x; [., .]) | {walk}");
        let e = exhausted(&code, json!(1));
        assert!(e.contains("budget") || e.contains("bytes"), "`{walk}`: {e}");
    }
    // Nesting deeper than a stored value may.
    let e = exhausted("reduce range(200) as $i ($x; [.])", json!(1));
    assert!(e.contains("nested deeper than 100"), "{e}");
    let e = exhausted("(\"[\" * $x) + (\"]\" * $x) | fromjson", json!(110));
    assert!(e.contains("deeper than 100"), "{e}");
    match run(
        "(\"[\" * $x) + (\"]\" * $x) | fromjson",
        Value::Null,
        json!(100_000),
    ) {
        Err(EvalError::Failed(e)) => assert!(e.contains("cannot parse"), "{e}"),
        other => panic!("{other:?}"),
    }
    // Big integers become floats instead of filling memory.
    let out = run("reduce range(40) as $i ($x; . * .)", Value::Null, json!(3)).unwrap();
    assert!(out.is_number(), "{out}");
}

#[test]
fn times_outside_the_calendar_are_errors_not_overflows() {
    // Found by fuzzing: jaq multiplies the seconds by a million in 64 bits (and adds one to
    // the month in 8 bits) without checking.
    for (code, input) in [
        ("gmtime", json!(17_040_671_917_049_i64)),
        ("strftime(\"%Y\")", json!(-17_040_671_917_049_i64)),
        ("mktime", json!([2024, 127, 1, 0, 0, 0])),
        ("strftime(\"%Y\")", json!([20000, 0, 1, 0, 0, 0])),
    ] {
        match run(code, input.clone(), json!(1)) {
            Err(EvalError::Failed(why)) => {
                assert!(why.contains("between years 1 and 9999"), "{code}: {why}")
            }
            other => panic!("`{code}` on {input} gave {other:?}"),
        }
    }
    // The calendar's ends still work.
    assert_eq!(
        run("gmtime | mktime", json!(253_402_207_200_i64), json!(1)).unwrap(),
        json!(253_402_207_200_i64)
    );
}

#[test]
fn long_work_in_one_step_is_charged() {
    let e = exhausted("[range($x)] | sort", json!(2_000_000));
    assert!(e.contains("budget") || e.contains("elements"), "{e}");
    let e = exhausted("($x * 400000) | indices($x * 20000) | length", json!("a"));
    assert!(e.contains("budget"), "{e}");
    // A regular expression is bounded in size and charged for the text it reads.
    match run("$x | test(\"a\" * 2000)", Value::Null, json!("aaa")) {
        Err(EvalError::Failed(e)) => assert!(e.contains("at most 1000 bytes"), "{e}"),
        other => panic!("{other:?}"),
    }
    let fine = run("$x * 1000 | test(\"(a+)+$\")", Value::Null, json!("a")).unwrap();
    assert_eq!(fine, json!(true));
}

#[test]
fn the_budget_is_counted_the_same_on_every_run() {
    let expr = Expr::compile("[range($x)] | length", &["$x".to_string()]).unwrap();
    let scope = Scope::from([("$x".to_string(), Arc::new(json!(100_000)))]);
    let first = expr.eval_with(&Value::Null, &scope, EVAL_FUEL);
    let second = expr.eval_with(&Value::Null, &scope, EVAL_FUEL);
    assert_eq!(first, second);
    assert_eq!(first.0, Ok(json!(100_000)));
    let scope = Scope::from([("$x".to_string(), Arc::new(json!(10_000_000)))]);
    let first = expr.eval_with(&Value::Null, &scope, EVAL_FUEL);
    let second = expr.eval_with(&Value::Null, &scope, EVAL_FUEL);
    assert_eq!(first, second);
    assert!(matches!(first.0, Err(EvalError::Exhausted(_))));
    assert_eq!(first.1, EVAL_FUEL);
}

#[test]
fn ordinary_expressions_run_as_jq_says() {
    for (code, input, out) in [
        (".a.b", json!({"a": {"b": 2}}), json!(2)),
        ("[.[] | . * 2]", json!([1, 2]), json!([2, 4])),
        ("map(select(. > 1)) | add", json!([1, 2, 3]), json!(5)),
        (
            "to_entries | map(.key) | join(\",\")",
            json!({"x": 1, "y": 2}),
            json!("x,y"),
        ),
        (
            ".a += 1 | .b |= . + \"!\"",
            json!({"a": 1, "b": "hi"}),
            json!({"a": 2, "b": "hi!"}),
        ),
        ("del(.a) | keys", json!({"a": 1, "b": 2}), json!(["b"])),
        (".[1:] | .[-1]", json!([1, 2, 3]), json!(3)),
        (
            ".[2:4] = [\"x\"]",
            json!([0, 1, 2, 3, 4]),
            json!([0, 1, "x", 4]),
        ),
        (
            "sort_by(.n) | map(.n)",
            json!([{"n": 3}, {"n": 1}]),
            json!([1, 3]),
        ),
        (
            "group_by(. % 2)",
            json!([1, 2, 3, 4]),
            json!([[2, 4], [1, 3]]),
        ),
        ("unique", json!([3, 1, 3, null]), json!([null, 1, 3])),
        (". - [2]", json!([1, 2, 3, 2]), json!([1, 3])),
        ("{a: 1} * {a: {b: 2}}", json!(null), json!({"a": {"b": 2}})),
        ("\"a,b\" / \",\"", json!(null), json!(["a", "b"])),
        (
            "tojson | fromjson",
            json!({"a": [1, "x"]}),
            json!({"a": [1, "x"]}),
        ),
        ("\"x=\\(.a)\"", json!({"a": [1]}), json!("x=[1]")),
        (
            "contains({a: [1]})",
            json!({"a": [1, 2], "b": 0}),
            json!(true),
        ),
        ("[paths]", json!({"a": [1]}), json!([["a"], ["a", 0]])),
        ("test(\"^a.c$\")", json!("abc"), json!(true)),
        ("[splits(\", *\")]", json!("a, b,c"), json!(["a", "b", "c"])),
        ("sub(\"b\"; \"B\")", json!("abc"), json!("aBc")),
        ("ascii_downcase | length", json!("ÄBC"), json!(3)),
        ("[range(0; 10; 3)]", json!(null), json!([0, 3, 6, 9])),
        ("[limit(3; repeat(1))]", json!(null), json!([1, 1, 1])),
        ("indices(\", \")", json!("a, b, c"), json!([1, 4])),
        ("bsearch(3)", json!([1, 3, 5]), json!(1)),
        ("has(\"a\"), has(\"z\")", json!({"a": 1}), json!(true)),
        ("1e1000", json!(null), json!(f64::MAX)),
        ("todate", json!(0), json!("1970-01-01T00:00:00Z")),
        ("gmtime | mktime", json!(1704067200), json!(1704067200)),
        ("strftime(\"%Y\")", json!(86400 * 366), json!("1971")),
        (
            "[.[] | tostring]",
            json!([1, "a", [2]]),
            json!(["1", "a", "[2]"]),
        ),
        ("getpath([\"a\", 0])", json!({"a": [7]}), json!(7)),
        (
            "walk(if type == \"number\" then . + 1 else . end)",
            json!([1, {"a": 2}]),
            json!([2, {"a": 3}]),
        ),
    ] {
        let got = run(code, input.clone(), json!(true));
        assert_eq!(got, Ok(out), "`{code}` on {input}");
    }
}
