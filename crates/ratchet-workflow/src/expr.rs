//! Runtime expressions: jq, as the DSL defines them (`${ .order.total > 100 }`), compiled and
//! run by jaq. An expression sees its input as `.` and the DSL's arguments as variables
//! (`$input`, `$context`, `$workflow`, loop and error variables in scope). Filters that read
//! the clock, the environment or input outside the workflow (`now`, `env`, `input`, ...) are
//! not defined: replay must see the same values, so time comes from `$workflow` only.

use std::collections::BTreeMap;
use std::sync::Arc;

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{data, unwrap_valr, Compiler, Ctx, Vars};
use jaq_json::Val;
use serde_json::Value;

type Filter = jaq_core::Filter<data::JustLut<Val>>;

/// Filters of jq's standard library left out: they read the clock, the environment or the
/// process's input, or write to its error stream, none of which replay could repeat.
const UNSAFE: [&str; 7] = [
    "now",
    "env",
    "input",
    "inputs",
    "debug",
    "stderr",
    "input_filename",
];

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

/// The variables an expression sees, by name (with their `$`).
pub(crate) type Scope = BTreeMap<String, Value>;

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
        // Only the variables the code names: each one an evaluation hands to jaq is converted
        // first, and `$workflow` holds the whole input. (A name can only be used where the
        // code spells it, so a variable left out here is one the code does not use.)
        let vars: Vec<String> = vars
            .iter()
            .filter(|v| code.contains(v.as_str()))
            .cloned()
            .collect();
        let defs = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let funs = jaq_core::funs()
            .chain(jaq_std::funs().filter(|(name, _, _)| !UNSAFE.contains(name)))
            .chain(jaq_json::funs());
        let loader = Loader::new(defs);
        let arena = Arena::default();
        let modules = loader
            .load(&arena, File { code, path: () })
            .map_err(|errors| load_error(code, &errors))?;
        let filter = Compiler::default()
            .with_funs(funs)
            .with_global_vars(vars.iter().map(String::as_str))
            .compile(modules)
            .map_err(|errors| {
                let undefined: Vec<String> = errors
                    .iter()
                    .flat_map(|(_, e)| e.iter())
                    .map(|(name, what)| {
                        let hint = if UNSAFE.contains(name) {
                            " (not available in workflows: replay could not repeat it)"
                        } else {
                            ""
                        };
                        format!("undefined {} `{name}`{hint}", what.as_str())
                    })
                    .collect();
                undefined.join("; ")
            })?;
        Ok(Expr {
            code: code.to_string(),
            filter: Arc::new(filter),
            vars,
        })
    }

    /// Runs the expression on `input` with `scope`: its first output, `null` when it has
    /// none.
    pub(crate) fn eval(&self, input: &Value, scope: &Scope) -> Result<Value, String> {
        let vars: Vec<Val> = self
            .vars
            .iter()
            .map(|name| to_val(scope.get(name).unwrap_or(&Value::Null)))
            .collect::<Result<_, _>>()?;
        let ctx = Ctx::<data::JustLut<Val>>::new(&self.filter.lut, Vars::new(vars));
        let mut outputs = self.filter.id.run((ctx, to_val(input)?)).map(unwrap_valr);
        match outputs.next() {
            None => Ok(Value::Null),
            Some(Ok(v)) => from_val(&v),
            Some(Err(e)) => Err(format!("`{}` failed: {e}", self.code)),
        }
    }
}

fn to_val(v: &Value) -> Result<Val, String> {
    serde_json::from_value(v.clone()).map_err(|e| format!("cannot give {v} to jq: {e}"))
}

fn from_val(v: &Val) -> Result<Value, String> {
    serde_json::from_str(&v.to_string()).map_err(|e| format!("jq gave {v}, not JSON: {e}"))
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
        let scope = Scope::from([("$context".to_string(), json!({"fee": 2}))]);
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
            e.contains("undefined filter `now`") && e.contains("replay"),
            "{e}"
        );
        let e = Expr::compile("$nope", &vars(&["$input"])).unwrap_err();
        assert!(e.contains("undefined variable `$nope`"), "{e}");
        let e = Expr::compile(".a | error(\"boom\")", &[]).unwrap();
        let failed = e.eval(&json!({"a": 1}), &Scope::new()).unwrap_err();
        assert!(failed.contains("boom"), "{failed}");
    }

    #[test]
    fn only_dollar_braces_mark_an_expression() {
        assert_eq!(strip("${ .a }"), Some(".a"));
        assert_eq!(strip(" ${.a} "), Some(".a"));
        assert_eq!(strip(".a"), None);
        assert_eq!(strip("$.a"), None);
    }
}
