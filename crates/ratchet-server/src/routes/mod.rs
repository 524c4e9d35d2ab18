//! The routes, one file per resource.

mod document;
mod events;
mod instance_stream;
mod instances;
mod queues;
mod schedules;
mod stats;
mod system;
mod tasks;
use ratchet_api::text;
mod work;
mod workers;
mod workflows;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, StatusCode};
use axum::Router;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::problem::Problem;
use crate::state::ServerState;

/// What the OpenAPI document says of the API as a whole.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Ratchet",
        description = "Durable workflows, a task queue and an event store on PostgreSQL or SQLite. \
                       Errors are application/problem+json (RFC 9457) with a stable `type`.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    modifiers(&BearerTokens),
    // The strings the API checks: routes name some only in their path or headers, where
    // utoipa does not collect what they name.
    components(schemas(
        text::Identifier, text::ScheduleName, text::QueueName, text::InstanceId,
        text::EventType, text::Tag, text::TypeList, text::TagList, text::Time,
        text::HistoryPosition, text::StatusList, text::TaskStateList, text::Key
    )),
    tags(
        (name = "instances", description = "Orchestration instances: start, inspect, steer, wait"),
        (name = "tasks", description = "Standalone tasks: enqueue, inspect, steer, wait"),
        (name = "queues", description = "Task queues: depths, pause, resume, limits"),
        (name = "events", description = "The event store: append, read, follow"),
        (name = "workflows", description = "Declarative workflow definitions: apply, validate, list, read"),
        (name = "schedules", description = "Schedules: cron expressions and intervals that start work, once per tick"),
        (name = "workers", description = "Workers in other processes: claim attempts of tasks and activities, renew their leases, report their ends"),
        (name = "system", description = "Health and what this server runs")
    )
)]
struct ApiDoc;

/// The bearer tokens of `ratchet server --auth`.
struct BearerTokens;

impl utoipa::Modify for BearerTokens {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
        let mut scheme = Http::new(HttpAuthScheme::Bearer);
        scheme.description = Some(
            "A token from `ratchet tokens create`, with the scope the route needs: read for \
             GET, write for changes to work, admin for queues and discards. A missing, unknown \
             or revoked token gets 401 (`unauthorized`), one without the scope 403 \
             (`forbidden`)."
                .to_string(),
        );
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", SecurityScheme::Http(scheme));
    }
}

/// Every route with its OpenAPI description.
fn documented() -> OpenApiRouter<ServerState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(instances::routes())
        .merge(instance_stream::routes())
        .merge(tasks::routes())
        .merge(queues::routes())
        .merge(events::routes())
        .merge(system::routes())
        .merge(stats::routes())
        .merge(workers::routes())
        .merge(work::routes())
        .merge(workflows::routes())
        .merge(schedules::routes())
}

/// The OpenAPI 3.1 document of the API as a server with `--auth` serves it at
/// `/openapi.json` (every route but the probes and `/v1/whoami` asks for a bearer token),
/// generated from its handlers and types; `docs/openapi.json` is a copy a test keeps in
/// sync. A server without tokens serves it without the security requirement and the 401s.
pub fn openapi() -> utoipa::openapi::OpenApi {
    document::complete(documented().into_openapi(), true)
}

/// The API's router on `state`: every route under `/v1`, `/healthz`, `/readyz`,
/// `/openapi.json` and `/metrics`, and the web console at `/`.
pub fn router(state: ServerState) -> Router {
    let limit = state.limits.max_body_bytes;
    let (routes, document) = documented().split_for_parts();
    let document = document::complete(document, state.auth);
    // Written once: each request (and each clone of the route) shares the bytes.
    let document = axum::body::Bytes::from(serde_json::to_vec(&document).unwrap_or_default());
    routes
        .route(
            "/openapi.json",
            axum::routing::get(move || {
                let document = document.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], document) }
            }),
        )
        .route("/metrics", axum::routing::get(crate::metrics::render))
        // After the routes: each sees which one matched. The last added runs first, so a
        // refused token is counted too, inside the request's span.
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::check,
        ))
        .route_layer(axum::middleware::from_fn(crate::metrics::track))
        .route_layer(axum::middleware::from_fn(crate::trace::span))
        // After the layers: the console's files are public (the page asks for a token when
        // the server does), and are neither API calls to count nor to trace.
        .merge(crate::console::routes())
        .fallback(|| async { Problem::not_found("no such route") })
        .method_not_allowed_fallback(|| async {
            Problem::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method-not-allowed",
                "Method not allowed",
                "this route does not take this method",
            )
        })
        .layer(DefaultBodyLimit::max(limit))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::extract::declared_length,
        ))
        .layer(axum::middleware::map_response(crate::problem::ensure))
        // Outermost: a request for another host is refused before anything else.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::local::check,
        ))
        .with_state(state)
}

/// A page size asked for, or `default`, within the server's limit.
pub(crate) fn page_size(
    asked: Option<u32>,
    default: u32,
    state: &ServerState,
) -> Result<u32, Problem> {
    let max = state.limits.max_page;
    match asked {
        None => Ok(default.min(max)),
        Some(0) => Err(Problem::invalid("limit must be at least 1").field("limit")),
        Some(n) if n > max => Err(
            Problem::invalid(format!("limit {n} is over the most of {max}"))
                .field("limit")
                .limit(u64::from(max)),
        ),
        Some(n) => Ok(n),
    }
}

/// How long a wait may hold its request: `timeout_ms` (default 30 s) up to the server's
/// limit; a number past 2^63 - 1 is refused, as the document's `int64` says.
pub(crate) fn wait_time(
    timeout_ms: Option<u64>,
    state: &ServerState,
) -> Result<std::time::Duration, Problem> {
    let ms = timeout_ms.unwrap_or(30_000);
    if i64::try_from(ms).is_err() {
        return Err(Problem::invalid(format!("{ms} is past 2^63 - 1")).field("timeout_ms"));
    }
    Ok(std::time::Duration::from_millis(ms).min(state.limits.max_wait))
}
