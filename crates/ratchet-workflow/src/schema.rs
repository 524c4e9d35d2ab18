//! The DSL's published JSON Schema (`schema/workflow.yaml`), checked before Ratchet's own
//! rules: a definition Ratchet accepts is one any other runtime of the DSL reads too.

use std::sync::OnceLock;

use marked_yaml::Node;
use serde_json::Value;

use crate::compile::literal;
use crate::diagnostic::CompileError;

const SCHEMA: &str = include_str!("../schema/workflow.yaml");

fn validator() -> Result<&'static jsonschema::Validator, &'static str> {
    static VALIDATOR: OnceLock<Result<jsonschema::Validator, String>> = OnceLock::new();
    VALIDATOR
        .get_or_init(|| {
            let root = crate::compile::parse(SCHEMA).map_err(|e| e.to_string())?;
            jsonschema::draft202012::options()
                .should_validate_formats(false)
                .build(&literal(&root))
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(String::as_str)
}

/// The node a JSON pointer (`/do/0/step/call`) names, or the deepest one on the way.
fn node_at<'n>(root: &'n Node, pointer: &str) -> &'n Node {
    let mut node = root;
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        let next = match node {
            Node::Mapping(m) => m.get_node(&token),
            Node::Sequence(s) => token.parse::<usize>().ok().and_then(|i| s.get(i)),
            Node::Scalar(_) => None,
        };
        match next {
            Some(n) => node = n,
            None => break,
        }
    }
    node
}

/// Every place the definition breaks the DSL's schema, each at its line and column, with the
/// last line of the part of the definition it is about.
pub(crate) fn check(root: &Node) -> Vec<(CompileError, usize)> {
    let validator = match validator() {
        Ok(v) => v,
        Err(e) => {
            return vec![(
                CompileError::new(0, 0, format!("the DSL's schema does not load: {e}")),
                0,
            )]
        }
    };
    let instance: Value = literal(root);
    let mut errors: Vec<(CompileError, usize)> = validator
        .iter_errors(&instance)
        .map(|e| {
            let pointer = e.instance_path().to_string();
            let span = node_at(root, &pointer).span();
            let (line, column) = span.start().map_or((0, 0), |m| (m.line(), m.column()));
            let last = span.end().map_or(line, |m| m.line());
            let semver = pointer.ends_with("/version") || pointer.ends_with("/dsl");
            let at = if pointer.is_empty() { "/".to_string() } else { pointer };
            let error = CompileError::new(
                line,
                column,
                if semver && e.to_string().contains("does not match") {
                    format!("not valid under the DSL's schema at {at}: {} is not a semantic version such as 1.0.0", e.instance())
                } else {
                    format!("not valid under the DSL's schema at {at}: {}", shorten(&e.to_string()))
                },
            );
            (error, last)
        })
        .collect();
    errors.sort_by_key(|(e, _)| (e.line, e.column));
    errors.dedup_by(|a, b| a.0.line == b.0.line && a.0.column == b.0.column);
    errors
}

/// A schema message without the long regular expressions the DSL's patterns are, nor the
/// value it is about written out again.
fn shorten(message: &str) -> String {
    if message.ends_with("is not valid under any of the schemas listed in the 'oneOf' keyword") {
        return "matches none of the forms the DSL allows here (a task is one kind with that \
                kind's fields, such as `set` with at least one field)"
            .to_string();
    }
    match message.split_once(" does not match \"") {
        Some((value, pattern)) if pattern.len() > 40 => {
            format!("{value} does not have the form the DSL requires here")
        }
        _ => message.to_string(),
    }
}
