//! Every workflow of the specification's `examples/` (copied in `tests/spec-examples/`, see
//! its README) compiles, or is refused naming constructs Ratchet does not run, each one of
//! the list in docs/workflows.md ("Not supported, and why").
#![allow(clippy::unwrap_used)]

use std::path::Path;

use ratchet_workflow::Workflow;

/// The constructs docs/workflows.md lists as not supported, as the compiler names them.
const NOT_SUPPORTED: [&str; 9] = [
    "a race of signals and events without a timeout",
    "`foreach` on a listen",
    "`listen.read: ",
    "at the top of a workflow is not supported",
    "`evaluate` at the top of a workflow",
    "`call: asyncapi`",
    "`call: mcp`",
    "a custom function from a catalog",
    "`run: container`",
];

/// Authentication policies other than inline basic and bearer.
const AUTHENTICATION: [&str; 3] = [
    "authentication is not supported",
    "a named authentication (`use`",
    "credentials from a secret (`use`)",
];

#[test]
fn every_example_compiles_or_names_what_is_not_supported() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spec-examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut compiled = Vec::new();
    let mut refused = Vec::new();
    let mut unnamed = Vec::new();
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let source = std::fs::read_to_string(path).unwrap();
        match Workflow::compile(&source) {
            Ok(_) => compiled.push(name),
            Err(errors) => {
                for e in &errors.0 {
                    let named = NOT_SUPPORTED
                        .iter()
                        .chain(AUTHENTICATION.iter())
                        .any(|c| e.message.contains(c));
                    if !(named && e.message.contains("not supported by Ratchet")) {
                        unnamed.push(format!("{name}: {e}"));
                    }
                }
                refused.push(name);
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "errors that name nothing of the list:\n{}",
        unnamed.join("\n")
    );
    eprintln!(
        "{} examples compile, {} are refused naming what is not supported: {refused:?}",
        compiled.len(),
        refused.len()
    );
    assert_eq!(compiled.len() + refused.len(), 66);
    // What compiles today; a construct newly supported raises it.
    assert!(compiled.len() >= 46, "{compiled:?}");
}
