//! OpenAPI documents (3.x, and Swagger 2.0 which the DSL's examples use): an operation found
//! by its `operationId`, and the call's `parameters` placed where the operation says (path,
//! query, header, body).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::http::Request;

/// Where a parameter goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum In {
    Path,
    Query,
    Header,
    Body,
}

/// One operation of a document.
#[derive(Clone, Debug)]
struct Operation {
    method: String,
    path: String,
    parameters: Vec<(String, In)>,
    /// It takes a request body (OpenAPI 3's `requestBody`, or a Swagger 2.0 `in: body`).
    body: bool,
}

/// A document, read: where its server is and its operations by id.
#[derive(Clone, Debug)]
pub(crate) struct Document {
    base: String,
    operations: BTreeMap<String, Operation>,
}

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

impl Document {
    /// Reads a document fetched from `uri`: `content` is its JSON, or its text (YAML).
    pub(crate) fn read(uri: &str, content: &Value) -> Result<Document, String> {
        let doc = match content {
            Value::String(text) => crate::compile::parse_document(text)
                .map_err(|e| format!("it reads as neither JSON nor YAML: {e}"))?,
            other => other.clone(),
        };
        let base = if doc.get("swagger").is_some() {
            swagger_base(uri, &doc)?
        } else if doc.get("openapi").is_some() {
            openapi_base(uri, &doc)?
        } else {
            return Err("it has neither `openapi` nor `swagger`: not an OpenAPI document".into());
        };
        let mut operations = BTreeMap::new();
        let paths = doc
            .get("paths")
            .and_then(Value::as_object)
            .ok_or("it has no `paths`")?;
        for (path, item) in paths {
            let shared = params(item.get("parameters"));
            for method in METHODS {
                let Some(op) = item.get(method) else { continue };
                let Some(id) = op.get("operationId").and_then(Value::as_str) else {
                    continue;
                };
                let mut parameters = shared.clone();
                for (name, place) in params(op.get("parameters")) {
                    parameters.retain(|(n, p)| !(n == &name && *p == place));
                    parameters.push((name, place));
                }
                let body = op.get("requestBody").is_some()
                    || parameters.iter().any(|(_, p)| *p == In::Body);
                operations.insert(
                    id.to_string(),
                    Operation {
                        method: method.to_ascii_uppercase(),
                        path: path.clone(),
                        parameters,
                        body,
                    },
                );
            }
        }
        Ok(Document { base, operations })
    }

    /// The request for `operation_id` with these `parameters`: each named parameter of the
    /// operation where it goes; for an operation with a body, the parameter of the body (a
    /// Swagger 2.0 `in: body`, or `body`) or else every parameter the operation does not name.
    pub(crate) fn request(
        &self,
        operation_id: &str,
        parameters: &Map<String, Value>,
    ) -> Result<Request, String> {
        let op = self
            .operations
            .get(operation_id)
            .ok_or_else(|| format!("the document has no operation `{operation_id}`"))?;
        let mut path = op.path.clone();
        let mut query = BTreeMap::new();
        let mut headers = BTreeMap::new();
        let mut body = None;
        let mut named = Vec::new();
        for (name, place) in &op.parameters {
            let Some(value) = parameters.get(name) else {
                if *place == In::Path {
                    return Err(format!(
                        "operation `{operation_id}` needs the path parameter `{name}`"
                    ));
                }
                continue;
            };
            named.push(name.as_str());
            match place {
                In::Path => {
                    path = path.replace(&format!("{{{name}}}"), &encode_segment(&text(value)));
                }
                In::Query => {
                    query.insert(name.clone(), text(value));
                }
                In::Header => {
                    headers.insert(name.clone(), text(value));
                }
                In::Body => body = Some(value.clone()),
            }
        }
        if op.body && body.is_none() {
            body = match parameters.get("body") {
                Some(b) => Some(b.clone()),
                None => {
                    let rest: Map<String, Value> = parameters
                        .iter()
                        .filter(|(k, _)| !named.contains(&k.as_str()))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    (!rest.is_empty()).then_some(Value::Object(rest))
                }
            };
        }
        Ok(Request {
            method: op.method.clone(),
            uri: format!("{}{}", self.base.trim_end_matches('/'), path),
            headers,
            query,
            body,
            auth: None,
        })
    }
}

fn params(list: Option<&Value>) -> Vec<(String, In)> {
    let Some(Value::Array(items)) = list else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|p| {
            let name = p.get("name")?.as_str()?.to_string();
            let place = match p.get("in")?.as_str()? {
                "path" => In::Path,
                "query" => In::Query,
                "header" => In::Header,
                "body" => In::Body,
                _ => return None,
            };
            Some((name, place))
        })
        .collect()
}

