//! Runtime expressions: jq, as the DSL defines them (`${ .order.total > 100 }`), compiled and
//! run by jaq. An expression sees its input as `.` and the DSL's arguments as variables
//! (`$input`, `$context`, `$workflow`, loop and error variables in scope).
//!
//! An expression is a user's code, run inside a worker, the server and the group commit, so
//! it is held on every side:
//!
//! - **at compile time** it is at most [`MAX_EXPRESSION_BYTES`] long and nests its brackets
//!   at most [`MAX_NESTING`] deep; it may not call what would reach outside the workflow
//!   (`halt`, `debug`, `input`, `env`, `now`, `localtime`, ...: replay must see the same
//!   values, and no expression may stop or write to the process); and it is run once on
//!   `null` with its budget, so an expression that cannot finish is refused before it is
//!   stored;
//! - **when it runs** it is metered (see `meter.rs`): a step budget, a stack budget and
//!   size limits, counted the same way on every run, so running out fails the instance
//!   with the same error on a replay, and never takes a process down.

mod meter;
mod natives;
mod ops;
mod value;

#[cfg(test)]
mod fidelity;
#[cfg(test)]
mod hostile;

use std::collections::BTreeMap;
use std::sync::Arc;

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, DataT, Lut, Vars};
use serde_json::Value;

pub use meter::EVAL_FUEL;
pub(crate) use value::Capped;
use value::V;

/// The longest expression, in bytes.
pub const MAX_EXPRESSION_BYTES: usize = 16 * 1024;

/// How deeply an expression may nest brackets, parentheses, braces and interpolations.
pub const MAX_NESTING: usize = 64;

/// The stack compiling an expression runs on: parsing recurses once per operator of a
/// chain, and an expression of [`MAX_EXPRESSION_BYTES`] may hold thousands.
const COMPILE_STACK: usize = 256 << 20;

/// jaq's data for a metered evaluation: the values are [`V`], and every lookup of a term
/// (one per evaluation step) goes through the meter.
pub(crate) struct Metered;

impl DataT for Metered {
    type V<'a> = V;
    type Data<'a> = MeteredLut<'a>;
}

/// The table of an expression's terms, handed out through the meter.
#[derive(Clone)]
pub(crate) struct MeteredLut<'a>(&'a Lut<Metered>);

impl<'a> jaq_core::data::HasLut<'a, Metered> for MeteredLut<'a> {
    fn lut(&self) -> &'a Lut<Metered> {
        meter::step();
        self.0
    }
}

type Filter = jaq_core::Filter<Metered>;

/// Why an evaluation gave no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum EvalError {
    /// The expression raised an error, or its result is not JSON: the workflow's own
    /// error, which a `try` may catch.
    Failed(String),
    /// It ran out of its budget (or broke a limit): the instance fails.
    Exhausted(String),
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Failed(m) | Self::Exhausted(m) => f.write_str(m),
        }
    }
}

/// A compiled expression and the variables it was compiled with, in order.
#[derive(Clone)]
pub(crate) struct Expr {
    /// The source, as written (without `${ }`).
    pub(crate) code: String,
    filter: Arc<Filter>,
    vars: Vec<String>,
}

impl std::fmt::Debug for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "${{ {} }}", self.code)
    }
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        self.code == other.code && self.vars == other.vars
    }
}

/// The variables an expression sees, by name (with their `$`); shared, as every task of a
/// workflow sees `$workflow` and `$context`.
pub(crate) type Scope = BTreeMap<String, Arc<Value>>;

/// `${ code }` as code, or `None` for a string that is not an expression.
pub(crate) fn strip(text: &str) -> Option<&str> {
    let t = text.trim();
    t.strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .map(str::trim)
}

impl Expr {
    /// Compiles `code` for the variables `vars` (each with its `$`); the error says what is
    /// wrong and, for syntax, at which character of the expression.
    pub(crate) fn compile(code: &str, vars: &[String]) -> Result<Expr, String> {
        if code.len() > MAX_EXPRESSION_BYTES {
            return Err(format!(
                "an expression may be at most {MAX_EXPRESSION_BYTES} bytes, this one is {}",
                code.len()
            ));
        }
        check_nesting(code)?;
        // Only the variables the code names: each one an evaluation hands to jaq is converted
        // first, and `$workflow` holds the whole input. (A name can only be used where the
        // code spells it, so a variable left out here is one the code does not use.)
        let vars: Vec<String> = vars
            .iter()
            .filter(|v| code.contains(v.as_str()))
            .cloned()
            .collect();
        // Parsing and compiling recurse with the expression's shape, and dropping what they
        // build does too: all of it on a stack with room for the longest expression.
        let filter = stacker::grow(COMPILE_STACK, || {
            refuse_calls(code)?;
            let loader = Loader::new(natives::defs());
            let arena = Arena::default();
            let modules = loader
                .load(&arena, File { code, path: () })
                .map_err(|errors| load_error(code, &errors))?;
            Compiler::default()
                .with_funs(natives::funs())
                .with_global_vars(vars.iter().map(String::as_str))
                .compile(modules)
                .map_err(|errors| {
                    let undefined: Vec<String> = errors
                        .iter()
                        .flat_map(|(_, e)| e.iter())
                        .map(|(name, what)| format!("undefined {} `{name}`", what.as_str()))
                        .collect();
                    undefined.join("; ")
                })
        })?;
        let expr = Expr {
            code: code.to_string(),
            filter: Arc::new(filter),
            vars,
        };
        // A trial run on null: an expression that cannot finish within its budget even there
        // is refused now rather than failing every instance that reaches it.
        let nulls = Scope::new();
        if let (Err(EvalError::Exhausted(why)), _) = expr.eval_with(&Value::Null, &nulls, EVAL_FUEL)
        {
            return Err(format!(
                "`{}` cannot run: on null input {why}",
                short_code(code)
            ));
        }
        Ok(expr)
    }

