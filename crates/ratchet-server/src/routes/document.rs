//! The OpenAPI document beyond what each route declares: the answers any route can give (a
//! malformed request, a body too large, a token refused, a server at its limits), stated
//! once here instead of on every route, and whether a token is asked for.

use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::path::{Operation, PathItem};
use utoipa::openapi::schema::{ArrayItems, KnownFormat, SchemaFormat, SchemaType, Type};
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, Required, ResponseBuilder, Schema};
use utoipa::Number;

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
    integers_as_read(doc)
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

/// `doc` with each integer's range as the server reads it: an unsigned 32-bit field (which
/// utoipa calls `int32`, whose range stops at 2^31 - 1) is an `int64` of at most 2^32 - 1.
/// (A 64-bit one is read up to 2^63 - 1, as `int64` says: larger ones are refused.)
fn integers_as_read(mut doc: OpenApi) -> OpenApi {
    if let Some(components) = &mut doc.components {
        components.schemas.values_mut().for_each(widen);
    }
    let components = doc.components.clone().unwrap_or_default();
    for item in doc.paths.paths.values_mut() {
        for op in operations(item) {
            for p in op.parameters.iter_mut().flatten() {
                p.schema.iter_mut().for_each(widen);
                if p.parameter_in == ParameterIn::Header {
                    // A header is absent or a text: utoipa calls an optional one nullable.
                    // Its schema is spelled out where it is used, for tools that read a
                    // header's schema there only.
                    p.schema = p
                        .schema
                        .take()
                        .map(not_null)
                        .map(|s| inline(s, &components));
                }
            }
            if let Some(body) = &mut op.request_body {
                for content in body.content.values_mut() {
                    content.schema.iter_mut().for_each(widen);
                }
            }
        }
    }
    doc
}

/// Widens every unsigned `int32` in `schema` (see [`integers_as_read`]).
fn widen(schema: &mut RefOr<Schema>) {
    let RefOr::T(schema) = schema else {
        return;
    };
    match schema {
        Schema::Object(o) => {
            let int32 = matches!(
                o.format,
                Some(SchemaFormat::KnownFormat(KnownFormat::Int32))
            );
            let unsigned = match &o.minimum {
                Some(Number::UInt(_)) => true,
                Some(Number::Int(n)) => *n >= 0,
                Some(Number::Float(f)) => *f >= 0.0,
                None => false,
            };
            if int32 && unsigned {
                o.format = Some(SchemaFormat::KnownFormat(KnownFormat::Int64));
                o.maximum.get_or_insert(Number::UInt(u32::MAX as usize));
            }
            o.properties.values_mut().for_each(widen);
        }
        Schema::Array(a) => {
            if let ArrayItems::RefOrSchema(items) = &mut a.items {
                widen(items);
            }
        }
        Schema::OneOf(c) => c.items.iter_mut().for_each(widen),
        Schema::AllOf(c) => c.items.iter_mut().for_each(widen),
        Schema::AnyOf(c) => c.items.iter_mut().for_each(widen),
        _ => {}
    }
}

/// `schema` without its `null`: `oneOf [null, X]` is `X`, `[T, null]` is `T`.
fn not_null(schema: RefOr<Schema>) -> RefOr<Schema> {
    let is_null = |s: &RefOr<Schema>| matches!(s, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null));
    match schema {
        RefOr::T(Schema::OneOf(mut one)) if one.items.iter().any(is_null) => {
            one.items.retain(|s| !is_null(s));
            match one.items.len() {
                1 => one.items.remove(0),
                _ => RefOr::T(Schema::OneOf(one)),
            }
        }
        RefOr::T(Schema::Object(mut o)) => {
            if let SchemaType::Array(types) = &o.schema_type {
                let kept: Vec<Type> = types
                    .iter()
                    .filter(|t| **t != Type::Null)
                    .cloned()
                    .collect();
                if kept.len() == 1 {
                    o.schema_type = SchemaType::Type(kept[0].clone());
                }
            }
            RefOr::T(Schema::Object(o))
        }
        other => other,
    }
}

/// `schema` itself when it refers to one of `components`.
fn inline(schema: RefOr<Schema>, components: &utoipa::openapi::Components) -> RefOr<Schema> {
    match &schema {
        RefOr::Ref(r) => r
            .ref_location
            .strip_prefix("#/components/schemas/")
            .and_then(|name| components.schemas.get(name))
            .cloned()
            .unwrap_or(schema),
        RefOr::T(_) => schema,
    }
}
