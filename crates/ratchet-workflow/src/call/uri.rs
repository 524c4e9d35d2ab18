//! URI templates (RFC 6570) of `endpoint.uri`, expanded from the task's input: the DSL's
//! "simple interpolation" (`/pet/{petId}` takes `.petId`). Parsing and expansion are
//! iri-string's, which implements the whole RFC and checks a template before it is used.

use iri_string::spec::UriSpec;
use iri_string::template::simple_context::{SimpleContext, Value as Var};
use iri_string::template::UriTemplateStr;
use serde_json::Value;

use crate::expr::{short_code, Capped};

/// The longest URI a template may expand to (servers accept far less; a call's whole input
/// is held to the runtime's payload limit, 1 MiB by default, too).
pub(crate) const MAX_URI_BYTES: usize = 1 << 20;

/// Checks a URI template: `Err` says what is wrong.
pub(crate) fn check(template: &str) -> Result<(), String> {
    UriTemplateStr::new(template)
        .map(|_| ())
        .map_err(|e| not_a_template(template, e))
}

/// Errors name a template by its first characters: one of a definition's limit's length
/// would otherwise be written out whole in the message, the detail and the log.
fn not_a_template(template: &str, e: impl std::fmt::Display) -> String {
    format!("`{}` is not a URI template: {e}", short_code(template))
}

/// Expands `template` with the top-level fields of `input` as its variables (strings and
/// numbers as written, lists as lists, objects as key/value pairs; null as undefined).
/// Only the fields the template names are converted: a call's cost does not grow with the
/// rest of its input.
pub(crate) fn expand(template: &str, input: &Value) -> Result<String, String> {
    use std::fmt::Write as _;

    let parsed = UriTemplateStr::new(template).map_err(|e| not_a_template(template, e))?;
    let mut context = SimpleContext::new();
    if let Value::Object(fields) = input {
        for var in parsed.variables() {
            // A name the template repeats is converted once.
            if context.get(var).is_some() {
                continue;
            }
            let name = var.as_str();
            if let Some(value) = fields.get(name).and_then(variable) {
                context.insert(name, value);
            }
        }
    }
    let expanded = parsed
        .expand::<UriSpec, _>(&context)
        .map_err(|e| format!("expanding `{}`: {e}", short_code(template)))?;
    // Written through a cap: a template repeating a large variable would otherwise build a
    // URI of gigabytes before anything could refuse it.
    let mut uri = Capped::new(MAX_URI_BYTES);
    if write!(uri, "{expanded}").is_err() {
        return Err(if uri.cut {
            format!(
                "expanding `{}` gives a URI longer than {MAX_URI_BYTES} bytes",
                short_code(template)
            )
        } else {
            format!("expanding `{}` failed", short_code(template))
        });
    }
    Ok(uri.text)
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn variable(v: &Value) -> Option<Var> {
    match v {
        Value::Array(items) => Some(Var::List(items.iter().filter_map(scalar).collect())),
        Value::Object(fields) => Some(Var::Assoc(
            fields
                .iter()
                .filter_map(|(k, v)| scalar(v).map(|v| (k.clone(), v)))
                .collect(),
        )),
        other => scalar(other).map(Var::String),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn top_level_fields_fill_the_template() {
        let input = json!({"status": "sold out", "petId": 7, "tags": ["a", "b"]});
        assert_eq!(
            expand("https://x.test/pet/findByStatus?status={status}", &input).unwrap(),
            "https://x.test/pet/findByStatus?status=sold%20out"
        );
        assert_eq!(
            expand("https://x.test/pet/{petId}{?tags*}", &input).unwrap(),
            "https://x.test/pet/7?tags=a&tags=b"
        );
        // A variable the input lacks expands to nothing.
        assert_eq!(
            expand("https://x.test/{missing}", &input).unwrap(),
            "https://x.test/"
        );
    }

    #[test]
    fn a_variable_named_twice_and_an_object_expand_as_the_rfc_says() {
        let input = json!({
            "id": 7,
            "keys": {"a": "1", "b": "x y"},
            "idle": "not named",
        });
        assert_eq!(
            expand("https://x.test/{id}/{id}{?keys*}", &input).unwrap(),
            "https://x.test/7/7?a=1&b=x%20y"
        );
        assert_eq!(
            expand("https://x.test/{keys}", &input).unwrap(),
            "https://x.test/a,1,b,x%20y"
        );
    }

    #[test]
    fn a_uri_past_the_limit_is_refused_not_built() {
        let input = json!({"a": "a".repeat(100_000)});
        let template = format!("https://x.test/{}", "{a}".repeat(20_000));
        let refused = expand(&template, &input).unwrap_err();
        assert!(
            refused.contains(&format!("longer than {MAX_URI_BYTES} bytes")),
            "{refused}"
        );
        // The 60 KB template is named by its start, not written out again.
        assert!(
            refused.starts_with("expanding `https://x.test/{a}{a}"),
            "{refused}"
        );
        assert!(refused.len() < 200, "{} bytes", refused.len());
        // Just under the limit, it is built whole.
        let fits = format!("https://x.test/{}", "{a}".repeat(10));
        assert_eq!(expand(&fits, &input).unwrap().len(), 15 + 1_000_000);
    }

    #[test]
    fn a_broken_template_is_refused() {
        assert!(check("https://x.test/{unclosed").is_err());
        assert!(check("https://x.test/{a b}").is_err());
        assert!(check("https://x.test/{a}").is_ok());
        let long = format!("https://x.test/{}{{unclosed", "a".repeat(60_000));
        let refused = check(&long).unwrap_err();
        assert!(refused.starts_with("`https://x.test/aaa"), "{refused}");
        assert!(refused.contains("...` is not a URI template"), "{refused}");
        assert!(refused.len() < 300, "{} bytes", refused.len());
    }
}