    /// Runs the expression on `input` with `scope` and the evaluation's budget: its first
    /// output, `null` when it has none.
    #[cfg(test)]
    pub(crate) fn eval(&self, input: &Value, scope: &Scope) -> Result<Value, EvalError> {
        self.eval_with(input, scope, EVAL_FUEL).0
    }

    /// Runs the expression with at most `fuel` steps: its first output (`null` when it has
    /// none), and the fuel it used. The variables and input are converted inside the
    /// budget, and so is the result.
    pub(crate) fn eval_with(
        &self,
        input: &Value,
        scope: &Scope,
        fuel: u64,
    ) -> (Result<Value, EvalError>, u64) {
        let (outcome, left) = meter::run(fuel, || {
            let vars: Vec<V> = self
                .vars
                .iter()
                .map(|name| V::from_json(scope.get(name).map_or(&Value::Null, |v| v)))
                .collect();
            let lut = MeteredLut(&self.filter.lut);
            let ctx = Ctx::<Metered>::new(lut, Vars::new(vars));
            let mut outputs = self.filter.id.run((ctx, V::from_json(input)));
            match outputs.next() {
                None => Ok(Value::Null),
                Some(Ok(v)) => v.to_json().map_err(|e| {
                    EvalError::Failed(format!("`{}` gave {v}: {e}", short_code(&self.code)))
                }),
                Some(Err(exn)) => Err(match exn.get_err() {
                    Ok(e) => EvalError::Failed(format!("`{}` failed: {e}", short_code(&self.code))),
                    // A break or a tail call escaping the filter (never for a compiled one).
                    Err(_) => EvalError::Failed(format!(
                        "`{}` failed: control left the expression",
                        short_code(&self.code)
                    )),
                }),
            }
        });
        let used = fuel.saturating_sub(left);
        let result = match outcome {
            Ok(r) => r,
            Err(why) => Err(EvalError::Exhausted(format!(
                "`{}` was stopped: {why}",
                short_code(&self.code)
            ))),
        };
        (result, used)
    }
}

/// The first 80 characters of an expression (or of any text a definition gives, such as a
/// URI template), for messages.
pub(crate) fn short_code(code: &str) -> String {
    let mut out: String = code.chars().take(80).collect();
    if out.len() < code.len() {
        out.push_str("...");
    }
    out
}

/// Checks that `code` nests brackets, parentheses, braces and string interpolations at most
/// [`MAX_NESTING`] deep, reading strings as jq does, before anything recursive reads it.
fn check_nesting(code: &str) -> Result<(), String> {
    // What each open level is: a bracket (closed by its partner) or an interpolation
    // `\(` inside a string (closed by `)`, back into the string).
    enum Level {
        Bracket,
        Interpolation,
    }
    let mut levels: Vec<Level> = Vec::new();
    let mut in_string = false;
    let mut chars = code.char_indices();
    while let Some((at, c)) = chars.next() {
        if in_string {
            match c {
                '"' => in_string = false,
                '\\' => {
                    if let Some((_, '(')) = chars.next() {
                        levels.push(Level::Interpolation);
                        in_string = false;
                    }
                }
                _ => {}
            }
        } else {
            match c {
                '"' => in_string = true,
                '#' => {
                    // A comment, to the end of the line.
                    for (_, c) in chars.by_ref() {
                        if c == '\n' {
                            break;
                        }
                    }
                }
                '(' | '[' | '{' => levels.push(Level::Bracket),
                ')' => match levels.pop() {
                    Some(Level::Interpolation) => in_string = true,
                    Some(Level::Bracket) | None => {}
                },
                ']' | '}' => {
                    levels.pop();
                }
                _ => {}
            }
        }
        if levels.len() > MAX_NESTING {
            return Err(format!(
                "an expression may nest brackets at most {MAX_NESTING} deep; this one goes deeper at character {}",
                code[..at].chars().count() + 1
            ));
        }
    }
    Ok(())
}

