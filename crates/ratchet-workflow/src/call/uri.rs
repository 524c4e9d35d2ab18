//! URI templates (RFC 6570) of `endpoint.uri`, expanded from the task's input: the DSL's
//! "simple interpolation" (`/pet/{petId}` takes `.petId`). Parsing and expansion are
//! iri-string's, which implements the whole RFC and checks a template before it is used.

use iri_string::spec::UriSpec;
use iri_string::template::simple_context::{SimpleContext, Value as Var};
use iri_string::template::UriTemplateStr;
use serde_json::Value;

/// Checks a URI template: `Err` says what is wrong.
pub(crate) fn check(template: &str) -> Result<(), String> {
    UriTemplateStr::new(template)
        .map(|_| ())
        .map_err(|e| format!("`{template}` is not a URI template: {e}"))
}

/// Expands `template` with the top-level fields of `input` as its variables (strings and
/// numbers as written, lists as lists, objects as key/value pairs; null as undefined).
/// Only the fields the template names are converted: a call's cost does not grow with the
/// rest of its input.
pub(crate) fn expand(template: &str, input: &Value) -> Result<String, String> {
    let parsed = UriTemplateStr::new(template)
        .map_err(|e| format!("`{template}` is not a URI template: {e}"))?;
    let mut context = SimpleContext::new();
    if let Value::Object(fields) = input {
        for name in parsed.variables() {
            let name = name.as_str();
            if let Some(var) = fields.get(name).and_then(variable) {
                context.insert(name, var);
            }
        }
    }
    parsed
        .expand::<UriSpec, _>(&context)
        .map(|e| e.to_string())
        .map_err(|e| format!("expanding `{template}`: {e}"))
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
    fn a_broken_template_is_refused() {
        assert!(check("https://x.test/{unclosed").is_err());
        assert!(check("https://x.test/{a b}").is_err());
        assert!(check("https://x.test/{a}").is_ok());
    }
}
