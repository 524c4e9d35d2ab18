//! The inputs that once broke the compiler or the evaluator (fuzz/regressions, kept from
//! the issues and from fuzzing), replayed on every test run: each gets an answer, no crash.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use ratchet_workflow::{Expression, ExpressionError, Workflow};

fn cases(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target);
    let mut found: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    found.sort();
    assert!(!found.is_empty(), "no cases in {}", dir.display());
    found
}

#[test]
fn definitions_that_broke_the_compiler_are_refused() {
    for (name, data) in cases("workflow_compile") {
        let source = String::from_utf8_lossy(&data);
        assert!(Workflow::compile(&source).is_err(), "{name} compiled");
    }
}

#[test]
fn expressions_that_broke_the_evaluator_are_refused_or_stopped() {
    for (name, data) in cases("expression") {
        // As the fuzz target reads them: the expression, a NUL, the JSON input.
        let at = data.iter().position(|b| *b == 0).unwrap_or(data.len());
        let code = String::from_utf8_lossy(&data[..at]);
        let input = serde_json::from_slice(data.get(at + 1..).unwrap_or(&[]))
            .unwrap_or(serde_json::Value::Null);
        let outcome = Expression::compile(&code).and_then(|e| e.evaluate(&input));
        assert!(
            matches!(
                outcome,
                Err(ExpressionError::Compile(_)
                    | ExpressionError::Budget(_)
                    | ExpressionError::Failed(_))
            ),
            "{name}: {outcome:?}"
        );
    }
}
