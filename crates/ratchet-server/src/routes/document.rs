//! The OpenAPI document beyond what each route declares: the answers any route can give (a
//! malformed request, a body too large, a token refused, a server at its limits), stated
//! once here instead of on every route, and whether a token is asked for.

use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, Required, ResponseBuilder};

/// Routes that ask for no token, whatever the server (see `auth::public`).
const PUBLIC: [&str; 3] = ["/healthz", "/readyz", "/v1/whoami"];

/// `doc` with every answer a route can give listed, and its security as a server with
/// (`auth`) or without tokens has it.
pub(crate) fn complete(mut doc: OpenApi, auth: bool) -> OpenApi {
    for (path, item) in &mut doc.paths.paths {
        let public = PUBLIC.contains(&path.as_str());
        for op in operations(item) {
            describe(op, auth, public);
            if public {
                // An empty list: this route asks for nothing, whatever the document's default.
                op.security = Some(Vec::new());
            }
        }
    }
    doc.security = auth.then(|| vec![SecurityRequirement::new("bearer", Vec::<String>::new())]);
    doc
}

fn operations(item: &mut PathItem) -> impl Iterator<Item = &mut Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.patch,
        &mut item.head,
        &mut item.options,
    ]
    .into_iter()
    .filter_map(Option::as_mut)
}

/// Adds the answers `op` can give that it does not list already, on a server with tokens
/// (`auth`) or without, for a route that asks for none (`public`) or not.
fn describe(op: &mut Operation, auth: bool, public: bool) {
    let takes_input =
        op.parameters.as_ref().is_some_and(|p| !p.is_empty()) || op.request_body.is_some();
    if takes_input {
        add(op, "400", "Malformed JSON, query or path");
        add(op, "422", "A value is not acceptable; `field` names it");
    }
    if let Some(body) = &op.request_body {
        let required = matches!(body.required, Some(Required::True));
        add(
            op,
            "413",
            "The body or batch is over its limit; `limit` says it",
        );
        if required {
            add(op, "415", "The body is not JSON");
        }
    }
    if auth && !public {
        add(
            op,
            "401",
            "No bearer token, or one unknown or revoked (`unauthorized`)",
        );
        add(
            op,
            "403",
            "The token lacks the scope this route needs (`forbidden`)",
        );
    } else if !auth {
        // Without tokens nothing answers 401 (`/v1/whoami` lists it for a server with them).
        op.responses.responses.remove("401");
        add(
            op,
            "403",
            "A server without tokens on a loopback address answers its own host and origin \
             only (`forbidden-host`, `forbidden-origin`)",
        );
    }
    add(
        op,
        "503",
        "The database is out of reach, or the server holds its most connections; \
         `Retry-After` says when to try again",
    );
}

/// Lists the answer `status` as a problem, unless `op` lists it already.
fn add(op: &mut Operation, status: &str, description: &str) {
    let responses = &mut op.responses.responses;
    if responses.contains_key(status) {
        return;
    }
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("ProblemBody")))
        .build();
    let response = ResponseBuilder::new()
        .description(description)
        .content("application/problem+json", content)
        .build();
    responses.insert(status.to_string(), RefOr::T(response));
}