/// Refuses calls of what an expression may not reach ([`natives::REFUSED`]) and of
/// Ratchet's own filters, naming the first found.
fn refuse_calls(code: &str) -> Result<(), String> {
    use jaq_core::load::lex::{StrPart, Tok, Token};
    let Ok(tokens) = jaq_core::load::Lexer::new(code).lex() else {
        // The loader reports the syntax error.
        return Ok(());
    };
    fn check(name: &str) -> Result<(), String> {
        if let Some((_, why)) = natives::REFUSED.iter().find(|(n, _)| *n == name) {
            return Err(format!("`{name}` is not available in workflows: {why}"));
        }
        if name.starts_with(natives::RESERVED_PREFIX) {
            return Err(format!("`{name}` is reserved for Ratchet"));
        }
        Ok(())
    }
    fn walk(tokens: &[Token<&str>], in_object: bool) -> Result<(), String> {
        let mut key_position = in_object;
        for (i, Token(text, tok)) in tokens.iter().enumerate() {
            let prev = i.checked_sub(1).map(|p| &tokens[p]);
            let next = tokens.get(i + 1);
            match tok {
                Tok::Word => {
                    let field = matches!(prev, Some(Token(".", Tok::Sym)));
                    let key = key_position
                        && matches!(next, None | Some(Token(":" | "," | "}", Tok::Sym)));
                    if !field && !key {
                        check(text)?;
                    }
                }
                Tok::Var => check(text)?,
                Tok::Block(inner) => walk(inner, text.starts_with('{'))?,
                Tok::Str(parts) => {
                    for part in parts {
                        if let StrPart::Term(Token(_, Tok::Block(inner))) = part {
                            walk(inner, false)?;
                        }
                    }
                }
                _ => {}
            }
            key_position = in_object && matches!(tok, Tok::Sym) && *text == ",";
        }
        Ok(())
    }
    walk(&tokens, false)
}

/// A load (lex or parse) error of `code`, with the character where it went wrong.
fn load_error(code: &str, errors: &jaq_core::load::Errors<&str, ()>) -> String {
    use jaq_core::load::Error;
    let at = |found: &str| {
        let offset = (found.as_ptr() as usize).saturating_sub(code.as_ptr() as usize);
        offset.min(code.len()) + 1
    };
    let mut out = Vec::new();
    for (_, error) in errors {
        match error {
            Error::Lex(errors) => out.extend(errors.iter().map(|(expect, found)| {
                format!("expected {} at character {}", expect.as_str(), at(found))
            })),
            Error::Parse(errors) => out.extend(errors.iter().map(|(expect, found)| {
                let what = if found.is_empty() {
                    "the end".to_string()
                } else {
                    format!("`{}`", found.chars().take(12).collect::<String>())
                };
                format!(
                    "expected {} at character {} (found {what})",
                    expect.as_str(),
                    at(found)
                )
            })),
            Error::Io(errors) => out.extend(errors.iter().map(|(_, e)| e.clone())),
        }
    }
    format!("syntax error in `{code}`: {}", out.join("; "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn vars(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn an_expression_sees_its_input_and_variables() {
        let e = Expr::compile(".total + $context.fee", &vars(&["$context"])).unwrap();
        let scope = Scope::from([("$context".to_string(), Arc::new(json!({"fee": 2})))]);
        assert_eq!(e.eval(&json!({"total": 40}), &scope).unwrap(), json!(42));
        let e = Expr::compile("[.[] | select(. > 1)]", &[]).unwrap();
        assert_eq!(
            e.eval(&json!([1, 2, 3]), &Scope::new()).unwrap(),
            json!([2, 3])
        );
        let e = Expr::compile("empty", &[]).unwrap();
        assert_eq!(e.eval(&json!(1), &Scope::new()).unwrap(), Value::Null);
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let e = Expr::compile(".a +", &[]).unwrap_err();
        assert!(e.contains("syntax error") && e.contains("character"), "{e}");
        let e = Expr::compile("now", &[]).unwrap_err();
        assert!(
            e.contains("`now` is not available") && e.contains("replay"),
            "{e}"
        );
        let e = Expr::compile("$nope", &vars(&["$input"])).unwrap_err();
        assert!(e.contains("undefined variable `$nope`"), "{e}");
        let e = Expr::compile(".a | error(\"boom\")", &[]).unwrap();
        let failed = e.eval(&json!({"a": 1}), &Scope::new()).unwrap_err();
        assert!(failed.to_string().contains("boom"), "{failed}");
    }

    #[test]
    fn only_dollar_braces_mark_an_expression() {
        assert_eq!(strip("${ .a }"), Some(".a"));
        assert_eq!(strip(" ${.a} "), Some(".a"));
        assert_eq!(strip(".a"), None);
        assert_eq!(strip("$.a"), None);
    }
}