/// A parameter's value as text: strings as they are, lists comma-separated, the rest as JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// A path parameter's value, percent-encoded as one segment.
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The document's own location, to resolve a relative server against.
fn origin(uri: &str) -> Result<reqwest::Url, String> {
    reqwest::Url::parse(uri).map_err(|e| format!("`{uri}` is not a URL: {e}"))
}

/// Swagger 2.0: `schemes` (https preferred), `host` (else the document's), `basePath`.
fn swagger_base(uri: &str, doc: &Value) -> Result<String, String> {
    let from = origin(uri)?;
    let schemes: Vec<&str> = doc
        .get("schemes")
        .and_then(Value::as_array)
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let scheme = if schemes.is_empty() || schemes.contains(&from.scheme()) {
        from.scheme()
    } else if schemes.contains(&"https") {
        "https"
    } else {
        schemes[0]
    };
    let host = match doc.get("host").and_then(Value::as_str) {
        Some(h) => h.to_string(),
        None => match (from.host_str(), from.port()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            (None, _) => return Err("it names no `host` and was not read from one".into()),
        },
    };
    let base_path = doc.get("basePath").and_then(Value::as_str).unwrap_or("");
    Ok(format!("{scheme}://{host}{base_path}"))
}

/// OpenAPI 3: the first of `servers` with its variables' defaults, resolved against the
/// document's URI; the document's own origin without servers.
fn openapi_base(uri: &str, doc: &Value) -> Result<String, String> {
    let from = origin(uri)?;
    let Some(server) = doc
        .get("servers")
        .and_then(Value::as_array)
        .and_then(|s| s.first())
    else {
        return Ok(from.origin().ascii_serialization());
    };
    let mut url = server
        .get("url")
        .and_then(Value::as_str)
        .unwrap_or("/")
        .to_string();
    if let Some(Value::Object(vars)) = server.get("variables") {
        for (name, var) in vars {
            if let Some(default) = var.get("default").and_then(Value::as_str) {
                url = url.replace(&format!("{{{name}}}"), default);
            }
        }
    }
    from.join(&url)
        .map(|u| u.to_string())
        .map_err(|e| format!("its server `{url}` is not a URL: {e}"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn swagger() -> Value {
        json!({
            "swagger": "2.0",
            "host": "pets.test",
            "basePath": "/v2",
            "schemes": ["https", "http"],
            "paths": {
                "/pet/{petId}": {"get": {"operationId": "getPetById",
                    "parameters": [{"name": "petId", "in": "path"}]}},
                "/pet/findByStatus": {"get": {"operationId": "findPetsByStatus",
                    "parameters": [{"name": "status", "in": "query"}]}},
                "/pet": {"post": {"operationId": "addPet",
                    "parameters": [{"name": "pet", "in": "body"}]}}
            }
        })
    }

    #[test]
    fn swagger_operations_place_their_parameters() {
        let doc = Document::read("https://pets.test/v2/swagger.json", &swagger()).unwrap();
        let params = |v: Value| v.as_object().unwrap().clone();
        let r = doc
            .request("getPetById", &params(json!({"petId": 1})))
            .unwrap();
        assert_eq!(
            (r.method.as_str(), r.uri.as_str()),
            ("GET", "https://pets.test/v2/pet/1")
        );
        let r = doc
            .request("findPetsByStatus", &params(json!({"status": "available"})))
            .unwrap();
        assert_eq!(r.query.get("status").map(String::as_str), Some("available"));
        let r = doc
            .request("addPet", &params(json!({"pet": {"name": "Rex"}})))
            .unwrap();
        assert_eq!(r.body, Some(json!({"name": "Rex"})));
        assert!(doc.request("nope", &Map::new()).is_err());
        assert!(doc.request("getPetById", &Map::new()).is_err());
    }

    #[test]
    fn openapi_3_servers_resolve_against_the_document() {
        let doc = json!({
            "openapi": "3.0.0",
            "servers": [{"url": "/api/{v}", "variables": {"v": {"default": "v3"}}}],
            "paths": {"/orders": {"post": {"operationId": "order", "requestBody": {}}}}
        });
        let doc = Document::read("http://127.0.0.1:9/openapi.json", &doc).unwrap();
        let params = json!({"item": "x"}).as_object().unwrap().clone();
        let r = doc.request("order", &params).unwrap();
        assert_eq!(r.uri, "http://127.0.0.1:9/api/v3/orders");
        assert_eq!(r.body, Some(json!({"item": "x"})));
    }

    #[test]
    fn what_is_not_a_document_is_refused() {
        assert!(Document::read("https://x.test/d", &json!({"paths": {}})).is_err());
        assert!(Document::read("https://x.test/d", &json!("openapi: 3.0.0\n")).is_err());
    }
}
